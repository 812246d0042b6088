//! p4c's STF scripts (`p4::stf`): every command form read as p4c's runner reads it, errors at
//! their line, every script of p4c's corpus read, and scripts run against the example programs
//! on the software target, judged right where they hold and wrong where they do not.

use std::path::{Path, PathBuf};

use p4::backends::software::Match;
use p4::stf::{self, Command, CounterCell, CounterCheck, Expected, KeyText, Number, Verdict};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn commands(text: &str) -> Vec<Command> {
    stf::parse("t.stf", text).unwrap_or_else(|e| panic!("{e}")).commands.into_iter().map(|(_, c)| c).collect()
}

fn hex(n: u128, digits: u32) -> Number {
    Number { value: n, care: (1u128 << (4 * digits)) - 1, bits: Some(4 * digits) }
}

#[test]
fn every_command_form_reads_as_p4cs_runner_reads_it() {
    let got = commands(
        "# a comment line\n\
         add test1 503 data.f1:0x****0101 extra$0.h:0x0a&&&0x0f ipv4.dst:10/8 port:1->5 ingress.setb1(val:7, port:0x3) = A\n\
         ADD c.t e:4 c.a()\n\
         setdefault t2 drop()   # a comment after a command\n\
         remove all\n\
         packet 0 0101 0202\t0303\n\
         expect 1 01** 02 $\n\
         expect 5\n\
         no_packet\n\
         mc_mgrp_create 1113\n\
         mc_node_create 257 6 8\n\
         mc_node_associate 1113 0\n\
         mirroring_add 5 4\n\
         mirroring_add_mc 10 5\n\
         mirroring_get 10\n\
         check_counter cnt(10) packets == 2\n\
         check_counter cnt($A)\n\
         check_counter cnt(3) bytes >= 0x40\n\
         register_read ingress.r 4\n\
         register_write cIngress.regfile 5 100\n\
         register_reset cIngress.regfile\n\
         meter_set_rates cIngress.meter0 2 0.000005:4 0.00002:5\n\
         meter_array_set_rates cIngress.meter0 0.000006:7 0.00008:9\n\
         meter_get_rates cIngress.meter0 1\n\
         wait\n",
    );
    let want = vec![
        Command::Add {
            table: "test1".into(),
            priority: Some(503),
            keys: vec![
                ("data.f1".into(), KeyText::Value(Number { value: 0x0101, care: 0xffff, bits: Some(32) })),
                ("extra$0.h".into(), KeyText::Masked { value: 0x0a, mask: 0x0f }),
                ("ipv4.dst".into(), KeyText::Prefix { value: 10, len: 8 }),
                ("port".into(), KeyText::Range { low: 1, high: 5 }),
            ],
            action: "ingress.setb1".into(),
            args: vec![("val".into(), 7), ("port".into(), 3)],
            id: Some("A".into()),
        },
        Command::Add {
            table: "c.t".into(),
            priority: None,
            keys: vec![("e".into(), KeyText::Value(Number { value: 4, care: u128::MAX, bits: None }))],
            action: "c.a".into(),
            args: vec![],
            id: None,
        },
        Command::SetDefault { table: "t2".into(), action: "drop".into(), args: vec![] },
        Command::RemoveAll,
        Command::Packet { port: 0, frame: vec![1, 1, 2, 2, 3, 3] },
        Command::Expect {
            port: 1,
            frame: Some(Expected { nibbles: vec![Some(0), Some(1), None, None, Some(0), Some(2)], ends: true }),
        },
        Command::Expect { port: 5, frame: None },
        Command::NoPacket,
        Command::McGroupCreate { group: 1113 },
        Command::McNodeCreate { rid: 257, ports: vec![6, 8] },
        Command::McNodeAssociate { group: 1113, node: 0 },
        Command::MirroringAdd { session: 5, port: 4 },
        Command::MirroringAddMc { session: 10, group: 5 },
        Command::MirroringGet { session: 10 },
        Command::CheckCounter {
            name: "cnt".into(),
            cell: CounterCell::Index(10),
            check: Some(CounterCheck { bytes: false, op: "==".into(), value: 2 }),
        },
        Command::CheckCounter { name: "cnt".into(), cell: CounterCell::Entry("A".into()), check: None },
        Command::CheckCounter {
            name: "cnt".into(),
            cell: CounterCell::Index(3),
            check: Some(CounterCheck { bytes: true, op: ">=".into(), value: 0x40 }),
        },
        Command::RegisterRead { name: "ingress.r".into(), index: 4 },
        Command::RegisterWrite { name: "cIngress.regfile".into(), index: 5, value: 100 },
        Command::RegisterReset { name: "cIngress.regfile".into() },
        Command::MeterSetRates {
            name: "cIngress.meter0".into(),
            index: Some(2),
            rates: vec![(0.000005, 4), (0.00002, 5)],
        },
        Command::MeterSetRates {
            name: "cIngress.meter0".into(),
            index: None,
            rates: vec![(0.000006, 7), (0.00008, 9)],
        },
        Command::MeterGetRates { name: "cIngress.meter0".into(), index: 1 },
        Command::Wait,
    ];
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    // Lines are the file's, comments and blank lines counted.
    let script = stf::parse("t.stf", "\n# x\n\nwait\n").unwrap();
    assert_eq!(script.commands, vec![(4, Command::Wait)]);
    assert_eq!(stf::number("0b1*1").unwrap(), Number { value: 0b101, care: 0b101, bits: Some(3) });
    assert_eq!(stf::number("0x2a").unwrap(), hex(0x2a, 2));
}

