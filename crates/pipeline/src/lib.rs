//! The OpenFlow 1.3 pipeline: flow tables with a tuple-space classifier, groups, meters, the
//! action set, and a megaflow cache of its translations. No I/O: the datapath feeds it packets and
//! a clock, and it answers with actions.

pub mod cache;
pub mod classifier;
pub mod exec;
pub mod features;
pub mod flow;
pub mod group;
pub mod meter;
pub mod normal;
mod stats;
pub mod xlate;

use std::collections::BTreeMap;

use ofp::error::{ErrorCode, FlowModFailed};
use ofp::message::{flow_mod_command as cmd, flow_mod_flags, flow_removed_reason, FlowMod, FlowRemoved, OFPTT_ALL};
use ofp::oxm::Match;
use ofp::{Action, GroupMod, MeterMod};
use packet::{FlowKey, Packet};

use cache::{CacheEntry, FlowCache};
use classifier::{Classifier, RuleId};
use exec::{execute, Credits, Sink, Stop};
pub use flow::Nanos;
use flow::{compile, FlowEntry, Limits};
use group::{GroupChange, GroupTable};
use meter::{MeterChange, MeterTable};
use normal::MacTable;
pub use xlate::Translation;

pub const DEFAULT_N_TABLES: u8 = 64;
pub const DEFAULT_MAX_FLOWS: u32 = 1_000_000;

/// What the pipeline needs to know of a port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortView {
    pub config: u32,
    pub state: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub flags: u16,
    pub miss_send_len: u16,
}

impl Default for Config {
    fn default() -> Self {
        Config { flags: 0, miss_send_len: 128 }
    }
}

impl Config {
    pub fn invalid_ttl_to_controller(&self) -> bool {
        self.flags & ofp::message::config_flags::INVALID_TTL_TO_CONTROLLER != 0
    }
}

pub struct FlowTable {
    pub(crate) flows: Classifier<FlowEntry>,
    pub lookup_count: u64,
    pub matched_count: u64,
    pub max_entries: u32,
    /// When full, make room by removing the least-recently-used flow of the lowest priority
    /// (priority stands in for OpenFlow 1.4's importance) instead of refusing the new one.
    pub evict: bool,
    pub config: u32,
    /// Features a controller set for this table (None: everything the switch can do).
    pub spec: Option<features::TableSpec>,
    /// False once a table-features request left this table out of the pipeline.
    pub enabled: bool,
    /// Flows with an idle or hard timeout (so expiry need not scan the others).
    timed: usize,
}

/// `OFPTC_EVICTION` (OpenFlow 1.4), honoured in table-mod as an extension.
pub const OFPTC_EVICTION: u32 = 1 << 2;

impl FlowTable {
    /// The flow eviction would remove: lowest priority, then least recently used. The table-miss
    /// flow is never a candidate: without it the table would drop what it used to send on.
    fn eviction_victim(&self) -> Option<RuleId> {
        self.flows
            .iter()
            .filter(|(_, f)| !f.is_table_miss())
            .min_by_key(|(_, f)| (f.priority, f.last_used))
            .map(|(id, _)| id)
    }

    /// Takes a flow out of the table (the one place a flow leaves it).
    fn take(&mut self, id: RuleId) -> Option<FlowEntry> {
        let f = self.flows.remove(id)?;
        if f.idle_timeout != 0 || f.hard_timeout != 0 {
            self.timed -= 1;
        }
        Some(f)
    }

    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    pub fn flows(&self) -> impl Iterator<Item = &FlowEntry> {
        self.flows.iter().map(|(_, f)| f)
    }

    fn new(max_entries: u32) -> Self {
        FlowTable {
            flows: Classifier::new(),
            lookup_count: 0,
            matched_count: 0,
            max_entries,
            evict: false,
            config: 0,
            spec: None,
            enabled: true,
            timed: 0,
        }
    }
}

