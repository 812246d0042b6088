//! The OpenFlow decoder on any bytes: it never panics, and what it accepts encodes to bytes that
//! decode to the same message (nothing accepted is misread).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((header, msg)) = ofp::Message::decode(data) {
        let again = msg.encode(header.xid);
        let (_, decoded) = ofp::Message::decode(&again).expect("an encoded message decodes");
        assert_eq!(decoded, msg, "decode(encode(m)) == m");
    }
});
