//! The datapath: the switch's ports on real Linux interfaces, their egress queues, and the
//! forwarding thread that moves frames between them as the forwarding mode decides.
//!
//! The forwarding thread owns the mode; nothing on the forwarding path takes a lock. Controller
//! channels talk to it through a queue of [`Command`]s (executed in order, between batches of
//! frames, which is what makes barriers exact) and receive [`Event`]s back.
//!
//! Port I/O (AF_PACKET rings, tap) is the `netio` crate, behind [`PortRx`] and [`PortTx`]; the
//! kernel fast path (`fastpath`) holds the mode's decisions in BPF maps, loaded by the `ebpf` crate.

pub mod attach;
mod counter;
pub mod egress;
pub mod fastpath;
pub mod schedule;
pub mod switch;

use std::sync::atomic::Ordering;
use std::sync::Arc;

// Port I/O and the eBPF loader are crates of their own; these keep the paths the switch uses.
pub use counter::AtomicU64;
pub use ebpf;
pub use ebpf::objects as bpf_objects;
pub use netio::{afpacket, netlink, sys, tap, vnet, PortHalves, PortRx, PortTx, RingConfig, RxFrame, TxError};
pub use switch::{DropCounts, PortIo, Switch, SwitchConfig, SwitchHandle};

/// Capabilities a step may need, by their bit in the kernel's capability sets.
pub mod caps {
    pub const NET_ADMIN: (&str, u32) = ("CAP_NET_ADMIN", 12);
    pub const NET_RAW: (&str, u32) = ("CAP_NET_RAW", 13);
    pub const PERFMON: (&str, u32) = ("CAP_PERFMON", 38);
    pub const BPF: (&str, u32) = ("CAP_BPF", 39);
}

/// The effective capabilities of this process (`CapEff` in /proc/self/status), if readable.
fn effective_caps() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim();
    u64::from_str_radix(hex, 16).ok()
}

/// A refusal for want of privilege says which of the capabilities the step takes this process
/// lacks (measured as user `nobody` with ambient capabilities: docs/security.md). Where none is
/// missing, the refusal is something else (a verifier's, say) and passes unchanged.
pub fn privilege_hint(e: std::io::Error, needs: &[(&str, u32)]) -> std::io::Error {
    if e.kind() != std::io::ErrorKind::PermissionDenied {
        return e;
    }
    let have = effective_caps().unwrap_or(u64::MAX);
    let missing: Vec<&str> = needs.iter().filter(|(_, bit)| have & (1 << bit) == 0).map(|(name, _)| *name).collect();
    if missing.is_empty() {
        return e;
    }
    // On the first line: a verifier log may follow it.
    let text = e.to_string();
    let (first, rest) = text.split_once('\n').map_or((text.as_str(), None), |(a, b)| (a, Some(b)));
    let hinted = format!("{first} (this needs {}, which this process lacks; or root)", missing.join(" and "));
    std::io::Error::new(e.kind(), rest.map_or(hinted.clone(), |r| format!("{hinted}\n{r}")))
}

/// Where replies to one controller connection go (already encoded).
pub type Replier = Arc<dyn Fn(Vec<u8>) + Send + Sync>;

/// Work a control plane beside OpenFlow does on the forwarding mode ([`Command::WithMode`]). It
/// returns how to deliver its answer, which the forwarding thread calls once what the job
/// changed is in the kernel too: a client told its write is done finds it in force.
pub type ModeJob = Box<dyn FnOnce(&mut dyn forwarding::Mode) -> Deliver + Send>;
/// A job's answer, delivered when its effects are (see [`ModeJob`]).
pub type Deliver = Box<dyn FnOnce() + Send>;

/// One flow-mod of a [`Command::FlowMods`].
pub struct QueuedFlowMod {
    pub xid: u32,
    pub fm: PreparedFlowMod,
    /// The message's first bytes (up to 64), which an error reply echoes: kept inline, as a
    /// flow-mod's error is rare and its allocation would not be.
    head: [u8; 64],
    head_len: u8,
}

