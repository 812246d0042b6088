//! `edgeflow-loadgen`: sends test frames at a chosen size and rate (or frame gap) and receives them,
//! reporting throughput, loss, reordering, one-way latency and jitter; and AFDX end systems
//! (`es-send`, `es-recv`).
//!
//! Both ends run on the same machine (in different network namespaces), so transmit and receive
//! times come from the same clock: the sender stamps CLOCK_REALTIME into each frame, the receiver
//! takes the kernel's receive timestamp from its packet ring.
//!
//! Over 600 lines, one concern: the plain sender and receiver (socket and XDP engines) and their
//! command line; the AFDX end systems are `es` and `afdx`, frames `frame`, when a receiver stops
//! `end`.

use netio::sys::{monotonic_ns, realtime_ns};
use std::io::Write;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use loadgen::frame::{self, Endpoints, Probe, FCS};
use loadgen::stats::FlowStats;
use netio::afpacket::{self, RingConfig};
use netio::{PortRx, PortTx, RxFrame};

mod end;
mod es;
mod forward;

#[derive(Parser)]
#[command(name = "edgeflow-loadgen", version, about = "Test-frame generator and receiver")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Send probe frames.
    Send(SendArgs),
    /// Receive probe frames and report.
    Recv(RecvArgs),
    /// An AFDX end system transmitting virtual links on networks A and B.
    EsSend(es::SendArgs),
    /// An AFDX end system receiving on A and B: integrity checking, redundancy management, and a
    /// report per virtual link.
    EsRecv(es::RecvArgs),
    /// A LESS-aware host's addresses, from its edge switch's HELLO (JSON).
    LessAddress(LessAddressArgs),
    /// Frames between two interfaces unchanged, no switch: a bare XDP redirect (the floor under an
    /// XDP switch) or a bare AF_XDP forwarder (the floor under the userspace datapath on AF_XDP).
    Forward(forward::ForwardArgs),
}

#[derive(Args)]
struct LessAddressArgs {
    #[arg(long)]
    iface: String,
    /// Seconds to wait for a HELLO that carries addresses.
    #[arg(long, default_value_t = 3.0)]
    timeout: f64,
}

/// LESS addresses, comma-separated (`--less-to`).
#[derive(Clone, Debug)]
struct Addresses(Vec<packet::less::Address>);

fn parse_addresses(s: &str) -> Result<Addresses, String> {
    s.split(',').map(|a| a.trim().parse()).collect::<Result<_, _>>().map(Addresses)
}

/// Waits for a HELLO with addresses on `iface`: what the edge switch tells a host.
fn learn_less(iface: &str, timeout: f64) -> Result<loadgen::less::Learned, String> {
    let ring = RingConfig { rx_frames: 256, tx_frames: 64, frame_size: 2048 };
    let (mut rx, _tx) = afpacket::open(iface, ring).map_err(|e| format!("{iface}: {e}"))?;
    let fd = rx.rx_fd();
    let start = Instant::now();
    let mut ready = Vec::new();
    while start.elapsed().as_secs_f64() < timeout {
        let _ = netio::sys::poll_readable(&[fd], 10, &mut ready);
        let mut found = None;
        rx.recv(256, &mut |f: RxFrame<'_>| {
            if let Some(l) = loadgen::less::Learned::from_frame(f.data).filter(|l| !l.switch_addresses.is_empty()) {
                found = Some(l);
            }
        });
        if let Some(l) = found {
            return Ok(l);
        }
    }
    Err(format!("{iface}: no HELLO with addresses from a LESS switch within {timeout} s"))
}

fn less_address(a: LessAddressArgs) -> Result<(), String> {
    let l = learn_less(&a.iface, a.timeout)?;
    let quoted: Vec<String> = l.host_addresses().iter().map(|x| format!("\"{x}\"")).collect();
    println!("{{\"switch\": \"{:016x}\", \"port\": {}, \"addresses\": [{}]}}", l.switch, l.port, quoted.join(", "));
    Ok(())
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("'{s}' is not a MAC address"));
    }
    let mut mac = [0u8; 6];
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).map_err(|_| format!("'{s}' is not a MAC address"))?;
    }
    Ok(mac)
}

