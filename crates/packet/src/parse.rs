//! Frame → flow key, in one pass and without copying the frame.

use crate::key::{off, FlowKey};
use ofp::oxm::OFPVID_PRESENT;

pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88a8;
    pub const IPV6: u16 = 0x86dd;
    pub const MPLS: u16 = 0x8847;
    pub const MPLS_MCAST: u16 = 0x8848;
    pub const PBB: u16 = 0x88e7;
    /// Below this, the type/length field of an Ethernet frame is a length: an 802.3 frame, whose
    /// payload starts with an 802.2 LLC header.
    pub const MIN: u16 = 0x0600;
    /// The eth_type OpenFlow matches for an 802.3 frame that is not LLC/SNAP with OUI 0
    /// (OpenFlow 1.0's OFP_DL_TYPE_NOT_ETH_TYPE, Open vSwitch's FLOW_DL_TYPE_NONE).
    pub const NOT_ETH_TYPE: u16 = 0x05ff;
}

pub mod ipproto {
    pub const HOPOPTS: u8 = 0;
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const ESP: u8 = 50;
    pub const AH: u8 = 51;
    pub const ICMPV6: u8 = 58;
    pub const NONE: u8 = 59;
    pub const DSTOPTS: u8 = 60;
    pub const SCTP: u8 = 132;
}

/// `ipv6_exthdr` pseudo-field bits (spec §7.2.3.9).
pub mod exthdr {
    pub const NONEXT: u16 = 1 << 0;
    pub const ESP: u16 = 1 << 1;
    pub const AUTH: u16 = 1 << 2;
    pub const DEST: u16 = 1 << 3;
    pub const FRAG: u16 = 1 << 4;
    pub const ROUTER: u16 = 1 << 5;
    pub const HOP: u16 = 1 << 6;
    pub const UNREP: u16 = 1 << 7;
    pub const UNSEQ: u16 = 1 << 8;
}

pub fn is_vlan_tpid(t: u16) -> bool {
    t == ethertype::VLAN || t == ethertype::QINQ
}

pub fn is_mpls(t: u16) -> bool {
    t == ethertype::MPLS || t == ethertype::MPLS_MCAST
}

/// Where the headers of a parsed frame are. Offsets are from the start of the frame; 0 means absent
/// (no header can start at 0 except Ethernet's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// Offset of the ethertype the frame's eth_type comes from: 12 plus 4 per VLAN tag, or, in an
    /// LLC/SNAP frame, the SNAP protocol id (8 bytes further on).
    pub ethertype_at: u16,
    /// Offset of an 802.3 frame's length field (0: an Ethernet II frame). What is inserted or
    /// removed behind it changes the length it holds.
    pub length_at: u16,
    pub n_vlans: u8,
    /// First MPLS label stack entry, or the IP/ARP header.
    pub l3: u16,
    pub l4: u16,
    /// IPv4 or IPv6 fragment that is not the first (no transport header in it).
    pub later_fragment: bool,
}

/// Why a frame could not be parsed. Such frames are dropped and counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    Runt,
    TruncatedVlan,
    BadIpv4Header,
    TruncatedIpv6,
    TruncatedTransport,
}

struct Cursor<'a> {
    b: &'a [u8],
}

impl Cursor<'_> {
    fn u8(&self, at: usize) -> Option<u8> {
        self.b.get(at).copied()
    }
    fn u16(&self, at: usize) -> Option<u16> {
        Some(u16::from_be_bytes([*self.b.get(at)?, *self.b.get(at + 1)?]))
    }
    fn u32(&self, at: usize) -> Option<u32> {
        Some(u32::from_be_bytes(self.b.get(at..at + 4)?.try_into().ok()?))
    }
    fn has(&self, at: usize, n: usize) -> bool {
        at + n <= self.b.len()
    }
}

/// Parses `frame` received on `in_port` into a flow key and header layout.
pub fn parse(frame: &[u8], in_port: u32) -> Result<(FlowKey, Layout), Malformed> {
    let mut key = FlowKey::default();
    key.put_u32(off::IN_PORT, in_port);
    key.put_u32(off::IN_PHY_PORT, in_port);
    let layout = parse_into(frame, &mut key)?;
    Ok((key, layout))
}

