//! A small eBPF loader: reads the ELF objects clang builds from `bpf/`, creates their maps, loads
//! their programs and attaches them with BPF links (XDP, TCX). Only what edgeflow's own programs
//! use: classic map definitions in a `maps` section (no BTF), one program per section, map
//! references and kernel-function (kfunc) calls as the only relocations. A kfunc is found by name
//! in the running kernel's BTF; one the kernel lacks becomes `r0 = -EOPNOTSUPP`, so a program
//! declares kfuncs it can live without as weak and checks their result.
//!
//! Reading the ELF (either byte order) is `elf.rs`; pinning maps and links is `pin.rs`. This file,
//! ~960 lines and its tests ~215, is one concern read top to bottom: maps (batched reads of an
//! array's cells among them), relocations, load
//! (optional programs an older kernel may refuse; maps reused from a pin directory; device-bound
//! copies with the headroom a kernel bug makes them need; RLIMIT_MEMLOCK raised on kernels that
//! charge it), attach and link info, test runs with the contexts each
//! kernel takes, and the one guard its tests and the kernel tests share (they load programs,
//! which needs root). Attaching without links (older kernels) is the datapath's
//! `attach.rs`, over netlink. Why it is ours and not a library: docs/ebpf-loader.md.

pub mod clang;
mod elf;
mod mapped;
pub use mapped::MappedArray;
pub mod objects;
mod pin;

pub use elf::{section, ByteOrder};
use elf::{Parsed, Relocation};

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

mod cmd {
    pub const MAP_CREATE: i32 = 0;
    pub const MAP_LOOKUP_ELEM: i32 = 1;
    pub const MAP_UPDATE_ELEM: i32 = 2;
    pub const MAP_DELETE_ELEM: i32 = 3;
    pub const MAP_GET_NEXT_KEY: i32 = 4;
    pub const MAP_LOOKUP_AND_DELETE_ELEM: i32 = 21;
    pub const MAP_LOOKUP_BATCH: i32 = 24;
    pub const PROG_LOAD: i32 = 5;
    pub const PROG_TEST_RUN: i32 = 10;
    pub const OBJ_GET_INFO_BY_FD: i32 = 15;
    pub const LINK_CREATE: i32 = 28;
}

pub mod prog_type {
    pub const SCHED_CLS: u32 = 3;
    pub const XDP: u32 = 6;
}

pub mod attach {
    pub const XDP: u32 = 37;
    pub const TCX_INGRESS: u32 = 46;
    pub const TCX_EGRESS: u32 = 47;
}

pub mod xdp_flags {
    pub const SKB_MODE: u32 = 1 << 1;
    pub const DRV_MODE: u32 = 1 << 2;
}

pub const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_PSEUDO_KFUNC_CALL: u8 = 2;
/// A program for one device only: it may call that driver's kfuncs (XDP metadata such as the
/// VLAN tag the NIC took out of the frame).
const BPF_F_XDP_DEV_BOUND_ONLY: u32 = 1 << 6;
/// An XDP program that takes multi-buffer frames (Linux 5.18+; an older kernel refuses the flag).
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;
const EOPNOTSUPP: i32 = 95;
/// Programs are loaded with these flags on this target. On MIPS, a kernel without efficient
/// unaligned access, the verifier holds every packet load and store to its natural alignment,
/// counted from 2 bytes before the frame (NET_IP_ALIGN): the fast path's word-wide copies of the
/// frame's head, and its loads at offsets known only at run time, are refused there. With
/// `BPF_F_ANY_ALIGNMENT` (root only) it leaves them be; the CPU traps on an unaligned word and the
/// kernel emulates the access (arch/mips/kernel/unaligned.c), slower but correct.
const ALIGNMENT_FLAGS: u32 = if cfg!(any(target_arch = "mips", target_arch = "mips64")) { 1 << 1 } else { 0 };
const BPF_MAP_TYPE_HASH: u32 = 1;
/// A hash map whose elements the kernel allocates as they are added, not all at its creation.
const BPF_F_NO_PREALLOC: u32 = 1 << 0;

/// The flags a map of the object is created with here: the object's, except that a 32-bit build
/// preallocates its hash maps. A 32-bit kernel (6.1's `bpf_mem_alloc`) puts a one-pointer free-list
/// node in front of each element it allocates on demand, so every element, and the 64-bit counters
/// the programs add to atomically in it, sits 4 bytes off an 8-byte boundary; ARM's 64-bit
/// exclusive load (`ldrexd`, the interpreter's `atomic64_add`) faults there and oopses the kernel.
/// A preallocated map's elements are 8-byte aligned on every kernel. Only a 32-bit program runs on
/// a 32-bit kernel; one on a 64-bit kernel preallocates too, which costs memory, not correctness.
fn creation_flags(map_type: u32, flags: u32) -> u32 {
    match cfg!(target_pointer_width = "32") && map_type == BPF_MAP_TYPE_HASH {
        true => flags & !BPF_F_NO_PREALLOC,
        false => flags,
    }
}

