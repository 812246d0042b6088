//! `[afdx]` and `[[afdx.vl]]`: the AFDX mode's virtual-link table, checked line by line.

use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::{line_of, load_file, Ctx, File, ModeSetting};

/// `[afdx]` (mode = "afdx"): the static virtual-link table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AfdxSection {
    /// The destination MAC's 32-bit constant field, as four hex octets ("03:00:00:00").
    pub mac_constant: Option<Spanned<String>>,
    /// The network this switch is on, "A" or "B": the other network's frames are dropped.
    pub network: Option<Spanned<String>>,
    /// Pace every port without `rate_mbps` to its link's speed (default true), so that a
    /// backlog builds in its queues, where high-priority VLs leave first.
    pub pace_to_link_speed: Option<bool>,
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
    /// Check the frames' IPv4 and UDP headers beside the VL's own checks.
    #[serde(default)]
    pub ip_check: bool,
}

/// The AFDX virtual-link table, or `None` when the file has none. The mode checks the table
/// itself; here its refusals get the line of the field they are about, and ports are checked
/// against the switch's.
pub(super) fn afdx(cx: &Ctx<'_>, file: &File, ports: &[(u32, String)]) -> Result<Option<ModeSetting>, String> {
    afdx_table(cx, file, Some(ports))
}

/// The AFDX table of a config file alone (for `edgeflow afdx compile`): checked like the running
/// switch's, but against the file's own `[[port]]` entries only if it has any. With the MAC
/// constant and the network (`[afdx] network`) when the file names one.
pub fn load_afdx(path: &Path) -> Result<(Vec<forwarding::afdx::VirtualLink>, u32, Option<u8>), String> {
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
        Some(ModeSetting::Afdx { vls, mac_constant, network }) => Ok((vls, mac_constant, network)),
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
    let network = match &section.network {
        None => None,
        Some(n) => Some(match n.get_ref().as_str() {
            "A" | "a" => afdx::NETWORK_A,
            "B" | "b" => afdx::NETWORK_B,
            other => return Err(cx.at(n, format!("network '{other}': expected \"A\" or \"B\""))),
        }),
    };
    let known = |n: u32| ports.is_none_or(|ports| ports.iter().any(|(no, _)| *no == n));
    let mut vls = Vec::new();
    for e in &section.vl {
        if !known(*e.in_port.get_ref()) {
            return Err(cx.at(&e.in_port, format!("port {} is not configured for mode afdx", e.in_port.get_ref())));
        }
        if let Some(p) = e.out_ports.get_ref().iter().find(|&&p| !known(p)) {
            return Err(cx.at(&e.out_ports, format!("port {p} is not configured for mode afdx")));
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
            ip_check: e.ip_check,
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
    Ok(Some(ModeSetting::Afdx { vls, mac_constant, network }))
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
    use super::super::tests::from_str;
    use super::*;

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
        let ModeSetting::Afdx { vls, mac_constant, .. } = s.mode else { panic!("{:?}", s.mode) };
        assert_eq!(mac_constant, 0x0300_0000);
        assert_eq!(vls.len(), 1);
        let v = &vls[0];
        assert_eq!((v.id, v.in_port, v.out_ports.clone(), v.bag_ns), (10, 1, vec![2, 3], 4_000_000));
        assert_eq!(
            (v.smin, v.smax, v.jitter_ns, v.priority, v.police),
            (64, 512, 500_000, Priority::High, Police::Byte)
        );

        // Every port is paced to its link unless it has a rate or the section says not to; port
        // 2's link speed is the config's.
        let paced = |src: &str| {
            let s = from_str(src).unwrap();
            (1..=3)
                .map(|no| s.egress.iter().find(|(n, _)| *n == no).map(|(_, e)| (e.pace_to_link, e.link_mbps)))
                .collect::<Vec<_>>()
        };
        let with_rates = vl("")
            .replace("name = \"b\"\n", "name = \"b\"\nlink_mbps = 100\n")
            .replace("name = \"c\"\n", "name = \"c\"\nrate_mbps = 10\n");
        assert_eq!(paced(&with_rates), [Some((true, None)), Some((true, Some(100))), Some((false, None))]);
        let off = with_rates.replace("[[afdx.vl]]", "[afdx]\npace_to_link_speed = false\n[[afdx.vl]]");
        assert_eq!(paced(&off), [None, Some((false, Some(100))), Some((false, None))]);

        let refused = |src: &str, line: usize, words: &str| {
            let e = from_str(src).unwrap_err();
            assert!(e.starts_with(&format!("sw.toml:{line}:")) && e.contains(words), "{e}");
        };
        refused(&vl("").replace("name = \"b\"\n", "name = \"b\"\nlink_mbps = 0\n"), 6, "link_mbps must be above 0");
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
        let s = from_str(&format!("{head}[afdx]\nnetwork = \"B\"\n{one}ip_check = true\n")).unwrap();
        let ModeSetting::Afdx { vls, network, .. } = s.mode else { panic!("{:?}", s.mode) };
        assert_eq!((network, vls[0].ip_check), (Some(forwarding::afdx::NETWORK_B), true));
        assert!(matches!(from_str(&vl("")).unwrap().mode, ModeSetting::Afdx { network: None, .. }));
        refused(&format!("{head}[afdx]\nnetwork = \"C\"\n{one}"), 9, "expected \"A\" or \"B\"");
        refused(&format!("{head}[afdx]\nmac_constant = \"02:00:00:00\"\n"), 1, "needs [[afdx.vl]]");
        refused(&vl("").replace("\"afdx\"", "\"learning\""), 9, "needs mode");
    }

    #[test]
    fn a_vl_table_alone_loads_for_compiling() {
        let private = datapath::sys::PrivateDir::new("ef-config-test").unwrap();
        let dir = private.path();
        let vl =
            "[[afdx.vl]]\nid = 7\nin_port = 1\nout_ports = [9]\nbag_ms = 8\nsmin = 64\nsmax = 64\npriority = \"low\"\n";
        let bare = dir.join("bare.toml");
        std::fs::write(&bare, vl).unwrap();
        let (vls, constant, network) = load_afdx(&bare).unwrap();
        assert_eq!((vls.len(), vls[0].out_ports.clone(), constant, network), (1, vec![9], 0x0300_0000, None));
        // The network the file names comes with the table (for `afdx compile` without --network).
        let on_b = dir.join("on-b.toml");
        std::fs::write(&on_b, format!("[afdx]\nnetwork = \"B\"\n{vl}")).unwrap();
        assert_eq!(load_afdx(&on_b).unwrap().2, Some(forwarding::afdx::NETWORK_B));
        // With [[port]] entries, the ports are checked as for a running switch.
        let with_ports = dir.join("ports.toml");
        std::fs::write(&with_ports, format!("[[port]]\nname = \"a\"\n{vl}")).unwrap();
        let e = load_afdx(&with_ports).unwrap_err();
        assert!(e.ends_with(":6: port 9 is not configured for mode afdx"), "{e}");
        let none = dir.join("none.toml");
        std::fs::write(&none, "mode = \"afdx\"\n").unwrap();
        assert!(load_afdx(&none).unwrap_err().contains("no [[afdx.vl]] entries"));
    }
}
