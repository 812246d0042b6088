//! The software target: a checked program run on frames, the reference the kernel back end is
//! held to (issue 36, item 2; `datapath/tests/p4_kernel.rs`). A frame goes through the architecture's blocks as
//! `edgeflow.p4` says: the parser fills the headers (a frame it rejects is dropped), ingress
//! picks the egress port or multicast group and the queue, each copy goes through egress, and
//! the deparser writes the valid headers back before the payload the parser did not read.
//! v1model's and PSA's architectures drive the same evaluator in `v1model.rs` and
//! `psa.rs`, as BMv2's simple_switch and psa_switch run them.
//!
//! Tables are filled at run time ([`Switch::insert`]), besides their const entries. Values are
//! at most 128 bits wide, held in a `u128` and cut to their width after every operation, as P4's
//! unsigned arithmetic wraps. Not run yet, and refused when a frame reaches them: keys of type
//! error or enum.
//!
//! Frames run on the mid end's IR compiled into closures (`exec.rs`; the architectures'
//! drivers in `exec_arch.rs` for edgeflow.p4 and v1model, `exec_psa.rs` for PSA) wherever the
//! program compiles; the evaluator below runs the rest (v1model's multi-pass externs, action
//! profiles and selectors, direct meters, value sets) and is the reference
//! `tests/exec_differential.rs` holds the compiled program to. It is to be removed once those
//! compile.
//!
//! About 2 800 lines, one concern: the semantics of every construct the checker accepts, on
//! values, in one evaluator; the control plane's side (entries, groups, counters) is the
//! `Switch` API at the top, action profiles' members and groups in `profile.rs`. The externs'
//! state machines are the part to move out if it grows.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use crate::arch::Architecture;
use crate::frontend::ast::*;
use crate::frontend::check::{Checked, Layout, Ty};

mod classifier;
mod exec;
mod exec_arch;
mod exec_psa;
mod keyed;
mod profile;
mod psa;
mod v1model;
use keyed::Keyed;
pub use profile::{Group, Indirect, Member, Profile, ProfileError};
pub use v1model::Session;

/// A map keyed by the program's own names (tables, externs, variables, actions), hashed by
/// [`NameHasher`]: SipHash was a sixth of the software target's time. Not for keys a frame
/// chooses: the exact-table index keeps the standard library's keyed hash.
type Names<K, V> = HashMap<K, V, BuildHasherDefault<NameHasher>>;

/// A multiply-and-rotate hash a word at a time (the scheme of rustc's FxHash): fast on short
/// strings, and no defence against chosen collisions, which names in the program do not need.
#[derive(Clone, Copy, Default)]
struct NameHasher(u64);

impl NameHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.add(u64::from_le_bytes(w.try_into().unwrap()));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last));
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(byte as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A header's or struct's field name: shared, since values are copied per frame and per copy
/// (a `String` each was a fifth of the software target's time, in malloc and free).
pub type Name = Arc<str>;

/// A value while the program runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Bits {
        width: u32,
        signed: bool,
        value: u128,
    },
    /// A number without a width, until it meets one.
    Number(i128),
    Bool(bool),
    Error(String),
    Enum(String),
    Header {
        valid: bool,
        fields: Vec<(Name, Value)>,
    },
    Struct(Vec<(Name, Value)>),
    /// What `t.apply()` gives.
    Applied {
        hit: bool,
        action: String,
    },
    Void,
    /// A header stack: its headers, and the index `next` names (how many a parser has filled).
    Stack {
        next: usize,
        elems: Vec<Value>,
    },
    /// A list expression `{a, b}`, until it meets the struct or header it initialises.
    List(Vec<Value>),
    /// A header union: its headers, at most one of them valid.
    Union(Vec<(Name, Value)>),
    /// A `varbit<max>` field: `len` bits, most significant first, in `bytes` (the bits past
    /// `len` zero, so that equal values compare equal).
    Varbit {
        max: u32,
        len: u32,
        bytes: Vec<u8>,
    },
}

/// AFDX's `conforms`: frame-based, each conforming frame spends one BAG's worth of credit; the
/// credit grows by smax bytes per BAG up to what the jitter allows, in byte·ns so that nothing
/// is divided (`bag` and `jitter` in ns).
fn afdx_conforms(credit: &mut u128, at: &mut u64, now: u64, bag: u128, jitter: u128, smax: u128) -> bool {
    let cap = smax * (bag + jitter);
    let grown = if *credit == u128::MAX { cap } else { (*credit + (now.saturating_sub(*at)) as u128 * smax).min(cap) };
    *at = now;
    let need = smax * bag;
    let ok = grown >= need;
    *credit = if ok { grown - need } else { grown };
    ok
}

/// Where `action` is in a table's `actions` (`usize::MAX` where it is not).
fn action_at(actions: &[String], action: &str) -> usize {
    actions.iter().position(|a| a == action).unwrap_or(usize::MAX)
}

fn mask(width: u32) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

impl Value {
    pub fn bits(width: u32, value: u128) -> Value {
        Value::Bits { width, signed: false, value: value & mask(width) }
    }

    /// The value as an unsigned number (bits, a number, a bool).
    pub fn as_u128(&self) -> u128 {
        match self {
            Value::Bits { value, .. } => *value,
            Value::Number(n) => *n as u128,
            Value::Bool(b) => *b as u128,
            _ => 0,
        }
    }

    fn as_bool(&self) -> bool {
        matches!(self, Value::Bool(true))
    }

    fn fields(&self) -> Option<&Vec<(Name, Value)>> {
        match self {
            Value::Header { fields, .. } | Value::Struct(fields) | Value::Union(fields) => Some(fields),
            _ => None,
        }
    }

    fn fields_mut(&mut self) -> Option<&mut Vec<(Name, Value)>> {
        match self {
            Value::Header { fields, .. } | Value::Struct(fields) | Value::Union(fields) => Some(fields),
            _ => None,
        }
    }

    fn field_mut(&mut self, name: &str) -> Option<&mut Value> {
        self.fields_mut()?.iter_mut().find(|(n, _)| &**n == name).map(|(_, v)| v)
    }

    /// `self` given the width of `like` when it is a number (an assignment, an operand).
    fn sized_as(self, like: &Value) -> Value {
        match (self, like) {
            (Value::Number(n), Value::Bits { width, signed, .. }) => {
                Value::Bits { width: *width, signed: *signed, value: n as u128 & mask(*width) }
            }
            (Value::List(items), Value::Header { fields, .. }) => {
                Value::Header { valid: true, fields: list_into(fields, items) }
            }
            (Value::List(items), Value::Struct(fields)) => Value::Struct(list_into(fields, items)),
            (Value::List(items), Value::List(likes)) => {
                Value::List(items.into_iter().zip(likes).map(|(v, like)| v.sized_as(like)).collect())
            }
            (v, _) => v,
        }
    }
}

/// How a table entry matches one key field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Match {
    Exact(u128),
    Ternary { value: u128, mask: u128 },
    Lpm { value: u128, prefix: u32 },
    Range { low: u128, high: u128 },
    Any,
}

impl Match {
    fn matches(&self, key: u128, width: u32) -> bool {
        match *self {
            Match::Exact(v) => key == v,
            Match::Ternary { value, mask } => key & mask == value & mask,
            Match::Lpm { value, prefix } => {
                let m = if prefix == 0 { 0 } else { mask(width) & !(mask(width.saturating_sub(prefix))) };
                key & m == value & m
            }
            Match::Range { low, high } => (low..=high).contains(&key),
            Match::Any => true,
        }
    }
}

/// A table entry, with what it matched.
#[derive(Clone, Debug)]
pub struct Entry {
    pub keys: Vec<Match>,
    /// Higher wins among ternary and range matches.
    pub priority: i64,
    pub action: String,
    pub args: Vec<u128>,
    pub packets: u64,
    pub bytes: u64,
    /// Its cell of the table's direct meter (`meters = ...`).
    meter: MeterCell,
    /// In a table with an action profile: the member, group or action set it runs (`action`
    /// and `args` are then empty).
    pub indirect: Option<Indirect>,
    /// `action`'s place in its table's list of actions (`usize::MAX` for none), which the
    /// compiled program runs without comparing names.
    action_at: usize,
}

#[derive(Clone, Debug)]
struct TableState {
    /// (width, match kind) per key, its `selector` keys left out (they are hashed, not matched).
    keys: Vec<(u32, String)>,
    /// Where the `selector` keys are among the program's keys.
    selector_keys: Vec<usize>,
    /// The action profile or selector its entries refer into (`implementation = ...`).
    profile: Option<String>,
    actions: Vec<String>,
    entries: Vec<Entry>,
    default: (String, Vec<u128>),
    /// The default action's place in `actions`, as `Entry::action_at`.
    default_at: usize,
    size: usize,
    /// Entries from the program (`const entries`): the control plane cannot change them.
    fixed: bool,
    /// Its direct meter (`meters = dm`): the instance, and whether it counts bytes.
    meter: Option<(String, bool)>,
    /// Its entries by tuple space (one hash per set of masks): the compiled target's lookup,
    /// and the evaluator's where every key is exact (the AFDX switch's table holds thousands).
    classifier: classifier::Classifier,
    /// The keys' widths, as the classifier reads them.
    widths: Vec<u32>,
}

impl TableState {
    /// Entry `i` joins the classifier.
    fn index_entry(&mut self, i: usize) {
        self.classifier.insert(&self.entries, &self.widths, i);
    }

    /// The classifier built afresh (from the program's entries).
    fn reindex(&mut self) {
        self.widths = self.keys.iter().map(|(w, _)| *w).collect();
        self.classifier = classifier::Classifier::of(&self.entries, &self.widths);
    }

    /// Whether every key matches exactly, so that the evaluator may use the classifier too.
    fn all_exact(&self) -> bool {
        !self.keys.is_empty() && self.keys.iter().all(|(_, kind)| kind == "exact")
    }

    /// The entry `key` finds: the classifier's answer.
    fn lookup(&self, key: &[u128]) -> Option<usize> {
        self.classifier.lookup(&self.entries, &self.widths, key)
    }

    /// The entry `key` finds by testing every entry, as the evaluator does: the reference the
    /// compiled target's classifier is compared with (tests/exec_differential.rs).
    fn scan(&self, key: &[u128]) -> Option<usize> {
        classifier::scan(&self.entries, &self.widths, key)
    }
}

/// Where a frame went: one copy per output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    pub port: u32,
    /// The egress queue (standard_metadata.priority).
    pub queue: u8,
    pub frame: Vec<u8>,
}

/// Why a frame went nowhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// The parser rejected it, with the error it gave.
    Parser(String),
    /// Ingress or egress marked it (mark_to_drop), or sent it nowhere.
    Program,
    NoPort,
    /// A construct the software target does not run yet (the program checked, but it cannot be
    /// run as written here): named.
    Unsupported(String),
}

/// What stops a block's run before its end.
enum Stop {
    Return,
    /// A function's `return value;`.
    Returned(Value),
    /// `break` and `continue`, ended by the loop around them.
    Break,
    Continue,
    Exit,
    Reject(String),
    Unsupported(String),
}

type Run<T> = std::result::Result<T, Stop>;

struct Code {
    program: Program,
    checked: Checked,
    /// What a control plane sees of it (P4Info's names and ids).
    info: Arc<crate::info::Info>,
}

impl Code {
    /// The program's parser or control named `name` (the checker saw that it is there).
    fn block(&self, name: &str) -> &Decl {
        self.program
            .decls
            .iter()
            .find(|d| matches!(d, Decl::Parser { name: n, .. } | Decl::Control { name: n, .. } if n.text == name))
            .expect("checked")
    }

    /// The parameters of the architecture's first block, the parser.
    fn parser_params(&self) -> &[Param] {
        match self.block(&self.checked.blocks[0]) {
            Decl::Parser { params, .. } => params,
            _ => &[],
        }
    }
}

/// A program ready to switch frames: its code, and the state the control plane and the frames
/// change (tables, counters, registers, accounts, multicast groups).
pub struct Switch {
    code: Arc<Code>,
    tables: Keyed<TableState>,
    counters: Keyed<Vec<(u64, u64)>>,
    registers: Keyed<Vec<Value>>,
    /// Per AFDX account: (credit in byte·ns, when it was last brought up to date).
    accounts: Keyed<Vec<(u128, u64)>>,
    meters: Keyed<Meter>,
    /// Direct meters, by instance: whether each counts bytes, and the colour its table's last
    /// lookup gave (what `read` returns).
    direct_meters: Names<String, bool>,
    direct_colours: Names<String, u8>,
    groups: HashMap<u16, Vec<u32>>,
    /// Each group member's replication id (v1model's `egress_rid`), beside `groups`' ports.
    replica_ids: HashMap<u16, Vec<u16>>,
    /// Clone sessions (v1model's mirroring), by id.
    sessions: HashMap<u32, Session>,
    /// What the block running asked of the architecture (v1model's clone, resubmit, ...).
    requests: v1model::Requests,
    /// The state of `random` and of the `random` hash.
    random: u64,
    /// Instances of the program's own parsers and controls (`Block.instance` → its type).
    sub_blocks: Names<String, String>,
    /// PSA's extern instances that have no cells (hashes, checksums, ...).
    externs: Keyed<psa::Extern>,
    /// Action profiles and selectors, by instance (`Block.name`, `.name` at the top level, or
    /// the table's name for one constructed in its property).
    profiles: Names<String, Profile>,
    /// Moves on every change a control plane makes (entries, defaults, groups, counter,
    /// register and meter cells), so that a copy elsewhere (the kernel's) knows to follow.
    generation: u64,
    /// The headers, metadata and standard metadata every frame starts from, made once.
    initial: Option<[Value; 3]>,
    /// What the frames run since the last [`Switch::take_digests`] sent the control plane.
    digests: Vec<Digest>,
    /// The program compiled from the mid end's IR (`exec.rs`), which runs the frames; or why
    /// it is not, and the evaluator below runs them.
    compiled: Result<Arc<exec_arch::Program>, String>,
    /// The compiled program's slots and table keys, kept between frames so as not to allocate.
    exec_slots: Vec<u128>,
    exec_keys: Vec<u128>,
    exec_bytes: Vec<u8>,
    /// The deparser's bytes, kept so that a frame does not grow a new buffer.
    exec_out: Vec<u8>,
}

