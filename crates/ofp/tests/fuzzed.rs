//! Every input the OpenFlow fuzzer (`make fuzz`) failed with, run again through its harness.

include!("../../../fuzz/harness/openflow_decode.rs");

/// A port-status whose port name is not UTF-8: read with replacement characters (three bytes
/// each), it was written back cut in the middle of one, and what was read again differed.
#[test]
fn a_port_name_that_is_not_utf8_survives_a_round_trip() {
    decode_round_trip(include_bytes!("fuzzed/crash-b9013b84072bef48a7f202cb9c62d1c54caa72f8"));
}

#[test]
fn names_are_cut_between_characters() {
    use ofp::port::Port;
    let desc = Port { name: "ααααααααα".into(), ..Default::default() }; // 18 bytes, 2 each
    let bytes = ofp::Message::PortStatus(ofp::PortStatus { reason: 0, desc }).encode(1);
    let Ok((_, ofp::Message::PortStatus(back))) = ofp::Message::decode(&bytes) else { panic!("decodes") };
    assert_eq!(back.desc.name, "ααααααα", "7 characters: 14 bytes, the NUL in the 16th");
}
