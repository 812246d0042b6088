/* The Portable Switch Architecture (PSA, P4.org's specification), as BMv2's psa_switch sizes it,
 * declared by edgeflow so that programs written for it read here: the ingress and egress
 * pipelines (parser, control, deparser each), the packet replication and buffering engines,
 * the intrinsic metadata and the externs, with the specification's names and parameters.
 * Written for edgeflow, not copied. Only declarations: the software target does not yet give
 * them PSA's semantics (docs/p4.md, "v1model and PSA"). Where PSA overloads an extern method,
 * the subset has one form: the one the field uses most. */
#include <core.p4>

/* BMv2's widths for the types the specification leaves to the target. The specification makes
 * each `*_t` a new type over its `*Uint_t`, so that a port is never mistaken for a number; the
 * subset has no `type` declarations, so here they are aliases, and a cast between them, which
 * programs write, changes nothing. */
typedef bit<32> PortIdUint_t;
typedef bit<32> MulticastGroupUint_t;
typedef bit<16> CloneSessionIdUint_t;
typedef bit<8> ClassOfServiceUint_t;
typedef bit<16> PacketLengthUint_t;
typedef bit<16> EgressInstanceUint_t;
typedef bit<64> TimestampUint_t;
typedef PortIdUint_t PortId_t;
typedef MulticastGroupUint_t MulticastGroup_t;
typedef CloneSessionIdUint_t CloneSessionId_t;
typedef ClassOfServiceUint_t ClassOfService_t;
typedef PacketLengthUint_t PacketLength_t;
typedef EgressInstanceUint_t EgressInstance_t;
typedef TimestampUint_t Timestamp_t;
typedef error ParserError_t;

/* The ports the specification reserves: a frame sent to them recirculates, or goes to the CPU. */
const PortId_t PSA_PORT_RECIRCULATE = 0xfffffffa;
const PortId_t PSA_PORT_CPU = 0xfffffffd;
const CloneSessionId_t PSA_CLONE_SESSION_TO_CPU = 0;

match_kind {
    range,
    selector,
    optional
}

/* How a frame came to the block that sees it. */
enum PSA_PacketPath_t {
    NORMAL,
    NORMAL_UNICAST,
    NORMAL_MULTICAST,
    CLONE_I2E,
    CLONE_E2E,
    RESUBMIT,
    RECIRCULATE
}

struct psa_ingress_parser_input_metadata_t {
    PortId_t ingress_port;
    PSA_PacketPath_t packet_path;
}

struct psa_egress_parser_input_metadata_t {
    PortId_t egress_port;
    PSA_PacketPath_t packet_path;
}

struct psa_ingress_input_metadata_t {
    PortId_t ingress_port;
    PSA_PacketPath_t packet_path;
    Timestamp_t ingress_timestamp;
    ParserError_t parser_error;
}

/* What ingress decides; the specification's initial values are drop = true, so a program that
 * decides nothing drops the frame. */
struct psa_ingress_output_metadata_t {
    ClassOfService_t class_of_service;
    bool clone;
    CloneSessionId_t clone_session_id;
    bool drop;
    bool resubmit;
    MulticastGroup_t multicast_group;
    PortId_t egress_port;
}

struct psa_egress_input_metadata_t {
    ClassOfService_t class_of_service;
    PortId_t egress_port;
    PSA_PacketPath_t packet_path;
    EgressInstance_t instance;
    Timestamp_t egress_timestamp;
    ParserError_t parser_error;
}

struct psa_egress_deparser_input_metadata_t {
    PortId_t egress_port;
}

struct psa_egress_output_metadata_t {
    bool clone;
    CloneSessionId_t clone_session_id;
    bool drop;
}

/* Which copy the deparsers are writing: they emit per-path metadata only where it is true. */
extern bool psa_clone_i2e(in psa_ingress_output_metadata_t istd);
extern bool psa_resubmit(in psa_ingress_output_metadata_t istd);
extern bool psa_normal(in psa_ingress_output_metadata_t istd);
extern bool psa_clone_e2e(in psa_egress_output_metadata_t istd);
extern bool psa_recirculate(in psa_egress_output_metadata_t istd, in psa_egress_deparser_input_metadata_t edstd);

/* The specification defines these four as actions, so that a table may name them too. */
action send_to_port(inout psa_ingress_output_metadata_t meta, in PortId_t egress_port) {
    meta.drop = false;
    meta.multicast_group = 0;
    meta.egress_port = egress_port;
}

action multicast(inout psa_ingress_output_metadata_t meta, in MulticastGroup_t multicast_group) {
    meta.drop = false;
    meta.multicast_group = multicast_group;
}

action ingress_drop(inout psa_ingress_output_metadata_t meta) {
    meta.drop = true;
}

action egress_drop(inout psa_egress_output_metadata_t meta) {
    meta.drop = true;
}

/* Copies a packet to the ports of a multicast group or clone session (configured by the
 * control plane). */
