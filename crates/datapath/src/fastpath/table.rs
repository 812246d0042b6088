//! Where the kernel finds a megaflow (`bpf/fastpath.h`, `bpf/fp_lookup.h`): entries at dense
//! indices of the array `ef_megaflows`, and an open-addressed table of slots, `ef_flow_slots`, that
//! says at which. This is userspace's copy of the slots and the book-keeping of the indices; the
//! kernel maps are written by the caller, in the order this hands out.
//!
//! Arrays, not a hash table, because the verifier inlines an array lookup and a hash table's is a
//! helper call (each ~15 ns on a kernel that guards every return against speculation). The price
//! is that an array slot is written in place, not swapped in whole: so an entry is written only
//! at an index no slot leads to, a slot is pointed at it after, and an index a slot let go of
//! waits in quarantine until an RCU grace period that began after its release has ended
//! (`fastpath/grace.rs`): then no program that read the old slot is still running, and the index
//! may take another entry.

use std::collections::VecDeque;

use super::HASH_MUL;

/// `FLOW_PROBES` in `bpf/fastpath.h`: the slots a lookup tries from a hash's home slot.
pub const FLOW_PROBES: u32 = 8;
/// `FLOW_SLOT_SPREAD`: slots per entry the switch may hold (rounded up to a power of two), so that
/// a probe window is rarely full.
pub const FLOW_SLOT_SPREAD: u32 = 4;
/// A slot whose entry left while a slot after it was still taken: a lookup goes on past it, and
/// an install may take it. Its index part is 0: it leads nowhere.
const TOMBSTONE: u64 = 1 << 32;

/// The kernel's slots for a switch of `entries` translations.
pub fn slot_count(entries: u32) -> u32 {
    (entries.max(1) as u64 * FLOW_SLOT_SPREAD as u64).next_power_of_two().clamp(FLOW_PROBES as u64, 1 << 31) as u32
}

/// The kernel's entry indices for a switch of `entries` translations: a quarter more, so that
/// indices waiting out their quarantine (entries just retired or evicted) do not keep new
/// ones out.
pub fn index_count(entries: u32) -> u32 {
    entries.max(1).saturating_add(entries.max(4) / 4)
}

/// The value of a slot that leads to `index` for keys hashing to `hash`.
fn slot_value(hash: u64, index: u32) -> u64 {
    (hash >> 32) << 32 | (index as u64 + 1)
}

/// The index a slot's value leads to, if any.
pub fn slot_index(value: u64) -> Option<u32> {
    (value as u32).checked_sub(1)
}

pub struct FlowTable {
    slots: Vec<u64>,
    /// Indices from here up were never handed out.
    fresh: u32,
    indices: u32,
    free: Vec<u32>,
    /// (index, the grace period it waits for), oldest first: the ticket of the first barrier
    /// asked for after its slot let go of it, 0 while none has been asked for since.
    cooling: VecDeque<(u32, u64)>,
    /// Each index's hit counters (packets, bytes) as last read: its next entry counts from there.
    seen: Vec<(u64, u64)>,
}

impl FlowTable {
    pub fn new(entries: u32) -> FlowTable {
        FlowTable {
            slots: vec![0; slot_count(entries) as usize],
            fresh: 0,
            indices: index_count(entries),
            free: Vec::new(),
            cooling: VecDeque::new(),
            seen: Vec::new(),
        }
    }

    /// 64 less the bits of `ef_flow_slots`' size: the kernel's `CFG_FLOW_SLOT_SHIFT`.
    pub fn slot_shift(&self) -> u64 {
        64 - self.slots.len().trailing_zeros() as u64
    }

    /// The first slot a lookup of `hash` tries: the top bits of `hash * HASH_MUL`, which every bit
    /// of the hash moves (its own low bits do not change when only a kept word's high bytes do).
    pub fn home(&self, hash: u64) -> u32 {
        (hash.wrapping_mul(HASH_MUL) >> self.slot_shift()) as u32
    }

    /// The slots a lookup of `hash` tries, in order.
    fn window(&self, hash: u64) -> impl Iterator<Item = usize> {
        let (home, mask) = (self.home(hash), self.slots.len() as u32 - 1);
        (0..FLOW_PROBES).map(move |p| (home.wrapping_add(p) & mask) as usize)
    }

