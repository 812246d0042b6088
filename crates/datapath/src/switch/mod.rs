//! The switch: ports, the forwarding thread's loop, and the controller-facing requests about
//! ports, queues and the switch itself. What a frame's fate is belongs to the forwarding mode
//! (`forwarding::Mode`); this module moves frames and keeps the books.
//!
//! - `ports`: the switch's ports, their counters, link changes, port-mod, and [`ports::Transmit`],
//!   where a mode's egress descriptors become frames on egress queues.
//! - `event_loop`: the forwarding thread: wait for frames, commands, link events and the next
//!   deadline; receive; run commands.
//! - `control`: OpenFlow requests the switch answers itself; the rest go to the mode.
//! - `fastsync`: keeping the kernel fast path in step with the mode.

mod control;
mod event_loop;
mod fastsync;
mod ports;
mod reconfig;
mod report;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::Instant;

use forwarding::{DropReason, Mode, PortView};
use ofp::message::*;
use ofp::port::OFPP_LOCAL;
use packet::Packet;
use tracing::warn;

use crate::afpacket::{self, RingConfig};
use crate::fastpath::{FastPath, Mode as FastMode, Programs};
use crate::netlink::LinkMonitor;
use crate::sys::EventFd;
use crate::tap;
use crate::{ChannelCounters, Command, Event, PortRx};
pub use ports::PortIo;
use ports::{PortGuard, SwitchPort};

pub use forwarding::openflow::N_BUFFERS;
pub use report::{
    arm_test_panic, set_log_control, slave_may_send, LogControl, EXPERIMENTER, KERNEL_DUMP, LOG_FILTER, MODE_CONTROL,
    STATS_REPORT, TEST_PANIC,
};

#[derive(Clone, Debug)]
pub struct SwitchConfig {
    pub dpid: u64,
    /// Flow tables, as the features reply reports them.
    pub n_tables: u8,
    /// OpenFlow port number and interface name.
    pub ports: Vec<(u32, String)>,
    /// Name of a tap interface to create as the LOCAL port.
    pub local_port: Option<String>,
    /// Every port's rings; `None`: each port's sized for its link ([`RingConfig::for_link`]).
    pub ring: Option<RingConfig>,
    /// How ports move their frames (`--io`, `io`): AF_PACKET or AF_XDP. AF_XDP only with the
    /// userspace datapath: the xdp fast path and an AF_XDP port both want the port's XDP hook.
    pub io: PortIo,
    /// Ports that move theirs otherwise (`[[port]] io`).
    pub port_io: Vec<(u32, PortIo)>,
    pub dp_desc: String,
    /// The kernel fast path to mirror the mode's decisions into (`None`: userspace only).
    pub fastpath: Option<crate::fastpath::Mode>,
    /// The kernel fast path's capacity in translations.
    pub fastpath_entries: u32,
    /// Per port: pacing, queue schedulers and limits.
    pub egress: Vec<(u32, crate::egress::PortEgress)>,
    /// How the forwarding thread waits for a scheduled frame's time.
    pub timing: Timing,
    /// How the forwarding thread waits for frames.
    pub poll: Poll,
    /// The CPU to pin the forwarding thread to (with busy timing: a core of its own).
    pub cpu: Option<usize>,
    /// Keep the kernel fast path forwarding when the daemon stops, for the next run to take over.
    pub keep_fastpath: bool,
    /// Whether a controller gives the mode its state (flows) after a restart: the entries a kept
    /// fast path inherited then forward until its first barrier.
    pub awaits_controller: bool,
}

/// Why AF_XDP ports and the TC fast path do not go together. (The XDP fast path's own program
/// sends up into the sockets.)
pub const AF_XDP_NOT_UNDER_TC: &str = "AF_XDP ports (io af_xdp) need datapath user or xdp, not tc: an \
     AF_XDP socket takes frames from an XDP program only, which runs before TC, so the tc fast \
     path would see none of a port whose frames go to its socket (with datapath xdp the fast \
     path's own program sends up into the socket what it does not forward)";

