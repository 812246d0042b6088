//! `[p4]` (mode = "p4"): the P4 program the switch runs (docs/p4.md), and what its tables and
//! multicast groups hold at start. The program is compiled here, so that `check-config` and a
//! reload report its errors, and every entry is checked against it at its own line.

use std::path::Path;

use forwarding::p4::{Config, ConfigError, Entry, Match};
use serde::Deserialize;
use toml::Spanned;

use super::{Ctx, File, ModeSetting};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct P4Section {
    /// The program's file; a relative path is the configuration file's directory's.
    pub program: Spanned<String>,
    /// The program's kernel object, compiled where clang is (`edgeflow p4 compile PROGRAM -o
    /// OBJECT`): tc and xdp load it instead of compiling the program, so a device needs no
    /// clang. Relative to the configuration file's directory, as `program` is.
    pub object: Option<Spanned<String>>,
    /// The port number that is the control plane, as BMv2's `--cpu-port` (docs/p4.md,
    /// P4Runtime): a copy the program sends there is a packet-in, a packet-out arrives on it.
    /// No switch port may have it.
    pub cpu_port: Option<Spanned<u32>>,
    #[serde(default, rename = "entry")]
    pub entries: Vec<P4Entry>,
    #[serde(default, rename = "group")]
    pub groups: Vec<P4Group>,
    #[serde(default, rename = "meter")]
    pub meters: Vec<P4Meter>,
    #[serde(default, rename = "value_set")]
    pub value_sets: Vec<P4ValueSet>,
}

/// `[[p4.value_set]]`: a parser's value set and all its members at start (a P4Runtime MODIFY
/// replaces them).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct P4ValueSet {
    /// `Parser.set`, as in the program.
    pub name: Spanned<String>,
    /// Each member one match per field of the set's type, written as an entry's `match` is
    /// ("0x88b5", "0x8800&&&0xff00", "_").
    pub members: Spanned<Vec<Vec<toml::Value>>>,
}

/// `[[p4.meter]]`: one cell of a meter (RFC 2698): rates in the meter's units (packets or
/// bytes) per second, bursts in its units.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct P4Meter {
    /// `Block.meter`, as in the program.
    pub name: Spanned<String>,
    #[serde(default)]
    pub index: usize,
    pub cir: u64,
    pub cburst: u64,
    pub pir: u64,
    pub pburst: u64,
}

/// `[[p4.entry]]`: one table entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct P4Entry {
    /// `Block.table`, as in the program.
    pub table: Spanned<String>,
    /// One per key: a value (42, "0x2a", "02:00:00:00:00:01", "10.0.0.1"), "value/prefix" (lpm),
    /// "value&&&mask" (ternary), "low..high" (range) or "_" (anything).
    #[serde(rename = "match")]
    pub keys: Spanned<Vec<toml::Value>>,
    pub action: Spanned<String>,
    /// The action's data, in its parameters' order: numbers, MACs or IPv4 addresses.
    #[serde(default)]
    pub args: Option<Spanned<Vec<toml::Value>>>,
    /// Orders ternary and range entries: higher first.
    pub priority: Option<Spanned<i64>>,
    /// Its cell of the table's direct meter: [committed rate, burst, peak rate, burst].
    pub meter: Option<[u64; 4]>,
}

/// `[[p4.group]]`: a multicast group and its ports.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct P4Group {
    pub id: Spanned<u16>,
    pub ports: Spanned<Vec<u32>>,
}

/// A number, a MAC address or a dotted IPv4 address.
fn number(s: &str) -> Result<u128, String> {
    let bad = || format!("'{s}': expected a number, a MAC (02:00:00:00:00:01) or an IPv4 address (10.0.0.1)");
    if let Some(hex) = s.strip_prefix("0x") {
        return u128::from_str_radix(hex, 16).map_err(|_| bad());
    }
    if let Ok(n) = s.parse::<u128>() {
        return Ok(n);
    }
    let (parts, radix, n): (Vec<&str>, u32, usize) =
        if s.contains(':') { (s.split(':').collect(), 16, 6) } else { (s.split('.').collect(), 10, 4) };
    if parts.len() != n {
        return Err(bad());
    }
    parts.iter().try_fold(0u128, |v, p| u8::from_str_radix(p, radix).map(|b| (v << 8) | b as u128).map_err(|_| bad()))
}

