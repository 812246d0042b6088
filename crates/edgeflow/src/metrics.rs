//! ~750 lines, one concern: `--metrics [ADDR:]PORT`, the switch's report (what
//! `edgeflow stats --json` prints) in Prometheus's text exposition format, on `GET /metrics`.
//!
//! One source for both: every value here is a field of the report, renamed to Prometheus's
//! conventions (an `edgeflow_` prefix, `_total` on counters, bytes and seconds as base units,
//! ports, queues, tables, reasons and kinds as labels rather than names). Every family is declared
//! in `families.rs`, and only there; docs/metrics.md lists them.

mod families;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use datapath::{Command, SwitchHandle};
use edgeflow::http::{self, Asked};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub use families::markdown_table;
use families::*;

/// The samples of a scrape, gathered by family and written in the registry's order, so that
/// each family's `# HELP`/`# TYPE` goes out once with all its samples after it, whatever order
/// the report gives them in.
#[derive(Default)]
struct Exposition {
    families: HashMap<&'static str, Samples>,
}

/// A family's samples: each label set once, in the order first given.
#[derive(Default)]
struct Samples {
    series: Vec<(String, f64)>,
    by_labels: HashMap<String, usize>,
}

/// A label value, escaped as the format wants (backslash, quote, newline).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

impl Exposition {
    /// One sample of `family`, with a value for each of its labels, in its order. An empty
    /// value leaves the label out (Prometheus reads an empty label as an absent one). A label
    /// set given again adds to the first: modes that share a switch (`[[port]] mode`) each report
    /// their groups, and two parts of one kind (learning beside OpenFlow: two megaflow caches)
    /// are the switch's sum, where two samples of one series would be an invalid exposition.
    fn sample(&mut self, family: &'static Family, values: &[&str], value: f64) {
        assert_eq!(values.len(), family.labels().len(), "{}: label values {values:?}", family.name());
        let inner: Vec<String> = family
            .labels()
            .iter()
            .zip(values)
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
            .collect();
        let labels = if inner.is_empty() { String::new() } else { format!("{{{}}}", inner.join(",")) };
        let samples = self.families.entry(family.name()).or_default();
        match samples.by_labels.get(&labels) {
            Some(&i) => samples.series[i].1 += value,
            None => {
                samples.by_labels.insert(labels.clone(), samples.series.len());
                samples.series.push((labels, value));
            }
        }
    }

    /// A sample from a report value: a number, or a boolean as 1 or 0; nothing for a null.
    fn value(&mut self, family: &'static Family, values: &[&str], v: &Value) {
        let x = match v {
            Value::Bool(b) => Some(*b as u8 as f64),
            other => other.as_f64(),
        };
        if let Some(x) = x {
            self.sample(family, values, x);
        }
    }

    fn finish(mut self) -> String {
        let mut out = String::new();
        for family in families::ALL {
            if let Some(samples) = self.families.remove(family.name()) {
                let (name, kind) = (family.name(), family.kind().name());
                let _ = writeln!(out, "# HELP {name} {}\n# TYPE {name} {kind}", family.help());
                for (labels, value) in samples.series {
                    let _ = writeln!(out, "{name}{labels} {value}");
                }
            }
        }
        out
    }
}