/// Output ports, one per hop (`--less`).
#[derive(Clone, Debug)]
struct Route(Vec<u8>);

fn parse_route(s: &str) -> Result<Route, String> {
    let ports: Result<Vec<u8>, _> = s.split('.').map(|p| p.parse::<u8>()).collect();
    match ports {
        Ok(p) if !p.is_empty() && !p.contains(&0) => Ok(Route(p)),
        _ => Err(format!("'{s}' is not a route: output ports 1-255 separated by dots")),
    }
}

/// Raw label stack entries (`--less-raw`).
#[derive(Clone, Debug)]
struct Words(Vec<u32>);

fn parse_words(s: &str) -> Result<Words, String> {
    let words: Result<Vec<u32>, _> =
        s.split(',').map(|w| u32::from_str_radix(w.trim().trim_start_matches("0x"), 16)).collect();
    words.map(Words).map_err(|_| format!("'{s}' is not a list of 32-bit hex words"))
}

fn parse_ip(s: &str) -> Result<[u8; 4], String> {
    s.parse::<std::net::Ipv4Addr>().map(|a| a.octets()).map_err(|_| format!("'{s}' is not an IPv4 address"))
}

#[derive(Args)]
struct SendArgs {
    #[arg(long)]
    iface: String,
    /// Destination MAC address.
    #[arg(long, value_parser = parse_mac)]
    dst_mac: [u8; 6],
    /// Source MAC (default: the interface's).
    #[arg(long, value_parser = parse_mac)]
    src_mac: Option<[u8; 6]>,
    #[arg(long, value_parser = parse_ip, default_value = "10.0.0.1")]
    src_ip: [u8; 4],
    #[arg(long, value_parser = parse_ip, default_value = "10.0.0.2")]
    dst_ip: [u8; 4],
    #[arg(long, default_value_t = 9000)]
    sport: u16,
    #[arg(long, default_value_t = 9001)]
    dport: u16,
    /// Frame size on the wire, FCS included (64-1518).
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Frames per second (0: as fast as possible).
    #[arg(long, default_value_t = 0, conflicts_with = "gap_ns")]
    rate: u64,
    /// Time between the starts of two frames, in ns (instead of --rate).
    #[arg(long)]
    gap_ns: Option<u64>,
    /// Seconds to send for (SIGINT or SIGTERM stops it sooner, and it reports what it sent).
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// Stop after this many frames.
    #[arg(long)]
    count: Option<u64>,
    #[arg(long, default_value_t = 1)]
    flow: u16,
    /// Count the destination MAC's last two bytes through this many values from --dst-mac's, one
    /// per frame: as many AFDX virtual links, say, or as many learned addresses.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    dst_spread: u16,
    /// Count the source MAC's last two bytes through this many values from the sender's, one per
    /// frame: as many hosts behind the port, each a new address to a learning switch (the socket
    /// engine only).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    src_spread: u16,
    /// Send this many UDP flows, one frame each in turn, for a switch to tell apart (a flow table
    /// of one entry per flow, say): flow i has destination port --dport + i mod 65 536 and source
    /// port --sport + i / 65 536 (both wrapping).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..), conflicts_with_all = ["less", "less_raw", "less_to"])]
    udp_flows: u32,
    /// IPv4 DSCP of the frames (0-63), e.g. 18 for AF21.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..64))]
    dscp: u8,
    /// Send LESS frames along this route: the output port at each hop, first hop first, dot-separated
    /// (`2.8.2`, as the LESS paper writes labels). The labels come out of the frame's --size bytes
    /// (a 64-byte frame keeps room for one label).
    #[arg(long, value_parser = parse_route, conflicts_with_all = ["less_raw", "less_to"])]
    less: Option<Route>,
    /// Send LESS frames to the host at this address (or the nearest of several, comma-separated,
    /// as `less-address` prints them): the route comes from this host's own addresses, learned
    /// first from its edge switch's HELLO.
    #[arg(long, value_parser = parse_addresses, conflicts_with = "less_raw")]
    less_to: Option<Addresses>,
    /// Send this label stack as given: 32-bit words in hex, comma-separated (for malformed stacks).
    #[arg(long, value_parser = parse_words)]
    less_raw: Option<Words>,
    /// Test pattern: never send sequence numbers N-1, 2N-1, 3N-1, … (the receiver must report
    /// exactly those as lost).
    #[arg(long)]
    skip_every: Option<u32>,
    /// Test pattern: send each N-th frame after its successor (one reordering per N frames).
    #[arg(long)]
    swap_every: Option<u32>,
    /// How frames are sent: `xdp` (an XDP program run by the kernel: a million frames per second
    /// and more, paced frame by frame up to 4 000 per second, in 40 ms bursts above), `socket`
    /// (AF_PACKET ring: paced frame by frame, up to a few hundred thousand per second), or `auto`
    /// (xdp at full speed, else socket).
    #[arg(long, default_value = "auto")]
    engine: String,
}

