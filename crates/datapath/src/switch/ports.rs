//! The switch's ports: what OpenFlow sees of them (description, counters), link changes,
//! port-mod, and [`Transmit`], where a mode's egress descriptors become frames on queues.

use std::collections::BTreeMap;
use std::io;
use std::time::Instant;

use forwarding::{DropReason, Egress, Output, PortView};
use ofp::error::{ErrorCode, PortModFailed};
use ofp::message::{port_reason, PortMod, PortStatus};
use ofp::multipart::PortStats;
use ofp::port::{config, features, state};
use ofp::Port;
use packet::Packet;
use tracing::{info, warn};

use super::{DropCounts, Switch};
use crate::afpacket::{self, RingConfig};
use crate::egress::{queue_for_frame, EgressQueues, Sent, N_QUEUES};
use crate::fastpath::Mode as FastMode;
use crate::netlink::LinkEvent;
use crate::sys;
use crate::{Event, PortRx, PortTx};

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Counters {
    /// Frames received: read from its socket, and forwarded by the kernel fast path (harvested).
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Of those, the frames the switch read from the port's own socket (with the XDP fast path:
    /// what the kernel sent up).
    pub socket_rx_packets: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_errors: u64,
    /// Times the link went up or down (flaps count twice), and the interface went away.
    pub link_changes: u64,
    pub removed: u64,
    /// Times its guard was found detached and attached again.
    pub guard_reattached: u64,
}

pub(super) struct SwitchPort {
    /// Both halves are `None` while the interface does not exist.
    pub rx: Option<Box<dyn PortRx>>,
    pub tx: Option<Box<dyn PortTx>>,
    /// Keeps the host stack off the port while the port lives.
    pub guard: Option<crate::attach::Attachment>,
    pub ifindex: u32,
    /// How its frames move: "af_packet rings", "af_packet plain" (the fallback where AF_PACKET's
    /// own socket options are refused, as under qemu-user), "af_xdp copy", "af_xdp zero-copy",
    /// "af_xdp copy generic" (XDP on sk_buffs, where the driver has no native XDP) or "tap".
    pub io: &'static str,
    /// An AF_XDP port under the XDP fast path: how its socket was bound, until the fast path
    /// sends up into it (`join_fast_path`).
    pub xsk_unjoined: Option<netio::afxdp::XskMode>,
    /// Receive slots in its ring (0: no ring).
    pub ring_frames: u32,
    /// A veth: it hands a GSO super-frame to its peer as it is, so one may leave under labels.
    pub whole: bool,
    pub desc: Port,
    pub counters: Counters,
    pub egress: EgressQueues,
    /// What `egress` was set from, applied again when the interface returns or its link does.
    pub egress_config: crate::egress::PortEgress,
    /// The link speed (Mbit/s) `egress` is paced to, when it is paced to its link's.
    pub link_paced_mbps: Option<u32>,
    pub created: Instant,
    pub arrivals: super::Arrivals,
}

impl SwitchPort {
    /// The interface the kernel fast path may send this port's frames on. None for the LOCAL
    /// port: its tap hands what is sent on it to the tap's reader, the switch itself, so a frame
    /// the kernel sent there would never reach the host.
    pub fn kernel_ifindex(&self) -> Option<u32> {
        (self.ifindex != 0 && self.io != "tap").then_some(self.ifindex)
    }

    pub fn new(
        no: u32,
        name: &str,
        rx: Box<dyn PortRx>,
        tx: Box<dyn PortTx>,
        guard: Option<crate::attach::Attachment>,
        io: &'static str,
    ) -> Self {
        SwitchPort {
            rx: Some(rx),
            tx: Some(tx),
            guard,
            io,
            xsk_unjoined: None,
            ring_frames: 0,
            ifindex: sys::ifindex(name).unwrap_or(0),
            whole: sys::driver(name).as_deref() == Some("veth"),
            desc: port_desc(no, name),
            counters: Counters::default(),
            egress: EgressQueues::default(),
            egress_config: Default::default(),
            link_paced_mbps: None,
            created: Instant::now(),
            arrivals: super::Arrivals::default(),
        }
    }

