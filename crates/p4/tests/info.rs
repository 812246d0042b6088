//! What a control plane sees of a program (`p4::info`, P4Info's content): p4c's names, ids under
//! their kind's prefix that stay put, aliases, widths, units, direct externs tied to their
//! tables, and `@name`/`@id` honoured or refused.

use p4::info::{info, Info, Unit};

fn program(ingress: &str) -> String {
    format!(
        "#include <edgeflow.p4>
header eth_t {{ bit<48> dst; bit<48> src; bit<16> type; }}
struct h_t {{ eth_t eth; }}
struct m_t {{ bit<12> vid; }}
parser P(packet_in pk, out h_t hdr, inout m_t meta, inout standard_metadata_t sm) {{
    state start {{ pk.extract(hdr.eth); transition accept; }}
}}
control I(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) {{
{ingress}
}}
control E(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) {{
    action drop() {{ mark_to_drop(sm); }}
    table filter {{ key = {{ sm.egress_port : exact; }} actions = {{ drop; NoAction; }} }}
    apply {{ filter.apply(); }}
}}
control D(packet_out pk, in h_t hdr) {{ apply {{ pk.emit(hdr.eth); }} }}
EdgeflowSwitch(P(), I(), E(), D()) main;
"
    )
}

fn info_of(ingress: &str) -> Result<Info, String> {
    let (p, c) = p4::front_end("info.p4", &program(ingress)).map_err(|e| panic!("{e}")).unwrap();
    info(&p, &c)
}

