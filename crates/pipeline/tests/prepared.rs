//! A flow-mod prepared on the connection's thread (`PreparedFlowMod`) does what the same flow-mod
//! does through `Pipeline::flow_mod`: the same answer, the same error where it is wrong in
//! several ways, the same flows left behind. Random flow-mods, valid and not, against two
//! pipelines, one taking each path.

use ofp::action::{Action, Instruction};
use ofp::group_meter::{group_command, group_type, Bucket, OFPG_ANY};
use ofp::message::{flow_mod_command as cmd, flow_mod_flags, FlowMod, GroupMod};
use ofp::oxm::{Field, Match};
use ofp::port::OFPP_ANY;
use ofp::Message;
use pipeline::flow::StoredMatch;
use pipeline::{ActionLists, Pipeline, PortView, PreparedFlowMod};

/// xorshift64*: a repeatable stream.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const N_TABLES: u8 = 3;

fn random_match(r: &mut Rng) -> Match {
    let mut m = Match::new();
    if r.chance(40) {
        m = m.with(Field::InPort, 1 + r.below(3) as u128);
    }
    if r.chance(60) {
        // Without the prerequisites now and then: the match is refused (BAD_PREREQ).
        if !r.chance(10) {
            m = m.with(Field::EthType, 0x800).with(Field::IpProto, 17);
        }
        m = m.with(Field::UdpDst, 1 + r.below(4) as u128);
    }
    if r.chance(20) {
        m = m.with_masked(Field::Ipv4Dst, 0x0a00_0000 + r.below(4) as u128, 0xffff_fffe);
        if r.chance(80) {
            m = m.with(Field::EthType, 0x800);
        }
    }
    m
}

fn random_flow_mod(r: &mut Rng) -> FlowMod {
    // Now and then a table past the last: BAD_TABLE_ID, whatever else is wrong.
    let table_id = r.below(N_TABLES as u64 + 1) as u8;
    let mut actions = vec![Action::output(1 + r.below(3) as u32)];
    if r.chance(20) {
        actions.push(Action::Group(1 + r.below(2) as u32));
    }
    let mut instructions = vec![Instruction::ApplyActions(actions)];
    if r.chance(20) {
        // Backwards now and then: BAD_TABLE_ID of the instruction.
        instructions.push(Instruction::GotoTable(r.below(N_TABLES as u64) as u8));
    }
    let command = [cmd::ADD, cmd::ADD, cmd::ADD, cmd::MODIFY, cmd::MODIFY_STRICT, cmd::DELETE, cmd::DELETE_STRICT, 9]
        [r.below(8) as usize];
    let flags = match r.below(10) {
        0 => flow_mod_flags::CHECK_OVERLAP,
        1 => flow_mod_flags::SEND_FLOW_REM,
        2 => 0x8000,
        _ => 0,
    };
    FlowMod {
        command,
        table_id,
        flags,
        priority: r.below(3) as u16,
        cookie: r.below(2),
        cookie_mask: if r.chance(20) { 1 } else { 0 },
        match_: random_match(r),
        instructions,
        out_port: if r.chance(10) { 2 } else { OFPP_ANY },
        out_group: OFPG_ANY,
        ..Default::default()
    }
}

fn switch() -> Pipeline {
    let mut p = Pipeline::new(N_TABLES);
    for n in 1..=3 {
        p.set_port(n, PortView::default());
    }
    p
}

/// Every table's flows, in a form two pipelines' can be compared in.
fn flows(p: &Pipeline) -> Vec<String> {
    let mut all: Vec<String> = p
        .tables()
        .iter()
        .flat_map(|t| t.flows())
        .map(|f| {
            let f = pipeline::flow::FlowEntry { created: 0, last_used: 0, ..f.clone() };
            format!("{f:?}")
        })
        .collect();
    all.sort();
    all
}

#[test]
fn a_prepared_flow_mod_does_what_the_flow_mod_does() {
    let (mut direct, mut prepared) = (switch(), switch());
    let mut lists = ActionLists::default();
    let mut r = Rng(0x5eed_f10e);
    let (mut refused, mut removed) = (0, 0);
    for i in 0..4_000u64 {
        if i % 200 == 0 {
            // Group 1 comes and goes: flows naming it are refused, then taken, then removed.
            let command = if i % 400 == 0 { group_command::ADD } else { group_command::DELETE };
            let gm = GroupMod {
                command,
                group_type: group_type::ALL,
                group_id: 1,
                buckets: vec![Bucket { weight: 0, watch_port: OFPP_ANY, watch_group: OFPG_ANY, actions: vec![] }],
            };
            assert_eq!(direct.group_mod(&gm, i).is_ok(), prepared.group_mod(&gm, i).is_ok());
        }
        let fm = random_flow_mod(&mut r);
        let want = direct.flow_mod(&fm, i);
        // As a switch's connection prepares it (from the bytes it came in), or from the message alone.
        let p = if i % 2 == 0 {
            PreparedFlowMod::from_message(fm.clone(), &Message::FlowMod(fm.clone()).encode(i as u32), &mut lists)
        } else {
            PreparedFlowMod::new(fm.clone(), &mut lists)
        };
        let got = prepared.prepared_flow_mod(p, i);
        assert_eq!(got, want, "flow-mod {i}: {fm:?}");
        refused += want.is_err() as u32;
        removed += want.map_or(0, |r| r.len());
    }
    assert_eq!(flows(&prepared), flows(&direct));
    // The stream met both ends: refusals of several kinds, flows installed and removed.
    let left = flows(&direct).len();
    assert!(refused > 500 && removed > 20 && left > 10, "{refused} refused, {removed} removed, {left} left");
}

#[test]
fn a_prepared_flow_mod_is_the_flow_mod_it_was_made_from() {
    let mut r = Rng(7);
    let mut lists = ActionLists::default();
    for _ in 0..200 {
        let fm = random_flow_mod(&mut r);
        assert_eq!(PreparedFlowMod::new(fm.clone(), &mut lists).into_flow_mod(), fm);
    }
}

#[test]
fn a_match_stored_from_the_wire_is_the_match_encoded_whatever_its_padding_held() {
    let mut r = Rng(11);
    for _ in 0..500 {
        let m = random_match(&mut r);
        let mut wire = Vec::new();
        m.encode(&mut wire);
        let len = u16::from_be_bytes([wire[2], wire[3]]) as usize;
        // A peer's padding need not be zero, and a flow-mod's instructions follow the match.
        wire[len..].fill(0xa5);
        wire.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(StoredMatch::from_wire(&wire), Some(StoredMatch::new(&m)), "{m:?}");
        assert_eq!(StoredMatch::from_wire(&wire[..len - 1]), None, "shorter than it says");
    }
}
