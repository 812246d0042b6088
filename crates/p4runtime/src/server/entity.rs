//! P4Runtime's entities and the software target's values, both ways: an entry's matches, its
//! action and data, meter rates, cell indexes (P4Runtime §9).

use p4::backends::software::Match;
use p4::info::{ExternInfo, Info, KeyField, TableInfo};
use tonic::Status;

use crate::codec::{decode, encode};
use crate::proto::p4::v1 as pb;

/// Whether a table's entries carry a priority: a ternary, range or optional key orders them.
pub(super) fn prioritised(t: &TableInfo) -> bool {
    t.keys.iter().any(|k| matches!(k.match_kind.as_str(), "ternary" | "range" | "optional"))
}

pub(super) fn all_ones(width: u32) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

/// The target's matches for an entry's fields, one per key in the table's order.
pub(super) fn matches(t: &TableInfo, fields: &[pb::FieldMatch]) -> Result<Vec<Match>, Status> {
    key_matches(&t.preamble.name, &t.keys, fields)
}

/// The target's matches for fields given against `keys` (a table's, or a value set's members'),
/// one per key in order; `owner` names them in errors.
pub(super) fn key_matches(owner: &str, keys: &[KeyField], fields: &[pb::FieldMatch]) -> Result<Vec<Match>, Status> {
    use pb::field_match::FieldMatchType as F;
    for (i, f) in fields.iter().enumerate() {
        if !keys.iter().any(|k| k.id == f.field_id) {
            return Err(Status::invalid_argument(format!("{owner} has no match field {}", f.field_id)));
        }
        if fields[..i].iter().any(|g| g.field_id == f.field_id) {
            return Err(Status::invalid_argument(format!("match field {} given twice", f.field_id)));
        }
    }
    let mut out = Vec::new();
    for k in keys {
        let what = format!("{owner}: {}", k.name);
        let w = k.bitwidth;
        let field = fields.iter().find(|f| f.field_id == k.id).and_then(|f| f.field_match_type.as_ref());
        out.push(match (k.match_kind.as_str(), field) {
            ("exact", None) => return Err(Status::invalid_argument(format!("{what}: an exact field must be given"))),
            ("range", None) => Match::Range { low: 0, high: all_ones(w) },
            (_, None) => Match::Any,
            ("exact", Some(F::Exact(e))) => Match::Exact(decode(&e.value, w, &what)?),
            ("ternary", Some(F::Ternary(t))) => {
                let value = decode(&t.value, w, &what)?;
                let mask = decode(&t.mask, w, &what)?;
                if mask == 0 {
                    return Err(Status::invalid_argument(format!(
                        "{what}: a wildcard is written by leaving the field out"
                    )));
                }
                if value & !mask != 0 {
                    return Err(Status::invalid_argument(format!("{what}: the value has bits outside the mask")));
                }
                Match::Ternary { value, mask }
            }
            ("lpm", Some(F::Lpm(l))) => {
                let value = decode(&l.value, w, &what)?;
                let prefix = l.prefix_len;
                if prefix <= 0 || prefix as u32 > w {
                    return Err(Status::invalid_argument(format!(
                        "{what}: prefix length {prefix} (1 to {w}; a wildcard is written by leaving the field out)"
                    )));
                }
                if value & all_ones(w - prefix as u32) != 0 {
                    return Err(Status::invalid_argument(format!("{what}: the value has bits past the prefix")));
                }
                Match::Lpm { value, prefix: prefix as u32 }
            }
            ("range", Some(F::Range(r))) => {
                let (low, high) = (decode(&r.low, w, &what)?, decode(&r.high, w, &what)?);
                if low > high {
                    return Err(Status::invalid_argument(format!("{what}: the range's low end is above its high end")));
                }
                Match::Range { low, high }
            }
            (kind, Some(_)) => return Err(Status::invalid_argument(format!("{what}: a {kind} field"))),
        });
    }
    Ok(out)
}

/// An entry's fields as P4Runtime writes them: wildcards left out.
pub(super) fn fields(t: &TableInfo, keys: &[Match]) -> Vec<pb::FieldMatch> {
    key_fields(&t.keys, keys)
}

