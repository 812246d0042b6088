//! Builds the eBPF programs in `bpf/` with clang, for `include_bytes!` in `src/bpf_objects.rs`.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../bpf");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed={}", root.display());
    let clang = ["clang-14", "clang"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
        .expect("clang is needed to build the eBPF programs in bpf/ (scripts/setup.sh installs clang-14)");
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH").unwrap().as_str() {
        "x86_64" => "x86_64-linux-gnu",
        "aarch64" => "aarch64-linux-gnu",
        "arm" => "arm-linux-gnueabihf",
        other => panic!("no multiarch include directory known for {other}"),
    };
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    sources.sort();
    for src in sources {
        println!("cargo:rerun-if-changed={}", src.display());
        let obj = out.join(src.file_stem().unwrap()).with_extension("o");
        let status = Command::new(clang)
            .args(["-O2", "-target", "bpf", "-Wall", "-Werror", "-mcpu=v3"])
            .arg(format!("-I/usr/include/{arch}"))
            .arg("-c")
            .arg(&src)
            .arg("-o")
            .arg(&obj)
            .status()
            .expect("running clang");
        assert!(status.success(), "clang failed on {}", src.display());
    }
}
