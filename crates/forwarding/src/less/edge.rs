//! The LESS edge (docs/less.md §3): which host is where. An edge switch learns its own hosts from
//! their ARP, neighbour discovery and IP frames (IPv4 and IPv6 alike: a host has an entry per
//! address) and announces them with its addresses (HOSTS); every switch keeps the
//! newest announcement of every other, and from it plans a source route and a backup address for
//! any destination IP. Pure: the mode does the frames.

use std::collections::BTreeMap;
use std::net::IpAddr;

use packet::less::{self, Address};

use super::protocol::{split_hosts, HostEntry, Hosts};
use crate::Nanos;

/// What one other switch announced: its newest announcement's sequence number, parts and
/// addresses, and each part's hosts as last heard.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Origin {
    seq: u32,
    addresses: Vec<Address>,
    /// By part number: the sequence number it came with, and its hosts.
    parts: BTreeMap<u16, (u32, Vec<HostEntry>)>,
    seen: Nanos,
}

impl Origin {
    fn hosts(&self) -> impl Iterator<Item = &HostEntry> {
        self.parts.values().flat_map(|(_, hosts)| hosts)
    }
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

/// Switches whose HOST-QUERY sequence numbers are kept, at most. A fabric's switches are far
/// fewer; a neighbour making origins up cannot grow the table past this.
pub const MAX_QUERY_ORIGINS: usize = 1024;

/// Serial-number order: `a` is `b` or older (not ahead by less than half the space).
fn not_newer(a: u32, b: u32) -> bool {
    a.wrapping_sub(b) == 0 || a.wrapping_sub(b) > u32::MAX / 2
}

#[derive(Default)]
pub struct Directory {
    local: BTreeMap<IpAddr, Local>,
    /// Our hosts per edge port (what `max_hosts_per_port` bounds).
    per_port: BTreeMap<u8, usize>,
    /// Hosts of ours one edge port may have, at most: a sender inventing ARP senders fills its own
    /// port's share, not the announcement.
    pub max_hosts_per_port: usize,
    remote: BTreeMap<u64, Origin>,
    seq: u32,
    /// Newest host query seen per origin (floods are passed on once), and when.
    queries: BTreeMap<u64, (u32, Nanos)>,
    /// Hosts not learned for their port being full; queries refused for the table of origins
    /// being full.
    pub hosts_over_port_limit: u64,
    pub query_origins_over_limit: u64,
}

impl Directory {
    /// Announcement sequence numbers start from the clock, so a restarted switch is not taken for
    /// its old self's repeats.
    pub fn new(seq_start: u32, max_hosts_per_port: usize) -> Directory {
        Directory { seq: seq_start, max_hosts_per_port, ..Directory::default() }
    }

    /// A host spoke on our edge `port` at `now`. True when that is news (to announce). A new
    /// address on a port that has `max_hosts_per_port` already is not learned (counted): the hosts
    /// there stay until they fall silent.
    pub fn learn(&mut self, ip: IpAddr, mac: [u8; 6], port: u8, now: Nanos) -> bool {
        if !is_host_address(ip) || mac[0] & 1 != 0 {
            return false;
        }
        let entry = HostEntry { ip, mac, port };
        let old = self.local.get(&ip).map(|l| l.entry);
        if old.is_none_or(|o| o.port != port)
            && self.per_port.get(&port).copied().unwrap_or(0) >= self.max_hosts_per_port
        {
            self.hosts_over_port_limit += 1;
            return false;
        }
        if let Some(o) = old.filter(|o| o.port != port) {
            self.uncount(o.port);
        }
        if old.is_none_or(|o| o.port != port) {
            *self.per_port.entry(port).or_default() += 1;
        }
        self.local.insert(ip, Local { entry, heard: now });
        old != Some(entry)
    }

    fn uncount(&mut self, port: u8) {
        if let Some(n) = self.per_port.get_mut(&port) {
            *n -= 1;
            if *n == 0 {
                self.per_port.remove(&port);
            }
        }
    }

