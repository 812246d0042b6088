//! Proof that no BPF program still holds what a slot led to: the kernel's own barrier, an RCU grace
//! period, waited for off the forwarding thread.
//!
//! An entry index a slot let go of (`fastpath/table.rs`) may still be read by a program that read
//! the slot just before: it confirms the entry a moment later. Rewriting the index under it could
//! let it confirm an entry half new. XDP and TC programs run inside an RCU read-side critical
//! section, and an update of a map of maps from the system call returns only after a grace period
//! (`maybe_wait_bpf_programs`, kernel/bpf/syscall.c, Linux 4.20 on: `synchronize_rcu` for
//! `BPF_MAP_TYPE_ARRAY_OF_MAPS` and `HASH_OF_MAPS`), that is after every program running when it
//! began has ended, however long it was paused (a PREEMPT_RT kernel's softirq thread, a vCPU the
//! host descheduled). So an index released before such an update began is safe to reuse once it
//! returned: a proof, where a wait of some time is only likely.
//!
//! A grace period takes milliseconds (a few ticks), so it is not waited for on the forwarding
//! thread: a thread of its own makes the updates, one for every batch of requests that came while
//! the last one ran, and counts the requests each covered.

use std::io;
use std::sync::{Arc, Condvar, Mutex};

use tracing::warn;

use crate::ebpf::Map;

/// `BPF_MAP_TYPE_ARRAY`: the inner map, one word, that the outer map's one slot is set to again
/// and again.
const ARRAY: u32 = 2;

#[derive(Default)]
struct Counts {
    /// Requests made: the ticket of the latest.
    asked: u64,
    /// Every request up to this one had a grace period begin after it and end.
    passed: u64,
    stop: bool,
}

#[derive(Default)]
struct Shared {
    counts: Mutex<Counts>,
    changed: Condvar,
}

/// The thread that waits out grace periods for one fast path; it ends when this is dropped.
pub struct GraceBarrier {
    shared: Arc<Shared>,
}

impl GraceBarrier {
    /// Makes the barrier's two maps and its thread.
    pub fn new() -> io::Result<GraceBarrier> {
        let inner = Map::create("ef_grace_inner", ARRAY, 4, 4, 1, 0)?;
        let outer = Map::create_array_of_maps("ef_grace", &inner, 1)?;
        let shared = Arc::new(Shared::default());
        let theirs = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("ef-grace".into())
            .spawn(move || wait_out_grace_periods(&theirs, &outer, &inner))?;
        Ok(GraceBarrier { shared })
    }

    /// Asks for a grace period that begins after now; returns its ticket, which
    /// [`passed`](Self::passed) reaches once it ended.
    pub fn ask(&self) -> u64 {
        let mut c = self.shared.counts.lock().unwrap();
        c.asked += 1;
        self.shared.changed.notify_all();
        c.asked
    }

    /// The latest ticket whose grace period has ended.
    pub fn passed(&self) -> u64 {
        self.shared.counts.lock().unwrap().passed
    }

    /// Blocks until `ticket` has passed. (The flow tables never block on one, they look again at
    /// their next turn; the P4 tables' writer and tests that need an index back wait.)
    #[cfg_attr(not(feature = "p4"), allow(dead_code))]
    pub fn wait(&self, ticket: u64) {
        let mut c = self.shared.counts.lock().unwrap();
        while c.passed < ticket && !c.stop {
            c = self.shared.changed.wait(c).unwrap();
        }
    }
}

impl Drop for GraceBarrier {
    fn drop(&mut self) {
        self.shared.counts.lock().unwrap().stop = true;
        self.shared.changed.notify_all();
    }
}

/// The barrier's thread: for each batch of requests, one update of `outer`, which returns after a
/// grace period that began after every request of the batch was made.
fn wait_out_grace_periods(shared: &Shared, outer: &Map, inner: &Map) {
    let key = 0u32.to_ne_bytes();
    let value = (inner.fd() as u32).to_ne_bytes();
    let mut warned = false;
    loop {
        let target = {
            let mut c = shared.counts.lock().unwrap();
            while c.asked == c.passed && !c.stop {
                c = shared.changed.wait(c).unwrap();
            }
            if c.stop {
                return;
            }
            c.asked
        };
        match outer.update(&key, &value) {
            Ok(()) => {
                shared.counts.lock().unwrap().passed = target;
                shared.changed.notify_all();
            }
            Err(e) => {
                // Indices stay in quarantine meanwhile: entries may be refused, never matched wrongly.
                if !warned {
                    warn!("fast path: the grace-period barrier failed ({e}); released entry indices wait");
                    warned = true;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a barrier costs on this kernel, against a plain array update: a measurement for
    /// docs/fastpath.md (`cargo test --release -p datapath grace_period_cost -- --ignored --nocapture`).
    /// Milliseconds where the array's update takes a microsecond: the grace period is waited for.
    #[test]
    #[ignore]
    fn grace_period_cost() {
        if !crate::ebpf::test_may_load_programs("the grace-period barrier") {
            return;
        }
        let g = GraceBarrier::new().unwrap();
        let mut barrier: Vec<u128> = (0..20)
            .map(|_| {
                let t = std::time::Instant::now();
                g.wait(g.ask());
                t.elapsed().as_micros()
            })
            .collect();
        let array = Map::create("ef_plain", ARRAY, 4, 4, 1, 0).unwrap();
        let mut plain: Vec<u128> = (0..20)
            .map(|_| {
                let t = std::time::Instant::now();
                array.update(&0u32.to_ne_bytes(), &1u32.to_ne_bytes()).unwrap();
                t.elapsed().as_nanos()
            })
            .collect();
        barrier.sort();
        plain.sort();
        println!("barrier: min {} µs, median {} µs, max {} µs", barrier[0], barrier[10], barrier[19]);
        println!("plain array update: min {} ns, median {} ns", plain[0], plain[10]);
    }
}
