//! A P4-16 program as parsed: the declarations of the subset (docs/p4.md), each with where it
//! was written. Nothing here is checked yet; the checker gives names their meaning.

use crate::diag::Pos;

#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    pub decls: Vec<Decl>,
    /// Headers annotated `@controller_header("packet_in")` (or `"packet_out"`): (the
    /// annotation's argument, the header's name). P4Runtime carries their fields as a packet-in's
    /// or packet-out's metadata (P4Info's `controller_packet_metadata`).
    pub controller_headers: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Name {
    pub text: String,
    pub pos: Pos,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Type {
    Bit(u32),
    Int(u32),
    Bool,
    Void,
    /// `error`, the language's error type.
    Error,
    /// A named type, with type arguments: `headers`, `register<bit<32>>`.
    Named(Name, Vec<Type>),
    /// `_`: an argument the checker infers.
    DontCare,
    /// `string`: only a compile-time constant, as in `log_msg("...")`.
    Str,
    /// `int` without a width: an integer of any size, for compile-time constants.
    Integer,
    /// `tuple<T, U>`: values of these types in order, written as a list `{t, u}`.
    Tuple(Vec<Type>),
    /// `varbit<N>`: a header field of up to N bits, its length set when it is extracted.
    Varbit(u32),
    /// `T[n]`: a header stack, `n` a compile-time number.
    Stack(Box<Type>, Box<Expr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    In,
    Out,
    InOut,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub direction: Option<Direction>,
    pub ty: Type,
    pub name: Name,
    pub annotations: Vec<Annotation>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub ty: Type,
    pub name: Name,
    /// Kept for a value set's struct, whose fields may say how the control plane matches them
    /// (`@match(ternary)`).
    pub annotations: Vec<Annotation>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Decl {
    Const {
        ty: Type,
        name: Name,
        value: Expr,
    },
    Typedef {
        ty: Type,
        name: Name,
    },
    Header {
        name: Name,
        fields: Vec<Field>,
    },
    Struct {
        name: Name,
        fields: Vec<Field>,
    },
    /// `header_union`: headers of which at most one is valid at a time.
    HeaderUnion {
        name: Name,
        fields: Vec<Field>,
    },
    Enum {
        name: Name,
        members: Vec<Name>,
    },
    /// `enum bit<N> name { A = 1, ... }`: a serializable enum, its members values of `ty`.
    SerEnum {
        ty: Type,
        name: Name,
        members: Vec<(Name, Expr)>,
    },
    Error {
        members: Vec<Name>,
    },
    MatchKind {
        members: Vec<Name>,
    },
    ExternFunction(Method),
    ExternObject {
        name: Name,
        type_params: Vec<Name>,
        methods: Vec<Method>,
    },
    /// A parser, control or package type: the architecture's declarations of the blocks a
    /// program provides.
    BlockType {
        kind: BlockKind,
        name: Name,
        type_params: Vec<Name>,
        params: Vec<Param>,
    },
    Parser {
        name: Name,
        params: Vec<Param>,
        locals: Vec<Local>,
        states: Vec<State>,
    },
    Control {
        name: Name,
        params: Vec<Param>,
        locals: Vec<Local>,
        apply: Vec<Stmt>,
    },
    Action(Action),
    Instance(Instance),
    /// `T name<U>(params) { body }`: a function, called with copy-in and copy-out as an
    /// action is, returning a value of `ret` (or nothing, for `void`).
    Function(Function),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    pub ret: Type,
    pub name: Name,
    pub type_params: Vec<Name>,
    pub params: Vec<Param>,
    pub body: Vec<Stmt>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    Parser,
    Control,
    Package,
}

/// An extern function or method; a constructor has no return type and the extern's name.
#[derive(Clone, Debug, PartialEq)]
pub struct Method {
    pub ret: Option<Type>,
    pub name: Name,
    pub type_params: Vec<Name>,
    pub params: Vec<Param>,
}

/// `Type(args) name;`: an extern object, or the package the program is (`... main;`).
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    pub ty: Type,
    pub args: Vec<Expr>,
    pub name: Name,
    pub annotations: Vec<Annotation>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Action {
    pub name: Name,
    pub params: Vec<Param>,
    pub body: Vec<Stmt>,
    pub annotations: Vec<Annotation>,
}

/// What a parser or control declares before its states or `apply`.
#[derive(Clone, Debug, PartialEq)]
pub enum Local {
    Const { ty: Type, name: Name, value: Expr },
    Var { ty: Type, name: Name, init: Option<Expr> },
    Action(Action),
    Table(Table),
    Instance(Instance),
    ValueSet(ValueSet),
}

/// `value_set<T>(size) name;` (P4-16 12.11), only in a parser: up to `size` members the control plane sets, each
/// a value and a mask per field of `T` (a `bit<W>`, or a struct of them); a `select` case
/// whose keyset is the set's name matches when any member does.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueSet {
    pub ty: Type,
    pub size: Expr,
    pub name: Name,
    pub annotations: Vec<Annotation>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub name: Name,
    pub keys: Vec<Key>,
    pub actions: Vec<ActionRef>,
    /// Whether the table has an `actions` property (which may list none: the table then
    /// runs NoAction, its default).
    pub has_actions: bool,
    pub default_action: Option<(ActionRef, bool)>,
    pub size: Option<Expr>,
    pub entries: Vec<Entry>,
    /// Whether the entries are `const` (the control plane cannot change them).
    pub entries_const: bool,
    /// Other properties (`counters = c`, `meters = m`), by name.
    pub properties: Vec<(Name, Expr)>,
    /// The annotations written before a property of `properties`, by its name where it has
    /// any (`@name("ap") @max_group_size(8) implementation = action_selector(...)`).
    pub property_annotations: Vec<(String, Vec<Annotation>)>,
    pub annotations: Vec<Annotation>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    pub expr: Expr,
    pub match_kind: Name,
    pub annotations: Vec<Annotation>,
}

/// `@name`, `@name(tokens)` or `@name[tokens]`: kept where a control plane reads them (tables,
/// keys, actions, their parameters, extern instances), for `@name("...")` and `@id(n)`; the
/// front end gives none of them meaning.
#[derive(Clone, Debug, PartialEq)]
pub struct Annotation {
    pub name: Name,
    pub args: Vec<crate::frontend::lexer::Tok>,
}

/// The string of an `@name("...")`, or the number of an `@id(n)`, among `annotations`.
pub fn annotation_str<'a>(annotations: &'a [Annotation], name: &str) -> Option<&'a str> {
    annotations.iter().find(|a| a.name.text == name).and_then(|a| match a.args.as_slice() {
        [crate::frontend::lexer::Tok::Str(s)] => Some(s.as_str()),
        _ => None,
    })
}

