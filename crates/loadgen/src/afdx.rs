//! AFDX end systems, without I/O: what a transmitting end system sends and when, and what a
//! receiving one keeps (ARINC 664 part 7's integrity checking and redundancy management).
//!
//! A frame is Ethernet/IPv4/UDP with AFDX addresses (`packet::afdx`). Its payload starts with the
//! load generator's probe (flow = VL id, a 32-bit sequence number that never wraps, transmit time)
//! and ends with the 1-byte AFDX sequence number (SN) that the receiver's checks work on. The
//! probe's number is ground truth for the report: it tells a real loss or duplicate from what the
//! 8-bit SN lets the end system conclude.

use std::collections::{BTreeMap, HashSet};
use std::str::FromStr;

use packet::afdx::{end_system_mac, next_sn, vl_mac, NETWORK_A, NETWORK_B};

use crate::frame::{self, Probe, FCS, MAX_SIZE, MIN_SIZE, PROBE_AT, PROBE_LEN};
use crate::stats::Histogram;

/// One VL an end system transmits: `ID:BAG_MS:SIZE[:GAP_US]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VlSpec {
    pub id: u16,
    pub bag_ns: u64,
    /// Frame size on the wire, FCS included.
    pub size: usize,
    /// Time between frames: the BAG for a conforming end system, less for a babbling one.
    pub gap_ns: u64,
}

impl FromStr for VlSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<VlSpec, String> {
        let bad = || format!("--vl {s}: expected ID:BAG_MS:SIZE[:GAP_US] (SIZE {MIN_SIZE}..{MAX_SIZE} bytes)");
        let parts: Vec<&str> = s.split(':').collect();
        if !(3..=4).contains(&parts.len()) {
            return Err(bad());
        }
        let id: u16 = parts[0].parse().map_err(|_| bad())?;
        let bag_ms: u64 = parts[1].parse().map_err(|_| bad())?;
        let size: usize = parts[2].parse().map_err(|_| bad())?;
        let gap_ns = match parts.get(3) {
            Some(g) => g.parse::<f64>().map_err(|_| bad())? * 1000.0,
            None => bag_ms as f64 * 1e6,
        } as u64;
        if bag_ms == 0 || gap_ns == 0 || !(MIN_SIZE..=MAX_SIZE).contains(&size) {
            return Err(bad());
        }
        Ok(VlSpec { id, bag_ns: bag_ms * 1_000_000, size, gap_ns })
    }
}

/// Offset of the SN: the last byte before the FCS.
fn sn_at(frame: &[u8]) -> usize {
    frame.len() - 1
}

/// A VL's frame from end system `es` on `network` (interface id), to be stamped per frame.
pub fn template(mac_constant: u32, es: u16, network: u8, vl: &VlSpec) -> Vec<u8> {
    let [eh, el] = es.to_be_bytes();
    let [vh, vl_lo] = vl.id.to_be_bytes();
    let ep = frame::Endpoints {
        src_mac: end_system_mac(es, network),
        dst_mac: vl_mac(mac_constant, vl.id),
        src_ip: [10, eh, el, 1],
        dst_ip: [224, 224, vh, vl_lo],
        src_port: 10_000,
        dst_port: 10_000,
    };
    let mut f = frame::template(&ep, vl.size, vl.id);
    packet::afdx::end_datagram_before_sn(&mut f);
    f
}

/// Writes the probe and the SN of one transmission.
pub fn stamp(frame: &mut [u8], vl: u16, seq: u32, sn: u8, tx_ns: u64) {
    frame::write_probe(frame, Probe { flow: vl, seq, tx_ns });
    let at = sn_at(frame);
    frame[at] = sn;
}

/// What a receiving end system reads from a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EsFrame {
    pub vl: u16,
    /// 0 for network A, 1 for B.
    pub network: usize,
    pub sn: u8,
    pub probe: Probe,
}

/// The index (0 for A, 1 for B) of the network an interface id (`NETWORK_A`, `NETWORK_B`) names.
pub fn network_index(interface: u8) -> Option<usize> {
    match interface {
        NETWORK_A => Some(0),
        NETWORK_B => Some(1),
        _ => None,
    }
}