/// Why AF_XDP ports and a P4 program in the kernel do not go together.
pub const AF_XDP_NOT_UNDER_P4: &str = "AF_XDP ports (io af_xdp) with a P4 program in the kernel: the P4 \
     program sends its frames up to the stack, not into AF_XDP sockets; use io af_packet, or \
     datapath user";

impl SwitchConfig {
    /// How port `no` moves its frames.
    pub fn io_of(&self, no: u32) -> PortIo {
        self.port_io.iter().find(|(n, _)| *n == no).map_or(self.io, |&(_, io)| io)
    }
}

/// How the forwarding thread waits for frames (`--poll`, `poll`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Poll {
    /// Sleeps in poll(2) until a port has frames: a frame waits for the thread to wake, ~15 µs
    /// here (a veth's softirq, the wake-up, the scheduler), and an idle switch costs nothing.
    #[default]
    Wait,
    /// Never sleeps: the thread asks every ring again as soon as it is done, so a frame waits only
    /// for the turn in progress. A core stays busy for it (`egress_cpu` pins it to one).
    Busy,
}

impl std::str::FromStr for Poll {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "wait" => Ok(Poll::Wait),
            "busy" => Ok(Poll::Busy),
            other => Err(format!("'{other}': expected wait or busy")),
        }
    }
}

impl Poll {
    pub fn name(self) -> &'static str {
        match self {
            Poll::Wait => "wait",
            Poll::Busy => "busy",
        }
    }
}

/// How the forwarding thread meets a scheduled port's deadlines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Timing {
    /// Sleeps in poll until the deadline (late by ~90 µs median, ms at p99 under SCHED_OTHER).
    #[default]
    Sleep,
    /// The same at SCHED_FIFO priority (late by 30–40 µs median, ~70 µs p99).
    Fifo,
    /// Sleeps until a deadline is near, then polls the clock (late by ~0.3 µs p99; a core spins).
    Busy,
}

impl Timing {
    /// How late the thread wakes, as far as a port paced to its own link plans for: it hands the
    /// interface up to this much of its backlog after a late wake-up (`Schedule::link`), so that
    /// the link stays busy while the thread sleeps past a frame's time. A high-priority frame may
    /// find that much in front of it beside the frame on the wire: about the median lateness.
    pub fn lateness_ns(self) -> u64 {
        match self {
            Timing::Sleep => 100_000,
            Timing::Fifo => 40_000,
            Timing::Busy => 1_000,
        }
    }
}

/// Sets every port's schedule, queue limits and priority map from `egress` (ports not named get
/// the defaults back).
fn apply_egress(
    ports: &mut BTreeMap<u32, SwitchPort>,
    egress: &[(u32, crate::egress::PortEgress)],
    start: Instant,
    timing: Timing,
) {
    let none = crate::egress::PortEgress::default();
    for (no, p) in ports.iter_mut() {
        let e = egress.iter().find(|(n, _)| n == no).map_or(&none, |(_, e)| e);
        p.set_egress(*no, e.clone(), start, timing);
    }
}

