//! `docgen DIR`: writes the man pages (`DIR/man/man1/edgeflow.1` and one per subcommand,
//! `edgeflow-run.1` …) and the bash, zsh and fish completions (`DIR/completions/`) from the
//! parser `edgeflow` itself runs, so that neither can fall behind a flag (`make install`).

use std::path::Path;
use std::process::ExitCode;

use clap::CommandFactory;
use clap_complete::Shell;
use edgeflow::cli::Cli;

/// Without the `help` subcommands clap adds: each would get a page of its own.
fn without_help(cmd: clap::Command) -> clap::Command {
    cmd.disable_help_subcommand(true).mut_subcommands(without_help)
}

fn run(out: &Path) -> std::io::Result<()> {
    let mut cmd = without_help(Cli::command());
    cmd.build();
    let man = out.join("man/man1");
    std::fs::create_dir_all(&man)?;
    // One page for the command and one per subcommand, each titled by its full name
    // (`man edgeflow-run`).
    clap_mangen::generate_to(cmd.clone(), &man)?;
    let pages = std::fs::read_dir(&man)?.count();
    let completions = out.join("completions");
    std::fs::create_dir_all(&completions)?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd, "edgeflow", &completions)?;
    }
    println!("docgen: {} man pages in {}, completions in {}", pages, man.display(), completions.display());
    Ok(())
}

fn main() -> ExitCode {
    let Some(out) = std::env::args_os().nth(1) else {
        eprintln!("usage: docgen DIR");
        return ExitCode::from(2);
    };
    match run(Path::new(&out)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("docgen: {e}");
            ExitCode::FAILURE
        }
    }
}
