//! A table's lookup by tuple space search, the idea the OpenFlow pipeline's classifier (and Open
//! vSwitch's) is built on: entries whose matches share one mask per key form a group with one
//! hash of their masked values, so that a lookup is one probe per group rather than a test of
//! every entry. An exact table is one group (one probe); an LPM table is one group per prefix
//! length, probed longest first, so that the first hit ends it; a ternary table one group per
//! mask, probed in the order of the best entry each holds, ending where no later group could
//! hold a better entry than the one found.
//!
//! The answer is the scan's ([`scan`], this file's tests' reference): among the entries that match,
//! the longest LPM prefixes (summed over the keys), then the highest priority, then the one
//! inserted first. Range matches cannot be masked: a group hashes the other keys and tests the
//! ranges of the entries in the bucket it probes.

use std::cmp::Reverse;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

use super::{mask, Entry, Match};

/// How an entry ranks among those that match: the longer prefixes, the higher priority, the
/// earlier place. No two entries of a table rank alike (their places differ).
type Rank = (u32, i64, Reverse<usize>);

fn rank(e: &Entry, place: usize) -> Rank {
    let prefixes = e.keys.iter().map(|m| if let Match::Lpm { prefix, .. } = m { *prefix } else { 0 }).sum();
    (prefixes, e.priority, Reverse(place))
}

/// The mask of the key bits `m` compares, and its value under it (ranges: none, tested apart).
fn masked(m: &Match, width: u32) -> (u128, u128) {
    match *m {
        Match::Exact(v) => (u128::MAX, v),
        Match::Ternary { value, mask } => (mask, value & mask),
        Match::Lpm { value, prefix } => {
            let m = if prefix == 0 { 0 } else { mask(width) & !mask(width.saturating_sub(prefix)) };
            (m, value & m)
        }
        Match::Range { .. } | Match::Any => (0, 0),
    }
}

/// Whether entry `e` matches `key` (one value per key, `widths` the keys' widths).
fn matches(e: &Entry, widths: &[u32], key: &[u128]) -> bool {
    e.keys.iter().zip(key).zip(widths).all(|((m, k), w)| m.matches(*k, *w))
}

/// The entry a lookup of `key` finds, by testing every entry: what [`Classifier::lookup`] must
/// answer (its tests' reference).
#[cfg(test)]
pub(super) fn scan(entries: &[Entry], widths: &[u32], key: &[u128]) -> Option<usize> {
    let hits = entries.iter().enumerate().filter(|(_, e)| matches(e, widths, key));
    hits.max_by_key(|(i, e)| rank(e, *i)).map(|(i, _)| i)
}

/// The buckets of a group are found by a hash of the masked key computed once per probe (its
/// fingerprint); the map itself need not hash that hash again.
#[derive(Clone, Copy, Default)]
struct AlreadyHashed(u64);

impl Hasher for AlreadyHashed {
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 fingerprints are hashed")
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The entries whose matches have these masks, by the hash of their masked values; a bucket's
/// entries best first (more than one where ranges or priorities differ, or hashes collide).
#[derive(Clone, Debug)]
struct Tuple {
    masks: Vec<u128>,
    /// The best rank among its entries: no probe of this group can find better.
    best: Rank,
    /// How many entries it holds: an empty group is left out of the order of probing.
    len: usize,
    buckets: HashMap<u64, Vec<(Rank, usize)>, BuildHasherDefault<AlreadyHashed>>,
}

/// A table's entries by tuple space (see the module). It holds entries' places in the table's
/// list, which keeps the order they were inserted in: an insert places one entry, a delete takes
/// one out and moves the later places down by one (which keeps their order), so that neither
/// sorts nor hashes any other entry.
#[derive(Clone, Debug)]
pub(super) struct Classifier {
    /// The fingerprints' seed, this table's own. A frame chooses the keys it probes with but not
    /// the buckets: those hold the control plane's entries, each tested in full, so a key whose
    /// fingerprint collides costs a probe of one bucket and no more. A fast hash (the scheme of
    /// rustc's FxHash, then MurmurHash3's finalizer to spread it over the bits the map uses)
    /// serves, where SipHash was a tenth of the router's time a frame.
    seed: u64,
    tuples: Vec<Tuple>,
    /// The non-empty groups' numbers, best rank first: the order of probing.
    order: Vec<usize>,
    /// The group of each set of masks (for inserts and deletes).
    by_masks: HashMap<Vec<u128>, usize>,
    /// How many times an entry was put into a bucket: once per insert, unless the whole
    /// classifier is built again (what a delete must not cost).
    pub placements: u64,
}

impl Classifier {
    pub fn new() -> Classifier {
        let seed = RandomState::new().hash_one(0u8);
        Classifier { seed, tuples: Vec::new(), order: Vec::new(), by_masks: HashMap::new(), placements: 0 }
    }

