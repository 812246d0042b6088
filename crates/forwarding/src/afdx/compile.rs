//! The VL table as plain OpenFlow 1.3, for any OF1.3 switch (what the P4 case study did with
//! tables and meters): per VL and network one flow matching the input port, the VL's destination
//! MAC, IPv4, and the end-system source format (a masked match); a meter per account; an ALL group
//! per multicast VL; `set_queue` for the VL's priority.
//!
//! What OpenFlow 1.3 cannot say, and so the compiled program does not do:
//! - frame length: no match field holds it, so Smin and Smax are not checked;
//! - BAG policing exactly. Part 7's account is itself a token bucket (rate Smax per BAG, depth
//!   Smax·(1 + J/BAG)), but a meter's rate and burst are integers: packets or kbit per second,
//!   whole packets or kbit. Both are rounded up here, so that no conforming frame is dropped, and
//!   so the meter admits more than the account where they do not divide: 1000/BAG packets/s is
//!   not an integer for BAGs of 16 ms and more (8 pps for 7.8125 at 128 ms), and a jitter
//!   tolerance of half a BAG buys two frames back to back instead of one and a half. Byte
//!   policing rounds Smax per BAG up to whole kbit/s. docs/afdx.md measures the difference.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ofp::action::{Action, Instruction};
use ofp::group_meter::{group_command, group_type, meter_command, meter_flags, BandKind, Bucket, MeterBand};
use ofp::message::{FlowMod, GroupMod, MeterMod};
use ofp::oxm::{Field, Match};

use super::{vl_mac, Police, Priority, VirtualLink, HIGH_QUEUE, LOW_QUEUE, NETWORK_A, NETWORK_B};

/// Which network's switch the program is for: its flows accept that interface id in the source
/// MAC (both, for `Any`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Network {
    A,
    B,
    Any,
}

/// Priority of the VL flows; anything they do not match hits no flow and is dropped.
pub const VL_PRIORITY: u16 = 100;

/// The program: meters and groups first (flows name them), then flows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Program {
    pub meters: Vec<MeterMod>,
    pub groups: Vec<GroupMod>,
    pub flows: Vec<FlowMod>,
}

/// `Program` for a table `super::check` accepted.
pub fn compile(vls: &[VirtualLink], mac_constant: u32, network: Network) -> Program {
    let mut program = Program::default();
    // One meter per account: VLs naming the same account share it, the others have their own.
    let mut accounts: BTreeMap<String, u32> = BTreeMap::new();
    let interfaces: &[u8] = match network {
        Network::A => &[NETWORK_A],
        Network::B => &[NETWORK_B],
        Network::Any => &[NETWORK_A, NETWORK_B],
    };
    for vl in vls {
        let next_meter = program.meters.len() as u32 + 1;
        let meter_id = match &vl.account {
            Some(name) => *accounts.entry(name.clone()).or_insert(next_meter),
            None => next_meter,
        };
        if meter_id == next_meter {
            program.meters.push(meter(meter_id, vl));
        }
        let queue = match vl.priority {
            Priority::High => HIGH_QUEUE,
            Priority::Low => LOW_QUEUE,
        };
        let forward = match vl.out_ports.as_slice() {
            [one] => Action::output(*one),
            many => {
                let group_id = program.groups.len() as u32 + 1;
                program.groups.push(GroupMod {
                    command: group_command::ADD,
                    group_type: group_type::ALL,
                    group_id,
                    buckets: many
                        .iter()
                        .map(|&p| Bucket { weight: 0, watch_port: 0, watch_group: 0, actions: vec![Action::output(p)] })
                        .collect(),
                });
                Action::Group(group_id)
            }
        };
        for &interface in interfaces {
            let dst = vl_mac(mac_constant, vl.id);
            let match_ = Match::new()
                .with(Field::InPort, vl.in_port as u128)
                .with(Field::EthDst, mac_value(&dst))
                .with(Field::EthType, 0x0800)
                .with_masked(Field::EthSrc, mac_value(&super::end_system_mac(0, interface)), SOURCE_MASK);
            program.flows.push(FlowMod {
                priority: VL_PRIORITY,
                match_,
                instructions: vec![
                    Instruction::Meter(meter_id),
                    Instruction::ApplyActions(vec![Action::SetQueue(queue), forward.clone()]),
                ],
                ..Default::default()
            });
        }
    }
    program
}

/// The constant field, and the last octet (interface id over five zero bits); the end-system id
/// is free.
const SOURCE_MASK: u128 = 0xffff_ff00_00ff;

fn mac_value(mac: &[u8; 6]) -> u128 {
    mac.iter().fold(0u128, |acc, &b| acc << 8 | b as u128)
}

