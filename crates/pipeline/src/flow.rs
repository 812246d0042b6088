//! Flow entries, their compiled instructions, and the checks a flow-mod must pass (spec §6.4, §7.4.4).

use std::sync::Arc;

use ofp::action::{Action, Instruction};
use ofp::buf::Reader;
use ofp::error::{BadAction, BadInstruction, BadMatch, ErrorCode, MeterModFailed};
use ofp::oxm::{Field, Match, OFPVID_PRESENT};
use ofp::port::*;

/// Nanoseconds on a monotonic clock; the pipeline never reads a clock itself.
pub type Nanos = u64;

/// Instructions in the order the spec executes them, whatever order they were given in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Program {
    pub meter: Option<u32>,
    pub apply: Vec<Action>,
    pub clear: bool,
    pub write: Vec<Action>,
    pub write_metadata: Option<(u64, u64)>,
    pub goto: Option<u8>,
}

/// A flow's instructions as the controller gave them and as compiled. Flows with the same ones
/// share one: a million flows name a few action lists (see `prepare::ActionLists`).
#[derive(Debug, PartialEq, Eq)]
pub struct FlowActions {
    pub instructions: Vec<Instruction>,
    pub program: Program,
}

/// A flow's match as its `ofp_match` on the wire: some 24 bytes, where `Match` takes 64 a field.
/// Decoded for the few requests that return it (flow stats, flow-removed); lookups use the
/// classifier's key and mask.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredMatch(Box<[u8]>);

impl StoredMatch {
    pub fn new(m: &Match) -> StoredMatch {
        // Exactly the padded length: a boxed slice of a longer Vec would be a second allocation.
        let mut out = Vec::with_capacity(m.unpadded_len().next_multiple_of(8));
        m.encode(&mut out);
        StoredMatch(out.into_boxed_slice())
    }

    /// The stored form of a match read from `wire` (an `ofp_match` with its padding, and perhaps
    /// more after it) that decoded without error: the same bytes [`StoredMatch::new`] would encode
    /// from the decoded match, as decoding takes only basic-class fields of their width's length,
    /// which is what encoding writes back; only the padding, which decoding skips, is zeroed
    /// here. `None` if `wire` is shorter than the match says.
    pub fn from_wire(wire: &[u8]) -> Option<StoredMatch> {
        let len = u16::from_be_bytes([*wire.get(2)?, *wire.get(3)?]) as usize;
        let mut out: Box<[u8]> = wire.get(..len.next_multiple_of(8))?.into();
        out[len..].fill(0);
        Some(StoredMatch(out))
    }

    pub fn to_match(&self) -> Match {
        Match::decode(&mut Reader::new(&self.0, ErrorCode::BadMatch(BadMatch::BadLen)))
            .expect("a stored match was encoded from a valid one")
    }

    /// No field: the match of every packet.
    pub fn is_empty(&self) -> bool {
        self.0.len() <= 8
    }
}

#[derive(Clone, Debug)]
pub struct FlowEntry {
    pub table_id: u8,
    pub priority: u16,
    pub match_: StoredMatch,
    pub cookie: u64,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub flags: u16,
    pub actions: Arc<FlowActions>,
    pub packet_count: u64,
    pub byte_count: u64,
    pub created: Nanos,
    pub last_used: Nanos,
}

impl FlowEntry {
    /// A table-miss entry: priority 0 and no match field (spec §5.4). Its packet-ins say NO_MATCH.
    pub fn is_table_miss(&self) -> bool {
        self.priority == 0 && self.match_.is_empty()
    }

    /// Whether the entry outputs to `port` (in apply or write actions), for out_port filters.
    pub fn outputs_to(&self, port: u32) -> bool {
        port == OFPP_ANY || self.actions().any(|a| matches!(a, Action::Output { port: p, .. } if *p == port))
    }

    pub fn uses_group(&self, group: u32) -> bool {
        group == ofp::group_meter::OFPG_ANY || self.actions().any(|a| matches!(a, Action::Group(g) if *g == group))
    }

    /// The groups its actions name.
    pub fn groups(&self) -> impl Iterator<Item = u32> + '_ {
        self.actions().filter_map(|a| match a {
            Action::Group(g) => Some(*g),
            _ => None,
        })
    }

    fn actions(&self) -> impl Iterator<Item = &Action> {
        self.actions.program.apply.iter().chain(self.actions.program.write.iter())
    }

    pub fn duration(&self, now: Nanos) -> (u32, u32) {
        let d = now.saturating_sub(self.created);
        ((d / 1_000_000_000) as u32, (d % 1_000_000_000) as u32)
    }
}

