//! The IR's data: every name resolved to an index, every constant folded, every type with its
//! width and signedness. Plain data with a readable dump (`Display`), which tests compare.

use std::fmt;

/// A value's type with nothing left to look up.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    /// Unsigned, `width` bits.
    Bit(u32),
    /// Two's complement, `width` bits.
    Int(u32),
    Bool,
    Error,
    Header(usize),
    Struct(usize),
    Enum(usize),
    /// What the mid end passes on by name (externs, block types): the back ends own their meaning.
    Opaque(String),
}

/// A header or struct type: its fields in order, each resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Aggregate {
    pub name: String,
    pub is_header: bool,
    pub fields: Vec<(String, Ty)>,
}

/// An enum: member `i` is the number `i`, so a `select` on it compares numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct Enumeration {
    pub name: String,
    pub members: Vec<String>,
}

/// A folded constant: its type and its value, already cut to the type's width.
#[derive(Clone, Debug, PartialEq)]
pub struct Constant {
    pub name: String,
    pub ty: Ty,
    pub value: u128,
}

/// A constructor argument of an extern instance, folded.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    Number {
        value: u128,
        width: Option<u32>,
    },
    Bool(bool),
    /// An enum member, numbered.
    Member {
        enumeration: usize,
        index: usize,
    },
    /// What the mid end does not fold (kept by its P4 text for the back end to refuse).
    Other(String),
}

/// `Type(args) name;` at the top level or in a block, its arguments folded.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    pub name: String,
    pub ty: String,
    pub args: Vec<Arg>,
    /// `file:line` where it is declared.
    pub at: String,
}

/// The lowered program.
#[derive(Default, Clone, Debug, PartialEq)]
pub struct Program {
    /// The architecture's package `main` instantiates (EdgeflowSwitch today).
    pub package: String,
    /// The program's block for each of the package's slots, in the package's order.
    pub blocks: Vec<String>,
    pub aggregates: Vec<Aggregate>,
    pub enums: Vec<Enumeration>,
    /// `error` members, numbered in declaration order across all `error { }` declarations.
    pub errors: Vec<String>,
    pub constants: Vec<Constant>,
    pub instances: Vec<Instance>,
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Bit(w) => write!(f, "u{w}"),
            Ty::Int(w) => write!(f, "s{w}"),
            Ty::Bool => write!(f, "bool"),
            Ty::Error => write!(f, "error"),
            Ty::Header(i) => write!(f, "header#{i}"),
            Ty::Struct(i) => write!(f, "struct#{i}"),
            Ty::Enum(i) => write!(f, "enum#{i}"),
            Ty::Opaque(n) => write!(f, "{n}"),
        }
    }
}

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arg::Number { value, width: Some(w) } => write!(f, "{value}:u{w}"),
            Arg::Number { value, width: None } => write!(f, "{value}"),
            Arg::Bool(b) => write!(f, "{b}"),
            Arg::Member { enumeration, index } => write!(f, "enum#{enumeration}.{index}"),
            Arg::Other(text) => write!(f, "?{text}"),
        }
    }
}

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "package {}({})", self.package, self.blocks.join(", "))?;
        for (i, a) in self.aggregates.iter().enumerate() {
            let kind = if a.is_header { "header" } else { "struct" };
            let fields: Vec<String> = a.fields.iter().map(|(n, t)| format!("{n}: {t}")).collect();
            writeln!(f, "{kind}#{i} {} {{ {} }}", a.name, fields.join(", "))?;
        }
        for (i, e) in self.enums.iter().enumerate() {
            let members: Vec<String> = e.members.iter().enumerate().map(|(k, m)| format!("{m}={k}")).collect();
            writeln!(f, "enum#{i} {} {{ {} }}", e.name, members.join(", "))?;
        }
        let errors: Vec<String> = self.errors.iter().enumerate().map(|(k, m)| format!("{m}={k}")).collect();
        writeln!(f, "error {{ {} }}", errors.join(", "))?;
        for c in &self.constants {
            writeln!(f, "const {}: {} = {}", c.name, c.ty, c.value)?;
        }
        for i in &self.instances {
            let args: Vec<String> = i.args.iter().map(|a| a.to_string()).collect();
            writeln!(f, "instance {} = {}({}) @{}", i.name, i.ty, args.join(", "), i.at)?;
        }
        Ok(())
    }
}
