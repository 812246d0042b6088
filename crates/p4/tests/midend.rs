//! The mid end's lowered program (`p4::midend`), read through its dump: what both back ends will
//! run, so each detail the two used to read differently (issue 52) is pinned here once.

fn program(top: &str, ingress: &str) -> String {
    format!(
        "#include <edgeflow.p4>
{top}
header eth_t {{ bit<48> dst; bit<48> src; bit<16> type; }}
struct h_t {{ eth_t eth; }}
struct m_t {{ bit<12> vid; }}
parser P(packet_in pk, out h_t hdr, inout m_t meta, inout standard_metadata_t sm) {{
    state start {{ pk.extract(hdr.eth); transition accept; }}
}}
control I(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) {{
{ingress}
    apply {{ }}
}}
control E(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control D(packet_out pk, in h_t hdr) {{ apply {{ pk.emit(hdr.eth); }} }}
EdgeflowSwitch(P(), I(), E(), D()) main;
"
    )
}

fn dump(text: &str) -> String {
    let (p, c) = p4::front_end("midend.p4", text).unwrap_or_else(|e| panic!("{e}"));
    p4::midend::lower(&p, &c).unwrap_or_else(|e| panic!("{e}")).to_string()
}

#[test]
fn every_example_program_lowers() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/p4");
    for name in ["afdx_switch.p4", "ipv4_router.p4", "l2_switch.p4"] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let out = dump(&text);
        assert!(out.starts_with("package EdgeflowSwitch("), "{name}:\n{out}");
    }
}

/// The kernel gave `counter(N, ...)` one cell when N was a named constant.
#[test]
fn an_extern_sized_by_a_named_constant_gets_its_real_size() {
    let out = dump(&program(
        "const bit<32> N = 64;",
        "    counter(N, CounterType.packets) per_port;\n    register<bit<8>>(N * 2) last;",
    ));
    assert!(out.contains("const N: u32 = 64\n"), "{out}");
    assert!(out.contains("instance I.per_port = counter(64:u32, enum#"), "{out}");
    assert!(out.contains("instance I.last = register(128:u32)"), "{out}");
}

/// The AFDX example sizes its externs by a `#define`d name; they must keep 4096 cells.
#[test]
fn the_afdx_example_keeps_its_defined_sizes() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/p4/afdx_switch.p4");
    let out = dump(&std::fs::read_to_string(path).unwrap());
    assert!(out.contains("= counter(4096"), "{out}");
}

/// Enums are numbered in declaration order, so a `select` on one compares numbers, not the
/// first case.
#[test]
fn enums_are_numbered_in_declaration_order() {
    let out = dump(&program("enum colour_t { Red, Green, Blue }\nconst colour_t C = colour_t.Blue;", ""));
    assert!(out.contains("colour_t { Red=0, Green=1, Blue=2 }"), "{out}");
    assert!(out.contains("const C: enum#"), "{out}");
    assert!(out.contains(" = 2\n"), "{out}");
}

/// `int<W>` constants fold as two's complement: `>>` is arithmetic, a widening cast
/// sign-extends, a negative literal is cut to its type's width.
#[test]
fn signed_constants_fold_with_their_signedness() {
    let out = dump(&program(
        "const int<8> M = -8;\nconst int<8> H = M >> 1;\nconst int<16> W = (int<16>)M;\nconst bit<16> B = -1;",
        "",
    ));
    assert!(out.contains("const M: s8 = 248\n"), "{out}");
    assert!(out.contains("const H: s8 = 252\n"), "{out}");
    assert!(out.contains("const W: s16 = 65528\n"), "{out}");
    assert!(out.contains("const B: u16 = 65535\n"), "{out}");
}
