//! `edgeflow p4 stf PROGRAM SCRIPT --target user|kernel`: one of p4c's STF test scripts run
//! against a program (issue 52, item 4; `p4::stf` reads and judges it), on the software target
//! or on the kernel back end through BPF_PROG_TEST_RUN (`datapath::fastpath::p4_test_run`).
//! Whatever stops the run before a frame goes in — the front end, the kernel back end, no root,
//! no clang — is the verdict REFUSED with its first line, so that `make test-p4c`'s table says
//! why in one line.

use std::path::Path;
use std::process::ExitCode;

use p4::stf::{Outcome, Verdict};

/// The command: each check and the verdict printed; 0 on PASS, 1 otherwise, 2 where it could
/// not run (a file, the target's name).
pub fn main(program: &Path, script: &Path, target: Option<&str>) -> ExitCode {
    match run(program, script, target.unwrap_or("user")) {
        Ok(outcome) => {
            print!("{}", outcome.render());
            if outcome.verdict == Verdict::Pass {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("edgeflow p4 stf: {e}");
            ExitCode::from(2)
        }
    }
}

/// The script's run; Err only where a file cannot be read or the target is not one of the two.
pub fn run(program: &Path, script: &Path, target: &str) -> Result<Outcome, String> {
    let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
    let (program_text, script_text) = (read(program)?, read(script)?);
    if !matches!(target, "user" | "kernel") {
        return Err(format!("--target {target}: user or kernel"));
    }
    let script = match p4::stf::parse(&script.display().to_string(), &script_text) {
        Ok(s) => s,
        Err(e) => return Ok(Outcome::refused(format!("script: {e}"))),
    };
    let mut switch = match p4::stf::load(&program.display().to_string(), &program_text) {
        Ok(s) => s,
        Err(e) => return Ok(Outcome::refused(e)),
    };
    if target == "user" {
        return Ok(p4::stf::run(&script, &mut switch, &mut p4::stf::Software::default()));
    }
    let file = program.display().to_string();
    if let Err(e) = p4::backends::ebpf::generate_ir_in(switch.ir(), |i| p4::driver::file_name(&file, i)) {
        return Ok(Outcome::refused(format!("kernel back end: {}", e.lines().next().unwrap_or(""))));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(Outcome::refused("not root (the kernel target loads BPF programs)"));
    }
    if datapath::ebpf::clang::find().is_none() {
        return Ok(Outcome::refused("no clang (EDGEFLOW_CLANG, clang-14 or clang)"));
    }
    let mut kernel = match datapath::fastpath::p4_test_run::TestRun::build(&switch) {
        Ok(k) => k,
        Err(e) => return Ok(Outcome::refused(load_failure(&e.to_string()))),
    };
    Ok(p4::stf::run(&script, &mut switch, &mut kernel))
}

/// Why the kernel did not take the program, on one line: the error, and when the verifier
/// refused it, the verifier's reason (the last line before its closing statistics).
fn load_failure(e: &str) -> String {
    let lines: Vec<&str> = e.lines().filter(|l| !l.trim().is_empty()).collect();
    let first = lines.first().copied().unwrap_or("");
    let end = lines.iter().rposition(|l| l.starts_with("processed ")).unwrap_or(lines.len());
    match lines[..end].last() {
        Some(why) if end > 1 => format!("{first}: the verifier: {}", why.trim()),
        _ => first.to_string(),
    }
}
