//! Transmission selection on a paced port (IEEE 802.1Q §8.6.8): strict priority, deficit round
//! robin among queues of one level, the credit-based shaper (§8.6.8.2) and the time-aware shaper's
//! gates (§8.6.8.4). Pure: no I/O, the time is passed in.
//!
//! The port is paced to `rate_bps` (a veth has no rate of its own, and without a bottleneck no
//! scheduler matters). The schedule runs on a *virtual* wire: every frame gets the start time the
//! standard's selection would give it on a link of that rate, computed from when frames arrived,
//! the credits and the gates, never from when the forwarding thread happened to wake (except on
//! a port paced to its own link, which catches up only a wake-up's worth: `Schedule::link`). A late
//! wake-up delays the frame's departure but not the schedule: rates, credits and gate windows
//! stay exact, and the lateness is what the wake-up strategy (sleep, SCHED_FIFO, busy) decides.
//!
//! Over 700 lines with its tests, one concern: the four selection rules interlock (a shaper's
//! credit and a gate decide eligibility, strict priority and DRR then pick), so they are read and
//! tested together.

use std::collections::VecDeque;

pub const N_QUEUES: usize = 8;
/// What a frame occupies on the wire beyond its bytes: FCS (4), preamble and SFD (8), IFG (12).
pub const WIRE_OVERHEAD: u64 = (packet::FCS_LEN + packet::PREAMBLE_LEN + packet::IFG_LEN) as u64;
/// The largest frame a shaper is dimensioned for, as the wire holds it: 1522 bytes (VLAN-tagged,
/// FCS included) with preamble, SFD and IFG. Credit moves with wire time, overhead included.
pub const MAX_FRAME_BITS: i64 = frame_wire_bits(1522);

/// A frame of `bytes` (FCS included) as the wire holds it, in bits.
pub const fn frame_wire_bits(bytes: u32) -> i64 {
    (bytes as i64 + WIRE_OVERHEAD as i64 - 4) * 8
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shaper {
    /// Strict priority at the queue's own level (its id).
    Strict,
    /// Deficit round robin: every DRR queue shares one level (the highest DRR queue id's), and
    /// gets `quantum` bytes per round.
    Drr { quantum: u32 },
    /// The credit-based shaper.
    Cbs(Cbs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cbs {
    pub idle_slope_bps: u64,
    /// Upper bound of the credit (bits), reached while the queue waits.
    pub hi_credit_bits: i64,
    /// Lower bound (negative, bits), reached by sending.
    pub lo_credit_bits: i64,
}

impl Cbs {
    /// The bounds of the highest shaped class (802.1Q Annex L, class A): hiCredit =
    /// maxInterferenceSize × idleSlope / portTransmitRate, the interference one maximum frame of
    /// a lower class already on the wire, and loCredit = maxFrameSize × sendSlope /
    /// portTransmitRate, with sendSlope = idleSlope − portTransmitRate.
    pub fn derived(idle_slope_bps: u64, rate_bps: u64, max_interference_bits: i64) -> Cbs {
        let class = CbsClass { idle_slope_bps, max_frame_bits: MAX_FRAME_BITS };
        Cbs::below(class, rate_bps, max_interference_bits, &[])
    }

    /// The bounds of `class` below the shaped classes `above` (802.1Q Annex L). While it waits,
    /// a class sees one maximum frame of a lower class (`lower_frame_bits`) on the wire, stretched
    /// by what the classes above take of the wire meanwhile (their idle slopes), and each class
    /// above may send one frame past its share: hiCredit = idleSlope × (lower / (rate − Σ
    /// idleSlope above) + Σ maxFrame above / rate). For the highest class that is class A's
    /// bound, for the next class B's; further down, the same sums. A strict queue above a shaped
    /// one is not in them: its traffic has no bound to add.
    pub fn below(class: CbsClass, rate_bps: u64, lower_frame_bits: i64, above: &[CbsClass]) -> Cbs {
        let (rate, idle) = (rate_bps as i128, class.idle_slope_bps as i128);
        let reserved_above: i128 = above.iter().map(|c| c.idle_slope_bps as i128).sum();
        let frames_above: i128 = above.iter().map(|c| c.max_frame_bits as i128).sum();
        let hi = idle * lower_frame_bits as i128 / (rate - reserved_above).max(1) + idle * frames_above / rate;
        Cbs {
            idle_slope_bps: class.idle_slope_bps,
            hi_credit_bits: hi as i64,
            lo_credit_bits: (class.max_frame_bits as i128 * (idle - rate) / rate) as i64,
        }
    }
}

/// A credit-based class as Annex L dimensions it: its reserved rate and its largest frame (as
/// the wire holds it, [`frame_wire_bits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CbsClass {
    pub idle_slope_bps: u64,
    pub max_frame_bits: i64,
}

/// Every shaped queue's bounds on a port of `rate_bps`, from the classes above it and the largest
/// frame below it (a shaped queue's own largest; [`MAX_FRAME_BITS`] for any other queue, and
/// for queue 0, which has none below but is dimensioned as if it had).
pub fn annex_l_bounds(rate_bps: u64, classes: &[Option<CbsClass>; N_QUEUES]) -> [Option<Cbs>; N_QUEUES] {
    std::array::from_fn(|q| {
        let class = classes[q]?;
        let lower = (0..q).map(|p| classes[p].map_or(MAX_FRAME_BITS, |c| c.max_frame_bits)).max();
        let above: Vec<CbsClass> = classes[q + 1..].iter().flatten().copied().collect();
        Some(Cbs::below(class, rate_bps, lower.unwrap_or(MAX_FRAME_BITS), &above))
    })
}

/// One entry of a gate control list: for `duration_ns`, the gates of the queues whose bit is
/// set in `open` are open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GateEntry {
    pub duration_ns: u64,
    pub open: u8,
}

/// The time-aware shaper's gate control list, repeated every `cycle_ns` from `base_ns` (on the
/// scheduler's clock). If the entries end before the cycle does, the last one holds until it ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gates {
    pub base_ns: u64,
    pub cycle_ns: u64,
    pub entries: Vec<GateEntry>,
}

