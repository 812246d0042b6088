//! `[less]` (mode = "less"): the label switch's few settings. Labels carry port numbers in one
//! byte, so every port of a LESS switch must be numbered 1–255.

use serde::Deserialize;
use toml::Spanned;

use super::{Ctx, File, ModeSetting};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LessSection {
    /// This switch is the fabric's root.
    pub root: Option<Spanned<bool>>,
    /// Deeper label stacks are dropped.
    pub max_labels: Option<Spanned<u32>>,
    /// How often HELLOs go out, and after how long a silent neighbour is gone.
    pub hello_ms: Option<Spanned<u64>>,
    pub dead_ms: Option<Spanned<u64>>,
    /// How long a neighbour behind a port that lost carrier is kept (frames take detours
    /// meanwhile) before the addresses change.
    pub hold_ms: Option<Spanned<u64>>,
    /// How long a host of ours may stay silent before it is forgotten (seconds).
    pub host_idle_s: Option<Spanned<u64>>,
    /// The ports that lead to other LESS switches, by name; every other port is an edge port, and
    /// protocol frames arriving there are dropped. Without it, ports are found by their HELLOs.
    pub fabric_ports: Option<Spanned<Vec<Spanned<String>>>>,
    /// Hosts (addresses) of ours one edge port may have.
    pub max_hosts_per_port: Option<Spanned<u64>>,
    /// Host queries this switch may have out across the fabric at once.
    pub max_host_queries: Option<Spanned<u64>>,
}

/// The LESS mode's settings, with the ports checked against what a label can name.
pub(super) fn less(cx: &Ctx<'_>, file: &File, ports: &[(u32, String)]) -> Result<ModeSetting, String> {
    let mut cfg = forwarding::less::Config::default();
    if let Some(&(no, ref name)) = ports.iter().find(|(no, _)| *no > 255) {
        let reason = format!("port {no} ({name}): a LESS label names ports 1-255");
        let entry = file.ports.iter().find(|p| p.name.get_ref() == name);
        return Err(match entry.and_then(|p| p.number.as_ref()) {
            Some(n) => cx.at(n, reason),
            None => reason,
        });
    }
    if let Some(section) = &file.less {
        cfg.root = section.root.as_ref().is_some_and(|r| *r.get_ref());
        if let Some(m) = &section.max_labels {
            let n = *m.get_ref();
            if !(1..=64).contains(&n) {
                return Err(cx.at(m, format!("max_labels {n}: expected 1-64")));
            }
            cfg.max_labels = n as usize;
        }
        const MS: u64 = 1_000_000;
        if let Some(h) = &section.hello_ms {
            if !(1..=10_000).contains(h.get_ref()) {
                return Err(cx.at(h, format!("hello_ms {}: expected 1-10000", h.get_ref())));
            }
            cfg.hello_ns = h.get_ref() * MS;
            cfg.dead_ns = cfg.dead_ns.max(3 * cfg.hello_ns + cfg.hello_ns / 2);
        }
        if let Some(d) = &section.dead_ms {
            if d.get_ref() * MS <= cfg.hello_ns {
                return Err(cx.at(d, format!("dead_ms {}: must be longer than hello_ms", d.get_ref())));
            }
            cfg.dead_ns = d.get_ref() * MS;
        }
        if let Some(h) = &section.hold_ms {
            if *h.get_ref() > 3_600_000 {
                return Err(cx.at(h, format!("hold_ms {}: at most an hour", h.get_ref())));
            }
            cfg.hold_ns = h.get_ref() * MS;
        }
        if let Some(h) = &section.host_idle_s {
            if !(1..=86_400).contains(h.get_ref()) {
                return Err(cx.at(h, format!("host_idle_s {}: expected 1-86400 (a day)", h.get_ref())));
            }
            cfg.host_idle_ns = h.get_ref() * 1000 * MS;
        }
        if let Some(list) = &section.fabric_ports {
            let mut listed = std::collections::BTreeSet::new();
            for name in list.get_ref() {
                let Some(&(no, _)) = ports.iter().find(|(_, n)| n == name.get_ref()) else {
                    let known: Vec<&str> = ports.iter().map(|(_, n)| n.as_str()).collect();
                    return Err(cx.at(
                        name,
                        format!(
                            "fabric_ports: no LESS port is named \"{}\" (they are: {})",
                            name.get_ref(),
                            known.join(", ")
                        ),
                    ));
                };
                if !listed.insert(no as u8) {
                    return Err(cx.at(name, format!("fabric_ports: \"{}\" is listed twice", name.get_ref())));
                }
            }
            cfg.fabric_ports = Some(listed);
        }
        // Each announcement frame holds about a hundred hosts; the limits keep a switch's within
        // a few hundred frames and its queries within a few thousand a second.
        if let Some(m) = &section.max_hosts_per_port {
            if !(1..=4096).contains(m.get_ref()) {
                return Err(cx.at(m, format!("max_hosts_per_port {}: expected 1-4096", m.get_ref())));
            }
            cfg.max_hosts_per_port = *m.get_ref() as usize;
        }
        if let Some(m) = &section.max_host_queries {
            if !(1..=4096).contains(m.get_ref()) {
                return Err(cx.at(m, format!("max_host_queries {}: expected 1-4096", m.get_ref())));
            }
            cfg.max_host_queries = *m.get_ref() as usize;
        }
    }
    Ok(ModeSetting::Less(cfg))
}

