//! Random small flow tables and random frames through the userspace pipeline and the kernel fast
//! path (XDP and TC, BPF_PROG_TEST_RUN): any difference in verdict or output bytes is a crash.
//! Needs root.
#![no_main]
use libfuzzer_sys::fuzz_target;

include!("../harness/differential.rs");

fuzz_target!(|data: &[u8]| differential(data));
