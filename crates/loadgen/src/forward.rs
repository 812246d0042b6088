//! `edgeflow-loadgen forward`: frames from one interface to another, unchanged, with no switch.
//! What it costs is the floor under a switch of the same kind on the same links:
//!
//! - `--engine xdp` (the default): a one-line XDP redirect, the floor under an XDP switch, as `tc
//!   mirred` is under a TC one.
//! - `--engine af_xdp`: a userspace forwarder on AF_XDP sockets, the floor under the userspace
//!   datapath on AF_XDP ports (`--io af_xdp`). It opens the ports through the same netio code, with
//!   the same ring sizes, receive budget, flush and wait (`--poll`) as the switch's forwarding
//!   thread, and does none of the switch's work: whatever it forwards per second is the most any
//!   userspace program going through these sockets could, on this machine.

use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use netio::afxdp::{self, XskConfig};
use netio::{PortRx, PortTx, RingConfig, TxError};

#[derive(Args)]
pub struct ForwardArgs {
    /// Frames arriving on this interface…
    #[arg(long)]
    from: String,
    /// …leave by this one, unchanged (with the xdp engine its peer must run NAPI: an XDP program
    /// or GRO on).
    #[arg(long)]
    to: String,
    /// Seconds to stay attached; killing the process detaches at once (SIGINT or SIGTERM: the
    /// af_xdp engine reports what it forwarded first).
    #[arg(long, default_value_t = 3600.0)]
    duration: f64,
    /// What forwards: the kernel's XDP redirect, or a userspace program on AF_XDP sockets.
    #[arg(long, value_enum, default_value_t = Engine::Xdp)]
    engine: Engine,
    /// With the af_xdp engine, how the thread waits for frames, as the switch's `--poll`: asleep in
    /// poll(2) until a socket has frames, or never asleep (poll(2) with no wait, one core busy).
    #[arg(long, value_enum, default_value_t = Poll::Wait)]
    poll: Poll,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Engine {
    Xdp,
    #[value(name = "af_xdp")]
    AfXdp,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Poll {
    Wait,
    Busy,
}

pub fn forward(a: ForwardArgs) -> Result<(), String> {
    match a.engine {
        Engine::Xdp => forward_xdp(a),
        Engine::AfXdp => forward_af_xdp(a),
    }
}

fn forward_xdp(a: ForwardArgs) -> Result<(), String> {
    let index = |name: &str| netio::sys::ifindex(name).map_err(|e| format!("{name}: {e}"));
    let (from, to) = (index(&a.from)?, index(&a.to)?);
    let obj = ebpf::Object::load(ebpf::objects::LOADGEN).map_err(|e| format!("loading the XDP forwarder: {e}"))?;
    let err = |e: std::io::Error| e.to_string();
    obj.map("loadgen_forward").map_err(err)?.update(&0u32.to_ne_bytes(), &to.to_ne_bytes()).map_err(err)?;
    let _link = obj
        .program("loadgen_forward_all")
        .map_err(err)?
        .attach_xdp(from)
        .map_err(|e| format!("attaching to {}: {e}", a.from))?;
    println!("{{\"from\": {from}, \"to\": {to}}}");
    std::thread::sleep(Duration::from_secs_f64(a.duration));
    Ok(())
}

/// Frames taken from one socket before turning to the other: the switch's RX_BUDGET
/// (crates/datapath/src/switch/event_loop.rs), so that batches are the size the switch's are.
const RX_BUDGET: usize = 64;
/// The longest a waiting thread sleeps before looking at the clock and for a signal.
const WAIT_SLICE: Duration = Duration::from_millis(200);

/// One direction's counts.
#[derive(Default)]
struct Counts {
    forwarded: u64,
    /// The transmit ring stayed full after a kick: dropped (the switch would queue it, and drop it
    /// once its egress queue is full).
    busy: u64,
    /// The other interface will never take it (over its MTU).
    refused: u64,
}

/// One batch from `rx` onto `tx`, each frame copied from the receive socket's UMEM into a
/// transmit chunk of the other's, as the switch copies it. The two sockets have a UMEM each, so
/// a frame cannot be handed over in place; the receive chunk goes back to the fill ring as soon as
/// the batch is read, the transmit chunk to the free list when the completion ring returns it
/// (both inside netio).
fn pass(rx: &mut dyn PortRx, tx: &mut dyn PortTx, counts: &mut Counts) -> usize {
    let offload = packet::Offload::default();
    rx.recv(RX_BUDGET, &mut |frame| match tx.send(frame.data, &offload) {
        Ok(()) => counts.forwarded += 1,
        Err(TxError::Busy) => counts.busy += 1,
        Err(TxError::Refused) => counts.refused += 1,
    })
}

/// A port as the switch opens one for `--io af_xdp`: ring sizes for its link speed, AF_XDP
/// zero-copy where the driver has it, else copy.
fn open(name: &str) -> Result<(afxdp::AfXdpRx, afxdp::AfXdpTx, afxdp::XskMode, XskConfig), String> {
    let cfg = XskConfig::from_ring(RingConfig::for_link(netio::sys::speed_mbps(name)));
    let (rx, tx, mode) = afxdp::open(name, cfg).map_err(|e| format!("{name}: AF_XDP: {e}"))?;
    Ok((rx, tx, mode, cfg))
}

/// Both ways, as the switch's thread serves both ports: `from`→`to` is what a benchmark sends,
/// and the other way costs an empty look at a ring per turn, as it does the switch.
fn forward_af_xdp(a: ForwardArgs) -> Result<(), String> {
    crate::end::stop_on_signals()?;
    let (mut from_rx, mut from_tx, mode, cfg) = open(&a.from)?;
    let (mut to_rx, mut to_tx, _, _) = open(&a.to)?;
    let poll = match a.poll {
        Poll::Wait => "wait",
        Poll::Busy => "busy",
    };
    println!(
        "{{\"from\": \"{}\", \"to\": \"{}\", \"engine\": \"af_xdp\", \"io\": \"{}\", \"poll\": \"{poll}\", \
         \"rx_frames\": {}, \"tx_frames\": {}}}",
        a.from,
        a.to,
        mode.describe(),
        cfg.rx_frames,
        cfg.tx_frames
    );
    let (mut out, mut back) = (Counts::default(), Counts::default());
    let fds = [from_rx.rx_fd(), to_rx.rx_fd()];
    let mut ready = Vec::new();
    let end = Instant::now() + Duration::from_secs_f64(a.duration);
    while !crate::end::stopped() {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        // Busy polling as the switch's: poll(2) still runs, with no wait.
        let timeout = match a.poll {
            Poll::Wait => left.min(WAIT_SLICE),
            Poll::Busy => Duration::ZERO,
        };
        if let Err(e) = netio::sys::poll_until(&fds, Some(timeout), &mut ready) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(format!("poll: {e}"));
            }
        }
        // Both sockets drained in turn, each turn's frames sent before the next is read.
        loop {
            let got = pass(&mut from_rx, &mut to_tx, &mut out) + pass(&mut to_rx, &mut from_tx, &mut back);
            to_tx.flush();
            from_tx.flush();
            if got == 0 {
                break;
            }
        }
    }
    let dropped_on_receive = from_rx.rx_drops() + to_rx.rx_drops();
    println!(
        "{{\"forwarded\": {}, \"busy\": {}, \"refused\": {}, \"forwarded_back\": {}, \"busy_back\": {}, \
         \"refused_back\": {}, \"rx_dropped\": {dropped_on_receive}}}",
        out.forwarded, out.busy, out.refused, back.forwarded, back.busy, back.refused
    );
    Ok(())
}
