//! Keeping the kernel fast path in step with the mode: decisions mirrored in, hits counted back,
//! the decisions the mode retired dropped one by one, and everything dropped when the mode's
//! generation moves.

use std::collections::HashMap;

use forwarding::{EntryId, FromKernel};
use ofp::oxm::Field;
use packet::FlowKey;

use super::{Switch, SwitchPort};
use crate::fastpath::labels::LabelPort;
use crate::fastpath::links::{HeldLink, AFDX_FANOUTS};
use crate::fastpath::Mode as FastMode;
use crate::fastpath::{actions_outputs, EncodeContext};

/// How often the kernel fast path's counters are harvested (its busiest masks re-ranked, dead
/// entries swept) while nothing else wakes the loop, at most.
pub(super) const FAST_PATH_HARVEST: u64 = 100_000_000;
/// Periodic readings of the megaflow entries take a tenth of the forwarding thread at most.
const HARVEST_SHARE: u64 = 10;

impl Switch {
    /// Offers a decision of the mode to the kernel, which takes it if it can carry it out: a fresh
    /// one, or one the kernel does not hold that it had no room for before (`fastpath/room.rs`).
    /// `self.sent` holds where the frame that made it went, so kernel hits count on those queues.
    pub(super) fn mirror(&mut self, id: EntryId, key: &FlowKey) {
        let Some(fast) = self.fast.as_mut() else { return };
        if !fast.wants(id) {
            return;
        }
        let Some(entry) = self.mode.kernel().flows.and_then(|flows| flows.entry(id)) else { return };
        // Frames for a scheduled port wait for their turn in its queues: the kernel would send
        // them at once, so such decisions stay in userspace.
        let scheduled = |port: &u32| self.ports.get(port).is_some_and(|p| p.egress.scheduler().is_some());
        if actions_outputs(entry.actions).iter().any(scheduled) {
            return;
        }
        let mut slots = HashMap::new();
        for (m, meter) in &entry.meters {
            if let Some(slot) = fast.meter_slot(*m, meter) {
                slots.insert(*m, slot);
            }
        }
        // A queue chosen by the frame's VLAN priority depends on bits the mode may not have
        // consulted: the kernel entry then covers only frames of the same priority.
        let mut mask = *entry.mask;
        if self.sent.iter().any(|&(_, _, by_priority)| by_priority) {
            mask.set(Field::VlanVid, mask.get(Field::VlanVid) | ofp::oxm::OFPVID_PRESENT as u128);
            mask.set(Field::VlanPcp, 7);
        }
        let ports = &self.ports;
        let ifindex = |p: u32| ports.get(&p).and_then(|x| x.kernel_ifindex());
        let mut meter_slot = |m: u32| slots.get(&m).copied();
        let mut cx =
            EncodeContext { mode: fast.mode, ifindex: &ifindex, meter_slot: &mut meter_slot, ip_proto: key.ip_proto() };
        // Every port the actions send to, on the queue the frame that made the entry took there (a
        // frame a meter stopped took none: then the queue its priority picks).
        let pcp = key.get(Field::VlanPcp) as usize & 7;
        let default_queue =
            |port: u32| self.ports.get(&port).map_or(crate::egress::PCP_TO_QUEUE[pcp], |p| p.egress.pcp_map[pcp]);
        let outputs: Vec<(u32, u8)> = actions_outputs(entry.actions)
            .into_iter()
            .map(|port| {
                let queue = self.sent.iter().find(|s| s.0 == port).map_or_else(|| default_queue(port), |s| s.1);
                (port, queue)
            })
            .collect();
        fast.install(id, key, &mask, entry.actions, entry.credits, &outputs, &mut cx);
    }

    /// Adds what the kernel fast path counted to the mode's and the ports' counters.
    pub(super) fn harvest_fast(&mut self, now: u64) {
        self.harvest_fast_within(now, 0);
    }

    /// How long between two periodic readings of the megaflow entries: the housekeeping period,
    /// or ten times what the last reading took if that is longer. Reading 100 000 entries back
    /// takes ~100 ms (44 MB): read every 100 ms, the thread did nothing else, and a controller's
    /// flow-mods waited (520 taken a second of 1 000 sent). Hits then reach the flows' counters
    /// up to a second late; a flow's timeout still reads them afresh (`tick`).
    pub(super) fn harvest_period(&self) -> u64 {
        FAST_PATH_HARVEST.max(HARVEST_SHARE * self.harvest_took)
    }

