//! Controller channels: active `tcp:`/`tls:`/`unix:` connections with reconnect and backoff,
//! passive `ptcp:`/`ptls:`/`punix:` listeners, the hello handshake, echo keepalive with an
//! inactivity probe, roles and async configuration, and the standalone fail mode.
//!
//! Everything runs on one single-threaded async runtime. Requests that touch switch state go, in
//! arrival order, to the forwarding thread; replies come back on the connection they belong to.
//!
//! About 890 lines with its tests, one concern: the connections as a whole (the hub: roles, async
//! configuration, who gets which event) and what each may have queued for it (`Outbox`, with
//! the backpressure that keeps flow-removed messages undropped); one connection's life is `conn`.

mod conn;
pub mod target;
#[cfg(feature = "tls")]
pub mod tls;
#[cfg(not(feature = "tls"))]
#[path = "no_tls.rs"]
pub mod tls;
mod tls_files;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use datapath::{AtomicU64, ChannelCounters, Command, Event, PacketInLimit, SwitchHandle};
use ofp::message::{role, AsyncConfig, Message, SwitchFeatures};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender, WeakUnboundedSender};
use tracing::{info, warn};

/// Where an event kind's async mask pair (master, slave) is kept.
type AsyncMask = fn(&AsyncConfig) -> [u32; 2];

/// A peer's bytes read as a connection reads them, for the fuzz target `agent_framing`.
pub use conn::fuzzing;
pub use target::Target;
pub use tls_files::{parse_pin, TlsFiles};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailMode {
    /// Without a controller, keep the flows and drop what misses them.
    Secure,
    /// Without a controller, act as a MAC-learning switch.
    Standalone,
}

#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// Primary controllers: they get asynchronous messages and count for the fail mode.
    pub controllers: Vec<Target>,
    /// Service listeners (management tools such as `ovs-ofctl`): no asynchronous messages unless
    /// they ask for them, and they do not count as a controller for the fail mode.
    pub listeners: Vec<Target>,
    pub tls: Option<TlsFiles>,
    pub fail_mode: FailMode,
    /// How long standalone mode waits with no controller before learning on its own.
    pub fail_open_delay: Duration,
    pub probe_interval: Duration,
    pub max_backoff: Duration,
    pub features: SwitchFeatures,
    /// Bytes a connection may have waiting to be written. Past it the switch stops reading the
    /// peer's requests and drops packet-ins for it until the queue drains; past it in
    /// flow-removed and port-status messages alone, which are never dropped, it stops reading
    /// every connection's requests. A peer that takes nothing for a probe interval meanwhile is
    /// disconnected.
    pub output_limit: usize,
    /// Peers connected to each passive listener at once, handshakes included; more are closed
    /// on arrival.
    pub max_connections: usize,
    /// Of those, how many may be in their TLS handshake or before their hello at once: a crowd
    /// of slow handshakes cannot hold every slot.
    pub max_handshakes: usize,
    /// The bytes a multipart request sent in parts may add up to.
    pub max_request_bytes: usize,
    /// Packet-ins per second to each controller (0: only the switch-wide limit).
    pub controller_packet_in_rate: u32,
}

/// Defaults of the connection limits in [`AgentConfig`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;
pub const DEFAULT_MAX_HANDSHAKES: usize = 16;
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 1 << 20;

/// The default of [`AgentConfig::output_limit`]: about a minute of packet-ins at the default rate
/// limit. (A reply to one request may exceed it, a flow dump of a big table say: it is queued
/// whole, and reading waits until it has drained.)
pub const DEFAULT_OUTPUT_LIMIT: usize = 16 << 20;

/// What a queued message is, for its accounting: a reply (or anything the connection itself
/// owes), or an asynchronous message of one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Reply,
    PacketIn,
    FlowRemoved,
    PortStatus,
}

/// The asynchronous kinds, in the order of [`Outbox`]'s per-kind counts.
pub(crate) const ASYNC_KINDS: [Kind; 3] = [Kind::PacketIn, Kind::FlowRemoved, Kind::PortStatus];

impl Kind {
    fn async_index(self) -> Option<usize> {
        ASYNC_KINDS.iter().position(|&k| k == self)
    }

    /// Its name in counters and logs.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Reply => "reply",
            Kind::PacketIn => "packet_in",
            Kind::FlowRemoved => "flow_removed",
            Kind::PortStatus => "port_status",
        }
    }
}

