//! The OpenFlow decoder on any bytes: it never panics, and what it accepts encodes to bytes that
//! decode to the same message (after one round: fuzz/harness/openflow_decode.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

include!("../harness/openflow_decode.rs");

fuzz_target!(|data: &[u8]| decode_round_trip(data));
