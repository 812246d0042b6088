//! The LESS addressing protocol's messages on the wire (docs/less.md §2): HELLO between neighbours,
//! and HOSTS and HOST-QUERY flooded over the fabric. Pure encode/decode; every length is checked, so
//! a short or garbled message is refused, never half-read.
//!
//! Frame: Ethernet to [`GROUP_MAC`] with ethertype `packet::less::PROTOCOL_ETHERTYPE`, then
//! version (2), kind, and the kind's body. Integers are big-endian. An IP address is its family's
//! length (4 or 16) and its bytes.
//!
//! An announcement too long for one Ethernet frame goes in parts ([`split_hosts`]), each a
//! HOSTS-PART: a HOSTS with its part number and the number of parts after the sequence number.
//! One that fits is a plain HOSTS as before, so a switch that knows no parts reads it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use packet::less::{Address, PROTOCOL_ETHERTYPE};

/// Where every protocol frame goes: a locally administered group address ("LESS").
pub const GROUP_MAC: [u8; 6] = [0x03, 0x00, 0x4c, 0x45, 0x53, 0x53];
/// 2 since hosts may be IPv6: a version-1 switch would misread their entries, so it refuses them.
pub const VERSION: u8 = 2;
/// Hops an address may have: deeper fabrics are not addressed.
pub const MAX_HOPS: usize = 24;

const HELLO: u8 = 1;
const HOSTS: u8 = 2;
const HOST_QUERY: u8 = 3;
const HOSTS_PART: u8 = 4;

/// The longest protocol frame, Ethernet header included (no FCS): what a 1500-byte MTU carries.
/// Switches do not know their links' MTUs; a fabric link's is at least Ethernet's.
pub const MAX_FRAME: usize = 1514;

/// An address with the switch ids along it (the root's first, then one per hop): what a switch
/// checks its own id against, so that no address it takes runs through itself.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PathAddress {
    pub addr: Address,
    pub ids: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub switch: u64,
    /// The sender's port this HELLO left by.
    pub port: u8,
    pub root: bool,
    pub addresses: Vec<PathAddress>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HostEntry {
    pub ip: IpAddr,
    pub mac: [u8; 6],
    /// The host's port on the origin switch.
    pub port: u8,
}

/// An edge switch's hosts, with the switch's addresses: from them every switch knows every host's.
/// One announcement may go in several parts (`part` of `parts`, all with one `seq`), each with the
/// addresses and some of the hosts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hosts {
    pub origin: u64,
    pub seq: u32,
    pub part: u16,
    pub parts: u16,
    pub addresses: Vec<Address>,
    pub hosts: Vec<HostEntry>,
}

/// A host asked its edge switch (ARP, or IPv6 neighbour solicitation) for an address no switch has
/// announced: every edge switch asks its own hosts as the asker, so that the owner answers and is
/// learned. `target` and `sender_ip` are of one family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostQuery {
    pub origin: u64,
    pub seq: u32,
    pub target: IpAddr,
    pub sender_ip: IpAddr,
    pub sender_mac: [u8; 6],
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    Hello(Hello),
    Hosts(Hosts),
    HostQuery(HostQuery),
}

/// Why a protocol frame was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    Truncated,
    Version,
    Kind,
    /// An address deeper than [`MAX_HOPS`] or with ids not matching its hops.
    Address,
    /// An IP address of neither 4 nor 16 bytes, or a query mixing families.
    Ip,
    /// A part number not below the number of parts.
    Part,
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], Refused> {
        let s = self.b.get(self.at..self.at + n).ok_or(Refused::Truncated)?;
        self.at += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, Refused> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, Refused> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, Refused> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], Refused> {
        Ok(self.take(N)?.try_into().unwrap())
    }
    fn ip(&mut self) -> Result<IpAddr, Refused> {
        match self.u8()? {
            4 => Ok(IpAddr::V4(Ipv4Addr::from(self.array::<4>()?))),
            16 => Ok(IpAddr::V6(Ipv6Addr::from(self.array::<16>()?))),
            _ => Err(Refused::Ip),
        }
    }
    fn address(&mut self) -> Result<Address, Refused> {
        let n = self.u8()? as usize;
        if n > MAX_HOPS {
            return Err(Refused::Address);
        }
        let hops = (0..n).map(|_| Ok((self.u8()?, self.u8()?))).collect::<Result<_, Refused>>()?;
        Ok(Address { hops, edge: None })
    }
}

fn put_ip(out: &mut Vec<u8>, ip: &IpAddr) {
    match ip {
        IpAddr::V4(a) => {
            out.push(4);
            out.extend_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            out.push(16);
            out.extend_from_slice(&a.octets());
        }
    }
}

