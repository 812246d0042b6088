//! A port's egress: `rate_mbps`, `link_mbps`, `pcp_map`, `[[port.queue]]` and `[port.gates]`,
//! checked line by line.

use datapath::egress::{GateClock, Limit, PortEgress};
use datapath::schedule::{annex_l_bounds, frame_wire_bits, CbsClass, GateEntry, Gates, Schedule, Shaper, N_QUEUES};
use serde::Deserialize;
use toml::Spanned;

use super::{Ctx, PortEntry};

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
    /// CBS: the reserved rate; the credit bounds are derived as 802.1Q Annex L does, from the
    /// classes above and the frames below, unless given.
    pub idleslope_kbps: Option<Spanned<u64>>,
    pub hicredit_bits: Option<Spanned<i64>>,
    pub locredit_bits: Option<Spanned<i64>>,
    /// CBS: the class's largest frame, FCS included (default 1522).
    pub max_frame_bytes: Option<Spanned<u32>>,
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

/// A port's `rate_mbps`, `link_mbps`, `[[port.queue]]` and `[port.gates]`, checked: None if it
/// has none.
pub(super) fn port_egress(cx: &Ctx<'_>, p: &PortEntry) -> Result<Option<PortEgress>, String> {
    if p.rate_mbps.is_none() && p.queues.is_empty() && p.gates.is_none() && p.pcp_map.is_none() && p.link_mbps.is_none()
    {
        return Ok(None);
    }
    let link_mbps = match &p.link_mbps {
        Some(l) if *l.get_ref() == 0 => return Err(cx.at(l, "link_mbps must be above 0")),
        l => l.as_ref().map(|l| *l.get_ref()),
    };
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
    // Credit-based classes, and bounds given in the config, applied once every class is known.
    let mut classes: [Option<CbsClass>; N_QUEUES] = [None; N_QUEUES];
    let mut given: [(Option<i64>, Option<i64>); N_QUEUES] = [(None, None); N_QUEUES];
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
                let max_frame = match &q.max_frame_bytes {
                    Some(b) if !(64..=9216).contains(b.get_ref()) => {
                        return Err(cx.at(b, "max_frame_bytes must be between 64 and 9216"));
                    }
                    Some(b) => *b.get_ref(),
                    None => 1522,
                };
                classes[id] = Some(CbsClass { idle_slope_bps: idle, max_frame_bits: frame_wire_bits(max_frame) });
                if let Some(h) = &q.hicredit_bits {
                    if *h.get_ref() <= 0 {
                        return Err(cx.at(h, "hicredit_bits must be above 0"));
                    }
                    given[id].0 = Some(*h.get_ref());
                }
                if let Some(l) = &q.locredit_bits {
                    if *l.get_ref() >= 0 {
                        return Err(cx.at(l, "locredit_bits must be below 0"));
                    }
                    given[id].1 = Some(*l.get_ref());
                }
                Shaper::Strict // the bounds come once every class is known
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
            if let Some(f) = &q.max_frame_bytes {
                return Err(cx.at(f, format!("queue {id}: max_frame_bytes applies to scheduler 'cbs' only")));
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
    if let Some(rate) = rate_bps {
        for (q, bounds) in annex_l_bounds(rate, &classes).into_iter().enumerate() {
            if let Some(mut c) = bounds {
                c.hi_credit_bits = given[q].0.unwrap_or(c.hi_credit_bits);
                c.lo_credit_bits = given[q].1.unwrap_or(c.lo_credit_bits);
                shapers[q] = Shaper::Cbs(c);
            }
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
            let s = Schedule { rate_bps, shapers, gates, catch_up_ns: None };
            s.check().map_err(|e| cx.at(p.rate_mbps.as_ref().unwrap(), format!("port '{}': {e}", p.name.get_ref())))?;
            Some(s)
        }
        None => None,
    };
    Ok(Some(PortEgress { schedule, gate_clock, limits, pcp_map, pace_to_link: false, link_mbps }))
}

#[cfg(test)]
mod tests {
    use super::super::tests::from_str;
    use super::*;
    use datapath::schedule::{Cbs, MAX_FRAME_BITS};
    use datapath::switch::Timing;

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
        // Two classes: the lower one's hiCredit counts the upper one (802.1Q Annex L, class B).
        let two = "[[port]]\nname = \"a\"\nrate_mbps = 100\n[[port.queue]]\nid = 6\nscheduler = \"cbs\"\n\
                   idleslope_kbps = 20000\nmax_frame_bytes = 522\n[[port.queue]]\nid = 5\nscheduler = \"cbs\"\n\
                   idleslope_kbps = 30000\n";
        let classes = from_str(two).unwrap();
        let shapers = &classes.egress[0].1.schedule.as_ref().unwrap().shapers;
        let (a, b) = (frame_wire_bits(522), MAX_FRAME_BITS);
        let class_a = Cbs { idle_slope_bps: 20_000_000, hi_credit_bits: b * 20 / 100, lo_credit_bits: -a * 80 / 100 };
        let class_b = Cbs {
            idle_slope_bps: 30_000_000,
            hi_credit_bits: 30 * b / 80 + 30 * a / 100,
            lo_credit_bits: -b * 70 / 100,
        };
        assert_eq!((&shapers[6], &shapers[5]), (&Shaper::Cbs(class_a), &Shaper::Cbs(class_b)));
        let err = from_str(&format!("{two}max_frame_bytes = 20\n")).unwrap_err();
        assert!(err.starts_with("sw.toml:13:") && err.contains("between 64 and 9216"), "{err}");
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
        assert_eq!(from_str("egress_cpu = 0\n[[port]]\nname = \"a\"\n").unwrap().cpu, Some(0));
        let e = from_str("\negress_cpu = 4096\n[[port]]\nname = \"a\"\n").unwrap_err();
        assert!(e.starts_with("sw.toml:2:") && e.contains("this machine has CPUs 0 to"), "{e}");
    }
}
