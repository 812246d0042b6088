//! A port on a Linux interface through AF_PACKET with memory-mapped rings (TPACKET_V2).
//!
//! Two sockets per port:
//! - the *receive* socket has an RX ring. Frames larger than a ring slot (GSO super-frames, up to
//!   64 KiB) are also queued whole on its socket (PACKET_COPY_THRESH) and read with `recvmsg`; the
//!   same socket sends such large frames with `sendmsg` (one syscall per 64 KiB is nothing).
//! - the *transmit* socket has a TX ring and bypasses the qdisc; one `send` flushes a whole batch.
//!
//! Both carry a virtio-net header (PACKET_VNET_HDR), so frames whose checksum the sender left to
//! offload and GSO super-frames pass through intact: hosts need no `ethtool -K … tx off`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{fence, Ordering};

use crate::sys::{cvt, getsockopt, if_mtu, ifindex, setsockopt};
use crate::vnet;
use crate::{PortRx, PortTx, RxFrame, TxError};

const TPACKET_V2: libc::c_int = 1;
/// TPACKET2_HDRLEN - sizeof(sockaddr_ll): where TX frame data starts in a slot.
const TX_DATA_OFFSET: usize = 32;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_COPY: u32 = 1 << 1;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_WRONG_FORMAT: u32 = 1 << 2;
/// Largest frame we take whole: 64 KiB of GSO payload plus headers.
const MAX_FRAME: usize = 65_536 + 256;

/// Ring geometry. Slots of 2 KiB hold any standard or VLAN-tagged frame; bigger ones take the
/// copy path.
#[derive(Clone, Copy, Debug)]
pub struct RingConfig {
    pub rx_frames: u32,
    pub tx_frames: u32,
    pub frame_size: u32,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig::with_frames(1024)
    }
}

impl RingConfig {
    /// `rx_frames` receive slots and half as many transmit slots (at least 32).
    pub fn with_frames(rx_frames: u32) -> RingConfig {
        RingConfig { rx_frames, tx_frames: (rx_frames / 2).max(32), frame_size: 2048 }
    }

    /// Rings sized for a link of `speed_mbps` (None: the driver reports none). A gigabit port
    /// (a gateway's) gets 256 receive slots, 0.75 MiB mapped with the transmit half, about 3 ms of
    /// full-size frames at line rate, as many as such NICs keep descriptors; a faster or unknown
    /// one (veth says 10 Gbit/s) 1024, 3 MiB. The rings are most of an idle switch's memory.
    pub fn for_link(speed_mbps: Option<u32>) -> RingConfig {
        match speed_mbps {
            Some(s) if s <= 1000 => RingConfig::with_frames(256),
            _ => RingConfig::default(),
        }
    }
}

#[repr(C)]
#[derive(Default)]
struct TpacketReq {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct TpacketStats {
    packets: u32,
    drops: u32,
}

/// Offsets into `struct tpacket2_hdr`.
mod hdr {
    pub const STATUS: usize = 0;
    pub const LEN: usize = 4;
    pub const SNAPLEN: usize = 8;
    pub const MAC: usize = 12;
    pub const SEC: usize = 16;
    pub const NSEC: usize = 20;
    pub const VLAN_TCI: usize = 24;
    pub const VLAN_TPID: usize = 26;
}

struct Ring {
    base: *mut u8,
    len: usize,
    frame_size: usize,
    frames: usize,
    head: usize,
}

// SAFETY: the mapping is owned by the ring and only touched by the thread that owns the port.
unsafe impl Send for Ring {}

impl Ring {
    fn map(fd: RawFd, option: libc::c_int, frames: u32, frame_size: u32) -> io::Result<Ring> {
        let page = 4096u32;
        let block_size = frame_size.max(page).next_multiple_of(page);
        let per_block = block_size / frame_size;
        let block_nr = frames.div_ceil(per_block);
        let req = TpacketReq { block_size, block_nr, frame_size, frame_nr: block_nr * per_block };
        setsockopt(fd, libc::SOL_PACKET, option, &req)?;
        Ok(Ring {
            base: ptr::null_mut(),
            len: (block_size * block_nr) as usize,
            frame_size: frame_size as usize,
            frames: req.frame_nr as usize,
            head: 0,
        })
    }

    fn slot(&self, i: usize) -> *mut u8 {
        // SAFETY: i < frames, so the slot lies inside the mapping.
        unsafe { self.base.add(i * self.frame_size) }
    }

    fn status(&self, i: usize) -> u32 {
        // SAFETY: the status word is the first u32 of a slot inside the mapping; the kernel writes it
        // concurrently, hence the volatile read and the acquire fence before the frame is read.
        let s = unsafe { ptr::read_volatile(self.slot(i).add(hdr::STATUS) as *const u32) };
        fence(Ordering::Acquire);
        s
    }

