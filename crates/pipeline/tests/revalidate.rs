//! Revalidation keeps "one truth": random flow-mods, group-mods, meter-mods, port changes and
//! expiry between random frames, and every cache hit checked against a fresh translation of the
//! same frame. And it keeps what it can: changes that cannot touch a cached entry leave it.

use ofp::action::{Action, Instruction};
use ofp::group_meter::{group_command, group_type, meter_command, meter_flags, BandKind, Bucket, MeterBand, OFPG_ANY};
use ofp::message::{flow_mod_command as cmd, flow_mod_flags, flow_removed_reason, FlowMod, GroupMod, MeterMod};
use ofp::oxm::{Field, Match, OxmField, OFPVID_PRESENT};
use ofp::port::*;
use packet::craft::{FrameBuilder, L3, L4};
use packet::{parse, FlowKey, Offload, Packet};
use pipeline::exec::{Sink, ToController};
use pipeline::{Pipeline, PortView};

struct Discard;

impl Sink for Discard {
    fn output(&mut self, _: u32, _: Option<u32>, _: &Packet) {}
    fn to_controller(&mut self, _: &Packet, _: &ToController) {}
}

/// xorshift64*: the test needs a repeatable stream, not a good one.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

const N_TABLES: u8 = 3;
const MACS: [u64; 3] = [0x0200_0000_0001, 0x0200_0000_0002, 0x0200_0000_0003];

fn mac_bytes(m: u64) -> [u8; 6] {
    m.to_be_bytes()[2..].try_into().unwrap()
}

fn frame(r: &mut Rng) -> (u32, Vec<u8>) {
    let src = r.pick(&MACS);
    let dst = if r.chance(15) { 0xffff_ffff_ffff } else { r.pick(&MACS) };
    let dst = if dst == src { MACS[(MACS.iter().position(|&m| m == src).unwrap() + 1) % 3] } else { dst };
    let mut b = FrameBuilder::new(mac_bytes(dst), mac_bytes(src));
    if r.chance(30) {
        b = b.vlan(0x8100, 10 | (r.below(2) as u16) << 13);
    }
    let l3 = L3::Ipv4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 1 + r.below(3) as u8],
        ttl: 64,
        tos: 0,
        l4: L4::Udp { src: 7, dst: 1 + r.below(4) as u16, payload: vec![0; 18] },
    };
    (1 + r.below(5) as u32, b.build(l3))
}

fn random_match(r: &mut Rng) -> (Match, bool) {
    let mut m = Match::new();
    if r.chance(30) {
        m = m.with(Field::InPort, 1 + r.below(5) as u128);
    }
    if r.chance(30) {
        m = m.with(Field::EthDst, r.pick(&MACS) as u128);
    }
    if r.chance(15) {
        m = m.with_masked(Field::EthSrc, r.pick(&MACS) as u128, 0xff);
    }
    if r.chance(15) {
        m = m.with(Field::VlanVid, (OFPVID_PRESENT | 10) as u128);
    }
    if r.chance(15) {
        m = m.with_masked(Field::Metadata, r.below(2) as u128, 1);
    }
    let udp = r.chance(45);
    if udp {
        m = m.with(Field::EthType, 0x800).with(Field::IpProto, 17);
        if r.chance(70) {
            m = m.with(Field::UdpDst, 1 + r.below(4) as u128);
        }
        if r.chance(30) {
            m = m.with_masked(Field::Ipv4Dst, 0x0a00_0001 + r.below(3) as u128, 0xffff_fffe);
        }
    }
    (m, udp)
}

fn random_action(r: &mut Rng, udp: bool) -> Vec<Action> {
    let port = r.pick(&[1, 2, 3, 4, 5, OFPP_FLOOD, OFPP_ALL, OFPP_NORMAL, OFPP_CONTROLLER, OFPP_IN_PORT]);
    match r.below(7) {
        0 => vec![Action::SetField(OxmField::exact(Field::EthDst, r.pick(&MACS) as u128))],
        1 if udp => vec![Action::SetField(OxmField::exact(Field::UdpDst, 1 + r.below(4) as u128))],
        2 if udp => vec![Action::SetField(OxmField::exact(Field::Ipv4Dst, 0x0a00_0001 + r.below(3) as u128))],
        3 => vec![
            Action::PushVlan(0x8100),
            Action::SetField(OxmField::exact(Field::VlanVid, (OFPVID_PRESENT | 20) as u128)),
        ],
        4 => vec![Action::Group(1 + r.below(3) as u32)],
        _ => vec![Action::Output { port, max_len: 64 }],
    }
}

