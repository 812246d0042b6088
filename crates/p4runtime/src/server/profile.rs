//! Action profile members and groups (P4Runtime §9.2), and the table entries that name one or
//! carry a one-shot action set (§9.1's `action_profile_member_id`, `action_profile_group_id`,
//! `action_profile_action_set`): written, read (wildcards too), and refused with the spec's
//! codes: NOT_FOUND for what is not there, ALREADY_EXISTS, FAILED_PRECONDITION for a member or
//! group still in use, RESOURCE_EXHAUSTED past `size` or `max_group_size`, INVALID_ARGUMENT with
//! the reason.

use p4::backends::software::{Indirect, ProfileError, Switch};
use p4::info::{Info, ProfileInfo, TableInfo};
use tonic::Status;

use super::entity::{action_data, action_of};
use crate::proto::p4::v1 as pb;

/// The target's refusal as P4Runtime's code.
pub(super) fn status(e: ProfileError) -> Status {
    match e {
        ProfileError::NotFound(s) => Status::not_found(s),
        ProfileError::Exists(s) => Status::already_exists(s),
        ProfileError::Full(s) => Status::resource_exhausted(s),
        ProfileError::InUse(s) => Status::failed_precondition(s),
        ProfileError::Invalid(s) => Status::invalid_argument(s),
    }
}

fn profile(info: &Info, id: u32) -> Result<&ProfileInfo, Status> {
    info.action_profile(id).ok_or_else(|| Status::not_found(format!("no action profile {id:#x}")))
}

/// An INSERT, MODIFY or DELETE of a member.
pub(super) fn member(
    sw: &mut Switch,
    info: &Info,
    kind: pb::update::Type,
    m: &pb::ActionProfileMember,
) -> Result<(), Status> {
    use pb::update::Type as U;
    let p = profile(info, m.action_profile_id)?;
    match kind {
        U::Insert | U::Modify => {
            let a = m.action.as_ref().ok_or_else(|| {
                Status::invalid_argument(format!("{}: member {} needs an action", p.preamble.name, m.member_id))
            })?;
            let (name, args) = action_data(info, a)?;
            sw.set_member(&p.target, m.member_id, &name, args, kind == U::Insert).map_err(status)
        }
        U::Delete => sw.delete_member(&p.target, m.member_id).map_err(status),
        U::Unspecified => Err(Status::invalid_argument("an update of unspecified type")),
    }
}

/// An INSERT, MODIFY or DELETE of a selector's group.
pub(super) fn group(
    sw: &mut Switch,
    info: &Info,
    kind: pb::update::Type,
    g: &pb::ActionProfileGroup,
) -> Result<(), Status> {
    use pb::update::Type as U;
    let p = profile(info, g.action_profile_id)?;
    match kind {
        U::Insert | U::Modify => {
            let mut members = Vec::new();
            for m in &g.members {
                if m.weight < 1 {
                    return Err(Status::invalid_argument(format!(
                        "{}: group {}: member {}'s weight {} (at least 1)",
                        p.preamble.name, g.group_id, m.member_id, m.weight
                    )));
                }
                if m.watch_kind.is_some() {
                    return Err(Status::unimplemented(format!("{}: watch ports of group members", p.preamble.name)));
                }
                members.push((m.member_id, m.weight as u32));
            }
            if g.max_size < 0 {
                return Err(Status::invalid_argument(format!("{}: a negative max_size", p.preamble.name)));
            }
            sw.set_profile_group(&p.target, g.group_id, members, g.max_size as u32, kind == U::Insert).map_err(status)
        }
        U::Delete => sw.delete_profile_group(&p.target, g.group_id).map_err(status),
        U::Unspecified => Err(Status::invalid_argument("an update of unspecified type")),
    }
}

/// The profiles a read names: every one for id 0.
fn profiles_wanted(info: &Info, id: u32) -> Result<Vec<&ProfileInfo>, Status> {
    match id {
        0 => Ok(info.action_profiles.iter().collect()),
        id => Ok(vec![profile(info, id)?]),
    }
}

