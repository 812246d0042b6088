//! What a control plane sees of a checked program: its tables, actions and extern instances,
//! each with the name and numeric id P4Runtime's P4Info gives it, and the widths of the values
//! it carries. Pure data; `crates/p4runtime` turns it into the P4Info message.
//!
//! Names follow p4c's, so that a client written against a p4c-compiled program finds the same
//! ones here: a table or an extern instance is `Block.name`, an action declared in a control
//! `Block.action` and one declared at the top level (`NoAction`) its bare name, a key field the
//! text of its expression (`hdr.ethernet.dst`). `@name("x")` renames (`"x"` within the block,
//! `".x"` from the top level); `@id(n)` fixes an id. Other ids are a hash of the name under the
//! kind's prefix byte (P4Runtime's `P4Ids`), so they stay put while the program changes
//! elsewhere.
//!
//! About 800 lines, one concern: the naming and numbering of what P4Info shows, kind by kind,
//! which share one id scheme and one name resolution.

use std::collections::{BTreeSet, HashMap};

use crate::frontend::ast::{annotation_int, annotation_str, Annotation, Decl, Expr, ExprKind, Local, Program, Type};
use crate::frontend::ast::{BinOp, UnOp};
use crate::frontend::check::{Checked, Layout, Ty};

/// P4Runtime's id prefixes (`p4.config.v1.P4Ids.Prefix`).
pub const ACTION: u8 = 0x01;
pub const TABLE: u8 = 0x02;
pub const VALUE_SET: u8 = 0x03;
pub const COUNTER: u8 = 0x12;
pub const DIRECT_COUNTER: u8 = 0x13;
pub const METER: u8 = 0x14;
pub const DIRECT_METER: u8 = 0x15;
pub const REGISTER: u8 = 0x16;
pub const DIGEST: u8 = 0x17;
pub const ACTION_PROFILE: u8 = 0x11;
pub const CONTROLLER_HEADER: u8 = 0x04;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preamble {
    pub id: u32,
    pub name: String,
    /// The shortest dotted suffix of the name no other object of its kind ends with.
    pub alias: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyField {
    /// From 1, in the key's order.
    pub id: u32,
    pub name: String,
    pub bitwidth: u32,
    /// `exact`, `ternary`, `lpm` or `range`.
    pub match_kind: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableInfo {
    pub preamble: Preamble,
    /// Its name in the software target (`run::Switch`): `Block.table`.
    pub target: String,
    pub keys: Vec<KeyField>,
    pub action_ids: Vec<u32>,
    /// The default action, and whether the program fixed it (`const default_action`).
    pub default_action: Option<(u32, bool)>,
    pub size: u64,
    /// Its entries are the program's (`const entries`).
    pub is_const: bool,
    pub direct_counter: Option<u32>,
    pub direct_meter: Option<u32>,
    /// Its action profile or selector (`implementation = ...`): its entries then hold members
    /// or groups of it, not actions. Its `selector` keys are not among `keys`: they are hashed
    /// to pick a group's member, not matched.
    pub implementation: Option<u32>,
}

/// An action profile (v1model's `action_profile`, PSA's `ActionProfile`) or selector
/// (`action_selector`, `ActionSelector`): members (an action and its data) that tables' entries
/// share, and for a selector groups of members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileInfo {
    pub preamble: Preamble,
    /// Its name in the software target: `Block.instance`, `.instance` at the top level, or for
    /// one constructed in a table's property the table's (`Block.table`).
    pub target: String,
    pub table_ids: Vec<u32>,
    pub with_selector: bool,
    /// How many members it holds.
    pub size: u64,
    /// `@max_group_size(n)` on the instance; 0 when it says none (any group up to `size`).
    pub max_group_size: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub id: u32,
    pub name: String,
    pub bitwidth: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionInfo {
    pub preamble: Preamble,
    /// Its name in the software target: the action's own.
    pub target: String,
    pub params: Vec<Param>,
}

/// What a counter or meter counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Packets,
    Bytes,
    Both,
}

/// A counter, meter or register instance, direct ones included.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternInfo {
    pub preamble: Preamble,
    /// Its name in the software target: `Block.instance`.
    pub target: String,
    pub unit: Unit,
    /// Cells (0 for a direct one: one per entry).
    pub size: u64,
    /// A direct one's table id.
    pub table: Option<u32>,
    /// A register's cell width.
    pub bitwidth: u32,
}

