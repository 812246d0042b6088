//! (About 930 lines with its tests, one concern: rules by mask in subtables, looked up, iterated
//! and changed as one structure.)
//!
//! A tuple-space-search classifier (Srinivasan et al.; the scheme of Open vSwitch's classifier).
//!
//! Rules are grouped into *subtables* by mask. A lookup probes each subtable with one hash lookup of
//! the packet's key under that mask, so its cost grows with the number of distinct masks, not with
//! the number of rules. A probe decides on the hash table's own slot (the key's words under the
//! mask, the priority and the rule are in it), so with a million rules, far from the CPU's caches,
//! a subtable that does not match costs its table's control bytes and one that does a slot and the
//! winner's entry, once: no rule is read to be compared. Subtables are kept sorted by the highest priority they hold; once a match
//! of priority `p` is found, subtables whose best rule cannot beat `p` are not probed at all.
//!
//! Every probed subtable adds its mask to the lookup's *consulted* mask: those are exactly the bits
//! on which the result depends, so a cache entry keyed on them (all other bits wildcarded) gives the
//! same answer for every packet it covers.
//!
//! A request that names rules by a match rather than by a packet (a non-strict flow-mod, an overlap
//! check, a flow-stats filter) visits only the subtables it can touch, as Open vSwitch's cursor does;
//! within one, it is a hash lookup: of the subtable itself when the request's mask is the
//! subtable's, else of a *projection* — the subtable's rules grouped by their key under the
//! request's (narrower) mask, built the first time a flow-mod uses that mask and kept up to date
//! while it is used. So a controller deleting flows non-strictly pays for the rules its match can
//! cover, not for every rule of every wider subtable (10 000 cached flows cost the userspace
//! datapath 0.8 of its rate under 5 000 such deletes a second when each delete walked them).
//!
//! Over 600 lines, one concern: finding rules by packet or by match; half of it is the tests that
//! hold every index to a walk over all rules.

use hashbrown::{HashSet, HashTable};
use packet::{FlowKey, KEY_WORDS};

/// Identifies a rule for as long as it is in the classifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

/// A rule's key is its own, masked; its mask is its subtable's (a million rules do not keep a
/// million copies of a few masks). Not aligned to a cache line's half, though that would put the
/// part of a flow entry a lookup reads in one line: the vector of rules then grows by copying
/// (the allocator's realloc keeps only 16-byte alignment), which cost installs 14-18 % below a
/// million flows, and the lookups were not faster for it in time (slower at a million).
struct Rule<T> {
    key: FlowKey,
    priority: u32,
    subtable: u32,
    data: T,
}

/// Key words a bucket holds itself: a probe decides on them without reading the rule, so a miss
/// touches no rule and a hit only the winner's entry (a million rules are far from the CPU's
/// caches, and each rule read was one or two memory misses more a probe). Three cover the common
/// masks (a microflow's ports, an IPv4 prefix, a MAC on a VLAN and port); the words of a wider mask
/// past these are compared in the rule's key.
const INLINE_WORDS: usize = 3;

/// The rules of one masked key: its highest-priority rule here, any others (the same match at
/// other priorities: rare) in the subtable's `more`, keyed by this rule.
///
/// Aligned to its size: the hash table's slots then never straddle two cache lines (at 8 bytes,
/// every other one did, and a probe's hit cost half a memory miss more).
#[repr(align(32))]
struct Bucket {
    /// The key's first [`INLINE_WORDS`] words under the mask, in the order of `Subtable::words`
    /// (zero past a narrower mask's).
    words: [u64; INLINE_WORDS],
    priority: u32,
    id: RuleId,
}

impl Bucket {
    fn new(masked: &FlowKey, words: &[u8], priority: u32, id: RuleId) -> Bucket {
        let mut inline = [0; INLINE_WORDS];
        for (slot, &w) in inline.iter_mut().zip(words) {
            *slot = masked.word(w as usize);
        }
        Bucket { words: inline, priority, id }
    }
}