/// Digests kept until [`Switch::take_digests`]: more are dropped.
pub const DIGESTS_KEPT: usize = 1024;

/// One digest a frame sent (v1model's `digest<T>(receiver, data)`, PSA's `Digest.pack(data)`):
/// whose (`info::DigestInfo::target`) and the data's members, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Digest {
    pub name: String,
    pub data: Vec<u128>,
}

/// One block's run: its variables, the frame, and where it is.
struct Cx<'c> {
    block: &'c str,
    scopes: Vec<Names<String, Value>>,
    actions: Names<&'c str, &'c Action>,
    /// The packet_in or packet_out parameter's name.
    packet: Option<String>,
    data: &'c [u8],
    cursor: usize,
    out: Vec<u8>,
    length: u64,
    now: u64,
}

impl Switch {
    /// The software target for a program the checker accepted, with empty tables.
    pub fn new(program: Program, checked: Checked) -> Result<Switch, String> {
        if Architecture::of(&checked).is_none() {
            let other = &checked.package;
            return Err(format!(
                "the software target runs EdgeflowSwitch, V1Switch and PSA_Switch programs, not {other}"
            ));
        }
        let info = Arc::new(crate::info::info(&program, &checked)?);
        let mut sw = Switch {
            code: Arc::new(Code { program, checked, info }),
            tables: Keyed::default(),
            counters: Keyed::default(),
            registers: Keyed::default(),
            accounts: Keyed::default(),
            meters: Keyed::default(),
            direct_meters: Names::default(),
            direct_colours: Names::default(),
            groups: HashMap::new(),
            replica_ids: HashMap::new(),
            sessions: HashMap::new(),
            requests: v1model::Requests::default(),
            random: 0x9e37_79b9_7f4a_7c15,
            sub_blocks: Names::default(),
            externs: Keyed::default(),
            profiles: Names::default(),
            generation: 0,
            initial: None,
            digests: Vec::new(),
            compiled: Err(String::new()),
            exec_slots: Vec::new(),
            exec_keys: Vec::new(),
            exec_bytes: Vec::new(),
            exec_out: Vec::new(),
        };
        let code = sw.code.clone();
        for d in &code.program.decls {
            // An instance at the top level (not `main`): one the program's blocks share, by
            // the key `.name`.
            if let Decl::Instance(i) = d {
                if i.name.text != "main" {
                    sw.instance("", i)?;
                }
                continue;
            }
            let (block, locals) = match d {
                Decl::Control { name, locals, .. } | Decl::Parser { name, locals, .. } => (&name.text, locals),
                _ => continue,
            };
            for l in locals {
                match l {
                    Local::Table(t) => {
                        let state = sw.table_state(block, t)?;
                        sw.tables.insert(format!("{block}.{}", t.name.text), state);
                    }
                    Local::Instance(i) => sw.instance(block, i)?,
                    _ => {}
                }
            }
        }
        sw.compiled = if std::env::var_os("EDGEFLOW_P4_EVALUATOR").is_some() {
            Err("EDGEFLOW_P4_EVALUATOR is set".into())
        } else {
            exec_arch::compile(&sw)
        };
        Ok(sw)
    }

    /// Whether the frames run on the program compiled from the IR (`Ok`), or on the syntax-tree
    /// evaluator, and why (what in the program is not compiled yet).
    pub fn compiled(&self) -> Result<(), &str> {
        self.compiled.as_ref().map(|_| ()).map_err(String::as_str)
    }

    /// Runs the frames on the syntax-tree evaluator from now on: the reference the compiled
    /// program is held to (`tests/exec_differential.rs`). To be removed with the evaluator.
    pub fn use_evaluator(&mut self) {
        self.compiled = Err("the evaluator was asked for".into());
    }

    fn table_state(&mut self, block: &str, t: &Table) -> Result<TableState, String> {
        let code = self.code.clone();
        let mut cx = Cx::new(block, &code, &[], 0, 0);
        let mut keys = Vec::new();
        let mut selector_keys = Vec::new();
        for (i, k) in t.keys.iter().enumerate() {
            if k.match_kind.text == "selector" {
                selector_keys.push(i);
                continue;
            }
            let width = match crate::info::key_type(&code.program, &code.checked, block, &k.expr) {
                Some(Ty::Bit(w) | Ty::Int(w)) => w,
                Some(Ty::Bool) => 1,
                other => {
                    return Err(format!(
                        "{}: keys of type {other:?} are not run by the software target yet",
                        t.name.text
                    ))
                }
            };
            keys.push((width, k.match_kind.text.clone()));
        }
        let number = |cx: &mut Cx, sw: &mut Switch, e: &Expr| {
            sw.eval(cx, e).map(|v| v.as_u128()).map_err(|_| format!("{}: a value that is not a constant", t.name.text))
        };
        let scratch = self;
        let default = match &t.default_action {
            Some((r, _)) => {
                let data = data_args(&code, block, r);
                (r.name.text.clone(), data.iter().map(|a| number(&mut cx, scratch, a)).collect::<Result<_, _>>()?)
            }
            None => ("NoAction".to_string(), Vec::new()),
        };
        let mut entries = Vec::new();
        let n = t.entries.len() as i64;
        for (i, e) in t.entries.iter().enumerate() {
            let mut matches = Vec::new();
            let keysets: Vec<&Keyset> = if e.keys.len() == 1 && t.keys.len() > 1 {
                vec![&e.keys[0]; t.keys.len()]
            } else {
                e.keys.iter().collect()
            };
            for (k, (width, kind)) in keysets.iter().zip(&keys) {
                matches.push(match k {
                    Keyset::Default | Keyset::DontCare => Match::Any,
                    Keyset::Value(v) => {
                        let v = number(&mut cx, scratch, v)? & mask(*width);
                        if kind == "lpm" {
                            Match::Lpm { value: v, prefix: *width }
                        } else {
                            Match::Exact(v)
                        }
                    }
                    Keyset::Mask(v, m) => {
                        Match::Ternary { value: number(&mut cx, scratch, v)?, mask: number(&mut cx, scratch, m)? }
                    }
                    Keyset::Range(a, b) => {
                        Match::Range { low: number(&mut cx, scratch, a)?, high: number(&mut cx, scratch, b)? }
                    }
                });
            }
            let data = data_args(&code, block, &e.action);
            let args = data.iter().map(|a| number(&mut cx, scratch, a)).collect::<Result<_, _>>()?;
            entries.push(Entry {
                keys: matches,
                priority: entry_priority(e, i, n),
                action: e.action.name.text.clone(),
                action_at: action_at(
                    &t.actions.iter().map(|a| a.name.text.clone()).collect::<Vec<_>>(),
                    &e.action.name.text,
                ),
                args,
                packets: 0,
                bytes: 0,
                meter: MeterCell::default(),
                indirect: None,
            });
        }
        let size = match &t.size {
            Some(s) => number(&mut cx, scratch, s)? as usize,
            None => 1024,
        };
        let meter = t.properties.iter().find(|(p, _)| p.text == "meters").and_then(|(_, e)| match &e.kind {
            ExprKind::Name(n) => Some(format!("{block}.{n}")),
            _ => None,
        });
        let meter = meter.map(|key| {
            let bytes = scratch.direct_meters.get(&key).copied().unwrap_or(false);
            (key, bytes)
        });
        let profile = match crate::info::implementation_of(t) {
            None => None,
            Some(e) => Some(scratch.table_profile_of(block, t, e)?),
        };
        let actions: Vec<String> = t.actions.iter().map(|a| a.name.text.clone()).collect();
        let mut state = TableState {
            keys,
            selector_keys,
            profile,
            meter,
            default_at: action_at(&actions, &default.0),
            actions,
            fixed: !entries.is_empty() && t.entries_const,
            entries,
            default,
            size,
            classifier: classifier::Classifier::new(),
            widths: Vec::new(),
        };
        state.reindex();
        Ok(state)
    }

    fn instance(&mut self, block: &str, i: &Instance) -> Result<(), String> {
        let Type::Named(ty, _) = &i.ty else { return Ok(()) };
        let size = |sw: &mut Switch| -> usize {
            let code = sw.code.clone();
            let mut cx = Cx::new(block, &code, &[], 0, 0);
            i.args.first().and_then(|a| sw.eval(&mut cx, a).ok()).map_or(0, |v| v.as_u128() as usize)
        };
        let key = format!("{block}.{}", i.name.text);
        // PSA's externs, by the names v1model's have (their cells are kept alike).
        let kind = match ty.text.as_str() {
            "Counter" => "counter",
            "Register" => "register",
            "Meter" => "meter",
            "DirectCounter" => "direct_counter",
            "DirectMeter" => "direct_meter",
            other => other,
        };
        if matches!(kind, "Hash" | "Checksum" | "InternetChecksum" | "Random" | "Digest") {
            let code = self.code.clone();
            let mut cx = Cx::new(block, &code, &[], 0, 0);
            let args = i.args.iter().map(|a| self.eval(&mut cx, a).unwrap_or(Value::Void)).collect::<Vec<_>>();
            self.psa_instance(&key, kind, &args);
            return Ok(());
        }
        if let Some(profile) = self.new_profile(block, kind, &i.args, &i.annotations) {
            self.profiles.insert(key, profile);
            return Ok(());
        }
        let counts_bytes = |arg: Option<&Expr>| matches!(arg.map(|a| &a.kind), Some(ExprKind::Member(_, m)) if m.text.eq_ignore_ascii_case("bytes"));
        match kind {
            "counter" => {
                let n = size(self);
                self.counters.insert(key, vec![(0, 0); n]);
            }
            "register" => {
                let n = size(self);
                let Type::Named(_, args) = &i.ty else { unreachable!() };
                let elem = args.first().map(|t| self.code.checked.resolve(t)).unwrap_or(Ty::Bit(32));
                let zero = self.default_of(&elem);
                self.registers.insert(key, vec![zero; n]);
            }
            "afdx_account" => {
                let n = size(self);
                self.accounts.insert(key, vec![(u128::MAX, 0); n]);
            }
            "direct_meter" => {
                let bytes = counts_bytes(i.args.first());
                self.direct_meters.insert(key, bytes);
            }
            "meter" => {
                let n = size(self);
                let bytes = counts_bytes(i.args.get(1));
                self.meters.insert(key, Meter { bytes, cells: vec![MeterCell::default(); n] });
            }
            other if self.code.program.decls.iter().any(|d| is_block_named(d, other)) => {
                self.sub_blocks.insert(key, other.to_string());
            }
            _ => {}
        }
        Ok(())
    }

    fn default_of(&self, ty: &Ty) -> Value {
        let layouts = &self.code.checked.layouts;
        match ty {
            Ty::Bit(w) => Value::Bits { width: *w, signed: false, value: 0 },
            Ty::Int(w) => Value::Bits { width: *w, signed: true, value: 0 },
            Ty::Bool => Value::Bool(false),
            Ty::Error => Value::Error("NoError".into()),
            Ty::Enum(n) => match layouts.get(n) {
                Some(Layout::Enum(m)) => Value::Enum(m.first().cloned().unwrap_or_default()),
                _ => Value::Void,
            },
            Ty::Header(n) => match layouts.get(n) {
                Some(Layout::Header(f)) => Value::Header {
                    valid: false,
                    fields: f.iter().map(|(n, t)| (Name::from(n.as_str()), self.default_of(t))).collect(),
                },
                _ => Value::Void,
            },
            Ty::Struct(n) => match layouts.get(n) {
                Some(Layout::Struct(f)) => {
                    Value::Struct(f.iter().map(|(n, t)| (Name::from(n.as_str()), self.default_of(t))).collect())
                }
                _ => Value::Void,
            },
            Ty::Stack(elem, n) => Value::Stack { next: 0, elems: vec![self.default_of(elem); *n as usize] },
            Ty::Varbit(max) => Value::Varbit { max: *max, len: 0, bytes: Vec::new() },
            Ty::List(items) => Value::List(items.iter().map(|t| self.default_of(t)).collect()),
            Ty::Union(n) => match layouts.get(n) {
                Some(Layout::Union(f)) => {
                    Value::Union(f.iter().map(|(n, t)| (Name::from(n.as_str()), self.default_of(t))).collect())
                }
                _ => Value::Void,
            },
            _ => Value::Void,
        }
    }

    /// The program as a control plane sees it: tables, actions and externs by P4Info's names and
    /// ids.
    pub fn info(&self) -> Arc<crate::info::Info> {
        self.code.info.clone()
    }

    /// `table`'s default action and its data.
    pub fn default_action(&self, table: &str) -> Option<(&str, &[u128])> {
        let t = self.tables.get(table)?;
        Some((&t.default.0, &t.default.1))
    }

    /// Sets `table`'s default action, unless the program fixed it (`const default_action`).
    pub fn set_default_action(&mut self, table: &str, action: &str, args: Vec<u128>) -> Result<(), String> {
        let code = self.code.clone();
        let t = self.tables.get_mut(table).ok_or_else(|| format!("no table '{table}'"))?;
        let (block, name) = table.split_once('.').unwrap_or(("", table));
        let fixed = code.program.decls.iter().any(|d| match d {
            Decl::Control { name: b, locals, .. } if b.text == block => locals.iter().any(
                |l| matches!(l, Local::Table(x) if x.name.text == name && matches!(x.default_action, Some((_, true)))),
            ),
            _ => false,
        });
        if fixed {
            return Err(format!("{table}: its default action is the program's (const default_action)"));
        }
        if !t.actions.iter().any(|a| a == action) {
            return Err(format!("{table} has no action '{action}' (it has {})", t.actions.join(", ")));
        }
        let data = find_action(&code, block, action)
            .map(|a| a.params.iter().filter(|p| p.direction.is_none()).count())
            .unwrap_or(0);
        if args.len() != data {
            return Err(format!("{action} takes {data} argument(s), not {}", args.len()));
        }
        t.default_at = action_at(&t.actions, action);
        t.default = (action.to_string(), args);
        self.generation += 1;
        Ok(())
    }

