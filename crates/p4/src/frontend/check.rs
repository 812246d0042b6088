//! Names and types: every name a program uses is declared, every expression has a type the
//! operation takes, widths agree, numbers fit, tables name real actions and match kinds, parser
//! states lead somewhere, and the blocks the program hands its architecture (`main`) have the
//! parameters the architecture declares. What passes here is what the back ends may assume.
//!
//! One pass over the declarations, in order (P4 declares before use); inside parsers and
//! controls, a stack of scopes. Numbers without a width take the width of what they meet, as in
//! P4; everything else must agree exactly, or be cast.
//!
//! About 2 000 lines, one concern: the language's typing rules for every construct of the subset
//! are one piece, and each rule's error message is written where the rule is. Splitting them
//! (declarations, statements, expressions) would split the one scope stack they share.

use std::collections::HashMap;

use crate::diag::{Diagnostic, Pos};
use crate::frontend::ast::*;

type Result<T> = std::result::Result<T, Diagnostic>;

/// A type as the checker knows it.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    Bit(u32),
    Int(u32),
    /// A number without a width: it takes the width of what it meets.
    Number,
    Bool,
    Error,
    Void,
    Str,
    Header(String),
    Struct(String),
    /// A header union: headers of which at most one is valid.
    Union(String),
    Enum(String),
    Extern(String, Vec<Ty>),
    /// A parser, control or package type of the architecture, with its type arguments.
    BlockType(String, Vec<Ty>),
    /// A type parameter not bound yet.
    Var(String),
    /// A program's own parser or control.
    Block(String),
    Table(String),
    /// What `t.apply()` gives: `.hit`, `.miss`, `.action_run`.
    Applied(String),
    ActionRun(String),
    /// A tuple, `tuple<T, U>`: also the type of a list expression `{a, b}` given where a
    /// generic extern takes any type (the data of v1model's `hash` and checksums).
    List(Vec<Ty>),
    /// A header stack `T[n]`: its element type and size.
    Stack(Box<Ty>, u32),
    /// `varbit<N>`: a header field of up to N bits.
    Varbit(u32),
    /// A parser's `value_set<T>`, by its element type.
    ValueSet(Box<Ty>),
}

impl std::fmt::Display for Ty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let args = |a: &[Ty]| {
            if a.is_empty() {
                String::new()
            } else {
                format!("<{}>", a.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", "))
            }
        };
        match self {
            Ty::Bit(w) => write!(f, "bit<{w}>"),
            Ty::Int(w) => write!(f, "int<{w}>"),
            Ty::Number => write!(f, "a number"),
            Ty::Bool => write!(f, "bool"),
            Ty::Error => write!(f, "error"),
            Ty::Void => write!(f, "void"),
            Ty::Str => write!(f, "a string"),
            Ty::Header(n) => write!(f, "header {n}"),
            Ty::Struct(n) => write!(f, "struct {n}"),
            Ty::Union(n) => write!(f, "header_union {n}"),
            Ty::Enum(n) => write!(f, "enum {n}"),
            Ty::Extern(n, a) | Ty::BlockType(n, a) => write!(f, "{n}{}", args(a)),
            Ty::Var(n) => write!(f, "{n}"),
            Ty::Block(n) => write!(f, "{n}"),
            Ty::List(items) => {
                write!(f, "tuple<{}>", items.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", "))
            }
            Ty::Table(n) => write!(f, "table {n}"),
            Ty::Applied(n) => write!(f, "{n}.apply()"),
            Ty::ActionRun(n) => write!(f, "{n}.apply().action_run"),
            Ty::Stack(t, n) => write!(f, "{t}[{n}]"),
            Ty::Varbit(n) => write!(f, "varbit<{n}>"),
            Ty::ValueSet(t) => write!(f, "value_set<{t}>"),
        }
    }
}

enum TypeDef<'a> {
    /// A serializable enum: its underlying type, and each member's value.
    SerEnum(Ty, Vec<(String, u128)>),
    Header(Vec<(String, Ty)>),
    Struct(Vec<(String, Ty)>),
    Union(Vec<(String, Ty)>),
    Enum(Vec<String>),
    Alias(Ty),
    Extern {
        type_params: &'a [Name],
        methods: &'a [Method],
    },
    Block {
        kind: BlockKind,
        type_params: &'a [Name],
        params: &'a [Param],
    },
}

#[derive(Clone, Debug)]
struct Var {
    ty: Ty,
    writable: bool,
    /// A constant's value, when it is a number.
    value: Option<u128>,
}

/// What `check` found, for the back ends.
#[derive(Clone, Debug, Default)]
pub struct Checked {
    /// The package `main` instantiates, and the program's block for each of its parameters.
    pub package: String,
    pub blocks: Vec<String>,
    /// Every named type the program and its architecture declare, resolved.
    pub layouts: HashMap<String, Layout>,
    /// The top-level constants that are numbers, by name: what a stack's size may name.
    pub numbers: HashMap<String, u128>,
    /// Every expression's type as the checker found it, by the expression's address in the
    /// tree `check` was given (the tree is neither moved nor cloned between checker and mid
    /// end: a `Vec`'s or `Box`'s contents stay where they are when the tree moves). Read with
    /// `type_of`.
    types: HashMap<usize, Ty>,
    /// A number without a width given where a type was expected (`x = 5`, an argument): the
    /// type it takes there, which is the one the mid end needs.
    contextual: HashMap<usize, Ty>,
    /// A struct field's `@match(kind)` (by struct and field number): how the control plane
    /// matches it where the struct is a value set's element.
    pub field_match: HashMap<(String, usize), String>,
}

/// A named type, resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum Layout {
    Header(Vec<(String, Ty)>),
    Struct(Vec<(String, Ty)>),
    /// A header union's headers.
    Union(Vec<(String, Ty)>),
    /// A serializable enum (`enum bit<8> E { A = 1 }`): its type, and its members' values.
    SerEnum(Ty, Vec<(String, u128)>),
    Enum(Vec<String>),
    Alias(Ty),
    /// Externs and block types: what they are is their declaration's.
    Other,
}

impl Checked {
    /// The type of `e`, an expression of the tree `check` was given: a number without a width
    /// has the type it met where one was expected; `None` for what the checker never typed (a
    /// table's action name, a clone of the tree).
    pub fn type_of(&self, e: &Expr) -> Option<&Ty> {
        let at = e as *const Expr as usize;
        self.contextual.get(&at).or_else(|| self.types.get(&at))
    }

    /// The checker's type for `t` (which the checker accepted), type parameters left as they are.
    /// A value set's fields as the control plane sees them: each leaf of its element type (a
    /// nested struct's flattened, `inner.f`), its name (`""` for a bare `bit<W>`), its width
    /// and its `@match` kind (`exact` unless the field says otherwise).
    pub fn value_set_fields(&self, t: &Type) -> Vec<(String, u32, String)> {
        let mut out = Vec::new();
        self.leaves(&self.resolve(t), "", "exact", &mut out);
        out
    }

    fn leaves(&self, t: &Ty, name: &str, kind: &str, out: &mut Vec<(String, u32, String)>) {
        match t {
            Ty::Bit(w) => out.push((name.to_string(), *w, kind.to_string())),
            Ty::Struct(n) => {
                if let Some(Layout::Struct(fields)) = self.layouts.get(n) {
                    for (i, (f, ty)) in fields.iter().enumerate() {
                        let kind = self.field_match.get(&(n.clone(), i)).map_or("exact", String::as_str);
                        let path = if name.is_empty() { f.clone() } else { format!("{name}.{f}") };
                        self.leaves(ty, &path, kind, out);
                    }
                }
            }
            Ty::List(items) => {
                for (i, ty) in items.iter().enumerate() {
                    let path = if name.is_empty() { format!("f{i}") } else { format!("{name}.f{i}") };
                    self.leaves(ty, &path, kind, out);
                }
            }
            _ => {}
        }
    }

    pub fn resolve(&self, t: &Type) -> Ty {
        match t {
            Type::Named(n, args) => match self.layouts.get(&n.text) {
                Some(Layout::Header(_)) => Ty::Header(n.text.clone()),
                Some(Layout::Struct(_)) => Ty::Struct(n.text.clone()),
                Some(Layout::Union(_)) => Ty::Union(n.text.clone()),
                Some(Layout::Enum(_)) => Ty::Enum(n.text.clone()),
                Some(Layout::Alias(t)) | Some(Layout::SerEnum(t, _)) => t.clone(),
                _ => Ty::Extern(n.text.clone(), args.iter().map(|a| self.resolve(a)).collect()),
            },
            Type::Tuple(items) => Ty::List(items.iter().map(|t| self.resolve(t)).collect()),
            Type::Stack(elem, size) => {
                let n = match &size.kind {
                    ExprKind::Int { value, .. } => *value,
                    ExprKind::Name(n) => self.numbers.get(n).copied().unwrap_or(0),
                    _ => 0,
                };
                Ty::Stack(Box::new(self.resolve(elem)), n as u32)
            }
            other => builtin(other),
        }
    }
}

/// The type a built-in type name stands for (anything but a named type).
fn builtin(t: &Type) -> Ty {
    match t {
        Type::Bit(w) => Ty::Bit(*w),
        Type::Int(w) => Ty::Int(*w),
        Type::Bool => Ty::Bool,
        Type::Void => Ty::Void,
        Type::Error => Ty::Error,
        Type::Str => Ty::Str,
        Type::Varbit(n) => Ty::Varbit(*n),
        Type::Integer => Ty::Number,
        Type::DontCare | Type::Named(..) | Type::Stack(..) | Type::Tuple(_) => Ty::Var("_".into()),
    }
}

fn err<T>(pos: Pos, message: impl Into<String>) -> Result<T> {
    Err(Diagnostic::new(pos, message))
}