struct Subtable {
    mask: FlowKey,
    /// Indices of the words the mask touches: only these are hashed and compared.
    words: Vec<u8>,
    buckets: HashTable<Bucket>,
    /// The lower-priority rules of a bucket with more than one, by the bucket's rule, highest
    /// first.
    more: std::collections::HashMap<RuleId, Vec<(u32, RuleId)>>,
    max_priority: u32,
    n_rules: usize,
    /// Rules per priority: the highest is known after a removal without a scan of the buckets
    /// (a controller deleting flows of a 10 000-rule subtable paid one scan per delete).
    priorities: std::collections::BTreeMap<u32, u32>,
    /// At most [`MAX_PROJECTIONS`], the least recently used dropped first.
    projections: Vec<Projection>,
}

/// Below this many rules a subtable is walked rather than projected.
const PROJECT_FROM: usize = 32;
/// Projections kept per subtable. Each costs about 24 bytes per distinct key under its mask
/// (2.7 MB for 100 000 rules), and a mask not kept costs one walk of the subtable to project again.
const MAX_PROJECTIONS: usize = 4;

/// Rules grouped by their key under a mask (here: a subtable's under a narrower one; in
/// revalidation: cached entries' lookups under the bits a flow shares with them).
pub(crate) struct Projection {
    pub(crate) mask: FlowKey,
    words: Vec<u8>,
    /// By the hash of the key under `mask`: rules of different keys may share a hash, so whoever
    /// reads a group compares the keys.
    groups: HashTable<Group>,
    pub(crate) used: u64,
}

struct Group {
    hash: u64,
    members: Members,
}

/// Most groups of a fine projection hold one rule: it is kept inline, the set only when a second
/// comes (a coarse projection's few groups are large, and a rule leaves one in O(1)).
enum Members {
    One(RuleId),
    Many(Box<HashSet<RuleId>>),
}

impl Projection {
    pub(crate) fn new(mask: &FlowKey, clock: u64) -> Projection {
        Projection { mask: *mask, words: mask_words(mask), groups: HashTable::new(), used: clock }
    }

    pub(crate) fn add(&mut self, key: &FlowKey, id: RuleId) {
        let hash = hash_under(key, &self.mask, &self.words);
        match self.groups.find_mut(hash, |g| g.hash == hash) {
            Some(g) => match &mut g.members {
                Members::Many(set) => {
                    set.insert(id);
                }
                Members::One(other) => {
                    let other = *other;
                    g.members = Members::Many(Box::new(HashSet::from_iter([other, id])));
                }
            },
            None => {
                self.groups.insert_unique(hash, Group { hash, members: Members::One(id) }, |g| g.hash);
            }
        }
    }

    pub(crate) fn remove(&mut self, key: &FlowKey, id: RuleId) {
        let hash = hash_under(key, &self.mask, &self.words);
        if let Ok(mut entry) = self.groups.find_entry(hash, |g| g.hash == hash) {
            let empty = match &mut entry.get_mut().members {
                Members::One(only) => *only == id,
                Members::Many(set) => {
                    set.remove(&id);
                    set.is_empty()
                }
            };
            if empty {
                entry.remove();
            }
        }
    }

    fn group(&self, key: &FlowKey) -> Option<&Members> {
        let hash = hash_under(key, &self.mask, &self.words);
        self.groups.find(hash, |g| g.hash == hash).map(|g| &g.members)
    }

    /// How many candidates [`Projection::candidates`] gives for `key`.
    pub(crate) fn count(&self, key: &FlowKey) -> usize {
        match self.group(key) {
            Some(Members::One(_)) => 1,
            Some(Members::Many(set)) => set.len(),
            None => 0,
        }
    }