/// The token bucket closest to a VL's account that never drops a conforming frame: rate and
/// burst (the account's depth, 1 + J/BAG frames) rounded up.
fn meter(meter_id: u32, vl: &VirtualLink) -> MeterMod {
    let (bag_ns, smax, jitter) = (vl.bag_ns as u128, vl.smax as u128, vl.jitter_ns as u128);
    let (flags, rate, burst) = match vl.police {
        Police::Frame => {
            let frames = (bag_ns + jitter).div_ceil(bag_ns);
            (meter_flags::PKTPS, 1_000_000_000u128.div_ceil(bag_ns), frames)
        }
        Police::Byte => {
            let kbit_per_s = (smax * 8 * 1_000_000).div_ceil(bag_ns);
            let burst_bits = smax * 8 * (bag_ns + jitter) / bag_ns;
            (meter_flags::KBPS, kbit_per_s, burst_bits.div_ceil(1000).max(1))
        }
    };
    MeterMod {
        command: meter_command::ADD,
        flags: flags | meter_flags::BURST | meter_flags::STATS,
        meter_id,
        bands: vec![MeterBand { rate: rate as u32, burst_size: burst as u32, kind: BandKind::Drop }],
    }
}

/// The program as a shell script of `ovs-ofctl` commands for the switch named by its first
/// argument (a bridge, or tcp:IP:PORT): what was there is deleted first.
pub fn ovs_ofctl_script(program: &Program, title: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "#!/bin/sh");
    let _ = writeln!(
        s,
        "# {title}: {} flows, {} meters, {} groups (edgeflow afdx compile).",
        program.flows.len(),
        program.meters.len(),
        program.groups.len()
    );
    let _ = writeln!(s, "# Usage: sh THIS_FILE SWITCH   (an Open vSwitch bridge, or tcp:IP:PORT)");
    let _ = writeln!(s, "set -e\nT=\"${{1:?usage: $0 SWITCH}}\"\nO=\"ovs-ofctl -O OpenFlow13\"");
    let _ = writeln!(s, "$O del-flows \"$T\"\n$O del-groups \"$T\"\n$O del-meters \"$T\"");
    for m in &program.meters {
        let b = &m.bands[0];
        let unit = if m.flags & meter_flags::KBPS != 0 { "kbps" } else { "pktps" };
        let _ = writeln!(
            s,
            "$O add-meter \"$T\" meter={},{unit},burst,stats,bands=type=drop,rate={},burst_size={}",
            m.meter_id, b.rate, b.burst_size
        );
    }
    for g in &program.groups {
        let buckets: Vec<String> = g.buckets.iter().map(|b| format!("bucket={}", actions(&b.actions))).collect();
        let _ = writeln!(s, "$O add-group \"$T\" group_id={},type=all,{}", g.group_id, buckets.join(","));
    }
    for f in &program.flows {
        let mut fields = vec![format!("table={}", f.table_id), format!("priority={}", f.priority)];
        for oxm in &f.match_.fields {
            let name = match oxm.field {
                Field::InPort => "in_port",
                Field::EthDst => "dl_dst",
                Field::EthSrc => "dl_src",
                Field::EthType => "dl_type",
                other => other.name(),
            };
            let value = match oxm.field {
                Field::EthDst | Field::EthSrc => mac_text(oxm.value),
                Field::EthType => format!("{:#06x}", oxm.value),
                _ => oxm.value.to_string(),
            };
            let mask = oxm.mask.map(|m| format!("/{}", mac_text(m))).unwrap_or_default();
            fields.push(format!("{name}={value}{mask}"));
        }
        let mut acts = Vec::new();
        for i in &f.instructions {
            match i {
                Instruction::Meter(id) => acts.push(format!("meter:{id}")),
                Instruction::ApplyActions(a) => acts.push(actions(a)),
                other => unreachable!("the compiler emits no {other:?}"),
            }
        }
        let _ = writeln!(s, "$O add-flow \"$T\" {},actions={}", fields.join(","), acts.join(","));
    }
    s
}

fn actions(list: &[Action]) -> String {
    list.iter()
        .map(|a| match a {
            Action::Output { port, .. } => format!("output:{port}"),
            Action::SetQueue(q) => format!("set_queue:{q}"),
            Action::Group(g) => format!("group:{g}"),
            other => unreachable!("the compiler emits no {other:?}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn mac_text(v: u128) -> String {
    (0..6).rev().map(|i| format!("{:02x}", (v >> (8 * i)) as u8)).collect::<Vec<_>>().join(":")
}
