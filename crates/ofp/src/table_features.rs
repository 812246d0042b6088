//! `ofp_table_features` and its properties (spec §7.3.5.5).

use crate::buf::{Reader, Writer};
use crate::error::{short, DecodeError, ErrorCode, TableFeaturesFailed};
use crate::oxm::OFPXMC_EXPERIMENTER;

pub mod prop_type {
    pub const INSTRUCTIONS: u16 = 0;
    pub const INSTRUCTIONS_MISS: u16 = 1;
    pub const NEXT_TABLES: u16 = 2;
    pub const NEXT_TABLES_MISS: u16 = 3;
    pub const WRITE_ACTIONS: u16 = 4;
    pub const WRITE_ACTIONS_MISS: u16 = 5;
    pub const APPLY_ACTIONS: u16 = 6;
    pub const APPLY_ACTIONS_MISS: u16 = 7;
    pub const MATCH: u16 = 8;
    pub const WILDCARDS: u16 = 10;
    pub const WRITE_SETFIELD: u16 = 12;
    pub const WRITE_SETFIELD_MISS: u16 = 13;
    pub const APPLY_SETFIELD: u16 = 14;
    pub const APPLY_SETFIELD_MISS: u16 = 15;
    pub const EXPERIMENTER: u16 = 0xfffe;
    pub const EXPERIMENTER_MISS: u16 = 0xffff;
}

/// An instruction or action type as listed in a property (`ofp_instruction`/`ofp_action_header` ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TypeId {
    pub typ: u16,
    /// Set for experimenter types, which carry their experimenter id.
    pub experimenter: Option<u32>,
}

impl TypeId {
    pub fn standard(typ: u16) -> TypeId {
        TypeId { typ, experimenter: None }
    }
}

/// An OXM header as listed in a property; experimenter OXMs carry their experimenter id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OxmId {
    pub header: u32,
    pub experimenter: Option<u32>,
}

