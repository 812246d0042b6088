//! Generates P4Runtime's messages and service from its schema, which comes from the `p4runtime`
//! package on PyPI (issue 36): scripts/p4runtime_descriptors.py writes the compiled descriptors
//! the package carries as a FileDescriptorSet, and tonic's generator reads that, so neither the
//! .proto files nor protoc are needed here. The Python is `EDGEFLOW_P4RUNTIME_PYTHON`, else the
//! build environment `scripts/setup.sh build` makes (.venv-build), else python3.

use std::path::PathBuf;
use std::process::Command;

use prost::Message;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.parent().and_then(|p| p.parent()).unwrap().to_path_buf();
    let script = root.join("scripts/p4runtime_descriptors.py");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let fds_path = out.join("p4runtime.fds");
    println!("cargo:rerun-if-changed={}", script.display());
    println!("cargo:rerun-if-env-changed=EDGEFLOW_P4RUNTIME_PYTHON");
    let python = std::env::var("EDGEFLOW_P4RUNTIME_PYTHON").map(PathBuf::from).unwrap_or_else(|_| {
        let venv = root.join(".venv-build/bin/python");
        if venv.exists() {
            venv
        } else {
            PathBuf::from("python3")
        }
    });
    let status = Command::new(&python).arg(&script).arg(&fds_path).status();
    match status {
        Ok(s) if s.success() => {}
        other => panic!(
            "P4Runtime's schema comes from the `p4runtime` Python package, and {} could not write it \
             ({other:?}): run scripts/setup.sh build, or set EDGEFLOW_P4RUNTIME_PYTHON to a Python that has \
             it, or build edgeflow without the p4runtime feature",
            python.display()
        ),
    }
    let bytes = std::fs::read(&fds_path).expect("the descriptor set just written");
    let fds = prost_types::FileDescriptorSet::decode(bytes.as_slice()).expect("a FileDescriptorSet");
    tonic_prost_build::configure().build_client(false).compile_fds(fds).expect("P4Runtime's Rust code");
}
