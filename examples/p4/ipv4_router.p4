/* An IPv4 router: longest-prefix match on the destination picks the next hop, which sets the
 * MAC addresses and the port; the TTL goes down by one and the header checksum follows it
 * (RFC 1624's incremental update). Frames that are not IPv4, or whose TTL runs out, are dropped. */
#include <core.p4>
#include <edgeflow.p4>

typedef bit<48> mac_t;
typedef bit<32> ipv4_t;

header ethernet_t {
    mac_t   dst;
    mac_t   src;
    bit<16> ether_type;
}

header ipv4_h {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  tos;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> checksum;
    ipv4_t  src;
    ipv4_t  dst;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_h     ipv4;
}

struct metadata_t {
}

parser RouterParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x0800: parse_ipv4;
            default: reject;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4 && hdr.ipv4.ihl == 5, error.HeaderTooShort);
        transition accept;
    }
}

control RouterIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    counter(1024, CounterType.packets) routed;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action next_hop(mac_t src, mac_t dst, PortId_t port, bit<32> route) {
        hdr.ethernet.src = src;
        hdr.ethernet.dst = dst;
        standard_metadata.egress_port = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        // The checksum is the ones' complement of a sum: one less TTL adds 0x0100 to it.
        bit<32> sum = (bit<32>) hdr.ipv4.checksum + 0x0100;
        hdr.ipv4.checksum = sum[15:0] + (bit<16>) sum[31:16];
        routed.count(route);
    }

    table routes {
        key = { hdr.ipv4.dst : lpm; }
        actions = { next_hop; drop; }
        default_action = drop();
        size = 65536;
    }

    apply {
        if (!hdr.ipv4.isValid() || hdr.ipv4.ttl <= 1) {
            drop();
            exit;
        }
        routes.apply();
    }
}

control RouterEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply { }
}

control RouterDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
    }
}

EdgeflowSwitch(RouterParser(), RouterIngress(), RouterEgress(), RouterDeparser()) main;
