//! A P4 program as the forwarding mode (`mode = "p4"`, docs/p4.md): the software target of the
//! `p4` crate decides every frame, and what its tables and multicast groups hold at start comes
//! from the configuration. Each copy the program sends leaves on its egress port, in the queue
//! the program chose (`standard_metadata.priority`), which the port's scheduler serves.
//!
//! On tc and xdp the mode hands the kernel the program itself ([`ToKernel::p4`]): the datapath
//! compiles it where it fits (`p4::backends::ebpf`), mirrors the tables, and the frames the kernel cannot
//! decide come up here. What the kernel counted comes back through [`FromKernel::P4Counts`].

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

pub use ::p4::backends::software::Digest;
pub use ::p4::backends::software::Match;
use ::p4::backends::software::{Dropped, Switch};
use ::p4::info::Info;
use packet::{FlowKey, Packet};

use crate::kernel::{FromKernel, ToKernel};
use crate::{CounterGroup, DropReason, Egress, Mode, Nanos, Output, PortView, Verdict};

/// A table entry the configuration puts in at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// `Block.table`.
    pub table: String,
    pub keys: Vec<Match>,
    pub action: String,
    pub args: Vec<u128>,
    pub priority: i64,
    /// Its cell of the table's direct meter: committed rate, burst, peak rate, burst.
    pub meter: Option<[u64; 4]>,
}

/// The program, its source, and what its tables and groups hold at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The file the source was read from (what errors name).
    pub file: String,
    pub source: String,
    pub entries: Vec<Entry>,
    /// Multicast group id → its ports.
    pub groups: Vec<(u16, Vec<u32>)>,
    /// Meter cells set at start: (`Block.meter`, index, [committed rate, burst, peak rate, burst]).
    pub meters: Vec<(String, usize, [u64; 4])>,
    /// Value sets' members at start: (`Parser.set`, its members, each one match per field).
    pub value_sets: Vec<(String, Vec<Vec<Match>>)>,
    /// The kernel back end's object compiled elsewhere (`[p4] object`, from `edgeflow p4 compile
    /// -o`), which the datapath loads instead of compiling the program: a device needs no clang.
    pub object: Option<Vec<u8>>,
    /// The port number that is the control plane (`[p4] cpu_port`, BMv2's `--cpu-port`): a copy
    /// the program sends there goes to the P4Runtime controllers as a packet-in, and a
    /// packet-out enters the program on it. No switch port has it.
    pub cpu_port: Option<u32>,
}

/// What the program sends the control plane, with the program's control-plane view (P4Info's
/// source) as of when it was sent: the program may be replaced while it waits.
pub enum ToController {
    /// A copy sent to the CPU port, as the deparser wrote it (the packet_in header first).
    PacketIn(Arc<Info>, Vec<u8>),
    Digest(Arc<Info>, Digest),
}

/// Where [`ToController`] goes (P4Runtime's server); called on the forwarding thread, so it
/// must not block.
pub type ControllerSink = Box<dyn FnMut(ToController) + Send>;

/// Packet-outs that may wait for the forwarding thread: more are refused.
pub const PACKET_OUT_QUEUE: usize = 256;

/// Why a configuration cannot run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// The program does not compile (file:line:column: what).
    Program(String),
    /// Entry number `.0` of [`Config::entries`] does not fit the program.
    Entry(usize, String),
    /// Meter setting number `.0` of [`Config::meters`] does not fit the program.
    Meter(usize, String),
    /// Value set setting number `.0` of [`Config::value_sets`] does not fit the program.
    ValueSet(usize, String),
}

pub struct P4Mode {
    switch: Switch,
    /// Each copy is loaded here to be sent.
    copy: Packet,
    frames: u64,
    copies: u64,
    /// Of `frames`, those the kernel decided (`FromKernel::P4Counts`).
    kernel_frames: u64,
    dropped: BTreeMap<&'static str, u64>,
    /// [`Config::object`].
    object: Option<Vec<u8>>,
    cpu_port: Option<u32>,
    controller: Option<ControllerSink>,
    /// Packet-outs waiting to enter the program on the CPU port (run at the next tick).
    packet_outs: VecDeque<Vec<u8>>,
    packet_ins: u64,
    digests: u64,
    packet_outs_run: u64,
}

impl P4Mode {
    /// The program's state: tables, externs, groups (P4Runtime's way in).
    pub fn switch_mut(&mut self) -> &mut Switch {
        &mut self.switch
    }

