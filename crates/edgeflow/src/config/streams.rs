//! `[[stream]]` (mode = "streams"): the TSN streams this switch filters and polices (IEEE
//! 802.1Qci) and replicates, relays or recovers (IEEE 802.1CB); docs/tsn.md. Checked line by line.

use serde::Deserialize;
use toml::Spanned;

use super::{Ctx, File, ModeSetting};

/// `[[stream]]`: one stream.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamEntry {
    pub name: Spanned<String>,
    /// Destination MAC ("01:80:c2:00:00:0e"), and VLAN id if the stream is tagged.
    pub dst: Spanned<String>,
    pub vid: Option<Spanned<u16>>,
    pub in_ports: Spanned<Vec<u32>>,
    pub out_ports: Spanned<Vec<u32>>,
    /// Number and tag the frames here (the talker's edge).
    #[serde(default)]
    pub generate: Option<Spanned<bool>>,
    /// Eliminate duplicates and untag here (the listener's edge).
    #[serde(default)]
    pub recover: Option<Spanned<bool>>,
    /// Recovery: the sequence numbers remembered (2-64, default 32), and how long without a frame
    /// before any number is taken again (default 100 ms).
    pub history_length: Option<Spanned<u32>>,
    pub reset_ms: Option<Spanned<u64>>,
    /// 802.1Qci: the largest service data unit (bytes after the Ethernet header and tags).
    pub max_sdu_bytes: Option<Spanned<u32>>,
    pub gate: Option<Spanned<GateEntryList>>,
    pub meter: Option<Spanned<MeterEntry>>,
}

/// `gate = { cycle_ns, base_time_ns, entries = [{ duration_ns, open, ipv }] }`: a stream gate.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateEntryList {
    pub cycle_ns: u64,
    #[serde(default)]
    pub base_time_ns: u64,
    pub entries: Vec<GateListItem>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateListItem {
    pub duration_ns: u64,
    pub open: bool,
    /// The egress queue (internal priority value) of the frames it lets through.
    pub ipv: Option<u8>,
}

/// `meter = { cir_kbps, cbs_bytes, eir_kbps, ebs_bytes, coupled, colour_aware, drop_on_yellow }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeterEntry {
    pub cir_kbps: u64,
    pub cbs_bytes: u64,
    #[serde(default)]
    pub eir_kbps: u64,
    #[serde(default)]
    pub ebs_bytes: u64,
    #[serde(default)]
    pub coupled: bool,
    #[serde(default)]
    pub colour_aware: bool,
    #[serde(default)]
    pub drop_on_yellow: bool,
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let octets: Vec<u8> = s.split(':').map(|o| u8::from_str_radix(o, 16).ok()).collect::<Option<_>>()?;
    octets.try_into().ok()
}