pub fn check(program: &Program) -> Result<Checked> {
    let mut c = Checker::default();
    for d in &program.decls {
        c.declaration(d)?;
    }
    let mut checked = c.main(program)?;
    checked.layouts = c
        .types
        .iter()
        .map(|(name, def)| {
            let layout = match def {
                TypeDef::Header(f) => Layout::Header(f.clone()),
                TypeDef::Struct(f) => Layout::Struct(f.clone()),
                TypeDef::Union(f) => Layout::Union(f.clone()),
                TypeDef::SerEnum(t, m) => Layout::SerEnum(t.clone(), m.clone()),
                TypeDef::Enum(m) => Layout::Enum(m.clone()),
                TypeDef::Alias(t) => Layout::Alias(t.clone()),
                _ => Layout::Other,
            };
            (name.clone(), layout)
        })
        .collect();
    checked.numbers = c.globals.iter().filter_map(|(n, v)| Some((n.clone(), v.value?))).collect();
    for d in &program.decls {
        let Decl::Struct { name, fields } = d else { continue };
        for (i, f) in fields.iter().enumerate() {
            let kind = f.annotations.iter().find(|a| a.name.text == "match").and_then(|a| match a.args.as_slice() {
                [crate::frontend::lexer::Tok::Ident(k)] => Some(k.clone()),
                _ => None,
            });
            if let Some(kind) = kind {
                checked.field_match.insert((name.text.clone(), i), kind);
            }
        }
    }
    checked.types = c.types_seen.into_inner();
    checked.contextual = c.contextual.into_inner();
    Ok(checked)
}

#[derive(Default)]
struct Checker<'a> {
    types: HashMap<String, TypeDef<'a>>,
    errors: Vec<String>,
    match_kinds: Vec<String>,
    globals: HashMap<String, Var>,
    functions: HashMap<String, &'a Method>,
    actions: HashMap<String, &'a Action>,
    blocks: HashMap<String, (BlockKind, &'a [Param])>,
    // The block being checked.
    scopes: Vec<HashMap<String, Var>>,
    local_actions: HashMap<String, &'a Action>,
    tables: HashMap<String, &'a Table>,
    in_parser: bool,
    in_action: bool,
    /// The program's own functions, by name.
    own_functions: HashMap<String, &'a Function>,
    /// How many `for` loops enclose the statement being checked (`break` needs one).
    loops: u32,
    /// In a function's body: the type it returns, and its name.
    returns: Option<Ty>,
    function: Option<&'a str>,
    /// What `Checked::types` and `Checked::contextual` hand the mid end.
    types_seen: std::cell::RefCell<HashMap<usize, Ty>>,
    contextual: std::cell::RefCell<HashMap<usize, Ty>>,
}

impl<'a> Checker<'a> {
    fn declare_type(&mut self, name: &Name, def: TypeDef<'a>) -> Result<()> {
        if self.types.contains_key(&name.text) {
            return err(name.pos, format!("a second type named '{}'", name.text));
        }
        self.types.insert(name.text.clone(), def);
        Ok(())
    }

    fn declaration(&mut self, d: &'a Decl) -> Result<()> {
        match d {
            Decl::Const { ty, name, value } => {
                let v = self.constant(ty, value)?;
                self.global(name, v)
            }
            Decl::Typedef { ty, name } => {
                let ty = self.resolve(ty, &[])?;
                self.declare_type(name, TypeDef::Alias(ty))
            }
            Decl::Header { name, fields } => {
                let fields = self.fields(fields, true)?;
                self.declare_type(name, TypeDef::Header(fields))
            }
            Decl::Struct { name, fields } => {
                let fields = self.fields(fields, false)?;
                self.declare_type(name, TypeDef::Struct(fields))
            }
            Decl::HeaderUnion { name, fields } => {
                let members = self.fields(fields, false)?;
                if let Some(((m, t), at)) =
                    members.iter().zip(fields_of(fields)).find(|((_, t), _)| !matches!(t, Ty::Header(_)))
                {
                    return err(at, format!("a header union holds headers; '{m}' is {t}"));
                }
                self.declare_type(name, TypeDef::Union(members))
            }
            Decl::Enum { name, members } => {
                let members = self.members(members)?;
                self.declare_type(name, TypeDef::Enum(members))
            }
            Decl::SerEnum { ty, name, members } => {
                let t = self.resolve(ty, &[])?;
                if !matches!(t, Ty::Bit(_) | Ty::Int(_)) {
                    return err(name.pos, format!("a serializable enum's type is bit<N> or int<N>, not {t}"));
                }
                let mut values: Vec<(String, u128)> = Vec::new();
                for (m, value) in members {
                    if values.iter().any(|(n, _)| *n == m.text) {
                        return err(m.pos, format!("'{}' is declared twice", m.text));
                    }
                    self.expect(value, &t, &format!("{}.{}", name.text, m.text))?;
                    let Some(v) = self.const_value(value) else {
                        return err(value.pos, format!("{}.{}'s value is a compile-time number", name.text, m.text));
                    };
                    values.push((m.text.clone(), v));
                }
                self.declare_type(name, TypeDef::SerEnum(t, values))
            }
            Decl::Error { members } => {
                for m in members {
                    if self.errors.contains(&m.text) {
                        return err(m.pos, format!("error.{} is declared twice", m.text));
                    }
                    self.errors.push(m.text.clone());
                }
                Ok(())
            }
            Decl::MatchKind { members } => {
                for m in members {
                    self.match_kinds.push(m.text.clone());
                }
                Ok(())
            }
            Decl::ExternFunction(m) => {
                self.functions.insert(m.name.text.clone(), m);
                Ok(())
            }
            Decl::ExternObject { name, type_params, methods } => {
                self.declare_type(name, TypeDef::Extern { type_params, methods })
            }
            Decl::BlockType { kind, name, type_params, params } => {
                self.declare_type(name, TypeDef::Block { kind: *kind, type_params, params })
            }
            Decl::Parser { name, params, locals, states } => {
                self.block_name(name, BlockKind::Parser, params)?;
                self.parser(params, locals, states)
            }
            Decl::Control { name, params, locals, apply } => {
                self.block_name(name, BlockKind::Control, params)?;
                self.control(params, locals, apply)
            }
            Decl::Action(a) => {
                if self.actions.contains_key(&a.name.text) {
                    return err(a.name.pos, format!("a second action named '{}'", a.name.text));
                }
                self.scopes.push(HashMap::new());
                let r = self.action(a);
                self.scopes.pop();
                r?;
                self.actions.insert(a.name.text.clone(), a);
                Ok(())
            }
            Decl::Instance(i) if i.name.text == "main" => Ok(()),
            // A package instance main takes as an argument (PSA's pipelines): checked there.
            Decl::Instance(Instance { ty: Type::Named(n, _), .. })
                if matches!(self.types.get(&n.text), Some(TypeDef::Block { kind: BlockKind::Package, .. })) =>
            {
                Ok(())
            }
            Decl::Instance(i) => {
                let v = self.instance(i)?;
                self.global(&i.name, v)
            }
            Decl::Function(f) => self.function(f),
        }
    }

    /// A function: its body checked with its parameters in scope, each `return` giving the
    /// declared type, and, unless it is void, a `return` on every path through it. Declared
    /// after its body, so that it cannot call itself (P4 has no recursion).
    fn function(&mut self, f: &'a Function) -> Result<()> {
        let n = &f.name.text;
        if self.own_functions.contains_key(n) || self.functions.contains_key(n) || self.actions.contains_key(n) {
            return err(f.name.pos, format!("a second function or action named '{n}'"));
        }
        let ret = self.resolve(&f.ret, &f.type_params)?;
        self.push_params(&f.params, &f.type_params)?;
        self.returns = Some(ret.clone());
        self.function = Some(n);
        let r = self.stmts(&f.body);
        self.returns = None;
        self.function = None;
        self.scopes.pop();
        r?;
        if ret != Ty::Void && !always_returns(&f.body) {
            return err(
                f.name.pos,
                format!("function '{n}' returns {ret}, and a path through it ends without 'return'"),
            );
        }
        self.own_functions.insert(n.clone(), f);
        Ok(())
    }

    /// A constant: its type, its value checked against it, and the number it is if it is one.
    fn constant(&self, ty: &Type, value: &Expr) -> Result<Var> {
        let ty = self.resolve(ty, &[])?;
        self.expect(value, &ty, "the constant's value")?;
        Ok(Var { ty, writable: false, value: self.const_value(value) })
    }

    /// A variable: its type, and its initial value checked against it.
    fn variable(&self, ty: &Type, init: Option<&Expr>) -> Result<Var> {
        let ty = self.resolve(ty, &[])?;
        if let Some(e) = init {
            self.expect(e, &ty, "the initial value")?;
        }
        Ok(Var { ty, writable: true, value: None })
    }

    fn global(&mut self, name: &Name, v: Var) -> Result<()> {
        if self.globals.insert(name.text.clone(), v).is_some() {
            return err(name.pos, format!("a second declaration of '{}'", name.text));
        }
        Ok(())
    }

    fn block_name(&mut self, name: &Name, kind: BlockKind, params: &'a [Param]) -> Result<()> {
        if self.blocks.contains_key(&name.text) || self.types.contains_key(&name.text) {
            return err(name.pos, format!("a second declaration of '{}'", name.text));
        }
        self.blocks.insert(name.text.clone(), (kind, params));
        Ok(())
    }

    fn members(&self, members: &[Name]) -> Result<Vec<String>> {
        let mut out: Vec<String> = Vec::new();
        for m in members {
            if out.contains(&m.text) {
                return err(m.pos, format!("'{}' is declared twice", m.text));
            }
            out.push(m.text.clone());
        }
        Ok(out)
    }

