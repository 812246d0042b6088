//! The kernel back end (issue 36, item 2): a checked program as BPF C, which clang compiles for
//! TC and XDP as it compiles the fast path, with the maps its tables, counters and registers
//! live in. Pure: program in, C text and the maps' layouts out; the datapath compiles, loads and
//! fills them ([`KernelTable`], [`table_key`], [`table_value`] and [`scan_entry`] say how an
//! entry is written).
//!
//! Why C and not bytecode written here: clang is already the fast path's compiler, the verifier
//! wants bounds checks and bounded loops that C and a header express plainly, and the output can
//! be read. p4c's eBPF back ends make the same choice.
//!
//! What fits (the rest is refused by name, and the program then runs in userspace): values of at
//! most 64 bits, `bit<W>` and `int<W>`; a parser over at most 256 bytes of headers, its loops
//! unrolled; header stacks (run-time indices as a switch over the headers); tables whose keys
//! are exact (a hash), a single LPM key (an LPM trie), or any others in a table of at most 256
//! entries (scanned in the software target's order: longest prefix, then priority, then the
//! earliest); actions, functions and sub-blocks inlined or called with
//! explicit copies; header unions; varbit fields that end their header; v1model's checksums and
//! hashes; a deparser that writes back in place the headers the parser read (checked as the
//! frame goes: one that would not is sent up). Multicast copies leave unchanged by egress.
//! AFDX accounts run as the fast path's do, shared by every CPU without a lock, and so do meters:
//! each of a cell's two buckets is one word taken by compare-and-swap, with the software target's
//! arithmetic (`p4::backends::software::take`).
//!
//! The generated program keeps its state (a copy of the frame's first 256 bytes, the headers,
//! metadata and the control's variables) in a per-CPU map, not on the 512-byte stack, and
//! records its verdict in `p4_verdict` (tests read it after BPF_PROG_TEST_RUN).
//!
//! About 3 060 lines, one concern: the translation of every construct that fits into C, with the
//! entry point beside it. Splitting the
//! expression, statement and block translators apart would split the one scope stack and the
//! one set of maps they share, as `frontend/check.rs` and `software/mod.rs` would. The C runtime
//! the translations call is `runtime.h` beside this file.

use std::collections::HashMap;
use std::fmt::Write as _;

mod entry;
mod expr;
mod externs;
mod parser;
mod printer;
mod stmt;
mod tables;

use crate::arch::Architecture;
use crate::diag::Pos;
use crate::frontend::ast::{
    BinOp, Decl, Direction, Expr, ExprKind, Keyset, Local, Program, Stmt, Transition, Type, UnOp,
};
use crate::frontend::check::{Checked, Layout, Ty};

/// How much of the frame the parser and deparser see.
pub const BUF: usize = 256;
/// The most bytes of data a v1model `hash` takes in the kernel.
const HASH_BYTES_MAX: u32 = 64;
/// The most entries a scanned (ternary, range, several-LPM) table holds in the kernel.
pub const SCAN_MAX: usize = 256;
/// The most ports a multicast group sends to in the kernel.
pub const GROUP_MAX: usize = 16;
/// The DEVMAPs (`p4_fanout_N`) XDP broadcasts a group's copies into: groups beyond these go up.
pub const FANOUTS: usize = 8;
/// A verdict's kind and reason as the runtime's `enum p4_kind` and `enum p4_reason` number
/// them (in `p4_verdict` and `p4_stats`).
pub mod verdict {
    pub const DROP: u32 = 0;
    pub const FORWARD: u32 = 1;
    pub const UP: u32 = 2;
    pub const NONE: u32 = 0;
    pub const PARSER: u32 = 1;
    pub const PROGRAM: u32 = 2;
    pub const NO_PORT: u32 = 3;
    pub const MISFIT: u32 = 4;
    /// The cells of `p4_stats`.
    pub const STATS: u32 = 16;
}

/// `p4_stats`' slot for a verdict: kind × 5 + reason (see [`verdict`]).
pub fn stats_slot(kind: u32, reason: u32) -> u32 {
    kind * 5 + reason
}

/// How a table's entries are kept in the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableKind {
    /// A hash keyed by the key fields, 8 bytes each.
    Exact,
    /// An LPM trie: a 4-byte prefix length, then the key's bytes in network order.
    Lpm,
    /// An array of entries scanned in order (ternary, range, several LPM keys).
    Scan,
}

/// One table as the kernel holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelTable {
    /// `Block.table`, as the software target names it.
    pub target: String,
    /// Its number: its default action's slot in `p4_defaults`.
    pub number: u32,
    pub map: String,
    /// Per-entry hits (packets, bytes), per CPU, by the entry's index.
    pub hits_map: String,
    pub kind: TableKind,
    /// (width, match kind) per key.
    pub keys: Vec<(u32, String)>,
    /// Action ids are positions here, from 1.
    pub actions: Vec<String>,
    /// Entries the kernel holds at most.
    pub size: usize,
    /// Its direct meter (`meters = ...`), a cell per entry index.
    pub meter: Option<KernelMeter>,
}

/// The program as C, and the maps a control plane fills.
#[derive(Clone, Debug)]
pub struct Generated {
    pub c: String,
    pub tables: Vec<KernelTable>,
    /// Indirect counters: (`Block.name`, map, cells).
    pub counters: Vec<(String, String, usize)>,
    /// Registers: (`Block.name`, map, cells).
    pub registers: Vec<(String, String, usize)>,
    /// AFDX accounts: (`Block.name`, map, cells). A cell is the account's one word (see
    /// `p4_conforms`): 0 is a full account.
    pub accounts: Vec<(String, String, usize)>,
    /// Indirect meters.
    pub meters: Vec<KernelMeter>,
    /// The most action data an entry carries (the value's `args`).
    pub max_args: usize,
    /// What names this C, and the layout above, in the object clang makes of it (its
    /// [`FINGERPRINT_SECTION`]): an object compiled elsewhere (`edgeflow p4 compile -o`) runs a
    /// program only where the program generates the same C, so that the maps are what the
    /// control plane writes.
    pub fingerprint: String,
}

/// The object's section that holds [`Generated::fingerprint`], NUL-terminated.
pub const FINGERPRINT_SECTION: &str = "edgeflow_p4";

/// 128 bits of FNV-1a (two 64-bit lanes, different seeds) over the C: not a signature, which an
/// operator who names both the program and the object does not need, but a check that they
/// belong together.
fn fingerprint(c: &str) -> String {
    let lane = |seed: u64| c.bytes().fold(seed, |h, b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3));
    format!("{:016x}{:016x}", lane(0xcbf2_9ce4_8422_2325), lane(0x6c62_272e_07bb_0142))
}

/// A meter's cells in the kernel: their rates (`meter_rates`), which the control plane writes,
/// and their two bucket words (committed, peak: `p4::backends::software::take`), which the kernel's frames
/// change; a zeroed word is a full bucket. A table's direct meter has a cell per entry index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelMeter {
    /// `Block.name`.
    pub name: String,
    pub rates_map: String,
    pub words_map: String,
    pub cells: usize,
    /// Counts bytes (MeterType.bytes), else packets.
    pub bytes: bool,
}

/// A meter cell's rates as the kernel reads them: committed rate and burst, peak rate and
/// burst; zeros for a cell the control plane has not set (everything green).
pub fn meter_rates(rates: Option<[u64; 4]>) -> Vec<u8> {
    rates.unwrap_or_default().iter().flat_map(|r| r.to_ne_bytes()).collect()
}

/// A table value as the kernel reads it: action id, entry index, then `max_args` data words.
pub fn table_value(t: &KernelTable, action: &str, index: u32, args: &[u128], max_args: usize) -> Option<Vec<u8>> {
    let id = t.actions.iter().position(|a| a == action)? as u32 + 1;
    let mut v = Vec::with_capacity(8 + 8 * max_args);
    v.extend_from_slice(&id.to_ne_bytes());
    v.extend_from_slice(&index.to_ne_bytes());
    for i in 0..max_args {
        v.extend_from_slice(&(args.get(i).copied().unwrap_or(0) as u64).to_ne_bytes());
    }
    Some(v)
}

/// The key bytes of an exact or LPM table entry (`Scan` tables take [`scan_entry`]).
pub fn table_key(t: &KernelTable, keys: &[crate::backends::software::Match]) -> Option<Vec<u8>> {
    use crate::backends::software::Match;
    match t.kind {
        TableKind::Exact => {
            let mut k = Vec::new();
            for m in keys {
                let Match::Exact(v) = m else { return None };
                k.extend_from_slice(&(*v as u64).to_ne_bytes());
            }
            Some(k)
        }
        TableKind::Lpm => {
            let width = t.keys[0].0;
            let bytes = width.div_ceil(8) as usize;
            let (value, prefix) = match keys {
                [Match::Lpm { value, prefix }] => (*value, *prefix),
                [Match::Exact(v)] => (*v, width),
                [Match::Any] => (0, 0),
                // `value &&& mask` in an LPM table's entries: a prefix when the mask is one.
                [Match::Ternary { value, mask }] => {
                    let full = (1u128 << width) - 1;
                    let prefix = (mask & full).count_ones();
                    let as_prefix = if prefix == 0 { 0 } else { full & !((1u128 << (width - prefix)) - 1) };
                    if mask & full != as_prefix {
                        return None;
                    }
                    (*value & as_prefix, prefix)
                }
                _ => return None,
            };
            // The trie compares from the first byte's top bit: a key of a width that is not whole
            // bytes goes in left-aligned, its prefix first (as the lookup builds it).
            let pad = 8 * bytes as u32 - width;
            let mut k = prefix.to_ne_bytes().to_vec();
            k.extend_from_slice(&(value << pad).to_be_bytes()[16 - bytes..]);
            Some(k)
        }
        TableKind::Scan => None,
    }
}

/// A scanned table's entry: present, priority, then per key (value, mask, low, high), then the
/// value of [`table_value`].
pub fn scan_entry(t: &KernelTable, keys: &[crate::backends::software::Match], priority: i64, value: &[u8]) -> Vec<u8> {
    use crate::backends::software::Match;
    let mut e = Vec::new();
    e.extend_from_slice(&1u64.to_ne_bytes());
    e.extend_from_slice(&priority.to_ne_bytes());
    let mut lpm_len = 0u64;
    for (m, (w, _)) in keys.iter().zip(&t.keys) {
        let all = ones(*w) as u128;
        let (value, mask, low, high) = match *m {
            Match::Exact(v) => (v, all, 0, all),
            Match::Ternary { value, mask } => (value, mask, 0, all),
            Match::Lpm { value, prefix } => {
                lpm_len += prefix as u64;
                let mask = if prefix == 0 { 0 } else { all & !(ones(w - prefix.min(*w)) as u128) };
                (value, mask, 0, all)
            }
            Match::Range { low, high } => (0, 0, low, high),
            Match::Any => (0, 0, 0, all),
        };
        for x in [value, mask, low, high] {
            e.extend_from_slice(&(x as u64).to_ne_bytes());
        }
    }
    e.extend_from_slice(&lpm_len.to_ne_bytes());
    e.extend_from_slice(value);
    e
}

fn ones(w: u32) -> u64 {
    if w >= 64 {
        u64::MAX
    } else {
        (1u64 << w) - 1
    }
}

fn no(what: impl std::fmt::Display) -> String {
    format!("{what} does not fit the kernel back end (docs/p4.md); the program runs in userspace")
}

type R<T> = Result<T, String>;

/// A name in scope: its C expression and type.
#[derive(Clone)]
struct Var {
    c: String,
    ty: Ty,
}

struct Gen<'a> {
    program: &'a Program,
    checked: &'a Checked,
    /// A V1Switch: v1model's metadata and drop port, its two checksum controls.
    v1model: bool,
    out: String,
    scopes: Vec<HashMap<String, Var>>,
    errors: Vec<String>,
    tables: Vec<KernelTable>,
    counters: Vec<(String, String, usize)>,
    registers: Vec<(String, String, usize)>,
    accounts: Vec<(String, String, usize)>,
    meters: Vec<KernelMeter>,
    /// Direct meters: (`Block.name`, counts bytes).
    direct_meters: Vec<(String, bool)>,
    /// Direct counters, by `Block.name`: their tables count every entry's hits anyway.
    direct: Vec<String>,
    /// The run's members holding where each header instance was read (`r->at_hdr_f_ipv4`).
    headers: Vec<String>,
    block: String,
    max_args: usize,
    /// Run-struct members: the blocks' own variables.
    run_members: String,
    /// Where `exit` goes in the code being generated.
    exit_label: String,
    /// What a `return` statement becomes: the function's return, or the end of an inlined
    /// sub-control.
    return_stmt: String,
    /// Where a function's `return e` puts its value (the run member inlined calls read), and
    /// its type; none outside functions.
    returns: Option<(String, Ty)>,
    /// Instances of the program's own parsers and controls (`Block.instance` → its type), and
    /// the types already inlined (each at one place: its tables and actions are generated there).
    sub_blocks: HashMap<String, String>,
    inlined: std::collections::HashSet<String>,
    /// Sub-parsers' states, placed after the parser's own (they are reached by goto).
    deferred_states: String,
    /// Functions, after the types, maps and the run struct they use.
    funcs: String,
    /// Each table's key expressions, as C in its control's scope.
    table_keys: Vec<Vec<String>>,
    /// Each table's actions' arguments bound in its action list (`actions = { a(hdr.x); }`),
    /// as C in its control's scope: copy-in before the call, the call's arguments, copy-out.
    table_bound_args: Vec<Vec<Option<(String, String, String)>>>,
    /// How many call-site temporaries have been named (copy-in, copy-out of action arguments).
    temps: usize,
    /// The statement or declaration being generated: where a refusal points.
    at: Option<Pos>,
    /// Generating the parser's states (or a sub-parser's): an index past a stack rejects the
    /// frame there with `StackOutOfBounds`, where a control's sends the frame up.
    in_parser: bool,
    /// Header stacks' C structs (`struct p4k_...`), by name, and those not yet placed in the
    /// output (before the first struct that holds one, or before the run struct): `c_type`
    /// meets a stack's type where it cannot write the output.
    stack_types: std::cell::RefCell<std::collections::BTreeSet<String>>,
    stack_defs: std::cell::RefCell<String>,
}

/// C for the checked program `program`, or why it does not fit.
pub fn generate(program: &Program, checked: &Checked) -> R<Generated> {
    if std::env::var_os("EDGEFLOW_P4_KERNEL_IR").is_some() {
        return generate_ir(program, checked);
    }
    generate_at(program, checked).map_err(|(_, e)| e)
}

/// As [`generate`], a refusal led by the file, line and column of the statement or declaration
/// that holds what does not fit: `file` is the program's path (as given to the front end).
pub fn generate_in(file: &str, program: &Program, checked: &Checked) -> R<Generated> {
    if std::env::var_os("EDGEFLOW_P4_KERNEL_IR").is_some() {
        return generate_ir_in(file, program, checked);
    }
    generate_at(program, checked).map_err(|(at, e)| match at {
        Some(pos) => {
            let name = match crate::frontend::lexer::file_name(file, pos.file) {
                "?" => format!("{file} (an included file)"),
                n => n.to_string(),
            };
            format!("{name}:{}:{}: {e}", pos.line, pos.col)
        }
        None => e,
    })
}

/// As [`generate_in`], printed from the mid end's IR (issue 52, item 1) rather than the
/// syntax tree.
pub fn generate_ir_in(file: &str, program: &Program, checked: &Checked) -> R<Generated> {
    let ir = crate::midend::lower::lower_file(file, program, checked)?;
    print_ir(&ir, checked).map_err(|(at, e)| match at {
        Some(pos) => {
            let name = match crate::frontend::lexer::file_name(file, pos.file) {
                "?" => format!("{file} (an included file)"),
                n => n.to_string(),
            };
            format!("{name}:{}:{}: {e}", pos.line, pos.col)
        }
        None => e,
    })
}

/// As [`generate`], printed from the mid end's IR.
pub fn generate_ir(program: &Program, checked: &Checked) -> R<Generated> {
    let ir = crate::midend::lower(program, checked)?;
    print_ir(&ir, checked).map_err(|(_, e)| e)
}