    /// Sets an indirect counter's cell to these packets and bytes.
    pub fn set_counter(&mut self, name: &str, index: usize, packets: u64, bytes: u64) -> Result<(), String> {
        let cells = self.counters.get_mut(name).ok_or_else(|| format!("no counter '{name}'"))?;
        let n = cells.len();
        let cell = cells.get_mut(index).ok_or_else(|| format!("{name} has {n} cells; {index} is not one"))?;
        *cell = (packets, bytes);
        self.generation += 1;
        Ok(())
    }

    /// The rates a meter cell was set to: committed rate and burst, peak rate and burst.
    pub fn meter(&self, name: &str, index: usize) -> Option<Option<[u64; 4]>> {
        Some(self.meters.get(name)?.cells.get(index)?.rates)
    }

    /// The rates the direct meter cell of `table`'s entry was set to.
    pub fn entry_meter(&self, table: &str, keys: &[Match], priority: i64) -> Option<Option<[u64; 4]>> {
        let t = self.tables.get(table)?;
        Some(t.entries.iter().find(|e| e.keys == keys && e.priority == priority)?.meter.rates)
    }

    /// A register cell, as bits (a bool is 0 or 1).
    pub fn register(&self, name: &str, index: usize) -> Option<u128> {
        Some(self.registers.get(name)?.get(index)?.as_u128())
    }

    pub fn set_register(&mut self, name: &str, index: usize, value: u128) -> Result<(), String> {
        let cells = self.registers.get_mut(name).ok_or_else(|| format!("no register '{name}'"))?;
        let n = cells.len();
        let cell = cells.get_mut(index).ok_or_else(|| format!("{name} has {n} cells; {index} is not one"))?;
        *cell = match cell {
            Value::Bits { width, signed, .. } => {
                if value & !mask(*width) != 0 {
                    return Err(format!("{value:#x} does not fit {name}'s {width} bits"));
                }
                Value::Bits { width: *width, signed: *signed, value }
            }
            Value::Bool(_) if value <= 1 => Value::Bool(value == 1),
            _ => return Err(format!("{name}: its cells are not bits")),
        };
        self.generation += 1;
        Ok(())
    }

    /// Every indirect counter's, register's, meter's and AFDX account's cells, by kind and name,
    /// as numbers: what two targets that ran the same frames at the same times must agree on
    /// (tests/exec_differential.rs compares the compiled target's with the evaluator's).
    pub fn stateful_cells(&self) -> Vec<(String, Vec<u128>)> {
        let mut out = Vec::new();
        for (name, cells) in self.counters.iter() {
            let numbers = cells.iter().flat_map(|&(packets, bytes)| [packets as u128, bytes as u128]);
            out.push((format!("counter {name}"), numbers.collect()));
        }
        for (name, cells) in self.registers.iter() {
            out.push((format!("register {name}"), cells.iter().map(Value::as_u128).collect()));
        }
        for (name, meter) in self.meters.iter() {
            let numbers = meter.cells.iter().flat_map(|c| c.words.map(u128::from));
            out.push((format!("meter {name}"), numbers.collect()));
        }
        for (name, cells) in self.accounts.iter() {
            let numbers = cells.iter().flat_map(|&(credit, when)| [credit, when as u128]);
            out.push((format!("account {name}"), numbers.collect()));
        }
        out
    }

    /// The number of cells of an indirect counter, meter or register.
    pub fn cells(&self, name: &str) -> Option<usize> {
        self.counters
            .get(name)
            .map(Vec::len)
            .or_else(|| self.meters.get(name).map(|m| m.cells.len()))
            .or_else(|| self.registers.get(name).map(Vec::len))
    }

    /// Sets multicast group `id` to send a copy to each of `ports` (replication id 0).
    pub fn set_group(&mut self, id: u16, ports: Vec<u32>) {
        self.groups.insert(id, ports);
        self.replica_ids.remove(&id);
        self.generation += 1;
    }

    /// The names of the program's tables (`Block.table`).
    pub fn tables(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tables.keys().cloned().collect();
        names.sort();
        names
    }

    /// Adds an entry to `table` (`Block.table`): one match per key, the action and its data.
    /// `priority` orders ternary and range entries (higher first).
    pub fn insert(
        &mut self,
        table: &str,
        keys: Vec<Match>,
        action: &str,
        args: Vec<u128>,
        priority: i64,
    ) -> Result<(), String> {
        self.check_keys(table, &keys)?;
        let code = self.code.clone();
        let t = self.tables.get_mut(table).ok_or_else(|| format!("no table '{table}'"))?;
        if let Some(profile) = &t.profile {
            return Err(format!("{table}'s entries are members or groups of {profile}, not actions"));
        }
        if !t.actions.iter().any(|a| a == action) {
            return Err(format!("{table} has no action '{action}' (it has {})", t.actions.join(", ")));
        }
        let data = find_action(&code, table.split('.').next().unwrap_or(""), action)
            .map(|a| a.params.iter().filter(|p| p.direction.is_none()).count())
            .unwrap_or(0);
        if args.len() != data {
            return Err(format!("{action} takes {data} argument(s), not {}", args.len()));
        }
        if let Some(old) = t.entries.iter_mut().find(|e| e.keys == keys && e.priority == priority) {
            old.action = action.to_string();
            old.action_at = action_at(&t.actions, action);
            old.args = args;
            self.generation += 1;
            return Ok(());
        }
        if t.entries.len() >= t.size {
            return Err(format!("{table} is full ({} entries)", t.size));
        }
        t.entries.push(Entry {
            keys,
            priority,
            action: action.to_string(),
            action_at: action_at(&t.actions, action),
            args,
            packets: 0,
            bytes: 0,
            meter: MeterCell::default(),
            indirect: None,
        });
        t.index_entry(t.entries.len() - 1);
        self.generation += 1;
        Ok(())
    }

    /// Whether `keys` are matches an entry of `table` may have: one per key (its selector keys
    /// aside), each fitting its key's width and match kind; and whether the control plane may
    /// change its entries.
    fn check_keys(&self, table: &str, keys: &[Match]) -> Result<(), String> {
        let t = self.tables.get(table).ok_or_else(|| format!("no table '{table}'"))?;
        if t.fixed {
            return Err(format!("{table}: its entries are the program's (const entries)"));
        }
        if keys.len() != t.keys.len() {
            return Err(format!("{table} matches {} field(s), not {}", t.keys.len(), keys.len()));
        }
        for (m, (width, kind)) in keys.iter().zip(&t.keys) {
            let fits = |v: u128| v & !mask(*width) == 0;
            let ok = match (m, kind.as_str()) {
                (Match::Exact(v), _) => fits(*v),
                (Match::Lpm { value, prefix }, "lpm") => fits(*value) && *prefix <= *width,
                (Match::Ternary { value, mask }, "ternary") => fits(*value) && fits(*mask),
                (Match::Any, "ternary" | "lpm") => true,
                (Match::Range { low, high }, _) => fits(*low) && fits(*high),
                _ => false,
            };
            if !ok {
                return Err(format!("{table}: {m:?} does not fit a {width}-bit {kind} key"));
            }
        }
        Ok(())
    }

    /// Sets meter `name`'s cell `index`: committed and peak rates (units per second: packets or
    /// bytes, as the meter counts) and bursts (units). Its buckets start full.
    pub fn set_meter(
        &mut self,
        name: &str,
        index: usize,
        cir: u64,
        cburst: u64,
        pir: u64,
        pburst: u64,
    ) -> Result<(), String> {
        let meter = self.meters.get_mut(name).ok_or_else(|| format!("no meter '{name}'"))?;
        let n = meter.cells.len();
        let cell = meter.cells.get_mut(index).ok_or_else(|| format!("{name} has {n} cells; {index} is not one"))?;
        *cell = MeterCell::new(&format!("{name}[{index}]"), [cir, cburst, pir, pburst])?;
        self.generation += 1;
        Ok(())
    }

    /// Sets the direct meter cell of `table`'s entry with these matches and priority, as
    /// [`Switch::set_meter`] sets an indirect meter's.
    pub fn set_entry_meter(
        &mut self,
        table: &str,
        keys: &[Match],
        priority: i64,
        rates: [u64; 4],
    ) -> Result<(), String> {
        let t = self.tables.get_mut(table).ok_or_else(|| format!("no table '{table}'"))?;
        if t.meter.is_none() {
            return Err(format!("{table} has no direct meter (meters = ...)"));
        }
        let e = t.entries.iter_mut().find(|e| e.keys == keys && e.priority == priority);
        let e = e.ok_or_else(|| format!("{table} has no such entry"))?;
        e.meter = MeterCell::new(table, rates)?;
        self.generation += 1;
        Ok(())
    }

    /// Packets and bytes an indirect counter counted at `index`.
    pub fn counter(&self, name: &str, index: usize) -> Option<(u64, u64)> {
        self.counters.get(name)?.get(index).copied()
    }

    /// Removes `table`'s entry with exactly these matches and priority.
    pub fn delete(&mut self, table: &str, keys: &[Match], priority: i64) -> Result<(), String> {
        let t = self.tables.get_mut(table).ok_or_else(|| format!("no table '{table}'"))?;
        if t.fixed {
            return Err(format!("{table}: its entries are the program's (const entries)"));
        }
        // One entry at most has these matches and priority (an insert of the same replaces it).
        let place = t.entries.iter().position(|e| e.keys == keys && e.priority == priority);
        let place = place.ok_or_else(|| format!("{table} has no such entry"))?;
        t.classifier.remove(&t.entries[place], &t.widths, place);
        t.entries.remove(place);
        self.generation += 1;
        Ok(())
    }

    /// How many changes a control plane has made (see the field).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The program this switch runs, as checked.
    pub fn program(&self) -> (&Program, &Checked) {
        (&self.code.program, &self.code.checked)
    }

    /// Multicast group `id`'s ports.
    pub fn group(&self, id: u16) -> Option<&[u32]> {
        self.groups.get(&id).map(Vec::as_slice)
    }

