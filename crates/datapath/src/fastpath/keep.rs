//! (About 650 lines with its tests, one concern: what a kept fast path pins and how the next run
//! adopts it or starts cold.)
//!
//! Kernel state that outlives the daemon (`keep_fastpath`, docs/deploy.md#restart): the fast
//! path's maps and each port's link pinned under `/sys/fs/bpf/edgeflow/<dpid>`, so that the
//! kernel goes on forwarding the flows it holds while the daemon is stopped, killed or upgraded,
//! and the next run takes them over without a gap.
//!
//! The next run adopts what it finds only when it is the same switch: the same map layout,
//! datapath, programs, capacity, ports (number, interface, ifindex) and upcall interface, all
//! written down in a record pinned beside the maps. Anything else starts cold, after removing
//! what was kept. An adopted run loads its programs anew over the kept maps and swaps them into
//! the kept links in one step each (`BPF_LINK_UPDATE`); the entries the last run installed go on
//! forwarding, beside the new run's own, until the mode has its state again (OpenFlow: the
//! controller's first barrier), when they are all released at once.
//!
//! About 650 lines, one concern: the kept state — its record, finding and cleaning it, and a
//! run's taking over of what the last one left (masks, slots, meters, links) and its release.

use std::io;
use std::path::{Path, PathBuf};

use packet::{FlowKey, KEY_BYTES};
use tracing::info;

use super::{
    megaflows, obj_err, sum_hits, table, FastPath, Mode, Programs, CFG_GENERATION, CFG_HASH_SEED, CFG_UPCALL_IFINDEX,
    ENTRY_BYTES, ENTRY_KEY_AT, ENTRY_MASK_AT, MASK_END, MAX_MASKS, MAX_METERS, METER_BYTES,
};
use crate::ebpf::Map;
use crate::sys;

/// What the kept maps mean: every structure offset and constant C and Rust share, hashed (FNV-1a)
/// by `fastpath/layout.rs`, whose test fails until this is the hash of the layout as it is. The
/// record carries it, and a run whose layout hashes otherwise starts cold rather than misreading
/// what an older one kept: no version number that a change could forget to bump. (A map whose type
/// or size changes is not reused anyway.)
pub const LAYOUT_FINGERPRINT: u64 = 0xf908_6914_b4af_1e51;
/// Where kept state lives, one directory per datapath id, unless `EDGEFLOW_BPF_DIR` says
/// otherwise (the systemd unit binds this directory into the service's runtime directory, as an
/// unprivileged user cannot reach into the 0700 /sys/fs/bpf systemd mounts).
pub const DEFAULT_ROOT: &str = "/sys/fs/bpf/edgeflow";

pub fn root() -> PathBuf {
    std::env::var_os("EDGEFLOW_BPF_DIR").map_or_else(|| PathBuf::from(DEFAULT_ROOT), PathBuf::from)
}
/// `BPF_FS_MAGIC`: the filesystem type of a BPF filesystem.
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
/// The record: a one-slot array whose value is its length (u32) and its text.
const RECORD_BYTES: u32 = 4096;
const ARRAY: u32 = 2;
/// How the record's text starts.
const RECORD_HEAD: &str = "edgeflow-kept";

/// The directory a switch keeps its kernel state in.
pub fn dir(dpid: u64) -> PathBuf {
    root().join(format!("{dpid:016x}"))
}

/// The upcall interface of a switch that keeps its kernel state, and its peer: named by the
/// datapath, so that the next run finds them (an interface name holds 15 bytes).
pub fn upcall_names(dpid: u64) -> (String, String) {
    let folded = (dpid ^ (dpid >> 36)) & 0xf_ffff_ffff;
    let ours = format!("ef-up{folded:09x}");
    let peer = format!("{ours}p");
    (ours, peer)
}

