//! Generated BPF C compiled at run time (a P4 program's kernel back end), by the clang the fast
//! path itself is built with (`build.rs`): one place that finds it and says how it is called.

use std::io;
use std::path::Path;
use std::process::Command;

/// The clang on this machine: the one `EDGEFLOW_CLANG` names (a distribution's `clang-16`, say),
/// else `clang-14` (what `scripts/setup.sh` installs), else `clang`.
pub fn find() -> Option<String> {
    let named = std::env::var("EDGEFLOW_CLANG").ok().filter(|c| !c.is_empty());
    let candidates = match named {
        Some(c) => vec![c],
        None => vec!["clang-14".to_string(), "clang".to_string()],
    };
    candidates.into_iter().find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
}

/// Compiles the C file `source` into the BPF object `object`, for this machine's byte order.
/// NotFound where there is no clang; InvalidData, with clang's messages, where it refuses.
pub fn compile_file(source: &Path, object: &Path) -> io::Result<()> {
    let clang = find().ok_or_else(|| {
        let tried = std::env::var("EDGEFLOW_CLANG").ok().filter(|c| !c.is_empty());
        let tried = tried.map_or("clang-14 or clang".to_string(), |c| format!("EDGEFLOW_CLANG={c}"));
        io::Error::new(io::ErrorKind::NotFound, format!("no clang here ({tried})"))
    })?;
    let target = if cfg!(target_endian = "big") { "bpfeb" } else { "bpfel" };
    let built = Command::new(&clang)
        .args(["-O2", "-target", target, "-mcpu=v3", "-Wall", "-Wno-unused-function", "-Wno-unused-label"])
        .arg(format!("-I/usr/include/{}-linux-gnu", std::env::consts::ARCH))
        .arg("-c")
        .arg(source)
        .arg("-o")
        .arg(object)
        .output()?;
    if !built.status.success() {
        let why = String::from_utf8_lossy(&built.stderr);
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{clang} on {}:\n{why}", source.display())));
    }
    Ok(())
}

/// Compiles C text into an object's bytes, in a directory of its own that goes afterwards.
pub fn compile(name: &str, c: &str) -> io::Result<Vec<u8>> {
    let dir = std::env::temp_dir().join(format!("edgeflow-bpf-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (source, object) = (dir.join(format!("{name}.c")), dir.join(format!("{name}.o")));
    let built =
        std::fs::write(&source, c).and_then(|()| compile_file(&source, &object)).and_then(|()| std::fs::read(&object));
    let _ = std::fs::remove_dir_all(&dir);
    built
}
