//! Multipart requests and replies (spec §7.3.5).
//!
//! About 810 lines, long because the spec has twenty request and reply bodies; each is a short
//! encode/decode pair and they share one dispatch, so they stay in one file.

use crate::action::{decode_instructions, encode_instructions, Instruction};
use crate::buf::{Reader, Writer};
use crate::error::{short, BadRequest, DecodeError, ErrorCode};
use crate::group_meter::{decode_bands, decode_buckets, encode_bands, encode_buckets, Bucket, MeterBand};
use crate::oxm::Match;
use crate::port::Port;
use crate::table_features::TableFeatures;

pub mod mp_type {
    pub const DESC: u16 = 0;
    pub const FLOW: u16 = 1;
    pub const AGGREGATE: u16 = 2;
    pub const TABLE: u16 = 3;
    pub const PORT_STATS: u16 = 4;
    pub const QUEUE: u16 = 5;
    pub const GROUP: u16 = 6;
    pub const GROUP_DESC: u16 = 7;
    pub const GROUP_FEATURES: u16 = 8;
    pub const METER: u16 = 9;
    pub const METER_CONFIG: u16 = 10;
    pub const METER_FEATURES: u16 = 11;
    pub const TABLE_FEATURES: u16 = 12;
    pub const PORT_DESC: u16 = 13;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// `OFPMPF_REQ_MORE` / `OFPMPF_REPLY_MORE`.
pub const MORE: u16 = 1;

/// Body of `OFPMP_FLOW` and `OFPMP_AGGREGATE` requests.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FlowStatsRequest {
    pub table_id: u8,
    pub out_port: u32,
    pub out_group: u32,
    pub cookie: u64,
    pub cookie_mask: u64,
    pub match_: Match,
}

impl Default for FlowStatsRequest {
    fn default() -> Self {
        FlowStatsRequest {
            table_id: 0xff,
            out_port: crate::port::OFPP_ANY,
            out_group: crate::group_meter::OFPG_ANY,
            cookie: 0,
            cookie_mask: 0,
            match_: Match::default(),
        }
    }
}

