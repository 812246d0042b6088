//! An LPM table whose one key has at most 32 bits, as multibit arrays (issue 53, the kernel's
//! speed): the key's first bits index a first level of slots, and each further 8 bits a block of
//! 256 slots that a slot above points to, as DIR-24-8 does with a smaller first level (at most
//! 2^16 slots, so that a table costs kilobytes, not the 64 MB of 2^24). A slot holds 0 (no
//! entry), an entry's id + 1, or [`BLOCK`] | the block it points to; an entry's value sits at its
//! id in an array. A lookup reads one slot per level (one for a prefix of 16 bits or less of an
//! IPv4 address, three at most) and the value: arrays the verifier inlines, where the LPM trie
//! walks its nodes (some 25 ns at 1 000 routes).
//!
//! Userspace keeps them ([`LpmWriter`]): each entry's value painted over the slots its prefix
//! covers, shorter prefixes first, so that a longer one wins. A frame that looks up while they
//! change finds the old answer or the new one, never a miss: a new block is filled before the
//! slot that points to it; each slot changes from its old word to its new one in one store; an
//! id's value never changes while a slot may lead to it (a changed entry takes a new id); and ids
//! and blocks let go of wait in quarantine until a grace period has passed (the datapath's
//! barrier), since a frame that read the old slot may still read them.

use std::collections::{BTreeMap, HashMap, HashSet};

/// A slot's bit that makes it point to a block (the rest is the block's number).
pub const BLOCK: u32 = 1 << 31;
/// Slots per block (a block is one element of the slots map).
pub const SLOTS: u32 = 256;
/// The most bytes a table's slots may take; a bigger table is kept in an LPM trie.
const MAX_BYTES: u64 = 32 << 20;

/// The shape of one table's arrays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LpmArrays {
    /// The slots map: blocks of [`SLOTS`] words, the first level's first.
    pub slots_map: String,
    /// The key's width.
    pub width: u32,
    /// The bits the first level takes (the rest: 8 a level).
    pub first_bits: u32,
    /// Blocks the first level fills.
    pub first_blocks: u32,
    /// Blocks in the slots map: the first level's, then room for two of each further level's per
    /// entry (those of the entries written and of those just let go of, in quarantine).
    pub blocks: u32,
    /// Cells of the values map: two per entry, for the same reason.
    pub ids: u32,
}

impl LpmArrays {
    /// The arrays of a table of `size` entries keyed by `width` bits, None when the key is too
    /// wide or the arrays too big (the table is then a trie).
    pub fn for_table(slots_map: String, width: u32, size: usize) -> Option<LpmArrays> {
        if width == 0 || width > 32 {
            return None;
        }
        let deeper = width.saturating_sub(16).div_ceil(8);
        let first_bits = width - 8 * deeper;
        let first_blocks = ((1u64 << first_bits) / SLOTS as u64).max(1);
        let blocks = first_blocks + 2 * size as u64 * deeper as u64;
        let ids = 2 * size.max(1) as u64;
        if blocks * 4 * SLOTS as u64 > MAX_BYTES || ids > (BLOCK - 1) as u64 {
            return None;
        }
        Some(LpmArrays {
            slots_map,
            width,
            first_bits,
            first_blocks: first_blocks as u32,
            blocks: blocks as u32,
            ids: ids as u32,
        })
    }

    /// Levels below the first.
    pub fn deeper_levels(&self) -> u32 {
        (self.width - self.first_bits) / 8
    }

    /// The key's bits that levels 0..=`level` index.
    fn bits_through(&self, level: u32) -> u32 {
        self.first_bits + 8 * level
    }

    /// The level whose slots a prefix of `len` bits fills.
    fn level_of(&self, len: u32) -> u32 {
        len.saturating_sub(self.first_bits).div_ceil(8)
    }

