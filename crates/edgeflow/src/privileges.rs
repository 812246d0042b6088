//! `edgeflow run --user NAME`: a switch started as root gives up root before it opens anything,
//! keeping only the capabilities its configuration needs. systemd grants them from the unit
//! (`AmbientCapabilities=`); procd, which starts every service as root and whose own
//! capability support needs ujail, has the switch do it itself, as ntpd's or dnsmasq's `-u` do.
//!
//! The order is the kernel's: the bounding set is cut while the process still holds
//! CAP_SETPCAP, the capabilities survive the change of user only with PR_SET_KEEPCAPS, and the
//! effective set, which the change of user empties, is raised again from the permitted one.
//! It runs before the switch starts a thread: the user and the capabilities are each thread's.

use std::ffi::CString;

// The capability numbers of linux/capability.h.
const CAP_NET_ADMIN: u32 = 12;
const CAP_NET_RAW: u32 = 13;
const CAP_IPC_LOCK: u32 = 14;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_SYS_NICE: u32 = 23;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// What the switch must keep, named for the log and the error messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// The kernel fast path (tc, xdp) or AF_XDP ports: loading programs and maps, and the pointer
    /// arithmetic on packet data that the verifier refuses to CAP_BPF alone.
    pub fast_path: bool,
    /// `egress_timing = "fifo"`: SCHED_FIFO for the egress thread.
    pub realtime: bool,
    /// AF_XDP ports: their frame memory (UMEM) is pinned, and charged to RLIMIT_MEMLOCK unless
    /// the process holds CAP_IPC_LOCK (the limit may not be raisable: it was not here).
    pub pinned_memory: bool,
}

/// The capabilities `needs` comes to on this kernel: CAP_BPF and CAP_PERFMON came with Linux 5.8;
/// before, loading a program took CAP_SYS_ADMIN.
pub fn capabilities(needs: Needs, last_cap: u32) -> Vec<(u32, &'static str)> {
    let mut caps = vec![(CAP_NET_ADMIN, "CAP_NET_ADMIN"), (CAP_NET_RAW, "CAP_NET_RAW")];
    if needs.fast_path {
        if last_cap >= CAP_BPF {
            caps.extend([(CAP_PERFMON, "CAP_PERFMON"), (CAP_BPF, "CAP_BPF")]);
        } else {
            caps.push((CAP_SYS_ADMIN, "CAP_SYS_ADMIN"));
        }
    }
    if needs.realtime {
        caps.push((CAP_SYS_NICE, "CAP_SYS_NICE"));
    }
    if needs.pinned_memory {
        caps.push((CAP_IPC_LOCK, "CAP_IPC_LOCK"));
    }
    caps.sort_unstable();
    caps
}

/// The highest capability this kernel knows.
fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(CAP_BPF)
}

/// linux/capability.h's version 3 header and data: two 32-bit words of each set.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

fn os_error(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// Becomes `user` (its uid, its group, no other groups) holding exactly the capabilities
/// `needs` takes, with no way to gain more (no_new_privs). Returns what it kept, for the log.
pub fn become_user(user: &str, needs: Needs) -> Result<String, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(format!("--user {user}: only a switch started as root can change its user"));
    }
    let (uid, gid) = lookup(user)?;
    if uid == 0 {
        return Err(format!("--user {user}: that is root; name the user the switch is to run as"));
    }
    let keep = capabilities(needs, last_cap());
    let mask: u64 = keep.iter().fold(0, |m, (cap, _)| m | 1u64 << cap);
    let memlock = raise_memlock();
    // SAFETY: each call below takes plain integers or a pointer to a value that lives across it;
    // no thread has been started, so the change of user and capabilities is the whole process's.
    unsafe {
        for cap in 0..=last_cap() {
            if mask & (1u64 << cap) == 0 && libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(os_error(&format!("--user {user}: dropping capability {cap} from the bounding set")));
            }
        }
        if libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0 {
            return Err(os_error("--user: PR_SET_KEEPCAPS"));
        }
        if libc::setgroups(1, &gid) != 0 {
            return Err(os_error(&format!("--user {user}: setgroups")));
        }
        if libc::setresgid(gid, gid, gid) != 0 {
            return Err(os_error(&format!("--user {user}: setresgid({gid})")));
        }
        if libc::setresuid(uid, uid, uid) != 0 {
            return Err(os_error(&format!("--user {user}: setresuid({uid})")));
        }
        let header = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
        let word = |w: usize| (mask >> (32 * w)) as u32;
        let data = [0, 1].map(|w| CapData { effective: word(w), permitted: word(w), inheritable: 0 });
        if libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) != 0 {
            return Err(os_error(&format!("--user {user}: capset")));
        }
        if libc::prctl(libc::PR_SET_KEEPCAPS, 0, 0, 0, 0) != 0
            || libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
        {
            return Err(os_error("--user: PR_SET_NO_NEW_PRIVS"));
        }
    }
    let names: Vec<&str> = keep.iter().map(|(_, name)| *name).collect();
    Ok(format!("user={user} uid={uid} gid={gid} capabilities={} memlock={memlock}", names.join(",")))
}

/// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK, which only root may raise: raised
/// now, while the switch is root, as far as it goes.
fn raise_memlock() -> &'static str {
    let infinite = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: setrlimit reads the struct it is given.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &infinite) } == 0 {
        "unlimited"
    } else {
        "unchanged"
    }
}

/// The user's uid and primary group, from the password database.
fn lookup(user: &str) -> Result<(libc::uid_t, libc::gid_t), String> {
    let name = CString::new(user).map_err(|_| format!("--user {user:?}: not a user name"))?;
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    let mut buffer = vec![0 as libc::c_char; 4096];
    // SAFETY: every pointer is to a live local of the size given; getpwnam_r writes into them.
    let rc = unsafe { libc::getpwnam_r(name.as_ptr(), &mut entry, buffer.as_mut_ptr(), buffer.len(), &mut found) };
    if rc != 0 {
        return Err(format!("--user {user}: reading the password database: {}", std::io::Error::from_raw_os_error(rc)));
    }
    if found.is_null() {
        return Err(format!(
            "--user {user}: no such user (OpenWrt's package adds 'edgeflow'; elsewhere `useradd --system {user}`)"
        ));
    }
    Ok((entry.pw_uid, entry.pw_gid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_path_takes_bpf_and_perfmon_or_sys_admin_before_5_8() {
        let names = |needs, last| capabilities(needs, last).into_iter().map(|(_, n)| n).collect::<Vec<_>>();
        assert_eq!(names(Needs::default(), 40), ["CAP_NET_ADMIN", "CAP_NET_RAW"]);
        let tc = Needs { fast_path: true, ..Needs::default() };
        assert_eq!(names(tc, 40), ["CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_PERFMON", "CAP_BPF"]);
        // Linux 5.4 (OpenWrt 21.02) ends at CAP_AUDIT_READ, 37.
        assert_eq!(names(tc, 37), ["CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_SYS_ADMIN"]);
        let fifo = Needs { realtime: true, ..Needs::default() };
        assert_eq!(names(fifo, 40), ["CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_SYS_NICE"]);
        let af_xdp = Needs { fast_path: true, pinned_memory: true, ..Needs::default() };
        assert_eq!(names(af_xdp, 40), ["CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_PERFMON", "CAP_BPF"]);
    }
}
