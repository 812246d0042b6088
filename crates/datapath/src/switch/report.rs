//! The switch's own report (`edgeflow stats`): ports, queues, the mode's tables, the kernel fast
//! path and drop reasons, as JSON in an experimenter multipart reply on any OpenFlow connection.

use forwarding::DropReason;
use serde_json::{json, Value};

use super::Switch;
use crate::egress::N_QUEUES;
use crate::schedule::Shaper;

/// edgeflow's experimenter id ("EFLW": not an IEEE OUI, so it names no registered vendor).
pub const EXPERIMENTER: u32 = 0x4546_4c57;
/// The experimenter multipart type of the stats report.
pub const STATS_REPORT: u32 = 1;
/// The experimenter multipart type that reads the log filter (empty data) or sets it (the new
/// filter, UTF-8): `edgeflow log-level`. The reply's data is JSON, `{"filter": …}` or
/// `{"error": …}`.
pub const LOG_FILTER: u32 = 2;
/// The experimenter multipart type of `edgeflow dump-flows --kernel`: what the kernel's maps
/// hold, as JSON (`FastPath::dump`).
pub const KERNEL_DUMP: u32 = 3;
/// A request of the mode's own control protocol (`edgeflow p4`): its text in, `{"ok": text}` or
/// `{"error": text}` out.
pub const MODE_CONTROL: u32 = 4;

/// The experimenter multipart type that panics the forwarding thread, for the test that a panic
/// ends the process (`tests/test_service.py`). Unless the binary armed it at start
/// ([`arm_test_panic`], from `EDGEFLOW_TEST_PANIC`) it is an unknown type like any other, and
/// a slave controller may never send it.
pub const TEST_PANIC: u32 = 0x7e57;

/// Whether a slave controller may send the edgeflow experimenter request `exp_type` with `data`.
/// OpenFlow gives a slave read access (spec 1.3.5 §6.3.5), so it may read the report, the log
/// filter, the kernel's maps (the flows it may read anyway, as the kernel holds them) and a
/// mode's tables and counters; it may not set the log filter, write a mode's tables, or send a
/// type this does not name: a type added later is refused to it until it is judged here.
pub fn slave_may_send(exp_type: u32, data: &[u8]) -> bool {
    match exp_type {
        STATS_REPORT | KERNEL_DUMP => true,
        LOG_FILTER => matches!(wanted_filter(data), Ok(None)),
        MODE_CONTROL => forwarding::control_only_reads(&String::from_utf8_lossy(data)),
        _ => false,
    }
}

static TEST_PANIC_ARMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes [`TEST_PANIC`] panic the forwarding thread. Only the binary calls it, at start, when
/// its environment asks (docs/security.md): whoever sets a service's environment controls the
/// service already, while a request that could crash every switch would be a remote off switch.
pub fn arm_test_panic() {
    TEST_PANIC_ARMED.store(true, std::sync::atomic::Ordering::Relaxed);
}

pub(super) fn test_panic_armed() -> bool {
    TEST_PANIC_ARMED.load(std::sync::atomic::Ordering::Relaxed)
}

/// What changes the process's log filter: given a new one (or none, to read it), the filter now
/// in force, or why the new one was refused.
pub type LogControl = Box<dyn Fn(Option<&str>) -> Result<String, String> + Send + Sync>;

/// Logging is the process's, not a switch's (tracing has one global subscriber): the binary
/// that set it up registers how to change it, once.
static LOG_CONTROL: std::sync::OnceLock<LogControl> = std::sync::OnceLock::new();

pub fn set_log_control(control: LogControl) {
    let _ = LOG_CONTROL.set(control);
}

/// What a `LOG_FILTER` request's data asks for: `None` to read the filter, the new filter to set
/// it; an error if it is not UTF-8.
fn wanted_filter(data: &[u8]) -> Result<Option<&str>, std::str::Utf8Error> {
    Ok(Some(std::str::from_utf8(data)?.trim()).filter(|w| !w.is_empty()))
}

/// A `LOG_FILTER` request's answer.
pub(super) fn log_filter(data: &[u8]) -> Value {
    let Ok(wanted) = wanted_filter(data) else { return json!({"error": "the filter is not UTF-8"}) };
    match LOG_CONTROL.get().map(|control| control(wanted)) {
        None => json!({"error": "this process's logging cannot be changed while it runs"}),
        Some(Ok(filter)) => json!({"filter": filter}),
        Some(Err(e)) => json!({"error": e}),
    }
}

