//! Revalidation: which cached translations a change to the pipeline can affect.
//!
//! A translation records what it read ([`Reads`]): every table lookup with the key the lookup saw
//! and the priority that won, and the groups, meters, ports and learned addresses it looked at. A
//! change ([`Change`]) then retires only the cache entries whose reads it touches, and the rest —
//! in userspace and in the kernel's copy — keep forwarding while a controller changes flows all
//! day (as Open vSwitch's revalidators keep established datapath flows).
//!
//! Why the rules are exact enough to keep "one truth":
//! - A flow *added* to table T changes an entry only if some packet the entry covers reaches T
//!   with a key the flow matches, at a priority not below the flow that won there (equal
//!   priorities are retired too: their order is the classifier's, not the spec's). Every packet an
//!   entry covers agrees with the key that made it on every bit of the entry's mask, and so does
//!   its key at T on those bits (a bit consulted at T was consulted, and a bit rewritten before T
//!   holds the same constant for all of them); bits outside the mask are taken as anything.
//! - A flow *modified or removed* changes an entry only if it won one of the entry's lookups: the
//!   winner of a lookup is the highest-priority match, and losing flows do not decide anything.
//! - A group, meter, port or address changes an entry only if its translation read it.
//!
//! Finding the entries without scanning the cache: lookups are grouped by table and entry mask,
//! and within a group, for a flow whose match shares bits `X` with the mask, indexed by their key
//! under `X` (built on first use of `X`, kept while it is used: a controller's churn repeats a
//! few match shapes). Everything else is an inverted index from what was read to who read it.

use hashbrown::{HashMap, HashSet};
use packet::FlowKey;

use crate::classifier::RuleId;

/// One table lookup a translation made.
#[derive(Clone, Debug)]
pub struct Lookup {
    pub table: u8,
    /// The packet's key as the lookup saw it (after the rewrites before it).
    pub key: FlowKey,
    /// The winning flow's priority and id; `None` when nothing matched.
    pub winner: Option<(u16, RuleId)>,
}

/// What one translation read, besides the header bits of its mask.
#[derive(Clone, Debug, Default)]
pub struct Reads {
    pub lookups: Vec<Lookup>,
    pub groups: Vec<u32>,
    pub meters: Vec<u32>,
    pub ports: Vec<u32>,
    /// It read every port (a flood).
    pub all_ports: bool,
    /// Learned addresses it looked up: (VLAN, MAC).
    pub addresses: Vec<(u16, u64)>,
}

