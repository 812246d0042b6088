//! The compiled software target (the mid end's IR run as closures, `backends/software/exec.rs`)
//! on p4c's STF corpus and on what the corpus lacks. For every corpus program the front end
//! takes: it compiles at load, its script passes, frames mutated from the script's run without
//! a panic or an unsupported construct, and two loads fed the same frames end alike. What the
//! corpus lacks (action profiles and selectors, direct meters, clones and the other passes,
//! PSA's externs and paths, the examples' counters and accounts) is driven here and checked
//! against what the P4 specification and BMv2 give, worked out by hand. The syntax-tree
//! evaluator these were once compared with is gone; the kernel back end is compared with this
//! target in `datapath/tests/p4_corpus.rs` and `p4_kernel.rs`.
//!
//! About 790 lines, one concern: the compiled target's results where the corpus's scripts do not reach.

use std::collections::BTreeMap;
use std::path::PathBuf;

use p4::backends::software::{Digest, Dropped, Indirect, Match, Output, Session, Switch};
use p4::stf::{self, corpus_dir, Sent, Target};

/// How many corpus programs run compiled today: it can only go up.
const COMPILED_FLOOR: usize = 218;

/// A frame sent, its port, and what the switch did with it.
type Sent1 = (Vec<u8>, u32, Result<Vec<Output>, Dropped>);

/// Records each frame sent and what the switch did with it, at a clock of its own.
#[derive(Default)]
struct Recorder {
    sent: Vec<Sent1>,
    digests: Vec<Vec<Digest>>,
}

impl Target for Recorder {
    fn send(&mut self, switch: &mut Switch, frame: &[u8], port: u32) -> Sent {
        let now = (self.sent.len() as u64 + 1) * 1_000_000;
        let result = switch.process(frame, port, now);
        self.sent.push((frame.to_vec(), port, result.clone()));
        self.digests.push(switch.take_digests());
        match result {
            Ok(outputs) => Sent::Out(outputs.into_iter().map(|o| (o.port, o.frame)).collect()),
            Err(Dropped::Unsupported(what)) => Sent::Unsupported(what),
            Err(_) => Sent::Out(Vec::new()),
        }
    }
}

/// Frames made from `frame`: each of its first 64 bytes changed three ways, and the frame cut
/// at a few lengths.
fn mutations(frame: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0..frame.len().min(64) {
        for x in [0x00u8, 0xff, frame[i] ^ 0x01] {
            if frame[i] != x {
                let mut f = frame.to_vec();
                f[i] = x;
                out.push(f);
            }
        }
    }
    for cut in [0, 1, 13, 14, 20, 33, 34, 41, 54] {
        if cut < frame.len() {
            out.push(frame[..cut].to_vec());
        }
    }
    out
}

fn counts(sw: &Switch) -> Vec<(String, Vec<(u64, u64)>)> {
    sw.tables().into_iter().map(|t| (t.clone(), sw.entry_counts(&t).unwrap_or_default())).collect()
}

/// Every corpus program the front end takes compiles at load (a floor that can only go up),
/// its script passes, and frames mutated from the script's (bytes changed, frames cut) run
/// without a panic or an unsupported construct; two loads of the program, given the same
/// frames at the same clock, end with the same table hits and counter, register, meter and
/// account cells (state kept nowhere but the switch). A frame that drives a `for` loop past
/// its bound is the one unsupported outcome allowed (the target refuses it by design). `--nocapture` prints the load refusals.
#[test]
fn the_corpus_compiles_passes_and_runs_mutated_frames() {
    let dir = corpus_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        panic!("{}: the p4c STF corpus is not there (set P4C_STF_DIR)", dir.display());
    };
    let mut scripts: Vec<PathBuf> =
        entries.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "stf")).collect();
    scripts.sort();
    let mut compiled = Vec::new();
    let mut wrong = Vec::new();
    let mut frames = 0usize;
    let mut refusals: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for script_path in &scripts {
        let name = script_path.file_stem().unwrap().to_string_lossy().into_owned();
        let program_path = script_path.with_extension("p4");
        let script_text = std::fs::read_to_string(script_path).unwrap();
        let program_text = std::fs::read_to_string(&program_path).unwrap_or_default();
        let script = stf::parse(&script_path.display().to_string(), &script_text).unwrap();
        let file = program_path.display().to_string();
        let (mut sw, mut again) = match (stf::load(&file, &program_text), stf::load(&file, &program_text)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(why), _) | (_, Err(why)) => {
                refusals.entry(why.chars().take(60).collect()).or_default().push(name);
                continue;
            }
        };
        compiled.push(name.clone());
        let (mut a, mut b) = (Recorder::default(), Recorder::default());
        let outcome = stf::run(&script, &mut sw, &mut a);
        stf::run(&script, &mut again, &mut b);
        let mut problems = Vec::new();
        if outcome.verdict != stf::Verdict::Pass {
            problems.push(format!("the script:\n{}", outcome.render()));
        }
        let mut now = 1u64 << 40;
        'mutated: for (frame, port, _) in &a.sent {
            for f in mutations(frame) {
                now += 1_000_000;
                frames += 1;
                let (ra, rb) = (sw.process(&f, *port, now), again.process(&f, *port, now));
                // A loop the frame drives past the bound is refused on that frame, by design.
                if let Err(Dropped::Unsupported(what)) = &ra {
                    if what.contains("for loop past") {
                        continue;
                    }
                    problems.push(format!("mutated frame {f:02x?} on port {port}: {what}"));
                    break 'mutated;
                }
                if ra != rb || sw.take_digests() != again.take_digests() {
                    problems.push(format!("mutated frame {f:02x?} on port {port}: two loads differ"));
                    break 'mutated;
                }
            }
        }
        if counts(&sw) != counts(&again) || sw.stateful_cells() != again.stateful_cells() {
            problems.push("two loads end with other hits or cells".to_string());
        }
        if !problems.is_empty() {
            wrong.push(format!("{name}:\n  {}", problems.join("\n  ")));
        }
    }
    println!("{} programs compiled, {frames} mutated frames run; refused at load, by kind:", compiled.len());
    for (why, names) in &refusals {
        println!("{:4}  {why}   (e.g. {})", names.len(), names[0]);
    }
    assert!(wrong.is_empty(), "{} program(s) wrong:\n{}", wrong.len(), wrong.join("\n"));
    assert!(compiled.len() >= COMPILED_FLOOR, "{} compiled, fewer than the floor {COMPILED_FLOOR}", compiled.len());
}