impl FlowStatsRequest {
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(self.table_id);
        out.put_zeros(3);
        out.put_u32(self.out_port);
        out.put_u32(self.out_group);
        out.put_zeros(4);
        out.put_u64(self.cookie);
        out.put_u64(self.cookie_mask);
        self.match_.encode(out);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let table_id = r.u8("table_id")?;
        r.skip(3, "pad")?;
        let out_port = r.u32("out_port")?;
        let out_group = r.u32("out_group")?;
        r.skip(4, "pad")?;
        let cookie = r.u64("cookie")?;
        let cookie_mask = r.u64("cookie_mask")?;
        let match_ = Match::decode(r)?;
        Ok(FlowStatsRequest { table_id, out_port, out_group, cookie, cookie_mask, match_ })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MultipartRequestBody {
    Desc,
    Flow(FlowStatsRequest),
    Aggregate(FlowStatsRequest),
    Table,
    PortStats { port_no: u32 },
    Queue { port_no: u32, queue_id: u32 },
    Group { group_id: u32 },
    GroupDesc,
    GroupFeatures,
    Meter { meter_id: u32 },
    MeterConfig { meter_id: u32 },
    MeterFeatures,
    TableFeatures(Vec<TableFeatures>),
    PortDesc,
    Experimenter { experimenter: u32, exp_type: u32, data: Vec<u8> },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MultipartRequest {
    pub flags: u16,
    pub body: MultipartRequestBody,
}

impl MultipartRequestBody {
    pub fn mp_type(&self) -> u16 {
        use mp_type as t;
        use MultipartRequestBody::*;
        match self {
            Desc => t::DESC,
            Flow(_) => t::FLOW,
            Aggregate(_) => t::AGGREGATE,
            Table => t::TABLE,
            PortStats { .. } => t::PORT_STATS,
            Queue { .. } => t::QUEUE,
            Group { .. } => t::GROUP,
            GroupDesc => t::GROUP_DESC,
            GroupFeatures => t::GROUP_FEATURES,
            Meter { .. } => t::METER,
            MeterConfig { .. } => t::METER_CONFIG,
            MeterFeatures => t::METER_FEATURES,
            TableFeatures(_) => t::TABLE_FEATURES,
            PortDesc => t::PORT_DESC,
            Experimenter { .. } => t::EXPERIMENTER,
        }
    }
}

impl MultipartRequest {
    pub fn new(body: MultipartRequestBody) -> Self {
        MultipartRequest { flags: 0, body }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        use MultipartRequestBody::*;
        out.put_u16(self.body.mp_type());
        out.put_u16(self.flags);
        out.put_zeros(4);
        match &self.body {
            Desc | Table | GroupDesc | GroupFeatures | MeterFeatures | PortDesc => {}
            Flow(f) | Aggregate(f) => f.encode(out),
            PortStats { port_no } => {
                out.put_u32(*port_no);
                out.put_zeros(4);
            }
            Queue { port_no, queue_id } => {
                out.put_u32(*port_no);
                out.put_u32(*queue_id);
            }
            Group { group_id: id } | Meter { meter_id: id } | MeterConfig { meter_id: id } => {
                out.put_u32(*id);
                out.put_zeros(4);
            }
            TableFeatures(tables) => {
                for t in tables {
                    t.encode(out);
                }
            }
            Experimenter { experimenter, exp_type, data } => {
                out.put_u32(*experimenter);
                out.put_u32(*exp_type);
                out.extend_from_slice(data);
            }
        }
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        use mp_type as t;
        let typ = r.u16("multipart type")?;
        let flags = r.u16("multipart flags")?;
        r.skip(4, "pad")?;
        let empty = |r: &Reader<'_>| {
            if r.is_empty() {
                Ok(())
            } else {
                Err(DecodeError::new(short::REQ_LEN, "multipart request body not empty"))
            }
        };
        let body = match typ {
            t::DESC => empty(r).map(|_| MultipartRequestBody::Desc)?,
            t::FLOW => MultipartRequestBody::Flow(FlowStatsRequest::decode(r)?),
            t::AGGREGATE => MultipartRequestBody::Aggregate(FlowStatsRequest::decode(r)?),
            t::TABLE => empty(r).map(|_| MultipartRequestBody::Table)?,
            t::PORT_STATS => {
                let port_no = r.u32("port_no")?;
                r.skip(4, "pad")?;
                MultipartRequestBody::PortStats { port_no }
            }
            t::QUEUE => MultipartRequestBody::Queue { port_no: r.u32("port_no")?, queue_id: r.u32("queue_id")? },
            t::GROUP | t::METER | t::METER_CONFIG => {
                let id = r.u32("id")?;
                r.skip(4, "pad")?;
                match typ {
                    t::GROUP => MultipartRequestBody::Group { group_id: id },
                    t::METER => MultipartRequestBody::Meter { meter_id: id },
                    _ => MultipartRequestBody::MeterConfig { meter_id: id },
                }
            }
            t::GROUP_DESC => empty(r).map(|_| MultipartRequestBody::GroupDesc)?,
            t::GROUP_FEATURES => empty(r).map(|_| MultipartRequestBody::GroupFeatures)?,
            t::METER_FEATURES => empty(r).map(|_| MultipartRequestBody::MeterFeatures)?,
            t::TABLE_FEATURES => {
                let mut tables = Vec::new();
                while !r.is_empty() {
                    tables.push(TableFeatures::decode(r)?);
                }
                MultipartRequestBody::TableFeatures(tables)
            }
            t::PORT_DESC => empty(r).map(|_| MultipartRequestBody::PortDesc)?,
            t::EXPERIMENTER => MultipartRequestBody::Experimenter {
                experimenter: r.u32("experimenter")?,
                exp_type: r.u32("exp_type")?,
                data: r.rest().to_vec(),
            },
            _ => {
                return Err(DecodeError::new(ErrorCode::BadRequest(BadRequest::BadMultipart), "unknown multipart type"))
            }
        };
        if !r.is_empty() {
            return Err(DecodeError::new(short::REQ_LEN, "trailing bytes after multipart request"));
        }
        Ok(MultipartRequest { flags, body })
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Desc {
    pub mfr_desc: String,
    pub hw_desc: String,
    pub sw_desc: String,
    pub serial_num: String,
    pub dp_desc: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlowStats {
    pub table_id: u8,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub flags: u16,
    pub cookie: u64,
    pub packet_count: u64,
    pub byte_count: u64,
    pub match_: Match,
    pub instructions: Vec<Instruction>,
}

impl FlowStats {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(0);
        out.put_u8(self.table_id);
        out.put_zeros(1);
        out.put_u32(self.duration_sec);
        out.put_u32(self.duration_nsec);
        out.put_u16(self.priority);
        out.put_u16(self.idle_timeout);
        out.put_u16(self.hard_timeout);
        out.put_u16(self.flags);
        out.put_zeros(4);
        out.put_u64(self.cookie);
        out.put_u64(self.packet_count);
        out.put_u64(self.byte_count);
        self.match_.encode(out);
        encode_instructions(&self.instructions, out);
        let len = (out.len() - start) as u16;
        out.patch_u16(start, len);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let len = r.u16("flow stats length")? as usize;
        if len < 56 {
            return Err(DecodeError::new(short::REQ_LEN, "flow stats length"));
        }
        let mut b = r.sub(len - 2, short::REQ_LEN, "flow stats")?;
        let table_id = b.u8("table_id")?;
        b.skip(1, "pad")?;
        let duration_sec = b.u32("duration_sec")?;
        let duration_nsec = b.u32("duration_nsec")?;
        let priority = b.u16("priority")?;
        let idle_timeout = b.u16("idle")?;
        let hard_timeout = b.u16("hard")?;
        let flags = b.u16("flags")?;
        b.skip(4, "pad")?;
        let cookie = b.u64("cookie")?;
        let packet_count = b.u64("packets")?;
        let byte_count = b.u64("bytes")?;
        let match_ = Match::decode(&mut b)?;
        let instructions = decode_instructions(&mut b)?;
        Ok(FlowStats {
            table_id,
            duration_sec,
            duration_nsec,
            priority,
            idle_timeout,
            hard_timeout,
            flags,
            cookie,
            packet_count,
            byte_count,
            match_,
            instructions,
        })
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AggregateStats {
    pub packet_count: u64,
    pub byte_count: u64,
    pub flow_count: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TableStats {
    pub table_id: u8,
    pub active_count: u32,
    pub lookup_count: u64,
    pub matched_count: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PortStats {
    pub port_no: u32,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_frame_err: u64,
    pub rx_over_err: u64,
    pub rx_crc_err: u64,
    pub collisions: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct QueueStats {
    pub port_no: u32,
    pub queue_id: u32,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_errors: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GroupStats {
    pub group_id: u32,
    pub ref_count: u32,
    pub packet_count: u64,
    pub byte_count: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    /// (packet_count, byte_count) per bucket.
    pub bucket_stats: Vec<(u64, u64)>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GroupDesc {
    pub group_type: u8,
    pub group_id: u32,
    pub buckets: Vec<Bucket>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GroupFeatures {
    pub types: u32,
    pub capabilities: u32,
    pub max_groups: [u32; 4],
    pub actions: [u32; 4],
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct MeterStats {
    pub meter_id: u32,
    pub flow_count: u32,
    pub packet_in_count: u64,
    pub byte_in_count: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    /// (packet_band_count, byte_band_count) per band.
    pub band_stats: Vec<(u64, u64)>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct MeterConfig {
    pub flags: u16,
    pub meter_id: u32,
    pub bands: Vec<MeterBand>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MeterFeatures {
    pub max_meter: u32,
    pub band_types: u32,
    pub capabilities: u32,
    pub max_bands: u8,
    pub max_color: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MultipartReplyBody {
    Desc(Desc),
    Flow(Vec<FlowStats>),
    Aggregate(AggregateStats),
    Table(Vec<TableStats>),
    PortStats(Vec<PortStats>),
    Queue(Vec<QueueStats>),
    Group(Vec<GroupStats>),
    GroupDesc(Vec<GroupDesc>),
    GroupFeatures(GroupFeatures),
    Meter(Vec<MeterStats>),
    MeterConfig(Vec<MeterConfig>),
    MeterFeatures(MeterFeatures),
    TableFeatures(Vec<TableFeatures>),
    PortDesc(Vec<Port>),
    Experimenter { experimenter: u32, exp_type: u32, data: Vec<u8> },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MultipartReply {
    pub flags: u16,
    pub body: MultipartReplyBody,
}

impl MultipartReplyBody {
    pub fn mp_type(&self) -> u16 {
        use mp_type as t;
        use MultipartReplyBody::*;
        match self {
            Desc(_) => t::DESC,
            Flow(_) => t::FLOW,
            Aggregate(_) => t::AGGREGATE,
            Table(_) => t::TABLE,
            PortStats(_) => t::PORT_STATS,
            Queue(_) => t::QUEUE,
            Group(_) => t::GROUP,
            GroupDesc(_) => t::GROUP_DESC,
            GroupFeatures(_) => t::GROUP_FEATURES,
            Meter(_) => t::METER,
            MeterConfig(_) => t::METER_CONFIG,
            MeterFeatures(_) => t::METER_FEATURES,
            TableFeatures(_) => t::TABLE_FEATURES,
            PortDesc(_) => t::PORT_DESC,
            Experimenter { .. } => t::EXPERIMENTER,
        }
    }

    /// Encodes the body (after the multipart header).
    pub fn encode(&self, out: &mut Vec<u8>) {
        use MultipartReplyBody::*;
        match self {
            Desc(d) => {
                out.put_string(&d.mfr_desc, 256);
                out.put_string(&d.hw_desc, 256);
                out.put_string(&d.sw_desc, 256);
                out.put_string(&d.serial_num, 32);
                out.put_string(&d.dp_desc, 256);
            }
            Flow(flows) => flows.iter().for_each(|f| f.encode(out)),
            Aggregate(a) => {
                out.put_u64(a.packet_count);
                out.put_u64(a.byte_count);
                out.put_u32(a.flow_count);
                out.put_zeros(4);
            }
            Table(tables) => {
                for t in tables {
                    out.put_u8(t.table_id);
                    out.put_zeros(3);
                    out.put_u32(t.active_count);
                    out.put_u64(t.lookup_count);
                    out.put_u64(t.matched_count);
                }
            }
            PortStats(ports) => {
                for p in ports {
                    out.put_u32(p.port_no);
                    out.put_zeros(4);
                    for v in [
                        p.rx_packets,
                        p.tx_packets,
                        p.rx_bytes,
                        p.tx_bytes,
                        p.rx_dropped,
                        p.tx_dropped,
                        p.rx_errors,
                        p.tx_errors,
                        p.rx_frame_err,
                        p.rx_over_err,
                        p.rx_crc_err,
                        p.collisions,
                    ] {
                        out.put_u64(v);
                    }
                    out.put_u32(p.duration_sec);
                    out.put_u32(p.duration_nsec);
                }
            }
            Queue(queues) => {
                for q in queues {
                    out.put_u32(q.port_no);
                    out.put_u32(q.queue_id);
                    out.put_u64(q.tx_bytes);
                    out.put_u64(q.tx_packets);
                    out.put_u64(q.tx_errors);
                    out.put_u32(q.duration_sec);
                    out.put_u32(q.duration_nsec);
                }
            }
            Group(groups) => {
                for g in groups {
                    let start = out.len();
                    out.put_u16(0);
                    out.put_zeros(2);
                    out.put_u32(g.group_id);
                    out.put_u32(g.ref_count);
                    out.put_zeros(4);
                    out.put_u64(g.packet_count);
                    out.put_u64(g.byte_count);
                    out.put_u32(g.duration_sec);
                    out.put_u32(g.duration_nsec);
                    for (p, b) in &g.bucket_stats {
                        out.put_u64(*p);
                        out.put_u64(*b);
                    }
                    let len = (out.len() - start) as u16;
                    out.patch_u16(start, len);
                }
            }
            GroupDesc(groups) => {
                for g in groups {
                    let start = out.len();
                    out.put_u16(0);
                    out.put_u8(g.group_type);
                    out.put_zeros(1);
                    out.put_u32(g.group_id);
                    encode_buckets(&g.buckets, out);
                    let len = (out.len() - start) as u16;
                    out.patch_u16(start, len);
                }
            }
            GroupFeatures(f) => {
                out.put_u32(f.types);
                out.put_u32(f.capabilities);
                f.max_groups.iter().for_each(|v| out.put_u32(*v));
                f.actions.iter().for_each(|v| out.put_u32(*v));
            }
            Meter(meters) => {
                for m in meters {
                    let start = out.len();
                    out.put_u32(m.meter_id);
                    out.put_u16(0);
                    out.put_zeros(6);
                    out.put_u32(m.flow_count);
                    out.put_u64(m.packet_in_count);
                    out.put_u64(m.byte_in_count);
                    out.put_u32(m.duration_sec);
                    out.put_u32(m.duration_nsec);
                    for (p, b) in &m.band_stats {
                        out.put_u64(*p);
                        out.put_u64(*b);
                    }
                    let len = (out.len() - start) as u16;
                    out.patch_u16(start + 4, len);
                }
            }
            MeterConfig(meters) => {
                for m in meters {
                    let start = out.len();
                    out.put_u16(0);
                    out.put_u16(m.flags);
                    out.put_u32(m.meter_id);
                    encode_bands(&m.bands, out);
                    let len = (out.len() - start) as u16;
                    out.patch_u16(start, len);
                }
            }
            MeterFeatures(f) => {
                out.put_u32(f.max_meter);
                out.put_u32(f.band_types);
                out.put_u32(f.capabilities);
                out.put_u8(f.max_bands);
                out.put_u8(f.max_color);
                out.put_zeros(2);
            }
            TableFeatures(tables) => tables.iter().for_each(|t| t.encode(out)),
            PortDesc(ports) => ports.iter().for_each(|p| p.encode(out)),
            Experimenter { experimenter, exp_type, data } => {
                out.put_u32(*experimenter);
                out.put_u32(*exp_type);
                out.extend_from_slice(data);
            }
        }
    }

    fn decode(typ: u16, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        use mp_type as t;
        fn many<T>(
            r: &mut Reader<'_>,
            mut f: impl FnMut(&mut Reader<'_>) -> Result<T, DecodeError>,
        ) -> Result<Vec<T>, DecodeError> {
            let mut out = Vec::new();
            while !r.is_empty() {
                out.push(f(r)?);
            }
            Ok(out)
        }
        Ok(match typ {
            t::DESC => MultipartReplyBody::Desc(Desc {
                mfr_desc: r.string(256, "mfr")?,
                hw_desc: r.string(256, "hw")?,
                sw_desc: r.string(256, "sw")?,
                serial_num: r.string(32, "serial")?,
                dp_desc: r.string(256, "dp")?,
            }),
            t::FLOW => MultipartReplyBody::Flow(many(r, FlowStats::decode)?),
            t::AGGREGATE => {
                let a = AggregateStats {
                    packet_count: r.u64("packets")?,
                    byte_count: r.u64("bytes")?,
                    flow_count: r.u32("flows")?,
                };
                r.skip(4, "pad")?;
                MultipartReplyBody::Aggregate(a)
            }
            t::TABLE => MultipartReplyBody::Table(many(r, |r| {
                let table_id = r.u8("table")?;
                r.skip(3, "pad")?;
                Ok(TableStats {
                    table_id,
                    active_count: r.u32("active")?,
                    lookup_count: r.u64("lookup")?,
                    matched_count: r.u64("matched")?,
                })
            })?),
            t::PORT_STATS => MultipartReplyBody::PortStats(many(r, |r| {
                let port_no = r.u32("port")?;
                r.skip(4, "pad")?;
                let mut v = [0u64; 12];
                for x in v.iter_mut() {
                    *x = r.u64("counter")?;
                }
                Ok(PortStats {
                    port_no,
                    rx_packets: v[0],
                    tx_packets: v[1],
                    rx_bytes: v[2],
                    tx_bytes: v[3],
                    rx_dropped: v[4],
                    tx_dropped: v[5],
                    rx_errors: v[6],
                    tx_errors: v[7],
                    rx_frame_err: v[8],
                    rx_over_err: v[9],
                    rx_crc_err: v[10],
                    collisions: v[11],
                    duration_sec: r.u32("sec")?,
                    duration_nsec: r.u32("nsec")?,
                })
            })?),
            t::QUEUE => MultipartReplyBody::Queue(many(r, |r| {
                Ok(QueueStats {
                    port_no: r.u32("port")?,
                    queue_id: r.u32("queue")?,
                    tx_bytes: r.u64("bytes")?,
                    tx_packets: r.u64("packets")?,
                    tx_errors: r.u64("errors")?,
                    duration_sec: r.u32("sec")?,
                    duration_nsec: r.u32("nsec")?,
                })
            })?),
            t::GROUP => MultipartReplyBody::Group(many(r, |r| {
                let len = r.u16("group stats length")? as usize;
                if len < 40 {
                    return Err(DecodeError::new(short::REQ_LEN, "group stats length"));
                }
                let mut b = r.sub(len - 2, short::REQ_LEN, "group stats")?;
                b.skip(2, "pad")?;
                let group_id = b.u32("group")?;
                let ref_count = b.u32("refs")?;
                b.skip(4, "pad")?;
                let packet_count = b.u64("packets")?;
                let byte_count = b.u64("bytes")?;
                let duration_sec = b.u32("sec")?;
                let duration_nsec = b.u32("nsec")?;
                let bucket_stats = many(&mut b, |b| Ok((b.u64("packets")?, b.u64("bytes")?)))?;
                Ok(GroupStats {
                    group_id,
                    ref_count,
                    packet_count,
                    byte_count,
                    duration_sec,
                    duration_nsec,
                    bucket_stats,
                })
            })?),
            t::GROUP_DESC => MultipartReplyBody::GroupDesc(many(r, |r| {
                let len = r.u16("group desc length")? as usize;
                if len < 8 {
                    return Err(DecodeError::new(short::REQ_LEN, "group desc length"));
                }
                let mut b = r.sub(len - 2, short::REQ_LEN, "group desc")?;
                let group_type = b.u8("type")?;
                b.skip(1, "pad")?;
                let group_id = b.u32("group")?;
                Ok(GroupDesc { group_type, group_id, buckets: decode_buckets(&mut b)? })
            })?),
            t::GROUP_FEATURES => {
                let types = r.u32("types")?;
                let capabilities = r.u32("caps")?;
                let mut max_groups = [0; 4];
                for v in max_groups.iter_mut() {
                    *v = r.u32("max groups")?;
                }
                let mut actions = [0; 4];
                for v in actions.iter_mut() {
                    *v = r.u32("actions")?;
                }
                MultipartReplyBody::GroupFeatures(GroupFeatures { types, capabilities, max_groups, actions })
            }
            t::METER => MultipartReplyBody::Meter(many(r, |r| {
                let meter_id = r.u32("meter")?;
                let len = r.u16("meter stats length")? as usize;
                if len < 40 {
                    return Err(DecodeError::new(short::REQ_LEN, "meter stats length"));
                }
                let mut b = r.sub(len - 6, short::REQ_LEN, "meter stats")?;
                b.skip(6, "pad")?;
                let flow_count = b.u32("flows")?;
                let packet_in_count = b.u64("packets")?;
                let byte_in_count = b.u64("bytes")?;
                let duration_sec = b.u32("sec")?;
                let duration_nsec = b.u32("nsec")?;
                let band_stats = many(&mut b, |b| Ok((b.u64("packets")?, b.u64("bytes")?)))?;
                Ok(MeterStats {
                    meter_id,
                    flow_count,
                    packet_in_count,
                    byte_in_count,
                    duration_sec,
                    duration_nsec,
                    band_stats,
                })
            })?),
            t::METER_CONFIG => MultipartReplyBody::MeterConfig(many(r, |r| {
                let len = r.u16("meter config length")? as usize;
                if len < 8 {
                    return Err(DecodeError::new(short::REQ_LEN, "meter config length"));
                }
                let mut b = r.sub(len - 2, short::REQ_LEN, "meter config")?;
                let flags = b.u16("flags")?;
                let meter_id = b.u32("meter")?;
                Ok(MeterConfig { flags, meter_id, bands: decode_bands(&mut b)? })
            })?),
            t::METER_FEATURES => {
                let f = MeterFeatures {
                    max_meter: r.u32("max meter")?,
                    band_types: r.u32("band types")?,
                    capabilities: r.u32("caps")?,
                    max_bands: r.u8("max bands")?,
                    max_color: r.u8("max color")?,
                };
                r.skip(2, "pad")?;
                MultipartReplyBody::MeterFeatures(f)
            }
            t::TABLE_FEATURES => MultipartReplyBody::TableFeatures(many(r, TableFeatures::decode)?),
            t::PORT_DESC => MultipartReplyBody::PortDesc(many(r, Port::decode)?),
            t::EXPERIMENTER => MultipartReplyBody::Experimenter {
                experimenter: r.u32("experimenter")?,
                exp_type: r.u32("exp_type")?,
                data: r.rest().to_vec(),
            },
            _ => {
                return Err(DecodeError::new(ErrorCode::BadRequest(BadRequest::BadMultipart), "unknown multipart type"))
            }
        })
    }
}

impl MultipartReply {
    pub fn new(body: MultipartReplyBody) -> Self {
        MultipartReply { flags: 0, body }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(self.body.mp_type());
        out.put_u16(self.flags);
        out.put_zeros(4);
        self.body.encode(out);
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let typ = r.u16("multipart type")?;
        let flags = r.u16("multipart flags")?;
        r.skip(4, "pad")?;
        let body = MultipartReplyBody::decode(typ, r)?;
        if !r.is_empty() {
            return Err(DecodeError::new(short::REQ_LEN, "trailing bytes after multipart reply"));
        }
        Ok(MultipartReply { flags, body })
    }
}
