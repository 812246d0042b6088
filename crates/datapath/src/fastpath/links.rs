//! The kernel's AFDX virtual links (`bpf/fp_afdx.h`, docs/afdx.md) as userspace keeps them: which
//! links the kernel decides, their accounts, and what it counted on each.

use std::io;

use forwarding::{KernelLinks, LinkCounts};

use super::{obj_err, FastPath, CFG_AFDX_CONSTANT, CFG_AFDX_NETWORK, CNT_AFDX_UP};

/// `AFDX_MAX_OUT`, `AFDX_FANOUTS`, `AFDX_MAX_LINKS` and `AC_MAX` in `bpf/fastpath.h`.
pub const AFDX_MAX_OUT: usize = 8;
pub const AFDX_FANOUTS: u32 = 16;
pub const AFDX_MAX_LINKS: usize = 4096;
/// `AFDX_VL_IDS`: the kernel's VL-id-to-slot array holds every 16-bit id.
pub const AFDX_VL_IDS: usize = 1 << 16;
pub const AC_MAX: usize = 13;
/// `struct afdx_account`: empty, cap, bag_ns, smax, per_frame.
pub const AFDX_ACCOUNT_BYTES: usize = 32;
/// `struct afdx_link`: the account kept at its slot, then in_port, account (a slot), smin, smax,
/// n_out, fanout, the first output's ifindex, whether to check IP headers; one cache line.
pub const AFDX_LINK_IN_PORT_AT: usize = AFDX_ACCOUNT_BYTES;
pub const AFDX_LINK_ACCOUNT_AT: usize = 36;
pub const AFDX_LINK_SMIN_AT: usize = 40;
pub const AFDX_LINK_SMAX_AT: usize = 42;
pub const AFDX_LINK_N_OUT_AT: usize = 44;
pub const AFDX_LINK_FANOUT_AT: usize = 46;
pub const AFDX_LINK_OUT_AT: usize = 48;
pub const AFDX_LINK_IP_CHECK_AT: usize = 52;
pub const AFDX_LINK_BYTES: usize = 64;

/// A link of the mode's table the kernel is to decide, with its outputs' interfaces.
pub struct HeldLink {
    /// Its index in [`KernelLinks::links`].
    pub index: usize,
    pub out_ifindex: Vec<u32>,
    /// Under XDP with several outputs: 1 + the fanout DEVMAP that holds them (links with the same
    /// outputs share one); 0 otherwise.
    pub fanout: u32,
}

/// The links the kernel holds, by counter slot, with what was read from each slot last.
#[derive(Default)]
pub(super) struct Written {
    slots: Vec<(u16, [u64; AC_MAX])>,
    /// Frames the kernel decided on a link it held, harvested so far.
    frames: u64,
    /// Of those, dropped by its filter (addresses, size, input port) and by policing.
    pub(super) filtered: u64,
    pub(super) policed: u64,
    /// Per upcall tag (port): wrong-port frames and bytes read from `ef_afdx_wrong_port` last.
    wrong_port: std::collections::BTreeMap<u16, [u64; 2]>,
    /// Per account of the table: the slot whose link entry keeps it (the first held link that
    /// draws on it).
    homes: std::collections::BTreeMap<usize, u32>,
    /// What the links let go had counted since the last harvest, read when they were let go:
    /// handed over with the next harvest.
    pending: Vec<(u16, LinkCounts)>,
}

/// The first `N` u64 words of a per-CPU map value, each summed over the CPUs.
pub(super) fn sum_over_cpus<const N: usize>(per_cpu: &[Vec<u8>]) -> [u64; N] {
    let mut sum = [0u64; N];
    for cpu in per_cpu {
        for (i, n) in sum.iter_mut().enumerate() {
            *n += u64::from_ne_bytes(cpu[8 * i..8 * i + 8].try_into().unwrap());
        }
    }
    sum
}

