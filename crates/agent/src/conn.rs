//! One controller connection: framing, handshake, keepalive, and per-message dispatch.
//!
//! About 810 lines with its tests, one concern: a connection's life and what it may send,
//! the role check on a message's bytes included (it must run before the decoder, which is here);
//! what each request does is the hub's (`lib.rs`) and the switch's.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use datapath::Command;
use ofp::error::{BadRequest, ErrorCode, HelloFailed, RoleRequestFailed};
use ofp::message::{role, ErrorMsg, Header, Hello, Message, RoleMsg, HEADER_LEN, OFP_VERSION};
use ofp::multipart::{MultipartRequest, MultipartRequestBody, MORE};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::{sleep, timeout, Instant};
use tracing::{debug, info, warn};

use crate::target::Target;
use crate::tls;
use crate::{arm_fail_open, Drained, Full, HubRef, Kind, Outbox, Slot, Slots, Written, ASYNC_KINDS, MAX_IN_FLIGHT};
use datapath::ChannelCounters;

pub mod fuzzing;

const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) enum Listener {
    Tcp(TcpListener, Option<tls::Acceptor>),
    Unix(UnixListener),
}

impl Listener {
    pub(crate) async fn bind(t: &Target, tls: Option<Arc<tls::ServerConfig>>) -> std::io::Result<Listener> {
        match t {
            Target::PTcp(a) => Ok(Listener::Tcp(TcpListener::bind(a).await?, None)),
            Target::PTls(a) => Ok(Listener::Tcp(TcpListener::bind(a).await?, tls.map(tls::acceptor))),
            Target::PUnix(p) => {
                // A socket file left by an earlier run would make bind fail.
                let _ = std::fs::remove_file(p);
                Ok(Listener::Unix(UnixListener::bind(p)?))
            }
            _ => Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a passive target")),
        }
    }
}

