//! The IR's data: every name resolved to an index, every constant folded, every type with its
//! width and signedness. Plain data with a readable dump (`Display`), which tests compare.
//! (About 600 lines, one concern: the data; `lower.rs` makes it, the back ends read it.)

use std::fmt;

use crate::diag::Pos;
/// A parameter's direction: the front end's enum, shared as plain data (the back ends name it
/// from here, never from the syntax tree).
pub use crate::frontend::ast::Direction;

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
    /// A header union: aggregate `i`, whose fields are headers of which at most one is valid.
    Union(usize),
    /// A header stack: `n` elements of a header type, and the index of the next one to fill.
    Stack(Box<Ty>, u32),
    /// `varbit<N>`: up to N bits, its length set when extracted.
    Varbit(u32),
    /// A tuple, or the value of a list `{a, b}` given to a generic extern.
    Tuple(Vec<Ty>),
    /// What the mid end passes on by name (externs, block types): the back ends own their meaning.
    Opaque(String),
}

/// A header, struct or header union type: its fields in order, each resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Aggregate {
    pub name: String,
    pub kind: AggregateKind,
    pub fields: Vec<(String, Ty)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggregateKind {
    Header,
    Struct,
    Union,
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

/// `Type<type_args>(args) name;` at the top level or in a block, its arguments folded; or an
/// extern a table's property constructs (`implementation = action_selector(...)`), under the
/// table's name, as p4c moves it out of the table.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    pub name: String,
    pub ty: String,
    /// Its type arguments (a register's cell type): `register<bit<32>>` has `[u32]`.
    pub type_args: Vec<Ty>,
    pub args: Vec<Arg>,
    /// Its annotations whose one argument is a number (`@max_group_size(8)`), by name.
    pub annotations: Vec<(String, u128)>,
    /// `file:line` where it is declared.
    pub at: String,
}

/// A variable: a block's parameter or local, an action's or function's parameter or local, or a
/// temporary the mid end made. Numbered program-wide: P4 does not recurse, so each has one place.
#[derive(Clone, Debug, PartialEq)]
pub struct Variable {
    /// Its P4 name, qualified by where it lives (`MyIngress.set_port.port`).
    pub name: String,
    pub ty: Ty,
}

/// A step from a variable into its value.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Field `i` of a header, struct, union or tuple.
    Field(usize),
    /// An element of a stack, at an index of type `u32` (past the end: the back end's rule).
    Elem(Box<Expr>),
    /// A parser's `stack.next`: the element at the stack's next index.
    Next,
    /// A parser's `stack.last`: the element before the next index.
    Last,
    /// A stack's next index (`nextIndex`), a `u32`.
    NextIndex,
}

/// Where a value is kept: a variable and the steps into it.
#[derive(Clone, Debug, PartialEq)]
pub struct Place {
    pub var: usize,
    pub steps: Vec<Step>,
    /// The type of what the place holds.
    pub ty: Ty,
}

/// An operation on two values of one type (`ty` of the `Binary`); signed or not by that type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// `|+|` and `|-|`: saturating, at the type's bounds (signed for `int<W>`).
    AddSat,
    SubSat,
    And,
    Or,
    Xor,
    /// Left shift; the amount is any unsigned value, past the width gives 0.
    Shl,
    /// Right shift: arithmetic on `int<W>`, logical on `bit<W>`.
    Shr,
    /// Division and remainder, unsigned (P4 allows them on constants and `bit<W>`).
    Div,
    Mod,
    Eq,
    Ne,
    /// Comparisons, signed on `int<W>`.
    Lt,
    Le,
    Gt,
    Ge,
}

/// A conversion between scalar types, spelled out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cast {
    /// To a narrower type: the low bits.
    Truncate,
    /// To a wider type from `bit<W>`.
    ZeroExtend,
    /// To a wider type from `int<W>`.
    SignExtend,
    /// Between `bit<W>` and `int<W>` of one width: the same bits.
    Reinterpret,
    /// `bool` to `bit<1>` and back.
    FromBool,
    ToBool,
}