/// An AFDX frame of ours, or `None`.
pub fn read(frame: &[u8]) -> Option<EsFrame> {
    let probe = frame::read_probe(frame)?;
    if frame.len() < PROBE_AT + PROBE_LEN + 1 || frame.len() + FCS < MIN_SIZE {
        return None;
    }
    let network = network_index(frame[11] >> 5)?;
    let vl = u16::from_be_bytes([frame[4], frame[5]]);
    (vl == probe.flow).then_some(EsFrame { vl, network, sn: frame[sn_at(frame)], probe })
}

/// When each frame leaves: frame k of a VL is due at k × gap, delayed by a jitter drawn in
/// [0, J] (what an end system's scheduler adds), never before the previous frame of its VL.
pub struct Schedule {
    vls: Vec<(VlSpec, u64, u32)>,
    jitter_ns: u64,
    rng: u64,
}

/// One transmission: the VL's index in the schedule, its probe number and SN, and when (ns from
/// the start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release {
    pub vl: usize,
    pub seq: u32,
    pub sn: u8,
    pub at_ns: u64,
}

impl Schedule {
    pub fn new(vls: Vec<VlSpec>, jitter_ns: u64, seed: u64) -> Schedule {
        let mut s = Schedule { vls: Vec::new(), jitter_ns, rng: seed | 1 };
        s.vls = vls.into_iter().map(|v| (v, 0, 0)).collect();
        for i in 0..s.vls.len() {
            let first = s.jitter();
            s.vls[i].1 = first;
        }
        s
    }

    fn jitter(&mut self) -> u64 {
        if self.jitter_ns == 0 {
            return 0;
        }
        // xorshift64: reproducible, and enough for spreading release times.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % (self.jitter_ns + 1)
    }

    pub fn vls(&self) -> impl Iterator<Item = &VlSpec> {
        self.vls.iter().map(|v| &v.0)
    }

    /// The next transmission of any VL, earliest first.
    pub fn next_release(&mut self) -> Release {
        let (i, _) = self.vls.iter().enumerate().min_by_key(|(_, v)| v.1).expect("a schedule has VLs");
        let (spec, at, seq) = self.vls[i].clone();
        let next_seq = seq + 1;
        let nominal = next_seq as u64 * spec.gap_ns;
        let next_at = (nominal + self.jitter()).max(at);
        self.vls[i].1 = next_at;
        self.vls[i].2 = next_seq;
        // SN 0 once, then 1..=255 over and over.
        let sn = if seq == 0 { 0 } else { ((seq - 1) % 255 + 1) as u8 };
        Release { vl: i, seq, sn, at_ns: at }
    }
}

/// What the receiving end system did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Passed integrity checking and was the first copy: handed to the application.
    Delivered,
    /// The other network's copy of a frame already delivered.
    Duplicate,
    /// Its SN was not one of the two that may follow the last one on its network.
    IntegrityError,
}

/// Per VL: integrity checking per network, then redundancy management across both.
#[derive(Clone, Debug, Default)]
pub struct VlReceiver {
    /// Last SN seen per network.
    psn: [Option<u8>; 2],
    /// Last SN delivered, and when.
    rsn: Option<(u8, u64)>,
    /// When an SN 0 was last delivered: its copy on the other network is not a restart.
    zero_at: Option<u64>,
    pub received: [u64; 2],
    pub integrity_errors: [u64; 2],
    pub delivered: u64,
    pub duplicates_removed: u64,
    /// Frames delivered twice (by probe number): a redundancy-management failure, always 0 when
    /// the networks behave.
    pub delivered_twice: u64,
    seen: HashSet<u32>,
    first_seq: Option<u32>,
    highest_seq: u32,
    pub latency: Histogram,
}

impl VlReceiver {
    /// Frames the sender numbered between the first and the last seen that no network delivered.
    pub fn lost(&self) -> u64 {
        match self.first_seq {
            Some(first) => (self.highest_seq - first + 1) as u64 - self.seen.len() as u64,
            None => 0,
        }
    }
}

/// Is `sn` within `n` steps after `prev` in the 1..=255 cycle?
fn within(prev: u8, sn: u8, n: u8) -> bool {
    let mut s = prev;
    for _ in 0..n {
        s = next_sn(s);
        if s == sn {
            return true;
        }
    }
    false
}

