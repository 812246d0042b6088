//! Actions (spec §7.2.5) and instructions (§7.2.4).

use crate::buf::{Reader, Writer};
use crate::error::{short, BadAction, BadInstruction, BadMatch, DecodeError, ErrorCode};
use crate::oxm::OxmField;

pub mod action_type {
    pub const OUTPUT: u16 = 0;
    pub const COPY_TTL_OUT: u16 = 11;
    pub const COPY_TTL_IN: u16 = 12;
    pub const SET_MPLS_TTL: u16 = 15;
    pub const DEC_MPLS_TTL: u16 = 16;
    pub const PUSH_VLAN: u16 = 17;
    pub const POP_VLAN: u16 = 18;
    pub const PUSH_MPLS: u16 = 19;
    pub const POP_MPLS: u16 = 20;
    pub const SET_QUEUE: u16 = 21;
    pub const GROUP: u16 = 22;
    pub const SET_NW_TTL: u16 = 23;
    pub const DEC_NW_TTL: u16 = 24;
    pub const SET_FIELD: u16 = 25;
    pub const PUSH_PBB: u16 = 26;
    pub const POP_PBB: u16 = 27;
    pub const EXPERIMENTER: u16 = 0xffff;
    /// Every standard action type, for table-features properties.
    pub const ALL: &[u16] = &[
        OUTPUT,
        COPY_TTL_OUT,
        COPY_TTL_IN,
        SET_MPLS_TTL,
        DEC_MPLS_TTL,
        PUSH_VLAN,
        POP_VLAN,
        PUSH_MPLS,
        POP_MPLS,
        SET_QUEUE,
        GROUP,
        SET_NW_TTL,
        DEC_NW_TTL,
        SET_FIELD,
        PUSH_PBB,
        POP_PBB,
    ];
}

pub mod instruction_type {
    pub const GOTO_TABLE: u16 = 1;
    pub const WRITE_METADATA: u16 = 2;
    pub const WRITE_ACTIONS: u16 = 3;
    pub const APPLY_ACTIONS: u16 = 4;
    pub const CLEAR_ACTIONS: u16 = 5;
    pub const METER: u16 = 6;
    pub const EXPERIMENTER: u16 = 0xffff;
    pub const ALL: &[u16] = &[GOTO_TABLE, WRITE_METADATA, WRITE_ACTIONS, APPLY_ACTIONS, CLEAR_ACTIONS, METER];
}

/// `max_len` meaning "send the whole packet, do not buffer".
pub const OFPCML_NO_BUFFER: u16 = 0xffff;
pub const OFPCML_MAX: u16 = 0xffe5;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Output { port: u32, max_len: u16 },
    CopyTtlOut,
    CopyTtlIn,
    SetMplsTtl(u8),
    DecMplsTtl,
    PushVlan(u16),
    PopVlan,
    PushMpls(u16),
    PopMpls(u16),
    SetQueue(u32),
    Group(u32),
    SetNwTtl(u8),
    DecNwTtl,
    SetField(OxmField),
    PushPbb(u16),
    PopPbb,
    Experimenter { experimenter: u32, data: Vec<u8> },
}

impl Action {
    pub fn output(port: u32) -> Action {
        Action::Output { port, max_len: 0 }
    }

