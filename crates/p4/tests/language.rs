//! The software target on the language's constructs past the first subset (issue 52, item 3):
//! functions, header stacks, list initialisers, `/` and `%`. Each test a small EdgeflowSwitch
//! program, a frame in, and the frame (or the drop) P4-16 defines out.

use p4::backends::software::{Dropped, Match, Switch};

/// A program with `headers` and `meta_t` as `types` declares them, and the four blocks' bodies.
fn program(types: &str, parser: &str, ingress: &str, deparser: &str) -> Switch {
    let text = format!(
        "#include <core.p4>\n#include <edgeflow.p4>\n\
         header eth_t {{ bit<48> dst; bit<48> src; bit<16> kind; }}\n{types}\n\
         parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{\n{parser}\n}}\n\
         control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{\n{ingress}\n}}\n\
         control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{ apply {{ }} }}\n\
         control D(packet_out packet, in headers hdr) {{ apply {{ {deparser} }} }}\n\
         EdgeflowSwitch(P(), I(), E(), D()) main;\n"
    );
    let (program, checked) = p4::front_end("language.p4", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    Switch::new(program, checked).unwrap()
}

const ETH_ONLY: &str = "struct headers { eth_t eth; }\nstruct meta_t { bit<8> unused; }";
const PARSE_ETH: &str = "state start { packet.extract(hdr.eth); transition accept; }";

/// An Ethernet frame to 02:00:00:00:00:02 from 02:00:00:00:00:01 of EtherType `kind`, with
/// `rest` after the header and padding to 60 bytes.
fn frame(kind: u16, rest: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    f.extend_from_slice(&kind.to_be_bytes());
    f.extend_from_slice(rest);
    f.resize(60.max(f.len()), 0);
    f
}

fn kind_of(f: &[u8]) -> u16 {
    u16::from_be_bytes([f[12], f[13]])
}

#[test]
fn a_function_copies_in_copies_out_and_returns_its_value() {
    // swap_add returns b + a and leaves a in b (inout) and 7 in c (out); an early return skips
    // the rest, its out parameter still copied back.
    let mut sw = program(
        &format!(
            "{ETH_ONLY}\n\
             bit<16> swap_add(in bit<16> a, inout bit<16> b, out bit<8> c) {{\n\
               c = 7;\n\
               if (a == 0) {{ return 16w0xdead; }}\n\
               bit<16> old = b;\n\
               b = a;\n\
               return old + a;\n\
             }}\n\
             bit<16> twice(in bit<16> x) {{ bit<8> ignored; bit<16> y = x; return swap_add(x, y, ignored); }}"
        ),
        PARSE_ETH,
        "apply {\n\
           bit<16> b = 0x0100;\n\
           bit<8> c = 0;\n\
           hdr.eth.kind = swap_add(hdr.eth.kind, b, c);\n\
           hdr.eth.src[15:0] = b;\n\
           hdr.eth.src[23:16] = c;\n\
           hdr.eth.dst[15:0] = twice(16w21);\n\
           sm.egress_port = 2;\n\
         }",
        "packet.emit(hdr.eth);",
    );
    let out = sw.process(&frame(0x0005, &[]), 1, 0).unwrap_or_else(|e| panic!("{e:?}"));
    let f = &out[0].frame;
    assert_eq!(kind_of(f), 0x0105, "the returned value: old b (0x100) + a");
    assert_eq!(&f[6..12], &[2, 0, 0, 7, 0x00, 0x05], "c (out) is 7, b (inout) is a");
    assert_eq!(&f[4..6], &42u16.to_be_bytes(), "a function calling a function");

    let out = sw.process(&frame(0x0000, &[]), 1, 0).unwrap();
    let f = &out[0].frame;
    assert_eq!(kind_of(f), 0xdead, "the early return's value");
    assert_eq!(&f[6..12], &[2, 0, 0, 7, 0x01, 0x00], "c copied out; b untouched after the return");
}

#[test]
fn division_and_modulo_give_the_quotient_and_the_remainder() {
    let mut sw = program(
        &format!("{ETH_ONLY}\nconst bit<16> ETH_BYTES = 112 / 8;"),
        PARSE_ETH,
        "apply {\n\
           hdr.eth.kind = ((hdr.eth.kind / 10) << 8) | (hdr.eth.kind % 16w10);\n\
           hdr.eth.src[15:0] = ETH_BYTES;\n\
           sm.egress_port = (PortId_t) (ETH_BYTES % 4);\n\
         }",
        "packet.emit(hdr.eth);",
    );
    let out = sw.process(&frame(291, &[]), 1, 0).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(out[0].port, 2, "14 % 4");
    assert_eq!(kind_of(&out[0].frame), (29 << 8) | 1, "291 / 10 and 291 % 10");
    assert_eq!(&out[0].frame[10..12], &[0, 14], "112 / 8, folded");
}

const TAGS: &str = "header tag_t { bit<16> tci; bit<16> kind; }\n\
                    struct headers { eth_t eth; tag_t[2] tags; }\n\
                    struct meta_t { bit<32> last; }";

/// A parser loop over 802.1Q-like tags into a stack of two; ingress pops the outer tag of a
/// frame with two and pushes a new outer tag onto a frame with one.
fn tag_switch() -> Switch {
    program(
        TAGS,
        "state start { packet.extract(hdr.eth); transition select(hdr.eth.kind) { 0x8100: tag; default: accept; } }\n\
         state tag {\n\
           packet.extract(hdr.tags.next);\n\
           meta.last = hdr.tags.lastIndex;\n\
           transition select(hdr.tags.last.kind) { 0x8100: tag; default: accept; }\n\
         }",
        "apply {\n\
           if (hdr.tags[1].isValid()) {\n\
             hdr.tags.pop_front(1);\n\
           } else {\n\
             hdr.tags.push_front(1);\n\
             hdr.tags[0].setValid();\n\
             hdr.tags[0] = { 9, 0x8100 };\n\
           }\n\
           hdr.eth.dst[7:0] = (bit<8>) meta.last;\n\
           sm.egress_port = (PortId_t) hdr.tags[0].tci;\n\
         }",
        "packet.emit(hdr.eth); packet.emit(hdr.tags);",
    )
}

#[test]
fn a_parser_loop_fills_a_header_stack_and_push_and_pop_move_its_headers() {
    let mut sw = tag_switch();
    let payload = [0xaa; 8];

    // Two tags: the outer one popped, the inner one now first, its successor invalid.
    let mut rest = vec![0, 5, 0x81, 0x00, 0, 6, 0x08, 0x00];
    rest.extend_from_slice(&payload);
    let out = sw.process(&frame(0x8100, &rest), 1, 0).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(out[0].port, 6, "tags[0] after the pop is the inner tag");
    let f = &out[0].frame;
    assert_eq!(f[5], 1, "lastIndex after two extracts");
    assert_eq!(&f[14..18], &[0, 6, 0x08, 0x00], "one tag left");
    assert_eq!(&f[18..26], &payload, "the payload follows the headers");

    // One tag: a new outer tag pushed in front of it.
    let mut rest = vec![0, 5, 0x08, 0x00];
    rest.extend_from_slice(&payload);
    let out = sw.process(&frame(0x8100, &rest), 1, 0).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(out[0].port, 9);
    let f = &out[0].frame;
    assert_eq!(f[5], 0, "lastIndex after one extract");
    assert_eq!(&f[14..22], &[0, 9, 0x81, 0x00, 0, 5, 0x08, 0x00], "the pushed tag, then the parsed one");
    assert_eq!(&f[22..30], &payload);
}

#[test]
fn a_parser_extracting_past_a_full_stack_fails_with_stack_out_of_bounds() {
    let mut sw = tag_switch();
    let three = [0, 5, 0x81, 0x00, 0, 6, 0x81, 0x00, 0, 7, 0x08, 0x00];
    assert_eq!(sw.process(&frame(0x8100, &three), 1, 0), Err(Dropped::Parser("StackOutOfBounds".into())));
}

#[test]
fn a_list_initialises_a_struct_and_a_header_which_it_makes_valid() {
    let mut sw = program(
        &format!("{ETH_ONLY}\nstruct pair_t {{ bit<16> a; bit<16> b; }}"),
        PARSE_ETH,
        "apply {\n\
           pair_t p = { 16w1, 2 };\n\
           hdr.eth.setInvalid();\n\
           hdr.eth = { 48w0x020000000009, hdr.eth.src, p.a + p.b };\n\
           sm.egress_port = 2;\n\
         }",
        "packet.emit(hdr.eth);",
    );
    let out = sw.process(&frame(0x0800, &[]), 1, 0).unwrap_or_else(|e| panic!("{e:?}"));
    let f = &out[0].frame;
    assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 9]);
    assert_eq!(&f[6..12], &[2, 0, 0, 0, 0, 1], "a field read in the list");
    assert_eq!(kind_of(f), 3, "the struct's fields, from its list");
}

