//! The forwarding thread: receives frames on every port, runs them through the pipeline (through its
//! megaflow cache), transmits the results, and executes controller requests between batches.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::time::Instant;

use ofp::error::{BadRequest, ErrorCode, PortModFailed, QueueOpFailed, SwitchConfigFailed, TableModFailed};
use ofp::message::*;
use ofp::multipart::*;
use ofp::oxm::{Field, Match};
use ofp::port::{config, features, state, OFPP_ANY, OFPP_CONTROLLER, OFPP_LOCAL, OFPP_MAX};
use ofp::{Action, Instruction, Message, Port};
use packet::{parse, segment, FlowKey, Offload, Packet};
use pipeline::exec::{DpAction, Sink, ToController};
use pipeline::{Config as PipelineConfig, Pipeline, PortView};
use tracing::{debug, info, warn};

use crate::afpacket::{self, RingConfig};
use crate::fastpath::{EncodeContext, FastPath, Mode as FastMode};
use crate::netlink::{LinkEvent, LinkMonitor};
use crate::sys::{self, EventFd};
use crate::tap;
use crate::{Command, Event, PortRx, PortTx, Replier, RxFrame};

pub const N_BUFFERS: u32 = 256;
/// Frames taken from one port before moving to the next, so that one busy port cannot starve the
/// others or delay controller requests.
const RX_BUDGET: usize = 64;

#[derive(Clone, Debug)]
pub struct SwitchConfig {
    pub dpid: u64,
    pub n_tables: u8,
    /// OpenFlow port number and interface name.
    pub ports: Vec<(u32, String)>,
    /// Name of a tap interface to create as the LOCAL port.
    pub local_port: Option<String>,
    pub ring: RingConfig,
    /// No controller configured: start with a table-miss flow to NORMAL (a plain learning switch
    /// that `ovs-ofctl` can still reprogram).
    pub native: bool,
    pub dp_desc: String,
    /// Packet-ins per second across all controllers (0: no limit), so a flood of misses cannot
    /// starve the control channel. Bursts of up to a quarter second's worth pass.
    pub packet_in_rate: u32,
    /// Per-table capacity: (table id, max flows, evict when full).
    pub table_limits: Vec<(u8, u32, bool)>,
    /// The kernel fast path to mirror the megaflow cache into (`None`: userspace only).
    pub fastpath: Option<crate::fastpath::Mode>,
}

/// Wakes the forwarding thread and tells it, without a syscall, that commands wait.
struct Doorbell {
    fd: EventFd,
    pending: AtomicBool,
}

/// What the agent holds to talk to the forwarding thread.
#[derive(Clone)]
pub struct SwitchHandle {
    tx: Sender<Command>,
    bell: Arc<Doorbell>,
}

