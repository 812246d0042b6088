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
//! few match shapes), or under a part of `X` already indexed when that narrows them down as far.
//! Everything else is an inverted index from what was read to who read it.

use hashbrown::{HashMap, HashSet};
use packet::FlowKey;

use crate::classifier::{Projection, RuleId};

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
    FlowAdded {
        table: u8,
        key: FlowKey,
        mask: FlowKey,
        priority: u16,
    },
    /// A flow was removed or its instructions changed.
    FlowChanged {
        table: u8,
        id: RuleId,
    },
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
/// Indexes kept per group; the least recently used goes first. Each costs about 24 bytes per
/// distinct key (a 100 000-entry group: 2.7 MB), and a mask not kept costs a walk of the group to
/// index again: eight cover a controller cycling through a handful of match shapes.
const MAX_NARROWED: usize = 8;

/// Lookups of one table by entries of one mask.
struct LookupGroup {
    table: u8,
    mask: FlowKey,
    /// Entry → its lookup key under `mask`, and the priority that won (-1: none).
    members: HashMap<RuleId, (FlowKey, i32)>,
    narrowed: Vec<Projection>,
    /// Indexes built, for the tests of what churn costs.
    #[cfg(test)]
    built: usize,
}

impl LookupGroup {
    fn add(&mut self, id: RuleId, key: FlowKey, priority: i32) {
        for n in &mut self.narrowed {
            n.add(&key, id);
        }
        self.members.insert(id, (key, priority));
    }

    fn remove(&mut self, id: RuleId) {
        let Some((key, _)) = self.members.remove(&id) else { return };
        for n in &mut self.narrowed {
            n.remove(&key, id);
        }
    }

    /// An index that narrows the members down for a flow sharing `shared` with the mask: one under
    /// exactly `shared`, or under part of it if that leaves as few candidates as a scan would
    /// cost little; else one built now.
    fn index_for(&mut self, shared: &FlowKey, want: &FlowKey, clock: u64) -> &Projection {
        let exact = self.narrowed.iter().position(|n| n.mask == *shared);
        let part = || self.narrowed.iter().position(|n| shared.covers(&n.mask) && n.count(want) < SCAN_BELOW);
        let at = match exact.or_else(part) {
            Some(at) => at,
            None => {
                if self.narrowed.len() >= MAX_NARROWED {
                    let oldest = (0..self.narrowed.len()).min_by_key(|&i| self.narrowed[i].used).unwrap();
                    self.narrowed.swap_remove(oldest);
                }
                let mut n = Projection::new(shared, clock);
                for (&id, (k, _)) in &self.members {
                    n.add(k, id);
                }
                #[cfg(test)]
                {
                    self.built += 1;
                }
                self.narrowed.push(n);
                self.narrowed.len() - 1
            }
        };
        let n = &mut self.narrowed[at];
        n.used = clock;
        n
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
        let candidates: Vec<RuleId> = self.index_for(&shared, &want, clock).candidates(&want).collect();
        out.extend(
            candidates
                .into_iter()
                .filter(|id| self.members.get(id).is_some_and(|(k, p)| can_win(*p) && k.masked(&shared) == want)),
        );
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
                        #[cfg(test)]
                        built: 0,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classifier::tests::{key, mask};
    use ofp::oxm::Field;

    /// A controller cycling through five match shapes, none of which any entry can see: each shape
    /// is indexed once at most, not once per flow-mod (as when four indexes were kept), and nothing
    /// is retired.
    #[test]
    fn cycling_match_shapes_index_each_once() {
        let fields = [Field::EthType, Field::IpProto, Field::Ipv4Src, Field::Ipv4Dst, Field::UdpSrc, Field::UdpDst];
        let entry_mask = mask(&fields);
        let mut index = ReadIndex::default();
        for i in 0..1_000u128 {
            let k = key(&[
                (Field::EthType, 0x800),
                (Field::IpProto, 17),
                (Field::Ipv4Src, 1),
                (Field::Ipv4Dst, 2),
                (Field::UdpSrc, 9000),
                (Field::UdpDst, 10_000 + i),
            ]);
            let reads = Reads {
                lookups: vec![Lookup { table: 0, key: k, winner: Some((200, RuleId(i as u32))) }],
                ..Default::default()
            };
            index.add(RuleId(i as u32), &entry_mask, &reads);
        }
        let shapes: [&[Field]; 5] = [
            &[Field::EthType, Field::IpProto, Field::UdpDst],
            &[Field::EthType, Field::IpProto, Field::UdpSrc],
            &[Field::EthType, Field::Ipv4Src],
            &[Field::EthType, Field::Ipv4Dst],
            &[Field::EthType, Field::Ipv4Src, Field::Ipv4Dst, Field::IpProto],
        ];
        let mut out = Vec::new();
        for round in 0..200u128 {
            let shape = shapes[round as usize % shapes.len()];
            // Values no entry has: 7 for every field but the EtherType.
            let values: Vec<(Field, u128)> =
                shape.iter().map(|&f| (f, if f == Field::EthType { 0x800 } else { 7 })).collect();
            let change = Change::FlowAdded { table: 0, key: key(&values), mask: mask(shape), priority: 100 };
            index.affected(&change, &mut out);
        }
        assert!(out.is_empty(), "{} entries retired", out.len());
        // One per shape at most (one may reuse another's: a part of its bits that leaves none).
        let built = index.groups[0].built;
        assert!((1..=shapes.len()).contains(&built), "{built} indexes built for {} shapes", shapes.len());
    }
}
