//! The front end against whole programs: the examples edgeflow ships parse, and bad programs get
//! the exact message, at the exact place, that a user reads.

use p4::frontend::ast::{Decl, Local, Stmt, Transition};

fn example(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/p4").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_example_programs_parse() {
    for name in ["afdx_switch.p4", "l2_switch.p4", "ipv4_router.p4", "v1model_router.p4"] {
        let program = p4::parse(name, &example(name)).unwrap_or_else(|e| panic!("{e}"));
        let main = program.decls.iter().any(|d| matches!(d, Decl::Instance(i) if i.name.text == "main"));
        assert!(main, "{name}: the package instance");
    }
    let afdx = p4::parse("afdx_switch.p4", &example("afdx_switch.p4")).unwrap();
    let ingress = afdx
        .decls
        .iter()
        .find_map(|d| match d {
            Decl::Control { name, locals, apply, .. } if name.text == "AfdxIngress" => Some((locals, apply)),
            _ => None,
        })
        .unwrap();
    let table = ingress
        .0
        .iter()
        .find_map(|l| match l {
            Local::Table(t) => Some(t),
            _ => None,
        })
        .unwrap();
    assert_eq!(table.name.text, "tbl_forward_virtual_link");
    assert_eq!(table.keys.iter().map(|k| k.match_kind.text.as_str()).collect::<Vec<_>>(), ["exact", "exact"]);
    assert!(
        matches!(&table.size, Some(e) if matches!(e.kind, p4::frontend::ast::ExprKind::Int { value: 4096, .. })),
        "#define substituted"
    );
    assert!(ingress.1.iter().any(|s| matches!(s, Stmt::Switch { .. })));
    // The architecture's declarations come first, from the built-in include.
    assert!(afdx.decls.iter().any(|d| matches!(d, Decl::BlockType { name, .. } if name.text == "EdgeflowSwitch")));
    let parser_states = afdx
        .decls
        .iter()
        .find_map(|d| match d {
            Decl::Parser { states, .. } => Some(states),
            _ => None,
        })
        .unwrap();
    assert!(matches!(&parser_states[0].transition, Transition::Select { cases, .. } if cases.len() == 2));
}