impl Gates {
    /// Open windows of `queue` within one cycle, relative to its start, adjacent ones merged.
    fn windows(&self, queue: usize) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        let mut at = 0;
        let n = self.entries.len();
        for (i, e) in self.entries.iter().enumerate() {
            let end = if i + 1 == n { self.cycle_ns } else { at + e.duration_ns };
            if e.open & (1 << queue) != 0 && end > at {
                match out.last_mut() {
                    Some(last) if last.1 == at => last.1 = end,
                    _ => out.push((at, end)),
                }
            }
            at = end;
        }
        out
    }

    /// Whether `queue`'s gate is open at `t`.
    pub fn is_open(&self, queue: usize, t: u64) -> bool {
        let rel = self.offset(t);
        self.windows(queue).iter().any(|&(s, e)| s <= rel && rel < e)
    }

    fn offset(&self, t: u64) -> u64 {
        (t as i128 - self.base_ns as i128).rem_euclid(self.cycle_ns as i128) as u64
    }

    /// The earliest time at or after `t` at which `queue` may start a transmission of `d` ns that
    /// ends before its gate closes (the length-aware guard band). `None` if no window is that long.
    pub fn start_at(&self, queue: usize, t: u64, d: u64) -> Option<u64> {
        let windows = self.windows(queue);
        if windows.is_empty() {
            return None;
        }
        let cycle_start = t - self.offset(t);
        // Three cycles of windows, merged across cycle boundaries, cover every start.
        let mut abs: Vec<(u64, u64)> = Vec::new();
        for k in 0..3 {
            for &(s, e) in &windows {
                let (s, e) = (cycle_start + k * self.cycle_ns + s, cycle_start + k * self.cycle_ns + e);
                match abs.last_mut() {
                    Some(last) if last.1 == s => last.1 = e,
                    _ => abs.push((s, e)),
                }
            }
        }
        abs.into_iter().filter(|&(_, e)| e > t).find_map(|(s, e)| {
            let start = s.max(t);
            (start + d <= e).then_some(start)
        })
    }
}

/// A port's schedule: its rate, a shaper per queue, and optionally gates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub rate_bps: u64,
    pub shapers: [Shaper; N_QUEUES],
    pub gates: Option<Gates>,
    /// How far in the past a frame may start on the virtual wire after a late wake-up (None:
    /// as far as the schedule says). A port paced to its own link's speed bounds it: the frame
    /// goes out now, behind what the link still carries, so without a bound each late wake-up
    /// would leave that much more waiting in the interface, first in first out, and for good
    /// while the port is saturated (measured: a standing 1 ms at 100 Mbit/s).
    pub catch_up_ns: Option<u64>,
}

impl Schedule {
    /// Strict priority on every queue at `rate_bps`.
    pub fn strict(rate_bps: u64) -> Schedule {
        Schedule { rate_bps, shapers: std::array::from_fn(|_| Shaper::Strict), gates: None, catch_up_ns: None }
    }

