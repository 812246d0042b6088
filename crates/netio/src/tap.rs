//! The LOCAL port: a tap interface that gives the host's own stack a port on the switch.
//! Traffic to and from the host itself is light, so plain read/write per frame is enough.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::sys::{cvt, set_if_up};
use crate::vnet;
use crate::{PortRx, PortTx, RxFrame, TxError};

pub struct TapRx {
    fd: OwnedFd,
    buf: Vec<u8>,
}

pub struct TapTx {
    fd: OwnedFd,
}

const TUNSETVNETHDRSZ: libc::c_ulong = 0x400454d8;
const TUNSETOFFLOAD: libc::c_ulong = 0x400454d0;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;

/// Creates (or attaches to) tap interface `name` and brings it up.
pub fn open(name: &str) -> io::Result<(TapRx, TapTx)> {
    let path = CString::new("/dev/net/tun").unwrap();
    // SAFETY: plain open call.
    let fd = cvt(unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
    // SAFETY: fd was just returned by open().
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= req.ifr_name.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "interface name too long"));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(name.as_bytes()) {
        *d = *s as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_VNET_HDR) as i16;
    // SAFETY: req is a valid ifreq for TUNSETIFF.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF as _, &req) })?;
    let sz: libc::c_int = vnet::LEN as libc::c_int;
    // SAFETY: passing a pointer to a live int.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETVNETHDRSZ as _, &sz) })?;
    // Let the host hand us partial checksums and TSO frames, as veth does.
    // SAFETY: TUNSETOFFLOAD takes its argument by value.
    let _ = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD as _, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) };
    set_if_up(name, true)?;
    let tx = TapTx { fd: fd.try_clone()? };
    Ok((TapRx { fd, buf: vec![0; 65_536 + 512] }, tx))
}

impl PortRx for TapRx {
    fn rx_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn recv(&mut self, budget: usize, f: &mut dyn FnMut(RxFrame<'_>)) -> usize {
        let mut n = 0;
        while n < budget {
            // SAFETY: reading into a live buffer of the given length.
            let r =
                unsafe { libc::read(self.fd.as_raw_fd(), self.buf.as_mut_ptr() as *mut libc::c_void, self.buf.len()) };
            if r < vnet::LEN as isize {
                break;
            }
            let r = r as usize;
            f(RxFrame {
                data: &self.buf[vnet::LEN..r],
                offload: vnet::decode(&self.buf[..vnet::LEN]),
                vlan: None,
                tstamp_ns: 0,
            });
            n += 1;
        }
        n
    }

    fn rx_drops(&mut self) -> u64 {
        0
    }
}

impl PortTx for TapTx {
    fn send(&mut self, frame: &[u8], offload: &packet::Offload) -> Result<(), TxError> {
        let h = vnet::encode(offload, frame, false);
        let iov = [
            libc::iovec { iov_base: h.as_ptr() as *mut libc::c_void, iov_len: h.len() },
            libc::iovec { iov_base: frame.as_ptr() as *mut libc::c_void, iov_len: frame.len() },
        ];
        // SAFETY: iov points at live buffers.
        let r = unsafe { libc::writev(self.fd.as_raw_fd(), iov.as_ptr(), 2) };
        if r < 0 {
            Err(TxError::Busy)
        } else {
            Ok(())
        }
    }

    fn flush(&mut self) {}
}
