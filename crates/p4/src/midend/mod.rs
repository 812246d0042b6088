//! The mid end: between the checker and the back ends, one lowered program (the IR) that both
//! the software target and the eBPF printer will read, so they cannot each read the syntax tree
//! their own way (issue 52). This session lowers the program's top level; block bodies follow.

pub mod ir;
pub mod lower;

pub use lower::lower;
