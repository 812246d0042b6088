//! v1model's architecture on the software target (issue 52, item 2), each behaviour as BMv2's
//! simple_switch shows it, driven by STF scripts as p4c's runner drives BMv2: the replication
//! engine's copies with their replication ids, ingress-to-egress and egress-to-egress clones,
//! the drop port, a parser error that reaches ingress, checksums verified and updated, hashes,
//! resubmission and recirculation.

mod common;

use common::{assert_pass, run};

/// Ethernet, then a header the program writes what it saw into: the instance type, the
/// replication id, the parser error (1 if any), the checksum error.
const SEEN: &str = r#"
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header seen_t { bit<8> instance; bit<8> rid; bit<8> parser_error; bit<8> checksum_error; bit<16> check; }
struct headers { ethernet_t ethernet; seen_t seen; }
struct metadata { }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.ethernet); pkt.extract(hdr.seen); transition accept; }
}
control V(inout headers hdr, inout metadata meta) {
    apply { verify_checksum(hdr.seen.isValid(), { hdr.ethernet.ether_type }, hdr.seen.check, HashAlgorithm.csum16); }
}
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action to(PortId_t port) { sm.egress_spec = port; }
    action group(bit<16> g) { sm.mcast_grp = g; }
    action mirror(bit<32> session, PortId_t port) { clone(CloneType.I2E, session); sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    table by_type {
        key = { hdr.ethernet.ether_type : exact; }
        actions = { to; group; mirror; drop; }
        default_action = drop();
    }
    apply {
        if (sm.parser_error != error.NoError) {
            hdr.seen.setValid();
            hdr.seen.parser_error = 1;
            sm.egress_spec = 7;
        } else {
            by_type.apply();
        }
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        hdr.seen.instance = (bit<8>) sm.instance_type;
        hdr.seen.rid = (bit<8>) sm.egress_rid;
        hdr.seen.checksum_error = (bit<8>) sm.checksum_error;
        if (hdr.ethernet.ether_type == 0x0e2e && sm.instance_type == 0) { clone(CloneType.E2E, 9); }
    }
}
control C(inout headers hdr, inout metadata meta) {
    apply { update_checksum(hdr.seen.isValid(), { hdr.seen.instance, hdr.seen.rid }, hdr.seen.check, HashAlgorithm.csum16); }
}
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.seen); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

const ETH: &str = "ffffffffffff 020000000001";

#[test]
fn the_replication_engine_sends_a_copy_per_port_and_replication_id() {
    assert_pass(run(
        SEEN,
        &format!(
            "add by_type ether_type:0x0800 group(g:5)\n\
             mc_mgrp_create 5\n\
             mc_node_create 10 1 2\n\
             mc_node_create 11 2\n\
             mc_node_associate 5 0\n\
             mc_node_associate 5 1\n\
             # check = ~(0x0800) as the switch verifies it: no checksum error.\n\
             packet 0 {ETH} 0800 00000000 f7ff\n\
             # instance 5 (a replica), the replication id, then the updated checksum.\n\
             expect 1 {ETH} 0800 050a0000 faf5 $\n\
             expect 2 {ETH} 0800 050a0000 faf5 $\n\
             expect 2 {ETH} 0800 050b0000 faf4 $\n"
        ),
    ));
}

#[test]
fn an_ingress_clone_and_an_egress_clone_go_to_their_sessions_ports() {
    assert_pass(run(
        SEEN,
        &format!(
            "add by_type ether_type:0x0101 mirror(session:8, port:1)\n\
             add by_type ether_type:0x0e2e to(port:1)\n\
             mirroring_add 8 3\n\
             mirroring_add 9 4\n\
             packet 0 {ETH} 0101 00000000 fefe\n\
             # The clone (instance 1) is the frame as it arrived, through egress on port 3.\n\
             expect 3 {ETH} 0101 01000000 feff $\n\
             expect 1 {ETH} 0101 00000000 ffff $\n\
             packet 0 {ETH} 0e2e 00000000 f1d1\n\
             # The egress clone (instance 2) carries what egress wrote, and egress runs again.\n\
             expect 1 {ETH} 0e2e 00000000 ffff $\n\
             expect 4 {ETH} 0e2e 02000000 fdff $\n"
        ),
    ));
}

#[test]
fn the_drop_port_drops_and_a_bad_checksum_or_a_parser_error_reaches_ingress() {
    assert_pass(run(
        SEEN,
        &format!(
            "add by_type ether_type:0x0800 to(port:1)\n\
             packet 0 {ETH} 0999 00000000 0000\n\
             # The checksum does not hold: ingress runs, checksum_error is 1.\n\
             packet 0 {ETH} 0800 00000000 1234\n\
             expect 1 {ETH} 0800 00000001 ffff $\n\
             # Too short for seen_t: ingress sees the parser's error, the header the parser\n\
             # could not extract is made valid by ingress.\n\
             packet 0 {ETH} 0800 0000\n\
             expect 7 {ETH} 0800 00000100 ffff 0000 $\n"
        ),
    ));
}

const RETURNS: &str = r#"
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header count_t { bit<8> passes; bit<16> hash; }
struct headers { ethernet_t ethernet; count_t count; }
struct metadata { }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.ethernet); pkt.extract(hdr.count); transition accept; }
}
control V(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hash(hdr.count.hash, HashAlgorithm.crc16, 16w0, { hdr.ethernet.ether_type }, 32w0);
        if (hdr.ethernet.ether_type == 0x5e5e && sm.instance_type == 0) {
            resubmit_preserving_field_list(0);
        }
        if (sm.instance_type == 6) { hdr.count.passes = 0x66; }
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.ethernet.ether_type == 0xcccc && hdr.count.passes < 3) {
            hdr.count.passes = hdr.count.passes + 1;
            recirculate_preserving_field_list(0);
        }
    }
}
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.count); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

#[test]
fn resubmitted_and_recirculated_frames_run_again_and_hashes_are_bmv2s() {
    // crc16 (CRC-16/ARC, as BMv2 computes it) of 0x5e5e is 0x98b9, of 0xcccc 0x5555.
    assert_pass(run(
        RETURNS,
        &format!(
            "packet 0 {ETH} 5e5e 00 0000\n\
             # Resubmitted: ingress runs again on the frame as it arrived, instance 6.\n\
             expect 1 {ETH} 5e5e 66 98b9 $\n\
             packet 0 {ETH} cccc 00 0000\n\
             # Recirculated until egress has counted three passes.\n\
             expect 1 {ETH} cccc 03 5555 $\n"
        ),
    ));
}