/// An expression, typed: every operation with its width and signedness, constants folded.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A constant of a bits, integer, enum or error type (enum members and errors numbered).
    Const {
        value: u128,
        ty: Ty,
    },
    Bool(bool),
    /// A string, as extern arguments take it (`log_msg`).
    Str(String),
    Read(Place),
    /// `h.isValid()` of a header or union.
    IsValid(Place),
    Not(Box<Expr>),
    /// `~` and unary `-`, on `ty`.
    Complement(Box<Expr>, Ty),
    Negate(Box<Expr>, Ty),
    /// Operands of type `ty`; comparisons give `bool`. Shifts' amounts keep their own type.
    Binary {
        op: BinaryOp,
        ty: Ty,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    /// `&&` and `||`: the right side only when it decides.
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    /// `==` of headers, structs, unions or stacks: every field (a header's validity too).
    Equal {
        ty: Ty,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    /// `a ++ b`: `a` in the high bits; `ty` the result's.
    Concat {
        ty: Ty,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    /// Bits `hi` down to `lo` of a `bit<W>` or `int<W>`; a `bit<hi-lo+1>`.
    Slice {
        value: Box<Expr>,
        hi: u32,
        lo: u32,
    },
    Cast {
        cast: Cast,
        to: Ty,
        value: Box<Expr>,
    },
    Cond {
        ty: Ty,
        cond: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
    },
    /// `{a, b}` as a header's (which it makes valid), struct's or tuple's value.
    Aggregate {
        ty: Ty,
        items: Vec<Expr>,
    },
}

/// An argument of an extern's method or function, by the parameter's direction.
#[derive(Clone, Debug, PartialEq)]
pub enum CallArg {
    In(Expr),
    Out(Place),
    InOut(Place),
    /// `_` for an `out` parameter: the value is not kept.
    Discard,
}

/// What an extern call calls.
#[derive(Clone, Debug, PartialEq)]
pub enum Callee {
    /// A method of an extern instance (`Program::instances`' name) or of a block parameter of an
    /// extern type (`packet_in`, `packet_out`, PSA's metadata externs): a place of an opaque type.
    Method { object: ExternRef, method: String },
    /// An extern function (`mark_to_drop`, `hash`, `verify_checksum`).
    Function(String),
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExternRef {
    /// An instance, by its name in `Program::instances`.
    Instance(String),
    /// A parameter or local holding an extern (`packet_in pk`).
    Var(usize),
}

/// A statement. Calls of actions, functions and sub-blocks are preceded by explicit copies into
/// the callee's parameter variables and followed by copies out of them.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// A scalar or an aggregate: an aggregate copies every field (and validity).
    Assign {
        place: Place,
        value: Expr,
    },
    /// A variable's first value where P4 gives none: zero bits, false, headers invalid.
    Init(Place),
    SetValid {
        header: Place,
        valid: bool,
    },
    /// `push_front(n)` and `pop_front(n)` on a stack.
    PushFront {
        stack: Place,
        count: u32,
    },
    PopFront {
        stack: Place,
        count: u32,
    },
    If {
        cond: Expr,
        then: Vec<Stmt>,
        otherwise: Vec<Stmt>,
    },
    /// Applies table `table`; `hit` (a bool variable) and `action_run` (a `u32` variable that
    /// gets the action's number in `Program::actions`) when the program reads them.
    Apply {
        table: usize,
        hit: Option<usize>,
        action_run: Option<usize>,
    },
    /// Runs action `action`, its parameters already copied in; `after` copies them out, and
    /// runs when the action returns and when it exits (the exit then goes on), as P4 copies out.
    CallAction {
        action: usize,
        after: Vec<Stmt>,
    },
    /// Runs function `function`, its parameters copied in; `after` copies them out; its result
    /// (if any) is in its `result` variable.
    CallFunction {
        function: usize,
        after: Vec<Stmt>,
    },
    /// Applies the parser or control `block` (`Program::blocks_code`), its parameters copied in;
    /// `after` as for an action.
    ApplyBlock {
        block: usize,
        after: Vec<Stmt>,
    },
    /// An extern's method or function; `result` receives what it returns. `at` is where the
    /// call is written, for a back end that refuses it.
    Extern {
        callee: Callee,
        type_args: Vec<Ty>,
        args: Vec<CallArg>,
        result: Option<Place>,
        at: Pos,
    },
    /// `for`: `init` once, then while `cond` holds, `body` then `update` (`continue` goes to
    /// `update`).
    Loop {
        cond: Option<Expr>,
        body: Vec<Stmt>,
        update: Vec<Stmt>,
    },
    Break,
    Continue,
    /// Leaves the action or function (a control's apply: the control).
    Return,
    /// Leaves every control up to the architecture.
    Exit,
    /// Where the source statement the next ones were lowered from is written: runs nothing; a
    /// back end that refuses one of them names this line.
    At(Pos),
}

/// A table key: what it reads, how it matches, and the control plane's name for it.
#[derive(Clone, Debug, PartialEq)]
pub struct TableKey {
    pub value: Expr,
    pub match_kind: String,
    pub name: String,
}

/// An action as a table lists it, its directional parameters bound to these arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct TableAction {
    pub action: usize,
    pub bound: Vec<CallArg>,
}

/// One keyset of a `select` case or a table entry, as constants of the key's type.
#[derive(Clone, Debug, PartialEq)]
pub enum Keyset {
    /// `default` or `_`.
    Any,
    Value(u128),
    Mask(u128, u128),
    Range(u128, u128),
    /// A parser's `value_set`, by its name in `Program::value_sets`: the case's whole keyset
    /// (the only one), matched against all the select's keys.
    ValueSet(String),
}

/// A parser's `value_set<T>(size)`: members the control plane sets at run time, each a value
/// and a mask per field; a select case naming it matches when any member does, and an empty set
/// matches nothing.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueSet {
    /// Qualified by its parser instance (`MyParser.pvs`).
    pub name: String,
    /// `T`'s fields in order (a nested struct's flattened): one per key of the select.
    pub fields: Vec<ValueSetField>,
    /// The most members the control plane may set.
    pub size: u32,
    pub pos: Pos,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ValueSetField {
    /// The field's path in `T` (`""` for a bare `bit<W>`).
    pub name: String,
    pub width: u32,
    /// `@match(kind)` on the field, `exact` without one: what P4Info shows.
    pub match_kind: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TableEntry {
    pub keys: Vec<Keyset>,
    pub action: usize,
    /// The action's data, constants.
    pub args: Vec<Expr>,
    /// The smaller wins.
    pub priority: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Qualified by its control instance (`MyIngress.fwd`).
    pub name: String,
    pub keys: Vec<TableKey>,
    pub actions: Vec<TableAction>,
    /// The default action and its data; whether the control plane may change it.
    pub default_action: (usize, Vec<Expr>),
    pub default_const: bool,
    pub entries: Vec<TableEntry>,
    pub entries_const: bool,
    pub size: Option<u128>,
    /// `counters = c`, `meters = m`, `psa_direct_counter = c`, `psa_direct_meter = m`,
    /// `implementation = p`: the property and the instance's name.
    pub properties: Vec<(String, String)>,
    /// Where it is declared (a back end's refusal names it).
    pub pos: Pos,
}

/// An action: its parameters with their directions (those with one first, then the control
/// plane's data, which have none).
#[derive(Clone, Debug, PartialEq)]
pub struct Action {
    pub name: String,
    pub params: Vec<(usize, Option<Direction>)>,
    /// How many of `params` have a direction (the rest are data).
    pub bound: usize,
    pub body: Vec<Stmt>,
    pub pos: Pos,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    pub name: String,
    pub params: Vec<usize>,
    pub result: Option<usize>,
    pub body: Vec<Stmt>,
    pub pos: Pos,
}

/// A `select` case's target, or a state's plain transition.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    Accept,
    Reject,
    State(usize),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Transition {
    Goto(Next),
    Select { keys: Vec<Expr>, cases: Vec<(Vec<Keyset>, Next)> },
}

#[derive(Clone, Debug, PartialEq)]
pub struct State {
    pub name: String,
    pub body: Vec<Stmt>,
    pub transition: Transition,
    pub pos: Pos,
}

/// A parser or control instance: the package's blocks, then the sub-blocks they instantiate.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// Its instance path (`MyIngress`, `MyIngress.acl`).
    pub name: String,
    /// The parser or control it is an instance of (`Acl`): what the software target's
    /// control-plane names (P4Info's) are qualified by.
    pub declared: String,
    /// Its parameters' variables, with the direction each has (`None`: none).
    pub params: Vec<(usize, Option<Direction>)>,
    /// What its locals start as, run before the states or `apply`.
    pub init: Vec<Stmt>,
    pub body: BlockBody,
    /// Where its parser or control is declared.
    pub pos: Pos,
}

#[derive(Clone, Debug, PartialEq)]
pub enum BlockBody {
    /// States in declaration order; `start` is the one named so.
    Parser(Vec<State>),
    Control(Vec<Stmt>),
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
    pub variables: Vec<Variable>,
    pub actions: Vec<Action>,
    pub functions: Vec<Function>,
    pub tables: Vec<Table>,
    pub value_sets: Vec<ValueSet>,
    /// The package's blocks in its order (`blocks`), then every sub-block instance.
    pub blocks_code: Vec<Block>,
}

impl Program {
    /// The control plane's name for a table or instance the IR qualifies by its block's instance
    /// path: `Declared.name` by the declaration of the block it is in (two instances of one
    /// control share it, as P4Info names them), `.name` at the top level.
    pub fn control_name(&self, qualified: &str) -> String {
        match qualified.rsplit_once('.') {
            Some((block, name)) => match self.blocks_code.iter().find(|b| b.name == block) {
                Some(b) => format!("{}.{name}", b.declared),
                None => format!("{block}.{name}"),
            },
            None => format!(".{qualified}"),
        }
    }
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
            Ty::Union(i) => write!(f, "union#{i}"),
            Ty::Stack(t, n) => write!(f, "{t}[{n}]"),
            Ty::Varbit(w) => write!(f, "varbit{w}"),
            Ty::Tuple(items) => {
                let items: Vec<String> = items.iter().map(|t| t.to_string()).collect();
                write!(f, "({})", items.join(", "))
            }
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
            let kind = match a.kind {
                AggregateKind::Header => "header",
                AggregateKind::Struct => "struct",
                AggregateKind::Union => "union",
            };
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
            let annotations: String = i.annotations.iter().map(|(n, v)| format!("@{n}({v}) ")).collect();
            let type_args: Vec<String> = i.type_args.iter().map(|t| t.to_string()).collect();
            let type_args = if type_args.is_empty() { String::new() } else { format!("<{}>", type_args.join(", ")) };
            writeln!(f, "instance {annotations}{} = {}{type_args}({}) @{}", i.name, i.ty, args.join(", "), i.at)?;
        }
        for v in &self.value_sets {
            let fields: Vec<String> =
                v.fields.iter().map(|x| format!("{}: u{} {}", x.name, x.width, x.match_kind)).collect();
            writeln!(f, "value_set {} ({}) size {}", v.name, fields.join(", "), v.size)?;
        }
        super::dump::code(self, f)
    }
}
