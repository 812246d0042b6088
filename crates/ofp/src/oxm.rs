//! OXM: the OpenFlow Extensible Match (spec 1.3.5 §7.2.3) and its semantic checks.

use crate::buf::{Reader, Writer};
use crate::error::{short, BadMatch, DecodeError, ErrorCode};

pub const OFPXMC_OPENFLOW_BASIC: u16 = 0x8000;
pub const OFPXMC_EXPERIMENTER: u16 = 0xffff;
pub const OFPMT_OXM: u16 = 1;
/// `vlan_vid` bit meaning "a VLAN tag is present".
pub const OFPVID_PRESENT: u16 = 0x1000;
pub const OFPVID_NONE: u16 = 0x0000;

macro_rules! fields {
    ($($variant:ident = $id:expr, $name:literal, $width:expr, $maskable:expr, $max:expr;)*) => {
        /// The OpenFlow-basic match fields of 1.3 (`enum oxm_ofb_match_fields`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Field { $($variant = $id),* }

        impl Field {
            pub const ALL: &'static [Field] = &[$(Field::$variant),*];

            pub fn from_id(id: u8) -> Option<Field> {
                match id { $($id => Some(Field::$variant),)* _ => None }
            }
            /// Name as `ovs-ofctl` and os-ken spell it.
            pub fn name(self) -> &'static str {
                match self { $(Field::$variant => $name),* }
            }
            pub fn from_name(name: &str) -> Option<Field> {
                match name { $($name => Some(Field::$variant),)* _ => None }
            }
            /// Bytes of the value on the wire.
            pub fn width(self) -> usize {
                match self { $(Field::$variant => $width),* }
            }
            /// Whether the spec allows a mask on this field.
            pub fn maskable(self) -> bool {
                match self { $(Field::$variant => $maskable),* }
            }
            /// Largest legal value (fields narrower than their wire width).
            pub fn max_value(self) -> u128 {
                match self { $(Field::$variant => $max),* }
            }
        }
    };
}

const B8: u128 = 0xff;
const B16: u128 = 0xffff;
const B32: u128 = 0xffff_ffff;
const B48: u128 = 0xffff_ffff_ffff;
const B64: u128 = u64::MAX as u128;
const B128: u128 = u128::MAX;

fields! {
    InPort = 0, "in_port", 4, false, B32;
    InPhyPort = 1, "in_phy_port", 4, false, B32;
    Metadata = 2, "metadata", 8, true, B64;
    EthDst = 3, "eth_dst", 6, true, B48;
    EthSrc = 4, "eth_src", 6, true, B48;
    EthType = 5, "eth_type", 2, false, B16;
    VlanVid = 6, "vlan_vid", 2, true, 0x1fff;
    VlanPcp = 7, "vlan_pcp", 1, false, 7;
    IpDscp = 8, "ip_dscp", 1, false, 63;
    IpEcn = 9, "ip_ecn", 1, false, 3;
    IpProto = 10, "ip_proto", 1, false, B8;
    Ipv4Src = 11, "ipv4_src", 4, true, B32;
    Ipv4Dst = 12, "ipv4_dst", 4, true, B32;
    TcpSrc = 13, "tcp_src", 2, true, B16;
    TcpDst = 14, "tcp_dst", 2, true, B16;
    UdpSrc = 15, "udp_src", 2, true, B16;
    UdpDst = 16, "udp_dst", 2, true, B16;
    SctpSrc = 17, "sctp_src", 2, true, B16;
    SctpDst = 18, "sctp_dst", 2, true, B16;
    Icmpv4Type = 19, "icmpv4_type", 1, false, B8;
    Icmpv4Code = 20, "icmpv4_code", 1, false, B8;
    ArpOp = 21, "arp_op", 2, false, B16;
    ArpSpa = 22, "arp_spa", 4, true, B32;
    ArpTpa = 23, "arp_tpa", 4, true, B32;
    ArpSha = 24, "arp_sha", 6, true, B48;
    ArpTha = 25, "arp_tha", 6, true, B48;
    Ipv6Src = 26, "ipv6_src", 16, true, B128;
    Ipv6Dst = 27, "ipv6_dst", 16, true, B128;
    Ipv6Flabel = 28, "ipv6_flabel", 4, true, 0xfffff;
    Icmpv6Type = 29, "icmpv6_type", 1, false, B8;
    Icmpv6Code = 30, "icmpv6_code", 1, false, B8;
    Ipv6NdTarget = 31, "ipv6_nd_target", 16, true, B128;
    Ipv6NdSll = 32, "ipv6_nd_sll", 6, true, B48;
    Ipv6NdTll = 33, "ipv6_nd_tll", 6, true, B48;
    MplsLabel = 34, "mpls_label", 4, false, 0xfffff;
    MplsTc = 35, "mpls_tc", 1, false, 7;
    MplsBos = 36, "mpls_bos", 1, false, 1;
    PbbIsid = 37, "pbb_isid", 3, true, 0xff_ffff;
    TunnelId = 38, "tunnel_id", 8, true, B64;
    Ipv6Exthdr = 39, "ipv6_exthdr", 2, true, 0x1ff;
}

