//! The load generator's frames and the receiver's accounting, without I/O.
//!
//! A test frame is Ethernet/IPv4/UDP (so every switch forwards it as ordinary traffic) whose
//! payload starts with a 16-byte probe: magic, flow id, sequence number and transmit time.

pub mod afdx;
pub mod frame;
pub mod less;
pub mod stats;
