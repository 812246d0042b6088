// Shared by the fuzz target `uci` and any regression test of what it finds (included, not a
// crate: the same few lines in both).

/// The TOML a UCI file names in `option include`: a port beside the UCI's, so that a UCI file of
/// no port of its own may still render into a whole configuration.
#[allow(dead_code)]
const INCLUDED: &str = "[[port]]\nname = \"eth9\"\nnumber = 9\n";

/// Any text as /etc/config/edgeflow: rendered, then checked as the rendering is checked before a
/// start. An include of a path that begins with "missing" is a file that cannot be read.
#[allow(dead_code)]
fn check_uci(data: &[u8]) {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let included = std::cell::RefCell::new(Vec::new());
    let include = |path: &str| {
        included.borrow_mut().push(path.to_string());
        match path.starts_with("missing") {
            true => Err(format!("{path}: No such file or directory (os error 2)")),
            false => Ok(INCLUDED.to_string()),
        }
    };
    let rendered = edgeflow::config::uci::to_toml(src, "fuzz.uci", include);
    match edgeflow::config::uci::checked(src, "fuzz.uci", include) {
        Ok(text) => {
            assert_eq!(Ok(&text), rendered.as_ref(), "checked and rendered differ");
            edgeflow::config::from_text(&text, std::path::Path::new("again.toml")).expect("accepted once, not twice");
        }
        Err(e) => {
            let named = |file: &str| e.strip_prefix(file).is_some_and(|rest| rest.starts_with(':'));
            let unmapped = named("<rendered>") && !included.borrow().iter().any(|p| p == "<rendered>");
            assert!(!unmapped, "a refusal of the rendering not traced to its source: {e}\nrendered:\n{rendered:?}");
            let located = named("fuzz.uci") || included.borrow().iter().any(|p| named(p));
            assert!(located || e.starts_with("no ports"), "a refusal that names no file: {e}");
            // What follows the place ("FILE:LINE: " or "FILE: ") says what is wrong.
            let files: Vec<String> =
                std::iter::once("fuzz.uci".to_string()).chain(included.borrow().iter().cloned()).collect();
            let said = files.iter().filter_map(|f| e.strip_prefix(f.as_str())?.strip_prefix(':')).any(|rest| {
                !rest.trim_start_matches(|c: char| c.is_ascii_digit()).trim_start_matches(':').trim().is_empty()
            });
            assert!(said || !located, "a refusal that says nothing after its place: {e:?}");
        }
    }
}
