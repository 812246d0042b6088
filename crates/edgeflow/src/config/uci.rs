//! OpenWrt's configuration (UCI, `/etc/config/edgeflow`) as the TOML edgeflow reads: the procd
//! script (`packaging/openwrt/edgeflow.init`) renders it with `edgeflow uci` before each start and
//! reload. The common settings map one to one; anything else stays in a TOML file the UCI config
//! names (`option include`), which the rendering appends.
//!
//! ```text
//! config edgeflow 'main'                  # switch-wide keys, one section
//!     option datapath 'tc'
//!     list controller 'tcp:192.0.2.1:6653'
//! config port                             # one per [[port]]
//!     option name 'lan1'
//! ```

/// How a UCI value (always text) is written in TOML.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Text,
    Integer,
    Number,
    /// UCI's booleans: 1/0, true/false, on/off, yes/no, enabled/disabled (as `config_get_bool`).
    Bool,
}

/// `option` keys of the `edgeflow` section: (UCI name, TOML key, kind). `list` keys: below.
const SWITCH: &[(&str, &str, Kind)] = &[
    ("dpid", "dpid", Kind::Text),
    ("datapath", "datapath", Kind::Text),
    ("io", "io", Kind::Text),
    ("poll", "poll", Kind::Text),
    ("mode", "mode", Kind::Text),
    ("fail_mode", "fail_mode", Kind::Text),
    ("tables", "tables", Kind::Integer),
    ("probe_interval", "probe_interval", Kind::Integer),
    ("fail_open_delay", "fail_open_delay", Kind::Integer),
    ("packet_in_rate", "packet_in_rate", Kind::Integer),
    ("fastpath_entries", "fastpath_entries", Kind::Integer),
    ("kernel_compat", "kernel_compat", Kind::Text),
    ("ring_frames", "ring_frames", Kind::Integer),
    ("local_port", "local_port", Kind::Text),
    ("metrics", "metrics", Kind::Text),
    ("egress_timing", "egress_timing", Kind::Text),
    ("keep_fastpath", "keep_fastpath", Kind::Bool),
];
const SWITCH_LISTS: &[(&str, &str)] = &[("controller", "controllers"), ("listen", "listen")];
/// Keys the init script reads and the switch does not.
const SERVICE_ONLY: &[&str] = &["enabled", "log", "include", "user"];
const PORT: &[(&str, &str, Kind)] = &[
    ("name", "name", Kind::Text),
    ("number", "number", Kind::Integer),
    ("mode", "mode", Kind::Text),
    ("io", "io", Kind::Text),
    ("rate_mbps", "rate_mbps", Kind::Number),
    ("link_mbps", "link_mbps", Kind::Integer),
];

/// One `config` section: its type, and its options and lists in order, with their lines.
struct Section {
    kind: String,
    line: usize,
    values: Vec<(String, String, usize, bool)>,
}

/// Splits a UCI line into words: single or double quotes, backslash escapes outside single
/// quotes, `#` starting a comment outside quotes (as `uci import` reads it).
fn words(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        match chars.peek() {
            None | Some('#') => return Ok(out),
            _ => {}
        }
        let mut word = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                break;
            }
            chars.next();
            match c {
                '\'' => loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => word.push(x),
                        None => return Err("a quote (') is not closed".into()),
                    }
                },
                '"' => loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => word.extend(chars.next()),
                        Some(x) => word.push(x),
                        None => return Err("a quote (\") is not closed".into()),
                    }
                },
                '\\' => word.extend(chars.next()),
                x => word.push(x),
            }
        }
        out.push(word);
    }
}

fn parse(src: &str, path: &str) -> Result<Vec<Section>, String> {
    let mut sections: Vec<Section> = Vec::new();
    for (i, line) in src.lines().enumerate() {
        let n = i + 1;
        let at = |reason: String| format!("{path}:{n}: {reason}");
        let w = words(line).map_err(at)?;
        match w.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
            [] | ["package", _] => {}
            ["config", kind] | ["config", kind, _] => {
                sections.push(Section { kind: kind.to_string(), line: n, values: Vec::new() })
            }
            [verb @ ("option" | "list"), name, value] => match sections.last_mut() {
                Some(s) => s.values.push((name.to_string(), value.to_string(), n, *verb == "list")),
                None => return Err(at(format!("'{verb} {name}' before any 'config' section"))),
            },
            _ => {
                return Err(at(format!(
                    "expected 'config TYPE [NAME]', 'option NAME VALUE' or 'list NAME VALUE': {line}"
                )))
            }
        }
    }
    Ok(sections)
}