fn put_address(out: &mut Vec<u8>, a: &Address) {
    out.push(a.hops.len() as u8);
    a.hops.iter().for_each(|&(d, u)| out.extend_from_slice(&[d, u]));
}

impl Message {
    /// The whole frame, Ethernet header included, from `src_mac`.
    pub fn encode(&self, src_mac: [u8; 6]) -> Vec<u8> {
        let mut f = Vec::with_capacity(128);
        f.extend_from_slice(&GROUP_MAC);
        f.extend_from_slice(&src_mac);
        f.extend_from_slice(&PROTOCOL_ETHERTYPE.to_be_bytes());
        f.push(VERSION);
        match self {
            Message::Hello(h) => {
                f.push(HELLO);
                f.extend_from_slice(&h.switch.to_be_bytes());
                f.extend_from_slice(&[h.port, h.root as u8, h.addresses.len() as u8]);
                for a in &h.addresses {
                    put_address(&mut f, &a.addr);
                    a.ids.iter().for_each(|id| f.extend_from_slice(&id.to_be_bytes()));
                }
            }
            Message::Hosts(h) => {
                let whole = h.parts == 1 && h.part == 0;
                f.push(if whole { HOSTS } else { HOSTS_PART });
                f.extend_from_slice(&h.origin.to_be_bytes());
                f.extend_from_slice(&h.seq.to_be_bytes());
                if !whole {
                    f.extend_from_slice(&h.part.to_be_bytes());
                    f.extend_from_slice(&h.parts.to_be_bytes());
                }
                f.push(h.addresses.len() as u8);
                h.addresses.iter().for_each(|a| put_address(&mut f, a));
                f.extend_from_slice(&(h.hosts.len() as u16).to_be_bytes());
                for e in &h.hosts {
                    put_ip(&mut f, &e.ip);
                    f.extend_from_slice(&e.mac);
                    f.push(e.port);
                }
            }
            Message::HostQuery(q) => {
                f.push(HOST_QUERY);
                f.extend_from_slice(&q.origin.to_be_bytes());
                f.extend_from_slice(&q.seq.to_be_bytes());
                put_ip(&mut f, &q.target);
                put_ip(&mut f, &q.sender_ip);
                f.extend_from_slice(&q.sender_mac);
            }
        }
        // Ethernet's minimum, without the FCS.
        if f.len() < 60 {
            f.resize(60, 0);
        }
        f
    }

    /// The message in a frame whose ethertype is the protocol's (`payload`: what follows it).
    pub fn decode(payload: &[u8]) -> Result<Message, Refused> {
        let mut r = Reader { b: payload, at: 0 };
        if r.u8()? != VERSION {
            return Err(Refused::Version);
        }
        match r.u8()? {
            HELLO => {
                let switch = r.u64()?;
                let (port, flags, n) = (r.u8()?, r.u8()?, r.u8()?);
                let mut addresses = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let addr = r.address()?;
                    let ids = (0..=addr.hops.len()).map(|_| r.u64()).collect::<Result<_, _>>()?;
                    addresses.push(PathAddress { addr, ids });
                }
                Ok(Message::Hello(Hello { switch, port, root: flags & 1 != 0, addresses }))
            }
            kind @ (HOSTS | HOSTS_PART) => {
                let (origin, seq) = (r.u64()?, r.u32()?);
                let (part, parts) = match kind {
                    HOSTS => (0, 1),
                    _ => (u16::from_be_bytes(r.array()?), u16::from_be_bytes(r.array()?)),
                };
                if part >= parts {
                    return Err(Refused::Part);
                }
                let n = r.u8()?;
                let addresses = (0..n).map(|_| r.address()).collect::<Result<_, _>>()?;
                let n = u16::from_be_bytes(r.array()?);
                let hosts = (0..n)
                    .map(|_| Ok(HostEntry { ip: r.ip()?, mac: r.array()?, port: r.u8()? }))
                    .collect::<Result<_, Refused>>()?;
                Ok(Message::Hosts(Hosts { origin, seq, part, parts, addresses, hosts }))
            }
            HOST_QUERY => {
                let (origin, seq, target, sender_ip) = (r.u64()?, r.u32()?, r.ip()?, r.ip()?);
                if target.is_ipv4() != sender_ip.is_ipv4() {
                    return Err(Refused::Ip);
                }
                Ok(Message::HostQuery(HostQuery { origin, seq, target, sender_ip, sender_mac: r.array()? }))
            }
            _ => Err(Refused::Kind),
        }
    }
}

