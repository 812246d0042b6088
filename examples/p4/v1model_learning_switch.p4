/* An L2 learning switch for v1model whose control plane learns through P4Runtime, as BMv2's
 * switches with a CPU port do (`[p4] cpu_port = 255`, BMv2's `--cpu-port 255`):
 *  - a source MAC `smac` does not know sends a digest (its MAC and port) for the controller to
 *    learn, which it does by filling `smac` and `dmac`;
 *  - a destination `dmac` does not know goes to the CPU port, with a packet_in header that
 *    tells the controller the port it came in on (a packet-in);
 *  - a frame the controller sends (a packet-out) arrives on the CPU port with a packet_out
 *    header naming the port it leaves on.
 * tests/test_p4runtime_shell.py drives it with p4runtime-shell on user and tc. Written for
 * edgeflow. */
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 255;

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> pad;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> pad;
}

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

struct learn_t {
    bit<48> src;
    bit<9> port;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t packet_in;
    ethernet_t ethernet;
}

struct metadata_t {
    learn_t learn;
}

parser LearnParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control LearnVerify(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control LearnIngress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    action learn() {
        meta.learn.src = hdr.ethernet.src;
        meta.learn.port = standard_metadata.ingress_port;
        digest(1, meta.learn);
    }

    table smac {
        key = { hdr.ethernet.src : exact; }
        actions = { learn; NoAction; }
        size = 1024;
        default_action = learn();
    }

    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    action to_cpu() {
        standard_metadata.egress_spec = CPU_PORT;
    }

    table dmac {
        key = { hdr.ethernet.dst : exact; }
        actions = { forward; to_cpu; }
        size = 1024;
        default_action = to_cpu();
    }

    apply {
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else {
            smac.apply();
            dmac.apply();
        }
    }
}

control LearnEgress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in.pad = 0;
        }
    }
}

control LearnCompute(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control LearnDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.packet_out);
        packet.emit(hdr.ethernet);
    }
}

V1Switch(LearnParser(), LearnVerify(), LearnIngress(), LearnEgress(), LearnCompute(), LearnDeparser()) main;