/// How many connections hold more flow-removed and port-status bytes than their output limit.
/// While any does, no connection's requests are read: a controller that cannot keep up with
/// what the switch owes it slows every request that could make more (a delete's flow-removed
/// messages are paced by its reading), rather than losing what a flow's removal reported. The
/// one that never reads is closed after a probe interval, which ends the hold.
pub(crate) type Congestion = Arc<tokio::sync::watch::Sender<usize>>;

/// A connection's output queue, counted in bytes, and its requests at the forwarding thread
/// whose replies are still to come. Replies are always queued (the requests that cause them are
/// read only while the queue is under its limit); so are flow-removed and port-status messages,
/// which are lost only with the connection. Packet-ins, which a controller cannot miss for good
/// (the next frame asks again), are dropped while it is over, as Open vSwitch drops them. The
/// writer gives bytes back as it writes and says so.
#[derive(Clone)]
pub(crate) struct Outbox {
    tx: UnboundedSender<(Kind, Vec<u8>)>,
    queued: Arc<AtomicUsize>,
    limit: usize,
    /// Packet-ins dropped for want of room.
    pub(crate) packet_ins_dropped: Arc<AtomicU64>,
    /// Asynchronous messages queued and not yet written, per kind of [`ASYNC_KINDS`]: at the
    /// connection's end, what it lost.
    pub(crate) pending: Arc<[AtomicUsize; 3]>,
    /// The bytes of flow-removed and port-status messages queued, and whether they are over the
    /// limit (counted in `congestion` then).
    kept_bytes: Arc<AtomicUsize>,
    congested: Arc<std::sync::atomic::AtomicBool>,
    congestion: Congestion,
    progress: Arc<tokio::sync::Notify>,
    in_flight: Arc<InFlight>,
    /// The forwarding thread's channel of notices, which replies go through when set
    /// ([`Outbox::in_order_with_events`]).
    notices: Option<WeakUnboundedSender<Notice>>,
}

/// Requests a connection may have at the forwarding thread at once. Past it the connection reads
/// no more until half are answered: its requests cannot pile up in the thread's queue, however
/// fast it sends. (Small replies: even 256 of the largest, 64 KiB each, are 16 MiB.) Half of it
/// is a run of flow-mods (conn.rs `FLOW_MOD_RUN`), and each run is a hand-over between the two
/// threads, often a wake-up each way: at 64 a bulk install of a million flows spent some 30 %
/// of both threads' time switching between them.
pub(crate) const MAX_IN_FLIGHT: usize = 256;

/// A connection's requests at the forwarding thread. The thread drops a request's
/// [`InFlightRequest`] once it has queued the whole reply: the count never leaves out a reply
/// still being built.
#[derive(Default)]
struct InFlight {
    count: AtomicUsize,
    /// Told when the count falls to half the maximum (reading may resume) or to none (a
    /// multipart request may go).
    settled: tokio::sync::Notify,
}

/// Requests counted in flight (one, or a run of flow-mods sent as one command) until dropped.
struct InFlightRequest(Arc<InFlight>, usize);

impl Drop for InFlightRequest {
    fn drop(&mut self) {
        let before = self.0.count.fetch_sub(self.1, Ordering::AcqRel);
        let left = before - self.1;
        if left == 0 || (before > MAX_IN_FLIGHT / 2 && left <= MAX_IN_FLIGHT / 2) {
            self.0.settled.notify_one();
        }
    }
}

impl Outbox {
    pub(crate) fn new(limit: usize, congestion: Congestion) -> (Outbox, UnboundedReceiver<(Kind, Vec<u8>)>) {
        let (tx, rx) = unbounded_channel();
        let out = Outbox {
            tx,
            queued: Arc::new(AtomicUsize::new(0)),
            limit,
            packet_ins_dropped: Arc::new(AtomicU64::new(0)),
            pending: Arc::default(),
            kept_bytes: Arc::new(AtomicUsize::new(0)),
            congested: Arc::default(),
            congestion,
            progress: Arc::new(tokio::sync::Notify::new()),
            in_flight: Arc::default(),
            notices: None,
        };
        (out, rx)
    }

    /// The reply callback of one request for the forwarding thread: the request counts as in
    /// flight until the thread is done with it (and drops the callback).
    pub(crate) fn replier(self: &Arc<Self>) -> datapath::Replier {
        self.in_flight.count.fetch_add(1, Ordering::AcqRel);
        self.replier_for(1)
    }

