use ofp::oxm::Field;
use packet::craft::{checksums_ok, llc, llc_snap, FrameBuilder, L3, L4};
use packet::{parse, FlowKey, Offload, Packet, PartialCsum};

const A: [u8; 6] = [0x02, 0, 0, 0, 0, 0xa];
const B: [u8; 6] = [0x02, 0, 0, 0, 0, 0xb];

fn tcp4() -> Vec<u8> {
    FrameBuilder::new(B, A).build(L3::Ipv4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
        ttl: 64,
        tos: 0x2e << 2 | 1,
        l4: L4::Tcp { src: 1234, dst: 80, seq: 1, flags: 0x02, payload: b"hello".to_vec() },
    })
}

fn packet_of(frame: &[u8]) -> (Packet, FlowKey) {
    let (key, layout) = parse(frame, 1).unwrap();
    (Packet::new(frame, Offload::default(), layout), key)
}

#[test]
fn parses_tcp_over_ipv4() {
    let (key, layout) = parse(&tcp4(), 7).unwrap();
    assert_eq!(key.get(Field::InPort), 7);
    assert_eq!(key.get(Field::EthDst), 0x02000000000b);
    assert_eq!(key.get(Field::EthType), 0x0800);
    assert_eq!(key.get(Field::IpDscp), 0x2e);
    assert_eq!(key.get(Field::IpEcn), 1);
    assert_eq!(key.get(Field::IpProto), 6);
    assert_eq!(key.get(Field::Ipv4Src), 0x0a000001);
    assert_eq!(key.get(Field::TcpSrc), 1234);
    assert_eq!(key.get(Field::TcpDst), 80);
    assert_eq!(key.get(Field::VlanVid), 0);
    assert_eq!((layout.l3, layout.l4), (14, 34));
}

#[test]
fn parses_stacked_vlans_mpls_arp_icmpv6_nd() {
    let qinq = FrameBuilder::new(B, A).vlan(0x88a8, 0x2000 | 100).vlan(0x8100, 200).build(L3::Arp {
        op: 1,
        sha: A,
        spa: [10, 0, 0, 1],
        tha: [0; 6],
        tpa: [10, 0, 0, 2],
    });
    let (key, layout) = parse(&qinq, 1).unwrap();
    assert_eq!(key.get(Field::VlanVid), 0x1000 | 100);
    assert_eq!(key.get(Field::VlanPcp), 1);
    assert_eq!(key.get(Field::EthType), 0x0806);
    assert_eq!(key.get(Field::ArpOp), 1);
    assert_eq!(key.get(Field::ArpSpa), 0x0a000001);
    assert_eq!(key.get(Field::ArpTpa), 0x0a000002);
    assert_eq!(key.get(Field::ArpSha), 0x02000000000a);
    assert_eq!(layout.n_vlans, 2);

    let mpls = FrameBuilder::new(B, A).mpls(1000, 5, 9).mpls(2000, 0, 8).build(L3::Ipv4 {
        src: [1, 1, 1, 1],
        dst: [2, 2, 2, 2],
        ttl: 7,
        tos: 0,
        l4: L4::Udp { src: 1, dst: 2, payload: vec![] },
    });
    let (key, _) = parse(&mpls, 1).unwrap();
    assert_eq!(key.get(Field::EthType), 0x8847);
    assert_eq!(key.get(Field::MplsLabel), 1000);
    assert_eq!(key.get(Field::MplsTc), 5);
    assert_eq!(key.get(Field::MplsBos), 0);
    assert_eq!(key.get(Field::Ipv4Src), 0, "nothing under MPLS is matchable");

    // Neighbour solicitation with a source link-layer option.
    let mut ns = vec![0u8; 4];
    ns.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    ns.extend_from_slice(&[1, 1]);
    ns.extend_from_slice(&A);
    let nd = FrameBuilder::new(B, A).build(L3::Ipv6 {
        src: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        dst: [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 2],
        hop_limit: 255,
        tc: 0,
        flow_label: 0x12345,
        l4: L4::Icmp { typ: 135, code: 0, payload: ns },
    });
    let (key, _) = parse(&nd, 1).unwrap();
    assert_eq!(key.get(Field::IpProto), 58);
    assert_eq!(key.get(Field::Icmpv6Type), 135);
    assert_eq!(key.get(Field::Ipv6NdTarget), 0xfe80_0000_0000_0000_0000_0000_0000_0002);
    assert_eq!(key.get(Field::Ipv6NdSll), 0x02000000000a);
    assert_eq!(key.get(Field::Ipv6Flabel), 0x12345);
    assert!(checksums_ok(&nd));
}

