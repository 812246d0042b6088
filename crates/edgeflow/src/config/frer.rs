//! `[[frer.stream]]` (mode = "frer"): the streams this switch replicates, relays or recovers
//! (IEEE 802.1CB, docs/tsn.md), checked line by line.

use serde::Deserialize;
use toml::Spanned;

use super::{Ctx, File, ModeSetting};

/// `[frer]`: the stream table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrerSection {
    #[serde(default)]
    pub stream: Vec<StreamEntry>,
}

/// `[[frer.stream]]`: one stream.
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
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let octets: Vec<u8> = s.split(':').map(|o| u8::from_str_radix(o, 16).ok()).collect::<Option<_>>()?;
    octets.try_into().ok()
}

/// The FRER mode's streams, ports checked against the mode's.
pub(super) fn frer(cx: &Ctx<'_>, file: &File, ports: &[(u32, String)]) -> Result<ModeSetting, String> {
    use forwarding::frer::{recovery::MAX_HISTORY, Stream};
    let Some(section) = file.frer.as_ref().filter(|f| !f.stream.is_empty()) else {
        return Err(format!("{}: mode 'frer' needs [[frer.stream]] entries", cx.path));
    };
    let known = |n: &u32| ports.iter().any(|(no, _)| no == n);
    let mut streams: Vec<Stream> = Vec::new();
    for e in &section.stream {
        let name = e.name.get_ref().clone();
        if streams.iter().any(|s| s.name == name) {
            return Err(cx.at(&e.name, format!("stream '{name}' is defined twice")));
        }
        let dst = parse_mac(e.dst.get_ref())
            .ok_or_else(|| cx.at(&e.dst, format!("dst '{}': expected a MAC such as \"02:00:00:00:00:01\"", e.dst.get_ref())))?;
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
                return Err(cx.at(list, format!("port {p} is not configured for mode frer")));
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
            if let Some(f) = e.history_length.as_ref().map(|h| h.span()).or(e.reset_ms.as_ref().map(|r| r.span())) {
                return Err(format!(
                    "{}:{}: history_length and reset_ms apply to a stream recovered here (recover = true)",
                    cx.path,
                    super::line_of(cx.src, f.start)
                ));
            }
        }
        streams.push(Stream {
            name,
            dst,
            vid,
            in_ports: e.in_ports.get_ref().clone(),
            out_ports: e.out_ports.get_ref().clone(),
            generate,
            recover: recover.then_some((history, reset_ms * 1_000_000)),
        });
    }
    Ok(ModeSetting::Frer(streams))
}

#[cfg(test)]
mod tests {
    use super::super::tests::from_str;
    use super::*;

    #[test]
    fn streams_and_their_errors_by_line() {
        let head = "mode = \"frer\"\n[[port]]\nname = \"a\"\n[[port]]\nname = \"b\"\n[[port]]\nname = \"c\"\n";
        // Line 8 on: one stream, a field a line.
        let stream = |extra: &str| {
            format!(
                "{head}[[frer.stream]]\nname = \"s\"\ndst = \"02:00:00:00:00:09\"\nin_ports = [1]\n\
                 out_ports = [2, 3]\n{extra}"
            )
        };
        let s = from_str(&stream("generate = true\n")).unwrap();
        let ModeSetting::Frer(streams) = s.mode else { panic!("{:?}", s.mode) };
        assert_eq!(streams[0].dst, [2, 0, 0, 0, 0, 9]);
        assert!(streams[0].generate && streams[0].recover.is_none() && streams[0].vid.is_none());
        let s = from_str(&stream("recover = true\nvid = 10\nhistory_length = 8\n")).unwrap();
        let ModeSetting::Frer(streams) = s.mode else { panic!() };
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
        assert!(from_str(&format!("{head}[frer]\n")).unwrap_err().contains("needs [[frer.stream]]"));
        refused(&stream("").replace("\"frer\"", "\"learning\""), 9, "[frer] needs mode");
    }
}

/// Where a `[frer]` section that is not wanted is: its first stream's line.
pub(super) fn unwanted(cx: &Ctx<'_>, section: &FrerSection) -> String {
    let reason = "[frer] needs mode = \"frer\"";
    match section.stream.first() {
        Some(s) => cx.at(&s.name, reason),
        None => format!("{}: {reason}", cx.path),
    }
}
