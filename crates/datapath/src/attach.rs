//! Attaching programs to interfaces the way the running kernel allows: TC through a TCX link
//! (Linux ≥ 6.6) or else a direct-action `cls_bpf` filter under `clsact`; XDP through a BPF link
//! (≥ 5.9) or else netlink; native XDP where the driver has it, else generic. `--kernel-compat
//! legacy` takes the old ways on a new kernel, so that they run in the ordinary tests too.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use ebpf::{Link, Program};
use netio::netlink::{self, TcFilter, XdpAttachment, XDP_GENERIC, XDP_NATIVE};

static LEGACY: AtomicBool = AtomicBool::new(false);

/// From now on, attach the pre-link ways (clsact filters, netlink XDP) even where links exist.
pub fn force_legacy(on: bool) {
    LEGACY.store(on, Ordering::Relaxed);
}

fn legacy() -> bool {
    LEGACY.load(Ordering::Relaxed)
}

/// A program attached to an interface, until dropped.
#[derive(Debug)]
pub struct Attachment {
    /// How: `tcx`, `tc clsact`, `xdp native link`, `xdp generic netlink`…
    pub kind: &'static str,
    how: How,
}

#[derive(Debug)]
enum How {
    Link(Link),
    Filter(#[allow(dead_code)] TcFilter),
    Xdp(#[allow(dead_code)] XdpAttachment),
}

/// The kinds of attachment that are links: what a later run can take over from its pin.
pub const LINK_KINDS: [&str; 3] = ["tcx", "xdp native link", "xdp generic link"];

impl Attachment {
    /// A link a program is already attached through (one found pinned), as an attachment of `kind`.
    pub fn from_link(link: Link, kind: &'static str) -> Attachment {
        Attachment { kind, how: How::Link(link) }
    }

    /// Pins a link at `path` so that it outlives the process; other kinds stay attached until
    /// removed anyway, and need no pin.
    pub fn pin(&self, path: &std::path::Path) -> io::Result<()> {
        match &self.how {
            How::Link(l) => l.pin(path),
            _ => Ok(()),
        }
    }

    /// Lets go without detaching: a pinned link stays with its pin, a filter or netlink XDP
    /// program where it is.
    pub fn leave_attached(self) {
        std::mem::forget(self);
    }

    /// The kernel's id of the link, for links.
    pub fn link_id(&self) -> Option<u32> {
        match &self.how {
            How::Link(l) => l.id().ok(),
            _ => None,
        }
    }

    /// Whether it is known to be attached no more (someone detached the link, or its interface
    /// went away). Only links can tell; a filter or netlink attachment answers no.
    pub fn detached(&self) -> bool {
        match &self.how {
            How::Link(l) => l.ifindex().is_ok_and(|i| i == 0),
            _ => false,
        }
    }
}

/// Whether a link attach failed because the kernel has no such link (rather than for a reason
/// the old way would meet too).
fn no_such_link(e: &io::Error) -> bool {
    // ENOTSUPP (524) is the kernel's own, not in libc.
    matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) | Some(524))
}

/// Where a program stands among the switch's own at an interface's TC ingress: as a `clsact`
/// filter, its priority (the fast path first); a TCX link is appended, in the order attached.
#[derive(Clone, Copy, Debug)]
pub enum TcSlot {
    FastPath = 1,
    PortGuard = 2,
}

/// Attaches a TC (sched_cls, direct action) program at `ifindex`'s ingress.
pub fn tc(prog: &Program, ifindex: u32, slot: TcSlot) -> io::Result<Attachment> {
    if !legacy() {
        match prog.attach_tc(ifindex, false) {
            Ok(link) => return Ok(Attachment { kind: "tcx", how: How::Link(link) }),
            Err(e) if no_such_link(&e) => {}
            Err(e) => return Err(e),
        }
    }
    let filter = netlink::attach_cls_bpf(ifindex, false, prog.fd(), &prog.name, slot as u16)?;
    Ok(Attachment { kind: "tc clsact", how: How::Filter(filter) })
}

/// Attaches an XDP program to `ifindex`: native where the driver has it, else generic.
pub fn xdp(prog: &Program, ifindex: u32) -> io::Result<Attachment> {
    use ebpf::xdp_flags::{DRV_MODE, SKB_MODE};
    if !legacy() {
        match prog.attach_xdp_mode(ifindex, DRV_MODE) {
            Ok(link) => return Ok(Attachment { kind: "xdp native link", how: How::Link(link) }),
            Err(_) => match prog.attach_xdp_mode(ifindex, SKB_MODE) {
                Ok(link) => return Ok(Attachment { kind: "xdp generic link", how: How::Link(link) }),
                Err(e) if no_such_link(&e) => {}
                Err(e) => return Err(e),
            },
        }
    }
    match netlink::attach_xdp(ifindex, prog.fd(), XDP_NATIVE) {
        Ok(a) => Ok(Attachment { kind: "xdp native netlink", how: How::Xdp(a) }),
        Err(_) => {
            let a = netlink::attach_xdp(ifindex, prog.fd(), XDP_GENERIC)?;
            Ok(Attachment { kind: "xdp generic netlink", how: How::Xdp(a) })
        }
    }
}
