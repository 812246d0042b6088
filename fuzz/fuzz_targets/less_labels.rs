//! The LESS parsers on any bytes: the label stack walk (depth, the next hop, the IP version under
//! the stack), the reroute block and the HELLO protocol. None panics; a block that decodes encodes
//! to entries that decode to it again.
#![no_main]
use forwarding::less::{protocol, reroute};
use libfuzzer_sys::fuzz_target;
use packet::less;

fuzz_target!(|data: &[u8]| {
    let Some((&max, frame)) = data.split_first() else { return };
    let max = 1 + max as usize % 64;
    for at in [0, 14, 18] {
        let _ = less::depth(frame, at, max);
        let _ = less::hop(frame, at, max);
        let _ = less::ip_ethertype(frame, at);
        let _ = less::hop_in_stack(frame, at, max);
    }
    let _ = protocol::Message::decode(frame);
    if let Some(block) = reroute::Block::decode(frame) {
        let again = reroute::Block::decode(&block.encode());
        assert_eq!(again.as_ref(), Some(&block), "a decoded block survives encode and decode");
    }
});
