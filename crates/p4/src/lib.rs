//! edgeflow's P4-16 front end (issue 36, docs/p4.md): the program a P4 switch runs, read from
//! its source. No P4 compiler can be installed where edgeflow is built, so the front end is
//! edgeflow's own, and, as real compilers do, it compiles a documented subset of the language
//! and refuses the rest by name where it is written. Pure: text in, a syntax tree or an error
//! naming file, line and column out; the files a program includes (`<core.p4>`, edgeflow's
//! architecture `<edgeflow.p4>`, and `<v1model.p4>` and `<psa.p4>`, declared so that programs
//! written for BMv2 and PSA read here) are built in. The one exception, `front_end_at`, also
//! reads the `#include "file.p4"`s beside a program read from a file.
//!
//! One folder per stage, as a compiler is read (p4c's `frontends/`, `midend/`, `backends/`):
//! `frontend` (lexer and preprocessor, parser, checker), `midend` (the lowered IR and its
//! passes), `arch` (the architectures' declarations: edgeflow, v1model, PSA), `backends`
//! (`software`, the target that runs a program on frames, and `ebpf`, the kernel's C). Beside
//! them: `driver` (the front end's output through the mid end to a back end), `info` (what a control plane sees of a program: P4Info's names and ids), `stf`
//! (p4c's STF test scripts, run on a target) and `diag` (positions and errors).

pub mod arch;
pub mod backends;
pub mod diag;
pub mod driver;
pub mod frontend;
pub mod info;
pub mod midend;
pub mod stf;

pub use diag::{Diagnostic, Pos};
pub use frontend::{front_end, front_end_at, parse};