    /// A switch port on interface `name`. With the TC fast path the kernel takes every frame
    /// first and sends misses up its own interface: then the port has no receive socket (it would
    /// see frames the kernel already forwarded) and no guard (it would stop them first). With the
    /// XDP fast path an AF_XDP port gets its socket only: the fast path's program feeds it.
    pub fn open(
        no: u32,
        name: &str,
        ring: Option<RingConfig>,
        guard: &PortGuard,
        fast: Option<FastMode>,
        kind: PortIo,
    ) -> io::Result<SwitchPort> {
        let ring = ring.unwrap_or_else(|| RingConfig::for_link(sys::speed_mbps(name)));
        let tc_fast_path = fast == Some(FastMode::Tc);
        if kind == PortIo::AfXdp {
            if tc_fast_path {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, super::AF_XDP_NOT_UNDER_TC));
            }
            return Self::open_af_xdp(no, name, ring, guard, fast == Some(FastMode::Xdp));
        }
        let mut ring_frames = ring.rx_frames;
        let (rx, tx, io): (Box<dyn PortRx>, Box<dyn PortTx>, _) = match afpacket::open(name, ring) {
            Ok((rx, tx)) => (Box::new(rx), Box::new(tx), "af_packet rings"),
            Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) && !tc_fast_path => {
                warn!(
                    port = name,
                    "AF_PACKET's socket options are refused ({e}: an emulator such as qemu-user?): \
                     plain packet sockets instead, one frame per system call and no offloads"
                );
                let (rx, tx) = netio::plain::open(name)?;
                ring_frames = 0;
                (Box::new(rx), Box::new(tx), "af_packet plain")
            }
            Err(e) => return Err(crate::privilege_hint(e, &[crate::caps::NET_RAW])),
        };
        let guard = if tc_fast_path { None } else { guard.attach(name) };
        let mut port = SwitchPort::new(no, name, rx, tx, guard, io);
        port.ring_frames = ring_frames;
        if tc_fast_path {
            port.rx = None;
        }
        Ok(port)
    }

    /// A port on an AF_XDP socket, its redirect program on the interface's XDP hook, or with the
    /// XDP fast path (`xdp_fast_path`) the socket alone, for the fast path to send up into. The
    /// guard stays at TC: frames the program passes on (a queue with no socket) go no further.
    fn open_af_xdp(
        no: u32,
        name: &str,
        ring: RingConfig,
        guard: &PortGuard,
        xdp_fast_path: bool,
    ) -> io::Result<SwitchPort> {
        let cfg = netio::afxdp::XskConfig::from_ring(ring);
        let open = if xdp_fast_path { netio::afxdp::open_socket } else { netio::afxdp::open };
        let (rx, tx, mode) = open(name, cfg)
            .map_err(|e| crate::privilege_hint(e, &[crate::caps::NET_RAW, crate::caps::NET_ADMIN, crate::caps::BPF]))?;
        let queues = rx.queue_sockets().len() as u32;
        let served = if xdp_fast_path { queues.min(crate::fastpath::XSK_QUEUES) } else { queues };
        if netio::afxdp::rx_queue_count(name) > served {
            let lost = match xdp_fast_path {
                true => "what the fast path sends up from the others is dropped",
                false => "frames arriving on the others are dropped",
            };
            warn!(
                port = name,
                served,
                "AF_XDP serves the first {served} receive queues: {lost} (`ethtool -L {name} combined {served}`)"
            );
        }
        if !mode.native && !xdp_fast_path {
            warn!(port = name, "the driver has no native XDP: AF_XDP on generic XDP, no faster than AF_PACKET");
        }
        info!(
            port = name,
            io = mode.describe(),
            queues,
            rx_frames = cfg.rx_frames,
            tx_frames = cfg.tx_frames,
            "AF_XDP port"
        );
        let mut port = SwitchPort::new(no, name, Box::new(rx), Box::new(tx), guard.attach(name), mode.describe());
        port.ring_frames = cfg.rx_frames;
        port.xsk_unjoined = xdp_fast_path.then_some(mode);
        Ok(port)
    }

    /// An AF_XDP port under the XDP fast path, once the fast path is attached to it: its socket
    /// goes into the fast path's map, so that what the kernel sends up from this port arrives on
    /// it (until then nothing does), and `io` says where the program runs. Again after the
    /// interface came back. Nothing to do for other ports.
    pub fn join_fast_path(&mut self, no: u32, fast: &crate::fastpath::FastPath) -> io::Result<()> {
        let (Some(mut mode), Some(rx)) = (self.xsk_unjoined, self.rx.as_ref()) else { return Ok(()) };
        let sockets = rx.queue_sockets();
        for (queue, fd) in sockets.iter().enumerate().take(crate::fastpath::XSK_QUEUES as usize) {
            fast.register_socket(no, queue as u32, *fd)?;
        }
        mode.native = fast.xdp_native(no).unwrap_or(true);
        if !mode.native {
            warn!(port = %self.desc.name, "the driver has no native XDP: AF_XDP on generic XDP, no faster than AF_PACKET");
        }
        self.io = mode.describe();
        self.xsk_unjoined = None;
        Ok(())
    }

    pub fn view(&self) -> PortView {
        PortView { config: self.desc.config, state: self.desc.state }
    }

    /// The link is up, as far as the switch last heard.
    pub fn can_send(&self) -> bool {
        self.desc.state & state::LINK_DOWN == 0 && self.desc.config & config::PORT_DOWN == 0
    }

    /// Configured not to receive, or administratively down.
    pub fn blocked(&self) -> bool {
        self.desc.config & (config::NO_RECV | config::PORT_DOWN) != 0
    }

    /// Hands what waits on the egress queues to the socket, as far as it takes it (the caller
    /// flushes the socket). Returns the frames the interface refused (dropped, counted here).
    pub fn service(&mut self, now: u64) -> u64 {
        if self.egress.backlog() == 0 {
            return 0;
        }
        let Some(tx) = self.tx.as_mut() else { return 0 };
        let done = self.egress.service(tx.as_mut(), now);
        self.counters.tx_packets += done.packets;
        self.counters.tx_bytes += done.bytes;
        self.counters.tx_dropped += done.refused + done.gate_too_short;
        done.refused
    }

    pub fn stats(&mut self, no: u32) -> PortStats {
        if let Some(rx) = self.rx.as_mut() {
            self.counters.rx_dropped += rx.rx_drops();
        }
        let c = self.counters;
        let d = self.created.elapsed();
        PortStats {
            port_no: no,
            rx_packets: c.rx_packets,
            tx_packets: c.tx_packets,
            rx_bytes: c.rx_bytes,
            tx_bytes: c.tx_bytes,
            rx_dropped: c.rx_dropped,
            tx_dropped: c.tx_dropped,
            rx_errors: c.rx_errors,
            duration_sec: d.as_secs() as u32,
            duration_nsec: d.subsec_nanos(),
            ..Default::default()
        }
    }
}

