// The packet_rewrite fuzz target's body, included by the target and by the regression tests of
// what it found (crates/packet/tests/fuzzed.rs), so that both run exactly this.

/// Fields a flow may set (OpenFlow 1.3's settable set).
const FIELDS: [ofp::Field; 24] = {
    use ofp::Field::*;
    [
        EthDst, EthSrc, EthType, VlanVid, VlanPcp, IpDscp, IpEcn, IpProto, Ipv4Src, Ipv4Dst, TcpSrc, TcpDst, UdpSrc,
        UdpDst, SctpSrc, SctpDst, Icmpv4Type, Icmpv4Code, ArpOp, ArpSpa, ArpTpa, Ipv6Src, Ipv6Dst, MplsLabel,
    ]
};

/// The first byte says how many 3-byte rewrite operations end the input; the bytes between are a
/// frame. A frame that parses takes every operation in turn (push or pop a VLAN tag or an MPLS
/// entry, or set a field to a value), and is parsed again after each.
pub fn rewrite_chain(data: &[u8]) {
    use packet::{parse, FlowKey, Offload, Packet};
    let Some((&n, rest)) = data.split_first() else { return };
    let ops_len = (n as usize % 8) * 3;
    if rest.len() < ops_len {
        return;
    }
    let (frame, ops) = rest.split_at(rest.len() - ops_len);
    let Ok((mut key, layout)) = parse(frame, 1) else { return };
    let mut pkt = Packet::new(frame, Offload::default(), layout);
    for op in ops.chunks_exact(3) {
        let value = u16::from_be_bytes([op[1], op[2]]) as u128;
        match op[0] % 8 {
            0 => pkt.push_vlan(0x8100),
            1 => pkt.pop_vlan(),
            2 => pkt.push_mpls(0x8847),
            3 => pkt.pop_mpls(0x0800),
            _ => {
                let field = FIELDS[op[0] as usize % FIELDS.len()];
                pkt.set_field(field, value & field.full_mask(), &mut key);
            }
        }
        let mut again = FlowKey::default();
        let _ = pkt.reparse(&mut again);
    }
}
