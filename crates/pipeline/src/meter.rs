//! The meter table (spec §5.7): token buckets per band, checked per packet.

use std::collections::BTreeMap;

use ofp::error::{ErrorCode, MeterModFailed};
use ofp::group_meter::{meter_command, meter_flags, BandKind, MeterBand, OFPM_CONTROLLER, OFPM_MAX, OFPM_SLOWPATH};

use crate::flow::Nanos;

pub const MAX_METERS: u32 = 65_536;
pub const MAX_BANDS: u8 = 8;

#[derive(Clone, Debug)]
pub struct Band {
    pub config: MeterBand,
    /// Tokens in milli-units (bits for kbps meters, packets for pktps), capped at the burst.
    tokens: u64,
    capacity: u64,
    /// Milli-units added per second, and the sub-token remainder carried between refills (in
    /// milli-unit-nanoseconds) so that low rates stay exact.
    per_sec: u64,
    remainder: u64,
    pub packet_count: u64,
    pub byte_count: u64,
}

#[derive(Clone, Debug)]
pub struct Meter {
    pub flags: u16,
    pub bands: Vec<Band>,
    pub packet_count: u64,
    pub byte_count: u64,
    pub created: Nanos,
    last: Nanos,
}

/// What the meter says about a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Drop,
    /// Raise the drop precedence of the IP DSCP by this many levels.
    Remark(u8),
}

impl Meter {
    fn new(flags: u16, bands: &[MeterBand], now: Nanos) -> Meter {
        let bands = bands
            .iter()
            .map(|b| {
                let rate = b.rate as u64;
                // kbps: 1000 bits/s per unit; pktps: 1 packet/s; both held in milli-units.
                let per_sec = if flags & meter_flags::KBPS != 0 { rate * 1000 * 1000 } else { rate * 1000 };
                let burst = if flags & meter_flags::BURST != 0 && b.burst_size > 0 {
                    b.burst_size as u64 * if flags & meter_flags::KBPS != 0 { 1000 * 1000 } else { 1000 }
                } else if flags & meter_flags::KBPS != 0 {
                    // Without a configured burst, allow 100 ms worth, and at least one large frame.
                    (per_sec / 10).max(1514 * 8 * 1000)
                } else {
                    (per_sec / 10).max(1000)
                };
                Band {
                    config: b.clone(),
                    tokens: burst,
                    capacity: burst,
                    per_sec,
                    remainder: 0,
                    packet_count: 0,
                    byte_count: 0,
                }
            })
            .collect();
        Meter { flags, bands, packet_count: 0, byte_count: 0, created: now, last: now }
    }

    /// (milli-units per second, bucket capacity, kbps?) of a meter with a single drop band: what a
    /// kernel token bucket needs to police exactly like this one. `None` for other meters.
    pub fn bucket_params(&self) -> Option<(u64, u64, bool)> {
        match self.bands.as_slice() {
            [b] if matches!(b.config.kind, BandKind::Drop) => {
                Some((b.per_sec, b.capacity, self.flags & meter_flags::KBPS != 0))
            }
            _ => None,
        }
    }

    /// Adds counts of packets the kernel fast path policed with this meter.
    pub fn add_fast_path(&mut self, packets: u64, bytes: u64, dropped_packets: u64, dropped_bytes: u64) {
        self.packet_count += packets;
        self.byte_count += bytes;
        if let Some(b) = self.bands.first_mut() {
            b.packet_count += dropped_packets;
            b.byte_count += dropped_bytes;
        }
    }

    /// Whether a band of this meter remarks rather than drops.
    pub fn remarks(&self) -> bool {
        self.bands.iter().any(|b| matches!(b.config.kind, BandKind::DscpRemark { .. }))
    }

    /// Charges one packet of `bytes` and says what to do with it.
    pub fn charge(&mut self, bytes: usize, now: Nanos) -> Verdict {
        self.packet_count += 1;
        self.byte_count += bytes as u64;
        // Frames of different ports may come slightly out of time order: time is counted once.
        let elapsed = now.saturating_sub(self.last);
        self.last = self.last.max(now);
        let cost = if self.flags & meter_flags::KBPS != 0 { bytes as u64 * 8 * 1000 } else { 1000 };
        // Every band's bucket refills and is charged; of the bands the packet exceeds, the one with
        // the highest rate applies (spec §5.7).
        let mut chosen: Option<(usize, u32)> = None;
        for (i, band) in self.bands.iter_mut().enumerate() {
            let total = elapsed as u128 * band.per_sec as u128 + band.remainder as u128;
            let add = (total / 1_000_000_000) as u64;
            band.remainder = (total % 1_000_000_000) as u64;
            band.tokens = band.tokens.saturating_add(add).min(band.capacity);
            if band.tokens >= cost {
                band.tokens -= cost;
            } else if chosen.is_none_or(|(_, rate)| band.config.rate > rate) {
                chosen = Some((i, band.config.rate));
            }
        }
        match chosen {
            None => Verdict::Pass,
            Some((i, _)) => {
                let band = &mut self.bands[i];
                band.packet_count += 1;
                band.byte_count += bytes as u64;
                match band.config.kind {
                    BandKind::DscpRemark { prec_level } => Verdict::Remark(prec_level),
                    _ => Verdict::Drop,
                }
            }
        }
    }
}

