//! SetForwardingPipelineConfig's program: the P4 source a client sends as the device
//! config, checked into a switch of its own, the client's P4Info held to it, and the forwarding
//! state carried over where a program keeps the same tables.

use p4::backends::software::Switch;
use tonic::Status;

use crate::proto::p4::config::v1::P4Info;

/// The switch a device config's program makes, with empty tables: the source of an
/// `EdgeflowSwitch` program, as `[p4] program` names it. A source that is not UTF-8, that the
/// front end refuses, or that the software target cannot run is INVALID_ARGUMENT with the reason.
pub(super) fn build(source: &[u8]) -> Result<Switch, Status> {
    let text = std::str::from_utf8(source).map_err(|e| {
        Status::invalid_argument(format!("p4_device_config: the P4 program's source, as UTF-8 text ({e})"))
    })?;
    let (program, checked) = p4::front_end("p4_device_config.p4", text)
        .map_err(|e| Status::invalid_argument(format!("the program: {e}")))?;
    Switch::new(program, checked).map_err(|e| Status::invalid_argument(format!("the program: {e}")))
}

/// Whether a client's P4Info describes the program edgeflow's P4Info (`ours`) describes: the same
/// objects under the same ids and names. The package information (the program's name, its
/// architecture, documentation) is the client's own.
pub(super) fn describes(theirs: &P4Info, ours: &P4Info) -> Result<(), Status> {
    let strip = |p: &P4Info| P4Info { pkg_info: None, ..p.clone() };
    let (theirs, ours) = (strip(theirs), strip(ours));
    if theirs == ours {
        return Ok(());
    }
    let differs = [
        ("tables", theirs.tables != ours.tables),
        ("actions", theirs.actions != ours.actions),
        ("counters", theirs.counters != ours.counters),
        ("direct counters", theirs.direct_counters != ours.direct_counters),
        ("meters", theirs.meters != ours.meters),
        ("direct meters", theirs.direct_meters != ours.direct_meters),
        ("registers", theirs.registers != ours.registers),
        ("action profiles", theirs.action_profiles != ours.action_profiles),
        ("controller packet metadata", theirs.controller_packet_metadata != ours.controller_packet_metadata),
        ("digests", theirs.digests != ours.digests || theirs.type_info != ours.type_info),
    ];
    let which: Vec<&str> = differs.iter().filter(|d| d.1).map(|d| d.0).collect();
    Err(Status::invalid_argument(format!(
        "the P4Info does not describe the program (its {} differ from what edgeflow derives from the source: \
         GetForwardingPipelineConfig gives edgeflow's)",
        if which.is_empty() { "other objects".to_string() } else { which.join(", ") }
    )))
}

/// `old`'s forwarding state put into `new`, a program with the same P4Info (RECONCILE_AND_COMMIT):
/// action profile members and groups, entries with their hits and direct meters, default actions,
/// counter, meter and register cells, and the multicast groups.
pub(super) fn carry_state(old: &Switch, new: &mut Switch) -> Result<(), String> {
    let info = old.info();
    // Members and groups first: entries name them.
    for p in &info.action_profiles {
        let Some(profile) = old.profile(&p.target) else { continue };
        for (&id, m) in &profile.members {
            new.set_member(&p.target, id, &m.action, m.args.clone(), true).map_err(|e| e.to_string())?;
        }
        for (&id, g) in &profile.groups {
            new.set_profile_group(&p.target, id, g.members.clone(), g.max_size, true).map_err(|e| e.to_string())?;
        }
    }
    for t in &info.tables {
        for e in old.entries(&t.target).unwrap_or(&[]) {
            match &e.indirect {
                _ if t.is_const => {}
                Some(to) => {
                    new.insert_indirect(&t.target, e.keys.clone(), to.clone(), e.priority).map_err(|e| e.to_string())?
                }
                None => new.insert(&t.target, e.keys.clone(), &e.action, e.args.clone(), e.priority)?,
            }
            if t.direct_counter.is_some() {
                new.set_entry_counts(&t.target, &e.keys, e.priority, e.packets, e.bytes)?;
            }
            if let Some(rates) = old.entry_meter(&t.target, &e.keys, e.priority).flatten() {
                new.set_entry_meter(&t.target, &e.keys, e.priority, rates)?;
            }
        }
        if let Some((action, args)) = old.default_action(&t.target) {
            // Only one a client changed: a table without a default_action runs NoAction, which
            // its action list need not name (so set_default_action would refuse it).
            if !matches!(t.default_action, Some((_, true))) && new.default_action(&t.target) != Some((action, args)) {
                new.set_default_action(&t.target, action, args.to_vec())?;
            }
        }
    }
    for x in &info.counters {
        for i in 0..old.cells(&x.target).unwrap_or(0) {
            let (packets, bytes) = old.counter(&x.target, i).unwrap_or_default();
            new.set_counter(&x.target, i, packets, bytes)?;
        }
    }
    for x in &info.meters {
        for i in 0..old.cells(&x.target).unwrap_or(0) {
            if let Some([cir, cburst, pir, pburst]) = old.meter(&x.target, i).flatten() {
                new.set_meter(&x.target, i, cir, cburst, pir, pburst)?;
            }
        }
    }
    for x in &info.registers {
        for i in 0..old.cells(&x.target).unwrap_or(0) {
            new.set_register(&x.target, i, old.register(&x.target, i).unwrap_or(0))?;
        }
    }
    carry_groups(old, new);
    Ok(())
}

