//! Link change notifications from rtnetlink, so that a cable pulled (or a veth peer taken down) is a
//! port-status message and a fast-failover switch-over within the same loop iteration.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::sys::cvt;

const RTMGRP_LINK: u32 = 1;
const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const IFLA_IFNAME: u16 = 3;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkEvent {
    pub ifindex: u32,
    pub name: String,
    pub flags: u32,
    pub deleted: bool,
}

pub struct LinkMonitor {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl LinkMonitor {
    pub fn open() -> io::Result<LinkMonitor> {
        // SAFETY: plain socket call.
        let fd = cvt(unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        })?;
        // SAFETY: fd was just returned by socket().
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_nl is plain data.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        sa.nl_groups = RTMGRP_LINK;
        // SAFETY: sa is a valid sockaddr_nl.
        cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sa as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        })?;
        Ok(LinkMonitor { fd, buf: vec![0; 32 * 1024] })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Reads every pending notification.
    pub fn drain(&mut self) -> Vec<LinkEvent> {
        let mut out = Vec::new();
        loop {
            // SAFETY: reading into a live buffer.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr() as *mut libc::c_void,
                    self.buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n <= 0 {
                break;
            }
            parse(&self.buf[..n as usize], &mut out);
        }
        out
    }
}

fn parse(mut b: &[u8], out: &mut Vec<LinkEvent>) {
    while b.len() >= 16 {
        let len = u32::from_ne_bytes(b[0..4].try_into().unwrap()) as usize;
        let typ = u16::from_ne_bytes(b[4..6].try_into().unwrap());
        if len < 16 || len > b.len() {
            return;
        }
        let msg = &b[16..len];
        if (typ == RTM_NEWLINK || typ == RTM_DELLINK) && msg.len() >= 16 {
            let ifindex = i32::from_ne_bytes(msg[4..8].try_into().unwrap()) as u32;
            let flags = u32::from_ne_bytes(msg[8..12].try_into().unwrap());
            let mut name = String::new();
            let mut attrs = &msg[16..];
            while attrs.len() >= 4 {
                let alen = u16::from_ne_bytes(attrs[0..2].try_into().unwrap()) as usize;
                let atype = u16::from_ne_bytes(attrs[2..4].try_into().unwrap());
                if alen < 4 || alen > attrs.len() {
                    break;
                }
                if atype == IFLA_IFNAME {
                    let raw = &attrs[4..alen];
                    let end = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
                    name = String::from_utf8_lossy(&raw[..end]).into_owned();
                }
                let step = alen.next_multiple_of(4).min(attrs.len());
                attrs = &attrs[step..];
            }
            out.push(LinkEvent { ifindex, name, flags, deleted: typ == RTM_DELLINK });
        }
        let step = len.next_multiple_of(4).min(b.len());
        b = &b[step..];
    }
}

/// Sends one rtnetlink request and waits for its acknowledgement.
fn request(msg_type: u16, flags: u16, body: &[u8]) -> io::Result<()> {
    // SAFETY: plain socket call.
    let fd = cvt(unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE) })?;
    // SAFETY: fd was just returned by socket().
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = 16 + body.len();
    let mut msg = Vec::with_capacity(len);
    msg.extend_from_slice(&(len as u32).to_ne_bytes());
    msg.extend_from_slice(&msg_type.to_ne_bytes());
    msg.extend_from_slice(&(flags | libc::NLM_F_REQUEST as u16 | libc::NLM_F_ACK as u16).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(body);
    // SAFETY: sending a live buffer.
    cvt(unsafe { libc::send(fd.as_raw_fd(), msg.as_ptr() as *const libc::c_void, msg.len(), 0) } as i32)?;
    let mut buf = [0u8; 4096];
    // SAFETY: reading into a live buffer.
    let n = cvt(unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) } as i32)?
        as usize;
    // NLMSG_ERROR carries the result: 0 is success.
    if n >= 20 && u16::from_ne_bytes(buf[4..6].try_into().unwrap()) == libc::NLMSG_ERROR as u16 {
        let err = i32::from_ne_bytes(buf[16..20].try_into().unwrap());
        if err != 0 {
            return Err(io::Error::from_raw_os_error(-err));
        }
    }
    Ok(())
}

