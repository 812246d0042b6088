//! Messages: the header, every OpenFlow 1.3 message type, and whole-message encode/decode.
//!
//! About 980 lines, long because it is the one table of every message type, its encoding and
//! its decoding; the larger families (multipart, actions, matches, groups and meters) have files
//! of their own.

use crate::action::{decode_actions, decode_instructions, encode_actions, encode_instructions, Action, Instruction};
use crate::buf::{Reader, Writer};
use crate::error::{short, BadRequest, DecodeError, ErrorCode};
use crate::group_meter::{decode_bands, decode_buckets, encode_bands, encode_buckets, Bucket, MeterBand};
use crate::multipart::{MultipartReply, MultipartReplyBody, MultipartRequest, MORE};
use crate::oxm::Match;
use crate::port::Port;

pub const OFP_VERSION: u8 = 0x04;
pub const HEADER_LEN: usize = 8;
/// `OFP_NO_BUFFER`.
pub const NO_BUFFER: u32 = 0xffff_ffff;

pub mod msg_type {
    pub const HELLO: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const ECHO_REQUEST: u8 = 2;
    pub const ECHO_REPLY: u8 = 3;
    pub const EXPERIMENTER: u8 = 4;
    pub const FEATURES_REQUEST: u8 = 5;
    pub const FEATURES_REPLY: u8 = 6;
    pub const GET_CONFIG_REQUEST: u8 = 7;
    pub const GET_CONFIG_REPLY: u8 = 8;
    pub const SET_CONFIG: u8 = 9;
    pub const PACKET_IN: u8 = 10;
    pub const FLOW_REMOVED: u8 = 11;
    pub const PORT_STATUS: u8 = 12;
    pub const PACKET_OUT: u8 = 13;
    pub const FLOW_MOD: u8 = 14;
    pub const GROUP_MOD: u8 = 15;
    pub const PORT_MOD: u8 = 16;
    pub const TABLE_MOD: u8 = 17;
    pub const MULTIPART_REQUEST: u8 = 18;
    pub const MULTIPART_REPLY: u8 = 19;
    pub const BARRIER_REQUEST: u8 = 20;
    pub const BARRIER_REPLY: u8 = 21;
    pub const QUEUE_GET_CONFIG_REQUEST: u8 = 22;
    pub const QUEUE_GET_CONFIG_REPLY: u8 = 23;
    pub const ROLE_REQUEST: u8 = 24;
    pub const ROLE_REPLY: u8 = 25;
    pub const GET_ASYNC_REQUEST: u8 = 26;
    pub const GET_ASYNC_REPLY: u8 = 27;
    pub const SET_ASYNC: u8 = 28;
    pub const METER_MOD: u8 = 29;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub version: u8,
    pub msg_type: u8,
    pub length: u16,
    pub xid: u32,
}

impl Header {
    /// Reads the 8-byte header; `None` if fewer than 8 bytes are given.
    pub fn peek(bytes: &[u8]) -> Option<Header> {
        if bytes.len() < HEADER_LEN {
            return None;
        }
        Some(Header {
            version: bytes[0],
            msg_type: bytes[1],
            length: u16::from_be_bytes([bytes[2], bytes[3]]),
            xid: u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
        })
    }
}