    /// Rules whose key under the mask may be `key`'s (bits outside the mask are ignored; the
    /// caller compares).
    pub(crate) fn candidates(&self, key: &FlowKey) -> impl Iterator<Item = RuleId> + '_ {
        let (one, many) = match self.group(key) {
            Some(Members::One(id)) => (Some(*id), None),
            Some(Members::Many(set)) => (None, Some(set.iter().copied())),
            None => (None, None),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
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

/// The hash of `key` under `mask` (`words`: those the mask touches), without a masked copy.
fn hash_under(key: &FlowKey, mask: &FlowKey, words: &[u8]) -> u64 {
    finish(words.iter().fold(hash_seed(), |h, &w| mix(h, key.word(w as usize) & mask.word(w as usize))))
}

fn mask_words(mask: &FlowKey) -> Vec<u8> {
    (0..KEY_WORDS).filter(|&i| mask.word(i) != 0).map(|i| i as u8).collect()
}

/// A live rule's key (buckets and subtables name rules, the classifier owns them).
fn key_of<T>(rules: &[Option<Rule<T>>], id: RuleId) -> &FlowKey {
    &rules[id.0 as usize].as_ref().expect("a subtable names only live rules").key
}

impl Subtable {
    fn new(mask: FlowKey) -> Subtable {
        Subtable {
            mask,
            words: mask_words(&mask),
            buckets: HashTable::new(),
            more: Default::default(),
            max_priority: 0,
            n_rules: 0,
            priorities: Default::default(),
            projections: Vec::new(),
        }
    }

    fn projection(&self, mask: &FlowKey) -> Option<&Projection> {
        self.projections.iter().find(|p| p.mask == *mask)
    }

    /// Projects the subtable's rules under `mask` unless that is done, or not worth it: the
    /// subtable is small, or the mask is the subtable's own (its buckets answer) or empty (every
    /// rule is a candidate: the request touches them all).
    fn project<T>(&mut self, rules: &[Option<Rule<T>>], mask: &FlowKey, clock: u64) {
        if self.n_rules < PROJECT_FROM || *mask == self.mask || mask.is_zero() {
            return;
        }
        if let Some(p) = self.projections.iter_mut().find(|p| p.mask == *mask) {
            p.used = clock;
            return;
        }
        if self.projections.len() >= MAX_PROJECTIONS {
            let oldest = (0..self.projections.len()).min_by_key(|&i| self.projections[i].used).unwrap();
            self.projections.swap_remove(oldest);
        }
        let mut p = Projection::new(mask, clock);
        for b in self.buckets.iter() {
            let key = key_of(rules, b.id);
            p.add(key, b.id);
            for &(_, id) in self.lower(b) {
                p.add(key, id);
            }
        }
        self.projections.push(p);
    }

    /// Rules whose key under `mask` (which this subtable's covers) is `masked`, and perhaps others:
    /// the caller compares.
    fn candidates<'a, T>(&'a self, rules: &[Option<Rule<T>>], mask: &FlowKey, masked: &FlowKey) -> Candidates<'a> {
        if *mask == self.mask {
            match self.find(rules, masked) {
                Some(b) => Candidates::Bucket(Some(b.id), self.lower(b)),
                None => Candidates::Bucket(None, &[]),
            }
        } else if let Some(p) = self.projection(mask) {
            Candidates::Projected(p.candidates(masked).collect())
        } else {
            Candidates::All(self)
        }
    }

    /// A bucket's rules after its first, highest priority first.
    fn lower(&self, b: &Bucket) -> &[(u32, RuleId)] {
        if self.more.is_empty() {
            return &[];
        }
        self.more.get(&b.id).map_or(&[][..], |v| v)
    }

    fn find<T>(&self, rules: &[Option<Rule<T>>], masked: &FlowKey) -> Option<&Bucket> {
        let h = hash_words(masked, &self.words);
        self.buckets.find(h, |b| holds(rules, &self.words, b, masked))
    }

    /// Probes with an unmasked key: masks word by word while hashing, without building a copy.
    /// Only the bucket is read (and, for a mask of more than [`INLINE_WORDS`] words whose first
    /// ones agree, the rule's key).
    #[inline]
    fn probe<T>(&self, rules: &[Option<Rule<T>>], key: &FlowKey) -> Option<&Bucket> {
        let h = finish(
            self.words.iter().fold(hash_seed(), |h, &w| mix(h, key.word(w as usize) & self.mask.word(w as usize))),
        );
        self.buckets.find(h, |b| {
            self.words.iter().enumerate().all(|(j, &w)| {
                bucket_word(rules, &self.words, b, j) == key.word(w as usize) & self.mask.word(w as usize)
            })
        })
    }