#[test]
fn a_script_error_names_the_file_and_line() {
    let cases = [
        ("wait\nfrobnicate 1\n", "t.stf:2: 'frobnicate' is not an STF command"),
        ("\n\npacket 1 0g\n", "t.stf:3: packet: 'g' is not a hex digit"),
        ("packet 1 012\n", "t.stf:1: packet: 3 hex digits do not make whole bytes"),
        ("expect 1 01$02\n", "t.stf:1: expect: '$' is not a hex digit, * or a final $"),
        ("expect x 01\n", "t.stf:1: expect: the port 'x' is not a decimal number"),
        ("# ok\nadd t k:1 a(x:1\n", "t.stf:2: 'a(x:1': the action's ')' is missing"),
        ("add t k:1\n", "t.stf:1: no action"),
        ("add t k1 a()\n", "t.stf:1: 'k1': a key is FIELD:VALUE"),
        ("add t k:1 a(x:0x1*)\n", "t.stf:1: '0x1*': * digits only in a key's value"),
        ("mc_node_associate 1\n", "t.stf:1: mc_node_associate takes 2 word(s), not 1"),
        ("check_counter c(1) packets = 2\n", "t.stf:1: check_counter NAME(INDEX)"),
        ("meter_set_rates m 1 fast:2 0.1:3\n", "t.stf:1: 'fast:2' is not RATE:BURST"),
        ("remove t\n", "t.stf:1: only 'remove all' removes entries"),
    ];
    for (text, want) in cases {
        let e = stf::parse("t.stf", text).unwrap_err();
        assert!(e.starts_with(want), "{text:?}: {e}");
    }
}

/// p4c's corpus, read in place (never copied): `P4C_STF_DIR`, else `../shared/p4c-stf` beside
/// the repository.
fn corpus() -> Option<PathBuf> {
    let dir = std::env::var_os("P4C_STF_DIR").map(PathBuf::from).unwrap_or_else(|| repo("../shared/p4c-stf"));
    dir.is_dir().then_some(dir)
}

#[test]
fn every_script_of_p4cs_corpus_reads() {
    let Some(dir) = corpus() else {
        eprintln!("no p4c STF corpus at ../shared/p4c-stf (P4C_STF_DIR): skipped");
        return;
    };
    let mut scripts = 0;
    let mut words = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "stf") {
            continue;
        }
        let script = stf::parse(&path.display().to_string(), &read(&path)).unwrap_or_else(|e| panic!("{e}"));
        for (_, c) in &script.commands {
            words.insert(format!("{c:?}").split([' ', '{', '(']).next().unwrap().to_string());
        }
        scripts += 1;
    }
    assert!(scripts >= 230, "{scripts} scripts in {}", dir.display());
    // Every kind of command the corpus uses came out as itself.
    for w in ["Add", "Packet", "Expect", "McNodeCreate", "MirroringAddMc", "RegisterRead", "MeterSetRates", "Wait"] {
        assert!(words.contains(w), "{w} not read from the corpus: {words:?}");
    }
}

fn run_example(program: &str, script: &str) -> stf::Outcome {
    let mut switch = stf::load(program, &read(&repo(&format!("examples/p4/{program}")))).unwrap();
    let script = stf::parse(script, &read(&repo(&format!("crates/p4/tests/stf/{script}")))).unwrap();
    stf::run(&script, &mut switch, &mut stf::Software::default())
}

