//! `--metrics [ADDR:]PORT`: the switch's report (what `edgeflow stats --json` prints) in
//! Prometheus's text exposition format, on `GET /metrics`.
//!
//! One source for both: every value here is a field of the report, renamed to Prometheus's
//! conventions (an `edgeflow_` prefix, `_total` on counters, bytes and seconds as base units,
//! ports, queues, tables and reasons as labels rather than names). docs/deploy.md lists them.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use datapath::{Command, SwitchHandle};
use edgeflow::http::{self, Asked};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The families, as they are written: each `# HELP`/`# TYPE` once, then its samples.
#[derive(Default)]
struct Exposition {
    out: String,
    /// The family being written, so that its header goes out once.
    current: String,
}

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
}

/// A label value, escaped as the format wants (backslash, quote, newline).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// A metric name from a report key: lower case, `[a-z0-9_]`.
fn metric_name(key: &str) -> String {
    key.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect()
}

impl Exposition {
    fn sample(&mut self, name: &str, kind: Kind, help: &str, labels: &[(&str, String)], value: f64) {
        if self.current != name {
            let kind = match kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
            };
            let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            self.current = name.to_string();
        }
        self.out += name;
        if !labels.is_empty() {
            let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
            let _ = write!(self.out, "{{{}}}", inner.join(","));
        }
        let _ = writeln!(self.out, " {value}");
    }

    fn counter(&mut self, name: &str, help: &str, labels: &[(&str, String)], v: &Value) {
        if let Some(x) = v.as_f64() {
            self.sample(name, Kind::Counter, help, labels, x);
        }
    }

    fn value(&mut self, name: &str, kind: Kind, help: &str, labels: &[(&str, String)], v: &Value) {
        match kind {
            Kind::Counter => self.counter(name, help, labels, v),
            Kind::Gauge => self.gauge(name, help, labels, v),
        }
    }

    fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, String)], v: &Value) {
        let x = match v {
            Value::Bool(b) => Some(*b as u8 as f64),
            other => other.as_f64(),
        };
        if let Some(x) = x {
            self.sample(name, Kind::Gauge, help, labels, x);
        }
    }
}

/// Counters in the report's groups of mode counters that are levels, not counts: a Prometheus
/// gauge each (the report keeps one map for both).
const LEVELS: &[&str] = &["entries", "addresses", "root", "neighbours", "hosts", "parts", "held", "kept_for_priority"];

/// A mode's group of counters as labels: `vl 10` → `vl="10"` (and `meter`, `group`, `stream`
/// alike), any other name → `set="megaflow cache"`.
fn group_labels(name: &str) -> (&'static str, String) {
    for kind in ["vl", "meter", "group", "stream"] {
        if let Some(id) = name.strip_prefix(kind).and_then(|rest| rest.strip_prefix(' ')) {
            return (kind, id.to_string());
        }
    }
    ("set", name.to_string())
}