/// `union bpf_attr`, as bytes we fill field by field (its layout is per command).
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }
    fn u32(mut self, at: usize, v: u32) -> Attr {
        self.0[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(mut self, at: usize, v: u64) -> Attr {
        self.0[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn name(mut self, at: usize, name: &str) -> Attr {
        let n = name.len().min(15);
        for (i, b) in name.bytes().take(n).enumerate() {
            // Kernel object names allow only alphanumerics, '_' and '.'.
            self.0[at + i] = if b.is_ascii_alphanumeric() || b == b'.' { b } else { b'_' };
        }
        self
    }
    fn read_u32(&self, at: usize) -> u32 {
        u32::from_ne_bytes(self.0[at..at + 4].try_into().unwrap())
    }
}

fn bpf(command: i32, attr: &mut Attr) -> io::Result<i32> {
    // SAFETY: attr is a zero-initialised, large-enough bpf_attr for the command.
    let r = unsafe { libc::syscall(libc::SYS_bpf, command, attr.0.as_mut_ptr(), attr.0.len()) };
    cvt(r as i32)
}

fn bpf_fd(command: i32, attr: &mut Attr) -> io::Result<OwnedFd> {
    let fd = bpf(command, attr)?;
    // SAFETY: the bpf() call returned a new file descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[derive(Debug)]
pub struct Map {
    fd: OwnedFd,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
}

impl Map {
    pub fn create(
        name: &str,
        map_type: u32,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        flags: u32,
    ) -> io::Result<Map> {
        let mut a = Attr::new()
            .u32(0, map_type)
            .u32(4, key_size)
            .u32(8, value_size)
            .u32(12, max_entries)
            .u32(16, flags)
            .name(28, name);
        let fd = bpf_fd(cmd::MAP_CREATE, &mut a).map_err(|e| io::Error::new(e.kind(), format!("map {name}: {e}")))?;
        Ok(Map { fd, key_size, value_size, max_entries })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// An array of `max_entries` maps shaped like `inner` (`BPF_MAP_TYPE_ARRAY_OF_MAPS`). Its
    /// use here is as a barrier: an update of a map of maps from the system call returns only
    /// after an RCU grace period (`maybe_wait_bpf_programs` in kernel/bpf/syscall.c, since 4.20),
    /// that is after every BPF program that was running when it began has ended.
    pub fn create_array_of_maps(name: &str, inner: &Map, max_entries: u32) -> io::Result<Map> {
        const BPF_MAP_TYPE_ARRAY_OF_MAPS: u32 = 12;
        let mut a = Attr::new()
            .u32(0, BPF_MAP_TYPE_ARRAY_OF_MAPS)
            .u32(4, 4)
            .u32(8, 4)
            .u32(12, max_entries)
            .u32(20, inner.fd() as u32)
            .name(28, name);
        let fd = bpf_fd(cmd::MAP_CREATE, &mut a).map_err(|e| io::Error::new(e.kind(), format!("map {name}: {e}")))?;
        Ok(Map { fd, key_size: 4, value_size: 4, max_entries })
    }

    /// The same map through a second descriptor, for another thread to write.
    pub fn try_clone(&self) -> io::Result<Map> {
        Ok(Map { fd: self.fd.try_clone()?, ..*self })
    }

    pub fn update(&self, key: &[u8], value: &[u8]) -> io::Result<()> {
        debug_assert_eq!(key.len(), self.key_size as usize);
        debug_assert_eq!(value.len(), self.value_size as usize);
        let mut a = Attr::new().u32(0, self.fd() as u32).u64(8, key.as_ptr() as u64).u64(16, value.as_ptr() as u64);
        bpf(cmd::MAP_UPDATE_ELEM, &mut a).map(|_| ())
    }

    pub fn lookup(&self, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        let mut value = vec![0u8; self.value_size as usize];
        let mut a = Attr::new().u32(0, self.fd() as u32).u64(8, key.as_ptr() as u64).u64(16, value.as_mut_ptr() as u64);
        match bpf(cmd::MAP_LOOKUP_ELEM, &mut a) {
            Ok(_) => Ok(Some(value)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A per-CPU map's value for `key`, one entry per possible CPU.
    pub fn lookup_percpu(&self, key: &[u8]) -> io::Result<Vec<Vec<u8>>> {
        let stride = (self.value_size as usize).next_multiple_of(8);
        let cpus = possible_cpus()?;
        let mut buf = vec![0u8; stride * cpus];
        let mut a = Attr::new().u32(0, self.fd() as u32).u64(8, key.as_ptr() as u64).u64(16, buf.as_mut_ptr() as u64);
        bpf(cmd::MAP_LOOKUP_ELEM, &mut a)?;
        Ok(buf.chunks(stride).map(|c| c[..self.value_size as usize].to_vec()).collect())
    }

    /// The values of an array map's first `count` cells, in key order, each `value_size` bytes
    /// (a per-CPU map's: one per possible CPU, each padded to 8 bytes, as
    /// [`Map::lookup_percpu`] reads them), in as few calls as the kernel allows: a
    /// BPF_MAP_LOOKUP_BATCH call per batch of cells (Linux 5.6), else a lookup per cell.
    pub fn lookup_cells(&self, count: u32, per_cpu: bool) -> io::Result<Vec<u8>> {
        let count = count.min(self.max_entries);
        let cell = match per_cpu {
            true => (self.value_size as usize).next_multiple_of(8) * possible_cpus()?,
            false => self.value_size as usize,
        };
        let mut values = vec![0u8; cell * count as usize];
        let mut keys = vec![0u32; count as usize];
        let (mut next, mut read) = (0u32, 0u32);
        while read < count {
            let after = next;
            let mut a = Attr::new()
                .u64(0, if read == 0 { 0 } else { &after as *const u32 as u64 })
                .u64(8, &mut next as *mut u32 as u64)
                .u64(16, keys[read as usize..].as_mut_ptr() as u64)
                .u64(24, values[read as usize * cell..].as_mut_ptr() as u64)
                .u32(32, count - read)
                .u32(36, self.fd() as u32);
            // The count the kernel writes back is what it copied only when it ran the batch: a
            // kernel without batches for this map type (per-CPU arrays on Linux 5.10) leaves
            // the count asked for, which read as all of them came in.
            match bpf(cmd::MAP_LOOKUP_BATCH, &mut a) {
                Ok(_) => read += a.read_u32(32),
                // The end of the map, with what came in this call.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    read += a.read_u32(32);
                    break;
                }
                Err(e)
                    if read == 0
                        && matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOTSUP) | Some(524)) =>
                {
                    return self.lookup_cells_one_by_one(count, cell, per_cpu);
                }
                Err(e) => return Err(e),
            }
        }
        // An array map's keys come in order from 0, every one: should a kernel skip one, or
        // stop short, each cell is read alone.
        if read < count || keys.iter().enumerate().any(|(i, &k)| k != i as u32) {
            return self.lookup_cells_one_by_one(count, cell, per_cpu);
        }
        Ok(values)
    }

    fn lookup_cells_one_by_one(&self, count: u32, cell: usize, per_cpu: bool) -> io::Result<Vec<u8>> {
        let mut values = vec![0u8; cell * count as usize];
        for (i, v) in values.chunks_mut(cell).enumerate() {
            let key = (i as u32).to_ne_bytes();
            let mut a = Attr::new().u32(0, self.fd() as u32).u64(8, key.as_ptr() as u64).u64(16, v.as_mut_ptr() as u64);
            match bpf(cmd::MAP_LOOKUP_ELEM, &mut a) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) && !per_cpu => {}
                Err(e) => return Err(e),
            }
        }
        Ok(values)
    }

    /// Reads and deletes `key` in one step, so that nothing the kernel adds to the value between
    /// the two is lost (hash maps since Linux 5.14; before, a lookup and then a delete).
    pub fn take(&self, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        let mut value = vec![0u8; self.value_size as usize];
        let mut a = Attr::new().u32(0, self.fd() as u32).u64(8, key.as_ptr() as u64).u64(16, value.as_mut_ptr() as u64);
        match bpf(cmd::MAP_LOOKUP_AND_DELETE_ELEM, &mut a) {
            Ok(_) => Ok(Some(value)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOTSUP) | Some(524)) => {
                let value = self.lookup(key)?;
                self.delete(key)?;
                Ok(value)
            }
            Err(e) => Err(e),
        }
    }

    pub fn delete(&self, key: &[u8]) -> io::Result<bool> {
        let mut a = Attr::new().u32(0, self.fd() as u32).u64(8, key.as_ptr() as u64);
        match bpf(cmd::MAP_DELETE_ELEM, &mut a) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Every entry of a hash map, as `(keys, values)`: `key_size` and `value_size` bytes each,
    /// in the same order. Read in as few calls as the kernel allows: a BPF_MAP_LOOKUP_BATCH call
    /// per few thousand entries (Linux 5.6), else a call per key and one per value. An entry
    /// the kernel adds or deletes meanwhile may be in it or not.
    pub fn entries(&self) -> io::Result<(Vec<u8>, Vec<u8>)> {
        /// Entries asked for per call; more than a bucket of the hash ever holds (the kernel
        /// returns a whole bucket or none of it).
        const BATCH: u32 = 4096;
        let (ks, vs) = (self.key_size as usize, self.value_size as usize);
        let (mut keys, mut values) = (Vec::new(), Vec::new());
        // The kernel's position in the hash (a bucket index for a hash map).
        let (mut after, mut next) = (0u32, 0u32);
        let mut first = true;
        loop {
            let read = keys.len() / ks.max(1);
            keys.resize((read + BATCH as usize) * ks, 0);
            values.resize((read + BATCH as usize) * vs, 0);
            let mut a = Attr::new()
                .u64(0, if first { 0 } else { &after as *const u32 as u64 })
                .u64(8, &mut next as *mut u32 as u64)
                .u64(16, keys[read * ks..].as_mut_ptr() as u64)
                .u64(24, values[read * vs..].as_mut_ptr() as u64)
                .u32(32, BATCH)
                .u32(36, self.fd() as u32);
            let r = bpf(cmd::MAP_LOOKUP_BATCH, &mut a);
            let got = if r.is_ok() || r.as_ref().is_err_and(|e| e.raw_os_error() == Some(libc::ENOENT)) {
                a.read_u32(32) as usize
            } else {
                0
            };
            keys.truncate((read + got) * ks);
            values.truncate((read + got) * vs);
            match r {
                Ok(_) => {}
                // The end of the map, with what came in this call.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok((keys, values)),
                Err(e) if first && matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOTSUP) | Some(524)) => {
                    return self.entries_one_by_one();
                }
                Err(e) => return Err(e),
            }
            first = false;
            after = next;
        }
    }

    fn entries_one_by_one(&self) -> io::Result<(Vec<u8>, Vec<u8>)> {
        let (mut keys, mut values) = (Vec::new(), Vec::new());
        for k in self.keys()? {
            // Deleted since its key was read: not an entry any more.
            if let Some(v) = self.lookup(&k)? {
                keys.extend_from_slice(&k);
                values.extend_from_slice(&v);
            }
        }
        Ok((keys, values))
    }

    /// Every key in the map (a snapshot).
    pub fn keys(&self) -> io::Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        let mut next = vec![0u8; self.key_size as usize];
        let mut prev: Option<Vec<u8>> = None;
        loop {
            let key_ptr = prev.as_ref().map_or(0, |k| k.as_ptr() as u64);
            let mut a = Attr::new().u32(0, self.fd() as u32).u64(8, key_ptr).u64(16, next.as_mut_ptr() as u64);
            match bpf(cmd::MAP_GET_NEXT_KEY, &mut a) {
                Ok(_) => {
                    out.push(next.clone());
                    prev = Some(next.clone());
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(out),
                Err(e) => return Err(e),
            }
        }
    }
}

/// Before Linux 5.11 the kernel charged BPF maps and programs to RLIMIT_MEMLOCK, whose default
/// (64 KiB, 8 MiB on newer distributions) is far below what the fast path's maps take: there,
/// raise it as far as this process may, once. Later kernels charge the memory cgroup and ignore
/// it, and the limit is left alone (it also decides whether packet rings are locked in memory).
fn raise_memlock() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if kernel_release().is_some_and(|v| v >= (5, 11)) {
            return;
        }
        let infinite = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
        // SAFETY: plain rlimit calls on live structs.
        unsafe {
            if libc::setrlimit(libc::RLIMIT_MEMLOCK, &infinite) != 0 {
                let mut current = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                if libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut current) == 0 {
                    current.rlim_cur = current.rlim_max;
                    libc::setrlimit(libc::RLIMIT_MEMLOCK, &current);
                }
            }
        }
    });
}

