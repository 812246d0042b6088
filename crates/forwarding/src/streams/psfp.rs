//! IEEE 802.1Qci per-stream filtering and policing (802.1Q-2018 8.6.5.1): a stream's frames pass
//! its filter (the largest service data unit), its gate (a gate control list on ingress, which
//! may also give them an internal priority: their egress queue), then its flow meter (MEF 10.3's
//! two-rate three-colour meter, the one 802.1Q names). Pure: the time is passed in.

use crate::bucket::TokenBucket;
use crate::Nanos;

/// Token units a second of a meter's rate is counted in, per bit: rates in bit/s grow a bucket
/// by their value a nanosecond, and a byte costs 8 × 10⁹ (`crate::bucket`).
const UNITS_PER_BYTE: u64 = 8 * 1_000_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Colour {
    Green,
    Yellow,
    Red,
}

/// A flow meter's parameters (802.1Q 8.6.5.1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeterConfig {
    /// Committed and excess information rates (bit/s) and burst sizes (bytes).
    pub cir_bps: u64,
    pub cbs_bytes: u64,
    pub eir_bps: u64,
    pub ebs_bytes: u64,
    /// Coupling flag: what overflows the committed bucket goes to the excess one.
    pub coupled: bool,
    /// Colour-aware: a frame marked drop-eligible (DEI) arrives yellow and may only use the
    /// excess bucket; otherwise every frame arrives green.
    pub colour_aware: bool,
    /// Yellow frames are dropped rather than passed marked drop-eligible.
    pub drop_on_yellow: bool,
}

#[derive(Clone, Debug)]
pub struct Meter {
    cfg: MeterConfig,
    committed: TokenBucket,
    excess: TokenBucket,
}

impl Meter {
    pub fn new(cfg: MeterConfig) -> Meter {
        Meter {
            cfg,
            committed: TokenBucket::new(cfg.cir_bps, cfg.cbs_bytes * UNITS_PER_BYTE),
            excess: TokenBucket::new(cfg.eir_bps, cfg.ebs_bytes * UNITS_PER_BYTE),
        }
    }

    pub fn config(&self) -> MeterConfig {
        self.cfg
    }

    /// The colour of a frame of `bytes` arriving at `now`, `yellow_in` if it came marked
    /// drop-eligible; the tokens it costs are taken from the bucket that covers it.
    pub fn colour(&mut self, bytes: usize, yellow_in: bool, now: Nanos) -> Colour {
        let overflow = self.committed.refill(now);
        self.excess.refill(now);
        if self.cfg.coupled {
            self.excess.add(overflow);
        }
        let cost = bytes as u64 * UNITS_PER_BYTE;
        let green_in = !(self.cfg.colour_aware && yellow_in);
        if green_in && self.committed.take(cost) {
            Colour::Green
        } else if self.excess.take(cost) {
            Colour::Yellow
        } else {
            Colour::Red
        }
    }
}

/// One entry of a stream gate's control list: for `duration_ns`, open or closed, and while open
/// the internal priority (egress queue) its frames get, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GateEntry {
    pub duration_ns: u64,
    pub open: bool,
    pub ipv: Option<u8>,
}

/// A stream gate: its control list repeats every `cycle_ns` from `base_ns`; past the entries' end
/// the last one holds until the cycle ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gate {
    pub base_ns: u64,
    pub cycle_ns: u64,
    pub entries: Vec<GateEntry>,
}

impl Gate {
    /// The entry in force at `t`.
    pub fn at(&self, t: u64) -> GateEntry {
        let mut offset = t.saturating_sub(self.base_ns) % self.cycle_ns.max(1);
        for e in &self.entries {
            if offset < e.duration_ns {
                return *e;
            }
            offset -= e.duration_ns;
        }
        *self.entries.last().expect("a gate has entries")
    }
}

/// The standard's per-stream counters (8.6.5.1.1 and .2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PsfpCounters {
    /// Frames larger than the filter's maximum SDU.
    pub sdu_too_large: u64,
    /// Frames the gate found closed.
    pub gate_closed: u64,
    pub green: u64,
    pub yellow: u64,
    /// Red, and yellow with drop-on-yellow: dropped by the meter.
    pub red: u64,
}

/// Per-stream filtering and policing.
#[derive(Clone, Debug)]
pub struct Psfp {
    pub max_sdu: Option<usize>,
    pub gate: Option<Gate>,
    pub meter: Option<Meter>,
    pub counters: PsfpCounters,
}

/// What policing made of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policed {
    /// Passes; `mark` says to set its drop-eligible bit (yellow), `queue` its internal priority.
    Pass {
        mark: bool,
        queue: Option<u8>,
    },
    Drop,
}

