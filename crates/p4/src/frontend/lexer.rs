//! P4-16 source to tokens, with the preprocessor the subset has: `#include` of the files
//! edgeflow provides (`<core.p4>`, `<edgeflow.p4>`, `<v1model.p4>`, `<psa.p4>`) and, when the
//! program was read from a directory, of `"file.p4"` beside it; `#define` (object-like, and
//! function-like, expanded once the program is read) and `#undef`;
//! `#ifdef`/`#ifndef`/`#else`/`#endif`. Every token knows the file, line and column it
//! came from, so that every error can say where.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::arch::{INCLUDES, INCLUDE_ALIASES};
use crate::diag::{Diagnostic, Pos};

/// The state of one tokenization: the macros defined so far and the program's own included
/// files (numbered after `INCLUDES`), read relative to the program's directory if it has one.
struct Lexing<'a> {
    defines: HashMap<String, Vec<Tok>>,
    /// Function-like macros, `#define F(a, b) body`: their parameters and body, expanded
    /// where `F(...)` is written once the whole program is read (`expand_macros`).
    macros: HashMap<String, (Vec<String>, Vec<Tok>)>,
    dir: Option<&'a Path>,
    local_files: Vec<PathBuf>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    /// An identifier or a keyword (the parser tells them apart).
    Ident(String),
    /// An integer literal: its width and signedness when written `8w5` or `8s5`.
    Int {
        width: Option<(u32, bool)>,
        value: u128,
    },
    Str(String),
    /// Punctuation and operators, longest match first.
    Punct(&'static str),
    Eof,
}

