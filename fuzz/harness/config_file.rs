// Shared by the fuzz target `config_file` and the regression tests in
// crates/edgeflow/tests/fuzzed.rs (included, not a crate: it is the same few lines in both).

/// Any text as a config file, checked as `edgeflow run --config` checks it: never a panic, and a
/// refusal names the file and, where the text has one, the line (only "no ports" has none: it is
/// about what the text lacks), and then says what is wrong.
#[allow(dead_code)]
fn check_config(data: &[u8]) {
    let Ok(src) = std::str::from_utf8(data) else { return };
    match edgeflow::config::from_text(src, std::path::Path::new("fuzz.toml")) {
        Ok(settings) => assert!(!settings.ports.is_empty(), "accepted without a port"),
        Err(e) => {
            let located = e.strip_prefix("fuzz.toml:").is_some_and(|rest| {
                let line: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
                !line.is_empty() || rest.starts_with(' ')
            });
            assert!(located || e.starts_with("no ports"), "an error that names no line: {e}");
            let said = e.strip_prefix("fuzz.toml:").is_none_or(|rest| {
                !rest.trim_start_matches(|c: char| c.is_ascii_digit()).trim_start_matches(':').trim().is_empty()
            });
            assert!(said, "an error that says nothing after its place: {e:?}");
        }
    }
}
