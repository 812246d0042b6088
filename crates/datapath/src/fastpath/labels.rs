//! The kernel's label switching (`bpf/fp_less.h`, docs/less.md §5) as userspace keeps it: which
//! LESS port is which interface and whether it can send, and the stacks a label-switching mode
//! planned for the kernel to repeat. Only what changed since the last write is written when the
//! mode's tables move (a port going down: its entry, and the plans the mode dropped with it).
//!
//! A port that loses its carrier is marked down in the kernel by a thread of its own that waits
//! for nothing else (`CarrierGuard`), before the forwarding thread has heard: the detours are
//! planned ahead, so that one write is all the kernel needs to take the next frame around.

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use forwarding::{KernelLabels, KernelStack};
use packet::less::block_hash;

use super::{obj_err, FastPath, CFG_LESS_MAX_LABELS, CNT_LESS_SHIFTED, CNT_LESS_SPENT};

/// `LESS_STACK_MAX`, `LESS_MAX_PORTS` in `bpf/fastpath.h`.
pub const LESS_STACK_MAX: usize = 64;
pub const LESS_MAX_PORTS: u32 = 256;
/// `struct less_port`: ifindex, live, edge, member, whole.
pub const LESS_PORT_BYTES: usize = 8;
/// `struct less_stack`: port, ethertype, length, where the reroute block's budget is, the block's
/// hash, the bytes.
pub const LESS_STACK_AT: usize = 24;
pub const LESS_STACK_BYTES: usize = LESS_STACK_AT + LESS_STACK_MAX;
/// `struct less_reroute_key`: port, the port a backtracking frame came in on, hash.
pub const LESS_REROUTE_KEY_BYTES: usize = 16;
/// `struct less_push_key`: an IPv6 address, IPv4 ones mapped into it.
pub const LESS_PUSH_KEY_BYTES: usize = 16;

fn push_key(ip: IpAddr) -> [u8; LESS_PUSH_KEY_BYTES] {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// One switch port as the kernel's label switching sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LabelPort {
    pub no: u32,
    /// 0: the kernel leaves frames for this port to userspace (its egress is scheduled, say).
    pub ifindex: u32,
    pub live: bool,
    /// Passes a GSO super-frame on uncut (a veth): the kernel may send one out under labels.
    pub whole: bool,
}

fn stack_value(s: &KernelStack) -> Option<[u8; LESS_STACK_BYTES]> {
    if s.stack.len() > LESS_STACK_MAX {
        return None;
    }
    let mut v = [0u8; LESS_STACK_BYTES];
    v[0..4].copy_from_slice(&s.port.to_ne_bytes());
    v[4..6].copy_from_slice(&s.ethertype.to_ne_bytes());
    v[6..8].copy_from_slice(&(s.stack.len() as u16).to_ne_bytes());
    // The reroute block starts at the first entry with TTL 0; its first byte is the budget, which
    // the kernel sets from each frame's own (fp_less.h, less_reroute).
    let block = s.stack.chunks_exact(4).position(|e| e[3] & 0x7f == 0).map(|i| 4 * i);
    v[8] = block.map_or(0, |at| at as u8 + 1);
    // A host's frame whose first hop is down looks its detour up by this, as a labelled frame
    // with the same block would (fp_less.h, less_push).
    let hash = block.map_or(0, |at| block_hash(&s.stack[at..]));
    v[16..24].copy_from_slice(&hash.to_ne_bytes());
    v[LESS_STACK_AT..LESS_STACK_AT + s.stack.len()].copy_from_slice(&s.stack);
    Some(v)
}

/// The label maps' contents as last written.
#[derive(Default)]
pub(super) struct Written {
    push: HashMap<[u8; LESS_PUSH_KEY_BYTES], [u8; LESS_STACK_BYTES]>,
    reroute: HashMap<[u8; LESS_REROUTE_KEY_BYTES], [u8; LESS_STACK_BYTES]>,
    max_labels: Option<usize>,
    /// The port entries, which the guard writes too.
    ports: Arc<Mutex<PortEntries>>,
    guard: Option<CarrierGuard>,
}

