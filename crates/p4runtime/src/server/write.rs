//! Write requests: each update applied to the running program, and the batch's outcome as
//! P4Runtime reports it (§12).

use std::cmp::Ordering;

use p4::backends::software::Switch;
use p4::info::Info;
use prost::Message;
use tonic::{Code, Status};

use super::entity::*;
use crate::codec::decode;
use crate::proto::google::rpc;
use crate::proto::p4::v1 as pb;
pub use crate::proto::p4::v1::write_request::Atomicity;

/// One update of a write request, on the switch. An update that fails changes nothing.
pub(super) fn update(sw: &mut Switch, info: &Info, u: &pb::Update) -> Result<(), Status> {
    use pb::entity::Entity as E;
    use pb::update::Type as U;
    let kind = U::try_from(u.r#type).map_err(|_| Status::invalid_argument("an update of unknown type"))?;
    let entity = u.entity.as_ref().and_then(|e| e.entity.as_ref());
    let invalid = |e: String| Status::invalid_argument(e);
    match entity {
        Some(E::TableEntry(e)) if e.is_default_action => default_entry(sw, info, kind, e),
        Some(E::TableEntry(e)) => table_entry(sw, info, kind, e),
        Some(E::PacketReplicationEngineEntry(p)) => super::pre::update(sw, kind, p),
        Some(E::ActionProfileMember(m)) => super::profile::member(sw, info, kind, m),
        Some(E::ActionProfileGroup(g)) => super::profile::group(sw, info, kind, g),
        Some(E::ValueSetEntry(v)) => super::value_set::write(sw, info, kind, v),
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
            if !has_entry(sw, &t.target, &keys, e.priority as i64) {
                return Err(Status::not_found(format!("{}: no such entry", t.preamble.name)));
            }
            sw.set_entry_meter(&t.target, &keys, e.priority as i64, rates(config)?).map_err(invalid)
        }
        Some(E::DirectCounterEntry(c)) if kind == U::Modify => {
            let e =
                c.table_entry.as_ref().ok_or_else(|| invalid("a direct counter entry names its table entry".into()))?;
            let t = table(info, e.table_id)?;
            if t.direct_counter.is_none() {
                return Err(invalid(format!("{} has no direct counter", t.preamble.name)));
            }
            let keys = matches(t, &e.r#match)?;
            let Some(data) = c.data else { return Ok(()) }; // P4Runtime: no data, no change
            let [packets, bytes] = counts(&data)?;
            sw.set_entry_counts(&t.target, &keys, e.priority as i64, packets, bytes).map_err(Status::not_found)
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
        Some(
            E::CounterEntry(_)
            | E::DirectCounterEntry(_)
            | E::MeterEntry(_)
            | E::DirectMeterEntry(_)
            | E::RegisterEntry(_),
        ) => Err(invalid("counter, meter and register entries are only modified".into())),
        Some(other) => Err(Status::unimplemented(format!("{} entities", entity_kind(other)))),
        None => Err(invalid("an update without an entity".into())),
    }
}

fn has_entry(sw: &Switch, table: &str, keys: &[p4::backends::software::Match], priority: i64) -> bool {
    sw.entries(table).is_some_and(|es| es.iter().any(|x| x.keys == keys && x.priority == priority))
}

fn counts(data: &pb::CounterData) -> Result<[u64; 2], Status> {
    if data.packet_count < 0 || data.byte_count < 0 {
        return Err(Status::invalid_argument("counts are not negative"));
    }
    Ok([data.packet_count as u64, data.byte_count as u64])
}

/// What no table entry written here may carry: idle timeouts (no table of edgeflow's supports
/// them, so P4Info says NO_TIMEOUT for each) and the time since a hit, which only a read asks for.
fn no_idle_timeout(t: &p4::info::TableInfo, e: &pb::TableEntry) -> Result<(), Status> {
    if e.idle_timeout_ns != 0 {
        return Err(Status::invalid_argument(format!(
            "{}: idle_timeout_ns: the table does not support idle timeouts",
            t.preamble.name
        )));
    }
    if e.time_since_last_hit.is_some() {
        return Err(Status::invalid_argument(format!("{}: time_since_last_hit is only read", t.preamble.name)));
    }
    Ok(())
}

/// A MODIFY of `t`'s default entry (§9.1.1): to the action given, or with none back to the
/// program's own; never an INSERT or DELETE, with no match or priority, and not where the
/// program fixed it (`const default_action`).
fn default_entry(sw: &mut Switch, info: &Info, kind: pb::update::Type, e: &pb::TableEntry) -> Result<(), Status> {
    let t = table(info, e.table_id)?;
    let invalid = |what: &str| Err(Status::invalid_argument(format!("{}: {what}", t.preamble.name)));
    if kind != pb::update::Type::Modify {
        return invalid("the default entry is only modified");
    }
    if !e.r#match.is_empty() || e.priority != 0 {
        return invalid("the default entry has no match and no priority");
    }
    no_idle_timeout(t, e)?;
    if e.counter_data.is_some() || e.meter_config.is_some() {
        return invalid("the default entry has no direct counter or meter cell");
    }
    if matches!(t.default_action, Some((_, true))) {
        return Err(Status::permission_denied(format!(
            "{}: its default action is the program's (const default_action)",
            t.preamble.name
        )));
    }
    let (name, args) = match e.action.as_ref() {
        Some(_) => action(info, t, e.action.as_ref())?,
        None => {
            // The program's own default, kept from loading.
            let (name, args) =
                sw.program_default_action(&t.target).ok_or_else(|| Status::not_found("no such table"))?;
            (name.to_string(), args.to_vec())
        }
    };
    sw.set_default_action(&t.target, &name, args).map_err(Status::invalid_argument)
}

/// An INSERT, MODIFY or DELETE of one of `t`'s entries, with its direct counter and meter cells.
fn table_entry(sw: &mut Switch, info: &Info, kind: pb::update::Type, e: &pb::TableEntry) -> Result<(), Status> {
    use pb::update::Type as U;
    let t = table(info, e.table_id)?;
    let invalid = |e: String| Status::invalid_argument(e);
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
    let exists = has_entry(sw, &t.target, &keys, priority);
    match kind {
        U::Insert | U::Modify => {
            if kind == U::Insert && exists {
                return Err(Status::already_exists(format!("{}: the entry exists", t.preamble.name)));
            }
            if kind == U::Modify && !exists {
                return Err(Status::not_found(format!("{}: no such entry", t.preamble.name)));
            }
            if kind == U::Insert && sw.entries(&t.target).map_or(0, |es| es.len()) as u64 >= t.size {
                return Err(Status::resource_exhausted(format!("{} is full ({} entries)", t.preamble.name, t.size)));
            }
            no_idle_timeout(t, e)?;
            // A table with an action profile: its entry names a member or group, or carries a
            // one-shot action set; else an action.
            let what = match t.implementation {
                Some(_) => Err(super::profile::indirect(info, t, e.action.as_ref())?),
                None => Ok(action(info, t, e.action.as_ref())?),
            };
            // Everything checked before the entry changes, so that a refused update changes nothing.
            let meter = match &e.meter_config {
                Some(_) if t.direct_meter.is_none() => {
                    return Err(invalid(format!("{} has no direct meter", t.preamble.name)));
                }
                Some(c) => Some(rates(c)?),
                None => None,
            };
            let counts = match &e.counter_data {
                Some(_) if t.direct_counter.is_none() => {
                    return Err(invalid(format!("{} has no direct counter", t.preamble.name)));
                }
                Some(c) => Some(counts(c)?),
                None => None,
            };
            let before = sw
                .entries(&t.target)
                .and_then(|es| es.iter().find(|x| x.keys == keys && x.priority == priority))
                .map(|x| (x.action.clone(), x.args.clone(), x.indirect.clone()));
            match what {
                Ok((name, args)) => sw.insert(&t.target, keys.clone(), &name, args, priority).map_err(invalid)?,
                Err(to) => sw.insert_indirect(&t.target, keys.clone(), to, priority).map_err(super::profile::status)?,
            }
            let cells = meter
                .map_or(Ok(()), |r| sw.set_entry_meter(&t.target, &keys, priority, r))
                .and_then(|()| counts.map_or(Ok(()), |[p, b]| sw.set_entry_counts(&t.target, &keys, priority, p, b)));
            if let Err(refused) = cells {
                // A meter's rates the target refuses (a peak below the committed rate): the entry
                // goes back to what it was.
                match before {
                    Some((_, _, Some(to))) => {
                        sw.insert_indirect(&t.target, keys, to, priority).map_err(|e| e.to_string())
                    }
                    Some((action, args, None)) => sw.insert(&t.target, keys, &action, args, priority),
                    None => sw.delete(&t.target, &keys, priority),
                }
                .map_err(Status::internal)?;
                return Err(invalid(refused));
            }
            Ok(())
        }
        U::Delete => sw.delete(&t.target, &keys, priority).map_err(Status::not_found),
        U::Unspecified => Err(invalid("an update of unspecified type".into())),
    }
}

/// A write request's updates applied to the running program, one by one (CONTINUE_ON_ERROR),
/// each with its outcome. Public for the fuzz target `p4runtime_handlers`.
pub fn apply_updates(sw: &mut Switch, updates: &[pb::Update]) -> Vec<Result<(), Status>> {
    let info = sw.info();
    updates.iter().map(|u| update(sw, &info, u)).collect()
}

/// A write request's updates applied as its atomicity asks (§12.2), each with its outcome: what
/// `Write` does on the forwarding thread once the request is the primary's.
///
/// CONTINUE_ON_ERROR tries every update. ROLLBACK_ON_ERROR and DATAPLANE_ATOMIC apply all or
/// none: on a copy of the switch's state taken first, restored when an update fails; the failed
/// update carries its own error and every other one ABORTED, saying whether it had been applied
/// and undone or was not tried. The whole batch runs between two frames, so no frame sees part
/// of it in userspace; the kernel's copy of the tables follows once the batch is done.
pub fn apply_batch(sw: &mut Switch, updates: &[pb::Update], atomicity: Atomicity) -> Vec<Result<(), Status>> {
    if atomicity == Atomicity::ContinueOnError {
        return apply_updates(sw, updates);
    }
    let info = sw.info();
    let before = sw.snapshot();
    for (at, u) in updates.iter().enumerate() {
        if let Err(failed) = update(sw, &info, u) {
            *sw = before;
            return all_or_nothing(failed, at, updates.len());
        }
    }
    vec![Ok(()); updates.len()]
}

/// The answers to a batch of `len` updates undone because update `at` failed.
pub(super) fn all_or_nothing(failed: Status, at: usize, len: usize) -> Vec<Result<(), Status>> {
    (0..len)
        .map(|i| {
            Err(match i.cmp(&at) {
                Ordering::Less => Status::aborted(format!("rolled back: update {at} of the batch failed")),
                Ordering::Equal => failed.clone(),
                Ordering::Greater => Status::aborted(format!("not tried: update {at} of the batch failed")),
            })
        })
        .collect()
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
    use super::super::read::read_entities;
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

    /// A table with a direct counter and meter, and one whose default the program fixed.
    const PROGRAM: &str = r#"
#include <core.p4>
#include <edgeflow.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }
struct headers_t { eth_t eth; }
struct meta_t { }
parser P(packet_in packet, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { packet.extract(hdr.eth); transition accept; }
}
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    direct_counter(CounterType.packets_and_bytes) hits;
    direct_meter<bit<2>>(MeterType.packets) rate;
    action to(PortId_t port) { sm.egress_port = port; }
    table t {
        key = { hdr.eth.dst : exact; }
        actions = { to; NoAction; }
        default_action = NoAction();
        counters = hits;
        meters = rate;
        size = 8;
    }
    table fixed {
        key = { hdr.eth.src : exact; }
        actions = { to; NoAction; }
        const default_action = to(1);
        size = 8;
    }
    apply { t.apply(); fixed.apply(); }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out packet, in headers_t hdr) { apply { packet.emit(hdr.eth); } }
EdgeflowSwitch(P(), I(), E(), D()) main;
"#;

    /// Table t as a PSA program writes it: its direct externs by `psa_direct_counter` and
    /// `psa_direct_meter`, which its action calls.
    const PSA_PROGRAM: &str = r#"
#include <core.p4>
#include <psa.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }
struct headers_t { eth_t eth; }
struct meta_t { }
struct empty_t { }
parser IP(packet_in packet, out headers_t hdr, inout meta_t meta, in psa_ingress_parser_input_metadata_t istd,
          in empty_t resubmit_meta, in empty_t recirculate_meta) {
    state start { packet.extract(hdr.eth); transition accept; }
}
control I(inout headers_t hdr, inout meta_t meta, in psa_ingress_input_metadata_t istd,
          inout psa_ingress_output_metadata_t ostd) {
    DirectCounter<bit<64>>(PSA_CounterType_t.PACKETS_AND_BYTES) hits;
    DirectMeter(PSA_MeterType_t.PACKETS) rate;
    action to(PortId_t port) {
        hits.count();
        if (rate.execute() != PSA_MeterColor_t.RED) { send_to_port(ostd, port); }
    }
    table t {
        key = { hdr.eth.dst : exact; }
        actions = { to; NoAction; }
        default_action = NoAction();
        psa_direct_counter = hits;
        psa_direct_meter = rate;
        size = 8;
    }
    apply { t.apply(); }
}
control ID(packet_out packet, out empty_t clone_i2e_meta, out empty_t resubmit_meta, out empty_t normal_meta,
           inout headers_t hdr, in meta_t meta, in psa_ingress_output_metadata_t istd) {
    apply { packet.emit(hdr.eth); }
}
parser EP(packet_in packet, out headers_t hdr, inout meta_t meta, in psa_egress_parser_input_metadata_t istd,
          in empty_t normal_meta, in empty_t clone_i2e_meta, in empty_t clone_e2e_meta) {
    state start { transition accept; }
}
control E(inout headers_t hdr, inout meta_t meta, in psa_egress_input_metadata_t istd,
          inout psa_egress_output_metadata_t ostd) { apply { } }
control ED(packet_out packet, out empty_t clone_e2e_meta, out empty_t recirculate_meta, inout headers_t hdr,
           in meta_t meta, in psa_egress_output_metadata_t istd, in psa_egress_deparser_input_metadata_t edstd) {
    apply { }
}
IngressPipeline(IP(), I(), ID()) ip;
EgressPipeline(EP(), E(), ED()) ep;
PSA_Switch(ip, PacketReplicationEngine(), ep, BufferingQueueingEngine()) main;
"#;

    fn switch() -> Switch {
        switch_of(PROGRAM)
    }

    fn switch_of(text: &str) -> Switch {
        let (program, checked) = p4::front_end("test.p4", text).unwrap();
        Switch::new(program, checked).unwrap()
    }

    fn id(info: &Info, table: &str) -> u32 {
        info.tables.iter().find(|t| t.preamble.name == table).unwrap().preamble.id
    }

    fn to(info: &Info, port: u8) -> Option<pb::TableAction> {
        let to = info.action_named("to").unwrap().preamble.id;
        let params = vec![pb::action::Param { param_id: 1, value: vec![port] }];
        Some(pb::TableAction { r#type: Some(pb::table_action::Type::Action(pb::Action { action_id: to, params })) })
    }

    /// Table t's entry for destination `dst`, to port `port`.
    fn entry(info: &Info, dst: u8, port: u8) -> pb::TableEntry {
        use pb::field_match::{Exact, FieldMatchType as F};
        pb::TableEntry {
            table_id: id(info, "I.t"),
            r#match: vec![pb::FieldMatch { field_id: 1, field_match_type: Some(F::Exact(Exact { value: vec![dst] })) }],
            action: to(info, port),
            ..Default::default()
        }
    }

    fn up(kind: pb::update::Type, e: pb::entity::Entity) -> pb::Update {
        pb::Update { r#type: kind as i32, entity: Some(pb::Entity { entity: Some(e) }) }
    }

    fn one(sw: &mut Switch, kind: pb::update::Type, e: pb::entity::Entity) -> Result<(), Code> {
        apply_updates(sw, &[up(kind, e)]).remove(0).map_err(|s| s.code())
    }

    fn ports(sw: &Switch) -> Vec<(u128, u128)> {
        let keys = |e: &p4::backends::software::Entry| match e.keys[0] {
            p4::backends::software::Match::Exact(v) => v,
            _ => unreachable!(),
        };
        sw.entries("I.t").unwrap().iter().map(|e| (keys(e), e.args[0])).collect()
    }

    #[test]
    fn a_default_entry_write_is_refused_for_its_real_cause_and_reset_without_an_action() {
        use pb::entity::Entity as E;
        use pb::update::Type::{Insert, Modify};
        let mut sw = switch();
        let info = sw.info();
        let default = |info: &Info, table: &str, action| pb::TableEntry {
            table_id: id(info, table),
            action,
            is_default_action: true,
            ..Default::default()
        };
        let fixed = default(&info, "I.fixed", to(&info, 2));
        assert_eq!(one(&mut sw, Modify, E::TableEntry(fixed)), Err(Code::PermissionDenied));
        let mut wrong = default(&info, "I.t", to(&info, 2));
        if let Some(pb::table_action::Type::Action(a)) = wrong.action.as_mut().and_then(|a| a.r#type.as_mut()) {
            a.params.clear();
        }
        assert_eq!(one(&mut sw, Modify, E::TableEntry(wrong)), Err(Code::InvalidArgument), "a parameter missing");
        let elsewhere = pb::TableEntry { table_id: 0x02ff_ffff, ..default(&info, "I.t", to(&info, 2)) };
        assert_eq!(one(&mut sw, Modify, E::TableEntry(elsewhere)), Err(Code::NotFound));
        let matched = pb::TableEntry { r#match: entry(&info, 1, 2).r#match, ..default(&info, "I.t", to(&info, 2)) };
        assert_eq!(one(&mut sw, Modify, E::TableEntry(matched)), Err(Code::InvalidArgument), "a default has no match");
        assert_eq!(
            one(&mut sw, Insert, E::TableEntry(default(&info, "I.t", to(&info, 2)))),
            Err(Code::InvalidArgument)
        );
        assert_eq!(sw.default_action("I.t"), Some(("NoAction", &[][..])), "nothing refused changed it");
        assert_eq!(one(&mut sw, Modify, E::TableEntry(default(&info, "I.t", to(&info, 2)))), Ok(()));
        assert_eq!(sw.default_action("I.t"), Some(("to", &[2u128][..])));
        // No action: back to the program's.
        assert_eq!(one(&mut sw, Modify, E::TableEntry(default(&info, "I.t", None))), Ok(()));
        assert_eq!(sw.default_action("I.t"), Some(("NoAction", &[][..])));
    }

    #[test]
    fn an_idle_timeout_is_refused_on_a_table_without_one() {
        let mut sw = switch();
        let info = sw.info();
        let timed = pb::TableEntry { idle_timeout_ns: 1_000_000_000, ..entry(&info, 1, 2) };
        let refused = apply_updates(&mut sw, &[up(pb::update::Type::Insert, pb::entity::Entity::TableEntry(timed))]);
        let refused = refused[0].as_ref().unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument);
        assert!(refused.message().contains("idle"), "{}", refused.message());
        assert!(ports(&sw).is_empty());
    }

    #[test]
    fn direct_counters_are_written_and_direct_meters_read() {
        direct_cells_are_written_and_read(switch());
    }

    #[test]
    fn psa_direct_counters_and_meters_are_written_and_read_as_v1models() {
        direct_cells_are_written_and_read(switch_of(PSA_PROGRAM));
    }

    fn direct_cells_are_written_and_read(mut sw: Switch) {
        use pb::entity::Entity as E;
        use pb::update::Type::{Insert, Modify};
        let info = sw.info();
        let config = pb::MeterConfig { cir: 10, cburst: 5, pir: 20, pburst: 5, eburst: 0 };
        let metered = pb::TableEntry { meter_config: Some(config), ..entry(&info, 1, 2) };
        assert_eq!(one(&mut sw, Insert, E::TableEntry(metered)), Ok(()));
        let data = pb::CounterData { packet_count: 7, byte_count: 700 };
        let cell = |dst| pb::DirectCounterEntry { table_entry: Some(entry(&info, dst, 2)), data: Some(data) };
        assert_eq!(one(&mut sw, Modify, E::DirectCounterEntry(cell(1))), Ok(()));
        assert_eq!(one(&mut sw, Modify, E::DirectCounterEntry(cell(9))), Err(Code::NotFound), "no such entry");
        let read = |sw: &Switch, e: E| read_entities(sw, &[pb::Entity { entity: Some(e) }]).unwrap();
        let counted = read(&sw, E::DirectCounterEntry(pb::DirectCounterEntry::default()));
        let Some(E::DirectCounterEntry(c)) = &counted[0].entity else { panic!("{counted:?}") };
        assert_eq!((counted.len(), c.data), (1, Some(data)));
        let metered = read(&sw, E::DirectMeterEntry(pb::DirectMeterEntry::default()));
        let Some(E::DirectMeterEntry(m)) = &metered[0].entity else { panic!("{metered:?}") };
        assert_eq!((metered.len(), m.config), (1, Some(config)));
        // Rates the target refuses (peak below committed): the entry they came with is not added.
        let bad = pb::MeterConfig { cir: 20, pir: 10, ..config };
        let refused = pb::TableEntry { meter_config: Some(bad), ..entry(&info, 3, 2) };
        assert_eq!(one(&mut sw, Insert, E::TableEntry(refused)), Err(Code::InvalidArgument));
        assert_eq!(ports(&sw), [(1, 2)]);
    }

    #[test]
    fn an_atomic_batch_applies_all_its_updates_or_none() {
        use pb::entity::Entity as E;
        use pb::update::Type::{Insert, Modify};
        let mut sw = switch();
        let info = sw.info();
        assert_eq!(one(&mut sw, Insert, E::TableEntry(entry(&info, 1, 2))), Ok(()));
        let batch = [
            up(Modify, E::TableEntry(entry(&info, 1, 5))),
            up(Insert, E::TableEntry(entry(&info, 2, 2))),
            up(Insert, E::TableEntry(entry(&info, 1, 3))),
            up(Insert, E::TableEntry(entry(&info, 4, 2))),
        ];
        let generation = sw.generation();
        for atomicity in [Atomicity::RollbackOnError, Atomicity::DataplaneAtomic] {
            let results = apply_batch(&mut sw, &batch, atomicity);
            let codes: Vec<Code> = results.iter().map(|r| r.as_ref().unwrap_err().code()).collect();
            assert_eq!(codes, [Code::Aborted, Code::Aborted, Code::AlreadyExists, Code::Aborted]);
            assert!(results[0].as_ref().unwrap_err().message().starts_with("rolled back: update 2"));
            assert!(results[3].as_ref().unwrap_err().message().starts_with("not tried: update 2"));
            assert_eq!(ports(&sw), [(1, 2)], "{atomicity:?}: the modify and the insert before the failure undone");
            assert_eq!(sw.generation(), generation, "nothing changed, so the kernel's copy has nothing to follow");
        }
        let results = apply_batch(&mut sw, &batch, Atomicity::ContinueOnError);
        assert!(results[2].is_err() && results.iter().filter(|r| r.is_ok()).count() == 3);
        assert_eq!(ports(&sw), [(1, 5), (2, 2), (4, 2)]);
        let batch = [up(Modify, E::TableEntry(entry(&info, 1, 6))), up(Insert, E::TableEntry(entry(&info, 5, 2)))];
        assert!(apply_batch(&mut sw, &batch, Atomicity::DataplaneAtomic).iter().all(Result::is_ok));
        assert_eq!(ports(&sw), [(1, 6), (2, 2), (4, 2), (5, 2)]);
    }
}
