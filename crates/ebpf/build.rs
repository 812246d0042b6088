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
    shared_layout(clang, target, &asm_include, &root, &out);
}

/// The shared layout (`bpf/layout.h`) as the programs see it, written to `layout.rs` for userspace,
/// after checking that the C of the target being built for lays every structure out the same way:
/// a structure whose layout depends on a u64's alignment (4 bytes on i386, 8 in eBPF) fails here,
/// on every target, before anything runs.
fn shared_layout(clang: &str, bpf_target: &str, asm_include: &Path, root: &Path, out: &Path) {
    let probe = out.join("layout-probe.c");
    std::fs::write(
        &probe,
        "#include \"layout.h\"\n\
         #define P(name, v) (unsigned long long)(v),\n\
         __attribute__((used, section(\"ef_layout\"))) const unsigned long long layout_values[] = { EF_LAYOUT };\n\
         #undef P\n\
         #define P(name, v) name \"\\n\"\n\
         __attribute__((used, section(\"ef_names\"))) const char layout_names[] = EF_LAYOUT;\n",
    )
    .unwrap();
    let build = |target: &str, obj: &Path| {
        let status = Command::new(clang)
            .args(["-O2", "-target", target, "-Wall", "-Werror", "-ffreestanding"])
            .arg(format!("-I{}", root.display()))
            .arg(format!("-I{}", asm_include.display()))
            .arg("-c")
            .arg(&probe)
            .arg("-o")
            .arg(obj)
            .status()
            .expect("running clang");
        assert!(status.success(), "clang failed on bpf/layout.h for {target}");
        std::fs::read(obj).unwrap()
    };
    let in_bpf = build(bpf_target, &out.join("layout-bpf.o"));
    let values = elf_section(&in_bpf, "ef_layout");
    let names = String::from_utf8(elf_section(&in_bpf, "ef_names")).unwrap();
    let names: Vec<&str> = names.trim_end_matches('\0').lines().collect();
    assert_eq!(values.len(), names.len() * 8, "bpf/layout.h: a value for every name");
    let rust_target = std::env::var("TARGET").unwrap();
    let in_target = build(&rust_target, &out.join("layout-target.o"));
    let target_values = elf_section(&in_target, "ef_layout");
    let big = bpf_target == "bpfeb";
    let value = |b: &[u8], i: usize| {
        let v: [u8; 8] = b[i * 8..i * 8 + 8].try_into().unwrap();
        if big {
            u64::from_be_bytes(v)
        } else {
            u64::from_le_bytes(v)
        }
    };
    let differ: Vec<String> = (0..names.len())
        .filter(|&i| value(&values, i) != value(&target_values, i))
        .map(|i| format!("{}: eBPF {}, {rust_target} {}", names[i], value(&values, i), value(&target_values, i)))
        .collect();
    assert!(
        differ.is_empty(),
        "bpf/fastpath.h lays structures out differently for {rust_target} than for eBPF (pad them explicitly):\n{}",
        differ.join("\n")
    );
    let mut rs = String::from("&[\n");
    for (i, name) in names.iter().enumerate() {
        rs += &format!("    ({name:?}, {}),\n", value(&values, i));
    }
    rs += "]\n";
    std::fs::write(out.join("layout.rs"), rs).unwrap();
}

/// The contents of the section called `name` of an ELF object (32- or 64-bit, either byte order).
fn elf_section(elf: &[u8], name: &str) -> Vec<u8> {
    let wide = elf[4] == 2;
    let big = elf[5] == 2;
    let uint = |at: usize, len: usize| -> usize {
        let b = &elf[at..at + len];
        let mut v = 0usize;
        for i in 0..len {
            let byte = if big { b[i] } else { b[len - 1 - i] };
            v = v << 8 | byte as usize;
        }
        v
    };
    let word = if wide { 8 } else { 4 };
    let (shoff, shentsize, shnum, shstrndx) = if wide {
        (uint(0x28, 8), uint(0x3a, 2), uint(0x3c, 2), uint(0x3e, 2))
    } else {
        (uint(0x20, 4), uint(0x2e, 2), uint(0x30, 2), uint(0x32, 2))
    };
    let header = |i: usize| {
        let at = shoff + i * shentsize;
        let (offset, size) = (uint(at + 8 + 2 * word, word), uint(at + 8 + 3 * word, word));
        (uint(at, 4), offset, size)
    };
    let (_, strtab, _) = header(shstrndx);
    (0..shnum)
        .map(header)
        .find(|&(n, _, _)| elf[strtab + n..].split(|&b| b == 0).next() == Some(name.as_bytes()))
        .map(|(_, offset, size)| elf[offset..offset + size].to_vec())
        .unwrap_or_else(|| panic!("no section {name} in the layout probe"))
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
