//! The LESS edge (docs/less.md §3): which host is where. An edge switch learns its own hosts from
//! their ARP, neighbour discovery and IP frames (IPv4 and IPv6 alike: a host has an entry per
//! address) and announces them with its addresses (HOSTS); every switch keeps the
//! newest announcement of every other, and from it plans a source route and a backup address for
//! any destination IP. Pure: the mode does the frames.

use std::collections::BTreeMap;
use std::net::IpAddr;

use packet::less::{self, Address};

use super::protocol::{HostEntry, Hosts};
use crate::Nanos;

/// What one other switch announced.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Origin {
    seq: u32,
    addresses: Vec<Address>,
    hosts: Vec<HostEntry>,
    seen: Nanos,
}

/// Where a destination IP is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// On one of our own edge ports.
    Here(HostEntry),
    /// Behind another switch: the host and its addresses (the switch's, each plus the edge port).
    There(HostEntry, Vec<Address>),
}

/// A source route for a frame entering here, and what rerouting will need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Output ports from this switch on, this switch's first.
    pub route: Vec<u8>,
    /// The destination's address most unlike the one the route goes to.
    pub backup: Address,
    /// Our address the route starts from.
    pub source: Address,
}

/// One of our own hosts, and when it last spoke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Local {
    entry: HostEntry,
    heard: Nanos,
}

/// What [`Directory::expire`] forgot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Expired {
    /// Hosts of ours (our announcement changes).
    pub local: bool,
    /// Another switch, with its hosts.
    pub remote: bool,
}

#[derive(Default)]
pub struct Directory {
    local: BTreeMap<IpAddr, Local>,
    remote: BTreeMap<u64, Origin>,
    seq: u32,
    /// Newest ARP query seen per origin (floods are passed on once).
    queries: BTreeMap<u64, u32>,
}

impl Directory {
    /// Announcement sequence numbers start from the clock, so a restarted switch is not taken for
    /// its old self's repeats.
    pub fn new(seq_start: u32) -> Directory {
        Directory { seq: seq_start, ..Directory::default() }
    }

    /// A host spoke on our edge `port` at `now`. True when that is news (to announce).
    pub fn learn(&mut self, ip: IpAddr, mac: [u8; 6], port: u8, now: Nanos) -> bool {
        if !is_host_address(ip) || mac[0] & 1 != 0 {
            return false;
        }
        let entry = HostEntry { ip, mac, port };
        self.local.insert(ip, Local { entry, heard: now }).map(|old| old.entry) != Some(entry)
    }

    /// `port` lost its link or turned out to lead to a switch: its hosts are gone.
    pub fn forget_port(&mut self, port: u8) -> bool {
        let before = self.local.len();
        self.local.retain(|_, h| h.entry.port != port);
        self.local.len() != before
    }

    pub fn local_hosts(&self) -> impl Iterator<Item = &HostEntry> {
        self.local.values().map(|l| &l.entry)
    }

    /// Our announcement, with a new sequence number.
    pub fn announce(&mut self, origin: u64, addresses: Vec<Address>) -> Hosts {
        self.seq = self.seq.wrapping_add(1);
        Hosts { origin, seq: self.seq, addresses, hosts: self.local.values().map(|l| l.entry).collect() }
    }

    /// Another switch's announcement: `None` when it is no newer than what we had, else (pass it
    /// on) whether what it says changed (plans made from the old one no longer hold). Switches
    /// repeat their announcement every few HELLOs; a repeat keeps the plans.
    pub fn hosts(&mut self, h: Hosts, now: Nanos) -> Option<bool> {
        let old = self.remote.get(&h.origin);
        // Serial-number order: newer if ahead by less than half the space.
        if old.is_some_and(|o| h.seq.wrapping_sub(o.seq) == 0 || h.seq.wrapping_sub(o.seq) > u32::MAX / 2) {
            return None;
        }
        let changed = old.is_none_or(|o| o.addresses != h.addresses || o.hosts != h.hosts);
        self.remote.insert(h.origin, Origin { seq: h.seq, addresses: h.addresses, hosts: h.hosts, seen: now });
        Some(changed)
    }

