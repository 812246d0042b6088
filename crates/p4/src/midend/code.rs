//! From the checked parsers, controls, actions and functions to IR code (`ir::Block`,
//! `ir::Action`, `ir::Function`, `ir::Table`): every name resolved to a variable, a constant or
//! an instance; every operation typed from the checker's record (`Checked::type_of`), numbers
//! without a width given the type they meet; calls of actions, functions and sub-blocks turned
//! into explicit copies around the call; table applies and extern calls inside expressions
//! hoisted into statements before them (and under `&&`, `||` and `?:` only where they decide),
//! in P4's order: left to right, each argument and assignment target evaluated once.
//! Each control and parser instance is lowered on its own, so two instances of one control have
//! their own tables, instances and actions, as P4 gives them.
//!
//! About 1 900 lines, one concern: the language's statements and expressions each have one
//! lowering here, beside the scope stack and the hoisting they share.

use std::collections::HashMap;

use super::ir::{self, BinaryOp, CallArg, Expr as IrExpr, Place, Stmt as IrStmt, Ty as IrTy};
use super::lower::{mask, signed};
use crate::diag::{Diagnostic, Pos};
use crate::frontend::ast::*;
use crate::frontend::check::{Checked, Layout, Ty};

type Result<T> = std::result::Result<T, Diagnostic>;

/// What a name means where it is used.
#[derive(Clone, Debug)]
enum Binding {
    Var(usize),
    /// A constant of a type with a width (folded).
    Const(IrExpr),
    /// A number without a width (`const int N = 4`).
    Number(i128),
    /// An extern instance, by its name in `Program::instances`.
    Instance(String),
    /// A parser's value set, by its name in `Program::value_sets`.
    ValueSet(String),
    Table(usize),
    /// An instance of one of the program's parsers or controls: its block.
    Block(usize),
    Action(usize),
}

/// What the declarations pass knew, which code lowering reads.
pub(super) struct Declared<'a> {
    pub aggregate_index: &'a HashMap<String, usize>,
    pub enum_index: &'a HashMap<String, usize>,
    pub constants: &'a HashMap<String, (IrTy, u128)>,
    pub numbers: &'a HashMap<String, u128>,
}

pub(super) struct Code<'a> {
    program: &'a Program,
    checked: &'a Checked,
    declared: Declared<'a>,
    pub out: ir::Program,
    scopes: Vec<HashMap<String, Binding>>,
    /// The type parameters of the generic function being lowered, bound.
    bind: HashMap<String, IrTy>,
    /// Global actions and function instances already lowered, by name (and type arguments).
    global_actions: HashMap<String, usize>,
    function_instances: HashMap<String, usize>,
    /// The instance path of the block being lowered (`MyIngress`), for qualified names.
    path: String,
    /// In a function: its result variable.
    result: Option<usize>,
    /// How many variables have each name.
    names: HashMap<String, usize>,
}

impl<'a> Code<'a> {
    pub(super) fn new(program: &'a Program, checked: &'a Checked, declared: Declared<'a>, out: ir::Program) -> Self {
        Code {
            program,
            checked,
            declared,
            out,
            scopes: Vec::new(),
            bind: HashMap::new(),
            global_actions: HashMap::new(),
            function_instances: HashMap::new(),
            path: String::new(),
            result: None,
            names: HashMap::new(),
        }
    }

    /// The package's blocks, each lowered with what it instantiates.
    pub(super) fn blocks(&mut self) -> Result<()> {
        let names = self.checked.blocks.clone();
        for name in &names {
            let Some(decl) = self.block_decl(name) else { continue };
            self.block(decl, name.clone())?;
        }
        Ok(())
    }

