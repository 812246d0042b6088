//! Action profiles and action selectors on the software target (v1model's `action_profile`
//! and `action_selector`, PSA's `ActionProfile` and `ActionSelector`): a table whose
//! `implementation` is one holds, per entry, a member of it (an action with its data), a group of
//! members (a selector's), or a one-shot set of actions, instead of an action.
//!
//! A group picks one of its members per frame as BMv2's simple_switch does: the table's
//! `selector` key fields, their bits concatenated in the key's order and padded with zeros to
//! whole bytes, are hashed with the selector's algorithm (the same functions as v1model's `hash`:
//! CRC-16/ARC, CRC-32, identity, csum16, xor16; `random` draws instead), and the hash modulo the
//! group's size picks a member, counting members in ascending id order. A member of weight `w`
//! counts `w` times (BMv2 has no weights: with all weights 1, as BMv2's groups are, the pick
//! is BMv2's). A group with no members makes the lookup a miss: the table's default action runs.

use std::collections::BTreeMap;
use std::fmt;

use super::{arg_number, Entry, Match, Switch};
use crate::midend::ir;

/// An entry's reference into its table's action profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Indirect {
    Member(u32),
    Group(u32),
    /// A one-shot selector entry (P4Runtime's `action_profile_action_set`): its actions, their
    /// data and weights, held by the entry itself.
    ActionSet(Vec<(String, Vec<u128>, u32)>),
}

/// An action with its data, shared by the entries and groups that name its id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub action: String,
    pub args: Vec<u128>,
}

/// A selector's group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// Its members and their weights, in ascending member id order.
    pub members: Vec<(u32, u32)>,
    /// The most its weights may add up to, as the control plane declared it (0: no bound of
    /// its own beyond the profile's).
    pub max_size: u32,
}

/// One action profile or selector's state.
#[derive(Clone, Debug)]
pub struct Profile {
    /// How many members it holds (and, for a selector, how many groups).
    pub size: usize,
    /// A selector's hash algorithm, by v1model's name (`crc16`, ...); None for a plain profile.
    pub algorithm: Option<String>,
    /// `@max_group_size(n)`: the most a group's weights add up to (P4Info's `sum_of_weights`
    /// semantics, as p4c declares it); 0 for none, a group then holding up to `size` members.
    pub max_group_size: usize,
    pub members: BTreeMap<u32, Member>,
    pub groups: BTreeMap<u32, Group>,
    /// The tables whose implementation it is (`Block.table`).
    pub tables: Vec<String>,
}

/// Why the control plane's change to a profile, or to an entry that uses one, was refused; each
/// kind is one of P4Runtime's codes (NOT_FOUND, ALREADY_EXISTS, RESOURCE_EXHAUSTED,
/// FAILED_PRECONDITION, INVALID_ARGUMENT).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProfileError {
    NotFound(String),
    Exists(String),
    Full(String),
    InUse(String),
    Invalid(String),
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileError::NotFound(s)
            | ProfileError::Exists(s)
            | ProfileError::Full(s)
            | ProfileError::InUse(s)
            | ProfileError::Invalid(s) => f.write_str(s),
        }
    }
}

type R<T> = Result<T, ProfileError>;

impl Profile {
    /// Whether a group of these weights fits: their sum within `max_group_size`, or their
    /// number within `size` where it gives none.
    fn group_fits(&self, weights: impl Iterator<Item = u32>, name: &str) -> R<()> {
        let (count, sum) = weights.fold((0usize, 0u64), |(n, s), w| (n + 1, s + w as u64));
        if self.max_group_size > 0 && sum > self.max_group_size as u64 {
            return Err(ProfileError::Full(format!(
                "{name}'s groups weigh {} at most (@max_group_size), not {sum}",
                self.max_group_size
            )));
        }
        if count > self.size {
            return Err(ProfileError::Full(format!("{name}'s groups hold {} members at most, not {count}", self.size)));
        }
        Ok(())
    }

    /// The member a frame whose selector fields hash to `hash` takes among `members` (member id,
    /// weight), in the order given; None for an empty set.
    pub fn pick(members: &[(u32, u32)], hash: u128) -> Option<usize> {
        let total: u128 = members.iter().map(|(_, w)| *w as u128).sum();
        if total == 0 {
            return None;
        }
        let mut slot = hash % total;
        for (i, (_, w)) in members.iter().enumerate() {
            if slot < *w as u128 {
                return Some(i);
            }
            slot -= *w as u128;
        }
        None
    }
}

