//! The datapath: the switch's ports on real Linux interfaces, their egress queues, and the
//! forwarding thread that moves frames between them as the forwarding mode decides.
//!
//! The forwarding thread owns the mode; nothing on the forwarding path takes a lock. Controller
//! channels talk to it through a queue of [`Command`]s (executed in order, between batches of
//! frames, which is what makes barriers exact) and receive [`Event`]s back.
//!
//! Port I/O (AF_PACKET rings, tap) is the `netio` crate, behind [`PortRx`] and [`PortTx`]; the
//! kernel fast path (`fastpath`) holds the mode's decisions in BPF maps, loaded by the `ebpf` crate.

pub mod egress;
pub mod fastpath;
pub mod schedule;
pub mod switch;

use std::sync::Arc;

// Port I/O and the eBPF loader are crates of their own; these keep the paths the switch uses.
pub use ebpf::objects as bpf_objects;
pub use netio::{afpacket, netlink, sys, tap, vnet, PortHalves, PortRx, PortTx, RingConfig, RxFrame, TxError};
pub use switch::{DropCounts, Switch, SwitchConfig, SwitchHandle};
pub use ebpf;

/// Where replies to one controller connection go (already encoded).
pub type Replier = Arc<dyn Fn(Vec<u8>) + Send + Sync>;

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
    /// A reply the agent composed itself (echo, features, role…), queued behind the connection's
    /// earlier requests so that replies leave in request order (what a barrier promises).
    Reply {
        bytes: Vec<u8>,
        reply: Replier,
    },
    /// Standalone fail mode: whether no controller is reachable (so the switch learns by itself).
    FailOpen(bool),
    /// New egress settings for every port (ports not listed go back to unscheduled defaults).
    /// Queued frames stay queued.
    SetEgress(Vec<(u32, egress::PortEgress)>),
    /// The agent closed a connection whose peer stopped reading (its output hit the limit):
    /// counted in the switch's report.
    SlowReaderDropped,
    Shutdown,
}

/// Asynchronous messages from the forwarding thread, for the controllers.
pub use forwarding::Event;