impl SwitchHandle {
    pub fn send(&self, cmd: Command) {
        if self.tx.send(cmd).is_ok() {
            self.bell.pending.store(true, Ordering::Release);
            self.bell.fd.wake();
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    rx_packets: u64,
    rx_bytes: u64,
    tx_packets: u64,
    tx_bytes: u64,
    rx_dropped: u64,
    tx_dropped: u64,
    rx_errors: u64,
}

struct SwitchPort {
    /// Both halves are `None` while the interface does not exist.
    rx: Option<Box<dyn PortRx>>,
    tx: Option<Box<dyn PortTx>>,
    /// Keeps the host stack off the port while the port lives.
    guard: Option<crate::ebpf::Link>,
    ifindex: u32,
    desc: Port,
    counters: Counters,
    created: Instant,
}

/// Packets buffered for the controller (referenced by buffer_id in packet-in/out and flow-mod).
struct Buffers {
    slots: Vec<Option<(u32, u32, Vec<u8>)>>,
    next: u32,
}

impl Buffers {
    fn new() -> Self {
        Buffers { slots: (0..N_BUFFERS).map(|_| None).collect(), next: 0 }
    }

    fn store(&mut self, in_port: u32, frame: &[u8]) -> u32 {
        let id = self.next;
        // Ids cycle below OFP_NO_BUFFER; the slot is id % N_BUFFERS, the id tells stale from live.
        self.next = (self.next + 1) % 0x7fff_ffff;
        self.slots[(id % N_BUFFERS) as usize] = Some((id, in_port, frame.to_vec()));
        id
    }

    fn take(&mut self, id: u32) -> Option<(u32, Vec<u8>)> {
        let slot = &mut self.slots[(id % N_BUFFERS) as usize];
        match slot {
            Some((sid, _, _)) if *sid == id => slot.take().map(|(_, p, f)| (p, f)),
            _ => None,
        }
    }
}

/// A token bucket for packet-ins.
struct PacketInLimit {
    rate: u64,
    tokens: u64,
    last: u64,
    dropped: u64,
}

impl PacketInLimit {
    fn new(rate: u32) -> Self {
        PacketInLimit { rate: rate as u64, tokens: Self::cap(rate as u64), last: 0, dropped: 0 }
    }

    /// Capacity in milli-tokens: a quarter second of packet-ins, at least 32.
    fn cap(rate: u64) -> u64 {
        (rate / 4).max(32) * 1000
    }

    fn allow(&mut self, now: u64) -> bool {
        if self.rate == 0 {
            return true;
        }
        let add = (now.saturating_sub(self.last) as u128 * self.rate as u128 / 1_000_000) as u64;
        self.last = now;
        self.tokens = (self.tokens + add).min(Self::cap(self.rate));
        if self.tokens >= 1000 {
            self.tokens -= 1000;
            true
        } else {
            self.dropped += 1;
            false
        }
    }
}

/// Everything an executed action can touch, split from the pipeline so both can be borrowed.
struct Output<'a> {
    ports: &'a mut BTreeMap<u32, SwitchPort>,
    buffers: &'a mut Buffers,
    events: &'a mut dyn FnMut(Event),
    limit: &'a mut PacketInLimit,
    now: u64,
}

impl Sink for Output<'_> {
    fn output(&mut self, port: u32, pkt: &Packet) {
        let Some(p) = self.ports.get_mut(&port) else {
            return;
        };
        let Some(tx) = p.tx.as_mut() else { return };
        match tx.send(pkt.data(), &pkt.offload) {
            Ok(()) => {
                p.counters.tx_packets += 1;
                p.counters.tx_bytes += pkt.len() as u64;
            }
            Err(_) => p.counters.tx_dropped += 1,
        }
    }

    fn to_controller(&mut self, pkt: &Packet, info: &ToController) {
        // A controller sees wire-sized frames with complete checksums.
        for seg in segment::segment(pkt.clone()) {
            if !self.limit.allow(self.now) {
                continue;
            }
            let frame = seg.data();
            let total_len = frame.len().min(u16::MAX as usize) as u16;
            let (buffer_id, data) = if info.max_len == ofp::action::OFPCML_NO_BUFFER {
                (NO_BUFFER, frame.to_vec())
            } else {
                let id = self.buffers.store(info.in_port, frame);
                (id, frame[..frame.len().min(info.max_len as usize)].to_vec())
            };
            let mut match_ = Match::new().with(Field::InPort, info.in_port as u128);
            if info.metadata != 0 {
                match_ = match_.with(Field::Metadata, info.metadata as u128);
            }
            if info.tunnel_id != 0 {
                match_ = match_.with(Field::TunnelId, info.tunnel_id as u128);
            }
            (self.events)(Event::PacketIn(PacketIn {
                buffer_id,
                total_len,
                reason: info.reason,
                table_id: info.table_id,
                cookie: info.cookie,
                match_,
                data,
            }));
        }
    }
}

/// The port guard program, loaded once, attached to every AF_PACKET port.
struct PortGuard(Option<crate::ebpf::Object>);

impl PortGuard {
    fn load() -> PortGuard {
        match crate::ebpf::Object::load(crate::bpf_objects::PORT_GUARD) {
            Ok(o) => PortGuard(Some(o)),
            Err(e) => {
                warn!("cannot load the port guard (the host stack will also see port traffic): {e}");
                PortGuard(None)
            }
        }
    }

    fn attach(&self, name: &str) -> Option<crate::ebpf::Link> {
        let prog = self.0.as_ref()?.program("port_guard").ok()?;
        let ifindex = sys::ifindex(name).ok()?;
        prog.attach_tc(ifindex, false).map_err(|e| warn!(port = name, "port guard not attached: {e}")).ok()
    }
}