    pub fn type_code(&self) -> u16 {
        use action_type as t;
        match self {
            Action::Output { .. } => t::OUTPUT,
            Action::CopyTtlOut => t::COPY_TTL_OUT,
            Action::CopyTtlIn => t::COPY_TTL_IN,
            Action::SetMplsTtl(_) => t::SET_MPLS_TTL,
            Action::DecMplsTtl => t::DEC_MPLS_TTL,
            Action::PushVlan(_) => t::PUSH_VLAN,
            Action::PopVlan => t::POP_VLAN,
            Action::PushMpls(_) => t::PUSH_MPLS,
            Action::PopMpls(_) => t::POP_MPLS,
            Action::SetQueue(_) => t::SET_QUEUE,
            Action::Group(_) => t::GROUP,
            Action::SetNwTtl(_) => t::SET_NW_TTL,
            Action::DecNwTtl => t::DEC_NW_TTL,
            Action::SetField(_) => t::SET_FIELD,
            Action::PushPbb(_) => t::PUSH_PBB,
            Action::PopPbb => t::POP_PBB,
            Action::Experimenter { .. } => t::EXPERIMENTER,
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(self.type_code());
        out.put_u16(0); // length, patched below
        match self {
            Action::Output { port, max_len } => {
                out.put_u32(*port);
                out.put_u16(*max_len);
                out.put_zeros(6);
            }
            Action::CopyTtlOut
            | Action::CopyTtlIn
            | Action::DecMplsTtl
            | Action::PopVlan
            | Action::DecNwTtl
            | Action::PopPbb => out.put_zeros(4),
            Action::SetMplsTtl(ttl) | Action::SetNwTtl(ttl) => {
                out.put_u8(*ttl);
                out.put_zeros(3);
            }
            Action::PushVlan(et) | Action::PushMpls(et) | Action::PopMpls(et) | Action::PushPbb(et) => {
                out.put_u16(*et);
                out.put_zeros(2);
            }
            Action::SetQueue(id) | Action::Group(id) => out.put_u32(*id),
            Action::SetField(oxm) => {
                oxm.encode(out);
                out.pad8_from(start);
            }
            Action::Experimenter { experimenter, data } => {
                out.put_u32(*experimenter);
                out.extend_from_slice(data);
                out.pad8_from(start);
            }
        }
        let len = (out.len() - start) as u16;
        out.patch_u16(start + 2, len);
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Action, DecodeError> {
        use action_type as t;
        let bad_len = |what| DecodeError::new(ErrorCode::BadAction(BadAction::BadLen), what);
        let typ = r.u16("action type")?;
        let len = r.u16("action length")? as usize;
        if len < 8 || !len.is_multiple_of(8) {
            return Err(bad_len("action length not a positive multiple of 8"));
        }
        let mut body = r.sub(len - 4, short::ACT_LEN, "action body")?;
        let fixed = |want: usize| if len == want { Ok(()) } else { Err(bad_len("action length wrong for type")) };
        let action = match typ {
            t::OUTPUT => {
                fixed(16)?;
                let port = body.u32("output port")?;
                let max_len = body.u16("output max_len")?;
                Action::Output { port, max_len }
            }
            t::COPY_TTL_OUT => fixed(8).map(|_| Action::CopyTtlOut)?,
            t::COPY_TTL_IN => fixed(8).map(|_| Action::CopyTtlIn)?,
            t::DEC_MPLS_TTL => fixed(8).map(|_| Action::DecMplsTtl)?,
            t::POP_VLAN => fixed(8).map(|_| Action::PopVlan)?,
            t::DEC_NW_TTL => fixed(8).map(|_| Action::DecNwTtl)?,
            t::POP_PBB => fixed(8).map(|_| Action::PopPbb)?,
            t::SET_MPLS_TTL => fixed(8).and_then(|_| body.u8("ttl")).map(Action::SetMplsTtl)?,
            t::SET_NW_TTL => fixed(8).and_then(|_| body.u8("ttl")).map(Action::SetNwTtl)?,
            t::PUSH_VLAN => fixed(8).and_then(|_| body.u16("ethertype")).map(Action::PushVlan)?,
            t::PUSH_MPLS => fixed(8).and_then(|_| body.u16("ethertype")).map(Action::PushMpls)?,
            t::POP_MPLS => fixed(8).and_then(|_| body.u16("ethertype")).map(Action::PopMpls)?,
            t::PUSH_PBB => fixed(8).and_then(|_| body.u16("ethertype")).map(Action::PushPbb)?,
            t::SET_QUEUE => fixed(8).and_then(|_| body.u32("queue")).map(Action::SetQueue)?,
            t::GROUP => fixed(8).and_then(|_| body.u32("group")).map(Action::Group)?,
            t::SET_FIELD => {
                let oxm = OxmField::decode(&mut body).map_err(|e| {
                    let code = match e.code {
                        ErrorCode::BadMatch(BadMatch::BadField) => BadAction::BadSetType,
                        _ => BadAction::BadSetLen,
                    };
                    DecodeError::new(ErrorCode::BadAction(code), e.context)
                })?;
                if oxm.mask.is_some() {
                    return Err(DecodeError::new(
                        ErrorCode::BadAction(BadAction::BadSetArgument),
                        "set-field with a mask",
                    ));
                }
                // What is left must be padding shorter than 8 bytes.
                if body.remaining() >= 8 {
                    return Err(DecodeError::new(ErrorCode::BadAction(BadAction::BadSetLen), "set-field too long"));
                }
                Action::SetField(oxm)
            }
            t::EXPERIMENTER => {
                let experimenter = body.u32("experimenter")?;
                Action::Experimenter { experimenter, data: body.rest().to_vec() }
            }
            _ => return Err(DecodeError::new(ErrorCode::BadAction(BadAction::BadType), "unknown action type")),
        };
        Ok(action)
    }
}

pub fn encode_actions(actions: &[Action], out: &mut Vec<u8>) {
    for a in actions {
        a.encode(out);
    }
}

/// Decodes actions until the reader is empty.
pub fn decode_actions(r: &mut Reader<'_>) -> Result<Vec<Action>, DecodeError> {
    let mut actions = Vec::new();
    while !r.is_empty() {
        actions.push(Action::decode(r)?);
    }
    Ok(actions)
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Instruction {
    GotoTable(u8),
    WriteMetadata { metadata: u64, mask: u64 },
    WriteActions(Vec<Action>),
    ApplyActions(Vec<Action>),
    ClearActions,
    Meter(u32),
    Experimenter { experimenter: u32, data: Vec<u8> },
}

impl Instruction {
    pub fn type_code(&self) -> u16 {
        use instruction_type as t;
        match self {
            Instruction::GotoTable(_) => t::GOTO_TABLE,
            Instruction::WriteMetadata { .. } => t::WRITE_METADATA,
            Instruction::WriteActions(_) => t::WRITE_ACTIONS,
            Instruction::ApplyActions(_) => t::APPLY_ACTIONS,
            Instruction::ClearActions => t::CLEAR_ACTIONS,
            Instruction::Meter(_) => t::METER,
            Instruction::Experimenter { .. } => t::EXPERIMENTER,
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(self.type_code());
        out.put_u16(0);
        match self {
            Instruction::GotoTable(t) => {
                out.put_u8(*t);
                out.put_zeros(3);
            }
            Instruction::WriteMetadata { metadata, mask } => {
                out.put_zeros(4);
                out.put_u64(*metadata);
                out.put_u64(*mask);
            }
            Instruction::WriteActions(a) | Instruction::ApplyActions(a) => {
                out.put_zeros(4);
                encode_actions(a, out);
            }
            Instruction::ClearActions => out.put_zeros(4),
            Instruction::Meter(id) => out.put_u32(*id),
            Instruction::Experimenter { experimenter, data } => {
                out.put_u32(*experimenter);
                out.extend_from_slice(data);
                out.pad8_from(start);
            }
        }
        let len = (out.len() - start) as u16;
        out.patch_u16(start + 2, len);
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Instruction, DecodeError> {
        use instruction_type as t;
        let bad_len = |what| DecodeError::new(ErrorCode::BadInstruction(BadInstruction::BadLen), what);
        let typ = r.u16("instruction type")?;
        let len = r.u16("instruction length")? as usize;
        if len < 8 || !len.is_multiple_of(8) {
            return Err(bad_len("instruction length not a positive multiple of 8"));
        }
        let mut body = r.sub(len - 4, short::INST_LEN, "instruction body")?;
        let fixed = |want: usize| if len == want { Ok(()) } else { Err(bad_len("instruction length wrong for type")) };
        Ok(match typ {
            t::GOTO_TABLE => {
                fixed(8)?;
                Instruction::GotoTable(body.u8("table id")?)
            }
            t::WRITE_METADATA => {
                fixed(24)?;
                body.skip(4, "pad")?;
                Instruction::WriteMetadata { metadata: body.u64("metadata")?, mask: body.u64("metadata mask")? }
            }
            t::WRITE_ACTIONS | t::APPLY_ACTIONS => {
                body.skip(4, "pad")?;
                let actions = decode_actions(&mut body)?;
                if typ == t::WRITE_ACTIONS {
                    Instruction::WriteActions(actions)
                } else {
                    Instruction::ApplyActions(actions)
                }
            }
            t::CLEAR_ACTIONS => fixed(8).map(|_| Instruction::ClearActions)?,
            t::METER => fixed(8).and_then(|_| body.u32("meter id")).map(Instruction::Meter)?,
            t::EXPERIMENTER => {
                let experimenter = body.u32("experimenter")?;
                Instruction::Experimenter { experimenter, data: body.rest().to_vec() }
            }
            _ => {
                return Err(DecodeError::new(
                    ErrorCode::BadInstruction(BadInstruction::UnknownInst),
                    "unknown instruction type",
                ))
            }
        })
    }
}

pub fn encode_instructions(instructions: &[Instruction], out: &mut Vec<u8>) {
    for i in instructions {
        i.encode(out);
    }
}

pub fn decode_instructions(r: &mut Reader<'_>) -> Result<Vec<Instruction>, DecodeError> {
    let mut out = Vec::new();
    while !r.is_empty() {
        out.push(Instruction::decode(r)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oxm::Field;

    fn all_actions() -> Vec<Action> {
        vec![
            Action::Output { port: 3, max_len: 128 },
            Action::CopyTtlOut,
            Action::CopyTtlIn,
            Action::SetMplsTtl(9),
            Action::DecMplsTtl,
            Action::PushVlan(0x88a8),
            Action::PopVlan,
            Action::PushMpls(0x8847),
            Action::PopMpls(0x0800),
            Action::SetQueue(7),
            Action::Group(42),
            Action::SetNwTtl(3),
            Action::DecNwTtl,
            Action::SetField(OxmField::exact(Field::VlanVid, 0x1005)),
            Action::SetField(OxmField::exact(Field::Ipv6Src, 0x2001_0db8 << 96 | 1)),
            Action::PushPbb(0x88e7),
            Action::PopPbb,
            Action::Experimenter { experimenter: 0x2320, data: vec![1, 2, 3, 4, 5, 6, 7, 8] },
        ]
    }

    #[test]
    fn every_action_round_trips() {
        for a in all_actions() {
            let mut out = Vec::new();
            a.encode(&mut out);
            assert_eq!(out.len() % 8, 0, "{a:?}");
            let back = Action::decode(&mut Reader::new(&out, short::ACT_LEN)).unwrap();
            assert_eq!(back, a);
        }
    }

    #[test]
    fn every_instruction_round_trips() {
        let all = vec![
            Instruction::GotoTable(5),
            Instruction::WriteMetadata { metadata: 0xdead, mask: 0xffff },
            Instruction::WriteActions(all_actions()),
            Instruction::ApplyActions(vec![Action::output(1)]),
            Instruction::ClearActions,
            Instruction::Meter(9),
            Instruction::Experimenter { experimenter: 1, data: vec![0; 8] },
        ];
        let mut out = Vec::new();
        encode_instructions(&all, &mut out);
        let back = decode_instructions(&mut Reader::new(&out, short::INST_LEN)).unwrap();
        assert_eq!(back, all);
    }

    #[test]
    fn bad_action_lengths_and_types() {
        // Output claiming 8 bytes.
        let out = [0, 0, 0, 8, 0, 0, 0, 1];
        let e = Action::decode(&mut Reader::new(&out, short::ACT_LEN)).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadAction(BadAction::BadLen));
        let unknown = [0, 99, 0, 8, 0, 0, 0, 0];
        let e = Action::decode(&mut Reader::new(&unknown, short::ACT_LEN)).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadAction(BadAction::BadType));
        let set_field_masked = [0, 25, 0, 16, 0x80, 0, 0x0d, 4, 0x10, 5, 0x1f, 0xff, 0, 0, 0, 0];
        let e = Action::decode(&mut Reader::new(&set_field_masked, short::ACT_LEN)).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadAction(BadAction::BadSetArgument));
        let unknown_inst = [0, 77, 0, 8, 0, 0, 0, 0];
        let e = Instruction::decode(&mut Reader::new(&unknown_inst, short::INST_LEN)).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadInstruction(BadInstruction::UnknownInst));
    }
}
