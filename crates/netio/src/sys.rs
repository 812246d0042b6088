//! Thin safe wrappers over the Linux calls the datapath needs.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: value points to a live T of the size given.
    let r = unsafe {
        libc::setsockopt(fd, level, name, value as *const T as *const libc::c_void, std::mem::size_of::<T>() as u32)
    };
    cvt(r).map(|_| ())
}

pub fn getsockopt<T: Default>(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<T> {
    let mut value = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: value is a live T and len its size.
    let r = unsafe { libc::getsockopt(fd, level, name, &mut value as *mut T as *mut libc::c_void, &mut len) };
    cvt(r).map(|_| value)
}

pub fn ifindex(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has NUL"))?;
    // SAFETY: c is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(io::Error::new(io::ErrorKind::NotFound, format!("no interface named {name}")))
    } else {
        Ok(i)
    }
}

fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    // SAFETY: ifreq is plain data; all-zero is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.len() >= req.ifr_name.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "interface name too long"));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(req)
}

fn control_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket call.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd was just returned by socket().
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Interface flags (IFF_UP, IFF_RUNNING, IFF_LOWER_UP…).
pub fn if_flags(name: &str) -> io::Result<u32> {
    let s = control_socket()?;
    let mut req = ifreq(name)?;
    // SAFETY: req is a valid ifreq for SIOCGIFFLAGS.
    cvt(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut req) })?;
    // SAFETY: the kernel filled the flags member of the union.
    Ok(unsafe { req.ifr_ifru.ifru_flags } as u16 as u32)
}

/// The interface's MTU (bytes of payload after the Ethernet header).
pub fn if_mtu(name: &str) -> io::Result<u32> {
    let s = control_socket()?;
    let mut req = ifreq(name)?;
    // SAFETY: req is a valid ifreq for SIOCGIFMTU.
    cvt(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFMTU as _, &mut req) })?;
    // SAFETY: the kernel filled the mtu member of the union.
    Ok(unsafe { req.ifr_ifru.ifru_mtu } as u32)
}

/// Sets the interface's MTU.
pub fn set_if_mtu(name: &str, mtu: u32) -> io::Result<()> {
    let s = control_socket()?;
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_mtu = mtu as libc::c_int;
    // SAFETY: req is a valid ifreq for SIOCSIFMTU.
    cvt(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFMTU as _, &mut req) })?;
    Ok(())
}

/// Sets or clears IFF_UP.
pub fn set_if_up(name: &str, up: bool) -> io::Result<()> {
    let s = control_socket()?;
    let mut req = ifreq(name)?;
    // SAFETY: as above.
    cvt(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut req) })?;
    // SAFETY: reading and writing the flags member filled by the kernel.
    unsafe {
        let f = req.ifr_ifru.ifru_flags;
        req.ifr_ifru.ifru_flags = if up { f | libc::IFF_UP as i16 } else { f & !(libc::IFF_UP as i16) };
    }
    // SAFETY: req is a valid ifreq for SIOCSIFFLAGS.
    cvt(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS as _, &mut req) })?;
    Ok(())
}

pub fn hw_addr(name: &str) -> io::Result<[u8; 6]> {
    let s = control_socket()?;
    let mut req = ifreq(name)?;
    // SAFETY: req is a valid ifreq for SIOCGIFHWADDR.
    cvt(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFHWADDR as _, &mut req) })?;
    let mut mac = [0u8; 6];
    // SAFETY: the kernel filled the hwaddr member.
    let data = unsafe { req.ifr_ifru.ifru_hwaddr.sa_data };
    for (m, d) in mac.iter_mut().zip(data.iter()) {
        *m = *d as u8;
    }
    Ok(mac)
}

const ETHTOOL_GSET: u32 = 0x1;
const ETHTOOL_GDRVINFO: u32 = 0x3;
const ETHTOOL_GLINK: u32 = 0xa;

/// `struct ethtool_drvinfo`.
#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    counts: [u32; 5],
}

