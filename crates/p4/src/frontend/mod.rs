//! The front end: source text to a checked program. `lexer` (tokens and the preprocessor),
//! `parser` (the syntax tree of `ast`), `check` (names and types: what every later stage may
//! take as given). Errors name the file, line and column, in P4's words.

pub mod ast;
pub mod check;
pub mod lexer;
pub mod parser;

use crate::diag::Diagnostic;

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
