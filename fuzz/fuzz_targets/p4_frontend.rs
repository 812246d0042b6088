//! The P4 front end on any text: lexer, parser and type checker (`p4::front_end`), then the
//! software target built from what they accept (`p4::backends::software::Switch::new`) and its P4Info. Never a
//! panic; a refusal names the file and a line:column.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match p4::front_end("fuzz.p4", text) {
        Ok((program, checked)) => {
            // Refused only as a program of another architecture, or one whose tables it cannot hold.
            let Ok(sw) = p4::backends::software::Switch::new(program, checked) else { return };
            let info = sw.info();
            for t in sw.tables() {
                assert!(sw.entries(&t).is_some(), "table {t} listed but absent");
            }
            let _ = p4runtime::p4info::p4info(&info, "fuzz");
        }
        Err(e) => {
            // The program's file, or a built-in include a #define of the program reached into.
            let place: Vec<&str> = e.splitn(4, ':').collect();
            let located = place.len() == 4
                && ["fuzz.p4", "core.p4", "edgeflow.p4"].contains(&place[0])
                && [place[1], place[2]].iter().all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            assert!(located, "a refusal that names no place: {e}");
        }
    }
});
