//! The flow key: every header field an OpenFlow 1.3 match can name, at a fixed place in 136 bytes.
//!
//! Values are stored big-endian exactly as on the wire, so an OXM value and mask are written into a
//! key by copying bytes, and a masked compare is a word-wise AND. The same layout serves as a mask
//! (all-ones bytes where a field is consulted), which is what a megaflow cache keys on.
//!
//! Fields whose prerequisites exclude each other share bytes: ARP's SPA/TPA live where IPv4's
//! addresses do, TCP/UDP/SCTP ports share `tp_src`/`tp_dst`, ICMPv4/v6 share type and code, and
//! ARP's hardware addresses share with ND's link-layer options. The eth_type (and ip_proto) in the
//! same key always tell which meaning applies.

use ofp::oxm::Field;

pub const KEY_BYTES: usize = 136;
pub const KEY_WORDS: usize = KEY_BYTES / 8;

/// Where a field lives in the key: byte offset and width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub offset: usize,
    pub width: usize,
}

pub mod off {
    pub const IN_PORT: usize = 0;
    pub const IN_PHY_PORT: usize = 4;
    pub const METADATA: usize = 8;
    pub const TUNNEL_ID: usize = 16;
    pub const ETH_DST: usize = 24;
    pub const ETH_TYPE: usize = 30;
    pub const ETH_SRC: usize = 32;
    pub const VLAN_VID: usize = 38;
    pub const VLAN_PCP: usize = 40;
    pub const IP_DSCP: usize = 41;
    pub const IP_ECN: usize = 42;
    pub const IP_PROTO: usize = 43;
    pub const IPV4_SRC: usize = 44;
    pub const IPV4_DST: usize = 48;
    pub const TP_SRC: usize = 52;
    pub const TP_DST: usize = 54;
    pub const ICMP_TYPE: usize = 56;
    pub const ICMP_CODE: usize = 57;
    pub const ARP_OP: usize = 58;
    pub const MPLS_LABEL: usize = 60;
    pub const MPLS_TC: usize = 64;
    pub const MPLS_BOS: usize = 65;
    pub const IPV6_EXTHDR: usize = 66;
    pub const IPV6_FLABEL: usize = 68;
    pub const PBB_ISID: usize = 72;
    pub const ARP_SHA: usize = 76;
    pub const ARP_THA: usize = 82;
    pub const IPV6_SRC: usize = 88;
    pub const IPV6_DST: usize = 104;
    pub const ND_TARGET: usize = 120;
}

/// The key slot of an OpenFlow field.
pub fn slot(field: Field) -> Slot {
    use Field::*;
    let offset = match field {
        InPort => off::IN_PORT,
        InPhyPort => off::IN_PHY_PORT,
        Metadata => off::METADATA,
        EthDst => off::ETH_DST,
        EthSrc => off::ETH_SRC,
        EthType => off::ETH_TYPE,
        VlanVid => off::VLAN_VID,
        VlanPcp => off::VLAN_PCP,
        IpDscp => off::IP_DSCP,
        IpEcn => off::IP_ECN,
        IpProto => off::IP_PROTO,
        Ipv4Src | ArpSpa => off::IPV4_SRC,
        Ipv4Dst | ArpTpa => off::IPV4_DST,
        TcpSrc | UdpSrc | SctpSrc => off::TP_SRC,
        TcpDst | UdpDst | SctpDst => off::TP_DST,
        Icmpv4Type | Icmpv6Type => off::ICMP_TYPE,
        Icmpv4Code | Icmpv6Code => off::ICMP_CODE,
        ArpOp => off::ARP_OP,
        ArpSha | Ipv6NdSll => off::ARP_SHA,
        ArpTha | Ipv6NdTll => off::ARP_THA,
        Ipv6Src => off::IPV6_SRC,
        Ipv6Dst => off::IPV6_DST,
        Ipv6Flabel => off::IPV6_FLABEL,
        Ipv6NdTarget => off::ND_TARGET,
        MplsLabel => off::MPLS_LABEL,
        MplsTc => off::MPLS_TC,
        MplsBos => off::MPLS_BOS,
        PbbIsid => off::PBB_ISID,
        TunnelId => off::TUNNEL_ID,
        Ipv6Exthdr => off::IPV6_EXTHDR,
    };
    Slot { offset, width: field.width() }
}

/// A flow key, or a mask over one.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C, align(8))]
pub struct FlowKey(pub [u8; KEY_BYTES]);

