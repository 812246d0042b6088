//! (About 940 lines, one concern: an AF_XDP port, its sockets, UMEMs, rings and XDP program.)
//!
//! A port on a Linux interface through an AF_XDP socket: the interface's XDP hook hands every
//! frame it receives to the socket (`bpf/afxdp.c` redirects into an XSKMAP; with the XDP fast path,
//! its program sends up there what it does not forward, see [`open_socket`]), and the socket sends
//! from memory it shares with the kernel, with no sk_buff on the receive side and no AF_PACKET
//! tap in the way.
//!
//! One socket per receive queue of the interface (a veth or a NIC may have several, and the
//! kernel hands a socket only the frames of the queue it is bound to), each with a UMEM of its own
//! (see [`open_queues`] for why not one shared). Queue 0's socket also transmits. A UMEM (the
//! frame buffers, shared with the kernel) is split in two: the receive chunks circulate between
//! the fill ring (free, the kernel's to fill) and the RX ring (filled, ours to read), the
//! transmit chunks between our free list, the TX ring and the completion ring. Each of the four rings is a single-producer,
//! single-consumer queue of descriptors mapped from the socket; a batch moves with one store of
//! an index, and a transmit batch leaves with `sendto` kicks.
//!
//! Zero-copy is asked for first (the driver then DMAs into the UMEM); where the driver has no
//! such support (veth has none) the socket is made again in copy mode, where the kernel copies
//! each frame once between its buffer and the UMEM. What the port does without, against
//! `afpacket`: no virtio-net header, so no segmentation offload either way (a GSO super-frame
//! sent to it is refused and counted; a checksum left to offload is finished here; attaching XDP
//! to a veth turns GSO off at its peer, so a switch of AF_XDP veth ports receives no
//! super-frames). What AF_PACKET's ring header says of a frame, the program says in front of it:
//! when it arrived and the VLAN tag the device kept in metadata (through a copy of the program
//! bound to the device, where the kernel has the kfunc).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::afpacket::max_len;
use crate::netlink::{self, XdpAttachment, XDP_GENERIC, XDP_NATIVE};
use crate::sys::{cvt, getsockopt, ifindex, setsockopt};
use crate::{PortRx, PortTx, RxFrame, TxError};

const AF_XDP: libc::c_int = 44;
const SOL_XDP: libc::c_int = 283;
const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_TX_RING: libc::c_int = 3;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_STATISTICS: libc::c_int = 7;
const XDP_OPTIONS: libc::c_int = 8;
const XDP_OPTIONS_ZEROCOPY: u32 = 1;
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
/// A socket whose frames may span several chunks (Linux 6.6+): each descriptor but a frame's last
/// carries XDP_PKT_CONTD, on receive and on transmit.
const XDP_USE_SG: u16 = 1 << 4;
const XDP_PKT_CONTD: u32 = 1;
/// The largest frame a multi-buffer port takes (a 9000-byte MTU's, tagged, with room to spare): a
/// frame the kernel spreads over more is dropped as malformed rather than assembled without end.
const MAX_MULTI_BUFFER_FRAME: usize = 16 * 1024;
const XDP_RING_NEED_WAKEUP: u32 = 1;
/// Receive queues an AF_XDP port opens sockets on at most (`AFXDP_QUEUES` in `bpf/afxdp.c`, the
/// size of its map); frames on queues past it are passed on to the port guard, which drops them.
pub const MAX_QUEUES: u32 = 64;
const XDP_PGOFF_RX_RING: libc::off_t = 0;
const XDP_PGOFF_TX_RING: libc::off_t = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: libc::off_t = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: libc::off_t = 0x1_8000_0000;
/// Bytes of a UMEM chunk: one frame each. 2 KiB holds any standard or VLAN-tagged frame behind the
/// kernel's 256 bytes of XDP headroom; interfaces with a larger MTU get 4 KiB chunks.
const CHUNK: u32 = 2048;
const XDP_HEADROOM: usize = 256;
/// Frames a `sendto` makes the kernel send in copy mode at most (its TX_BATCH_SIZE); a flush kicks
/// as often as the queued frames need.
const KERNEL_TX_BATCH: u32 = 32;
/// The stamp `bpf/afxdp.c` puts in the metadata in front of each frame (`struct afxdp_stamp`):
/// magic, arrival in CLOCK_MONOTONIC ns, the VLAN tag the device kept in metadata (TPID in
/// network order, TCI) and whether there was one.
const STAMP_MAGIC: u64 = 0x6166_7864_7074_7331;
const STAMP_LEN: usize = 24;

