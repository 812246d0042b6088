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
        VlanVid => (
            FrameBuilder::new(B, A).vlan(0x8100, 5).build(L3::Ipv4 {
                src: [1; 4],
                dst: [2; 4],
                ttl: 9,
                tos: 0,
                l4: udp(),
            }),
            vec![],
            0x1000 | 77,
        ),
        VlanPcp => (
            FrameBuilder::new(B, A).vlan(0x8100, 5).build(L3::Ipv4 {
                src: [1; 4],
                dst: [2; 4],
                ttl: 9,
                tos: 0,
                l4: udp(),
            }),
            vec![(VlanVid, 0x1005)],
            6,
        ),
        IpDscp => (v4(udp()), ip4, 46),
        IpEcn => (v6(udp()), ip6, 3),
        Ipv4Src | Ipv4Dst => (v4(udp()), ip4, 0xc0a80107),
        TcpSrc | TcpDst => {
            (v4(L4::Tcp { src: 1, dst: 2, seq: 9, flags: 0x10, payload: vec![1; 9] }), with(ip4, &[(IpProto, 6)]), 4433)
        }
        UdpSrc | UdpDst => (v6(udp()), with(ip6, &[(IpProto, 17)]), 5353),
        SctpSrc | SctpDst => {
            (v4(L4::Sctp { src: 1, dst: 2, payload: vec![0; 16] }), with(ip4, &[(IpProto, 132)]), 3868)
        }
        Icmpv4Type | Icmpv4Code => {
            (v4(L4::Icmp { typ: 8, code: 0, payload: vec![1, 2, 3, 4] }), with(ip4, &[(IpProto, 1)]), 13)
        }
        ArpOp => (arp(), vec![(EthType, 0x806)], 2),
        ArpSpa | ArpTpa => (arp(), vec![(EthType, 0x806)], 0x0a0000fe),
        ArpSha | ArpTha => (arp(), vec![(EthType, 0x806)], 0x0200000000dd),
        Ipv6Src | Ipv6Dst => (v6(udp()), ip6, 0xfd00 << 112 | 0x99),
        Ipv6Flabel => (v6(udp()), ip6, 0xabcde),
        Icmpv6Type | Icmpv6Code => {
            (v6(L4::Icmp { typ: 128, code: 0, payload: vec![0; 8] }), with(ip6, &[(IpProto, 58)]), 129)
        }
        Ipv6NdTarget => (nd(135, 1), with(ip6, &[(IpProto, 58), (Icmpv6Type, 135)]), 0xfe80 << 112 | 0x42),
        Ipv6NdSll => (nd(135, 1), with(ip6, &[(IpProto, 58), (Icmpv6Type, 135)]), 0x0200000000cc),
        Ipv6NdTll => (nd(136, 2), with(ip6, &[(IpProto, 58), (Icmpv6Type, 136)]), 0x0200000000cc),
        MplsLabel | MplsTc | MplsBos => (
            FrameBuilder::new(B, A).mpls(100, 1, 9).build(L3::Ipv4 {
                src: [1; 4],
                dst: [2; 4],
                ttl: 9,
                tos: 0,
                l4: udp(),
            }),
            vec![(EthType, 0x8847)],
            match field {
                MplsLabel => 0xfffff,
                MplsTc => 5,
                _ => 0,
            },
        ),
        PbbIsid => (pbb(), vec![(EthType, 0x88e7)], 0x123456),
        TunnelId => (v4(udp()), vec![], 0xfeed),
        EthType => (v4(udp()), vec![], 0x8848),
        // A protocol with no pseudo-header checksum: the frame stays checkable after the change.
        IpProto => (v4(L4::Sctp { src: 1, dst: 2, payload: vec![0; 16] }), ip4, 253),
        InPort | InPhyPort | Metadata | Ipv6Exthdr => unreachable!(),
    }
}