/// Makes sure kept state can be pinned: [`root`] (or, while it does not exist, the directory
/// it would be made in) is on a BPF filesystem. For the default root, one is mounted at
/// /sys/fs/bpf if none is (systemd mounts one; a bare system may not have it).
pub fn ensure_bpffs() -> io::Result<()> {
    let is_bpffs = |p: &Path| {
        let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else { return false };
        // SAFETY: a zeroed statfs is valid for statfs to fill; the path is NUL-terminated.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        (unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0) && st.f_type as i64 == BPF_FS_MAGIC
    };
    let root = root();
    let probe = if root.exists() { root.clone() } else { root.parent().unwrap_or(&root).to_path_buf() };
    if is_bpffs(&probe) {
        return Ok(());
    }
    if root != Path::new(DEFAULT_ROOT) {
        return Err(io::Error::other(format!(
            "keep_fastpath: {} (EDGEFLOW_BPF_DIR) is not on a BPF filesystem",
            root.display()
        )));
    }
    let (src, target, fstype) = (c"bpf", c"/sys/fs/bpf", c"bpf");
    // SAFETY: NUL-terminated strings; no data argument.
    let r = unsafe { libc::mount(src.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!(
                "keep_fastpath: no BPF filesystem at /sys/fs/bpf, and mounting one failed ({e}); \
                 mount it first (mount -t bpf bpf /sys/fs/bpf)"
            ),
        ));
    }
    Ok(())
}

/// One port as the record has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptPort {
    pub no: u32,
    pub name: String,
    pub ifindex: u32,
    /// How its programs were attached (`Attachment::kind`).
    pub kind: String,
}

/// What a run that keeps its kernel state writes down for the next.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// `LAYOUT_FINGERPRINT` of the run that wrote it (a small number: a run from before it was).
    pub layout: u64,
    pub datapath: String,
    pub programs: String,
    pub entries: u32,
    /// The upcall interface (TC) and its ifindex.
    pub upcall: Option<(String, u32)>,
    pub ports: Vec<KeptPort>,
}

impl Record {
    fn text(&self) -> String {
        let mut t = format!(
            "{RECORD_HEAD} {:#x}\ndatapath {}\nprograms {}\nentries {}\n",
            self.layout, self.datapath, self.programs, self.entries
        );
        if let Some((name, ifindex)) = &self.upcall {
            t += &format!("upcall {name} {ifindex}\n");
        }
        for p in &self.ports {
            t += &format!("port {} {} {} {}\n", p.no, p.name, p.ifindex, p.kind);
        }
        t
    }

    fn parse(text: &str) -> Option<Record> {
        let mut r = Record::default();
        let mut lines = text.lines();
        let layout = lines.next()?.strip_prefix(RECORD_HEAD)?.trim();
        r.layout = match layout.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok()?,
            None => layout.parse().ok()?,
        };
        for line in lines {
            let (key, rest) = line.split_once(' ')?;
            match key {
                "datapath" => r.datapath = rest.to_string(),
                "programs" => r.programs = rest.to_string(),
                "entries" => r.entries = rest.parse().ok()?,
                "upcall" => {
                    let (name, ifindex) = rest.split_once(' ')?;
                    r.upcall = Some((name.to_string(), ifindex.parse().ok()?));
                }
                "port" => {
                    let mut f = rest.splitn(4, ' ');
                    let no = f.next()?.parse().ok()?;
                    let name = f.next()?.to_string();
                    let ifindex = f.next()?.parse().ok()?;
                    r.ports.push(KeptPort { no, name, ifindex, kind: f.next().unwrap_or("").to_string() });
                }
                _ => return None,
            }
        }
        Some(r)
    }

    /// Why a run wanting `self` cannot take over what `kept` describes; None if it can.
    pub fn unfit(&self, kept: &Record) -> Option<String> {
        let differs = |what: &str, was: &dyn std::fmt::Debug, now: &dyn std::fmt::Debug| {
            Some(format!("{what}: {was:?} then, {now:?} now"))
        };
        if kept.layout != self.layout {
            return Some(format!("the maps' layout: {:#x} then, {:#x} now", kept.layout, self.layout));
        }
        if kept.datapath != self.datapath {
            return differs("the datapath", &kept.datapath, &self.datapath);
        }
        if kept.programs != self.programs {
            return differs("the programs", &kept.programs, &self.programs);
        }
        if kept.entries != self.entries {
            return differs("fastpath_entries", &kept.entries, &self.entries);
        }
        if kept.upcall != self.upcall {
            return differs("the upcall interface", &kept.upcall, &self.upcall);
        }
        let ports = |r: &Record| {
            let mut v: Vec<(u32, String, u32)> = r.ports.iter().map(|p| (p.no, p.name.clone(), p.ifindex)).collect();
            v.sort();
            v
        };
        if ports(kept) != ports(self) {
            return differs("the ports (number, interface, ifindex)", &ports(kept), &ports(self));
        }
        None
    }
}