/// Matches against `fields` (a table's keys, a value set's) as P4Runtime writes them.
pub(super) fn key_fields(fields: &[KeyField], keys: &[Match]) -> Vec<pb::FieldMatch> {
    use pb::field_match::{self as fm, FieldMatchType as F};
    fields
        .iter()
        .zip(keys)
        .filter_map(|(k, m)| {
            let kind = match *m {
                Match::Exact(v) => F::Exact(fm::Exact { value: encode(v) }),
                Match::Ternary { value, mask } => F::Ternary(fm::Ternary { value: encode(value), mask: encode(mask) }),
                Match::Lpm { prefix: 0, .. } | Match::Any => return None,
                Match::Lpm { value, prefix } => F::Lpm(fm::Lpm { value: encode(value), prefix_len: prefix as i32 }),
                Match::Range { low: 0, high } if high == all_ones(k.bitwidth) => return None,
                Match::Range { low, high } => F::Range(fm::Range { low: encode(low), high: encode(high) }),
            };
            Some(pb::FieldMatch { field_id: k.id, field_match_type: Some(kind) })
        })
        .collect()
}

/// The counter, meter or register instance with this id.
pub(super) fn instance<'i>(list: &'i [ExternInfo], id: u32, kind: &str) -> Result<&'i ExternInfo, Status> {
    list.iter().find(|x| x.preamble.id == id).ok_or_else(|| Status::not_found(format!("no {kind} {id:#x}")))
}

pub(super) fn table(info: &Info, id: u32) -> Result<&TableInfo, Status> {
    info.table(id).ok_or_else(|| Status::not_found(format!("no table {id:#x}")))
}

/// The target's action name and data for an entry's action.
pub(super) fn action(info: &Info, t: &TableInfo, a: Option<&pb::TableAction>) -> Result<(String, Vec<u128>), Status> {
    use pb::table_action::Type;
    let a = match a.and_then(|a| a.r#type.as_ref()) {
        Some(Type::Action(a)) => a,
        Some(_) => {
            return Err(Status::invalid_argument(format!(
                "{} has no action profile: its entries take an action, not a member, group or action set",
                t.preamble.name
            )))
        }
        None => return Err(Status::invalid_argument(format!("{}: an entry needs an action", t.preamble.name))),
    };
    if !t.action_ids.contains(&a.action_id) {
        return Err(Status::invalid_argument(format!("{} has no action {:#x}", t.preamble.name, a.action_id)));
    }
    action_data(info, a)
}

/// The target's action name and data for an action, whatever table it is for (an action
/// profile's member: the target checks it against the profile's tables).
pub(super) fn action_data(info: &Info, a: &pb::Action) -> Result<(String, Vec<u128>), Status> {
    let info = info.action(a.action_id).ok_or_else(|| Status::not_found(format!("no action {:#x}", a.action_id)))?;
    let mut args = Vec::new();
    for p in &info.params {
        let given = a.params.iter().filter(|g| g.param_id == p.id).collect::<Vec<_>>();
        let [given] = given.as_slice() else {
            return Err(Status::invalid_argument(format!(
                "{}: parameter {} must be given once",
                info.preamble.name, p.name
            )));
        };
        args.push(decode(&given.value, p.bitwidth, &format!("{}: {}", info.preamble.name, p.name))?);
    }
    if a.params.len() != info.params.len() {
        return Err(Status::invalid_argument(format!(
            "{} takes {} parameter(s)",
            info.preamble.name,
            info.params.len()
        )));
    }
    Ok((info.target.clone(), args))
}

pub(super) fn action_message(info: &Info, t: &TableInfo, name: &str, args: &[u128]) -> Option<pb::TableAction> {
    let a = t.action_ids.iter().filter_map(|&id| info.action(id)).find(|a| a.target == name)?;
    let params =
        a.params.iter().zip(args).map(|(p, &v)| pb::action::Param { param_id: p.id, value: encode(v) }).collect();
    Some(pb::TableAction {
        r#type: Some(pb::table_action::Type::Action(pb::Action { action_id: a.preamble.id, params })),
    })
}

/// An action profile member's action as P4Runtime writes it.
pub(super) fn action_of(info: &Info, name: &str, args: &[u128]) -> Option<pb::Action> {
    let a = info.action_named(name)?;
    let params =
        a.params.iter().zip(args).map(|(p, &v)| pb::action::Param { param_id: p.id, value: encode(v) }).collect();
    Some(pb::Action { action_id: a.preamble.id, params })
}

pub(super) fn rates(c: &pb::MeterConfig) -> Result<[u64; 4], Status> {
    let r = [c.cir, c.cburst, c.pir, c.pburst];
    if r.iter().any(|&x| x < 0) {
        return Err(Status::invalid_argument("meter rates and bursts are not negative"));
    }
    Ok(r.map(|x| x as u64))
}

pub(super) fn meter_config(r: Option<[u64; 4]>) -> Option<pb::MeterConfig> {
    r.map(|[cir, cburst, pir, pburst]| pb::MeterConfig {
        cir: cir as i64,
        cburst: cburst as i64,
        pir: pir as i64,
        pburst: pburst as i64,
        eburst: 0,
    })
}

