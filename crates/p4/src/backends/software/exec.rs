//! The software target's compiled form (issue 52 item 1, issue 53 item 2): the mid end's IR
//! (`midend::ir`) turned once, when the program loads, into closures over a flat array of
//! slots — one `u128` per scalar, a header's validity one more — so that a frame runs without
//! allocating, without a string and without hashing a name. Every variable of the IR has its
//! fixed place (P4 does not recurse); tables, counters, registers and accounts are the
//! `Switch`'s own, found by the number `Keyed` gave them when the program was compiled; an
//! entry's action by its place in its table's list. The architectures' drivers (what runs
//! between the blocks) are in `exec_arch.rs`, the extern calls in `exec/externs.rs`.
//!
//! A program that uses something not compiled here yet is refused by name at load (`compile`
//! returns why, and `Switch::new` fails with it); `tests/exec_compiled.rs` drives the corpus
//! and what it lacks through this.
//!
//! About 1 310 lines, one concern: the meaning of each IR expression and statement as a closure.

use std::sync::Arc;

mod externs;
mod indirect;
mod psa_externs;

use super::{mask, Switch, LOOP_ITERATIONS_MAX};
use crate::midend::ir::{self, BinaryOp, CallArg, Cast, Expr, Keyset, Next, Place, Step, Stmt, Ty};

/// How a run of statements ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flow {
    Next,
    Return,
    Break,
    Continue,
    Exit,
    /// The parser rejected the frame with this error (its number in `ir::Program::errors`).
    Reject(u32),
    Unsupported(&'static str),
}

/// A frame's run: the slots, the frame's bytes and the switch's state.
pub(super) struct M<'a> {
    pub prog: &'a Compiled,
    pub slots: Vec<u128>,
    pub sw: &'a mut Switch,
    /// The bytes the parser reads (the frame, or the payload past the headers).
    pub data: &'a [u8],
    /// The parser's position, in bits.
    pub cursor: usize,
    /// The deparser's output.
    pub out: Vec<u8>,
    /// The frame's length, for counters.
    pub length: u64,
    pub now: u64,
    /// A table's key values, reused.
    pub keys: Vec<u128>,
    /// The bytes a checksum or hash covers, reused.
    pub bytes: Vec<u8>,
    /// A `verify_checksum` found a checksum that does not hold (v1model's checksum_error).
    pub checksum_error: bool,
    /// A read of a stack's `last` or `next` found no such element: in a parser, the parser
    /// rejects with error.StackOutOfBounds (P4-16 8.18) after the statement or select.
    pub past_stack: bool,
    /// The entry the table being applied matched (its state's number, the entry's index), for
    /// its action's PSA `DirectCounter.count()` and `DirectMeter.execute()`.
    pub matched: Option<(usize, usize)>,
}