/// The record kept in `dir`, if one is there and readable.
pub fn read_record(dir: &Path) -> Option<Record> {
    let (map, _) = Map::from_pinned(&dir.join("record")).ok()?;
    let v = map.lookup(&0u32.to_ne_bytes()).ok()??;
    let len = u32::from_ne_bytes(v.get(0..4)?.try_into().ok()?) as usize;
    Record::parse(std::str::from_utf8(v.get(4..4 + len)?).ok()?)
}

/// Writes `record` into the record map pinned in `dir`, creating it if need be.
fn write_record(dir: &Path, record: &Record) -> io::Result<()> {
    let path = dir.join("record");
    let map = match Map::from_pinned(&path) {
        Ok((m, _)) if m.value_size == RECORD_BYTES => m,
        found => {
            if found.is_ok() {
                std::fs::remove_file(&path)?;
            }
            let m = Map::create("ef_kept", ARRAY, 4, RECORD_BYTES, 1, 0)?;
            m.pin(&path)?;
            m
        }
    };
    let text = record.text();
    if text.len() + 4 > RECORD_BYTES as usize {
        return Err(io::Error::other("too many ports to write down for the next run"));
    }
    let mut v = vec![0u8; RECORD_BYTES as usize];
    v[0..4].copy_from_slice(&(text.len() as u32).to_ne_bytes());
    v[4..4 + text.len()].copy_from_slice(text.as_bytes());
    map.update(&0u32.to_ne_bytes(), &v)
}

/// What `clean` removed.
#[derive(Debug, Default)]
pub struct Cleaned {
    pub dir: Option<PathBuf>,
    pub upcall: Option<String>,
    /// Ports whose programs, attached the pre-link ways, were detached.
    pub detached: Vec<String>,
}

/// Removes everything a switch kept for `dpid`: its programs leave the ports (unpinned links are
/// detached by the kernel), its maps and upcall interface go. What `edgeflow stop --clean` does,
/// and a run does before starting cold.
pub fn clean(dpid: u64) -> io::Result<Cleaned> {
    clean_at(&dir(dpid), &upcall_names(dpid).0)
}

/// `clean` for the state kept in `dir`, with upcall interface `upcall`.
fn clean_at(dir: &Path, upcall: &str) -> io::Result<Cleaned> {
    let mut done = Cleaned::default();
    if let Some(record) = read_record(dir) {
        for p in &record.ports {
            // Links go with their pins; a filter or a netlink XDP program stays until removed.
            let legacy = match p.kind.as_str() {
                "tc clsact" => {
                    drop(netio::netlink::TcFilter::existing(p.ifindex, false, crate::attach::TcSlot::FastPath as u16));
                    true
                }
                "xdp native netlink" => {
                    drop(netio::netlink::XdpAttachment::existing(p.ifindex, netio::netlink::XDP_NATIVE));
                    true
                }
                "xdp generic netlink" => {
                    drop(netio::netlink::XdpAttachment::existing(p.ifindex, netio::netlink::XDP_GENERIC));
                    true
                }
                _ => false,
            };
            if legacy && sys::ifindex(&p.name).ok() == Some(p.ifindex) {
                done.detached.push(p.name.clone());
            }
        }
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        done.dir = Some(dir.to_path_buf());
    }
    if sys::ifindex(upcall).is_ok() && sys::delete_link(upcall).is_ok() {
        done.upcall = Some(upcall.to_string());
    }
    Ok(done)
}