impl QueuedFlowMod {
    pub fn new(xid: u32, fm: PreparedFlowMod, message: &[u8]) -> QueuedFlowMod {
        let mut head = [0; 64];
        let n = message.len().min(64);
        head[..n].copy_from_slice(&message[..n]);
        QueuedFlowMod { xid, fm, head, head_len: n as u8 }
    }

    pub fn head(&self) -> &[u8] {
        &self.head[..self.head_len as usize]
    }
}

/// Requests to the forwarding thread.
pub enum Command {
    /// An OpenFlow request from a controller, executed in arrival order. `head` holds the first
    /// 64 bytes of the message, echoed in an error reply.
    OpenFlow {
        xid: u32,
        msg: ofp::Message,
        head: Vec<u8>,
        reply: Replier,
    },
    /// Flow-mods one connection sent in a row, each with its pure part (its match checked and
    /// keyed, its instructions compiled and shared) done by the connection's thread: as that
    /// many `OpenFlow` commands with the flow-mods they were made from, in the same order, for
    /// less of this thread's time. `reply` counts for all of them (see `agent`'s in-flight limit).
    FlowMods {
        mods: Vec<QueuedFlowMod>,
        reply: Replier,
    },
    /// A reply the agent composed itself (echo, features, role…), queued behind the connection's
    /// earlier requests so that replies leave in request order (what a barrier promises).
    Reply {
        bytes: Vec<u8>,
        reply: Replier,
    },
    /// Standalone fail mode: whether no controller is reachable (so the switch learns by itself).
    FailOpen(bool),
    /// A configuration read again (SIGHUP). The mode takes `mode` first, and new ports are
    /// opened: a refusal of either changes nothing and is the answer. Then ports not in `ports`
    /// leave (their queues, and the kernel's entries through them, with them), new ones join,
    /// and every port's egress is set; frames queued on ports that stay, stay.
    Reconfigure {
        ports: Vec<(u32, String)>,
        egress: Vec<(u32, egress::PortEgress)>,
        mode: Option<forwarding::Reconfig>,
        done: Box<dyn FnOnce(Result<String, String>) + Send>,
    },
    /// How a configuration read again (SIGHUP) ended, refused before it reached the switch or
    /// not: kept for the report (`reloads`), where `edgeflow reload` and the metrics find it.
    Reloaded {
        applied: bool,
        message: String,
    },
    /// The switch's report (what `edgeflow stats --json` prints), handed to the callback on the
    /// forwarding thread: for the metrics endpoint, which needs no OpenFlow connection.
    Report(Box<dyn FnOnce(serde_json::Value) + Send>),
    /// Called as soon as the forwarding thread reaches its command queue: the service
    /// watchdog's proof that the thread is still turning, not merely that the process exists.
    Heartbeat(Box<dyn FnOnce() + Send>),
    /// Work on the forwarding mode between two frames, for a control plane beside OpenFlow
    /// (P4Runtime writes and reads a P4 program's tables this way).
    WithMode(ModeJob),
    Shutdown,
}