    fn fields(&self, fields: &[Field], header: bool) -> Result<Vec<(String, Ty)>> {
        let mut out: Vec<(String, Ty)> = Vec::new();
        for f in fields {
            let ty = self.resolve(&f.ty, &[])?;
            if header && !matches!(ty, Ty::Bit(_) | Ty::Int(_) | Ty::Varbit(_)) {
                return err(
                    f.name.pos,
                    format!("a header's fields are bit<N>, int<N> or varbit<N>; '{}' is {ty}", f.name.text),
                );
            }
            if header && matches!(ty, Ty::Varbit(_)) && out.iter().any(|(_, t)| matches!(t, Ty::Varbit(_))) {
                return err(
                    f.name.pos,
                    format!("a header has at most one varbit field; '{}' is a second", f.name.text),
                );
            }
            if !header
                && !matches!(
                    ty,
                    Ty::Bit(_)
                        | Ty::Int(_)
                        | Ty::Bool
                        | Ty::Error
                        | Ty::Header(_)
                        | Ty::Struct(_)
                        | Ty::Enum(_)
                        | Ty::Stack(..)
                        | Ty::Union(_)
                        | Ty::List(_)
                )
            {
                return err(f.name.pos, format!("a struct cannot hold {ty} ('{}')", f.name.text));
            }
            if out.iter().any(|(n, _)| *n == f.name.text) {
                return err(f.name.pos, format!("a second field named '{}'", f.name.text));
            }
            out.push((f.name.text.clone(), ty));
        }
        if header && out.iter().map(|(_, t)| width(t).unwrap_or(0)).sum::<u32>() % 8 != 0 {
            let bits: u32 = out.iter().map(|(_, t)| width(t).unwrap_or(0)).sum();
            let pos = fields.first().map_or(Pos::default(), |f| f.name.pos);
            return err(pos, format!("a header is whole bytes; this one's fields add up to {bits} bits"));
        }
        Ok(out)
    }

    /// The checker's type for `t`, where `vars` are type parameters in scope.
    fn resolve(&self, t: &Type, vars: &[Name]) -> Result<Ty> {
        Ok(match t {
            Type::Named(name, args) => {
                if vars.iter().any(|v| v.text == name.text) {
                    return Ok(Ty::Var(name.text.clone()));
                }
                let args = args.iter().map(|a| self.resolve(a, vars)).collect::<Result<Vec<_>>>()?;
                let arity = |n: usize| {
                    if args.len() == n {
                        Ok(())
                    } else {
                        err(name.pos, format!("'{}' takes {n} type argument(s), not {}", name.text, args.len()))
                    }
                };
                match self.types.get(&name.text) {
                    Some(TypeDef::Header(_)) => {
                        arity(0)?;
                        Ty::Header(name.text.clone())
                    }
                    Some(TypeDef::Struct(_)) => {
                        arity(0)?;
                        Ty::Struct(name.text.clone())
                    }
                    Some(TypeDef::Union(_)) => {
                        arity(0)?;
                        Ty::Union(name.text.clone())
                    }
                    Some(TypeDef::Enum(_)) => {
                        arity(0)?;
                        Ty::Enum(name.text.clone())
                    }
                    Some(TypeDef::Alias(t)) | Some(TypeDef::SerEnum(t, _)) => {
                        arity(0)?;
                        t.clone()
                    }
                    Some(TypeDef::Extern { type_params, .. }) => {
                        arity(type_params.len())?;
                        Ty::Extern(name.text.clone(), args)
                    }
                    Some(TypeDef::Block { type_params, .. }) => {
                        arity(type_params.len())?;
                        Ty::BlockType(name.text.clone(), args)
                    }
                    None => return err(name.pos, format!("no type named '{}'", name.text)),
                }
            }
            Type::Tuple(items) => Ty::List(items.iter().map(|t| self.resolve(t, vars)).collect::<Result<_>>()?),
            Type::Stack(elem, size) => {
                let elem = self.resolve(elem, vars)?;
                if !matches!(elem, Ty::Header(_) | Ty::Union(_)) {
                    return err(size.pos, format!("a stack holds headers or header unions, not {elem}"));
                }
                match self.const_value(size) {
                    Some(n @ 1..=256) => Ty::Stack(Box::new(elem), n as u32),
                    Some(n) => return err(size.pos, format!("a header stack holds 1 to 256 headers, not {n}")),
                    None => return err(size.pos, "a header stack's size is a compile-time number"),
                }
            }
            other => builtin(other),
        })
    }

    fn push_params(&mut self, params: &[Param], vars: &[Name]) -> Result<()> {
        let mut scope = HashMap::new();
        for p in params {
            let ty = self.resolve(&p.ty, vars)?;
            let writable = matches!(p.direction, Some(Direction::Out) | Some(Direction::InOut));
            if scope.insert(p.name.text.clone(), Var { ty, writable, value: None }).is_some() {
                return err(p.name.pos, format!("a second parameter named '{}'", p.name.text));
            }
        }
        self.scopes.push(scope);
        Ok(())
    }

    fn declare_local(&mut self, name: &Name, v: Var) -> Result<()> {
        let scope = self.scopes.last_mut().expect("a scope");
        if scope.insert(name.text.clone(), v).is_some() {
            return err(name.pos, format!("'{}' is declared twice here", name.text));
        }
        Ok(())
    }

