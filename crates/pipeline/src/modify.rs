//! Changing what the pipeline holds: flow-mod (spec §6.4), group-mod, meter-mod, table features,
//! expiry — and `Pipeline::remove_flow`, the one way a flow leaves its table, which names why.
//!
//! The flow-removed messages a change owes go to a [`Removed`] sink one by one, as each flow
//! leaves: a delete of a million flows holds none of them itself (as a list they took some
//! 325 MiB, each message owning its match). The `Vec`-returning forms collect them, for tests.

use std::sync::Arc;

use ofp::error::{ErrorCode, FlowModFailed};
use ofp::message::{flow_mod_command as cmd, flow_mod_flags, flow_removed_reason, FlowMod, FlowRemoved, OFPTT_ALL};
use ofp::{Action, GroupMod, MeterMod};
use packet::FlowKey;

use crate::classifier::RuleId;
use crate::flow::{check, FlowActions, FlowEntry, Limits, Nanos, StoredMatch};
use crate::group::GroupChange;
use crate::meter::MeterChange;
use crate::prepare::{Parts, PreparedFlowMod};
use crate::revalidate::Change;
use crate::{cache, features, flow, normal, FlowTable, Pipeline, DEFAULT_MAX_FLOWS, PENDING_KEPT};

/// Where a change's flow-removed messages go, in the order the flows left.
pub type Removed<'a> = &'a mut dyn FnMut(FlowRemoved);

/// Runs `change` with a sink that collects its flow-removed messages.
fn collected<T>(change: impl FnOnce(Removed) -> T) -> (T, Vec<FlowRemoved>) {
    let mut out = Vec::new();
    let done = change(&mut |r| out.push(r));
    (done, out)
}

/// Why a flow left its table: the one list every removal path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// A delete flow-mod.
    Delete,
    IdleTimeout,
    HardTimeout,
    /// Made room in a full table.
    Eviction,
    /// The group it used was deleted.
    GroupDelete,
    /// The meter it used was deleted.
    MeterDelete,
    /// An identical flow replaced it (no flow-removed message: the flow goes on).
    Replaced,
}

impl Removal {
    /// The OpenFlow 1.3 `ofp_flow_removed_reason`, or `None` when no message is owed. 1.3 has no
    /// codes for eviction and meter deletion (1.4 added them): they report as a delete.
    fn reason(self) -> Option<u8> {
        Some(match self {
            Removal::Delete | Removal::Eviction | Removal::MeterDelete => flow_removed_reason::DELETE,
            Removal::IdleTimeout => flow_removed_reason::IDLE_TIMEOUT,
            Removal::HardTimeout => flow_removed_reason::HARD_TIMEOUT,
            Removal::GroupDelete => flow_removed_reason::GROUP_DELETE,
            Removal::Replaced => return None,
        })
    }
}

fn removed(f: &FlowEntry, reason: u8, now: Nanos) -> FlowRemoved {
    let (duration_sec, duration_nsec) = f.duration(now);
    FlowRemoved {
        cookie: f.cookie,
        priority: f.priority,
        reason,
        table_id: f.table_id,
        duration_sec,
        duration_nsec,
        idle_timeout: f.idle_timeout,
        hard_timeout: f.hard_timeout,
        packet_count: f.packet_count,
        byte_count: f.byte_count,
        match_: f.match_.to_match(),
    }
}

impl Pipeline {
    /// The one way a flow leaves the pipeline: out of its table, with the flow-removed message
    /// owed to controllers if the flow asked for one.
    fn remove_flow(&mut self, table: u8, id: RuleId, why: Removal, now: Nanos) -> Option<FlowRemoved> {
        let f = self.tables[table as usize].take(id)?;
        self.users.remove(table, id, &f);
        self.pending.push(Change::FlowChanged { table, id });
        // Applied as they come rather than after the whole change: a change is some 300 bytes,
        // and a delete of a million flows queued 280 MiB of them. The cache's entries go the same
        // (nothing is looked up meanwhile), and the caller's revalidation applies the rest.
        if self.pending.len() >= PENDING_KEPT {
            self.apply_pending();
        }
        let reason = why.reason()?;
        (f.flags & flow_mod_flags::SEND_FLOW_REM != 0).then(|| removed(&f, reason, now))
    }

