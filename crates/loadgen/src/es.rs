//! `es-send` and `es-recv`: AFDX end systems on real interfaces. The sender transmits its VLs on
//! network A (and B: the same frame, same SN, on both), each frame released at its time from
//! `loadgen::afdx::Schedule`; the receiver runs integrity checking and redundancy management on
//! what arrives on A and B and reports per VL.

use std::fmt::Write as _;
use std::io::Write as _;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use clap::Args;
use loadgen::afdx::{self, Receiver, Schedule, VlSpec};
use loadgen::stats::Histogram;
use netio::afpacket::{self, AfPacketTx, RingConfig};
use netio::{PortRx, PortTx, RxFrame};
use packet::afdx::{NETWORK_A, NETWORK_B};

use netio::sys::realtime_ns;

fn parse_constant(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s.trim_start_matches("0x"), 16).map_err(|_| format!("'{s}': expected 8 hex digits"))
}

#[derive(Args)]
pub struct SendArgs {
    /// The interface to network A.
    #[arg(long)]
    iface_a: String,
    /// Send through the interfaces' queueing layer, where taps on them see the frames (es-recv
    /// --outgoing), instead of past it.
    #[arg(long)]
    visible: bool,
    /// The interface to network B: every frame is sent on both.
    #[arg(long)]
    iface_b: Option<String>,
    /// The end system's 16-bit id (in its source MAC and IP address).
    #[arg(long, default_value_t = 1)]
    es: u16,
    /// A virtual link to transmit, ID:BAG_MS:SIZE[:GAP_US] (SIZE with FCS; GAP_US below the BAG
    /// makes a babbling end system). Repeatable.
    #[arg(long = "vl", required = true)]
    vls: Vec<VlSpec>,
    /// Each frame leaves up to this late after its slot (uniformly drawn): the end system's jitter.
    #[arg(long, default_value_t = 0)]
    jitter_us: u64,
    /// Seconds to send for (SIGINT or SIGTERM stops it sooner, and it reports what it sent).
    #[arg(long, default_value_t = 1.0)]
    duration: f64,
    /// The destination MAC's constant field, hex.
    #[arg(long, value_parser = parse_constant, default_value = "03000000")]
    mac_constant: u32,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write one line per transmission, `VL SEQ TX_NS SIZE`, for offline checks.
    #[arg(long)]
    log: Option<std::path::PathBuf>,
}

#[derive(Args)]
pub struct RecvArgs {
    #[arg(long)]
    iface_a: String,
    /// Network A is the far end of a link of this speed (Mbit/s): each frame arrives when its
    /// last bit would, after the frames before it, and past `--ring` frames waiting it is lost,
    /// as on a real interface that slow. Times are the kernel's, from when each frame was sent
    /// to this end system's interface, so a late reader changes nothing.
    #[arg(long)]
    wire_mbps: Option<u32>,
    /// The frames the link holds waiting (a NIC's ring, a tap's txqueuelen).
    #[arg(long, default_value_t = 1000)]
    ring: usize,
    #[arg(long)]
    iface_b: Option<String>,
    /// How long after a delivered frame its copy on the other network may arrive.
    #[arg(long, default_value_t = 2000)]
    skew_max_us: u64,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Stop once nothing has arrived for this many seconds (after the first frame).
    #[arg(long, default_value_t = 1.0)]
    idle: f64,
    /// Write one line per frame received, `VL SEQ SN NETWORK RX_NS OUTCOME` (network 0 = A;
    /// outcome delivered, duplicate or integrity), in the order they were processed.
    #[arg(long)]
    log: Option<std::path::PathBuf>,
    /// Also see the frames this host sends (a tap on a sender's own interfaces: where a switch
    /// whose XDP program takes frames before any tap on its side could see them).
    #[arg(long)]
    outgoing: bool,
    #[command(flatten)]
    end: crate::end::EndArgs,
}

/// How long before a frame's slot the sender stops sleeping and spins.
const SPIN_US: u64 = 60;

fn open_tx(iface: &str) -> Result<AfPacketTx, String> {
    let ring = RingConfig { rx_frames: 64, tx_frames: 1024, frame_size: 2048 };
    afpacket::open(iface, ring).map(|(_, tx)| tx).map_err(|e| format!("{iface}: {e}"))
}

