//! The IR's code as text (`Program`'s `Display` ends with it): what tests compare, and what a
//! reader checks a lowering against. Every operation shows its type (`add.u16`, `shr.s8`,
//! `sext.s16`), every constant its width (`65535:u16`), so a detail the back ends once read
//! differently is visible here once.

use std::fmt::{self, Write};

use super::ir::*;

/// Writes the blocks, actions, functions and tables of `p`.
pub fn code(p: &Program, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let d = Dump { p };
    let mut out = String::new();
    for (i, a) in p.actions.iter().enumerate() {
        let params: Vec<String> = a
            .params
            .iter()
            .map(|(v, dir)| format!("{}{}: {}", direction(dir), p.variables[*v].name, p.variables[*v].ty))
            .collect();
        let _ = writeln!(out, "action#{i} {}({}) {{", a.name, params.join(", "));
        d.stmts(&mut out, &a.body, 1);
        out.push_str("}\n");
    }
    let typed = |v: &usize| format!("{}: {}", p.variables[*v].name, p.variables[*v].ty);
    for (i, func) in p.functions.iter().enumerate() {
        let params: Vec<String> = func.params.iter().map(typed).collect();
        let _ = writeln!(out, "function#{i} {}({}) {{", func.name, params.join(", "));
        d.stmts(&mut out, &func.body, 1);
        out.push_str("}\n");
    }
    for (i, t) in p.tables.iter().enumerate() {
        let keys: Vec<String> =
            t.keys.iter().map(|k| format!("{} {} as {}", d.expr(&k.value), k.match_kind, k.name)).collect();
        let _ = writeln!(out, "table#{i} {} key({})", t.name, keys.join(", "));
        let actions: Vec<String> = t
            .actions
            .iter()
            .map(|a| {
                let bound: Vec<String> = a.bound.iter().map(|b| d.arg(b)).collect();
                format!("{}({})", p.actions[a.action].name, bound.join(", "))
            })
            .collect();
        let _ = writeln!(out, "  actions {}", actions.join(", "));
        let (a, args) = &t.default_action;
        let konst = if t.default_const { "const " } else { "" };
        let _ = writeln!(out, "  default {konst}{}({})", p.actions[*a].name, d.exprs(args));
        for e in &t.entries {
            let keys: Vec<String> = e.keys.iter().map(keyset).collect();
            let _ = writeln!(
                out,
                "  entry ({}) {}({}) priority {}",
                keys.join(", "),
                p.actions[e.action].name,
                d.exprs(&e.args),
                e.priority
            );
        }
        if let Some(size) = t.size {
            let _ = writeln!(out, "  size {size}");
        }
        for (prop, instance) in &t.properties {
            let _ = writeln!(out, "  {prop} = {instance}");
        }
    }
    for b in &p.blocks_code {
        let params: Vec<String> = b.params.iter().map(|(v, dir)| format!("{}{}", direction(dir), typed(v))).collect();
        let _ = writeln!(out, "block {}({}) {{", b.name, params.join(", "));
        d.stmts(&mut out, &b.init, 1);
        match &b.body {
            BlockBody::Control(stmts) => {
                out.push_str("  apply {\n");
                d.stmts(&mut out, stmts, 2);
                out.push_str("  }\n");
            }
            BlockBody::Parser(states) => {
                for s in states {
                    let _ = writeln!(out, "  state {} {{", s.name);
                    d.stmts(&mut out, &s.body, 2);
                    let next = |n: &Next| match n {
                        Next::Accept => "accept".to_string(),
                        Next::Reject => "reject".to_string(),
                        Next::State(i) => states[*i].name.clone(),
                    };
                    match &s.transition {
                        Transition::Goto(n) => {
                            let _ = writeln!(out, "    goto {}", next(n));
                        }
                        Transition::Select { keys, cases } => {
                            let _ = writeln!(out, "    select ({}) {{", d.exprs(keys));
                            for (ks, n) in cases {
                                let ks: Vec<String> = ks.iter().map(keyset).collect();
                                let _ = writeln!(out, "      ({}) => {}", ks.join(", "), next(n));
                            }
                            out.push_str("    }\n");
                        }
                    }
                    out.push_str("  }\n");
                }
            }
        }
        out.push_str("}\n");
    }
    f.write_str(&out)
}

