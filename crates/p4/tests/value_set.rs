//! Value sets (P4-16 12.11): `value_set<T>(N) name;` in a parser, named as a `select` case's
//! keyset, its members set by the control plane. Checked by the front end, carried by the mid
//! end and P4Info, matched by the software target.

use p4::backends::software::{Dropped, Match, Switch};

/// A program whose parser goes on to read a 2-byte tag when the value set `parser_locals`
/// declares matches `select_on`: the ingress sends a frame with the tag out of port 2, any
/// other out of port 1.
fn program(top: &str, parser_locals: &str, select_on: &str) -> String {
    format!(
        "#include <edgeflow.p4>
header eth_t {{ bit<48> dst; bit<48> src; bit<16> type; }}
header tag_t {{ bit<16> v; }}
struct h_t {{ eth_t eth; tag_t tag; }}
struct m_t {{ }}
{top}
parser P(packet_in pk, out h_t hdr, inout m_t meta, inout standard_metadata_t sm) {{
{parser_locals}
    state start {{ pk.extract(hdr.eth); transition select({select_on}) {{ pvs: tagged; default: accept; }} }}
    state tagged {{ pk.extract(hdr.tag); transition accept; }}
}}
control I(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) {{
    apply {{ if (hdr.tag.isValid()) {{ sm.egress_port = 2; }} else {{ sm.egress_port = 1; }} }}
}}
control E(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control D(packet_out pk, in h_t hdr) {{ apply {{ pk.emit(hdr.eth); pk.emit(hdr.tag); }} }}
EdgeflowSwitch(P(), I(), E(), D()) main;
"
    )
}

const ON_TYPE: &str = "    value_set<bit<16>>(4) pvs;";
const KEY_T: &str = "struct key_t { bit<16> type; bit<8> low; }";
const ON_TYPE_AND_SRC: &str = "    value_set<key_t>(2) pvs;";

fn switch(text: &str) -> Switch {
    let (p, c) = p4::front_end("vs.p4", text).unwrap_or_else(|e| panic!("{e}"));
    Switch::new(p, c).unwrap_or_else(|e| panic!("{e}"))
}

fn frame(ethertype: u16, src_low: u8) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, src_low];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(&[0xab, 0xcd, 1, 2, 3, 4, 5, 6]);
    f
}

/// The port the frame leaves by: 2 when the value set matched.
fn port(sw: &mut Switch, f: &[u8]) -> u32 {
    let out = sw.process(f, 1, 0).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].frame, f, "the frame leaves unchanged");
    out[0].port
}

#[test]
fn a_value_set_on_the_ethertype_matches_once_members_are_set_and_not_after_removal() {
    let mut sw = switch(&program("", ON_TYPE, "hdr.eth.type"));
    assert_eq!(sw.value_sets(), ["P.pvs"]);
    let (a, b) = (frame(0x88b5, 1), frame(0x88b6, 1));
    assert_eq!((port(&mut sw, &a), port(&mut sw, &b)), (1, 1), "an empty set matches nothing");
    sw.set_value_set("P.pvs", vec![vec![Match::Exact(0x88b5)]]).unwrap();
    assert_eq!((port(&mut sw, &a), port(&mut sw, &b)), (2, 1));
    sw.set_value_set("P.pvs", vec![vec![Match::Exact(0x88b5)], vec![Match::Exact(0x88b6)]]).unwrap();
    assert_eq!((port(&mut sw, &a), port(&mut sw, &b)), (2, 2));
    assert_eq!(sw.value_set("P.pvs").unwrap().len(), 2);
    // The members are replaced as a whole: 0x88b5 removed.
    sw.set_value_set("P.pvs", vec![vec![Match::Exact(0x88b6)]]).unwrap();
    assert_eq!((port(&mut sw, &a), port(&mut sw, &b)), (1, 2));
    sw.set_value_set("P.pvs", vec![]).unwrap();
    assert_eq!((port(&mut sw, &a), port(&mut sw, &b)), (1, 1));
}

