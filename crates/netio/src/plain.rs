//! A port over a plain AF_PACKET socket, one frame per system call and none of AF_PACKET's own
//! socket options (SOL_PACKET): the fallback where the kernel, or what stands for it, refuses
//! them. qemu-user does (it translates no SOL_PACKET option, so `PACKET_VNET_HDR` fails with
//! ENOPROTOOPT), and that is how an ARM image is run on a PC.
//!
//! What a port does without, against `afpacket`: no rings (a system call per frame); no virtio-net
//! header, so no checksum or segmentation offload either way (frames must arrive with their
//! checksums done and no larger than the MTU: a host sending through it turns its transmit
//! offloads off); no PACKET_IGNORE_OUTGOING (its own transmissions are told apart by
//! `sll_pkttype`); no PACKET_AUXDATA (a VLAN tag the interface took into metadata is not seen:
//! turn the interface's receive VLAN offload off); no kernel drop count.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::afpacket::{bind, max_len, packet_socket};
use crate::{PortRx, PortTx, RxFrame, TxError};

/// What the kernel calls a frame this host sent, as seen by a packet socket.
const PACKET_OUTGOING: u8 = 4;
/// Larger than any frame an MTU-sized interface delivers (jumbo frames included).
const RX_BUFFER: usize = 16 * 1024;

pub struct PlainRx {
    fd: OwnedFd,
    buf: Vec<u8>,
    /// Frames larger than the buffer (GSO super-frames from a sender with offloads on): dropped.
    oversized: u64,
}

pub struct PlainTx {
    fd: OwnedFd,
    max_len: usize,
    name: String,
    /// A frame whose checksum is finished here, the kernel having no header to be told to.
    scratch: Vec<u8>,
}

/// Opens `name` as a port on plain packet sockets.
pub fn open(name: &str) -> io::Result<(PlainRx, PlainTx)> {
    let index = crate::sys::ifindex(name)?;
    let rx = packet_socket(0)?;
    let tx = packet_socket(0)?;
    bind(rx.as_raw_fd(), index, libc::ETH_P_ALL as u16)?;
    bind(tx.as_raw_fd(), index, 0)?;
    Ok((
        PlainRx { fd: rx, buf: vec![0; RX_BUFFER], oversized: 0 },
        PlainTx { fd: tx, max_len: max_len(name), name: name.to_string(), scratch: Vec::new() },
    ))
}

impl PortRx for PlainRx {
    fn rx_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn recv(&mut self, budget: usize, f: &mut dyn FnMut(RxFrame<'_>)) -> usize {
        let mut handed = 0;
        for _ in 0..budget {
            // SAFETY: sockaddr_ll is plain data.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut from_len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: buf and from are live buffers of the sizes given.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr() as *mut libc::c_void,
                    self.buf.len(),
                    libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                    &mut from as *mut _ as *mut libc::sockaddr,
                    &mut from_len,
                )
            };
            if n < 0 {
                break;
            }
            if from.sll_pkttype == PACKET_OUTGOING {
                continue;
            }
            let n = n as usize;
            if n > self.buf.len() {
                self.oversized += 1;
                continue;
            }
            f(RxFrame { data: &self.buf[..n], offload: Default::default(), vlan: None, tstamp_ns: 0 });
            handed += 1;
        }
        handed
    }

    fn rx_drops(&mut self) -> u64 {
        std::mem::take(&mut self.oversized)
    }
}

impl PortTx for PlainTx {
    fn send(&mut self, frame: &[u8], offload: &packet::Offload) -> Result<(), TxError> {
        // Without a virtio-net header the kernel can neither segment nor finish a checksum: the
        // first is refused, the second done here.
        if offload.gso.is_some() || frame.len() > self.max_len + 4 {
            return Err(TxError::Refused);
        }
        let frame = match offload.csum {
            Some(p) if p.start as usize + p.offset as usize + 2 <= frame.len() => {
                let (start, at) = (p.start as usize, p.start as usize + p.offset as usize);
                self.scratch.clear();
                self.scratch.extend_from_slice(frame);
                let c = packet::csum::checksum(&self.scratch[start..]);
                self.scratch[at..at + 2].copy_from_slice(&c.to_be_bytes());
                &self.scratch[..]
            }
            _ => frame,
        };
        // SAFETY: frame is a live buffer of the length given.
        let n = unsafe {
            libc::send(self.fd.as_raw_fd(), frame.as_ptr() as *const libc::c_void, frame.len(), libc::MSG_DONTWAIT)
        };
        if n >= 0 {
            return Ok(());
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) => Err(TxError::Busy),
            _ => Err(TxError::Refused),
        }
    }

    fn flush(&mut self) {}

    fn link_changed(&mut self) {
        self.max_len = max_len(&self.name);
    }
}
