//! Flow-mods that reach flows through an index rather than a walk over the tables — eviction, and
//! group and meter deletes — against what a walk over every flow says they must do, on random
//! sequences. (The classifier's own tests check non-strict requests and overlaps the same way.)

use ofp::action::{Action, Instruction};
use ofp::group_meter::{group_command, group_type, meter_flags, BandKind, Bucket, MeterBand, OFPG_ANY};
use ofp::message::{flow_mod_command as cmd, FlowMod, GroupMod, MeterMod};
use ofp::oxm::{Field, Match};
use ofp::port::OFPP_ANY;
use packet::craft::{FrameBuilder, L3, L4};
use packet::{parse, Offload, Packet};
use pipeline::exec::{Sink, ToController};
use pipeline::{Pipeline, PortView};

struct Discard;

impl Sink for Discard {
    fn output(&mut self, _port: u32, _queue: Option<u32>, _pkt: &Packet) {}
    fn to_controller(&mut self, _pkt: &Packet, _info: &ToController) {}
}

/// xorshift64: the same sequence on every run.
struct Random(u64);

impl Random {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn switch() -> Pipeline {
    let mut p = Pipeline::new(4);
    for n in 1..=3 {
        p.set_port(n, PortView::default());
    }
    p
}

fn udp_to(port: u16) -> Match {
    Match::new().with(Field::EthType, 0x800).with(Field::IpProto, 17).with(Field::UdpDst, port as u128)
}

fn send_udp(p: &mut Pipeline, port: u16, now: u64) {
    let frame = FrameBuilder::new([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1]).build(L3::Ipv4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
        ttl: 64,
        tos: 0,
        l4: L4::Udp { src: 5000, dst: port, payload: vec![0; 18] },
    });
    let (key, layout) = parse(&frame, 1).unwrap();
    let mut pkt = Packet::new(&frame, Offload::default(), layout);
    p.process(&mut pkt, &key, now, &mut Discard);
}

fn add(p: &mut Pipeline, table: u8, priority: u16, m: Match, actions: Vec<Instruction>, now: u64) {
    let fm = FlowMod { table_id: table, priority, match_: m, instructions: actions, ..Default::default() };
    p.flow_mod(&fm, now).unwrap();
}

/// (table, priority, UDP port) of every flow but the table-miss ones.
fn flows(p: &Pipeline) -> Vec<(u8, u16, u128)> {
    let mut out: Vec<_> = p
        .tables()
        .iter()
        .flat_map(|t| t.flows())
        .filter(|f| !f.is_table_miss())
        .map(|f| {
            (
                f.table_id,
                f.priority,
                f.match_.to_match().fields.iter().find(|x| x.field == Field::UdpDst).unwrap().value,
            )
        })
        .collect();
    out.sort();
    out
}

/// A full evicting table takes out the least recently used flow of the lowest priority (the lowest
/// id of those used last at the same time), as a walk over the table finds it, every time.
#[test]
fn eviction_takes_what_a_walk_would() {
    let mut p = switch();
    let limit = 40;
    p.set_table_limit(0, limit, true);
    add(&mut p, 0, 0, Match::new(), vec![], 0);
    let mut rng = Random(0x2545_f491_4f6c_dd1d);
    let mut now = 1_000;
    let mut evictions = 0;
    for port in 1..2_000u16 {
        now += 1_000;
        // Frames hit random flows: their uses move.
        for _ in 0..rng.below(4) {
            send_udp(&mut p, 1 + rng.below(port as u64) as u16, now);
            now += 1_000;
        }
        let table = &p.tables()[0];
        let expected = (table.len() as u32 >= limit).then(|| {
            let victim =
                table.flows().filter(|f| !f.is_table_miss()).min_by_key(|f| (f.priority, f.last_used)).unwrap();
            (victim.priority, victim.match_.to_match())
        });
        let before = flows(&p);
        add(
            &mut p,
            0,
            1 + rng.below(3) as u16,
            udp_to(port),
            vec![Instruction::ApplyActions(vec![Action::output(2)])],
            now,
        );
        let after = flows(&p);
        if let Some((priority, m)) = expected {
            evictions += 1;
            let port_of = m.fields.iter().find(|x| x.field == Field::UdpDst).unwrap().value;
            let gone: Vec<_> = before.iter().filter(|f| !after.contains(f)).collect();
            assert_eq!(gone, vec![&(0, priority, port_of)], "eviction {evictions}");
        }
        assert!(p.tables()[0].flows().any(|f| f.is_table_miss()));
    }
    assert!(evictions > 1_900, "{evictions}");
    assert_eq!(p.tables()[0].evictions, evictions);
}