impl FastPath {
    /// Hands `held` links of `table` to the kernel, replacing those it held. Their accounts start
    /// from `credits` (per account of `table`, the mode's credit now; full where none is given).
    /// An empty `held` leaves every frame to userspace.
    pub fn set_links(&mut self, table: &KernelLinks, held: &[HeldLink], credits: &[u64]) -> io::Result<()> {
        if held.len() > AFDX_MAX_LINKS || held.iter().any(|h| h.out_ifindex.len() > AFDX_MAX_OUT) {
            return Err(io::Error::other("more links or outputs than the kernel's tables take"));
        }
        // A frame of a VL let go finds slot 0 (none) first; the slots are rewritten after.
        for (id, _) in &self.links.slots {
            let vl_slot = self.obj.map("ef_afdx_vl_slot").map_err(obj_err)?;
            vl_slot.update(&(*id as u32).to_ne_bytes(), &0u32.to_ne_bytes())?;
        }
        // The kernel counts on those slots no more: what it counted since the caller's last
        // harvest is read now, before the counts are zeroed below, so that no frame goes uncounted.
        let last = self.harvest_links();
        self.links.pending.extend(last);
        let vl_slot = self.obj.map("ef_afdx_vl_slot").map_err(obj_err)?;
        let links = self.obj.map("ef_afdx_links").map_err(obj_err)?;
        let outputs = self.obj.map("ef_afdx_outputs").map_err(obj_err)?;
        self.links.slots.clear();
        self.set_config(CFG_AFDX_CONSTANT, table.mac_constant as u64)?;
        self.set_config(CFG_AFDX_NETWORK, table.network as u64)?;
        let now = crate::sys::monotonic_ns();
        let mut homes = std::collections::BTreeMap::new();
        for (slot, h) in held.iter().enumerate() {
            homes.entry(table.links[h.index].account).or_insert(slot as u32);
        }
        // Fanouts before the links that broadcast into them; one no link uses is emptied.
        for f in 0..AFDX_FANOUTS {
            let map = self.obj.map(&format!("ef_afdx_fanout_{f}")).map_err(obj_err)?;
            let outputs = held.iter().find(|h| h.fanout == f + 1).map_or(&[][..], |h| &h.out_ifindex[..]);
            for i in 0..AFDX_MAX_OUT as u32 {
                match outputs.get(i as usize) {
                    Some(ifindex) => map.update(&i.to_ne_bytes(), &ifindex.to_ne_bytes())?,
                    None => {
                        map.delete(&i.to_ne_bytes())?;
                    }
                }
            }
        }
        let counts = self.obj.map("ef_afdx_counts").map_err(obj_err)?;
        let zero = vec![0u8; 8 * AC_MAX * crate::ebpf::possible_cpus()?];
        for (slot, h) in held.iter().enumerate() {
            let l = &table.links[h.index];
            counts.update(&(slot as u32).to_ne_bytes(), &zero)?;
            let home = homes[&l.account];
            let mut v = [0u8; AFDX_LINK_BYTES];
            if home == slot as u32 {
                let a = table.accounts[l.account];
                let cap = a.smax as u64 * (a.bag_ns + a.jitter_ns);
                let credit = credits.get(l.account).map_or(cap, |&c| c.min(cap));
                // The credit min(cap, t·smax − empty) is `credit` now.
                v[0..8].copy_from_slice(&now.wrapping_mul(a.smax as u64).wrapping_sub(credit).to_ne_bytes());
                v[8..16].copy_from_slice(&cap.to_ne_bytes());
                v[16..24].copy_from_slice(&a.bag_ns.to_ne_bytes());
                v[24..28].copy_from_slice(&(a.smax as u32).to_ne_bytes());
                v[28..32].copy_from_slice(&(a.per_frame as u32).to_ne_bytes());
            }
            v[AFDX_LINK_IN_PORT_AT..AFDX_LINK_IN_PORT_AT + 4].copy_from_slice(&l.in_port.to_ne_bytes());
            v[AFDX_LINK_ACCOUNT_AT..AFDX_LINK_ACCOUNT_AT + 4].copy_from_slice(&home.to_ne_bytes());
            v[AFDX_LINK_SMIN_AT..AFDX_LINK_SMIN_AT + 2].copy_from_slice(&l.smin.to_ne_bytes());
            v[AFDX_LINK_SMAX_AT..AFDX_LINK_SMAX_AT + 2].copy_from_slice(&l.smax.to_ne_bytes());
            v[AFDX_LINK_N_OUT_AT..AFDX_LINK_N_OUT_AT + 2].copy_from_slice(&(h.out_ifindex.len() as u16).to_ne_bytes());
            v[AFDX_LINK_FANOUT_AT..AFDX_LINK_FANOUT_AT + 2].copy_from_slice(&(h.fanout as u16).to_ne_bytes());
            let first = h.out_ifindex.first().copied().unwrap_or(0);
            v[AFDX_LINK_OUT_AT..AFDX_LINK_OUT_AT + 4].copy_from_slice(&first.to_ne_bytes());
            v[AFDX_LINK_IP_CHECK_AT] = l.ip_check as u8;
            let mut all = [0u8; 4 * AFDX_MAX_OUT];
            for (i, ifindex) in h.out_ifindex.iter().enumerate() {
                all[4 * i..4 * i + 4].copy_from_slice(&ifindex.to_ne_bytes());
            }
            outputs.update(&(slot as u32).to_ne_bytes(), &all)?;
            links.update(&(slot as u32).to_ne_bytes(), &v)?;
            vl_slot.update(&(l.id as u32).to_ne_bytes(), &(slot as u32 + 1).to_ne_bytes())?;
            self.links.slots.push((l.id, [0; AC_MAX]));
        }
        self.links.homes = homes;
        Ok(())
    }