pub struct Pipeline {
    pub(crate) tables: Vec<FlowTable>,
    pub(crate) groups: GroupTable,
    pub(crate) meters: MeterTable,
    pub(crate) ports: BTreeMap<u32, PortView>,
    pub(crate) macs: MacTable,
    pub(crate) config: Config,
    pub(crate) cache: FlowCache,
    /// Set by translation when something it read changed (a newly learned address).
    pub(crate) cache_stale: bool,
    /// Standalone mode with no controller: every packet goes to the MAC-learning switch.
    fail_open: bool,
    /// No flow, learned address or cache entry can expire before this (see [`Pipeline::next_deadline`]).
    next_expiry: Nanos,
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

/// What processing one packet did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Processed {
    /// The megaflow cache entry it created, if any (a kernel fast path mirrors it).
    pub created: Option<RuleId>,
    /// Why its actions stopped early, if they did.
    pub stopped: Option<Stop>,
}

/// Converts a match into key and mask form.
pub fn match_to_key(m: &Match) -> (FlowKey, FlowKey) {
    let mut key = FlowKey::default();
    let mut mask = FlowKey::default();
    for f in &m.fields {
        let fm = f.effective_mask();
        key.set(f.field, f.value & fm);
        mask.set(f.field, fm);
    }
    (key, mask)
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
        match_: f.match_.clone(),
    }
}

impl Pipeline {
    pub fn new(n_tables: u8) -> Pipeline {
        Pipeline {
            tables: (0..n_tables).map(|_| FlowTable::new(DEFAULT_MAX_FLOWS)).collect(),
            groups: GroupTable::default(),
            meters: MeterTable::default(),
            ports: BTreeMap::new(),
            macs: MacTable::default(),
            config: Config::default(),
            cache: FlowCache::default(),
            cache_stale: false,
            fail_open: false,
            next_expiry: Nanos::MAX,
        }
    }

    /// The one way a flow leaves the pipeline: out of its table, with the flow-removed message
    /// owed to controllers if the flow asked for one.
    fn remove_flow(&mut self, table: u8, id: RuleId, why: Removal, now: Nanos) -> Option<FlowRemoved> {
        let f = self.tables[table as usize].take(id)?;
        let reason = why.reason()?;
        (f.flags & flow_mod_flags::SEND_FLOW_REM != 0).then(|| removed(&f, reason, now))
    }

    pub fn tables(&self) -> &[FlowTable] {
        &self.tables
    }

    pub fn config(&self) -> Config {
        self.config
    }

    pub fn fail_open(&self) -> bool {
        self.fail_open
    }

    pub fn meter(&self, id: u32) -> Option<&meter::Meter> {
        self.meters.meters.get(&id)
    }

    /// Adds what a kernel fast path counted for a meter.
    pub fn credit_meter(&mut self, id: u32, packets: u64, bytes: u64, dropped_packets: u64, dropped_bytes: u64) {
        if let Some(m) = self.meters.get_mut(id) {
            m.add_fast_path(packets, bytes, dropped_packets, dropped_bytes);
        }
    }

    /// The megaflow cache's generation: bumped on every flush.
    pub fn generation(&self) -> u64 {
        self.cache.generation
    }

    pub fn cache_len(&self) -> usize {
        self.cache.len()
    }

    /// A megaflow cache entry with the mask it was cached under.
    pub fn cache_entry(&self, id: RuleId) -> Option<(&CacheEntry, &FlowKey)> {
        self.cache.entry(id).map(|(e, _, mask)| (e, mask))
    }

    pub fn has_port(&self, port: u32) -> bool {
        self.ports.contains_key(&port)
    }

    /// A table-mod: the table's config (and eviction, as an extension).
    pub fn table_mod(&mut self, table_id: u8, config: u32) -> Result<(), ErrorCode> {
        use ofp::error::TableModFailed;
        if table_id != OFPTT_ALL && table_id >= self.n_tables() {
            return Err(ErrorCode::TableModFailed(TableModFailed::BadTable));
        }
        if config & !(3 | OFPTC_EVICTION) != 0 {
            return Err(ErrorCode::TableModFailed(TableModFailed::BadConfig));
        }
        for (i, t) in self.tables.iter_mut().enumerate() {
            if table_id == OFPTT_ALL || i == table_id as usize {
                t.config = config;
                t.evict = config & OFPTC_EVICTION != 0;
            }
        }
        Ok(())
    }

    /// The earliest time [`Pipeline::expire`] could have work: a flow timeout, an address to age
    /// out, a cache entry to sweep. Never later than the truth (uses only move it later), so a
    /// loop that sleeps until then misses nothing; `None` when nothing can expire.
    pub fn next_deadline(&self) -> Option<Nanos> {
        (self.next_expiry != Nanos::MAX).then_some(self.next_expiry)
    }

