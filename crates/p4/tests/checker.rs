//! The checker against bad programs: each gets one message, at the place it is about. Every
//! program starts with `#include <edgeflow.p4>` on line 1, so its own text starts on line 2.

fn check(body: &str) -> Result<p4::frontend::check::Checked, String> {
    let text = format!("#include <edgeflow.p4>\n{body}");
    p4::front_end("c.p4", &text).map(|(_, c)| c)
}

/// A whole program around an ingress apply block and its declarations.
fn with_ingress(locals: &str, apply: &str) -> String {
    format!(
        "header h_t {{ bit<8> a; bit<8> b; }}\n\
         struct hs_t {{ h_t h; }}\n\
         struct m_t {{ bit<16> v; }}\n\
         parser P(packet_in pk, out hs_t hdr, inout m_t meta, inout standard_metadata_t sm) {{\n\
           state start {{ pk.extract(hdr.h); transition accept; }}\n\
         }}\n\
         control I(inout hs_t hdr, inout m_t meta, inout standard_metadata_t sm) {{\n\
         {locals}\n\
           apply {{ {apply} }}\n\
         }}\n\
         control E(inout hs_t hdr, inout m_t meta, inout standard_metadata_t sm) {{ apply {{ }} }}\n\
         control D(packet_out pk, in hs_t hdr) {{ apply {{ pk.emit(hdr.h); }} }}\n\
         EdgeflowSwitch(P(), I(), E(), D()) main;\n"
    )
}

#[test]
fn a_small_whole_program_checks() {
    let checked = check(&with_ingress(
        "action fwd(PortId_t p) { sm.egress_port = p; }\n table t { key = { hdr.h.a : exact; } actions = { fwd; NoAction; } default_action = NoAction(); const entries = { 1 : fwd(2); } }",
        "if (hdr.h.isValid()) { t.apply(); }",
    ))
    .unwrap();
    assert_eq!((checked.package.as_str(), checked.blocks.len()), ("EdgeflowSwitch", 4));
}

#[test]
fn the_example_programs_check() {
    for name in ["afdx_switch.p4", "l2_switch.p4", "ipv4_router.p4"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/p4").join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        let (_, checked) = p4::front_end(name, &text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(checked.blocks.len(), 4, "{name}");
    }
}

