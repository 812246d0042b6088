//! The frame parser and every rewrite on any frame: parsing never panics; on a frame that parsed,
//! any chain of pushes, pops and set-fields never panics and leaves a frame that parses again.
#![no_main]
use libfuzzer_sys::fuzz_target;

include!("../harness/packet_rewrite.rs");

fuzz_target!(|data: &[u8]| rewrite_chain(data));