/// `ef_less_ports` as last written, by whichever thread wrote it.
#[derive(Default)]
struct PortEntries {
    written: HashMap<[u8; 4], [u8; LESS_PORT_BYTES]>,
    /// Interfaces whose carrier (or administrative state) the guard saw go and not come back:
    /// never written live, whatever the forwarding thread last knew.
    lost: HashSet<u32>,
    /// Ports the guard marked down before the forwarding thread did.
    marked: u64,
}

impl PortEntries {
    /// The port entry written for interface `ifindex`, if a port has it.
    fn find(&mut self, ifindex: u32) -> Option<([u8; 4], &mut [u8; LESS_PORT_BYTES])> {
        let ifindex = ifindex.to_ne_bytes();
        self.written.iter_mut().find(|(_, v)| v[0..4] == ifindex).map(|(k, v)| (*k, v))
    }
}

/// A thread that waits for link notifications only and, at the first sign that an interface
/// lost its carrier, writes its port down in the kernel. Marking live stays the forwarding
/// thread's: a port coming back is the mode's to judge (a neighbour held, a silent one).
struct CarrierGuard {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Above the forwarding thread's fifo timing (50): a failure is news before any frame.
const GUARD_PRIORITY: i32 = 60;
/// How often the guard looks whether it should stop.
const GUARD_POLL_MS: i32 = 200;

impl CarrierGuard {
    fn start(map: crate::ebpf::Map, ports: Arc<Mutex<PortEntries>>) -> io::Result<CarrierGuard> {
        let mut links = netio::netlink::LinkMonitor::open()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new().name("carrier-guard".into()).spawn(move || {
            // SAFETY: sched_param is plain data; 0 is this thread.
            let fifo = unsafe {
                let mut param: libc::sched_param = std::mem::zeroed();
                param.sched_priority = GUARD_PRIORITY;
                libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0
            };
            if !fifo {
                tracing::debug!("carrier guard at SCHED_OTHER: {}", io::Error::last_os_error());
            }
            let mut ready = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                if netio::sys::poll_readable(&[links.fd()], GUARD_POLL_MS, &mut ready).is_err() {
                    continue;
                }
                for ev in links.drain() {
                    let up = libc::IFF_UP as u32 | libc::IFF_LOWER_UP as u32;
                    let mut p = ports.lock().unwrap_or_else(|e| e.into_inner());
                    if !ev.deleted && ev.flags & up == up {
                        p.lost.remove(&ev.ifindex);
                        continue;
                    }
                    let Some((key, value)) = p.find(ev.ifindex) else { continue };
                    let was_live = std::mem::replace(&mut value[4], 0) == 1;
                    let value = *value;
                    p.lost.insert(ev.ifindex);
                    if !was_live {
                        continue;
                    }
                    match map.update(&key, &value) {
                        Ok(()) => p.marked += 1,
                        Err(e) => tracing::warn!(ifindex = ev.ifindex, "carrier guard: port not marked down: {e}"),
                    }
                }
            }
        })?;
        Ok(CarrierGuard { stop, thread: Some(thread) })
    }
}

impl Drop for CarrierGuard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Brings `map` from `old` to `new`: additions and changes first, removals last, so that a
/// lookup during the change finds the old entry or the new one, never a gap.
fn write_diff<K: AsRef<[u8]> + Eq + std::hash::Hash + Copy, V: AsRef<[u8]> + PartialEq>(
    map: &crate::ebpf::Map,
    old: &mut HashMap<K, V>,
    new: HashMap<K, V>,
) -> io::Result<()> {
    for (k, v) in &new {
        if old.get(k) != Some(v) {
            map.update(k.as_ref(), v.as_ref())?;
        }
    }
    for k in old.keys().filter(|k| !new.contains_key(*k)) {
        map.delete(k.as_ref())?;
    }
    *old = new;
    Ok(())
}

/// Every entry of a hash map whose keys and values have the sizes `K` and `V`.
fn read_all<const K: usize, const V: usize>(map: &crate::ebpf::Map) -> io::Result<HashMap<[u8; K], [u8; V]>> {
    let mut out = HashMap::new();
    for k in map.keys()? {
        if let (Ok(key), Some(v)) = (<[u8; K]>::try_from(k.as_slice()), map.lookup(&k)?) {
            if let Ok(value) = <[u8; V]>::try_from(v.as_slice()) {
                out.insert(key, value);
            }
        }
    }
    Ok(out)
}

