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
    assert!(out.contains("instance I.last = register<u8>(128:u32)"), "{out}");
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

/// How many of p4c's corpus programs that pass the front end the mid end lowers whole (blocks,
/// actions, tables): raise it as the lowering grows; it never falls.
const CORPUS_LOWERED_FLOOR: usize = 220;

#[test]
fn the_corpus_lowers_at_least_as_far_as_before() {
    let dir = p4::stf::corpus_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        panic!("{}: the p4c STF corpus is not there (set P4C_STF_DIR)", dir.display());
    };
    let mut programs: Vec<std::path::PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "p4") && p.with_extension("stf").exists())
        .collect();
    programs.sort();
    let (mut checked, mut lowered) = (0, 0);
    let mut reasons: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for path in &programs {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).unwrap();
        let Ok((p, c)) = p4::front_end_at(path, &text) else { continue };
        checked += 1;
        match p4::midend::lower(&p, &c) {
            Ok(_) => lowered += 1,
            Err(e) => {
                println!("{name}: {e}");
                let why = e.splitn(4, ':').nth(3).unwrap_or(&e).trim().to_string();
                reasons.entry(why).or_default().push(name);
            }
        }
    }
    let mut histogram: Vec<_> = reasons.into_iter().collect();
    histogram.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
    println!("\n{lowered} of {checked} checked programs lower; errors by kind:");
    for (why, names) in &histogram {
        println!("{:4}  {why}   (e.g. {})", names.len(), names[0]);
    }
    assert!(
        lowered >= CORPUS_LOWERED_FLOOR,
        "{lowered} of {checked} lower, fewer than the floor {CORPUS_LOWERED_FLOOR}"
    );
}

/// The code of `dump` from `block NAME(` to the next block.
fn block_of<'d>(out: &'d str, name: &str) -> &'d str {
    let start = out.find(&format!("block {name}(")).unwrap_or_else(|| panic!("no block {name}:\n{out}"));
    let rest = &out[start..];
    let end = rest[1..].find("\nblock ").map_or(rest.len(), |e| e + 2);
    &rest[..end]
}

/// Userspace resized a negative literal met by a `bit<16>`; the kernel did not. Here it is one
/// constant of the field's type.
#[test]
fn a_negative_literal_takes_the_type_it_is_compared_with() {
    let out =
        dump(&program("", "    apply { if (hdr.eth.type == -1) { meta.vid = 1; } }").replace("    apply { }\n", ""));
    assert!(out.contains("if eq.u16(I.hdr.eth.type, 65535:u16)"), "{out}");
    assert!(out.contains("I.meta.vid = 1:u12"), "{out}");
}

/// `int<W>`: `>>` arithmetic, `|+|` signed, a widening cast sign-extends; each says so.
#[test]
fn signed_operations_say_they_are_signed() {
    let top = "struct s_t { int<8> s; bit<16> x; }";
    let body =
        "    s_t v;\n    apply { v.s = v.s >> 1; v.s = v.s |+| 3; v.x = (bit<16>)(int<16>)v.s; v.x = (bit<16>)v.s; }";
    let out = dump(&program(top, body).replace("    apply { }\n", ""));
    let code = block_of(&out, "I");
    assert!(code.contains("I.v.s = shr.s8(I.v.s, 1:u32)"), "{code}");
    assert!(code.contains("I.v.s = addsat.s8(I.v.s, 3:s8)"), "{code}");
    // Across signedness and width at once, the width first, in the source's signedness: the
    // same as the two casts written out.
    assert_eq!(code.matches("I.v.x = as.u16(sext.s16(I.v.s))").count(), 2, "{code}");
    assert!(code.contains("init I.v\n"), "{code}");
}

/// A slice assignment with named-constant bounds wrote bit 0 only in userspace: here it is a
/// read-modify-write with the mask its bounds make.
#[test]
fn a_slice_assignment_with_named_bounds_writes_those_bits() {
    let top = "const bit<32> HI = 7;\nconst bit<32> LO = 4;";
    let out = dump(&program(top, "    apply { hdr.eth.type[HI:LO] = 5; }").replace("    apply { }\n", ""));
    // 0xff0f keeps the other bits; 5 << 4 = 80.
    assert!(out.contains("I.hdr.eth.type = or.u16(and.u16(I.hdr.eth.type, 65295:u16), 80:u16)"), "{out}");
}