extern PacketReplicationEngine {
    PacketReplicationEngine();
}

extern BufferingQueueingEngine {
    BufferingQueueingEngine();
}

enum PSA_HashAlgorithm_t {
    IDENTITY,
    CRC32,
    CRC32_CUSTOM,
    CRC16,
    CRC16_CUSTOM,
    ONES_COMPLEMENT16,
    TARGET_DEFAULT
}

extern Hash<O> {
    Hash(PSA_HashAlgorithm_t algo);
    O get_hash<D>(in D data);
}

/* A checksum with a configurable algorithm, computed incrementally. */
extern Checksum<W> {
    Checksum(PSA_HashAlgorithm_t hash);
    void clear();
    void update<T>(in T data);
    W get();
}

/* The Internet checksum (RFC 1071), which can also take data out again (RFC 1624). */
extern InternetChecksum {
    InternetChecksum();
    void clear();
    void add<T>(in T data);
    void subtract<T>(in T data);
    bit<16> get();
    bit<16> get_state();
    void set_state(in bit<16> checksum_state);
}

enum PSA_CounterType_t {
    PACKETS,
    BYTES,
    PACKETS_AND_BYTES
}

/* W is the width of a counter's cells, S the index's type. */
extern Counter<W, S> {
    Counter(bit<32> n_counters, PSA_CounterType_t type);
    void count(in S index);
}

extern DirectCounter<W> {
    DirectCounter(PSA_CounterType_t type);
    void count();
}

enum PSA_MeterType_t {
    PACKETS,
    BYTES
}

enum PSA_MeterColor_t {
    RED,
    GREEN,
    YELLOW
}

/* Two-rate three-colour meters (RFC 2698), colour-blind. */
extern Meter<S> {
    Meter(bit<32> n_meters, PSA_MeterType_t type);
    PSA_MeterColor_t execute(in S index);
}

extern DirectMeter {
    DirectMeter(PSA_MeterType_t type);
    PSA_MeterColor_t execute();
}

extern Register<T, S> {
    Register(bit<32> size);
    T read(in S index);
    void write(in S index, in T value);
}

/* A random number between min and max, both included. */
extern Random<T> {
    Random(T min, T max);
    T read();
}

extern ActionProfile {
    ActionProfile(bit<32> size);
}

extern ActionSelector {
    ActionSelector(PSA_HashAlgorithm_t algo, bit<32> size, bit<32> outputWidth);
}

/* Sends `data` to the control plane. */
extern Digest<T> {
    Digest();
    void pack(in T data);
}

parser IngressParser<H, M, RESUBM, RECIRCM>(packet_in buffer, out H parsed_hdr, inout M user_meta,
    in psa_ingress_parser_input_metadata_t istd, in RESUBM resubmit_meta, in RECIRCM recirculate_meta);
control Ingress<H, M>(inout H hdr, inout M user_meta, in psa_ingress_input_metadata_t istd,
    inout psa_ingress_output_metadata_t ostd);
control IngressDeparser<H, M, CI2EM, RESUBM, NM>(packet_out buffer, out CI2EM clone_i2e_meta,
    out RESUBM resubmit_meta, out NM normal_meta, inout H hdr, in M meta, in psa_ingress_output_metadata_t istd);
parser EgressParser<H, M, NM, CI2EM, CE2EM>(packet_in buffer, out H parsed_hdr, inout M user_meta,
    in psa_egress_parser_input_metadata_t istd, in NM normal_meta, in CI2EM clone_i2e_meta, in CE2EM clone_e2e_meta);
control Egress<H, M>(inout H hdr, inout M user_meta, in psa_egress_input_metadata_t istd,
    inout psa_egress_output_metadata_t ostd);
control EgressDeparser<H, M, CE2EM, RECIRCM>(packet_out buffer, out CE2EM clone_e2e_meta,
    out RECIRCM recirculate_meta, inout H hdr, in M meta, in psa_egress_output_metadata_t istd,
    in psa_egress_deparser_input_metadata_t edstd);

package IngressPipeline<IH, IM, NM, CI2EM, RESUBM, RECIRCM>(IngressParser<IH, IM, RESUBM, RECIRCM> ip,
    Ingress<IH, IM> ig, IngressDeparser<IH, IM, CI2EM, RESUBM, NM> id);
package EgressPipeline<EH, EM, NM, CI2EM, CE2EM, RECIRCM>(EgressParser<EH, EM, NM, CI2EM, CE2EM> ep,
    Egress<EH, EM> eg, EgressDeparser<EH, EM, CE2EM, RECIRCM> ed);
package PSA_Switch<IH, IM, EH, EM, NM, CI2EM, CE2EM, RESUBM, RECIRCM>(
    IngressPipeline<IH, IM, NM, CI2EM, RESUBM, RECIRCM> ingress, PacketReplicationEngine pre,
    EgressPipeline<EH, EM, NM, CI2EM, CE2EM, RECIRCM> egress, BufferingQueueingEngine bqe);