/// The running kernel's (major, minor) version, from uname.
pub fn kernel_release() -> Option<(u32, u32)> {
    // SAFETY: uname fills a plain struct.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let release: String = u.release.iter().take_while(|&&c| c != 0).map(|&c| c as u8 as char).collect();
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Number of possible CPUs (the stride count of per-CPU map values).
pub fn possible_cpus() -> io::Result<usize> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    let mut n = 0;
    for part in s.trim().split(',') {
        n += match part.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap_or(0) - a.parse::<usize>().unwrap_or(0) + 1,
            None => 1,
        };
    }
    Ok(n.max(1))
}

#[derive(Debug)]
pub struct Program {
    fd: OwnedFd,
    pub name: String,
    pub prog_type: u32,
}

impl Program {
    /// Loads a program given as instructions in this machine's byte order: for one too small to
    /// need clang, an ELF object or maps (the port guard), so that a build without the objects
    /// still has it.
    pub fn from_instructions(name: &str, prog_type: u32, insns: &[u8]) -> io::Result<Program> {
        raise_memlock();
        let expected = if prog_type == prog_type::XDP { attach::XDP } else { 0 };
        let fd = load_program(name, prog_type, insns, b"GPL\0", expected, 0, None)?;
        Ok(Program { fd, name: name.to_string(), prog_type })
    }

    /// The same program through a second descriptor, for another thread to run.
    pub fn try_clone(&self) -> io::Result<Program> {
        Ok(Program { fd: self.fd.try_clone()?, name: self.name.clone(), prog_type: self.prog_type })
    }
}

/// Keeps a program attached while it lives (closing a BPF link detaches it).
#[derive(Debug)]
pub struct Link(OwnedFd);

impl Link {
    /// The kernel's id of the link (what `bpftool link` shows).
    pub fn id(&self) -> io::Result<u32> {
        Ok(rd_u32(&self.info()?, 4))
    }

    /// The interface an XDP or TCX link is attached to; 0 once it no longer is (detached by
    /// someone else, `bpftool link detach`, or its interface went away).
    pub fn ifindex(&self) -> io::Result<u32> {
        // struct bpf_link_info { u32 type, id, prog_id; union (8-aligned) { xdp/tcx: u32 ifindex } }
        Ok(rd_u32(&self.info()?, 16))
    }

    fn info(&self) -> io::Result<[u8; 64]> {
        let mut info = [0u8; 64];
        let mut a =
            Attr::new().u32(0, self.0.as_raw_fd() as u32).u32(4, info.len() as u32).u64(8, info.as_mut_ptr() as u64);
        bpf(cmd::OBJ_GET_INFO_BY_FD, &mut a)?;
        Ok(info)
    }
}

impl Program {
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The length of the program as the verifier left it (`xlated_prog_len`), in bytes.
    pub fn xlated_len(&self) -> io::Result<usize> {
        // struct bpf_prog_info { u32 type, id; u8 tag[8]; u32 jited_prog_len, xlated_prog_len; ... }
        let mut info = [0u8; 32];
        let mut a = Attr::new().u32(0, self.fd() as u32).u32(4, info.len() as u32).u64(8, info.as_mut_ptr() as u64);
        bpf(cmd::OBJ_GET_INFO_BY_FD, &mut a)?;
        Ok(rd_u32(&info, 20) as usize)
    }

