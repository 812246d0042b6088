//! From the checked syntax tree to the IR (`ir.rs`): types resolved to indices, enums and errors
//! numbered, named constants folded (with `/` and `%`), extern constructor arguments folded so
//! `counter(N, ...)` gets N cells in every back end. What cannot be folded is refused with its
//! place and P4 words; the checker has already refused what is outside the subset.

use std::collections::HashMap;

use super::{code, ir};
use crate::diag::{Diagnostic, Pos};
use crate::frontend::ast::{BinOp, Decl, Expr, ExprKind, Local, Type, UnOp};
use crate::frontend::check::Checked;

type Result<T> = std::result::Result<T, Diagnostic>;

/// Lowers a program the checker accepted; errors name the program as `program`.
pub fn lower(program: &crate::frontend::ast::Program, checked: &Checked) -> std::result::Result<ir::Program, String> {
    lower_file("program", program, checked)
}

/// As `lower`, errors naming the program's file as `file`.
pub fn lower_file(
    file: &str,
    program: &crate::frontend::ast::Program,
    checked: &Checked,
) -> std::result::Result<ir::Program, String> {
    Lowering::default().program(program, checked).map_err(|d| d.to_string_in(file))
}

#[derive(Default)]
struct Lowering {
    out: ir::Program,
    aggregate_index: HashMap<String, usize>,
    enum_index: HashMap<String, usize>,
    /// Top-level constants by name: their type and folded value.
    constants: HashMap<String, (ir::Ty, u128)>,
    typedefs: HashMap<String, ir::Ty>,
    /// Top-level constants of type `int` (no width): their value.
    numbers: HashMap<String, u128>,
}

/// A folded value: a number with its type (`None` for a number without a width), or a bool.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Folded {
    Number(u128, Option<(u32, bool)>),
    Bool(bool),
    Member(usize, usize),
}

pub(super) fn mask(width: u32) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

/// Reads `value` of `width` bits as two's complement.
pub(super) fn signed(value: u128, width: u32) -> i128 {
    if width == 0 || width >= 128 {
        return value as i128;
    }
    let v = value & mask(width);
    if v >> (width - 1) & 1 == 1 {
        v as i128 - (1i128 << width)
    } else {
        v as i128
    }
}

