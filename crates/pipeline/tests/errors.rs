//! Each error of the spec's flow-mod, group-mod and meter-mod tables (§7.4.4) that a request can
//! provoke here, provoked.

use ofp::action::{Action, Instruction};
use ofp::error::*;
use ofp::group_meter::{group_command as gc, group_type as gt, meter_command as mc, meter_flags as mf};
use ofp::group_meter::{BandKind, Bucket, MeterBand, OFPG_ANY, OFPM_MAX};
use ofp::message::{FlowMod, GroupMod, MeterMod};
use ofp::oxm::{Field, Match, OxmField};
use ofp::port::OFPP_ANY;
use pipeline::{Pipeline, PortView};

fn switch() -> Pipeline {
    let mut p = Pipeline::new(4);
    for n in 1..=3 {
        p.set_port(n, PortView::default());
    }
    p
}

fn flow(p: &mut Pipeline, fm: FlowMod) -> Result<(), ErrorCode> {
    p.flow_mod(&fm, 0).map(|_| ())
}

fn group(p: &mut Pipeline, command: u16, group_type: u8, group_id: u32, buckets: Vec<Bucket>) -> Result<(), ErrorCode> {
    p.group_mod(&GroupMod { command, group_type, group_id, buckets }, 0).map(|_| ())
}

fn meter(p: &mut Pipeline, command: u16, flags: u16, meter_id: u32, bands: Vec<MeterBand>) -> Result<(), ErrorCode> {
    p.meter_mod(&MeterMod { command, flags, meter_id, bands }, 0).map(|_| ())
}

fn out(port: u32) -> Bucket {
    Bucket { weight: 0, watch_port: OFPP_ANY, watch_group: OFPG_ANY, actions: vec![Action::output(port)] }
}

fn drop_band(rate: u32) -> MeterBand {
    MeterBand { rate, burst_size: 0, kind: BandKind::Drop }
}

#[test]
fn flow_mod_failed() {
    let mut p = switch();
    let e = FlowModFailed::BadCommand;
    assert_eq!(flow(&mut p, FlowMod { command: 9, ..Default::default() }), Err(ErrorCode::FlowModFailed(e)));
    assert_eq!(
        flow(&mut p, FlowMod { table_id: 4, ..Default::default() }),
        Err(ErrorCode::FlowModFailed(FlowModFailed::BadTableId))
    );
    assert_eq!(
        flow(&mut p, FlowMod { table_id: 0xff, ..Default::default() }),
        Err(ErrorCode::FlowModFailed(FlowModFailed::BadTableId)),
        "OFPTT_ALL only deletes"
    );
    assert_eq!(
        flow(&mut p, FlowMod { flags: 1 << 7, ..Default::default() }),
        Err(ErrorCode::FlowModFailed(FlowModFailed::BadFlags))
    );
    p.set_table_limit(0, 1, false);
    flow(&mut p, FlowMod::default()).unwrap();
    assert_eq!(
        flow(&mut p, FlowMod { priority: 1, ..Default::default() }),
        Err(ErrorCode::FlowModFailed(FlowModFailed::TableFull))
    );
    let overlap = FlowMod {
        table_id: 1,
        priority: 3,
        flags: 2,
        match_: Match::new().with(Field::InPort, 1),
        ..Default::default()
    };
    flow(
        &mut p,
        FlowMod { table_id: 1, priority: 3, match_: Match::new().with(Field::EthDst, 5), ..Default::default() },
    )
    .unwrap();
    assert_eq!(flow(&mut p, overlap), Err(ErrorCode::FlowModFailed(FlowModFailed::Overlap)));
}