    /// Sends packet-ins and digests to `sink` from now on (none: they are dropped).
    pub fn set_controller(&mut self, sink: Option<ControllerSink>) {
        self.controller = sink;
    }

    /// A packet-out: `frame` (its packet_out header first) enters the program on the CPU port
    /// at the next tick, its copies sent as any frame's. Refused without a CPU port, or with
    /// [`PACKET_OUT_QUEUE`] waiting.
    pub fn packet_out(&mut self, frame: Vec<u8>) -> Result<(), String> {
        if self.cpu_port.is_none() {
            return Err("the switch has no CPU port ([p4] cpu_port in its configuration)".into());
        }
        if self.packet_outs.len() >= PACKET_OUT_QUEUE {
            return Err(format!("{PACKET_OUT_QUEUE} packet-outs wait already"));
        }
        self.packet_outs.push_back(frame);
        Ok(())
    }

    /// Runs `frame`, arrived on `in_port`, through the program: its copies for the CPU port go
    /// to the controller, the others to `send`; its digests to the controller.
    fn run(
        &mut self,
        frame: &[u8],
        in_port: u32,
        now: Nanos,
        mut send: impl FnMut(&mut Self, ::p4::backends::software::Output),
    ) -> Result<(), Dropped> {
        let result = self.switch.process(frame, in_port, now);
        let digests = self.switch.take_digests();
        if let Some(sink) = self.controller.as_mut() {
            let info = self.switch.info();
            for d in digests {
                self.digests += 1;
                sink(ToController::Digest(info.clone(), d));
            }
        }
        for c in result? {
            if Some(c.port) == self.cpu_port {
                if let Some(sink) = self.controller.as_mut() {
                    self.packet_ins += 1;
                    sink(ToController::PacketIn(self.switch.info(), c.frame));
                }
                continue;
            }
            send(self, c);
        }
        Ok(())
    }

    pub fn new(cfg: &Config) -> Result<P4Mode, ConfigError> {
        let (program, checked) = ::p4::front_end(&cfg.file, &cfg.source).map_err(ConfigError::Program)?;
        let mut switch = Switch::new(program, checked).map_err(ConfigError::Program)?;
        for (i, e) in cfg.entries.iter().enumerate() {
            switch
                .insert(&e.table, e.keys.clone(), &e.action, e.args.clone(), e.priority)
                .and_then(|()| {
                    e.meter.map_or(Ok(()), |rates| switch.set_entry_meter(&e.table, &e.keys, e.priority, rates))
                })
                .map_err(|m| ConfigError::Entry(i, m))?;
        }
        for (id, ports) in &cfg.groups {
            switch.set_group(*id, ports.clone());
        }
        for (i, (name, index, [cir, cburst, pir, pburst])) in cfg.meters.iter().enumerate() {
            switch.set_meter(name, *index, *cir, *cburst, *pir, *pburst).map_err(|m| ConfigError::Meter(i, m))?;
        }
        for (i, (name, members)) in cfg.value_sets.iter().enumerate() {
            switch.set_value_set(name, members.clone()).map_err(|m| ConfigError::ValueSet(i, m))?;
        }
        Ok(P4Mode {
            switch,
            copy: Packet::with_capacity(2048),
            frames: 0,
            copies: 0,
            kernel_frames: 0,
            dropped: BTreeMap::new(),
            object: cfg.object.clone(),
            cpu_port: cfg.cpu_port,
            controller: None,
            packet_outs: VecDeque::new(),
            packet_ins: 0,
            digests: 0,
            packet_outs_run: 0,
        })
    }
}

impl P4Mode {
    fn transmit(&mut self, c: ::p4::backends::software::Output, offload: packet::Offload, out: &mut dyn Output) {
        let layout = packet::parse(&c.frame, 0).map(|(_, l)| l).unwrap_or_default();
        self.copy.load(&c.frame, offload, layout);
        self.copies += 1;
        out.transmit(Egress { port: c.port, queue: Some(c.queue as u32) }, &self.copy);
    }

    fn count_drop(&mut self, why: Dropped) -> DropReason {
        let (name, reason) = match why {
            Dropped::Parser(_) => ("parser_rejected", DropReason::Filtered),
            Dropped::Program => ("program_dropped", DropReason::NoAction),
            Dropped::NoPort => ("no_egress_port", DropReason::NoAction),
            Dropped::Unsupported(_) => ("unsupported", DropReason::NoAction),
        };
        *self.dropped.entry(name).or_default() += 1;
        reason
    }
}

