//! The config fuzz targets' harnesses (the TOML file's and the UCI file's) on their seeds and on
//! what they found (`make fuzz`; see docs/security.md): every file is refused or accepted without
//! a panic, and every refusal says where and what.

include!("../../../fuzz/harness/config_file.rs");
include!("../../../fuzz/harness/uci.rs");

#[test]
fn the_seed_files_are_accepted() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/seeds/config_file");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("the seed corpus (fuzz/seeds.py writes it)") {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        match edgeflow::config::from_text(&text, std::path::Path::new("seed.toml")) {
            Ok(_) => {}
            // A build without a mode refuses that mode's seeds, at their line.
            Err(e) if e.contains("built without it") && !cfg!(all(feature = "afdx", feature = "less")) => {}
            Err(e) => panic!("{e}"),
        }
        n += 1;
    }
    assert!(n >= 6, "{n} seeds");
}

/// A probe interval of 2^64 - 1 seconds was taken: the agent's probe deadlines (twice the
/// interval) overflowed. Now at most a day, refused with its line.
#[test]
fn a_probe_interval_past_a_day() {
    check_config(b"probe_interval = 18446744073709551615\n[[port]]\nname = \"a\"\n");
    let e = edgeflow::config::from_text("probe_interval = 86401\n[[port]]\nname = \"a\"\n", "x.toml".as_ref());
    assert!(e.unwrap_err().starts_with("x.toml:1: probe_interval = 86401"));
}

/// `mode = "portmap"` without a pair: the refusal named no line. Now the mode's.
#[test]
fn a_portmap_mode_without_pairs() {
    check_config(include_bytes!("fuzzed/crash-380b79d398a0cbf97624776ce38f107d5532a32d"));
}

/// A control character in a comment: the TOML reader refuses it with an empty message, and the
/// refusal said "fuzz.toml:2: " and no more; through UCI, whose include path is echoed into a
/// comment of the rendering, "fuzz.uci:2: ". Now the character and its column.
#[test]
fn a_control_character_in_a_comment() {
    check_config(include_bytes!("fuzzed/control-character-in-a-comment.toml"));
    check_uci(include_bytes!("fuzzed/control-character-in-an-include.uci"));
}

#[test]
fn the_uci_seeds_render_and_are_accepted() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/seeds/uci");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("the seed corpus (fuzz/seeds.py writes it)") {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        check_uci(text.as_bytes());
        edgeflow::config::uci::checked(&text, "seed", |_| Ok(INCLUDED.to_string())).unwrap();
        n += 1;
    }
    assert!(n >= 2, "{n} seeds");
}