/// A header annotated `@controller_header("packet_in")` or `("packet_out")`: its fields are a
/// packet-in's or packet-out's metadata, in order, ids from 1 (P4Info's
/// `controller_packet_metadata`, named by the annotation's argument as p4c names it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerHeader {
    pub preamble: Preamble,
    pub metadata: Vec<Param>,
}

impl ControllerHeader {
    /// Its length on the wire, in whole bytes (a header's fields add up to whole bytes).
    pub fn bytes(&self) -> usize {
        (self.metadata.iter().map(|m| m.bitwidth as usize).sum::<usize>()).div_ceil(8)
    }
}

/// A parser's `value_set<T>(size)`: its members are matches of `keys`, one per field of `T` (a
/// bare `bit<W>` is one field without a name), at most `size` of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueSetInfo {
    pub preamble: Preamble,
    /// Its name in the software target: `Parser.name`.
    pub target: String,
    pub keys: Vec<KeyField>,
    pub size: u64,
}

/// What a program sends the control plane with v1model's `digest<T>(receiver, data)` (named by
/// `T`, as p4c names it) or a PSA `Digest<T>` instance (named as instances are): the members of
/// `T`, each a bitstring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DigestInfo {
    pub preamble: Preamble,
    /// Its name in the software target (`software::Digest::name`): `T` for v1model,
    /// `Block.instance` for PSA.
    pub target: String,
    /// `T`, the struct P4Info's type information describes.
    pub type_name: String,
    pub members: Vec<Param>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Info {
    /// The architecture `main` instantiates (None: a package no back end runs).
    pub architecture: Option<crate::arch::Architecture>,
    pub controller_headers: Vec<ControllerHeader>,
    pub digests: Vec<DigestInfo>,
    pub tables: Vec<TableInfo>,
    pub actions: Vec<ActionInfo>,
    pub counters: Vec<ExternInfo>,
    pub direct_counters: Vec<ExternInfo>,
    pub meters: Vec<ExternInfo>,
    pub direct_meters: Vec<ExternInfo>,
    pub registers: Vec<ExternInfo>,
    pub action_profiles: Vec<ProfileInfo>,
    pub value_sets: Vec<ValueSetInfo>,
}

impl Info {
    pub fn table(&self, id: u32) -> Option<&TableInfo> {
        self.tables.iter().find(|t| t.preamble.id == id)
    }
    pub fn action(&self, id: u32) -> Option<&ActionInfo> {
        self.actions.iter().find(|a| a.preamble.id == id)
    }
    pub fn action_named(&self, target: &str) -> Option<&ActionInfo> {
        self.actions.iter().find(|a| a.target == target)
    }
    /// The `@controller_header` of that name (`packet_in`, `packet_out`).
    pub fn controller_header(&self, name: &str) -> Option<&ControllerHeader> {
        self.controller_headers.iter().find(|c| c.preamble.name == name)
    }
    pub fn digest(&self, id: u32) -> Option<&DigestInfo> {
        self.digests.iter().find(|d| d.preamble.id == id)
    }
    pub fn digest_named(&self, target: &str) -> Option<&DigestInfo> {
        self.digests.iter().find(|d| d.target == target)
    }
    pub fn value_set(&self, id: u32) -> Option<&ValueSetInfo> {
        self.value_sets.iter().find(|v| v.preamble.id == id)
    }
    pub fn action_profile(&self, id: u32) -> Option<&ProfileInfo> {
        self.action_profiles.iter().find(|p| p.preamble.id == id)
    }
}

/// The fields of a header or struct `name`, each a bitstring of its width.
/// The fields of header or struct `name`, numbered from 1; a nested struct's or header's fields
/// take its place, named `outer.inner`: a digest's data is flat in P4Info and in the data a
/// DigestList carries (the software target packs it so: `exec::externs::digest_members`).
fn members(checked: &Checked, name: &str) -> Vec<Param> {
    let mut out = Vec::new();
    flat_members(checked, name, "", &mut out);
    out
}