/// Hello element types.
pub const OFPHET_VERSIONBITMAP: u16 = 1;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HelloElement {
    VersionBitmap(Vec<u32>),
    Unknown { typ: u16, data: Vec<u8> },
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Hello {
    pub elements: Vec<HelloElement>,
}

impl Hello {
    /// A hello advertising exactly OpenFlow 1.3.
    pub fn of13() -> Hello {
        Hello { elements: vec![HelloElement::VersionBitmap(vec![1 << OFP_VERSION])] }
    }

    /// Whether the peer can speak 1.3, given the header version of its hello (spec §6.3.1):
    /// with a bitmap, the bitmap decides; without, the highest version the peer sent must be ≥ 1.3.
    pub fn supports_of13(&self, header_version: u8) -> bool {
        for e in &self.elements {
            if let HelloElement::VersionBitmap(words) = e {
                let word = (OFP_VERSION / 32) as usize;
                return words.get(word).is_some_and(|w| w & (1 << (OFP_VERSION % 32)) != 0);
            }
        }
        header_version >= OFP_VERSION
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ErrorMsg {
    pub code: ErrorCode,
    /// Set for `OFPET_EXPERIMENTER` errors (where `code` holds `exp_type`).
    pub experimenter: Option<u32>,
    pub data: Vec<u8>,
}

impl ErrorMsg {
    /// An error answering `offending`, which is echoed up to its first 64 bytes (spec §7.4.4).
    pub fn reply_to(code: ErrorCode, offending: &[u8]) -> ErrorMsg {
        ErrorMsg { code, experimenter: None, data: offending[..offending.len().min(64)].to_vec() }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExperimenterMsg {
    pub experimenter: u32,
    pub exp_type: u32,
    pub data: Vec<u8>,
}

/// `ofp_capabilities` bits.
pub mod capabilities {
    pub const FLOW_STATS: u32 = 1 << 0;
    pub const TABLE_STATS: u32 = 1 << 1;
    pub const PORT_STATS: u32 = 1 << 2;
    pub const GROUP_STATS: u32 = 1 << 3;
    pub const IP_REASM: u32 = 1 << 5;
    pub const QUEUE_STATS: u32 = 1 << 6;
    pub const PORT_BLOCKED: u32 = 1 << 8;
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SwitchFeatures {
    pub datapath_id: u64,
    pub n_buffers: u32,
    pub n_tables: u8,
    pub auxiliary_id: u8,
    pub capabilities: u32,
}

/// `ofp_config_flags`.
pub mod config_flags {
    pub const FRAG_NORMAL: u16 = 0;
    pub const FRAG_DROP: u16 = 1;
    pub const FRAG_REASM: u16 = 2;
    pub const FRAG_MASK: u16 = 3;
    /// 1.3 leaves this bit over from 1.2 (OFPC_INVALID_TTL_TO_CONTROLLER).
    pub const INVALID_TTL_TO_CONTROLLER: u16 = 1 << 2;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SwitchConfig {
    pub flags: u16,
    pub miss_send_len: u16,
}

impl Default for SwitchConfig {
    fn default() -> Self {
        SwitchConfig { flags: 0, miss_send_len: 128 }
    }
}

pub mod packet_in_reason {
    pub const NO_MATCH: u8 = 0;
    pub const ACTION: u8 = 1;
    pub const INVALID_TTL: u8 = 2;
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PacketIn {
    pub buffer_id: u32,
    pub total_len: u16,
    pub reason: u8,
    pub table_id: u8,
    pub cookie: u64,
    pub match_: Match,
    pub data: Vec<u8>,
}

pub mod flow_removed_reason {
    pub const IDLE_TIMEOUT: u8 = 0;
    pub const HARD_TIMEOUT: u8 = 1;
    pub const DELETE: u8 = 2;
    pub const GROUP_DELETE: u8 = 3;
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FlowRemoved {
    pub cookie: u64,
    pub priority: u16,
    pub reason: u8,
    pub table_id: u8,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub packet_count: u64,
    pub byte_count: u64,
    pub match_: Match,
}

pub mod port_reason {
    pub const ADD: u8 = 0;
    pub const DELETE: u8 = 1;
    pub const MODIFY: u8 = 2;
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortStatus {
    pub reason: u8,
    pub desc: Port,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PacketOut {
    pub buffer_id: u32,
    pub in_port: u32,
    pub actions: Vec<Action>,
    pub data: Vec<u8>,
}

pub mod flow_mod_command {
    pub const ADD: u8 = 0;
    pub const MODIFY: u8 = 1;
    pub const MODIFY_STRICT: u8 = 2;
    pub const DELETE: u8 = 3;
    pub const DELETE_STRICT: u8 = 4;
}

pub mod flow_mod_flags {
    pub const SEND_FLOW_REM: u16 = 1 << 0;
    pub const CHECK_OVERLAP: u16 = 1 << 1;
    pub const RESET_COUNTS: u16 = 1 << 2;
    pub const NO_PKT_COUNTS: u16 = 1 << 3;
    pub const NO_BYT_COUNTS: u16 = 1 << 4;
    pub const ALL: u16 = 0x1f;
}

/// `OFPTT_ALL`: all tables, in delete and stats requests.
pub const OFPTT_ALL: u8 = 0xff;
pub const OFPTT_MAX: u8 = 0xfe;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FlowMod {
    pub cookie: u64,
    pub cookie_mask: u64,
    pub table_id: u8,
    pub command: u8,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub buffer_id: u32,
    pub out_port: u32,
    pub out_group: u32,
    pub flags: u16,
    pub match_: Match,
    pub instructions: Vec<Instruction>,
}

impl Default for FlowMod {
    fn default() -> Self {
        FlowMod {
            cookie: 0,
            cookie_mask: 0,
            table_id: 0,
            command: flow_mod_command::ADD,
            idle_timeout: 0,
            hard_timeout: 0,
            priority: 0x8000,
            buffer_id: NO_BUFFER,
            out_port: crate::port::OFPP_ANY,
            out_group: crate::group_meter::OFPG_ANY,
            flags: 0,
            match_: Match::default(),
            instructions: Vec::new(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupMod {
    pub command: u16,
    pub group_type: u8,
    pub group_id: u32,
    pub buckets: Vec<Bucket>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortMod {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    pub config: u32,
    pub mask: u32,
    pub advertise: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TableMod {
    pub table_id: u8,
    pub config: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MeterMod {
    pub command: u16,
    pub flags: u16,
    pub meter_id: u32,
    pub bands: Vec<MeterBand>,
}

pub mod queue_prop {
    pub const MIN_RATE: u16 = 1;
    pub const MAX_RATE: u16 = 2;
    pub const EXPERIMENTER: u16 = 0xffff;
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum QueueProperty {
    MinRate(u16),
    MaxRate(u16),
    Experimenter { experimenter: u32, data: Vec<u8> },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PacketQueue {
    pub queue_id: u32,
    pub port: u32,
    pub properties: Vec<QueueProperty>,
}

pub mod role {
    pub const NOCHANGE: u32 = 0;
    pub const EQUAL: u32 = 1;
    pub const MASTER: u32 = 2;
    pub const SLAVE: u32 = 3;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RoleMsg {
    pub role: u32,
    pub generation_id: u64,
}

/// Async masks: index 0 applies while the connection is master or equal, index 1 while slave.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AsyncConfig {
    pub packet_in_mask: [u32; 2],
    pub port_status_mask: [u32; 2],
    pub flow_removed_mask: [u32; 2],
}

impl Default for AsyncConfig {
    /// The defaults of spec §6.1.1: everything to masters/equals, only port-status to slaves.
    fn default() -> Self {
        AsyncConfig { packet_in_mask: [0b011, 0], port_status_mask: [0b111, 0b111], flow_removed_mask: [0b1111, 0] }
    }
}

impl AsyncConfig {
    /// Nothing at all (a service connection before it asks for anything).
    pub fn none() -> Self {
        AsyncConfig { packet_in_mask: [0, 0], port_status_mask: [0, 0], flow_removed_mask: [0, 0] }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    Hello(Hello),
    Error(ErrorMsg),
    EchoRequest(Vec<u8>),
    EchoReply(Vec<u8>),
    Experimenter(ExperimenterMsg),
    FeaturesRequest,
    FeaturesReply(SwitchFeatures),
    GetConfigRequest,
    GetConfigReply(SwitchConfig),
    SetConfig(SwitchConfig),
    PacketIn(PacketIn),
    FlowRemoved(FlowRemoved),
    PortStatus(PortStatus),
    PacketOut(PacketOut),
    FlowMod(FlowMod),
    GroupMod(GroupMod),
    PortMod(PortMod),
    TableMod(TableMod),
    MultipartRequest(MultipartRequest),
    MultipartReply(MultipartReply),
    BarrierRequest,
    BarrierReply,
    QueueGetConfigRequest { port: u32 },
    QueueGetConfigReply { port: u32, queues: Vec<PacketQueue> },
    RoleRequest(RoleMsg),
    RoleReply(RoleMsg),
    GetAsyncRequest,
    GetAsyncReply(AsyncConfig),
    SetAsync(AsyncConfig),
    MeterMod(MeterMod),
}

impl Message {
    pub fn msg_type(&self) -> u8 {
        use msg_type as t;
        match self {
            Message::Hello(_) => t::HELLO,
            Message::Error(_) => t::ERROR,
            Message::EchoRequest(_) => t::ECHO_REQUEST,
            Message::EchoReply(_) => t::ECHO_REPLY,
            Message::Experimenter(_) => t::EXPERIMENTER,
            Message::FeaturesRequest => t::FEATURES_REQUEST,
            Message::FeaturesReply(_) => t::FEATURES_REPLY,
            Message::GetConfigRequest => t::GET_CONFIG_REQUEST,
            Message::GetConfigReply(_) => t::GET_CONFIG_REPLY,
            Message::SetConfig(_) => t::SET_CONFIG,
            Message::PacketIn(_) => t::PACKET_IN,
            Message::FlowRemoved(_) => t::FLOW_REMOVED,
            Message::PortStatus(_) => t::PORT_STATUS,
            Message::PacketOut(_) => t::PACKET_OUT,
            Message::FlowMod(_) => t::FLOW_MOD,
            Message::GroupMod(_) => t::GROUP_MOD,
            Message::PortMod(_) => t::PORT_MOD,
            Message::TableMod(_) => t::TABLE_MOD,
            Message::MultipartRequest(_) => t::MULTIPART_REQUEST,
            Message::MultipartReply(_) => t::MULTIPART_REPLY,
            Message::BarrierRequest => t::BARRIER_REQUEST,
            Message::BarrierReply => t::BARRIER_REPLY,
            Message::QueueGetConfigRequest { .. } => t::QUEUE_GET_CONFIG_REQUEST,
            Message::QueueGetConfigReply { .. } => t::QUEUE_GET_CONFIG_REPLY,
            Message::RoleRequest(_) => t::ROLE_REQUEST,
            Message::RoleReply(_) => t::ROLE_REPLY,
            Message::GetAsyncRequest => t::GET_ASYNC_REQUEST,
            Message::GetAsyncReply(_) => t::GET_ASYNC_REPLY,
            Message::SetAsync(_) => t::SET_ASYNC,
            Message::MeterMod(_) => t::METER_MOD,
        }
    }

    /// Encodes a whole message with header. The `length` field is filled in; a body that does not fit
    /// in 65535 bytes is a caller bug (multipart replies are split by [`encode_multipart_reply`]).
    pub fn encode(&self, xid: u32) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        self.encode_into(xid, &mut out);
        out
    }

    /// Appends the encoded message to `out`.
    pub fn encode_into(&self, xid: u32, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u8(OFP_VERSION);
        out.put_u8(self.msg_type());
        out.put_u16(0);
        out.put_u32(xid);
        self.encode_body(out);
        let len = out.len() - start;
        debug_assert!(len <= u16::MAX as usize, "message of {len} bytes");
        out.patch_u16(start + 2, len as u16);
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        match self {
            Message::Hello(h) => {
                for e in &h.elements {
                    match e {
                        HelloElement::VersionBitmap(words) => {
                            out.put_u16(OFPHET_VERSIONBITMAP);
                            out.put_u16(4 + 4 * words.len() as u16);
                            words.iter().for_each(|w| out.put_u32(*w));
                            out.pad8_from(out.len() - 4 - 4 * words.len());
                        }
                        HelloElement::Unknown { typ, data } => {
                            let start = out.len();
                            out.put_u16(*typ);
                            out.put_u16(4 + data.len() as u16);
                            out.extend_from_slice(data);
                            out.pad8_from(start);
                        }
                    }
                }
            }
            Message::Error(e) => {
                let (typ, code) = e.code.type_code();
                out.put_u16(typ);
                out.put_u16(code);
                if let Some(exp) = e.experimenter {
                    out.put_u32(exp);
                }
                out.extend_from_slice(&e.data);
            }
            Message::EchoRequest(d) | Message::EchoReply(d) => out.extend_from_slice(d),
            Message::Experimenter(e) => {
                out.put_u32(e.experimenter);
                out.put_u32(e.exp_type);
                out.extend_from_slice(&e.data);
            }
            Message::FeaturesRequest
            | Message::GetConfigRequest
            | Message::BarrierRequest
            | Message::BarrierReply
            | Message::GetAsyncRequest => {}
            Message::FeaturesReply(f) => {
                out.put_u64(f.datapath_id);
                out.put_u32(f.n_buffers);
                out.put_u8(f.n_tables);
                out.put_u8(f.auxiliary_id);
                out.put_zeros(2);
                out.put_u32(f.capabilities);
                out.put_u32(0);
            }
            Message::GetConfigReply(c) | Message::SetConfig(c) => {
                out.put_u16(c.flags);
                out.put_u16(c.miss_send_len);
            }
            Message::PacketIn(p) => {
                out.put_u32(p.buffer_id);
                out.put_u16(p.total_len);
                out.put_u8(p.reason);
                out.put_u8(p.table_id);
                out.put_u64(p.cookie);
                p.match_.encode(out);
                out.put_zeros(2);
                out.extend_from_slice(&p.data);
            }
            Message::FlowRemoved(f) => {
                out.put_u64(f.cookie);
                out.put_u16(f.priority);
                out.put_u8(f.reason);
                out.put_u8(f.table_id);
                out.put_u32(f.duration_sec);
                out.put_u32(f.duration_nsec);
                out.put_u16(f.idle_timeout);
                out.put_u16(f.hard_timeout);
                out.put_u64(f.packet_count);
                out.put_u64(f.byte_count);
                f.match_.encode(out);
            }
            Message::PortStatus(p) => {
                out.put_u8(p.reason);
                out.put_zeros(7);
                p.desc.encode(out);
            }
            Message::PacketOut(p) => {
                out.put_u32(p.buffer_id);
                out.put_u32(p.in_port);
                let len_at = out.len();
                out.put_u16(0);
                out.put_zeros(6);
                let start = out.len();
                encode_actions(&p.actions, out);
                let actions_len = (out.len() - start) as u16;
                out.patch_u16(len_at, actions_len);
                out.extend_from_slice(&p.data);
            }
            Message::FlowMod(f) => {
                out.put_u64(f.cookie);
                out.put_u64(f.cookie_mask);
                out.put_u8(f.table_id);
                out.put_u8(f.command);
                out.put_u16(f.idle_timeout);
                out.put_u16(f.hard_timeout);
                out.put_u16(f.priority);
                out.put_u32(f.buffer_id);
                out.put_u32(f.out_port);
                out.put_u32(f.out_group);
                out.put_u16(f.flags);
                out.put_zeros(2);
                f.match_.encode(out);
                encode_instructions(&f.instructions, out);
            }
            Message::GroupMod(g) => {
                out.put_u16(g.command);
                out.put_u8(g.group_type);
                out.put_zeros(1);
                out.put_u32(g.group_id);
                encode_buckets(&g.buckets, out);
            }
            Message::PortMod(p) => {
                out.put_u32(p.port_no);
                out.put_zeros(4);
                out.extend_from_slice(&p.hw_addr);
                out.put_zeros(2);
                out.put_u32(p.config);
                out.put_u32(p.mask);
                out.put_u32(p.advertise);
                out.put_zeros(4);
            }
            Message::TableMod(t) => {
                out.put_u8(t.table_id);
                out.put_zeros(3);
                out.put_u32(t.config);
            }
            Message::MultipartRequest(m) => m.encode(out),
            Message::MultipartReply(m) => m.encode(out),
            Message::QueueGetConfigRequest { port } => {
                out.put_u32(*port);
                out.put_zeros(4);
            }
            Message::QueueGetConfigReply { port, queues } => {
                out.put_u32(*port);
                out.put_zeros(4);
                for q in queues {
                    let start = out.len();
                    out.put_u32(q.queue_id);
                    out.put_u32(q.port);
                    out.put_u16(0);
                    out.put_zeros(6);
                    for p in &q.properties {
                        let pstart = out.len();
                        match p {
                            QueueProperty::MinRate(r) | QueueProperty::MaxRate(r) => {
                                let t = if matches!(p, QueueProperty::MinRate(_)) {
                                    queue_prop::MIN_RATE
                                } else {
                                    queue_prop::MAX_RATE
                                };
                                out.put_u16(t);
                                out.put_u16(16);
                                out.put_zeros(4);
                                out.put_u16(*r);
                                out.put_zeros(6);
                            }
                            QueueProperty::Experimenter { experimenter, data } => {
                                out.put_u16(queue_prop::EXPERIMENTER);
                                out.put_u16(0);
                                out.put_zeros(4);
                                out.put_u32(*experimenter);
                                out.put_zeros(4);
                                out.extend_from_slice(data);
                                out.pad8_from(pstart);
                                let len = (out.len() - pstart) as u16;
                                out.patch_u16(pstart + 2, len);
                            }
                        }
                    }
                    let len = (out.len() - start) as u16;
                    out.patch_u16(start + 8, len);
                }
            }
            Message::RoleRequest(r) | Message::RoleReply(r) => {
                out.put_u32(r.role);
                out.put_zeros(4);
                out.put_u64(r.generation_id);
            }
            Message::GetAsyncReply(a) | Message::SetAsync(a) => {
                for m in [a.packet_in_mask, a.port_status_mask, a.flow_removed_mask] {
                    out.put_u32(m[0]);
                    out.put_u32(m[1]);
                }
            }
            Message::MeterMod(m) => {
                out.put_u16(m.command);
                out.put_u16(m.flags);
                out.put_u32(m.meter_id);
                encode_bands(&m.bands, out);
            }
        }
    }

    /// Decodes exactly one message. `bytes` must be the whole message (as framed by its length field).
    ///
    /// Never panics. The error carries the `(type, code)` to put in the `OFPT_ERROR` reply.
    pub fn decode(bytes: &[u8]) -> Result<(Header, Message), DecodeError> {
        let header = Header::peek(bytes).ok_or(DecodeError::new(short::REQ_LEN, "message shorter than its header"))?;
        if header.length as usize != bytes.len() || (header.length as usize) < HEADER_LEN {
            return Err(DecodeError::new(short::REQ_LEN, "length field does not match message"));
        }
        let mut r = Reader::new(&bytes[HEADER_LEN..], short::REQ_LEN);
        if header.msg_type == msg_type::HELLO {
            // Hellos of every version share the header; their elements decide compatibility.
            return Ok((header, Message::Hello(decode_hello(&mut r)?)));
        }
        if header.version != OFP_VERSION {
            return Err(DecodeError::new(ErrorCode::BadRequest(BadRequest::BadVersion), "version is not 1.3"));
        }
        let msg = decode_body(header.msg_type, &mut r)?;
        if !r.is_empty() {
            return Err(DecodeError::new(short::REQ_LEN, "trailing bytes after message body"));
        }
        Ok((header, msg))
    }
}

fn decode_hello(r: &mut Reader<'_>) -> Result<Hello, DecodeError> {
    let mut elements = Vec::new();
    while r.remaining() >= 4 {
        let typ = r.u16("hello element type")?;
        let len = r.u16("hello element length")? as usize;
        if len < 4 {
            return Err(DecodeError::new(short::REQ_LEN, "hello element length below 4"));
        }
        let mut body = r.sub(len - 4, short::REQ_LEN, "hello element")?;
        let pad = crate::buf::pad8(len) - len;
        r.skip(pad.min(r.remaining()), "hello element padding")?;
        if typ == OFPHET_VERSIONBITMAP {
            let mut words = Vec::new();
            while body.remaining() >= 4 {
                words.push(body.u32("bitmap")?);
            }
            elements.push(HelloElement::VersionBitmap(words));
        } else {
            elements.push(HelloElement::Unknown { typ, data: body.rest().to_vec() });
        }
    }
    r.rest();
    Ok(Hello { elements })
}

fn decode_body(typ: u8, r: &mut Reader<'_>) -> Result<Message, DecodeError> {
    use msg_type as t;
    Ok(match typ {
        t::ERROR => {
            let etype = r.u16("error type")?;
            let code = r.u16("error code")?;
            let experimenter =
                if etype == crate::error::OFPET_EXPERIMENTER { Some(r.u32("experimenter")?) } else { None };
            Message::Error(ErrorMsg {
                code: ErrorCode::from_type_code(etype, code),
                experimenter,
                data: r.rest().to_vec(),
            })
        }
        t::ECHO_REQUEST => Message::EchoRequest(r.rest().to_vec()),
        t::ECHO_REPLY => Message::EchoReply(r.rest().to_vec()),
        t::EXPERIMENTER => Message::Experimenter(ExperimenterMsg {
            experimenter: r.u32("experimenter")?,
            exp_type: r.u32("exp_type")?,
            data: r.rest().to_vec(),
        }),
        t::FEATURES_REQUEST => Message::FeaturesRequest,
        t::FEATURES_REPLY => {
            let f = SwitchFeatures {
                datapath_id: r.u64("datapath_id")?,
                n_buffers: r.u32("n_buffers")?,
                n_tables: r.u8("n_tables")?,
                auxiliary_id: r.u8("auxiliary_id")?,
                capabilities: {
                    r.skip(2, "pad")?;
                    r.u32("capabilities")?
                },
            };
            r.skip(4, "reserved")?;
            Message::FeaturesReply(f)
        }
        t::GET_CONFIG_REQUEST => Message::GetConfigRequest,
        t::GET_CONFIG_REPLY | t::SET_CONFIG => {
            let c = SwitchConfig { flags: r.u16("flags")?, miss_send_len: r.u16("miss_send_len")? };
            if typ == t::SET_CONFIG {
                Message::SetConfig(c)
            } else {
                Message::GetConfigReply(c)
            }
        }
        t::PACKET_IN => {
            let buffer_id = r.u32("buffer_id")?;
            let total_len = r.u16("total_len")?;
            let reason = r.u8("reason")?;
            let table_id = r.u8("table_id")?;
            let cookie = r.u64("cookie")?;
            let match_ = Match::decode(r)?;
            r.skip(2, "pad")?;
            Message::PacketIn(PacketIn {
                buffer_id,
                total_len,
                reason,
                table_id,
                cookie,
                match_,
                data: r.rest().to_vec(),
            })
        }
        t::FLOW_REMOVED => Message::FlowRemoved(FlowRemoved {
            cookie: r.u64("cookie")?,
            priority: r.u16("priority")?,
            reason: r.u8("reason")?,
            table_id: r.u8("table_id")?,
            duration_sec: r.u32("duration_sec")?,
            duration_nsec: r.u32("duration_nsec")?,
            idle_timeout: r.u16("idle_timeout")?,
            hard_timeout: r.u16("hard_timeout")?,
            packet_count: r.u64("packet_count")?,
            byte_count: r.u64("byte_count")?,
            match_: Match::decode(r)?,
        }),
        t::PORT_STATUS => {
            let reason = r.u8("reason")?;
            r.skip(7, "pad")?;
            Message::PortStatus(PortStatus { reason, desc: Port::decode(r)? })
        }
        t::PACKET_OUT => {
            let buffer_id = r.u32("buffer_id")?;
            let in_port = r.u32("in_port")?;
            let actions_len = r.u16("actions_len")? as usize;
            r.skip(6, "pad")?;
            let mut actions_r = r.sub(actions_len, short::REQ_LEN, "packet-out actions")?;
            let actions = decode_actions(&mut actions_r)?;
            Message::PacketOut(PacketOut { buffer_id, in_port, actions, data: r.rest().to_vec() })
        }
        t::FLOW_MOD => {
            let f = FlowMod {
                cookie: r.u64("cookie")?,
                cookie_mask: r.u64("cookie_mask")?,
                table_id: r.u8("table_id")?,
                command: r.u8("command")?,
                idle_timeout: r.u16("idle_timeout")?,
                hard_timeout: r.u16("hard_timeout")?,
                priority: r.u16("priority")?,
                buffer_id: r.u32("buffer_id")?,
                out_port: r.u32("out_port")?,
                out_group: r.u32("out_group")?,
                flags: {
                    let flags = r.u16("flags")?;
                    r.skip(2, "pad")?;
                    flags
                },
                match_: Match::decode(r)?,
                instructions: Vec::new(),
            };
            let instructions = decode_instructions(r)?;
            Message::FlowMod(FlowMod { instructions, ..f })
        }
        t::GROUP_MOD => {
            let command = r.u16("command")?;
            let group_type = r.u8("type")?;
            r.skip(1, "pad")?;
            let group_id = r.u32("group_id")?;
            Message::GroupMod(GroupMod { command, group_type, group_id, buckets: decode_buckets(r)? })
        }
        t::PORT_MOD => {
            let port_no = r.u32("port_no")?;
            r.skip(4, "pad")?;
            let hw_addr = r.array("hw_addr")?;
            r.skip(2, "pad")?;
            let p = PortMod {
                port_no,
                hw_addr,
                config: r.u32("config")?,
                mask: r.u32("mask")?,
                advertise: r.u32("advertise")?,
            };
            r.skip(4, "pad")?;
            Message::PortMod(p)
        }
        t::TABLE_MOD => {
            let table_id = r.u8("table_id")?;
            r.skip(3, "pad")?;
            Message::TableMod(TableMod { table_id, config: r.u32("config")? })
        }
        t::MULTIPART_REQUEST => Message::MultipartRequest(MultipartRequest::decode(r)?),
        t::MULTIPART_REPLY => Message::MultipartReply(MultipartReply::decode(r)?),
        t::BARRIER_REQUEST => Message::BarrierRequest,
        t::BARRIER_REPLY => Message::BarrierReply,
        t::QUEUE_GET_CONFIG_REQUEST => {
            let port = r.u32("port")?;
            r.skip(4, "pad")?;
            Message::QueueGetConfigRequest { port }
        }
        t::QUEUE_GET_CONFIG_REPLY => {
            let port = r.u32("port")?;
            r.skip(4, "pad")?;
            let mut queues = Vec::new();
            while !r.is_empty() {
                let queue_id = r.u32("queue_id")?;
                let qport = r.u32("queue port")?;
                let len = r.u16("queue length")? as usize;
                if len < 16 {
                    return Err(DecodeError::new(short::REQ_LEN, "queue length"));
                }
                r.skip(6, "pad")?;
                let mut props_r = r.sub(len - 16, short::REQ_LEN, "queue properties")?;
                let mut properties = Vec::new();
                while !props_r.is_empty() {
                    let ptype = props_r.u16("property")?;
                    let plen = props_r.u16("property length")? as usize;
                    if plen < 8 {
                        return Err(DecodeError::new(short::REQ_LEN, "queue property length"));
                    }
                    let mut p = props_r.sub(plen - 4, short::REQ_LEN, "queue property")?;
                    p.skip(4, "pad")?;
                    properties.push(match ptype {
                        queue_prop::MIN_RATE => QueueProperty::MinRate(p.u16("rate")?),
                        queue_prop::MAX_RATE => QueueProperty::MaxRate(p.u16("rate")?),
                        _ => {
                            let experimenter = p.u32("experimenter")?;
                            p.skip(4, "pad")?;
                            QueueProperty::Experimenter { experimenter, data: p.rest().to_vec() }
                        }
                    });
                }
                queues.push(PacketQueue { queue_id, port: qport, properties });
            }
            Message::QueueGetConfigReply { port, queues }
        }
        t::ROLE_REQUEST | t::ROLE_REPLY => {
            let role = r.u32("role")?;
            r.skip(4, "pad")?;
            let m = RoleMsg { role, generation_id: r.u64("generation_id")? };
            if typ == t::ROLE_REQUEST {
                Message::RoleRequest(m)
            } else {
                Message::RoleReply(m)
            }
        }
        t::GET_ASYNC_REQUEST => Message::GetAsyncRequest,
        t::GET_ASYNC_REPLY | t::SET_ASYNC => {
            let mut m = [[0u32; 2]; 3];
            for pair in m.iter_mut() {
                pair[0] = r.u32("mask")?;
                pair[1] = r.u32("mask")?;
            }
            let a = AsyncConfig { packet_in_mask: m[0], port_status_mask: m[1], flow_removed_mask: m[2] };
            if typ == t::SET_ASYNC {
                Message::SetAsync(a)
            } else {
                Message::GetAsyncReply(a)
            }
        }
        t::METER_MOD => {
            let command = r.u16("command")?;
            let flags = r.u16("flags")?;
            let meter_id = r.u32("meter_id")?;
            Message::MeterMod(MeterMod { command, flags, meter_id, bands: decode_bands(r)? })
        }
        _ => return Err(DecodeError::new(ErrorCode::BadRequest(BadRequest::BadType), "unknown message type")),
    })
}

/// Largest body a multipart reply message may carry (65535 minus the 16-byte headers), rounded to 8.
const MAX_MULTIPART_BODY: usize = 65_504;

/// Encodes a multipart reply, split over several messages with `OFPMPF_REPLY_MORE` when the body
/// does not fit one. Lists are split between entries, never inside one.
pub fn encode_multipart_reply(xid: u32, body: MultipartReplyBody) -> Vec<Vec<u8>> {
    use MultipartReplyBody as B;
    fn chunk<T: Clone>(items: Vec<T>, size: impl Fn(&T) -> usize) -> Vec<Vec<T>> {
        let mut chunks = vec![Vec::new()];
        let mut used = 0;
        for item in items {
            let s = size(&item);
            if used + s > MAX_MULTIPART_BODY && !chunks.last().unwrap().is_empty() {
                chunks.push(Vec::new());
                used = 0;
            }
            used += s;
            chunks.last_mut().unwrap().push(item);
        }
        chunks
    }
    fn size_of(body: MultipartReplyBody) -> usize {
        let mut v = Vec::new();
        body.encode(&mut v);
        v.len()
    }
    let parts: Vec<B> = match body {
        B::Flow(items) => chunk(items, |i| size_of(B::Flow(vec![i.clone()]))).into_iter().map(B::Flow).collect(),
        B::PortStats(items) => chunk(items, |_| 112).into_iter().map(B::PortStats).collect(),
        B::Group(items) => chunk(items, |i| size_of(B::Group(vec![i.clone()]))).into_iter().map(B::Group).collect(),
        B::GroupDesc(items) => {
            chunk(items, |i| size_of(B::GroupDesc(vec![i.clone()]))).into_iter().map(B::GroupDesc).collect()
        }
        B::MeterConfig(items) => {
            chunk(items, |i| size_of(B::MeterConfig(vec![i.clone()]))).into_iter().map(B::MeterConfig).collect()
        }
        B::Meter(items) => chunk(items, |i| size_of(B::Meter(vec![i.clone()]))).into_iter().map(B::Meter).collect(),
        B::TableFeatures(items) => {
            chunk(items, |i| size_of(B::TableFeatures(vec![i.clone()]))).into_iter().map(B::TableFeatures).collect()
        }
        B::PortDesc(items) => chunk(items, |_| 64).into_iter().map(B::PortDesc).collect(),
        B::Table(items) => chunk(items, |_| 24).into_iter().map(B::Table).collect(),
        B::Queue(items) => chunk(items, |_| 40).into_iter().map(B::Queue).collect(),
        // An experimenter's data is opaque: split it where it must be split, the peer joins it.
        B::Experimenter { experimenter, exp_type, data } if data.len() > MAX_MULTIPART_BODY - 8 => data
            .chunks(MAX_MULTIPART_BODY - 8)
            .map(|d| B::Experimenter { experimenter, exp_type, data: d.to_vec() })
            .collect(),
        other => vec![other],
    };
    let n = parts.len();
    parts
        .into_iter()
        .enumerate()
        .map(|(i, body)| {
            let flags = if i + 1 < n { MORE } else { 0 };
            Message::MultipartReply(MultipartReply { flags, body }).encode(xid)
        })
        .collect()
}