/// Bytes a host entry takes in a HOSTS message.
fn entry_bytes(e: &HostEntry) -> usize {
    1 + if e.ip.is_ipv4() { 4 } else { 16 } + 6 + 1
}

/// `hosts` announced by `origin` as announcement `seq`, in as few parts as keep every frame within
/// [`MAX_FRAME`]: one part (a plain HOSTS) when they fit, none of them empty otherwise. Each part
/// carries the addresses, so that it can be read alone. Addresses take at most a few hundred bytes
/// (`max_addresses` of at most [`MAX_HOPS`] hops), so every part has room for hosts.
pub fn split_hosts(origin: u64, seq: u32, addresses: Vec<Address>, hosts: Vec<HostEntry>) -> Vec<Hosts> {
    let head = 14 + 2 + 8 + 4 + 4 + 1 + addresses.iter().map(|a| 1 + 2 * a.hops.len()).sum::<usize>() + 2;
    let mut groups: Vec<Vec<HostEntry>> = vec![vec![]];
    let mut room = MAX_FRAME.saturating_sub(head);
    for e in hosts {
        let n = entry_bytes(&e);
        let last = groups.last_mut().unwrap();
        if n > room && !last.is_empty() {
            groups.push(vec![]);
            room = MAX_FRAME.saturating_sub(head);
        }
        room = room.saturating_sub(n);
        groups.last_mut().unwrap().push(e);
    }
    let parts = groups.len().min(u16::MAX as usize) as u16;
    groups
        .into_iter()
        .take(parts as usize)
        .enumerate()
        .map(|(i, hosts)| Hosts { origin, seq, part: i as u16, parts, addresses: addresses.clone(), hosts })
        .collect()
}