fn random_flow_mod(r: &mut Rng) -> FlowMod {
    let table_id = r.below(N_TABLES as u64) as u8;
    let (match_, udp) = random_match(r);
    let mut instructions = Vec::new();
    if r.chance(15) {
        instructions.push(Instruction::Meter(1 + r.below(2) as u32));
    }
    let actions: Vec<Action> = (0..r.below(3)).flat_map(|_| random_action(r, udp)).collect();
    instructions.push(Instruction::ApplyActions(actions));
    if r.chance(20) {
        instructions.push(Instruction::WriteMetadata { metadata: r.below(2), mask: 1 });
    }
    if table_id + 1 < N_TABLES && r.chance(40) {
        instructions.push(Instruction::GotoTable(table_id + 1 + r.below((N_TABLES - table_id - 1) as u64) as u8));
    }
    let command = r.pick(&[
        cmd::ADD,
        cmd::ADD,
        cmd::ADD,
        cmd::ADD,
        cmd::MODIFY,
        cmd::MODIFY_STRICT,
        cmd::DELETE,
        cmd::DELETE_STRICT,
    ]);
    FlowMod {
        command,
        table_id,
        priority: r.below(4) as u16,
        idle_timeout: if r.chance(10) { 1 + r.below(3) as u16 } else { 0 },
        match_,
        instructions,
        out_port: OFPP_ANY,
        out_group: OFPG_ANY,
        ..Default::default()
    }
}

fn random_group_mod(r: &mut Rng) -> GroupMod {
    let bucket = |r: &mut Rng| Bucket {
        weight: 1,
        watch_port: if r.chance(50) { 1 + r.below(5) as u32 } else { OFPP_ANY },
        watch_group: OFPG_ANY,
        actions: vec![Action::output(1 + r.below(5) as u32)],
    };
    let buckets = (0..1 + r.below(3)).map(|_| bucket(r)).collect();
    GroupMod {
        command: r.pick(&[group_command::ADD, group_command::MODIFY, group_command::DELETE]),
        group_type: r.pick(&[group_type::ALL, group_type::FAST_FAILOVER, group_type::SELECT]),
        group_id: 1 + r.below(3) as u32,
        buckets,
    }
}

fn random_meter_mod(r: &mut Rng) -> MeterMod {
    MeterMod {
        command: r.pick(&[meter_command::ADD, meter_command::MODIFY, meter_command::DELETE]),
        flags: meter_flags::PKTPS,
        meter_id: 1 + r.below(2) as u32,
        // A remarking band makes the meter's flows uncacheable (translation charges it).
        bands: vec![MeterBand {
            rate: 1 + r.below(1000) as u32,
            burst_size: 0,
            kind: if r.chance(30) { BandKind::DscpRemark { prec_level: 1 } } else { BandKind::Drop },
        }],
    }
}

fn port_change(p: &mut Pipeline, r: &mut Rng) {
    let port = 1 + r.below(5) as u32;
    match r.below(4) {
        0 if port == 5 => p.remove_port(5),
        0 | 1 => p.set_port(port, PortView { config: 0, state: state::LINK_DOWN }),
        2 => p.set_port(port, PortView { config: config::NO_FWD, state: 0 }),
        _ => p.set_port(port, PortView::default()),
    }
}

/// How many cache hits one run checked, and how many of them survived at least one change.
#[derive(Default)]
struct Checked {
    hits: u64,
    changes: u64,
}