#[test]
fn a_members_mask_leaves_the_bits_it_clears_unmatched() {
    let mut sw = switch(&program("", ON_TYPE, "hdr.eth.type"));
    // 0x88b0 to 0x88bf.
    sw.set_value_set("P.pvs", vec![vec![Match::Ternary { value: 0x88b0, mask: 0xfff0 }]]).unwrap();
    let ports: Vec<u32> = [0x88b0, 0x88bf, 0x88c0, 0x08b5].iter().map(|t| port(&mut sw, &frame(*t, 1))).collect();
    assert_eq!(ports, [2, 2, 1, 1]);
    sw.set_value_set("P.pvs", vec![vec![Match::Lpm { value: 0x8800, prefix: 8 }]]).unwrap();
    assert_eq!((port(&mut sw, &frame(0x88ff, 1)), port(&mut sw, &frame(0x8900, 1))), (2, 1));
}

#[test]
fn a_struct_value_set_matches_every_field_of_one_member() {
    let mut sw = switch(&program(KEY_T, ON_TYPE_AND_SRC, "hdr.eth.type, hdr.eth.src[7:0]"));
    sw.set_value_set(
        "P.pvs",
        vec![
            vec![Match::Exact(0x88b5), Match::Exact(7)],
            vec![Match::Exact(0x88b6), Match::Ternary { value: 0x10, mask: 0xf0 }],
        ],
    )
    .unwrap();
    let cases = [(0x88b5, 7, 2), (0x88b5, 8, 1), (0x88b6, 7, 1), (0x88b6, 0x1f, 2), (0x88b6, 0x20, 1)];
    for (ethertype, low, want) in cases {
        assert_eq!(port(&mut sw, &frame(ethertype, low)), want, "{ethertype:#x} {low}");
    }
}

#[test]
fn a_value_set_is_held_to_its_size_and_fields() {
    let mut sw = switch(&program(KEY_T, ON_TYPE_AND_SRC, "hdr.eth.type, hdr.eth.src[7:0]"));
    let member = vec![Match::Exact(1), Match::Exact(2)];
    let e = sw.set_value_set("P.pvs", vec![member.clone(); 3]).unwrap_err();
    assert_eq!(e, "P.pvs holds 2 members, not 3");
    let e = sw.set_value_set("P.pvs", vec![vec![Match::Exact(1)]]).unwrap_err();
    assert_eq!(e, "P.pvs's members have 2 field(s), not 1");
    let e = sw.set_value_set("P.pvs", vec![vec![Match::Exact(1), Match::Exact(256)]]).unwrap_err();
    assert_eq!(e, "Exact(256) does not fit P.pvs's 8-bit field");
    assert!(sw.set_value_set("P.other", vec![]).is_err());
    sw.set_value_set("P.pvs", vec![member; 2]).unwrap();
}

/// A size named by a constant, the parser's own or the program's.
#[test]
fn a_value_sets_size_may_be_a_named_constant() {
    for (top, local) in [("const bit<32> N = 3;", ""), ("", "    const bit<32> N = 3;")] {
        let text = program(top, &format!("{local}\n    value_set<bit<16>>(N) pvs;"), "hdr.eth.type");
        let (p, c) = p4::front_end("vs.p4", &text).unwrap();
        assert_eq!(p4::info::info(&p, &c).unwrap().value_sets[0].size, 3, "{top}{local}");
        let mut sw = Switch::new(p, c).unwrap();
        let e = sw.set_value_set("P.pvs", vec![vec![Match::Exact(1)]; 4]).unwrap_err();
        assert_eq!(e, "P.pvs holds 3 members, not 4");
    }
}

#[test]
fn a_frame_the_value_set_sends_to_reject_is_dropped_by_the_parser() {
    let text =
        program("", ON_TYPE, "hdr.eth.type").replace("pvs: tagged; default: accept;", "pvs: reject; default: accept;");
    let mut sw = switch(&text);
    assert_eq!(port(&mut sw, &frame(0x88b5, 1)), 1);
    sw.set_value_set("P.pvs", vec![vec![Match::Exact(0x88b5)]]).unwrap();
    assert!(matches!(sw.process(&frame(0x88b5, 1), 1, 0), Err(Dropped::Parser(_))));
}