fn attr(out: &mut Vec<u8>, typ: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&typ.to_ne_bytes());
    out.extend_from_slice(payload);
    out.resize(out.len().next_multiple_of(4), 0);
}

fn nested(out: &mut Vec<u8>, typ: u16, inner: &[u8]) {
    attr(out, typ | 0x8000 /* NLA_F_NESTED */, inner)
}

fn ifinfomsg(index: i32) -> Vec<u8> {
    let mut m = vec![0u8; 16];
    m[0] = libc::AF_UNSPEC as u8;
    m[4..8].copy_from_slice(&index.to_ne_bytes());
    m
}

fn cname(name: &str) -> Vec<u8> {
    let mut v = name.as_bytes().to_vec();
    v.push(0);
    v
}

/// Creates a veth pair `a` <-> `b` (both in this namespace, down).
pub fn create_veth(a: &str, b: &str) -> io::Result<()> {
    const IFLA_LINKINFO: u16 = 18;
    const IFLA_INFO_KIND: u16 = 1;
    const IFLA_INFO_DATA: u16 = 2;
    const VETH_INFO_PEER: u16 = 1;
    let mut peer = ifinfomsg(0);
    attr(&mut peer, IFLA_IFNAME, &cname(b));
    let mut data = Vec::new();
    nested(&mut data, VETH_INFO_PEER, &peer);
    let mut info = Vec::new();
    attr(&mut info, IFLA_INFO_KIND, b"veth\0");
    nested(&mut info, IFLA_INFO_DATA, &data);
    let mut body = ifinfomsg(0);
    attr(&mut body, IFLA_IFNAME, &cname(a));
    nested(&mut body, IFLA_LINKINFO, &info);
    request(RTM_NEWLINK, (libc::NLM_F_CREATE | libc::NLM_F_EXCL) as u16, &body)
}

/// Deletes interface `name` (for a veth, its peer goes too).
pub fn delete_link(name: &str) -> io::Result<()> {
    let mut body = ifinfomsg(0);
    attr(&mut body, IFLA_IFNAME, &cname(name));
    request(RTM_DELLINK, 0, &body)
}

/// `struct tcmsg`: family, padding, ifindex, handle, parent, info.
fn tcmsg(ifindex: u32, handle: u32, parent: u32, info: u32) -> Vec<u8> {
    let mut m = vec![0u8; 20];
    m[0] = libc::AF_UNSPEC as u8;
    m[4..8].copy_from_slice(&ifindex.to_ne_bytes());
    m[8..12].copy_from_slice(&handle.to_ne_bytes());
    m[12..16].copy_from_slice(&parent.to_ne_bytes());
    m[16..20].copy_from_slice(&info.to_ne_bytes());
    m
}

const RTM_NEWQDISC: u16 = 36;
const RTM_NEWTFILTER: u16 = 44;
const RTM_DELTFILTER: u16 = 45;
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TC_H_CLSACT: u32 = 0xffff_fff1;
const TC_H_INGRESS_PARENT: u32 = 0xffff_fff2;
const TC_H_EGRESS_PARENT: u32 = 0xffff_fff3;
/// The handle our filters take: one of ours per hook, interface and priority.
const FILTER_HANDLE: u32 = 1;

/// A BPF program attached as a direct-action `cls_bpf` filter under the interface's `clsact`
/// qdisc (how TC programs were attached before TCX links, Linux 6.6); removed when dropped.
#[derive(Debug)]
pub struct TcFilter {
    ifindex: u32,
    parent: u32,
    prio: u16,
}