    /// Attaches an XDP program to an interface (driver mode, falling back to generic).
    pub fn attach_xdp(&self, ifindex: u32) -> io::Result<Link> {
        self.attach_xdp_mode(ifindex, xdp_flags::DRV_MODE)
            .or_else(|_| self.attach_xdp_mode(ifindex, xdp_flags::SKB_MODE))
    }

    /// Attaches an XDP program through a BPF link in one mode (`xdp_flags::DRV_MODE` or
    /// `SKB_MODE`).
    pub fn attach_xdp_mode(&self, ifindex: u32, mode: u32) -> io::Result<Link> {
        let mut a = Attr::new().u32(0, self.fd() as u32).u32(4, ifindex).u32(8, attach::XDP).u32(12, mode);
        bpf_fd(cmd::LINK_CREATE, &mut a).map(Link)
    }

    /// Attaches a TC (sched_cls, direct action) program at an interface's ingress or egress (TCX).
    pub fn attach_tc(&self, ifindex: u32, egress: bool) -> io::Result<Link> {
        let at = if egress { attach::TCX_EGRESS } else { attach::TCX_INGRESS };
        let mut a = Attr::new().u32(0, self.fd() as u32).u32(4, ifindex).u32(8, at);
        bpf_fd(cmd::LINK_CREATE, &mut a).map(Link)
    }

    /// Runs the program once on `data` with the context `ctx` (an `xdp_md` or a `__sk_buff`, as the
    /// program type takes) through BPF_PROG_TEST_RUN: its return value and the frame as it left.
    pub fn run_once(&self, data: &[u8], ctx: &[u8]) -> io::Result<(u32, Vec<u8>)> {
        // Before 5.15 an XDP test run takes no context, and its frame arrives on the loopback
        // interface: a context saying as much is left out there; one naming another is refused.
        let ctx = match self.prog_type == prog_type::XDP && kernel_release().is_some_and(|v| v < (5, 15)) {
            true if ctx.len() >= 16 && rd_u32(ctx, 12) <= 1 => &[][..],
            true => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "an XDP test run on a given interface needs Linux 5.15",
                ))
            }
            false => ctx,
        };
        let run = |ctx: &[u8]| -> io::Result<(u32, Vec<u8>)> {
            let mut out = vec![0u8; data.len() + 256];
            let mut a = Attr::new()
                .u32(0, self.fd() as u32)
                .u32(8, data.len() as u32)
                .u32(12, out.len() as u32)
                .u64(16, data.as_ptr() as u64)
                .u64(24, out.as_mut_ptr() as u64)
                .u32(32, 1)
                .u32(40, ctx.len() as u32)
                .u64(48, if ctx.is_empty() { 0 } else { ctx.as_ptr() as u64 });
            bpf(cmd::PROG_TEST_RUN, &mut a)?;
            out.truncate(a.read_u32(12) as usize);
            Ok((a.read_u32(4), out))
        };
        match run(ctx) {
            // Before 5.16 `struct __sk_buff` ended 8 bytes sooner, and older kernels refuse an
            // ingress interface in it (the frame arrives on the loopback interface): one naming
            // the loopback interface is run as what those kernels take.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && self.prog_type == prog_type::SCHED_CLS => {
                if ctx.len() < 40 || rd_u32(ctx, 36) > 1 {
                    return Err(e);
                }
                let mut older = ctx[..ctx.len().min(184)].to_vec();
                older[36..40].fill(0);
                run(&older)
            }
            r => r,
        }
    }

    /// BPF_PROG_TEST_RUN. With `live` (XDP), frames the program returns as XDP_TX are really sent
    /// out of `ifindex`. Returns the last return value and the kernel's average duration (ns).
    pub fn test_run(&self, data: &[u8], repeat: u32, ifindex: u32, live: bool) -> io::Result<(u32, u32)> {
        let ctx = xdp_md(data.len() as u32, ifindex);
        self.test_run_in(data, repeat, &ctx, if live { BPF_F_TEST_XDP_LIVE_FRAMES } else { 0 })
    }

    /// BPF_PROG_TEST_RUN of a TC program, `repeat` times on `data` arriving as `ctx` (an
    /// [`sk_buff`]) says: the last return value and the kernel's average duration (ns).
    pub fn test_run_skb(&self, data: &[u8], repeat: u32, ctx: &[u8]) -> io::Result<(u32, u32)> {
        self.test_run_in(data, repeat, ctx, 0)
    }

    fn test_run_in(&self, data: &[u8], repeat: u32, ctx: &[u8], flags: u32) -> io::Result<(u32, u32)> {
        let mut a = Attr::new()
            .u32(0, self.fd() as u32)
            .u32(8, data.len() as u32)
            .u64(16, data.as_ptr() as u64)
            .u32(32, repeat)
            .u32(40, ctx.len() as u32)
            .u64(48, ctx.as_ptr() as u64)
            .u32(64, flags);
        bpf(cmd::PROG_TEST_RUN, &mut a)?;
        Ok((a.read_u32(4), a.read_u32(36)))
    }
}

/// The context a test run of an XDP program takes: a frame of `len` bytes arriving on `ifindex`
/// (struct xdp_md { data, data_end, data_meta, ingress_ifindex, rx_queue_index, egress_ifindex }).
pub fn xdp_md(len: u32, ifindex: u32) -> [u8; 24] {
    let mut ctx = [0u8; 24];
    ctx[4..8].copy_from_slice(&len.to_ne_bytes());
    ctx[12..16].copy_from_slice(&ifindex.to_ne_bytes());
    ctx
}

/// The context a test run of a TC program takes: a frame arriving on `ifindex`, a GSO super-frame
/// of `gso_size`-byte segments if not 0 (struct __sk_buff: ingress_ifindex at 36, gso_size at
/// 176; the kernel takes a context of this size).
pub fn sk_buff(ifindex: u32, gso_size: u32) -> [u8; 192] {
    let mut ctx = [0u8; 192];
    ctx[36..40].copy_from_slice(&ifindex.to_ne_bytes());
    ctx[176..180].copy_from_slice(&gso_size.to_ne_bytes());
    ctx
}

/// A loaded object: its maps and programs by name.
#[derive(Debug, Default)]
pub struct Object {
    pub maps: HashMap<String, Map>,
    pub programs: HashMap<String, Program>,
    /// Relocated instructions by program, for loading device-bound copies.
    code: HashMap<String, (u32, Vec<u8>)>,
    /// Programs loaded to take multi-buffer frames (from `xdp.frags` sections).
    frags: Vec<String>,
    license: Vec<u8>,
    /// Kfuncs the running kernel does not have (their calls return -EOPNOTSUPP).
    pub missing_kfuncs: Vec<String>,
    /// Programs the caller could do without that the kernel refused, with the verifier's reason.
    pub refused: Vec<(String, String)>,
    /// Maps found pinned by an earlier load ([`Object::load_pinned`]) and used as they were.
    pub reused: Vec<String>,
}