pub fn annotation_int(annotations: &[Annotation], name: &str) -> Option<u128> {
    annotations.iter().find(|a| a.name.text == name).and_then(|a| match a.args.as_slice() {
        [crate::frontend::lexer::Tok::Int { value, .. }] => Some(*value),
        _ => None,
    })
}

/// An action named in a table, with the arguments given there (a default action's, an
/// entry's).
#[derive(Clone, Debug, PartialEq)]
pub struct ActionRef {
    pub name: Name,
    pub args: Vec<Expr>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub keys: Vec<Keyset>,
    pub action: ActionRef,
    pub pos: Pos,
    /// `@priority(n)` after the action: the smaller wins, as BMv2 and p4c order entries; an
    /// entry without one is ranked by its place in the list (the first is 1).
    pub priority: Option<u128>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Keyset {
    Default,
    DontCare,
    Value(Expr),
    Mask(Expr, Expr),
    Range(Expr, Expr),
}

#[derive(Clone, Debug, PartialEq)]
pub struct State {
    pub name: Name,
    pub body: Vec<Stmt>,
    pub transition: Transition,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Transition {
    /// `transition next;` (`accept` and `reject` are states too).
    Goto(Name),
    Select {
        exprs: Vec<Expr>,
        cases: Vec<SelectCase>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct SelectCase {
    pub keys: Vec<Keyset>,
    pub next: Name,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    Assign {
        target: Expr,
        value: Expr,
    },
    /// A call for its effect: `packet.extract(hdr.eth);`, `t.apply();`, `mark_to_drop(sm);`.
    Call(Expr),
    If {
        cond: Expr,
        then: Vec<Stmt>,
        otherwise: Option<Vec<Stmt>>,
    },
    Block(Vec<Stmt>),
    /// `switch (t.apply().action_run) { a: {...} b: c: {...} default: {...} }`; a label without a
    /// body falls through to the next.
    Switch {
        expr: Expr,
        cases: Vec<(Vec<Name>, Option<Vec<Stmt>>)>,
        pos: Pos,
    },
    Var {
        ty: Type,
        name: Name,
        init: Option<Expr>,
    },
    Const {
        ty: Type,
        name: Name,
        value: Expr,
    },
    Return(Pos),
    /// `for (init; cond; update) body`: `init` and `update` are declarations or assignments,
    /// comma-separated; no `cond` runs until a `break`.
    For {
        init: Vec<Stmt>,
        cond: Option<Expr>,
        update: Vec<Stmt>,
        body: Vec<Stmt>,
        pos: Pos,
    },
    Break(Pos),
    Continue(Pos),
    /// `return value;`: a function's result.
    ReturnValue(Expr, Pos),
    Exit(Pos),
    Empty,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Not,
    Complement,
    Neg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
    BitOr,
    BitXor,
    BitAnd,
    Shl,
    Shr,
    Concat,
    Add,
    Sub,
    AddSat,
    SubSat,
    Mul,
    /// `/` and `%`: on compile-time numbers only (the checker's rule), as P4-16 defines them.
    Div,
    Mod,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub pos: Pos,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Int {
        width: Option<(u32, bool)>,
        value: u128,
    },
    Bool(bool),
    Str(String),
    Name(String),
    /// `.name`: a name at the top level, past any local one of the same name.
    TopName(String),
    Member(Box<Expr>, Name),
    Index(Box<Expr>, Box<Expr>),
    Slice(Box<Expr>, Box<Expr>, Box<Expr>),
    Call {
        callee: Box<Expr>,
        type_args: Vec<Type>,
        args: Vec<Expr>,
    },
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    Cast(Type, Box<Expr>),
    /// `{a, b}`: a list (a struct's or a tuple's value).
    List(Vec<Expr>),
    /// `_` as an argument.
    DontCare,
}