    /// Adds a rule of this mask; `key` is masked.
    fn add<T>(&mut self, rules: &[Option<Rule<T>>], key: &FlowKey, priority: u32, id: RuleId) {
        let h = hash_words(key, &self.words);
        let Subtable { buckets, more, words, .. } = self;
        let Some(b) = buckets.find_mut(h, |b| holds(rules, words, b, key)) else {
            buckets.insert_unique(h, Bucket::new(key, words, priority, id), |b| bucket_hash(rules, words, b));
            return;
        };
        // One rule per priority (the caller's promise), highest first, the highest in the bucket.
        let (mut first, mut rest) = ((b.priority, b.id), more.remove(&b.id).unwrap_or_default());
        if priority > first.0 {
            rest.insert(0, first);
            first = (priority, id);
        } else {
            let at = rest.iter().position(|&(p, _)| p < priority).unwrap_or(rest.len());
            rest.insert(at, (priority, id));
        }
        (b.priority, b.id) = first;
        more.insert(first.1, rest);
    }

    /// Removes a rule of this mask; `key` is its (masked) key.
    fn take<T>(&mut self, rules: &[Option<Rule<T>>], key: &FlowKey, id: RuleId) {
        let h = hash_words(key, &self.words);
        let Subtable { buckets, more, words, .. } = self;
        let Ok(mut entry) = buckets.find_entry(h, |b| holds(rules, words, b, key)) else { return };
        let b = entry.get_mut();
        let Some(mut rest) = more.remove(&b.id) else {
            if b.id == id {
                entry.remove();
            }
            return;
        };
        if b.id == id {
            (b.priority, b.id) = rest.remove(0);
        } else {
            rest.retain(|&(_, r)| r != id);
        }
        if !rest.is_empty() {
            more.insert(b.id, rest);
        }
    }
}

/// Word `j` of a bucket's key (of `words[j]` under the mask): its own, or past those, its rule's.
#[inline]
fn bucket_word<T>(rules: &[Option<Rule<T>>], words: &[u8], b: &Bucket, j: usize) -> u64 {
    match b.words.get(j) {
        Some(&w) => w,
        None => key_of(rules, b.id).word(words[j] as usize),
    }
}

/// A bucket's hash, as [`hash_words`] gives it for its key.
fn bucket_hash<T>(rules: &[Option<Rule<T>>], words: &[u8], b: &Bucket) -> u64 {
    finish((0..words.len()).fold(hash_seed(), |h, j| mix(h, bucket_word(rules, words, b, j))))
}

/// Whether the bucket's key is `masked` (a key under the subtable's mask, `words` its words).
fn holds<T>(rules: &[Option<Rule<T>>], words: &[u8], b: &Bucket, masked: &FlowKey) -> bool {
    words.iter().enumerate().all(|(j, &w)| bucket_word(rules, words, b, j) == masked.word(w as usize))
}

/// Where a request's rules are in one subtable.
enum Candidates<'a> {
    /// Exactly these: a bucket's first rule and the others (the request's mask is the subtable's).
    Bucket(Option<RuleId>, &'a [(u32, RuleId)]),
    /// Among these.
    Projected(Vec<RuleId>),
    /// Among all of the subtable's.
    All(&'a Subtable),
}

impl Candidates<'_> {
    /// Whether every candidate is known to match (no compare needed).
    fn exact(&self) -> bool {
        matches!(self, Candidates::Bucket(..))
    }

    fn for_each(&self, mut f: impl FnMut(RuleId) -> bool) {
        match self {
            Candidates::Bucket(first, lower) => first.iter().chain(lower.iter().map(|(_, id)| id)).all(|&id| f(id)),
            Candidates::Projected(ids) => ids.iter().all(|&id| f(id)),
            Candidates::All(st) => st.buckets.iter().all(|b| f(b.id) && st.lower(b).iter().all(|&(_, id)| f(id))),
        };
    }
}