#[test]
fn bad_match_instruction_and_action() {
    let mut p = switch();
    let with = |m: Match| FlowMod { match_: m, ..Default::default() };
    let cases: Vec<(FlowMod, ErrorCode)> = vec![
        (with(Match::new().with(Field::IpDscp, 1)), ErrorCode::BadMatch(BadMatch::BadPrereq)),
        (
            with(Match::new().with(Field::EthType, 0x800).with(Field::IpDscp, 64)),
            ErrorCode::BadMatch(BadMatch::BadValue),
        ),
        (with(Match::new().with_masked(Field::EthType, 0x800, 0xff00)), ErrorCode::BadMatch(BadMatch::BadMask)),
        (with(Match::new().with_masked(Field::EthDst, 0x0f, 0xf0)), ErrorCode::BadMatch(BadMatch::BadWildcards)),
        (with(Match::new().with(Field::InPort, 1).with(Field::InPort, 1)), ErrorCode::BadMatch(BadMatch::DupField)),
        (
            FlowMod { instructions: vec![Instruction::ClearActions, Instruction::ClearActions], ..Default::default() },
            ErrorCode::BadInstruction(BadInstruction::UnsupInst),
        ),
        (
            FlowMod { table_id: 2, instructions: vec![Instruction::GotoTable(2)], ..Default::default() },
            ErrorCode::BadInstruction(BadInstruction::BadTableId),
        ),
        (
            FlowMod {
                instructions: vec![Instruction::Experimenter { experimenter: 1, data: vec![] }],
                ..Default::default()
            },
            ErrorCode::BadInstruction(BadInstruction::BadExperimenter),
        ),
        (
            FlowMod { instructions: vec![Instruction::ApplyActions(vec![Action::output(0)])], ..Default::default() },
            ErrorCode::BadAction(BadAction::BadOutPort),
        ),
        (
            FlowMod {
                instructions: vec![Instruction::ApplyActions(vec![Action::output(ofp::port::OFPP_ANY)])],
                ..Default::default()
            },
            ErrorCode::BadAction(BadAction::BadOutPort),
        ),
        (
            FlowMod { instructions: vec![Instruction::ApplyActions(vec![Action::Group(9)])], ..Default::default() },
            ErrorCode::BadAction(BadAction::BadOutGroup),
        ),
        (
            FlowMod {
                instructions: vec![Instruction::WriteActions(vec![Action::PushMpls(0x0800)])],
                ..Default::default()
            },
            ErrorCode::BadAction(BadAction::BadArgument),
        ),
        (
            FlowMod {
                instructions: vec![Instruction::ApplyActions(vec![Action::SetField(OxmField::exact(
                    Field::InPort,
                    3,
                ))])],
                ..Default::default()
            },
            ErrorCode::BadAction(BadAction::BadSetType),
        ),
        (
            FlowMod {
                instructions: vec![Instruction::ApplyActions(vec![Action::SetField(OxmField::exact(
                    Field::VlanPcp,
                    9,
                ))])],
                ..Default::default()
            },
            ErrorCode::BadAction(BadAction::BadSetArgument),
        ),
        (
            FlowMod {
                instructions: vec![Instruction::ApplyActions(vec![Action::Experimenter {
                    experimenter: 0x2320,
                    data: vec![],
                }])],
                ..Default::default()
            },
            ErrorCode::BadAction(BadAction::BadExperimenter),
        ),
        (
            FlowMod { instructions: vec![Instruction::Meter(4)], ..Default::default() },
            ErrorCode::MeterModFailed(MeterModFailed::UnknownMeter),
        ),
    ];
    for (i, (fm, want)) in cases.into_iter().enumerate() {
        assert_eq!(flow(&mut p, fm), Err(want), "case {i}");
    }
    assert!(p.tables().iter().all(|t| t.is_empty()), "no failed flow-mod installed anything");
}

#[test]
fn group_mod_failed() {
    let mut p = switch();
    let err = |c| Err(ErrorCode::GroupModFailed(c));
    group(&mut p, gc::ADD, gt::ALL, 1, vec![out(1)]).unwrap();
    assert_eq!(group(&mut p, gc::ADD, gt::ALL, 1, vec![]), err(GroupModFailed::GroupExists));
    assert_eq!(group(&mut p, gc::ADD, gt::ALL, 0xffff_ff01, vec![]), err(GroupModFailed::InvalidGroup));
    assert_eq!(
        group(&mut p, gc::ADD, gt::ALL, 2, vec![Bucket { weight: 2, ..out(1) }]),
        err(GroupModFailed::InvalidGroup)
    );
    assert_eq!(
        group(&mut p, gc::ADD, gt::INDIRECT, 2, vec![Bucket { weight: 2, ..out(1) }]),
        err(GroupModFailed::InvalidGroup)
    );
    assert_eq!(group(&mut p, gc::ADD, gt::ALL, 2, vec![out(1); 65]), err(GroupModFailed::OutOfBuckets));
    assert_eq!(group(&mut p, gc::MODIFY, gt::ALL, 7, vec![]), err(GroupModFailed::UnknownGroup));
    assert_eq!(group(&mut p, gc::ADD, 9, 2, vec![]), err(GroupModFailed::BadType));
    assert_eq!(group(&mut p, 5, gt::ALL, 2, vec![]), err(GroupModFailed::BadCommand));
    assert_eq!(group(&mut p, gc::ADD, gt::INDIRECT, 2, vec![out(1), out(2)]), err(GroupModFailed::InvalidGroup));
    assert_eq!(group(&mut p, gc::ADD, gt::INDIRECT, 2, vec![]), err(GroupModFailed::InvalidGroup));
    assert_eq!(group(&mut p, gc::ADD, gt::FAST_FAILOVER, 2, vec![out(1)]), err(GroupModFailed::BadWatch));
    assert_eq!(
        group(&mut p, gc::ADD, gt::FAST_FAILOVER, 2, vec![Bucket { watch_group: 50, ..out(1) }]),
        err(GroupModFailed::BadWatch)
    );
    // Chains: 3 -> 1 is fine; 1 -> 3 would close a loop; deleting 1 while 3 uses it is refused.
    group(&mut p, gc::ADD, gt::INDIRECT, 3, vec![Bucket { actions: vec![Action::Group(1)], ..out(0) }]).unwrap();
    assert_eq!(
        group(&mut p, gc::MODIFY, gt::ALL, 1, vec![Bucket { actions: vec![Action::Group(3)], ..out(0) }]),
        err(GroupModFailed::Loop)
    );
    assert_eq!(group(&mut p, gc::DELETE, 0, 1, vec![]), err(GroupModFailed::ChainedGroup));
    for id in 10..10 + pipeline::group::MAX_GROUPS as u32 - 2 {
        group(&mut p, gc::ADD, gt::ALL, id, vec![]).unwrap();
    }
    assert_eq!(group(&mut p, gc::ADD, gt::ALL, 5, vec![]), err(GroupModFailed::OutOfGroups));
}

