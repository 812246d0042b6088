//! The TOML configuration file and its merge with command-line flags. Every error names the line it
//! is about and the reason.
//!
//! About 1 150 lines with its tests, one concern: the switch-wide settings and their flags. The AFDX,
//! LESS and stream sections and the ports' egress are parsed in their own modules beside this one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent::{FailMode, Target, TlsFiles};
use datapath::egress::PortEgress;
use datapath::switch::Timing;
use serde::Deserialize;
use toml::Spanned;

#[cfg(feature = "afdx")]
mod afdx;
mod egress;
mod json;
#[cfg(feature = "less")]
mod less;
#[cfg(feature = "p4")]
mod p4;
pub mod reload;
#[cfg(feature = "streams")]
mod streams;
pub mod uci;

#[cfg(feature = "afdx")]
use afdx::afdx;
#[cfg(feature = "afdx")]
pub use afdx::{load_afdx, AfdxSection};
use egress::port_egress;
pub use egress::{GatesEntry, QueueEntry};
pub use json::{as_toml, effective};
#[cfg(feature = "less")]
pub use less::LessSection;
#[cfg(feature = "streams")]
pub use streams::StreamEntry;
/// In a build without a mode, its section is kept whole only to be refused at its line.
#[cfg(not(feature = "afdx"))]
pub type AfdxSection = Spanned<toml::Value>;
#[cfg(not(feature = "less"))]
pub type LessSection = Spanned<toml::Value>;
#[cfg(not(feature = "streams"))]
pub type StreamEntry = Spanned<toml::Value>;
#[cfg(feature = "p4")]
pub use p4::{parse_key, parse_value, P4Section};
#[cfg(not(feature = "p4"))]
pub type P4Section = Spanned<toml::Value>;

/// Why a build refuses a mode it was built without.
#[cfg(not(all(feature = "afdx", feature = "less", feature = "streams", feature = "p4")))]
fn not_built(mode: &str) -> String {
    format!("mode '{mode}': this edgeflow was built without it (cargo feature `{mode}`)")
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    pub dpid: Option<Spanned<String>>,
    pub fail_mode: Option<Spanned<String>>,
    pub tables: Option<Spanned<u32>>,
    pub local_port: Option<String>,
    pub probe_interval: Option<Spanned<u64>>,
    /// Seconds standalone mode waits with no controller before learning on its own.
    pub fail_open_delay: Option<Spanned<u64>>,
    pub datapath: Option<Spanned<String>>,
    /// How the ports move their frames: "af_packet" (default) or "af_xdp".
    pub io: Option<Spanned<String>>,
    /// How the forwarding thread waits for frames: "wait" (default) or "busy".
    pub poll: Option<Spanned<String>>,
    /// How many translations the kernel fast path holds at most.
    pub fastpath_entries: Option<Spanned<u32>>,
    /// Keep the kernel fast path forwarding across a stop, for the next run to take over.
    pub keep_fastpath: Option<bool>,
    /// "auto" (links where the kernel has them) or "legacy" (clsact filters, netlink XDP).
    pub kernel_compat: Option<Spanned<String>>,
    pub mode: Option<Spanned<String>>,
    pub packet_in_rate: Option<u32>,
    /// Bytes a controller connection may have waiting to be written before it is closed.
    pub channel_output_limit: Option<Spanned<u64>>,
    /// Peers connected to the listeners at once, and how many of them may be in their handshake.
    pub max_connections: Option<Spanned<u64>>,
    pub max_handshakes: Option<Spanned<u64>>,
    /// The bytes a multipart request sent in parts may add up to.
    pub max_request_bytes: Option<Spanned<u64>>,
    /// Packet-ins per second to each controller (0: only `packet_in_rate`, the switch's).
    pub controller_packet_in_rate: Option<Spanned<u64>>,
    /// Receive frames in each port's ring (transmit: half as many).
    pub ring_frames: Option<Spanned<u64>>,
    #[serde(default, rename = "table")]
    pub tables_cfg: Vec<TableEntry>,
    #[serde(default)]
    pub controllers: Vec<Spanned<String>>,
    #[serde(default)]
    pub listen: Vec<Spanned<String>>,
    #[serde(default, rename = "port")]
    pub ports: Vec<PortEntry>,
    pub tls: Option<TlsEntry>,
    #[serde(default)]
    pub portmap: Vec<PortMapEntry>,
    pub afdx: Option<AfdxSection>,
    pub less: Option<LessSection>,
    #[serde(default, rename = "stream")]
    pub streams: Vec<StreamEntry>,
    /// mode = "p4": the program, and its tables' entries at start.
    pub p4: Option<P4Section>,
    /// How the forwarding thread meets scheduled ports' deadlines: sleep, fifo or busy.
    pub egress_timing: Option<Spanned<String>>,
    /// The CPU the forwarding thread, which paces and schedules the ports, is pinned to.
    pub egress_cpu: Option<Spanned<usize>>,
    /// Where the Prometheus endpoint listens: PORT (loopback) or ADDR:PORT.
    pub metrics: Option<Spanned<String>>,
    /// Where P4Runtime (gRPC) listens, for a P4 program's tables: PORT (loopback) or ADDR:PORT.
    pub p4runtime: Option<Spanned<String>>,
}

/// `[[portmap]]`: frames received on port `from` leave on port `to` (mode = "portmap").
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortMapEntry {
    pub from: Spanned<u32>,
    pub to: Spanned<u32>,
}

/// The forwarding mode and what it alone needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModeSetting {
    /// Programmed by OpenFlow controllers (native learning through a NORMAL flow without one).
    OpenFlow,
    /// A MAC-learning switch with no flow tables.
    Learning,
    /// Fixed (in port, out port) pairs.
    PortMap(Vec<(u32, u32)>),
    /// ARINC 664 part 7 virtual links.
    #[cfg(feature = "afdx")]
    Afdx { vls: Vec<forwarding::afdx::VirtualLink>, mac_constant: u32, network: Option<u8> },
    /// LESS source-routed label switching.
    #[cfg(feature = "less")]
    Less(forwarding::less::Config),
    /// TSN streams (IEEE 802.1CB, 802.1Qci): filtered, policed, replicated, relayed or recovered.
    #[cfg(feature = "streams")]
    Streams(Vec<forwarding::streams::Stream>),
    /// A P4 program (docs/p4.md).
    #[cfg(feature = "p4")]
    P4(forwarding::p4::Config),
}

