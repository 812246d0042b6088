//! How a receiver learns that its senders are done, so that it stops when their last frame is in
//! rather than after a guessed idle time: with `--end-on-stdin`, whoever runs it writes each
//! sender's JSON report on a line of its standard input and then closes it.
//!
//! A receiver also says on standard error when it is ready (`edgeflow-loadgen: ready`): its
//! sockets are open or its program attached, so a sender started after that line loses nothing
//! to a receiver still starting.
//!
//! A sender (`send`, `es-send`) stops early on SIGINT or SIGTERM and reports what it sent, so that a stream
//! can last as long as something takes (a switch restarting) rather than a guessed time.

use clap::Args;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub const STDIN: RawFd = 0;

/// When a receiver stops, besides its --duration.
#[derive(Args)]
pub struct EndArgs {
    /// Stop once standard input closes (the senders are done; each may first write its JSON
    /// report on a line): at once if every frame they reported sending has arrived, else once
    /// nothing has arrived for --settle seconds. --idle does not apply.
    #[arg(long)]
    end_on_stdin: bool,
    /// With --end-on-stdin: how long frames still on their way may take to arrive.
    #[arg(long, default_value_t = 0.1)]
    settle: f64,
}

impl EndArgs {
    pub fn notice(&self) -> Result<Option<EndNotice>, String> {
        if self.end_on_stdin {
            EndNotice::listen().map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn settle(&self) -> Duration {
        Duration::from_secs_f64(self.settle)
    }
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// From now on SIGINT and SIGTERM only ask the process to stop: `stopped` says whether one came.
pub fn stop_on_signals() -> Result<(), String> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a handler that only stores to an atomic (which is
        // async-signal-safe); system calls it interrupts are restarted.
        let r = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_stop as extern "C" fn(libc::c_int) as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if r != 0 {
            return Err(format!("handling signal {sig}: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// Whether SIGINT or SIGTERM came since `stop_on_signals`.
pub fn stopped() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Tells whoever started the receiver that frames sent from now on will be seen.
pub fn say_ready() {
    eprintln!("edgeflow-loadgen: ready");
}

/// What standard input has said so far.
#[derive(Default)]
pub struct EndNotice {
    pending: Vec<u8>,
    /// How many reports (lines) arrived.
    reports: usize,
    /// Frames the reports say were sent, summed over them: under "" for `"sent": N`, per link for
    /// `"sent": {"10": N, ...}`.
    sent: Vec<(String, u64)>,
    /// When standard input closed: the senders are done.
    pub closed_at: Option<Instant>,
}

impl EndNotice {
    /// Starts listening on standard input (made non-blocking).
    pub fn listen() -> Result<EndNotice, String> {
        // SAFETY: fcntl on the process's own standard input, with integer arguments.
        let ok = unsafe {
            let flags = libc::fcntl(STDIN, libc::F_GETFL);
            flags >= 0 && libc::fcntl(STDIN, libc::F_SETFL, flags | libc::O_NONBLOCK) == 0
        };
        if !ok {
            return Err(format!("--end-on-stdin: standard input: {}", std::io::Error::last_os_error()));
        }
        Ok(EndNotice::default())
    }

    /// Reads what standard input has (call when poll says it is readable, or now and then).
    pub fn read(&mut self) {
        let mut buf = [0u8; 4096];
        while self.closed_at.is_none() {
            // SAFETY: reading into a live buffer of the length given.
            let n = unsafe { libc::read(STDIN, buf.as_mut_ptr().cast(), buf.len()) };
            match n {
                0 => self.closed_at = Some(Instant::now()),
                n if n > 0 => self.pending.extend_from_slice(&buf[..n as usize]),
                _ => break, // EAGAIN: nothing more for now
            }
        }
        while let Some(at) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=at).collect();
            self.take_report(&line);
        }
        if self.closed_at.is_some() && !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.take_report(&line);
        }
    }

    fn take_report(&mut self, line: &[u8]) {
        let line = String::from_utf8_lossy(line);
        if line.trim().is_empty() {
            return;
        }
        self.reports += 1;
        for (name, n) in sent_counts(&line) {
            match self.sent.iter_mut().find(|(k, _)| *k == name) {
                Some((_, total)) => *total += n,
                None => self.sent.push((name, n)),
            }
        }
    }

    /// What the senders reported sending (see `sent`), if any report came.
    pub fn reported(&self) -> Option<&[(String, u64)]> {
        (self.reports > 0).then_some(&self.sent[..])
    }

    /// The same, once the senders are done: what a receiver waits for before it stops at once.
    pub fn finished(&self) -> Option<&[(String, u64)]> {
        self.closed_at.and(self.reported())
    }

    /// True once the senders are done and `settle` has passed since anything last arrived
    /// (`last_arrival`) or since they were done, whichever is later: what is still coming after
    /// that was lost on the way.
    pub fn settled(&self, last_arrival: Option<Instant>, settle: Duration) -> bool {
        let Some(closed) = self.closed_at else { return false };
        let quiet_since = last_arrival.map_or(closed, |t| t.max(closed));
        quiet_since.elapsed() >= settle
    }
}

/// `"sent": N` as [("", N)], `"sent": {"10": N, "20": M}` as [("10", N), ("20", M)], from a
/// report line; nothing if the line has no such field.
pub fn sent_counts(report: &str) -> Vec<(String, u64)> {
    let Some(at) = report.find("\"sent\":") else { return vec![] };
    let rest = report[at + 7..].trim_start();
    if let Some(inner) = rest.strip_prefix('{') {
        let body = &inner[..inner.find('}').unwrap_or(inner.len())];
        body.split(',')
            .filter_map(|kv| {
                let (k, v) = kv.split_once(':')?;
                Some((k.trim().trim_matches('"').to_string(), v.trim().parse().ok()?))
            })
            .collect()
    } else {
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        digits.parse().map(|n| vec![(String::new(), n)]).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_kinds_of_sender_report() {
        let plain = "{\"sent\": 901, \"skipped\": 100, \"last_seq\": 1000}";
        assert_eq!(sent_counts(plain), vec![(String::new(), 901)]);
        let es = "{\"sent\": {\"10\": 500, \"20\": 1000}, \"tx_busy\": 0}";
        assert_eq!(sent_counts(es), vec![("10".to_string(), 500), ("20".to_string(), 1000)]);
        assert!(sent_counts("{\"received\": 3}").is_empty());
    }

    #[test]
    fn sums_reports_per_link() {
        let mut n = EndNotice::default();
        assert_eq!(n.reported(), None);
        n.take_report(b"{\"sent\": {\"10\": 5}}\n");
        n.take_report(b"{\"sent\": {\"10\": 2, \"20\": 1}}");
        assert_eq!(n.reported(), Some(&[("10".to_string(), 7), ("20".to_string(), 1)][..]));
        assert_eq!(n.finished(), None, "not before standard input closes");
    }
}