/// What the controller channels met: limits hit, failed handshakes, sessions. The agent and the
/// P4Runtime server count (atomically: they run on their own thread), the switch's report shows
/// them.
#[derive(Debug, Default)]
pub struct ChannelCounters {
    /// Each configured controller (an active target), and whether a session with it runs now.
    controllers: std::sync::Mutex<std::collections::BTreeMap<String, bool>>,
    /// Controller sessions started (the peer's hello received) and ended.
    pub sessions: AtomicU64,
    pub sessions_ended: AtomicU64,
    /// Peers a listener turned away at once: too many connections, or too many in handshake.
    pub connections_refused: AtomicU64,
    pub handshakes_refused: AtomicU64,
    /// Connections that never reached a session: TLS refused or timed out, no hello in time, a
    /// hello in another version.
    pub handshakes_failed: AtomicU64,
    /// Multipart requests whose parts outgrew the request limit (OFPBRC_MULTIPART_BUFFER_OVERFLOW).
    pub requests_too_big: AtomicU64,
    /// Messages that could not be decoded (each answered with an error).
    pub malformed: AtomicU64,
    /// Packet-ins a controller's own rate limit held back.
    pub packet_ins_limited: AtomicU64,
    /// Asynchronous messages dropped, by kind: packet-in, flow-removed, port-status. Packet-ins
    /// are dropped while their connection's output is over its limit; the others only with a
    /// connection closed before they were written (its peer stopped reading).
    pub async_dropped: [AtomicU64; 3],
    /// Connections closed because their peer stopped reading (output over the limit).
    pub slow_readers_dropped: AtomicU64,
    /// P4Runtime: stream channels refused past the server's limit, writes and pipeline sets
    /// refused for not being the primary's, clients dropped for not reading their stream.
    pub p4runtime_streams_refused: AtomicU64,
    pub p4runtime_writes_refused: AtomicU64,
    pub p4runtime_slow_readers_dropped: AtomicU64,
    /// P4Runtime: packet-ins no primary took (none, or its stream full), digests no
    /// DigestEntry asked for or that found their queue full.
    pub p4runtime_packet_ins_dropped: AtomicU64,
    pub p4runtime_digests_dropped: AtomicU64,
}

impl ChannelCounters {
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A configured controller's state: `Some(connected)`, or None when it left the
    /// configuration. A state for a target not registered (by `Some(false)` first) is ignored.
    pub fn controller(&self, target: &str, connected: Option<bool>, register: bool) {
        let mut all = self.controllers.lock().unwrap_or_else(|p| p.into_inner());
        match connected {
            None => {
                all.remove(target);
            }
            Some(c) if register || all.contains_key(target) => {
                all.insert(target.to_string(), c);
            }
            Some(_) => {}
        }
    }

    /// (target, connected) of every configured controller.
    pub fn controllers(&self) -> Vec<(String, bool)> {
        let all = self.controllers.lock().unwrap_or_else(|p| p.into_inner());
        all.iter().map(|(t, c)| (t.clone(), *c)).collect()
    }

    /// (name, value) of every counter, for the report.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        vec![
            ("sessions", get(&self.sessions)),
            ("sessions_ended", get(&self.sessions_ended)),
            ("connections_refused", get(&self.connections_refused)),
            ("handshakes_refused", get(&self.handshakes_refused)),
            ("handshakes_failed", get(&self.handshakes_failed)),
            ("requests_too_big", get(&self.requests_too_big)),
            ("malformed", get(&self.malformed)),
            ("packet_ins_limited", get(&self.packet_ins_limited)),
            ("async_dropped_packet_in", get(&self.async_dropped[0])),
            ("async_dropped_flow_removed", get(&self.async_dropped[1])),
            ("async_dropped_port_status", get(&self.async_dropped[2])),
            ("slow_readers_dropped", get(&self.slow_readers_dropped)),
            ("p4runtime_streams_refused", get(&self.p4runtime_streams_refused)),
            ("p4runtime_writes_refused", get(&self.p4runtime_writes_refused)),
            ("p4runtime_slow_readers_dropped", get(&self.p4runtime_slow_readers_dropped)),
            ("p4runtime_packet_ins_dropped", get(&self.p4runtime_packet_ins_dropped)),
            ("p4runtime_digests_dropped", get(&self.p4runtime_digests_dropped)),
        ]
    }
}

/// The packet-in token bucket, which the agent applies per controller too.
pub use forwarding::openflow::PacketInLimit;
/// Asynchronous messages from the forwarding thread, for the controllers.
pub use forwarding::Event;
/// What a connection's thread needs to prepare flow-mods ([`Command::FlowMod`]).
pub use forwarding::{ActionLists, PreparedFlowMod};
