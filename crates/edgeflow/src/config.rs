//! The TOML configuration file and its merge with command-line flags. Every error names the line it
//! is about and the reason.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent::{FailMode, Target, TlsFiles};
use datapath::egress::{GateClock, Limit, PortEgress};
use datapath::schedule::{Cbs, GateEntry, Gates, Schedule, Shaper, MAX_FRAME_BITS, N_QUEUES};
use datapath::switch::Timing;
use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    pub dpid: Option<Spanned<String>>,
    pub fail_mode: Option<Spanned<String>>,
    pub tables: Option<Spanned<u32>>,
    pub local_port: Option<String>,
    pub probe_interval: Option<Spanned<u64>>,
    pub datapath: Option<Spanned<String>>,
    pub mode: Option<Spanned<String>>,
    pub packet_in_rate: Option<u32>,
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
    /// How the forwarding thread meets scheduled ports' deadlines: sleep, fifo or busy.
    pub egress_timing: Option<Spanned<String>>,
}

/// `[afdx]` (mode = "afdx"): the static virtual-link table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AfdxSection {
    /// The destination MAC's 32-bit constant field, as four hex octets ("03:00:00:00").
    pub mac_constant: Option<Spanned<String>>,
    #[serde(default)]
    pub vl: Vec<VlEntry>,
}

/// `[[afdx.vl]]`: one virtual link.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VlEntry {
    pub id: Spanned<u16>,
    pub in_port: Spanned<u32>,
    pub out_ports: Spanned<Vec<u32>>,
    pub bag_ms: Spanned<u32>,
    pub smin: Spanned<u16>,
    pub smax: Spanned<u16>,
    #[serde(default)]
    pub jitter_us: Option<Spanned<u64>>,
    pub priority: Spanned<String>,
    pub police: Option<Spanned<String>>,
    pub account: Option<Spanned<String>>,
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
    Afdx { vls: Vec<forwarding::afdx::VirtualLink>, mac_constant: u32 },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortEntry {
    pub name: Spanned<String>,
    pub number: Option<Spanned<u32>>,
    /// The rate the port is paced to (Mbit/s); schedulers and gates need it.
    pub rate_mbps: Option<Spanned<f64>>,
    /// VLAN priority 0-7 → egress queue, for frames no mode gave a queue (default: 802.1Q's table).
    pub pcp_map: Option<Spanned<Vec<u8>>>,
    #[serde(default, rename = "queue")]
    pub queues: Vec<QueueEntry>,
    pub gates: Option<GatesEntry>,
}

/// `[[port.queue]]`: one egress queue's scheduler and limit.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueEntry {
    pub id: Spanned<u32>,
    /// strict (default), drr or cbs.
    pub scheduler: Option<Spanned<String>>,
    /// DRR: maximum-size frames (1514 bytes) per round, unless `quantum_bytes` is given.
    pub weight: Option<Spanned<u32>>,
    pub quantum_bytes: Option<Spanned<u32>>,
    /// CBS: the reserved rate; the credit bounds are derived as 802.1Q does unless given.
    pub idleslope_kbps: Option<Spanned<u64>>,
    pub hicredit_bits: Option<Spanned<i64>>,
    pub locredit_bits: Option<Spanned<i64>>,
    pub limit_frames: Option<Spanned<u64>>,
    pub limit_bytes: Option<Spanned<u64>>,
}

