//! IEEE 802.1CB's sequence recovery function with the vector recovery algorithm (7.4.3.4): which
//! copies of a replicated stream's frames pass, by their sequence numbers. Pure: the caller
//! passes the time in.
//!
//! `recov_seq` is the highest number accepted; bit `i` of `history` says whether `recov_seq − i`
//! was. A frame `delta = seq − recov_seq` (modulo 2^16, read signed) away:
//! - ahead (delta > 0): accepted; the window slides, and the numbers it slides past unseen are lost;
//! - within the window behind (−history_length < delta ≤ 0): accepted once, a duplicate after that;
//! - further away either way: a rogue frame, discarded.
//!
//! With nothing accepted for `reset_ns`, the next frame is taken whatever its number (TakeAny), as
//! after a talker restarts its sequence.

use crate::Nanos;

/// The window the standard allows: 2 to 2^15 − 1; 64 here at most, one machine word.
pub const MAX_HISTORY: u32 = 64;

/// What became of one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovered {
    Passed,
    /// Passed, but behind one accepted before it.
    PassedOutOfOrder,
    Duplicate,
    Rogue,
}

/// The standard's per-stream counters (frerCpsSeqRcvy…).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryCounters {
    pub passed: u64,
    pub discarded: u64,
    pub out_of_order: u64,
    pub rogue: u64,
    pub lost: u64,
    pub resets: u64,
}

#[derive(Clone, Debug)]
pub struct VectorRecovery {
    history_length: u32,
    reset_ns: Nanos,
    recov_seq: u16,
    history: u64,
    /// The slots of numbers since the first taken: only they can be lost.
    expected: u64,
    take_any: bool,
    last_accepted: Option<Nanos>,
    pub counters: RecoveryCounters,
}

impl VectorRecovery {
    /// `history_length` 2..=MAX_HISTORY (the configuration checks it).
    pub fn new(history_length: u32, reset_ns: Nanos) -> VectorRecovery {
        VectorRecovery {
            history_length: history_length.clamp(2, MAX_HISTORY),
            reset_ns,
            recov_seq: 0,
            history: 0,
            expected: 0,
            take_any: true,
            last_accepted: None,
            counters: RecoveryCounters::default(),
        }
    }

    /// The reset timer: nothing accepted for `reset_ns` takes any number next. Lost frames are
    /// counted as the window slides, so a reset drops none of what it had not seen.
    fn expire(&mut self, now: Nanos) {
        if let Some(at) = self.last_accepted {
            if !self.take_any && now.saturating_sub(at) >= self.reset_ns {
                self.take_any = true;
                self.counters.resets += 1;
            }
        }
    }

    pub fn frame(&mut self, seq: u16, now: Nanos) -> Recovered {
        self.expire(now);
        let c = &mut self.counters;
        if self.take_any {
            self.take_any = false;
            self.recov_seq = seq;
            self.history = 1;
            self.expected = 1;
            self.last_accepted = Some(now);
            c.passed += 1;
            return Recovered::Passed;
        }
        let delta = seq.wrapping_sub(self.recov_seq) as i16 as i32;
        let window = self.history_length as i32;
        if delta >= window || delta <= -window {
            c.rogue += 1;
            c.discarded += 1;
            return Recovered::Rogue;
        }
        if delta <= 0 {
            let bit = 1u64 << (-delta);
            if self.history & bit != 0 {
                c.discarded += 1;
                return Recovered::Duplicate;
            }
            self.history |= bit;
            self.last_accepted = Some(now);
            c.passed += 1;
            c.out_of_order += 1;
            return Recovered::PassedOutOfOrder;
        }
        // Ahead (0 < delta < history_length): the window slides by delta. The numbers it passes
        // over are expected from now on; those that leave it unseen, and were expected, are lost.
        let (hl, d) = (self.history_length, delta as u32);
        let keep = if hl == 64 { u64::MAX } else { (1u64 << hl) - 1 };
        let missed = (self.expected >> (hl - d)) & !(self.history >> (hl - d));
        c.lost += missed.count_ones() as u64;
        self.history = ((self.history << d) & keep) | 1;
        self.expected = ((self.expected << d) | ((1u64 << d) - 1)) & keep;
        self.recov_seq = seq;
        self.last_accepted = Some(now);
        c.passed += 1;
        if delta != 1 {
            c.out_of_order += 1;
        }
        Recovered::Passed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(r: &mut VectorRecovery, seqs: &[u16]) -> Vec<Recovered> {
        seqs.iter().map(|&s| r.frame(s, 0)).collect()
    }

    #[test]
    fn two_copies_of_every_frame_pass_once() {
        let mut r = VectorRecovery::new(8, 1_000_000);
        let seqs: Vec<u16> = (0..100u16).flat_map(|s| [s, s]).collect();
        let out = run(&mut r, &seqs);
        assert!(out.iter().step_by(2).all(|&o| o == Recovered::Passed));
        assert!(out.iter().skip(1).step_by(2).all(|&o| o == Recovered::Duplicate));
        assert_eq!((r.counters.passed, r.counters.discarded, r.counters.lost), (100, 100, 0));
    }

    #[test]
    fn a_late_copy_within_the_window_passes_once_and_out_of_order() {
        let mut r = VectorRecovery::new(8, 1_000_000);
        // One path delivers 0..=5, the other is late with 3 (which the first lost) and 4.
        let out = run(&mut r, &[0, 1, 2, 4, 5, 3, 4]);
        assert_eq!(out[5], Recovered::PassedOutOfOrder);
        assert_eq!(out[6], Recovered::Duplicate);
        assert_eq!(
            r.counters,
            RecoveryCounters { passed: 6, discarded: 1, out_of_order: 2, rogue: 0, lost: 0, resets: 0 }
        );
    }

    #[test]
    fn numbers_that_slide_out_unseen_are_lost_and_far_ones_are_rogue() {
        let mut r = VectorRecovery::new(4, 1_000_000);
        run(&mut r, &[10, 11]);
        // 12 and 13 never come: 14 and 15 are accepted, and when 16 slides the window past
        // them... the window holds 4: after 15, 12 and 13 are still in it; after 17 they leave.
        run(&mut r, &[14, 15, 16, 17]);
        assert_eq!(r.counters.lost, 2);
        assert_eq!(r.frame(9, 0), Recovered::Rogue, "four behind: outside the window");
        assert_eq!(r.frame(100, 0), Recovered::Rogue, "far ahead");
        assert_eq!(r.frame(u16::MAX, 0), Recovered::Rogue);
        // Wrapping: 65535 → 0 is one step.
        let mut r = VectorRecovery::new(4, 1_000_000);
        assert_eq!(
            run(&mut r, &[65534, 65535, 0, 1, 0]),
            [Recovered::Passed, Recovered::Passed, Recovered::Passed, Recovered::Passed, Recovered::Duplicate]
        );
    }

    #[test]
    fn after_the_reset_time_any_number_is_taken() {
        let mut r = VectorRecovery::new(8, 1_000);
        assert_eq!(r.frame(500, 0), Recovered::Passed);
        assert_eq!(r.frame(7, 10), Recovered::Rogue);
        assert_eq!(r.frame(7, 2_000), Recovered::Passed, "the talker restarted");
        assert_eq!(r.counters.resets, 1);
        assert_eq!(r.frame(8, 2_001), Recovered::Passed);
    }
}
