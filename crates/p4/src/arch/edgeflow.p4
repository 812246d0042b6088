/* edgeflow's architecture (docs/p4.md): a parser, an ingress and an egress control and a
 * deparser, as in v1model, and the externs edgeflow adds for what P4 itself cannot say: the AFDX
 * account (BAG policing), counters, meters, registers, the arrival time and the egress queue
 * the port's scheduler (SP, DRR, CBS, TAS) serves. */
#include <core.p4>

/* edgeflow's ports are OpenFlow port numbers. */
typedef bit<32> PortId_t;

struct standard_metadata_t {
    PortId_t ingress_port;
    /* Set by ingress: the port the frame leaves by; 0 (or mark_to_drop) sends it nowhere. */
    PortId_t egress_port;
    /* A multicast group (configured with the program): a copy to each of its ports. */
    bit<16>  mcast_grp;
    /* The egress queue, 0..7, whose scheduler sends it (7 is served first under SP). */
    bit<3>   priority;
    bit<32>  packet_length;
    /* The switch's clock when the frame arrived, in nanoseconds. */
    bit<64>  timestamp;
    bit<1>   drop;
    error    parser_error;
}

extern void mark_to_drop(inout standard_metadata_t standard_metadata);

enum CounterType {
    packets,
    bytes,
    packets_and_bytes
}

enum MeterType {
    packets,
    bytes
}

extern counter {
    counter(bit<32> size, CounterType type);
    void count(in bit<32> index);
}

extern direct_counter {
    direct_counter(CounterType type);
    void count();
}

/* Two-rate three-colour meters (RFC 2698); the colour is 0 green, 1 yellow, 2 red. */
extern meter {
    meter(bit<32> size, MeterType type);
    void execute_meter<T>(in bit<32> index, out T result);
}

extern direct_meter<T> {
    direct_meter(MeterType type);
    void read(out T result);
}

extern register<T> {
    register(bit<32> size);
    void read(out T result, in bit<32> index);
    void write(in bit<32> index, in T value);
}

/* An AFDX virtual link's account (ARINC 664 part 7, 6.2.2.2): a frame conforms if the link's
 * credit covers it, the credit growing by `smax` bytes every `bag_us` and capped at what
 * `jitter_us` allows. What P4's meters cannot say: the time between frames. */
extern afdx_account {
    afdx_account(bit<32> size);
    bool conforms(in bit<32> index, in bit<32> bag_us, in bit<32> jitter_us, in bit<16> smax);
}

parser Parser<H, M>(packet_in packet, out H hdr, inout M meta, inout standard_metadata_t standard_metadata);
control Ingress<H, M>(inout H hdr, inout M meta, inout standard_metadata_t standard_metadata);
control Egress<H, M>(inout H hdr, inout M meta, inout standard_metadata_t standard_metadata);
control Deparser<H>(packet_out packet, in H hdr);
package EdgeflowSwitch<H, M>(Parser<H, M> p, Ingress<H, M> ig, Egress<H, M> eg, Deparser<H> dep);
