//! The software target runs the example programs on crafted frames: forwarding, flooding,
//! rewriting, dropping, counting and policing as each program says.

use p4::backends::software::{Dropped, Match, Switch};
use packet::craft::{checksums_ok, udp4};

const H1: [u8; 6] = [2, 0, 0, 0, 0, 1];
const H2: [u8; 6] = [2, 0, 0, 0, 0, 2];

fn load(name: &str) -> Switch {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/p4").join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let (program, checked) = p4::front_end(name, &text).unwrap_or_else(|e| panic!("{e}"));
    Switch::new(program, checked).unwrap()
}

fn mac(m: [u8; 6]) -> u128 {
    m.iter().fold(0u128, |v, &b| (v << 8) | b as u128)
}

/// `frame` with an 802.1Q tag after the source MAC.
fn tagged(frame: &[u8], pcp: u8, vid: u16) -> Vec<u8> {
    let tci = ((pcp as u16) << 13) | vid;
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(&0x8100u16.to_be_bytes());
    f.extend_from_slice(&tci.to_be_bytes());
    f.extend_from_slice(&frame[12..]);
    f
}

#[test]
fn l2_switch_forwards_known_addresses_floods_the_rest_and_keeps_vlans_apart() {
    let mut sw = load("l2_switch.p4");
    assert_eq!(sw.tables(), ["L2Ingress.dmac", "L2Ingress.vlan_allowed"]);
    sw.insert("L2Ingress.dmac", vec![Match::Exact(0), Match::Exact(mac(H2))], "forward", vec![2], 0).unwrap();
    sw.set_group(1, vec![1, 2, 3]);
    let to_h2 = udp4(H1, H2, [10, 0, 0, 1], [10, 0, 0, 2], 4000, 9, 60);
    let out = sw.process(&to_h2, 1, 0).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].port, out[0].queue, &out[0].frame), (2, 0, &to_h2), "forwarded unchanged");

    // An unknown destination: every port of the group but the one it came in on.
    let to_h3 = udp4(H1, [2, 0, 0, 0, 0, 3], [10, 0, 0, 1], [10, 0, 0, 3], 4000, 9, 60);
    let ports: Vec<u32> = sw.process(&to_h3, 1, 0).unwrap().iter().map(|o| o.port).collect();
    assert_eq!(ports, [2, 3]);

    // VLAN 10 is not carried by port 1 until the control plane says so; its priority is the queue.
    let tagged_to_h2 = tagged(&to_h2, 5, 10);
    assert_eq!(sw.process(&tagged_to_h2, 1, 0), Err(Dropped::Program));
    sw.insert("L2Ingress.vlan_allowed", vec![Match::Exact(1), Match::Exact(10)], "NoAction", vec![], 0).unwrap();
    sw.insert("L2Ingress.dmac", vec![Match::Exact(10), Match::Exact(mac(H2))], "forward", vec![4], 0).unwrap();
    let out = sw.process(&tagged_to_h2, 1, 0).unwrap();
    assert_eq!((out[0].port, out[0].queue, &out[0].frame), (4, 5, &tagged_to_h2));
    assert_eq!(sw.entry_counts("L2Ingress.dmac").unwrap(), [(1, 60), (1, 64)], "the direct counter, per entry");

    // The control plane is held to the program: the key's width, the table's actions.
    let e =
        sw.insert("L2Ingress.dmac", vec![Match::Exact(1 << 12), Match::Exact(0)], "forward", vec![1], 0).unwrap_err();
    assert!(e.contains("does not fit a 12-bit exact key"), "{e}");
    let e = sw.insert("L2Ingress.dmac", vec![Match::Exact(0), Match::Exact(0)], "drop", vec![], 0).unwrap_err();
    assert_eq!(e, "L2Ingress.dmac has no action 'drop' (it has forward, flood)");
}

