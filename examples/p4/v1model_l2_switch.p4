/* An L2 switch for v1model with no learning: the control plane fills `dmac` with (destination
 * MAC → port), and a frame to an address it does not know goes to multicast group 1 (the ports
 * its config lists), as an OpenFlow switch's table of `dl_dst` flows with a flood below them
 * does. The p4 experiment (testbed/experiments/p4.py) forwards frames through it against
 * those flows on edgeflow's OpenFlow pipeline. Written for edgeflow. */
#include <core.p4>
#include <v1model.p4>

typedef bit<48> mac_t;

header ethernet_t {
    mac_t dst;
    mac_t src;
    bit<16> ether_type;
}

struct headers {
    ethernet_t ethernet;
}

struct metadata { }

parser L2Parser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control L2Verify(inout headers hdr, inout metadata meta) {
    apply { }
}

control L2Ingress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    action flood() {
        standard_metadata.mcast_grp = 1;
    }

    table dmac {
        key = { hdr.ethernet.dst : exact; }
        actions = { forward; flood; }
        size = 65536;
        default_action = flood();
    }

    apply {
        dmac.apply();
    }
}

control L2Egress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        // A flooded copy does not go back where it came from.
        if (standard_metadata.egress_port == standard_metadata.ingress_port) {
            mark_to_drop(standard_metadata);
        }
    }
}

control L2Compute(inout headers hdr, inout metadata meta) {
    apply { }
}

control L2Deparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
    }
}

V1Switch(L2Parser(), L2Verify(), L2Ingress(), L2Egress(), L2Compute(), L2Deparser()) main;