/// `select` on an enum compares the members' numbers (userspace took the first case).
#[test]
fn a_select_on_an_enum_compares_numbers() {
    let text = program("enum colour_t { Red, Green, Blue }", "")
        .replace("struct m_t { bit<12> vid; }", "struct m_t { bit<12> vid; colour_t c; }")
        .replace(
            "pk.extract(hdr.eth); transition accept;",
            "pk.extract(hdr.eth); transition select(meta.c) { colour_t.Blue: accept; default: reject; }",
        );
    let out = dump(&text);
    assert!(out.contains("select (P.meta.c) {\n      (0x2) => accept\n      (_) => reject\n"), "{out}");
}

/// `exit` in an action run under `switch (t.apply().action_run)` stopped userspace only: here
/// the action holds the `exit`, and the switch is the apply and a test of the action's number.
#[test]
fn exit_in_a_switched_action_is_in_the_action() {
    let body = "    action stop() { exit; }
    action go() { }
    table t { key = { hdr.eth.dst: exact; } actions = { stop; go; } }
    apply { switch (t.apply().action_run) { go: { meta.vid = 2; } stop: { meta.vid = 3; } } meta.vid = 4; }";
    let out = dump(&program("", body).replace("    apply { }\n", ""));
    assert!(out.contains("action#0 I.stop() {\n  exit\n}"), "{out}");
    let code = block_of(&out, "I");
    assert!(code.contains("apply I.t action_run -> "), "{code}");
    assert!(code.contains("eq.u32(") && code.contains(", 1:u32)") && code.contains(", 0:u32)"), "{code}");
}

/// An LPM key whose width is not a multiple of 8 keeps its width, which both back ends read.
#[test]
fn a_table_key_keeps_its_width_and_match_kind() {
    let body = "    action go() { }\n    table t { key = { meta.vid: lpm @name(\"vid\"); } actions = { go; } }\n    apply { t.apply(); }";
    let out = dump(&program("", body).replace("    apply { }\n", ""));
    assert!(out.contains("table#0 I.t key(I.meta.vid lpm as vid)"), "{out}");
    assert!(out.contains("default NoAction()"), "{out}");
}

/// A call's arguments are copied in before it and out after it, through the callee's own
/// variables: `inout` both ways; an action's `out` starts with the argument's value, as the
/// software target has always given it. The copies out belong to the call: they run when the
/// action exits too (P4-16 12.5.1; gauntlet_exit_combination_3 expects it).
#[test]
fn an_action_call_copies_in_and_out() {
    let body = "    action twice(inout bit<12> v, out bit<12> w) { w = v; v = v + v; exit; }
    apply { twice(meta.vid, meta.vid); }";
    let out = dump(&program("", body).replace("    apply { }\n", ""));
    let code = block_of(&out, "I");
    let expected = "    I.twice.v = I.meta.vid\n    I.twice.w = I.meta.vid\n    call I.twice, then {\n      I.meta.vid = I.twice.v\n      I.meta.vid = I.twice.w\n    }\n";
    assert!(code.contains(expected), "{code}");
}

/// The program of the review of the mid end: each line one case where the IR once read
/// differently from P4 (left to right, once each) or from the software target.
fn evaluation_order() -> String {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/evaluation_order.p4"),
    )
    .unwrap();
    let out = dump(&text);
    block_of(&out, "I").to_string()
}

/// `add(1, add(2, 3))`: the inner call runs before the outer call's parameters are set (it
/// used to overwrite `add.a`, giving 7).
#[test]
fn a_call_in_an_argument_does_not_overwrite_the_outer_parameters() {
    let code = evaluation_order();
    let expected = "    add.a = 2:u8\n    add.b = 3:u8\n    call add<>\n    I.$tmp13 = add.$result\n    add.a = 1:u8\n    add.b = I.$tmp13\n    call add<>\n";
    assert!(code.contains(expected), "{code}");
}

/// `t + inc(t)` is 10 + 11: the left operand is read before the right one's call.
#[test]
fn an_operand_is_read_before_a_later_operands_call() {
    let code = evaluation_order();
    assert!(code.contains("    I.$tmp18 = I.t\n    inc.v = I.t\n    call inc<>"), "{code}");
    assert!(code.contains("I.hdr.s[0:u32].b = add.u8(I.$tmp18, I.$tmp15)"), "{code}");
}

/// `hdr.s[i].a = inc(i)` writes s[0]: the left side's index is taken before the right side's
/// call changes `i`.
#[test]
fn the_left_sides_index_is_taken_before_the_right_sides_calls() {
    let code = evaluation_order();
    assert!(code.contains("    I.$tmp21 = zext.u32(I.i)\n    inc.v = I.i\n"), "{code}");
    assert!(code.contains("I.hdr.s[I.$tmp21].a = I.$tmp20"), "{code}");
}