#[test]
fn a_header_union_keeps_at_most_one_header_valid() {
    // The EtherType picks the union's one-byte or two-byte header; ingress then makes the other
    // one valid, which invalidates the parsed one, so the frame leaves with the other.
    let mut sw = program(
        "header byte_t { bit<8> data; }\nheader short_t { bit<16> data; }\n\
         header_union u_t { byte_t byte; short_t short; }\n\
         struct headers { eth_t eth; u_t u; }\nstruct meta_t { bit<8> unused; }",
        "state start { packet.extract(hdr.eth); transition select(hdr.eth.kind) { 1: one; 2: two; default: accept; } }\n\
         state one { packet.extract(hdr.u.byte); transition accept; }\n\
         state two { packet.extract(hdr.u.short); transition accept; }",
        "apply {\n\
           if (hdr.u.short.isValid()) { hdr.u.byte.setValid(); hdr.u.byte.data = 0xff; }\n\
           else if (hdr.u.byte.isValid()) { hdr.u.short = { 0xbeef }; }\n\
           sm.egress_port = hdr.u.isValid() ? 32w2 : 32w3;\n\
         }",
        "packet.emit(hdr);",
    );
    let payload = [0xaa; 4];
    let out =
        sw.process(&frame(2, &[[0x12, 0x34].as_slice(), &payload].concat()), 1, 0).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(out[0].port, 2);
    assert_eq!(&out[0].frame[14..19], &[0xff, 0xaa, 0xaa, 0xaa, 0xaa], "the byte header alone, then the payload");

    let out = sw.process(&frame(1, &[[0x12].as_slice(), &payload].concat()), 1, 0).unwrap();
    assert_eq!(&out[0].frame[14..20], &[0xbe, 0xef, 0xaa, 0xaa, 0xaa, 0xaa], "the short header alone");

    let out = sw.process(&frame(3, &payload), 1, 0).unwrap();
    assert_eq!((out[0].port, &out[0].frame[14..18]), (3, &payload[..]), "no member valid: the union is not");
}

