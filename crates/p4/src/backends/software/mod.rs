//! (About 1 140 lines, one concern: the state a compiled P4 program runs on and the control plane
//! changes, and loading it off the IR; running frames is `exec.rs`'s.)
//!
//! The software target: a lowered program run on frames, the reference the kernel back end is
//! held to (issue 36, item 2; `datapath/tests/p4_kernel.rs`). Frames run on the mid end's IR
//! compiled into closures (`exec.rs`; the architectures' drivers in `exec_arch.rs` for
//! edgeflow.p4 and v1model, `exec_psa.rs` for PSA). A program the IR does not compile is
//! refused by `Switch::load`, with the compiler's reason.
//!
//! This file is the state the compiled program runs on and the control plane changes: tables
//! (filled at run time by [`Switch::insert`], besides their const entries), counters,
//! registers, meters, AFDX accounts, multicast groups and clone sessions (`v1model.rs`), PSA's
//! extern instances (`psa.rs`), action profiles (`profile.rs`). Loading reads it all off the IR
//! too: table sizes, keys' widths, const entries, default actions' data and extern instances'
//! sizes and type arguments, as the mid end folded them. Nothing here reads the syntax tree
//! (`crate::driver` lowers it; `tests/midend.rs` holds every back end to that). Values are at
//! most 128 bits wide, held in a `u128`.
//!
//! About 1 130 lines, one concern: the switch's state and the control-plane API on it
//! (loading, entries, defaults, cells, groups, snapshots).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use crate::arch::Architecture;
use crate::midend::ir;

