// Shared by the fuzz target `differential` and crates/datapath/tests/differential.rs (included, not
// a crate: the same code in both). Needs root: it loads the fast-path programs and makes veth
// pairs, in a network namespace of the calling thread's own (gone with the process; nothing it
// sends reaches the host's interfaces).
//
// Random flow tables and random frames, through the userspace pipeline and through the kernel
// fast path holding what the pipeline computed, as the switch would install it: up to three
// tables joined by goto-table, write-actions, groups of all four types, drop meters, four ports
// (some down), IPv4, IPv6, ARP-less raw frames, up to two VLAN tags, pushes, pops and sets of
// tags. Each input picks the mode its entries are encoded for: XDP's (one output, last), whose
// entries run on both hooks, or TC's (several outputs), which run on TC only.
//
// Over 600 lines, one concern: one input decoded into one pipeline and its frames, run both ways,
// and compared; the rig for TC (veths, fences) is here because only this comparison needs it.
//
// XDP runs by BPF_PROG_TEST_RUN on the loopback interface (port 1 too): a test run sees every tag
// in the data, as XDP does. TC runs for real: the frame is sent into port 1's veth, where the
// stack takes its outer tag into the skb's metadata as it does on any port, and what the program
// sends out of ports 1-4 is read at their far ends (a tag in metadata put back from the packet
// socket's auxdata); what it sends up is read at the upcall link's far end. Behind each frame
// goes a fence, a frame the kernel always sends up: once it is back, everything the frame made is.
//
// Every frame runs in the kernel after every translation is installed, so a frame may hit an entry
// another frame made: a megaflow that covers more than its translation consulted shows up as a
// difference too. The kernel may always leave a frame to userspace; what it decides itself must be
// what userspace decided: the same frames out of the same ports, byte for byte.
//
// Meters: a token bucket refills with time, and the kernel's and userspace's are two buckets
// charged at different moments, so a comparison of their verdicts over a run of frames would
// compare clocks. Every frame is therefore charged against full buckets on both sides (the
// kernel's slots are made anew, userspace's meters copied from the pipeline's untouched ones),
// with `now` 0 in userspace: a full bucket's verdict does not depend on time (it is capped at its
// capacity), so the verdicts must agree exactly. The meters are sized around the frames (a
// 1-packet burst; a 125-byte one; 1514 bytes) so that both verdicts occur, also for a frame
// charged twice (two metered tables).
//
// Input: a stream of choices (`Choices`), each one byte: a header (bit 0: TC's encoding; bits
// 1-3: ports 2-4 down; bits 4-5: meters; bits 6-7: groups), each meter's kind, each group (type
// and buckets, each a watched port and actions), the number of flows and each flow (table and
// priority, match, instructions, actions), the number of frames and each frame.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use datapath::afpacket::{self, AfPacketRx, AfPacketTx, RingConfig};
use datapath::fastpath::{actions_outputs, EncodeContext, FastPath, Mode, Programs, DEFAULT_ENTRIES};
use datapath::{sys, PortRx, PortTx};
use ofp::action::{Action, Instruction};
use ofp::group_meter::{group_command, group_type, meter_command, meter_flags, BandKind, Bucket, MeterBand, OFPG_ANY};
use ofp::message::{FlowMod, GroupMod, MeterMod};
use ofp::oxm::{Field, Match, OxmField, OFPVID_PRESENT};
use ofp::port::{state, OFPP_ALL, OFPP_CONTROLLER, OFPP_FLOOD, OFPP_IN_PORT};
use packet::craft::{FrameBuilder, L3, L4};
use packet::{parse, Offload, Packet};
use pipeline::classifier::RuleId;
use pipeline::exec::{execute, DpAction, Sink, ToController};
use pipeline::meter::MeterTable;
use pipeline::{Pipeline, PortView, Retired};

/// The loopback interface (of the namespace): XDP's test runs arrive there, as port 1.
const LOOPBACK: u32 = 1;
/// Switch ports 1..=PORTS, each a veth pair; frames come in on port 1.
const PORTS: u32 = 4;
const TABLES: u8 = 3;
const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;
const XDP_REDIRECT: u32 = 4;
const MACS: [u64; 3] = [0x0200_0000_0001, 0x0200_0000_0002, 0xffff_ffff_ffff];
/// How long a frame's fence may take to come back before the harness calls the kernel lost.
const FENCE_WAIT: Duration = Duration::from_secs(5);

