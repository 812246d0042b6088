//! The kernel back end (issue 36, item 2; issue 52, item 1): the mid end's IR printed as BPF C,
//! which clang compiles for TC and XDP as it compiles the fast path, with the maps its tables,
//! counters and registers live in. Like p4c's back ends it reads the lowered program only, never
//! the syntax tree, so it runs the program as the software target does (which executes the same
//! IR). Pure: program in, C text and the maps' layouts out; the datapath compiles, loads and
//! fills them ([`KernelTable`], [`table_key`], [`table_value`] and [`scan_entry`] say how an
//! entry is written).
//!
//! Why C and not bytecode written here: clang is already the fast path's compiler, the verifier
//! wants bounds checks and bounded loops that C and a header express plainly, and the output can
//! be read. p4c's eBPF back ends make the same choice.
//!
//! What fits (the rest is refused by name at its file and line, and the program then runs in
//! userspace): values of at most 64 bits, `bit<W>` and `int<W>`; a parser over at most 256 bytes
//! of headers, its loops unrolled; header stacks (an index known only when a frame runs bounded
//! where it is used); tables whose keys are exact (a hash), a single LPM key (multibit arrays when
//! it has at most 32 bits, `lpm_arrays.rs`, else an LPM trie), or
//! any others in a table of at most 256 entries (scanned in the software target's order:
//! longest prefix, then priority, then the earliest); parser value sets (an array map per set,
//! scanned by the select: `value_set.rs`); actions, functions and sub-blocks as C
//! functions with the IR's explicit copies; header unions; varbit fields that end their header;
//! v1model's checksums and hashes; `lookahead`; a deparser that writes back in place the headers
//! the parser read (checked as the frame goes: one that would not is sent up). Multicast copies
//! leave unchanged by egress. AFDX accounts run as the fast path's do, shared by every CPU
//! without a lock, and so do meters: each of a cell's two buckets is one word taken by
//! compare-and-swap, with the software target's arithmetic (`p4::backends::software::take`).
//!
//! The generated program keeps its state (a copy of the frame's first 256 bytes, the headers,
//! metadata and every IR variable) in a per-CPU map, not on the 512-byte stack, and records its
//! verdict in `p4_verdict` (tests read it after BPF_PROG_TEST_RUN).
//!
//! The stages, a file each: `printer.rs` (the driver, variables and types), `stmt.rs`
//! (statements and the functions actions and blocks become), `expr.rs` (places and
//! expressions), `externs.rs`, `tables.rs`, `parser.rs` (states, unrolled), `entry.rs` (the
//! program's entry point); the C they call is `runtime.h`. This file: the maps' layouts the
//! datapath writes by, and the entry of the back end.

use std::fmt::Write as _;

mod entry;
mod expr;
mod externs;
mod lpm_arrays;
mod parser;
mod printer;
mod stmt;
pub use lpm_arrays::{LpmArrays, LpmEntry, LpmPlan, LpmWriter, SLOTS as LPM_SLOTS};
mod tables;
mod value_set;
pub use value_set::{value_set_member, KernelValueSet};
mod written;

use crate::arch::Architecture;
use crate::diag::Pos;
use crate::midend::ir;

/// The checked program's C (the syntax tree lowered first, by `crate::driver`): what callers
/// holding the front end's output use.
pub use crate::driver::{generate, generate_in};

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
/// Ports below this have their interface (`p4_ifindex_near`) and counts (`p4_port_counts_near`)
/// in arrays the kernel reads without hashing; the hashes hold every port.
pub const NEAR_PORTS: u32 = 512;
/// The slots of `p4_port_slots`: an interface's port, kept where a frame finds it without
/// hashing (see [`port_slot`]).
pub const PORT_SLOTS: u32 = 1024;

/// The slot of `p4_port_slots` that interface `ifindex` may own, and the word it holds there
/// (ifindex, the port's VLAN tag for going up, the port number); None for a port number of 2^20
/// or more (or ifindex 0, which no interface has): the kernel then finds it in `p4_ports` only.
pub fn port_slot(ifindex: u32, port: u32, tag: u16) -> Option<(u32, u64)> {
    if ifindex == 0 || port >= 1 << 20 {
        return None;
    }
    Some((ifindex % PORT_SLOTS, (ifindex as u64) << 32 | ((tag & 0xfff) as u64) << 20 | port as u64))
}
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
    /// One LPM key of at most 32 bits: multibit arrays ([`LpmArrays`], `lpm_arrays.rs`), the
    /// values in an array by entry id (their index word, the hits cell, is still the entry's
    /// position).
    LpmArrays,
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
    /// The arrays of a [`TableKind::LpmArrays`] table.
    pub lpm_arrays: Option<LpmArrays>,
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
    /// The parsers' value sets (`value_set.rs`).
    pub value_sets: Vec<KernelValueSet>,
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
            let (value, prefix) = lpm_prefix(width, keys)?;
            // The trie compares from the first byte's top bit: a key of a width that is not whole
            // bytes goes in left-aligned, its prefix first (as the lookup builds it).
            let pad = 8 * bytes as u32 - width;
            let mut k = prefix.to_ne_bytes().to_vec();
            k.extend_from_slice(&(value << pad).to_be_bytes()[16 - bytes..]);
            Some(k)
        }
        TableKind::Scan | TableKind::LpmArrays => None,
    }
}

