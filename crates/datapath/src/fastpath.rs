//! (About 1 700 lines, one concern: the userspace side of the kernel's megaflow cache, from encoding
//! an entry to reading its hits back; the kernel tests, the P4 back end, pinning and the grace
//! barrier live in its submodules.)
//!
//! The kernel fast path (`bpf/fastpath.c`): the userspace pipeline's megaflow cache, held in BPF maps
//! so that frames of known flows never leave the kernel.
//!
//! The pipeline stays the one truth. Userspace translates every miss, executes it, and installs
//! the translation here when the kernel program can carry it out exactly (see [`encode`]); anything
//! else simply stays a miss. Every entry here stands for one entry of the pipeline's cache: when
//! the pipeline retires that one (a change it read), this one is deleted with it, its last hits
//! read in the same step; when the pipeline's cache is flushed, so is this one, by bumping a
//! generation number the kernel program checks on every lookup. Hit counters are read back and
//! credited to the OpenFlow flows, tables, groups and ports each entry stands for.
//!
//! A P4 program's object takes the ports' place of the megaflow programs where the mode hands
//! one over (`Programs::P4`, `fastpath/p4.rs`); this file then gives it the ports and the
//! upcall link.
//!
//! About 1 690 lines, one concern: the kernel's half of the cache as userspace sees it — the action
//! encoder, the map layouts (checked in `fastpath/layout.rs`), entry book-keeping (install, retire
//! one by one, flush), meters, counter harvesting, and each port's attachment (found detached,
//! attached again, or detached when the port leaves; how it attaches is `attach.rs`). Tests of the
//! programs themselves are in `fastpath/kernel.rs`; labels, AFDX links, reading the maps back
//! for `dump-flows --kernel` (`fastpath/dump.rs`), keeping it all for the next run
//! (`fastpath/keep.rs`), making room in a full map (`fastpath/room.rs`), where entries go in the
//! kernel's arrays (`fastpath/table.rs`), the grace period a released index waits for
//! (`fastpath/grace.rs`) and XDP's way round
//! ports the kernel cannot redirect to natively (`fastpath/redirect.rs`) have files of their
//! own. The encoder is the next piece to move out (to `fastpath/encode.rs`) if it grows.

pub use forwarding::actions_outputs;
use std::collections::{BTreeMap, HashMap};
use std::io;

use ofp::oxm::Field;
use packet::{FlowKey, KEY_BYTES, KEY_WORDS};
use pipeline::classifier::RuleId;
use pipeline::exec::{Credits, DpAction};
use pipeline::meter::Meter;
use pipeline::Retired;
use tracing::{debug, info, warn};

use crate::attach::{self, Attachment};
use crate::caps;
use crate::ebpf::{Map, Object, Program};
use crate::{netlink, sys};

pub const MAX_MASKS: usize = 16;
const MASK_END: u32 = u32::MAX;
pub const MAX_ACTIONS: usize = 16;
const ACTION_BYTES: usize = 16;
/// `struct entry` (`bpf/fastpath.h`): generation, n_actions, mask slot, the masked key, the
/// actions; where its fields sit.
const ENTRY_N_ACTIONS_AT: usize = 8;
const ENTRY_DECREMENTS_AT: usize = 10;
const ENTRY_MASK_AT: usize = 12;
const ENTRY_KEY_AT: usize = 16;
const ENTRY_ACTIONS_AT: usize = ENTRY_KEY_AT + KEY_BYTES;
const ENTRY_BYTES: usize = ENTRY_ACTIONS_AT + MAX_ACTIONS * ACTION_BYTES;
/// `struct mask_slot`: 16 bytes of header, the mask, `kept` (one byte per key word), the slot
/// shift (a byte), padding to a u64, the hash seed.
const MASK_KEPT_AT: usize = 16 + KEY_BYTES;
const MASK_SHIFT_AT: usize = MASK_KEPT_AT + KEY_WORDS;
const MASK_SEED_AT: usize = MASK_KEPT_AT + 24;
const MASK_SLOT_BYTES: usize = MASK_SEED_AT + 8;
/// `struct flow_hits`: an entry's packets and bytes, per CPU.
const FLOW_HITS_BYTES: usize = 16;
/// How userspace keys its entries: mask slot, padding, key hash.
const ENTRY_ID_BYTES: usize = 16;
/// `HASH_MUL` in `bpf/fastpath.h`.
const HASH_MUL: u64 = 0x9e37_79b9_7f4a_7c15;
const METER_BYTES: usize = 9 * 8;
/// `struct meter`: its four counters (packets, bytes, dropped packets, dropped bytes) from here.
const METER_COUNTS_AT: usize = 40;
/// `struct port_slot`: ifindex at 0, the info word here.
const PORT_SLOT_INFO_AT: usize = 8;
const PORT_SLOT_BYTES: usize = 16;
pub const MAX_METERS: u32 = 1024;
/// The kernel's megaflow map holds this many entries unless told otherwise (`MAX_ENTRIES` in
/// `bpf/fastpath.h`, the size the object is built with).
pub const DEFAULT_ENTRIES: u32 = 16_384;
/// The most a switch may ask for: a million translations, half a gigabyte of kernel memory.
pub const MAX_ENTRIES_LIMIT: u32 = 1 << 20;
/// `PORT_SLOTS` in `bpf/fastpath.h`: the direct-mapped ifindex → port array.
const PORT_SLOTS: u32 = 1024;
/// `XSK_SLOTS` in `bpf/fastpath.h`: the AF_XDP sockets XDP sends up into, by upcall tag.
const XSK_SLOTS: u32 = 4096;
/// `XSK_QUEUES` in `bpf/fastpath.h`: the receive queues of a port XDP sends up from, each into
/// its own socket (slot tag + queue × XSK_SLOTS).
pub const XSK_QUEUES: u32 = 8;

mod op {
    pub const OUTPUT: u8 = 1;
    pub const SET_ETH_DST: u8 = 2;
    pub const SET_ETH_SRC: u8 = 3;
    pub const PUSH_VLAN: u8 = 4;
    pub const POP_VLAN: u8 = 5;
    pub const SET_VLAN_VID: u8 = 6;
    pub const SET_VLAN_PCP: u8 = 7;
    pub const SET_IPV4_SRC: u8 = 8;
    pub const SET_IPV4_DST: u8 = 9;
    pub const SET_TP_SRC: u8 = 10;
    pub const SET_TP_DST: u8 = 11;
    pub const SET_DSCP: u8 = 12;
    pub const DEC_TTL: u8 = 13;
    pub const METER: u8 = 14;
}

const CFG_GENERATION: u32 = 0;
/// `enum ef_counter` slots (`bpf/fastpath.h`) read here besides hit, miss, upcall and slow.
const CNT_DROP: usize = 4;
const CNT_NO_UPCALL: usize = 5;
const CNT_ACTION_FAILED: usize = 6;
/// The first of the LESS counters (shifted, popped, delivered, pushed, rerouted).
const CNT_LESS_SHIFTED: usize = 8;
const CNT_MAX: usize = 16;
const CFG_UPCALL_IFINDEX: u32 = 1;
const CFG_LESS_MAX_LABELS: u32 = 2;
const CFG_AFDX_CONSTANT: u32 = 3;
const CFG_AFDX_NETWORK: u32 = 4;
const CFG_HASH_SEED: u32 = 5;
/// XDP: the fallback link's ifindex (`fastpath/redirect.rs`).
const CFG_XDP_FALLBACK_IFINDEX: u32 = 6;
/// 64 less the bits of `ef_flow_slots`' size (`fastpath/table.rs`).
const CFG_FLOW_SLOT_SHIFT: u32 = 7;
/// XDP frames sent to their port through the fallback link and TC.
const CNT_XDP_FALLBACK: usize = 15;
/// An output action's a8: XDP sends it through the fallback link and TC, not natively.
const OUT_VIA_TC: u8 = 1;
/// AFDX frames of no link the kernel holds, sent up.
const CNT_AFDX_UP: usize = 13;
/// LESS frames dropped at a down port with no reroute budget left.
const CNT_LESS_SPENT: usize = 14;
/// How often XDP ports are asked again whether they take native redirects (a host may turn its
/// GRO off, or detach its XDP program, at any time).
const REDIRECT_CHECK_NS: u64 = 1_000_000_000;
/// The upcall link's MTU: a veth's largest.
const UPCALL_MTU: u32 = 65535;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// TC (TCX) at each port's ingress: keeps GSO, so TCP runs at full speed.
    Tc,
    /// XDP at each port: no socket buffers at all, fastest for small frames; one output per flow.
    Xdp,
}

/// What the programs attached to the ports decide from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Programs {
    /// The megaflow cache (and LESS label switching): `ef_tc_ingress`, `ef_xdp`.
    Flows,
    /// AFDX virtual links (`bpf/fp_afdx.h`): `ef_tc_afdx`, `ef_xdp_afdx`.
    Links,
    /// A P4 program (`fastpath/p4.rs`): `p4_tc`, `p4_xdp` of the object generated for it.
    P4,
}

impl Programs {
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Programs::Flows => ("ef_tc_ingress", "ef_xdp"),
            Programs::Links => ("ef_tc_afdx", "ef_xdp_afdx"),
            Programs::P4 => ("p4_tc", "p4_xdp"),
        }
    }
}

impl Mode {
    /// As `datapath = "..."` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Tc => "tc",
            Mode::Xdp => "xdp",
        }
    }
}

