//! p4c's STF corpus on the software target (issue 52, item 4), in `make test`: every program
//! with its script, read in place, run as `edgeflow p4 stf --target user` runs it. A FAIL is a
//! bug (the program ran and gave other frames than BMv2 gives); a REFUSED names what the
//! front end or the target does not take yet. The floor below is the count reached so far: it
//! can only go up. `--nocapture` prints each refusal and a histogram of them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use p4::stf::{self, corpus_dir, Verdict};

/// How many of the corpus's 230 programs pass on the software target today.
const PASSING_FLOOR: usize = 218;

#[test]
fn the_corpus_passes_on_the_software_target_and_nothing_runs_wrong() {
    let dir = corpus_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        panic!("{}: the p4c STF corpus is not there (set P4C_STF_DIR)", dir.display());
    };
    let mut scripts: Vec<PathBuf> =
        entries.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "stf")).collect();
    scripts.sort();
    let (mut passed, mut failed) = (Vec::new(), Vec::new());
    let mut refusals: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for script_path in &scripts {
        let name = script_path.file_stem().unwrap().to_string_lossy().into_owned();
        let program_path = script_path.with_extension("p4");
        let script_text = std::fs::read_to_string(script_path).unwrap();
        let program_text = std::fs::read_to_string(&program_path).unwrap_or_default();
        let script = stf::parse(&script_path.display().to_string(), &script_text).unwrap_or_else(|e| panic!("{e}"));
        let outcome = match stf::load(&program_path.display().to_string(), &program_text) {
            Ok(mut switch) => stf::run(&script, &mut switch, &mut stf::Software::default()),
            Err(e) => stf::Outcome::refused(e),
        };
        match &outcome.verdict {
            Verdict::Pass => passed.push(name),
            Verdict::Fail => failed.push(format!("{name}:\n{}", outcome.render())),
            Verdict::Refused(why) => {
                let why = why.replace(&format!("{}/", dir.display()), "");
                println!("REFUSED {name}: {why}");
                let kind = why.split(": ").last().unwrap_or(&why).chars().take(70).collect::<String>();
                refusals.entry(kind).or_default().push(name);
            }
        }
    }
    let mut histogram: Vec<_> = refusals.into_iter().collect();
    histogram.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
    println!("\n{} of {} pass on the software target; refusals by kind:", passed.len(), scripts.len());
    for (why, names) in &histogram {
        println!("{:4}  {why}   (e.g. {})", names.len(), names[0]);
    }
    assert!(
        failed.is_empty(),
        "{} program(s) ran and gave other frames than BMv2:\n{}",
        failed.len(),
        failed.join("\n")
    );
    assert!(passed.len() >= PASSING_FLOOR, "{} pass, fewer than the floor {PASSING_FLOOR}", passed.len());
}
