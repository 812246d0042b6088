/* An IPv4 router written for v1model, as the P4 tutorials write their routers for BMv2: an LPM
 * table that picks the next hop's MAC and the port, the TTL lowered, the header checksum
 * verified on arrival and written again on the way out. On tc and xdp the kernel runs it
 * (docs/p4.md, "The kernel back end"); tests/test_p4.py routes pings through it on every
 * datapath. Written for edgeflow. */
#include <core.p4>
#include <v1model.p4>

const bit<16> TYPE_IPV4 = 0x0800;

typedef bit<9> egress_port_t;
typedef bit<48> mac_t;
typedef bit<32> ipv4_addr_t;

header ethernet_t {
    mac_t dst;
    mac_t src;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4> version;
    bit<4> ihl;
    bit<8> diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3> flags;
    bit<13> frag_offset;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> checksum;
    ipv4_addr_t src;
    ipv4_addr_t dst;
}

struct headers {
    ethernet_t ethernet;
    ipv4_t ipv4;
}

struct metadata { }

parser RouterParser(packet_in packet, out headers hdr, inout metadata meta,
                    inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            TYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control RouterVerify(inout headers hdr, inout metadata meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.checksum, HashAlgorithm.csum16);
    }
}

control RouterIngress(inout headers hdr, inout metadata meta,
                      inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets_and_bytes) routed;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action ipv4_forward(mac_t next_hop, egress_port_t port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.src = hdr.ethernet.dst;
        hdr.ethernet.dst = next_hop;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        routed.count((bit<32>) port);
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dst : lpm; }
        actions = { ipv4_forward; drop; NoAction; }
        size = 1024;
        default_action = drop();
    }

    apply {
        if (!hdr.ipv4.isValid() || standard_metadata.checksum_error == 1 || hdr.ipv4.ttl <= 1) {
            drop();
        } else {
            ipv4_lpm.apply();
        }
    }
}

control RouterEgress(inout headers hdr, inout metadata meta,
                     inout standard_metadata_t standard_metadata) {
    apply { }
}

control RouterUpdate(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.checksum, HashAlgorithm.csum16);
    }
}

control RouterDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(RouterParser(), RouterVerify(), RouterIngress(), RouterEgress(), RouterUpdate(), RouterDeparser()) main;
