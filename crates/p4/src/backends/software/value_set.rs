//! The software target's value sets (P4-16 12.11, `value_set<T>(N) name;` in a parser): the
//! members the control plane sets (P4Runtime's `ValueSetEntry`, the config file), each one match
//! per field of `T`, and the test a `select` case naming the set makes. A case matches when any
//! member matches every field; an empty set matches nothing. Members are replaced as a whole, as
//! P4Runtime's MODIFY does.

use super::{Match, Switch};
use crate::midend::ir;

/// One value set's state: its fields' widths, how many members it may hold, its members.
#[derive(Clone, Debug)]
pub(super) struct ValueSetState {
    widths: Vec<u32>,
    size: usize,
    members: Vec<Vec<Match>>,
}

impl ValueSetState {
    /// Whether a member matches `keys` (the select's values, one per field).
    pub(super) fn matches(&self, keys: &[u128]) -> bool {
        self.members.iter().any(|m| m.iter().zip(keys).zip(&self.widths).all(|((m, k), w)| m.matches(*k, *w)))
    }
}

/// The program's value sets, empty, by the name the control plane uses (`Parser.name`, the
/// parser as declared, as tables are named): from the mid end, which sizes and flattens them.
pub(super) fn declared(ir: &ir::Program) -> Vec<(String, ValueSetState)> {
    ir.value_sets
        .iter()
        .map(|v| {
            let state = ValueSetState {
                widths: v.fields.iter().map(|f| f.width).collect(),
                size: v.size as usize,
                members: Vec::new(),
            };
            (ir.control_name(&v.name), state)
        })
        .collect()
}

impl Switch {
    /// The program's value sets, by name.
    pub fn value_sets(&self) -> Vec<String> {
        self.value_sets.keys().cloned().collect()
    }

    /// `name`'s members, as set.
    pub fn value_set(&self, name: &str) -> Option<&[Vec<Match>]> {
        self.value_sets.get(name).map(|v| v.members.as_slice())
    }

    /// Replaces `name`'s members: each one match per field of the set's type (exact, ternary,
    /// lpm, range or any), at most the set's size of them.
    pub fn set_value_set(&mut self, name: &str, members: Vec<Vec<Match>>) -> Result<(), String> {
        let set = self.value_sets.get_mut(name).ok_or_else(|| format!("no value set '{name}'"))?;
        if members.len() > set.size {
            return Err(format!("{name} holds {} members, not {}", set.size, members.len()));
        }
        for m in &members {
            if m.len() != set.widths.len() {
                return Err(format!("{name}'s members have {} field(s), not {}", set.widths.len(), m.len()));
            }
            for (f, &w) in m.iter().zip(&set.widths) {
                let ordered = !matches!(*f, Match::Range { low, high } if low > high);
                if !(f.fits(w) && ordered) {
                    return Err(format!("{f:?} does not fit {name}'s {w}-bit field"));
                }
            }
        }
        set.members = members;
        self.generation += 1;
        Ok(())
    }
}