/// The BTF the kernel exports is in its own byte order.
fn rd_u16(b: &[u8], at: usize) -> u16 {
    ByteOrder::NATIVE.u16(b, at)
}
fn rd_u32(b: &[u8], at: usize) -> u32 {
    ByteOrder::NATIVE.u32(b, at)
}

fn bad(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

fn cstr(b: &[u8], at: usize) -> String {
    let end = b[at..].iter().position(|&c| c == 0).map_or(b.len(), |p| at + p);
    String::from_utf8_lossy(&b[at..end]).into_owned()
}

impl Object {
    /// Parses `elf`, creates its maps and loads its programs. A verifier rejection comes back with
    /// the verifier's log in the error.
    pub fn load(elf: &[u8]) -> io::Result<Object> {
        Self::load_sized(elf, &[])
    }

    /// As [`Object::load`], with the maps named in `sizes` created with that many entries instead
    /// of the number the object was built with (a capacity is a deployment's choice).
    pub fn load_sized(elf: &[u8], sizes: &[(&str, u32)]) -> io::Result<Object> {
        Self::load_with(elf, sizes, &[])
    }

    /// As [`Object::load_sized`], where a program named in `optional` that the kernel refuses is
    /// left out (and listed in `refused`) instead of failing the load: an older kernel may verify
    /// the programs a deployment uses and not the others.
    pub fn load_with(elf: &[u8], sizes: &[(&str, u32)], optional: &[&str]) -> io::Result<Object> {
        Self::load_inner(elf, sizes, optional, None)
    }

    /// As [`Object::load_with`], with every map pinned in `dir` (a BPF filesystem directory) by
    /// its name, so that the maps outlive the process: a map already pinned there with the same
    /// type and sizes is used as it is, with what it holds (listed in `reused`); one of another
    /// shape is replaced. The programs are always loaded anew.
    pub fn load_pinned(elf: &[u8], sizes: &[(&str, u32)], optional: &[&str], dir: &Path) -> io::Result<Object> {
        std::fs::create_dir_all(dir).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        Self::load_inner(elf, sizes, optional, Some(dir))
    }

    fn load_inner(elf: &[u8], sizes: &[(&str, u32)], optional: &[&str], pins: Option<&Path>) -> io::Result<Object> {
        let parsed = Parsed::read(elf)?;
        if parsed.order != ByteOrder::NATIVE {
            return Err(bad(format!(
                "the eBPF object is {:?}-endian and this machine is {:?}-endian: build edgeflow for this \
                 target (its build script builds the objects in the target's byte order)",
                parsed.order,
                ByteOrder::NATIVE
            )));
        }
        raise_memlock();
        let order = parsed.order;
        let mut obj = Object::default();
        for def in &parsed.maps {
            let max_entries = sizes.iter().find(|(n, _)| *n == def.name).map_or(def.max_entries, |&(_, n)| n);
            let flags = creation_flags(def.typ, def.flags);
            let create = || Map::create(&def.name, def.typ, def.key_size, def.value_size, max_entries, flags);
            let map = match pins.map(|dir| dir.join(&def.name)) {
                None => create()?,
                Some(path) => match Map::from_pinned(&path) {
                    Ok((m, typ))
                        if (typ, m.key_size, m.value_size, m.max_entries)
                            == (def.typ, def.key_size, def.value_size, max_entries) =>
                    {
                        obj.reused.push(def.name.clone());
                        m
                    }
                    found => {
                        if found.is_ok() {
                            std::fs::remove_file(&path)?;
                        }
                        let m = create()?;
                        m.pin(&path)?;
                        m
                    }
                },
            };
            obj.maps.insert(def.name.clone(), map);
        }
        let mut kfunc_ids: HashMap<String, Option<u32>> = HashMap::new();
        for section in &parsed.programs {
            let mut insns = section.code.to_vec();
            let mut kfunc_calls = Vec::new();
            for (offset, target) in &section.relocations {
                let insn = &mut insns[*offset..offset + 8];
                match target {
                    Relocation::Kfunc(name) => {
                        // A call to an undefined symbol: a kernel function, by its BTF id.
                        match *kfunc_ids.entry(name.clone()).or_insert_with(|| vmlinux_func_id(name)) {
                            Some(id) => {
                                insn[1] = order.regs(order.dst_reg(insn[1]), BPF_PSEUDO_KFUNC_CALL);
                                order.put_u16(&mut insn[2..4], 0);
                                order.put_u32(&mut insn[4..8], id);
                                kfunc_calls.push(*offset);
                            }
                            None => {
                                stub_call(insn);
                                if !obj.missing_kfuncs.contains(name) {
                                    obj.missing_kfuncs.push(name.clone());
                                }
                            }
                        }
                    }
                    Relocation::Map(name) => {
                        let map = obj.maps.get(name).ok_or_else(|| bad(format!("unknown map {name}")))?;
                        insn[1] = order.regs(order.dst_reg(insn[1]), BPF_PSEUDO_MAP_FD);
                        order.put_u32(&mut insn[4..8], map.fd() as u32);
                    }
                }
            }
            let expected = if section.prog_type == prog_type::XDP { attach::XDP } else { 0 };
            for (fname, start, size) in &section.functions {
                let code =
                    insns.get(*start..start + size).ok_or_else(|| bad(format!("{fname}: out of its section")))?;
                // The kernel takes XDP metadata kfuncs only from device-bound programs: the copy
                // shared by all devices calls none, as if the kernel had none.
                let mut shared = code.to_vec();
                for at in kfunc_calls.iter().filter(|&&at| at >= *start && at < start + size) {
                    stub_call(&mut shared[at - start..at - start + 8]);
                }
                let flags = if section.frags { BPF_F_XDP_HAS_FRAGS } else { 0 };
                let fd = match load_program(fname, section.prog_type, &shared, &parsed.license, expected, flags, None) {
                    Ok(fd) => fd,
                    Err(e) if optional.contains(&fname.as_str()) => {
                        // The verifier's reason: the line before its closing statistics.
                        let text = e.to_string();
                        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
                        let end = lines.iter().rposition(|l| l.starts_with("processed ")).unwrap_or(lines.len());
                        let why = lines[..end].last().unwrap_or(&"").to_string();
                        obj.refused.push((fname.clone(), why));
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let ptype = section.prog_type;
                obj.programs.insert(fname.clone(), Program { fd, name: fname.clone(), prog_type: ptype });
                obj.code.insert(fname.clone(), (ptype, code.to_vec()));
                if section.frags {
                    obj.frags.push(fname.clone());
                }
            }
        }
        obj.license = parsed.license;
        Ok(obj)
    }

    /// Loads another copy of an XDP program bound to one device, so that its calls to XDP
    /// metadata kfuncs reach that device's driver (an unbound copy gets -EOPNOTSUPP from them).
    ///
    /// Linux (6.18 at least) records a bound program's address when loading starts and does not
    /// follow the program when the verifier's rewrites outgrow its first allocation and move it;
    /// unregistering the device while that copy is loaded then reads freed memory and the kernel
    /// oopses holding RTNL (every later `ip link` hangs). So the copy is loaded with room to grow
    /// (`with_headroom`), and a copy that may still have moved is refused: the caller falls back
    /// to the shared copy.
    pub fn load_dev_bound(&self, name: &str, ifindex: u32) -> io::Result<Program> {
        let (ptype, code) = self.code.get(name).ok_or_else(|| bad(format!("no program named {name}")))?;
        if *ptype != prog_type::XDP {
            return Err(bad(format!("{name}: only XDP programs bind to a device")));
        }
        let roomy = with_headroom(code, BOUND_HEADROOM_INSNS);
        let fd = load_program(name, *ptype, &roomy, &self.license, attach::XDP, self.frags_flag(name), Some(ifindex))?;
        let prog = Program { fd, name: name.to_string(), prog_type: *ptype };
        let grown = prog.xlated_len()?;
        if may_have_moved(roomy.len(), grown) {
            return Err(bad(format!(
                "{name}: the verifier grew the bound copy to {grown} bytes, past the {} it was loaded with: \
                 it may have moved, which this kernel does not follow (refused)",
                roomy.len()
            )));
        }
        Ok(prog)
    }

    /// What the verifier makes of an XDP program's bound copy, loaded unbound: its calls to kfuncs
    /// become a read of `ingress_ifindex`, a value the verifier cannot predict as it predicts the
    /// shared copy's `-EOPNOTSUPP` (whose dead branches it removes). For checking headroom.
    pub fn bound_len_estimate(&self, name: &str) -> io::Result<usize> {
        let (ptype, code) = self.code.get(name).ok_or_else(|| bad(format!("no program named {name}")))?;
        let mut code = code.clone();
        for insn in kfunc_calls(&mut code) {
            // r0 = *(u32 *)(r1 + 12): xdp_md.ingress_ifindex (r1 is still the context at each call
            // site only if the program keeps it there; the verifier says so if not).
            insn.copy_from_slice(&[0x61, ByteOrder::NATIVE.regs(0, 1), 0, 0, 0, 0, 0, 0]);
            ByteOrder::NATIVE.put_u16(&mut insn[2..4], 12);
        }
        let fd = load_program(name, *ptype, &code, &self.license, attach::XDP, self.frags_flag(name), None)?;
        Program { fd, name: name.to_string(), prog_type: *ptype }.xlated_len()
    }

    fn frags_flag(&self, name: &str) -> u32 {
        if self.frags.iter().any(|f| f == name) {
            BPF_F_XDP_HAS_FRAGS
        } else {
            0
        }
    }

    pub fn map(&self, name: &str) -> io::Result<&Map> {
        self.maps.get(name).ok_or_else(|| bad(format!("no map named {name}")))
    }

    pub fn program(&self, name: &str) -> io::Result<&Program> {
        self.programs.get(name).ok_or_else(|| bad(format!("no program named {name}")))
    }
}

fn load_program(
    name: &str,
    ptype: u32,
    insns: &[u8],
    license: &[u8],
    expected_attach: u32,
    prog_flags: u32,
    dev_bound: Option<u32>,
) -> io::Result<OwnedFd> {
    let attempt = |log: &mut Vec<u8>, level: u32| {
        let (flags, ifindex) = dev_bound.map_or((0, 0), |i| (BPF_F_XDP_DEV_BOUND_ONLY, i));
        let mut a = Attr::new()
            .u32(44, flags | prog_flags | ALIGNMENT_FLAGS)
            .u32(64, ifindex)
            .u32(0, ptype)
            .u32(4, (insns.len() / 8) as u32)
            .u64(8, insns.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .u32(24, level)
            .u32(28, log.len() as u32)
            .u64(32, if log.is_empty() { 0 } else { log.as_mut_ptr() as u64 })
            .name(48, name)
            .u32(68, expected_attach);
        bpf_fd(cmd::PROG_LOAD, &mut a)
    };
    if std::env::var_os("EDGEFLOW_BPF_STATS").is_some() {
        // The verifier's statistics (BPF_LOG_STATS), to see how close a program is to its budget.
        let mut log = vec![0u8; 4096];
        let r = attempt(&mut log, 4);
        eprintln!("bpf: {name}: {}", cstr(&log, 0).trim());
        return r;
    }
    match attempt(&mut Vec::new(), 0) {
        Ok(fd) => Ok(fd),
        Err(first) => {
            // Load again with the verifier log on, to say why.
            let mut log = vec![0u8; 1 << 20];
            let _ = attempt(&mut log, 1);
            let text = cstr(&log, 0);
            let tail: String =
                text.lines().rev().take(25).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
            Err(io::Error::new(first.kind(), format!("program {name}: {first}\n{tail}")))
        }
    }
}

/// Instructions of room a bound copy is loaded with: 4 KiB, four times what the verifier adds to
/// `ef_xdp` (976 bytes).
const BOUND_HEADROOM_INSNS: usize = 512;

/// `code` behind `r0 = 0; if r0 != 0 goto pad`, with `pad` (`insns` instructions ending in `exit`)
/// after it. The kernel sizes a program's allocation by the instructions it is given; the verifier
/// sees the branch is never taken and removes it and the pad before its rewrites grow the program,
/// so the program it runs is `code`'s behind one `r0 = 0`, with room to grow in place. (A branch on
/// the context pointer being NULL would leave nothing behind, but the verifier keeps that one.)
fn with_headroom(code: &[u8], insns: usize) -> Vec<u8> {
    let body = (code.len() / 8) as i16;
    let mut out = Vec::with_capacity(code.len() + (insns + 2) * 8);
    out.extend_from_slice(&[0xb7, 0, 0, 0, 0, 0, 0, 0]); // r0 = 0
    out.extend_from_slice(&[0x55, 0, 0, 0, 0, 0, 0, 0]); // if r0 != 0 goto +body
    out[10..12].copy_from_slice(&body.to_ne_bytes());
    out.extend_from_slice(code);
    for _ in 1..insns.max(1) {
        out.extend_from_slice(&[0xb7, 0, 0, 0, 0, 0, 0, 0]);
    }
    out.extend_from_slice(&[0x95, 0, 0, 0, 0, 0, 0, 0]); // exit
    out
}

/// Whether a program loaded as `loaded` bytes of instructions may have been moved by the verifier,
/// which left it `grown` bytes long: the kernel allocates whole pages for the instructions and a
/// header in front (96 bytes on 6.18, taken as 64 to 128 for other builds), and reallocates when
/// the rewritten program no longer fits them.
pub fn may_have_moved(loaded: usize, grown: usize) -> bool {
    const PAGE: usize = 4096;
    (64..=128).step_by(8).any(|header| (header + grown).div_ceil(PAGE) > (header + loaded).div_ceil(PAGE))
}

/// The kfunc call instructions of a relocated program.
fn kfunc_calls(code: &mut [u8]) -> impl Iterator<Item = &mut [u8]> {
    code.chunks_exact_mut(8).filter(|i| i[0] == 0x85 && ByteOrder::NATIVE.src_reg(i[1]) == BPF_PSEUDO_KFUNC_CALL)
}

/// Turns a call instruction into `r0 = -EOPNOTSUPP`: what a kfunc the kernel lacks returns.
fn stub_call(insn: &mut [u8]) {
    insn.copy_from_slice(&[0xb7, 0, 0, 0, 0, 0, 0, 0]);
    insn[4..8].copy_from_slice(&(-EOPNOTSUPP).to_ne_bytes());
}

/// The BTF type id of the kernel function `name` in the running kernel (vmlinux BTF).
fn vmlinux_func_id(name: &str) -> Option<u32> {
    let btf = std::fs::read("/sys/kernel/btf/vmlinux").ok()?;
    btf_func_id(&btf, name)
}

/// Walks a BTF blob's type section for a FUNC named `name`; type ids count from 1.
fn btf_func_id(btf: &[u8], name: &str) -> Option<u32> {
    const FUNC: u32 = 12;
    if btf.len() < 24 || rd_u16(btf, 0) != 0xeb9f {
        return None;
    }
    let hdr_len = rd_u32(btf, 4) as usize;
    let (type_off, type_len) = (rd_u32(btf, 8) as usize, rd_u32(btf, 12) as usize);
    let (str_off, str_len) = (rd_u32(btf, 16) as usize, rd_u32(btf, 20) as usize);
    let types = btf.get(hdr_len + type_off..hdr_len + type_off + type_len)?;
    let strings = btf.get(hdr_len + str_off..hdr_len + str_off + str_len)?;
    let (mut at, mut id) = (0usize, 1u32);
    while at + 12 <= types.len() {
        let name_off = rd_u32(types, at) as usize;
        let info = rd_u32(types, at + 4);
        let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
        if kind == FUNC && name_off < strings.len() && cstr(strings, name_off) == name {
            return Some(id);
        }
        // Each kind's trailing data after the 12-byte common header.
        at += 12
            + match kind {
                1 | 14 | 17 => 4,             // INT, VAR, DECL_TAG
                3 => 12,                      // ARRAY
                4 | 5 | 15 | 19 => vlen * 12, // STRUCT, UNION, DATASEC, ENUM64
                6 | 13 => vlen * 8,           // ENUM, FUNC_PROTO
                _ => 0,
            };
        id += 1;
    }
    None
}

/// Whether a test that loads BPF programs into the kernel may run: as root it does. Without root it
/// fails saying why, unless `EDGEFLOW_SKIP_INTEGRATION=1` asked to skip what needs root: then it
/// says on standard error that it skipped, and the caller returns.
#[doc(hidden)]
pub fn test_may_load_programs(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var("EDGEFLOW_SKIP_INTEGRATION").as_deref() == Ok("1") {
        eprintln!("{test}: skipped (EDGEFLOW_SKIP_INTEGRATION=1): it loads BPF programs, which needs root");
        return false;
    }
    panic!(
        "{test} loads BPF programs into the kernel: run `make test` as root, or set \
         EDGEFLOW_SKIP_INTEGRATION=1 to skip the tests that need root"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arrays_cells_read_in_batches_are_what_each_lookup_reads() {
        if !test_may_load_programs("an_arrays_cells_read_in_batches_are_what_each_lookup_reads") {
            return;
        }
        const ARRAY: u32 = 2;
        const PERCPU_ARRAY: u32 = 6;
        let cpus = possible_cpus().unwrap();
        for (typ, per_cpu) in [(ARRAY, false), (PERCPU_ARRAY, true)] {
            let m = Map::create("ef_test_cells", typ, 4, 12, 300, 0).unwrap();
            // 12-byte values: a per-CPU map pads each CPU's to 16.
            let stride = if per_cpu { 16 } else { 12 };
            for k in (0u32..300).step_by(7) {
                let mut v = vec![0u8; stride * if per_cpu { cpus } else { 1 }];
                for (c, cpu) in v.chunks_mut(stride).enumerate() {
                    cpu[..4].copy_from_slice(&(k * 1000 + c as u32).to_ne_bytes());
                    cpu[8..12].copy_from_slice(&(!k).to_ne_bytes());
                }
                let v = if per_cpu { v } else { v[..12].to_vec() };
                m.update(&k.to_ne_bytes(), &v).unwrap();
            }
            for count in [0, 1, 250, 300, 400] {
                let cells = m.lookup_cells(count, per_cpu).unwrap();
                let n = count.min(300) as usize;
                let mut one_by_one = Vec::new();
                for k in 0..n as u32 {
                    match per_cpu {
                        true => m.lookup_percpu(&k.to_ne_bytes()).unwrap().iter().for_each(|v| {
                            one_by_one.extend_from_slice(v);
                            one_by_one.extend_from_slice(&[0; 4]);
                        }),
                        false => one_by_one.extend(m.lookup(&k.to_ne_bytes()).unwrap().unwrap()),
                    }
                }
                assert_eq!(cells, one_by_one, "type {typ}, {count} cells");
            }
            assert_eq!(
                m.lookup_cells_one_by_one(300, stride * if per_cpu { cpus } else { 1 }, per_cpu).unwrap(),
                m.lookup_cells(300, per_cpu).unwrap()
            );
        }
    }

    #[test]
    fn a_hash_maps_entries_come_in_batches_as_they_come_one_by_one() {
        if !test_may_load_programs("a_hash_maps_entries_come_in_batches_as_they_come_one_by_one") {
            return;
        }
        const HASH: u32 = 1;
        // More entries than one batch asks for, in a map without preallocation (the fast path's).
        let m = Map::create("ef_test_hash", HASH, 8, 24, 20_000, 1).unwrap();
        for n in [0u64, 1, 9_000] {
            for k in 0..n {
                let v: Vec<u8> = [k, !k, k * 3].iter().flat_map(|x| x.to_ne_bytes()).collect();
                m.update(&k.to_ne_bytes(), &v).unwrap();
            }
            let sorted = |(keys, values): (Vec<u8>, Vec<u8>)| {
                let mut pairs: Vec<(Vec<u8>, Vec<u8>)> =
                    keys.chunks(8).map(<[u8]>::to_vec).zip(values.chunks(24).map(<[u8]>::to_vec)).collect();
                pairs.sort();
                pairs
            };
            let batched = sorted(m.entries().unwrap());
            assert_eq!(batched.len(), n as usize);
            assert_eq!(batched, sorted(m.entries_one_by_one().unwrap()));
        }
    }

    #[test]
    fn a_section_is_read_by_name_in_either_byte_order() {
        for elf in [objects::FASTPATH, objects::FASTPATH_OTHER_ORDER] {
            assert_eq!(section(elf, "license").unwrap().as_deref(), Some(&b"GPL\0"[..]));
            assert_eq!(section(elf, "edgeflow_p4").unwrap(), None);
        }
        assert_eq!(section(b"#!/bin/sh", "license").unwrap_err().to_string(), "not an ELF64 object");
    }

    #[test]
    fn an_object_reads_the_same_in_either_byte_order() {
        let native = Parsed::read(objects::FASTPATH).unwrap();
        let other = Parsed::read(objects::FASTPATH_OTHER_ORDER).unwrap();
        assert_eq!(native.order, ByteOrder::NATIVE);
        assert_ne!(other.order, native.order);
        assert_eq!(native.maps, other.maps);
        assert!(native.maps.len() > 5 && native.programs.len() > 1);
        assert!(native.programs.iter().any(|p| p.relocations.iter().any(|r| matches!(r.1, Relocation::Kfunc(_)))));
        assert_eq!(native.license, other.license);
        // clang emits other instructions for another byte order (a byte swap is a no-op on one),
        // so what must agree is the programs, the maps they use, and how each relocated
        // instruction reads: a 64-bit map load into a register, or a call.
        let shape = |p: &Parsed| -> Vec<(u32, Vec<String>, Vec<String>)> {
            p.programs
                .iter()
                .map(|s| {
                    let mut targets: Vec<String> = s.relocations.iter().map(|r| format!("{:?}", r.1)).collect();
                    targets.sort();
                    (s.prog_type, s.functions.iter().map(|f| f.0.clone()).collect(), targets)
                })
                .collect()
        };
        assert_eq!(shape(&native), shape(&other));
        for p in [&native, &other] {
            for prog in &p.programs {
                for (at, _) in &prog.relocations {
                    let (dst, src) = (p.order.dst_reg(prog.code[at + 1]), p.order.src_reg(prog.code[at + 1]));
                    if prog.code[*at] == 0x85 {
                        // clang marks a call to an extern as a BPF-to-BPF call (src 1) to -1.
                        assert_eq!((dst, src), (0, 1), "{:?} at {at}", p.order);
                        assert_eq!(p.order.u32(prog.code, at + 4), u32::MAX);
                    } else {
                        assert!(src == 0 && dst <= 10, "{:?} at {at}", p.order);
                    }
                }
            }
        }
        // The kernel takes only its own order, and a load says so rather than failing in the verifier.
        let err = Object::load(objects::FASTPATH_OTHER_ORDER).unwrap_err().to_string();
        assert!(err.contains("build edgeflow for this target"), "{err}");
    }

    #[test]
    fn btf_walk_finds_a_function_after_types_with_trailing_data() {
        // Header, then: INT "int" (4 bytes extra), FUNC_PROTO with one param (8), FUNC "f".
        let strings = b"\0int\0f\0";
        let mut types = Vec::new();
        for w in [1u32, 1 << 24, 4, 32] {
            types.extend_from_slice(&w.to_ne_bytes());
        }
        for w in [0u32, (13 << 24) | 1, 1, 0, 1] {
            types.extend_from_slice(&w.to_ne_bytes());
        }
        for w in [5u32, 12 << 24, 2] {
            types.extend_from_slice(&w.to_ne_bytes());
        }
        let mut btf = Vec::new();
        btf.extend_from_slice(&0xeb9fu16.to_ne_bytes());
        btf.extend_from_slice(&[1, 0]);
        for w in [24u32, 0, types.len() as u32, types.len() as u32, strings.len() as u32] {
            btf.extend_from_slice(&w.to_ne_bytes());
        }
        btf.extend_from_slice(&types);
        btf.extend_from_slice(strings);
        assert_eq!(btf_func_id(&btf, "f"), Some(3));
        assert_eq!(btf_func_id(&btf, "g"), None);
        assert_eq!(btf_func_id(&btf[..10], "f"), None);
    }

    #[test]
    fn a_program_may_have_moved_only_when_it_outgrew_its_pages() {
        assert!(!may_have_moved(18_480, 19_456));
        assert!(may_have_moved(3_480, 4_200));
        // 8 bytes short of a page with a 96-byte header, over it with 128.
        assert!(may_have_moved(3_480, 3_992));
        assert!(!may_have_moved(3_480 + 4096, 3_992));
    }

    #[test]
    fn the_xdp_programs_bound_to_a_device_keep_their_first_allocation() {
        // The bound copies `load_dev_bound` makes must grow in place (see there): each XDP program
        // of the fast path, as the verifier leaves a bound copy, within what it is loaded with.
        if !test_may_load_programs("the_xdp_programs_bound_to_a_device_keep_their_first_allocation") {
            return;
        }
        let obj = Object::load(objects::FASTPATH).expect("fast path loads");
        let xdp: Vec<_> = obj.code.iter().filter(|(_, (t, _))| *t == prog_type::XDP).collect();
        assert!(!xdp.is_empty());
        for (name, (_, code)) in xdp {
            let grown = obj.bound_len_estimate(name).expect("estimate loads");
            let loaded = with_headroom(code, BOUND_HEADROOM_INSNS).len();
            println!("{name}: {} bytes in the object, {grown} bound, loaded as {loaded}", code.len());
            assert!(!may_have_moved(loaded, grown), "{name}: {} bytes in the object, {grown} bound", code.len());
        }
    }

    #[test]
    fn the_headroom_is_gone_from_the_program_the_verifier_leaves() {
        if !test_may_load_programs("the_headroom_is_gone_from_the_program_the_verifier_leaves") {
            return;
        }
        let obj = Object::load(objects::FASTPATH).expect("fast path loads");
        let (name, (ptype, code)) = obj.code.iter().find(|(_, (t, _))| *t == prog_type::XDP).unwrap();
        let plain = obj.program(name).unwrap().xlated_len().unwrap();
        let mut shared = code.clone();
        kfunc_calls(&mut shared).for_each(stub_call);
        let roomy = with_headroom(&shared, BOUND_HEADROOM_INSNS);
        let fd = load_program(name, *ptype, &roomy, &obj.license, attach::XDP, 0, None).expect("padded copy loads");
        let padded = Program { fd, name: name.clone(), prog_type: *ptype }.xlated_len().unwrap();
        assert_eq!(padded, plain + 8, "{name}: the verifier removes the pad and the branch to it");
    }

    #[test]
    fn running_kernel_has_the_xdp_vlan_kfunc_if_it_is_6_8_or_newer() {
        // Without vmlinux BTF no kfunc resolves and XDP misses VLAN tags in receive metadata: a
        // machine like that must say so, or this test would pass having checked nothing.
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            assert_eq!(
                std::env::var("EDGEFLOW_NO_BTF").as_deref(),
                Ok("1"),
                "no /sys/kernel/btf/vmlinux: kfuncs cannot be resolved; set EDGEFLOW_NO_BTF=1 on a kernel built without BTF"
            );
            return;
        }
        // Present since Linux 6.8; the machine this is developed on runs 6.18.
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut v = release.trim().split(|c: char| !c.is_ascii_digit()).filter_map(|x| x.parse::<u32>().ok());
        let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
        let found = vmlinux_func_id("bpf_xdp_metadata_rx_vlan_tag");
        assert_eq!(found.is_some(), (major, minor) >= (6, 8), "kernel {release}");
    }
}