impl std::fmt::Display for Tok {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tok::Ident(s) => write!(f, "'{s}'"),
            Tok::Int { value, .. } => write!(f, "the number {value}"),
            Tok::Str(s) => write!(f, "the string \"{s}\""),
            Tok::Punct(p) => write!(f, "'{p}'"),
            Tok::Eof => write!(f, "the end of the program"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub tok: Tok,
    pub pos: Pos,
}

/// Longest first: a token that is a prefix of another comes after it. `>>` is not one: in
/// `register<bit<8>>` it closes two type arguments, so the parser joins two adjacent `>`.
const PUNCT: [&str; 40] = [
    "&&&", "|+|", "|-|", "++", "&&", "||", "==", "!=", "<=", ">=", "<<", "..", "{", "}", "(", ")", "[", "]", "<", ">",
    ";", ":", ",", ".", "=", "+", "-", "*", "/", "%", "&", "|", "^", "~", "!", "?", "@", "#", "$", "`",
];

/// Tokenizes `text`, read from `file`; `#include`d files are tokenized in place.
pub fn tokenize(file: &str, text: &str) -> Result<Vec<Token>, Diagnostic> {
    let _ = file; // named by the caller when it reports: positions carry file numbers
    tokenize_in(None, text).map(|(tokens, _)| tokens)
}

/// Tokenizes a program read from a file in `dir`: `#include "x.p4"` reads `dir/x.p4` (and a
/// file it includes, relative to that file). Also returns the local files in the order their
/// numbers follow `INCLUDES`, for `file_name_in`.
pub fn tokenize_in(dir: Option<&Path>, text: &str) -> Result<(Vec<Token>, Vec<PathBuf>), Diagnostic> {
    let mut lexing = Lexing { defines: HashMap::new(), macros: HashMap::new(), dir, local_files: Vec::new() };
    let mut out = Vec::new();
    lex_file(0, text, &mut lexing, &mut out)?;
    let mut out = expand_macros(out, &lexing.macros, 0)?;
    let end = out.iter().rev().find(|t| t.pos.file == 0).map_or(Pos { file: 0, line: 1, col: 1 }, |t| t.pos);
    out.push(Token { tok: Tok::Eof, pos: end });
    Ok((out, lexing.local_files))
}

/// The name of file number `i` when the program included `local_files` of its own.
pub fn file_name_in(program: &str, local_files: &[PathBuf], i: u16) -> String {
    match (i as usize).checked_sub(INCLUDES.len() + 1) {
        Some(k) => local_files.get(k).map_or("?".into(), |p| p.display().to_string()),
        None => file_name(program, i).to_string(),
    }
}

/// The name of file number `i` as `tokenize` numbered them: the program is 0, then the includes.
pub fn file_name(program: &str, i: u16) -> &str {
    match i {
        0 => program,
        n => INCLUDES.get(n as usize - 1).map_or("?", |(name, _)| name),
    }
}

fn lex_file(file: u16, text: &str, lexing: &mut Lexing, out: &mut Vec<Token>) -> Result<(), Diagnostic> {
    let b = text.as_bytes();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    let mut line_start = true;
    // One entry per open #ifdef/#ifndef: whether its current branch is taken.
    let mut conditions: Vec<bool> = Vec::new();
    macro_rules! pos {
        () => {
            Pos { file, line, col }
        };
    }
    let err = |p: Pos, m: String| Err(Diagnostic::new(p, m));
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            i += 1;
            line += 1;
            col = 1;
            line_start = true;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            col += 1;
            continue;
        }
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if b[i..].starts_with(b"/*") {
            let start = pos!();
            i += 2;
            col += 2;
            loop {
                if i >= b.len() {
                    return err(start, "a comment that never ends ('/*' without '*/')".into());
                }
                if b[i..].starts_with(b"*/") {
                    i += 2;
                    col += 2;
                    break;
                }
                if b[i] == b'\n' {
                    line += 1;
                    col = 1;
                } else {
                    col += 1;
                }
                i += 1;
            }
            continue;
        }
        let at = pos!();
        if c == b'#' && line_start {
            let end = b[i..].iter().position(|&x| x == b'\n').map_or(b.len(), |p| i + p);
            let directive = text[i + 1..end].split("//").next().unwrap_or("").trim();
            if !conditional(at, directive, &lexing.defines, &mut conditions)? && conditions.iter().all(|&taken| taken) {
                preprocess(at, file, directive, lexing, out)?;
            }
            col += (end - i) as u32;
            i = end;
            continue;
        }
        if !conditions.iter().all(|&taken| taken) {
            // inside a branch not taken: skip to the next line, where a directive may end it
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        line_start = false;
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let word = &text[start..i];
            col += (i - start) as u32;
            match lexing.defines.get(word) {
                Some(toks) => out.extend(toks.iter().map(|t| Token { tok: t.clone(), pos: at })),
                None => out.push(Token { tok: Tok::Ident(word.to_string()), pos: at }),
            }
            continue;
        }
        if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let lit = &text[start..i];
            col += (i - start) as u32;
            out.push(Token { tok: int_literal(lit).map_err(|m| Diagnostic::new(at, m))?, pos: at });
            continue;
        }
        if c == b'"' {
            let start = i + 1;
            i += 1;
            while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                i += 1;
            }
            if i >= b.len() || b[i] != b'"' {
                return err(at, "a string that never ends".into());
            }
            let s = text[start..i].to_string();
            i += 1;
            col += (i - start + 1) as u32;
            out.push(Token { tok: Tok::Str(s), pos: at });
            continue;
        }
        match PUNCT.iter().find(|p| b[i..].starts_with(p.as_bytes())) {
            Some(p) => {
                i += p.len();
                col += p.len() as u32;
                out.push(Token { tok: Tok::Punct(p), pos: at });
            }
            None => {
                let ch = text[i..].chars().next().unwrap_or('?');
                return err(at, format!("unexpected character '{ch}'"));
            }
        }
    }
    if !conditions.is_empty() {
        return Err(Diagnostic::new(Pos { file, line, col }, "an #ifdef or #ifndef without its #endif".to_string()));
    }
    Ok(())
}