/// The programs edgeflow ships run compiled (the AFDX switch is the speed measure, issue 53).
#[test]
fn the_examples_run_compiled() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/p4");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "p4") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        // Loading compiles: a program the IR does not take is refused here.
        stf::load(&path.display().to_string(), &text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        seen += 1;
    }
    assert!(seen >= 5, "{seen} examples");
}

/// Runs `frames` (and frames mutated from them), a `gap` of ns apart, through the example
/// `program` set up by `fill`, compiled; a frame the target refuses as unsupported fails. Returns the
/// switch's counter, register, meter and account cells, for the caller to check what counted.
fn example_runs(program: &str, fill: impl Fn(&mut Switch), frames: &[Vec<u8>], gap: u64) -> Vec<(String, Vec<u128>)> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/p4").join(program);
    let text = std::fs::read_to_string(&path).unwrap();
    program_runs(program, &text, fill, frames, gap)
}

/// `example_runs` for the program `text`, named `name`.
fn program_runs(
    name: &str,
    text: &str,
    fill: impl Fn(&mut Switch),
    frames: &[Vec<u8>],
    gap: u64,
) -> Vec<(String, Vec<u128>)> {
    let mut sw = stf::load(name, text).unwrap_or_else(|e| panic!("{name}: {e}"));
    fill(&mut sw);
    let mut now = 0;
    for frame in frames {
        for f in std::iter::once(frame.clone()).chain(mutations(frame)) {
            now += gap;
            if let Err(Dropped::Unsupported(what)) = sw.process(&f, 1, now) {
                panic!("{name}: frame {f:02x?}: {what}");
            }
        }
    }
    sw.stateful_cells()
}