impl Lowering {
    fn program(mut self, program: &crate::frontend::ast::Program, checked: &Checked) -> Result<ir::Program> {
        self.out.package = checked.package.clone();
        self.out.blocks = checked.blocks.clone();
        // Types first: a header's field may name a type declared after it only through a
        // typedef, which P4 declares before use, so one pass in order resolves everything.
        for decl in &program.decls {
            match decl {
                Decl::Typedef { ty, name } => {
                    let t = self.ty(ty, name.pos)?;
                    self.typedefs.insert(name.text.clone(), t);
                }
                Decl::Header { name, fields } | Decl::Struct { name, fields } | Decl::HeaderUnion { name, fields } => {
                    let kind = match decl {
                        Decl::Header { .. } => ir::AggregateKind::Header,
                        Decl::Struct { .. } => ir::AggregateKind::Struct,
                        _ => ir::AggregateKind::Union,
                    };
                    let fields = fields
                        .iter()
                        .map(|f| Ok((f.name.text.clone(), self.ty(&f.ty, f.name.pos)?)))
                        .collect::<Result<Vec<_>>>()?;
                    self.aggregate_index.insert(name.text.clone(), self.out.aggregates.len());
                    self.out.aggregates.push(ir::Aggregate { name: name.text.clone(), kind, fields });
                }
                Decl::Enum { name, members } => {
                    self.enum_index.insert(name.text.clone(), self.out.enums.len());
                    let members = members.iter().map(|m| m.text.clone()).collect();
                    self.out.enums.push(ir::Enumeration { name: name.text.clone(), members });
                }
                Decl::Error { members } => self.out.errors.extend(members.iter().map(|m| m.text.clone())),
                Decl::Const { ty: Type::Integer, name, value } => {
                    if let Folded::Number(v, _) = self.fold(value)? {
                        self.numbers.insert(name.text.clone(), v);
                    }
                }
                Decl::Const { ty, name, value } => {
                    let t = self.ty(ty, name.pos)?;
                    let folded = self.fold(value)?;
                    let v = self.fit(folded, &t, value.pos, &name.text)?;
                    self.constants.insert(name.text.clone(), (t.clone(), v));
                    self.out.constants.push(ir::Constant { name: name.text.clone(), ty: t, value: v });
                }
                Decl::Instance(instance) => self.instance("", instance)?,
                Decl::Parser { name, locals, .. } | Decl::Control { name, locals, .. } => {
                    // The block's own constants size its instances too (`register(HALF)` with
                    // `const bit<32> HALF = CELLS - 16;` in the control), seen only here.
                    let (constants, numbers) = (self.constants.clone(), self.numbers.clone());
                    for local in locals {
                        match local {
                            Local::Instance(instance) => self.instance(&name.text, instance)?,
                            Local::Const { ty: Type::Integer, name, value } => {
                                if let Ok(Folded::Number(v, _)) = self.fold(value) {
                                    self.numbers.insert(name.text.clone(), v);
                                }
                            }
                            Local::Const { ty, name, value } => {
                                let t = self.ty(ty, name.pos)?;
                                if let Ok(folded) = self.fold(value) {
                                    if let Ok(v) = self.fit(folded, &t, value.pos, &name.text) {
                                        self.constants.insert(name.text.clone(), (t, v));
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                    (self.constants, self.numbers) = (constants, numbers);
                }
                Decl::SerEnum { ty, name, .. } => {
                    let t = self.ty(ty, name.pos)?;
                    self.typedefs.insert(name.text.clone(), t);
                }
                _ => {}
            }
        }
        let declared = code::Declared {
            aggregate_index: &self.aggregate_index,
            enum_index: &self.enum_index,
            constants: &self.constants,
            numbers: &self.numbers,
        };
        let mut code = code::Code::new(program, checked, declared, self.out);
        code.blocks()?;
        Ok(code.out)
    }

    fn ty(&self, ty: &Type, pos: Pos) -> Result<ir::Ty> {
        Ok(match ty {
            Type::Bit(w) => ir::Ty::Bit(*w),
            Type::Int(w) => ir::Ty::Int(*w),
            Type::Bool => ir::Ty::Bool,
            Type::Error => ir::Ty::Error,
            Type::Named(n, _) => {
                if let Some(t) = self.typedefs.get(&n.text) {
                    t.clone()
                } else if let Some(&i) = self.aggregate_index.get(&n.text) {
                    match self.out.aggregates[i].kind {
                        ir::AggregateKind::Header => ir::Ty::Header(i),
                        ir::AggregateKind::Struct => ir::Ty::Struct(i),
                        ir::AggregateKind::Union => ir::Ty::Union(i),
                    }
                } else if let Some(&i) = self.enum_index.get(&n.text) {
                    ir::Ty::Enum(i)
                } else {
                    ir::Ty::Opaque(n.text.clone())
                }
            }
            Type::Void | Type::DontCare => {
                return Err(Diagnostic::new(pos, "the mid end has no value type for void or _"))
            }
            // `string` (v1model's log_msg) is an extern's argument, not a value a program holds.
            Type::Str => ir::Ty::Opaque("string".into()),
            Type::Stack(elem, size) => {
                let n = match self.fold(size)? {
                    Folded::Number(n, _) => n as u32,
                    _ => return Err(Diagnostic::new(pos, "a stack's size is a number")),
                };
                ir::Ty::Stack(Box::new(self.ty(elem, pos)?), n)
            }
            Type::Varbit(w) => ir::Ty::Varbit(*w),
            Type::Tuple(items) => ir::Ty::Tuple(items.iter().map(|t| self.ty(t, pos)).collect::<Result<_>>()?),
            Type::Integer => return Err(Diagnostic::new(pos, "the mid end has no type for int without a width yet")),
        })
    }

    /// A folded value as the bits of `ty`, a number without a width cut to it.
    fn fit(&self, value: Folded, ty: &ir::Ty, pos: Pos, what: &str) -> Result<u128> {
        match (value, ty) {
            (Folded::Number(v, _), ir::Ty::Bit(w) | ir::Ty::Int(w)) => Ok(v & mask(*w)),
            (Folded::Bool(b), ir::Ty::Bool) => Ok(b as u128),
            (Folded::Member(e, i), ir::Ty::Enum(t)) if e == *t => Ok(i as u128),
            _ => Err(Diagnostic::new(pos, format!("constant '{what}' does not fold to a value of its type"))),
        }
    }

    fn instance(&mut self, block: &str, instance: &crate::frontend::ast::Instance) -> Result<()> {
        let (ty, type_args) = match &instance.ty {
            Type::Named(n, type_args) => (n.text.clone(), type_args),
            _ => return Err(Diagnostic::new(instance.name.pos, "an instance of a type that is not named")),
        };
        // A type argument with no value type (`_`, `int`) is passed on unnamed: no back end reads one.
        let type_args = type_args
            .iter()
            .map(|t| self.ty(t, instance.name.pos).unwrap_or_else(|_| ir::Ty::Opaque("_".into())))
            .collect();
        let args = instance
            .args
            .iter()
            .map(|a| {
                Ok(match self.fold(a) {
                    Ok(Folded::Number(value, width)) => ir::Arg::Number {
                        value: width.map_or(value, |(w, _)| value & mask(w)),
                        width: width.map(|(w, _)| w),
                    },
                    Ok(Folded::Bool(b)) => ir::Arg::Bool(b),
                    Ok(Folded::Member(enumeration, index)) => ir::Arg::Member { enumeration, index },
                    // A block passed to the package (`EdgeflowSwitch(P(), I())`) is not a value.
                    Err(_) => ir::Arg::Other(describe(a)),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let name =
            if block.is_empty() { instance.name.text.clone() } else { format!("{block}.{}", instance.name.text) };
        let at = format!("{}:{}", instance.name.pos.line, instance.name.pos.col);
        let annotations = numbered_annotations(&instance.annotations);
        self.out.instances.push(ir::Instance { name, ty, type_args, args, annotations, at });
        Ok(())
    }

    /// Folds a constant expression: literals, named constants, enum members, arithmetic.
    fn fold(&self, e: &Expr) -> Result<Folded> {
        let refuse = |what: &str| Err(Diagnostic::new(e.pos, format!("{what} is not a constant the mid end can fold")));
        match &e.kind {
            ExprKind::Int { width, value } => {
                Ok(Folded::Number(width.map_or(*value, |(w, _)| value & mask(w)), *width))
            }
            ExprKind::Bool(b) => Ok(Folded::Bool(*b)),
            ExprKind::Name(n) | ExprKind::TopName(n) => match self.constants.get(n) {
                Some((ir::Ty::Bit(w), v)) => Ok(Folded::Number(*v, Some((*w, false)))),
                Some((ir::Ty::Int(w), v)) => Ok(Folded::Number(*v, Some((*w, true)))),
                Some((ir::Ty::Bool, v)) => Ok(Folded::Bool(*v != 0)),
                Some((ir::Ty::Enum(t), v)) => Ok(Folded::Member(*t, *v as usize)),
                _ => refuse(&format!("'{n}'")),
            },
            ExprKind::Member(base, member) => {
                if let ExprKind::Name(t) = &base.kind {
                    if let Some(&i) = self.enum_index.get(t) {
                        if let Some(k) = self.out.enums[i].members.iter().position(|m| *m == member.text) {
                            return Ok(Folded::Member(i, k));
                        }
                    }
                }
                refuse(&describe(e))
            }
            ExprKind::Cast(ty, inner) => {
                let v = self.fold(inner)?;
                match (self.ty(ty, e.pos)?, v) {
                    (ir::Ty::Bit(w), Folded::Number(x, from)) => {
                        Ok(Folded::Number(extend(x, from) & mask(w), Some((w, false))))
                    }
                    (ir::Ty::Int(w), Folded::Number(x, from)) => {
                        Ok(Folded::Number(extend(x, from) & mask(w), Some((w, true))))
                    }
                    (ir::Ty::Bit(w), Folded::Bool(b)) => Ok(Folded::Number(b as u128 & mask(w), Some((w, false)))),
                    (ir::Ty::Bool, Folded::Number(x, _)) => Ok(Folded::Bool(x != 0)),
                    _ => refuse(&describe(e)),
                }
            }
            ExprKind::Unary(op, inner) => match (op, self.fold(inner)?) {
                (UnOp::Not, Folded::Bool(b)) => Ok(Folded::Bool(!b)),
                (UnOp::Neg, Folded::Number(x, w)) => Ok(number(x.wrapping_neg(), w)),
                (UnOp::Complement, Folded::Number(x, w)) => Ok(number(!x, w)),
                _ => refuse(&describe(e)),
            },
            // `static_assert(c)` is true where it compiles (the checker refuses one that fails).
            ExprKind::Call { callee, args, .. } if matches!(&callee.kind, ExprKind::Name(n) if n == "static_assert") => {
                match args.first().map(|c| self.fold(c)).transpose()? {
                    Some(Folded::Bool(true)) => Ok(Folded::Bool(true)),
                    Some(Folded::Bool(false)) => Err(Diagnostic::new(e.pos, "static_assert fails")),
                    _ => refuse(&describe(e)),
                }
            }
            ExprKind::Binary(op, l, r) => {
                let (a, b) = (self.fold(l)?, self.fold(r)?);
                let (Folded::Number(a, wa), Folded::Number(b, wb)) = (a, b) else {
                    return match (op, a, b) {
                        (BinOp::And, Folded::Bool(x), Folded::Bool(y)) => Ok(Folded::Bool(x && y)),
                        (BinOp::Or, Folded::Bool(x), Folded::Bool(y)) => Ok(Folded::Bool(x || y)),
                        (BinOp::Eq | BinOp::Ne, x, y) if std::mem::discriminant(&x) == std::mem::discriminant(&y) => {
                            Ok(Folded::Bool((x == y) == (*op == BinOp::Eq)))
                        }
                        _ => refuse(&describe(e)),
                    };
                };
                // A number without a width takes the other side's, as the checker types it.
                let w = wa.or(wb);
                let is_signed = w.is_some_and(|(_, s)| s);
                let (sa, sb) = match w {
                    Some((width, true)) => (signed(a, width), signed(b, width)),
                    _ => (a as i128, b as i128),
                };
                let compared = if is_signed {
                    crate::frontend::check::compare(*op, sa, sb)
                } else {
                    crate::frontend::check::compare(*op, a, b)
                };
                if let Some(holds) = compared {
                    return Ok(Folded::Bool(holds));
                }
                let v = match op {
                    BinOp::Add => a.wrapping_add(b),
                    BinOp::Sub => a.wrapping_sub(b),
                    BinOp::Mul => a.wrapping_mul(b),
                    BinOp::BitAnd => a & b,
                    BinOp::BitOr => a | b,
                    BinOp::BitXor => a ^ b,
                    BinOp::Shl => {
                        if b >= 128 {
                            0
                        } else {
                            a << b
                        }
                    }
                    BinOp::Shr if is_signed => (sa >> sb.clamp(0, 127)) as u128,
                    BinOp::Shr => {
                        if b >= 128 {
                            0
                        } else {
                            a >> b
                        }
                    }
                    _ if matches!(op_name(*op), Some("/") | Some("%")) => {
                        if b == 0 {
                            return Err(Diagnostic::new(e.pos, "division by zero in a constant"));
                        }
                        if op_name(*op) == Some("/") {
                            a / b
                        } else {
                            a % b
                        }
                    }
                    _ => return refuse(&describe(e)),
                };
                Ok(number(v, w))
            }
            _ => refuse(&describe(e)),
        }
    }
}

/// `/` and `%`, whose `BinOp` variants the front end is adding this session; named by their
/// text so this compiles before and after.
fn op_name(op: BinOp) -> Option<&'static str> {
    let debug = format!("{op:?}");
    match debug.as_str() {
        "Div" => Some("/"),
        "Mod" => Some("%"),
        _ => None,
    }
}

/// The annotations whose one argument is a number (`@max_group_size(8)`), as the IR keeps them.
pub(super) fn numbered_annotations(annotations: &[crate::frontend::ast::Annotation]) -> Vec<(String, u128)> {
    annotations
        .iter()
        .filter_map(|a| match a.args.as_slice() {
            [crate::frontend::lexer::Tok::Int { value, .. }] => Some((a.name.text.clone(), *value)),
            _ => None,
        })
        .collect()
}

fn number(v: u128, w: Option<(u32, bool)>) -> Folded {
    Folded::Number(w.map_or(v, |(width, _)| v & mask(width)), w)
}

/// A value widened from its own type: sign-extended from `int<W>`, zero-extended otherwise.
fn extend(v: u128, from: Option<(u32, bool)>) -> u128 {
    match from {
        Some((w, true)) => signed(v, w) as u128,
        _ => v,
    }
}

/// An expression in P4's words, for a refusal.
fn describe(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Int { value, .. } => value.to_string(),
        ExprKind::Bool(b) => b.to_string(),
        ExprKind::Str(s) => format!("\"{s}\""),
        ExprKind::Name(n) => n.clone(),
        ExprKind::TopName(n) => format!(".{n}"),
        ExprKind::Member(b, m) => format!("{}.{}", describe(b), m.text),
        ExprKind::Index(b, i) => format!("{}[{}]", describe(b), describe(i)),
        ExprKind::Slice(b, h, l) => format!("{}[{}:{}]", describe(b), describe(h), describe(l)),
        ExprKind::Call { callee, .. } => format!("{}(...)", describe(callee)),
        ExprKind::Unary(..) | ExprKind::Binary(..) | ExprKind::Cond(..) => "an expression".into(),
        ExprKind::Cast(..) => "a cast".into(),
        ExprKind::List(_) => "a list".into(),
        ExprKind::DontCare => "_".into(),
    }
}