    fn block_decl(&self, name: &str) -> Option<&'a Decl> {
        self.program.decls.iter().find(|d| match d {
            Decl::Parser { name: n, .. } | Decl::Control { name: n, .. } => n.text == name,
            _ => false,
        })
    }

    /// Lowers one instance of a parser or control at `path`; its block's index.
    fn block(&mut self, decl: &'a Decl, path: String) -> Result<usize> {
        let saved_scopes = std::mem::take(&mut self.scopes);
        let saved_path = std::mem::replace(&mut self.path, path.clone());
        let saved_bind = std::mem::take(&mut self.bind);
        let saved_result = self.result.take();
        let index = self.out.blocks_code.len();
        let (declared, pos) = match decl {
            Decl::Parser { name, .. } | Decl::Control { name, .. } => (name.text.clone(), name.pos),
            _ => (String::new(), Pos::default()),
        };
        self.out.blocks_code.push(ir::Block {
            name: path.clone(),
            declared,
            params: Vec::new(),
            init: Vec::new(),
            body: ir::BlockBody::Control(Vec::new()),
            pos,
        });
        let lowered = self.block_inner(decl, &path);
        self.scopes = saved_scopes;
        self.path = saved_path;
        self.bind = saved_bind;
        self.result = saved_result;
        let (params, init, body) = lowered?;
        let b = &mut self.out.blocks_code[index];
        b.params = params;
        b.init = init;
        b.body = body;
        Ok(index)
    }

    #[allow(clippy::type_complexity)]
    fn block_inner(
        &mut self,
        decl: &'a Decl,
        path: &str,
    ) -> Result<(Vec<(usize, Option<Direction>)>, Vec<IrStmt>, ir::BlockBody)> {
        let (params, locals) = match decl {
            Decl::Parser { params, locals, .. } | Decl::Control { params, locals, .. } => (params, locals),
            _ => unreachable!("a block"),
        };
        self.scopes.push(HashMap::new());
        let mut lowered_params = Vec::new();
        for p in params {
            let ty = self.ast_ty(&p.ty, p.name.pos)?;
            let v = self.variable(format!("{path}.{}", p.name.text), ty);
            self.declare(&p.name.text, Binding::Var(v));
            lowered_params.push((v, p.direction));
        }
        self.scopes.push(HashMap::new());
        let mut init = Vec::new();
        for local in locals {
            self.local(local, &mut init)?;
        }
        let body = match decl {
            Decl::Parser { states, .. } => ir::BlockBody::Parser(self.states(states)?),
            Decl::Control { apply, .. } => ir::BlockBody::Control(self.stmts(apply)?),
            _ => unreachable!(),
        };
        self.scopes.clear();
        Ok((lowered_params, init, body))
    }

    fn local(&mut self, local: &'a Local, init: &mut Vec<IrStmt>) -> Result<()> {
        match local {
            Local::Const { ty, name, value } => self.constant(ty, name, value),
            Local::Var { ty, name, init: value } => self.var(ty, name, value.as_ref(), init),
            Local::Action(a) => {
                let index = self.action(a, format!("{}.{}", self.path, a.name.text))?;
                self.declare(&a.name.text, Binding::Action(index));
                Ok(())
            }
            Local::Table(t) => {
                let index = self.table(t)?;
                self.declare(&t.name.text, Binding::Table(index));
                Ok(())
            }
            Local::ValueSet(v) => {
                let name = format!("{}.{}", self.path, v.name.text);
                if !self.out.value_sets.iter().any(|x| x.name == name) {
                    // A number, or a constant of a width (`const bit<32> N = 4;`).
                    let mut pre = Vec::new();
                    let size = match self.number(&v.size) {
                        Some(n) => Some(n),
                        None => match self.value(&v.size, None, &mut pre) {
                            Ok(IrExpr::Const { value, .. }) if pre.is_empty() => Some(value as i128),
                            _ => None,
                        },
                    };
                    let size = size
                        .filter(|n| *n > 0)
                        .ok_or_else(|| Diagnostic::new(v.size.pos, "a value_set's size is a compile-time number"))?;
                    let fields = self
                        .checked
                        .value_set_fields(&v.ty)
                        .into_iter()
                        .map(|(name, width, match_kind)| ir::ValueSetField { name, width, match_kind })
                        .collect();
                    self.out.value_sets.push(ir::ValueSet {
                        name: name.clone(),
                        fields,
                        size: size as u32,
                        pos: v.name.pos,
                    });
                }
                self.declare(&v.name.text, Binding::ValueSet(name));
                Ok(())
            }
            Local::Instance(i) => {
                let Type::Named(n, _) = &i.ty else {
                    return Err(Diagnostic::new(i.name.pos, "an instance of a type that is not named"));
                };
                if let Some(decl) = self.block_decl(&n.text) {
                    let index = self.block(decl, format!("{}.{}", self.path, i.name.text))?;
                    self.declare(&i.name.text, Binding::Block(index));
                } else {
                    let name = format!("{}.{}", self.path, i.name.text);
                    self.instance_named(&name, i)?;
                    self.declare(&i.name.text, Binding::Instance(name));
                }
                Ok(())
            }
        }
    }

    /// `T name [= init];`: a variable under this block's or action's name, given its first value
    /// (P4's, `Init`, when none is written) in `out`.
    fn var(&mut self, ty: &Type, name: &Name, init: Option<&'a Expr>, out: &mut Vec<IrStmt>) -> Result<()> {
        let t = self.ast_ty(ty, name.pos)?;
        let v = self.variable(format!("{}.{}", self.path, name.text), t.clone());
        match init {
            Some(e) => {
                let value = self.value(e, Some(&t), out)?;
                out.push(IrStmt::Assign { place: var_place(v, t), value });
            }
            None => out.push(IrStmt::Init(var_place(v, t))),
        }
        self.declare(&name.text, Binding::Var(v));
        Ok(())
    }

    /// An extern instance under its qualified name; a second instance of the same control makes
    /// its own.
    fn instance_named(&mut self, name: &str, i: &'a Instance) -> Result<()> {
        if self.out.instances.iter().any(|x| x.name == name) {
            return Ok(());
        }
        let Type::Named(ty, type_args) = &i.ty else { unreachable!("checked by the caller") };
        let annotations = super::lower::numbered_annotations(&i.annotations);
        self.constructed(name, &ty.text, type_args, &i.args, annotations, i.name.pos)
    }

    /// `ty<type_args>(args)` as the instance `name`: its arguments folded (what does not fold
    /// kept by its P4 text), its type arguments resolved.
    fn constructed(
        &mut self,
        name: &str,
        ty: &str,
        type_args: &[Type],
        args: &'a [Expr],
        annotations: Vec<(String, u128)>,
        pos: Pos,
    ) -> Result<()> {
        let mut pre = Vec::new();
        let args = args
            .iter()
            .map(|a| {
                Ok(match self.value(a, None, &mut pre) {
                    Ok(IrExpr::Const { value, ty: IrTy::Enum(e) }) => {
                        ir::Arg::Member { enumeration: e, index: value as usize }
                    }
                    Ok(IrExpr::Const { value, ty }) => ir::Arg::Number { value, width: width(&ty) },
                    Ok(IrExpr::Bool(b)) => ir::Arg::Bool(b),
                    _ => ir::Arg::Other(text(a)),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        // A type argument with no value type (`_`, `int`) is passed on unnamed: no back end reads one.
        let type_args =
            type_args.iter().map(|t| self.ast_ty(t, pos).unwrap_or_else(|_| IrTy::Opaque("_".into()))).collect();
        let at = format!("{}:{}", pos.line, pos.col);
        self.out.instances.push(ir::Instance {
            name: name.to_string(),
            ty: ty.to_string(),
            type_args,
            args,
            annotations,
            at,
        });
        Ok(())
    }

    fn constant(&mut self, ty: &Type, name: &Name, value: &'a Expr) -> Result<()> {
        if matches!(ty, Type::Integer) {
            let v = self
                .number(value)
                .ok_or_else(|| Diagnostic::new(value.pos, format!("constant '{}' is not a number", name.text)))?;
            self.declare(&name.text, Binding::Number(v));
            return Ok(());
        }
        let t = self.ast_ty(ty, name.pos)?;
        let mut pre = Vec::new();
        let v = self.value(value, Some(&t), &mut pre)?;
        if !pre.is_empty() || !matches!(v, IrExpr::Const { .. } | IrExpr::Bool(_)) {
            return Err(Diagnostic::new(value.pos, format!("constant '{}' does not fold to a value", name.text)));
        }
        self.declare(&name.text, Binding::Const(v));
        Ok(())
    }

    fn declare(&mut self, name: &str, b: Binding) {
        self.scopes.last_mut().expect("a scope").insert(name.to_string(), b);
    }

    /// A new variable; a name already taken (a second `i` of a second loop) gets `$2`, `$3`, so
    /// that names in the dump and in generated code tell variables apart.
    fn variable(&mut self, name: String, ty: IrTy) -> usize {
        let seen = self.names.entry(name.clone()).or_insert(0);
        *seen += 1;
        let name = if *seen == 1 { name } else { format!("{name}${seen}") };
        self.out.variables.push(ir::Variable { name, ty });
        self.out.variables.len() - 1
    }

    /// A fresh variable for what the mid end must keep between statements.
    fn temporary(&mut self, ty: IrTy) -> usize {
        let name = format!("{}.$tmp{}", self.path, self.out.variables.len());
        self.variable(name, ty)
    }

    fn lookup(&self, name: &str) -> Option<Binding> {
        if let Some(b) = self.scopes.iter().rev().find_map(|s| s.get(name)) {
            return Some(b.clone());
        }
        self.global(name)
    }

    fn global(&self, name: &str) -> Option<Binding> {
        if let Some((ty, v)) = self.declared.constants.get(name) {
            return Some(match ty {
                IrTy::Bool => Binding::Const(IrExpr::Bool(*v != 0)),
                _ => Binding::Const(IrExpr::Const { value: *v, ty: ty.clone() }),
            });
        }
        if let Some(v) = self.declared.numbers.get(name) {
            return Some(Binding::Number(*v as i128));
        }
        if self.out.instances.iter().any(|i| i.name == name) {
            return Some(Binding::Instance(name.to_string()));
        }
        None
    }

    // ---- types ----

    fn ast_ty(&self, t: &Type, pos: Pos) -> Result<IrTy> {
        if let Type::Named(n, _) = t {
            if let Some(b) = self.bind.get(&n.text) {
                return Ok(b.clone());
            }
        }
        self.ir_ty(&self.checked.resolve(t), pos)
    }

    fn ir_ty(&self, t: &Ty, pos: Pos) -> Result<IrTy> {
        Ok(match t {
            Ty::Bit(w) => IrTy::Bit(*w),
            Ty::Int(w) => IrTy::Int(*w),
            Ty::Bool => IrTy::Bool,
            Ty::Error => IrTy::Error,
            Ty::Header(n) | Ty::Struct(n) | Ty::Union(n) => {
                let i = *self
                    .declared
                    .aggregate_index
                    .get(n)
                    .ok_or_else(|| Diagnostic::new(pos, format!("the mid end has no type '{n}'")))?;
                match self.out.aggregates[i].kind {
                    ir::AggregateKind::Header => IrTy::Header(i),
                    ir::AggregateKind::Struct => IrTy::Struct(i),
                    ir::AggregateKind::Union => IrTy::Union(i),
                }
            }
            Ty::Enum(n) => match self.declared.enum_index.get(n) {
                Some(i) => IrTy::Enum(*i),
                None => return Err(Diagnostic::new(pos, format!("the mid end has no enum '{n}'"))),
            },
            Ty::Stack(elem, n) => IrTy::Stack(Box::new(self.ir_ty(elem, pos)?), *n),
            Ty::Varbit(w) => IrTy::Varbit(*w),
            Ty::List(items) => IrTy::Tuple(items.iter().map(|t| self.ir_ty(t, pos)).collect::<Result<_>>()?),
            Ty::Var(v) => match self.bind.get(v) {
                Some(t) => t.clone(),
                None => return Err(Diagnostic::new(pos, format!("type parameter '{v}' is not bound here"))),
            },
            Ty::Extern(n, _) | Ty::BlockType(n, _) | Ty::Block(n) => IrTy::Opaque(n.clone()),
            Ty::Str => IrTy::Opaque("string".into()),
            Ty::Number => return Err(Diagnostic::new(pos, "a number without a width, where nothing gives it one")),
            Ty::Void | Ty::Table(_) | Ty::Applied(_) | Ty::ActionRun(_) | Ty::ValueSet(_) => {
                return Err(Diagnostic::new(pos, format!("{t} is not a value")))
            }
        })
    }

    /// The checker's type of `e` (`None` for a number without a width).
    fn type_of(&self, e: &Expr) -> Result<Option<IrTy>> {
        match self.checked.type_of(e) {
            Some(Ty::Number) => Ok(None),
            Some(t) => self.ir_ty(t, e.pos).map(Some),
            None => Err(Diagnostic::new(e.pos, "the checker left this expression untyped")),
        }
    }

    fn fields(&self, ty: &IrTy) -> &[(String, IrTy)] {
        match ty {
            IrTy::Header(i) | IrTy::Struct(i) | IrTy::Union(i) => &self.out.aggregates[*i].fields,
            _ => &[],
        }
    }

    // ---- expressions ----

    /// A number without a width, folded exactly (as P4 computes such numbers).
    fn number(&self, e: &Expr) -> Option<i128> {
        match &e.kind {
            ExprKind::Int { width: None, value } => Some(*value as i128),
            ExprKind::Name(n) | ExprKind::TopName(n) => match self.lookup(n)? {
                Binding::Number(v) => Some(v),
                _ => None,
            },
            ExprKind::Unary(UnOp::Neg, inner) => self.number(inner).map(|v| v.wrapping_neg()),
            ExprKind::Binary(op, a, b) => {
                let (x, y) = (self.number(a)?, self.number(b)?);
                match op {
                    BinOp::Add => x.checked_add(y),
                    BinOp::Sub => x.checked_sub(y),
                    BinOp::Mul => x.checked_mul(y),
                    BinOp::Div if y != 0 => Some(x.div_euclid(y)),
                    BinOp::Mod if y != 0 => Some(x.rem_euclid(y)),
                    BinOp::Shl if (0..127).contains(&y) => x.checked_shl(y as u32),
                    BinOp::Shr if (0..127).contains(&y) => Some(x >> y),
                    BinOp::BitAnd => Some(x & y),
                    BinOp::BitOr => Some(x | y),
                    BinOp::BitXor => Some(x ^ y),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// `e` as a value; `want` the type it meets where the checker left a number without a
    /// width. Calls inside it go to `pre`, in the order P4 evaluates them.
    fn value(&mut self, e: &'a Expr, want: Option<&IrTy>, pre: &mut Vec<IrStmt>) -> Result<IrExpr> {
        let recorded = self.type_of(e).ok().flatten();
        let numberless = matches!(self.checked.type_of(e), Some(Ty::Number));
        // A number without a width (however written: `(48 + 48) / 8`, a named `int`) is folded
        // exactly, then takes the type it meets.
        if let Some(v) = self.number(e) {
            let ty = recorded
                .or_else(|| want.cloned())
                .ok_or_else(|| Diagnostic::new(e.pos, "a number without a width, where nothing gives it one"))?;
            return Ok(constant(v as u128, ty));
        }
        if numberless {
            return Err(Diagnostic::new(e.pos, "a number that does not fold"));
        }
        match &e.kind {
            ExprKind::Int { width: Some((w, signed)), value } => {
                let ty = if *signed { IrTy::Int(*w) } else { IrTy::Bit(*w) };
                Ok(constant(*value, ty))
            }
            ExprKind::Int { width: None, .. } => unreachable!("folded above"),
            ExprKind::Bool(b) => Ok(IrExpr::Bool(*b)),
            ExprKind::Str(s) => Ok(IrExpr::Str(s.clone())),
            ExprKind::Name(n) | ExprKind::TopName(n) => {
                let b = if matches!(e.kind, ExprKind::TopName(_)) { self.global(n) } else { self.lookup(n) };
                match b {
                    Some(Binding::Var(v)) => Ok(IrExpr::Read(var_place(v, self.out.variables[v].ty.clone()))),
                    Some(Binding::Const(c)) => Ok(c),
                    _ => Err(Diagnostic::new(e.pos, format!("'{n}' is not a value the mid end knows"))),
                }
            }
            ExprKind::Member(inner, m) => self.member(e, inner, m, pre),
            ExprKind::Index(..) => Ok(IrExpr::Read(self.place(e, pre)?)),
            ExprKind::Slice(inner, hi, lo) => {
                let value = self.value(inner, None, pre)?;
                let (hi, lo) = self.bounds(hi, lo)?;
                Ok(fold(IrExpr::Slice { value: Box::new(value), hi, lo }))
            }
            ExprKind::Call { callee, type_args, args } => {
                if let ExprKind::Member(obj, m) = &callee.kind {
                    if m.text == "isValid" {
                        return Ok(IrExpr::IsValid(self.place(obj, pre)?));
                    }
                }
                // The checker refuses a `static_assert` that fails: one that compiles is true.
                if matches!(&callee.kind, ExprKind::Name(n) if n == "static_assert") {
                    return Ok(IrExpr::Bool(true));
                }
                let ty = self
                    .type_of(e)?
                    .ok_or_else(|| Diagnostic::new(e.pos, "a call that gives a number without a width"))?;
                let result = self.temporary(ty.clone());
                self.call(callee, type_args, args, Some(var_place(result, ty.clone())), e.pos, pre)?;
                Ok(IrExpr::Read(var_place(result, ty)))
            }
            ExprKind::Unary(op, inner) => {
                let ty = recorded.clone();
                let v = self.value(inner, want, pre)?;
                let ty = ty.or_else(|| want.cloned()).unwrap_or(IrTy::Bool);
                Ok(fold(match op {
                    UnOp::Not => IrExpr::Not(Box::new(v)),
                    UnOp::Complement => IrExpr::Complement(Box::new(v), ty),
                    UnOp::Neg => IrExpr::Negate(Box::new(v), ty),
                }))
            }
            ExprKind::Binary(op, a, b) => self.binary(e, *op, a, b, pre),
            ExprKind::Cond(c, a, b) => {
                let ty = recorded.or_else(|| want.cloned()).ok_or_else(|| {
                    Diagnostic::new(e.pos, "'?:' of numbers without a width, where nothing gives one")
                })?;
                let cond = self.value(c, Some(&IrTy::Bool), pre)?;
                let (mut pa, mut pb) = (Vec::new(), Vec::new());
                let then = self.value(a, Some(&ty), &mut pa)?;
                let otherwise = self.value(b, Some(&ty), &mut pb)?;
                if pa.is_empty() && pb.is_empty() {
                    return Ok(fold(IrExpr::Cond {
                        ty,
                        cond: Box::new(cond),
                        then: Box::new(then),
                        otherwise: Box::new(otherwise),
                    }));
                }
                // A call on one side runs only when that side is chosen.
                let t = self.temporary(ty.clone());
                pa.push(IrStmt::Assign { place: var_place(t, ty.clone()), value: then });
                pb.push(IrStmt::Assign { place: var_place(t, ty.clone()), value: otherwise });
                pre.push(IrStmt::If { cond, then: pa, otherwise: pb });
                Ok(IrExpr::Read(var_place(t, ty)))
            }
            ExprKind::Cast(t, inner) => {
                let to = self.ast_ty(t, e.pos)?;
                let v = self.value(inner, Some(&to), pre)?;
                Ok(fold(cast(v, &self.value_ty(inner, &to)?, &to)))
            }
            ExprKind::List(items) => {
                let ty = match want {
                    Some(t) => t.clone(),
                    None => IrTy::Tuple(
                        items
                            .iter()
                            .map(|i| self.type_of(i)?.ok_or_else(|| Diagnostic::new(i.pos, "give this a width")))
                            .collect::<Result<_>>()?,
                    ),
                };
                let item_tys: Vec<IrTy> = match &ty {
                    IrTy::Tuple(t) => t.clone(),
                    other => self.fields(other).iter().map(|(_, t)| t.clone()).collect(),
                };
                // Left to right: an item read before a later item's calls is kept as it was
                // then (`{h.a, set(h.a)}` gives the old `h.a` first, as BMv2 does).
                let mut lowered = Vec::new();
                let mut marks = Vec::new();
                for (i, t) in items.iter().zip(item_tys.iter()) {
                    lowered.push(self.value(i, Some(t), pre)?);
                    marks.push(pre.len());
                }
                for k in (0..lowered.len()).rev() {
                    let item = std::mem::replace(&mut lowered[k], IrExpr::Bool(false));
                    lowered[k] = self.keep_before(item, marks[k], pre);
                }
                Ok(IrExpr::Aggregate { ty, items: lowered })
            }
            ExprKind::DontCare => Err(Diagnostic::new(e.pos, "'_' is not a value")),
        }
    }

    /// The type `inner` has as a cast's operand: its own, or the cast's for a number without a width.
    fn value_ty(&self, inner: &Expr, to: &IrTy) -> Result<IrTy> {
        Ok(self.type_of(inner)?.unwrap_or_else(|| to.clone()))
    }

    fn bounds(&self, hi: &Expr, lo: &Expr) -> Result<(u32, u32)> {
        let fold_bound = |x: &Expr| -> Result<u32> {
            match self.number(x) {
                Some(v) => Ok(v as u32),
                None => match self.lookup_const(x) {
                    Some(v) => Ok(v as u32),
                    None => Err(Diagnostic::new(x.pos, "a slice's bound is a compile-time number")),
                },
            }
        };
        Ok((fold_bound(hi)?, fold_bound(lo)?))
    }

    /// A compile-time number written with a width (`8w3`, a named constant).
    fn lookup_const(&self, e: &Expr) -> Option<u128> {
        match &e.kind {
            ExprKind::Int { value, .. } => Some(*value),
            ExprKind::Name(n) => match self.lookup(n)? {
                Binding::Const(IrExpr::Const { value, .. }) => Some(value),
                Binding::Number(v) => Some(v as u128),
                _ => None,
            },
            _ => None,
        }
    }

    fn member(&mut self, e: &'a Expr, inner: &'a Expr, m: &Name, pre: &mut Vec<IrStmt>) -> Result<IrExpr> {
        if let ExprKind::Name(n) = &inner.kind {
            if n == "error" {
                let i = self.out.errors.iter().position(|x| *x == m.text).expect("a checked error");
                return Ok(IrExpr::Const { value: i as u128, ty: IrTy::Error });
            }
            if self.lookup(n).is_none() {
                if let Some(&i) = self.declared.enum_index.get(n) {
                    let k = self.out.enums[i].members.iter().position(|x| *x == m.text).expect("a checked member");
                    return Ok(IrExpr::Const { value: k as u128, ty: IrTy::Enum(i) });
                }
                if let Some(Layout::SerEnum(t, members)) = self.checked.layouts.get(n) {
                    let v = members.iter().find(|(x, _)| *x == m.text).map(|(_, v)| *v).expect("a checked member");
                    return Ok(constant(v, self.ir_ty(t, e.pos)?));
                }
            }
        }
        match self.checked.type_of(inner) {
            Some(Ty::Applied(_)) => {
                let ExprKind::Call { callee, .. } = &inner.kind else {
                    return Err(Diagnostic::new(inner.pos, "apply() of a table is read where it is called"));
                };
                let ExprKind::Member(table, _) = &callee.kind else { unreachable!("t.apply()") };
                let table = self.table_of(table)?;
                match m.text.as_str() {
                    "hit" | "miss" => {
                        let hit = self.temporary(IrTy::Bool);
                        pre.push(IrStmt::Apply { table, hit: Some(hit), action_run: None });
                        let read = IrExpr::Read(var_place(hit, IrTy::Bool));
                        Ok(if m.text == "hit" { read } else { IrExpr::Not(Box::new(read)) })
                    }
                    _ => Err(Diagnostic::new(m.pos, "action_run is read by a switch")),
                }
            }
            Some(Ty::Stack(_, n)) if m.text == "size" => Ok(constant(*n as u128, IrTy::Bit(32))),
            Some(Ty::Stack(..)) if m.text == "lastIndex" => {
                let mut p = self.place(inner, pre)?;
                p.steps.push(ir::Step::NextIndex);
                p.ty = IrTy::Bit(32);
                Ok(IrExpr::Binary {
                    op: BinaryOp::Sub,
                    ty: IrTy::Bit(32),
                    left: Box::new(IrExpr::Read(p)),
                    right: Box::new(constant(1, IrTy::Bit(32))),
                })
            }
            _ => Ok(IrExpr::Read(self.place(e, pre)?)),
        }
    }

    fn table_of(&self, e: &Expr) -> Result<usize> {
        match &e.kind {
            ExprKind::Name(n) => match self.lookup(n) {
                Some(Binding::Table(t)) => Ok(t),
                _ => Err(Diagnostic::new(e.pos, format!("'{n}' is not a table"))),
            },
            _ => Err(Diagnostic::new(e.pos, "a table is applied by its name")),
        }
    }

    /// Where `e` is kept. An index that a call computes is evaluated into `pre` first.
    fn place(&mut self, e: &'a Expr, pre: &mut Vec<IrStmt>) -> Result<Place> {
        match &e.kind {
            ExprKind::Name(n) | ExprKind::TopName(n) => match self.lookup(n) {
                Some(Binding::Var(v)) => Ok(var_place(v, self.out.variables[v].ty.clone())),
                _ => {
                    // A value that is not kept (a constant struct, a call's result): kept here.
                    let value = self.value(e, None, pre)?;
                    self.kept(value, e, pre)
                }
            },
            ExprKind::Member(inner, m) => {
                let mut p = self.place(inner, pre)?;
                match &p.ty {
                    IrTy::Stack(elem, _) => {
                        let elem = (**elem).clone();
                        match m.text.as_str() {
                            "next" => p.steps.push(ir::Step::Next),
                            "last" => p.steps.push(ir::Step::Last),
                            "nextIndex" => {
                                p.steps.push(ir::Step::NextIndex);
                                p.ty = IrTy::Bit(32);
                                return Ok(p);
                            }
                            other => return Err(Diagnostic::new(m.pos, format!("a stack's '{other}' is not kept"))),
                        }
                        p.ty = elem;
                        Ok(p)
                    }
                    ty => {
                        let fields = self.fields(ty);
                        let Some(i) = fields.iter().position(|(n, _)| *n == m.text) else {
                            return Err(Diagnostic::new(m.pos, format!("{ty} has no field '{}'", m.text)));
                        };
                        let t = fields[i].1.clone();
                        p.steps.push(ir::Step::Field(i));
                        p.ty = t;
                        Ok(p)
                    }
                }
            }
            ExprKind::Index(base, index) => {
                let mut p = self.place(base, pre)?;
                match p.ty.clone() {
                    IrTy::Tuple(items) => {
                        let i = self
                            .number(index)
                            .map(|v| v as usize)
                            .or_else(|| self.lookup_const(index).map(|v| v as usize))
                            .ok_or_else(|| Diagnostic::new(index.pos, "a tuple's index is a number"))?;
                        p.steps.push(ir::Step::Field(i));
                        p.ty = items[i].clone();
                        Ok(p)
                    }
                    IrTy::Stack(elem, _) => {
                        let i = self.value(index, Some(&IrTy::Bit(32)), pre)?;
                        let from = self.value_ty(index, &IrTy::Bit(32))?;
                        let i = fold(cast(i, &from, &IrTy::Bit(32)));
                        p.steps.push(ir::Step::Elem(Box::new(i)));
                        p.ty = *elem;
                        Ok(p)
                    }
                    other => Err(Diagnostic::new(base.pos, format!("[...] of {other}"))),
                }
            }
            _ => {
                let value = self.value(e, None, pre)?;
                self.kept(value, e, pre)
            }
        }
    }

    /// A value stored in a temporary, so that a member of it can be read.
    fn kept(&mut self, value: IrExpr, e: &Expr, pre: &mut Vec<IrStmt>) -> Result<Place> {
        let ty = self.type_of(e)?.ok_or_else(|| Diagnostic::new(e.pos, "a number is not kept"))?;
        let t = self.temporary(ty.clone());
        pre.push(IrStmt::Assign { place: var_place(t, ty.clone()), value });
        Ok(var_place(t, ty))
    }

    fn binary(&mut self, e: &Expr, op: BinOp, a: &'a Expr, b: &'a Expr, pre: &mut Vec<IrStmt>) -> Result<IrExpr> {
        if matches!(op, BinOp::And | BinOp::Or) {
            let left = self.value(a, Some(&IrTy::Bool), pre)?;
            let mut pb = Vec::new();
            let right = self.value(b, Some(&IrTy::Bool), &mut pb)?;
            if pb.is_empty() {
                let (l, r) = (Box::new(left), Box::new(right));
                return Ok(if op == BinOp::And { IrExpr::And(l, r) } else { IrExpr::Or(l, r) });
            }
            // The right side's calls run only when the left side does not decide.
            let t = self.temporary(IrTy::Bool);
            let tp = var_place(t, IrTy::Bool);
            pre.push(IrStmt::Assign { place: tp.clone(), value: left });
            pb.push(IrStmt::Assign { place: tp.clone(), value: right });
            let read = IrExpr::Read(tp);
            let cond = if op == BinOp::And { read.clone() } else { IrExpr::Not(Box::new(read.clone())) };
            pre.push(IrStmt::If { cond, then: pb, otherwise: Vec::new() });
            return Ok(read);
        }
        let (ta, tb) = (self.type_of(a)?, self.type_of(b)?);
        if let (None, None, Some(x), Some(y)) = (&ta, &tb, self.number(a), self.number(b)) {
            // A comparison of numbers without a width (`N > 2`): a compile-time bool.
            if let Some(b) = crate::frontend::check::compare(op, x, y) {
                return Ok(IrExpr::Bool(b));
            }
        }
        let want = match op {
            BinOp::Concat => None,
            BinOp::Shl | BinOp::Shr => ta.clone(),
            _ => ta.clone().or(tb),
        };
        let left = self.value(a, want.as_ref(), pre)?;
        self.binary_rest(e, op, left, ta.or(want), b, pre)
    }

    /// `left op b`, `left` lowered already (its type `ta`): `b` is lowered after it, and `left`
    /// kept in a temporary if `b`'s calls could change what it reads.
    fn binary_rest(
        &mut self,
        e: &Expr,
        op: BinOp,
        left: IrExpr,
        ta: Option<IrTy>,
        b: &'a Expr,
        pre: &mut Vec<IrStmt>,
    ) -> Result<IrExpr> {
        let mark = pre.len();
        let tb = self.type_of(b)?;
        if matches!(op, BinOp::Shl | BinOp::Shr) {
            let ty = ta.ok_or_else(|| Diagnostic::new(e.pos, "a shifted number needs a width"))?;
            let amount_ty = tb.unwrap_or(IrTy::Bit(32));
            let right = match self.number(b) {
                Some(v) if v >= 0 => constant(v.min(u32::MAX as i128) as u128, IrTy::Bit(32)),
                _ => self.value(b, Some(&amount_ty), pre)?,
            };
            let left = self.keep_before(left, mark, pre);
            let op = if op == BinOp::Shl { BinaryOp::Shl } else { BinaryOp::Shr };
            return Ok(fold(IrExpr::Binary { op, ty, left: Box::new(left), right: Box::new(right) }));
        }
        if op == BinOp::Concat {
            let right = self.value(b, None, pre)?;
            let left = self.keep_before(left, mark, pre);
            let ty = self.type_of(e)?.ok_or_else(|| Diagnostic::new(e.pos, "'++' of numbers"))?;
            return Ok(fold(IrExpr::Concat { ty, left: Box::new(left), right: Box::new(right) }));
        }
        // The operands' type: the one with a width, which a number without one takes.
        let ty = ta.or(tb).ok_or_else(|| Diagnostic::new(e.pos, "an operation on numbers without a width"))?;
        let right = self.value(b, Some(&ty), pre)?;
        let left = self.keep_before(left, mark, pre);
        let aggregate = matches!(
            ty,
            IrTy::Header(_) | IrTy::Struct(_) | IrTy::Union(_) | IrTy::Stack(..) | IrTy::Varbit(_) | IrTy::Tuple(_)
        );
        if aggregate {
            let eq = IrExpr::Equal { ty, left: Box::new(left), right: Box::new(right) };
            return match op {
                BinOp::Eq => Ok(eq),
                BinOp::Ne => Ok(IrExpr::Not(Box::new(eq))),
                _ => Err(Diagnostic::new(e.pos, "only == and != compare aggregates")),
            };
        }
        let op = match op {
            BinOp::Eq => BinaryOp::Eq,
            BinOp::Ne => BinaryOp::Ne,
            BinOp::Lt => BinaryOp::Lt,
            BinOp::Gt => BinaryOp::Gt,
            BinOp::Le => BinaryOp::Le,
            BinOp::Ge => BinaryOp::Ge,
            BinOp::BitOr => BinaryOp::Or,
            BinOp::BitXor => BinaryOp::Xor,
            BinOp::BitAnd => BinaryOp::And,
            BinOp::Add => BinaryOp::Add,
            BinOp::Sub => BinaryOp::Sub,
            BinOp::AddSat => BinaryOp::AddSat,
            BinOp::SubSat => BinaryOp::SubSat,
            BinOp::Mul => BinaryOp::Mul,
            BinOp::Div => BinaryOp::Div,
            BinOp::Mod => BinaryOp::Mod,
            BinOp::And | BinOp::Or | BinOp::Shl | BinOp::Shr | BinOp::Concat => unreachable!("handled above"),
        };
        Ok(fold(IrExpr::Binary { op, ty, left: Box::new(left), right: Box::new(right) }))
    }

    // ---- calls ----

    /// A call of an action, function, extern, table or sub-block; `result` gets what it returns.
    fn call(
        &mut self,
        callee: &'a Expr,
        type_args: &[Type],
        args: &'a [Expr],
        result: Option<Place>,
        pos: Pos,
        pre: &mut Vec<IrStmt>,
    ) -> Result<()> {
        match &callee.kind {
            ExprKind::Member(obj, m) => {
                match self.checked.type_of(obj) {
                    Some(Ty::Header(_) | Ty::Union(_)) if m.text == "isValid" => return Ok(()),
                    Some(Ty::Header(_)) if m.text == "setValid" || m.text == "setInvalid" => {
                        let header = self.place(obj, pre)?;
                        pre.push(IrStmt::SetValid { header, valid: m.text == "setValid" });
                        return Ok(());
                    }
                    Some(Ty::Stack(..)) if m.text == "push_front" || m.text == "pop_front" => {
                        let stack = self.place(obj, pre)?;
                        let count = self.number(&args[0]).ok_or_else(|| {
                            Diagnostic::new(args[0].pos, format!("{}'s count is a number without a width", m.text))
                        })? as u32;
                        pre.push(if m.text == "push_front" {
                            IrStmt::PushFront { stack, count }
                        } else {
                            IrStmt::PopFront { stack, count }
                        });
                        return Ok(());
                    }
                    Some(Ty::Table(_)) => {
                        let table = self.table_of(obj)?;
                        pre.push(IrStmt::Apply { table, hit: None, action_run: None });
                        return Ok(());
                    }
                    Some(Ty::Block(_)) => {
                        let ExprKind::Name(n) = &obj.kind else { unreachable!("a block instance by name") };
                        let b = match self.lookup(n) {
                            Some(Binding::Block(b)) => b,
                            // `Type.apply(...)`: the type applied directly. One instance in this
                            // control, shared by its direct applies, as the software target and
                            // P4Info have it (P4 would make one per place).
                            _ => {
                                let decl = self
                                    .block_decl(n)
                                    .ok_or_else(|| Diagnostic::new(obj.pos, format!("'{n}' is not a block")))?;
                                let path = format!("{}.{n}", self.path);
                                match self.out.blocks_code.iter().position(|b| b.name == path) {
                                    Some(b) => b,
                                    None => self.block(decl, path)?,
                                }
                            }
                        };
                        let params = self.out.blocks_code[b].params.clone();
                        let after = self.copies(&params, args, false, pre)?;
                        pre.push(IrStmt::ApplyBlock { block: b, after });
                        return Ok(());
                    }
                    _ => {}
                }
                let object = match &obj.kind {
                    ExprKind::Name(n) | ExprKind::TopName(n) => match self.lookup(n) {
                        Some(Binding::Instance(i)) => ir::ExternRef::Instance(i),
                        Some(Binding::Var(v)) => ir::ExternRef::Var(v),
                        _ => return Err(Diagnostic::new(obj.pos, format!("'{n}' is not an extern"))),
                    },
                    _ => return Err(Diagnostic::new(obj.pos, "an extern's method is called on its name")),
                };
                let params = self.extern_method_params(obj, &m.text, args.len())?;
                let (args, after) = self.extern_args(&params, args, pre)?;
                let type_args = type_args.iter().map(|t| self.ast_ty(t, pos)).collect::<Result<_>>()?;
                pre.push(IrStmt::Extern {
                    callee: ir::Callee::Method { object, method: m.text.clone() },
                    type_args,
                    args,
                    result,
                    at: pos,
                });
                pre.extend(after);
                Ok(())
            }
            ExprKind::Name(n) => {
                if n == "static_assert" {
                    return Ok(());
                }
                if let Some(action) = self.action_named(n)? {
                    let params = self.out.actions[action].params.clone();
                    let after = self.copies(&params, args, true, pre)?;
                    pre.push(IrStmt::CallAction { action, after });
                    return Ok(());
                }
                if let Some(f) = self.own_function(n) {
                    let index = self.function(f, args, type_args)?;
                    let params: Vec<(usize, Option<Direction>)> = self.out.functions[index]
                        .params
                        .iter()
                        .zip(&f.params)
                        .map(|(v, p)| (*v, p.direction))
                        .collect();
                    let after = self.copies(&params, args, false, pre)?;
                    pre.push(IrStmt::CallFunction { function: index, after });
                    if let (Some(place), Some(r)) = (result, self.out.functions[index].result) {
                        let ty = self.out.variables[r].ty.clone();
                        pre.push(IrStmt::Assign { place, value: IrExpr::Read(var_place(r, ty)) });
                    }
                    return Ok(());
                }
                let params = self.extern_function_params(n, args.len())?;
                let (args, after) = self.extern_args(&params, args, pre)?;
                let type_args = type_args.iter().map(|t| self.ast_ty(t, pos)).collect::<Result<_>>()?;
                pre.push(IrStmt::Extern { callee: ir::Callee::Function(n.clone()), type_args, args, result, at: pos });
                pre.extend(after);
                Ok(())
            }
            _ => Err(Diagnostic::new(pos, "this cannot be called")),
        }
    }

    /// Copies in before a call (into `pre`) and the copies out after it (returned). Arguments
    /// are evaluated left to right, once each: a place written back is computed before the call
    /// (its indices kept), a value read before a later argument's call is kept as it was then,
    /// and only then are the parameters set, so that a call in an argument (`f(1, f(2, 3))`)
    /// cannot overwrite the parameters of the call it is an argument of. `in` and parameters
    /// without a direction get the argument's value, `inout` both ways; `out` starts as P4
    /// leaves it (Init) in a function or a block, and, in an action, with the argument's value
    /// (what the software target has always done).
    fn copies(
        &mut self,
        params: &[(usize, Option<Direction>)],
        args: &'a [Expr],
        out_gets_value: bool,
        pre: &mut Vec<IrStmt>,
    ) -> Result<Vec<IrStmt>> {
        let mut ins: Vec<(usize, IrExpr, usize)> = Vec::new();
        let mut inits = Vec::new();
        let mut outs: Vec<(usize, Target)> = Vec::new();
        for ((v, dir), arg) in params.iter().zip(args) {
            let ty = self.out.variables[*v].ty.clone();
            match dir {
                Some(Direction::Out) if matches!(arg.kind, ExprKind::DontCare) => inits.push(*v),
                Some(Direction::Out | Direction::InOut) => {
                    let t = self.target(arg, true, pre)?;
                    if dir == &Some(Direction::InOut) || out_gets_value {
                        ins.push((*v, t.read(), pre.len()));
                    } else {
                        inits.push(*v);
                    }
                    outs.push((*v, t));
                }
                _ => {
                    // An extern handed on (packet_in, a counter) stands for the caller's.
                    let want = if matches!(ty, IrTy::Opaque(_)) { None } else { Some(ty) };
                    let value = self.value(arg, want.as_ref(), pre)?;
                    ins.push((*v, value, pre.len()));
                }
            }
        }
        for i in (0..ins.len()).rev() {
            let (_, value, mark) = &ins[i];
            let kept = self.keep_before(value.clone(), *mark, pre);
            ins[i].1 = kept;
        }
        for (v, value, _) in ins {
            let ty = self.out.variables[v].ty.clone();
            pre.push(IrStmt::Assign { place: var_place(v, ty), value });
        }
        for v in inits {
            let ty = self.out.variables[v].ty.clone();
            pre.push(IrStmt::Init(var_place(v, ty)));
        }
        Ok(outs
            .into_iter()
            .map(|(v, t)| {
                let ty = self.out.variables[v].ty.clone();
                t.write(IrExpr::Read(var_place(v, ty)))
            })
            .collect())
    }

    /// `value`, read at `mark` in `pre`: when statements after `mark` (a later operand's or
    /// argument's calls) could change what it reads, it is kept in a temporary there.
    fn keep_before(&mut self, value: IrExpr, mark: usize, pre: &mut Vec<IrStmt>) -> IrExpr {
        if pre.len() <= mark || matches!(value, IrExpr::Const { .. } | IrExpr::Bool(_) | IrExpr::Str(_)) {
            return value;
        }
        let ty = expr_ty(&value);
        let t = self.temporary(ty.clone());
        pre.insert(mark, IrStmt::Assign { place: var_place(t, ty.clone()), value });
        IrExpr::Read(var_place(t, ty))
    }

    /// An extern's arguments, evaluated left to right as `copies` evaluates them; what is
    /// written to a slice goes through a temporary, copied after the call (the second list).
    fn extern_args(
        &mut self,
        params: &[Param],
        args: &'a [Expr],
        pre: &mut Vec<IrStmt>,
    ) -> Result<(Vec<CallArg>, Vec<IrStmt>)> {
        let mut after = Vec::new();
        let mut out = Vec::new();
        let mut marks = Vec::new();
        for (p, a) in params.iter().zip(args) {
            out.push(match p.direction {
                Some(Direction::Out) if matches!(a.kind, ExprKind::DontCare) => CallArg::Discard,
                Some(Direction::Out | Direction::InOut) => {
                    let t = self.target(a, true, pre)?;
                    let through = if t.bits.is_some() {
                        let ty = t.ty();
                        let temp = var_place(self.temporary(ty.clone()), ty);
                        pre.push(IrStmt::Assign { place: temp.clone(), value: t.read() });
                        after.push(t.write(IrExpr::Read(temp.clone())));
                        temp
                    } else {
                        t.place
                    };
                    if p.direction == Some(Direction::Out) {
                        CallArg::Out(through)
                    } else {
                        CallArg::InOut(through)
                    }
                }
                _ => {
                    let want = self.param_ty(&p.ty);
                    CallArg::In(self.value(a, want.as_ref(), pre)?)
                }
            });
            marks.push(pre.len());
        }
        for i in (0..out.len()).rev() {
            if let CallArg::In(value) = &out[i] {
                let kept = self.keep_before(value.clone(), marks[i], pre);
                out[i] = CallArg::In(kept);
            }
        }
        Ok((out, after))
    }

    /// A parameter's type where it names no type parameter (what a number argument takes).
    fn param_ty(&self, t: &Type) -> Option<IrTy> {
        match t {
            Type::Bit(w) => Some(IrTy::Bit(*w)),
            Type::Int(w) => Some(IrTy::Int(*w)),
            Type::Bool => Some(IrTy::Bool),
            Type::Named(..) => self.ast_ty(t, Pos::default()).ok().filter(|t| !matches!(t, IrTy::Opaque(_))),
            _ => None,
        }
    }

    fn extern_method_params(&self, obj: &Expr, method: &str, n: usize) -> Result<Vec<Param>> {
        let ty = match self.checked.type_of(obj) {
            Some(Ty::Extern(name, _)) => name.clone(),
            other => return Err(Diagnostic::new(obj.pos, format!("a method of {other:?}"))),
        };
        for d in &self.program.decls {
            if let Decl::ExternObject { name, methods, .. } = d {
                if name.text == ty {
                    if let Some(m) =
                        methods.iter().find(|m| m.ret.is_some() && m.name.text == method && m.params.len() == n)
                    {
                        return Ok(m.params.clone());
                    }
                }
            }
        }
        Err(Diagnostic::new(obj.pos, format!("{ty} has no method '{method}'")))
    }

    fn extern_function_params(&self, name: &str, n: usize) -> Result<Vec<Param>> {
        for d in &self.program.decls {
            if let Decl::ExternFunction(m) = d {
                if m.name.text == name && m.params.len() == n {
                    return Ok(m.params.clone());
                }
            }
        }
        Err(Diagnostic::new(Pos::default(), format!("no extern function '{name}'")))
    }

    fn own_function(&self, name: &str) -> Option<&'a Function> {
        self.program.decls.iter().find_map(|d| match d {
            Decl::Function(f) if f.name.text == name => Some(f),
            _ => None,
        })
    }

    /// A function instance for these arguments' types (a generic function gets one per binding).
    fn function(&mut self, f: &'a Function, args: &[Expr], type_args: &[Type]) -> Result<usize> {
        let mut bind = HashMap::new();
        for (p, t) in f.type_params.iter().zip(type_args) {
            bind.insert(p.text.clone(), self.ast_ty(t, p.pos)?);
        }
        for (p, a) in f.params.iter().zip(args) {
            if let Type::Named(n, _) = &p.ty {
                if f.type_params.iter().any(|t| t.text == n.text) && !bind.contains_key(&n.text) {
                    if let Some(t) = self.type_of(a)? {
                        bind.insert(n.text.clone(), t);
                    }
                }
            }
        }
        let mut key: Vec<String> = bind.iter().map(|(k, v)| format!("{k}={v}")).collect();
        key.sort();
        let key = format!("{}<{}>", f.name.text, key.join(","));
        if let Some(i) = self.function_instances.get(&key) {
            return Ok(*i);
        }
        let saved_scopes = std::mem::take(&mut self.scopes);
        let saved_bind = std::mem::replace(&mut self.bind, bind);
        let saved_path = std::mem::replace(&mut self.path, f.name.text.clone());
        let saved_result = self.result.take();
        let lowered = self.function_body(f, &key);
        self.scopes = saved_scopes;
        self.bind = saved_bind;
        self.path = saved_path;
        self.result = saved_result;
        lowered
    }

    fn function_body(&mut self, f: &'a Function, key: &str) -> Result<usize> {
        self.scopes.push(HashMap::new());
        let mut params = Vec::new();
        for p in &f.params {
            let ty = self.ast_ty(&p.ty, p.name.pos)?;
            let v = self.variable(format!("{}.{}", f.name.text, p.name.text), ty);
            self.declare(&p.name.text, Binding::Var(v));
            params.push(v);
        }
        let result = match &f.ret {
            Type::Void => None,
            t => {
                let ty = self.ast_ty(t, f.name.pos)?;
                Some(self.variable(format!("{}.$result", f.name.text), ty))
            }
        };
        self.result = result;
        let index = self.out.functions.len();
        self.out.functions.push(ir::Function {
            name: key.to_string(),
            params,
            result,
            body: Vec::new(),
            pos: f.name.pos,
        });
        self.function_instances.insert(key.to_string(), index);
        let body = self.stmts(&f.body)?;
        self.out.functions[index].body = body;
        Ok(index)
    }

    fn action_named(&mut self, name: &str) -> Result<Option<usize>> {
        if let Some(Binding::Action(a)) = self.scopes.iter().rev().find_map(|s| s.get(name)) {
            return Ok(Some(*a));
        }
        if let Some(a) = self.global_actions.get(name) {
            return Ok(Some(*a));
        }
        let Some(decl) = self.program.decls.iter().find_map(|d| match d {
            Decl::Action(a) if a.name.text == name => Some(a),
            _ => None,
        }) else {
            return Ok(None);
        };
        // A top-level action reads only its parameters and the program's globals.
        let saved_scopes = std::mem::take(&mut self.scopes);
        let saved_path = std::mem::take(&mut self.path);
        let lowered = self.action(decl, name.to_string());
        self.scopes = saved_scopes;
        self.path = saved_path;
        let index = lowered?;
        self.global_actions.insert(name.to_string(), index);
        Ok(Some(index))
    }

    fn action(&mut self, a: &'a Action, name: String) -> Result<usize> {
        self.scopes.push(HashMap::new());
        let mut params = Vec::new();
        for p in &a.params {
            let ty = self.ast_ty(&p.ty, p.name.pos)?;
            let v = self.variable(format!("{name}.{}", p.name.text), ty);
            self.declare(&p.name.text, Binding::Var(v));
            params.push((v, p.direction));
        }
        let bound = a.params.iter().take_while(|p| p.direction.is_some()).count();
        let index = self.out.actions.len();
        self.out.actions.push(ir::Action { name: name.clone(), params, bound, body: Vec::new(), pos: a.name.pos });
        // Its locals are the action's: named under it.
        let saved_path = std::mem::replace(&mut self.path, name);
        let body = self.stmts(&a.body);
        self.path = saved_path;
        self.scopes.pop();
        self.out.actions[index].body = body?;
        Ok(index)
    }

    // ---- tables ----

    fn table(&mut self, t: &'a Table) -> Result<usize> {
        let name = format!("{}.{}", self.path, t.name.text);
        let mut keys = Vec::new();
        for k in &t.keys {
            let mut pre = Vec::new();
            let value = self.value(&k.expr, None, &mut pre)?;
            if !pre.is_empty() {
                return Err(Diagnostic::new(k.expr.pos, "a table key that calls something"));
            }
            let key_name = annotation_str(&k.annotations, "name").map(str::to_string).unwrap_or_else(|| text(&k.expr));
            keys.push(ir::TableKey { value, match_kind: k.match_kind.text.clone(), name: key_name });
        }
        let key_tys: Vec<IrTy> = keys.iter().map(|k| expr_ty(&k.value)).collect();
        let mut actions = Vec::new();
        for r in &t.actions {
            let action = self
                .action_named(&r.name.text)?
                .ok_or_else(|| Diagnostic::new(r.name.pos, format!("no action '{}'", r.name.text)))?;
            let params = self.out.actions[action].params.clone();
            let mut pre = Vec::new();
            let mut bound = Vec::new();
            for (arg, (v, direction)) in r.args.iter().zip(&params) {
                let ty = self.out.variables[*v].ty.clone();
                bound.push(match direction {
                    Some(Direction::Out) => CallArg::Out(self.place(arg, &mut pre)?),
                    Some(Direction::InOut) => CallArg::InOut(self.place(arg, &mut pre)?),
                    _ => CallArg::In(self.value(arg, Some(&ty), &mut pre)?),
                });
            }
            if !pre.is_empty() {
                return Err(Diagnostic::new(r.name.pos, "an action's bound argument that calls something"));
            }
            actions.push(ir::TableAction { action, bound });
        }
        let (default_action, default_const) = match &t.default_action {
            Some((r, is_const)) => (self.action_data(r)?, *is_const),
            None => {
                let no_action = self
                    .action_named("NoAction")?
                    .ok_or_else(|| Diagnostic::new(t.name.pos, "no NoAction for a table without a default"))?;
                ((no_action, Vec::new()), false)
            }
        };
        let mut entries = Vec::new();
        for (i, e) in t.entries.iter().enumerate() {
            let keys = self.keysets(&e.keys, &key_tys)?;
            let (action, args) = self.action_data(&e.action)?;
            let p4_priority = e.priority.map_or(i as i64 + 1, |p| p.min(i64::MAX as u128 / 2) as i64);
            entries.push(ir::TableEntry { keys, action, args, priority: p4_priority });
        }
        let size = match &t.size {
            Some(s) => Some(
                self.number(s)
                    .map(|v| v as u128)
                    .or_else(|| self.lookup_const(s))
                    .ok_or_else(|| Diagnostic::new(s.pos, "a table's size is a number"))?,
            ),
            None => None,
        };
        let mut properties = Vec::new();
        for (p, v) in &t.properties {
            let instance = match &v.kind {
                ExprKind::Name(n) => match self.lookup(n) {
                    Some(Binding::Instance(i)) => i,
                    _ => n.clone(),
                },
                // An extern constructed in the property (`implementation = action_selector(...)`)
                // is an instance under the table's name, as p4c moves it out of the table.
                ExprKind::Call { callee, type_args, args } => match &callee.kind {
                    ExprKind::Name(ty) => {
                        let annotations = t.property_annotations.iter().find(|(q, _)| *q == p.text);
                        let annotations =
                            annotations.map_or(Vec::new(), |(_, a)| super::lower::numbered_annotations(a));
                        self.constructed(&name, ty, type_args, args, annotations, v.pos)?;
                        name.clone()
                    }
                    _ => text(v),
                },
                _ => text(v),
            };
            properties.push((p.text.clone(), instance));
        }
        self.out.tables.push(ir::Table {
            name,
            keys,
            actions,
            default_action,
            default_const,
            entries,
            entries_const: t.entries_const,
            size,
            properties,
            pos: t.name.pos,
        });
        Ok(self.out.tables.len() - 1)
    }

    /// An action named with its data (constants), the arguments a list binds left out.
    fn action_data(&mut self, r: &'a ActionRef) -> Result<(usize, Vec<IrExpr>)> {
        let action = self
            .action_named(&r.name.text)?
            .ok_or_else(|| Diagnostic::new(r.name.pos, format!("no action '{}'", r.name.text)))?;
        let a = self.out.actions[action].clone();
        let data: Vec<usize> = a.params[a.bound..].iter().map(|(v, _)| *v).collect();
        let given = if r.args.len() == a.params.len() { &r.args[a.bound..] } else { &r.args[..] };
        let mut pre = Vec::new();
        let mut args = Vec::new();
        for (arg, v) in given.iter().zip(data) {
            let ty = self.out.variables[v].ty.clone();
            args.push(self.value(arg, Some(&ty), &mut pre)?);
        }
        if !pre.is_empty() {
            return Err(Diagnostic::new(r.name.pos, "an action's data that calls something"));
        }
        Ok((action, args))
    }

    /// A select case's or an entry's keysets, as constants of the keys' types.
    fn keysets(&mut self, keys: &'a [Keyset], tys: &[IrTy]) -> Result<Vec<ir::Keyset>> {
        if keys.len() == 1 && matches!(keys[0], Keyset::Default | Keyset::DontCare) {
            return Ok(vec![ir::Keyset::Any; tys.len().max(1)]);
        }
        // A value set is the case's whole keyset: its members match all the select's fields.
        if let [Keyset::Value(Expr { kind: ExprKind::Name(n), .. })] = keys {
            if let Some(Binding::ValueSet(set)) = self.lookup(n) {
                return Ok(vec![ir::Keyset::ValueSet(set)]);
            }
        }
        keys.iter()
            .zip(tys)
            .map(|(k, t)| {
                Ok(match k {
                    Keyset::Default | Keyset::DontCare => ir::Keyset::Any,
                    Keyset::Value(e) => ir::Keyset::Value(self.key_constant(e, t)?),
                    Keyset::Mask(v, m) => ir::Keyset::Mask(self.key_constant(v, t)?, self.key_constant(m, t)?),
                    Keyset::Range(a, b) => ir::Keyset::Range(self.key_constant(a, t)?, self.key_constant(b, t)?),
                })
            })
            .collect()
    }

    fn key_constant(&mut self, e: &'a Expr, ty: &IrTy) -> Result<u128> {
        let mut pre = Vec::new();
        match self.value(e, Some(ty), &mut pre)? {
            IrExpr::Const { value, .. } if pre.is_empty() => Ok(value),
            IrExpr::Bool(b) if pre.is_empty() => Ok(b as u128),
            _ => Err(Diagnostic::new(e.pos, "a key's value is a compile-time constant")),
        }
    }

    /// `e` as somewhere to write: its place, and the bits of it a slice (or a slice of a
    /// slice) names. With `freeze`, the place's indices are computed now, into temporaries, so
    /// that a write after a call goes where the place was when it was evaluated.
    fn target(&mut self, e: &'a Expr, freeze: bool, pre: &mut Vec<IrStmt>) -> Result<Target> {
        if let ExprKind::Slice(inner, hi, lo) = &e.kind {
            let (hi, lo) = self.bounds(hi, lo)?;
            let mut t = self.target(inner, freeze, pre)?;
            t.bits = Some(match t.bits {
                None => (hi, lo),
                Some((_, base)) => (base + hi, base + lo),
            });
            return Ok(t);
        }
        let mut place = self.place(e, pre)?;
        if freeze {
            self.freeze_at(&mut place, pre.len(), pre);
        }
        Ok(Target { place, bits: None })
    }

    /// The place's indices that are not constants, computed at `mark` in `pre`.
    fn freeze_at(&mut self, place: &mut Place, mark: usize, pre: &mut Vec<IrStmt>) {
        let mut at = mark;
        for step in &mut place.steps {
            if let ir::Step::Elem(index) = step {
                if !matches!(**index, IrExpr::Const { .. }) {
                    let t = self.temporary(IrTy::Bit(32));
                    pre.insert(at, IrStmt::Assign { place: var_place(t, IrTy::Bit(32)), value: (**index).clone() });
                    at += 1;
                    **index = IrExpr::Read(var_place(t, IrTy::Bit(32)));
                }
            }
        }
    }

    // ---- statements ----

    fn stmts(&mut self, stmts: &'a [Stmt]) -> Result<Vec<IrStmt>> {
        self.scopes.push(HashMap::new());
        let mut out = Vec::new();
        let r = stmts.iter().try_for_each(|s| self.stmt(s, &mut out));
        self.scopes.pop();
        r.map(|_| out)
    }

    fn stmt(&mut self, s: &'a Stmt, out: &mut Vec<IrStmt>) -> Result<()> {
        let at = match s {
            Stmt::Assign { target: e, .. } | Stmt::Call(e) | Stmt::If { cond: e, .. } => Some(e.pos),
            Stmt::Var { name, .. } => Some(name.pos),
            Stmt::Switch { pos, .. }
            | Stmt::For { pos, .. }
            | Stmt::Return(pos)
            | Stmt::ReturnValue(_, pos)
            | Stmt::Exit(pos)
            | Stmt::Break(pos)
            | Stmt::Continue(pos) => Some(*pos),
            Stmt::Block(_) | Stmt::Const { .. } | Stmt::Empty => None,
        };
        out.extend(at.map(IrStmt::At));
        match s {
            Stmt::Assign { target, value } => {
                // P4 evaluates the left side first; a call on the right that changes what an
                // index reads must not move the write.
                let mut t = self.target(target, false, out)?;
                let mark = out.len();
                let value = match &value.kind {
                    // `a op= b`, which the parser wrote as `a = a op b` with `a` cloned (same
                    // place in the source): `a` is evaluated once.
                    ExprKind::Binary(op, l, r) if **l == *target && !matches!(op, BinOp::And | BinOp::Or) => {
                        let ty = t.ty();
                        self.binary_rest(value, *op, t.read(), Some(ty), r, out)?
                    }
                    _ => {
                        let want = self.type_of(target)?;
                        self.value(value, want.as_ref(), out)?
                    }
                };
                if out.len() > mark {
                    self.freeze_at(&mut t.place, mark, out);
                }
                out.push(t.write(value));
                Ok(())
            }
            Stmt::Call(e) => {
                let ExprKind::Call { callee, type_args, args } = &e.kind else {
                    return Err(Diagnostic::new(e.pos, "a statement that is not a call"));
                };
                self.call(callee, type_args, args, None, e.pos, out)
            }
            Stmt::If { cond, then, otherwise } => {
                let cond = self.value(cond, Some(&IrTy::Bool), out)?;
                let then = self.stmts(then)?;
                let otherwise = match otherwise {
                    Some(o) => self.stmts(o)?,
                    None => Vec::new(),
                };
                out.push(IrStmt::If { cond, then, otherwise });
                Ok(())
            }
            Stmt::Block(b) => {
                let b = self.stmts(b)?;
                out.extend(b);
                Ok(())
            }
            Stmt::Switch { expr, cases, pos } => self.switch(expr, cases, *pos, out),
            Stmt::Var { ty, name, init } => self.var(ty, name, init.as_ref(), out),
            Stmt::Const { ty, name, value } => self.constant(ty, name, value),
            Stmt::Return(_) => {
                out.push(IrStmt::Return);
                Ok(())
            }
            Stmt::ReturnValue(e, pos) => {
                let r = self.result.ok_or_else(|| Diagnostic::new(*pos, "'return' with a value outside a function"))?;
                let ty = self.out.variables[r].ty.clone();
                let value = self.value(e, Some(&ty), out)?;
                out.push(IrStmt::Assign { place: var_place(r, ty), value });
                out.push(IrStmt::Return);
                Ok(())
            }
            Stmt::Exit(_) => {
                out.push(IrStmt::Exit);
                Ok(())
            }
            Stmt::For { init, cond, update, body, .. } => {
                self.scopes.push(HashMap::new());
                let r = (|| {
                    for s in init {
                        self.stmt(s, out)?;
                    }
                    let mut pre = Vec::new();
                    let cond = match cond {
                        Some(c) => Some(self.value(c, Some(&IrTy::Bool), &mut pre)?),
                        None => None,
                    };
                    let mut upd = Vec::new();
                    for s in update {
                        self.stmt(s, &mut upd)?;
                    }
                    let mut body = self.stmts(body)?;
                    if !pre.is_empty() {
                        // A condition that calls something runs its calls on every pass: it
                        // becomes the body's first statements and a `break`.
                        let cond = cond.expect("statements come from a condition");
                        pre.push(IrStmt::If {
                            cond: IrExpr::Not(Box::new(cond)),
                            then: vec![IrStmt::Break],
                            otherwise: Vec::new(),
                        });
                        pre.append(&mut body);
                        out.push(IrStmt::Loop { cond: None, body: pre, update: upd });
                        return Ok(());
                    }
                    out.push(IrStmt::Loop { cond, body, update: upd });
                    Ok(())
                })();
                self.scopes.pop();
                r
            }
            Stmt::Break(_) => {
                out.push(IrStmt::Break);
                Ok(())
            }
            Stmt::Continue(_) => {
                out.push(IrStmt::Continue);
                Ok(())
            }
            Stmt::Empty => Ok(()),
        }
    }

    /// `switch (t.apply().action_run)`: the apply, then a chain of ifs on the action's number;
    /// labels without a body share the next one's.
    #[allow(clippy::type_complexity)]
    fn switch(
        &mut self,
        expr: &'a Expr,
        cases: &'a [(Vec<Name>, Option<Vec<Stmt>>)],
        pos: Pos,
        out: &mut Vec<IrStmt>,
    ) -> Result<()> {
        let ExprKind::Member(applied, _) = &expr.kind else {
            return Err(Diagnostic::new(pos, "switch takes t.apply().action_run"));
        };
        let ExprKind::Call { callee, .. } = &applied.kind else {
            return Err(Diagnostic::new(pos, "switch takes t.apply().action_run"));
        };
        let ExprKind::Member(table, _) = &callee.kind else { unreachable!("t.apply()") };
        let table = self.table_of(table)?;
        let run = self.temporary(IrTy::Bit(32));
        out.push(IrStmt::Apply { table, hit: None, action_run: Some(run) });
        let mut arms: Vec<(Option<IrExpr>, Vec<IrStmt>)> = Vec::new();
        let mut labels: Vec<usize> = Vec::new();
        let mut default = false;
        for (names, body) in cases {
            for n in names {
                if n.text == "default" {
                    default = true;
                } else {
                    let a = self
                        .action_named(&n.text)?
                        .ok_or_else(|| Diagnostic::new(n.pos, format!("no action '{}'", n.text)))?;
                    labels.push(a);
                }
            }
            let Some(body) = body else { continue };
            let body = self.stmts(body)?;
            let cond = if default {
                None
            } else {
                labels
                    .drain(..)
                    .map(|a| IrExpr::Binary {
                        op: BinaryOp::Eq,
                        ty: IrTy::Bit(32),
                        left: Box::new(IrExpr::Read(var_place(run, IrTy::Bit(32)))),
                        right: Box::new(constant(a as u128, IrTy::Bit(32))),
                    })
                    .reduce(|a, b| IrExpr::Or(Box::new(a), Box::new(b)))
            };
            labels.clear();
            arms.push((cond, body));
            if default {
                break;
            }
        }
        let mut chain: Vec<IrStmt> = Vec::new();
        for (cond, body) in arms.into_iter().rev() {
            chain = match cond {
                None => body,
                Some(c) => vec![IrStmt::If { cond: c, then: body, otherwise: chain }],
            };
        }
        out.extend(chain);
        Ok(())
    }

    // ---- parsers ----

    fn states(&mut self, states: &'a [State]) -> Result<Vec<ir::State>> {
        let index: HashMap<&str, usize> = states.iter().enumerate().map(|(i, s)| (s.name.text.as_str(), i)).collect();
        let next = |n: &Name| match n.text.as_str() {
            "accept" => ir::Next::Accept,
            "reject" => ir::Next::Reject,
            other => ir::Next::State(index[other]),
        };
        let mut out = Vec::new();
        for s in states {
            self.scopes.push(HashMap::new());
            let lowered = (|| {
                let mut body = Vec::new();
                for st in &s.body {
                    self.stmt(st, &mut body)?;
                }
                let transition = match &s.transition {
                    Transition::Goto(n) => ir::Transition::Goto(next(n)),
                    Transition::Select { exprs, cases } => {
                        let mut keys = Vec::new();
                        for e in exprs {
                            keys.push(self.value(e, None, &mut body)?);
                        }
                        let tys: Vec<IrTy> = keys.iter().map(expr_ty).collect();
                        let cases = cases
                            .iter()
                            .map(|c| Ok((self.keysets(&c.keys, &tys)?, next(&c.next))))
                            .collect::<Result<Vec<_>>>()?;
                        ir::Transition::Select { keys, cases }
                    }
                };
                Ok(ir::State { name: s.name.text.clone(), body, transition, pos: s.name.pos })
            })();
            self.scopes.pop();
            out.push(lowered?);
        }
        Ok(out)
    }
}

/// Where an assignment or a copy-out writes: a place, and the bits of it a slice names.
struct Target {
    place: Place,
    bits: Option<(u32, u32)>,
}

impl Target {
    fn ty(&self) -> IrTy {
        match self.bits {
            Some((hi, lo)) => IrTy::Bit(hi - lo + 1),
            None => self.place.ty.clone(),
        }
    }

    fn read(&self) -> IrExpr {
        match self.bits {
            Some((hi, lo)) => IrExpr::Slice { value: Box::new(IrExpr::Read(self.place.clone())), hi, lo },
            None => IrExpr::Read(self.place.clone()),
        }
    }

    /// `target = value`; a slice as `x = (x & ~m) | ((value as x's type) << l & m)`.
    fn write(&self, value: IrExpr) -> IrStmt {
        let place = self.place.clone();
        let Some((hi, lo)) = self.bits else { return IrStmt::Assign { place, value } };
        let ty = place.ty.clone();
        let w = width(&ty).unwrap_or(0);
        let widened = fold(cast(value, &IrTy::Bit(hi - lo + 1), &ty));
        let m = (mask(hi - lo + 1) << lo) & mask(w);
        let cleared = IrExpr::Binary {
            op: BinaryOp::And,
            ty: ty.clone(),
            left: Box::new(IrExpr::Read(place.clone())),
            right: Box::new(constant(!m, ty.clone())),
        };
        let shifted = if lo == 0 {
            widened
        } else {
            fold(IrExpr::Binary {
                op: BinaryOp::Shl,
                ty: ty.clone(),
                left: Box::new(widened),
                right: Box::new(constant(lo as u128, IrTy::Bit(32))),
            })
        };
        let moved = fold(IrExpr::Binary {
            op: BinaryOp::And,
            ty: ty.clone(),
            left: Box::new(shifted),
            right: Box::new(constant(m, ty.clone())),
        });
        let value = IrExpr::Binary { op: BinaryOp::Or, ty, left: Box::new(cleared), right: Box::new(moved) };
        IrStmt::Assign { place, value }
    }
}

/// The P4 text of a key (P4Info's name for a key without `@name`).
fn text(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Name(n) => n.clone(),
        ExprKind::TopName(n) => format!(".{n}"),
        ExprKind::Member(b, m) => format!("{}.{}", text(b), m.text),
        ExprKind::Index(b, i) => format!("{}[{}]", text(b), text(i)),
        ExprKind::Slice(b, h, l) => format!("{}[{}:{}]", text(b), text(h), text(l)),
        ExprKind::Int { value, .. } => value.to_string(),
        ExprKind::Call { callee, .. } => format!("{}()", text(callee)),
        _ => "expression".into(),
    }
}

pub(super) fn var_place(var: usize, ty: IrTy) -> Place {
    Place { var, steps: Vec::new(), ty }
}

fn width(t: &IrTy) -> Option<u32> {
    match t {
        IrTy::Bit(w) | IrTy::Int(w) => Some(*w),
        _ => None,
    }
}

/// A constant of `ty`, cut to its width (a negative number becomes its two's complement).
fn constant(v: u128, ty: IrTy) -> IrExpr {
    match ty {
        IrTy::Bool => IrExpr::Bool(v != 0),
        IrTy::Bit(w) | IrTy::Int(w) => IrExpr::Const { value: v & mask(w), ty },
        _ => IrExpr::Const { value: v, ty },
    }
}

/// The cast from `from` to `to`, spelled out: width first (in `from`'s signedness), then sign.
fn cast(v: IrExpr, from: &IrTy, to: &IrTy) -> IrExpr {
    let c = |cast, to: &IrTy, value| IrExpr::Cast { cast, to: to.clone(), value: Box::new(value) };
    match (from, to) {
        _ if from == to => v,
        (IrTy::Bool, IrTy::Bit(_)) => c(ir::Cast::FromBool, to, v),
        (IrTy::Bit(_), IrTy::Bool) => c(ir::Cast::ToBool, to, v),
        (IrTy::Bit(a), IrTy::Bit(b)) | (IrTy::Int(a), IrTy::Int(b)) => {
            let kind = if b < a {
                ir::Cast::Truncate
            } else if matches!(from, IrTy::Int(_)) {
                ir::Cast::SignExtend
            } else {
                ir::Cast::ZeroExtend
            };
            c(kind, to, v)
        }
        (IrTy::Bit(a), IrTy::Int(b)) | (IrTy::Int(a), IrTy::Bit(b)) => {
            let same_sign = if matches!(from, IrTy::Int(_)) { IrTy::Int(*b) } else { IrTy::Bit(*b) };
            let resized = if a == b { v } else { cast(v, from, &same_sign) };
            c(ir::Cast::Reinterpret, to, resized)
        }
        _ => v,
    }
}

/// The type of a lowered expression.
pub(crate) fn expr_ty(e: &IrExpr) -> IrTy {
    match e {
        IrExpr::Const { ty, .. } => ty.clone(),
        IrExpr::Bool(_) | IrExpr::IsValid(_) | IrExpr::Not(_) | IrExpr::And(..) | IrExpr::Or(..) => IrTy::Bool,
        IrExpr::Equal { .. } => IrTy::Bool,
        IrExpr::Str(_) => IrTy::Opaque("string".into()),
        IrExpr::Read(p) => p.ty.clone(),
        IrExpr::Complement(_, t) | IrExpr::Negate(_, t) => t.clone(),
        IrExpr::Binary { op, ty, .. } => match op {
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => IrTy::Bool,
            _ => ty.clone(),
        },
        IrExpr::Concat { ty, .. } | IrExpr::Cast { to: ty, .. } | IrExpr::Cond { ty, .. } => ty.clone(),
        IrExpr::Aggregate { ty, .. } => ty.clone(),
        IrExpr::Slice { hi, lo, .. } => IrTy::Bit(hi - lo + 1),
    }
}

/// Folds an operation whose operands are constants; anything else is returned as it is.
fn fold(e: IrExpr) -> IrExpr {
    match &e {
        IrExpr::Not(inner) => match **inner {
            IrExpr::Bool(b) => IrExpr::Bool(!b),
            _ => e,
        },
        IrExpr::Complement(inner, ty) => match **inner {
            IrExpr::Const { value, .. } => constant(!value, ty.clone()),
            _ => e,
        },
        IrExpr::Negate(inner, ty) => match **inner {
            IrExpr::Const { value, .. } => constant(value.wrapping_neg(), ty.clone()),
            _ => e,
        },
        IrExpr::Slice { value, hi, lo } => match **value {
            IrExpr::Const { value, .. } => constant(value >> lo, IrTy::Bit(hi - lo + 1)),
            _ => e,
        },
        IrExpr::Cast { cast: kind, to, value } => match (&**value, kind) {
            (IrExpr::Const { value, ty }, ir::Cast::SignExtend) => {
                constant(signed(*value, width(ty).unwrap_or(128)) as u128, to.clone())
            }
            (IrExpr::Const { value, .. }, ir::Cast::ToBool) => IrExpr::Bool(*value != 0),
            (IrExpr::Const { value, .. }, _) => constant(*value, to.clone()),
            (IrExpr::Bool(b), ir::Cast::FromBool) => constant(*b as u128, to.clone()),
            _ => e,
        },
        IrExpr::Concat { ty, left, right } => match (&**left, &**right) {
            (IrExpr::Const { value: a, .. }, IrExpr::Const { value: b, ty: tb }) => {
                constant(a << width(tb).unwrap_or(0) | b, ty.clone())
            }
            _ => e,
        },
        IrExpr::Binary { op, ty, left, right } => {
            let (IrExpr::Const { value: a, .. }, IrExpr::Const { value: b, .. }) = (&**left, &**right) else {
                return e;
            };
            let Some(w) = width(ty) else { return e };
            let is_signed = matches!(ty, IrTy::Int(_));
            let (a, b) = (*a, *b);
            let (sa, sb) = (signed(a, w), signed(b, w));
            let less = if is_signed { sa < sb } else { a < b };
            let v = match op {
                BinaryOp::Add => a.wrapping_add(b),
                BinaryOp::Sub => a.wrapping_sub(b),
                BinaryOp::Mul => a.wrapping_mul(b),
                BinaryOp::And => a & b,
                BinaryOp::Or => a | b,
                BinaryOp::Xor => a ^ b,
                BinaryOp::Shl => {
                    if b >= w as u128 {
                        0
                    } else {
                        a << b
                    }
                }
                BinaryOp::Shr if is_signed => (sa >> (b.min(127) as u32)) as u128,
                BinaryOp::Shr => {
                    if b >= 128 {
                        0
                    } else {
                        a >> b
                    }
                }
                BinaryOp::Div if b != 0 => a / b,
                BinaryOp::Mod if b != 0 => a % b,
                BinaryOp::Eq => return IrExpr::Bool(a == b),
                BinaryOp::Ne => return IrExpr::Bool(a != b),
                BinaryOp::Lt => return IrExpr::Bool(less),
                BinaryOp::Ge => return IrExpr::Bool(!less),
                BinaryOp::Gt => return IrExpr::Bool(if is_signed { sa > sb } else { a > b }),
                BinaryOp::Le => return IrExpr::Bool(if is_signed { sa <= sb } else { a <= b }),
                // Saturating and division by zero are left for the back ends' one rule.
                _ => return e,
            };
            constant(v, ty.clone())
        }
        _ => e,
    }
}