/// `[port.gates]`: the time-aware shaper's gate control list.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatesEntry {
    /// When the first cycle starts, in ns on `clock` (tai or realtime); default 0.
    #[serde(default)]
    pub base_time_ns: u64,
    pub clock: Option<Spanned<String>>,
    pub cycle_ns: Spanned<u64>,
    pub entries: Vec<Spanned<GateListEntry>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateListEntry {
    pub duration_ns: u64,
    /// The queues whose gates are open.
    pub open: Vec<u8>,
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
    pub packet_in_rate: u32,
    pub table_limits: Vec<(u8, u32, bool)>,
    pub fastpath: Option<datapath::fastpath::Mode>,
    pub mode: ModeSetting,
    /// Per port number: pacing, schedulers, gates and queue limits.
    pub egress: Vec<(u32, PortEgress)>,
    pub timing: Timing,
}

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
    pub datapath: Option<String>,
    pub mode: Option<String>,
    /// `FROM:TO` port-number pairs for the port-map mode.
    pub portmap: Vec<String>,
    pub packet_in_rate: Option<u32>,
    pub private_key: Option<PathBuf>,
    pub certificate: Option<PathBuf>,
    pub ca_cert: Option<PathBuf>,
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

fn parse_datapath(s: &str) -> Result<Option<datapath::fastpath::Mode>, String> {
    match s {
        "user" => Ok(None),
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

/// Parses a config file's text; a syntax or type error names its line.
fn parse_file(src: &str, path: &Path) -> Result<File, String> {
    toml::from_str(src).map_err(|e| {
        let line = e.span().map(|s| line_of(src, s.start)).unwrap_or(0);
        format!("{}:{line}: {}", path.display(), e.message())
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
    let dpid = match (&flags.dpid, &file.dpid) {
        (Some(d), _) => parse_dpid(d).map_err(|e| format!("--dpid: {e}"))?,
        (None, Some(d)) => parse_dpid(d.get_ref()).map_err(|e| cx.at(d, e))?,
        (None, None) => default_dpid(&ports),
    };
    let probe = flags.probe_interval.or(file.probe_interval.as_ref().map(|p| *p.get_ref())).unwrap_or(5);
    if probe == 0 {
        return Err("probe interval must be at least 1 second".into());
    }
    let tls = match (&flags.private_key, &flags.certificate, &flags.ca_cert, &file.tls) {
        (Some(k), Some(c), Some(ca), _) => {
            Some(TlsFiles { private_key: k.clone(), certificate: c.clone(), ca_cert: ca.clone() })
        }
        (None, None, None, Some(t)) => Some(TlsFiles {
            private_key: t.private_key.clone(),
            certificate: t.certificate.clone(),
            ca_cert: t.ca_cert.clone(),
        }),
        (None, None, None, None) => None,
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
    let mode = match mode_name.as_str() {
        "openflow" => ModeSetting::OpenFlow,
        "learning" => ModeSetting::Learning,
        "portmap" => ModeSetting::PortMap(portmap(&cx, file, flags, &ports)?),
        "afdx" => afdx(&cx, file, &ports)?
            .ok_or_else(|| at_mode("mode 'afdx' needs [[afdx.vl]] entries in the config file".into()))?,
        other => return Err(at_mode(format!("mode '{other}': expected 'openflow', 'learning', 'portmap' or 'afdx'"))),
    };
    if mode != ModeSetting::OpenFlow && !controllers.is_empty() {
        return Err(at_mode(format!("mode '{mode_name}' takes no controllers (only mode = \"openflow\" does)")));
    }
    if !matches!(mode, ModeSetting::PortMap(_)) {
        if let Some(e) = file.portmap.first() {
            return Err(cx.at(&e.from, "[[portmap]] needs mode = \"portmap\""));
        }
        if !flags.portmap.is_empty() {
            return Err("--portmap needs --mode portmap".into());
        }
    }
    if !matches!(mode, ModeSetting::Afdx { .. }) {
        if let Some(a) = &file.afdx {
            let reason = "[afdx] needs mode = \"afdx\"";
            return Err(match (a.vl.first(), &a.mac_constant) {
                (Some(vl), _) => cx.at(&vl.id, reason),
                (None, Some(c)) => cx.at(c, reason),
                (None, None) => format!("{path}: {reason}"),
            });
        }
    }
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
        packet_in_rate: flags.packet_in_rate.or(file.packet_in_rate).unwrap_or(DEFAULT_PACKET_IN_RATE),
        table_limits,
        fastpath,
        mode,
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
    })
}

/// A port's `rate_mbps`, `[[port.queue]]` and `[port.gates]`, checked: None if it has none.
fn port_egress(cx: &Ctx<'_>, p: &PortEntry) -> Result<Option<PortEgress>, String> {
    if p.rate_mbps.is_none() && p.queues.is_empty() && p.gates.is_none() && p.pcp_map.is_none() {
        return Ok(None);
    }
    let pcp_map = match &p.pcp_map {
        None => None,
        Some(m) if m.get_ref().len() != 8 || m.get_ref().iter().any(|&q| q as usize >= N_QUEUES) => {
            return Err(cx.at(m, "pcp_map needs 8 queue numbers (0-7), one per priority 0-7"));
        }
        Some(m) => Some(std::array::from_fn(|i| m.get_ref()[i])),
    };
    let rate_bps = match &p.rate_mbps {
        Some(r) if !(r.get_ref().is_finite() && *r.get_ref() > 0.0) => {
            return Err(cx.at(r, "rate_mbps must be above 0"));
        }
        Some(r) => Some((r.get_ref() * 1e6) as u64),
        None => None,
    };
    let mut shapers: [Shaper; N_QUEUES] = std::array::from_fn(|_| Shaper::Strict);
    let mut limits = Vec::new();
    let mut seen = [false; N_QUEUES];
    for q in &p.queues {
        let id = *q.id.get_ref() as usize;
        if id >= N_QUEUES {
            return Err(cx.at(&q.id, format!("queue {id} does not exist (0-7)")));
        }
        if std::mem::replace(&mut seen[id], true) {
            return Err(cx.at(&q.id, format!("queue {id} is configured twice")));
        }
        let kind = q.scheduler.as_ref().map_or("strict", |s| s.get_ref().as_str());
        let needs_rate = |what: &str| {
            cx.at(
                &q.id,
                format!("queue {id}: {what} needs the port's rate_mbps (without a bottleneck no scheduler matters)"),
            )
        };
        shapers[id] = match kind {
            "strict" => Shaper::Strict,
            "drr" => {
                if rate_bps.is_none() {
                    return Err(needs_rate("drr"));
                }
                let quantum = match (&q.quantum_bytes, &q.weight) {
                    (Some(b), _) if *b.get_ref() == 0 => return Err(cx.at(b, "quantum_bytes must be above 0")),
                    (Some(b), _) => *b.get_ref(),
                    (None, Some(w)) if *w.get_ref() == 0 => return Err(cx.at(w, "weight must be above 0")),
                    (None, Some(w)) => w.get_ref().saturating_mul(1514),
                    (None, None) => 1514,
                };
                Shaper::Drr { quantum }
            }
            "cbs" => {
                let Some(rate) = rate_bps else { return Err(needs_rate("cbs")) };
                let Some(slope) = &q.idleslope_kbps else {
                    return Err(cx.at(&q.id, format!("queue {id}: cbs needs idleslope_kbps")));
                };
                let idle = slope.get_ref() * 1000;
                if idle == 0 || idle >= rate {
                    return Err(
                        cx.at(slope, format!("queue {id}: idleslope_kbps must be above 0 and below the port's rate"))
                    );
                }
                let mut c = Cbs::derived(idle, rate, MAX_FRAME_BITS);
                if let Some(h) = &q.hicredit_bits {
                    if *h.get_ref() <= 0 {
                        return Err(cx.at(h, "hicredit_bits must be above 0"));
                    }
                    c.hi_credit_bits = *h.get_ref();
                }
                if let Some(l) = &q.locredit_bits {
                    if *l.get_ref() >= 0 {
                        return Err(cx.at(l, "locredit_bits must be below 0"));
                    }
                    c.lo_credit_bits = *l.get_ref();
                }
                Shaper::Cbs(c)
            }
            other => {
                let at = q.scheduler.as_ref().unwrap();
                return Err(cx.at(at, format!("scheduler '{other}': expected strict, drr or cbs")));
            }
        };
        if kind != "cbs" {
            for (f, name) in [(&q.hicredit_bits, "hicredit_bits"), (&q.locredit_bits, "locredit_bits")] {
                if let Some(f) = f {
                    return Err(cx.at(f, format!("queue {id}: {name} applies to scheduler 'cbs' only")));
                }
            }
            if let Some(f) = &q.idleslope_kbps {
                return Err(cx.at(f, format!("queue {id}: idleslope_kbps applies to scheduler 'cbs' only")));
            }
        }
        if kind != "drr" {
            if let Some(f) = &q.weight {
                return Err(cx.at(f, format!("queue {id}: weight applies to scheduler 'drr' only")));
            }
            if let Some(f) = &q.quantum_bytes {
                return Err(cx.at(f, format!("queue {id}: quantum_bytes applies to scheduler 'drr' only")));
            }
        }
        match (&q.limit_frames, &q.limit_bytes) {
            (Some(_), Some(b)) => {
                return Err(cx.at(b, format!("queue {id}: give limit_frames or limit_bytes, not both")))
            }
            (Some(f), None) if *f.get_ref() == 0 => return Err(cx.at(f, "limit_frames must be above 0")),
            (Some(f), None) => limits.push((id, Limit::Frames(*f.get_ref() as usize))),
            (None, Some(b)) if *b.get_ref() < 1514 => {
                return Err(cx.at(b, "limit_bytes must hold one frame (1514 or more)"))
            }
            (None, Some(b)) => limits.push((id, Limit::Bytes(*b.get_ref() as usize))),
            (None, None) => {}
        }
    }
    let mut gate_clock = GateClock::Tai;
    let gates = match &p.gates {
        None => None,
        Some(g) => {
            if rate_bps.is_none() {
                return Err(cx.at(&g.cycle_ns, "gates need the port's rate_mbps (a frame's length in time)"));
            }
            gate_clock = match g.clock.as_ref().map(|c| c.get_ref().as_str()) {
                None | Some("tai") => GateClock::Tai,
                Some("realtime") => GateClock::Realtime,
                Some(other) => {
                    return Err(cx.at(g.clock.as_ref().unwrap(), format!("clock '{other}': expected tai or realtime")))
                }
            };
            let mut entries = Vec::new();
            for e in &g.entries {
                let mut open = 0u8;
                for &q in &e.get_ref().open {
                    if q as usize >= N_QUEUES {
                        return Err(cx.at(e, format!("gate entry: queue {q} does not exist (0-7)")));
                    }
                    open |= 1 << q;
                }
                if e.get_ref().duration_ns == 0 {
                    return Err(cx.at(e, "gate entry: duration_ns must be above 0"));
                }
                entries.push(GateEntry { duration_ns: e.get_ref().duration_ns, open });
            }
            let sum: u64 = entries.iter().map(|e| e.duration_ns).sum();
            if entries.is_empty() {
                return Err(cx.at(&g.cycle_ns, "gates need at least one entry"));
            }
            if sum > *g.cycle_ns.get_ref() {
                return Err(cx.at(
                    &g.cycle_ns,
                    format!("cycle_ns {} is shorter than its entries' sum {sum}", g.cycle_ns.get_ref()),
                ));
            }
            Some(Gates { base_ns: g.base_time_ns, cycle_ns: *g.cycle_ns.get_ref(), entries })
        }
    };
    let schedule = match rate_bps {
        Some(rate_bps) => {
            let s = Schedule { rate_bps, shapers, gates };
            s.check().map_err(|e| cx.at(p.rate_mbps.as_ref().unwrap(), format!("port '{}': {e}", p.name.get_ref())))?;
            Some(s)
        }
        None => None,
    };
    Ok(Some(PortEgress { schedule, gate_clock, limits, pcp_map }))
}

/// The port map's pairs, from the file and `--portmap FROM:TO` flags: both ports configured, each
/// input mapped once.
fn portmap(cx: &Ctx<'_>, file: &File, flags: &Flags, ports: &[(u32, String)]) -> Result<Vec<(u32, u32)>, String> {
    let known = |n: u32| ports.iter().any(|(no, _)| *no == n);
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    for e in &file.portmap {
        for end in [&e.from, &e.to] {
            if !known(*end.get_ref()) {
                return Err(cx.at(end, format!("port {} is not configured", end.get_ref())));
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
        return Err("mode 'portmap' needs [[portmap]] entries or --portmap FROM:TO".into());
    }
    Ok(pairs)
}

/// The AFDX virtual-link table, or `None` when the file has none. The mode checks the table
/// itself; here its refusals get the line of the field they are about, and ports are checked
/// against the switch's.
fn afdx(cx: &Ctx<'_>, file: &File, ports: &[(u32, String)]) -> Result<Option<ModeSetting>, String> {
    afdx_table(cx, file, Some(ports))
}

/// The AFDX table of a config file alone (for `edgeflow afdx compile`): checked like the running
/// switch's, but against the file's own `[[port]]` entries only if it has any.
pub fn load_afdx(path: &Path) -> Result<(Vec<forwarding::afdx::VirtualLink>, u32), String> {
    let (file, src) = load_file(path)?;
    let display = path.display().to_string();
    let cx = Ctx { path: &display, src: &src };
    let ports: Vec<(u32, String)> = file
        .ports
        .iter()
        .enumerate()
        .map(|(i, p)| (p.number.as_ref().map_or(i as u32 + 1, |n| *n.get_ref()), p.name.get_ref().clone()))
        .collect();
    match afdx_table(&cx, &file, (!ports.is_empty()).then_some(&ports[..]))? {
        Some(ModeSetting::Afdx { vls, mac_constant }) => Ok((vls, mac_constant)),
        _ => Err(format!("{display}: no [[afdx.vl]] entries")),
    }
}

fn afdx_table(cx: &Ctx<'_>, file: &File, ports: Option<&[(u32, String)]>) -> Result<Option<ModeSetting>, String> {
    use forwarding::afdx::{self, Police, Priority, VirtualLink};
    let Some(section) = file.afdx.as_ref().filter(|a| !a.vl.is_empty()) else { return Ok(None) };
    let mac_constant = match &section.mac_constant {
        None => afdx::DEFAULT_MAC_CONSTANT,
        Some(c) => parse_mac_constant(c.get_ref()).map_err(|e| cx.at(c, e))?,
    };
    let known = |n: u32| ports.is_none_or(|ports| ports.iter().any(|(no, _)| *no == n));
    let mut vls = Vec::new();
    for e in &section.vl {
        if !known(*e.in_port.get_ref()) {
            return Err(cx.at(&e.in_port, format!("port {} is not configured", e.in_port.get_ref())));
        }
        if let Some(p) = e.out_ports.get_ref().iter().find(|&&p| !known(p)) {
            return Err(cx.at(&e.out_ports, format!("port {p} is not configured")));
        }
        let priority = match e.priority.get_ref().as_str() {
            "high" => Priority::High,
            "low" => Priority::Low,
            other => return Err(cx.at(&e.priority, format!("priority '{other}': expected 'high' or 'low'"))),
        };
        let police = match e.police.as_ref().map(|p| p.get_ref().as_str()) {
            None | Some("frame") => Police::Frame,
            Some("byte") => Police::Byte,
            Some(other) => {
                return Err(cx.at(e.police.as_ref().unwrap(), format!("police '{other}': expected 'frame' or 'byte'")))
            }
        };
        vls.push(VirtualLink {
            id: *e.id.get_ref(),
            in_port: *e.in_port.get_ref(),
            out_ports: e.out_ports.get_ref().clone(),
            bag_ns: *e.bag_ms.get_ref() as u64 * 1_000_000,
            smin: *e.smin.get_ref(),
            smax: *e.smax.get_ref(),
            jitter_ns: e.jitter_us.as_ref().map_or(0, |j| j.get_ref().saturating_mul(1000)),
            priority,
            police,
            account: e.account.as_ref().map(|a| a.get_ref().clone()),
        });
    }
    afdx::check(&vls).map_err(|err| {
        let e = &section.vl[err.index];
        let line = |s: std::ops::Range<usize>| format!("{}:{}: {}", cx.path, line_of(cx.src, s.start), err.reason);
        line(match err.field {
            "bag_ms" => e.bag_ms.span(),
            "smin" => e.smin.span(),
            "smax" => e.smax.span(),
            "jitter_us" => e.jitter_us.as_ref().map_or(e.id.span(), |j| j.span()),
            "out_ports" => e.out_ports.span(),
            "account" => e.account.as_ref().map_or(e.id.span(), |a| a.span()),
            _ => e.id.span(),
        })
    })?;
    Ok(Some(ModeSetting::Afdx { vls, mac_constant }))
}

/// "03:00:00:00": the four octets of the destination MAC's constant field.
fn parse_mac_constant(s: &str) -> Result<u32, String> {
    let octets: Vec<&str> = s.split(':').collect();
    let bad = || format!("mac_constant '{s}': expected four hex octets such as \"03:00:00:00\"");
    if octets.len() != 4 {
        return Err(bad());
    }
    let mut v = 0u32;
    for o in octets {
        v = v << 8 | u8::from_str_radix(o, 16).map_err(|_| bad())? as u32;
    }
    if v >> 24 & 1 == 0 {
        return Err(format!("mac_constant '{s}': a VL address is a group address (the first octet's lowest bit set)"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_str(src: &str) -> Result<Settings, String> {
        let file = parse_file(src, Path::new("sw.toml"))?;
        settings(Some((&file, src, Path::new("sw.toml"))), &Flags::default())
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
        let e = from_str("[[port]]\nname = \"a\"\ntables = 3\n").unwrap_err();
        assert!(e.starts_with("sw.toml:3:") && e.contains("unknown field"), "{e}");
    }

    #[test]
    fn port_schedules_and_their_errors_by_line() {
        let src = r#"egress_timing = "fifo"
[[port]]
name = "a"
rate_mbps = 100
pcp_map = [0, 0, 1, 1, 2, 2, 6, 7]
[[port.queue]]
id = 7
scheduler = "cbs"
idleslope_kbps = 20000
[[port.queue]]
id = 2
scheduler = "drr"
weight = 3
limit_bytes = 30000
[[port.queue]]
id = 1
scheduler = "drr"
quantum_bytes = 1000
[port.gates]
clock = "realtime"
cycle_ns = 1000000
entries = [{ duration_ns = 200000, open = [7] }, { duration_ns = 700000, open = [0, 1, 2] }]
[[port]]
name = "b"
"#;
        let s = from_str(src).unwrap();
        assert_eq!(s.timing, Timing::Fifo);
        assert_eq!(s.egress.len(), 1, "port b has no schedule");
        let (no, e) = &s.egress[0];
        let sched = e.schedule.as_ref().unwrap();
        assert_eq!((*no, sched.rate_bps, e.gate_clock), (1, 100_000_000, GateClock::Realtime));
        assert_eq!(sched.shapers[7], Shaper::Cbs(Cbs::derived(20_000_000, 100_000_000, MAX_FRAME_BITS)));
        assert_eq!(
            (&sched.shapers[2], &sched.shapers[1]),
            (&Shaper::Drr { quantum: 3 * 1514 }, &Shaper::Drr { quantum: 1000 })
        );
        assert_eq!(e.limits, vec![(2, Limit::Bytes(30000))]);
        assert_eq!(e.pcp_map, Some([0, 0, 1, 1, 2, 2, 6, 7]));
        assert_eq!(sched.gates.as_ref().unwrap().entries[1], GateEntry { duration_ns: 700_000, open: 0b111 });

        let port = "[[port]]\nname = \"a\"\nrate_mbps = 100\n";
        let bad = |extra: &str, line: usize, reason: &str| {
            let e = from_str(&format!("{port}{extra}")).unwrap_err();
            assert!(e.starts_with(&format!("sw.toml:{line}:")) && e.contains(reason), "{extra}: {e}");
        };
        bad("[[port.queue]]\nid = 3\nscheduler = \"cbs\"\nidleslope_kbps = 150000\n", 7, "below the port's rate");
        bad("[[port.queue]]\nid = 8\n", 5, "does not exist");
        bad("pcp_map = [0, 1, 2]\n", 4, "8 queue numbers");
        bad("[[port.queue]]\nid = 3\nscheduler = \"wfq\"\n", 6, "expected strict, drr or cbs");
        bad("[[port.queue]]\nid = 3\nweight = 2\n", 6, "drr' only");
        bad("[[port.queue]]\nid = 3\nscheduler = \"cbs\"\nidleslope_kbps = 60000\n[[port.queue]]\nid = 4\nscheduler = \"cbs\"\nidleslope_kbps = 50000\n", 3, "reserve");
        bad("[port.gates]\ncycle_ns = 1000\nentries = [{ duration_ns = 800, open = [1] }, { duration_ns = 300, open = [2] }]\n", 5, "shorter than its entries' sum");
        let e = from_str("[[port]]\nname = \"a\"\n[[port.queue]]\nid = 1\nscheduler = \"cbs\"\nidleslope_kbps = 1\n")
            .unwrap_err();
        assert!(e.starts_with("sw.toml:4:") && e.contains("rate_mbps"), "{e}");
        let e = from_str("egress_timing = \"soon\"\n[[port]]\nname = \"a\"\n").unwrap_err();
        assert!(e.starts_with("sw.toml:1:") && e.contains("sleep, fifo or busy"), "{e}");
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

    #[test]
    fn afdx_vl_table_and_its_errors_by_line() {
        use forwarding::afdx::{Police, Priority};
        let head = "mode = \"afdx\"\n[[port]]\nname = \"a\"\n[[port]]\nname = \"b\"\n[[port]]\nname = \"c\"\n";
        // Line 8 on: one VL, each field on its own line (id is line 9).
        let vl = |extra: &str| {
            format!(
                "{head}[[afdx.vl]]\nid = 10\nin_port = 1\nout_ports = [2, 3]\nbag_ms = 4\nsmin = 64\nsmax = 512\n\
                 priority = \"high\"\n{extra}"
            )
        };
        let s = from_str(&vl("jitter_us = 500\npolice = \"byte\"\n")).unwrap();
        let ModeSetting::Afdx { vls, mac_constant } = s.mode else { panic!("{:?}", s.mode) };
        assert_eq!(mac_constant, 0x0300_0000);
        assert_eq!(vls.len(), 1);
        let v = &vls[0];
        assert_eq!((v.id, v.in_port, v.out_ports.clone(), v.bag_ns), (10, 1, vec![2, 3], 4_000_000));
        assert_eq!(
            (v.smin, v.smax, v.jitter_ns, v.priority, v.police),
            (64, 512, 500_000, Priority::High, Police::Byte)
        );

        let refused = |src: &str, line: usize, words: &str| {
            let e = from_str(src).unwrap_err();
            assert!(e.starts_with(&format!("sw.toml:{line}:")) && e.contains(words), "{e}");
        };
        refused(&vl("").replace("bag_ms = 4", "bag_ms = 3"), 12, "one of 1, 2, 4");
        refused(&vl("").replace("smin = 64", "smin = 600"), 13, "above smax");
        refused(&vl("").replace("smax = 512", "smax = 2000"), 14, "1518");
        refused(&vl("").replace("in_port = 1", "in_port = 9"), 10, "port 9 is not configured");
        refused(&vl("").replace("[2, 3]", "[2, 7]"), 11, "port 7 is not configured");
        refused(&vl("").replace("[2, 3]", "[1, 3]"), 11, "input port");
        refused(&vl("").replace("\"high\"", "\"urgent\""), 15, "'high' or 'low'");
        refused(&vl("police = \"bits\"\n"), 16, "'frame' or 'byte'");
        refused(&vl("colour = 1\n"), 16, "unknown field");
        refused(&vl("jitter_us = 5000000\n"), 16, "at most");
        refused(&vl("").replace("bag_ms = 4", "bag_ms = 0.5"), 12, "");
        let two = vl("account = \"es\"\n") + &vl("account = \"es\"\n")[head.len()..].replace("id = 10", "id = 11");
        assert!(from_str(&two).is_ok());
        refused(&two.replace("id = 11", "id = 10"), 18, "already defined");
        let i = two.rfind("bag_ms = 4").unwrap();
        let other_bag = format!("{}bag_ms = 8{}", &two[..i], &two[i + "bag_ms = 4".len()..]);
        refused(&other_bag, 25, "shared with virtual link #1");
        let one = &vl("")[head.len()..];
        refused(&format!("{head}[afdx]\nmac_constant = \"02:00:00:00\"\n{one}"), 9, "group address");
        refused(&format!("{head}[afdx]\nmac_constant = \"03:00:00\"\n{one}"), 9, "four hex octets");
        let s = from_str(&format!("{head}[afdx]\nmac_constant = \"0f:ab:00:01\"\n{one}")).unwrap();
        assert!(matches!(s.mode, ModeSetting::Afdx { mac_constant: 0x0fab_0001, .. }));
        refused(&format!("{head}[afdx]\nmac_constant = \"02:00:00:00\"\n"), 1, "needs [[afdx.vl]]");
        refused(&vl("").replace("\"afdx\"", "\"learning\""), 9, "needs mode");
    }

    #[test]
    fn a_vl_table_alone_loads_for_compiling() {
        let dir = std::env::temp_dir().join(format!("ef-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let vl =
            "[[afdx.vl]]\nid = 7\nin_port = 1\nout_ports = [9]\nbag_ms = 8\nsmin = 64\nsmax = 64\npriority = \"low\"\n";
        let bare = dir.join("bare.toml");
        std::fs::write(&bare, vl).unwrap();
        let (vls, constant) = load_afdx(&bare).unwrap();
        assert_eq!((vls.len(), vls[0].out_ports.clone(), constant), (1, vec![9], 0x0300_0000));
        // With [[port]] entries, the ports are checked as for a running switch.
        let with_ports = dir.join("ports.toml");
        std::fs::write(&with_ports, format!("[[port]]\nname = \"a\"\n{vl}")).unwrap();
        let e = load_afdx(&with_ports).unwrap_err();
        assert!(e.ends_with(":6: port 9 is not configured"), "{e}");
        let none = dir.join("none.toml");
        std::fs::write(&none, "mode = \"afdx\"\n").unwrap();
        assert!(load_afdx(&none).unwrap_err().contains("no [[afdx.vl]] entries"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dpid_forms() {
        assert_eq!(parse_dpid("0x1"), Ok(1));
        assert_eq!(parse_dpid("00:00:00:00:00:00:00:0a"), Ok(10));
        assert!(parse_dpid("xyz").is_err());
        assert!(parse_dpid("0x11112222333344445").is_err());
    }
}