#[test]
fn malformed_frames_are_refused() {
    assert!(parse(&[0u8; 13], 1).is_err());
    let mut bad_ihl = tcp4();
    bad_ihl[14] = 0x43;
    assert!(parse(&bad_ihl, 1).is_err());
    let truncated = &tcp4()[..14 + 20 + 10];
    assert!(parse(truncated, 1).is_err());
    let vlan_runt = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x81, 0x00, 0];
    assert!(parse(&vlan_runt, 1).is_err());
}

#[test]
fn push_and_pop_vlan() {
    let frame = tcp4();
    let (mut p, mut key) = packet_of(&frame);
    p.push_vlan(0x8100);
    p.set_field(Field::VlanVid, 0x1000 | 42, &mut key);
    p.set_field(Field::VlanPcp, 5, &mut key);
    let (k2, _) = parse(p.data(), 1).unwrap();
    assert_eq!(k2.get(Field::VlanVid), 0x1000 | 42);
    assert_eq!(k2.get(Field::VlanPcp), 5);
    assert_eq!(k2.get(Field::TcpDst), 80);
    // A second push copies the outer tag.
    p.push_vlan(0x88a8);
    assert_eq!(&p.data()[12..16], &[0x88, 0xa8, 0xa0, 42]);
    p.pop_vlan();
    p.pop_vlan();
    assert_eq!(p.data(), &frame[..]);
    p.pop_vlan();
    assert_eq!(p.data(), &frame[..], "pop on an untagged frame does nothing");
}

#[test]
fn rewrites_keep_checksums_right() {
    let frame = tcp4();
    let (mut p, mut key) = packet_of(&frame);
    p.set_field(Field::Ipv4Src, 0xc0a80001, &mut key);
    p.set_field(Field::Ipv4Dst, 0xc0a80002, &mut key);
    p.set_field(Field::TcpDst, 8080, &mut key);
    p.set_field(Field::TcpSrc, 4321, &mut key);
    p.set_field(Field::IpDscp, 10, &mut key);
    p.set_field(Field::IpEcn, 2, &mut key);
    p.dec_nw_ttl().unwrap();
    p.set_field(Field::EthDst, 0x0200000000ff, &mut key);
    assert!(checksums_ok(p.data()));
    let (k2, _) = parse(p.data(), 1).unwrap();
    assert_eq!(k2.get(Field::Ipv4Src), 0xc0a80001);
    assert_eq!(k2.get(Field::TcpDst), 8080);
    assert_eq!(k2.get(Field::IpDscp), 10);
    assert_eq!(k2, {
        let mut k = key;
        k.set(Field::InPhyPort, 1);
        k
    });

    let udp6 = FrameBuilder::new(B, A).build(L3::Ipv6 {
        src: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        dst: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        hop_limit: 64,
        tc: 0,
        flow_label: 0,
        l4: L4::Udp { src: 53, dst: 5353, payload: b"abc".to_vec() },
    });
    let (mut p, mut key) = packet_of(&udp6);
    p.set_field(Field::Ipv6Src, 0xfd00 << 112 | 7, &mut key);
    p.set_field(Field::UdpDst, 9, &mut key);
    p.dec_nw_ttl().unwrap();
    assert!(checksums_ok(p.data()));

    let icmp = FrameBuilder::new(B, A).build(L3::Ipv4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
        ttl: 1,
        tos: 0,
        l4: L4::Icmp { typ: 8, code: 0, payload: vec![1, 2, 3] },
    });
    let (mut p, mut key) = packet_of(&icmp);
    p.set_field(Field::Icmpv4Type, 0, &mut key);
    assert!(checksums_ok(p.data()));
    assert!(p.dec_nw_ttl().is_err(), "TTL 1 cannot be decremented");
}

/// ICMPv4's checksum covers its own message and no pseudo-header: an address rewrite leaves it as
/// it was (the differential fuzzer found userspace folding the address change into it, where the
/// kernel fast path, rightly, did not).
#[test]
fn an_ipv4_address_rewrite_leaves_an_icmp_checksum_alone() {
    let icmp = FrameBuilder::new(B, A).build(L3::Ipv4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
        ttl: 64,
        tos: 0,
        l4: L4::Icmp { typ: 8, code: 0, payload: vec![3; 20] },
    });
    let (mut p, mut key) = packet_of(&icmp);
    let l4 = p.layout.l4 as usize;
    let before = p.data()[l4 + 2..l4 + 4].to_vec();
    p.set_field(Field::Ipv4Src, 0xc0a8_0001, &mut key);
    p.set_field(Field::Ipv4Dst, 0xac10_0009, &mut key);
    assert_eq!(&p.data()[l4 + 2..l4 + 4], &before[..], "the ICMP checksum");
    assert!(checksums_ok(p.data()));
}