    /// An ARP query flooded by `origin`. True the first time (pass it on, ask our hosts).
    pub fn query(&mut self, origin: u64, seq: u32) -> bool {
        match self.queries.get(&origin) {
            Some(&old) if seq.wrapping_sub(old) == 0 || seq.wrapping_sub(old) > u32::MAX / 2 => false,
            _ => {
                self.queries.insert(origin, seq);
                true
            }
        }
    }

    /// Forgets switches not heard from since `now - dead`, and hosts of ours silent since
    /// `now - host_idle` (as a bridge ages a MAC address: a host that moved or left is not
    /// announced for ever; one still there is found again by its next ARP or a HOST-QUERY).
    pub fn expire(&mut self, now: Nanos, dead: Nanos, host_idle: Nanos) -> Expired {
        let (remote, local) = (self.remote.len(), self.local.len());
        self.remote.retain(|_, o| now.saturating_sub(o.seen) < dead);
        self.local.retain(|_, l| now.saturating_sub(l.heard) < host_idle);
        Expired { local: self.local.len() != local, remote: self.remote.len() != remote }
    }

    pub fn locate(&self, ip: IpAddr) -> Option<Location> {
        if let Some(h) = self.local.get(&ip) {
            return Some(Location::Here(h.entry));
        }
        self.remote.values().find_map(|o| {
            let h = o.hosts.iter().find(|h| h.ip == ip)?;
            let addrs = o.addresses.iter().map(|a| Address { hops: a.hops.clone(), edge: Some(h.port) }).collect();
            Some(Location::There(*h, addrs))
        })
    }

    /// Every host known and where it is, ours first.
    pub fn destinations(&self) -> impl Iterator<Item = (IpAddr, Location)> + '_ {
        let ours = self.local.iter().map(|(&ip, l)| (ip, Location::Here(l.entry)));
        let theirs = self.remote.values().flat_map(|o| {
            o.hosts.iter().map(move |h| {
                let addrs = o.addresses.iter().map(|a| Address { hops: a.hops.clone(), edge: Some(h.port) });
                (h.ip, Location::There(*h, addrs.collect()))
            })
        });
        ours.chain(theirs)
    }

    /// The other switches that announced hosts: their addresses, and the ports their hosts are on.
    pub fn edges(&self) -> impl Iterator<Item = (Vec<Address>, Vec<u8>)> + '_ {
        let with_hosts = self.remote.values().filter(|o| !o.hosts.is_empty());
        with_hosts.map(|o| (o.addresses.clone(), o.hosts.iter().map(|h| h.port).collect()))
    }

    /// Hosts known, ours and others'.
    pub fn len(&self) -> usize {
        self.local.len() + self.remote.values().map(|o| o.hosts.len()).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An address one host can have: not unspecified (a host probing for duplicates), nor a group.
pub fn is_host_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => !a.is_unspecified() && !a.is_multicast() && !a.is_broadcast(),
        IpAddr::V6(a) => !a.is_unspecified() && !a.is_multicast(),
    }
}