/// `struct ethtool_cmd` (the legacy settings query, which every driver still answers).
#[repr(C)]
#[derive(Default)]
struct EthtoolCmd {
    cmd: u32,
    supported: u32,
    advertising: u32,
    speed: u16,
    duplex: u8,
    port: u8,
    phy_address: u8,
    transceiver: u8,
    autoneg: u8,
    mdio_support: u8,
    maxtxpkt: u32,
    maxrxpkt: u32,
    speed_hi: u16,
    eth_tp_mdix: u8,
    eth_tp_mdix_ctrl: u8,
    lp_advertising: u32,
    reserved: [u32; 2],
}

/// SIOCETHTOOL with `data` as the command structure. Ioctls, unlike /sys, answer for the network
/// namespace the process is in.
fn ethtool<T>(name: &str, data: &mut T) -> io::Result<()> {
    let s = control_socket()?;
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_data = data as *mut T as *mut libc::c_char;
    // SAFETY: req points at a live ethtool command structure of the kind its first word names.
    cvt(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCETHTOOL as _, &mut req) }).map(|_| ())
}

/// Turns generic receive offload on or off (`ethtool -K NAME gro on|off`). On a veth, GRO on
/// is also what makes it run NAPI, and so take frames an XDP program redirects into its peer.
pub fn set_gro(name: &str, on: bool) -> io::Result<()> {
    const ETHTOOL_SGRO: u32 = 0x2c;
    let mut v = [ETHTOOL_SGRO, on as u32];
    ethtool(name, &mut v)
}

/// Link speed in Mbit/s as the driver reports it, if it knows one.
pub fn speed_mbps(name: &str) -> Option<u32> {
    let mut cmd = EthtoolCmd { cmd: ETHTOOL_GSET, ..Default::default() };
    ethtool(name, &mut cmd).ok()?;
    let speed = cmd.speed as u32 | (cmd.speed_hi as u32) << 16;
    (speed != 0 && speed != u32::MAX && speed != 0xffff).then_some(speed)
}

/// Receive queues the interface uses (`ethtool -l`: its receive-only and combined channels),
/// where the driver says.
pub fn rx_queues(name: &str) -> Option<u32> {
    const ETHTOOL_GCHANNELS: u32 = 0x3c;
    // struct ethtool_channels: cmd, max_rx, max_tx, max_other, max_combined, rx_count,
    // tx_count, other_count, combined_count.
    let mut ch = [0u32; 9];
    ch[0] = ETHTOOL_GCHANNELS;
    ethtool(name, &mut ch).ok()?;
    Some(ch[5] + ch[8]).filter(|&n| n > 0)
}

/// The interface's driver ("veth", "virtio_net"...), as `ethtool -i` names it.
pub fn driver(name: &str) -> Option<String> {
    let mut info = EthtoolDrvinfo {
        cmd: ETHTOOL_GDRVINFO,
        driver: [0; 32],
        version: [0; 32],
        fw_version: [0; 32],
        bus_info: [0; 32],
        erom_version: [0; 32],
        reserved2: [0; 12],
        counts: [0; 5],
    };
    ethtool(name, &mut info).ok()?;
    let len = info.driver.iter().position(|&b| b == 0).unwrap_or(info.driver.len());
    Some(String::from_utf8_lossy(&info.driver[..len]).into_owned())
}

/// The name of interface `ifindex`, while it exists.
pub fn if_name(ifindex: u32) -> Option<String> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: buf has the IF_NAMESIZE bytes if_indextoname writes at most.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: on success buf holds a NUL-terminated name.
    Some(unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
}

/// Whether the link has carrier (false also when the interface is administratively down).
pub fn carrier(name: &str) -> bool {
    let mut v = [ETHTOOL_GLINK, 0u32];
    match ethtool(name, &mut v) {
        Ok(()) => v[1] != 0,
        // Where SIOCETHTOOL cannot be asked (qemu-user does not translate it): the operational
        // state the interface flags carry.
        Err(_) => if_flags(name)
            .is_ok_and(|f| f & (libc::IFF_UP | libc::IFF_RUNNING) as u32 == (libc::IFF_UP | libc::IFF_RUNNING) as u32),
    }
}