/// Handles `#ifdef`, `#ifndef`, `#else` and `#endif` (true if `directive` was one of them),
/// also inside a branch not taken, so that nesting is counted there too.
fn conditional(
    at: Pos,
    directive: &str,
    defines: &HashMap<String, Vec<Tok>>,
    conditions: &mut Vec<bool>,
) -> Result<bool, Diagnostic> {
    let (word, rest) = directive.split_once(char::is_whitespace).unwrap_or((directive, ""));
    match word {
        "ifdef" => conditions.push(defines.contains_key(rest.trim())),
        "ifndef" => conditions.push(!defines.contains_key(rest.trim())),
        "else" | "endif" if conditions.is_empty() => {
            return Err(Diagnostic::new(at, format!("#{word} without an #ifdef or #ifndef before it")));
        }
        "else" => {
            let last = conditions.len() - 1;
            conditions[last] = !conditions[last];
        }
        "endif" => {
            conditions.pop();
        }
        _ => return Ok(false),
    }
    Ok(true)
}

fn preprocess(
    at: Pos,
    file: u16,
    directive: &str,
    lexing: &mut Lexing,
    out: &mut Vec<Token>,
) -> Result<(), Diagnostic> {
    let (word, rest) = directive.split_once(char::is_whitespace).unwrap_or((directive, ""));
    let rest = rest.trim();
    match word {
        "include" => {
            let name = rest
                .strip_prefix('<')
                .and_then(|r| r.strip_suffix('>'))
                .or_else(|| rest.strip_prefix('"').and_then(|r| r.strip_suffix('"')));
            let Some(name) = name else {
                return Err(Diagnostic::new(at, format!("#include {rest}: expected <file> or \"file\"")));
            };
            let name = INCLUDE_ALIASES.iter().find(|(alias, _)| *alias == name).map_or(name, |(_, file)| file);
            if let Some(n) = INCLUDES.iter().position(|(f, _)| *f == name) {
                let included = n as u16 + 1;
                if out.iter().any(|t| t.pos.file == included) {
                    return Ok(()); // included once, like the include guards of the real files
                }
                return lex_file(included, INCLUDES[n].1, lexing, out);
            }
            let beside = match (rest.starts_with('"'), lexing.dir) {
                (true, Some(dir)) => {
                    // relative to the including file: a local file's own directory
                    let from = (file as usize)
                        .checked_sub(INCLUDES.len() + 1)
                        .and_then(|k| lexing.local_files[k].parent().map(Path::to_path_buf))
                        .unwrap_or_else(|| dir.to_path_buf());
                    Some(from.join(name))
                }
                _ => None,
            };
            let Some(path) = beside else {
                return Err(Diagnostic::new(
                    at,
                    format!(
                        "#include {rest}: only <core.p4>, <edgeflow.p4>, <v1model.p4> and <psa.p4> can be included (the architectures edgeflow declares), and \"file.p4\" beside a program read from a file"
                    ),
                ));
            };
            if lexing.local_files.contains(&path) {
                return Ok(()); // included once, as above
            }
            let text = std::fs::read_to_string(&path)
                .map_err(|e| Diagnostic::new(at, format!("#include {rest}: {}: {e}", path.display())))?;
            let Ok(number) = u16::try_from(INCLUDES.len() + 1 + lexing.local_files.len()) else {
                return Err(Diagnostic::new(at, format!("#include {rest}: too many included files")));
            };
            lexing.local_files.push(path);
            lex_file(number, &text, lexing, out)
        }
        "undef" => {
            lexing.defines.remove(rest);
            Ok(())
        }
        "define" => {
            let word_end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
            if rest[word_end..].starts_with('(') && word_end > 0 {
                // `F(a, b) body`: the parameters end at the first ')'.
                let Some(close) = rest.find(')') else {
                    return Err(Diagnostic::new(at, "a #define's parameters are not closed"));
                };
                let params: Vec<String> = rest[word_end + 1..close]
                    .split(',')
                    .map(|p| p.trim().to_string())
                    .filter(|p| !p.is_empty())
                    .collect();
                if params.iter().any(|p| !p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')) {
                    return Err(Diagnostic::new(at, "a #define's parameters are names (no '...')"));
                }
                let mut toks = Vec::new();
                lex_file(at.file, &rest[close + 1..], lexing, &mut toks).map_err(|d| Diagnostic::new(at, d.message))?;
                let body = toks.into_iter().map(|t| t.tok).collect();
                lexing.macros.insert(rest[..word_end].to_string(), (params, body));
                return Ok(());
            }
            let (name, value) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(Diagnostic::new(at, "#define without a name is outside the subset edgeflow compiles"));
            }
            let mut toks = Vec::new();
            lex_file(at.file, value, lexing, &mut toks).map_err(|d| Diagnostic::new(at, d.message))?;
            lexing.defines.insert(name.to_string(), toks.into_iter().map(|t| t.tok).collect());
            Ok(())
        }
        other => Err(Diagnostic::new(
            at,
            format!(
                "#{other} is outside the subset edgeflow compiles (only #include, #define, #undef, #ifdef, #ifndef, #else, #endif)"
            ),
        )),
    }
}