    /// Strict priority at the speed of the port's own link, catching up at most `lateness_ns`:
    /// after a late wake-up the interface gets what the link would have carried meanwhile up to
    /// that much, and no more, so a high-priority frame finds at most that in front of it beside
    /// the frame on the wire. Without it the thread's lateness would leave the link idle (one
    /// frame per wake-up when frames are shorter than the lateness).
    pub fn link(rate_bps: u64, lateness_ns: u64) -> Schedule {
        Schedule { catch_up_ns: Some(lateness_ns), ..Schedule::strict(rate_bps) }
    }

    /// Checks the schedule; the error names the queue or entry and the reason.
    pub fn check(&self) -> Result<(), String> {
        if self.rate_bps == 0 {
            return Err("rate must be above 0".into());
        }
        let mut reserved = 0u64;
        for (q, s) in self.shapers.iter().enumerate() {
            match s {
                Shaper::Strict => {}
                Shaper::Drr { quantum } if *quantum == 0 => {
                    return Err(format!("queue {q}: DRR quantum must be above 0"))
                }
                Shaper::Drr { .. } => {}
                Shaper::Cbs(c) => {
                    if c.idle_slope_bps == 0 || c.idle_slope_bps >= self.rate_bps {
                        return Err(format!(
                            "queue {q}: idle slope {} kbit/s must be above 0 and below the port rate {} kbit/s",
                            c.idle_slope_bps / 1000,
                            self.rate_bps / 1000
                        ));
                    }
                    if c.hi_credit_bits <= 0 || c.lo_credit_bits >= 0 {
                        return Err(format!("queue {q}: hicredit must be above 0 and locredit below 0"));
                    }
                    reserved += c.idle_slope_bps;
                }
            }
        }
        if reserved >= self.rate_bps {
            return Err(format!(
                "the credit-based queues reserve {} kbit/s, not below the port rate {} kbit/s",
                reserved / 1000,
                self.rate_bps / 1000
            ));
        }
        if let Some(g) = &self.gates {
            if g.cycle_ns == 0 || g.entries.is_empty() {
                return Err("gates: a cycle and at least one entry are needed".into());
            }
            if let Some(i) = g.entries.iter().position(|e| e.duration_ns == 0) {
                return Err(format!("gates: entry {} lasts 0 ns", i + 1));
            }
            let sum: u64 = g.entries.iter().map(|e| e.duration_ns).sum();
            if sum > g.cycle_ns {
                return Err(format!("gates: the entries last {sum} ns, longer than the {} ns cycle", g.cycle_ns));
            }
        }
        Ok(())
    }

    /// How long `len` bytes occupy the wire, in ns (rounded up).
    pub fn wire_ns(&self, len: usize) -> u64 {
        ((len as u64 + WIRE_OVERHEAD) * 8 * 1_000_000_000).div_ceil(self.rate_bps)
    }

    fn level(&self, q: usize) -> usize {
        match self.shapers[q] {
            Shaper::Drr { .. } => (0..N_QUEUES).rev().find(|&i| matches!(self.shapers[i], Shaper::Drr { .. })).unwrap(),
            _ => q,
        }
    }
}

/// The head of a queue, as the scheduler sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub len: usize,
    /// When it was queued (scheduler clock).
    pub at: u64,
}

/// What the scheduler decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// Send the head of this queue now; it starts on the wire at `start` (≤ now).
    Send { queue: usize, start: u64 },
    /// Nothing may start before this time.
    Wait(u64),
    /// The head of this queue can never be sent (longer than any window its gate opens): drop it.
    Discard(usize),
    /// Nothing is queued.
    Idle,
}

/// A port's scheduling state.
#[derive(Clone, Debug)]
pub struct Scheduler {
    pub schedule: Schedule,
    /// When the virtual wire is free again.
    link_free_at: u64,
    /// CBS credit in nano-bits (bits × 10⁹, so that slope × ns adds up exactly), and when it was
    /// last brought up to date.
    credit: [i128; N_QUEUES],
    credit_at: [u64; N_QUEUES],
    deficit: [u64; N_QUEUES],
    /// The DRR queue whose turn it is, and whether it has had its quantum for this turn.
    drr_turn: usize,
    drr_granted: bool,
}

const NANO: i128 = 1_000_000_000;

impl Scheduler {
    pub fn new(schedule: Schedule) -> Scheduler {
        Scheduler {
            schedule,
            link_free_at: 0,
            credit: [0; N_QUEUES],
            credit_at: [0; N_QUEUES],
            deficit: [0; N_QUEUES],
            drr_turn: N_QUEUES - 1,
            drr_granted: false,
        }
    }

