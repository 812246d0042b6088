//! IR places and expressions as C. A place is a C lvalue when every step is known when the
//! program is compiled, or a pointer (null past a stack's end) when an index is known only when
//! a frame runs: a read through it gives zeros there, a write changes nothing, as the software
//! target has them. Every scalar is a `__u64` holding its type's bits; the operators that see a
//! sign (comparisons, `>>`, `|+|`, `|-|`, widening) sign-extend.

use super::printer::{mask_c, scalar, width, Printer};
use super::{ident, no, ones, R};
use crate::midend::code::expr_ty;
use crate::midend::ir::{BinaryOp, Cast, Expr, Place, Step, Ty};

/// Where a place is.
#[derive(Clone, Debug)]
pub(super) enum Lv {
    /// A C lvalue.
    Fixed(String),
    /// A C pointer expression, null past a stack's end.
    Ptr(String),
    /// Past a stack's end by a constant index: nowhere.
    Past,
}

impl Printer<'_> {
    /// Where `p` is, and the C type of what it holds.
    pub fn place(&mut self, p: &Place) -> R<Lv> {
        let mut ty = self.ir.variables[p.var].ty.clone();
        let mut lv = Lv::Fixed(self.var(p.var)?);
        for step in &p.steps {
            let (next_ty, member) = match step {
                Step::Field(i) => {
                    let fields = self.fields(&ty);
                    let Some((f, t)) = fields.get(*i) else {
                        return Err(no(format!("a member of {}", self.p4_type(&ty))));
                    };
                    (t.clone(), format!("f_{}", ident(f)))
                }
                Step::NextIndex => (Ty::Bit(32), "next".to_string()),
                Step::Elem(_) | Step::Next | Step::Last => {
                    let Ty::Stack(elem, n) = &ty else { return Err(no("an index into what is not a stack")) };
                    let (elem, n) = ((**elem).clone(), *n);
                    let stack_c = self.c_type(&ty)?;
                    let elem_c = self.c_type(&elem)?;
                    let constant = match step {
                        Step::Elem(e) => match &**e {
                            Expr::Const { value, .. } => Some(*value),
                            _ => None,
                        },
                        _ => None,
                    };
                    if let Some(value) = constant {
                        let value = &value;
                        lv = match lv {
                            _ if *value >= n as u128 => Lv::Past,
                            Lv::Fixed(s) => Lv::Fixed(format!("{s}.e[{value}]")),
                            Lv::Ptr(s) => {
                                let q = self.temp("q");
                                Lv::Ptr(format!(
                                    "({{ {stack_c} *{q} = {s}; {q} ? &{q}->e[{value}] : ({elem_c} *)0; }})"
                                ))
                            }
                            Lv::Past => Lv::Past,
                        };
                        ty = elem;
                        continue;
                    }
                    let (q, ix, e) = (self.temp("q"), self.temp("ix"), self.temp("e"));
                    let mask = (n as u64).next_power_of_two() - 1;
                    let index = |g: &mut Self, q: &str| -> R<String> {
                        Ok(match step {
                            Step::Elem(e) => g.expr(e)?,
                            Step::Next => format!("{q}->next"),
                            _ => format!("({q}->next - 1)"),
                        })
                    };
                    lv = match lv {
                        Lv::Past => Lv::Past,
                        Lv::Fixed(s) => {
                            let i = index(self, &q)?;
                            Lv::Ptr(format!(
                                "({{ {stack_c} *{q} = &{s}; __u64 {ix} = {i}; {elem_c} *{e} = 0; if ({ix} < {n}) {e} = &{q}->e[p4_index({ix}, {mask})]; {e}; }})"
                            ))
                        }
                        Lv::Ptr(s) => {
                            let i = index(self, &q)?;
                            Lv::Ptr(format!(
                                "({{ {stack_c} *{q} = {s}; __u64 {ix} = {q} ? {i} : {n}; {elem_c} *{e} = 0; if ({ix} < {n}) {e} = &{q}->e[p4_index({ix}, {mask})]; {e}; }})"
                            ))
                        }
                    };
                    ty = elem;
                    continue;
                }
            };
            let outer_c = self.c_type(&ty)?;
            let inner_c = match &next_ty {
                t if scalar(t) => "__u64".to_string(),
                Ty::Varbit(_) => "__u64".to_string(),
                t => self.c_type(t)?,
            };
            lv = match lv {
                Lv::Fixed(s) => Lv::Fixed(format!("{s}.{member}")),
                Lv::Ptr(s) => {
                    let q = self.temp("q");
                    Lv::Ptr(format!("({{ {outer_c} *{q} = {s}; {q} ? &{q}->{member} : ({inner_c} *)0; }})"))
                }
                Lv::Past => Lv::Past,
            };
            ty = next_ty;
        }
        Ok(lv)
    }

    /// A pointer to the place (null past a stack's end).
    pub fn place_ptr(&mut self, p: &Place) -> R<String> {
        let lv = self.place(p)?;
        let c_ty = if scalar(&p.ty) { "__u64".to_string() } else { self.c_type(&p.ty)? };
        Ok(match lv {
            Lv::Fixed(s) => format!("(&{s})"),
            Lv::Ptr(s) => s,
            Lv::Past => format!("(({c_ty} *)0)"),
        })
    }

    /// The value of a scalar place.
    pub fn read(&mut self, p: &Place) -> R<String> {
        if let Ty::Varbit(n) = &p.ty {
            return Err(no(format!("the value of a varbit<{n}> field")));
        }
        if !scalar(&p.ty) {
            return Err(no(format!("a value of type {} here", self.p4_type(&p.ty))));
        }
        Ok(match self.place(p)? {
            Lv::Fixed(s) => s,
            Lv::Ptr(s) => {
                let q = self.temp("q");
                format!("({{ __u64 *{q} = {s}; {q} ? *{q} : 0; }})")
            }
            Lv::Past => "0ULL".into(),
        })
    }

    /// A scalar expression's C value.
    pub fn expr(&mut self, e: &Expr) -> R<String> {
        Ok(match e {
            Expr::Const { value, .. } => {
                if *value > u64::MAX as u128 {
                    return Err(no(format!("the number {value}")));
                }
                format!("{value}ULL")
            }
            Expr::Bool(b) => format!("{}ULL", *b as u8),
            Expr::Str(_) => return Err(no("a string")),
            Expr::Read(p) => self.read(p)?,
            Expr::IsValid(p) => self.is_valid(p)?,
            Expr::Not(x) => format!("(!{})", self.expr(x)?),
            Expr::Complement(x, ty) => format!("(~{} & {})", self.expr(x)?, mask_c(ty)),
            Expr::Negate(x, ty) => format!("((0ULL - {}) & {})", self.expr(x)?, mask_c(ty)),
            Expr::Binary { op, ty, left, right } => self.binary(*op, ty, left, right)?,
            Expr::And(a, b) => format!("({} && {})", self.expr(a)?, self.expr(b)?),
            Expr::Or(a, b) => format!("({} || {})", self.expr(a)?, self.expr(b)?),
            Expr::Equal { ty, left, right } => {
                let c_ty = self.c_type(ty)?;
                let (x, y) = (self.temp("eq"), self.temp("eq"));
                let (a, b) = (self.aggregate_ptr(left, ty)?, self.aggregate_ptr(right, ty)?);
                let same = self.equal_c(&format!("{x}->"), &format!("{y}->"), ty)?;
                format!("({{ {c_ty} *{x} = {a}, *{y} = {b}; {same}; }})")
            }
            Expr::Concat { ty, left, right } => {
                if width(ty) > 64 {
                    return Err(no("a concatenation wider than 64 bits"));
                }
                let wb = width(&expr_ty(right));
                format!("(({} << {wb}) | {})", self.expr(left)?, self.expr(right)?)
            }
            Expr::Slice { value, hi, lo } => {
                format!("(({} >> {lo}) & {:#x}ULL)", self.expr(value)?, ones(hi - lo + 1))
            }
            Expr::Cast { cast, to, value } => {
                let v = self.expr(value)?;
                match cast {
                    Cast::Truncate => format!("({v} & {})", mask_c(to)),
                    Cast::ZeroExtend | Cast::Reinterpret | Cast::FromBool => v,
                    Cast::SignExtend => {
                        let from = width(&expr_ty(value));
                        format!("(p4_bits(p4_sext({v}, {from}), 64) & {})", mask_c(to))
                    }
                    Cast::ToBool => format!("({v} != 0)"),
                }
            }
            Expr::Cond { ty, cond, then, otherwise } => {
                if !scalar(ty) {
                    return Err(no(format!("'?:' of {}", self.p4_type(ty))));
                }
                format!("({} ? {} : {})", self.expr(cond)?, self.expr(then)?, self.expr(otherwise)?)
            }
            Expr::Aggregate { ty, .. } => return Err(no(format!("a list as a {} here", self.p4_type(ty)))),
        })
    }

    /// `h.isValid()` of a header, or of a union (one of its headers).
    fn is_valid(&mut self, p: &Place) -> R<String> {
        let ptr = self.place_ptr(p)?;
        let c_ty = self.c_type(&p.ty)?;
        let q = self.temp("q");
        let valid = match &p.ty {
            Ty::Union(_) => {
                let any: Vec<String> =
                    self.fields(&p.ty).iter().map(|(m, _)| format!("{q}->f_{}.valid", ident(m))).collect();
                format!("({})", any.join(" || "))
            }
            _ => format!("{q}->valid"),
        };
        Ok(format!("({{ {c_ty} *{q} = {ptr}; {q} ? {valid} : 0; }})"))
    }

    fn binary(&mut self, op: BinaryOp, ty: &Ty, left: &Expr, right: &Expr) -> R<String> {
        let (a, b) = (self.expr(left)?, self.expr(right)?);
        let w = width(ty);
        let m = format!("{:#x}ULL", ones(w));
        let signed = matches!(ty, Ty::Int(_));
        Ok(match op {
            BinaryOp::Add => format!("(({a} + {b}) & {m})"),
            BinaryOp::Sub => format!("(({a} - {b}) & {m})"),
            BinaryOp::Mul => format!("(({a} * {b}) & {m})"),
            BinaryOp::AddSat if signed && w < 64 => format!("p4_add_sat_signed({a}, {b}, {w})"),
            BinaryOp::SubSat if signed && w < 64 => format!("p4_sub_sat_signed({a}, {b}, {w})"),
            BinaryOp::AddSat | BinaryOp::SubSat if signed => return Err(no("saturating arithmetic on int<64>")),
            BinaryOp::AddSat if w < 64 => format!("p4_add_sat({a}, {b}, {m})"),
            BinaryOp::AddSat => format!("({{ __u64 x = {a}, y = {b}; x + y < x ? ~0ULL : x + y; }})"),
            BinaryOp::SubSat => format!("p4_sub_sat({a}, {b})"),
            BinaryOp::And => format!("({a} & {b})"),
            BinaryOp::Or => format!("({a} | {b})"),
            BinaryOp::Xor => format!("({a} ^ {b})"),
            // Through the runtime's functions, which read each operand once.
            BinaryOp::Shl => format!("p4_shl({a}, {b}, {w}, {m})"),
            BinaryOp::Shr if signed => format!("p4_sar({a}, {b}, {w})"),
            BinaryOp::Shr => format!("p4_shr({a}, {b}, {w})"),
            // As the software target: by zero gives 0.
            BinaryOp::Div => format!("({{ __u64 x = {a}, y = {b}; y ? x / y : 0; }})"),
            BinaryOp::Mod => format!("({{ __u64 x = {a}, y = {b}; y ? x % y : 0; }})"),
            BinaryOp::Eq => format!("({a} == {b})"),
            BinaryOp::Ne => format!("({a} != {b})"),
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
                let sym = match op {
                    BinaryOp::Lt => "<",
                    BinaryOp::Le => "<=",
                    BinaryOp::Gt => ">",
                    _ => ">=",
                };
                if signed {
                    format!("(p4_sext({a}, {w}) {sym} p4_sext({b}, {w}))")
                } else {
                    format!("({a} {sym} {b})")
                }
            }
        })
    }

    /// A pointer to an aggregate value: a place's (null past a stack's end: zeros, invalid),
    /// or a list's, built in a run member of its own.
    pub fn aggregate_ptr(&mut self, e: &Expr, ty: &Ty) -> R<String> {
        match e {
            Expr::Read(p) => self.place_ptr(p),
            Expr::Aggregate { items, .. } => {
                let c_ty = self.c_type(ty)?;
                let member = self.temp("lit");
                let _ = std::fmt::Write::write_fmt(&mut self.run_members, format_args!("\t{c_ty} {member};\n"));
                let fill = self.fill(&format!("(&r->{member})"), ty, items, true)?;
                Ok(format!("({{ {fill}&r->{member}; }})"))
            }
            _ => Err(no(format!("a value of {} here", self.p4_type(ty)))),
        }
    }

    /// C that is true when the aggregates at `a` and `b` (prefixes such as `x->`) are equal as
    /// P4 says: headers both invalid, or both valid with equal fields; the rest member by member.
    pub fn equal_c(&mut self, a: &str, b: &str, ty: &Ty) -> R<String> {
        if let Ty::Stack(elem, n) = ty {
            let mut same = Vec::new();
            for k in 0..*n {
                same.push(format!("({})", self.equal_c(&format!("{a}e[{k}]."), &format!("{b}e[{k}]."), elem)?));
            }
            return Ok(same.join(" && "));
        }
        let fields = self.fields(ty);
        let header = matches!(ty, Ty::Header(_));
        let mut same = if header { format!("{a}valid && {b}valid") } else { "1".to_string() };
        for (f, fty) in &fields {
            if let Ty::Varbit(n) = fty {
                return Err(no(format!("'==' on a header with a varbit<{n}> field")));
            }
            let f = ident(f);
            if scalar(fty) {
                same += &format!(" && {a}f_{f} == {b}f_{f}");
            } else {
                same += &format!(" && ({})", self.equal_c(&format!("{a}f_{f}."), &format!("{b}f_{f}."), fty)?);
            }
        }
        Ok(if header { format!("((!{a}valid && !{b}valid) || ({same}))") } else { same })
    }
}