/// The corpus runs almost no counter, register or meter compiled (two programs' registers):
/// the examples' counters and AFDX accounts, driven here, are where a wrong count shows.
#[test]
fn the_examples_count_and_police() {
    // The v1model router: routes of three lengths, frames to each and to none, TTLs 64 and 1.
    let routes = [(0x0a00_0000u128, 8u32, 3u128), (0x0a00_0200, 24, 2), (0x0a00_0202, 32, 4)];
    let fill = |sw: &mut Switch| {
        for (value, prefix, port) in routes {
            let keys = vec![Match::Lpm { value, prefix }];
            sw.insert("RouterIngress.ipv4_lpm", keys, "ipv4_forward", vec![0x0200_0000_0000 + port, port], 0).unwrap();
        }
    };
    let mut frames = Vec::new();
    for (dst, ttl) in
        [(0x0a00_0202u32, 64u8), (0x0a00_0203, 64), (0x0a01_0101, 64), (0x0b00_0001, 64), (0x0a00_0202, 1)]
    {
        let mut f = vec![2, 0, 0, 0, 0, 0xfe, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        let mut ip = vec![0x45, 0, 0, 46, 0, 0, 0, 0, ttl, 17, 0, 0, 10, 0, 1, 2];
        ip.extend(dst.to_be_bytes());
        let sum: u32 = ip.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
        let folded = (sum & 0xffff) + (sum >> 16);
        ip[10..12].copy_from_slice(&(!((folded & 0xffff) + (folded >> 16)) as u16).to_be_bytes());
        f.extend(ip);
        f.resize(60, 0);
        frames.push(f);
    }
    let cells = example_runs("v1model_router.p4", fill, &frames, 1_000);
    let routed = &cells.iter().find(|(n, _)| n.contains("routed")).unwrap().1;
    assert!(routed[4] > 0 && routed[6] > 0 && routed[8] > 0, "each route counted: {routed:?}");

    // The AFDX switch: four links (BAG 1 ms), frames 100 µs apart, so that most are policed.
    let fill = |sw: &mut Switch| {
        sw.set_group(1, vec![2, 3]);
        for vl in 0..4u128 {
            let keys = vec![Match::Exact(1), Match::Exact(vl)];
            let args = vec![1, 7, vl, 1000, 0, 64, 1518];
            sw.insert("AfdxIngress.tbl_forward_virtual_link", keys, "forward", args, 0).unwrap();
        }
    };
    let mut frames = Vec::new();
    for i in 0..12u16 {
        let mut f = vec![3, 0, 0, 0, 0, (i % 4) as u8, 2, 0, 0, 0, 1, 0x20, 0x08, 0x00, 0x45];
        f.resize(100, 0);
        frames.push(f);
    }
    let cells = example_runs("afdx_switch.p4", fill, &frames, 100_000);
    let policed = &cells.iter().find(|(n, _)| n.contains("policed")).unwrap().1;
    assert!(policed.iter().step_by(2).sum::<u128>() > 0, "nothing policed: {policed:?}");
}

/// Where the syntax-tree evaluator (removed since) and the IR parted, and the IR is right: an `inout` argument
/// `tags[i]` is copied back to the element `i` named when the action was called, though the
/// action moves `i` (P4-16 6.8: "for each out and inout argument the corresponding l-value is
/// saved"; p4c keeps such an index in a temporary before the call). The evaluator, and the
/// kernel back end after it, took the index again after the action.
#[test]
fn an_inout_argument_goes_back_to_the_element_its_index_named_at_the_call() {
    let text = "#include <core.p4>\n#include <edgeflow.p4>\n\
        header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }\n\
        header tag_t { bit<8> value; }\n\
        struct headers { eth_t eth; tag_t[2] tags; }\nstruct meta_t { bit<8> unused; }\n\
        parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          state start { packet.extract(hdr.eth); packet.extract(hdr.tags.next); packet.extract(hdr.tags.next); transition accept; } }\n\
        control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          action bump(inout bit<8> v) { v = 0x33; hdr.eth.dst[0:0] = 1; }\n\
          apply { sm.egress_port = 2; bump(hdr.tags[hdr.eth.dst[0:0]].value); } }\n\
        control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }\n\
        control D(packet_out packet, in headers hdr) { apply { packet.emit(hdr); } }\n\
        EdgeflowSwitch(P(), I(), E(), D()) main;\n";
    let mut frame = vec![2, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 1, 0x88, 0xb5, 0x0a, 0x0b];
    frame.resize(60, 0);
    let mut compiled = stf::load("copy_out.p4", text).unwrap();
    let out = compiled.process(&frame, 1, 0).unwrap();
    assert_eq!((out[0].frame[5], out[0].frame[14], out[0].frame[15]), (1, 0x33, 0x0b), "tags[0] written back");
}

/// Two more of the mid end review's open questions, settled by a run: `(bit<32>)` of an
/// `int<8>` sign-extends (p4c and BMv2 widen in the source's signedness first), and a shift by
/// an amount past the width gives 0 (P4-16 8.5), on the compiled target as the IR says. The
/// evaluator zero-extended, and cut the amount 256 to the operand's 8 bits (a shift by 0).
#[test]
fn a_signed_cast_widens_by_its_sign_and_a_shift_past_the_width_gives_zero() {
    let text = "#include <core.p4>\n#include <edgeflow.p4>\n\
        header h_t { bit<8> a; bit<32> b; bit<8> c; }\n\
        struct headers { h_t h; }\nstruct meta_t { bit<8> unused; }\n\
        parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          state start { packet.extract(hdr.h); transition accept; } }\n\
        control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          apply { sm.egress_port = 2; int<8> x = (int<8>)hdr.h.a; hdr.h.b = (bit<32>)x; hdr.h.c = hdr.h.c << 256; } }\n\
        control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }\n\
        control D(packet_out packet, in headers hdr) { apply { packet.emit(hdr); } }\n\
        EdgeflowSwitch(P(), I(), E(), D()) main;\n";
    let mut frame = vec![0xf0, 0, 0, 0, 0, 0x81];
    frame.resize(20, 0);
    let mut compiled = stf::load("casts.p4", text).unwrap();
    let out = compiled.process(&frame, 1, 0).unwrap();
    assert_eq!(&out[0].frame[..6], &[0xf0, 0xff, 0xff, 0xff, 0xf0, 0x00]);
}

/// `|+|` and `|-|` at 128 bits saturate on both paths: the sum of two int<128> or bit<128>
/// values does not fit an i128 or u128, and was computed as if it did (a panic in a debug
/// build, a wrapped result in a release build).
#[test]
fn saturating_arithmetic_at_128_bits_saturates() {
    let text = "#include <core.p4>\n#include <edgeflow.p4>\n\
        header h_t { bit<128> a; bit<128> b; bit<128> c; }\n\
        struct headers { h_t h; }\nstruct meta_t { bit<8> unused; }\n\
        parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          state start { packet.extract(hdr.h); transition accept; } }\n\
        control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          apply { sm.egress_port = 2; int<128> x = (int<128>)hdr.h.a;\n\
                  hdr.h.a = (bit<128>)(x |+| 1); hdr.h.b = (bit<128>)(-x |-| 2); hdr.h.c = hdr.h.c |+| hdr.h.c; } }\n\
        control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }\n\
        control D(packet_out packet, in headers hdr) { apply { packet.emit(hdr); } }\n\
        EdgeflowSwitch(P(), I(), E(), D()) main;\n";
    // a = the largest int<128>, c = the largest bit<128> but one.
    let mut frame = vec![0x7f];
    frame.extend([0xff; 15]);
    frame.extend([0; 16]);
    frame.extend([0xff; 15]);
    frame.push(0xfe);
    let (max, min) = (i128::MAX as u128, i128::MIN as u128);
    let mut want = max.to_be_bytes().to_vec();
    want.extend(min.to_be_bytes());
    want.extend(u128::MAX.to_be_bytes());
    let mut sw = stf::load("saturate.p4", text).unwrap();
    let out = sw.process(&frame, 1, 0).unwrap();
    assert_eq!(&out[0].frame[..48], &want[..]);
}

/// P4-16 8.18: in a parser, `hs.last` with `nextIndex` 0 (and `hs.next` with the stack full)
/// sends the parser to reject with error.StackOutOfBounds, whether the field is read or
/// `hs.last.isValid()` asked. The compiled target once read 0 (and answered false) and went on.
#[test]
fn a_parser_reading_last_of_an_empty_stack_rejects() {
    for (name, select) in [
        ("last.p4", "hdr.tags.last.value) { 0: accept; default: accept; }"),
        ("last_valid.p4", "hdr.tags.last.isValid()) { true: accept; default: accept; }"),
    ] {
        let text = format!(
            "#include <core.p4>\n#include <edgeflow.p4>\n\
            header eth_t {{ bit<48> dst; bit<48> src; bit<16> kind; }}\n\
            header tag_t {{ bit<8> value; }}\n\
            struct headers {{ eth_t eth; tag_t[2] tags; }}\nstruct meta_t {{ bit<8> unused; }}\n\
            parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{\n\
              state start {{ packet.extract(hdr.eth); transition select(hdr.eth.kind) {{ 0x88b5: one; default: none; }} }}\n\
              state one {{ packet.extract(hdr.tags.next); transition none; }}\n\
              state none {{ transition select({select} }} }}\n\
            control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{ apply {{ sm.egress_port = 2; }} }}\n\
            control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{ apply {{ }} }}\n\
            control D(packet_out packet, in headers hdr) {{ apply {{ packet.emit(hdr); }} }}\n\
            EdgeflowSwitch(P(), I(), E(), D()) main;\n"
        );
        let mut with_tag = vec![2, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 1, 0x88, 0xb5, 0x0a];
        with_tag.resize(60, 0);
        let mut without = with_tag.clone();
        without[13] = 0xb6;
        let mut sw = stf::load(name, &text).unwrap();
        assert_eq!(sw.process(&with_tag, 1, 0).map(|o| o.len()), Ok(1), "{name}");
        assert_eq!(sw.process(&without, 1, 0), Err(Dropped::Parser("StackOutOfBounds".into())), "{name}");
    }
}

/// A statement reading past a stack's end rejects before it runs (P4-16 8.18), so it writes
/// nothing: v1model goes on to ingress after a parser error, and the frame goes out with its
/// type as it came. The compiled target wrote 0 first, then rejected.
#[test]
fn a_parser_statement_reading_past_a_stacks_end_writes_nothing() {
    let text = "#include <core.p4>\n#include <v1model.p4>\n\
        header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }\n\
        header tag_t { bit<8> value; }\n\
        struct headers { eth_t eth; tag_t[2] tags; }\nstruct meta_t { bit<8> unused; }\n\
        parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          state start { packet.extract(hdr.eth); hdr.eth.kind = (bit<16>)hdr.tags.last.value; transition accept; } }\n\
        control V(inout headers hdr, inout meta_t meta) { apply { } }\n\
        control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { sm.egress_spec = 2; } }\n\
        control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }\n\
        control C(inout headers hdr, inout meta_t meta) { apply { } }\n\
        control D(packet_out packet, in headers hdr) { apply { packet.emit(hdr); } }\n\
        V1Switch(P(), V(), I(), E(), C(), D()) main;\n";
    let mut frame = vec![2, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 1, 0x88, 0xb6];
    frame.resize(60, 0);
    let mut sw = stf::load("last_write.p4", text).unwrap();
    let out = sw.process(&frame, 1, 0).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].frame[12..14], [0x88, 0xb6]);
}