    fn expect_expiry(&mut self, at: Nanos) {
        self.next_expiry = self.next_expiry.min(at);
    }

    /// Sets a table's capacity and what happens when it is full.
    pub fn set_table_limit(&mut self, table: u8, max_entries: u32, evict: bool) {
        if let Some(t) = self.tables.get_mut(table as usize) {
            t.max_entries = max_entries;
            t.evict = evict;
        }
    }

    pub fn n_tables(&self) -> u8 {
        self.tables.len() as u8
    }

    /// Anything translation depends on changed: forget every cached translation.
    pub fn invalidate(&mut self) {
        self.cache.flush();
        self.cache_stale = false;
    }

    pub fn set_port(&mut self, port: u32, view: PortView) {
        if self.ports.insert(port, view) != Some(view) {
            if view.state & ofp::port::state::LINK_DOWN != 0 || view.config & ofp::port::config::PORT_DOWN != 0 {
                self.macs.flush_port(port);
            }
            self.invalidate();
        }
    }

    pub fn remove_port(&mut self, port: u32) {
        self.ports.remove(&port);
        self.macs.flush_port(port);
        self.invalidate();
    }

    pub fn set_fail_open(&mut self, on: bool) {
        if self.fail_open != on {
            self.fail_open = on;
            self.invalidate();
        }
    }

    pub fn set_config(&mut self, config: Config) {
        if self.config != config {
            self.config = config;
            self.invalidate();
        }
    }