pub(super) fn index(i: Option<&pb::Index>, size: usize, what: &str) -> Result<Option<usize>, Status> {
    match i {
        None => Ok(None),
        Some(i) if i.index >= 0 && (i.index as usize) < size => Ok(Some(i.index as usize)),
        Some(i) => Err(Status::out_of_range(format!("{what} has {size} cells; {} is not one", i.index))),
    }
}

pub(super) fn entity_kind(e: &pb::entity::Entity) -> &'static str {
    use pb::entity::Entity as E;
    match e {
        E::ExternEntry(_) => "extern",
        E::TableEntry(_) => "table",
        E::ActionProfileMember(_) | E::ActionProfileGroup(_) => "action profile",
        E::MeterEntry(_) | E::DirectMeterEntry(_) => "meter",
        E::CounterEntry(_) | E::DirectCounterEntry(_) => "counter",
        E::PacketReplicationEngineEntry(_) => "packet replication engine",
        E::ValueSetEntry(_) => "value set",
        E::RegisterEntry(_) => "register",
        E::DigestEntry(_) => "digest",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p4::info::{KeyField, Preamble};
    use tonic::Code;

    fn table(kinds: &[(&str, u32)]) -> TableInfo {
        TableInfo {
            preamble: Preamble { id: 0x0200_0001, name: "I.t".into(), alias: "t".into() },
            target: "I.t".into(),
            keys: kinds
                .iter()
                .enumerate()
                .map(|(i, (kind, width))| KeyField {
                    id: i as u32 + 1,
                    name: format!("k{}", i + 1),
                    bitwidth: *width,
                    match_kind: kind.to_string(),
                })
                .collect(),
            action_ids: vec![],
            default_action: None,
            size: 16,
            is_const: false,
            direct_counter: None,
            direct_meter: None,
            implementation: None,
        }
    }

    fn field(id: u32, kind: pb::field_match::FieldMatchType) -> pb::FieldMatch {
        pb::FieldMatch { field_id: id, field_match_type: Some(kind) }
    }

    #[test]
    fn matches_follow_p4runtimes_rules_and_read_back_as_written() {
        use pb::field_match::{Exact, FieldMatchType as F, Lpm, Range, Ternary};
        let t = table(&[("exact", 16), ("lpm", 32), ("ternary", 8), ("range", 8)]);
        let exact = field(1, F::Exact(Exact { value: vec![0, 0, 7] }));
        // Left out: a wildcard, a full range.
        let keys = matches(&t, std::slice::from_ref(&exact)).unwrap();
        assert_eq!(keys, [Match::Exact(7), Match::Any, Match::Any, Match::Range { low: 0, high: 255 }]);
        assert_eq!(fields(&t, &keys), [field(1, F::Exact(Exact { value: vec![7] }))], "canonical, wildcards out");
        let full = vec![
            exact.clone(),
            field(2, F::Lpm(Lpm { value: vec![10, 1, 0, 0], prefix_len: 16 })),
            field(3, F::Ternary(Ternary { value: vec![0x10], mask: vec![0xf0] })),
            field(4, F::Range(Range { low: vec![2], high: vec![9] })),
        ];
        let keys = matches(&t, &full).unwrap();
        let mut canonical = full.clone();
        canonical[0] = field(1, F::Exact(Exact { value: vec![7] }));
        assert_eq!(fields(&t, &keys), canonical);
        let refused = |fs: Vec<pb::FieldMatch>| matches(&t, &fs).unwrap_err();
        assert_eq!(refused(vec![]).message(), "I.t: k1: an exact field must be given");
        let mut f = full.clone();
        f[2] = field(3, F::Ternary(Ternary { value: vec![0], mask: vec![0] }));
        assert!(refused(f).message().contains("a wildcard is written by leaving the field out"));
        let mut f = full.clone();
        f[1] = field(2, F::Lpm(Lpm { value: vec![10, 1, 0, 1], prefix_len: 16 }));
        assert!(refused(f).message().contains("bits past the prefix"));
        let mut f = full.clone();
        f[3] = field(4, F::Range(Range { low: vec![9], high: vec![2] }));
        assert!(refused(f).message().contains("low end is above its high end"));
        let mut f = full.clone();
        f[0] = field(1, F::Exact(Exact { value: vec![1, 0, 0] }));
        assert_eq!(refused(f).code(), Code::OutOfRange);
        let mut f = full.clone();
        f[1] = field(2, F::Exact(Exact { value: vec![1] }));
        assert_eq!(refused(f).message(), "I.t: k2: a lpm field");
        assert!(refused(vec![exact.clone(), exact.clone()]).message().contains("given twice"));
        assert!(refused(vec![field(9, F::Exact(Exact { value: vec![1] }))]).message().contains("no match field 9"));
    }
}