impl Field {
    /// The all-ones mask of this field's legal bits.
    pub fn full_mask(self) -> u128 {
        self.max_value()
    }

    /// The 32-bit OXM header for this field (`has_mask` doubles the length).
    pub fn header(self, has_mask: bool) -> u32 {
        let len = self.width() as u32 * if has_mask { 2 } else { 1 };
        (OFPXMC_OPENFLOW_BASIC as u32) << 16 | (self as u32) << 9 | (has_mask as u32) << 8 | len
    }
}

/// One match field: a value and, for a masked match, the bits that matter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OxmField {
    pub field: Field,
    /// The wire value read as a big-endian number (a MAC in the low 48 bits, an IPv6 address in all 128).
    pub value: u128,
    pub mask: Option<u128>,
}

impl OxmField {
    pub fn exact(field: Field, value: u128) -> Self {
        OxmField { field, value, mask: None }
    }

    pub fn masked(field: Field, value: u128, mask: u128) -> Self {
        OxmField { field, value, mask: Some(mask) }
    }

    /// The mask in effect: all bits of the field for an exact match.
    pub fn effective_mask(&self) -> u128 {
        self.mask.unwrap_or(self.field.full_mask())
    }

    pub fn encoded_len(&self) -> usize {
        4 + self.field.width() * if self.mask.is_some() { 2 } else { 1 }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.field.header(self.mask.is_some()));
        put_uint(out, self.value, self.field.width());
        if let Some(m) = self.mask {
            put_uint(out, m, self.field.width());
        }
    }

    /// One OXM TLV. `Err` carries the `OFPET_BAD_MATCH` code to answer with.
    pub fn decode(r: &mut Reader<'_>) -> Result<OxmField, DecodeError> {
        let header = r.u32("oxm header")?;
        let class = (header >> 16) as u16;
        let id = ((header >> 9) & 0x7f) as u8;
        let has_mask = header & 0x100 != 0;
        let len = (header & 0xff) as usize;
        let body = r.sub(len, short::MATCH_LEN, "oxm payload")?;
        if class != OFPXMC_OPENFLOW_BASIC {
            return Err(DecodeError::new(ErrorCode::BadMatch(BadMatch::BadField), "oxm class not supported"));
        }
        let field =
            Field::from_id(id).ok_or(DecodeError::new(ErrorCode::BadMatch(BadMatch::BadField), "unknown oxm field"))?;
        let width = field.width();
        if len != width * if has_mask { 2 } else { 1 } {
            return Err(DecodeError::new(ErrorCode::BadMatch(BadMatch::BadLen), "oxm length does not fit field"));
        }
        let mut body = body;
        let value = get_uint(body.bytes(width, "oxm value")?);
        let mask = if has_mask { Some(get_uint(body.bytes(width, "oxm mask")?)) } else { None };
        Ok(OxmField { field, value, mask })
    }
}

pub(crate) fn put_uint(out: &mut Vec<u8>, v: u128, width: usize) {
    out.extend_from_slice(&v.to_be_bytes()[16 - width..]);
}

pub(crate) fn get_uint(bytes: &[u8]) -> u128 {
    bytes.iter().fold(0u128, |acc, &b| acc << 8 | b as u128)
}

/// `ofp_match` of type OXM: a list of fields.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Match {
    pub fields: Vec<OxmField>,
}

impl Match {
    pub fn new() -> Self {
        Match::default()
    }

    pub fn with(mut self, field: Field, value: u128) -> Self {
        self.fields.push(OxmField::exact(field, value));
        self
    }

