//! The fast-path programs run on crafted frames through BPF_PROG_TEST_RUN, with entries installed
//! as the switch installs them: kernel behaviour tested without namespaces or interfaces.
//! Over 1 000 lines, one concern: each test drives one program feature (flows, actions, meters,
//! AFDX links, LESS labels, a kept fast path taken over) on both hooks, against what userspace
//! does with the same frame.

use super::*;
use packet::craft::{checksums_ok, udp4};

const H1: [u8; 6] = [2, 0, 0, 0, 0, 1];
const H2: [u8; 6] = [2, 0, 0, 0, 0, 2];
const H3: [u8; 6] = [2, 0, 0, 0, 0, 3];
const H4: [u8; 6] = [2, 0, 0, 0, 0, 4];
/// Port 1 is the loopback interface: test runs need a real ingress device.
const LO: u32 = 1;
const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;
const XDP_REDIRECT: u32 = 4;
const TC_ACT_SHOT: u32 = 2;
const TC_ACT_REDIRECT: u32 = 7;

/// The fast-path programs loaded, port 1 being the loopback interface; None when the test is to
/// be skipped for want of root (ebpf::test_may_load_programs).
fn fast_path() -> Option<FastPath> {
    if !ebpf::test_may_load_programs("the kernel fast-path tests") {
        return None;
    }
    let mut fp = FastPath::open(Mode::Xdp, &[], Programs::Flows, DEFAULT_ENTRIES).expect("the fast-path object loads");
    fp.register_port(1, LO, 1).unwrap();
    Some(fp)
}

/// The AFDX programs loaded, port 1 being the loopback interface (None as for `fast_path`, and
/// on a kernel older than 5.12, which must refuse them: their account takes a compare-and-exchange,
/// an atomic instruction 5.12 brought; the switch then keeps AFDX in userspace).
fn afdx_fast_path() -> Option<FastPath> {
    if !ebpf::test_may_load_programs("the kernel fast-path tests") {
        return None;
    }
    let loaded = FastPath::open(Mode::Xdp, &[], Programs::Links, DEFAULT_ENTRIES);
    if ebpf::kernel_release().is_some_and(|v| v < (5, 12)) {
        let e = loaded.err().expect("a kernel before 5.12 refuses the AFDX programs' compare-and-exchange");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
        eprintln!("AFDX fast path: refused by this kernel, as expected before 5.12: {e}");
        return None;
    }
    let mut fp = loaded.expect("the fast-path object loads");
    fp.register_port(1, LO, 1).unwrap();
    Some(fp)
}

/// Installs an entry as the copy of cache entry `RuleId(n)`, n counting installs; returns the id.
fn install(fp: &mut FastPath, frame: &[u8], mask_fields: &[Field], actions: &[DpAction]) -> RuleId {
    let id = RuleId(fp.installed as u32);
    install_as(fp, id, frame, mask_fields, actions);
    id
}

fn install_as(fp: &mut FastPath, id: RuleId, frame: &[u8], mask_fields: &[Field], actions: &[DpAction]) {
    let (key, _) = packet::parse(frame, 1).unwrap();
    let mut mask = FlowKey::default();
    mask.set(Field::InPort, u32::MAX as u128);
    for &f in mask_fields {
        mask.set(f, u128::MAX);
    }
    let ifindex = |p: u32| (p == 1).then_some(LO);
    let mut no_meters = |_| None;
    let mut cx =
        EncodeContext { mode: Mode::Xdp, ifindex: &ifindex, meter_slot: &mut no_meters, ip_proto: key.ip_proto() };
    let outputs: Vec<(u32, u8)> = actions_outputs(actions).into_iter().map(|p| (p, 1)).collect();
    assert!(fp.install(id, &key, &mask.masked(&mask), actions, &Credits::default(), &outputs, &mut cx), "installed");
}

/// Runs the fast path's XDP program (flows or links, as it was opened) once on `frame`, arriving
/// on the loopback interface.
fn xdp(fp: &FastPath, frame: &[u8]) -> (u32, Vec<u8>) {
    fp.run_once(Mode::Xdp, frame, LO).unwrap()
}

/// The same with its TC program.
fn tc(fp: &FastPath, frame: &[u8]) -> (u32, Vec<u8>) {
    fp.run_once(Mode::Tc, frame, LO).unwrap()
}

/// The AFDX programs' verdict on `frame` on `hook` ("xdp" or "tc").
fn afdx_verdict(fp: &FastPath, hook: &str, frame: &[u8]) -> u32 {
    if hook == "xdp" {
        xdp(fp, frame).0
    } else {
        tc(fp, frame).0
    }
}

/// `tc` for a GSO super-frame of `gso_size`-byte segments.
fn tc_super(fp: &FastPath, frame: &[u8], gso_size: u32) -> (u32, Vec<u8>) {
    fp.obj.program("ef_tc_ingress").unwrap().run_once(frame, &ebpf::sk_buff(LO, gso_size)).unwrap()
}

/// The IPv4 header checksum computed from scratch (not the incremental update the kernel does).
fn set_ip_checksum(f: &mut [u8]) {
    packet::csum::set_ipv4_checksum(&mut f[14..34]);
}

fn frame(dst: [u8; 6], ttl: u8) -> Vec<u8> {
    let mut f = udp4(H1, dst, [10, 0, 0, 1], [10, 0, 0, 2], 4000, 9, 60);
    f[22] = ttl;
    set_ip_checksum(&mut f);
    assert!(checksums_ok(&f));
    f
}

#[test]
fn miss_hit_rewrite_drop_and_slow_path_on_xdp_and_tc() {
    let Some(mut fp) = fast_path() else { return };
    let to_h2 = frame(H2, 64);
    let to_h3 = frame(H3, 64);

    // A miss goes up: XDP passes it to the port's socket; TC, with no upcall interface here,
    // can only drop it, and says why.
    assert_eq!(xdp(&fp, &to_h2).0, XDP_PASS);
    assert_eq!(tc(&fp, &to_h2).0, TC_ACT_SHOT);
    assert_eq!(fp.counters()[1], 2, "two misses");
    assert_eq!(fp.drops()[2], ("no_upcall", 1));

    // A hit: source MAC and IPv4 destination rewritten (checksums fixed), then output.
    let rewrite = [
        DpAction::SetField(Field::EthSrc, 0x0200_0000_0099),
        DpAction::SetField(Field::Ipv4Dst, u32::from_be_bytes([10, 0, 0, 12]) as u128),
        DpAction::Output(1),
    ];
    install(&mut fp, &to_h2, &[Field::EthDst], &rewrite);
    let mut expected = to_h2.clone();
    expected[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0x99]);
    expected[33] = 12;
    set_ip_checksum(&mut expected);
    for (name, (verdict, out)) in [("xdp", xdp(&fp, &to_h2)), ("tc", tc(&fp, &to_h2))] {
        assert_eq!(verdict, if name == "xdp" { XDP_REDIRECT } else { TC_ACT_REDIRECT }, "{name}");
        assert_eq!(out[..34], expected[..34], "{name}: headers as userspace would write them");
        assert!(checksums_ok(&out), "{name}: IPv4 and UDP checksums");
    }

    // An entry that sends nowhere drops, and the drop is counted as the mode's decision.
    install(&mut fp, &to_h3, &[Field::EthDst], &[]);
    assert_eq!(xdp(&fp, &to_h3).0, XDP_DROP);
    assert_eq!(tc(&fp, &to_h3).0, TC_ACT_SHOT);
    let h = fp.harvest(0);
    assert_eq!(h.flows.iter().map(|f| f.2).sum::<u64>(), 4, "four hits harvested");
    assert_eq!(fp.drops()[0], ("no_output", 2));

    // A TTL about to expire is userspace's to handle (it may owe the controller a packet-in).
    let dying = frame(H4, 1);
    let dec = [DpAction::DecNwTtl(None), DpAction::Output(1)];
    install(&mut fp, &dying, &[Field::EthDst, Field::Ipv4Dst], &dec);
    let slow_before = fp.counters()[3];
    assert_eq!(xdp(&fp, &dying).0, XDP_PASS);
    assert_eq!(fp.counters()[3], slow_before + 1, "counted as slow path");

    // A flush makes every entry unreachable at once.
    fp.flush();
    assert_eq!(xdp(&fp, &to_h2).0, XDP_PASS, "after a flush, a miss again");
}

/// Retiring one entry (the pipeline retired its original) deletes just that one, with the hits it
/// took since the last harvest; the others keep hitting, and a mask no entry uses any more is
/// freed for the next.
#[test]
fn retiring_an_entry_leaves_the_others_alone() {
    let Some(mut fp) = fast_path() else { return };
    let frame = |dst: [u8; 6], ttl: u8| udp4(H1, dst, [10, 0, 0, 1], [10, 0, 0, ttl], 4000, 9, 60);
    let (to_h2, to_h3, to_h4) = (frame(H2, 2), frame(H3, 3), frame(H4, 4));
    let a = install(&mut fp, &to_h2, &[Field::EthDst], &[DpAction::Output(1)]);
    let b = install(&mut fp, &to_h3, &[Field::EthDst], &[DpAction::Output(1)]);
    let c = install(&mut fp, &to_h4, &[Field::EthDst, Field::Ipv4Dst], &[DpAction::Output(1)]);
    assert_eq!((fp.len(), fp.masks.iter().flatten().count()), (3, 2));
    for f in [&to_h2, &to_h2, &to_h3, &to_h4] {
        assert_eq!(xdp(&fp, f).0, XDP_REDIRECT, "all three hit");
    }
    let h = fp.retire(&Retired { entries: vec![a, c], meters: vec![] });
    let mut counted: Vec<(RuleId, u64)> = h.flows.iter().map(|f| (f.0, f.2)).collect();
    counted.sort();
    assert_eq!(counted, vec![(a, 2), (c, 1)], "each retired entry's last hits, and only theirs");
    assert_eq!(xdp(&fp, &to_h2).0, XDP_PASS, "retired: a miss");
    assert_eq!(xdp(&fp, &to_h4).0, XDP_PASS, "retired: a miss");
    assert_eq!(xdp(&fp, &to_h3).0, XDP_REDIRECT, "untouched: still a hit");
    assert_eq!((fp.len(), fp.retired), (1, 2));
    assert_eq!(fp.masks.iter().flatten().count(), 1, "the mask only the retired entry used is free");
    assert_eq!(fp.harvest(0).flows.iter().map(|f| (f.0, f.2)).collect::<Vec<_>>(), vec![(b, 2)]);
    // An id the pipeline reused before the datapath retired its old copy: the copy is the new
    // entry's, never both.
    install_as(&mut fp, b, &to_h2, &[Field::EthDst], &[DpAction::Output(1)]);
    assert_eq!(xdp(&fp, &to_h3).0, XDP_PASS, "the old copy went");
    assert_eq!(xdp(&fp, &to_h2).0, XDP_REDIRECT);
    fp.retire(&Retired { entries: vec![b], meters: vec![] });
    assert_eq!(xdp(&fp, &to_h2).0, XDP_PASS);
    assert!(fp.is_empty());
}