/// `struct xdp_umem_reg` as Linux ≥ 6.8 has it (`tx_metadata_len` last, 0: none); older kernels
/// read the same 32 bytes as their version with `flags` and padding.
#[repr(C)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fill: RingOffset,
    completion: RingOffset,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct XdpStatistics {
    rx_dropped: u64,
    rx_invalid_descs: u64,
    tx_invalid_descs: u64,
    rx_ring_full: u64,
    rx_fill_ring_empty_descs: u64,
    tx_ring_empty_descs: u64,
}

#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// Ring sizes, in frames (each a power of two). The receive side holds a burst in the UMEM chunks
/// the fill ring lends the kernel: `rx_frames` of them; the transmit side `tx_frames`.
#[derive(Clone, Copy, Debug)]
pub struct XskConfig {
    pub rx_frames: u32,
    pub tx_frames: u32,
}

impl XskConfig {
    /// From an AF_PACKET ring's geometry, each count rounded up to a power of two (the rings need
    /// it): the same `--ring-frames` sizes either kind of port.
    pub fn from_ring(ring: crate::RingConfig) -> XskConfig {
        XskConfig { rx_frames: ring.rx_frames.next_power_of_two(), tx_frames: ring.tx_frames.next_power_of_two() }
    }
}

/// How the port got its frames: zero-copy or copy, and where XDP runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XskMode {
    pub zero_copy: bool,
    /// The program runs in the driver (native XDP) rather than on sk_buffs (generic).
    pub native: bool,
}

impl XskMode {
    pub fn describe(self) -> &'static str {
        match (self.zero_copy, self.native) {
            (true, _) => "af_xdp zero-copy",
            (false, true) => "af_xdp copy",
            (false, false) => "af_xdp copy generic",
        }
    }
}

/// One mapped ring: its producer and consumer indexes, flags and descriptors (`entry` bytes each).
struct Ring {
    map: *mut u8,
    map_len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut u8,
    mask: u32,
    entry: usize,
    /// Our copy of the index we move (the producer's for fill and TX, the consumer's for RX and
    /// completion), published with one release store per batch.
    local: u32,
    /// The last value read of the index the kernel moves.
    seen: u32,
}

// SAFETY: the mapping belongs to the ring, and only the thread owning its half touches it.
unsafe impl Send for Ring {}

impl Ring {
    fn map(fd: RawFd, off: &RingOffset, entries: u32, entry: usize, pgoff: libc::off_t) -> io::Result<Ring> {
        let map_len = off.desc as usize + entries as usize * entry;
        // SAFETY: mapping the ring the kernel allocated for this socket at this page offset.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = p as *mut u8;
        // SAFETY: the offsets the kernel gave lie inside the mapping; the indexes are u32s.
        unsafe {
            let producer = base.add(off.producer as usize) as *const AtomicU32;
            let consumer = base.add(off.consumer as usize) as *const AtomicU32;
            Ok(Ring {
                map: base,
                map_len,
                producer,
                consumer,
                flags: base.add(off.flags as usize) as *const AtomicU32,
                desc: base.add(off.desc as usize),
                mask: entries - 1,
                entry,
                local: 0,
                seen: 0,
            })
        }
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping; the kernel writes it concurrently, hence atomic.
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as producer().
        unsafe { &*self.consumer }
    }

    fn needs_wakeup(&self) -> bool {
        // SAFETY: as producer().
        unsafe { &*self.flags }.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }

    fn slot(&self, index: u32) -> *mut u8 {
        // SAFETY: masked, so inside the descriptor array.
        unsafe { self.desc.add((index & self.mask) as usize * self.entry) }
    }

    /// As a consumer (RX, completion): entries waiting, up to `max`.
    fn available(&mut self, max: u32) -> u32 {
        let mut n = self.seen.wrapping_sub(self.local);
        if n == 0 {
            // Acquire: the descriptors the kernel wrote before moving its index are visible.
            self.seen = self.producer().load(Ordering::Acquire);
            n = self.seen.wrapping_sub(self.local);
        }
        n.min(max)
    }

    /// As a consumer: gives back `n` read entries.
    fn release(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.consumer().store(self.local, Ordering::Release);
    }

    /// As a producer (fill, TX): free slots, up to `max`.
    fn room(&mut self, max: u32) -> u32 {
        let size = self.mask + 1;
        let mut free = size - self.local.wrapping_sub(self.seen);
        if free < max {
            self.seen = self.consumer().load(Ordering::Acquire);
            free = size - self.local.wrapping_sub(self.seen);
        }
        free.min(max)
    }

    /// As a producer: hands over the entries written so far (release: after their contents).
    fn publish(&self) {
        self.producer().store(self.local, Ordering::Release);
    }

    /// As a producer: entries published that the kernel has not taken yet.
    fn outstanding(&mut self) -> u32 {
        self.seen = self.consumer().load(Ordering::Acquire);
        self.local.wrapping_sub(self.seen)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping what map() mapped; nothing refers to it after this.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.map_len) };
    }
}

