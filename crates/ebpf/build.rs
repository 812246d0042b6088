//! Builds the eBPF programs in `bpf/` with clang, for `include_bytes!` in `src/objects.rs`, in the
//! byte order of the target the crate is built for (`bpfel` or `bpfeb`): the kernel that loads
//! them runs on that target. The programs are the same for every architecture otherwise, so the
//! kernel's UAPI headers come from the build machine (`asm/types.h` is the same `int-ll64` layout
//! everywhere), and a cross build needs no target sysroot.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../bpf");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed={}", root.display());
    if std::env::var_os("CARGO_FEATURE_OBJECTS").is_none() {
        return; // a build without the kernel fast path needs no clang
    }
    let clang = ["clang-14", "clang"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
        .expect("clang is needed to build the eBPF programs in bpf/ (scripts/setup.sh installs clang-14)");
    let asm_include = uapi_asm_include();
    let (target, other) = match std::env::var("CARGO_CFG_TARGET_ENDIAN").unwrap().as_str() {
        "big" => ("bpfeb", "bpfel"),
        _ => ("bpfel", "bpfeb"),
    };
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    sources.sort();
    for src in &sources {
        println!("cargo:rerun-if-changed={}", src.display());
        let obj = out.join(src.file_stem().unwrap()).with_extension("o");
        compile(clang, target, &asm_include, src, &obj);
    }
    // The fast path in the other byte order too, so the loader's tests read both.
    compile(clang, other, &asm_include, &root.join("fastpath.c"), &out.join("fastpath.other-order.o"));
}

fn compile(clang: &str, target: &str, asm_include: &Path, src: &Path, obj: &Path) {
    let status = Command::new(clang)
        .args(["-O2", "-target", target, "-Wall", "-Werror", "-mcpu=v3"])
        .arg(format!("-I{}", asm_include.display()))
        .arg("-c")
        .arg(src)
        .arg("-o")
        .arg(obj)
        .status()
        .expect("running clang");
    assert!(status.success(), "clang failed on {}", src.display());
}

/// The directory holding the build machine's `asm/types.h` (Debian puts it under the multiarch
/// triple, other distributions straight under /usr/include).
fn uapi_asm_include() -> PathBuf {
    let host_arch = std::env::var("HOST").unwrap().split('-').next().unwrap().to_string();
    let multiarch = match host_arch.as_str() {
        "x86_64" => "x86_64-linux-gnu",
        "aarch64" => "aarch64-linux-gnu",
        "arm" | "armv7" => "arm-linux-gnueabihf",
        "riscv64gc" | "riscv64" => "riscv64-linux-gnu",
        "powerpc64le" => "powerpc64le-linux-gnu",
        "s390x" => "s390x-linux-gnu",
        _ => "",
    };
    let candidates = [Path::new("/usr/include").join(multiarch), PathBuf::from("/usr/include")];
    candidates.into_iter().find(|d| d.join("asm/types.h").exists()).unwrap_or_else(|| {
        panic!("no asm/types.h under /usr/include: install the kernel's UAPI headers (linux-libc-dev)")
    })
}