/// An LPM table's entry as a prefix: its value and length.
fn lpm_prefix(width: u32, keys: &[crate::backends::software::Match]) -> Option<(u128, u32)> {
    use crate::backends::software::Match;
    Some(match keys {
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
    })
}

/// An entry of a [`TableKind::LpmArrays`] table as its writer paints it; `value` is its
/// [`table_value`].
pub fn lpm_entry(
    t: &KernelTable,
    keys: &[crate::backends::software::Match],
    priority: i64,
    value: Vec<u8>,
) -> Option<LpmEntry> {
    let width = t.keys[0].0;
    let (prefix, len) = lpm_prefix(width, keys)?;
    Some(LpmEntry { value: (prefix & ones(width) as u128) as u32, len: len.min(width), priority, value_bytes: value })
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
        if let Match::Lpm { prefix, .. } = *m {
            lpm_len += prefix as u64;
        }
        push_scanned_key(&mut e, m, *w);
    }
    e.extend_from_slice(&lpm_len.to_ne_bytes());
    e.extend_from_slice(value);
    e
}

/// The C that skips slot `e` of a scan (a scanned table's or a value set's) unless its key `j`
/// holds `key` ([`push_scanned_key`]).
fn skip_unless_scanned_key(s: &mut String, key: &str, j: usize) {
    use std::fmt::Write as _;
    let _ = writeln!(
        s,
        "\t\tif (({key} & e->k[{j}][1]) != (e->k[{j}][0] & e->k[{j}][1]) || {key} < e->k[{j}][2] || {key} > e->k[{j}][3])\n\t\t\tcontinue;"
    );
}

/// A key of width `w` as a scanned table's entry and a value set's member hold it: value, mask,
/// low and high, each a u64, which the kernel compares as `(k & mask) == (value & mask) && low
/// <= k <= high` ([`skip_unless_scanned_key`]).
fn push_scanned_key(e: &mut Vec<u8>, m: &crate::backends::software::Match, w: u32) {
    use crate::backends::software::Match;
    let all = ones(w) as u128;
    let (value, mask, low, high) = match *m {
        Match::Exact(v) => (v, all, 0, all),
        Match::Ternary { value, mask } => (value, mask, 0, all),
        Match::Lpm { value, prefix } => {
            let mask = if prefix == 0 { 0 } else { all & !(ones(w - prefix.min(w)) as u128) };
            (value, mask, 0, all)
        }
        Match::Range { low, high } => (0, 0, low, high),
        Match::Any => (0, 0, 0, all),
    };
    for x in [value, mask, low, high] {
        e.extend_from_slice(&(x as u64).to_ne_bytes());
    }
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

/// C for the lowered program `program`, or why it does not fit.
pub fn generate_ir(program: &ir::Program) -> R<Generated> {
    print(program).map_err(|(_, e)| e)
}

/// As [`generate_ir`], a refusal led by the file, line and column of the declaration or call
/// that holds what does not fit; `file_name` names the file a position is in (the program is
/// file 0, then its includes).
pub fn generate_ir_in(program: &ir::Program, file_name: impl Fn(u16) -> String) -> R<Generated> {
    print(program).map_err(|(at, e)| match at {
        Some(pos) => format!("{}:{}:{}: {e}", file_name(pos.file), pos.line, pos.col),
        None => e,
    })
}

/// The C of a lowered program, or why it does not fit (and where).
fn print(ir: &ir::Program) -> Result<Generated, (Option<Pos>, String)> {
    let v1model = match Architecture::of_ir(ir) {
        Some(Architecture::Edgeflow) => false,
        Some(Architecture::V1Model) => true,
        _ => {
            // Where `main` is declared (the IR keeps its instances' `line:column`).
            let at = ir.instances.iter().find(|i| i.name == "main").and_then(|i| {
                let (line, col) = i.at.split_once(':')?;
                Some(Pos { file: 0, line: line.parse().ok()?, col: col.parse().ok()? })
            });
            return Err((at, no(format!("package {}", ir.package))));
        }
    };
    let mut p = printer::Printer::new(ir, v1model);
    let printed = p.print().and_then(|blocks| Ok((blocks, p.shared_types()?)));
    let (blocks, [hdr_ty, meta_ty, sm_ty]) = printed.map_err(|e| (p.at, e))?;
    let entry = entry::entry(v1model, &blocks);
    // Everything before `saved_meta` is zeroed for each frame, in 8-byte words (`align` keeps
    // what follows on a word).
    let run = format!(
        "struct p4_run {{\n\t{hdr_ty} hdr;\n\t{meta_ty} meta;\n\t{sm_ty} sm;\n\t\
         {}\t__u32 len;\n\t__u32 off;\n\t\
         __u32 emitted;\n\t__u32 misfit;\n\t__u32 hit;\n\t__u32 action_run;\n\t__u32 exited;\n\t__u32 others_dropped;\n\t\
         struct p4_port in_port;\n\t__u64 align;\n\t{meta_ty} saved_meta;\n\t{sm_ty} saved_sm;\n\t__u8 buf[2 * P4_BUF];\n}};\n\
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
        value_sets: p.value_sets,
        max_args: p.max_args,
    })
}

fn ident(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
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
