//! OpenWrt's UCI config (`edgeflow uci`, run by the init script before each start): any text is
//! rendered and checked as `run --config` checks it, without a panic; every refusal names the UCI
//! file (or the file it includes) and, where the text has one, the line, never the rendering: a
//! rendering the TOML reader refuses is one edgeflow wrote wrong.
#![no_main]
use libfuzzer_sys::fuzz_target;

include!("../harness/uci.rs");

fuzz_target!(|data: &[u8]| check_uci(data));