/// The datapath a switch runs, as `datapath = "..."` spells it: `user` without a fast path.
pub fn datapath_name(fast: Option<Mode>) -> &'static str {
    fast.map_or("user", Mode::name)
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "tc" => Ok(Mode::Tc),
            "xdp" => Ok(Mode::Xdp),
            _ => Err(format!("'{s}': expected tc or xdp")),
        }
    }
}

/// One BPF action, as `struct action` in `bpf/fastpath.h`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BpfAction {
    pub op: u8,
    pub a8: u8,
    pub a16: u16,
    pub a32: u32,
    pub mac: [u8; 6],
}

impl BpfAction {
    fn bytes(&self) -> [u8; ACTION_BYTES] {
        let mut b = [0u8; ACTION_BYTES];
        b[0] = self.op;
        b[1] = self.a8;
        b[2..4].copy_from_slice(&self.a16.to_ne_bytes());
        b[4..8].copy_from_slice(&self.a32.to_ne_bytes());
        b[8..14].copy_from_slice(&self.mac);
        b
    }
}

/// What the encoder needs from the switch.
pub struct EncodeContext<'a> {
    pub mode: Mode,
    /// OpenFlow port → ifindex.
    pub ifindex: &'a dyn Fn(u32) -> Option<u32>,
    /// Meter id → kernel meter slot, for meters that only drop.
    pub meter_slot: &'a mut dyn FnMut(u32) -> Option<u32>,
    /// The ip_proto the translated packet carried (transport rewrites need to know which checksum).
    pub ip_proto: u8,
}

/// Removes header pushes that are popped again before anything leaves (Faucet tags every frame on
/// ingress and untags it on egress to an untagged port): the kernel then does neither.
pub fn simplify(actions: &[DpAction]) -> Vec<DpAction> {
    let mut out: Vec<DpAction> = Vec::with_capacity(actions.len());
    for a in actions {
        if *a == DpAction::PopVlan {
            // Find the last push not followed by anything but VLAN set-fields.
            let mut i = out.len();
            let mut cancel = None;
            while i > 0 {
                i -= 1;
                match &out[i] {
                    DpAction::PushVlan(_) => {
                        cancel = Some(i);
                        break;
                    }
                    DpAction::SetField(Field::VlanVid | Field::VlanPcp, _) => continue,
                    _ => break,
                }
            }
            if let Some(at) = cancel {
                out.truncate(at);
                continue;
            }
        }
        out.push(a.clone());
    }
    out
}

/// Encodes translated actions for the kernel, or `None` if it cannot do them exactly.
pub fn encode(actions: &[DpAction], cx: &mut EncodeContext<'_>) -> Option<Vec<BpfAction>> {
    let mut out = Vec::new();
    let mut flat = Vec::new();
    for a in simplify(actions) {
        match a {
            // A bucket that only outputs is the same as outputting in place.
            DpAction::Clone(inner) if inner.iter().all(|x| matches!(x, DpAction::Output(_))) => flat.extend(inner),
            DpAction::Clone(_) => return None,
            other => flat.push(other),
        }
    }
    for a in &flat {
        let b = match a {
            DpAction::Output(port) => BpfAction { op: op::OUTPUT, a32: (cx.ifindex)(*port)?, ..Default::default() },
            DpAction::SetField(field, value) => {
                let v = *value;
                let mac = || {
                    let b = v.to_be_bytes();
                    let mut m = [0u8; 6];
                    m.copy_from_slice(&b[10..16]);
                    m
                };
                match field {
                    Field::EthDst => BpfAction { op: op::SET_ETH_DST, mac: mac(), ..Default::default() },
                    Field::EthSrc => BpfAction { op: op::SET_ETH_SRC, mac: mac(), ..Default::default() },
                    Field::VlanVid => BpfAction { op: op::SET_VLAN_VID, a16: v as u16 & 0x0fff, ..Default::default() },
                    Field::VlanPcp => BpfAction { op: op::SET_VLAN_PCP, a8: v as u8 & 7, ..Default::default() },
                    Field::Ipv4Src | Field::Ipv4Dst => BpfAction {
                        op: if *field == Field::Ipv4Src { op::SET_IPV4_SRC } else { op::SET_IPV4_DST },
                        a32: u32::from_ne_bytes((v as u32).to_be_bytes()),
                        ..Default::default()
                    },
                    Field::TcpSrc | Field::UdpSrc | Field::TcpDst | Field::UdpDst => {
                        if cx.ip_proto != 6 && cx.ip_proto != 17 {
                            return None;
                        }
                        let src = matches!(field, Field::TcpSrc | Field::UdpSrc);
                        BpfAction {
                            op: if src { op::SET_TP_SRC } else { op::SET_TP_DST },
                            a16: v as u16,
                            ..Default::default()
                        }
                    }
                    Field::IpDscp => BpfAction { op: op::SET_DSCP, a8: v as u8, ..Default::default() },
                    _ => return None,
                }
            }
            DpAction::PushVlan(tpid) => BpfAction { op: op::PUSH_VLAN, a16: *tpid, ..Default::default() },
            DpAction::PopVlan => BpfAction { op: op::POP_VLAN, ..Default::default() },
            DpAction::DecNwTtl(_) => BpfAction { op: op::DEC_TTL, ..Default::default() },
            DpAction::Meter(id) => BpfAction { op: op::METER, a32: (cx.meter_slot)(*id)?, ..Default::default() },
            DpAction::SetQueue(_) => continue,
            _ => return None,
        };
        out.push(b);
    }
    if out.len() > MAX_ACTIONS {
        return None;
    }
    if cx.mode == Mode::Xdp {
        // XDP sends a frame out once: exactly one output, at the end, or none (a drop).
        let outputs = out.iter().filter(|a| a.op == op::OUTPUT).count();
        if outputs > 1 || (outputs == 1 && out.last().map(|a| a.op) != Some(op::OUTPUT)) {
            return None;
        }
    }
    Some(out)
}

struct Installed {
    /// The pipeline's cache entry this one copies.
    source: RuleId,
    /// Where the kernel holds it: its index in `ef_megaflows` (and `ef_flow_hits`), and the slot of
    /// `ef_flow_slots` that leads there.
    index: u32,
    slot: u32,
    /// The masked key: two keys with one hash under one mask cannot both be in the kernel.
    key: FlowKey,
    credits: Credits,
    in_port: u32,
    /// (port, egress queue) of every copy a hit sends.
    outputs: Vec<(u32, u8)>,
    packets: u64,
    bytes: u64,
    generation: u64,
    /// When a harvest last found it hit (or it went in): the longest idle go first when the map
    /// is full (`room.rs`).
    last_hit: u64,
    /// XDP: its output goes through the fallback link and TC (`fastpath/redirect.rs`).
    via_tc: bool,
}

/// Per-port packet and byte counts the fast path added since the last harvest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortDelta {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
}

/// Growth since the last harvest: what the OpenFlow counters must add.
#[derive(Default)]
pub struct Harvest {
    /// (the pipeline's cache entry, its credits, packets, bytes) per entry that saw hits.
    pub flows: Vec<(RuleId, Credits, u64, u64)>,
    pub ports: BTreeMap<u32, PortDelta>,
    /// (port, egress queue) → (packets, bytes) sent.
    pub queues: BTreeMap<(u32, u8), (u64, u64)>,
    /// Meter id → (packets, bytes, dropped packets, dropped bytes).
    pub meters: BTreeMap<u32, (u64, u64, u64, u64)>,
    /// XDP: port → frames sent to it through the fallback link and TC.
    pub via_tc: BTreeMap<u32, u64>,
}

