//! The eBPF objects built from `bpf/` by this crate's build script.

/// The load generator's XDP sender (`bpf/loadgen.c`).
pub const LOADGEN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/loadgen.o"));

/// Stops the host stack from processing what arrives on switch ports (`bpf/port_guard.c`).
pub const PORT_GUARD: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/port_guard.o"));

/// The kernel fast path (`bpf/fastpath.c`).
pub const FASTPATH: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fastpath.o"));