    fn set_status(&self, i: usize, s: u32) {
        fence(Ordering::Release);
        // SAFETY: as in status(); the release fence orders our frame writes before handing it over.
        unsafe { ptr::write_volatile(self.slot(i).add(hdr::STATUS) as *mut u32, s) };
    }

    fn read_u16(&self, i: usize, off: usize) -> u16 {
        // SAFETY: off is a field offset inside the slot header.
        unsafe { ptr::read_unaligned(self.slot(i).add(off) as *const u16) }
    }

    fn read_u32(&self, i: usize, off: usize) -> u32 {
        // SAFETY: as above.
        unsafe { ptr::read_unaligned(self.slot(i).add(off) as *const u32) }
    }
}

/// Receive half: the RX ring, and the socket queue for oversized frames.
pub struct AfPacketRx {
    fd: OwnedFd,
    ring: Ring,
    big: Vec<u8>,
    /// Frames the kernel truncated because they did not fit a slot and could not be queued.
    truncated: u64,
}

/// Transmit half: the TX ring, and a socket of its own for `sendmsg` of frames too large for it.
pub struct AfPacketTx {
    fd: OwnedFd,
    big_fd: OwnedFd,
    ring: Ring,
    pending: bool,
    name: String,
    /// Longest untagged frame the interface takes ([`max_len`]).
    max_len: usize,
}

pub(crate) fn packet_socket(protocol: u16) -> io::Result<OwnedFd> {
    // SAFETY: plain socket call.
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            protocol.to_be() as i32,
        )
    })?;
    // SAFETY: fd was just returned by socket().
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn bind(fd: RawFd, ifindex: u32, protocol: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: sll is a valid sockaddr_ll of the size given.
    cvt(unsafe {
        libc::bind(fd, &sll as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_ll>() as u32)
    })
    .map(|_| ())
}

/// Opens `name` as a port.
pub fn open(name: &str, cfg: RingConfig) -> io::Result<(AfPacketRx, AfPacketTx)> {
    let index = ifindex(name)?;
    let eth_p_all = libc::ETH_P_ALL as u16;
    // Created listening to nothing; the bind at the end, once the ring exists, starts reception
    // on this interface only.
    let rx_fd = packet_socket(0)?;
    let tx_fd = packet_socket(0)?;
    for fd in [rx_fd.as_raw_fd(), tx_fd.as_raw_fd()] {
        setsockopt(fd, libc::SOL_PACKET, libc::PACKET_VNET_HDR, &1i32)?;
        setsockopt(fd, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V2)?;
    }
    let rfd = rx_fd.as_raw_fd();
    // We never want to see what we (or anyone) transmit on the port.
    setsockopt(rfd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &1i32)?;
    // Oversized frames go to the socket queue whole as well as truncated into the ring.
    setsockopt(rfd, libc::SOL_PACKET, libc::PACKET_COPY_THRESH, &1i32)?;
    setsockopt(rfd, libc::SOL_PACKET, libc::PACKET_AUXDATA, &1i32)?;
    let _ = setsockopt(rfd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &(8 << 20i32));
    let _ = setsockopt(rfd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &(8 << 20i32));
    setsockopt(tx_fd.as_raw_fd(), libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &1i32)?;
    // A slot the kernel cannot send is skipped rather than left marked WRONG_FORMAT: the kernel
    // would stop at it, and every frame queued after it would wait until the ring came round.
    setsockopt(tx_fd.as_raw_fd(), libc::SOL_PACKET, libc::PACKET_LOSS, &1i32)?;
    let _ = setsockopt(tx_fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &(8 << 20i32));

    let mut rx = Ring::map(rfd, libc::PACKET_RX_RING, cfg.rx_frames, cfg.frame_size)?;
    let mut tx = Ring::map(tx_fd.as_raw_fd(), libc::PACKET_TX_RING, cfg.tx_frames, cfg.frame_size)?;
    // Each socket has its own mapping (one ring each).
    let map = |fd: RawFd, len: usize| -> io::Result<*mut u8> {
        // SAFETY: mapping the ring the kernel just allocated for fd.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_LOCKED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            // MAP_LOCKED needs RLIMIT_MEMLOCK; fall back to an unlocked mapping.
            // SAFETY: as above.
            let p = unsafe {
                libc::mmap(ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
            };
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            return Ok(p as *mut u8);
        }
        Ok(p as *mut u8)
    };
    rx.base = map(rfd, rx.len)?;
    tx.base = map(tx_fd.as_raw_fd(), tx.len)?;
    // Frames too large for a ring slot (GSO super-frames) are sent with sendmsg, which a socket
    // with a TX ring cannot do; a third socket, listening to nothing, sends them. (Borrowing the
    // receive socket would keep it open, tapping every frame, after the receive half is dropped,
    // as the TC fast path does.)
    let big_fd = packet_socket(0)?;
    setsockopt(big_fd.as_raw_fd(), libc::SOL_PACKET, libc::PACKET_VNET_HDR, &1i32)?;
    let _ = setsockopt(big_fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &(8 << 20i32));
    bind(rfd, index, eth_p_all)?;
    bind(tx_fd.as_raw_fd(), index, 0)?;
    bind(big_fd.as_raw_fd(), index, 0)?;
    Ok((
        AfPacketRx { fd: rx_fd, ring: rx, big: vec![0; MAX_FRAME + vnet::LEN], truncated: 0 },
        AfPacketTx { fd: tx_fd, big_fd, ring: tx, pending: false, name: name.to_string(), max_len: max_len(name) },
    ))
}