    /// A new schedule, keeping what is queued and the wire's state (credits restart at 0).
    pub fn reconfigure(&mut self, schedule: Schedule) {
        let link_free_at = self.link_free_at;
        *self = Scheduler::new(schedule);
        self.link_free_at = link_free_at;
    }

    /// A queue's CBS credit in bits, as of its last update.
    pub fn credit_bits(&self, q: usize) -> Option<i64> {
        matches!(self.schedule.shapers[q], Shaper::Cbs(_)).then(|| (self.credit[q] / NANO) as i64)
    }

    fn cbs(&self, q: usize) -> Option<Cbs> {
        match self.schedule.shapers[q] {
            Shaper::Cbs(c) => Some(c),
            _ => None,
        }
    }

    /// The credit of `q` at `t`, had it been `waiting` (frames queued) since its last update.
    fn credit_at_time(&self, q: usize, t: u64, waiting: bool) -> i128 {
        let Some(c) = self.cbs(q) else { return 0 };
        let dt = t.saturating_sub(self.credit_at[q]) as i128;
        let grown = self.credit[q] + c.idle_slope_bps as i128 * dt;
        if waiting {
            grown.min(c.hi_credit_bits as i128 * NANO)
        } else if self.credit[q] > 0 {
            0 // an empty queue keeps no positive credit
        } else {
            grown.min(0)
        }
    }

    fn bring(&mut self, q: usize, t: u64, waiting: bool) {
        if self.cbs(q).is_some() && t > self.credit_at[q] {
            self.credit[q] = self.credit_at_time(q, t, waiting);
            self.credit_at[q] = t;
        }
    }

    /// A frame was queued on `q` at `t`; `was_empty` says whether the queue held nothing before.
    pub fn queued(&mut self, q: usize, t: u64, was_empty: bool) {
        if was_empty {
            self.bring(q, t, false);
        }
    }

    /// When the head of `q` may start, at the earliest `t0`: after it arrived, once its credit is
    /// back to 0, and inside an open window of its gate long enough for it.
    ///
    /// A start in the past stays in the past (the virtual wire catches up on a late wake-up)
    /// except where a gate would be broken: a gate closes at a wall-clock time, so a frame that
    /// the thread, late at `now`, can no longer finish inside the window waits for the next one.
    /// Without this a frame that arrived in time but was picked up late left after its gate had
    /// closed.
    fn eligible_at(&self, q: usize, head: Head, t0: u64, now: u64) -> Option<u64> {
        let mut t = t0.max(head.at);
        if let Some(c) = self.cbs(q) {
            let credit = self.credit_at_time(q, t, true);
            if credit < 0 {
                t += ((-credit) as u128).div_ceil(c.idle_slope_bps as u128) as u64;
            }
        }
        let Some(g) = &self.schedule.gates else { return Some(t) };
        let d = self.schedule.wire_ns(head.len);
        let start = g.start_at(q, t, d)?;
        // Still inside the window it started in, with room to finish from `now`.
        if start >= now || g.start_at(q, start, now - start + d) == Some(start) {
            return Some(start);
        }
        g.start_at(q, now, d)
    }

    /// Picks what to send at `now`, given each queue's head. Call [`Scheduler::sent`] after
    /// sending what it picked.
    pub fn pick(&mut self, heads: &[Option<Head>; N_QUEUES], now: u64) -> Pick {
        let t0 = match self.schedule.catch_up_ns {
            Some(bound) => self.link_free_at.max(now.saturating_sub(bound)),
            None => self.link_free_at,
        };
        let mut start = u64::MAX;
        let mut at = [u64::MAX; N_QUEUES];
        for q in 0..N_QUEUES {
            if let Some(h) = heads[q] {
                match self.eligible_at(q, h, t0, now) {
                    Some(t) => at[q] = t,
                    None => return Pick::Discard(q),
                }
                start = start.min(at[q]);
            }
        }
        if start == u64::MAX {
            return Pick::Idle;
        }
        if start > now {
            return Pick::Wait(start);
        }
        // Of the queues eligible at `start`, the highest level; DRR among a level's queues.
        let eligible: Vec<usize> = (0..N_QUEUES).filter(|&q| at[q] == start).collect();
        let top = eligible.iter().map(|&q| self.schedule.level(q)).max().unwrap();
        let level: Vec<usize> = eligible.into_iter().filter(|&q| self.schedule.level(q) == top).collect();
        let queue = if level.len() == 1 || !matches!(self.schedule.shapers[level[0]], Shaper::Drr { .. }) {
            *level.iter().max().unwrap()
        } else {
            self.drr_choose(&level, heads)
        };
        Pick::Send { queue, start }
    }