    /// `port` lost its link or turned out to lead to a switch: its hosts are gone.
    pub fn forget_port(&mut self, port: u8) -> bool {
        let before = self.local.len();
        self.local.retain(|_, h| h.entry.port != port);
        self.per_port.remove(&port);
        self.local.len() != before
    }

    pub fn local_hosts(&self) -> impl Iterator<Item = &HostEntry> {
        self.local.values().map(|l| &l.entry)
    }

    /// Our announcement, with a new sequence number, in as many parts as frames need.
    pub fn announce(&mut self, origin: u64, addresses: Vec<Address>) -> Vec<Hosts> {
        self.seq = self.seq.wrapping_add(1);
        split_hosts(origin, self.seq, addresses, self.local.values().map(|l| l.entry).collect())
    }

    /// A part of another switch's announcement: `None` when it is no newer than what we had, else
    /// (pass it on) whether what it says changed (plans made from the old one no longer hold).
    /// Switches repeat their announcement every few HELLOs; a repeat keeps the plans. A part of a
    /// newer announcement replaces the part of that number, and drops the parts past its count.
    pub fn hosts(&mut self, h: Hosts, now: Nanos) -> Option<bool> {
        let Hosts { origin, seq, part, parts, addresses, hosts } = h;
        let Some(o) = self.remote.get_mut(&origin) else {
            let parts = BTreeMap::from([(part, (seq, hosts))]);
            self.remote.insert(origin, Origin { seq, addresses, parts, seen: now });
            return Some(true);
        };
        let newer = !not_newer(seq, o.seq);
        if !newer && (seq != o.seq || o.parts.get(&part).is_some_and(|(s, _)| *s == seq)) {
            return None;
        }
        let mut changed = false;
        if newer {
            o.seq = seq;
            let past: Vec<u16> = o.parts.range(parts..).map(|(&p, _)| p).collect();
            for p in past {
                changed |= o.parts.remove(&p).is_some_and(|(_, hosts)| !hosts.is_empty());
            }
            changed |= o.addresses != addresses;
            o.addresses = addresses;
        }
        changed |= o.parts.get(&part).is_none_or(|(_, old)| *old != hosts);
        o.parts.insert(part, (seq, hosts));
        o.seen = now;
        Some(changed)
    }

    /// A host query flooded by `origin`. True the first time (pass it on, ask our hosts). Origins
    /// are kept as long as switches are ([`expire`](Self::expire)), and at most
    /// [`MAX_QUERY_ORIGINS`] of them: a new one past that is refused (counted).
    pub fn query(&mut self, origin: u64, seq: u32, now: Nanos) -> bool {
        match self.queries.get(&origin) {
            Some(&(old, _)) if not_newer(seq, old) => false,
            None if self.queries.len() >= MAX_QUERY_ORIGINS => {
                self.query_origins_over_limit += 1;
                false
            }
            _ => {
                self.queries.insert(origin, (seq, now));
                true
            }
        }
    }

    /// Forgets switches not heard from since `now - dead` (their queries' numbers too), and hosts
    /// of ours silent since `now - host_idle` (as a bridge ages a MAC address: a host that moved or
    /// left is not announced for ever; one still there is found again by its next ARP or a
    /// HOST-QUERY).
    pub fn expire(&mut self, now: Nanos, dead: Nanos, host_idle: Nanos) -> Expired {
        let (remote, local) = (self.remote.len(), self.local.len());
        self.remote.retain(|_, o| now.saturating_sub(o.seen) < dead);
        self.queries.retain(|_, &mut (_, at)| now.saturating_sub(at) < dead);
        let per_port = &mut self.per_port;
        self.local.retain(|_, l| {
            let keep = now.saturating_sub(l.heard) < host_idle;
            if !keep {
                if let Some(n) = per_port.get_mut(&l.entry.port) {
                    *n -= 1;
                }
            }
            keep
        });
        self.per_port.retain(|_, n| *n > 0);
        Expired { local: self.local.len() != local, remote: self.remote.len() != remote }
    }

