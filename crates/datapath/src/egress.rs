//! Egress queues: eight per port, between the forwarding decision and the port's socket.
//!
//! A frame goes straight to the socket when nothing is waiting on the port, so an unloaded port
//! costs what it did before queues existed. When the socket is busy the frame waits in its queue
//! (FIFO) and waiting frames leave highest queue first (strict priority, queue 7 highest, as
//! 802.1Q traffic classes). A port with a [`Schedule`] is paced to its rate instead, and what
//! leaves when is decided by its [`Scheduler`] (strict priority, DRR, CBS, gates); every frame
//! then waits in its queue for its turn.

use std::collections::VecDeque;

use packet::Offload;

pub use crate::schedule::N_QUEUES;
use crate::schedule::{heads, Head, Pick, Schedule, Scheduler};
use crate::{PortTx, TxError};

/// Frames a queue holds before it drops (tail drop): a veth's default txqueuelen.
pub const QUEUE_LIMIT: usize = 1000;
/// IEEE 802.1Q Table 8-5, eight traffic classes: priority (PCP) → queue. PCP 1 (background) sits
/// below PCP 0 (best effort, and every untagged frame).
pub const PCP_TO_QUEUE: [u8; 8] = [1, 0, 2, 3, 4, 5, 6, 7];

/// The queue a frame goes to when no mode chose one: from its outer VLAN tag's priority, through
/// `pcp_map` (priority → queue).
pub fn queue_for_frame(frame: &[u8], pcp_map: &[u8; 8]) -> usize {
    pcp_map[frame_pcp(frame) as usize] as usize
}

/// The priority of a frame's outer VLAN tag (0 untagged).
pub fn frame_pcp(frame: &[u8]) -> u8 {
    match frame.get(12..15) {
        Some([0x81, 0x00, tci] | [0x88, 0xa8, tci]) => tci >> 5,
        _ => 0,
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Dropped because the queue was full.
    pub dropped: u64,
}

/// What became of a frame handed to [`EgressQueues::send`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// On the socket now.
    Now,
    /// Waiting in its queue.
    Held,
    /// Its queue was full.
    Dropped,
    /// The interface will never take it (longer than its MTU).
    Refused,
}

/// What [`EgressQueues::service`] moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Serviced {
    pub packets: u64,
    pub bytes: u64,
    /// Frames the interface refused for good, dropped from the head of their queue.
    pub refused: u64,
    /// Frames longer than any window their queue's gate opens, dropped (they would wait for ever).
    pub gate_too_short: u64,
}

struct Held {
    frame: Vec<u8>,
    offload: Offload,
    /// When it was queued (the switch's clock).
    at: u64,
}

/// The clock a schedule's gate base time is given on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GateClock {
    #[default]
    Tai,
    Realtime,
}

/// A port's egress configuration: its schedule (pacing, shapers, gates) and queue limits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortEgress {
    pub schedule: Option<Schedule>,
    pub gate_clock: GateClock,
    pub limits: Vec<(usize, Limit)>,
    /// Priority → queue for frames no mode gave a queue (None: 802.1Q's default table).
    pub pcp_map: Option<[u8; 8]>,
    /// Without a `schedule`: paced to the link's speed as its driver reports it, strict priority
    /// between the queues. The backlog of a port offered more than its link carries then builds
    /// in its queues, where priority orders it, not in the interface's ring, where nothing does.
    pub pace_to_link: bool,
    /// The link's speed (Mbit/s) when the driver's is not to be believed (None: ask the driver).
    pub link_mbps: Option<u32>,
}

/// How much a queue holds before it drops (tail drop).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Frames(usize),
    Bytes(usize),
}

pub struct EgressQueues {
    queues: [VecDeque<Held>; N_QUEUES],
    stats: [QueueStats; N_QUEUES],
    held: usize,
    bytes: [usize; N_QUEUES],
    limits: [Limit; N_QUEUES],
    scheduler: Option<Scheduler>,
    /// When a scheduled port next has something to do.
    next_wake: Option<u64>,
    /// Priority → queue for frames no mode gave a queue.
    pub pcp_map: [u8; 8],
}

impl Default for EgressQueues {
    fn default() -> Self {
        EgressQueues::new(QUEUE_LIMIT)
    }
}

impl EgressQueues {
    pub fn new(limit: usize) -> Self {
        EgressQueues {
            queues: Default::default(),
            stats: [QueueStats::default(); N_QUEUES],
            held: 0,
            bytes: [0; N_QUEUES],
            limits: [Limit::Frames(limit); N_QUEUES],
            scheduler: None,
            next_wake: None,
            pcp_map: PCP_TO_QUEUE,
        }
    }

    /// Paces the port and schedules its queues (None: back to unpaced strict priority). What is
    /// queued stays queued.
    pub fn set_schedule(&mut self, schedule: Option<Schedule>) {
        self.scheduler = match (self.scheduler.take(), schedule) {
            (Some(mut s), Some(new)) => {
                s.reconfigure(new);
                Some(s)
            }
            (None, Some(new)) => Some(Scheduler::new(new)),
            (_, None) => None,
        };
        self.next_wake = None;
    }