    /// The multicast groups' ids.
    pub fn group_ids(&self) -> Vec<u16> {
        let mut ids: Vec<u16> = self.groups.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Adds hits another target counted (the kernel's) to entry `index` of `table` (in insertion
    /// order); not a control-plane change.
    pub fn credit_entry(&mut self, table: &str, index: usize, packets: u64, bytes: u64) {
        if let Some(e) = self.tables.get_mut(table).and_then(|t| t.entries.get_mut(index)) {
            e.packets += packets;
            e.bytes += bytes;
        }
    }

    /// Adds what another target counted to an indirect counter's cell; not a control-plane change.
    pub fn credit_counter(&mut self, name: &str, index: usize, packets: u64, bytes: u64) {
        if let Some(c) = self.counters.get_mut(name).and_then(|c| c.get_mut(index)) {
            c.0 += packets;
            c.1 += bytes;
        }
    }

    /// A register cell as another target left it (the kernel's, where frames write it); not a
    /// control-plane change. Ignored where the value does not fit the cell.
    pub fn load_register(&mut self, name: &str, index: usize, value: u128) {
        let before = self.generation;
        if self.set_register(name, index, value).is_ok() {
            self.generation = before;
        }
    }

    /// `table`'s entries, in insertion order.
    pub fn entries(&self, table: &str) -> Option<&[Entry]> {
        Some(&self.tables.get(table)?.entries)
    }

    /// Packets and bytes each entry of `table` matched, in insertion order.
    pub fn entry_counts(&self, table: &str) -> Option<Vec<(u64, u64)>> {
        Some(self.tables.get(table)?.entries.iter().map(|e| (e.packets, e.bytes)).collect())
    }

    /// The digests the frames run since the last call sent, oldest first. Whoever runs frames
    /// takes them after each, or drops them: they are kept until taken.
    pub fn take_digests(&mut self) -> Vec<Digest> {
        std::mem::take(&mut self.digests)
    }

    /// Records a digest of `data` (a struct's or header's members, each a number), unless
    /// [`DIGESTS_KEPT`] wait untaken (a caller that never takes them grows nothing).
    fn record_digest(&mut self, name: String, data: &Value) {
        if self.digests.len() >= DIGESTS_KEPT {
            return;
        }
        let data = match data {
            Value::Struct(fields) | Value::Header { fields, .. } => fields.iter().map(|(_, v)| v.as_u128()).collect(),
            other => vec![other.as_u128()],
        };
        self.digests.push(Digest { name, data });
    }

    /// Runs `frame`, arrived on `port` at `now` (ns), through the program.
    pub fn process(&mut self, frame: &[u8], port: u32, now: u64) -> Result<Vec<Output>, Dropped> {
        if let Ok(program) = &self.compiled {
            let program = program.clone();
            return self.process_compiled(&program, frame, port, now);
        }
        if self.is_v1model() {
            return self.process_v1model(frame, port, now);
        }
        if self.is_psa() {
            return self.process_psa(frame, port, now);
        }
        let code = self.code.clone();
        let blocks = &code.checked.blocks;
        let block = |name: &str| code.block(name);
        let params = |d: &Decl| match d {
            Decl::Parser { params, .. } | Decl::Control { params, .. } => params.clone(),
            _ => unreachable!(),
        };
        let parser = block(&blocks[0]);
        let pp = params(parser);
        let initial = match &self.initial {
            Some(values) => values.clone(),
            None => {
                let values = [1, 2, 3].map(|i| self.default_of(&code.checked.resolve(&pp[i].ty)));
                self.initial = Some(values.clone());
                values
            }
        };
        let [mut hdr, mut meta, mut sm] = initial;
        set_field(&mut sm, "ingress_port", port as u128);
        set_field(&mut sm, "packet_length", frame.len() as u128);
        set_field(&mut sm, "timestamp", now as u128);

        // The parser.
        let mut cx = Cx::new(&blocks[0], &code, frame, frame.len() as u64, now);
        cx.packet = Some(pp[0].name.text.clone());
        cx.bind(&pp[1..], vec![hdr, meta, sm]);
        let Decl::Parser { locals, states, .. } = parser else { unreachable!() };
        let parsed = self.run_parser(&mut cx, locals, states);
        let payload_at = cx.cursor / 8;
        [hdr, meta, sm] = cx.unbind(&pp[1..]).try_into().expect("three");
        match parsed {
            Ok(()) => {}
            Err(Stop::Reject(e)) => return Err(Dropped::Parser(e)),
            Err(Stop::Unsupported(what)) => return Err(Dropped::Unsupported(what)),
            Err(_) => return Err(Dropped::Parser("NoError".into())),
        }

        // Ingress.
        self.run_control(&code, &blocks[1], frame, now, [&mut hdr, &mut meta, &mut sm])?;
        if field(&sm, "drop") != 0 {
            return Err(Dropped::Program);
        }
        let group = field(&sm, "mcast_grp") as u16;
        let ports = match group {
            0 => match field(&sm, "egress_port") as u32 {
                0 => return Err(Dropped::NoPort),
                p => vec![p],
            },
            g => self.groups.get(&g).cloned().unwrap_or_default(),
        };

        // Each copy through egress and the deparser.
        let mut out = Vec::new();
        for p in ports {
            let (mut h, mut m, mut s) = (hdr.clone(), meta.clone(), sm.clone());
            set_field(&mut s, "egress_port", p as u128);
            self.run_control(&code, &blocks[2], frame, now, [&mut h, &mut m, &mut s])?;
            if field(&s, "drop") != 0 {
                continue;
            }
            let deparser = block(&blocks[3]);
            let dp = params(deparser);
            let mut cx = Cx::new(&blocks[3], &code, frame, frame.len() as u64, now);
            cx.packet = Some(dp[0].name.text.clone());
            cx.bind(&dp[1..], vec![h]);
            let Decl::Control { apply, .. } = deparser else { unreachable!() };
            match self.block_stmts(&mut cx, apply) {
                Ok(())
                | Err(Stop::Exit)
                | Err(Stop::Return)
                | Err(Stop::Returned(_))
                | Err(Stop::Break | Stop::Continue) => {}
                Err(Stop::Unsupported(w)) => return Err(Dropped::Unsupported(w)),
                Err(Stop::Reject(_)) => continue,
            }
            let mut bytes = cx.out;
            bytes.extend_from_slice(&frame[payload_at.min(frame.len())..]);
            out.push(Output { port: p, queue: field(&s, "priority") as u8, frame: bytes });
        }
        if out.is_empty() {
            return Err(Dropped::Program);
        }
        Ok(out)
    }

    fn run_control(
        &mut self,
        code: &Code,
        name: &str,
        frame: &[u8],
        now: u64,
        values: [&mut Value; 3],
    ) -> Result<(), Dropped> {
        let [h, m, s] = values;
        self.run_block(code, name, frame, frame.len(), now, &mut [h, m, s])
    }

    /// Control `name` on a frame whose bytes past the headers are `data` (`length` in all),
    /// its parameters bound to `values` in order and written back after.
    fn run_block(
        &mut self,
        code: &Code,
        name: &str,
        data: &[u8],
        length: usize,
        now: u64,
        values: &mut [&mut Value],
    ) -> Result<(), Dropped> {
        let Decl::Control { params, locals, apply, .. } = code.block(name) else { unreachable!("checked") };
        let mut cx = Cx::new(name, code, data, length as u64, now);
        cx.bind(params, values.iter_mut().map(|v| std::mem::replace(&mut **v, Value::Void)).collect());
        cx.scopes.push(Names::default());
        let mut result = Ok(());
        for l in locals {
            if let Err(e) = self.local(&mut cx, l) {
                result = Err(e);
                break;
            }
        }
        if result.is_ok() {
            result = self.block_stmts(&mut cx, apply);
        }
        cx.scopes.pop();
        for (slot, v) in values.iter_mut().zip(cx.unbind(params)) {
            **slot = v;
        }
        match result {
            Ok(())
            | Err(Stop::Exit)
            | Err(Stop::Return)
            | Err(Stop::Returned(_))
            | Err(Stop::Break | Stop::Continue) => Ok(()),
            Err(Stop::Unsupported(w)) => Err(Dropped::Unsupported(w)),
            Err(Stop::Reject(_)) => Err(Dropped::Program),
        }
    }

    fn local(&mut self, cx: &mut Cx, l: &Local) -> Run<()> {
        match l {
            Local::Const { ty, name, value } | Local::Var { ty, name, init: Some(value) } => {
                let zero = self.default_of(&self.code.checked.resolve(ty));
                let v = self.eval(cx, value)?.sized_as(&zero);
                cx.declare(&name.text, v);
            }
            Local::Var { ty, name, init: None } => {
                let zero = self.default_of(&self.code.checked.resolve(ty));
                cx.declare(&name.text, zero);
            }
            _ => {}
        }
        Ok(())
    }

    fn run_parser(&mut self, cx: &mut Cx, locals: &[Local], states: &[State]) -> Run<()> {
        cx.scopes.push(Names::default());
        for l in locals {
            self.local(cx, l)?;
        }
        let mut at = "start".to_string();
        for _ in 0..256 {
            if at == "accept" {
                return Ok(());
            }
            if at == "reject" {
                return Err(Stop::Reject("NoMatch".into()));
            }
            let s = states.iter().find(|s| s.name.text == at).expect("checked");
            self.block_stmts(cx, &s.body)?;
            at = match &s.transition {
                Transition::Goto(n) => n.text.clone(),
                Transition::Select { exprs, cases } => {
                    let keys = exprs.iter().map(|e| self.eval(cx, e)).collect::<Run<Vec<_>>>()?;
                    let mut next = None;
                    for case in cases {
                        if self.case_matches(cx, &case.keys, &keys)? {
                            next = Some(case.next.text.clone());
                            break;
                        }
                    }
                    next.ok_or_else(|| Stop::Reject("NoMatch".into()))?
                }
            };
        }
        Err(Stop::Reject("ParserTimeout".into()))
    }

    fn case_matches(&mut self, cx: &mut Cx, keys: &[Keyset], values: &[Value]) -> Run<bool> {
        if keys.len() == 1 && matches!(keys[0], Keyset::Default | Keyset::DontCare) {
            return Ok(true);
        }
        for (k, v) in keys.iter().zip(values) {
            let key = v.as_u128();
            let ok = match k {
                Keyset::Default | Keyset::DontCare => true,
                // Enums and errors have no number here: they match by name (as_u128 made every
                // member 0, and the first case took them all).
                Keyset::Value(e) => match v {
                    Value::Enum(_) | Value::Error(_) => self.eval(cx, e)? == *v,
                    _ => self.eval(cx, e)?.sized_as(v).as_u128() == key,
                },
                Keyset::Mask(a, m) => {
                    let (a, m) = (self.eval(cx, a)?.sized_as(v).as_u128(), self.eval(cx, m)?.sized_as(v).as_u128());
                    key & m == a & m
                }
                Keyset::Range(a, b) => {
                    let (a, b) = (self.eval(cx, a)?.as_u128(), self.eval(cx, b)?.as_u128());
                    (a..=b).contains(&key)
                }
            };
            if !ok {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn block_stmts(&mut self, cx: &mut Cx, stmts: &[Stmt]) -> Run<()> {
        cx.scopes.push(Names::default());
        let r = stmts.iter().try_for_each(|s| self.stmt(cx, s));
        cx.scopes.pop();
        r
    }

    fn stmt(&mut self, cx: &mut Cx, s: &Stmt) -> Run<()> {
        match s {
            Stmt::Assign { target, value } => {
                let place = self.place(cx, target)?;
                // `a op= b` (the parser wrote `a = a op b` with `a` itself, at `a`'s place): `a`'s
                // indices evaluated once, as P4 says, not again for its value.
                if let ExprKind::Binary(op, lhs, rhs) = &value.kind {
                    if **lhs == *target && value.pos == target.pos {
                        let current = self.load(cx, &place)?;
                        let r = self.eval(cx, rhs)?;
                        return self.store(cx, place, binary(*op, current, r));
                    }
                }
                let v = self.eval(cx, value)?;
                self.store(cx, place, v)
            }
            Stmt::Call(e) => self.eval(cx, e).map(drop),
            Stmt::If { cond, then, otherwise } => {
                if self.eval(cx, cond)?.as_bool() {
                    self.block_stmts(cx, then)
                } else if let Some(o) = otherwise {
                    self.block_stmts(cx, o)
                } else {
                    Ok(())
                }
            }
            Stmt::Block(b) => self.block_stmts(cx, b),
            Stmt::Switch { expr, cases, .. } => {
                let Value::Applied { action, .. } = self.eval(cx, expr)? else { return Ok(()) };
                let mut taken = false;
                for (labels, body) in cases {
                    taken |= labels.iter().any(|l| l.text == action || l.text == "default");
                    if taken {
                        if let Some(b) = body {
                            return self.block_stmts(cx, b);
                        }
                    }
                }
                Ok(())
            }
            Stmt::Var { ty, name, init } => {
                let zero = self.default_of(&self.code.checked.resolve(ty));
                let v = match init {
                    Some(e) => self.eval(cx, e)?.sized_as(&zero),
                    None => zero,
                };
                cx.declare(&name.text, v);
                Ok(())
            }
            Stmt::Const { ty, name, value } => {
                let zero = self.default_of(&self.code.checked.resolve(ty));
                let v = self.eval(cx, value)?.sized_as(&zero);
                cx.declare(&name.text, v);
                Ok(())
            }
            Stmt::Return(_) => Err(Stop::Return),
            Stmt::ReturnValue(value, _) => Err(Stop::Returned(self.eval(cx, value)?)),
            Stmt::For { init, cond, update, body, .. } => self.run_for(cx, init, cond.as_ref(), update, body),
            Stmt::Break(_) => Err(Stop::Break),
            Stmt::Continue(_) => Err(Stop::Continue),
            Stmt::Exit(_) => Err(Stop::Exit),
            Stmt::Empty => Ok(()),
        }
    }

    fn assign(&mut self, cx: &mut Cx, target: &Expr, v: Value) -> Run<()> {
        let place = self.place(cx, target)?;
        self.store(cx, place, v)
    }

    /// Where an assignment writes: the variable, the steps into it (stack indices evaluated
    /// now: P4 evaluates an assignment's left side before its right), and the slice.
    fn place(&mut self, cx: &mut Cx, target: &Expr) -> Run<Place> {
        // A slice's bounds are constants, named ones included: evaluated here, where names are
        // known (the path alone took a name for 0 and wrote bit 0).
        let (base, mut slice) = match &target.kind {
            ExprKind::Slice(inner, hi, lo) => {
                let (h, l) = (self.eval(cx, hi)?.as_u128() as u32, self.eval(cx, lo)?.as_u128() as u32);
                (&**inner, Some((h, l)))
            }
            _ => (target, None),
        };
        let (root, mut path) = self.lvalue_steps(cx, base)?;
        // Slices of slices compose, innermost first: `n[7:4][3:0]` is `n[7:4]`.
        let first_slice = path.iter().position(|s| matches!(s, Step::Slice(..))).unwrap_or(path.len());
        let mut inner: Option<(u32, u32)> = None;
        for step in path.drain(first_slice..) {
            if let Step::Slice(h, l) = step {
                inner = Some(compose(inner, (h, l)));
            }
        }
        if let Some(within) = inner {
            slice = Some(match slice {
                Some(outer) => compose(inner, outer),
                None => within,
            });
        }
        Ok((root, path, slice))
    }

    /// The value at a place (a read past a stack's end: an invalid header of zeros).
    fn load(&mut self, cx: &mut Cx, (root, path, slice): &Place) -> Run<Value> {
        let v = match walk(cx, root, path) {
            Ok(v) => v.clone(),
            Err(Stop::Reject(e)) if e == "StackOutOfBounds" => Value::Number(0),
            Err(e) => return Err(e),
        };
        Ok(match slice {
            Some((h, l)) => Value::bits(h - l + 1, v.as_u128() >> l),
            None => v,
        })
    }

    fn store(&mut self, cx: &mut Cx, (root, path, slice): Place, v: Value) -> Run<()> {
        // A write past a stack's end does nothing (P4-16, 8.18: BMv2 leaves the frame as it is).
        let at = match walk(cx, &root, &path) {
            Err(Stop::Reject(e)) if e == "StackOutOfBounds" => return Ok(()),
            other => other?,
        };
        match slice {
            None => {
                let v = v.sized_as(at);
                *at = v;
            }
            Some((h, l)) => {
                if let Value::Bits { value, .. } = at {
                    let m = mask(h - l + 1) << l;
                    *value = (*value & !m) | ((v.as_u128() << l) & m);
                }
            }
        }
        settle_union(cx, &root, &path);
        Ok(())
    }

    fn eval(&mut self, cx: &mut Cx, e: &Expr) -> Run<Value> {
        Ok(match &e.kind {
            ExprKind::Int { width: None, value } => Value::Number(*value as i128),
            ExprKind::Int { width: Some((w, signed)), value } => {
                Value::Bits { width: *w, signed: *signed, value: *value & mask(*w) }
            }
            ExprKind::Bool(b) => Value::Bool(*b),
            ExprKind::Str(_) | ExprKind::DontCare => return Err(Stop::Unsupported("this expression".into())),
            ExprKind::Index(base, index) => {
                let i = self.eval(cx, index)?.as_u128() as usize;
                stack_elem(self.eval(cx, base)?, i)?
            }
            ExprKind::List(items) => Value::List(items.iter().map(|e| self.eval(cx, e)).collect::<Run<_>>()?),
            ExprKind::Name(n) | ExprKind::TopName(n) => match cx.lookup(n) {
                Some(v) => v.clone(),
                None => self.global(cx, n)?,
            },
            ExprKind::Member(inner, m) => {
                if let ExprKind::Name(n) = &inner.kind {
                    if n == "error" {
                        return Ok(Value::Error(m.text.clone()));
                    }
                    if cx.lookup(n).is_none() && matches!(self.code.checked.layouts.get(n), Some(Layout::Enum(_))) {
                        return Ok(Value::Enum(m.text.clone()));
                    }
                    if let (None, Some(Layout::SerEnum(ty, members))) = (cx.lookup(n), self.code.checked.layouts.get(n))
                    {
                        return Ok(ser_enum_member(ty, members, &m.text));
                    }
                }
                match self.eval(cx, inner)? {
                    stack @ Value::Stack { .. } => stack_member(stack, &m.text)?,
                    Value::Applied { hit, action } => match m.text.as_str() {
                        "hit" => Value::Bool(hit),
                        "miss" => Value::Bool(!hit),
                        _ => Value::Applied { hit, action },
                    },
                    v => v
                        .fields()
                        .and_then(|f| f.iter().find(|(n, _)| **n == *m.text))
                        .map(|(_, v)| v.clone())
                        .unwrap_or(Value::Void),
                }
            }
            ExprKind::Slice(inner, hi, lo) => {
                let v = self.eval(cx, inner)?.as_u128();
                let (h, l) = (self.eval(cx, hi)?.as_u128() as u32, self.eval(cx, lo)?.as_u128() as u32);
                Value::bits(h - l + 1, v >> l)
            }
            ExprKind::Call { callee, args, type_args } => self.call(cx, callee, type_args, args)?,
            ExprKind::Unary(op, inner) => match (op, self.eval(cx, inner)?) {
                (UnOp::Not, v) => Value::Bool(!v.as_bool()),
                (UnOp::Complement, Value::Bits { width, signed, value }) => {
                    Value::Bits { width, signed, value: !value & mask(width) }
                }
                (UnOp::Neg, Value::Bits { width, signed, value }) => {
                    Value::Bits { width, signed, value: value.wrapping_neg() & mask(width) }
                }
                (UnOp::Neg, Value::Number(n)) => Value::Number(-n),
                (_, v) => v,
            },
            ExprKind::Binary(op, a, b) => {
                if matches!(op, BinOp::And | BinOp::Or) {
                    let l = self.eval(cx, a)?.as_bool();
                    // Short-circuit, as P4 evaluates them.
                    return Ok(Value::Bool(match op {
                        BinOp::And => l && self.eval(cx, b)?.as_bool(),
                        _ => l || self.eval(cx, b)?.as_bool(),
                    }));
                }
                let (l, r) = (self.eval(cx, a)?, self.eval(cx, b)?);
                binary(*op, l, r)
            }
            ExprKind::Cond(c, a, b) => {
                let (taken, other) = if self.eval(cx, c)?.as_bool() { (a, b) } else { (b, a) };
                let v = self.eval(cx, taken)?;
                // An untyped number in one arm takes the other arm's type (`c ? 2 : 3w1` is
                // bit<3>); the other arm is read only where reading it changes nothing.
                let pure = matches!(
                    other.kind,
                    ExprKind::Int { .. }
                        | ExprKind::Name(_)
                        | ExprKind::Member(..)
                        | ExprKind::Slice(..)
                        | ExprKind::Cast(..)
                );
                match v {
                    Value::Number(_) if pure => {
                        let like = self.eval(cx, other)?;
                        v.sized_as(&like)
                    }
                    v => v,
                }
            }
            ExprKind::Cast(t, inner) => {
                let v = self.eval(cx, inner)?;
                match (self.code.checked.resolve(t), v) {
                    (Ty::Bit(w), v) => Value::bits(w, v.as_u128()),
                    // Widening a signed value extends its sign (int<8> -1 is int<16> -1).
                    (Ty::Int(w), Value::Bits { width: from, signed: true, value }) if w > from && from > 0 => {
                        let negative = value >> (from - 1) & 1 == 1;
                        let extended = if negative { value | (mask(w) & !mask(from)) } else { value };
                        Value::Bits { width: w, signed: true, value: extended & mask(w) }
                    }
                    (Ty::Int(w), v) => Value::Bits { width: w, signed: true, value: v.as_u128() & mask(w) },
                    (Ty::Bool, v) => Value::Bool(v.as_u128() != 0),
                    (_, v) => v,
                }
            }
        })
    }

    /// A name not among the block's variables: a top-level constant.
    fn global(&mut self, cx: &mut Cx, n: &str) -> Run<Value> {
        let code = self.code.clone();
        for d in &code.program.decls {
            if let Decl::Const { ty, name, value } = d {
                if name.text == n {
                    let zero = self.default_of(&code.checked.resolve(ty));
                    return Ok(self.eval(cx, value)?.sized_as(&zero));
                }
            }
        }
        Err(Stop::Unsupported(format!("the name '{n}'")))
    }

    fn call(&mut self, cx: &mut Cx, callee: &Expr, type_args: &[Type], args: &[Expr]) -> Run<Value> {
        let code = self.code.clone();
        match &callee.kind {
            ExprKind::Member(obj, m) => {
                let method = m.text.as_str();
                if let ExprKind::Name(n) = &obj.kind {
                    if cx.packet.as_deref() == Some(n.as_str()) {
                        return self.packet_method(cx, method, type_args, args);
                    }
                    let mut key = format!("{}.{n}", cx.block);
                    if cx.lookup(n).is_none() {
                        if !self.has_instance(&key) && self.has_instance(&format!(".{n}")) {
                            key = format!(".{n}");
                        }
                        if self.tables.contains_key(&key) && method == "apply" {
                            return self.apply(cx, &key);
                        }
                        if let (Some(ty), "apply") = (self.sub_blocks.get(&key), method) {
                            return self.apply_block(cx, &ty.clone(), args);
                        }
                        // A parser or control applied by its type's name (direct invocation).
                        if method == "apply" && code.program.decls.iter().any(|d| is_block_named(d, n)) {
                            return self.apply_block(cx, n, args);
                        }
                        if self.externs.contains_key(&key) {
                            return self.psa_method(cx, &key, method, args);
                        }
                        return self.extern_method(cx, &key, method, args);
                    }
                }
                match method {
                    "isValid" => Ok(Value::Bool(is_valid(&self.eval(cx, obj)?))),
                    "setValid" | "setInvalid" => {
                        let (root, path) = self.lvalue_steps(cx, obj)?;
                        // On an element past a stack's end it changes nothing (P4-16 8.22), as
                        // a write there does (`store`).
                        let at = match walk(cx, &root, &path) {
                            Err(Stop::Reject(e)) if e == "StackOutOfBounds" => return Ok(Value::Void),
                            other => other?,
                        };
                        if let Value::Header { valid, .. } = at {
                            *valid = method == "setValid";
                        }
                        settle_union(cx, &root, &path);
                        Ok(Value::Void)
                    }
                    "push_front" | "pop_front" => {
                        let n = self.eval(cx, &args[0])?.as_u128() as usize;
                        let (root, path) = self.lvalue_steps(cx, obj)?;
                        let at = walk(cx, &root, &path)?;
                        shift_stack(at, method == "push_front", n);
                        Ok(Value::Void)
                    }
                    other => Err(Stop::Unsupported(format!("the method '{other}'"))),
                }
            }
            ExprKind::Name(n) => {
                if let Some(a) = cx.actions.get(n.as_str()).copied().or_else(|| find_action(&code, cx.block, n)) {
                    let values = args.iter().map(|e| self.eval(cx, e)).collect::<Run<Vec<_>>>()?;
                    return self.run_action(cx, a, values, Some(args));
                }
                match n.as_str() {
                    "mark_to_drop" => {
                        let (root, path) = lvalue_path(&args[0]);
                        let mut at = cx.lookup_mut(&root).ok_or_else(|| Stop::Unsupported(root.clone()))?;
                        for step in &path {
                            if let Step::Field(f) = step {
                                at = at.field_mut(f).ok_or_else(|| Stop::Unsupported(f.clone()))?;
                            }
                        }
                        // v1model drops by port (and cancels a multicast); edgeflow.p4 by flag.
                        if at.field_mut("egress_spec").is_some() {
                            set_field(at, "egress_spec", v1model::DROP_PORT);
                            set_field(at, "mcast_grp", 0);
                        } else {
                            set_field(at, "drop", 1);
                        }
                        Ok(Value::Void)
                    }
                    "verify" => {
                        let ok = self.eval(cx, &args[0])?.as_bool();
                        match (ok, self.eval(cx, &args[1])?) {
                            (true, _) => Ok(Value::Void),
                            (false, Value::Error(e)) => Err(Stop::Reject(e)),
                            (false, _) => Err(Stop::Reject("NoMatch".into())),
                        }
                    }
                    "psa_clone_i2e" | "psa_clone_e2e" | "psa_resubmit" | "psa_normal" | "psa_recirculate" => {
                        self.psa_function(cx, n, args).unwrap_or_else(|| Err(Stop::Unsupported(n.to_string())))
                    }
                    // The checker proved it: what is left is its value.
                    "static_assert" => Ok(Value::Bool(true)),
                    "digest" => self.v1model_digest(cx, type_args, args),
                    other if find_function(&code, other).is_some() => {
                        self.run_function(cx, find_function(&code, other).expect("found"), args)
                    }
                    other => self.v1model_function(cx, other, args),
                }
            }
            _ => Err(Stop::Unsupported("this call".into())),
        }
    }

    /// Whether `key` names a table or an instance of an extern or a block.
    fn has_instance(&self, key: &str) -> bool {
        self.tables.contains_key(key)
            || self.sub_blocks.contains_key(key)
            || self.externs.contains_key(key)
            || self.counters.contains_key(key)
            || self.registers.contains_key(key)
            || self.meters.contains_key(key)
            || self.accounts.contains_key(key)
            || self.direct_meters.contains_key(key)
    }

    /// `instance.apply(args)` of the program's own parser or control `ty`: its parameters bound
    /// to the arguments (copy-in, copy-out by direction), on the caller's frame and cursor. A
    /// sub-parser's reject rejects the caller's parse; an exit ends the caller too.
    fn apply_block(&mut self, cx: &mut Cx, ty: &str, args: &[Expr]) -> Run<Value> {
        let code = self.code.clone();
        let d = code.block(ty);
        let (Decl::Parser { params, .. } | Decl::Control { params, .. }) = d else { unreachable!("checked") };
        let mut values = Vec::new();
        for (p, a) in params.iter().zip(args) {
            if is_packet(p) {
                continue;
            }
            let zero = self.default_of(&code.checked.resolve(&p.ty));
            values.push(match p.direction {
                Some(Direction::Out) => zero,
                _ => self.eval(cx, a)?.sized_as(&zero),
            });
        }
        let mut sub = Cx::new(ty, &code, cx.data, cx.length, cx.now);
        sub.cursor = cx.cursor;
        sub.out = std::mem::take(&mut cx.out);
        sub.bind(params, values);
        let result = match d {
            Decl::Parser { locals, states, .. } => self.run_parser(&mut sub, locals, states),
            Decl::Control { locals, apply, .. } => {
                sub.scopes.push(Names::default());
                let r = locals.iter().try_for_each(|l| self.local(&mut sub, l));
                r.and_then(|()| self.block_stmts(&mut sub, apply))
            }
            _ => unreachable!("checked"),
        };
        cx.cursor = sub.cursor;
        cx.out = std::mem::take(&mut sub.out);
        let mut outs = sub.unbind(params).into_iter();
        for (p, a) in params.iter().zip(args) {
            if is_packet(p) {
                continue;
            }
            let v = outs.next().unwrap_or(Value::Void);
            if matches!(p.direction, Some(Direction::Out) | Some(Direction::InOut)) {
                self.assign(cx, a, v)?;
            }
        }
        match result {
            Ok(()) | Err(Stop::Return) => Ok(Value::Void),
            Err(other) => Err(other),
        }
    }

    /// Runs action `a` with `values` for its parameters; those with a direction are written back
    /// to the caller's arguments (`args`) afterwards (copy-in, copy-out).
    fn run_action(&mut self, cx: &mut Cx, a: &Action, values: Vec<Value>, args: Option<&[Expr]>) -> Run<Value> {
        let mut scope = Names::default();
        for (p, v) in a.params.iter().zip(values) {
            let zero = self.default_of(&self.code.checked.resolve(&p.ty));
            scope.insert(p.name.text.clone(), v.sized_as(&zero));
        }
        cx.scopes.push(scope);
        let r = self.block_stmts(cx, &a.body);
        let scope = cx.scopes.pop().expect("the action's scope");
        let exited = match r {
            Ok(()) | Err(Stop::Return) => false,
            // An exit still copies out what the action wrote (P4-16, 12.5.1).
            Err(Stop::Exit) => true,
            Err(other) => return Err(other),
        };
        if let Some(args) = args {
            for (p, arg) in a.params.iter().zip(args) {
                if matches!(p.direction, Some(Direction::Out) | Some(Direction::InOut)) {
                    self.assign(cx, arg, scope[&p.name.text].clone())?;
                }
            }
        }
        if exited {
            return Err(Stop::Exit);
        }
        Ok(Value::Void)
    }

    fn apply(&mut self, cx: &mut Cx, table: &str) -> Run<Value> {
        let code = self.code.clone();
        let t = code.program.decls.iter().find_map(|d| match d {
            Decl::Control { name, locals, .. } if name.text == cx.block => locals.iter().find_map(|l| match l {
                Local::Table(t) if format!("{}.{}", cx.block, t.name.text) == table => Some(t),
                _ => None,
            }),
            _ => None,
        });
        let t = t.expect("checked");
        let values = t.keys.iter().map(|k| self.eval(cx, &k.expr)).collect::<Run<Vec<_>>>()?;
        let selector_keys = &self.tables[table].selector_keys;
        let keys: Vec<u128> = if selector_keys.is_empty() {
            values.iter().map(Value::as_u128).collect()
        } else {
            let matched = values.iter().enumerate().filter(|(i, _)| !selector_keys.contains(i));
            matched.map(|(_, v)| v.as_u128()).collect()
        };
        let state = self.tables.get_mut(table).expect("built");
        let best = if state.all_exact() { state.lookup(&keys) } else { state.scan(&keys) };
        let (hit, action, data) = match best {
            Some(i) => {
                let e = &mut state.entries[i];
                e.packets += 1;
                e.bytes += cx.length;
                if let Some((key, bytes)) = &state.meter {
                    let units = if *bytes { cx.length } else { 1 };
                    self.direct_colours.insert(key.clone(), e.meter.mark(units, cx.now));
                }
                match (&e.indirect, &state.profile) {
                    (Some(to), Some(profile)) => {
                        let (to, profile) = (to.clone(), profile.clone());
                        let mut bits = Vec::new();
                        for &i in &self.tables[table].selector_keys {
                            v1model::push_bits(&values[i], &mut bits);
                        }
                        let bytes: Vec<u8> = bits
                            .chunks(8)
                            .map(|b| b.iter().enumerate().fold(0u8, |byte, (i, &x)| byte | ((x as u8) << (7 - i))))
                            .collect();
                        match self.resolve(&profile, &to, &bytes) {
                            Some((action, args)) => (true, action, args),
                            // An empty group: a miss.
                            None => {
                                let state = &self.tables[table];
                                (false, state.default.0.clone(), state.default.1.clone())
                            }
                        }
                    }
                    _ => (true, e.action.clone(), e.args.clone()),
                }
            }
            None => {
                if let Some((key, _)) = &state.meter {
                    self.direct_colours.insert(key.clone(), GREEN);
                }
                (false, state.default.0.clone(), state.default.1.clone())
            }
        };
        let a = cx
            .actions
            .get(action.as_str())
            .copied()
            .or_else(|| find_action(&code, cx.block, &action))
            .expect("checked");
        self.run_table_action(cx, t, a, &data)?;
        Ok(Value::Applied { hit, action })
    }

    fn packet_method(&mut self, cx: &mut Cx, method: &str, type_args: &[Type], args: &[Expr]) -> Run<Value> {
        match method {
            "extract" if args.len() == 2 => self.extract_sized(cx, &args[0], &args[1]),
            "extract" => {
                let (root, mut path) = self.lvalue_steps(cx, &args[0])?;
                let data = cx.data;
                let mut cursor = cx.cursor;
                // Into `stack.next` (or a member of it, a stack of unions' `u.next.byte`): the
                // stack's next element, and `next` moves on past it.
                let next_at = path
                    .iter()
                    .position(|s| matches!(s, Step::Field(f) if f == "next"))
                    .filter(|&k| matches!(walk(cx, &root, &path[..k]), Ok(Value::Stack { .. })));
                if let Some(k) = next_at {
                    let Value::Stack { next, elems } = walk(cx, &root, &path[..k])? else { unreachable!() };
                    if *next >= elems.len() {
                        return Err(Stop::Reject("StackOutOfBounds".into()));
                    }
                    path[k] = Step::Index(*next);
                }
                let at = walk(cx, &root, &path)?;
                let Value::Header { valid, fields } = at else { return Err(Stop::Unsupported("extract".into())) };
                let bits: usize = fields
                    .iter()
                    .map(|(_, v)| if let Value::Bits { width, .. } = v { *width as usize } else { 0 })
                    .sum();
                if cursor + bits > data.len() * 8 {
                    return Err(Stop::Reject("PacketTooShort".into()));
                }
                for (_, v) in fields.iter_mut() {
                    if let Value::Bits { width, value, .. } = v {
                        *value = read_bits(data, cursor, *width);
                        cursor += *width as usize;
                    }
                }
                *valid = true;
                cx.cursor = cursor;
                settle_union(cx, &root, &path);
                if let Some(k) = next_at {
                    if let Value::Stack { next, .. } = walk(cx, &root, &path[..k])? {
                        *next += 1;
                    }
                }
                Ok(Value::Void)
            }
            "emit" => {
                let v = self.eval(cx, &args[0])?;
                emit(&v, &mut cx.out);
                Ok(Value::Void)
            }
            "advance" => {
                let n = self.eval(cx, &args[0])?.as_u128() as usize;
                if cx.cursor + n > cx.data.len() * 8 {
                    return Err(Stop::Reject("PacketTooShort".into()));
                }
                cx.cursor += n;
                Ok(Value::Void)
            }
            "length" => Ok(Value::bits(32, cx.data.len() as u128)),
            "lookahead" if matches!(type_args.first().map(|t| self.code.checked.resolve(t)), Some(Ty::Header(_))) => {
                let ty = self.code.checked.resolve(&type_args[0]);
                lookahead_header(cx, self.default_of(&ty))
            }
            "lookahead" => {
                let w = match type_args.first().map(|t| self.code.checked.resolve(t)) {
                    Some(Ty::Bit(w)) => w,
                    _ => return Err(Stop::Unsupported("lookahead of anything but bit<N>".into())),
                };
                if cx.cursor + w as usize > cx.data.len() * 8 {
                    return Err(Stop::Reject("PacketTooShort".into()));
                }
                Ok(Value::bits(w, read_bits(cx.data, cx.cursor, w)))
            }
            other => Err(Stop::Unsupported(format!("packet.{other}"))),
        }
    }

    fn extern_method(&mut self, cx: &mut Cx, key: &str, method: &str, args: &[Expr]) -> Run<Value> {
        let values = args.iter().map(|e| self.eval(cx, e)).collect::<Run<Vec<_>>>()?;
        if let Some(cells) = self.counters.get_mut(key) {
            if method == "count" {
                if let Some(c) = cells.get_mut(values[0].as_u128() as usize) {
                    c.0 += 1;
                    c.1 += cx.length;
                }
            }
            return Ok(Value::Void);
        }
        if self.registers.contains_key(key) {
            return match method {
                // PSA's form returns the cell.
                "read" if values.len() == 1 => {
                    Ok(self.registers[key].get(values[0].as_u128() as usize).cloned().unwrap_or(Value::Number(0)))
                }
                "read" => {
                    // Past the register's size: 0, as the kernel reads it (a void value made the
                    // field vanish from the frame).
                    let v = self.registers[key].get(values[1].as_u128() as usize).cloned().unwrap_or(Value::Number(0));
                    self.assign(cx, &args[0], v)?;
                    Ok(Value::Void)
                }
                "write" => {
                    let i = values[0].as_u128() as usize;
                    if let Some(c) = self.registers.get_mut(key).and_then(|cells| cells.get_mut(i)) {
                        let v = values[1].clone().sized_as(c);
                        *c = v;
                    }
                    Ok(Value::Void)
                }
                _ => Err(Stop::Unsupported(format!("register.{method}"))),
            };
        }
        if let Some(cells) = self.accounts.get_mut(key) {
            // conforms(index, bag_us, jitter_us, smax): frame-based, each conforming frame spends
            // one BAG's worth of credit; the credit grows by smax bytes per BAG up to what the
            // jitter allows, in byte·ns so that nothing is divided.
            let i = values[0].as_u128() as usize;
            let (bag, jitter, smax) = (values[1].as_u128() * 1000, values[2].as_u128() * 1000, values[3].as_u128());
            let Some((credit, at)) = cells.get_mut(i) else { return Ok(Value::Bool(false)) };
            return Ok(Value::Bool(afdx_conforms(credit, at, cx.now, bag, jitter, smax)));
        }
        if let Some(meter) = self.meters.get_mut(key) {
            // execute_meter(index, out colour): RFC 2698's two-rate three-colour marker, colour
            // blind: red over the peak rate, yellow over the committed one, else green. A meter
            // the control plane has not set marks everything green.
            let units = if meter.bytes { cx.length } else { 1 };
            let colour = meter.cells.get_mut(values[0].as_u128() as usize).map_or(GREEN, |c| c.mark(units, cx.now));
            if method == "execute" {
                return Ok(psa_colour(colour)); // PSA's form returns the colour
            }
            self.assign(cx, &args[1], Value::Number(colour as i128))?;
            return Ok(Value::Void);
        }
        if self.direct_meters.contains_key(key) && (method == "read" || method == "execute") {
            let colour = self.direct_colours.get(key).copied().unwrap_or(GREEN);
            if method == "execute" {
                return Ok(psa_colour(colour));
            }
            self.assign(cx, &args[0], Value::Number(colour as i128))?;
            return Ok(Value::Void);
        }
        if method == "count" {
            return Ok(Value::Void); // a direct counter: the table counts its entries
        }
        Err(Stop::Unsupported(format!("{key}.{method}")))
    }
}

/// What P4Runtime's server needs besides the control-plane API above: a copy of the state that a
/// batch of updates which fails part-way is undone to, and a direct counter's cells written.
impl Switch {
    /// A copy of this switch's state, its code shared: tables (entries, their hits and direct
    /// meters), counters, registers, accounts, meters and groups. Costs a copy of each.
    pub fn snapshot(&self) -> Switch {
        Switch {
            code: self.code.clone(),
            tables: self.tables.clone(),
            counters: self.counters.clone(),
            registers: self.registers.clone(),
            accounts: self.accounts.clone(),
            meters: self
                .meters
                .iter()
                .map(|(name, m)| (name.clone(), Meter { bytes: m.bytes, cells: m.cells.clone() }))
                .collect(),
            direct_meters: self.direct_meters.clone(),
            direct_colours: self.direct_colours.clone(),
            groups: self.groups.clone(),
            replica_ids: self.replica_ids.clone(),
            sessions: self.sessions.clone(),
            requests: v1model::Requests::default(),
            random: self.random,
            sub_blocks: self.sub_blocks.clone(),
            externs: self.externs.clone(),
            profiles: self.profiles.clone(),
            generation: self.generation,
            initial: self.initial.clone(),
            digests: Vec::new(),
            compiled: self.compiled.clone(),
            exec_slots: Vec::new(),
            exec_keys: Vec::new(),
            exec_bytes: Vec::new(),
            exec_out: Vec::new(),
        }
    }

    /// Sets the packets and bytes `table`'s entry with these matches and priority counted (its
    /// direct counter's cell).
    pub fn set_entry_counts(
        &mut self,
        table: &str,
        keys: &[Match],
        priority: i64,
        packets: u64,
        bytes: u64,
    ) -> Result<(), String> {
        let t = self.tables.get_mut(table).ok_or_else(|| format!("no table '{table}'"))?;
        let e = t.entries.iter_mut().find(|e| e.keys == keys && e.priority == priority);
        let e = e.ok_or_else(|| format!("{table} has no such entry"))?;
        (e.packets, e.bytes) = (packets, bytes);
        self.generation += 1;
        Ok(())
    }
}

impl<'c> Cx<'c> {
    fn new(block: &'c str, code: &'c Code, data: &'c [u8], length: u64, now: u64) -> Cx<'c> {
        let mut actions = Names::default();
        for d in &code.program.decls {
            if let Decl::Control { name, locals, .. } = d {
                if name.text == block {
                    for l in locals {
                        if let Local::Action(a) = l {
                            actions.insert(a.name.text.as_str(), a);
                        }
                    }
                }
            }
        }
        Cx { block, scopes: Vec::new(), actions, packet: None, data, cursor: 0, out: Vec::new(), length, now }
    }

    fn bind(&mut self, params: &[Param], values: Vec<Value>) {
        let mut scope = Names::default();
        for p in params {
            if is_packet(p) {
                self.packet = Some(p.name.text.clone());
            }
        }
        let named: Vec<&Param> = params.iter().filter(|p| !is_packet(p)).collect();
        for (p, v) in named.into_iter().zip(values) {
            scope.insert(p.name.text.clone(), v);
        }
        self.scopes.push(scope);
    }

    fn unbind(&mut self, params: &[Param]) -> Vec<Value> {
        let mut scope = self.scopes.drain(..).next().unwrap_or_default();
        params.iter().filter(|p| !is_packet(p)).map(|p| scope.remove(&p.name.text).unwrap_or(Value::Void)).collect()
    }

    fn declare(&mut self, name: &str, v: Value) {
        if let Some(s) = self.scopes.last_mut() {
            s.insert(name.to_string(), v);
        }
    }

    fn lookup(&self, name: &str) -> Option<&Value> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    fn lookup_mut(&mut self, name: &str) -> Option<&mut Value> {
        self.scopes.iter_mut().rev().find_map(|s| s.get_mut(name))
    }
}

/// An assignment's target: the variable, the steps into it, the bits (high, low) of a slice.
type Place = (String, Vec<Step>, Option<(u32, u32)>);

/// A block's `packet_in` or `packet_out` parameter (the frame, not a value it is given).
fn is_packet(p: &Param) -> bool {
    matches!(&p.ty, Type::Named(n, _) if n.text == "packet_in" || n.text == "packet_out")
}

enum Step {
    Field(String),
    Slice(u32, u32),
    /// A header stack's element, its index evaluated.
    Index(usize),
}

/// An assignable expression as a variable and the steps into it.
fn lvalue_path(e: &Expr) -> (String, Vec<Step>) {
    match &e.kind {
        ExprKind::Name(n) => (n.clone(), Vec::new()),
        ExprKind::Member(inner, m) => {
            let (root, mut path) = lvalue_path(inner);
            path.push(Step::Field(m.text.clone()));
            (root, path)
        }
        ExprKind::Slice(inner, hi, lo) => {
            let (root, mut path) = lvalue_path(inner);
            let n = |e: &Expr| if let ExprKind::Int { value, .. } = e.kind { value as u32 } else { 0 };
            path.push(Step::Slice(n(hi), n(lo)));
            (root, path)
        }
        _ => (String::new(), Vec::new()),
    }
}

/// Slice `(h, l)` of what slice `inner` (if any) selected, as one slice of the whole.
fn compose(inner: Option<(u32, u32)>, (h, l): (u32, u32)) -> (u32, u32) {
    match inner {
        Some((_, base)) => (base + h, base + l),
        None => (h, l),
    }
}

fn find_action<'c>(code: &'c Code, block: &str, name: &str) -> Option<&'c Action> {
    for d in &code.program.decls {
        match d {
            Decl::Control { name: b, locals, .. } if b.text == block => {
                for l in locals {
                    if let Local::Action(a) = l {
                        if a.name.text == name {
                            return Some(a);
                        }
                    }
                }
            }
            Decl::Action(a) if a.name.text == name => return Some(a),
            _ => {}
        }
    }
    None
}

fn field(v: &Value, name: &str) -> u128 {
    v.fields().and_then(|f| f.iter().find(|(n, _)| &**n == name)).map_or(0, |(_, v)| v.as_u128())
}

fn set_field(v: &mut Value, name: &str, x: u128) {
    if let Some(Value::Bits { width, value, .. }) = v.field_mut(name) {
        *value = x & mask(*width);
    }
}

/// `==` as P4 defines it: two invalid headers are equal whatever their fields, a stack's
/// elements compare and not how far a parser filled it, members compare member by member.
fn p4_equal(l: &Value, r: &Value) -> bool {
    let all = |a: &[(Name, Value)], b: &[(Name, Value)]| {
        a.len() == b.len() && a.iter().zip(b).all(|((_, x), (_, y))| p4_equal(x, y))
    };
    match (l, r) {
        (Value::Header { valid: false, .. }, Value::Header { valid: false, .. }) => true,
        (Value::Header { valid: a, fields: f }, Value::Header { valid: b, fields: g }) => a == b && all(f, g),
        (Value::Struct(f), Value::Struct(g)) | (Value::Union(f), Value::Union(g)) => all(f, g),
        (Value::Stack { elems: a, .. }, Value::Stack { elems: b, .. }) | (Value::List(a), Value::List(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| p4_equal(x, y))
        }
        _ => l == r,
    }
}

fn binary(op: BinOp, l: Value, r: Value) -> Value {
    let (l, r) = (l.clone().sized_as(&r), r.sized_as(&l));
    if let (Value::Number(a), Value::Number(b)) = (&l, &r) {
        return match op {
            BinOp::Add => Value::Number(a + b),
            BinOp::Sub => Value::Number(a - b),
            BinOp::Mul => Value::Number(a * b),
            BinOp::Eq => Value::Bool(a == b),
            BinOp::Ne => Value::Bool(a != b),
            BinOp::Lt => Value::Bool(a < b),
            BinOp::Gt => Value::Bool(a > b),
            BinOp::Le => Value::Bool(a <= b),
            BinOp::Ge => Value::Bool(a >= b),
            BinOp::BitAnd => Value::Number(a & b),
            BinOp::BitOr => Value::Number(a | b),
            BinOp::BitXor => Value::Number(a ^ b),
            BinOp::Shl => Value::Number(a << b),
            BinOp::Shr => Value::Number(a >> b),
            // The checker refuses a constant divisor of 0; a run-time one gives 0.
            BinOp::Div => Value::Number(a.checked_div(*b).unwrap_or(0)),
            BinOp::Mod => Value::Number(a.checked_rem(*b).unwrap_or(0)),
            _ => Value::Void,
        };
    }
    match op {
        BinOp::Eq => return Value::Bool(p4_equal(&l, &r)),
        BinOp::Ne => return Value::Bool(!p4_equal(&l, &r)),
        _ => {}
    }
    let (Value::Bits { width, signed, value: a }, b) = (&l, r.as_u128()) else { return Value::Void };
    let (w, m, a) = (*width, mask(*width), *a);
    // Signed comparisons compare the two's-complement values.
    let s = |x: u128| if w < 128 && x >> (w - 1) & 1 == 1 { x as i128 - (1i128 << w) } else { x as i128 };
    let bits = |v: u128| Value::Bits { width: w, signed: *signed, value: v & m };
    match op {
        BinOp::Add => bits(a.wrapping_add(b)),
        BinOp::Sub => bits(a.wrapping_sub(b)),
        BinOp::Mul => bits(a.wrapping_mul(b)),
        // int<W> saturates at its own bounds, two's complement.
        // Written so that int<128> and bit<128> neither overflow nor wrap.
        BinOp::AddSat | BinOp::SubSat if *signed => {
            let lo = -1i128 << (w - 1);
            let sum = if op == BinOp::AddSat { s(a).saturating_add(s(b)) } else { s(a).saturating_sub(s(b)) };
            bits(sum.clamp(lo, !lo) as u128)
        }
        BinOp::AddSat => bits(a.checked_add(b).filter(|v| *v <= m).unwrap_or(m)),
        BinOp::SubSat => bits(a.saturating_sub(b)),
        BinOp::BitAnd => bits(a & b),
        BinOp::BitOr => bits(a | b),
        BinOp::BitXor => bits(a ^ b),
        BinOp::Shl => bits(if b >= w as u128 { 0 } else { a << b }),
        // An int<W> shifts in its sign (arithmetic), a bit<W> zeros.
        BinOp::Shr if *signed => bits((s(a) >> b.min(w as u128 - 1)) as u128),
        BinOp::Shr => bits(if b >= w as u128 { 0 } else { a >> b }),
        BinOp::Div => bits(a.checked_div(b).unwrap_or(0)),
        BinOp::Mod => bits(a.checked_rem(b).unwrap_or(0)),
        BinOp::Concat => {
            let wb = if let Value::Bits { width, .. } = r { width } else { 0 };
            Value::bits(w + wb, (a << wb) | b)
        }
        BinOp::Lt | BinOp::Gt | BinOp::Le | BinOp::Ge => {
            let (x, y) = if *signed { (s(a), s(b)) } else { (a as i128, b as i128) };
            Value::Bool(match op {
                BinOp::Lt => x < y,
                BinOp::Gt => x > y,
                BinOp::Le => x <= y,
                _ => x >= y,
            })
        }
        _ => Value::Void,
    }
}

/// `width` bits of `data` from bit `at`, most significant first (network order).
fn read_bits(data: &[u8], at: usize, width: u32) -> u128 {
    let mut v = 0u128;
    for i in 0..width as usize {
        let bit = at + i;
        v = (v << 1) | ((data[bit / 8] >> (7 - bit % 8)) & 1) as u128;
    }
    v
}

/// Appends a valid header's fields (or a struct's headers, in order) to `out`.
fn emit(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Header { valid: true, fields } => {
            let mut bits: Vec<bool> = Vec::new();
            for (_, f) in fields {
                if let Value::Bits { width, value, .. } = f {
                    for i in (0..*width).rev() {
                        bits.push((value >> i) & 1 == 1);
                    }
                }
                if let Value::Varbit { len, bytes, .. } = f {
                    bits.extend((0..*len as usize).map(|i| bytes[i / 8] >> (7 - i % 8) & 1 == 1));
                }
            }
            for byte in bits.chunks(8) {
                out.push(byte.iter().fold(0u8, |b, &x| (b << 1) | x as u8));
            }
        }
        Value::Struct(fields) => fields.iter().for_each(|(_, f)| emit(f, out)),
        Value::Stack { elems, .. } => elems.iter().for_each(|e| emit(e, out)),
        Value::Union(members) => members.iter().for_each(|(_, m)| emit(m, out)),
        _ => {}
    }
}

/// A colour as PSA's `PSA_MeterColor_t` names it.
fn psa_colour(colour: u8) -> Value {
    Value::Enum(
        match colour {
            GREEN => "GREEN",
            YELLOW => "YELLOW",
            _ => "RED",
        }
        .into(),
    )
}

/// Meter colours, as `execute_meter` writes them.
const GREEN: u8 = 0;
const YELLOW: u8 = 1;
const RED: u8 = 2;
/// Tokens are kept in unit·ns: a rate in units per second adds `rate` per nanosecond.
const NS: u64 = 1_000_000_000;
/// The most a meter's rate (units per second) and burst (units) may be, so that a bucket's
/// arithmetic fits 64 bits (`take`).
pub const METER_RATE_MAX: u64 = 1 << 40;
pub const METER_BURST_MAX: u64 = 1_000_000_000;
/// A bucket word holds the instant its bucket was (or would have been) empty, plus this: 0, a
/// map cell's first value, then reads as an empty instant long past, a full bucket.
const BUCKET_OFFSET: u64 = 1 << 62;

/// Takes `cost` unit·ns from the token bucket whose one word is `word` (see `BUCKET_OFFSET`),
/// filling at `rate` unit·ns per ns up to `cap`, at `now` (ns); false, the word unchanged,
/// where it holds less. The kernel back end does exactly this, the word taken by
/// compare-and-swap (`p4_bucket_take` in `backends/ebpf/runtime.h`), so that both targets colour alike.
pub fn take(word: &mut u64, now: u64, rate: u64, cap: u64, cost: u64) -> bool {
    let since_empty = (now.wrapping_add(BUCKET_OFFSET).wrapping_sub(*word) as i64).max(0) as u64;
    let tokens = if since_empty > cap / rate { cap } else { (since_empty * rate).min(cap) };
    if tokens < cost {
        return false;
    }
    *word = now.wrapping_add(BUCKET_OFFSET).wrapping_sub((tokens - cost) / rate);
    true
}

struct Meter {
    /// Counts bytes (MeterType.bytes), else packets.
    bytes: bool,
    cells: Vec<MeterCell>,
}

#[derive(Clone, Debug, Default)]
struct MeterCell {
    /// Committed rate and burst, peak rate and burst; None: not set, everything green.
    rates: Option<[u64; 4]>,
    /// The committed and the peak bucket, one word each (`take`).
    words: [u64; 2],
}

impl MeterCell {
    /// A cell with these rates (`what` names it in the error), its buckets full.
    fn new(what: &str, [cir, cburst, pir, pburst]: [u64; 4]) -> Result<MeterCell, String> {
        if pir < cir || cir == 0 || pburst == 0 || cburst == 0 {
            return Err(format!(
                "{what}: the peak rate is at least the committed one, and both rates and bursts above 0"
            ));
        }
        if pir > METER_RATE_MAX || cburst.max(pburst) > METER_BURST_MAX {
            return Err(format!(
                "{what}: rates up to {METER_RATE_MAX} and bursts up to {METER_BURST_MAX} units (per second)"
            ));
        }
        Ok(MeterCell { rates: Some([cir, cburst, pir, pburst]), words: [0, 0] })
    }

    /// RFC 2698, colour-blind: red where the peak bucket lacks the frame's units (neither bucket
    /// is charged), yellow where only the committed one does (the peak one is), else green.
    fn mark(&mut self, units: u64, now: u64) -> u8 {
        let Some([cir, cburst, pir, pburst]) = self.rates else { return GREEN };
        let cost = units * NS;
        if !take(&mut self.words[1], now, pir, pburst * NS, cost) {
            RED
        } else if !take(&mut self.words[0], now, cir, cburst * NS, cost) {
            YELLOW
        } else {
            GREEN
        }
    }
}

/// Whether `d` is the program's own parser or control `name` (which a program may instantiate
/// as a sub-parser or sub-control).
fn is_block_named(d: &Decl, name: &str) -> bool {
    matches!(d, Decl::Parser { name: n, .. } | Decl::Control { name: n, .. } if n.text == name)
}

// The language's constructs past the first subset (issue 52, item 3): functions, header stacks
// and list initialisers, as P4-16 defines them.

impl Switch {
    /// An assignable expression as a variable and the steps into it, a stack's indices
    /// evaluated (and a slice's bounds, named constants among them).
    fn lvalue_steps(&mut self, cx: &mut Cx, e: &Expr) -> Run<(String, Vec<Step>)> {
        Ok(match &e.kind {
            ExprKind::Name(n) => (n.clone(), Vec::new()),
            ExprKind::Member(inner, m) => {
                let (root, mut path) = self.lvalue_steps(cx, inner)?;
                path.push(Step::Field(m.text.clone()));
                (root, path)
            }
            ExprKind::Index(inner, index) => {
                let (root, mut path) = self.lvalue_steps(cx, inner)?;
                path.push(Step::Index(self.eval(cx, index)?.as_u128() as usize));
                (root, path)
            }
            ExprKind::Slice(inner, hi, lo) => {
                let (root, mut path) = self.lvalue_steps(cx, inner)?;
                let (h, l) = (self.eval(cx, hi)?.as_u128() as u32, self.eval(cx, lo)?.as_u128() as u32);
                path.push(Step::Slice(h, l));
                (root, path)
            }
            _ => return Err(Stop::Unsupported("assigning to this expression".into())),
        })
    }

    /// Calls the program's function `f`: arguments copied in (an `out` parameter starts as its
    /// type's default, a header invalid), the body run with only its parameters and the
    /// program's constants in scope, `out` and `inout` parameters copied back left to right.
    fn run_function(&mut self, cx: &mut Cx, f: &Function, args: &[Expr]) -> Run<Value> {
        let mut scope = Names::default();
        for (p, a) in f.params.iter().zip(args) {
            let zero = self.default_of(&self.code.checked.resolve(&p.ty));
            let v = if p.direction == Some(Direction::Out) { zero } else { self.eval(cx, a)?.sized_as(&zero) };
            scope.insert(p.name.text.clone(), v);
        }
        let callers = std::mem::take(&mut cx.scopes);
        cx.scopes.push(scope);
        let ran = self.block_stmts(cx, &f.body);
        let scope = cx.scopes.pop().expect("the function's scope");
        cx.scopes = callers;
        let result = match ran {
            Ok(()) | Err(Stop::Return) => Value::Void,
            Err(Stop::Returned(v)) => v.sized_as(&self.default_of(&self.code.checked.resolve(&f.ret))),
            Err(other) => return Err(other),
        };
        for (p, a) in f.params.iter().zip(args) {
            if matches!(p.direction, Some(Direction::Out) | Some(Direction::InOut)) {
                self.assign(cx, a, scope[&p.name.text].clone())?;
            }
        }
        Ok(result)
    }
}

fn find_function<'c>(code: &'c Code, name: &str) -> Option<&'c Function> {
    code.program.decls.iter().find_map(|d| match d {
        Decl::Function(f) if f.name.text == name => Some(f),
        _ => None,
    })
}

/// The value `root` and `path` name, to write. A stack's `next` or `last`, or an index, past
/// its headers is P4's error.StackOutOfBounds.
fn walk<'v>(cx: &'v mut Cx<'_>, root: &str, path: &[Step]) -> Run<&'v mut Value> {
    let out_of_bounds = || Stop::Reject("StackOutOfBounds".into());
    let mut at = cx.lookup_mut(root).ok_or_else(|| Stop::Unsupported(format!("assigning to '{root}'")))?;
    for step in path {
        at = match (step, at) {
            (Step::Field(f), Value::Stack { next, elems }) => {
                let i = match f.as_str() {
                    "next" => *next,
                    "last" => next.wrapping_sub(1),
                    _ => usize::MAX,
                };
                elems.get_mut(i).ok_or_else(out_of_bounds)?
            }
            (Step::Field(f), v) => v.field_mut(f).ok_or_else(|| Stop::Unsupported(format!("field {f}")))?,
            (Step::Index(i), Value::Stack { elems, .. } | Value::List(elems)) => {
                elems.get_mut(*i).ok_or_else(out_of_bounds)?
            }
            (Step::Index(_) | Step::Slice(..), _) => return Err(Stop::Unsupported("this assignment".into())),
        };
    }
    Ok(at)
}

/// `stack[i]`, read.
fn stack_elem(stack: Value, i: usize) -> Run<Value> {
    let elems = match stack {
        Value::Stack { elems, .. } | Value::List(elems) => elems,
        _ => return Err(Stop::Unsupported("indexing this value".into())),
    };
    // Read past the end: P4 leaves the value undefined; an invalid header of zeros, as BMv2's
    // frames show it (a control reading one runs on; only a parser's extract fails).
    elems.get(i).cloned().or_else(|| elems.first().map(zeroed)).ok_or_else(|| Stop::Reject("StackOutOfBounds".into()))
}

/// `v` with every field zero and every header invalid.
fn zeroed(v: &Value) -> Value {
    match v {
        Value::Bits { width, signed, .. } => Value::Bits { width: *width, signed: *signed, value: 0 },
        Value::Header { fields, .. } => {
            Value::Header { valid: false, fields: fields.iter().map(|(n, f)| (n.clone(), zeroed(f))).collect() }
        }
        Value::Struct(fields) => Value::Struct(fields.iter().map(|(n, f)| (n.clone(), zeroed(f))).collect()),
        other => other.clone(),
    }
}

/// `stack.next`, `.last`, `.nextIndex`, `.lastIndex` (`nextIndex - 1`, in 32 bits) and `.size`.
fn stack_member(stack: Value, member: &str) -> Run<Value> {
    let Value::Stack { next, elems } = stack else { unreachable!("called on stacks") };
    let out_of_bounds = || Stop::Reject("StackOutOfBounds".into());
    Ok(match member {
        "next" => elems.get(next).cloned().ok_or_else(out_of_bounds)?,
        "last" => next.checked_sub(1).and_then(|i| elems.get(i)).cloned().ok_or_else(out_of_bounds)?,
        "nextIndex" => Value::bits(32, next as u128),
        "lastIndex" => Value::bits(32, (next as u128).wrapping_sub(1)),
        "size" => Value::bits(32, elems.len() as u128),
        other => return Err(Stop::Unsupported(format!("a stack's '{other}'"))),
    })
}

/// `push_front(n)` (`push`) or `pop_front(n)`: the headers move `n` places towards the back
/// or the front, the `n` places left behind become invalid, and `next` moves with them
/// (within 0 and the size).
fn shift_stack(stack: &mut Value, push: bool, n: usize) {
    let Value::Stack { next, elems } = stack else { return };
    let size = elems.len();
    let n = n.min(size);
    let vacated = if push {
        elems.rotate_right(n);
        *next = (*next + n).min(size);
        0..n
    } else {
        elems.rotate_left(n);
        *next = next.saturating_sub(n);
        size - n..size
    };
    for e in &mut elems[vacated] {
        if let Value::Header { valid, .. } = e {
            *valid = false;
        }
    }
}

/// A list's items given to `fields` in order, each sized as its field (a list inside a list
/// initialises a struct or header inside the struct).
fn list_into(fields: &[(Name, Value)], items: Vec<Value>) -> Vec<(Name, Value)> {
    fields.iter().zip(items).map(|((n, like), v)| (n.clone(), v.sized_as(like))).collect()
}

/// `isValid()`: a header's validity; a header union's is whether any of its headers is valid.
fn is_valid(v: &Value) -> bool {
    match v {
        Value::Header { valid, .. } => *valid,
        Value::Union(members) => members.iter().any(|(_, m)| is_valid(m)),
        _ => false,
    }
}

/// After a write to `root` and `path` (an assignment, `setValid`, `extract`): where that is a
/// header union's member and now valid, the union's other headers become invalid, as P4-16
/// keeps at most one valid.
fn settle_union(cx: &mut Cx, root: &str, path: &[Step]) {
    let Some((Step::Field(member), parent)) = path.split_last() else { return };
    let Ok(Value::Union(members)) = walk(cx, root, parent) else { return };
    if !members.iter().any(|(n, m)| **n == **member && is_valid(m)) {
        return;
    }
    for (n, m) in members.iter_mut() {
        if **n != **member {
            if let Value::Header { valid, .. } = m {
                *valid = false;
            }
        }
    }
}

impl Switch {
    /// `extract(hdr, size)`: `hdr`'s fields in order from the frame, its varbit field taking
    /// `size` bits. More than the varbit holds is error.HeaderTooShort, bits that are not whole
    /// bytes error.ParserInvalidArgument (BMv2's rule), and a frame too short
    /// error.PacketTooShort; the header is left as it was on any of them.
    fn extract_sized(&mut self, cx: &mut Cx, target: &Expr, size: &Expr) -> Run<Value> {
        let size = self.eval(cx, size)?.as_u128();
        let (root, mut path) = self.lvalue_steps(cx, target)?;
        let into_next = matches!(path.last(), Some(Step::Field(f)) if f == "next")
            && matches!(walk(cx, &root, &path[..path.len() - 1])?, Value::Stack { .. });
        if into_next {
            path.pop();
            let Value::Stack { next, elems } = walk(cx, &root, &path)? else { unreachable!() };
            if *next >= elems.len() {
                return Err(Stop::Reject("StackOutOfBounds".into()));
            }
            path.push(Step::Index(*next));
        }
        let (data, start) = (cx.data, cx.cursor);
        let at = walk(cx, &root, &path)?;
        let Value::Header { valid, fields } = at else { return Err(Stop::Unsupported("extract".into())) };
        let max = fields.iter().find_map(|(_, v)| if let Value::Varbit { max, .. } = v { Some(*max) } else { None });
        let Some(max) = max else {
            return Err(Stop::Unsupported("extract with a size into a header without varbit".into()));
        };
        if size > max as u128 {
            return Err(Stop::Reject("HeaderTooShort".into()));
        }
        if size % 8 != 0 {
            return Err(Stop::Reject("ParserInvalidArgument".into()));
        }
        let fixed: usize =
            fields.iter().map(|(_, v)| if let Value::Bits { width, .. } = v { *width as usize } else { 0 }).sum();
        if start + fixed + size as usize > data.len() * 8 {
            return Err(Stop::Reject("PacketTooShort".into()));
        }
        let mut cursor = start;
        for (_, v) in fields.iter_mut() {
            match v {
                Value::Bits { width, value, .. } => {
                    *value = read_bits(data, cursor, *width);
                    cursor += *width as usize;
                }
                Value::Varbit { len, bytes, .. } => {
                    *len = size as u32;
                    *bytes = (0..size as usize).step_by(8).map(|bit| read_bits(data, cursor + bit, 8) as u8).collect();
                    cursor += size as usize;
                }
                _ => {}
            }
        }
        *valid = true;
        cx.cursor = cursor;
        settle_union(cx, &root, &path);
        if into_next {
            path.pop();
            if let Value::Stack { next, .. } = walk(cx, &root, &path)? {
                *next += 1;
            }
        }
        Ok(Value::Void)
    }
}

impl Switch {
    /// Runs the action a table chose, with `data` from its entry or default: the arguments its
    /// action list binds (`actions = { a(hdr.x); }`, to the parameters with a direction) come
    /// first, evaluated now and copied back after, as a direct call's are.
    fn run_table_action(&mut self, cx: &mut Cx, t: &Table, a: &Action, data: &[u128]) -> Run<Value> {
        let bound: &[Expr] = t.actions.iter().find(|r| r.name.text == a.name.text).map_or(&[], |r| &r.args);
        let mut values = bound.iter().map(|e| self.eval(cx, e)).collect::<Run<Vec<_>>>()?;
        values.extend(data.iter().map(|d| Value::Number(*d as i128)));
        self.run_action(cx, a, values, Some(bound))
    }
}

/// The arguments of a default action or an entry that are the control plane's data: all of
/// them, or, where they also repeat what the action list binds, those after.
fn data_args<'e>(code: &Code, block: &str, r: &'e ActionRef) -> &'e [Expr] {
    let bound =
        find_action(code, block, &r.name.text).map_or(0, |a| a.params.iter().filter(|p| p.direction.is_some()).count());
    let all = find_action(code, block, &r.name.text).map_or(0, |a| a.params.len());
    if r.args.len() == all {
        &r.args[bound..]
    } else {
        &r.args
    }
}

