//! The eBPF objects built from `bpf/` by this crate's build script (feature `objects`). Without
//! the feature they are empty, and loading one says the build left them out.

#[cfg(feature = "objects")]
macro_rules! object {
    ($file:literal) => {
        include_bytes!(concat!(env!("OUT_DIR"), "/", $file))
    };
}
#[cfg(not(feature = "objects"))]
macro_rules! object {
    ($file:literal) => {
        &[]
    };
}

/// Whether this build carries the objects.
pub const BUILT: bool = cfg!(feature = "objects");

/// The load generator's XDP sender (`bpf/loadgen.c`).
pub const LOADGEN: &[u8] = object!("loadgen.o");

/// The AF_XDP port's redirect into its sockets (`bpf/afxdp.c`).
pub const AFXDP: &[u8] = object!("afxdp.o");

/// The kernel fast path (`bpf/fastpath.c`).
pub const FASTPATH: &[u8] = object!("fastpath.o");

/// The fast path in the byte order this target does not use, for the loader's tests.
#[doc(hidden)]
pub const FASTPATH_OTHER_ORDER: &[u8] = object!("fastpath.other-order.o");

/// Every structure size, field offset and constant the fast path shares with userspace
/// (`bpf/layout.h`), as the programs lay them out: (name, value). The build script refuses to
/// build when the target's own C would lay any of them out differently.
#[cfg(feature = "objects")]
pub const LAYOUT: &[(&str, u64)] = include!(concat!(env!("OUT_DIR"), "/layout.rs"));
#[cfg(not(feature = "objects"))]
pub const LAYOUT: &[(&str, u64)] = &[];
