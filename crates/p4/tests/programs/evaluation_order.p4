// The mid end's evaluation-order cases (crates/p4/tests/midend.rs): each line of I's apply is one
// place where the IR once read a program differently from P4 (left to right, each argument
// once) or from the software target. Only lowered, never run.
#include <edgeflow.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header s_t { bit<8> a; bit<8> b; }
struct h_t { eth_t eth; s_t[4] s; }
struct m_t { bit<8> b; }
bit<8> add(in bit<8> a, in bit<8> b) { return a + b; }
bit<8> inc(inout bit<8> v) { v = v + 1; return v; }
parser P(packet_in pk, out h_t hdr, inout m_t meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); transition accept; }
}
control I(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) {
    action o(out bit<8> x) { }
    action a(inout bit<8> x) { x = 7; exit; }
    apply {
        hdr.s[0].a = add(1, add(2, 3));
        bit<8> t = 10;
        hdr.s[0].b = t + inc(t);
        bit<8> i = 0;
        hdr.s[i].a = inc(i);
        bit<8> j = 0;
        hdr.s[inc(j)].b = hdr.s[inc(j)].b + 1;
        hdr.s[inc(j)].b += 1;
        a(hdr.s[inc(meta.b)].a);
        hdr.eth.type[7:4][1:0] = 2w3;
        o(hdr.s[1].a);
    }
}
control E(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out pk, in h_t hdr) { apply { pk.emit(hdr.eth); } }
EdgeflowSwitch(P(), I(), E(), D()) main;
