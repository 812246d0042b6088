//! The AFDX mode through the seam: filtering by reason, account-based policing (frame and byte,
//! with and without jitter tolerance), multicast and priority queues, shared accounts, and the
//! table checks.
#![cfg(feature = "afdx")]

use forwarding::afdx::{
    self, end_system_mac, vl_mac, AfdxMode, Police, Priority, VirtualLink, VlCounters, VlDrop, DEFAULT_MAC_CONSTANT,
    NETWORK_A, NETWORK_B,
};
use forwarding::{DropReason, Egress, Event, FromKernel, Mode, Output, PortView, Verdict};
use packet::craft::udp4;
use packet::{parse, Offload, Packet};

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

#[derive(Default)]
struct Recorder {
    sent: Vec<Egress>,
}

impl Output for Recorder {
    fn transmit(&mut self, egress: Egress, _pkt: &Packet) {
        self.sent.push(egress);
    }
    fn event(&mut self, _event: Event) {}
}

fn vl(id: u16, in_port: u32, out_ports: &[u32], bag_ms: u64) -> VirtualLink {
    VirtualLink {
        id,
        in_port,
        out_ports: out_ports.to_vec(),
        bag_ns: bag_ms * MS,
        smin: 64,
        smax: 1518,
        jitter_ns: 0,
        priority: Priority::Low,
        police: Police::Frame,
        account: None,
        ip_check: false,
    }
}

fn mode(vls: &[VirtualLink]) -> AfdxMode {
    let mut m = AfdxMode::new(vls, DEFAULT_MAC_CONSTANT).unwrap();
    for p in 1..=4 {
        m.port_changed(p, Some(PortView::default()));
    }
    m
}

/// An AFDX frame of `size` bytes on the wire, FCS included.
fn frame(vl: u16, es: u16, network: u8, size: usize) -> Vec<u8> {
    udp4(end_system_mac(es, network), vl_mac(DEFAULT_MAC_CONSTANT, vl), [10, 1, 0, 1], [224, 224, 0, 1], 1, 2, size - 4)
}

fn send(m: &mut AfdxMode, in_port: u32, f: &[u8], now: u64) -> (Verdict, Vec<Egress>) {
    let (key, layout) = parse(f, in_port).unwrap();
    let mut pkt = Packet::new(f, Offload::default(), layout);
    let mut r = Recorder::default();
    let v = m.receive(&mut pkt, &key, now, &mut r);
    (v, r.sent)
}

fn passes(m: &mut AfdxMode, in_port: u32, f: &[u8], now: u64) -> bool {
    let (v, sent) = send(m, in_port, f, now);
    assert_eq!(v.dropped.is_none(), !sent.is_empty());
    v.dropped.is_none()
}

#[test]
fn filtering_drops_each_kind_of_bad_frame_and_counts_it_under_its_reason() {
    let mut table = vl(10, 1, &[2], 1);
    (table.smin, table.smax) = (100, 300);
    let mut m = mode(&[table]);
    // Far apart in time, so policing never interferes.
    let mut t = 0;
    let mut next = || {
        t += 10 * MS;
        t
    };
    assert!(passes(&mut m, 1, &frame(10, 7, NETWORK_A, 100), next()), "exactly smin");
    assert!(passes(&mut m, 1, &frame(10, 7, NETWORK_B, 300), next()), "exactly smax");
    let cases: Vec<(u32, Vec<u8>, DropReason)> = vec![
        (2, frame(10, 7, NETWORK_A, 200), DropReason::Filtered),
        (1, frame(10, 7, NETWORK_A, 99), DropReason::Filtered),
        (1, frame(10, 7, NETWORK_A, 301), DropReason::Filtered),
        (1, frame(10, 7, 0b011, 200), DropReason::Filtered),
        (1, frame(11, 7, NETWORK_A, 200), DropReason::Filtered),
    ];
    for (port, f, why) in &cases {
        let (v, sent) = send(&mut m, *port, f, next());
        assert_eq!(v.dropped, Some(*why));
        assert!(sent.is_empty());
    }
    // Source MAC: wrong constant, and low bits under the interface id set.
    let mut f = frame(10, 7, NETWORK_A, 200);
    f[6] = 0x06;
    assert_eq!(send(&mut m, 1, &f, next()).0.dropped, Some(DropReason::Filtered));
    let mut f = frame(10, 7, NETWORK_A, 200);
    f[11] |= 1;
    assert_eq!(send(&mut m, 1, &f, next()).0.dropped, Some(DropReason::Filtered));
    // Destination without the constant field.
    let mut f = frame(10, 7, NETWORK_A, 200);
    f[0] = 0x01;
    assert_eq!(send(&mut m, 1, &f, next()).0.dropped, Some(DropReason::Filtered));

    let c = m.vl_counters(10).unwrap();
    assert_eq!((c.frames_in, c.frames_out), (8, 2));
    assert_eq!(c.bytes_in, 100 + 300 + 200 + 99 + 301 + 200 + 200 + 200);
    let by_reason: Vec<u64> = VlDrop::ALL.iter().map(|&d| c.dropped(d)).collect();
    // bad_source, wrong_port, undersize, oversize, policed, wrong_network, bad_ethertype, bad_ip
    assert_eq!(by_reason, vec![3, 1, 1, 1, 0, 0, 0, 0]);
    assert_eq!((m.switch_counters().bad_destination, m.switch_counters().unknown_vl), (1, 1));
    let groups = m.counters();
    assert_eq!(groups[0].name, "switch");
    assert_eq!(groups[1].name, "vl 10");
    assert!(groups[1].counters.contains(&("bad_source", 3)));
}