#[test]
fn ipv4_router_takes_the_longest_prefix_and_rewrites_as_a_router_does() {
    let mut sw = load("ipv4_router.p4");
    let next_hop = |src: [u8; 6], dst: [u8; 6], port: u128, route: u128| vec![mac(src), mac(dst), port, route];
    let net = |a: u8, b: u8| (10u128 << 24) | ((a as u128) << 16) | ((b as u128) << 8);
    sw.insert(
        "RouterIngress.routes",
        vec![Match::Lpm { value: net(0, 0), prefix: 8 }],
        "next_hop",
        next_hop(H1, H2, 3, 7),
        0,
    )
    .unwrap();
    sw.insert(
        "RouterIngress.routes",
        vec![Match::Lpm { value: net(1, 0), prefix: 16 }],
        "next_hop",
        next_hop(H1, [2, 0, 0, 0, 0, 4], 4, 8),
        0,
    )
    .unwrap();
    let frame = udp4([2, 0, 0, 0, 0, 9], [2, 0, 0, 0, 0, 8], [192, 168, 0, 1], [10, 1, 2, 3], 4000, 9, 80);
    let out = sw.process(&frame, 1, 0).unwrap();
    assert_eq!(out.len(), 1);
    let f = &out[0].frame;
    assert_eq!(out[0].port, 4, "the /16 wins over the /8");
    assert_eq!((&f[0..6], &f[6..12]), (&[2, 0, 0, 0, 0, 4][..], &H1[..]));
    assert_eq!(f[22], 63, "TTL one less");
    assert!(checksums_ok(f), "the header checksum follows the TTL");
    assert_eq!(
        f[23..],
        frame[23..]
            .iter()
            .copied()
            .enumerate()
            .map(|(i, b)| if i == 1 || i == 2 { f[23 + i] } else { b })
            .collect::<Vec<_>>()[..]
    );
    assert_eq!(sw.counter("RouterIngress.routed", 8), Some((1, 80)));
    let elsewhere = udp4(H2, H1, [192, 168, 0, 1], [10, 9, 9, 9], 4000, 9, 80);
    assert_eq!(sw.process(&elsewhere, 1, 0).unwrap()[0].port, 3);

    let mut dying = frame.clone();
    dying[22] = 1;
    assert_eq!(sw.process(&dying, 1, 0), Err(Dropped::Program), "TTL 1: dropped");
    let mut arp = frame.clone();
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(sw.process(&arp, 1, 0), Err(Dropped::Parser("NoMatch".into())), "not IPv4: rejected by the parser");
    let unrouted = udp4(H2, H1, [192, 168, 0, 1], [172, 16, 0, 1], 4000, 9, 80);
    assert_eq!(sw.process(&unrouted, 1, 0), Err(Dropped::Program), "no route: the default drops");
    assert_eq!(sw.process(&frame[..20], 1, 0), Err(Dropped::Parser("PacketTooShort".into())));
}

#[test]
fn afdx_switch_checks_polices_and_sends_each_link_to_its_ports() {
    let mut sw = load("afdx_switch.p4");
    // VL 5 comes in on port 1 and leaves by ports 2 and 3 on queue 7: BAG 1 ms, frames of 64
    // to 200 bytes (with FCS).
    sw.insert(
        "AfdxIngress.tbl_forward_virtual_link",
        vec![Match::Exact(1), Match::Exact(5)],
        "forward",
        vec![1, 7, 0, 1000, 0, 64, 200],
        0,
    )
    .unwrap();
    sw.set_group(1, vec![2, 3]);
    let vl5 = [3, 0, 0, 0, 0, 5];
    let frame = udp4([2, 0, 0, 0, 1, 0x20], vl5, [10, 0, 0, 1], [224, 224, 0, 5], 4000, 9, 100);
    let out = sw.process(&frame, 1, 0).unwrap();
    assert_eq!(out.iter().map(|o| (o.port, o.queue)).collect::<Vec<_>>(), [(2, 7), (3, 7)]);
    assert!(out.iter().all(|o| o.frame == frame));

    // BAG policing: 100 µs later the link has no credit for another frame; 1 ms after the
    // first, it has.
    assert_eq!(sw.process(&frame, 1, 100_000), Err(Dropped::Program));
    assert_eq!(sw.counter("AfdxIngress.policed", 0), Some((1, 100)));
    assert!(sw.process(&frame, 1, 1_000_000).is_ok());

    // Integrity: the wrong port, a source not in the end-system format, the wrong constant, a
    // frame too big.
    assert_eq!(sw.process(&frame, 2, 5_000_000), Err(Dropped::Program), "VL 5 is port 1's");
    let group_source = udp4([3, 0, 0, 0, 0, 1], vl5, [10, 0, 0, 1], [224, 224, 0, 5], 4000, 9, 100);
    assert_eq!(sw.process(&group_source, 1, 6_000_000), Err(Dropped::Program));
    let not_afdx = udp4([2, 0, 0, 0, 1, 0x20], [4, 0, 0, 0, 0, 5], [10, 0, 0, 1], [224, 224, 0, 5], 4000, 9, 100);
    assert_eq!(sw.process(&not_afdx, 1, 7_000_000), Err(Dropped::Program));
    let too_big = udp4([2, 0, 0, 0, 1, 0x20], vl5, [10, 0, 0, 1], [224, 224, 0, 5], 4000, 9, 197);
    assert_eq!(sw.process(&too_big, 1, 8_000_000), Err(Dropped::Program), "197 bytes + FCS > 200");
    let largest = udp4([2, 0, 0, 0, 1, 0x20], vl5, [10, 0, 0, 1], [224, 224, 0, 5], 4000, 9, 196);
    assert!(sw.process(&largest, 1, 9_000_000).is_ok(), "196 bytes + FCS = 200");
}

