//! The datapath: ports on real Linux interfaces and the forwarding thread that moves frames between
//! them through the pipeline.
//!
//! The forwarding thread owns the pipeline; nothing on the forwarding path takes a lock. Controller
//! channels talk to it through a queue of [`Command`]s (executed in order, between batches of
//! frames, which is what makes barriers exact) and receive [`Event`]s back.
//!
//! Port I/O sits behind [`PortIo`]; this crate provides AF_PACKET ports with mmap rings and a tap
//! device for the LOCAL port. A kernel fast path fills the same seam.

pub mod afpacket;
pub mod bpf_objects;
pub mod ebpf;
pub mod egress;
pub mod fastpath;
pub mod netlink;
pub mod switch;
pub mod sys;
pub mod tap;
pub mod vnet;

use std::os::fd::RawFd;
use std::sync::Arc;

pub use afpacket::RingConfig;
pub use switch::{DropCounts, Switch, SwitchConfig, SwitchHandle};

/// A received frame, borrowed from the port until the callback returns.
pub struct RxFrame<'a> {
    pub data: &'a [u8],
    pub offload: packet::Offload,
    /// A VLAN tag the kernel took out of the frame into metadata (hardware-accelerated VLAN):
    /// (TPID, TCI). The switch puts it back, since OpenFlow matches see the tag in the frame.
    pub vlan: Option<(u16, u16)>,
    /// When the kernel received it (CLOCK_REALTIME, ns), where the port reports it; else 0.
    pub tstamp_ns: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxError {
    /// No room to queue the frame now; it is dropped and counted.
    Busy,
}

/// The receive half of a port.
pub trait PortRx: Send {
    /// Becomes readable when frames are waiting.
    fn rx_fd(&self) -> RawFd;
    /// Hands up to `budget` received frames to `f`; returns how many.
    fn recv(&mut self, budget: usize, f: &mut dyn FnMut(RxFrame<'_>)) -> usize;
    /// Frames the kernel dropped on receive since the last call.
    fn rx_drops(&mut self) -> u64;
}

/// The transmit half of a port. Kept apart from the receive half so that a frame received on a
/// port can be sent back out of it (IN_PORT) while the receive batch is being processed.
pub trait PortTx: Send {
    /// Queues a frame for transmission (sent at the latest by the next [`PortTx::flush`]).
    fn send(&mut self, frame: &[u8], offload: &packet::Offload) -> Result<(), TxError>;
    fn flush(&mut self);
}

/// Opens a port's two halves.
pub type PortHalves = (Box<dyn PortRx>, Box<dyn PortTx>);

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
    Shutdown,
}

/// Asynchronous messages from the forwarding thread, for the controllers.
pub use forwarding::Event;