/// The members a read asks for: of one profile or all, one member or all.
pub(super) fn read_members(
    sw: &Switch,
    info: &Info,
    want: &pb::ActionProfileMember,
    out: &mut Vec<pb::Entity>,
) -> Result<(), Status> {
    for p in profiles_wanted(info, want.action_profile_id)? {
        let Some(state) = sw.profile(&p.target) else { continue };
        for (&id, m) in &state.members {
            if want.member_id != 0 && want.member_id != id {
                continue;
            }
            out.push(pb::Entity {
                entity: Some(pb::entity::Entity::ActionProfileMember(pb::ActionProfileMember {
                    action_profile_id: p.preamble.id,
                    member_id: id,
                    action: action_of(info, &m.action, &m.args),
                })),
            });
        }
    }
    Ok(())
}

/// The groups a read asks for: of one profile or all, one group or all.
pub(super) fn read_groups(
    sw: &Switch,
    info: &Info,
    want: &pb::ActionProfileGroup,
    out: &mut Vec<pb::Entity>,
) -> Result<(), Status> {
    for p in profiles_wanted(info, want.action_profile_id)? {
        let Some(state) = sw.profile(&p.target) else { continue };
        for (&id, g) in &state.groups {
            if want.group_id != 0 && want.group_id != id {
                continue;
            }
            let members = g
                .members
                .iter()
                .map(|&(member_id, weight)| pb::action_profile_group::Member {
                    member_id,
                    weight: weight as i32,
                    watch_kind: None,
                })
                .collect();
            out.push(pb::Entity {
                entity: Some(pb::entity::Entity::ActionProfileGroup(pb::ActionProfileGroup {
                    action_profile_id: p.preamble.id,
                    group_id: id,
                    members,
                    max_size: g.max_size as i32,
                })),
            });
        }
    }
    Ok(())
}

/// What an entry of `t`, a table with an action profile, refers to.
pub(super) fn indirect(info: &Info, t: &TableInfo, a: Option<&pb::TableAction>) -> Result<Indirect, Status> {
    use pb::table_action::Type;
    match a.and_then(|a| a.r#type.as_ref()) {
        Some(Type::ActionProfileMemberId(m)) => Ok(Indirect::Member(*m)),
        Some(Type::ActionProfileGroupId(g)) => Ok(Indirect::Group(*g)),
        Some(Type::ActionProfileActionSet(set)) => {
            let mut actions = Vec::new();
            for a in &set.action_profile_actions {
                let action = a.action.as_ref().ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "{}: a one-shot action set's member needs an action",
                        t.preamble.name
                    ))
                })?;
                if a.weight < 1 {
                    return Err(Status::invalid_argument(format!(
                        "{}: a one-shot action's weight {} (at least 1)",
                        t.preamble.name, a.weight
                    )));
                }
                if a.watch_kind.is_some() {
                    return Err(Status::unimplemented(format!("{}: watch ports of one-shot actions", t.preamble.name)));
                }
                let (name, args) = action_data(info, action)?;
                actions.push((name, args, a.weight as u32));
            }
            Ok(Indirect::ActionSet(actions))
        }
        Some(Type::Action(_)) => Err(Status::invalid_argument(format!(
            "{}: its entries name an action profile member or group (or a one-shot action set), not an action",
            t.preamble.name
        ))),
        None => Err(Status::invalid_argument(format!("{}: an entry needs an action", t.preamble.name))),
    }
}

/// An entry's reference into its profile, as P4Runtime writes it.
pub(super) fn indirect_message(info: &Info, to: &Indirect) -> pb::TableAction {
    use pb::table_action::Type;
    let r#type = match to {
        Indirect::Member(m) => Type::ActionProfileMemberId(*m),
        Indirect::Group(g) => Type::ActionProfileGroupId(*g),
        Indirect::ActionSet(set) => Type::ActionProfileActionSet(pb::ActionProfileActionSet {
            action_profile_actions: set
                .iter()
                .map(|(name, args, weight)| pb::ActionProfileAction {
                    action: action_of(info, name, args),
                    weight: *weight as i32,
                    watch_kind: None,
                })
                .collect(),
            ..Default::default()
        }),
    };
    pb::TableAction { r#type: Some(r#type) }
}