impl AfPacketRx {
    /// Reads one whole oversized frame from the socket queue.
    fn recv_big(&mut self, f: &mut dyn FnMut(RxFrame<'_>)) {
        let mut iov = libc::iovec { iov_base: self.big.as_mut_ptr() as *mut libc::c_void, iov_len: self.big.len() };
        let mut cmsg = [0u64; 16];
        // SAFETY: msghdr is plain data.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&cmsg) as _; // usize on glibc, u32 on musl
                                                                // SAFETY: msg points at live buffers of the sizes given.
        let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT | libc::MSG_TRUNC) };
        if n < vnet::LEN as isize || n as usize > self.big.len() {
            return;
        }
        let mut vlan = None;
        // SAFETY: walking the control messages the kernel wrote into cmsg.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == libc::PACKET_AUXDATA {
                    let aux = ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::tpacket_auxdata);
                    if aux.tp_status & TP_STATUS_VLAN_VALID != 0 {
                        let tpid =
                            if aux.tp_status & TP_STATUS_VLAN_TPID_VALID != 0 { aux.tp_vlan_tpid } else { 0x8100 };
                        vlan = Some((tpid, aux.tp_vlan_tci));
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let n = n as usize;
        f(RxFrame { data: &self.big[vnet::LEN..n], offload: vnet::decode(&self.big[..vnet::LEN]), vlan, tstamp_ns: 0 });
    }

    fn kernel_stats(&self) -> TpacketStats {
        getsockopt(self.fd.as_raw_fd(), libc::SOL_PACKET, libc::PACKET_STATISTICS).unwrap_or_default()
    }
}

