/* v1model, the architecture of BMv2's simple_switch, declared by edgeflow so that programs
 * written for it read here: the six blocks a V1Switch is built of, the standard metadata and
 * the externs, with the names and parameters BMv2's documentation and the P4-16 specification
 * give them. Written for edgeflow, not copied. Only declarations: the software target does not
 * yet give them v1model's semantics (docs/p4.md, "v1model and PSA"). Where v1model overloads
 * an extern (two forms of one name), the subset has one form: the one the field uses most. */
#include <core.p4>

/* Which v1model a program was written against; one that says so before including keeps its own. */
#ifndef V1MODEL_VERSION
#define V1MODEL_VERSION 20200408
#endif

typedef bit<9> PortId_t;
typedef bit<48> Timestamp_t;
typedef bit<16> CloneSessionId_t;
typedef bit<16> MulticastGroup_t;
typedef bit<16> EgressInstance_t;
typedef bit<3> ClassOfService_t;

match_kind {
    range,
    optional,
    /* A key that picks among a selector's members: it is hashed, not matched. */
    selector
}

/* What the switch tells the program about a frame, and what the program tells the switch. */
struct standard_metadata_t {
    PortId_t ingress_port;
    /* Set by ingress: the port the frame leaves by (511 drops it, see mark_to_drop). */
    PortId_t egress_spec;
    /* In egress: the port the frame leaves by. */
    PortId_t egress_port;
    /* 0 a frame from a port, 1..6 a clone, resubmission, recirculation or replica. */
    bit<32> instance_type;
    bit<32> packet_length;
    bit<32> enq_timestamp;
    bit<19> enq_qdepth;
    bit<32> deq_timedelta;
    bit<19> deq_qdepth;
    Timestamp_t ingress_global_timestamp;
    Timestamp_t egress_global_timestamp;
    /* Set by ingress: a multicast group; the replication engine sends a copy per member. */
    MulticastGroup_t mcast_grp;
    /* In egress: which member of the multicast group this copy is for. */
    EgressInstance_t egress_rid;
    bit<1> checksum_error;
    error parser_error;
    bit<3> priority;
}

enum CounterType {
    packets,
    bytes,
    packets_and_bytes
}

enum MeterType {
    packets,
    bytes
}

/* A table of counters indexed by the program. */
extern counter {
    counter(bit<32> size, CounterType type);
    void count(in bit<32> index);
}

/* One counter per entry of the table it is attached to. */
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

/* State kept across frames, `size` cells of T. */
extern register<T> {
    register(bit<32> size);
    void read(out T result, in bit<32> index);
    void write(in bit<32> index, in T value);
}

/* Actions shared by the entries of the tables that name it. */
extern action_profile {
    action_profile(bit<32> size);
}

enum HashAlgorithm {
    crc32,
    crc32_custom,
    crc16,
    crc16_custom,
    random,
    identity,
    csum16,
    xor16
}

/* An action profile whose entries are groups; a hash of the selector keys picks the member. */
extern action_selector {
    action_selector(HashAlgorithm algorithm, bit<32> size, bit<32> outputWidth);
}

/* result = base + (hash of data) mod max. */
extern void hash<O, T, D, M>(out O result, in HashAlgorithm algo, in T base, in D data, in M max);

/* A random number between lo and hi, both included. */
extern void random<T>(out T result, in T lo, in T hi);

/* Sends `data` to the control plane, as digest `receiver`. */
extern void digest<T>(in bit<32> receiver, in T data);

/* Drops the frame: egress_spec (in ingress) becomes the drop port, and mcast_grp 0. */
extern void mark_to_drop(inout standard_metadata_t standard_metadata);

enum CloneType {
    /* A copy of the frame as it entered ingress goes to egress. */
    I2E,
    /* A copy of the frame as egress left it goes to egress again. */
    E2E
}

/* A copy of the frame to clone session `session`'s port(s). */
extern void clone(in CloneType type, in bit<32> session);
/* As clone, and the copy carries the metadata fields annotated @field_list(index). */
extern void clone_preserving_field_list(in CloneType type, in bit<32> session, bit<8> index);
/* The frame goes through the ingress parser again after ingress, keeping the fields of
 * @field_list(index). */
extern void resubmit_preserving_field_list(bit<8> index);
/* The frame, as the deparser leaves it, goes through the parser again after egress. */
extern void recirculate_preserving_field_list(bit<8> index);
/* Only the first `length` bytes of the frame leave the switch. */
extern void truncate(in bit<32> length);

/* A checksum over `data` that fails the frame (checksum_error = 1) if it is not `checksum`. */
extern void verify_checksum<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);
/* Writes into `checksum` the checksum over `data`. */
extern void update_checksum<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);
/* As above, the checksum also covering the frame's payload after the deparsed headers. */
extern void verify_checksum_with_payload<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);
extern void update_checksum_with_payload<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);

/* Writes a message to the switch's log. */
extern void log_msg(string msg);

/* Stops the switch if `check` does not hold (a debugging aid). */
extern void assert(in bool check);
/* As assert; a formal tool may take it as given. */
extern void assume(in bool check);

parser Parser<H, M>(packet_in b, out H parsedHdr, inout M meta, inout standard_metadata_t standard_metadata);
control VerifyChecksum<H, M>(inout H hdr, inout M meta);
control Ingress<H, M>(inout H hdr, inout M meta, inout standard_metadata_t standard_metadata);
control Egress<H, M>(inout H hdr, inout M meta, inout standard_metadata_t standard_metadata);
control ComputeChecksum<H, M>(inout H hdr, inout M meta);
control Deparser<H>(packet_out b, in H hdr);

package V1Switch<H, M>(Parser<H, M> p, VerifyChecksum<H, M> vr, Ingress<H, M> ig, Egress<H, M> eg,
                       ComputeChecksum<H, M> ck, Deparser<H> dep);