/// A header with a varbit field between two fixed ones, its size in bits the EtherType's low
/// byte (as p4c's test-parserinvalidargument-error program has it).
fn varbit_switch() -> Switch {
    program(
        "header opts_t { bit<8> kind; varbit<32> data; bit<8> tail; }\n\
         struct headers { eth_t eth; opts_t opts; }\nstruct meta_t { bit<8> unused; }",
        "state start { packet.extract(hdr.eth); packet.extract(hdr.opts, (bit<32>) hdr.eth.kind[7:0]); transition accept; }",
        "apply { hdr.opts.kind = 0x55; hdr.opts.tail = 0x77; sm.egress_port = 2; }",
        "packet.emit(hdr);",
    )
}

#[test]
fn a_varbit_field_takes_the_size_extract_gives_it_and_is_emitted_in_place() {
    let mut sw = varbit_switch();
    for bytes in [0usize, 2, 3, 4] {
        let data: Vec<u8> = (1..=bytes as u8).collect();
        let rest = [[0x11].as_slice(), &data, &[0x22, 0xaa, 0xaa]].concat();
        let out = sw.process(&frame((bytes * 8) as u16, &rest), 1, 0).unwrap_or_else(|e| panic!("{bytes}: {e:?}"));
        let want = [[0x55].as_slice(), &data, &[0x77, 0xaa, 0xaa]].concat();
        assert_eq!(
            &out[0].frame[14..14 + want.len()],
            &want[..],
            "{bytes} bytes of varbit, the fields around it rewritten"
        );
        assert_eq!(out[0].frame.len(), 60.max(14 + rest.len()), "{bytes}: nothing lost or added");
    }
}