/// A UDP datagram with a 2-byte payload (a 44-byte frame: veth does not pad) gets its port and
/// address rewritten by the kernel like any other, not dropped for failing TCP's header bound.
#[test]
fn short_udp_datagram_is_rewritten_not_dropped() {
    let Some(mut fp) = fast_path() else { return };
    let short = udp4(H1, H2, [10, 0, 0, 1], [10, 0, 0, 2], 4000, 9, 44);
    assert_eq!(short.len(), 44);
    let rewrite = [
        DpAction::SetField(Field::UdpDst, 53),
        DpAction::SetField(Field::Ipv4Src, u32::from_be_bytes([10, 0, 0, 7]) as u128),
        DpAction::Output(1),
    ];
    install(&mut fp, &short, &[Field::EthDst], &rewrite);
    for (name, (verdict, out)) in [("xdp", xdp(&fp, &short)), ("tc", tc(&fp, &short))] {
        assert_eq!(verdict, if name == "xdp" { XDP_REDIRECT } else { TC_ACT_REDIRECT }, "{name}");
        assert_eq!(u16::from_be_bytes([out[36], out[37]]), 53, "{name}: destination port");
        assert_eq!(out[26..30], [10, 0, 0, 7], "{name}: source address");
        assert!(checksums_ok(&out), "{name}: IPv4 and UDP checksums");
    }
}

/// Every action the kernel carries out, on TC and XDP, against what userspace's executor makes of
/// the same frame, byte for byte. TC test runs leave a tag in the data (the stack would have moved
/// it into metadata), and a tag TC pushes goes into metadata, out of the returned bytes: pushing is
/// checked on XDP only, as the namespace conformance tests check it on both.
#[test]
fn every_action_does_in_the_kernel_what_userspace_does() {
    use packet::craft::{FrameBuilder, L3, L4};
    use pipeline::exec::{execute, Sink, ToController};
    struct Sent(Vec<Vec<u8>>);
    impl Sink for Sent {
        fn output(&mut self, _: u32, _: Option<u32>, pkt: &packet::Packet) {
            self.0.push(pkt.data().to_vec());
        }
        fn to_controller(&mut self, _: &packet::Packet, _: &ToController) {}
    }
    let ip4 = |vlans: &[(u16, u16)], l4: L4| {
        let mut b = FrameBuilder::new(H2, H1);
        for &(tpid, tci) in vlans {
            b = b.vlan(tpid, tci);
        }
        b.build(L3::Ipv4 { src: [10, 0, 0, 1], dst: [10, 0, 0, 2], ttl: 64, tos: 0x21, l4 })
    };
    let udp = || L4::Udp { src: 4000, dst: 9, payload: vec![7; 22] };
    let tcp = || L4::Tcp { src: 4000, dst: 80, seq: 1, flags: 0x10, payload: vec![7; 10] };
    let ip6 = FrameBuilder::new(H2, H1).build(L3::Ipv6 {
        src: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        dst: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        hop_limit: 64,
        tc: 0x21,
        flow_label: 0x12345,
        l4: udp(),
    });
    let set = |f: Field, v: u128| DpAction::SetField(f, v);
    let addr = |a: [u8; 4]| u32::from_be_bytes(a) as u128;
    let cases: Vec<(&str, Vec<u8>, Vec<DpAction>, bool)> = vec![
        (
            "Ethernet addresses",
            ip4(&[], udp()),
            vec![set(Field::EthDst, 0x0200_0000_0042), set(Field::EthSrc, 0x0200_0000_0043)],
            true,
        ),
        (
            "IPv4 addresses and UDP ports",
            ip4(&[], udp()),
            vec![
                set(Field::Ipv4Src, addr([192, 168, 1, 1])),
                set(Field::Ipv4Dst, addr([172, 16, 0, 9])),
                set(Field::UdpSrc, 53),
                set(Field::UdpDst, 5353),
            ],
            true,
        ),
        (
            "IPv4 address and TCP ports",
            ip4(&[], tcp()),
            vec![set(Field::Ipv4Dst, addr([10, 9, 8, 7])), set(Field::TcpSrc, 1), set(Field::TcpDst, 65535)],
            true,
        ),
        ("IPv4 DSCP and TTL", ip4(&[], udp()), vec![set(Field::IpDscp, 46), DpAction::DecNwTtl(None)], true),
        ("IPv6 DSCP and hop limit", ip6.clone(), vec![set(Field::IpDscp, 46), DpAction::DecNwTtl(None)], true),
        (
            "VLAN VID and PCP",
            ip4(&[(0x8100, 0x2005)], udp()),
            vec![set(Field::VlanVid, 0x1000 | 42), set(Field::VlanPcp, 5)],
            true,
        ),
        ("pop a tag", ip4(&[(0x8100, 0x2005)], udp()), vec![DpAction::PopVlan], true),
        ("pop the outer of two", ip4(&[(0x88a8, 0x0010), (0x8100, 0x2005)], udp()), vec![DpAction::PopVlan], false),
        (
            "push onto an untagged frame",
            ip4(&[], udp()),
            vec![DpAction::PushVlan(0x8100), set(Field::VlanVid, 0x1000 | 7)],
            false,
        ),
        (
            "push a copy of the tag it covers",
            ip4(&[(0x8100, 0x6005)], tcp()),
            vec![DpAction::PushVlan(0x88a8), set(Field::Ipv4Src, addr([1, 2, 3, 4]))],
            false,
        ),
    ];
    let Some(mut fp) = fast_path() else { return };
    for (name, frame, actions, on_tc) in cases {
        let actions: Vec<DpAction> = actions.into_iter().chain([DpAction::Output(1)]).collect();
        let (_, layout) = packet::parse(&frame, 1).unwrap();
        let mut pkt = packet::Packet::new(&frame, Default::default(), layout);
        let mut sent = Sent(Vec::new());
        execute(&actions, &mut pkt, &mut Default::default(), 0, &mut sent).unwrap();
        let want = &sent.0[0];
        fp.flush();
        install(&mut fp, &frame, &[Field::EthDst], &actions);
        let (verdict, out) = xdp(&fp, &frame);
        assert_eq!((verdict, &out), (XDP_REDIRECT, want), "xdp: {name}");
        if on_tc {
            let (verdict, out) = tc(&fp, &frame);
            assert_eq!((verdict, &out), (TC_ACT_REDIRECT, want), "tc: {name}");
        }
        assert!(checksums_ok(want), "{name}: userspace's checksums");
    }
    assert_eq!(fp.drops()[3], ("action_failed", 0));
}

/// 802.3 frames as `packet::parse` reads them: a plain LLC frame (a BPDU) is eth_type 0x05ff in the
/// kernel too and is decided there, on both hooks, by an entry for 0x05ff and not by one for IPv4;
/// an LLC/SNAP frame, whose IP userspace parses behind the SNAP header, goes up whole, although an
/// entry for its ethertype is in place.
#[test]
fn plain_llc_is_0x05ff_in_the_kernel_and_llc_snap_goes_up() {
    use packet::craft::{llc, llc_snap};
    let Some(mut fp) = fast_path() else { return };
    let ip = frame(H2, 64);
    let bpdu = llc([0x01, 0x80, 0xc2, 0, 0, 0], H1, 0x42, 0x42, &[0; 35]);
    let snap = llc_snap(&ip);
    assert_eq!(packet::parse(&bpdu, 1).unwrap().0.eth_type(), 0x05ff);
    assert_eq!(packet::parse(&snap, 1).unwrap().0.eth_type(), 0x0800);

    install(&mut fp, &ip, &[Field::EthType], &[DpAction::Output(1)]);
    assert_eq!(xdp(&fp, &ip).0, XDP_REDIRECT, "the IPv4 entry takes IPv4");
    let upcalls = fp.counters()[2];
    assert_eq!(xdp(&fp, &bpdu), (XDP_PASS, bpdu.clone()), "xdp: a BPDU is no IPv4 frame");
    assert_eq!(xdp(&fp, &snap), (XDP_PASS, snap.clone()), "xdp: LLC/SNAP goes up");
    assert_eq!(tc(&fp, &snap).0, TC_ACT_SHOT, "tc: LLC/SNAP goes up (no upcall interface here)");
    assert_eq!(fp.counters()[2], upcalls + 3, "all three counted as upcalls");

    install(&mut fp, &bpdu, &[Field::EthType], &[DpAction::Output(1)]);
    for (name, (verdict, out)) in [("xdp", xdp(&fp, &bpdu)), ("tc", tc(&fp, &bpdu))] {
        assert_eq!(verdict, if name == "xdp" { XDP_REDIRECT } else { TC_ACT_REDIRECT }, "{name}: the 0x05ff entry");
        assert_eq!(out, bpdu, "{name}: unchanged");
    }
    assert_eq!(xdp(&fp, &snap).0, XDP_PASS, "LLC/SNAP still goes up");
}