#[test]
fn the_mid_end_and_p4info_carry_a_value_sets_fields_and_size() {
    let text = program(
        "struct key_t { bit<16> type; @match(ternary) bit<8> low; }",
        "    @name(\"ethertypes\") value_set<key_t>(2) pvs;",
        "hdr.eth.type, hdr.eth.src[7:0]",
    );
    let (p, c) = p4::front_end("vs.p4", &text).unwrap();
    let ir = p4::midend::lower(&p, &c).unwrap().to_string();
    assert!(ir.contains("value_set P.pvs (type: u16 exact, low: u8 ternary) size 2\n"), "{ir}");
    assert!(ir.contains("set P.pvs"), "{ir}");
    let info = p4::info::info(&p, &c).unwrap();
    let [v] = info.value_sets.as_slice() else { panic!("{:?}", info.value_sets) };
    assert_eq!(v.preamble.id >> 24, 0x03, "P4Runtime's VALUE_SET prefix");
    assert_eq!((v.preamble.name.as_str(), v.target.as_str(), v.size), ("P.ethertypes", "P.pvs", 2));
    let keys: Vec<(u32, &str, u32, &str)> =
        v.keys.iter().map(|k| (k.id, k.name.as_str(), k.bitwidth, k.match_kind.as_str())).collect();
    assert_eq!(keys, [(1, "type", 16, "exact"), (2, "low", 8, "ternary")]);
    assert_eq!(info.value_set(v.preamble.id), Some(v));
}

/// Each misuse gets one message at its place (the program's lines: `top` is line 6, the
/// parser's locals line 8, its start state line 9).
#[test]
fn misused_value_sets_get_messages_at_their_lines() {
    let cases: Vec<(String, &str)> = vec![
        (program("value_set<bit<16>>(4) pvs;", "", "hdr.eth.type"), "vs.p4:6:1: a value_set belongs inside a parser (P4-16 12.11)"),
        (
            program("", ON_TYPE, "hdr.eth.type").replace("control I(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) {", "control I(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) {\n    value_set<bit<16>>(4) bad;"),
            "vs.p4:13:5: a value_set belongs in a parser, not a control",
        ),
        (program("", "    value_set<bool>(4) pvs;", "hdr.eth.type"), "vs.p4:8:24: a value_set holds bit<W> values or structs of them, not bool"),
        (program("struct s_t { bit<8> a; bool b; }", "    value_set<s_t>(4) pvs;", "hdr.eth.type"), "vs.p4:8:23: a value_set holds bit<W> values or structs of them, not struct s_t"),
        (program("", "    value_set<bit<16>>(0) pvs;", "hdr.eth.type"), "vs.p4:8:24: a value_set holds 1 to 256 members, not 0"),
        (program("", "    value_set<bit<16>>(300) pvs;", "hdr.eth.type"), "vs.p4:8:24: a value_set holds 1 to 256 members, not 300"),
        (program("", "    bit<32> n = 4;\n    value_set<bit<16>>(n) pvs;", "hdr.eth.type"), "vs.p4:9:24: a value_set's size is a compile-time number"),
        (program("", "    value_set<bit<8>>(4) pvs;", "hdr.eth.type"), "vs.p4:9:74: this value_set<bit<8>> holds fields of [8] bits; the select matches (bit<16>)"),
        (program(KEY_T, ON_TYPE_AND_SRC, "hdr.eth.type"), "vs.p4:9:74: this value_set<struct key_t> holds fields of [16, 8] bits; the select matches (bit<16>)"),
        (
            program("", ON_TYPE, "hdr.eth.type, hdr.eth.type").replace("pvs: tagged;", "(pvs, 1): tagged;"),
            "vs.p4:9:89: a value_set is a select case's whole keyset, not one of its fields",
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .filter_map(|(text, want)| {
            let got = p4::front_end("vs.p4", text).map(|_| ()).map_err(|e| e.to_string());
            (got.as_ref().err().map(String::as_str) != Some(*want)).then(|| format!("{got:?}\n  wanted {want}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