fn flat_members(checked: &Checked, name: &str, prefix: &str, out: &mut Vec<Param>) {
    let Some(Layout::Header(fields) | Layout::Struct(fields)) = checked.layouts.get(name) else { return };
    for (n, t) in fields {
        match t {
            Ty::Struct(inner) | Ty::Header(inner) => flat_members(checked, inner, &format!("{prefix}{n}."), out),
            _ => out.push(Param { id: out.len() as u32 + 1, name: format!("{prefix}{n}"), bitwidth: width(t) }),
        }
    }
}

/// The type name a v1model `digest` call's data has: its type argument, or the type of a field
/// of the block's parameters (`meta.learn`).
pub fn digest_type(
    program: &Program,
    checked: &Checked,
    block: &str,
    type_args: &[Type],
    data: &Expr,
) -> Option<String> {
    let ty = match type_args.first() {
        Some(t) => checked.resolve(t),
        None => key_type(program, checked, block, data)?,
    };
    match ty {
        Ty::Struct(n) | Ty::Header(n) => Some(n),
        _ => None,
    }
}

/// Every `digest(...)` call in `stmts`: (its type arguments, its data).
fn digest_calls<'p>(stmts: &'p [crate::frontend::ast::Stmt], found: &mut Vec<(&'p [Type], &'p Expr)>) {
    use crate::frontend::ast::Stmt;
    for s in stmts {
        match s {
            Stmt::Call(Expr { kind: ExprKind::Call { callee, type_args, args }, .. })
                if matches!(&callee.kind, ExprKind::Name(n) if n == "digest") && args.len() == 2 =>
            {
                found.push((type_args, &args[1]))
            }
            Stmt::If { then, otherwise, .. } => {
                digest_calls(then, found);
                digest_calls(otherwise.as_deref().unwrap_or(&[]), found);
            }
            Stmt::Block(b) => digest_calls(b, found),
            Stmt::Switch { cases, .. } => {
                cases.iter().for_each(|(_, b)| digest_calls(b.as_deref().unwrap_or(&[]), found))
            }
            Stmt::For { body, .. } => digest_calls(body, found),
            _ => {}
        }
    }
}

/// The static type of an expression made of the block's parameters, their members and constant
/// slices: what a table key is.
pub fn key_type(program: &Program, checked: &Checked, block: &str, e: &Expr) -> Option<Ty> {
    match &e.kind {
        ExprKind::Name(n) => {
            let params = program.decls.iter().find_map(|d| match d {
                Decl::Control { name, params, .. } | Decl::Parser { name, params, .. } if name.text == block => {
                    Some(params)
                }
                _ => None,
            })?;
            params.iter().find(|p| p.name.text == *n).map(|p| checked.resolve(&p.ty))
        }
        ExprKind::Member(inner, m) => {
            let fields = match key_type(program, checked, block, inner)? {
                Ty::Header(h) | Ty::Struct(h) | Ty::Union(h) => match checked.layouts.get(&h)? {
                    Layout::Header(f) | Layout::Struct(f) | Layout::Union(f) => f.clone(),
                    _ => return None,
                },
                _ => return None,
            };
            fields.into_iter().find(|(n, _)| *n == m.text).map(|(_, t)| t)
        }
        ExprKind::Slice(_, hi, lo) => match (&hi.kind, &lo.kind) {
            (ExprKind::Int { value: h, .. }, ExprKind::Int { value: l, .. }) => Some(Ty::Bit((h - l + 1) as u32)),
            _ => None,
        },
        // Keys computed from fields (`f & mask`, `f - 10`, `(bit<8>) f`, a constant): the
        // type the checker gave the operation, read off its operands.
        ExprKind::Int { width: Some((w, signed)), .. } => Some(if *signed { Ty::Int(*w) } else { Ty::Bit(*w) }),
        ExprKind::Bool(_) => Some(Ty::Bool),
        ExprKind::Cast(t, _) => Some(checked.resolve(t)),
        ExprKind::Unary(UnOp::Not, _) => Some(Ty::Bool),
        ExprKind::Unary(_, inner) => key_type(program, checked, block, inner),
        ExprKind::Binary(op, a, b) => match op {
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::And | BinOp::Or => {
                Some(Ty::Bool)
            }
            BinOp::Concat => match (key_type(program, checked, block, a)?, key_type(program, checked, block, b)?) {
                (Ty::Bit(x) | Ty::Int(x), Ty::Bit(y) | Ty::Int(y)) => Some(Ty::Bit(x + y)),
                _ => None,
            },
            BinOp::Shl | BinOp::Shr => key_type(program, checked, block, a),
            _ => key_type(program, checked, block, a).or_else(|| key_type(program, checked, block, b)),
        },
        ExprKind::Cond(_, a, b) => {
            key_type(program, checked, block, a).or_else(|| key_type(program, checked, block, b))
        }
        ExprKind::Call { callee, .. } => match &callee.kind {
            ExprKind::Member(_, m) if m.text == "isValid" => Some(Ty::Bool),
            _ => None,
        },
        // A header stack's element, `hdr.tags[0].vid`.
        ExprKind::Index(inner, _) => match key_type(program, checked, block, inner)? {
            Ty::Stack(elem, _) => Some(*elem),
            _ => None,
        },
        _ => None,
    }
}