/// An entry for a frame to H2 that meters it (meter 1: one drop band of `rate` packets a second,
/// a burst of `burst`) and outputs it to port 1, keyed on the whole of `fields`; returns the frame.
/// The flow key the kernel builds (a word at a time, `bpf/fp_parse.h`) is userspace's
/// (`packet::parse`), byte for byte, for every kind of frame the kernel decides: read back from
/// the per-CPU scratch area of the CPU the test run ran on. A field in a wrong byte would
/// otherwise only show as misses (the frame goes up and userspace does it right), which no
/// verdict test sees.
#[test]
fn the_kernels_flow_key_is_userspaces_byte_for_byte() {
    use packet::craft::{llc, FrameBuilder, L3, L4};
    let Some(fp) = fast_path() else { return };
    // Test runs run on the calling CPU: stay on one, to read its scratch area after.
    let cpu = unsafe { libc::sched_getcpu() };
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    assert_eq!(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) }, 0);
    let v4 = |l4: L4| L3::Ipv4 { src: [10, 1, 2, 3], dst: [10, 4, 5, 6], ttl: 61, tos: 0xb9, l4 };
    let v6 = |l4: L4| L3::Ipv6 {
        src: [0xfd, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
        dst: [0xfd, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f],
        hop_limit: 7,
        tc: 0xb9,
        flow_label: 0xa5b6c,
        l4,
    };
    let udp = || L4::Udp { src: 0x1234, dst: 0x5678, payload: vec![7; 12] };
    let tcp = || L4::Tcp { src: 0x2345, dst: 0x6789, seq: 1, flags: 0x12, payload: vec![] };
    let sctp = || L4::Sctp { src: 0x3456, dst: 0x789a, payload: vec![1; 4] };
    let icmp = |typ| L4::Icmp { typ, code: 3, payload: vec![0; 8] };
    let eth = || FrameBuilder::new([2, 0xa, 0xb, 0xc, 0xd, 0xe], [4, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e]);
    let arp = L3::Arp {
        op: 2,
        sha: [6, 0x31, 0x32, 0x33, 0x34, 0x35],
        spa: [192, 168, 7, 8],
        tha: [6, 0x41, 0x42, 0x43, 0x44, 0x45],
        tpa: [192, 168, 9, 10],
    };
    let mut fragment = eth().build(v4(udp()));
    fragment[20] = 0x00; // offset 8 bytes: a later fragment, no ports
    fragment[21] = 0x01;
    set_ip_checksum(&mut fragment);
    let frames: Vec<(&str, Vec<u8>)> = vec![
        ("IPv4 UDP", eth().build(v4(udp()))),
        ("IPv4 TCP", eth().build(v4(tcp()))),
        ("IPv4 SCTP", eth().build(v4(sctp()))),
        ("IPv4 ICMP", eth().build(v4(icmp(8)))),
        ("IPv4 other protocol", eth().build(v4(L4::Raw { proto: 47, payload: vec![9; 8] }))),
        ("IPv4 later fragment", fragment),
        ("802.1Q IPv4 UDP", eth().vlan(0x8100, 0xa123).build(v4(udp()))),
        ("802.1ad and 802.1Q IPv4 TCP", eth().vlan(0x88a8, 0x6456).vlan(0x8100, 0x2789).build(v4(tcp()))),
        ("IPv6 UDP", eth().build(v6(udp()))),
        ("IPv6 TCP", eth().build(v6(tcp()))),
        ("IPv6 ICMPv6 echo", eth().build(v6(L4::Raw { proto: 58, payload: vec![128, 0, 0, 0, 0, 1, 0, 1] }))),
        ("802.1Q IPv6 UDP", eth().vlan(0x8100, 0x4abc).build(v6(udp()))),
        ("ARP", eth().build(arp)),
        ("MPLS", eth().mpls(0xabcde, 5, 9).build(v4(udp()))),
        ("PBB", eth().build(L3::Raw { ethertype: 0x88e7, payload: vec![0x71, 0x72, 0x73, 0x74, 0, 0, 0, 0] })),
        ("other ethertype", eth().build(L3::Raw { ethertype: 0x88b5, payload: vec![5; 30] })),
        ("802.3 LLC", llc(H2, H1, 0x42, 0x42, &[3; 40])),
    ];
    for (what, frame) in frames {
        let (want, _) = packet::parse(&frame, 1).unwrap_or_else(|e| panic!("{what}: userspace: {e:?}"));
        let misses = fp.counters()[1];
        let (verdict, _) = xdp(&fp, &frame);
        assert_eq!(verdict, XDP_PASS, "{what}");
        assert_eq!(fp.counters()[1], misses + 1, "{what}: the kernel parsed it and missed (not sent up unparsed)");
        let scratch = fp.obj.map("ef_scratch").unwrap().lookup_percpu(&0u32.to_ne_bytes()).unwrap();
        // struct scratch (bpf/fp_state.h): the head's copy (PARSE_BYTES, 128), then the key.
        let got = &scratch[cpu as usize][128..128 + KEY_BYTES];
        let differ: Vec<usize> = (0..KEY_BYTES).filter(|&i| got[i] != want.0[i]).collect();
        assert!(
            differ.is_empty(),
            "{what}: key bytes {differ:?} differ:\n kernel    {got:02x?}\n userspace {:02x?}",
            want.0
        );
    }
}

fn install_metered(fp: &mut FastPath, rate: u32, burst: u32, fields: &[Field]) -> Vec<u8> {
    use ofp::group_meter::{meter_command, meter_flags, BandKind, MeterBand};
    let mut meters = pipeline::meter::MeterTable::default();
    let band = MeterBand { rate, burst_size: burst, kind: BandKind::Drop };
    meters.apply(meter_command::ADD, meter_flags::PKTPS | meter_flags::BURST, 1, &[band], 0).unwrap();
    let slot = fp.meter_slot(1, &meters.meters[&1]).expect("a kernel meter slot");
    let f = frame(H2, 64);
    let (key, _) = packet::parse(&f, 1).unwrap();
    let mut mask = FlowKey::default();
    for &field in fields {
        mask.set(field, u128::MAX);
    }
    let ifindex = |p: u32| (p == 1).then_some(LO);
    let mut slots = |_| Some(slot);
    let mut cx = EncodeContext { mode: Mode::Xdp, ifindex: &ifindex, meter_slot: &mut slots, ip_proto: key.ip_proto() };
    let actions = [DpAction::Meter(1), DpAction::Output(1)];
    assert!(fp.install(RuleId(0), &key, &mask.masked(&mask), &actions, &Credits::default(), &[(1, 1)], &mut cx));
    f
}

/// A drop-band meter in the kernel passes its burst, then drops, counted as `meter`, on both hooks.
#[test]
fn a_meter_drops_past_its_burst_and_says_so() {
    let Some(mut fp) = fast_path() else { return };
    let f = install_metered(&mut fp, 1, 2, &[Field::InPort, Field::EthDst]);
    let verdicts: Vec<u32> = (0..4).map(|i| if i % 2 == 0 { xdp(&fp, &f).0 } else { tc(&fp, &f).0 }).collect();
    assert_eq!(verdicts, [XDP_REDIRECT, TC_ACT_REDIRECT, XDP_DROP, TC_ACT_SHOT], "a burst of two, then drops");
    assert_eq!(fp.drops()[1], ("meter", 2));
}

/// A transport port rewrite is encoded for the protocol of the frame that made the entry (TCP or
/// UDP: which checksum to fix); an ICMP frame under the same translation, which consulted no
/// protocol, must not meet it in the kernel, where it failed and was dropped while userspace
/// forwarded it (found by the differential fuzzer).
#[test]
fn a_transport_rewrite_covers_only_the_protocol_it_was_made_for() {
    use packet::craft::{FrameBuilder, L3, L4};
    let Some(mut fp) = fast_path() else { return };
    let udp = frame(H2, 64);
    install(&mut fp, &udp, &[Field::EthType], &[DpAction::SetField(Field::UdpDst, 53), DpAction::Output(1)]);
    assert_eq!(xdp(&fp, &udp).0, XDP_REDIRECT, "the datagram it was made for");
    let icmp = FrameBuilder::new(H2, H1).build(L3::Ipv4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
        ttl: 64,
        tos: 0,
        l4: L4::Icmp { typ: 8, code: 0, payload: vec![3; 20] },
    });
    assert_eq!(xdp(&fp, &icmp), (XDP_PASS, icmp.clone()), "xdp: an ICMP frame goes up");
    assert_eq!(tc(&fp, &icmp).0, TC_ACT_SHOT, "tc: up (no upcall interface here)");
    assert_eq!(fp.drops()[3], ("action_failed", 0));
}

/// A later IPv4 fragment holds no transport header: a port rewrite leaves it alone, as userspace
/// does; the kernel wrote the port into the Ethernet header (its transport offset is 0 there).
#[test]
fn a_later_fragment_keeps_its_bytes_under_a_port_rewrite() {
    let Some(mut fp) = fast_path() else { return };
    let udp = frame(H2, 64);
    let actions = [DpAction::SetField(Field::UdpDst, 53), DpAction::Output(1)];
    install(&mut fp, &udp, &[Field::EthType, Field::IpProto], &actions);
    let mut later = udp.clone();
    later[20..22].copy_from_slice(&1u16.to_be_bytes()); // fragment offset 8
    set_ip_checksum(&mut later);
    let (key, layout) = packet::parse(&later, 1).unwrap();
    assert!(layout.later_fragment && key.ip_proto() == 17);
    for (hook, (verdict, out)) in [("xdp", xdp(&fp, &later)), ("tc", tc(&fp, &later))] {
        assert_eq!(out, later, "{hook}: the fragment unchanged (verdict {verdict})");
    }
}

/// A slow meter under a fast stream refills as userspace's does: the fraction of a token each
/// short gap earns is kept for the next frame. The kernel threw it away at every frame, so at
/// more frames per second than the meter's milli-units (here 40 000) it never refilled.
/// The bucket holds a second's tokens, so that a stall of the sender (a loaded machine, an
/// emulated guest) loses none of what the meter earned meanwhile: with a bucket of one, tokens
/// earned over any gap longer than 25 ms were capped away, and a stalled run failed.
#[test]
fn a_slow_meter_refills_under_a_fast_stream() {
    let Some(mut fp) = fast_path() else { return };
    let (rate, burst) = (40.0, 40u32);
    let installed = std::time::Instant::now();
    let f = install_metered(&mut fp, rate as u32, burst, &[Field::InPort]);
    // The bucket is full when the entry is installed; what it earns before the first frame is
    // capped, so only what it earns from there on counts for the least.
    let first = installed.elapsed().as_secs_f64();
    let (mut runs, mut passed, mut last) = (0u64, 0u64, first);
    while installed.elapsed().as_secs_f64() - first < 0.5 {
        last = installed.elapsed().as_secs_f64();
        runs += 1;
        passed += (xdp(&fp, &f).0 == XDP_REDIRECT) as u64;
    }
    let seconds = installed.elapsed().as_secs_f64();
    // The burst, then 40 a second: about 60 in half a second, of as many as were sent (an
    // emulated guest runs some tens a second: then every frame passes, rightly, and the run says
    // nothing about the fraction kept, which needs more frames a second than the meter's
    // milli-units). Without the fraction kept, only the burst passes.
    let least = (burst as f64 + 0.6 * rate * (last - first)).min(runs as f64);
    let most = burst as f64 + rate * seconds + 2.0;
    assert!(
        passed as f64 >= least && passed as f64 <= most,
        "{passed} of {runs} frames passed in {:.2} s, where userspace passes {least:.0} to {most:.0}",
        seconds - first
    );
    if (runs as f64) < 2.0 * 40_000.0 * (last - first) {
        eprintln!("only {runs} frames in {:.2} s: too few a second to show the fraction kept", last - first);
    }
}

/// A datagram cut short inside its UDP header is malformed to userspace (`packet::parse` refuses
/// it): the kernel does not guess at it either, but sends it up, where it is dropped and counted.
#[test]
fn a_truncated_datagram_goes_up_whole() {
    let Some(mut fp) = fast_path() else { return };
    let whole = udp4(H1, H2, [10, 0, 0, 1], [10, 0, 0, 2], 4000, 9, 60);
    install(&mut fp, &whole, &[Field::EthDst], &[DpAction::SetField(Field::UdpSrc, 53), DpAction::Output(1)]);
    let mut cut = whole.clone();
    cut.truncate(38);
    cut[16..18].copy_from_slice(&24u16.to_be_bytes());
    set_ip_checksum(&mut cut);
    assert!(packet::parse(&cut, 1).is_err(), "userspace calls it malformed");
    let upcalls = fp.counters()[2];
    assert_eq!(xdp(&fp, &cut), (XDP_PASS, cut.clone()), "xdp: up, unchanged");
    assert_eq!(tc(&fp, &cut).0, TC_ACT_SHOT, "tc: up, and dropped as no_upcall here");
    assert_eq!(fp.counters()[2], upcalls + 2, "both counted as upcalls");
    assert_eq!(fp.drops()[2], ("no_upcall", 1));
    assert_eq!(fp.drops()[3], ("action_failed", 0));
}

