//! The compiler's driver, as p4c's: the front end's output (the syntax tree and the checker's
//! record) lowered by the mid end, and the IR handed to a back end. This is the one place the
//! syntax tree meets a back end's entry: the back ends take the lowered program only
//! (`backends/software` executes it, `backends/ebpf` prints it as C), and
//! `tests/midend.rs`'s `no_back_end_reads_the_syntax_tree` fails if a file under `backends/`
//! names the front end.

use std::sync::Arc;

use crate::backends::ebpf::{self, Generated};
use crate::backends::software::Switch;
use crate::frontend::ast::Program;
use crate::frontend::check::Checked;

impl Switch {
    /// The software target for a program the checker accepted, with empty tables: the program
    /// lowered, what a control plane sees of it (P4Info) made, then [`Switch::load`].
    pub fn new(program: Program, checked: Checked) -> Result<Switch, String> {
        let info = Arc::new(crate::info::info(&program, &checked)?);
        let ir = crate::midend::lower(&program, &checked)?;
        Switch::load(ir, info)
    }
}

/// C for the checked program `program`, or why it does not fit (the kernel back end on its IR,
/// [`ebpf::generate_ir`]).
pub fn generate(program: &Program, checked: &Checked) -> Result<Generated, String> {
    ebpf::generate_ir(&crate::midend::lower(program, checked)?)
}

/// As [`generate`], a refusal led by the file, line and column of the declaration or call that
/// holds what does not fit: `file` is the program's path (as given to the front end).
pub fn generate_in(file: &str, program: &Program, checked: &Checked) -> Result<Generated, String> {
    let ir = crate::midend::lower::lower_file(file, program, checked)?;
    ebpf::generate_ir_in(&ir, |i| file_name(file, i))
}

/// The name of file `i` of the program read from `file`, as the lexer numbered them (the
/// program, then its includes), for a back end's refusal.
pub fn file_name(file: &str, i: u16) -> String {
    match crate::frontend::lexer::file_name(file, i) {
        "?" => format!("{file} (an included file)"),
        n => n.to_string(),
    }
}