pub(super) type E = Box<dyn Fn(&mut M<'_>) -> u128 + Send + Sync>;
pub(super) type S = Box<dyn Fn(&mut M<'_>) -> Flow + Send + Sync>;
/// Where a place starts among the slots, now (`None`: past a stack's end).
type P = Arc<dyn Fn(&mut M<'_>) -> Option<usize> + Send + Sync>;
/// Whether a statement's or select's reads through `last` or `next` are within their stacks.
type Within = Box<dyn Fn(&mut M<'_>) -> bool + Send + Sync>;
/// What runs after a write, for its side effects only.
pub(super) type After = Box<dyn Fn(&mut M<'_>) + Send + Sync>;
/// A place compiled: where it starts, its shape, and (for a union's member) the union's place
/// and the member's index.
type Placed = (P, Shape, Option<(P, usize)>);

/// The slots a value of a type takes, and where each part is.
#[derive(Clone, Debug)]
pub(super) enum Shape {
    Scalar,
    /// Validity, then the fields.
    Header(Vec<Shape>),
    Struct(Vec<Shape>),
    /// Headers of which at most one is valid.
    Union(Vec<Shape>),
    /// The next index, then the elements.
    Stack(Box<Shape>, usize),
    /// `varbit<max>`: its length in bits, then one slot per byte (those past the length zero).
    Varbit(u32),
    /// What has no value here (an extern, a packet).
    Nothing,
}

/// In a list of widths (`widths_of`): the slot of a varbit's length, its bytes after it.
const VARBIT: u32 = u32::MAX;

impl Shape {
    pub fn size(&self) -> usize {
        match self {
            Shape::Scalar => 1,
            Shape::Header(f) => 1 + f.iter().map(Shape::size).sum::<usize>(),
            Shape::Struct(f) | Shape::Union(f) => f.iter().map(Shape::size).sum(),
            Shape::Stack(e, n) => 1 + e.size() * n,
            Shape::Varbit(max) => 1 + max.div_ceil(8) as usize,
            Shape::Nothing => 0,
        }
    }

    /// Where field `i` starts, from the aggregate's start.
    pub fn field_at(&self, i: usize) -> usize {
        match self {
            Shape::Header(f) => 1 + f[..i].iter().map(Shape::size).sum::<usize>(),
            Shape::Struct(f) | Shape::Union(f) => f[..i].iter().map(Shape::size).sum(),
            _ => 0,
        }
    }

    fn field(&self, i: usize) -> &Shape {
        match self {
            Shape::Header(f) | Shape::Struct(f) | Shape::Union(f) => &f[i],
            _ => self,
        }
    }
}

/// One IR block compiled: what its locals start as, and its states or statements.
pub(super) struct Block {
    pub init: Vec<S>,
    pub body: BlockBody,
}

pub(super) enum BlockBody {
    /// The states, and which is `start`.
    Parser(Vec<State>, usize),
    Control(Vec<S>),
}

pub(super) struct State {
    body: Vec<S>,
    transition: Transition,
}

enum Transition {
    Goto(Target),
    /// The check that its keys' reads through `last` or `next` are within their stacks (else
    /// the parser rejects), the keys, the cases.
    Select(Option<Within>, Vec<E>, Vec<(Vec<Key>, Target)>),
}

#[derive(Clone, Copy)]
enum Target {
    Accept,
    Reject,
    State(usize),
}

#[derive(Clone, Copy)]
enum Key {
    Any,
    Value(u128),
    Mask(u128, u128),
    Range(u128, u128),
    /// A value set (the `Switch`'s, by number): the case's only key, matched against all the
    /// select's values.
    Set(usize),
}

impl Key {
    fn matches(self, v: u128) -> bool {
        match self {
            Key::Any => true,
            Key::Value(x) => v == x,
            Key::Mask(x, m) => v & m == x & m,
            Key::Range(lo, hi) => (lo..=hi).contains(&v),
            Key::Set(_) => false,
        }
    }
}

/// A table: the `Switch`'s state it reads, its keys, and the IR action each of its actions is.
pub(super) struct Table {
    state: usize,
    keys: Vec<E>,
    /// Per name in the state's `actions`: the IR action, its data parameters (slot, mask), and
    /// the copies in and out its bound arguments make.
    actions: Vec<TableAction>,
    /// The IR's default, for a table whose state names no action it has (`NoAction` unlisted).
    fallback: usize,
    /// A direct meter, an action profile or selector: looked up by `indirect::apply_table`.
    extras: Option<Box<indirect::TableExtras>>,
    /// Whether a hit counts in the entry's packets and bytes (not with a PSA DirectCounter,
    /// which its actions' `count()` calls do).
    counts_hits: bool,
}

struct TableAction {
    action: usize,
    data: Vec<(usize, u128)>,
    copy_in: Vec<S>,
    copy_out: Vec<S>,
}

/// The program compiled.
pub struct Compiled {
    pub(super) slots: usize,
    pub(super) base: Vec<usize>,
    /// Each variable's number of slots.
    pub(super) sizes: Vec<usize>,
    pub(super) blocks: Vec<Block>,
    pub(super) actions: Vec<Vec<S>>,
    pub(super) functions: Vec<Vec<S>>,
    pub(super) tables: Vec<Table>,
    pub(super) errors: Vec<String>,
    /// It calls clone, resubmit, recirculate or truncate: v1model's driver of several passes
    /// (`exec_arch/passes.rs`) runs it.
    pub(super) passes: bool,
    pub(super) error_no_match: u32,
    pub(super) error_too_short: u32,
    pub(super) error_out_of_bounds: u32,
    pub(super) error_timeout: u32,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Compiled({} slots, {} blocks)", self.slots, self.blocks.len())
    }
}

/// Runs statements in order until one does not go on.
#[inline]
pub(super) fn run(body: &[S], m: &mut M) -> Flow {
    for s in body {
        let f = s(m);
        if f != Flow::Next {
            return f;
        }
    }
    Flow::Next
}

/// A parser state's statements, as `run` runs them; a statement that read a stack's `last` or
/// `next` past its elements ends the parser in reject.
fn run_state(body: &[S], m: &mut M) -> Flow {
    for s in body {
        let f = s(m);
        if m.past_stack {
            m.past_stack = false;
            return Flow::Reject(m.prog.error_out_of_bounds);
        }
        if f != Flow::Next {
            return f;
        }
    }
    Flow::Next
}

/// The places `e` reads through a stack's `last` or `next` (a value or a validity), into `out`.
fn reads_past_a_stack(e: &Expr, out: &mut Vec<Place>) {
    match e {
        Expr::Read(p) | Expr::IsValid(p) => {
            if p.steps.iter().any(|s| matches!(s, Step::Last | Step::Next)) {
                out.push(p.clone());
            }
            for s in &p.steps {
                if let Step::Elem(i) = s {
                    reads_past_a_stack(i, out);
                }
            }
        }
        Expr::Const { .. } | Expr::Bool(_) | Expr::Str(_) => {}
        Expr::Not(x) | Expr::Complement(x, _) | Expr::Negate(x, _) => reads_past_a_stack(x, out),
        Expr::Slice { value, .. } | Expr::Cast { value, .. } => reads_past_a_stack(value, out),
        Expr::Binary { left, right, .. } | Expr::Equal { left, right, .. } | Expr::Concat { left, right, .. } => {
            reads_past_a_stack(left, out);
            reads_past_a_stack(right, out);
        }
        // Only what is read for sure: the right of `&&` and `||` and a condition's branches may
        // not be, and a read there past the end is left to `M::past_stack` (checked after).
        Expr::And(left, _) | Expr::Or(left, _) => reads_past_a_stack(left, out),
        Expr::Cond { cond, .. } => reads_past_a_stack(cond, out),
        Expr::Aggregate { items, .. } => items.iter().for_each(|i| reads_past_a_stack(i, out)),
    }
}

fn sign_extend(v: u128, from: u32, to: u32) -> u128 {
    if from == 0 || from >= 128 || v >> (from - 1) & 1 == 0 {
        return v & mask(to);
    }
    (v | !mask(from)) & mask(to)
}

fn signed_value(v: u128, w: u32) -> i128 {
    if w < 128 && w > 0 && v >> (w - 1) & 1 == 1 {
        v as i128 - (1i128 << w)
    } else {
        v as i128
    }
}

/// `width` bits of `data` from bit `at`, network order.
#[inline]
pub(super) fn read_field(data: &[u8], at: usize, width: u32) -> u128 {
    if width == 0 {
        return 0;
    }
    let first = at / 8;
    let last = (at + width as usize - 1) / 8;
    if last - first < 16 {
        let mut acc = 0u128;
        for &b in &data[first..=last] {
            acc = (acc << 8) | b as u128;
        }
        let tail = (8 - (at + width as usize) % 8) % 8;
        (acc >> tail) & mask(width)
    } else {
        let mut v = 0u128;
        for i in 0..width as usize {
            let bit = at + i;
            v = (v << 1) | ((data[bit / 8] >> (7 - bit % 8)) & 1) as u128;
        }
        v
    }
}

/// Builds a program's compiled form against the switch whose state it runs on.
pub(super) struct Compiler<'s> {
    sw: &'s Switch,
    ir: &'s ir::Program,
    /// Each variable's first slot and its shape.
    base: Vec<usize>,
    shapes: Vec<Shape>,
    /// A V1Switch program (mark_to_drop and v1model's functions mean theirs).
    v1model: bool,
    /// The program's errors, by number.
    errors: Vec<String>,
    /// Whether it calls clone, resubmit, recirculate or truncate (v1model's functions that ask
    /// the switch for more than one pass).
    passes: std::cell::Cell<bool>,
}

type R<T> = Result<T, String>;

impl<'s> Compiler<'s> {
    pub fn new(sw: &'s Switch, ir: &'s ir::Program, v1model: bool) -> R<Compiler<'s>> {
        let mut c = Compiler {
            sw,
            ir,
            base: Vec::new(),
            shapes: Vec::new(),
            v1model,
            errors: ir.errors.clone(),
            passes: std::cell::Cell::new(false),
        };
        let mut at = 0;
        for v in &ir.variables {
            let shape = c.shape(&v.ty)?;
            c.base.push(at);
            at += shape.size();
            c.shapes.push(shape);
        }
        Ok(c)
    }

    pub fn shape(&self, ty: &Ty) -> R<Shape> {
        Ok(match ty {
            Ty::Bit(_) | Ty::Int(_) | Ty::Bool | Ty::Error | Ty::Enum(_) => Shape::Scalar,
            Ty::Header(i) | Ty::Struct(i) | Ty::Union(i) => {
                let a = &self.ir.aggregates[*i];
                let fields = a.fields.iter().map(|(_, t)| self.shape(t)).collect::<R<Vec<_>>>()?;
                match a.kind {
                    ir::AggregateKind::Header => Shape::Header(fields),
                    ir::AggregateKind::Struct => Shape::Struct(fields),
                    ir::AggregateKind::Union => Shape::Union(fields),
                }
            }
            Ty::Stack(e, n) => Shape::Stack(Box::new(self.shape(e)?), *n as usize),
            Ty::Tuple(items) => Shape::Struct(items.iter().map(|t| self.shape(t)).collect::<R<Vec<_>>>()?),
            Ty::Opaque(_) => Shape::Nothing,
            Ty::Varbit(max) => Shape::Varbit(*max),
        })
    }

    fn error(&self, name: &str) -> u32 {
        self.errors.iter().position(|e| e == name).unwrap_or(0) as u32
    }

    pub fn finish(mut self) -> R<Compiled> {
        let ir = self.ir;
        let mut actions = Vec::new();
        for a in &ir.actions {
            actions.push(self.stmts(&a.body)?);
        }
        let mut functions = Vec::new();
        for f in &ir.functions {
            functions.push(self.stmts(&f.body)?);
        }
        let mut tables = Vec::new();
        for t in &ir.tables {
            tables.push(self.table(t)?);
        }
        let mut blocks = Vec::new();
        for b in &ir.blocks_code {
            let init = self.stmts(&b.init)?;
            let body = match &b.body {
                ir::BlockBody::Control(s) => BlockBody::Control(self.stmts(s)?),
                ir::BlockBody::Parser(states) => {
                    let mut out = Vec::new();
                    for s in states {
                        out.push(State {
                            body: self.stmts(&s.body)?,
                            transition: self.transition(states, &s.transition)?,
                        });
                    }
                    let start = states.iter().position(|s| s.name == "start");
                    BlockBody::Parser(out, start.ok_or_else(|| format!("{}: no start state", b.name))?)
                }
            };
            blocks.push(Block { init, body });
        }
        let slots = self.base.last().map_or(0, |b| b + self.shapes.last().map_or(0, Shape::size));
        Ok(Compiled {
            slots,
            error_no_match: self.error("NoMatch"),
            error_too_short: self.error("PacketTooShort"),
            error_out_of_bounds: self.error("StackOutOfBounds"),
            error_timeout: self.error("ParserTimeout"),
            sizes: self.shapes.iter().map(Shape::size).collect(),
            base: std::mem::take(&mut self.base),
            blocks,
            actions,
            functions,
            tables,
            errors: self.errors.clone(),
            passes: self.passes.get(),
        })
    }

    fn transition(&self, states: &[ir::State], t: &ir::Transition) -> R<Transition> {
        let target = |n: &Next| match n {
            Next::Accept => Target::Accept,
            Next::Reject => Target::Reject,
            Next::State(i) => Target::State(*i),
        };
        let _ = states;
        Ok(match t {
            ir::Transition::Goto(n) => Transition::Goto(target(n)),
            ir::Transition::Select { keys, cases } => {
                let mut reads = Vec::new();
                keys.iter().for_each(|k| reads_past_a_stack(k, &mut reads));
                let within = if reads.is_empty() { None } else { Some(self.within_stacks(&reads)?) };
                let keys = keys.iter().map(|k| self.scalar(k)).collect::<R<Vec<_>>>()?;
                let mut out = Vec::new();
                for (sets, n) in cases {
                    let sets = sets
                        .iter()
                        .map(|k| {
                            Ok(match k {
                                Keyset::Any => Key::Any,
                                Keyset::Value(v) => Key::Value(*v),
                                Keyset::Mask(v, m) => Key::Mask(*v, *m),
                                Keyset::Range(a, b) => Key::Range(*a, *b),
                                Keyset::ValueSet(n) => {
                                    let name = self.ir.control_name(n);
                                    Key::Set(
                                        self.sw.value_sets.number(&name).ok_or_else(|| format!("the value_set {n}"))?,
                                    )
                                }
                            })
                        })
                        .collect::<R<Vec<_>>>()?;
                    out.push((sets, target(n)));
                }
                Transition::Select(within, keys, out)
            }
        })
    }

    // ---- places ----

    /// A place's start and shape; whether it is the member of a union (its union's place and
    /// its index there), for keeping one member valid.
    fn place(&self, p: &Place) -> R<Placed> {
        let mut shape = self.shapes[p.var].clone();
        let start = self.base[p.var];
        let mut fixed: Option<usize> = Some(start);
        let mut dynamic: Option<P> = None;
        let mut union: Option<(P, usize)> = None;
        let current = |fixed: Option<usize>, dynamic: &Option<P>| -> P {
            match (fixed, dynamic) {
                (Some(at), _) => Arc::new(move |_: &mut M| Some(at)),
                (None, Some(d)) => d.clone(),
                _ => unreachable!(),
            }
        };
        for step in &p.steps {
            match step {
                Step::Field(i) => {
                    if let Shape::Union(_) = shape {
                        union = Some((current(fixed, &dynamic), *i));
                    } else {
                        union = None;
                    }
                    let off = shape.field_at(*i);
                    shape = shape.field(*i).clone();
                    match (&mut fixed, &dynamic) {
                        (Some(at), _) => *at += off,
                        (None, Some(d)) => {
                            let d = d.clone();
                            dynamic = Some(Arc::new(move |m: &mut M| d(m).map(|a| a + off)));
                        }
                        _ => unreachable!(),
                    }
                }
                Step::Elem(_) | Step::Next | Step::Last => {
                    let Shape::Stack(elem, n) = shape.clone() else {
                        return Err("an index into what is not a stack".into());
                    };
                    let size = elem.size();
                    let stack = current(fixed, &dynamic);
                    let index: E = match step {
                        Step::Elem(e) => self.scalar(e)?,
                        Step::Next => {
                            let s = stack.clone();
                            Box::new(move |m: &mut M| s(m).map_or(u128::MAX, |a| m.slots[a]))
                        }
                        _ => {
                            let s = stack.clone();
                            Box::new(move |m: &mut M| s(m).map_or(u128::MAX, |a| m.slots[a].wrapping_sub(1)))
                        }
                    };
                    dynamic = Some(Arc::new(move |m: &mut M| {
                        let i = index(m);
                        let at = stack(m)?;
                        (i < n as u128).then(|| at + 1 + i as usize * size)
                    }));
                    fixed = None;
                    shape = *elem;
                    union = None;
                }
                Step::NextIndex => {
                    shape = Shape::Scalar;
                    union = None;
                }
            }
        }
        Ok((current(fixed, &dynamic), shape, union))
    }

    /// A place known without running anything, where it is one.
    fn fixed(&self, p: &Place) -> Option<usize> {
        if p.steps.iter().any(|s| !matches!(s, Step::Field(_) | Step::NextIndex)) {
            return None;
        }
        let mut shape = &self.shapes[p.var];
        let mut at = self.base[p.var];
        for s in &p.steps {
            if let Step::Field(i) = s {
                at += shape.field_at(*i);
                shape = shape.field(*i);
            }
        }
        Some(at)
    }

    // ---- expressions ----

    fn ty_of(&self, e: &Expr) -> Ty {
        match e {
            Expr::Const { ty, .. } => ty.clone(),
            Expr::Bool(_) | Expr::IsValid(_) | Expr::Not(_) | Expr::And(..) | Expr::Or(..) | Expr::Equal { .. } => {
                Ty::Bool
            }
            Expr::Str(_) => Ty::Opaque("string".into()),
            Expr::Read(p) => p.ty.clone(),
            Expr::Complement(_, t) | Expr::Negate(_, t) => t.clone(),
            Expr::Binary { op, ty, .. } => match op {
                BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => Ty::Bool,
                _ => ty.clone(),
            },
            Expr::Concat { ty, .. } | Expr::Cond { ty, .. } | Expr::Aggregate { ty, .. } => ty.clone(),
            Expr::Slice { hi, lo, .. } => Ty::Bit(hi - lo + 1),
            Expr::Cast { to, .. } => to.clone(),
        }
    }

    fn width(ty: &Ty) -> u32 {
        match ty {
            Ty::Bit(w) | Ty::Int(w) => *w,
            Ty::Bool => 1,
            _ => 128,
        }
    }

    /// A scalar expression.
    pub fn scalar(&self, e: &Expr) -> R<E> {
        Ok(match e {
            Expr::Const { value, .. } => {
                let v = *value;
                Box::new(move |_| v)
            }
            Expr::Bool(b) => {
                let v = *b as u128;
                Box::new(move |_| v)
            }
            Expr::Str(_) => return Err("a string".into()),
            Expr::Read(p) => {
                if !matches!(self.shape(&p.ty)?, Shape::Scalar) {
                    return Err("an aggregate read as a scalar".into());
                }
                let through_last_or_next = p.steps.iter().any(|s| matches!(s, Step::Last | Step::Next));
                match self.fixed(p) {
                    Some(at) => Box::new(move |m: &mut M| m.slots[at]),
                    None if through_last_or_next => {
                        let (at, _, _) = self.place(p)?;
                        Box::new(move |m: &mut M| match at(m) {
                            Some(a) => m.slots[a],
                            None => {
                                m.past_stack = true;
                                0
                            }
                        })
                    }
                    None => {
                        let (at, _, _) = self.place(p)?;
                        Box::new(move |m: &mut M| at(m).map_or(0, |a| m.slots[a]))
                    }
                }
            }
            Expr::IsValid(p) => {
                let (at, shape, _) = self.place(p)?;
                match shape {
                    Shape::Header(_) => Box::new(move |m: &mut M| at(m).map_or(0, |a| m.slots[a])),
                    Shape::Union(members) => {
                        let offs: Vec<usize> = (0..members.len())
                            .filter(|&i| matches!(members[i], Shape::Header(_)))
                            .map(|i| Shape::Union(members.clone()).field_at(i))
                            .collect();
                        Box::new(move |m: &mut M| at(m).map_or(0, |a| offs.iter().any(|o| m.slots[a + o] != 0) as u128))
                    }
                    _ => return Err("isValid of what is not a header".into()),
                }
            }
            Expr::Not(x) => {
                let x = self.scalar(x)?;
                Box::new(move |m: &mut M| (x(m) == 0) as u128)
            }
            Expr::Complement(x, ty) => {
                let (x, k) = (self.scalar(x)?, mask(Self::width(ty)));
                Box::new(move |m: &mut M| !x(m) & k)
            }
            Expr::Negate(x, ty) => {
                let (x, k) = (self.scalar(x)?, mask(Self::width(ty)));
                Box::new(move |m: &mut M| x(m).wrapping_neg() & k)
            }
            Expr::And(a, b) => {
                let (a, b) = (self.scalar(a)?, self.scalar(b)?);
                Box::new(move |m: &mut M| (a(m) != 0 && b(m) != 0) as u128)
            }
            Expr::Or(a, b) => {
                let (a, b) = (self.scalar(a)?, self.scalar(b)?);
                Box::new(move |m: &mut M| (a(m) != 0 || b(m) != 0) as u128)
            }
            Expr::Binary { op, ty, left, right } => self.binary(*op, ty, left, right)?,
            Expr::Equal { ty, left, right } => {
                let shape = self.shape(ty)?;
                let (Expr::Read(l), Expr::Read(r)) = (&**left, &**right) else {
                    return Err("== of an aggregate that is not a variable's".into());
                };
                let (l, _, _) = self.place(l)?;
                let (r, _, _) = self.place(r)?;
                Box::new(move |m: &mut M| match (l(m), r(m)) {
                    (Some(a), Some(b)) => equal(&shape, &m.slots, a, b) as u128,
                    _ => 0,
                })
            }
            Expr::Concat { ty, left, right } => {
                let rw = Self::width(&self.ty_of(right));
                let (l, r, k) = (self.scalar(left)?, self.scalar(right)?, mask(Self::width(ty)));
                Box::new(move |m: &mut M| {
                    let a = l(m);
                    let b = r(m);
                    (if rw >= 128 { b } else { (a << rw) | b }) & k
                })
            }
            Expr::Slice { value, hi, lo } => {
                let (v, lo, k) = (self.scalar(value)?, *lo, mask(hi - lo + 1));
                Box::new(move |m: &mut M| (v(m) >> lo) & k)
            }
            Expr::Cast { cast, to, value } => {
                let from = Self::width(&self.ty_of(value));
                let w = Self::width(to);
                let (v, k) = (self.scalar(value)?, mask(w));
                match cast {
                    Cast::Truncate | Cast::ZeroExtend | Cast::Reinterpret | Cast::FromBool => {
                        Box::new(move |m: &mut M| v(m) & k)
                    }
                    Cast::SignExtend => Box::new(move |m: &mut M| sign_extend(v(m), from, w)),
                    Cast::ToBool => Box::new(move |m: &mut M| (v(m) != 0) as u128),
                }
            }
            Expr::Cond { cond, then, otherwise, .. } => {
                let (c, a, b) = (self.scalar(cond)?, self.scalar(then)?, self.scalar(otherwise)?);
                Box::new(move |m: &mut M| if c(m) != 0 { a(m) } else { b(m) })
            }
            Expr::Aggregate { .. } => return Err("a list where a scalar is read".into()),
        })
    }

    fn binary(&self, op: BinaryOp, ty: &Ty, left: &Expr, right: &Expr) -> R<E> {
        let (l, r) = (self.scalar(left)?, self.scalar(right)?);
        let signed = matches!(ty, Ty::Int(_));
        let w = Self::width(ty);
        let k = mask(w);
        macro_rules! op {
            (|$a:ident, $b:ident| $body:expr) => {
                Box::new(move |m: &mut M| {
                    let $a = l(m);
                    let $b = r(m);
                    $body
                })
            };
        }
        Ok(match (op, signed) {
            (BinaryOp::Add, _) => op!(|a, b| a.wrapping_add(b) & k),
            (BinaryOp::Sub, _) => op!(|a, b| a.wrapping_sub(b) & k),
            (BinaryOp::Mul, _) => op!(|a, b| a.wrapping_mul(b) & k),
            (BinaryOp::AddSat | BinaryOp::SubSat, true) => {
                // Written so that int<128> neither overflows nor wraps.
                let lo = -1i128 << (w - 1);
                let hi = !lo;
                let add = op == BinaryOp::AddSat;
                op!(|a, b| {
                    let (x, y) = (signed_value(a, w), signed_value(b, w));
                    let v = if add { x.saturating_add(y) } else { x.saturating_sub(y) };
                    v.clamp(lo, hi) as u128 & k
                })
            }
            (BinaryOp::AddSat, false) => op!(|a, b| a.checked_add(b).filter(|s| *s <= k).unwrap_or(k)),
            (BinaryOp::SubSat, false) => op!(|a, b| a.saturating_sub(b)),
            (BinaryOp::And, _) => op!(|a, b| a & b),
            (BinaryOp::Or, _) => op!(|a, b| a | b),
            (BinaryOp::Xor, _) => op!(|a, b| a ^ b),
            (BinaryOp::Shl, _) => op!(|a, b| if b >= w as u128 { 0 } else { (a << b) & k }),
            (BinaryOp::Shr, true) => op!(|a, b| (signed_value(a, w) >> b.min(w as u128 - 1)) as u128 & k),
            (BinaryOp::Shr, false) => op!(|a, b| if b >= w as u128 { 0 } else { a >> b }),
            (BinaryOp::Div, _) => op!(|a, b| a.checked_div(b).unwrap_or(0) & k),
            (BinaryOp::Mod, _) => op!(|a, b| a.checked_rem(b).unwrap_or(0) & k),
            (BinaryOp::Eq, _) => op!(|a, b| (a == b) as u128),
            (BinaryOp::Ne, _) => op!(|a, b| (a != b) as u128),
            (BinaryOp::Lt, false) => op!(|a, b| (a < b) as u128),
            (BinaryOp::Le, false) => op!(|a, b| (a <= b) as u128),
            (BinaryOp::Gt, false) => op!(|a, b| (a > b) as u128),
            (BinaryOp::Ge, false) => op!(|a, b| (a >= b) as u128),
            (BinaryOp::Lt, true) => op!(|a, b| (signed_value(a, w) < signed_value(b, w)) as u128),
            (BinaryOp::Le, true) => op!(|a, b| (signed_value(a, w) <= signed_value(b, w)) as u128),
            (BinaryOp::Gt, true) => op!(|a, b| (signed_value(a, w) > signed_value(b, w)) as u128),
            (BinaryOp::Ge, true) => op!(|a, b| (signed_value(a, w) >= signed_value(b, w)) as u128),
        })
    }

    // ---- statements ----

    pub fn stmts(&self, body: &[Stmt]) -> R<Vec<S>> {
        // Source positions run nothing: no closure for them.
        body.iter().filter(|s| !matches!(s, Stmt::At(_))).map(|s| self.stmt(s)).collect()
    }

    /// Writes `value` to `place`, a scalar or an aggregate.
    pub fn assign(&self, place: &Place, value: &Expr) -> R<S> {
        let shape = self.shape(&place.ty)?;
        if let Shape::Scalar = shape {
            let v = self.scalar(value)?;
            if let Some(at) = self.fixed(place) {
                return Ok(Box::new(move |m: &mut M| {
                    m.slots[at] = v(m);
                    Flow::Next
                }));
            }
            let (at, _, _) = self.place(place)?;
            return Ok(Box::new(move |m: &mut M| {
                let x = v(m);
                if let Some(a) = at(m) {
                    m.slots[a] = x;
                }
                Flow::Next
            }));
        }
        let (at, _, union) = self.place(place)?;
        let settle = union.map(|(u, i)| self.settler(&u, i, place)).transpose()?;
        let size = shape.size();
        match value {
            Expr::Read(src) => {
                let (from, _, _) = self.place(src)?;
                Ok(Box::new(move |m: &mut M| {
                    let src = from(m);
                    if let Some(dst) = at(m) {
                        match src {
                            Some(s) => m.slots.copy_within(s..s + size, dst),
                            // Past a stack's end: an invalid header of zeros.
                            None => m.slots[dst..dst + size].fill(0),
                        }
                        if let Some(settle) = &settle {
                            settle(m);
                        }
                    }
                    Flow::Next
                }))
            }
            Expr::Aggregate { items, .. } => {
                // Every item is read before any is written (`h = {h.b, h.a}` swaps).
                let mut fills: Vec<(usize, E)> = Vec::new();
                let mut valid = Vec::new();
                self.fill(&shape, 0, items, &mut fills, &mut valid)?;
                Ok(Box::new(move |m: &mut M| {
                    let mut scratch = [0u128; 64];
                    let mut spill = Vec::new();
                    let values: &mut [u128] = if fills.len() <= 64 {
                        &mut scratch[..fills.len()]
                    } else {
                        spill.resize(fills.len(), 0);
                        &mut spill
                    };
                    for (i, (_, f)) in fills.iter().enumerate() {
                        values[i] = f(m);
                    }
                    if let Some(dst) = at(m) {
                        for (i, (off, _)) in fills.iter().enumerate() {
                            m.slots[dst + off] = values[i];
                        }
                        for off in &valid {
                            m.slots[dst + off] = 1;
                        }
                        if let Some(settle) = &settle {
                            settle(m);
                        }
                    }
                    Flow::Next
                }))
            }
            _ => Err("an aggregate's value of this kind".into()),
        }
    }

    /// The items of a list, each at its place in `shape` (from `at`).
    fn fill(
        &self,
        shape: &Shape,
        at: usize,
        items: &[Expr],
        fills: &mut Vec<(usize, E)>,
        valid: &mut Vec<usize>,
    ) -> R<()> {
        if let Shape::Header(_) = shape {
            valid.push(at);
        }
        for (i, item) in items.iter().enumerate() {
            let inner = shape.field(i);
            let off = at + shape.field_at(i);
            match (inner, item) {
                (Shape::Scalar, _) => fills.push((off, self.scalar(item)?)),
                (_, Expr::Aggregate { items, .. }) => self.fill(inner, off, items, fills, valid)?,
                (_, Expr::Read(p)) => {
                    let size = inner.size();
                    let (src, _, _) = self.place(p)?;
                    let src = Arc::new(src);
                    for k in 0..size {
                        let src = src.clone();
                        fills.push((off + k, Box::new(move |m: &mut M| src(m).map_or(0, |s| m.slots[s + k]))));
                    }
                }
                _ => return Err("a list item of this kind".into()),
            }
        }
        Ok(())
    }

    /// After a write to member `i` of the union at `u`: if that member is now valid, the
    /// others are not (P4-16 keeps at most one valid).
    fn settler(&self, u: &P, i: usize, place: &Place) -> R<After> {
        let mut union_place = place.clone();
        union_place.steps.pop();
        let shape = match self.place(&union_place)?.1 {
            s @ Shape::Union(_) => s,
            _ => return Err("a union member".into()),
        };
        let n = match &shape {
            Shape::Union(f) => f.len(),
            _ => 0,
        };
        let offs: Vec<usize> = (0..n).map(|k| shape.field_at(k)).collect();
        let u = u.clone();
        Ok(Box::new(move |m: &mut M| {
            let Some(base) = u(m) else { return };
            if m.slots[base + offs[i]] == 0 {
                return;
            }
            for (k, off) in offs.iter().enumerate() {
                if k != i {
                    m.slots[base + off] = 0;
                }
            }
        }))
    }

    /// A statement, after the check that what it reads through a stack's `last` or `next`
    /// (the checker allows them in parsers only) is within the stack: else the parser rejects
    /// before the statement runs, having written nothing (P4-16 8.18).
    fn stmt(&self, s: &Stmt) -> R<S> {
        let mut reads = Vec::new();
        match s {
            Stmt::Assign { value, .. } => reads_past_a_stack(value, &mut reads),
            Stmt::If { cond, .. } => reads_past_a_stack(cond, &mut reads),
            Stmt::Extern { args, .. } => {
                for a in args {
                    if let CallArg::In(e) = a {
                        reads_past_a_stack(e, &mut reads);
                    }
                }
            }
            _ => {}
        }
        let run = self.unchecked_stmt(s)?;
        if reads.is_empty() {
            return Ok(run);
        }
        let within = self.within_stacks(&reads)?;
        Ok(Box::new(move |m: &mut M| if within(m) { run(m) } else { Flow::Reject(m.prog.error_out_of_bounds) }))
    }

    /// Whether every one of these places (each read through `last` or `next`) is within its
    /// stack now.
    fn within_stacks(&self, reads: &[Place]) -> R<Within> {
        let places = reads.iter().map(|p| Ok(self.place(p)?.0)).collect::<R<Vec<P>>>()?;
        Ok(Box::new(move |m: &mut M| places.iter().all(|at| at(m).is_some())))
    }

    fn unchecked_stmt(&self, s: &Stmt) -> R<S> {
        Ok(match s {
            Stmt::At(_) => Box::new(|_: &mut M| Flow::Next),
            Stmt::Assign { place, value } => self.assign(place, value)?,
            Stmt::Init(place) => {
                let (at, shape, _) = self.place(place)?;
                let size = shape.size();
                Box::new(move |m: &mut M| {
                    if let Some(a) = at(m) {
                        m.slots[a..a + size].fill(0);
                    }
                    Flow::Next
                })
            }
            Stmt::SetValid { header, valid } => {
                let (at, shape, union) = self.place(header)?;
                if !matches!(shape, Shape::Header(_)) {
                    return Err("setValid of what is not a header".into());
                }
                let settle = union.map(|(u, i)| self.settler(&u, i, header)).transpose()?;
                let v = *valid as u128;
                Box::new(move |m: &mut M| {
                    if let Some(a) = at(m) {
                        m.slots[a] = v;
                        if let Some(settle) = &settle {
                            settle(m);
                        }
                    }
                    Flow::Next
                })
            }
            Stmt::PushFront { stack, count } | Stmt::PopFront { stack, count } => {
                let push = matches!(s, Stmt::PushFront { .. });
                let (at, shape, _) = self.place(stack)?;
                let Shape::Stack(elem, n) = shape else { return Err("push or pop of what is not a stack".into()) };
                let size = elem.size();
                let header = matches!(*elem, Shape::Header(_));
                let count = (*count as usize).min(n);
                Box::new(move |m: &mut M| {
                    let Some(a) = at(m) else { return Flow::Next };
                    let elems = &mut m.slots[a + 1..a + 1 + n * size];
                    let vacated = if push {
                        elems.rotate_right(count * size);
                        m.slots[a] = (m.slots[a] + count as u128).min(n as u128);
                        0..count
                    } else {
                        elems.rotate_left(count * size);
                        m.slots[a] = m.slots[a].saturating_sub(count as u128);
                        n - count..n
                    };
                    if header {
                        for k in vacated {
                            m.slots[a + 1 + k * size] = 0;
                        }
                    }
                    Flow::Next
                })
            }
            Stmt::If { cond, then, otherwise } => {
                let (c, t, o) = (self.scalar(cond)?, self.stmts(then)?, self.stmts(otherwise)?);
                Box::new(move |m: &mut M| if c(m) != 0 { run(&t, m) } else { run(&o, m) })
            }
            Stmt::Apply { table, hit, action_run } => self.apply(*table, *hit, *action_run)?,
            Stmt::CallAction { action, after } => {
                let (a, after) = (*action, self.stmts(after)?);
                Box::new(move |m: &mut M| {
                    let prog = m.prog;
                    let f = run(&prog.actions[a], m);
                    finish_call(f, &after, m)
                })
            }
            Stmt::CallFunction { function, after } => {
                let (f, after) = (*function, self.stmts(after)?);
                Box::new(move |m: &mut M| {
                    let prog = m.prog;
                    let flow = run(&prog.functions[f], m);
                    finish_call(flow, &after, m)
                })
            }
            Stmt::ApplyBlock { block, after } => {
                let (b, after) = (*block, self.stmts(after)?);
                Box::new(move |m: &mut M| {
                    let flow = run_block(b, m);
                    let flow = match flow {
                        Flow::Reject(e) => {
                            run(&after, m);
                            return Flow::Reject(e);
                        }
                        f => f,
                    };
                    finish_call(flow, &after, m)
                })
            }
            Stmt::Extern { callee, type_args, args, result, .. } => {
                self.call(callee, type_args, args, result.as_ref())?
            }
            Stmt::Loop { cond, body, update } => {
                let cond = cond.as_ref().map(|c| self.scalar(c)).transpose()?;
                let (body, update) = (self.stmts(body)?, self.stmts(update)?);
                Box::new(move |m: &mut M| {
                    for _ in 0..LOOP_ITERATIONS_MAX {
                        if let Some(c) = &cond {
                            if c(m) == 0 {
                                return Flow::Next;
                            }
                        }
                        match run(&body, m) {
                            Flow::Next | Flow::Continue => {}
                            Flow::Break => return Flow::Next,
                            other => return other,
                        }
                        let f = run(&update, m);
                        if f != Flow::Next {
                            return f;
                        }
                    }
                    // The refusal names the bound (LOOP_ITERATIONS_MAX is 1 << 16).
                    const _: () = assert!(LOOP_ITERATIONS_MAX == 65536);
                    Flow::Unsupported("a for loop past 65536 iterations")
                })
            }
            Stmt::Break => Box::new(|_: &mut M| Flow::Break),
            Stmt::Continue => Box::new(|_: &mut M| Flow::Continue),
            Stmt::Return => Box::new(|_: &mut M| Flow::Return),
            Stmt::Exit => Box::new(|_: &mut M| Flow::Exit),
        })
    }

    // ---- tables ----

    /// The `Switch`'s name for an IR instance or table (`Block.name` by the block's
    /// declaration, `.name` at the top level), as P4Info and the control plane know it.
    fn switch_name(&self, qualified: &str) -> String {
        self.ir.control_name(qualified)
    }

    fn apply(&self, table: usize, hit: Option<usize>, action_run: Option<usize>) -> R<S> {
        let hit = hit.map(|v| self.base[v]);
        let action_run = action_run.map(|v| self.base[v]);
        Ok(Box::new(move |m: &mut M| {
            // `apply_table` sets `m.matched` for the action's PSA direct externs; only its
            // action may use it.
            let (taken, action, listed) = apply_table(table, m);
            if let Some(h) = hit {
                m.slots[h] = taken as u128;
            }
            if let Some(r) = action_run {
                m.slots[r] = action as u128;
            }
            let prog = m.prog;
            let f = run(&prog.actions[action], m);
            m.matched = None;
            // Its bound arguments' copies out, on a return and on an exit.
            if let Some(ta) = listed.and_then(|k| prog.tables[table].actions.get(k)) {
                if matches!(f, Flow::Next | Flow::Return | Flow::Exit) {
                    run(&ta.copy_out, m);
                }
            }
            match f {
                Flow::Next | Flow::Return => Flow::Next,
                other => other,
            }
        }))
    }

    fn table(&self, t: &ir::Table) -> R<Table> {
        let name = self.switch_name(&t.name);
        let state_no = self.sw.tables.number(&name).ok_or_else(|| format!("the table {name}"))?;
        let state = self.sw.tables.at(state_no);
        // v1model's direct meter marks the entry as the lookup hits it; PSA's marks it when an
        // action calls `execute()` (`DirectMeter` in `psa_externs.rs`).
        let marks_on_hit = t.properties.iter().any(|(p, _)| p == "meters");
        let meter = if marks_on_hit { state.meter.clone() } else { None };
        let extras = self.table_extras(t, &state.selector_keys, &state.profile, &meter)?;
        // PSA's DirectCounter counts an entry only when its action calls `count()`; other
        // tables count each hit (v1model's direct_counter, and the hits the control plane reads).
        let counts_hits = !t.properties.iter().any(|(p, _)| p == "psa_direct_counter");
        if state.keys.len() + state.selector_keys.len() != t.keys.len() || state.actions.len() != t.actions.len() {
            return Err(format!("{name}: its keys or actions"));
        }
        let mut keys = Vec::new();
        let matched = t.keys.iter().enumerate().filter(|(i, _)| !state.selector_keys.contains(i)).map(|(_, k)| k);
        for (k, (width, _)) in matched.zip(&state.keys) {
            let e = self.scalar(&k.value)?;
            let km = mask(*width);
            keys.push(Box::new(move |m: &mut M| e(m) & km) as E);
        }
        let mut actions = Vec::new();
        for ta in &t.actions {
            let a = &self.ir.actions[ta.action];
            let mut copy_in = Vec::new();
            let mut copy_out = Vec::new();
            for ((var, _), arg) in a.params.iter().zip(&ta.bound) {
                let param = Place { var: *var, steps: Vec::new(), ty: self.ir.variables[*var].ty.clone() };
                match arg {
                    CallArg::In(e) => copy_in.push(self.assign(&param, e)?),
                    CallArg::InOut(p) | CallArg::Out(p) => {
                        copy_in.push(self.assign(&param, &Expr::Read(p.clone()))?);
                        copy_out.push(self.assign(p, &Expr::Read(param.clone()))?);
                    }
                    CallArg::Discard => {}
                }
            }
            let data = a.params[a.bound..]
                .iter()
                .map(|(v, _)| (self.base[*v], mask(Self::width(&self.ir.variables[*v].ty))))
                .collect();
            actions.push(TableAction { action: ta.action, data, copy_in, copy_out });
        }
        Ok(Table { state: state_no, keys, actions, fallback: t.default_action.0, extras, counts_hits })
    }
}

/// After a call's body: its copies out, on a return and on an exit (which goes on).
#[inline]
fn finish_call(flow: Flow, after: &[S], m: &mut M) -> Flow {
    match flow {
        Flow::Next | Flow::Return => run(after, m),
        Flow::Exit => {
            run(after, m);
            Flow::Exit
        }
        other => other,
    }
}

/// Runs block `b` (its locals' start, then its states or statements).
pub(super) fn run_block(b: usize, m: &mut M) -> Flow {
    let prog = m.prog;
    let block = &prog.blocks[b];
    let f = run(&block.init, m);
    if f != Flow::Next {
        return f;
    }
    match &block.body {
        BlockBody::Control(body) => match run(body, m) {
            Flow::Return | Flow::Next => Flow::Next,
            other => other,
        },
        BlockBody::Parser(states, start) => {
            let mut at = *start;
            for _ in 0..256 {
                let s = &states[at];
                let f = run_state(&s.body, m);
                if f != Flow::Next {
                    return f;
                }
                let next = match &s.transition {
                    Transition::Goto(t) => *t,
                    Transition::Select(within, keys, cases) => {
                        if within.as_ref().is_some_and(|within| !within(m)) {
                            return Flow::Reject(prog.error_out_of_bounds);
                        }
                        let mut values = [0u128; 8];
                        let mut spill = Vec::new();
                        let values: &mut [u128] = if keys.len() <= 8 {
                            &mut values[..keys.len()]
                        } else {
                            spill.resize(keys.len(), 0);
                            &mut spill
                        };
                        for (k, e) in keys.iter().enumerate() {
                            values[k] = e(m);
                        }
                        if m.past_stack {
                            m.past_stack = false;
                            return Flow::Reject(prog.error_out_of_bounds);
                        }
                        let found = cases.iter().find(|(sets, _)| match sets.as_slice() {
                            [Key::Any] => true,
                            [Key::Set(n)] => m.sw.value_sets.at(*n).matches(values),
                            _ => sets.iter().zip(values.iter()).all(|(k, v)| k.matches(*v)),
                        });
                        match found {
                            Some((_, t)) => *t,
                            None => return Flow::Reject(prog.error_no_match),
                        }
                    }
                };
                at = match next {
                    Target::Accept => return Flow::Next,
                    Target::Reject => return Flow::Reject(prog.error_no_match),
                    Target::State(i) => i,
                };
            }
            Flow::Reject(prog.error_timeout)
        }
    }
}

/// Looks `table` up and sets its action's parameters; whether it hit, the IR action, and
/// its place in the table's list.
fn apply_table(table: usize, m: &mut M) -> (bool, usize, Option<usize>) {
    let prog = m.prog;
    let t = &prog.tables[table];
    if t.extras.is_some() {
        return indirect::apply_table(table, m);
    }
    let mut keys = std::mem::take(&mut m.keys);
    keys.clear();
    for k in &t.keys {
        let v = k(m);
        keys.push(v);
    }
    let length = m.length;
    let state = m.sw.tables.at_mut(t.state);
    let best = state.lookup(&keys);
    m.keys = keys;
    let (hit, at) = match best {
        Some(i) => {
            let e = &mut state.entries[i];
            if t.counts_hits {
                e.packets += 1;
                e.bytes += length;
            }
            (true, e.action_at)
        }
        None => (false, state.default_at),
    };
    m.matched = best.map(|i| (t.state, i));
    let Some(ta) = t.actions.get(at) else {
        // The program's default names an action the table does not list (NoAction).
        return (hit, t.fallback, None);
    };
    let state = m.sw.tables.at(t.state);
    let args: &[u128] = match best {
        Some(i) => &state.entries[i].args,
        None => &state.default.1,
    };
    // The entry's data into the action's parameters; then its bound arguments.
    let mut data = [0u128; 16];
    let n = args.len().min(ta.data.len());
    if n <= 16 {
        data[..n].copy_from_slice(&args[..n]);
        bind_data(ta, &data[..n], m);
    } else {
        let args = args.to_vec();
        bind_data(ta, &args, m);
    }
    (hit, ta.action, Some(at))
}

/// An entry's data into its action's parameters, then the action's bound arguments copied in.
fn bind_data(ta: &TableAction, args: &[u128], m: &mut M) {
    for ((slot, km), v) in ta.data.iter().zip(args) {
        m.slots[*slot] = v & km;
    }
    for s in &ta.copy_in {
        s(m);
    }
}

/// `==` of two aggregates of one shape, as P4 compares them (two invalid headers are equal).
fn equal(shape: &Shape, slots: &[u128], a: usize, b: usize) -> bool {
    match shape {
        Shape::Scalar => slots[a] == slots[b],
        Shape::Header(fields) => {
            if slots[a] == 0 && slots[b] == 0 {
                return true;
            }
            slots[a] == slots[b] && {
                let mut off = 1;
                fields.iter().all(|f| {
                    let ok = equal(f, slots, a + off, b + off);
                    off += f.size();
                    ok
                })
            }
        }
        Shape::Struct(fields) | Shape::Union(fields) => {
            let mut off = 0;
            fields.iter().all(|f| {
                let ok = equal(f, slots, a + off, b + off);
                off += f.size();
                ok
            })
        }
        Shape::Stack(e, n) => (0..*n).all(|i| equal(e, slots, a + 1 + i * e.size(), b + 1 + i * e.size())),
        Shape::Varbit(_) => {
            let n = shape.size();
            slots[a..a + n] == slots[b..b + n]
        }
        Shape::Nothing => true,
    }
}