#[cfg(test)]
mod tests {
    use super::super::tests::from_str;
    use super::*;

    #[test]
    fn less_settings_and_their_errors_by_line() {
        let head = "mode = \"less\"\n[[port]]\nname = \"a\"\n[[port]]\nname = \"b\"\n";
        assert_eq!(from_str(head).unwrap().mode, ModeSetting::Less(forwarding::less::Config::default()));
        let s = from_str(&format!("{head}[less]\nroot = true\nmax_labels = 8\nhold_ms = 2500\n")).unwrap();
        let want = forwarding::less::Config { max_labels: 8, root: true, hold_ns: 2_500_000_000, ..Default::default() };
        assert_eq!(s.mode, ModeSetting::Less(want));
        let e = from_str(&format!("{head}[less]\nhello_ms = 100\ndead_ms = 50\n")).unwrap_err();
        assert!(e.starts_with("sw.toml:8:") && e.contains("longer than hello_ms"), "{e}");
        let s = from_str(&format!("{head}[less]\nhost_idle_s = 60\n")).unwrap();
        let want = forwarding::less::Config { host_idle_ns: 60_000_000_000, ..Default::default() };
        assert_eq!(s.mode, ModeSetting::Less(want));
        let e = from_str(&format!("{head}[less]\nhost_idle_s = 0\n")).unwrap_err();
        assert!(e.starts_with("sw.toml:7:") && e.contains("expected 1-86400"), "{e}");
        let s =
            from_str(&format!("{head}[less]\nfabric_ports = [\"b\"]\nmax_hosts_per_port = 64\nmax_host_queries = 8\n"))
                .unwrap();
        let want = forwarding::less::Config {
            fabric_ports: Some([2].into()),
            max_hosts_per_port: 64,
            max_host_queries: 8,
            ..Default::default()
        };
        assert_eq!(s.mode, ModeSetting::Less(want));
        let s = from_str(&format!("{head}[less]\nfabric_ports = []\n")).unwrap();
        assert!(matches!(s.mode, ModeSetting::Less(ref c) if c.fabric_ports == Some(Default::default())), "all edge");
        let e = from_str(&format!("{head}[less]\nfabric_ports = [\"b\",\n  \"eth9\"]\n")).unwrap_err();
        assert!(e.starts_with("sw.toml:8:") && e.contains("no LESS port is named \"eth9\" (they are: a, b)"), "{e}");
        let e = from_str(&format!("{head}[less]\nfabric_ports = [\"b\", \"b\"]\n")).unwrap_err();
        assert!(e.starts_with("sw.toml:7:") && e.contains("listed twice"), "{e}");
        for key in ["max_hosts_per_port", "max_host_queries"] {
            let e = from_str(&format!("{head}[less]\n{key} = 0\n")).unwrap_err();
            assert!(e.starts_with("sw.toml:7:") && e.contains("expected 1-4096"), "{e}");
        }
        // A port of another mode is no LESS port.
        let shared = format!("{head}[[port]]\nname = \"c\"\nmode = \"learning\"\n[less]\nfabric_ports = [\"c\"]\n");
        let e = from_str(&shared).unwrap_err();
        assert!(e.starts_with("sw.toml:10:") && e.contains("no LESS port is named \"c\""), "{e}");
        let e = from_str(&format!("{head}[less]\nmax_labels = 0\n")).unwrap_err();
        assert!(e.starts_with("sw.toml:7:") && e.contains("expected 1-64"), "{e}");
        let e = from_str(&head.replace("name = \"b\"\n", "name = \"b\"\nnumber = 300\n")).unwrap_err();
        assert!(e.starts_with("sw.toml:6:") && e.contains("1-255"), "{e}");
        let e = from_str("[[port]]\nname = \"a\"\n[less]\nroot = true\n").unwrap_err();
        assert!(e.starts_with("sw.toml:4:") && e.contains("[less] needs mode = \"less\""), "{e}");
    }
}

/// Where a `[less]` section that is not wanted is: the line of its first setting.
pub(super) fn unwanted(cx: &Ctx<'_>, section: &LessSection) -> String {
    let reason = "[less] needs mode = \"less\"";
    let lines = [
        section.root.as_ref().map(|r| r.span().start),
        section.max_labels.as_ref().map(|m| m.span().start),
        section.hello_ms.as_ref().map(|h| h.span().start),
        section.dead_ms.as_ref().map(|d| d.span().start),
        section.hold_ms.as_ref().map(|h| h.span().start),
        section.host_idle_s.as_ref().map(|h| h.span().start),
        section.fabric_ports.as_ref().map(|f| f.span().start),
        section.max_hosts_per_port.as_ref().map(|m| m.span().start),
        section.max_host_queries.as_ref().map(|m| m.span().start),
    ];
    match lines.into_iter().flatten().min() {
        Some(at) => format!("{}:{}: {reason}", cx.path, super::line_of(cx.src, at)),
        None => format!("{}: {reason}", cx.path),
    }
}