/// What both halves share: the socket, its UMEM and the XDP program that feeds it. Dropped with
/// the second half: the program is detached, then the socket closed, then the UMEM unmapped.
struct Shared {
    hook: Option<XdpHook>,
    fd: Option<OwnedFd>,
    umem: *mut u8,
    umem_len: usize,
    chunk: usize,
}

// SAFETY: the UMEM is split between the halves (receive chunks, transmit chunks), each touched only
// by the thread owning that half.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Drop for Shared {
    fn drop(&mut self) {
        self.hook = None;
        self.fd = None;
        // SAFETY: the socket that pinned the UMEM is closed; nothing refers to it any more.
        unsafe { libc::munmap(self.umem as *mut libc::c_void, self.umem_len) };
    }
}

impl Shared {
    fn fd(&self) -> RawFd {
        self.fd.as_ref().map_or(-1, |f| f.as_raw_fd())
    }
}

/// The redirect program, attached to the interface's XDP hook while the port lives.
enum XdpHook {
    Link(#[allow(dead_code)] ebpf::Link),
    Netlink(#[allow(dead_code)] XdpAttachment),
}

/// One receive queue's socket: its RX and fill rings over its own UMEM.
struct QueueRx {
    shared: Arc<Shared>,
    rx: Ring,
    fill: Ring,
    /// A multi-buffer frame's chunks copied together so far (empty between frames), with its
    /// first chunk's stamp: a frame may straddle two calls' batches.
    partial: Vec<u8>,
    partial_stamp: (u64, Option<(u16, u16)>),
    /// Drops its chunks until the next frame starts (one grew past MAX_MULTI_BUFFER_FRAME).
    discarding: bool,
    /// The kernel's cumulative drop counts already reported.
    reported_drops: u64,
    /// Frames read from this queue's socket.
    packets: u64,
}

pub struct AfXdpRx {
    /// By receive queue index; queue 0's socket is also the transmit half's.
    queues: Vec<QueueRx>,
    /// With several queues, an epoll set of their sockets: readable while any of them is, so the
    /// switch's loop waits on one descriptor per port whatever the queue count.
    ready: Option<OwnedFd>,
    /// The queue the next batch starts at: turned every call, so that a busy queue cannot keep
    /// the others waiting past one batch.
    next: usize,
}

pub struct AfXdpTx {
    shared: Arc<Shared>,
    tx: Ring,
    completion: Ring,
    /// Transmit chunks neither queued nor in the kernel's hands.
    free: Vec<u64>,
    /// Queued on the TX ring since the last kick.
    queued: bool,
    zero_copy: bool,
    /// Bound with XDP_USE_SG: a frame longer than a chunk goes out in several.
    multi_buffer: bool,
    name: String,
    max_len: usize,
}

fn xdp_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket call.
    let fd = cvt(unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd was just returned by socket().
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A socket with its UMEM registered and its rings mapped, bound to `ifindex` queue `queue` with
/// `bind_flags`; the UMEM and the socket are freed on failure.
struct Bound {
    shared: Shared,
    rx: Ring,
    fill: Ring,
    tx: Ring,
    completion: Ring,
}

fn setup(ifindex: u32, queue: u32, cfg: XskConfig, chunk: u32, bind_flags: u16) -> io::Result<Bound> {
    let frames = (cfg.rx_frames + cfg.tx_frames) as usize;
    let umem_len = frames * chunk as usize;
    // SAFETY: an anonymous private mapping, page-aligned as UMEM registration wants.
    let umem = unsafe {
        libc::mmap(
            ptr::null_mut(),
            umem_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
            -1,
            0,
        )
    };
    if umem == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let fd = match xdp_socket() {
        Ok(fd) => fd,
        Err(e) => {
            // SAFETY: unmapping what was just mapped.
            unsafe { libc::munmap(umem, umem_len) };
            return Err(e);
        }
    };
    // From here Shared owns both, and frees them on every early return.
    let shared = Shared { hook: None, fd: Some(fd), umem: umem as *mut u8, umem_len, chunk: chunk as usize };
    let s = shared.fd();
    let reg = UmemReg {
        addr: umem as u64,
        len: umem_len as u64,
        chunk_size: chunk,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    setsockopt(s, SOL_XDP, XDP_UMEM_REG, &reg)?;
    setsockopt(s, SOL_XDP, XDP_UMEM_FILL_RING, &cfg.rx_frames)?;
    setsockopt(s, SOL_XDP, XDP_UMEM_COMPLETION_RING, &cfg.tx_frames)?;
    setsockopt(s, SOL_XDP, XDP_RX_RING, &cfg.rx_frames)?;
    setsockopt(s, SOL_XDP, XDP_TX_RING, &cfg.tx_frames)?;
    let off: MmapOffsets = getsockopt(s, SOL_XDP, XDP_MMAP_OFFSETS)?;
    let desc = std::mem::size_of::<[u64; 2]>();
    let rx = Ring::map(s, &off.rx, cfg.rx_frames, desc, XDP_PGOFF_RX_RING)?;
    let tx = Ring::map(s, &off.tx, cfg.tx_frames, desc, XDP_PGOFF_TX_RING)?;
    let mut fill = Ring::map(s, &off.fill, cfg.rx_frames, 8, XDP_UMEM_PGOFF_FILL_RING)?;
    let completion = Ring::map(s, &off.completion, cfg.tx_frames, 8, XDP_UMEM_PGOFF_COMPLETION_RING)?;
    // Every receive chunk starts lent to the kernel; the transmit chunks follow them in the UMEM.
    for i in 0..cfg.rx_frames {
        // SAFETY: a fill slot holds one u64 chunk address; the ring has rx_frames of them.
        unsafe { ptr::write(fill.slot(i) as *mut u64, i as u64 * chunk as u64) };
    }
    fill.local = cfg.rx_frames;
    fill.publish();
    let addr = SockaddrXdp { family: AF_XDP as u16, flags: bind_flags, ifindex, queue_id: queue, shared_umem_fd: 0 };
    // SAFETY: addr is a valid sockaddr_xdp of the size given.
    cvt(unsafe {
        libc::bind(
            s,
            &addr as *const SockaddrXdp as *const libc::sockaddr,
            std::mem::size_of::<SockaddrXdp>() as libc::socklen_t,
        )
    })?;
    Ok(Bound { shared, rx, fill, tx, completion })
}

/// Attaches the redirect program: native XDP where the driver has it, else generic; through a BPF
/// link where the kernel has them, else netlink.
fn attach(prog: &ebpf::Program, ifindex: u32) -> io::Result<(XdpHook, bool)> {
    use ebpf::xdp_flags::{DRV_MODE, SKB_MODE};
    if let Ok(link) = prog.attach_xdp_mode(ifindex, DRV_MODE) {
        return Ok((XdpHook::Link(link), true));
    }
    if let Ok(a) = netlink::attach_xdp(ifindex, prog.fd(), XDP_NATIVE) {
        return Ok((XdpHook::Netlink(a), true));
    }
    match prog.attach_xdp_mode(ifindex, SKB_MODE) {
        Ok(link) => Ok((XdpHook::Link(link), false)),
        Err(_) => netlink::attach_xdp(ifindex, prog.fd(), XDP_GENERIC).map(|a| (XdpHook::Netlink(a), false)),
    }
}

/// Opens `name` as an AF_XDP port: a socket on each receive queue (zero-copy if the driver has it,
/// else copy), the redirect program on the interface's XDP hook. Fails where the interface
/// already runs an XDP program of someone else's (the kernel refuses a second).
pub fn open(name: &str, cfg: XskConfig) -> io::Result<(AfXdpRx, AfXdpTx, XskMode)> {
    let layout = check(name)?;
    let index = layout.index;
    // Loading the object raises RLIMIT_MEMLOCK, which the UMEM is charged against too. The
    // multi-buffer program is loaded where the kernel has such programs (5.18+).
    let object = ebpf::Object::load_with(ebpf::objects::AFXDP, &[], &["afxdp_to_socket_frags"])?;
    let sockets = object.map("afxdp_sockets")?;
    let program = if layout.multi_buffer { "afxdp_to_socket_frags" } else { "afxdp_to_socket" };
    if let Some((_, why)) = object.refused.iter().find(|(p, _)| p == program) {
        return Err(multi_buffer_refused(name, format_args!("this kernel's XDP does not take ({why})")));
    }
    // A copy bound to the device reads the VLAN tag it kept in metadata; the shared copy, where
    // that cannot be had, sees tagged frames as untagged.
    let bound = match object.missing_kfuncs.is_empty() {
        true => object.load_dev_bound(program, index).ok(),
        false => None,
    };
    let prog = match &bound {
        Some(p) => p,
        None => object.program(program)?,
    };
    let (mut queues, zero_copy) = open_queues(name, layout, cfg)?;
    for (queue, bound) in queues.iter().enumerate() {
        sockets.update(&(queue as u32).to_ne_bytes(), &(bound.shared.fd() as u32).to_ne_bytes())?;
    }
    // Attached last: until the sockets are in the map, frames would only be passed on.
    let (hook, native) = attach(prog, index)?;
    queues[0].shared.hook = Some(hook);
    halves(name, cfg, layout, queues, XskMode { zero_copy, native })
}

/// Opens `name` as an AF_XDP port fed by an XDP program of the caller's (the XDP fast path's,
/// which sends up into the sockets only the frames it does not forward itself): a socket on each
/// receive queue, alone. The caller puts them (`PortRx::queue_sockets`) in its XSKMAP; until then
/// frames do not reach them. The mode says native XDP: where the caller's program runs is the
/// caller's to say.
pub fn open_socket(name: &str, cfg: XskConfig) -> io::Result<(AfXdpRx, AfXdpTx, XskMode)> {
    let layout = check(name)?;
    if layout.multi_buffer {
        // The fast path's programs read a frame in one buffer; the kernel attaches them only to
        // interfaces whose frames come in one.
        return Err(multi_buffer_refused(name, "the XDP fast path's programs do not take"));
    }
    // RLIMIT_MEMLOCK, which the UMEM is charged against, was raised where it needs to be when the
    // caller's program was loaded (as `open` has it raised by loading its own).
    let (queues, zero_copy) = open_queues(name, layout, cfg)?;
    halves(name, cfg, layout, queues, XskMode { zero_copy, native: true })
}

/// The interface's receive queues, as the kernel counts them (`/sys/class/net/NAME/queues/rx-*`:
/// the queue indexes a socket can be bound to and XDP reports; where sysfs is not mounted, the
/// channels the driver reports), at least 1.
pub fn rx_queue_count(name: &str) -> u32 {
    let in_sysfs = std::fs::read_dir(format!("/sys/class/net/{name}/queues")).map(|d| {
        d.filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().starts_with("rx-")).count() as u32
    });
    match in_sysfs {
        Ok(n) if n > 0 => n,
        _ => crate::sys::rx_queues(name).unwrap_or(1),
    }
}

/// A socket on each receive queue (up to [`MAX_QUEUES`]), queue 0's with the transmit ring.
///
/// Each has a UMEM of its own rather than one shared (`XDP_SHARED_UMEM`): a socket on another
/// queue needs its own fill and completion rings either way, each receive chunk belongs to one
/// queue's fill ring either way, and the sockets are read by one thread, so sharing would save
/// nothing but the address space of separate mappings while tying every queue's chunks to one
/// registration (and, in zero-copy, one driver's DMA mapping across queues). The cost is memory
/// the size of the receive ring per queue, which is what a burst on that queue needs anyway.
fn open_queues(name: &str, layout: Layout, cfg: XskConfig) -> io::Result<(Vec<Bound>, bool)> {
    let count = rx_queue_count(name).min(MAX_QUEUES);
    let (first, zero_copy) = bind(layout, 0, cfg).map_err(|e| match layout.multi_buffer {
        // Sockets for multi-buffer frames came with Linux 6.6; before, the flag is refused.
        true if e.raw_os_error() == Some(libc::EINVAL) || e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
            multi_buffer_refused(name, format_args!("this kernel's AF_XDP sockets do not take ({e})"))
        }
        _ => e,
    })?;
    let mut queues = vec![first];
    // The other queues only receive: one transmit chunk (the kernel wants the rings to exist).
    let rx_only = XskConfig { rx_frames: cfg.rx_frames, tx_frames: 1 };
    for queue in 1..count {
        let (bound, _) = bind(layout, queue, rx_only)
            .map_err(|e| io::Error::new(e.kind(), format!("{name}: AF_XDP socket on receive queue {queue}: {e}")))?;
        queues.push(bound);
    }
    Ok((queues, zero_copy))
}

/// How an interface's frames sit in its UMEM: the chunk size, and whether its largest frame needs
/// several chunks (its sockets then bound for multi-buffer frames).
#[derive(Clone, Copy)]
struct Layout {
    index: u32,
    chunk: u32,
    multi_buffer: bool,
}

/// The largest MTU whose frames fit one chunk (4 KiB, behind XDP's headroom, VLAN-tagged).
const SINGLE_CHUNK_MTU: usize = 4096 - XDP_HEADROOM - 18;

/// The interface's index and how its largest frame fits the UMEM; an error where AF_XDP cannot
/// serve it.
fn check(name: &str) -> io::Result<Layout> {
    if !ebpf::objects::BUILT {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this edgeflow was built without its eBPF objects (cargo feature `fastpath`), which AF_XDP needs",
        ));
    }
    let index = ifindex(name)?;
    let mtu_frame = max_len(name);
    let chunk = if mtu_frame + 4 + XDP_HEADROOM > CHUNK as usize { 4096 } else { CHUNK };
    let multi_buffer = mtu_frame + 4 + XDP_HEADROOM > chunk as usize;
    if multi_buffer && mtu_frame + 4 > MAX_MULTI_BUFFER_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name}: MTU too large for AF_XDP (at most {})", MAX_MULTI_BUFFER_FRAME - 18),
        ));
    }
    Ok(Layout { index, chunk, multi_buffer })
}