/// The kind of socket a port moves its frames through (`--io`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PortIo {
    /// AF_PACKET with memory-mapped rings (or plain sockets where those are refused).
    #[default]
    AfPacket,
    /// AF_XDP, fed by an XDP program on the port: the userspace datapath's fast socket.
    AfXdp,
}

impl std::str::FromStr for PortIo {
    type Err = String;
    fn from_str(s: &str) -> Result<PortIo, String> {
        match s {
            "af_packet" => Ok(PortIo::AfPacket),
            "af_xdp" => Ok(PortIo::AfXdp),
            _ => Err(format!("io '{s}': expected 'af_packet' or 'af_xdp'")),
        }
    }
}

/// Where a mode's decisions for one frame go: each copy onto its port's egress queue.
pub(super) struct Transmit<'a> {
    pub ports: &'a mut BTreeMap<u32, SwitchPort>,
    pub events: &'a mut dyn FnMut(Event),
    pub drops: &'a mut DropCounts,
    /// (port, queue, whether the queue came from the frame's priority) of every copy queued.
    pub sent: &'a mut Vec<(u32, u8, bool)>,
    /// The switch's clock when the frame arrived (when it joins a queue).
    pub now: u64,
}

impl Output for Transmit<'_> {
    fn transmit(&mut self, egress: Egress, pkt: &Packet) {
        let Some(SwitchPort { tx: Some(tx), counters, egress: queues, .. }) = self.ports.get_mut(&egress.port) else {
            self.drops.add(DropReason::NoSuchPort);
            return;
        };
        let queue = match egress.queue {
            None => queue_for_frame(pkt.data(), &queues.pcp_map),
            Some(q) if (q as usize) < N_QUEUES => q as usize,
            Some(_) => {
                counters.tx_dropped += 1;
                self.drops.add(DropReason::NoSuchQueue);
                return;
            }
        };
        match queues.send(tx.as_mut(), queue, pkt.data(), &pkt.offload, self.now) {
            Sent::Now => {
                counters.tx_packets += 1;
                counters.tx_bytes += pkt.len() as u64;
            }
            Sent::Held => {}
            Sent::Dropped => {
                counters.tx_dropped += 1;
                self.drops.add(DropReason::QueueFull);
            }
            Sent::Refused => {
                counters.tx_dropped += 1;
                self.drops.add(DropReason::OverMtu);
            }
        }
        self.sent.push((egress.port, queue as u8, egress.queue.is_none()));
    }

    fn event(&mut self, event: Event) {
        (self.events)(event);
    }
}