    /// C that sets `v` to the value of the longest prefix of `key` (a C expression), or leaves it 0.
    pub fn lookup_c(&self, key: &str, values_map: &str) -> String {
        let w = self.width;
        let mask = if w == 32 { "0xffffffffu".to_string() } else { format!("0x{:x}u", (1u64 << w) - 1) };
        let first = self.first_bits;
        let mut s = format!(
            "\t__u32 kv = (__u32)({key}) & {mask};\n\t__u32 at = kv >> {};\n\t__u32 blk = at >> 8;\n\t\
             __u32 *slots = bpf_map_lookup_elem(&{m}, &blk);\n\t__u32 s = slots ? slots[at & 0xff] : 0;\n",
            w - first,
            m = self.slots_map
        );
        for level in 1..=self.deeper_levels() {
            s += &format!(
                "\tif (s & 0x{BLOCK:x}u) {{\n\t\tblk = s & 0x{:x}u;\n\t\tslots = bpf_map_lookup_elem(&{}, &blk);\n\t\t\
                 s = slots ? slots[(kv >> {}) & 0xff] : 0;\n\t}}\n",
                BLOCK - 1,
                self.slots_map,
                w - self.bits_through(level)
            );
        }
        // A pointer left after the last level cannot be (a block is only below a longer prefix).
        s += &format!(
            "\tif (s && !(s & 0x{BLOCK:x}u)) {{\n\t\t__u32 id = s - 1;\n\t\tv = bpf_map_lookup_elem(&{values_map}, &id);\n\t}}\n"
        );
        s
    }
}

/// One entry as the writer paints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LpmEntry {
    /// The prefix's bits, right-aligned in the key's width (those past the prefix are ignored).
    pub value: u32,
    pub len: u32,
    pub priority: i64,
    /// The value the kernel reads (`table_value`): an entry whose value changes (its action,
    /// data, or the position its hits count at) takes a new id.
    pub value_bytes: Vec<u8>,
}

/// What one change writes, in this order: the values of new ids (before any slot leads to
/// them), then the slot words, each stored whole.
#[derive(Debug, Default)]
pub struct LpmPlan {
    pub values: Vec<(u32, Vec<u8>)>,
    /// (block, slot, word).
    pub stores: Vec<(u32, u32, u32)>,
    /// Each entry's id, by its position.
    pub ids: Vec<u32>,
}

/// The arrays as last written, and the ids and blocks free, or waiting for a grace period.
#[derive(Debug)]
pub struct LpmWriter {
    shape: LpmArrays,
    /// Each live block's words (the first level's always), and its level.
    blocks: HashMap<u32, (u32, Vec<u32>)>,
    /// The block below each (level ≥ 1, key bits above the level) that has one.
    paths: BTreeMap<(u32, u32), u32>,
    /// Each live entry's id, by what it is (prefix, length, value).
    ids: HashMap<(u32, u32, Vec<u8>), u32>,
    free_ids: Vec<u32>,
    held_ids: Vec<u32>,
    free_blocks: Vec<u32>,
    held_blocks: Vec<u32>,
}

impl LpmWriter {
    /// Arrays as the kernel makes them: every slot 0.
    pub fn new(shape: LpmArrays) -> LpmWriter {
        let blocks = (0..shape.first_blocks).map(|b| (b, (0, vec![0; SLOTS as usize]))).collect();
        // Popped from the end: the lowest first.
        let free_ids = (0..shape.ids).rev().collect();
        let free_blocks = (shape.first_blocks..shape.blocks).rev().collect();
        LpmWriter {
            shape,
            blocks,
            paths: BTreeMap::new(),
            ids: HashMap::new(),
            free_ids,
            held_ids: Vec::new(),
            free_blocks,
            held_blocks: Vec::new(),
        }
    }

    /// Whether ids or blocks wait for a grace period.
    pub fn holds(&self) -> bool {
        !self.held_ids.is_empty() || !self.held_blocks.is_empty()
    }

    /// Whether `entries` new entries might not find free ids and blocks without those in
    /// quarantine.
    pub fn short_of_room(&self, entries: usize) -> bool {
        self.free_ids.len() < entries || self.free_blocks.len() < entries * self.shape.deeper_levels() as usize
    }

    /// A grace period began after everything in quarantine was let go of, and ended.
    pub fn grace_passed(&mut self) {
        self.free_ids.append(&mut self.held_ids);
        self.free_blocks.append(&mut self.held_blocks);
    }