/// Why a jumbo-frame port cannot be had where multi-buffer frames cannot: `why` from the kernel.
fn multi_buffer_refused(name: &str, why: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{name}: MTU too large for AF_XDP without multi-buffer frames (at most {SINGLE_CHUNK_MTU}), which {why}; \
             such a port can stay on AF_PACKET (io = \"af_packet\")"
        ),
    )
}

/// A socket bound to queue `queue`, zero-copy where the driver has it (then true), else copy.
fn bind(layout: Layout, queue: u32, cfg: XskConfig) -> io::Result<(Bound, bool)> {
    let Layout { index, chunk, multi_buffer } = layout;
    let sg = if multi_buffer { XDP_USE_SG } else { 0 };
    let bound = match setup(index, queue, cfg, chunk, XDP_ZEROCOPY | XDP_USE_NEED_WAKEUP | sg) {
        Ok(b) => b,
        // The driver has no zero-copy (EOPNOTSUPP, or EINVAL from older kernels): a new socket
        // and UMEM in copy mode (the failed one is closed, rather than bound a second time).
        Err(_) => setup(index, queue, cfg, chunk, XDP_COPY | XDP_USE_NEED_WAKEUP | sg)?,
    };
    let opts: u32 = getsockopt(bound.shared.fd(), SOL_XDP, XDP_OPTIONS).unwrap_or(0);
    Ok((bound, opts & XDP_OPTIONS_ZEROCOPY != 0))
}