    /// The checks of an add's or modify's instructions that read the switch (groups, meters,
    /// tables); their compiled list, shared.
    fn limits_ok(&self, fm: &FlowMod, parts: &Parts) -> Result<Arc<FlowActions>, ErrorCode> {
        let instructions = parts.instructions();
        let table = &self.tables[fm.table_id as usize];
        if let Some(spec) = &table.spec {
            spec.check(&fm.match_, instructions, fm.priority == 0 && fm.match_.fields.is_empty())?;
        }
        let groups = |g: u32| self.groups.exists(g);
        let meters = |m: u32| self.meters.exists(m);
        let limits = Limits { n_tables: self.n_tables(), group_exists: &groups, meter_exists: &meters };
        let goto = check(fm.table_id, instructions, &limits)?;
        if goto.is_some_and(|t| !self.tables[t as usize].enabled) {
            return Err(ErrorCode::BadInstruction(ofp::error::BadInstruction::BadTableId));
        }
        Ok(parts.actions.clone().expect("an add's or modify's parts hold its actions"))
    }

    /// A table-features request with a body: the listed tables take the given features (and lose
    /// their flows); tables not listed leave the pipeline. All or nothing.
    pub fn set_table_features(&mut self, tables: &[ofp::TableFeatures]) -> Result<(), ErrorCode> {
        let n = self.n_tables();
        let mut specs = Vec::new();
        for t in tables {
            if specs.iter().any(|s: &features::TableSpec| s.features.table_id == t.table_id) {
                return Err(ErrorCode::TableFeaturesFailed(ofp::error::TableFeaturesFailed::BadArgument));
            }
            specs.push(features::TableSpec::from_request(t, n, DEFAULT_MAX_FLOWS)?);
        }
        self.users = Default::default();
        for (i, table) in self.tables.iter_mut().enumerate() {
            table.clear();
            match specs.iter().position(|s| s.features.table_id as usize == i) {
                Some(k) => {
                    let spec = specs[k].clone();
                    table.max_entries = spec.features.max_entries;
                    table.config = spec.features.config;
                    table.enabled = true;
                    table.spec = Some(spec);
                }
                None => {
                    table.enabled = false;
                    table.spec = None;
                }
            }
        }
        self.invalidate();
        Ok(())
    }

    /// Validates a packet-out's actions.
    pub fn check_packet_out(&self, actions: &[Action]) -> Result<(), ErrorCode> {
        let groups = |g: u32| self.groups.exists(g);
        let meters = |m: u32| self.meters.exists(m);
        let limits = Limits { n_tables: self.n_tables(), group_exists: &groups, meter_exists: &meters };
        flow::validate_actions(actions, true, &limits)
    }

    /// Applies a flow-mod (spec §6.4). Returns the flow-removed messages owed for deleted flows.
    pub fn flow_mod(&mut self, fm: &FlowMod, now: Nanos) -> Result<Vec<FlowRemoved>, ErrorCode> {
        let (done, out) = collected(|removed| self.flow_mod_into(fm, now, removed));
        done.map(|()| out)
    }

    /// Applies a flow-mod, each flow-removed message it owes going to `removed` as its flow
    /// leaves. On an error nothing changed and nothing went.
    pub fn flow_mod_into(&mut self, fm: &FlowMod, now: Nanos, removed: Removed) -> Result<(), ErrorCode> {
        let lists = &mut self.recent_actions;
        let parts = Parts::of(fm, || lists.share_copy(&fm.instructions), || StoredMatch::new(&fm.match_));
        self.apply_flow_mod(fm, parts, now, removed)
    }

    /// Applies a flow-mod whose pure part was done already (see `prepare.rs`): as
    /// [`Pipeline::flow_mod`] would the flow-mod it was made from.
    pub fn prepared_flow_mod(&mut self, p: PreparedFlowMod, now: Nanos) -> Result<Vec<FlowRemoved>, ErrorCode> {
        let (done, out) = collected(|removed| self.prepared_flow_mod_into(p, now, removed));
        done.map(|()| out)
    }

