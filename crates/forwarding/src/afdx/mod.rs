//! The AFDX mode: an ARINC 664 part 7 switch. Frames travel on static virtual links (VLs); each
//! frame is filtered against its VL (addresses, size, input port), policed against its VL's
//! traffic contract, and copied to the VL's output ports, high-priority VLs ahead of low ones.
//!
//! Frame format: the addresses of `packet::afdx` (destination: constant field and VL id; source:
//! an end system on network A or B, the switch's own network if it is configured with one), IPv4
//! (the only EtherType AFDX carries), and a length, FCS included, within the VL's [Smin, Smax].
//! The FCS is gone by the time a frame reaches us, so 4 bytes are added back before comparing.
//! Where a VL asks (`ip_check`), its IPv4 and UDP headers are checked too (`ip_header_ok`).
//!
//! Policing is the standard's account-based algorithm. Each account holds a credit that grows by
//! Smax per BAG, capped at Smax·(1 + J/BAG) (J: the jitter the contract tolerates) and full at
//! start. A frame passes if the credit covers its cost, which is then taken: Smax for frame-based
//! policing, the frame's own length for byte-based. Credit is kept in byte·ns (bytes × BAG), so
//! accrual is exact integer arithmetic: it grows by Smax per elapsed nanosecond, a frame costs
//! cost × BAG, and the cap is Smax·(BAG + J).

pub mod compile;

use std::collections::BTreeMap;
use std::fmt;

use packet::{FlowKey, Packet};

use crate::bucket::TokenBucket;

use crate::{
    CounterGroup, DropReason, Egress, FromKernel, KernelAccount, KernelLink, KernelLinks, LinkOffload, Mode, Nanos,
    Output, PortView, ToKernel, Verdict,
};

pub use packet::afdx::{end_system_mac, is_end_system_mac, vl_mac, DEFAULT_MAC_CONSTANT, NETWORK_A, NETWORK_B};

/// Allowed BAGs: 2^k ms for k = 0..=7.
pub const BAG_MS: [u32; 8] = [1, 2, 4, 8, 16, 32, 64, 128];
/// Frame sizes (FCS included) an AFDX frame may have.
pub const MIN_FRAME: u16 = 64;
pub const MAX_FRAME: u16 = 1518;
/// The FCS the receive path has already stripped.
const FCS: usize = packet::FCS_LEN;
/// An 802.1Q or 802.1ad tag.
const VLAN_TAG: usize = 4;
/// Egress queues: high-priority VLs leave before low ones (strict priority between queues).
pub const HIGH_QUEUE: u32 = 7;
pub const LOW_QUEUE: u32 = 0;
/// The largest jitter a contract may tolerate. Part 7 bounds an end system's jitter at 500 µs;
/// switches further down a path see more, but a tolerance past a second would police nothing.
pub const MAX_JITTER_NS: u64 = 1_000_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    High,
    Low,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Police {
    /// Every frame costs Smax: at most one frame per BAG (plus what the jitter allows).
    Frame,
    /// A frame costs its length: at most Smax bytes per BAG.
    Byte,
}

/// One virtual link as configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VirtualLink {
    pub id: u16,
    pub in_port: u32,
    /// One or more: several make a multicast VL.
    pub out_ports: Vec<u32>,
    pub bag_ns: u64,
    /// Frame sizes, FCS included.
    pub smin: u16,
    pub smax: u16,
    pub jitter_ns: u64,
    pub priority: Priority,
    pub police: Police,
    /// VLs naming the same account share one credit (and so must share one contract).
    pub account: Option<String>,
    /// Check the frames' IPv4 and UDP headers (`ip_header_ok`).
    pub ip_check: bool,
}

/// What an account enforces: the same for every VL sharing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Contract {
    pub bag_ns: u64,
    pub smax: u16,
    pub jitter_ns: u64,
    pub police: Police,
}

impl VirtualLink {
    pub fn contract(&self) -> Contract {
        Contract { bag_ns: self.bag_ns, smax: self.smax, jitter_ns: self.jitter_ns, police: self.police }
    }
}