    /// How old the megaflow entries' counts may be for a controller's stats request: read afresh
    /// while a reading is cheap (a tenth of the housekeeping period at most), else as of the last
    /// periodic reading.
    pub(super) fn stats_age(&self) -> u64 {
        if HARVEST_SHARE * self.harvest_took > FAST_PATH_HARVEST {
            self.harvest_period()
        } else {
            0
        }
    }

    /// The same, but the megaflow entries' counts only if they were last read `max_age` ns ago or
    /// more: reading them back takes the forwarding thread milliseconds for 10 000 entries, where
    /// the links' and a P4 program's counters take a few small reads.
    pub(super) fn harvest_fast_within(&mut self, now: u64, max_age: u64) {
        let Some(fast) = self.fast.as_mut() else { return };
        if self.harvested_at.is_none_or(|at| now.saturating_sub(at) >= max_age) {
            self.harvested_at = Some(now);
            let started = std::time::Instant::now();
            let h = fast.harvest(now);
            self.harvest_took = started.elapsed().as_nanos() as u64;
            self.credit_harvest(&h, now);
        }
        self.credit_links();
        #[cfg(feature = "p4")]
        self.credit_p4();
    }

    /// Adds what the kernel counted running the P4 program to the mode's counters (and the
    /// program's counters, entries and registers), and to the ports'.
    #[cfg(feature = "p4")]
    fn credit_p4(&mut self) {
        let (Some(program), Some(p4)) = (self.mode.kernel().p4, self.fast.as_mut().and_then(|f| f.p4())) else {
            return;
        };
        let (counts, ports) = p4.harvest(program);
        self.mode.take_back(FromKernel::P4Counts(&counts));
        for (no, [rx_packets, rx_bytes, tx_packets, tx_bytes]) in ports {
            if let Some(p) = self.ports.get_mut(&no) {
                p.counters.rx_packets += rx_packets;
                p.counters.rx_bytes += rx_bytes;
                p.counters.tx_packets += tx_packets;
                p.counters.tx_bytes += tx_bytes;
            }
        }
    }

    /// The P4 program's tables in the kernel follow the software target's, and the ports the
    /// kernel sends on follow the switch's: each that has an interface and no schedule (frames
    /// for a scheduled port wait in its queues, which the kernel would jump). Not the LOCAL
    /// port's tap: sent on in the kernel, a frame would reach the switch, not the host. While
    /// any port is left out, the kernel sends every frame up: one for such a port would go up
    /// only after ingress ran in the kernel, and userspace would run it again, counting and
    /// policing it twice.
    #[cfg(feature = "p4")]
    pub(super) fn sync_p4(&mut self) {
        let Some(program) = self.mode.kernel().p4 else { return };
        let mut egress = std::collections::BTreeMap::new();
        let mut left_out = Vec::new();
        for (&no, p) in &self.ports {
            if let (Some(ifindex), true) = (p.kernel_ifindex(), p.tx.is_some() && p.egress.scheduler().is_none()) {
                egress.insert(no, ifindex);
            } else {
                left_out.push(no);
            }
        }
        let Some(fast) = self.fast.as_mut() else { return };
        let xdp = fast.mode == FastMode::Xdp;
        let Some(p4) = fast.p4() else { return };
        let behind = p4.behind(program);
        if let Err(e) = p4.set_egress(program, &egress, xdp) {
            tracing::warn!("the P4 program's kernel ports not written: {e}");
        }
        if p4.hold_for_ports(&left_out) {
            match left_out.is_empty() {
                true => tracing::info!("every port sends in the kernel: the P4 program decides frames there again"),
                false => tracing::info!(
                    ports = ?left_out,
                    "ports with a schedule (or the LOCAL port) send from userspace: the kernel sends every frame up, for the P4 program to decide"
                ),
            }
        }
        if behind {
            // The kernel's registers come back before the control plane's are written over them.
            self.credit_p4();
            let (Some(program), Some(p4)) = (self.mode.kernel().p4, self.fast.as_mut().and_then(|f| f.p4())) else {
                return;
            };
            if let Err(e) = p4.write(program) {
                tracing::warn!("the P4 program's kernel tables not written, so every frame goes up: {e}");
            }
        }
        if let Some(Err(e)) = self.fast.as_mut().and_then(|f| f.p4()).map(|p4| p4.apply_stale()) {
            tracing::warn!("the P4 program's kernel: {e}");
        }
    }