/// A copy the kernel cannot send (TC: an output to an interface that is gone) is counted as a
/// failed action by name, and the frame still goes to its other outputs.
#[test]
fn a_copy_that_cannot_be_sent_is_counted_by_name() {
    let Some(mut fp) = fast_path() else { return };
    let f = frame(H2, 64);
    let (key, _) = packet::parse(&f, 1).unwrap();
    let mut mask = FlowKey::default();
    mask.set(Field::InPort, u32::MAX as u128);
    mask.set(Field::EthDst, u128::MAX);
    // Port 7 maps to an interface index no device has.
    let ifindex = |p: u32| match p {
        1 => Some(LO),
        7 => Some(0x7fff_fff0),
        _ => None,
    };
    let mut no_meters = |_| None;
    let mut cx =
        EncodeContext { mode: Mode::Tc, ifindex: &ifindex, meter_slot: &mut no_meters, ip_proto: key.ip_proto() };
    let actions = [DpAction::Output(7), DpAction::Output(1)];
    let outputs = [(7, 1), (1, 1)];
    assert!(fp.install(RuleId(0), &key, &mask.masked(&mask), &actions, &Credits::default(), &outputs, &mut cx));
    assert_eq!(tc(&fp, &f).0, TC_ACT_REDIRECT, "the last output still sends");
    assert_eq!(fp.drops()[3], ("action_failed", 1));
}

/// LESS label switching in the kernel, frame by frame against the userspace rule
/// (`packet::less`): shift, pop, delivery, a detour by reroute-block hash and the edge's push, on
/// XDP and TC; malformed stacks go up.
#[test]
fn less_labels_in_the_kernel_match_the_userspace_rule() {
    use forwarding::less::reroute::{block_hash, Block};
    use forwarding::{KernelLabels, KernelStack};
    use labels::LabelPort;
    use packet::less::{self, Address, Label};

    let Some(mut fp) = fast_path() else { return };
    let ip = udp4(H1, H2, [10, 0, 0, 1], [10, 0, 0, 2], 4000, 9, 100);
    let labelled = |stack: &[u8]| {
        let mut f = ip[..12].to_vec();
        f.extend_from_slice(&less::ETHERTYPE.to_be_bytes());
        f.extend_from_slice(stack);
        f.extend_from_slice(&ip[14..]);
        f
    };
    let word = |ports: [u8; 3], bottom: bool, ttl: u8| Label { ports, bottom, ttl }.word().to_be_bytes();
    // What userspace makes of a frame: the rule of packet::less applied with Packet::replace_stack.
    let userspace = |f: &[u8]| {
        let (_, layout) = packet::parse(f, 1).unwrap();
        let mut p = packet::Packet::new(f, Default::default(), layout);
        match less::hop(f, 14, 16).unwrap().rewrite {
            less::Rewrite::Shift { word } => p.replace_stack(4, &word.to_be_bytes(), less::ETHERTYPE),
            less::Rewrite::Pop => p.replace_stack(4, &[], less::ETHERTYPE),
            less::Rewrite::Deliver { bytes, ethertype } => p.replace_stack(bytes, &[], ethertype),
        }
        p.data().to_vec()
    };
    let block = Block {
        budget: 5,
        backtrack: false,
        backup: Address { hops: vec![(1, 2)], edge: Some(1) },
        source: Address::default(),
    };
    let block_bytes = block.encode();
    let mut rerouted_block = block.clone();
    rerouted_block.budget = 4;
    let detour_stack = [less::encode_route(&[1, 1, 1, 1], true), rerouted_block.encode()].concat();
    let detour = KernelStack { port: 1, ethertype: less::ETHERTYPE, stack: detour_stack };
    let mut tables = KernelLabels { generation: 1, max_labels: 16, ..Default::default() };
    tables.ports.extend([1, 2]);
    tables.edge_ports.insert(1);
    tables.reroute.insert((2, 0, block_hash(&block_bytes)), detour.clone());
    let pushed = KernelStack { port: 1, ethertype: less::ETHERTYPE, stack: less::encode_route(&[3, 4], false) };
    tables.push.insert([10, 0, 0, 2].into(), pushed.clone());
    let h2_v6 = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    tables.push.insert(h2_v6.into(), pushed.clone());
    let ports = [
        LabelPort { no: 1, ifindex: LO, live: true, whole: false },
        LabelPort { no: 2, ifindex: LO, live: false, whole: false },
    ];
    fp.set_labels(&tables, &ports).unwrap();

    let shift = labelled(&word([1, 5, 0], true, 2));
    let pop = labelled(&[word([1, 0, 0], false, 1), word([3, 0, 0], true, 1)].concat());
    let deliver = labelled(&[word([1, 0, 0], false, 1).as_slice(), &block_bytes].concat());
    for (name, f) in [("shift", &shift), ("pop", &pop), ("deliver", &deliver)] {
        let (verdict, out) = xdp(&fp, f);
        assert_eq!((verdict, out), (XDP_REDIRECT, userspace(f)), "xdp {name}");
    }
    assert_eq!(userspace(&deliver), ip, "delivery gives the frame back as it was");
    // TC shrinks a frame too (fp_ctx.h, tc_shrink_after_eth).
    for (name, f) in [("shift", &shift), ("pop", &pop), ("deliver", &deliver)] {
        let (verdict, out) = tc(&fp, f);
        assert_eq!((verdict, out), (TC_ACT_REDIRECT, userspace(f)), "tc {name}");
    }

    // Port 2 is down: the detour userspace stored for this block replaces the whole stack.
    let rerouted = labelled(&[word([2, 0, 0], false, 1).as_slice(), &block_bytes].concat());
    let mut want = labelled(&detour.stack);
    want.truncate(14 + detour.stack.len());
    want.extend_from_slice(&ip[14..]);
    assert_eq!(xdp(&fp, &rerouted), (XDP_REDIRECT, want.clone()), "xdp detour");
    assert_eq!(tc(&fp, &rerouted), (TC_ACT_REDIRECT, want), "tc detour (the stack grows: TC can)");
    // The budget changes as a frame travels; the key does not.
    let mut spent = block.clone();
    spent.budget = 1;
    let later = labelled(&[word([2, 0, 0], false, 1).as_slice(), &spent.encode()].concat());
    assert_eq!(xdp(&fp, &later).0, XDP_REDIRECT);
    // Another block has no detour stored: up.
    let mut other = block.clone();
    other.backup.edge = Some(2);
    let unknown = labelled(&[word([2, 0, 0], false, 1).as_slice(), &other.encode()].concat());
    assert_eq!(xdp(&fp, &unknown).0, XDP_PASS);

    // A host's IPv4 frame on an edge port gets the stack planned for its destination.
    let mut want = labelled(&pushed.stack);
    want.truncate(14 + pushed.stack.len());
    want.extend_from_slice(&ip[14..]);
    assert_eq!(xdp(&fp, &ip), (XDP_REDIRECT, want.clone()), "xdp push");
    assert_eq!(tc(&fp, &ip), (TC_ACT_REDIRECT, want), "tc push");
    // An IPv6 one too, looked up by its whole address (IPv4 ones are mapped into IPv6's space).
    let ip6 = |l4| {
        let h1_v6 = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        packet::craft::FrameBuilder::new(H2, H1).build(packet::craft::L3::Ipv6 {
            src: h1_v6,
            dst: h2_v6,
            hop_limit: 64,
            tc: 0,
            flow_label: 0,
            l4,
        })
    };
    let udp6 = ip6(packet::craft::L4::Udp { src: 1, dst: 2, payload: vec![7; 40] });
    let mut want = labelled(&pushed.stack);
    want.truncate(14 + pushed.stack.len());
    want.extend_from_slice(&udp6[14..]);
    want[12..14].copy_from_slice(&less::ETHERTYPE.to_be_bytes());
    assert_eq!(xdp(&fp, &udp6), (XDP_REDIRECT, want.clone()), "xdp push, IPv6");
    assert_eq!(tc(&fp, &udp6), (TC_ACT_REDIRECT, want), "tc push, IPv6");
    // Neighbour discovery is the edge's to answer, even for a destination with a plan.
    let solicitation = ip6(packet::craft::L4::Icmp { typ: 135, code: 0, payload: [&[0; 4][..], &h2_v6].concat() });
    assert_eq!(xdp(&fp, &solicitation).0, XDP_PASS);
    // An IPv6 delivery: TC's shrink sets skb->protocol to IPv6 (and a pop's to MPLS above), or
    // the frame is dropped as action_failed (fp_ctx.h, tc_set_protocol).
    let mut deliver6 = labelled(&[word([1, 0, 0], false, 1).as_slice(), &block_bytes].concat());
    deliver6.truncate(14 + 4 + block_bytes.len());
    deliver6.extend_from_slice(&udp6[14..]);
    assert_eq!(userspace(&deliver6), udp6, "an IPv6 delivery gives the frame back");
    assert_eq!(xdp(&fp, &deliver6), (XDP_REDIRECT, udp6.clone()), "xdp deliver, IPv6");
    assert_eq!(tc(&fp, &deliver6), (TC_ACT_REDIRECT, udp6.clone()), "tc deliver, IPv6");
    assert_eq!(fp.drops()[3], ("action_failed", 0));

    // Malformed stacks are userspace's to count.
    for bad in
        [labelled(&word([0, 1, 0], true, 1)), labelled(&word([1, 0, 0], true, 2)), labelled(&word([9, 0, 0], true, 1))]
    {
        assert_eq!(xdp(&fp, &bad).0, XDP_PASS);
    }
    let counted: Vec<(&str, u64)> = fp.label_counters().into_iter().filter(|&(_, n)| n > 0).collect();
    assert_eq!(counted, [("shifted", 2), ("popped", 2), ("delivered", 4), ("pushed", 4), ("rerouted", 3)]);

    // A TC super-frame leaves under labels only through a port that passes it on whole (a veth),
    // and only TCP; otherwise up (dropped as no_upcall here), for userspace to cut.
    let tcp4 = packet::craft::FrameBuilder::new(H2, H1).build(packet::craft::L3::Ipv4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
        ttl: 64,
        tos: 0,
        l4: packet::craft::L4::Tcp { src: 40000, dst: 5201, seq: 1, flags: 0x10, payload: vec![7; 200] },
    });
    let mut tcp_pushed = labelled(&pushed.stack);
    tcp_pushed.truncate(14 + pushed.stack.len());
    tcp_pushed.extend_from_slice(&tcp4[14..]);
    let up = |fp: &FastPath, f: &[u8]| {
        let before = fp.drops()[2].1;
        tc_super(fp, f, 100).0 == TC_ACT_SHOT && fp.drops()[2].1 == before + 1
    };
    assert!(up(&fp, &tcp4) && up(&fp, &shift), "port 1 is not whole: up");
    let whole = [LabelPort { whole: true, ..ports[0] }, ports[1]];
    fp.set_labels(&tables, &whole).unwrap();
    assert_eq!(tc_super(&fp, &tcp4, 100), (TC_ACT_REDIRECT, tcp_pushed), "a TCP super-frame pushed");
    assert_eq!(tc_super(&fp, &shift, 100), (TC_ACT_REDIRECT, userspace(&shift)), "a super-frame shifted");
    assert!(up(&fp, &ip), "a UDP super-frame: up");
    assert_eq!(tc(&fp, &ip).0, TC_ACT_REDIRECT, "the same frame, not a super-frame, pushed");
}