/// A VL table the mode refuses: which entry (its index in the list given), which of its fields,
/// and why. The configuration turns the index and field into a line number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableError {
    pub index: usize,
    pub field: &'static str,
    pub reason: String,
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "virtual link #{} ({}): {}", self.index + 1, self.field, self.reason)
    }
}

impl std::error::Error for TableError {}

/// Account-based policing of one account (part 7's algorithm, exact in integers): a token bucket
/// (`crate::bucket`, shared with 802.1Qci's flow meters) in bytes × BAG-ns, growing by Smax a
/// nanosecond up to Smax·(BAG + J), full at start.
#[derive(Clone, Debug)]
pub struct Account {
    contract: Contract,
    bucket: TokenBucket,
}

impl Account {
    pub fn new(contract: Contract) -> Account {
        let cap = contract.smax as u64 * (contract.bag_ns + contract.jitter_ns);
        Account { contract, bucket: TokenBucket::new(contract.smax as u64, cap) }
    }

    /// The credit at `now`: full before the first frame.
    pub fn credit_at(&self, now: Nanos) -> u64 {
        self.bucket.credit_at(now)
    }

    /// Takes over the credit another holder of this account (the kernel) had at `now`.
    pub fn set_credit(&mut self, credit: u64, now: Nanos) {
        self.bucket.set(credit, now);
    }

    /// Whether a frame of `len` bytes (FCS included) arriving at `now` is within the contract;
    /// if so its cost is taken from the credit.
    pub fn admit(&mut self, len: usize, now: Nanos) -> bool {
        let c = self.contract;
        self.bucket.refill(now);
        let cost = match c.police {
            Police::Frame => c.smax as u64,
            Police::Byte => len as u64,
        } * c.bag_ns;
        self.bucket.take(cost)
    }
}

/// Why a frame of a known VL was dropped, counted per VL. The order is the kernel's too
/// (`AC_BAD_SOURCE` on in `bpf/fastpath.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VlDrop {
    /// Source MAC not in the end-system format.
    BadSource,
    /// Arrived on a port other than the VL's input port.
    WrongPort,
    /// Shorter than Smin.
    Undersize,
    /// Longer than Smax.
    Oversize,
    /// Over the contract.
    Policed,
    /// From an end system's interface on the other network than the switch's.
    WrongNetwork,
    /// Not IPv4.
    BadEthertype,
    /// A VL with `ip_check`: its IPv4 or UDP header is not what part 7 sends.
    BadIp,
}

impl VlDrop {
    pub const ALL: [VlDrop; 8] = [
        VlDrop::BadSource,
        VlDrop::WrongPort,
        VlDrop::Undersize,
        VlDrop::Oversize,
        VlDrop::Policed,
        VlDrop::WrongNetwork,
        VlDrop::BadEthertype,
        VlDrop::BadIp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            VlDrop::BadSource => "bad_source",
            VlDrop::WrongPort => "wrong_port",
            VlDrop::Undersize => "undersize",
            VlDrop::Oversize => "oversize",
            VlDrop::Policed => "policed",
            VlDrop::WrongNetwork => "wrong_network",
            VlDrop::BadEthertype => "bad_ethertype",
            VlDrop::BadIp => "bad_ip",
        }
    }
}

/// The IPv4 and UDP headers of an AFDX frame whose IPv4 header starts at `ip` (`frame` without
/// FCS): version 4 with no options (part 7 sends none), a good header checksum, a total length
/// that ends one byte before the frame does (the sequence number follows the datagram), and UDP;
/// a whole datagram's UDP length is its IP payload's (a fragment's cannot be checked here).
pub fn ip_header_ok(frame: &[u8], ip: usize) -> bool {
    let Some(h) = frame.get(ip..ip + 20) else { return false };
    let total = u16::from_be_bytes([h[2], h[3]]) as usize;
    let fragment = u16::from_be_bytes([h[6], h[7]]);
    // A good header sums, checksum included, to all ones: its checksum is 0.
    let good_sum = packet::csum::checksum(h) == 0;
    // A datagram holds a UDP header at least (a later fragment, 8 bytes of it at least).
    if h[0] != 0x45 || !good_sum || total < 28 || ip + total + 1 != frame.len() || h[9] != 17 {
        return false;
    }
    let whole = fragment & 0x3fff == 0;
    !whole || frame.get(ip + 24..ip + 26).is_some_and(|l| u16::from_be_bytes([l[0], l[1]]) as usize == total - 20)
}