/// A switch that parses Ethernet only and runs `ingress` (its declarations and apply block) as
/// control I: what the extern tests need around them.
fn ethernet_switch(ingress: &str) -> Switch {
    let program = format!(
        "#include <edgeflow.p4>
header eth_t {{ bit<48> dst; bit<48> src; bit<16> type; }}
struct h_t {{ eth_t eth; }}
struct m_t {{ }}
parser P(packet_in pk, out h_t hdr, inout m_t meta, inout standard_metadata_t sm) {{
    state start {{ pk.extract(hdr.eth); transition accept; }}
}}
control I(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) {{
{ingress}
}}
control E(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control D(packet_out pk, in h_t hdr) {{ apply {{ pk.emit(hdr.eth); }} }}
EdgeflowSwitch(P(), I(), E(), D()) main;
"
    );
    let (p, c) = p4::front_end("ethernet.p4", &program).unwrap_or_else(|e| panic!("{e}"));
    Switch::new(p, c).unwrap()
}

/// An indirect meter marks by RFC 2698: green within the committed rate and burst, yellow within
/// the peak ones, red beyond; the buckets refill with time. Unset, it marks everything green.
#[test]
fn meters_mark_green_yellow_and_red() {
    let mut sw = ethernet_switch(
        "    meter(4, MeterType.packets) m;
    apply {
        bit<2> colour;
        m.execute_meter((bit<32>) hdr.eth.dst[1:0], colour);
        if (colour == 2) { mark_to_drop(sm); } else { sm.egress_port = 2; sm.priority = (bit<3>) colour; }
    }
",
    );
    // 1000 frames/s committed with a burst of 2, 2000/s peak with a burst of 3.
    sw.set_meter("I.m", 0, 1000, 2, 2000, 3).unwrap();
    let frame = udp4(H1, [2, 0, 0, 0, 0, 4], [10, 0, 0, 1], [10, 0, 0, 2], 4000, 9, 60);
    let colour = |sw: &mut Switch, now| sw.process(&frame, 1, now).map(|o| o[0].queue);
    assert_eq!(colour(&mut sw, 0), Ok(0));
    assert_eq!(colour(&mut sw, 0), Ok(0));
    assert_eq!(colour(&mut sw, 0), Ok(1), "over the committed burst: yellow");
    assert_eq!(colour(&mut sw, 0), Err(Dropped::Program), "over the peak burst: red, dropped");
    assert_eq!(colour(&mut sw, 1_000_000), Ok(0), "1 ms later: one frame's committed credit back");
    // Cell 1 is not set: green.
    let other = udp4(H1, [2, 0, 0, 0, 0, 5], [10, 0, 0, 1], [10, 0, 0, 2], 4000, 9, 60);
    assert!((0..10).all(|_| sw.process(&other, 1, 0).map(|o| o[0].queue) == Ok(0)));
    assert!(sw.set_meter("I.m", 9, 1, 1, 1, 1).unwrap_err().contains("4 cells"));
}

/// A table's direct meter: each entry has its own cell, set by the control plane, which the entry's
/// action reads after the lookup; a miss reads green.
#[test]
fn a_direct_meter_marks_per_entry() {
    let mut sw = ethernet_switch(
        "    direct_meter<bit<2>>(MeterType.packets) dm;
    action fwd(PortId_t p) {
        bit<2> colour;
        dm.read(colour);
        sm.egress_port = p;
        sm.priority = (bit<3>) colour;
        if (colour == 2) { mark_to_drop(sm); }
    }
    table t { key = { hdr.eth.dst : exact; } actions = { fwd; } default_action = fwd(9); meters = dm; }
    apply { t.apply(); }
",
    );
    let (a, b) = ([2, 0, 0, 0, 0, 0xa], [2, 0, 0, 0, 0, 0xb]);
    for (dst, port) in [(a, 2), (b, 3)] {
        sw.insert("I.t", vec![Match::Exact(mac(dst))], "fwd", vec![port], 0).unwrap();
    }
    // Entry a: a burst of one within the committed rate, two within the peak.
    sw.set_entry_meter("I.t", &[Match::Exact(mac(a))], 0, [1000, 1, 1000, 2]).unwrap();
    let to = |dst: [u8; 6]| udp4(H1, dst, [10, 0, 0, 1], [10, 0, 0, 2], 4000, 9, 60);
    let seen = |sw: &mut Switch, dst| sw.process(&to(dst), 1, 0).map(|o| (o[0].port, o[0].queue));
    assert_eq!(seen(&mut sw, a), Ok((2, 0)), "green");
    assert_eq!(seen(&mut sw, a), Ok((2, 1)), "yellow");
    assert_eq!(seen(&mut sw, a), Err(Dropped::Program), "red");
    assert_eq!(seen(&mut sw, b), Ok((3, 0)), "entry b has its own cell, never set: green");
    assert_eq!(seen(&mut sw, [2, 0, 0, 0, 0, 0xc]), Ok((9, 0)), "a miss: green");
    let e = sw.set_entry_meter("I.t", &[Match::Exact(1)], 0, [1, 1, 1, 1]).unwrap_err();
    assert_eq!(e, "I.t has no such entry");
}