impl Psfp {
    /// A frame whose service data unit is `sdu` bytes (`bytes` on the wire, FCS included),
    /// arriving at `now`, drop-eligible if `yellow_in`.
    pub fn police(&mut self, sdu: usize, bytes: usize, yellow_in: bool, now: Nanos) -> Policed {
        let c = &mut self.counters;
        if self.max_sdu.is_some_and(|max| sdu > max) {
            c.sdu_too_large += 1;
            return Policed::Drop;
        }
        let mut queue = None;
        if let Some(g) = &self.gate {
            let e = g.at(now);
            if !e.open {
                c.gate_closed += 1;
                return Policed::Drop;
            }
            queue = e.ipv;
        }
        let Some(m) = self.meter.as_mut() else { return Policed::Pass { mark: false, queue } };
        match m.colour(bytes, yellow_in, now) {
            Colour::Green => {
                c.green += 1;
                Policed::Pass { mark: false, queue }
            }
            Colour::Yellow if !m.config().drop_on_yellow => {
                c.yellow += 1;
                Policed::Pass { mark: true, queue }
            }
            _ => {
                c.red += 1;
                Policed::Drop
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn meter(coupled: bool, colour_aware: bool) -> Meter {
        // 8 Mbit/s committed (1 000 bytes a ms), 1 500 bytes of burst; as much excess.
        Meter::new(MeterConfig {
            cir_bps: 8_000_000,
            cbs_bytes: 1500,
            eir_bps: 8_000_000,
            ebs_bytes: 1500,
            coupled,
            colour_aware,
            drop_on_yellow: false,
        })
    }

    #[test]
    fn green_within_the_committed_rate_then_yellow_then_red() {
        let mut m = meter(false, false);
        // Both buckets full: a burst of 1 000-byte frames at once: one green, one yellow, red.
        let burst: Vec<Colour> = (0..3).map(|_| m.colour(1000, false, 0)).collect();
        assert_eq!(burst, [Colour::Green, Colour::Yellow, Colour::Red]);
        // A frame a millisecond at the committed rate: all green from here (each bucket refills
        // 1 000 bytes a ms).
        assert!((1..=20).all(|i| m.colour(1000, false, i * MS) == Colour::Green));
        // At twice the committed rate: half green, half yellow (the excess rate covers the rest).
        let t0 = 21 * MS;
        let colours: Vec<Colour> = (0..40).map(|i| m.colour(1000, false, t0 + i * MS / 2)).collect();
        let green = colours.iter().filter(|&&c| c == Colour::Green).count();
        let yellow = colours.iter().filter(|&&c| c == Colour::Yellow).count();
        assert!((19..=21).contains(&green) && green + yellow == 40, "{colours:?}");
    }

    #[test]
    fn colour_aware_keeps_yellow_frames_out_of_the_committed_bucket() {
        let mut aware = meter(false, true);
        let mut blind = meter(false, false);
        assert_eq!(aware.colour(1000, true, 0), Colour::Yellow, "the committed bucket is full, but not for it");
        assert_eq!(blind.colour(1000, true, 0), Colour::Green);
        assert_eq!(aware.colour(1000, true, 0), Colour::Red, "the excess bucket is spent");
        assert_eq!(aware.colour(1000, false, 0), Colour::Green, "a green frame still has the committed bucket");
    }

    #[test]
    fn coupling_hands_the_committed_overflow_to_the_excess_bucket() {
        let cfg = MeterConfig { eir_bps: 0, ..meter(true, false).config() };
        let mut coupled = Meter::new(cfg);
        let mut apart = Meter::new(MeterConfig { coupled: false, ..cfg });
        for m in [&mut coupled, &mut apart] {
            // Empty both buckets, then wait: the committed bucket fills in 1.5 ms and overflows.
            while m.colour(100, false, 0) != Colour::Red {}
        }
        let at = 4 * MS;
        assert_eq!(coupled.colour(1400, false, at), Colour::Green);
        assert_eq!(coupled.colour(1400, false, at), Colour::Yellow, "the overflow went to the excess bucket");
        assert_eq!(apart.colour(1400, false, at), Colour::Green);
        assert_eq!(apart.colour(1400, false, at), Colour::Red, "no excess rate, no coupling");
    }

    #[test]
    fn the_filter_the_gate_and_the_meter_in_turn() {
        let gate = Gate {
            base_ns: 0,
            cycle_ns: 10 * MS,
            entries: vec![
                GateEntry { duration_ns: 5 * MS, open: true, ipv: Some(6) },
                GateEntry { duration_ns: 5 * MS, open: false, ipv: None },
            ],
        };
        let mut p = Psfp {
            max_sdu: Some(500),
            gate: Some(gate),
            meter: Some(meter(false, false)),
            counters: Default::default(),
        };
        assert_eq!(p.police(501, 600, false, 0), Policed::Drop);
        assert_eq!(p.police(400, 1000, false, 7 * MS), Policed::Drop, "gate closed");
        assert_eq!(p.police(400, 1000, false, 12 * MS), Policed::Pass { mark: false, queue: Some(6) });
        assert_eq!(p.police(400, 1000, false, 12 * MS), Policed::Pass { mark: true, queue: Some(6) }, "yellow");
        assert_eq!(p.police(400, 1000, false, 12 * MS), Policed::Drop, "red");
        let c = p.counters;
        assert_eq!((c.sdu_too_large, c.gate_closed, c.green, c.yellow, c.red), (1, 1, 1, 1, 1));
        p.meter = Some(Meter::new(MeterConfig { drop_on_yellow: true, ..meter(false, false).config() }));
        p.police(400, 1000, false, 12 * MS);
        assert_eq!(p.police(400, 1000, false, 12 * MS), Policed::Drop, "drop on yellow");
    }
}