    pub fn set_limit(&mut self, queue: usize, limit: Limit) {
        self.limits[queue] = limit;
    }

    pub fn scheduler(&self) -> Option<&Scheduler> {
        self.scheduler.as_ref()
    }

    /// When a scheduled port wants servicing next (a frame's start time, a gate opening, credit
    /// back to 0); None when nothing waits on a schedule.
    pub fn next_wake(&self) -> Option<u64> {
        self.next_wake
    }

    fn full(&self, queue: usize, len: usize) -> bool {
        match self.limits[queue] {
            Limit::Frames(n) => self.queues[queue].len() >= n,
            Limit::Bytes(n) => self.bytes[queue] + len > n,
        }
    }

    fn push(&mut self, queue: usize, frame: &[u8], offload: &Offload, at: u64) {
        if let Some(s) = self.scheduler.as_mut() {
            s.queued(queue, at, self.queues[queue].is_empty());
        }
        self.queues[queue].push_back(Held { frame: frame.to_vec(), offload: *offload, at });
        self.bytes[queue] += frame.len();
        self.held += 1;
    }

    fn pop(&mut self, queue: usize) -> Option<Held> {
        let h = self.queues[queue].pop_front()?;
        self.bytes[queue] -= h.frame.len();
        self.held -= 1;
        Some(h)
    }

    /// Frames waiting, all queues together.
    pub fn backlog(&self) -> usize {
        self.held
    }

    /// Frames waiting on one queue.
    pub fn waiting(&self, queue: usize) -> usize {
        self.queues[queue].len()
    }

    pub fn stats(&self, queue: usize) -> QueueStats {
        self.stats[queue]
    }

    /// Counts frames that left on `queue` without passing through here (the kernel fast path).
    pub fn credit(&mut self, queue: usize, packets: u64, bytes: u64) {
        self.stats[queue].tx_packets += packets;
        self.stats[queue].tx_bytes += bytes;
    }

    /// Transmits `frame` on `queue` (< [`N_QUEUES`]) at `now`: unscheduled, at once if nothing
    /// waits, else after what waits on higher queues and before nothing that waits on its own;
    /// scheduled, when [`EgressQueues::service`] finds it its turn.
    pub fn send(&mut self, tx: &mut dyn PortTx, queue: usize, frame: &[u8], offload: &Offload, now: u64) -> Sent {
        if self.held == 0 && self.scheduler.is_none() {
            match tx.send(frame, offload) {
                Ok(()) => {
                    self.credit(queue, 1, frame.len() as u64);
                    return Sent::Now;
                }
                Err(TxError::Refused) => return Sent::Refused,
                Err(TxError::Busy) => {}
            }
        }
        if self.full(queue, frame.len()) {
            self.stats[queue].dropped += 1;
            return Sent::Dropped;
        }
        self.push(queue, frame, offload, now);
        Sent::Held
    }

    /// Hands waiting frames to the socket, highest queue first, until it is busy or nothing
    /// waits. A frame the interface refuses for good is dropped, not retried: it would block
    /// its queue, and every lower one, forever.
    pub fn service(&mut self, tx: &mut dyn PortTx, now: u64) -> Serviced {
        if self.scheduler.is_some() {
            return self.service_scheduled(tx, now);
        }
        let mut done = Serviced::default();
        for q in (0..N_QUEUES).rev() {
            while let Some(h) = self.queues[q].front() {
                let len = h.frame.len() as u64;
                match tx.send(&h.frame, &h.offload) {
                    Ok(()) => {
                        self.credit(q, 1, len);
                        done.packets += 1;
                        done.bytes += len;
                    }
                    Err(TxError::Refused) => done.refused += 1,
                    Err(TxError::Busy) => return done,
                }
                self.pop(q);
            }
        }
        done
    }

