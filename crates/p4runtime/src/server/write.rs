//! Write requests: each update applied to the running program, and the batch's outcome as
//! P4Runtime reports it (§12).

use p4::info::Info;
use p4::run::Switch;
use prost::Message;
use tonic::{Code, Status};

use super::entity::*;
use crate::codec::decode;
use crate::proto::google::rpc;
use crate::proto::p4::v1 as pb;

/// One update of a write request, on the switch.
pub(super) fn update(sw: &mut Switch, info: &Info, u: &pb::Update) -> Result<(), Status> {
    use pb::entity::Entity as E;
    use pb::update::Type as U;
    let kind = U::try_from(u.r#type).map_err(|_| Status::invalid_argument("an update of unknown type"))?;
    let entity = u.entity.as_ref().and_then(|e| e.entity.as_ref());
    let invalid = |e: String| Status::invalid_argument(e);
    match entity {
        Some(E::TableEntry(e)) => {
            let t = table(info, e.table_id)?;
            if e.is_default_action {
                if kind != U::Modify {
                    return Err(invalid(format!("{}: the default entry is only modified", t.preamble.name)));
                }
                let (name, args) = action(info, t, e.action.as_ref())?;
                return sw.set_default_action(&t.target, &name, args).map_err(Status::permission_denied);
            }
            if t.is_const {
                return Err(Status::permission_denied(format!("{}: its entries are the program's", t.preamble.name)));
            }
            let keys = matches(t, &e.r#match)?;
            let priority = e.priority as i64;
            if prioritised(t) != (priority != 0) || priority < 0 {
                return Err(invalid(format!(
                    "{}: {}",
                    t.preamble.name,
                    if prioritised(t) { "its entries need a priority above 0" } else { "its entries take no priority" }
                )));
            }
            let exists =
                sw.entries(&t.target).is_some_and(|es| es.iter().any(|x| x.keys == keys && x.priority == priority));
            match kind {
                U::Insert | U::Modify => {
                    if kind == U::Insert && exists {
                        return Err(Status::already_exists(format!("{}: the entry exists", t.preamble.name)));
                    }
                    if kind == U::Modify && !exists {
                        return Err(Status::not_found(format!("{}: no such entry", t.preamble.name)));
                    }
                    if kind == U::Insert && sw.entries(&t.target).map_or(0, |es| es.len()) as u64 >= t.size {
                        return Err(Status::resource_exhausted(format!(
                            "{} is full ({} entries)",
                            t.preamble.name, t.size
                        )));
                    }
                    let (name, args) = action(info, t, e.action.as_ref())?;
                    sw.insert(&t.target, keys.clone(), &name, args, priority).map_err(invalid)?;
                    if let Some(c) = &e.meter_config {
                        sw.set_entry_meter(&t.target, &keys, priority, rates(c)?).map_err(invalid)?;
                    }
                    Ok(())
                }
                U::Delete => sw.delete(&t.target, &keys, priority).map_err(Status::not_found),
                U::Unspecified => Err(invalid("an update of unspecified type".into())),
            }
        }
        Some(E::CounterEntry(c)) if kind == U::Modify => {
            let x = instance(&info.counters, c.counter_id, "counter")?;
            let data = c.data.unwrap_or_default();
            let cells = sw.cells(&x.target).unwrap_or(0);
            let at = match index(c.index.as_ref(), cells, &x.preamble.name)? {
                Some(i) => i..i + 1,
                None => 0..cells,
            };
            for i in at {
                sw.set_counter(&x.target, i, data.packet_count as u64, data.byte_count as u64).map_err(invalid)?;
            }
            Ok(())
        }
        Some(E::MeterEntry(m)) if kind == U::Modify => {
            let x = instance(&info.meters, m.meter_id, "meter")?;
            let cells = sw.cells(&x.target).unwrap_or(0);
            let i = index(m.index.as_ref(), cells, &x.preamble.name)?
                .ok_or_else(|| invalid(format!("{}: a meter cell is written by its index", x.preamble.name)))?;
            let config = m.config.as_ref().ok_or_else(|| invalid("a meter entry needs its config".into()))?;
            let [cir, cburst, pir, pburst] = rates(config)?;
            sw.set_meter(&x.target, i, cir, cburst, pir, pburst).map_err(invalid)
        }
        Some(E::DirectMeterEntry(m)) if kind == U::Modify => {
            let e =
                m.table_entry.as_ref().ok_or_else(|| invalid("a direct meter entry names its table entry".into()))?;
            let t = table(info, e.table_id)?;
            let keys = matches(t, &e.r#match)?;
            let config = m.config.as_ref().ok_or_else(|| invalid("a direct meter entry needs its config".into()))?;
            sw.set_entry_meter(&t.target, &keys, e.priority as i64, rates(config)?).map_err(invalid)
        }
        Some(E::RegisterEntry(r)) if kind == U::Modify => {
            let x = instance(&info.registers, r.register_id, "register")?;
            let cells = sw.cells(&x.target).unwrap_or(0);
            let i = index(r.index.as_ref(), cells, &x.preamble.name)?
                .ok_or_else(|| invalid(format!("{}: a register cell is written by its index", x.preamble.name)))?;
            let value = match r.data.as_ref().and_then(|d| d.data.as_ref()) {
                Some(pb::p4_data::Data::Bitstring(b)) => decode(b, x.bitwidth, &x.preamble.name)?,
                _ => return Err(invalid(format!("{}: its cells are bitstrings", x.preamble.name))),
            };
            sw.set_register(&x.target, i, value).map_err(invalid)
        }
        Some(E::CounterEntry(_) | E::MeterEntry(_) | E::DirectMeterEntry(_) | E::RegisterEntry(_)) => {
            Err(invalid("counter, meter and register entries are only modified".into()))
        }
        Some(E::DirectCounterEntry(_)) => Err(Status::unimplemented("writing direct counters")),
        Some(other) => Err(Status::unimplemented(format!("{} entities", entity_kind(other)))),
        None => Err(invalid("an update without an entity".into())),
    }
}

/// A write request's updates applied to the running program, one by one (CONTINUE_ON_ERROR),
/// each with its outcome: what `Write` does on the forwarding thread once the request is the
/// primary's. Public for the fuzz target `p4runtime_handlers`.
pub fn apply_updates(sw: &mut Switch, updates: &[pb::Update]) -> Vec<Result<(), Status>> {
    let info = sw.info();
    updates.iter().map(|u| update(sw, &info, u)).collect()
}

/// A write's outcome as P4Runtime reports a batch (§12.3): OK, or UNKNOWN with one p4.v1.Error
/// per update in the details, in the updates' order.
pub(super) fn batch_status(results: Vec<Result<(), Status>>) -> Result<(), Status> {
    let failed = results.iter().filter(|r| r.is_err()).count();
    if failed == 0 {
        return Ok(());
    }
    let details = results
        .iter()
        .map(|r| {
            let error = match r {
                Ok(()) => pb::Error { canonical_code: Code::Ok as i32, ..Default::default() },
                Err(s) => pb::Error {
                    canonical_code: s.code() as i32,
                    message: s.message().to_string(),
                    ..Default::default()
                },
            };
            prost_types::Any { type_url: "type.googleapis.com/p4.v1.Error".into(), value: error.encode_to_vec() }
        })
        .collect();
    let first = results.into_iter().find_map(Result::err).expect("one failed");
    let message = format!("{failed} update(s) failed; the first: {}", first.message());
    let status = rpc::Status { code: Code::Unknown as i32, message: message.clone(), details };
    Err(Status::with_details(Code::Unknown, message, status.encode_to_vec().into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_batch_names_each_updates_outcome_in_order() {
        let status = batch_status(vec![Ok(()), Err(Status::already_exists("twice")), Ok(())]).unwrap_err();
        assert_eq!((status.code(), status.message()), (Code::Unknown, "1 update(s) failed; the first: twice"));
        let details = rpc::Status::decode(status.details()).unwrap();
        let codes: Vec<i32> =
            details.details.iter().map(|a| pb::Error::decode(a.value.as_slice()).unwrap().canonical_code).collect();
        assert_eq!(codes, [Code::Ok as i32, Code::AlreadyExists as i32, Code::Ok as i32]);
        assert!(batch_status(vec![Ok(())]).is_ok());
    }
}
