//! The kernel back end's driver over the mid end's IR (issue 52, item 1): the printer's state,
//! the order the package's blocks are printed in, where each IR variable lives in the run's
//! state, and the C types of the IR's types. The statements, expressions, externs, tables, the
//! parser and the entry point are each printed by the file of that name beside this one.
//!
//! Every IR variable has one place (P4 does not recurse): the package's blocks' parameters are
//! the run's `hdr`, `meta` and `sm`, shared by the blocks as the architecture passes them on;
//! any other variable is a member of the run struct, declared when first used. Actions,
//! functions, tables and sub-blocks are C functions over the run, printed when first called.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;

use super::{ident, no, ones, KernelMeter, KernelTable, R};
use crate::diag::Pos;
use crate::midend::ir::{self, AggregateKind, Ty};

/// What the function being printed is: where `exit`, `return` and a parser's reject go.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Context {
    /// A control's apply, an action or a function: a `void` C function.
    Control,
    /// A parser's states: an `int` C function, `reject` its label.
    Parser,
}

pub(super) struct Printer<'a> {
    pub ir: &'a ir::Program,
    pub v1model: bool,
    /// Each variable's C lvalue, once known (`None`: not used yet).
    pub vars: Vec<Option<String>>,
    /// Struct types, then maps: what precedes the run struct.
    pub types: String,
    pub maps: String,
    /// Functions in the order C needs them (a callee before its caller).
    pub funcs: String,
    pub run_members: String,
    pub tables: Vec<KernelTable>,
    /// The kernel table of each IR table once printed.
    pub table_of: HashMap<usize, usize>,
    pub counters: Vec<(String, String, usize)>,
    pub registers: Vec<(String, String, usize)>,
    pub accounts: Vec<(String, String, usize)>,
    pub meters: Vec<KernelMeter>,
    pub value_sets: Vec<super::value_set::KernelValueSet>,
    pub max_args: usize,
    pub temps: usize,
    /// Where a refusal points: the declaration or call being printed.
    pub at: Option<Pos>,
    pub context: Context,
    /// Actions, functions and blocks already printed.
    pub printed: BTreeSet<String>,
    declared: Vec<bool>,
    stack_types: BTreeSet<String>,
    pub hash_buf: bool,
    /// The header fields the program may change (the deparser writes back only those).
    pub written: super::written::Written,
}

impl<'a> Printer<'a> {
    pub fn new(ir: &'a ir::Program, v1model: bool) -> Self {
        Printer {
            ir,
            v1model,
            vars: vec![None; ir.variables.len()],
            types: String::new(),
            maps: String::new(),
            funcs: String::new(),
            run_members: String::new(),
            tables: Vec::new(),
            table_of: HashMap::new(),
            counters: Vec::new(),
            registers: Vec::new(),
            accounts: Vec::new(),
            meters: Vec::new(),
            value_sets: Vec::new(),
            max_args: 1,
            temps: 0,
            at: None,
            context: Context::Control,
            printed: BTreeSet::new(),
            declared: vec![false; ir.aggregates.len()],
            stack_types: BTreeSet::new(),
            hash_buf: false,
            written: super::written::Written::of(ir),
        }
    }

    pub fn temp(&mut self, what: &str) -> String {
        self.temps += 1;
        format!("{what}{}", self.temps)
    }