    /// Deficit round robin: a queue gets its quantum once when its turn comes and sends while
    /// its deficit covers its head; then the turn moves on, the rest of the deficit kept.
    fn drr_choose(&mut self, level: &[usize], heads: &[Option<Head>; N_QUEUES]) -> usize {
        loop {
            let q = self.drr_turn;
            if let (true, Shaper::Drr { quantum }) = (level.contains(&q), &self.schedule.shapers[q]) {
                if !self.drr_granted {
                    self.deficit[q] += *quantum as u64;
                    self.drr_granted = true;
                }
                let len = heads[q].unwrap().len as u64;
                if self.deficit[q] >= len {
                    self.deficit[q] -= len;
                    return q;
                }
            }
            self.drr_turn = if self.drr_turn == 0 { N_QUEUES - 1 } else { self.drr_turn - 1 };
            self.drr_granted = false;
        }
    }

    /// The head of `queue` (`len` bytes) went on the wire at `start`; `heads` as before it left,
    /// `now_empty` whether `queue` is empty after it.
    pub fn sent(&mut self, queue: usize, len: usize, start: u64, heads: &[Option<Head>; N_QUEUES], now_empty: bool) {
        let d = self.schedule.wire_ns(len);
        for (q, head) in heads.iter().enumerate() {
            if self.cbs(q).is_some() {
                self.bring(q, start, head.is_some());
            }
        }
        for (q, head) in heads.iter().enumerate() {
            let Some(c) = self.cbs(q) else { continue };
            if q == queue {
                let send = c.idle_slope_bps as i128 - self.schedule.rate_bps as i128;
                self.credit[q] = (self.credit[q] + send * d as i128).max(c.lo_credit_bits as i128 * NANO);
                if now_empty && self.credit[q] > 0 {
                    self.credit[q] = 0;
                }
                self.credit_at[q] = start + d;
            } else if head.is_some() {
                self.bring(q, start + d, true);
            }
        }
        if now_empty {
            self.deficit[queue] = 0;
        }
        self.link_free_at = start + d;
    }

    /// When the virtual wire is next free.
    pub fn link_free_at(&self) -> u64 {
        self.link_free_at
    }
}

