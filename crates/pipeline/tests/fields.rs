//! Every field OpenFlow 1.3 can set is set by a set-field action and then matched on by the next
//! table, on a frame of the kind the field lives in; checksums stay right throughout.

use ofp::action::{Action, Instruction};
use ofp::message::FlowMod;
use ofp::oxm::{Field, Match, OxmField};
use packet::craft::{checksums_ok, FrameBuilder, L3, L4};
use packet::{parse, Offload, Packet};
use pipeline::exec::{Sink, ToController};
use pipeline::flow::settable;
use pipeline::{Pipeline, PortView};

const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];
const V6A: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const V6B: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

#[derive(Default)]
struct Out(Vec<(u32, Vec<u8>)>);
impl Sink for Out {
    fn output(&mut self, port: u32, _queue: Option<u32>, pkt: &Packet) {
        self.0.push((port, pkt.data().to_vec()));
    }
    fn to_controller(&mut self, _: &Packet, _: &ToController) {}
}

fn v4(l4: L4) -> Vec<u8> {
    FrameBuilder::new(B, A).build(L3::Ipv4 { src: [10, 0, 0, 1], dst: [10, 0, 0, 2], ttl: 64, tos: 0, l4 })
}

fn v6(l4: L4) -> Vec<u8> {
    FrameBuilder::new(B, A).build(L3::Ipv6 { src: V6A, dst: V6B, hop_limit: 64, tc: 0, flow_label: 7, l4 })
}

fn nd(typ: u8, option: u8) -> Vec<u8> {
    let mut body = vec![0u8; 4];
    body.extend_from_slice(&V6B);
    body.extend_from_slice(&[option, 1]);
    body.extend_from_slice(&A);
    v6(L4::Icmp { typ, code: 0, payload: body })
}

fn udp() -> L4 {
    L4::Udp { src: 1000, dst: 2000, payload: b"payload".to_vec() }
}

/// A frame carrying `field`, the match prerequisites for it, and a new value to set.
fn case(field: Field) -> (Vec<u8>, Vec<(Field, u128)>, u128) {
    use Field::*;
    let ip4 = vec![(EthType, 0x800)];
    let ip6 = vec![(EthType, 0x86dd)];
    let with = |mut base: Vec<(Field, u128)>, more: &[(Field, u128)]| {
        base.extend_from_slice(more);
        base
    };
    match field {
        EthDst | EthSrc => (v4(udp()), vec![], 0x0200000000ee),
        VlanVid => (FrameBuilder::new(B, A).vlan(0x8100, 5).build(L3::Ipv4 { src: [1; 4], dst: [2; 4], ttl: 9, tos: 0, l4: udp() }), vec![], 0x1000 | 77),
        VlanPcp => (FrameBuilder::new(B, A).vlan(0x8100, 5).build(L3::Ipv4 { src: [1; 4], dst: [2; 4], ttl: 9, tos: 0, l4: udp() }), vec![(VlanVid, 0x1005)], 6),
        IpDscp => (v4(udp()), ip4, 46),
        IpEcn => (v6(udp()), ip6, 3),
        Ipv4Src | Ipv4Dst => (v4(udp()), ip4, 0xc0a80107),
        TcpSrc | TcpDst => (v4(L4::Tcp { src: 1, dst: 2, seq: 9, flags: 0x10, payload: vec![1; 9] }), with(ip4, &[(IpProto, 6)]), 4433),
        UdpSrc | UdpDst => (v6(udp()), with(ip6, &[(IpProto, 17)]), 5353),
        SctpSrc | SctpDst => (v4(L4::Sctp { src: 1, dst: 2, payload: vec![0; 16] }), with(ip4, &[(IpProto, 132)]), 3868),
        Icmpv4Type | Icmpv4Code => (v4(L4::Icmp { typ: 8, code: 0, payload: vec![1, 2, 3, 4] }), with(ip4, &[(IpProto, 1)]), 13),
        ArpOp => (arp(), vec![(EthType, 0x806)], 2),
        ArpSpa | ArpTpa => (arp(), vec![(EthType, 0x806)], 0x0a0000fe),
        ArpSha | ArpTha => (arp(), vec![(EthType, 0x806)], 0x0200000000dd),
        Ipv6Src | Ipv6Dst => (v6(udp()), ip6, 0xfd00 << 112 | 0x99),
        Ipv6Flabel => (v6(udp()), ip6, 0xabcde),
        Icmpv6Type | Icmpv6Code => (v6(L4::Icmp { typ: 128, code: 0, payload: vec![0; 8] }), with(ip6, &[(IpProto, 58)]), 129),
        Ipv6NdTarget => (nd(135, 1), with(ip6, &[(IpProto, 58), (Icmpv6Type, 135)]), 0xfe80 << 112 | 0x42),
        Ipv6NdSll => (nd(135, 1), with(ip6, &[(IpProto, 58), (Icmpv6Type, 135)]), 0x0200000000cc),
        Ipv6NdTll => (nd(136, 2), with(ip6, &[(IpProto, 58), (Icmpv6Type, 136)]), 0x0200000000cc),
        MplsLabel | MplsTc | MplsBos => (
            FrameBuilder::new(B, A).mpls(100, 1, 9).build(L3::Ipv4 { src: [1; 4], dst: [2; 4], ttl: 9, tos: 0, l4: udp() }),
            vec![(EthType, 0x8847)],
            match field { MplsLabel => 0xfffff, MplsTc => 5, _ => 0 },
        ),
        PbbIsid => (pbb(), vec![(EthType, 0x88e7)], 0x123456),
        TunnelId => (v4(udp()), vec![], 0xfeed),
        InPort | InPhyPort | Metadata | EthType | IpProto | Ipv6Exthdr => unreachable!(),
    }
}