#[test]
fn a_varbit_size_too_large_not_whole_bytes_or_past_the_frame_fails_the_parser() {
    let mut sw = varbit_switch();
    let rejected = |sw: &mut Switch, f: &[u8]| match sw.process(f, 1, 0) {
        Err(Dropped::Parser(e)) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(rejected(&mut sw, &frame(40, &[0; 8])), "HeaderTooShort", "40 bits into a varbit<32>");
    assert_eq!(rejected(&mut sw, &frame(4, &[0; 8])), "ParserInvalidArgument", "4 bits");
    let short = [&frame(32, &[])[..14], &[0x11, 1, 2]].concat();
    assert_eq!(rejected(&mut sw, &short), "PacketTooShort", "32 bits and the tail, 3 bytes left");
}

#[test]
fn a_table_action_list_binds_the_parameters_with_a_direction() {
    // bump's inout parameter is bound to meta.seen in the action list; its data comes from the
    // entry (the control plane gives only that) or from the default action, written in full.
    let mut sw = program(
        "struct headers { eth_t eth; }\nstruct meta_t { bit<16> seen; }",
        PARSE_ETH,
        "action bump(inout bit<16> x, bit<16> by) { x = x + by; }\n\
         table t { key = { hdr.eth.kind : exact; } actions = { bump(meta.seen); } default_action = bump(meta.seen, 1); }\n\
         apply { meta.seen = 0x100; t.apply(); hdr.eth.kind = meta.seen; sm.egress_port = 2; }",
        "packet.emit(hdr.eth);",
    );
    sw.insert("I.t", vec![Match::Exact(0x0800)], "bump", vec![5], 0).unwrap();
    let out = sw.process(&frame(0x0800, &[]), 1, 0).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(kind_of(&out[0].frame), 0x105, "the entry's data, added to the bound argument and copied back");
    let out = sw.process(&frame(0x86dd, &[]), 1, 0).unwrap();
    assert_eq!(kind_of(&out[0].frame), 0x101, "the default action's data");
}

#[test]
fn a_serializable_enum_s_members_are_values_of_its_type() {
    let mut sw = program(
        &format!("{ETH_ONLY}\nenum bit<16> EtherType {{ IPV4 = 0x0800, IPV6 = 0x86dd }}"),
        "state start { packet.extract(hdr.eth); transition select(hdr.eth.kind) { EtherType.IPV4: v4; default: accept; } }\n\
         state v4 { transition accept; }",
        "apply {\n\
           EtherType next = EtherType.IPV6;\n\
           if (hdr.eth.kind == EtherType.IPV4) { hdr.eth.kind = next; sm.egress_port = 2; }\n\
           else { sm.egress_port = (PortId_t) (EtherType.IPV4 >> 8) - 5; }\n\
         }",
        "packet.emit(hdr.eth);",
    );
    let out = sw.process(&frame(0x0800, &[]), 1, 0).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!((out[0].port, kind_of(&out[0].frame)), (2, 0x86dd));
    let out = sw.process(&frame(0x1234, &[]), 1, 0).unwrap();
    assert_eq!((out[0].port, kind_of(&out[0].frame)), (3, 0x1234), "0x0800 >> 8, less 5");
}

#[test]
fn a_tuple_holds_its_elements_in_order_and_indexes_them() {
    let mut sw = program(
        &format!("{ETH_ONLY}\ntypedef tuple<bit<16>, bit<8>> pair_t;"),
        PARSE_ETH,
        "apply {\n\
           pair_t t = { hdr.eth.kind, 3 };\n\
           t[1] = t[1] - 1;\n\
           hdr.eth.kind = t[0] + 1;\n\
           sm.egress_port = (PortId_t) t[1];\n\
         }",
        "packet.emit(hdr.eth);",
    );
    let out = sw.process(&frame(0x0800, &[]), 1, 0).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!((out[0].port, kind_of(&out[0].frame)), (2, 0x0801));
}

#[test]
fn compound_assignment_local_stacks_int_constants_and_list_arguments_run() {
    let mut sw = program(
        &format!(
            "{ETH_ONLY}\nheader tag_t {{ bit<16> tci; }}\nstruct pair_t {{ bit<16> a; bit<16> b; }}\n\
             const int BASE = 0x100;\n\
             bit<16> sum(in pair_t p) {{ return p.a + p.b; }}"
        ),
        PARSE_ETH,
        "apply {\n\
           hdr.eth.kind += BASE;\n\
           hdr.eth.kind <<= 1;\n\
           hdr.eth.kind -= 2;\n\
           tag_t[2] local;\n\
           local[1].setValid();\n\
           local[1].tci = sum({ 16w0x30, 4 });\n\
           hdr.eth.src[15:0] = local[1].tci;\n\
           sm.egress_port = 2;\n\
         }",
        "packet.emit(hdr.eth);",
    );
    let out = sw.process(&frame(0x0005, &[]), 1, 0).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(kind_of(&out[0].frame), ((0x0005 + 0x100) << 1) - 2);
    assert_eq!(&out[0].frame[10..12], &[0, 0x34], "a list given for a struct parameter");
}

#[test]
fn lookahead_of_a_header_reads_it_without_moving_on() {
    // The first byte after Ethernet says how long the next header is; lookahead reads it as a
    // header, and extract then reads the same bytes.
    let mut sw = program(
        "header len_t { bit<4> unused; bit<4> words; }\nheader opts_t { bit<8> first; varbit<64> rest; }\n\
         struct headers { eth_t eth; opts_t opts; }\nstruct meta_t { bit<8> unused; }",
        "state start {\n\
           packet.extract(hdr.eth);\n\
           packet.extract(hdr.opts, (bit<32>) packet.lookahead<len_t>().words * 8);\n\
           transition accept;\n\
         }",
        "apply { hdr.eth.kind = (bit<16>) hdr.opts.first; sm.egress_port = 2; }",
        "packet.emit(hdr);",
    );
    let out = sw.process(&frame(0x1234, &[0x03, 0xa1, 0xa2, 0xee]), 1, 0).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(kind_of(&out[0].frame), 0x0003, "the looked-at byte is extracted after");
    assert_eq!(&out[0].frame[14..18], &[0x03, 0xa1, 0xa2, 0xee], "the header as read, and the payload");
    // The size came from the looked-at header's low nibble: 9 words are more than varbit<64>.
    assert_eq!(sw.process(&frame(0x1234, &[0x09, 0xa1]), 1, 0), Err(Dropped::Parser("HeaderTooShort".into())));
    assert!(sw.process(&frame(0x1234, &[0xf1, 0xa1]), 1, 0).is_ok(), "the high nibble is another field");
    let short = [&frame(0x1234, &[])[..14]].concat();
    assert_eq!(sw.process(&short, 1, 0), Err(Dropped::Parser("PacketTooShort".into())));
}

/// A program whose parser, ingress and deparser each apply a sub-block of their own.
const SUB_BLOCKS: &str = r#"
#include <core.p4>
#include <edgeflow.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }
header byte_t { bit<8> data; }
struct headers { eth_t eth; byte_t b; }
struct meta_t { bit<8> unused; }
parser EthParser(packet_in pk, out eth_t e) { state start { pk.extract(e); transition accept; } }
parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
    EthParser() eth_parser;
    state start { eth_parser.apply(packet, hdr.eth); packet.extract(hdr.b); transition accept; }
}
control Rewrite(inout eth_t e, in bit<16> to, out PortId_t port) {
    apply {
        port = 3;
        if (to == 0) { exit; }
        e.kind = to;
        port = 2;
    }
}
control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
    Rewrite() rewrite;
    apply { rewrite.apply(hdr.eth, (bit<16>) hdr.b.data, sm.egress_port); hdr.b.data = 0xee; }
}
control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control EmitAll(packet_out pk, in headers h) { apply { pk.emit(h.eth); pk.emit(h.b); } }
control D(packet_out packet, in headers hdr) {
    EmitAll() emit_all;
    apply { emit_all.apply(packet, hdr); }
}
EdgeflowSwitch(P(), I(), E(), D()) main;
"#;