/// Counters of one VL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VlCounters {
    pub frames_in: u64,
    pub bytes_in: u64,
    /// Frames forwarded (each to every output port).
    pub frames_out: u64,
    pub dropped: [u64; VlDrop::ALL.len()],
}

impl VlCounters {
    pub fn dropped(&self, why: VlDrop) -> u64 {
        self.dropped[why as usize]
    }
}

/// Frames no VL can be named for, counted switch-wide.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchCounters {
    /// Destination MAC without the constant field (not an AFDX frame).
    pub bad_destination: u64,
    /// The constant field is right but no VL has the id.
    pub unknown_vl: u64,
}

struct Link {
    vl: VirtualLink,
    egress: Vec<Egress>,
    account: usize,
    counters: VlCounters,
}

pub struct AfdxMode {
    mac_constant: [u8; 4],
    /// The interface id (`NETWORK_A`, `NETWORK_B`) of the network this switch is on, if configured.
    network: Option<u8>,
    links: BTreeMap<u16, Link>,
    accounts: Vec<Account>,
    switch: SwitchCounters,
    kernel: KernelLinks,
}

impl AfdxMode {
    /// Checks the table (BAG, sizes, duplicates, shared accounts) and builds the mode.
    pub fn new(vls: &[VirtualLink], mac_constant: u32) -> Result<AfdxMode, TableError> {
        check(vls)?;
        let mut accounts: Vec<Account> = Vec::new();
        let mut named: BTreeMap<&str, usize> = BTreeMap::new();
        let mut links = BTreeMap::new();
        for vl in vls {
            let account = match &vl.account {
                Some(name) => *named.entry(name.as_str()).or_insert_with(|| {
                    accounts.push(Account::new(vl.contract()));
                    accounts.len() - 1
                }),
                None => {
                    accounts.push(Account::new(vl.contract()));
                    accounts.len() - 1
                }
            };
            let queue = Some(match vl.priority {
                Priority::High => HIGH_QUEUE,
                Priority::Low => LOW_QUEUE,
            });
            let egress = vl.out_ports.iter().map(|&port| Egress { port, queue }).collect();
            links.insert(vl.id, Link { vl: vl.clone(), egress, account, counters: VlCounters::default() });
        }
        let kernel = KernelLinks {
            mac_constant,
            network: 0,
            links: links
                .values()
                .map(|l: &Link| KernelLink {
                    id: l.vl.id,
                    in_port: l.vl.in_port,
                    out_ports: l.vl.out_ports.clone(),
                    queue: l.egress[0].queue.unwrap_or(LOW_QUEUE) as u8,
                    smin: l.vl.smin,
                    smax: l.vl.smax,
                    account: l.account,
                    ip_check: l.vl.ip_check,
                })
                .collect(),
            accounts: accounts
                .iter()
                .map(|a| KernelAccount {
                    bag_ns: a.contract.bag_ns,
                    smax: a.contract.smax,
                    jitter_ns: a.contract.jitter_ns,
                    per_frame: a.contract.police == Police::Frame,
                })
                .collect(),
        };
        Ok(AfdxMode {
            mac_constant: mac_constant.to_be_bytes(),
            network: None,
            links,
            accounts,
            switch: SwitchCounters::default(),
            kernel,
        })
    }

    /// The switch is on network A or B (`NETWORK_A`, `NETWORK_B`): the other network's frames are
    /// dropped (`wrong_network`). `None`: either's pass, as on a switch joining both.
    pub fn on_network(mut self, network: Option<u8>) -> AfdxMode {
        self.network = network;
        self.kernel.network = network.unwrap_or(0);
        self
    }

    pub fn vl_counters(&self, id: u16) -> Option<&VlCounters> {
        self.links.get(&id).map(|l| &l.counters)
    }

    pub fn switch_counters(&self) -> &SwitchCounters {
        &self.switch
    }
}