fn toml_value(value: &str, kind: Kind) -> Result<String, String> {
    Ok(match kind {
        Kind::Text => toml::Value::String(value.to_string()).to_string(),
        Kind::Integer => value.parse::<i64>().map_err(|_| format!("'{value}' is not a whole number"))?.to_string(),
        Kind::Number => {
            value.parse::<f64>().map_err(|_| format!("'{value}' is not a number"))?;
            if value.contains('.') {
                value.to_string()
            } else {
                format!("{value}.0")
            }
        }
        Kind::Bool => match value {
            "1" | "true" | "on" | "yes" | "enabled" => "true".to_string(),
            "0" | "false" | "off" | "no" | "disabled" => "false".to_string(),
            _ => return Err(format!("'{value}' is not a boolean (1 or 0)")),
        },
    })
}

/// The TOML of a UCI file; `include`, if the file names one, is `(path, text)` of the TOML
/// appended. Every refusal names the file, the line and the reason.
pub fn to_toml(src: &str, path: &str, include: impl Fn(&str) -> Result<String, String>) -> Result<String, String> {
    render(src, path, include).map(|r| r.text)
}

/// A rendering, and where each of its lines came from.
struct Rendered {
    text: String,
    /// Per line of `text`: (file, line) it was written from; (_, 0) for lines of its own.
    origin: Vec<(String, usize)>,
}

/// Text being written, each line with its origin.
#[derive(Default)]
struct Lines {
    text: String,
    origin: Vec<(String, usize)>,
}

impl Lines {
    fn push(&mut self, line: &str, path: &str, from: usize) {
        self.text += line;
        self.text.push('\n');
        self.origin.push((path.to_string(), from));
    }
}

/// Renders and checks as `run --config` would; a refusal of the rendering names the UCI line
/// (or the included file's) it came from.
pub fn checked(src: &str, path: &str, include: impl Fn(&str) -> Result<String, String>) -> Result<String, String> {
    let r = render(src, path, include)?;
    let name = "<rendered>";
    match super::from_text(&r.text, std::path::Path::new(name)) {
        Ok(_) => Ok(r.text),
        Err(e) => {
            let located = e.strip_prefix(name).and_then(|rest| rest.strip_prefix(':')).and_then(|rest| {
                let (n, reason) = rest.split_once(':')?;
                let (file, line) = r.origin.get(n.parse::<usize>().ok()?.checked_sub(1)?)?;
                Some(if *line > 0 { format!("{file}:{line}:{reason}") } else { format!("{file}:{reason}") })
            });
            Err(located.unwrap_or(e))
        }
    }
}

fn render(src: &str, path: &str, include: impl Fn(&str) -> Result<String, String>) -> Result<Rendered, String> {
    let sections = parse(src, path)?;
    let mut top = Lines::default();
    let mut ports = Lines::default();
    let mut extra = Lines::default();
    let switches: Vec<&Section> = sections.iter().filter(|s| s.kind == "edgeflow").collect();
    if let [_, second, ..] = switches.as_slice() {
        return Err(format!("{path}:{}: a second 'config edgeflow' section: the switch has one", second.line));
    }
    for s in &sections {
        let (options, lists): (&[(&str, &str, Kind)], &[(&str, &str)]) = match s.kind.as_str() {
            "edgeflow" => (SWITCH, SWITCH_LISTS),
            "port" => (PORT, &[]),
            other => return Err(format!("{path}:{}: section type '{other}': expected 'edgeflow' or 'port'", s.line)),
        };
        let out = if s.kind == "port" {
            ports.push("", path, 0);
            ports.push("[[port]]", path, s.line);
            &mut ports
        } else {
            &mut top
        };
        let mut gathered: Vec<(&str, Vec<String>, usize)> = Vec::new();
        for (name, value, line, is_list) in &s.values {
            let at = |reason: String| format!("{path}:{line}: {reason}");
            if s.kind == "edgeflow" && SERVICE_ONLY.contains(&name.as_str()) {
                if name == "include" {
                    let text = include(value).map_err(|e| at(format!("include '{value}': {e}")))?;
                    extra.push("", path, 0);
                    extra.push(&format!("# from {value}"), path, *line);
                    for (i, l) in text.lines().enumerate() {
                        extra.push(l, value, i + 1);
                    }
                }
                continue;
            }
            if let Some((_, key)) = lists.iter().find(|(n, _)| n == name) {
                let v = toml_value(value, Kind::Text).map_err(at)?;
                match gathered.iter_mut().find(|(k, _, _)| k == key) {
                    Some((_, vs, _)) => vs.push(v),
                    None => gathered.push((key, vec![v], *line)),
                }
                continue;
            }
            match options.iter().find(|(n, _, _)| n == name) {
                Some((_, key, kind)) if !is_list => {
                    let v = toml_value(value, *kind).map_err(|e| at(format!("option {name}: {e}")))?;
                    out.push(&format!("{key} = {v}"), path, *line);
                }
                Some(_) => return Err(at(format!("'{name}' is an option, not a list"))),
                None => {
                    let known: Vec<&str> = options
                        .iter()
                        .map(|(n, _, _)| *n)
                        .chain(lists.iter().map(|(n, _)| *n))
                        .chain(if s.kind == "edgeflow" { SERVICE_ONLY } else { &[] }.iter().copied())
                        .collect();
                    return Err(at(format!(
                        "'{name}' is not a {} setting here (known: {}); others go in the TOML file 'option include' names",
                        s.kind,
                        known.join(", ")
                    )));
                }
            }
        }
        for (key, values, line) in gathered {
            out.push(&format!("{key} = [{}]", values.join(", ")), path, line);
        }
    }
    let mut all = Lines::default();
    all.push(&format!("# Rendered from {path} by `edgeflow uci`: edit that file, not this one."), path, 0);
    for part in [top, ports, extra] {
        all.text += &part.text;
        all.origin.extend(part.origin);
    }
    Ok(Rendered { text: all.text, origin: all.origin })
}