    /// [`Pipeline::prepared_flow_mod`], its flow-removed messages going to `removed`.
    pub fn prepared_flow_mod_into(
        &mut self,
        p: PreparedFlowMod,
        now: Nanos,
        removed: Removed,
    ) -> Result<(), ErrorCode> {
        self.apply_flow_mod(&p.fm, p.parts, now, removed)
    }

    fn apply_flow_mod(&mut self, fm: &FlowMod, parts: Parts, now: Nanos, removed: Removed) -> Result<(), ErrorCode> {
        let fail = |c| Err(ErrorCode::FlowModFailed(c));
        if fm.flags & !flow_mod_flags::ALL != 0 {
            return fail(FlowModFailed::BadFlags);
        }
        let deleting = matches!(fm.command, cmd::DELETE | cmd::DELETE_STRICT);
        match fm.command {
            cmd::ADD | cmd::MODIFY | cmd::MODIFY_STRICT | cmd::DELETE | cmd::DELETE_STRICT => {}
            _ => return fail(FlowModFailed::BadCommand),
        }
        let all_tables = fm.table_id == OFPTT_ALL;
        if (all_tables && !deleting)
            || (!all_tables && (fm.table_id >= self.n_tables() || !self.tables[fm.table_id as usize].enabled))
        {
            return fail(FlowModFailed::BadTableId);
        }
        parts.valid?;
        let (key, mask) = (parts.key, parts.mask);
        let priority = fm.priority as u32;
        match fm.command {
            cmd::ADD => {
                let actions = self.limits_ok(fm, &parts)?;
                let table = &mut self.tables[fm.table_id as usize];
                let existing = table.flows.find_exact(&key, &mask, priority);
                if fm.flags & flow_mod_flags::CHECK_OVERLAP != 0 && existing.is_none() && {
                    table.flows.project_overlapping(&mask, priority);
                    table.flows.overlapping(&key, &mask, priority)
                } {
                    return fail(FlowModFailed::Overlap);
                }
                if existing.is_none() && table.flows.len() as u32 >= table.max_entries {
                    let victim = if table.evict { table.eviction_victim() } else { None };
                    let Some(victim) = victim else {
                        table.full_refusals += 1;
                        return fail(FlowModFailed::TableFull);
                    };
                    table.evictions += 1;
                    if let Some(r) = self.remove_flow(fm.table_id, victim, Removal::Eviction, now) {
                        removed(r);
                    }
                }
                let (mut packets, mut bytes) = (0, 0);
                if let Some(id) = existing {
                    let old = self.tables[fm.table_id as usize].flows.get(id).unwrap();
                    if fm.flags & flow_mod_flags::RESET_COUNTS == 0 {
                        (packets, bytes) = (old.packet_count, old.byte_count);
                    }
                    self.remove_flow(fm.table_id, id, Removal::Replaced, now);
                }
                let table = &mut self.tables[fm.table_id as usize];
                let entry = FlowEntry {
                    table_id: fm.table_id,
                    priority: fm.priority,
                    match_: parts.stored.expect("an add with a valid match has its stored form"),
                    cookie: fm.cookie,
                    idle_timeout: fm.idle_timeout,
                    hard_timeout: fm.hard_timeout,
                    flags: fm.flags,
                    actions,
                    packet_count: packets,
                    byte_count: bytes,
                    created: now,
                    last_used: now,
                };
                let timeouts = [entry.idle_timeout, entry.hard_timeout];
                let id = table.put(&key, &mask, entry);
                self.users.add(fm.table_id, id, table.flows.get(id).unwrap());
                self.pending.push(Change::FlowAdded { table: fm.table_id, key, mask, priority: fm.priority });
                for t in timeouts.into_iter().filter(|&t| t != 0) {
                    self.expect_expiry(now + t as Nanos * 1_000_000_000);
                }
            }
            cmd::MODIFY | cmd::MODIFY_STRICT => {
                let actions = self.limits_ok(fm, &parts)?;
                let strict = fm.command == cmd::MODIFY_STRICT;
                let targets = Self::targets(&mut self.tables[fm.table_id as usize], fm, &key, &mask, strict);
                for &id in &targets {
                    self.pending.push(Change::FlowChanged { table: fm.table_id, id });
                }
                let table = &mut self.tables[fm.table_id as usize];
                for id in targets {
                    let f = table.flows.get_mut(id).unwrap();
                    self.users.remove(fm.table_id, id, f);
                    f.actions = actions.clone();
                    if fm.flags & flow_mod_flags::RESET_COUNTS != 0 {
                        f.packet_count = 0;
                        f.byte_count = 0;
                    }
                    self.users.add(fm.table_id, id, f);
                }
            }
            _ => {
                let strict = fm.command == cmd::DELETE_STRICT;
                let range =
                    if all_tables { 0..self.tables.len() } else { fm.table_id as usize..fm.table_id as usize + 1 };
                for t in range {
                    for id in Self::targets(&mut self.tables[t], fm, &key, &mask, strict) {
                        if let Some(r) = self.remove_flow(t as u8, id, Removal::Delete, now) {
                            removed(r);
                        }
                    }
                }
            }
        }
        self.revalidate();
        Ok(())
    }

