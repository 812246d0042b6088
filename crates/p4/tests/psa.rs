//! PSA on the software target (issue 52, item 2), each behaviour as BMv2's psa_switch shows it,
//! driven by STF scripts: a frame ingress sends nowhere is dropped, unicast and multicast with
//! the replica's instance, the packet path egress sees, clones, resubmission, recirculation,
//! and PSA's own externs (InternetChecksum, Hash, Register's read that returns the cell);
//! `psa/direct.rs` the direct counters and meters, `psa/carried.rs` the deparser's metadata
//! for resubmissions and I2E clones (one test binary, one link).

#[path = "psa/carried.rs"]
mod carried;
mod common;
#[path = "psa/direct.rs"]
mod direct;

use common::{assert_pass, run};

/// Ingress acts on the EtherType's low byte: 1 unicast to the port in the high byte's low
/// nibble, 2 multicast group 7, 3 clone to session 5 and unicast, 4 resubmit once, 5 out by
/// the recirculation port; anything else is left to ostd's default (drop). Egress writes the
/// packet path (as a number), the replica's instance and a pass count into `seen`.
const PROGRAM: &str = r#"
#include <core.p4>
#include <psa.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header seen_t { bit<8> path; bit<8> instance; bit<8> passes; bit<16> sum; bit<16> hash; bit<8> cell; }
struct headers { ethernet_t ethernet; seen_t seen; }
struct metadata { }
struct empty { }
parser IP(packet_in pkt, out headers hdr, inout metadata meta, in psa_ingress_parser_input_metadata_t istd,
          in empty resubmit_meta, in empty recirculate_meta) {
    state start { pkt.extract(hdr.ethernet); pkt.extract(hdr.seen); transition accept; }
}
control Path(in PSA_PacketPath_t path, out bit<8> n) {
    apply {
        n = 0;
        if (path == PSA_PacketPath_t.NORMAL_UNICAST) { n = 2; }
        else if (path == PSA_PacketPath_t.NORMAL_MULTICAST) { n = 3; }
        else if (path == PSA_PacketPath_t.CLONE_I2E) { n = 4; }
        else if (path == PSA_PacketPath_t.RESUBMIT) { n = 6; }
        else if (path == PSA_PacketPath_t.RECIRCULATE) { n = 7; }
    }
}
control I(inout headers hdr, inout metadata meta, in psa_ingress_input_metadata_t istd,
          inout psa_ingress_output_metadata_t ostd) {
    InternetChecksum() ck;
    Hash<bit<16>>(PSA_HashAlgorithm_t.CRC16) h;
    Register<bit<8>, bit<32>>(4) r;
    apply {
        bit<8> kind = hdr.ethernet.ether_type[7:0];
        ck.clear();
        ck.add({ hdr.ethernet.ether_type });
        hdr.seen.sum = ck.get();
        hdr.seen.hash = h.get_hash({ hdr.ethernet.ether_type });
        r.write(1, r.read(1) + 1);
        hdr.seen.cell = r.read(1);
        if (istd.packet_path == PSA_PacketPath_t.RESUBMIT || istd.packet_path == PSA_PacketPath_t.RECIRCULATE) {
            Path.apply(istd.packet_path, hdr.seen.path);
            send_to_port(ostd, 1);
        } else if (kind == 1) {
            send_to_port(ostd, (PortId_t) (bit<32>) hdr.ethernet.ether_type[11:8]);
        } else if (kind == 2) {
            multicast(ostd, 7);
        } else if (kind == 3) {
            send_to_port(ostd, 1);
            ostd.clone = true;
            ostd.clone_session_id = 5;
        } else if (kind == 4) {
            ostd.resubmit = true;
            ostd.drop = false;
        } else if (kind == 5) {
            send_to_port(ostd, PSA_PORT_RECIRCULATE);
        }
    }
}
control ID(packet_out pkt, out empty clone_i2e_meta, out empty resubmit_meta, out empty normal_meta,
           inout headers hdr, in metadata meta, in psa_ingress_output_metadata_t istd) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.seen); }
}
parser EP(packet_in pkt, out headers hdr, inout metadata meta, in psa_egress_parser_input_metadata_t istd,
          in empty normal_meta, in empty clone_i2e_meta, in empty clone_e2e_meta) {
    state start { pkt.extract(hdr.ethernet); pkt.extract(hdr.seen); transition accept; }
}
control E(inout headers hdr, inout metadata meta, in psa_egress_input_metadata_t istd,
          inout psa_egress_output_metadata_t ostd) {
    apply {
        if (hdr.seen.path == 0) { Path.apply(istd.packet_path, hdr.seen.path); }
        hdr.seen.instance = (bit<8>) istd.instance;
        hdr.seen.passes = hdr.seen.passes + 1;
    }
}
control ED(packet_out pkt, out empty clone_e2e_meta, out empty recirculate_meta, inout headers hdr,
           in metadata meta, in psa_egress_output_metadata_t istd, in psa_egress_deparser_input_metadata_t edstd) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.seen); }
}
IngressPipeline(IP(), I(), ID()) ip;
EgressPipeline(EP(), E(), ED()) ep;
PSA_Switch(ip, PacketReplicationEngine(), ep, BufferingQueueingEngine()) main;
"#;

/// The Ethernet addresses every PSA test frame here carries (broadcast, from 02:00:00:00:00:01).
pub(crate) const ETH: &str = "ffffffffffff 020000000001";

#[test]
fn unicast_multicast_and_the_default_drop() {
    // ~0x0201 = 0xfdfe, crc16(02 01) = 0xa0c0; the register counts frames: 1, 2, 3.
    assert_pass(run(
        PROGRAM,
        &format!(
            "packet 0 {ETH} 0201 000000 0000 0000 00\n\
             expect 2 {ETH} 0201 020001 fdfe a0c0 01 $\n\
             mc_mgrp_create 7\n\
             mc_node_create 20 3 4\n\
             mc_node_associate 7 0\n\
             packet 0 {ETH} 0002 000000 0000 0000 00\n\
             expect 3 {ETH} 0002 031401 fffd c181 02 $\n\
             expect 4 {ETH} 0002 031401 fffd c181 02 $\n\
             # Low byte 9: ingress leaves ostd.drop as PSA starts it, true.\n\
             packet 0 {ETH} 0009 000000 0000 0000 00\n\
             packet 0 {ETH} 0101 000000 0000 0000 00\n\
             expect 1 {ETH} 0101 020001 fefe 50c0 04 $\n"
        ),
    ));
}

#[test]
fn a_clone_a_resubmission_and_a_recirculation_take_their_paths() {
    assert_pass(run(
        PROGRAM,
        &format!(
            "mirroring_add 5 6\n\
             packet 0 {ETH} 0003 000000 0000 0000 00\n\
             # The clone is the frame as it arrived, parsed by egress: nothing ingress wrote.\n\
             expect 6 {ETH} 0003 040001 0000 0000 00 $\n\
             expect 1 {ETH} 0003 020001 fffc 0140 01 $\n\
             packet 0 {ETH} 0004 000000 0000 0000 00\n\
             expect 1 {ETH} 0004 060001 fffb c301 03 $\n\
             # Out by the recirculation port: back to ingress, then to port 1; egress ran twice.\n\
             packet 0 {ETH} 0005 000000 0000 0000 00\n\
             expect 1 {ETH} 0005 070002 fffa 03c0 05 $\n"
        ),
    ));
}