impl Switch {
    /// The state of an action profile or selector constructed as `ty(args)`, or None where `ty`
    /// is neither.
    pub(super) fn new_profile(
        &mut self,
        ir: &ir::Program,
        ty: &str,
        args: &[ir::Arg],
        annotations: &[(String, u128)],
    ) -> Option<Profile> {
        let with_selector = crate::info::profile_kind(ty)?;
        let size_arg = if with_selector { 1 } else { 0 };
        let size = args.get(size_arg).map_or(0, |a| arg_number(a) as usize);
        let algorithm = with_selector.then(|| match args.first() {
            // v1model's `HashAlgorithm.crc16`, PSA's `PSA_HashAlgorithm_t.CRC16`.
            Some(ir::Arg::Member { enumeration, index }) => {
                let m = &ir.enums[*enumeration].members[*index];
                if m.chars().any(|c| c.is_ascii_lowercase()) {
                    m.clone()
                } else {
                    super::psa::psa_algorithm(m).to_string()
                }
            }
            _ => String::new(),
        });
        let max_group_size = annotations.iter().find(|(n, _)| n == "max_group_size").map_or(0, |(_, v)| *v);
        Some(Profile {
            size,
            algorithm,
            max_group_size: max_group_size as usize,
            members: BTreeMap::new(),
            groups: BTreeMap::new(),
            tables: Vec::new(),
        })
    }

    /// The profile `table`'s `implementation` names (`key`, as the profiles are kept: one the
    /// property constructs is the mid end's instance under the table's name), the table now
    /// among its users.
    pub(super) fn table_profile_of(&mut self, table: &str, key: &str) -> Result<String, String> {
        let Some(profile) = self.profiles.get_mut(key) else {
            let name = key.rsplit('.').next().unwrap_or(key);
            return Err(format!("{table}: no action profile '{name}'"));
        };
        profile.tables.push(table.to_string());
        Ok(key.to_string())
    }

    /// The names of the program's action profiles and selectors.
    pub fn profiles(&self) -> Vec<String> {
        let mut names: Vec<String> = self.profiles.keys().cloned().collect();
        names.sort();
        names
    }

    pub fn profile(&self, name: &str) -> Option<&Profile> {
        self.profiles.get(name)
    }

    /// The profile `table` takes its actions from, if any.
    pub fn table_profile(&self, table: &str) -> Option<&str> {
        self.tables.get(table)?.profile.as_deref()
    }

    fn profile_mut(&mut self, name: &str) -> R<&mut Profile> {
        self.profiles.get_mut(name).ok_or_else(|| ProfileError::NotFound(format!("no action profile '{name}'")))
    }

    /// Whether `action` with `args` may be a member of `profile`: an action of every table
    /// that uses it, given all its data.
    fn check_member_action(&self, profile: &str, action: &str, args: &[u128]) -> R<()> {
        let p = self
            .profiles
            .get(profile)
            .ok_or_else(|| ProfileError::NotFound(format!("no action profile '{profile}'")))?;
        for table in &p.tables {
            let t = &self.tables[table];
            if !t.actions.iter().any(|a| a == action) {
                return Err(ProfileError::Invalid(format!(
                    "{profile}: table {table} has no action '{action}' (it has {})",
                    t.actions.join(", ")
                )));
            }
        }
        let first = p.tables.first().map(|t| &self.tables[t]);
        let data = first
            .and_then(|t| t.data_of("", action).ok())
            .ok_or_else(|| ProfileError::Invalid(format!("{profile}: no action '{action}'")))?;
        if args.len() != data {
            return Err(ProfileError::Invalid(format!("{action} takes {data} argument(s), not {}", args.len())));
        }
        Ok(())
    }

    /// Adds member `id` to `profile` (`insert`), or changes the action of the member `id` is
    /// already (`!insert`).
    pub fn set_member(&mut self, profile: &str, id: u32, action: &str, args: Vec<u128>, insert: bool) -> R<()> {
        self.check_member_action(profile, action, &args)?;
        let p = self.profile_mut(profile)?;
        match (p.members.contains_key(&id), insert) {
            (true, true) => return Err(ProfileError::Exists(format!("{profile} has member {id} already"))),
            (false, false) => return Err(ProfileError::NotFound(format!("{profile} has no member {id}"))),
            (false, true) if p.members.len() >= p.size => {
                return Err(ProfileError::Full(format!("{profile} is full ({} members)", p.size)))
            }
            _ => {}
        }
        p.members.insert(id, Member { action: action.to_string(), args });
        self.generation += 1;
        Ok(())
    }