/// `frame` as part 7 lays it out (`packet::afdx::end_datagram_before_sn`).
fn as_part_7_sends(mut f: Vec<u8>) -> Vec<u8> {
    packet::afdx::end_datagram_before_sn(&mut f);
    f
}

#[test]
fn a_switch_on_one_network_drops_the_others_frames_and_checks_ip_where_asked() {
    let checked = VirtualLink { ip_check: true, ..vl(10, 1, &[2], 1) };
    let mut m =
        AfdxMode::new(&[checked, vl(11, 1, &[2], 1)], DEFAULT_MAC_CONSTANT).unwrap().on_network(Some(NETWORK_A));
    for p in 1..=2 {
        m.port_changed(p, Some(PortView::default()));
    }
    let mut t = 0;
    let mut next = || {
        t += 10 * MS;
        t
    };
    let good = as_part_7_sends(frame(10, 7, NETWORK_A, 200));
    assert!(passes(&mut m, 1, &good, next()));
    // The other network's end system, on either VL.
    for id in [10, 11] {
        assert!(!passes(&mut m, 1, &as_part_7_sends(frame(id, 7, NETWORK_B, 200)), next()));
    }
    // Not IPv4.
    let mut not_ip = good.clone();
    not_ip[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
    assert!(!passes(&mut m, 1, &not_ip, next()));
    // Headers part 7 does not send: the datagram running to the frame's end (no room for the
    // sequence number), a bad header checksum, IP options, TCP, a UDP length that disagrees.
    let mut bad = vec![frame(10, 7, NETWORK_A, 200)];
    let mut f = good.clone();
    f[25] ^= 1;
    bad.push(f);
    let mut f = good.clone();
    f[14] = 0x46;
    bad.push(as_part_7_sends(f));
    let mut f = good.clone();
    f[23] = 6;
    bad.push(as_part_7_sends(f));
    let mut f = good.clone();
    f[39] ^= 4;
    bad.push(f);
    for f in &bad {
        assert!(!passes(&mut m, 1, f, next()), "{:02x?}", &f[14..42]);
    }
    // A fragment's UDP length covers the datagram, not the fragment: not checked.
    let mut f = good.clone();
    f[20] = 0x20; // more fragments
    f[39] ^= 4;
    assert!(passes(&mut m, 1, &checksum_made_good(f), next()));
    // VL 11 does not ask: the datagram may run to the frame's end.
    assert!(passes(&mut m, 1, &frame(11, 7, NETWORK_A, 200), next()));
    let c10 = m.vl_counters(10).unwrap();
    let by_reason = |c: &VlCounters| VlDrop::ALL.iter().map(|&d| c.dropped(d)).collect::<Vec<_>>();
    assert_eq!(by_reason(c10), [0, 0, 0, 0, 0, 1, 1, 5]);
    assert_eq!(by_reason(m.vl_counters(11).unwrap()), [0, 0, 0, 0, 0, 1, 0, 0]);
    assert_eq!((c10.frames_in, c10.frames_out), (9, 2));
}

/// A frame whose IP header was edited: its checksum made good again, the rest as it is.
fn checksum_made_good(mut f: Vec<u8>) -> Vec<u8> {
    packet::csum::set_ipv4_checksum(&mut f[14..34]);
    f
}

#[test]
fn a_tagged_frame_is_measured_without_its_tag() {
    let mut table = vl(10, 1, &[2], 1);
    (table.smin, table.smax) = (100, 300);
    let mut m = mode(&[table]);
    let tagged = |size: usize| {
        let f = frame(10, 7, NETWORK_A, size);
        [&f[..12], &[0x81, 0x00, 0x00, 0x05], &f[12..]].concat()
    };
    assert!(passes(&mut m, 1, &tagged(300), 10 * MS), "smax untagged, 304 bytes with its tag");
    assert!(!passes(&mut m, 1, &tagged(301), 20 * MS), "one byte over smax");
    let c = m.vl_counters(10).unwrap();
    assert_eq!((c.bytes_in, c.dropped(VlDrop::Oversize)), (300 + 301, 1));
}

#[test]
fn frame_policing_admits_one_frame_per_bag_and_jitter_lets_one_come_early() {
    let mut m = mode(&[vl(1, 1, &[2], 2)]);
    let f = frame(1, 1, NETWORK_A, 64);
    // No jitter tolerated: one frame per 2 ms, whatever arrives between.
    let got: Vec<bool> =
        [0, MS, 2 * MS - 1, 2 * MS, 3 * MS, 4 * MS].iter().map(|&t| passes(&mut m, 1, &f, t)).collect();
    assert_eq!(got, vec![true, false, false, true, false, true]);

    // 1 ms of jitter on a 2 ms BAG: the account holds 1.5 frames. A frame 1 ms early passes
    // once; early again and it is dropped until the account has refilled.
    let mut table = vl(1, 1, &[2], 2);
    table.jitter_ns = MS;
    let mut m = mode(&[table]);
    let got: Vec<bool> = [0, MS, 2 * MS, 3 * MS, 4 * MS, 5 * MS].iter().map(|&t| passes(&mut m, 1, &f, t)).collect();
    // credit (frames): 1.5→0.5, 1.0→0, 0.5 (drop), 1.0→0, 0.5 (drop), 1.0→0
    assert_eq!(got, vec![true, true, false, true, false, true]);
    // Idle a long time: the account is capped, so two back to back, not three.
    let got: Vec<bool> = (0..3).map(|i| passes(&mut m, 1, &f, 100 * MS + i)).collect();
    assert_eq!(got, vec![true, false, false]);
    assert!(passes(&mut m, 1, &f, 100 * MS + MS), "the half frame left plus 1 ms of accrual");
    assert_eq!(m.vl_counters(1).unwrap().dropped(VlDrop::Policed), 4);
}

#[test]
fn an_account_handed_over_keeps_its_credit() {
    // What the kernel hands back: an account it emptied at 10 ms. The mode goes on from there
    // (one frame a BAG), not from a full account.
    let mut m = mode(&[vl(1, 1, &[2], 2)]);
    let f = frame(1, 1, NETWORK_A, 64);
    let smax_bag = 1518 * 2 * MS;
    assert_eq!(m.kernel().links.unwrap().credits(0), vec![smax_bag], "an unused account is full");
    m.take_back(FromKernel::AccountCredits { credits: &[(0, 0)], now: 10 * MS });
    assert!(!passes(&mut m, 1, &f, 10 * MS), "empty when handed back");
    assert!(!passes(&mut m, 1, &f, 12 * MS - 1));
    assert!(passes(&mut m, 1, &f, 12 * MS), "one BAG later");
    // And what it hands on is what it has: nothing right after a frame, half after half a BAG.
    assert_eq!(m.kernel().links.unwrap().credits(12 * MS), vec![0]);
    assert_eq!(m.kernel().links.unwrap().credits(13 * MS), vec![smax_bag / 2]);
}

#[test]
fn byte_policing_charges_each_frame_its_length() {
    let mut table = vl(5, 1, &[2], 1);
    (table.smax, table.police) = (1000, Police::Byte);
    let mut m = mode(&[table]);
    let f = frame(5, 1, NETWORK_A, 200);
    let got: Vec<bool> = (0..6).map(|i| passes(&mut m, 1, &f, i * US)).collect();
    assert_eq!(got, vec![true, true, true, true, true, false]);
    // 1000 bytes accrue per ms, one per µs: the 4 bytes left at 4 µs reach 200 at 200 µs.
    assert!(!passes(&mut m, 1, &f, 199 * US));
    assert!(passes(&mut m, 1, &f, 200 * US));
    // A large frame needs a large credit: 1000 bytes are there a full BAG later.
    let big = frame(5, 1, NETWORK_A, 1000);
    assert!(!passes(&mut m, 1, &big, 500 * US));
    assert!(passes(&mut m, 1, &big, 200 * US + MS));
}

#[test]
fn a_babbler_gets_its_contract_and_no_other_link_loses_a_frame() {
    let mut high = vl(2, 2, &[3], 1);
    high.priority = Priority::High;
    let mut m = mode(&[vl(1, 1, &[3], 2), high]);
    let babble = frame(1, 1, NETWORK_A, 1518);
    let good = frame(2, 2, NETWORK_A, 64);
    let mut passed = 0;
    let mut high_out = Vec::new();
    for i in 0..1000u64 {
        let t = i * 10 * US;
        if passes(&mut m, 1, &babble, t) {
            passed += 1;
        }
        if t % MS == 0 {
            let (v, sent) = send(&mut m, 2, &good, t);
            assert_eq!(v.dropped, None);
            high_out.extend(sent);
        }
    }
    // 10 ms at one frame per 2 ms: frames at 0, 2, 4, 6 and 8 ms.
    assert_eq!(passed, 5);
    assert_eq!(m.vl_counters(1).unwrap().dropped(VlDrop::Policed), 995);
    assert_eq!(high_out.len(), 10);
    assert!(high_out.iter().all(|e| *e == Egress { port: 3, queue: Some(afdx::HIGH_QUEUE) }));
}

#[test]
fn multicast_copies_go_to_every_output_on_the_priority_queue() {
    let mut m = mode(&[vl(9, 1, &[2, 3, 4], 1)]);
    let (v, sent) = send(&mut m, 1, &frame(9, 3, NETWORK_B, 128), 0);
    assert_eq!(v, Verdict::default());
    let queue = Some(afdx::LOW_QUEUE);
    assert_eq!(sent, vec![Egress { port: 2, queue }, Egress { port: 3, queue }, Egress { port: 4, queue }]);
    assert_eq!(m.vl_counters(9).unwrap().frames_out, 1);
}

#[test]
fn links_sharing_an_account_share_one_credit() {
    let mut a = vl(1, 1, &[3], 4);
    let mut b = vl(2, 2, &[3], 4);
    a.account = Some("es1".into());
    b.account = Some("es1".into());
    let mut m = mode(&[a, b, vl(3, 1, &[3], 4)]);
    assert!(passes(&mut m, 1, &frame(1, 1, NETWORK_A, 64), 0));
    assert!(!passes(&mut m, 2, &frame(2, 1, NETWORK_A, 64), MS), "the shared account is empty");
    assert!(passes(&mut m, 1, &frame(3, 1, NETWORK_A, 64), MS), "a VL with its own account");
    assert!(passes(&mut m, 2, &frame(2, 1, NETWORK_A, 64), 4 * MS));
}

#[test]
fn inconsistent_tables_are_refused_naming_the_entry_and_field() {
    let refuse = |vls: Vec<VirtualLink>| AfdxMode::new(&vls, DEFAULT_MAC_CONSTANT).err().unwrap();
    let ok = vl(1, 1, &[2], 1);
    let e = refuse(vec![ok.clone(), VirtualLink { bag_ns: 3 * MS, ..vl(2, 1, &[2], 1) }]);
    assert_eq!((e.index, e.field), (1, "bag_ms"));
    let e = refuse(vec![ok.clone(), ok.clone()]);
    assert_eq!((e.index, e.field), (1, "id"));
    let e = refuse(vec![VirtualLink { smin: 200, smax: 100, ..ok.clone() }]);
    assert_eq!((e.index, e.field), (0, "smin"));
    let e = refuse(vec![VirtualLink { smax: 1519, ..ok.clone() }]);
    assert_eq!((e.index, e.field), (0, "smax"));
    let e = refuse(vec![VirtualLink { out_ports: vec![], ..ok.clone() }]);
    assert_eq!(e.field, "out_ports");
    let e = refuse(vec![VirtualLink { out_ports: vec![1, 2], ..ok.clone() }]);
    assert!(e.reason.contains("input port"), "{e}");
    let e = refuse(vec![VirtualLink { jitter_ns: 2_000_000_000, ..ok.clone() }]);
    assert_eq!(e.field, "jitter_us");
    let shared = |bag_ms, id| VirtualLink { account: Some("a".into()), ..vl(id, 1, &[2], bag_ms) };
    let e = refuse(vec![shared(1, 1), shared(2, 2)]);
    assert_eq!((e.index, e.field), (1, "account"));
    assert!(AfdxMode::new(&[shared(2, 1), shared(2, 2)], DEFAULT_MAC_CONSTANT).is_ok());
}

mod compiled {
    use super::*;
    use forwarding::afdx::compile::{compile, Network};
    use forwarding::openflow::{Config, OpenFlowMode};
    use ofp::message::Message;

    fn openflow_running(vls: &[VirtualLink], network: Network) -> OpenFlowMode {
        let mut m = OpenFlowMode::new(&Config { n_tables: 1, table_limits: vec![], native: false, packet_in_rate: 0 });
        for p in 1..=4 {
            m.port_changed(p, Some(PortView::default()));
        }
        let program = compile(vls, DEFAULT_MAC_CONSTANT, network);
        let mut r = Recorder::default();
        let msgs = program.meters.into_iter().map(Message::MeterMod);
        let msgs = msgs.chain(program.groups.into_iter().map(Message::GroupMod));
        for msg in msgs.chain(program.flows.into_iter().map(Message::FlowMod)) {
            m.openflow(msg, 0, &mut r).unwrap();
        }
        m
    }

    fn egress(m: &mut dyn Mode, in_port: u32, f: &[u8], now: u64) -> Vec<Egress> {
        let (key, layout) = parse(f, in_port).unwrap();
        let mut pkt = Packet::new(f, Offload::default(), layout);
        let mut r = Recorder::default();
        m.receive(&mut pkt, &key, now, &mut r);
        r.sent
    }

    /// Everything but frame sizes: the compiled program forwards and refuses what the mode does,
    /// copies on the same ports and queues.
    #[test]
    fn the_compiled_program_forwards_like_the_mode() {
        let mut high = vl(20, 2, &[1, 3, 4], 1);
        high.priority = Priority::High;
        let vls = [vl(10, 1, &[3], 1), high];
        let mut afdx = mode(&vls);
        let mut of = openflow_running(&vls, Network::Any);
        let mut bad_src = frame(10, 7, NETWORK_A, 200);
        bad_src[11] |= 1;
        let mut bad_dst = frame(10, 7, NETWORK_A, 200);
        bad_dst[2] = 1;
        let cases: Vec<(u32, Vec<u8>)> = vec![
            (1, frame(10, 7, NETWORK_A, 200)),
            (1, frame(10, 7, NETWORK_B, 1518)),
            (2, frame(20, 9, NETWORK_B, 64)),
            (2, frame(10, 7, NETWORK_A, 200)),
            (1, frame(11, 7, NETWORK_A, 200)),
            (1, bad_src),
            (1, bad_dst),
            (1, frame(10, 7, 0b011, 200)),
        ];
        let mut forwarded = 0;
        for (k, (port, f)) in cases.iter().enumerate() {
            let t = k as u64 * 10 * MS;
            let want = egress(&mut afdx, *port, f, t);
            assert_eq!(egress(&mut of, *port, f, t), want, "case {k}");
            forwarded += !want.is_empty() as usize;
        }
        assert_eq!(forwarded, 3);
        // A switch of network A takes only A's interface id.
        let mut of_a = openflow_running(&vls, Network::A);
        assert_eq!(egress(&mut of_a, 1, &frame(10, 7, NETWORK_B, 200), 0), vec![]);
        assert_eq!(egress(&mut of_a, 1, &frame(10, 7, NETWORK_A, 200), 0).len(), 1);
    }

    fn admitted(m: &mut dyn Mode, in_port: u32, f: &[u8], times: impl Iterator<Item = u64>) -> usize {
        times.filter(|&t| !egress(m, in_port, f, t).is_empty()).count()
    }

    /// The account is a token bucket: where the contract is whole packets per second and whole
    /// frames of depth, the meter polices exactly like it; where not, the meter rounds up and
    /// admits more.
    #[test]
    fn meters_police_like_accounts_only_where_the_contract_is_whole_numbers() {
        let f = frame(10, 1, NETWORK_A, 64);
        // A babbler at 10x for 1 s, BAG 2 ms, no jitter: 500 packets/s, depth 1.
        let exact = [vl(10, 1, &[2], 2)];
        let babble = || (0..5000u64).map(|i| i * 200 * US);
        let by_account = admitted(&mut mode(&exact), 1, &f, babble());
        let by_meter = admitted(&mut openflow_running(&exact, Network::Any), 1, &f, babble());
        assert_eq!((by_account, by_meter), (500, 500));

        // BAG 32 ms: 31.25 frames/s become a 32 packets/s meter. Over 10 s of a frame every
        // 100 µs the meter admits 2.4 % more.
        let rounded = [vl(10, 1, &[2], 32)];
        let babble = || (0..100_000u64).map(|i| i * 100 * US);
        let by_account = admitted(&mut mode(&rounded), 1, &f, babble());
        let by_meter = admitted(&mut openflow_running(&rounded, Network::Any), 1, &f, babble());
        assert_eq!(by_account, 313);
        assert_eq!(by_meter, 320);

        // Half a BAG of jitter tolerance: the account holds 1.5 frames, the meter 2. Of three
        // frames back to back the account admits one, the meter two.
        let mut tolerant = vl(10, 1, &[2], 2);
        tolerant.jitter_ns = MS;
        let burst = || [0, 1, 2].into_iter();
        let by_account = admitted(&mut mode(&[tolerant.clone()]), 1, &f, burst());
        let by_meter = admitted(&mut openflow_running(&[tolerant], Network::Any), 1, &f, burst());
        assert_eq!((by_account, by_meter), (1, 2));
    }
}

#[test]
fn priority_matters_only_on_ports_that_mix_queues_and_can_be_offered_more_than_their_link() {
    // Port 2: eight low VLs of 1518 bytes every 1 ms (8 × 12.3 Mbit/s on the wire) and one high.
    // Port 3: the same eight alone (one queue). Port 4: one low and one high, 12.8 Mbit/s.
    let mut vls: Vec<VirtualLink> = (0..8).map(|k| vl(100 + k, 1, &[2, 3], 1)).collect();
    vls.push(VirtualLink { priority: Priority::High, smax: 64, ..vl(1, 1, &[2, 4], 1) });
    vls.push(vl(2, 1, &[4], 1));
    let m = mode(&vls);
    let links = m.kernel().links.unwrap().table();
    let frame_every_ms = (1518 + 20) * 8 * 1000;
    assert_eq!(links.accounts[0].wire_bps(64), frame_every_ms, "preamble and gap counted");
    let at = |mbps: u64| move |_: u32| Some(mbps * 1_000_000);
    let needing =
        |link: &dyn Fn(u32) -> Option<u64>| links.ports_needing_priority(link).into_iter().collect::<Vec<_>>();
    assert_eq!(needing(&at(50)), [2], "port 3 has one queue, port 4 fits in 50 Mbit/s");
    assert_eq!(needing(&at(10)), [2, 4]);
    assert_eq!(needing(&at(100)), Vec::<u32>::new(), "98.9 Mbit/s fits in 100");
    assert_eq!(needing(&|p| (p != 2).then_some(10_000_000)), [4], "a port of no known speed is left out");
    // Byte policing: 1518 bytes per BAG may come as 64-byte frames, each with 20 bytes more.
    let bytes = VirtualLink { police: Police::Byte, ..vl(5, 1, &[2], 1) };
    let m = mode(&[bytes]);
    let account = m.kernel().links.unwrap().table().accounts[0];
    assert_eq!(account.wire_bps(64), (1518u64 * 84).div_ceil(64) * 8 * 1000);
}