#[derive(Args)]
struct RecvArgs {
    #[arg(long)]
    iface: String,
    /// Only count this flow.
    #[arg(long, default_value_t = 1)]
    flow: u16,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Stop once no probe has arrived for this many seconds (after the first one).
    #[arg(long, default_value_t = 1.0)]
    idle: f64,
    /// Stop after this many frames.
    #[arg(long)]
    count: Option<u64>,
    /// `socket` (AF_PACKET ring: exact loss, reordering and duplicate accounting) or `xdp` (an XDP
    /// program counts and drops the frames: millions per second; duplicates count as reordered).
    #[arg(long, default_value = "socket")]
    engine: String,
    /// Write one line per probe received, `SEQ TX_NS RX_NS` (socket engine; CLOCK_REALTIME).
    #[arg(long)]
    log: Option<std::path::PathBuf>,
    #[command(flatten)]
    end: end::EndArgs,
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Send(a) => send(a),
        Cmd::Recv(a) => recv(a),
        Cmd::EsSend(a) => es::send(a),
        Cmd::EsRecv(a) => es::recv(a),
        Cmd::LessAddress(a) => less_address(a),
        Cmd::Forward(a) => forward::forward(a),
    };
    if let Err(e) = result {
        eprintln!("edgeflow-loadgen: {e}");
        std::process::exit(1);
    }
}