/// The port's two halves over its bound sockets: receive on each, transmit on queue 0's.
fn halves(
    name: &str,
    cfg: XskConfig,
    layout: Layout,
    queues: Vec<Bound>,
    mode: XskMode,
) -> io::Result<(AfXdpRx, AfXdpTx, XskMode)> {
    let mut rx_queues = Vec::with_capacity(queues.len());
    let mut transmit = None;
    for Bound { shared, rx, fill, tx, completion } in queues {
        let shared = Arc::new(shared);
        if transmit.is_none() {
            transmit = Some((shared.clone(), tx, completion));
        }
        rx_queues.push(QueueRx {
            shared,
            rx,
            fill,
            partial: Vec::new(),
            partial_stamp: (0, None),
            discarding: false,
            reported_drops: 0,
            packets: 0,
        });
    }
    let (shared, tx, completion) = transmit.expect("queue 0 is always opened");
    let ready = match rx_queues.len() {
        1 => None,
        _ => Some(epoll_set(rx_queues.iter().map(|q| q.shared.fd()))?),
    };
    let chunk = layout.chunk as u64;
    let tx_chunks = (cfg.rx_frames..cfg.rx_frames + cfg.tx_frames).map(|i| i as u64 * chunk).collect();
    Ok((
        AfXdpRx { queues: rx_queues, ready, next: 0 },
        AfXdpTx {
            shared,
            tx,
            completion,
            free: tx_chunks,
            queued: false,
            zero_copy: mode.zero_copy,
            multi_buffer: layout.multi_buffer,
            name: name.to_string(),
            max_len: max_len(name),
        },
        mode,
    ))
}