    /// The type `e` names, where it is a type's name and no variable's.
    fn lookup_type(&self, e: &Expr) -> Option<&TypeDef<'a>> {
        match &e.kind {
            ExprKind::Name(n) if self.lookup(n).is_none() => self.types.get(n),
            _ => None,
        }
    }

    fn lookup(&self, name: &str) -> Option<&Var> {
        self.scopes.iter().rev().find_map(|s| s.get(name)).or_else(|| self.globals.get(name))
    }

    fn parser(&mut self, params: &'a [Param], locals: &'a [Local], states: &'a [State]) -> Result<()> {
        self.push_params(params, &[])?;
        self.in_parser = true;
        let r = self.parser_body(locals, states);
        self.in_parser = false;
        self.scopes.clear();
        r
    }

    fn parser_body(&mut self, locals: &'a [Local], states: &'a [State]) -> Result<()> {
        self.scopes.push(HashMap::new());
        for l in locals {
            self.local(l)?;
        }
        let mut names: Vec<&str> = Vec::new();
        for s in states {
            if s.name.text == "accept" || s.name.text == "reject" {
                return err(s.name.pos, format!("'{}' is the parser's own state: it cannot be declared", s.name.text));
            }
            if names.contains(&s.name.text.as_str()) {
                return err(s.name.pos, format!("a second state named '{}'", s.name.text));
            }
            names.push(&s.name.text);
        }
        if !names.contains(&"start") {
            let pos = states.first().map_or(Pos::default(), |s| s.name.pos);
            return err(pos, "a parser needs a 'start' state");
        }
        let known = |n: &Name| -> Result<()> {
            if n.text == "accept" || n.text == "reject" || names.contains(&n.text.as_str()) {
                Ok(())
            } else {
                err(n.pos, format!("no state '{}' (this parser has {}, accept and reject)", n.text, names.join(", ")))
            }
        };
        for s in states {
            self.scopes.push(HashMap::new());
            self.stmts(&s.body)?;
            match &s.transition {
                Transition::Goto(n) => known(n)?,
                Transition::Select { exprs, cases } => {
                    let tys = exprs.iter().map(|e| self.expr(e)).collect::<Result<Vec<_>>>()?;
                    for (e, t) in exprs.iter().zip(&tys) {
                        if width(t).is_none() && !matches!(t, Ty::Bool | Ty::Enum(_) | Ty::Error) {
                            return err(e.pos, format!("select takes bits, bool, an enum or error; this is {t}"));
                        }
                    }
                    for case in cases {
                        match self.value_set_keyset(&case.keys) {
                            Some((at, elem)) => {
                                let members = self.value_set_widths(&elem).unwrap_or_default();
                                let keys: Option<Vec<u32>> = tys.iter().map(width).collect();
                                if keys.as_ref() != Some(&members) {
                                    let keys: Vec<String> = tys.iter().map(|t| t.to_string()).collect();
                                    return err(
                                        at,
                                        format!(
                                            "this value_set<{elem}> holds fields of {members:?} bits; the select matches ({})",
                                            keys.join(", ")
                                        ),
                                    );
                                }
                            }
                            None => self.keysets(&case.keys, &tys, case.next.pos, "select")?,
                        }
                        known(&case.next)?;
                    }
                }
            }
            self.scopes.pop();
        }
        Ok(())
    }

    /// The value set a select case's keyset names, where it is written and its element type:
    /// a value set is the case's whole keyset, matched against all the select's fields.
    fn value_set_keyset(&self, keys: &[Keyset]) -> Option<(Pos, Ty)> {
        let [Keyset::Value(e)] = keys else { return None };
        let ExprKind::Name(n) = &e.kind else { return None };
        match self.lookup(n) {
            Some(Var { ty: Ty::ValueSet(elem), .. }) => Some((e.pos, (**elem).clone())),
            _ => None,
        }
    }

    /// The widths of a value set's element type's fields, in order (a nested struct's
    /// flattened), if it is one a value set may hold.
    fn value_set_widths(&self, t: &Ty) -> Option<Vec<u32>> {
        match t {
            Ty::Bit(w) => Some(vec![*w]),
            Ty::Struct(n) => match self.types.get(n) {
                Some(TypeDef::Struct(fields)) if !fields.is_empty() => {
                    let mut out = Vec::new();
                    for (_, f) in fields {
                        out.extend(self.value_set_widths(f)?);
                    }
                    Some(out)
                }
                _ => None,
            },
            Ty::List(items) if !items.is_empty() => {
                let mut out = Vec::new();
                for f in items {
                    out.extend(self.value_set_widths(f)?);
                }
                Some(out)
            }
            _ => None,
        }
    }

    /// A select case's or a const entry's keysets against the types they match.
    fn keysets(&self, keys: &[Keyset], tys: &[Ty], pos: Pos, what: &str) -> Result<()> {
        if keys.len() == 1 && matches!(keys[0], Keyset::Default | Keyset::DontCare) {
            return Ok(());
        }
        for k in keys {
            if let Keyset::Value(e) = k {
                if let ExprKind::Name(n) = &e.kind {
                    if let Some(Var { ty: Ty::ValueSet(_), .. }) = self.lookup(n) {
                        let alone = if what == "select" {
                            "a value_set is a select case's whole keyset, not one of its fields"
                        } else {
                            "a value_set is matched by a parser's select, not a table's entries"
                        };
                        return err(e.pos, alone);
                    }
                }
            }
        }
        if keys.len() != tys.len() {
            return err(pos, format!("{} value(s) for the {} field(s) this {what} matches", keys.len(), tys.len()));
        }
        for (k, t) in keys.iter().zip(tys) {
            match k {
                Keyset::Default | Keyset::DontCare => {}
                Keyset::Value(e) => self.expect(e, t, "a key")?,
                Keyset::Mask(a, b) | Keyset::Range(a, b) => {
                    self.expect(a, t, "a key")?;
                    self.expect(b, t, "a key")?;
                }
            }
        }
        Ok(())
    }

    fn control(&mut self, params: &'a [Param], locals: &'a [Local], apply: &'a [Stmt]) -> Result<()> {
        self.push_params(params, &[])?;
        self.scopes.push(HashMap::new());
        let r = (|| {
            for l in locals {
                self.local(l)?;
            }
            self.stmts(apply)
        })();
        self.scopes.clear();
        self.local_actions.clear();
        self.tables.clear();
        r
    }

    fn local(&mut self, l: &'a Local) -> Result<()> {
        match l {
            Local::Const { ty, name, value } => {
                let v = self.constant(ty, value)?;
                self.declare_local(name, v)
            }
            Local::Var { ty, name, init } => {
                let v = self.variable(ty, init.as_ref())?;
                self.declare_local(name, v)
            }
            Local::Instance(i) => {
                let v = self.instance(i)?;
                self.declare_local(&i.name, v)
            }
            Local::ValueSet(v) => {
                let elem = self.resolve(&v.ty, &[])?;
                if self.value_set_widths(&elem).is_none() {
                    return err(v.name.pos, format!("a value_set holds bit<W> values or structs of them, not {elem}"));
                }
                match self.const_value(&v.size) {
                    Some(1..=VALUE_SET_MAX) => {}
                    Some(n) => {
                        return err(v.size.pos, format!("a value_set holds 1 to {VALUE_SET_MAX} members, not {n}"));
                    }
                    None => return err(v.size.pos, "a value_set's size is a compile-time number"),
                }
                self.declare_local(&v.name, Var { ty: Ty::ValueSet(Box::new(elem)), writable: false, value: None })
            }
            Local::Action(a) => {
                if self.local_actions.contains_key(&a.name.text) {
                    return err(a.name.pos, format!("a second action named '{}'", a.name.text));
                }
                self.action(a)?;
                self.local_actions.insert(a.name.text.clone(), a);
                Ok(())
            }
            Local::Table(t) => {
                self.table(t)?;
                self.declare_local(&t.name, Var { ty: Ty::Table(t.name.text.clone()), writable: false, value: None })?;
                self.tables.insert(t.name.text.clone(), t);
                Ok(())
            }
        }
    }

    /// An action's body, its parameters in scope: those with a direction as the caller's, those
    /// without (the control plane's data) read-only.
    fn action(&mut self, a: &'a Action) -> Result<()> {
        self.push_params(&a.params, &[])?;
        self.in_action = true;
        let r = self.stmts(&a.body);
        self.in_action = false;
        self.scopes.pop();
        r
    }

    fn find_action(&self, name: &str) -> Option<&'a Action> {
        self.local_actions.get(name).or_else(|| self.actions.get(name)).copied()
    }

    fn table(&mut self, t: &'a Table) -> Result<()> {
        let mut key_tys = Vec::new();
        for k in &t.keys {
            let ty = self.expr(&k.expr)?;
            if width(&ty).is_none() && !matches!(ty, Ty::Bool | Ty::Error | Ty::Enum(_)) {
                return err(k.expr.pos, format!("a table key is bits, bool, an enum or error; this one is {ty}"));
            }
            if !self.match_kinds.contains(&k.match_kind.text) {
                return err(
                    k.match_kind.pos,
                    format!("no match kind '{}' (there are {})", k.match_kind.text, self.match_kinds.join(", ")),
                );
            }
            if k.match_kind.text == "lpm" && t.keys.iter().filter(|k| k.match_kind.text == "lpm").count() > 1 {
                return err(k.match_kind.pos, "a table has at most one lpm key");
            }
            key_tys.push(ty);
        }
        if !t.has_actions {
            return err(
                t.name.pos,
                format!("table '{}' has no 'actions' property (it may list none: actions = {{}})", t.name.text),
            );
        }
        for r in &t.actions {
            let Some(a) = self.find_action(&r.name.text) else {
                return err(r.name.pos, format!("no action '{}'", r.name.text));
            };
            // The parameters with a direction are bound here, in the list; the rest are the
            // control plane's data.
            let bound = a.params.iter().take_while(|p| p.direction.is_some()).count();
            if let Some(p) = a.params[bound..].iter().find(|p| p.direction.is_some()) {
                return err(
                    p.name.pos,
                    format!(
                        "'{}': parameters with a direction come before those without (the control plane's)",
                        p.name.text
                    ),
                );
            }
            if r.args.is_empty() && bound > 0 {
                return err(
                    r.name.pos,
                    format!(
                        "'{}' takes '{}' with a direction, which no table entry can give: bind it here, {}(...)",
                        a.name.text, a.params[0].name.text, a.name.text
                    ),
                );
            }
            if !r.args.is_empty() && r.args.len() != bound {
                return err(
                    r.name.pos,
                    format!(
                        "'{}': a table's action list binds its {bound} parameter(s) with a direction, here given {}",
                        r.name.text,
                        r.args.len()
                    ),
                );
            }
            self.args(&r.args, &a.params[..bound], r.name.pos, &a.name.text, &HashMap::new())?;
        }
        let listed = |r: &ActionRef| t.actions.iter().any(|x| x.name.text == r.name.text);
        let call = |c: &Self, r: &ActionRef, what: &str| -> Result<()> {
            if !listed(r) {
                return err(r.name.pos, format!("{what} '{}' is not among the table's actions", r.name.text));
            }
            let a = c.find_action(&r.name.text).expect("listed actions exist");
            // All the arguments, or the data alone after those the action list binds.
            let bound = a.params.iter().filter(|p| p.direction.is_some()).count();
            let params =
                if bound > 0 && r.args.len() == a.params.len() - bound { &a.params[bound..] } else { &a.params[..] };
            c.args(&r.args, params, r.name.pos, &a.name.text, &HashMap::new())?;
            Ok(())
        };
        if let Some((r, _)) = &t.default_action {
            call(self, r, "the default action")?;
        }
        for e in &t.entries {
            self.keysets(&e.keys, &key_tys, e.pos, "table")?;
            call(self, &e.action, "the entry's action")?;
        }
        if let Some(size) = &t.size {
            if self.const_value(size).is_none() {
                return err(size.pos, "a table's size is a number");
            }
        }
        let mut selector = false;
        for (prop, value) in &t.properties {
            if matches!(prop.text.as_str(), "implementation" | "psa_implementation") {
                selector = self.implementation(value)?;
                continue;
            }
            let ty = self.expr(value)?;
            // v1model's and edgeflow.p4's direct externs, and PSA's (psa.p4's table properties).
            let wanted = match prop.text.as_str() {
                "counters" => "direct_counter",
                "meters" => "direct_meter",
                "psa_direct_counter" => "DirectCounter",
                "psa_direct_meter" => "DirectMeter",
                other => return err(prop.pos, format!("no table property '{other}' (there are key, actions, default_action, size, entries, counters, meters, psa_direct_counter, psa_direct_meter, implementation and psa_implementation)")),
            };
            if !matches!(&ty, Ty::Extern(n, _) if n == wanted) {
                return err(value.pos, format!("'{}' takes a {wanted} instance; this is {ty}", prop.text));
            }
        }
        if let Some(k) = t.keys.iter().find(|k| k.match_kind.text == "selector") {
            if !selector {
                return err(
                    k.match_kind.pos,
                    format!("a 'selector' key picks among a group's members: table '{}' has no action selector (implementation = ...)", t.name.text),
                );
            }
        }
        if !t.entries.is_empty() && t.properties.iter().any(|(p, _)| p.text.ends_with("implementation")) {
            return err(t.name.pos, format!("table '{}': entries of a table with an action profile are the control plane's (members and groups), not the program's", t.name.text));
        }
        Ok(())
    }

    /// A table's `implementation` (v1model) or `psa_implementation` (PSA): an action profile or
    /// selector instance by name, or constructed in place (`action_profile(128)`). Whether it
    /// is a selector.
    fn implementation(&self, value: &Expr) -> Result<bool> {
        let extern_name = match &value.kind {
            ExprKind::Call { callee, type_args, args } if type_args.is_empty() => {
                let ExprKind::Name(n) = &callee.kind else {
                    return err(value.pos, "an implementation is an action profile or selector");
                };
                let instance = Instance {
                    ty: Type::Named(Name { text: n.clone(), pos: callee.pos }, Vec::new()),
                    args: args.clone(),
                    name: Name { text: n.clone(), pos: value.pos },
                    annotations: Vec::new(),
                };
                match self.instance(&instance)?.ty {
                    Ty::Extern(name, _) => name,
                    other => {
                        return err(
                            value.pos,
                            format!("an implementation is an action profile or selector; this is {other}"),
                        )
                    }
                }
            }
            _ => match self.expr(value)? {
                Ty::Extern(name, _) => name,
                other => {
                    return err(
                        value.pos,
                        format!("an implementation is an action profile or selector; this is {other}"),
                    )
                }
            },
        };
        match extern_name.as_str() {
            "action_profile" | "ActionProfile" => Ok(false),
            "action_selector" | "ActionSelector" => Ok(true),
            other => err(value.pos, format!("an implementation is an action profile or selector; this is {other}")),
        }
    }

    /// `Type(args) name;`: an extern instance, its constructor's arguments checked, or an
    /// instance of one of the program's own parsers (in a parser) or controls (in a control),
    /// which `name.apply(...)` runs as a sub-parser or sub-control.
    fn instance(&self, i: &Instance) -> Result<Var> {
        let own_block = match &i.ty {
            Type::Named(n, targs) => self.blocks.get(&n.text).map(|(kind, _)| (n, targs, kind)),
            _ => None,
        };
        if let Some((n, targs, kind)) = own_block {
            let (wanted, here) =
                if self.in_parser { (BlockKind::Parser, "parser") } else { (BlockKind::Control, "control") };
            if *kind != wanted {
                return err(n.pos, format!("'{}' is not a {here}: a {here} instantiates {here}s", n.text));
            }
            if !targs.is_empty() || !i.args.is_empty() {
                return err(n.pos, "constructor parameters of a parser or control are outside the subset edgeflow compiles (docs/p4.md)");
            }
            return Ok(Var { ty: Ty::Block(n.text.clone()), writable: false, value: None });
        }
        let ty = self.resolve(&i.ty, &[])?;
        let Ty::Extern(name, targs) = &ty else {
            return err(i.name.pos, format!("'{}' is not an extern: only externs are instantiated here", ty));
        };
        let Some(TypeDef::Extern { type_params, methods }) = self.types.get(name) else { unreachable!() };
        let bind: HashMap<String, Ty> = type_params.iter().map(|p| p.text.clone()).zip(targs.iter().cloned()).collect();
        let ctors: Vec<&Method> = methods.iter().filter(|m| m.ret.is_none()).collect();
        let Some(ctor) = ctors.iter().find(|m| m.params.len() == i.args.len()) else {
            return err(
                i.name.pos,
                format!(
                    "{name} takes {} constructor argument(s), not {}",
                    ctors.first().map_or(0, |m| m.params.len()),
                    i.args.len()
                ),
            );
        };
        self.args(&i.args, &ctor.params, i.name.pos, name, &bind)?;
        Ok(Var { ty, writable: false, value: None })
    }

    fn stmts(&mut self, stmts: &'a [Stmt]) -> Result<()> {
        self.scopes.push(HashMap::new());
        let r = stmts.iter().try_for_each(|s| self.stmt(s));
        self.scopes.pop();
        r
    }

    fn stmt(&mut self, s: &'a Stmt) -> Result<()> {
        match s {
            Stmt::Assign { target, value } => {
                let ty = self.lvalue(target)?;
                self.expect(value, &ty, "the value")
            }
            Stmt::Call(e) => self.expr(e).map(drop),
            Stmt::If { cond, then, otherwise } => {
                self.expect(cond, &Ty::Bool, "the condition")?;
                self.stmts(then)?;
                if let Some(o) = otherwise {
                    self.stmts(o)?;
                }
                Ok(())
            }
            Stmt::Block(b) => self.stmts(b),
            Stmt::Switch { expr, cases, pos } => {
                let ty = self.expr(expr)?;
                let Ty::ActionRun(table) = ty else {
                    return err(
                        *pos,
                        format!("switch takes a table's action_run (t.apply().action_run); this is {ty}"),
                    );
                };
                let t = self.tables[&table];
                let mut seen: Vec<&str> = Vec::new();
                for (labels, _) in cases {
                    for l in labels {
                        if l.text != "default" && !t.actions.iter().any(|a| a.name.text == l.text) {
                            return err(l.pos, format!("'{}' is not one of table {table}'s actions", l.text));
                        }
                        if seen.contains(&l.text.as_str()) {
                            return err(l.pos, format!("'{}' is a label twice", l.text));
                        }
                        seen.push(&l.text);
                    }
                }
                for (_, body) in cases {
                    if let Some(b) = body {
                        self.stmts(b)?;
                    }
                }
                Ok(())
            }
            Stmt::Var { ty, name, init } => {
                let v = self.variable(ty, init.as_ref())?;
                self.declare_local(name, v)
            }
            Stmt::Const { ty, name, value } => {
                let v = self.constant(ty, value)?;
                self.declare_local(name, v)
            }
            Stmt::For { pos, .. } if self.in_parser => err(*pos, "a parser loops through its states, not with 'for'"),
            Stmt::For { init, cond, update, body, .. } => {
                self.scopes.push(HashMap::new());
                let r = (|| {
                    init.iter().try_for_each(|s| self.stmt(s))?;
                    if let Some(c) = cond {
                        self.expect(c, &Ty::Bool, "the loop's condition")?;
                    }
                    update.iter().try_for_each(|s| self.stmt(s))?;
                    self.loops += 1;
                    let r = self.stmts(body);
                    self.loops -= 1;
                    r
                })();
                self.scopes.pop();
                r
            }
            Stmt::Break(pos) | Stmt::Continue(pos) if self.loops == 0 => {
                let word = if matches!(s, Stmt::Break(_)) { "break" } else { "continue" };
                err(*pos, format!("'{word}' belongs inside a for loop"))
            }
            Stmt::Break(_) | Stmt::Continue(_) => Ok(()),
            Stmt::Return(pos) if self.in_parser => err(*pos, "a parser's states end in a transition, not return"),
            Stmt::Return(pos) if self.returns.as_ref().is_some_and(|t| *t != Ty::Void) => {
                err(*pos, format!("this function returns {}: 'return' needs a value", self.returns.as_ref().unwrap()))
            }
            Stmt::ReturnValue(value, pos) => match &self.returns {
                None => {
                    err(*pos, "'return' with a value is a function's; actions, controls and parsers return nothing")
                }
                Some(Ty::Void) => err(*pos, "a void function's 'return' has no value"),
                Some(t) => self.expect(value, &t.clone(), "the returned value"),
            },
            Stmt::Exit(pos) if self.in_parser => err(*pos, "a parser's states end in a transition, not exit"),
            Stmt::Return(_) | Stmt::Exit(_) | Stmt::Empty => Ok(()),
        }
    }

    /// The type of something assigned to, or an error saying why it cannot be.
    fn lvalue(&self, e: &Expr) -> Result<Ty> {
        let ty = self.lvalue_uncached(e)?;
        self.types_seen.borrow_mut().insert(e as *const Expr as usize, ty.clone());
        Ok(ty)
    }

    fn lvalue_uncached(&self, e: &Expr) -> Result<Ty> {
        match &e.kind {
            ExprKind::Name(n) => match self.lookup(n) {
                Some(v) if v.writable => Ok(v.ty.clone()),
                Some(_) => err(e.pos, format!("'{n}' cannot be assigned: a constant, or a parameter that is only read (in, or an action's data)")),
                None => err(e.pos, format!("no '{n}' here")),
            },
            ExprKind::Member(inner, _) => {
                self.lvalue(inner)?;
                self.expr(e)
            }
            ExprKind::Slice(inner, ..) | ExprKind::Index(inner, _) => {
                self.lvalue(inner)?;
                self.expr(e)
            }
            _ => err(e.pos, "this cannot be assigned to"),
        }
    }

    /// Checks that `e` can be given where `want` is expected (`what` names the place).
    fn expect(&self, e: &Expr, want: &Ty, what: &str) -> Result<()> {
        if let (ExprKind::List(items), Ty::Struct(n) | Ty::Header(n)) = (&e.kind, want) {
            // `{a, b}` initialises a struct's or header's fields in order.
            let (TypeDef::Struct(fields) | TypeDef::Header(fields)) = &self.types[n] else { unreachable!() };
            if items.len() != fields.len() {
                return err(
                    e.pos,
                    format!("a list of {} value(s) for {want}'s {} field(s)", items.len(), fields.len()),
                );
            }
            for (item, (field, ty)) in items.iter().zip(fields) {
                self.expect(item, ty, &format!("{what}'s '{field}'"))?;
            }
            return Ok(());
        }
        if let (ExprKind::List(items), Ty::List(tys)) = (&e.kind, want) {
            // A tuple's value: its elements in order.
            if items.len() != tys.len() {
                return err(e.pos, format!("a list of {} value(s) for {want}", items.len()));
            }
            for (i, (item, ty)) in items.iter().zip(tys).enumerate() {
                self.expect(item, ty, &format!("{what}'s element {i}"))?;
            }
            return Ok(());
        }
        if matches!(e.kind, ExprKind::List(_)) && !matches!(want, Ty::Var(_)) {
            return err(e.pos, format!("a list {{...}} initialises a struct or a header; {what} is {want}"));
        }
        let got = self.expr(e)?;
        if got == *want {
            return Ok(());
        }
        if got == Ty::Number {
            if let Some(w) = width(want) {
                if let Some(v) = self.const_value(e) {
                    if w < 128 && v >> w != 0 {
                        return err(e.pos, format!("{v} does not fit in {want}"));
                    }
                }
                self.contextual.borrow_mut().insert(e as *const Expr as usize, want.clone());
                return Ok(());
            }
        }
        err(e.pos, format!("{what} should be {want}, and is {got}"))
    }

    /// A compile-time number, if `e` is one.
    fn const_value(&self, e: &Expr) -> Option<u128> {
        match &e.kind {
            ExprKind::Int { value, .. } => Some(*value),
            ExprKind::Name(n) => self.lookup(n).and_then(|v| v.value),
            ExprKind::Member(base, m) => match (&base.kind, self.lookup_type(base)) {
                (_, Some(TypeDef::SerEnum(_, members))) => members.iter().find(|(x, _)| *x == m.text).map(|(_, v)| *v),
                _ => None,
            },
            ExprKind::Binary(op, a, b) => {
                let (x, y) = (self.const_value(a)?, self.const_value(b)?);
                match op {
                    BinOp::Add => x.checked_add(y),
                    BinOp::Sub => x.checked_sub(y),
                    BinOp::Mul => x.checked_mul(y),
                    BinOp::Div => x.checked_div(y),
                    BinOp::Mod => x.checked_rem(y),
                    BinOp::Shl => (y < 128).then(|| x << y).filter(|v| v >> y == x),
                    BinOp::Shr => (y < 128).then(|| x >> y),
                    BinOp::BitAnd => Some(x & y),
                    BinOp::BitOr => Some(x | y),
                    BinOp::BitXor => Some(x ^ y),
                    _ => None,
                }
                // Only numbers without a width fold: a typed one wraps at its width.
                .filter(|_| matches!(self.expr(a), Ok(Ty::Number)) && matches!(self.expr(b), Ok(Ty::Number)))
            }
            _ => None,
        }
    }

    fn expr(&self, e: &Expr) -> Result<Ty> {
        let ty = self.expr_uncached(e)?;
        self.types_seen.borrow_mut().insert(e as *const Expr as usize, ty.clone());
        Ok(ty)
    }

    fn expr_uncached(&self, e: &Expr) -> Result<Ty> {
        match &e.kind {
            ExprKind::Int { width: None, .. } => Ok(Ty::Number),
            ExprKind::Int { width: Some((w, signed)), value } => {
                if *w < 128 && value >> w != 0 {
                    return err(e.pos, format!("{value} does not fit in {w} bits"));
                }
                Ok(if *signed { Ty::Int(*w) } else { Ty::Bit(*w) })
            }
            ExprKind::Bool(_) => Ok(Ty::Bool),
            ExprKind::Str(_) => Ok(Ty::Str),
            ExprKind::DontCare => err(e.pos, "'_' is only a key that matches anything"),
            ExprKind::Name(n) if n == "error" => err(e.pos, "error.NAME names an error"),
            ExprKind::Name(n) | ExprKind::TopName(n) => {
                let v = if matches!(e.kind, ExprKind::TopName(_)) { self.globals.get(n) } else { self.lookup(n) };
                match v {
                    Some(v) => Ok(v.ty.clone()),
                    None if self.blocks.contains_key(n) => Ok(Ty::Block(n.clone())),
                    None if self.find_action(n).is_some()
                        || self.functions.contains_key(n)
                        || self.own_functions.contains_key(n) =>
                    {
                        err(e.pos, format!("'{n}' is called: {n}(...)"))
                    }
                    None => err(e.pos, format!("no '{n}' here")),
                }
            }
            ExprKind::Member(inner, m) => self.member(inner, m),
            ExprKind::Index(base, index) => {
                let ty = self.expr(base)?;
                if let Ty::List(items) = &ty {
                    return match self.const_value(index) {
                        Some(i) if (i as usize) < items.len() => Ok(items[i as usize].clone()),
                        Some(i) => err(index.pos, format!("index {i} is past {ty}")),
                        None => err(index.pos, "a tuple's index is a compile-time number"),
                    };
                }
                let Ty::Stack(elem, size) = ty else {
                    return err(base.pos, format!("[...] indexes a header stack, and this is {ty}"));
                };
                let it = self.expr(index)?;
                if !matches!(it, Ty::Bit(_) | Ty::Int(_) | Ty::Number) {
                    return err(index.pos, format!("a stack's index is a number (bit<N>, int<N>), not {it}"));
                }
                if let Some(i) = self.const_value(index) {
                    if i >= size as u128 {
                        return err(index.pos, format!("index {i} is past the stack's {size} headers"));
                    }
                }
                Ok(*elem)
            }
            ExprKind::Slice(inner, hi, lo) => {
                let ty = self.expr(inner)?;
                let Ty::Bit(w) = ty else { return err(inner.pos, format!("a slice takes bit<N>, not {ty}")) };
                let (Some(h), Some(l)) = (self.const_value(hi), self.const_value(lo)) else {
                    return err(hi.pos, "a slice's bounds are numbers");
                };
                if h < l || h >= w as u128 {
                    return err(hi.pos, format!("[{h}:{l}] is not inside bit<{w}> (bits {}..0)", w - 1));
                }
                Ok(Ty::Bit((h - l + 1) as u32))
            }
            ExprKind::Call { callee, type_args, args } => self.call(e.pos, callee, type_args, args),
            ExprKind::Unary(op, inner) => {
                let ty = self.expr(inner)?;
                match (op, &ty) {
                    (UnOp::Not, Ty::Bool) => Ok(Ty::Bool),
                    (UnOp::Complement, Ty::Bit(_) | Ty::Int(_)) => Ok(ty),
                    (UnOp::Neg, Ty::Bit(_) | Ty::Int(_) | Ty::Number) => Ok(ty),
                    _ => err(
                        e.pos,
                        format!(
                            "'{}' does not take {ty}",
                            match op {
                                UnOp::Not => "!",
                                UnOp::Complement => "~",
                                UnOp::Neg => "-",
                            }
                        ),
                    ),
                }
            }
            ExprKind::Binary(op, a, b) => self.binary(e.pos, *op, a, b),
            ExprKind::Cond(c, a, b) => {
                self.expect(c, &Ty::Bool, "the condition")?;
                let ta = self.expr(a)?;
                let tb = self.expr(b)?;
                unify(&ta, &tb)
                    .ok_or_else(|| Diagnostic::new(e.pos, format!("the two sides of '?:' differ: {ta} and {tb}")))
            }
            ExprKind::Cast(t, inner) => {
                let to = self.resolve(t, &[])?;
                let from = self.expr(inner)?;
                let ok = match (&from, &to) {
                    (Ty::Bit(_) | Ty::Int(_) | Ty::Number, Ty::Bit(_) | Ty::Int(_)) => true,
                    (Ty::Bool, Ty::Bit(1)) | (Ty::Bit(1), Ty::Bool) => true,
                    (a, b) => a == b,
                };
                if !ok {
                    return err(e.pos, format!("{from} cannot be cast to {to}"));
                }
                Ok(to)
            }
            ExprKind::List(_) => {
                err(e.pos, "a list {...} initialises a struct or a header, and nothing here says which")
            }
        }
    }

    fn binary(&self, pos: Pos, op: BinOp, a: &Expr, b: &Expr) -> Result<Ty> {
        let (ta, tb) = (self.expr(a)?, self.expr(b)?);
        let sym = op_symbol(op);
        if let Some(t) = [&ta, &tb].into_iter().find(|t| matches!(t, Ty::Varbit(_))) {
            if !matches!(op, BinOp::Eq | BinOp::Ne) {
                return err(
                    pos,
                    format!("'{sym}' does not take {t}: a varbit is assigned, emitted and compared with == and !="),
                );
            }
        }
        match op {
            BinOp::And | BinOp::Or => {
                for (e, t) in [(a, &ta), (b, &tb)] {
                    if *t != Ty::Bool {
                        return err(e.pos, format!("'{sym}' takes bool, and this is {t}"));
                    }
                }
                Ok(Ty::Bool)
            }
            BinOp::Eq | BinOp::Ne => {
                unify(&ta, &tb)
                    .ok_or_else(|| Diagnostic::new(pos, format!("'{sym}' compares {ta} with {tb}: cast one")))?;
                Ok(Ty::Bool)
            }
            BinOp::Lt | BinOp::Gt | BinOp::Le | BinOp::Ge => {
                let t = unify(&ta, &tb)
                    .ok_or_else(|| Diagnostic::new(pos, format!("'{sym}' compares {ta} with {tb}: cast one")))?;
                if !matches!(t, Ty::Bit(_) | Ty::Int(_) | Ty::Number) {
                    return err(pos, format!("'{sym}' compares numbers, not {t}"));
                }
                Ok(Ty::Bool)
            }
            BinOp::Shl | BinOp::Shr => {
                if !matches!(ta, Ty::Bit(_) | Ty::Int(_)) {
                    return err(a.pos, format!("'{sym}' shifts bit<N> or int<N>, not {ta}"));
                }
                if !matches!(tb, Ty::Bit(_) | Ty::Number) {
                    return err(b.pos, format!("a shift's amount is unsigned, not {tb}"));
                }
                Ok(ta)
            }
            BinOp::Div | BinOp::Mod => {
                let t = unify(&ta, &tb).ok_or_else(|| {
                    Diagnostic::new(pos, format!("the operands of '{sym}' differ: {ta} and {tb} (cast one)"))
                })?;
                if !matches!(t, Ty::Bit(_) | Ty::Number) {
                    return err(
                        pos,
                        format!("'{sym}' divides unsigned numbers (bit<N>, or numbers without a width), not {t}"),
                    );
                }
                if self.const_value(b) == Some(0) {
                    return err(b.pos, format!("'{sym}' by zero"));
                }
                Ok(t)
            }
            BinOp::Concat => match (&ta, &tb) {
                (Ty::Bit(x), Ty::Bit(y)) if x + y <= 128 => Ok(Ty::Bit(x + y)),
                _ => err(pos, format!("'++' joins two bit<N> (128 bits at most), not {ta} and {tb}")),
            },
            _ => {
                let t = unify(&ta, &tb).ok_or_else(|| {
                    Diagnostic::new(pos, format!("the operands of '{sym}' differ: {ta} and {tb} (cast one)"))
                })?;
                if !matches!(t, Ty::Bit(_) | Ty::Int(_) | Ty::Number) {
                    return err(pos, format!("'{sym}' takes numbers, not {t}"));
                }
                Ok(t)
            }
        }
    }

    fn member(&self, inner: &Expr, m: &Name) -> Result<Ty> {
        // error.X, and an enum's members.
        if let ExprKind::Name(n) = &inner.kind {
            if n == "error" {
                return if self.errors.contains(&m.text) {
                    Ok(Ty::Error)
                } else {
                    err(m.pos, format!("no error.{} (there are {})", m.text, self.errors.join(", ")))
                };
            }
            if self.lookup(n).is_none() {
                if let Some(TypeDef::SerEnum(t, members)) = self.types.get(n) {
                    return if members.iter().any(|(x, _)| *x == m.text) {
                        Ok(t.clone())
                    } else {
                        err(m.pos, format!("enum {n} has no '{}'", m.text))
                    };
                }
                if let Some(TypeDef::Enum(members)) = self.types.get(n) {
                    return if members.contains(&m.text) {
                        Ok(Ty::Enum(n.clone()))
                    } else {
                        err(m.pos, format!("enum {n} has no '{}'", m.text))
                    };
                }
            }
        }
        let ty = self.expr(inner)?;
        let fields = match &ty {
            Ty::Header(n) => match &self.types[n] {
                TypeDef::Header(f) => f,
                _ => unreachable!(),
            },
            Ty::Struct(n) => match &self.types[n] {
                TypeDef::Struct(f) => f,
                _ => unreachable!(),
            },
            Ty::Union(n) => match &self.types[n] {
                TypeDef::Union(f) => f,
                _ => unreachable!(),
            },
            Ty::Stack(elem, _) => {
                return match m.text.as_str() {
                    "next" | "last" | "lastIndex" if !self.in_parser => {
                        err(m.pos, format!("a stack's '{}' is a parser's (P4-16 8.18); index it here", m.text))
                    }
                    "next" | "last" => Ok((**elem).clone()),
                    "lastIndex" | "nextIndex" | "size" => Ok(Ty::Bit(32)),
                    other => err(
                        m.pos,
                        format!("{ty} has no member '{other}' (it has next, last, lastIndex, nextIndex, size)"),
                    ),
                }
            }
            Ty::Applied(_) if m.text == "hit" || m.text == "miss" => return Ok(Ty::Bool),
            Ty::Applied(t) if m.text == "action_run" => return Ok(Ty::ActionRun(t.clone())),
            _ => return err(m.pos, format!("{ty} has no member '{}'", m.text)),
        };
        match fields.iter().find(|(n, _)| *n == m.text) {
            Some((_, t)) => Ok(t.clone()),
            None => {
                let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
                err(m.pos, format!("{ty} has no field '{}' (it has {})", m.text, names.join(", ")))
            }
        }
    }

    fn call(&self, pos: Pos, callee: &Expr, type_args: &[Type], args: &[Expr]) -> Result<Ty> {
        let targs = type_args.iter().map(|t| self.resolve(t, &[])).collect::<Result<Vec<_>>>()?;
        match &callee.kind {
            ExprKind::Member(obj, m) => {
                let ty = self.expr(obj)?;
                match (&ty, m.text.as_str()) {
                    (Ty::Header(_) | Ty::Union(_), "isValid") => {
                        self.arity(args, 0, m)?;
                        Ok(Ty::Bool)
                    }
                    (Ty::Block(block), "apply") => {
                        let params = self.blocks[block].1;
                        self.args(args, params, m.pos, block, &HashMap::new())?;
                        Ok(Ty::Void)
                    }
                    (Ty::Stack(..), "push_front" | "pop_front") => {
                        self.arity(args, 1, m)?;
                        match self.const_value(&args[0]) {
                            Some(n) if n >= 1 && matches!(self.expr(&args[0])?, Ty::Number) => {
                                self.lvalue(obj)?;
                                Ok(Ty::Void)
                            }
                            _ => err(args[0].pos, format!("{}'s count is a positive number without a width", m.text)),
                        }
                    }
                    (Ty::Header(_), "setValid" | "setInvalid") => {
                        self.arity(args, 0, m)?;
                        Ok(Ty::Void)
                    }
                    (Ty::Table(t), "apply") => {
                        if self.in_action {
                            return err(m.pos, "a table is applied in a control's apply block, not in an action");
                        }
                        self.arity(args, 0, m)?;
                        Ok(Ty::Applied(t.clone()))
                    }
                    (Ty::Extern(name, ext_args), method) => {
                        let Some(TypeDef::Extern { type_params, methods }) = self.types.get(name) else {
                            unreachable!()
                        };
                        let candidates: Vec<&Method> =
                            methods.iter().filter(|x| x.ret.is_some() && x.name.text == method).collect();
                        let Some(found) = candidates.iter().find(|x| x.params.len() == args.len()) else {
                            return match candidates.first() {
                                Some(x) => err(
                                    m.pos,
                                    format!("{name}.{method} takes {} argument(s), not {}", x.params.len(), args.len()),
                                ),
                                None => err(m.pos, format!("{name} has no method '{method}'")),
                            };
                        };
                        let mut bind: HashMap<String, Ty> =
                            type_params.iter().map(|p| p.text.clone()).zip(ext_args.iter().cloned()).collect();
                        for (p, t) in found.type_params.iter().zip(targs.iter()) {
                            bind.insert(p.text.clone(), t.clone());
                        }
                        let vars: Vec<Name> = type_params.iter().chain(found.type_params.iter()).cloned().collect();
                        let bound =
                            self.args_with(args, &found.params, m.pos, &format!("{name}.{method}"), &mut bind, &vars)?;
                        if method == "extract" && matches!(bound.get("T"), Some(Ty::Header(_))) {
                            let Some(Ty::Header(h)) = bound.get("T") else { unreachable!() };
                            let Some(TypeDef::Header(fields)) = self.types.get(h) else { unreachable!() };
                            let varbit = fields.iter().any(|(_, t)| matches!(t, Ty::Varbit(_)));
                            if varbit && args.len() == 1 {
                                return err(
                                    args[0].pos,
                                    format!("header {h} has a varbit field: extract(hdr, size in bits) gives its size"),
                                );
                            }
                            if !varbit && args.len() == 2 {
                                return err(args[1].pos, format!("header {h} has no varbit field for a size to fill"));
                            }
                        }
                        if method == "extract" && !matches!(bound.get("T"), Some(Ty::Header(_))) {
                            return err(
                                args[0].pos,
                                format!(
                                    "extract fills a header, not {}",
                                    bound.get("T").map_or("this".to_string(), |t| t.to_string())
                                ),
                            );
                        }
                        if method == "emit"
                            && !matches!(
                                bound.get("T"),
                                Some(Ty::Header(_) | Ty::Struct(_) | Ty::Stack(..) | Ty::Union(_))
                            )
                        {
                            return err(args[0].pos, "emit writes a header (or a struct of headers)");
                        }
                        let ret = self.resolve(found.ret.as_ref().expect("a method"), &vars)?;
                        Ok(subst(&ret, &bound))
                    }
                    _ => err(m.pos, format!("{ty} has no method '{}'", m.text)),
                }
            }
            ExprKind::Name(n) => {
                if let Some(a) = self.find_action(n) {
                    if self.in_parser {
                        return err(pos, format!("'{n}': actions are called from controls, not parsers"));
                    }
                    self.args(args, &a.params, callee.pos, n, &HashMap::new())?;
                    return Ok(Ty::Void);
                }
                if n == "static_assert" && (args.len() == 1 || args.len() == 2) {
                    return self.static_assert(args);
                }
                if let Some(f) = self.own_functions.get(n) {
                    let mut bind = HashMap::new();
                    for (p, t) in f.type_params.iter().zip(targs.iter()) {
                        bind.insert(p.text.clone(), t.clone());
                    }
                    let bound = self.args_with(args, &f.params, callee.pos, n, &mut bind, &f.type_params)?;
                    let ret = self.resolve(&f.ret, &f.type_params)?;
                    return Ok(subst(&ret, &bound));
                }
                if let Some(f) = self.functions.get(n) {
                    let mut bind = HashMap::new();
                    for (p, t) in f.type_params.iter().zip(targs.iter()) {
                        bind.insert(p.text.clone(), t.clone());
                    }
                    let bound = self.args_with(args, &f.params, callee.pos, n, &mut bind, &f.type_params)?;
                    let ret = self.resolve(f.ret.as_ref().expect("a function"), &f.type_params)?;
                    return Ok(subst(&ret, &bound));
                }
                if self.blocks.contains_key(n) {
                    return err(pos, format!("'{n}' is a block: only main instantiates blocks"));
                }
                if self.function == Some(n.as_str()) {
                    return err(callee.pos, format!("'{n}' calls itself: P4's functions do not recurse"));
                }
                err(callee.pos, format!("no action or function '{n}'"))
            }
            _ => err(pos, "this cannot be called"),
        }
    }

    /// `static_assert(check[, message])`: `check` a compile-time bool that holds.
    fn static_assert(&self, args: &[Expr]) -> Result<Ty> {
        self.expect(&args[0], &Ty::Bool, "static_assert's condition")?;
        let message = match args.get(1).map(|m| &m.kind) {
            Some(ExprKind::Str(s)) => format!(": {s}"),
            Some(_) => return err(args[1].pos, "static_assert's message is a string"),
            None => String::new(),
        };
        match self.const_bool(&args[0]) {
            Some(true) => Ok(Ty::Bool),
            Some(false) => err(args[0].pos, format!("static_assert fails{message}")),
            None => err(
                args[0].pos,
                "static_assert takes a condition known at compile time (numbers, constants, comparisons)",
            ),
        }
    }

    /// A compile-time bool, if `e` is one: literals and comparisons of compile-time numbers,
    /// joined by `!`, `&&` and `||`.
    fn const_bool(&self, e: &Expr) -> Option<bool> {
        match &e.kind {
            ExprKind::Bool(b) => Some(*b),
            ExprKind::Unary(UnOp::Not, inner) => self.const_bool(inner).map(|b| !b),
            ExprKind::Binary(BinOp::And, a, b) => Some(self.const_bool(a)? && self.const_bool(b)?),
            ExprKind::Binary(BinOp::Or, a, b) => Some(self.const_bool(a)? || self.const_bool(b)?),
            ExprKind::Binary(op, a, b) => compare(*op, self.const_value(a)?, self.const_value(b)?),
            _ => None,
        }
    }

    fn arity(&self, args: &[Expr], n: usize, m: &Name) -> Result<()> {
        if args.len() == n {
            Ok(())
        } else {
            err(m.pos, format!("'{}' takes {n} argument(s), not {}", m.text, args.len()))
        }
    }

    fn args(&self, args: &[Expr], params: &[Param], pos: Pos, what: &str, bind: &HashMap<String, Ty>) -> Result<()> {
        let mut bind = bind.clone();
        let vars: Vec<Name> = bind.keys().map(|k| Name { text: k.clone(), pos }).collect();
        self.args_with(args, params, pos, what, &mut bind, &vars).map(drop)
    }

    /// Checks call arguments against parameters, binding type parameters (`vars`) as it goes;
    /// returns the bindings.
    fn args_with(
        &self,
        args: &[Expr],
        params: &[Param],
        pos: Pos,
        what: &str,
        bind: &mut HashMap<String, Ty>,
        vars: &[Name],
    ) -> Result<HashMap<String, Ty>> {
        if args.len() != params.len() {
            return err(pos, format!("'{what}' takes {} argument(s), not {}", params.len(), args.len()));
        }
        for (a, p) in args.iter().zip(params) {
            let want = subst(&self.resolve(&p.ty, vars)?, bind);
            let writes = matches!(p.direction, Some(Direction::Out) | Some(Direction::InOut));
            if let (ExprKind::List(items), Ty::Var(v), false) = (&a.kind, &want, writes) {
                let mut tys = Vec::new();
                for item in items {
                    match self.expr(item)? {
                        Ty::Number => {
                            return err(
                                item.pos,
                                format!("'{what}': give this element of {} a width (8w1, or a cast)", p.name.text),
                            )
                        }
                        t => tys.push(t),
                    }
                }
                bind.insert(v.clone(), Ty::List(tys));
                continue;
            }
            if !writes && !matches!(want, Ty::Var(_)) {
                self.expect(a, &want, &format!("'{what}''s '{}'", p.name.text))?;
                continue;
            }
            let got = if writes { self.lvalue(a)? } else { self.expr(a)? };
            if let Ty::Var(v) = &want {
                if got == Ty::Number {
                    return err(a.pos, format!("'{what}': give {} a width (8w1, or a cast)", p.name.text));
                }
                bind.insert(v.clone(), got);
                continue;
            }
            if writes && got != want {
                return err(a.pos, format!("'{what}' writes its '{}', {want}, here {got}", p.name.text));
            }
            if !writes {
                self.expect(a, &want, &format!("'{what}''s '{}'", p.name.text))?;
            }
        }
        Ok(bind.clone())
    }

    /// `main`: the package the program instantiates, each argument a block of the program with
    /// the parameters the package's parameter declares, its type parameters bound consistently.
    fn main(&self, program: &Program) -> Result<Checked> {
        let Some(main) = program.decls.iter().find_map(|d| match d {
            Decl::Instance(i) if i.name.text == "main" => Some(i),
            _ => None,
        }) else {
            let end = program.decls.last().map_or(Pos::default(), |_| Pos { file: 0, line: 1, col: 1 });
            return err(
                end,
                "the program has no 'main' (EdgeflowSwitch(MyParser(), MyIngress(), MyEgress(), MyDeparser()) main;)",
            );
        };
        let Type::Named(pkg, _) = &main.ty else { return err(main.name.pos, "main instantiates a package") };
        let mut blocks = Vec::new();
        self.package(program, pkg, &main.args, &mut blocks)?;
        Ok(Checked {
            package: pkg.text.clone(),
            blocks,
            layouts: HashMap::new(),
            numbers: HashMap::new(),
            ..Checked::default()
        })
    }

    /// One package's arguments: blocks of the program (appended to `blocks`, in order), the
    /// externs the package takes (PSA's replication engine), and packages in turn (PSA's
    /// pipelines, written in place or as a named instance). An inner package binds its own type
    /// parameters; they are not unified with the outer package's.
    fn package(&self, program: &Program, pkg: &Name, args: &[Expr], blocks: &mut Vec<String>) -> Result<()> {
        let Some(TypeDef::Block { kind: BlockKind::Package, type_params, params }) = self.types.get(&pkg.text) else {
            return err(pkg.pos, format!("'{}' is not a package of this architecture (EdgeflowSwitch is)", pkg.text));
        };
        if args.len() != params.len() {
            return err(pkg.pos, format!("{} takes {} blocks, not {}", pkg.text, params.len(), args.len()));
        }
        let mut bind: HashMap<String, Ty> = HashMap::new();
        for (arg, slot) in args.iter().zip(params.iter()) {
            let slot_ty = self.resolve(&slot.ty, type_params)?;
            if let Ty::Extern(ext, _) = &slot_ty {
                let names_it = matches!(&arg.kind, ExprKind::Call { callee, args, .. }
                    if args.is_empty() && matches!(&callee.kind, ExprKind::Name(n) if n == ext));
                if !names_it {
                    return err(
                        arg.pos,
                        format!("{}'s '{}' is {ext}(): the architecture's own", pkg.text, slot.name.text),
                    );
                }
                continue;
            }
            if let Ty::BlockType(inner, _) = &slot_ty {
                if matches!(self.types.get(inner), Some(TypeDef::Block { kind: BlockKind::Package, .. })) {
                    let (inner_pkg, inner_args) = match &arg.kind {
                        ExprKind::Call { callee, args, .. } => match &callee.kind {
                            ExprKind::Name(n) => (Name { text: n.clone(), pos: callee.pos }, args.as_slice()),
                            _ => return err(arg.pos, format!("{}'s '{}' is a {inner}", pkg.text, slot.name.text)),
                        },
                        ExprKind::Name(n) => match program.decls.iter().find_map(|d| match d {
                            Decl::Instance(i) if i.name.text == *n => Some(i),
                            _ => None,
                        }) {
                            Some(Instance { ty: Type::Named(t, _), args, .. }) => (t.clone(), args.as_slice()),
                            _ => return err(arg.pos, format!("no package instance '{n}'")),
                        },
                        _ => return err(arg.pos, format!("{}'s '{}' is a {inner}", pkg.text, slot.name.text)),
                    };
                    if inner_pkg.text != *inner {
                        return err(
                            arg.pos,
                            format!("{}'s '{}' is a {inner}, not {}", pkg.text, slot.name.text, inner_pkg.text),
                        );
                    }
                    self.package(program, &inner_pkg, inner_args, blocks)?;
                    continue;
                }
            }
            let name = match &arg.kind {
                ExprKind::Call { callee, args, .. } if args.is_empty() => match &callee.kind {
                    ExprKind::Name(n) => n.clone(),
                    _ => return err(arg.pos, "each of main's arguments is a block: MyBlock()"),
                },
                _ => return err(arg.pos, "each of main's arguments is a block: MyBlock()"),
            };
            let Some((kind, bparams)) = self.blocks.get(&name) else {
                return err(arg.pos, format!("no parser or control '{name}'"));
            };
            let Ty::BlockType(slot_type, slot_args) = self.resolve(&slot.ty, type_params)? else {
                return err(arg.pos, "the package's parameter is not a block type");
            };
            let Some(TypeDef::Block { kind: want_kind, type_params: tp, params: want }) = self.types.get(&slot_type)
            else {
                unreachable!()
            };
            if kind != want_kind {
                let word = |k: &BlockKind| match k {
                    BlockKind::Parser => "parser",
                    BlockKind::Control => "control",
                    BlockKind::Package => "package",
                };
                return err(
                    arg.pos,
                    format!(
                        "{}'s '{}' is a {}, and '{name}' is a {}",
                        pkg.text,
                        slot.name.text,
                        word(want_kind),
                        word(kind)
                    ),
                );
            }
            if bparams.len() != want.len() {
                return err(
                    arg.pos,
                    format!("'{name}' has {} parameters; {slot_type} has {}", bparams.len(), want.len()),
                );
            }
            // The slot's type parameters, in terms of the package's.
            let inner: HashMap<String, Ty> = tp.iter().map(|p| p.text.clone()).zip(slot_args).collect();
            for (i, (have, want)) in bparams.iter().zip(want.iter()).enumerate() {
                let have_ty = self.resolve(&have.ty, &[])?;
                let want_ty = subst(&self.resolve(&want.ty, tp)?, &inner);
                let fits = have.direction == want.direction
                    && match &want_ty {
                        Ty::Var(v) => match bind.get(v) {
                            Some(t) => *t == have_ty,
                            None => {
                                bind.insert(v.clone(), have_ty.clone());
                                true
                            }
                        },
                        t => *t == have_ty,
                    };
                if !fits {
                    let dir = |d: Option<Direction>| match d {
                        Some(Direction::In) => "in ",
                        Some(Direction::Out) => "out ",
                        Some(Direction::InOut) => "inout ",
                        None => "",
                    };
                    let expected = match &want_ty {
                        Ty::Var(v) => bind.get(v).map_or(v.clone(), |t| format!("{v} = {t}")),
                        t => t.to_string(),
                    };
                    return err(
                        have.name.pos,
                        format!(
                            "'{name}' parameter {} is '{}{have_ty}'; {} expects '{}{expected}' there",
                            i + 1,
                            dir(have.direction),
                            slot_type,
                            dir(want.direction)
                        ),
                    );
                }
            }
            blocks.push(name);
        }
        Ok(())
    }
}