/// The port guard program, loaded once, attached to every AF_PACKET port.
pub(super) struct PortGuard(Option<crate::ebpf::Program>);

/// The guard's two instructions, `r0 = TC_ACT_SHOT; exit`: a program this small is written here
/// rather than built by clang, so that every build has it (one without the fast path included).
const PORT_GUARD_INSNS: [u8; 16] = [0xb7, 0, 0, 0, 2, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];

impl PortGuard {
    pub fn load() -> PortGuard {
        let mut insns = PORT_GUARD_INSNS;
        if cfg!(target_endian = "big") {
            insns[4..8].copy_from_slice(&2i32.to_be_bytes()); // the immediate, in this machine's order
        }
        match crate::ebpf::Program::from_instructions("port_guard", crate::ebpf::prog_type::SCHED_CLS, &insns) {
            Ok(o) => PortGuard(Some(o)),
            Err(e) => {
                let e = crate::privilege_hint(e, &[crate::caps::BPF, crate::caps::NET_ADMIN]);
                warn!("cannot load the port guard (the host stack will also see port traffic): {e}");
                PortGuard(None)
            }
        }
    }

    pub fn attach(&self, name: &str) -> Option<crate::attach::Attachment> {
        let prog = self.0.as_ref()?;
        let ifindex = sys::ifindex(name).ok()?;
        crate::attach::tc(prog, ifindex, crate::attach::TcSlot::PortGuard)
            .map_err(|e| warn!(port = name, "port guard not attached: {e}"))
            .ok()
    }
}

pub(super) fn port_desc(no: u32, name: &str) -> Port {
    let hw_addr = sys::hw_addr(name).unwrap_or_default();
    let flags = sys::if_flags(name).unwrap_or(0);
    let speed = sys::speed_mbps(name).unwrap_or(0);
    let curr = speed_features(speed);
    let mut desc = Port {
        port_no: no,
        hw_addr,
        name: name.to_string(),
        config: if flags & libc::IFF_UP as u32 == 0 { config::PORT_DOWN } else { 0 },
        curr,
        advertised: 0,
        supported: curr,
        peer: 0,
        curr_speed: speed * 1000,
        max_speed: speed * 1000,
        state: 0,
    };
    // SIOCGIFFLAGS has only the low 16 flag bits; the carrier (IFF_LOWER_UP) comes from sysfs.
    let carrier = sys::carrier(name) as u32 * 0x10000;
    desc.state = link_state(flags | carrier);
    desc
}

/// OpenFlow's feature bits for a link of `mbps` (0: unknown).
pub(super) fn speed_features(mbps: u32) -> u32 {
    let rate = match mbps {
        0 => return 0,
        s if s >= 100_000 => features::F_100GB_FD,
        s if s >= 40_000 => features::F_40GB_FD,
        s if s >= 10_000 => features::F_10GB_FD,
        s if s >= 1_000 => features::F_1GB_FD,
        s if s >= 100 => features::F_100MB_FD,
        _ => features::F_10MB_FD,
    };
    rate | features::COPPER
}

fn link_state(flags: u32) -> u32 {
    const IFF_LOWER_UP: u32 = 0x10000;
    if flags & IFF_LOWER_UP != 0 && flags & libc::IFF_UP as u32 != 0 {
        state::LIVE
    } else {
        state::LINK_DOWN
    }
}

impl Switch {
    /// A port's description changed: the mode and the controllers hear of it.
    pub(super) fn port_status(&mut self, no: u32, reason: u8) {
        let port = &self.ports[&no];
        let view = (reason != port_reason::DELETE).then(|| port.view());
        let desc = port.desc.clone();
        self.mode.port_changed(no, view);
        if self.seen(no) {
            (self.events)(Event::PortStatus(PortStatus { reason, desc }));
        }
    }