/// Attaches the TC program `prog_fd` (named `name`) at `ifindex`'s ingress or egress through a
/// `clsact` qdisc, created if the interface has none, at priority `prio` (lower runs first). A
/// filter already at that priority (a run that did not clean up) is replaced.
pub fn attach_cls_bpf(ifindex: u32, egress: bool, prog_fd: i32, name: &str, prio: u16) -> io::Result<TcFilter> {
    let mut qdisc = tcmsg(ifindex, 0xffff_0000, TC_H_CLSACT, 0);
    attr(&mut qdisc, TCA_KIND, b"clsact\0");
    match request(RTM_NEWQDISC, (libc::NLM_F_CREATE | libc::NLM_F_EXCL) as u16, &qdisc) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
        Err(e) => return Err(io::Error::new(e.kind(), format!("clsact qdisc: {e}"))),
    }
    const TCA_BPF_FD: u16 = 6;
    const TCA_BPF_NAME: u16 = 7;
    const TCA_BPF_FLAGS: u16 = 8;
    const TCA_BPF_FLAG_ACT_DIRECT: u32 = 1;
    let parent = if egress { TC_H_EGRESS_PARENT } else { TC_H_INGRESS_PARENT };
    let mut options = Vec::new();
    attr(&mut options, TCA_BPF_FD, &(prog_fd as u32).to_ne_bytes());
    attr(&mut options, TCA_BPF_NAME, &cname(name));
    attr(&mut options, TCA_BPF_FLAGS, &TCA_BPF_FLAG_ACT_DIRECT.to_ne_bytes());
    let mut body = tcmsg(ifindex, FILTER_HANDLE, parent, filter_info(prio));
    attr(&mut body, TCA_KIND, b"bpf\0");
    nested(&mut body, TCA_OPTIONS, &options);
    request(RTM_NEWTFILTER, (libc::NLM_F_CREATE | libc::NLM_F_REPLACE) as u16, &body)
        .map_err(|e| io::Error::new(e.kind(), format!("cls_bpf filter: {e}")))?;
    Ok(TcFilter { ifindex, parent, prio })
}

/// The filter's priority (high 16 bits) and protocol (ETH_P_ALL, network order).
fn filter_info(prio: u16) -> u32 {
    (prio as u32) << 16 | (libc::ETH_P_ALL as u16).to_be() as u32
}

impl TcFilter {
    /// The filter a `attach_cls_bpf(ifindex, egress, _, _, prio)` left (by an earlier process),
    /// to be removed when dropped.
    pub fn existing(ifindex: u32, egress: bool, prio: u16) -> TcFilter {
        let parent = if egress { TC_H_EGRESS_PARENT } else { TC_H_INGRESS_PARENT };
        TcFilter { ifindex, parent, prio }
    }
}

impl Drop for TcFilter {
    fn drop(&mut self) {
        let mut body = tcmsg(self.ifindex, FILTER_HANDLE, self.parent, filter_info(self.prio));
        attr(&mut body, TCA_KIND, b"bpf\0");
        // The interface may be gone, and its filters with it.
        let _ = request(RTM_DELTFILTER, 0, &body);
    }
}

/// An XDP program attached over netlink (how XDP was attached before BPF links, Linux 5.9);
/// removed when dropped.
#[derive(Debug)]
pub struct XdpAttachment {
    ifindex: u32,
    flags: u32,
}

/// XDP_FLAGS_SKB_MODE and XDP_FLAGS_DRV_MODE.
pub const XDP_GENERIC: u32 = 1 << 1;
pub const XDP_NATIVE: u32 = 1 << 2;

fn set_xdp(ifindex: u32, fd: i32, flags: u32) -> io::Result<()> {
    const IFLA_XDP: u16 = 43;
    const IFLA_XDP_FD: u16 = 1;
    const IFLA_XDP_FLAGS: u16 = 3;
    let mut xdp = Vec::new();
    attr(&mut xdp, IFLA_XDP_FD, &fd.to_ne_bytes());
    attr(&mut xdp, IFLA_XDP_FLAGS, &flags.to_ne_bytes());
    let mut body = ifinfomsg(ifindex as i32);
    nested(&mut body, IFLA_XDP, &xdp);
    request(RTM_SETLINK, 0, &body)
}