    /// A classifier of these entries: each placed in its bucket, then the groups sorted once.
    pub fn of(entries: &[Entry], widths: &[u32]) -> Classifier {
        let mut c = Classifier::new();
        for i in 0..entries.len() {
            c.place(entries, widths, i);
        }
        c.order = (0..c.tuples.len()).filter(|&t| c.tuples[t].len > 0).collect();
        let tuples = &c.tuples;
        c.order.sort_by_key(|&t| Reverse(tuples[t].best));
        c
    }

    /// The group entry `e` belongs to (if it has one yet), and the fingerprint of its bucket.
    fn group_of(&self, e: &Entry, widths: &[u32]) -> (Vec<u128>, u64) {
        let (masks, values): (Vec<u128>, Vec<u128>) = e.keys.iter().zip(widths).map(|(m, w)| masked(m, *w)).unzip();
        (masks, self.fingerprint(values.into_iter()))
    }

    /// Entry `place` goes into its bucket, its group made if new; the order is left to the caller.
    fn place(&mut self, entries: &[Entry], widths: &[u32], place: usize) -> usize {
        let e = &entries[place];
        let (masks, fingerprint) = self.group_of(e, widths);
        let r = rank(e, place);
        let t = match self.by_masks.get(&masks) {
            Some(&t) => t,
            None => {
                let t = self.tuples.len();
                self.by_masks.insert(masks.clone(), t);
                self.tuples.push(Tuple { masks, best: r, len: 0, buckets: HashMap::default() });
                t
            }
        };
        let tuple = &mut self.tuples[t];
        let bucket = tuple.buckets.entry(fingerprint).or_default();
        let at = bucket.partition_point(|(other, _)| *other > r);
        bucket.insert(at, (r, place));
        tuple.best = if tuple.len == 0 { r } else { tuple.best.max(r) };
        tuple.len += 1;
        self.placements += 1;
        t
    }

    /// Group `t`'s place in the order of probing, after its best rank changed or it emptied.
    fn reorder(&mut self, t: usize) {
        if let Some(now) = self.order.iter().position(|&o| o == t) {
            self.order.remove(now);
        }
        if self.tuples[t].len == 0 {
            return;
        }
        let best = self.tuples[t].best;
        let at = self.order.partition_point(|&o| self.tuples[o].best > best);
        self.order.insert(at, t);
    }

    /// Entry `place` of `entries` joins (the last of the list, as the table appends).
    pub fn insert(&mut self, entries: &[Entry], widths: &[u32], place: usize) {
        let t = self.place(entries, widths, place);
        self.reorder(t);
    }

    /// Entry `place`, which is `e`, leaves: the table removes it from its list, so the places
    /// after it move down by one. Only its group is searched and reordered; the others' places
    /// are renumbered in passing, which keeps every order (no entry lay between).
    pub fn remove(&mut self, e: &Entry, widths: &[u32], place: usize) {
        let (masks, fingerprint) = self.group_of(e, widths);
        let t = *self.by_masks.get(&masks).expect("a table's entries are in its classifier");
        let tuple = &mut self.tuples[t];
        let bucket = tuple.buckets.get_mut(&fingerprint).expect("an entry's bucket is there");
        let at = bucket.iter().position(|&(_, p)| p == place).expect("an entry is in its bucket");
        let (gone, _) = bucket.remove(at);
        if bucket.is_empty() {
            tuple.buckets.remove(&fingerprint);
        }
        tuple.len -= 1;
        let down = |r: &mut Rank| {
            if r.2 .0 > place {
                r.2 .0 -= 1;
            }
        };
        for tuple in &mut self.tuples {
            down(&mut tuple.best);
            for bucket in tuple.buckets.values_mut() {
                for (r, p) in bucket.iter_mut() {
                    down(r);
                    *p = r.2 .0;
                }
            }
        }
        let tuple = &mut self.tuples[t];
        if tuple.len > 0 && gone == tuple.best {
            // Each bucket holds its best first.
            tuple.best = tuple.buckets.values().map(|b| b[0].0).max().expect("a group with entries has a bucket");
        }
        self.reorder(t);
    }