    /// Flows a modify or delete applies to: by match (strictly or as a subset), cookie, and — for
    /// deletes — out_port and out_group.
    fn targets(table: &mut FlowTable, fm: &FlowMod, key: &FlowKey, mask: &FlowKey, strict: bool) -> Vec<RuleId> {
        let candidates: Vec<RuleId> = if strict {
            table.flows.find_exact(key, mask, fm.priority as u32).into_iter().collect()
        } else {
            table.flows.project_covered(mask);
            table.flows.covered_by(key, mask)
        };
        let deleting = matches!(fm.command, cmd::DELETE | cmd::DELETE_STRICT);
        candidates
            .into_iter()
            .filter(|&id| {
                let f = table.flows.get(id).unwrap();
                (f.cookie & fm.cookie_mask) == (fm.cookie & fm.cookie_mask)
                    && (!deleting || (f.outputs_to(fm.out_port) && f.uses_group(fm.out_group)))
            })
            .collect()
    }

    /// Removes flows (a deleted group's or meter's users), in table and id order.
    fn remove_flows(&mut self, mut flows: Vec<(u8, RuleId)>, why: Removal, now: Nanos, removed: Removed) {
        flows.sort_unstable();
        flows.dedup();
        for (t, id) in flows {
            if let Some(r) = self.remove_flow(t, id, why, now) {
                removed(r);
            }
        }
    }

    pub fn group_mod(&mut self, gm: &GroupMod, now: Nanos) -> Result<Vec<FlowRemoved>, ErrorCode> {
        let (done, out) = collected(|removed| self.group_mod_into(gm, now, removed));
        done.map(|()| out)
    }

    /// Applies a group-mod; a deleted group's flows' flow-removed messages go to `removed`.
    pub fn group_mod_into(&mut self, gm: &GroupMod, now: Nanos, removed: Removed) -> Result<(), ErrorCode> {
        let n_tables = self.n_tables();
        let meters = &self.meters;
        let change = self.groups.apply(gm, n_tables, &|m| meters.exists(m), now)?;
        match change {
            GroupChange::Deleted(ids) => {
                self.pending.extend(ids.iter().map(|&g| Change::Group(g)));
                let users = ids.iter().flat_map(|&g| self.users.of_group(g)).collect();
                self.remove_flows(users, Removal::GroupDelete, now, removed)
            }
            GroupChange::Added | GroupChange::Modified => self.pending.push(Change::Group(gm.group_id)),
        }
        self.revalidate();
        Ok(())
    }

    pub fn meter_mod(&mut self, mm: &MeterMod, now: Nanos) -> Result<Vec<FlowRemoved>, ErrorCode> {
        let (done, out) = collected(|removed| self.meter_mod_into(mm, now, removed));
        done.map(|()| out)
    }

