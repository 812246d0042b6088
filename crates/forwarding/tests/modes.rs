//! Every mode driven through the seam alone, as the datapath drives it: frames in, egress
//! descriptors, verdicts and kernel entries out.

use forwarding::learning::LearningMode;
use forwarding::openflow::{Config, OpenFlowMode};
use forwarding::portmap::PortMapMode;
use forwarding::{DpAction, DropReason, Egress, Event, Mode, Output, PortView, Verdict};
use ofp::action::{Action, Instruction};
use ofp::group_meter::{BandKind, MeterBand};
use ofp::message::{FlowMod, MeterMod};
use ofp::oxm::{Field, Match};
use ofp::Message;
use packet::craft::{FrameBuilder, L3, L4};
use packet::{parse, FlowKey, Offload, Packet};

const H1: [u8; 6] = [2, 0, 0, 0, 0, 1];
const H2: [u8; 6] = [2, 0, 0, 0, 0, 2];

#[derive(Default)]
struct Recorder {
    sent: Vec<(Egress, Vec<u8>)>,
    events: Vec<Event>,
}

impl Output for Recorder {
    fn transmit(&mut self, egress: Egress, pkt: &Packet) {
        self.sent.push((egress, pkt.data().to_vec()));
    }
    fn event(&mut self, event: Event) {
        self.events.push(event);
    }
}

impl Recorder {
    fn ports(&self) -> Vec<u32> {
        self.sent.iter().map(|(e, _)| e.port).collect()
    }
}

fn udp(src: [u8; 6], dst: [u8; 6]) -> Vec<u8> {
    FrameBuilder::new(dst, src).build(L3::Ipv4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
        ttl: 64,
        tos: 0,
        l4: L4::Udp { src: 5000, dst: 9, payload: vec![7; 18] },
    })
}

fn receive(mode: &mut dyn Mode, in_port: u32, frame: &[u8], now: u64) -> (Verdict, Recorder, FlowKey) {
    let (key, layout) = parse(frame, in_port).unwrap();
    let mut pkt = Packet::new(frame, Offload::default(), layout);
    let mut r = Recorder::default();
    let v = mode.receive(&mut pkt, &key, now, &mut r);
    (v, r, key)
}

fn with_ports(mut mode: impl Mode, n: u32) -> impl Mode {
    for p in 1..=n {
        mode.port_changed(p, Some(PortView::default()));
    }
    mode
}

fn openflow(n_ports: u32) -> impl Mode {
    with_ports(
        OpenFlowMode::new(&Config { n_tables: 4, table_limits: vec![], native: false, packet_in_rate: 0 }),
        n_ports,
    )
}

fn flow(mode: &mut dyn Mode, priority: u16, match_: Match, actions: Vec<Action>) {
    let fm = FlowMod { priority, match_, instructions: vec![Instruction::ApplyActions(actions)], ..Default::default() };
    let mut r = Recorder::default();
    mode.openflow(Message::FlowMod(fm), 0, &mut r).unwrap();
}

#[test]
fn portmap_forwards_untouched_and_offers_an_in_port_entry() {
    let mut m = with_ports(PortMapMode::new(&[(1, 3), (3, 1)]), 3);
    let frame = udp(H1, H2);
    let (v, r, _) = receive(&mut m, 1, &frame, 0);
    assert_eq!(r.sent, vec![(Egress { port: 3, queue: None }, frame.clone())]);
    assert_eq!(v.dropped, None);
    let entry = m.kernel().flows.unwrap().entry(v.entry.expect("a kernel entry")).unwrap();
    assert_eq!(entry.actions, &[DpAction::Output(3)]);
    let mut only_in_port = FlowKey::default();
    only_in_port.set(Field::InPort, u32::MAX as u128);
    assert_eq!(*entry.mask, only_in_port, "the decision depends on the ingress port alone");

    let (v, r, _) = receive(&mut m, 2, &frame, 0);
    assert!(r.sent.is_empty());
    assert_eq!(v, Verdict { dropped: Some(DropReason::NoAction), entry: None });
}