fn run(seed: u64, steps: usize) -> Checked {
    let mut r = Rng(seed | 1);
    let mut p = Pipeline::new(N_TABLES);
    for n in 1..=5 {
        p.set_port(n, PortView::default());
    }
    let mut now: u64 = 0;
    let mut checked = Checked::default();
    // REVAL_DEBUG=1: the changes before a failure, and both translations, are printed.
    let debug = std::env::var_os("REVAL_DEBUG").is_some();
    let mut log: Vec<String> = Vec::new();
    let mut note = |line: String| {
        if debug {
            log.push(line);
        }
    };
    for step in 0..steps {
        let what = r.below(100);
        if what < 60 {
            let (in_port, bytes) = frame(&mut r);
            let (key, layout) = parse(&bytes, in_port).unwrap();
            let pkt = Packet::new(&bytes, Offload::default(), layout);
            let cached =
                p.cache_lookup(&key).map(|e| (e.actions.clone(), e.credits.flows.clone(), e.credits.groups.clone()));
            let fresh = p.translate(&pkt, &key, now);
            if let Some((actions, flows, groups)) = cached {
                if debug && (actions != fresh.actions || !fresh.cacheable) {
                    note(format!("frame on {in_port}: {bytes:02x?}"));
                    note(format!("cached: {:?}", p.cache_lookup(&key).unwrap()));
                    note(format!("fresh: {fresh:?}"));
                    drop(note);
                    eprintln!("{}", log.join("\n"));
                    panic!("seed {seed} step {step}: stale");
                }
                assert!(fresh.cacheable, "seed {seed} step {step}: a cache hit for an uncacheable translation");
                assert_eq!(actions, fresh.actions, "seed {seed} step {step}: cached actions are stale");
                assert_eq!(flows, fresh.credits.flows, "seed {seed} step {step}: cached entry credits other flows");
                assert_eq!(groups, fresh.credits.groups, "seed {seed} step {step}: cached entry credits other groups");
                checked.hits += 1;
            }
            let mut pkt = Packet::new(&bytes, Offload::default(), layout);
            p.process(&mut pkt, &key, now, &mut Discard);
        } else if what < 85 {
            checked.changes += 1;
            let fm = random_flow_mod(&mut r);
            let res = p.flow_mod(&fm, now);
            note(format!("{step} flow-mod {fm:?} -> {:?}", res.map(|_| ())));
        } else if what < 89 {
            checked.changes += 1;
            let gm = random_group_mod(&mut r);
            let res = p.group_mod(&gm, now);
            note(format!("{step} group-mod {gm:?} -> {:?}", res.map(|_| ())));
        } else if what < 92 {
            checked.changes += 1;
            let mm = random_meter_mod(&mut r);
            let res = p.meter_mod(&mm, now);
            note(format!("{step} meter-mod {mm:?} -> {:?}", res.map(|_| ())));
        } else if what < 96 {
            checked.changes += 1;
            port_change(&mut p, &mut r);
            note(format!("{step} port change"));
        } else {
            // Flow timeouts (seconds) and, now and then, address ageing (minutes).
            now += if r.chance(10) { 200_000_000_000 } else { 700_000_000 };
            p.expire(now);
        }
    }
    checked
}

#[test]
fn every_cache_hit_equals_a_fresh_translation_under_random_changes() {
    let mut hits = 0;
    for seed in 0..40u64 {
        let c = run(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xdead_beef, 4000);
        assert!(c.changes > 1000);
        hits += c.hits;
    }
    // Hits on entries that outlived changes are what is checked: a cache flushed at every change
    // would leave almost none (frames and changes alternate).
    eprintln!("{hits} cache hits checked");
    assert!(hits > 20_000, "only {hits} cache hits were checked");
}

fn udp_to(port: u16) -> (FlowKey, Vec<u8>) {
    let bytes = FrameBuilder::new(mac_bytes(MACS[1]), mac_bytes(MACS[0])).build(L3::Ipv4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
        ttl: 64,
        tos: 0,
        l4: L4::Udp { src: 7, dst: port, payload: vec![0; 18] },
    });
    (parse(&bytes, 1).unwrap().0, bytes)
}

fn send(p: &mut Pipeline, port: u16) {
    let (key, bytes) = udp_to(port);
    let (_, layout) = parse(&bytes, 1).unwrap();
    let mut pkt = Packet::new(&bytes, Offload::default(), layout);
    p.process(&mut pkt, &key, 0, &mut Discard);
}

fn udp_flow(command: u8, port: u16, priority: u16, out: u32) -> FlowMod {
    FlowMod {
        command,
        priority,
        match_: Match::new().with(Field::EthType, 0x800).with(Field::IpProto, 17).with(Field::UdpDst, port as u128),
        instructions: vec![Instruction::ApplyActions(vec![Action::output(out)])],
        out_port: OFPP_ANY,
        out_group: OFPG_ANY,
        ..Default::default()
    }
}

fn cached(p: &Pipeline, port: u16) -> bool {
    p.cache_lookup(&udp_to(port).0).is_some()
}

