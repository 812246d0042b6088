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