    fn fingerprint(&self, values: impl Iterator<Item = u128>) -> u64 {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut h = self.seed;
        for v in values {
            h = (h.rotate_left(5) ^ v as u64).wrapping_mul(K);
            h = (h.rotate_left(5) ^ (v >> 64) as u64).wrapping_mul(K);
        }
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }

    /// The entry a lookup of `key` finds (as [`scan`] does), with no allocation.
    pub fn lookup(&self, entries: &[Entry], widths: &[u32], key: &[u128]) -> Option<usize> {
        let mut found: Option<(Rank, usize)> = None;
        for &t in &self.order {
            let tuple = &self.tuples[t];
            if found.is_some_and(|(best, _)| tuple.best < best) {
                break;
            }
            let fingerprint = self.fingerprint(key.iter().zip(&tuple.masks).map(|(k, m)| k & m));
            let Some(bucket) = tuple.buckets.get(&fingerprint) else { continue };
            for &(r, place) in bucket {
                if found.is_some_and(|(best, _)| r < best) {
                    break;
                }
                if matches(&entries[place], widths, key) {
                    found = Some((r, place));
                    break;
                }
            }
        }
        found.map(|(_, place)| place)
    }
}

#[cfg(test)]
mod tests {
    //! The classifier against the scan on large random tables: LPM (with an exact key beside),
    //! two LPM keys, ternary with few and with many masks, ranges, ties of priority; inserts,
    //! deletes and lookups interleaved.
    use super::*;

    /// xorshift64*: random enough, and the same tables every run.
    struct Random(u64);

    impl Random {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn bits(&mut self, width: u32) -> u128 {
            (((self.next() as u128) << 64) | self.next() as u128) & mask(width)
        }
    }

    fn entry(keys: Vec<Match>, priority: i64) -> Entry {
        Entry {
            keys,
            priority,
            action: String::new(),
            args: Vec::new(),
            packets: 0,
            bytes: 0,
            meter: Default::default(),
            indirect: None,
            action_at: 0,
        }
    }

    /// A key near entry `e` (its matched bits kept, the rest random) or anywhere.
    fn key_near(r: &mut Random, entries: &[Entry], widths: &[u32]) -> Vec<u128> {
        let random: Vec<u128> = widths.iter().map(|w| r.bits(*w)).collect();
        if entries.is_empty() || r.below(4) == 0 {
            return random;
        }
        let e = &entries[r.below(entries.len() as u64) as usize];
        e.keys
            .iter()
            .zip(widths)
            .zip(random)
            .map(|((m, w), x)| match *m {
                Match::Range { low, high } => low + (x % (high - low + 1)),
                _ => {
                    let (m, v) = masked(m, *w);
                    (v | (x & !m)) & mask(*w)
                }
            })
            .collect()
    }

    /// Builds a classifier of half the entries, then inserts the rest, deletes and looks random
    /// keys up, interleaved, the classifier kept up to date as the table keeps it; every lookup
    /// answers as the scan. Then deletes a tenth of what is left at once and builds afresh, as
    /// well. Returns how many lookups hit.
    fn agree(mut pending: Vec<Entry>, widths: &[u32], r: &mut Random, lookups: usize) -> usize {
        let mut entries: Vec<Entry> = pending.drain(..pending.len() / 2).collect();
        pending.reverse();
        let mut c = Classifier::of(&entries, widths);
        let mut hits = 0;
        let mut look = |c: &Classifier, entries: &[Entry], r: &mut Random, when: &str| {
            let key = key_near(r, entries, widths);
            let want = scan(entries, widths, &key);
            assert_eq!(c.lookup(entries, widths, &key), want, "{when}, key {key:x?}");
            hits += want.is_some() as usize;
        };
        for step in 0..lookups {
            match r.below(8) {
                0 | 1 if !pending.is_empty() => {
                    entries.push(pending.pop().unwrap());
                    c.insert(&entries, widths, entries.len() - 1);
                }
                2 if !entries.is_empty() => {
                    let place = r.below(entries.len() as u64) as usize;
                    c.remove(&entries[place], widths, place);
                    entries.remove(place);
                }
                _ => {}
            }
            look(&c, &entries, r, &format!("step {step}"));
        }
        for _ in 0..entries.len() / 10 {
            entries.remove(r.below(entries.len() as u64) as usize);
        }
        let c = Classifier::of(&entries, widths);
        for _ in 0..lookups {
            look(&c, &entries, r, "built afresh");
        }
        hits
    }