/// Re-parses the headers of `frame` into `key`, keeping the pipeline fields (in_port, metadata,
/// tunnel id) that are not in the frame. Used after actions that change the header stack.
pub fn reparse(frame: &[u8], key: &mut FlowKey) -> Result<Layout, Malformed> {
    let mut fresh = FlowKey::default();
    fresh.0[..off::ETH_DST].copy_from_slice(&key.0[..off::ETH_DST]);
    let layout = parse_into(frame, &mut fresh)?;
    *key = fresh;
    Ok(layout)
}

fn parse_into(frame: &[u8], key: &mut FlowKey) -> Result<Layout, Malformed> {
    let c = Cursor { b: frame };
    if frame.len() < 14 {
        return Err(Malformed::Runt);
    }
    let mut layout = Layout::default();
    key.0[off::ETH_DST..off::ETH_DST + 6].copy_from_slice(&frame[0..6]);
    key.0[off::ETH_SRC..off::ETH_SRC + 6].copy_from_slice(&frame[6..12]);
    let mut at = 12;
    let mut ethertype = c.u16(at).unwrap();
    while is_vlan_tpid(ethertype) {
        let tci = c.u16(at + 2).ok_or(Malformed::TruncatedVlan)?;
        if layout.n_vlans == 0 {
            key.put_u16(off::VLAN_VID, (tci & 0x0fff) | OFPVID_PRESENT);
            key.0[off::VLAN_PCP] = (tci >> 13) as u8;
        }
        layout.n_vlans += 1;
        at += 4;
        ethertype = c.u16(at).ok_or(Malformed::TruncatedVlan)?;
    }
    if ethertype < ethertype::MIN {
        layout.length_at = at as u16;
        match snap_protocol(&c, at + 2) {
            Some(protocol) => {
                at += 8;
                ethertype = protocol;
            }
            None => ethertype = ethertype::NOT_ETH_TYPE,
        }
    }
    layout.ethertype_at = at as u16;
    key.put_u16(off::ETH_TYPE, ethertype);
    let l3 = at + 2;
    layout.l3 = l3 as u16;
    match ethertype {
        ethertype::IPV4 => parse_ipv4(&c, l3, key, &mut layout)?,
        ethertype::IPV6 => parse_ipv6(&c, l3, key, &mut layout)?,
        ethertype::ARP => parse_arp(&c, l3, key),
        t if is_mpls(t) => {
            // Only the outermost label is matchable; what is below is opaque (spec §7.2.3.7).
            if let Some(lse) = c.u32(l3) {
                key.put_u32(off::MPLS_LABEL, lse >> 12);
                key.0[off::MPLS_TC] = ((lse >> 9) & 7) as u8;
                key.0[off::MPLS_BOS] = ((lse >> 8) & 1) as u8;
            }
        }
        ethertype::PBB => {
            if let Some(itag) = c.u32(l3) {
                let isid = itag & 0x00ff_ffff;
                key.0[off::PBB_ISID..off::PBB_ISID + 3].copy_from_slice(&isid.to_be_bytes()[1..]);
            }
        }
        _ => {}
    }
    Ok(layout)
}

/// The protocol id of an LLC/SNAP header at `llc` (DSAP = SSAP = 0xAA, control 0x03, OUI 0: RFC
/// 1042's encapsulation of an ethertype), if it is one and names an ethertype. Any other LLC
/// payload is opaque to OpenFlow, as it is to Open vSwitch.
fn snap_protocol(c: &Cursor<'_>, llc: usize) -> Option<u16> {
    let header = c.b.get(llc..llc + 6)?;
    let protocol = c.u16(llc + 6)?;
    (header == [0xaa, 0xaa, 0x03, 0, 0, 0] && protocol >= ethertype::MIN).then_some(protocol)
}