/// The datapath ids with state kept under [`root`].
pub fn kept_dpids() -> Vec<u64> {
    let Ok(entries) = std::fs::read_dir(root()) else { return Vec::new() };
    entries.filter_map(|e| u64::from_str_radix(e.ok()?.file_name().to_str()?, 16).ok()).collect()
}

/// A switch that keeps its kernel state: where, and what it took over from the last run.
pub(super) struct Kept {
    pub dir: PathBuf,
    /// The ports the last run recorded, whose pinned links this run may take over (adopted runs).
    pub found: Vec<KeptPort>,
}

/// What the last run installed and this one has not released yet: its mask slots and meter
/// slots are taken, and its entries forward under the generation it left.
#[derive(Debug, Default)]
pub(super) struct Inherited {
    pub masks: [bool; MAX_MASKS],
    pub meters: Vec<u32>,
    pub entries: usize,
    /// Their slots and indices (`fastpath/table.rs`).
    pub placed: Vec<(u32, u32)>,
}

impl FastPath {
    /// Loads the fast path as [`FastPath::load`] does, keeping its state for the next run under
    /// [`dir`]`(dpid)`, and taking over what the last run of this switch kept there if it fits
    /// `ports` (number, interface name); else what was kept is removed first.
    pub fn load_kept(
        mode: Mode,
        programs: Programs,
        entries: u32,
        dpid: u64,
        ports: &[(u32, String)],
    ) -> io::Result<FastPath> {
        ensure_bpffs()?;
        FastPath::load_kept_in(mode, programs, entries, dir(dpid), upcall_names(dpid), ports)
    }

    /// `load_kept` with the state in `dir`, and the upcall interface (TC) named `ours` and `peer`.
    pub(super) fn load_kept_in(
        mode: Mode,
        programs: Programs,
        entries: u32,
        dir: PathBuf,
        (ours, peer): (String, String),
        ports: &[(u32, String)],
    ) -> io::Result<FastPath> {
        let mut wanted = Record {
            layout: LAYOUT_FINGERPRINT,
            datapath: mode.name().to_string(),
            programs: format!("{programs:?}").to_lowercase(),
            entries,
            upcall: None,
            ports: Vec::new(),
        };
        if mode == Mode::Tc {
            wanted.upcall = sys::ifindex(&ours).ok().map(|i| (ours.clone(), i));
        }
        for (no, name) in ports {
            let ifindex =
                sys::ifindex(name).map_err(|e| io::Error::new(e.kind(), format!("port {no} ({name}): {e}")))?;
            wanted.ports.push(KeptPort { no: *no, name: name.clone(), ifindex, kind: String::new() });
        }
        let found = read_record(&dir);
        let mut unfit = match &found {
            Some(kept) => wanted.unfit(kept),
            None => Some("nothing was kept".into()),
        };
        let load = || FastPath::load_object(programs, entries, Some(&dir));
        let mut obj = None;
        if unfit.is_none() {
            let o = load()?;
            if o.reused.len() == o.maps.len() {
                obj = Some(o);
            } else {
                unfit = Some("some of its maps had another shape".into());
            }
        }
        let obj = match obj {
            Some(o) => o,
            None => {
                if dir.exists() || sys::ifindex(&ours).is_ok() {
                    info!(dir = %dir.display(), "kernel state kept by an earlier run does not fit this one ({}): starting cold", unfit.as_deref().unwrap_or(""));
                    clean_at(&dir, &ours)?;
                }
                load()?
            }
        };
        let mut fp = FastPath::with_object(mode, programs, obj, entries);
        match found.filter(|_| unfit.is_none()) {
            Some(record) => {
                fp.adopt()?;
                fp.upcall = record.upcall.as_ref().map(|_| (ours, peer));
                fp.kept = Some(Kept { dir, found: record.ports });
                let inherited = fp.inherited.as_ref().map_or(0, |i| i.entries);
                info!(entries = inherited, "kernel state kept by the last run taken over: its entries forward until the mode has its state again");
            }
            None => {
                fp.start_fresh(Some((ours, peer)))?;
                fp.kept = Some(Kept { dir, found: Vec::new() });
            }
        }
        Ok(fp)
    }

