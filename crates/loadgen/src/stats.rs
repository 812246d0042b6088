//! The receiver's accounting: loss, reordering and duplicates from sequence numbers; one-way
//! latency from transmit and receive times; jitter as RFC 3550 §6.4.1 defines it.

/// A log-linear latency histogram: 64 sub-buckets per power of two, so any percentile is within
/// 1.6% of the true value, in constant memory.
#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    sum: u128,
    min: u64,
    max: u64,
}

const SUB: u32 = 64;

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: vec![0; 64 * SUB as usize], total: 0, sum: 0, min: u64::MAX, max: 0 }
    }
}

impl Histogram {
    fn index(v: u64) -> usize {
        if v < SUB as u64 {
            return v as usize;
        }
        let msb = 63 - v.leading_zeros();
        let shift = msb - 6;
        let sub = (v >> shift) as u32 - SUB;
        ((shift + 1) * SUB + sub) as usize
    }

    fn value(i: usize) -> u64 {
        let i = i as u32;
        if i < SUB {
            return i as u64;
        }
        let shift = i / SUB - 1;
        let sub = i % SUB;
        // The middle of the bucket.
        ((SUB + sub) as u64) << shift | ((1u64 << shift) >> 1)
    }

    /// Number of buckets (the XDP receiver keeps the same layout in a BPF map).
    pub const BUCKETS: usize = 64 * SUB as usize;

    /// A histogram from per-bucket counts kept elsewhere, with the exact extremes and sum.
    pub fn from_counts(counts: Vec<u64>, min: u64, max: u64, sum: u128) -> Histogram {
        let total = counts.iter().sum();
        Histogram { counts, total, sum, min: if total == 0 { u64::MAX } else { min }, max }
    }

    pub fn record(&mut self, v: u64) {
        self.counts[Self::index(v)] += 1;
        self.total += 1;
        self.sum += v as u128;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    pub fn min(&self) -> u64 {
        if self.total == 0 {
            0
        } else {
            self.min
        }
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum as f64 / self.total as f64
        }
    }

    /// The value below which `q` (0..=1) of the samples fall.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let want = ((q * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Self::value(i).clamp(self.min, self.max);
            }
        }
        self.max
    }
}

/// Accounting for one flow.
#[derive(Clone, Debug, Default)]
pub struct FlowStats {
    pub received: u64,
    pub bytes: u64,
    pub duplicates: u64,
    /// Frames that arrived after a frame with a higher sequence number.
    pub reordered: u64,
    pub first_seq: Option<u32>,
    pub highest_seq: u32,
    pub first_rx_ns: u64,
    pub last_rx_ns: u64,
    pub latency: Histogram,
    /// RFC 3550 interarrival jitter estimate, in ns.
    pub jitter_ns: f64,
    seen: Vec<u64>,
    last_transit: Option<i128>,
}

impl FlowStats {
    /// Records a frame of `bytes` (FCS included) sent at `tx_ns` and received at `rx_ns`.
    pub fn record(&mut self, seq: u32, bytes: usize, tx_ns: u64, rx_ns: u64) {
        let word = (seq / 64) as usize;
        if self.seen.len() <= word {
            self.seen.resize(word + 1, 0);
        }
        let bit = 1u64 << (seq % 64);
        if self.seen[word] & bit != 0 {
            self.duplicates += 1;
            return;
        }
        self.seen[word] |= bit;
        if self.received == 0 {
            self.first_seq = Some(seq);
            self.highest_seq = seq;
            self.first_rx_ns = rx_ns;
        } else if seq < self.highest_seq {
            self.reordered += 1;
        } else {
            self.highest_seq = seq;
        }
        self.first_seq = self.first_seq.map(|f| f.min(seq));
        self.received += 1;
        self.bytes += bytes as u64;
        self.last_rx_ns = self.last_rx_ns.max(rx_ns);
        let transit = rx_ns as i128 - tx_ns as i128;
        self.latency.record(transit.max(0) as u64);
        if let Some(prev) = self.last_transit {
            let d = (transit - prev).unsigned_abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit = Some(transit);
    }

    /// Frames missing between the lowest and highest sequence numbers seen.
    pub fn lost(&self) -> u64 {
        match self.first_seq {
            Some(first) => ((self.highest_seq - first) as u64 + 1).saturating_sub(self.received),
            None => 0,
        }
    }

    pub fn duration_s(&self) -> f64 {
        (self.last_rx_ns.saturating_sub(self.first_rx_ns)) as f64 / 1e9
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_reorder_duplicates_exact() {
        let mut s = FlowStats::default();
        // 0..100 with every 10th missing, 41 and 42 swapped, and 7 delivered twice.
        let mut order: Vec<u32> = (0..100).filter(|n| n % 10 != 0 || *n == 0).collect();
        let i = order.iter().position(|&n| n == 41).unwrap();
        order.swap(i, i + 1);
        order.insert(8, 7);
        for (t, seq) in order.iter().enumerate() {
            s.record(*seq, 64, 1000, 2000 + t as u64);
        }
        assert_eq!(s.lost(), 9);
        assert_eq!(s.reordered, 1);
        assert_eq!(s.duplicates, 1);
        assert_eq!(s.received, 91);
    }

    #[test]
    fn latency_and_jitter() {
        let mut s = FlowStats::default();
        // Transit alternates 10 µs and 20 µs: |D| = 10 µs every time, so J converges to 10 µs.
        for i in 0..2000u32 {
            let tx = i as u64 * 1_000_000;
            s.record(i, 64, tx, tx + if i % 2 == 0 { 10_000 } else { 20_000 });
        }
        assert_eq!(s.latency.min(), 10_000);
        assert_eq!(s.latency.max(), 20_000);
        assert!((s.latency.mean() - 15_000.0).abs() < 1.0);
        let p99 = s.latency.quantile(0.99) as f64;
        assert!((p99 - 20_000.0).abs() / 20_000.0 < 0.02, "{p99}");
        assert!((s.jitter_ns - 10_000.0).abs() < 50.0, "{}", s.jitter_ns);
    }

    #[test]
    fn histogram_quantiles_are_close() {
        let mut h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record(v);
        }
        for q in [0.5, 0.9, 0.99] {
            let want = q * 100_000.0;
            let got = h.quantile(q) as f64;
            assert!((got - want).abs() / want < 0.02, "q{q}: {got} vs {want}");
        }
    }
}