/// Where a counter of a mode's group goes (`mode_counters[]` of the report: the group's name,
/// the counter's key): its family and label values. None for a key not mapped here, which is
/// not exported (`every_counter_a_mode_reports_has_a_family` holds every mode to this).
fn mode_series(group: &str, key: &str) -> Option<(&'static Family, Vec<String>)> {
    let (kind, id) = group.split_once(' ').unwrap_or((group, ""));
    let to = |family: &'static Family, values: &[&str]| Some((family, values.iter().map(|v| v.to_string()).collect()));
    match (group, key) {
        ("megaflow cache", "entries") => to(&MEGAFLOW_ENTRIES, &[]),
        ("megaflow cache", "retired" | "expired" | "evicted") => to(&MEGAFLOW_REMOVED, &[key]),
        ("megaflow cache", "flushes") => to(&MEGAFLOW_FLUSHES, &[]),
        ("mac table", "addresses") => to(&MAC_ADDRESSES, &[]),
        ("mac table", _) => to(&MAC_EVICTED, &[key.strip_prefix("evicted_")?]),
        ("partitions", "parts") => to(&PARTITIONS, &[]),
        ("partitions", "fenced") => to(&PARTITION_FENCED, &[]),
        ("switch", "bad_destination" | "unknown_vl") => to(&AFDX_DROPPED, &["", key]),
        ("switch", "not_stream") => to(&TSN_DROPPED, &["", key]),
        ("labels", "shifted" | "popped" | "delivered" | "pushed" | "local") => to(&LESS_FORWARDED, &[key]),
        ("labels", "rerouted_local" | "rerouted_neighbour") => to(&LESS_REROUTED, &[key.strip_prefix("rerouted_")?]),
        ("labels", "backtracked") => to(&LESS_REROUTED, &[key]),
        ("labels", "hellos_sent") => to(&LESS_HELLOS_SENT, &[]),
        ("labels", "protocol_in") => to(&LESS_PROTOCOL_RECEIVED, &[]),
        ("labels", "protocol_bad") => to(&LESS_PROTOCOL_REFUSED, &["bad"]),
        ("labels", "protocol_on_edge_port") => to(&LESS_PROTOCOL_REFUSED, &["edge_port"]),
        ("labels", "hosts_over_port_limit") => to(&LESS_OVER_LIMIT, &["hosts_per_port"]),
        ("labels", "host_queries_over_limit") => to(&LESS_OVER_LIMIT, &["host_queries"]),
        ("labels", "query_origins_over_limit") => to(&LESS_OVER_LIMIT, &["query_origins"]),
        ("labels", "arp_replies") => to(&LESS_NEIGHBOUR_REPLIES, &["arp"]),
        ("labels", "nd_replies") => to(&LESS_NEIGHBOUR_REPLIES, &["nd"]),
        ("labels", _) if LESS_DROPS.contains(&key) => to(&LESS_DROPPED, &[key]),
        ("fabric", "addresses") => to(&LESS_ADDRESSES, &[]),
        ("fabric", "root") => to(&LESS_ROOT, &[]),
        ("fabric", "neighbours") => to(&LESS_NEIGHBOURS, &[]),
        ("fabric", "neighbours_silenced") => to(&LESS_NEIGHBOURS_SILENCED, &[]),
        ("fabric", "hosts") => to(&LESS_HOSTS, &[]),
        ("fabric", "announcement_frames") => to(&LESS_ANNOUNCEMENT_FRAMES, &[]),
        ("p4", "frames") => to(&P4_FRAMES, &[]),
        ("p4", "copies") => to(&P4_COPIES, &[]),
        ("p4", "kernel_frames") => to(&P4_KERNEL_FRAMES, &[]),
        ("p4", "packet_ins") => to(&P4_PACKET_INS, &[]),
        ("p4", "packet_outs") => to(&P4_PACKET_OUTS, &[]),
        ("p4", "digests") => to(&P4_DIGESTS, &[]),
        ("p4", "parser_rejected" | "program_dropped" | "no_egress_port" | "unsupported") => to(&P4_DROPPED, &[key]),
        _ if id.is_empty() => None,
        _ => match (kind, key) {
            ("meter", "packets_in") => to(&METER_PACKETS, &[id]),
            ("meter", "bytes_in") => to(&METER_BYTES, &[id]),
            ("meter", "band_packets") => to(&METER_BAND_PACKETS, &[id]),
            ("meter", "band_bytes") => to(&METER_BAND_BYTES, &[id]),
            ("group", "packets") => to(&GROUP_PACKETS, &[id]),
            ("group", "bytes") => to(&GROUP_BYTES, &[id]),
            ("vl", "frames_in") => to(&AFDX_VL_RECEIVED_FRAMES, &[id]),
            ("vl", "bytes_in") => to(&AFDX_VL_RECEIVED_BYTES, &[id]),
            ("vl", "frames_out") => to(&AFDX_VL_SENT_FRAMES, &[id]),
            ("vl", _) if AFDX_VL_DROPS.contains(&key) => to(&AFDX_DROPPED, &[id, key]),
            ("stream", "received") => to(&TSN_RECEIVED, &[id]),
            ("stream", "wrong_port" | "sdu_too_large" | "gate_closed") => to(&TSN_DROPPED, &[id, key]),
            ("stream", "green" | "yellow" | "red") => to(&TSN_METERED, &[id, key]),
            ("stream", "generated") => to(&TSN_GENERATED, &[id]),
            ("stream", "passed") => to(&TSN_RECOVERY_PASSED, &[id]),
            ("stream", "discarded") => to(&TSN_RECOVERY_DISCARDED, &[id]),
            ("stream", "out_of_order") => to(&TSN_RECOVERY_OUT_OF_ORDER, &[id]),
            ("stream", "rogue") => to(&TSN_RECOVERY_ROGUE, &[id]),
            ("stream", "lost") => to(&TSN_RECOVERY_LOST, &[id]),
            ("stream", "resets") => to(&TSN_RECOVERY_RESETS, &[id]),
            ("stream", "tagless") => to(&TSN_RECOVERY_TAGLESS, &[id]),
            _ => None,
        },
    }
}

/// A virtual link's drop reasons (`forwarding::afdx::VlDrop`'s names).
const AFDX_VL_DROPS: &[&str] =
    &["bad_source", "wrong_port", "undersize", "oversize", "policed", "wrong_network", "bad_ethertype", "bad_ip"];

