//! Every message type survives encode → decode, and no byte string makes the decoder panic.

use ofp::action::{Action, Instruction};
use ofp::error::{BadAction, BadMatch, BadRequest, ErrorCode};
use ofp::group_meter::{BandKind, Bucket, MeterBand};
use ofp::message::*;
use ofp::multipart::*;
use ofp::oxm::{Field, Match, OxmField};
use ofp::port::Port;
use ofp::table_features::{OxmId, TableFeatureProp, TableFeatures, TypeId};

fn sample_match() -> Match {
    Match::new()
        .with(Field::InPort, 1)
        .with(Field::EthType, 0x0800)
        .with_masked(Field::Ipv4Dst, 0x0a000000, 0xff000000)
        .with(Field::IpProto, 6)
        .with(Field::TcpDst, 80)
}

fn sample_port(n: u32) -> Port {
    Port {
        port_no: n,
        hw_addr: [2, 0, 0, 0, 0, n as u8],
        name: format!("veth{n}"),
        config: 0,
        state: 4,
        curr: 0x2820,
        advertised: 0,
        supported: 0,
        peer: 0,
        curr_speed: 10_000_000,
        max_speed: 0,
    }
}

pub fn all_messages() -> Vec<Message> {
    let bucket = Bucket { weight: 1, watch_port: 2, watch_group: 0xffffffff, actions: vec![Action::output(2)] };
    let band = MeterBand { rate: 1000, burst_size: 100, kind: BandKind::DscpRemark { prec_level: 1 } };
    let tf = TableFeatures {
        table_id: 0,
        name: "table0".into(),
        metadata_match: u64::MAX,
        metadata_write: u64::MAX,
        config: 0,
        max_entries: 1_000_000,
        properties: vec![
            TableFeatureProp::Instructions { miss: false, ids: vec![TypeId::standard(1), TypeId::standard(4)] },
            TableFeatureProp::NextTables { miss: true, tables: vec![1, 2, 3] },
            TableFeatureProp::ApplyActions { miss: false, ids: vec![TypeId { typ: 0xffff, experimenter: Some(9) }] },
            TableFeatureProp::Match(vec![OxmId::basic(Field::InPort), OxmId::basic(Field::EthDst)]),
            TableFeatureProp::Wildcards(vec![OxmId::basic(Field::EthDst)]),
            TableFeatureProp::WriteSetfield { miss: true, ids: vec![OxmId::basic(Field::VlanVid)] },
            TableFeatureProp::Experimenter { miss: false, experimenter: 1, exp_type: 2, data: vec![0; 4] },
        ],
    };
    let flow_req = FlowStatsRequest { table_id: 0xff, match_: sample_match(), ..Default::default() };
    vec![
        Message::Hello(Hello::of13()),
        Message::Hello(Hello::default()),
        Message::Error(ErrorMsg::reply_to(ErrorCode::BadRequest(BadRequest::BadType), &[4, 99, 0, 8, 0, 0, 0, 1])),
        Message::Error(ErrorMsg {
            code: ErrorCode::Other { typ: 0xffff, code: 3 },
            experimenter: Some(0x2320),
            data: vec![],
        }),
        Message::EchoRequest(b"ping".to_vec()),
        Message::EchoReply(vec![]),
        Message::Experimenter(ExperimenterMsg { experimenter: 0x2320, exp_type: 5, data: vec![1, 2] }),
        Message::FeaturesRequest,
        Message::FeaturesReply(SwitchFeatures {
            datapath_id: 0x1234,
            n_buffers: 256,
            n_tables: 254,
            auxiliary_id: 0,
            capabilities: 0x4f,
        }),
        Message::GetConfigRequest,
        Message::GetConfigReply(SwitchConfig::default()),
        Message::SetConfig(SwitchConfig { flags: 1, miss_send_len: 0xffff }),
        Message::PacketIn(PacketIn {
            buffer_id: NO_BUFFER,
            total_len: 60,
            reason: 0,
            table_id: 3,
            cookie: 7,
            match_: Match::new().with(Field::InPort, 2),
            data: vec![0xaa; 60],
        }),
        Message::FlowRemoved(FlowRemoved {
            cookie: 1,
            priority: 2,
            reason: 0,
            table_id: 0,
            duration_sec: 4,
            duration_nsec: 5,
            idle_timeout: 6,
            hard_timeout: 7,
            packet_count: 8,
            byte_count: 9,
            match_: sample_match(),
        }),
        Message::PortStatus(PortStatus { reason: port_reason::MODIFY, desc: sample_port(3) }),
        Message::PacketOut(PacketOut {
            buffer_id: NO_BUFFER,
            in_port: 0xfffffffd,
            actions: vec![Action::output(0xfffffffb)],
            data: vec![1; 64],
        }),
        Message::FlowMod(FlowMod {
            cookie: 0xabc,
            flags: flow_mod_flags::SEND_FLOW_REM,
            match_: sample_match(),
            instructions: vec![
                Instruction::ApplyActions(vec![
                    Action::SetField(OxmField::exact(Field::VlanVid, 0x1064)),
                    Action::output(2),
                ]),
                Instruction::GotoTable(1),
            ],
            ..Default::default()
        }),
        Message::GroupMod(GroupMod {
            command: 0,
            group_type: 3,
            group_id: 1,
            buckets: vec![bucket.clone(), bucket.clone()],
        }),
        Message::PortMod(PortMod { port_no: 1, hw_addr: [2, 0, 0, 0, 0, 1], config: 1, mask: 1, advertise: 0 }),
        Message::TableMod(TableMod { table_id: 0, config: 3 }),
        Message::MultipartRequest(MultipartRequest::new(MultipartRequestBody::Desc)),
        Message::MultipartRequest(MultipartRequest::new(MultipartRequestBody::Flow(flow_req.clone()))),
        Message::MultipartRequest(MultipartRequest::new(MultipartRequestBody::Aggregate(flow_req))),
        Message::MultipartRequest(MultipartRequest::new(MultipartRequestBody::Table)),
        Message::MultipartRequest(MultipartRequest::new(MultipartRequestBody::PortStats { port_no: 0xffffffff })),
        Message::MultipartRequest(MultipartRequest::new(MultipartRequestBody::Queue {
            port_no: 1,
            queue_id: 0xffffffff,
        })),
        Message::MultipartRequest(MultipartRequest::new(MultipartRequestBody::Group { group_id: 0xfffffffc })),
        Message::MultipartRequest(MultipartRequest::new(MultipartRequestBody::GroupDesc)),
        Message::MultipartRequest(MultipartRequest::new(MultipartRequestBody::GroupFeatures)),
        Message::MultipartRequest(MultipartRequest::new(MultipartRequestBody::Meter { meter_id: 0xffffffff })),
        Message::MultipartRequest(MultipartRequest::new(MultipartRequestBody::MeterConfig { meter_id: 1 })),
        Message::MultipartRequest(MultipartRequest::new(MultipartRequestBody::MeterFeatures)),
        Message::MultipartRequest(MultipartRequest::new(MultipartRequestBody::TableFeatures(vec![]))),
        Message::MultipartRequest(MultipartRequest::new(MultipartRequestBody::TableFeatures(vec![tf.clone()]))),
        Message::MultipartRequest(MultipartRequest::new(MultipartRequestBody::PortDesc)),
        Message::MultipartRequest(MultipartRequest::new(MultipartRequestBody::Experimenter {
            experimenter: 1,
            exp_type: 2,
            data: vec![3],
        })),
        Message::MultipartReply(MultipartReply::new(MultipartReplyBody::Desc(Desc {
            mfr_desc: "edgeflow".into(),
            hw_desc: "hw".into(),
            sw_desc: "0.1".into(),
            serial_num: "1".into(),
            dp_desc: "dp".into(),
        }))),
        Message::MultipartReply(MultipartReply::new(MultipartReplyBody::Flow(vec![FlowStats {
            table_id: 1,
            priority: 10,
            match_: sample_match(),
            instructions: vec![Instruction::ClearActions],
            ..Default::default()
        }]))),
        Message::MultipartReply(MultipartReply::new(MultipartReplyBody::Aggregate(AggregateStats {
            packet_count: 1,
            byte_count: 2,
            flow_count: 3,
        }))),
        Message::MultipartReply(MultipartReply::new(MultipartReplyBody::Table(vec![TableStats {
            table_id: 0,
            active_count: 1,
            lookup_count: 2,
            matched_count: 3,
        }]))),
        Message::MultipartReply(MultipartReply::new(MultipartReplyBody::PortStats(vec![PortStats {
            port_no: 1,
            rx_packets: 5,
            ..Default::default()
        }]))),
        Message::MultipartReply(MultipartReply::new(MultipartReplyBody::Queue(vec![QueueStats {
            port_no: 1,
            queue_id: 0,
            tx_bytes: 1,
            tx_packets: 2,
            tx_errors: 0,
            duration_sec: 1,
            duration_nsec: 2,
        }]))),
        Message::MultipartReply(MultipartReply::new(MultipartReplyBody::Group(vec![GroupStats {
            group_id: 1,
            ref_count: 2,
            packet_count: 3,
            byte_count: 4,
            duration_sec: 5,
            duration_nsec: 6,
            bucket_stats: vec![(1, 2), (3, 4)],
        }]))),
        Message::MultipartReply(MultipartReply::new(MultipartReplyBody::GroupDesc(vec![GroupDesc {
            group_type: 1,
            group_id: 7,
            buckets: vec![bucket],
        }]))),
        Message::MultipartReply(MultipartReply::new(MultipartReplyBody::GroupFeatures(GroupFeatures {
            types: 15,
            capabilities: 7,
            max_groups: [1, 2, 3, 4],
            actions: [5, 6, 7, 8],
        }))),
        Message::MultipartReply(MultipartReply::new(MultipartReplyBody::Meter(vec![MeterStats {
            meter_id: 1,
            flow_count: 2,
            packet_in_count: 3,
            byte_in_count: 4,
            duration_sec: 5,
            duration_nsec: 6,
            band_stats: vec![(7, 8)],
        }]))),
        Message::MultipartReply(MultipartReply::new(MultipartReplyBody::MeterConfig(vec![MeterConfig {
            flags: 1,
            meter_id: 1,
            bands: vec![band.clone()],
        }]))),
        Message::MultipartReply(MultipartReply::new(MultipartReplyBody::MeterFeatures(MeterFeatures {
            max_meter: 1024,
            band_types: 6,
            capabilities: 15,
            max_bands: 8,
            max_color: 0,
        }))),
        Message::MultipartReply(MultipartReply::new(MultipartReplyBody::TableFeatures(vec![tf]))),
        Message::MultipartReply(MultipartReply::new(MultipartReplyBody::PortDesc(vec![
            sample_port(1),
            sample_port(2),
        ]))),
        Message::MultipartReply(MultipartReply {
            flags: 1,
            body: MultipartReplyBody::Experimenter { experimenter: 1, exp_type: 2, data: vec![] },
        }),
        Message::BarrierRequest,
        Message::BarrierReply,
        Message::QueueGetConfigRequest { port: 1 },
        Message::QueueGetConfigReply {
            port: 1,
            queues: vec![PacketQueue {
                queue_id: 1,
                port: 1,
                properties: vec![
                    QueueProperty::MinRate(100),
                    QueueProperty::MaxRate(900),
                    QueueProperty::Experimenter { experimenter: 5, data: vec![1, 2, 3, 4, 5, 6, 7, 8] },
                ],
            }],
        },
        Message::RoleRequest(RoleMsg { role: role::MASTER, generation_id: 99 }),
        Message::RoleReply(RoleMsg { role: role::SLAVE, generation_id: 1 }),
        Message::GetAsyncRequest,
        Message::GetAsyncReply(AsyncConfig::default()),
        Message::SetAsync(AsyncConfig { packet_in_mask: [1, 2], port_status_mask: [3, 4], flow_removed_mask: [5, 6] }),
        Message::MeterMod(MeterMod {
            command: 0,
            flags: 5,
            meter_id: 1,
            bands: vec![band, MeterBand { rate: 5, burst_size: 0, kind: BandKind::Drop }],
        }),
    ]
}

