//! What a LESS switch knows of the fabric (docs/less.md §2): its neighbours, from their HELLOs,
//! and its own addresses, derived from the neighbours' — a path vector whose paths are addresses.
//! An address is taken from a neighbour only if the switch ids along it do not hold our own, so a
//! lost root is forgotten in one round per hop instead of counting to infinity.
//!
//! Several switches may be configured as roots. The fabric has one: of the root-capable switches
//! any address comes from, the one with the lowest id. The others stand by, addressed under it,
//! and the lowest of them takes over once no address of a lower root reaches it (the root is
//! gone, its addresses forgotten hop by hop); the first takes its place back when it returns.
//!
//! A neighbour behind a port that lost carrier is held for a while before it is forgotten: the
//! data plane reroutes around the port at once (fast reroute), and the addresses, which every
//! switch's routes are computed from, change once, after the hold, not on every flap.

use std::collections::{BTreeMap, BTreeSet};

use packet::less::Address;

use super::protocol::{Hello, PathAddress, MAX_HOPS};
use crate::Nanos;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neighbour {
    pub switch: u64,
    /// Its port on the link to us.
    pub their_port: u8,
    pub addresses: Vec<PathAddress>,
    pub seen: Nanos,
    /// Its port lost carrier: kept until `lost_at + hold`, then forgotten. `Some(None)`: lost, the
    /// time not yet stamped (at the next expiry).
    pub lost: Option<Option<Nanos>>,
}

pub struct Fabric {
    id: u64,
    /// Root-capable (configured `root = true`).
    root: bool,
    /// Acting as the fabric's root now.
    acting_root: bool,
    max_addresses: usize,
    /// By our port.
    neighbours: BTreeMap<u8, Neighbour>,
    /// Ours, shortest first.
    addresses: Vec<PathAddress>,
    /// Ports whose neighbour fell silent with the link still up (a failure carrier does not
    /// show): down for forwarding until a HELLO is heard there again.
    silent: BTreeSet<u8>,
    /// Neighbours given up for silence so far: with the links up, each is a failure carrier did
    /// not show, or HELLOs lost or late (a control plane starved by the data plane).
    pub silenced: u64,
    /// The fabric ports, when the configuration lists them: every other port is an edge port
    /// whatever arrives on it. `None`: a port is a fabric port once a HELLO is heard on it.
    listed: Option<BTreeSet<u8>>,
}

impl Fabric {
    pub fn new(id: u64, root: bool, max_addresses: usize) -> Fabric {
        let mut f = Fabric {
            id,
            root,
            acting_root: false,
            max_addresses,
            neighbours: BTreeMap::new(),
            addresses: vec![],
            silent: Default::default(),
            silenced: 0,
            listed: None,
        };
        f.recompute();
        f
    }

    /// Only `ports` are fabric ports from now on (before any HELLO is heard).
    pub fn list_fabric_ports(&mut self, ports: BTreeSet<u8>) {
        self.listed = Some(ports);
    }

    /// Whether a HELLO on `port` is heard: on any port, unless the fabric ports are listed.
    pub fn may_hear(&self, port: u8) -> bool {
        self.listed.as_ref().is_none_or(|l| l.contains(&port))
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// The fabric's root now (a root-capable switch standing by is not).
    pub fn is_root(&self) -> bool {
        self.acting_root
    }

    pub fn addresses(&self) -> impl Iterator<Item = &Address> {
        self.addresses.iter().map(|a| &a.addr)
    }

    pub fn path_addresses(&self) -> &[PathAddress] {
        &self.addresses
    }

    pub fn neighbours(&self) -> impl Iterator<Item = (u8, &Neighbour)> {
        self.neighbours.iter().map(|(&p, n)| (p, n))
    }

    /// A port hosts are on: one the configuration does not list as a fabric port, or (with none
    /// listed) one no HELLO is heard on.
    pub fn is_edge(&self, port: u8) -> bool {
        match &self.listed {
            Some(listed) => !listed.contains(&port),
            None => !self.neighbours.contains_key(&port) && !self.silent.contains(&port),
        }
    }

    /// A port whose neighbour stopped sending HELLOs while its carrier stayed up.
    pub fn is_silent(&self, port: u8) -> bool {
        self.silent.contains(&port)
    }

    pub fn silent_ports(&self) -> impl Iterator<Item = u8> + '_ {
        self.silent.iter().copied()
    }