fn send(a: SendArgs) -> Result<(), String> {
    if !(frame::MIN_SIZE..=frame::MAX_SIZE).contains(&a.size) {
        return Err(format!("--size {}: frames are {}..{} bytes", a.size, frame::MIN_SIZE, frame::MAX_SIZE));
    }
    let src_mac = match a.src_mac {
        Some(m) => m,
        None => netio::sys::hw_addr(&a.iface).map_err(|e| format!("{}: {e}", a.iface))?,
    };
    let ep = Endpoints {
        src_mac,
        dst_mac: a.dst_mac,
        src_ip: a.src_ip,
        dst_ip: a.dst_ip,
        src_port: a.sport,
        dst_port: a.dport,
    };
    let learned_route = match &a.less_to {
        Some(to) => {
            let learned = learn_less(&a.iface, 3.0)?;
            Some(Route(learned.route_to(&to.0).filter(|r| !r.is_empty()).ok_or("--less-to: no route to that address")?))
        }
        None => None,
    };
    let stack = match (a.less.as_ref().or(learned_route.as_ref()), &a.less_raw) {
        (Some(route), _) => packet::less::encode_route(&route.0, false),
        (None, Some(words)) => words.0.iter().flat_map(|w| w.to_be_bytes()).collect(),
        (None, None) => vec![],
    };
    let mut template = frame::template(&ep, a.size.saturating_sub(stack.len()), a.flow);
    frame::set_dscp(&mut template, a.dscp);
    if !stack.is_empty() {
        frame::push_labels(&mut template, &stack);
    }
    let rate_hint = match a.gap_ns {
        Some(g) if g > 0 => 1_000_000_000 / g,
        _ => a.rate,
    };
    let use_xdp = match a.engine.as_str() {
        "xdp" => true,
        "socket" => false,
        "auto" => rate_hint == 0 && a.skip_every.is_none() && a.swap_every.is_none(),
        other => return Err(format!("--engine {other}: expected xdp, socket or auto")),
    };
    // Both engines pace with sleeps, which end when asked, not up to 50 µs later (the default
    // timer slack).
    // SAFETY: prctl with an integer argument.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1) };
    end::stop_on_signals()?;
    if use_xdp {
        if a.src_spread > 1 {
            return Err("--src-spread: the socket engine only (--engine socket, or a --rate)".into());
        }
        return send_xdp(&a, &template, stack.len(), rate_hint);
    }
    let ring = RingConfig { rx_frames: 64, tx_frames: 4096, frame_size: 2048 };
    let (_rx, mut tx) = afpacket::open(&a.iface, ring).map_err(|e| format!("{}: {e}", a.iface))?;
    let base_dst = u16::from_be_bytes([template[4], template[5]]);
    let base_src = u16::from_be_bytes([template[10], template[11]]);
    // The UDP ports (no label stack: --udp-flows refuses one). The probe carries no UDP
    // checksum, so the ports change alone.
    const SPORT_AT: usize = frame::PROBE_AT - 8;
    let base_ports = [SPORT_AT, SPORT_AT + 2].map(|at| u16::from_be_bytes([template[at], template[at + 1]]));
    let rate = match a.gap_ns {
        Some(0) => return Err("--gap-ns must be positive".into()),
        Some(g) => 1_000_000_000 / g,
        None => a.rate,
    };
    let limit = a.count.unwrap_or(u64::MAX);
    let duration = Duration::from_secs_f64(a.duration);
    let offload = packet::Offload::default();
    let start = Instant::now();
    let (mut slots, mut sent, mut skipped, mut busy) = (0u64, 0u64, 0u64, 0u64);
    let mut held: Option<u32> = None;
    const BATCH: u64 = 128;
    'outer: loop {
        let elapsed = start.elapsed();
        if elapsed >= duration || slots >= limit || end::stopped() {
            break;
        }
        let due = if rate == 0 {
            BATCH
        } else {
            let target = (elapsed.as_nanos() * rate as u128 / 1_000_000_000) as u64 + 1;
            target.saturating_sub(slots).min(BATCH)
        };
        if due == 0 {
            // Wait for the next frame's time: sleep when it is far (timer slack is 1 ns, see below),
            // spin only for the last few microseconds, so that the generator leaves the CPU to the
            // switch under test between frames.
            let next = Duration::from_nanos((slots as u128 * 1_000_000_000 / rate as u128) as u64);
            let wait = next.saturating_sub(start.elapsed());
            if wait > Duration::from_micros(8) {
                std::thread::sleep(wait - Duration::from_micros(5));
            } else {
                std::hint::spin_loop();
            }
            continue;
        }
        for _ in 0..due {
            if slots >= limit {
                break 'outer;
            }
            let seq = slots as u32;
            slots += 1;
            if a.skip_every.is_some_and(|n| seq % n == n - 1) {
                skipped += 1;
                continue;
            }
            // Reordering pattern: hold back a frame and send it after the next one.
            let order: Vec<u32> = match (a.swap_every, held.take()) {
                (_, Some(h)) => vec![seq, h],
                (Some(n), None) if seq % n == n - 1 => {
                    held = Some(seq);
                    vec![]
                }
                _ => vec![seq],
            };
            for s in order {
                if a.dst_spread > 1 {
                    let v = base_dst.wrapping_add((s % a.dst_spread as u32) as u16);
                    template[4..6].copy_from_slice(&v.to_be_bytes());
                }
                if a.src_spread > 1 {
                    let v = base_src.wrapping_add((s % a.src_spread as u32) as u16);
                    template[10..12].copy_from_slice(&v.to_be_bytes());
                }
                if a.udp_flows > 1 {
                    let i = s % a.udp_flows;
                    let sport = base_ports[0].wrapping_add((i >> 16) as u16);
                    let dport = base_ports[1].wrapping_add(i as u16);
                    template[SPORT_AT..SPORT_AT + 2].copy_from_slice(&sport.to_be_bytes());
                    template[SPORT_AT + 2..SPORT_AT + 4].copy_from_slice(&dport.to_be_bytes());
                }
                frame::write_probe(&mut template, Probe { flow: a.flow, seq: s, tx_ns: realtime_ns() });
                match tx.send(&template, &offload) {
                    Ok(()) => sent += 1,
                    Err(_) => busy += 1,
                }
            }
        }
        tx.flush();
    }
    if let Some(h) = held {
        frame::write_probe(&mut template, Probe { flow: a.flow, seq: h, tx_ns: realtime_ns() });
        if tx.send(&template, &offload).is_ok() {
            sent += 1;
        }
    }
    tx.flush();
    let secs = start.elapsed().as_secs_f64();
    let achieved = sent as f64 / secs;
    // At full speed the generator is the limit by definition; at a set rate, when it fell short.
    let generator_limited = rate == 0 || achieved < 0.97 * rate as f64 * (1.0 - skipped as f64 / slots.max(1) as f64);
    // The route a --less-to send worked out, as --less would take it.
    let route = match &learned_route {
        Some(r) => {
            format!(", \"less_route\": \"{}\"", r.0.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("."))
        }
        None => String::new(),
    };
    println!(
        "{{\"sent\": {sent}, \"skipped\": {skipped}, \"tx_busy\": {busy}, \"last_seq\": {}, \"duration_s\": {secs:.6}, \
         \"size\": {}, \"requested_pps\": {rate}, \"achieved_pps\": {achieved:.1}, \"generator_limited\": {generator_limited}{route}}}",
        slots.saturating_sub(1),
        a.size
    );
    Ok(())
}