    pub fn locate(&self, ip: IpAddr) -> Option<Location> {
        if let Some(h) = self.local.get(&ip) {
            return Some(Location::Here(h.entry));
        }
        self.remote.values().find_map(|o| {
            let h = o.hosts().find(|h| h.ip == ip)?;
            let addrs = o.addresses.iter().map(|a| Address { hops: a.hops.clone(), edge: Some(h.port) }).collect();
            Some(Location::There(*h, addrs))
        })
    }

    /// Every host known and where it is, ours first.
    pub fn destinations(&self) -> impl Iterator<Item = (IpAddr, Location)> + '_ {
        let ours = self.local.iter().map(|(&ip, l)| (ip, Location::Here(l.entry)));
        let theirs = self.remote.values().flat_map(|o| {
            o.hosts().map(move |h| {
                let addrs = o.addresses.iter().map(|a| Address { hops: a.hops.clone(), edge: Some(h.port) });
                (h.ip, Location::There(*h, addrs.collect()))
            })
        });
        ours.chain(theirs)
    }

    /// The other switches that announced hosts: their addresses, and the ports their hosts are on.
    pub fn edges(&self) -> impl Iterator<Item = (Vec<Address>, Vec<u8>)> + '_ {
        let with_hosts = self.remote.values().filter(|o| o.hosts().next().is_some());
        with_hosts.map(|o| (o.addresses.clone(), o.hosts().map(|h| h.port).collect()))
    }

    /// Hosts known, ours and others'.
    pub fn len(&self) -> usize {
        self.local.len() + self.remote.values().map(|o| o.hosts().count()).sum::<usize>()
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
        let mut here = Directory::new(0, 16);
        assert!(here.learn(ip("10.0.0.1"), [2, 0, 0, 0, 0, 1], 3, 0));
        assert!(!here.learn(ip("10.0.0.1"), [2, 0, 0, 0, 0, 1], 3, 1), "no news");
        assert!(!here.learn(ip("10.0.0.9"), [0xff; 6], 3, 1), "a broadcast source is no host");
        for group in ["0.0.0.0", "224.0.0.1", "255.255.255.255", "::", "ff02::1"] {
            assert!(!here.learn(ip(group), [2, 0, 0, 0, 0, 9], 3, 1), "{group} is no host's");
        }
        assert!(here.learn(ip("fd00::1"), [2, 0, 0, 0, 0, 1], 3, 0), "the same host's IPv6 address");
        let [a] = &here.announce(7, vec![addr(&[(1, 2)], None)])[..] else { panic!("one part") };
        let mut there = Directory::new(0, 16);
        assert_eq!(there.hosts(a.clone(), 0), Some(true));
        assert_eq!(there.hosts(a.clone(), 0), None, "a repeat is not passed on");
        let [again] = &here.announce(7, vec![addr(&[(1, 2)], None)])[..] else { panic!("one part") };
        assert_eq!(there.hosts(again.clone(), 0), Some(false), "a newer announcement saying the same changes nothing");
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
        assert!(there.query(7, 1, 0) && !there.query(7, 1, 0) && there.query(7, 2, 0));
    }

    #[test]
    fn a_host_that_keeps_speaking_stays_and_a_silent_one_ages_out() {
        let mut here = Directory::new(0, 16);
        let (talker, quiet) = (ip("10.0.0.1"), ip("fd00::2"));
        here.learn(talker, [2, 0, 0, 0, 0, 1], 3, 0);
        here.learn(quiet, [2, 0, 0, 0, 0, 2], 4, 0);
        for t in [40, 80] {
            assert!(!here.learn(talker, [2, 0, 0, 0, 0, 1], 3, t), "heard again: no news");
            assert_eq!(here.expire(t, 1000, 100), Expired::default());
        }
        assert_eq!(here.expire(100, 1000, 100), Expired { local: true, remote: false });
        assert!(here.locate(quiet).is_none() && here.locate(talker).is_some());
        assert_eq!(here.announce(7, vec![])[0].hosts.len(), 1, "the silent host is no longer announced");
        assert_eq!(here.expire(180, 1000, 100), Expired { local: true, remote: false });
        assert!(here.is_empty());
    }

    fn v4(n: u32) -> IpAddr {
        IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + n))
    }

    fn mac(n: u32) -> [u8; 6] {
        [2, 0, 0, (n >> 16) as u8, (n >> 8) as u8, n as u8]
    }

    #[test]
    fn a_port_holds_its_share_of_hosts_and_no_more() {
        let mut here = Directory::new(0, 3);
        // A sender on port 3 inventing ARP senders: three are learned, the rest counted.
        let learned: Vec<bool> = (1..=5).map(|n| here.learn(v4(n), mac(n), 3, 0)).collect();
        assert_eq!(learned, [true, true, true, false, false]);
        assert_eq!((here.len(), here.hosts_over_port_limit), (3, 2));
        assert!(!here.learn(v4(1), mac(1), 3, 10), "a host already there is heard again");
        assert!(here.learn(v4(1), mac(99), 3, 10), "and may change its MAC");
        // Another port is not touched by port 3's share, nor may a host move into a full port.
        assert!(here.learn(v4(100), mac(100), 4, 10));
        assert!(!here.learn(v4(100), mac(100), 3, 10));
        assert!(matches!(here.locate(v4(100)), Some(Location::Here(h)) if h.port == 4));
        // A host moving out frees a place; so does one falling silent, and the port going.
        assert!(here.learn(v4(2), mac(2), 4, 20));
        assert!(here.learn(v4(6), mac(6), 3, 20));
        assert!(!here.learn(v4(7), mac(7), 3, 20));
        here.expire(105, u64::MAX, 100);
        assert_eq!(here.local_hosts().filter(|h| h.port == 3).count(), 2, "v4(3) was silent since 0");
        assert!(here.learn(v4(7), mac(7), 3, 120));
        assert!(here.forget_port(3));
        assert!((8..=10).all(|n| here.learn(v4(n), mac(n), 3, 130)));
        assert_eq!(here.hosts_over_port_limit, 4);
    }

    #[test]
    fn an_announcement_in_parts_is_read_part_by_part() {
        let mut here = Directory::new(0, 1000);
        for n in 0..300 {
            here.learn(v4(n), mac(n), 1 + (n % 5) as u8, 0);
        }
        let at = vec![addr(&[(1, 2)], None)];
        let first = here.announce(7, at.clone());
        assert!(first.len() == 3 && first.iter().all(|p| p.parts == 3), "{}", first.len());
        let mut there = Directory::new(0, 1000);
        for p in &first {
            assert_eq!(there.hosts(p.clone(), 0), Some(true));
            assert_eq!(there.hosts(p.clone(), 0), None, "a repeat of a part is not passed on");
        }
        assert_eq!(there.len(), 300);
        assert!((0..300).all(|n| matches!(there.locate(v4(n)), Some(Location::There(..)))));
        // Hosts leave: the next announcement has two parts, and its first part drops the third.
        assert!(here.forget_port(1) && here.forget_port(2));
        let second = here.announce(7, at.clone());
        assert_eq!(second.len(), 2);
        assert_eq!(there.hosts(second[0].clone(), 5), Some(true));
        assert_eq!(there.hosts(first[2].clone(), 5), None, "a part of the older announcement comes late");
        assert_eq!(there.hosts(second[1].clone(), 5), Some(true));
        assert_eq!(there.len(), 180);
        assert!(there.locate(v4(0)).is_none() && there.locate(v4(2)).is_some());
        // The same again, newer: nothing changed, so the plans stay.
        let third = here.announce(7, at);
        assert!(third.iter().all(|p| there.hosts(p.clone(), 6) == Some(false)));
    }

    #[test]
    fn query_origins_are_bounded_and_age_with_the_switches() {
        let mut there = Directory::new(0, 16);
        assert!((0..MAX_QUERY_ORIGINS as u64).all(|origin| there.query(origin, 1, 0)));
        assert!(!there.query(1 << 40, 1, 0), "a table full of origins takes no new one");
        assert!(there.query(3, 2, 50), "but a known origin's next query passes");
        assert_eq!(there.query_origins_over_limit, 1);
        there.expire(100, 100, u64::MAX);
        assert!(there.query(1 << 40, 1, 100), "the origins not heard since are forgotten");
        assert!(!there.query(3, 2, 100), "the one heard at 50 is still known");
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