/// An epoll descriptor watching `fds` for input (level-triggered): poll(2) on it says whether any
/// of them has frames.
fn epoll_set(fds: impl Iterator<Item = RawFd>) -> io::Result<OwnedFd> {
    // SAFETY: plain epoll_create1 call.
    let ep = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    // SAFETY: ep was just returned by epoll_create1.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    for fd in fds {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
        // SAFETY: ev is a valid epoll_event; fd is a live socket of the port.
        cvt(unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
    }
    Ok(ep)
}

impl QueueRx {
    fn statistics(&self) -> XdpStatistics {
        getsockopt(self.shared.fd(), SOL_XDP, XDP_STATISTICS).unwrap_or_default()
    }

    fn recv(&mut self, budget: usize, f: &mut dyn FnMut(RxFrame<'_>)) -> usize {
        let n = self.rx.available(budget.min(u32::MAX as usize) as u32);
        if n == 0 {
            return 0;
        }
        // Every chunk read goes back to the fill ring, which has room for all of them: the chunks
        // only ever move between the two rings.
        let room = self.fill.room(n);
        debug_assert_eq!(room, n);
        let base = self.rx.local;
        // Stamps are CLOCK_MONOTONIC (all XDP can read); frames are stamped CLOCK_REALTIME.
        let realtime_offset = crate::sys::realtime_ns().wrapping_sub(crate::sys::monotonic_ns());
        let mut frames = 0;
        for i in 0..n {
            // SAFETY: a descriptor the kernel published (below the producer index read with
            // acquire in available()): addr, len, options.
            let (addr, len, options) = unsafe {
                let d = self.rx.slot(base.wrapping_add(i));
                (ptr::read(d as *const u64), ptr::read(d.add(8) as *const u32) as usize, ptr::read(d.add(12) as *const u32))
            };
            let offset = addr as usize;
            if offset + len <= self.shared.umem_len {
                // A frame's first chunk carries the stamp in front of it; its others none.
                let first = self.partial.is_empty() && !self.discarding;
                let (mut tstamp_ns, mut vlan) = (0, None);
                if first && offset % self.shared.chunk >= STAMP_LEN {
                    // SAFETY: the stamp lies in the chunk's headroom, in front of the frame; the
                    // chunk is ours. The magic is cleared, so that a frame the program could not
                    // stamp is not taken for one with this frame's time.
                    unsafe {
                        let stamp = self.shared.umem.add(offset - STAMP_LEN);
                        if ptr::read_unaligned(stamp as *const u64) == STAMP_MAGIC {
                            let mono = ptr::read_unaligned(stamp.add(8) as *const u64);
                            tstamp_ns = mono.wrapping_add(realtime_offset);
                            if ptr::read_unaligned(stamp.add(20) as *const u32) != 0 {
                                let tpid = u16::from_be(ptr::read_unaligned(stamp.add(16) as *const u16));
                                let tci = ptr::read_unaligned(stamp.add(18) as *const u16);
                                vlan = Some((tpid, tci));
                            }
                            ptr::write_unaligned(stamp as *mut u64, 0);
                        }
                    }
                }
                // SAFETY: the chunk is ours until it goes back on the fill ring below, and lies
                // inside the UMEM (checked).
                let data = unsafe { std::slice::from_raw_parts(self.shared.umem.add(offset), len) };
                let more = options & XDP_PKT_CONTD != 0;
                if first && !more {
                    f(RxFrame { data, offload: Default::default(), vlan, tstamp_ns });
                    frames += 1;
                } else if self.discarding {
                    // The rest of a frame too long to take: dropped (the kernel's to prevent).
                    self.discarding = more;
                } else {
                    // A multi-buffer frame: its chunks copied together (the switch reads a frame
                    // as one slice), handed on with its last.
                    if first {
                        self.partial_stamp = (tstamp_ns, vlan);
                    }
                    self.partial.extend_from_slice(data);
                    if self.partial.len() > MAX_MULTI_BUFFER_FRAME {
                        self.partial.clear();
                        self.discarding = more;
                    } else if !more {
                        let (tstamp_ns, vlan) = self.partial_stamp;
                        f(RxFrame { data: &self.partial, offload: Default::default(), vlan, tstamp_ns });
                        self.partial.clear();
                        frames += 1;
                    }
                }
            }
            // The kernel hands back the address of the frame within the chunk; the fill ring
            // wants the chunk's start.
            let chunk_start = addr - addr % self.shared.chunk as u64;
            // SAFETY: a fill slot we have room for (room() above).
            unsafe { ptr::write(self.fill.slot(self.fill.local.wrapping_add(i)) as *mut u64, chunk_start) };
        }
        self.rx.release(n);
        self.fill.local = self.fill.local.wrapping_add(n);
        self.fill.publish();
        if self.fill.needs_wakeup() {
            // The driver sleeps until told that buffers are back (zero-copy drivers only).
            // SAFETY: a zero-length, non-blocking receive only wakes the driver.
            unsafe {
                libc::recvfrom(
                    self.shared.fd(),
                    ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    ptr::null_mut(),
                    ptr::null_mut(),
                )
            };
        }
        self.packets += frames;
        // Frames, as every port counts them; a multi-buffer frame took several of the budget's
        // descriptors.
        frames as usize
    }

    fn rx_drops(&mut self) -> u64 {
        // Cumulative in the kernel: report what is new. A frame the kernel found no free chunk
        // for counts in rx_dropped; one the full RX ring could not take in rx_ring_full.
        let s = self.statistics();
        let total = s.rx_dropped + s.rx_ring_full + s.rx_invalid_descs;
        let new = total.saturating_sub(self.reported_drops);
        self.reported_drops = total.max(self.reported_drops);
        new
    }
}

impl PortRx for AfXdpRx {
    fn rx_fd(&self) -> RawFd {
        match &self.ready {
            Some(ep) => ep.as_raw_fd(),
            None => self.queues[0].shared.fd(),
        }
    }

