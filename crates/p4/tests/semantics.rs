//! The software target on the details where it and the kernel back end disagreed (issue 52):
//! each test a program that leans on one of them, run on a frame, with the result P4 defines.
//! The kernel's halves are in `datapath/tests/p4_kernel.rs`.

use p4::backends::software::Switch;

/// `ingress` (a control body's locals and apply) around an Ethernet parser whose `start` state
/// is `parser_body`, with `extra` declarations at the top.
fn program(extra: &str, parser_body: &str, ingress: &str) -> Switch {
    let text = format!(
        "#include <core.p4>\n#include <edgeflow.p4>\n\
         header eth_t {{ bit<48> dst; bit<48> src; bit<16> kind; }}\n\
         struct headers {{ eth_t eth; }}\nstruct meta_t {{ bit<32> path; int<16> signed_value; }}\n{extra}\n\
         parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{\n{parser_body}\n}}\n\
         control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{\n{ingress}\n}}\n\
         control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{ apply {{ }} }}\n\
         control D(packet_out packet, in headers hdr) {{ apply {{ packet.emit(hdr.eth); }} }}\n\
         EdgeflowSwitch(P(), I(), E(), D()) main;\n"
    );
    let (program, checked) = p4::front_end("semantics.p4", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    Switch::new(program, checked).unwrap()
}

const PLAIN_PARSER: &str = "state start { packet.extract(hdr.eth); transition accept; }";

fn frame(kind: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    f.extend_from_slice(&kind.to_be_bytes());
    f.resize(60, 0);
    f
}

/// The frame's EtherType as the program left it.
fn kind_out(sw: &mut Switch, kind: u16) -> u16 {
    let out = sw.process(&frame(kind), 1, 0).unwrap_or_else(|e| panic!("{e:?}"));
    u16::from_be_bytes([out[0].frame[12], out[0].frame[13]])
}

#[test]
fn select_on_an_enum_takes_the_case_of_its_member() {
    let mut sw = program(
        "enum Path { Left, Right }",
        "Path p = Path.Left;\n\
         state start { packet.extract(hdr.eth); p = hdr.eth.kind == 0x0800 ? Path.Right : Path.Left; transition pick; }\n\
         state pick { transition select(p) { Path.Left: left; Path.Right: right; } }\n\
         state left { meta.path = 2; transition accept; }\n\
         state right { meta.path = 3; transition accept; }",
        "apply { sm.egress_port = meta.path; }",
    );
    assert_eq!(sw.process(&frame(0x0800), 1, 0).unwrap()[0].port, 3, "Path.Right");
    assert_eq!(sw.process(&frame(0x86dd), 1, 0).unwrap()[0].port, 2, "Path.Left");
}

#[test]
fn a_slice_with_named_constant_bounds_writes_those_bits() {
    let mut sw = program(
        "const bit<32> HI = 11;\nconst bit<32> LO = 8;",
        PLAIN_PARSER,
        "apply { hdr.eth.kind[HI:LO] = 4w0xa; sm.egress_port = 2; }",
    );
    assert_eq!(kind_out(&mut sw, 0x0000), 0x0a00);
    assert_eq!(kind_out(&mut sw, 0xffff), 0xfaff);
}

#[test]
fn a_register_read_past_its_size_gives_zero_and_the_field_stays() {
    let mut sw = program(
        "",
        PLAIN_PARSER,
        "register<bit<16>>(4) r;\n\
         apply { r.write(2, 16w0x1234); r.read(hdr.eth.kind, (bit<32>) hdr.eth.kind); sm.egress_port = 2; }",
    );
    assert_eq!(kind_out(&mut sw, 2), 0x1234, "in range");
    assert_eq!(kind_out(&mut sw, 9), 0, "past the size: 0, as the kernel reads it");
    let out = sw.process(&frame(9), 1, 0).unwrap();
    assert_eq!(out[0].frame.len(), 60, "the field stays in the frame");
}

#[test]
fn signed_integers_shift_saturate_and_widen_as_signed() {
    // -16 >> 2 is -4 (arithmetic); -32768 |-| 1 stays -32768; 32767 |+| 1 stays 32767; an
    // int<8> -1 widened to int<16> is -1 (0xffff).
    let cases = [
        ("meta.signed_value = ((int<16>) hdr.eth.kind) >> 2;", 0xfff0u16, 0xfffcu16),
        ("meta.signed_value = ((int<16>) hdr.eth.kind) |-| 1;", 0x8000, 0x8000),
        ("meta.signed_value = ((int<16>) hdr.eth.kind) |+| 1;", 0x7fff, 0x7fff),
        ("meta.signed_value = (int<16>) ((int<8>) hdr.eth.kind[7:0]);", 0x00ff, 0xffff),
    ];
    for (statement, kind, want) in cases {
        let mut sw = program(
            "",
            PLAIN_PARSER,
            &format!("apply {{ {statement} hdr.eth.kind = (bit<16>) meta.signed_value; sm.egress_port = 2; }}"),
        );
        assert_eq!(kind_out(&mut sw, kind), want, "{statement} on {kind:#06x}");
    }
}

#[test]
fn an_untyped_number_in_a_conditional_takes_the_other_arms_width() {
    // `c ? 2 : 3w1` is bit<3>: negated, 2 is 6 (three bits), not 0xfffe.
    let mut sw = program(
        "",
        PLAIN_PARSER,
        "apply { hdr.eth.kind = (bit<16>) -((hdr.eth.kind == 1) ? 2 : 3w1); sm.egress_port = 2; }",
    );
    assert_eq!(kind_out(&mut sw, 1), 6);
    assert_eq!(kind_out(&mut sw, 5), 7);
}

#[test]
fn a_slice_of_a_slice_writes_the_bits_it_names() {
    // hdr.eth.kind[11:4][3:0] is kind[7:4].
    let mut sw = program("", PLAIN_PARSER, "apply { hdr.eth.kind[11:4][3:0] = 4w0; sm.egress_port = 2; }");
    assert_eq!(kind_out(&mut sw, 0xffff), 0xff0f);
}

#[test]
fn an_exit_in_an_action_still_copies_out_its_inout_parameters() {
    let mut sw = program(
        "",
        PLAIN_PARSER,
        "action set(inout bit<16> kind) { kind = 3; exit; }\n\
         apply { sm.egress_port = 2; set(hdr.eth.kind); hdr.eth.kind = 9; }",
    );
    assert_eq!(kind_out(&mut sw, 0x0800), 3, "copied out, and nothing after the exit ran");
}