/// Detours planned ahead take the first frame after a failure in the kernel, in every case of
/// docs/less.md §4: a first step back out of the port the frame came in on (stored as port 0,
/// never a host's), a frame that arrives backtracking (by the port it came in on), and a host's
/// frame whose first hop is down (its pushed stack names the block's detour). Each leaves with its
/// own budget less one, on XDP and TC.
#[test]
fn planned_detours_take_the_first_frame_in_every_case() {
    use forwarding::less::reroute::{block_hash, Block, INITIAL_BUDGET};
    use forwarding::{KernelLabels, KernelStack};
    use labels::LabelPort;
    use packet::less::{self, Address, Label};

    let Some(mut fp) = fast_path() else { return };
    let ip = udp4(H1, H2, [10, 0, 0, 1], [10, 0, 0, 2], 4000, 9, 100);
    let with_stack = |stack: &[u8], ethertype: u16| {
        let mut f = ip[..12].to_vec();
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(stack);
        f.extend_from_slice(&ip[14..]);
        f
    };
    let labelled = |stack: &[u8]| with_stack(stack, less::ETHERTYPE);
    let block = |budget, backtrack| Block {
        budget,
        backtrack,
        backup: Address { hops: vec![(1, 2)], edge: Some(1) },
        source: Address { hops: vec![(3, 1)], edge: None },
    };
    let hash = block_hash(&block(0, false).encode());
    let route = |ports: &[u8]| less::encode_route(ports, true);
    let mut tables = KernelLabels { generation: 1, max_labels: 16, ..Default::default() };
    tables.ports.extend([1, 2]);
    // Port 2 is down. From it, no way around but back (any budget is stored: the frame's own wins).
    let back = KernelStack { port: 0, ethertype: less::ETHERTYPE, stack: block(7, true).encode() };
    tables.reroute.insert((2, 0, hash), back);
    // A frame coming back by port 1 goes on by port 1's route [1, 1] (a route of our own).
    let onward = [route(&[1, 1]), block(7, false).encode()].concat();
    tables.reroute.insert((0, 1, hash), KernelStack { port: 1, ethertype: less::ETHERTYPE, stack: onward });
    let ports = [
        LabelPort { no: 1, ifindex: LO, live: true, whole: false },
        LabelPort { no: 2, ifindex: LO, live: false, whole: false },
    ];
    fp.set_labels(&tables, &ports).unwrap();
    let at_down_port = labelled(
        &[&Label { ports: [2, 0, 0], bottom: false, ttl: 1 }.word().to_be_bytes()[..], &block(5, false).encode()]
            .concat(),
    );
    let arriving_back = labelled(&block(4, true).encode());
    let went_on = labelled(&[route(&[1, 1]), block(3, false).encode()].concat());
    for (hook, redirect) in [(Mode::Xdp, XDP_REDIRECT), (Mode::Tc, TC_ACT_REDIRECT)] {
        let run = |f: &[u8]| fp.run_once(hook, f, LO).unwrap();
        assert_eq!(run(&at_down_port), (redirect, arriving_back.clone()), "{hook:?}: back the way it came");
        assert_eq!(run(&arriving_back), (redirect, went_on.clone()), "{hook:?}: on from the switch it came back to");
    }

    // Port 1 has hosts: nothing goes back to them, and their frames are labelled here. hB's
    // route leaves by port 2, which is down: its block's detour, where a labelled frame's is.
    tables.edge_ports.insert(1);
    let pushed = [route(&[3, 4]), block(INITIAL_BUDGET, false).encode()].concat();
    tables.push.insert([10, 0, 0, 2].into(), KernelStack { port: 2, ethertype: less::ETHERTYPE, stack: pushed });
    fp.set_labels(&tables, &ports).unwrap();
    assert_eq!(xdp(&fp, &at_down_port).0, XDP_PASS, "never back to a host: up");
    assert_eq!(xdp(&fp, &ip).0, XDP_PASS, "the only way around is back: up");
    let around = [route(&[5]), block(INITIAL_BUDGET - 1, false).encode()].concat();
    tables.reroute.insert((2, 0, hash), KernelStack { port: 1, ethertype: less::ETHERTYPE, stack: around.clone() });
    fp.set_labels(&tables, &ports).unwrap();
    let want = labelled(&around);
    assert_eq!(xdp(&fp, &ip), (XDP_REDIRECT, want.clone()), "xdp: a host's frame around its first hop");
    assert_eq!(tc(&fp, &ip), (TC_ACT_REDIRECT, want), "tc: a host's frame around its first hop");
    let counted: Vec<(&str, u64)> = fp.label_counters().into_iter().filter(|&(_, n)| n > 0).collect();
    assert_eq!(counted, [("rerouted", 6)]);
}

/// Two switches whose stored detours lead into each other's down port (each planned the way
/// around from what it knew when its first frame came): a frame passes between their kernels,
/// rerouted at each, and dies when its reroute budget does, counted, as in userspace — on XDP
/// and TC. (Each stored stack carries its first frame's budget; before the kernel wrote each
/// frame's own over it the frame went round for ever.)
#[test]
fn a_detour_loop_between_two_switches_ends_with_the_budget() {
    use forwarding::less::reroute::{block_hash, Block, INITIAL_BUDGET};
    use forwarding::{KernelLabels, KernelStack};
    use labels::LabelPort;
    use packet::less::{self, Address, Label};

    let ip = udp4(H1, H2, [10, 0, 0, 1], [10, 0, 0, 2], 4000, 9, 100);
    let block = Block {
        budget: INITIAL_BUDGET,
        backtrack: false,
        backup: Address { hops: vec![(3, 1)], edge: Some(4) },
        source: Address::default(),
    };
    // Port 2 is down at both; each one's detour leaves by port 1, to the other, with port 2 the
    // next hop there. The stored block holds the first frame's budget, less one.
    let mut stored = block.clone();
    stored.budget -= 1;
    let into_the_other = [less::encode_route(&[2], true), stored.encode()].concat();
    let mut tables = KernelLabels { generation: 1, max_labels: 16, ..Default::default() };
    tables.ports.extend([1, 2]);
    tables.reroute.insert(
        (2, 0, block_hash(&block.encode())),
        KernelStack { port: 1, ethertype: less::ETHERTYPE, stack: into_the_other },
    );
    let ports = [
        LabelPort { no: 1, ifindex: LO, live: true, whole: false },
        LabelPort { no: 2, ifindex: LO, live: false, whole: false },
    ];
    let switch = || {
        let mut fp = fast_path()?;
        fp.set_labels(&tables, &ports).unwrap();
        Some(fp)
    };
    let (Some(x), Some(y)) = (switch(), switch()) else { return };
    let mut frame = ip[..12].to_vec();
    frame.extend_from_slice(&less::ETHERTYPE.to_be_bytes());
    frame.extend_from_slice(&Label { ports: [2, 0, 0], bottom: false, ttl: 1 }.word().to_be_bytes());
    frame.extend_from_slice(&block.encode());
    frame.extend_from_slice(&ip[14..]);
    let budget = |f: &[u8]| Block::decode(&f[18..18 + block.encode().len()]).unwrap().budget;
    for (hook, redirect, drop) in [(Mode::Xdp, XDP_REDIRECT, XDP_DROP), (Mode::Tc, TC_ACT_REDIRECT, TC_ACT_SHOT)] {
        let mut f = frame.clone();
        let mut passes = 0;
        loop {
            let at = if passes % 2 == 0 { &x } else { &y };
            let (verdict, out) = at.run_once(hook, &f, LO).unwrap();
            if verdict == drop {
                break;
            }
            assert_eq!(verdict, redirect, "{hook:?}: pass {passes}");
            passes += 1;
            assert_eq!(budget(&out), INITIAL_BUDGET - passes as u8, "{hook:?}: each pass spends one");
            assert!(
                passes <= INITIAL_BUDGET as usize,
                "{hook:?}: the frame is still going round after {passes} passes"
            );
            f = out;
        }
        assert_eq!(passes, INITIAL_BUDGET as usize, "{hook:?}: rerouted as often as its budget allows");
    }
    let spent = |fp: &FastPath| fp.label_counters().into_iter().find(|(n, _)| *n == "budget_spent").unwrap().1;
    let rerouted = |fp: &FastPath| fp.label_counters().into_iter().find(|(n, _)| *n == "rerouted").unwrap().1;
    // Eight passes a hook, alternating from x: each switch rerouted four times a hook; the ninth
    // pass, at x, found no budget.
    assert_eq!((rerouted(&x), rerouted(&y)), (8, 8));
    assert_eq!((spent(&x), spent(&y)), (2, 0));
}

