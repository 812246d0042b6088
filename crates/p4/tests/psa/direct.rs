//! PSA's direct externs on the software target (issue 52): a table's `psa_direct_counter` and
//! `psa_direct_meter`. Unlike v1model's, they act only where the matched entry's action calls
//! them (`DirectCounter.count()`, `DirectMeter.execute()`, PSA 7.7 and 7.8), each entry with its
//! own cell; P4Info ties them to the table as it ties v1model's. The kernel back end refuses
//! PSA programs whole.

use crate::common::{assert_pass, run};
use crate::ETH;
use p4::backends::software::{Match, Switch};

/// Table `t` on the EtherType: `counted` counts and meters a frame whose `seen` byte is 0 and
/// writes the colour there (1 green, 2 yellow, 3 red); `quiet` and the default (a miss) do
/// neither.
const PROGRAM: &str = r#"
#include <core.p4>
#include <psa.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header seen_t { bit<8> colour; }
struct headers { ethernet_t ethernet; seen_t seen; }
struct metadata { }
struct empty { }
parser IP(packet_in pkt, out headers hdr, inout metadata meta, in psa_ingress_parser_input_metadata_t istd,
          in empty resubmit_meta, in empty recirculate_meta) {
    state start { pkt.extract(hdr.ethernet); pkt.extract(hdr.seen); transition accept; }
}
control I(inout headers hdr, inout metadata meta, in psa_ingress_input_metadata_t istd,
          inout psa_ingress_output_metadata_t ostd) {
    DirectCounter<bit<32>>(PSA_CounterType_t.PACKETS_AND_BYTES) hits;
    DirectMeter(PSA_MeterType_t.PACKETS) rate;
    // Counts and meters a frame whose seen byte is 0 only: the others pass untouched.
    action counted(PortId_t p) {
        if (hdr.seen.colour == 0) {
            hits.count();
            PSA_MeterColor_t c = rate.execute();
            if (c == PSA_MeterColor_t.GREEN) { hdr.seen.colour = 1; }
            else if (c == PSA_MeterColor_t.YELLOW) { hdr.seen.colour = 2; }
            else { hdr.seen.colour = 3; }
        }
        send_to_port(ostd, p);
    }
    action quiet(PortId_t p) { send_to_port(ostd, p); }
    table t {
        key = { hdr.ethernet.ether_type : exact; }
        actions = { counted; quiet; }
        default_action = quiet(9);
        psa_direct_counter = hits;
        psa_direct_meter = rate;
    }
    apply { t.apply(); }
}
control ID(packet_out pkt, out empty clone_i2e_meta, out empty resubmit_meta, out empty normal_meta,
           inout headers hdr, in metadata meta, in psa_ingress_output_metadata_t istd) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.seen); }
}
parser EP(packet_in pkt, out headers hdr, inout metadata meta, in psa_egress_parser_input_metadata_t istd,
          in empty normal_meta, in empty clone_i2e_meta, in empty clone_e2e_meta) {
    state start { transition accept; }
}
control E(inout headers hdr, inout metadata meta, in psa_egress_input_metadata_t istd,
          inout psa_egress_output_metadata_t ostd) { apply { } }
control ED(packet_out pkt, out empty clone_e2e_meta, out empty recirculate_meta, inout headers hdr,
           in metadata meta, in psa_egress_output_metadata_t istd, in psa_egress_deparser_input_metadata_t edstd) {
    apply { }
}
IngressPipeline(IP(), I(), ID()) ip;
EgressPipeline(EP(), E(), ED()) ep;
PSA_Switch(ip, PacketReplicationEngine(), ep, BufferingQueueingEngine()) main;
"#;

#[test]
fn a_direct_counter_counts_only_where_the_entrys_action_calls_count() {
    assert_pass(run(
        PROGRAM,
        &format!(
            "add I.t hdr.ethernet.ether_type:0x0001 I.counted(p:1) = a\n\
             add I.t hdr.ethernet.ether_type:0x0002 I.quiet(p:2) = b\n\
             add I.t hdr.ethernet.ether_type:0x0003 I.counted(p:3) = c\n\
             packet 0 {ETH} 0001 00\n\
             expect 1 {ETH} 0001 01 $\n\
             # Entry a again, its action choosing not to count.\n\
             packet 0 {ETH} 0001 ee\n\
             expect 1 {ETH} 0001 ee $\n\
             packet 0 {ETH} 0002 00\n\
             expect 2 {ETH} 0002 00 $\n\
             packet 0 {ETH} 0009 00\n\
             expect 9 {ETH} 0009 00 $\n\
             check_counter hits($a) packets == 1\n\
             check_counter hits($a) bytes == 15\n\
             check_counter hits($b) packets == 0\n\
             check_counter hits($c) packets == 0\n"
        ),
    ));
}