    /// The package's blocks in the architecture's order: the parser, ingress, egress, the
    /// deparser, and v1model's two checksum controls.
    pub fn print(&mut self) -> R<super::entry::Blocks> {
        let package: Vec<usize> = self
            .ir
            .blocks
            .iter()
            .map(|n| self.ir.blocks_code.iter().position(|b| &b.name == n).ok_or_else(|| no(format!("block {n}"))))
            .collect::<R<_>>()?;
        let want = if self.v1model { 6 } else { 4 };
        if package.len() != want {
            return Err(no(format!("package {} of {} blocks", self.ir.package, package.len())));
        }
        for &b in &package {
            self.bind_params(b)?;
        }
        let (parser, checks, ingress, egress, deparser) = if self.v1model {
            (package[0], vec![package[1], package[4]], package[2], package[3], package[5])
        } else {
            (package[0], Vec::new(), package[1], package[2], package[3])
        };
        self.parser_block(parser, "p4_parse")?;
        let mut order = Vec::new();
        order.extend(checks.first().copied());
        order.extend([ingress, egress]);
        order.extend(checks.get(1).copied());
        for b in order {
            self.control_block(b, &format!("p4_ctl_{}", ident(&self.ir.blocks_code[b].name)), false)?;
        }
        self.control_block(deparser, "p4_deparse", true)?;
        if self.funcs.contains("f_egress_rid") {
            return Err(no("standard_metadata.egress_rid (replication ids)"));
        }
        let name = |b: usize| ident(&self.ir.blocks_code[b].name);
        Ok(super::entry::Blocks {
            ingress: name(ingress),
            egress: name(egress),
            checks: checks.iter().map(|b| name(*b)).collect(),
            egress_writes_headers: self.writes_headers(egress),
            headers_written: self.written.any(),
            // Every time the program sees (the standard metadata's timestamps, meters, AFDX
            // accounts) is read from the run's `f_timestamp`: without one, no clock is read.
            reads_clock: self.funcs.contains("timestamp"),
        })
    }

    /// A package block's parameters: the run's headers, metadata and standard metadata, as
    /// each architecture passes them from block to block.
    fn bind_params(&mut self, b: usize) -> R<()> {
        let block = &self.ir.blocks_code[b];
        let packet = |v: usize| matches!(&self.ir.variables[v].ty, Ty::Opaque(_));
        let params: Vec<usize> = block.params.iter().map(|(v, _)| *v).collect();
        let names: &[&str] = match (&block.body, params.len()) {
            (ir::BlockBody::Parser(_), 4) => &["", "r->hdr", "r->meta", "r->sm"],
            (ir::BlockBody::Control(_), 3) => &["r->hdr", "r->meta", "r->sm"],
            (ir::BlockBody::Control(_), 2) if packet(params[0]) => &["", "r->hdr"],
            (ir::BlockBody::Control(_), 2) => &["r->hdr", "r->meta"],
            _ => return Err(no(format!("block {}'s parameters", block.name))),
        };
        for (v, c) in params.iter().zip(names) {
            if !c.is_empty() {
                self.vars[*v] = Some(c.to_string());
            }
        }
        Ok(())
    }

    /// The run struct's three shared members' types (headers, metadata, standard metadata).
    pub fn shared_types(&mut self) -> R<[String; 3]> {
        let parser = self.ir.blocks_code.iter().position(|b| b.name == self.ir.blocks[0]).unwrap_or(0);
        let params = self.ir.blocks_code[parser].params.clone();
        let mut out = [String::new(), String::new(), String::new()];
        for (k, (v, _)) in params.iter().skip(1).take(3).enumerate() {
            out[k] = self.c_type(&self.ir.variables[*v].ty.clone())?;
        }
        Ok(out)
    }

    /// Variable `v`'s C lvalue, a run member declared at its first use.
    pub fn var(&mut self, v: usize) -> R<String> {
        if let Some(c) = &self.vars[v] {
            return Ok(c.clone());
        }
        let var = &self.ir.variables[v];
        let ty = self.c_type(&var.ty.clone())?;
        let member = format!("v{v}");
        let _ = writeln!(self.run_members, "\t{ty} {member}; /* {} */", var.name.replace("*/", "* /"));
        let c = format!("r->{member}");
        self.vars[v] = Some(c.clone());
        Ok(c)
    }

    /// An aggregate's C name: its P4 name, with its number where two share one.
    fn aggregate_name(&self, i: usize) -> String {
        let name = &self.ir.aggregates[i].name;
        if self.ir.aggregates.iter().filter(|a| a.name == *name).count() > 1 {
            format!("{}_{i}", ident(name))
        } else {
            ident(name)
        }
    }

