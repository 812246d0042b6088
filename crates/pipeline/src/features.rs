//! Table features set by a controller (a table-features request with a body, spec §7.3.5.5): a
//! table may be narrowed to fewer instructions, actions, match fields and next tables, or left out
//! of the pipeline; flow-mods are then held to what the table advertises.

use ofp::action::{action_type, instruction_type, Action, Instruction};
use ofp::error::{BadAction, BadInstruction, BadMatch, ErrorCode, TableFeaturesFailed};
use ofp::oxm::{Field, Match, OFPXMC_OPENFLOW_BASIC};
use ofp::table_features::{OxmId, TableFeatureProp, TableFeatures, TypeId};

use crate::flow::settable;

/// What one table allows, read from its advertised features.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSpec {
    pub features: TableFeatures,
    instructions: [Vec<u16>; 2],
    next_tables: [Vec<u8>; 2],
    write_actions: [Vec<u16>; 2],
    apply_actions: [Vec<u16>; 2],
    write_setfield: [Vec<Field>; 2],
    apply_setfield: [Vec<Field>; 2],
    match_fields: Vec<Field>,
}

fn bad(what: TableFeaturesFailed) -> ErrorCode {
    ErrorCode::TableFeaturesFailed(what)
}

fn type_ids(ids: &[TypeId], supported: &[u16]) -> Result<Vec<u16>, ErrorCode> {
    ids.iter()
        .map(|id| {
            if id.experimenter.is_some() || !supported.contains(&id.typ) {
                Err(bad(TableFeaturesFailed::BadArgument))
            } else {
                Ok(id.typ)
            }
        })
        .collect()
}

fn fields(ids: &[OxmId], allowed: impl Fn(Field) -> bool) -> Result<Vec<Field>, ErrorCode> {
    ids.iter()
        .map(|id| {
            let class = (id.header >> 16) as u16;
            let field = Field::from_id(((id.header >> 9) & 0x7f) as u8);
            match field {
                Some(f) if class == OFPXMC_OPENFLOW_BASIC && allowed(f) => Ok(f),
                _ => Err(bad(TableFeaturesFailed::BadArgument)),
            }
        })
        .collect()
}

impl TableSpec {
    /// Checks a requested table against what the switch can do.
    pub fn from_request(t: &TableFeatures, n_tables: u8, max_entries_cap: u32) -> Result<TableSpec, ErrorCode> {
        if t.table_id >= n_tables {
            return Err(bad(TableFeaturesFailed::BadTable));
        }
        if t.max_entries == 0 || t.max_entries > max_entries_cap {
            return Err(bad(TableFeaturesFailed::BadArgument));
        }
        let all: Vec<Field> = Field::ALL.to_vec();
        let mut spec = TableSpec {
            features: t.clone(),
            instructions: [instruction_type::ALL.to_vec(), instruction_type::ALL.to_vec()],
            next_tables: [(t.table_id + 1..n_tables).collect(), (t.table_id + 1..n_tables).collect()],
            write_actions: [action_type::ALL.to_vec(), action_type::ALL.to_vec()],
            apply_actions: [action_type::ALL.to_vec(), action_type::ALL.to_vec()],
            write_setfield: [
                all.iter().copied().filter(|&f| settable(f)).collect(),
                all.iter().copied().filter(|&f| settable(f)).collect(),
            ],
            apply_setfield: [
                all.iter().copied().filter(|&f| settable(f)).collect(),
                all.iter().copied().filter(|&f| settable(f)).collect(),
            ],
            match_fields: all,
        };
        // A property given only for regular flows also describes the table-miss flow.
        let mut seen_miss = [false; 6];
        for p in &t.properties {
            let m = |miss: bool| miss as usize;
            match p {
                TableFeatureProp::Instructions { miss, ids } => {
                    spec.instructions[m(*miss)] = type_ids(ids, instruction_type::ALL)?;
                    seen_miss[0] |= *miss;
                }
                TableFeatureProp::NextTables { miss, tables } => {
                    if tables.iter().any(|&n| n <= t.table_id || n >= n_tables) {
                        return Err(bad(TableFeaturesFailed::BadArgument));
                    }
                    spec.next_tables[m(*miss)] = tables.clone();
                    seen_miss[1] |= *miss;
                }
                TableFeatureProp::WriteActions { miss, ids } => {
                    spec.write_actions[m(*miss)] = type_ids(ids, action_type::ALL)?;
                    seen_miss[2] |= *miss;
                }
                TableFeatureProp::ApplyActions { miss, ids } => {
                    spec.apply_actions[m(*miss)] = type_ids(ids, action_type::ALL)?;
                    seen_miss[3] |= *miss;
                }
                TableFeatureProp::WriteSetfield { miss, ids } => {
                    spec.write_setfield[m(*miss)] = fields(ids, settable)?;
                    seen_miss[4] |= *miss;
                }
                TableFeatureProp::ApplySetfield { miss, ids } => {
                    spec.apply_setfield[m(*miss)] = fields(ids, settable)?;
                    seen_miss[5] |= *miss;
                }
                TableFeatureProp::Match(ids) => spec.match_fields = fields(ids, |_| true)?,
                TableFeatureProp::Wildcards(ids) => {
                    fields(ids, |_| true)?;
                }
                TableFeatureProp::Experimenter { .. } => return Err(bad(TableFeaturesFailed::BadType)),
            }
        }
        if !seen_miss[0] {
            spec.instructions[1] = spec.instructions[0].clone();
        }
        if !seen_miss[1] {
            spec.next_tables[1] = spec.next_tables[0].clone();
        }
        if !seen_miss[2] {
            spec.write_actions[1] = spec.write_actions[0].clone();
        }
        if !seen_miss[3] {
            spec.apply_actions[1] = spec.apply_actions[0].clone();
        }
        if !seen_miss[4] {
            spec.write_setfield[1] = spec.write_setfield[0].clone();
        }
        if !seen_miss[5] {
            spec.apply_setfield[1] = spec.apply_setfield[0].clone();
        }
        Ok(spec)
    }

    /// Holds a flow to what the table advertises.
    pub fn check(&self, m: &Match, instructions: &[Instruction], table_miss: bool) -> Result<(), ErrorCode> {
        let i = table_miss as usize;
        if let Some(f) = m.fields.iter().find(|f| !self.match_fields.contains(&f.field)) {
            let _ = f;
            return Err(ErrorCode::BadMatch(BadMatch::BadField));
        }
        let check_actions = |actions: &[Action], types: &[u16], setfields: &[Field]| -> Result<(), ErrorCode> {
            for a in actions {
                if !types.contains(&a.type_code()) {
                    return Err(ErrorCode::BadAction(BadAction::BadType));
                }
                if let Action::SetField(f) = a {
                    if !setfields.contains(&f.field) {
                        return Err(ErrorCode::BadAction(BadAction::BadSetType));
                    }
                }
            }
            Ok(())
        };
        for inst in instructions {
            if !self.instructions[i].contains(&inst.type_code()) {
                return Err(ErrorCode::BadInstruction(BadInstruction::UnsupInst));
            }
            match inst {
                Instruction::GotoTable(t) if !self.next_tables[i].contains(t) => {
                    return Err(ErrorCode::BadInstruction(BadInstruction::BadTableId));
                }
                Instruction::ApplyActions(a) => check_actions(a, &self.apply_actions[i], &self.apply_setfield[i])?,
                Instruction::WriteActions(a) => check_actions(a, &self.write_actions[i], &self.write_setfield[i])?,
                _ => {}
            }
        }
        Ok(())
    }
}
