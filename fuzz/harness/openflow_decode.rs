// The openflow_decode fuzz target's body, included by the target and by the regression tests of
// what it found (crates/ofp/tests/fuzzed.rs), so that both run exactly this.

/// Decoding never panics, and what decodes is stable after one round: encoding it and decoding
/// that gives a message that encodes to the same bytes again and decodes to itself. (One round,
/// not zero: a port name that is not UTF-8 is read with replacement characters, which take more
/// bytes than the field holds.)
pub fn decode_round_trip(data: &[u8]) {
    let Ok((header, first)) = ofp::Message::decode(data) else { return };
    let bytes = first.encode(header.xid);
    let (_, second) = ofp::Message::decode(&bytes).expect("an encoded message decodes");
    let again = second.encode(header.xid);
    let (_, third) = ofp::Message::decode(&again).expect("an encoded message decodes");
    assert_eq!(third, second, "decode(encode(m)) == m once m came from the encoder");
    assert_eq!(again, second.encode(header.xid));
}
