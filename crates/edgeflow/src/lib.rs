//! The switch's configuration as a library: the TOML file and its merge with command-line flags
//! (`config`), so that tools other than the binary (the config fuzz target) check a file exactly
//! as `edgeflow run` does; and the metrics endpoint's reading of a request (`http`), for the same
//! reason.

pub mod cli;
pub mod config;
pub mod http;
#[cfg(feature = "p4-tools")]
pub mod p4_stf;
