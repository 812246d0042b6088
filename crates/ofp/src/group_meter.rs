//! Group buckets (spec §7.3.4.2) and meter bands (§7.3.4.4), shared by the mod messages and the
//! multipart replies that echo them.

use crate::action::{decode_actions, encode_actions, Action};
use crate::buf::{Reader, Writer};
use crate::error::{BadRequest, DecodeError, ErrorCode, GroupModFailed, MeterModFailed};

pub const OFPG_MAX: u32 = 0xffff_ff00;
pub const OFPG_ALL: u32 = 0xffff_fffc;
pub const OFPG_ANY: u32 = 0xffff_ffff;

pub mod group_type {
    pub const ALL: u8 = 0;
    pub const SELECT: u8 = 1;
    pub const INDIRECT: u8 = 2;
    pub const FAST_FAILOVER: u8 = 3;
}

pub mod group_command {
    pub const ADD: u16 = 0;
    pub const MODIFY: u16 = 1;
    pub const DELETE: u16 = 2;
}

pub const OFPM_MAX: u32 = 0xffff_0000;
pub const OFPM_SLOWPATH: u32 = 0xffff_fffd;
pub const OFPM_CONTROLLER: u32 = 0xffff_fffe;
pub const OFPM_ALL: u32 = 0xffff_ffff;

pub mod meter_command {
    pub const ADD: u16 = 0;
    pub const MODIFY: u16 = 1;
    pub const DELETE: u16 = 2;
}

pub mod meter_flags {
    pub const KBPS: u16 = 1 << 0;
    pub const PKTPS: u16 = 1 << 1;
    pub const BURST: u16 = 1 << 2;
    pub const STATS: u16 = 1 << 3;
}

pub mod band_type {
    pub const DROP: u16 = 1;
    pub const DSCP_REMARK: u16 = 2;
    pub const EXPERIMENTER: u16 = 0xffff;
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Bucket {
    pub weight: u16,
    pub watch_port: u32,
    pub watch_group: u32,
    pub actions: Vec<Action>,
}

impl Bucket {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(0);
        out.put_u16(self.weight);
        out.put_u32(self.watch_port);
        out.put_u32(self.watch_group);
        out.put_zeros(4);
        encode_actions(&self.actions, out);
        let len = (out.len() - start) as u16;
        out.patch_u16(start, len);
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Bucket, DecodeError> {
        let bad = |what| DecodeError::new(ErrorCode::GroupModFailed(GroupModFailed::BadBucket), what);
        let len = r.u16("bucket length")? as usize;
        if len < 16 || !len.is_multiple_of(8) {
            return Err(bad("bucket length"));
        }
        let mut body = r.sub(len - 2, ErrorCode::GroupModFailed(GroupModFailed::BadBucket), "bucket body")?;
        let weight = body.u16("weight")?;
        let watch_port = body.u32("watch_port")?;
        let watch_group = body.u32("watch_group")?;
        body.skip(4, "pad")?;
        let actions = decode_actions(&mut body)?;
        Ok(Bucket { weight, watch_port, watch_group, actions })
    }
}

pub fn encode_buckets(buckets: &[Bucket], out: &mut Vec<u8>) {
    for b in buckets {
        b.encode(out);
    }
}

pub fn decode_buckets(r: &mut Reader<'_>) -> Result<Vec<Bucket>, DecodeError> {
    let mut out = Vec::new();
    while !r.is_empty() {
        out.push(Bucket::decode(r)?);
    }
    Ok(out)
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum BandKind {
    Drop,
    DscpRemark { prec_level: u8 },
    Experimenter { experimenter: u32, data: Vec<u8> },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MeterBand {
    pub rate: u32,
    pub burst_size: u32,
    pub kind: BandKind,
}

impl MeterBand {
    pub fn band_type(&self) -> u16 {
        match self.kind {
            BandKind::Drop => band_type::DROP,
            BandKind::DscpRemark { .. } => band_type::DSCP_REMARK,
            BandKind::Experimenter { .. } => band_type::EXPERIMENTER,
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(self.band_type());
        out.put_u16(0);
        out.put_u32(self.rate);
        out.put_u32(self.burst_size);
        match &self.kind {
            BandKind::Drop => out.put_zeros(4),
            BandKind::DscpRemark { prec_level } => {
                out.put_u8(*prec_level);
                out.put_zeros(3);
            }
            BandKind::Experimenter { experimenter, data } => {
                out.put_u32(*experimenter);
                out.extend_from_slice(data);
                out.pad8_from(start);
            }
        }
        let len = (out.len() - start) as u16;
        out.patch_u16(start + 2, len);
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<MeterBand, DecodeError> {
        let bad = |c, what| DecodeError::new(ErrorCode::MeterModFailed(c), what);
        let typ = r.u16("band type")?;
        let len = r.u16("band length")? as usize;
        if len < 16 || !len.is_multiple_of(8) {
            return Err(bad(MeterModFailed::BadBand, "band length"));
        }
        let mut body = r.sub(len - 4, ErrorCode::BadRequest(BadRequest::BadLen), "band body")?;
        let rate = body.u32("rate")?;
        let burst_size = body.u32("burst")?;
        let kind = match typ {
            band_type::DROP if len == 16 => BandKind::Drop,
            band_type::DSCP_REMARK if len == 16 => BandKind::DscpRemark { prec_level: body.u8("prec_level")? },
            band_type::EXPERIMENTER => {
                let experimenter = body.u32("experimenter")?;
                BandKind::Experimenter { experimenter, data: body.rest().to_vec() }
            }
            _ => return Err(bad(MeterModFailed::BadBand, "unknown band type or length")),
        };
        Ok(MeterBand { rate, burst_size, kind })
    }
}

pub fn encode_bands(bands: &[MeterBand], out: &mut Vec<u8>) {
    for b in bands {
        b.encode(out);
    }
}

pub fn decode_bands(r: &mut Reader<'_>) -> Result<Vec<MeterBand>, DecodeError> {
    let mut out = Vec::new();
    while !r.is_empty() {
        out.push(MeterBand::decode(r)?);
    }
    Ok(out)
}
