/* A learning-free L2 switch: the control plane fills `dmac` with (destination MAC → port);
 * frames to an address it does not know go to multicast group 1 (every port), and frames of a
 * VLAN the port does not carry are dropped. */
#include <core.p4>
#include <edgeflow.p4>

typedef bit<48> mac_t;

header ethernet_t {
    mac_t   dst;
    mac_t   src;
    bit<16> ether_type;
}

header vlan_t {
    bit<3>  pcp;
    bit<1>  dei;
    bit<12> vid;
    bit<16> ether_type;
}

struct headers_t {
    ethernet_t ethernet;
    vlan_t     vlan;
}

struct metadata_t {
    bit<12> vid;
}

const bit<16> ETHERTYPE_VLAN = 0x8100;

parser L2Parser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_VLAN: parse_vlan;
            default: accept;
        }
    }
    state parse_vlan {
        packet.extract(hdr.vlan);
        meta.vid = hdr.vlan.vid;
        transition accept;
    }
}

control L2Ingress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    direct_counter(CounterType.packets_and_bytes) dmac_hits;

    action forward(PortId_t port) {
        standard_metadata.egress_port = port;
    }
    action flood() {
        standard_metadata.mcast_grp = 1;
    }
    action drop() {
        mark_to_drop(standard_metadata);
    }

    table vlan_allowed {
        key = {
            standard_metadata.ingress_port : exact;
            meta.vid                       : exact;
        }
        actions = { NoAction; drop; }
        default_action = drop();
        size = 4096;
    }

    table dmac {
        key = {
            meta.vid           : exact;
            hdr.ethernet.dst   : exact;
        }
        actions = { forward; flood; }
        default_action = flood();
        counters = dmac_hits;
        size = 16384;
    }

    apply {
        if (hdr.vlan.isValid()) {
            // A VLAN the port does not carry: the table's default drops the frame.
            vlan_allowed.apply();
            standard_metadata.priority = hdr.vlan.pcp;
        }
        dmac.apply();
    }
}

control L2Egress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply {
        // A flooded copy does not go back where it came from.
        if (standard_metadata.egress_port == standard_metadata.ingress_port) {
            mark_to_drop(standard_metadata);
        }
    }
}

control L2Deparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.vlan);
    }
}

EdgeflowSwitch(L2Parser(), L2Ingress(), L2Egress(), L2Deparser()) main;
