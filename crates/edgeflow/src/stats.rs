//! `edgeflow stats`: asks a running switch for its report over OpenFlow (an experimenter
//! multipart request on any listener, by default the switch's management socket) and prints it
//! as tables, or as JSON for scripts.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use datapath::switch::{EXPERIMENTER, STATS_REPORT};
use ofp::multipart::{MultipartReplyBody, MultipartRequest, MultipartRequestBody, MORE};
use ofp::{Header, Hello, Message};
use serde_json::Value;

use crate::service::runtime_dir;

/// Where every switch listens for management tools: `<runtime dir>/<dpid>.mgmt`.
pub fn mgmt_socket(dpid: u64) -> PathBuf {
    runtime_dir().join(format!("{dpid:016x}.mgmt"))
}

trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

/// `target`: tcp:IP:PORT, unix:PATH, a socket path, a dpid, or nothing (the only switch running).
fn connect(target: Option<&str>) -> Result<Box<dyn Stream>, String> {
    let path = match target {
        Some(t) if t.starts_with("tcp:") => {
            let addr = t.trim_start_matches("tcp:");
            let s = std::net::TcpStream::connect(addr).map_err(|e| format!("{t}: {e}"))?;
            s.set_read_timeout(Some(Duration::from_secs(5))).ok();
            return Ok(Box::new(s));
        }
        Some(t) if t.starts_with("unix:") => PathBuf::from(t.trim_start_matches("unix:")),
        Some(t) if t.contains('/') => PathBuf::from(t),
        Some(t) => mgmt_socket(edgeflow::config::parse_dpid(t)?),
        None => {
            let dir = runtime_dir();
            let found: Vec<PathBuf> = std::fs::read_dir(&dir)
                .map(|d| {
                    d.filter_map(|e| e.ok().map(|e| e.path()))
                        .filter(|p| p.extension().is_some_and(|x| x == "mgmt"))
                        .collect()
                })
                .unwrap_or_default();
            match found.as_slice() {
                [one] => one.clone(),
                [] => return Err(format!("no switch is running (no socket in {}); give a target", dir.display())),
                many => {
                    let names: Vec<String> = many.iter().map(|p| p.display().to_string()).collect();
                    return Err(format!("several switches are running; name one: {}", names.join(", ")));
                }
            }
        }
    };
    let s = UnixStream::connect(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    Ok(Box::new(s))
}

fn read_message(s: &mut dyn Stream) -> Result<(Header, Message), String> {
    let mut head = [0u8; 8];
    s.read_exact(&mut head).map_err(|e| format!("reading from the switch: {e}"))?;
    let h = Header::peek(&head).ok_or("short header")?;
    let mut msg = head.to_vec();
    msg.resize(h.length.max(8) as usize, 0);
    s.read_exact(&mut msg[8..]).map_err(|e| format!("reading from the switch: {e}"))?;
    Message::decode(&msg).map_err(|e| format!("the switch sent a message we cannot read: {e:?}"))
}

/// The switch's report, as JSON.
pub fn fetch(target: Option<&str>) -> Result<Value, String> {
    request(target, STATS_REPORT, vec![])
}

/// One of edgeflow's experimenter multipart requests (`exp_type`), and its JSON answer.
pub fn request(target: Option<&str>, exp_type: u32, data: Vec<u8>) -> Result<Value, String> {
    let mut s = connect(target)?;
    let send = |s: &mut Box<dyn Stream>, m: Message, xid: u32| s.write_all(&m.encode(xid)).map_err(|e| e.to_string());
    send(&mut s, Message::Hello(Hello::of13()), 1)?;
    let body = MultipartRequestBody::Experimenter { experimenter: EXPERIMENTER, exp_type, data };
    send(&mut s, Message::MultipartRequest(MultipartRequest { flags: 0, body }), 2)?;
    let mut data = Vec::new();
    loop {
        match read_message(&mut *s)? {
            (h, Message::MultipartReply(r)) if h.xid == 2 => {
                if let MultipartReplyBody::Experimenter { data: d, .. } = r.body {
                    data.extend(d);
                }
                if r.flags & MORE == 0 {
                    break;
                }
            }
            (h, Message::Error(e)) if h.xid == 2 => {
                return Err(format!("the switch refused the request: {e:?} (is it an edgeflow switch?)"))
            }
            (h, Message::EchoRequest(d)) => send(&mut s, Message::EchoReply(d), h.xid)?,
            _ => {}
        }
    }
    serde_json::from_slice(&data).map_err(|e| format!("the report is not JSON: {e}"))
}

fn n(v: &Value) -> String {
    match v {
        Value::Number(x) => x.to_string(),
        Value::Bool(b) => if *b { "up" } else { "down" }.to_string(),
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// Left-aligned columns under a header.
fn table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: Vec<String>| {
        cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect::<Vec<_>>().join("  ").trim_end().to_string()
    };
    let mut out = vec![line(headers.iter().map(|h| h.to_string()).collect())];
    out.extend(rows.into_iter().map(line));
    out.join("\n") + "\n"
}

/// The report as a person reads it.
pub fn render(r: &Value) -> String {
    let mut out = format!(
        "switch {}  mode {}  datapath {}  up {:.0} s\n\n",
        n(&r["dpid"]),
        n(&r["mode"]),
        n(&r["datapath"]),
        r["uptime_s"].as_f64().unwrap_or(0.0)
    );
    let empty = vec![];
    let ports = r["ports"].as_array().unwrap_or(&empty);
    let f = |p: &Value, k: &str| n(&p[k]);
    out += &table(
        &[
            "port", "name", "link", "rx pkts", "rx bytes", "rx drop", "rx err", "tx pkts", "tx bytes", "tx drop",
            "link chg", "removed",
        ],
        ports
            .iter()
            .map(|p| {
                [
                    "no",
                    "name",
                    "up",
                    "rx_packets",
                    "rx_bytes",
                    "rx_dropped",
                    "rx_errors",
                    "tx_packets",
                    "tx_bytes",
                    "tx_dropped",
                    "link_changes",
                    "removed",
                ]
                .iter()
                .map(|k| f(p, k))
                .collect()
            })
            .collect(),
    );
    let mut queue_rows = Vec::new();
    for p in ports {
        for q in p["queues"].as_array().unwrap_or(&empty) {
            if q["tx_packets"].as_u64().unwrap_or(0)
                + q["dropped"].as_u64().unwrap_or(0)
                + q["waiting"].as_u64().unwrap_or(0)
                > 0
            {
                let shaper = q["scheduler"].as_str().unwrap_or("strict");
                let state = match (q.get("credit_bits"), q.get("gate_open")) {
                    (Some(c), Some(g)) => {
                        format!("credit {c} bits, gate {}", if g == true { "open" } else { "closed" })
                    }
                    (Some(c), None) => format!("credit {c} bits"),
                    (None, Some(g)) => format!("gate {}", if g == true { "open" } else { "closed" }),
                    (None, None) => String::new(),
                };
                queue_rows.push(vec![
                    f(p, "no"),
                    f(q, "id"),
                    shaper.to_string(),
                    f(q, "tx_packets"),
                    f(q, "tx_bytes"),
                    f(q, "dropped"),
                    f(q, "waiting"),
                    state,
                ]);
            }
        }
    }
    out += "\nqueues in use (8 per port; 7 highest; a port with rate_mbps, or an AFDX port at its link speed, is paced and scheduled)\n";
    out += &table(&["port", "queue", "scheduler", "tx pkts", "tx bytes", "dropped", "waiting", "state"], queue_rows);
    let tables = r["tables"].as_array().unwrap_or(&empty);
    if !tables.is_empty() {
        out += "\ntables in use\n";
        out += &table(
            &["table", "flows", "lookups", "matched", "full", "evicted"],
            tables
                .iter()
                .map(|t| {
                    ["id", "flows", "lookups", "matched", "full_refusals", "evictions"]
                        .iter()
                        .map(|k| f(t, k))
                        .collect()
                })
                .collect(),
        );
    }
    let groups = r["mode_counters"].as_array().unwrap_or(&empty);
    if let Some(first) = groups.first() {
        // Every group of a mode has the same counters: one column each, one row a group.
        let names: Vec<String> = first["counters"].as_object().map(|c| c.keys().cloned().collect()).unwrap_or_default();
        let (mut headers, mut rows) = (vec![String::new()], Vec::new());
        headers.extend(names.iter().cloned());
        let flush = |headers: &mut Vec<String>, rows: &mut Vec<Vec<String>>, out: &mut String| {
            if !rows.is_empty() {
                let h: Vec<&str> = headers.iter().map(|s| s.as_str()).collect();
                *out += &table(&h, std::mem::take(rows));
            }
        };
        out += &format!("\n{} mode counters\n", n(&r["mode"]));
        for g in groups {
            let keys: Vec<String> = g["counters"].as_object().map(|c| c.keys().cloned().collect()).unwrap_or_default();
            if keys[..] != headers[1..] {
                flush(&mut headers, &mut rows, &mut out);
                headers.truncate(1);
                headers.extend(keys.iter().cloned());
            }
            let mut row = vec![n(&g["name"])];
            row.extend(keys.iter().map(|k| n(&g["counters"][k])));
            rows.push(row);
        }
        flush(&mut headers, &mut rows, &mut out);
    }
    if let Some(fp) = r["fast_path"].as_object() {
        out += "\nkernel fast path\n";
        let keys =
            ["hits", "misses", "upcalls", "slow", "entries", "installed", "refused", "retired", "evicted", "retried"];
        out += &table(&keys, vec![keys.iter().map(|k| n(&fp[*k])).collect()]);
        // Frames a label-switching mode's kernel part forwarded without userspace: on top of the
        // mode's own counters above. Its detours are cases (a) and (b); (c) is always userspace's.
        if let Some(labels) = fp.get("labels").and_then(|l| l.as_object()).filter(|l| l.values().any(|v| v != 0)) {
            out += "\nkernel label switching (frames on top of the mode counters; rerouted: cases a and b)\n";
            let keys: Vec<&str> = labels.keys().map(|k| k.as_str()).collect();
            out += &table(&keys, vec![labels.values().map(n).collect()]);
        }
        // A link-filtering mode's links the kernel decides; its frames are in the mode's counters.
        if let Some(links) = fp.get("links").and_then(|l| l.as_object()).filter(|l| l.values().any(|v| v != 0)) {
            out += "\nkernel virtual links (frames decided: in the mode counters above)\n";
            let keys: Vec<&str> = links.keys().map(|k| k.as_str()).collect();
            out += &table(&keys, vec![links.values().map(n).collect()]);
        }
        if let Some(attached) = fp.get("attachments").and_then(|a| a.as_array()).filter(|a| !a.is_empty()) {
            out += "\nkernel programs attached (how this kernel allowed)\n";
            let rows = attached.iter().map(|a| vec![n(&a["port"]), n(&a["kind"]), n(&a["link_id"])]).collect();
            out += &table(&["port", "attached as", "link id"], rows);
        }
        if let Some(ports) = fp.get("xdp_fallback").and_then(|a| a.as_array()).filter(|a| !a.is_empty()) {
            out += "\nXDP ports the kernel cannot redirect to natively (their frames go through TC)\n";
            let rows = ports
                .iter()
                .map(|p| {
                    let now = if p["now"].as_bool() == Some(false) { "no (again native)" } else { "yes" };
                    vec![n(&p["port"]), n(&p["name"]), n(&p["reason"]), now.to_string(), n(&p["frames"])]
                })
                .collect();
            out += &table(&["port", "interface", "reason", "through TC now", "frames"], rows);
        }
        if let Some(drops) = fp.get("drops").and_then(|d| d.as_object()) {
            out += "\nkernel drops by reason\n";
            out += &table(&["reason", "frames"], drops.iter().map(|(k, v)| vec![k.clone(), n(v)]).collect());
        }
    }
    out += "\ndropped frames by reason (userspace)\n";
    let drops = r["drops"].as_object().cloned().unwrap_or_default();
    out += &table(&["reason", "frames"], drops.iter().map(|(k, v)| vec![k.clone(), n(v)]).collect());
    if let Some(channel) = r["channel"].as_object() {
        out += "\ncontroller channel\n";
        let shown = |v: &Value| match v {
            Value::Bool(b) => if *b { "yes" } else { "no" }.to_string(),
            v => n(v),
        };
        out += &table(&["event", "count"], channel.iter().map(|(k, v)| vec![k.clone(), shown(v)]).collect());
    }
    out
}

/// `dump-flows --kernel` as text: one line a megaflow (as `ovs-ofctl dump-flows` writes a flow),
/// then the AFDX links and LESS entries where there are any.
pub fn render_kernel(d: &Value) -> String {
    let mut out = format!(
        "kernel fast path ({}): generation {}, {} masks, {} megaflows\n",
        n(&d["datapath"]),
        n(&d["generation"]),
        n(&d["masks"]),
        d["megaflows"].as_array().map_or(0, |a| a.len())
    );
    for f in d["megaflows"].as_array().into_iter().flatten() {
        let dead = if f["live"].as_bool() == Some(false) { " (old generation)" } else { "" };
        out += &format!(
            " packets={}, bytes={}, {} actions={}{dead}\n",
            n(&f["packets"]),
            n(&f["bytes"]),
            n(&f["match"]),
            n(&f["actions"])
        );
    }
    let links = d["afdx_links"].as_array().cloned().unwrap_or_default();
    if !links.is_empty() {
        out += &format!("\n{} AFDX virtual links\n", links.len());
        let rows = links
            .iter()
            .map(|l| {
                let outs: Vec<String> = l["out"].as_array().into_iter().flatten().map(n).collect();
                ["vl", "in_port", "smin", "smax"]
                    .iter()
                    .map(|k| n(&l[*k]))
                    .chain([outs.join(","), n(&l["frames_in"]), n(&l["frames_out"])])
                    .collect()
            })
            .collect();
        out += &table(&["vl", "in_port", "smin", "smax", "out", "frames_in", "frames_out"], rows);
    }
    if let Some(less) = d["less"].as_object() {
        let pushes = less["push"].as_array().cloned().unwrap_or_default();
        if !pushes.is_empty() || less["ports"].as_array().is_some_and(|p| !p.is_empty()) {
            out += &format!(
                "\nLESS: {} ports, {} reroute entries, label stacks pushed per destination:\n",
                less["ports"].as_array().map_or(0, |p| p.len()),
                n(&less["reroute_entries"])
            );
            let rows = pushes.iter().map(|p| vec![n(&p["dst"]), n(&p["port"]), n(&p["stack"])]).collect();
            out += &table(&["dst", "port", "stack"], rows);
        }
    }
    out
}