/// The streams mode's streams, ports checked against the mode's.
pub(super) fn streams(cx: &Ctx<'_>, file: &File, ports: &[(u32, String)]) -> Result<ModeSetting, String> {
    use forwarding::streams::{psfp, recovery::MAX_HISTORY, Stream};
    if file.streams.is_empty() {
        return Err(format!("{}: mode 'streams' needs [[stream]] entries", cx.path));
    }
    let known = |n: &u32| ports.iter().any(|(no, _)| no == n);
    let mut streams: Vec<Stream> = Vec::new();
    for e in &file.streams {
        let name = e.name.get_ref().clone();
        if streams.iter().any(|s| s.name == name) {
            return Err(cx.at(&e.name, format!("stream '{name}' is defined twice")));
        }
        let dst = parse_mac(e.dst.get_ref()).ok_or_else(|| {
            cx.at(&e.dst, format!("dst '{}': expected a MAC such as \"02:00:00:00:00:01\"", e.dst.get_ref()))
        })?;
        let vid = match &e.vid {
            Some(v) if !(1..=4094).contains(v.get_ref()) => return Err(cx.at(v, "vid must be 1-4094")),
            v => v.as_ref().map(|v| *v.get_ref()),
        };
        if let Some(other) = streams.iter().find(|s| s.dst == dst && s.vid == vid) {
            return Err(cx.at(&e.dst, format!("stream '{}' has the same destination and VLAN", other.name)));
        }
        for (list, what) in [(&e.in_ports, "in_ports"), (&e.out_ports, "out_ports")] {
            if list.get_ref().is_empty() {
                return Err(cx.at(list, format!("{what} needs at least one port")));
            }
            if let Some(p) = list.get_ref().iter().find(|p| !known(p)) {
                return Err(cx.at(list, format!("port {p} is not configured for mode streams")));
            }
        }
        if let Some(p) = e.out_ports.get_ref().iter().find(|p| e.in_ports.get_ref().contains(p)) {
            return Err(cx.at(&e.out_ports, format!("port {p} is also an input of the stream")));
        }
        let generate = e.generate.as_ref().is_some_and(|g| *g.get_ref());
        let recover = e.recover.as_ref().is_some_and(|r| *r.get_ref());
        if generate && recover {
            return Err(cx.at(e.recover.as_ref().unwrap(), "a stream is generated or recovered here, not both"));
        }
        let history = match &e.history_length {
            Some(h) if !(2..=MAX_HISTORY).contains(h.get_ref()) => {
                return Err(cx.at(h, format!("history_length must be 2-{MAX_HISTORY}")))
            }
            Some(h) => *h.get_ref(),
            None => 32,
        };
        let reset_ms = match &e.reset_ms {
            Some(r) if !(1..=60_000).contains(r.get_ref()) => return Err(cx.at(r, "reset_ms must be 1-60000")),
            Some(r) => *r.get_ref(),
            None => 100,
        };
        if !recover {
            let why = "history_length and reset_ms apply to a stream recovered here (recover = true)";
            if let Some(h) = &e.history_length {
                return Err(cx.at(h, why));
            }
            if let Some(r) = &e.reset_ms {
                return Err(cx.at(r, why));
            }
        }
        let max_sdu = match &e.max_sdu_bytes {
            Some(m) if !(1..=9216).contains(m.get_ref()) => return Err(cx.at(m, "max_sdu_bytes must be 1-9216")),
            m => m.as_ref().map(|m| *m.get_ref() as usize),
        };
        let gate = match &e.gate {
            None => None,
            Some(g) => {
                let l = g.get_ref();
                let sum: u64 = l.entries.iter().map(|i| i.duration_ns).sum();
                if l.entries.is_empty() || l.cycle_ns == 0 || l.entries.iter().any(|i| i.duration_ns == 0) {
                    return Err(cx.at(g, "gate: a cycle and entries of some duration are needed"));
                }
                if sum > l.cycle_ns {
                    return Err(
                        cx.at(g, format!("gate: the entries last {sum} ns, longer than the {} ns cycle", l.cycle_ns))
                    );
                }
                if let Some(q) = l.entries.iter().find_map(|i| i.ipv.filter(|&q| q > 7)) {
                    return Err(cx.at(g, format!("gate: ipv {q}: queues are 0-7")));
                }
                let entries = l
                    .entries
                    .iter()
                    .map(|i| psfp::GateEntry { duration_ns: i.duration_ns, open: i.open, ipv: i.ipv })
                    .collect();
                Some(psfp::Gate { base_ns: l.base_time_ns, cycle_ns: l.cycle_ns, entries })
            }
        };
        let meter = match &e.meter {
            None => None,
            Some(m) => {
                let v = m.get_ref();
                if v.cir_kbps + v.eir_kbps == 0 || (v.cbs_bytes == 0 && v.ebs_bytes == 0) {
                    return Err(cx.at(m, "meter: a rate and a burst size above 0 are needed"));
                }
                if v.cbs_bytes > 1 << 30 || v.ebs_bytes > 1 << 30 || v.cir_kbps > 1 << 30 || v.eir_kbps > 1 << 30 {
                    return Err(cx.at(m, "meter: burst sizes and rates are at most 2^30 (bytes, kbit/s)"));
                }
                Some(psfp::MeterConfig {
                    cir_bps: v.cir_kbps * 1000,
                    cbs_bytes: v.cbs_bytes,
                    eir_bps: v.eir_kbps * 1000,
                    ebs_bytes: v.ebs_bytes,
                    coupled: v.coupled,
                    colour_aware: v.colour_aware,
                    drop_on_yellow: v.drop_on_yellow,
                })
            }
        };
        streams.push(Stream {
            name,
            dst,
            vid,
            in_ports: e.in_ports.get_ref().clone(),
            out_ports: e.out_ports.get_ref().clone(),
            generate,
            recover: recover.then_some((history, reset_ms * 1_000_000)),
            max_sdu,
            gate,
            meter,
        });
    }
    Ok(ModeSetting::Streams(streams))
}