impl FastPath {
    /// Takes the label stacks a kept fast path's last run left as written, so that the first
    /// write of this run's tables deletes those it no longer has.
    pub(super) fn adopt_labels(&mut self) -> io::Result<()> {
        self.labels.push = read_all(self.obj.map("ef_less_push").map_err(obj_err)?)?;
        self.labels.reroute = read_all(self.obj.map("ef_less_reroute").map_err(obj_err)?)?;
        Ok(())
    }

    /// Mirrors a label-switching mode's tables and the ports' state into the kernel. Stacks go
    /// before ports, so a port marked down finds every detour planned for it written already.
    pub fn set_labels(&mut self, labels: &KernelLabels, ports: &[LabelPort]) -> io::Result<()> {
        let push = labels.push.iter().filter_map(|(&ip, s)| Some((push_key(ip), stack_value(s)?))).collect();
        let reroute = labels
            .reroute
            .iter()
            .filter_map(|(&(port, from, hash), s)| {
                let mut k = [0u8; LESS_REROUTE_KEY_BYTES];
                k[0..4].copy_from_slice(&port.to_ne_bytes());
                k[4..8].copy_from_slice(&from.to_ne_bytes());
                k[8..16].copy_from_slice(&hash.to_ne_bytes());
                Some((k, stack_value(s)?))
            })
            .collect();
        // Every port number the kernel may read has an entry: unknown ones are all zero.
        let shared = self.labels.ports.clone();
        let mut entries = shared.lock().unwrap_or_else(|e| e.into_inner());
        // A lost interface is written down until it is up again: asked now, under the lock, so
        // that neither an up the guard saw before this thread heard of the loss, nor the other
        // way round, leaves the kernel's entry wrong.
        entries.lost.retain(|&i| !netio::sys::if_name(i).is_some_and(|n| netio::sys::carrier(&n)));
        let port_values = (0..LESS_MAX_PORTS)
            .map(|no| {
                let mut v = [0u8; LESS_PORT_BYTES];
                // Another mode's port is unknown here: never an output, and what comes in on it
                // is not label-switched.
                if let Some(p) = ports.iter().find(|p| p.no == no && labels.ports.contains(&no)) {
                    v[0..4].copy_from_slice(&p.ifindex.to_ne_bytes());
                    v[4] = (p.live && !entries.lost.contains(&p.ifindex)) as u8;
                    v[5] = labels.edge_ports.contains(&no) as u8;
                    v[6] = 1;
                    v[7] = p.whole as u8;
                }
                (no.to_ne_bytes(), v)
            })
            .collect();
        if self.labels.max_labels != Some(labels.max_labels) {
            self.set_config(CFG_LESS_MAX_LABELS, labels.max_labels as u64)?;
            self.labels.max_labels = Some(labels.max_labels);
        }
        let w = &mut self.labels;
        write_diff(self.obj.map("ef_less_push").map_err(obj_err)?, &mut w.push, push)?;
        write_diff(self.obj.map("ef_less_reroute").map_err(obj_err)?, &mut w.reroute, reroute)?;
        let ports_map = self.obj.map("ef_less_ports").map_err(obj_err)?;
        // Under the lock: the guard's write of a lost carrier comes before this one or after it.
        write_diff(ports_map, &mut entries.written, port_values)?;
        drop(entries);
        if w.guard.is_none() {
            match ports_map.try_clone().and_then(|m| CarrierGuard::start(m, w.ports.clone())) {
                Ok(g) => w.guard = Some(g),
                Err(e) => tracing::warn!("no carrier guard (a lost link waits for the forwarding thread): {e}"),
            }
        }
        Ok(())
    }

    /// Ports the carrier guard marked down in the kernel ahead of the forwarding thread.
    pub fn ports_marked_down(&self) -> u64 {
        self.labels.ports.lock().map_or(0, |p| p.marked)
    }

    /// LESS frames the kernel forwarded (shifted, popped, delivered, pushed at the edge,
    /// rerouted), and those it dropped at a down port with no reroute budget left.
    pub fn label_counters(&self) -> [(&'static str, u64); 6] {
        let c = self.all_counters();
        let names = ["shifted", "popped", "delivered", "pushed", "rerouted", "budget_spent"];
        let slot = |i| if i < 5 { CNT_LESS_SHIFTED + i } else { CNT_LESS_SPENT };
        std::array::from_fn(|i| (names[i], c[slot(i)]))
    }
}