    fn limits_ok(&self, fm: &FlowMod) -> Result<flow::Program, ErrorCode> {
        let table = &self.tables[fm.table_id as usize];
        if let Some(spec) = &table.spec {
            spec.check(&fm.match_, &fm.instructions, fm.priority == 0 && fm.match_.fields.is_empty())?;
        }
        let groups = |g: u32| self.groups.exists(g);
        let meters = |m: u32| self.meters.exists(m);
        let limits = Limits { n_tables: self.n_tables(), group_exists: &groups, meter_exists: &meters };
        let program = compile(fm.table_id, &fm.instructions, &limits)?;
        if program.goto.is_some_and(|t| !self.tables[t as usize].enabled) {
            return Err(ErrorCode::BadInstruction(ofp::error::BadInstruction::BadTableId));
        }
        Ok(program)
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
        for (i, table) in self.tables.iter_mut().enumerate() {
            table.flows = Classifier::new();
            table.timed = 0;
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
        fm.match_.validate()?;
        let (key, mask) = match_to_key(&fm.match_);
        let priority = fm.priority as u32;
        let removed_msgs = match fm.command {
            cmd::ADD => {
                let program = self.limits_ok(fm)?;
                let table = &mut self.tables[fm.table_id as usize];
                let existing = table.flows.find_exact(&key, &mask, priority);
                if fm.flags & flow_mod_flags::CHECK_OVERLAP != 0
                    && existing.is_none()
                    && table.flows.overlapping(&key, &mask, priority)
                {
                    return fail(FlowModFailed::Overlap);
                }
                let mut evicted = Vec::new();
                if existing.is_none() && table.flows.len() as u32 >= table.max_entries {
                    let victim = if table.evict { table.eviction_victim() } else { None };
                    let Some(victim) = victim else { return fail(FlowModFailed::TableFull) };
                    evicted.extend(self.remove_flow(fm.table_id, victim, Removal::Eviction, now));
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
                    match_: fm.match_.clone(),
                    cookie: fm.cookie,
                    idle_timeout: fm.idle_timeout,
                    hard_timeout: fm.hard_timeout,
                    flags: fm.flags,
                    instructions: fm.instructions.clone(),
                    program,
                    packet_count: packets,
                    byte_count: bytes,
                    created: now,
                    last_used: now,
                };
                let timeouts = [entry.idle_timeout, entry.hard_timeout];
                if timeouts != [0, 0] {
                    table.timed += 1;
                }
                table.flows.insert(&key, &mask, priority, entry);
                for t in timeouts.into_iter().filter(|&t| t != 0) {
                    self.expect_expiry(now + t as Nanos * 1_000_000_000);
                }
                evicted
            }
            cmd::MODIFY | cmd::MODIFY_STRICT => {
                let program = self.limits_ok(fm)?;
                let strict = fm.command == cmd::MODIFY_STRICT;
                let table = &mut self.tables[fm.table_id as usize];
                let targets = Self::targets(table, fm, &key, &mask, strict);
                for id in targets {
                    let f = table.flows.get_mut(id).unwrap();
                    f.instructions = fm.instructions.clone();
                    f.program = program.clone();
                    if fm.flags & flow_mod_flags::RESET_COUNTS != 0 {
                        f.packet_count = 0;
                        f.byte_count = 0;
                    }
                }
                Vec::new()
            }
            _ => {
                let strict = fm.command == cmd::DELETE_STRICT;
                let range =
                    if all_tables { 0..self.tables.len() } else { fm.table_id as usize..fm.table_id as usize + 1 };
                let mut out = Vec::new();
                for t in range {
                    for id in Self::targets(&self.tables[t], fm, &key, &mask, strict) {
                        out.extend(self.remove_flow(t as u8, id, Removal::Delete, now));
                    }
                }
                out
            }
        };
        self.invalidate();
        Ok(removed_msgs)
    }

    /// Flows a modify or delete applies to: by match (strictly or as a subset), cookie, and — for
    /// deletes — out_port and out_group.
    fn targets(table: &FlowTable, fm: &FlowMod, key: &FlowKey, mask: &FlowKey, strict: bool) -> Vec<RuleId> {
        let candidates: Vec<RuleId> = if strict {
            table.flows.find_exact(key, mask, fm.priority as u32).into_iter().collect()
        } else {
            table.flows.covered_by(key, mask).collect()
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

    /// Removes flows whose instructions name `pred`'s target (a deleted group or meter).
    fn remove_flows_where(&mut self, pred: impl Fn(&FlowEntry) -> bool, why: Removal, now: Nanos) -> Vec<FlowRemoved> {
        let mut out = Vec::new();
        for t in 0..self.tables.len() {
            let ids: Vec<RuleId> = self.tables[t].flows.iter().filter(|(_, f)| pred(f)).map(|(id, _)| id).collect();
            for id in ids {
                out.extend(self.remove_flow(t as u8, id, why, now));
            }
        }
        out
    }

    pub fn group_mod(&mut self, gm: &GroupMod, now: Nanos) -> Result<Vec<FlowRemoved>, ErrorCode> {
        let n_tables = self.n_tables();
        let meters = &self.meters;
        let change = self.groups.apply(
            gm.command,
            gm.group_type,
            gm.group_id,
            &gm.buckets,
            n_tables,
            &|m| meters.exists(m),
            now,
        )?;
        let out = match change {
            GroupChange::Deleted(ids) if !ids.is_empty() => {
                self.remove_flows_where(|f| ids.iter().any(|&g| f.uses_group(g)), Removal::GroupDelete, now)
            }
            _ => Vec::new(),
        };
        self.invalidate();
        Ok(out)
    }

    pub fn meter_mod(&mut self, mm: &MeterMod, now: Nanos) -> Result<Vec<FlowRemoved>, ErrorCode> {
        let change = self.meters.apply(mm.command, mm.flags, mm.meter_id, &mm.bands, now)?;
        let out = match change {
            MeterChange::Deleted(ids) if !ids.is_empty() => self.remove_flows_where(
                |f| f.program.meter.is_some_and(|m| ids.contains(&m)),
                Removal::MeterDelete,
                now,
            ),
            _ => Vec::new(),
        };
        self.invalidate();
        Ok(out)
    }

    /// Removes flows whose idle or hard timeout has passed, ages learned addresses and sweeps the
    /// cache; then works out when the next of these can be due.
    pub fn expire(&mut self, now: Nanos) -> Vec<FlowRemoved> {
        const SEC: Nanos = 1_000_000_000;
        let mut out = Vec::new();
        let mut any = false;
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
                any = true;
                out.extend(self.remove_flow(t as u8, id, why, now));
            }
        }
        if self.macs.age(now) {
            any = true;
        }
        if any {
            self.invalidate();
        }
        self.cache.sweep(now);
        if let Some(oldest) = self.macs.oldest() {
            next = next.min(oldest + normal::MAC_AGE);
        }
        if let Some(oldest) = self.cache.oldest_use() {
            // The sweep drops entries idle for longer than IDLE: the first one is due just after.
            next = next.min(oldest + cache::IDLE + 1);
        }
        self.next_expiry = next;
        out
    }

    /// Translates a received packet (no cache involved).
    pub fn translate(&mut self, pkt: &Packet, key: &FlowKey, now: Nanos) -> Translation {
        let fail_open = self.fail_open;
        let mut x = xlate::Xlate::new(self, pkt, key, now);
        if fail_open {
            x.normal_only();
        } else {
            x.run_pipeline(0);
        }
        x.finish()
    }

    pub fn translate_packet_out(&mut self, pkt: &Packet, key: &FlowKey, actions: &[Action], now: Nanos) -> Translation {
        let mut x = xlate::Xlate::new(self, pkt, key, now);
        x.packet_out(actions);
        let mut t = x.finish();
        t.cacheable = false;
        t
    }

    /// Adds one packet of `bytes` to every counter on its path.
    pub fn credit(&mut self, c: &Credits, bytes: usize, now: Nanos) {
        self.credit_many(c, 1, bytes as u64, now);
    }

    /// Adds `packets` packets totalling `bytes` (counted elsewhere, e.g. by a kernel fast path).
    pub fn credit_many(&mut self, c: &Credits, packets: u64, bytes: u64, now: Nanos) {
        for &(t, matched) in &c.tables {
            let table = &mut self.tables[t as usize];
            table.lookup_count += packets;
            table.matched_count += if matched { packets } else { 0 };
        }
        for &(t, id) in &c.flows {
            if let Some(f) = self.tables[t as usize].flows.get_mut(id) {
                f.packet_count += packets;
                f.byte_count += bytes;
                f.last_used = now;
            }
        }
        for &g in &c.groups {
            if let Some(g) = self.groups.groups.get_mut(&g) {
                g.packet_count += packets;
                g.byte_count += bytes;
            }
        }
        for &(g, b) in &c.buckets {
            if let Some(counts) = self.groups.groups.get_mut(&g).and_then(|g| g.bucket_counts.get_mut(b as usize)) {
                counts.0 += packets;
                counts.1 += bytes;
            }
        }
        if let Some((vlan, mac, port)) = c.learned {
            self.macs.learn(vlan, mac, port, now);
            self.expect_expiry(now + normal::MAC_AGE);
        }
    }

    /// Processes a received packet: megaflow cache hit, or translate, execute and cache.
    pub fn process(&mut self, pkt: &mut Packet, key: &FlowKey, now: Nanos, sink: &mut dyn Sink) -> Processed {
        if let Some(id) = self.cache.lookup(key) {
            let entry = self.cache.get_mut(id).unwrap();
            entry.last_used = now;
            entry.packets += 1;
            // The entry is borrowed while counters and meters change: take it out for the call.
            let actions = std::mem::take(&mut entry.actions);
            let credits = std::mem::take(&mut entry.credits);
            self.credit(&credits, pkt.len(), now);
            let done = execute(&actions, pkt, &mut self.meters, now, sink);
            if let Some(entry) = self.cache.get_mut(id) {
                entry.actions = actions;
                entry.credits = credits;
            }
            return Processed { created: None, stopped: done.err() };
        }
        let t = self.translate(pkt, key, now);
        if self.cache_stale {
            self.invalidate();
        }
        self.credit(&t.credits, pkt.len(), now);
        let stopped = execute(&t.actions, pkt, &mut self.meters, now, sink).err();
        let mut created = None;
        if t.cacheable {
            let entry = CacheEntry { actions: t.actions, credits: t.credits, last_used: now, packets: 1 };
            created = self.cache.insert(key, &t.consulted, entry);
            self.expect_expiry(now + cache::IDLE);
        }
        Processed { created, stopped }
    }

    /// Runs a packet-out: its actions (which may send the packet through the tables).
    pub fn packet_out(&mut self, pkt: &mut Packet, key: &FlowKey, actions: &[Action], now: Nanos, sink: &mut dyn Sink) {
        let t = self.translate_packet_out(pkt, key, actions, now);
        if self.cache_stale {
            self.invalidate();
        }
        self.credit(&t.credits, pkt.len(), now);
        let _ = execute(&t.actions, pkt, &mut self.meters, now, sink);
    }
}