fn frame(ether_type: u8, seen: u8) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend([2, 0, 0, 0, 0, 1, 0, ether_type, seen]);
    f
}

/// The colour `execute()` gave the frame (the `seen` byte out), and its port.
fn colour(sw: &mut Switch, ether_type: u8, seen: u8) -> (u32, u8) {
    let out = sw.process(&frame(ether_type, seen), 0, 0).unwrap();
    (out[0].port, *out[0].frame.last().unwrap())
}

#[test]
fn a_direct_meter_marks_the_matched_entrys_cell_when_its_action_executes_it() {
    let mut sw = p4::stf::load("direct.p4", PROGRAM).unwrap();
    for (key, action, port) in [(1, "counted", 1), (3, "counted", 3), (2, "quiet", 2)] {
        sw.insert("I.t", vec![Match::Exact(key)], action, vec![port], 0).unwrap();
    }
    // Entry 1: a burst of one within the committed rate, two within the peak, no refill at one instant.
    sw.set_entry_meter("I.t", &[Match::Exact(1)], 0, [1000, 1, 1000, 2]).unwrap();
    // Frames the action does not meter take nothing from the cell.
    for _ in 0..5 {
        assert_eq!(colour(&mut sw, 1, 0xee), (1, 0xee));
    }
    assert_eq!(colour(&mut sw, 1, 0), (1, 1), "green");
    assert_eq!(colour(&mut sw, 1, 0), (1, 2), "yellow");
    assert_eq!(colour(&mut sw, 1, 0), (1, 3), "red");
    assert_eq!(colour(&mut sw, 3, 0), (3, 1), "entry 3 has its own cell, never set: green");
    assert_eq!(sw.entry_meter("I.t", &[Match::Exact(1)], 0), Some(Some([1000, 1, 1000, 2])));
}

#[test]
fn p4info_ties_psa_direct_externs_to_their_table() {
    let sw = p4::stf::load("direct.p4", PROGRAM).unwrap();
    let info = sw.info();
    let t = info.tables.iter().find(|t| t.target == "I.t").unwrap();
    let (hits, rate) = (&info.direct_counters[0], &info.direct_meters[0]);
    assert_eq!(
        (hits.preamble.name.as_str(), hits.unit, hits.table),
        ("I.hits", p4::info::Unit::Both, Some(t.preamble.id))
    );
    assert_eq!(
        (rate.preamble.name.as_str(), rate.unit, rate.table),
        ("I.rate", p4::info::Unit::Packets, Some(t.preamble.id))
    );
    assert_eq!((t.direct_counter, t.direct_meter), (Some(hits.preamble.id), Some(rate.preamble.id)));
}

#[test]
fn the_kernel_back_end_refuses_a_psa_program_by_name() {
    let (p, c) = p4::front_end("direct.p4", PROGRAM).unwrap_or_else(|e| panic!("{e}"));
    let Err(e) = p4::backends::ebpf::generate(&p, &c) else { panic!("the kernel back end took a PSA program") };
    assert!(e.contains("PSA_Switch does not fit the kernel back end"), "{e}");
}

#[test]
fn a_direct_extern_no_table_names_is_refused_at_load() {
    let unnamed = PROGRAM.replace("        psa_direct_counter = hits;\n", "");
    let e = p4::stf::load("direct.p4", &unnamed).err().unwrap();
    assert!(e.contains("the DirectCounter is no table's psa_direct_counter"), "{e}");
    let unnamed = PROGRAM.replace("        psa_direct_meter = rate;\n", "");
    let e = p4::stf::load("direct.p4", &unnamed).err().unwrap();
    assert!(e.contains("the DirectMeter is no table's psa_direct_meter"), "{e}");
}