/// P4-16 8.22: `setValid()` or `setInvalid()` on a stack element whose index is out of range
/// "must not change any state": the frame goes on as it was. The compiled target did so; the
/// evaluator dropped the frame (error.StackOutOfBounds).
#[test]
fn set_valid_past_a_stacks_end_changes_nothing() {
    let text = "#include <core.p4>\n#include <edgeflow.p4>\n\
        header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }\n\
        header tag_t { bit<8> value; }\n\
        struct headers { eth_t eth; tag_t[2] tags; }\nstruct meta_t { bit<8> unused; }\n\
        parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          state start { packet.extract(hdr.eth); transition accept; } }\n\
        control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          apply { sm.egress_port = 2; hdr.tags[hdr.eth.dst[1:0]].setValid(); hdr.tags[hdr.eth.dst[1:0]].value = 7; } }\n\
        control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }\n\
        control D(packet_out packet, in headers hdr) { apply { packet.emit(hdr); } }\n\
        EdgeflowSwitch(P(), I(), E(), D()) main;\n";
    // Index 3 of a stack of 2, then index 1.
    let mut past = vec![2, 0, 0, 0, 0, 3, 2, 0, 0, 0, 0, 1, 0x88, 0xb5];
    past.resize(60, 0);
    let mut within = past.clone();
    within[5] = 1;
    let mut sw = stf::load("set_valid.p4", text).unwrap();
    let out = sw.process(&past, 1, 0).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(out[0].frame, past);
    let out = sw.process(&within, 1, 0).unwrap();
    // tags[1] made valid and written: emitted after the Ethernet header.
    assert_eq!((out[0].frame.len(), out[0].frame[14]), (61, 7));
}

