//! The OpenFlow 1.3 pipeline: flow tables with a tuple-space classifier, groups, meters, the
//! action set, and a megaflow cache of its translations. No I/O: the datapath feeds it packets and
//! a clock, and it answers with actions.
//!
//! About 600 lines, one concern: the `Pipeline` as a whole (its tables, ports, cache and the
//! changes pending for it); each part's work is in its module.

pub mod cache;
pub mod classifier;
pub mod exec;
pub mod features;
pub mod flow;
pub mod group;
pub mod meter;
mod modify;
pub mod normal;
pub mod prepare;
pub mod revalidate;
mod stats;
mod users;
pub mod xlate;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use ofp::error::ErrorCode;
use ofp::message::OFPTT_ALL;
use ofp::oxm::Match;
use ofp::Action;
use packet::{FlowKey, Packet};

use cache::{CacheEntry, FlowCache};
use classifier::{Classifier, RuleId};
use exec::{execute, Credits, Sink, Stop};
use flow::FlowEntry;
pub use flow::Nanos;
use group::GroupTable;
use meter::MeterTable;
pub use modify::{Removal, Removed};
use normal::MacTable;
pub use prepare::{ActionLists, PreparedFlowMod};
use revalidate::Change;
use users::Users;
pub use xlate::Translation;

pub const DEFAULT_N_TABLES: u8 = 64;
pub const DEFAULT_MAX_FLOWS: u32 = 1_000_000;
/// Pending changes whose room is kept between revalidations: a flow-mod's few, not a mass delete's.
pub(crate) const PENDING_KEPT: usize = 16;

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
    /// Flow adds refused because the table was full (OFPFMFC_TABLE_FULL), and flows evicted to
    /// make room.
    pub full_refusals: u64,
    pub evictions: u64,
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
    /// Eviction candidates by (priority, last use) as they were when pushed; built by the first
    /// eviction (see [`FlowTable::eviction_victim`]).
    by_age: Option<BinaryHeap<Reverse<(u16, Nanos, RuleId)>>>,
}

/// `OFPTC_EVICTION` (OpenFlow 1.4), honoured in table-mod as an extension.
pub const OFPTC_EVICTION: u32 = 1 << 2;

impl FlowTable {
    /// The flow eviction removes: lowest priority, then least recently used (then lowest id). The
    /// table-miss flow is never a candidate: without it the table would drop what it used to send on.
    ///
    /// Without a walk over the table: a flow's heap key only grows (uses move `last_used` on), so a
    /// popped entry older than its flow is pushed again with the flow's key, and the first entry
    /// popped that is still true is the least of all (every flow has an entry no greater than its
    /// key). Each use costs one push at most, the next time eviction reaches it.
    fn eviction_victim(&mut self) -> Option<RuleId> {
        let flows = &self.flows;
        let heap = self.by_age.get_or_insert_with(|| {
            flows
                .iter()
                .filter(|(_, f)| !f.is_table_miss())
                .map(|(id, f)| Reverse((f.priority, f.last_used, id)))
                .collect()
        });
        while let Some(Reverse((priority, used, id))) = heap.pop() {
            // An id whose flow left (or was reused at another priority): its own entry is elsewhere.
            let Some(f) = flows.get(id).filter(|f| f.priority == priority && !f.is_table_miss()) else { continue };
            if f.last_used != used {
                heap.push(Reverse((priority, f.last_used, id)));
                continue;
            }
            return Some(id);
        }
        None
    }

    /// Puts a flow in the table (the one place a flow enters it).
    fn put(&mut self, key: &FlowKey, mask: &FlowKey, entry: FlowEntry) -> RuleId {
        if entry.idle_timeout != 0 || entry.hard_timeout != 0 {
            self.timed += 1;
        }
        let (priority, used, miss) = (entry.priority, entry.last_used, entry.is_table_miss());
        let id = self.flows.insert(key, mask, priority as u32, entry);
        if let Some(heap) = &mut self.by_age {
            if !miss {
                heap.push(Reverse((priority, used, id)));
            }
            // Entries of flows gone since only wait to be popped: past twice the table, start afresh.
            if heap.len() > 2 * self.flows.len() + 1024 {
                self.by_age = None;
            }
        }
        id
    }