#[derive(Default)]
pub struct MeterTable {
    pub meters: BTreeMap<u32, Meter>,
}

pub enum MeterChange {
    Added,
    Modified,
    Deleted(Vec<u32>),
}

impl MeterTable {
    pub fn exists(&self, id: u32) -> bool {
        self.meters.contains_key(&id)
    }

    pub fn get_mut(&mut self, id: u32) -> Option<&mut Meter> {
        self.meters.get_mut(&id)
    }

    pub fn apply(
        &mut self,
        command: u16,
        flags: u16,
        id: u32,
        bands: &[MeterBand],
        now: Nanos,
    ) -> Result<MeterChange, ErrorCode> {
        let err = |c| Err(ErrorCode::MeterModFailed(c));
        let valid_id = (1..=OFPM_MAX).contains(&id) || id == OFPM_CONTROLLER || id == OFPM_SLOWPATH;
        match command {
            meter_command::ADD | meter_command::MODIFY => {
                if !valid_id {
                    return err(MeterModFailed::InvalidMeter);
                }
                let exists = self.meters.contains_key(&id);
                if command == meter_command::ADD && exists {
                    return err(MeterModFailed::MeterExists);
                }
                if command == meter_command::MODIFY && !exists {
                    return err(MeterModFailed::UnknownMeter);
                }
                if command == meter_command::ADD && self.meters.len() as u32 >= MAX_METERS {
                    return err(MeterModFailed::OutOfMeters);
                }
                let known = meter_flags::KBPS | meter_flags::PKTPS | meter_flags::BURST | meter_flags::STATS;
                let rate_flags = flags & (meter_flags::KBPS | meter_flags::PKTPS);
                if flags & !known != 0 || rate_flags == 0 || rate_flags == (meter_flags::KBPS | meter_flags::PKTPS) {
                    return err(MeterModFailed::BadFlags);
                }
                if bands.len() > MAX_BANDS as usize {
                    return err(MeterModFailed::OutOfBands);
                }
                for b in bands {
                    match b.kind {
                        BandKind::Drop => {}
                        BandKind::DscpRemark { prec_level } if prec_level > 0 => {}
                        BandKind::DscpRemark { .. } => return err(MeterModFailed::BadBandValue),
                        BandKind::Experimenter { .. } => return err(MeterModFailed::BadBand),
                    }
                    if b.rate == 0 {
                        return err(MeterModFailed::BadRate);
                    }
                    if flags & meter_flags::BURST == 0 && b.burst_size != 0 {
                        return err(MeterModFailed::BadBurst);
                    }
                }
                let mut meter = Meter::new(flags, bands, now);
                if let Some(old) = self.meters.get(&id) {
                    meter.packet_count = old.packet_count;
                    meter.byte_count = old.byte_count;
                    meter.created = old.created;
                }
                self.meters.insert(id, meter);
                Ok(if exists { MeterChange::Modified } else { MeterChange::Added })
            }
            meter_command::DELETE => {
                let ids: Vec<u32> = if id == ofp::group_meter::OFPM_ALL {
                    self.meters.keys().copied().collect()
                } else if self.meters.contains_key(&id) {
                    vec![id]
                } else {
                    vec![]
                };
                for m in &ids {
                    self.meters.remove(m);
                }
                Ok(MeterChange::Deleted(ids))
            }
            _ => err(MeterModFailed::BadCommand),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames of two ports may reach a shared meter slightly out of time order; the time between
    /// them must be credited once, not twice.
    #[test]
    fn an_earlier_time_after_a_later_one_adds_no_tokens() {
        let band = MeterBand { kind: BandKind::Drop, rate: 1000, burst_size: 1 };
        let mut m = Meter::new(meter_flags::PKTPS | meter_flags::BURST, &[band], 0);
        // The bucket holds one packet; 1000 packets/s refill one per ms.
        assert_eq!(m.charge(64, 0), Verdict::Pass);
        assert_eq!(m.charge(64, 1_000_000), Verdict::Pass);
        assert_eq!(m.charge(64, 500_000), Verdict::Drop, "an older frame finds the bucket empty");
        // Had the meter gone back to 0.5 ms, the next frame would find half a ms counted again.
        assert_eq!(m.charge(64, 1_600_000), Verdict::Drop);
        assert_eq!(m.charge(64, 2_000_000), Verdict::Pass);
    }
}