/// A key as an operator writes it on the command line (`edgeflow p4 insert --match`).
pub fn parse_key(s: &str) -> Result<Match, String> {
    key(&toml::Value::String(s.into()))
}

/// A value as an operator writes it: a number, a MAC or an IPv4 address.
pub fn parse_value(s: &str) -> Result<u128, String> {
    number(s)
}

fn value(v: &toml::Value) -> Result<u128, String> {
    match v {
        toml::Value::Integer(i) if *i >= 0 => Ok(*i as u128),
        toml::Value::String(s) => number(s),
        other => Err(format!("{other}: expected a number, a MAC or an IPv4 address")),
    }
}

fn key(v: &toml::Value) -> Result<Match, String> {
    let toml::Value::String(s) = v else { return value(v).map(Match::Exact) };
    if s == "_" {
        return Ok(Match::Any);
    }
    if let Some((v, m)) = s.split_once("&&&") {
        return Ok(Match::Ternary { value: number(v.trim())?, mask: number(m.trim())? });
    }
    if let Some((v, p)) = s.split_once('/') {
        let prefix = p.trim().parse().map_err(|_| format!("'{s}': the prefix length is not a number"))?;
        return Ok(Match::Lpm { value: number(v.trim())?, prefix });
    }
    if let Some((a, b)) = s.split_once("..") {
        return Ok(Match::Range { low: number(a.trim())?, high: number(b.trim())? });
    }
    number(s).map(Match::Exact)
}

/// The P4 mode's setting from `[p4]`, checked against the program; `at` places an error on the
/// line that chose the mode.
pub(super) fn p4(
    cx: &Ctx,
    file: &File,
    ports: &[(u32, String)],
    at: &dyn Fn(String) -> String,
) -> Result<ModeSetting, String> {
    let Some(section) = &file.p4 else {
        return Err(at("mode 'p4' needs a [p4] section naming its program (program = \"switch.p4\")".into()));
    };
    let path = Path::new(cx.path).parent().unwrap_or(Path::new(".")).join(section.program.get_ref());
    let source =
        std::fs::read_to_string(&path).map_err(|e| cx.at(&section.program, format!("{}: {e}", path.display())))?;
    let mut entries = Vec::new();
    for e in &section.entries {
        let keys = e.keys.get_ref().iter().map(key).collect::<Result<Vec<_>, _>>().map_err(|m| cx.at(&e.keys, m))?;
        let args = match &e.args {
            Some(a) => a.get_ref().iter().map(value).collect::<Result<Vec<_>, _>>().map_err(|m| cx.at(a, m))?,
            None => Vec::new(),
        };
        let priority = e.priority.as_ref().map_or(0, |p| *p.get_ref());
        entries.push(Entry {
            table: e.table.get_ref().clone(),
            keys,
            action: e.action.get_ref().clone(),
            args,
            priority,
            meter: e.meter,
        });
    }
    let mut groups = Vec::new();
    for g in &section.groups {
        if let Some(p) = g.ports.get_ref().iter().find(|p| !ports.iter().any(|(no, _)| no == *p)) {
            return Err(cx.at(&g.ports, format!("port {p} is not configured for mode p4")));
        }
        if *g.id.get_ref() == 0 || groups.iter().any(|(id, _)| id == g.id.get_ref()) {
            return Err(cx.at(&g.id, format!("group {}: ids are 1-65535, each once", g.id.get_ref())));
        }
        groups.push((*g.id.get_ref(), g.ports.get_ref().clone()));
    }
    let meters = section
        .meters
        .iter()
        .map(|m| (m.name.get_ref().clone(), m.index, [m.cir, m.cburst, m.pir, m.pburst]))
        .collect();
    let mut value_sets: Vec<(String, Vec<Vec<Match>>)> = Vec::new();
    for v in &section.value_sets {
        if value_sets.iter().any(|(n, _)| n == v.name.get_ref()) {
            return Err(cx.at(
                &v.name,
                format!("value set {} is given twice: one [[p4.value_set]] holds all its members", v.name.get_ref()),
            ));
        }
        let members = v
            .members
            .get_ref()
            .iter()
            .map(|m| m.iter().map(key).collect::<Result<Vec<_>, _>>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|m| cx.at(&v.members, m))?;
        value_sets.push((v.name.get_ref().clone(), members));
    }
    let cpu_port = section.cpu_port.as_ref().map(|p| *p.get_ref());
    if let Some(p) = section.cpu_port.as_ref().filter(|p| ports.iter().any(|(no, _)| no == p.get_ref())) {
        return Err(cx.at(p, format!("cpu_port {}: a switch port has that number", p.get_ref())));
    }
    let file = path.display().to_string();
    let mut cfg = Config { file, source, entries, groups, meters, value_sets, object: None, cpu_port };
    match forwarding::p4::P4Mode::new(&cfg) {
        Ok(_) => {
            if let Some(object) = &section.object {
                cfg.object = Some(kernel_object(cx, object, &cfg)?);
            }
            Ok(ModeSetting::P4(cfg))
        }
        Err(ConfigError::Program(m)) => Err(m),
        Err(ConfigError::Entry(i, m)) => Err(cx.at(&section.entries[i].table, m)),
        Err(ConfigError::Meter(i, m)) => Err(cx.at(&section.meters[i].name, m)),
        Err(ConfigError::ValueSet(i, m)) => Err(cx.at(&section.value_sets[i].name, m)),
    }
}