impl SwitchPort {
    /// Sets the port's schedule, queue limits and priority map from `e`. Gate base times move
    /// from their own clock onto the switch's (`start`); a port paced to its link reads the
    /// link's speed now, and plans for the thread's `timing`.
    fn set_egress(&mut self, no: u32, e: crate::egress::PortEgress, start: Instant, timing: Timing) {
        let mut schedule = e.schedule.clone();
        if let Some(g) = schedule.as_mut().and_then(|s| s.gates.as_mut()) {
            let id = match e.gate_clock {
                crate::egress::GateClock::Tai => libc::CLOCK_TAI,
                crate::egress::GateClock::Realtime => libc::CLOCK_REALTIME,
            };
            let offset = crate::sys::clock_ns(id) - start.elapsed().as_nanos() as i128;
            g.base_ns = (g.base_ns as i128 - offset).rem_euclid(g.cycle_ns as i128) as u64;
        }
        let link_mbps = if schedule.is_none() && e.pace_to_link { link_speed(&e, &self.desc.name) } else { None };
        if let Some(mbps) = link_mbps {
            schedule = Some(crate::schedule::Schedule::link(mbps as u64 * 1_000_000, timing.lateness_ns()));
            if self.link_paced_mbps != Some(mbps) {
                tracing::info!(port = no, name = %self.desc.name, mbps, "egress paced to the link's speed");
            }
        } else if schedule.is_none() && e.pace_to_link && self.tx.is_some() {
            tracing::warn!(
                port = no,
                name = %self.desc.name,
                "the driver reports no link speed, so the port is not paced: priority holds only until its \
                 interface's ring fills (give the port link_mbps)"
            );
        }
        self.link_paced_mbps = link_mbps;
        if let Some(mbps) = e.link_mbps {
            // What the controllers see of the port says so too.
            self.desc.curr = ports::speed_features(mbps);
            self.desc.supported = self.desc.curr;
            (self.desc.curr_speed, self.desc.max_speed) = (mbps * 1000, mbps * 1000);
        }
        self.egress.set_schedule(schedule);
        self.egress.pcp_map = e.pcp_map.unwrap_or(crate::egress::PCP_TO_QUEUE);
        for q in 0..crate::egress::N_QUEUES {
            let limit = e.limits.iter().find(|(i, _)| *i == q).map(|&(_, l)| l);
            self.egress.set_limit(q, limit.unwrap_or(crate::egress::Limit::Frames(crate::egress::QUEUE_LIMIT)));
        }
        self.egress_config = e;
    }

    /// Paces the port again if it is paced to its link and the link's speed changed (a link
    /// comes back at the speed it negotiated).
    fn link_speed_changed(&mut self, no: u32, start: Instant, timing: Timing) {
        let e = &self.egress_config;
        if e.pace_to_link && e.schedule.is_none() && link_speed(e, &self.desc.name) != self.link_paced_mbps {
            self.set_egress(no, self.egress_config.clone(), start, timing);
        }
    }
}

/// The speed in Mbit/s of interface `name`'s link: the config's (`e`), else the driver's.
fn link_speed(e: &crate::egress::PortEgress, name: &str) -> Option<u32> {
    e.link_mbps.or_else(|| crate::sys::speed_mbps(name))
}

/// Wakes the forwarding thread and tells it, without a syscall, that commands wait. `pending` is
/// up from a command's arrival until the forwarding thread finds the queue empty.
struct Doorbell {
    fd: EventFd,
    pending: AtomicBool,
}

/// What the agent holds to talk to the forwarding thread.
#[derive(Clone)]
pub struct SwitchHandle {
    tx: Sender<Command>,
    bell: Arc<Doorbell>,
    /// Shared with the switch's report.
    pub channel: Arc<ChannelCounters>,
}

impl SwitchHandle {
    /// Queues a command; rings only when none was pending. While the forwarding thread works
    /// through a queue (a controller's 100 000 flow-mods) the flag stays up and the commands
    /// behind the first cost no system call and no wakeup.
    pub fn send(&self, cmd: Command) {
        if self.tx.send(cmd).is_ok() && !self.bell.pending.swap(true, Ordering::AcqRel) {
            self.bell.fd.wake();
        }
    }
}

/// Frames dropped, per reason.
#[derive(Clone, Debug, Default)]
pub struct DropCounts(BTreeMap<DropReason, u64>);

impl DropCounts {
    pub fn add(&mut self, reason: DropReason) {
        self.add_n(reason, 1);
    }

    pub fn add_n(&mut self, reason: DropReason, n: u64) {
        if n > 0 {
            *self.0.entry(reason).or_default() += n;
        }
    }