#[test]
fn learning_floods_unknown_then_forwards_to_the_learned_port() {
    let mut m = with_ports(LearningMode::new(), 3);
    let (v, r, _) = receive(&mut m, 1, &udp(H1, H2), 0);
    assert_eq!(r.ports(), vec![2, 3], "H2 unknown: flooded");
    assert_eq!(v.dropped, None);
    let flooded = v.entry.expect("the flood is cached");
    m.take_retired();
    let gen = m.generation();
    let (_, r, _) = receive(&mut m, 2, &udp(H2, H1), 1);
    assert_eq!(r.ports(), vec![1], "H1 was learned on port 1");
    // Learning H2 retires the entry that flooded frames for it, and only that one.
    assert_eq!(m.take_retired().entries, vec![flooded]);
    assert_eq!(m.generation(), gen, "retired one by one, not flushed");
    let (v, r, _) = receive(&mut m, 1, &udp(H1, H2), 2);
    assert_eq!(r.ports(), vec![2]);
    assert_eq!(m.generation(), gen, "nothing new learned: kernel entries stay valid");
    let e = m.kernel().flows.unwrap().entry(v.entry.unwrap()).unwrap();
    assert_eq!(e.actions, &[DpAction::Output(2)]);
    // Not programmable by OpenFlow.
    let fm = FlowMod::default();
    assert!(m.openflow(Message::FlowMod(fm), 0, &mut Recorder::default()).is_err());
}

#[test]
fn openflow_set_queue_reaches_the_egress_descriptor() {
    let mut m = openflow(2);
    flow(&mut m, 10, Match::new().with(Field::InPort, 1), vec![Action::SetQueue(5), Action::output(2)]);
    flow(&mut m, 10, Match::new().with(Field::InPort, 2), vec![Action::output(1)]);
    let (_, r, _) = receive(&mut m, 1, &udp(H1, H2), 0);
    assert_eq!(r.sent[0].0, Egress { port: 2, queue: Some(5) });
    let (_, r, _) = receive(&mut m, 2, &udp(H2, H1), 0);
    assert_eq!(r.sent[0].0, Egress { port: 1, queue: None }, "no set_queue: the port decides");
    // A cache hit carries the queue too.
    let (_, r, _) = receive(&mut m, 1, &udp(H1, H2), 1);
    assert_eq!(r.sent[0].0, Egress { port: 2, queue: Some(5) });
}

#[test]
fn openflow_verdicts_name_why_nothing_left() {
    let mut m = openflow(2);
    let (v, r, _) = receive(&mut m, 1, &udp(H1, H2), 0);
    assert!(r.sent.is_empty() && r.events.is_empty());
    assert_eq!(v.dropped, Some(DropReason::NoAction), "table miss without a miss flow");

    let band = MeterBand { kind: BandKind::Drop, rate: 1, burst_size: 1 };
    let mm = MeterMod {
        command: 0,
        flags: ofp::group_meter::meter_flags::PKTPS | ofp::group_meter::meter_flags::BURST,
        meter_id: 1,
        bands: vec![band],
    };
    m.openflow(Message::MeterMod(mm), 0, &mut Recorder::default()).unwrap();
    let fm = FlowMod {
        priority: 5,
        instructions: vec![Instruction::Meter(1), Instruction::ApplyActions(vec![Action::output(2)])],
        ..Default::default()
    };
    m.openflow(Message::FlowMod(fm), 0, &mut Recorder::default()).unwrap();
    let mut verdicts = Vec::new();
    for i in 0..5 {
        verdicts.push(receive(&mut m, 1, &udp(H1, H2), i).0.dropped);
    }
    assert_eq!(verdicts[0], None, "the burst lets the first through");
    assert!(verdicts.contains(&Some(DropReason::Meter)), "{verdicts:?}");

    let mut m = openflow(2);
    flow(&mut m, 1, Match::new(), vec![Action::DecNwTtl, Action::output(2)]);
    let frame = FrameBuilder::new(H2, H1).build(L3::Ipv4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
        ttl: 1,
        tos: 0,
        l4: L4::Udp { src: 1, dst: 2, payload: vec![0; 18] },
    });
    assert_eq!(receive(&mut m, 1, &frame, 0).0.dropped, Some(DropReason::TtlExpired));
}

