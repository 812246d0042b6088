//! Local fast reroute (docs/less.md §4): the reroute block a frame carries under its route labels,
//! and the three ways around a port that is down — (a) a route of our own to the destination's
//! backup address, (b) a neighbour's, (c) back toward the source until a switch has one. Pure:
//! the mode hands in what the switch knows and gets a route (or nothing) back.

use packet::less::{self, Address, Label};

use super::fabric::Fabric;

/// Reroute and backtrack steps a frame may take, from its ingress switch on.
pub const INITIAL_BUDGET: u8 = 8;

/// What rides under the route labels so that any switch on the way can reroute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// Steps left; a frame with none is dropped rather than rerouted again.
    pub budget: u8,
    /// The frame is on its way back toward the source, looking for a switch with a way around.
    pub backtrack: bool,
    /// The destination host's backup address.
    pub backup: Address,
    /// The ingress switch's address.
    pub source: Address,
}

fn put_address(out: &mut Vec<u8>, a: &Address) {
    let n = 2 * a.hops.len() + a.edge.is_some() as usize;
    out.push(n as u8);
    a.hops.iter().for_each(|&(d, u)| out.extend_from_slice(&[d, u]));
    out.extend(a.edge);
}

fn take_address(b: &[u8], at: &mut usize) -> Option<Address> {
    let n = *b.get(*at)? as usize;
    let bytes = b.get(*at + 1..*at + 1 + n)?;
    *at += 1 + n;
    let hops = bytes.chunks_exact(2).map(|c| (c[0], c[1])).collect();
    let edge = (n % 2 == 1).then(|| bytes[n - 1]);
    Some(Address { hops, edge })
}

impl Block {
    /// As stack entries: TTL 0, three bytes each, the last one the bottom of the stack.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = vec![self.budget, self.backtrack as u8];
        put_address(&mut bytes, &self.backup);
        put_address(&mut bytes, &self.source);
        let chunks: Vec<&[u8]> = bytes.chunks(3).collect();
        let mut out = Vec::with_capacity(4 * chunks.len());
        for (i, c) in chunks.iter().enumerate() {
            let mut ports = [0u8; 3];
            ports[..c.len()].copy_from_slice(c);
            out.extend_from_slice(&Label { ports, bottom: i + 1 == chunks.len(), ttl: 0 }.word().to_be_bytes());
        }
        out
    }

    /// The block in stack entries `entries` (TTL 0, the last the bottom).
    pub fn decode(entries: &[u8]) -> Option<Block> {
        let bytes: Vec<u8> = entries.chunks_exact(4).flat_map(|e| [e[0], e[1], e[2]]).collect();
        let mut at = 2;
        let backup = take_address(&bytes, &mut at)?;
        let source = take_address(&bytes, &mut at)?;
        Some(Block { budget: *bytes.first()?, backtrack: bytes.get(1)? & 1 != 0, backup, source })
    }
}

/// A stack split into its route labels and its reroute block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    /// Bytes of route labels (TTL ≠ 0) from the top.
    pub route_bytes: usize,
    /// The block and the bytes it takes, when the stack has one.
    pub block: Option<(Block, usize)>,
}

/// Splits the stack at `at`; `depth` entries, the last the bottom (as `packet::less::depth` found).
pub fn split(frame: &[u8], at: usize, depth: usize) -> Split {
    let entries = &frame[at..at + 4 * depth];
    let routes = entries.chunks_exact(4).take_while(|e| e[3] & 0x7f != 0).count();
    let rest = &entries[4 * routes..];
    let block = if rest.is_empty() { None } else { Block::decode(rest).map(|b| (b, rest.len())) };
    Split { route_bytes: 4 * routes, block }
}

pub use packet::less::block_hash;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// (a) A route of our own to the backup address.
    Local,
    /// (b) Through a neighbour that has one.
    Neighbour,
    /// (c) Back toward the source.
    Backtrack,
}

/// Where a frame goes instead, and how it was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Detour {
    pub case: Case,
    /// Output ports from this switch on, this switch's first. For a backtrack: the one port the
    /// frame leaves by, with no route under it (the next switch tries again); none when planned
    /// ahead for any frame: the port each came in on.
    pub route: Vec<u8>,
}