#[test]
fn every_message_round_trips() {
    for (i, msg) in all_messages().into_iter().enumerate() {
        let bytes = msg.encode(i as u32);
        let (header, back) = Message::decode(&bytes).unwrap_or_else(|e| panic!("{msg:?}: {e}"));
        assert_eq!(header.xid, i as u32);
        assert_eq!(header.length as usize, bytes.len());
        assert_eq!(back, msg);
        assert_eq!(back.encode(i as u32), bytes, "re-encoding differs for {msg:?}");
    }
}

#[test]
fn every_message_type_is_covered() {
    let mut seen: Vec<u8> = all_messages().iter().map(Message::msg_type).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen, (0..=29).collect::<Vec<u8>>());
}

#[test]
fn header_errors_map_to_bad_request() {
    let err = |bytes: &[u8]| Message::decode(bytes).unwrap_err().code;
    assert_eq!(err(&[4, 0, 0]), ErrorCode::BadRequest(BadRequest::BadLen));
    assert_eq!(err(&[4, 2, 0, 9, 0, 0, 0, 1]), ErrorCode::BadRequest(BadRequest::BadLen));
    assert_eq!(err(&[1, 2, 0, 8, 0, 0, 0, 1]), ErrorCode::BadRequest(BadRequest::BadVersion));
    assert_eq!(err(&[4, 200, 0, 8, 0, 0, 0, 1]), ErrorCode::BadRequest(BadRequest::BadType));
    // A features reply cut short.
    assert_eq!(err(&[4, 6, 0, 12, 0, 0, 0, 1, 0, 0, 0, 0]), ErrorCode::BadRequest(BadRequest::BadLen));
    // Multipart of unknown type 77.
    assert_eq!(
        err(&[4, 18, 0, 16, 0, 0, 0, 1, 0, 77, 0, 0, 0, 0, 0, 0]),
        ErrorCode::BadRequest(BadRequest::BadMultipart)
    );
}