    /// The C type of an IR type, declaring structs as they are met.
    pub fn c_type(&mut self, ty: &Ty) -> R<String> {
        Ok(match ty {
            // int<W> as its two's-complement bits, as the software target holds it; the
            // operators that see the sign (comparisons, >>, |+|, |-|, widening) sign-extend.
            Ty::Bit(w) | Ty::Int(w) if *w <= 64 => "__u64".into(),
            Ty::Bit(w) => return Err(no(format!("bit<{w}>"))),
            Ty::Int(w) => return Err(no(format!("int<{w}>"))),
            Ty::Bool | Ty::Error | Ty::Enum(_) => "__u64".into(),
            Ty::Header(i) | Ty::Struct(i) | Ty::Union(i) => {
                self.declare(*i)?;
                let prefix = match self.ir.aggregates[*i].kind {
                    AggregateKind::Header => "p4h",
                    AggregateKind::Struct => "p4s",
                    AggregateKind::Union => "p4u",
                };
                format!("struct {prefix}_{}", self.aggregate_name(*i))
            }
            // Its headers in an array, and how many a parser has filled (`nextIndex`).
            Ty::Stack(elem, n) => {
                let e = match &**elem {
                    Ty::Header(_) | Ty::Union(_) => self.c_type(elem)?,
                    other => return Err(no(format!("a stack of {}", self.p4_type(other)))),
                };
                let name = format!("p4k_{}_{n}", e.trim_start_matches("struct "));
                if self.stack_types.insert(name.clone()) {
                    let _ = writeln!(self.types, "struct {name} {{\n\t{e} e[{n}];\n\t__u64 next;\n}};");
                }
                format!("struct {name}")
            }
            Ty::Tuple(_) => return Err(no(format!("the tuple {}", self.p4_type(ty)))),
            other => return Err(no(format!("a value of type {}", self.p4_type(other)))),
        })
    }

    /// A type as P4 writes it, for refusals.
    pub fn p4_type(&self, ty: &Ty) -> String {
        match ty {
            Ty::Bit(w) => format!("bit<{w}>"),
            Ty::Int(w) => format!("int<{w}>"),
            Ty::Bool => "bool".into(),
            Ty::Error => "error".into(),
            Ty::Header(i) | Ty::Struct(i) | Ty::Union(i) => self.ir.aggregates[*i].name.clone(),
            Ty::Enum(i) => self.ir.enums[*i].name.clone(),
            Ty::Stack(e, n) => format!("{}[{n}]", self.p4_type(e)),
            Ty::Varbit(w) => format!("varbit<{w}>"),
            Ty::Tuple(items) => {
                format!("tuple<{}>", items.iter().map(|t| self.p4_type(t)).collect::<Vec<_>>().join(", "))
            }
            Ty::Opaque(n) => n.clone(),
        }
    }

    fn declare(&mut self, i: usize) -> R<()> {
        if self.declared[i] {
            return Ok(());
        }
        self.declared[i] = true;
        let a = self.ir.aggregates[i].clone();
        let header = a.kind == AggregateKind::Header;
        let mut s = String::new();
        if header {
            // Where the parser read it in the frame (the deparser writes it back there only);
            // 0xffffffff for a header made valid here.
            s += "\t__u64 valid;\n\t__u64 at;\n";
        }
        let fixed_bits: u32 = a.fields.iter().map(|(_, t)| if let Ty::Bit(w) | Ty::Int(w) = t { *w } else { 0 }).sum();
        for (k, (f, t)) in a.fields.iter().enumerate() {
            if header {
                match t {
                    Ty::Bit(w) | Ty::Int(w) if *w <= 64 => {}
                    Ty::Bool => {}
                    // Its bits stay in the frame (the deparser writes in place): the header
                    // keeps their length only, so the varbit must end the header and start on a byte.
                    Ty::Varbit(_) if k + 1 == a.fields.len() && fixed_bits.is_multiple_of(8) => {
                        let _ = writeln!(s, "\t__u64 f_{}; /* its length in bits */", ident(f));
                        continue;
                    }
                    Ty::Varbit(n) => {
                        return Err(no(format!("the varbit<{n}> field {}.{f} before the header's end", a.name)))
                    }
                    other => return Err(no(format!("header field {}.{f} of type {}", a.name, self.p4_type(other)))),
                }
            }
            let c = self.c_type(t)?;
            let _ = writeln!(s, "\t{c} f_{};", ident(f));
        }
        if a.fields.is_empty() && !header {
            s += "\t__u64 unused;\n";
        }
        if self.v1model && a.name == "standard_metadata_t" {
            // What the runtime keeps per frame beside v1model's fields (meters read the time).
            s += "\t__u64 f_timestamp;\n";
        }
        let prefix = match a.kind {
            AggregateKind::Header => "p4h",
            AggregateKind::Struct => "p4s",
            AggregateKind::Union => "p4u",
        };
        let _ = write!(self.types, "struct {prefix}_{} {{\n{s}}};\n", self.aggregate_name(i));
        Ok(())
    }