/// `t` with type parameters replaced by what they are bound to.
fn subst(t: &Ty, bind: &HashMap<String, Ty>) -> Ty {
    match t {
        Ty::Var(v) => bind.get(v).cloned().unwrap_or_else(|| t.clone()),
        Ty::Extern(n, a) => Ty::Extern(n.clone(), a.iter().map(|x| subst(x, bind)).collect()),
        Ty::BlockType(n, a) => Ty::BlockType(n.clone(), a.iter().map(|x| subst(x, bind)).collect()),
        other => other.clone(),
    }
}

/// `x op y` where `op` compares (`==` ... `>=`); `None` for any other operator.
pub(crate) fn compare<T: PartialOrd>(op: BinOp, x: T, y: T) -> Option<bool> {
    match op {
        BinOp::Eq => Some(x == y),
        BinOp::Ne => Some(x != y),
        BinOp::Lt => Some(x < y),
        BinOp::Gt => Some(x > y),
        BinOp::Le => Some(x <= y),
        BinOp::Ge => Some(x >= y),
        _ => None,
    }
}

/// The type two operands share: equal, or a number meeting a width.
fn unify(a: &Ty, b: &Ty) -> Option<Ty> {
    match (a, b) {
        _ if a == b => Some(a.clone()),
        (Ty::Number, Ty::Bit(_) | Ty::Int(_)) => Some(b.clone()),
        (Ty::Bit(_) | Ty::Int(_), Ty::Number) => Some(a.clone()),
        _ => None,
    }
}