    /// Sends, in the scheduler's order, every frame whose start time has come.
    fn service_scheduled(&mut self, tx: &mut dyn PortTx, now: u64) -> Serviced {
        let mut done = Serviced::default();
        self.next_wake = None;
        loop {
            let h = heads(&self.queues, |f: &Held| Head { len: f.frame.len(), at: f.at });
            let sched = self.scheduler.as_mut().unwrap();
            match sched.pick(&h, now) {
                Pick::Idle => return done,
                Pick::Wait(t) => {
                    self.next_wake = Some(t);
                    return done;
                }
                Pick::Discard(q) => {
                    self.pop(q);
                    self.stats[q].dropped += 1;
                    done.gate_too_short += 1;
                }
                Pick::Send { queue, start } => {
                    let f = self.queues[queue].front().unwrap();
                    let len = f.frame.len();
                    match tx.send(&f.frame, &f.offload) {
                        Ok(()) => {
                            let now_empty = self.queues[queue].len() == 1;
                            self.scheduler.as_mut().unwrap().sent(queue, len, start, &h, now_empty);
                            self.credit(queue, 1, len as u64);
                            done.packets += 1;
                            done.bytes += len as u64;
                        }
                        Err(TxError::Refused) => done.refused += 1,
                        Err(TxError::Busy) => {
                            // The socket is full: try again shortly (its start time has passed).
                            self.next_wake = Some(now + 50_000);
                            return done;
                        }
                    }
                    self.pop(queue);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket that takes `room` frames, then is busy until given more room. Its "MTU" is one
    /// byte: a longer frame is refused whatever the room.
    #[derive(Default)]
    struct Socket {
        room: usize,
        sent: Vec<u8>,
    }

    impl PortTx for Socket {
        fn send(&mut self, frame: &[u8], _: &Offload) -> Result<(), TxError> {
            if frame.len() > 1 {
                return Err(TxError::Refused);
            }
            if self.room == 0 {
                return Err(TxError::Busy);
            }
            self.room -= 1;
            self.sent.push(frame[0]);
            Ok(())
        }
        fn flush(&mut self) {}
    }

    #[test]
    fn straight_through_when_idle_then_strict_priority_fifo_within_a_queue() {
        let mut tx = Socket { room: 1, ..Default::default() };
        let mut q = EgressQueues::new(10);
        let off = Offload::default();
        assert_eq!(q.send(&mut tx, 0, &[1], &off, 0), Sent::Now);
        // The socket is full: everything waits, whatever its queue.
        for (frame, queue) in [(2, 0), (3, 5), (4, 0), (5, 7), (6, 5)] {
            assert_eq!(q.send(&mut tx, queue, &[frame], &off, 0), Sent::Held);
        }
        assert_eq!(q.backlog(), 5);
        tx.room = 3;
        assert_eq!(q.service(&mut tx, 0), Serviced { packets: 3, bytes: 3, ..Default::default() });
        assert_eq!(tx.sent, [1, 5, 3, 6], "queue 7, then queue 5 in arrival order");
        // A frame for a higher queue arriving now still waits behind nothing but higher queues.
        assert_eq!(q.send(&mut tx, 6, &[7], &off, 0), Sent::Held, "never jumps the waiting line");
        tx.room = 10;
        q.service(&mut tx, 0);
        assert_eq!(tx.sent, [1, 5, 3, 6, 7, 2, 4]);
        assert_eq!(q.backlog(), 0);
        assert_eq!(q.stats(0), QueueStats { tx_packets: 3, tx_bytes: 3, dropped: 0 });
        assert_eq!(q.stats(5).tx_packets, 2);
    }

    #[test]
    fn a_full_queue_drops_and_counts_without_touching_the_others() {
        let mut tx = Socket::default();
        let mut q = EgressQueues::new(2);
        let off = Offload::default();
        assert_eq!(q.send(&mut tx, 3, &[1], &off, 0), Sent::Held);
        assert_eq!(q.send(&mut tx, 3, &[2], &off, 0), Sent::Held);
        assert_eq!(q.send(&mut tx, 3, &[3], &off, 0), Sent::Dropped);
        assert_eq!(q.send(&mut tx, 4, &[4], &off, 0), Sent::Held);
        assert_eq!(q.stats(3).dropped, 1);
        assert_eq!(q.stats(4).dropped, 0);
    }

    #[test]
    fn a_frame_the_interface_refuses_is_dropped_and_blocks_nothing() {
        let mut tx = Socket { room: 0, ..Default::default() };
        let mut q = EgressQueues::new(10);
        let off = Offload::default();
        // With nothing waiting the refusal is immediate; queued, it is found when its turn comes.
        assert_eq!(q.send(&mut tx, 2, &[9, 9], &off, 0), Sent::Refused);
        assert_eq!(q.backlog(), 0);
        for frame in [&[1][..], &[8, 8, 8], &[2]] {
            assert_eq!(q.send(&mut tx, 2, frame, &off, 0), Sent::Held);
        }
        tx.room = 10;
        assert_eq!(q.service(&mut tx, 0), Serviced { packets: 2, bytes: 2, refused: 1, ..Default::default() });
        assert_eq!((tx.sent.as_slice(), q.backlog()), (&[1, 2][..], 0), "the frames behind it left");
        assert_eq!(q.stats(2), QueueStats { tx_packets: 2, tx_bytes: 2, dropped: 0 });
    }

    #[test]
    fn vlan_priority_picks_the_queue_by_the_802_1q_table() {
        let mut f = vec![0u8; 20];
        assert_eq!(queue_for_frame(&f, &PCP_TO_QUEUE), 1, "untagged: priority 0, best effort");
        f[12..14].copy_from_slice(&[0x81, 0x00]);
        for (pcp, queue) in [(0u8, 1), (1, 0), (2, 2), (5, 5), (7, 7)] {
            f[14] = pcp << 5 | 0x0f;
            assert_eq!(queue_for_frame(&f, &PCP_TO_QUEUE), queue, "pcp {pcp}");
        }
        // A port's own map: everything but priority 7 shares queue 0.
        assert_eq!(queue_for_frame(&f, &[0, 0, 0, 0, 0, 0, 0, 6]), 6);
    }
}
