//! The TOML config with every mode's section: any text is refused or accepted without a panic,
//! and every refusal says where.
#![no_main]
use libfuzzer_sys::fuzz_target;

include!("../harness/config_file.rs");

fuzz_target!(|data: &[u8]| check_config(data));