/// Why the LESS mode drops a frame: a malformed label stack (`packet::less::StackError`'s
/// names), or no way on.
const LESS_DROPS: &[&str] = &[
    "truncated",
    "too_many_labels",
    "port_zero",
    "bad_ttl",
    "not_ip",
    "unknown_port",
    "no_route",
    "budget_spent",
    "no_host",
    "multicast",
    "not_less",
];

/// Where a figure of the kernel fast path's `labels` (LESS in the kernel) or `links` (AFDX in
/// the kernel) goes.
fn fastpath_series(section: &str, key: &str) -> Option<(&'static Family, Vec<String>)> {
    let to = |family: &'static Family, values: &[&str]| Some((family, values.iter().map(|v| v.to_string()).collect()));
    match (section, key) {
        ("labels", "ports_marked_down") => to(&FASTPATH_PORTS_MARKED_DOWN, &[]),
        ("labels", "shifted" | "popped" | "delivered" | "pushed" | "rerouted" | "budget_spent") => {
            to(&FASTPATH_LESS_FRAMES, &[key])
        }
        ("links", "held") => to(&FASTPATH_AFDX_LINKS, &[]),
        ("links", "kept_for_priority") => to(&FASTPATH_AFDX_LINKS_KEPT, &[]),
        ("links", "decided") => to(&FASTPATH_AFDX_FRAMES, &[]),
        ("links", "up") => to(&FASTPATH_AFDX_SENT_UP, &[]),
        ("p4", "sent_up_no_kernel_port") => to(&FASTPATH_P4_SENT_UP, &["no_kernel_port"]),
        ("p4", "sent_up_misfit") => to(&FASTPATH_P4_SENT_UP, &["misfit"]),
        _ => None,
    }
}

/// Where a controller channel counter (the report's `channel`) goes.
fn channel_series(key: &str) -> Option<(&'static Family, &'static str)> {
    Some(match key {
        "fail_open" => (&FAIL_OPEN, ""),
        "fail_open_entered" => (&FAIL_OPEN_ENTERED, ""),
        "sessions" => (&OPENFLOW_SESSIONS_STARTED, ""),
        "sessions_ended" => (&OPENFLOW_SESSIONS_ENDED, ""),
        "connections_refused" => (&OPENFLOW_CONNECTIONS_REFUSED, "too_many_connections"),
        "handshakes_refused" => (&OPENFLOW_CONNECTIONS_REFUSED, "too_many_handshakes"),
        "handshakes_failed" => (&OPENFLOW_HANDSHAKES_FAILED, ""),
        "requests_too_big" => (&OPENFLOW_MESSAGES_REFUSED, "too_big"),
        "malformed" => (&OPENFLOW_MESSAGES_REFUSED, "malformed"),
        "packet_ins_limited" => (&OPENFLOW_PACKET_INS_LIMITED, ""),
        "async_dropped_packet_in" => (&OPENFLOW_ASYNC_DROPPED, "packet_in"),
        "async_dropped_flow_removed" => (&OPENFLOW_ASYNC_DROPPED, "flow_removed"),
        "async_dropped_port_status" => (&OPENFLOW_ASYNC_DROPPED, "port_status"),
        "slow_readers_dropped" => (&OPENFLOW_SLOW_READERS, ""),
        "p4runtime_streams_refused" => (&P4RUNTIME_STREAMS_REFUSED, ""),
        "p4runtime_writes_refused" => (&P4RUNTIME_WRITES_REFUSED, ""),
        "p4runtime_slow_readers_dropped" => (&P4RUNTIME_SLOW_READERS, ""),
        "p4runtime_packet_ins_dropped" => (&P4RUNTIME_PACKET_INS_DROPPED, ""),
        "p4runtime_digests_dropped" => (&P4RUNTIME_DIGESTS_DROPPED, ""),
        _ => return None,
    })
}

/// The report alone as an exposition. `version` goes into `edgeflow_build_info`.
#[cfg(test)]
fn render(r: &Value, version: &str) -> String {
    let mut e = Exposition::default();
    report_families(&mut e, r, version);
    e.finish()
}

/// The report and the process's own figures, as one scrape answers.
pub fn scrape(r: &Value, version: &str) -> String {
    let mut e = Exposition::default();
    report_families(&mut e, r, version);
    process_families(&mut e);
    e.finish()
}

