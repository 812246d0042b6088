//! Datapath actions: what the OpenFlow pipeline decided for a packet, flattened into a list that
//! can be replayed on every packet of the same megaflow without running the pipeline again.
//!
//! The slow path translates (runs tables, groups, the action set) into these, then executes them
//! exactly as a cache hit does. Executing the same list is what makes the cached and uncached
//! results identical.

use ofp::oxm::Field;
use packet::{FlowKey, Packet};

use crate::classifier::RuleId;
use crate::flow::Nanos;
use crate::meter::{MeterTable, Verdict};

/// A packet-in to be generated, as decided by the pipeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToController {
    pub reason: u8,
    pub table_id: u8,
    pub cookie: u64,
    pub max_len: u16,
    pub in_port: u32,
    pub metadata: u64,
    pub tunnel_id: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DpAction {
    /// Transmit the packet as it is now on a port (a numbered port or `OFPP_LOCAL`).
    Output(u32),
    Controller(ToController),
    SetField(Field, u128),
    PushVlan(u16),
    PopVlan,
    PushMpls(u16),
    PopMpls(u16),
    PushPbb(u16),
    PopPbb,
    SetMplsTtl(u8),
    DecMplsTtl,
    SetNwTtl(u8),
    /// Decrement the IP TTL; a packet whose TTL runs out stops here and, when the switch is
    /// configured to, goes to the controller.
    DecNwTtl(Option<ToController>),
    CopyTtlIn,
    CopyTtlOut,
    SetQueue(u32),
    /// Police the packet; a dropping band ends its processing.
    Meter(u32),
    /// Run the actions on a copy (group buckets); the packet itself is unchanged after.
    Clone(Vec<DpAction>),
}

/// What a packet on this path adds to OpenFlow counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Credits {
    /// Tables looked up, and whether the lookup matched.
    pub tables: Vec<(u8, bool)>,
    pub flows: Vec<(u8, RuleId)>,
    /// (group, bucket index)
    pub buckets: Vec<(u32, u16)>,
    pub groups: Vec<u32>,
    /// A MAC-learning entry to keep fresh: (vlan, mac, port).
    pub learned: Option<(u16, u64, u32)>,
}

/// Where executed packets go.
pub trait Sink {
    /// Transmit `pkt` on `port`; `queue` is the one a `set_queue` chose, if any (otherwise the
    /// port picks one from the frame's VLAN priority).
    fn output(&mut self, port: u32, queue: Option<u32>, pkt: &Packet);
    fn to_controller(&mut self, pkt: &Packet, info: &ToController);
    /// Whether a packet-in was held back so far (by a rate limit). The pipeline keeps a megaflow
    /// entry for a miss whose only outcome is a packet-in only then: in a flood of it, the next
    /// frames cost a cache hit each, not a translation; otherwise the controller's answer would
    /// retire the entry at once.
    fn packet_ins_held_back(&self) -> bool {
        false
    }
}

/// Why executing a packet's actions stopped before their end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// A meter band dropped it (or the meter is gone).
    Meter,
    /// Its IP or MPLS TTL ran out.
    TtlExpired,
}

/// Executes `actions` on `pkt`.
pub fn execute(
    actions: &[DpAction],
    pkt: &mut Packet,
    meters: &mut MeterTable,
    now: Nanos,
    sink: &mut dyn Sink,
) -> Result<(), Stop> {
    execute_on_queue(actions, pkt, meters, now, None, sink)
}

/// `execute` with the queue an enclosing action list chose (group buckets inherit it).
fn execute_on_queue(
    actions: &[DpAction],
    pkt: &mut Packet,
    meters: &mut MeterTable,
    now: Nanos,
    mut queue: Option<u32>,
    sink: &mut dyn Sink,
) -> Result<(), Stop> {
    for a in actions {
        match a {
            DpAction::Output(port) => sink.output(*port, queue, pkt),
            DpAction::Controller(info) => {
                if controller_meter_passes(meters, pkt.len(), now) {
                    sink.to_controller(pkt, info);
                }
            }
            DpAction::SetField(f, v) => pkt.set_field(*f, *v, &mut FlowKey::default()),
            DpAction::PushVlan(t) => pkt.push_vlan(*t),
            DpAction::PopVlan => pkt.pop_vlan(),
            DpAction::PushMpls(t) => pkt.push_mpls(*t),
            DpAction::PopMpls(t) => pkt.pop_mpls(*t),
            DpAction::PushPbb(t) => pkt.push_pbb(*t),
            DpAction::PopPbb => pkt.pop_pbb(),
            DpAction::SetMplsTtl(t) => pkt.set_mpls_ttl(*t),
            DpAction::DecMplsTtl => {
                if pkt.dec_mpls_ttl().is_err() {
                    return Err(Stop::TtlExpired);
                }
            }
            DpAction::SetNwTtl(t) => pkt.set_nw_ttl(*t),
            DpAction::DecNwTtl(to_controller) => {
                if pkt.dec_nw_ttl().is_err() {
                    if let Some(info) = to_controller {
                        if controller_meter_passes(meters, pkt.len(), now) {
                            sink.to_controller(pkt, info);
                        }
                    }
                    return Err(Stop::TtlExpired);
                }
            }
            DpAction::CopyTtlIn => pkt.copy_ttl_in(),
            DpAction::CopyTtlOut => pkt.copy_ttl_out(),
            DpAction::SetQueue(q) => queue = Some(*q),
            DpAction::Meter(id) => {
                let Some(m) = meters.get_mut(*id) else { return Err(Stop::Meter) };
                // Translation charges remarking meters itself; what reaches here only drops.
                if m.charge(pkt.len(), now) == Verdict::Drop {
                    return Err(Stop::Meter);
                }
            }
            DpAction::Clone(inner) => {
                let mut copy = pkt.clone();
                // A bucket that stops (its meter, its TTL) ends only itself.
                let _ = execute_on_queue(inner, &mut copy, meters, now, queue, sink);
            }
        }
    }
    Ok(())
}

/// The OFPM_CONTROLLER meter, if the controller configured one, polices every packet-in.
fn controller_meter_passes(meters: &mut MeterTable, bytes: usize, now: Nanos) -> bool {
    match meters.get_mut(ofp::group_meter::OFPM_CONTROLLER) {
        Some(m) => m.charge(bytes, now) != Verdict::Drop,
        None => true,
    }
}

/// The DSCP after raising the drop precedence of an AF-class code point (RFC 2597: AFxy, y = 1..3)
/// by `levels`; `None` if the packet is not IP or its DSCP is not an AF class.
pub fn remarked_dscp(key: &FlowKey, levels: u8) -> Option<u8> {
    if !key.is_ip() {
        return None;
    }
    let dscp = key.get(Field::IpDscp) as u8;
    let class = dscp >> 3;
    let drop = (dscp >> 1) & 3;
    ((1..=4).contains(&class) && drop >= 1 && dscp & 1 == 0).then(|| (class << 3) | ((drop + levels).min(3) << 1))
}