    /// Applies a meter-mod; a deleted meter's flows' flow-removed messages go to `removed`.
    pub fn meter_mod_into(&mut self, mm: &MeterMod, now: Nanos, removed: Removed) -> Result<(), ErrorCode> {
        let change = self.meters.apply(mm.command, mm.flags, mm.meter_id, &mm.bands, now)?;
        match change {
            MeterChange::Deleted(ids) => {
                self.pending.extend(ids.iter().map(|&m| Change::Meter(m)));
                self.changed_meters.extend(&ids);
                let users = ids.iter().flat_map(|&m| self.users.of_meter(m)).collect();
                self.remove_flows(users, Removal::MeterDelete, now, removed)
            }
            MeterChange::Added | MeterChange::Modified => {
                self.pending.push(Change::Meter(mm.meter_id));
                self.changed_meters.push(mm.meter_id);
            }
        }
        self.revalidate();
        Ok(())
    }

    /// Removes flows whose idle or hard timeout has passed, ages learned addresses and sweeps the
    /// cache; then works out when the next of these can be due.
    pub fn expire(&mut self, now: Nanos) -> Vec<FlowRemoved> {
        collected(|removed| self.expire_into(now, removed)).1
    }

    /// [`Pipeline::expire`], the expired flows' flow-removed messages going to `removed`.
    pub fn expire_into(&mut self, now: Nanos, removed: Removed) {
        const SEC: Nanos = 1_000_000_000;
        let mut next = Nanos::MAX;
        for t in 0..self.tables.len() {
            if self.tables[t].timed == 0 {
                continue;
            }
            let mut gone = Vec::new();
            for (id, f) in self.tables[t].flows.iter() {
                let hard_at = (f.hard_timeout != 0).then(|| f.created + f.hard_timeout as Nanos * SEC);
                let idle_at = (f.idle_timeout != 0).then(|| f.last_used + f.idle_timeout as Nanos * SEC);
                if hard_at.is_some_and(|at| now >= at) {
                    gone.push((id, Removal::HardTimeout));
                } else if idle_at.is_some_and(|at| now >= at) {
                    gone.push((id, Removal::IdleTimeout));
                } else {
                    next = next.min(hard_at.unwrap_or(Nanos::MAX)).min(idle_at.unwrap_or(Nanos::MAX));
                }
            }
            for (id, why) in gone {
                if let Some(r) = self.remove_flow(t as u8, id, why, now) {
                    removed(r);
                }
            }
        }
        for (vlan, mac) in self.macs.age(now) {
            self.pending.push(Change::Address(vlan, mac));
        }
        self.revalidate();
        self.cache.sweep(now);
        if let Some(oldest) = self.macs.oldest() {
            next = next.min(oldest + normal::MAC_AGE);
        }
        if let Some(oldest) = self.cache.oldest_use() {
            // The sweep drops entries idle for longer than IDLE: the first one is due just after.
            next = next.min(oldest + cache::IDLE + 1);
        }
        self.next_expiry = next;
    }
}

#[cfg(test)]
mod tests {
    use ofp::message::{flow_mod_command as cmd, FlowMod};
    use ofp::oxm::{Field, Match};

    use crate::{Pipeline, PENDING_KEPT};

    fn udp_to(port: u16) -> FlowMod {
        let match_ = Match::new().with(Field::EthType, 0x800).with(Field::IpProto, 17).with(Field::UdpDst, port.into());
        FlowMod { priority: 100, match_, ..Default::default() }
    }

    #[test]
    fn a_flow_mods_change_reuses_the_room_and_a_mass_deletes_room_is_given_back() {
        let mut p = Pipeline::new(1);
        p.flow_mod(&udp_to(1), 0).unwrap();
        // Revalidated and emptied, with its room kept for the next flow-mod's change.
        assert!(p.pending.is_empty());
        let room = p.pending.capacity();
        assert!(room > 0 && room <= PENDING_KEPT, "{room}");
        for port in 2..=100 {
            p.flow_mod(&udp_to(port), 0).unwrap();
        }
        assert_eq!(p.pending.capacity(), room);
        // One change per flow deleted: their room goes once they are applied.
        p.flow_mod(&FlowMod { command: cmd::DELETE, table_id: 0xff, ..Default::default() }, 0).unwrap();
        assert!(p.pending.is_empty() && p.pending.capacity() <= PENDING_KEPT, "{}", p.pending.capacity());
    }
}