#[test]
fn sub_parsers_and_sub_controls_run_with_copy_in_copy_out_on_the_caller_s_frame() {
    let (p, c) = p4::front_end("sub.p4", SUB_BLOCKS).unwrap_or_else(|e| panic!("{e}"));
    let mut sw = Switch::new(p, c).unwrap();
    // The sub-parser moved the cursor past Ethernet, so the byte after it is the next header;
    // the sub-control rewrote the EtherType (inout) and chose the port (out); the
    // sub-deparser's emits are the frame.
    let out = sw.process(&frame(0x0800, &[0x42, 0xaa]), 1, 0).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(out[0].port, 2);
    assert_eq!(kind_of(&out[0].frame), 0x0042);
    assert_eq!(
        &out[0].frame[14..16],
        &[0xee, 0xaa],
        "the byte header, rewritten by the caller after, then the payload"
    );
    // exit in the sub-control: its out parameter is copied back, and the caller stops too.
    let out = sw.process(&frame(0x0800, &[0x00, 0xaa]), 1, 0).unwrap();
    assert_eq!(out[0].port, 3);
    assert_eq!((kind_of(&out[0].frame), out[0].frame[14]), (0x0800, 0x00), "nothing after the exit ran");
}

#[test]
fn entries_that_are_not_const_rank_by_priority_and_the_control_plane_may_add_more() {
    // The smallest @priority wins (p4c's table-entries-priority program); an entry without one
    // ranks by its place (here 2).
    let mut sw = program(
        ETH_ONLY,
        PARSE_ETH,
        "action fwd(PortId_t p) { sm.egress_port = p; }\n\
         table t {\n\
           key = { hdr.eth.kind : ternary; }\n\
           actions = { fwd; }\n\
           entries = {\n\
             0x1111 &&& 0xf : fwd(1) @priority(3);\n\
             0x1181 : fwd(2);\n\
             0x1181 &&& 0xf00f : fwd(3) @priority(1);\n\
           }\n\
         }\n\
         apply { t.apply(); }",
        "packet.emit(hdr.eth);",
    );
    let port = |sw: &mut Switch, kind: u16| sw.process(&frame(kind, &[]), 1, 0).map(|o| o[0].port);
    assert_eq!(port(&mut sw, 0x0001), Ok(1), "the first entry alone matches");
    assert_eq!(port(&mut sw, 0x1001), Ok(3), "the first and the third: priority 1 beats 3");
    assert_eq!(port(&mut sw, 0x1181), Ok(3), "all three: priority 1 beats 2 and 3");
    sw.insert("I.t", vec![Match::Ternary { value: 0x2222, mask: 0xffff }], "fwd", vec![4], 0).unwrap();
    assert_eq!(port(&mut sw, 0x2222), Ok(4), "entries that are not const take the control plane's too");
}