/// Deleting a group or meter removes exactly the flows whose instructions name it, in every table,
/// however they came to name it (added so, or modified to).
#[test]
fn group_and_meter_deletes_remove_exactly_their_users() {
    let mut p = switch();
    let mut rng = Random(0x9e37_79b9_7f4a_7c15);
    let (groups, meters) = (6u32, 4u32);
    let add_group = |p: &mut Pipeline, g: u32| {
        let bucket =
            Bucket { weight: 0, watch_port: OFPP_ANY, watch_group: OFPG_ANY, actions: vec![Action::output(2)] };
        let gm =
            GroupMod { command: group_command::ADD, group_type: group_type::ALL, group_id: g, buckets: vec![bucket] };
        p.group_mod(&gm, 0).unwrap();
    };
    let add_meter = |p: &mut Pipeline, m: u32| {
        let band = MeterBand { rate: 1_000_000, burst_size: 0, kind: BandKind::Drop };
        p.meter_mod(&MeterMod { command: 0, flags: meter_flags::PKTPS, meter_id: m, bands: vec![band] }, 0).unwrap();
    };
    for g in 1..=groups {
        add_group(&mut p, g);
    }
    for m in 1..=meters {
        add_meter(&mut p, m);
    }
    // What each flow names, by (table, priority, port), as the test put it there.
    let mut names = std::collections::BTreeMap::new();
    let instructions = |g: u32, m: u32| {
        let mut i = vec![Instruction::ApplyActions(vec![Action::Group(g)])];
        if m != 0 {
            i.insert(0, Instruction::Meter(m));
        }
        i
    };
    let mut removed_total = 0;
    for round in 0..600u32 {
        match rng.below(10) {
            0..=5 => {
                let (t, prio, port) = (rng.below(3) as u8, 1 + rng.below(2) as u16, rng.below(300) as u16);
                let (g, m) = (1 + rng.below(groups as u64) as u32, rng.below(meters as u64 + 1) as u32);
                let fm = FlowMod {
                    table_id: t,
                    priority: prio,
                    match_: udp_to(port),
                    instructions: instructions(g, m),
                    ..Default::default()
                };
                if p.flow_mod(&fm, 0).is_ok() {
                    names.insert((t, prio, port as u128), (g, m));
                }
            }
            6 => {
                // A non-strict modify of one port's flows in one table, to another group and meter.
                let (t, port) = (rng.below(3) as u8, rng.below(300) as u16);
                let (g, m) = (1 + rng.below(groups as u64) as u32, rng.below(meters as u64 + 1) as u32);
                let fm = FlowMod {
                    command: cmd::MODIFY,
                    table_id: t,
                    match_: udp_to(port),
                    instructions: instructions(g, m),
                    ..Default::default()
                };
                if p.flow_mod(&fm, 0).is_ok() {
                    for ((ft, _, fport), named) in names.iter_mut() {
                        if *ft == t && *fport == port as u128 {
                            *named = (g, m);
                        }
                    }
                }
            }
            7 | 8 => {
                let g = 1 + rng.below(groups as u64) as u32;
                let users = names.values().filter(|(ng, _)| *ng == g).count();
                let gm = GroupMod { command: group_command::DELETE, group_type: 0, group_id: g, buckets: vec![] };
                p.group_mod(&gm, 0).unwrap();
                names.retain(|_, (ng, _)| *ng != g);
                removed_total += users;
                add_group(&mut p, g);
            }
            _ => {
                let m = 1 + rng.below(meters as u64) as u32;
                let users = names.values().filter(|(_, nm)| *nm == m).count();
                p.meter_mod(&MeterMod { command: 2, flags: 0, meter_id: m, bands: vec![] }, 0).unwrap();
                names.retain(|_, (_, nm)| *nm != m);
                removed_total += users;
                add_meter(&mut p, m);
            }
        }
        let expected: Vec<_> = names.keys().map(|&(t, prio, port)| (t, prio, port)).collect();
        assert_eq!(flows(&p), expected, "round {round}");
    }
    assert!(removed_total > 100, "{removed_total} flows removed by deletes");
}
