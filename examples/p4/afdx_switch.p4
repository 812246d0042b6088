/* An AFDX switch (ARINC 664 part 7), written from the listings of the seed paper (P4_14 there,
 * P4-16 here): the frame header with the virtual link's id in the last 16 bits of the
 * destination MAC (Listing 3), the table of each link's allowed input port and its outputs
 * (Listing 4), an ingress with integrity checks, the table and policing (Listing 5) and
 * forwarding to several ports through a multicast group (Listing 7). Where Listing 6 falls back
 * on RFC 2698 meters because P4 cannot police the time between frames, this program uses
 * edgeflow's afdx_account extern: each link's BAG and largest frame, as the standard polices
 * them. Its queue choice gives high-priority links the port scheduler's first queue. It checks
 * what edgeflow's AFDX mode checks for a link without `ip_check` (and gives the same verdicts:
 * forwarding/src/p4.rs tests that), with frame-based policing. */
#include <core.p4>
#include <edgeflow.p4>

#define MAX_VIRTUAL_LINKS 4096

/* The first 32 bits of every AFDX destination MAC, the network's constant field. */
const bit<32> AFDX_CONSTANT = 0x03000000;

header afdx_t {
    bit<32> dst_const;
    bit<16> dst_vlink_id;
    bit<48> src_addr;
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
    bit<32> src;
    bit<32> dst;
}

struct headers_t {
    afdx_t afdx;
    ipv4_h ipv4;
}

/* What the link's table entry says about it, for the checks after the lookup. */
struct metadata_t {
    bit<32> account;
    bit<32> bag_us;
    bit<32> jitter_us;
    bit<16> smin;
    bit<16> smax;
}

parser AfdxParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.afdx);
        transition select(hdr.afdx.ether_type) {
            0x0800: parse_ipv4;
            default: reject;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control AfdxIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    afdx_account(MAX_VIRTUAL_LINKS) accounts;
    counter(MAX_VIRTUAL_LINKS, CounterType.packets_and_bytes) policed;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    /* Listing 7: the link's outputs are a multicast group; its priority picks the queue. */
    action forward(bit<16> group, bit<3> queue, bit<32> account, bit<32> bag_us, bit<32> jitter_us,
                   bit<16> smin, bit<16> smax) {
        standard_metadata.mcast_grp = group;
        standard_metadata.priority = queue;
        meta.account = account;
        meta.bag_us = bag_us;
        meta.jitter_us = jitter_us;
        meta.smin = smin;
        meta.smax = smax;
    }

    /* Listing 4. */
    table tbl_forward_virtual_link {
        key = {
            standard_metadata.ingress_port : exact;
            hdr.afdx.dst_vlink_id          : exact;
        }
        actions = { drop; forward; }
        default_action = drop();
        size = MAX_VIRTUAL_LINKS;
    }

    /* Listing 5. */
    apply {
        // Integrity: the destination's constant field, and a source in the end-system format:
        // 02:00:00, the end system's id, then its interface (A 001, B 010) and five zero bits.
        bit<3> interface = hdr.afdx.src_addr[7:5];
        if (hdr.afdx.dst_const != AFDX_CONSTANT || hdr.afdx.src_addr[47:24] != 0x020000 ||
                hdr.afdx.src_addr[4:0] != 0 || (interface != 1 && interface != 2)) {
            drop();
            exit;
        }
        switch (tbl_forward_virtual_link.apply().action_run) {
            forward: {
                // The frame's size as the standard counts it: with its FCS.
                bit<32> size = standard_metadata.packet_length + 4;
                if (size < (bit<32>) meta.smin || size > (bit<32>) meta.smax) {
                    drop();
                } else if (!accounts.conforms(meta.account, meta.bag_us, meta.jitter_us, meta.smax)) {
                    policed.count(meta.account);
                    drop();
                }
            }
        }
    }
}

control AfdxEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply { }
}

control AfdxDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.afdx);
        packet.emit(hdr.ipv4);
    }
}

EdgeflowSwitch(AfdxParser(), AfdxIngress(), AfdxEgress(), AfdxDeparser()) main;