/// A v1model ECMP program: `ecmp` picks a member of a group of `paths` by the CRC-16 of the
/// IPv4 addresses (its `selector` keys) after an exact match on the EtherType; `nexthop` has an
/// action profile of its own, whose action writes the frame.
const ECMP: &str = r#"
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header ipv4_t { bit<32> src; bit<32> dst; }
struct headers { ethernet_t ethernet; ipv4_t ipv4; }
struct metadata { }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.ethernet); pkt.extract(hdr.ipv4); transition accept; }
}
control V(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action to(PortId_t port) { sm.egress_spec = port; }
    action mark(PortId_t port, bit<48> src) { sm.egress_spec = port; hdr.ethernet.src = src; }
    action drop() { mark_to_drop(sm); }
    @max_group_size(8) action_selector(HashAlgorithm.crc16, 32w64, 32w16) paths;
    table ecmp {
        key = { hdr.ethernet.ether_type : exact; hdr.ipv4.src : selector; hdr.ipv4.dst : selector; }
        actions = { to; mark; drop; }
        default_action = drop();
        implementation = paths;
    }
    table nexthop {
        key = { hdr.ethernet.dst : exact; }
        actions = { to; mark; NoAction; }
        implementation = action_profile(32w8);
    }
    apply { if (!ecmp.apply().hit) { nexthop.apply(); } }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

/// Action profiles and selectors are outside the corpus: members, weighted groups, an empty
/// group (a miss), a one-shot action set and a plain profile's members, compiled: the
/// group's frames spread over its members' ports, and the frames mutated from them run.
#[test]
fn tables_with_action_profiles_and_selectors_run_compiled() {
    let fill = |sw: &mut Switch| {
        for (member, port) in [(1, 1), (2, 2), (3, 3)] {
            sw.set_member("I.paths", member, "to", vec![port], true).unwrap();
        }
        sw.set_member("I.paths", 4, "mark", vec![4, 0x0200_0000_0044], true).unwrap();
        sw.set_profile_group("I.paths", 10, vec![(3, 1), (1, 2), (4, 1), (2, 1)], 0, true).unwrap();
        sw.set_profile_group("I.paths", 11, vec![], 0, true).unwrap();
        sw.insert_indirect("I.ecmp", vec![Match::Exact(0x0800)], Indirect::Group(10), 0).unwrap();
        sw.insert_indirect("I.ecmp", vec![Match::Exact(0x0801)], Indirect::Group(11), 0).unwrap();
        sw.insert_indirect("I.ecmp", vec![Match::Exact(0x0802)], Indirect::Member(2), 0).unwrap();
        let set = vec![("to".to_string(), vec![5], 1), ("mark".to_string(), vec![6, 0x0200_0000_0066], 3)];
        sw.insert_indirect("I.ecmp", vec![Match::Exact(0x0803)], Indirect::ActionSet(set), 0).unwrap();
        sw.set_member("I.nexthop", 5, "mark", vec![7, 0x0200_0000_0077], true).unwrap();
        sw.insert_indirect("I.nexthop", vec![Match::Exact(0)], Indirect::Member(5), 0).unwrap();
    };
    let mut frames = Vec::new();
    for (flow, kind) in (0..24u32).zip([0x0800u16, 0x0801, 0x0802, 0x0803, 0x86dd, 0x0800].into_iter().cycle()) {
        let mut f = vec![0u8; 12];
        f.extend(kind.to_be_bytes());
        f.extend((0x0a00_0000 + flow * 7).to_be_bytes());
        f.extend(0x0b00_0001u32.to_be_bytes());
        frames.push(f);
    }
    program_runs("ecmp.p4", ECMP, fill, &frames, 1_000);
    // Something was spread: the group's frames leave on more than one port.
    let mut sw = stf::load("ecmp.p4", ECMP).unwrap();
    fill(&mut sw);
    let ports: std::collections::BTreeSet<u32> =
        frames.iter().filter_map(|f| sw.process(f, 1, 0).ok()).map(|o| o[0].port).collect();
    assert!(ports.len() >= 5, "ports {ports:?}");
}

/// A direct meter is outside the corpus: each entry's cell marks the frames its entry hits, the
/// action reads the colour, a miss reads green; frames 100 µs apart, so that the buckets run
/// dry and fill again: all three colours seen.
#[test]
fn a_tables_direct_meter_marks_compiled() {
    let text = "#include <core.p4>\n#include <edgeflow.p4>\n\
        header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }\n\
        struct headers { eth_t eth; }\nstruct meta_t { bit<8> unused; }\n\
        parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          state start { packet.extract(hdr.eth); transition accept; } }\n\
        control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          direct_meter<bit<2>>(MeterType.bytes) dm;\n\
          action fwd(PortId_t p) { bit<2> colour; dm.read(colour); sm.egress_port = p;\n\
            sm.priority = (bit<3>) colour; hdr.eth.kind = (bit<16>) colour; if (colour == 2) { mark_to_drop(sm); } }\n\
          table t { key = { hdr.eth.dst : ternary; } actions = { fwd; } default_action = fwd(9); meters = dm; }\n\
          apply { t.apply(); } }\n\
        control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }\n\
        control D(packet_out packet, in headers hdr) { apply { packet.emit(hdr); } }\n\
        EdgeflowSwitch(P(), I(), E(), D()) main;\n";
    let fill = |sw: &mut Switch| {
        for (last, port) in [(0xa, 2), (0xb, 3), (0xc, 4)] {
            let keys = vec![Match::Ternary { value: 0x0200_0000_0000 + last, mask: 0xffff_ffff_ffff }];
            sw.insert("I.t", keys, "fwd", vec![port], 1).unwrap();
        }
        // Entry a: a burst of about two frames committed, three peak, refilled slowly; entry c
        // generous; entry b never set (green).
        let a = [Match::Ternary { value: 0x0200_0000_000a, mask: 0xffff_ffff_ffff }];
        sw.set_entry_meter("I.t", &a, 1, [100_000, 130, 200_000, 200]).unwrap();
        let c = [Match::Ternary { value: 0x0200_0000_000c, mask: 0xffff_ffff_ffff }];
        sw.set_entry_meter("I.t", &c, 1, [10_000_000, 10_000, 20_000_000, 20_000]).unwrap();
    };
    let mut frames = Vec::new();
    for i in 0..18u8 {
        let mut f = vec![2, 0, 0, 0, 0, [0xa, 0xa, 0xb, 0xc, 0xa, 0xd][i as usize % 6], 2, 0, 0, 0, 0, 1, 0x88, 0xb5];
        f.resize(60, i);
        frames.push(f);
    }
    program_runs("direct_meter.p4", text, fill, &frames, 100_000);
    // Colours seen: green, yellow and red (dropped) all among the frames to entry a.
    let mut sw = stf::load("direct_meter.p4", text).unwrap();
    fill(&mut sw);
    let colours: std::collections::BTreeSet<Option<u8>> =
        frames.iter().map(|f| sw.process(f, 1, 0).ok().map(|o| o[0].queue)).collect();
    assert_eq!(colours.len(), 3, "colours {colours:?}");
}

/// A v1model program that asks for every kind of pass: by the EtherType's low byte, an
/// ingress clone (to a session with a port, a group, replicas and a cut), a resubmission, a
/// multicast group, recirculation until egress has counted three, an egress clone, and a
/// `truncate`; egress writes what it saw (instance type, replication id, port) into the frame.
const PASSES: &str = r#"
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header seen_t { bit<8> instance; bit<8> rid; bit<8> port; bit<8> passes; bit<8> meta; }
struct headers { ethernet_t ethernet; seen_t seen; }
struct metadata { bit<8> mark; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.ethernet); meta.mark = 0x11; pkt.extract(hdr.seen); transition accept; }
}
control V(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    counter(8, CounterType.packets_and_bytes) ingress_runs;
    apply {
        ingress_runs.count((bit<32>) sm.instance_type);
        sm.egress_spec = 2;
        bit<8> how = hdr.ethernet.ether_type[7:0];
        if (how == 1) { clone(CloneType.I2E, 8); }
        if (how == 2 && sm.instance_type == 0) { resubmit_preserving_field_list(0); }
        if (how == 3) { sm.mcast_grp = 5; }
        if (how == 6) { clone_preserving_field_list(CloneType.I2E, 9, 0); mark_to_drop(sm); }
        meta.mark = meta.mark + 1;
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    counter(8, CounterType.packets_and_bytes) egress_runs;
    apply {
        egress_runs.count((bit<32>) sm.instance_type);
        bit<8> how = hdr.ethernet.ether_type[7:0];
        hdr.seen.instance = (bit<8>) sm.instance_type;
        hdr.seen.rid = (bit<8>) sm.egress_rid;
        hdr.seen.port = (bit<8>) sm.egress_port;
        hdr.seen.meta = meta.mark;
        if (how == 4 && hdr.seen.passes < 3) {
            hdr.seen.passes = hdr.seen.passes + 1;
            recirculate_preserving_field_list(0);
        }
        if (how == 5 && sm.instance_type == 0) { clone(CloneType.E2E, 9); }
        if (how == 7) { truncate(20); }
        if (how == 8 && sm.instance_type == 0) { clone(CloneType.E2E, 8); mark_to_drop(sm); }
    }
}
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.seen); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

