//! Every input the fuzzers (`make fuzz`) found a crash with, run again through the same harness:
//! fixed crashes stay fixed. The inputs are the fuzzer's artifacts, byte for byte.

include!("../../../fuzz/harness/packet_rewrite.rs");

/// An ARP frame retyped IPv4, then its DSCP set: the IPv4 header the ethertype named was past the
/// frame's end (`set_field` read it). Then its TTL, through a push.
#[test]
fn a_rewritten_ethertype_naming_a_header_the_frame_lacks() {
    rewrite_chain(include_bytes!("fuzzed/crash-ef9f92f91bb7757165fd9b9a0a3e8de300082aaf"));
}

/// An MPLS push onto a frame whose ethertype says MPLS but which holds no label entry.
#[test]
fn an_mpls_push_onto_a_stack_the_frame_does_not_hold() {
    rewrite_chain(include_bytes!("fuzzed/crash-fb4378c7374792b21c3fbfc1295ea024e0aa9c64"));
}
