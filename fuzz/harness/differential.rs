// Shared by the fuzz target `differential` and crates/datapath/tests/differential.rs (included, not
// a crate: the same code in both). Needs root: it loads the fast-path programs.
//
// A small random flow table and random frames, through the userspace pipeline and through the
// kernel fast path's XDP and TC programs (BPF_PROG_TEST_RUN) holding what the pipeline computed,
// as the switch would install it. Every frame runs in the kernel after every translation is
// installed, so a frame may hit an entry another frame made: a megaflow that covers more than its
// translation consulted shows up as a difference too.

use std::cell::RefCell;

use datapath::fastpath::{actions_outputs, EncodeContext, FastPath, Mode, Programs, DEFAULT_ENTRIES};
use ofp::action::{Action, Instruction};
use ofp::message::FlowMod;
use ofp::oxm::{Field, Match, OxmField, OFPVID_PRESENT};
use ofp::port::OFPP_IN_PORT;
use packet::craft::{FrameBuilder, L3, L4};
use packet::{parse, Offload, Packet};
use pipeline::classifier::RuleId;
use pipeline::exec::{execute, Credits, Sink, ToController};
use pipeline::{Pipeline, PortView};

/// The loopback interface: test runs need a real ingress device. It is port 1.
const LOOPBACK: u32 = 1;
/// Port 2's interface index: redirects are not carried out by a test run, any index will do.
const PORT2_IFINDEX: u32 = 2;
const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;
const XDP_TX: u32 = 3;
const XDP_REDIRECT: u32 = 4;
const TC_ACT_SHOT: u32 = 2;
const TC_ACT_REDIRECT: u32 = 7;
const MACS: [u64; 3] = [0x0200_0000_0001, 0x0200_0000_0002, 0xffff_ffff_ffff];

thread_local! {
    /// Loaded once per process: loading takes milliseconds, an input microseconds.
    static FAST_PATH: RefCell<Option<FastPath>> = const { RefCell::new(None) };
    /// What the comparisons found, for a test to show it compared something.
    static TALLY: RefCell<Tally> = RefCell::new(Tally::default());
}

/// Kernel verdicts seen: frames forwarded (compared byte for byte), dropped, left to userspace.
#[derive(Clone, Copy, Debug, Default)]
#[allow(dead_code)]
struct Tally {
    xdp_forwarded: u64,
    xdp_dropped: u64,
    xdp_passed: u64,
    tc_forwarded: u64,
    tc_dropped: u64,
    tc_deferred: u64,
}

#[allow(dead_code)]
fn tally() -> Tally {
    TALLY.with(|t| *t.borrow())
}

fn count(f: impl FnOnce(&mut Tally)) {
    TALLY.with(|t| f(&mut t.borrow_mut()));
}

/// The fuzzer's bytes as a stream of choices; past the end, every choice is 0.
struct Choices<'a>(&'a [u8]);

impl Choices<'_> {
    fn byte(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else { return 0 };
        self.0 = rest;
        b
    }
    fn below(&mut self, n: u8) -> u8 {
        self.byte() % n
    }
    fn bit(&mut self) -> bool {
        self.byte() & 1 == 1
    }
}

struct Sent {
    frames: Vec<(u32, Vec<u8>)>,
    to_controller: usize,
}

impl Sink for Sent {
    fn output(&mut self, port: u32, _: Option<u32>, pkt: &Packet) {
        self.frames.push((port, pkt.data().to_vec()));
    }
    fn to_controller(&mut self, _: &Packet, _: &ToController) {
        self.to_controller += 1;
    }
}

fn random_match(c: &mut Choices) -> Match {
    let mut m = Match::new();
    if c.bit() {
        m = m.with(Field::EthDst, MACS[c.below(3) as usize] as u128);
    }
    match c.below(4) {
        0 => {}
        1 => m = m.with(Field::VlanVid, (OFPVID_PRESENT | 10) as u128),
        2 => m = m.with(Field::VlanVid, 0),
        _ => m = m.with_masked(Field::VlanVid, OFPVID_PRESENT as u128, OFPVID_PRESENT as u128),
    }
    if c.bit() {
        m = m.with(Field::EthType, 0x0800);
        if c.bit() {
            m = m.with(Field::Ipv4Dst, 0x0a00_0001 + c.below(3) as u128);
        }
        match c.below(3) {
            0 => {}
            1 => {
                m = m.with(Field::IpProto, 17);
                if c.bit() {
                    m = m.with(Field::UdpDst, 1 + c.below(3) as u128);
                }
            }
            _ => {
                m = m.with(Field::IpProto, 6);
                if c.bit() {
                    m = m.with(Field::TcpDst, 80);
                }
            }
        }
    }
    m
}