    /// The writes that take the arrays to `entries` (the table's, in its order), without a gap.
    /// Err when ids or blocks run out (see [`short_of_room`](Self::short_of_room)); the writer is
    /// then unchanged.
    pub fn plan(&mut self, entries: &[LpmEntry]) -> Result<LpmPlan, String> {
        let w = self.shape.width;
        let masked = |e: &LpmEntry| {
            let len = e.len.min(w);
            if len == 0 {
                0
            } else {
                e.value & (u32::MAX >> (32 - len)) << (w - len)
            }
        };
        // Ids: an entry as it was keeps its own; any other takes a free one.
        let mut plan = LpmPlan::default();
        let mut ids = HashMap::new();
        let mut free_ids = self.free_ids.clone();
        for e in entries {
            let key = (masked(e), e.len.min(w), e.value_bytes.clone());
            let id = match ids.get(&key).or_else(|| self.ids.get(&key)) {
                Some(&id) => id,
                None => {
                    let id = free_ids.pop().ok_or("no free id: the table's entries changed too fast")?;
                    plan.values.push((id, e.value_bytes.clone()));
                    id
                }
            };
            ids.insert(key, id);
            plan.ids.push(id);
        }
        // Blocks: one below each prefix's path at every level above its own; a path that had
        // one keeps it.
        let mut paths = BTreeMap::new();
        let mut free_blocks = self.free_blocks.clone();
        let mut fresh = Vec::new();
        for e in entries {
            let (value, len) = (masked(e), e.len.min(w));
            for level in 1..=self.shape.level_of(len) {
                let path = (level, value >> (w - self.shape.bits_through(level - 1)));
                if paths.contains_key(&path) {
                    continue;
                }
                let b = match self.paths.get(&path) {
                    Some(&b) => b,
                    None => {
                        let b = free_blocks.pop().ok_or("no free block: the table's entries changed too fast")?;
                        fresh.push(b);
                        b
                    }
                };
                paths.insert(path, b);
            }
        }
        // The words: pointers first, then the entries painted shortest first, and of one length
        // the worse first (lower priority, then later in the table), so that the best is left.
        let mut words: HashMap<u32, (u32, Vec<u32>)> =
            (0..self.shape.first_blocks).map(|b| (b, (0, vec![0; SLOTS as usize]))).collect();
        for (&(level, _), &b) in &paths {
            words.insert(b, (level, vec![0; SLOTS as usize]));
        }
        for (&(level, path), &b) in &paths {
            let (above, slot) =
                if level == 1 { (path / SLOTS, path % SLOTS) } else { (paths[&(level - 1, path >> 8)], path & 0xff) };
            words.get_mut(&above).unwrap().1[slot as usize] = BLOCK | b;
        }
        let mut order: Vec<usize> = (0..entries.len()).collect();
        order.sort_by_key(|&i| (entries[i].len.min(w), entries[i].priority, std::cmp::Reverse(i)));
        for i in order {
            let (value, len) = (masked(&entries[i]), entries[i].len.min(w));
            let level = self.shape.level_of(len);
            let bits = self.shape.bits_through(level);
            let start = value >> (w - bits);
            for at in start..start + (1 << (bits - len)) {
                let (b, slot) = if level == 0 {
                    (at / SLOTS, at % SLOTS)
                } else {
                    (paths[&(level, value >> (w - self.shape.bits_through(level - 1)))], at & 0xff)
                };
                paint(&mut words, b, slot, plan.ids[i] + 1);
            }
        }
        // Stores: the new blocks whole (nothing leads to them yet), then what changed in the
        // others, the deepest first.
        for &b in &fresh {
            for (slot, &word) in words[&b].1.iter().enumerate() {
                plan.stores.push((b, slot as u32, word));
            }
        }
        let mut kept: Vec<(u32, u32)> =
            words.iter().filter(|(b, _)| !fresh.contains(b)).map(|(&b, (level, _))| (*level, b)).collect();
        kept.sort_by_key(|&(level, b)| (std::cmp::Reverse(level), b));
        for (_, b) in kept {
            let (new, old) = (&words[&b].1, &self.blocks[&b].1);
            for slot in 0..SLOTS as usize {
                if new[slot] != old[slot] {
                    plan.stores.push((b, slot as u32, new[slot]));
                }
            }
        }
        // What is let go of waits for a grace period.
        let live_ids: HashSet<u32> = ids.values().copied().collect();
        let mut held_ids: Vec<u32> = self.ids.values().filter(|id| !live_ids.contains(id)).copied().collect();
        held_ids.sort_unstable();
        held_ids.dedup();
        let live_blocks: HashSet<u32> = paths.values().copied().collect();
        let held_blocks: Vec<u32> = self.paths.values().filter(|b| !live_blocks.contains(b)).copied().collect();
        self.held_ids.extend(held_ids);
        self.held_blocks.extend(held_blocks);
        self.free_ids = free_ids;
        self.free_blocks = free_blocks;
        self.ids = ids;
        self.paths = paths;
        self.blocks = words;
        Ok(plan)
    }

