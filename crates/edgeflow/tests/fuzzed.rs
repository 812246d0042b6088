//! The config fuzz target's harness on its seeds and on what it found (`make fuzz`; see
//! docs/security.md): every file is refused or accepted without a panic, and every refusal
//! says where.

include!("../../../fuzz/harness/config_file.rs");

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