/// The replication engine: multicast groups and clone sessions are the device's (its
/// configuration's and what clients wrote), not the program's; a new program keeps them.
pub(super) fn carry_groups(old: &Switch, new: &mut Switch) {
    for id in old.group_ids() {
        new.set_replicas(id, old.group_replicas(id).unwrap_or_default());
    }
    for id in old.clone_session_ids() {
        new.set_clone_session(id, old.clone_session(id).cloned().unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p4::backends::software::Match;
    use tonic::Code;

    const ROUTER: &str = include_str!("../../../../examples/p4/ipv4_router.p4");
    const L2: &str = include_str!("../../../../examples/p4/l2_switch.p4");

    fn p4info(sw: &Switch) -> P4Info {
        crate::p4info::p4info(&sw.info(), "test")
    }

    #[test]
    fn a_source_is_checked_and_a_p4info_held_to_it() {
        let router = build(ROUTER.as_bytes()).unwrap();
        let refused = build(ROUTER.replacen("apply {", "apply ", 1).as_bytes()).err().unwrap();
        assert_eq!(refused.code(), Code::InvalidArgument);
        assert!(refused.message().starts_with("the program: p4_device_config.p4:"), "{}", refused.message());
        assert_eq!(build(&[0xff, 0xfe]).err().map(|s| s.code()), Some(Code::InvalidArgument));
        let ours = p4info(&router);
        let mut theirs = P4Info { pkg_info: None, ..ours.clone() };
        describes(&theirs, &ours).expect("the package information is the client's own");
        let next_hop = theirs.actions.iter_mut().find(|a| !a.params.is_empty()).unwrap();
        next_hop.params.pop();
        let refused = describes(&theirs, &ours).unwrap_err();
        assert!(refused.message().contains("its actions differ"), "{}", refused.message());
        let l2 = p4info(&build(L2.as_bytes()).unwrap());
        assert!(describes(&l2, &ours).unwrap_err().message().contains("tables, actions, counters, direct counters"));
    }

    #[test]
    fn the_p4info_names_the_architecture_the_program_is_written_for() {
        let arch = |src: &str| p4info(&build(src.as_bytes()).unwrap()).pkg_info.unwrap().arch;
        assert_eq!(arch(ROUTER), "edgeflow");
        assert_eq!(arch(include_str!("../../../../examples/p4/v1model_router.p4")), "v1model");
    }

    #[test]
    fn reconciling_carries_entries_cells_defaults_and_groups_over() {
        let mut old = build(ROUTER.as_bytes()).unwrap();
        let route = vec![Match::Lpm { value: 0x0a00_0200, prefix: 24 }];
        old.insert("RouterIngress.routes", route.clone(), "next_hop", vec![1, 2, 2, 2], 0).unwrap();
        old.set_counter("RouterIngress.routed", 2, 3, 300).unwrap();
        old.set_default_action("RouterIngress.routes", "next_hop", vec![1, 2, 1, 1]).unwrap();
        old.set_group(1, vec![1, 2]);
        let mut new = build(ROUTER.as_bytes()).unwrap();
        carry_state(&old, &mut new).unwrap();
        let entries = new.entries("RouterIngress.routes").unwrap();
        assert_eq!((entries.len(), &entries[0].keys, &entries[0].args), (1, &route, &vec![1, 2, 2, 2]));
        assert_eq!(new.counter("RouterIngress.routed", 2), Some((3, 300)));
        assert_eq!(new.default_action("RouterIngress.routes"), Some(("next_hop", &[1u128, 2, 1, 1][..])));
        assert_eq!(new.group(1), Some(&[1u32, 2][..]));
    }
}