#[test]
fn meter_mod_failed() {
    let mut p = switch();
    let err = |c| Err(ErrorCode::MeterModFailed(c));
    let kbps = mf::KBPS;
    meter(&mut p, mc::ADD, kbps, 1, vec![drop_band(100)]).unwrap();
    assert_eq!(meter(&mut p, mc::ADD, kbps, 1, vec![drop_band(100)]), err(MeterModFailed::MeterExists));
    assert_eq!(meter(&mut p, mc::ADD, kbps, 0, vec![drop_band(100)]), err(MeterModFailed::InvalidMeter));
    assert_eq!(meter(&mut p, mc::ADD, kbps, OFPM_MAX + 1, vec![drop_band(100)]), err(MeterModFailed::InvalidMeter));
    assert_eq!(meter(&mut p, mc::MODIFY, kbps, 2, vec![drop_band(100)]), err(MeterModFailed::UnknownMeter));
    assert_eq!(meter(&mut p, 9, kbps, 2, vec![]), err(MeterModFailed::BadCommand));
    assert_eq!(meter(&mut p, mc::ADD, kbps | mf::PKTPS, 2, vec![drop_band(1)]), err(MeterModFailed::BadFlags));
    assert_eq!(meter(&mut p, mc::ADD, 0, 2, vec![drop_band(1)]), err(MeterModFailed::BadFlags));
    assert_eq!(meter(&mut p, mc::ADD, kbps, 2, vec![drop_band(0)]), err(MeterModFailed::BadRate));
    assert_eq!(
        meter(&mut p, mc::ADD, kbps, 2, vec![MeterBand { burst_size: 10, ..drop_band(5) }]),
        err(MeterModFailed::BadBurst)
    );
    let exp = MeterBand { rate: 5, burst_size: 0, kind: BandKind::Experimenter { experimenter: 1, data: vec![] } };
    assert_eq!(meter(&mut p, mc::ADD, kbps, 2, vec![exp]), err(MeterModFailed::BadBand));
    let dscp0 = MeterBand { rate: 5, burst_size: 0, kind: BandKind::DscpRemark { prec_level: 0 } };
    assert_eq!(meter(&mut p, mc::ADD, kbps, 2, vec![dscp0]), err(MeterModFailed::BadBandValue));
    assert_eq!(meter(&mut p, mc::ADD, kbps, 2, vec![drop_band(1); 9]), err(MeterModFailed::OutOfBands));
    for id in 2..=pipeline::meter::MAX_METERS {
        meter(&mut p, mc::ADD, kbps, id, vec![drop_band(1)]).unwrap();
    }
    assert_eq!(meter(&mut p, mc::ADD, kbps, OFPM_MAX - 1, vec![drop_band(1)]), err(MeterModFailed::OutOfMeters));
}

#[test]
fn deleting_a_group_or_meter_removes_the_flows_that_use_it() {
    let mut p = switch();
    group(&mut p, gc::ADD, gt::ALL, 1, vec![out(2)]).unwrap();
    meter(&mut p, mc::ADD, mf::PKTPS, 1, vec![drop_band(10)]).unwrap();
    let fm = |prio, inst| FlowMod { priority: prio, flags: 1, instructions: inst, ..Default::default() };
    flow(&mut p, fm(1, vec![Instruction::WriteActions(vec![Action::Group(1)])])).unwrap();
    flow(&mut p, fm(2, vec![Instruction::Meter(1)])).unwrap();
    flow(&mut p, fm(3, vec![])).unwrap();
    let removed = p
        .group_mod(
            &GroupMod { command: gc::DELETE, group_type: 0, group_id: ofp::group_meter::OFPG_ALL, buckets: vec![] },
            0,
        )
        .unwrap();
    assert_eq!(removed.len(), 1);
    assert_eq!(removed[0].reason, ofp::message::flow_removed_reason::GROUP_DELETE);
    let removed = p.meter_mod(&MeterMod { command: mc::DELETE, flags: 0, meter_id: 1, bands: vec![] }, 0).unwrap();
    assert_eq!(removed.len(), 1);
    assert_eq!(p.tables()[0].len(), 1);
}