impl Mode for P4Mode {
    fn name(&self) -> &'static str {
        "p4"
    }

    fn port_changed(&mut self, _port: u32, _view: Option<PortView>) {}

    fn receive(&mut self, pkt: &mut Packet, key: &FlowKey, now: Nanos, out: &mut dyn Output) -> Verdict {
        self.frames += 1;
        let (len, offload) = (pkt.len(), pkt.offload);
        let ran = self.run(pkt.data(), key.in_port(), now, |mode, c| {
            // The receive offloads (a partial checksum, GSO) still describe a copy of the same
            // length: its headers kept their places.
            let offload = if c.frame.len() == len { offload } else { Default::default() };
            mode.transmit(c, offload, out);
        });
        match ran {
            Ok(()) => Verdict { dropped: None, entry: None },
            Err(why) => Verdict { dropped: Some(self.count_drop(why)), entry: None },
        }
    }

    fn next_deadline(&self) -> Option<Nanos> {
        (!self.packet_outs.is_empty()).then_some(0)
    }

    /// Runs the packet-outs waiting: each enters the program on the CPU port.
    fn tick(&mut self, now: Nanos, out: &mut dyn Output) {
        let Some(cpu_port) = self.cpu_port else { return };
        while let Some(frame) = self.packet_outs.pop_front() {
            self.packet_outs_run += 1;
            if let Err(why) = self.run(&frame, cpu_port, now, |mode, c| mode.transmit(c, Default::default(), out)) {
                self.count_drop(why);
            }
        }
    }

    fn generation(&self) -> u64 {
        0
    }

    /// The control protocol `edgeflow p4` speaks, one request per call, numbers in hex:
    /// `tables`; `entries TABLE`; `counter NAME INDEX`; `insert|delete TABLE ACTION PRIORITY
    /// MATCH... [-- DATA...]` where a MATCH is `exact:V`, `lpm:V/LEN`, `ternary:V&M`,
    /// `range:A-B` or `any` (delete ignores the action and data). The three that read are
    /// [`crate::CONTROL_READS`].
    fn control(&mut self, request: &str) -> Option<Result<String, String>> {
        Some(control(&mut self.switch, request))
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }

    fn kernel(&self) -> ToKernel<'_> {
        ToKernel { p4: Some(&self.switch), p4_object: self.object.as_deref(), ..Default::default() }
    }

    fn take_back(&mut self, from: FromKernel<'_>) {
        let FromKernel::P4Counts(c) = from else { return };
        for (table, index, packets, bytes) in &c.entries {
            self.switch.credit_entry(table, *index, *packets, *bytes);
        }
        for (name, index, packets, bytes) in &c.counters {
            self.switch.credit_counter(name, *index, *packets, *bytes);
        }
        for (name, index, value) in &c.registers {
            self.switch.load_register(name, *index, *value);
        }
        let decided = c.forwarded + c.dropped.iter().map(|d| d.1).sum::<u64>();
        self.frames += decided;
        self.kernel_frames += decided;
        self.copies += c.copies;
        for &(name, n) in &c.dropped {
            *self.dropped.entry(name).or_default() += n;
        }
    }

    fn counters(&self) -> Vec<CounterGroup> {
        let mut counters =
            vec![("frames", self.frames), ("copies", self.copies), ("kernel_frames", self.kernel_frames)];
        counters.extend([
            ("packet_ins", self.packet_ins),
            ("packet_outs", self.packet_outs_run),
            ("digests", self.digests),
        ]);
        for name in ["parser_rejected", "program_dropped", "no_egress_port", "unsupported"] {
            counters.push((name, self.dropped.get(name).copied().unwrap_or(0)));
        }
        vec![CounterGroup { name: "p4".into(), counters }]
    }
}

fn hex(s: &str) -> Result<u128, String> {
    u128::from_str_radix(s, 16).map_err(|_| format!("'{s}': not a hex number"))
}

/// A match as the control protocol writes it.
pub fn match_text(m: &Match) -> String {
    match m {
        Match::Exact(v) => format!("exact:{v:x}"),
        Match::Lpm { value, prefix } => format!("lpm:{value:x}/{prefix}"),
        Match::Ternary { value, mask } => format!("ternary:{value:x}&{mask:x}"),
        Match::Range { low, high } => format!("range:{low:x}-{high:x}"),
        Match::Any => "any".into(),
    }
}