impl OxmId {
    pub fn basic(field: crate::oxm::Field) -> OxmId {
        OxmId { header: field.header(false), experimenter: None }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TableFeatureProp {
    Instructions { miss: bool, ids: Vec<TypeId> },
    NextTables { miss: bool, tables: Vec<u8> },
    WriteActions { miss: bool, ids: Vec<TypeId> },
    ApplyActions { miss: bool, ids: Vec<TypeId> },
    Match(Vec<OxmId>),
    Wildcards(Vec<OxmId>),
    WriteSetfield { miss: bool, ids: Vec<OxmId> },
    ApplySetfield { miss: bool, ids: Vec<OxmId> },
    Experimenter { miss: bool, experimenter: u32, exp_type: u32, data: Vec<u8> },
}

fn put_type_ids(ids: &[TypeId], out: &mut Vec<u8>) {
    for id in ids {
        out.put_u16(id.typ);
        match id.experimenter {
            Some(e) => {
                out.put_u16(8);
                out.put_u32(e);
            }
            None => out.put_u16(4),
        }
    }
}

fn get_type_ids(r: &mut Reader<'_>) -> Result<Vec<TypeId>, DecodeError> {
    let mut ids = Vec::new();
    while !r.is_empty() {
        let typ = r.u16("id type")?;
        let len = r.u16("id length")? as usize;
        if len < 4 {
            return Err(DecodeError::new(short::TF_LEN, "id length"));
        }
        let mut body = r.sub(len - 4, short::TF_LEN, "id body")?;
        let experimenter = if typ == 0xffff { Some(body.u32("experimenter")?) } else { None };
        ids.push(TypeId { typ, experimenter });
    }
    Ok(ids)
}

fn put_oxm_ids(ids: &[OxmId], out: &mut Vec<u8>) {
    for id in ids {
        out.put_u32(id.header);
        if let Some(e) = id.experimenter {
            out.put_u32(e);
        }
    }
}

fn get_oxm_ids(r: &mut Reader<'_>) -> Result<Vec<OxmId>, DecodeError> {
    let mut ids = Vec::new();
    while !r.is_empty() {
        let header = r.u32("oxm id")?;
        let experimenter =
            if (header >> 16) as u16 == OFPXMC_EXPERIMENTER { Some(r.u32("oxm experimenter")?) } else { None };
        ids.push(OxmId { header, experimenter });
    }
    Ok(ids)
}

impl TableFeatureProp {
    pub fn prop_type(&self) -> u16 {
        use prop_type as p;
        let pick = |miss: bool, hit: u16, miss_t: u16| if miss { miss_t } else { hit };
        match self {
            TableFeatureProp::Instructions { miss, .. } => pick(*miss, p::INSTRUCTIONS, p::INSTRUCTIONS_MISS),
            TableFeatureProp::NextTables { miss, .. } => pick(*miss, p::NEXT_TABLES, p::NEXT_TABLES_MISS),
            TableFeatureProp::WriteActions { miss, .. } => pick(*miss, p::WRITE_ACTIONS, p::WRITE_ACTIONS_MISS),
            TableFeatureProp::ApplyActions { miss, .. } => pick(*miss, p::APPLY_ACTIONS, p::APPLY_ACTIONS_MISS),
            TableFeatureProp::Match(_) => p::MATCH,
            TableFeatureProp::Wildcards(_) => p::WILDCARDS,
            TableFeatureProp::WriteSetfield { miss, .. } => pick(*miss, p::WRITE_SETFIELD, p::WRITE_SETFIELD_MISS),
            TableFeatureProp::ApplySetfield { miss, .. } => pick(*miss, p::APPLY_SETFIELD, p::APPLY_SETFIELD_MISS),
            TableFeatureProp::Experimenter { miss, .. } => pick(*miss, p::EXPERIMENTER, p::EXPERIMENTER_MISS),
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(self.prop_type());
        out.put_u16(0);
        match self {
            TableFeatureProp::Instructions { ids, .. }
            | TableFeatureProp::WriteActions { ids, .. }
            | TableFeatureProp::ApplyActions { ids, .. } => put_type_ids(ids, out),
            TableFeatureProp::NextTables { tables, .. } => out.extend_from_slice(tables),
            TableFeatureProp::Match(ids)
            | TableFeatureProp::Wildcards(ids)
            | TableFeatureProp::WriteSetfield { ids, .. }
            | TableFeatureProp::ApplySetfield { ids, .. } => put_oxm_ids(ids, out),
            TableFeatureProp::Experimenter { experimenter, exp_type, data, .. } => {
                out.put_u32(*experimenter);
                out.put_u32(*exp_type);
                out.extend_from_slice(data);
            }
        }
        // The length excludes the padding to 8 that follows.
        let len = (out.len() - start) as u16;
        out.patch_u16(start + 2, len);
        out.pad8_from(start);
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<TableFeatureProp, DecodeError> {
        use prop_type as p;
        let typ = r.u16("property type")?;
        let len = r.u16("property length")? as usize;
        if len < 4 {
            return Err(DecodeError::new(short::TF_LEN, "property length below 4"));
        }
        let mut body = r.sub(len - 4, short::TF_LEN, "property body")?;
        let padding = crate::buf::pad8(len) - len;
        r.skip(padding.min(r.remaining()), "property padding")?;
        let miss = typ & 1 == 1;
        Ok(match typ {
            p::INSTRUCTIONS | p::INSTRUCTIONS_MISS => {
                TableFeatureProp::Instructions { miss, ids: get_type_ids(&mut body)? }
            }
            p::NEXT_TABLES | p::NEXT_TABLES_MISS => TableFeatureProp::NextTables { miss, tables: body.rest().to_vec() },
            p::WRITE_ACTIONS | p::WRITE_ACTIONS_MISS => {
                TableFeatureProp::WriteActions { miss, ids: get_type_ids(&mut body)? }
            }
            p::APPLY_ACTIONS | p::APPLY_ACTIONS_MISS => {
                TableFeatureProp::ApplyActions { miss, ids: get_type_ids(&mut body)? }
            }
            p::MATCH => TableFeatureProp::Match(get_oxm_ids(&mut body)?),
            p::WILDCARDS => TableFeatureProp::Wildcards(get_oxm_ids(&mut body)?),
            p::WRITE_SETFIELD | p::WRITE_SETFIELD_MISS => {
                TableFeatureProp::WriteSetfield { miss, ids: get_oxm_ids(&mut body)? }
            }
            p::APPLY_SETFIELD | p::APPLY_SETFIELD_MISS => {
                TableFeatureProp::ApplySetfield { miss, ids: get_oxm_ids(&mut body)? }
            }
            p::EXPERIMENTER | p::EXPERIMENTER_MISS => TableFeatureProp::Experimenter {
                miss,
                experimenter: body.u32("experimenter")?,
                exp_type: body.u32("exp_type")?,
                data: body.rest().to_vec(),
            },
            _ => {
                return Err(DecodeError::new(
                    ErrorCode::TableFeaturesFailed(TableFeaturesFailed::BadType),
                    "unknown table feature property",
                ))
            }
        })
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TableFeatures {
    pub table_id: u8,
    pub name: String,
    pub metadata_match: u64,
    pub metadata_write: u64,
    pub config: u32,
    pub max_entries: u32,
    pub properties: Vec<TableFeatureProp>,
}

impl TableFeatures {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(0);
        out.put_u8(self.table_id);
        out.put_zeros(5);
        out.put_string(&self.name, 32);
        out.put_u64(self.metadata_match);
        out.put_u64(self.metadata_write);
        out.put_u32(self.config);
        out.put_u32(self.max_entries);
        for p in &self.properties {
            p.encode(out);
        }
        let len = (out.len() - start) as u16;
        out.patch_u16(start, len);
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<TableFeatures, DecodeError> {
        let len = r.u16("table features length")? as usize;
        if len < 64 {
            return Err(DecodeError::new(short::TF_LEN, "table features length below 64"));
        }
        let mut body = r.sub(len - 2, short::TF_LEN, "table features body")?;
        let table_id = body.u8("table id")?;
        body.skip(5, "pad")?;
        let name = body.string(32, "table name")?;
        let metadata_match = body.u64("metadata_match")?;
        let metadata_write = body.u64("metadata_write")?;
        let config = body.u32("config")?;
        let max_entries = body.u32("max_entries")?;
        let mut properties = Vec::new();
        while !body.is_empty() {
            properties.push(TableFeatureProp::decode(&mut body)?);
        }
        Ok(TableFeatures { table_id, name, metadata_match, metadata_write, config, max_entries, properties })
    }
}