#[cfg(test)]
mod tests {
    use super::super::read::read_entities;
    use super::super::write::apply_updates;
    use super::*;
    use pb::entity::Entity as E;
    use pb::update::Type::{Delete, Insert, Modify};
    use tonic::Code;

    /// ECMP over a selector (at most 4 in weight a group), and a plain profile of 2 members.
    const PROGRAM: &str = r#"
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }
struct headers_t { eth_t eth; }
struct meta_t { }
parser P(packet_in packet, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { packet.extract(hdr.eth); transition accept; }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action to(bit<9> port) { sm.egress_spec = port; }
    @max_group_size(4) action_selector(HashAlgorithm.crc16, 32w16, 32w16) paths;
    table ecmp {
        key = { hdr.eth.dst : exact; hdr.eth.src : selector; }
        actions = { to; NoAction; }
        implementation = paths;
    }
    action_profile(32w2) hops;
    table hop {
        key = { hdr.eth.kind : exact; }
        actions = { to; }
        implementation = hops;
    }
    apply { ecmp.apply(); hop.apply(); }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out packet, in headers_t hdr) { apply { packet.emit(hdr.eth); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

    fn switch() -> Switch {
        let (program, checked) = p4::front_end("ecmp.p4", PROGRAM).unwrap_or_else(|e| panic!("{e}"));
        Switch::new(program, checked).unwrap()
    }

    fn one(sw: &mut Switch, kind: pb::update::Type, e: E) -> Result<(), Code> {
        let u = pb::Update { r#type: kind as i32, entity: Some(pb::Entity { entity: Some(e) }) };
        apply_updates(sw, &[u]).remove(0).map_err(|s| s.code())
    }

    fn profile_id(info: &Info, name: &str) -> u32 {
        info.action_profiles.iter().find(|p| p.preamble.name == name).unwrap().preamble.id
    }

    fn to(info: &Info, port: u8) -> pb::Action {
        let params = vec![pb::action::Param { param_id: 1, value: vec![port] }];
        pb::Action { action_id: info.action_named("to").unwrap().preamble.id, params }
    }

    fn member(info: &Info, profile: &str, id: u32, port: u8) -> E {
        E::ActionProfileMember(pb::ActionProfileMember {
            action_profile_id: profile_id(info, profile),
            member_id: id,
            action: Some(to(info, port)),
        })
    }

    fn group(info: &Info, id: u32, members: &[(u32, i32)]) -> E {
        E::ActionProfileGroup(pb::ActionProfileGroup {
            action_profile_id: profile_id(info, "I.paths"),
            group_id: id,
            members: members
                .iter()
                .map(|&(member_id, weight)| pb::action_profile_group::Member { member_id, weight, watch_kind: None })
                .collect(),
            max_size: 0,
        })
    }

    /// An entry of `table` matching `value` exactly, with this action.
    fn entry(info: &Info, table: &str, value: Vec<u8>, action: pb::table_action::Type) -> E {
        use pb::field_match::{Exact, FieldMatchType as F};
        E::TableEntry(pb::TableEntry {
            table_id: info.tables.iter().find(|t| t.preamble.name == table).unwrap().preamble.id,
            r#match: vec![pb::FieldMatch { field_id: 1, field_match_type: Some(F::Exact(Exact { value })) }],
            action: Some(pb::TableAction { r#type: Some(action) }),
            ..Default::default()
        })
    }

    fn read(sw: &Switch, e: E) -> Vec<E> {
        read_entities(sw, &[pb::Entity { entity: Some(e) }]).unwrap().into_iter().filter_map(|e| e.entity).collect()
    }

    #[test]
    fn members_groups_and_their_entries_are_written_read_and_forward() {
        use pb::table_action::Type as A;
        let mut sw = switch();
        let info = sw.info();
        for (id, port) in [(1, 1), (2, 2), (3, 3)] {
            assert_eq!(one(&mut sw, Insert, member(&info, "I.paths", id, port)), Ok(()));
        }
        assert_eq!(one(&mut sw, Insert, group(&info, 7, &[(1, 1), (2, 1), (3, 1)])), Ok(()));
        let dst = vec![0xff; 6];
        assert_eq!(one(&mut sw, Insert, entry(&info, "I.ecmp", dst.clone(), A::ActionProfileGroupId(7))), Ok(()));
        let mut ports = std::collections::BTreeSet::new();
        for src in 0..32u8 {
            let mut frame = vec![0xff; 6];
            frame.extend_from_slice(&[0, 0, 0, 0, 0, src, 0x88, 0xb5]);
            ports.insert(sw.process(&frame, 0, 0).unwrap()[0].port);
        }
        assert_eq!(ports.into_iter().collect::<Vec<_>>(), [1, 2, 3], "every member takes some sources");
        // Wildcard reads: every member of every profile, every group.
        let members = read(&sw, E::ActionProfileMember(Default::default()));
        assert_eq!(members.len(), 3);
        assert_eq!(members[1], member(&info, "I.paths", 2, 2), "read back as written");
        assert_eq!(read(&sw, E::ActionProfileGroup(Default::default())), [group(&info, 7, &[(1, 1), (2, 1), (3, 1)])]);
        let entries = read(&sw, E::TableEntry(Default::default()));
        let E::TableEntry(e) = &entries[0] else { panic!() };
        assert_eq!(e.action.as_ref().unwrap().r#type, Some(A::ActionProfileGroupId(7)));
        // Modify, then a one-shot action set in the entry's place.
        assert_eq!(one(&mut sw, Modify, group(&info, 7, &[(1, 3)])), Ok(()));
        let set = A::ActionProfileActionSet(pb::ActionProfileActionSet {
            action_profile_actions: vec![pb::ActionProfileAction {
                action: Some(to(&info, 9)),
                weight: 1,
                watch_kind: None,
            }],
            ..Default::default()
        });
        assert_eq!(one(&mut sw, Modify, entry(&info, "I.ecmp", dst.clone(), set.clone())), Ok(()));
        let entries = read(&sw, E::TableEntry(Default::default()));
        let E::TableEntry(e) = &entries[0] else { panic!() };
        assert_eq!(e.action.as_ref().unwrap().r#type, Some(set));
        let mut frame = vec![0xff; 6];
        frame.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0x88, 0xb5]);
        assert_eq!(sw.process(&frame, 0, 0).unwrap()[0].port, 9);
        // Deletes, in the order uses allow.
        assert_eq!(one(&mut sw, Delete, group(&info, 7, &[])), Ok(()));
        assert_eq!(one(&mut sw, Delete, member(&info, "I.paths", 1, 0)), Ok(()));
        assert_eq!(read(&sw, E::ActionProfileMember(Default::default())).len(), 2);
    }

    #[test]
    fn refusals_carry_the_specs_codes() {
        use pb::table_action::Type as A;
        let mut sw = switch();
        let info = sw.info();
        assert_eq!(one(&mut sw, Insert, member(&info, "I.hops", 1, 1)), Ok(()));
        assert_eq!(one(&mut sw, Insert, member(&info, "I.hops", 1, 1)), Err(Code::AlreadyExists));
        assert_eq!(one(&mut sw, Modify, member(&info, "I.hops", 5, 1)), Err(Code::NotFound));
        assert_eq!(one(&mut sw, Insert, member(&info, "I.hops", 2, 1)), Ok(()));
        assert_eq!(one(&mut sw, Insert, member(&info, "I.hops", 3, 1)), Err(Code::ResourceExhausted), "size 2");
        let no_action = E::ActionProfileMember(pb::ActionProfileMember {
            action_profile_id: profile_id(&info, "I.hops"),
            member_id: 4,
            action: None,
        });
        assert_eq!(one(&mut sw, Insert, no_action), Err(Code::InvalidArgument));
        let elsewhere =
            E::ActionProfileMember(pb::ActionProfileMember { action_profile_id: 0x11ff_ffff, ..Default::default() });
        assert_eq!(one(&mut sw, Insert, elsewhere), Err(Code::NotFound));
        // Entries: a missing member, an action where a member goes, a group of a plain profile.
        let kind = vec![0, 1];
        assert_eq!(
            one(&mut sw, Insert, entry(&info, "I.hop", kind.clone(), A::ActionProfileMemberId(9))),
            Err(Code::NotFound)
        );
        assert_eq!(
            one(&mut sw, Insert, entry(&info, "I.hop", kind.clone(), A::Action(to(&info, 1)))),
            Err(Code::InvalidArgument)
        );
        assert_eq!(
            one(&mut sw, Insert, entry(&info, "I.hop", kind.clone(), A::ActionProfileGroupId(1))),
            Err(Code::InvalidArgument)
        );
        assert_eq!(one(&mut sw, Insert, entry(&info, "I.hop", kind.clone(), A::ActionProfileMemberId(1))), Ok(()));
        assert_eq!(
            one(&mut sw, Delete, member(&info, "I.hops", 1, 0)),
            Err(Code::FailedPrecondition),
            "an entry uses it"
        );
        // Groups: past @max_group_size, a missing member, weight 0, a member in use.
        for id in 1..=5 {
            assert_eq!(one(&mut sw, Insert, member(&info, "I.paths", id, id as u8)), Ok(()));
        }
        assert_eq!(
            one(&mut sw, Insert, group(&info, 1, &[(1, 1), (2, 1), (3, 1), (4, 1), (5, 1)])),
            Err(Code::ResourceExhausted)
        );
        assert_eq!(one(&mut sw, Insert, group(&info, 1, &[(1, 2), (2, 3)])), Err(Code::ResourceExhausted), "weights");
        assert_eq!(one(&mut sw, Insert, group(&info, 1, &[(1, 1), (8, 1)])), Err(Code::NotFound));
        assert_eq!(one(&mut sw, Insert, group(&info, 1, &[(1, 0)])), Err(Code::InvalidArgument));
        assert_eq!(one(&mut sw, Modify, group(&info, 1, &[(1, 1)])), Err(Code::NotFound));
        assert_eq!(one(&mut sw, Insert, group(&info, 1, &[(1, 1), (2, 1)])), Ok(()));
        assert_eq!(
            one(&mut sw, Delete, member(&info, "I.paths", 2, 0)),
            Err(Code::FailedPrecondition),
            "a group holds it"
        );
        assert_eq!(one(&mut sw, Insert, entry(&info, "I.ecmp", vec![1], A::ActionProfileGroupId(1))), Ok(()));
        assert_eq!(one(&mut sw, Delete, group(&info, 1, &[])), Err(Code::FailedPrecondition), "an entry uses it");
        assert_eq!(one(&mut sw, Delete, group(&info, 9, &[])), Err(Code::NotFound));
        // A program reconciled in (RECONCILE_AND_COMMIT) keeps the members, groups and entries.
        let mut fresh = switch();
        super::super::pipeline::carry_state(&sw, &mut fresh).unwrap();
        for e in [E::ActionProfileMember(Default::default()), E::ActionProfileGroup(Default::default())] {
            assert_eq!(read(&fresh, e.clone()), read(&sw, e));
        }
        assert_eq!(read(&fresh, E::TableEntry(Default::default())), read(&sw, E::TableEntry(Default::default())));
        let p4info = crate::p4info::p4info(&info, "ecmp");
        let paths = p4info.action_profiles.iter().find(|p| p.preamble.as_ref().unwrap().name == "I.paths").unwrap();
        assert_eq!((paths.with_selector, paths.size, paths.max_group_size), (true, 16, 4));
        let ecmp = p4info.tables.iter().find(|t| t.preamble.as_ref().unwrap().name == "I.ecmp").unwrap();
        assert_eq!(ecmp.implementation_id, paths.preamble.as_ref().unwrap().id);
        assert_eq!(ecmp.match_fields.len(), 1, "the selector field is not a match field");
    }
}