/// A table-miss flow that sends whole frames to the controller, unbuffered.
fn miss_to_controller(mode: &mut dyn Mode, max_len: u16) {
    flow(mode, 0, Match::new(), vec![Action::Output { port: ofp::port::OFPP_CONTROLLER, max_len }]);
}

fn packet_ins(r: &Recorder) -> Vec<&ofp::message::PacketIn> {
    r.events.iter().filter_map(|e| if let Event::PacketIn(p) = e { Some(p) } else { None }).collect()
}

fn megaflow_entries(mode: &dyn Mode) -> u64 {
    let groups = mode.counters();
    let cache = groups.iter().find(|g| g.name == "megaflow cache").unwrap();
    cache.counters.iter().find(|(name, _)| *name == "entries").unwrap().1
}

#[test]
fn openflow_a_miss_answered_by_the_controller_leaves_no_megaflow_entry() {
    // The flow-mod that answers the packet-in would retire such an entry at once.
    let mut m = openflow(2);
    miss_to_controller(&mut m, ofp::action::OFPCML_NO_BUFFER);
    for now in 0..3 {
        let (v, r, _) = receive(&mut m, 1, &udp(H1, H2), now);
        assert_eq!(packet_ins(&r).len(), 1, "each frame goes up until the controller answers");
        assert_eq!(v, Verdict { dropped: None, entry: None });
    }
    assert_eq!(megaflow_entries(&m), 0);
}

#[test]
fn openflow_a_flood_the_packet_in_limit_holds_back_is_cached_and_still_held_to_the_limit() {
    let cfg = Config { n_tables: 4, table_limits: vec![], native: false, packet_in_rate: 100 };
    let mut m = with_ports(OpenFlowMode::new(&cfg), 2);
    miss_to_controller(&mut m, ofp::action::OFPCML_NO_BUFFER);
    let mut went = 0;
    // All at one instant: the bucket's burst (a quarter second's worth, at least 32) and no more.
    for i in 0..40 {
        let (v, r, _) = receive(&mut m, 1, &udp(H1, H2), 0);
        went += packet_ins(&r).len();
        if i < 32 {
            assert_eq!(v, Verdict { dropped: None, entry: None }, "frame {i}");
        } else {
            assert_eq!(v.dropped, Some(DropReason::PacketInLimit), "frame {i}");
            assert!(v.entry.is_some(), "frame {i}: held back, so the flood's frames hit the cache");
        }
    }
    assert_eq!(went, 32);
    assert_eq!(megaflow_entries(&m), 1);

    // Under the controller meter too: its frames keep their entry, as before.
    let mut m = openflow(2);
    let band = MeterBand { kind: BandKind::Drop, rate: 1000, burst_size: 0 };
    let mm = MeterMod {
        command: 0,
        flags: ofp::group_meter::meter_flags::PKTPS,
        meter_id: ofp::group_meter::OFPM_CONTROLLER,
        bands: vec![band],
    };
    m.openflow(Message::MeterMod(mm), 0, &mut Recorder::default()).unwrap();
    miss_to_controller(&mut m, ofp::action::OFPCML_NO_BUFFER);
    let (v, r, _) = receive(&mut m, 1, &udp(H1, H2), 0);
    assert_eq!(packet_ins(&r).len(), 1);
    assert!(v.entry.is_some());
}