/// `[p4] object`'s bytes, refused at its line unless it is the program's object as this edgeflow
/// generates it (the fingerprint `edgeflow p4 compile` put in it).
fn kernel_object(cx: &Ctx, object: &Spanned<String>, cfg: &Config) -> Result<Vec<u8>, String> {
    let path = Path::new(cx.path).parent().unwrap_or(Path::new(".")).join(object.get_ref());
    let elf = std::fs::read(&path).map_err(|e| cx.at(object, format!("{}: {e}", path.display())))?;
    let (program, checked) = p4::front_end(&cfg.file, &cfg.source)?;
    let generated = p4::backends::ebpf::generate_in(&cfg.file, &program, &checked).map_err(|e| {
        cx.at(
            object,
            format!("{}: the program does not fit the kernel back end ({e}): no object runs it", path.display()),
        )
    })?;
    datapath::fastpath::p4::check_fingerprint(&generated, &elf)
        .map_err(|e| cx.at(object, format!("{}: {e}", path.display())))?;
    Ok(elf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_read_as_an_operator_writes_them() {
        assert_eq!(number("02:00:00:00:00:0a"), Ok(0x0200_0000_000a));
        assert_eq!(number("10.1.2.3"), Ok(0x0a01_0203));
        assert_eq!(number("0x2a"), Ok(42));
        assert!(number("10.1.2").unwrap_err().contains("expected a number, a MAC"));
        let s = |x: &str| toml::Value::String(x.into());
        assert_eq!(key(&s("10.0.0.0/8")), Ok(Match::Lpm { value: 0x0a00_0000, prefix: 8 }));
        assert_eq!(key(&s("0x10 &&& 0xf0")), Ok(Match::Ternary { value: 0x10, mask: 0xf0 }));
        assert_eq!(key(&s("1..5")), Ok(Match::Range { low: 1, high: 5 }));
        assert_eq!(key(&s("_")), Ok(Match::Any));
        assert_eq!(key(&toml::Value::Integer(7)), Ok(Match::Exact(7)));
    }

    /// `[[p4.value_set]]` seeds a parser's value set, every member checked against the set.
    #[test]
    fn value_set_members_are_read_and_checked_at_their_lines() {
        let private = datapath::sys::PrivateDir::new("ef-p4-config-vs").unwrap();
        let dir = private.path();
        let program = "#include <edgeflow.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }
struct h_t { eth_t eth; }
struct m_t { bit<1> hit; }
parser P(packet_in pk, out h_t hdr, inout m_t meta, inout standard_metadata_t sm) {
    value_set<bit<16>>(2) kinds;
    state start { pk.extract(hdr.eth); transition select(hdr.eth.kind) { kinds: hit; default: accept; } }
    state hit { meta.hit = 1; transition accept; }
}
control I(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) {
    apply { sm.egress_port = meta.hit == 1 ? 32w2 : 32w1; }
}
control E(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out pk, in h_t hdr) { apply { pk.emit(hdr.eth); } }
EdgeflowSwitch(P(), I(), E(), D()) main;
";
        std::fs::write(dir.join("vs.p4"), program).unwrap();
        let path = dir.join("sw.toml");
        let config = |body: &str| {
            std::fs::write(&path, format!("mode = \"p4\"\n[[port]]\nname = \"a\"\n[p4]\nprogram = \"vs.p4\"\n{body}"))
                .unwrap();
            super::super::load_file(&path)
                .and_then(|(f, src)| super::super::settings(Some((&f, &src, &path)), &Default::default()))
        };
        let good = "[[p4.value_set]]\nname = \"P.kinds\"\nmembers = [[\"0x88b5\"], [\"0x8800&&&0xff00\"]]\n";
        let s = config(good).unwrap();
        let ModeSetting::P4(cfg) = &s.mode else { panic!("{:?}", s.mode) };
        let want = vec![vec![Match::Exact(0x88b5)], vec![Match::Ternary { value: 0x8800, mask: 0xff00 }]];
        assert_eq!(cfg.value_sets, [("P.kinds".to_string(), want)]);
        let mut mode = forwarding::p4::P4Mode::new(cfg).unwrap();
        let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0x01];
        frame.extend_from_slice(&[0; 46]);
        assert_eq!(mode.switch_mut().process(&frame, 1, 0).unwrap()[0].port, 2, "a member at start matches");
        let sw = path.display().to_string();
        let e = config(&good.replace("P.kinds", "P.other")).unwrap_err();
        assert_eq!(e, format!("{sw}:7: no value set 'P.other'"));
        let e = config(&good.replace("[\"0x88b5\"], ", "[\"0x88b5\"], [\"1\"], ")).unwrap_err();
        assert_eq!(e, format!("{sw}:7: P.kinds holds 2 members, not 3"));
        let e = config(&good.replace("0x88b5", "0x188b5")).unwrap_err();
        assert_eq!(e, format!("{sw}:7: Exact(100533) does not fit P.kinds's 16-bit field"));
        let e = config(&good.replace("0x88b5", "x")).unwrap_err();
        assert!(e.starts_with(&format!("{sw}:8: 'x': expected a number")), "{e}");
        let e = config(&format!("{good}{good}")).unwrap_err();
        assert!(e.starts_with(&format!("{sw}:10: value set P.kinds is given twice")), "{e}");
    }

    #[test]
    fn the_program_and_its_entries_are_checked_at_their_lines() {
        let private = datapath::sys::PrivateDir::new("ef-p4-config").unwrap();
        let dir = private.path();
        let program = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/p4/l2_switch.p4");
        std::fs::copy(&program, dir.join("l2.p4")).unwrap();
        std::fs::write(dir.join("bad.p4"), "#include <edgeflow.p4>\nheader h { bit<7> x; }\n").unwrap();
        let ports = "[[port]]\nname = \"a\"\n[[port]]\nname = \"b\"\n";
        let config_with = |top: &str, body: &str| {
            let path = dir.join("sw.toml");
            std::fs::write(&path, format!("{top}{ports}{body}")).unwrap();
            super::super::load_file(&path)
                .and_then(|(f, src)| super::super::settings(Some((&f, &src, &path)), &Default::default()))
        };
        let config = |body: &str| config_with("mode = \"p4\"\n", body);
        let good = "[p4]\nprogram = \"l2.p4\"\n[[p4.entry]]\ntable = \"L2Ingress.dmac\"\nmatch = [0, \"02:00:00:00:00:02\"]\naction = \"forward\"\nargs = [2]\n[[p4.group]]\nid = 1\nports = [1, 2]\n";
        let s = config(good).unwrap();
        let ModeSetting::P4(cfg) = &s.mode else { panic!("{:?}", s.mode) };
        assert_eq!((cfg.entries.len(), cfg.groups.clone()), (1, vec![(1, vec![1, 2])]));
        let sw = dir.join("sw.toml").display().to_string();
        let e = config(&good.replace("\"forward\"", "\"drop\"")).unwrap_err();
        assert_eq!(e, format!("{sw}:9: L2Ingress.dmac has no action 'drop' (it has forward, flood)"));
        let e = config(&good.replace("args = [2]", "args = [2]\nmeter = [1000, 1, 2000, 2]")).unwrap_err();
        assert_eq!(e, format!("{sw}:9: L2Ingress.dmac has no direct meter (meters = ...)"));
        let e = config(&good.replace("args = [2]", "args = [\"2.0\"]")).unwrap_err();
        assert!(e.starts_with(&format!("{sw}:12: '2.0': expected a number")), "{e}");
        let e = config(&good.replace("ports = [1, 2]", "ports = [1, 3]")).unwrap_err();
        assert_eq!(e, format!("{sw}:15: port 3 is not configured for mode p4"));
        let e = config("[p4]\nprogram = \"bad.p4\"\n").unwrap_err();
        assert!(e.ends_with("bad.p4:2:19: a header is whole bytes; this one's fields add up to 7 bits"), "{e}");
        // P4Runtime's address: a port alone is loopback; it serves a P4 program or nothing.
        let s = config_with("mode = \"p4\"\np4runtime = \"9559\"\n", good).unwrap();
        assert_eq!(s.p4runtime, Some("127.0.0.1:9559".parse().unwrap()));
        let e = config_with("mode = \"p4\"\np4runtime = \"nine\"\n", good).unwrap_err();
        assert_eq!(e, format!("{sw}:2: p4runtime 'nine': expected PORT or ADDR:PORT (IPv6 as [ADDR]:PORT)"));
        // `tls:` serves with the switch's certificate, which it must have.
        let e = config_with("mode = \"p4\"\np4runtime = \"tls:9559\"\n", good).unwrap_err();
        assert!(e.starts_with(&format!("{sw}:2: tls:9559 serves with the switch's certificate")), "{e}");
        let tls = "[tls]\nprivate_key = \"k\"\ncertificate = \"c\"\nca_cert = \"ca\"\n";
        let s = config_with(&format!("mode = \"p4\"\np4runtime = \"tls:0.0.0.0:9559\"\n{tls}"), good).unwrap();
        assert_eq!((s.p4runtime, s.p4runtime_tls), (Some("0.0.0.0:9559".parse().unwrap()), true));
        let e = config_with("mode = \"learning\"\np4runtime = \"[::1]:9559\"\n", "").unwrap_err();
        assert_eq!(e, format!("{sw}:2: P4Runtime serves a P4 program's tables: it needs mode = \"p4\""));
        let e = config("").unwrap_err();
        assert_eq!(e, format!("{sw}:1: mode 'p4' needs a [p4] section naming its program (program = \"switch.p4\")"));
        // A kernel object made elsewhere: only the program's own, as this edgeflow generates it.
        let router = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/p4/ipv4_router.p4");
        let (p, c) = p4::front_end("ipv4_router.p4", &std::fs::read_to_string(router).unwrap()).unwrap();
        let generated = p4::backends::ebpf::generate(&p, &c).unwrap();
        std::fs::write(dir.join("router.o"), datapath::ebpf::clang::compile("router", &generated.c).unwrap()).unwrap();
        std::fs::write(dir.join("fastpath.o"), datapath::ebpf::objects::FASTPATH).unwrap();
        let with_object = |o: &str| {
            config(&good.replace("program = \"l2.p4\"\n", &format!("program = \"l2.p4\"\nobject = \"{o}\"\n")))
        };
        let e = with_object("router.o").unwrap_err();
        let (l2_program, l2_checked) =
            p4::front_end("l2.p4", &std::fs::read_to_string(dir.join("l2.p4")).unwrap()).unwrap();
        let l2 = p4::backends::ebpf::generate(&l2_program, &l2_checked).unwrap().fingerprint;
        assert_eq!(
            e,
            format!(
                "{sw}:8: {}: the object was compiled from another program, or by another version of edgeflow (its \
                 fingerprint {}, this program's {l2}); compile it again from this program with this edgeflow (edgeflow \
                 p4 compile PROGRAM -o OBJECT)",
                dir.join("router.o").display(),
                generated.fingerprint
            )
        );
        if datapath::ebpf::objects::BUILT {
            let e = with_object("fastpath.o").unwrap_err();
            assert!(e.starts_with(&format!("{sw}:8: ")) && e.contains("has no edgeflow_p4 section"), "{e}");
        }
        let e = with_object("none.o").unwrap_err();
        assert!(e.starts_with(&format!("{sw}:8: {}: No such file", dir.join("none.o").display())), "{e}");
    }
}