#[test]
fn the_l2_switch_meets_its_script_on_the_software_target() {
    let outcome = run_example("l2_switch.p4", "l2_switch.stf");
    assert_eq!(outcome.verdict, Verdict::Pass, "{}", outcome.render());
    // Four frames judged, two counter checks: nothing left unjudged.
    assert_eq!(outcome.checks.len(), 6, "{}", outcome.render());
    assert!(outcome.render().ends_with("PASS\n"));
}

#[test]
fn a_wrong_expectation_fails_with_its_port_and_the_bytes_that_left() {
    let outcome = run_example("l2_switch.p4", "l2_switch_wrong.stf");
    assert_eq!(outcome.verdict, Verdict::Fail, "{}", outcome.render());
    let failed: Vec<_> = outcome.checks.iter().filter(|c| !c.held).collect();
    assert_eq!(failed.len(), 1, "{}", outcome.render());
    assert_eq!(failed[0].line, 15);
    assert!(
        failed[0]
            .what
            .ends_with("port 2 sent 02000000000202000000000188b500112233445566778899aabbccddeeff (differs at byte 29)"),
        "{}",
        failed[0].what
    );
    assert_eq!(outcome.summary(), "FAIL 1 of 6 checks");
}

#[test]
fn the_router_meets_its_script_prefixes_written_both_ways() {
    let outcome = run_example("ipv4_router.p4", "ipv4_router.stf");
    assert_eq!(outcome.verdict, Verdict::Pass, "{}", outcome.render());
    assert_eq!(outcome.checks.len(), 5, "{}", outcome.render());
}

fn run_inline(program: &str, script: &str) -> (stf::Outcome, p4::backends::software::Switch) {
    let mut switch = stf::load("inline.p4", program).unwrap_or_else(|e| panic!("{e}"));
    let script = stf::parse("inline.stf", script).unwrap_or_else(|e| panic!("{e}"));
    (stf::run(&script, &mut switch, &mut stf::Software::default()), switch)
}

fn l2() -> String {
    read(&repo("examples/p4/l2_switch.p4"))
}

#[test]
fn a_frame_no_expectation_names_and_a_missing_one_both_fail() {
    let frame = "020000000002 020000000001 88b5 00";
    let script = format!(
        "add dmac vid:0 dst:0x020000000002 forward(port:2)\npacket 1 {frame}\npacket 1 {frame}\nexpect 2 {frame}\n"
    );
    let (outcome, _) = run_inline(&l2(), &script);
    assert_eq!(outcome.verdict, Verdict::Fail);
    let extra = outcome.checks.iter().find(|c| !c.held).unwrap();
    assert_eq!(extra.line, 3, "the second frame's packet line: {}", outcome.render());
    assert!(extra.what.starts_with("port 2 sent a frame no expect names: 020000000002"), "{}", extra.what);
    // `expect PORT` alone: that port may send anything.
    let (outcome, _) = run_inline(&l2(), &format!("{script}expect 2\n"));
    assert_eq!(outcome.verdict, Verdict::Pass, "{}", outcome.render());
    // A frame may be longer than its expectation, unless `$` ends the expectation.
    let one = "add dmac vid:0 dst:0x020000000002 forward(port:2)\npacket 1 020000000002 020000000001 88b5 00\n";
    let (outcome, _) = run_inline(&l2(), &format!("{one}expect 2 020000000002 020000000001 88b5\n"));
    assert_eq!(outcome.verdict, Verdict::Pass, "{}", outcome.render());
    let (outcome, _) = run_inline(&l2(), &format!("{one}expect 2 020000000002 020000000001 88b5 $\n"));
    assert!(
        outcome
            .render()
            .contains("port 2 sent 02000000000202000000000188b500 (15 bytes where the frame should end at 14)"),
        "{}",
        outcome.render()
    );
    // An expectation nothing meets.
    let (outcome, _) = run_inline(&l2(), &format!("{script}expect 2 {frame}\nexpect 2 {frame}\n"));
    assert!(outcome.render().contains("line 6: FAILED: expect 2 02000000000202000000000188b500: no frame left port 2"));
}

