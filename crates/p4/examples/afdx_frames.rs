//! The paper's AFDX program on the software target, for counting instructions per frame
//! (issue 53): `valgrind --tool=callgrind target/release/examples/afdx_frames N` runs N frames
//! over 1 000 virtual links (run it with N = 0 too and take the difference: the rest is
//! loading).

use p4::backends::software::{Match, Switch};

fn main() {
    let frames: u64 = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(2000);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/p4/afdx_switch.p4");
    let text = std::fs::read_to_string(path).unwrap();
    let (program, checked) = p4::front_end(path, &text).unwrap();
    let mut sw = Switch::new(program, checked).unwrap();
    const LINKS: u32 = 1000;
    sw.set_group(1, vec![2, 3]);
    for vl in 0..LINKS {
        let keys = vec![Match::Exact(1), Match::Exact(vl as u128)];
        sw.insert(
            "AfdxIngress.tbl_forward_virtual_link",
            keys,
            "forward",
            vec![1, 7, vl as u128, 1000, 500, 64, 1518],
            0,
        )
        .unwrap();
    }
    let mut frame = vec![0u8; 100];
    frame[..4].copy_from_slice(&[0x03, 0, 0, 0]);
    frame[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0x01, 0x20]);
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    frame[14] = 0x45;
    let mut out = 0usize;
    for i in 0..frames {
        let vl = (i % LINKS as u64) as u16;
        frame[4..6].copy_from_slice(&vl.to_be_bytes());
        let now = (i / LINKS as u64 + 1) * 2_000_000_000;
        if let Ok(copies) = sw.process(&frame, 1, now) {
            out += copies.len();
        }
    }
    println!("{frames} frames, {out} copies out");
}