impl Default for FlowKey {
    fn default() -> Self {
        FlowKey([0; KEY_BYTES])
    }
}

impl std::fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_map();
        let mut seen = Vec::new();
        for &field in Field::ALL {
            let s = slot(field);
            if seen.contains(&s.offset) {
                continue;
            }
            seen.push(s.offset);
            let v = self.get(field);
            if v != 0 {
                d.entry(&field.name(), &format_args!("{v:#x}"));
            }
        }
        d.finish()
    }
}

impl FlowKey {
    pub fn word(&self, i: usize) -> u64 {
        u64::from_ne_bytes(self.0[i * 8..i * 8 + 8].try_into().unwrap())
    }

    pub fn set_word(&mut self, i: usize, w: u64) {
        self.0[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
    }

    /// A field's value as a big-endian number.
    pub fn get(&self, field: Field) -> u128 {
        let s = slot(field);
        self.0[s.offset..s.offset + s.width].iter().fold(0u128, |acc, &b| acc << 8 | b as u128)
    }

    pub fn set(&mut self, field: Field, value: u128) {
        let s = slot(field);
        let bytes = value.to_be_bytes();
        self.0[s.offset..s.offset + s.width].copy_from_slice(&bytes[16 - s.width..]);
    }

    pub fn get_u8(&self, offset: usize) -> u8 {
        self.0[offset]
    }

    pub fn get_u16(&self, offset: usize) -> u16 {
        u16::from_be_bytes([self.0[offset], self.0[offset + 1]])
    }

    pub fn get_u32(&self, offset: usize) -> u32 {
        u32::from_be_bytes(self.0[offset..offset + 4].try_into().unwrap())
    }

    pub fn put_u16(&mut self, offset: usize, v: u16) {
        self.0[offset..offset + 2].copy_from_slice(&v.to_be_bytes());
    }

    pub fn put_u32(&mut self, offset: usize, v: u32) {
        self.0[offset..offset + 4].copy_from_slice(&v.to_be_bytes());
    }

    pub fn in_port(&self) -> u32 {
        self.get_u32(off::IN_PORT)
    }

    pub fn eth_type(&self) -> u16 {
        self.get_u16(off::ETH_TYPE)
    }

    pub fn ip_proto(&self) -> u8 {
        self.0[off::IP_PROTO]
    }

    pub fn metadata(&self) -> u64 {
        u64::from_be_bytes(self.0[off::METADATA..off::METADATA + 8].try_into().unwrap())
    }

    pub fn set_metadata(&mut self, v: u64) {
        self.0[off::METADATA..off::METADATA + 8].copy_from_slice(&v.to_be_bytes());
    }

    pub fn is_ip(&self) -> bool {
        matches!(self.eth_type(), 0x0800 | 0x86dd)
    }

    /// `self & mask`, word by word.
    pub fn masked(&self, mask: &FlowKey) -> FlowKey {
        let mut out = FlowKey::default();
        for i in 0..KEY_WORDS {
            out.set_word(i, self.word(i) & mask.word(i));
        }
        out
    }

    /// `self |= other` (union of two masks).
    pub fn union_with(&mut self, other: &FlowKey) {
        for i in 0..KEY_WORDS {
            self.set_word(i, self.word(i) | other.word(i));
        }
    }

    /// True if every bit set in `other` is set in `self` (as masks).
    pub fn covers(&self, other: &FlowKey) -> bool {
        (0..KEY_WORDS).all(|i| other.word(i) & !self.word(i) == 0)
    }

    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|&b| b == 0)
    }

    /// Sets every bit of `field` in a mask.
    pub fn mask_field(&mut self, field: Field) {
        self.set(field, field.full_mask());
    }
}

