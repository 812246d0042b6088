//! Controller channels: active `tcp:`/`tls:`/`unix:` connections with reconnect and backoff,
//! passive `ptcp:`/`ptls:`/`punix:` listeners, the hello handshake, echo keepalive with an
//! inactivity probe, roles and async configuration, and the standalone fail mode.
//!
//! Everything runs on one single-threaded async runtime. Requests that touch switch state go, in
//! arrival order, to the forwarding thread; replies come back on the connection they belong to.

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
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
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
    /// peer's requests and drops asynchronous messages for it until the queue drains; a peer
    /// that takes nothing for a probe interval meanwhile is disconnected.
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

/// A connection's output queue, counted in bytes, and its requests at the forwarding thread
/// whose replies are still to come. Replies are always queued (the requests that cause them are
/// read only while the queue is under its limit); asynchronous messages are dropped while it is
/// over. The writer gives bytes back as it writes and says so.
#[derive(Clone)]
pub(crate) struct Outbox {
    tx: UnboundedSender<Vec<u8>>,
    queued: Arc<AtomicUsize>,
    limit: usize,
    /// Asynchronous messages dropped for want of room.
    pub(crate) async_dropped: Arc<AtomicU64>,
    progress: Arc<tokio::sync::Notify>,
    in_flight: Arc<InFlight>,
}

/// Requests a connection may have at the forwarding thread at once. Past it the connection reads
/// no more until half are answered: its requests cannot pile up in the thread's queue, however
/// fast it sends. (Small replies: even 64 of the largest, 64 KiB each, are 4 MiB.)
pub(crate) const MAX_IN_FLIGHT: usize = 64;

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
    pub(crate) fn new(limit: usize) -> (Outbox, UnboundedReceiver<Vec<u8>>) {
        let (tx, rx) = unbounded_channel();
        let out = Outbox {
            tx,
            queued: Arc::new(AtomicUsize::new(0)),
            limit,
            async_dropped: Arc::new(AtomicU64::new(0)),
            progress: Arc::new(tokio::sync::Notify::new()),
            in_flight: Arc::default(),
        };
        (out, rx)
    }

    /// The reply callback of one request for the forwarding thread: the request counts as in
    /// flight until the thread is done with it (and drops the callback).
    pub(crate) fn replier(&self) -> datapath::Replier {
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
    pub(crate) fn replier_for(&self, n: usize) -> datapath::Replier {
        let request = InFlightRequest(self.in_flight.clone(), n);
        let tx = self.clone();
        Arc::new(move |bytes| {
            let _counted_until_dropped = &request;
            tx.send(bytes)
        })
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
        let n = bytes.len();
        self.queued.fetch_add(n, Ordering::AcqRel);
        if self.tx.send(bytes).is_err() {
            self.queued.fetch_sub(n, Ordering::AcqRel);
        }
    }

    /// Queues an asynchronous message unless the queue is over its limit; false if dropped.
    pub(crate) fn send_async(&self, bytes: Vec<u8>) -> bool {
        if self.over() {
            self.async_dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        self.send(bytes);
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
        Drained { queued: self.queued.clone(), progress: self.progress.clone() }
    }

    /// Completes when the writer next makes progress.
    pub(crate) async fn progressed(&self) {
        self.progress.notified().await
    }
}

/// The writer's side of an [`Outbox`]: it says what it wrote.
pub(crate) struct Drained {
    queued: Arc<AtomicUsize>,
    progress: Arc<tokio::sync::Notify>,
}

impl Drained {
    pub(crate) fn written(&self, n: usize) {
        self.queued.fetch_sub(n, Ordering::AcqRel);
        self.progress.notify_one();
    }
}

/// Creates the channel the forwarding thread reports events on.
pub fn event_channel() -> (Box<dyn FnMut(Event) + Send>, UnboundedReceiver<Event>) {
    let (tx, rx) = unbounded_channel();
    (Box::new(move |e| drop(tx.send(e))), rx)
}

pub(crate) struct ConnState {
    tx: Outbox,
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
}

pub(crate) type HubRef = Rc<RefCell<Hub>>;

impl Hub {
    pub(crate) fn register(&mut self, tx: Outbox, primary: bool) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let async_config = if primary { AsyncConfig::default() } else { AsyncConfig::none() };
        let packet_ins = PacketInLimit::new(self.cfg.controller_packet_in_rate);
        self.conns.insert(id, ConnState { tx, primary, role: role::EQUAL, async_config, packet_ins });
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

    /// Sends an event to every connection whose role and async masks ask for it.
    /// (`AsyncMask` picks the mask pair, for masters and slaves, that an event's kind is under.)
    fn dispatch(&mut self, ev: &Event) {
        let (msg, reason, pick): (Message, u8, AsyncMask) = match ev {
            Event::PacketIn(p) => (Message::PacketIn(p.clone()), p.reason, |a| a.packet_in_mask),
            Event::FlowRemoved(f) => (Message::FlowRemoved(f.clone()), f.reason, |a| a.flow_removed_mask),
            Event::PortStatus(p) => (Message::PortStatus(p.clone()), p.reason, |a| a.port_status_mask),
        };
        let mut bytes = None;
        let now = self.start.elapsed().as_nanos() as u64;
        for c in self.conns.values_mut() {
            let idx = if c.role == role::SLAVE { 1 } else { 0 };
            if pick(&c.async_config)[idx] & (1 << reason) == 0 {
                continue;
            }
            if matches!(ev, Event::PacketIn(_)) && !c.packet_ins.allow(now) {
                ChannelCounters::bump(&self.counters.packet_ins_limited);
                continue;
            }
            let b = bytes.get_or_insert_with(|| msg.encode(0));
            if !c.tx.send_async(b.clone()) {
                ChannelCounters::bump(&self.counters.async_dropped);
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
    mut events: UnboundedReceiver<Event>,
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
    }));
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
                let (features, tls) = (h.cfg.features.clone(), h.cfg.tls.clone());
                h.cfg = AgentConfig { features, tls, ..next };
            }
            std::future::pending::<()>().await
        }
    };
    arm_fail_open(&hub);
    let dispatcher = {
        let hub = hub.clone();
        async move {
            while let Some(ev) = events.recv().await {
                hub.borrow_mut().dispatch(&ev);
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
        let (out, _rx) = Outbox::new(1 << 20);
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
        let (out, _rx) = Outbox::new(1 << 20);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let settles = |out: &Outbox| {
            runtime.block_on(async { tokio::time::timeout(Duration::from_millis(50), out.settled()).await.is_ok() })
        };
        let others: Vec<_> = (0..MAX_IN_FLIGHT - 40).map(|_| out.replier()).collect();
        (0..40).for_each(|_| out.count_request());
        assert_eq!(out.in_flight(), MAX_IN_FLIGHT, "each flow-mod counts as it is read, before its command goes");
        let run = out.replier_for(40);
        assert_eq!(out.in_flight(), MAX_IN_FLIGHT, "and once");
        drop(run);
        // From 64 to 24 at once: past half the maximum without stopping on it, and told all the same.
        assert_eq!(out.in_flight(), MAX_IN_FLIGHT - 40);
        assert!(settles(&out), "the run answered: told, to read again");
        drop(others);
        assert!(settles(&out), "none left: told");
    }
}