#[cfg(test)]
mod tests {
    use super::super::tests::from_str;
    use super::*;

    #[test]
    fn streams_and_their_errors_by_line() {
        let head = "mode = \"streams\"\n[[port]]\nname = \"a\"\n[[port]]\nname = \"b\"\n[[port]]\nname = \"c\"\n";
        // Line 8 on: one stream, a field a line.
        let stream = |extra: &str| {
            format!(
                "{head}[[stream]]\nname = \"s\"\ndst = \"02:00:00:00:00:09\"\nin_ports = [1]\n\
                 out_ports = [2, 3]\n{extra}"
            )
        };
        let s = from_str(&stream("generate = true\n")).unwrap();
        let ModeSetting::Streams(streams) = s.mode else { panic!("{:?}", s.mode) };
        assert_eq!(streams[0].dst, [2, 0, 0, 0, 0, 9]);
        assert!(streams[0].generate && streams[0].recover.is_none() && streams[0].vid.is_none());
        let s = from_str(&stream("recover = true\nvid = 10\nhistory_length = 8\n")).unwrap();
        let ModeSetting::Streams(streams) = s.mode else { panic!() };
        assert_eq!((streams[0].recover, streams[0].vid), (Some((8, 100_000_000)), Some(10)));

        let refused = |src: &str, line: usize, words: &str| {
            let e = from_str(src).unwrap_err();
            assert!(e.starts_with(&format!("sw.toml:{line}:")) && e.contains(words), "{e}");
        };
        refused(&stream("").replace("02:00:00:00:00:09", "02:00:00:00:09"), 10, "expected a MAC");
        refused(&stream("").replace("[2, 3]", "[2, 7]"), 12, "port 7 is not configured");
        refused(&stream("").replace("[2, 3]", "[1, 3]"), 12, "also an input");
        refused(&stream("generate = true\nrecover = true\n"), 14, "not both");
        refused(&stream("recover = true\nhistory_length = 100\n"), 14, "2-64");
        refused(&stream("reset_ms = 5\n"), 13, "recover = true");
        refused(&stream("vid = 0\n"), 13, "1-4094");
        let two = stream("") + &stream("")[head.len()..];
        refused(&two, 14, "defined twice");
        refused(&two.replacen("name = \"s\"", "name = \"t\"", 1), 15, "same destination");
        assert!(from_str(head).unwrap_err().contains("needs [[stream]]"));
        refused(&stream("").replace("\"streams\"", "\"learning\""), 9, "[[stream]] needs mode");
        let policed = stream("max_sdu_bytes = 500\nmeter = { cir_kbps = 8000, cbs_bytes = 3000, drop_on_yellow = true }\n\
                              gate = { cycle_ns = 10000000, entries = [{ duration_ns = 4000000, open = true, ipv = 6 }, \
                              { duration_ns = 6000000, open = false }] }\n");
        let ModeSetting::Streams(streams) = from_str(&policed).unwrap().mode else { panic!() };
        let s = &streams[0];
        assert_eq!(s.max_sdu, Some(500));
        assert_eq!(
            s.meter.map(|m| (m.cir_bps, m.cbs_bytes, m.eir_bps, m.drop_on_yellow)),
            Some((8_000_000, 3000, 0, true))
        );
        assert_eq!(
            s.gate.as_ref().map(|g| (g.cycle_ns, g.entries.len(), g.entries[0].ipv)),
            Some((10_000_000, 2, Some(6)))
        );
        refused(&policed.replace("6000000, open = false", "7000000, open = false"), 15, "longer than the");
        refused(&policed.replace("ipv = 6", "ipv = 9"), 15, "queues are 0-7");
        refused(&policed.replace("cbs_bytes = 3000", "cbs_bytes = 0"), 14, "burst size above 0");
        refused(&policed.replace("max_sdu_bytes = 500", "max_sdu_bytes = 0"), 13, "1-9216");
        refused(&policed.replace("drop_on_yellow", "drop_on_red"), 14, "unknown field");
    }
}