    /// Reads what the last run left in the kernel: its generation, masks, their order and the
    /// meter slots its entries use, all kept out of this run's hands until released.
    fn adopt(&mut self) -> io::Result<()> {
        let config = self.obj.map("ef_config").map_err(obj_err)?;
        let word = |v: Option<Vec<u8>>| v.and_then(|v| v.get(0..8).map(|b| u64::from_ne_bytes(b.try_into().unwrap())));
        self.generation = word(config.lookup(&CFG_GENERATION.to_ne_bytes())?).unwrap_or(0);
        let upcall = word(config.lookup(&CFG_UPCALL_IFINDEX.to_ne_bytes())?).unwrap_or(0);
        // The kernel hashes keys with the last run's seed: entries this run adds must agree.
        self.hash_seed = word(config.lookup(&CFG_HASH_SEED.to_ne_bytes())?).unwrap_or(0);
        let mut inherited = Inherited::default();
        let masks = self.obj.map("ef_masks").map_err(obj_err)?;
        for slot in 0..MAX_MASKS {
            let Some(v) = masks.lookup(&(slot as u32).to_ne_bytes())? else { continue };
            if v.len() >= 16 + KEY_BYTES && word(Some(v.clone())) == Some(self.generation) {
                let mut m = FlowKey::default();
                m.0.copy_from_slice(&v[16..16 + KEY_BYTES]);
                self.masks[slot] = Some(m);
                inherited.masks[slot] = true;
            }
        }
        let order_map = self.obj.map("ef_mask_order").map_err(obj_err)?;
        let order: Vec<u32> = order_map
            .lookup(&0u32.to_ne_bytes())?
            .unwrap_or_default()
            .chunks_exact(4)
            .map(|c| u32::from_ne_bytes(c.try_into().unwrap()))
            .take(MAX_MASKS)
            .take_while(|&slot| slot != MASK_END)
            .collect();
        self.mask_order = order.clone();
        self.write_mask_order(
            order.into_iter().filter(|&s| (s as usize) < MAX_MASKS && inherited.masks[s as usize]).collect(),
        );
        let meters = self.obj.map("ef_meters").map_err(obj_err)?;
        for slot in 0..MAX_METERS {
            if meters.lookup(&slot.to_ne_bytes())?.is_some_and(|v| v.iter().any(|&b| b != 0)) {
                inherited.meters.push(slot);
            }
        }
        // The slots that lead to an entry of its generation stay, and those indices are taken;
        // the rest is let go of.
        let slot_map = self.obj.map("ef_flow_slots").map_err(obj_err)?;
        let slots: Vec<u64> = slot_map
            .lookup_cells(slot_map.max_entries, false)?
            .chunks_exact(8)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        let flows = megaflows(&self.obj);
        let bodies = flows.lookup_cells(flows.max_entries, false)?;
        let hits = self.obj.map("ef_flow_hits").map_err(obj_err)?;
        let cells = hits.lookup_cells(hits.max_entries, true)?;
        let per_index = (cells.len() / hits.max_entries.max(1) as usize).max(1);
        let counts = cells.chunks_exact(per_index).map(sum_hits).collect();
        let generation = self.generation;
        let live = |index: u32| {
            let at = index as usize * ENTRY_BYTES;
            bodies.get(at..at + 8).map(|w| u64::from_ne_bytes(w.try_into().unwrap())) == Some(generation)
        };
        let (flow_table, writes) = table::FlowTable::adopted(self.capacity, slots, live, counts);
        self.table = flow_table;
        for (s, v) in writes {
            self.write_slot(s, v);
        }
        inherited.placed = (0..self.table.slots().len() as u32)
            .filter_map(|s| table::slot_index(self.table.slots()[s as usize]).map(|i| (s, i)))
            .collect();
        inherited.entries = inherited.placed.len();
        match self.programs {
            Programs::Links => self.adopt_links()?,
            Programs::Flows => self.adopt_labels()?,
            // Not kept: `Switch::new` loads a P4 program's fast path afresh.
            Programs::P4 => {}
        }
        if self.mode == Mode::Tc && upcall == 0 {
            return Err(io::Error::other("the kept fast path has no upcall interface"));
        }
        self.inherited = Some(inherited);
        Ok(())
    }

