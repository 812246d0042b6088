//! The AFDX mode's frame check on any frame, at any time: whatever arrives on any port (a VL's,
//! another's, an unknown one), the switch decides without panicking, and a frame it forwards
//! leaves only on its VL's ports.
#![no_main]
use forwarding::afdx::{AfdxMode, Police, Priority, VirtualLink};
use forwarding::{Egress, Event, Mode, Output, PortView};
use libfuzzer_sys::fuzz_target;
use packet::{parse, Offload, Packet};

#[derive(Default)]
struct Sent(Vec<u32>);

impl Output for Sent {
    fn transmit(&mut self, egress: Egress, _: &Packet) {
        self.0.push(egress.port);
    }
    fn event(&mut self, _: Event) {}
}

fn vl(id: u16, in_port: u32, out_ports: &[u32], police: Police) -> VirtualLink {
    VirtualLink {
        id,
        in_port,
        out_ports: out_ports.to_vec(),
        bag_ns: 1_000_000,
        smin: 64,
        smax: 200,
        jitter_ns: 500_000,
        priority: if id % 2 == 0 { Priority::High } else { Priority::Low },
        police,
        account: None,
        // The IP and UDP header checks on every third link, so that they meet arbitrary bytes.
        ip_check: id % 3 == 0,
    }
}

fuzz_target!(|data: &[u8]| {
    let vls = [vl(1, 1, &[2], Police::Frame), vl(2, 1, &[2, 3], Police::Byte), vl(3, 2, &[1], Police::Frame)];
    let Ok(mut mode) = AfdxMode::new(&vls, 0x0300_0000) else { return };
    for port in 1..=3 {
        mode.port_changed(port, Some(PortView::default()));
    }
    // Records: in port and time step (one byte), a length byte, the frame.
    let mut rest = data;
    let mut now = 0u64;
    while rest.len() >= 2 {
        let (head, len) = (rest[0], rest[1] as usize);
        let frame = &rest[2..(2 + len).min(rest.len())];
        rest = &rest[(2 + len).min(rest.len())..];
        now += (head >> 2) as u64 * 100_000;
        let in_port = 1 + (head & 3) as u32 % 3;
        let Ok((key, layout)) = parse(frame, in_port) else { continue };
        let mut pkt = Packet::new(frame, Offload::default(), layout);
        let mut sent = Sent::default();
        mode.receive(&mut pkt, &key, now, &mut sent);
        let allowed: Vec<u32> = vls.iter().filter(|v| v.in_port == in_port).flat_map(|v| v.out_ports.clone()).collect();
        assert!(sent.0.iter().all(|p| allowed.contains(p)), "sent to {:?}, allowed {allowed:?}", sent.0);
    }
});
