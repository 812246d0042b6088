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
        let s = from_str(&format!("{head}[less]\nroot = true\nmax_labels = 8\n")).unwrap();
        assert_eq!(s.mode, ModeSetting::Less(forwarding::less::Config { max_labels: 8, root: true }));
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
    match (&section.root, &section.max_labels) {
        (Some(r), _) => cx.at(r, reason),
        (None, Some(m)) => cx.at(m, reason),
        (None, None) => format!("{}: {reason}", cx.path),
    }
}