    /// Counts one more request in flight before its command is made (a flow-mod waiting to go
    /// with the next ones): the limit applies to it as it is read.
    pub(crate) fn count_request(&self) {
        self.in_flight.count.fetch_add(1, Ordering::AcqRel);
    }

    /// The reply callback of `n` requests counted already ([`Outbox::count_request`]), sent
    /// as one command: they stay in flight until the thread is done with all of them.
    ///
    /// The callback holds the connection's outbox shared, not a copy: a copy is a dozen
    /// reference counts taken and given back, and a larger allocation, for every request
    /// (a new flow's setup makes two), where most requests (flow-mods, packet-outs) have no
    /// reply at all.
    pub(crate) fn replier_for(self: &Arc<Self>, n: usize) -> datapath::Replier {
        let request = InFlightRequest(self.in_flight.clone(), n);
        let tx = Arc::clone(self);
        Arc::new(move |bytes| {
            let _counted_until_dropped = &request;
            match tx.notices.as_ref().and_then(|n| n.upgrade()) {
                Some(notices) => drop(notices.send(Notice::Reply(Outbox::clone(&tx), bytes))),
                None => tx.send(bytes),
            }
        })
    }

    /// Has this connection's replies follow the asynchronous messages the forwarding thread
    /// reported before them: a reply goes through the thread's notice channel, behind its
    /// events, rather than straight to the queue. So a barrier's reply comes after the
    /// flow-removed messages of the deletes before it (OpenFlow 1.3 §6.2: everything before
    /// a barrier is done, its messages sent, before what follows), as Open vSwitch sends them;
    /// a controller that counts them at the barrier has them all.
    pub(crate) fn in_order_with_events(mut self, notices: WeakUnboundedSender<Notice>) -> Outbox {
        self.notices = Some(notices);
        self
    }