    pub fn get(&self, reason: DropReason) -> u64 {
        self.0.get(&reason).copied().unwrap_or(0)
    }

    /// "reason=count" for every reason seen, for a log line.
    pub fn summary(&self) -> String {
        self.0.iter().map(|(r, n)| format!("{}={n}", r.name())).collect::<Vec<_>>().join(" ")
    }
}

/// When the frames of one socket arrived, on the switch's clock. The kernel stamps a frame
/// (CLOCK_REALTIME) when it reaches the socket; `now` and `wall` are the two clocks read together
/// when the batch is taken. Policing and meters then see the gaps between frames as they were on
/// the wire, not as the forwarding thread happened to be scheduled: a thread woken 1 ms late
/// would otherwise see a burst. One socket's frames come in arrival order, so its times never go
/// back; frames of different sockets may be handed over slightly out of order.
#[derive(Debug, Default)]
pub(super) struct Arrivals {
    latest: u64,
}

impl Arrivals {
    pub fn at(&mut self, now: u64, wall: u64, stamp: u64) -> u64 {
        let at = if stamp == 0 || stamp > wall { now } else { now.saturating_sub(wall - stamp) };
        self.latest = self.latest.max(at);
        self.latest
    }
}

/// A P4 program's fast path: its kernel object built and loaded, for a mode that hands the kernel
/// one. None where the mode does not, or where the program cannot run there (it does not fit
/// the kernel back end, or there is no clang): the switch says why, and the ports' megaflow
/// programs send every frame up, for the program to decide in userspace.
#[cfg(feature = "p4")]
fn p4_in_kernel(mode: &dyn Mode, kind: FastMode, keep: bool) -> Option<std::io::Result<FastPath>> {
    let to_kernel = mode.kernel();
    let program = to_kernel.p4?;
    use crate::fastpath::p4::P4Kernel;
    // An object compiled elsewhere is loaded as it is: this machine may have no clang.
    let loaded = match to_kernel.p4_object {
        Some(elf) => P4Kernel::from_object(program, elf),
        None => P4Kernel::build(program).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => std::io::Error::new(
                e.kind(),
                format!("{e}; compile the program where clang is (edgeflow p4 compile PROGRAM -o OBJECT) and name the object in [p4] object"),
            ),
            _ => e,
        }),
    };
    // Its tables are written before any port runs it.
    let built = match loaded.and_then(|mut b| b.write(program).map(|()| b)) {
        Ok(built) => built,
        Err(e) => {
            warn!("the P4 program runs in userspace, not in the kernel: {e}");
            return None;
        }
    };
    if keep {
        warn!("keep_fastpath: a P4 program's kernel state is not kept across runs; it starts afresh");
    }
    let from = if to_kernel.p4_object.is_some() { "the object named in [p4] object" } else { "compiled here" };
    tracing::info!(datapath = kind.name(), from, "the P4 program decides frames in the kernel");
    Some(FastPath::load_p4(kind, built))
}