    fn credit_harvest(&mut self, h: &crate::fastpath::Harvest, now: u64) {
        for &(id, ref credits, packets, bytes) in &h.flows {
            self.mode.take_back(FromKernel::FlowHits { id, credits, packets, bytes, now });
        }
        for (port, d) in &h.ports {
            if let Some(p) = self.ports.get_mut(port) {
                p.counters.rx_packets += d.rx_packets;
                p.counters.rx_bytes += d.rx_bytes;
                p.counters.tx_packets += d.tx_packets;
                p.counters.tx_bytes += d.tx_bytes;
            }
        }
        for (&(port, queue), &(packets, bytes)) in &h.queues {
            if let Some(p) = self.ports.get_mut(&port) {
                p.egress.credit(queue as usize, packets, bytes);
            }
        }
        for (&meter, &counts) in &h.meters {
            self.mode.take_back(FromKernel::MeterCounts { meter, counts });
        }
    }

    /// Adds what the kernel counted on the virtual links it decides to the mode's counters, and
    /// to the ports and egress queues those frames used. A frame that came in on a port other
    /// than its link's is counted under its link and on the port it came in on, as userspace
    /// counts it.
    fn credit_links(&mut self) {
        let (Some(fast), Some(table)) = (self.fast.as_mut(), self.mode.kernel().links.map(|l| l.table())) else {
            return;
        };
        const FCS: u64 = packet::FCS_LEN as u64;
        let mut credited = Vec::new();
        for (id, k) in fast.harvest_links() {
            let Some(l) = table.links.iter().find(|l| l.id == id) else { continue };
            // Counters of other CPUs are read while they count: never assume one is ahead of another.
            let right_frames = k.frames_in.saturating_sub(k.dropped[1]);
            if let Some(p) = self.ports.get_mut(&l.in_port) {
                p.counters.rx_packets += right_frames;
                p.counters.rx_bytes += k.bytes_in.saturating_sub(k.wrong_port_bytes).saturating_sub(FCS * right_frames);
            }
            let tx_bytes = k.bytes_out.saturating_sub(FCS * k.frames_out);
            for out in &l.out_ports {
                if let Some(p) = self.ports.get_mut(out) {
                    p.counters.tx_packets += k.frames_out;
                    p.counters.tx_bytes += tx_bytes;
                    p.egress.credit(l.queue as usize, k.frames_out, tx_bytes);
                }
            }
            credited.push((id, k));
        }
        for (no, frames, bytes) in fast.harvest_wrong_port() {
            if let Some(p) = self.ports.get_mut(&no) {
                p.counters.rx_packets += frames;
                p.counters.rx_bytes += bytes.saturating_sub(FCS * frames);
            }
        }
        for (id, k) in credited {
            self.mode.take_back(FromKernel::LinkCounts { id, counts: &k });
        }
    }

    /// The mode's decisions changed since the fast path last mirrored them: the copies of the
    /// ones it retired go (their last hits counted), or, when its generation moved, all of them
    /// (everything the kernel saw counted first). Runs after every command, so a barrier reply
    /// never precedes the removal of what its earlier messages changed.
    pub(super) fn sync_fast(&mut self) {
        self.sync_labels();
        #[cfg(feature = "p4")]
        self.sync_p4();
        if self.links_written.is_none() {
            self.sync_links();
        }
        let retired = self.mode.take_retired();
        if self.fast.is_none() {
            return;
        }
        if self.mode.generation() == self.fast_gen {
            if !retired.is_empty() {
                let now = self.now();
                let h = self.fast.as_mut().map(|f| f.retire(&retired)).unwrap_or_default();
                self.credit_harvest(&h, now);
            }
            return;
        }
        let now = self.now();
        self.harvest_fast(now);
        if let Some(fast) = self.fast.as_mut() {
            fast.flush();
        }
        self.fast_gen = self.mode.generation();
    }
}

/// How long after the first controller session a fast path holding the last run's entries waits
/// for a barrier before releasing them anyway: a controller need not send one (os-ken's sample
/// apps do not), and by then it has sent what it sends on connecting.
const INHERITED_AFTER_SESSION_NS: u64 = 5_000_000_000;
/// How long they forward when no controller session comes at all.
const INHERITED_AT_MOST_NS: u64 = 60_000_000_000;

