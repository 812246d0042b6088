//! A tuple-space-search classifier (Srinivasan et al.; the scheme of Open vSwitch's classifier).
//!
//! Rules are grouped into *subtables* by mask. A lookup probes each subtable with one hash lookup of
//! the packet's key under that mask, so its cost grows with the number of distinct masks, not with
//! the number of rules. Subtables are kept sorted by the highest priority they hold; once a match
//! of priority `p` is found, subtables whose best rule cannot beat `p` are not probed at all.
//!
//! Every probed subtable adds its mask to the lookup's *consulted* mask: those are exactly the bits
//! on which the result depends, so a cache entry keyed on them (all other bits wildcarded) gives the
//! same answer for every packet it covers.

use hashbrown::HashTable;
use packet::{FlowKey, KEY_WORDS};

/// Identifies a rule for as long as it is in the classifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

struct Rule<T> {
    key: FlowKey,
    mask: FlowKey,
    priority: u32,
    subtable: usize,
    data: T,
}

struct Bucket {
    key: FlowKey,
    /// Rules with this masked key, highest priority first.
    rules: Vec<(u32, RuleId)>,
}

struct Subtable {
    mask: FlowKey,
    /// Indices of the words the mask touches: only these are hashed and compared.
    words: Vec<u8>,
    buckets: HashTable<Bucket>,
    max_priority: u32,
    n_rules: usize,
    /// Rules per priority: the highest is known after a removal without a scan of the buckets
    /// (a controller deleting flows of a 10 000-rule subtable paid one scan per delete).
    priorities: std::collections::BTreeMap<u32, u32>,
}

/// Where every hash starts: random per process. Frames are chosen by whoever sends them, and the
/// megaflow cache is keyed on their headers: with a known start, a sender could pick keys that
/// all land in one bucket.
fn hash_seed() -> u64 {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SEED.get_or_init(|| {
        use std::hash::BuildHasher;
        std::collections::hash_map::RandomState::new().hash_one(0x243f_6a88_85a3_08d3u64)
    })
}