fn report_families(e: &mut Exposition, r: &Value, version: &str) {
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    let (mode, datapath, dpid) = (text(&r["mode"]), text(&r["datapath"]), text(&r["dpid"]));
    e.sample(&BUILD_INFO, &[version, &mode, &datapath, &dpid], 1.0);
    e.value(&UPTIME, &[], &r["uptime_s"]);
    e.value(&START_TIME, &[], &r["start_time_s"]);
    for result in ["applied", "refused"] {
        e.value(&CONFIG_RELOADS, &[result], &r["reloads"][result]);
    }

    let port_families: [(&str, &'static Family); 13] = [
        ("up", &PORT_UP),
        ("ring_frames", &PORT_RING_FRAMES),
        ("rate_bps", &PORT_RATE),
        ("rx_packets", &PORT_RX_PACKETS),
        ("socket_rx_packets", &PORT_SOCKET_RX_PACKETS),
        ("rx_bytes", &PORT_RX_BYTES),
        ("rx_dropped", &PORT_RX_DROPPED),
        ("rx_errors", &PORT_RX_ERRORS),
        ("tx_packets", &PORT_TX_PACKETS),
        ("tx_bytes", &PORT_TX_BYTES),
        ("tx_dropped", &PORT_TX_DROPPED),
        ("link_changes", &PORT_LINK_CHANGES),
        ("guard_reattached", &PORT_GUARD_REATTACHED),
    ];
    let queue_families: [(&str, &'static Family); 4] = [
        ("tx_packets", &QUEUE_TX_PACKETS),
        ("tx_bytes", &QUEUE_TX_BYTES),
        ("dropped", &QUEUE_DROPPED),
        ("waiting", &QUEUE_WAITING),
    ];
    for p in r["ports"].as_array().into_iter().flatten() {
        let (no, name) = (p["no"].to_string(), text(&p["name"]));
        for (key, family) in port_families {
            e.value(family, &[&no, &name], &p[key]);
        }
        for q in p["queues"].as_array().into_iter().flatten() {
            let queue = q["id"].to_string();
            for (key, family) in queue_families {
                e.value(family, &[&no, &name, &queue], &q[key]);
            }
        }
    }

    let table_families: [(&str, &'static Family); 5] = [
        ("flows", &TABLE_FLOWS),
        ("lookups", &TABLE_LOOKUPS),
        ("matched", &TABLE_MATCHED),
        ("full_refusals", &TABLE_FULL_REFUSALS),
        ("evictions", &TABLE_EVICTIONS),
    ];
    for t in r["tables"].as_array().into_iter().flatten() {
        let table = t["id"].to_string();
        for (key, family) in table_families {
            e.value(family, &[&table], &t[key]);
        }
    }

    if let Some(f) = r["fast_path"].as_object() {
        let fast: [(&str, &'static Family); 10] = [
            ("hits", &FASTPATH_HITS),
            ("misses", &FASTPATH_MISSES),
            ("upcalls", &FASTPATH_UPCALLS),
            ("slow", &FASTPATH_SLOW),
            ("entries", &FASTPATH_ENTRIES),
            ("installed", &FASTPATH_INSTALLED),
            ("refused", &FASTPATH_REFUSED),
            ("retired", &FASTPATH_RETIRED),
            ("evicted", &FASTPATH_EVICTED),
            ("retried", &FASTPATH_RETRIED),
        ];
        for (key, family) in fast {
            e.value(family, &[], &f[key]);
        }
        for (reason, n) in f["drops"].as_object().into_iter().flatten() {
            e.value(&FASTPATH_DROPPED, &[reason], n);
        }
        for p in f.get("xdp_fallback").and_then(|a| a.as_array()).into_iter().flatten() {
            let port = p["port"].to_string();
            e.value(&FASTPATH_XDP_FALLBACK, &[&port, &text(&p["name"]), &text(&p["reason"])], &p["frames"]);
        }
        for section in ["labels", "links", "p4"] {
            for (key, n) in f.get(section).and_then(Value::as_object).into_iter().flatten() {
                match fastpath_series(section, key) {
                    Some((family, values)) => e.value(family, &strs(&values), n),
                    None => unmapped("fast_path", section, key),
                }
            }
        }
    }

    for (reason, n) in r["drops"].as_object().into_iter().flatten() {
        e.value(&DROPPED, &[reason], n);
    }

    for g in r["mode_counters"].as_array().into_iter().flatten() {
        let group = g["name"].as_str().unwrap_or("");
        for (key, n) in g["counters"].as_object().into_iter().flatten() {
            match mode_series(group, key) {
                Some((family, values)) => e.value(family, &strs(&values), n),
                None => unmapped("mode_counters", group, key),
            }
        }
    }

    for c in r["controllers"].as_array().into_iter().flatten() {
        let connected = c["connected"].as_bool().unwrap_or(false) as u8 as f64;
        e.sample(&CONTROLLER_CONNECTED, &[&text(&c["target"])], connected);
    }
    let channel = r["channel"].as_object().cloned().unwrap_or_default();
    if let (Some(started), Some(ended)) =
        (channel.get("sessions").and_then(Value::as_u64), channel.get("sessions_ended").and_then(Value::as_u64))
    {
        e.sample(&CONTROLLER_SESSIONS, &[], started.saturating_sub(ended) as f64);
    }
    for (key, v) in &channel {
        match channel_series(key) {
            Some((family, "")) => e.value(family, &[], v),
            Some((family, label)) => e.value(family, &[label], v),
            None => unmapped("channel", "", key),
        }
    }
}

fn strs(values: &[String]) -> Vec<&str> {
    values.iter().map(String::as_str).collect()
}

/// A report value no family takes: left out of the exposition (a family is declared, never
/// made up from a key), and said once, as the report's shape changed without this file.
fn unmapped(section: &str, group: &str, key: &str) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let what = format!("{section} {group} {key}");
    let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
    if !said.contains(&what) {
        tracing::warn!("metrics: the report's {what} has no metric family; it is not exported");
        said.push(what);
    }
}

/// The process's own figures, under the names every Prometheus client library exports
/// (`process_*`), read from /proc/self at each scrape.
fn process_families(e: &mut Exposition) {
    // SAFETY: sysconf and getrlimit only read.
    let (ticks, page) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK) as f64, libc::sysconf(libc::_SC_PAGESIZE) as f64) };
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command's closing parenthesis (which may hold spaces): state is 3.
    let fields: Vec<&str> = stat.rsplit_once(')').map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    if let (Some(user), Some(system)) = (field(14), field(15)) {
        e.sample(&PROCESS_CPU, &[], (user + system) / ticks);
    }
    let boot = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("btime ")).and_then(|v| v.trim().parse::<f64>().ok()));
    if let (Some(boot), Some(started)) = (boot, field(22)) {
        e.sample(&PROCESS_START_TIME, &[], boot + started / ticks);
    }
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: Vec<f64> = statm.split_whitespace().filter_map(|v| v.parse().ok()).collect();
    if let [size, resident, ..] = pages[..] {
        e.sample(&PROCESS_VIRTUAL_MEMORY, &[], size * page);
        e.sample(&PROCESS_RESIDENT_MEMORY, &[], resident * page);
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        e.sample(&PROCESS_OPEN_FDS, &[], fds.count() as f64);
    }
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a plain query into a local.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        e.sample(&PROCESS_MAX_FDS, &[], limit.rlim_cur as f64);
    }
}