/// The report as an exposition. `version` goes into `edgeflow_build_info`.
pub fn render(r: &Value, version: &str) -> String {
    let mut e = Exposition::default();
    let none: &[(&str, String)] = &[];
    e.gauge(
        "edgeflow_build_info",
        "The running edgeflow: its version, forwarding mode and datapath (always 1).",
        &[
            ("version", version.to_string()),
            ("mode", r["mode"].as_str().unwrap_or("").to_string()),
            ("datapath", r["datapath"].as_str().unwrap_or("").to_string()),
            ("dpid", r["dpid"].as_str().unwrap_or("").to_string()),
        ],
        &Value::from(1),
    );
    e.gauge("edgeflow_uptime_seconds", "Seconds since the switch started.", none, &r["uptime_s"]);
    e.gauge(
        "edgeflow_start_time_seconds",
        "When the switch started, in seconds since the Unix epoch.",
        none,
        &r["start_time_s"],
    );
    for result in ["applied", "refused"] {
        e.counter(
            "edgeflow_config_reloads_total",
            "Configurations read again (SIGHUP, `systemctl reload`), by whether they were applied or refused.",
            &[("result", result.to_string())],
            &r["reloads"][result],
        );
    }

    let ports = r["ports"].as_array().cloned().unwrap_or_default();
    let port_labels =
        |p: &Value| vec![("port", p["no"].to_string()), ("name", p["name"].as_str().unwrap_or("").to_string())];
    let port_families: [(&str, &str, &str, Kind); 12] = [
        ("up", "edgeflow_port_up", "1 while the port's link is up and the port is not blocked.", Kind::Gauge),
        ("ring_frames", "edgeflow_port_ring_frames", "Receive frames the port's AF_PACKET ring holds.", Kind::Gauge),
        (
            "rate_bps",
            "edgeflow_port_rate_bits_per_second",
            "The rate the port is paced to (scheduled ports).",
            Kind::Gauge,
        ),
        ("rx_packets", "edgeflow_port_receive_packets_total", "Frames received on the port.", Kind::Counter),
        ("rx_bytes", "edgeflow_port_receive_bytes_total", "Bytes received on the port.", Kind::Counter),
        ("rx_dropped", "edgeflow_port_receive_dropped_total", "Received frames dropped on the port.", Kind::Counter),
        ("rx_errors", "edgeflow_port_receive_errors_total", "Receive errors on the port.", Kind::Counter),
        ("tx_packets", "edgeflow_port_transmit_packets_total", "Frames sent on the port.", Kind::Counter),
        ("tx_bytes", "edgeflow_port_transmit_bytes_total", "Bytes sent on the port.", Kind::Counter),
        ("tx_dropped", "edgeflow_port_transmit_dropped_total", "Frames the port could not send.", Kind::Counter),
        ("link_changes", "edgeflow_port_link_changes_total", "Times the port's link went up or down.", Kind::Counter),
        (
            "guard_reattached",
            "edgeflow_port_guard_reattached_total",
            "Times the port guard was attached again.",
            Kind::Counter,
        ),
    ];
    for (key, name, help, kind) in port_families {
        for p in &ports {
            e.value(name, kind, help, &port_labels(p), &p[key])
        }
    }
    let queue_families: [(&str, &str, &str, Kind); 4] = [
        ("tx_packets", "edgeflow_queue_transmit_packets_total", "Frames sent from the egress queue.", Kind::Counter),
        ("tx_bytes", "edgeflow_queue_transmit_bytes_total", "Bytes sent from the egress queue.", Kind::Counter),
        ("dropped", "edgeflow_queue_dropped_total", "Frames the egress queue dropped (tail drop).", Kind::Counter),
        ("waiting", "edgeflow_queue_waiting_frames", "Frames waiting in the egress queue.", Kind::Gauge),
    ];
    for (key, name, help, kind) in queue_families {
        for p in &ports {
            for q in p["queues"].as_array().into_iter().flatten() {
                let mut labels = port_labels(p);
                labels.push(("queue", q["id"].to_string()));
                e.value(name, kind, help, &labels, &q[key])
            }
        }
    }

    let tables = r["tables"].as_array().cloned().unwrap_or_default();
    let table_families: [(&str, &str, &str, Kind); 5] = [
        ("flows", "edgeflow_table_flows", "Flows in the OpenFlow table.", Kind::Gauge),
        ("lookups", "edgeflow_table_lookups_total", "Lookups in the OpenFlow table.", Kind::Counter),
        ("matched", "edgeflow_table_matched_total", "Lookups that matched a flow.", Kind::Counter),
        (
            "full_refusals",
            "edgeflow_table_full_refusals_total",
            "Flow-mods refused because the table was full.",
            Kind::Counter,
        ),
        ("evictions", "edgeflow_table_evictions_total", "Flows evicted to make room.", Kind::Counter),
    ];
    for (key, name, help, kind) in table_families {
        for t in &tables {
            let labels = [("table", t["id"].to_string())];
            e.value(name, kind, help, &labels, &t[key])
        }
    }

    if let Some(f) = r["fast_path"].as_object() {
        let fast: [(&str, &str, &str, Kind); 10] = [
            ("hits", "edgeflow_fastpath_hits_total", "Frames the kernel fast path forwarded itself.", Kind::Counter),
            (
                "misses",
                "edgeflow_fastpath_misses_total",
                "Frames the kernel fast path had no entry for.",
                Kind::Counter,
            ),
            ("upcalls", "edgeflow_fastpath_upcalls_total", "Frames the kernel handed to userspace.", Kind::Counter),
            ("slow", "edgeflow_fastpath_slow_total", "Frames an entry sent to userspace on purpose.", Kind::Counter),
            ("entries", "edgeflow_fastpath_entries", "Translations the kernel holds.", Kind::Gauge),
            ("installed", "edgeflow_fastpath_installed_total", "Translations written into the kernel.", Kind::Counter),
            ("refused", "edgeflow_fastpath_refused_total", "Translations the kernel had no room for.", Kind::Counter),
            ("retired", "edgeflow_fastpath_retired_total", "Translations removed from the kernel.", Kind::Counter),
            (
                "evicted",
                "edgeflow_fastpath_evicted_total",
                "Idle translations removed from a full kernel map to make room.",
                Kind::Counter,
            ),
            (
                "retried",
                "edgeflow_fastpath_retried_total",
                "Translations the kernel took when offered again after it had no room.",
                Kind::Counter,
            ),
        ];
        for (key, name, help, kind) in fast {
            e.value(name, kind, help, none, &f[key])
        }
        for (reason, n) in f["drops"].as_object().into_iter().flatten() {
            e.counter(
                "edgeflow_fastpath_dropped_total",
                "Frames the kernel fast path dropped, by reason.",
                &[("reason", reason.clone())],
                n,
            );
        }
        for p in f.get("xdp_fallback").and_then(|a| a.as_array()).into_iter().flatten() {
            e.counter(
                "edgeflow_fastpath_xdp_fallback_frames_total",
                "Frames XDP sent to a port through TC, as the kernel cannot redirect to it natively, by port and reason.",
                &[
                    ("port", p["port"].to_string()),
                    ("name", p["name"].as_str().unwrap_or("").to_string()),
                    ("reason", p["reason"].as_str().unwrap_or("").to_string()),
                ],
                &p["frames"],
            );
        }
        for (section, what) in [("labels", "LESS label"), ("links", "AFDX link")] {
            for (key, n) in f[section].as_object().into_iter().flatten() {
                let name = format!("edgeflow_fastpath_{section}_{}", metric_name(key));
                let help = format!("The kernel fast path's {what} figure '{key}'.");
                if LEVELS.contains(&key.as_str()) {
                    e.gauge(&name, &help, none, n);
                } else {
                    e.counter(&format!("{name}_total"), &help, none, n);
                }
            }
        }
    }

    for (reason, n) in r["drops"].as_object().into_iter().flatten() {
        e.counter("edgeflow_dropped_total", "Frames the switch dropped, by reason.", &[("reason", reason.clone())], n);
    }

    // The mode's groups (AFDX virtual links, TSN streams, OpenFlow meters and groups, LESS, the
    // megaflow cache): one family per counter name, one sample per group.
    let groups = r["mode_counters"].as_array().cloned().unwrap_or_default();
    let mut names: Vec<String> = Vec::new();
    for g in &groups {
        for key in g["counters"].as_object().into_iter().flatten().map(|(k, _)| k) {
            if !names.contains(key) {
                names.push(key.clone());
            }
        }
    }
    for key in &names {
        let level = LEVELS.contains(&key.as_str());
        let base = format!("edgeflow_mode_{}", metric_name(key));
        let name = if level { base } else { format!("{base}_total") };
        let help = format!("The forwarding mode's '{key}', per virtual link, stream, meter, group or set.");
        for g in &groups {
            let v = &g["counters"][key.as_str()];
            if v.is_null() {
                continue;
            }
            let (label, id) = group_labels(g["name"].as_str().unwrap_or(""));
            if level {
                e.gauge(&name, &help, &[(label, id)], v);
            } else {
                e.counter(&name, &help, &[(label, id)], v);
            }
        }
    }

    for c in r["controllers"].as_array().into_iter().flatten() {
        e.gauge(
            "edgeflow_controller_connected",
            "1 while a session with the configured controller runs, else 0.",
            &[("target", c["target"].as_str().unwrap_or("").to_string())],
            &Value::from(c["connected"].as_bool().unwrap_or(false) as u8),
        );
    }

    let channel = r["channel"].as_object().cloned().unwrap_or_default();
    if let (Some(started), Some(ended)) =
        (channel.get("sessions").and_then(Value::as_u64), channel.get("sessions_ended").and_then(Value::as_u64))
    {
        e.gauge(
            "edgeflow_controller_sessions",
            "OpenFlow sessions open now (controllers and management tools).",
            none,
            &Value::from(started.saturating_sub(ended)),
        );
    }
    for (key, v) in &channel {
        match key.as_str() {
            "fail_open" => e.gauge(
                "edgeflow_fail_open",
                "1 while the switch learns on its own (standalone, no controller).",
                none,
                v,
            ),
            _ => e.counter(
                &format!("edgeflow_channel_{}_total", metric_name(key)),
                &if key.starts_with("p4runtime_") {
                    format!("P4Runtime server events: '{key}'.")
                } else {
                    format!("OpenFlow channel events: '{key}'.")
                },
                none,
                v,
            ),
        }
    }
    e.out
}