/// Rewrites the kernel carries out, in any order, then where the frame goes.
fn random_actions(c: &mut Choices, ip: bool) -> Vec<Action> {
    let set = |f: Field, v: u128| Action::SetField(OxmField::exact(f, v));
    let mut actions = Vec::new();
    for _ in 0..c.below(4) {
        match c.below(10) {
            0 => actions.push(set(Field::EthDst, MACS[c.below(2) as usize] as u128)),
            1 => actions.push(set(Field::EthSrc, 0x0200_0000_0042)),
            2 => actions.push(Action::PushVlan(if c.bit() { 0x8100 } else { 0x88a8 })),
            3 => actions.push(Action::PopVlan),
            4 => actions.push(set(Field::VlanVid, (OFPVID_PRESENT | c.below(4) as u16) as u128)),
            5 => actions.push(set(Field::VlanPcp, c.below(8) as u128)),
            6 if ip => actions.push(set(Field::Ipv4Src, 0xc0a8_0001 + c.below(2) as u128)),
            7 if ip => actions.push(set(Field::IpDscp, c.below(64) as u128)),
            8 if ip => actions.push(Action::DecNwTtl),
            9 if ip => actions.push(set(Field::UdpDst, 53)),
            _ => {}
        }
    }
    match c.below(5) {
        0 => {}
        1 => actions.push(Action::output(OFPP_IN_PORT)),
        2 => actions.extend([Action::output(2), Action::output(OFPP_IN_PORT)]),
        _ => actions.push(Action::output(2)),
    }
    actions
}

fn random_frame(c: &mut Choices) -> Vec<u8> {
    if c.below(8) == 0 {
        // Raw bytes: whatever the parsers make of them.
        let n = 14 + c.below(64) as usize;
        return (0..n).map(|_| c.byte()).collect();
    }
    let dst = MACS[c.below(3) as usize].to_be_bytes();
    let mut b = FrameBuilder::new(dst[2..].try_into().unwrap(), [2, 0, 0, 0, 0, 9]);
    for _ in 0..c.below(3) {
        let tpid = if c.bit() { 0x8100 } else { 0x88a8 };
        b = b.vlan(tpid, (c.below(8) as u16) << 13 | if c.bit() { 10 } else { c.below(4) as u16 });
    }
    let l4 = match c.below(3) {
        0 => L4::Udp { src: 7, dst: 1 + c.below(3) as u16, payload: vec![0; c.below(30) as usize] },
        1 => L4::Tcp { src: 4000, dst: if c.bit() { 80 } else { 81 }, seq: 1, flags: 0x10, payload: vec![7; 6] },
        _ => L4::Udp { src: 9, dst: 53, payload: vec![1; 18] },
    };
    let ttl = [64, 1, 2, 0][c.below(4) as usize];
    b.build(L3::Ipv4 { src: [10, 0, 0, 9], dst: [10, 0, 0, 1 + c.below(3)], ttl, tos: c.byte(), l4 })
}

/// DIFFERENTIAL_DEBUG=1: the flow table, each frame's translation, and what userspace sent.
fn debug(line: impl FnOnce() -> String) {
    if std::env::var_os("DIFFERENTIAL_DEBUG").is_some() {
        eprintln!("{}", line());
    }
}

/// What userspace does with a frame arriving on port 1: its translation (if it parses and may be
/// cached) and what it sent.
struct Userspace {
    frame: Vec<u8>,
    parsed: bool,
    sent: Sent,
}

#[allow(dead_code)]
fn differential(data: &[u8]) {
    if !ebpf::test_may_load_programs("the differential fast-path check") {
        return;
    }
    FAST_PATH.with(|cell| {
        let mut slot = cell.borrow_mut();
        let fp = slot.get_or_insert_with(|| {
            let mut fp = FastPath::open(Mode::Xdp, &[], Programs::Flows, DEFAULT_ENTRIES).expect("the fast path loads");
            fp.register_port(1, LOOPBACK, 1).expect("port 1 registered");
            fp
        });
        fp.flush();
        fp.sweep();
        run(fp, &mut Choices(data));
    });
}