/// The shortest route from one of `ours` to one of `theirs`, and as backup the destination address
/// sharing the fewest leading hops with the one routed to (the most disjoint path we can name).
pub fn plan<'a>(ours: impl Iterator<Item = &'a Address>, theirs: &[Address]) -> Option<Plan> {
    let ours: Vec<&Address> = ours.collect();
    let mut best: Option<(Vec<u8>, &Address, &Address)> = None;
    for s in &ours {
        for d in theirs {
            let r = less::route(s, d);
            if best.as_ref().is_none_or(|(b, _, _)| r.len() < b.len()) {
                best = Some((r, s, d));
            }
        }
    }
    let (route, source, to) = best?;
    let backup = theirs.iter().filter(|d| *d != to).min_by_key(|d| d.common(to)).unwrap_or(to);
    Some(Plan { route, backup: backup.clone(), source: source.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(hops: &[(u8, u8)], edge: Option<u8>) -> Address {
        Address { hops: hops.to_vec(), edge }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn hosts_are_learned_announced_and_located() {
        let mut here = Directory::new(0);
        assert!(here.learn(ip("10.0.0.1"), [2, 0, 0, 0, 0, 1], 3, 0));
        assert!(!here.learn(ip("10.0.0.1"), [2, 0, 0, 0, 0, 1], 3, 1), "no news");
        assert!(!here.learn(ip("10.0.0.9"), [0xff; 6], 3, 1), "a broadcast source is no host");
        for group in ["0.0.0.0", "224.0.0.1", "255.255.255.255", "::", "ff02::1"] {
            assert!(!here.learn(ip(group), [2, 0, 0, 0, 0, 9], 3, 1), "{group} is no host's");
        }
        assert!(here.learn(ip("fd00::1"), [2, 0, 0, 0, 0, 1], 3, 0), "the same host's IPv6 address");
        let a = here.announce(7, vec![addr(&[(1, 2)], None)]);
        let mut there = Directory::new(0);
        assert_eq!(there.hosts(a.clone(), 0), Some(true));
        assert_eq!(there.hosts(a, 0), None, "a repeat is not passed on");
        let again = here.announce(7, vec![addr(&[(1, 2)], None)]);
        assert_eq!(there.hosts(again, 0), Some(false), "a newer announcement saying the same changes nothing");
        for a in ["10.0.0.1", "fd00::1"] {
            assert_eq!(
                there.locate(ip(a)),
                Some(Location::There(
                    HostEntry { ip: ip(a), mac: [2, 0, 0, 0, 0, 1], port: 3 },
                    vec![addr(&[(1, 2)], Some(3))]
                ))
            );
        }
        assert!(matches!(here.locate(ip("10.0.0.1")), Some(Location::Here(_))));
        assert!(here.forget_port(3) && here.locate(ip("10.0.0.1")).is_none());
        assert_eq!(there.expire(10, 5, 100), Expired { local: false, remote: true });
        assert!(there.is_empty());
        assert!(there.query(7, 1) && !there.query(7, 1) && there.query(7, 2));
    }

    #[test]
    fn a_host_that_keeps_speaking_stays_and_a_silent_one_ages_out() {
        let mut here = Directory::new(0);
        let (talker, quiet) = (ip("10.0.0.1"), ip("fd00::2"));
        here.learn(talker, [2, 0, 0, 0, 0, 1], 3, 0);
        here.learn(quiet, [2, 0, 0, 0, 0, 2], 4, 0);
        for t in [40, 80] {
            assert!(!here.learn(talker, [2, 0, 0, 0, 0, 1], 3, t), "heard again: no news");
            assert_eq!(here.expire(t, 1000, 100), Expired::default());
        }
        assert_eq!(here.expire(100, 1000, 100), Expired { local: true, remote: false });
        assert!(here.locate(quiet).is_none() && here.locate(talker).is_some());
        assert_eq!(here.announce(7, vec![]).hosts.len(), 1, "the silent host is no longer announced");
        assert_eq!(here.expire(180, 1000, 100), Expired { local: true, remote: false });
        assert!(here.is_empty());
    }

    #[test]
    fn the_plan_is_the_shortest_route_and_the_most_disjoint_backup() {
        let ours = [addr(&[(1, 1)], None), addr(&[(2, 1)], None)];
        let theirs = [addr(&[(1, 1), (3, 1)], Some(5)), addr(&[(2, 2), (4, 1)], Some(5))];
        let p = plan(ours.iter(), &theirs).unwrap();
        assert_eq!(p.route, vec![3, 5]);
        assert_eq!((p.backup, p.source), (theirs[1].clone(), ours[0].clone()));
        let only = [theirs[0].clone()];
        assert_eq!(plan(ours.iter(), &only).unwrap().backup, theirs[0]);
        assert!(plan([].iter(), &only).is_none());
    }
}