/// An eventfd used to wake the forwarding thread.
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: plain eventfd call.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: fd was just returned by eventfd().
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writing 8 bytes from a live u64.
        unsafe { libc::write(self.0.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
    }

    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reading 8 bytes into a live u64.
        unsafe { libc::read(self.0.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
    }

    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Waits until one of `fds` is readable or `timeout_ms` passes; returns the readable ones' indices
/// in `ready`.
pub fn poll_readable(fds: &[RawFd], timeout_ms: i32, ready: &mut Vec<usize>) -> io::Result<()> {
    let timeout = (timeout_ms >= 0).then(|| std::time::Duration::from_millis(timeout_ms as u64));
    poll_until(fds, timeout, ready)
}

/// Waits until one of `fds` is readable or `timeout` passes (`None`: no timeout), with the
/// kernel's high-resolution timer (ppoll), so a deadline need not be rounded to milliseconds.
/// Fills `ready` with the indexes of the readable ones.
pub fn poll_until(fds: &[RawFd], timeout: Option<std::time::Duration>, ready: &mut Vec<usize>) -> io::Result<()> {
    let mut pfds: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    // `as _`: time_t and the nanoseconds field differ in width between libcs and targets.
    let ts = timeout.map(|d| libc::timespec { tv_sec: d.as_secs() as _, tv_nsec: d.subsec_nanos() as _ });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: pfds is a live array of pollfd of the given length; ts_ptr is null or points at ts.
    let r = unsafe { libc::ppoll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ts_ptr, std::ptr::null()) };
    ready.clear();
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(());
        }
        return Err(e);
    }
    for (i, p) in pfds.iter().enumerate() {
        if p.revents & libc::POLLERR != 0 {
            take_error(p.fd);
        }
        if p.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0 {
            ready.push(i);
        }
    }
    Ok(())
}

/// Reads (and so clears) a socket's pending error. A packet socket whose interface went down
/// holds ENETDOWN, which nothing reading a memory-mapped ring ever collects: it would make every
/// poll return at once, and the thread spin, for as long as the socket lives.
fn take_error(fd: RawFd) {
    // A descriptor that is not a socket says ENOTSOCK: nothing to clear.
    let _ = getsockopt::<libc::c_int>(fd, libc::SOL_SOCKET, libc::SO_ERROR);
}

pub use crate::netlink::{create_veth, delete_link};

/// The time on `clock` (a clockid), in ns.
pub fn clock_ns(clock: libc::clockid_t) -> i128 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
}

/// CLOCK_MONOTONIC, the clock `bpf_ktime_get_ns` reads.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC) as u64
}

/// The wall clock, as the kernel stamps received frames.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME) as u64
}

/// A scratch directory for the tests: made by mkdtemp(3) under the temporary directory, so its
/// name is random and no other user can take it first (the mkdir fails where anything, a
/// symlink included, already is), mode 0700, so no other user can put or swap anything in it;
/// removed, with what it holds, when dropped. Under a shared `/tmp`, a name another user can
/// foresee is a name they can create first, and root (which runs the kernel tests) then writes,
/// reads or runs what they choose.
pub struct PrivateDir(std::path::PathBuf);

impl PrivateDir {
    /// `TMPDIR/<prefix>-XXXXXX`.
    pub fn new(prefix: &str) -> io::Result<PrivateDir> {
        use std::os::unix::ffi::OsStringExt;
        let template = std::env::temp_dir().join(format!("{prefix}-XXXXXX"));
        let mut bytes = CString::new(template.into_os_string().into_vec())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "temporary directory's path has NUL"))?
            .into_bytes_with_nul();
        // SAFETY: bytes is a writable, NUL-terminated template ending in XXXXXX, as mkdtemp wants.
        if unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) }.is_null() {
            return Err(io::Error::last_os_error());
        }
        bytes.pop();
        Ok(PrivateDir(std::ffi::OsString::from_vec(bytes).into()))
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_private_dir_is_fresh_its_users_alone_and_gone_when_dropped() {
        let (a, b) = (PrivateDir::new("ef-private-test").unwrap(), PrivateDir::new("ef-private-test").unwrap());
        assert_ne!(a.path(), b.path(), "each is a directory of its own");
        let meta = std::fs::symlink_metadata(a.path()).unwrap();
        assert!(meta.is_dir() && !meta.file_type().is_symlink());
        assert_eq!(meta.permissions().mode() & 0o777, 0o700, "{}", a.path().display());
        std::fs::write(a.path().join("held"), "x").unwrap();
        let path = a.path().to_path_buf();
        drop(a);
        assert!(!path.exists(), "{} and what it held are removed", path.display());
    }
}