    /// Empties the table.
    fn clear(&mut self) {
        self.flows = Classifier::new();
        self.timed = 0;
        self.by_age = None;
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

    /// The distinct masks among the table's flows: what a lookup's cost follows.
    pub fn n_masks(&self) -> usize {
        self.flows.n_subtables()
    }

    fn new(max_entries: u32) -> Self {
        FlowTable {
            flows: Classifier::new(),
            lookup_count: 0,
            matched_count: 0,
            full_refusals: 0,
            evictions: 0,
            max_entries,
            evict: false,
            config: 0,
            spec: None,
            enabled: true,
            timed: 0,
            by_age: None,
        }
    }
}

pub struct Pipeline {
    pub(crate) tables: Vec<FlowTable>,
    pub(crate) groups: GroupTable,
    pub(crate) meters: MeterTable,
    pub(crate) ports: BTreeMap<u32, PortView>,
    pub(crate) macs: MacTable,
    /// Which flows use each group and meter.
    users: Users,
    pub(crate) config: Config,
    pub(crate) cache: FlowCache,
    /// Changes not yet applied to the cache (translation learns addresses while it reads them).
    pub(crate) pending: Vec<Change>,
    /// Meters changed or deleted since the datapath last asked: kernel copies of them are stale.
    pub(crate) changed_meters: Vec<u32>,
    /// Standalone mode with no controller: every packet goes to the MAC-learning switch.
    fail_open: bool,
    /// No flow, learned address or cache entry can expire before this (see [`Pipeline::next_deadline`]).
    next_expiry: Nanos,
    /// The action lists of the last few flows added or modified, for the next to share.
    recent_actions: prepare::ActionLists,
    /// A translation that was not cached, its room kept for the next (see `Xlate::new`).
    spare: Translation,
}

/// What the datapath's copy of the cache must drop, since it last asked (when the generation did
/// not move: then it drops everything).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Retired {
    pub entries: Vec<RuleId>,
    /// Meters whose settings changed or that are gone.
    pub meters: Vec<u32>,
}

impl Retired {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.meters.is_empty()
    }
}

/// What processing one packet did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Processed {
    /// The megaflow cache entry it created, if any (a kernel fast path mirrors it).
    pub created: Option<RuleId>,
    /// The entry it hit instead, if any: a kernel fast path that had no room for it before may
    /// take it now.
    pub hit: Option<RuleId>,
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

impl Pipeline {
    pub fn new(n_tables: u8) -> Pipeline {
        Pipeline {
            tables: (0..n_tables).map(|_| FlowTable::new(DEFAULT_MAX_FLOWS)).collect(),
            groups: GroupTable::default(),
            meters: MeterTable::default(),
            ports: BTreeMap::new(),
            macs: MacTable::default(),
            users: Users::default(),
            config: Config::default(),
            cache: FlowCache::default(),
            pending: Vec::new(),
            changed_meters: Vec::new(),
            fail_open: false,
            next_expiry: Nanos::MAX,
            recent_actions: Default::default(),
            spare: Translation::default(),
        }
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

    /// Cache entries retired one by one, and meters changed, since the last call.
    pub fn take_retired(&mut self) -> Retired {
        Retired { entries: self.cache.take_retired(), meters: std::mem::take(&mut self.changed_meters) }
    }

    /// Hits a kernel copy of a cache entry counted: the entry is in use.
    pub fn touch_cached(&mut self, id: RuleId, packets: u64, now: Nanos) {
        self.cache.touch(id, packets, now);
    }

    pub fn cache_len(&self) -> usize {
        self.cache.len()
    }

    /// The megaflow cache's figures: entries; entries retired by a change they read, idle, or to
    /// make room; flushes.
    /// Each meter's counters, by id: (packets in, bytes in, packets and bytes its bands acted on).
    pub fn meter_counters(&self) -> impl Iterator<Item = (u32, [u64; 4])> + '_ {
        self.meters.meters.iter().map(|(&id, m)| {
            let band = |f: fn(&meter::Band) -> u64| m.bands.iter().map(f).sum();
            (id, [m.packet_count, m.byte_count, band(|b| b.packet_count), band(|b| b.byte_count)])
        })
    }

