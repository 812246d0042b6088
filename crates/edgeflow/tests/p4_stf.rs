//! `edgeflow p4 stf --target kernel` on an example program: the kernel back end generated,
//! compiled by clang, loaded and run frame by frame (BPF_PROG_TEST_RUN), its verdicts judged
//! against the script; exit status 0 where every expectation holds, 1 and the failing line where
//! one does not. Needs root and clang.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

fn stf(script: &str) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_edgeflow"))
        .args(["p4", "stf"])
        .arg(repo("examples/p4/l2_switch.p4"))
        .arg(repo(&format!("crates/p4/tests/stf/{script}")))
        .args(["--target", "kernel"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn the_l2_switch_meets_its_script_in_the_kernel_and_a_wrong_expectation_fails() {
    if !datapath::ebpf::test_may_load_programs("edgeflow p4 stf --target kernel") {
        return;
    }
    let (code, text) = stf("l2_switch.stf");
    assert_eq!(code, 0, "{text}");
    assert!(text.ends_with("PASS\n") && text.matches(": ok: ").count() == 6, "{text}");
    let (code, text) = stf("l2_switch_wrong.stf");
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(
            "line 15: FAILED: expect 2 02000000000202000000000188b500112233445566778899aabbccddeeee$: port 2 sent \
             02000000000202000000000188b500112233445566778899aabbccddeeff (differs at byte 29)"
        ),
        "{text}"
    );
    assert!(text.ends_with("FAIL 1 of 6 checks\n"), "{text}");
}