    /// Whether entries the last run installed still forward here.
    pub fn holds_inherited(&self) -> bool {
        self.inherited.is_some()
    }

    /// Where this switch keeps its kernel state, and how many of the last run's entries it still
    /// holds (None once released, or if it took over none); None if it keeps nothing.
    pub fn kept(&self) -> Option<(&Path, Option<usize>)> {
        self.kept.as_ref().map(|k| (k.dir.as_path(), self.inherited.as_ref().map(|i| i.entries)))
    }

    /// Whether mask slot `slot` is the last run's, not to be freed or reused until released.
    pub(super) fn inherited_mask(&self, slot: usize) -> bool {
        self.inherited.as_ref().is_some_and(|i| i.masks[slot])
    }

    /// The slot and index of an entry the last run installed for `masked` under mask slot
    /// `mask_slot` (whose key hashes to `hash`), if it still forwards: the caller points the slot
    /// at its own entry for the same key and then lets the index go ([`Self::drop_inherited`]).
    /// Without this the last run's entry, found first in the window, would shadow this run's
    /// until released.
    pub(super) fn inherited_twin(&self, mask_slot: usize, hash: u64, masked: &FlowKey) -> Option<(u32, u32)> {
        let inherited = self.inherited.as_ref()?;
        if !inherited.masks[mask_slot] {
            return None;
        }
        let flows = megaflows(&self.obj);
        self.table.tagged(hash).find(|&(slot, index)| {
            inherited.placed.contains(&(slot, index))
                && flows.lookup(&index.to_ne_bytes()).ok().flatten().is_some_and(|v| {
                    v.len() >= ENTRY_KEY_AT + KEY_BYTES
                        && v[ENTRY_MASK_AT..ENTRY_MASK_AT + 4] == (mask_slot as u32).to_ne_bytes()
                        && v[ENTRY_KEY_AT..ENTRY_KEY_AT + KEY_BYTES] == masked.0
                })
        })
    }

    /// The last run's entry at (`slot`, `index`) no longer forwards: its slot is another's now.
    pub(super) fn drop_inherited(&mut self, slot: u32, index: u32) {
        if let Some(inherited) = self.inherited.as_mut() {
            inherited.placed.retain(|&p| p != (slot, index));
            inherited.entries -= 1;
        }
    }

    /// Whether meter slot `slot` is the last run's.
    pub(super) fn inherited_meter(&self, slot: u32) -> bool {
        self.inherited.as_ref().is_some_and(|i| i.meters.contains(&slot))
    }

    /// A flush while the last run's entries still forward: only this run's own go, one by one,
    /// and their masks and meters with them; the generation stays, and so do the last run's.
    pub(super) fn flush_own(&mut self) {
        let own: Vec<Vec<u8>> = self.entries.keys().cloned().collect();
        for k in own {
            self.take_out(&k);
        }
        self.entries.clear();
        self.by_source.clear();
        for slot in 0..MAX_MASKS {
            if !self.inherited_mask(slot) {
                self.masks[slot] = None;
            }
            self.mask_hits[slot] = 0;
            self.mask_users[slot] = 0;
        }
        let order = self.mask_order.iter().copied().filter(|&s| self.inherited_mask(s as usize)).collect();
        self.write_mask_order(order);
        self.forget_meters();
    }

    /// Releases the entries the last run installed, all at once (a generation flush, which takes
    /// this run's too: they come back at their next miss); returns how many there were, or None
    /// if there were none to release.
    pub fn release_inherited(&mut self) -> Option<usize> {
        let inherited = self.inherited.take()?;
        if let Ok(meters) = self.obj.map("ef_meters") {
            for slot in &inherited.meters {
                let _ = meters.update(&slot.to_ne_bytes(), &[0u8; METER_BYTES]);
            }
        }
        self.flush();
        // Unreachable now; their slots and indices are let go of here (this run's own by `sweep`).
        for (slot, index) in inherited.placed {
            for (s, v) in self.table.release_slot(slot) {
                self.write_slot(s, v);
            }
            self.table.cool(index);
        }
        Some(inherited.entries)
    }