pub fn send(a: SendArgs) -> Result<(), String> {
    let mut ports = vec![(open_tx(&a.iface_a)?, NETWORK_A)];
    if let Some(b) = &a.iface_b {
        ports.push((open_tx(b)?, NETWORK_B));
    }
    if a.visible {
        for (tx, _) in &ports {
            tx.through_qdisc().map_err(|e| format!("sending through the qdisc: {e}"))?;
        }
    }
    // Per VL, per network: the template frame.
    let mut frames: Vec<Vec<Vec<u8>>> = a
        .vls
        .iter()
        .map(|vl| ports.iter().map(|&(_, net)| afdx::template(a.mac_constant, a.es, net, vl)).collect())
        .collect();
    let mut schedule = Schedule::new(a.vls.clone(), a.jitter_us * 1000, a.seed);
    let mut log = match &a.log {
        Some(p) => {
            Some(std::io::BufWriter::new(std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?))
        }
        None => None,
    };
    let offload = packet::Offload::default();
    // SAFETY: prctl with an integer argument (sleeps end when asked, not 50 µs later).
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1) };
    crate::end::stop_on_signals()?;
    let duration = Duration::from_secs_f64(a.duration);
    let start = Instant::now();
    let mut sent = vec![0u64; a.vls.len()];
    let (mut busy, mut late) = (0u64, Histogram::default());
    // When each VL's last frame left. Like an end system's regulator, the sender never lets two
    // frames of a VL leave closer than its gap: a frame sent late delays the next one, where
    // catching up would send a burst no conforming end system sends.
    let mut departed: Vec<Option<Duration>> = vec![None; a.vls.len()];
    loop {
        let r = schedule.next_release();
        let gap = Duration::from_nanos(a.vls[r.vl].gap_ns);
        let due = Duration::from_nanos(r.at_ns).max(departed[r.vl].map_or(Duration::ZERO, |d| d + gap));
        if due >= duration || crate::end::stopped() {
            break;
        }
        // Sleep until shortly before the slot (timer slack is 1 ns), then spin: a sleep alone
        // ends ~90 µs late, and with the regulator every late frame delays the VL for good.
        loop {
            let wait = due.saturating_sub(start.elapsed());
            if wait.is_zero() {
                break;
            }
            if wait > Duration::from_micros(SPIN_US + 20) {
                std::thread::sleep(wait - Duration::from_micros(SPIN_US));
            } else {
                std::hint::spin_loop();
            }
        }
        let now = start.elapsed();
        late.record(now.saturating_sub(Duration::from_nanos(r.at_ns)).as_nanos() as u64);
        departed[r.vl] = Some(now);
        let tx_ns = realtime_ns();
        let vl = &a.vls[r.vl];
        for (k, (port, _)) in ports.iter_mut().enumerate() {
            let f = &mut frames[r.vl][k];
            afdx::stamp(f, vl.id, r.seq, r.sn, tx_ns);
            match port.send(f, &offload) {
                Ok(()) => port.flush(),
                Err(_) => busy += 1,
            }
        }
        sent[r.vl] += 1;
        if let Some(l) = &mut log {
            writeln!(l, "{} {} {} {}", vl.id, r.seq, tx_ns, vl.size).map_err(|e| e.to_string())?;
        }
    }
    if let Some(mut l) = log {
        l.flush().map_err(|e| e.to_string())?;
    }
    let per_vl: Vec<String> = a.vls.iter().zip(&sent).map(|(v, n)| format!("\"{}\": {n}", v.id)).collect();
    println!(
        "{{\"sent\": {{{}}}, \"tx_busy\": {busy}, \"late_us\": {{\"p50\": {:.2}, \"p99\": {:.2}, \"max\": {:.2}}}}}",
        per_vl.join(", "),
        late.quantile(0.5) as f64 / 1e3,
        late.quantile(0.99) as f64 / 1e3,
        late.max() as f64 / 1e3
    );
    Ok(())
}

