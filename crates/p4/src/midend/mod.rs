//! The mid end: between the checker and the back ends, one lowered program (the IR) that both
//! the software target and the eBPF printer are to read, so they cannot each read the syntax tree
//! their own way (issue 52). `lower` resolves the top level (types, enums, errors, constants,
//! instances); `code` lowers every parser and control instance, action, function and table
//! into typed statements with explicit copies; `dump` prints it for tests and readers
//! (`edgeflow p4 ir FILE.p4`). The software target executes it; the kernel back end prints it
//! as C.

pub mod code;
mod dump;
pub mod ir;
pub mod lower;

pub use lower::lower;