    /// An aggregate's fields (of a header, struct or union type).
    pub fn fields(&self, ty: &Ty) -> Vec<(String, Ty)> {
        match ty {
            Ty::Header(i) | Ty::Struct(i) | Ty::Union(i) => self.ir.aggregates[*i].fields.clone(),
            _ => Vec::new(),
        }
    }

    pub fn error_index(&self, n: &str) -> u64 {
        self.ir.errors.iter().position(|e| e == n).unwrap_or(0) as u64
    }

    /// The name the control plane and the software target know an instance or table by
    /// (`Block.name` by the block's declaration, `.name` at the top level).
    pub fn switch_name(&self, qualified: &str) -> String {
        self.ir.control_name(qualified)
    }

    /// The most headers a stack of the program holds (1 without stacks).
    pub fn largest_stack(&self) -> usize {
        fn largest(t: &Ty) -> usize {
            match t {
                Ty::Stack(e, n) => (*n as usize).max(largest(e)),
                _ => 1,
            }
        }
        let fields = self.ir.aggregates.iter().flat_map(|a| a.fields.iter().map(|(_, t)| largest(t)));
        let vars = self.ir.variables.iter().map(|v| largest(&v.ty));
        fields.chain(vars).max().unwrap_or(1)
    }

    /// Whether egress may change headers (a write under its header parameter, in its body, its
    /// actions, or its tables' actions): then multicast copies may differ, and go up.
    fn writes_headers(&self, egress: usize) -> bool {
        let block = &self.ir.blocks_code[egress];
        let Some(&(hdr, _)) = block.params.first() else { return true };
        let ir::BlockBody::Control(body) = &block.body else { return true };
        let mut seen = BTreeSet::new();
        self.writes(body, hdr, &mut seen)
    }

    fn writes(&self, stmts: &[ir::Stmt], hdr: usize, seen: &mut BTreeSet<String>) -> bool {
        use ir::Stmt as S;
        stmts.iter().any(|s| match s {
            S::Assign { place, .. } | S::Init(place) => place.var == hdr,
            S::SetValid { header, .. } => header.var == hdr,
            S::PushFront { stack, .. } | S::PopFront { stack, .. } => stack.var == hdr,
            S::If { then, otherwise, .. } => self.writes(then, hdr, seen) || self.writes(otherwise, hdr, seen),
            S::Loop { body, update, .. } => self.writes(body, hdr, seen) || self.writes(update, hdr, seen),
            S::CallAction { action, after } => {
                self.writes(after, hdr, seen)
                    || (seen.insert(format!("a{action}")) && self.writes(&self.ir.actions[*action].body, hdr, seen))
            }
            S::CallFunction { after, .. } | S::ApplyBlock { after, .. } => self.writes(after, hdr, seen),
            S::Apply { table, .. } => self.ir.tables[*table].actions.iter().any(|ta| {
                ta.bound.iter().any(|b| matches!(b, ir::CallArg::Out(p) | ir::CallArg::InOut(p) if p.var == hdr))
                    || (seen.insert(format!("a{}", ta.action))
                        && self.writes(&self.ir.actions[ta.action].body, hdr, seen))
            }),
            S::Extern { args, result, .. } => {
                result.as_ref().is_some_and(|p| p.var == hdr)
                    || args.iter().any(|b| matches!(b, ir::CallArg::Out(p) | ir::CallArg::InOut(p) if p.var == hdr))
            }
            _ => false,
        })
    }
}

/// The all-ones mask of a type's width, as C.
pub(super) fn mask_c(ty: &Ty) -> String {
    format!("{:#x}ULL", ones(width(ty)))
}

pub(super) fn width(ty: &Ty) -> u32 {
    match ty {
        Ty::Bit(w) | Ty::Int(w) => *w,
        Ty::Bool => 1,
        _ => 64,
    }
}

pub(super) fn scalar(ty: &Ty) -> bool {
    matches!(ty, Ty::Bit(_) | Ty::Int(_) | Ty::Bool | Ty::Error | Ty::Enum(_))
}