#[test]
fn a_static_assert_that_holds_is_true() {
    let mut sw = program(
        &format!(
            "{ETH_ONLY}\nconst bit<16> W = 16;\nconst bool WIDE = static_assert(W == 16 && !(W < 8), \"16 bits\");"
        ),
        PARSE_ETH,
        "apply { if (WIDE && static_assert(true)) { sm.egress_port = 2; } else { sm.egress_port = 3; } }",
        "packet.emit(hdr.eth);",
    );
    assert_eq!(sw.process(&frame(0x0800, &[]), 1, 0).unwrap()[0].port, 2);
}

#[test]
fn a_table_keys_on_a_stack_element_and_on_a_union_member_s_validity() {
    let mut sw = program(
        "header tag_t { bit<16> tci; bit<16> kind; }\nheader_union u_t { tag_t tag; }\n\
         struct headers { eth_t eth; tag_t[2] tags; u_t u; }\nstruct meta_t { bit<8> unused; }",
        "state start { packet.extract(hdr.eth); packet.extract(hdr.tags.next); transition select(hdr.tags[0].kind) { 1: more; default: accept; } }\n\
         state more { packet.extract(hdr.u.tag); transition accept; }",
        "action fwd(PortId_t p) { sm.egress_port = p; }\n\
         table t { key = { hdr.tags[0].tci : exact; hdr.u.tag.isValid() : exact; } actions = { fwd; } }\n\
         apply { t.apply(); }",
        "packet.emit(hdr);",
    );
    let info = sw.info();
    let table = info.tables.iter().find(|t| t.target == "I.t").expect("the table");
    let names: Vec<&str> = table.keys.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["hdr.tags[0].tci", "hdr.u.tag.isValid()"], "p4c's names for the keys");
    sw.insert("I.t", vec![Match::Exact(7), Match::Exact(1)], "fwd", vec![2], 0).unwrap();
    sw.insert("I.t", vec![Match::Exact(7), Match::Exact(0)], "fwd", vec![3], 0).unwrap();
    let port = |sw: &mut Switch, rest: &[u8]| sw.process(&frame(0x8100, rest), 1, 0).map(|o| o[0].port);
    assert_eq!(port(&mut sw, &[0, 7, 0, 1, 0, 9, 0, 0]), Ok(2), "tci 7, the union's tag valid");
    assert_eq!(port(&mut sw, &[0, 7, 0, 0]), Ok(3), "tci 7, no union tag");
}