fn parse_arp(c: &Cursor<'_>, l3: usize, key: &mut FlowKey) {
    // Ethernet/IPv4 ARP only; anything else keeps only eth_type (as Open vSwitch does).
    if !c.has(l3, 28)
        || c.u16(l3) != Some(1)
        || c.u16(l3 + 2) != Some(0x0800)
        || c.u8(l3 + 4) != Some(6)
        || c.u8(l3 + 5) != Some(4)
    {
        return;
    }
    key.put_u16(off::ARP_OP, c.u16(l3 + 6).unwrap());
    let b = c.b;
    key.0[off::ARP_SHA..off::ARP_SHA + 6].copy_from_slice(&b[l3 + 8..l3 + 14]);
    key.0[off::IPV4_SRC..off::IPV4_SRC + 4].copy_from_slice(&b[l3 + 14..l3 + 18]);
    key.0[off::ARP_THA..off::ARP_THA + 6].copy_from_slice(&b[l3 + 18..l3 + 24]);
    key.0[off::IPV4_DST..off::IPV4_DST + 4].copy_from_slice(&b[l3 + 24..l3 + 28]);
}

fn parse_ipv4(c: &Cursor<'_>, l3: usize, key: &mut FlowKey, layout: &mut Layout) -> Result<(), Malformed> {
    let vihl = c.u8(l3).ok_or(Malformed::BadIpv4Header)?;
    let ihl = (vihl & 0x0f) as usize * 4;
    if vihl >> 4 != 4 || ihl < 20 || !c.has(l3, ihl) {
        return Err(Malformed::BadIpv4Header);
    }
    let tos = c.u8(l3 + 1).unwrap();
    key.0[off::IP_DSCP] = tos >> 2;
    key.0[off::IP_ECN] = tos & 3;
    let proto = c.u8(l3 + 9).unwrap();
    key.0[off::IP_PROTO] = proto;
    let b = c.b;
    key.0[off::IPV4_SRC..off::IPV4_SRC + 4].copy_from_slice(&b[l3 + 12..l3 + 16]);
    key.0[off::IPV4_DST..off::IPV4_DST + 4].copy_from_slice(&b[l3 + 16..l3 + 20]);
    let frag = c.u16(l3 + 6).unwrap();
    if frag & 0x1fff != 0 {
        layout.later_fragment = true;
        return Ok(());
    }
    parse_l4(c, l3 + ihl, proto, key, layout)
}

fn parse_ipv6(c: &Cursor<'_>, l3: usize, key: &mut FlowKey, layout: &mut Layout) -> Result<(), Malformed> {
    if !c.has(l3, 40) {
        return Err(Malformed::TruncatedIpv6);
    }
    let b = c.b;
    let vtcfl = c.u32(l3).unwrap();
    let tc = (vtcfl >> 20) as u8;
    key.0[off::IP_DSCP] = tc >> 2;
    key.0[off::IP_ECN] = tc & 3;
    key.put_u32(off::IPV6_FLABEL, vtcfl & 0xfffff);
    key.0[off::IPV6_SRC..off::IPV6_SRC + 16].copy_from_slice(&b[l3 + 8..l3 + 24]);
    key.0[off::IPV6_DST..off::IPV6_DST + 16].copy_from_slice(&b[l3 + 24..l3 + 40]);

    // Walk the extension headers to the upper-layer protocol, noting which were seen and whether
    // they were repeated or out of the order RFC 8200 recommends.
    let mut next = c.u8(l3 + 6).unwrap();
    let mut at = l3 + 40;
    let mut bits = 0u16;
    let mut order = 0; // rank of the last header seen
    let mut dest_count = 0;
    let mut later_fragment = false;
    loop {
        let (bit, rank, len) = match next {
            ipproto::HOPOPTS => (exthdr::HOP, 1, ext_len(c, at, 8)?),
            ipproto::DSTOPTS => {
                dest_count += 1;
                // A destination header before routing ranks 2, after it 6.
                let rank = if bits & exthdr::ROUTER != 0 { 6 } else { 2 };
                (exthdr::DEST, rank, ext_len(c, at, 8)?)
            }
            ipproto::ROUTING => (exthdr::ROUTER, 3, ext_len(c, at, 8)?),
            ipproto::FRAGMENT => {
                let fo = c.u16(at + 2).ok_or(Malformed::TruncatedIpv6)?;
                later_fragment = fo & 0xfff8 != 0;
                (exthdr::FRAG, 4, 8)
            }
            ipproto::AH => (exthdr::AUTH, 5, ext_len(c, at, 4)?),
            ipproto::ESP => {
                bits |= exthdr::ESP;
                break;
            }
            ipproto::NONE => {
                bits |= exthdr::NONEXT;
                break;
            }
            _ => break,
        };
        let repeated = bits & bit != 0 && !(bit == exthdr::DEST && dest_count == 2);
        if repeated {
            bits |= exthdr::UNREP;
        }
        if rank < order || (bit == exthdr::HOP && order != 0) {
            bits |= exthdr::UNSEQ;
        }
        order = rank;
        bits |= bit;
        next = c.u8(at).ok_or(Malformed::TruncatedIpv6)?;
        at += len;
        if later_fragment {
            break;
        }
    }
    key.put_u16(off::IPV6_EXTHDR, bits);
    key.0[off::IP_PROTO] = next;
    if later_fragment {
        layout.later_fragment = true;
        return Ok(());
    }
    parse_l4(c, at, next, key, layout)
}