/// Attaches the XDP program `prog_fd` to `ifindex` in `mode` (`XDP_NATIVE` or `XDP_GENERIC`).
pub fn attach_xdp(ifindex: u32, prog_fd: i32, mode: u32) -> io::Result<XdpAttachment> {
    set_xdp(ifindex, prog_fd, mode)?;
    Ok(XdpAttachment { ifindex, flags: mode })
}

impl XdpAttachment {
    /// The XDP program an earlier process attached to `ifindex` in `mode`, removed when dropped.
    pub fn existing(ifindex: u32, mode: u32) -> XdpAttachment {
        XdpAttachment { ifindex, flags: mode }
    }
}

impl Drop for XdpAttachment {
    fn drop(&mut self) {
        let _ = set_xdp(self.ifindex, -1, self.flags);
    }
}

const RTM_SETLINK: u16 = 19;

/// Sends one netlink request on a fresh socket of `protocol` and returns the first reply's
/// payload (after the netlink header), or the error the kernel answered with.
fn query(protocol: i32, msg_type: u16, body: &[u8]) -> io::Result<Vec<u8>> {
    // SAFETY: plain socket call.
    let fd = cvt(unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, protocol) })?;
    // SAFETY: fd was just returned by socket().
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = 16 + body.len();
    let mut msg = Vec::with_capacity(len);
    msg.extend_from_slice(&(len as u32).to_ne_bytes());
    msg.extend_from_slice(&msg_type.to_ne_bytes());
    msg.extend_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(body);
    // SAFETY: sending a live buffer.
    cvt(unsafe { libc::send(fd.as_raw_fd(), msg.as_ptr() as *const libc::c_void, msg.len(), 0) } as i32)?;
    let mut buf = vec![0u8; 8192];
    // SAFETY: reading into a live buffer.
    let n = cvt(unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) } as i32)?
        as usize;
    let reply_len = if n >= 16 { u32::from_ne_bytes(buf[0..4].try_into().unwrap()) as usize } else { 0 };
    if reply_len < 16 || reply_len > n {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "short netlink reply"));
    }
    if u16::from_ne_bytes(buf[4..6].try_into().unwrap()) == libc::NLMSG_ERROR as u16 {
        let err = i32::from_ne_bytes(buf[16..20].try_into().unwrap());
        return Err(io::Error::from_raw_os_error(if err == 0 { libc::EPROTO } else { -err }));
    }
    Ok(buf[16..reply_len].to_vec())
}

/// The attribute `typ` among netlink attributes `attrs`.
fn find_attr(mut attrs: &[u8], typ: u16) -> Option<&[u8]> {
    while attrs.len() >= 4 {
        let alen = u16::from_ne_bytes(attrs[0..2].try_into().unwrap()) as usize;
        let atype = u16::from_ne_bytes(attrs[2..4].try_into().unwrap()) & 0x3fff;
        if alen < 4 || alen > attrs.len() {
            return None;
        }
        if atype == typ {
            return Some(&attrs[4..alen]);
        }
        attrs = &attrs[alen.next_multiple_of(4).min(attrs.len())..];
    }
    None
}

/// A generic netlink request: `struct genlmsghdr` (command, version 1) and the attributes.
fn genl(family: u16, cmd: u8, attrs: &[u8]) -> io::Result<Vec<u8>> {
    let mut body = vec![cmd, 1, 0, 0];
    body.extend_from_slice(attrs);
    query(libc::NETLINK_GENERIC, family, &body).map(|r| r.get(4..).unwrap_or_default().to_vec())
}

/// `NETDEV_XDP_ACT_NDO_XMIT`: the device takes frames other devices' XDP programs redirect to it.
pub const XDP_ACT_NDO_XMIT: u64 = 1 << 2;