    /// Takes note of the links a kept fast path's last run left in the kernel, with what each
    /// has counted so far: the first hand-over lets them go as it lets go of its own (its links
    /// may sit at other slots), and counts only what comes after.
    pub(super) fn adopt_links(&mut self) -> io::Result<()> {
        let vl_slot = self.obj.map("ef_afdx_vl_slot").map_err(obj_err)?;
        let counts = self.obj.map("ef_afdx_counts").map_err(obj_err)?;
        let mut held = std::collections::BTreeMap::new();
        for id in 0..AFDX_VL_IDS as u32 {
            let Some(v) = vl_slot.lookup(&id.to_ne_bytes())? else { continue };
            match u32::from_ne_bytes(v[0..4].try_into().unwrap()) {
                0 => {}
                at => {
                    held.insert(at - 1, id as u16);
                }
            }
        }
        let n = held.keys().next_back().map_or(0, |&last| last as usize + 1).min(AFDX_MAX_LINKS);
        self.links.slots = (0..n as u32)
            .map(|slot| {
                let seen = counts.lookup_percpu(&slot.to_ne_bytes()).map_or([0; AC_MAX], |c| sum_over_cpus(&c));
                (held.get(&slot).copied().unwrap_or(0), seen)
            })
            .collect();
        Ok(())
    }

    /// The virtual links the kernel holds now.
    pub fn held_links(&self) -> impl Iterator<Item = u16> + '_ {
        self.links.slots.iter().map(|(id, _)| *id)
    }

    /// The credit each of `accounts` has in the kernel now (bytes × ns), for handing it back.
    pub fn account_credits(&self, accounts: &[usize]) -> io::Result<Vec<(usize, u64)>> {
        let map = self.obj.map("ef_afdx_links").map_err(obj_err)?;
        let now = crate::sys::monotonic_ns();
        let mut out = Vec::new();
        for &i in accounts {
            let Some(&slot) = self.links.homes.get(&i) else { continue };
            let Some(v) = map.lookup(&slot.to_ne_bytes())? else { continue };
            let word = |at: usize| u64::from_ne_bytes(v[at..at + 8].try_into().unwrap());
            let (empty, cap, smax) = (word(0), word(8), u32::from_ne_bytes(v[24..28].try_into().unwrap()) as u64);
            // As the kernel computes it, in wrapping arithmetic.
            out.push((i, now.wrapping_mul(smax).wrapping_sub(empty).min(cap)));
        }
        Ok(out)
    }

    /// Virtual links in the kernel: how many it holds, the frames it decided on them (harvested
    /// so far), and the frames it sent up for userspace to decide (links it does not hold, and
    /// frames that are not of any link).
    pub fn link_counters(&self) -> [(&'static str, u64); 3] {
        let up = self.all_counters()[CNT_AFDX_UP];
        [("held", self.links.slots.len() as u64), ("decided", self.links.frames), ("up", up)]
    }

    /// What the kernel counted on each link it holds since the last call.
    pub fn harvest_links(&mut self) -> Vec<(u16, LinkCounts)> {
        let mut out = std::mem::take(&mut self.links.pending);
        let Ok(map) = self.obj.map("ef_afdx_counts") else { return out };
        let w = &mut self.links;
        for (slot, (id, last)) in w.slots.iter_mut().enumerate() {
            let Ok(per_cpu) = map.lookup_percpu(&(slot as u32).to_ne_bytes()) else { continue };
            let now: [u64; AC_MAX] = sum_over_cpus(&per_cpu);
            let d: [u64; AC_MAX] = std::array::from_fn(|i| now[i].saturating_sub(last[i]));
            *last = now;
            if d[0] == 0 {
                continue;
            }
            w.frames += d[0];
            w.filtered += d[5] + d[6] + d[7] + d[8] + d[10] + d[11] + d[12];
            w.policed += d[9];
            let counts = LinkCounts {
                frames_in: d[0],
                bytes_in: d[1],
                frames_out: d[2],
                bytes_out: d[3],
                wrong_port_bytes: d[4],
                dropped: std::array::from_fn(|i| d[5 + i]),
            };
            out.push((*id, counts));
        }
        out
    }

    /// Frames the kernel dropped for arriving on a port other than their link's, by the port they
    /// came in on, since the last call: (port, frames, bytes with FCS).
    pub fn harvest_wrong_port(&mut self) -> Vec<(u32, u64, u64)> {
        let Ok(map) = self.obj.map("ef_afdx_wrong_port") else { return Vec::new() };
        let mut out = Vec::new();
        for (&tag, &no) in &self.tag_port {
            let Ok(per_cpu) = map.lookup_percpu(&(tag as u32).to_ne_bytes()) else { continue };
            let now: [u64; 2] = sum_over_cpus(&per_cpu);
            let last = self.links.wrong_port.entry(tag).or_default();
            let (frames, bytes) = (now[0].saturating_sub(last[0]), now[1].saturating_sub(last[1]));
            *last = now;
            if frames > 0 {
                out.push((no, frames, bytes));
            }
        }
        out
    }
}