mod classifier;
mod exec;
mod exec_arch;
mod exec_psa;
mod keyed;
mod profile;
mod psa;
mod v1model;
mod value_set;
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

    /// Whether every number it holds fits a `width`-bit key (a prefix at most `width` long).
    fn fits(&self, width: u32) -> bool {
        let fits = |v: u128| v & !mask(width) == 0;
        match *self {
            Match::Exact(v) => fits(v),
            Match::Ternary { value, mask } => fits(value) && fits(mask),
            Match::Lpm { value, prefix } => fits(value) && prefix <= width,
            Match::Range { low, high } => fits(low) && fits(high),
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
    /// How many data parameters (the control plane's) each of `actions` takes.
    action_data: Vec<usize>,
    entries: Vec<Entry>,
    default: (String, Vec<u128>),
    /// The program fixed the default action (`const default_action`).
    default_const: bool,
    /// The default action the program gives, which a control plane's reset returns to.
    program_default: (String, Vec<u128>),
    /// The default action's place in `actions`, as `Entry::action_at`.
    default_at: usize,
    size: usize,
    /// Entries from the program (`const entries`): the control plane cannot change them.
    fixed: bool,
    /// Its direct meter (`meters = dm`, PSA's `psa_direct_meter = dm`): the instance, and
    /// whether it counts bytes.
    meter: Option<(String, bool)>,
    /// Its entries by tuple space (one hash per set of masks): the compiled target's lookup
    /// (the AFDX switch's table holds thousands).
    classifier: classifier::Classifier,
    /// The keys' widths, as the classifier reads them.
    widths: Vec<u32>,
}

impl TableState {
    /// How many data parameters `action` takes, if the table lists it.
    fn data_of(&self, table: &str, action: &str) -> Result<usize, String> {
        match self.actions.iter().position(|a| a == action) {
            Some(k) => Ok(self.action_data[k]),
            None => Err(format!("{table} has no action '{action}' (it has {})", self.actions.join(", "))),
        }
    }

    /// Entry `i` joins the classifier.
    fn index_entry(&mut self, i: usize) {
        self.classifier.insert(&self.entries, &self.widths, i);
    }

    /// The classifier built afresh (from the program's entries).
    fn reindex(&mut self) {
        self.widths = self.keys.iter().map(|(w, _)| *w).collect();
        self.classifier = classifier::Classifier::of(&self.entries, &self.widths);
    }

    /// The entry `key` finds: the classifier's answer.
    fn lookup(&self, key: &[u128]) -> Option<usize> {
        self.classifier.lookup(&self.entries, &self.widths, key)
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

struct Code {
    /// The lowered program: what the frames run (compiled), and what the kernel back end prints.
    ir: Arc<ir::Program>,
    /// What a control plane sees of it (P4Info's names and ids).
    info: Arc<crate::info::Info>,
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
    /// PSA's extern instances that have no cells (hashes, checksums, ...).
    externs: Keyed<psa::Extern>,
    /// Action profiles and selectors, by instance (`Block.name`, `.name` at the top level, or
    /// the table's name for one constructed in its property).
    profiles: Names<String, Profile>,
    /// The parsers' value sets and their members (`value_set.rs`).
    value_sets: Keyed<value_set::ValueSetState>,
    /// Moves on every change a control plane makes (entries, defaults, groups, counter,
    /// register and meter cells), so that a copy elsewhere (the kernel's) knows to follow.
    generation: u64,
    /// What the frames run since the last [`Switch::take_digests`] sent the control plane.
    digests: Vec<Digest>,
    /// The program compiled from the mid end's IR (`exec.rs`), which runs the frames: `None`
    /// only while `Switch::new` loads the state it is compiled against.
    compiled: Option<Arc<exec_arch::Program>>,
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

impl Switch {
    /// The software target for a lowered program, with empty tables; `info` is what a control
    /// plane sees of it. (`Switch::new`, in `crate::driver`, takes the front end's output and
    /// lowers it first.) The state is made from the IR: instances first, then each table.
    pub fn load(ir: ir::Program, info: Arc<crate::info::Info>) -> Result<Switch, String> {
        if Architecture::of_ir(&ir).is_none() {
            let other = &ir.package;
            return Err(format!(
                "the software target runs EdgeflowSwitch, V1Switch and PSA_Switch programs, not {other}"
            ));
        }
        let mut sw = Switch {
            code: Arc::new(Code { ir: Arc::new(ir), info }),
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
            externs: Keyed::default(),
            profiles: Names::default(),
            value_sets: Keyed::default(),
            generation: 0,
            digests: Vec::new(),
            compiled: None,
            exec_slots: Vec::new(),
            exec_keys: Vec::new(),
            exec_bytes: Vec::new(),
            exec_out: Vec::new(),
        };
        let code = sw.code.clone();
        let ir = &*code.ir;
        // Two instances of one control share its state, under its declaration's names (as
        // P4Info names them): the first made is kept.
        let mut made = std::collections::HashSet::new();
        for i in &ir.instances {
            let key = ir.control_name(&i.name);
            if made.insert(key.clone()) {
                sw.instance(ir, key, i);
            }
        }
        for t in &ir.tables {
            let key = ir.control_name(&t.name);
            if sw.tables.get(&key).is_none() {
                let state = sw.table_state(ir, &key, t)?;
                sw.tables.insert(key, state);
            }
        }
        sw.value_sets = value_set::declared(ir).into_iter().collect();
        // What the IR does not express yet (an extern function without a body) is refused here,
        // with the compiler's reason, rather than on each frame.
        sw.compiled = Some(exec_arch::compile(&sw)?);
        Ok(sw)
    }

    /// Table `t`'s state, as the control plane knows it by `name` (`Block.table`): its keys'
    /// widths and match kinds, its actions by their P4 names, its default and its constant
    /// entries, all constants the mid end folded.
    fn table_state(&mut self, ir: &ir::Program, name: &str, t: &ir::Table) -> Result<TableState, String> {
        let short = name.rsplit('.').next().unwrap_or(name);
        let mut keys = Vec::new();
        let mut selector_keys = Vec::new();
        for (i, k) in t.keys.iter().enumerate() {
            if k.match_kind == "selector" {
                selector_keys.push(i);
                continue;
            }
            let width = match crate::midend::code::expr_ty(&k.value) {
                ir::Ty::Bit(w) | ir::Ty::Int(w) => w,
                ir::Ty::Bool => 1,
                other => return Err(format!("{short}: keys of type {other} are not run by the software target yet")),
            };
            keys.push((width, k.match_kind.clone()));
        }
        let number = |e: &ir::Expr| match e {
            ir::Expr::Const { value, .. } => Ok(*value),
            ir::Expr::Bool(b) => Ok(*b as u128),
            _ => Err(format!("{short}: a value that is not a constant")),
        };
        let numbers = |args: &[ir::Expr]| args.iter().map(number).collect::<Result<Vec<_>, _>>();
        let actions: Vec<String> = t.actions.iter().map(|a| action_name(ir, a.action)).collect();
        let action_data = t.actions.iter().map(|a| data_params(&ir.actions[a.action])).collect();
        let default = (action_name(ir, t.default_action.0), numbers(&t.default_action.1)?);
        let mut entries = Vec::new();
        let n = t.entries.len() as i64;
        for e in &t.entries {
            let keysets = e.keys.iter().enumerate().filter(|(i, _)| !selector_keys.contains(i));
            let mut matches = Vec::new();
            for ((_, k), (width, kind)) in keysets.zip(&keys) {
                matches.push(match *k {
                    ir::Keyset::Any => Match::Any,
                    ir::Keyset::Value(v) if kind == "lpm" => Match::Lpm { value: v & mask(*width), prefix: *width },
                    ir::Keyset::Value(v) => Match::Exact(v & mask(*width)),
                    ir::Keyset::Mask(value, mask) => Match::Ternary { value, mask },
                    ir::Keyset::Range(low, high) => Match::Range { low, high },
                    ir::Keyset::ValueSet(_) => return Err(format!("{short}: a value set in a table's entry")),
                });
            }
            let action = action_name(ir, e.action);
            entries.push(Entry {
                keys: matches,
                // The higher wins here; P4's priority (the mid end's) is the smaller.
                priority: n + 1 - e.priority,
                action_at: action_at(&actions, &action),
                action,
                args: numbers(&e.args)?,
                packets: 0,
                bytes: 0,
                meter: MeterCell::default(),
                indirect: None,
            });
        }
        let property = |p: &str| t.properties.iter().find(|(q, _)| q == p).map(|(_, instance)| instance);
        let meter = property("meters").or_else(|| property("psa_direct_meter")).map(|instance| {
            let key = ir.control_name(instance);
            let bytes = self.direct_meters.get(&key).copied().unwrap_or(false);
            (key, bytes)
        });
        let profile = match property("implementation").or_else(|| property("psa_implementation")) {
            None => None,
            Some(instance) => Some(self.table_profile_of(name, &ir.control_name(instance))?),
        };
        let mut state = TableState {
            keys,
            selector_keys,
            profile,
            meter,
            default_at: action_at(&actions, &default.0),
            actions,
            action_data,
            fixed: !entries.is_empty() && t.entries_const,
            entries,
            program_default: default.clone(),
            default,
            default_const: t.default_const,
            size: t.size.map_or(1024, |s| s as usize),
            classifier: classifier::Classifier::new(),
            widths: Vec::new(),
        };
        state.reindex();
        Ok(state)
    }

    /// The state of extern instance `i`, kept as `key` (`Block.name`, `.name`): cells for
    /// counters, registers, meters and accounts, PSA's externs without cells, action profiles.
    /// Other instances (blocks, the package) have none.
    fn instance(&mut self, ir: &ir::Program, key: String, i: &ir::Instance) {
        let size = i.args.first().map_or(0, |a| arg_number(a) as usize);
        // PSA's externs, by the names v1model's have (their cells are kept alike).
        let kind = match i.ty.as_str() {
            "Counter" => "counter",
            "Register" => "register",
            "Meter" => "meter",
            "DirectCounter" => "direct_counter",
            "DirectMeter" => "direct_meter",
            other => other,
        };
        if matches!(kind, "Hash" | "Checksum" | "InternetChecksum" | "Random" | "Digest") {
            let args = i.args.iter().map(|a| arg_value(ir, a)).collect::<Vec<_>>();
            self.psa_instance(&key, kind, &args);
            return;
        }
        if let Some(profile) = self.new_profile(ir, kind, &i.args, &i.annotations) {
            self.profiles.insert(key, profile);
            return;
        }
        let counts_bytes = |arg: Option<&ir::Arg>| {
            matches!(arg, Some(ir::Arg::Member { enumeration, index })
            if ir.enums[*enumeration].members[*index].eq_ignore_ascii_case("bytes"))
        };
        match kind {
            "counter" => {
                self.counters.insert(key, vec![(0, 0); size]);
            }
            "register" => {
                let cell = i.type_args.first().cloned().unwrap_or(ir::Ty::Bit(32));
                let zero = default_of(ir, &cell);
                self.registers.insert(key, vec![zero; size]);
            }
            "afdx_account" => {
                self.accounts.insert(key, vec![(u128::MAX, 0); size]);
            }
            "direct_meter" => {
                self.direct_meters.insert(key, counts_bytes(i.args.first()));
            }
            "meter" => {
                let bytes = counts_bytes(i.args.get(1));
                self.meters.insert(key, Meter { bytes, cells: vec![MeterCell::default(); size] });
            }
            _ => {}
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

    /// `table`'s default action as the program gives it (P4Runtime's reset of a default entry).
    /// A fresh `Switch::new` cannot say: the checker's types are keyed to the tree it checked,
    /// so a clone of the program does not compile.
    pub fn program_default_action(&self, table: &str) -> Option<(&str, &[u128])> {
        let t = self.tables.get(table)?;
        Some((&t.program_default.0, &t.program_default.1))
    }

    /// Sets `table`'s default action, unless the program fixed it (`const default_action`).
    pub fn set_default_action(&mut self, table: &str, action: &str, args: Vec<u128>) -> Result<(), String> {
        let t = self.tables.get_mut(table).ok_or_else(|| format!("no table '{table}'"))?;
        if t.default_const {
            return Err(format!("{table}: its default action is the program's (const default_action)"));
        }
        let data = t.data_of(table, action)?;
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
    /// (`datapath/tests/p4_corpus.rs` compares the kernel's with the software target's).
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
        let t = self.tables.get_mut(table).ok_or_else(|| format!("no table '{table}'"))?;
        if let Some(profile) = &t.profile {
            return Err(format!("{table}'s entries are members or groups of {profile}, not actions"));
        }
        let data = t.data_of(table, action)?;
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
            let kind_takes_it = match m {
                Match::Exact(_) | Match::Range { .. } => true,
                Match::Lpm { .. } => kind == "lpm",
                Match::Ternary { .. } => kind == "ternary",
                Match::Any => matches!(kind.as_str(), "ternary" | "lpm"),
            };
            if !(kind_takes_it && m.fits(*width)) {
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

    /// The lowered program this switch runs: what the kernel back end prints
    /// (`backends::ebpf::generate_ir`), so that both run one IR.
    pub fn ir(&self) -> &ir::Program {
        &self.code.ir
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

    /// Runs `frame`, arrived on `port` at `now` (ns), through the program.
    pub fn process(&mut self, frame: &[u8], port: u32, now: u64) -> Result<Vec<Output>, Dropped> {
        let program = self.compiled.clone().expect("Switch::new compiles the program");
        self.process_compiled(&program, frame, port, now)
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
            externs: self.externs.clone(),
            profiles: self.profiles.clone(),
            value_sets: self.value_sets.clone(),
            generation: self.generation,
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

// What loading reads off the IR.

/// An action's name as its tables list it (the IR qualifies it by its block's instance path).
fn action_name(ir: &ir::Program, action: usize) -> String {
    let qualified = &ir.actions[action].name;
    qualified.rsplit('.').next().unwrap_or(qualified).to_string()
}

/// How many of an action's parameters are the control plane's data (those without a direction).
fn data_params(action: &ir::Action) -> usize {
    action.params.len() - action.bound
}

/// A constructor argument as a number: a size (0 where it is not a number).
fn arg_number(arg: &ir::Arg) -> u128 {
    match arg {
        ir::Arg::Number { value, .. } => *value,
        ir::Arg::Bool(b) => *b as u128,
        ir::Arg::Member { index, .. } => *index as u128,
        ir::Arg::Other(_) => 0,
    }
}

/// A constructor argument as PSA's externs take it: an enum member by its name.
fn arg_value(ir: &ir::Program, arg: &ir::Arg) -> Value {
    match arg {
        ir::Arg::Number { value, width: Some(w) } => Value::bits(*w, *value),
        ir::Arg::Number { value, width: None } => Value::Number(*value as i128),
        ir::Arg::Bool(b) => Value::Bool(*b),
        ir::Arg::Member { enumeration, index } => Value::Enum(ir.enums[*enumeration].members[*index].clone()),
        ir::Arg::Other(_) => Value::Void,
    }
}

/// A value of type `ty` as P4 starts it: zero bits, false, headers invalid, the first member.
fn default_of(ir: &ir::Program, ty: &ir::Ty) -> Value {
    let fields = |i: usize| -> Vec<(Name, Value)> {
        ir.aggregates[i].fields.iter().map(|(n, t)| (Name::from(n.as_str()), default_of(ir, t))).collect()
    };
    match ty {
        ir::Ty::Bit(w) => Value::Bits { width: *w, signed: false, value: 0 },
        ir::Ty::Int(w) => Value::Bits { width: *w, signed: true, value: 0 },
        ir::Ty::Bool => Value::Bool(false),
        ir::Ty::Error => Value::Error("NoError".into()),
        ir::Ty::Enum(i) => Value::Enum(ir.enums[*i].members.first().cloned().unwrap_or_default()),
        ir::Ty::Header(i) => Value::Header { valid: false, fields: fields(*i) },
        ir::Ty::Struct(i) => Value::Struct(fields(*i)),
        ir::Ty::Union(i) => Value::Union(fields(*i)),
        ir::Ty::Stack(elem, n) => Value::Stack { next: 0, elems: vec![default_of(ir, elem); *n as usize] },
        ir::Ty::Varbit(max) => Value::Varbit { max: *max, len: 0, bytes: Vec::new() },
        ir::Ty::Tuple(items) => Value::List(items.iter().map(|t| default_of(ir, t)).collect()),
        ir::Ty::Opaque(_) => Value::Void,
    }
}

/// The most times a `for` loop's body runs for one frame: past it, the frame is dropped as
/// not run (a loop whose condition a frame keeps true must not hold the switch).
pub const LOOP_ITERATIONS_MAX: u32 = 1 << 16;

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
                assert_eq!(t.lookup(&[key]), classifier::scan(&t.entries, &t.widths, &[key]));
            }
        }
    }
}
