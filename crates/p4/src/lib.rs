//! edgeflow's P4-16 front end (issue 36, docs/p4.md): the program a P4 switch runs, read from
//! its source. No P4 compiler can be installed where edgeflow is built, so the front end is
//! edgeflow's own, and, as real compilers do, it compiles a documented subset of the language
//! and refuses the rest by name where it is written. Pure: text in, a syntax tree or an error
//! naming file, line and column out; the files a program includes (`<core.p4>`, edgeflow's
//! architecture `<edgeflow.p4>`, and `<v1model.p4>` and `<psa.p4>`, declared so that programs
//! written for BMv2 and PSA read here) are built in. The one exception, `front_end_at`, also
//! reads the `#include "file.p4"`s beside a program read from a file.
//!
//! One module per stage, as a compiler is read: `lexer` (tokens and the preprocessor), `parser`
//! (the syntax tree of `ast`), `check` (names and types), `run` (the software target that runs
//! a checked program on frames), `info` (what a control plane sees of it: P4Info's names and
//! ids), `diag` (positions and errors), `stf` (p4c's STF test scripts, run on a target).

pub mod ast;
pub mod check;
pub mod diag;
pub mod ebpf;
pub mod info;
pub mod lexer;
pub mod midend;
pub mod parser;
pub mod run;
pub mod stf;

pub use diag::{Diagnostic, Pos};

/// Parses the program `text`, read from `file` (the name errors give).
pub fn parse(file: &str, text: &str) -> Result<ast::Program, String> {
    let tokens = lexer::tokenize(file, text).map_err(|d| d.to_string_in(file))?;
    parser::parse(tokens).map_err(|d| d.to_string_in(file))
}

/// Parses and checks the program read from `path`: its `#include "file.p4"`s are read from
/// beside it, and errors name the file they are in.
pub fn front_end_at(path: &std::path::Path, text: &str) -> Result<(ast::Program, check::Checked), String> {
    let file = path.display().to_string();
    let (tokens, local_files) = lexer::tokenize_in(path.parent(), text).map_err(|d| d.to_string_in(&file))?;
    let named = |d: Diagnostic| {
        let name = lexer::file_name_in(&file, &local_files, d.pos.file);
        format!("{name}:{}:{}: {}", d.pos.line, d.pos.col, d.message)
    };
    let program = parser::parse(tokens).map_err(named)?;
    let checked = check::check(&program).map_err(named)?;
    Ok((program, checked))
}

/// Parses and checks the program: what a back end may compile.
pub fn front_end(file: &str, text: &str) -> Result<(ast::Program, check::Checked), String> {
    let program = parse(file, text)?;
    let checked = check::check(&program).map_err(|d| d.to_string_in(file))?;
    Ok((program, checked))
}
