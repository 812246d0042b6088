//! Generated BPF C compiled at run time (a P4 program's kernel back end), by the clang the fast
//! path itself is built with (`build.rs`): one place that finds it and says how it is called.
//!
//! The C goes to clang on its standard input and the object comes back on its standard output,
//! into memory: nothing is written to or read from a file on the way. A file would need a
//! directory, and under a shared `/tmp` another user can take a name root will use first (a
//! symlink there makes root write where that user says) or replace the object between clang's
//! write and the load (docs/security.md, "Local users").

use std::io::{self, Write};
use std::process::{Command, Stdio};

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

/// Compiles C text into a BPF object's bytes, for this machine's byte order; `name` says what
/// was compiled in clang's refusal. NotFound where there is no clang; InvalidData, with clang's
/// messages (their file is `<stdin>`), where it refuses.
pub fn compile(name: &str, c: &str) -> io::Result<Vec<u8>> {
    let clang = find().ok_or_else(|| {
        let tried = std::env::var("EDGEFLOW_CLANG").ok().filter(|c| !c.is_empty());
        let tried = tried.map_or("clang-14 or clang".to_string(), |c| format!("EDGEFLOW_CLANG={c}"));
        io::Error::new(io::ErrorKind::NotFound, format!("no clang here ({tried})"))
    })?;
    let target = if cfg!(target_endian = "big") { "bpfeb" } else { "bpfel" };
    let mut child = Command::new(&clang)
        .args(["-O2", "-target", target, "-mcpu=v3", "-Wall", "-Wno-unused-function", "-Wno-unused-label"])
        .arg(format!("-I/usr/include/{}-linux-gnu", std::env::consts::ARCH))
        .args(["-x", "c", "-", "-c", "-o", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().expect("clang's standard input was piped");
    // The C is written beside the reading of clang's output, not before it: a clang that wrote
    // more than a pipe holds before taking all its input would otherwise wait on us forever.
    let (written, built) = std::thread::scope(|s| {
        let writer = s.spawn(move || stdin.write_all(c.as_bytes()));
        let built = child.wait_with_output();
        (writer.join().expect("writing clang's input does not panic"), built)
    });
    let built = built?;
    if !built.status.success() {
        let why = String::from_utf8_lossy(&built.stderr);
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{clang} on {name}:\n{why}")));
    }
    // clang that succeeded without reading all the C compiled something else.
    written.map_err(|e| io::Error::new(e.kind(), format!("{clang} on {name}: writing the C to it: {e}")))?;
    if built.stdout.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{clang} on {name}: it wrote no object")));
    }
    Ok(built.stdout)
}