    /// Requests at the forwarding thread, their replies not all queued yet.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.count.load(Ordering::Acquire)
    }

    /// Completes when the requests in flight fall to half the maximum, or to none (perhaps
    /// earlier: the caller looks again).
    pub(crate) async fn settled(&self) {
        self.in_flight.settled.notified().await
    }

    /// Queues a reply (or anything the connection itself owes).
    pub(crate) fn send(&self, bytes: Vec<u8>) {
        self.queue(Kind::Reply, bytes);
    }

    /// False if the writer is gone (the connection is closing).
    fn queue(&self, kind: Kind, bytes: Vec<u8>) -> bool {
        let n = bytes.len();
        self.queued.fetch_add(n, Ordering::AcqRel);
        if self.tx.send((kind, bytes)).is_err() {
            self.queued.fetch_sub(n, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Queues an asynchronous message; false if it was dropped (a packet-in while the queue is
    /// over its limit). A flow-removed or port-status message is always queued; past the limit
    /// its connection holds every connection's reading ([`Congestion`]).
    pub(crate) fn send_async(&self, kind: Kind, bytes: Vec<u8>) -> bool {
        if kind == Kind::PacketIn && self.over() {
            self.packet_ins_dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let n = bytes.len();
        if let Some(i) = kind.async_index() {
            self.pending[i].fetch_add(1, Ordering::Relaxed);
        }
        if !self.queue(kind, bytes) {
            return true; // the writer is gone: lost with the connection, counted at its end
        }
        if kind != Kind::PacketIn {
            let kept = self.kept_bytes.fetch_add(n, Ordering::AcqRel) + n;
            if kept > self.limit && !self.congested.swap(true, Ordering::AcqRel) {
                self.congestion.send_modify(|c| *c += 1);
            }
        }
        true
    }

    pub(crate) fn over(&self) -> bool {
        self.queued() > self.limit
    }

    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// What the writer needs to give bytes back (not a sender: the queue closes when the
    /// connection's senders are gone, and the writer then ends).
    pub(crate) fn drain_side(&self) -> Drained {
        Drained { out: self.clone_counts(), progress: self.progress.clone() }
    }

    fn clone_counts(&self) -> Counts {
        Counts {
            queued: self.queued.clone(),
            pending: self.pending.clone(),
            kept_bytes: self.kept_bytes.clone(),
            congested: self.congested.clone(),
            congestion: self.congestion.clone(),
            limit: self.limit,
        }
    }

    /// Completes when the writer next makes progress.
    pub(crate) async fn progressed(&self) {
        self.progress.notified().await
    }
}

/// An [`Outbox`]'s counts, without its sender.
struct Counts {
    queued: Arc<AtomicUsize>,
    pending: Arc<[AtomicUsize; 3]>,
    kept_bytes: Arc<AtomicUsize>,
    congested: Arc<std::sync::atomic::AtomicBool>,
    congestion: Congestion,
    limit: usize,
}

/// What one write took off the queue: bytes, and asynchronous messages per kind.
#[derive(Default)]
pub(crate) struct Written {
    bytes: usize,
    kept_bytes: usize,
    messages: [usize; 3],
}

impl Written {
    pub(crate) fn add(&mut self, kind: Kind, n: usize) {
        self.bytes += n;
        if let Some(i) = kind.async_index() {
            self.messages[i] += 1;
        }
        if matches!(kind, Kind::FlowRemoved | Kind::PortStatus) {
            self.kept_bytes += n;
        }
    }
}

/// The writer's side of an [`Outbox`]: it says what it wrote. When the writer ends, its
/// connection no longer holds anyone's reading.
pub(crate) struct Drained {
    out: Counts,
    progress: Arc<tokio::sync::Notify>,
}

impl Drained {
    pub(crate) fn written(&self, w: &Written) {
        let c = &self.out;
        c.queued.fetch_sub(w.bytes, Ordering::AcqRel);
        for (pending, n) in c.pending.iter().zip(w.messages) {
            pending.fetch_sub(n, Ordering::Relaxed);
        }
        let kept = c.kept_bytes.fetch_sub(w.kept_bytes, Ordering::AcqRel) - w.kept_bytes;
        if kept <= c.limit {
            self.release();
        }
        self.progress.notify_one();
    }

    fn release(&self) {
        if self.out.congested.swap(false, Ordering::AcqRel) {
            self.out.congestion.send_modify(|c| *c -= 1);
        }
    }
}

impl Drop for Drained {
    fn drop(&mut self) {
        self.release();
    }
}

/// What the forwarding thread hands the agent, in the order it did: its events, and the
/// replies of connections whose replies follow them ([`Outbox::in_order_with_events`]).
pub(crate) enum Notice {
    Event(Event),
    Reply(Outbox, Vec<u8>),
}

/// The agent's end of the forwarding thread's notices ([`event_channel`]).
pub struct Events {
    rx: UnboundedReceiver<Notice>,
    /// Weak, so that the channel ends with the thread's sender, which says the thread ended.
    tx: WeakUnboundedSender<Notice>,
}

/// Creates the channel the forwarding thread reports events on.
pub fn event_channel() -> (Box<dyn FnMut(Event) + Send>, Events) {
    let (tx, rx) = unbounded_channel();
    let weak = tx.downgrade();
    (Box::new(move |e| drop(tx.send(Notice::Event(e)))), Events { rx, tx: weak })
}

pub(crate) struct ConnState {
    tx: Outbox,
    /// Who it is, for the log.
    peer: String,
    /// Whether its first packet-in dropped for a full queue was logged (one line a connection).
    packet_in_drop_logged: bool,
    primary: bool,
    role: u32,
    async_config: AsyncConfig,
    packet_ins: PacketInLimit,
}

/// How many of a listener's connections are open, and how many of them are still in their
/// handshake; a [`Slot`] holds one place in a count for as long as it lives. Each listener
/// counts its own: a crowd on one (a TCP port open to a network) leaves another (the local
/// management socket) its places.
#[derive(Default)]
pub(crate) struct Slots {
    pub(crate) connections: Cell<usize>,
    pub(crate) handshakes: Cell<usize>,
}

/// Which of a listener's counts turned a peer away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Full {
    Connections = 0,
    Handshakes = 1,
}

pub(crate) struct Slot {
    slots: Rc<Slots>,
    handshake: bool,
}

impl Slots {
    /// A connection's places (the connection's, and a handshake's), or the count that is full.
    pub(crate) fn take(self: &Rc<Self>, cfg: &AgentConfig) -> Result<(Slot, Slot), Full> {
        if self.connections.get() >= cfg.max_connections {
            return Err(Full::Connections);
        }
        if self.handshakes.get() >= cfg.max_handshakes {
            return Err(Full::Handshakes);
        }
        self.connections.set(self.connections.get() + 1);
        self.handshakes.set(self.handshakes.get() + 1);
        Ok((Slot { slots: self.clone(), handshake: false }, Slot { slots: self.clone(), handshake: true }))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let count = if self.handshake { &self.slots.handshakes } else { &self.slots.connections };
        count.set(count.get() - 1);
    }
}

pub(crate) struct Hub {
    conns: HashMap<u64, ConnState>,
    next_id: u64,
    generation: Option<u64>,
    pub(crate) switch: SwitchHandle,
    pub(crate) cfg: AgentConfig,
    primaries_up: usize,
    /// Bumped whenever the number of connected primaries changes, so a pending fail-open timer can
    /// tell it is stale.
    epoch: u64,
    pub(crate) counters: Arc<ChannelCounters>,
    /// When the hub began: the clock of the per-controller packet-in limits.
    start: std::time::Instant,
    /// Connections whose flow-removed and port-status messages are over their limit: while
    /// any are, no connection's requests are read.
    pub(crate) congestion: Congestion,
    /// The forwarding thread's notice channel, which every connection's replies go through.
    pub(crate) notices: WeakUnboundedSender<Notice>,
}

pub(crate) type HubRef = Rc<RefCell<Hub>>;

impl Hub {
    pub(crate) fn register(&mut self, tx: Outbox, primary: bool, peer: &str) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let async_config = if primary { AsyncConfig::default() } else { AsyncConfig::none() };
        let packet_ins = PacketInLimit::new(self.cfg.controller_packet_in_rate);
        let peer = peer.to_string();
        let state =
            ConnState { tx, peer, packet_in_drop_logged: false, primary, role: role::EQUAL, async_config, packet_ins };
        self.conns.insert(id, state);
        if primary {
            self.primaries_up += 1;
            self.epoch += 1;
            if self.cfg.fail_mode == FailMode::Standalone && self.primaries_up == 1 {
                self.switch.send(Command::FailOpen(false));
            }
        }
        id
    }

    /// Returns true when the last primary went away (the caller arms the fail-open timer).
    pub(crate) fn unregister(&mut self, id: u64) -> bool {
        let Some(c) = self.conns.remove(&id) else { return false };
        if c.primary {
            self.primaries_up -= 1;
            self.epoch += 1;
            return self.primaries_up == 0;
        }
        false
    }

    pub(crate) fn role(&self, id: u64) -> u32 {
        self.conns.get(&id).map_or(role::EQUAL, |c| c.role)
    }

    pub(crate) fn async_config(&self, id: u64) -> AsyncConfig {
        self.conns.get(&id).map_or_else(AsyncConfig::none, |c| c.async_config)
    }

    pub(crate) fn set_async(&mut self, id: u64, a: AsyncConfig) {
        if let Some(c) = self.conns.get_mut(&id) {
            c.async_config = a;
        }
    }

    /// Role request (spec §6.3.5). Err(()) means a stale generation id.
    pub(crate) fn request_role(&mut self, id: u64, requested: u32, generation_id: u64) -> Result<(u32, u64), ()> {
        if requested == role::MASTER || requested == role::SLAVE {
            if let Some(g) = self.generation {
                if (generation_id.wrapping_sub(g) as i64) < 0 {
                    return Err(());
                }
            }
            self.generation = Some(generation_id);
        }
        if requested != role::NOCHANGE {
            if requested == role::MASTER {
                for (other, c) in self.conns.iter_mut() {
                    if *other != id && c.role == role::MASTER {
                        c.role = role::SLAVE;
                    }
                }
            }
            if let Some(c) = self.conns.get_mut(&id) {
                c.role = requested;
            }
        }
        Ok((self.role(id), self.generation.unwrap_or(0)))
    }

    /// Sends an event to every connection whose role and async masks ask for it: a packet-in by
    /// [`Hub::dispatch_packet_in`] (its rate limit, and dropped past a connection's output limit);
    /// a flow-removed or port-status message is never dropped (`Outbox::send_async`).
    /// (`AsyncMask` picks the mask pair, for masters and slaves, that an event's kind is under.)
    fn dispatch(&mut self, ev: Event) {
        let (msg, reason, pick, kind): (Message, u8, AsyncMask, Kind) = match ev {
            Event::PacketIn(p) => return self.dispatch_packet_in(p),
            Event::FlowRemoved(f) => {
                let reason = f.reason;
                (Message::FlowRemoved(f), reason, |a| a.flow_removed_mask, Kind::FlowRemoved)
            }
            Event::PortStatus(p) => {
                let reason = p.reason;
                (Message::PortStatus(p), reason, |a| a.port_status_mask, Kind::PortStatus)
            }
        };
        let mut bytes = None;
        for c in self.conns.values_mut() {
            let idx = if c.role == role::SLAVE { 1 } else { 0 };
            if pick(&c.async_config)[idx] & (1 << reason) == 0 {
                continue;
            }
            let b = bytes.get_or_insert_with(|| msg.encode(0));
            let queued = c.tx.send_async(kind, b.clone());
            debug_assert!(queued, "only packet-ins are dropped");
        }
    }
}

impl Hub {
    /// Sends a packet-in to every connection whose role, async mask and packet-in limit let it
    /// through, for less of a new flow's setup: the packet-in is
    /// taken rather than copied, encoded once into a buffer of its size, and the last (most
    /// often the only) connection gets that buffer itself; the others a copy each.
    fn dispatch_packet_in(&mut self, p: ofp::message::PacketIn) {
        let reason = p.reason;
        let now = self.start.elapsed().as_nanos() as u64;
        let mut to: Option<&mut ConnState> = None;
        let mut bytes: Option<Vec<u8>> = None;
        let (counters, limit) = (&self.counters, self.cfg.output_limit);
        let mut msg = Some(Message::PacketIn(p));
        for c in self.conns.values_mut() {
            let idx = if c.role == role::SLAVE { 1 } else { 0 };
            if c.async_config.packet_in_mask[idx] & (1 << reason) == 0 {
                continue;
            }
            if !c.packet_ins.allow(now) {
                ChannelCounters::bump(&counters.packet_ins_limited);
                continue;
            }
            let b = bytes.get_or_insert_with(|| {
                let msg = msg.take().expect("encoded once");
                let Message::PacketIn(p) = &msg else { unreachable!("a packet-in") };
                let padded_match = p.match_.unpadded_len().div_ceil(8) * 8;
                let mut out = Vec::with_capacity(HEADER_AND_FIXED_PACKET_IN + padded_match + 2 + p.data.len());
                msg.encode_into(0, &mut out);
                out
            });
            if let Some(prev) = to.replace(c) {
                prev.queue_packet_in(b.clone(), counters, limit);
            }
        }
        if let (Some(c), Some(b)) = (to, bytes) {
            c.queue_packet_in(b, counters, limit);
        }
    }
}

/// An `ofp_packet_in`'s bytes before its match: the header and the fixed fields.
const HEADER_AND_FIXED_PACKET_IN: usize = 8 + 16;

impl ConnState {
    /// Queues a packet-in's bytes; counted (and logged once a connection) if dropped for a full
    /// output queue.
    fn queue_packet_in(&mut self, bytes: Vec<u8>, counters: &ChannelCounters, limit: usize) {
        if !self.tx.send_async(Kind::PacketIn, bytes) {
            ChannelCounters::bump(&counters.async_dropped[0]);
            if !self.packet_in_drop_logged {
                self.packet_in_drop_logged = true;
                warn!(peer = %self.peer, limit,
                      "output over its limit: dropping packet-ins for this peer until it drains \
                       (counted in channel.async_dropped_packet_in; logged once a connection)");
            }
        }
    }
}

pub(crate) fn arm_fail_open(hub: &HubRef) {
    let (standalone, epoch, delay) = {
        let h = hub.borrow();
        (h.cfg.fail_mode == FailMode::Standalone && !h.cfg.controllers.is_empty(), h.epoch, h.cfg.fail_open_delay)
    };
    if !standalone {
        return;
    }
    let hub = hub.clone();
    tokio::task::spawn_local(async move {
        tokio::time::sleep(delay).await;
        let h = hub.borrow();
        if h.epoch == epoch && h.primaries_up == 0 {
            info!("no controller for {delay:?}: standalone learning switch");
            h.switch.send(Command::FailOpen(true));
        }
    });
}

/// Runs the agent until `shutdown` completes. Must be called inside a `LocalSet`. `listening` is
/// called once every listener is bound (a service is ready only when its tools can reach it).
pub async fn run(
    cfg: AgentConfig,
    switch: SwitchHandle,
    events: Events,
    mut updates: UnboundedReceiver<AgentConfig>,
    listening: impl FnOnce(),
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    let client_tls = match (&cfg.tls, cfg.controllers.iter().chain(&cfg.listeners).any(|t| matches!(t, Target::Tls(_))))
    {
        (Some(files), true) => Some(tls::client_config(files)?),
        (None, true) => return Err("a tls: target needs --private-key, --certificate and --ca-cert".into()),
        _ => None,
    };
    let server_tls =
        match (&cfg.tls, cfg.controllers.iter().chain(&cfg.listeners).any(|t| matches!(t, Target::PTls(_)))) {
            (Some(files), true) => Some(tls::server_config(files)?),
            (None, true) => return Err("a ptls: target needs --private-key, --certificate and --ca-cert".into()),
            _ => None,
        };
    let counters = switch.channel.clone();
    let hub: HubRef = Rc::new(RefCell::new(Hub {
        counters,
        start: std::time::Instant::now(),
        conns: HashMap::new(),
        next_id: 1,
        generation: None,
        switch,
        cfg: cfg.clone(),
        primaries_up: 0,
        epoch: 0,
        congestion: Arc::new(tokio::sync::watch::channel(0).0),
        notices: events.tx.clone(),
    }));
    let mut events = events.rx;
    // Each target's loop runs until its stop is set (it left the configuration).
    let mut running: Vec<(Target, bool, tokio::sync::watch::Sender<bool>)> = Vec::new();
    let start = |t: &Target, primary: bool, listener: Option<conn::Listener>| {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        match listener {
            Some(l) => tokio::task::spawn_local(conn::accept_loop(l, hub.clone(), primary, stopped)),
            None => {
                let tls = client_tls.clone();
                tokio::task::spawn_local(conn::active_loop(t.clone(), hub.clone(), primary, tls, stopped))
            }
        };
        (t.clone(), primary, stop)
    };
    for (targets, primary) in [(&cfg.controllers, true), (&cfg.listeners, false)] {
        for t in targets {
            let listener = if t.is_passive() {
                let l = conn::Listener::bind(t, server_tls.clone()).await.map_err(|e| format!("{t}: {e}"))?;
                info!(target = %t, primary, "listening");
                Some(l)
            } else {
                None
            };
            running.push(start(t, primary, listener));
        }
    }
    listening();
    // A configuration read again: targets that left stop, new ones start, limits apply to the
    // connections that come next. (TLS files are read at start only: the caller refuses a change.)
    let reconfigure = {
        let hub = hub.clone();
        async move {
            while let Some(next) = updates.recv().await {
                let wanted: Vec<(&Target, bool)> = next
                    .controllers
                    .iter()
                    .map(|t| (t, true))
                    .chain(next.listeners.iter().map(|t| (t, false)))
                    .collect();
                running.retain(|(t, primary, stop)| {
                    let stays = wanted.contains(&(t, *primary));
                    if !stays {
                        info!(target = %t, primary, "left the configuration: stopping");
                        let _ = stop.send(true);
                    }
                    stays
                });
                for (t, primary) in wanted {
                    if running.iter().any(|(r, p, _)| r == t && *p == primary) {
                        continue;
                    }
                    let listener = if t.is_passive() {
                        match conn::Listener::bind(t, server_tls.clone()).await {
                            Ok(l) => {
                                info!(target = %t, primary, "listening");
                                Some(l)
                            }
                            Err(e) => {
                                warn!(target = %t, "cannot listen: {e}");
                                continue;
                            }
                        }
                    } else {
                        info!(target = %t, primary, "joined the configuration");
                        None
                    };
                    running.push(start(t, primary, listener));
                }
                let mut h = hub.borrow_mut();
                let (features, tls) = (h.cfg.features, h.cfg.tls.clone());
                h.cfg = AgentConfig { features, tls, ..next };
            }
            std::future::pending::<()>().await
        }
    };
    arm_fail_open(&hub);
    let dispatcher = {
        let hub = hub.clone();
        async move {
            while let Some(notice) = events.recv().await {
                match notice {
                    Notice::Event(ev) => hub.borrow_mut().dispatch(ev),
                    Notice::Reply(out, bytes) => out.send(bytes),
                }
            }
        }
    };
    tokio::select! {
        // Its events end only with the thread. Ending well here would be a clean exit, which
        // systemd's Restart=on-failure leaves stopped; a panic ends the process before this.
        _ = dispatcher => return Err("the forwarding thread ended: nothing forwards".into()),
        _ = reconfigure => {}
        _ = shutdown => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_in_flight_until_the_forwarding_thread_is_done_with_it() {
        let (out, _rx) = Outbox::new(1 << 20, Arc::new(tokio::sync::watch::channel(0).0));
        let out = Arc::new(out);
        let replies: Vec<_> = (0..MAX_IN_FLIGHT).map(|_| out.replier()).collect();
        assert_eq!(out.in_flight(), MAX_IN_FLIGHT);
        replies[0](vec![0; 100]);
        assert_eq!((out.in_flight(), out.queued()), (MAX_IN_FLIGHT, 100), "a reply in parts may go on");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let settles = |out: &Outbox| {
            runtime.block_on(async { tokio::time::timeout(Duration::from_millis(50), out.settled()).await.is_ok() })
        };
        let mut replies = replies.into_iter();
        replies.by_ref().take(MAX_IN_FLIGHT / 2 - 1).for_each(drop);
        assert!(!settles(&out), "reading resumes at half the maximum, not before");
        drop(replies.next());
        assert!(settles(&out), "half answered: told, to read again");
        replies.by_ref().take(MAX_IN_FLIGHT / 2 - 1).for_each(drop);
        assert!(!settles(&out));
        drop(replies.next());
        assert_eq!(out.in_flight(), 0);
        assert!(settles(&out), "none left: told, for a multipart request to go");
        assert_eq!(out.queued(), 100, "what was queued stays counted until written");
    }

    #[test]
    fn a_run_of_flow_mods_is_in_flight_one_by_one_and_answered_together() {
        let (out, _rx) = Outbox::new(1 << 20, Arc::new(tokio::sync::watch::channel(0).0));
        let out = Arc::new(out);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let settles = |out: &Outbox| {
            runtime.block_on(async { tokio::time::timeout(Duration::from_millis(50), out.settled()).await.is_ok() })
        };
        // A run longer than half the maximum: its answer takes the count past half at once.
        let n = MAX_IN_FLIGHT / 2 + 8;
        let others: Vec<_> = (0..MAX_IN_FLIGHT - n).map(|_| out.replier()).collect();
        (0..n).for_each(|_| out.count_request());
        assert_eq!(out.in_flight(), MAX_IN_FLIGHT, "each flow-mod counts as it is read, before its command goes");
        let run = out.replier_for(n);
        assert_eq!(out.in_flight(), MAX_IN_FLIGHT, "and once");
        drop(run);
        // From the maximum to under half at once: past half without stopping on it, and told all the same.
        assert_eq!(out.in_flight(), MAX_IN_FLIGHT - n);
        assert!(settles(&out), "the run answered: told, to read again");
        drop(others);
        assert!(settles(&out), "none left: told");
    }

    #[test]
    fn past_the_limit_packet_ins_are_dropped_and_flow_removed_messages_kept_holding_every_reader() {
        let congestion: Congestion = Arc::new(tokio::sync::watch::channel(0).0);
        let readers = congestion.subscribe();
        let (out, mut rx) = Outbox::new(1000, congestion.clone());
        let writer = out.drain_side();
        // 11 flow-removed messages of 100 bytes: the last is over the limit, kept all the same.
        for _ in 0..11 {
            assert!(out.send_async(Kind::FlowRemoved, vec![0; 100]));
        }
        assert!(out.over());
        assert_eq!(*readers.borrow(), 1, "over the limit in flow-removed messages: every reader holds");
        assert!(!out.send_async(Kind::PacketIn, vec![0; 100]), "a packet-in is dropped past the limit");
        assert_eq!(out.packet_ins_dropped.load(Ordering::Relaxed), 1);
        assert!(out.send_async(Kind::PortStatus, vec![0; 50]), "a port-status is not");
        assert_eq!(out.pending.each_ref().map(|n| n.load(Ordering::Relaxed)), [0, 11, 1]);
        // The writer takes four of them: 700 bytes left, under the limit, and reading resumes.
        let mut w = Written::default();
        for _ in 0..4 {
            let (kind, bytes) = rx.try_recv().unwrap();
            w.add(kind, bytes.len());
        }
        writer.written(&w);
        assert_eq!(*readers.borrow(), 0);
        assert_eq!(out.pending.each_ref().map(|n| n.load(Ordering::Relaxed)), [0, 7, 1], "what a close would lose");
        // Over again, then the writer ends (the connection closed): it holds no one any more.
        for _ in 0..4 {
            out.send_async(Kind::FlowRemoved, vec![0; 100]);
        }
        assert_eq!(*readers.borrow(), 1);
        drop(writer);
        assert_eq!(*readers.borrow(), 0);
        // Replies count against the limit, not towards holding the others.
        let (other, _rx) = Outbox::new(1000, congestion.clone());
        other.send(vec![0; 5000]);
        assert!(other.over());
        assert_eq!(*readers.borrow(), 0);
    }
}
