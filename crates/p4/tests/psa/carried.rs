//! PSA's metadata the ingress deparser hands on (issue 52; PSA 6.2 and 6.4): its
//! `resubmit_meta` out parameter reaches the ingress parser of the resubmitted frame, and its
//! `clone_i2e_meta` the egress parser of each I2E clone, even though the frame that made them
//! is resubmitted or dropped and the deparser's bytes go nowhere. The software target runs
//! the deparser for every frame; the kernel back end refuses PSA programs whole.

use crate::common::{assert_pass, run};
use crate::ETH;

/// Ingress on the EtherType: 1 marks the frame's metadata 0x5a and resubmits it, 2 marks it
/// 0xc3 and clones it to session 5, leaving the frame dropped. The deparser puts the mark in
/// `resubmit_meta` and the mark plus one in `clone_i2e_meta`; `seen` shows what each pass got.
const PROGRAM: &str = r#"
#include <core.p4>
#include <psa.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header seen_t { bit<8> resubmitted; bit<8> cloned; }
struct headers { ethernet_t ethernet; seen_t seen; }
struct metadata { bit<8> mark; }
struct mark_t { bit<8> mark; }
struct empty { }
parser IP(packet_in pkt, out headers hdr, inout metadata meta, in psa_ingress_parser_input_metadata_t istd,
          in mark_t resubmit_meta, in empty recirculate_meta) {
    state start {
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.seen);
        meta.mark = resubmit_meta.mark;
        transition accept;
    }
}
control I(inout headers hdr, inout metadata meta, in psa_ingress_input_metadata_t istd,
          inout psa_ingress_output_metadata_t ostd) {
    apply {
        if (istd.packet_path == PSA_PacketPath_t.RESUBMIT) {
            hdr.seen.resubmitted = meta.mark;
            send_to_port(ostd, 1);
        } else if (hdr.ethernet.ether_type == 1) {
            meta.mark = 0x5a;
            ostd.drop = false;
            ostd.resubmit = true;
        } else if (hdr.ethernet.ether_type == 2) {
            meta.mark = 0xc3;
            ostd.clone = true;
            ostd.clone_session_id = 5;
        }
    }
}
control ID(packet_out pkt, out mark_t clone_i2e_meta, out mark_t resubmit_meta, out empty normal_meta,
           inout headers hdr, in metadata meta, in psa_ingress_output_metadata_t istd) {
    apply {
        resubmit_meta.mark = meta.mark;
        clone_i2e_meta.mark = meta.mark + 1;
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.seen);
    }
}
parser EP(packet_in pkt, out headers hdr, inout metadata meta, in psa_egress_parser_input_metadata_t istd,
          in empty normal_meta, in mark_t clone_i2e_meta, in empty clone_e2e_meta) {
    state start {
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.seen);
        hdr.seen.cloned = clone_i2e_meta.mark;
        transition accept;
    }
}
control E(inout headers hdr, inout metadata meta, in psa_egress_input_metadata_t istd,
          inout psa_egress_output_metadata_t ostd) {
    apply { }
}
control ED(packet_out pkt, out empty clone_e2e_meta, out empty recirculate_meta, inout headers hdr,
           in metadata meta, in psa_egress_output_metadata_t istd, in psa_egress_deparser_input_metadata_t edstd) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.seen); }
}
IngressPipeline(IP(), I(), ID()) ip;
EgressPipeline(EP(), E(), ED()) ep;
PSA_Switch(ip, PacketReplicationEngine(), ep, BufferingQueueingEngine()) main;
"#;

#[test]
fn a_resubmitted_frames_parser_gets_the_deparsers_resubmit_meta() {
    assert_pass(run(
        PROGRAM,
        &format!(
            "packet 0 {ETH} 0001 0000\n\
             expect 1 {ETH} 0001 5a00 $\n"
        ),
    ));
}

#[test]
fn an_i2e_clone_of_a_dropped_frame_gets_the_deparsers_clone_i2e_meta() {
    assert_pass(run(
        PROGRAM,
        &format!(
            "mirroring_add 5 6\n\
             packet 0 {ETH} 0002 0000\n\
             expect 6 {ETH} 0002 00c4 $\n"
        ),
    ));
}

#[test]
fn the_kernel_back_end_refuses_the_program_by_its_package() {
    let (p, c) = p4::front_end("carried.p4", PROGRAM).unwrap_or_else(|e| panic!("{e}"));
    let Err(e) = p4::backends::ebpf::generate(&p, &c) else { panic!("the kernel back end took a PSA program") };
    assert!(e.contains("package PSA_Switch does not fit the kernel back end"), "{e}");
}
