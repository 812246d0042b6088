//! The v1model router example on the software target, for timing a frame and counting its
//! instructions (issue 53): `target/release/examples/router_frames N` routes N frames through
//! 1 000 LPM routes of /8 to /32 and prints the time a frame took.

use p4::backends::software::{Match, Switch};

fn main() {
    let frames: u64 = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(200_000);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/p4/v1model_router.p4");
    let text = std::fs::read_to_string(path).unwrap();
    let (program, checked) = p4::front_end(path, &text).unwrap();
    let mut sw = Switch::new(program, checked).unwrap();
    // Routes of every length from /8 to /32 outside 10/8, and the frames' own 10.0.0.0/24.
    let mut seed = 53u64;
    let mut routes = 1;
    sw.insert(
        "RouterIngress.ipv4_lpm",
        vec![Match::Lpm { value: 0x0a00_0000, prefix: 24 }],
        "ipv4_forward",
        vec![0x0200_0000_0002, 2],
        0,
    )
    .unwrap();
    while routes < 1000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let prefix = 8 + (seed % 25) as u32;
        let value =
            (((11 + (seed >> 8) % 200) << 24 | (seed >> 16) & 0xff_ffff) as u128) & !((1u128 << (32 - prefix)) - 1);
        if sw
            .insert(
                "RouterIngress.ipv4_lpm",
                vec![Match::Lpm { value, prefix }],
                "ipv4_forward",
                vec![0x0200_0000_0001, 1],
                0,
            )
            .is_ok()
        {
            routes += 1;
        }
    }
    let mut frame = vec![2, 0, 0, 0, 0, 0xfe, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    let mut ip = vec![0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
    let sum: u32 = ip.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
    let folded = (sum & 0xffff) + (sum >> 16);
    ip[10..12].copy_from_slice(&(!((folded & 0xffff) + (folded >> 16)) as u16).to_be_bytes());
    frame.extend(ip);
    frame.resize(60, 0);
    let start = std::time::Instant::now();
    let mut out = 0usize;
    for i in 0..frames {
        if let Ok(copies) = sw.process(&frame, 1, i * 1000) {
            out += copies.len();
        }
    }
    let took = start.elapsed();
    println!("{frames} frames, {out} copies out, {:.0} ns a frame", took.as_nanos() as f64 / frames.max(1) as f64);
}