    /// The id the longest prefix of `key` leads to, as the kernel's lookup reads the arrays: for
    /// tests.
    pub fn lookup(&self, key: u32) -> Option<u32> {
        let w = self.shape.width;
        let at = key >> (w - self.shape.first_bits);
        let mut word = self.blocks[&(at / SLOTS)].1[(at % SLOTS) as usize];
        for level in 1..=self.shape.deeper_levels() {
            if word & BLOCK != 0 {
                word = self.blocks[&(word & !BLOCK)].1[((key >> (w - self.shape.bits_through(level))) & 0xff) as usize];
            }
        }
        (word != 0 && word & BLOCK == 0).then(|| word - 1)
    }
}

/// Sets a slot's answer, or, where it points to a block, every slot's below it.
fn paint(words: &mut HashMap<u32, (u32, Vec<u32>)>, b: u32, slot: u32, answer: u32) {
    let word = words[&b].1[slot as usize];
    if word & BLOCK != 0 {
        for below in 0..SLOTS {
            paint(words, word & !BLOCK, below, answer);
        }
    } else {
        words.get_mut(&b).unwrap().1[slot as usize] = answer;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u32 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (self.0 >> 33) as u32
        }
    }

    /// What the kernel's arrays hold, changed store by store as the plan says.
    struct Kernel {
        blocks: HashMap<u32, Vec<u32>>,
        values: HashMap<u32, Vec<u8>>,
        shape: LpmArrays,
    }

    impl Kernel {
        /// The value the kernel's lookup (`lookup_c`) finds for `key`.
        fn lookup(&self, key: u32) -> Option<Vec<u8>> {
            let (w, a) = (self.shape.width, &self.shape);
            let slot = |b: u32, s: u32| self.blocks.get(&b).map_or(0, |words| words[s as usize]);
            let at = key >> (w - a.first_bits);
            let mut word = slot(at >> 8, at & 0xff);
            for level in 1..=a.deeper_levels() {
                if word & BLOCK != 0 {
                    word = slot(word & !BLOCK, (key >> (w - a.bits_through(level))) & 0xff);
                }
            }
            if word == 0 || word & BLOCK != 0 {
                return None;
            }
            Some(self.values.get(&(word - 1)).expect("a slot leads to an id with no value").clone())
        }
    }

    /// The software target's answer: the longest prefix, then the highest priority, then the
    /// earliest.
    fn reference(entries: &[LpmEntry], w: u32, key: u32) -> Option<Vec<u8>> {
        let covers = |e: &LpmEntry| e.len == 0 || (key ^ e.value) >> (w - e.len) == 0;
        let mut best: Option<&LpmEntry> = None;
        for e in entries.iter().filter(|e| covers(e)) {
            if best.is_none_or(|b| (e.len, e.priority) > (b.len, b.priority)) {
                best = Some(e);
            }
        }
        best.map(|e| e.value_bytes.clone())
    }

    fn entry(rng: &mut Rng, w: u32) -> LpmEntry {
        let len = rng.next() % (w + 1);
        let value = if len == 0 { 0 } else { (rng.next() & (u32::MAX >> (32 - w))) >> (w - len) << (w - len) };
        // A value of 16 bytes: action, index (0 here), one argument.
        let mut value_bytes = vec![1, 0, 0, 0, 0, 0, 0, 0];
        value_bytes.extend_from_slice(&(rng.next() as u64 % 4).to_ne_bytes());
        LpmEntry { value, len, priority: (rng.next() % 2) as i64, value_bytes }
    }

    /// Every key where some prefix begins or ends, and its neighbours.
    fn probes(entries: &[LpmEntry], w: u32) -> Vec<u32> {
        let top = u32::MAX >> (32 - w);
        let mut keys = vec![0, top];
        for e in entries {
            let span = if e.len == 0 { top } else { top >> e.len };
            let end = e.value | span;
            keys.extend([e.value, e.value.wrapping_sub(1) & top, end, end.wrapping_add(1) & top]);
        }
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// Tables of several widths changed again and again: after every change the arrays answer
    /// every key at every prefix's boundary as the software target does, and after every single
    /// store of a change each such key finds the old answer or the new one, never a miss or a
    /// third.
    #[test]
    fn every_boundary_answers_as_software_and_no_store_opens_a_gap() {
        for (w, size) in [(32, 64), (24, 48), (20, 32), (12, 32), (6, 16), (17, 32)] {
            let shape = LpmArrays::for_table("s".into(), w, size).unwrap();
            let mut writer = LpmWriter::new(shape.clone());
            let mut kernel = Kernel { blocks: HashMap::new(), values: HashMap::new(), shape: shape.clone() };
            let mut rng = Rng(w as u64 * 7919);
            let mut entries: Vec<LpmEntry> = Vec::new();
            for round in 0..40 {
                let old = entries.clone();
                // Some go, some come, some change their value.
                entries.retain(|_| !rng.next().is_multiple_of(4));
                for e in entries.iter_mut() {
                    if rng.next().is_multiple_of(8) {
                        e.value_bytes[8] ^= 1;
                    }
                }
                while entries.len() < size && !rng.next().is_multiple_of(3) {
                    entries.push(entry(&mut rng, w));
                }
                let probe = probes(&[old.clone(), entries.clone()].concat(), w);
                if writer.short_of_room(entries.len()) {
                    writer.grace_passed();
                }
                let plan = writer.plan(&entries).unwrap();
                for (id, v) in plan.values {
                    kernel.values.insert(id, v);
                }
                for (i, (b, slot, word)) in plan.stores.iter().enumerate() {
                    kernel.blocks.entry(*b).or_insert_with(|| vec![0; SLOTS as usize])[*slot as usize] = *word;
                    // Every store of a small change; every 64th of a big one.
                    if plan.stores.len() > 2000 && i % 64 != 0 {
                        continue;
                    }
                    for &key in &probe {
                        let got = kernel.lookup(key);
                        assert!(
                            got == reference(&old, w, key) || got == reference(&entries, w, key),
                            "width {w} round {round}: key {key:#x} found {got:?} after store {i} of {}",
                            plan.stores.len()
                        );
                    }
                }
                for &key in &probe {
                    assert_eq!(
                        kernel.lookup(key),
                        reference(&entries, w, key),
                        "width {w} round {round}: key {key:#x}"
                    );
                    assert_eq!(
                        writer.lookup(key).map(|id| id + 1),
                        kernel.lookup(key).map(|_| kernel_word(&kernel, key)),
                    );
                }
            }
        }
    }

    fn kernel_word(k: &Kernel, key: u32) -> u32 {
        let (w, a) = (k.shape.width, &k.shape);
        let slot = |b: u32, s: u32| k.blocks.get(&b).map_or(0, |words| words[s as usize]);
        let at = key >> (w - a.first_bits);
        let mut word = slot(at >> 8, at & 0xff);
        for level in 1..=a.deeper_levels() {
            if word & BLOCK != 0 {
                word = slot(word & !BLOCK, (key >> (w - a.bits_through(level))) & 0xff);
            }
        }
        word
    }

    /// A key of 32 bits takes a first level of 2^16 slots and two of 8 bits; one of 24, one;
    /// one of 12, the first only; and a table too big for the arrays is left to the trie.
    #[test]
    fn the_levels_follow_the_width_and_a_big_table_stays_a_trie() {
        let a = LpmArrays::for_table("s".into(), 32, 1024).unwrap();
        assert_eq!((a.first_bits, a.deeper_levels(), a.first_blocks, a.blocks, a.ids), (16, 2, 256, 256 + 4096, 2048));
        let a = LpmArrays::for_table("s".into(), 24, 1024).unwrap();
        assert_eq!((a.first_bits, a.deeper_levels()), (16, 1));
        let a = LpmArrays::for_table("s".into(), 12, 10).unwrap();
        assert_eq!((a.first_bits, a.deeper_levels(), a.first_blocks), (12, 0, 16));
        assert!(LpmArrays::for_table("s".into(), 48, 10).is_none());
        assert!(LpmArrays::for_table("s".into(), 32, 1 << 16).is_none());
    }
}
