//! Read requests: the entities a read asks for, wildcards expanded (P4Runtime §11).

use p4::backends::software::{Entry, Switch};
use p4::info::{ExternInfo, Info, TableInfo};
use tonic::Status;

use super::entity::*;
use crate::codec::encode;
use crate::proto::p4::v1 as pb;

/// The entries a read asks for, of `tables` (every one for table id 0, else the one named): all
/// of them, or the one with the request's match and priority.
pub(super) fn entries_wanted<'s, 'i>(
    sw: &'s Switch,
    info: &'i Info,
    tables: impl Iterator<Item = &'i TableInfo>,
    want: &pb::TableEntry,
) -> Result<Vec<(&'i TableInfo, &'s Entry)>, Status> {
    let tables: Vec<&TableInfo> = match want.table_id {
        0 => tables.collect(),
        id => vec![table(info, id)?],
    };
    let mut out = Vec::new();
    for t in tables {
        let wanted = if want.r#match.is_empty() { None } else { Some(matches(t, &want.r#match)?) };
        for e in sw.entries(&t.target).unwrap_or(&[]) {
            if wanted.as_ref().is_none_or(|k| *k == e.keys && e.priority == want.priority as i64) {
                out.push((t, e));
            }
        }
    }
    Ok(out)
}

/// The cells a read of counters, meters or registers asks for: of every instance (id 0) or the
/// one named, every cell or the one indexed.
pub(super) fn cells_wanted<'i>(
    sw: &Switch,
    list: &'i [ExternInfo],
    id: u32,
    at: Option<&pb::Index>,
    kind: &str,
) -> Result<Vec<(&'i ExternInfo, usize)>, Status> {
    if id != 0 {
        instance(list, id, kind)?;
    }
    let mut out = Vec::new();
    for x in list.iter().filter(|x| id == 0 || x.preamble.id == id) {
        let cells = sw.cells(&x.target).unwrap_or(0);
        match index(at, cells, &x.preamble.name)? {
            Some(i) => out.push((x, i)),
            None => out.extend((0..cells).map(|i| (x, i))),
        }
    }
    Ok(out)
}

/// The entries whose direct counter or meter cells a read asks for: of the table named, which
/// must have one, or of every table that has one (table id 0).
fn direct_cells<'s, 'i>(
    sw: &'s Switch,
    info: &'i Info,
    want: &pb::TableEntry,
    direct: impl Fn(&TableInfo) -> Option<u32>,
    kind: &str,
) -> Result<Vec<(&'i TableInfo, &'s Entry)>, Status> {
    if want.table_id != 0 {
        let t = table(info, want.table_id)?;
        if direct(t).is_none() {
            return Err(Status::invalid_argument(format!("{} has no direct {kind}", t.preamble.name)));
        }
    }
    entries_wanted(sw, info, info.tables.iter().filter(|t| direct(t).is_some()), want)
}

/// What names an entry: its table, match and priority.
fn entry_key(t: &TableInfo, e: &Entry) -> pb::TableEntry {
    pb::TableEntry {
        table_id: t.preamble.id,
        r#match: fields(t, &e.keys),
        priority: e.priority as i32,
        ..Default::default()
    }
}

