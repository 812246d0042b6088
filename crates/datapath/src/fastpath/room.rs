//! Room in the kernel's map: a full map gives up entries nothing has hit for a while, and a
//! translation the kernel had no room for is offered again once there may be some.
//!
//! Without this a burst of distinct flows (17 000 UDP ports from one host) fills the map and every
//! flow after it stays in userspace for as long as the burst's entries live, which is for ever
//! if the burst repeats. Open vSwitch's revalidators do the same with idle datapath flows when
//! the datapath holds more than its flow limit.

use pipeline::classifier::RuleId;

use super::{credit_hits, FastPath};

/// An entry the kernel has not hit for this long may be evicted to make room for a new one.
/// Ten harvests: long enough that an entry in use is never taken for an idle one.
pub const EVICT_IDLE: u64 = 1_000_000_000;

/// Why a translation is not in the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// No room (map full, every mask slot taken, or another key with its hash): offered again
    /// after the next harvest (`at` is the harvest it was refused after).
    NoRoom { at: u64 },
    /// The kernel program cannot carry it out: it stays in userspace while it lives.
    Unfit,
}

impl FastPath {
    /// Whether the pipeline's cache entry `id`, hit in userspace, should be offered to the
    /// kernel: it is not there, and it was never refused, or refused for room before the last
    /// harvest (which may have made some).
    pub fn wants(&self, id: RuleId) -> bool {
        if self.by_source.contains_key(&id) {
            return false;
        }
        match self.refusals.get(&id) {
            None => true,
            Some(Refusal::Unfit) => false,
            Some(&Refusal::NoRoom { at }) => self.clock > at,
        }
    }

    /// Notes why `source` was not installed. The notes are bounded (twice the map's size): an
    /// entry not noted is offered on its next hit, which costs an encoding, not a syscall.
    pub(super) fn refuse(&mut self, source: RuleId, why: Refusal) {
        self.refused += 1;
        if self.refusals.len() < 2 * self.capacity as usize || self.refusals.contains_key(&source) {
            self.refusals.insert(source, why);
        }
    }

    /// Whether the map has room for one more entry, making some if it can: the entries of
    /// earlier generations go first, then those idle for [`EVICT_IDLE`], the longest idle
    /// first, up to an eighth of the map at once (one scan pays for many installs). Scans at
    /// most once between two harvests.
    pub(super) fn has_room(&mut self) -> bool {
        let capacity = self.capacity as usize;
        if self.entries.len() < capacity {
            return true;
        }
        if self.room_sought_at == Some(self.clock) {
            return false;
        }
        self.room_sought_at = Some(self.clock);
        if self.entries.values().any(|i| i.generation != self.generation) {
            self.sweep();
            if self.entries.len() < capacity {
                return true;
            }
        }
        let mut idle: Vec<(u64, Vec<u8>)> = self
            .entries
            .iter()
            .filter(|(_, i)| self.clock.saturating_sub(i.last_hit) >= EVICT_IDLE)
            .map(|(k, i)| (i.last_hit, k.clone()))
            .collect();
        let n = idle.len().min(capacity.div_ceil(8));
        if n == 0 {
            return false;
        }
        idle.select_nth_unstable(n - 1);
        for (_, k) in idle.drain(..n) {
            // Hits since the last harvest are not lost: the next harvest carries them.
            if let Some((packets, bytes)) = self.take_out(&k) {
                if let Some(inst) = self.entries.get_mut(&k) {
                    credit_hits(
                        inst,
                        packets,
                        bytes,
                        &mut self.carried,
                        &mut self.mask_hits,
                        &mut self.no_output_drops,
                        &k,
                    );
                }
            }
            self.forget_entry(&k);
            self.evicted += 1;
        }
        true
    }
}