fn arp() -> Vec<u8> {
    FrameBuilder::new([0xff; 6], A).build(L3::Arp {
        op: 1,
        sha: A,
        spa: [10, 0, 0, 1],
        tha: [0; 6],
        tpa: [10, 0, 0, 2],
    })
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
        let hit = FlowMod {
            table_id: 1,
            priority: 10,
            match_: m,
            instructions: vec![Instruction::ApplyActions(vec![Action::output(2)])],
            ..Default::default()
        };
        p.flow_mod(&hit, 0).unwrap_or_else(|e| panic!("{field:?} match: {e}"));
        let miss = FlowMod {
            table_id: 1,
            priority: 0,
            instructions: vec![Instruction::ApplyActions(vec![Action::output(3)])],
            ..Default::default()
        };
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
    assert_eq!(tested, 36);
}

/// Checks IPv4 header, TCP, UDP, ICMP, ICMPv6 and SCTP checksums from first principles, sharing no
/// code with the packet crate (which writes them): its own parse, sum and bitwise CRC32c.
fn independently_checksummed(f: &[u8]) -> Result<(), String> {
    fn sum(b: &[u8]) -> u32 {
        b.chunks(2).map(|c| (c[0] as u32) << 8 | *c.get(1).unwrap_or(&0) as u32).sum()
    }
    fn ok(s: u32) -> bool {
        let mut s = s;
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        s == 0xffff
    }
    fn crc32c(b: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &byte in b {
            crc ^= byte as u32;
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0x82f6_3b78 } else { crc >> 1 };
            }
        }
        !crc
    }
    let mut at = 12;
    while matches!(u16::from_be_bytes([f[at], f[at + 1]]), 0x8100 | 0x88a8) {
        at += 4;
    }
    let et = u16::from_be_bytes([f[at], f[at + 1]]);
    let l3 = at + 2;
    let (proto, seg, pseudo) = match et {
        0x0800 => {
            let ihl = (f[l3] & 15) as usize * 4;
            if !ok(sum(&f[l3..l3 + ihl])) {
                return Err("IPv4 header".into());
            }
            let total = u16::from_be_bytes([f[l3 + 2], f[l3 + 3]]) as usize;
            let seg = &f[l3 + ihl..l3 + total];
            (f[l3 + 9], seg, sum(&f[l3 + 12..l3 + 20]) + f[l3 + 9] as u32 + seg.len() as u32)
        }
        0x86dd => {
            let plen = u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]) as usize;
            let seg = &f[l3 + 40..l3 + 40 + plen];
            (f[l3 + 6], seg, sum(&f[l3 + 8..l3 + 40]) + f[l3 + 6] as u32 + seg.len() as u32)
        }
        _ => return Ok(()),
    };
    let good = match proto {
        6 | 58 => ok(pseudo + sum(seg)),
        17 => (et == 0x0800 && seg[6..8] == [0, 0]) || (seg[6..8] != [0, 0] && ok(pseudo + sum(seg))),
        1 => ok(sum(seg)),
        132 => {
            let mut z = seg.to_vec();
            z[8..12].fill(0);
            crc32c(&z).to_le_bytes() == seg[8..12]
        }
        _ => true,
    };
    if good {
        Ok(())
    } else {
        Err(format!("protocol {proto} checksum"))
    }
}

/// The frame wrapped in an outer header that table 0 removes: an MPLS label, or a PBB backbone
/// header (B-DA, B-SA, I-TAG).
fn wrapped(frame: &[u8], outer: Outer) -> Vec<u8> {
    let mut f = Vec::new();
    match outer {
        Outer::Mpls => {
            f.extend_from_slice(&frame[..12]);
            f.extend_from_slice(&[0x88, 0x47, 0x00, 0x06, 0x41, 0x40]); // label 100, BoS, TTL 64
            f.extend_from_slice(&frame[14..]);
        }
        Outer::Pbb => {
            f.extend_from_slice(&[2, 0, 0, 0, 0, 0xbb, 2, 0, 0, 0, 0, 0xaa]);
            f.extend_from_slice(&[0x88, 0xe7, 0, 0, 0, 0x10]);
            f.extend_from_slice(frame);
        }
    }
    f
}

#[derive(Clone, Copy, Debug)]
enum Outer {
    Mpls,
    Pbb,
}