#[test]
fn a_for_loop_runs_with_break_and_continue_and_a_runaway_one_is_stopped() {
    // Sums 1..=kind, skipping 3 and stopping past 6; then kind * kind by a nested loop.
    let mut sw = program(
        &format!("{ETH_ONLY}\nstruct pair_t {{ bit<16> a; bit<16> b; }}"),
        PARSE_ETH,
        "action square(inout bit<16> x) {\n\
           bit<16> n = 0;\n\
           for (bit<16> i = 0; i < x; i += 1) { for (bit<16> j = 0; j < x; j = j + 1) { n = n + 1; } }\n\
           x = n;\n\
         }\n\
         apply {\n\
           bit<16> sum = 0;\n\
           for (bit<16> i = 1; i <= hdr.eth.kind; i = i + 1) {\n\
             if (i == 3) { continue; }\n\
             if (i > 6) { break; }\n\
             sum = sum + i;\n\
           }\n\
           hdr.eth.src[15:0] = hdr.eth.kind;\n\
           square(hdr.eth.src[15:0]);\n\
           hdr.eth.kind = sum;\n\
           if (hdr.eth.dst[7:0] == 0xff) { for (;;) { } }\n\
           sm.egress_port = 2;\n\
         }",
        "packet.emit(hdr.eth);",
    );
    let out = sw.process(&frame(10, &[]), 1, 0).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(kind_of(&out[0].frame), 1 + 2 + 4 + 5 + 6);
    assert_eq!(&out[0].frame[10..12], &100u16.to_be_bytes(), "10 * 10 by the nested loops");
    let out = sw.process(&frame(4, &[]), 1, 0).unwrap();
    assert_eq!(kind_of(&out[0].frame), 1 + 2 + 4);
    let mut runaway = frame(4, &[]);
    runaway[5] = 0xff;
    assert_eq!(
        sw.process(&runaway, 1, 0),
        Err(Dropped::Unsupported(format!(
            "a for loop past {} iterations",
            p4::backends::software::LOOP_ITERATIONS_MAX
        )))
    );
}