impl Switch {
    /// Releases the entries the kernel fast path took over from the last run, if it holds any
    /// (their last hits are not the mode's to count): from now on, the mode's own decisions.
    pub(super) fn release_inherited(&mut self, why: &str) {
        if !self.fast.as_ref().is_some_and(|f| f.holds_inherited()) {
            return;
        }
        let now = self.now();
        self.harvest_fast(now);
        if let Some(n) = self.fast.as_mut().and_then(|f| f.release_inherited()) {
            tracing::info!(entries = n, "the last run's kernel entries released ({why}): the mode's own take over");
        }
    }

    /// Releases them when their time is up: at once for a mode no controller programs; else 5 s
    /// after the first controller session, or 60 s after start without one (the controller's
    /// first barrier releases them before that, see `openflow`).
    pub(super) fn release_inherited_when_due(&mut self, now: u64) {
        if !self.fast.as_ref().is_some_and(|f| f.holds_inherited()) {
            return;
        }
        if !self.cfg.awaits_controller {
            return self.release_inherited("no controller gives this mode its state");
        }
        if self.first_session_at.is_none() && self.channel.sessions.load(std::sync::atomic::Ordering::Relaxed) > 0 {
            self.first_session_at = Some(now);
        }
        match self.first_session_at {
            Some(at) if now >= at + INHERITED_AFTER_SESSION_NS => {
                self.release_inherited("no barrier within 5 s of the first controller session")
            }
            None if now >= INHERITED_AT_MOST_NS => self.release_inherited("no controller session within 60 s"),
            _ => {}
        }
    }
}

/// How long after a failed write of the kernel's virtual links it is tried again.
const LINKS_RETRY_NS: u64 = 1_000_000_000;