    /// A HELLO arrived on `port`. True when our addresses changed.
    pub fn hello(&mut self, port: u8, h: Hello, now: Nanos) -> bool {
        if !self.may_hear(port) {
            return false;
        }
        if h.switch == self.id {
            // Our own HELLO came back: two of our ports are looped. Neither is a neighbour.
            return false;
        }
        let n = Neighbour { switch: h.switch, their_port: h.port, addresses: h.addresses, seen: now, lost: None };
        self.silent.remove(&port);
        let changed =
            self.neighbours.get(&port).is_none_or(|old| old.addresses != n.addresses || old.switch != n.switch);
        self.neighbours.insert(port, n);
        changed && self.recompute()
    }

    /// `port` lost its link (or went away): its neighbour is held, then forgotten by [`expire`].
    pub fn port_down(&mut self, port: u8) {
        self.silent.remove(&port);
        if let Some(n) = self.neighbours.get_mut(&port) {
            n.lost.get_or_insert(None);
        }
    }

    /// Forgets neighbours not heard from since `now - dead`, and those lost longer than `hold`.
    /// True when one was forgotten.
    pub fn expire(&mut self, now: Nanos, dead: Nanos, hold: Nanos) -> bool {
        let before = self.neighbours.len();
        for n in self.neighbours.values_mut() {
            if let Some(at @ None) = &mut n.lost {
                *at = Some(now);
            }
        }
        let (silent, silenced) = (&mut self.silent, &mut self.silenced);
        self.neighbours.retain(|&port, n| match n.lost {
            // Lost with its carrier: held for `hold` whatever its HELLOs do (they cannot come).
            Some(Some(at)) => now < at + hold,
            Some(None) => true,
            None => {
                let quiet = now.saturating_sub(n.seen) >= dead;
                if quiet {
                    silent.insert(port);
                    *silenced += 1;
                }
                !quiet
            }
        });
        let removed = self.neighbours.len() != before;
        if removed {
            self.recompute();
        }
        removed
    }

    /// When [`expire`] next has something to do.
    pub fn next_expiry(&self, dead: Nanos, hold: Nanos) -> Option<Nanos> {
        let at = |n: &Neighbour| match n.lost {
            Some(None) => 0,
            Some(Some(at)) => at + hold,
            None => n.seen + dead,
        };
        self.neighbours.values().map(at).min()
    }

    /// Our addresses from the neighbours': each neighbour address that does not run through us,
    /// extended by the link, the shortest only, under the best root (the lowest id) they come
    /// from. Picked in rounds of one per port, so that a few addresses leave by as many ports as
    /// there are. A root-capable switch that no lower root's address reaches is the root.
    fn recompute(&mut self) -> bool {
        let mut candidates: Vec<(u8, PathAddress)> = vec![];
        for (&port, n) in &self.neighbours {
            for a in &n.addresses {
                if a.ids.contains(&self.id) || a.addr.hops.len() >= MAX_HOPS || a.addr.edge.is_some() {
                    continue;
                }
                let mut addr = a.addr.clone();
                addr.hops.push((n.their_port, port));
                let mut ids = a.ids.clone();
                ids.push(self.id);
                candidates.push((port, PathAddress { addr, ids }));
            }
        }
        let best_root = candidates.iter().filter_map(|c| c.1.ids.first().copied()).min();
        self.acting_root = self.root && best_root.is_none_or(|r| r > self.id);
        let new = if self.acting_root {
            vec![PathAddress { addr: Address::default(), ids: vec![self.id] }]
        } else {
            candidates.retain(|c| c.1.ids.first().copied() == best_root);
            // Only shortest paths from the root: every address is as short as the switch's
            // distance, which keeps routes short and leaves detours to the reroute cases.
            let shortest = candidates.iter().map(|c| c.1.addr.hops.len()).min().unwrap_or(0);
            candidates.retain(|c| c.1.addr.hops.len() == shortest);
            candidates.sort_by(|x, y| x.1.cmp(&y.1));
            candidates.dedup_by(|x, y| x.1.addr == y.1.addr);
            let mut picked: Vec<PathAddress> = vec![];
            let mut used = vec![false; candidates.len()];
            while picked.len() < self.max_addresses && used.contains(&false) {
                // One round: the shortest unused candidate of each port.
                let mut ports_this_round = vec![];
                for (i, (port, c)) in candidates.iter().enumerate() {
                    if picked.len() == self.max_addresses {
                        break;
                    }
                    if used[i] || ports_this_round.contains(port) {
                        continue;
                    }
                    used[i] = true;
                    ports_this_round.push(*port);
                    picked.push(c.clone());
                }
            }
            picked.sort();
            picked
        };
        let changed = new != self.addresses;
        self.addresses = new;
        changed
    }