#[test]
fn openflow_buffered_frames_and_packet_outs_leave_as_they_came() {
    // Packet-outs run in one reused packet: a short frame after a long one is itself.
    let mut m = openflow(2);
    miss_to_controller(&mut m, 64);
    let long = FrameBuilder::new(H2, H1).build(L3::Ipv4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
        ttl: 64,
        tos: 0,
        l4: L4::Udp { src: 5000, dst: 9, payload: vec![9; 400] },
    });
    let (_, r, _) = receive(&mut m, 1, &long, 0);
    let pin = packet_ins(&r)[0].clone();
    assert_ne!(pin.buffer_id, ofp::message::NO_BUFFER);
    assert_eq!((pin.data.len(), pin.total_len as usize), (64, long.len()));
    let (_, r2, _) = receive(&mut m, 1, &udp(H1, H2), 0);
    assert_eq!(packet_ins(&r2)[0].buffer_id, pin.buffer_id + 1);

    // The flow-mod naming the first buffer sends the whole long frame through the tables.
    let fm = FlowMod {
        priority: 5,
        match_: Match::new().with(Field::InPort, 1),
        instructions: vec![Instruction::ApplyActions(vec![Action::output(2)])],
        buffer_id: pin.buffer_id,
        ..Default::default()
    };
    let mut r = Recorder::default();
    m.openflow(Message::FlowMod(fm.clone()), 0, &mut r).unwrap();
    assert_eq!(r.sent, vec![(Egress { port: 2, queue: None }, long.clone())]);
    let again = m.openflow(Message::FlowMod(fm), 0, &mut Recorder::default());
    let unknown = ofp::error::ErrorCode::BadRequest(ofp::error::BadRequest::BufferUnknown);
    assert!(matches!(again, Err(e) if e == unknown), "a buffer runs once");

    let short = udp(H1, H2);
    let po = ofp::message::PacketOut {
        buffer_id: ofp::message::NO_BUFFER,
        in_port: ofp::port::OFPP_CONTROLLER,
        actions: vec![Action::output(2)],
        data: short.clone(),
    };
    let mut r = Recorder::default();
    m.openflow(Message::PacketOut(po), 0, &mut r).unwrap();
    assert_eq!(r.sent, vec![(Egress { port: 2, queue: None }, short)]);
}

#[test]
fn openflow_timeouts_come_due_at_the_deadline_the_mode_reports() {
    let mut m = openflow(2);
    assert_eq!(m.next_deadline(), None, "nothing timed: the loop may sleep until woken");
    let fm = FlowMod {
        priority: 1,
        hard_timeout: 2,
        flags: ofp::message::flow_mod_flags::SEND_FLOW_REM,
        instructions: vec![Instruction::ApplyActions(vec![Action::output(2)])],
        ..Default::default()
    };
    m.openflow(Message::FlowMod(fm), 1_000, &mut Recorder::default()).unwrap();
    let due = m.next_deadline().expect("a hard timeout is due");
    assert_eq!(due, 1_000 + 2_000_000_000);
    let mut r = Recorder::default();
    m.tick(due - 1, &mut r);
    assert!(r.events.is_empty(), "not before its time");
    m.tick(due, &mut r);
    assert!(
        matches!(r.events.as_slice(), [Event::FlowRemoved(f)] if f.reason == ofp::message::flow_removed_reason::HARD_TIMEOUT)
    );
    assert_eq!(m.next_deadline(), None);
}

#[cfg(feature = "less")]
mod partitioned {
    use super::*;

    /// LESS on ports 1-2 and another mode on 3-4, as `[[port]] mode` builds it.
    fn shared(other: Box<dyn Mode>) -> forwarding::partition::Partitioned {
        use forwarding::less::{Config as LessConfig, LessMode};
        use forwarding::partition::{Part, Partitioned};
        let less = Box::new(LessMode::new(LessConfig { root: true, ..LessConfig::default() }));
        let mut m = Partitioned::new(vec![
            Part { mode: less, ports: [1, 2].into() },
            Part { mode: other, ports: [3, 4].into() },
        ]);
        for p in 1..=4 {
            m.port_changed(p, Some(PortView::default()));
        }
        m
    }

    fn counter(m: &dyn Mode, name: &str) -> u64 {
        m.counters().iter().flat_map(|g| g.counters.clone()).find(|(n, _)| *n == name).unwrap().1
    }