impl Switch {
    /// Hands the kernel every virtual link of the mode it can decide exactly as the mode would:
    /// each output an interface the switch sends on without a schedule (scheduled frames wait in
    /// userspace's queues, which the kernel would jump), or paced only to its link's speed where
    /// no backlog can need priority (`KernelLinks::ports_needing_priority`: the kernel sends in
    /// the order frames come, and a backlog of one priority would hold up the other). Under
    /// XDP, which sends a frame once, a link with several outputs is broadcast into a DEVMAP
    /// holding them: one per distinct set of
    /// outputs, `AFDX_FANOUTS` of them; links needing another stay with userspace. An account
    /// goes whole or not at all: the kernel and userspace cannot share one credit. Checked at
    /// start and at every harvest, as schedules change at runtime; a change hands the links over
    /// again, each account with the credit it has (the kernel's goes back to the mode first, the
    /// mode's then to the kernel), so that policing stays exact across the handover.
    pub(super) fn sync_links(&mut self) {
        let (Some(fast), Some(table)) = (self.fast.as_ref(), self.mode.kernel().links.map(|l| l.table())) else {
            return;
        };
        let ports = &self.ports;
        let link_bps = |no: u32| ports.get(&no).and_then(|p| p.link_paced_mbps).map(|m| m as u64 * 1_000_000);
        let needing_priority = table.ports_needing_priority(link_bps);
        let kernel_sends_on = |p: &SwitchPort, no: &u32| {
            p.egress.scheduler().is_none() || (p.link_paced_mbps.is_some() && !needing_priority.contains(no))
        };
        let ifindex = |no: &u32| {
            ports.get(no).filter(|p| p.tx.is_some() && kernel_sends_on(p, no)).and_then(|p| p.kernel_ifindex())
        };
        let kept_for_priority =
            table.links.iter().filter(|l| l.out_ports.iter().any(|p| needing_priority.contains(p))).count();
        let mut fanouts: Vec<Vec<u32>> = Vec::new();
        let plan: Vec<Option<HeldLink>> = table
            .links
            .iter()
            .enumerate()
            .map(|(index, l)| {
                if !ports.contains_key(&l.in_port) {
                    return None;
                }
                let out_ifindex = l.out_ports.iter().map(ifindex).collect::<Option<Vec<u32>>>()?;
                let mut fanout = 0;
                if fast.mode == FastMode::Xdp && out_ifindex.len() > 1 {
                    let mut set = out_ifindex.clone();
                    set.sort_unstable();
                    let at = match fanouts.iter().position(|s| *s == set) {
                        Some(at) => at,
                        None if fanouts.len() < AFDX_FANOUTS as usize => {
                            fanouts.push(set);
                            fanouts.len() - 1
                        }
                        None => return None,
                    };
                    fanout = at as u32 + 1;
                }
                Some(HeldLink { index, out_ifindex, fanout })
            })
            .collect();
        let split: std::collections::BTreeSet<usize> =
            table.links.iter().zip(&plan).filter(|(_, h)| h.is_none()).map(|(l, _)| l.account).collect();
        let held: Vec<HeldLink> =
            plan.into_iter().flatten().filter(|h| !split.contains(&table.links[h.index].account)).collect();
        let written: Vec<(usize, Vec<u32>, u32)> =
            held.iter().map(|h| (h.index, h.out_ifindex.clone(), h.fanout)).collect();
        let now = self.now();
        let retry_due = self.links_retry.is_some_and(|(at, _)| now >= at);
        if self.links_written.as_ref() == Some(&written) && !retry_due {
            return;
        }
        if kept_for_priority as u64 != self.links_kept_for_priority {
            tracing::info!(
                links = kept_for_priority,
                ports = ?needing_priority,
                "virtual links kept in userspace: their ports' links can be offered more than they carry, \
                 and only userspace's queues send by priority"
            );
            self.links_kept_for_priority = kept_for_priority as u64;
        }
        self.credit_links();
        if let (Some(fast), Some(table)) = (self.fast.as_ref(), self.mode.kernel().links.map(|l| l.table())) {
            // The links the kernel really holds (none after a write that failed).
            let held_ids: Vec<u16> = fast.held_links().collect();
            let mut accounts: Vec<usize> =
                table.links.iter().filter(|l| held_ids.contains(&l.id)).map(|l| l.account).collect();
            accounts.sort_unstable();
            accounts.dedup();
            match fast.account_credits(&accounts) {
                Ok(credits) => self.mode.take_back(FromKernel::AccountCredits { credits: &credits, now }),
                Err(e) => tracing::warn!("kernel accounts not read back (they restart full): {e}"),
            }
        }
        let credits = self.mode.kernel().links.map_or_else(Vec::new, |l| l.credits(now));
        let (Some(fast), Some(table)) = (self.fast.as_mut(), self.mode.kernel().links.map(|l| l.table())) else {
            return;
        };
        match fast.set_links(table, &held, &credits) {
            Ok(()) => {
                let failed = self.links_retry.take().map_or(0, |(_, n)| n);
                tracing::info!(
                    held = held.len(),
                    of = table.links.len(),
                    failed,
                    "virtual links decided in the kernel"
                );
            }
            Err(e) => {
                // Part written is worse than none: the kernel would police some of an account's links.
                let cleared = fast.set_links(table, &[], &[]);
                // Userspace decides them all meanwhile (correct, slower); tried again each second,
                // and said once.
                let failed = self.links_retry.map_or(0, |(_, n)| n) + 1;
                if failed == 1 {
                    tracing::warn!(
                        "kernel virtual links not written (userspace decides them all, retrying each second): {e}; \
                         cleared: {cleared:?}"
                    );
                }
                self.links_retry = Some((now + LINKS_RETRY_NS, failed));
            }
        }
        self.links_written = Some(written);
    }

    /// A label-switching mode's tables moved (or a port did): the kernel gets them again, with
    /// every port's interface and state. A scheduled port is left out: its frames wait in its
    /// queues, which the kernel would jump.
    fn sync_labels(&mut self) {
        let (Some(fast), Some(labels)) = (self.fast.as_mut(), self.mode.kernel().labels) else { return };
        if labels.generation == self.labels_gen {
            return;
        }
        let ports: Vec<LabelPort> = self
            .ports
            .iter()
            .map(|(&no, p)| LabelPort {
                no,
                ifindex: if p.egress.scheduler().is_some() || p.tx.is_none() {
                    0
                } else {
                    p.kernel_ifindex().unwrap_or(0)
                },
                whole: p.whole,
                live: p.desc.state & ofp::port::state::LINK_DOWN == 0
                    && p.desc.config & ofp::port::config::PORT_DOWN == 0
                    && !labels.down_ports.contains(&no),
            })
            .collect();
        if let Err(e) = fast.set_labels(labels, &ports) {
            tracing::warn!("kernel label tables not written: {e}");
        }
        self.labels_gen = labels.generation;
    }
}