pub struct Classifier<T> {
    rules: Vec<Option<Rule<T>>>,
    free: Vec<u32>,
    subtables: Vec<Subtable>,
    /// Subtable indices, highest max_priority first.
    order: Vec<usize>,
    len: usize,
    /// Counts projection uses, to find the least recently used.
    clock: u64,
    /// Rules a match-named request compared, for the tests of what that costs.
    #[cfg(test)]
    compared: std::cell::Cell<usize>,
}

impl<T> Default for Classifier<T> {
    fn default() -> Self {
        Classifier {
            rules: Vec::new(),
            free: Vec::new(),
            subtables: Vec::new(),
            order: Vec::new(),
            len: 0,
            clock: 0,
            #[cfg(test)]
            compared: Default::default(),
        }
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
        self.rules[id.0 as usize] = Some(Rule { key, priority, subtable: st_idx as u32, data });
        let st = &mut self.subtables[st_idx];
        st.add(&self.rules, &key, priority, id);
        for p in &mut st.projections {
            p.add(&key, id);
        }
        // The probe order changes only when a subtable joins it or its best rule improves: a
        // million inserts into one subtable sort nothing.
        let reorder = st.n_rules == 0 || priority > st.max_priority;
        st.n_rules += 1;
        *st.priorities.entry(priority).or_default() += 1;
        st.max_priority = st.max_priority.max(priority);
        self.len += 1;
        if reorder {
            self.reorder();
        }
        id
    }

    pub fn remove(&mut self, id: RuleId) -> Option<T> {
        let (key, subtable) = {
            let r = self.rules.get(id.0 as usize)?.as_ref()?;
            (r.key, r.subtable as usize)
        };
        // Out of its bucket first: a key wider than a bucket holds is read through its rule, this
        // one perhaps, which must still be there.
        self.subtables[subtable].take(&self.rules, &key, id);
        let rule = self.rules[id.0 as usize].take().expect("looked up above");
        self.free.push(id.0);
        self.len -= 1;
        let st = &mut self.subtables[subtable];
        for p in &mut st.projections {
            p.remove(&rule.key, id);
        }
        st.n_rules -= 1;
        if st.n_rules == 0 {
            st.projections.clear();
        }
        if let std::collections::btree_map::Entry::Occupied(mut e) = st.priorities.entry(rule.priority) {
            *e.get_mut() -= 1;
            if *e.get() == 0 {
                e.remove();
            }
        }
        let was = st.max_priority;
        st.max_priority = st.priorities.last_key_value().map_or(0, |(&p, _)| p);
        if st.n_rules == 0 || st.max_priority != was {
            self.reorder();
        }
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
        self.lookup_ranked(key, consulted).map(|(id, _, data)| (id, data))
    }

    /// [`Classifier::lookup`], with the winner's priority: read from its bucket, it spares the
    /// caller a read of the rule's entry where the priority may sit a cache line from the rest.
    pub fn lookup_ranked(&self, key: &FlowKey, consulted: &mut FlowKey) -> Option<(RuleId, u32, &T)> {
        let mut best: Option<(u32, RuleId)> = None;
        for &i in &self.order {
            let st = &self.subtables[i];
            if let Some((p, _)) = best {
                if st.max_priority < p {
                    break;
                }
            }
            consulted.union_with(&st.mask);
            if let Some(b) = st.probe(&self.rules, key) {
                // A bucket holds its highest-priority rule itself.
                let (p, id) = (b.priority, b.id);
                if best.is_none_or(|(bp, bid)| p > bp || (p == bp && id < bid)) {
                    best = Some((p, id));
                }
            }
        }
        best.map(|(p, id)| (id, p, &self.rules[id.0 as usize].as_ref().unwrap().data))
    }

    /// The rule with exactly this (masked) key, mask and priority.
    pub fn find_exact(&self, key: &FlowKey, mask: &FlowKey, priority: u32) -> Option<RuleId> {
        let st = self.subtables.iter().find(|s| s.mask == *mask && s.n_rules > 0)?;
        let masked = key.masked(mask);
        let b = st.find(&self.rules, &masked)?;
        if b.priority == priority {
            return Some(b.id);
        }
        st.lower(b).iter().find(|&&(p, _)| p == priority).map(|&(_, id)| id)
    }

