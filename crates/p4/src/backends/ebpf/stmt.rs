//! IR statements as C, and the C functions actions, functions and sub-blocks become. A call's
//! copies in and out are the IR's own statements around it; an `exit` sets the run's `exited`
//! and returns, and every caller returns after its copies out while it is set, up to the
//! architecture's block (P4's exit, copies out included, as the software target runs it).

use std::fmt::Write as _;

use super::expr::Lv;
use super::printer::{mask_c, scalar, Context, Printer};
use super::{ident, no, R};
use crate::midend::ir::{BlockBody, Expr, Place, Stmt, Ty};

impl Printer<'_> {
    pub fn stmts(&mut self, stmts: &[Stmt]) -> R<String> {
        let mut s = String::new();
        for st in stmts {
            s += &self.stmt(st)?;
        }
        Ok(s)
    }

    /// What a control leaves by after a call that may have exited.
    fn exited(&self) -> &'static str {
        match self.context {
            Context::Control => "if (r->exited)\n\treturn;\n",
            Context::Parser => "",
        }
    }

    fn stmt(&mut self, st: &Stmt) -> R<String> {
        Ok(match st {
            Stmt::At(pos) => {
                self.at = Some(*pos);
                String::new()
            }
            Stmt::Assign { place, value } => self.assign(place, value)?,
            Stmt::Init(Place { ty: Ty::Opaque(_), .. }) => String::new(),
            Stmt::Init(place) => {
                if scalar(&place.ty) {
                    match self.place(place)? {
                        Lv::Fixed(s) => format!("{s} = 0;\n"),
                        Lv::Ptr(p) => {
                            let q = self.temp("q");
                            format!("{{ __u64 *{q} = {p}; if ({q}) *{q} = 0; }}\n")
                        }
                        Lv::Past => String::new(),
                    }
                } else {
                    let (c_ty, p) = (self.c_type(&place.ty)?, self.place_ptr(place)?);
                    let q = self.temp("q");
                    format!("{{ {c_ty} *{q} = {p}; if ({q}) p4_zero({q}); }}\n")
                }
            }
            Stmt::SetValid { header, valid } => {
                let (c_ty, p) = (self.c_type(&header.ty)?, self.place_ptr(header)?);
                let h = self.temp("h");
                if *valid {
                    // A header made valid here was not read from the frame and has no place in
                    // it: the deparser's in-place check sends such a frame up.
                    let settle = self.settle(header)?;
                    format!("{{ {c_ty} *{h} = {p}; if ({h}) {{ if (!{h}->valid) {h}->at = 0xffffffff; {h}->valid = 1; }} }}\n{settle}")
                } else {
                    format!("{{ {c_ty} *{h} = {p}; if ({h}) {h}->valid = 0; }}\n")
                }
            }
            Stmt::PushFront { stack, count } => self.shift_stack(stack, true, *count)?,
            Stmt::PopFront { stack, count } => self.shift_stack(stack, false, *count)?,
            Stmt::If { cond, then, otherwise } => {
                let c = self.expr(cond)?;
                let mut s = format!("if ({c}) {{\n{}}}", self.stmts(then)?);
                if !otherwise.is_empty() {
                    s += &format!(" else {{\n{}}}", self.stmts(otherwise)?);
                }
                s + "\n"
            }
            Stmt::Apply { table, hit, action_run } => {
                let f = self.table_fn(*table)?;
                let mut s = format!("{f}(r);\n");
                if let Some(h) = hit {
                    let _ = writeln!(s, "{} = r->hit;", self.var(*h)?);
                }
                if let Some(a) = action_run {
                    let _ = writeln!(s, "{} = r->action_run;", self.var(*a)?);
                }
                s + self.exited()
            }
            Stmt::CallAction { action, after } => {
                let f = self.action_fn(*action)?;
                format!("{f}(r);\n{}{}", self.stmts(after)?, self.exited())
            }
            Stmt::CallFunction { function, after } => {
                let f = self.function_fn(*function)?;
                format!("{f}(r);\n{}{}", self.stmts(after)?, self.exited())
            }
            Stmt::ApplyBlock { block, after } => {
                let f = self.block_fn(*block)?;
                match self.ir.blocks_code[*block].body {
                    BlockBody::Control(_) => format!("{f}(r);\n{}{}", self.stmts(after)?, self.exited()),
                    // A sub-parser's reject is its caller's, after the copies out.
                    BlockBody::Parser(_) => {
                        let (rejected, accepted) = (self.stmts(after)?, self.stmts(after)?);
                        format!("if ({f}(r) < 0) {{\n{rejected}goto reject;\n}}\n{accepted}")
                    }
                }
            }
            Stmt::Extern { callee, type_args, args, result, at } => {
                self.at = Some(*at);
                self.extern_call(callee, type_args, args, result.as_ref())?
            }
            Stmt::Loop { .. } | Stmt::Break | Stmt::Continue => return Err(no("a for loop")),
            Stmt::Return => match self.context {
                Context::Control => "return;\n".into(),
                Context::Parser => return Err(no("'return' in a parser")),
            },
            Stmt::Exit => match self.context {
                Context::Control => "r->exited = 1;\nreturn;\n".into(),
                Context::Parser => return Err(no("'exit' in a parser")),
            },
        })
    }

    /// `place = value`: a scalar masked to its width; an aggregate copied whole (zeros from
    /// past a stack's end), a list's items all read before the place is written.
    pub fn assign(&mut self, place: &Place, value: &Expr) -> R<String> {
        if let Ty::Varbit(n) = &place.ty {
            return Err(no(format!("an assignment of a varbit<{n}> field")));
        }
        // A packet_in or packet_out passed on to a sub-block: the one frame, nothing to copy.
        if let Ty::Opaque(_) = &place.ty {
            return Ok(String::new());
        }
        if scalar(&place.ty) {
            let v = self.expr(value)?;
            let v = match &place.ty {
                Ty::Bit(_) | Ty::Int(_) => format!("({v}) & {}", mask_c(&place.ty)),
                _ => v,
            };
            return Ok(match self.place(place)? {
                Lv::Fixed(s) => format!("{s} = {v};\n"),
                Lv::Ptr(p) => {
                    let (t, q) = (self.temp("t"), self.temp("q"));
                    format!("{{ __u64 {t} = {v}; __u64 *{q} = {p}; if ({q}) *{q} = {t}; }}\n")
                }
                Lv::Past => format!("(void)({v});\n"),
            });
        }
        let c_ty = self.c_type(&place.ty)?;
        let src = self.aggregate_ptr(value, &place.ty)?;
        let dst = self.place_ptr(place)?;
        let (s, d) = (self.temp("s"), self.temp("d"));
        let settle = self.settle(place)?;
        // A header given a list's value keeps its place in the frame if it had one.
        let (keep, put) = match (&place.ty, value) {
            (Ty::Header(_), Expr::Aggregate { .. }) => {
                let at = self.temp("at");
                (format!("__u64 {at} = {d}->valid ? {d}->at : 0xffffffff; "), format!(" {d}->at = {at};"))
            }
            _ => (String::new(), String::new()),
        };
        Ok(format!(
            "{{ {c_ty} *{s} = {src}; {c_ty} *{d} = {dst};\nif ({d}) {{ {keep}if ({s}) p4_copy({d}, {s}); else p4_zero({d});{put} }} }}\n{settle}"
        ))
    }

    /// C that writes a list's `items` into the aggregate `dst` (a pointer) of type `ty`.
    pub fn fill(&mut self, dst: &str, ty: &Ty, items: &[Expr], _top: bool) -> R<String> {
        let fields = self.fields(ty);
        let mut s = String::new();
        if let Ty::Header(_) = ty {
            let _ = write!(s, "{dst}->valid = 1; {dst}->at = 0xffffffff; ");
        }
        if let Ty::Tuple(_) = ty {
            return Err(no("a tuple"));
        }
        for ((f, fty), item) in fields.iter().zip(items) {
            let f = ident(f);
            if scalar(fty) {
                let v = self.expr(item)?;
                let _ = write!(s, "{dst}->f_{f} = ({v}) & {}; ", mask_c(fty));
                continue;
            }
            match item {
                Expr::Aggregate { items, .. } => s += &self.fill(&format!("(&{dst}->f_{f})"), fty, items, false)?,
                Expr::Read(p) => {
                    let c_ty = self.c_type(fty)?;
                    let (q, src) = (self.temp("q"), self.place_ptr(p)?);
                    let _ = write!(
                        s,
                        "{{ {c_ty} *{q} = {src}; if ({q}) p4_copy(&{dst}->f_{f}, {q}); else p4_zero(&{dst}->f_{f}); }} "
                    );
                }
                _ => return Err(no(format!("a list item of type {}", self.p4_type(fty)))),
            }
        }
        Ok(s)
    }

    /// After a write to (or validation of) a header in a union: if it is now valid, its
    /// siblings are not (a union holds one header), as the software target settles it.
    pub fn settle(&mut self, place: &Place) -> R<String> {
        let mut parent = place.clone();
        let Some(crate::midend::ir::Step::Field(i)) = parent.steps.pop() else { return Ok(String::new()) };
        let parent_ty = self.parent_ty(&parent)?;
        let Ty::Union(_) = parent_ty else { return Ok(String::new()) };
        parent.ty = parent_ty.clone();
        let members = self.fields(&parent_ty);
        let (c_ty, p) = (self.c_type(&parent_ty)?, self.place_ptr(&parent)?);
        let u = self.temp("u");
        let me = ident(&members[i].0);
        let others: String = members
            .iter()
            .enumerate()
            .filter(|(k, _)| *k != i)
            .map(|(_, (m, _))| format!("{u}->f_{}.valid = 0; ", ident(m)))
            .collect();
        Ok(format!("{{ {c_ty} *{u} = {p}; if ({u} && {u}->f_{me}.valid) {{ {others}}} }}\n"))
    }

    /// The type a place without its last step holds.
    fn parent_ty(&self, parent: &Place) -> R<Ty> {
        let mut ty = self.ir.variables[parent.var].ty.clone();
        for step in &parent.steps {
            ty = match (step, &ty) {
                (crate::midend::ir::Step::Field(i), _) => {
                    self.fields(&ty).get(*i).map(|(_, t)| t.clone()).ok_or_else(|| no("a member"))?
                }
                (crate::midend::ir::Step::NextIndex, _) => Ty::Bit(32),
                (_, Ty::Stack(e, _)) => (**e).clone(),
                _ => return Err(no("an index into what is not a stack")),
            };
        }
        Ok(ty)
    }

    /// `push_front(count)` or `pop_front(count)`: the headers (and where each lies in the frame)
    /// rotate `count` places, the places left behind become invalid, `next` moves with them
    /// within 0 and the size, as the software target's.
    fn shift_stack(&mut self, stack: &Place, push: bool, count: u32) -> R<String> {
        let Ty::Stack(elem, n) = &stack.ty else { return Err(no("push_front or pop_front of this value")) };
        let (elem, n) = ((**elem).clone(), *n as usize);
        let m = (count as usize).min(n);
        let (c_ty, e_ty, p) = (self.c_type(&stack.ty)?, self.c_type(&elem)?, self.place_ptr(stack)?);
        let k = self.temp("k");
        let mut s = format!("{{ {c_ty} *{k} = {p}; if ({k}) {{\n");
        for _ in 0..m {
            if push {
                let _ = writeln!(s, "{{ {e_ty} spun; p4_copy(&spun, &{k}->e[{}]);", n - 1);
                for j in (1..n).rev() {
                    let _ = writeln!(s, "p4_copy(&{k}->e[{j}], &{k}->e[{}]);", j - 1);
                }
                let _ = writeln!(s, "p4_copy(&{k}->e[0], &spun); }}");
            } else {
                let _ = writeln!(s, "{{ {e_ty} spun; p4_copy(&spun, &{k}->e[0]);");
                for j in 0..n - 1 {
                    let _ = writeln!(s, "p4_copy(&{k}->e[{j}], &{k}->e[{}]);", j + 1);
                }
                let _ = writeln!(s, "p4_copy(&{k}->e[{}], &spun); }}", n - 1);
            }
        }
        let vacated = if push { 0..m } else { n - m..n };
        for j in vacated {
            match &elem {
                Ty::Union(_) => {
                    for (f, _) in self.fields(&elem) {
                        let _ = writeln!(s, "{k}->e[{j}].f_{}.valid = 0;", ident(&f));
                    }
                }
                _ => {
                    let _ = writeln!(s, "{k}->e[{j}].valid = 0;");
                }
            }
        }
        if push {
            let _ = writeln!(s, "{k}->next = {k}->next + {m} > {n} ? {n} : {k}->next + {m};");
        } else {
            let _ = writeln!(s, "{k}->next = {k}->next > {m} ? {k}->next - {m} : 0;");
        }
        Ok(s + "} }\n")
    }

    /// Prints `body` as a C function `f` of the given context (once).
    fn function(&mut self, f: &str, context: Context, head: &str, body: impl FnOnce(&mut Self) -> R<String>) -> R<()> {
        if !self.printed.insert(f.to_string()) {
            return Ok(());
        }
        let saved = (std::mem::replace(&mut self.context, context), self.at);
        // A refusal keeps the place it was found at.
        let printed = body(self)?;
        (self.context, self.at) = saved;
        let (ret, tail) = match context {
            Context::Control => ("void", String::new()),
            Context::Parser => ("int", String::new()),
        };
        let _ =
            write!(self.funcs, "static __always_inline {ret} {f}(struct p4_run *r)\n{{\n{head}{printed}{tail}}}\n\n");
        Ok(())
    }

    pub fn action_fn(&mut self, a: usize) -> R<String> {
        let f = format!("p4_act_{a}_{}", ident(self.ir.actions[a].name.rsplit('.').next().unwrap_or("")));
        let action = &self.ir.actions[a];
        let (body, pos) = (action.body.clone(), action.pos);
        self.function(&f, Context::Control, "", |g| {
            g.at = Some(pos);
            g.stmts(&body)
        })?;
        Ok(f)
    }

    fn function_fn(&mut self, i: usize) -> R<String> {
        let f = format!("p4_fn_{i}_{}", ident(&self.ir.functions[i].name));
        let function = &self.ir.functions[i];
        let (body, pos) = (function.body.clone(), function.pos);
        self.function(&f, Context::Control, "", |g| {
            g.at = Some(pos);
            g.stmts(&body)
        })?;
        Ok(f)
    }

    /// A sub-parser's or sub-control's function.
    fn block_fn(&mut self, b: usize) -> R<String> {
        let name = ident(&self.ir.blocks_code[b].name);
        match self.ir.blocks_code[b].body {
            BlockBody::Control(_) => {
                let f = format!("p4_ctl_{name}");
                self.control_block(b, &f, false)?;
                Ok(f)
            }
            BlockBody::Parser(_) => {
                let f = format!("p4_sub_{name}");
                self.parser_block(b, &f)?;
                Ok(f)
            }
        }
    }

    /// A control block as the C function `f`: its locals' start, then its apply.
    pub fn control_block(&mut self, b: usize, f: &str, deparser: bool) -> R<()> {
        let block = &self.ir.blocks_code[b];
        let BlockBody::Control(body) = &block.body else { return Err(no(format!("{} as a control", block.name))) };
        let (init, body, pos) = (block.init.clone(), body.clone(), block.pos);
        let head = if deparser { "\tr->emitted = 0;\n" } else { "" };
        self.function(f, Context::Control, head, |g| {
            g.at = Some(pos);
            Ok(g.stmts(&init)? + &g.stmts(&body)?)
        })
    }

    /// A parser block as the C function `f`: 0 when it accepts, -1 when it rejects.
    pub fn parser_block(&mut self, b: usize, f: &str) -> R<()> {
        let block = &self.ir.blocks_code[b];
        let BlockBody::Parser(states) = &block.body else { return Err(no(format!("{} as a parser", block.name))) };
        let (init, states, pos) = (block.init.clone(), states.clone(), block.pos);
        self.function(f, Context::Parser, "", |g| {
            g.at = Some(pos);
            let init = g.stmts(&init)?;
            let states = g.states(&states)?;
            Ok(format!("{init}\tgoto st_start;\n{states}st_accept:\n\treturn 0;\nreject:\n\treturn -1;\n"))
        })
    }
}
