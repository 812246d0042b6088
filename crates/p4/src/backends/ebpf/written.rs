//! Which header fields a program may change after the parser read them. The deparser writes
//! back in place, so a field no statement writes still holds the frame's own bits and is not
//! written again; when no field is written at all, the frame is not stored back (issue 53: a
//! store and a byte-wise rewrite of every field cost a frame some 20 ns of the ~100 the program
//! takes). Every statement of the program counts, reached or not: a field is kept only where
//! nothing could change it.

use std::collections::BTreeSet;

use crate::midend::ir::{self, CallArg, Place, Step, Stmt, Ty};

/// Header fields by (header aggregate, field index): a type's, whatever instance is written.
#[derive(Debug, Default)]
pub(super) struct Written {
    fields: BTreeSet<(usize, usize)>,
}

impl Written {
    pub fn of(program: &ir::Program) -> Written {
        let mut w = Written::default();
        let walk = |stmts: &[Stmt], w: &mut Written| w.stmts(program, stmts);
        for b in &program.blocks_code {
            walk(&b.init, &mut w);
            match &b.body {
                ir::BlockBody::Control(body) => walk(body, &mut w),
                ir::BlockBody::Parser(states) => states.iter().for_each(|st| walk(&st.body, &mut w)),
            }
        }
        program.actions.iter().for_each(|a| walk(&a.body, &mut w));
        program.functions.iter().for_each(|f| walk(&f.body, &mut w));
        for t in &program.tables {
            t.actions.iter().flat_map(|ta| &ta.bound).for_each(|arg| w.arg(program, arg));
        }
        w
    }

    /// Whether field `field` of header type `header` may change.
    pub fn field(&self, header: usize, field: usize) -> bool {
        self.fields.contains(&(header, field))
    }

    /// Whether any header field may change.
    pub fn any(&self) -> bool {
        !self.fields.is_empty()
    }

    fn stmts(&mut self, p: &ir::Program, stmts: &[Stmt]) {
        for s in stmts {
            match s {
                Stmt::Assign { place, .. } | Stmt::Init(place) => self.place(p, place),
                // A header made valid may not be the one the parser read there.
                Stmt::SetValid { header, valid: true } => self.place(p, header),
                Stmt::SetValid { valid: false, .. } => {}
                Stmt::PushFront { stack, .. } | Stmt::PopFront { stack, .. } => self.place(p, stack),
                Stmt::If { then, otherwise, .. } => {
                    self.stmts(p, then);
                    self.stmts(p, otherwise);
                }
                Stmt::Loop { body, update, .. } => {
                    self.stmts(p, body);
                    self.stmts(p, update);
                }
                Stmt::CallAction { after, .. } | Stmt::CallFunction { after, .. } | Stmt::ApplyBlock { after, .. } => {
                    self.stmts(p, after)
                }
                // What a parser extracts goes back as it was read.
                Stmt::Extern { callee: ir::Callee::Method { method, .. }, .. } if method == "extract" => {}
                Stmt::Extern { args, result, .. } => {
                    args.iter().for_each(|a| self.arg(p, a));
                    if let Some(r) = result {
                        self.place(p, r);
                    }
                }
                Stmt::Apply { .. } | Stmt::Break | Stmt::Continue | Stmt::Return | Stmt::Exit | Stmt::At(_) => {}
            }
        }
    }

    fn arg(&mut self, p: &ir::Program, arg: &CallArg) {
        if let CallArg::Out(place) | CallArg::InOut(place) = arg {
            self.place(p, place);
        }
    }

    /// A place written: the header field it is, or every header field inside it.
    fn place(&mut self, p: &ir::Program, place: &Place) {
        let mut ty = p.variables[place.var].ty.clone();
        let mut field_of = None;
        for step in &place.steps {
            (field_of, ty) = match (step, &ty) {
                (Step::Field(i), Ty::Header(a)) => (Some((*a, *i)), p.aggregates[*a].fields[*i].1.clone()),
                (Step::Field(i), Ty::Struct(a) | Ty::Union(a)) => (None, p.aggregates[*a].fields[*i].1.clone()),
                (Step::Field(i), Ty::Tuple(parts)) => (None, parts[*i].clone()),
                (Step::Elem(_) | Step::Next | Step::Last, Ty::Stack(element, _)) => (None, (**element).clone()),
                // A stack's next index is not in the frame.
                (Step::NextIndex, _) => return,
                // A step the IR does not make: every field of every header may change.
                _ => {
                    (0..p.aggregates.len()).for_each(|a| self.every_field(p, &Ty::Header(a)));
                    return;
                }
            };
        }
        match field_of {
            Some(f) => {
                self.fields.insert(f);
            }
            None => self.every_field(p, &ty),
        }
    }

    fn every_field(&mut self, p: &ir::Program, ty: &Ty) {
        match ty {
            Ty::Header(a) => self.fields.extend((0..p.aggregates[*a].fields.len()).map(|i| (*a, i))),
            Ty::Struct(a) | Ty::Union(a) => {
                for (_, t) in p.aggregates[*a].fields.clone() {
                    self.every_field(p, &t);
                }
            }
            Ty::Stack(element, _) => self.every_field(p, element),
            Ty::Tuple(parts) => parts.iter().for_each(|t| self.every_field(p, t)),
            _ => {}
        }
    }
}