    /// Our HELLO for `port`.
    pub fn hello_for(&self, port: u8) -> Hello {
        Hello { switch: self.id, port, root: self.acting_root, addresses: self.addresses.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs HELLO rounds between switches until nothing changes: `links` are (switch, port,
    /// switch, port).
    fn converge(switches: &mut [Fabric], links: &[(usize, u8, usize, u8)]) {
        for _ in 0..50 {
            let mut changed = false;
            for &(a, pa, b, pb) in links {
                let ha = switches[a].hello_for(pa);
                let hb = switches[b].hello_for(pb);
                changed |= switches[b].hello(pb, ha, 0);
                changed |= switches[a].hello(pa, hb, 0);
            }
            if !changed {
                return;
            }
        }
        panic!("no convergence");
    }

    fn addrs(f: &Fabric) -> Vec<String> {
        f.addresses().map(|a| a.to_string()).collect()
    }

    #[test]
    fn a_standby_root_takes_over_when_the_root_is_gone_and_hands_back_when_it_returns() {
        // 0 (root, id 100) ports 1, 2 → 1 and 2 (their port 1); 1 port 2 → 3 port 1; 2 port 2 →
        // 3 port 2; 1 port 3 → 2 port 3. Switch 2 (id 102) is root-capable too.
        let mut s: Vec<Fabric> = (0..4).map(|i| Fabric::new(100 + i, i == 0 || i == 2, 4)).collect();
        let all = [(0, 1, 1, 1), (0, 2, 2, 1), (1, 2, 3, 1), (2, 2, 3, 2), (1, 3, 2, 3)];
        converge(&mut s, &all);
        assert!(s[0].is_root() && !s[2].is_root(), "the lowest id is the root");
        assert_eq!(addrs(&s[2]), ["2/1"]);
        assert_eq!(addrs(&s[3]), ["1/1.2/1", "2/1.2/2"]);
        // Switch 0 is gone: its neighbours lose their links to it.
        for (sw, port) in [(1, 1), (2, 1)] {
            s[sw].port_down(port);
            s[sw].expire(1, u64::MAX, 0);
            s[sw].expire(2, u64::MAX, 0);
        }
        converge(&mut s, &all[2..]);
        assert!(s[2].is_root(), "the standby is the root now");
        assert_eq!(
            (addrs(&s[2]), addrs(&s[1]), addrs(&s[3])),
            (vec!["-".to_string()], vec!["3/3".to_string()], vec!["2/2".to_string()])
        );
        // It returns: it is the root again, and every address is under it.
        let mut back = Fabric::new(100, true, 4);
        std::mem::swap(&mut s[0], &mut back);
        converge(&mut s, &all);
        assert!(s[0].is_root() && !s[2].is_root());
        assert_eq!(addrs(&s[2]), ["2/1"]);
        assert_eq!(addrs(&s[3]), ["1/1.2/1", "2/1.2/2"]);
        assert!(s.iter().all(|f| f.path_addresses().iter().all(|a| a.ids[0] == 100)));
    }

    #[test]
    fn a_diamond_gives_the_bottom_switch_two_addresses_and_loses_one_with_its_link() {
        // 0 (root) ports 1, 2 → 1 and 2 (their port 1); 1 port 2 → 3 port 1; 2 port 2 → 3 port 2.
        let mut s: Vec<Fabric> = (0..4).map(|i| Fabric::new(100 + i, i == 0, 4)).collect();
        let links = [(0, 1, 1, 1), (0, 2, 2, 1), (1, 2, 3, 1), (2, 2, 3, 2)];
        converge(&mut s, &links);
        assert_eq!(addrs(&s[0]), ["-"]);
        assert_eq!(addrs(&s[1])[0], "1/1");
        assert_eq!(addrs(&s[3]), ["1/1.2/1", "2/1.2/2"]);
        // 1 is also reachable root → 2 → 3 → 1, but that is no shortest path.
        assert_eq!(addrs(&s[1]), ["1/1"]);
        for f in &s {
            for a in f.path_addresses() {
                let mut ids = a.ids.clone();
                ids.sort();
                ids.dedup();
                assert_eq!(ids.len(), a.ids.len(), "an address through one switch twice: {a:?}");
            }
        }
        // The link 1-3 goes: 3 keeps both addresses for the hold, then only the one through 2.
        s[3].port_down(1);
        assert!(!s[3].expire(1_000, 10_000, 500), "the loss is stamped, nothing forgotten yet");
        assert_eq!(s[3].next_expiry(10_000, 500), Some(1_500));
        assert_eq!(addrs(&s[3]).len(), 2);
        assert!(s[3].expire(1_500, 10_000, 500));
        assert_eq!(addrs(&s[3]), ["2/1.2/2"]);
    }

    #[test]
    fn losing_the_root_empties_every_address_without_counting_to_infinity() {
        let mut s: Vec<Fabric> = (0..3).map(|i| Fabric::new(i + 1, i == 0, 4)).collect();
        let links = [(0, 1, 1, 1), (1, 2, 2, 1), (2, 2, 1, 3)];
        converge(&mut s, &links);
        assert!(!addrs(&s[2]).is_empty());
        s[1].port_down(1);
        s[1].expire(0, 1_000, 0);
        // Without the root's link, 1 and 2 have only each other's addresses, which run through themselves.
        converge(&mut s[1..], &[(0, 2, 1, 1), (1, 2, 0, 3)]);
        assert!(addrs(&s[1]).is_empty() && addrs(&s[2]).is_empty(), "{:?} {:?}", addrs(&s[1]), addrs(&s[2]));
    }

    #[test]
    fn with_fabric_ports_listed_a_hello_elsewhere_makes_no_neighbour() {
        let root = Fabric::new(1, true, 4);
        let mut a = Fabric::new(2, false, 4);
        a.list_fabric_ports(BTreeSet::from([3]));
        assert!(!a.is_edge(3) && a.is_edge(1), "a listed port is a fabric port before any HELLO");
        assert!(!a.hello(1, root.hello_for(1), 0), "a HELLO on an edge port");
        assert!(a.is_edge(1) && a.neighbours().next().is_none() && a.addresses().next().is_none());
        assert!(a.hello(3, root.hello_for(2), 0));
        assert_eq!(a.neighbours().map(|(p, _)| p).collect::<Vec<_>>(), [3]);
        // Discovered, as without a list: a HELLO makes any port a fabric port.
        let mut b = Fabric::new(3, false, 4);
        assert!(b.is_edge(1) && b.hello(1, root.hello_for(1), 0) && !b.is_edge(1));
    }

    #[test]
    fn silent_neighbours_expire() {
        let mut a = Fabric::new(2, false, 4);
        let root = Fabric::new(1, true, 4);
        assert!(a.hello(3, root.hello_for(1), 1_000));
        assert!(!a.is_edge(3) && a.is_edge(1));
        assert_eq!(a.next_expiry(350, 100), Some(1_350));
        assert!(!a.expire(1_200, 350, 100));
        assert!(a.expire(1_400, 350, 100));
        assert!(a.addresses().next().is_none());
        // Its link never went down: the port is silent, not an edge, until a HELLO comes back.
        assert!(a.is_silent(3) && !a.is_edge(3) && a.silenced == 1);
        a.hello(3, root.hello_for(1), 2_000);
        assert!(!a.is_silent(3) && a.addresses().next().is_some());
        // Lost with its carrier, a neighbour is held for the hold even past the HELLO timeout.
        a.port_down(3);
        assert!(!a.expire(2_100, 350, 10_000), "the loss is stamped");
        assert!(!a.expire(5_000, 350, 10_000) && a.addresses().next().is_some());
        assert!(a.expire(12_100, 350, 10_000));
        assert!(!a.is_silent(3), "a lost port is down by its carrier, not silent");
    }
}