fn direction(d: &Option<crate::frontend::ast::Direction>) -> &'static str {
    match d {
        Some(crate::frontend::ast::Direction::In) => "in ",
        Some(crate::frontend::ast::Direction::Out) => "out ",
        Some(crate::frontend::ast::Direction::InOut) => "inout ",
        None => "",
    }
}

fn keyset(k: &Keyset) -> String {
    match k {
        Keyset::Any => "_".into(),
        Keyset::Value(v) => format!("{v:#x}"),
        Keyset::Mask(v, m) => format!("{v:#x} &&& {m:#x}"),
        Keyset::Range(a, b) => format!("{a:#x}..{b:#x}"),
        Keyset::ValueSet(s) => format!("set {s}"),
    }
}

struct Dump<'p> {
    p: &'p Program,
}

impl Dump<'_> {
    fn stmts(&self, out: &mut String, stmts: &[Stmt], depth: usize) {
        for s in stmts {
            self.stmt(out, s, depth);
        }
    }

    fn stmt(&self, out: &mut String, s: &Stmt, depth: usize) {
        let pad = "  ".repeat(depth);
        let name = |v: &usize| self.p.variables[*v].name.clone();
        let _ = match s {
            Stmt::Assign { place, value } => writeln!(out, "{pad}{} = {}", self.place(place), self.expr(value)),
            Stmt::Init(place) => writeln!(out, "{pad}init {}", self.place(place)),
            Stmt::At(_) => Ok(()),
            Stmt::SetValid { header, valid } => writeln!(out, "{pad}{}.valid = {valid}", self.place(header)),
            Stmt::PushFront { stack, count } => writeln!(out, "{pad}push_front {} {count}", self.place(stack)),
            Stmt::PopFront { stack, count } => writeln!(out, "{pad}pop_front {} {count}", self.place(stack)),
            Stmt::If { cond, then, otherwise } => {
                let _ = writeln!(out, "{pad}if {} {{", self.expr(cond));
                self.stmts(out, then, depth + 1);
                if !otherwise.is_empty() {
                    let _ = writeln!(out, "{pad}}} else {{");
                    self.stmts(out, otherwise, depth + 1);
                }
                writeln!(out, "{pad}}}")
            }
            Stmt::Apply { table, hit, action_run } => {
                let mut into = Vec::new();
                if let Some(h) = hit {
                    into.push(format!("hit -> {}", name(h)));
                }
                if let Some(r) = action_run {
                    into.push(format!("action_run -> {}", name(r)));
                }
                let into = if into.is_empty() { String::new() } else { format!(" {}", into.join(", ")) };
                writeln!(out, "{pad}apply {}{into}", self.p.tables[*table].name)
            }
            Stmt::CallAction { action, after } => {
                self.call(out, &pad, "call", &self.p.actions[*action].name, after, depth)
            }
            Stmt::CallFunction { function, after } => {
                self.call(out, &pad, "call", &self.p.functions[*function].name, after, depth)
            }
            Stmt::ApplyBlock { block, after } => {
                self.call(out, &pad, "apply", &self.p.blocks_code[*block].name, after, depth)
            }
            Stmt::Extern { callee, type_args, args, result, .. } => {
                let callee = match callee {
                    Callee::Method { object: ExternRef::Instance(i), method } => format!("{i}.{method}"),
                    Callee::Method { object: ExternRef::Var(v), method } => format!("{}.{method}", name(v)),
                    Callee::Function(f) => f.clone(),
                };
                let targs = if type_args.is_empty() {
                    String::new()
                } else {
                    format!("<{}>", type_args.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", "))
                };
                let args: Vec<String> = args.iter().map(|a| self.arg(a)).collect();
                let result = result.as_ref().map(|r| format!("{} = ", self.place(r))).unwrap_or_default();
                writeln!(out, "{pad}{result}extern {callee}{targs}({})", args.join(", "))
            }
            Stmt::Loop { cond, body, update } => {
                let cond = cond.as_ref().map(|c| self.expr(c)).unwrap_or_else(|| "true".into());
                let _ = writeln!(out, "{pad}while {cond} {{");
                self.stmts(out, body, depth + 1);
                let _ = writeln!(out, "{pad}}} then {{");
                self.stmts(out, update, depth + 1);
                writeln!(out, "{pad}}}")
            }
            Stmt::Break => writeln!(out, "{pad}break"),
            Stmt::Continue => writeln!(out, "{pad}continue"),
            Stmt::Return => writeln!(out, "{pad}return"),
            Stmt::Exit => writeln!(out, "{pad}exit"),
        };
    }

    /// A call, and the copies out that follow it (`call f, then {...}`).
    fn call(&self, out: &mut String, pad: &str, verb: &str, name: &str, after: &[Stmt], depth: usize) -> fmt::Result {
        if after.is_empty() {
            return writeln!(out, "{pad}{verb} {name}");
        }
        let _ = writeln!(out, "{pad}{verb} {name}, then {{");
        self.stmts(out, after, depth + 1);
        writeln!(out, "{pad}}}")
    }

    fn arg(&self, a: &CallArg) -> String {
        match a {
            CallArg::In(e) => self.expr(e),
            CallArg::Out(p) => format!("out {}", self.place(p)),
            CallArg::InOut(p) => format!("inout {}", self.place(p)),
            CallArg::Discard => "out _".into(),
        }
    }

    fn exprs(&self, es: &[Expr]) -> String {
        es.iter().map(|e| self.expr(e)).collect::<Vec<_>>().join(", ")
    }

    fn place(&self, p: &Place) -> String {
        let v = &self.p.variables[p.var];
        let mut out = v.name.clone();
        let mut ty = v.ty.clone();
        for s in &p.steps {
            match s {
                Step::Field(i) => match &ty {
                    Ty::Header(a) | Ty::Struct(a) | Ty::Union(a) => {
                        let (n, t) = &self.p.aggregates[*a].fields[*i];
                        let _ = write!(out, ".{n}");
                        ty = t.clone();
                    }
                    Ty::Tuple(items) => {
                        let _ = write!(out, ".{i}");
                        ty = items[*i].clone();
                    }
                    _ => {
                        let _ = write!(out, ".#{i}");
                    }
                },
                Step::Elem(index) => {
                    let _ = write!(out, "[{}]", self.expr(index));
                    ty = elem(&ty);
                }
                Step::Next => {
                    out.push_str(".next");
                    ty = elem(&ty);
                }
                Step::Last => {
                    out.push_str(".last");
                    ty = elem(&ty);
                }
                Step::NextIndex => out.push_str(".nextIndex"),
            }
        }
        out
    }

    fn expr(&self, e: &Expr) -> String {
        match e {
            Expr::Const { value, ty } => format!("{value}:{ty}"),
            Expr::Bool(b) => b.to_string(),
            Expr::Str(s) => format!("{s:?}"),
            Expr::Read(p) => self.place(p),
            Expr::IsValid(p) => format!("valid({})", self.place(p)),
            Expr::Not(x) => format!("not({})", self.expr(x)),
            Expr::Complement(x, t) => format!("not.{t}({})", self.expr(x)),
            Expr::Negate(x, t) => format!("neg.{t}({})", self.expr(x)),
            Expr::Binary { op, ty, left, right } => {
                let op = format!("{op:?}").to_lowercase();
                format!("{op}.{ty}({}, {})", self.expr(left), self.expr(right))
            }
            Expr::And(a, b) => format!("and({}, {})", self.expr(a), self.expr(b)),
            Expr::Or(a, b) => format!("or({}, {})", self.expr(a), self.expr(b)),
            Expr::Equal { ty, left, right } => format!("equal.{ty}({}, {})", self.expr(left), self.expr(right)),
            Expr::Concat { ty, left, right } => format!("concat.{ty}({}, {})", self.expr(left), self.expr(right)),
            Expr::Slice { value, hi, lo } => format!("{}[{hi}:{lo}]", self.expr(value)),
            Expr::Cast { cast, to, value } => {
                let c = match cast {
                    Cast::Truncate => "trunc",
                    Cast::ZeroExtend => "zext",
                    Cast::SignExtend => "sext",
                    Cast::Reinterpret => "as",
                    Cast::FromBool => "frombool",
                    Cast::ToBool => "tobool",
                };
                format!("{c}.{to}({})", self.expr(value))
            }
            Expr::Cond { ty, cond, then, otherwise } => {
                format!("cond.{ty}({}, {}, {})", self.expr(cond), self.expr(then), self.expr(otherwise))
            }
            Expr::Aggregate { ty, items } => format!("{ty}{{{}}}", self.exprs(items)),
        }
    }
}

fn elem(t: &Ty) -> Ty {
    match t {
        Ty::Stack(e, _) => (**e).clone(),
        other => other.clone(),
    }
}
