//! Running under a service manager: systemd's readiness and watchdog protocol (`sd_notify`, spoken
//! directly: one datagram per state, no libsystemd), and where runtime files go.
//!
//! Without `NOTIFY_SOCKET` every call here does nothing, so the same binary runs from a shell, a
//! procd script or a unit.

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::Duration;

/// Where runtime files go when the service manager names no directory.
pub const DEFAULT_RUNTIME_DIR: &str = "/run/edgeflow";

/// The directory for the management sockets: `$RUNTIME_DIRECTORY` (the first, if systemd lists
/// several) under a unit with `RuntimeDirectory=`, else /run/edgeflow. A unit's runtime
/// directory is created for its user, where /run/edgeflow may be root's.
pub fn runtime_dir() -> PathBuf {
    std::env::var_os("RUNTIME_DIRECTORY")
        .and_then(|v| v.to_str().and_then(|s| s.split(':').next()).filter(|s| !s.is_empty()).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_RUNTIME_DIR))
}

/// The service manager's notification socket, if this process was started with one.
pub struct Notifier {
    socket: Option<(UnixDatagram, std::os::unix::net::SocketAddr)>,
    watchdog: Option<Duration>,
}

impl Notifier {
    /// From `NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace) and `WATCHDOG_USEC`
    /// (honoured when `WATCHDOG_PID` is unset or names this process).
    pub fn from_env() -> Notifier {
        let socket = std::env::var("NOTIFY_SOCKET").ok().and_then(|path| {
            let addr = if let Some(name) = path.strip_prefix('@') {
                use std::os::linux::net::SocketAddrExt;
                std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
            } else {
                std::os::unix::net::SocketAddr::from_pathname(&path)
            };
            match (UnixDatagram::unbound(), addr) {
                (Ok(s), Ok(a)) => Some((s, a)),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::warn!("NOTIFY_SOCKET={path}: {e}; the service manager will not hear from this switch");
                    None
                }
            }
        });
        let ours = std::env::var("WATCHDOG_PID").map_or(true, |pid| pid.trim() == std::process::id().to_string());
        let watchdog = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|u| u.trim().parse::<u64>().ok())
            .filter(|&u| u > 0 && ours)
            .map(Duration::from_micros);
        Notifier { socket, watchdog }
    }

    /// Sends newline-separated `KEY=value` assignments (`READY=1`, `STATUS=…`).
    pub fn notify(&self, state: &str) {
        if let Some((socket, addr)) = &self.socket {
            if let Err(e) = socket.send_to_addr(state.as_bytes(), addr) {
                tracing::warn!("telling the service manager '{}': {e}", state.lines().next().unwrap_or(""));
            }
        }
    }

    /// How often to prove liveness: half the manager's watchdog period, as sd_watchdog_enabled(3)
    /// advises, so that one late ping is not a restart.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog.map(|period| period / 2)
    }
}

/// `RELOADING=1` is followed by the time it began, in CLOCK_MONOTONIC microseconds, as systemd's
/// `Type=notify-reload` (253) wants; older managers ignore it.
pub fn reloading_message() -> String {
    format!("RELOADING=1\nMONOTONIC_USEC={}", datapath::sys::monotonic_ns() / 1000)
}

/// The exit status of a process a panic ended: Rust's own for a panic.
pub const PANIC_STATUS: i32 = 101;

/// Makes a panic on any thread end the process. A panic kills only its thread: the forwarding
/// thread's death ended the agent cleanly (status 0, which a supervisor that restarts on failure
/// leaves stopped), the carrier guard's left LESS without its early port marking, and a
/// connection task's left the agent counting a gone controller as up. So the process goes, with
/// the panic in its log, for its supervisor to start it again (the unit's `Restart=on-failure`,
/// procd's `respawn`), and a kept fast path forwards meanwhile. It is what the embedded profile's
/// `panic = "abort"` does for a device image, for every build of the binary: the release
/// profile keeps unwinding because the tests run in it.
///
/// The report goes to stderr directly, not through the log filter (which an operator may have
/// turned off): the thread, where, the message, and a backtrace (none from a device image, which
/// keeps neither symbols nor an index to its unwind tables), since the journal is all that a crash
/// in the field leaves; at the journal's critical priority when stderr is the journal.
/// Then `_exit`: nothing in the process is to be trusted now, and `exit` would flush what other
/// threads may hold locked.
pub fn end_process_on_panic(journal: bool) {
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let prefix = if journal { "<2>" } else { "" };
        let mut report = format!(
            "{prefix}edgeflow: thread '{}' panicked{}: {}; ending the process (status {PANIC_STATUS}) for its \
             supervisor to restart it\n",
            thread.name().unwrap_or("unnamed"),
            info.location().map_or_else(String::new, |l| format!(" at {l}")),
            panic_message(info.payload()),
        );
        let backtrace = std::backtrace::Backtrace::force_capture();
        if backtrace.status() == std::backtrace::BacktraceStatus::Captured {
            for line in backtrace.to_string().lines() {
                report.push_str(&format!("{prefix}  {line}\n"));
            }
        } else {
            // A device image is linked without the unwind tables' index (scripts/cross.sh): being
            // stripped, its backtrace could name no frame anyway.
            report.push_str(&format!("{prefix}  (no backtrace in a device image, docs/deploy.md)\n"));
        }
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), report.as_bytes());
        // SAFETY: _exit ends the process; it touches no memory of it.
        unsafe { libc::_exit(PANIC_STATUS) }
    }));
}

/// What `panic!` said: its payload is a `&'static str` or a `String` (`PanicHookInfo::
/// payload_as_str` is this, but only from Rust 1.91: the declared MSRV is older, Cargo.toml).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&'static str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(a panic without a message)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panics_message_is_its_text_whether_literal_or_formatted() {
        let literal = std::panic::catch_unwind(|| panic!("a literal")).unwrap_err();
        assert_eq!(panic_message(literal.as_ref()), "a literal");
        // A value known only at run time: a constant one is formatted into a `&'static str`.
        let port = std::hint::black_box(3);
        let formatted = std::panic::catch_unwind(|| panic!("port {port}")).unwrap_err();
        assert_eq!(panic_message(formatted.as_ref()), "port 3");
        let other = std::panic::catch_unwind(|| std::panic::panic_any(7u8)).unwrap_err();
        assert_eq!(panic_message(other.as_ref()), "(a panic without a message)");
    }

    #[test]
    fn a_notification_arrives_as_one_datagram_on_a_path_or_an_abstract_socket() {
        let private = datapath::sys::PrivateDir::new("edgeflow-notify").unwrap();
        let dir = private.path();
        let path = dir.join("notify");
        let _ = std::fs::remove_file(&path);
        let listener = UnixDatagram::bind(&path).unwrap();
        let n = Notifier {
            socket: Some((
                UnixDatagram::unbound().unwrap(),
                std::os::unix::net::SocketAddr::from_pathname(&path).unwrap(),
            )),
            watchdog: Some(Duration::from_secs(4)),
        };
        n.notify("READY=1\nSTATUS=forwarding");
        let mut buf = [0u8; 64];
        let len = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1\nSTATUS=forwarding");
        assert_eq!(n.watchdog_interval(), Some(Duration::from_secs(2)));
    }

    #[test]
    fn without_a_manager_nothing_is_sent_and_runtime_files_go_to_run_edgeflow() {
        let n = Notifier { socket: None, watchdog: None };
        n.notify("READY=1");
        assert_eq!(n.watchdog_interval(), None);
        assert!(reloading_message().starts_with("RELOADING=1\nMONOTONIC_USEC="));
    }
}