/// A head-of-line view of eight queues, for the scheduler.
pub fn heads<T>(queues: &[VecDeque<T>; N_QUEUES], head: impl Fn(&T) -> Head) -> [Option<Head>; N_QUEUES] {
    std::array::from_fn(|q| queues[q].front().map(&head))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MBIT: u64 = 1_000_000;

    /// Runs `sched` over frames (queue, len, arrival) until all are sent; returns (queue, start)
    /// per frame in departure order. Time only moves to what the scheduler asks for.
    fn run(sched: &mut Scheduler, frames: &[(usize, usize, u64)]) -> Vec<(usize, u64, usize)> {
        let mut queues: [VecDeque<(usize, u64)>; N_QUEUES] = Default::default();
        let mut pending: VecDeque<(usize, usize, u64)> = frames.iter().copied().collect();
        let mut out = Vec::new();
        let mut now = 0;
        loop {
            while pending.front().is_some_and(|f| f.2 <= now) {
                let (q, len, at) = pending.pop_front().unwrap();
                sched.queued(q, at, queues[q].is_empty());
                queues[q].push_back((len, at));
            }
            let h = heads(&queues, |&(len, at)| Head { len, at });
            match sched.pick(&h, now) {
                Pick::Send { queue, start } => {
                    let (len, _) = queues[queue].pop_front().unwrap();
                    sched.sent(queue, len, start, &h, queues[queue].is_empty());
                    out.push((queue, start, len));
                }
                Pick::Wait(t) => now = pending.front().map_or(t, |f| f.2.min(t)),
                Pick::Idle => match pending.front() {
                    Some(f) => now = f.2,
                    None => return out,
                },
                Pick::Discard(q) => {
                    queues[q].pop_front();
                }
            }
        }
    }

    #[test]
    fn the_wire_is_paced_and_strict_priority_takes_the_highest_waiting_queue() {
        let mut s = Scheduler::new(Schedule::strict(100 * MBIT));
        // 1000-byte frames take (1000 + 24) × 80 ns = 81.92 µs at 100 Mbit/s.
        let frames: Vec<_> = (0..4).map(|_| (1usize, 1000usize, 0u64)).chain([(6, 1000, 10_000)]).collect();
        let out = run(&mut s, &frames);
        let t = s.schedule.wire_ns(1000);
        assert_eq!(t, 81_920);
        // The first low frame is already on the wire when the high one comes; it goes next.
        assert_eq!(
            out.iter().map(|o| (o.0, o.1)).collect::<Vec<_>>(),
            [(1, 0), (6, t), (1, 2 * t), (1, 3 * t), (1, 4 * t)]
        );
    }

    #[test]
    fn drr_shares_the_wire_by_quantum() {
        let mut sched = Schedule::strict(100 * MBIT);
        sched.shapers[2] = Shaper::Drr { quantum: 3000 };
        sched.shapers[3] = Shaper::Drr { quantum: 1000 };
        let mut s = Scheduler::new(sched);
        let frames: Vec<_> = (0..400).map(|i| (2 + i % 2, 500usize, 0u64)).collect();
        let out = run(&mut s, &frames);
        // While both are backlogged (the first 200 departures), queue 2 gets three bytes for one.
        let first: Vec<_> = out.iter().take(200).collect();
        let q2 = first.iter().filter(|o| o.0 == 2).count();
        assert!((148..=152).contains(&q2), "{q2} of 200");
    }

    #[test]
    fn cbs_holds_a_queue_to_its_idle_slope_and_bounds_its_burst() {
        let rate = 100 * MBIT;
        let mut sched = Schedule::strict(rate);
        let cbs = Cbs::derived(20 * MBIT, rate, MAX_FRAME_BITS);
        sched.shapers[5] = Shaper::Cbs(cbs);
        let mut s = Scheduler::new(sched);
        // 2000 frames of 1000 B queued at once on the shaped queue, best effort beside it.
        let mut frames: Vec<_> = (0..2000).map(|_| (5usize, 1000usize, 0u64)).collect();
        frames.extend((0..2000).map(|_| (0usize, 1000usize, 0u64)));
        let out = run(&mut s, &frames);
        let shaped: Vec<_> = out.iter().filter(|o| o.0 == 5).collect();
        let span = shaped.last().unwrap().1 - shaped[0].1;
        let bits = (shaped.len() as u64 - 1) * (1000 + WIRE_OVERHEAD) * 8;
        let got = bits as f64 * 1e9 / span as f64;
        assert!((got / 20e6 - 1.0).abs() < 0.01, "shaped rate {got:.0} bit/s");
        // The best-effort queue takes the rest of the wire: no idle wire while it has frames.
        let d = s.schedule.wire_ns(1000);
        let last_be = out.iter().rposition(|o| o.0 == 0).unwrap();
        assert_eq!(out[last_be].1, last_be as u64 * d, "no idle wire while frames wait");
        assert!(s.credit_bits(5).unwrap() <= cbs.hi_credit_bits);
    }

    /// Two shaped classes (A above B) and best effort on one port, against 802.1Q Annex L.
    /// B's worst wait is a best-effort frame already on the wire and then a frame of A: the credit
    /// it gains meanwhile is what its hiCredit must hold. Bounded as class A is (one frame's
    /// interference), B's credit was cut there, and its next frame left a whole frame later.
    /// All three backlogged, each class gets its idle slope and its credit stays within bounds.
    #[test]
    fn two_cbs_classes_are_bounded_as_annex_l_says() {
        let rate = 100 * MBIT;
        let a = CbsClass { idle_slope_bps: 20 * MBIT, max_frame_bits: MAX_FRAME_BITS };
        let b = CbsClass { idle_slope_bps: 30 * MBIT, max_frame_bits: MAX_FRAME_BITS };
        let mut classes = [None; N_QUEUES];
        classes[6] = Some(a);
        classes[5] = Some(b);
        let bounds = annex_l_bounds(rate, &classes);
        let (bound_a, bound_b) = (bounds[6].unwrap(), bounds[5].unwrap());
        let as_class_a = Cbs::derived(b.idle_slope_bps, rate, MAX_FRAME_BITS);
        assert_eq!(bound_a, Cbs::derived(a.idle_slope_bps, rate, MAX_FRAME_BITS), "A: class A's formula");
        let schedule = |b_bound: Cbs| {
            let mut sched = Schedule::strict(rate);
            sched.shapers[6] = Shaper::Cbs(bound_a);
            sched.shapers[5] = Shaper::Cbs(b_bound);
            Scheduler::new(sched)
        };

        // A best-effort backlog; one frame of A and two of B arrive while the first is on the wire.
        let mut frames: Vec<_> = (0..8).map(|_| (0usize, 1518usize, 0u64)).collect();
        frames.extend([(6, 1518, 1_000), (5, 1518, 1_000), (5, 1518, 1_000)]);
        let d = schedule(bound_b).schedule.wire_ns(1518);
        let b_starts = |b_bound: Cbs| {
            let out = run(&mut schedule(b_bound), &frames);
            out.iter().filter(|o| o.0 == 5).map(|o| o.1).collect::<Vec<_>>()
        };
        // Best effort, A, then B with the credit of two frames' wait (0.3 × 2 × 12 336 bits):
        // its second frame waits one best-effort frame. Cut to one frame's, it waits two.
        assert!(bound_b.hi_credit_bits >= 3 * 2 * MAX_FRAME_BITS / 10 - 10, "{bound_b:?}");
        assert_eq!(b_starts(bound_b), [2 * d, 4 * d]);
        assert_eq!(b_starts(as_class_a), [2 * d, 5 * d], "B bounded as class A");

        // All backlogged: the shares while all three have frames, and the credits' extremes.
        let mut s = schedule(bound_b);
        let mut queues: [VecDeque<(usize, u64)>; N_QUEUES] = Default::default();
        for q in [6, 5, 0] {
            for _ in 0..3000 {
                s.queued(q, 0, queues[q].is_empty());
                queues[q].push_back((1518, 0));
            }
        }
        let (mut sent, mut now) = ([0u64; N_QUEUES], 0);
        let mut extremes = [(0i64, 0i64); N_QUEUES];
        while [6, 5, 0].iter().all(|&q| !queues[q].is_empty()) {
            let h = heads(&queues, |&(len, at)| Head { len, at });
            match s.pick(&h, now) {
                Pick::Send { queue, start } => {
                    let (len, _) = queues[queue].pop_front().unwrap();
                    s.sent(queue, len, start, &h, queues[queue].is_empty());
                    sent[queue] += s.schedule.wire_ns(len) * rate / 1_000_000_000;
                    for q in [5, 6] {
                        let c = s.credit_bits(q).unwrap();
                        extremes[q] = (extremes[q].0.min(c), extremes[q].1.max(c));
                    }
                }
                Pick::Wait(t) => now = t,
                other => panic!("{other:?} with every queue backlogged"),
            }
        }
        let span = s.link_free_at() as f64 / 1e9;
        let got = sent.map(|bits| bits as f64 / span);
        assert!((got[6] / 20e6 - 1.0).abs() < 0.005 && (got[5] / 30e6 - 1.0).abs() < 0.005, "{got:?}");
        for (q, c) in [(6, bound_a), (5, bound_b)] {
            assert!(
                extremes[q].0 >= c.lo_credit_bits && extremes[q].1 <= c.hi_credit_bits,
                "{q}: {:?} {c:?}",
                extremes[q]
            );
        }
    }

    #[test]
    fn gates_let_frames_start_only_where_they_can_finish() {
        let rate = 100 * MBIT;
        let mut sched = Schedule::strict(rate);
        // 1 ms cycle: queue 7 alone for 200 µs, then everyone else for 800 µs.
        sched.gates = Some(Gates {
            base_ns: 0,
            cycle_ns: 1_000_000,
            entries: vec![
                GateEntry { duration_ns: 200_000, open: 0x80 },
                GateEntry { duration_ns: 800_000, open: 0x7f },
            ],
        });
        let mut s = Scheduler::new(sched);
        let frames: Vec<_> = (0..30).map(|i| (if i % 3 == 0 { 7usize } else { 0 }, 1500usize, 0u64)).collect();
        let out = run(&mut s, &frames);
        let d = s.schedule.wire_ns(1500);
        let g = s.schedule.gates.clone().unwrap();
        for &(q, start, _) in &out {
            let rel = start % 1_000_000;
            let (lo, hi) = if q == 7 { (0, 200_000) } else { (200_000, 1_000_000) };
            assert!(rel >= lo && rel + d <= hi, "queue {q} frame at {rel} ns into the cycle");
            assert!(g.is_open(q, start));
        }
        // A frame longer than any window of its gate would wait for ever: it is discarded.
        let mut s = Scheduler::new(Schedule {
            gates: Some(Gates {
                base_ns: 0,
                cycle_ns: 100_000,
                entries: vec![GateEntry { duration_ns: 50_000, open: 1 }],
            }),
            ..Schedule::strict(rate)
        });
        let h: [Option<Head>; N_QUEUES] = std::array::from_fn(|q| (q == 0).then_some(Head { len: 1500, at: 0 }));
        assert_eq!(s.pick(&h, 0), Pick::Send { queue: 0, start: 0 });
        let short = Gates {
            base_ns: 0,
            cycle_ns: 100_000,
            entries: vec![GateEntry { duration_ns: 10_000, open: 1 }, GateEntry { duration_ns: 90_000, open: 0 }],
        };
        s.schedule.gates = Some(short);
        assert_eq!(s.pick(&h, 0), Pick::Discard(0));
    }

    #[test]
    fn a_frame_picked_up_too_late_for_its_window_waits_for_the_next() {
        // 1 ms cycle, queue 7 open for the first 200 µs; a 200-byte frame is 17.6 µs on the wire.
        let mut s = Scheduler::new(Schedule {
            gates: Some(Gates {
                base_ns: 0,
                cycle_ns: 1_000_000,
                entries: vec![
                    GateEntry { duration_ns: 200_000, open: 0x80 },
                    GateEntry { duration_ns: 800_000, open: 1 },
                ],
            }),
            ..Schedule::strict(100 * MBIT)
        });
        let d = s.schedule.wire_ns(200);
        // It arrived at 170 µs, in time to finish by 200 µs.
        let h: [Option<Head>; N_QUEUES] = std::array::from_fn(|q| (q == 7).then_some(Head { len: 200, at: 170_000 }));
        // Picked up at 175 µs it still fits: it keeps its virtual start.
        assert_eq!(s.pick(&h, 175_000), Pick::Send { queue: 7, start: 170_000 });
        // Picked up one ns after the last moment it could still finish by 200 µs (182.08 µs): the next window.
        assert_eq!(s.pick(&h, 200_000 - d + 1), Pick::Wait(1_000_000));
        assert_eq!(s.pick(&h, 1_000_000), Pick::Send { queue: 7, start: 1_000_000 });
    }

    #[test]
    fn inconsistent_schedules_are_refused_with_the_reason() {
        let mut s = Schedule::strict(100 * MBIT);
        s.shapers[3] = Shaper::Cbs(Cbs::derived(150 * MBIT, 100 * MBIT, MAX_FRAME_BITS));
        assert!(s.check().unwrap_err().contains("queue 3: idle slope"));
        s.shapers[3] = Shaper::Cbs(Cbs::derived(60 * MBIT, 100 * MBIT, MAX_FRAME_BITS));
        s.shapers[4] = Shaper::Cbs(Cbs::derived(50 * MBIT, 100 * MBIT, MAX_FRAME_BITS));
        assert!(s.check().unwrap_err().contains("reserve"));
        let mut s = Schedule::strict(100 * MBIT);
        s.gates = Some(Gates {
            base_ns: 0,
            cycle_ns: 1000,
            entries: vec![GateEntry { duration_ns: 800, open: 1 }, GateEntry { duration_ns: 300, open: 2 }],
        });
        assert!(s.check().unwrap_err().contains("longer than the 1000 ns cycle"));
        let c = Cbs::derived(20 * MBIT, 100 * MBIT, MAX_FRAME_BITS);
        // A 1522-byte frame is 12 336 bits on the wire: hiCredit = 12336 × 0.2, loCredit = 12336 × (−0.8).
        assert_eq!((c.hi_credit_bits, c.lo_credit_bits), (2467, -9868));
    }

    #[test]
    fn a_port_paced_to_its_own_link_catches_up_only_as_far_as_the_thread_is_expected_late() {
        // 100 Mbit/s: a 1500-byte frame holds the wire 121.92 µs. The thread, expected 20 µs
        // late at most, wakes 50 µs late.
        let h: [Option<Head>; N_QUEUES] = std::array::from_fn(|q| (q == 0).then_some(Head { len: 1500, at: 0 }));
        let (mut shaped, mut link) =
            (Scheduler::new(Schedule::strict(100 * MBIT)), Scheduler::new(Schedule::link(100 * MBIT, 20_000)));
        for s in [&mut shaped, &mut link] {
            assert_eq!(s.pick(&h, 0), Pick::Send { queue: 0, start: 0 });
            s.sent(0, 1500, 0, &h, false);
        }
        let late = 121_920 + 50_000;
        // A shaper keeps its rate exact by starting the next frame when the wire was free; on
        // the port's own link that frame would wait 50 µs in the interface, and every one after
        // it too, while the port stays busy. Paced to its link, the port loses 30 µs of the link.
        assert_eq!(shaped.pick(&h, late), Pick::Send { queue: 0, start: 121_920 });
        assert_eq!(link.pick(&h, late), Pick::Send { queue: 0, start: late - 20_000 });
    }
}
