//! P4-16 source to tokens, with the preprocessor the subset has: `#include` of the two files
//! edgeflow provides (`<core.p4>`, `<edgeflow.p4>`) and object-like `#define`s. Every token
//! knows the file, line and column it came from, so that every error can say where.

use std::collections::HashMap;

use crate::diag::{Diagnostic, Pos};

/// The files a program may include, built in: a target's compiler ships its architecture.
pub const INCLUDES: [(&str, &str); 2] =
    [("core.p4", include_str!("../include/core.p4")), ("edgeflow.p4", include_str!("../include/edgeflow.p4"))];

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
    let mut defines = HashMap::new();
    let mut out = Vec::new();
    lex_file(0, text, &mut defines, &mut out)?;
    let end = out.iter().rev().find(|t| t.pos.file == 0).map_or(Pos { file: 0, line: 1, col: 1 }, |t| t.pos);
    out.push(Token { tok: Tok::Eof, pos: end });
    Ok(out)
}

/// The name of file number `i` as `tokenize` numbered them: the program is 0, then the includes.
pub fn file_name(program: &str, i: u16) -> &str {
    match i {
        0 => program,
        n => INCLUDES.get(n as usize - 1).map_or("?", |(name, _)| name),
    }
}

fn lex_file(
    file: u16,
    text: &str,
    defines: &mut HashMap<String, Vec<Tok>>,
    out: &mut Vec<Token>,
) -> Result<(), Diagnostic> {
    let b = text.as_bytes();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    let mut line_start = true;
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
            let directive = text[i + 1..end].trim();
            preprocess(at, directive, defines, out)?;
            col += (end - i) as u32;
            i = end;
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
            match defines.get(word) {
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
    Ok(())
}

fn preprocess(
    at: Pos,
    directive: &str,
    defines: &mut HashMap<String, Vec<Tok>>,
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
            let Some(n) = INCLUDES.iter().position(|(f, _)| *f == name) else {
                return Err(Diagnostic::new(
                    at,
                    format!(
                        "#include {rest}: only <core.p4> and <edgeflow.p4> can be included (edgeflow's architecture)"
                    ),
                ));
            };
            let file = n as u16 + 1;
            if out.iter().any(|t| t.pos.file == file) {
                return Ok(()); // included once, like the include guards of the real files
            }
            lex_file(file, INCLUDES[n].1, defines, out)
        }
        "define" => {
            let (name, value) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                let what = if name.contains('(') {
                    "a #define with parameters (a function-like macro)"
                } else {
                    "#define without a name"
                };
                return Err(Diagnostic::new(at, format!("{what} is outside the subset edgeflow compiles")));
            }
            let mut toks = Vec::new();
            lex_file(at.file, value, defines, &mut toks).map_err(|d| Diagnostic::new(at, d.message))?;
            defines.insert(name.to_string(), toks.into_iter().map(|t| t.tok).collect());
            Ok(())
        }
        other => Err(Diagnostic::new(
            at,
            format!("#{other} is outside the subset edgeflow compiles (only #include and object-like #define)"),
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
        assert_eq!(e.to_string_in("t.p4"), "t.p4:1:1: #include \"mine.p4\": only <core.p4> and <edgeflow.p4> can be included (edgeflow's architecture)");
        let e = tokenize("t.p4", "\n  #ifdef X").unwrap_err();
        assert_eq!(
            e.to_string_in("t.p4"),
            "t.p4:2:3: #ifdef is outside the subset edgeflow compiles (only #include and object-like #define)"
        );
        assert!(tokenize("t.p4", "/* open").unwrap_err().message.contains("never ends"));
    }
}