pub struct Switch {
    cfg: SwitchConfig,
    guard: PortGuard,
    mode: Box<dyn Mode>,
    ports: BTreeMap<u32, SwitchPort>,
    events: Box<dyn FnMut(Event) + Send>,
    commands: Receiver<Command>,
    bell: Arc<Doorbell>,
    links: Option<LinkMonitor>,
    start: Instant,
    /// When it started, in Unix seconds: a start time stays put where an uptime moves.
    started_unix: f64,
    /// Arrival times of the frames the fast path sends up.
    upcall_arrivals: Arrivals,
    /// Reused for every received frame.
    pkt: Packet,
    tagged: Vec<u8>,
    /// Where the copies of the frame being processed went: (port, queue, chosen by its priority).
    sent: Vec<(u32, u8, bool)>,
    drops: DropCounts,
    fail_open: bool,
    /// How often standalone mode took over for want of a controller.
    fail_open_entered: u64,
    /// What the agent counts on the controller channels.
    channel: Arc<ChannelCounters>,
    /// Configurations read again: how many were applied and refused, and the last one's message.
    reloads: (u64, u64, Option<(bool, String)>),
    fast: Option<FastPath>,
    /// Where the kernel fast path sends misses up (TC mode), and the guard that keeps the host
    /// stack off that interface.
    upcall_rx: Option<Box<dyn PortRx>>,
    _upcall_guard: Option<crate::attach::Attachment>,
    /// The mode's generation the fast path last mirrored.
    fast_gen: u64,
    /// The generation of the mode's kernel label tables last mirrored.
    labels_gen: u64,
    /// The virtual links last handed to the kernel: (index in the mode's table, output ifindexes,
    /// fanout).
    links_written: Option<Vec<(usize, Vec<u32>, u32)>>,
    /// After a failed write of the links: when to try again, and how many tries failed.
    links_retry: Option<(u64, u32)>,
    /// Links left to userspace because a port they leave by needs priority.
    links_kept_for_priority: u64,
    /// When the first controller session was seen while the fast path held the last run's entries.
    first_session_at: Option<u64>,
    /// When the kernel fast path's counters were last read ([`Switch::harvest_fast`]), and how
    /// long reading the megaflow entries back took then (ns).
    harvested_at: Option<u64>,
    harvest_took: u64,
}

