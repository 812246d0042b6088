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
    let n = cvt(unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) } as i32)? as usize;
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
