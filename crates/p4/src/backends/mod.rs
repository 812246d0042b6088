//! The two back ends, one semantics, both reading the mid end's IR (never the syntax tree:
//! `crate::driver` lowers it): `software` runs the lowered program on frames in
//! userspace (the reference), `ebpf` prints what fits the kernel as BPF C for TC and XDP; the
//! differential tests (`datapath/tests/p4_corpus.rs`) hold the second to the first.

pub mod ebpf;
pub mod software;