fn parse_match(s: &str) -> Result<Match, String> {
    let (kind, v) = s.split_once(':').unwrap_or((s, ""));
    let pair = |sep: char| v.split_once(sep).ok_or_else(|| format!("'{s}': expected {kind}:A{sep}B"));
    Ok(match kind {
        "exact" => Match::Exact(hex(v)?),
        "lpm" => {
            let (a, b) = pair('/')?;
            Match::Lpm { value: hex(a)?, prefix: b.parse().map_err(|_| format!("'{s}': the prefix length"))? }
        }
        "ternary" => {
            let (a, b) = pair('&')?;
            Match::Ternary { value: hex(a)?, mask: hex(b)? }
        }
        "range" => {
            let (a, b) = pair('-')?;
            Match::Range { low: hex(a)?, high: hex(b)? }
        }
        "any" => Match::Any,
        _ => return Err(format!("'{s}': expected exact:, lpm:, ternary:, range: or any")),
    })
}

fn control(switch: &mut Switch, request: &str) -> Result<String, String> {
    let words: Vec<&str> = request.split_whitespace().collect();
    match words.as_slice() {
        ["tables"] => Ok(switch.tables().join("\n")),
        ["entries", table] => {
            let entries = switch.entries(table).ok_or_else(|| format!("no table '{table}'"))?;
            Ok(entries
                .iter()
                .map(|e| {
                    let keys: Vec<String> = e.keys.iter().map(match_text).collect();
                    let args: Vec<String> = e.args.iter().map(|a| format!("{a:x}")).collect();
                    // An entry of a table with an action profile names a member or group.
                    let action = match &e.indirect {
                        Some(to) => format!("{to:?}"),
                        None => format!("{}({})", e.action, args.join(", ")),
                    };
                    format!(
                        "{} {action} priority={} packets={} bytes={}",
                        keys.join(" "),
                        e.priority,
                        e.packets,
                        e.bytes
                    )
                })
                .collect::<Vec<_>>()
                .join("\n"))
        }
        ["counter", name, index] => {
            let i = index.parse().map_err(|_| format!("'{index}': not an index"))?;
            let (packets, bytes) =
                switch.counter(name, i).ok_or_else(|| format!("no counter '{name}' with a cell {i}"))?;
            Ok(format!("packets={packets} bytes={bytes}"))
        }
        [op @ ("insert" | "delete"), table, action, priority, rest @ ..] => {
            let priority: i64 = priority.parse().map_err(|_| format!("'{priority}': not a priority"))?;
            let split = rest.iter().position(|w| *w == "--").unwrap_or(rest.len());
            let keys = rest[..split].iter().map(|k| parse_match(k)).collect::<Result<Vec<_>, _>>()?;
            let args = rest.get(split + 1..).unwrap_or(&[]).iter().map(|a| hex(a)).collect::<Result<Vec<_>, _>>()?;
            match *op {
                "insert" => switch.insert(table, keys, action, args, priority)?,
                _ => switch.delete(table, &keys, priority)?,
            }
            Ok(format!("{op}ed"))
        }
        _ => Err(format!("'{request}': expected tables, entries, counter, insert or delete")),
    }
}

/// The paper's AFDX switch as a P4 program (`examples/p4/afdx_switch.p4`) against edgeflow's own
/// AFDX mode: the same links, the same frames at the same times, the same verdicts (issue 36,
/// item 6).
#[cfg(all(test, feature = "afdx"))]
mod tests {
    use super::*;
    use crate::afdx::{
        end_system_mac, vl_mac, AfdxMode, Police, Priority, VirtualLink, DEFAULT_MAC_CONSTANT, HIGH_QUEUE, LOW_QUEUE,
        NETWORK_A, NETWORK_B,
    };
    use crate::Event;
    use packet::craft::udp4;
    use packet::Offload;

    /// Where each copy of a frame went: (port, queue).
    #[derive(Default)]
    struct Sent(Vec<(u32, Option<u32>)>);

    impl Output for Sent {
        fn transmit(&mut self, egress: Egress, _pkt: &Packet) {
            self.0.push((egress.port, egress.queue));
        }
        fn event(&mut self, _: Event) {}
    }

    /// A verdict as both modes can state it: dropped, or the copies sent.
    fn run(mode: &mut dyn Mode, frame: &[u8], in_port: u32, now: Nanos) -> Option<Vec<(u32, Option<u32>)>> {
        let (key, layout) = packet::parse(frame, in_port).unwrap();
        let mut pkt = Packet::new(frame, Offload::default(), layout);
        let mut sent = Sent::default();
        let v = mode.receive(&mut pkt, &key, now, &mut sent);
        let mut copies = sent.0;
        copies.sort();
        v.dropped.is_none().then_some(copies)
    }