impl PortRx for AfPacketRx {
    fn rx_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn recv(&mut self, budget: usize, f: &mut dyn FnMut(RxFrame<'_>)) -> usize {
        let mut n = 0;
        while n < budget {
            let i = self.ring.head;
            let status = self.ring.status(i);
            if status & TP_STATUS_USER == 0 {
                break;
            }
            if status & TP_STATUS_COPY != 0 {
                self.recv_big(f);
            } else {
                let len = self.ring.read_u32(i, hdr::LEN) as usize;
                let snaplen = self.ring.read_u32(i, hdr::SNAPLEN) as usize;
                let mac = self.ring.read_u16(i, hdr::MAC) as usize;
                if snaplen < len || mac < vnet::LEN || mac + snaplen > self.ring.frame_size {
                    self.truncated += 1;
                } else {
                    let vlan = (status & TP_STATUS_VLAN_VALID != 0).then(|| {
                        let tci = self.ring.read_u16(i, hdr::VLAN_TCI);
                        let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 {
                            self.ring.read_u16(i, hdr::VLAN_TPID)
                        } else {
                            0x8100
                        };
                        (tpid, tci)
                    });
                    // SAFETY: mac and snaplen were checked to lie inside this slot, which the kernel
                    // handed to us (TP_STATUS_USER) and will not touch until we give it back.
                    let (vh, data) = unsafe {
                        let base = self.ring.slot(i);
                        (
                            std::slice::from_raw_parts(base.add(mac - vnet::LEN), vnet::LEN),
                            std::slice::from_raw_parts(base.add(mac), snaplen),
                        )
                    };
                    let tstamp_ns = self.ring.read_u32(i, hdr::SEC) as u64 * 1_000_000_000
                        + self.ring.read_u32(i, hdr::NSEC) as u64;
                    f(RxFrame { data, offload: vnet::decode(vh), vlan, tstamp_ns });
                }
            }
            self.ring.set_status(i, TP_STATUS_KERNEL);
            self.ring.head = (i + 1) % self.ring.frames;
            n += 1;
        }
        n
    }

    fn rx_drops(&mut self) -> u64 {
        // PACKET_STATISTICS resets on read: accumulate.
        self.kernel_stats().drops as u64 + std::mem::take(&mut self.truncated)
    }
}

/// The longest frame (without FCS) the interface sends: its MTU plus the Ethernet header. A
/// frame with a VLAN tag may be 4 bytes longer, as the kernel allows.
pub(crate) fn max_len(name: &str) -> usize {
    if_mtu(name).map_or(usize::MAX, |mtu| mtu as usize + ETH_HLEN)
}

const ETH_HLEN: usize = 14;
const VLAN_HLEN: usize = 4;

impl AfPacketTx {
    /// Sends through the interface's queueing layer instead of past it: slower, but packet taps
    /// on the interface (tcpdump, a capture of outgoing frames) then see what is sent.
    pub fn through_qdisc(&self) -> io::Result<()> {
        setsockopt(self.fd.as_raw_fd(), libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &0i32)
    }
}

impl PortTx for AfPacketTx {
    fn send(&mut self, frame: &[u8], offload: &packet::Offload) -> Result<(), TxError> {
        // The kernel does not check the length of a frame with a virtio-net header on the TX ring:
        // a veth would drop it uncounted, and sendmsg refuses it. Refused here, it is counted.
        if offload.gso.is_none() && frame.len() > self.max_len {
            let tagged = matches!(frame.get(12..14), Some([0x81, 0x00] | [0x88, 0xa8]));
            if !tagged || frame.len() > self.max_len.saturating_add(VLAN_HLEN) {
                return Err(TxError::Refused);
            }
        }
        let room = self.ring.frame_size - TX_DATA_OFFSET - vnet::LEN;
        if frame.len() > room {
            let h = vnet::encode(offload, frame, false);
            let iov = [
                libc::iovec { iov_base: h.as_ptr() as *mut libc::c_void, iov_len: h.len() },
                libc::iovec { iov_base: frame.as_ptr() as *mut libc::c_void, iov_len: frame.len() },
            ];
            // SAFETY: msghdr is plain data; iov points at live buffers.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
            msg.msg_iovlen = 2;
            // SAFETY: msg is valid for the call.
            let r = unsafe { libc::sendmsg(self.big_fd.as_raw_fd(), &msg, libc::MSG_DONTWAIT) };
            if r >= 0 {
                return Ok(());
            }
            // Only a full socket is worth another try; anything else would fail forever.
            return match io::Error::last_os_error().raw_os_error() {
                Some(libc::EAGAIN | libc::ENOBUFS | libc::EINTR) => Err(TxError::Busy),
                _ => Err(TxError::Refused),
            };
        }
        let i = self.ring.head;
        let mut status = self.ring.status(i);
        if status & TP_STATUS_WRONG_FORMAT != 0 {
            self.ring.set_status(i, TP_STATUS_AVAILABLE);
            status = TP_STATUS_AVAILABLE;
        }
        if status != TP_STATUS_AVAILABLE {
            // The kernel is still sending what we queued a ring ago: push it along once. Always:
            // a kick made while the link was down sent nothing and left the ring full, and
            // without another the port would never send again.
            self.pending = true;
            self.flush();
            if self.ring.status(i) != TP_STATUS_AVAILABLE {
                return Err(TxError::Busy);
            }
        }
        let h = vnet::encode(offload, frame, true);
        // SAFETY: the slot is ours (AVAILABLE) and the writes stay inside it (checked against room).
        unsafe {
            let base = self.ring.slot(i);
            ptr::write_unaligned(base.add(hdr::LEN) as *mut u32, (frame.len() + vnet::LEN) as u32);
            ptr::copy_nonoverlapping(h.as_ptr(), base.add(TX_DATA_OFFSET), vnet::LEN);
            ptr::copy_nonoverlapping(frame.as_ptr(), base.add(TX_DATA_OFFSET + vnet::LEN), frame.len());
        }
        self.ring.set_status(i, TP_STATUS_SEND_REQUEST);
        self.ring.head = (i + 1) % self.ring.frames;
        self.pending = true;
        Ok(())
    }

    fn flush(&mut self) {
        if self.pending {
            self.pending = false;
            // SAFETY: a zero-length send kicks the TX ring.
            unsafe { libc::send(self.fd.as_raw_fd(), ptr::null(), 0, libc::MSG_DONTWAIT) };
        }
    }

    fn link_changed(&mut self) {
        self.max_len = max_len(&self.name);
        // What waited on the ring while the link was down goes now that it may be up.
        self.pending = true;
        self.flush();
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        if !self.base.is_null() {
            // SAFETY: unmapping the ring we mapped; nothing refers to it after this.
            unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
        }
    }
}