thread_local! {
    /// Made once per thread: loading and the interfaces take milliseconds, an input microseconds.
    static RIG: RefCell<Option<Rig>> = const { RefCell::new(None) };
    /// What the comparisons found, for a test to show it compared something.
    static TALLY: RefCell<Tally> = RefCell::new(Tally::default());
}

/// Kernel verdicts seen (frames forwarded are compared byte for byte), and how many of the
/// frames the kernel decided itself reached each feature.
#[derive(Clone, Copy, Debug, Default)]
#[allow(dead_code)]
struct Tally {
    xdp_forwarded: u64,
    xdp_dropped: u64,
    xdp_passed: u64,
    tc_forwarded: u64,
    tc_dropped: u64,
    tc_deferred: u64,
    /// Frames the stack dropped before TC saw them (a tag cut short).
    tc_unseen: u64,
    /// Decided by TC with several copies out.
    tc_copies: u64,
    /// Decided by the kernel (either hook): tagged frames in or out, IPv6, through a group, a
    /// meter's drop, through more than one table.
    tagged: u64,
    ipv6: u64,
    grouped: u64,
    metered_drops: u64,
    multi_table: u64,
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

const IPV6_BASE: u128 = 0xfd00 << 112;

fn random_match(c: &mut Choices) -> Match {
    let mut m = Match::new();
    if c.below(4) == 1 {
        m = m.with(Field::EthDst, MACS[c.below(3) as usize] as u128);
    }
    match c.below(8) {
        1 => m = m.with(Field::VlanVid, (OFPVID_PRESENT | 10) as u128),
        2 => m = m.with(Field::VlanVid, 0),
        3 => {
            m = m.with_masked(Field::VlanVid, OFPVID_PRESENT as u128, OFPVID_PRESENT as u128);
            m = m.with(Field::VlanPcp, c.below(8) as u128);
        }
        4 => m = m.with_masked(Field::VlanVid, OFPVID_PRESENT as u128, OFPVID_PRESENT as u128),
        _ => {}
    }
    let v6 = match c.below(3) {
        0 => return m,
        1 => false,
        _ => true,
    };
    if v6 {
        m = m.with(Field::EthType, 0x86dd);
        if c.bit() {
            m = m.with(Field::Ipv6Dst, IPV6_BASE + 1 + c.below(3) as u128);
        }
    } else {
        m = m.with(Field::EthType, 0x0800);
        if c.bit() {
            m = m.with(Field::Ipv4Dst, 0x0a00_0001 + c.below(3) as u128);
        }
    }
    match c.below(4) {
        0 => {}
        1 => {
            m = m.with(Field::IpProto, 17);
            if c.bit() {
                m = m.with(Field::UdpDst, 1 + c.below(3) as u128);
            }
        }
        2 => {
            m = m.with(Field::IpProto, 6);
            if c.bit() {
                m = m.with(Field::TcpDst, 80);
            }
        }
        _ => m = m.with(Field::IpDscp, c.below(4) as u128),
    }
    m
}

/// A port to send to besides the input one.
fn other_port(c: &mut Choices) -> u32 {
    2 + c.below(PORTS as u8 - 1) as u32
}

/// Rewrites (the kernel carries out most of them) and outputs, in any order, then where the frame
/// goes. `eth_type` is what the flow matched (rewrites of IP fields need it), `groups` how many
/// groups there are to send to.
fn random_actions(c: &mut Choices, eth_type: Option<u16>, groups: u8) -> Vec<Action> {
    let set = |f: Field, v: u128| Action::SetField(OxmField::exact(f, v));
    let (v4, v6) = (eth_type == Some(0x0800), eth_type == Some(0x86dd));
    let ip = v4 || v6;
    let mut actions = Vec::new();
    for _ in 0..c.below(5) {
        match c.below(13) {
            0 => actions.push(set(Field::EthDst, MACS[c.below(2) as usize] as u128)),
            1 => actions.push(set(Field::EthSrc, 0x0200_0000_0042)),
            2 => actions.push(Action::PushVlan(if c.bit() { 0x8100 } else { 0x88a8 })),
            3 => actions.push(Action::PopVlan),
            4 => actions.push(set(Field::VlanVid, (OFPVID_PRESENT | c.below(4) as u16) as u128)),
            5 => actions.push(set(Field::VlanPcp, c.below(8) as u128)),
            6 if v4 => actions.push(set(Field::Ipv4Src, 0xc0a8_0001 + c.below(2) as u128)),
            // The kernel takes no IPv6 address rewrite: such translations stay in userspace.
            6 if v6 => actions.push(set(Field::Ipv6Src, IPV6_BASE + 0x42)),
            7 if ip => actions.push(set(Field::IpDscp, c.below(64) as u128)),
            8 if ip => actions.push(Action::DecNwTtl),
            9 if ip => actions.push(set(Field::UdpDst, 53)),
            10 => actions.push(Action::output(other_port(c))),
            11 if groups > 0 => actions.push(Action::Group(1 + c.below(groups) as u32)),
            12 => actions.push(Action::SetQueue(c.below(4) as u32)),
            _ => {}
        }
    }
    match c.below(9) {
        0 => {}
        1 => actions.push(Action::output(OFPP_IN_PORT)),
        2 => actions.extend([Action::output(other_port(c)), Action::output(OFPP_IN_PORT)]),
        3 => actions.push(Action::output(OFPP_FLOOD)),
        4 => actions.push(Action::output(OFPP_ALL)),
        5 => actions.push(Action::output(OFPP_CONTROLLER)),
        6 if groups > 0 => actions.push(Action::Group(1 + c.below(groups) as u32)),
        _ => actions.push(Action::output(other_port(c))),
    }
    actions
}

/// Meter `id` of one of six kinds. The first four have one drop band, which the kernel takes;
/// two bands, or a DSCP remark, stay in userspace.
fn random_meter(c: &mut Choices, id: u32) -> MeterMod {
    let band = |rate, burst_size| MeterBand { rate, burst_size, kind: BandKind::Drop };
    let (flags, bands) = match c.below(6) {
        // Never drops: a million packets of burst.
        0 => (meter_flags::PKTPS | meter_flags::BURST, vec![band(1_000_000, 1_000_000)]),
        // One packet: a frame charged twice is dropped the second time.
        1 => (meter_flags::PKTPS | meter_flags::BURST, vec![band(1, 1)]),
        // 1 kbit of burst: frames longer than 125 bytes (where the meter stands) are dropped.
        2 => (meter_flags::KBPS | meter_flags::BURST, vec![band(1, 1)]),
        // No burst given: one full-size frame's worth.
        3 => (meter_flags::KBPS, vec![band(1, 0)]),
        4 => (meter_flags::PKTPS | meter_flags::BURST, vec![band(1, 1), band(2, 1)]),
        _ => (
            meter_flags::KBPS | meter_flags::BURST,
            vec![MeterBand { rate: 1, burst_size: 1, kind: BandKind::DscpRemark { prec_level: 1 } }],
        ),
    };
    MeterMod { command: meter_command::ADD, flags, meter_id: id, bands }
}

/// Group `id`: a type, one to three buckets, each watching a port (a port down makes its
/// fast-failover or select bucket dead) and doing a few actions.
fn random_group(c: &mut Choices, id: u32) -> GroupMod {
    let b = c.byte();
    let typ = [group_type::ALL, group_type::SELECT, group_type::INDIRECT, group_type::FAST_FAILOVER][b as usize % 4];
    let n = if typ == group_type::INDIRECT { 1 } else { 1 + (b >> 2) % 3 };
    let buckets = (0..n)
        .map(|_| Bucket {
            weight: if typ == group_type::SELECT { 1 + c.below(3) as u16 } else { 0 },
            watch_port: if typ == group_type::FAST_FAILOVER { other_port(c) } else { ofp::port::OFPP_ANY },
            watch_group: OFPG_ANY,
            actions: random_actions(c, None, 0),
        })
        .collect();
    GroupMod { command: group_command::ADD, group_type: typ, group_id: id, buckets }
}

fn random_flow(c: &mut Choices, groups: u8, meters: u8) -> FlowMod {
    let b = c.byte();
    // Most flows in table 0, where every frame starts.
    let table_id = [0, 0, 1, 2][b as usize % 4];
    let priority = [1, 5, 10][(b >> 2) as usize % 3];
    let match_ = random_match(c);
    let eth_type = match_.get(Field::EthType).map(|f| f.value as u16);
    let how = c.byte();
    let mut instructions = Vec::new();
    if how & 1 == 1 && meters > 0 {
        instructions.push(Instruction::Meter(1 + (how >> 1) as u32 % meters as u32));
    }
    instructions.push(Instruction::ApplyActions(random_actions(c, eth_type, groups)));
    if how & 4 != 0 {
        // The action set: run at the end of the pipeline, after every table's apply-actions.
        let write = match (how >> 5) % 3 {
            0 if groups > 0 => vec![Action::Group(1 + c.below(groups) as u32)],
            1 => {
                vec![Action::SetField(OxmField::exact(Field::EthSrc, 0x0200_0000_0043)), Action::output(other_port(c))]
            }
            _ => vec![Action::output(other_port(c))],
        };
        instructions.push(Instruction::WriteActions(write));
    }
    if how & 8 != 0 && table_id + 1 < TABLES {
        let next = (table_id + 1 + (how >> 4 & 1)).min(TABLES - 1);
        instructions.push(Instruction::GotoTable(next));
    }
    FlowMod { table_id, priority, match_, instructions, ..Default::default() }
}

fn random_frame(c: &mut Choices) -> Vec<u8> {
    let kind = c.byte();
    if kind.is_multiple_of(8) {
        // Raw bytes: whatever the parsers make of them.
        let n = 14 + c.below(64) as usize;
        return (0..n).map(|_| c.byte()).collect();
    }
    let dst = MACS[c.below(3) as usize].to_be_bytes();
    let mut b = FrameBuilder::new(dst[2..].try_into().unwrap(), [2, 0, 0, 0, 0, 9]);
    let tags = c.below(3) as usize;
    for _ in 0..tags {
        let tpid = if c.bit() { 0x8100 } else { 0x88a8 };
        b = b.vlan(tpid, (c.below(8) as u16) << 13 | if c.bit() { 10 } else { c.below(4) as u16 });
    }
    // Frames either side of 128 bytes (the kernel parses a copy of the first 127) and of a
    // 125-byte meter burst.
    let payload = |c: &mut Choices, fill| vec![fill; [4, 30, 75, 110][c.below(4) as usize]];
    let l4 = match c.below(4) {
        0 => L4::Udp { src: 7, dst: 1 + c.below(3) as u16, payload: payload(c, 0) },
        1 => L4::Tcp { src: 4000, dst: if c.bit() { 80 } else { 81 }, seq: 1, flags: 0x10, payload: payload(c, 7) },
        2 => L4::Icmp { typ: 8, code: 0, payload: payload(c, 3) },
        _ => L4::Udp { src: 9, dst: 53, payload: vec![1; 18] },
    };
    let ttl = [64, 1, 2, 0][c.below(4) as usize];
    let host = 1 + c.below(3);
    if kind & 8 != 0 {
        let l4 = match l4 {
            L4::Icmp { payload, .. } => L4::Icmp { typ: 128, code: 0, payload },
            other => other,
        };
        let mut dst = (IPV6_BASE + host as u128).to_be_bytes();
        dst[15] = host;
        let tc = c.byte();
        return b.build(L3::Ipv6 {
            src: (IPV6_BASE + 9).to_be_bytes(),
            dst,
            hop_limit: ttl,
            tc,
            flow_label: c.byte() as u32 * 0x101,
            l4,
        });
    }
    let mut f = b.build(L3::Ipv4 { src: [10, 0, 0, 9], dst: [10, 0, 0, host], ttl, tos: c.byte(), l4 });
    if kind & 16 != 0 {
        // A fragment: the first (more to come) or a later one, which holds no transport header.
        let l3 = 14 + 4 * tags;
        let flags_offset: u16 = if kind & 32 != 0 { 0x2000 } else { 0x0001 };
        f[l3 + 6..l3 + 8].copy_from_slice(&flags_offset.to_be_bytes());
        packet::csum::set_ipv4_checksum(&mut f[l3..l3 + 20]);
    }
    f
}

/// DIFFERENTIAL_DEBUG=1: the tables, each frame's translation, and what userspace sent.
fn debug(line: impl FnOnce() -> String) {
    if std::env::var_os("DIFFERENTIAL_DEBUG").is_some() {
        eprintln!("{}", line());
    }
}

/// What userspace does with a frame arriving on port 1.
struct Userspace {
    frame: Vec<u8>,
    parsed: bool,
    sent: Sent,
    /// The ports its translation's entry sends to, if the kernel took it.
    installed: Option<Vec<u32>>,
    /// What its translation went through (for the tally).
    grouped: bool,
    multi_table: bool,
    meter_dropped: bool,
}

/// The kernel fast path on veth ports, with what the harness reads them by.
struct Rig {
    fp: FastPath,
    /// Frames into port 1, from its far end.
    inject: AfPacketTx,
    /// The far end of each port (index: port - 1): what the kernel sent out of it.
    far: Vec<AfPacketRx>,
    /// The far end of the upcall link: what TC sent up to userspace.
    upcall: AfPacketRx,
    /// Each port's interface index (index: port - 1).
    ifindexes: Vec<u32>,
    /// This input's kernel meter slots, in the order they were made: (meter id, slot).
    meter_slots: Vec<(u32, u32)>,
}

impl Rig {
    fn new() -> Rig {
        // SAFETY: unshare has no memory effects; CLONE_NEWNET moves this thread alone.
        let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "a network namespace for the differential rig: {}", std::io::Error::last_os_error());
        // No IPv6 of the interfaces' own (router solicitations, MLD) among what the far ends read.
        for which in ["all", "default"] {
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{which}/disable_ipv6"), "1");
        }
        sys::set_if_up("lo", true).expect("the namespace's loopback up");
        let mut ports = Vec::new();
        for no in 1..=PORTS {
            let (ours, far) = (format!("ef-df{no}"), format!("ef-df{no}f"));
            sys::create_veth(&ours, &far).expect("a veth pair for the rig");
            sys::set_if_up(&ours, true).expect("port up");
            sys::set_if_up(&far, true).expect("far end up");
            ports.push((no, ours));
        }
        let mut fp = FastPath::open(Mode::Tc, &ports, Programs::Flows, DEFAULT_ENTRIES).expect("the fast path loads");
        fp.register_port(1, LOOPBACK, 1).expect("the loopback as port 1 too");
        let open = |name: &str| afpacket::open(name, RingConfig::with_frames(64)).expect("a packet socket");
        let far_ends: Vec<(AfPacketRx, AfPacketTx)> = (1..=PORTS).map(|no| open(&format!("ef-df{no}f"))).collect();
        let upcall_peer = fp.upcall.as_ref().expect("TC mode has an upcall link").1.clone();
        let (upcall, _) = open(&upcall_peer);
        let mut inject = None;
        let mut far = Vec::new();
        for (rx, tx) in far_ends {
            inject.get_or_insert(tx);
            far.push(rx);
        }
        // One CPU: a frame, what it makes, and its fence then pass through one backlog in order.
        // SAFETY: plain calls on this thread's own affinity.
        unsafe {
            let cpu = libc::sched_getcpu();
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu.max(0) as usize, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
        let ifindexes = ports.iter().map(|(_, name)| sys::ifindex(name).expect("a port's index")).collect();
        Rig { fp, inject: inject.unwrap(), far, upcall, ifindexes, meter_slots: Vec::new() }
    }