#[test]
fn flow_mod_body_errors_keep_their_class() {
    let good = Message::FlowMod(FlowMod {
        match_: Match::new().with(Field::InPort, 1),
        instructions: vec![Instruction::ApplyActions(vec![Action::output(2)])],
        ..Default::default()
    })
    .encode(1);
    // Corrupt the action type (byte offset: 8 header + 40 fixed + 16 match + 8 instruction header).
    let mut bad_action = good.clone();
    bad_action[72 + 1] = 99;
    assert_eq!(Message::decode(&bad_action).unwrap_err().code, ErrorCode::BadAction(BadAction::BadType));
    // Corrupt the match type.
    let mut bad_match = good.clone();
    bad_match[48 + 1] = 7;
    assert_eq!(Message::decode(&bad_match).unwrap_err().code, ErrorCode::BadMatch(BadMatch::BadType));
}

#[test]
fn hello_negotiation() {
    assert!(Hello::of13().supports_of13(4));
    let only_10 = Hello { elements: vec![HelloElement::VersionBitmap(vec![1 << 1])] };
    assert!(!only_10.supports_of13(6));
    assert!(Hello::default().supports_of13(5));
    assert!(!Hello::default().supports_of13(1));
    // A 1.0 hello decodes: hello is version independent.
    let (h, m) = Message::decode(&[1, 0, 0, 8, 0, 0, 0, 3]).unwrap();
    assert_eq!(h.version, 1);
    assert_eq!(m, Message::Hello(Hello::default()));
}