/// What the validator needs to know about the switch.
pub struct Limits<'a> {
    pub n_tables: u8,
    pub group_exists: &'a dyn Fn(u32) -> bool,
    pub meter_exists: &'a dyn Fn(u32) -> bool,
}

/// Checks a flow's instructions, apart from [`order`]: a flow-mod whose
/// instructions an installed flow already has shares that flow's program and builds none.
/// Returns the table the flow goes to, if any.
pub fn check(table_id: u8, instructions: &[Instruction], limits: &Limits<'_>) -> Result<Option<u8>, ErrorCode> {
    let mut goto = None;
    for (i, inst) in instructions.iter().enumerate() {
        let t = inst.type_code();
        if instructions[..i].iter().any(|other| other.type_code() == t) {
            return Err(ErrorCode::BadInstruction(BadInstruction::UnsupInst));
        }
        match inst {
            Instruction::GotoTable(t) => {
                if *t <= table_id || *t >= limits.n_tables {
                    return Err(ErrorCode::BadInstruction(BadInstruction::BadTableId));
                }
                goto = Some(*t);
            }
            Instruction::WriteActions(a) | Instruction::ApplyActions(a) => validate_actions(a, false, limits)?,
            Instruction::Meter(m) => {
                if !(limits.meter_exists)(*m) {
                    return Err(ErrorCode::MeterModFailed(MeterModFailed::UnknownMeter));
                }
            }
            Instruction::WriteMetadata { .. } | Instruction::ClearActions => {}
            Instruction::Experimenter { .. } => {
                return Err(ErrorCode::BadInstruction(BadInstruction::BadExperimenter));
            }
        }
    }
    Ok(goto)
}

/// Checked instructions in the order the spec runs them.
pub fn order(instructions: &[Instruction]) -> Program {
    let mut p = Program::default();
    for inst in instructions {
        match inst {
            Instruction::GotoTable(t) => p.goto = Some(*t),
            Instruction::WriteMetadata { metadata, mask } => p.write_metadata = Some((*metadata, *mask)),
            // An action set holds one action per type (set-field: per field); later ones win.
            Instruction::WriteActions(a) => p.write = a.clone(),
            Instruction::ApplyActions(a) => p.apply = a.clone(),
            Instruction::ClearActions => p.clear = true,
            Instruction::Meter(m) => p.meter = Some(*m),
            Instruction::Experimenter { .. } => {}
        }
    }
    p
}

/// Fields a set-field action may write. Not the pipeline's own (in_port, metadata) and not the
/// IPv6 extension-header summary, which describes headers rather than holding a value. eth_type and
/// ip_proto are settable (OpenFlow 1.3 §7.2.3.7 lists them): the field alone is rewritten.
pub fn settable(field: Field) -> bool {
    !matches!(field, Field::InPort | Field::InPhyPort | Field::Metadata | Field::Ipv6Exthdr)
}

/// Checks actions of a flow, bucket or packet-out (`packet_out` allows output to TABLE).
pub fn validate_actions(actions: &[Action], packet_out: bool, limits: &Limits<'_>) -> Result<(), ErrorCode> {
    let bad = |c| Err(ErrorCode::BadAction(c));
    for a in actions {
        match a {
            Action::Output { port, .. } => {
                let ok = match *port {
                    0 => false,
                    p if p < OFPP_MAX => true,
                    OFPP_IN_PORT | OFPP_NORMAL | OFPP_FLOOD | OFPP_ALL | OFPP_CONTROLLER | OFPP_LOCAL => true,
                    OFPP_TABLE => packet_out,
                    _ => false,
                };
                if !ok {
                    return bad(BadAction::BadOutPort);
                }
            }
            Action::Group(g) if !(limits.group_exists)(*g) => return bad(BadAction::BadOutGroup),
            Action::PushVlan(et) if !matches!(*et, 0x8100 | 0x88a8) => return bad(BadAction::BadArgument),
            Action::PushMpls(et) if !matches!(*et, 0x8847 | 0x8848) => return bad(BadAction::BadArgument),
            Action::PushPbb(et) if *et != 0x88e7 => return bad(BadAction::BadArgument),
            Action::SetField(oxm) => {
                if !settable(oxm.field) {
                    return bad(BadAction::BadSetType);
                }
                let max = if oxm.field == Field::VlanVid { 0x1fff } else { oxm.field.max_value() };
                if oxm.value > max {
                    return bad(BadAction::BadSetArgument);
                }
            }
            Action::Experimenter { .. } => return bad(BadAction::BadExperimenter),
            _ => {}
        }
    }
    Ok(())
}

/// Normalises a set-field vlan_vid value: the tag is present after the action whatever the
/// controller put in the OFPVID_PRESENT bit.
pub fn vlan_vid_of(value: u128) -> u16 {
    (value as u16 & 0x0fff) | OFPVID_PRESENT
}
