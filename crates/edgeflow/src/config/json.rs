//! `edgeflow check-config --json`: what the switch would run with, in the file's own keys, so that
//! a script reads the same names it writes. The file's tables are kept as written (every section
//! has been checked by then); the switch-wide keys are the merged, defaulted values, each written
//! out even where the file left it to its default; each port gets its number.

use agent::FailMode;
use datapath::switch::Timing;
use serde_json::{json, Map, Value};

use super::Settings;

/// `src`: the file's text (already parsed once by `settings`, so it parses).
pub fn effective(s: &Settings, src: &str) -> Value {
    let mut out: Map<String, Value> = toml::from_str::<toml::Table>(src)
        .ok()
        .and_then(|t| serde_json::to_value(t).ok())
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default();
    let switch_wide = json!({
        "dpid": format!("0x{:016x}", s.dpid),
        "fail_mode": match s.fail_mode { FailMode::Secure => "secure", FailMode::Standalone => "standalone" },
        "tables": s.n_tables,
        "datapath": datapath::fastpath::datapath_name(s.fastpath),
        "io": match s.io { datapath::PortIo::AfPacket => "af_packet", datapath::PortIo::AfXdp => "af_xdp" },
        "poll": s.poll.name(),
        "fastpath_entries": s.fastpath_entries,
        "keep_fastpath": s.keep_fastpath,
        "kernel_compat": if s.legacy_attach { "legacy" } else { "auto" },
        "mode": s.mode.name(),
        "probe_interval": s.probe_interval.as_secs(),
        "fail_open_delay": s.fail_open_delay.as_secs(),
        "packet_in_rate": s.packet_in_rate,
        "channel_output_limit": s.channel_output_limit,
        "max_connections": s.max_connections,
        "max_handshakes": s.max_handshakes,
        "max_request_bytes": s.max_request_bytes,
        "controller_packet_in_rate": s.controller_packet_in_rate,
        "ring_frames": s.ring_frames,
        "controllers": s.controllers.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
        "listen": s.listen.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
        "egress_timing": match s.timing { Timing::Sleep => "sleep", Timing::Fifo => "fifo", Timing::Busy => "busy" },
        "egress_cpu": s.cpu,
        "metrics": s.metrics.map(|a| a.to_string()),
        "p4runtime": s.p4runtime.map(|a| a.to_string()),
    });
    for (k, v) in switch_wide.as_object().into_iter().flatten() {
        out.insert(k.clone(), v.clone());
    }
    if let Some(local) = &s.local_port {
        out.insert("local_port".into(), json!(local));
    }
    // Each port as written, with its number; ports the flags added, by name and number.
    let written: Vec<Value> = out.get("port").and_then(Value::as_array).cloned().unwrap_or_default();
    let ports: Vec<Value> = s
        .ports
        .iter()
        .map(|(no, name)| {
            let mut p = written
                .iter()
                .find(|w| w["name"].as_str() == Some(name.as_str()))
                .and_then(|w| w.as_object().cloned())
                .unwrap_or_default();
            p.insert("name".into(), json!(name));
            p.insert("number".into(), json!(no));
            if let Some((m, _)) = s.port_modes.iter().find(|(_, ports)| ports.contains(no)) {
                p.insert("mode".into(), json!(m.name()));
            }
            Value::Object(p)
        })
        .collect();
    out.insert("port".into(), Value::Array(ports));
    if let Some(tls) = &s.tls {
        let mut t = out.get("tls").and_then(Value::as_object).cloned().unwrap_or_default();
        t.insert("private_key".into(), json!(tls.private_key));
        t.insert("certificate".into(), json!(tls.certificate));
        t.insert("ca_cert".into(), json!(tls.ca_cert));
        out.insert("tls".into(), Value::Object(t));
    }
    Value::Object(out)
}

/// The same as TOML, the file's own syntax: keys without a value (TOML has no null) are left out.
pub fn as_toml(v: &Value) -> String {
    fn strip(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                Value::Object(m.iter().filter(|(_, x)| !x.is_null()).map(|(k, x)| (k.clone(), strip(x))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
            other => other.clone(),
        }
    }
    toml::to_string(&strip(v)).unwrap_or_else(|e| format!("# cannot be written as TOML: {e}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn defaults_are_written_out_and_sections_kept_as_written() {
        let src = "datapath = \"tc\"\nlisten = [\"ptcp:6634\"]\n[[port]]\nname = \"eth1\"\nrate_mbps = 100.0\n\
                   [[port]]\nname = \"eth2\"\nnumber = 7\n[[table]]\nid = 0\nmax_flows = 10\n";
        let s = super::super::from_text(src, Path::new("t.toml")).unwrap();
        let v = effective(&s, src);
        assert_eq!(v["datapath"], "tc");
        assert_eq!(v["fail_mode"], "secure");
        assert_eq!(v["tables"], 64);
        assert_eq!(v["packet_in_rate"], 2000);
        assert_eq!(v["listen"], json!(["ptcp:6634:127.0.0.1"]));
        assert_eq!(v["metrics"], Value::Null);
        assert_eq!(
            v["port"],
            json!([{"name": "eth1", "number": 1, "rate_mbps": 100.0}, {"name": "eth2", "number": 7}])
        );
        assert_eq!(v["table"], json!([{"id": 0, "max_flows": 10}]));
        // And back as TOML, which is a config that gives the same settings.
        let again = as_toml(&v);
        let s2 = super::super::from_text(&again, Path::new("again.toml")).unwrap();
        assert_eq!(effective(&s2, &again), v, "{again}");
    }
}