#[test]
fn multipart_replies_split_at_64k() {
    let flows: Vec<FlowStats> = (0..3000)
        .map(|i| FlowStats {
            priority: i as u16,
            match_: sample_match(),
            instructions: vec![Instruction::GotoTable(1)],
            ..Default::default()
        })
        .collect();
    let parts = encode_multipart_reply(5, MultipartReplyBody::Flow(flows.clone()));
    assert!(parts.len() > 1);
    let mut back = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        assert!(p.len() <= 65535);
        let (_, m) = Message::decode(p).unwrap();
        let Message::MultipartReply(r) = m else { panic!() };
        assert_eq!(r.flags & 1 != 0, i + 1 < parts.len());
        let MultipartReplyBody::Flow(f) = r.body else { panic!() };
        back.extend(f);
    }
    assert_eq!(back, flows);
}

#[test]
fn experimenter_replies_split_at_64k_and_join_again() {
    let data: Vec<u8> = (0..150_000u32).map(|i| (i % 251) as u8).collect();
    let body = MultipartReplyBody::Experimenter { experimenter: 7, exp_type: 1, data: data.clone() };
    let parts = encode_multipart_reply(9, body);
    assert_eq!(parts.len(), 3);
    let mut back = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        assert!(p.len() <= 65535);
        let (_, Message::MultipartReply(r)) = Message::decode(p).unwrap() else { panic!() };
        assert_eq!(r.flags & 1 != 0, i + 1 < parts.len());
        let MultipartReplyBody::Experimenter { experimenter: 7, exp_type: 1, data } = r.body else { panic!() };
        back.extend(data);
    }
    assert_eq!(back, data);
}

struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn decoder_never_panics_on_mutations() {
    let mut rng = XorShift(0x9e3779b97f4a7c15);
    let seeds: Vec<Vec<u8>> = all_messages().iter().map(|m| m.encode(1)).collect();
    for _ in 0..200_000 {
        let mut bytes = seeds[(rng.next() % seeds.len() as u64) as usize].clone();
        match rng.next() % 4 {
            0 => {
                let i = (rng.next() as usize) % bytes.len();
                bytes[i] = rng.next() as u8;
            }
            1 => bytes.truncate((rng.next() as usize) % bytes.len()),
            2 => {
                for _ in 0..4 {
                    let i = (rng.next() as usize) % bytes.len();
                    bytes[i] ^= 1 << (rng.next() % 8);
                }
            }
            _ => bytes.extend((0..rng.next() % 16).map(|_| rng.next() as u8)),
        }
        // Keep the length field honest half the time, so the body parsers are reached.
        if bytes.len() >= 4 && rng.next() % 2 == 0 {
            let len = bytes.len() as u16;
            bytes[2..4].copy_from_slice(&len.to_be_bytes());
        }
        let _ = Message::decode(&bytes);
    }
    for _ in 0..50_000 {
        let len = (rng.next() % 96) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if len >= 4 {
            bytes[0] = 4;
            bytes[1] = (rng.next() % 31) as u8;
            bytes[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        }
        let _ = Message::decode(&bytes);
    }
}