/// The XDP features the kernel says interface `ifindex` has (`NETDEV_A_DEV_XDP_FEATURES` of the
/// `netdev` generic netlink family), or None where the kernel has no such family (before Linux
/// 6.3). For a veth, `XDP_ACT_NDO_XMIT` follows its peer: set while the peer runs an XDP program
/// or has GRO on, which is when a redirect into the veth arrives.
pub fn xdp_features(ifindex: u32) -> io::Result<Option<u64>> {
    const GENL_ID_CTRL: u16 = 0x10;
    const CTRL_CMD_GETFAMILY: u8 = 3;
    const CTRL_ATTR_FAMILY_ID: u16 = 1;
    const CTRL_ATTR_FAMILY_NAME: u16 = 2;
    const NETDEV_CMD_DEV_GET: u8 = 1;
    const NETDEV_A_DEV_IFINDEX: u16 = 1;
    const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;
    // The family's id, asked once: the switch asks every port's features every second. The
    // family is built in (net/core), so its id does not change while the kernel runs.
    static FAMILY: std::sync::OnceLock<Option<u16>> = std::sync::OnceLock::new();
    let family = match FAMILY.get() {
        Some(f) => *f,
        None => {
            let mut ask = Vec::new();
            attr(&mut ask, CTRL_ATTR_FAMILY_NAME, b"netdev\0");
            let found = match genl(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, &ask) {
                Ok(reply) => find_attr(&reply, CTRL_ATTR_FAMILY_ID)
                    .filter(|id| id.len() >= 2)
                    .map(|id| u16::from_ne_bytes([id[0], id[1]])),
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
                Err(e) => return Err(e),
            };
            *FAMILY.get_or_init(|| found)
        }
    };
    let Some(family) = family else { return Ok(None) };
    let mut ask = Vec::new();
    attr(&mut ask, NETDEV_A_DEV_IFINDEX, &ifindex.to_ne_bytes());
    let reply = genl(family, NETDEV_CMD_DEV_GET, &ask)?;
    Ok(find_attr(&reply, NETDEV_A_DEV_XDP_FEATURES)
        .filter(|v| v.len() == 8)
        .map(|v| u64::from_ne_bytes(v.try_into().unwrap())))
}

/// Frames interface `ifindex` dropped on transmit since it was made (`tx_dropped` of its 64-bit
/// link statistics). Before Linux 6.3 a veth counts there the XDP frames redirected into it that
/// it could not take.
pub fn tx_dropped(ifindex: u32) -> io::Result<u64> {
    const RTM_GETLINK: u16 = 18;
    const IFLA_STATS64: u16 = 23;
    /// `struct rtnl_link_stats64`: rx and tx packets, bytes, errors, then rx_dropped, tx_dropped.
    const TX_DROPPED_AT: usize = 7 * 8;
    let reply = query(libc::NETLINK_ROUTE, RTM_GETLINK, &ifinfomsg(ifindex as i32))?;
    let stats = reply.get(16..).and_then(|attrs| find_attr(attrs, IFLA_STATS64));
    match stats.and_then(|s| s.get(TX_DROPPED_AT..TX_DROPPED_AT + 8)) {
        Some(v) => Ok(u64::from_ne_bytes(v.try_into().unwrap())),
        None => Err(io::Error::new(io::ErrorKind::InvalidData, "no 64-bit link statistics")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loopback's XDP features and statistics, read as the redirect fallback reads a port's: a
    /// reply misread would come back as an error or no features at all.
    #[test]
    fn loopback_answers_for_its_xdp_features_and_transmit_drops() {
        let lo = crate::sys::ifindex("lo").unwrap();
        assert!(tx_dropped(lo).is_ok(), "{:?}", tx_dropped(lo));
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut v = release.split(|c: char| !c.is_ascii_digit()).filter_map(|x| x.parse::<u32>().ok());
        let (major, minor) = (v.next().unwrap(), v.next().unwrap());
        let features = xdp_features(lo).unwrap();
        if (major, minor) >= (6, 3) {
            // Loopback takes no redirects; it has no XDP of its own either.
            assert_eq!(features.map(|f| f & XDP_ACT_NDO_XMIT), Some(0), "{features:?}");
        } else {
            assert_eq!(features, None);
        }
    }
}