/// A serializable enum's member: its value, of the enum's type.
fn ser_enum_member(ty: &Ty, members: &[(String, u128)], member: &str) -> Value {
    let value = members.iter().find(|(n, _)| n == member).map_or(0, |(_, v)| *v);
    match ty {
        Ty::Int(w) => Value::Bits { width: *w, signed: true, value: value & mask(*w) },
        Ty::Bit(w) => Value::bits(*w, value),
        _ => Value::Number(value as i128),
    }
}

/// `lookahead<H>()` of a header: `H` filled from the frame at the cursor and valid, the cursor
/// left where it was; a frame too short is error.PacketTooShort.
fn lookahead_header(cx: &Cx, mut header: Value) -> Run<Value> {
    let Value::Header { valid, fields } = &mut header else { return Err(Stop::Unsupported("lookahead".into())) };
    let bits: usize =
        fields.iter().map(|(_, v)| if let Value::Bits { width, .. } = v { *width as usize } else { 0 }).sum();
    if cx.cursor + bits > cx.data.len() * 8 {
        return Err(Stop::Reject("PacketTooShort".into()));
    }
    let mut at = cx.cursor;
    for (_, v) in fields.iter_mut() {
        if let Value::Bits { width, value, .. } = v {
            *value = read_bits(cx.data, at, *width);
            at += *width as usize;
        }
    }
    *valid = true;
    Ok(header)
}