pub struct Switch {
    cfg: SwitchConfig,
    guard: PortGuard,
    pipeline: Pipeline,
    ports: BTreeMap<u32, SwitchPort>,
    buffers: Buffers,
    events: Box<dyn FnMut(Event) + Send>,
    commands: Receiver<Command>,
    bell: Arc<Doorbell>,
    links: Option<LinkMonitor>,
    start: Instant,
    /// Reused for every received frame.
    pkt: Packet,
    tagged: Vec<u8>,
    limit: PacketInLimit,
    fast: Option<FastPath>,
    /// Where the kernel fast path sends misses up (TC mode), and the guard that keeps the host
    /// stack off that interface.
    upcall_rx: Option<Box<dyn PortRx>>,
    _upcall_guard: Option<crate::ebpf::Link>,
    /// The pipeline cache generation the fast path last mirrored.
    fast_gen: u64,
}

/// Installs a fresh translation into the kernel fast path, if it can carry it out.
fn mirror(fast: &mut FastPath, pipeline: &Pipeline, ports: &BTreeMap<u32, SwitchPort>, id: pipeline::classifier::RuleId, key: &FlowKey) {
    let Some((entry, _, mask)) = pipeline.cache.entry(id) else { return };
    let mut slots = std::collections::HashMap::new();
    for a in &entry.actions {
        if let DpAction::Meter(m) = a {
            if let Some(meter) = pipeline.meters.meters.get(m) {
                if let Some(slot) = fast.meter_slot(*m, meter) {
                    slots.insert(*m, slot);
                }
            }
        }
    }
    let ifindex = |p: u32| ports.get(&p).map(|x| x.ifindex).filter(|&i| i != 0);
    let mut meter_slot = |m: u32| slots.get(&m).copied();
    let mut cx = EncodeContext { mode: fast.mode, ifindex: &ifindex, meter_slot: &mut meter_slot, ip_proto: key.ip_proto() };
    fast.install(key, mask, &entry.actions, &entry.credits, &mut cx);
}