    fn recv(&mut self, budget: usize, f: &mut dyn FnMut(RxFrame<'_>)) -> usize {
        let count = self.queues.len();
        let mut done = 0;
        for i in 0..count {
            if done >= budget {
                break;
            }
            done += self.queues[(self.next + i) % count].recv(budget - done, f);
        }
        self.next = (self.next + 1) % count;
        done
    }

    fn rx_drops(&mut self) -> u64 {
        self.queues.iter_mut().map(|q| q.rx_drops()).sum()
    }

    fn queue_sockets(&self) -> Vec<RawFd> {
        self.queues.iter().map(|q| q.shared.fd()).collect()
    }

    fn queue_rx_packets(&self) -> Vec<u64> {
        self.queues.iter().map(|q| q.packets).collect()
    }
}

impl AfXdpTx {
    /// Takes back the chunks the kernel has sent.
    fn reclaim(&mut self) {
        let n = self.completion.available(u32::MAX);
        let base = self.completion.local;
        for i in 0..n {
            // SAFETY: a completion entry the kernel published.
            let addr = unsafe { ptr::read(self.completion.slot(base.wrapping_add(i)) as *const u64) };
            self.free.push(addr);
        }
        if n > 0 {
            self.completion.release(n);
        }
    }

    /// Tells the kernel to send what the TX ring holds. In copy mode each `sendto` sends a batch
    /// of at most KERNEL_TX_BATCH frames, so a full ring takes several; a zero-copy driver sends
    /// on its own, and needs a kick only when it says it sleeps.
    fn kick(&mut self) {
        self.tx.publish();
        self.queued = false;
        let kicks = if self.zero_copy { 1 } else { (self.tx.mask + 1) / KERNEL_TX_BATCH + 2 };
        for _ in 0..kicks {
            if self.tx.outstanding() == 0 || (self.zero_copy && !self.tx.needs_wakeup()) {
                break;
            }
            // SAFETY: a zero-length, non-blocking send only starts transmission.
            let r = unsafe { libc::sendto(self.shared.fd(), ptr::null(), 0, libc::MSG_DONTWAIT, ptr::null(), 0) };
            if r < 0 {
                match io::Error::last_os_error().raw_os_error() {
                    // The kernel stopped at its batch or its queue is busy: kick again.
                    Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::EINTR) => {}
                    // The link is down (ENETDOWN, ENXIO): what waits goes when it returns.
                    _ => break,
                }
            }
            self.reclaim();
        }
        self.reclaim();
    }
}

impl PortTx for AfXdpTx {
    fn send(&mut self, frame: &[u8], offload: &packet::Offload) -> Result<(), TxError> {
        // Without a virtio-net header the kernel can neither segment nor finish a checksum: the
        // first is refused, the second done here.
        let chunk = self.shared.chunk;
        if offload.gso.is_some() || frame.len() > self.max_len + 4 || (frame.len() > chunk && !self.multi_buffer) {
            return Err(TxError::Refused);
        }
        // One chunk a frame, or on a multi-buffer socket as many as it fills.
        let pieces = frame.len().div_ceil(chunk).max(1);
        if self.free.len() < pieces {
            self.reclaim();
        }
        if self.free.len() < pieces || (self.tx.room(pieces as u32) as usize) < pieces {
            // Everything is in the kernel's hands: push it along once, as AF_PACKET's ring does.
            self.kick();
            if self.free.len() < pieces || (self.tx.room(pieces as u32) as usize) < pieces {
                return Err(TxError::Busy);
            }
        }
        // A checksum the sender left to offload is finished on the way: what goes in the field.
        let csum = offload.csum.and_then(|p| {
            let (start, at) = (p.start as usize, p.start as usize + p.offset as usize);
            (at + 2 <= frame.len()).then(|| (at, packet::csum::checksum(&frame[start..]).to_be_bytes()))
        });
        for (k, part) in frame.chunks(chunk).enumerate() {
            let addr = self.free.pop().expect("checked above");
            // SAFETY: a transmit chunk of ours (from the free list) inside the UMEM, at least as
            // long as the part; the kernel does not touch it until it is queued.
            let out = unsafe { std::slice::from_raw_parts_mut(self.shared.umem.add(addr as usize), part.len()) };
            out.copy_from_slice(part);
            if let Some((at, sum)) = csum {
                for (j, byte) in sum.iter().enumerate() {
                    if let Some(i) = (at + j).checked_sub(k * chunk).filter(|&i| i < out.len()) {
                        out[i] = *byte;
                    }
                }
            }
            let options = if (k + 1) * chunk < frame.len() { XDP_PKT_CONTD } else { 0 };
            // SAFETY: a TX slot we have room for.
            unsafe {
                let d = self.tx.slot(self.tx.local);
                ptr::write(d as *mut u64, addr);
                ptr::write(d.add(8) as *mut u32, part.len() as u32);
                ptr::write(d.add(12) as *mut u32, options);
            }
            self.tx.local = self.tx.local.wrapping_add(1);
        }
        self.queued = true;
        Ok(())
    }

    fn flush(&mut self) {
        if self.queued {
            self.kick();
        }
    }

    fn link_changed(&mut self) {
        self.max_len = max_len(&self.name);
        // What waited on the ring while the link was down goes now that it may be up.
        self.kick();
    }
}