/// Each bad program, and the one message it gets: where, and what was expected or is left out.
#[test]
fn bad_programs_get_exact_messages() {
    let cases: &[(&str, &str)] = &[
        ("header h { bit<8> a }", "p.p4:1:21: expected ';', found '}'"),
        ("header h { bit<0> a; }", "p.p4:1:16: a width between 1 and 128 bits"),
        ("typedef tuple<bit<8>, > t;", "p.p4:1:23: expected a type, found '>'"),
        ("header h { bit<8> a; varbit<0> o; }", "p.p4:1:29: a varbit's width is 1 to 4096 bits"),
        ("header_union u { h a }", "p.p4:1:22: expected ';', found '}'"),
        ("struct s { h[4 stack; }", "p.p4:1:16: expected ']', found 'stack'"),
        ("enum bit<8> e { a }", "p.p4:1:19: expected '=', found '}'"),
        ("const bit<8> x = 10 / ;", "p.p4:1:23: expected an expression, found ';'"),
        ("control c() { apply { x = 1 } }", "p.p4:1:29: expected ';', found '}'"),
        ("control c() { action a() {} }", "p.p4:1:29: expected 'apply' (a control needs an apply block), found '}'"),
        ("control c() { apply { table t {} } }", "p.p4:1:23: tables and actions are declared before the apply block"),
        ("control c() { apply { x; } }", "p.p4:1:24: expected '=' or a call (an expression alone does nothing), found ';'"),
        ("control c() { apply { f(x = 1); } }", "p.p4:1:25: named arguments are outside the subset edgeflow compiles (docs/p4.md)"),
        ("control c() { table t { entries = { 1 : a() @priority(1) } } apply {} }", "p.p4:1:58: expected ';', found '}'"),
        ("control c() { table t { key = { x : exact } } apply {} }", "p.p4:1:43: expected ';', found '}'"),
        ("parser p() { state s { } }", "p.p4:1:24: expected 'transition' (every state but accept and reject ends in one), found '}'"),
        ("parser p() { state s { transition select(x) { 1: ; } } }", "p.p4:1:50: expected the next state, found ';'"),
        ("parser p() { action a() {} }", "p.p4:1:14: an action belongs in a control, not a parser"),
        ("parser p<H>(out H h) { }", "p.p4:1:8: generic parsers and controls are outside the subset edgeflow compiles (docs/p4.md)"),
        ("package p(); table t {}", "p.p4:1:14: a table belongs inside a control"),
        ("action a(bit<8> x = 1) {}", "p.p4:1:19: default parameter values are outside the subset edgeflow compiles (docs/p4.md)"),
        ("action a() { return 1 }", "p.p4:1:23: expected ';', found '}'"),
        ("action a() { bit<8> struct = 1; }", "p.p4:1:21: expected a name for the variable, found 'struct'"),
        ("const bit<8> x = 1", "p.p4:1:18: expected ';', found the end of the program"),
        ("bit<8> twice(in bit<8> x);", "p.p4:1:26: expected '{' (a function has a body; an extern function is declared with 'extern'), found ';'"),
        ("#include <tna.p4>", "p.p4:1:1: #include <tna.p4>: only <core.p4>, <edgeflow.p4>, <v1model.p4> and <psa.p4> can be included (the architectures edgeflow declares), and \"file.p4\" beside a program read from a file"),
        ("#define F(x, y) x\nconst bit<8> c = F(1);", "p.p4:2:18: this macro takes 2 argument(s), not 1"),
        ("#define F(x) x\nconst bit<8> c = F(1;", "p.p4:2:18: a macro's arguments are not closed"),
        ("\n\n  /* never closed", "p.p4:3:3: a comment that never ends ('/*' without '*/')"),
        ("const bit<8> x = 8w$;", "p.p4:1:18: '8w' is not a number P4 can read"),
    ];
    let mut wrong = Vec::new();
    for (program, want) in cases {
        match p4::parse("p.p4", program) {
            Ok(_) => wrong.push(format!("{program:?}: accepted; want {want:?}")),
            Err(got) if got != *want => wrong.push(format!("{program:?}:\n   got {got:?}\n  want {want:?}")),
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

#[test]
fn operators_bind_as_p4_says() {
    use p4::frontend::ast::{BinOp, ExprKind};
    let program = p4::parse("p.p4", "const bit<8> x = a | b & c << 1 + 2 * d >> e;").unwrap();
    let Decl::Const { value, .. } = &program.decls[0] else { panic!() };
    // a | (b & ((c << (1 + (2 * d))) >> e))
    let ExprKind::Binary(BinOp::BitOr, _, rhs) = &value.kind else { panic!("{value:?}") };
    let ExprKind::Binary(BinOp::BitAnd, _, rhs) = &rhs.kind else { panic!("{rhs:?}") };
    let ExprKind::Binary(BinOp::Shr, lhs, _) = &rhs.kind else { panic!("{rhs:?}") };
    let ExprKind::Binary(BinOp::Shl, _, sum) = &lhs.kind else { panic!("{lhs:?}") };
    assert!(
        matches!(&sum.kind, ExprKind::Binary(BinOp::Add, _, m) if matches!(m.kind, ExprKind::Binary(BinOp::Mul, _, _)))
    );
    // `/` and `%` bind as `*` does, left to right: (a - ((b / c) % d)).
    let program = p4::parse("p.p4", "const bit<8> x = a - b / c % d;").unwrap();
    let Decl::Const { value, .. } = &program.decls[0] else { panic!() };
    let ExprKind::Binary(BinOp::Sub, _, rhs) = &value.kind else { panic!("{value:?}") };
    let ExprKind::Binary(BinOp::Mod, quotient, _) = &rhs.kind else { panic!("{rhs:?}") };
    assert!(matches!(quotient.kind, ExprKind::Binary(BinOp::Div, _, _)), "{quotient:?}");
    // Casts, slices, calls with type arguments and comparisons are told apart.
    let program = p4::parse(
        "p.p4",
        "action a() { x = (bit<16>) y[15:8]; z = p.lookahead<bit<16>>(); w = (t) v; b = m < n; c = m >> 2 >= k; }",
    )
    .unwrap();
    let Decl::Action(a) = &program.decls[0] else { panic!() };
    let values: Vec<&ExprKind> = a
        .body
        .iter()
        .map(|s| match s {
            Stmt::Assign { value, .. } => &value.kind,
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(
        matches!(values[0], ExprKind::Cast(p4::frontend::ast::Type::Bit(16), e) if matches!(e.kind, ExprKind::Slice(..)))
    );
    assert!(matches!(values[1], ExprKind::Call { type_args, .. } if type_args == &[p4::frontend::ast::Type::Bit(16)]));
    assert!(matches!(values[2], ExprKind::Cast(p4::frontend::ast::Type::Named(..), _)));
    assert!(matches!(values[3], ExprKind::Binary(BinOp::Lt, _, _)));
    assert!(
        matches!(values[4], ExprKind::Binary(BinOp::Ge, l, _) if matches!(l.kind, ExprKind::Binary(BinOp::Shr, _, _)))
    );
}

/// A v1model program as BMv2's examples write it: its six blocks, a sub-parser instantiated in
/// the parser and a sub-control in ingress, each applied with its own parameters.
const V1MODEL_PROGRAM: &str = r#"
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers { ethernet_t ethernet; }
struct metadata { bit<8> seen; }
control Mark(inout metadata meta) { apply { meta.seen = 1; } }
parser EthernetParser(packet_in pkt, out headers hdr) {
    state start { pkt.extract(hdr.ethernet); transition accept; }
}
parser MyParser(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    EthernetParser() ethernet_parser;
    state start { ethernet_parser.apply(pkt, hdr); transition accept; }
}
control MyVerify(inout headers hdr, inout metadata meta) { apply { } }
control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    Mark() mark;
    apply { mark.apply(meta); sm.egress_spec = 2; if (hdr.ethernet.ether_type == 0) { mark_to_drop(sm); } }
}
control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control MyCompute(inout headers hdr, inout metadata meta) {
    apply { update_checksum(true, { hdr.ethernet.dst, hdr.ethernet.src }, hdr.ethernet.ether_type, HashAlgorithm.csum16); }
}
control MyDeparser(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.ethernet); } }
V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
"#;

#[test]
fn a_v1model_program_with_a_sub_parser_and_a_sub_control_checks() {
    let (_, checked) = p4::front_end("v.p4", V1MODEL_PROGRAM).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(checked.package, "V1Switch");
    assert_eq!(checked.blocks, ["MyParser", "MyVerify", "MyIngress", "MyEgress", "MyCompute", "MyDeparser"]);
    let short = V1MODEL_PROGRAM.replace("ethernet_parser.apply(pkt, hdr);", "ethernet_parser.apply(pkt);");
    let e = p4::front_end("v.p4", &short).unwrap_err();
    assert_eq!(e, "v.p4:13:35: 'EthernetParser' takes 2 argument(s), not 1");
    let control_in_parser =
        V1MODEL_PROGRAM.replace("EthernetParser() ethernet_parser;", "Mark() m; EthernetParser() ethernet_parser;");
    let e = p4::front_end("v.p4", &control_in_parser).unwrap_err();
    assert_eq!(e, "v.p4:12:5: 'Mark' is not a parser: a parser instantiates parsers");
    let unsized_element = V1MODEL_PROGRAM.replace("hdr.ethernet.src }", "5 }");
    let e = p4::front_end("v.p4", &unsized_element).unwrap_err();
    assert_eq!(e, "v.p4:22:55: 'update_checksum': give this element of data a width (8w1, or a cast)");
    let emit_list = V1MODEL_PROGRAM.replace("pkt.emit(hdr.ethernet);", "pkt.emit({ hdr.ethernet.dst });");
    let e = p4::front_end("v.p4", &emit_list).unwrap_err();
    assert!(e.ends_with("emit writes a header (or a struct of headers)"), "{e}");
}

#[test]
fn a_psa_program_gives_main_its_pipelines_named_or_in_place() {
    let program = r#"
#include <core.p4>
#include "bmv2/psa.p4"
struct empty_t { };
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers { ethernet_t ethernet; }
parser IP(packet_in b, out headers h, inout empty_t m, in psa_ingress_parser_input_metadata_t i, in empty_t r, in empty_t c) {
    state start { b.extract(h.ethernet); transition accept; }
}
control IG(inout headers h, inout empty_t m, in psa_ingress_input_metadata_t i, inout psa_ingress_output_metadata_t o) {
    apply { send_to_port(o, (PortId_t) (PortIdUint_t) 3); }
}
control ID(packet_out b, out empty_t c, out empty_t r, out empty_t n, inout headers h, in empty_t m, in psa_ingress_output_metadata_t o) {
    apply { b.emit(h.ethernet); }
}
parser EP(packet_in b, out headers h, inout empty_t m, in psa_egress_parser_input_metadata_t i, in empty_t n, in empty_t c1, in empty_t c2) {
    state start { transition accept; }
}
control EG(inout headers h, inout empty_t m, in psa_egress_input_metadata_t i, inout psa_egress_output_metadata_t o) { apply { } }
control ED(packet_out b, out empty_t c, out empty_t r, inout headers h, in empty_t m, in psa_egress_output_metadata_t o, in psa_egress_deparser_input_metadata_t d) {
    apply { }
}
IngressPipeline(IP(), IG(), ID()) ip;
PSA_Switch(ip, PacketReplicationEngine(), EgressPipeline(EP(), EG(), ED()), BufferingQueueingEngine()) main;
"#;
    let (_, checked) = p4::front_end("p.p4", program).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(checked.package, "PSA_Switch");
    assert_eq!(checked.blocks, ["IP", "IG", "ID", "EP", "EG", "ED"]);
    let swapped = program.replace("IngressPipeline(IP(), IG(), ID())", "IngressPipeline(IP(), EG(), ID())");
    let e = p4::front_end("p.p4", &swapped).unwrap_err();
    assert!(e.contains("'EG' parameter 3 is 'in struct psa_egress_input_metadata_t'; Ingress expects"), "{e}");
    let no_engine = program.replace("PacketReplicationEngine()", "BufferingQueueingEngine()");
    let e = p4::front_end("p.p4", &no_engine).unwrap_err();
    assert_eq!(e, "p.p4:24:16: PSA_Switch's 'pre' is PacketReplicationEngine(): the architecture's own");
}

#[test]
fn a_program_read_from_a_file_includes_its_neighbours_relative_to_each_includer() {
    let dir = std::env::temp_dir().join(format!("ef-p4-includes-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    write("sub/types.p4", "#include \"more.p4\"\nheader h_t { bit<8> f; }\n");
    write("sub/more.p4", "const bit<8> SEEN = 1;\n");
    let program =
        "#include <core.p4>\n#include \"sub/types.p4\"\n#include \"sub/types.p4\"\nconst bit<8> AGAIN = SEEN;\n";
    write("main.p4", program);
    let parsed = p4::front_end_at(&dir.join("main.p4"), program);
    // no main: the includes were read (SEEN is known, h_t declared once), the checker got to the end
    assert_eq!(parsed.unwrap_err(), format!("{}:1:1: the program has no 'main' (EdgeflowSwitch(MyParser(), MyIngress(), MyEgress(), MyDeparser()) main;)", dir.join("main.p4").display()));
    write("sub/more.p4", "const bit<8> SEEN = 1;\nconst bit<4> WIDE = 300;\n");
    let e = p4::front_end_at(&dir.join("main.p4"), program).unwrap_err();
    assert_eq!(e, format!("{}:2:21: 300 does not fit in bit<4>", dir.join("sub/more.p4").display()));
    let e = p4::front_end("main.p4", program).unwrap_err();
    assert!(e.starts_with("main.p4:2:1: #include \"sub/types.p4\": only <core.p4>"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A sub-control runs on the software target, its parameters copied in and out, and the kernel
/// back end compiles it (inlined where applied; `datapath/tests/p4_kernel.rs` runs both).
#[test]
fn a_sub_control_runs_on_the_software_target_and_compiles_for_the_kernel() {
    let program = r#"
#include <core.p4>
#include <edgeflow.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers { ethernet_t ethernet; }
struct metadata { bit<8> seen; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.ethernet); transition accept; }
}
control Mark(inout ethernet_t eth, out bit<8> seen) { apply { eth.ether_type = 0x88b5; seen = 1; } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    Mark() mark;
    apply { mark.apply(hdr.ethernet, meta.seen); if (meta.seen == 1) { sm.egress_port = 2; } }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.ethernet); } }
EdgeflowSwitch(P(), I(), E(), D()) main;
"#;
    let (parsed, checked) = p4::front_end("s.p4", program).unwrap_or_else(|e| panic!("{e}"));
    if let Err(e) = p4::backends::ebpf::generate(&parsed, &checked) {
        panic!("the kernel back end refused a sub-control: {e}");
    }
    let mut sw = p4::backends::software::Switch::new(parsed, checked).unwrap_or_else(|e| panic!("{e}"));
    let mut frame = vec![0u8; 14];
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    let out = sw.process(&frame, 1, 0).expect("forwarded");
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 2, "the sub-control's out parameter was copied back");
    assert_eq!(out[0].frame[12..14], [0x88, 0xb5], "the sub-control's inout header was copied back");
}

/// Functions, header stacks and `return` with a value parse into what the checker and the
/// software target read (issue 52, item 3).
#[test]
fn functions_and_header_stacks_parse() {
    use p4::frontend::ast::{Direction, ExprKind, Type};
    let program = p4::parse(
        "p.p4",
        "header tag_t { bit<16> vid; }\n\
         struct headers { tag_t[N] tags; }\n\
         bit<16> first(in headers h, out bit<32> n) { n = h.tags.size; return h.tags[0].vid; }",
    )
    .unwrap();
    let Decl::Struct { fields, .. } = &program.decls[1] else { panic!("{:?}", program.decls[1]) };
    assert!(
        matches!(&fields[0].ty, Type::Stack(elem, size)
            if matches!(&**elem, Type::Named(n, _) if n.text == "tag_t") && matches!(&size.kind, ExprKind::Name(n) if n == "N")),
        "{:?}",
        fields[0].ty
    );
    let Decl::Function(f) = &program.decls[2] else { panic!("{:?}", program.decls[2]) };
    assert_eq!((f.name.text.as_str(), &f.ret), ("first", &Type::Bit(16)));
    assert_eq!(f.params.iter().map(|p| p.direction).collect::<Vec<_>>(), [Some(Direction::In), Some(Direction::Out)]);
    assert!(
        matches!(&f.body[1], Stmt::ReturnValue(e, _) if matches!(&e.kind, ExprKind::Member(i, m) if m.text == "vid" && matches!(i.kind, ExprKind::Index(..)))),
        "{:?}",
        f.body[1]
    );
}

/// `a op= b` is `a = a op b`; `<=` stays a comparison.
#[test]
fn compound_assignment_assigns_the_operation() {
    use p4::frontend::ast::{BinOp, ExprKind};
    let program = p4::parse("p.p4", "action a() { x += 1; x >>= 2; x |+|= y; z = x <= y; }").unwrap();
    let Decl::Action(a) = &program.decls[0] else { panic!() };
    let ops: Vec<BinOp> = a
        .body
        .iter()
        .map(|s| match s {
            Stmt::Assign { target, value } => match &value.kind {
                ExprKind::Binary(op, lhs, _) if *op == BinOp::Le || **lhs == *target => *op,
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ops, [BinOp::Add, BinOp::Shr, BinOp::AddSat, BinOp::Le]);
}

/// A function-like macro expands where it is called, its arguments split at the commas
/// outside parentheses, as p4c's preprocessor does.
#[test]
fn function_like_macros_expand_with_their_arguments() {
    use p4::frontend::ast::{BinOp, ExprKind};
    let program = p4::parse("p.p4", "#define ADD(a, b) ((a) + (b))\nconst bit<8> x = ADD(c, d(e, f));").unwrap();
    let Decl::Const { value, .. } = &program.decls[0] else { panic!() };
    let ExprKind::Binary(BinOp::Add, l, r) = &value.kind else { panic!("{value:?}") };
    assert!(matches!(&l.kind, ExprKind::Name(n) if n == "c"), "{l:?}");
    assert!(matches!(&r.kind, ExprKind::Call { args, .. } if args.len() == 2), "{r:?}");
}