fn port_desc(no: u32, name: &str) -> Port {
    let hw_addr = sys::hw_addr(name).unwrap_or_default();
    let flags = sys::if_flags(name).unwrap_or(0);
    let speed = sys::speed_mbps(name).unwrap_or(0);
    let curr = match speed {
        0 => 0,
        s if s >= 100_000 => features::F_100GB_FD,
        s if s >= 40_000 => features::F_40GB_FD,
        s if s >= 10_000 => features::F_10GB_FD,
        s if s >= 1_000 => features::F_1GB_FD,
        s if s >= 100 => features::F_100MB_FD,
        _ => features::F_10MB_FD,
    } | if speed > 0 { features::COPPER } else { 0 };
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

fn link_state(flags: u32) -> u32 {
    const IFF_LOWER_UP: u32 = 0x10000;
    if flags & IFF_LOWER_UP != 0 && flags & libc::IFF_UP as u32 != 0 {
        state::LIVE
    } else {
        state::LINK_DOWN
    }
}

impl Switch {
    /// Opens every port. Fails (naming the port) if one cannot be opened.
    pub fn new(cfg: SwitchConfig, events: Box<dyn FnMut(Event) + Send>) -> std::io::Result<(Switch, SwitchHandle)> {
        let (tx, rx) = mpsc::channel();
        // Listen for link changes before reading each port's state, so that none falls in between.
        let links = LinkMonitor::open().map_err(|e| warn!("no link monitoring: {e}")).ok();
        let bell = Arc::new(Doorbell { fd: EventFd::new()?, pending: AtomicBool::new(false) });
        let mut pipeline = Pipeline::new(cfg.n_tables);
        for &(table, max, evict) in &cfg.table_limits {
            pipeline.set_table_limit(table, max, evict);
        }
        let mut ports = BTreeMap::new();
        let guard = PortGuard::load();
        for (no, name) in &cfg.ports {
            let (rx, tx) = afpacket::open(name, cfg.ring)
                .map_err(|e| std::io::Error::new(e.kind(), format!("port {no} ({name}): {e}")))?;
            let desc = port_desc(*no, name);
            pipeline.set_port(*no, PortView { config: desc.config, state: desc.state });
            ports.insert(
                *no,
                SwitchPort {
                    rx: Some(Box::new(rx)),
                    tx: Some(Box::new(tx)),
                    guard: guard.attach(name),
                    ifindex: sys::ifindex(name).unwrap_or(0),
                    desc,
                    counters: Counters::default(),
                    created: Instant::now(),
                },
            );
        }
        if let Some(name) = &cfg.local_port {
            let (rx, tx) =
                tap::open(name).map_err(|e| std::io::Error::new(e.kind(), format!("LOCAL port ({name}): {e}")))?;
            let desc = port_desc(OFPP_LOCAL, name);
            pipeline.set_port(OFPP_LOCAL, PortView { config: desc.config, state: desc.state });
            ports.insert(
                OFPP_LOCAL,
                SwitchPort {
                    rx: Some(Box::new(rx)),
                    tx: Some(Box::new(tx)),
                    guard: None,
                    ifindex: sys::ifindex(name).unwrap_or(0),
                    desc,
                    counters: Counters::default(),
                    created: Instant::now(),
                },
            );
        }
        if cfg.native {
            let fm = FlowMod {
                priority: 0,
                instructions: vec![Instruction::ApplyActions(vec![Action::output(ofp::port::OFPP_NORMAL)])],
                ..Default::default()
            };
            pipeline.flow_mod(&fm, 0).expect("the NORMAL flow is valid");
        }
        let mut fast = None;
        let mut upcall_rx: Option<Box<dyn PortRx>> = None;
        let mut upcall_guard = None;
        if let Some(mode) = cfg.fastpath {
            let fp = FastPath::open(mode, &cfg.ports)?;
            if mode == FastMode::Tc {
                // Misses come up through the upcall interface; the ports' own receive sockets would
                // see every frame the kernel already forwarded.
                for (no, _) in &cfg.ports {
                    if let Some(p) = ports.get_mut(no) {
                        p.rx = None;
                        p.guard = None;
                    }
                }
                let (_, peer) = fp.upcall.clone().expect("TC mode has an upcall interface");
                let (rx, _tx) = afpacket::open(&peer, cfg.ring)?;
                upcall_rx = Some(Box::new(rx));
                upcall_guard = guard.attach(&peer);
            }
            fast = Some(fp);
        }
        let handle = SwitchHandle { tx, bell: bell.clone() };
        let pipeline_generation = pipeline.cache.generation;
        let sw = Switch {
            guard,
            pipeline,
            ports,
            buffers: Buffers::new(),
            events,
            commands: rx,
            bell,
            links,
            start: Instant::now(),
            pkt: Packet::with_capacity(2048),
            tagged: Vec::with_capacity(2048),
            limit: PacketInLimit::new(cfg.packet_in_rate),
            fast_gen: pipeline_generation,
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

    /// Runs until a [`Command::Shutdown`].
    pub fn run(mut self) {
        let mut ready = Vec::new();
        let mut last_expire = 0u64;
        info!(ports = self.ports.len(), "forwarding");
        loop {
            let mut fds = vec![self.bell.fd.fd()];
            if let Some(l) = &self.links {
                fds.push(l.fd());
            }
            let fixed = fds.len();
            let port_nos: Vec<u32> = self.ports.iter().filter(|(_, p)| p.rx.is_some()).map(|(&n, _)| n).collect();
            fds.extend(port_nos.iter().map(|n| self.ports[n].rx.as_ref().unwrap().rx_fd()));
            if let Some(up) = &self.upcall_rx {
                fds.push(up.rx_fd());
            }
            if let Err(e) = sys::poll_readable(&fds, 100, &mut ready) {
                warn!("poll: {e}");
            }
            // Drain every port round-robin until all are empty (or a command is waiting).
            loop {
                let mut got = 0;
                let now = self.now();
                for &no in &port_nos {
                    got += self.receive(no, now);
                }
                got += self.receive_upcalls(now);
                self.flush_all();
                if got == 0 {
                    break;
                }
                if self.commands_pending() {
                    break;
                }
            }
            if ready.contains(&0) {
                self.bell.fd.drain();
            }
            if !self.run_commands() {
                break;
            }
            self.sync_fast();
            if fixed == 2 && ready.contains(&1) {
                let events = self.links.as_mut().map(|l| l.drain()).unwrap_or_default();
                for ev in events {
                    self.link_event(ev);
                }
                self.sync_fast();
            }
            let now = self.now();
            if now - last_expire >= 100_000_000 {
                last_expire = now;
                self.expire(now);
            }
        }
        if let Some(fast) = &self.fast {
            let [hits, misses, upcalls, slow, drops] = fast.counters();
            info!(hits, misses, upcalls, slow, drops, entries = fast.len(), installed = fast.installed, refused = fast.refused, "fast path totals");
        }
        info!("forwarding stopped");
    }

    fn commands_pending(&self) -> bool {
        self.bell.pending.load(Ordering::Acquire)
    }

    fn receive(&mut self, no: u32, now: u64) -> usize {
        let Some(port) = self.ports.get_mut(&no) else {
            return 0;
        };
        let Some(mut rx) = port.rx.take() else { return 0 };
        let blocked = port.desc.config & (config::NO_RECV | config::PORT_DOWN) != 0;
        let n = rx.recv(RX_BUDGET, &mut |frame: RxFrame<'_>| self.handle_frame(no, frame, blocked, now));
        self.ports.get_mut(&no).unwrap().rx = Some(rx);
        n
    }

    /// Frames the kernel fast path sent up: the ingress port rides in the (metadata) VLAN tag.
    fn receive_upcalls(&mut self, now: u64) -> usize {
        let Some(mut rx) = self.upcall_rx.take() else { return 0 };
        let n = rx.recv(RX_BUDGET, &mut |frame: RxFrame<'_>| {
            let tag = frame.vlan.map(|(_, tci)| tci & 0x0fff);
            let port = tag.and_then(|t| self.fast.as_ref().and_then(|f| f.tag_port.get(&t).copied()));
            let Some(in_port) = port else { return };
            let Some(p) = self.ports.get_mut(&in_port) else { return };
            let blocked = p.desc.config & (config::NO_RECV | config::PORT_DOWN) != 0;
            self.handle_frame(in_port, RxFrame { vlan: None, ..frame }, blocked, now);
        });
        self.upcall_rx = Some(rx);
        n
    }

    fn handle_frame(&mut self, in_port: u32, frame: RxFrame<'_>, blocked: bool, now: u64) {
        let counters = &mut self.ports.get_mut(&in_port).unwrap().counters;
        counters.rx_packets += 1;
        counters.rx_bytes += frame.data.len() as u64;
        if blocked {
            counters.rx_dropped += 1;
            return;
        }
        let mut offload = frame.offload;
        let data: &[u8] = match frame.vlan {
            Some((tpid, tci)) if frame.data.len() >= 12 => {
                self.tagged.clear();
                self.tagged.extend_from_slice(&frame.data[..12]);
                self.tagged.extend_from_slice(&tpid.to_be_bytes());
                self.tagged.extend_from_slice(&tci.to_be_bytes());
                self.tagged.extend_from_slice(&frame.data[12..]);
                if let Some(c) = &mut offload.csum {
                    c.start += 4;
                }
                &self.tagged
            }
            _ => frame.data,
        };
        let (key, layout) = match parse(data, in_port) {
            Ok(p) => p,
            Err(e) => {
                counters.rx_errors += 1;
                debug!(port = in_port, "malformed frame dropped: {e:?}");
                return;
            }
        };
        self.pkt.load(data, offload, layout);
        let mut out = Output {
            ports: &mut self.ports,
            buffers: &mut self.buffers,
            events: &mut *self.events,
            limit: &mut self.limit,
            now,
        };
        let created = self.pipeline.process(&mut self.pkt, &key, now, &mut out);
        if let Some(id) = created.filter(|_| in_port != OFPP_LOCAL && self.fast.is_some()) {
            // The translation may itself have flushed the cache (a newly learned address): the
            // kernel's copy goes first, then the new entry joins it.
            self.sync_fast();
            if let Some(fast) = self.fast.as_mut() {
                mirror(fast, &self.pipeline, &self.ports, id, &key);
            }
        }
    }

    /// Adds what the kernel fast path counted to the OpenFlow counters.
    fn harvest_fast(&mut self, now: u64) {
        let Some(fast) = self.fast.as_mut() else { return };
        let h = fast.harvest();
        for (credits, packets, bytes) in &h.flows {
            self.pipeline.credit_many(credits, *packets, *bytes, now);
        }
        for (port, d) in &h.ports {
            if let Some(p) = self.ports.get_mut(port) {
                p.counters.rx_packets += d.rx_packets;
                p.counters.rx_bytes += d.rx_bytes;
                p.counters.tx_packets += d.tx_packets;
                p.counters.tx_bytes += d.tx_bytes;
            }
        }
        for (id, (p, b, dp, db)) in &h.meters {
            if let Some(m) = self.pipeline.meters.get_mut(*id) {
                m.add_fast_path(*p, *b, *dp, *db);
            }
        }
    }

    /// The pipeline's cache was flushed since the fast path last mirrored it: count what the
    /// kernel saw under the old state, then flush the kernel's copy too. Runs after every command,
    /// so a barrier reply never precedes the flush of what its earlier messages changed.
    fn sync_fast(&mut self) {
        if self.fast.is_none() || self.pipeline.cache.generation == self.fast_gen {
            return;
        }
        let now = self.now();
        self.harvest_fast(now);
        if let Some(fast) = self.fast.as_mut() {
            fast.flush();
        }
        self.fast_gen = self.pipeline.cache.generation;
    }

    fn flush_all(&mut self) {
        for p in self.ports.values_mut() {
            if let Some(tx) = p.tx.as_mut() {
                tx.flush();
            }
        }
    }

    fn expire(&mut self, now: u64) {
        // Fast-path hits count as use for idle timeouts: collect them before expiring.
        self.harvest_fast(now);
        if self.limit.dropped > 0 {
            warn!(dropped = self.limit.dropped, rate = self.cfg.packet_in_rate, "packet-ins over the rate limit dropped");
            self.limit.dropped = 0;
        }
        for msg in self.pipeline.expire(now) {
            (self.events)(Event::FlowRemoved(msg));
        }
        self.sync_fast();
        if let Some(fast) = self.fast.as_mut() {
            fast.sweep();
        }
        for p in self.ports.values_mut() {
            if let Some(rx) = p.rx.as_mut() {
                p.counters.rx_dropped += rx.rx_drops();
            }
        }
    }

    fn link_event(&mut self, ev: LinkEvent) {
        let now = self.now();
        let found = self.ports.iter().find(|(_, p)| p.desc.name == ev.name).map(|(&n, _)| n);
        let Some(no) = found else { return };
        let port = self.ports.get_mut(&no).unwrap();
        if ev.deleted {
            if port.tx.take().is_some() {
                port.rx = None;
                port.guard = None;
                info!(port = no, name = %ev.name, "interface removed");
                self.pipeline.remove_port(no);
                let desc = port.desc.clone();
                (self.events)(Event::PortStatus(PortStatus { reason: port_reason::DELETE, desc }));
            }
            return;
        }
        if port.tx.is_none() {
            // A configured interface (re)appeared.
            match afpacket::open(&ev.name, self.cfg.ring) {
                Ok((rx, tx)) => {
                    port.rx = Some(Box::new(rx));
                    port.tx = Some(Box::new(tx));
                    port.guard = self.guard.attach(&ev.name);
                    port.desc = port_desc(no, &ev.name);
                    port.created = Instant::now();
                    info!(port = no, name = %ev.name, "interface added");
                    let desc = port.desc.clone();
                    self.pipeline.set_port(no, PortView { config: desc.config, state: desc.state });
                    (self.events)(Event::PortStatus(PortStatus { reason: port_reason::ADD, desc }));
                }
                Err(e) => warn!(port = no, "cannot reopen {}: {e}", ev.name),
            }
            return;
        }
        let new_state = link_state(ev.flags);
        let admin_down = ev.flags & libc::IFF_UP as u32 == 0;
        let new_config = (port.desc.config & !config::PORT_DOWN) | if admin_down { config::PORT_DOWN } else { 0 };
        if new_state != port.desc.state || new_config != port.desc.config {
            port.desc.state = new_state;
            port.desc.config = new_config;
            info!(port = no, up = new_state == state::LIVE, "link changed");
            let desc = port.desc.clone();
            self.pipeline.set_port(no, PortView { config: desc.config, state: desc.state });
            (self.events)(Event::PortStatus(PortStatus { reason: port_reason::MODIFY, desc }));
        }
        let _ = now;
    }

    /// Executes queued commands; false on shutdown.
    fn run_commands(&mut self) -> bool {
        self.bell.pending.store(false, Ordering::Release);
        loop {
            match self.commands.try_recv() {
                Ok(Command::OpenFlow { xid, msg, head, reply }) => {
                    self.openflow(xid, msg, &head, &reply);
                    self.sync_fast();
                }
                Ok(Command::Reply { bytes, reply }) => reply(bytes),
                Ok(Command::FailOpen(on)) => {
                    if on != self.pipeline.fail_open {
                        info!(
                            fail_open = on,
                            "standalone mode {}",
                            if on { "learning on its own" } else { "under control" }
                        );
                    }
                    self.pipeline.set_fail_open(on);
                }
                Ok(Command::Shutdown) | Err(TryRecvError::Disconnected) => return false,
                Err(TryRecvError::Empty) => return true,
            }
        }
    }

    fn openflow(&mut self, xid: u32, msg: Message, head: &[u8], reply: &Replier) {
        let now = self.now();
        let send = |m: Message| reply(m.encode(xid));
        let error = |code: ErrorCode| reply(Message::Error(ErrorMsg::reply_to(code, head)).encode(xid));
        match msg {
            Message::FlowMod(fm) => match self.pipeline.flow_mod(&fm, now) {
                Ok(removed) => {
                    for r in removed {
                        (self.events)(Event::FlowRemoved(r));
                    }
                    if fm.buffer_id != NO_BUFFER {
                        if let Err(code) = self.run_buffer(fm.buffer_id, now) {
                            error(code);
                        }
                        self.flush_all();
                    }
                }
                Err(code) => error(code),
            },
            Message::GroupMod(gm) => match self.pipeline.group_mod(&gm, now) {
                Ok(removed) => removed.into_iter().for_each(|r| (self.events)(Event::FlowRemoved(r))),
                Err(code) => error(code),
            },
            Message::MeterMod(mm) => match self.pipeline.meter_mod(&mm, now) {
                Ok(removed) => removed.into_iter().for_each(|r| (self.events)(Event::FlowRemoved(r))),
                Err(code) => error(code),
            },
            Message::PacketOut(po) => {
                if let Err(code) = self.packet_out(po, now) {
                    error(code);
                }
                self.flush_all();
            }
            Message::PortMod(pm) => {
                if let Err(code) = self.port_mod(&pm) {
                    error(code);
                }
            }
            Message::TableMod(tm) => {
                if tm.table_id != OFPTT_ALL && tm.table_id >= self.cfg.n_tables {
                    error(ErrorCode::TableModFailed(TableModFailed::BadTable));
                } else if tm.config & !(3 | pipeline::OFPTC_EVICTION) != 0 {
                    error(ErrorCode::TableModFailed(TableModFailed::BadConfig));
                } else {
                    for (i, t) in self.pipeline.tables.iter_mut().enumerate() {
                        if tm.table_id == OFPTT_ALL || i == tm.table_id as usize {
                            t.config = tm.config;
                            t.evict = tm.config & pipeline::OFPTC_EVICTION != 0;
                        }
                    }
                }
            }
            Message::SetConfig(c) => {
                let known = config_flags::FRAG_MASK | config_flags::INVALID_TTL_TO_CONTROLLER;
                if c.flags & !known != 0 || c.flags & config_flags::FRAG_MASK == config_flags::FRAG_REASM {
                    error(ErrorCode::SwitchConfigFailed(SwitchConfigFailed::BadFlags));
                } else {
                    self.pipeline.set_config(PipelineConfig { flags: c.flags, miss_send_len: c.miss_send_len });
                }
            }
            Message::GetConfigRequest => send(Message::GetConfigReply(ofp::message::SwitchConfig {
                flags: self.pipeline.config.flags,
                miss_send_len: self.pipeline.config.miss_send_len,
            })),
            Message::FeaturesRequest => send(Message::FeaturesReply(self.features())),
            Message::MultipartRequest(req) => match self.multipart(&req.body, now) {
                Ok(body) => {
                    for part in encode_multipart_reply(xid, body) {
                        reply(part);
                    }
                }
                Err(code) => error(code),
            },
            Message::BarrierRequest => send(Message::BarrierReply),
            Message::QueueGetConfigRequest { port } => {
                if port == OFPP_ANY || self.ports.contains_key(&port) {
                    send(Message::QueueGetConfigReply { port, queues: vec![] });
                } else {
                    error(ErrorCode::QueueOpFailed(QueueOpFailed::BadPort));
                }
            }
            Message::Experimenter(_) => error(ErrorCode::BadRequest(BadRequest::BadExperimenter)),
            _ => error(ErrorCode::BadRequest(BadRequest::BadType)),
        }
    }

    /// Sends a buffered packet through the tables (flow-mod with a buffer_id).
    fn run_buffer(&mut self, buffer_id: u32, now: u64) -> Result<(), ErrorCode> {
        let (in_port, frame) = self.buffers.take(buffer_id).ok_or(ErrorCode::BadRequest(BadRequest::BufferUnknown))?;
        let (key, layout) = parse(&frame, in_port).map_err(|_| ErrorCode::BadRequest(BadRequest::BadPacket))?;
        let mut pkt = Packet::new(&frame, Offload::default(), layout);
        let mut out = Output { ports: &mut self.ports, buffers: &mut self.buffers, events: &mut *self.events, limit: &mut self.limit, now };
        self.pipeline.packet_out(&mut pkt, &key, &[Action::output(ofp::port::OFPP_TABLE)], now, &mut out);
        Ok(())
    }

    fn packet_out(&mut self, po: PacketOut, now: u64) -> Result<(), ErrorCode> {
        self.pipeline.check_packet_out(&po.actions)?;
        let valid_in_port = po.in_port == OFPP_CONTROLLER
            || po.in_port == OFPP_ANY
            || (po.in_port < OFPP_MAX && po.in_port != 0)
            || (po.in_port == OFPP_LOCAL && self.ports.contains_key(&OFPP_LOCAL));
        if !valid_in_port {
            return Err(ErrorCode::BadRequest(BadRequest::BadPort));
        }
        let frame = if po.buffer_id != NO_BUFFER {
            self.buffers.take(po.buffer_id).ok_or(ErrorCode::BadRequest(BadRequest::BufferUnknown))?.1
        } else {
            po.data
        };
        let (key, layout) = parse(&frame, po.in_port).map_err(|_| ErrorCode::BadRequest(BadRequest::BadPacket))?;
        let mut pkt = Packet::new(&frame, Offload::default(), layout);
        let mut out = Output { ports: &mut self.ports, buffers: &mut self.buffers, events: &mut *self.events, limit: &mut self.limit, now };
        self.pipeline.packet_out(&mut pkt, &key, &po.actions, now, &mut out);
        Ok(())
    }

    fn port_mod(&mut self, pm: &PortMod) -> Result<(), ErrorCode> {
        let err = |c| Err(ErrorCode::PortModFailed(c));
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
        let desc = port.desc.clone();
        self.pipeline.set_port(pm.port_no, PortView { config: desc.config, state: desc.state });
        (self.events)(Event::PortStatus(PortStatus { reason: port_reason::MODIFY, desc }));
        Ok(())
    }

    fn multipart(&mut self, req: &MultipartRequestBody, now: u64) -> Result<MultipartReplyBody, ErrorCode> {
        use MultipartRequestBody as R;
        self.harvest_fast(now);
        match req {
            R::Desc => Ok(MultipartReplyBody::Desc(Desc {
                mfr_desc: "edgeflow project".into(),
                hw_desc: "Linux userspace datapath (AF_PACKET rings)".into(),
                sw_desc: format!("edgeflow {}", env!("CARGO_PKG_VERSION")),
                serial_num: "none".into(),
                dp_desc: self.cfg.dp_desc.clone(),
            })),
            R::PortDesc => Ok(MultipartReplyBody::PortDesc(
                self.ports.values().filter(|p| p.tx.is_some()).map(|p| p.desc.clone()).collect(),
            )),
            R::PortStats { port_no } => {
                if *port_no != OFPP_ANY && !self.ports.contains_key(port_no) {
                    return Err(ErrorCode::BadRequest(BadRequest::BadPort));
                }
                Ok(MultipartReplyBody::PortStats(
                    self.ports
                        .iter_mut()
                        .filter(|(&n, _)| *port_no == OFPP_ANY || n == *port_no)
                        .map(|(&n, p)| {
                            if let Some(rx) = p.rx.as_mut() {
                                p.counters.rx_dropped += rx.rx_drops();
                            }
                            let c = p.counters;
                            let d = p.created.elapsed();
                            PortStats {
                                port_no: n,
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
                        })
                        .collect(),
                ))
            }
            R::Queue { port_no, queue_id } => {
                if *port_no != OFPP_ANY && !self.ports.contains_key(port_no) {
                    return Err(ErrorCode::QueueOpFailed(QueueOpFailed::BadPort));
                }
                if *queue_id != 0xffff_ffff {
                    return Err(ErrorCode::QueueOpFailed(QueueOpFailed::BadQueue));
                }
                Ok(MultipartReplyBody::Queue(vec![]))
            }
            other => {
                self.pipeline.multipart(other, now).unwrap_or(Err(ErrorCode::BadRequest(BadRequest::BadMultipart)))
            }
        }
    }
}