/// The way around for a frame with `block` that cannot leave by the port it should (`failed`;
/// `None` for a frame that arrived backtracking). `came_in`: the port it arrived on, which a
/// backtracking frame must not be sent back through; `None` when planning ahead for a port's
/// failure, for frames from anywhere (a first backtrack then goes back the way each came, which
/// the kernel checks is no host's). `live`: whether a port can send.
pub fn detour(
    fabric: &Fabric,
    block: &Block,
    failed: Option<u8>,
    came_in: Option<u8>,
    live: impl Fn(u8) -> bool,
) -> Option<Detour> {
    if block.budget == 0 {
        return None;
    }
    let usable = |p: u8| live(p) && Some(p) != failed && !(block.backtrack && Some(p) == came_in);
    // (a) Our own routes. If one of our addresses is a prefix of the backup, the backup runs
    // through us, and any route from another of our addresses would come back through us: only
    // those prefixes' routes count.
    let under_us: Vec<&Address> = fabric.addresses().filter(|s| s.is_prefix_of(&block.backup)).collect();
    let ours: Vec<&Address> = if under_us.is_empty() { fabric.addresses().collect() } else { under_us.clone() };
    let local = ours.iter().map(|s| less::route(s, &block.backup)).filter(|r| r.first().is_some_and(|&p| usable(p)));
    if let Some(route) = local.min_by_key(|r| r.len()) {
        return Some(Detour { case: Case::Local, route });
    }
    // (b) A neighbour's routes, unless the backup runs through us (then theirs would too).
    if under_us.is_empty() {
        let mut best: Option<Vec<u8>> = None;
        for (port, n) in fabric.neighbours().filter(|&(p, _)| usable(p)) {
            for a in n.addresses.iter().filter(|a| !a.ids.contains(&fabric.id())) {
                let r = less::route(&a.addr, &block.backup);
                if r.first().is_none_or(|&p| p == n.their_port) {
                    continue;
                }
                if best.as_ref().is_none_or(|b| r.len() + 1 < b.len()) {
                    best = Some(std::iter::once(port).chain(r).collect());
                }
            }
        }
        if let Some(route) = best {
            return Some(Detour { case: Case::Neighbour, route });
        }
    }
    // (c) Back: the way the frame came, the first time (never to a host); then toward the source.
    if !block.backtrack {
        let Some(came_in) = came_in else { return Some(Detour { case: Case::Backtrack, route: vec![] }) };
        let back = live(came_in) && !fabric.is_edge(came_in);
        return back.then(|| Detour { case: Case::Backtrack, route: vec![came_in] });
    }
    let toward_source = fabric.addresses().map(|s| less::route(s, &block.source));
    let back = toward_source.filter(|r| r.first().is_some_and(|&p| usable(p))).min_by_key(|r| r.len())?;
    Some(Detour { case: Case::Backtrack, route: vec![back[0]] })
}

#[cfg(test)]
mod tests {
    use super::super::protocol::{Hello, PathAddress};
    use super::*;

    fn addr(hops: &[(u8, u8)], edge: Option<u8>) -> Address {
        Address { hops: hops.to_vec(), edge }
    }

    #[test]
    fn the_block_round_trips_as_ttl_zero_entries() {
        let b = Block {
            budget: 7,
            backtrack: true,
            backup: addr(&[(1, 1), (2, 3)], Some(4)),
            source: addr(&[(2, 1)], None),
        };
        let entries = b.encode();
        assert!(entries.chunks(4).all(|e| e[3] & 0x7f == 0));
        assert!(entries[entries.len() - 1] & 0x80 != 0 && entries.chunks(4).rev().skip(1).all(|e| e[3] & 0x80 == 0));
        assert_eq!(Block::decode(&entries), Some(b.clone()));
        let mut frame = vec![0u8; 14];
        frame.extend_from_slice(&less::encode_route(&[5, 6], true));
        frame.extend_from_slice(&entries);
        frame.extend_from_slice(&[0x45, 0, 0, 0]);
        let depth = less::depth(&frame, 14, 16).unwrap();
        assert_eq!(split(&frame, 14, depth), Split { route_bytes: 4, block: Some((b, entries.len())) });
    }

    /// A switch whose neighbours said `hellos` (our port, their HELLO).
    fn switch(id: u64, hellos: Vec<(u8, Hello)>) -> Fabric {
        let mut f = Fabric::new(id, false, 4);
        for (port, h) in hellos {
            f.hello(port, h, 0);
        }
        f
    }

