//! Where something is in a program, and what is wrong there.

/// A place in the source: file number (0 is the program, then `arch::INCLUDES` from 1, then the
/// program's own included files, see `lexer::file_name_in`), line and column, both from 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    pub file: u16,
    pub line: u32,
    pub col: u32,
}

/// An error, at the place it was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub pos: Pos,
    pub message: String,
}

impl Diagnostic {
    pub fn new(pos: Pos, message: impl Into<String>) -> Diagnostic {
        Diagnostic { pos, message: message.into() }
    }

    /// `file:line:column: message`, the program being called `program`.
    pub fn to_string_in(&self, program: &str) -> String {
        let file = crate::frontend::lexer::file_name(program, self.pos.file);
        format!("{file}:{}:{}: {}", self.pos.line, self.pos.col, self.message)
    }
}
