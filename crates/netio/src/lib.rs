//! Port I/O on Linux, below any switching: AF_PACKET sockets with mmap rings (`afpacket`), or
//! plain ones where AF_PACKET's options are refused (`plain`), AF_XDP sockets fed by an XDP
//! program (`afxdp`), tap
//! devices (`tap`), link events over netlink (`netlink`), virtio-net headers (`vnet`) and thin
//! wrappers over the system calls they need (`sys`). The switch and the load generator both use it.

pub mod afpacket;
pub mod afxdp;
pub mod netlink;
pub mod plain;
pub mod sys;
pub mod tap;
pub mod vnet;

use std::os::fd::RawFd;

pub use afpacket::RingConfig;

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
    /// No room for the frame now: offer it again later.
    Busy,
    /// The interface will never take this frame (longer than its MTU allows and not a GSO
    /// super-frame): drop it and count it, or it blocks everything queued behind it.
    Refused,
}

/// The receive half of a port.
pub trait PortRx: Send {
    /// Becomes readable when frames are waiting.
    fn rx_fd(&self) -> RawFd;
    /// Hands up to `budget` received frames to `f`; returns how many.
    fn recv(&mut self, budget: usize, f: &mut dyn FnMut(RxFrame<'_>)) -> usize;
    /// Frames the kernel dropped on receive since the last call.
    fn rx_drops(&mut self) -> u64;
    /// An AF_XDP port's sockets, by the receive queue each is bound to (empty for other kinds):
    /// what a program of the caller's redirects into.
    fn queue_sockets(&self) -> Vec<RawFd> {
        Vec::new()
    }
    /// Frames read per receive queue, by queue index (empty where the port has no such count).
    fn queue_rx_packets(&self) -> Vec<u64> {
        Vec::new()
    }
}

/// The transmit half of a port. Kept apart from the receive half so that a frame received on a
/// port can be sent back out of it (IN_PORT) while the receive batch is being processed.
pub trait PortTx: Send {
    /// Queues a frame for transmission (sent at the latest by the next [`PortTx::flush`]).
    fn send(&mut self, frame: &[u8], offload: &packet::Offload) -> Result<(), TxError>;
    fn flush(&mut self);
    /// The interface changed (its MTU may have): re-read what the port keeps about it.
    fn link_changed(&mut self) {}
}

/// Opens a port's two halves.
pub type PortHalves = (Box<dyn PortRx>, Box<dyn PortTx>);
