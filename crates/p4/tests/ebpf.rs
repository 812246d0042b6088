//! The kernel back end's generator (`p4::backends::ebpf`): what fits becomes C with the maps a control plane
//! fills, and what does not is refused by name (the program then runs in userspace). The C itself
//! is compiled, loaded and run against the software target in `datapath/tests/p4_kernel.rs`.

use p4::backends::ebpf::{generate, table_key, table_value, TableKind};
use p4::backends::software::Match;

fn example(name: &str) -> Result<p4::backends::ebpf::Generated, String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/p4").join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let (p, c) = p4::front_end(name, &text).unwrap_or_else(|e| panic!("{e}"));
    generate(&p, &c)
}

#[test]
fn the_examples_fit_with_their_tables_kinds() {
    let router = example("ipv4_router.p4").unwrap();
    let kinds: Vec<(&str, TableKind)> = router.tables.iter().map(|t| (t.target.as_str(), t.kind)).collect();
    // 65 536 routes: multibit arrays would take 256 MB (two blocks per route and level), so a trie.
    assert_eq!(kinds, [("RouterIngress.routes", TableKind::Lpm)]);
    assert_eq!(
        router.counters.iter().map(|c| (c.0.as_str(), c.2)).collect::<Vec<_>>(),
        [("RouterIngress.routed", 1024)]
    );
    assert_eq!(router.max_args, 4);
    assert!(router.c.contains("SEC(\"tc\")") && router.c.contains("SEC(\"xdp\")"));
    let l2 = example("l2_switch.p4").unwrap();
    let kinds: Vec<(&str, TableKind)> = l2.tables.iter().map(|t| (t.target.as_str(), t.kind)).collect();
    assert_eq!(kinds, [("L2Ingress.vlan_allowed", TableKind::Exact), ("L2Ingress.dmac", TableKind::Exact)]);
    let afdx = example("afdx_switch.p4").unwrap();
    assert_eq!(afdx.accounts.iter().map(|a| (a.0.as_str(), a.2)).collect::<Vec<_>>(), [("AfdxIngress.accounts", 4096)]);
}

#[test]
fn entries_are_written_as_the_kernel_reads_them() {
    let router = example("ipv4_router.p4").unwrap();
    let t = &router.tables[0];
    // An LPM trie's key: the prefix length, then the address in network order.
    let key = table_key(t, &[Match::Lpm { value: 0x0a01_0000, prefix: 16 }]).unwrap();
    assert_eq!(key, [16u32.to_ne_bytes().as_slice(), &[10, 1, 0, 0]].concat());
    // The value: action id (from 1, in the table's order), entry index, the data padded to max_args.
    let v = table_value(t, "next_hop", 3, &[1, 2, 3, 4], router.max_args).unwrap();
    assert_eq!(&v[..8], [1u32.to_ne_bytes(), 3u32.to_ne_bytes()].concat().as_slice());
    assert_eq!(v.len(), 8 + 8 * 4);
    assert!(table_value(t, "no_such_action", 0, &[], router.max_args).is_none());
}