    /// Removes member `id` of `profile`, unless a group or a table entry still uses it.
    pub fn delete_member(&mut self, profile: &str, id: u32) -> R<()> {
        let p = self
            .profiles
            .get(profile)
            .ok_or_else(|| ProfileError::NotFound(format!("no action profile '{profile}'")))?;
        if !p.members.contains_key(&id) {
            return Err(ProfileError::NotFound(format!("{profile} has no member {id}")));
        }
        if let Some((g, _)) = p.groups.iter().find(|(_, g)| g.members.iter().any(|(m, _)| *m == id)) {
            return Err(ProfileError::InUse(format!("{profile}: member {id} is in group {g}")));
        }
        if let Some(table) = self.entry_using(profile, &Indirect::Member(id)) {
            return Err(ProfileError::InUse(format!("{profile}: member {id} is the action of an entry of {table}")));
        }
        self.profile_mut(profile)?.members.remove(&id);
        self.generation += 1;
        Ok(())
    }

    /// Sets group `id` of selector `profile` to these members and weights, their sum bounded
    /// by `max_size` (0: by the profile alone): a new group (`insert`) or one there already
    /// (`!insert`).
    pub fn set_profile_group(
        &mut self,
        profile: &str,
        id: u32,
        members: Vec<(u32, u32)>,
        max_size: u32,
        insert: bool,
    ) -> R<()> {
        let p = self
            .profiles
            .get(profile)
            .ok_or_else(|| ProfileError::NotFound(format!("no action profile '{profile}'")))?;
        if p.algorithm.is_none() {
            return Err(ProfileError::Invalid(format!(
                "{profile} is an action profile without a selector: it has no groups"
            )));
        }
        match (p.groups.contains_key(&id), insert) {
            (true, true) => return Err(ProfileError::Exists(format!("{profile} has group {id} already"))),
            (false, false) => return Err(ProfileError::NotFound(format!("{profile} has no group {id}"))),
            (false, true) if p.groups.len() >= p.size => {
                return Err(ProfileError::Full(format!("{profile} holds {} groups at most", p.size)))
            }
            _ => {}
        }
        let mut sorted = members;
        sorted.sort_unstable();
        for (i, (m, w)) in sorted.iter().enumerate() {
            if !p.members.contains_key(m) {
                return Err(ProfileError::NotFound(format!("{profile} has no member {m}")));
            }
            if *w == 0 {
                return Err(ProfileError::Invalid(format!("{profile}: member {m}'s weight is 0 (at least 1)")));
            }
            if i > 0 && sorted[i - 1].0 == *m {
                return Err(ProfileError::Invalid(format!("{profile}: member {m} is in the group twice")));
            }
        }
        p.group_fits(sorted.iter().map(|(_, w)| *w), profile)?;
        if max_size > 0 && p.max_group_size > 0 && max_size as usize > p.max_group_size {
            return Err(ProfileError::Invalid(format!(
                "{profile}: group {id}'s max_size {max_size} is above the profile's max_group_size {}",
                p.max_group_size
            )));
        }
        let weight: u64 = sorted.iter().map(|(_, w)| *w as u64).sum();
        if max_size > 0 && weight > max_size as u64 {
            return Err(ProfileError::Full(format!(
                "{profile}: group {id}'s weights add up to {weight}, past its max_size {max_size}"
            )));
        }
        self.profile_mut(profile)?.groups.insert(id, Group { members: sorted, max_size });
        self.generation += 1;
        Ok(())
    }

    /// Removes group `id` of `profile`, unless a table entry still uses it.
    pub fn delete_profile_group(&mut self, profile: &str, id: u32) -> R<()> {
        let p = self
            .profiles
            .get(profile)
            .ok_or_else(|| ProfileError::NotFound(format!("no action profile '{profile}'")))?;
        if !p.groups.contains_key(&id) {
            return Err(ProfileError::NotFound(format!("{profile} has no group {id}")));
        }
        if let Some(table) = self.entry_using(profile, &Indirect::Group(id)) {
            return Err(ProfileError::InUse(format!("{profile}: group {id} is the action of an entry of {table}")));
        }
        self.profile_mut(profile)?.groups.remove(&id);
        self.generation += 1;
        Ok(())
    }

    /// A table of `profile` with an entry that refers to `what`.
    fn entry_using(&self, profile: &str, what: &Indirect) -> Option<String> {
        let p = self.profiles.get(profile)?;
        p.tables.iter().find(|t| self.tables[*t].entries.iter().any(|e| e.indirect.as_ref() == Some(what))).cloned()
    }