#[test]
fn a_change_retires_only_the_entries_it_can_affect() {
    let mut p = Pipeline::new(2);
    for n in 1..=3 {
        p.set_port(n, PortView::default());
    }
    for port in 1..=100 {
        p.flow_mod(&udp_flow(cmd::ADD, port, 10, 2), 0).unwrap();
        send(&mut p, port);
    }
    assert_eq!(p.cache_len(), 100);
    // Flows for ports no frame uses: nothing cached can match them.
    for port in 1000..1100 {
        p.flow_mod(&udp_flow(cmd::ADD, port, 20, 3), 0).unwrap();
        p.flow_mod(&udp_flow(cmd::DELETE_STRICT, port, 20, 3), 0).unwrap();
    }
    assert_eq!(p.cache_len(), 100, "unrelated flow-mods leave the cache alone");
    // A lower priority flow that overlaps cannot win: the entry stays.
    p.flow_mod(&udp_flow(cmd::ADD, 7, 5, 3), 0).unwrap();
    assert!(cached(&p, 7));
    // A higher one can.
    p.flow_mod(&udp_flow(cmd::ADD, 7, 30, 3), 0).unwrap();
    assert!(!cached(&p, 7) && cached(&p, 8));
    // Modifying or deleting a flow retires what it decided.
    p.flow_mod(&udp_flow(cmd::MODIFY_STRICT, 8, 10, 3), 0).unwrap();
    p.flow_mod(&udp_flow(cmd::DELETE_STRICT, 9, 10, 2), 0).unwrap();
    assert!(!cached(&p, 8) && !cached(&p, 9) && cached(&p, 10));
    // A flow in a table no cached translation reached changes nothing.
    let mut elsewhere = udp_flow(cmd::ADD, 10, 99, 3);
    elsewhere.table_id = 1;
    p.flow_mod(&elsewhere, 0).unwrap();
    assert_eq!(p.cache_len(), 97);
    // A port: only what sent there or read it (here: all of them output to port 2).
    p.set_port(3, PortView { config: 0, state: state::LINK_DOWN });
    assert_eq!(p.cache_len(), 97);
    p.set_port(2, PortView { config: 0, state: state::LINK_DOWN });
    assert_eq!(p.cache_len(), 0);
    // The datapath hears about each retired entry, one by one.
    let retired = p.take_retired();
    assert_eq!(retired.entries.len(), 100);
    assert_eq!(p.generation(), 0, "no flush: the generation did not move");
}

#[test]
fn a_mass_delete_reports_each_flow_once_and_retires_every_entry_it_decided() {
    let mut p = Pipeline::new(1);
    p.set_port(2, PortView::default());
    // 101 flows, each asking for its flow-removed message; the odd ones' cookie is 1.
    for port in 1..=101 {
        let fm = FlowMod {
            cookie: port as u64 % 2,
            flags: flow_mod_flags::SEND_FLOW_REM,
            ..udp_flow(cmd::ADD, port, 10, 2)
        };
        p.flow_mod(&fm, 0).unwrap();
        send(&mut p, port);
    }
    assert_eq!(p.cache_len(), 101);
    // Deleting the 51 odd ones: more than the changes the pipeline keeps between revalidations,
    // and not a multiple of them, so the delete retires entries in rounds and then the rest.
    let delete = FlowMod { cookie: 1, cookie_mask: 1, ..udp_flow(cmd::DELETE, 0, 0, 2) };
    let delete = FlowMod { match_: Match::new(), ..delete };
    let mut reported = Vec::new();
    p.flow_mod_into(&delete, 0, &mut |r| reported.push(r)).unwrap();
    let mut ports: Vec<u128> = reported
        .iter()
        .map(|r| {
            assert_eq!((r.cookie, r.reason), (1, flow_removed_reason::DELETE));
            r.match_.fields.iter().find(|f| f.field == Field::UdpDst).unwrap().value
        })
        .collect();
    ports.sort_unstable();
    assert_eq!(ports, (1..=101).step_by(2).collect::<Vec<u128>>(), "each deleted flow reported once");
    for port in 1..=101 {
        assert_eq!(cached(&p, port), port % 2 == 0, "port {port}: only the kept flows' entries stay");
    }
}

#[test]
fn a_full_cache_retires_its_least_recently_used_not_everything() {
    use pipeline::cache::{CacheEntry, FlowCache};
    let mut cache = FlowCache::new(16);
    let mut mask = FlowKey::default();
    mask.mask_field(Field::UdpDst);
    let entry = |used| CacheEntry {
        actions: vec![],
        credits: Default::default(),
        last_used: used,
        packets: 1,
        reads: Default::default(),
    };
    let key = |port: u128| {
        let mut k = FlowKey::default();
        k.set(Field::UdpDst, port);
        k
    };
    for port in 0..16u128 {
        // Port 3 is the oldest and port 5 the second oldest; the rest were used later.
        let used = match port {
            3 => 1,
            5 => 2,
            p => 100 + p as u64,
        };
        cache.insert(&key(port), &mask, entry(used)).unwrap();
    }
    cache.take_retired();
    cache.insert(&key(99), &mask, entry(500)).unwrap();
    assert_eq!(cache.len(), 15, "an eighth (two) went to make room for one");
    assert!(cache.lookup(&key(3)).is_none() && cache.lookup(&key(5)).is_none());
    assert!(cache.lookup(&key(4)).is_some() && cache.lookup(&key(99)).is_some());
    assert_eq!(cache.take_retired().len(), 2);
    assert_eq!(cache.generation, 0, "no flush");
}