impl Switch {
    pub(super) fn report(&mut self) -> Value {
        let now = self.now();
        let ports: Vec<Value> = self
            .ports
            .iter_mut()
            .filter(|(_, p)| p.tx.is_some())
            .map(|(&no, p)| {
                let live = p.desc.state & ofp::port::state::LINK_DOWN == 0 && !p.blocked();
                let s = p.stats(no);
                let queues: Vec<Value> = (0..N_QUEUES)
                    .map(|q| {
                        let qs = p.egress.stats(q);
                        let mut v = json!({"id": q, "tx_packets": qs.tx_packets, "tx_bytes": qs.tx_bytes,
                                           "dropped": qs.dropped, "waiting": p.egress.waiting(q)});
                        if let Some(s) = p.egress.scheduler() {
                            let shaper = match s.schedule.shapers[q] {
                                Shaper::Strict => "strict",
                                Shaper::Drr { .. } => "drr",
                                Shaper::Cbs(_) => "cbs",
                            };
                            v["scheduler"] = json!(shaper);
                            if let Some(c) = s.credit_bits(q) {
                                v["credit_bits"] = json!(c);
                            }
                            if let Some(g) = &s.schedule.gates {
                                v["gate_open"] = json!(g.is_open(q, now));
                            }
                        }
                        v
                    })
                    .collect();
                let rate = p.egress.scheduler().map(|s| s.schedule.rate_bps);
                let paced = p.egress.scheduler().map(|_| if p.link_paced_mbps.is_some() { "link" } else { "config" });
                json!({"no": no, "name": p.desc.name, "up": live, "io": p.io, "ring_frames": p.ring_frames, "rate_bps": rate, "paced": paced,
                       "rx_packets": s.rx_packets, "rx_bytes": s.rx_bytes, "rx_dropped": s.rx_dropped,
                       "socket_rx_packets": p.counters.socket_rx_packets,
                       "socket_rx_queues": p.rx.as_ref().map(|rx| rx.queue_rx_packets()).unwrap_or_default(),
                       "rx_errors": s.rx_errors, "tx_packets": s.tx_packets, "tx_bytes": s.tx_bytes,
                       "tx_dropped": s.tx_dropped, "link_changes": p.counters.link_changes,
                       "removed": p.counters.removed, "guard_link_id": p.guard.as_ref().and_then(|g| g.link_id()),
                       "guard_attached": p.guard.as_ref().map(|g| g.kind),
                       "guard_reattached": p.counters.guard_reattached, "queues": queues})
            })
            .collect();
        let tables: Vec<Value> = self
            .mode
            .tables()
            .iter()
            .map(|t| {
                json!({"id": t.id, "flows": t.flows, "lookups": t.lookups, "matched": t.matched,
                       "full_refusals": t.full_refusals, "evictions": t.evictions})
            })
            .collect();
        let mode_counters: Vec<Value> = self
            .mode
            .counters()
            .into_iter()
            .map(|g| {
                let counters: serde_json::Map<String, Value> =
                    g.counters.into_iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
                json!({"name": g.name, "counters": counters})
            })
            .collect();
        let fast = self.fast.as_ref().map(|f| {
            let [hits, misses, upcalls, slow, _] = f.counters();
            let drops: serde_json::Map<String, Value> =
                f.drops().into_iter().map(|(r, n)| (r.to_string(), json!(n))).collect();
            let mut labels: serde_json::Map<String, Value> =
                f.label_counters().into_iter().map(|(r, n)| (r.to_string(), json!(n))).collect();
            // Ports the carrier guard wrote down before the forwarding thread had heard.
            labels.insert("ports_marked_down".into(), json!(f.ports_marked_down()));
            let mut links: serde_json::Map<String, Value> =
                f.link_counters().into_iter().map(|(r, n)| (r.to_string(), json!(n))).collect();
            if self.mode.kernel().links.is_some() {
                links.insert("kept_for_priority".into(), json!(self.links_kept_for_priority));
            }
            // A P4 program in the kernel: the frames it sent up, by why (the mode counts the rest).
            #[cfg(feature = "p4")]
            let p4 = f.p4_program().map(|p| {
                let (no_port, misfit) = p.sent_up();
                json!({"sent_up_no_kernel_port": no_port, "sent_up_misfit": misfit})
            });
            #[cfg(not(feature = "p4"))]
            let p4: Option<Value> = None;
            // XDP ports the kernel cannot redirect to natively: their frames go through TC.
            let xdp_fallback: Vec<Value> = f
                .xdp_fallback_ports()
                .map(|(no, p)| json!({"port": no, "name": p.name, "reason": p.why.label(), "now": p.now, "frames": p.frames}))
                .collect();
            json!({"hits": hits, "misses": misses, "upcalls": upcalls, "slow": slow, "xdp_fallback": xdp_fallback,
                   "entries": f.len(), "installed": f.installed, "refused": f.refused, "crowded": f.crowded, "moved": f.moved, "retired": f.retired, "evicted": f.evicted, "retried": f.retried, "drops": drops,
                   "reattached": f.reattached, "attachments": f.attachments().into_iter().map(|(no, kind, id)| json!({"port": no, "kind": kind, "link_id": id})).collect::<Vec<_>>(),
                   "labels": labels, "links": links, "p4": p4,
                   "kept": f.kept().map(|(dir, inherited)| json!({"dir": dir.display().to_string(), "inherited_entries": inherited}))})
        });
        let drops: serde_json::Map<String, Value> =
            DropReason::ALL.iter().map(|&r| (r.name().to_string(), json!(self.drops.get(r)))).collect();
        let datapath = crate::fastpath::datapath_name(self.cfg.fastpath);
        let mut channel: serde_json::Map<String, Value> =
            self.channel.snapshot().into_iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
        channel.insert("fail_open".into(), json!(self.fail_open));
        channel.insert("fail_open_entered".into(), json!(self.fail_open_entered));
        json!({
            "dpid": format!("{:016x}", self.cfg.dpid),
            "pid": std::process::id(),
            "mode": self.mode.name(),
            "datapath": datapath,
            "uptime_s": self.start.elapsed().as_secs_f64(),
            "start_time_s": self.started_unix,
            "ports": ports,
            "tables": tables,
            "mode_counters": mode_counters,
            "fast_path": fast,
            "drops": drops,
            "channel": channel,
            "controllers": self.channel.controllers().into_iter()
                .map(|(target, connected)| json!({"target": target, "connected": connected}))
                .collect::<Vec<_>>(),
            "reloads": {
                "applied": self.reloads.0,
                "refused": self.reloads.1,
                "last": self.reloads.2.as_ref().map(|(applied, message)| json!({
                    "result": if *applied { "applied" } else { "refused" },
                    "message": message,
                })),
            },
        })
    }
}