/// The C of a lowered program, or why it does not fit (and where).
fn print_ir(ir: &crate::midend::ir::Program, checked: &Checked) -> Result<Generated, (Option<Pos>, String)> {
    let v1model = match Architecture::of(checked) {
        Some(Architecture::Edgeflow) => false,
        Some(Architecture::V1Model) => true,
        _ => return Err((None, no(format!("package {}", checked.package)))),
    };
    let mut p = printer::Printer::new(ir, v1model);
    let printed = p.print().and_then(|blocks| Ok((blocks, p.shared_types()?)));
    let (blocks, [hdr_ty, meta_ty, sm_ty]) = printed.map_err(|e| (p.at, e))?;
    let entry = entry::entry(v1model, &blocks);
    // Everything before `buf` is zeroed for each frame, in 8-byte words (`align` keeps `buf`
    // on a word).
    let run = format!(
        "struct p4_run {{\n\t{hdr_ty} hdr;\n\t{meta_ty} meta;\n\t{sm_ty} sm;\n\t\
         {meta_ty} saved_meta;\n\t{sm_ty} saved_sm;\n{}\t__u32 len;\n\t__u32 off;\n\t\
         __u32 emitted;\n\t__u32 misfit;\n\t__u32 hit;\n\t__u32 action_run;\n\t__u32 exited;\n\t__u32 others_dropped;\n\t\
         __u64 align;\n\t__u8 buf[2 * P4_BUF];\n}};\n\
         EF_MAP(p4_scratch, BPF_MAP_TYPE_PERCPU_ARRAY, 4, sizeof(struct p4_run), 1);\n\n",
        p.run_members
    );
    let head = format!(
        "/* Generated by edgeflow from a P4 program (crates/p4/src/backends/ebpf): do not edit. */\n\
         #define P4_BUF {BUF}\n#define P4_GROUP_MAX {GROUP_MAX}\n#define P4_MAX_ARGS {}\n#define P4_TABLES {}\n",
        p.max_args.max(1),
        p.tables.len().max(1)
    );
    let mut c = format!("{head}{RUNTIME}\n{}{}\n{run}\n{}{entry}", p.types, p.maps, p.funcs);
    let fingerprint = fingerprint(&c);
    let _ = writeln!(
        c,
        "\nconst char p4_fingerprint[] __attribute__((section(\"{FINGERPRINT_SECTION}\"), used)) = \"{fingerprint}\";"
    );
    Ok(Generated {
        fingerprint,
        c,
        tables: p.tables,
        counters: p.counters,
        registers: p.registers,
        accounts: p.accounts,
        meters: p.meters,
        max_args: p.max_args,
    })
}

fn generate_at(program: &Program, checked: &Checked) -> Result<Generated, (Option<Pos>, String)> {
    let main = program.decls.iter().find_map(|d| match d {
        Decl::Instance(i) if i.name.text == "main" => Some(i.name.pos),
        _ => None,
    });
    let v1model = match Architecture::of(checked) {
        Some(Architecture::Edgeflow) => false,
        Some(Architecture::V1Model) => true,
        _ => return Err((main, no(format!("package {}", checked.package)))),
    };
    let errors: Vec<String> = program
        .decls
        .iter()
        .filter_map(|d| match d {
            Decl::Error { members } => Some(members.iter().map(|m| m.text.clone())),
            _ => None,
        })
        .flatten()
        .collect();
    let mut g = Gen {
        program,
        checked,
        out: String::new(),
        scopes: vec![HashMap::new()],
        errors,
        tables: Vec::new(),
        counters: Vec::new(),
        registers: Vec::new(),
        accounts: Vec::new(),
        meters: Vec::new(),
        direct_meters: Vec::new(),
        direct: Vec::new(),
        headers: Vec::new(),
        block: String::new(),
        max_args: 1,
        run_members: String::new(),
        exit_label: String::new(),
        return_stmt: "return;\n".into(),
        returns: None,
        sub_blocks: HashMap::new(),
        inlined: std::collections::HashSet::new(),
        deferred_states: String::new(),
        funcs: String::new(),
        table_keys: Vec::new(),
        table_bound_args: Vec::new(),
        temps: 0,
        at: main,
        in_parser: false,
        stack_types: Default::default(),
        stack_defs: Default::default(),
        v1model,
    };
    if let Err(e) = g.generate() {
        return Err((g.at, e));
    }
    let fingerprint = fingerprint(&g.out);
    let _ = writeln!(
        g.out,
        "\nconst char p4_fingerprint[] __attribute__((section(\"{FINGERPRINT_SECTION}\"), used)) = \"{fingerprint}\";"
    );
    Ok(Generated {
        fingerprint,
        c: g.out,
        tables: g.tables,
        counters: g.counters,
        registers: g.registers,
        accounts: g.accounts,
        meters: g.meters,
        max_args: g.max_args,
    })
}

/// The value of a constant expression: a number, a named constant (the block's, then the
/// program's), or arithmetic on them. An extern's size is one: `counter(N, ...)` with
/// `const bit<32> N = 64` got 1 cell here while the software target had 64.
fn constant(e: &Expr, locals: &[Local], decls: &[Decl]) -> Option<u128> {
    match &e.kind {
        ExprKind::Int { value, .. } => Some(*value),
        ExprKind::Cast(_, inner) => constant(inner, locals, decls),
        ExprKind::Name(n) | ExprKind::TopName(n) => {
            let local = locals.iter().find_map(|l| match l {
                Local::Const { name, value, .. } if name.text == *n && matches!(e.kind, ExprKind::Name(_)) => {
                    Some(value)
                }
                _ => None,
            });
            let global = || {
                decls.iter().find_map(|d| match d {
                    Decl::Const { name, value, .. } if name.text == *n => Some(value),
                    _ => None,
                })
            };
            constant(local.or_else(global)?, locals, decls)
        }
        ExprKind::Binary(op, a, b) => {
            let (a, b) = (constant(a, locals, decls)?, constant(b, locals, decls)?);
            match op {
                BinOp::Add => a.checked_add(b),
                BinOp::Sub => a.checked_sub(b),
                BinOp::Mul => a.checked_mul(b),
                BinOp::Shl => (b < 128).then(|| a << b),
                _ => None,
            }
        }
        _ => None,
    }
}

/// What an expression is, as P4 names it.
fn expression_kind(e: &ExprKind) -> String {
    match e {
        ExprKind::Str(_) => "a string".into(),
        ExprKind::List(_) => "a list expression ({ ... })".into(),
        ExprKind::DontCare => "_ as a value".into(),
        ExprKind::Index(..) => "an index ([...])".into(),
        ExprKind::Call { callee, .. } => format!("the call of {}", callee_text(callee)),
        _ => "this expression".into(),
    }
}

/// A callee as the program writes it: `f`, `x.m`.
fn callee_text(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Name(n) | ExprKind::TopName(n) => n.clone(),
        ExprKind::Member(inner, m) => format!("{}.{}", callee_text(inner), m.text),
        _ => "an expression".into(),
    }
}

