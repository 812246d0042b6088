//! The switch's log: a target filter that can be changed while it runs (`edgeflow log-level`),
//! and lines journald takes as they are when stderr is the journal, or syslog datagrams with
//! their priority where a service manager without a journal (OpenWrt's procd) would log every
//! line of stderr at one priority.

use std::fmt;
use std::sync::Mutex;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

/// Whether stderr is the journal: systemd sets `JOURNAL_STREAM` to the `device:inode` of the
/// stream it connected, and it counts only if stderr is still that stream (a child whose stderr
/// was redirected inherits the variable).
pub fn stderr_is_journal() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(stream) = std::env::var("JOURNAL_STREAM") else { return false };
    let Some((dev, ino)) = stream.split_once(':') else { return false };
    let Ok(meta) = std::fs::metadata("/proc/self/fd/2") else { return false };
    dev.parse() == Ok(meta.dev()) && ino.parse() == Ok(meta.ino())
}

/// The journal's priority prefix (sd-daemon(3): `<3>` error … `<7>` debug) in place of a time
/// stamp and a level: journald stamps and ranks each line itself, so both would be said twice.
struct JournalLine<F>(F);

impl<S, N, F> FormatEvent<S, N> for JournalLine<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        write!(writer, "<{}>", severity(event.metadata().level()))?;
        self.0.format_event(ctx, writer, event)
    }
}

/// Where `EDGEFLOW_SYSLOG` (a socket path, `/dev/log` on OpenWrt) sends the log: one datagram
/// per line, `<PRI>edgeflow[PID]: message`, facility daemon, severity from the level (RFC 3164,
/// as logd and syslog daemons read it).
struct Syslog {
    socket: std::os::unix::net::UnixDatagram,
}

/// One line on its way: written by the formatter, sent when it is dropped.
pub struct SyslogLine<'a> {
    socket: &'a std::os::unix::net::UnixDatagram,
    priority: u8,
    line: Vec<u8>,
}

/// A level as syslog's and the journal's severity: 3 error … 7 debug.
fn severity(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// The daemon facility (3) and a level's severity.
fn syslog_priority(level: &Level) -> u8 {
    3 * 8 + severity(level)
}

impl std::io::Write for SyslogLine<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.line.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for SyslogLine<'_> {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.line);
        let text = text.trim_end();
        if text.is_empty() {
            return;
        }
        let datagram = format!("<{}>edgeflow[{}]: {text}", self.priority, std::process::id());
        // A full or gone log socket loses the line, never blocks the switch.
        let _ = self.socket.send(datagram.as_bytes());
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Syslog {
    type Writer = SyslogLine<'a>;

    fn make_writer(&'a self) -> SyslogLine<'a> {
        SyslogLine { socket: &self.socket, priority: syslog_priority(&Level::INFO), line: Vec::new() }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> SyslogLine<'a> {
        SyslogLine { socket: &self.socket, priority: syslog_priority(meta.level()), line: Vec::new() }
    }
}

fn syslog_from_env() -> Option<Syslog> {
    let path = std::env::var_os("EDGEFLOW_SYSLOG")?;
    let socket = std::os::unix::net::UnixDatagram::unbound().ok()?;
    match socket.connect(&path).and_then(|_| socket.set_nonblocking(true)) {
        Ok(()) => Some(Syslog { socket }),
        Err(e) => {
            eprintln!("edgeflow: EDGEFLOW_SYSLOG={}: {e}; logging to stderr", path.to_string_lossy());
            None
        }
    }
}

fn parse(filter: &str) -> Result<Targets, String> {
    filter.parse::<Targets>().map_err(|e| format!("log filter '{filter}': {e}"))
}

/// Sets up the log: `filter` (else `$RUST_LOG`, else info) as a target filter such as
/// `info,agent=debug`, written to stderr; under journald without time stamps. The filter can
/// then be changed through the switch's management socket.
pub fn init(filter: Option<&str>) {
    let text =
        filter.map(String::from).or_else(|| std::env::var("RUST_LOG").ok()).unwrap_or_else(|| "info".to_string());
    // Targets, not EnvFilter: what RUST_LOG is used for here, without a regex engine (180 KiB of
    // an embedded image).
    let (targets, text) = match parse(&text) {
        Ok(t) => (t, text),
        Err(e) => {
            eprintln!("edgeflow: {e}; logging at info");
            (Targets::new().with_default(Level::INFO), "info".to_string())
        }
    };
    let (filter_layer, handle) = tracing_subscriber::reload::Layer::new(targets);
    let journal = stderr_is_journal();
    let fmt_layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(!journal && std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    let registry = tracing_subscriber::registry().with(filter_layer);
    if let Some(syslog) = syslog_from_env() {
        // The syslog daemon stamps and ranks each line itself.
        let format = tracing_subscriber::fmt::format().without_time().with_level(false).with_target(false);
        let layer = tracing_subscriber::fmt::layer().with_writer(syslog).with_ansi(false).event_format(format);
        registry.with(layer).init();
    } else if journal {
        let format = tracing_subscriber::fmt::format().without_time().with_level(false).with_target(false);
        registry.with(fmt_layer.event_format(JournalLine(format))).init();
    } else {
        registry.with(fmt_layer).init();
    }
    let current = Mutex::new(text);
    datapath::switch::set_log_control(Box::new(move |wanted| {
        let mut current = current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(wanted) = wanted {
            let targets = parse(wanted)?;
            handle.reload(targets).map_err(|e| e.to_string())?;
            tracing::info!("log filter now '{wanted}' (was '{current}')");
            *current = wanted.to_string();
        }
        Ok(current.clone())
    }));
}