/// Sends with the XDP program in `bpf/loadgen.c`: the kernel runs it on fresh copies of the
/// template in a loop and transmits each (BPF_F_TEST_XDP_LIVE_FRAMES).
/// `stack`: bytes of LESS labels in the template, which move the probe.
fn send_xdp(a: &SendArgs, template: &[u8], stack: usize, rate: u64) -> Result<(), String> {
    let ifindex = netio::sys::ifindex(&a.iface).map_err(|e| format!("{}: {e}", a.iface))?;
    let obj = ebpf::Object::load(ebpf::objects::LOADGEN).map_err(|e| format!("loading the XDP sender: {e}"))?;
    let state = obj.map("loadgen_state").map_err(|e| e.to_string())?;
    let prog = obj.program("loadgen_stamp").map_err(|e| e.to_string())?;
    let offset = realtime_ns().wrapping_sub(monotonic_ns());
    state.update(&1u32.to_ne_bytes(), &offset.to_ne_bytes()).map_err(|e| e.to_string())?;
    state.update(&0u32.to_ne_bytes(), &0u64.to_ne_bytes()).map_err(|e| e.to_string())?;
    state.update(&2u32.to_ne_bytes(), &(a.dst_spread as u64).to_ne_bytes()).map_err(|e| e.to_string())?;
    state.update(&3u32.to_ne_bytes(), &(a.udp_flows as u64).to_ne_bytes()).map_err(|e| e.to_string())?;
    // `struct header` in bpf/loadgen.c: the template up to the probe's sequence number, which the
    // program writes back into every frame (a switch may have changed the page it reuses).
    const MAX_STACK: usize = 256;
    const HEADER_WORDS: usize = (frame::PROBE_AT + MAX_STACK + 8) / 8;
    if stack > MAX_STACK {
        return Err(format!("--engine xdp: at most {MAX_STACK} bytes of labels"));
    }
    let probe_at = frame::PROBE_AT + stack;
    let words = (probe_at + 4).div_ceil(8).min(template.len() / 8);
    let mut header = vec![0u8; 8 + 8 * HEADER_WORDS];
    header[0..4].copy_from_slice(&(words as u32).to_ne_bytes());
    header[4..8].copy_from_slice(&(probe_at as u32).to_ne_bytes());
    header[8..8 + 8 * words].copy_from_slice(&template[..8 * words]);
    obj.map("loadgen_header").and_then(|m| m.update(&0u32.to_ne_bytes(), &header)).map_err(|e| e.to_string())?;
    let limit = a.count.unwrap_or(u64::MAX);
    let duration = Duration::from_secs_f64(a.duration);
    // A live-frames run of more than one frame costs the kernel some 25 ms of setup, whatever its
    // length (it swaps the XDP dispatcher's program, and waits out an RCU grace period); a run of
    // one frame costs ~0.1 ms. Up to PACED_MAX frames/s each frame is its own run, sent at its
    // time: the kernel then carries it through the receiving peer's NAPI, a switch and the
    // receiver before the call returns, with no queue behind it, and it enters the peer as a NIC
    // driver hands a frame to XDP (in a page with headroom), not as a socket's skb that a veth
    // must copy first. Above that, runs are 40 ms bursts. At full speed each run is sized from
    // the last one to take about RUN_TARGET, so that setup is a small part of the time: 32
    // 768-frame runs, at first, left the generator at 1 Mpps when it can send 3.
    const PACED_MAX: u64 = 4_000;
    const RUN_TARGET: Duration = Duration::from_millis(200);
    let mut chunk: u64 = match rate {
        0 => 65_536,
        r if r <= PACED_MAX => 1,
        r => r / 25,
    };
    let start = Instant::now();
    let mut issued = 0u64;
    while start.elapsed() < duration && issued < limit && !end::stopped() {
        let n = chunk.min(limit - issued).min(u32::MAX as u64) as u32;
        let run_start = Instant::now();
        prog.test_run(template, n, ifindex, true).map_err(|e| format!("XDP test run on {}: {e}", a.iface))?;
        let run_time = run_start.elapsed();
        issued += n as u64;
        if rate > 0 {
            let due = Duration::from_nanos((issued as u128 * 1_000_000_000 / rate as u128) as u64);
            if let Some(wait) = due.checked_sub(start.elapsed()) {
                std::thread::sleep(wait);
            }
        } else {
            chunk = next_run_length(n as u64, run_time, RUN_TARGET, duration.saturating_sub(start.elapsed()));
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let sent = state
        .lookup(&0u32.to_ne_bytes())
        .ok()
        .flatten()
        .map(|v| u64::from_ne_bytes(v.try_into().unwrap()))
        .unwrap_or(issued);
    let achieved = sent as f64 / secs;
    let generator_limited = rate == 0 || achieved < 0.97 * rate as f64;
    println!(
        "{{\"sent\": {sent}, \"skipped\": 0, \"tx_busy\": 0, \"last_seq\": {}, \"duration_s\": {secs:.6}, \"size\": {}, \
         \"requested_pps\": {rate}, \"achieved_pps\": {achieved:.1}, \"generator_limited\": {generator_limited}, \"engine\": \"xdp\"}}",
        sent.saturating_sub(1),
        a.size
    );
    Ok(())
}

/// Frames for the next full-speed run: what the last run's pace (setup included) sends in `target`,
/// or in what is left of the test if that is shorter, never under 4096 frames.
fn next_run_length(last: u64, took: Duration, target: Duration, left: Duration) -> u64 {
    let per_sec = last as f64 / took.as_secs_f64().max(1e-6);
    ((per_sec * target.min(left).as_secs_f64()) as u64).clamp(4096, 1 << 31)
}

fn recv(a: RecvArgs) -> Result<(), String> {
    match a.engine.as_str() {
        "socket" => {}
        "xdp" => return recv_xdp(&a),
        other => return Err(format!("--engine {other}: expected socket or xdp")),
    }
    let ring = RingConfig { rx_frames: 16384, tx_frames: 64, frame_size: 2048 };
    let (mut rx, _tx) = afpacket::open(&a.iface, ring).map_err(|e| format!("{}: {e}", a.iface))?;
    let fd: RawFd = rx.rx_fd();
    let mut stats = FlowStats::default();
    let mut other = 0u64;
    // Probes received per DSCP: what a remarking meter on the way did.
    let mut dscps = [0u64; 64];
    let mut log = match &a.log {
        Some(p) => {
            Some(std::io::BufWriter::new(std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?))
        }
        None => None,
    };
    let mut notice = a.end.notice()?;
    end::say_ready();
    let start = Instant::now();
    let mut last_seen: Option<Instant> = None;
    let limit = a.count.unwrap_or(u64::MAX);
    let idle = Duration::from_secs_f64(a.idle);
    let mut ready = Vec::new();
    loop {
        if start.elapsed().as_secs_f64() >= a.duration || stats.received + stats.duplicates >= limit {
            break;
        }
        let done = match &notice {
            None => last_seen.is_some_and(|t| t.elapsed() >= idle),
            Some(n) => {
                let all_in = n.finished().is_some_and(|sent| stats.received >= total(sent));
                all_in || n.settled(last_seen, a.end.settle())
            }
        };
        if done {
            break;
        }
        let listening = notice.as_ref().is_some_and(|n| n.closed_at.is_none());
        let fds: &[RawFd] = if listening { &[fd, end::STDIN] } else { &[fd] };
        let _ = netio::sys::poll_readable(fds, 10, &mut ready);
        if ready.contains(&1) {
            if let Some(n) = &mut notice {
                n.read();
            }
        }
        let mut got = 0;
        rx.recv(4096, &mut |f: RxFrame<'_>| match frame::read_probe(f.data) {
            Some(p) if p.flow == a.flow => {
                let rx_ns = if f.tstamp_ns != 0 { f.tstamp_ns } else { realtime_ns() };
                stats.record(p.seq, f.data.len() + FCS, p.tx_ns, rx_ns);
                dscps[frame::dscp(f.data) as usize] += 1;
                if let Some(l) = &mut log {
                    let _ = writeln!(l, "{} {} {rx_ns}", p.seq, p.tx_ns);
                }
                got += 1;
            }
            _ => other += 1,
        });
        if got > 0 {
            last_seen = Some(Instant::now());
        }
    }
    if let Some(mut l) = log {
        l.flush().map_err(|e| e.to_string())?;
    }
    report(&stats, other, &dscps, notice.as_ref());
    Ok(())
}

/// Prints the receiver's report: with `--end-on-stdin`, also what the senders said they sent.
fn report(stats: &FlowStats, other: u64, dscps: &[u64; 64], notice: Option<&end::EndNotice>) {
    let by_dscp: Vec<String> =
        dscps.iter().enumerate().filter(|(_, &n)| n > 0).map(|(d, n)| format!("\"{d}\": {n}")).collect();
    let secs = stats.duration_s();
    let pps = if secs > 0.0 { (stats.received.saturating_sub(1)) as f64 / secs } else { 0.0 };
    let bps = if secs > 0.0 { stats.bytes as f64 * 8.0 / secs } else { 0.0 };
    let us = |ns: u64| ns as f64 / 1000.0;
    let l = &stats.latency;
    println!(
        "{{\"received\": {}, \"bytes\": {}, \"lost\": {}, \"reordered\": {}, \"duplicates\": {}, \"other_frames\": {other}, \
         \"first_seq\": {}, \"highest_seq\": {}, \"duration_s\": {secs:.6}, \"pps\": {pps:.1}, \"bps\": {bps:.1}, \
         \"latency_us\": {{\"min\": {:.2}, \"mean\": {:.2}, \"p50\": {:.2}, \"p99\": {:.2}, \"max\": {:.2}}}, \"jitter_us\": {:.3}, \
         \"dscp\": {{{}}}{}}}",
        stats.received,
        stats.bytes,
        stats.lost(),
        stats.reordered,
        stats.duplicates,
        stats.first_seq.map_or(-1, |s| s as i64),
        stats.highest_seq,
        us(l.min()),
        l.mean() / 1000.0,
        us(l.quantile(0.5)),
        us(l.quantile(0.99)),
        us(l.max()),
        stats.jitter_ns / 1000.0,
        by_dscp.join(", "),
        notice
            .and_then(end::EndNotice::reported)
            .map(|sent| format!(", \"sender_sent\": {}", total(sent)))
            .unwrap_or_default(),
    );
}

/// Frames sent in all, over the counts of the senders' reports.
fn total(sent: &[(String, u64)]) -> u64 {
    sent.iter().map(|(_, n)| n).sum()
}

/// Receives with the XDP counter in `bpf/loadgen.c` attached to the interface.
fn recv_xdp(a: &RecvArgs) -> Result<(), String> {
    use loadgen::stats::Histogram;
    let ifindex = netio::sys::ifindex(&a.iface).map_err(|e| format!("{}: {e}", a.iface))?;
    let obj = ebpf::Object::load(ebpf::objects::LOADGEN).map_err(|e| format!("loading the XDP receiver: {e}"))?;
    let err = |e: std::io::Error| e.to_string();
    let config = obj.map("loadgen_rx_config").map_err(err)?;
    config.update(&0u32.to_ne_bytes(), &(a.flow as u64).to_ne_bytes()).map_err(err)?;
    let offset = realtime_ns().wrapping_sub(monotonic_ns());
    config.update(&1u32.to_ne_bytes(), &offset.to_ne_bytes()).map_err(err)?;
    let state = obj.map("loadgen_rx_state").map_err(err)?;
    let hist = obj.map("loadgen_rx_hist").map_err(err)?;
    let link = obj
        .program("loadgen_count")
        .map_err(err)?
        .attach_xdp(ifindex)
        .map_err(|e| format!("attaching to {}: {e}", a.iface))?;
    // Per-CPU struct rx_state, as u64 words.
    let read = || -> Result<Vec<[u64; 12]>, String> {
        Ok(state
            .lookup_percpu(&0u32.to_ne_bytes())
            .map_err(err)?
            .iter()
            .map(|v| std::array::from_fn(|i| u64::from_ne_bytes(v[i * 8..i * 8 + 8].try_into().unwrap())))
            .collect())
    };
    let mut notice = a.end.notice()?;
    end::say_ready();
    let start = Instant::now();
    let (mut last_count, mut last_change) = (0u64, None::<Instant>);
    let limit = a.count.unwrap_or(u64::MAX);
    loop {
        // The counters are read every 50 ms while frames come; every 2 ms once the senders are
        // done, so that the end is seen soon after the last frame.
        let closing = notice.as_ref().is_some_and(|n| n.closed_at.is_some());
        std::thread::sleep(Duration::from_millis(if closing { 2 } else { 50 }));
        let received: u64 = read()?.iter().map(|s| s[0]).sum();
        if received != last_count {
            last_count = received;
            last_change = Some(Instant::now());
        }
        let done = match &mut notice {
            None => last_change.is_some_and(|t| t.elapsed().as_secs_f64() >= a.idle),
            Some(n) => {
                n.read();
                let all_in = n.finished().is_some_and(|sent| received >= total(sent));
                all_in || n.settled(last_change, a.end.settle())
            }
        };
        if done || start.elapsed().as_secs_f64() >= a.duration || received >= limit {
            break;
        }
    }
    drop(link);
    let per_cpu = read()?;
    let mut stats = FlowStats::default();
    let busiest = per_cpu.iter().max_by_key(|s| s[0]).copied().unwrap_or([0; 12]);
    let seen: Vec<&[u64; 12]> = per_cpu.iter().filter(|s| s[0] > 0).collect();
    stats.received = seen.iter().map(|s| s[0]).sum();
    stats.bytes = seen.iter().map(|s| s[1]).sum();
    stats.reordered = seen.iter().map(|s| s[2]).sum();
    if !seen.is_empty() {
        stats.highest_seq = (seen.iter().map(|s| s[3]).max().unwrap() - 1) as u32;
        stats.first_seq = Some((seen.iter().map(|s| s[4]).min().unwrap() - 1) as u32);
        stats.first_rx_ns = seen.iter().map(|s| s[5]).min().unwrap();
        stats.last_rx_ns = seen.iter().map(|s| s[6]).max().unwrap();
    }
    stats.jitter_ns = busiest[8] as f64 / 16.0;
    let mut counts = vec![0u64; Histogram::BUCKETS];
    for (b, c) in counts.iter_mut().enumerate() {
        *c = hist
            .lookup_percpu(&(b as u32).to_ne_bytes())
            .map_err(err)?
            .iter()
            .map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap()))
            .sum();
    }
    let sum: u128 = seen.iter().map(|s| s[9] as u128).sum();
    let min = seen.iter().map(|s| s[10]).min().unwrap_or(0);
    let max = seen.iter().map(|s| s[11]).max().unwrap_or(0);
    stats.latency = Histogram::from_counts(counts, min, max, sum);
    report(&stats, 0, &[0; 64], notice.as_ref());
    Ok(())
}