/// `42`, `0x2a`, `0b101`, `0o17`, `1_000`, with an optional width: `8w255`, `16s-1` is `-` and
/// `16s1`.
fn int_literal(lit: &str) -> Result<Tok, String> {
    let (width, digits) = match lit.find(['w', 's']) {
        Some(at)
            if lit[..at].chars().all(|c| c.is_ascii_digit()) && !lit.starts_with("0x") && !lit.starts_with("0b") =>
        {
            let w: u32 = lit[..at].parse().map_err(|_| format!("'{lit}': a width that is not a number"))?;
            (Some((w, &lit[at..at + 1] == "s")), &lit[at + 1..])
        }
        _ => (None, lit),
    };
    let clean: String = digits.chars().filter(|&c| c != '_').collect();
    let lower = clean.to_ascii_lowercase();
    let (radix, body) = match lower.get(..2) {
        Some("0x") => (16, &lower[2..]),
        Some("0b") => (2, &lower[2..]),
        Some("0o") => (8, &lower[2..]),
        Some("0d") => (10, &lower[2..]),
        _ => (10, &lower[..]),
    };
    let value = u128::from_str_radix(body, radix).map_err(|_| format!("'{lit}' is not a number P4 can read"))?;
    Ok(Tok::Int { width, value })
}