pub fn recv(a: RecvArgs) -> Result<(), String> {
    let ring = RingConfig { rx_frames: 8192, tx_frames: 64, frame_size: 2048 };
    let mut ports = Vec::new();
    let mut wire = a.wire_mbps.map(|mbps| afdx::Wire::new(mbps, a.ring));
    for (iface, net) in [(Some(&a.iface_a), NETWORK_A), (a.iface_b.as_ref(), NETWORK_B)] {
        if let Some(iface) = iface {
            let (rx, _tx) = afpacket::open(iface, ring).map_err(|e| format!("{iface}: {e}"))?;
            if a.outgoing {
                let off = 0i32;
                // SAFETY: a valid socket and a pointer to an int of the size given.
                let r = unsafe {
                    libc::setsockopt(
                        rx.rx_fd(),
                        libc::SOL_PACKET,
                        libc::PACKET_IGNORE_OUTGOING,
                        &off as *const i32 as *const libc::c_void,
                        std::mem::size_of::<i32>() as libc::socklen_t,
                    )
                };
                if r != 0 {
                    return Err(format!("{iface}: seeing outgoing frames: {}", std::io::Error::last_os_error()));
                }
            }
            ports.push((rx, net));
        }
    }
    let fds: Vec<RawFd> = ports.iter().map(|(rx, _)| rx.rx_fd()).collect();
    let mut receiver = Receiver::new(a.skew_max_us * 1000);
    let mut log = match &a.log {
        Some(p) => {
            Some(std::io::BufWriter::new(std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?))
        }
        None => None,
    };
    let networks: Vec<usize> = ports.iter().filter_map(|(_, net)| afdx::network_index(*net)).collect();
    let fds_and_stdin: Vec<RawFd> = fds.iter().copied().chain([crate::end::STDIN]).collect();
    let mut notice = a.end.notice()?;
    crate::end::say_ready();
    let start = Instant::now();
    let mut last_seen: Option<Instant> = None;
    let idle = Duration::from_secs_f64(a.idle);
    let mut ready = Vec::new();
    let mut wrong_network = 0u64;
    while start.elapsed().as_secs_f64() < a.duration {
        let done = match &notice {
            None => last_seen.is_some_and(|t| t.elapsed() >= idle),
            // Every copy of every frame the senders reported, on each network listened to, or
            // nothing more for a while.
            Some(n) => {
                let all_in = n.finished().is_some_and(|sent| {
                    sent.iter().all(|(vl, sent)| {
                        let r = vl.parse().ok().and_then(|id: u16| receiver.vls.get(&id));
                        r.is_some_and(|r| networks.iter().all(|&k| r.received[k] >= *sent))
                    })
                });
                all_in || n.settled(last_seen, a.end.settle())
            }
        };
        if done {
            break;
        }
        let listening = notice.as_ref().is_some_and(|n| n.closed_at.is_none());
        let polled = if listening { &fds_and_stdin[..] } else { &fds[..] };
        let _ = netio::sys::poll_readable(polled, 10, &mut ready);
        if ready.contains(&fds.len()) {
            if let Some(n) = &mut notice {
                n.read();
            }
        }
        for (rx, net) in ports.iter_mut() {
            let got = rx.recv(4096, &mut |f: RxFrame<'_>| {
                let Some(frame) = afdx::read(f.data) else {
                    receiver.other += 1;
                    return;
                };
                // A frame whose interface id names the other network came the wrong way: the
                // report counts it, and the redundancy check sees it as its network's.
                if Some(frame.network) != afdx::network_index(*net) {
                    wrong_network += 1;
                }
                let mut rx_ns = if f.tstamp_ns != 0 { f.tstamp_ns } else { realtime_ns() };
                // Network A's frames crossed the slow link.
                if let (Some(w), NETWORK_A) = (wire.as_mut(), *net) {
                    match w.carry(f.data.len(), rx_ns) {
                        Some(arrived) => rx_ns = arrived,
                        None => return,
                    }
                }
                let outcome = receiver.receive(&frame, rx_ns);
                if let Some(l) = &mut log {
                    let what = match outcome {
                        afdx::Outcome::Delivered => "delivered",
                        afdx::Outcome::Duplicate => "duplicate",
                        afdx::Outcome::IntegrityError => "integrity",
                    };
                    let _ =
                        writeln!(l, "{} {} {} {} {rx_ns} {what}", frame.vl, frame.probe.seq, frame.sn, frame.network);
                }
            });
            if got > 0 {
                last_seen = Some(Instant::now());
            }
        }
    }
    if let Some(mut l) = log {
        l.flush().map_err(|e| e.to_string())?;
    }
    let mut out = String::from("{\"vls\": {");
    for (i, (id, r)) in receiver.vls.iter().enumerate() {
        let us = |ns: u64| ns as f64 / 1e3;
        let l = &r.latency;
        let _ = write!(
            out,
            "{}\"{id}\": {{\"delivered\": {}, \"lost\": {}, \"duplicates_removed\": {}, \"delivered_twice\": {}, \
             \"received\": [{}, {}], \"integrity_errors\": [{}, {}], \
             \"latency_us\": {{\"min\": {:.2}, \"p50\": {:.2}, \"p99\": {:.2}, \"max\": {:.2}}}, \"jitter_us\": {:.2}}}",
            if i > 0 { ", " } else { "" },
            r.delivered,
            r.lost(),
            r.duplicates_removed,
            r.delivered_twice,
            r.received[0],
            r.received[1],
            r.integrity_errors[0],
            r.integrity_errors[1],
            us(l.min()),
            us(l.quantile(0.5)),
            us(l.quantile(0.99)),
            us(l.max()),
            us(l.max().saturating_sub(l.min())),
        );
    }
    // Frames the receive rings had no room for: lost here, not in the network.
    let ring_drops: u64 = ports.iter_mut().map(|(rx, _)| rx.rx_drops()).sum();
    let _ = write!(
        out,
        "}}, \"other_frames\": {}, \"wrong_network\": {wrong_network}, \"ring_drops\": {ring_drops}, \
         \"wire_drops\": {}}}",
        receiver.other,
        wire.map_or(0, |w| w.dropped)
    );
    println!("{out}");
    Ok(())
}