const INGRESS: &str = "
    direct_counter(CounterType.packets_and_bytes) hits;
    counter(64, CounterType.bytes) per_port;
    meter(8, MeterType.packets) limit;
    register<bit<20>>(16) last;
    action drop() { mark_to_drop(sm); }
    action forward(bit<32> port, @name(\"vlan\") bit<12> vid) { sm.egress_port = port; meta.vid = vid; }
    @name(\"mac_table\") table dmac {
        key = { hdr.eth.dst : exact; hdr.eth.type[7:0] : ternary @name(\"low_type\"); }
        actions = { forward; drop; }
        default_action = drop();
        counters = hits;
        size = 4096;
    }
    apply { dmac.apply(); }
";

#[test]
fn names_widths_and_ties_are_p4cs() {
    let i = info_of(INGRESS).unwrap();
    let dmac = &i.tables.iter().find(|t| t.target == "I.dmac").unwrap();
    assert_eq!(dmac.preamble.name, "I.mac_table");
    assert_eq!(dmac.preamble.alias, "mac_table");
    assert_eq!(dmac.size, 4096);
    let keys: Vec<(u32, &str, u32, &str)> =
        dmac.keys.iter().map(|k| (k.id, k.name.as_str(), k.bitwidth, k.match_kind.as_str())).collect();
    assert_eq!(keys, [(1, "hdr.eth.dst", 48, "exact"), (2, "low_type", 8, "ternary")]);
    // Two actions named drop, one per control: full names tell them apart, and so do aliases.
    let drops: Vec<(&str, &str)> = i
        .actions
        .iter()
        .filter(|a| a.target == "drop")
        .map(|a| (a.preamble.name.as_str(), a.preamble.alias.as_str()))
        .collect();
    assert_eq!(drops, [("I.drop", "I.drop"), ("E.drop", "E.drop")]);
    let forward = i.actions.iter().find(|a| a.target == "forward").unwrap();
    assert_eq!(forward.preamble.alias, "forward");
    let params: Vec<(u32, &str, u32)> = forward.params.iter().map(|p| (p.id, p.name.as_str(), p.bitwidth)).collect();
    assert_eq!(params, [(1, "port", 32), (2, "vlan", 12)]);
    // NoAction is in P4Info because a table lists it; the top level keeps its bare name.
    assert!(i.actions.iter().any(|a| a.preamble.name == "NoAction"));
    assert_eq!(dmac.action_ids.len(), 2);
    assert_eq!(dmac.default_action, Some((i.action_named("drop").unwrap().preamble.id, false)));
    // Externs: unit, size, width, and the direct counter tied both ways.
    let hits = &i.direct_counters[0];
    assert_eq!((hits.preamble.name.as_str(), hits.unit, hits.table), ("I.hits", Unit::Both, Some(dmac.preamble.id)));
    assert_eq!(dmac.direct_counter, Some(hits.preamble.id));
    assert_eq!((i.counters[0].unit, i.counters[0].size), (Unit::Bytes, 64));
    assert_eq!((i.meters[0].unit, i.meters[0].size), (Unit::Packets, 8));
    assert_eq!((i.registers[0].bitwidth, i.registers[0].size), (20, 16));
}

#[test]
fn ids_carry_their_kinds_prefix_and_stay_put_when_the_program_changes_elsewhere() {
    let before = info_of(INGRESS).unwrap();
    let prefixes = |i: &Info| {
        let mut all: Vec<(u32, u8)> = Vec::new();
        all.extend(i.tables.iter().map(|t| (t.preamble.id, 0x02)));
        all.extend(i.actions.iter().map(|a| (a.preamble.id, 0x01)));
        all.extend(i.counters.iter().map(|c| (c.preamble.id, 0x12)));
        all.extend(i.direct_counters.iter().map(|c| (c.preamble.id, 0x13)));
        all.extend(i.meters.iter().map(|c| (c.preamble.id, 0x14)));
        all.extend(i.registers.iter().map(|c| (c.preamble.id, 0x16)));
        all
    };
    for (id, prefix) in prefixes(&before) {
        assert_eq!(id >> 24, prefix as u32, "{id:#x}");
        assert_ne!(id & 0xff_ffff, 0, "{id:#x}");
    }
    let mut ids: Vec<u32> = prefixes(&before).iter().map(|(id, _)| *id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), prefixes(&before).len(), "unique");
    // Another table added: the ids already given do not move.
    let grown = INGRESS.replace(
        "apply { dmac.apply(); }",
        "table extra { key = { hdr.eth.src : exact; } actions = { drop; } }\n    apply { dmac.apply(); extra.apply(); }",
    );
    let after = info_of(&grown).unwrap();
    assert_eq!(after.tables.len(), before.tables.len() + 1);
    for t in &before.tables {
        assert_eq!(after.tables.iter().find(|u| u.target == t.target).unwrap().preamble.id, t.preamble.id);
    }
    for a in &before.actions {
        assert_eq!(
            after.actions.iter().find(|b| b.preamble.name == a.preamble.name).unwrap().preamble.id,
            a.preamble.id
        );
    }
}

#[test]
fn an_id_annotation_is_honoured_and_a_wrong_one_refused() {
    let fixed = INGRESS.replace("@name(\"mac_table\") table", "@id(0x10) table");
    let i = info_of(&fixed).unwrap();
    assert_eq!(i.tables.iter().find(|t| t.target == "I.dmac").unwrap().preamble.id, 0x0200_0010);
    let full = INGRESS.replace("@name(\"mac_table\") table", "@id(0x02000011) table");
    assert_eq!(info_of(&full).unwrap().tables[0].preamble.id, 0x0200_0011);
    let wrong = INGRESS.replace("@name(\"mac_table\") table", "@id(0x01000011) table");
    assert_eq!(info_of(&wrong).unwrap_err(), "I.dmac: @id(0x1000011) is not an id of its kind (prefix 0x02)");
    let twice =
        INGRESS.replace("action drop()", "@id(7) action drop()").replace("action forward(", "@id(7) action forward(");
    assert_eq!(info_of(&twice).unwrap_err(), "I.forward: @id(0x7) is taken");
}

/// The learning switch of `examples/p4`: its `@controller_header` headers are P4Runtime's packet
/// metadata (fields in order, ids from 1), its `digest(1, meta.learn)` a digest named by the
/// data's type; the software target keeps each digest a frame sends, with the data as the call
/// made it, and sends a frame for the CPU port with its packet_in header in front.
#[test]
fn controller_headers_and_digests_are_published_and_digests_kept_per_frame() {
    let source = include_str!("../../../examples/p4/v1model_learning_switch.p4");
    let (p, c) = p4::front_end("learn.p4", source).unwrap();
    let i = info(&p, &c).unwrap();
    let fields = |name: &str| {
        let h = i.controller_header(name).unwrap_or_else(|| panic!("no {name}"));
        assert_eq!(h.preamble.id >> 24, p4::info::CONTROLLER_HEADER as u32);
        h.metadata.iter().map(|m| (m.id, m.name.clone(), m.bitwidth)).collect::<Vec<_>>()
    };
    assert_eq!(fields("packet_in"), [(1, "ingress_port".into(), 9), (2, "pad".into(), 7)]);
    assert_eq!(fields("packet_out"), [(1, "egress_port".into(), 9), (2, "pad".into(), 7)]);
    let [d] = i.digests.as_slice() else { panic!("{:?}", i.digests) };
    assert_eq!((d.preamble.name.as_str(), d.preamble.id >> 24), ("learn_t", p4::info::DIGEST as u32));
    assert_eq!(d.members.iter().map(|m| (m.name.as_str(), m.bitwidth)).collect::<Vec<_>>(), [("src", 48), ("port", 9)]);

    let mut sw = p4::backends::software::Switch::new(p, c).unwrap();
    let frame = [[0x02, 0, 0, 0, 0, 0x99], [0x02, 0, 0, 0, 0, 0x01]].concat();
    let frame = [frame, vec![0x08, 0x00, 0xaa]].concat();
    let out = sw.process(&frame, 3, 0).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 255, "an unknown destination goes to the CPU port");
    assert_eq!(out[0].frame, [&[0x01, 0x80][..], &frame].concat(), "packet_in: ingress_port 3, then the frame");
    let digests = sw.take_digests();
    assert_eq!(digests.len(), 1);
    assert_eq!((digests[0].name.as_str(), digests[0].data.as_slice()), ("learn_t", &[0x0200_0000_0001_u128, 3][..]));
    assert!(sw.take_digests().is_empty(), "taken once");
}

/// A digest whose data has a struct member: P4Info lists that struct's fields in its place,
/// named `outer.inner`, and the software target sends their values there (P4Info had the member
/// as a bitstring of width 0, and the data a 0 for it).
#[test]
fn a_digests_nested_struct_is_published_and_sent_flat() {
    let source = include_str!("../../../examples/p4/v1model_learning_switch.p4")
        .replace("struct learn_t {\n    bit<48> src;", "struct where_t {\n    bit<9> port;\n    bit<7> pad;\n}\n\nstruct learn_t {\n    where_t at;\n    bit<48> src;")
        .replace(
            "meta.learn.src = hdr.ethernet.src;",
            "meta.learn.src = hdr.ethernet.src; meta.learn.at.port = standard_metadata.ingress_port; meta.learn.at.pad = 5;",
        );
    let (p, c) = p4::front_end("learn.p4", &source).unwrap();
    let i = info(&p, &c).unwrap();
    let [d] = i.digests.as_slice() else { panic!("{:?}", i.digests) };
    let members: Vec<_> = d.members.iter().map(|m| (m.id, m.name.as_str(), m.bitwidth)).collect();
    assert_eq!(members, [(1, "at.port", 9), (2, "at.pad", 7), (3, "src", 48), (4, "port", 9)]);

    let mut sw = p4::backends::software::Switch::new(p, c).unwrap();
    let frame = [[0x02, 0, 0, 0, 0, 0x99], [0x02, 0, 0, 0, 0, 0x01]].concat();
    sw.process(&[frame, vec![0x08, 0x00, 0xaa]].concat(), 3, 0).unwrap();
    let digests = sw.take_digests();
    assert_eq!(digests.len(), 1);
    assert_eq!(digests[0].data, [3, 5, 0x0200_0000_0001, 3]);
}