#[test]
fn bad_programs_get_exact_messages() {
    let ingress = |locals: &str, apply: &str| with_ingress(locals, apply);
    let cases: Vec<(String, &str)> = vec![
        ("header x { foo_t a; }".into(), "c.p4:2:12: no type named 'foo_t'"),
        ("header x { bool b; bit<7> c; }".into(), "c.p4:2:17: a header's fields are bit<N>, int<N> or varbit<N>; 'b' is bool"),
        ("header x { bit<7> c; }".into(), "c.p4:2:19: a header is whole bytes; this one's fields add up to 7 bits"),
        ("const bit<8> c = 300;".into(), "c.p4:2:18: 300 does not fit in bit<8>"),
        ("const bit<8> c = 9w300;".into(), "c.p4:2:18: the constant's value should be bit<8>, and is bit<9>"),
        ("action a(bit<8> x) { bit<16> y = x; }".into(), "c.p4:2:34: the initial value should be bit<16>, and is bit<8>"),
        ("action a(bit<8> x, bit<16> y) { bit<16> z = x + y; }".into(), "c.p4:2:45: the operands of '+' differ: bit<8> and bit<16> (cast one)"),
        ("action a(bit<8> x) { x = 1; }".into(), "c.p4:2:22: 'x' cannot be assigned: a constant, or a parameter that is only read (in, or an action's data)"),
        ("action a(bit<8> x) { if (x) { } }".into(), "c.p4:2:26: the condition should be bool, and is bit<8>"),
        ("action a(bit<8> x) { bit<8> y = x[8:0]; }".into(), "c.p4:2:35: [8:0] is not inside bit<8> (bits 7..0)"),
        ("action a() { verify(true, error.Nope); }".into(), "c.p4:2:33: no error.Nope (there are NoError, PacketTooShort, NoMatch, StackOutOfBounds, HeaderTooShort, ParserTimeout, ParserInvalidArgument)"),
        ("action a() { nope(); }".into(), "c.p4:2:14: no action or function 'nope'"),
        (ingress("", "hdr.h.c = 1;"), "c.p4:10:15: header h_t has no field 'c' (it has a, b)"),
        (ingress("table t { key = { hdr.h.a : exact; } actions = { nope; } }", ""), "c.p4:9:50: no action 'nope'"),
        (ingress("table t { key = { hdr.h.a : range; } actions = { NoAction; } }", ""), "c.p4:9:29: no match kind 'range' (there are exact, ternary, lpm)"),
        (ingress("action b() {}\ntable t { key = { hdr.h.a : exact; } actions = { NoAction; } default_action = b(); }", ""), "c.p4:10:79: the default action 'b' is not among the table's actions"),
        (ingress("table t { key = { hdr.h.a : exact; } actions = { NoAction; } const entries = { (1, 2) : NoAction(); } }", ""), "c.p4:9:80: 2 value(s) for the 1 field(s) this table matches"),
        (ingress("action f(PortId_t p) {}\ntable t { key = { hdr.h.a : exact; } actions = { f; } const entries = { 1 : f(); } }", ""), "c.p4:10:77: 'f' takes 1 argument(s), not 0"),
        (ingress("table t { key = { hdr.h.a : exact; } actions = { NoAction; } counters = 5; }", ""), "c.p4:9:73: 'counters' takes a direct_counter instance; this is a number"),
        (ingress("table t { key = { hdr.h.a : exact; } actions = { NoAction; } idle = 5; }", ""), "c.p4:9:62: no table property 'idle' (there are key, actions, default_action, size, entries, counters, meters, psa_direct_counter, psa_direct_meter, implementation and psa_implementation)"),
        (ingress("", "switch (hdr.h.a) { default: { } }"), "c.p4:10:9: switch takes a table's action_run (t.apply().action_run); this is bit<8>"),
        (ingress("table t { key = { hdr.h.a : exact; } actions = { NoAction; } }", "switch (t.apply().action_run) { drop: { } }"), "c.p4:10:41: 'drop' is not one of table t's actions"),
        (ingress("table t { key = { hdr.h.a : exact; } actions = { NoAction; } }\naction b() { t.apply(); }", ""), "c.p4:10:16: a table is applied in a control's apply block, not in an action"),
        (ingress("counter(1024) c;", ""), "c.p4:9:15: counter takes 2 constructor argument(s), not 1"),
        (ingress("counter(1024, CounterType.packets) c;", "c.count(hdr.h.a);"), "c.p4:10:17: 'counter.count''s 'index' should be bit<32>, and is bit<8>"),
        ("struct s_t { bit<8> a; }\nparser P(packet_in pk, out s_t s) { state start { pk.extract(s); transition accept; } }".into(), "c.p4:3:62: extract fills a header, not struct s_t"),
        ("parser P(packet_in pk) { state begin { transition accept; } }".into(), "c.p4:2:32: a parser needs a 'start' state"),
        ("parser P(packet_in pk) { state start { transition nowhere; } }".into(), "c.p4:2:51: no state 'nowhere' (this parser has start, accept and reject)"),
        ("parser P(packet_in pk) { state start { exit; transition accept; } }".into(), "c.p4:2:40: a parser's states end in a transition, not exit"),
        ("parser P(packet_in pk) { state accept { transition reject; } }".into(), "c.p4:2:32: 'accept' is the parser's own state: it cannot be declared"),
        ("const bit<8> c = 1;".into(), "c.p4:1:1: the program has no 'main' (EdgeflowSwitch(MyParser(), MyIngress(), MyEgress(), MyDeparser()) main;)"),
        (with_ingress("", "").replace("control I(inout hs_t hdr, inout m_t meta", "control I(inout hs_t hdr, inout hs_t meta"), "c.p4:8:38: 'I' parameter 2 is 'inout struct hs_t'; Ingress expects 'inout M = struct m_t' there"),
        (with_ingress("", "").replace("EdgeflowSwitch(P(), I(), E(), D())", "EdgeflowSwitch(P(), P(), E(), D())"), "c.p4:14:21: EdgeflowSwitch's 'ig' is a control, and 'P' is a parser"),
        (with_ingress("", "").replace("EdgeflowSwitch(P(), I(), E(), D())", "EdgeflowSwitch(P(), I(), E())"), "c.p4:14:1: EdgeflowSwitch takes 4 blocks, not 3"),
        // Functions (issue 52, item 3).
        ("bit<8> f(in bit<8> x) { return true; }".into(), "c.p4:2:32: the returned value should be bit<8>, and is bool"),
        ("bit<8> f(in bit<8> x) { if (x == 1) { return 1; } }".into(), "c.p4:2:8: function 'f' returns bit<8>, and a path through it ends without 'return'"),
        ("bit<8> f() { return; }".into(), "c.p4:2:14: this function returns bit<8>: 'return' needs a value"),
        ("void f() { return 1; }".into(), "c.p4:2:12: a void function's 'return' has no value"),
        ("action a() { return 1; }".into(), "c.p4:2:14: 'return' with a value is a function's; actions, controls and parsers return nothing"),
        ("bit<8> f() { return f(); }".into(), "c.p4:2:21: 'f' calls itself: P4's functions do not recurse"),
        ("bit<8> f(out bit<8> x) { x = 1; return x; }\naction a() { bit<8> y = f(1); }".into(), "c.p4:3:27: this cannot be assigned to"),
        ("bit<8> f(in bit<8> x) { return x; }\naction a() { bit<16> y = f(1); }".into(), "c.p4:3:26: the initial value should be bit<16>, and is bit<8>"),
        // `/` and `%`.
        ("action a(int<8> x) { int<8> y = x / 2; }".into(), "c.p4:2:33: '/' divides unsigned numbers (bit<N>, or numbers without a width), not int<8>"),
        ("const bit<8> c = 10 % 0;".into(), "c.p4:2:23: '%' by zero"),
        ("const bit<8> c = 600 / 2;".into(), "c.p4:2:18: 300 does not fit in bit<8>"),
        // Header stacks.
        ("struct s { bit<8>[2] a; }".into(), "c.p4:2:19: a stack holds headers or header unions, not bit<8>"),
        ("header h { bit<8> a; }\nstruct s { h[0] t; }".into(), "c.p4:3:14: a header stack holds 1 to 256 headers, not 0"),
        ("header h { bit<8> a; }\nstruct s { h[2] t; }\naction a(inout s x) { x.t[2].a = 1; }".into(), "c.p4:4:27: index 2 is past the stack's 2 headers"),
        ("header h { bit<8> a; }\nstruct s { h[2] t; }\naction a(inout s x) { x.t.next.a = 1; }".into(), "c.p4:4:27: a stack's 'next' is a parser's (P4-16 8.18); index it here"),
        ("header h { bit<8> a; }\nstruct s { h[2] t; }\naction a(inout s x) { x.t.push_front(8w1); }".into(), "c.p4:4:38: push_front's count is a positive number without a width"),
        ("header h { bit<8> a; }\nstruct s { h[2] t; }\naction a(inout s x) { x.t.a = 1; }".into(), "c.p4:4:27: header h[2] has no member 'a' (it has next, last, lastIndex, nextIndex, size)"),
        ("header h { bit<8> a; }\naction a(inout h x) { x[0].a = 1; }".into(), "c.p4:3:23: [...] indexes a header stack, and this is header h"),
        // Header unions.
        ("header h { bit<8> a; }\nheader_union u { h one; bit<8> two; }".into(), "c.p4:3:32: a header union holds headers; 'two' is bit<8>"),
        ("header h { bit<8> a; }\nheader_union u { h one; }\naction a(inout u x) { x.setValid(); }".into(), "c.p4:4:25: header_union u has no method 'setValid'"),
        // varbit.
        ("header h { varbit<8> a; varbit<8> b; }".into(), "c.p4:2:35: a header has at most one varbit field; 'b' is a second"),
        ("struct s { varbit<8> v; }".into(), "c.p4:2:22: a struct cannot hold varbit<8> ('v')"),
        ("header h { bit<8> a; varbit<8> v; }\nparser P(packet_in pk, out h x) { state start { pk.extract(x); transition accept; } }".into(), "c.p4:3:60: header h has a varbit field: extract(hdr, size in bits) gives its size"),
        ("header h { bit<8> a; }\nparser P(packet_in pk, out h x) { state start { pk.extract(x, 8); transition accept; } }".into(), "c.p4:3:63: header h has no varbit field for a size to fill"),
        ("header h { bit<8> a; varbit<8> v; }\naction a(inout h x) { x.v = x.v + 1; }".into(), "c.p4:3:29: '+' does not take varbit<8>: a varbit is assigned, emitted and compared with == and !="),
        // Arguments bound in a table's action list.
        (ingress("action f(inout bit<8> x, bit<8> y) { x = y; }\ntable t { key = { hdr.h.a : exact; } actions = { f; } }", ""), "c.p4:10:50: 'f' takes 'x' with a direction, which no table entry can give: bind it here, f(...)"),
        (ingress("action f(inout bit<8> x, bit<8> y) { x = y; }\ntable t { key = { hdr.h.a : exact; } actions = { f(hdr.h.a, 1); } }", ""), "c.p4:10:50: 'f': a table's action list binds its 1 parameter(s) with a direction, here given 2"),
        (ingress("action f(bit<8> y, inout bit<8> x) { x = y; }\ntable t { key = { hdr.h.a : exact; } actions = { f(hdr.h.a); } }", ""), "c.p4:9:33: 'x': parameters with a direction come before those without (the control plane's)"),
        (ingress("action f(inout bit<8> x, bit<8> y) { x = y; }\ntable t { key = { hdr.h.a : exact; } actions = { f(1); } }", ""), "c.p4:10:52: this cannot be assigned to"),
        // Serializable enums.
        ("enum bit<8> E { A = 300 }".into(), "c.p4:2:21: 300 does not fit in bit<8>"),
        ("enum bit<8> E { A = 1, A = 2 }".into(), "c.p4:2:24: 'A' is declared twice"),
        ("enum bit<8> E { A = 1 }\naction a() { bit<8> x = E.B; }".into(), "c.p4:3:27: enum E has no 'B'"),
        ("enum bit<8> E { A = 1 }\naction a() { bit<16> x = E.A; }".into(), "c.p4:3:26: the initial value should be bit<16>, and is bit<8>"),
        // Tuples.
        ("action a() { tuple<bit<8>, bool> t = { 1 }; }".into(), "c.p4:2:38: a list of 1 value(s) for tuple<bit<8>, bool>"),
        ("action a() { tuple<bit<8>, bool> t = { 1, 2 }; }".into(), "c.p4:2:43: the initial value's element 1 should be bool, and is a number"),
        ("action a(bit<8> i) { tuple<bit<8>, bool> t = { 1, true }; bit<8> x = t[i]; }".into(), "c.p4:2:72: a tuple's index is a compile-time number"),
        ("action a() { tuple<bit<8>, bool> t = { 1, true }; bit<8> x = t[2]; }".into(), "c.p4:2:64: index 2 is past tuple<bit<8>, bool>"),
        // static_assert.
        ("const bit<8> W = 8;\nconst bool b = static_assert(W == 16, \"W is 16 bits\");".into(), "c.p4:3:30: static_assert fails: W is 16 bits"),
        ("action a(bit<8> x) { static_assert(x == 1); }".into(), "c.p4:2:36: static_assert takes a condition known at compile time (numbers, constants, comparisons)"),
        ("const bool b = static_assert(1 == 1, 2);".into(), "c.p4:2:38: static_assert's message is a string"),
        (ingress("table t { key = { hdr.h.a : exact; } }", ""), "c.p4:9:7: table 't' has no 'actions' property (it may list none: actions = {})"),
        // for loops.
        ("action a() { break; }".into(), "c.p4:2:14: 'break' belongs inside a for loop"),
        ("action a(bit<8> x) { for (bit<8> i = 0; i; i = i + 1) { } }".into(), "c.p4:2:41: the loop's condition should be bool, and is bit<8>"),
        ("parser P(packet_in pk) { state start { for (;;) { } transition accept; } }".into(), "c.p4:2:40: a parser loops through its states, not with 'for'"),
        // List initialisers.
        ("header h { bit<8> a; bit<8> b; }\naction a(inout h x) { x = {1}; }".into(), "c.p4:3:27: a list of 1 value(s) for header h's 2 field(s)"),
        ("header h { bit<8> a; bit<8> b; }\naction a(inout h x) { x = {1, true}; }".into(), "c.p4:3:31: the value's 'b' should be bit<8>, and is bool"),
        ("action a() { bit<8> x = {1}; }".into(), "c.p4:2:25: a list {...} initialises a struct or a header; the initial value is bit<8>"),
    ];
    let mut wrong = Vec::new();
    for (program, want) in &cases {
        match check(program) {
            Ok(_) => wrong.push(format!("{program}\n  accepted; want {want:?}")),
            Err(got) if got != *want => wrong.push(format!("{program}\n   got {got:?}\n  want {want:?}")),
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{} of {}:\n{}", wrong.len(), cases.len(), wrong.join("\n"));
}
