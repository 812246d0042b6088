//! The megaflow cache: translations keyed on only the header bits they consulted.
//!
//! Entries never disagree (each gives, for every packet it covers, the translation that packet
//! would get), so they carry no priority and the first hit wins. Any change to what translation
//! reads — flows, groups, meters, ports, learned addresses, switch config — flushes the cache; the
//! next packet of each flow re-translates. That keeps "one truth" trivially: a cache hit is never
//! older than the tables.

use packet::FlowKey;

use crate::classifier::{Classifier, RuleId};
use crate::exec::{Credits, DpAction};
use crate::flow::Nanos;

pub const DEFAULT_MAX_ENTRIES: usize = 65_536;
/// Entries unused this long are dropped by [`FlowCache::sweep`].
pub const IDLE: Nanos = 10_000_000_000;

#[derive(Clone, Debug)]
pub struct CacheEntry {
    pub actions: Vec<DpAction>,
    pub credits: Credits,
    pub last_used: Nanos,
    pub packets: u64,
}

pub struct FlowCache {
    entries: Classifier<CacheEntry>,
    max_entries: usize,
    /// Bumped on every flush, so holders of a [`RuleId`] can tell it went stale.
    pub generation: u64,
}

impl Default for FlowCache {
    fn default() -> Self {
        FlowCache::new(DEFAULT_MAX_ENTRIES)
    }
}

impl FlowCache {
    pub fn new(max_entries: usize) -> Self {
        FlowCache { entries: Classifier::new(), max_entries, generation: 0 }
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

    /// Inserts an entry; returns its id if it is new.
    pub fn insert(&mut self, key: &FlowKey, mask: &FlowKey, entry: CacheEntry) -> Option<RuleId> {
        if self.entries.len() >= self.max_entries {
            self.flush();
        }
        // A racing identical translation (same masked key) is already there: keep one.
        if self.entries.find_exact(key, mask, 0).is_none() {
            Some(self.entries.insert(key, mask, 0, entry))
        } else {
            None
        }
    }

    /// An entry with its (masked) key and its mask.
    pub fn entry(&self, id: RuleId) -> Option<(&CacheEntry, &FlowKey, &FlowKey)> {
        let (key, mask, _) = self.entries.rule_match(id)?;
        Some((self.entries.get(id)?, key, mask))
    }

    pub fn flush(&mut self) {
        if !self.entries.is_empty() {
            self.entries = Classifier::new();
        }
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
            self.entries.remove(id);
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &CacheEntry> {
        self.entries.iter().map(|(_, e)| e)
    }
}
