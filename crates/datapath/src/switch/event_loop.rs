//! The forwarding thread: sleeps until a port has frames, a command waits, a link changes or the
//! next deadline comes; then receives round-robin, runs commands, and does timed work.

use std::sync::atomic::Ordering;
use std::sync::mpsc::TryRecvError;
use std::time::Duration;

use forwarding::DropReason;
use ofp::port::OFPP_LOCAL;
use packet::parse;
use tracing::{debug, info, warn};

use super::fastsync::FAST_PATH_HARVEST;
use super::ports::Transmit;
use super::Switch;
use crate::sys;
use crate::{Command, RxFrame};

/// Frames taken from one port before moving to the next, so that one busy port cannot starve the
/// others or delay controller requests.
const RX_BUDGET: usize = 64;
/// Commands run in one turn of the loop at most, and for how long at most (at least one runs),
/// before the ports are read again: a queue of controller requests holds frames back no longer
/// than that, whoever sent them. Most commands take microseconds; a flow dump of 10 000 flows
/// takes milliseconds, and is one command.
const COMMAND_BUDGET: usize = 64;
const COMMAND_BUDGET_NS: u64 = 1_000_000;
/// Without a fast path, how often the ports' guards are checked (see `check_attachments`).
const GUARD_CHECK: u64 = 1_000_000_000;
/// How soon a port whose socket was busy is tried again.
const EGRESS_RETRY: u64 = 50_000;
/// At most one warning a second about packet-ins over the rate limit.
const LIMIT_REPORT: u64 = 1_000_000_000;
/// With busy timing: how close a scheduled deadline must be for the thread to stop sleeping and
/// poll the clock (a sleep can overshoot by milliseconds at p99).
const BUSY_WINDOW: u64 = 2_000_000;
/// The SCHED_FIFO priority of the forwarding thread with fifo timing.
const FIFO_PRIORITY: i32 = 50;

