//! Prints, one per line as `NAME HEX`, the messages a switch sends, encoded by this crate, for
//! tests/test_ofp_outside.py to parse with os-ken's codec and check field by field.

use ofp::action::{Action, Instruction};
use ofp::error::{BadRequest, ErrorCode};
use ofp::message::*;
use ofp::multipart::*;
use ofp::oxm::{Field, Match};
use ofp::port::Port;

fn main() {
    let xid = 0x0102_0304;
    let match_ = Match::new()
        .with(Field::InPort, 1)
        .with(Field::EthType, 0x0800)
        .with_masked(Field::Ipv4Dst, 0x0a00_0000, 0xff00_0000)
        .with(Field::IpProto, 6)
        .with(Field::TcpDst, 80);
    let port = Port {
        port_no: 3,
        hw_addr: [2, 0, 0, 0, 0, 3],
        name: "veth3".into(),
        config: 1,
        state: 4,
        curr: 0x2820,
        advertised: 0,
        supported: 0,
        peer: 0,
        curr_speed: 10_000_000,
        max_speed: 0,
    };
    let request = Message::EchoRequest(b"ping".to_vec()).encode(77);
    let messages = [
        (
            "features_reply",
            Message::FeaturesReply(SwitchFeatures {
                datapath_id: 0xabcdef,
                n_buffers: 256,
                n_tables: 64,
                auxiliary_id: 0,
                capabilities: 0x4f,
            }),
        ),
        ("get_config_reply", Message::GetConfigReply(SwitchConfig { flags: 0, miss_send_len: 128 })),
        (
            "packet_in",
            Message::PacketIn(PacketIn {
                buffer_id: NO_BUFFER,
                total_len: 60,
                reason: packet_in_reason::ACTION,
                table_id: 3,
                cookie: 0x1234,
                match_: Match::new().with(Field::InPort, 2),
                data: (0..60).collect(),
            }),
        ),
        (
            "flow_removed",
            Message::FlowRemoved(FlowRemoved {
                cookie: 0xabcd,
                priority: 10,
                reason: 0,
                table_id: 1,
                duration_sec: 5,
                duration_nsec: 250,
                idle_timeout: 5,
                hard_timeout: 0,
                packet_count: 7,
                byte_count: 700,
                match_: match_.clone(),
            }),
        ),
        ("port_status", Message::PortStatus(PortStatus { reason: port_reason::MODIFY, desc: port.clone() })),
        ("error", Message::Error(ErrorMsg::reply_to(ErrorCode::BadRequest(BadRequest::BadType), &request))),
        ("echo_reply", Message::EchoReply(b"ping".to_vec())),
        ("barrier_reply", Message::BarrierReply),
        ("role_reply", Message::RoleReply(RoleMsg { role: role::MASTER, generation_id: 42 })),
        (
            "desc_reply",
            Message::MultipartReply(MultipartReply::new(MultipartReplyBody::Desc(Desc {
                mfr_desc: "edgeflow".into(),
                hw_desc: "linux".into(),
                sw_desc: "0.1".into(),
                serial_num: "none".into(),
                dp_desc: "dp 1".into(),
            }))),
        ),
        (
            "flow_stats_reply",
            Message::MultipartReply(MultipartReply::new(MultipartReplyBody::Flow(vec![FlowStats {
                table_id: 0,
                duration_sec: 3,
                duration_nsec: 4,
                priority: 100,
                idle_timeout: 0,
                hard_timeout: 0,
                flags: 0,
                cookie: 9,
                packet_count: 10,
                byte_count: 1000,
                match_: match_.clone(),
                instructions: vec![Instruction::ApplyActions(vec![Action::output(2)])],
            }]))),
        ),
        (
            "port_stats_reply",
            Message::MultipartReply(MultipartReply::new(MultipartReplyBody::PortStats(vec![PortStats {
                port_no: 1,
                rx_packets: 1,
                tx_packets: 2,
                rx_bytes: 3,
                tx_bytes: 4,
                rx_dropped: 5,
                tx_dropped: 6,
                rx_errors: 7,
                duration_sec: 8,
                duration_nsec: 9,
                ..Default::default()
            }]))),
        ),
        (
            "queue_stats_reply",
            Message::MultipartReply(MultipartReply::new(MultipartReplyBody::Queue(vec![QueueStats {
                port_no: 1,
                queue_id: 7,
                tx_bytes: 1500,
                tx_packets: 1,
                tx_errors: 2,
                duration_sec: 3,
                duration_nsec: 4,
            }]))),
        ),
        ("port_desc_reply", Message::MultipartReply(MultipartReply::new(MultipartReplyBody::PortDesc(vec![port])))),
    ];
    for (name, m) in messages {
        let hex: String = m.encode(xid).iter().map(|b| format!("{b:02x}")).collect();
        println!("{name} {hex}");
    }
}