    #[test]
    fn modes_sharing_a_switch_each_keep_to_their_own_ports() {
        let mut m = shared(Box::new(LearningMode::new()));
        // The learning part floods to its other port only; LESS speaks only on its own.
        let (v, r, _) = receive(&mut m, 3, &udp(H1, H2), 0);
        assert_eq!((r.ports(), v.dropped), (vec![4], None));
        let mut hellos = Recorder::default();
        m.tick(1, &mut hellos);
        assert_eq!(hellos.ports(), vec![1, 2], "HELLOs leave by the LESS ports only");
        // A labelled frame that comes in on a learning port is an Ethernet frame like any other there.
        let label = packet::less::Label { ports: [3, 0, 0], bottom: true, ttl: 1 }.word();
        let payload = [&label.to_be_bytes()[..], &udp(H1, H2)[14..]].concat();
        let labelled = FrameBuilder::new(H2, H1).build(L3::Raw { ethertype: 0x8847, payload });
        let (_, r, _) = receive(&mut m, 4, &labelled, 2);
        assert_eq!(r.ports(), vec![3], "flooded by the bridge, not switched by its label");
        // On a LESS port it is LESS's, and a label naming another part's port names no port of LESS.
        let (v, r, _) = receive(&mut m, 1, &labelled, 3);
        assert_eq!((r.ports(), v.dropped), (vec![], Some(DropReason::BadLabel)));
        assert_eq!(counter(&m, "unknown_port"), 1);
        // The kernel gets LESS's ports as label ports, and the bridge's entries, which pin the port.
        assert_eq!(m.kernel().labels.unwrap().ports, [1, 2].into());
        let (v, _, _) = receive(&mut m, 4, &udp(H2, H1), 4);
        let entry =
            m.kernel().flows.unwrap().entry(v.entry.expect("the bridge's decision goes to the kernel")).unwrap();
        assert_eq!(entry.mask.get(Field::InPort), u32::MAX as u128);
        // No OpenFlow part: nothing is programmable and controllers see every port.
        assert!(!m.is_programmable() && m.controller_sees(1));
    }

    #[test]
    fn an_openflow_part_sees_and_sends_only_its_ports() {
        let of = OpenFlowMode::new(&Config { n_tables: 4, table_limits: vec![], native: false, packet_in_rate: 0 });
        let mut m = shared(Box::new(of));
        assert!(m.is_programmable());
        assert_eq!((1..=4).map(|p| m.controller_sees(p)).collect::<Vec<_>>(), [false, false, true, true]);
        // A flow that names a LESS port: OpenFlow has no such port, and only the other copy leaves.
        flow(&mut m, 10, Match::new().with(Field::InPort, 3), vec![Action::output(1), Action::output(4)]);
        let (_, r, _) = receive(&mut m, 3, &udp(H1, H2), 0);
        assert_eq!(r.ports(), vec![4]);
        // Flooding floods the part.
        flow(&mut m, 10, Match::new().with(Field::InPort, 4), vec![Action::output(ofp::port::OFPP_FLOOD)]);
        let (_, r, _) = receive(&mut m, 4, &udp(H2, H1), 0);
        assert_eq!(r.ports(), vec![3]);
        // The LESS part's frames never reach OpenFlow's tables (no table-miss packet-in for them).
        let (_, r, _) = receive(&mut m, 2, &udp(H2, H1), 0);
        assert!(r.events.is_empty() && r.sent.is_empty());
    }

    #[test]
    fn a_copy_for_another_parts_port_is_fenced_off() {
        // A port map checks no ports: the partition stops what it sends across.
        let mut m = shared(Box::new(PortMapMode::new(&[(3, 1), (4, 3)])));
        let (v, r, _) = receive(&mut m, 3, &udp(H1, H2), 0);
        assert!(r.sent.is_empty());
        assert_eq!(counter(&m, "fenced"), 1);
        assert!(m.kernel().flows.unwrap().entry(v.entry.unwrap()).is_none(), "nor may the kernel send it across");
        let (v, r, _) = receive(&mut m, 4, &udp(H1, H2), 0);
        assert_eq!((r.ports(), counter(&m, "fenced")), (vec![3], 1));
        assert!(m.kernel().flows.unwrap().entry(v.entry.unwrap()).is_some());
    }
}