    /// The pinned link a port's programs ran in under the last run, if this run may take it over:
    /// the same port on the same interface, attached through a link.
    pub(super) fn kept_link(&self, no: u32, ifindex: u32) -> Option<(crate::ebpf::Link, &'static str)> {
        let kept = self.kept.as_ref()?;
        let p = kept.found.iter().find(|p| p.no == no && p.ifindex == ifindex)?;
        let kind = crate::attach::LINK_KINDS.iter().find(|k| **k == p.kind)?;
        crate::ebpf::Link::from_pinned(&link_path(&kept.dir, ifindex)).ok().map(|l| (l, *kind))
    }

    /// Writes down, for the next run, what this one is: called whenever a port's attachment changes.
    pub(super) fn write_kept_record(&self) {
        let Some(kept) = &self.kept else { return };
        let record = Record {
            layout: LAYOUT_FINGERPRINT,
            datapath: self.mode.name().to_string(),
            programs: format!("{:?}", self.programs).to_lowercase(),
            entries: self.capacity,
            upcall: self.upcall.as_ref().and_then(|(ours, _)| sys::ifindex(ours).ok().map(|i| (ours.clone(), i))),
            ports: self
                .attached
                .iter()
                .map(|(&no, a)| KeptPort {
                    no,
                    name: a.name.clone(),
                    ifindex: a.ifindex,
                    kind: a.link.kind.to_string(),
                })
                .collect(),
        };
        if let Err(e) = write_record(&kept.dir, &record) {
            tracing::warn!("kept kernel state: the record for the next run was not written ({e}); it will start cold");
        }
    }
}

/// Where the link of the port on `ifindex` is pinned.
pub(super) fn link_path(dir: &Path, ifindex: u32) -> PathBuf {
    dir.join(format!("link-{ifindex}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_written_and_says_what_differs() {
        let r = Record {
            layout: LAYOUT_FINGERPRINT,
            datapath: "tc".into(),
            programs: "flows".into(),
            entries: 16384,
            upcall: Some(("ef-up0000000e7".into(), 41)),
            ports: vec![
                KeptPort { no: 1, name: "eth0".into(), ifindex: 2, kind: "tcx".into() },
                KeptPort { no: 2, name: "eth1".into(), ifindex: 3, kind: "xdp native link".into() },
            ],
        };
        assert_eq!(Record::parse(&r.text()), Some(r.clone()));
        assert_eq!(r.unfit(&r), None);
        let mut moved = r.clone();
        moved.ports[1].ifindex = 9;
        moved.ports[0].kind = "tc clsact".into();
        let why = r.unfit(&moved).unwrap();
        assert!(why.starts_with("the ports (number, interface, ifindex): ") && why.contains("9"), "{why}");
        let mut older = r.clone();
        older.layout = 0;
        assert!(r.unfit(&older).unwrap().starts_with("the maps' layout"));
        // What a run from before the fingerprint wrote (`edgeflow-kept 1`) reads, and is not taken over.
        let before = Record::parse(&r.text().replacen(&format!("{LAYOUT_FINGERPRINT:#x}"), "1", 1)).unwrap();
        assert_eq!(before.layout, 1);
        assert!(r.unfit(&before).unwrap().starts_with("the maps' layout: 0x1 then"));
        assert_eq!(Record::parse("something else\n"), None);
        assert_eq!(Record::parse(&format!("{RECORD_HEAD} 1\nunknown line\n")), None);
    }

    #[test]
    fn upcall_names_fit_an_interface_name_and_differ_by_datapath() {
        let (ours, peer) = upcall_names(u64::MAX);
        assert!(ours.len() <= 15 && peer.len() <= 15, "{peer}");
        assert_ne!(upcall_names(1).0, upcall_names(2).0);
    }
}