/// Accepts peers for as long as the switch runs, each within the connection and handshake
/// limits: a peer over either is closed at once, counted, and logged (at most every 10 seconds,
/// with how many were refused since).
pub(crate) async fn accept_loop(listener: Listener, hub: HubRef, primary: bool, stop: Stop) {
    let mut refused = [Refusals::default(), Refusals::default()];
    let slots = Rc::new(Slots::default());
    loop {
        let accept = async {
            match &listener {
                Listener::Tcp(l, tls) => l.accept().await.map(|(s, peer)| {
                    let _ = s.set_nodelay(true);
                    (Stream::Tcp(s, tls.clone()), peer.to_string())
                }),
                Listener::Unix(l) => l.accept().await.map(|(s, _)| (Stream::Unix(s), "unix".to_string())),
            }
        };
        let accepted: std::io::Result<(Stream, String)> = tokio::select! {
            a = accept => a,
            _ = stopped(stop.clone()) => return,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                warn!("accept: {e}");
                sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let places = slots.take(&hub.borrow().cfg);
        let (connection, handshake) = match places {
            Ok(p) => p,
            Err(full) => {
                let h = hub.borrow();
                let (counter, limit, what) = match full {
                    Full::Connections => (&h.counters.connections_refused, h.cfg.max_connections, "connections"),
                    Full::Handshakes => (&h.counters.handshakes_refused, h.cfg.max_handshakes, "handshakes"),
                };
                ChannelCounters::bump(counter);
                refused[full as usize].note(&peer, what, limit);
                continue; // dropping the stream closes it
            }
        };
        let hub = hub.clone();
        let stop = stop.clone();
        tokio::task::spawn_local(async move {
            let _connection = connection;
            match stream {
                Stream::Tcp(s, Some(acceptor)) => match timeout(HELLO_TIMEOUT, tls::accept(&acceptor, s)).await {
                    Ok(Ok(s)) => drop(serve(s, hub, primary, peer, Some(handshake), stop).await),
                    Ok(Err(e)) => {
                        ChannelCounters::bump(&hub.borrow().counters.handshakes_failed);
                        warn!(%peer, "TLS handshake failed: {e}");
                    }
                    Err(_) => {
                        ChannelCounters::bump(&hub.borrow().counters.handshakes_failed);
                        warn!(%peer, "TLS handshake not done within {HELLO_TIMEOUT:?}: closing");
                    }
                },
                Stream::Tcp(s, None) => drop(serve(s, hub, primary, peer, Some(handshake), stop).await),
                Stream::Unix(s) => drop(serve(s, hub, primary, peer, Some(handshake), stop).await),
            }
        });
    }
}

/// An accepted stream, before its TLS handshake (if its listener has one).
enum Stream {
    Tcp(TcpStream, Option<tls::Acceptor>),
    Unix(UnixStream),
}

/// Peers refused for one reason since the last log line about it.
#[derive(Default)]
struct Refusals {
    since_log: u64,
    logged: Option<Instant>,
}

impl Refusals {
    fn note(&mut self, peer: &str, which: &str, limit: usize) {
        self.since_log += 1;
        if self.logged.is_some_and(|t| t.elapsed() < Duration::from_secs(10)) {
            return;
        }
        warn!(%peer, refused = self.since_log, "{which} at their limit ({limit}): closing new peers");
        self.since_log = 0;
        self.logged = Some(Instant::now());
    }
}

/// Connects to an active target forever, backing off exponentially while it is unreachable.
pub(crate) async fn active_loop(
    target: Target,
    hub: HubRef,
    primary: bool,
    tls: Option<Arc<tls::ClientConfig>>,
    stop: Stop,
) {
    let max_backoff = hub.borrow().cfg.max_backoff;
    let mut backoff = Duration::from_secs(1);
    let mut reported = false;
    let counters = hub.borrow().counters.clone();
    counters.controller(&target.to_string(), Some(false), true);
    // Whichever way the loop ends (the target left the configuration), so does its state.
    struct Forget(Arc<ChannelCounters>, String);
    impl Drop for Forget {
        fn drop(&mut self) {
            self.0.controller(&self.1, None, false);
        }
    }
    let _forget = Forget(counters, target.to_string());
    loop {
        let name = target.to_string();
        // Ok(true): a session ran (the peer's hello came); Ok(false): the peer went before it.
        let result: std::io::Result<bool> = async {
            Ok(match &target {
                Target::Tcp(a) => {
                    let s = TcpStream::connect(a).await?;
                    s.set_nodelay(true)?;
                    info!(controller = %name, "connected");
                    serve(s, hub.clone(), primary, name.clone(), None, stop.clone()).await
                }
                Target::Tls(a) => {
                    let s = TcpStream::connect(a).await?;
                    s.set_nodelay(true)?;
                    let cfg = tls.as_ref().expect("TLS config checked at start");
                    let handshake = timeout(HELLO_TIMEOUT, tls::connect(cfg, a.ip(), s)).await;
                    let s = match handshake {
                        Ok(Ok(s)) => s,
                        failed => {
                            ChannelCounters::bump(&hub.borrow().counters.handshakes_failed);
                            let why = match failed {
                                Ok(Err(e)) => format!("TLS handshake failed: {e}"),
                                _ => format!("TLS handshake not done within {HELLO_TIMEOUT:?}"),
                            };
                            return Err(std::io::Error::other(why));
                        }
                    };
                    info!(controller = %name, "connected (TLS)");
                    serve(s, hub.clone(), primary, name.clone(), None, stop.clone()).await
                }
                Target::Unix(p) => {
                    let s = UnixStream::connect(p).await?;
                    info!(controller = %name, "connected");
                    serve(s, hub.clone(), primary, name.clone(), None, stop.clone()).await
                }
                _ => unreachable!("passive targets are listened on"),
            })
        }
        .await;
        match result {
            Ok(true) => {
                backoff = Duration::from_secs(1);
                reported = false;
                info!(controller = %name, "disconnected");
            }
            // Said by serve; the backoff grows as for a failed connect.
            Ok(false) => {}
            Err(e) => {
                if !reported {
                    warn!(controller = %name, "cannot connect: {e} (retrying with backoff up to {max_backoff:?})");
                    reported = true;
                }
            }
        }
        if *stop.borrow() {
            return;
        }
        tokio::select! {
            _ = sleep(backoff) => {}
            _ = stopped(stop.clone()) => return,
        }
        backoff = (backoff * 2).min(max_backoff);
    }
}

/// Set to true when a target leaves the configuration: its loop ends, and so do the sessions
/// it made (after their last request, with an orderly close).
pub(crate) type Stop = tokio::sync::watch::Receiver<bool>;

/// Waits until `stop` is set; forever if it never is (its sender gone without setting it).
pub(crate) async fn stopped(mut stop: Stop) {
    loop {
        if *stop.borrow_and_update() {
            return;
        }
        if stop.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Reads whole OpenFlow messages off a byte stream, however they were split into segments.
/// Messages are taken from `start` on: the bytes behind them move to the front only when a read
/// needs the room (a 16 KiB read holds some 150 flow-mods; moving the rest forward after each one
/// cost a flow-mod more than decoding it).
struct Framer<R> {
    rd: R,
    buf: Vec<u8>,
    start: usize,
}

enum Frame {
    Message(Vec<u8>),
    /// The header's length field is below 8: the stream cannot be framed any further.
    Broken(Vec<u8>),
}

impl<R> Framer<R> {
    fn new(rd: R) -> Framer<R> {
        Framer { rd, buf: Vec::with_capacity(64 * 1024), start: 0 }
    }

    fn unread(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// The next message if it is whole in what was read already (a header below 8 bytes is
    /// left for [`Framer::next`] to report).
    fn next_buffered(&mut self) -> Option<Vec<u8>> {
        let unread = self.unread();
        let len = u16::from_be_bytes([*unread.get(2)?, *unread.get(3)?]) as usize;
        if len < HEADER_LEN || unread.len() < len {
            return None;
        }
        let msg = unread[..len].to_vec();
        self.start += len;
        Some(msg)
    }
}

impl<R: AsyncRead + Unpin> Framer<R> {
    async fn fill(&mut self, want: usize) -> std::io::Result<bool> {
        if self.unread().len() < want && self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        while self.buf.len() < want {
            // Straight into the buffer's spare room: a 16 KiB stack chunk zeroed for every read
            // and copied after cost ~9 000 instructions a read, a third of a new flow's setup.
            self.buf.reserve(16 * 1024);
            let n = self.rd.read_buf(&mut self.buf).await?;
            if n == 0 {
                return Ok(false);
            }
        }
        Ok(true)
    }

    async fn next(&mut self) -> std::io::Result<Option<Frame>> {
        if !self.fill(HEADER_LEN).await? {
            return Ok(None);
        }
        let unread = self.unread();
        let len = u16::from_be_bytes([unread[2], unread[3]]) as usize;
        if len < HEADER_LEN {
            let head = unread[..HEADER_LEN].to_vec();
            return Ok(Some(Frame::Broken(head)));
        }
        if !self.fill(len).await? {
            return Ok(None);
        }
        Ok(self.next_buffered().map(Frame::Message))
    }
}

async fn writer<W: AsyncWrite + Unpin>(mut wr: W, mut rx: UnboundedReceiver<(Kind, Vec<u8>)>, out: Drained) {
    let mut batch = Vec::with_capacity(64 * 1024);
    while let Some((kind, first)) = rx.recv().await {
        let mut written = Written::default();
        written.add(kind, first.len());
        batch.extend_from_slice(&first);
        // Coalesce whatever else is queued into one write.
        while batch.len() < 256 * 1024 {
            match rx.try_recv() {
                Ok((kind, m)) => {
                    written.add(kind, m.len());
                    batch.extend_from_slice(&m)
                }
                Err(_) => break,
            }
        }
        if wr.write_all(&batch).await.is_err() || wr.flush().await.is_err() {
            break;
        }
        out.written(&written);
        batch.clear();
    }
    let _ = wr.shutdown().await;
}

fn error_reply(xid: u32, code: ErrorCode, offending: &[u8]) -> Vec<u8> {
    Message::Error(ErrorMsg::reply_to(code, offending)).encode(xid)
}

/// Per-connection state the dispatcher keeps between messages.
struct Session {
    id: u64,
    /// Shared with the reply callbacks of its requests ([`Outbox::replier_for`]).
    tx: Arc<Outbox>,
    /// A multipart request arriving in parts (OFPMPF_REQ_MORE), gathered until its last part.
    partial: Option<(u32, MultipartRequest)>,
    /// The bytes of the parts gathered so far.
    partial_bytes: usize,
    echo_outstanding: bool,
    /// The action lists of the connection's last few flow-mods, which the next share.
    action_lists: datapath::ActionLists,
    /// Flow-mods read in a row, not sent yet: they go to the forwarding thread as one command,
    /// before anything else the connection sends it, and when no more are read at once.
    flow_mods: Vec<datapath::QueuedFlowMod>,
}

/// Flow-mods sent to the forwarding thread as one command at most: half the requests a
/// connection may have in flight, so that one run is executed while the next is read.
const FLOW_MOD_RUN: usize = MAX_IN_FLIGHT / 2;

/// Sends the flow-mods read so far, if any.
fn send_flow_mods(hub: &HubRef, s: &mut Session) {
    if s.flow_mods.is_empty() {
        return;
    }
    // The next run gets room for as many as this one had: a bulk install's runs are full, a
    // reactive controller's one flow-mod each, for which a full run's room (some 15 KB) would be
    // a large allocation, and the allocator's consolidation, for every new flow set up.
    let next = Vec::with_capacity(s.flow_mods.len());
    let mods = std::mem::replace(&mut s.flow_mods, next);
    let reply = s.tx.replier_for(mods.len());
    hub.borrow().switch.send(Command::FlowMods { mods, reply });
}

/// Runs one connection from hello to close; false if it never got as far as the peer's hello
/// (a controller that refused our certificate closes there, under TLS 1.3 after our handshake
/// looked complete). A passive connection's `handshake` place is given back at the hello.
pub(crate) async fn serve<S: AsyncRead + AsyncWrite + Unpin + 'static>(
    stream: S,
    hub: HubRef,
    primary: bool,
    peer: String,
    handshake: Option<Slot>,
    stop: Stop,
) -> bool {
    let passive = handshake.is_some();
    let outcome = handshake_and_session(stream, &hub, primary, &peer, handshake, stop).await;
    let counters = hub.borrow().counters.clone();
    if !passive {
        counters.controller(&peer, Some(false), false);
    }
    match outcome {
        Outcome::Session => ChannelCounters::bump(&counters.sessions_ended),
        Outcome::Probe if passive => {}
        // (A controller we connected to that closes before its hello refused us.)
        Outcome::Failed | Outcome::Probe => ChannelCounters::bump(&counters.handshakes_failed),
    }
    outcome == Outcome::Session
}

#[derive(PartialEq)]
enum Outcome {
    /// A session ran: the peer's hello came.
    Session,
    /// No session: an error, a timeout, a hello we cannot answer.
    Failed,
    /// The peer closed (or, on a listener, reset) the connection before its hello and sent
    /// nothing: on a listener, a port probe (monitoring, a test waiting for the listener), not
    /// counted as a failure.
    Probe,
}

async fn handshake_and_session<S: AsyncRead + AsyncWrite + Unpin + 'static>(
    stream: S,
    hub: &HubRef,
    primary: bool,
    peer: &str,
    handshake: Option<Slot>,
    stop: Stop,
) -> Outcome {
    let passive = handshake.is_some();
    let (rd, wr) = tokio::io::split(stream);
    let limit = hub.borrow().cfg.output_limit;
    let (tx, rx) = Outbox::new(limit, hub.borrow().congestion.clone());
    let tx = tx.in_order_with_events(hub.borrow().notices.clone());
    let writer_task = tokio::task::spawn_local(writer(wr, rx, tx.drain_side()));
    let mut framer = Framer::new(rd);
    tx.send(Message::Hello(Hello::of13()).encode(1));

    // Handshake: the first message must be a hello naming a version we share (spec §6.3.1).
    let hello = tokio::select! {
        h = timeout(HELLO_TIMEOUT, framer.next()) => h,
        _ = stopped(stop.clone()) => {
            info!(%peer, "no longer in the configuration: closing before its hello");
            finish(tx, writer_task).await;
            return Outcome::Probe;
        }
    };
    let first = match hello {
        Ok(Ok(Some(Frame::Message(m)))) => m,
        Ok(Ok(Some(Frame::Broken(head)))) => {
            tx.send(error_reply(0, ErrorCode::BadRequest(BadRequest::BadLen), &head));
            finish(tx, writer_task).await;
            return Outcome::Failed;
        }
        // A probe that closes with our hello unread resets the connection rather than closing
        // it, depending on whether the hello reached it first: a probe all the same.
        Ok(Err(e)) if passive && e.kind() == std::io::ErrorKind::ConnectionReset && framer.unread().is_empty() => {
            debug!(%peer, "peer reset the connection before its hello");
            finish(tx, writer_task).await;
            return Outcome::Probe;
        }
        Ok(Err(e)) => {
            warn!(%peer, "connection failed before the peer's hello: {e}");
            finish(tx, writer_task).await;
            return Outcome::Failed;
        }
        Ok(Ok(None)) => {
            // A port probe (monitoring, a test waiting for the listener) looks like this.
            debug!(%peer, "peer closed the connection before its hello");
            finish(tx, writer_task).await;
            return Outcome::Probe;
        }
        Err(_) => {
            warn!(%peer, "no hello within {HELLO_TIMEOUT:?}: closing");
            finish(tx, writer_task).await;
            return Outcome::Failed;
        }
    };
    let xid = Header::peek(&first).map_or(0, |h| h.xid);
    match Message::decode(&first) {
        Ok((h, Message::Hello(hello))) if hello.supports_of13(h.version) => {}
        Ok((_, Message::Hello(_))) => {
            warn!(%peer, "peer does not speak OpenFlow 1.3");
            let mut e = ErrorMsg::reply_to(ErrorCode::HelloFailed(HelloFailed::Incompatible), &[]);
            e.data = b"edgeflow supports OpenFlow 1.3 (0x04) only".to_vec();
            tx.send(Message::Error(e).encode(xid));
            finish(tx, writer_task).await;
            return Outcome::Failed;
        }
        _ => {
            tx.send(error_reply(xid, ErrorCode::HelloFailed(HelloFailed::Incompatible), &first));
            finish(tx, writer_task).await;
            return Outcome::Failed;
        }
    }

    drop(handshake);
    ChannelCounters::bump(&hub.borrow().counters.sessions);
    if !passive {
        hub.borrow().counters.controller(peer, Some(true), false);
    }
    let id = hub.borrow_mut().register(tx.clone(), primary, peer);
    let mut congestion = hub.borrow().congestion.subscribe();
    let probe = hub.borrow().cfg.probe_interval;
    let mut session = Session {
        id,
        tx: Arc::new(tx.clone()),
        partial: None,
        partial_bytes: 0,
        echo_outstanding: false,
        action_lists: Default::default(),
        flow_mods: Vec::new(),
    };
    let mut last_rx = Instant::now();
    // While the output is over its limit, the peer's requests wait unread; this is when the
    // writer last made progress then.
    let mut draining_since: Option<Instant> = None;
    // A multipart request read, waiting for its turn: its reply may be of any size (a flow dump
    // of the whole table), so it goes to the forwarding thread only once every earlier reply
    // is queued and the output is under its limit. The output limit then bounds what the next
    // request finds, and one connection has at most one such reply in the making.
    let mut held: Option<Vec<u8>> = None;
    // Closed for taking nothing: its writer is not waited for (it could only wait out its
    // grace, while its queue holds every connection's reading).
    let mut stalled = false;
    loop {
        // Some connection (this one perhaps) is behind with flow-removed or port-status
        // messages: nothing is read until it has taken them, so that no request makes more.
        let congested = *congestion.borrow_and_update() > 0;
        if held.is_some() && tx.in_flight() == 0 && !tx.over() && !congested {
            dispatch(hub, &mut session, held.take().expect("held"));
        }
        let over = tx.over();
        // Not reading for our own backlog, not for the peer's: its probe clock waits too.
        let waiting = !over && (congested || held.is_some() || tx.in_flight() >= MAX_IN_FLIGHT);
        let stall_at = if over {
            *draining_since.get_or_insert_with(Instant::now) + probe
        } else {
            draining_since = None;
            last_rx + probe // (unused: the branch waits only while over)
        };
        let deadline = last_rx + if session.echo_outstanding { probe * 2 } else { probe };
        tokio::select! {
            frame = framer.next(), if !over && !waiting => match frame {
                Ok(Some(Frame::Message(m))) => {
                    last_rx = Instant::now();
                    session.echo_outstanding = false;
                    let mut next = Some(m);
                    // The messages already read go on in this turn, under the same limits as
                    // the first (a turn of this loop costs more than a flow-mod).
                    while let Some(m) = next.take() {
                        match Header::peek(&m) {
                            Some(h) if h.msg_type == ofp::message::msg_type::MULTIPART_REQUEST => held = Some(m),
                            _ => dispatch(hub, &mut session, m),
                        }
                        let free = *congestion.borrow() == 0;
                        if held.is_none() && tx.in_flight() < MAX_IN_FLIGHT && !tx.over() && free {
                            next = framer.next_buffered();
                        }
                    }
                    send_flow_mods(hub, &mut session);
                }
                Ok(Some(Frame::Broken(head))) => {
                    warn!(%peer, "message with length below 8: closing");
                    tx.send(error_reply(Header::peek(&head).map_or(0, |h| h.xid), ErrorCode::BadRequest(BadRequest::BadLen), &head));
                    break;
                }
                Ok(None) => break,
                Err(e) => {
                    debug!(%peer, "read: {e}");
                    break;
                }
            },
            _ = tx.settled(), if waiting => last_rx = Instant::now(),
            _ = congestion.changed(), if waiting && congested => last_rx = Instant::now(),
            _ = tx.progressed(), if over => {
                // Slow, not stalled: it is reading; its probe clock restarts too.
                draining_since = Some(Instant::now());
                last_rx = Instant::now();
            }
            _ = tokio::time::sleep_until(stall_at), if over => {
                let dropped = tx.packet_ins_dropped.load(std::sync::atomic::Ordering::Relaxed);
                warn!(%peer, queued = tx.queued(), limit, packet_ins_dropped = dropped,
                      "peer stopped reading (output over the limit, nothing taken for {probe:?}): closing");
                ChannelCounters::bump(&hub.borrow().counters.slow_readers_dropped);
                stalled = true;
                break;
            }
            _ = stopped(stop.clone()) => {
                info!(%peer, "no longer in the configuration: closing");
                break;
            }
            _ = tokio::time::sleep_until(deadline), if !over && !waiting => {
                if session.echo_outstanding {
                    warn!(%peer, "no reply to inactivity probe: closing");
                    break;
                }
                session.echo_outstanding = true;
                tx.send(Message::EchoRequest(Vec::new()).encode(0));
            }
        }
    }
    // Flow-mods read before a close take effect, as they would have one by one.
    send_flow_mods(hub, &mut session);
    let last_primary_gone = hub.borrow_mut().unregister(id);
    if last_primary_gone {
        arm_fail_open(hub);
    }
    // The session's sender too, or the writer waits for it until finish gives up.
    drop(session);
    let pending = tx.pending.clone();
    let grace = if stalled { Duration::ZERO } else { WRITER_GRACE };
    finish_within(tx, writer_task, grace).await;
    count_lost(hub, peer, &pending);
    Outcome::Session
}

/// What a connection closed with still queued, or in a write that did not finish, is lost:
/// counted per kind, and said once, with the peer. (Packet-ins dropped while it was over its
/// limit were counted as they were dropped.)
fn count_lost(hub: &HubRef, peer: &str, pending: &[std::sync::atomic::AtomicUsize; 3]) {
    let lost: Vec<(Kind, usize)> = ASYNC_KINDS
        .iter()
        .zip(pending)
        .map(|(&k, n)| (k, n.load(std::sync::atomic::Ordering::Acquire)))
        .filter(|&(_, n)| n > 0)
        .collect();
    if lost.is_empty() {
        return;
    }
    let h = hub.borrow();
    for &(kind, n) in &lost {
        let i = ASYNC_KINDS.iter().position(|&k| k == kind).expect("an asynchronous kind");
        h.counters.async_dropped[i].fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
    }
    let said: Vec<String> = lost.iter().map(|(k, n)| format!("{n} {}", k.name())).collect();
    warn!(%peer, "connection closed with asynchronous messages unsent: {} lost", said.join(", "));
}

/// How long a closing connection's writer may take to write what is queued.
const WRITER_GRACE: Duration = Duration::from_secs(1);

async fn finish(tx: Outbox, writer: tokio::task::JoinHandle<()>) {
    finish_within(tx, writer, WRITER_GRACE).await
}

async fn finish_within(tx: Outbox, writer: tokio::task::JoinHandle<()>, grace: Duration) {
    drop(tx);
    // Let queued replies (e.g. the error that explains the close) go out, but not forever: a
    // peer that does not read would hold the socket open.
    let abort = writer.abort_handle();
    if timeout(grace, writer).await.is_err() {
        debug!("writer did not finish in time: closing anyway");
        abort.abort();
    }
}

/// Whether a slave (`OFPCR_ROLE_SLAVE`) may not send this message, judged from its bytes before
/// it is decoded: a slave's request is refused as a slave's whatever else is wrong with it, as
/// Open vSwitch refuses it (each of its handlers rejects a slave before decoding). They are the
/// spec's (1.3.5 §6.3.5: packet-out, flow-mod, group-mod, port-mod, table-mod, meter-mod, and a
/// table-features request that sets the tables) and edgeflow's experimenter requests that change
/// the switch ([`datapath::switch::slave_may_send`]).
fn barred_to_slaves(bytes: &[u8]) -> bool {
    use ofp::message::msg_type as t;
    use ofp::multipart::mp_type;
    /// The multipart header: the message's, the type, flags and 4 bytes of padding.
    const MULTIPART_HEAD: usize = HEADER_LEN + 8;
    let Some(h) = Header::peek(bytes) else { return false };
    if h.version != OFP_VERSION {
        return false;
    }
    let be32 = |at: usize| bytes.get(at..at + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    match h.msg_type {
        t::PACKET_OUT | t::FLOW_MOD | t::GROUP_MOD | t::PORT_MOD | t::TABLE_MOD | t::METER_MOD => true,
        t::MULTIPART_REQUEST => match bytes.get(HEADER_LEN..HEADER_LEN + 2).map(|b| u16::from_be_bytes([b[0], b[1]])) {
            Some(mp_type::TABLE_FEATURES) => bytes.len() > MULTIPART_HEAD,
            Some(mp_type::EXPERIMENTER) => {
                be32(MULTIPART_HEAD) == Some(datapath::switch::EXPERIMENTER)
                    && be32(MULTIPART_HEAD + 4).is_some_and(|exp_type| {
                        !datapath::switch::slave_may_send(exp_type, &bytes[MULTIPART_HEAD + 8..])
                    })
            }
            _ => false,
        },
        _ => false,
    }
}

fn dispatch(hub: &HubRef, s: &mut Session, bytes: Vec<u8>) {
    let xid = Header::peek(&bytes).map_or(0, |h| h.xid);
    let flow_mod = Header::peek(&bytes).is_some_and(|h| h.msg_type == ofp::message::msg_type::FLOW_MOD);
    if flow_mod && !(barred_to_slaves(&bytes) && hub.borrow().role(s.id) == role::SLAVE) {
        if let Ok((_, Message::FlowMod(fm))) = Message::decode(&bytes) {
            // Checked, keyed and compiled here, on this thread: the forwarding thread, which
            // every connection's flow-mods pass through, does only what needs its tables.
            let fm = datapath::PreparedFlowMod::from_message(fm, &bytes, &mut s.action_lists);
            s.tx.count_request();
            s.flow_mods.push(datapath::QueuedFlowMod::new(xid, fm, &bytes));
            if s.flow_mods.len() == FLOW_MOD_RUN {
                send_flow_mods(hub, s);
            }
            return;
        }
    }
    // Anything else goes behind the flow-mods before it (a refused flow-mod's error too).
    send_flow_mods(hub, s);
    // Replies composed here still go through the forwarding thread's queue, behind this
    // connection's earlier requests: replies leave in request order.
    let in_order = |raw: Vec<u8>| hub.borrow().switch.send(Command::Reply { bytes: raw, reply: s.tx.replier() });
    let send = |m: Message| in_order(m.encode(xid));
    if barred_to_slaves(&bytes) && hub.borrow().role(s.id) == role::SLAVE {
        in_order(error_reply(xid, ErrorCode::BadRequest(BadRequest::IsSlave), &bytes));
        return;
    }
    let msg = match Message::decode(&bytes) {
        Ok((_, m)) => m,
        Err(e) => {
            debug!("malformed message: {e}");
            ChannelCounters::bump(&hub.borrow().counters.malformed);
            in_order(error_reply(xid, e.code, &bytes));
            return;
        }
    };
    match msg {
        Message::Hello(_) => {}
        Message::EchoRequest(data) => send(Message::EchoReply(data)),
        Message::EchoReply(_) => {}
        Message::Error(e) => debug!("controller reported error {}", e.code),
        Message::FeaturesRequest => send(Message::FeaturesReply(hub.borrow().cfg.features)),
        Message::RoleRequest(r) => {
            if r.role > role::SLAVE {
                in_order(error_reply(xid, ErrorCode::RoleRequestFailed(RoleRequestFailed::BadRole), &bytes));
                return;
            }
            let outcome = hub.borrow_mut().request_role(s.id, r.role, r.generation_id);
            match outcome {
                Ok((role, generation_id)) => send(Message::RoleReply(RoleMsg { role, generation_id })),
                Err(()) => in_order(error_reply(xid, ErrorCode::RoleRequestFailed(RoleRequestFailed::Stale), &bytes)),
            }
        }
        Message::GetAsyncRequest => send(Message::GetAsyncReply(hub.borrow().async_config(s.id))),
        Message::SetAsync(a) => hub.borrow_mut().set_async(s.id, a),
        Message::MultipartRequest(req) => {
            // Gather a request sent in parts; only table features requests carry several.
            let gathered = match &s.partial {
                Some((pxid, _)) if *pxid == xid => s.partial_bytes + bytes.len(),
                _ => bytes.len(),
            };
            let limit = hub.borrow().cfg.max_request_bytes;
            if gathered > limit {
                warn!(xid, limit, "a multipart request in parts outgrew the request limit: refused");
                ChannelCounters::bump(&hub.borrow().counters.requests_too_big);
                s.partial = None;
                s.partial_bytes = 0;
                in_order(error_reply(xid, ErrorCode::BadRequest(BadRequest::MultipartBufferOverflow), &bytes));
                return;
            }
            s.partial_bytes = gathered;
            let req = match s.partial.take() {
                Some((pxid, mut acc)) if pxid == xid => {
                    if let (MultipartRequestBody::TableFeatures(a), MultipartRequestBody::TableFeatures(b)) =
                        (&mut acc.body, req.body.clone())
                    {
                        a.extend(b);
                    }
                    acc.flags = req.flags;
                    acc
                }
                _ => req,
            };
            if req.flags & MORE != 0 {
                s.partial = Some((xid, req));
                return;
            }
            forward(hub, s, xid, Message::MultipartRequest(req), &bytes);
        }
        m => forward(hub, s, xid, m, &bytes),
    }
}

fn forward(hub: &HubRef, s: &Session, xid: u32, msg: Message, bytes: &[u8]) {
    let head = bytes[..bytes.len().min(64)].to_vec();
    hub.borrow().switch.send(Command::OpenFlow { xid, msg, head, reply: s.tx.replier() });
}

#[cfg(test)]
mod tests {
    use super::*;
    use datapath::switch::{EXPERIMENTER, KERNEL_DUMP, LOG_FILTER, MODE_CONTROL, STATS_REPORT, TEST_PANIC};
    use ofp::message::msg_type;

    fn request(body: MultipartRequestBody) -> Vec<u8> {
        Message::MultipartRequest(MultipartRequest { flags: 0, body }).encode(1)
    }

    fn edgeflow(exp_type: u32, data: &[u8]) -> Vec<u8> {
        request(MultipartRequestBody::Experimenter { experimenter: EXPERIMENTER, exp_type, data: data.to_vec() })
    }

    #[test]
    fn a_slaves_message_is_judged_on_its_bytes_before_they_are_decoded() {
        // A flow-mod with no body cannot be decoded: a slave is refused it all the same.
        assert!(barred_to_slaves(&[OFP_VERSION, msg_type::FLOW_MOD, 0, 8, 0, 0, 0, 1]));
        // Of another version: its version error comes first, as for anyone.
        assert!(!barred_to_slaves(&[1, msg_type::FLOW_MOD, 0, 8, 0, 0, 0, 1]));
        assert!(!barred_to_slaves(&Message::BarrierRequest.encode(1)));
        assert!(!barred_to_slaves(&request(MultipartRequestBody::TableFeatures(vec![]))));

        assert!(barred_to_slaves(&edgeflow(LOG_FILTER, b"debug")));
        assert!(!barred_to_slaves(&edgeflow(LOG_FILTER, b" \n")), "blank reads the filter");
        assert!(barred_to_slaves(&edgeflow(LOG_FILTER, &[0xff])), "not UTF-8: not a read");
        assert!(!barred_to_slaves(&edgeflow(MODE_CONTROL, b"entries RouterIngress.routes")));
        assert!(barred_to_slaves(&edgeflow(MODE_CONTROL, b"insert t a 0 any")));
        assert!(barred_to_slaves(&edgeflow(MODE_CONTROL, b"")), "no verb is no read");
        assert!(!barred_to_slaves(&edgeflow(STATS_REPORT, b"")));
        assert!(!barred_to_slaves(&edgeflow(KERNEL_DUMP, b"")));
        assert!(barred_to_slaves(&edgeflow(TEST_PANIC, b"")));
        assert!(barred_to_slaves(&edgeflow(99, b"")), "a type not judged read-only");
        // Another experimenter's request changes nothing here: anyone gets the same error for it.
        let other = request(MultipartRequestBody::Experimenter { experimenter: 0x2320, exp_type: 2, data: vec![] });
        assert!(!barred_to_slaves(&other));
        // Cut inside edgeflow's request type: left to the decoder's length error.
        let cut = &edgeflow(LOG_FILTER, b"")[..HEADER_LEN + 10];
        assert!(!barred_to_slaves(cut));
    }
}