/// Length of an extension header whose length byte counts `unit`-byte words beyond the first 8 (or,
/// for AH, 4-byte words beyond the first 8).
fn ext_len(c: &Cursor<'_>, at: usize, unit: usize) -> Result<usize, Malformed> {
    let l = c.u8(at + 1).ok_or(Malformed::TruncatedIpv6)? as usize;
    let len = if unit == 4 { (l + 2) * 4 } else { (l + 1) * 8 };
    if !c.has(at, len) {
        return Err(Malformed::TruncatedIpv6);
    }
    Ok(len)
}

fn parse_l4(c: &Cursor<'_>, l4: usize, proto: u8, key: &mut FlowKey, layout: &mut Layout) -> Result<(), Malformed> {
    let need = match proto {
        ipproto::TCP => 20,
        ipproto::UDP => 8,
        ipproto::SCTP => 12,
        ipproto::ICMP | ipproto::ICMPV6 => 4,
        _ => return Ok(()),
    };
    if !c.has(l4, need) {
        return Err(Malformed::TruncatedTransport);
    }
    layout.l4 = l4 as u16;
    match proto {
        ipproto::TCP | ipproto::UDP | ipproto::SCTP => {
            key.put_u16(off::TP_SRC, c.u16(l4).unwrap());
            key.put_u16(off::TP_DST, c.u16(l4 + 2).unwrap());
        }
        _ => {
            let typ = c.u8(l4).unwrap();
            key.0[off::ICMP_TYPE] = typ;
            key.0[off::ICMP_CODE] = c.u8(l4 + 1).unwrap();
            if proto == ipproto::ICMPV6 && (typ == 135 || typ == 136) {
                parse_nd(c, l4, typ, key);
            }
        }
    }
    Ok(())
}

/// Neighbour solicitation/advertisement: target address and the link-layer address option.
fn parse_nd(c: &Cursor<'_>, l4: usize, typ: u8, key: &mut FlowKey) {
    if !c.has(l4 + 8, 16) {
        return;
    }
    let b = c.b;
    key.0[off::ND_TARGET..off::ND_TARGET + 16].copy_from_slice(&b[l4 + 8..l4 + 24]);
    let mut at = l4 + 24;
    while let (Some(opt), Some(len8)) = (c.u8(at), c.u8(at + 1)) {
        let len = len8 as usize * 8;
        if len == 0 || !c.has(at, len) {
            break;
        }
        if len == 8 {
            if opt == 1 && typ == 135 {
                key.0[off::ARP_SHA..off::ARP_SHA + 6].copy_from_slice(&b[at + 2..at + 8]);
            } else if opt == 2 && typ == 136 {
                key.0[off::ARP_THA..off::ARP_THA + 6].copy_from_slice(&b[at + 2..at + 8]);
            }
        }
        at += len;
    }
}
