//! XDP's redirect fallback: frames for a port the kernel cannot redirect to natively still arrive.
//!
//! A native XDP redirect hands the frame to the output device's `ndo_xdp_xmit`. A veth takes it
//! only while its peer runs NAPI (an XDP program, or GRO on); otherwise, since Linux 6.3, the
//! kernel refuses the redirect and drops the frame, counted nowhere but in the receiving port's rx
//! drops (before 6.3 the veth dropped it itself, as a tx drop). A host in a container behind a veth
//! with default offloads is exactly that case. The kernel says which devices take redirects in
//! their XDP features (`NETDEV_XDP_ACT_NDO_XMIT`, read over netlink in the switch's own
//! namespace: for a veth it follows the peer, wherever the peer is), so each port is checked when
//! attached and again every second. A port that cannot take them gets its outputs marked
//! `OUT_VIA_TC`: the XDP program redirects those frames into the fallback link (a veth pair of
//! the switch's whose far end runs NAPI, GRO on), with the port in the frame's metadata, and
//! `ef_tc_xdp_fallback` at the far end's TC ingress sends them on as skbs, which every device
//! takes. Other ports keep the native redirect. The switch warns once per port and change, and
//! counts the frames per port (from the harvested hits of the entries marked, at no kernel cost).

use std::io;

use crate::attach::{self, Attachment};
use crate::ebpf::Object;
use crate::{netlink, sys};

/// Why XDP cannot redirect into a port natively.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoNativeRedirect {
    /// A veth whose peer runs no XDP program and has GRO off: the veth runs no NAPI to take the
    /// frame in.
    VethPeerWithoutNapi,
    /// Another driver that says it takes no redirected frames (no `ndo_xdp_xmit`, or not now).
    DriverTakesNoRedirects,
    /// Before Linux 6.3, which cannot say: the port's transmit drops grew, as a veth's do when it
    /// refuses redirected frames.
    TransmitDropsGrew,
}

impl NoNativeRedirect {
    /// As a metrics label and in `stats --json`.
    pub fn label(self) -> &'static str {
        match self {
            NoNativeRedirect::VethPeerWithoutNapi => "veth_peer_without_napi",
            NoNativeRedirect::DriverTakesNoRedirects => "driver_takes_no_redirects",
            NoNativeRedirect::TransmitDropsGrew => "transmit_drops_grew",
        }
    }

    /// For the log.
    pub fn why(self) -> &'static str {
        match self {
            NoNativeRedirect::VethPeerWithoutNapi => {
                "its veth peer runs no XDP program and has GRO off, so the kernel drops native XDP redirects into it"
            }
            NoNativeRedirect::DriverTakesNoRedirects => "its driver takes no native XDP redirects (no ndo_xdp_xmit)",
            NoNativeRedirect::TransmitDropsGrew => {
                "its transmit drops grew, as a veth's do when its peer takes no XDP redirects (this kernel, before Linux 6.3, cannot say more)"
            }
        }
    }
}

/// What the kernel says of XDP redirects into interface `name` (`ifindex`): Ok(()) it takes
/// them, Err(why) it does not; None when this kernel cannot say (before Linux 6.3).
pub fn native_redirect(name: &str, ifindex: u32) -> io::Result<Option<Result<(), NoNativeRedirect>>> {
    let Some(features) = netlink::xdp_features(ifindex)? else { return Ok(None) };
    Ok(Some(verdict(features, sys::driver(name).as_deref())))
}

/// Where the kernel cannot say (before Linux 6.3), the failures tell: a veth that refuses a
/// redirected frame counts it as a transmit drop. `seen` is the count at the last look (None at
/// the first); growth since is taken for refused redirects, and the port goes through TC from
/// then on. Other transmit drops (a peer that was down) would send it there too: slower, never
/// lost.
pub fn transmit_drops_grew(seen: Option<u64>, now: u64) -> bool {
    seen.is_some_and(|before| now > before)
}

fn verdict(features: u64, driver: Option<&str>) -> Result<(), NoNativeRedirect> {
    if features & netlink::XDP_ACT_NDO_XMIT != 0 {
        Ok(())
    } else if driver == Some("veth") {
        Err(NoNativeRedirect::VethPeerWithoutNapi)
    } else {
        Err(NoNativeRedirect::DriverTakesNoRedirects)
    }
}

/// The veth pair XDP sends a port's frames into when it cannot redirect to the port natively
/// (`ours`, the XDP program's target) and whose far end (`peer`, GRO on, so that it runs NAPI and
/// takes redirected frames) passes them to the port from its TC ingress. Deleted when dropped.
pub struct FallbackLink {
    pub ours: String,
    pub ifindex: u32,
    _tc: Attachment,
}

impl FallbackLink {
    /// Creates the pair `ours`/`peer` and attaches `ef_tc_xdp_fallback` of `obj` at the peer.
    pub fn create(obj: &Object, ours: &str, peer: &str) -> io::Result<FallbackLink> {
        let _ = sys::delete_link(ours); // a crashed run's, with the same pid
        sys::create_veth(ours, peer)?;
        let made = (|| {
            for name in [ours, peer] {
                // A frame as long as any port's takes the link (a veth checks the length of a
                // redirected frame against the receiving end's MTU).
                sys::set_if_mtu(name, super::UPCALL_MTU)?;
                sys::set_if_up(name, true)?;
            }
            sys::set_gro(peer, true)?;
            let program = obj.program("ef_tc_xdp_fallback")?;
            let tc = attach::tc(program, sys::ifindex(peer)?, attach::TcSlot::FastPath)?;
            Ok(FallbackLink { ours: ours.to_string(), ifindex: sys::ifindex(ours)?, _tc: tc })
        })();
        if made.is_err() {
            let _ = sys::delete_link(ours);
        }
        made
    }
}

impl Drop for FallbackLink {
    fn drop(&mut self) {
        let _ = sys::delete_link(&self.ours);
    }
}

/// A port XDP sends to through the fallback link.
#[derive(Clone, Debug)]
pub struct FallbackPort {
    pub name: String,
    pub ifindex: u32,
    pub why: NoNativeRedirect,
    /// Whether it takes no native redirects now (it may have again since).
    pub now: bool,
    /// Frames sent that way, as harvested.
    pub frames: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_that_takes_redirects_keeps_them_and_one_that_does_not_says_why() {
        let basic_redirect_sg = 1 | 2 | 32;
        assert_eq!(verdict(basic_redirect_sg | netlink::XDP_ACT_NDO_XMIT, Some("veth")), Ok(()));
        assert_eq!(verdict(basic_redirect_sg, Some("veth")), Err(NoNativeRedirect::VethPeerWithoutNapi));
        assert_eq!(verdict(0, Some("e1000")), Err(NoNativeRedirect::DriverTakesNoRedirects));
        assert_eq!(verdict(0, None), Err(NoNativeRedirect::DriverTakesNoRedirects));
    }

    #[test]
    fn before_linux_6_3_transmit_drops_that_grow_tell_and_the_first_look_only_counts() {
        assert!(!transmit_drops_grew(None, 40), "drops from before the switch came say nothing");
        assert!(!transmit_drops_grew(Some(40), 40));
        assert!(transmit_drops_grew(Some(40), 41));
    }
}