#[test]
fn partial_checksum_survives_address_rewrite() {
    // A sender with checksum offload leaves the pseudo-header sum in the TCP checksum field.
    let full = tcp4();
    let (key, layout) = parse(&full, 1).unwrap();
    let l3 = layout.l3 as usize;
    let l4 = layout.l4 as usize;
    let mut partial = full.clone();
    let seg_len = (full.len() - l4) as u32;
    let pseudo =
        packet::csum::fold(packet::csum::pseudo_v4(&full[l3 + 12..l3 + 16], &full[l3 + 16..l3 + 20], 6, seg_len));
    partial[l4 + 16..l4 + 18].copy_from_slice(&pseudo.to_be_bytes());
    let offload = Offload { csum: Some(PartialCsum { start: l4 as u16, offset: 16 }), gso: None };
    let mut p = Packet::new(&partial, offload, layout);
    let mut k = key;
    p.set_field(Field::Ipv4Dst, 0x0a000063, &mut k);
    p.set_field(Field::TcpDst, 443, &mut k);
    p.push_vlan(0x8100);
    assert_eq!(p.offload.csum.unwrap().start as usize, l4 + 4, "offload offsets follow a pushed tag");
    p.pop_vlan();
    p.finish_checksum();
    assert!(checksums_ok(p.data()));
}

#[test]
fn mpls_push_pop_and_ttl() {
    let frame = tcp4();
    let (mut p, mut key) = packet_of(&frame);
    p.push_mpls(0x8847);
    p.reparse(&mut key).unwrap();
    assert_eq!(key.get(Field::EthType), 0x8847);
    assert_eq!(key.get(Field::MplsBos), 1);
    assert_eq!(p.data()[14 + 3], 64, "MPLS TTL copied from IP");
    p.set_field(Field::MplsLabel, 77, &mut key);
    p.dec_mpls_ttl().unwrap();
    p.reparse(&mut key).unwrap();
    assert_eq!(key.get(Field::MplsLabel), 77);
    p.copy_ttl_in();
    p.pop_mpls(0x0800);
    p.reparse(&mut key).unwrap();
    assert_eq!(key.get(Field::EthType), 0x0800);
    assert_eq!(key.get(Field::TcpDst), 80);
    assert_eq!(p.data()[14 + 8], 63, "IP TTL copied in from the decremented label");
    assert!(checksums_ok(p.data()));
}

#[test]
fn segments_a_tcp_super_frame() {
    let payload: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
    let frame = FrameBuilder::new(B, A).build(L3::Ipv4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
        ttl: 64,
        tos: 0,
        l4: L4::Tcp { src: 1, dst: 2, seq: 1000, flags: 0x18 | 0x01, payload: payload.clone() },
    });
    let (_, layout) = parse(&frame, 1).unwrap();
    let gso = packet::Gso { kind: packet::GsoKind::TcpV4, size: 1448, ecn: false };
    let p = Packet::new(&frame, Offload { csum: None, gso: Some(gso) }, layout);
    let segs = packet::segment::segment(p);
    assert_eq!(segs.len(), 4);
    let mut joined = Vec::new();
    for (i, s) in segs.iter().enumerate() {
        assert!(checksums_ok(s.data()), "segment {i}");
        let d = s.data();
        let seq = u32::from_be_bytes(d[38..42].try_into().unwrap());
        assert_eq!(seq, 1000 + 1448 * i as u32);
        let fin = d[47] & 1 != 0;
        assert_eq!(fin, i == 3);
        joined.extend_from_slice(&d[54..]);
    }
    assert_eq!(joined, payload);
}

/// A configuration BPDU as a bridge sends it: to the bridge group address, LLC 0x42/0x42.
fn bpdu() -> Vec<u8> {
    llc([0x01, 0x80, 0xc2, 0, 0, 0], A, 0x42, 0x42, &[0; 35])
}