/// The rank of the `i`th of a table's `n` entries (the higher wins here): its `@priority`, the
/// smaller the stronger, or else its place in the list, the first strongest.
fn entry_priority(e: &crate::frontend::ast::Entry, i: usize, n: i64) -> i64 {
    let p4_priority = e.priority.map_or(i as i64 + 1, |p| p.min(i64::MAX as u128 / 2) as i64);
    n + 1 - p4_priority
}

/// The most times a `for` loop's body runs for one frame: past it, the frame is dropped as
/// not run (a loop whose condition a frame keeps true must not hold the switch).
pub const LOOP_ITERATIONS_MAX: u32 = 1 << 16;

impl Switch {
    /// `for (init; cond; update) body`, its variables in a scope of their own; `break` ends it,
    /// `continue` goes on to `update`.
    fn run_for(&mut self, cx: &mut Cx, init: &[Stmt], cond: Option<&Expr>, update: &[Stmt], body: &[Stmt]) -> Run<()> {
        cx.scopes.push(Names::default());
        let ran = (|| {
            init.iter().try_for_each(|s| self.stmt(cx, s))?;
            for _ in 0..LOOP_ITERATIONS_MAX {
                if let Some(c) = cond {
                    if !self.eval(cx, c)?.as_bool() {
                        return Ok(());
                    }
                }
                match self.block_stmts(cx, body) {
                    Ok(()) | Err(Stop::Continue) => {}
                    Err(Stop::Break) => return Ok(()),
                    Err(other) => return Err(other),
                }
                update.iter().try_for_each(|s| self.stmt(cx, s))?;
            }
            Err(Stop::Unsupported(format!("a for loop past {LOOP_ITERATIONS_MAX} iterations")))
        })();
        cx.scopes.pop();
        ran
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A delete takes its entry out of the classifier and places no other (before, every delete
    /// built the classifier again: 10 ms for 10 000 routes, 100 s for a batch deleting them).
    #[test]
    fn a_delete_from_an_lpm_table_places_no_other_entry() {
        let source = "#include <edgeflow.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct h_t { eth_t eth; }
struct m_t { }
parser P(packet_in pk, out h_t hdr, inout m_t meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); transition accept; }
}
control I(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) {
    action to(bit<32> port) { sm.egress_port = port; }
    table routes { key = { hdr.eth.dst : lpm; } actions = { to; NoAction; } size = 4096; }
    apply { routes.apply(); }
}
control E(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out pk, in h_t hdr) { apply { pk.emit(hdr.eth); } }
EdgeflowSwitch(P(), I(), E(), D()) main;
";
        let (p, c) = crate::front_end("routes.p4", source).unwrap_or_else(|e| panic!("{e}"));
        let mut sw = Switch::new(p, c).unwrap();
        let routes: Vec<Match> = (0..1000u128)
            .map(|i| Match::Lpm { value: (i * 0x1_0000_0001) << 8, prefix: 8 + (i % 40) as u32 })
            .collect();
        let routes: Vec<Match> = routes
            .into_iter()
            .map(|m| match m {
                Match::Lpm { value, prefix } => Match::Lpm { value: value & !mask(48 - prefix) & mask(48), prefix },
                m => m,
            })
            .collect();
        for (i, m) in routes.iter().enumerate() {
            sw.insert("I.routes", vec![m.clone()], "to", vec![i as u128 % 512], 0).unwrap();
        }
        let placed = |sw: &Switch| sw.tables["I.routes"].classifier.placements;
        assert_eq!(placed(&sw), 1000);
        for m in routes.iter().step_by(3) {
            sw.delete("I.routes", std::slice::from_ref(m), 0).unwrap();
        }
        assert_eq!(placed(&sw), 1000, "a delete placed entries again");
        // And what is left is found as the scan finds it.
        let t = &sw.tables["I.routes"];
        for m in &routes {
            let Match::Lpm { value, .. } = m else { unreachable!() };
            for key in [*value, value | 0xff, value ^ 0x8000_0000] {
                assert_eq!(t.lookup(&[key]), t.scan(&[key]));
            }
        }
    }
}
