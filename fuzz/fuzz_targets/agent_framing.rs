//! A controller connection's bytes, as the agent frames and first dispatches them
//! (`agent::fuzzing::read_stream`: the real framer, the slave check, the decoder, the error
//! replies), delivered in pieces of any size: no panic; the same messages however the stream is
//! cut; each message is the bytes its header's length says, one after another from the start;
//! every reply is an OFPT_ERROR of the message's xid carrying at most its first 64 bytes.
#![no_main]
use agent::fuzzing::{read_stream, Read};
use libfuzzer_sys::fuzz_target;
use ofp::message::Message;

fuzz_target!(|data: &[u8]| {
    let Some((&how, stream)) = data.split_first() else { return };
    let slave = how & 0x80 != 0;
    let cut = (how & 0x7f) as usize + 1;
    let read = read_stream(stream, cut, slave);
    let whole = read_stream(stream, usize::MAX, slave);
    assert_eq!(format!("{read:?}"), format!("{whole:?}"), "cut in pieces of {cut}, read otherwise");
    let mut at = 0;
    for r in &read {
        let (bytes, reply) = match r {
            Read::Message { bytes, .. } => (bytes, None),
            Read::Refused { bytes, reply } | Read::Broken { head: bytes, reply } => (bytes, Some(reply)),
        };
        assert_eq!(&stream[at..at + bytes.len()], &bytes[..], "not the stream's next bytes");
        at += bytes.len();
        let length = u16::from_be_bytes([bytes[2], bytes[3]]) as usize;
        match r {
            Read::Broken { .. } => assert!(length < 8 && bytes.len() == 8),
            _ => assert_eq!(length, bytes.len(), "a message framed at another length than its own"),
        }
        if let Some(reply) = reply {
            let xid = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
            let (h, msg) = Message::decode(reply).expect("a reply the switch sends decodes");
            let Message::Error(e) = msg else { panic!("a reply that is no error: {msg:?}") };
            assert_eq!(h.xid, xid);
            assert!(e.data.len() <= 64 && bytes.starts_with(&e.data), "the error's data is not the message's start");
        }
    }
});