    fn hello(switch: u64, port: u8, addresses: &[(&[(u8, u8)], Vec<u64>)]) -> Hello {
        let addresses =
            addresses.iter().map(|(h, ids)| PathAddress { addr: addr(h, None), ids: ids.clone() }).collect();
        Hello { switch, port, root: addresses_is_root(&addresses), addresses }
    }

    fn addresses_is_root(a: &Vec<PathAddress>) -> bool {
        a.len() == 1 && a[0].addr.hops.is_empty()
    }

    #[test]
    fn case_a_takes_our_other_address() {
        // We (id 5) have two parents: 6 (on our port 1) and 7 (on our port 2), both under the root.
        let six = hello(6, 3, &[(&[(1, 1)], vec![1, 6])]);
        let seven = hello(7, 3, &[(&[(2, 1)], vec![1, 7])]);
        let me = switch(5, vec![(1, six), (2, seven)]);
        let addrs: Vec<String> = me.addresses().map(|a| a.to_string()).collect();
        assert_eq!(addrs, ["1/1.3/1", "2/1.3/2"]);
        // The backup is a host on 7's port 6. Our port 1 is down: (a) goes up port 2 to 7.
        let block = Block { budget: 3, backtrack: false, backup: addr(&[(2, 1)], Some(6)), source: addr(&[], None) };
        let d = detour(&me, &block, Some(1), Some(1), |p| p != 1).unwrap();
        assert_eq!(d, Detour { case: Case::Local, route: vec![2, 6] });
    }

    #[test]
    fn case_b_when_our_only_address_leaves_by_the_failed_port() {
        // Our one address is 1/1; neighbour 9 on our port 3 is under root port 3, and it got no
        // address through us (its ids hold no 5).
        let me = {
            let mut f = Fabric::new(5, false, 1);
            f.hello(1, hello(1, 1, &[(&[], vec![1])]), 0);
            f.hello(3, hello(9, 2, &[(&[(3, 1)], vec![1, 9])]), 0);
            f
        };
        assert_eq!(me.addresses().map(|a| a.to_string()).collect::<Vec<_>>(), ["1/1"]);
        let block =
            Block { budget: 3, backtrack: false, backup: addr(&[(3, 1), (5, 1)], Some(2)), source: addr(&[], None) };
        let d = detour(&me, &block, Some(1), Some(4), |p| p != 1).unwrap();
        assert_eq!(d, Detour { case: Case::Neighbour, route: vec![3, 5, 2] });
    }

    #[test]
    fn case_c_goes_back_then_toward_the_source_and_the_budget_ends_it() {
        let me = {
            let mut f = Fabric::new(5, false, 1);
            f.hello(1, hello(1, 1, &[(&[], vec![1])]), 0);
            // A switch below us on port 4, whose address runs through us.
            f.hello(4, hello(6, 1, &[(&[(1, 1), (4, 1)], vec![1, 5, 6])]), 0);
            f
        };
        // The backup is under our own failed port 2: no way around from here.
        let mut block =
            Block { budget: 2, backtrack: false, backup: addr(&[(1, 1), (2, 1)], Some(3)), source: addr(&[], None) };
        let d = detour(&me, &block, Some(2), Some(4), |p| p != 2).unwrap();
        assert_eq!(d, Detour { case: Case::Backtrack, route: vec![4] });
        // Planned ahead, for frames from wherever: back the way each came (no port named).
        let d = detour(&me, &block, Some(2), None, |_| true).unwrap();
        assert_eq!(d, Detour { case: Case::Backtrack, route: vec![] });
        // Backtracking, it arrived on 4 (port 2 still down): toward the source (the root) is port 1.
        block.backtrack = true;
        let d = detour(&me, &block, None, Some(4), |p| p != 2).unwrap();
        assert_eq!(d, Detour { case: Case::Backtrack, route: vec![1] });
        // Once port 2 is back, the same frame goes down it.
        assert_eq!(
            detour(&me, &block, None, Some(4), |_| true).unwrap(),
            Detour { case: Case::Local, route: vec![2, 3] }
        );
        block.budget = 0;
        assert_eq!(detour(&me, &block, None, Some(4), |_| true), None);
        // Never backtracked to a host: port 3 has no switch behind it.
        block.budget = 2;
        block.backtrack = false;
        assert_eq!(detour(&me, &block, Some(2), Some(3), |p| p != 2), None);
    }
}