/// The field a shared slot means under this key's eth_type and ip_proto (`Ipv4Src` or `ArpSpa`,
/// `TcpSrc`, `UdpSrc` or `SctpSrc`, …); `None` where it means nothing here.
fn meaning(key: &FlowKey, field: Field) -> Option<Field> {
    use Field::*;
    let (eth, proto) = (key.eth_type(), key.ip_proto());
    let arp = eth == 0x0806;
    let v6 = eth == 0x86dd;
    Some(match field {
        Ipv4Src | ArpSpa => {
            if arp {
                ArpSpa
            } else {
                Ipv4Src
            }
        }
        Ipv4Dst | ArpTpa => {
            if arp {
                ArpTpa
            } else {
                Ipv4Dst
            }
        }
        TcpSrc | UdpSrc | SctpSrc => match proto {
            6 => TcpSrc,
            17 => UdpSrc,
            132 => SctpSrc,
            _ => return None,
        },
        TcpDst | UdpDst | SctpDst => match proto {
            6 => TcpDst,
            17 => UdpDst,
            132 => SctpDst,
            _ => return None,
        },
        Icmpv4Type | Icmpv6Type => {
            if v6 {
                Icmpv6Type
            } else {
                Icmpv4Type
            }
        }
        Icmpv4Code | Icmpv6Code => {
            if v6 {
                Icmpv6Code
            } else {
                Icmpv4Code
            }
        }
        ArpSha | Ipv6NdSll => {
            if v6 {
                Ipv6NdSll
            } else {
                ArpSha
            }
        }
        ArpTha | Ipv6NdTll => {
            if v6 {
                Ipv6NdTll
            } else {
                ArpTha
            }
        }
        other => other,
    })
}

/// A MAC address as `ovs-ofctl` writes it: `02:00:00:00:00:01`.
pub fn mac_text(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(":")
}

fn value_text(field: Field, v: u128) -> String {
    use Field::*;
    match field {
        EthDst | EthSrc | ArpSha | ArpTha | Ipv6NdSll | Ipv6NdTll => mac_text(&v.to_be_bytes()[10..16]),
        Ipv4Src | Ipv4Dst | ArpSpa | ArpTpa => std::net::Ipv4Addr::from(v as u32).to_string(),
        Ipv6Src | Ipv6Dst | Ipv6NdTarget => std::net::Ipv6Addr::from(v).to_string(),
        EthType => format!("0x{v:04x}"),
        Metadata | TunnelId => format!("0x{v:x}"),
        _ => v.to_string(),
    }
}

/// A masked key as `ovs-ofctl` writes a match: `in_port=1,eth_type=0x0800,ipv4_dst=10.0.0.2`,
/// a field's mask after a slash where it is not all ones; fields the mask leaves out are left
/// out. What a megaflow consulted, for `edgeflow dump-flows --kernel`.
pub fn match_text(key: &FlowKey, mask: &FlowKey) -> String {
    let mut seen = Vec::new();
    let mut parts = Vec::new();
    for &field in Field::ALL {
        let s = slot(field);
        if seen.contains(&s.offset) {
            continue;
        }
        let m = mask.get(field);
        if m == 0 {
            continue;
        }
        seen.push(s.offset);
        let Some(named) = meaning(key, field) else {
            parts.push(format!("{}={}", field.name(), key.get(field)));
            continue;
        };
        let full = named.full_mask();
        let v = key.get(named) & m & full;
        if m & full == full {
            parts.push(format!("{}={}", named.name(), value_text(named, v)));
        } else {
            parts.push(format!("{}={}/{}", named.name(), value_text(named, v), value_text(named, m & full)));
        }
    }
    if parts.is_empty() {
        "any".into()
    } else {
        parts.join(",")
    }
}

#[cfg(test)]
mod match_text_tests {
    use super::*;

    #[test]
    fn a_megaflow_reads_as_an_ovs_ofctl_match() {
        let mut key = FlowKey::default();
        let mut mask = FlowKey::default();
        key.set(Field::InPort, 1);
        key.set(Field::EthType, 0x0800);
        key.set(Field::IpProto, 6);
        key.set(Field::Ipv4Dst, 0x0a00_0002);
        key.set(Field::TcpDst, 80);
        key.set(Field::EthSrc, 0x0200_0000_0001);
        for f in [Field::InPort, Field::EthType, Field::IpProto, Field::TcpDst] {
            mask.mask_field(f);
        }
        mask.set(Field::Ipv4Dst, 0xffff_ff00);
        mask.set(Field::EthSrc, 0x0100_0000_0000);
        assert_eq!(
            match_text(&key.masked(&mask), &mask),
            "in_port=1,eth_src=00:00:00:00:00:00/01:00:00:00:00:00,eth_type=0x0800,ip_proto=6,\
             ipv4_dst=10.0.0.0/255.255.255.0,tcp_dst=80"
        );
        key.set(Field::EthType, 0x0806);
        assert!(match_text(&key, &mask).contains("arp_tpa=10.0.0.0/255.255.255.0"));
        assert_eq!(match_text(&key, &FlowKey::default()), "any");
    }
}