    /// Adds (or, where one with these matches and priority is there, changes) an entry of a
    /// table with an action profile: its member, group or one-shot action set.
    pub fn insert_indirect(&mut self, table: &str, keys: Vec<Match>, to: Indirect, priority: i64) -> R<()> {
        let t = self.tables.get(table).ok_or_else(|| ProfileError::NotFound(format!("no table '{table}'")))?;
        let Some(profile) = t.profile.clone() else {
            return Err(ProfileError::Invalid(format!("{table} has no action profile: its entries take actions")));
        };
        self.check_keys(table, &keys).map_err(ProfileError::Invalid)?;
        let p = &self.profiles[&profile];
        match &to {
            Indirect::Member(m) if !p.members.contains_key(m) => {
                return Err(ProfileError::NotFound(format!("{profile} has no member {m}")))
            }
            Indirect::Group(g) if p.algorithm.is_none() => {
                return Err(ProfileError::Invalid(format!(
                    "{profile} has no selector: an entry of {table} is a member, not group {g}"
                )))
            }
            Indirect::Group(g) if !p.groups.contains_key(g) => {
                return Err(ProfileError::NotFound(format!("{profile} has no group {g}")))
            }
            Indirect::ActionSet(set) => {
                if p.algorithm.is_none() && set.len() != 1 {
                    return Err(ProfileError::Invalid(format!(
                        "{profile} has no selector: a one-shot entry of {table} holds one action"
                    )));
                }
                if set.is_empty() {
                    return Err(ProfileError::Invalid(format!("{table}: a one-shot action set with no action")));
                }
                p.group_fits(set.iter().map(|(_, _, w)| *w), &profile)?;
                for (action, args, weight) in set {
                    if *weight == 0 {
                        return Err(ProfileError::Invalid(format!("{table}: {action}'s weight is 0 (at least 1)")));
                    }
                    self.check_member_action(&profile, action, args)?;
                }
            }
            _ => {}
        }
        let t = self.tables.get_mut(table).expect("looked up");
        if let Some(old) = t.entries.iter_mut().find(|e| e.keys == keys && e.priority == priority) {
            old.indirect = Some(to);
            self.generation += 1;
            return Ok(());
        }
        if t.entries.len() >= t.size {
            return Err(ProfileError::Full(format!("{table} is full ({} entries)", t.size)));
        }
        t.entries.push(Entry {
            keys,
            priority,
            action: String::new(),
            action_at: usize::MAX,
            args: Vec::new(),
            packets: 0,
            bytes: 0,
            meter: Default::default(),
            indirect: Some(to),
        });
        t.index_entry(t.entries.len() - 1);
        self.generation += 1;
        Ok(())
    }

    /// The action and data a hit on an entry that refers into `profile` runs: its member's, or
    /// the member its group's hash of the selector fields (`selector_bytes`) picks. None for an
    /// empty group (a miss).
    pub(super) fn resolve(
        &mut self,
        profile: &str,
        to: &Indirect,
        selector_bytes: &[u8],
    ) -> Option<(String, Vec<u128>)> {
        let p = self.profiles.get(profile)?;
        let hash = |sw: &mut Switch, algo: &str| match algo {
            "random" => sw.next_random() as u128,
            algo => super::v1model::hash(algo, selector_bytes),
        };
        let algo = p.algorithm.clone().unwrap_or_default();
        match to {
            Indirect::Member(m) => p.members.get(m).map(|m| (m.action.clone(), m.args.clone())),
            Indirect::Group(g) => {
                let members = p.groups.get(g)?.members.clone();
                let i = Profile::pick(&members, hash(self, &algo))?;
                let m = &self.profiles[profile].members[&members[i].0];
                Some((m.action.clone(), m.args.clone()))
            }
            Indirect::ActionSet(set) => {
                let weights: Vec<(u32, u32)> = set.iter().enumerate().map(|(i, (_, _, w))| (i as u32, *w)).collect();
                let i = Profile::pick(&weights, hash(self, &algo))?;
                Some((set[i].0.clone(), set[i].1.clone()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pick_counts_each_member_its_weight_in_the_order_given() {
        let members = [(3, 1), (7, 2), (9, 1)];
        let picks: Vec<Option<usize>> = (0..5).map(|h| Profile::pick(&members, h)).collect();
        assert_eq!(picks, [Some(0), Some(1), Some(1), Some(2), Some(0)]);
        assert_eq!(Profile::pick(&[], 5), None);
    }
}