pub struct Receiver {
    /// How long after delivering a frame its copy on the other network may still arrive.
    skew_max_ns: u64,
    pub vls: BTreeMap<u16, VlReceiver>,
    pub other: u64,
}

impl Receiver {
    pub fn new(skew_max_ns: u64) -> Receiver {
        Receiver { skew_max_ns, vls: BTreeMap::new(), other: 0 }
    }

    pub fn receive(&mut self, f: &EsFrame, rx_ns: u64) -> Outcome {
        let r = self.vls.entry(f.vl).or_default();
        r.received[f.network] += 1;
        // Integrity checking: after SN p only p+1 and p+2 (one frame lost) are valid; 0 is a
        // restarted end system. The SN is remembered either way, so the check recovers.
        let valid = match r.psn[f.network] {
            None => true,
            Some(_) if f.sn == 0 => true,
            Some(p) => within(p, f.sn, 2),
        };
        r.psn[f.network] = Some(f.sn);
        if !valid {
            r.integrity_errors[f.network] += 1;
            return Outcome::IntegrityError;
        }
        // Redundancy management: the first valid copy wins. A copy is a duplicate if its SN is
        // not ahead of the last delivered one while the other copy may still be on its way.
        // SN 0 is a restarted end system, unless an SN 0 was delivered within SkewMax: then it is
        // that frame's copy, even if the faster network has delivered SN 1, 2... since (no end
        // system restarts within SkewMax of its last restart).
        let copy_of_zero = |at: u64| rx_ns.saturating_sub(at) <= self.skew_max_ns;
        let fresh = match r.rsn {
            None => true,
            Some((_, at)) if rx_ns.saturating_sub(at) > self.skew_max_ns => true,
            Some(_) if f.sn == 0 => !r.zero_at.is_some_and(copy_of_zero),
            Some((last, _)) => within(last, f.sn, 127),
        };
        if !fresh {
            r.duplicates_removed += 1;
            return Outcome::Duplicate;
        }
        r.rsn = Some((f.sn, rx_ns));
        if f.sn == 0 {
            r.zero_at = Some(rx_ns);
        }
        r.delivered += 1;
        let seq = f.probe.seq;
        if !r.seen.insert(seq) {
            r.delivered_twice += 1;
        }
        r.first_seq = Some(r.first_seq.map_or(seq, |s| s.min(seq)));
        r.highest_seq = r.highest_seq.max(seq);
        r.latency.record(rx_ns.saturating_sub(f.probe.tx_ns));
        Outcome::Delivered
    }
}

/// The far end of a link of `mbps`, given when each frame was handed to it: when the frame's last
/// bit arrives, the link carrying frames one after another, and which frames it drops with
/// `limit` already waiting (an interface's ring). A frame occupies the link for its bytes, FCS,
/// preamble and inter-frame gap (24 bytes more), and has arrived once its FCS has.
pub struct Wire {
    mbps: u64,
    limit: usize,
    free_at: u64,
    /// When each frame on the link or waiting for it will have left, oldest first.
    leaving: std::collections::VecDeque<u64>,
    pub dropped: u64,
}

impl Wire {
    pub fn new(mbps: u32, limit: usize) -> Wire {
        Wire { mbps: mbps.max(1) as u64, limit, free_at: 0, leaving: Default::default(), dropped: 0 }
    }

    fn ns(&self, bytes: u64) -> u64 {
        (bytes * 8 * 1000).div_ceil(self.mbps)
    }