#[test]
fn an_8023_frame_has_the_ethertype_of_its_snap_header_or_0x05ff() {
    // LLC/SNAP with OUI 0: the protocol id is the eth_type, and IP behind it is parsed.
    let snap = llc_snap(&tcp4());
    let (key, layout) = parse(&snap, 1).unwrap();
    assert_eq!(key.get(Field::EthType), 0x0800);
    assert_eq!((key.get(Field::IpProto), key.get(Field::Ipv4Dst), key.get(Field::TcpDst)), (6, 0x0a000002, 80));
    assert_eq!((layout.length_at, layout.ethertype_at, layout.l3, layout.l4), (12, 20, 22, 42));
    assert!(checksums_ok(&snap));

    // Every other 802.3 frame: 0x05ff, nothing above it.
    let mut other_oui = snap.clone();
    other_oui[19] = 0x0c; // Cisco's OUI, as CDP uses
    let mut short_id = snap.clone();
    short_id[20..22].copy_from_slice(&0x0100u16.to_be_bytes());
    let mut cut = bpdu();
    cut.truncate(16);
    let others =
        [("BPDU", bpdu()), ("other OUI", other_oui), ("protocol id below 0x0600", short_id), ("cut short", cut)];
    for (name, frame) in others {
        let (key, layout) = parse(&frame, 1).unwrap();
        assert_eq!(key.get(Field::EthType), 0x05ff, "{name}");
        assert_eq!((key.get(Field::IpProto), key.get(Field::Ipv4Dst), layout.l4), (0, 0, 0), "{name}");
        assert_eq!((layout.length_at, layout.ethertype_at), (12, 12), "{name}");
    }
    // A tagged one: the length field follows the tag.
    let mut tagged = bpdu();
    tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
    let (key, layout) = parse(&tagged, 1).unwrap();
    assert_eq!((key.get(Field::EthType), key.get(Field::VlanVid), layout.length_at), (0x05ff, 0x1005, 16));
}

#[test]
fn rewrites_behind_a_snap_header_are_those_of_the_ethernet_ii_frame() {
    // IP and transport rewrites land behind the SNAP header, checksums fixed as for Ethernet II.
    let (mut p, mut key) = packet_of(&llc_snap(&tcp4()));
    let (mut q, mut qkey) = packet_of(&tcp4());
    for (pkt, k) in [(&mut p, &mut key), (&mut q, &mut qkey)] {
        pkt.set_field(Field::Ipv4Dst, 0x0a00_0063, k);
        pkt.set_field(Field::TcpDst, 8080, k);
        pkt.dec_nw_ttl().unwrap();
    }
    assert_eq!(p.data(), &llc_snap(q.data())[..]);
    assert!(checksums_ok(p.data()));

    // A tag goes in front of the length field, which it leaves alone.
    let snap = llc_snap(&tcp4());
    let (mut p, mut key) = packet_of(&snap);
    p.push_vlan(0x8100);
    p.set_field(Field::VlanVid, 0x1000 | 9, &mut key);
    assert_eq!(p.data()[12..18], [0x81, 0x00, 0x00, 0x09, snap[12], snap[13]]);
    p.reparse(&mut key).unwrap();
    assert_eq!((key.get(Field::EthType), key.get(Field::TcpDst)), (0x0800, 80));
    p.pop_vlan();
    assert_eq!(p.data(), &snap[..]);

    // A label goes behind the SNAP header, whose protocol id becomes MPLS's: the 802.3 length
    // grows by the label, and a pop gives back the frame as it came.
    let (mut p, mut key) = packet_of(&snap);
    p.push_mpls(0x8847);
    let length = |d: &[u8]| u16::from_be_bytes([d[12], d[13]]);
    assert_eq!(length(p.data()), length(&snap) + 4);
    assert_eq!(p.data()[20..22], [0x88, 0x47]);
    p.reparse(&mut key).unwrap();
    assert_eq!((key.get(Field::EthType), key.get(Field::MplsBos)), (0x8847, 1));
    p.pop_mpls(0x0800);
    assert_eq!(p.data(), &snap[..]);

    // A plain LLC frame's length field is its ethertype field: a label pushed there makes it an
    // MPLS frame whose payload is the LLC header, and a second push leaves the first label alone.
    let frame = bpdu();
    let (mut p, _) = packet_of(&frame);
    p.push_mpls(0x8847);
    p.set_field(Field::MplsLabel, 5, &mut FlowKey::default());
    p.push_mpls(0x8847);
    assert_eq!(p.data()[12..14], [0x88, 0x47]);
    assert_eq!(u32::from_be_bytes(p.data()[18..22].try_into().unwrap()) >> 12, 5, "the first label, intact");
    assert_eq!(p.data()[22..], frame[14..]);
}