impl Switch {
    /// Opens every port. Fails (naming the port) if one cannot be opened.
    pub fn new(
        mut cfg: SwitchConfig,
        mut mode: Box<dyn Mode>,
        events: Box<dyn FnMut(Event) + Send>,
    ) -> std::io::Result<(Switch, SwitchHandle)> {
        let any_af_xdp = cfg.ports.iter().any(|(no, _)| cfg.io_of(*no) == PortIo::AfXdp);
        if cfg.fastpath == Some(FastMode::Tc) && any_af_xdp {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, AF_XDP_NOT_UNDER_TC));
        }
        let (tx, rx) = mpsc::channel();
        // Listen for link changes before reading each port's state, so that none falls in between.
        let links = LinkMonitor::open().map_err(|e| warn!("no link monitoring: {e}")).ok();
        let bell = Arc::new(Doorbell { fd: EventFd::new()?, pending: AtomicBool::new(false) });
        let mut ports = BTreeMap::new();
        let guard = PortGuard::load();
        // The fast path is loaded before the ports open, as they open differently under TC. A
        // kernel that cannot verify the AFDX programs leaves AFDX to userspace, which holds the
        // same table: the switch says so and runs on.
        let mut fast = None;
        if let Some(kind) = cfg.fastpath {
            let programs = if mode.kernel().links.is_some() { Programs::Links } else { Programs::Flows };
            #[cfg(feature = "p4")]
            let p4 = p4_in_kernel(&*mode, kind, cfg.keep_fastpath);
            #[cfg(not(feature = "p4"))]
            let p4: Option<std::io::Result<FastPath>> = None;
            let loaded = match cfg.keep_fastpath {
                _ if p4.is_some() => p4.unwrap(),
                true => FastPath::load_kept(kind, programs, cfg.fastpath_entries, cfg.dpid, &cfg.ports),
                false => FastPath::load(kind, programs, cfg.fastpath_entries),
            };
            match loaded {
                Ok(fp) => fast = Some(fp),
                Err(e) if programs == Programs::Links && e.kind() == std::io::ErrorKind::InvalidInput => {
                    warn!("this kernel cannot run the AFDX fast path, so virtual links are switched in userspace: {e}");
                    cfg.fastpath = None;
                }
                Err(e) => return Err(e),
            }
        }
        if any_af_xdp && fast.as_ref().is_some_and(|f| f.p4_program().is_some()) {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, AF_XDP_NOT_UNDER_P4));
        }
        for (no, name) in &cfg.ports {
            let port = SwitchPort::open(*no, name, cfg.ring, &guard, cfg.fastpath, cfg.io_of(*no))
                .map_err(|e| std::io::Error::new(e.kind(), format!("port {no} ({name}): {e}")))?;
            ports.insert(*no, port);
        }
        if let Some(name) = &cfg.local_port {
            let (rx, tx) =
                tap::open(name).map_err(|e| std::io::Error::new(e.kind(), format!("LOCAL port ({name}): {e}")))?;
            ports.insert(OFPP_LOCAL, SwitchPort::new(OFPP_LOCAL, name, Box::new(rx), Box::new(tx), None, "tap"));
        }
        for (&no, p) in &ports {
            mode.port_changed(no, Some(PortView { config: p.desc.config, state: p.desc.state }));
        }
        let start = Instant::now();
        apply_egress(&mut ports, &cfg.egress, start, cfg.timing);
        let mut upcall_rx: Option<Box<dyn PortRx>> = None;
        let mut upcall_guard = None;
        if let Some(fp) = fast.as_mut() {
            fp.attach_ports(&cfg.ports)?;
            for (&no, port) in ports.iter_mut() {
                port.join_fast_path(no, fp)
                    .map_err(|e| std::io::Error::new(e.kind(), format!("port {no} ({}): {e}", port.desc.name)))?;
            }
            if fp.mode == FastMode::Tc {
                // Misses come up through the upcall interface (the ports have no receive socket).
                let (_, peer) = fp.upcall.clone().expect("TC mode has an upcall interface");
                let (rx, _tx) = afpacket::open(&peer, cfg.ring.unwrap_or_default())?;
                upcall_rx = Some(Box::new(rx));
                upcall_guard = guard.attach(&peer);
            }
        }
        let handle = SwitchHandle { tx, bell: bell.clone(), channel: Arc::default() };
        let fast_gen = mode.generation();
        let sw = Switch {
            guard,
            mode,
            ports,
            events,
            commands: rx,
            bell,
            links,
            start,
            started_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            upcall_arrivals: Arrivals::default(),
            pkt: Packet::with_capacity(2048),
            tagged: Vec::with_capacity(2048),
            sent: Vec::with_capacity(8),
            drops: DropCounts::default(),
            fail_open: false,
            fail_open_entered: 0,
            channel: handle.channel.clone(),
            reloads: (0, 0, None),
            fast_gen,
            labels_gen: 0,
            links_written: None,
            links_retry: None,
            links_kept_for_priority: 0,
            first_session_at: None,
            harvested_at: None,
            harvest_took: 0,
            fast,
            upcall_rx,
            _upcall_guard: upcall_guard,
            cfg,
        };
        Ok((sw, handle))
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    pub fn features(&self) -> SwitchFeatures {
        SwitchFeatures {
            datapath_id: self.cfg.dpid,
            n_buffers: N_BUFFERS,
            n_tables: self.cfg.n_tables,
            auxiliary_id: 0,
            capabilities: capabilities::FLOW_STATS
                | capabilities::TABLE_STATS
                | capabilities::PORT_STATS
                | capabilities::GROUP_STATS
                | capabilities::QUEUE_STATS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Arrivals;

    #[test]
    fn arrival_times_follow_the_kernel_stamps_and_never_go_back() {
        let mut a = Arrivals::default();
        // The clocks read together: 10 ms on the switch's clock, 1000 s on the wall clock.
        let (now, wall) = (10_000_000, 1_000_000_000_000);
        assert_eq!(a.at(now, wall, wall - 3_000_000), 7_000_000, "stamped 3 ms before the batch");
        assert_eq!(a.at(now, wall, wall - 2_000_000), 8_000_000);
        assert_eq!(a.at(now, wall, wall - 5_000_000), 8_000_000, "never before the one before");
        assert_eq!(a.at(now, wall, 0), now, "no stamp: when the batch was taken");
        assert_eq!(a.at(now + 1, wall, wall + 5), now + 1, "stamped after the clocks were read");
    }
}