/// The table's own consistency: everything that needs no knowledge of the switch's ports.
pub fn check(vls: &[VirtualLink]) -> Result<(), TableError> {
    let err = |index: usize, field: &'static str, reason: String| Err(TableError { index, field, reason });
    let mut shared: BTreeMap<&str, (usize, Contract)> = BTreeMap::new();
    for (i, vl) in vls.iter().enumerate() {
        if let Some(j) = vls[..i].iter().position(|o| o.id == vl.id) {
            return err(i, "id", format!("VL {} is already defined by virtual link #{}", vl.id, j + 1));
        }
        if !BAG_MS.iter().any(|&ms| ms as u64 * 1_000_000 == vl.bag_ns) {
            return err(
                i,
                "bag_ms",
                format!("BAG {} ms: must be one of 1, 2, 4, 8, 16, 32, 64, 128 ms", vl.bag_ns as f64 / 1e6),
            );
        }
        for (field, size) in [("smin", vl.smin), ("smax", vl.smax)] {
            if !(MIN_FRAME..=MAX_FRAME).contains(&size) {
                return err(
                    i,
                    field,
                    format!("{size} bytes: frame sizes are {MIN_FRAME} to {MAX_FRAME} bytes, FCS included"),
                );
            }
        }
        if vl.smin > vl.smax {
            return err(i, "smin", format!("smin {} is above smax {}", vl.smin, vl.smax));
        }
        if vl.jitter_ns > MAX_JITTER_NS {
            return err(i, "jitter_us", format!("{} µs: at most {} µs", vl.jitter_ns / 1000, MAX_JITTER_NS / 1000));
        }
        if vl.out_ports.is_empty() {
            return err(i, "out_ports", "a virtual link needs at least one output port".into());
        }
        if vl.out_ports.contains(&vl.in_port) {
            return err(i, "out_ports", format!("port {} is the VL's input port", vl.in_port));
        }
        if let Some(dup) = vl.out_ports.iter().enumerate().find(|(k, p)| vl.out_ports[..*k].contains(p)) {
            return err(i, "out_ports", format!("port {} is listed twice", dup.1));
        }
        if let Some(name) = &vl.account {
            match shared.get(name.as_str()) {
                Some(&(j, c)) if c != vl.contract() => {
                    return err(
                        i,
                        "account",
                        format!(
                            "account '{name}' is shared with virtual link #{}, whose BAG, smax, jitter or police differ",
                            j + 1
                        ),
                    );
                }
                Some(_) => {}
                None => {
                    shared.insert(name, (i, vl.contract()));
                }
            }
        }
    }
    Ok(())
}

impl LinkOffload for AfdxMode {
    fn table(&self) -> &KernelLinks {
        &self.kernel
    }

    fn credits(&self, now: Nanos) -> Vec<u64> {
        self.accounts.iter().map(|a| a.credit_at(now)).collect()
    }
}