/// A key expression as p4c names its match field.
fn expr_text(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Name(n) => n.clone(),
        ExprKind::TopName(n) => format!(".{n}"),
        ExprKind::Member(inner, m) => format!("{}.{}", expr_text(inner), m.text),
        ExprKind::Slice(inner, hi, lo) => format!("{}[{}:{}]", expr_text(inner), expr_text(hi), expr_text(lo)),
        ExprKind::Index(inner, i) => format!("{}[{}]", expr_text(inner), expr_text(i)),
        ExprKind::Int { value, .. } => value.to_string(),
        ExprKind::Call { callee, args, .. } if args.is_empty() => format!("{}()", expr_text(callee)),
        _ => "key".to_string(),
    }
}

fn width(ty: &Ty) -> u32 {
    match ty {
        Ty::Bit(w) | Ty::Int(w) => *w,
        Ty::Bool => 1,
        _ => 0,
    }
}

/// Ids as P4Runtime wants them: unique, under their kind's prefix.
#[derive(Default)]
struct Ids {
    taken: BTreeSet<u32>,
}

impl Ids {
    /// `@id(n)` if given (its low 24 bits under `prefix`), else a hash of `name`, moved past any
    /// id taken already.
    fn assign(&mut self, prefix: u8, name: &str, annotations: &[Annotation]) -> Result<u32, String> {
        let high = (prefix as u32) << 24;
        if let Some(n) = annotation_int(annotations, "id") {
            let id = if n >> 24 == 0 { high | n as u32 } else { n as u32 };
            if id >> 24 != prefix as u32 || n > u32::MAX as u128 {
                return Err(format!("{name}: @id({n:#x}) is not an id of its kind (prefix {prefix:#04x})"));
            }
            if !self.taken.insert(id) {
                return Err(format!("{name}: @id({n:#x}) is taken"));
            }
            return Ok(id);
        }
        // FNV-1a: a stable spread of names over the 24 bits a kind has.
        let mut hash: u32 = 0x811c_9dc5;
        for b in name.bytes() {
            hash = (hash ^ b as u32).wrapping_mul(0x0100_0193);
        }
        let mut low = hash & 0x00ff_ffff;
        loop {
            let id = high | low.max(1);
            if self.taken.insert(id) {
                return Ok(id);
            }
            low = (low + 1) & 0x00ff_ffff;
        }
    }
}

/// The scope p4c names a block's objects in: an architecture block by its name, a control or
/// parser the program instantiates once by its instance's path (`ingress.c`); else its name.
fn scope(program: &Program, checked: &Checked, block: &str) -> String {
    if checked.blocks.iter().any(|b| b == block) {
        return block.to_string();
    }
    let mut instances = program.decls.iter().filter_map(|d| match d {
        Decl::Control { name, locals, .. } | Decl::Parser { name, locals, .. } => Some((name, locals)),
        _ => None,
    });
    let found: Vec<(String, String)> = instances
        .by_ref()
        .flat_map(|(owner, locals)| {
            locals.iter().filter_map(move |l| match l {
                Local::Instance(i) if matches!(&i.ty, Type::Named(t, _) if t.text == block) => {
                    Some((owner.text.clone(), i.name.text.clone()))
                }
                _ => None,
            })
        })
        .collect();
    match found.as_slice() {
        [(owner, instance)] if owner != block => format!("{}.{instance}", scope(program, checked, owner)),
        _ => block.to_string(),
    }
}

