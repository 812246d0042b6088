//! Commands for a switch running on this machine that work by signal: `edgeflow stop`
//! (SIGTERM) and `edgeflow reload` (SIGHUP), each then waiting on the switch for the outcome.

use std::time::Duration;

use crate::{config, stats};

/// A signal reaches only a switch on this machine: one named by a TCP target may be elsewhere.
fn local_only(target: Option<&str>, done: &str) -> Result<(), String> {
    match target {
        Some(t) if t.starts_with("tcp:") => {
            Err(format!("a switch is {done} through its local management socket, not over TCP"))
        }
        _ => Ok(()),
    }
}

/// Sends `sig` to the process the switch's `report` names as its own; its pid.
fn signal(report: &serde_json::Value, sig: i32) -> Result<i32, String> {
    let pid = report["pid"].as_u64().ok_or("the switch did not say its process id")? as i32;
    // SAFETY: a plain signal to a process the switch named as its own.
    if unsafe { libc::kill(pid, sig) } != 0 {
        return Err(format!("process {pid}: {}", std::io::Error::last_os_error()));
    }
    Ok(pid)
}

/// `edgeflow reload`: SIGHUP to the switch, then its report until it counts one more reload.
/// The outcome is the switch's own (the report's `reloads.last`), so a refusal's reason is the
/// one it logged.
pub fn reload(target: Option<&str>) -> Result<String, String> {
    local_only(target, "reloaded")?;
    let count = |r: &serde_json::Value| {
        r["reloads"]["applied"].as_u64().unwrap_or(0) + r["reloads"]["refused"].as_u64().unwrap_or(0)
    };
    let before = stats::fetch(target)?;
    let pid = signal(&before, libc::SIGHUP)?;
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
        let now = stats::fetch(target)?;
        if count(&now) > count(&before) {
            let last = &now["reloads"]["last"];
            let message = last["message"].as_str().unwrap_or("").to_string();
            return match last["result"].as_str() {
                Some("applied") => Ok(message),
                _ => Err(format!("configuration refused, the running one stays: {message}")),
            };
        }
    }
    Err(format!("process {pid} did not finish reading its configuration within 60 s"))
}

/// `edgeflow stop`: SIGTERM to the switch that answers at `target`, waiting until it is gone;
/// with `clean`, then what it (or, with none running, the switch `target` names, or every switch)
/// kept in the kernel is removed.
pub fn stop(target: Option<&str>, clean: bool) -> Result<(), String> {
    local_only(target, "stopped")?;
    let dpids = match stats::fetch(target) {
        Ok(report) => {
            let dpid = report["dpid"].as_str().and_then(|d| u64::from_str_radix(d, 16).ok());
            let pid = signal(&report, libc::SIGTERM)?;
            let gone = || !std::path::Path::new(&format!("/proc/{pid}")).exists();
            let until = std::time::Instant::now() + Duration::from_secs(15);
            while !gone() && std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            if !gone() {
                return Err(format!("process {pid} is still running 15 s after SIGTERM"));
            }
            println!("stopped switch {:016x} (process {pid})", dpid.unwrap_or(0));
            dpid.into_iter().collect()
        }
        Err(e) if !clean => return Err(e),
        Err(_) => match target {
            Some(t) if !t.contains('/') && !t.starts_with("unix:") => vec![config::parse_dpid(t)?],
            Some(t) => return Err(format!("no switch answers at {t}; give its dpid to remove what it kept")),
            None => datapath::fastpath::keep::kept_dpids(),
        },
    };
    if clean {
        for dpid in dpids {
            let done = datapath::fastpath::keep::clean(dpid).map_err(|e| format!("{dpid:016x}: {e}"))?;
            let mut what: Vec<String> = done.dir.iter().map(|d| d.display().to_string()).collect();
            what.extend(done.upcall);
            what.extend(done.detached.iter().map(|p| format!("programs on {p}")));
            match what.is_empty() {
                true => println!("switch {dpid:016x}: nothing kept in the kernel"),
                false => println!("switch {dpid:016x}: removed {}", what.join(", ")),
            }
        }
    }
    Ok(())
}