impl ModeSetting {
    /// As `mode = "..."` spells it.
    pub fn name(&self) -> &'static str {
        match self {
            ModeSetting::OpenFlow => "openflow",
            ModeSetting::Learning => "learning",
            ModeSetting::PortMap(_) => "portmap",
            #[cfg(feature = "afdx")]
            ModeSetting::Afdx { .. } => "afdx",
            #[cfg(feature = "less")]
            ModeSetting::Less(_) => "less",
            #[cfg(feature = "streams")]
            ModeSetting::Streams(_) => "streams",
            #[cfg(feature = "p4")]
            ModeSetting::P4(_) => "p4",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortEntry {
    pub name: Spanned<String>,
    pub number: Option<Spanned<u32>>,
    /// The rate the port is paced to (Mbit/s); schedulers and gates need it.
    pub rate_mbps: Option<Spanned<f64>>,
    /// The link's speed (Mbit/s) where the driver reports none or not the real one (a veth says
    /// 10 000 whatever is behind it): what an AFDX port is paced to without `rate_mbps`.
    pub link_mbps: Option<Spanned<u32>>,
    /// VLAN priority 0-7 → egress queue, for frames no mode gave a queue (default: 802.1Q's table).
    pub pcp_map: Option<Spanned<Vec<u8>>>,
    #[serde(default, rename = "queue")]
    pub queues: Vec<QueueEntry>,
    pub gates: Option<GatesEntry>,
    /// This port's forwarding mode, when it is not the switch's (`mode` at the top).
    pub mode: Option<Spanned<String>>,
    /// How this port moves its frames, when not as the switch's `io` says.
    pub io: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableEntry {
    pub id: Spanned<u32>,
    pub max_flows: Option<u32>,
    #[serde(default)]
    pub evict: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsEntry {
    pub private_key: PathBuf,
    pub certificate: PathBuf,
    pub ca_cert: PathBuf,
    /// The SHA-256 of the one peer certificate to accept.
    pub peer_cert_sha256: Option<Spanned<String>>,
    /// The names a peer certificate may carry (any one of them).
    pub peer_names: Option<Spanned<Vec<String>>>,
}

/// Everything `edgeflow run` needs, after file and flags are merged and checked.
#[derive(Debug, Clone)]
pub struct Settings {
    pub dpid: u64,
    pub fail_mode: FailMode,
    pub n_tables: u8,
    pub ports: Vec<(u32, String)>,
    pub local_port: Option<String>,
    pub controllers: Vec<Target>,
    pub listen: Vec<Target>,
    pub tls: Option<TlsFiles>,
    pub probe_interval: Duration,
    pub fail_open_delay: Duration,
    pub packet_in_rate: u32,
    pub channel_output_limit: usize,
    pub max_connections: usize,
    pub max_handshakes: usize,
    pub max_request_bytes: usize,
    /// Receive frames each port's ring holds; `None`: sized for each port's link.
    pub ring_frames: Option<u32>,
    pub controller_packet_in_rate: u32,
    pub table_limits: Vec<(u8, u32, bool)>,
    pub fastpath: Option<datapath::fastpath::Mode>,
    /// How the ports move their frames (`io`), and the ports that do otherwise (`[[port]] io`).
    pub io: datapath::PortIo,
    pub port_io: Vec<(u32, datapath::PortIo)>,
    /// How the forwarding thread waits for frames (`poll`).
    pub poll: datapath::switch::Poll,
    /// The kernel fast path's capacity in translations.
    pub fastpath_entries: u32,
    /// The kernel fast path (tc, xdp) forwards on while the daemon is stopped, and the next run
    /// takes it over (docs/deploy.md#restart).
    pub keep_fastpath: bool,
    /// Attach programs the pre-link ways even where the kernel has links.
    pub legacy_attach: bool,
    /// The switch's mode: every port's that names none of its own.
    pub mode: ModeSetting,
    /// The other modes ports named (`[[port]] mode`), each with its ports; empty when every port
    /// runs the switch's mode.
    pub port_modes: Vec<(ModeSetting, Vec<u32>)>,
    /// Per port number: pacing, schedulers, gates and queue limits.
    pub egress: Vec<(u32, PortEgress)>,
    pub timing: Timing,
    /// `egress_cpu`: the CPU the forwarding thread is pinned to.
    pub cpu: Option<usize>,
    /// Where the Prometheus endpoint (`/metrics`) listens; none by default.
    pub metrics: Option<std::net::SocketAddr>,
    /// Where P4Runtime listens (a P4 program's control plane, docs/p4.md); none by default.
    pub p4runtime: Option<std::net::SocketAddr>,
    /// Whether P4Runtime is served over TLS (`tls:ADDR:PORT`), with the switch's own
    /// certificate and its clients' certificates checked as the OpenFlow channel checks them.
    pub p4runtime_tls: bool,
}

/// (port number, interface name), in the order configured.
type Ports = Vec<(u32, String)>;

/// Default packet-in rate limit (per second, all controllers together).
pub const DEFAULT_PACKET_IN_RATE: u32 = 2000;

/// What the command line gave (each overrides or extends the file).
#[derive(Debug, Default, Clone)]
pub struct Flags {
    pub ports: Vec<String>,
    pub controllers: Vec<String>,
    pub listen: Vec<String>,
    pub fail_mode: Option<String>,
    pub dpid: Option<String>,
    pub tables: Option<u32>,
    pub local_port: Option<String>,
    pub probe_interval: Option<u64>,
    pub fail_open_delay: Option<u64>,
    pub datapath: Option<String>,
    pub io: Option<String>,
    pub poll: Option<String>,
    pub fastpath_entries: Option<u32>,
    pub keep_fastpath: bool,
    pub kernel_compat: Option<String>,
    pub mode: Option<String>,
    /// `FROM:TO` port-number pairs for the port-map mode.
    pub portmap: Vec<String>,
    pub packet_in_rate: Option<u32>,
    pub channel_output_limit: Option<u64>,
    pub max_connections: Option<u64>,
    pub max_handshakes: Option<u64>,
    pub max_request_bytes: Option<u64>,
    pub ring_frames: Option<u64>,
    pub controller_packet_in_rate: Option<u64>,
    pub peer_cert_sha256: Option<String>,
    pub peer_names: Vec<String>,
    pub private_key: Option<PathBuf>,
    pub certificate: Option<PathBuf>,
    pub ca_cert: Option<PathBuf>,
    pub metrics: Option<String>,
    pub p4runtime: Option<String>,
}

/// The names a TLS peer's certificate may carry: each as a certificate writes it, so neither empty
/// nor with spaces around it.
fn check_peer_names(names: &[String]) -> Result<Vec<String>, String> {
    for n in names {
        if n.is_empty() || n.trim() != n {
            let why = "a peer name is a certificate's name (CN, DNS or URI), without spaces around it";
            return Err(format!("'{n}': {why}"));
        }
    }
    Ok(names.to_vec())
}

fn line_of(src: &str, offset: usize) -> usize {
    src[..offset.min(src.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

struct Ctx<'a> {
    path: &'a str,
    src: &'a str,
}

impl Ctx<'_> {
    fn at<T>(&self, s: &Spanned<T>, reason: impl std::fmt::Display) -> String {
        format!("{}:{}: {reason}", self.path, line_of(self.src, s.span().start))
    }
}

pub fn parse_dpid(s: &str) -> Result<u64, String> {
    let hex = s.trim_start_matches("0x").trim_start_matches("0X").replace(':', "");
    if hex.is_empty() || hex.len() > 16 {
        return Err(format!("dpid '{s}': expected up to 16 hex digits"));
    }
    u64::from_str_radix(&hex, 16).map_err(|_| format!("dpid '{s}': not hexadecimal"))
}

fn parse_fail_mode(s: &str) -> Result<FailMode, String> {
    match s {
        "secure" => Ok(FailMode::Secure),
        "standalone" => Ok(FailMode::Standalone),
        _ => Err(format!("fail mode '{s}': expected 'secure' or 'standalone'")),
    }
}

fn parse_tables(n: u32) -> Result<u8, String> {
    if (1..=254).contains(&n) {
        Ok(n as u8)
    } else {
        Err(format!("tables = {n}: must be between 1 and 254"))
    }
}

/// At least one OpenFlow message of the largest size (64 KiB) must fit.
fn parse_output_limit(n: u64) -> Result<usize, String> {
    if (65_536..=1 << 32).contains(&n) {
        Ok(n as usize)
    } else {
        Err(format!("channel_output_limit = {n}: must be between 65536 and 4294967296 bytes"))
    }
}

/// A number in `range`, named `key` in the error.
fn in_range(key: &'static str, range: std::ops::RangeInclusive<u64>) -> impl Fn(u64) -> Result<u64, String> {
    move |n| {
        if range.contains(&n) {
            Ok(n)
        } else {
            Err(format!("{key} = {n}: must be between {} and {}", range.start(), range.end()))
        }
    }
}

/// The metrics endpoint's address: `PORT` listens on loopback only, as `ptcp:PORT` does (counters
/// tell a stranger what the network carries); another address must be written out.
pub fn parse_metrics(s: &str) -> Result<std::net::SocketAddr, String> {
    listen_address("metrics", s)
}

/// P4Runtime's address, where there is a P4 program for it to serve, and whether it is `tls:`.
fn p4runtime_address(s: &str, runs_p4: bool, tls: Option<&TlsFiles>) -> Result<(std::net::SocketAddr, bool), String> {
    let (s, secure) = match s.strip_prefix("tls:") {
        Some(rest) => (rest, true),
        None => (s, false),
    };
    let addr = listen_address("p4runtime", s)?;
    if secure && tls.is_none() {
        return Err(format!(
            "tls:{s} serves with the switch's certificate: give --private-key, --certificate and --ca-cert (or [tls])"
        ));
    }
    if secure && !cfg!(feature = "tls") {
        return Err("this edgeflow was built without TLS (cargo feature `tls`)".into());
    }
    if !cfg!(feature = "p4runtime") {
        return Err("this edgeflow was built without P4Runtime (cargo feature `p4runtime`)".into());
    }
    if !runs_p4 {
        return Err("P4Runtime serves a P4 program's tables: it needs mode = \"p4\"".into());
    }
    Ok((addr, secure))
}

/// A server's address: `PORT` alone is loopback, as for the metrics endpoint (who writes a
/// switch's tables must be let in on purpose).
fn listen_address(what: &str, s: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse().map_err(|_| format!("{what} '{s}': expected PORT or ADDR:PORT (IPv6 as [ADDR]:PORT)"))
}

/// The flag's value, else the file's, else `default`, each checked; an error names the flag, or
/// the file's line.
fn merged<U>(
    cx: &Ctx,
    flag: (&str, Option<u64>),
    file: &Option<Spanned<u64>>,
    default: U,
    check: impl Fn(u64) -> Result<U, String>,
) -> Result<U, String> {
    match (flag.1, file) {
        (Some(n), _) => check(n).map_err(|e| format!("--{}: {e}", flag.0)),
        (None, Some(n)) => check(*n.get_ref()).map_err(|e| cx.at(n, e)),
        (None, None) => Ok(default),
    }
}

fn parse_fastpath_entries(n: u32) -> Result<u32, String> {
    let max = datapath::fastpath::MAX_ENTRIES_LIMIT;
    if (1..=max).contains(&n) {
        Ok(n)
    } else {
        Err(format!("fastpath_entries = {n}: must be between 1 and {max}"))
    }
}

fn parse_kernel_compat(s: &str) -> Result<bool, String> {
    match s {
        "auto" => Ok(false),
        "legacy" => Ok(true),
        _ => Err(format!("kernel compat '{s}': expected 'auto' or 'legacy'")),
    }
}

fn parse_datapath(s: &str) -> Result<Option<datapath::fastpath::Mode>, String> {
    match s {
        "user" => Ok(None),
        "tc" | "xdp" if !datapath::bpf_objects::BUILT => Err(format!(
            "datapath '{s}': this edgeflow was built without the kernel fast path (cargo feature `fastpath`)"
        )),
        "tc" => Ok(Some(datapath::fastpath::Mode::Tc)),
        "xdp" => Ok(Some(datapath::fastpath::Mode::Xdp)),
        _ => Err(format!("datapath '{s}': expected 'user', 'tc' or 'xdp'")),
    }
}

/// A default datapath id from the first port's MAC address (as Open vSwitch derives it).
fn default_dpid(ports: &[(u32, String)]) -> u64 {
    ports
        .first()
        .and_then(|(_, name)| datapath::sys::hw_addr(name).ok())
        .map(|mac| mac.iter().fold(0u64, |acc, &b| acc << 8 | b as u64))
        .filter(|&d| d != 0)
        .unwrap_or(1)
}

/// Reads and checks a config file (no flags).
pub fn load_file(path: &Path) -> Result<(File, String), String> {
    let src = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file = parse_file(&src, path)?;
    Ok((file, src))
}

/// The settings a config file's text gives, without flags (what `edgeflow run --config` checks
/// first); every error names the file, and the line where there is one.
pub fn from_text(src: &str, path: &Path) -> Result<Settings, String> {
    let file = parse_file(src, path)?;
    settings(Some((&file, src, path)), &Flags::default())
}

/// Parses a config file's text; a syntax or type error names its line, and says what is wrong
/// where the TOML reader has no words for it (a control character in a comment: the reader's
/// message is empty) by the character and its column.
fn parse_file(src: &str, path: &Path) -> Result<File, String> {
    toml::from_str(src).map_err(|e| {
        let start = e.span().map(|s| s.start.min(src.len()));
        let line = start.map(|at| line_of(src, at)).unwrap_or(0);
        let why = match (e.message().trim(), start) {
            ("", Some(at)) => {
                let column = src.get(..at).and_then(|b| b.rsplit('\n').next()).map_or(0, |l| l.chars().count()) + 1;
                match src.get(at..).and_then(|rest| rest.chars().next()) {
                    Some(c) => format!("not TOML at column {column}: {:?} cannot stand there", c),
                    None => format!("not TOML at column {column}: the text ends early"),
                }
            }
            ("", None) => "not TOML".to_string(),
            (why, _) => why.to_string(),
        };
        format!("{}:{line}: {why}", path.display())
    })
}

pub fn settings(file: Option<(&File, &str, &Path)>, flags: &Flags) -> Result<Settings, String> {
    let empty = File::default();
    let (file, src, path) = match file {
        Some((f, s, p)) => (f, s, p.display().to_string()),
        None => (&empty, "", "<flags>".to_string()),
    };
    let cx = Ctx { path: &path, src };

    let mut ports: Vec<(u32, String)> = Vec::new();
    let mut egress = Vec::new();
    let mut port_io = Vec::new();
    let mut next = 1u32;
    for p in &file.ports {
        let number = match &p.number {
            Some(n) if *n.get_ref() == 0 || *n.get_ref() >= ofp::port::OFPP_MAX => {
                return Err(cx.at(n, format!("port number {} is not a usable OpenFlow port", n.get_ref())));
            }
            Some(n) => *n.get_ref(),
            None => next,
        };
        if ports.iter().any(|(no, _)| *no == number) {
            return Err(cx.at(&p.name, format!("port number {number} is used twice")));
        }
        if ports.iter().any(|(_, name)| name == p.name.get_ref()) {
            return Err(cx.at(&p.name, format!("interface '{}' is listed twice", p.name.get_ref())));
        }
        ports.push((number, p.name.get_ref().clone()));
        next = next.max(number + 1);
        if let Some(e) = port_egress(&cx, p)? {
            egress.push((number, e));
        }
        if let Some(io) = &p.io {
            port_io.push((number, io.get_ref().parse().map_err(|e| cx.at(io, e))?));
        }
    }
    for name in &flags.ports {
        if ports.iter().any(|(_, n)| n == name) {
            return Err(format!("--port {name}: interface listed twice"));
        }
        ports.push((next, name.clone()));
        next += 1;
    }

    let targets = |list: &[Spanned<String>], extra: &[String], what: &str| -> Result<Vec<Target>, String> {
        let mut out = Vec::new();
        for t in list {
            out.push(t.get_ref().parse().map_err(|e| cx.at(t, e))?);
        }
        for t in extra {
            out.push(t.parse().map_err(|e| format!("--{what} {e}"))?);
        }
        Ok(out)
    };
    let controllers = targets(&file.controllers, &flags.controllers, "controller")?;
    let listen = targets(&file.listen, &flags.listen, "listen")?;

    let fail_mode = match (&flags.fail_mode, &file.fail_mode) {
        (Some(f), _) => parse_fail_mode(f).map_err(|e| format!("--fail-mode: {e}"))?,
        (None, Some(f)) => parse_fail_mode(f.get_ref()).map_err(|e| cx.at(f, e))?,
        (None, None) => FailMode::Secure,
    };
    let n_tables = match (flags.tables, &file.tables) {
        (Some(n), _) => parse_tables(n).map_err(|e| format!("--tables: {e}"))?,
        (None, Some(n)) => parse_tables(*n.get_ref()).map_err(|e| cx.at(n, e))?,
        (None, None) => pipeline::DEFAULT_N_TABLES,
    };
    let fastpath = match (&flags.datapath, &file.datapath) {
        (Some(d), _) => parse_datapath(d).map_err(|e| format!("--datapath: {e}"))?,
        (None, Some(d)) => parse_datapath(d.get_ref()).map_err(|e| cx.at(d, e))?,
        _ => None,
    };
    let io: datapath::PortIo = match (&flags.io, &file.io) {
        (Some(i), _) => i.parse().map_err(|e| format!("--io: {e}"))?,
        (None, Some(i)) => i.get_ref().parse().map_err(|e| cx.at(i, e))?,
        (None, None) => datapath::PortIo::AfPacket,
    };
    let any_af_xdp = io == datapath::PortIo::AfXdp || port_io.iter().any(|(_, i)| *i == datapath::PortIo::AfXdp);
    if fastpath == Some(datapath::fastpath::Mode::Tc) && any_af_xdp {
        return Err(format!("io af_xdp with datapath tc: {}", datapath::switch::AF_XDP_NOT_UNDER_TC));
    }
    let poll: datapath::switch::Poll = match (&flags.poll, &file.poll) {
        (Some(p), _) => p.parse().map_err(|e| format!("--poll {e}"))?,
        (None, Some(p)) => p.get_ref().parse().map_err(|e: String| cx.at(p, format!("poll {e}")))?,
        (None, None) => datapath::switch::Poll::Wait,
    };
    let legacy_attach = match (&flags.kernel_compat, &file.kernel_compat) {
        (Some(k), _) => parse_kernel_compat(k).map_err(|e| format!("--kernel-compat: {e}"))?,
        (None, Some(k)) => parse_kernel_compat(k.get_ref()).map_err(|e| cx.at(k, e))?,
        (None, None) => false,
    };
    let channel_output_limit = match (flags.channel_output_limit, &file.channel_output_limit) {
        (Some(n), _) => parse_output_limit(n).map_err(|e| format!("--channel-output-limit: {e}"))?,
        (None, Some(n)) => parse_output_limit(*n.get_ref()).map_err(|e| cx.at(n, e))?,
        (None, None) => agent::DEFAULT_OUTPUT_LIMIT,
    };
    let count = |key, range| {
        let check = in_range(key, range);
        move |n| check(n).map(|n| n as usize)
    };
    let max_connections = merged(
        &cx,
        ("max-connections", flags.max_connections),
        &file.max_connections,
        agent::DEFAULT_MAX_CONNECTIONS,
        count("max_connections", 1..=65_536),
    )?;
    let max_handshakes = merged(
        &cx,
        ("max-handshakes", flags.max_handshakes),
        &file.max_handshakes,
        agent::DEFAULT_MAX_HANDSHAKES.min(max_connections),
        count("max_handshakes", 1..=max_connections as u64),
    )?;
    // One message of the largest size (64 KiB) must fit.
    let max_request_bytes = merged(
        &cx,
        ("max-request-bytes", flags.max_request_bytes),
        &file.max_request_bytes,
        agent::DEFAULT_MAX_REQUEST_BYTES,
        count("max_request_bytes", 65_536..=1 << 30),
    )?;
    let controller_packet_in_rate = merged(
        &cx,
        ("controller-packet-in-rate", flags.controller_packet_in_rate),
        &file.controller_packet_in_rate,
        0,
        |n| in_range("controller_packet_in_rate", 0..=1_000_000)(n).map(|n| n as u32),
    )?;
    let ring_frames = merged(&cx, ("ring-frames", flags.ring_frames), &file.ring_frames, None, |n| {
        in_range("ring_frames", 64..=65_536)(n).map(|n| Some(n as u32))
    })?;
    let fastpath_entries = match (flags.fastpath_entries, &file.fastpath_entries) {
        (Some(n), _) => parse_fastpath_entries(n).map_err(|e| format!("--fastpath-entries: {e}"))?,
        (None, Some(n)) => parse_fastpath_entries(*n.get_ref()).map_err(|e| cx.at(n, e))?,
        (None, None) => datapath::fastpath::DEFAULT_ENTRIES,
    };
    let dpid = match (&flags.dpid, &file.dpid) {
        (Some(d), _) => parse_dpid(d).map_err(|e| format!("--dpid: {e}"))?,
        (None, Some(d)) => parse_dpid(d.get_ref()).map_err(|e| cx.at(d, e))?,
        (None, None) => default_dpid(&ports),
    };
    // At most a day: the probe's deadlines are computed from it.
    let probe = merged(
        &cx,
        ("probe-interval", flags.probe_interval),
        &file.probe_interval,
        5,
        in_range("probe_interval", 1..=86_400),
    )?;
    let fail_open_delay = merged(
        &cx,
        ("fail-open-delay", flags.fail_open_delay),
        &file.fail_open_delay,
        3,
        in_range("fail_open_delay", 1..=86_400),
    )?;
    let pinned = match (&flags.peer_cert_sha256, file.tls.as_ref().and_then(|t| t.peer_cert_sha256.as_ref())) {
        (Some(p), _) => Some(agent::parse_pin(p).map_err(|e| format!("--peer-cert-sha256: {e}"))?),
        (None, Some(p)) => Some(agent::parse_pin(p.get_ref()).map_err(|e| cx.at(p, e))?),
        (None, None) => None,
    };
    let peer_names = match (&flags.peer_names[..], file.tls.as_ref().and_then(|t| t.peer_names.as_ref())) {
        ([], None) => Vec::new(),
        ([], Some(names)) => check_peer_names(names.get_ref()).map_err(|e| cx.at(names, e))?,
        (names, _) => check_peer_names(names).map_err(|e| format!("--peer-name: {e}"))?,
    };
    let tls = match (&flags.private_key, &flags.certificate, &flags.ca_cert, &file.tls) {
        (Some(k), Some(c), Some(ca), _) => {
            Some(TlsFiles { private_key: k.clone(), certificate: c.clone(), ca_cert: ca.clone(), pinned, peer_names })
        }
        (None, None, None, Some(t)) => Some(TlsFiles {
            private_key: t.private_key.clone(),
            certificate: t.certificate.clone(),
            ca_cert: t.ca_cert.clone(),
            pinned,
            peer_names,
        }),
        (None, None, None, None) if pinned.is_none() && peer_names.is_empty() => None,
        (None, None, None, None) if pinned.is_some() => {
            return Err("--peer-cert-sha256 pins a TLS peer: it needs the TLS files".into())
        }
        (None, None, None, None) => return Err("--peer-name names TLS peers: it needs the TLS files".into()),
        _ => return Err("--private-key, --certificate and --ca-cert go together".into()),
    };
    let mut table_limits = Vec::new();
    for t in &file.tables_cfg {
        let id = *t.id.get_ref();
        if id >= n_tables as u32 {
            return Err(cx.at(&t.id, format!("table {id} does not exist (tables = {n_tables})")));
        }
        if table_limits.iter().any(|&(i, _, _)| i as u32 == id) {
            return Err(cx.at(&t.id, format!("table {id} is configured twice")));
        }
        let max = t.max_flows.unwrap_or(pipeline::DEFAULT_MAX_FLOWS);
        if max == 0 {
            return Err(cx.at(&t.id, "max_flows must be at least 1"));
        }
        table_limits.push((id as u8, max, t.evict));
    }
    if ports.is_empty() {
        return Err("no ports: give --port IFNAME (repeatable) or [[port]] entries in the config".into());
    }
    let mode_name = match (&flags.mode, &file.mode) {
        (Some(m), _) => m.clone(),
        (None, Some(m)) => m.get_ref().clone(),
        (None, None) => "openflow".into(),
    };
    let at_mode = |reason: String| match (&flags.mode, &file.mode) {
        (None, Some(m)) => cx.at(m, reason),
        _ => format!("--mode: {reason}"),
    };
    // Ports that name a mode other than the switch's, grouped by mode (in the order first named).
    let mut groups: Vec<(&Spanned<String>, Ports)> = Vec::new();
    for (entry, port) in file.ports.iter().zip(&ports) {
        let Some(m) = entry.mode.as_ref().filter(|m| *m.get_ref() != mode_name) else { continue };
        match groups.iter_mut().find(|(name, _)| name.get_ref() == m.get_ref()) {
            Some((_, list)) => list.push(port.clone()),
            None => groups.push((m, vec![port.clone()])),
        }
    }
    let own: Vec<(u32, String)> = ports
        .iter()
        .filter(|(no, _)| !groups.iter().any(|(_, list)| list.iter().any(|(n, _)| n == no)))
        .cloned()
        .collect();
    let build = |name: &str, ports: &[(u32, String)], at: &dyn Fn(String) -> String| -> Result<ModeSetting, String> {
        Ok(match name {
            "openflow" => ModeSetting::OpenFlow,
            "learning" => ModeSetting::Learning,
            "portmap" => ModeSetting::PortMap(portmap(&cx, file, flags, ports, at)?),
            #[cfg(feature = "afdx")]
            "afdx" => afdx(&cx, file, ports)?
                .ok_or_else(|| at("mode 'afdx' needs [[afdx.vl]] entries in the config file".into()))?,
            #[cfg(feature = "less")]
            "less" => less::less(&cx, file, ports)?,
            #[cfg(not(feature = "afdx"))]
            "afdx" => return Err(at(not_built("afdx"))),
            #[cfg(not(feature = "less"))]
            "less" => return Err(at(not_built("less"))),
            #[cfg(feature = "streams")]
            "streams" => streams::streams(&cx, file, ports)?,
            #[cfg(not(feature = "streams"))]
            "streams" => return Err(at(not_built("streams"))),
            #[cfg(feature = "p4")]
            "p4" => p4::p4(&cx, file, ports, at)?,
            #[cfg(not(feature = "p4"))]
            "p4" => return Err(at(not_built("p4"))),
            other => {
                return Err(at(format!(
                    "mode '{other}': expected 'openflow', 'learning', 'portmap', 'afdx', 'less', 'streams' or 'p4'"
                )))
            }
        })
    };
    let mode = build(&mode_name, &own, &at_mode)?;
    let mut port_modes = Vec::new();
    for (name, list) in &groups {
        let at = |reason: String| cx.at(name, reason);
        port_modes.push((build(name.get_ref(), list, &at)?, list.iter().map(|(no, _)| *no).collect::<Vec<u32>>()));
    }
    #[cfg(feature = "afdx")]
    if file.afdx.as_ref().and_then(|a| a.pace_to_link_speed) != Some(false) {
        // AFDX priority needs the backlog in the port's queues: paced to the link unless paced.
        let own_nos: Vec<u32> = own.iter().map(|(no, _)| *no).collect();
        let afdx_ports = std::iter::once((&mode, own_nos))
            .chain(port_modes.iter().map(|(m, nos)| (m, nos.clone())))
            .filter(|(m, _)| matches!(m, ModeSetting::Afdx { .. }))
            .flat_map(|(_, nos)| nos);
        for no in afdx_ports {
            match egress.iter_mut().find(|(n, _)| *n == no) {
                Some((_, e)) => e.pace_to_link = e.schedule.is_none(),
                None => egress.push((no, PortEgress { pace_to_link: true, ..Default::default() })),
            }
        }
    }
    let modes: Vec<&ModeSetting> = std::iter::once(&mode).chain(port_modes.iter().map(|(m, _)| m)).collect();
    let any = |f: fn(&ModeSetting) -> bool| modes.iter().any(|m| f(m));
    if !any(|m| *m == ModeSetting::OpenFlow) && !controllers.is_empty() {
        return Err(at_mode(format!("mode '{mode_name}' takes no controllers (only mode = \"openflow\" does)")));
    }
    if !any(|m| matches!(m, ModeSetting::PortMap(_))) {
        if let Some(e) = file.portmap.first() {
            return Err(cx.at(&e.from, "[[portmap]] needs mode = \"portmap\""));
        }
        if !flags.portmap.is_empty() {
            return Err("--portmap needs --mode portmap".into());
        }
    }
    #[cfg(feature = "afdx")]
    if !any(|m| matches!(m, ModeSetting::Afdx { .. })) {
        if let Some(a) = &file.afdx {
            let reason = "[afdx] needs mode = \"afdx\"";
            return Err(match (a.vl.first(), &a.mac_constant) {
                (Some(vl), _) => cx.at(&vl.id, reason),
                (None, Some(c)) => cx.at(c, reason),
                (None, None) => format!("{path}: {reason}"),
            });
        }
    }
    #[cfg(feature = "less")]
    if let (false, Some(section)) = (any(|m| matches!(m, ModeSetting::Less(_))), &file.less) {
        return Err(less::unwanted(&cx, section));
    }
    #[cfg(not(feature = "afdx"))]
    if let Some(section) = &file.afdx {
        return Err(cx.at(section, format!("[afdx]: {}", not_built("afdx"))));
    }
    #[cfg(not(feature = "less"))]
    if let Some(section) = &file.less {
        return Err(cx.at(section, format!("[less]: {}", not_built("less"))));
    }
    #[cfg(feature = "p4")]
    if let (false, Some(section)) = (any(|m| matches!(m, ModeSetting::P4(_))), &file.p4) {
        return Err(cx.at(&section.program, "[p4] needs mode = \"p4\""));
    }
    #[cfg(not(feature = "p4"))]
    if let Some(section) = &file.p4 {
        return Err(cx.at(section, format!("[p4]: {}", not_built("p4"))));
    }
    #[cfg(feature = "streams")]
    if let (false, Some(first)) = (any(|m| matches!(m, ModeSetting::Streams(_))), file.streams.first()) {
        return Err(cx.at(&first.name, "[[stream]] needs mode = \"streams\""));
    }
    #[cfg(not(feature = "streams"))]
    if let Some(first) = file.streams.first() {
        return Err(cx.at(first, format!("[[stream]]: {}", not_built("streams"))));
    }
    #[cfg(feature = "p4")]
    let runs_p4 = any(|m| matches!(m, ModeSetting::P4(_)));
    #[cfg(not(feature = "p4"))]
    let runs_p4 = false;
    let p4runtime = match (&flags.p4runtime, &file.p4runtime) {
        (Some(a), _) => Some(p4runtime_address(a, runs_p4, tls.as_ref()).map_err(|e| format!("--p4runtime: {e}"))?),
        (None, Some(a)) => Some(p4runtime_address(a.get_ref(), runs_p4, tls.as_ref()).map_err(|e| cx.at(a, e))?),
        (None, None) => None,
    };
    let (p4runtime, p4runtime_tls) = match p4runtime {
        Some((addr, secure)) => (Some(addr), secure),
        None => (None, false),
    };
    Ok(Settings {
        dpid,
        fail_mode,
        n_tables,
        ports,
        local_port: flags.local_port.clone().or_else(|| file.local_port.clone()),
        controllers,
        listen,
        tls,
        probe_interval: Duration::from_secs(probe),
        fail_open_delay: Duration::from_secs(fail_open_delay),
        packet_in_rate: flags.packet_in_rate.or(file.packet_in_rate).unwrap_or(DEFAULT_PACKET_IN_RATE),
        channel_output_limit,
        max_connections,
        max_handshakes,
        max_request_bytes,
        ring_frames,
        controller_packet_in_rate,
        table_limits,
        fastpath,
        io,
        port_io,
        poll,
        fastpath_entries,
        keep_fastpath: flags.keep_fastpath || file.keep_fastpath.unwrap_or(false),
        legacy_attach,
        mode,
        port_modes,
        egress,
        timing: match &file.egress_timing {
            None => Timing::Sleep,
            Some(t) => match t.get_ref().as_str() {
                "sleep" => Timing::Sleep,
                "fifo" => Timing::Fifo,
                "busy" => Timing::Busy,
                other => return Err(cx.at(t, format!("egress_timing '{other}': expected sleep, fifo or busy"))),
            },
        },
        metrics: match (&flags.metrics, &file.metrics) {
            (Some(m), _) => Some(parse_metrics(m).map_err(|e| format!("--metrics: {e}"))?),
            (None, Some(m)) => Some(parse_metrics(m.get_ref()).map_err(|e| cx.at(m, e))?),
            (None, None) => None,
        },
        p4runtime,
        p4runtime_tls,
        cpu: match &file.egress_cpu {
            None => None,
            Some(c) => {
                let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
                if *c.get_ref() >= cpus {
                    return Err(
                        cx.at(c, format!("egress_cpu {}: this machine has CPUs 0 to {}", c.get_ref(), cpus - 1))
                    );
                }
                Some(*c.get_ref())
            }
        },
    })
}

/// The port map's pairs, from the file and `--portmap FROM:TO` flags: both ports configured, each
/// input mapped once.
/// The port pairs of a portmap mode; `at_mode` places an error on the line that chose the mode.
fn portmap(
    cx: &Ctx<'_>,
    file: &File,
    flags: &Flags,
    ports: &[(u32, String)],
    at_mode: &dyn Fn(String) -> String,
) -> Result<Vec<(u32, u32)>, String> {
    let known = |n: u32| ports.iter().any(|(no, _)| *no == n);
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    for e in &file.portmap {
        for end in [&e.from, &e.to] {
            if !known(*end.get_ref()) {
                return Err(cx.at(end, format!("port {} is not configured for mode portmap", end.get_ref())));
            }
        }
        if pairs.iter().any(|&(from, _)| from == *e.from.get_ref()) {
            return Err(cx.at(&e.from, format!("port {} is mapped twice", e.from.get_ref())));
        }
        pairs.push((*e.from.get_ref(), *e.to.get_ref()));
    }
    for f in &flags.portmap {
        let bad = || format!("--portmap {f}: expected FROM:TO, two configured port numbers");
        let (from, to) = f.split_once(':').ok_or_else(bad)?;
        let (from, to): (u32, u32) = (from.parse().map_err(|_| bad())?, to.parse().map_err(|_| bad())?);
        if !known(from) || !known(to) {
            return Err(bad());
        }
        if pairs.iter().any(|&(f, _)| f == from) {
            return Err(format!("--portmap {f}: port {from} is mapped twice"));
        }
        pairs.push((from, to));
    }
    if pairs.is_empty() {
        return Err(at_mode("mode 'portmap' needs [[portmap]] entries or --portmap FROM:TO".into()));
    }
    Ok(pairs)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(super) fn from_str(src: &str) -> Result<Settings, String> {
        from_text(src, Path::new("sw.toml"))
    }

    #[test]
    fn full_file() {
        let s = from_str(
            r#"
dpid = "0xab"
fail_mode = "standalone"
tables = 10
controllers = ["tcp:127.0.0.1:6653"]
listen = ["ptcp:6634:127.0.0.1"]
[[port]]
name = "a"
[[port]]
name = "b"
number = 7
"#,
        )
        .unwrap();
        assert_eq!(s.dpid, 0xab);
        assert_eq!(s.fail_mode, FailMode::Standalone);
        assert_eq!(s.n_tables, 10);
        assert_eq!(s.ports, vec![(1, "a".into()), (7, "b".into())]);
        assert_eq!(s.controllers.len(), 1);
    }

    /// `[tls] peer_names` and `--peer-name`: names a certificate carries, given with the TLS files.
    #[test]
    fn tls_peer_names_come_from_the_file_or_the_flags() {
        let tls = "[tls]\nprivate_key = \"k\"\ncertificate = \"c\"\nca_cert = \"ca\"\n";
        let names = |s: Result<Settings, String>| s.map(|s| s.tls.unwrap().peer_names);
        let file = format!("[[port]]\nname = \"a\"\n{tls}peer_names = [\"ctl-1\", \"ctl-2.example\"]\n");
        assert_eq!(names(from_str(&file)), Ok(vec!["ctl-1".to_string(), "ctl-2.example".to_string()]));
        let e = from_str(&format!("[[port]]\nname = \"a\"\n{tls}peer_names = [\"ctl\", \" \"]\n")).unwrap_err();
        assert!(e.starts_with("sw.toml:7:") && e.contains("a peer name is a certificate's name"), "{e}");
        let parsed = parse_file(&file, Path::new("sw.toml")).unwrap();
        let flags = Flags { peer_names: vec!["ctl-3".into()], ..Flags::default() };
        let s = settings(Some((&parsed, &file, Path::new("sw.toml"))), &flags);
        assert_eq!(names(s), Ok(vec!["ctl-3".to_string()]), "the flags' names replace the file's");
        let flags = Flags { ports: vec!["a".into()], peer_names: vec!["ctl".into()], ..Flags::default() };
        assert_eq!(settings(None, &flags).unwrap_err(), "--peer-name names TLS peers: it needs the TLS files");
    }

    /// Found by the `uci` fuzz target's surface: a control character in a comment (an include's
    /// path is echoed into one) was refused as "sw.toml:2: " and no more.
    #[test]
    fn a_toml_error_without_words_is_named_by_its_character() {
        let e = from_str("[[port]]\n# a\u{1}b\nname = \"a\"\n").unwrap_err();
        assert_eq!(e, r#"sw.toml:2: not TOML at column 4: '\u{1}' cannot stand there"#);
    }

    #[test]
    fn io_is_chosen_per_switch_and_per_port_and_refused_only_with_the_tc_fast_path() {
        use datapath::PortIo::{AfPacket, AfXdp};
        let s = from_str("[[port]]\nname = \"a\"\n").unwrap();
        assert_eq!((s.io, s.port_io), (AfPacket, vec![]));
        let s =
            from_str("io = \"af_xdp\"\n[[port]]\nname = \"a\"\n[[port]]\nname = \"b\"\nio = \"af_packet\"\n").unwrap();
        assert_eq!((s.io, s.port_io), (AfXdp, vec![(2, AfPacket)]));
        let e = from_str("io = \"af_xpd\"\n[[port]]\nname = \"a\"\n").unwrap_err();
        assert!(e.starts_with("sw.toml:1:") && e.contains("expected 'af_packet' or 'af_xdp'"), "{e}");
        let s = from_str("datapath = \"xdp\"\n[[port]]\nname = \"a\"\nio = \"af_xdp\"\n").unwrap();
        assert_eq!(s.port_io, vec![(1, AfXdp)]);
        let e = from_str("datapath = \"tc\"\n[[port]]\nname = \"a\"\nio = \"af_xdp\"\n").unwrap_err();
        assert!(e.contains("io af_xdp with datapath tc") && e.contains("datapath user or xdp"), "{e}");
        let flags = Flags { io: Some("af_xdp".into()), datapath: Some("tc".into()), ..Default::default() };
        let e = settings(None, &Flags { ports: vec!["a".into()], ..flags }).unwrap_err();
        assert!(e.contains("io af_xdp with datapath tc"), "{e}");
    }

    #[test]
    fn errors_name_the_line() {
        let e = from_str("dpid = \"1\"\n\ncontrollers = [\"udp:1.2.3.4\"]\n[[port]]\nname = \"a\"\n").unwrap_err();
        assert!(e.starts_with("sw.toml:3:"), "{e}");
        let e = from_str("[[port]]\nname = \"a\"\n[[port]]\nname = \"a\"\n").unwrap_err();
        assert!(e.starts_with("sw.toml:4:") && e.contains("twice"), "{e}");
        let e = from_str("fail_mode = \"open\"\n[[port]]\nname = \"a\"\n").unwrap_err();
        assert!(e.starts_with("sw.toml:1:") && e.contains("secure"), "{e}");
        // Top-level keys before the first table: after `[[port]]` they would belong to the port
        // and stop at "unknown field" before the range check.
        let e = from_str("tables = 300\n[[port]]\nname = \"a\"\n").unwrap_err();
        assert!(e.starts_with("sw.toml:1:") && e.contains("between 1 and 254"), "{e}");
        let e = from_str("dpid = \"1\"\nfastpath_entries = 0\n[[port]]\nname = \"a\"\n").unwrap_err();
        assert!(e.starts_with("sw.toml:2:") && e.contains("between 1 and 1048576"), "{e}");
        let s = from_str("fastpath_entries = 131072\n[[port]]\nname = \"a\"\n").unwrap();
        assert_eq!(s.fastpath_entries, 131_072);
        let e = from_str("channel_output_limit = 1000\n[[port]]\nname = \"a\"\n").unwrap_err();
        assert!(e.starts_with("sw.toml:1:") && e.contains("between 65536"), "{e}");
        let e = from_str("[[port]]\nname = \"a\"\n").map(|s| s.ring_frames);
        assert_eq!(e, Ok(None), "rings sized for each port's link");
        let e = from_str("ring_frames = 300\n[[port]]\nname = \"a\"\n").map(|s| s.ring_frames);
        assert_eq!(e, Ok(Some(300)));
        let e = from_str("ring_frames = 16\n[[port]]\nname = \"a\"\n").unwrap_err();
        assert!(e.starts_with("sw.toml:1:") && e.contains("between 64 and 65536"), "{e}");
        let s = from_str("[[port]]\nname = \"a\"\n").unwrap();
        assert_eq!(s.channel_output_limit, agent::DEFAULT_OUTPUT_LIMIT);
        assert_eq!(
            (s.max_connections, s.max_handshakes),
            (agent::DEFAULT_MAX_CONNECTIONS, agent::DEFAULT_MAX_HANDSHAKES)
        );
        let s = from_str("max_connections = 4\ncontroller_packet_in_rate = 50\n[[port]]\nname = \"a\"\n").unwrap();
        assert_eq!((s.max_connections, s.max_handshakes, s.controller_packet_in_rate), (4, 4, 50));
        let e = from_str("max_connections = 4\nmax_handshakes = 5\n[[port]]\nname = \"a\"\n").unwrap_err();
        assert!(e.starts_with("sw.toml:2:") && e.contains("max_handshakes = 5: must be between 1 and 4"), "{e}");
        let e = from_str("max_request_bytes = 100\n[[port]]\nname = \"a\"\n").unwrap_err();
        assert!(e.starts_with("sw.toml:1:") && e.contains("between 65536"), "{e}");
        let e = from_str("[[port]]\nname = \"a\"\ntables = 3\n").unwrap_err();
        assert!(e.starts_with("sw.toml:3:") && e.contains("unknown field"), "{e}");
        let s = from_str("[[port]]\nname = \"a\"\n").unwrap();
        assert_eq!(s.fail_open_delay, Duration::from_secs(3));
        let s = from_str("fail_open_delay = 10\n[[port]]\nname = \"a\"\n").unwrap();
        assert_eq!(s.fail_open_delay, Duration::from_secs(10));
        let e = from_str("fail_open_delay = 0\n[[port]]\nname = \"a\"\n").unwrap_err();
        assert!(e.starts_with("sw.toml:1:") && e.contains("between 1 and 86400"), "{e}");
    }

    #[test]
    fn modes_and_their_settings() {
        let ports = "[[port]]\nname = \"a\"\n[[port]]\nname = \"b\"\n";
        assert_eq!(from_str(ports).unwrap().mode, ModeSetting::OpenFlow);
        let s = from_str(&format!("mode = \"portmap\"\n{ports}[[portmap]]\nfrom = 1\nto = 2\n")).unwrap();
        assert_eq!(s.mode, ModeSetting::PortMap(vec![(1, 2)]));
        let e = from_str(&format!("mode = \"portmap\"\n{ports}[[portmap]]\nfrom = 1\nto = 3\n")).unwrap_err();
        assert!(e.starts_with("sw.toml:8:") && e.contains("port 3 is not configured"), "{e}");
        let e = from_str(&format!(
            "mode = \"portmap\"\n{ports}[[portmap]]\nfrom = 1\nto = 2\n[[portmap]]\nfrom = 1\nto = 1\n"
        ))
        .unwrap_err();
        assert!(e.starts_with("sw.toml:10:") && e.contains("mapped twice"), "{e}");
        let e = from_str(&format!("mode = \"bridge\"\n{ports}")).unwrap_err();
        assert!(e.starts_with("sw.toml:1:") && e.contains("expected 'openflow'"), "{e}");
        let e = from_str(&format!("mode = \"learning\"\ncontrollers = [\"tcp:127.0.0.1\"]\n{ports}")).unwrap_err();
        assert!(e.starts_with("sw.toml:1:") && e.contains("takes no controllers"), "{e}");
        let e = from_str(&format!("{ports}[[portmap]]\nfrom = 1\nto = 2\n")).unwrap_err();
        assert!(e.starts_with("sw.toml:6:") && e.contains("needs mode"), "{e}");
    }

    #[cfg(feature = "less")]
    #[test]
    fn ports_may_name_a_mode_of_their_own() {
        let src = "mode = \"less\"\ncontrollers = [\"tcp:127.0.0.1:6653\"]\n[less]\nroot = true\n\
                   [[port]]\nname = \"a\"\n[[port]]\nname = \"b\"\nmode = \"openflow\"\n\
                   [[port]]\nname = \"c\"\nmode = \"openflow\"\n[[port]]\nname = \"d\"\nmode = \"less\"\n";
        let s = from_str(src).unwrap();
        assert!(matches!(s.mode, ModeSetting::Less(ref c) if c.root), "{:?}", s.mode);
        assert_eq!(s.port_modes, vec![(ModeSetting::OpenFlow, vec![2, 3])], "d names the switch's own mode");
        // A mode no port or switch runs takes no controllers, and its section is refused.
        let e = from_str(&src.replace("mode = \"openflow\"", "mode = \"learning\"")).unwrap_err();
        assert!(e.starts_with("sw.toml:1:") && e.contains("takes no controllers"), "{e}");
        let e = from_str("[less]\nroot = true\n[[port]]\nname = \"a\"\nmode = \"learning\"\n").unwrap_err();
        assert!(e.starts_with("sw.toml:2:") && e.contains("needs mode"), "{e}");
        let s =
            from_str("[less]\nroot = true\n[[port]]\nname = \"a\"\nmode = \"less\"\n[[port]]\nname = \"b\"\n").unwrap();
        assert_eq!((s.mode.clone(), s.port_modes.len()), (ModeSetting::OpenFlow, 1), "{s:?}");
        // A port's mode is checked where it is named, and its settings against its own ports.
        let e = from_str("[[port]]\nname = \"a\"\n[[port]]\nname = \"b\"\nmode = \"bridge\"\n").unwrap_err();
        assert!(e.starts_with("sw.toml:5:") && e.contains("expected 'openflow'"), "{e}");
        let e = from_str(
            "[[port]]\nname = \"a\"\n[[port]]\nname = \"b\"\nmode = \"portmap\"\n[[portmap]]\nfrom = 2\nto = 1\n",
        )
        .unwrap_err();
        assert!(e.starts_with("sw.toml:8:") && e.contains("port 1 is not configured for mode portmap"), "{e}");
    }

    #[cfg(not(all(feature = "afdx", feature = "less", feature = "streams")))]
    #[test]
    fn a_build_without_a_mode_refuses_it_where_the_file_names_it() {
        let ports = "[[port]]\nname = \"a\"\n[[port]]\nname = \"b\"\n";
        let built = [
            ("afdx", cfg!(feature = "afdx")),
            ("less", cfg!(feature = "less")),
            ("streams", cfg!(feature = "streams")),
        ];
        let absent = built.into_iter().filter(|m| !m.1);
        for (mode, _) in absent {
            let e = from_str(&format!("{ports}mode = \"{mode}\"\n")).unwrap_err();
            assert!(e.starts_with("sw.toml:5:") && e.contains("built without it"), "{e}");
            let section = if mode == "streams" {
                "[[stream]]\nname = \"s\"\n".to_string()
            } else {
                format!("[{mode}]\nroot = true\n")
            };
            let e = from_str(&format!("{ports}{section}")).unwrap_err();
            assert!(e.starts_with("sw.toml:5:") && e.contains(&format!("cargo feature `{mode}`")), "{e}");
        }
    }

    #[test]
    fn dpid_forms() {
        assert_eq!(parse_dpid("0x1"), Ok(1));
        assert_eq!(parse_dpid("00:00:00:00:00:00:00:0a"), Ok(10));
        assert!(parse_dpid("xyz").is_err());
        assert!(parse_dpid("0x11112222333344445").is_err());
    }
}
