//! p4c's STF corpus on the kernel back end (issue 52, items 4 and 5), in `make test`: every
//! program the kernel back end compiles runs its script through the TC program by
//! BPF_PROG_TEST_RUN (`fastpath::p4_test_run`), frames it sends up decided by the software
//! target as userspace decides them in the datapath. None may FAIL: a program the kernel takes
//! gives the frames the software target gives (the kernel is an accelerator, not a second
//! truth). The floor is how many pass so far; it can only go up.

use std::path::PathBuf;

use datapath::fastpath::p4_test_run::TestRun;
use p4::stf::{self, Verdict};

/// How many of the corpus's 230 programs the kernel back end compiles and passes today.
const PASSING_FLOOR: usize = 49;

fn corpus_dir() -> PathBuf {
    match std::env::var_os("P4C_STF_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/p4c-stf"),
    }
}

#[test]
fn the_corpus_passes_on_the_kernel_back_end_as_on_the_software_target() {
    if !ebpf::test_may_load_programs("the P4 corpus on the kernel back end") {
        return;
    }
    let dir = corpus_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        panic!("{}: the p4c STF corpus is not there (set P4C_STF_DIR)", dir.display());
    };
    let mut scripts: Vec<PathBuf> =
        entries.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "stf")).collect();
    scripts.sort();
    let (mut passed, mut up, mut failed, mut refused) = (0, 0, Vec::new(), 0);
    for script_path in &scripts {
        let name = script_path.file_stem().unwrap().to_string_lossy().into_owned();
        let program_path = script_path.with_extension("p4");
        let text = std::fs::read_to_string(&program_path).unwrap_or_default();
        let script = stf::parse(&script_path.display().to_string(), &std::fs::read_to_string(script_path).unwrap())
            .unwrap_or_else(|e| panic!("{e}"));
        let Ok(mut switch) = stf::load(&program_path.display().to_string(), &text) else {
            refused += 1;
            continue;
        };
        let (ast, checked) = switch.program();
        if p4::ebpf::generate(ast, checked).is_err() {
            refused += 1;
            continue;
        }
        // C that clang refuses is the back end's bug; entries the kernel cannot hold, a refusal.
        let mut kernel = match TestRun::build(&switch) {
            Ok(k) => k,
            Err(e) if e.to_string().contains("clang") => panic!("{name}: the generated C: {e}"),
            Err(e) => {
                println!("REFUSED {name}: {e}");
                refused += 1;
                continue;
            }
        };
        let outcome = stf::run(&script, &mut switch, &mut kernel);
        match &outcome.verdict {
            Verdict::Pass => {
                passed += 1;
                up += !outcome.up.is_empty() as usize;
            }
            Verdict::Fail => failed.push(format!("{name}:\n{}", outcome.render())),
            Verdict::Refused(why) => {
                println!("REFUSED {name}: {why}");
                refused += 1;
            }
        }
    }
    println!("{passed} of {} pass on the kernel back end ({up} with frames sent up); {refused} refused", scripts.len());
    assert!(failed.is_empty(), "{} program(s) the kernel took gave other frames:\n{}", failed.len(), failed.join("\n"));
    assert!(passed >= PASSING_FLOOR, "{passed} pass, fewer than the floor {PASSING_FLOOR}");
}