#[test]
fn a_table_that_lists_no_actions_misses_into_no_action() {
    let mut sw = program(
        ETH_ONLY,
        PARSE_ETH,
        "table t { key = { } actions = { } }\n\
         apply { sm.egress_port = 3; switch (t.apply().action_run) { default: { sm.egress_port = 2; } } }",
        "packet.emit(hdr.eth);",
    );
    assert_eq!(sw.process(&frame(0x0800, &[]), 1, 0).unwrap()[0].port, 2);
}

/// The kernel back end does not compile these constructs yet: it refuses each program by
/// name, and the program then runs in userspace, on the software target above. (Generic
/// functions and `/` it compiles since it prints the mid end's IR.)
#[test]
fn the_kernel_back_end_refuses_each_construct_by_name() {
    let with = |types: &str, parser: &str, ingress: &str, deparser: &str| {
        let text = format!(
            "#include <core.p4>\n#include <edgeflow.p4>\n\
             header eth_t {{ bit<48> dst; bit<48> src; bit<16> kind; }}\n{types}\n\
             parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{\n{parser}\n}}\n\
             control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{\n{ingress}\n}}\n\
             control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{ apply {{ }} }}\n\
             control D(packet_out packet, in headers hdr) {{ apply {{ {deparser} }} }}\n\
             EdgeflowSwitch(P(), I(), E(), D()) main;\n"
        );
        let (p, c) = p4::front_end("k.p4", &text).unwrap_or_else(|e| panic!("{e}"));
        p4::backends::ebpf::generate(&p, &c).map(drop).err().unwrap_or_else(|| "compiled".to_string())
    };
    let eth = "packet.emit(hdr.eth);";
    let cases = [
        (
            with(
                &format!("{ETH_ONLY}\nT f<T>(in T x) {{ return x; }}"),
                PARSE_ETH,
                "apply { hdr.eth.kind = f(hdr.eth.kind); }",
                eth,
            ),
            // The mid end makes an instance of a generic function per use, which the kernel prints.
            "compiled",
        ),
        // By zero, 0, as the software target has it.
        (with(ETH_ONLY, PARSE_ETH, "apply { hdr.eth.kind = hdr.eth.kind / 3; }", eth), "compiled"),
        (
            with(
                ETH_ONLY,
                PARSE_ETH,
                "apply { for (bit<8> i = 0; i < 2; i = i + 1) { hdr.eth.kind = hdr.eth.kind + 1; } }",
                eth,
            ),
            "a for loop does not fit the kernel back end (docs/p4.md); the program runs in userspace",
        ),
        (
            with(ETH_ONLY, PARSE_ETH, "apply { tuple<bit<8>, bit<8>> t; hdr.eth.kind = (bit<16>) t[0]; }", eth),
            "the tuple tuple<bit<8>, bit<8>> does not fit the kernel back end (docs/p4.md); the program runs in userspace",
        ),
        (
            with(
                "header o_t { varbit<16> v; bit<8> after; }\nstruct headers { eth_t eth; o_t o; }\nstruct meta_t { bit<8> unused; }",
                PARSE_ETH,
                "apply { }",
                eth,
            ),
            "the varbit<16> field o_t.v before the header's end does not fit the kernel back end (docs/p4.md); the program runs in userspace",
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .filter(|(got, want)| got != want)
        .map(|(got, want)| format!("got {got:?}\nwant {want:?}"))
        .collect();
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}