    #[test]
    fn two_lpm_keys_answer_as_the_scan() {
        let mut r = Random(0x5eed_0f21_f5a7);
        let widths = [32, 16];
        let mut entries = Vec::new();
        for _ in 0..3000 {
            // Short prefixes, so that several cover a key and their sums tie.
            let (a, b) = (r.below(13) as u32, r.below(9) as u32);
            let keys = vec![
                Match::Lpm { value: r.bits(4) << 28 & !mask(32 - a), prefix: a },
                if b == 0 { Match::Any } else { Match::Lpm { value: r.bits(16) & !mask(16 - b), prefix: b } },
            ];
            entries.push(entry(keys, r.below(3) as i64));
        }
        let hits = agree(entries, &widths, &mut r, 6_000);
        assert!(hits > 3_000, "too few lookups hit ({hits}) to test the order");
    }

    #[test]
    fn lpm_with_an_exact_key_beside_answers_as_the_scan() {
        let mut r = Random(0x1234_5678_9abc_def1);
        let widths = [32, 9];
        let mut entries = Vec::new();
        for _ in 0..4000 {
            let prefix = r.below(33) as u32;
            // A few ports only, so that prefixes of several lengths cover one key.
            let port = if r.below(8) == 0 { Match::Any } else { Match::Exact(r.bits(2)) };
            let lpm = if prefix == 0 && r.below(2) == 0 {
                Match::Any
            } else {
                Match::Lpm { value: r.bits(32) & !mask(32 - prefix), prefix }
            };
            entries.push(entry(vec![lpm, port], 0));
        }
        // Short prefixes, so that many keys fall under several.
        for _ in 0..500 {
            let prefix = r.below(9) as u32;
            entries.push(entry(vec![Match::Lpm { value: r.bits(32) & !mask(32 - prefix), prefix }, Match::Any], 0));
        }
        let hits = agree(entries, &widths, &mut r, 5_000);
        assert!(hits > 2_500, "too few lookups hit ({hits}) to test the order");
    }

    #[test]
    fn ternary_and_ranges_answer_as_the_scan_ties_included() {
        let mut r = Random(0x0fed_cba9_8765_4321);
        let widths = [48, 16, 8];
        // Few masks (as an ACL has) in one table, and a mask per entry in another.
        for distinct_masks in [12u64, 0] {
            let masks: Vec<(u128, u128)> = (0..distinct_masks).map(|_| (r.bits(48), r.bits(16))).collect();
            // Values from a few: entries of one mask then share buckets, which must keep their
            // best first.
            let values: Vec<(u128, u128)> = (0..8).map(|_| (r.bits(48), r.bits(16))).collect();
            let mut entries = Vec::new();
            for _ in 0..3000 {
                let (m0, m1) = if masks.is_empty() {
                    (r.bits(48) & r.bits(48), r.bits(16) & r.bits(16))
                } else {
                    masks[r.below(masks.len() as u64) as usize]
                };
                let third = match r.below(3) {
                    0 => Match::Any,
                    1 => Match::Exact(r.bits(2)),
                    _ => {
                        let low = r.bits(8);
                        Match::Range { low, high: (low + r.bits(6)).min(255) }
                    }
                };
                // Priorities from a few values: ties, which the earlier entry wins.
                let (v0, v1) = values[r.below(values.len() as u64) as usize];
                let keys = vec![Match::Ternary { value: v0, mask: m0 }, Match::Ternary { value: v1, mask: m1 }, third];
                entries.push(entry(keys, r.below(5) as i64));
            }
            let hits = agree(entries, &widths, &mut r, 5_000);
            assert!(hits > 2_500, "too few lookups hit ({hits}) to test the order");
        }
    }
}