/// A name as p4c gives it: `@name` first, else `scope.local` (or `local` at the top level).
fn qualified(scope: Option<&str>, local: &str, annotations: &[Annotation]) -> String {
    match (annotation_str(annotations, "name"), scope) {
        (Some(n), _) if n.starts_with('.') => n[1..].to_string(),
        (Some(n), Some(s)) => format!("{s}.{n}"),
        (Some(n), None) => n.to_string(),
        (None, Some(s)) => format!("{s}.{local}"),
        (None, None) => local.to_string(),
    }
}

/// Aliases for a kind's names: the shortest dotted suffix that only one name ends with.
fn aliases(names: &[String]) -> Vec<String> {
    names
        .iter()
        .map(|name| {
            let parts: Vec<&str> = name.split('.').collect();
            (1..=parts.len())
                .map(|n| parts[parts.len() - n..].join("."))
                .find(|suffix| names.iter().filter(|o| *o == suffix || o.ends_with(&format!(".{suffix}"))).count() == 1)
                .unwrap_or_else(|| name.clone())
        })
        .collect()
}

fn set_aliases<T>(items: &mut [T], preamble: impl Fn(&mut T) -> &mut Preamble) {
    let names: Vec<String> = items.iter_mut().map(|i| preamble(i).name.clone()).collect();
    for (item, alias) in items.iter_mut().zip(aliases(&names)) {
        preamble(item).alias = alias;
    }
}

fn preamble(ids: &mut Ids, prefix: u8, name: String, annotations: &[Annotation]) -> Result<Preamble, String> {
    Ok(Preamble { id: ids.assign(prefix, &name, annotations)?, alias: name.clone(), name })
}

/// A constant argument (a size, a `CounterType.x`), as the checker accepted it.
fn const_number(e: &Expr, consts: &HashMap<&str, &Expr>) -> Option<u64> {
    match &e.kind {
        ExprKind::Int { value, .. } => Some(*value as u64),
        ExprKind::Name(n) => const_number(consts.get(n.as_str())?, consts),
        ExprKind::Cast(_, inner) => const_number(inner, consts),
        _ => None,
    }
}

fn unit_of(e: Option<&Expr>) -> Unit {
    match e.map(|e| &e.kind) {
        Some(ExprKind::Member(_, m)) if m.text.eq_ignore_ascii_case("bytes") => Unit::Bytes,
        Some(ExprKind::Member(_, m)) if m.text.eq_ignore_ascii_case("packets") => Unit::Packets,
        _ => Unit::Both,
    }
}

/// Whether an extern type is an action selector (`Some(true)`), a plain action profile
/// (`Some(false)`), or neither.
pub fn profile_kind(extern_type: &str) -> Option<bool> {
    match extern_type {
        "action_profile" | "ActionProfile" => Some(false),
        "action_selector" | "ActionSelector" => Some(true),
        _ => None,
    }
}

/// A table's `implementation` (v1model) or `psa_implementation` (PSA) property.
pub fn implementation_of(t: &crate::frontend::ast::Table) -> Option<&Expr> {
    t.properties
        .iter()
        .find(|(p, _)| matches!(p.text.as_str(), "implementation" | "psa_implementation"))
        .map(|(_, e)| e)
}

/// The annotations on a table's `implementation` or `psa_implementation` property.
pub fn implementation_annotations(t: &crate::frontend::ast::Table) -> &[Annotation] {
    let found =
        t.property_annotations.iter().find(|(p, _)| matches!(p.as_str(), "implementation" | "psa_implementation"));
    found.map_or(&[], |(_, a)| a.as_slice())
}