#[cfg(test)]
mod tests {
    use super::*;

    const UCI: &str = r#"
config edgeflow 'main'
	option enabled '1'
	option datapath 'tc'
	option dpid "0x00000000000000a1"
	option tables 8
	list controller 'tcp:192.0.2.1:6653'
	list controller 'tcp:192.0.2.2:6653'   # a second controller
	option metrics '9108'
	option keep_fastpath 'on'

config port
	option name 'lan1'
	option rate_mbps '100'

config port 'wan'
	option name 'wan'
	option number 7
	option link_mbps 1000
"#;

    #[test]
    fn a_uci_file_renders_to_toml_the_switch_accepts() {
        let text = to_toml(UCI, "edgeflow", |_| Err("none".into())).unwrap();
        let s = super::super::from_text(&text, std::path::Path::new("rendered.toml"))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(s.dpid, 0xa1);
        assert_eq!(s.n_tables, 8);
        assert_eq!(s.fastpath, Some(datapath::fastpath::Mode::Tc));
        assert_eq!(s.controllers.len(), 2);
        assert_eq!(s.ports, vec![(1, "lan1".to_string()), (7, "wan".to_string())]);
        assert_eq!(s.metrics, Some("127.0.0.1:9108".parse().unwrap()));
        assert!(s.keep_fastpath, "option keep_fastpath 'on'\n{text}");
    }

    #[test]
    fn what_it_cannot_map_is_refused_with_its_line() {
        let refused = |src: &str| to_toml(src, "edgeflow", |_| Err("none".into())).unwrap_err();
        assert_eq!(
            refused("config edgeflow\n\toption colour 'red'\n"),
            "edgeflow:2: 'colour' is not a edgeflow setting here (known: dpid, datapath, io, poll, mode, fail_mode, tables, \
             probe_interval, fail_open_delay, packet_in_rate, fastpath_entries, kernel_compat, ring_frames, local_port, metrics, \
             egress_timing, keep_fastpath, controller, listen, enabled, log, include, user); others go in the TOML file 'option include' names"
        );
        assert_eq!(
            refused("config port\n\toption number 'one'\n"),
            "edgeflow:2: option number: 'one' is not a whole number"
        );
        assert_eq!(
            refused("config edgeflow\n\toption keep_fastpath 'maybe'\n"),
            "edgeflow:2: option keep_fastpath: 'maybe' is not a boolean (1 or 0)"
        );
        assert_eq!(refused("config bridge\n"), "edgeflow:1: section type 'bridge': expected 'edgeflow' or 'port'");
        assert_eq!(refused("\toption name 'x'\n"), "edgeflow:1: 'option name' before any 'config' section");
        assert_eq!(refused("config port\n\toption name 'x\n"), "edgeflow:2: a quote (') is not closed");
        assert_eq!(refused("config port\n\tlist name 'x'\n"), "edgeflow:2: 'name' is an option, not a list");
    }

    #[test]
    fn a_value_the_switch_refuses_is_named_at_its_uci_line() {
        let uci = "config edgeflow\n\toption datapath 'tc'\n\n\toption tables 999\nconfig port\n\toption name 'a'\n";
        assert_eq!(
            checked(uci, "/etc/config/edgeflow", |_| Err("none".into())).unwrap_err(),
            "/etc/config/edgeflow:4: tables = 999: must be between 1 and 254"
        );
        let uci = "config edgeflow\n\toption include 'x.toml'\nconfig port\n\toption name 'a'\n";
        assert_eq!(
            checked(uci, "u", |_| Ok("[[port]]\nname = 'b'\nrate_mbps = -1.0\n".into()))
                .unwrap_err()
                .split(": ")
                .next()
                .unwrap(),
            "x.toml:3"
        );
    }

    #[test]
    fn an_included_toml_file_carries_the_rest() {
        let uci = "config edgeflow\n\toption mode 'afdx'\n\toption include '/etc/edgeflow/afdx.toml'\n";
        let text = to_toml(uci, "edgeflow", |p| {
            assert_eq!(p, "/etc/edgeflow/afdx.toml");
            Ok("[[afdx.vl]]\nid = 10\n".into())
        })
        .unwrap();
        assert!(text.ends_with("mode = \"afdx\"\n\n# from /etc/edgeflow/afdx.toml\n[[afdx.vl]]\nid = 10\n"), "{text}");
    }
}