    pub(super) fn link_event(&mut self, ev: LinkEvent) {
        let found = self.ports.iter().find(|(_, p)| p.desc.name == ev.name).map(|(&n, _)| n);
        let Some(no) = found else { return };
        let (start, timing) = (self.start, self.cfg.timing);
        let port = self.ports.get_mut(&no).unwrap();
        let egress = port.egress_config.clone();
        if ev.deleted {
            if port.tx.take().is_some() {
                port.rx = None;
                port.guard = None;
                port.egress = EgressQueues::default();
                port.set_egress(no, egress, start, timing);
                port.counters.removed += 1;
                info!(port = no, name = %ev.name, "interface removed");
                self.port_status(no, port_reason::DELETE);
            }
            return;
        }
        if port.tx.is_none() {
            // A configured interface (re)appeared.
            let fast_mode = self.fast.as_ref().map(|f| f.mode);
            match SwitchPort::open(no, &ev.name, self.cfg.ring, &self.guard, fast_mode, self.cfg.io_of(no)) {
                Ok(reopened) => {
                    let counters = port.counters;
                    *port = reopened;
                    port.counters = counters;
                    port.set_egress(no, egress, start, timing);
                    info!(port = no, name = %ev.name, "interface added");
                    // The kernel dropped the fast path's attachment with the old interface.
                    if let Some(fast) = self.fast.as_mut() {
                        match fast.reattach(no) {
                            Ok(()) => info!(port = no, name = %ev.name, "fast path attached again"),
                            Err(e) => warn!(port = no, "{e}: the port is served in userspace only"),
                        }
                        if let Err(e) = port.join_fast_path(no, fast) {
                            warn!(port = no, "{e}: its AF_XDP socket receives nothing");
                        }
                    }
                    self.port_status(no, port_reason::ADD);
                }
                Err(e) => warn!(port = no, "cannot reopen {}: {e}", ev.name),
            }
            return;
        }
        if let Some(tx) = port.tx.as_mut() {
            tx.link_changed();
        }
        let new_state = link_state(ev.flags);
        let admin_down = ev.flags & libc::IFF_UP as u32 == 0;
        let new_config = (port.desc.config & !config::PORT_DOWN) | if admin_down { config::PORT_DOWN } else { 0 };
        if new_state != port.desc.state || new_config != port.desc.config {
            port.counters.link_changes += (new_state != port.desc.state) as u64;
            port.desc.state = new_state;
            port.desc.config = new_config;
            info!(port = no, up = new_state == state::LIVE, "link changed");
            if new_state == state::LIVE {
                port.link_speed_changed(no, start, timing);
            }
            self.port_status(no, port_reason::MODIFY);
        }
    }

    /// Puts back what was removed behind the switch's back: fast-path programs and port guards
    /// detached from interfaces that still exist (an interface that is gone gets its own back
    /// when it returns, in `link_event`). Said in the log and counted.
    pub(super) fn check_attachments(&mut self) {
        if let Some(fast) = self.fast.as_mut() {
            for no in fast.detached_ports() {
                let Some(port) = self.ports.get(&no).filter(|p| p.tx.is_some()) else { continue };
                match fast.reattach(no) {
                    Ok(()) => {
                        warn!(port = no, name = %port.desc.name, "fast path program was detached: attached again")
                    }
                    Err(e) => warn!(port = no, "fast path program was detached and cannot be attached again: {e}"),
                }
            }
        }
        for (&no, port) in self.ports.iter_mut() {
            let detached = port.guard.as_ref().is_some_and(|g| g.detached());
            if detached && port.tx.is_some() {
                port.guard = self.guard.attach(&port.desc.name);
                if port.guard.is_some() {
                    port.counters.guard_reattached += 1;
                    warn!(port = no, name = %port.desc.name, "port guard was detached: attached again");
                }
            }
        }
    }

    pub(super) fn port_mod(&mut self, pm: &PortMod) -> Result<(), ErrorCode> {
        let err = |c| Err(ErrorCode::PortModFailed(c));
        if !self.seen(pm.port_no) {
            return err(PortModFailed::BadPort);
        }
        let Some(port) = self.ports.get_mut(&pm.port_no) else {
            return err(PortModFailed::BadPort);
        };
        if pm.hw_addr != port.desc.hw_addr {
            return err(PortModFailed::BadHwAddr);
        }
        if (pm.config | pm.mask) & !config::ALL != 0 {
            return err(PortModFailed::BadConfig);
        }
        let new = (port.desc.config & !pm.mask) | (pm.config & pm.mask);
        if new == port.desc.config {
            return Ok(());
        }
        if (new ^ port.desc.config) & config::PORT_DOWN != 0 {
            if let Err(e) = sys::set_if_up(&port.desc.name, new & config::PORT_DOWN == 0) {
                warn!(port = pm.port_no, "cannot change admin state: {e}");
                return err(PortModFailed::Eperm);
            }
        }
        port.desc.config = new;
        self.port_status(pm.port_no, port_reason::MODIFY);
        Ok(())
    }
}