/// Clones, resubmission, recirculation and truncation are outside the corpus but for one
/// program: each kind of pass, with clone sessions of each shape, compiled, runs each kind of
/// copy through the block it goes to.
#[test]
fn clones_resubmission_recirculation_and_truncation_run_compiled() {
    let fill = |sw: &mut Switch| {
        sw.set_replicas(5, vec![(3, 1), (4, 2), (3, 7)]);
        let session =
            Session { port: Some(6), group: Some(5), replicas: vec![(7, 9)], truncate: Some(18), ..Default::default() };
        sw.set_clone_session(8, session);
        sw.set_clone_session(9, Session { port: Some(9), class_of_service: 3, ..Default::default() });
    };
    let mut frames = Vec::new();
    for how in 0..9u8 {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x88, how, 0, 0, 0, 0, 0];
        f.resize(40, how);
        frames.push(f);
    }
    let cells = program_runs("passes.p4", PASSES, fill, &frames, 1_000);
    // Every kind of copy ran: normal frames, ingress and egress clones and replicas through
    // egress, recirculated and resubmitted frames through ingress.
    let egress = &cells.iter().find(|(n, _)| n.contains("egress_runs")).unwrap().1;
    for instance in [0, 1, 2, 5] {
        assert!(egress[2 * instance] > 0, "instance {instance} ran egress: {egress:?}");
    }
    let ingress = &cells.iter().find(|(n, _)| n.contains("ingress_runs")).unwrap().1;
    for instance in [4, 6] {
        assert!(ingress[2 * instance] > 0, "instance {instance} ran ingress: {ingress:?}");
    }
}