#[test]
fn names_resolve_by_suffix_and_keys_take_their_kind() {
    let (outcome, sw) = run_inline(
        &l2(),
        "add L2Ingress.dmac hdr.ethernet.dst:0x020000000002 meta.vid:0x00a L2Ingress.forward(port:7)\n\
         add vlan_allowed vid:3 NoAction()\n\
         add dmac dst:0x1 forward(port:1, speed:2)\n\
         add nosuch dst:0x1 forward(port:1)\n\
         add dmac nosuch:1 forward(port:1)\n\
         add dmac dst:0x1 flood(port:1)\n\
         add dmac st:0x1 forward(port:1)\n\
         setdefault dmac forward(port:4)\n",
    );
    let entries = sw.entries("L2Ingress.dmac").unwrap();
    assert_eq!(entries.len(), 1, "{}", outcome.render());
    // Written out of order, put in the key's order.
    assert_eq!(entries[0].keys, vec![Match::Exact(10), Match::Exact(0x020000000002)]);
    // A field left out: exact 0.
    assert_eq!(sw.entries("L2Ingress.vlan_allowed").unwrap()[0].keys, vec![Match::Exact(0), Match::Exact(3)]);
    assert_eq!(sw.default_action("L2Ingress.dmac"), Some(("forward", &[4u128][..])));
    let failed: Vec<(usize, &str)> =
        outcome.checks.iter().filter(|c| !c.held).map(|c| (c.line, c.what.as_str())).collect();
    assert_eq!(
        failed,
        vec![
            (3, "add: L2Ingress.forward has no parameter 'speed'"),
            (4, "add: no table 'nosuch'"),
            (5, "add: no key field of L2Ingress.dmac 'nosuch'"),
            (6, "add: L2Ingress.flood has no parameter 'port'"),
            // A suffix is whole dotted names: `st` is not `dst`.
            (7, "add: no key field of L2Ingress.dmac 'st'"),
        ]
    );
}

const COUNTING: &str = r#"
#include <core.p4>
#include <edgeflow.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers_t { ethernet_t ethernet; }
struct metadata_t { }
parser P(packet_in packet, out headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    state start { packet.extract(hdr.ethernet); transition accept; }
}
control I(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    register<bit<16>>(8) seen;
    action to(PortId_t port) { standard_metadata.egress_port = port; }
    table by_type {
        key = { hdr.ethernet.ether_type : ternary; hdr.ethernet.src : lpm; }
        actions = { to; NoAction; }
        default_action = NoAction();
    }
    apply {
        bit<16> n;
        seen.read(n, (bit<32>) standard_metadata.ingress_port);
        seen.write((bit<32>) standard_metadata.ingress_port, n + 1);
        by_type.apply();
        hdr.ethernet.ether_type = n;
    }
}
control E(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) { apply { } }
control D(packet_out packet, in headers_t hdr) { apply { packet.emit(hdr.ethernet); } }
EdgeflowSwitch(P(), I(), E(), D()) main;
"#;

#[test]
fn registers_are_written_read_and_reset_and_priorities_order_ternary_entries() {
    let (outcome, sw) = run_inline(
        COUNTING,
        "# Lower priority, more general: loses to the entry below wherever both match.\n\
         add by_type 1 ether_type:0x88** to(port:1)\n\
         add by_type 9 ether_type:0x88b5 src:0x02********** to(port:2)\n\
         register_write seen 3 0x41\n\
         packet 3 ffffffffffff 020000000001 88b5\n\
         expect 2 ffffffffffff 020000000001 0041 $\n\
         register_read seen 3\n\
         packet 3 ffffffffffff 010000000001 88b5\n\
         expect 1 ffffffffffff 010000000001 0042 $\n\
         register_reset seen\n\
         packet 3 ffffffffffff 020000000001 88b5\n\
         expect 2 ffffffffffff 020000000001 0000 $\n",
    );
    assert_eq!(outcome.verdict, Verdict::Pass, "{}", outcome.render());
    assert!(outcome.render().contains("line 7: ok: register seen[3] = 0x42"), "{}", outcome.render());
    assert_eq!(sw.register("I.seen", 3), Some(1));
    let e = sw.entries("I.by_type").unwrap();
    // 0x88**: a ternary mask of the digits written; 0x02**********: a /8 of 48 bits, the digits not * (as p4c's runner counts).
    assert_eq!(e[0].keys, vec![Match::Ternary { value: 0x8800, mask: 0xff00 }, Match::Any]);
    assert_eq!(e[1].keys[1], Match::Lpm { value: 0x02 << 40, prefix: 8 });
    assert_eq!((e[0].priority, e[1].priority), (1, 9));
}

#[test]
fn what_no_target_runs_yet_is_refused_at_its_line() {
    let (outcome, _) = run_inline(&l2(), "wait\nno_packet\npacket 1 00\n");
    assert_eq!(outcome.verdict, Verdict::Refused("line 2: no_packet is not run here".into()));
    // A program the front end refuses: the first line of why.
    let e = stf::load("v.p4", "#include <v1model.p4>\n").err().unwrap();
    assert!(e.starts_with("v.p4:1:1: the program has no 'main'") && !e.contains('\n'), "{e}");
}