pub struct FastPath {
    pub mode: Mode,
    obj: Object,
    generation: u64,
    masks: Vec<Option<FlowKey>>,
    /// Recent hits per mask slot (halved at every harvest), and the order the kernel tries the
    /// slots in, as last written to `ef_mask_order`.
    mask_hits: [u64; MAX_MASKS],
    mask_order: Vec<u32>,
    /// By (mask slot, key hash), as `entry_id` writes it.
    entries: HashMap<Vec<u8>, Installed>,
    /// The kernel's slots and entry indices (`fastpath/table.rs`).
    table: table::FlowTable,
    /// The most translations the kernel holds (`fastpath_entries`).
    capacity: u32,
    /// Waits out the grace periods released indices need before they are reused
    /// (`fastpath/grace.rs`); made when the first index is released.
    grace: Option<grace::GraceBarrier>,
    /// The pipeline's cache entry → the key of its copy here (current generation only).
    by_source: HashMap<RuleId, Vec<u8>>,
    /// Entries of the current generation under each mask slot: a slot no entry uses is freed.
    mask_users: [u32; MAX_MASKS],
    meters: BTreeMap<u32, (u32, [u64; 4])>,
    /// Each port's attachment, by OpenFlow port number.
    attached: BTreeMap<u32, Attached>,
    /// The slots of `ef_port_slots` in use, and the interface each holds.
    port_slots: BTreeMap<u32, u32>,
    /// Programs attached again after they were found detached (behind the switch's back, or
    /// their interface went away and came back).
    pub reattached: u64,
    /// Upcall tag (the VLAN id a missed frame carries up in TC mode) → OpenFlow port.
    pub tag_port: BTreeMap<u16, u32>,
    /// The interface misses arrive on (TC mode): the name of our end, and of its peer.
    pub upcall: Option<(String, String)>,
    pub installed: u64,
    pub refused: u64,
    /// Of those refused, translations whose slots were all taken (`FLOW_PROBES` from their home
    /// slot): they stay in userspace, offered again after the next harvest.
    pub crowded: u64,
    /// Entries moved to another slot of their window to give theirs to a key whose window was
    /// full.
    pub moved: u64,
    /// Entries deleted one by one because the pipeline retired theirs.
    pub retired: u64,
    /// Entries deleted, idle, to make room for new ones; translations installed on a later offer
    /// after the kernel had no room for them.
    pub evicted: u64,
    pub retried: u64,
    /// Why the pipeline's entries the kernel does not hold were refused (`room.rs`).
    refusals: HashMap<RuleId, room::Refusal>,
    /// The time of the last harvest: the fast path's clock.
    clock: u64,
    /// The harvest at which a full map last looked for room (it looks once per harvest).
    room_sought_at: Option<u64>,
    /// What evicted entries counted since the last harvest, for the next one.
    carried: Harvest,
    /// Seeds the hash that keys entries, so that nobody outside can make two keys collide (the
    /// second would be kept out of the kernel).
    hash_seed: u64,
    /// Hits on entries that send nowhere: frames the kernel dropped as the mode decided.
    no_output_drops: u64,
    /// What the label maps hold, so that a change writes only what moved.
    labels: labels::Written,
    /// The AFDX links the kernel holds.
    links: links::Written,
    programs: Programs,
    /// The P4 program whose programs the ports run (`Programs::P4`).
    p4: Option<p4::P4Kernel>,
    /// Where this switch keeps its kernel state for the next run (`keep_fastpath`), if it does.
    kept: Option<keep::Kept>,
    /// What the last run left forwarding in the kernel, until released.
    inherited: Option<keep::Inherited>,
    /// XDP: the link frames for ports without native redirect go by (`fastpath/redirect.rs`),
    /// made when the first such port is found.
    xdp_fallback_link: Option<redirect::FallbackLink>,
    /// Whether this fast path may make one: not where it keeps its kernel state for the next run,
    /// which would find the link gone.
    fallback_allowed: bool,
    /// XDP: the ports sent to through it, by OpenFlow port number.
    via_tc: BTreeMap<u32, redirect::FallbackPort>,
    /// When the ports' redirect state was last read (the fast path's clock).
    redirects_checked_at: u64,
    /// Before Linux 6.3: each XDP port's (ifindex, transmit drops) at the last look.
    tx_dropped_seen: BTreeMap<u32, (u32, u64)>,
}

/// The programs on one port's interface, attached while this lives.
struct Attached {
    name: String,
    ifindex: u32,
    tag: u16,
    link: Attachment,
    /// The XDP program bound to this device (see `attach_xdp`), if binding worked.
    _bound: Option<Program>,
}

fn megaflows(obj: &Object) -> &Map {
    obj.map("ef_megaflows").expect("the fast path object has ef_megaflows")
}

