//! The megaflow cache: translations keyed on only the header bits they consulted.
//!
//! Entries never disagree (each gives, for every packet it covers, the translation that packet
//! would get), so they carry no priority and the first hit wins. A change to what translation
//! reads — flows, groups, meters, ports, learned addresses — retires the entries that read it
//! (`revalidate`), and only those: a cache hit is never older than the tables, and traffic the
//! change cannot touch keeps its entries. Switch-wide changes (config, fail-open, table features,
//! a full cache) still flush everything and move the generation.

use packet::FlowKey;

use crate::classifier::{Classifier, RuleId};
use crate::exec::{Credits, DpAction};
use crate::flow::Nanos;
use crate::revalidate::{Change, ReadIndex, Reads};

/// As Open vSwitch's default datapath flow limit. An entry takes memory only while it exists.
pub const DEFAULT_MAX_ENTRIES: usize = 200_000;
/// Entries unused this long are dropped by [`FlowCache::sweep`].
pub const IDLE: Nanos = 10_000_000_000;

#[derive(Clone, Debug)]
pub struct CacheEntry {
    pub actions: Vec<DpAction>,
    pub credits: Credits,
    pub last_used: Nanos,
    pub packets: u64,
    pub reads: Reads,
}

pub struct FlowCache {
    entries: Classifier<CacheEntry>,
    max_entries: usize,
    /// Bumped on every flush, so holders of a [`RuleId`] can tell it went stale.
    pub generation: u64,
    index: ReadIndex,
    /// Entries retired one by one since the datapath last asked (a flush empties it: the
    /// generation says more).
    retired: Vec<RuleId>,
    /// Entries retired since start: by a change they read, idle, to make room.
    pub retired_total: u64,
    pub expired_total: u64,
    pub evicted_total: u64,
}

impl Default for FlowCache {
    fn default() -> Self {
        FlowCache::new(DEFAULT_MAX_ENTRIES)
    }
}

impl FlowCache {
    pub fn new(max_entries: usize) -> Self {
        FlowCache {
            entries: Classifier::new(),
            max_entries,
            generation: 0,
            index: ReadIndex::default(),
            retired: Vec::new(),
            retired_total: 0,
            expired_total: 0,
            evicted_total: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of distinct masks (each costs one hash probe per lookup).
    pub fn n_masks(&self) -> usize {
        self.entries.n_subtables()
    }

    pub fn lookup(&self, key: &FlowKey) -> Option<RuleId> {
        let mut ignored = FlowKey::default();
        self.entries.lookup(key, &mut ignored).map(|(id, _)| id)
    }

    pub fn get(&self, id: RuleId) -> Option<&CacheEntry> {
        self.entries.get(id)
    }

    pub fn get_mut(&mut self, id: RuleId) -> Option<&mut CacheEntry> {
        self.entries.get_mut(id)
    }

    /// Inserts an entry; returns its id if it is new. A full cache makes room by retiring its
    /// least recently used eighth (one scan pays for many inserts), never by flushing: the
    /// entries in use, and their kernel copies, stay.
    pub fn insert(&mut self, key: &FlowKey, mask: &FlowKey, entry: CacheEntry) -> Option<RuleId> {
        if self.entries.len() >= self.max_entries {
            self.retire_least_used(self.max_entries.div_ceil(8));
        }
        // A racing identical translation (same masked key) is already there: keep one.
        if self.entries.find_exact(key, mask, 0).is_none() {
            let id = self.entries.insert(key, mask, 0, entry);
            let reads = &self.entries.get(id).expect("just inserted").reads;
            self.index.add(id, mask, reads);
            Some(id)
        } else {
            None
        }
    }

    /// Takes one entry out, noting it for the datapath's copy; false if it was gone already.
    fn take(&mut self, id: RuleId) -> bool {
        let Some((_, mask, _)) = self.entries.rule_match(id) else { return false };
        let mask = *mask;
        let Some(entry) = self.entries.remove(id) else { return false };
        self.index.remove(id, &mask, &entry.reads);
        self.retired.push(id);
        true
    }

    /// Retires the entries `change` can affect; returns how many went.
    pub fn revalidate(&mut self, change: &Change) -> usize {
        let mut hit = Vec::new();
        self.index.affected(change, &mut hit);
        let gone = hit.into_iter().filter(|&id| self.take(id)).count();
        self.retired_total += gone as u64;
        gone
    }

    fn retire_least_used(&mut self, n: usize) {
        let mut by_use: Vec<(Nanos, RuleId)> = self.entries.iter().map(|(id, e)| (e.last_used, id)).collect();
        let n = n.min(by_use.len());
        if n == 0 {
            return;
        }
        by_use.select_nth_unstable(n - 1);
        for &(_, id) in &by_use[..n] {
            self.evicted_total += self.take(id) as u64;
        }
    }

    /// Entries retired since the last call.
    pub fn take_retired(&mut self) -> Vec<RuleId> {
        std::mem::take(&mut self.retired)
    }

    /// An entry with its (masked) key and its mask.
    pub fn entry(&self, id: RuleId) -> Option<(&CacheEntry, &FlowKey, &FlowKey)> {
        let (key, mask, _) = self.entries.rule_match(id)?;
        Some((self.entries.get(id)?, key, mask))
    }

    pub fn flush(&mut self) {
        if !self.entries.is_empty() {
            self.entries = Classifier::new();
            self.index.clear();
        }
        self.retired.clear();
        self.generation += 1;
    }

    /// When the least recently used entry was last used.
    pub fn oldest_use(&self) -> Option<Nanos> {
        self.entries.iter().map(|(_, e)| e.last_used).min()
    }

    /// Drops entries idle for longer than [`IDLE`].
    pub fn sweep(&mut self, now: Nanos) {
        let stale: Vec<RuleId> =
            self.entries.iter().filter(|(_, e)| now.saturating_sub(e.last_used) > IDLE).map(|(id, _)| id).collect();
        for id in stale {
            self.expired_total += self.take(id) as u64;
        }
    }

    /// Kernel hits on an entry: it stays in use.
    pub fn touch(&mut self, id: RuleId, packets: u64, now: Nanos) {
        if let Some(e) = self.entries.get_mut(id) {
            e.packets += packets;
            e.last_used = e.last_used.max(now);
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &CacheEntry> {
        self.entries.iter().map(|(_, e)| e)
    }
}