/// `hdr.s[inc(j)].b += 1` calls `inc` once (the parser writes it `a = a + 1` with `a` cloned);
/// the same written out by hand calls it twice, left side first.
#[test]
fn a_compound_assignment_evaluates_its_target_once() {
    let code = evaluation_order();
    assert!(
        code.contains("    I.hdr.s[zext.u32(I.$tmp26)].b = add.u8(I.hdr.s[zext.u32(I.$tmp26)].b, 1:u8)\n"),
        "{code}"
    );
    assert!(code.contains("    I.hdr.s[I.$tmp25].b = add.u8(I.hdr.s[zext.u32(I.$tmp24)].b, 1:u8)\n"), "{code}");
}

/// An `inout` argument with a call in its index: the call runs once, and the copy out goes to
/// the element the copy in read.
#[test]
fn an_inout_argument_is_evaluated_once() {
    let code = evaluation_order();
    let expected = "    I.$tmp28 = zext.u32(I.$tmp27)\n    I.a.x = I.hdr.s[I.$tmp28].a\n    call I.a, then {\n      I.hdr.s[I.$tmp28].a = I.a.x\n    }\n";
    assert!(code.contains(expected), "{code}");
    assert_eq!(code.matches("inc.v = I.meta.b").count(), 1, "{code}");
}

/// A slice of a slice is written into the field: bits 5:4 of `type` (it went to a temporary).
#[test]
fn a_slice_of_a_slice_is_written_through() {
    let code = evaluation_order();
    // 0xffcf keeps the rest; 3 << 4 = 0x30.
    assert!(code.contains("I.hdr.eth.type = or.u16(and.u16(I.hdr.eth.type, 65487:u16), 48:u16)"), "{code}");
}

/// `N > 2` of a `const int` folds to a bool (the mid end refused it).
#[test]
fn numbers_without_a_width_compare_at_compile_time() {
    let out =
        dump(&program("const int N = 4;", "    apply { if (N > 2) { meta.vid = 1; } }").replace("    apply { }\n", ""));
    assert!(block_of(&out, "I").contains("if true {"), "{out}");
}

/// A table applied under `&&` runs only when the left side holds.
#[test]
fn a_table_under_and_is_applied_only_when_the_left_side_holds() {
    let body = "    action go() { }
    table t { key = { hdr.eth.dst: exact; } actions = { go; } }
    apply { if (hdr.eth.isValid() && t.apply().hit) { meta.vid = 1; } }";
    let out = dump(&program("", body).replace("    apply { }\n", ""));
    let code = block_of(&out, "I");
    assert!(code.contains("= valid(I.hdr.eth)\n    if I.$tmp"), "{code}");
    assert!(code.contains("      apply I.t hit -> "), "{code}");
}

/// A loop condition that calls something calls it on every pass: the calls and a `break` open
/// the body (the mid end refused it).
#[test]
fn a_loop_condition_that_calls_runs_its_calls_each_pass() {
    let top = "bit<8> inc(inout bit<8> v) { v = v + 1; return v; }";
    let body = "    action count() { for (bit<8> i = 0; inc(meta.b) < 4; i = i + 1) { meta.vid = 1; } }\n    apply { count(); }";
    let text = program(top, body)
        .replace("    apply { }\n", "")
        .replace("struct m_t { bit<12> vid; }", "struct m_t { bit<12> vid; bit<8> b; }");
    let out = dump(&text);
    assert!(out.contains("  while true {\n    inc.v = I.meta.b\n    call inc<>, then {"), "{out}");
    assert!(out.contains("    if not(lt.u8(I.count.$tmp"), "{out}");
    assert!(out.contains(") {\n      break\n    }\n    I.meta.vid = 1:u12\n  } then {"), "{out}");
}

/// Issue 52, item 1: the software target executes the IR and the eBPF back end prints it;
/// neither reads the syntax tree. No file under `src/backends/` may name the front end (its
/// syntax tree, its checker's record): `crate::driver` lowers the tree and hands the IR over.
#[test]
fn no_back_end_reads_the_syntax_tree() {
    fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let backends = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backends");
    let mut sources = Vec::new();
    files(&backends, &mut sources);
    assert!(sources.len() > 20, "the back ends' files: {sources:?}");
    let mut found = Vec::new();
    for path in &sources {
        for (i, line) in std::fs::read_to_string(path).unwrap().lines().enumerate() {
            // The code of the line, its comment left out.
            let code = line.split("//").next().unwrap_or("");
            let names_ast = code
                .match_indices("ast::")
                .any(|(at, _)| !code[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_'));
            if code.contains("frontend") || names_ast {
                found.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "a back end names the front end:\n{}", found.join("\n"));
}
