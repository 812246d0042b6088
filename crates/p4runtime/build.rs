//! Generates P4Runtime's messages and service from its schema: `schema/p4runtime.fds`, the
//! FileDescriptorSet of p4runtime.proto and everything it imports, as the `p4runtime` package on
//! PyPI (1.6.0) carries them compiled into its Python modules. It is committed, so a build needs
//! neither Python, nor the .proto files, nor protoc; `scripts/p4runtime_descriptors.py` writes
//! it again from the package (its docstring says how).

use std::path::PathBuf;

use prost::Message;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let schema = manifest.join("schema/p4runtime.fds");
    println!("cargo:rerun-if-changed={}", schema.display());
    let bytes = std::fs::read(&schema).unwrap_or_else(|e| panic!("{}: {e}", schema.display()));
    let fds = prost_types::FileDescriptorSet::decode(bytes.as_slice())
        .unwrap_or_else(|e| panic!("{}: not a FileDescriptorSet: {e}", schema.display()));
    tonic_prost_build::configure().build_client(false).compile_fds(fds).expect("P4Runtime's Rust code");
}