/// Table 0 pops the outer header, table 1 sets the field, table 2 matches it. The frame that
/// leaves must be the one the unwrapped frame gives, checksums right: offsets parsed before the
/// pop must not be used after it. Each frame goes twice (the second run replays what the first
/// translated).
#[test]
fn set_field_after_pop_rewrites_the_inner_packet() {
    use Field::*;
    let l3_l4 = [
        IpDscp,
        IpEcn,
        Ipv4Src,
        Ipv4Dst,
        TcpSrc,
        TcpDst,
        UdpSrc,
        UdpDst,
        SctpSrc,
        SctpDst,
        Icmpv4Type,
        Icmpv4Code,
        Ipv6Src,
        Ipv6Dst,
        Ipv6Flabel,
        Icmpv6Type,
        Icmpv6Code,
        Ipv6NdTarget,
        Ipv6NdSll,
        Ipv6NdTll,
        IpProto,
        EthDst,
    ];
    for outer in [Outer::Mpls, Outer::Pbb] {
        for field in l3_l4 {
            let (frame, prereq, value) = case(field);
            let run = |frame: &[u8], pop: Option<Action>| {
                let mut p = Pipeline::new(4);
                for n in 1..=3 {
                    p.set_port(n, PortView::default());
                }
                let mut first = vec![];
                if let Some(pop) = pop {
                    first.push(pop);
                }
                let mut flows = vec![
                    FlowMod {
                        table_id: 0,
                        priority: 1,
                        instructions: vec![Instruction::ApplyActions(first), Instruction::GotoTable(1)],
                        ..Default::default()
                    },
                    FlowMod {
                        table_id: 1,
                        priority: 1,
                        instructions: vec![
                            Instruction::ApplyActions(vec![Action::SetField(OxmField::exact(field, value))]),
                            Instruction::GotoTable(2),
                        ],
                        ..Default::default()
                    },
                    FlowMod {
                        table_id: 2,
                        priority: 0,
                        instructions: vec![Instruction::ApplyActions(vec![Action::output(3)])],
                        ..Default::default()
                    },
                ];
                let mut m = Match::new();
                for (f, v) in &prereq {
                    m = m.with(*f, *v);
                }
                flows.push(FlowMod {
                    table_id: 2,
                    priority: 10,
                    match_: m.with(field, value),
                    instructions: vec![Instruction::ApplyActions(vec![Action::output(2)])],
                    ..Default::default()
                });
                for f in &flows {
                    p.flow_mod(f, 0).unwrap_or_else(|e| panic!("{outer:?} {field:?}: {e}"));
                }
                let mut out = Out::default();
                for _ in 0..2 {
                    let (key, layout) = parse(frame, 1).unwrap();
                    let mut pkt = Packet::new(frame, Offload::default(), layout);
                    p.process(&mut pkt, &key, 0, &mut out);
                }
                out.0
            };
            let plain = run(&frame, None);
            let pop = match outer {
                Outer::Mpls => Action::PopMpls(u16::from_be_bytes([frame[12], frame[13]])),
                Outer::Pbb => Action::PopPbb,
            };
            let wrapped_frame = wrapped(&frame, outer);
            let popped = run(&wrapped_frame, Some(pop));
            assert_eq!(plain.len(), 2, "{field:?}");
            assert_eq!(plain[0].0, 2, "{field:?}: the plain frame did not match after the set");
            for (port, bytes) in &popped {
                assert_eq!(*port, 2, "{outer:?} {field:?}: the set value was not matched after the pop");
                let want = &plain[0].1;
                assert_eq!(&bytes[..want.len()], &want[..], "{outer:?} {field:?}: a different frame left");
                // Only zero padding may follow: a frame that had the Ethernet minimum keeps it.
                let len = if wrapped_frame.len() >= 60 { want.len().max(60) } else { want.len() };
                assert_eq!(bytes.len(), len, "{outer:?} {field:?}: length");
                assert!(bytes[want.len()..].iter().all(|&b| b == 0), "{outer:?} {field:?}: padding");
                independently_checksummed(bytes).unwrap_or_else(|e| panic!("{outer:?} {field:?}: {e} wrong"));
            }
            independently_checksummed(&plain[0].1).unwrap_or_else(|e| panic!("{field:?}: {e} wrong"));
        }
    }
}

