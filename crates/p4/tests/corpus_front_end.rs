//! p4c's STF corpus (issue 52, item 4) as the front end's measure: every v1model and PSA program
//! there that comes with an STF script is parsed and checked by `p4::front_end`, read in place
//! (never copied into the project). The floor below is the count reached so far: it can only go
//! up, and the histogram of first errors printed with `--nocapture` says what to work on next.

use std::collections::BTreeMap;
use std::path::PathBuf;

use p4::stf::corpus_dir;

/// How many of the corpus's programs pass the front end today; raise it as the subset grows.
const PASSING_FLOOR: usize = 220;

/// The first error's kind: the message with names, numbers and positions cut, so that one
/// missing construct counts once however many programs and places show it.
fn reason(error: &str) -> String {
    let message = error.splitn(4, ':').nth(3).unwrap_or(error).trim();
    let mut out = String::new();
    let mut quoted = false;
    for c in message.chars() {
        match c {
            '\'' | '"' => {
                quoted = !quoted;
                if quoted {
                    out.push_str("'…'");
                }
            }
            _ if quoted => {}
            c if c.is_ascii_digit() => {
                if !out.ends_with('N') {
                    out.push('N');
                }
            }
            c => out.push(c),
        }
    }
    out
}

#[test]
fn the_corpus_passes_the_front_end_at_least_as_far_as_before() {
    let dir = corpus_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        panic!("{}: the p4c STF corpus is not there (set P4C_STF_DIR)", dir.display());
    };
    let mut programs: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "p4") && p.with_extension("stf").exists())
        .collect();
    programs.sort();
    assert_eq!(programs.len(), 230, "{}: the corpus's 204 v1model and 26 PSA programs", dir.display());

    let mut passed = 0;
    let mut reasons: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in &programs {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).unwrap();
        match p4::front_end_at(path, &text) {
            Ok(_) => passed += 1,
            Err(e) => {
                println!("FAIL {e}");
                reasons.entry(reason(&e)).or_default().push(name);
            }
        }
    }
    let mut histogram: Vec<_> = reasons.into_iter().collect();
    histogram.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
    println!("\n{passed} of {} pass the front end; first errors by kind:", programs.len());
    for (why, names) in &histogram {
        println!("{:4}  {why}   (e.g. {})", names.len(), names[0]);
    }
    assert!(passed >= PASSING_FLOOR, "{passed} of {} pass, fewer than the floor {PASSING_FLOOR}", programs.len());
}
