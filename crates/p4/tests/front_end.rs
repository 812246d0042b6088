//! The front end against whole programs: the examples edgeflow ships parse, and bad programs get
//! the exact message, at the exact place, that a user reads.

use p4::ast::{Decl, Local, Stmt, Transition};

fn example(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/p4").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_example_programs_parse() {
    for name in ["afdx_switch.p4", "l2_switch.p4", "ipv4_router.p4"] {
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
        matches!(&table.size, Some(e) if matches!(e.kind, p4::ast::ExprKind::Int { value: 4096, .. })),
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
        ("header h { bit<8> a; varbit<32> o; }", "p.p4:1:22: variable-width fields (varbit) are outside the subset edgeflow compiles (docs/p4.md)"),
        ("header_union u { }", "p.p4:1:1: header unions are outside the subset edgeflow compiles (docs/p4.md)"),
        ("struct s { h[4] stack; }", "p.p4:1:13: header stacks (T[n]) are outside the subset edgeflow compiles (docs/p4.md)"),
        ("enum bit<8> e { a }", "p.p4:1:1: enums with an underlying type (enum bit<N>) are outside the subset edgeflow compiles (docs/p4.md)"),
        ("const bit<8> x = 10 / 2;", "p.p4:1:21: division and modulo are outside the subset edgeflow compiles (docs/p4.md)"),
        ("control c() { apply { x = 1 } }", "p.p4:1:29: expected ';', found '}'"),
        ("control c() { action a() {} }", "p.p4:1:29: expected 'apply' (a control needs an apply block), found '}'"),
        ("control c() { apply { table t {} } }", "p.p4:1:23: tables and actions are declared before the apply block"),
        ("control c() { apply { x; } }", "p.p4:1:24: expected '=' or a call (an expression alone does nothing), found ';'"),
        ("control c() { apply { f(x = 1); } }", "p.p4:1:25: named arguments are outside the subset edgeflow compiles (docs/p4.md)"),
        ("control c() { table t { entries = { } } apply {} }", "p.p4:1:25: table entries that are not const are outside the subset edgeflow compiles (docs/p4.md)"),
        ("control c() { table t { key = { x : exact } } apply {} }", "p.p4:1:43: expected ';', found '}'"),
        ("parser p() { state s { } }", "p.p4:1:24: expected 'transition' (every state but accept and reject ends in one), found '}'"),
        ("parser p() { state s { transition select(x) { 1: ; } } }", "p.p4:1:50: expected the next state, found ';'"),
        ("parser p() { action a() {} }", "p.p4:1:14: an action belongs in a control, not a parser"),
        ("parser p<H>(out H h) { }", "p.p4:1:8: generic parsers and controls are outside the subset edgeflow compiles (docs/p4.md)"),
        ("package p(); table t {}", "p.p4:1:14: a table belongs inside a control"),
        ("action a(bit<8> x = 1) {}", "p.p4:1:19: default parameter values are outside the subset edgeflow compiles (docs/p4.md)"),
        ("action a() { return 1; }", "p.p4:1:21: return values are outside the subset edgeflow compiles (docs/p4.md)"),
        ("action a() { bit<8> struct = 1; }", "p.p4:1:21: expected a name for the variable, found 'struct'"),
        ("const bit<8> x = 1", "p.p4:1:18: expected ';', found the end of the program"),
        ("#include <v1model.p4>", "p.p4:1:1: #include <v1model.p4>: only <core.p4> and <edgeflow.p4> can be included (edgeflow's architecture)"),
        ("#define F(x) x", "p.p4:1:1: a #define with parameters (a function-like macro) is outside the subset edgeflow compiles"),
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
    use p4::ast::{BinOp, ExprKind};
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
    assert!(matches!(values[0], ExprKind::Cast(p4::ast::Type::Bit(16), e) if matches!(e.kind, ExprKind::Slice(..))));
    assert!(matches!(values[1], ExprKind::Call { type_args, .. } if type_args == &[p4::ast::Type::Bit(16)]));
    assert!(matches!(values[2], ExprKind::Cast(p4::ast::Type::Named(..), _)));
    assert!(matches!(values[3], ExprKind::Binary(BinOp::Lt, _, _)));
    assert!(
        matches!(values[4], ExprKind::Binary(BinOp::Ge, l, _) if matches!(l.kind, ExprKind::Binary(BinOp::Shr, _, _)))
    );
}