    /// A frame of `len` bytes (no FCS) handed to the link at `at_ns` (not before the last one):
    /// when its last bit arrives, or None if the ring was full.
    pub fn carry(&mut self, len: usize, at_ns: u64) -> Option<u64> {
        use packet::{FCS_LEN, IFG_LEN, PREAMBLE_LEN};
        while self.leaving.front().is_some_and(|&t| t <= at_ns) {
            self.leaving.pop_front();
        }
        // The frame on the link is not in the ring.
        if self.leaving.len() > self.limit {
            self.dropped += 1;
            return None;
        }
        let start = self.free_at.max(at_ns);
        self.free_at = start + self.ns((PREAMBLE_LEN + len + FCS_LEN + IFG_LEN) as u64);
        self.leaving.push_back(self.free_at);
        Some(start + self.ns((PREAMBLE_LEN + len + FCS_LEN) as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_of(vl: u16, network: u8, seq: u32, sn: u8, tx_ns: u64) -> EsFrame {
        let spec = VlSpec { id: vl, bag_ns: 1_000_000, size: 100, gap_ns: 1_000_000 };
        let mut f = template(packet::afdx::DEFAULT_MAC_CONSTANT, 3, network, &spec);
        stamp(&mut f, vl, seq, sn, tx_ns);
        read(&f).unwrap()
    }

    #[test]
    fn frames_carry_afdx_addresses_probe_and_sn() {
        let spec: VlSpec = "10:2:200".parse().unwrap();
        assert_eq!(spec, VlSpec { id: 10, bag_ns: 2_000_000, size: 200, gap_ns: 2_000_000 });
        assert_eq!("10:2:200:250".parse::<VlSpec>().unwrap().gap_ns, 250_000);
        assert!("10:2:20".parse::<VlSpec>().is_err());
        let mut f = template(packet::afdx::DEFAULT_MAC_CONSTANT, 0x0102, NETWORK_B, &spec);
        assert_eq!(f.len() + FCS, 200);
        stamp(&mut f, 10, 77, 9, 5);
        assert_eq!(&f[..6], &[3, 0, 0, 0, 0, 10]);
        assert!(packet::afdx::is_end_system_mac(&f[6..12]));
        assert_eq!(f[f.len() - 1], 9);
        let r = read(&f).unwrap();
        assert_eq!((r.vl, r.network, r.sn, r.probe.seq, r.probe.tx_ns), (10, 1, 9, 77, 5));
    }

    #[test]
    fn schedule_releases_each_vl_on_its_gap_with_bounded_jitter() {
        let vls = vec!["1:1:64".parse().unwrap(), "2:4:64".parse().unwrap()];
        let mut s = Schedule::new(vls, 100_000, 42);
        let mut per_vl: [Vec<Release>; 2] = [vec![], vec![]];
        let mut last = 0;
        for _ in 0..600 {
            let r = s.next_release();
            assert!(r.at_ns >= last, "in time order");
            last = r.at_ns;
            per_vl[r.vl].push(r);
        }
        for (i, gap) in [(0, 1_000_000u64), (1, 4_000_000)] {
            for (k, r) in per_vl[i].iter().enumerate() {
                assert_eq!(r.seq as usize, k);
                let nominal = k as u64 * gap;
                assert!(r.at_ns >= nominal && r.at_ns <= nominal + 100_000, "{r:?}");
            }
        }
        let sns: Vec<u8> = per_vl[0].iter().map(|r| r.sn).collect();
        assert_eq!(&sns[..3], &[0, 1, 2]);
        assert_eq!((sns[255], sns[256]), (255, 1));
        assert_eq!(per_vl[0].len(), 480);
    }

    #[test]
    fn integrity_checking_tolerates_one_lost_frame_per_network() {
        let mut rx = Receiver::new(1_000_000_000);
        let outcomes: Vec<Outcome> = [(0u32, 0u8), (1, 1), (3, 3), (6, 6), (7, 7)]
            .iter()
            .map(|&(seq, sn)| rx.receive(&frame_of(1, NETWORK_A, seq, sn, 0), 0))
            .collect();
        // 1→3 skips one (valid); 3→6 skips two (an integrity error); 6→7 is back in step.
        use Outcome::*;
        assert_eq!(outcomes, vec![Delivered, Delivered, Delivered, IntegrityError, Delivered]);
        let r = &rx.vls[&1];
        assert_eq!((r.integrity_errors, r.delivered), ([1, 0], 4));
        // Seq 2, 4 and 5 never arrived; 6 did, but failed integrity checking.
        assert_eq!(r.lost(), 4);
    }

    #[test]
    fn redundancy_management_delivers_the_first_copy_only() {
        let mut rx = Receiver::new(500_000);
        let mut delivered = vec![];
        let mut t = 0;
        for seq in 0..=300u32 {
            let sn = if seq == 0 { 0 } else { ((seq - 1) % 255 + 1) as u8 };
            t += 1_000_000;
            // B lags A by 0.1 ms; every 10th frame A loses its copy; every 7th B does (never both).
            for (net, delay) in [(NETWORK_A, 0), (NETWORK_B, 100_000)] {
                if (net == NETWORK_A && seq % 10 == 9) || (net == NETWORK_B && seq % 7 == 3 && seq % 10 != 9) {
                    continue;
                }
                if rx.receive(&frame_of(5, net, seq, sn, t), t + delay) == Outcome::Delivered {
                    delivered.push(seq);
                }
            }
        }
        let r = &rx.vls[&5];
        assert_eq!(delivered, (0..=300).collect::<Vec<_>>(), "each frame exactly once, the first (SN 0) too");
        assert_eq!((r.lost(), r.delivered_twice), (0, 0));
        assert_eq!(r.duplicates_removed, 301 - 30 - 39);
        assert_eq!(r.integrity_errors, [0, 0]);
        // Within SkewMax a copy that is not ahead of the last delivered SN is a duplicate; after
        // it the window has passed and the frame is taken as new.
        let mut rx = Receiver::new(500_000);
        for (sn, t) in [(1, 0), (2, 1_000_000), (3, 2_000_000)] {
            assert_eq!(rx.receive(&frame_of(6, NETWORK_A, sn as u32, sn, t), t), Outcome::Delivered);
        }
        assert_eq!(rx.receive(&frame_of(6, NETWORK_B, 2, 2, 0), 2_100_000), Outcome::Duplicate);
        assert_eq!(rx.receive(&frame_of(6, NETWORK_B, 3, 3, 0), 2_600_001), Outcome::Delivered);
        assert_eq!(rx.vls[&6].delivered_twice, 1, "the ground truth knows it was a copy");
    }

    #[test]
    fn the_copy_of_sn_0_is_a_duplicate_even_when_one_network_is_ahead() {
        // Seen on a loaded machine: A delivered SN 0 and 1 before B's SN 0 came, which was then
        // taken for a restart, and B's SN 1 after it, so both frames were delivered twice.
        let mut rx = Receiver::new(500_000);
        let order = [(NETWORK_A, 0, 0), (NETWORK_A, 1, 10_000), (NETWORK_B, 0, 50_000), (NETWORK_B, 1, 60_000)];
        let got: Vec<_> =
            order.iter().map(|&(net, seq, t)| rx.receive(&frame_of(7, net, seq, seq as u8, 0), t)).collect();
        use Outcome::*;
        assert_eq!(got, vec![Delivered, Delivered, Duplicate, Duplicate]);
        // A real restart comes later than SkewMax after the last SN 0: delivered, copy removed,
        // and its successor too.
        for (sn, t, want) in [(2, 100_000, Delivered), (3, 200_000, Delivered), (0, 700_000, Delivered)] {
            assert_eq!(rx.receive(&frame_of(7, NETWORK_A, 9 + sn as u32, sn, 0), t), want, "sn {sn}");
        }
        assert_eq!(rx.receive(&frame_of(7, NETWORK_B, 9, 0, 0), 710_000), Duplicate);
        assert_eq!(rx.receive(&frame_of(7, NETWORK_B, 10, 1, 0), 720_000), Delivered);
        assert_eq!(rx.receive(&frame_of(7, NETWORK_A, 10, 1, 0), 730_000), Duplicate);
        assert_eq!(rx.vls[&7].delivered_twice, 0);
    }

    #[test]
    fn a_wire_delays_frames_behind_each_other_and_drops_past_its_ring() {
        // 100 Mbit/s: a 1000-byte frame holds the link 81.92 µs, its last bit arrives at 80.96.
        let mut w = Wire::new(100, 2);
        assert_eq!(w.carry(1000, 0), Some(80_960));
        assert_eq!(w.carry(1000, 10_000), Some(81_920 + 80_960), "waits for the first");
        assert_eq!(w.carry(1000, 20_000), Some(2 * 81_920 + 80_960));
        assert_eq!(w.carry(1000, 30_000), None, "one on the link and two waiting: full");
        assert_eq!(w.dropped, 1);
        // Once all have left the link is idle: a frame goes at once.
        assert_eq!(w.carry(64, 1_000_000), Some(1_000_000 + 6_080));
    }
}
