//! The compiled program's tables that do more than match (`exec.rs`): a direct meter marks the
//! entry hit (its colour is what the meter's `read` then gives), and an action profile or
//! selector (`implementation = ...`) turns the entry hit into a member's action and data, a
//! group's member picked by the hash of the `selector` keys (`Switch::resolve` in `profile.rs`).

use super::{bind_data, mask, Compiler, Flow, E, M, R, S};
use crate::backends::software::GREEN;
use crate::midend::ir::{self, CallArg};

/// What a table does besides matching.
pub(in crate::backends::software) struct TableExtras {
    /// The `selector` keys, with their widths, in the table's order: hashed, not matched.
    selector: Vec<(E, u32)>,
    /// The action profile or selector its entries refer into.
    profile: Option<String>,
    /// Its direct meter (the instance, as `direct_colours` keeps its colour) and whether it
    /// counts bytes.
    meter: Option<(String, bool)>,
}

impl Compiler<'_> {
    /// A table's extras, none for one that only matches.
    pub(super) fn table_extras(
        &self,
        t: &ir::Table,
        selector_keys: &[usize],
        profile: &Option<String>,
        meter: &Option<(String, bool)>,
    ) -> R<Option<Box<TableExtras>>> {
        if profile.is_none() && selector_keys.is_empty() && meter.is_none() {
            return Ok(None);
        }
        let mut selector = Vec::new();
        for &i in selector_keys {
            let k = t.keys.get(i).ok_or("a selector key")?;
            let width = match self.ty_of(&k.value) {
                ir::Ty::Bit(w) | ir::Ty::Int(w) => w,
                ir::Ty::Bool => 1,
                _ => return Err(format!("{}: a selector key that is not bits", t.name)),
            };
            selector.push((self.scalar(&k.value)?, width));
        }
        Ok(Some(Box::new(TableExtras { selector, profile: profile.clone(), meter: meter.clone() })))
    }

    /// `m.read(out colour)` of a direct meter: the colour its table's last lookup marked.
    pub(super) fn direct_meter_read(&self, key: String, args: &[CallArg]) -> R<S> {
        let Some(CallArg::Out(dst)) = args.first() else { return Err("a direct meter's read".into()) };
        let km = mask(Self::width(&dst.ty));
        let (dst, _, _) = self.place(dst)?;
        Ok(Box::new(move |m: &mut M| {
            let colour = m.sw.direct_colours.get(&key).copied().unwrap_or(GREEN);
            if let Some(a) = dst(m) {
                m.slots[a] = colour as u128 & km;
            }
            Flow::Next
        }))
    }
}

/// Sets a direct meter's colour (an allocation for its name the first time only).
fn set_colour(m: &mut M, key: &str, colour: u8) {
    match m.sw.direct_colours.get_mut(key) {
        Some(c) => *c = colour,
        None => {
            m.sw.direct_colours.insert(key.to_string(), colour);
        }
    }
}

/// `exec::apply_table` for a table with extras: whether it hit, the IR action, and its place
/// in the table's list.
pub(super) fn apply_table(table: usize, m: &mut M) -> (bool, usize, Option<usize>) {
    let prog = m.prog;
    let t = &prog.tables[table];
    let extras = t.extras.as_deref().expect("a table with extras");
    let mut keys = std::mem::take(&mut m.keys);
    keys.clear();
    for k in &t.keys {
        let v = k(m);
        keys.push(v);
    }
    // The selector keys' bits, most significant first, packed into bytes.
    let mut bits = Vec::new();
    for (k, width) in &extras.selector {
        let v = k(m);
        (0..*width).rev().for_each(|i| bits.push((v >> i) & 1 == 1));
    }
    let (length, now) = (m.length, m.now);
    let state = m.sw.tables.at_mut(t.state);
    let best = state.lookup(&keys);
    m.keys = keys;
    let mut entry_data: Option<(bool, usize, Vec<u128>)> = None;
    match best {
        Some(i) => {
            let e = &mut state.entries[i];
            if t.counts_hits {
                e.packets += 1;
                e.bytes += length;
            }
            let colour = extras.meter.as_ref().map(|(_, bytes)| e.meter.mark(if *bytes { length } else { 1 }, now));
            let indirect = match (&e.indirect, &extras.profile) {
                (Some(to), Some(profile)) => Some((to.clone(), profile.clone())),
                _ => None,
            };
            let (action_at, args) = (e.action_at, e.args.clone());
            if let (Some((key, _)), Some(colour)) = (&extras.meter, colour) {
                set_colour(m, key, colour);
            }
            match indirect {
                Some((to, profile)) => {
                    let bytes: Vec<u8> = bits
                        .chunks(8)
                        .map(|b| b.iter().enumerate().fold(0u8, |byte, (i, &x)| byte | ((x as u8) << (7 - i))))
                        .collect();
                    if let Some((action, args)) = m.sw.resolve(&profile, &to, &bytes) {
                        let state = m.sw.tables.at(t.state);
                        let at = state.actions.iter().position(|a| *a == action).unwrap_or(usize::MAX);
                        entry_data = Some((true, at, args));
                    }
                    // An empty group: a miss.
                }
                None => entry_data = Some((true, action_at, args)),
            }
        }
        None => {
            if let Some((key, _)) = &extras.meter {
                set_colour(m, key, GREEN);
            }
        }
    }
    let (hit, at, args) = entry_data.unwrap_or_else(|| {
        let state = m.sw.tables.at(t.state);
        (false, state.default_at, state.default.1.clone())
    });
    m.matched = if hit { best.map(|i| (t.state, i)) } else { None };
    let Some(ta) = t.actions.get(at) else {
        return (hit, t.fallback, None);
    };
    bind_data(ta, &args, m);
    (hit, ta.action, Some(at))
}
