//! The pipeline at scale, without I/O: `scale SHAPE FLOWS [LOOKUPS]` installs FLOWS flows of one
//! shape through `Pipeline::flow_mod`, then translates LOOKUPS frames that each match a different
//! installed flow (no megaflow cache: every one a full classifier walk; in the order the flows were
//! installed, or with `random` after LOOKUPS scattered over them), and prints one JSON line:
//! heap bytes per flow (counted by this program's allocator, exact), installs a second, the
//! nanoseconds a translation takes, and the classifier's subtables (its distinct masks).
//!
//! Shapes: `exact` (UDP source and destination port, one mask: a reactive controller's microflows)
//! and `prefix` (IPv4 destination prefixes /16 to /32 at priority = length: a routing table, 17
//! masks). `make bench`'s scale experiment (testbed/experiments/scale.py) runs it at 10 000,
//! 100 000 and 1 000 000 flows: the lookup cost should follow the masks, not the flows.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

use ofp::action::{Action, Instruction};
use ofp::message::FlowMod;
use ofp::oxm::{Field, Match};
use packet::craft::{FrameBuilder, L3, L4};
use packet::{parse, Offload, Packet};
use pipeline::{Pipeline, PortView};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Relaxed);
        LIVE.fetch_sub(layout.size(), Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Exact,
    Prefix,
}

/// Flow `i`'s match and priority, and the addresses and ports of a frame it matches (a longer prefix
/// of its group may match it first).
fn flow(shape: Shape, i: u32) -> (Match, u16, [u8; 4], u16, u16) {
    let udp = Match::new().with(Field::EthType, 0x0800).with(Field::IpProto, 17);
    match shape {
        Shape::Exact => {
            let (sport, dport) = (9000 + (i >> 16) as u16, (10000 + i) as u16);
            let m = udp.with(Field::UdpSrc, sport as u128).with(Field::UdpDst, dport as u128);
            (m, 100, [10, 0, 0, 2], sport, dport)
        }
        Shape::Prefix => {
            // Lengths 16..=32 in turn; the 17 flows of a group share their top 16 bits (the group's
            // number, unique below 65 536 groups: 1 114 112 flows) and differ in length.
            let len = 16 + i % 17;
            let group = i / 17;
            let base = (group << 16) | (group.wrapping_mul(2_654_435_761) >> 16);
            let mask = if len == 32 { u32::MAX } else { !(u32::MAX >> len) };
            let net = base & mask;
            let m = Match::new().with(Field::EthType, 0x0800).with_masked(Field::Ipv4Dst, net as u128, mask as u128);
            (m, len as u16, net.to_be_bytes(), 5000, 9)
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: scale exact|prefix FLOWS [LOOKUPS [random]]");
        std::process::exit(2);
    }
    let shape = match args[1].as_str() {
        "exact" => Shape::Exact,
        "prefix" => Shape::Prefix,
        other => {
            eprintln!("scale: no shape {other:?} (exact or prefix)");
            std::process::exit(2);
        }
    };
    let flows: u32 = args[2].parse().expect("FLOWS: a number");
    let lookups: u32 = args.get(3).map(|s| s.parse().expect("LOOKUPS: a number")).unwrap_or(100_000);

    let mut p = Pipeline::new(1);
    p.set_table_limit(0, flows.max(1), false);
    for port in 1..=2 {
        p.set_port(port, PortView::default());
    }
    let output = vec![Instruction::ApplyActions(vec![Action::Output { port: 2, max_len: 0 }])];
    let mods: Vec<FlowMod> = (0..flows)
        .map(|i| {
            let (match_, priority, ..) = flow(shape, i);
            FlowMod { priority, match_, instructions: output.clone(), ..Default::default() }
        })
        .collect();
    let before = LIVE.load(Relaxed);
    let start = Instant::now();
    for fm in &mods {
        p.flow_mod(fm, 0).expect("flow_mod");
    }
    let install = start.elapsed();
    let heap = LIVE.load(Relaxed) - before;
    drop(mods);

    // In install order by default (the rules' array then read in order, which a prefetcher
    // hides); `random` scatters them, as a switch's misses come.
    let random = args.get(4).is_some_and(|a| a == "random");
    let step = (flows / lookups.max(1)).max(1);
    let frames: Vec<Vec<u8>> = (0..lookups.min(flows))
        .map(|k| {
            let i = if random { (k as u64 * 2_654_435_761 % flows as u64) as u32 } else { k * step % flows };
            let (_, _, dst, sport, dport) = flow(shape, i);
            FrameBuilder::new([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1]).build(L3::Ipv4 {
                src: [10, 0, 0, 1],
                dst,
                ttl: 64,
                tos: 0,
                l4: L4::Udp { src: sport, dst: dport, payload: vec![0; 18] },
            })
        })
        .collect();
    let parsed: Vec<_> = frames.iter().map(|f| parse(f, 1).expect("a frame")).collect();
    let mut hits = 0u64;
    let start = Instant::now();
    for (frame, (key, layout)) in frames.iter().zip(&parsed) {
        let pkt = Packet::new(frame, Offload::default(), *layout);
        let t = p.translate(&pkt, key, 1);
        hits += t.credits.tables.iter().filter(|(_, matched)| *matched).count() as u64;
    }
    let lookup = start.elapsed();
    assert_eq!(hits, frames.len() as u64, "every frame hits a flow");
    println!(
        "{{\"shape\": \"{}\", \"flows\": {flows}, \"masks\": {}, \"heap_bytes_per_flow\": {:.0}, \
         \"install_per_s\": {:.0}, \"lookup_ns\": {:.0}}}",
        args[1],
        p.tables()[0].n_masks(),
        heap as f64 / flows.max(1) as f64,
        flows as f64 / install.as_secs_f64(),
        lookup.as_nanos() as f64 / frames.len().max(1) as f64,
    );
}