/// One word into a hash: a multiply, then an xor-shift that folds the product's high bits (where
/// every input bit has effect) back into the low ones.
#[inline]
fn mix(h: u64, word: u64) -> u64 {
    let x = (h ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^ (x >> 32)
}

/// The murmur3 finaliser: the table indexes buckets by the low bits and tags them with the top
/// ones, so both must depend on every bit of every word. (A bare multiply-rotate left the low 14
/// bits of 10 000 keys differing in one UDP port with two values: a linear scan.)
#[inline]
fn finish(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

fn hash_words(key: &FlowKey, words: &[u8]) -> u64 {
    finish(words.iter().fold(hash_seed(), |h, &w| mix(h, key.word(w as usize))))
}

fn words_equal(a: &FlowKey, b: &FlowKey, words: &[u8]) -> bool {
    words.iter().all(|&w| a.word(w as usize) == b.word(w as usize))
}

impl Subtable {
    fn new(mask: FlowKey) -> Subtable {
        let words = (0..KEY_WORDS).filter(|&i| mask.word(i) != 0).map(|i| i as u8).collect();
        Subtable { mask, words, buckets: HashTable::new(), max_priority: 0, n_rules: 0, priorities: Default::default() }
    }

    fn find(&self, masked: &FlowKey) -> Option<&Bucket> {
        let h = hash_words(masked, &self.words);
        self.buckets.find(h, |b| words_equal(&b.key, masked, &self.words))
    }

    /// Probes with an unmasked key: masks word by word while hashing, without building a copy.
    fn probe(&self, key: &FlowKey) -> Option<&Bucket> {
        let h = finish(
            self.words.iter().fold(hash_seed(), |h, &w| mix(h, key.word(w as usize) & self.mask.word(w as usize))),
        );
        self.buckets.find(h, |b| {
            self.words.iter().all(|&w| b.key.word(w as usize) == key.word(w as usize) & self.mask.word(w as usize))
        })
    }
}

pub struct Classifier<T> {
    rules: Vec<Option<Rule<T>>>,
    free: Vec<u32>,
    subtables: Vec<Subtable>,
    /// Subtable indices, highest max_priority first.
    order: Vec<usize>,
    len: usize,
}

impl<T> Default for Classifier<T> {
    fn default() -> Self {
        Classifier { rules: Vec::new(), free: Vec::new(), subtables: Vec::new(), order: Vec::new(), len: 0 }
    }
}

impl<T> Classifier<T> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn n_subtables(&self) -> usize {
        self.order.len()
    }

    /// Inserts a rule; `key` is masked here. The caller ensures no rule with the same key, mask and
    /// priority exists (see [`Classifier::find_exact`]).
    pub fn insert(&mut self, key: &FlowKey, mask: &FlowKey, priority: u32, data: T) -> RuleId {
        let key = key.masked(mask);
        let st_idx = match self.subtables.iter().position(|s| s.mask == *mask) {
            Some(i) => i,
            None => {
                self.subtables.push(Subtable::new(*mask));
                self.subtables.len() - 1
            }
        };
        let id = match self.free.pop() {
            Some(i) => RuleId(i),
            None => {
                self.rules.push(None);
                RuleId(self.rules.len() as u32 - 1)
            }
        };
        self.rules[id.0 as usize] = Some(Rule { key, mask: *mask, priority, subtable: st_idx, data });
        let st = &mut self.subtables[st_idx];
        let h = hash_words(&key, &st.words);
        let words = st.words.clone();
        match st.buckets.find_mut(h, |b| words_equal(&b.key, &key, &words)) {
            Some(b) => {
                let pos = b.rules.iter().position(|&(p, _)| p < priority).unwrap_or(b.rules.len());
                b.rules.insert(pos, (priority, id));
            }
            None => {
                st.buckets.insert_unique(h, Bucket { key, rules: vec![(priority, id)] }, |b| hash_words(&b.key, &words));
            }
        }
        st.n_rules += 1;
        *st.priorities.entry(priority).or_default() += 1;
        st.max_priority = st.max_priority.max(priority);
        self.len += 1;
        self.reorder();
        id
    }

    pub fn remove(&mut self, id: RuleId) -> Option<T> {
        let rule = self.rules.get_mut(id.0 as usize)?.take()?;
        self.free.push(id.0);
        self.len -= 1;
        let st = &mut self.subtables[rule.subtable];
        let h = hash_words(&rule.key, &st.words);
        let words = st.words.clone();
        if let Ok(entry) = st.buckets.find_entry(h, |b| words_equal(&b.key, &rule.key, &words)) {
            let (bucket, slot) = entry.remove();
            let mut bucket = bucket;
            bucket.rules.retain(|&(_, r)| r != id);
            if !bucket.rules.is_empty() {
                slot.into_table().insert_unique(h, bucket, |b| hash_words(&b.key, &words));
            }
        }
        st.n_rules -= 1;
        if let std::collections::btree_map::Entry::Occupied(mut e) = st.priorities.entry(rule.priority) {
            *e.get_mut() -= 1;
            if *e.get() == 0 {
                e.remove();
            }
        }
        st.max_priority = st.priorities.last_key_value().map_or(0, |(&p, _)| p);
        self.reorder();
        Some(rule.data)
    }

    fn reorder(&mut self) {
        let mut order: Vec<usize> = (0..self.subtables.len()).filter(|&i| self.subtables[i].n_rules > 0).collect();
        order.sort_by(|&a, &b| self.subtables[b].max_priority.cmp(&self.subtables[a].max_priority));
        self.order = order;
    }

    /// Highest-priority rule matching `key`; of several with that priority, the lowest id. Each
    /// probed subtable's mask is OR-ed into `consulted`.
    ///
    /// The tie-break makes the winner a function of the matching rules alone, not of the order
    /// subtables happen to be probed in: removing a rule that did not win never changes a winner,
    /// which is what lets revalidation keep cached entries across such removals.
    pub fn lookup(&self, key: &FlowKey, consulted: &mut FlowKey) -> Option<(RuleId, &T)> {
        let mut best: Option<(u32, RuleId)> = None;
        for &i in &self.order {
            let st = &self.subtables[i];
            if let Some((p, _)) = best {
                if st.max_priority < p {
                    break;
                }
            }
            consulted.union_with(&st.mask);
            if let Some(b) = st.probe(key) {
                // A bucket holds one rule per priority, highest first.
                let (p, id) = b.rules[0];
                if best.is_none_or(|(bp, bid)| p > bp || (p == bp && id < bid)) {
                    best = Some((p, id));
                }
            }
        }
        best.map(|(_, id)| (id, &self.rules[id.0 as usize].as_ref().unwrap().data))
    }

    /// The rule with exactly this (masked) key, mask and priority.
    pub fn find_exact(&self, key: &FlowKey, mask: &FlowKey, priority: u32) -> Option<RuleId> {
        let st = self.subtables.iter().find(|s| s.mask == *mask && s.n_rules > 0)?;
        let masked = key.masked(mask);
        let b = st.find(&masked)?;
        b.rules.iter().find(|&&(p, _)| p == priority).map(|&(_, id)| id)
    }

    pub fn get(&self, id: RuleId) -> Option<&T> {
        self.rules.get(id.0 as usize)?.as_ref().map(|r| &r.data)
    }

    pub fn get_mut(&mut self, id: RuleId) -> Option<&mut T> {
        self.rules.get_mut(id.0 as usize)?.as_mut().map(|r| &mut r.data)
    }

    /// Key (masked), mask and priority of a rule.
    pub fn rule_match(&self, id: RuleId) -> Option<(&FlowKey, &FlowKey, u32)> {
        self.rules.get(id.0 as usize)?.as_ref().map(|r| (&r.key, &r.mask, r.priority))
    }

    pub fn iter(&self) -> impl Iterator<Item = (RuleId, &T)> {
        self.rules.iter().enumerate().filter_map(|(i, r)| r.as_ref().map(|r| (RuleId(i as u32), &r.data)))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (RuleId, &mut T)> {
        self.rules.iter_mut().enumerate().filter_map(|(i, r)| r.as_mut().map(|r| (RuleId(i as u32), &mut r.data)))
    }

    /// Rules that a request with `key`/`mask` covers (the non-strict flow-mod and stats filter): every
    /// bit the request constrains, the rule constrains too, to the same value.
    pub fn covered_by<'a>(&'a self, key: &'a FlowKey, mask: &'a FlowKey) -> impl Iterator<Item = RuleId> + 'a {
        let masked = key.masked(mask);
        self.subtables.iter().enumerate().filter(move |(_, st)| st.n_rules > 0 && st.mask.covers(mask)).flat_map(
            move |(_, st)| {
                st.buckets.iter().filter(move |b| b.key.masked(mask) == masked).flat_map(|b| b.rules.iter().map(|&(_, id)| id))
            },
        )
    }

    /// Rules of `priority` that some packet could match together with a rule of `key`/`mask`.
    pub fn overlapping(&self, key: &FlowKey, mask: &FlowKey, priority: u32) -> bool {
        self.subtables.iter().filter(|st| st.n_rules > 0).any(|st| {
            let both = st.mask.masked(mask);
            let want = key.masked(&both);
            st.buckets.iter().any(|b| b.key.masked(&both) == want && b.rules.iter().any(|&(p, _)| p == priority))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofp::oxm::Field;

    fn key(fields: &[(Field, u128)]) -> FlowKey {
        let mut k = FlowKey::default();
        for &(f, v) in fields {
            k.set(f, v);
        }
        k
    }

    fn mask(fields: &[Field]) -> FlowKey {
        let mut m = FlowKey::default();
        for &f in fields {
            m.mask_field(f);
        }
        m
    }

    #[test]
    fn priority_wins_across_subtables() {
        let mut c = Classifier::new();
        c.insert(&key(&[(Field::InPort, 1)]), &mask(&[Field::InPort]), 10, "port");
        c.insert(&key(&[(Field::EthDst, 0xb)]), &mask(&[Field::EthDst]), 20, "dst");
        c.insert(&FlowKey::default(), &FlowKey::default(), 0, "miss");
        let pkt = key(&[(Field::InPort, 1), (Field::EthDst, 0xb)]);
        let mut consulted = FlowKey::default();
        assert_eq!(c.lookup(&pkt, &mut consulted).unwrap().1, &"dst");
        // The miss subtable (priority 0) and port subtable (10) need not be probed after a 20 hit.
        assert_eq!(consulted, mask(&[Field::EthDst]));
        let other = key(&[(Field::InPort, 2), (Field::EthDst, 0xc)]);
        let mut consulted = FlowKey::default();
        assert_eq!(c.lookup(&other, &mut consulted).unwrap().1, &"miss");
        assert_eq!(consulted, mask(&[Field::InPort, Field::EthDst]));
    }

    #[test]
    fn same_key_different_priorities_and_removal() {
        let mut c = Classifier::new();
        let k = key(&[(Field::InPort, 1)]);
        let m = mask(&[Field::InPort]);
        let low = c.insert(&k, &m, 1, "low");
        let high = c.insert(&k, &m, 5, "high");
        let mut scratch = FlowKey::default();
        assert_eq!(c.lookup(&k, &mut scratch).unwrap().0, high);
        assert_eq!(c.find_exact(&k, &m, 1), Some(low));
        assert_eq!(c.remove(high), Some("high"));
        assert_eq!(c.lookup(&k, &mut scratch).unwrap().0, low);
        c.remove(low);
        assert!(c.lookup(&k, &mut scratch).is_none());
        assert!(c.is_empty());
    }

    #[test]
    fn covered_and_overlap() {
        let mut c = Classifier::new();
        let a = c.insert(&key(&[(Field::InPort, 1), (Field::EthDst, 5)]), &mask(&[Field::InPort, Field::EthDst]), 7, ());
        let _b = c.insert(&key(&[(Field::InPort, 2)]), &mask(&[Field::InPort]), 7, ());
        let covered: Vec<_> = c.covered_by(&key(&[(Field::InPort, 1)]), &mask(&[Field::InPort])).collect();
        assert_eq!(covered, vec![a]);
        assert_eq!(c.covered_by(&FlowKey::default(), &FlowKey::default()).count(), 2);
        assert!(c.overlapping(&key(&[(Field::EthDst, 5)]), &mask(&[Field::EthDst]), 7));
        assert!(!c.overlapping(&key(&[(Field::EthDst, 5)]), &mask(&[Field::EthDst]), 8));
        assert!(!c.overlapping(&key(&[(Field::InPort, 3)]), &mask(&[Field::InPort]), 7));
    }

    /// Keys that differ in one small field (a UDP port) spread over the buckets: the low bits the
    /// table indexes by and the top bits it tags with both take many values.
    #[test]
    fn keys_differing_in_one_port_spread() {
        let m = mask(&[Field::InPort, Field::EthType, Field::IpProto, Field::UdpDst]);
        let words: Vec<u8> = (0..KEY_WORDS).filter(|&i| m.word(i) != 0).map(|i| i as u8).collect();
        let (mut low, mut top) = (std::collections::HashSet::new(), std::collections::HashSet::new());
        for port in 10_000..20_000u128 {
            let k = key(&[(Field::InPort, 1), (Field::EthType, 0x800), (Field::IpProto, 17), (Field::UdpDst, port)]);
            let h = hash_words(&k.masked(&m), &words);
            low.insert(h & 0x3fff);
            top.insert(h >> 57);
        }
        // 10 000 keys into 16 384 buckets: about 7 100 distinct if the bits were random.
        assert!(low.len() > 6_500, "{} distinct low 14 bits", low.len());
        assert_eq!(top.len(), 128);
    }

    #[test]
    fn many_rules_one_subtable() {
        let mut c = Classifier::new();
        let m = mask(&[Field::EthDst]);
        for i in 0..10_000u128 {
            c.insert(&key(&[(Field::EthDst, i)]), &m, 1, i);
        }
        assert_eq!(c.n_subtables(), 1);
        let mut scratch = FlowKey::default();
        for i in (0..10_000u128).step_by(997) {
            assert_eq!(*c.lookup(&key(&[(Field::EthDst, i), (Field::InPort, 9)]), &mut scratch).unwrap().1, i);
        }
    }
}