/// Serves `GET /metrics` on `addr` until the process ends. Each scrape asks the forwarding
/// thread for a fresh report.
pub async fn serve(addr: SocketAddr, switch: SwitchHandle) -> Result<(), String> {
    let listener = TcpListener::bind(addr).await.map_err(|e| format!("metrics {addr}: {e}"))?;
    tracing::info!(%addr, "serving Prometheus metrics on /metrics");
    tokio::task::spawn_local(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let switch = switch.clone();
                    tokio::task::spawn_local(async move {
                        // A scraper that stalls gives up its connection, not the switch's.
                        let _ = tokio::time::timeout(Duration::from_secs(10), answer(stream, switch)).await;
                    });
                }
                Err(e) => {
                    tracing::warn!("metrics: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    Ok(())
}

async fn answer(mut stream: TcpStream, switch: SwitchHandle) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    let asked = loop {
        if let Some(asked) = http::asked(&head) {
            break asked;
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    };
    match asked {
        Asked::Metrics { head_only } => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            switch.send(Command::Report(Box::new(move |report| {
                let _ = tx.send(report);
            })));
            match tokio::time::timeout(Duration::from_secs(5), rx).await {
                Ok(Ok(report)) => {
                    let body = scrape(&report, env!("CARGO_PKG_VERSION"));
                    let body = if head_only { String::new() } else { body };
                    respond(&mut stream, "200 OK", "text/plain; version=0.0.4; charset=utf-8", &body).await
                }
                _ => {
                    respond(
                        &mut stream,
                        "503 Service Unavailable",
                        "text/plain",
                        "the forwarding thread did not answer\n",
                    )
                    .await
                }
            }
        }
        Asked::Index => respond(&mut stream, "200 OK", "text/plain", "edgeflow: metrics are on /metrics\n").await,
        Asked::NotFound => respond(&mut stream, "404 Not Found", "text/plain", "not found: try /metrics\n").await,
        Asked::NotAllowed => respond(&mut stream, "405 Method Not Allowed", "text/plain", "only GET\n").await,
        Asked::TooLarge => respond(&mut stream, "431 Request Header Fields Too Large", "text/plain", "").await,
    }
}

async fn respond(stream: &mut TcpStream, status: &str, kind: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report() -> Value {
        json!({
            "dpid": "00000000000000e5", "mode": "afdx", "datapath": "tc", "uptime_s": 12.5,
            "start_time_s": 1_795_000_000.25,
            "ports": [{"no": 1, "name": "eth\"1", "up": true, "ring_frames": 1024, "rate_bps": null,
                       "rx_packets": 10, "socket_rx_packets": 6, "rx_bytes": 1000, "rx_dropped": 0, "rx_errors": 0,
                       "tx_packets": 9,
                       "tx_bytes": 900, "tx_dropped": 1, "link_changes": 2, "guard_reattached": 0,
                       "queues": [{"id": 7, "tx_packets": 3, "tx_bytes": 300, "dropped": 0, "waiting": 4}]}],
            "tables": [{"id": 0, "flows": 2, "lookups": 10, "matched": 9, "full_refusals": 0, "evictions": 0}],
            "mode_counters": [{"name": "switch", "counters": {"bad_destination": 0, "unknown_vl": 5}},
                              {"name": "vl 10", "counters": {"frames_in": 7, "policed": 1, "oversize": 0}},
                              {"name": "vl 11", "counters": {"frames_in": 3, "policed": 0, "oversize": 2}}],
            "fast_path": {"hits": 100, "misses": 2, "upcalls": 2, "slow": 0, "entries": 3, "installed": 3,
                          "refused": 0, "retired": 0, "evicted": 0, "retried": 0, "drops": {"bad_frame": 1},
                          "labels": {}, "links": {"held": 1, "decided": 50, "kept_for_priority": 0},
                          "xdp_fallback": [{"port": 2, "name": "veth2", "reason": "veth_peer_without_napi",
                                            "now": true, "frames": 40}]},
            "drops": {"no_action": 4},
            "channel": {"sessions": 3, "sessions_ended": 1, "malformed": 0, "fail_open": false},
            "reloads": {"applied": 2, "refused": 1, "last": {"result": "refused", "message": "tables changed"}},
            "controllers": [{"target": "tcp:192.0.2.1:6653", "connected": true}, {"target": "tls:[2001:db8::1]:6653", "connected": false}],
        })
    }

    /// The dashboard shipped for Grafana (packaging/grafana/edgeflow.json) asks only for
    /// families the switch exports: a renamed family fails here, not on an operator's screen.
    #[test]
    fn every_family_the_dashboard_queries_is_exported() {
        let dashboard: Value = serde_json::from_str(include_str!("../../../packaging/grafana/edgeflow.json"))
            .expect("the dashboard is JSON");
        let families: Vec<&str> = families::ALL.iter().map(|f| f.name()).collect();
        let mut asked = 0;
        for panel in dashboard["panels"].as_array().expect("panels") {
            for target in panel["targets"].as_array().expect("targets") {
                let expr = target["expr"].as_str().expect("a PromQL expression");
                let names = expr
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .filter(|w| w.starts_with("edgeflow_") || w.starts_with("process_"));
                for name in names {
                    asked += 1;
                    assert!(
                        families.contains(&name),
                        "panel '{}' asks for {name}, which is not exported",
                        panel["title"]
                    );
                }
            }
        }
        assert!(asked >= 15, "{asked} families asked for");
    }

    #[test]
    fn the_process_is_described_as_client_libraries_describe_one() {
        let mut e = Exposition::default();
        process_families(&mut e);
        let text = e.finish();
        let value = |name: &str| -> f64 {
            let line =
                text.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name}\n{text}"));
            line.split(' ').nth(1).unwrap().parse().unwrap()
        };
        assert!(value("process_resident_memory_bytes") > 1e5 && value("process_virtual_memory_bytes") > 1e6, "{text}");
        assert!(value("process_open_fds") >= 3.0 && value("process_max_fds") >= value("process_open_fds"), "{text}");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        let started = value("process_start_time_seconds");
        assert!(started <= now + 1.0 && started > now - 3600.0, "{started} vs {now}");
        assert!(value("process_cpu_seconds_total") >= 0.0);
        assert!(text.contains("# TYPE process_cpu_seconds_total counter"));
    }

    #[test]
    fn the_report_becomes_counters_and_gauges_with_labels() {
        let text = render(&report(), "0.1.0");
        for line in [
            "edgeflow_build_info{version=\"0.1.0\",mode=\"afdx\",datapath=\"tc\",dpid=\"00000000000000e5\"} 1",
            "edgeflow_port_up{port=\"1\",name=\"eth\\\"1\"} 1",
            "edgeflow_port_transmit_dropped_total{port=\"1\",name=\"eth\\\"1\"} 1",
            "edgeflow_port_socket_receive_packets_total{port=\"1\",name=\"eth\\\"1\"} 6",
            "edgeflow_queue_waiting_frames{port=\"1\",name=\"eth\\\"1\",queue=\"7\"} 4",
            "edgeflow_fastpath_hits_total 100",
            "edgeflow_fastpath_entries 3",
            "edgeflow_fastpath_dropped_total{reason=\"bad_frame\"} 1",
            "edgeflow_fastpath_xdp_fallback_frames_total{port=\"2\",name=\"veth2\",reason=\"veth_peer_without_napi\"} 40",
            "edgeflow_fastpath_afdx_links 1",
            "edgeflow_fastpath_afdx_frames_total 50",
            "edgeflow_dropped_total{reason=\"no_action\"} 4",
            "edgeflow_afdx_dropped_frames_total{reason=\"unknown_vl\"} 5",
            "edgeflow_afdx_dropped_frames_total{vl=\"10\",reason=\"policed\"} 1",
            "edgeflow_afdx_dropped_frames_total{vl=\"11\",reason=\"oversize\"} 2",
            "edgeflow_afdx_vl_received_frames_total{vl=\"10\"} 7",
            "edgeflow_afdx_vl_received_frames_total{vl=\"11\"} 3",
            "edgeflow_controller_sessions 2",
            "edgeflow_fail_open 0",
            "edgeflow_start_time_seconds 1795000000.25",
            "edgeflow_controller_connected{target=\"tcp:192.0.2.1:6653\"} 1",
            "edgeflow_controller_connected{target=\"tls:[2001:db8::1]:6653\"} 0",
            "edgeflow_config_reloads_total{result=\"applied\"} 2",
            "edgeflow_config_reloads_total{result=\"refused\"} 1",
            "# TYPE edgeflow_port_receive_bytes_total counter",
            "# TYPE edgeflow_queue_waiting_frames gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
        }
        // A null (an unscheduled port's rate) is no sample, and every family is declared once.
        assert!(!text.contains("edgeflow_port_rate_bits_per_second{"));
        let types: Vec<&str> = text.lines().filter(|l| l.starts_with("# TYPE")).collect();
        let mut unique = types.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(types.len(), unique.len());
        // Counters end in _total, and nothing else does.
        for t in types {
            let mut w = t.split(' ').skip(2);
            let (name, kind) = (w.next().unwrap(), w.next().unwrap());
            assert_eq!(name.ends_with("_total"), kind == "counter", "{t}");
        }
    }

    /// A family is one block: its HELP and TYPE once, then every sample of it, although the
    /// report gives a virtual link's drops between the switch's and the next link's. Drop
    /// reasons are a label of one family, never a family each.
    #[test]
    fn each_family_is_written_once_with_all_its_samples() {
        let text = scrape(&report(), "0.1.0");
        let mut written: Vec<&str> = Vec::new();
        for line in text.lines() {
            if let Some(typed) = line.strip_prefix("# TYPE ") {
                let name = typed.split(' ').next().unwrap();
                assert!(!written.contains(&name), "{name} typed twice\n{text}");
                written.push(name);
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap();
                assert_eq!(Some(&name), written.last(), "{line} is not under its family's TYPE\n{text}");
            }
        }
        let afdx_drops: Vec<&str> =
            text.lines().filter(|l| l.starts_with("edgeflow_afdx_dropped_frames_total{")).collect();
        assert_eq!(afdx_drops.len(), 6, "{afdx_drops:?}");
        for reason in ["unknown_vl", "bad_destination", "policed", "oversize"] {
            assert!(!written.iter().any(|f| f.contains(reason)), "a family named for {reason}: {written:?}");
        }
    }

    /// Two parts of one kind sharing a switch (learning beside OpenFlow) report a megaflow cache
    /// and a MAC table each: one series each, the switch's sum, not two samples of one series
    /// (which Prometheus refuses).
    #[test]
    fn parts_of_one_kind_add_up_to_one_series() {
        let cache = |n: u64| json!({"name": "megaflow cache", "counters": {"entries": n, "evicted": 1}});
        let macs = |n: u64| json!({"name": "mac table", "counters": {"addresses": n, "evicted_table_full": 0}});
        let r = json!({"mode": "partitioned", "mode_counters": [cache(3), macs(2), cache(4), macs(5)]});
        let text = render(&r, "0.1.0");
        let samples = |prefix: &str| text.lines().filter(|l| l.starts_with(prefix)).collect::<Vec<_>>();
        assert_eq!(samples("edgeflow_megaflow_cache_entries "), ["edgeflow_megaflow_cache_entries 7"], "{text}");
        assert_eq!(
            samples("edgeflow_megaflow_cache_removed_total{"),
            ["edgeflow_megaflow_cache_removed_total{reason=\"evicted\"} 2"]
        );
        assert_eq!(samples("edgeflow_mac_table_addresses "), ["edgeflow_mac_table_addresses 7"]);
    }

    /// Every counter each mode reports, read from the modes themselves (built from configurations
    /// as the switch builds them, with a meter and a group in OpenFlow, every kind of TSN stream,
    /// a P4 program, and a shared switch), has a family, and no two counters land on one series.
    #[test]
    #[cfg(all(feature = "afdx", feature = "less", feature = "streams", feature = "p4"))]
    fn every_counter_a_mode_reports_has_a_family() {
        use ofp::group_meter::{group_command, group_type, meter_flags, BandKind, Bucket, MeterBand};
        use ofp::message::{GroupMod, MeterMod};
        use ofp::{Action, Message};

        struct Nowhere;
        impl forwarding::Output for Nowhere {
            fn transmit(&mut self, _: forwarding::Egress, _: &packet::Packet) {}
            fn event(&mut self, _: forwarding::Event) {}
        }
        let ports = "[[port]]\nname = \"a\"\n[[port]]\nname = \"b\"\n[[port]]\nname = \"c\"\n";
        let stream = |name: &str, mac: u8, extra: &str| {
            format!("[[stream]]\nname = \"{name}\"\ndst = \"02:00:00:00:00:{mac:02x}\"\nin_ports = [1]\nout_ports = [2, 3]\n{extra}")
        };
        let program = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/p4/l2_switch.p4");
        let configs = [
            format!("mode = \"openflow\"\n{ports}"),
            format!(
                "mode = \"afdx\"\n{ports}[[afdx.vl]]\nid = 10\nin_port = 1\nout_ports = [2, 3]\nbag_ms = 4\nsmin = 64\nsmax = 512\npriority = \"high\"\n"
            ),
            format!("mode = \"less\"\n{ports}[less]\nroot = true\n"),
            format!(
                "mode = \"streams\"\n{ports}{}{}{}",
                stream("talker", 1, "generate = true\n"),
                stream("listener", 2, "recover = true\n"),
                stream(
                    "policed",
                    3,
                    "max_sdu_bytes = 500\nmeter = { cir_kbps = 8000, cbs_bytes = 3000 }\n\
                     gate = { cycle_ns = 10000000, entries = [{ duration_ns = 4000000, open = true }, \
                     { duration_ns = 6000000, open = false }] }\n"
                )
            ),
            format!("mode = \"p4\"\n{ports}[p4]\nprogram = \"{}\"\n", program.display()),
        ];
        let mut modes = Vec::new();
        for src in &configs {
            let s = edgeflow::config::from_text(src, std::path::Path::new("sw.toml")).unwrap_or_else(|e| panic!("{e}"));
            modes.push(crate::make_mode(&s.mode, &s, true).unwrap());
        }
        let meter = MeterMod {
            command: 0,
            flags: meter_flags::PKTPS,
            meter_id: 1,
            bands: vec![MeterBand { kind: BandKind::Drop, rate: 100, burst_size: 0 }],
        };
        let bucket = Bucket { weight: 0, watch_port: 0, watch_group: 0, actions: vec![Action::output(2)] };
        let group =
            GroupMod { command: group_command::ADD, group_type: group_type::ALL, group_id: 5, buckets: vec![bucket] };
        for msg in [Message::MeterMod(meter), Message::GroupMod(group)] {
            modes[0].openflow(msg, 0, &mut Nowhere).expect("the OpenFlow mode takes it");
        }
        let shared = forwarding::partition::Partitioned::new(vec![
            forwarding::partition::Part { mode: modes.remove(1), ports: [1].into() },
            forwarding::partition::Part { mode: modes.remove(0), ports: [2, 3].into() },
        ]);
        modes.push(Box::new(shared));

        let mut groups_seen = Vec::new();
        for mode in &modes {
            let mut series = Vec::new();
            for g in mode.counters() {
                groups_seen.push(g.name.split(' ').next().unwrap().to_string());
                for (key, _) in &g.counters {
                    let (family, values) = mode_series(&g.name, key)
                        .unwrap_or_else(|| panic!("the {} mode's '{}' {key} has no family", mode.name(), g.name));
                    assert!(!series.contains(&(family.name(), values.clone())), "{} {values:?} twice", family.name());
                    series.push((family.name(), values));
                }
            }
        }
        for kind in
            ["megaflow", "mac", "meter", "group", "switch", "vl", "labels", "fabric", "stream", "p4", "partitions"]
        {
            assert!(groups_seen.iter().any(|g| g == kind), "no '{kind}' group: {groups_seen:?}");
        }
        // The reasons listed here are the modes' own.
        let vl_drops: Vec<&str> = forwarding::afdx::VlDrop::ALL.iter().map(|d| d.name()).collect();
        assert_eq!(vl_drops, AFDX_VL_DROPS);
        for e in packet::less::StackError::ALL {
            assert!(LESS_DROPS.contains(&e.name()), "{}", e.name());
        }
    }
}