impl Switch {
    /// Runs until a [`Command::Shutdown`].
    pub fn run(mut self) {
        let mut ready = Vec::new();
        // The housekeeping period: harvesting the fast path when there is one, and in any case
        // checking that nothing was detached behind the switch's back.
        let housekeeping = if self.fast.is_some() { FAST_PATH_HARVEST } else { GUARD_CHECK };
        let mut next_harvest = housekeeping;
        let (mut limit_reported, mut limit_reported_at) = (0, 0);
        // The P4 program's kernel ports are written before the first frame is read: until they
        // are, the kernel sends every frame up (a test's first pings went up, counted as
        // `sent_up_no_kernel_port`, when the first sync came with the loop's first event).
        #[cfg(feature = "p4")]
        self.sync_p4();
        info!(ports = self.ports.len(), mode = self.mode.name(), poll = self.cfg.poll.name(), "forwarding");
        self.precise_timers();
        if let Some(cpu) = self.cfg.cpu {
            // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET stays inside it for cpu below
            // CPU_SETSIZE, which the configuration checked against the machine's CPUs.
            let ok = unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
            };
            match ok {
                true => info!(cpu, "forwarding thread pinned"),
                false => warn!(cpu, "cannot pin the forwarding thread: {}", std::io::Error::last_os_error()),
            }
        }
        if self.cfg.timing == super::Timing::Fifo {
            // SAFETY: sched_param is plain data (musl's has more fields than the priority).
            let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
            param.sched_priority = FIFO_PRIORITY;
            // SAFETY: param is valid; 0 is this thread.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
                warn!("fifo timing: cannot run at SCHED_FIFO: {}", std::io::Error::last_os_error());
            }
        }
        loop {
            let mut fds = vec![self.bell.fd.fd()];
            if let Some(l) = &self.links {
                fds.push(l.fd());
            }
            let fixed = fds.len();
            let port_nos: Vec<u32> = self.ports.iter().filter(|(_, p)| p.rx.is_some()).map(|(&n, _)| n).collect();
            fds.extend(port_nos.iter().map(|n| self.ports[n].rx.as_ref().unwrap().rx_fd()));
            if let Some(up) = &self.upcall_rx {
                fds.push(up.rx_fd());
            }
            let now = self.now();
            let mut wake = self.mode.next_deadline().unwrap_or(u64::MAX).min(next_harvest);
            let mut scheduled = u64::MAX;
            for p in self.ports.values() {
                // A scheduled port says when its next frame is due; an unscheduled one with a
                // backlog found its socket full, and is tried again shortly.
                // A port whose link is down is not retried: its socket takes nothing until the
                // link comes back, and the link's news wakes the loop then.
                match (p.egress.scheduler(), p.egress.next_wake()) {
                    (Some(_), Some(t)) => scheduled = scheduled.min(t),
                    (Some(_), None) => {}
                    (None, _) if p.egress.backlog() > 0 && p.can_send() => wake = wake.min(now + EGRESS_RETRY),
                    (None, _) => {}
                }
            }
            wake = wake.min(scheduled);
            let mut timeout = (wake != u64::MAX).then(|| Duration::from_nanos(wake.saturating_sub(now)));
            if self.cfg.timing == super::Timing::Busy && scheduled.saturating_sub(now) < BUSY_WINDOW {
                timeout = Some(Duration::ZERO);
            }
            // Busy polling: the rings are asked again at once (poll(2) still runs, with no wait,
            // for the doorbell, the links and sockets that are not rings).
            // Commands left over the last turn's budget (their doorbell already rung and drained).
            if self.cfg.poll == super::Poll::Busy || self.commands_pending() {
                timeout = Some(Duration::ZERO);
            }
            if let Err(e) = sys::poll_until(&fds, timeout, &mut ready) {
                warn!("poll: {e}");
            }
            // A link that went down is news before the frames that woke us: they take the way
            // around it rather than into it.
            if fixed == 2 && ready.contains(&1) {
                let events = self.links.as_mut().map(|l| l.drain()).unwrap_or_default();
                for ev in events {
                    self.link_event(ev);
                }
                self.sync_fast();
            }
            // Drain every port round-robin until all are empty (or a command is waiting).
            loop {
                let mut got = 0;
                for &no in &port_nos {
                    got += self.receive(no);
                }
                got += self.receive_upcalls();
                self.flush_all();
                if got == 0 || self.commands_pending() {
                    break;
                }
            }
            if ready.contains(&0) {
                self.bell.fd.drain();
            }
            if !self.run_commands() {
                break;
            }
            self.sync_fast();
            let now = self.now();
            if now >= next_harvest {
                self.harvest_fast(now);
                next_harvest = now + if self.fast.is_some() { self.harvest_period() } else { housekeeping };
                self.release_inherited_when_due(now);
                self.check_attachments();
                self.sync_links();
                self.sync_fast();
                if let Some(fast) = self.fast.as_mut() {
                    fast.sweep();
                }
            }
            if self.mode.next_deadline().is_some_and(|d| now >= d) {
                self.tick(now);
            }
            let limited = self.drops.get(DropReason::PacketInLimit);
            if limited > limit_reported && now.saturating_sub(limit_reported_at) >= LIMIT_REPORT {
                warn!(dropped = limited - limit_reported, "packet-ins over the rate limit dropped");
                (limit_reported, limit_reported_at) = (limited, now);
            }
        }
        if let Some(fast) = &self.fast {
            let [hits, misses, upcalls, slow, drops] = fast.counters();
            info!(
                hits,
                misses,
                upcalls,
                slow,
                drops,
                entries = fast.len(),
                installed = fast.installed,
                refused = fast.refused,
                crowded = fast.crowded,
                moved = fast.moved,
                retired = fast.retired,
                link_frames = fast.link_counters()[1].1,
                via_tc = fast.xdp_via_tc_frames(),
                "fast path totals"
            );
        }
        info!(drops = %self.drops.summary(), "forwarding stopped");
    }

    /// A sleeping SCHED_OTHER thread may be woken up to 50 µs late on purpose (timer slack): a
    /// scheduled port wants its deadlines as they are.
    pub(super) fn precise_timers(&self) {
        if self.ports.values().any(|p| p.egress.scheduler().is_some()) {
            // SAFETY: plain prctl on this thread.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64) };
        }
    }

    /// The mode's timed work (flow timeouts, ageing). Kernel hits count as use: collected first.
    fn tick(&mut self, now: u64) {
        self.harvest_fast(now);
        let mut out = Transmit {
            ports: &mut self.ports,
            events: &mut *self.events,
            drops: &mut self.drops,
            sent: &mut self.sent,
            now,
        };
        self.mode.tick(now, &mut out);
        self.sent.clear();
        self.flush_all();
        self.sync_fast();
    }

    fn commands_pending(&self) -> bool {
        self.bell.pending.load(Ordering::Acquire)
    }

    /// Hands queued frames to every port's socket and kicks the sockets.
    pub(super) fn flush_all(&mut self) {
        for p in self.ports.values_mut() {
            // Read per port: sending on the ports before it took time, and a gated frame's last
            // start time is checked against the clock.
            let now = self.start.elapsed().as_nanos() as u64;
            let refused = p.service(now);
            self.drops.add_n(DropReason::OverMtu, refused);
            if let Some(tx) = p.tx.as_mut() {
                tx.flush();
            }
        }
    }

    /// Executes queued commands, within the turn's budget; false on shutdown.
    ///
    /// A run of flow-mods reaches the kernel fast path once, after the last of them (or before
    /// any other command: a barrier's reply, a report, a statistics request each find the kernel
    /// in step with everything before them). Frames are not read in between, so nothing sees
    /// the kernel behind the mode but the kernel's own frames, as during one flow-mod.
    ///
    /// Likewise the frames of a run of packet-outs (and of flow-mods naming a buffer) leave
    /// with one kick of each socket, after the last of them or before any other command (a
    /// barrier's reply follows the frames of the packet-outs before it onto the wire): a
    /// reactive controller's setups come a flow-mod and a packet-out each, and a kick per
    /// packet-out was the forwarding thread's one system call per setup. A lone packet-out
    /// still leaves at once, at the end of its run.
    fn run_commands(&mut self) -> bool {
        let started = self.now();
        let mut done = 0;
        let mut unsynced = false;
        let mut unkicked = false;
        loop {
            let now = self.now();
            if done == COMMAND_BUDGET || (done > 0 && now - started >= COMMAND_BUDGET_NS) {
                if unkicked {
                    self.flush_all();
                }
                if unsynced {
                    self.sync_fast();
                }
                // The rest wait for the next turn, after the ports are read.
                self.bell.pending.store(true, Ordering::Release);
                return true;
            }
            done += 1;
            let mut next = self.commands.try_recv();
            if matches!(next, Err(TryRecvError::Empty)) {
                // The flag comes down only on an empty queue, and the queue is read once more
                // after: a command sent while it was still up rang no bell (SwitchHandle::send),
                // and the swap makes that command visible here.
                self.bell.pending.swap(false, Ordering::AcqRel);
                next = self.commands.try_recv();
            }
            let flow_mod =
                matches!(&next, Ok(Command::FlowMods { .. } | Command::OpenFlow { msg: ofp::Message::FlowMod(_), .. }));
            let packet_out = matches!(&next, Ok(Command::OpenFlow { msg: ofp::Message::PacketOut(_), .. }));
            if unkicked && !flow_mod && !packet_out {
                self.flush_all();
                unkicked = false;
            }
            if unsynced && !flow_mod {
                self.sync_fast();
                unsynced = false;
            }
            match next {
                Ok(Command::OpenFlow { xid, msg, head, reply }) => {
                    unkicked |= self.openflow(xid, msg, &head, &reply, now);
                    if flow_mod {
                        unsynced = true;
                    } else {
                        self.sync_fast();
                    }
                }
                Ok(Command::FlowMods { mods, reply }) => {
                    for m in mods {
                        let head = m.head;
                        unkicked |= self.flow_mod(m.xid, m.fm, &head[..m.head_len as usize], &reply, now);
                    }
                    unsynced = true;
                }
                Ok(Command::Reply { bytes, reply }) => reply(bytes),
                Ok(Command::FailOpen(on)) => {
                    if on != self.fail_open {
                        info!(
                            fail_open = on,
                            "standalone mode {}",
                            if on { "learning on its own" } else { "under control" }
                        );
                        self.fail_open = on;
                        self.fail_open_entered += on as u64;
                    }
                    self.mode.set_fail_open(on);
                }
                Ok(Command::Reconfigure { ports, egress, mode, done }) => {
                    let result = self.reconfigure(ports, egress, mode);
                    match &result {
                        Ok(what) => info!("configuration applied: {what}"),
                        Err(e) => warn!("configuration refused, the running one stays: {e}"),
                    }
                    done(result);
                }
                Ok(Command::Reloaded { applied, message }) => {
                    let (ok, refused, last) = &mut self.reloads;
                    *if applied { ok } else { refused } += 1;
                    *last = Some((applied, message));
                }
                Ok(Command::Report(deliver)) => {
                    // What the kernel counted is in it, its megaflow entries' counts as of at
                    // most one harvest period ago: reading every entry back for each scrape
                    // would let a scrape loop take the thread from the frames.
                    let now = self.now();
                    self.harvest_fast_within(now, self.harvest_period());
                    deliver(self.report())
                }
                Ok(Command::Heartbeat(answer)) => answer(),
                Ok(Command::WithMode(job)) => {
                    // A control plane reading counters reads what the kernel counted too (a P4
                    // program's afresh; megaflow entries', which it does not read, as for a
                    // scrape), and hears back once what it wrote is in the kernel.
                    let now = self.now();
                    self.harvest_fast_within(now, self.harvest_period());
                    let deliver = job(&mut *self.mode);
                    self.sync_fast();
                    deliver()
                }
                Ok(Command::Shutdown) | Err(TryRecvError::Disconnected) => return false,
                Err(TryRecvError::Empty) => return true,
            }
        }
    }

    fn receive(&mut self, no: u32) -> usize {
        let Some(port) = self.ports.get_mut(&no) else {
            return 0;
        };
        let Some(mut rx) = port.rx.take() else { return 0 };
        let (now, wall) = (self.now(), crate::sys::realtime_ns());
        let n = rx.recv(RX_BUDGET, &mut |frame: RxFrame<'_>| {
            let at = self.ports.get_mut(&no).unwrap().arrivals.at(now, wall, frame.tstamp_ns);
            self.handle_frame(no, frame, at)
        });
        let port = self.ports.get_mut(&no).unwrap();
        port.rx = Some(rx);
        port.counters.socket_rx_packets += n as u64;
        n
    }

    /// Frames the kernel fast path sent up: the ingress port rides in the (metadata) VLAN tag.
    fn receive_upcalls(&mut self) -> usize {
        let Some(mut rx) = self.upcall_rx.take() else { return 0 };
        let (now, wall) = (self.now(), crate::sys::realtime_ns());
        let n = rx.recv(RX_BUDGET, &mut |frame: RxFrame<'_>| {
            let tag = frame.vlan.map(|(_, tci)| tci & 0x0fff);
            let port = tag.and_then(|t| self.fast.as_ref().and_then(|f| f.tag_port.get(&t).copied()));
            let Some(in_port) = port.filter(|p| self.ports.contains_key(p)) else { return };
            let at = self.upcall_arrivals.at(now, wall, frame.tstamp_ns);
            self.handle_frame(in_port, RxFrame { vlan: None, ..frame }, at);
        });
        self.upcall_rx = Some(rx);
        n
    }

    fn handle_frame(&mut self, in_port: u32, frame: RxFrame<'_>, now: u64) {
        let port = self.ports.get_mut(&in_port).unwrap();
        port.counters.rx_packets += 1;
        port.counters.rx_bytes += frame.data.len() as u64;
        if port.blocked() {
            port.counters.rx_dropped += 1;
            self.drops.add(DropReason::PortBlocked);
            return;
        }
        let mut offload = frame.offload;
        let data: &[u8] = match frame.vlan {
            Some((tpid, tci)) if frame.data.len() >= 12 => {
                self.tagged.clear();
                self.tagged.extend_from_slice(&frame.data[..12]);
                self.tagged.extend_from_slice(&tpid.to_be_bytes());
                self.tagged.extend_from_slice(&tci.to_be_bytes());
                self.tagged.extend_from_slice(&frame.data[12..]);
                if let Some(c) = &mut offload.csum {
                    c.start += 4;
                }
                &self.tagged
            }
            _ => frame.data,
        };
        let (key, layout) = match parse(data, in_port) {
            Ok(p) => p,
            Err(e) => {
                port.counters.rx_errors += 1;
                self.drops.add(DropReason::Malformed);
                debug!(port = in_port, "malformed frame dropped: {e:?}");
                return;
            }
        };
        self.pkt.load(data, offload, layout);
        self.sent.clear();
        let mut out = Transmit {
            ports: &mut self.ports,
            events: &mut *self.events,
            drops: &mut self.drops,
            sent: &mut self.sent,
            now,
        };
        let verdict = self.mode.receive(&mut self.pkt, &key, now, &mut out);
        if let Some(reason) = verdict.dropped {
            self.drops.add(reason);
        }
        if let Some(id) = verdict.entry.filter(|_| in_port != OFPP_LOCAL && self.fast.is_some()) {
            // The decision may itself have changed the mode's generation (a newly learned
            // address): the kernel's copy goes first, then the new entry joins it.
            self.sync_fast();
            self.mirror(id, &key);
        }
    }
}