/// The entries one read entity asks for.
pub(super) fn read(sw: &Switch, info: &Info, entity: &pb::Entity, out: &mut Vec<pb::Entity>) -> Result<(), Status> {
    use pb::entity::Entity as E;
    let wrap = |e: E| pb::Entity { entity: Some(e) };
    let counts =
        |(packets, bytes): (u64, u64)| pb::CounterData { packet_count: packets as i64, byte_count: bytes as i64 };
    let index = |i: usize| Some(pb::Index { index: i as i64 });
    match entity.entity.as_ref() {
        Some(E::TableEntry(want)) if want.is_default_action => {
            let tables: Vec<&TableInfo> = match want.table_id {
                0 => info.tables.iter().collect(),
                id => vec![table(info, id)?],
            };
            for t in tables {
                let (name, args) = sw.default_action(&t.target).unwrap_or(("NoAction", &[]));
                out.push(wrap(E::TableEntry(pb::TableEntry {
                    table_id: t.preamble.id,
                    action: action_message(info, t, name, args),
                    is_default_action: true,
                    ..Default::default()
                })));
            }
        }
        Some(E::TableEntry(want)) => {
            for (t, e) in entries_wanted(sw, info, info.tables.iter(), want)? {
                let meter = t.direct_meter.and_then(|_| sw.entry_meter(&t.target, &e.keys, e.priority).flatten());
                out.push(wrap(E::TableEntry(pb::TableEntry {
                    table_id: t.preamble.id,
                    r#match: fields(t, &e.keys),
                    action: match &e.indirect {
                        Some(to) => Some(super::profile::indirect_message(info, to)),
                        None => action_message(info, t, &e.action, &e.args),
                    },
                    priority: e.priority as i32,
                    counter_data: t.direct_counter.map(|_| counts((e.packets, e.bytes))),
                    meter_config: meter_config(meter),
                    is_const: t.is_const,
                    ..Default::default()
                })));
            }
        }
        Some(E::DirectCounterEntry(want)) => {
            let want = want.table_entry.clone().unwrap_or_default();
            for (t, e) in direct_cells(sw, info, &want, |t| t.direct_counter, "counter")? {
                out.push(wrap(E::DirectCounterEntry(pb::DirectCounterEntry {
                    table_entry: Some(entry_key(t, e)),
                    data: Some(counts((e.packets, e.bytes))),
                })));
            }
        }
        Some(E::DirectMeterEntry(want)) => {
            let want = want.table_entry.clone().unwrap_or_default();
            for (t, e) in direct_cells(sw, info, &want, |t| t.direct_meter, "meter")? {
                out.push(wrap(E::DirectMeterEntry(pb::DirectMeterEntry {
                    table_entry: Some(entry_key(t, e)),
                    config: meter_config(sw.entry_meter(&t.target, &e.keys, e.priority).flatten()),
                    counter_data: None,
                })));
            }
        }
        Some(E::CounterEntry(want)) => {
            for (x, i) in cells_wanted(sw, &info.counters, want.counter_id, want.index.as_ref(), "counter")? {
                out.push(wrap(E::CounterEntry(pb::CounterEntry {
                    counter_id: x.preamble.id,
                    index: index(i),
                    data: sw.counter(&x.target, i).map(counts),
                })));
            }
        }
        Some(E::MeterEntry(want)) => {
            for (x, i) in cells_wanted(sw, &info.meters, want.meter_id, want.index.as_ref(), "meter")? {
                out.push(wrap(E::MeterEntry(pb::MeterEntry {
                    meter_id: x.preamble.id,
                    index: index(i),
                    config: meter_config(sw.meter(&x.target, i).flatten()),
                    counter_data: None,
                })));
            }
        }
        Some(E::RegisterEntry(want)) => {
            for (x, i) in cells_wanted(sw, &info.registers, want.register_id, want.index.as_ref(), "register")? {
                let value = sw.register(&x.target, i).unwrap_or(0);
                out.push(wrap(E::RegisterEntry(pb::RegisterEntry {
                    register_id: x.preamble.id,
                    index: index(i),
                    data: Some(pb::P4Data { data: Some(pb::p4_data::Data::Bitstring(encode(value))) }),
                })));
            }
        }
        Some(E::PacketReplicationEngineEntry(want)) => super::pre::read(sw, want, out)?,
        Some(E::ActionProfileMember(want)) => super::profile::read_members(sw, info, want, out)?,
        Some(E::ActionProfileGroup(want)) => super::profile::read_groups(sw, info, want, out)?,
        Some(E::ValueSetEntry(want)) => super::value_set::read(sw, info, want, out)?,
        Some(other) => return Err(Status::unimplemented(format!("reading {} entities", entity_kind(other)))),
        None => return Err(Status::invalid_argument("a read of no entity")),
    }
    Ok(())
}

/// The entities a read request asks for, as `Read` answers them on the forwarding thread.
/// Public for the fuzz target `p4runtime_handlers`.
pub fn read_entities(sw: &Switch, entities: &[pb::Entity]) -> Result<Vec<pb::Entity>, Status> {
    let info = sw.info();
    let mut out = Vec::new();
    for e in entities {
        read(sw, &info, e, &mut out)?;
    }
    Ok(out)
}