    pub fn with_masked(mut self, field: Field, value: u128, mask: u128) -> Self {
        self.fields.push(OxmField::masked(field, value, mask));
        self
    }

    pub fn get(&self, field: Field) -> Option<&OxmField> {
        self.fields.iter().find(|f| f.field == field)
    }

    /// Length of `ofp_match` without the trailing padding (the value of its `length` field).
    pub fn unpadded_len(&self) -> usize {
        4 + self.fields.iter().map(OxmField::encoded_len).sum::<usize>()
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(OFPMT_OXM);
        out.put_u16(self.unpadded_len() as u16);
        for f in &self.fields {
            f.encode(out);
        }
        out.pad8_from(start);
    }

    /// Reads an `ofp_match` including its padding.
    pub fn decode(r: &mut Reader<'_>) -> Result<Match, DecodeError> {
        let typ = r.u16("match type")?;
        let len = r.u16("match length")? as usize;
        if typ != OFPMT_OXM {
            return Err(DecodeError::new(ErrorCode::BadMatch(BadMatch::BadType), "match type is not OXM"));
        }
        if len < 4 {
            return Err(DecodeError::new(ErrorCode::BadMatch(BadMatch::BadLen), "match length below 4"));
        }
        let mut body = r.sub(len - 4, short::MATCH_LEN, "match body")?;
        let pad = crate::buf::pad8(len) - len;
        r.skip(pad, "match padding")?;
        let mut fields = Vec::new();
        while !body.is_empty() {
            fields.push(OxmField::decode(&mut body)?);
        }
        Ok(Match { fields })
    }

    /// The checks of spec §7.2.3.6-8 that need no switch state: duplicate fields, masks on fields
    /// that take none, values out of range or outside their mask, and prerequisites.
    pub fn validate(&self) -> Result<(), ErrorCode> {
        let bad = |c| Err(ErrorCode::BadMatch(c));
        for (i, f) in self.fields.iter().enumerate() {
            if self.fields[..i].iter().any(|g| g.field == f.field) {
                return bad(BadMatch::DupField);
            }
            if let Some(mask) = f.mask {
                if !f.field.maskable() {
                    return bad(BadMatch::BadMask);
                }
                if mask & !f.field.max_value() != 0 {
                    return bad(BadMatch::BadMask);
                }
                if f.value & !mask != 0 {
                    return bad(BadMatch::BadWildcards);
                }
            }
            if f.value > f.field.max_value() {
                return bad(BadMatch::BadValue);
            }
            if !self.prerequisite_met(f.field) {
                return bad(BadMatch::BadPrereq);
            }
        }
        Ok(())
    }

    /// Does the match pin `field` to exactly `value` (no mask, or a mask covering the field)?
    fn pins(&self, field: Field, value: u128) -> bool {
        self.get(field).is_some_and(|f| f.effective_mask() == field.full_mask() && f.value == value)
    }

    fn is_ip(&self) -> bool {
        self.pins(Field::EthType, 0x0800) || self.pins(Field::EthType, 0x86dd)
    }