/// The process's own figures, under the names every Prometheus client library exports
/// (`process_*`), read from /proc/self at each scrape.
pub fn process_families() -> String {
    let mut e = Exposition::default();
    let none: &[(&str, String)] = &[];
    // SAFETY: sysconf and getrlimit only read.
    let (ticks, page) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK) as f64, libc::sysconf(libc::_SC_PAGESIZE) as f64) };
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command's closing parenthesis (which may hold spaces): state is 3.
    let fields: Vec<&str> = stat.rsplit_once(')').map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    if let (Some(user), Some(system)) = (field(14), field(15)) {
        let cpu = Value::from((user + system) / ticks);
        e.counter("process_cpu_seconds_total", "User and system CPU time spent, in seconds.", none, &cpu);
    }
    let boot = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("btime ")).and_then(|v| v.trim().parse::<f64>().ok()));
    if let (Some(boot), Some(started)) = (boot, field(22)) {
        let at = Value::from(boot + started / ticks);
        e.gauge("process_start_time_seconds", "Start time of the process since the Unix epoch, in seconds.", none, &at);
    }
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: Vec<f64> = statm.split_whitespace().filter_map(|v| v.parse().ok()).collect();
    if let [size, resident, ..] = pages[..] {
        e.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", none, &Value::from(size * page));
        e.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", none, &Value::from(resident * page));
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        e.gauge("process_open_fds", "Open file descriptors.", none, &Value::from(fds.count()));
    }
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a plain query into a local.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        e.gauge(
            "process_max_fds",
            "The most file descriptors the process may open.",
            none,
            &Value::from(limit.rlim_cur as f64),
        );
    }
    e.out
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
                    let body = render(&report, env!("CARGO_PKG_VERSION")) + &process_families();
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
                       "rx_packets": 10, "rx_bytes": 1000, "rx_dropped": 0, "rx_errors": 0, "tx_packets": 9,
                       "tx_bytes": 900, "tx_dropped": 1, "link_changes": 2, "guard_reattached": 0,
                       "queues": [{"id": 7, "tx_packets": 3, "tx_bytes": 300, "dropped": 0, "waiting": 4}]}],
            "tables": [{"id": 0, "flows": 2, "lookups": 10, "matched": 9, "full_refusals": 0, "evictions": 0}],
            "mode_counters": [{"name": "switch", "counters": {"unknown_vl": 5}},
                              {"name": "vl 10", "counters": {"frames_in": 7, "policed": 1}}],
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
        let exported = render(&report(), "0.1.0") + &process_families();
        let families: Vec<&str> =
            exported.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next()).collect();
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
        let text = process_families();
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
            "edgeflow_queue_waiting_frames{port=\"1\",name=\"eth\\\"1\",queue=\"7\"} 4",
            "edgeflow_fastpath_hits_total 100",
            "edgeflow_fastpath_entries 3",
            "edgeflow_fastpath_dropped_total{reason=\"bad_frame\"} 1",
            "edgeflow_fastpath_xdp_fallback_frames_total{port=\"2\",name=\"veth2\",reason=\"veth_peer_without_napi\"} 40",
            "edgeflow_fastpath_links_held 1",
            "edgeflow_fastpath_links_decided_total 50",
            "edgeflow_dropped_total{reason=\"no_action\"} 4",
            "edgeflow_mode_unknown_vl_total{set=\"switch\"} 5",
            "edgeflow_mode_frames_in_total{vl=\"10\"} 7",
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
}
