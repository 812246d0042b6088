//! Which flows name each group and meter: a group or meter delete removes its flows by looking
//! them up, not by a walk over every flow of every table (a controller deleting groups at a steady
//! rate beside 100 000 flows paid for all of them on every delete).

use hashbrown::{HashMap, HashSet};

use crate::classifier::RuleId;
use crate::flow::FlowEntry;

type Flow = (u8, RuleId);

#[derive(Default)]
pub(crate) struct Users {
    groups: HashMap<u32, HashSet<Flow>>,
    meters: HashMap<u32, HashSet<Flow>>,
}

fn forget(index: &mut HashMap<u32, HashSet<Flow>>, key: u32, flow: Flow) {
    if let Some(set) = index.get_mut(&key) {
        set.remove(&flow);
        if set.is_empty() {
            index.remove(&key);
        }
    }
}

impl Users {
    /// Records what a flow (table, id) now in a table names.
    pub fn add(&mut self, table: u8, id: RuleId, f: &FlowEntry) {
        for g in f.groups() {
            self.groups.entry(g).or_default().insert((table, id));
        }
        if let Some(m) = f.actions.program.meter {
            self.meters.entry(m).or_default().insert((table, id));
        }
    }

    /// Forgets a flow as [`Users::add`] recorded it (before its instructions change or it goes).
    pub fn remove(&mut self, table: u8, id: RuleId, f: &FlowEntry) {
        for g in f.groups() {
            forget(&mut self.groups, g, (table, id));
        }
        if let Some(m) = f.actions.program.meter {
            forget(&mut self.meters, m, (table, id));
        }
    }

    pub fn of_group(&self, group: u32) -> impl Iterator<Item = Flow> + '_ {
        self.groups.get(&group).into_iter().flatten().copied()
    }

    pub fn of_meter(&self, meter: u32) -> impl Iterator<Item = Flow> + '_ {
        self.meters.get(&meter).into_iter().flatten().copied()
    }
}