    /// The first slot of `hash`'s window a new entry may take (empty, or its entry gone), if any.
    pub fn free_slot(&self, hash: u64) -> Option<u32> {
        self.window(hash).find(|&s| slot_index(self.slots[s]).is_none()).map(|s| s as u32)
    }

    /// Whether `slot` is in `hash`'s window.
    pub fn in_window(&self, hash: u64, slot: u32) -> bool {
        self.window(hash).any(|s| s == slot as usize)
    }

    /// Where the entry at `slot`, whose key hashes to `hash`, may move so that its slot is free
    /// for another: the first free slot of its own window, if no other slot there carries its
    /// tag. A lookup of its key stops at an empty slot only, and every slot before the first free
    /// one is taken, so the key is found there as soon as that slot leads to its index.
    pub fn move_to(&self, hash: u64, slot: u32) -> Option<u32> {
        let to = self.free_slot(hash)?;
        (!self.tagged(hash).any(|(s, _)| s != slot)).then_some(to)
    }

    /// The (slot, index) of each slot of `hash`'s window that carries its tag and leads to an
    /// entry: where an entry for a key with this hash may be.
    pub fn tagged(&self, hash: u64) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.window(hash).filter_map(move |s| {
            let v = self.slots[s];
            (v >> 32 == hash >> 32).then_some(())?;
            slot_index(v).map(|index| (s as u32, index))
        })
    }

    /// Whether a slot of `hash`'s window other than `at` leads to an entry under `hash`'s tag. The
    /// kernel confirms only the first slot with a frame's tag, so a second key with that tag in
    /// the window would be shadowed by the first (or shadow it): it stays in userspace.
    pub fn tag_taken(&self, hash: u64, at: u32) -> bool {
        self.tagged(hash).any(|(s, _)| s != at)
    }

    /// An index for a new entry: one never used, or one whose grace period has ended (`passed`:
    /// the latest barrier ticket that has); None while every index is taken or waiting.
    pub fn take_index(&mut self, passed: u64) -> Option<u32> {
        while let Some(&(index, ticket)) = self.cooling.front() {
            if ticket == 0 || ticket > passed {
                break;
            }
            self.cooling.pop_front();
            self.free.push(index);
        }
        if let Some(index) = self.free.pop() {
            return Some(index);
        }
        (self.fresh < self.indices).then(|| {
            self.fresh += 1;
            self.fresh - 1
        })
    }

    /// An index taken and never pointed at: free again at once.
    pub fn give_back(&mut self, index: u32) {
        self.free.push(index);
    }

    /// Points `slot` at `index` for `hash`; the value to write there.
    pub fn point(&mut self, slot: u32, hash: u64, index: u32) -> u64 {
        let v = slot_value(hash, index);
        self.slots[slot as usize] = v;
        v
    }

    /// `slot` leads nowhere any more: the slots to write, in order, with their new values. A slot
    /// followed by an empty one becomes empty (a lookup stops there), and so, going back, does
    /// each tombstone before it; else it becomes a tombstone.
    pub fn release_slot(&mut self, slot: u32) -> Vec<(u32, u64)> {
        let mask = self.slots.len() - 1;
        let mut writes = Vec::new();
        let mut at = slot as usize;
        self.slots[at] = TOMBSTONE;
        while self.slots[at] == TOMBSTONE && self.slots[(at + 1) & mask] == 0 {
            self.slots[at] = 0;
            writes.push((at as u32, 0));
            at = at.wrapping_sub(1) & mask;
        }
        if writes.is_empty() {
            writes.push((slot, TOMBSTONE));
        }
        writes
    }

    /// `index`, which no slot leads to from now on, waits for a grace period that begins later.
    pub fn cool(&mut self, index: u32) {
        self.cooling.push_back((index, 0));
    }

    /// Whether indices wait for a grace period not yet asked for.
    pub fn wants_grace_period(&self) -> bool {
        self.cooling.back().is_some_and(|&(_, ticket)| ticket == 0)
    }

    /// A barrier was asked for now, under `ticket`: every index released before waits for it.
    pub fn grace_period_asked(&mut self, ticket: u64) {
        for (_, t) in self.cooling.iter_mut().rev().take_while(|(_, t)| *t == 0) {
            *t = ticket;
        }
    }

    /// Indices ever handed out: the counters a harvest reads.
    pub fn high_water(&self) -> u32 {
        self.fresh
    }

    /// A harvest read `counts` (packets, bytes) for every index below the high water mark.
    pub fn harvested(&mut self, counts: &[(u64, u64)]) {
        self.seen.clear();
        self.seen.extend_from_slice(counts);
    }

    /// Where the counters of an entry new at `index` start.
    pub fn seen(&self, index: u32) -> (u64, u64) {
        self.seen.get(index as usize).copied().unwrap_or_default()
    }

    /// Notes counters read for one index (an entry retired or evicted).
    pub fn saw(&mut self, index: u32, counts: (u64, u64)) {
        if let Some(s) = self.seen.get_mut(index as usize) {
            *s = counts;
        }
    }

    /// The slots as the kernel holds them.
    pub fn slots(&self) -> &[u64] {
        &self.slots
    }

    /// The table a kept fast path left (`keep.rs`): its `slots`, of which those leading to an
    /// index `live` says is of the current generation stay (the last run's entries forward on);
    /// the others are released (the slot writes to make come back), their indices waiting a
    /// quarantine; every other index is free. `counts` are every index's counters.
    pub fn adopted(
        entries: u32,
        slots: Vec<u64>,
        live: impl Fn(u32) -> bool,
        counts: Vec<(u64, u64)>,
    ) -> (FlowTable, Vec<(u32, u64)>) {
        let mut t = FlowTable::new(entries);
        let mut writes = Vec::new();
        if slots.len() != t.slots.len() {
            return (t, writes);
        }
        t.slots = slots;
        t.fresh = t.indices;
        t.seen = counts;
        t.seen.resize(t.indices as usize, (0, 0));
        let mut used = vec![false; t.indices as usize];
        for s in 0..t.slots.len() as u32 {
            let Some(index) = slot_index(t.slots[s as usize]) else { continue };
            if index < t.indices && live(index) && !used[index as usize] {
                used[index as usize] = true;
                continue;
            }
            writes.extend(t.release_slot(s));
            if index < t.indices && !used[index as usize] {
                used[index as usize] = true;
                t.cool(index);
            }
        }
        t.free = (0..t.indices).rev().filter(|&i| !used[i as usize]).collect();
        (t, writes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_leave_room_to_probe_and_to_cool() {
        assert_eq!(slot_count(16_384), 65_536);
        assert_eq!(slot_count(1), FLOW_PROBES);
        assert_eq!(slot_count(1000), 4096);
        assert_eq!(index_count(16_384), 20_480);
        assert_eq!(index_count(1), 2);
    }

    /// A hash whose home slot is `home`.
    fn homed_at(t: &FlowTable, home: u32) -> u64 {
        (1u64 << 32..).find(|&h| t.home(h) == home).unwrap()
    }

    /// Keys whose home slot is one take the slots after it in turn; the window's ninth is
    /// refused; a slot let go of before a taken one stays a tombstone (the lookup must go on past
    /// it), and the tail of a chain empties back to its last taken slot.
    #[test]
    fn a_window_fills_in_order_and_empties_from_its_tail() {
        let mut t = FlowTable::new(64);
        let home = homed_at(&t, 5);
        for i in 0..FLOW_PROBES {
            let s = t.free_slot(home).expect("room in the window");
            assert_eq!(s, 5 + i);
            let index = t.take_index(0).unwrap();
            t.point(s, home, index);
        }
        assert_eq!(t.free_slot(home), None, "the window is full");
        assert_eq!(t.free_slot(homed_at(&t, 13)), Some(13), "the next window is not");
        assert_eq!(t.release_slot(7), vec![(7, TOMBSTONE)]);
        assert_eq!(t.free_slot(home), Some(7), "a tombstone is taken again");
        assert_eq!(t.release_slot(12), vec![(12, 0)], "the last of the chain empties");
        assert_eq!(t.release_slot(11), vec![(11, 0)]);
        assert_eq!(t.release_slot(8), vec![(8, TOMBSTONE)]);
        assert_eq!(t.release_slot(10), vec![(10, 0)]);
        assert_eq!(t.release_slot(9), vec![(9, 0), (8, 0), (7, 0)], "and back through the tombstones");
        assert_eq!(t.slots()[5..13], [slot_value(home, 0), slot_value(home, 1), 0, 0, 0, 0, 0, 0]);
    }

    /// Two keys with one tag (their hashes' top 32 bits) whose windows overlap: the second finds
    /// the tag taken, wherever it would go; the first's own slot, taken again, is not counted.
    #[test]
    fn a_tag_is_taken_once_per_window() {
        let mut t = FlowTable::new(64);
        let tag = 0xabcd_0123u64 << 32;
        let first = tag | 1;
        let second = (2..).map(|low| tag | low).find(|&h| t.home(h) == t.home(first)).unwrap();
        let other = (1..).map(|low| 7u64 << 32 | low).find(|&h| t.home(h) == t.home(first)).unwrap();
        let at = t.free_slot(first).unwrap();
        assert!(!t.tag_taken(first, at));
        t.point(at, first, 0);
        assert!(t.tag_taken(second, t.free_slot(second).unwrap()), "the second key with the tag");
        assert!(!t.tag_taken(first, at), "the first key's own slot, replaced in place");
        assert!(!t.tag_taken(other, t.free_slot(other).unwrap()), "another tag in the same window");
        t.release_slot(at);
        assert!(!t.tag_taken(second, t.free_slot(second).unwrap()), "once the first has left");
    }

    /// Keys that differ only in a kept word's high bytes (UDP destination ports: the top 16 bits
    /// of the word that holds them) spread over the slots: the hash's own low bits hardly move
    /// for them, and slots taken from those put 48 ports in one window.
    #[test]
    fn keys_differing_in_high_bytes_spread_over_the_slots() {
        let t = FlowTable::new(32);
        let mut mask = packet::FlowKey::default();
        mask.set(ofp::oxm::Field::UdpDst, u128::MAX);
        let words = super::super::live_words(&mask);
        let mut homes: Vec<u32> = (5000..5048u128)
            .map(|port| {
                let mut key = packet::FlowKey::default();
                key.set(ofp::oxm::Field::UdpDst, port);
                t.home(super::super::key_hash(&key.masked(&mask), words, 0x1234_5678_9abc_def0))
            })
            .collect();
        homes.sort();
        homes.dedup();
        assert!(homes.len() > 30, "48 ports in {} of 128 home slots", homes.len());
    }

    /// A released index comes back only once a grace period asked for after its release has
    /// passed (not one asked for before), and starts its counters from what the last read saw.
    #[test]
    fn an_index_is_reused_only_after_a_grace_period_that_began_after_its_release() {
        let mut t = FlowTable::new(4);
        let all: Vec<u32> = (0..index_count(4)).map(|_| t.take_index(0).unwrap()).collect();
        assert_eq!(all, (0..5).collect::<Vec<_>>());
        assert_eq!(t.take_index(0), None, "every index taken");
        assert!(!t.wants_grace_period());
        t.cool(3);
        assert!(t.wants_grace_period());
        assert_eq!(t.take_index(u64::MAX), None, "no grace period asked for since its release");
        t.grace_period_asked(1);
        assert!(!t.wants_grace_period(), "one asked for covers every index released before");
        t.cool(1);
        t.grace_period_asked(2);
        t.harvested(&[(0, 0), (0, 0), (0, 0), (7, 700), (0, 0)]);
        assert_eq!(t.take_index(0), None, "grace period 1 not over");
        assert_eq!(t.take_index(1), Some(3));
        assert_eq!(t.seen(3), (7, 700));
        assert_eq!(t.take_index(1), None, "index 1 waits for grace period 2, asked for after its release");
        assert_eq!(t.take_index(2), Some(1));
        t.give_back(3);
        assert_eq!(t.take_index(0), Some(3), "an index never pointed at is free at once");
    }

    #[test]
    fn an_adopted_table_keeps_live_slots_and_cools_the_dead_ones() {
        let fresh = FlowTable::new(8);
        let mut slots = vec![0u64; fresh.slots.len()];
        slots[3] = slot_value(3, 0);
        slots[4] = slot_value(3, 1);
        slots[5] = slot_value(5, 2);
        let (mut t, writes) = FlowTable::adopted(8, slots, |i| i != 2, vec![(1, 1); 10]);
        assert_eq!(writes, vec![(5, 0)], "the dead entry's slot is let go of");
        let taken: Vec<u32> = std::iter::from_fn(|| t.take_index(0)).collect();
        assert!(!taken.contains(&0) && !taken.contains(&1) && !taken.contains(&2), "{taken:?}");
        assert_eq!(taken.len(), index_count(8) as usize - 3);
        assert_eq!(t.take_index(u64::MAX), None, "the dead entry's index waits for a grace period");
        t.grace_period_asked(1);
        assert_eq!(t.take_index(1), Some(2), "and is free after it");
    }
}