#[test]
fn what_does_not_fit_is_refused_by_name() {
    let looping = "#include <edgeflow.p4>
header h_t { bit<8> x; }
struct hs_t { h_t h; }
struct m_t { }
parser P(packet_in pk, out hs_t hdr, inout m_t meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition again; }
    state again { transition select(hdr.h.x) { 0: start; default: accept; } }
}
control I(inout hs_t hdr, inout m_t meta, inout standard_metadata_t sm) { apply { } }
control E(inout hs_t hdr, inout m_t meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out pk, in hs_t hdr) { apply { pk.emit(hdr.h); } }
EdgeflowSwitch(P(), I(), E(), D()) main;
";
    let (p, c) = p4::front_end("loop.p4", looping).unwrap_or_else(|e| panic!("{e}"));
    // A parser loop is unrolled (it was refused): a second pass of the loop's states, and past
    // the last pass the frame goes up.
    let g = generate(&p, &c).unwrap_or_else(|e| panic!("{e}"));
    for label in ["st_start:", "st_1_start:", "st_1_again:", "st_loop_up:"] {
        assert!(g.c.contains(label), "{label} in {}", g.c);
    }
    assert!(!g.c.contains("st_2_start:"), "a program without stacks loops twice in the kernel");
    let wide_register = looping
        .replace(
            "control I(inout hs_t hdr, inout m_t meta, inout standard_metadata_t sm) { apply { } }",
            "control I(inout hs_t hdr, inout m_t meta, inout standard_metadata_t sm) {
    register<bit<72>>(4) r;
    apply { r.write(0, 72w1); }
}",
        )
        .replace("0: start;", "0: accept;");
    let (p, c) = p4::front_end("wide_register.p4", &wide_register).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        generate(&p, &c).unwrap_err(),
        "register I.r of 72 bits does not fit the kernel back end (docs/p4.md); the program runs in userspace"
    );
    // Meters fit: each cell's rates and its two bucket words, a map each.
    let metered = wide_register
        .replace("register<bit<72>>(4) r;", "meter(4, MeterType.bytes) m;")
        .replace("r.write(0, 72w1);", "m.execute_meter(32w1, hdr.h.x);");
    let (p, c) = p4::front_end("metered.p4", &metered).unwrap_or_else(|e| panic!("{e}"));
    let g = generate(&p, &c).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(g.meters.len(), 1);
    assert_eq!((g.meters[0].name.as_str(), g.meters[0].cells, g.meters[0].bytes), ("I.m", 4, true));
    let wide = looping.replace("bit<8> x;", "bit<8> x; bit<72> y;").replace("0: start;", "0: accept;");
    let (p, c) = p4::front_end("wide.p4", &wide).unwrap_or_else(|e| panic!("{e}"));
    assert!(generate(&p, &c).unwrap_err().starts_with("header field h_t.y of type bit<72> does not fit"));
    // With the program's file: where, in P4's words.
    let e = p4::backends::ebpf::generate_in("wide.p4", &p, &c).unwrap_err();
    assert!(e.starts_with("wide.p4:") && e.contains(": header field h_t.y of type bit<72> does not fit"), "{e}");
    let (p, c) = p4::front_end("wide_register.p4", &wide_register).unwrap();
    let e = p4::backends::ebpf::generate_in("wide_register.p4", &p, &c).unwrap_err();
    // The register's use: an instance the program declares and does not use is not in the kernel.
    let line = wide_register.lines().position(|l| l.contains("r.write(0, 72w1);")).unwrap() + 1;
    assert!(e.starts_with(&format!("wide_register.p4:{line}:")), "{e}");
}

/// A refusal names the statement that does not fit, not the action or control around it
/// (issue 52, item 5): a for loop two lines into an action, a 72-bit local in a control's apply.
#[test]
fn a_refusal_names_the_line_of_the_statement() {
    let program = "#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> x; }
struct hs_t { h_t h; }
struct m_t { }
parser P(packet_in pk, out hs_t hdr, inout m_t meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition accept; }
}
control V(inout hs_t hdr, inout m_t meta) { apply { } }
control I(inout hs_t hdr, inout m_t meta, inout standard_metadata_t sm) {
    action sum() {
        hdr.h.x = 0;
        for (bit<8> i = 1; i < 4; i = i + 1) {
            hdr.h.x = hdr.h.x + i;
        }
    }
    apply {
        sm.egress_spec = 1;
        sum();
    }
}
control E(inout hs_t hdr, inout m_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs_t hdr, inout m_t meta) { apply { } }
control D(packet_out pk, in hs_t hdr) { apply { pk.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
";
    let line_of = |text: &str, what: &str| text.lines().position(|l| l.contains(what)).unwrap() + 1;
    let (p, c) = p4::front_end("loop.p4", program).unwrap_or_else(|e| panic!("{e}"));
    let e = p4::backends::ebpf::generate_in("loop.p4", &p, &c).unwrap_err();
    let at = format!("loop.p4:{}:", line_of(program, "for (bit<8> i"));
    assert!(e.starts_with(&at) && e.contains("a for loop does not fit"), "{at} in {e}");
    let wide =
        program.replace("        sm.egress_spec = 1;\n", "        sm.egress_spec = 1;\n        bit<72> big = 72w1;\n");
    let (p, c) = p4::front_end("wide_local.p4", &wide).unwrap_or_else(|e| panic!("{e}"));
    let e = p4::backends::ebpf::generate_in("wide_local.p4", &p, &c).unwrap_err();
    let at = format!("wide_local.p4:{}:", line_of(&wide, "bit<72> big"));
    assert!(e.starts_with(&at) && e.contains("bit<72>"), "{at} in {e}");
}