/// The most members a value set may declare (the kernel back end scans them per frame).
pub const VALUE_SET_MAX: u128 = 256;

fn width(t: &Ty) -> Option<u32> {
    match t {
        Ty::Bit(w) | Ty::Int(w) => Some(*w),
        _ => None,
    }
}

/// An operator as P4 writes it (also for the kernel back end's refusals).
pub(crate) fn op_symbol(op: BinOp) -> &'static str {
    match op {
        BinOp::Or => "||",
        BinOp::And => "&&",
        BinOp::Eq => "==",
        BinOp::Ne => "!=",
        BinOp::Lt => "<",
        BinOp::Gt => ">",
        BinOp::Le => "<=",
        BinOp::Ge => ">=",
        BinOp::BitOr => "|",
        BinOp::BitXor => "^",
        BinOp::BitAnd => "&",
        BinOp::Shl => "<<",
        BinOp::Shr => ">>",
        BinOp::Concat => "++",
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::AddSat => "|+|",
        BinOp::SubSat => "|-|",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Mod => "%",
    }
}

/// Whether every path through `stmts` ends in `return` (or `exit`): a non-void function's rule.
fn always_returns(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| match s {
        Stmt::Return(_) | Stmt::ReturnValue(..) | Stmt::Exit(_) => true,
        Stmt::Block(b) => always_returns(b),
        Stmt::If { then, otherwise: Some(o), .. } => always_returns(then) && always_returns(o),
        _ => false,
    })
}

/// Where each field was declared, for an error about one.
fn fields_of(fields: &[Field]) -> impl Iterator<Item = Pos> + '_ {
    fields.iter().map(|f| f.name.pos)
}