/// Expands function-like macros: `F(x, y)` becomes `F`'s body with its parameters replaced by
/// the argument tokens (split at the commas outside parentheses), itself expanded again, up
/// to a depth that stops a macro that expands to itself.
fn expand_macros(
    tokens: Vec<Token>,
    macros: &HashMap<String, (Vec<String>, Vec<Tok>)>,
    depth: u32,
) -> Result<Vec<Token>, Diagnostic> {
    if macros.is_empty() {
        return Ok(tokens);
    }
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        let called = match &t.tok {
            Tok::Ident(name) if tokens.get(i + 1).is_some_and(|n| n.tok == Tok::Punct("(")) => macros.get(name),
            _ => None,
        };
        let Some((params, body)) = called else {
            out.push(t.clone());
            i += 1;
            continue;
        };
        if depth > 16 {
            return Err(Diagnostic::new(t.pos, "a macro that expands to itself"));
        }
        // The arguments: tokens up to the matching ')', split at top-level commas.
        let mut args: Vec<Vec<Tok>> = vec![Vec::new()];
        let mut nesting = 0;
        let mut j = i + 2;
        loop {
            let Some(a) = tokens.get(j) else {
                return Err(Diagnostic::new(t.pos, "a macro's arguments are not closed"));
            };
            match a.tok {
                Tok::Punct("(") => nesting += 1,
                Tok::Punct(")") if nesting == 0 => break,
                Tok::Punct(")") => nesting -= 1,
                Tok::Punct(",") if nesting == 0 => {
                    args.push(Vec::new());
                    j += 1;
                    continue;
                }
                Tok::Eof => return Err(Diagnostic::new(t.pos, "a macro's arguments are not closed")),
                _ => {}
            }
            args.last_mut().expect("one").push(a.tok.clone());
            j += 1;
        }
        if params.is_empty() && args.len() == 1 && args[0].is_empty() {
            args.clear();
        }
        if args.len() != params.len() {
            return Err(Diagnostic::new(
                t.pos,
                format!("this macro takes {} argument(s), not {}", params.len(), args.len()),
            ));
        }
        let mut expanded = Vec::new();
        for b in body {
            match b {
                Tok::Ident(p) if params.contains(p) => {
                    let k = params.iter().position(|x| x == p).expect("a parameter");
                    expanded.extend(args[k].iter().map(|a| Token { tok: a.clone(), pos: t.pos }));
                }
                other => expanded.push(Token { tok: other.clone(), pos: t.pos }),
            }
        }
        out.extend(expand_macros(expanded, macros, depth + 1)?);
        i = j + 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<Tok> {
        tokenize("t.p4", text).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn literals_operators_comments_and_positions() {
        let t = tokenize("t.p4", "bit<8> x = 8w0xff; // c\n/* a\n b */ y |+| 0b1_0 &&& 16s3").unwrap();
        let kinds: Vec<&Tok> = t.iter().map(|t| &t.tok).collect();
        assert_eq!(kinds[6], &Tok::Int { width: Some((8, false)), value: 255 });
        assert_eq!(kinds[9], &Tok::Punct("|+|"));
        assert_eq!(kinds[10], &Tok::Int { width: None, value: 2 });
        assert_eq!(kinds[12], &Tok::Int { width: Some((16, true)), value: 3 });
        assert_eq!((t[8].pos.line, t[8].pos.col), (3, 7), "y, after the comment");
        assert_eq!(
            toks("a>>b"),
            vec![Tok::Ident("a".into()), Tok::Punct(">"), Tok::Punct(">"), Tok::Ident("b".into()), Tok::Eof]
        );
    }

    #[test]
    fn defines_are_substituted_and_includes_are_built_in() {
        assert_eq!(toks("#define N 4096\nsize = N;")[2], Tok::Int { width: None, value: 4096 });
        let t = tokenize("t.p4", "#include <core.p4>\n#include <core.p4>\nx").unwrap();
        assert!(t.iter().any(|t| t.pos.file == 1), "core.p4's tokens");
        assert_eq!(t.iter().filter(|t| t.tok == Tok::Ident("x".into())).count(), 1);
        let e = tokenize("t.p4", "#include \"mine.p4\"").unwrap_err();
        assert_eq!(e.to_string_in("t.p4"), "t.p4:1:1: #include \"mine.p4\": only <core.p4>, <edgeflow.p4>, <v1model.p4> and <psa.p4> can be included (the architectures edgeflow declares), and \"file.p4\" beside a program read from a file");
        let e = tokenize("t.p4", "\n  #if X").unwrap_err();
        assert_eq!(
            e.to_string_in("t.p4"),
            "t.p4:2:3: #if is outside the subset edgeflow compiles (only #include, #define, #undef, #ifdef, #ifndef, #else, #endif)"
        );
        assert!(tokenize("t.p4", "/* open").unwrap_err().message.contains("never ends"));
    }

    #[test]
    fn conditionals_keep_the_branch_whose_macro_is_defined() {
        let kept = |text: &str| -> Vec<String> {
            toks(text).into_iter().filter_map(|t| if let Tok::Ident(s) = t { Some(s) } else { None }).collect()
        };
        assert_eq!(kept("#define A\n#ifdef A\na\n#else\nb\n#endif\nc"), ["a", "c"]);
        assert_eq!(kept("#ifdef A\n#ifdef B\nab\n#endif\na\n#else\nnot_a\n#endif"), ["not_a"]);
        assert_eq!(kept("#define A\n#undef A\n#ifndef A\nundefined // note\n#endif // A"), ["undefined"]);
        let e = tokenize("t.p4", "#ifdef A\nx").unwrap_err();
        assert_eq!(e.message, "an #ifdef or #ifndef without its #endif");
        assert_eq!(tokenize("t.p4", "#endif").unwrap_err().message, "#endif without an #ifdef or #ifndef before it");
    }
}