fn run(fp: &mut FastPath, c: &mut Choices) {
    let mut p = Pipeline::new(1);
    p.set_port(1, PortView::default());
    p.set_port(2, PortView::default());
    for _ in 0..1 + c.below(4) {
        let match_ = random_match(c);
        let ip = match_.get(Field::EthType).is_some_and(|f| f.value == 0x0800);
        let fm = FlowMod {
            priority: [1, 5, 10][c.below(3) as usize],
            match_,
            instructions: vec![Instruction::ApplyActions(random_actions(c, ip))],
            ..Default::default()
        };
        let added = p.flow_mod(&fm, 0);
        debug(|| format!("flow-mod priority {} {:?} {:?} -> {:?}", fm.priority, fm.match_, fm.instructions, added.map(|_| ())));
    }
    let mut seen = Vec::new();
    for n in 0..1 + c.below(6) {
        let frame = random_frame(c);
        let mut sent = Sent { frames: Vec::new(), to_controller: 0 };
        let Ok((key, layout)) = parse(&frame, 1) else {
            debug(|| format!("frame {n} {frame:02x?}: malformed"));
            seen.push(Userspace { frame, parsed: false, sent });
            continue;
        };
        let pkt = Packet::new(&frame, Offload::default(), layout);
        let t = p.translate(&pkt, &key, 0);
        let mut out = Packet::new(&frame, Offload::default(), layout);
        let _ = execute(&t.actions, &mut out, &mut Default::default(), 0, &mut sent);
        debug(|| format!("frame {n} {frame:02x?}: actions {:?}, consulted {:?}, cacheable {}, sent {:?}", t.actions, t.consulted, t.cacheable, sent.frames.len()));
        if t.cacheable {
            let ifindex = |port: u32| match port {
                1 => Some(LOOPBACK),
                2 => Some(PORT2_IFINDEX),
                _ => None,
            };
            let mut no_meters = |_| None;
            let mut cx =
                EncodeContext { mode: Mode::Xdp, ifindex: &ifindex, meter_slot: &mut no_meters, ip_proto: key.ip_proto() };
            let outputs: Vec<(u32, u8)> = actions_outputs(&t.actions).into_iter().map(|p| (p, 0)).collect();
            fp.install(RuleId(n as u32), &key, &t.consulted, &t.actions, &Credits::default(), &outputs, &mut cx);
        }
        seen.push(Userspace { frame, parsed: true, sent });
    }
    for u in &seen {
        compare(fp, u);
    }
}

/// A frame the kernel dropped at `hook` must be one userspace parsed and sent nowhere (a
/// malformed one is userspace's to count).
fn userspace_dropped_too(hook: &str, u: &Userspace) {
    assert!(
        u.parsed && u.sent.frames.is_empty() && u.sent.to_controller == 0,
        "{hook} dropped what userspace {}: {:02x?}",
        if u.parsed { "sent" } else { "calls malformed" },
        u.frame
    );
}

/// The kernel's verdict on one frame against what userspace did with it. The kernel may always
/// leave a frame to userspace (XDP_PASS; TC drops it for want of an upcall interface here, and
/// counts that): what it decides itself must be what userspace decided.
fn compare(fp: &FastPath, u: &Userspace) {
    let single = match (&u.sent.frames[..], u.sent.to_controller) {
        ([(port, bytes)], 0) => Some((*port, bytes)),
        _ => None,
    };
    let (verdict, out) = fp.run_once(Mode::Xdp, &u.frame, LOOPBACK).expect("xdp test run");
    match verdict {
        XDP_PASS => count(|t| t.xdp_passed += 1),
        XDP_DROP => {
            userspace_dropped_too("xdp", u);
            count(|t| t.xdp_dropped += 1);
        }
        XDP_REDIRECT | XDP_TX => {
            let Some((_, want)) = single else {
                panic!("xdp forwarded what userspace did not send once: {:02x?} -> {:?}", u.frame, u.sent.frames)
            };
            assert_eq!(&out, want, "xdp and userspace wrote different frames from {:02x?}", u.frame);
            count(|t| t.xdp_forwarded += 1);
        }
        v => panic!("xdp verdict {v} on {:02x?}", u.frame),
    }
    // TC: a test run keeps a VLAN tag in the data that the stack would have put in metadata, and
    // a tag TC pushes goes into metadata: frames are compared where neither happens.
    let tagged = |f: &[u8]| f.len() >= 14 && matches!(u16::from_be_bytes([f[12], f[13]]), 0x8100 | 0x88a8);
    if tagged(&u.frame) || single.is_some_and(|(_, f)| tagged(f)) {
        return;
    }
    let before = fp.drops()[2].1;
    let (verdict, out) = match fp.run_once(Mode::Tc, &u.frame, LOOPBACK) {
        Ok(run) => run,
        // The test run itself refuses some frames a device would hand TC (an IPv4 ethertype
        // without the IPv4 header, say): nothing to compare.
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput && u.frame.len() < 64 => return,
        Err(e) => panic!("tc test run on {:02x?}: {e}", u.frame),
    };
    let deferred = fp.drops()[2].1 > before;
    match verdict {
        TC_ACT_SHOT if deferred => count(|t| t.tc_deferred += 1),
        TC_ACT_SHOT => {
            userspace_dropped_too("tc", u);
            count(|t| t.tc_dropped += 1);
        }
        TC_ACT_REDIRECT => {
            let Some((_, want)) = single else {
                panic!("tc forwarded what userspace did not send once: {:02x?} -> {:?}", u.frame, u.sent.frames)
            };
            assert_eq!(&out, want, "tc and userspace wrote different frames from {:02x?}", u.frame);
            count(|t| t.tc_forwarded += 1);
        }
        v => panic!("tc verdict {v} on {:02x?}", u.frame),
    }
}