/// The kernel's megaflow maps, sized for `entries` translations (`fastpath/table.rs`).
fn flow_map_sizes(entries: u32) -> [(&'static str, u32); 3] {
    let indices = table::index_count(entries);
    [("ef_megaflows", indices), ("ef_flow_hits", indices), ("ef_flow_slots", table::slot_count(entries))]
}

/// How userspace keys an entry: its mask slot and key hash.
fn entry_id(slot: usize, hash: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(ENTRY_ID_BYTES);
    k.extend_from_slice(&(slot as u32).to_ne_bytes());
    k.extend_from_slice(&[0; 4]);
    k.extend_from_slice(&hash.to_ne_bytes());
    k
}

fn obj_err(e: io::Error) -> io::Error {
    let e = crate::privilege_hint(e, &[caps::BPF, caps::PERFMON, caps::NET_ADMIN]);
    io::Error::new(e.kind(), format!("fast path: {e}"))
}

impl FastPath {
    /// Loads the programs, with room for `entries` translations, and attaches those `programs`
    /// names to `ports` (OpenFlow number, interface name).
    pub fn open(mode: Mode, ports: &[(u32, String)], programs: Programs, entries: u32) -> io::Result<FastPath> {
        let mut fp = FastPath::load(mode, programs, entries)?;
        fp.attach_ports(ports)?;
        Ok(fp)
    }

    /// Loads the programs, with room for `entries` translations: those `programs` names must
    /// load, the others may be refused by an older kernel (the AFDX programs take a
    /// compare-and-exchange, Linux 5.12).
    pub fn load(mode: Mode, programs: Programs, entries: u32) -> io::Result<FastPath> {
        let obj = FastPath::load_object(programs, entries, None)?;
        let mut fp = FastPath::with_object(mode, programs, obj, entries);
        let ours = format!("ef-up{}", std::process::id() % 10_000_000);
        let peer = format!("{ours}p");
        fp.start_fresh(Some((ours, peer)))?;
        // The megaflow program has the way round a port without native redirect; AFDX's does not.
        fp.fallback_allowed = programs == Programs::Flows;
        Ok(fp)
    }

    /// The fast path running a P4 program's kernel object on the ports: the fast path's own
    /// object gives the ports and the upcall link their bookkeeping (and holds nothing more).
    pub fn load_p4(mode: Mode, program: p4::P4Kernel) -> io::Result<FastPath> {
        let obj = FastPath::load_object(Programs::P4, 1, None)?;
        let mut fp = FastPath::with_object(mode, Programs::P4, obj, 1);
        fp.p4 = Some(program);
        let ours = format!("ef-up{}", std::process::id() % 10_000_000);
        let peer = format!("{ours}p");
        fp.start_fresh(Some((ours, peer)))?;
        Ok(fp)
    }

    /// The P4 program in the kernel, if the ports run one.
    pub fn p4(&mut self) -> Option<&mut p4::P4Kernel> {
        self.p4.as_mut()
    }

    pub fn p4_program(&self) -> Option<&p4::P4Kernel> {
        self.p4.as_ref()
    }

    /// The object whose programs the ports run.
    fn programs_obj(&self) -> &Object {
        self.p4.as_ref().map_or(&self.obj, |p| p.object())
    }

    /// The object, with its maps pinned in `pins` if given (see [`Object::load_pinned`]).
    fn load_object(programs: Programs, entries: u32, pins: Option<&std::path::Path>) -> io::Result<Object> {
        let (flows, links) = (Programs::Flows.names(), Programs::Links.names());
        let optional = match programs {
            Programs::Flows => vec![links.0, links.1],
            Programs::Links => vec![flows.0, flows.1],
            Programs::P4 => vec![flows.0, flows.1, links.0, links.1],
        };
        let sizes = flow_map_sizes(entries);
        let obj = match pins {
            None => Object::load_with(crate::bpf_objects::FASTPATH, &sizes, &optional),
            Some(dir) => Object::load_pinned(crate::bpf_objects::FASTPATH, &sizes, &optional, dir),
        }
        .map_err(obj_err)?;
        for (name, why) in &obj.refused {
            info!(program = %name, "this kernel refuses a fast-path program this switch does not use: {why}");
        }
        Ok(obj)
    }

    fn with_object(mode: Mode, programs: Programs, obj: Object, entries: u32) -> FastPath {
        FastPath {
            mode,
            obj,
            generation: 1,
            masks: vec![None; MAX_MASKS],
            mask_hits: [0; MAX_MASKS],
            mask_order: Vec::new(),
            entries: HashMap::new(),
            table: table::FlowTable::new(entries),
            capacity: entries,
            grace: None,
            by_source: HashMap::new(),
            mask_users: [0; MAX_MASKS],
            meters: BTreeMap::new(),
            attached: BTreeMap::new(),
            port_slots: BTreeMap::new(),
            reattached: 0,
            tag_port: BTreeMap::new(),
            upcall: None,
            installed: 0,
            refused: 0,
            crowded: 0,
            moved: 0,
            retired: 0,
            evicted: 0,
            retried: 0,
            refusals: HashMap::new(),
            clock: 0,
            room_sought_at: None,
            carried: Harvest::default(),
            hash_seed: 0,
            no_output_drops: 0,
            labels: labels::Written::default(),
            links: links::Written::default(),
            programs,
            p4: None,
            kept: None,
            inherited: None,
            xdp_fallback_link: None,
            fallback_allowed: false,
            via_tc: BTreeMap::new(),
            redirects_checked_at: 0,
            tx_dropped_seen: BTreeMap::new(),
        }
    }

    /// Empty maps' first contents, and in TC mode the upcall interface (`names`: ours, peer).
    fn start_fresh(&mut self, names: Option<(String, String)>) -> io::Result<()> {
        self.set_config(CFG_GENERATION, self.generation)?;
        self.hash_seed =
            std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), self.generation);
        self.set_config(CFG_HASH_SEED, self.hash_seed)?;
        self.set_config(CFG_FLOW_SLOT_SHIFT, self.table.slot_shift())?;
        self.obj.map("ef_mask_order").map_err(obj_err)?.update(&0u32.to_ne_bytes(), &mask_order_value(&[]))?;
        if let (Mode::Tc, Some((ours, peer))) = (self.mode, names) {
            sys::create_veth(&ours, &peer)?;
            for name in [&ours, &peer] {
                // A miss may be longer than any port's MTU allows on the wire (a frame a switch
                // port with a larger MTU received): the upcall link must not refuse it.
                sys::set_if_mtu(name, UPCALL_MTU)?;
                sys::set_if_up(name, true)?;
            }
            let upcall = sys::ifindex(&ours)?;
            self.set_config(CFG_UPCALL_IFINDEX, upcall as u64)?;
            if let Some(p4) = &self.p4 {
                p4.set_upcall(upcall)?;
            }
            self.upcall = Some((ours, peer));
        }
        Ok(())
    }

    /// Attaches the programs to every port (OpenFlow number, interface name).
    pub fn attach_ports(&mut self, ports: &[(u32, String)]) -> io::Result<()> {
        for (i, (no, name)) in ports.iter().enumerate() {
            self.attach_port(*no, name, (i + 1) as u16)?;
        }
        if let Some(kept) = self.kept.as_mut() {
            // Taken over or not, what the last run left is this run's now.
            kept.found.clear();
        }
        info!(mode = ?self.mode, programs = ?self.programs, ports = ports.len(), "kernel fast path attached");
        Ok(())
    }

    /// Attaches the programs to port `no`'s interface `name`, whose misses go up tagged `tag`;
    /// again, with what was there before let go, when the interface came back or the
    /// attachment was removed behind the switch's back.
    pub fn attach_port(&mut self, no: u32, name: &str, tag: u16) -> io::Result<()> {
        let failed = |e: io::Error| io::Error::new(e.kind(), format!("fast path on {name}: {e}"));
        let ifindex = sys::ifindex(name).map_err(failed)?;
        if let Some(old) = self.attached.remove(&no) {
            self.forget_interface(old.ifindex);
            if let Some(kept) = &self.kept {
                let _ = std::fs::remove_file(keep::link_path(&kept.dir, old.ifindex));
            }
        }
        self.register_port(no, ifindex, tag)?;
        let (link, bound) = match self.take_over(no, name, ifindex) {
            Some(taken) => taken,
            None => {
                let (link, bound) = match self.mode {
                    Mode::Tc => {
                        let program = self.programs_obj().program(self.programs.names().0).map_err(obj_err)?;
                        attach::tc(program, ifindex, attach::TcSlot::FastPath).map(|a| (a, None))
                    }
                    Mode::Xdp => self.attach_xdp(name, ifindex),
                }
                .map_err(failed)?;
                if let Some(kept) = &self.kept {
                    let path = keep::link_path(&kept.dir, ifindex);
                    let _ = std::fs::remove_file(&path);
                    link.pin(&path).map_err(failed)?;
                }
                (link, bound)
            }
        };
        self.attached.insert(no, Attached { name: name.to_string(), ifindex, tag, link, _bound: bound });
        self.write_kept_record();
        self.check_redirect(no);
        Ok(())
    }

    /// Port `no`'s programs swapped into the link the last run left on its interface, in one step
    /// (no frame meets neither); None where there is none to take over, or the swap failed (the
    /// caller then attaches anew).
    fn take_over(&mut self, no: u32, name: &str, ifindex: u32) -> Option<(Attachment, Option<Program>)> {
        let (link, kind) = self.kept_link(no, ifindex)?;
        let (tc, xdp) = self.programs.names();
        let bound = match self.mode {
            Mode::Xdp if self.programs_obj().missing_kfuncs.is_empty() => {
                self.programs_obj().load_dev_bound(xdp, ifindex).ok()
            }
            _ => None,
        };
        let shared = self.programs_obj().program(if self.mode == Mode::Tc { tc } else { xdp }).ok()?;
        match link.update(bound.as_ref().unwrap_or(shared)) {
            Ok(()) => {
                debug!(port = name, kind, "kept link taken over");
                Some((Attachment::from_link(link, kind), bound))
            }
            Err(e) => {
                warn!(port = name, "the link the last run left could not take this run's program ({e}): attached anew");
                None
            }
        }
    }

    /// Port `no` leaves the switch: its programs are detached and what they knew of it
    /// forgotten. Entries that send to it must go too: the caller flushes.
    pub fn detach_port(&mut self, no: u32) {
        self.via_tc.remove(&no);
        self.tx_dropped_seen.remove(&no);
        if let Some(old) = self.attached.remove(&no) {
            self.forget_interface(old.ifindex);
            self.tag_port.retain(|_, p| *p != no);
            if let Ok(sockets) = self.obj.map("ef_xsks") {
                for queue in 0..XSK_QUEUES {
                    let _ = sockets.delete(&(old.tag as u32 + queue * XSK_SLOTS).to_ne_bytes());
                }
            }
            if let Some(kept) = &self.kept {
                // Unpinned, the link goes with the attachment.
                let _ = std::fs::remove_file(keep::link_path(&kept.dir, old.ifindex));
            }
            self.write_kept_record();
        }
    }

    /// XDP: what port `no`'s program sends up (misses, and every frame it leaves to userspace)
    /// from receive queue `queue` goes into AF_XDP socket `fd`, bound to that queue of the port's
    /// interface, instead of to the stack. The kernel drops the entry when the socket closes.
    /// Refused under TC (AF_XDP takes frames from XDP only), for a P4 program's object (its way
    /// up is the stack) and for a queue past XSK_QUEUES.
    pub fn register_socket(&self, no: u32, queue: u32, fd: std::os::fd::RawFd) -> io::Result<()> {
        let refuse = |why: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, format!("fast path: {why}")));
        if self.mode != Mode::Xdp {
            return refuse("AF_XDP sockets take frames from the XDP fast path only");
        }
        if self.p4.is_some() {
            return refuse("a P4 program in the kernel sends its frames up to the stack, not to AF_XDP sockets");
        }
        let Some(tag) = self.attached.get(&no).map(|a| a.tag as u32) else {
            return refuse(&format!("port {no} is not attached"));
        };
        if tag >= XSK_SLOTS {
            return refuse(&format!("port {no}'s upcall tag {tag} is past the {XSK_SLOTS} AF_XDP slots"));
        }
        if queue >= XSK_QUEUES {
            let why = format!("port {no}'s receive queue {queue} is past the {XSK_QUEUES} the kernel sends up from");
            return refuse(&why);
        }
        let slot = tag + queue * XSK_SLOTS;
        self.obj.map("ef_xsks").map_err(obj_err)?.update(&slot.to_ne_bytes(), &(fd as u32).to_ne_bytes())
    }

    /// Whether port `no`'s XDP program runs in the driver (native) rather than on sk_buffs.
    pub fn xdp_native(&self, no: u32) -> Option<bool> {
        self.attached.get(&no).map(|a| a.link.kind.contains("native"))
    }

    /// The upcall tag for a port added while the switch runs: one no port has.
    pub fn free_tag(&self) -> u16 {
        (1..=u16::MAX).find(|t| !self.tag_port.contains_key(t)).unwrap_or(u16::MAX)
    }

    /// Ports whose programs are attached no more: removed behind the switch's back, or their
    /// interface went away.
    pub fn detached_ports(&self) -> Vec<u32> {
        self.attached.iter().filter(|(_, a)| a.link.detached()).map(|(&no, _)| no).collect()
    }

    /// Attaches port `no`'s programs again, to its interface as it now is; counted.
    pub fn reattach(&mut self, no: u32) -> io::Result<()> {
        let Some(a) = self.attached.get(&no) else { return Ok(()) };
        let (name, tag) = (a.name.clone(), a.tag);
        self.attach_port(no, &name, tag)?;
        self.reattached += 1;
        Ok(())
    }

    /// Each port's attachment: how it is attached, and the kernel's id of its link if a link.
    pub fn attachments(&self) -> Vec<(u32, &'static str, Option<u32>)> {
        self.attached.iter().map(|(&no, a)| (no, a.link.kind, a.link.link_id())).collect()
    }

    /// Drops what the programs know of an interface that is gone (its index may come back as
    /// another interface's).
    fn forget_interface(&mut self, ifindex: u32) {
        if let Ok(ports) = self.obj.map("ef_ports") {
            let _ = ports.delete(&ifindex.to_ne_bytes());
        }
        if let Some(p4) = &self.p4 {
            p4.forget_interface(ifindex);
        }
        let at = ifindex % PORT_SLOTS;
        if self.port_slots.get(&at) == Some(&ifindex) {
            self.port_slots.remove(&at);
            if let Ok(slots) = self.obj.map("ef_port_slots") {
                let _ = slots.update(&at.to_ne_bytes(), &[0u8; PORT_SLOT_BYTES]);
            }
        }
    }

    /// XDP on one port. The program is bound to the device so that it can ask the driver for a
    /// VLAN tag already taken out of the frame (veth does this for tags the sender's stack put in
    /// metadata); a frame with such a tag would otherwise look untagged and match the wrong
    /// entry. Where binding fails, the shared program runs and such frames cannot be told apart.
    fn attach_xdp(&mut self, name: &str, ifindex: u32) -> io::Result<(Attachment, Option<Program>)> {
        let program = self.programs.names().1;
        let obj = self.programs_obj();
        if obj.missing_kfuncs.is_empty() {
            match obj.load_dev_bound(program, ifindex).and_then(|p| attach::xdp(&p, ifindex).map(|l| (p, l))) {
                Ok((prog, link)) => return Ok((link, Some(prog))),
                Err(e) => warn!(
                    port = name,
                    "XDP program bound to the device failed ({e}); VLAN tags in receive metadata go unseen"
                ),
            }
        } else {
            warn!(missing = ?obj.missing_kfuncs, "kernel lacks XDP metadata kfuncs (Linux < 6.8): VLAN tags in receive metadata go unseen");
        }
        Ok((attach::xdp(obj.program(program).map_err(obj_err)?, ifindex)?, None))
    }

    fn set_config(&self, which: u32, v: u64) -> io::Result<()> {
        self.obj.map("ef_config").map_err(obj_err)?.update(&which.to_ne_bytes(), &v.to_ne_bytes())
    }

    fn megaflows(&self) -> &Map {
        megaflows(&self.obj)
    }

    /// An index for a new entry (`table.rs`): indices released since the last barrier was asked
    /// for ask for the next one first, so that they are free once it has passed.
    fn take_index(&mut self) -> Option<u32> {
        self.ask_grace_period();
        let passed = self.grace.as_ref().map_or(0, |g| g.passed());
        self.table.take_index(passed)
    }

    /// Asks for a grace period for the indices released since the last one was asked for, if any
    /// (one for all of them). Without a barrier they stay in quarantine: entries may be refused,
    /// none matched wrongly.
    fn ask_grace_period(&mut self) {
        if !self.table.wants_grace_period() {
            return;
        }
        if self.grace.is_none() {
            match grace::GraceBarrier::new() {
                Ok(g) => self.grace = Some(g),
                Err(e) => {
                    warn!("fast path: no grace-period barrier ({e}); released entry indices are not reused");
                    return;
                }
            }
        }
        if let Some(g) = &self.grace {
            self.table.grace_period_asked(g.ask());
        }
    }

    /// Writes one slot of `ef_flow_slots`. Should it fail, a lookup misses (or finds an entry
    /// that still confirms itself): nothing can match wrongly.
    fn write_slot(&self, slot: u32, value: u64) {
        let written = self.obj.map("ef_flow_slots").and_then(|m| m.update(&slot.to_ne_bytes(), &value.to_ne_bytes()));
        if let Err(e) = written {
            warn!("fast path slot {slot}: {e}");
        }
    }

    /// The slot a new entry hashing to `hash` may take; when every one of its window is taken and
    /// some are held by entries of an older generation, those are let go of first, and then an
    /// entry of the window whose own window reaches further moves there, to give up its slot.
    fn free_slot(&mut self, hash: u64) -> Option<u32> {
        if let Some(s) = self.table.free_slot(hash) {
            return Some(s);
        }
        if self.entries.values().any(|i| i.generation != self.generation) {
            self.sweep();
        }
        self.table.free_slot(hash).or_else(|| self.make_room(hash))
    }

    /// Frees a slot of `hash`'s full window by moving one of its entries to a free slot of that
    /// entry's own window, which reaches past this one. (Linear probing a quarter full is not
    /// enough alone: filling 15 000 entries into 65 536 slots left 3 keys in userspace in about
    /// one run of 25.) The entry is pointed at from its new slot first, so a frame finds it at
    /// one or the other throughout; its index does not change, so no grace period is needed. The
    /// caller points the freed slot at its own entry. Entries of the last run (kept) stay put.
    fn make_room(&mut self, hash: u64) -> Option<u32> {
        let (from, to, index, owner) = self.entries.iter().find_map(|(k, e)| {
            let owner_hash = u64::from_ne_bytes(k[8..16].try_into().unwrap());
            if !self.table.in_window(hash, e.slot) {
                return None;
            }
            let to = self.table.move_to(owner_hash, e.slot)?;
            Some((e.slot, to, e.index, (k.clone(), owner_hash)))
        })?;
        let value = self.table.point(to, owner.1, index);
        self.write_slot(to, value);
        self.entries.get_mut(&owner.0).expect("found above").slot = to;
        self.moved += 1;
        Some(from)
    }

    /// Takes entry `k` out of the kernel: its slot leads nowhere, and a live one's generation is
    /// cleared, so that a frame that read the slot just before finds nothing either; its index
    /// waits out its quarantine. Returns a live one's hit counters, read after (the caller
    /// credits their growth).
    fn take_out(&mut self, k: &[u8]) -> Option<(u64, u64)> {
        let (slot, index, live) = self.entries.get(k).map(|i| (i.slot, i.index, i.generation == self.generation))?;
        for (s, v) in self.table.release_slot(slot) {
            self.write_slot(s, v);
        }
        let counts = live.then(|| {
            kill_entry(&self.obj, index);
            let counts = read_hits(&self.obj, index);
            self.table.saw(index, counts);
            counts
        });
        self.table.cool(index);
        counts
    }

    /// Runs the flow program at `hook` once on `frame` as if it arrived on interface `ifindex`
    /// (BPF_PROG_TEST_RUN): nothing is sent; the verdict and the frame as the program left it
    /// come back. How the kernel tests and the differential fuzzer hold it to userspace.
    pub fn run_once(&self, hook: Mode, frame: &[u8], ifindex: u32) -> io::Result<(u32, Vec<u8>)> {
        let (tc, xdp) = self.programs.names();
        match hook {
            Mode::Xdp => {
                let ctx = crate::ebpf::xdp_md(frame.len() as u32, ifindex);
                self.programs_obj().program(xdp).map_err(obj_err)?.run_once(frame, &ctx)
            }
            Mode::Tc => {
                self.programs_obj().program(tc).map_err(obj_err)?.run_once(frame, &crate::ebpf::sk_buff(ifindex, 0))
            }
        }
    }

    /// Tells the programs that `ifindex` is switch port `no`, whose misses go up tagged `tag`
    /// (without attaching anything: `attach_port` does both; tests register alone).
    pub fn register_port(&mut self, no: u32, ifindex: u32, tag: u16) -> io::Result<()> {
        let info = ((no as u64) << 16) | tag as u64;
        self.obj.map("ef_ports").map_err(obj_err)?.update(&ifindex.to_ne_bytes(), &info.to_ne_bytes())?;
        if let Some(p4) = self.p4.as_mut() {
            p4.register_port(no, ifindex, tag)?;
        }
        let at = ifindex % PORT_SLOTS;
        if *self.port_slots.entry(at).or_insert(ifindex) == ifindex {
            let mut v = [0u8; PORT_SLOT_BYTES];
            v[0..4].copy_from_slice(&ifindex.to_ne_bytes());
            v[PORT_SLOT_INFO_AT..PORT_SLOT_INFO_AT + 8].copy_from_slice(&info.to_ne_bytes());
            self.obj.map("ef_port_slots").map_err(obj_err)?.update(&at.to_ne_bytes(), &v)?;
        }
        self.tag_port.insert(tag, no);
        Ok(())
    }

    /// Installs a translation, the copy of the pipeline's cache entry `source`. `mask` is what it
    /// consulted; `actions` and `credits` what it does and counts; `outputs` the (port, egress
    /// queue) of each copy it sends. Returns false (the flow stays in userspace) when the kernel
    /// cannot carry it out.
    #[allow(clippy::too_many_arguments)]
    pub fn install(
        &mut self,
        source: RuleId,
        key: &FlowKey,
        mask: &FlowKey,
        actions: &[DpAction],
        credits: &Credits,
        outputs: &[(u32, u8)],
        cx: &mut EncodeContext<'_>,
    ) -> bool {
        let Some(mut encoded) = encode(actions, cx) else {
            self.refuse(source, room::Refusal::Unfit);
            return false;
        };
        let via_tc = self.mark_outputs_via_tc(&mut encoded);
        // A port rewrite is encoded for the transport protocol of this frame (which checksum it
        // fixes; `encode`): the entry covers that protocol only, whatever the translation
        // consulted. A frame of another one misses and goes up.
        let mut covered = *mask;
        if actions
            .iter()
            .any(|a| matches!(a, DpAction::SetField(Field::TcpSrc | Field::TcpDst | Field::UdpSrc | Field::UdpDst, _)))
        {
            covered.set(Field::IpProto, 0xff);
        }
        let mask = &covered;
        let words = live_words(mask);
        let slot = match self.masks.iter().position(|m| m.as_ref() == Some(mask)) {
            Some(i) => i,
            None => match self.masks.iter().position(Option::is_none) {
                Some(i) => {
                    let v = mask_slot_value(self.generation, mask, self.table.slot_shift(), self.hash_seed);
                    if let Err(e) = self.obj.map("ef_masks").unwrap().update(&(i as u32).to_ne_bytes(), &v) {
                        warn!("fast path mask: {e}");
                        return false;
                    }
                    self.masks[i] = Some(*mask);
                    // A new mask goes last until its hits earn it a better place.
                    let mut order = self.mask_order.clone();
                    order.push(i as u32);
                    self.write_mask_order(order);
                    i
                }
                None => {
                    debug!("fast path: all {MAX_MASKS} masks in use");
                    self.refuse(source, room::Refusal::NoRoom { at: self.clock });
                    return false;
                }
            },
        };
        let masked = key.masked(mask);
        let hash = key_hash(&masked, words, self.hash_seed);
        let k = entry_id(slot, hash);
        let before = self.entries.get(&k).map(|o| (o.generation == self.generation, o.key == masked));
        if before == Some((true, false)) {
            debug!("fast path: two keys with one hash under mask {slot}; the second stays in userspace");
            self.refuse(source, room::Refusal::NoRoom { at: self.clock });
            return false;
        }
        if before.is_none() && !self.has_room() {
            self.refuse(source, room::Refusal::NoRoom { at: self.clock });
            return false;
        }
        let Some(index) = self.take_index() else {
            debug!("fast path: every entry index taken or in quarantine");
            self.refuse(source, room::Refusal::NoRoom { at: self.clock });
            return false;
        };
        // An entry under this id already (one of an older generation, or a copy made again), or
        // the last run's for this key, hands its slot to the new one.
        let inherited_twin = match self.entries.contains_key(&k) {
            true => None,
            false => self.inherited_twin(slot, hash, &masked),
        };
        let at = match (self.entries.get(&k), inherited_twin) {
            (Some(old), _) => Some(old.slot),
            (None, Some((at, _))) => Some(at),
            (None, None) => self.free_slot(hash),
        };
        let Some(at) = at else {
            self.table.give_back(index);
            self.crowded += 1;
            let probes = table::FLOW_PROBES;
            debug!("fast path: all {probes} slots from this key's home slot taken; it stays in userspace");
            self.refuse(source, room::Refusal::NoRoom { at: self.clock });
            return false;
        };
        if self.table.tag_taken(hash, at) {
            self.table.give_back(index);
            self.crowded += 1;
            debug!("fast path: another key's slot near this key's home has its hash's tag; it stays in userspace");
            self.refuse(source, room::Refusal::NoRoom { at: self.clock });
            return false;
        }
        let mut v = vec![0u8; ENTRY_BYTES];
        v[0..8].copy_from_slice(&self.generation.to_ne_bytes());
        v[ENTRY_N_ACTIONS_AT..ENTRY_N_ACTIONS_AT + 2].copy_from_slice(&(encoded.len() as u16).to_ne_bytes());
        // Counted once here, not on every hit: the kernel sends a frame these would take to TTL
        // 0 up.
        let decrements = encoded.iter().filter(|a| a.op == op::DEC_TTL).count() as u16;
        v[ENTRY_DECREMENTS_AT..ENTRY_DECREMENTS_AT + 2].copy_from_slice(&decrements.to_ne_bytes());
        v[ENTRY_MASK_AT..ENTRY_MASK_AT + 4].copy_from_slice(&(slot as u32).to_ne_bytes());
        v[ENTRY_KEY_AT..ENTRY_ACTIONS_AT].copy_from_slice(&masked.0);
        for (i, a) in encoded.iter().enumerate() {
            let at = ENTRY_ACTIONS_AT + i * ACTION_BYTES;
            v[at..at + ACTION_BYTES].copy_from_slice(&a.bytes());
        }
        // The entry first, at an index no slot leads to; then the slot that leads there.
        if let Err(e) = self.megaflows().update(&index.to_ne_bytes(), &v) {
            debug!("fast path entry: {e}");
            self.table.give_back(index);
            self.refuse(source, room::Refusal::NoRoom { at: self.clock });
            return false;
        }
        let value = self.table.point(at, hash, index);
        self.write_slot(at, value);
        if let Some((at, twin)) = inherited_twin {
            // Its hits were never counted here (the last run's entries stand for no entry of
            // this run's pipeline).
            kill_entry(&self.obj, twin);
            self.drop_inherited(at, twin);
            self.table.cool(twin);
        }
        if let Some(old) = self.entries.get_mut(&k) {
            let old_index = old.index;
            if old.generation == self.generation {
                // Its last hits go with it, into the next harvest.
                kill_entry(&self.obj, old_index);
                let (packets, bytes) = read_hits(&self.obj, old_index);
                credit_hits(old, packets, bytes, &mut self.carried, &mut self.mask_hits, &mut self.no_output_drops, &k);
                self.table.saw(old_index, (packets, bytes));
            }
            self.table.cool(old_index);
        }
        if self.refusals.remove(&source).is_some() {
            self.retried += 1;
        }
        let (packets, bytes) = self.table.seen(index);
        let outputs = outputs.to_vec();
        let replaced = self.entries.insert(
            k.clone(),
            Installed {
                source,
                index,
                slot: at,
                key: masked,
                credits: credits.clone(),
                in_port: key.in_port(),
                outputs,
                packets,
                bytes,
                generation: self.generation,
                last_hit: self.clock,
                via_tc,
            },
        );
        if let Some(old) = replaced.filter(|old| old.generation == self.generation) {
            self.mask_users[slot] -= 1;
            if self.by_source.get(&old.source) == Some(&k) {
                self.by_source.remove(&old.source);
            }
        }
        self.mask_users[slot] += 1;
        if let Some(before) = self.by_source.insert(source, k.clone()) {
            // The pipeline reuses the id of an entry it retired; the datapath retires the copy
            // first, so this is only a guard against a copy that would outlive its entry.
            if before != k {
                debug!("fast path: entry {source:?} installed again before its copy was retired");
                self.take_out(&before);
                self.forget_entry(&before);
            }
        }
        self.installed += 1;
        true
    }

    /// XDP: marks `encoded`'s output OUT_VIA_TC when its port takes no native redirect; whether
    /// it did.
    fn mark_outputs_via_tc(&self, encoded: &mut [BpfAction]) -> bool {
        let mut marked = false;
        if self.xdp_fallback_link.is_none() {
            return false;
        }
        for a in encoded.iter_mut().filter(|a| a.op == op::OUTPUT) {
            if self.via_tc.values().any(|p| p.now && p.ifindex == a.a32) {
                a.a8 = OUT_VIA_TC;
                marked = true;
            }
        }
        marked
    }

    /// Adds a harvest's frames sent through the fallback link to the ports' totals.
    fn count_via_tc(&mut self, h: &Harvest) {
        for (no, frames) in &h.via_tc {
            if let Some(p) = self.via_tc.get_mut(no) {
                p.frames += frames;
            }
        }
    }

    /// XDP: reads whether port `no` takes native redirects and, where it does not, sends its
    /// frames through the fallback link from now on (and back when it does again), saying so.
    /// Whether that changed.
    fn check_redirect(&mut self, no: u32) -> bool {
        if self.mode != Mode::Xdp {
            return false;
        }
        let Some(a) = self.attached.get(&no) else { return false };
        let (name, ifindex) = (a.name.clone(), a.ifindex);
        let verdict = match redirect::native_redirect(&name, ifindex) {
            Ok(Some(v)) => v,
            Ok(None) => {
                let Ok(now) = netlink::tx_dropped(ifindex) else { return false };
                let seen = self.tx_dropped_seen.insert(no, (ifindex, now)).filter(|s| s.0 == ifindex).map(|s| s.1);
                if seen.is_none() {
                    info!(port = %name, "this kernel cannot say whether the port takes native XDP redirects (Linux < 6.3): its transmit drops are watched instead");
                }
                if self.via_tc.get(&no).is_some_and(|p| p.now && p.ifindex == ifindex)
                    || !redirect::transmit_drops_grew(seen, now)
                {
                    return false;
                }
                Err(redirect::NoNativeRedirect::TransmitDropsGrew)
            }
            Err(e) => {
                debug!(port = %name, "cannot read the port's XDP features: {e}");
                return false;
            }
        };
        let before = self.via_tc.get(&no).filter(|p| p.now).map(|p| (p.ifindex, p.why));
        match verdict {
            Err(why) if before != Some((ifindex, why)) => {
                self.open_fallback_link();
                if self.xdp_fallback_link.is_some() {
                    warn!(port = %name, reason = why.label(), "{}: its frames go through TC instead (slower)", why.why());
                } else {
                    warn!(port = %name, reason = why.label(), "{}, and frames the kernel forwards to it are dropped: no fallback link (the AFDX and P4 programs have none, a fast path kept for the next run neither, or it could not be made)", why.why());
                }
                let frames = self.via_tc.get(&no).map_or(0, |p| p.frames);
                self.via_tc.insert(no, redirect::FallbackPort { name, ifindex, why, now: true, frames });
                self.xdp_fallback_link.is_some()
            }
            Ok(()) if before.is_some() => {
                info!(port = %name, "the port takes native XDP redirects again");
                if let Some(p) = self.via_tc.get_mut(&no) {
                    p.now = false;
                }
                self.xdp_fallback_link.is_some()
            }
            _ => false,
        }
    }

    /// XDP: makes the fallback link, once, where this fast path may.
    fn open_fallback_link(&mut self) {
        if self.xdp_fallback_link.is_some() || !self.fallback_allowed {
            return;
        }
        // GRO on is what makes the link's far end run NAPI, and take redirected frames, from
        // Linux 5.13; before, only an XDP program of its own would.
        if crate::ebpf::kernel_release().is_some_and(|r| r < (5, 13)) {
            self.fallback_allowed = false;
            warn!("the XDP fallback link needs Linux 5.13 or later (a veth running NAPI with GRO on)");
            return;
        }
        // Unique among this process's fast paths (the kernel tests load several at once), and
        // within IFNAMSIZ with the peer's "p".
        static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed) & 0xff;
        let ours = format!("ef-fb{:x}", (std::process::id() & 0x3f_ffff) << 8 | n);
        match redirect::FallbackLink::create(&self.obj, &ours, &format!("{ours}p"))
            .and_then(|link| self.set_config(CFG_XDP_FALLBACK_IFINDEX, link.ifindex as u64).map(|_| link))
        {
            Ok(link) => self.xdp_fallback_link = Some(link),
            Err(e) => warn!(link = %ours, "XDP fallback link: {e}"),
        }
    }

    /// XDP: the ports whose frames go, or went, through the fallback link and TC.
    pub fn xdp_fallback_ports(&self) -> impl Iterator<Item = (u32, &redirect::FallbackPort)> {
        self.via_tc.iter().map(|(&no, p)| (no, p))
    }

    /// Deletes the copies of the cache entries, and the kernel slots of the meters, the pipeline
    /// retired; returns what they counted since the last harvest.
    pub fn retire(&mut self, retired: &Retired) -> Harvest {
        let mut h = Harvest::default();
        for id in &retired.entries {
            self.refusals.remove(id);
            let Some(k) = self.by_source.remove(id) else { continue };
            if let Some((packets, bytes)) = self.take_out(&k) {
                if let Some(inst) = self.entries.get_mut(&k) {
                    credit_hits(inst, packets, bytes, &mut h, &mut self.mask_hits, &mut self.no_output_drops, &k);
                }
            }
            self.forget_entry(&k);
            self.retired += 1;
        }
        for m in &retired.meters {
            let Some((slot, seen)) = self.meters.remove(m) else { continue };
            if let Ok(map) = self.obj.map("ef_meters") {
                if let Ok(Some(v)) = map.lookup(&slot.to_ne_bytes()) {
                    let now = meter_counts(&v);
                    let d: [u64; 4] = std::array::from_fn(|i| now[i].saturating_sub(seen[i]));
                    if d.iter().any(|&x| x > 0) {
                        h.meters.insert(*m, (d[0], d[1], d[2], d[3]));
                    }
                }
                let _ = map.update(&slot.to_ne_bytes(), &[0u8; METER_BYTES]);
            }
        }
        self.count_via_tc(&h);
        h
    }

    /// Forgets an entry the kernel no longer holds (the caller deleted it, or found it gone); frees
    /// its mask slot when no other entry of the current generation uses it.
    fn forget_entry(&mut self, k: &[u8]) {
        let Some(inst) = self.entries.remove(k) else { return };
        if inst.generation != self.generation {
            return;
        }
        if self.by_source.get(&inst.source).is_some_and(|x| x == k) {
            self.by_source.remove(&inst.source);
        }
        let slot = u32::from_ne_bytes(k[0..4].try_into().unwrap()) as usize;
        if slot < MAX_MASKS {
            self.mask_users[slot] = self.mask_users[slot].saturating_sub(1);
            if self.mask_users[slot] == 0 && self.masks[slot].is_some() && !self.inherited_mask(slot) {
                self.masks[slot] = None;
                self.mask_hits[slot] = 0;
                let order = self.mask_order.iter().copied().filter(|&s| s as usize != slot).collect();
                self.write_mask_order(order);
            }
        }
    }

    /// A kernel slot for a drop-only meter, created from the pipeline's meter on first use.
    pub fn meter_slot(&mut self, id: u32, meter: &Meter) -> Option<u32> {
        if let Some((slot, _)) = self.meters.get(&id) {
            return Some(*slot);
        }
        let slot = (0..MAX_METERS).find(|s| !self.meters.values().any(|(x, _)| x == s) && !self.inherited_meter(*s))?;
        let (per_sec, capacity, kbps) = meter.bucket_params()?;
        let mut v = vec![0u8; METER_BYTES];
        for (i, x) in [per_sec, capacity, capacity, 0, kbps as u64].iter().enumerate() {
            v[i * 8..i * 8 + 8].copy_from_slice(&x.to_ne_bytes());
        }
        self.obj.map("ef_meters").ok()?.update(&slot.to_ne_bytes(), &v).ok()?;
        self.meters.insert(id, (slot, [0; 4]));
        Some(slot)
    }

    /// Reads the hit counters and returns their growth since the last call, at `now` (the
    /// switch's clock, nanoseconds).
    pub fn harvest(&mut self, now: u64) -> Harvest {
        self.clock = self.clock.max(now);
        let mut h = std::mem::take(&mut self.carried);
        // Every index's counters in a few batched calls: a lookup per entry took the forwarding
        // thread ~18 ms for 15 000 entries at each harvest (every 100 ms, and for every stats
        // request), long enough for a stream through userspace to overflow its ring.
        let high_water = self.table.high_water();
        let cells = match self.obj.map("ef_flow_hits").and_then(|m| m.lookup_cells(high_water, true)) {
            Ok(c) => c,
            Err(e) => {
                warn!("fast path: cannot read the kernel's hit counters back: {e}");
                return h;
            }
        };
        let counts: Vec<(u64, u64)> = match high_water {
            0 => Vec::new(),
            n => cells.chunks_exact(cells.len() / n as usize).map(sum_hits).collect(),
        };
        for (k, inst) in self.entries.iter_mut() {
            let Some(&(packets, bytes)) = counts.get(inst.index as usize) else { continue };
            if packets != inst.packets {
                inst.last_hit = self.clock;
            }
            credit_hits(inst, packets, bytes, &mut h, &mut self.mask_hits, &mut self.no_output_drops, k);
        }
        self.table.harvested(&counts);
        self.ask_grace_period();
        self.rank_masks();
        if let Ok(meters) = self.obj.map("ef_meters") {
            for (id, (slot, seen)) in self.meters.iter_mut() {
                if let Ok(Some(v)) = meters.lookup(&slot.to_ne_bytes()) {
                    let now = meter_counts(&v);
                    let delta: Vec<u64> = now.iter().zip(seen.iter()).map(|(n, s)| n.saturating_sub(*s)).collect();
                    *seen = now;
                    if delta.iter().any(|&d| d > 0) {
                        h.meters.insert(*id, (delta[0], delta[1], delta[2], delta[3]));
                    }
                }
            }
        }
        self.count_via_tc(&h);
        if self.clock.saturating_sub(self.redirects_checked_at) >= REDIRECT_CHECK_NS {
            self.redirects_checked_at = self.clock;
            let ports: Vec<u32> = self.attached.keys().copied().collect();
            if ports.into_iter().fold(false, |changed, no| self.check_redirect(no) | changed) {
                // Entries were encoded for the ports as they were: the next frame of each goes
                // up and comes back encoded for the ports as they are.
                self.flush();
            }
        }
        h
    }

    /// Sorts the live masks by recent hits, busiest first, so that most lookups need one probe
    /// (the kernel tries them in this order); then halves the counts, so the order follows
    /// today's traffic rather than yesterday's.
    fn rank_masks(&mut self) {
        let mut order: Vec<u32> =
            self.mask_order.iter().copied().filter(|&s| self.masks[s as usize].is_some()).collect();
        order.sort_by_key(|&s| std::cmp::Reverse(self.mask_hits[s as usize]));
        if order != self.mask_order {
            self.write_mask_order(order);
        }
        for h in self.mask_hits.iter_mut() {
            *h /= 2;
        }
    }

    /// Writes a new probe order. The kernel may read it half-written: a slot missing for a moment
    /// only turns hits into misses, which userspace handles; nothing can match wrongly, since an
    /// entry is keyed by its own mask slot.
    fn write_mask_order(&mut self, order: Vec<u32>) {
        if let Ok(map) = self.obj.map("ef_mask_order") {
            if let Err(e) = map.update(&0u32.to_ne_bytes(), &mask_order_value(&order)) {
                warn!("fast path mask order: {e}");
            }
        }
        self.mask_order = order;
    }

    /// Forgets every entry (the pipeline changed). The caller harvests first.
    pub fn flush(&mut self) {
        if self.inherited.is_some() {
            self.flush_own();
            return;
        }
        self.generation += 1;
        if let Err(e) = self.set_config(CFG_GENERATION, self.generation) {
            warn!("fast path flush failed: {e}");
        }
        self.masks = vec![None; MAX_MASKS];
        self.mask_hits = [0; MAX_MASKS];
        self.mask_users = [0; MAX_MASKS];
        self.by_source.clear();
        self.refusals.clear();
        // Stale slots in the order are harmless (the kernel checks each mask's generation); they
        // are dropped as new masks take slots.
        self.write_mask_order(Vec::new());
        // Dead entries are unreachable at once; their map slots are freed by `sweep`.
        for inst in self.entries.values_mut() {
            inst.generation = 0;
        }
        self.forget_meters();
    }

    /// Empties the kernel slots of the meters this run handed it.
    fn forget_meters(&mut self) {
        if let Ok(meters) = self.obj.map("ef_meters") {
            for (slot, _) in self.meters.values() {
                let _ = meters.update(&slot.to_ne_bytes(), &[0u8; METER_BYTES]);
            }
        }
        self.meters.clear();
    }

    /// Lets go of the slots and indices of entries of earlier generations.
    pub fn sweep(&mut self) {
        let dead: Vec<Vec<u8>> =
            self.entries.iter().filter(|(_, i)| i.generation != self.generation).map(|(k, _)| k.clone()).collect();
        for k in dead {
            self.take_out(&k);
            self.entries.remove(&k);
        }
    }

    /// Hit, miss, upcall, slow and drop counts since start (all CPUs).
    pub fn counters(&self) -> [u64; 5] {
        self.all_counters()[..5].try_into().unwrap()
    }

    /// Every slot of `ef_counters` (`enum ef_counter`), summed over CPUs.
    fn all_counters(&self) -> [u64; CNT_MAX] {
        let mut out = [0u64; CNT_MAX];
        if let Ok(m) = self.obj.map("ef_counters") {
            for (i, o) in out.iter_mut().enumerate() {
                if let Ok(per_cpu) = m.lookup_percpu(&(i as u32).to_ne_bytes()) {
                    *o = links::sum_over_cpus::<1>(&per_cpu)[0];
                }
            }
        }
        out
    }

    /// Frames the kernel dropped, per reason, since start: hits on entries that send nowhere (the
    /// mode decided to drop), meter drops, misses with no way up, rewrites or copies a frame could
    /// not take (too short for them, or a helper refused), and virtual links' frames filtered and
    /// policed (as far as harvested).
    pub fn drops(&self) -> [(&'static str, u64); 6] {
        let c = self.all_counters();
        [
            ("no_output", self.no_output_drops),
            ("meter", c[CNT_DROP]),
            ("no_upcall", c[CNT_NO_UPCALL]),
            ("action_failed", c[CNT_ACTION_FAILED]),
            ("filtered", self.links.filtered),
            ("policed", self.links.policed),
        ]
    }

    /// XDP: frames the kernel sent into the fallback link for ports without native redirect,
    /// since start (all CPUs).
    pub fn xdp_via_tc_frames(&self) -> u64 {
        self.all_counters()[CNT_XDP_FALLBACK]
    }

    pub fn len(&self) -> usize {
        self.entries.values().filter(|i| i.generation == self.generation).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for FastPath {
    fn drop(&mut self) {
        if self.kept.is_some() {
            // The kernel goes on forwarding: links stay with their pins, programs attached the
            // pre-link ways stay where they are, and so does the upcall interface.
            for (_, a) in std::mem::take(&mut self.attached) {
                a.link.leave_attached();
            }
            return;
        }
        if let Some((ours, _)) = &self.upcall {
            let _ = sys::delete_link(ours);
        }
    }
}

/// A `struct flow_hits` summed over CPUs (`per_cpu`: one per possible CPU, each padded to 8
/// bytes, as [`Map::lookup_cells`] reads them): packets, bytes.
fn sum_hits(per_cpu: &[u8]) -> (u64, u64) {
    per_cpu.chunks_exact(FLOW_HITS_BYTES).fold((0, 0), |(p, b), c| {
        let at = |o: usize| u64::from_ne_bytes(c[o..o + 8].try_into().unwrap());
        (p.wrapping_add(at(0)), b.wrapping_add(at(8)))
    })
}

/// The hit counters at `index` of `ef_flow_hits`, over all CPUs.
fn read_hits(obj: &Object, index: u32) -> (u64, u64) {
    match obj.map("ef_flow_hits").and_then(|m| m.lookup_percpu(&index.to_ne_bytes())) {
        Ok(per_cpu) => sum_hits(&per_cpu.concat()),
        Err(e) => {
            warn!("fast path: cannot read entry {index}'s hits: {e}");
            (0, 0)
        }
    }
}

/// Clears the generation of the entry at `index`, the rest as it was: the kernel reads the word
/// as either value, and the rest unchanged either way, so no frame finds it from now on and none
/// reads it half-written.
fn kill_entry(obj: &Object, index: u32) {
    let map = megaflows(obj);
    let key = index.to_ne_bytes();
    if let Ok(Some(mut v)) = map.lookup(&key) {
        v[0..8].fill(0);
        if let Err(e) = map.update(&key, &v) {
            warn!("fast path: entry {index} not cleared: {e}");
        }
    }
}

/// A `struct meter`'s counters: packets, bytes, dropped packets, dropped bytes.
fn meter_counts(v: &[u8]) -> [u64; 4] {
    std::array::from_fn(|i| {
        let at = METER_COUNTS_AT + i * 8;
        u64::from_ne_bytes(v[at..at + 8].try_into().unwrap())
    })
}

/// Adds an entry's growth since it was last read (its counters now `packets`, `bytes`) to `h`:
/// the entry's credits, the port it takes frames from, every port and queue it sends on.
fn credit_hits(
    inst: &mut Installed,
    packets: u64,
    bytes: u64,
    h: &mut Harvest,
    mask_hits: &mut [u64; MAX_MASKS],
    no_output_drops: &mut u64,
    k: &[u8],
) {
    let (dp, db) = (packets.saturating_sub(inst.packets), bytes.saturating_sub(inst.bytes));
    inst.packets = packets;
    inst.bytes = bytes;
    if dp == 0 {
        return;
    }
    let slot = u32::from_ne_bytes(k[0..4].try_into().unwrap()) as usize;
    if slot < MAX_MASKS {
        mask_hits[slot] += dp;
    }
    h.flows.push((inst.source, inst.credits.clone(), dp, db));
    if inst.outputs.is_empty() {
        *no_output_drops += dp;
    }
    let rx = h.ports.entry(inst.in_port).or_default();
    rx.rx_packets += dp;
    rx.rx_bytes += db;
    for &(port, queue) in &inst.outputs {
        if inst.via_tc {
            *h.via_tc.entry(port).or_default() += dp;
        }
        let tx = h.ports.entry(port).or_default();
        tx.tx_packets += dp;
        tx.tx_bytes += db;
        let q = h.queues.entry((port, queue)).or_default();
        q.0 += dp;
        q.1 += db;
    }
}

/// Bit w is set when word w of `mask` keeps any bit: the words the kernel hashes and compares.
fn live_words(mask: &FlowKey) -> u32 {
    mask.0.chunks_exact(8).enumerate().filter(|(_, w)| w.iter().any(|&b| b != 0)).fold(0, |acc, (i, _)| acc | 1 << i)
}

/// `struct mask_order` (`bpf/fastpath.h`): the first MAX_MASKS slots of `order`, then MASK_END.
fn mask_order_value(order: &[u32]) -> Vec<u8> {
    (0..MAX_MASKS).flat_map(|pos| order.get(pos).copied().unwrap_or(MASK_END).to_ne_bytes()).collect()
}

/// `struct mask_slot` (`bpf/fastpath.h`): generation, the kept words as bits, how many, the
/// mask, the kept words' indices in ascending order (what the kernel's lookup walks), the slot
/// table's shift and the hash seed.
fn mask_slot_value(generation: u64, mask: &FlowKey, slot_shift: u64, seed: u64) -> Vec<u8> {
    let words = live_words(mask);
    let mut v = Vec::with_capacity(MASK_SLOT_BYTES);
    v.extend_from_slice(&generation.to_ne_bytes());
    v.extend_from_slice(&words.to_ne_bytes());
    v.extend_from_slice(&words.count_ones().to_ne_bytes());
    v.extend_from_slice(&mask.0);
    v.extend((0..KEY_WORDS as u8).filter(|w| words & 1 << w != 0));
    v.resize(MASK_SHIFT_AT, 0);
    v.push(slot_shift as u8);
    v.resize(MASK_SEED_AT, 0);
    v.extend_from_slice(&seed.to_ne_bytes());
    v
}

/// The hash the kernel computes of a frame's key under a mask (`lookup` in `bpf/fastpath.c`): the
/// words the mask keeps, as the CPU reads them from the key's bytes, folded in order.
fn key_hash(masked: &FlowKey, words: u32, seed: u64) -> u64 {
    let mut h = seed;
    for (i, w) in masked.0.chunks_exact(8).enumerate() {
        if words & (1 << i) != 0 {
            h = (h ^ u64::from_ne_bytes(w.try_into().unwrap())).wrapping_mul(HASH_MUL);
            h ^= h >> 32;
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faucet_style_tag_and_untag_cancels() {
        let a = vec![
            DpAction::PushVlan(0x8100),
            DpAction::SetField(Field::VlanVid, 0x1064),
            DpAction::PopVlan,
            DpAction::Output(2),
        ];
        assert_eq!(simplify(&a), vec![DpAction::Output(2)]);
        // An output between keeps them: the tagged copy must leave tagged.
        let b = vec![DpAction::PushVlan(0x8100), DpAction::Output(3), DpAction::PopVlan, DpAction::Output(2)];
        assert_eq!(simplify(&b), b);
    }

    #[test]
    fn key_hash_covers_exactly_the_words_a_mask_keeps() {
        let mut mask = FlowKey::default();
        mask.0[0..4].fill(0xff); // in_port: word 0
        mask.0[48..52].fill(0xff); // ipv4_dst: word 6
        let words = live_words(&mask);
        assert_eq!(words, 1 << 0 | 1 << 6);
        let hash = |k: &FlowKey| key_hash(&k.masked(&mask), words, 0);
        let mut a = FlowKey::default();
        a.0[3] = 1;
        a.0[51] = 9;
        let mut b = a;
        b.0[100] = 7; // a byte the mask does not keep
        assert_eq!(hash(&a), hash(&b));
        let mut c = a;
        c.0[51] = 10;
        assert_ne!(hash(&a), hash(&c));
        // Word order matters: the same value in another kept word hashes differently.
        let mut d = FlowKey::default();
        d.0[51] = 1;
        d.0[3] = 9;
        assert_ne!(hash(&a), hash(&d));
        // Another seed, another hash: two keys one seed makes collide, another keeps apart.
        let seeded = |k: &FlowKey, seed| key_hash(&k.masked(&mask), words, seed);
        assert_ne!(seeded(&a, 1), seeded(&a, 2));
        assert_eq!(seeded(&a, 7), seeded(&b, 7));
    }

    #[test]
    fn encoding_refuses_what_the_kernel_cannot_do() {
        let ifx = |p: u32| Some(100 + p);
        let mut slots = |_: u32| None;
        let mut cx = EncodeContext { mode: Mode::Tc, ifindex: &ifx, meter_slot: &mut slots, ip_proto: 6 };
        let ok = encode(&[DpAction::SetField(Field::TcpDst, 80), DpAction::Output(1), DpAction::Output(2)], &mut cx)
            .unwrap();
        assert_eq!(ok.len(), 3);
        assert_eq!(ok[2].a32, 102);
        assert!(encode(&[DpAction::PushMpls(0x8847), DpAction::Output(1)], &mut cx).is_none());
        assert!(encode(&[DpAction::Meter(1)], &mut cx).is_none(), "no slot for that meter");
        let mut xdp = EncodeContext { mode: Mode::Xdp, ifindex: &ifx, meter_slot: &mut slots, ip_proto: 6 };
        assert!(encode(&[DpAction::Output(1), DpAction::Output(2)], &mut xdp).is_none(), "XDP outputs once");
        assert!(encode(&[DpAction::Output(1)], &mut xdp).is_some());
    }
}

mod dump;
mod grace;
pub mod keep;
#[cfg(test)]
mod kernel;
pub mod labels;
// Compile-time checks of the shared layout (and its test).
#[cfg(any(test, feature = "fastpath"))]
mod layout;
pub mod links;
pub mod p4;
#[cfg(feature = "p4")]
pub mod p4_test_run;
pub mod redirect;
mod room;
mod table;