    /// Each group's counters, by id: (packets, bytes).
    pub fn group_counters(&self) -> impl Iterator<Item = (u32, [u64; 2])> + '_ {
        self.groups.groups.iter().map(|(&id, g)| (id, [g.packet_count, g.byte_count]))
    }

    /// The MAC learning table's figures: addresses held; addresses evicted because the table was
    /// full, or because their port held its share.
    pub fn mac_counters(&self) -> [(&'static str, u64); 3] {
        [
            ("addresses", self.macs.len() as u64),
            ("evicted_table_full", self.macs.evicted_table_full),
            ("evicted_port_limit", self.macs.evicted_port_limit),
        ]
    }

    pub fn cache_counters(&self) -> [(&'static str, u64); 5] {
        let c = &self.cache;
        [
            ("entries", c.len() as u64),
            ("retired", c.retired_total),
            ("expired", c.expired_total),
            ("evicted", c.evicted_total),
            ("flushes", c.generation),
        ]
    }

    /// The cache entry a packet with `key` would hit, if any.
    pub fn cache_lookup(&self, key: &FlowKey) -> Option<&CacheEntry> {
        self.cache.lookup(key).and_then(|id| self.cache.get(id))
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

    /// Something every translation may depend on changed (switch config, fail-open, the tables'
    /// shape): forget every cached translation.
    pub fn invalidate(&mut self) {
        self.cache.flush();
        self.pending.clear();
    }

    /// Applies the pending changes: the cache entries they can affect go.
    pub(crate) fn revalidate(&mut self) {
        // Drained in place, so that the next flow-mod's change reuses the room: a change is some
        // 300 bytes, and a new vector each time was a large allocation for every flow-mod. Room
        // a mass delete's changes took is given back.
        self.apply_pending();
        if self.pending.capacity() > PENDING_KEPT {
            self.pending = Vec::new();
        }
    }

    /// The pending changes' cache entries go; the room stays.
    pub(crate) fn apply_pending(&mut self) {
        for c in self.pending.drain(..) {
            self.cache.revalidate(&c);
        }
    }

    fn port_changed(&mut self, port: u32, forget_addresses: bool) {
        self.pending.push(Change::Port(port));
        if forget_addresses {
            for (vlan, mac) in self.macs.flush_port(port) {
                self.pending.push(Change::Address(vlan, mac));
            }
        }
        self.revalidate();
    }

    pub fn set_port(&mut self, port: u32, view: PortView) {
        if self.ports.insert(port, view) != Some(view) {
            let down = view.state & ofp::port::state::LINK_DOWN != 0 || view.config & ofp::port::config::PORT_DOWN != 0;
            self.port_changed(port, down);
        }
    }

    pub fn remove_port(&mut self, port: u32) {
        self.ports.remove(&port);
        self.port_changed(port, true);
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

    /// Translates a received packet (no cache involved). What it learned (a source address)
    /// retires the cache entries that read it before this returns.
    pub fn translate(&mut self, pkt: &Packet, key: &FlowKey, now: Nanos) -> Translation {
        let fail_open = self.fail_open;
        let mut x = xlate::Xlate::new(self, pkt, key, now);
        if fail_open {
            x.normal_only();
        } else {
            x.run_pipeline(0);
        }
        let t = x.finish();
        self.revalidate();
        t
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
            // Learned again after ageing out, or moved back: who looked it up must look again.
            if self.learn_address(vlan, mac, port, now) == normal::Learned::Changed {
                self.revalidate();
            }
            self.expect_expiry(now + normal::MAC_AGE);
        }
    }

    /// Learns where an address sends from. What was decided on it, and on any address evicted to
    /// make room, is stale: those changes wait in `pending` for the next revalidation.
    pub(crate) fn learn_address(&mut self, vlan: u16, mac: u64, port: u32, now: Nanos) -> normal::Learned {
        let learned = self.macs.learn(vlan, mac, port, now);
        if learned == normal::Learned::Changed {
            self.pending.push(Change::Address(vlan, mac));
            for (vlan, mac) in self.macs.take_forgotten() {
                self.pending.push(Change::Address(vlan, mac));
            }
        }
        learned
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
            return Processed { created: None, hit: Some(id), stopped: done.err() };
        }
        // What translation learned retires others before the new entry goes in, never itself.
        let t = self.translate(pkt, key, now);
        self.credit(&t.credits, pkt.len(), now);
        let stopped = execute(&t.actions, pkt, &mut self.meters, now, sink).err();
        let created = if t.cacheable && !self.only_answered_packet_ins(&t.actions, sink) {
            let entry =
                CacheEntry { actions: t.actions, credits: t.credits, last_used: now, packets: 1, reads: t.reads };
            self.expect_expiry(now + cache::IDLE);
            self.cache.insert(key, &t.consulted, entry)
        } else {
            self.spare = t;
            None
        };
        Processed { created, hit: None, stopped }
    }

    /// Whether a translation only sends packet-ins, and they went: then it is not cached (the
    /// controller's answer would retire the entry at once; making and retiring it was a fifth of
    /// a setup). Held back by the rate limit or the `OFPM_CONTROLLER` meter, which hits pass too,
    /// it is cached: the rest of a flood of one flow costs a cache hit a frame.
    fn only_answered_packet_ins(&self, actions: &[exec::DpAction], sink: &dyn Sink) -> bool {
        !actions.is_empty()
            && actions.iter().all(|a| matches!(a, exec::DpAction::Controller(_)))
            && !sink.packet_ins_held_back()
            && !self.meters.meters.contains_key(&ofp::group_meter::OFPM_CONTROLLER)
    }

    /// Runs a packet-out: its actions (which may send the packet through the tables).
    pub fn packet_out(&mut self, pkt: &mut Packet, key: &FlowKey, actions: &[Action], now: Nanos, sink: &mut dyn Sink) {
        let t = self.translate_packet_out(pkt, key, actions, now);
        self.revalidate();
        self.credit(&t.credits, pkt.len(), now);
        let _ = execute(&t.actions, pkt, &mut self.meters, now, sink);
        self.spare = t;
    }
}