    /// Makes every meter of this input full again in the kernel (see the top of this file).
    fn refill_meters(&mut self, p: &Pipeline) {
        if self.meter_slots.is_empty() {
            return;
        }
        let meters = self.meter_slots.iter().map(|&(id, _)| id).collect();
        let _ = self.fp.retire(&Retired { entries: Vec::new(), meters });
        for &(id, slot) in &self.meter_slots {
            let again = self.fp.meter_slot(id, p.meter(id).expect("the meter"));
            assert_eq!(again, Some(slot), "meter {id} made again in its slot");
        }
    }

    /// Every frame waiting at the far ends and the upcall link: (port, frame), then what went up.
    fn drain(&mut self) -> (Outputs, Vec<Vec<u8>>) {
        let mut out = Vec::new();
        for (i, rx) in self.far.iter_mut().enumerate() {
            while rx.recv(64, &mut |f| out.push((i as u32 + 1, with_tag(f.data, f.vlan)))) > 0 {}
        }
        let mut up = Vec::new();
        // The upcall tag (the port's) stays out: what went up is the frame as it came in.
        while self.upcall.recv(64, &mut |f| up.push(f.data.to_vec())) > 0 {}
        (out, up)
    }

    /// Sends `frame` into port 1 and returns what TC did with it.
    fn run_tc(&mut self, frame: &[u8]) -> TcRun {
        let (stray, stray_up) = self.drain();
        assert!(
            stray.is_empty() && stray_up.is_empty(),
            "frames arrived after their fence: {stray:02x?} {stray_up:02x?}"
        );
        let before = self.fp.counters();
        let fence = fence();
        for f in [frame, &fence[..]] {
            self.inject.send(f, &Offload::default()).expect("a frame into port 1");
        }
        self.inject.flush();
        let deadline = Instant::now() + FENCE_WAIT;
        let (mut out, mut up) = (Vec::new(), Vec::new());
        loop {
            let (o, u) = self.drain();
            out.extend(o);
            up.extend(u);
            if let Some(at) = up.iter().position(|f| *f == fence) {
                up.remove(at);
                break;
            }
            assert!(Instant::now() < deadline, "the fence behind {frame:02x?} never came back up");
            let mut ready = Vec::new();
            let _ = sys::poll_readable(&[self.upcall.rx_fd()], 10, &mut ready);
        }
        let after = self.fp.counters();
        debug(|| {
            format!(
                "tc: counters {before:?} -> {after:?}, drops {:?}, out {out:02x?}, up {}",
                self.fp.drops(),
                up.len()
            )
        });
        let hits = after[0] - before[0];
        // The fence went up too.
        let upcalls = after[2] - before[2] - 1;
        match (hits, upcalls) {
            (0, 0) => TcRun::Unseen,
            (1, 0) => TcRun::Decided(out),
            (0, 1) => {
                assert!(out.is_empty(), "tc sent {frame:02x?} up and out: {out:02x?}");
                TcRun::Deferred(up)
            }
            _ => panic!("one frame, {hits} hits and {upcalls} upcalls: {frame:02x?}"),
        }
    }
}

/// Frames the kernel sent out of ports: (port, frame).
type Outputs = Vec<(u32, Vec<u8>)>;

enum TcRun {
    /// The stack dropped it before TC (a tag cut short, say).
    Unseen,
    /// Sent up: what arrived at the upcall link.
    Deferred(Vec<Vec<u8>>),
    /// Decided by the kernel: what it sent out of which port.
    Decided(Outputs),
}

/// A frame with a VLAN tag the kernel held in metadata put back where the frame carries it.
fn with_tag(data: &[u8], vlan: Option<(u16, u16)>) -> Vec<u8> {
    let mut f = data.to_vec();
    if let Some((tpid, tci)) = vlan {
        if f.len() >= 12 {
            f.splice(12..12, tpid.to_be_bytes().into_iter().chain(tci.to_be_bytes()));
        }
    }
    f
}

/// Four tags: more than the kernel parses (two, and one in metadata), so it always goes up.
fn fence() -> Vec<u8> {
    let mut b = FrameBuilder::new([2, 0, 0, 0, 0, 0xfe], [2, 0, 0, 0, 0, 0xfe]);
    for _ in 0..4 {
        b = b.vlan(0x8100, 0xffe);
    }
    b.build(L3::Ipv4 {
        src: [10, 9, 9, 9],
        dst: [10, 9, 9, 9],
        ttl: 9,
        tos: 0,
        l4: L4::Udp { src: 9, dst: 9, payload: vec![0xfe; 8] },
    })
}

#[allow(dead_code)]
fn differential(data: &[u8]) {
    if !ebpf::test_may_load_programs("the differential fast-path check") {
        return;
    }
    RIG.with(|cell| {
        let mut slot = cell.borrow_mut();
        let rig = slot.get_or_insert_with(Rig::new);
        rig.fp.flush();
        rig.fp.sweep();
        rig.meter_slots.clear();
        run(rig, &mut Choices(data));
    });
}

/// A frame's userspace meters: the pipeline's (never charged: translation leaves drop meters to
/// the actions), copied, so that each frame finds them full.
fn fresh_meters(p: &Pipeline, n: u8) -> MeterTable {
    let mut t = MeterTable::default();
    for id in 1..=n as u32 {
        if let Some(m) = p.meter(id) {
            t.meters.insert(id, m.clone());
        }
    }
    t
}

fn run(rig: &mut Rig, c: &mut Choices) {
    let head = c.byte();
    let mode = if head & 1 == 1 { Mode::Tc } else { Mode::Xdp };
    let (n_meters, n_groups) = (head >> 4 & 3, head >> 6);
    let mut p = Pipeline::new(TABLES);
    for no in 1..=PORTS {
        let down = no > 1 && head >> (no - 1) & 1 == 1;
        p.set_port(no, PortView { config: 0, state: if down { state::LINK_DOWN } else { state::LIVE } });
    }
    for id in 1..=n_meters as u32 {
        let mm = random_meter(c, id);
        let added = p.meter_mod(&mm, 0);
        debug(|| format!("meter-mod {mm:?} -> {:?}", added.map(|_| ())));
    }
    for id in 1..=n_groups as u32 {
        let gm = random_group(c, id);
        let added = p.group_mod(&gm, 0);
        debug(|| format!("group-mod {gm:?} -> {:?}", added.map(|_| ())));
    }
    for _ in 0..1 + c.below(6) {
        let fm = random_flow(c, n_groups, n_meters);
        let added = p.flow_mod(&fm, 0);
        debug(|| {
            format!(
                "flow-mod table {} priority {} {:?} {:?} -> {:?}",
                fm.table_id,
                fm.priority,
                fm.match_,
                fm.instructions,
                added.map(|_| ())
            )
        });
    }
    debug(|| format!("mode {mode:?}, ports {:?}", (1..=PORTS).map(|n| p.has_port(n)).collect::<Vec<_>>()));
    let ifindexes = rig.ifindexes.clone();
    let ifindex = |port: u32| port.checked_sub(1).and_then(|i| ifindexes.get(i as usize).copied());
    let mut seen = Vec::new();
    for n in 0..1 + c.below(6) {
        let frame = random_frame(c);
        let mut sent = Sent { frames: Vec::new(), to_controller: 0 };
        let Ok((key, layout)) = parse(&frame, 1) else {
            debug(|| format!("frame {n} {frame:02x?}: malformed"));
            let none = Userspace {
                frame,
                parsed: false,
                sent,
                installed: None,
                grouped: false,
                multi_table: false,
                meter_dropped: false,
            };
            seen.push(none);
            continue;
        };
        let pkt = Packet::new(&frame, Offload::default(), layout);
        let t = p.translate(&pkt, &key, 0);
        let mut out = Packet::new(&frame, Offload::default(), layout);
        let stopped = execute(&t.actions, &mut out, &mut fresh_meters(&p, n_meters), 0, &mut sent);
        debug(|| {
            format!(
                "frame {n} {frame:02x?}: actions {:?}, consulted {:?}, cacheable {}, stopped {stopped:?}, sent {:?}",
                t.actions, t.consulted, t.cacheable, sent.frames
            )
        });
        let mut installed = None;
        if t.cacheable {
            // As the switch offers it (datapath/src/switch/fastsync.rs): a kernel slot for each
            // meter the kernel can run, then the entry if the kernel can carry it out.
            let mut slots = BTreeMap::new();
            for a in &t.actions {
                if let DpAction::Meter(m) = a {
                    if let Some(slot) = p.meter(*m).and_then(|meter| rig.fp.meter_slot(*m, meter)) {
                        slots.insert(*m, slot);
                        if !rig.meter_slots.iter().any(|&(id, _)| id == *m) {
                            rig.meter_slots.push((*m, slot));
                        }
                    }
                }
            }
            let mut meter_slot = |m: u32| slots.get(&m).copied();
            let mut cx =
                EncodeContext { mode, ifindex: &ifindex, meter_slot: &mut meter_slot, ip_proto: key.ip_proto() };
            let ports = actions_outputs(&t.actions);
            let outputs: Vec<(u32, u8)> = ports.iter().map(|&p| (p, 0)).collect();
            if rig.fp.install(RuleId(n as u32), &key, &t.consulted, &t.actions, &t.credits, &outputs, &mut cx) {
                installed = Some(ports);
            }
        }
        debug(|| format!("frame {n}: in the kernel: {installed:?}"));
        seen.push(Userspace {
            frame,
            parsed: true,
            sent,
            installed,
            grouped: !t.credits.groups.is_empty(),
            multi_table: t.credits.tables.len() > 1,
            meter_dropped: stopped == Err(pipeline::exec::Stop::Meter),
        });
    }
    for u in &seen {
        if mode == Mode::Xdp {
            rig.refill_meters(&p);
            compare_xdp(rig, u, &seen);
        }
        rig.refill_meters(&p);
        compare_tc(rig, u);
    }
}

/// A frame the kernel dropped at `hook` must be one userspace parsed and sent nowhere (a
/// malformed one is userspace's to count).
fn userspace_dropped_too(hook: &str, u: &Userspace) {
    assert!(
        u.parsed && u.sent.frames.is_empty() && u.sent.to_controller == 0,
        "{hook} dropped what userspace {}: {:02x?} -> {:02x?}",
        if u.parsed { "sent" } else { "calls malformed" },
        u.frame,
        u.sent.frames
    );
}

fn tagged(f: &[u8]) -> bool {
    f.len() >= 14 && matches!(u16::from_be_bytes([f[12], f[13]]), 0x8100 | 0x88a8)
}

/// Counts what a frame the kernel decided went through.
fn count_features(u: &Userspace) {
    let ipv6 = parse(&u.frame, 1).is_ok_and(|(k, _)| k.eth_type() == 0x86dd);
    let tagged = tagged(&u.frame) || u.sent.frames.iter().any(|(_, f)| tagged(f));
    count(|t| {
        t.tagged += tagged as u64;
        t.ipv6 += ipv6 as u64;
        t.grouped += u.grouped as u64;
        t.multi_table += u.multi_table as u64;
    });
}

/// XDP's verdict on one frame (a test run) against what userspace did with it. The kernel may
/// always leave a frame to userspace (XDP_PASS); what it decides itself must be what userspace
/// decided: a drop, or the one frame out of the same port.
fn compare_xdp(rig: &mut Rig, u: &Userspace, seen: &[Userspace]) {
    let _ = rig.fp.harvest(0);
    let meter_drops = rig.fp.drops()[1].1;
    let (verdict, out) = rig.fp.run_once(Mode::Xdp, &u.frame, LOOPBACK).expect("xdp test run");
    match verdict {
        XDP_PASS => {
            assert_eq!(out, u.frame, "xdp sent up a frame it changed");
            count(|t| t.xdp_passed += 1);
        }
        XDP_DROP => {
            userspace_dropped_too("xdp", u);
            count_features(u);
            let by_meter = rig.fp.drops()[1].1 > meter_drops;
            assert!(!by_meter || u.meter_dropped, "xdp's meter dropped what userspace's passed: {:02x?}", u.frame);
            count(|t| {
                t.xdp_dropped += 1;
                t.metered_drops += by_meter as u64;
            });
        }
        XDP_REDIRECT => {
            let ([(port, want)], 0) = (&u.sent.frames[..], u.sent.to_controller) else {
                panic!("xdp forwarded what userspace did not send once: {:02x?} -> {:02x?}", u.frame, u.sent.frames)
            };
            assert_eq!(&out, want, "xdp and userspace wrote different frames from {:02x?}", u.frame);
            // The port: the one the entry it hit sends to.
            let hits: Vec<RuleId> = rig.fp.harvest(0).flows.iter().map(|f| f.0).collect();
            let [RuleId(by)] = hits[..] else { panic!("one xdp hit, entries {hits:?} counted it") };
            let to = seen[by as usize].installed.as_deref().expect("a hit is on an installed entry");
            assert_eq!(to, [*port], "xdp sent {:02x?} out of another port than userspace", u.frame);
            count_features(u);
            count(|t| t.xdp_forwarded += 1);
        }
        v => panic!("xdp verdict {v} on {:02x?}", u.frame),
    }
}

/// TC's verdict on one frame (sent into port 1 for real): what it decided itself must be what
/// userspace decided, every frame out of every port in order.
fn compare_tc(rig: &mut Rig, u: &Userspace) {
    let meter_drops = rig.fp.drops()[1].1;
    match rig.run_tc(&u.frame) {
        TcRun::Unseen => count(|t| t.tc_unseen += 1),
        TcRun::Deferred(up) => {
            assert_eq!(up, std::slice::from_ref(&u.frame), "tc sent up something else than the frame");
            count(|t| t.tc_deferred += 1);
        }
        TcRun::Decided(out) if out.is_empty() => {
            userspace_dropped_too("tc", u);
            count_features(u);
            let by_meter = rig.fp.drops()[1].1 > meter_drops;
            assert!(!by_meter || u.meter_dropped, "tc's meter dropped what userspace's passed: {:02x?}", u.frame);
            count(|t| {
                t.tc_dropped += 1;
                t.metered_drops += by_meter as u64;
            });
        }
        TcRun::Decided(out) => {
            assert_eq!(u.sent.to_controller, 0, "tc forwarded what userspace sent to the controller: {:02x?}", u.frame);
            let by_port = |frames: &[(u32, Vec<u8>)]| {
                let mut m: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
                for (port, f) in frames {
                    m.entry(*port).or_default().push(f.clone());
                }
                m
            };
            assert_eq!(
                by_port(&out),
                by_port(&u.sent.frames),
                "tc and userspace sent different frames from {:02x?}",
                u.frame
            );
            count_features(u);
            count(|t| {
                t.tc_forwarded += 1;
                t.tc_copies += (out.len() > 1) as u64;
            });
        }
    }
}
