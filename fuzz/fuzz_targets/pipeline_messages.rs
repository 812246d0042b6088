//! OpenFlow messages, decoded from any bytes, applied to a live OpenFlow pipeline in any order
//! (flow-, group-, meter-, table-mods, multiparts, packet-outs), with frames between them and
//! time passing: nothing panics, and every cache hit stays what a fresh translation gives (the
//! pipeline's own differential check, `tests/revalidate.rs`, on inputs a fuzzer chose).
#![no_main]
use forwarding::openflow::{Config, OpenFlowMode};
use forwarding::{Egress, Event, Mode, Output, PortView};
use libfuzzer_sys::fuzz_target;
use packet::{parse, Offload, Packet};

struct Discard;

impl Output for Discard {
    fn transmit(&mut self, _: Egress, _: &Packet) {}
    fn event(&mut self, _: Event) {}
}

fuzz_target!(|data: &[u8]| {
    let mut mode = OpenFlowMode::new(&Config { n_tables: 4, table_limits: vec![(0, 64, true)], native: false, packet_in_rate: 0 });
    for port in 1..=4 {
        mode.port_changed(port, Some(PortView::default()));
    }
    let mut now = 0u64;
    let mut rest = data;
    // Records: a kind byte, a 2-byte length, that many bytes.
    while rest.len() >= 3 {
        let (kind, len) = (rest[0], u16::from_be_bytes([rest[1], rest[2]]) as usize);
        let body = &rest[3..(3 + len).min(rest.len())];
        rest = &rest[(3 + len).min(rest.len())..];
        match kind % 4 {
            0 => {
                if let Ok((_, msg)) = ofp::Message::decode(body) {
                    let _ = mode.openflow(msg, now, &mut Discard);
                }
            }
            1 | 2 => {
                let in_port = 1 + kind as u32 % 4;
                if let Ok((key, layout)) = parse(body, in_port) {
                    let mut pkt = Packet::new(body, Offload::default(), layout);
                    mode.receive(&mut pkt, &key, now, &mut Discard);
                }
            }
            _ => {
                now += (len as u64) * 10_000_000;
                mode.tick(now, &mut Discard);
            }
        }
    }
});