/// What of PSA the corpus does not run (`Checksum`, `Random`, `Digest`, `InternetChecksum`'s
/// state, which is the frame's, the `psa_*` functions on the output metadata, the metadata a
/// deparser hands a later pass: `normal_meta`, `clone_e2e_meta`, `recirculate_meta`; an I2E
/// clone cut by its session, an E2E clone, a recirculation), run compiled, the frames mutated
/// from them too: the copies say what each path did.
#[test]
fn psa_externs_and_paths_the_corpus_does_not_run() {
    let text = "#include <core.p4>\n#include <psa.p4>\n\
        header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }\n\
        header info_t { bit<16> crc; bit<8> rnd; bit<8> bridged; bit<8> path; bit<8> flags; bit<16> sum; }\n\
        struct headers { eth_t eth; info_t info; }\n\
        struct meta_t { bit<8> unused; }\nstruct bridge_t { bit<8> tag; }\nstruct empty_t { }\n\
        struct e2e_t { bit<8> tag; }\nstruct recirc_t { bit<8> tag; }\n\
        struct learn_t { bit<48> src; bit<16> kind; bool clone; }\n\
        parser IP(packet_in p, out headers h, inout meta_t m, in psa_ingress_parser_input_metadata_t istd,\n\
                  in empty_t r, in recirc_t rc) {\n\
          state start { p.extract(h.eth); p.extract(h.info); h.info.flags = h.info.flags | rc.tag; transition accept; } }\n\
        control IG(inout headers h, inout meta_t m, in psa_ingress_input_metadata_t istd,\n\
                   inout psa_ingress_output_metadata_t ostd) {\n\
          Checksum<bit<16>>(PSA_HashAlgorithm_t.CRC16) crc;\n\
          Random<bit<8>>(10, 20) rng;\n\
          Digest<learn_t>() learn;\n\
          InternetChecksum() ck;\n\
          action send(PortId_t port) { ostd.drop = false; ostd.egress_port = port; }\n\
          table fwd { key = { h.eth.dst[7:0] : exact; } actions = { send; NoAction; } }\n\
          apply {\n\
            crc.clear(); crc.update(h.eth.src); crc.update({h.eth.kind});\n\
            h.info.crc = crc.get();\n\
            h.info.rnd = rng.read();\n\
            ck.add({h.eth.dst});\n\
            ck.set_state(ck.get_state() ^ 0x0100);\n\
            ck.subtract({16w1});\n\
            h.info.sum = ck.get();\n\
            fwd.apply();\n\
            if (h.eth.dst[11:11] == 1 && istd.packet_path != PSA_PacketPath_t.RECIRCULATE) {\n\
              ostd.egress_port = PSA_PORT_RECIRCULATE; }\n\
            if (h.eth.dst[8:8] == 1) { ostd.clone = true; ostd.clone_session_id = 5; }\n\
            learn_t l = { h.eth.src, h.eth.kind, ostd.clone };\n\
            if (h.eth.dst[9:9] == 1) { learn.pack(l); }\n\
          } }\n\
        control ID(packet_out p, out empty_t c, out empty_t r, out bridge_t nm, inout headers h, in meta_t m,\n\
                   in psa_ingress_output_metadata_t istd) {\n\
          apply {\n\
            if (psa_normal(istd)) { nm.tag = 0x5a; h.info.flags = h.info.flags | 1; }\n\
            if (psa_clone_i2e(istd)) { h.info.flags = h.info.flags | 2; }\n\
            if (psa_resubmit(istd)) { h.info.flags = h.info.flags | 0x40; }\n\
            p.emit(h);\n\
          } }\n\
        parser EP(packet_in p, out headers h, inout meta_t m, in psa_egress_parser_input_metadata_t istd,\n\
                  in bridge_t nm, in empty_t c, in e2e_t ce) {\n\
          state start { p.extract(h.eth); p.extract(h.info); h.info.bridged = nm.tag | ce.tag; transition accept; } }\n\
        control EG(inout headers h, inout meta_t m, in psa_egress_input_metadata_t istd,\n\
                   inout psa_egress_output_metadata_t ostd) {\n\
          apply {\n\
            if (istd.packet_path == PSA_PacketPath_t.NORMAL_UNICAST) { h.info.path = 1; }\n\
            else if (istd.packet_path == PSA_PacketPath_t.CLONE_I2E) { h.info.path = 3; }\n\
            else if (istd.packet_path == PSA_PacketPath_t.CLONE_E2E) { h.info.path = 4; }\n\
            if (istd.packet_path == PSA_PacketPath_t.NORMAL_UNICAST && h.eth.dst[10:10] == 1) {\n\
              ostd.clone = true; ostd.clone_session_id = 6; }\n\
          } }\n\
        control ED(packet_out p, out e2e_t ce, out recirc_t rc, inout headers h, in meta_t m,\n\
                   in psa_egress_output_metadata_t istd, in psa_egress_deparser_input_metadata_t edstd) {\n\
          apply {\n\
            if (psa_clone_e2e(istd)) { h.info.flags = h.info.flags | 8; }\n\
            if (psa_recirculate(istd, edstd)) { h.info.flags = h.info.flags | 0x10; }\n\
            ce.tag = 0x6b; rc.tag = 0x20;\n\
            p.emit(h);\n\
          } }\n\
        IngressPipeline(IP(), IG(), ID()) ip;\n\
        EgressPipeline(EP(), EG(), ED()) ep;\n\
        PSA_Switch(ip, PacketReplicationEngine(), ep, BufferingQueueingEngine()) main;\n";
    let fill = |sw: &mut Switch| {
        for port in [2u128, 3] {
            sw.insert("IG.fwd", vec![Match::Exact(port)], "send", vec![port], 0).unwrap();
        }
        let session = |port, truncate| p4::backends::software::Session {
            port: Some(port),
            group: None,
            replicas: Vec::new(),
            class_of_service: 0,
            truncate,
        };
        sw.set_clone_session(5, session(7, Some(20)));
        sw.set_clone_session(6, session(8, None));
    };
    // dst's last byte: the port (2 and 3 in the table, 4 not); bit 8 clones I2E, bit 9 sends a
    // digest, bit 10 clones E2E, bit 11 recirculates.
    let frames: Vec<Vec<u8>> = [0x0002u16, 0x0103, 0x0202, 0x0403, 0x0704, 0x0004, 0x0802]
        .iter()
        .map(|d| {
            let mut f = vec![0, 0, 0, 0, (d >> 8) as u8, *d as u8, 2, 0, 0, 0, 0, 1, 0x88, 0xb5];
            f.resize(40, 0);
            f
        })
        .collect();
    type Seen = (Result<Vec<Output>, Dropped>, Vec<Digest>);
    let mut sw = stf::load("psa_paths.p4", text).unwrap();
    fill(&mut sw);
    let mut seen = Vec::new();
    let mut now = 0;
    for frame in &frames {
        for f in std::iter::once(frame.clone()).chain(mutations(frame)) {
            now += 1_000_000;
            seen.push((sw.process(&f, 1, now), sw.take_digests()));
        }
    }
    let a = &seen;
    // Each of the two table entries hit by the frames to its port, and only by them.
    let hits = sw.entry_counts("IG.fwd").unwrap();
    assert!(hits.iter().all(|&(packets, _)| packets > 0), "hits {hits:?}");

    // What the paths did, on the STF-like frames (each the first of its run of mutations).
    let firsts: Vec<&Seen> = {
        let mut at = 0;
        frames
            .iter()
            .map(|f| {
                let first = &a[at];
                at += 1 + mutations(f).len();
                first
            })
            .collect()
    };
    // Each copy's port, and what info_t says: bridged, path, flags.
    let info = |o: &Output| (o.port, o.frame[17], o.frame[18], o.frame[19]);
    // Unicast to 2: bridged 0x5a, NORMAL_UNICAST, psa_normal; a random number in [10, 20].
    let out = firsts[0].0.as_ref().unwrap();
    assert_eq!(out.iter().map(info).collect::<Vec<_>>(), [(2, 0x5a, 1, 1)]);
    assert!((10..=20).contains(&out[0].frame[16]), "random {}", out[0].frame[16]);
    // The I2E clone: the frame as it came (flags 0), cut to 20 bytes, to port 7; then the copy.
    let out = firsts[1].0.as_ref().unwrap();
    assert_eq!((out[0].port, out[0].frame.len()), (7, 20));
    assert_eq!(info(&out[1]), (3, 0x5a, 1, 3));
    // The InternetChecksum starts each frame clear (psa.p4: "once for each time the parser or
    // control it is instantiated within is executed"): dst's words, the state's bit 8 flipped,
    // 1 taken away, complemented (a sum carried on from the last frame gives other bytes).
    assert_eq!(firsts[0].0.as_ref().unwrap()[0].frame[20..22], [0xfe, 0xfe]);
    assert_eq!(out[1].frame[20..22], [0xff, 0xfd]);
    // A digest: src, kind and the clone flag; the E2E clone (path 4, flags 8 from psa_clone_e2e
    // on the unicast copy, which set it) to port 8 after the unicast copy, with the
    // clone_e2e_meta the egress deparser wrote (0x6b).
    assert_eq!(firsts[2].1.len(), 1);
    assert_eq!(firsts[2].1[0].data, vec![0x0200_0000_0001, 0x88b5, 0]);
    let out = firsts[3].0.as_ref().unwrap();
    assert_eq!(out.iter().map(info).collect::<Vec<_>>(), [(3, 0x5a, 1, 9), (8, 0x6b, 4, 9)]);
    // No table entry for port 4: dropped, its clone and digest still made.
    assert_eq!(firsts[4].0.as_ref().unwrap().iter().map(|o| o.port).collect::<Vec<_>>(), [7]);
    assert_eq!(firsts[4].1[0].data[2], 1);
    assert_eq!(firsts[5].0, Err(Dropped::Program));
    // Recirculated once (psa_recirculate's 0x10), its recirculate_meta (0x20) read by the
    // ingress parser, then out to port 2.
    assert_eq!(firsts[6].0.as_ref().unwrap().iter().map(info).collect::<Vec<_>>(), [(2, 0x5a, 1, 0x31)]);
}