/// The control plane's view of a program the checker accepted.
pub fn info(program: &Program, checked: &Checked) -> Result<Info, String> {
    let mut info = Info { architecture: crate::arch::Architecture::of(checked), ..Info::default() };
    let mut ids = Ids::default();
    let consts: HashMap<&str, &Expr> = program
        .decls
        .iter()
        .filter_map(|d| match d {
            Decl::Const { name, value, .. } => Some((name.text.as_str(), value)),
            _ => None,
        })
        .collect();
    // Actions first: tables refer to them by id. Top-level ones only where a table uses them.
    let used: BTreeSet<&str> = program
        .decls
        .iter()
        .filter_map(|d| match d {
            Decl::Control { locals, .. } => Some(locals),
            _ => None,
        })
        .flatten()
        .filter_map(|l| match l {
            Local::Table(t) => Some(t),
            _ => None,
        })
        .flat_map(|t| t.actions.iter().map(|a| a.name.text.as_str()))
        .collect();
    let mut add_action =
        |info: &mut Info, scope: Option<&str>, a: &crate::frontend::ast::Action| -> Result<(), String> {
            let name = qualified(scope, &a.name.text, &a.annotations);
            let mut params = Vec::new();
            for p in a.params.iter().filter(|p| p.direction.is_none()) {
                params.push(Param {
                    id: params.len() as u32 + 1,
                    name: annotation_str(&p.annotations, "name").unwrap_or(&p.name.text).to_string(),
                    bitwidth: width(&checked.resolve(&p.ty)),
                });
            }
            info.actions.push(ActionInfo {
                preamble: preamble(&mut ids, ACTION, name, &a.annotations)?,
                target: a.name.text.clone(),
                params,
            });
            Ok(())
        };
    for d in &program.decls {
        match d {
            Decl::Action(a) if used.contains(a.name.text.as_str()) => add_action(&mut info, None, a)?,
            Decl::Control { name, locals, .. } => {
                for l in locals {
                    if let Local::Action(a) = l {
                        add_action(&mut info, Some(&scope(program, checked, &name.text)), a)?;
                    }
                }
            }
            _ => {}
        }
    }
    // Action profiles and selectors declared as instances, at the top level or in a control.
    for d in &program.decls {
        let (block, instances): (Option<&str>, Vec<&crate::frontend::ast::Instance>) = match d {
            Decl::Instance(i) => (None, vec![i]),
            Decl::Control { name, locals, .. } => (
                Some(&name.text),
                locals
                    .iter()
                    .filter_map(|l| match l {
                        Local::Instance(i) => Some(i),
                        _ => None,
                    })
                    .collect(),
            ),
            _ => continue,
        };
        for i in instances {
            let Type::Named(ty, _) = &i.ty else { continue };
            let Some(with_selector) = profile_kind(&ty.text) else { continue };
            let scope = block.map(|b| scope(program, checked, b));
            let name = qualified(scope.as_deref(), &i.name.text, &i.annotations);
            let size_arg = if with_selector { 1 } else { 0 };
            info.action_profiles.push(ProfileInfo {
                preamble: preamble(&mut ids, ACTION_PROFILE, name, &i.annotations)?,
                target: format!("{}.{}", block.unwrap_or(""), i.name.text),
                table_ids: Vec::new(),
                with_selector,
                size: i.args.get(size_arg).and_then(|a| const_number(a, &consts)).unwrap_or(0),
                max_group_size: annotation_int(&i.annotations, "max_group_size").unwrap_or(0) as u32,
            });
        }
    }
    for d in &program.decls {
        let (block, locals) = match d {
            Decl::Control { name, locals, .. } | Decl::Parser { name, locals, .. } => (&name.text, locals),
            _ => continue,
        };
        for l in locals {
            let Local::Instance(i) = l else { continue };
            let Type::Named(ty, targs) = &i.ty else { continue };
            let name = qualified(Some(&scope(program, checked, block)), &i.name.text, &i.annotations);
            let target = format!("{block}.{}", i.name.text);
            let size = |k: usize| i.args.get(k).and_then(|a| const_number(a, &consts)).unwrap_or(0);
            // PSA's externs by v1model's names: P4Info describes both alike.
            let kind = match ty.text.as_str() {
                "Counter" => "counter",
                "DirectCounter" => "direct_counter",
                "Meter" => "meter",
                "DirectMeter" => "direct_meter",
                "Register" => "register",
                other => other,
            };
            let (list, prefix, unit, size, bitwidth) = match kind {
                "counter" => (&mut info.counters, COUNTER, unit_of(i.args.get(1)), size(0), 0),
                "direct_counter" => (&mut info.direct_counters, DIRECT_COUNTER, unit_of(i.args.first()), 0, 0),
                "meter" => (&mut info.meters, METER, unit_of(i.args.get(1)), size(0), 0),
                "direct_meter" => (&mut info.direct_meters, DIRECT_METER, unit_of(i.args.first()), 0, 0),
                "register" => {
                    let bits = targs.first().map(|t| width(&checked.resolve(t))).unwrap_or(0);
                    (&mut info.registers, REGISTER, Unit::Both, size(0), bits)
                }
                _ => continue,
            };
            list.push(ExternInfo {
                preamble: preamble(&mut ids, prefix, name, &i.annotations)?,
                target,
                unit,
                size,
                table: None,
                bitwidth,
            });
        }
    }
    for d in &program.decls {
        let Decl::Control { name: block, locals, .. } = d else { continue };
        for l in locals {
            let Local::Table(t) = l else { continue };
            let name = qualified(Some(&scope(program, checked, &block.text)), &t.name.text, &t.annotations);
            let mut keys = Vec::new();
            for k in t.keys.iter().filter(|k| k.match_kind.text != "selector") {
                let ty = key_type(program, checked, &block.text, &k.expr);
                keys.push(KeyField {
                    id: keys.len() as u32 + 1,
                    name: annotation_str(&k.annotations, "name").map_or_else(|| expr_text(&k.expr), str::to_string),
                    bitwidth: ty.as_ref().map_or(0, width),
                    match_kind: k.match_kind.text.clone(),
                });
            }
            let action_id = |a: &str| info.action_named(a).map(|a| a.preamble.id);
            let action_ids = t.actions.iter().filter_map(|a| action_id(&a.name.text)).collect();
            let default_action = t.default_action.as_ref().and_then(|(r, c)| Some((action_id(&r.name.text)?, *c)));
            // v1model's property or PSA's (`psa_direct_counter`, `psa_direct_meter`).
            let direct = |properties: [&str; 2], list: &[ExternInfo]| {
                t.properties.iter().find(|(p, _)| properties.contains(&p.text.as_str())).and_then(|(_, e)| {
                    match &e.kind {
                        ExprKind::Name(n) => {
                            let target = format!("{}.{n}", block.text);
                            list.iter().find(|x| x.target == target).map(|x| x.preamble.id)
                        }
                        _ => None,
                    }
                })
            };
            let direct_counter = direct(["counters", "psa_direct_counter"], &info.direct_counters);
            let direct_meter = direct(["meters", "psa_direct_meter"], &info.direct_meters);
            let target = format!("{}.{}", block.text, t.name.text);
            let implementation = match implementation_of(t) {
                None => None,
                Some(e) => match &e.kind {
                    ExprKind::Name(n) => {
                        let local = format!("{}.{n}", block.text);
                        let top = format!(".{n}");
                        info.action_profiles
                            .iter()
                            .find(|p| p.target == local || p.target == top)
                            .map(|p| p.preamble.id)
                    }
                    // Constructed in place: a profile of the table's own, named after it, or as
                    // `@name` on the property says (as p4c does, from the top level).
                    ExprKind::Call { callee, args, .. } => {
                        let ExprKind::Name(ty) = &callee.kind else { continue };
                        let Some(with_selector) = profile_kind(ty) else { continue };
                        let size_arg = if with_selector { 1 } else { 0 };
                        let annotations = implementation_annotations(t);
                        let own = annotation_str(annotations, "name").map(|n| n.trim_start_matches('.').to_string());
                        let own = own.unwrap_or_else(|| name.clone());
                        info.action_profiles.push(ProfileInfo {
                            preamble: preamble(&mut ids, ACTION_PROFILE, own, annotations)?,
                            target: target.clone(),
                            table_ids: Vec::new(),
                            with_selector,
                            size: args.get(size_arg).and_then(|a| const_number(a, &consts)).unwrap_or(0),
                            max_group_size: annotation_int(annotations, "max_group_size").unwrap_or(0) as u32,
                        });
                        info.action_profiles.last().map(|p| p.preamble.id)
                    }
                    _ => None,
                },
            };
            let table = TableInfo {
                preamble: preamble(&mut ids, TABLE, name, &t.annotations)?,
                target: format!("{}.{}", block.text, t.name.text),
                keys,
                action_ids,
                default_action,
                size: t.size.as_ref().and_then(|s| const_number(s, &consts)).unwrap_or(1024),
                is_const: !t.entries.is_empty() && t.entries_const,
                direct_counter,
                direct_meter,
                implementation,
            };
            if let Some(p) = info.action_profiles.iter_mut().find(|p| Some(p.preamble.id) == implementation) {
                p.table_ids.push(table.preamble.id);
            }
            for (list, id) in [(&mut info.direct_counters, direct_counter), (&mut info.direct_meters, direct_meter)] {
                if let Some(x) = list.iter_mut().find(|x| Some(x.preamble.id) == id) {
                    x.table = Some(table.preamble.id);
                }
            }
            info.tables.push(table);
        }
    }
    for d in &program.decls {
        let Decl::Parser { name: block, locals, .. } = d else { continue };
        // A size may name one of the parser's own constants.
        let mut consts = consts.clone();
        for l in locals {
            if let Local::Const { name, value, .. } = l {
                consts.insert(name.text.as_str(), value);
            }
        }
        for l in locals {
            let Local::ValueSet(v) = l else { continue };
            let name = qualified(Some(&scope(program, checked, &block.text)), &v.name.text, &v.annotations);
            let keys = checked
                .value_set_fields(&v.ty)
                .into_iter()
                .enumerate()
                .map(|(i, (name, bitwidth, match_kind))| KeyField { id: i as u32 + 1, name, bitwidth, match_kind })
                .collect();
            info.value_sets.push(ValueSetInfo {
                preamble: preamble(&mut ids, VALUE_SET, name, &v.annotations)?,
                target: format!("{}.{}", block.text, v.name.text),
                keys,
                size: const_number(&v.size, &consts).unwrap_or(0),
            });
        }
    }
    for (kind, header) in &program.controller_headers {
        if info.controller_header(kind).is_some() {
            return Err(format!("@controller_header(\"{kind}\") is on two headers"));
        }
        let preamble = preamble(&mut ids, CONTROLLER_HEADER, kind.clone(), &[])?;
        info.controller_headers.push(ControllerHeader { preamble, metadata: members(checked, header) });
    }
    for d in &program.decls {
        let Decl::Control { name: block, locals, apply, .. } = d else { continue };
        let mut calls = Vec::new();
        for l in locals {
            if let Local::Action(a) = l {
                digest_calls(&a.body, &mut calls);
            }
        }
        digest_calls(apply, &mut calls);
        for (type_args, data) in calls {
            let Some(ty) = digest_type(program, checked, &block.text, type_args, data) else { continue };
            if info.digest_named(&ty).is_none() {
                let preamble = preamble(&mut ids, DIGEST, ty.clone(), &[])?;
                info.digests.push(DigestInfo {
                    preamble,
                    members: members(checked, &ty),
                    type_name: ty.clone(),
                    target: ty,
                });
            }
        }
        // PSA: a `Digest<T>` instance.
        for l in locals {
            let Local::Instance(i) = l else { continue };
            let Type::Named(ty, targs) = &i.ty else { continue };
            let Some(Ty::Struct(t) | Ty::Header(t)) = targs.first().map(|t| checked.resolve(t)) else { continue };
            if ty.text != "Digest" {
                continue;
            }
            let name = qualified(Some(&scope(program, checked, &block.text)), &i.name.text, &i.annotations);
            let preamble = preamble(&mut ids, DIGEST, name, &i.annotations)?;
            info.digests.push(DigestInfo {
                preamble,
                members: members(checked, &t),
                type_name: t,
                target: format!("{}.{}", block.text, i.name.text),
            });
        }
    }
    set_aliases(&mut info.digests, |d| &mut d.preamble);
    set_aliases(&mut info.value_sets, |v| &mut v.preamble);
    set_aliases(&mut info.action_profiles, |p| &mut p.preamble);
    set_aliases(&mut info.tables, |t| &mut t.preamble);
    set_aliases(&mut info.actions, |a| &mut a.preamble);
    for list in
        [&mut info.counters, &mut info.direct_counters, &mut info.meters, &mut info.direct_meters, &mut info.registers]
    {
        set_aliases(list, |x| &mut x.preamble);
    }
    Ok(info)
}