/// AFDX links in the kernel take their accounts' credit from the mode, and hand it back: a link
/// handed over empty polices its next frame, one handed over full passes it, and what the kernel
/// reads back is what it had (after the frame it passed, nothing).
#[test]
fn an_afdx_account_keeps_its_credit_across_a_handover() {
    use forwarding::{KernelAccount, KernelLink, KernelLinks};
    use links::HeldLink;
    use packet::afdx::{end_system_mac, vl_mac};

    let Some(mut fp) = afdx_fast_path() else { return };
    let constant = 0x0300_0000;
    let bag_ns = 1_000_000_000; // one frame a second: nothing accrues during the test
    let table = KernelLinks {
        mac_constant: constant,
        network: 0,
        links: vec![KernelLink {
            id: 7,
            in_port: 1,
            out_ports: vec![1],
            queue: 0,
            smin: 64,
            smax: 128,
            account: 0,
            ip_check: false,
        }],
        accounts: vec![KernelAccount { bag_ns, smax: 128, jitter_ns: 0, per_frame: true }],
    };
    let held = [HeldLink { index: 0, out_ifindex: vec![LO], fanout: 0 }];
    let f = udp4(end_system_mac(1, 1), vl_mac(constant, 7), [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 100);
    let run = |fp: &FastPath| xdp(fp, &f).0;
    let one_frame = 128 * bag_ns;
    // What accrues while the test runs (smax per nanosecond: a frame a BAG), with a millisecond
    // of slack: an emulated guest kernel (make test-kernels) is slow.
    let accrued = |since: std::time::Instant| 128 * since.elapsed().as_nanos() as u64 + one_frame / 1000;
    let start = std::time::Instant::now();
    fp.set_links(&table, &held, &[0]).unwrap();
    assert_eq!(run(&fp), XDP_DROP, "handed over empty: policed");
    assert!(fp.account_credits(&[0]).unwrap()[0].1 < accrued(start), "and still empty");
    let start = std::time::Instant::now();
    fp.set_links(&table, &held, &[one_frame]).unwrap();
    assert_eq!(run(&fp), XDP_REDIRECT, "handed over with one frame's credit: passes");
    assert!(fp.account_credits(&[0]).unwrap()[0].1 < accrued(start), "which it spent");
    fp.set_links(&table, &held, &[]).unwrap();
    assert_eq!(fp.account_credits(&[0]).unwrap(), vec![(0, one_frame)], "no credit given: full");
}

/// Two links drawing on one account (part 7 allows it) share its credit in the kernel, on both
/// hooks: the one frame it holds goes to whichever link comes first, and the other is policed.
#[test]
fn links_sharing_an_account_share_its_credit() {
    use forwarding::{KernelAccount, KernelLink, KernelLinks};
    use links::HeldLink;
    use packet::afdx::{end_system_mac, vl_mac};

    let Some(mut fp) = afdx_fast_path() else { return };
    let constant = 0x0300_0000;
    // Nothing accrues during the test, however slow the machine: an emulated ARM guest took over
    // a second between two runs (a BAG of one second) and found the account full again.
    let bag_ns = 60_000_000_000;
    let link = |id, account| KernelLink {
        id,
        in_port: 1,
        out_ports: vec![1],
        queue: 0,
        smin: 64,
        smax: 128,
        account,
        ip_check: false,
    };
    // Account 1 is shared by links 8 and 9; link 7 has account 0 of its own.
    let table = KernelLinks {
        mac_constant: constant,
        network: 0,
        links: vec![link(7, 0), link(8, 1), link(9, 1)],
        accounts: vec![KernelAccount { bag_ns, smax: 128, jitter_ns: 0, per_frame: true }; 2],
    };
    let held: Vec<HeldLink> = (0..3).map(|index| HeldLink { index, out_ifindex: vec![LO], fanout: 0 }).collect();
    let one_frame = 128 * bag_ns;
    let frame = |vl| udp4(end_system_mac(1, 1), vl_mac(constant, vl), [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 100);
    for hook in ["xdp", "tc"] {
        fp.set_links(&table, &held, &[one_frame, one_frame]).unwrap();
        let verdicts: Vec<u32> = [9, 8, 7, 7].iter().map(|&vl| afdx_verdict(&fp, hook, &frame(vl))).collect();
        let (pass, drop) = if hook == "xdp" { (XDP_REDIRECT, XDP_DROP) } else { (TC_ACT_REDIRECT, TC_ACT_SHOT) };
        assert_eq!(verdicts, [pass, drop, pass, drop], "{hook}: links 9, 8 (same account), 7, 7");
        let credits = fp.account_credits(&[0, 1]).unwrap();
        assert!(credits.iter().all(|&(_, c)| c < one_frame / 1000), "{hook}: both accounts spent: {credits:?}");
    }
}

/// Every way the kernel refuses an AFDX frame, on TC and on XDP, counted under its link and its
/// reason as the mode counts them; a frame of no link the kernel holds goes up.
#[test]
fn every_afdx_refusal_is_counted_under_its_link_on_both_hooks() {
    use forwarding::{KernelAccount, KernelLink, KernelLinks};
    use links::HeldLink;
    use packet::afdx::{end_system_mac, vl_mac};

    let Some(mut fp) = afdx_fast_path() else { return };
    let constant = 0x0300_0000;
    // One frame a minute, the account full (one frame) when handed over: nothing accrues during
    // the test, however slow the machine.
    let bag_ns = 60_000_000_000;
    let link = |id, in_port, account| KernelLink {
        id,
        in_port,
        out_ports: vec![1],
        queue: 0,
        smin: 100,
        smax: 200,
        account,
        ip_check: false,
    };
    let account = KernelAccount { bag_ns, smax: 200, jitter_ns: 0, per_frame: true };
    // Link 8 is configured on port 2: its frames arriving on port 1 are on the wrong port.
    // Link 10 takes a tagged frame of smax (untagged) bytes, on an account of its own.
    let links = vec![link(7, 1, 0), link(8, 2, 1), link(10, 1, 2)];
    let table = KernelLinks { mac_constant: constant, network: 0, links, accounts: vec![account; 3] };
    let held = [
        HeldLink { index: 0, out_ifindex: vec![LO], fanout: 0 },
        HeldLink { index: 1, out_ifindex: vec![LO], fanout: 0 },
        HeldLink { index: 2, out_ifindex: vec![LO], fanout: 0 },
    ];
    let es = end_system_mac(1, 1);
    let frame = |src, vl, len| udp4(src, vl_mac(constant, vl), [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, len);
    let tagged = |f: Vec<u8>| [&f[..12], &[0x81, 0x00, 0x00, 0x05], &f[12..]].concat();
    let sequence = [
        ("tagged, smax untagged", tagged(frame(es, 10, 196))),
        ("conformant", frame(es, 7, 120)),
        ("policed", frame(es, 7, 120)),
        ("bad source", frame(H1, 7, 120)),
        ("undersize", frame(es, 7, 80)),
        ("oversize", frame(es, 7, 240)),
        ("wrong port", frame(es, 8, 120)),
        ("no such link", frame(es, 9, 120)),
    ];
    for hook in ["xdp", "tc"] {
        fp.set_links(&table, &held, &[]).unwrap();
        let verdicts: Vec<u32> = sequence.iter().map(|(_, f)| afdx_verdict(&fp, hook, f)).collect();
        let (pass, drop, up) = if hook == "xdp" {
            (XDP_REDIRECT, XDP_DROP, XDP_PASS)
        } else {
            (TC_ACT_REDIRECT, TC_ACT_SHOT, TC_ACT_SHOT)
        };
        assert_eq!(
            verdicts,
            [pass, pass, drop, drop, drop, drop, drop, up],
            "{hook}: {:?}",
            sequence.iter().map(|(n, _)| n).collect::<Vec<_>>()
        );
        let counts: std::collections::BTreeMap<u16, forwarding::LinkCounts> = fp.harvest_links().into_iter().collect();
        // [bad source, wrong port, undersize, oversize, policed, wrong network, bad ethertype, bad ip]
        assert_eq!(counts[&7].dropped, [1, 0, 1, 1, 1, 0, 0, 0], "{hook}");
        assert_eq!((counts[&7].frames_in, counts[&7].frames_out), (5, 1), "{hook}");
        assert_eq!(counts[&8].dropped, [0, 1, 0, 0, 0, 0, 0, 0], "{hook}");
        assert_eq!((counts[&10].frames_out, counts[&10].bytes_in), (1, 200), "{hook}: counted without its tag");
        // The wrong-port frame came in on port 1 (the loopback): credited there too.
        assert_eq!(fp.harvest_wrong_port(), [(1, 1, 124)], "{hook}");
    }
    assert_eq!(fp.link_counters()[2], ("up", 2), "the frame of no held link, once per hook");
    assert_eq!(fp.drops()[2], ("no_upcall", 1), "tc sends it up; no upcall interface here");
}

/// A switch on network A, in the kernel: the other network's frames, frames that are not IPv4,
/// and on a link with `ip_check` IP and UDP headers part 7 does not send, are dropped and counted
/// as userspace counts them (forwarding/tests/afdx.rs), on both hooks.
#[test]
fn the_kernel_drops_the_other_networks_frames_and_checks_ip_where_asked() {
    use forwarding::{KernelAccount, KernelLink, KernelLinks};
    use links::HeldLink;
    use packet::afdx::{end_system_mac, vl_mac, NETWORK_A, NETWORK_B};

    let Some(mut fp) = afdx_fast_path() else { return };
    let constant = 0x0300_0000;
    let link = |id, ip_check| KernelLink {
        id,
        in_port: 1,
        out_ports: vec![1],
        queue: 0,
        smin: 64,
        smax: 300,
        account: 0,
        ip_check,
    };
    // Generous: one byte-policed account that nothing in the test exhausts.
    let account = KernelAccount { bag_ns: 1_000_000, smax: 300, jitter_ns: 1_000_000_000, per_frame: false };
    let table = KernelLinks {
        mac_constant: constant,
        network: NETWORK_A,
        links: vec![link(10, true), link(11, false)],
        accounts: vec![account],
    };
    let held = [
        HeldLink { index: 0, out_ifindex: vec![LO], fanout: 0 },
        HeldLink { index: 1, out_ifindex: vec![LO], fanout: 0 },
    ];
    // A frame of 200 bytes with FCS; `part_7`: its datagram ending before the sequence number.
    let frame = |vl, network, part_7: bool| {
        let mut f = udp4(end_system_mac(1, network), vl_mac(constant, vl), [10, 0, 0, 1], [224, 224, 0, 10], 1, 2, 196);
        if part_7 {
            packet::afdx::end_datagram_before_sn(&mut f);
        }
        f
    };
    let good = frame(10, NETWORK_A, true);
    let edited = |edit: &dyn Fn(&mut Vec<u8>), checksum: bool| {
        let mut f = good.clone();
        edit(&mut f);
        if checksum {
            set_ip_checksum(&mut f);
        }
        f
    };
    let sequence = [
        ("good", good.clone()),
        ("network B", frame(10, NETWORK_B, true)),
        ("network B, unchecked link", frame(11, NETWORK_B, true)),
        ("IPv6 ethertype", edited(&|f| f[12..14].copy_from_slice(&[0x86, 0xdd]), false)),
        ("datagram to the frame's end", frame(10, NETWORK_A, false)),
        ("bad checksum", edited(&|f| f[25] ^= 1, false)),
        ("options", edited(&|f| f[14] = 0x46, true)),
        ("tcp", edited(&|f| f[23] = 6, true)),
        ("udp length", edited(&|f| f[39] ^= 4, false)),
        (
            "fragment",
            edited(
                &|f| {
                    f[20] = 0x20;
                    f[39] ^= 4
                },
                true,
            ),
        ),
        ("unchecked link", frame(11, NETWORK_A, false)),
    ];
    for hook in ["xdp", "tc"] {
        fp.set_links(&table, &held, &[]).unwrap();
        let verdicts: Vec<u32> = sequence.iter().map(|(_, f)| afdx_verdict(&fp, hook, f)).collect();
        let (pass, drop) = if hook == "xdp" { (XDP_REDIRECT, XDP_DROP) } else { (TC_ACT_REDIRECT, TC_ACT_SHOT) };
        let want = [pass, drop, drop, drop, drop, drop, drop, drop, drop, pass, pass];
        let names: Vec<_> = sequence.iter().map(|(n, _)| n).collect();
        assert_eq!(verdicts, want, "{hook}: {names:?}");
        let counts: std::collections::BTreeMap<u16, forwarding::LinkCounts> = fp.harvest_links().into_iter().collect();
        assert_eq!(counts[&10].dropped, [0, 0, 0, 0, 0, 1, 1, 5], "{hook}");
        assert_eq!(counts[&11].dropped, [0, 0, 0, 0, 0, 1, 0, 0], "{hook}");
    }
}

/// A fast path kept for the next run (`keep_fastpath`): a second load over the same pinned maps
/// takes over the first's entries, which go on forwarding beside its own, survive its flushes
/// while it rebuilds its state, and go all at once when released; a key it installs again gives
/// the last run's entry for it way at once (not shadowed by it until the release); a load that
/// does not fit (another capacity) starts cold.
#[test]
fn a_kept_fast_path_is_taken_over_and_its_entries_released_at_once() {
    if !ebpf::test_may_load_programs("the kept fast path test") {
        return;
    }
    let root = std::path::Path::new("/sys/fs/bpf/edgeflow-test");
    if std::fs::create_dir_all(root).is_err() {
        eprintln!("skipped: no BPF filesystem at /sys/fs/bpf");
        return;
    }
    let dir = root.join(format!("kept-{}", std::process::id()));
    let names = || ("unused".to_string(), "unusedp".to_string());
    let load = |entries| FastPath::load_kept_in(Mode::Xdp, Programs::Flows, entries, dir.clone(), names(), &[]);
    let (to_h2, to_h3, to_h4) = (frame(H2, 64), frame(H3, 64), frame(H4, 64));
    let to_h5 = frame([2, 0, 0, 0, 0, 5], 64);
    // Rewrites the source MAC to its mark: which run's entry a frame hit shows.
    let marked = |m: u8| [DpAction::SetField(Field::EthSrc, 0x0200_0000_9900 + m as u128), DpAction::Output(1)];
    let mark = |fp: &FastPath, f: &[u8]| {
        let (verdict, out) = xdp(fp, f);
        (verdict, out[11])
    };

    let mut first = load(DEFAULT_ENTRIES).unwrap();
    assert!(!first.holds_inherited(), "nothing to take over the first time");
    first.register_port(1, LO, 1).unwrap();
    install(&mut first, &to_h2, &[Field::EthDst], &[DpAction::Output(1)]);
    install(&mut first, &to_h3, &[Field::EthDst, Field::Ipv4Dst], &[DpAction::Output(1)]);
    install(&mut first, &to_h5, &[Field::EthDst], &marked(1));
    first.write_kept_record();
    drop(first);

    let mut second = load(DEFAULT_ENTRIES).unwrap();
    assert_eq!(second.kept().map(|(_, n)| n), Some(Some(3)), "three entries taken over");
    second.register_port(1, LO, 1).unwrap();
    assert_eq!(xdp(&second, &to_h2).0, XDP_REDIRECT, "the last run's entry forwards");
    assert_eq!(xdp(&second, &to_h4).0, XDP_PASS, "a flow it had not: a miss");
    assert_eq!(mark(&second, &to_h5), (XDP_REDIRECT, 1));
    install(&mut second, &to_h5, &[Field::EthDst], &marked(2));
    assert_eq!(mark(&second, &to_h5), (XDP_REDIRECT, 2), "this run's entry for the key, not the last run's");
    assert_eq!(second.kept().map(|(_, n)| n), Some(Some(2)), "which it no longer holds");
    // Its own entry beside them, under a mask of its own; a flush (the controller's flows
    // arriving) takes only that one.
    install(&mut second, &to_h4, &[Field::EthDst, Field::EthSrc], &[DpAction::Output(1)]);
    assert_eq!(xdp(&second, &to_h4).0, XDP_REDIRECT);
    second.flush();
    assert_eq!(xdp(&second, &to_h4).0, XDP_PASS, "its own entry flushed");
    assert_eq!(xdp(&second, &to_h5).0, XDP_PASS, "its own entry for the last run's key too");
    assert_eq!(xdp(&second, &to_h2).0, XDP_REDIRECT, "the last run's entries stay until released");
    assert_eq!(xdp(&second, &to_h3).0, XDP_REDIRECT);
    install(&mut second, &to_h4, &[Field::EthDst, Field::EthSrc], &[DpAction::Output(1)]);
    assert_eq!(second.release_inherited(), Some(2));
    assert_eq!(second.release_inherited(), None, "once");
    for f in [&to_h2, &to_h3, &to_h4] {
        assert_eq!(xdp(&second, f).0, XDP_PASS, "released: every entry goes at once");
    }
    second.sweep();
    let slots = second.obj.map("ef_flow_slots").unwrap();
    let cells = slots.lookup_cells(slots.max_entries, false).unwrap();
    assert!(cells.iter().all(|&b| b == 0), "and their slots with them");
    install(&mut second, &to_h2, &[Field::EthDst], &[DpAction::Output(1)]);
    second.write_kept_record();
    drop(second);

    // Another capacity: what was kept does not fit, and the third run starts cold.
    let third = load(DEFAULT_ENTRIES / 2).unwrap();
    assert_eq!(third.kept().map(|(_, n)| n), Some(None));
    assert_eq!(xdp(&third, &to_h2).0, XDP_PASS);
    drop(third);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A fast path of 64 slots (keys sharing a home slot are quick to find there) with port 1, its
/// mask (in port and destination MAC), and 4 096 frames to distinct destinations by the home
/// slot of their keys under it.
fn small_table_keys_by_home() -> (FastPath, FlowKey, HashMap<u32, Vec<Vec<u8>>>) {
    let mut fp = FastPath::open(Mode::Xdp, &[], Programs::Flows, 16).expect("the fast-path object loads");
    fp.register_port(1, LO, 1).unwrap();
    let mut mask = FlowKey::default();
    mask.set(Field::InPort, u32::MAX as u128);
    mask.set(Field::EthDst, u128::MAX);
    let mut by_home: HashMap<u32, Vec<Vec<u8>>> = HashMap::new();
    for n in 0..4096u16 {
        let f = frame([2, 0, 0, 0, (n >> 8) as u8, n as u8], 64);
        let masked = packet::parse(&f, 1).unwrap().0.masked(&mask);
        by_home.entry(fp.table.home(key_hash(&masked, live_words(&mask), fp.hash_seed))).or_default().push(f);
    }
    (fp, mask, by_home)
}

/// Megaflows whose keys share a home slot (`fastpath/table.rs`) take the slots after it, and each
/// frame finds its own entry there, past the others and past a slot whose entry was retired; a
/// key whose window is full stays in userspace (its frames go up), counted, and takes a slot
/// once one is free. Each entry's hits are counted as its own.
#[test]
fn keys_sharing_a_home_slot_each_find_their_own_and_a_full_window_goes_up() {
    if !ebpf::test_may_load_programs("the kernel fast-path tests") {
        return;
    }
    let (mut fp, mask, by_home) = small_table_keys_by_home();
    let crowd =
        by_home.values().find(|same| same.len() > table::FLOW_PROBES as usize).expect("keys sharing a home slot")
            [..=table::FLOW_PROBES as usize]
            .to_vec();
    // Each entry rewrites the source MAC to its own: which one a frame hit shows.
    let marked = |i: usize| [DpAction::SetField(Field::EthSrc, 0x0200_0000_9900 + i as u128), DpAction::Output(1)];
    let ids: Vec<RuleId> =
        crowd[..8].iter().enumerate().map(|(i, f)| install(&mut fp, f, &[Field::EthDst], &marked(i))).collect();
    let (key, _) = packet::parse(&crowd[8], 1).unwrap();
    let no_ports = |_: u32| Some(LO);
    let mut no_meters = |_| None;
    let mut cx = EncodeContext { mode: Mode::Xdp, ifindex: &no_ports, meter_slot: &mut no_meters, ip_proto: 17 };
    let last = RuleId(1000);
    let install_last = |fp: &mut FastPath, cx: &mut EncodeContext<'_>| {
        fp.install(last, &key, &mask, &marked(8), &Credits::default(), &[(1, 1)], cx)
    };
    assert!(!install_last(&mut fp, &mut cx), "the window is full");
    assert_eq!((fp.crowded, fp.refused), (1, 1), "counted");
    let hits_for = |fp: &FastPath, i: usize| {
        let (verdict, out) = xdp(fp, &crowd[i]);
        (verdict, (verdict == XDP_REDIRECT).then(|| out[11]))
    };
    for i in 0..8 {
        for _ in 0..=i {
            assert_eq!(hits_for(&fp, i), (XDP_REDIRECT, Some(i as u8)), "key {i} finds its own entry");
        }
    }
    let misses = fp.counters()[1];
    assert_eq!(hits_for(&fp, 8), (XDP_PASS, None), "the crowded key goes up");
    assert_eq!(fp.counters()[1], misses + 1);
    let mut counted: Vec<(RuleId, u64)> = fp.harvest(1).flows.iter().map(|f| (f.0, f.2)).collect();
    counted.sort();
    assert_eq!(counted, ids.iter().enumerate().map(|(i, &id)| (id, i as u64 + 1)).collect::<Vec<_>>());

    // One in the middle of the run retired: the keys after it are still found past its slot.
    fp.retire(&Retired { entries: vec![ids[3]], meters: vec![] });
    assert_eq!(hits_for(&fp, 3), (XDP_PASS, None));
    for i in [0, 2, 4, 7] {
        assert_eq!(hits_for(&fp, i), (XDP_REDIRECT, Some(i as u8)), "key {i} past the retired one's slot");
    }
    // The crowded key, offered again, takes the free slot.
    assert!(install_last(&mut fp, &mut cx));
    assert_eq!(hits_for(&fp, 8), (XDP_REDIRECT, Some(8)));
    let counted: Vec<(RuleId, u64)> = fp.harvest(2).flows.iter().map(|f| (f.0, f.2)).filter(|f| f.0 == last).collect();
    assert_eq!(counted, vec![(last, 1)], "its hits its own, from zero");
}

/// A key whose window is full takes the slot of an entry whose own window reaches further: that
/// entry moves to the first free slot of its window (its index stays), and every key, the moved
/// one included, still hits its own entry.
#[test]
fn an_entry_moves_within_its_window_to_make_room_for_a_crowded_key() {
    if !ebpf::test_may_load_programs("the kernel fast-path tests") {
        return;
    }
    // Keys homed at h fill h..h+6, one homed at h+7 takes h+7, and the eighth homed at h finds
    // its window full; the one at h+7 can move to h+8.
    let (mut fp, _, by_home) = small_table_keys_by_home();
    let slots = fp.table.slots().len() as u32;
    let (h, same) = by_home
        .iter()
        .find(|(&h, same)| same.len() >= 8 && by_home.contains_key(&((h + 7) % slots)))
        .expect("eight keys with one home and one homed seven slots later");
    let later = by_home[&((h + 7) % slots)][0].clone();
    let keys: Vec<Vec<u8>> = same[..7].iter().cloned().chain([later]).chain([same[7].clone()]).collect();
    let marked = |i: usize| [DpAction::SetField(Field::EthSrc, 0x0200_0000_9900 + i as u128), DpAction::Output(1)];
    for (i, f) in keys.iter().enumerate() {
        install(&mut fp, f, &[Field::EthDst], &marked(i));
    }
    assert_eq!((fp.crowded, fp.moved, fp.len()), (0, 1, 9), "the last key took the moved entry's slot");
    for (i, f) in keys.iter().enumerate() {
        let (verdict, out) = xdp(&fp, f);
        assert_eq!((verdict, out[11]), (XDP_REDIRECT, i as u8), "key {i} finds its own entry");
    }
    let taken: Vec<u32> = (0..9)
        .map(|p| (h + p) % slots)
        .filter(|&s| table::slot_index(fp.table.slots()[s as usize]).is_some())
        .collect();
    assert_eq!(taken.len(), 9, "slots h..h+8 hold the nine");
}

/// Entry indices and slots go round and round: a small table (5 indices, 16 slots) through
/// installs, reinstalls with other actions, retirements and flushes, each index reused many
/// times, only once the grace period its release asked for has passed, and keys whose probe
/// window runs past the last slot into the first. After every step every key's frame does exactly
/// what its live entry says, or goes up: never what an entry it had before, or another key's
/// entry at the same index, said.
#[test]
fn reused_indices_and_wrapped_windows_never_match_a_stale_entry() {
    if !ebpf::test_may_load_programs("the kernel fast-path tests") {
        return;
    }
    let mut fp = FastPath::open(Mode::Xdp, &[], Programs::Flows, 4).expect("the fast-path object loads");
    fp.register_port(1, LO, 1).unwrap();
    assert_eq!((table::index_count(4), fp.table.slots().len()), (5, 16));
    let mut mask = FlowKey::default();
    mask.set(Field::InPort, u32::MAX as u128);
    mask.set(Field::EthDst, u128::MAX);
    let to = |n: u16| frame([2, 0, 0, 0, (n >> 8) as u8, n as u8], 64);
    let home = |fp: &FastPath, f: &[u8]| {
        let masked = packet::parse(f, 1).unwrap().0.masked(&mask);
        fp.table.home(key_hash(&masked, live_words(&mask), fp.hash_seed))
    };
    // Three keys at home in the last slot (two of them wrap to slots 0 and 1), and nine others.
    let last_slot: Vec<Vec<u8>> = (0..4096).map(to).filter(|f| home(&fp, f) == 15).take(3).collect();
    let keys: Vec<Vec<u8>> =
        last_slot.iter().cloned().chain((0..4096).map(to).filter(|f| home(&fp, f) != 15).take(9)).collect();
    // Each install rewrites the source MAC to its own mark: which entry a frame hit shows.
    let marked = |m: u16| [DpAction::SetField(Field::EthSrc, 0x0200_0000_0000 + m as u128), DpAction::Output(1)];
    let mut live: Vec<Option<(RuleId, u16)>> = vec![None; keys.len()];
    let (mut marks, mut waited) = (0u16, 0);
    let mut put = |fp: &mut FastPath, live: &mut Vec<Option<(RuleId, u16)>>, k: usize| {
        marks += 1;
        let (key, _) = packet::parse(&keys[k], 1).unwrap();
        let id = RuleId(10_000 + marks as u32);
        let ifindex = |_: u32| Some(LO);
        let mut no_meters = |_| None;
        let mut cx = EncodeContext { mode: Mode::Xdp, ifindex: &ifindex, meter_slot: &mut no_meters, ip_proto: 17 };
        let mut put_once =
            |fp: &mut FastPath| fp.install(id, &key, &mask, &marked(marks), &Credits::default(), &[(1, 1)], &mut cx);
        if !put_once(fp) {
            // Every index taken or waiting: the next grace period frees those released.
            let g = fp.grace.as_ref().expect("indices waiting for a grace period");
            g.wait(g.ask());
            waited += 1;
            assert!(put_once(fp), "installed once the grace period passed");
        }
        if let Some((old, _)) = live[k].replace((id, marks)) {
            fp.retire(&Retired { entries: vec![old], meters: vec![] });
        }
    };
    let check = |fp: &FastPath, live: &[Option<(RuleId, u16)>], step: &str| {
        for (k, f) in keys.iter().enumerate() {
            let (verdict, out) = xdp(fp, f);
            let got = (verdict == XDP_REDIRECT).then(|| u16::from_be_bytes([out[10], out[11]]));
            assert_eq!(
                (verdict == XDP_REDIRECT || verdict == XDP_PASS, got),
                (true, live[k].map(|l| l.1)),
                "{step}: key {k}"
            );
        }
    };
    for k in 0..3 {
        put(&mut fp, &mut live, k);
    }
    let at: Vec<u32> =
        fp.entries.values().map(|i| i.slot).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    assert_eq!(at, [0, 1, 15], "the window of the last slot wraps to the first");
    check(&fp, &live, "three keys at home in the last slot");
    // A fixed pseudo-random walk: the same steps every run.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let (mut reinstalls, mut retires, mut flushes) = (0, 0, 0);
    for step in 0..120 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = (x % keys.len() as u64) as usize;
        let live_count = live.iter().flatten().count();
        match (x >> 32) % 20 {
            0 => {
                fp.harvest(step);
                fp.flush();
                live.iter_mut().for_each(|l| *l = None);
                flushes += 1;
            }
            1..=8 if live[k].is_some() => {
                let (id, _) = live[k].take().unwrap();
                fp.retire(&Retired { entries: vec![id], meters: vec![] });
                retires += 1;
            }
            _ if live[k].is_some() => {
                put(&mut fp, &mut live, k);
                reinstalls += 1;
            }
            _ if live_count < 4 => put(&mut fp, &mut live, k),
            _ => {}
        }
        check(&fp, &live, &format!("step {step}"));
    }
    let reused = marks as u32 / table::index_count(4);
    eprintln!(
        "{marks} installs over 5 indices ({reinstalls} in place, {retires} retired, {flushes} flushes), \
         {waited} of them after waiting for a grace period"
    );
    // At least one install had to wait for a grace period: how many depends on the kernel's RCU
    // (23 on an SMP kernel's; 2-4 on a uniprocessor router's TINY_RCU, whose grace periods end as
    // soon as the barrier's thread runs), so the floor asks only that the path ran.
    assert!(
        reused >= 10 && reinstalls >= 10 && retires >= 10 && flushes >= 3 && waited >= 1,
        "{marks} {reinstalls} {retires} {flushes} {waited}"
    );
}

/// XDP to a port the kernel cannot redirect to natively (`fastpath/redirect.rs`): its output is
/// marked, and the hit is sent into the fallback link and counted; without the link to go to, the
/// frame is dropped as `action_failed`, never silently. The far end's TC program sends nowhere a
/// frame that carries no port in its metadata (a test run gives it none).
#[test]
fn a_hit_for_a_port_without_native_redirect_goes_by_the_fallback_link_and_counts() {
    let Some(mut fp) = fast_path() else { return };
    if ebpf::kernel_release().is_some_and(|v| v < (5, 13)) {
        eprintln!("XDP fallback link: none before Linux 5.13 (GRO does not make a veth run NAPI)");
        return;
    }
    let why = redirect::NoNativeRedirect::VethPeerWithoutNapi;
    fp.via_tc.insert(1, redirect::FallbackPort { name: "lo".into(), ifindex: LO, why, now: true, frames: 0 });
    fp.open_fallback_link();
    let link = fp.xdp_fallback_link.as_ref().expect("the fallback link is made").ifindex;
    let f = frame(H2, 64);
    install(&mut fp, &f, &[Field::EthDst], &[DpAction::Output(1)]);
    assert_eq!(xdp(&fp, &f).0, XDP_REDIRECT);
    assert_eq!(fp.xdp_via_tc_frames(), 1);
    let h = fp.harvest(1);
    assert_eq!(h.via_tc.get(&1), Some(&1), "counted for port 1 from the entry's hits");
    assert_eq!(fp.xdp_fallback_ports().map(|(no, p)| (no, p.frames)).collect::<Vec<_>>(), [(1, 1)]);

    fp.set_config(CFG_XDP_FALLBACK_IFINDEX, 0).unwrap();
    assert_eq!(xdp(&fp, &f).0, XDP_DROP, "no link to go to");
    assert_eq!(fp.drops()[3], ("action_failed", 1));
    fp.set_config(CFG_XDP_FALLBACK_IFINDEX, link as u64).unwrap();

    let far_end = fp.obj.program("ef_tc_xdp_fallback").unwrap();
    assert_eq!(far_end.run_once(&f, &crate::ebpf::sk_buff(LO, 0)).unwrap().0, TC_ACT_SHOT);
}

/// What a frame costs each stage of the XDP and the TC program, by differences of the kernel's
/// own timing (BPF_PROG_TEST_RUN with repeat; the fastest of several batches): not a test of
/// behaviour, a measurement for docs/fastpath.md. Each hook's floor is a bare program: XDP's
/// returns XDP_PASS (the harness alone), TC's redirects and does nothing else (what a bare `tc
/// mirred` redirect does per frame, the limit row of the frame-rate bench). TC frames arrive on an
/// skb the kernel builds once per batch, so what each repeat costs is the program's own work.
/// `cargo test --release -p datapath hit_cost -- --ignored --nocapture`.
#[test]
#[ignore]
fn hit_cost_by_stage() {
    let Some(mut fp) = fast_path() else { return };
    let (tc_name, xdp_name) = fp.programs.names();
    const REPEAT: u32 = 200_000;
    let fastest = |run: &dyn Fn() -> (u32, u32), want: u32| {
        (0..7)
            .map(|_| {
                let (verdict, ns) = run();
                assert_eq!(verdict, want);
                ns
            })
            .min()
            .unwrap()
    };
    let skb = ebpf::sk_buff(LO, 0);
    // Both hooks on one frame: (XDP ns, TC ns). A miss goes up: XDP passes it to the stack, TC
    // drops it here (no upcall interface), which changes nothing in the skb between repeats.
    let ns = |fp: &FastPath, frame: &[u8], hit: bool| {
        let xdp = fp.programs_obj().program(xdp_name).unwrap();
        let tc = fp.programs_obj().program(tc_name).unwrap();
        let (want_xdp, want_tc) = if hit { (XDP_REDIRECT, TC_ACT_REDIRECT) } else { (XDP_PASS, TC_ACT_SHOT) };
        (
            fastest(&|| xdp.test_run(frame, REPEAT, LO, false).unwrap(), want_xdp),
            fastest(&|| tc.test_run_skb(frame, REPEAT, &skb).unwrap(), want_tc),
        )
    };
    let to = |n: u8| frame([2, 0, 0, 0, 1, n], 64);
    // XDP's floor, r0 = XDP_PASS; exit. TC's, r0 = bpf_redirect(LO, 0); exit.
    let empty = [0xb7, 0, 0, 0, XDP_PASS as u8, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];
    let empty = ebpf::Program::from_instructions("empty", ebpf::prog_type::XDP, &empty).unwrap();
    #[rustfmt::skip]
    let redirect = [
        0xb7, 0x01, 0, 0, LO as u8, 0, 0, 0, // r1 = LO
        0xb7, 0x02, 0, 0, 0, 0, 0, 0, // r2 = 0
        0x85, 0, 0, 0, 23, 0, 0, 0, // call bpf_redirect
        0x95, 0, 0, 0, 0, 0, 0, 0, // exit
    ];
    let redirect = ebpf::Program::from_instructions("bare_redirect", ebpf::prog_type::SCHED_CLS, &redirect).unwrap();
    let floors = (
        fastest(&|| empty.test_run(&to(1), REPEAT, LO, false).unwrap(), XDP_PASS),
        fastest(&|| redirect.test_run_skb(&to(1), REPEAT, &skb).unwrap(), TC_ACT_REDIRECT),
    );
    let mut rows =
        vec![("a bare program (XDP: pass; TC: redirect)", floors), ("miss, no mask", ns(&fp, &to(1), false))];
    install(&mut fp, &to(2), &[Field::EthDst], &[DpAction::Output(1)]);
    rows.push(("miss, one mask", ns(&fp, &to(1), false)));
    rows.push(("hit, first mask, output", ns(&fp, &to(2), true)));
    let rewrite = [
        DpAction::SetField(Field::EthSrc, 0x0200_0000_0099),
        DpAction::SetField(Field::Ipv4Dst, u32::from_be_bytes([10, 0, 0, 12]) as u128),
        DpAction::Output(1),
    ];
    install(&mut fp, &to(3), &[Field::EthDst], &rewrite);
    rows.push(("hit, first mask, MAC and IPv4 rewrite, output", ns(&fp, &to(3), true)));
    // Three more masks, busiest first: an entry under the fourth is found on the fourth probe.
    let more =
        [vec![Field::EthDst, Field::EthSrc], vec![Field::EthDst, Field::Ipv4Src], vec![Field::EthDst, Field::UdpDst]];
    for (i, fields) in more.iter().enumerate() {
        install(&mut fp, &to(10 + i as u8), fields, &[DpAction::Output(1)]);
    }
    rows.push(("hit, fourth mask, output", ns(&fp, &to(12), true)));
    rows.push(("miss, four masks", ns(&fp, &to(1), false)));
    println!("  xdp     tc");
    for (what, (xdp, tc)) in rows {
        println!("{xdp:>5} {tc:>6} ns  {what}");
    }
}