fn arp() -> Vec<u8> {
    FrameBuilder::new([0xff; 6], A).build(L3::Arp { op: 1, sha: A, spa: [10, 0, 0, 1], tha: [0; 6], tpa: [10, 0, 0, 2] })
}

fn pbb() -> Vec<u8> {
    // B-DA, B-SA, I-TAG (I-SID 0x10), then the customer frame.
    let mut f = vec![];
    f.extend_from_slice(&B);
    f.extend_from_slice(&A);
    f.extend_from_slice(&[0x88, 0xe7, 0, 0, 0, 0x10]);
    f.extend_from_slice(&v4(udp()));
    f
}

#[test]
fn every_settable_field_is_set_and_then_matched() {
    let mut tested = 0;
    for &field in Field::ALL.iter().filter(|&&f| settable(f)) {
        let (frame, prereq, value) = case(field);
        let mut p = Pipeline::new(4);
        for n in 1..=3 {
            p.set_port(n, PortView::default());
        }
        let set = FlowMod {
            table_id: 0,
            priority: 1,
            instructions: vec![
                Instruction::ApplyActions(vec![Action::SetField(OxmField::exact(field, value))]),
                Instruction::GotoTable(1),
            ],
            ..Default::default()
        };
        p.flow_mod(&set, 0).unwrap_or_else(|e| panic!("{field:?}: {e}"));
        let mut m = Match::new();
        for (f, v) in &prereq {
            m = m.with(*f, *v);
        }
        m = m.with(field, value);
        let hit = FlowMod { table_id: 1, priority: 10, match_: m, instructions: vec![Instruction::ApplyActions(vec![Action::output(2)])], ..Default::default() };
        p.flow_mod(&hit, 0).unwrap_or_else(|e| panic!("{field:?} match: {e}"));
        let miss = FlowMod { table_id: 1, priority: 0, instructions: vec![Instruction::ApplyActions(vec![Action::output(3)])], ..Default::default() };
        p.flow_mod(&miss, 0).unwrap();

        let (key, layout) = parse(&frame, 1).unwrap();
        assert_ne!(key.get(field), value, "{field:?}: the frame must not already carry the value");
        let mut pkt = Packet::new(&frame, Offload::default(), layout);
        let mut out = Out::default();
        p.process(&mut pkt, &key, 0, &mut out);
        assert_eq!(out.0.len(), 1, "{field:?}");
        let (port, bytes) = &out.0[0];
        assert_eq!(*port, 2, "{field:?}: the next table did not see the new value");
        if field != Field::TunnelId {
            let (k2, _) = parse(bytes, 1).unwrap();
            let got = if field == Field::VlanVid { k2.get(field) } else { k2.get(field) };
            assert_eq!(got, value, "{field:?}: the frame that left does not carry it");
        }
        if field != Field::PbbIsid {
            assert!(checksums_ok(bytes), "{field:?}: checksum broken");
        }
        tested += 1;
    }
    assert_eq!(tested, 34);
}

#[test]
fn push_and_pop_pbb() {
    let mut p = Pipeline::new(3);
    for n in 1..=2 {
        p.set_port(n, PortView::default());
    }
    let push = FlowMod {
        table_id: 0,
        priority: 1,
        match_: Match::new().with(Field::InPort, 1),
        instructions: vec![
            Instruction::ApplyActions(vec![Action::PushPbb(0x88e7), Action::SetField(OxmField::exact(Field::PbbIsid, 0xabcdef))]),
            Instruction::GotoTable(1),
        ],
        ..Default::default()
    };
    p.flow_mod(&push, 0).unwrap();
    let pop = FlowMod {
        table_id: 1,
        priority: 1,
        match_: Match::new().with(Field::EthType, 0x88e7).with(Field::PbbIsid, 0xabcdef),
        instructions: vec![Instruction::ApplyActions(vec![Action::output(2), Action::PopPbb, Action::output(2)])],
        ..Default::default()
    };
    p.flow_mod(&pop, 0).unwrap();
    let frame = v4(udp());
    let (key, layout) = parse(&frame, 1).unwrap();
    let mut pkt = Packet::new(&frame, Offload::default(), layout);
    let mut out = Out::default();
    p.process(&mut pkt, &key, 0, &mut out);
    assert_eq!(out.0.len(), 2);
    let encapsulated = &out.0[0].1;
    assert_eq!(encapsulated.len(), frame.len() + 18);
    assert_eq!(&encapsulated[..12], &frame[..12], "B-DA/B-SA copied from the customer addresses");
    assert_eq!(&encapsulated[12..18], &[0x88, 0xe7, 0, 0xab, 0xcd, 0xef]);
    assert_eq!(&encapsulated[18..], &frame[..]);
    assert_eq!(out.0[1].1, frame, "pop restores the customer frame");
}
