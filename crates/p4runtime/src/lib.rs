//! P4Runtime for edgeflow's P4 target (issue 36, docs/p4.md).

/// P4Runtime's messages and service, generated at build time from the `p4runtime` package's
/// descriptors (build.rs). The modules mirror the protobuf packages, which refer to each other
/// by relative paths.
#[allow(clippy::all, missing_docs)]
pub mod proto {
    pub mod google {
        pub mod rpc {
            include!(concat!(env!("OUT_DIR"), "/google.rpc.rs"));
        }
    }
    pub mod p4 {
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/p4.v1.rs"));
        }
        pub mod config {
            pub mod v1 {
                include!(concat!(env!("OUT_DIR"), "/p4.config.v1.rs"));
            }
        }
    }
}

pub mod codec;
pub mod p4info;
pub mod server;
pub mod tls;

pub use server::{serve, Device, Job};