    #[test]
    fn the_afdx_program_gives_the_afdx_modes_verdicts() {
        let link = |id, in_port, out_ports: Vec<u32>, bag_ms: u64, smin, smax, jitter_us: u64, priority| VirtualLink {
            id,
            in_port,
            out_ports,
            bag_ns: bag_ms * 1_000_000,
            smin,
            smax,
            jitter_ns: jitter_us * 1000,
            priority,
            police: Police::Frame,
            account: None,
            ip_check: false,
        };
        let vls = vec![
            link(5, 1, vec![2, 3], 1, 64, 300, 200, Priority::High),
            link(6, 2, vec![1], 2, 100, 1518, 500, Priority::Low),
        ];
        let mut native = AfdxMode::new(&vls, DEFAULT_MAC_CONSTANT).unwrap();
        let entry = |vl: &VirtualLink, group: u16, queue: u32, account: u128| Entry {
            table: "AfdxIngress.tbl_forward_virtual_link".into(),
            keys: vec![Match::Exact(vl.in_port as u128), Match::Exact(vl.id as u128)],
            action: "forward".into(),
            args: vec![
                group as u128,
                queue as u128,
                account,
                (vl.bag_ns / 1000) as u128,
                (vl.jitter_ns / 1000) as u128,
                vl.smin as u128,
                vl.smax as u128,
            ],
            priority: 0,
            meter: None,
        };
        let cfg = Config {
            file: "afdx_switch.p4".into(),
            source: include_str!("../../../examples/p4/afdx_switch.p4").into(),
            entries: vec![entry(&vls[0], 1, HIGH_QUEUE, 0), entry(&vls[1], 2, LOW_QUEUE, 1)],
            groups: vec![(1, vec![2, 3]), (2, vec![1])],
            meters: vec![],
            value_sets: vec![],
            object: None,
            cpu_port: None,
        };
        let mut p4 = P4Mode::new(&cfg).unwrap();

        // Frames of both links and of none, mostly conforming, some early (policed), some on the
        // wrong port, too short or too long, from a source not in the end-system format, to
        // another constant field, or not IPv4; in bursts (under 0.4 ms apart) and pauses (up to
        // 3 ms).
        let mut seed: u64 = 0x5eed;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let (mut now, mut forwarded, mut dropped) = (0u64, 0, 0);
        for i in 0..3000 {
            // Bursts and pauses, so that the jitter's allowance is both spent and refilled.
            now += if next(2) == 0 { next(400_000) } else { next(3_000_000) };
            let vl = [5u16, 6, 7][next(3) as usize];
            let in_port = match (vl, next(10)) {
                (_, 0) => 3,
                (6, _) => 2,
                _ => 1,
            };
            let src = match next(20) {
                0 => [3, 0, 0, 0, 1, 0x20],
                1 => [2, 0, 0, 0, 1, 0x21],
                2 => [2, 0, 0, 0, 1, 0x60],
                3 => [2, 1, 0, 0, 1, 0x20],
                _ => end_system_mac(next(300) as u16, if next(2) == 0 { NETWORK_A } else { NETWORK_B }),
            };
            let constant = if next(30) == 0 { 0x0400_0000 } else { DEFAULT_MAC_CONSTANT };
            let len = 56 + next(1480) as usize;
            let mut frame = udp4(src, vl_mac(constant, vl), [10, 0, 0, 1], [224, 224, 0, vl as u8], 4000, 9, len);
            if next(40) == 0 {
                frame[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
            }
            let want = run(&mut native, &frame, in_port, now);
            let got = run(&mut p4, &frame, in_port, now);
            assert_eq!(
                got,
                want,
                "frame {i}: VL {vl} on port {in_port}, {} bytes, from {src:02x?} at {now} ns",
                frame.len()
            );
            match want {
                Some(_) => forwarded += 1,
                None => dropped += 1,
            }
        }
        assert!(
            forwarded > 300 && dropped > 300,
            "both kinds of verdict exercised: {forwarded} forwarded, {dropped} dropped"
        );
        let policed = native
            .counters()
            .iter()
            .flat_map(|g| g.counters.clone())
            .filter(|(n, _)| *n == "policed")
            .map(|(_, v)| v)
            .sum::<u64>();
        assert!(policed > 50, "policing exercised: {policed}");
    }
}