/// A change to something translation reads. (A flow's key and mask make one variant large; changes
/// live only until the operation that made them ends, so boxing them would buy nothing.)
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Change {
    FlowAdded { table: u8, key: FlowKey, mask: FlowKey, priority: u16 },
    /// A flow was removed or its instructions changed.
    FlowChanged { table: u8, id: RuleId },
    Group(u32),
    Meter(u32),
    /// A port appeared, changed or went away.
    Port(u32),
    /// A learned address appeared, moved or aged out.
    Address(u16, u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Dep {
    Winner(u8, RuleId),
    Group(u32),
    Meter(u32),
    Port(u32),
    AnyPort,
    Address(u16, u64),
}

impl Reads {
    fn deps(&self) -> impl Iterator<Item = Dep> + '_ {
        let winners = self.lookups.iter().filter_map(|l| l.winner.map(|(_, id)| Dep::Winner(l.table, id)));
        winners
            .chain(self.groups.iter().map(|&g| Dep::Group(g)))
            .chain(self.meters.iter().map(|&m| Dep::Meter(m)))
            .chain(self.ports.iter().map(|&p| Dep::Port(p)))
            .chain(self.all_ports.then_some(Dep::AnyPort))
            .chain(self.addresses.iter().map(|&(v, m)| Dep::Address(v, m)))
    }
}

/// Below this many members a group is scanned rather than indexed.
const SCAN_BELOW: usize = 32;
/// Indexes kept per group; the least recently used goes first.
const MAX_NARROWED: usize = 4;

struct Narrowed {
    mask: FlowKey,
    by_key: HashMap<FlowKey, HashSet<RuleId>>,
    used: u64,
}

/// Lookups of one table by entries of one mask.
struct LookupGroup {
    table: u8,
    mask: FlowKey,
    /// Entry → its lookup key under `mask`, and the priority that won (-1: none).
    members: HashMap<RuleId, (FlowKey, i32)>,
    narrowed: Vec<Narrowed>,
}

impl LookupGroup {
    fn add(&mut self, id: RuleId, key: FlowKey, priority: i32) {
        for n in &mut self.narrowed {
            n.by_key.entry(key.masked(&n.mask)).or_default().insert(id);
        }
        self.members.insert(id, (key, priority));
    }

    fn remove(&mut self, id: RuleId) {
        let Some((key, _)) = self.members.remove(&id) else { return };
        for n in &mut self.narrowed {
            let k = key.masked(&n.mask);
            if let Some(v) = n.by_key.get_mut(&k) {
                v.remove(&id);
                if v.is_empty() {
                    n.by_key.remove(&k);
                }
            }
        }
    }

    /// Members a flow of `key`/`mask` at `priority` could take packets from.
    fn affected(&mut self, key: &FlowKey, mask: &FlowKey, priority: u16, clock: u64, out: &mut Vec<RuleId>) {
        let shared = self.mask.masked(mask);
        let want = key.masked(&shared);
        let can_win = |p: i32| p <= priority as i32;
        if shared == FlowKey::default() || self.members.len() < SCAN_BELOW {
            out.extend(
                self.members.iter().filter(|(_, (k, p))| can_win(*p) && k.masked(&shared) == want).map(|(&id, _)| id),
            );
            return;
        }
        let at = match self.narrowed.iter().position(|n| n.mask == shared) {
            Some(at) => at,
            None => {
                if self.narrowed.len() >= MAX_NARROWED {
                    let oldest = (0..self.narrowed.len()).min_by_key(|&i| self.narrowed[i].used).unwrap();
                    self.narrowed.swap_remove(oldest);
                }
                let mut by_key: HashMap<FlowKey, HashSet<RuleId>> = HashMap::new();
                for (&id, (k, _)) in &self.members {
                    by_key.entry(k.masked(&shared)).or_default().insert(id);
                }
                self.narrowed.push(Narrowed { mask: shared, by_key, used: clock });
                self.narrowed.len() - 1
            }
        };
        let n = &mut self.narrowed[at];
        n.used = clock;
        if let Some(ids) = n.by_key.get(&want) {
            out.extend(ids.iter().copied().filter(|id| self.members.get(id).is_some_and(|(_, p)| can_win(*p))));
        }
    }
}

/// Who read what, for the entries of a cache.
#[derive(Default)]
pub struct ReadIndex {
    groups: Vec<LookupGroup>,
    deps: HashMap<Dep, HashSet<RuleId>>,
    clock: u64,
}

impl ReadIndex {
    /// Records an entry cached under `mask` with what its translation read.
    pub fn add(&mut self, id: RuleId, mask: &FlowKey, reads: &Reads) {
        for l in &reads.lookups {
            let g = match self.groups.iter().position(|g| g.table == l.table && g.mask == *mask) {
                Some(g) => g,
                None => {
                    self.groups.push(LookupGroup {
                        table: l.table,
                        mask: *mask,
                        members: HashMap::new(),
                        narrowed: Vec::new(),
                    });
                    self.groups.len() - 1
                }
            };
            self.groups[g].add(id, l.key.masked(mask), l.winner.map_or(-1, |(p, _)| p as i32));
        }
        for d in reads.deps() {
            self.deps.entry(d).or_default().insert(id);
        }
    }

    pub fn remove(&mut self, id: RuleId, mask: &FlowKey, reads: &Reads) {
        for l in &reads.lookups {
            if let Some(g) = self.groups.iter_mut().find(|g| g.table == l.table && g.mask == *mask) {
                g.remove(id);
            }
        }
        self.groups.retain(|g| !g.members.is_empty());
        for d in reads.deps() {
            if let Some(v) = self.deps.get_mut(&d) {
                v.remove(&id);
                if v.is_empty() {
                    self.deps.remove(&d);
                }
            }
        }
    }

    pub fn clear(&mut self) {
        self.groups.clear();
        self.deps.clear();
    }

    /// Entries `change` can affect (possibly with repeats).
    pub fn affected(&mut self, change: &Change, out: &mut Vec<RuleId>) {
        self.clock += 1;
        let dep = match *change {
            Change::FlowAdded { table, ref key, ref mask, priority } => {
                let clock = self.clock;
                for g in self.groups.iter_mut().filter(|g| g.table == table) {
                    g.affected(key, mask, priority, clock, out);
                }
                return;
            }
            Change::FlowChanged { table, id } => Dep::Winner(table, id),
            Change::Group(g) => Dep::Group(g),
            Change::Meter(m) => Dep::Meter(m),
            Change::Port(p) => {
                out.extend(self.deps.get(&Dep::AnyPort).into_iter().flatten().copied());
                Dep::Port(p)
            }
            Change::Address(v, m) => Dep::Address(v, m),
        };
        out.extend(self.deps.get(&dep).into_iter().flatten().copied());
    }
}