/// After a pop, the next table matches the inner packet's L3/L4 fields, for every packet (the
/// decision cannot be cached on the outer header, which does not show them).
#[test]
fn fields_under_a_popped_label_are_matched() {
    let mut p = Pipeline::new(4);
    for n in 1..=3 {
        p.set_port(n, PortView::default());
    }
    let flows = [
        FlowMod {
            table_id: 0,
            priority: 1,
            match_: Match::new().with(Field::EthType, 0x8847),
            instructions: vec![Instruction::ApplyActions(vec![Action::PopMpls(0x0800)]), Instruction::GotoTable(1)],
            ..Default::default()
        },
        FlowMod {
            table_id: 1,
            priority: 10,
            match_: Match::new()
                .with(Field::EthType, 0x800)
                .with(Field::IpProto, 1)
                .with(Field::Icmpv4Type, 8)
                .with(Field::Icmpv4Code, 0),
            instructions: vec![Instruction::ApplyActions(vec![Action::output(2)])],
            ..Default::default()
        },
        FlowMod {
            table_id: 1,
            priority: 0,
            instructions: vec![Instruction::ApplyActions(vec![Action::output(3)])],
            ..Default::default()
        },
    ];
    for f in &flows {
        p.flow_mod(f, 0).unwrap();
    }
    let mut seen = vec![];
    for (typ, code) in [(8, 0), (0, 0), (8, 0), (8, 1), (0, 0), (8, 0)] {
        let frame = wrapped(&v4(L4::Icmp { typ, code, payload: vec![1, 2, 3, 4] }), Outer::Mpls);
        let (key, layout) = parse(&frame, 1).unwrap();
        let mut pkt = Packet::new(&frame, Offload::default(), layout);
        let mut out = Out::default();
        p.process(&mut pkt, &key, 0, &mut out);
        seen.push(out.0[0].0);
    }
    assert_eq!(seen, [2, 3, 2, 3, 3, 2]);
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
            Instruction::ApplyActions(vec![
                Action::PushPbb(0x88e7),
                Action::SetField(OxmField::exact(Field::PbbIsid, 0xabcdef)),
            ]),
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
    let popped = &out.0[1].1;
    assert_eq!(&popped[..frame.len()], &frame[..], "pop restores the customer frame");
    assert_eq!(popped.len(), 60.max(frame.len()), "a minimum-size frame stays minimum size");
    assert!(popped[frame.len()..].iter().all(|&b| b == 0), "zero padding");
}

/// A flow may retype a frame (set eth_type) and then act on the header the new type names, which
/// a short frame of another type does not hold: an 18-byte frame retyped IPv4 (a runt, as a packet
/// socket on a veth port can send). The switch leaves what is not there alone; it read past the
/// frame's end and panicked before (the packet fuzzer found it, crates/packet/tests/fuzzed.rs).
#[test]
fn actions_on_a_header_a_retyped_frame_lacks_leave_it_alone() {
    let mut p = Pipeline::new(1);
    for n in 1..=2 {
        p.set_port(n, PortView::default());
    }
    let fm = FlowMod {
        priority: 5,
        instructions: vec![Instruction::ApplyActions(vec![
            Action::SetField(OxmField::exact(Field::EthType, 0x800)),
            Action::DecNwTtl,
            Action::SetField(OxmField::exact(Field::IpDscp, 8)),
            Action::PushMpls(0x8847),
            Action::output(2),
        ])],
        ..Default::default()
    };
    p.flow_mod(&fm, 0).unwrap();
    let mut frame = [B, A].concat();
    frame.extend_from_slice(&[0x88, 0xb5, 1, 2, 3, 4]);
    let (key, layout) = parse(&frame, 1).unwrap();
    let mut pkt = Packet::new(&frame, Offload::default(), layout);
    let mut out = Out::default();
    p.process(&mut pkt, &key, 0, &mut out);
    assert_eq!(out.0.len(), 1, "the frame still goes out");
    assert_eq!(&out.0[0].1[12..14], &[0x88, 0x47], "retyped, then labelled");
}