impl Mode for AfdxMode {
    fn name(&self) -> &'static str {
        "afdx"
    }

    fn port_changed(&mut self, _port: u32, _view: Option<PortView>) {}

    fn receive(&mut self, pkt: &mut Packet, key: &FlowKey, now: Nanos, out: &mut dyn Output) -> Verdict {
        let drop = |why| Verdict { dropped: Some(why), entry: None };
        let data = pkt.data();
        if data.len() < 14 || data[..4] != self.mac_constant {
            self.switch.bad_destination += 1;
            return drop(DropReason::Filtered);
        }
        let id = u16::from_be_bytes([data[4], data[5]]);
        let Some(link) = self.links.get_mut(&id) else {
            self.switch.unknown_vl += 1;
            return drop(DropReason::Filtered);
        };
        // An AFDX frame's size is its untagged size (64-1518 bytes, as smin and smax): a VLAN tag
        // picked up on the way is not the end system's, and the kernel, which holds a received
        // tag beside the frame, counts without it too.
        let tag = if packet::parse::is_vlan_tpid(u16::from_be_bytes([data[12], data[13]])) { VLAN_TAG } else { 0 };
        let len = data.len() - tag + FCS;
        let c = &mut link.counters;
        c.frames_in += 1;
        c.bytes_in += len as u64;
        let ethertype = data.get(12 + tag..14 + tag).map_or(0, |e| u16::from_be_bytes([e[0], e[1]]));
        let refused = if key.in_port() != link.vl.in_port {
            Some(VlDrop::WrongPort)
        } else if !is_end_system_mac(&data[6..12]) {
            Some(VlDrop::BadSource)
        } else if self.network.is_some_and(|n| data[11] >> 5 != n) {
            Some(VlDrop::WrongNetwork)
        } else if ethertype != 0x0800 {
            Some(VlDrop::BadEthertype)
        } else if len < link.vl.smin as usize {
            Some(VlDrop::Undersize)
        } else if len > link.vl.smax as usize {
            Some(VlDrop::Oversize)
        } else if link.vl.ip_check && !ip_header_ok(&data[tag..], 14) {
            Some(VlDrop::BadIp)
        } else if !self.accounts[link.account].admit(len, now) {
            Some(VlDrop::Policed)
        } else {
            None
        };
        if let Some(why) = refused {
            c.dropped[why as usize] += 1;
            return drop(if why == VlDrop::Policed { DropReason::Policed } else { DropReason::Filtered });
        }
        c.frames_out += 1;
        for &egress in &link.egress {
            out.transmit(egress, pkt);
        }
        Verdict::default()
    }

    /// Links go to the kernel whole, not frame by frame.
    fn kernel(&self) -> ToKernel<'_> {
        ToKernel { links: Some(self), ..Default::default() }
    }

    fn take_back(&mut self, back: FromKernel<'_>) {
        match back {
            FromKernel::AccountCredits { credits, now } => {
                for &(i, credit) in credits {
                    if let Some(a) = self.accounts.get_mut(i) {
                        a.set_credit(credit, now);
                    }
                }
            }
            FromKernel::LinkCounts { id, counts: k } => {
                if let Some(link) = self.links.get_mut(&id) {
                    let c = &mut link.counters;
                    c.frames_in += k.frames_in;
                    c.bytes_in += k.bytes_in;
                    c.frames_out += k.frames_out;
                    for (d, add) in c.dropped.iter_mut().zip(k.dropped) {
                        *d += add;
                    }
                }
            }
            FromKernel::FlowHits { .. } | FromKernel::MeterCounts { .. } | FromKernel::P4Counts(_) => {}
        }
    }

    fn generation(&self) -> u64 {
        0
    }

    /// A new table: links whose contract and outputs are unchanged keep their counters, and
    /// their account its credit when the account's contract is unchanged too; the kernel's copy
    /// is rewritten from it by the switch (its `KernelLinks` differ).
    fn reconfigure(&mut self, next: &crate::Reconfig) -> Result<(), String> {
        #[allow(irrefutable_let_patterns)]
        let crate::Reconfig::Afdx { vls, mac_constant, network } = next
        else {
            return Err("the afdx mode takes only an AFDX configuration".into());
        };
        let mut fresh = AfdxMode::new(vls, *mac_constant).map_err(|e| e.to_string())?.on_network(*network);
        for (id, link) in fresh.links.iter_mut() {
            let Some(old) = self.links.get(id) else { continue };
            if old.vl == link.vl {
                link.counters = old.counters.clone();
                if self.accounts[old.account].contract == fresh.accounts[link.account].contract {
                    fresh.accounts[link.account] = self.accounts[old.account].clone();
                }
            }
        }
        fresh.switch = std::mem::take(&mut self.switch);
        *self = fresh;
        Ok(())
    }

    fn counters(&self) -> Vec<CounterGroup> {
        let mut groups = vec![CounterGroup {
            name: "switch".into(),
            counters: vec![("bad_destination", self.switch.bad_destination), ("unknown_vl", self.switch.unknown_vl)],
        }];
        for (id, link) in &self.links {
            let c = &link.counters;
            let mut counters = vec![("frames_in", c.frames_in), ("bytes_in", c.bytes_in), ("frames_out", c.frames_out)];
            counters.extend(VlDrop::ALL.iter().map(|&d| (d.name(), c.dropped(d))));
            groups.push(CounterGroup { name: format!("vl {id}"), counters });
        }
        groups
    }
}