    pub fn get(&self, id: RuleId) -> Option<&T> {
        self.rules.get(id.0 as usize)?.as_ref().map(|r| &r.data)
    }

    pub fn get_mut(&mut self, id: RuleId) -> Option<&mut T> {
        self.rules.get_mut(id.0 as usize)?.as_mut().map(|r| &mut r.data)
    }

    /// Key (masked), mask and priority of a rule.
    pub fn rule_match(&self, id: RuleId) -> Option<(&FlowKey, &FlowKey, u32)> {
        self.rules.get(id.0 as usize)?.as_ref().map(|r| (&r.key, &self.subtables[r.subtable as usize].mask, r.priority))
    }

    pub fn iter(&self) -> impl Iterator<Item = (RuleId, &T)> {
        self.rules.iter().enumerate().filter_map(|(i, r)| r.as_ref().map(|r| (RuleId(i as u32), &r.data)))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (RuleId, &mut T)> {
        self.rules.iter_mut().enumerate().filter_map(|(i, r)| r.as_mut().map(|r| (RuleId(i as u32), &mut r.data)))
    }

    fn rule(&self, id: RuleId) -> &Rule<T> {
        self.rules[id.0 as usize].as_ref().expect("a subtable names only live rules")
    }

    #[cfg(test)]
    fn compared(&self) {
        self.compared.set(self.compared.get() + 1);
    }

    #[cfg(not(test))]
    fn compared(&self) {}

    /// Rules that a request with `key`/`mask` covers (the non-strict flow-mod and stats filter): every
    /// bit the request constrains, the rule constrains too, to the same value. Only subtables whose
    /// mask covers the request's can hold one; within those, see [`Classifier::project_covered`].
    pub fn covered_by(&self, key: &FlowKey, mask: &FlowKey) -> Vec<RuleId> {
        let masked = key.masked(mask);
        let mut out = Vec::new();
        for st in self.subtables.iter().filter(|st| st.n_rules > 0 && st.mask.covers(mask)) {
            let candidates = st.candidates(&self.rules, mask, &masked);
            let exact = candidates.exact();
            candidates.for_each(|id| {
                self.compared();
                if exact || self.rule(id).key.masked(mask) == masked {
                    out.push(id);
                }
                true
            });
        }
        out
    }

    /// Readies [`Classifier::covered_by`] for requests of `mask`: each large subtable that could
    /// hold a covered rule keeps its rules projected under `mask` from now on, so those requests
    /// compare only the rules they can cover (one walk per subtable now, a hash lookup after).
    pub fn project_covered(&mut self, mask: &FlowKey) {
        self.clock += 1;
        let clock = self.clock;
        for st in self.subtables.iter_mut().filter(|st| st.mask.covers(mask)) {
            st.project(&self.rules, mask, clock);
        }
    }

    /// Rules of `priority` that some packet could match together with a rule of `key`/`mask`.
    /// Only subtables holding that priority are visited; in each, the bits both masks constrain
    /// decide, so the rules with the same values there are the only candidates.
    pub fn overlapping(&self, key: &FlowKey, mask: &FlowKey, priority: u32) -> bool {
        self.subtables.iter().filter(|st| st.priorities.contains_key(&priority)).any(|st| {
            let both = st.mask.masked(mask);
            if both.is_zero() {
                // No bit in common: every rule of the subtable overlaps, one of them has the priority.
                return true;
            }
            let want = key.masked(&both);
            let candidates = st.candidates(&self.rules, &both, &want);
            let mut found = false;
            candidates.for_each(|id| {
                self.compared();
                let r = self.rule(id);
                found = r.priority == priority && r.key.masked(&both) == want;
                !found
            });
            found
        })
    }

    /// Readies [`Classifier::overlapping`] for requests of `mask` and `priority`, as
    /// [`Classifier::project_covered`] does for `covered_by`.
    pub fn project_overlapping(&mut self, mask: &FlowKey, priority: u32) {
        self.clock += 1;
        let clock = self.clock;
        for st in self.subtables.iter_mut().filter(|st| st.priorities.contains_key(&priority)) {
            let both = st.mask.masked(mask);
            st.project(&self.rules, &both, clock);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ofp::oxm::Field;

    /// A key with these fields set (the other tests of the crate build theirs with it too).
    pub(crate) fn key(fields: &[(Field, u128)]) -> FlowKey {
        let mut k = FlowKey::default();
        for &(f, v) in fields {
            k.set(f, v);
        }
        k
    }

    /// A mask of these whole fields.
    pub(crate) fn mask(fields: &[Field]) -> FlowKey {
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
        let a =
            c.insert(&key(&[(Field::InPort, 1), (Field::EthDst, 5)]), &mask(&[Field::InPort, Field::EthDst]), 7, ());
        let _b = c.insert(&key(&[(Field::InPort, 2)]), &mask(&[Field::InPort]), 7, ());
        let covered = c.covered_by(&key(&[(Field::InPort, 1)]), &mask(&[Field::InPort]));
        assert_eq!(covered, vec![a]);
        assert_eq!(c.covered_by(&FlowKey::default(), &FlowKey::default()).len(), 2);
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

    fn udp(src: u128, dst: u128) -> FlowKey {
        key(&[(Field::EthType, 0x800), (Field::IpProto, 17), (Field::UdpSrc, src), (Field::UdpDst, dst)])
    }

    /// 10 000 flows of one shape, and requests that can cover none of them: a request of their
    /// own mask compares nothing, one of a narrower mask compares nothing once projected (each
    /// walked all 10 000 before), and a request that covers rules still finds exactly them.
    #[test]
    fn a_request_compares_only_the_rules_it_can_cover() {
        let mut c = Classifier::new();
        let wide = mask(&[Field::EthType, Field::IpProto, Field::UdpSrc, Field::UdpDst]);
        for port in 0..10_000u128 {
            c.insert(&udp(9000, 10_000 + port), &wide, 200, port);
        }
        let narrow = mask(&[Field::EthType, Field::IpProto, Field::UdpDst]);
        c.insert(&udp(0, 7), &narrow, 100, 99_999);

        let compared = |c: &Classifier<u128>, k: &FlowKey, m: &FlowKey| {
            c.compared.set(0);
            let ids = c.covered_by(k, m);
            (ids.len(), c.compared.get())
        };
        assert_eq!(compared(&c, &udp(7000, 10_005), &wide), (0, 0));
        assert_eq!(compared(&c, &udp(9000, 10_005), &wide), (1, 1));
        assert_eq!(compared(&c, &udp(0, 7), &narrow).0, 1);
        assert!(compared(&c, &udp(0, 7), &narrow).1 > 10_000, "not projected yet: a walk");
        c.project_covered(&narrow);
        assert_eq!(compared(&c, &udp(0, 7), &narrow), (1, 1));
        assert_eq!(compared(&c, &udp(0, 10_005), &narrow), (1, 1));
        assert_eq!(compared(&c, &udp(0, 3), &narrow), (0, 0));

        // Overlap at a priority the wide flows do not have visits none of them; at theirs, the
        // candidates share the request's value on the common bits.
        c.compared.set(0);
        assert!(!c.overlapping(&udp(0, 5), &narrow, 150));
        assert_eq!(c.compared.get(), 0);
        c.project_overlapping(&narrow, 200);
        c.compared.set(0);
        assert!(c.overlapping(&udp(0, 10_005), &narrow, 200));
        assert!(!c.overlapping(&udp(0, 5), &narrow, 200));
        assert_eq!(c.compared.get(), 1);
    }

    /// A repeatable stream of numbers below `n`, for the random tests (xorshift64).
    fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        }
    }

    /// Random rules (masks of up to five words, past the words a bucket holds; one key at several
    /// priorities) and removals: a lookup finds what a walk over every rule finds, the highest
    /// priority and of those the lowest id, and `find_exact` every live rule.
    #[test]
    fn lookups_answer_as_a_walk_does() {
        let fields = [Field::InPort, Field::Metadata, Field::EthType, Field::IpProto, Field::UdpDst, Field::Ipv4Dst];
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let mut c = Classifier::new();
        let mut live: Vec<RuleId> = Vec::new();
        let (mut hits, mut wide) = (0, 0);
        for round in 0..6_000 {
            let chosen: Vec<Field> = fields.iter().copied().filter(|_| next(2) == 1).collect();
            let k = key(&fields.iter().map(|&f| (f, next(3) as u128)).collect::<Vec<_>>());
            if next(4) > 0 || live.is_empty() {
                let m = mask(&chosen);
                let prio = next(5) as u32;
                wide += (mask_words(&m).len() > INLINE_WORDS) as usize;
                if c.find_exact(&k, &m, prio).is_none() {
                    live.push(c.insert(&k, &m, prio, round));
                }
            } else {
                let at = next(live.len() as u64) as usize;
                c.remove(live.swap_remove(at));
            }
            let want = live
                .iter()
                .copied()
                .filter(|&id| {
                    let (rk, rm, _) = c.rule_match(id).unwrap();
                    k.masked(rm) == *rk
                })
                .max_by_key(|&id| (c.rule_match(id).unwrap().2, std::cmp::Reverse(id)));
            let mut consulted = FlowKey::default();
            let got = c.lookup(&k, &mut consulted).map(|(id, _)| id);
            assert_eq!(got, want, "lookup in round {round}");
            hits += got.is_some() as usize;
        }
        for &id in &live {
            let (rk, rm, p) = c.rule_match(id).unwrap();
            assert_eq!(c.find_exact(rk, rm, p), Some(id));
        }
        assert!(hits > 1_000 && wide > 100, "{hits} lookups hit, {wide} rules wider than a bucket's words");
    }

    /// Random rules, removals and requests: what the indexes answer is what a walk over every
    /// rule answers, projected or not.
    #[test]
    fn projections_answer_as_a_walk_does() {
        let fields = [Field::InPort, Field::EthType, Field::IpProto, Field::UdpSrc, Field::UdpDst];
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut c = Classifier::new();
        let mut live: Vec<RuleId> = Vec::new();
        let mut projected = 0;
        let pick = |next: &mut dyn FnMut(u64) -> u64| {
            let chosen: Vec<Field> = fields.iter().copied().filter(|_| next(2) == 1).collect();
            let k = key(&chosen.iter().map(|&f| (f, next(6) as u128)).collect::<Vec<_>>());
            (k, mask(&chosen))
        };
        for round in 0..5_000 {
            if next(3) > 0 || live.is_empty() {
                let (k, m) = pick(&mut next);
                let prio = next(4) as u32;
                if c.find_exact(&k, &m, prio).is_none() {
                    live.push(c.insert(&k, &m, prio, round));
                }
            } else {
                let at = next(live.len() as u64) as usize;
                c.remove(live.swap_remove(at));
            }
            let (k, m) = pick(&mut next);
            let prio = next(4) as u32;
            if next(2) == 1 {
                c.project_covered(&m);
                c.project_overlapping(&m, prio);
            }
            let mut got = c.covered_by(&k, &m);
            got.sort();
            let mut want: Vec<RuleId> = live
                .iter()
                .copied()
                .filter(|&id| {
                    let (rk, rm, _) = c.rule_match(id).unwrap();
                    rm.covers(&m) && rk.masked(&m) == k.masked(&m)
                })
                .collect();
            want.sort();
            assert_eq!(got, want, "covered_by in round {round}");
            let overlap = live.iter().any(|&id| {
                let (rk, rm, p) = c.rule_match(id).unwrap();
                let both = rm.masked(&m);
                p == prio && rk.masked(&both) == k.masked(&both)
            });
            assert_eq!(c.overlapping(&k, &m, prio), overlap, "overlapping in round {round}");
            projected = projected.max(c.subtables.iter().map(|s| s.projections.len()).sum::<usize>());
        }
        assert!(projected >= 8, "the walk was compared with {projected} projections at most");
    }
}
