//! What the architecture tests share: a program and a script, both inline, run on the software
//! target as `edgeflow p4 stf` runs them.

use p4::stf::{self, Verdict};

pub fn run(program: &str, script: &str) -> stf::Outcome {
    let mut switch = stf::load("inline.p4", program).unwrap_or_else(|e| panic!("{e}"));
    let script = stf::parse("inline.stf", script).unwrap_or_else(|e| panic!("{e}"));
    stf::run(&script, &mut switch, &mut stf::Software::default())
}

pub fn assert_pass(outcome: stf::Outcome) {
    assert_eq!(outcome.verdict, Verdict::Pass, "{}", outcome.render());
}