    fn prerequisite_met(&self, field: Field) -> bool {
        use Field::*;
        let eth = |t| self.pins(EthType, t);
        let proto = |p| self.is_ip() && self.pins(IpProto, p);
        match field {
            InPhyPort => self.get(InPort).is_some(),
            VlanPcp => self.get(VlanVid).is_some_and(|f| {
                f.value & OFPVID_PRESENT as u128 != 0 && f.effective_mask() & OFPVID_PRESENT as u128 != 0
            }),
            IpDscp | IpEcn | IpProto => self.is_ip(),
            Ipv4Src | Ipv4Dst => eth(0x0800),
            TcpSrc | TcpDst => proto(6),
            UdpSrc | UdpDst => proto(17),
            SctpSrc | SctpDst => proto(132),
            Icmpv4Type | Icmpv4Code => eth(0x0800) && self.pins(IpProto, 1),
            ArpOp | ArpSpa | ArpTpa | ArpSha | ArpTha => eth(0x0806),
            Ipv6Src | Ipv6Dst | Ipv6Flabel | Ipv6Exthdr => eth(0x86dd),
            Icmpv6Type | Icmpv6Code => eth(0x86dd) && self.pins(IpProto, 58),
            Ipv6NdTarget => {
                eth(0x86dd) && self.pins(IpProto, 58) && (self.pins(Icmpv6Type, 135) || self.pins(Icmpv6Type, 136))
            }
            Ipv6NdSll => eth(0x86dd) && self.pins(IpProto, 58) && self.pins(Icmpv6Type, 135),
            Ipv6NdTll => eth(0x86dd) && self.pins(IpProto, 58) && self.pins(Icmpv6Type, 136),
            MplsLabel | MplsTc | MplsBos => eth(0x8847) || eth(0x8848),
            PbbIsid => eth(0x88e7),
            InPort | Metadata | EthDst | EthSrc | EthType | VlanVid | TunnelId => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(m: &Match) -> Match {
        let mut out = Vec::new();
        m.encode(&mut out);
        assert_eq!(out.len() % 8, 0);
        let mut r = Reader::new(&out, short::MATCH_LEN);
        let back = Match::decode(&mut r).unwrap();
        assert!(r.is_empty());
        back
    }

    #[test]
    fn every_field_round_trips_exact_and_masked() {
        for &f in Field::ALL {
            let m = Match::new().with(f, 1);
            assert_eq!(roundtrip(&m), m);
            let m = Match::new().with_masked(f, 1, f.full_mask());
            assert_eq!(roundtrip(&m), m);
        }
    }

    #[test]
    fn empty_match_is_eight_bytes() {
        let mut out = Vec::new();
        Match::new().encode(&mut out);
        assert_eq!(out, [0, 1, 0, 4, 0, 0, 0, 0]);
    }

    #[test]
    fn prerequisites() {
        let tcp = Match::new().with(Field::EthType, 0x0800).with(Field::IpProto, 6).with(Field::TcpDst, 80);
        assert_eq!(tcp.validate(), Ok(()));
        let no_proto = Match::new().with(Field::EthType, 0x0800).with(Field::TcpDst, 80);
        assert_eq!(no_proto.validate(), Err(ErrorCode::BadMatch(BadMatch::BadPrereq)));
        let pcp_without_vid = Match::new().with(Field::VlanPcp, 3);
        assert_eq!(pcp_without_vid.validate(), Err(ErrorCode::BadMatch(BadMatch::BadPrereq)));
        let pcp = Match::new().with(Field::VlanVid, 0x1005).with(Field::VlanPcp, 3);
        assert_eq!(pcp.validate(), Ok(()));
    }

    #[test]
    fn semantic_errors() {
        let dup = Match::new().with(Field::InPort, 1).with(Field::InPort, 2);
        assert_eq!(dup.validate(), Err(ErrorCode::BadMatch(BadMatch::DupField)));
        let masked_port = Match::new().with_masked(Field::InPort, 1, 1);
        assert_eq!(masked_port.validate(), Err(ErrorCode::BadMatch(BadMatch::BadMask)));
        let wild = Match::new().with_masked(Field::EthDst, 0xff, 0xf0);
        assert_eq!(wild.validate(), Err(ErrorCode::BadMatch(BadMatch::BadWildcards)));
        let big_vid = Match::new().with(Field::VlanVid, 0x2000);
        assert_eq!(big_vid.validate(), Err(ErrorCode::BadMatch(BadMatch::BadValue)));
    }

    #[test]
    fn decode_rejects_bad_lengths_and_classes() {
        // in_port claiming 5 bytes.
        let bytes = [0, 1, 0, 13, 0x80, 0, 0, 5, 0, 0, 0, 1, 2, 0, 0, 0];
        let err = Match::decode(&mut Reader::new(&bytes, short::MATCH_LEN)).unwrap_err();
        assert_eq!(err.code, ErrorCode::BadMatch(BadMatch::BadLen));
        // NXM class.
        let bytes = [0, 1, 0, 12, 0, 1, 0, 4, 0, 0, 0, 1, 0, 0, 0, 0];
        let err = Match::decode(&mut Reader::new(&bytes, short::MATCH_LEN)).unwrap_err();
        assert_eq!(err.code, ErrorCode::BadMatch(BadMatch::BadField));
        // Match type STANDARD.
        let bytes = [0, 0, 0, 4, 0, 0, 0, 0];
        let err = Match::decode(&mut Reader::new(&bytes, short::MATCH_LEN)).unwrap_err();
        assert_eq!(err.code, ErrorCode::BadMatch(BadMatch::BadType));
    }
}