fn ident(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

impl<'a> Gen<'a> {
    fn layout(&self, name: &str) -> Option<&'a Layout> {
        self.checked.layouts.get(name)
    }

    fn block_decl(&self, name: &str) -> &'a Decl {
        self.program
            .decls
            .iter()
            .find(|d| matches!(d, Decl::Parser { name: n, .. } | Decl::Control { name: n, .. } if n.text == name))
            .expect("checked")
    }

    /// The C type for a P4 type, declaring structs as needed.
    fn c_type(&self, ty: &Ty) -> R<String> {
        Ok(match ty {
            // int<W> as its two's-complement bits, as the software target holds it; the
            // operators that see the sign (comparisons, >>, |+|, |-|, widening) sign-extend.
            Ty::Bit(w) | Ty::Int(w) if *w <= 64 => "__u64".into(),
            Ty::Bit(w) => return Err(no(format!("bit<{w}>"))),
            Ty::Int(w) => return Err(no(format!("int<{w}>"))),
            Ty::Bool | Ty::Error | Ty::Enum(_) => "__u64".into(),
            Ty::Header(n) => format!("struct p4h_{}", ident(n)),
            Ty::Struct(n) => format!("struct p4s_{}", ident(n)),
            // Its headers in an array, and how many a parser has filled (`nextIndex`).
            Ty::Stack(elem, n) => {
                let e = match &**elem {
                    Ty::Header(_) | Ty::Union(_) => self.c_type(elem)?,
                    other => return Err(no(format!("a stack of {other}"))),
                };
                let name = format!("p4k_{}_{n}", ident(&elem.to_string()));
                if self.stack_types.borrow_mut().insert(name.clone()) {
                    let _ =
                        writeln!(self.stack_defs.borrow_mut(), "struct {name} {{\n\t{e} e[{n}];\n\t__u64 next;\n}};");
                }
                format!("struct {name}")
            }
            Ty::Union(n) => format!("struct p4u_{}", ident(n)),
            Ty::List(_) => return Err(no(format!("the tuple {ty}"))),
            other => return Err(no(format!("a value of type {other}"))),
        })
    }

    fn declare_types(&mut self) -> R<()> {
        // In declaration order, so that a struct's members are declared before it.
        let mut done = std::collections::BTreeSet::new();
        let names: Vec<(String, Pos)> = self
            .program
            .decls
            .iter()
            .filter_map(|d| match d {
                Decl::Header { name, .. } | Decl::Struct { name, .. } | Decl::HeaderUnion { name, .. } => {
                    Some((name.text.clone(), name.pos))
                }
                _ => None,
            })
            .collect();
        for (n, pos) in names {
            self.at = Some(pos);
            self.declare(&n, &mut done)?;
        }
        Ok(())
    }

    fn declare(&mut self, name: &str, done: &mut std::collections::BTreeSet<String>) -> R<()> {
        if !done.insert(name.to_string()) {
            return Ok(());
        }
        let (fields, header) = match self.layout(name) {
            Some(Layout::Header(f)) => (f.clone(), true),
            Some(Layout::Struct(f)) => (f.clone(), false),
            // A header union: its headers side by side, at most one of them valid (`union_settled`).
            Some(Layout::Union(f)) => (f.clone(), false),
            _ => return Ok(()),
        };
        let union = matches!(self.layout(name), Some(Layout::Union(_)));
        for (_, t) in &fields {
            let t = match t {
                Ty::Stack(elem, _) => &**elem,
                t => t,
            };
            if let Ty::Header(n) | Ty::Struct(n) | Ty::Union(n) = t {
                self.declare(n, done)?;
            }
        }
        let mut s = format!(
            "{} {{\n",
            if header {
                format!("struct p4h_{}", ident(name))
            } else if union {
                format!("struct p4u_{}", ident(name))
            } else {
                format!("struct p4s_{}", ident(name))
            }
        );
        if header {
            s += "\t__u64 valid;\n";
        }
        let fixed_bits: u32 = fields.iter().map(|(_, t)| if let Ty::Bit(w) = t { *w } else { 0 }).sum();
        for (i, (f, t)) in fields.iter().enumerate() {
            if header {
                match t {
                    Ty::Bit(w) | Ty::Int(w) if *w <= 64 => {}
                    // Its bits stay in the frame (the deparser writes in place): the header
                    // keeps their length only, so the varbit must end the header and start on a byte.
                    Ty::Varbit(_) if i + 1 == fields.len() && fixed_bits % 8 == 0 => {
                        let _ = writeln!(s, "\t__u64 f_{}; /* its length in bits */", ident(f));
                        continue;
                    }
                    Ty::Varbit(n) => {
                        return Err(no(format!("the varbit<{n}> field {name}.{f} before the header's end")))
                    }
                    other => return Err(no(format!("header field {name}.{f} of type {other}"))),
                }
            }
            let _ = writeln!(s, "\t{} f_{};", self.c_type(t)?, ident(f));
        }
        if fields.is_empty() && !header {
            s += "\t__u64 unused;\n";
        }
        if self.v1model && name == "standard_metadata_t" {
            // What the runtime keeps per frame beside v1model's fields (meters read the time).
            s += "\t__u64 f_timestamp;\n";
        }
        s += "};\n";
        let stacks = std::mem::take(&mut *self.stack_defs.borrow_mut());
        self.out += &stacks;
        self.out += &s;
        Ok(())
    }

    fn lookup(&self, n: &str) -> Option<Var> {
        self.scopes.iter().rev().find_map(|s| s.get(n).cloned())
    }

    fn bind(&mut self, n: &str, c: String, ty: Ty) {
        self.scopes.last_mut().unwrap().insert(n.to_string(), Var { c, ty });
    }

    fn error_index(&self, n: &str) -> u64 {
        self.errors.iter().position(|e| e == n).unwrap_or(0) as u64
    }

    fn enum_index(&self, ty: &str, m: &str) -> Option<u64> {
        match self.layout(ty)? {
            Layout::Enum(ms) => ms.iter().position(|x| x == m).map(|i| i as u64),
            _ => None,
        }
    }

    fn global_const(&self, n: &str) -> Option<(&'a Type, &'a Expr)> {
        self.program.decls.iter().find_map(|d| match d {
            Decl::Const { ty, name, value } if name.text == n => Some((ty, value)),
            _ => None,
        })
    }

    /// An expression's C and type. Numbers without a width come out as `Ty::Number`.
    fn expr(&mut self, e: &Expr) -> R<(String, Ty)> {
        let on_path = match &e.kind {
            ExprKind::Member(..) | ExprKind::Index(..) | ExprKind::Slice(..) => true,
            ExprKind::Call { callee, .. } => matches!(&callee.kind, ExprKind::Member(_, m) if m.text == "isValid"),
            _ => false,
        };
        if on_path {
            if let Some(v) = self.runtime_value(e)? {
                return Ok(v);
            }
        }
        Ok(match &e.kind {
            ExprKind::Index(base, idx) => {
                let k = self.index_constant(idx).ok_or_else(|| no("an index ([...]) here"))?;
                return self.stack_element(base, k);
            }
            ExprKind::Int { width: Some((w, false)), value } => (format!("{value}ULL"), Ty::Bit(*w)),
            ExprKind::Int { width: Some((w, true)), value } if *w <= 64 => {
                (format!("{}ULL", *value & ones(*w) as u128), Ty::Int(*w))
            }
            ExprKind::Int { width: Some((w, true)), .. } => return Err(no(format!("int<{w}> literals"))),
            ExprKind::Int { width: None, value } => {
                if *value > u64::MAX as u128 {
                    return Err(no(format!("the number {value}")));
                }
                (format!("{value}ULL"), Ty::Number)
            }
            ExprKind::Bool(b) => ((*b as u8).to_string(), Ty::Bool),
            ExprKind::Name(n) | ExprKind::TopName(n) => {
                if let Some(v) = self.lookup(n) {
                    return Ok((v.c, v.ty));
                }
                if let Some((ty, value)) = self.global_const(n) {
                    let ty = self.checked.resolve(ty);
                    let (c, _) = self.expr(value)?;
                    return Ok((format!("({c} & {:#x}ULL)", ones(width_of(&ty))), ty));
                }
                return Err(no(format!("the name '{n}' here")));
            }
            ExprKind::Member(inner, m) => {
                if let ExprKind::Name(n) = &inner.kind {
                    if n == "error" {
                        return Ok((self.error_index(&m.text).to_string(), Ty::Error));
                    }
                    // A serializable enum's member is its value (`enum bit<16> E { A = 3 }`).
                    if let (None, Some(Layout::SerEnum(_, members))) = (self.lookup(n), self.layout(n)) {
                        if let Some((_, v)) = members.iter().find(|(x, _)| *x == m.text) {
                            return Ok((format!("{v}ULL"), Ty::Enum(n.clone())));
                        }
                    }
                    if self.lookup(n).is_none() && self.layout(n).is_some() {
                        let i = self.enum_index(n, &m.text).ok_or_else(|| no(format!("{n}.{}", m.text)))?;
                        return Ok((i.to_string(), Ty::Enum(n.clone())));
                    }
                }
                // `t.apply().hit` / `.miss`: the table applied, then whether an entry matched.
                if let (ExprKind::Call { callee, args, .. }, "hit" | "miss") = (&inner.kind, m.text.as_str()) {
                    if let (ExprKind::Member(table, apply), true) = (&callee.kind, args.is_empty()) {
                        if let (ExprKind::Name(t), "apply") = (&table.kind, apply.text.as_str()) {
                            let f = self.table_fn(t)?;
                            let not = if m.text == "miss" { "!" } else { "" };
                            // A statement expression, so that an action's `exit` leaves the control.
                            let exit = &self.exit_label;
                            return Ok((format!("({{ {f}(r); if (r->exited) {exit} {not}r->hit; }})"), Ty::Bool));
                        }
                    }
                }
                let (c, ty) = self.expr(inner)?;
                if let Ty::Stack(_, n) = ty {
                    return match m.text.as_str() {
                        "nextIndex" => Ok((format!("({c}.next & 0xffffffffULL)"), Ty::Bit(32))),
                        "lastIndex" => Ok((format!("(({c}.next - 1) & 0xffffffffULL)"), Ty::Bit(32))),
                        "size" => Ok((format!("{n}ULL"), Ty::Bit(32))),
                        other => Err(no(format!("a stack's '{other}' here"))),
                    };
                }
                let fields = match &ty {
                    Ty::Header(h) | Ty::Struct(h) | Ty::Union(h) => match self.layout(h) {
                        Some(Layout::Header(f) | Layout::Struct(f) | Layout::Union(f)) => f.clone(),
                        _ => return Err(no(format!("member {}", m.text))),
                    },
                    _ => return Err(no(format!("member {} of {}", m.text, ty))),
                };
                let fty = fields.iter().find(|(f, _)| *f == m.text).map(|(_, t)| t.clone());
                let fty = fty.ok_or_else(|| no(format!("member {}", m.text)))?;
                if let Ty::Varbit(n) = fty {
                    return Err(no(format!("the value of the varbit<{n}> field {}", m.text)));
                }
                (format!("{c}.f_{}", ident(&m.text)), fty)
            }
            ExprKind::Slice(inner, hi, lo) => {
                let (c, _) = self.expr(inner)?;
                let (h, l) = match (&hi.kind, &lo.kind) {
                    (ExprKind::Int { value: h, .. }, ExprKind::Int { value: l, .. }) => (*h as u32, *l as u32),
                    _ => return Err(no("a slice with computed bounds")),
                };
                let w = h - l + 1;
                (format!("(({c} >> {l}) & {:#x}ULL)", ones(w)), Ty::Bit(w))
            }
            ExprKind::Cast(t, inner) => {
                let to = self.checked.resolve(t);
                let (c, from) = self.expr(inner)?;
                match (&to, &from) {
                    // Widening a signed value extends its sign (int<8> -1 is int<16> -1).
                    (Ty::Int(w), Ty::Int(f)) if w > f => (format!("(p4_sext({c}, {f}) & {:#x}ULL)", ones(*w)), to),
                    _ => (format!("({c} & {:#x}ULL)", ones(width_of(&to))), to),
                }
            }
            ExprKind::Unary(op, inner) => {
                let (c, ty) = self.expr(inner)?;
                let m = ones(width_of(&ty));
                match op {
                    UnOp::Not => (format!("(!{c})"), Ty::Bool),
                    UnOp::Complement => (format!("(~{c} & {m:#x}ULL)"), ty),
                    UnOp::Neg => (format!("((0ULL - {c}) & {m:#x}ULL)"), ty),
                }
            }
            ExprKind::Cond(c, a, b) => {
                let (c, _) = self.expr(c)?;
                let (a, ta) = self.expr(a)?;
                let (b, tb) = self.expr(b)?;
                (format!("({c} ? {a} : {b})"), if ta == Ty::Number { tb } else { ta })
            }
            ExprKind::Binary(op, a, b) => self.binary(*op, a, b)?,
            ExprKind::Call { callee, args, .. } => return self.call_expr(callee, args),
            ExprKind::List(_) => return Err(no("a list {...} as a struct's or header's value")),
            other => return Err(no(expression_kind(other))),
        })
    }

    /// An expression where a value of type `ty` is wanted: a list `{a, b, c}` becomes that
    /// struct or header (a header so made is valid), field by field in declaration order; any
    /// other expression is `expr`'s.
    fn expr_as(&mut self, e: &Expr, ty: &Ty) -> R<(String, Ty)> {
        let ExprKind::List(items) = &e.kind else { return self.expr(e) };
        let (fields, header, c_ty) = match ty {
            Ty::Header(n) | Ty::Struct(n) => match self.layout(n) {
                Some(Layout::Header(f)) => (f.clone(), true, self.c_type(ty)?),
                Some(Layout::Struct(f)) => (f.clone(), false, self.c_type(ty)?),
                _ => return self.expr(e),
            },
            _ => return self.expr(e),
        };
        if fields.len() != items.len() || fields.iter().any(|(_, t)| matches!(t, Ty::Varbit(_))) {
            return Err(no(format!("a list of {} values as a {ty}", items.len())));
        }
        let mut c = format!("(({c_ty}){{ ");
        if header {
            c += ".valid = 1, ";
        }
        for ((f, fty), item) in fields.iter().zip(items) {
            let (v, _) = self.expr_as(item, fty)?;
            let v = match fty {
                Ty::Header(_) | Ty::Struct(_) => v,
                _ => format!("({v}) & {:#x}ULL", ones(width_of(fty))),
            };
            let _ = write!(c, ".f_{} = {v}, ", ident(f));
        }
        Ok((c + "})", ty.clone()))
    }

    fn binary(&mut self, op: BinOp, a: &Expr, b: &Expr) -> R<(String, Ty)> {
        let (mut ca, ta) = self.expr(a)?;
        let (mut cb, tb) = self.expr(b)?;
        let ty = if ta == Ty::Number { tb.clone() } else { ta.clone() };
        let w = width_of(&ty);
        let m = ones(w);
        // A number without a width takes the other side's (P4's rule): `-1` met by a bit<16> is
        // 0xffff, as in the software target, not C's 64-bit all-ones. A shift's amount keeps its own.
        if let Ty::Bit(_) | Ty::Int(_) = ty {
            if ta == Ty::Number {
                ca = format!("(({ca}) & {m:#x}ULL)");
            }
            if tb == Ty::Number && !matches!(op, BinOp::Shl | BinOp::Shr) {
                cb = format!("(({cb}) & {m:#x}ULL)");
            }
        }
        if let (BinOp::Eq | BinOp::Ne, Ty::Header(_) | Ty::Struct(_) | Ty::Union(_) | Ty::Stack(..)) = (op, &ta) {
            // Each side once, into a temporary; then member by member.
            self.temps += 1;
            let (x, y) = (format!("t_{}a", self.temps), format!("t_{}b", self.temps));
            let c_ty = self.c_type(&ta)?;
            let same = self.equal_c(&x, &y, &ta)?;
            let not = if op == BinOp::Ne { "!" } else { "" };
            return Ok((format!("({{ {c_ty} {x} = {ca}; {c_ty} {y} = {cb}; {not}({same}); }})"), Ty::Bool));
        }
        if let Ty::Int(_) = ty {
            match op {
                BinOp::Lt | BinOp::Gt | BinOp::Le | BinOp::Ge => {
                    let sym = crate::frontend::check::op_symbol(op);
                    return Ok((format!("(p4_sext({ca}, {w}) {sym} p4_sext({cb}, {w}))"), Ty::Bool));
                }
                BinOp::Shr => return Ok((format!("p4_sar({ca}, {cb}, {w})"), ta)),
                BinOp::AddSat | BinOp::SubSat if w < 64 => {
                    let f = if op == BinOp::AddSat { "p4_add_sat_signed" } else { "p4_sub_sat_signed" };
                    return Ok((format!("{f}({ca}, {cb}, {w})"), ty));
                }
                BinOp::AddSat | BinOp::SubSat => return Err(no("saturating arithmetic on int<64>")),
                _ => {}
            }
        }
        Ok(match op {
            BinOp::Or => (format!("({ca} || {cb})"), Ty::Bool),
            BinOp::And => (format!("({ca} && {cb})"), Ty::Bool),
            BinOp::Eq => (format!("({ca} == {cb})"), Ty::Bool),
            BinOp::Ne => (format!("({ca} != {cb})"), Ty::Bool),
            BinOp::Lt => (format!("({ca} < {cb})"), Ty::Bool),
            BinOp::Gt => (format!("({ca} > {cb})"), Ty::Bool),
            BinOp::Le => (format!("({ca} <= {cb})"), Ty::Bool),
            BinOp::Ge => (format!("({ca} >= {cb})"), Ty::Bool),
            BinOp::BitOr => (format!("({ca} | {cb})"), ty),
            BinOp::BitXor => (format!("({ca} ^ {cb})"), ty),
            BinOp::BitAnd => (format!("({ca} & {cb})"), ty),
            BinOp::Add => (format!("(({ca} + {cb}) & {m:#x}ULL)"), ty),
            BinOp::Sub => (format!("(({ca} - {cb}) & {m:#x}ULL)"), ty),
            BinOp::Mul => (format!("(({ca} * {cb}) & {m:#x}ULL)"), ty),
            // Through the runtime's functions, which read each operand once: an operand may be
            // an inlined function call, whose body must run once.
            BinOp::Shl => (format!("p4_shl({ca}, {cb}, {w}, {m:#x}ULL)"), ta),
            BinOp::Shr => (format!("p4_shr({ca}, {cb}, {w})"), ta),
            BinOp::AddSat if w < 64 => (format!("p4_add_sat({ca}, {cb}, {m:#x}ULL)"), ty),
            BinOp::SubSat => (format!("p4_sub_sat({ca}, {cb})"), ty),
            BinOp::Concat => {
                let wb = width_of(&tb);
                if width_of(&ta) + wb > 64 {
                    return Err(no("a concatenation wider than 64 bits"));
                }
                (format!("(({ca} << {wb}) | {cb})"), Ty::Bit(width_of(&ta) + wb))
            }
            BinOp::Div | BinOp::Mod => return Err(no("'/' and '%' on values known only at run time")),
            other => return Err(no(format!("the operator {} at 64 bits", crate::frontend::check::op_symbol(other)))),
        })
    }

    /// C that is true when the values `a` and `b` (C lvalues) of type `ty` are equal as P4
    /// says: headers both invalid, or both valid with equal fields; structs member by member.
    fn equal_c(&self, a: &str, b: &str, ty: &Ty) -> R<String> {
        // A stack's headers compare (not how far a parser filled it); a union's headers do.
        if let Ty::Stack(elem, n) = ty {
            let mut same = Vec::new();
            for k in 0..*n {
                same.push(format!("({})", self.equal_c(&format!("{a}.e[{k}]"), &format!("{b}.e[{k}]"), elem)?));
            }
            return Ok(same.join(" && "));
        }
        if let Ty::Union(u) = ty {
            let Some(Layout::Union(members)) = self.layout(u) else { return Err(no(format!("'==' on {ty}"))) };
            let mut same = Vec::new();
            for (m, mty) in members {
                let m = ident(m);
                same.push(format!("({})", self.equal_c(&format!("{a}.f_{m}"), &format!("{b}.f_{m}"), mty)?));
            }
            return Ok(same.join(" && "));
        }
        let (fields, header) = match ty {
            Ty::Header(n) | Ty::Struct(n) => match self.layout(n) {
                Some(Layout::Header(f)) => (f.clone(), true),
                Some(Layout::Struct(f)) => (f.clone(), false),
                _ => return Err(no(format!("'==' on {ty}"))),
            },
            _ => return Ok(format!("{a} == {b}")),
        };
        let mut same = if header { format!("{a}.valid && {b}.valid") } else { "1".to_string() };
        for (f, fty) in &fields {
            if let Ty::Varbit(n) = fty {
                return Err(no(format!("'==' on a header with a varbit<{n}> field")));
            }
            let f = ident(f);
            same += &format!(" && ({})", self.equal_c(&format!("{a}.f_{f}"), &format!("{b}.f_{f}"), fty)?);
        }
        Ok(if header { format!("(!{a}.valid && !{b}.valid) || ({same})") } else { same })
    }

    /// After `target` (a header) was written, made valid or extracted: when it is a member of a
    /// header union and now valid, its siblings become invalid (a union holds one header), as
    /// the software target settles it.
    fn union_settled(&mut self, target: &Expr) -> R<String> {
        let ExprKind::Member(parent, member) = &target.kind else { return Ok(String::new()) };
        let (p, ty) = self.expr(parent)?;
        let Ty::Union(u) = ty else { return Ok(String::new()) };
        let Some(Layout::Union(members)) = self.layout(&u).cloned() else { return Ok(String::new()) };
        let others: String = members
            .iter()
            .filter(|(m, _)| *m != member.text)
            .map(|(m, _)| format!("{p}.f_{}.valid = 0; ", ident(m)))
            .collect();
        Ok(format!("if ({p}.f_{}.valid) {{ {others}}}\n", ident(&member.text)))
    }

    /// A call used as a value: `h.isValid()`.
    fn call_expr(&mut self, callee: &Expr, args: &[Expr]) -> R<(String, Ty)> {
        if let ExprKind::Member(obj, m) = &callee.kind {
            if m.text == "isValid" && args.is_empty() {
                let (c, ty) = self.expr(obj)?;
                // A union is valid when one of its headers is.
                if let Ty::Union(u) = &ty {
                    let Some(Layout::Union(members)) = self.layout(u) else { return Err(no(format!("union {u}"))) };
                    let any: Vec<String> = members.iter().map(|(m, _)| format!("{c}.f_{}.valid", ident(m))).collect();
                    return Ok((format!("({})", any.join(" || ")), Ty::Bool));
                }
                return Ok((format!("{c}.valid"), Ty::Bool));
            }
            if let (ExprKind::Name(o), "conforms", [i, bag, jitter, smax]) = (&obj.kind, m.text.as_str(), args) {
                let key = format!("{}.{o}", self.block);
                if let Some((_, map, cells)) = self.accounts.iter().find(|a| a.0 == key).cloned() {
                    let mut c = format!("p4_conforms(&{map}, {cells}");
                    for a in [i, bag, jitter, smax] {
                        c += &format!(", {}", self.expr(a)?.0);
                    }
                    return Ok((c + ", r->sm.f_timestamp)", Ty::Bool));
                }
            }
            if m.text == "apply" {
                if let ExprKind::Name(t) = &obj.kind {
                    let table = self.table_fn(t)?;
                    let exit = &self.exit_label;
                    return Ok((format!("({{ {table}(r); if (r->exited) {exit} r->hit; }})"), Ty::Bool));
                }
            }
        }
        if let ExprKind::Name(f) = &callee.kind {
            if let Some(function) = self.function(f) {
                return self.inline_function(function, args);
            }
        }
        Err(no(format!("the call of {} as a value", callee_text(callee))))
    }

    fn table_fn(&self, t: &str) -> R<String> {
        let target = format!("{}.{t}", self.block);
        self.tables
            .iter()
            .find(|x| x.target == target)
            .map(|x| format!("p4_apply_{}", ident(&x.target)))
            .ok_or_else(|| no(format!("table {t}")))
    }

    /// C that assigns `value` (already C) to the lvalue `target`, masked to its width.
    fn assign(&mut self, target: &Expr, value: &str) -> R<String> {
        if self.past_end(target)?.is_some() {
            return Ok(String::new());
        }
        // A copy-out to a stack's header at an index known only now (`f(s[i].x)`).
        if let Some(at) = self.runtime_index(target)? {
            let node: *const Expr = at.node;
            return self.index_switch(&at, &mut |g, element| g.assign(&substitute(target, node, element), value));
        }
        if let ExprKind::Slice(inner, hi, lo) = &target.kind {
            let bounds = |hi: &Expr, lo: &Expr| match (&hi.kind, &lo.kind) {
                (ExprKind::Int { value: h, .. }, ExprKind::Int { value: l, .. }) => Ok((*h as u32, *l as u32)),
                _ => Err(no("a slice with computed bounds")),
            };
            let (mut h, mut l) = bounds(hi, lo)?;
            // A slice of a slice is one slice of the whole: `n[7:4][3:0]` is `n[7:4]`.
            let mut base = &**inner;
            while let ExprKind::Slice(b, hi, lo) = &base.kind {
                let (_, within) = bounds(hi, lo)?;
                (h, l) = (h + within, l + within);
                base = b;
            }
            let (c, _) = self.expr(base)?;
            let m = ones(h - l + 1);
            return Ok(format!("{c} = ({c} & ~({m:#x}ULL << {l})) | ((({value}) & {m:#x}ULL) << {l});\n"));
        }
        let (c, ty) = self.expr(target)?;
        Ok(self.assign_c(&c, &ty, value))
    }

    /// C that assigns `value` to the C lvalue `c` of type `ty`, masked to its width.
    fn assign_c(&self, c: &str, ty: &Ty, value: &str) -> String {
        match ty {
            Ty::Header(_) | Ty::Struct(_) | Ty::Stack(..) => format!("{c} = {value};\n"),
            _ => format!("{c} = ({value}) & {:#x}ULL;\n", ones(width_of(ty))),
        }
    }

    /// The program's function `name`.
    fn function(&self, name: &str) -> Option<&'a crate::frontend::ast::Function> {
        self.program.decls.iter().find_map(|d| match d {
            Decl::Function(f) if f.name.text == name => Some(f),
            _ => None,
        })
    }

    /// A call of a function, inlined as one C expression (a statement expression): arguments
    /// copied in, in order, to run members, the body with its own scope (a function sees its
    /// parameters and the program's constants only), `return` a jump to the end, then the
    /// out and inout arguments copied back, in order, and the returned value.
    fn inline_function(&mut self, f: &'a crate::frontend::ast::Function, args: &[Expr]) -> R<(String, Ty)> {
        if !f.type_params.is_empty() {
            return Err(no(format!("the generic function '{}'", f.name.text)));
        }
        self.temps += 1;
        let n = self.temps;
        let (mut before, mut after, mut bindings) = (String::new(), String::new(), Vec::new());
        for (p, a) in f.params.iter().zip(args) {
            let pty = self.checked.resolve(&p.ty);
            let member = format!("fn{n}_{}", ident(&p.name.text));
            let _ = writeln!(self.run_members, "\t{} {member};", self.c_type(&pty)?);
            let c = format!("r->{member}");
            if !matches!(p.direction, Some(Direction::Out)) {
                let (v, _) = self.expr_as(a, &pty)?;
                before += &self.assign_c(&c, &pty, &v);
                before += &self.place_copies(&c, &v, &pty);
            }
            if matches!(p.direction, Some(Direction::Out | Direction::InOut)) {
                after += &self.assign(a, &c)?;
                let (v, _) = self.expr(a)?;
                after += &self.place_copies(&v, &c, &pty);
            }
            bindings.push((p.name.text.clone(), c, pty));
        }
        let ret = self.checked.resolve(&f.ret);
        let result = match ret {
            Ty::Void => None,
            _ => {
                let member = format!("fn{n}_result");
                let _ = writeln!(self.run_members, "\t{} {member};", self.c_type(&ret)?);
                Some((format!("r->{member}"), ret.clone()))
            }
        };
        let scopes = std::mem::replace(&mut self.scopes, vec![HashMap::new()]);
        for (name, c, t) in bindings {
            self.bind(&name, c, t);
        }
        let return_stmt = std::mem::replace(&mut self.return_stmt, format!("goto fn{n}_end;\n"));
        let returns = std::mem::replace(&mut self.returns, result.clone());
        let body = self.stmts(&f.body);
        self.scopes = scopes;
        self.return_stmt = return_stmt;
        self.returns = returns;
        let body = body?;
        let value = result.map_or("0".to_string(), |(c, _)| c);
        Ok((format!("({{\n{before}{body}fn{n}_end:;\n{after}{value};\n}})"), ret))
    }

    fn stmts(&mut self, stmts: &[Stmt]) -> R<String> {
        let mut s = String::new();
        self.scopes.push(HashMap::new());
        for st in stmts {
            s += &self.stmt(st)?;
        }
        self.scopes.pop();
        Ok(s)
    }

    fn stmt(&mut self, st: &Stmt) -> R<String> {
        self.at = match st {
            Stmt::Assign { target, .. } => Some(target.pos),
            Stmt::Call(e) | Stmt::If { cond: e, .. } => Some(e.pos),
            Stmt::Switch { pos, .. }
            | Stmt::Return(pos)
            | Stmt::Exit(pos)
            | Stmt::ReturnValue(_, pos)
            | Stmt::For { pos, .. }
            | Stmt::Break(pos)
            | Stmt::Continue(pos) => Some(*pos),
            Stmt::Var { name, .. } | Stmt::Const { name, .. } => Some(name.pos),
            Stmt::Block(_) | Stmt::Empty => self.at,
        };
        if let Some(s) = self.expand_stmt(st)? {
            return Ok(s);
        }
        // A write past a stack's end changes nothing; its value is still computed (a call in it runs).
        if let Stmt::Assign { target, value } = st {
            if self.past_end(target)?.is_some() {
                let (_, ty) = self.expr(target)?;
                let (v, _) = self.expr_as(value, &ty)?;
                return Ok(format!("(void)({v});\n"));
            }
        }
        Ok(match st {
            Stmt::Assign { target, value } if matches!(value.kind, ExprKind::List(_)) => {
                let (c, ty) = self.expr(target)?;
                let (v, _) = self.expr_as(value, &ty)?;
                // A header made valid here, as by setValid: one not valid before has no place in the frame.
                let place = match ty {
                    Ty::Header(_) => format!("if (!{c}.valid) {{ {} = 0xffffffff; }}\n", self.header_place(&c)),
                    _ => String::new(),
                };
                format!("{place}{}{}", self.assign(target, &v)?, self.union_settled(target)?)
            }
            Stmt::Assign { target, value } => {
                let (v, _) = self.expr(value)?;
                format!("{}{}", self.assign(target, &v)?, self.union_settled(target)?)
            }
            Stmt::If { cond, then, otherwise } => {
                let (c, _) = self.expr(cond)?;
                let mut s = format!("if ({c}) {{\n{}}}", self.stmts(then)?);
                if let Some(o) = otherwise {
                    s += &format!(" else {{\n{}}}", self.stmts(o)?);
                }
                s + "\n"
            }
            Stmt::Block(b) => format!("{{\n{}}}\n", self.stmts(b)?),
            Stmt::Call(e) => self.call_stmt(e)?,
            Stmt::Exit(_) => format!("r->exited = 1;\n{}", self.exit_label),
            Stmt::Return(_) => self.return_stmt.clone(),
            Stmt::ReturnValue(e, _) => {
                let Some((result, ty)) = self.returns.clone() else { return Err(no("a 'return' with a value")) };
                let (v, _) = self.expr_as(e, &ty)?;
                let copies = self.place_copies(&result, &v, &ty);
                format!("{}{copies}{}", self.assign_c(&result, &ty, &v), self.return_stmt)
            }
            Stmt::For { .. } | Stmt::Break(_) | Stmt::Continue(_) => return Err(no("a for loop")),
            Stmt::Empty => String::new(),
            Stmt::Const { ty, name, value } | Stmt::Var { ty, name, init: Some(value) } => {
                let ty = self.checked.resolve(ty);
                let (v, _) = self.expr_as(value, &ty)?;
                let c = format!("v_{}", ident(&name.text));
                let decl = match ty {
                    Ty::Header(_) | Ty::Struct(_) | Ty::Stack(..) => format!("{} {c} = {v};\n", self.c_type(&ty)?),
                    _ => format!("{} {c} = ({v}) & {:#x}ULL;\n", self.c_type(&ty)?, ones(width_of(&ty))),
                };
                self.bind(&name.text, c, ty);
                decl
            }
            Stmt::Var { ty, name, init: None } => {
                let ty = self.checked.resolve(ty);
                let c = format!("v_{}", ident(&name.text));
                let decl = format!("{} {c} = {{0}};\n", self.c_type(&ty)?);
                self.bind(&name.text, c, ty);
                decl
            }
            Stmt::Switch { expr, cases, .. } => {
                let ExprKind::Member(applied, m) = &expr.kind else { return Err(no("this switch")) };
                let ExprKind::Call { callee, .. } = &applied.kind else { return Err(no("this switch")) };
                let ExprKind::Member(t, _) = &callee.kind else { return Err(no("this switch")) };
                let ExprKind::Name(t) = &t.kind else { return Err(no("this switch")) };
                if m.text != "action_run" {
                    return Err(no("this switch"));
                }
                let f = self.table_fn(t)?;
                let target = format!("{}.{t}", self.block);
                let actions = self.tables.iter().find(|x| x.target == target).unwrap().actions.clone();
                // An action that ran `exit` ends the control before any case runs.
                let mut s = format!("{f}(r);\nif (r->exited) {}\nswitch (r->action_run) {{\n", self.exit_label);
                for (labels, body) in cases {
                    for l in labels {
                        if l.text == "default" {
                            s += "default:\n";
                        } else {
                            let id = actions.iter().position(|x| *x == l.text).map_or(0, |i| i + 1);
                            let _ = writeln!(s, "case {id}:");
                        }
                    }
                    if let Some(body) = body {
                        s += &format!("{{\n{}}}\nbreak;\n", self.stmts(body)?);
                    }
                }
                s + "}\n"
            }
        })
    }

    fn call_stmt(&mut self, e: &Expr) -> R<String> {
        let ExprKind::Call { callee, args, .. } = &e.kind else { return Err(no("this call")) };
        match &callee.kind {
            // v1model drops by port (511) and cancels a multicast; edgeflow.p4 by flag.
            ExprKind::Name(f) if f == "mark_to_drop" && self.v1model => {
                Ok("r->sm.f_egress_spec = 511;\nr->sm.f_mcast_grp = 0;\n".into())
            }
            ExprKind::Name(f) if f == "mark_to_drop" => Ok("r->sm.f_drop = 1;\n".into()),
            // The control plane hears of a digest from userspace only: the frame goes up.
            ExprKind::Name(f) if f == "digest" && self.v1model => Ok("r->misfit = 1;\n".into()),
            ExprKind::Name(f) if f == "verify" => {
                let (c, _) = self.expr(&args[0])?;
                let (err, _) = self.expr(&args[1])?;
                Ok(format!("if (!({c})) {{ r->sm.f_parser_error = {err}; goto reject; }}\n"))
            }
            ExprKind::Name(f)
                if self.v1model && (f == "verify_checksum" || f == "update_checksum") && args.len() == 4 =>
            {
                self.checksum(f == "verify_checksum", args)
            }
            ExprKind::Name(f) if self.v1model && f == "hash" && args.len() == 5 => self.hash(args),
            ExprKind::Name(f) if self.function(f).is_some() => {
                let (c, _) = self.inline_function(self.function(f).unwrap(), args)?;
                Ok(format!("{c};\n"))
            }
            ExprKind::Name(a) => {
                // A direct action call. An out or inout argument is copied into a temporary
                // the action writes through, and copied back after (P4's copy-in, copy-out,
                // also when the action exits).
                let f = self.action_fn(a)?;
                let (before, call, after) = self.action_arguments(a, args)?;
                Ok(format!("{{\n{before}{f}(r{call});\n{after}}}\nif (r->exited) {}", self.exit_label))
            }
            ExprKind::Member(obj, m) => {
                let method = m.text.as_str();
                if let ExprKind::Name(o) = &obj.kind {
                    let key = format!("{}.{o}", self.block);
                    // A sub-parser or sub-control, by instance or by its type's name.
                    let sub = self.sub_blocks.get(&key).cloned().or_else(|| {
                        self.program
                            .decls
                            .iter()
                            .any(|d| matches!(d, Decl::Parser { name, .. } | Decl::Control { name, .. } if name.text == *o))
                            .then(|| o.clone())
                    });
                    if let (Some(ty), "apply") = (sub, method) {
                        return self.inline_block(&ty, args);
                    }
                    if method == "apply" {
                        let f = self.table_fn(o)?;
                        return Ok(format!("{f}(r);\nif (r->exited) {}", self.exit_label));
                    }
                    if let Some((_, map, cells)) = self.counters.iter().find(|c| c.0 == key).cloned() {
                        let (i, _) = self.expr(&args[0])?;
                        return Ok(format!("p4_count(&{map}, {i}, {cells}, r->sm.f_packet_length);\n"));
                    }
                    if self.direct.contains(&key) {
                        return Ok(String::new()); // the table counts its entries' hits
                    }
                    if let Some(m) = self.meters.iter().find(|m| m.name == key).cloned() {
                        if method != "execute_meter" {
                            return Err(no(format!("{key}.{method}")));
                        }
                        let (i, _) = self.expr(&args[0])?;
                        let units = if m.bytes { "r->sm.f_packet_length" } else { "1" };
                        let colour = format!(
                            "p4_meter(&{}, &{}, {}, {i}, {units}, r->sm.f_timestamp)",
                            m.rates_map, m.words_map, m.cells
                        );
                        return self.assign(&args[1], &colour);
                    }
                    if self.direct_meters.iter().any(|(k, _)| *k == key) {
                        if method != "read" {
                            return Err(no(format!("{key}.{method}")));
                        }
                        return self.assign(&args[0], &format!("r->dm_{}", ident(&key)));
                    }
                    if let Some((_, map, cells)) = self.registers.iter().find(|c| c.0 == key).cloned() {
                        return match method {
                            "read" => {
                                let (i, _) = self.expr(&args[1])?;
                                let v = format!("p4_reg_read(&{map}, {i}, {cells})");
                                self.assign(&args[0], &v)
                            }
                            "write" => {
                                let (i, _) = self.expr(&args[0])?;
                                let (v, _) = self.expr(&args[1])?;
                                Ok(format!("p4_reg_write(&{map}, {i}, {cells}, {v});\n"))
                            }
                            _ => Err(no(format!("{key}.{method}"))),
                        };
                    }
                    if method == "extract" || method == "emit" {
                        return self.packet_call(method, &args[0], args.get(1));
                    }
                    // The parser's cursor is in bytes here: an advance by bits that are not
                    // whole bytes goes up, as does a frame longer than the bytes copied in.
                    if method == "advance" && self.lookup(o).is_some_and(|v| v.c == "packet") {
                        let (n, _) = self.expr(&args[0])?;
                        return Ok(format!(
                            "{{ __u64 bits = {n};\nif (bits % 8) {{ r->misfit = 1; goto reject; }}\n\
                             if (r->off + bits / 8 > r->len) {{ r->misfit = r->len < r->sm.f_packet_length; \
                             r->sm.f_parser_error = {}; goto reject; }}\nr->off += bits / 8; }}\n",
                            self.error_index("PacketTooShort")
                        ));
                    }
                }
                if method == "push_front" || method == "pop_front" {
                    return self.shift_stack(obj, method == "push_front", &args[0]);
                }
                if (method == "setValid" || method == "setInvalid") && args.is_empty() {
                    if self.past_end(obj)?.is_some() {
                        return Ok(self.out_of_bounds());
                    }
                    let (c, ty) = self.expr(obj)?;
                    if matches!(ty, Ty::Header(_)) {
                        let at = self.header_place(&c);
                        // A header made valid here was not read from the frame and has no place
                        // in it: no place the deparser's in-place check accepts, so such a frame
                        // goes up. One made invalid leaves a gap the check sees too.
                        let settled = self.union_settled(obj)?;
                        return Ok(if method == "setValid" {
                            format!("if (!{c}.valid) {{ {at} = 0xffffffff; }}\n{c}.valid = 1;\n{settled}")
                        } else {
                            format!("{c}.valid = 0;\n")
                        });
                    }
                }
                // An instance the back end keeps no state for: one declared outside every block
                // (`register<...>(n) r;` at the top level), or an extern it does not carry.
                Err(no(format!("{}()", callee_text(callee))))
            }
            _ => Err(no("this call")),
        }
    }

    /// The run member that holds where header `c` (its C lvalue) sits in the frame, declared once.
    fn header_place(&mut self, c: &str) -> String {
        let at = format!("r->at_{}", ident(&c.replace("r->", "")));
        if !self.headers.contains(&at) {
            self.headers.push(at.clone());
        }
        at
    }

    /// v1model's `verify_checksum` / `update_checksum` with `csum16`: the Internet checksum of
    /// the listed fields' bits, summed 16 bits at a time where each field's bits fall in the
    /// stream (the offsets are constants). BMv2 leaves out the fields of a header that is not
    /// valid, which moves the rest: such a frame goes up (misfit) rather than be summed here.
    fn checksum(&mut self, verify: bool, args: &[Expr]) -> R<String> {
        let algo = match &args[3].kind {
            ExprKind::Member(_, m) => m.text.clone(),
            _ => String::new(),
        };
        if algo != "csum16" {
            return Err(no(format!("a checksum by HashAlgorithm.{algo}")));
        }
        let (cond, _) = self.expr(&args[0])?;
        let items: Vec<&Expr> = match &args[1].kind {
            ExprKind::List(items) => items.iter().collect(),
            _ => vec![&args[1]],
        };
        let (mut fields, mut headers) = (Vec::new(), Vec::new());
        for item in items {
            self.checksum_fields(item, &mut fields, &mut headers)?;
        }
        let mut sum = String::from("\t__u64 sum = 0;\n");
        let mut bit = 0u32;
        for (c, w) in &fields {
            let mut done = 0;
            while done < *w {
                let at = (bit + done) % 16;
                let take = (16 - at).min(w - done);
                let _ = writeln!(
                    sum,
                    "\tsum += ((({c}) >> {}) & {:#x}ULL) << {};",
                    w - done - take,
                    ones(take),
                    16 - at - take
                );
                done += take;
            }
            bit += w;
        }
        sum += "\tfor (int i = 0; i < 3; i++)\n\t\tsum = (sum & 0xffff) + (sum >> 16);\n";
        let valid = if headers.is_empty() {
            "1".to_string()
        } else {
            headers.iter().map(|h| format!("{h}.valid")).collect::<Vec<_>>().join(" && ")
        };
        let act = if verify {
            let (want, _) = self.expr(&args[2])?;
            format!("\tif (((~sum) & 0xffff) != (({want}) & 0xffff))\n\t\tr->sm.f_checksum_error = 1;\n")
        } else {
            format!("\t{}", self.assign(&args[2], "(~sum) & 0xffff")?)
        };
        Ok(format!("if ({cond}) {{\n\tif (!({valid})) {{\n\t\tr->misfit = 1;\n\t}} else {{\n{sum}{act}\t}}\n}}\n"))
    }

    /// v1model's `hash(result, algo, base, data, max)`: `base + hash(data) % max` (`base +
    /// hash(data)` when max is 0), as BMv2 computes it over the data's bits packed into bytes.
    /// BMv2 leaves out the fields of a header that is not valid, which moves the rest: such a
    /// frame goes up (misfit), as for checksums.
    fn hash(&mut self, args: &[Expr]) -> R<String> {
        let algo = match &args[1].kind {
            ExprKind::Member(_, m) => m.text.clone(),
            _ => String::new(),
        };
        let items: Vec<&Expr> = match &args[3].kind {
            ExprKind::List(items) => items.iter().collect(),
            _ => vec![&args[3]],
        };
        let (mut fields, mut headers) = (Vec::new(), Vec::new());
        for item in items {
            self.checksum_fields(item, &mut fields, &mut headers)?;
        }
        let bits: u32 = fields.iter().map(|(_, w)| w).sum();
        let bytes = bits.div_ceil(8);
        if bytes > HASH_BYTES_MAX {
            return Err(no(format!("a hash over {bytes} bytes")));
        }
        let sum = match algo.as_str() {
            "crc16" => format!("p4_crc(r->hash_buf, {bytes}, 0xa001, 0, 0)"),
            "crc32" => format!("p4_crc(r->hash_buf, {bytes}, 0xedb88320, 0xffffffff, 0xffffffff)"),
            "csum16" => format!("p4_csum16(r->hash_buf, {bytes})"),
            _ => return Err(no(format!("a hash by HashAlgorithm.{algo}"))),
        };
        if !self.run_members.contains("hash_buf[") {
            let _ = writeln!(self.run_members, "\t__u8 hash_buf[P4_BUF];");
        }
        let mut pack = format!("\tfor (int i = 0; i < {bytes}; i++)\n\t\tr->hash_buf[i] = 0;\n");
        let mut bit = 0;
        for (c, w) in &fields {
            let _ = writeln!(pack, "\tp4_set(r->hash_buf, 0, {bit}, {w}, {c});");
            bit += w;
        }
        let (base, _) = self.expr(&args[2])?;
        let (max, _) = self.expr(&args[4])?;
        let result = format!("({{ __u64 h = {sum}, base = {base}, max = {max}; max ? base + h % max : base + h; }})");
        let valid = if headers.is_empty() {
            "1".to_string()
        } else {
            headers.iter().map(|h| format!("{h}.valid")).collect::<Vec<_>>().join(" && ")
        };
        Ok(format!("if (!({valid})) {{\n\tr->misfit = 1;\n}} else {{\n{pack}\t{}}}\n", self.assign(&args[0], &result)?))
    }

    /// A checksum's data item as (C value, width) fields, and the headers they lie in.
    fn checksum_fields(&mut self, item: &Expr, fields: &mut Vec<(String, u32)>, headers: &mut Vec<String>) -> R<()> {
        let (c, ty) = self.expr(item)?;
        match &ty {
            Ty::Header(name) => {
                let Some(Layout::Header(fs)) = self.layout(name).cloned() else { return Err(no("this header")) };
                for (f, t) in fs {
                    if let Ty::Varbit(n) = t {
                        return Err(no(format!("a checksum over the varbit<{n}> field {name}.{f}")));
                    }
                    fields.push((format!("{c}.f_{}", ident(&f)), width_of(&t)));
                }
                if !headers.contains(&c) {
                    headers.push(c);
                }
            }
            Ty::Bit(w) if *w <= 64 => {
                if let ExprKind::Member(inner, _) = &item.kind {
                    let (h, hty) = self.expr(inner)?;
                    if matches!(hty, Ty::Header(_)) && !headers.contains(&h) {
                        headers.push(h);
                    }
                }
                fields.push((c, *w));
            }
            other => return Err(no(format!("a checksum over {other}"))),
        }
        Ok(())
    }

    /// Where the headers in a value of type `ty` copied from `from` to `to` lie in the frame,
    /// copied with them (a header extracted by a sub-parser is emitted at its place).
    fn place_copies(&mut self, to: &str, from: &str, ty: &Ty) -> String {
        // A header past a stack's end (a compound literal) has no place.
        if to.contains("){0}") || from.contains("){0}") || to.starts_with("({") || from.starts_with("({") {
            return String::new();
        }
        match ty {
            Ty::Stack(elem, n) => {
                (0..*n).map(|k| self.place_copies(&format!("{to}.e[{k}]"), &format!("{from}.e[{k}]"), elem)).collect()
            }
            Ty::Header(_) => {
                let (to, from) = (self.header_place(to), self.header_place(from));
                format!("{to} = {from};\n")
            }
            Ty::Struct(name) | Ty::Union(name) => {
                let Some(Layout::Struct(fields) | Layout::Union(fields)) = self.layout(name).cloned() else {
                    return String::new();
                };
                fields
                    .iter()
                    .map(|(f, t)| {
                        self.place_copies(&format!("{to}.f_{}", ident(f)), &format!("{from}.f_{}", ident(f)), t)
                    })
                    .collect()
            }
            _ => String::new(),
        }
    }

    /// `packet.extract(h)` in the parser, `packet.emit(h)` in the deparser: at the header's place.
    fn packet_call(&mut self, method: &str, h: &Expr, size: Option<&Expr>) -> R<String> {
        match self.past_end(h)? {
            // An extract past the end, or the emit of `next` past it, is the error; the emit of
            // an index past it emits an invalid header: nothing.
            Some(next) if method == "extract" || next => return Ok(self.out_of_bounds()),
            Some(_) => return Ok(String::new()),
            None => {}
        }
        let (c, ty) = self.expr(h)?;
        // `packet.emit(stack)`: its valid headers in order.
        if let (Ty::Stack(_, n), "emit") = (&ty, method) {
            let mut s = String::new();
            for k in 0..*n as u128 {
                let element = Expr {
                    kind: ExprKind::Index(
                        Box::new(h.clone()),
                        Box::new(Expr { kind: ExprKind::Int { width: None, value: k }, pos: h.pos }),
                    ),
                    pos: h.pos,
                };
                s += &self.packet_call(method, &element, None)?;
            }
            return Ok(s);
        }
        // `packet.emit(hdr)` of a struct: each of its headers (and structs) in declaration order,
        // as P4 defines the emit of a struct.
        if let (Ty::Struct(name) | Ty::Union(name), "emit") = (&ty, method) {
            let Some(Layout::Struct(fields) | Layout::Union(fields)) = self.layout(name) else {
                return Err(no("this struct"));
            };
            let mut s = String::new();
            for (f, _) in fields {
                let member = Expr {
                    kind: ExprKind::Member(
                        Box::new(h.clone()),
                        crate::frontend::ast::Name { text: f.clone(), pos: h.pos },
                    ),
                    pos: h.pos,
                };
                s += &self.packet_call(method, &member, None)?;
            }
            return Ok(s);
        }
        let Ty::Header(name) = &ty else { return Err(no(format!("{method} of {ty}"))) };
        let Some(Layout::Header(fields)) = self.layout(name) else { return Err(no("this header")) };
        let varbit =
            fields.iter().find_map(|(f, t)| if let Ty::Varbit(max) = t { Some((f.clone(), *max)) } else { None });
        let bits: u32 = fields.iter().map(|(_, t)| if let Ty::Varbit(_) = t { 0 } else { width_of(t) }).sum();
        // A varbit's bytes follow the fixed fields: their count is known as the frame goes.
        let bytes = match &varbit {
            Some((f, _)) => format!("({} + {c}.f_{} / 8)", bits / 8, ident(f)),
            None => (bits / 8).to_string(),
        };
        let at = self.header_place(&c);
        let mut s = String::new();
        let mut bit = 0u32;
        if method == "extract" {
            match (&varbit, size) {
                (Some((f, max)), Some(size)) => {
                    // The software target's order of errors: past the maximum, not whole bytes.
                    let (v, _) = self.expr(size)?;
                    let _ = writeln!(
                        s,
                        "{c}.f_{f} = {v};\nif ({c}.f_{f} > {max}) {{ r->sm.f_parser_error = {}; goto reject; }}\n\
                         if ({c}.f_{f} % 8) {{ r->sm.f_parser_error = {}; goto reject; }}",
                        self.error_index("HeaderTooShort"),
                        self.error_index("ParserInvalidArgument"),
                        f = ident(f),
                    );
                }
                (None, None) => {}
                (Some(_), None) => return Err(no(format!("extract of the varbit header {name} without a size"))),
                (None, Some(_)) => return Err(no(format!("extract with a size of {name}, which has no varbit"))),
            }
            let _ = writeln!(
                s,
                // Past the bytes copied in, a frame longer than them is not too short: the
                // kernel cannot read it, so userspace decides it (docs/p4.md).
                "if (r->off + {bytes} > r->len) {{ r->misfit = r->len < r->sm.f_packet_length; \
                 r->sm.f_parser_error = {}; goto reject; }}",
                self.error_index("PacketTooShort")
            );
            let _ = writeln!(s, "{at} = r->off;");
            for (f, t) in fields {
                if let Ty::Varbit(_) = t {
                    continue;
                }
                let w = width_of(t);
                if (bit % 8 + w).div_ceil(8) > 8 {
                    return Err(no(format!("{name}.{f}: a field over nine bytes")));
                }
                let _ = writeln!(s, "{c}.f_{} = p4_get(r->buf, r->off, {bit}, {w});\np4_field_read();", ident(f));
                bit += w;
            }
            let _ = writeln!(s, "{c}.valid = 1;\nr->off += {bytes};");
            s += &self.union_settled(h)?;
        } else {
            // In place: the header goes back where it was read, and only there.
            let _ = writeln!(s, "if ({c}.valid) {{\nif ({at} != r->emitted) {{ r->misfit = 1; }}");
            for (f, t) in fields {
                if let Ty::Varbit(_) = t {
                    continue;
                }
                let w = width_of(t);
                let _ = writeln!(s, "p4_set(r->buf, r->emitted, {bit}, {w}, {c}.f_{});", ident(f));
                bit += w;
            }
            let _ = writeln!(s, "r->emitted += {bytes};\n}}");
        }
        Ok(s)
    }

    /// `instance.apply(args)` of the program's own parser or control `ty`, inlined where it is
    /// applied: its parameters are run members, copied in from the arguments and out to them
    /// after (P4's copy-in, copy-out); a control's tables and actions are generated here, a
    /// parser's states go after the parser's own. A control (its tables and actions are
    /// generated where it is inlined), or a parser with extern instances, at one place only.
    fn inline_block(&mut self, ty: &str, args: &[Expr]) -> R<String> {
        let decl = self.block_decl(ty);
        let first = self.inlined.insert(ty.to_string());
        let (Decl::Parser { locals, .. } | Decl::Control { locals, .. }) = decl else { unreachable!() };
        let instances = locals.iter().any(|l| matches!(l, Local::Instance(_)));
        if !first && (matches!(decl, Decl::Control { .. }) || instances) {
            return Err(no(format!("{ty} applied at more than one place")));
        }
        let (Decl::Parser { params, .. } | Decl::Control { params, .. }) = decl else { unreachable!() };
        self.temps += 1;
        let n = self.temps;
        let is_packet = |p: &crate::frontend::ast::Param| matches!(&p.ty, Type::Named(t, _) if t.text == "packet_in" || t.text == "packet_out");
        // Arguments are read and written back in the caller's scope.
        let (mut before, mut after, mut bindings) = (String::new(), String::new(), Vec::new());
        for (p, a) in params.iter().zip(args) {
            if is_packet(p) {
                bindings.push((p.name.text.clone(), "packet".to_string(), Ty::Void));
                continue;
            }
            let pty = self.checked.resolve(&p.ty);
            let member = format!("sb{n}_{}", ident(&p.name.text));
            let _ = writeln!(self.run_members, "\t{} {member};", self.c_type(&pty)?);
            let c = format!("r->{member}");
            if !matches!(p.direction, Some(Direction::Out)) {
                let (v, _) = self.expr(a)?;
                let _ = writeln!(before, "{c} = {v};");
                before += &self.place_copies(&c, &v, &pty);
            }
            if matches!(p.direction, Some(Direction::Out | Direction::InOut)) {
                after += &self.assign(a, &c)?;
                let (v, _) = self.expr(a)?;
                after += &self.place_copies(&v, &c, &pty);
            }
            bindings.push((p.name.text.clone(), c, pty));
        }
        let caller = std::mem::replace(&mut self.block, ty.to_string());
        let exit_label = std::mem::replace(&mut self.exit_label, format!("goto sb{n}_end;\n"));
        let return_stmt = std::mem::replace(&mut self.return_stmt, format!("goto sb{n}_end;\n"));
        self.scopes.push(HashMap::new());
        for (name, c, t) in bindings {
            self.bind(&name, c, t);
        }
        let inlined = (|| -> R<String> {
            if first {
                self.locals(ty)?;
            } else {
                self.rebind_locals(ty)?;
            }
            let inits = self.local_inits(ty)?;
            match decl {
                Decl::Parser { states, .. } => {
                    let in_parser = std::mem::replace(&mut self.in_parser, true);
                    let code = self.states(states, &format!("sb{n}_st_"), &format!("sb{n}_end"));
                    self.in_parser = in_parser;
                    let code = code?;
                    self.deferred_states += &code;
                    Ok(format!("{inits}goto sb{n}_st_start;\n"))
                }
                Decl::Control { apply, .. } => {
                    self.actions(Some(ty))?;
                    let first = self.tables.len();
                    self.tables(ty)?;
                    for i in first..self.tables.len() {
                        self.table_apply(i)?;
                    }
                    Ok(format!("{inits}{}", self.stmts(apply)?))
                }
                _ => unreachable!(),
            }
        })();
        self.scopes.pop();
        self.block = caller;
        self.return_stmt = return_stmt;
        self.exit_label = exit_label;
        let body = inlined?;
        // An exit in a sub-control ends its caller too (after the copy-out).
        let exited = match decl {
            Decl::Control { .. } => format!("if (r->exited) {}", self.exit_label),
            _ => String::new(),
        };
        Ok(format!("{{\n{before}{body}}}\nsb{n}_end:;\n{after}{exited}"))
    }

    /// A block's variables and constants bound again (to the run members `locals` declared),
    /// for a sub-parser inlined at a second place.
    fn rebind_locals(&mut self, block: &str) -> R<()> {
        let (Decl::Parser { locals, .. } | Decl::Control { locals, .. }) = self.block_decl(block) else {
            unreachable!()
        };
        for l in locals {
            match l {
                Local::Var { ty, name, .. } => {
                    let ty = self.checked.resolve(ty);
                    self.bind(&name.text, format!("r->l_{}_{}", ident(block), ident(&name.text)), ty);
                }
                Local::Const { ty, name, value } => {
                    let ty = self.checked.resolve(ty);
                    let (v, _) = self.expr(value)?;
                    self.bind(&name.text, format!("({v} & {:#x}ULL)", ones(width_of(&ty))), ty);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The arguments of a call of action `a` (a direct call, or those its table's action list
    /// binds) as C: the copy-in before the call, the call's arguments after `r`, the copy-out
    /// after it. An out or inout argument is copied into a temporary the action writes through,
    /// and copied back after (P4's copy-in, copy-out, also when the action exits).
    fn action_arguments(&mut self, a: &str, args: &[Expr]) -> R<(String, String, String)> {
        let directions = self.action_param_directions(a);
        let (mut before, mut call, mut after) = (String::new(), String::new(), String::new());
        for (i, x) in args.iter().enumerate() {
            let (c, ty) = self.expr(x)?;
            if !matches!(directions.get(i), Some(Some(Direction::Out | Direction::InOut))) {
                call += &format!(", {c}");
                continue;
            }
            self.temps += 1;
            let t = format!("t_{}", self.temps);
            let _ = writeln!(before, "{} {t} = {c};", self.c_type(&ty)?);
            call += &format!(", &{t}");
            after += &self.assign(x, &t)?;
        }
        Ok((before, call, after))
    }

    /// Each parameter's direction, of the action `a` names here (the block's, else top-level).
    fn action_param_directions(&self, a: &str) -> Vec<Option<Direction>> {
        let local = self.program.decls.iter().find_map(|d| match d {
            Decl::Control { name, locals, .. } if name.text == self.block => locals.iter().find_map(|l| match l {
                Local::Action(x) if x.name.text == a => Some(x),
                _ => None,
            }),
            _ => None,
        });
        let top = || {
            self.program.decls.iter().find_map(|d| match d {
                Decl::Action(x) if x.name.text == a => Some(x),
                _ => None,
            })
        };
        local.or_else(top).map(|x| x.params.iter().map(|p| p.direction).collect()).unwrap_or_default()
    }

    fn action_fn(&self, a: &str) -> R<String> {
        let local = self.program.decls.iter().any(|d| match d {
            Decl::Control { name, locals, .. } if name.text == self.block => {
                locals.iter().any(|l| matches!(l, Local::Action(x) if x.name.text == a))
            }
            _ => false,
        });
        if local {
            return Ok(format!("p4_act_{}_{}", ident(&self.block), ident(a)));
        }
        if self.program.decls.iter().any(|d| matches!(d, Decl::Action(x) if x.name.text == a)) {
            return Ok(format!("p4_act__{}", ident(a)));
        }
        Err(no(format!("the function {a}")))
    }

    /// The block's parameters, bound to the run's state in the architecture's order.
    fn bind_params(&mut self, block: &str) -> R<()> {
        let (params, kind) = match self.block_decl(block) {
            Decl::Parser { params, .. } => (params, 0),
            Decl::Control { params, .. } => (params, 1),
            _ => unreachable!(),
        };
        let names: &[&str] = match (kind, params.len()) {
            (0, 4) => &["", "r->hdr", "r->meta", "r->sm"],
            (1, 3) => &["r->hdr", "r->meta", "r->sm"],
            // A deparser (packet_out, headers), or v1model's checksum controls (headers, metadata).
            (1, 2) if matches!(&params[0].ty, Type::Named(n, _) if n.text == "packet_out") => &["", "r->hdr"],
            (1, 2) => &["r->hdr", "r->meta"],
            _ => return Err(no(format!("block {block}'s parameters"))),
        };
        for (p, c) in params.iter().zip(names) {
            if !c.is_empty() {
                let ty = self.checked.resolve(&p.ty);
                self.bind(&p.name.text, c.to_string(), ty);
            } else {
                self.bind(&p.name.text, "packet".into(), Ty::Void);
            }
        }
        Ok(())
    }

    /// The block's own variables and instances: run members and maps.
    fn locals(&mut self, block: &str) -> R<()> {
        let locals: &[Local] = match self.block_decl(block) {
            Decl::Parser { locals, .. } | Decl::Control { locals, .. } => locals,
            _ => unreachable!(),
        };
        for l in locals {
            self.at = match l {
                Local::Var { name, .. } | Local::Const { name, .. } => Some(name.pos),
                Local::Instance(i) => Some(i.name.pos),
                Local::Action(a) => Some(a.name.pos),
                Local::Table(t) => Some(t.name.pos),
            };
            match l {
                Local::Var { ty, name, .. } => {
                    let ty = self.checked.resolve(ty);
                    let c = format!("l_{}_{}", ident(block), ident(&name.text));
                    let _ = writeln!(self.run_members, "\t{} {c};", self.c_type(&ty)?);
                    self.bind(&name.text, format!("r->{c}"), ty);
                }
                Local::Const { ty, name, value } => {
                    let ty = self.checked.resolve(ty);
                    let (v, _) = self.expr(value)?;
                    self.bind(&name.text, format!("({v} & {:#x}ULL)", ones(width_of(&ty))), ty);
                }
                Local::Instance(i) => {
                    let Type::Named(t, targs) = &i.ty else { continue };
                    let key = format!("{block}.{}", i.name.text);
                    let map = format!("p4_x_{}", ident(&key));
                    let sized = matches!(t.text.as_str(), "counter" | "meter" | "register" | "afdx_account");
                    let size = match i.args.first().filter(|_| sized) {
                        Some(a) => constant(a, locals, &self.program.decls)
                            .ok_or_else(|| no(format!("{key}: a size that is not a constant")))?
                            as usize,
                        None => 0,
                    };
                    match t.text.as_str() {
                        "counter" => {
                            let _ =
                                writeln!(self.out, "EF_MAP({map}, BPF_MAP_TYPE_PERCPU_ARRAY, 4, 16, {});", size.max(1));
                            self.counters.push((key, map, size));
                        }
                        "direct_counter" => self.direct.push(key),
                        "meter" | "direct_meter" => {
                            let kind_at = if t.text == "meter" { 1 } else { 0 };
                            let bytes = matches!(i.args.get(kind_at).map(|a| &a.kind), Some(ExprKind::Member(_, m)) if m.text == "bytes");
                            if t.text == "direct_meter" {
                                let _ = writeln!(self.run_members, "\t__u64 dm_{};", ident(&key));
                                self.direct_meters.push((key, bytes));
                            } else {
                                let (rates_map, words_map) =
                                    (format!("p4_mr_{}", ident(&key)), format!("p4_mw_{}", ident(&key)));
                                let n = size.max(1);
                                let _ = writeln!(
                                    self.out,
                                    "EF_MAP({rates_map}, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct p4_meter_rates), {n});"
                                );
                                let _ = writeln!(
                                    self.out,
                                    "EF_MAP({words_map}, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct p4_meter_words), {n});"
                                );
                                self.meters.push(KernelMeter { name: key, rates_map, words_map, cells: size, bytes });
                            }
                        }
                        "afdx_account" => {
                            let _ = writeln!(self.out, "EF_MAP({map}, BPF_MAP_TYPE_ARRAY, 4, 8, {});", size.max(1));
                            self.accounts.push((key, map, size));
                        }
                        "register" => {
                            let w = targs.first().map(|t| width_of(&self.checked.resolve(t))).unwrap_or(64);
                            if w > 64 {
                                return Err(no(format!("register {key} of {w} bits")));
                            }
                            let _ = writeln!(self.out, "EF_MAP({map}, BPF_MAP_TYPE_ARRAY, 4, 8, {});", size.max(1));
                            self.registers.push((key, map, size));
                        }
                        other if self.program.decls.iter().any(|d| matches!(d, Decl::Parser { name, .. } | Decl::Control { name, .. } if name.text == other)) => {
                            self.sub_blocks.insert(key, other.to_string());
                        }
                        other => return Err(no(format!("the {other} extern ({key})"))),
                    }
                }
                Local::Action(_) | Local::Table(_) => {}
            }
        }
        Ok(())
    }

    fn actions(&mut self, block: Option<&str>) -> R<()> {
        let actions: Vec<&crate::frontend::ast::Action> = match block {
            Some(b) => match self.block_decl(b) {
                Decl::Control { locals, .. } => locals
                    .iter()
                    .filter_map(|l| match l {
                        Local::Action(a) => Some(a),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            },
            None => self
                .program
                .decls
                .iter()
                .filter_map(|d| match d {
                    Decl::Action(a) => Some(a),
                    _ => None,
                })
                .collect(),
        };
        for a in actions {
            self.at = Some(a.name.pos);
            let f = match block {
                Some(b) => format!("p4_act_{}_{}", ident(b), ident(&a.name.text)),
                None => format!("p4_act__{}", ident(&a.name.text)),
            };
            self.scopes.push(HashMap::new());
            let mut sig = format!("static __always_inline void {f}(struct p4_run *r");
            for p in &a.params {
                let ty = self.checked.resolve(&p.ty);
                let c = format!("a_{}", ident(&p.name.text));
                // out and inout: the caller's copy, by pointer (the call site copies in and out).
                if matches!(p.direction, Some(Direction::Out | Direction::InOut)) {
                    sig += &format!(", {} *{c}", self.c_type(&ty)?);
                    self.bind(&p.name.text, format!("(*{c})"), ty);
                    continue;
                }
                if !matches!(ty, Ty::Bit(_) | Ty::Int(_) | Ty::Bool | Ty::Error | Ty::Enum(_)) {
                    return Err(no(format!("action {}'s parameter {} of type {}", a.name.text, p.name.text, ty)));
                }
                sig += &format!(", __u64 {c}");
                self.bind(&p.name.text, c, ty);
            }
            self.exit_label = "return;\n".into();
            let body = self.stmts(&a.body)?;
            self.scopes.pop();
            let _ = write!(self.funcs, "{sig})\n{{\n{body}}}\n\n");
        }
        Ok(())
    }

    fn tables(&mut self, block: &str) -> R<()> {
        let Decl::Control { locals, .. } = self.block_decl(block) else { return Ok(()) };
        for l in locals {
            let Local::Table(t) = l else { continue };
            self.at = Some(t.name.pos);
            let target = format!("{block}.{}", t.name.text);
            if crate::info::implementation_of(t).is_some() {
                return Err(no(format!("{target}'s action profile or selector (implementation = ...)")));
            }
            let number = self.tables.len() as u32;
            let mut keys = Vec::new();
            let mut key_c = Vec::new();
            for k in &t.keys {
                let (c, ty) = self.expr(&k.expr)?;
                let w = width_of(&ty);
                if w > 64 {
                    return Err(no(format!("{target}'s key of {w} bits")));
                }
                keys.push((w, k.match_kind.text.clone()));
                key_c.push(c);
            }
            let lpm = keys.iter().filter(|(_, k)| k == "lpm").count();
            let kind = if keys.iter().all(|(_, k)| k == "exact") && !keys.is_empty() {
                TableKind::Exact
            } else if lpm == 1 && keys.len() == 1 {
                TableKind::Lpm
            } else {
                TableKind::Scan
            };
            let declared = match &t.size {
                Some(size) => constant(size, locals, &self.program.decls)
                    .ok_or_else(|| no(format!("{target}: a size that is not a constant")))?
                    as usize,
                None => 1024,
            };
            // A scanned table holds SCAN_MAX entries in the kernel whatever its declared size
            // (1 024 when it declares none): while the control plane has written more, the
            // kernel's write fails and every frame goes up (`p4_config[1]`), decided in userspace.
            let size = if kind == TableKind::Scan { declared.min(SCAN_MAX) } else { declared.max(1) };
            // `actions = { a(hdr.x); }`: the arguments the action list binds (its first,
            // directed parameters), copied in and out around the call as a direct call's are.
            let mut bound_args = Vec::new();
            for a in &t.actions {
                if a.args.is_empty() {
                    bound_args.push(None);
                    continue;
                }
                bound_args.push(Some(self.action_arguments(&a.name.text, &a.args)?));
            }
            let actions: Vec<String> = t.actions.iter().map(|a| a.name.text.clone()).collect();
            let mut max_args = 0;
            for a in &actions {
                let n = self.action_params(block, a);
                max_args = max_args.max(n);
            }
            self.max_args = self.max_args.max(max_args);
            let map = format!("p4_t_{}", ident(&target));
            let hits_map = format!("p4_h_{}", ident(&target));
            let meter = t.properties.iter().find(|(p, _)| p.text == "meters").and_then(|(_, e)| match &e.kind {
                ExprKind::Name(n) => Some(format!("{block}.{n}")),
                _ => None,
            });
            let meter = meter.map(|name| {
                let bytes = self.direct_meters.iter().any(|(k, b)| *k == name && *b);
                let t = ident(&target);
                KernelMeter {
                    name,
                    rates_map: format!("p4_dmr_{t}"),
                    words_map: format!("p4_dmw_{t}"),
                    cells: size,
                    bytes,
                }
            });
            let kt = KernelTable { target: target.clone(), number, map, hits_map, kind, keys, actions, size, meter };
            self.tables.push(kt);
            self.table_keys.push(key_c);
            self.table_bound_args.push(bound_args);
        }
        Ok(())
    }

    fn action_params(&self, block: &str, a: &str) -> usize {
        let find = |x: &crate::frontend::ast::Action| x.params.iter().filter(|p| p.direction.is_none()).count();
        for d in &self.program.decls {
            match d {
                Decl::Control { name, locals, .. } if name.text == block => {
                    for l in locals {
                        if let Local::Action(x) = l {
                            if x.name.text == a {
                                return find(x);
                            }
                        }
                    }
                }
                Decl::Action(x) if x.name.text == a => return find(x),
                _ => {}
            }
        }
        0
    }
}

/// What stands for a stack's `next` or `last` past its headers once its index is a constant
/// (`s[u128::MAX]`): read, it is P4's error.StackOutOfBounds, where an index past the headers
/// reads an invalid header of zeros (as the software target has them).
const NEXT_PAST_END: u128 = u128::MAX;

/// `e` with the node at `node` (found in `e` by address) replaced by `with`.
fn substitute(e: &Expr, node: *const Expr, with: &Expr) -> Expr {
    if std::ptr::eq(e, node) {
        return with.clone();
    }
    let sub = |x: &Expr| Box::new(substitute(x, node, with));
    let kind = match &e.kind {
        ExprKind::Member(inner, m) => ExprKind::Member(sub(inner), m.clone()),
        ExprKind::Index(base, i) => ExprKind::Index(sub(base), sub(i)),
        ExprKind::Slice(inner, h, l) => ExprKind::Slice(sub(inner), h.clone(), l.clone()),
        ExprKind::Call { callee, type_args, args } => ExprKind::Call {
            callee: sub(callee),
            type_args: type_args.clone(),
            args: args.iter().map(|a| substitute(a, node, with)).collect(),
        },
        ExprKind::Unary(op, x) => ExprKind::Unary(*op, sub(x)),
        ExprKind::Binary(op, a, b) => ExprKind::Binary(*op, sub(a), sub(b)),
        ExprKind::Cond(c, a, b) => ExprKind::Cond(sub(c), sub(a), sub(b)),
        ExprKind::Cast(t, x) => ExprKind::Cast(t.clone(), sub(x)),
        ExprKind::List(items) => ExprKind::List(items.iter().map(|a| substitute(a, node, with)).collect()),
        other => other.clone(),
    };
    Expr { kind, pos: e.pos }
}

/// Where an lvalue (or `x.isValid()`) indexes a header stack by a value known only when a frame
/// runs: the node (`s[i]`, `s.next`, `s.last`), the stack, and the index (none for `next` and
/// `last`, with whether it is `last`).
struct RuntimeIndex<'e> {
    node: &'e Expr,
    stack: &'e Expr,
    index: Option<&'e Expr>,
    last: bool,
}

// Header stacks (issue 52, items 3 and 5). A stack is a C array of its headers and its
// `nextIndex`; an index known only when a frame runs becomes a switch over the stack's headers,
// each case the same code with a constant index (the verifier wants bounded accesses), and a
// default case for an index past the end: reads of an invalid header of zeros, writes that
// change nothing, as the software target has them.
impl Gen<'_> {
    /// An index that is a constant: a number, or arithmetic on the program's constants (not a
    /// name in scope, which may shadow one).
    fn index_constant(&self, idx: &Expr) -> Option<u128> {
        fn names_in_scope(g: &Gen, e: &Expr) -> bool {
            match &e.kind {
                ExprKind::Name(n) => g.lookup(n).is_some(),
                ExprKind::Cast(_, x) => names_in_scope(g, x),
                ExprKind::Binary(_, a, b) => names_in_scope(g, a) || names_in_scope(g, b),
                _ => false,
            }
        }
        if names_in_scope(self, idx) {
            return None;
        }
        constant(idx, &[], &self.program.decls)
    }

    /// The first index known only at run time on `e`'s path (its members, indices and slices
    /// down to the variable; `e.isValid()`'s object), if any.
    fn runtime_index<'e>(&mut self, e: &'e Expr) -> R<Option<RuntimeIndex<'e>>> {
        match &e.kind {
            ExprKind::Call { callee, args, .. } if args.is_empty() => match &callee.kind {
                ExprKind::Member(obj, m) if m.text == "isValid" => self.runtime_index(obj),
                _ => Ok(None),
            },
            ExprKind::Member(inner, m) => {
                if m.text == "next" || m.text == "last" {
                    let (_, ty) = self.expr(inner)?;
                    if let Ty::Stack(..) = ty {
                        return Ok(Some(RuntimeIndex { node: e, stack: inner, index: None, last: m.text == "last" }));
                    }
                }
                self.runtime_index(inner)
            }
            ExprKind::Index(base, idx) => {
                if self.index_constant(idx).is_none() {
                    return Ok(Some(RuntimeIndex { node: e, stack: base, index: Some(idx), last: false }));
                }
                self.runtime_index(base)
            }
            ExprKind::Slice(inner, ..) => self.runtime_index(inner),
            _ => Ok(None),
        }
    }

    /// A switch over the stack's headers on the run-time index `at`: `case_c` gives each case's
    /// code from the node's replacement (`stack[k]`), then the default's (past the end).
    fn index_switch(&mut self, at: &RuntimeIndex, case_c: &mut dyn FnMut(&mut Self, &Expr) -> R<String>) -> R<String> {
        let (stack_c, ty) = self.expr(at.stack)?;
        let Ty::Stack(_, n) = ty else { return Err(no("an index of this value")) };
        let index_c = match (at.index, at.last) {
            (Some(i), _) => self.expr(i)?.0,
            (None, false) => format!("{stack_c}.next"),
            (None, true) => format!("({stack_c}.next - 1)"),
        };
        self.temps += 1;
        let ix = format!("ix{}", self.temps);
        let element = |k: u128| Expr {
            kind: ExprKind::Index(
                Box::new(at.stack.clone()),
                Box::new(Expr { kind: ExprKind::Int { width: None, value: k }, pos: at.node.pos }),
            ),
            pos: at.node.pos,
        };
        let mut s = format!("{{ __u64 {ix} = {index_c};\nswitch ({ix}) {{\n");
        for k in 0..n as u128 {
            let _ = write!(s, "case {k}: {{\n{}}}\nbreak;\n", case_c(self, &element(k))?);
        }
        let past = if at.index.is_some() { n as u128 } else { NEXT_PAST_END };
        let _ = write!(s, "default: {{\n{}}}\n}}\n}}\n", case_c(self, &element(past))?);
        Ok(s)
    }

    /// The value of `e` (a member, index, slice or `isValid()` of a stack's header) when an
    /// index on its path is known only at run time: the switch's cases each give it.
    fn runtime_value(&mut self, e: &Expr) -> R<Option<(String, Ty)>> {
        let Some(at) = self.runtime_index(e)? else { return Ok(None) };
        self.temps += 1;
        let result = format!("rv{}", self.temps);
        let mut ty = None;
        let node: *const Expr = at.node;
        let switch = self.index_switch(&at, &mut |g, element| {
            let (v, t) = g.expr(&substitute(e, node, element))?;
            ty.get_or_insert(t);
            Ok(format!("{result} = {v};\n"))
        })?;
        let ty = ty.expect("a stack has a header");
        Ok(Some((format!("({{ {} {result} = {{0}};\n{switch}{result}; }})", self.c_type(&ty)?), ty)))
    }

    /// A statement that writes through (or extracts into, validates, passes as an argument) a
    /// stack's header at an index known only at run time: the statement once per header, in a
    /// switch. `extract(s.next)` then moves `next` on.
    fn expand_stmt(&mut self, st: &Stmt) -> R<Option<String>> {
        let lvalues: Vec<&Expr> = match st {
            Stmt::Assign { target, .. } => vec![target],
            // The header a method names (`s[i].setValid()`, `extract(s.next)`). An action's,
            // function's or sub-block's argument is not expanded here: its copy-in is a value and
            // its copy-out an assignment, each taking the index when it runs, as the software
            // target does (after the body, for the copy-out).
            Stmt::Call(Expr { kind: ExprKind::Call { callee, args, .. }, .. }) => match &callee.kind {
                ExprKind::Member(obj, m) => match m.text.as_str() {
                    "setValid" | "setInvalid" | "push_front" | "pop_front" => vec![&**obj],
                    "extract" | "emit" => args.first().into_iter().collect(),
                    _ => return Ok(None),
                },
                _ => return Ok(None),
            },
            _ => return Ok(None),
        };
        for lv in lvalues {
            let Some(at) = self.runtime_index(lv)? else { continue };
            let moves_next = match st {
                Stmt::Call(Expr { kind: ExprKind::Call { callee, args, .. }, .. }) => {
                    matches!(&callee.kind, ExprKind::Member(_, m) if m.text == "extract")
                        && std::ptr::eq(lv, &args[0])
                        && at.index.is_none()
                        && !at.last
                }
                _ => false,
            };
            let node: *const Expr = at.node;
            let mut s = self.index_switch(&at, &mut |g, element| {
                let st = match st {
                    Stmt::Assign { target, value } => {
                        let target = substitute(target, node, element);
                        // `a op= b` (the parser wrote `a = a op b`, `a` at its own place): `a`'s
                        // index is evaluated once, for the value too, as the software target has it.
                        let value = match &value.kind {
                            ExprKind::Binary(op, lhs, rhs) if **lhs == *lv && value.pos == lv.pos => Expr {
                                kind: ExprKind::Binary(*op, Box::new(target.clone()), rhs.clone()),
                                pos: value.pos,
                            },
                            _ => value.clone(),
                        };
                        Stmt::Assign { target, value }
                    }
                    Stmt::Call(e) => Stmt::Call(substitute(e, node, element)),
                    _ => unreachable!("only assignments and calls"),
                };
                g.stmt(&st)
            })?;
            if moves_next {
                let (stack_c, _) = self.expr(at.stack)?;
                let _ = writeln!(s, "{stack_c}.next += 1;");
            }
            return Ok(Some(s));
        }
        Ok(None)
    }

    /// Whether the lvalue `e` names a header past its stack's end (a constant index the
    /// switch's default case gave it): `Some(true)` when that was `next` or `last`.
    fn past_end(&mut self, e: &Expr) -> R<Option<bool>> {
        match &e.kind {
            ExprKind::Member(inner, _) | ExprKind::Slice(inner, ..) => self.past_end(inner),
            ExprKind::Index(base, idx) => {
                if let (ExprKind::Int { value, .. }, (_, Ty::Stack(_, n))) = (&idx.kind, self.expr(base)?) {
                    if *value >= n as u128 {
                        return Ok(Some(*value == NEXT_PAST_END));
                    }
                }
                self.past_end(base)
            }
            _ => Ok(None),
        }
    }

    /// What P4's error.StackOutOfBounds does where it is met: a parser rejects the frame with
    /// it; a control (setValid of a header past the end) sends the frame up, for the software
    /// target to decide.
    fn out_of_bounds(&self) -> String {
        if self.in_parser {
            format!("r->sm.f_parser_error = {}; goto reject;\n", self.error_index("StackOutOfBounds"))
        } else {
            format!("r->misfit = 1; r->exited = 1; {}", self.exit_label)
        }
    }

    /// `stack[k]` for a constant `k`: past the end, an invalid header of zeros that a write
    /// leaves unchanged (a compound literal), or for `next` and `last` the parser's error.
    fn stack_element(&mut self, base: &Expr, k: u128) -> R<(String, Ty)> {
        let (c, ty) = self.expr(base)?;
        let Ty::Stack(elem, n) = ty else { return Err(no("an index ([...]) of this value")) };
        let ec = self.c_type(&elem)?;
        Ok(if k == NEXT_PAST_END {
            (format!("({{ {}({ec}){{0}}; }})", self.out_of_bounds()), *elem)
        } else if k >= n as u128 {
            (format!("(({ec}){{0}})"), *elem)
        } else {
            (format!("{c}.e[{k}]"), *elem)
        })
    }

    /// `stack.push_front(count)` or `pop_front(count)`: the headers (and where each lies in the
    /// frame) move `count` places, the places left behind become invalid, `next` moves with them
    /// within 0 and the size, as the software target's `shift_stack`.
    fn shift_stack(&mut self, obj: &Expr, push: bool, count: &Expr) -> R<String> {
        let (c, ty) = self.expr(obj)?;
        let Ty::Stack(elem, n) = ty else { return Err(no("push_front or pop_front of this value")) };
        let Some(m) = constant(count, &[], &self.program.decls) else {
            return Err(no("push_front or pop_front by a count that is not a constant"));
        };
        let (n, m) = (n as usize, (m as usize).min(n as usize));
        // The headers rotate, as the software target's do: a place left behind holds the
        // fields of one pushed (or popped) off the other end, made invalid.
        let ec = self.c_type(&elem)?;
        let mut s = String::new();
        let moved = |g: &mut Self, to: usize, from: usize| {
            let (to, from) = (format!("{c}.e[{to}]"), format!("{c}.e[{from}]"));
            format!("{to} = {from};\n{}", g.place_copies(&to, &from, &elem))
        };
        for _ in 0..m {
            if push {
                let _ = writeln!(s, "{{ {ec} spun = {c}.e[{}];", n - 1);
                for k in (1..n).rev() {
                    s += &moved(self, k, k - 1);
                }
                let _ = writeln!(s, "{c}.e[0] = spun; }}");
            } else {
                let _ = writeln!(s, "{{ {ec} spun = {c}.e[0];");
                for k in 0..n - 1 {
                    s += &moved(self, k, k + 1);
                }
                let _ = writeln!(s, "{c}.e[{}] = spun; }}", n - 1);
            }
        }
        let vacated = if push { 0..m } else { n - m..n };
        for k in vacated {
            s += &self.invalidate(&format!("{c}.e[{k}]"), &elem);
        }
        if push {
            let _ = writeln!(s, "{c}.next = {c}.next + {m} > {n} ? {n} : {c}.next + {m};");
        } else {
            let _ = writeln!(s, "{c}.next = {c}.next > {m} ? {c}.next - {m} : 0;");
        }
        Ok(s)
    }

    /// C that makes the header (or each header of the union) `c` invalid.
    fn invalidate(&self, c: &str, ty: &Ty) -> String {
        match ty {
            Ty::Union(u) => match self.layout(u) {
                Some(Layout::Union(members)) => {
                    members.iter().map(|(m, _)| format!("{c}.f_{}.valid = 0;\n", ident(m))).collect()
                }
                _ => String::new(),
            },
            _ => format!("{c}.valid = 0;\n"),
        }
    }
}

fn width_of(ty: &Ty) -> u32 {
    match ty {
        Ty::Bit(w) | Ty::Int(w) => *w,
        Ty::Bool => 1,
        _ => 64,
    }
}

/// What every generated program shares: map definitions the edgeflow loader reads, bit access
/// into the frame's copy, counters and registers.
/// The fast path's own map header (`bpf/maps.h`) comes in whole: the generated program is
/// compiled where the repository may not be.
const RUNTIME: &str = concat!(
    "#include <linux/bpf.h>\n#include <linux/pkt_cls.h>\n#include <bpf/bpf_helpers.h>\n#include <bpf/bpf_endian.h>\n",
    include_str!("../../../../../bpf/maps.h"),
    include_str!("runtime.h"),
);

impl Gen<'_> {
    fn generate(&mut self) -> R<()> {
        self.declare_types()?;
        let blocks = self.checked.blocks.clone();
        // v1model's six blocks: parser, verifyChecksum, ingress, egress, computeChecksum, deparser.
        let (parser, checks, ingress, egress, deparser) = if self.v1model {
            (&blocks[0], vec![blocks[1].clone(), blocks[4].clone()], &blocks[2], &blocks[3], &blocks[5])
        } else {
            (&blocks[0], Vec::new(), &blocks[1], &blocks[2], &blocks[3])
        };
        let mut order = vec![parser.clone()];
        order.extend(checks.first().cloned());
        order.extend([ingress.clone(), egress.clone()]);
        order.extend(checks.get(1).cloned());
        order.push(deparser.clone());
        // Top-level actions (NoAction) first, then each control's locals, actions and tables.
        self.actions(None)?;
        for b in &order {
            self.block = b.clone();
            self.scopes.push(HashMap::new());
            self.bind_params(b)?;
            self.locals(b)?;
            if b != parser {
                self.actions(Some(b))?;
                let first = self.tables.len();
                self.tables(b)?;
                for i in first..self.tables.len() {
                    self.table_apply(i)?;
                }
            }
            let body = if b == parser { self.parser(b)? } else { self.control(b, b == deparser)? };
            self.funcs += &body;
            self.scopes.pop();
        }
        // The kernel's multicast groups have ports and no replication ids.
        if self.funcs.contains("f_egress_rid") {
            return Err(no("standard_metadata.egress_rid (replication ids)".to_string()));
        }
        let egress_writes_headers = self.writes_headers(egress);
        let blocks = entry::Blocks {
            ingress: ingress.clone(),
            egress: egress.clone(),
            checks: checks.clone(),
            egress_writes_headers,
        };
        self.funcs += &entry::entry(self.v1model, &blocks);
        self.assemble();
        Ok(())
    }

    /// Whether a control may change headers (an assignment under its header parameter, in its
    /// apply block or its actions): then multicast copies may differ, and go up.
    fn writes_headers(&self, block: &str) -> bool {
        let Decl::Control { params, locals, apply, .. } = self.block_decl(block) else { return true };
        let Some(hdr) = params.first().map(|p| p.name.text.clone()) else { return true };
        fn root(e: &Expr) -> Option<&str> {
            match &e.kind {
                ExprKind::Name(n) => Some(n),
                ExprKind::Member(i, _) | ExprKind::Slice(i, _, _) | ExprKind::Index(i, _) => root(i),
                _ => None,
            }
        }
        fn writes(stmts: &[Stmt], hdr: &str) -> bool {
            stmts.iter().any(|s| match s {
                Stmt::Assign { target, .. } => root(target) == Some(hdr),
                Stmt::If { then, otherwise, .. } => writes(then, hdr) || otherwise.as_ref().is_some_and(|o| writes(o, hdr)),
                Stmt::Block(b) => writes(b, hdr),
                Stmt::Switch { cases, .. } => cases.iter().any(|(_, b)| b.as_ref().is_some_and(|b| writes(b, hdr))),
                Stmt::Call(e) => matches!(&e.kind, ExprKind::Call { callee, .. }
                    if matches!(&callee.kind, ExprKind::Member(_, m) if matches!(m.text.as_str(), "setValid" | "setInvalid" | "push_front" | "pop_front"))),
                _ => false,
            })
        }
        writes(apply, &hdr) || locals.iter().any(|l| matches!(l, Local::Action(a) if writes(&a.body, &hdr)))
    }

    fn table_apply(&mut self, i: usize) -> R<()> {
        let t = self.tables[i].clone();
        let keys = self.table_keys[i].clone();
        let f = format!("p4_apply_{}", ident(&t.target));
        let n = t.keys.len();
        let mut s = format!(
            "static __always_inline void {f}(struct p4_run *r)\n{{\n\tstruct p4_value *v = 0;\n\t__u32 tn = {};\n",
            t.number
        );
        match t.kind {
            TableKind::Exact => {
                let _ = writeln!(
                    self.out,
                    "EF_MAP({}, BPF_MAP_TYPE_HASH, {}, sizeof(struct p4_value), {});",
                    t.map,
                    8 * n,
                    t.size
                );
                let _ = writeln!(s, "\t__u64 key[{n}];");
                for (j, k) in keys.iter().enumerate() {
                    let _ = writeln!(s, "\tkey[{j}] = {k};");
                }
                let _ = writeln!(s, "\tv = bpf_map_lookup_elem(&{}, key);", t.map);
            }
            TableKind::Lpm => {
                let bytes = t.keys[0].0.div_ceil(8);
                let _ = writeln!(
                    self.out,
                    "EF_MAP_FLAGS({}, BPF_MAP_TYPE_LPM_TRIE, {}, sizeof(struct p4_value), {}, BPF_F_NO_PREALLOC);",
                    t.map,
                    4 + bytes,
                    t.size
                );
                // Left-aligned, as `table_key` writes the entries (see there).
                let pad = 8 * bytes - t.keys[0].0;
                let _ = writeln!(
                    s,
                    "\tstruct {{ __u32 prefixlen; __u8 data[{bytes}]; }} key;\n\t__u64 kv = (__u64)({}) << {pad};",
                    keys[0]
                );
                let _ = writeln!(s, "\tkey.prefixlen = {};", t.keys[0].0);
                for b in 0..bytes {
                    let _ = writeln!(s, "\tkey.data[{b}] = kv >> {};", 8 * (bytes - 1 - b));
                }
                let _ = writeln!(s, "\tv = bpf_map_lookup_elem(&{}, &key);", t.map);
            }
            TableKind::Scan => {
                let st = format!("p4_scan_{}", ident(&t.target));
                let _ = writeln!(
                    self.out,
                    "struct {st} {{ __u64 present; __s64 priority; __u64 k[{n}][4]; __u64 lpm; struct p4_value value; }};"
                );
                let _ =
                    writeln!(self.out, "EF_MAP({}, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct {st}), {});", t.map, t.size);
                let _ = writeln!(s, "\t__u64 kv[{n}];");
                for (j, k) in keys.iter().enumerate() {
                    let _ = writeln!(s, "\tkv[{j}] = {k};");
                }
                let _ = writeln!(s, "\tstruct {st} *best = 0;");
                let _ = writeln!(s, "\tfor (__u32 i = 0; i < {}; i++) {{", t.size);
                let _ = writeln!(s, "\t\t__u32 at = i;\n\t\tstruct {st} *e = bpf_map_lookup_elem(&{}, &at);", t.map);
                s += "\t\tif (!e || !e->present)\n\t\t\tcontinue;\n";
                for j in 0..n {
                    let _ = writeln!(
                        s,
                        "\t\tif ((kv[{j}] & e->k[{j}][1]) != (e->k[{j}][0] & e->k[{j}][1]) || kv[{j}] < e->k[{j}][2] || kv[{j}] > e->k[{j}][3])\n\t\t\tcontinue;"
                    );
                }
                s += "\t\tif (!best || e->lpm > best->lpm || (e->lpm == best->lpm && e->priority > best->priority))\n\t\t\tbest = e;\n\t}\n";
                s += "\tif (best)\n\t\tv = &best->value;\n";
            }
        }
        let _ = writeln!(
            self.out,
            "EF_MAP({}, BPF_MAP_TYPE_PERCPU_ARRAY, 4, sizeof(struct p4_cells), {});",
            t.hits_map, t.size
        );
        // A hit marks the entry's cell of the table's direct meter; a miss reads green.
        let (mut marked, mut missed) = (String::new(), String::new());
        if let Some(m) = &t.meter {
            let _ = writeln!(
                self.out,
                "EF_MAP({}, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct p4_meter_rates), {});",
                m.rates_map, t.size
            );
            let _ = writeln!(
                self.out,
                "EF_MAP({}, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct p4_meter_words), {});",
                m.words_map, t.size
            );
            let units = if m.bytes { "r->sm.f_packet_length" } else { "1" };
            let colour = format!("r->dm_{}", ident(&m.name));
            marked = format!(
                "\t\t{colour} = p4_meter(&{}, &{}, {}, v->index, {units}, r->sm.f_timestamp);\n",
                m.rates_map, m.words_map, t.size
            );
            missed = format!("\t\t{colour} = 0;\n");
        }
        let _ = writeln!(
            s,
            "\tr->hit = v != 0;\n\tif (v) {{\n\t\tp4_count(&{}, v->index, {}, r->sm.f_packet_length);\n{marked}\t}} else {{\n{missed}\t\tv = bpf_map_lookup_elem(&p4_defaults, &tn);\n\t\tif (!v) {{\n\t\t\tr->action_run = 0;\n\t\t\treturn;\n\t\t}}\n\t}}",
            t.hits_map, t.size
        );
        s += "\tr->action_run = v->action;\n\tswitch (v->action) {\n";
        let bound_args = self.table_bound_args[i].clone();
        for (j, a) in t.actions.iter().enumerate() {
            let f = self.action_fn(a)?;
            let n = self.action_params(&self.block, a);
            let args: String = (0..n).map(|k| format!(", v->args[{k}]")).collect();
            let (before, bound, after) = bound_args[j].clone().unwrap_or_default();
            let _ = writeln!(s, "\tcase {}: {{\n{before}\t\t{f}(r{bound}{args});\n{after}\t\tbreak;\n\t}}", j + 1);
        }
        s += "\t}\n}\n\n";
        self.funcs += &s;
        Ok(())
    }

    /// A parser's states as labelled C, each ending in a goto: `prefix` names them, `accept`
    /// is where accepting goes (the parser's end, or back into the state that applied a
    /// sub-parser). A parser that loops (a stack filled through `next`) is unrolled, since the
    /// verifier wants a bound it can see: the states are generated once per pass, a transition
    /// back along a loop goes on to the next pass, and past the last pass the frame goes up.
    /// There are as many passes as the largest stack has headers, plus one: a loop that fills a
    /// stack meets `StackOutOfBounds` in the last.
    fn states(&mut self, states: &[crate::frontend::ast::State], prefix: &str, accept: &str) -> R<String> {
        let mut order = Vec::new();
        let mut back_edges = Vec::new();
        let next_of = |t: &Transition| -> Vec<String> {
            match t {
                Transition::Goto(n) => vec![n.text.clone()],
                Transition::Select { cases, .. } => cases.iter().map(|c| c.next.text.clone()).collect(),
            }
        };
        // Depth first from start: a transition to a state on the path is a loop's way back.
        fn visit(
            at: &str,
            states: &[crate::frontend::ast::State],
            next_of: &dyn Fn(&Transition) -> Vec<String>,
            path: &mut Vec<String>,
            order: &mut Vec<String>,
            back_edges: &mut Vec<(String, String)>,
        ) {
            if at == "accept" || at == "reject" || order.iter().any(|o| o == at) {
                return;
            }
            path.push(at.to_string());
            if let Some(s) = states.iter().find(|s| s.name.text == at) {
                for n in next_of(&s.transition) {
                    if path.contains(&n) {
                        back_edges.push((at.to_string(), n));
                    } else {
                        visit(&n, states, next_of, path, order, back_edges);
                    }
                }
            }
            path.pop();
            order.push(at.to_string());
        }
        visit("start", states, &next_of, &mut Vec::new(), &mut order, &mut back_edges);
        let passes = if back_edges.is_empty() { 1 } else { self.largest_stack() + 1 };
        // The passes after the first hold the states a loop reaches, not the rest (a state
        // before the loop applying a sub-parser would copy its parameters once per pass).
        let mut in_loops: Vec<String> = back_edges.iter().map(|(_, to)| to.clone()).collect();
        let mut i = 0;
        while i < in_loops.len() {
            if let Some(st) = states.iter().find(|s| s.name.text == in_loops[i]) {
                for n in next_of(&st.transition) {
                    if n != "accept" && n != "reject" && !in_loops.contains(&n) {
                        in_loops.push(n);
                    }
                }
            }
            i += 1;
        }
        // A P4 name does not start with a digit: the later passes' labels are apart.
        let label = |state: &str, pass: usize| match pass {
            0 => format!("{prefix}{}", ident(state)),
            p => format!("{prefix}{p}_{}", ident(state)),
        };
        let no_match = self.error_index("NoMatch");
        let mut s = String::new();
        for pass in 0..passes {
            for st in states {
                if !order.contains(&st.name.text) || (pass > 0 && !in_loops.contains(&st.name.text)) {
                    continue;
                }
                self.at = Some(st.name.pos);
                // Each state a C block of its own: states may declare variables of one name.
                let _ = writeln!(s, "{}: {{", label(&st.name.text, pass));
                s += &self.stmts(&st.body)?;
                let target = |n: &str| match n {
                    "accept" => accept.to_string(),
                    "reject" => "reject".to_string(),
                    n if back_edges.iter().any(|(a, b)| *a == st.name.text && b == n) => {
                        if pass + 1 < passes {
                            label(n, pass + 1)
                        } else {
                            format!("{prefix}loop_up")
                        }
                    }
                    n => label(n, pass),
                };
                match &st.transition {
                    Transition::Goto(n) => {
                        let _ = writeln!(s, "\tgoto {};", target(&n.text));
                    }
                    Transition::Select { exprs, cases } => {
                        let mut ks = Vec::new();
                        for e in exprs {
                            ks.push(self.expr(e)?.0);
                        }
                        for c in cases {
                            let keys: Vec<&Keyset> = if c.keys.len() == 1 && ks.len() > 1 {
                                vec![&c.keys[0]; ks.len()]
                            } else {
                                c.keys.iter().collect()
                            };
                            let mut conds = Vec::new();
                            for (k, key) in ks.iter().zip(keys) {
                                match key {
                                    Keyset::Default | Keyset::DontCare => {}
                                    Keyset::Value(v) => conds.push(format!("{k} == {}", self.expr(v)?.0)),
                                    Keyset::Mask(v, m) => {
                                        let (v, m) = (self.expr(v)?.0, self.expr(m)?.0);
                                        conds.push(format!("({k} & {m}) == ({v} & {m})"));
                                    }
                                    Keyset::Range(a, b) => {
                                        let (a, b) = (self.expr(a)?.0, self.expr(b)?.0);
                                        conds.push(format!("{k} >= {a} && {k} <= {b}"));
                                    }
                                }
                            }
                            let cond = if conds.is_empty() { "1".to_string() } else { conds.join(" && ") };
                            let _ = writeln!(s, "\tif ({cond})\n\t\tgoto {};", target(&c.next.text));
                        }
                        let _ = writeln!(s, "\tr->sm.f_parser_error = {no_match};\n\tgoto reject;");
                    }
                }
                s += "}\n";
            }
        }
        if !back_edges.is_empty() {
            // Past the last pass: the software target decides (it stops at 65 536 states).
            let _ = writeln!(s, "{prefix}loop_up:\n\tr->misfit = 1;\n\tgoto reject;");
        }
        Ok(s)
    }

    /// The most headers a stack of the program holds (1 without stacks).
    fn largest_stack(&self) -> usize {
        let mut largest = 1;
        for layout in self.checked.layouts.values() {
            if let Layout::Struct(fields) | Layout::Header(fields) | Layout::Union(fields) = layout {
                for (_, t) in fields {
                    if let Ty::Stack(_, n) = t {
                        largest = largest.max(*n as usize);
                    }
                }
            }
        }
        largest
    }

    fn parser(&mut self, block: &str) -> R<String> {
        let Decl::Parser { states, .. } = self.block_decl(block) else { unreachable!() };
        self.in_parser = true;
        let inits = self.local_inits(block);
        let code = inits.and_then(|inits| Ok((inits, self.states(states, "st_", "st_accept")?)));
        self.in_parser = false;
        let (inits, code) = code?;
        let mut s = format!("static __always_inline int p4_parse(struct p4_run *r)\n{{\n{inits}\tgoto st_start;\n");
        s += &code;
        s += &std::mem::take(&mut self.deferred_states);
        s += "st_accept:\n\treturn 0;\nreject:\n\treturn -1;\n}\n\n";
        Ok(s)
    }

    fn control(&mut self, block: &str, deparser: bool) -> R<String> {
        let Decl::Control { apply, .. } = self.block_decl(block) else { unreachable!() };
        let end = format!("end_{}", ident(block));
        self.exit_label = format!("goto {end};\n");
        let inits = self.local_inits(block)?;
        let body = self.stmts(apply)?;
        let f = if deparser { "p4_deparse".to_string() } else { format!("p4_ctl_{}", ident(block)) };
        let start = if deparser { "\tr->emitted = 0;\n" } else { "" };
        Ok(format!(
            "static __always_inline void {f}(struct p4_run *r)\n{{\n{start}{inits}{body}{end}:\n\treturn;\n}}\n\n"
        ))
    }

    /// The block's variables given a value where declared (`bit<8> x = 1;`): set each time
    /// the block runs, before its body (they read 0 otherwise, the software target the value).
    fn local_inits(&mut self, block: &str) -> R<String> {
        let locals: &[Local] = match self.block_decl(block) {
            Decl::Parser { locals, .. } | Decl::Control { locals, .. } => locals,
            _ => unreachable!(),
        };
        let mut s = String::new();
        for l in locals {
            if let Local::Var { name, init: Some(value), ty } = l {
                let (v, _) = self.expr_as(value, &self.checked.resolve(ty))?;
                let target = Expr { kind: ExprKind::Name(name.text.clone()), pos: name.pos };
                s += &format!("\t{}", self.assign(&target, &v)?);
            }
        }
        Ok(s)
    }

    fn assemble(&mut self) {
        let hdr_ty = self.parser_param_type(1);
        let meta_ty = self.parser_param_type(2);
        let mut at = String::new();
        for a in &self.headers {
            let _ = writeln!(at, "\t__u32 {};", a.trim_start_matches("r->"));
        }
        // Everything before `buf` is zeroed for each frame, in 8-byte words (`align` keeps `buf`
        // on a word).
        let run = format!(
            "struct p4_run {{\n\t{hdr_ty} hdr;\n\t{meta_ty} meta;\n\tstruct p4s_standard_metadata_t sm;\n\t\
             {meta_ty} saved_meta;\n\tstruct p4s_standard_metadata_t saved_sm;\n{}{at}\t__u32 len;\n\t__u32 off;\n\t\
             __u32 emitted;\n\t__u32 misfit;\n\t__u32 hit;\n\t__u32 action_run;\n\t__u32 exited;\n\t__u32 others_dropped;\n\t\
             __u64 align;\n\t__u8 buf[2 * P4_BUF];\n}};\n\
             EF_MAP(p4_scratch, BPF_MAP_TYPE_PERCPU_ARRAY, 4, sizeof(struct p4_run), 1);\n\n",
            self.run_members
        );
        let head = format!(
            "/* Generated by edgeflow from a P4 program (crates/p4/src/backends/ebpf): do not edit. */\n\
             #define P4_BUF {BUF}\n#define P4_GROUP_MAX {GROUP_MAX}\n#define P4_MAX_ARGS {}\n#define P4_TABLES {}\n",
            self.max_args.max(1),
            self.tables.len().max(1)
        );
        let mut types_and_maps = std::mem::take(&mut self.out);
        types_and_maps += &std::mem::take(&mut *self.stack_defs.borrow_mut());
        let funcs = std::mem::take(&mut self.funcs);
        self.out = format!("{head}{RUNTIME}\n{types_and_maps}\n{run}\n{funcs}");
    }

    fn parser_param_type(&self, i: usize) -> String {
        match self.block_decl(&self.checked.blocks[0]) {
            Decl::Parser { params, .. } => params
                .get(i)
                .map(|p| self.c_type(&self.checked.resolve(&p.ty)).unwrap_or_else(|_| "__u64".into()))
                .unwrap_or_default(),
            _ => unreachable!(),
        }
    }
}