/// A switch's own MAC for protocol frames: locally administered, from its id.
pub fn switch_mac(id: u64) -> [u8; 6] {
    let b = id.to_be_bytes();
    [0x02, b[3], b[4], b[5], b[6], b[7]]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(m: Message) {
        let f = m.encode([2, 0, 0, 0, 0, 9]);
        assert_eq!(f[12..14], PROTOCOL_ETHERTYPE.to_be_bytes());
        assert_eq!(Message::decode(&f[14..]).unwrap(), m);
        // Every cut before the last byte that carries something is refused, none is misread.
        let last = f.iter().rposition(|&b| b != 0).unwrap();
        for cut in 14..=last {
            assert!(Message::decode(&f[14..cut]).is_err(), "{cut}");
        }
    }

    #[test]
    fn messages_round_trip_and_truncations_are_refused() {
        let addr = Address { hops: vec![(1, 2), (3, 4)], edge: None };
        round_trip(Message::Hello(Hello {
            switch: 0xabc,
            port: 3,
            root: false,
            addresses: vec![PathAddress { addr: addr.clone(), ids: vec![1, 2, 0xabc] }],
        }));
        round_trip(Message::Hello(Hello { switch: 1, port: 1, root: true, addresses: vec![] }));
        round_trip(Message::Hosts(Hosts {
            origin: 7,
            seq: 99,
            part: 0,
            parts: 1,
            addresses: vec![addr.clone()],
            hosts: vec![
                HostEntry { ip: v4(10, 0, 0, 1), mac: [2, 1, 1, 1, 1, 1], port: 4 },
                HostEntry { ip: "fd00::1".parse().unwrap(), mac: [2, 1, 1, 1, 1, 1], port: 4 },
            ],
        }));
        let entry = HostEntry { ip: v4(10, 0, 0, 1), mac: [2, 1, 1, 1, 1, 1], port: 4 };
        let second = Hosts { origin: 7, seq: 99, part: 1, parts: 3, addresses: vec![addr], hosts: vec![entry] };
        round_trip(Message::Hosts(second.clone()));
        let mut past = Message::Hosts(Hosts { part: 3, ..second }).encode([2; 6]);
        assert_eq!(Message::decode(&past[14..]), Err(Refused::Part), "part 3 of 3");
        past[14 + 2 + 12..14 + 2 + 16].copy_from_slice(&[0, 0, 0, 0]);
        assert_eq!(Message::decode(&past[14..]), Err(Refused::Part), "part 0 of none");
        for (target, sender_ip) in [(v4(10, 0, 0, 2), v4(10, 0, 0, 1)), (v6("fd00::2"), v6("fe80::1"))] {
            let sender_mac = [2, 1, 1, 1, 1, 1];
            round_trip(Message::HostQuery(HostQuery { origin: 7, seq: 3, target, sender_ip, sender_mac }));
        }
        assert_eq!(Message::decode(&[1, 1]), Err(Refused::Version), "version 1 had IPv4 only");
        assert_eq!(Message::decode(&[VERSION, 9]), Err(Refused::Kind));
        let mut deep = vec![VERSION, HELLO, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, MAX_HOPS as u8 + 1];
        deep.resize(200, 0);
        assert_eq!(Message::decode(&deep), Err(Refused::Address));
        // An address of a length no family has, and a query that mixes families.
        let odd = [&[VERSION, HOST_QUERY][..], &[0; 12], &[5, 1, 2, 3, 4, 5], &[4, 1, 2, 3, 4], &[0; 6]].concat();
        assert_eq!(Message::decode(&odd), Err(Refused::Ip));
        let query =
            HostQuery { origin: 1, seq: 1, target: v4(10, 0, 0, 2), sender_ip: v6("fd00::1"), sender_mac: [2; 6] };
        let mixed = Message::HostQuery(query).encode([2; 6]);
        assert_eq!(Message::decode(&mixed[14..]), Err(Refused::Ip));
    }

    /// Hosts as an edge switch has them, `n` of them (each with an IPv4 and every third with an
    /// IPv6 address too).
    fn hosts(n: u32) -> Vec<HostEntry> {
        let mut out = vec![];
        for i in 0..n {
            let mac = [2, 0, 0, 0, (i >> 8) as u8, i as u8];
            out.push(HostEntry { ip: IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)), mac, port: 1 + (i % 7) as u8 });
            if i % 3 == 0 {
                let ip = IpAddr::V6(Ipv6Addr::from(0xfd00_u128 << 112 | i as u128));
                out.push(HostEntry { ip, mac, port: 1 });
            }
        }
        out
    }

    #[test]
    fn an_announcement_too_long_for_a_frame_goes_in_parts_that_each_fit() {
        let deep = Address { hops: (0..MAX_HOPS).map(|i| (i as u8 + 1, 2)).collect(), edge: None };
        for addresses in [vec![], vec![deep.clone(); 4]] {
            for n in [0, 1, 100, 101, 123, 150, 1000, 5000] {
                let all = hosts(n);
                let parts = split_hosts(9, 44, addresses.clone(), all.clone());
                let frames: Vec<Vec<u8>> = parts.iter().map(|p| Message::Hosts(p.clone()).encode([2; 6])).collect();
                assert!(frames.iter().all(|f| f.len() <= MAX_FRAME), "{n} hosts: {:?}", frames.iter().map(Vec::len));
                // Every host once, in order, in parts numbered 0.. of the same count and sequence.
                let back: Vec<Hosts> = frames
                    .iter()
                    .map(|f| match Message::decode(&f[14..]).unwrap() {
                        Message::Hosts(h) => h,
                        other => panic!("{other:?}"),
                    })
                    .collect();
                assert_eq!(back, parts);
                assert_eq!(back.iter().flat_map(|p| p.hosts.clone()).collect::<Vec<_>>(), all);
                for (i, p) in back.iter().enumerate() {
                    assert_eq!((p.origin, p.seq, p.part, p.parts as usize), (9, 44, i as u16, back.len()));
                    assert_eq!(p.addresses, addresses);
                    assert!(!p.hosts.is_empty() || n == 0, "no empty part");
                }
                // As few parts as the bytes need: a frame's worth is 1 400 bytes or more of hosts.
                let bytes: usize = all.iter().map(entry_bytes).sum();
                assert!(back.len() <= 1 + bytes / 1_000, "{n} hosts, {bytes} bytes: {} parts", back.len());
                if back.len() == 1 {
                    assert_eq!(frames[0][15], HOSTS, "one that fits is a plain HOSTS, as before parts");
                } else {
                    assert!(frames.iter().all(|f| f[15] == HOSTS_PART));
                }
            }
        }
        // The root's hosts: 123 IPv4 ones fit one frame, 124 made it 1 520 bytes, past Ethernet's.
        let v4: Vec<HostEntry> = hosts(200).into_iter().filter(|h| h.ip.is_ipv4()).collect();
        let whole = |n: usize| {
            let h = Hosts {
                origin: 9,
                seq: 1,
                part: 0,
                parts: 1,
                addresses: vec![Address::default()],
                hosts: v4[..n].to_vec(),
            };
            Message::Hosts(h).encode([2; 6]).len()
        };
        assert_eq!((whole(123), whole(124)), (1_508, 1_520));
        assert_eq!(split_hosts(9, 1, vec![Address::default()], v4[..123].to_vec()).len(), 1);
        assert_eq!(split_hosts(9, 1, vec![Address::default()], v4[..124].to_vec()).len(), 2);
    }

    fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(a, b, c, d))
    }

    fn v6(s: &str) -> IpAddr {
        s.parse().unwrap()
    }
}
