//! `edgeflow dump-flows --kernel`: what the kernel holds, read back from its maps rather than from
//! userspace's book-keeping (as Open vSwitch's `dpctl/dump-flows` reads the datapath), so that a
//! difference between the two shows. Megaflows with their match, actions and hits; AFDX links;
//! LESS ports and the label stacks pushed per destination.

use std::collections::BTreeMap;
use std::net::Ipv6Addr;

use packet::{FlowKey, KEY_BYTES};
use serde_json::{json, Value};

use super::links::{
    sum_over_cpus, AC_MAX, AFDX_LINK_IN_PORT_AT, AFDX_LINK_N_OUT_AT, AFDX_LINK_SMAX_AT, AFDX_LINK_SMIN_AT, AFDX_MAX_OUT,
};
use super::{
    labels, op, read_hits, table, FastPath, ACTION_BYTES, CFG_GENERATION, ENTRY_ACTIONS_AT, ENTRY_KEY_AT,
    ENTRY_MASK_AT, ENTRY_N_ACTIONS_AT, MAX_ACTIONS, MAX_MASKS,
};

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes(b[at..at + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().unwrap())
}

impl FastPath {
    /// OpenFlow port of an interface the programs are attached to.
    fn port_of(&self) -> BTreeMap<u32, u32> {
        self.attached.iter().map(|(&no, a)| (a.ifindex, no)).collect()
    }

    /// One kernel action (`struct action`) as `ovs-ofctl` would write it.
    fn action_text(&self, a: &[u8], ports: &BTreeMap<u32, u32>) -> String {
        let (code, a8, a16, a32) = (a[0], a[1], u16_at(a, 2), u32_at(a, 4));
        match code {
            op::OUTPUT => match ports.get(&a32) {
                Some(no) => format!("output:{no}"),
                None => format!("output:ifindex{a32}"),
            },
            op::SET_ETH_DST => format!("set_field:{}->eth_dst", packet::key::mac_text(&a[8..14])),
            op::SET_ETH_SRC => format!("set_field:{}->eth_src", packet::key::mac_text(&a[8..14])),
            op::PUSH_VLAN => format!("push_vlan:0x{a16:04x}"),
            op::POP_VLAN => "pop_vlan".into(),
            op::SET_VLAN_VID => format!("set_field:{a16}->vlan_vid"),
            op::SET_VLAN_PCP => format!("set_field:{a8}->vlan_pcp"),
            op::SET_IPV4_SRC => format!("set_field:{}->ipv4_src", std::net::Ipv4Addr::from(a32.to_ne_bytes())),
            op::SET_IPV4_DST => format!("set_field:{}->ipv4_dst", std::net::Ipv4Addr::from(a32.to_ne_bytes())),
            op::SET_TP_SRC => format!("set_field:{a16}->tp_src"),
            op::SET_TP_DST => format!("set_field:{a16}->tp_dst"),
            op::SET_DSCP => format!("set_field:{a8}->ip_dscp"),
            op::DEC_TTL => "dec_ttl".into(),
            op::METER => format!("meter:slot{a32}"),
            other => format!("op{other}"),
        }
    }

    /// Everything the kernel's maps hold, as JSON.
    pub fn dump(&self) -> Value {
        let ports = self.port_of();
        let generation = self
            .obj
            .map("ef_config")
            .ok()
            .and_then(|m| m.lookup(&CFG_GENERATION.to_ne_bytes()).ok().flatten())
            .map(|v| u64_at(&v, 0));
        // Mask slot → the mask the kernel holds there.
        let mut masks: BTreeMap<u32, FlowKey> = BTreeMap::new();
        if let Ok(m) = self.obj.map("ef_masks") {
            for slot in 0..MAX_MASKS as u32 {
                if let Ok(Some(v)) = m.lookup(&slot.to_ne_bytes()) {
                    let mut mask = FlowKey::default();
                    mask.0.copy_from_slice(&v[16..16 + KEY_BYTES]);
                    if !mask.is_zero() {
                        masks.insert(slot, mask);
                    }
                }
            }
        }
        let mut flows = Vec::new();
        let map = self.megaflows();
        // The entries the kernel's slots lead to (`fastpath/table.rs`).
        let slots =
            self.obj.map("ef_flow_slots").and_then(|m| m.lookup_cells(m.max_entries, false)).unwrap_or_default();
        for index in slots.chunks_exact(8).filter_map(|c| table::slot_index(u64_at(c, 0))) {
            let Ok(Some(v)) = map.lookup(&index.to_ne_bytes()) else { continue };
            let slot = u32_at(&v, ENTRY_MASK_AT);
            let (packets, bytes) = read_hits(&self.obj, index);
            let mut key = FlowKey::default();
            key.0.copy_from_slice(&v[ENTRY_KEY_AT..ENTRY_KEY_AT + KEY_BYTES]);
            let n = (u16_at(&v, ENTRY_N_ACTIONS_AT) as usize).min(MAX_ACTIONS);
            let actions: Vec<String> = (0..n)
                .map(|i| {
                    let at = ENTRY_ACTIONS_AT + i * ACTION_BYTES;
                    self.action_text(&v[at..at + ACTION_BYTES], &ports)
                })
                .collect();
            let entry_generation = u64_at(&v, 0);
            flows.push(json!({
                "match": masks.get(&slot).map_or_else(|| format!("mask slot {slot} (empty)"), |m| packet::key::match_text(&key, m)),
                "actions": if actions.is_empty() { "drop".to_string() } else { actions.join(",") },
                "packets": packets,
                "bytes": bytes,
                "mask_slot": slot,
                // An entry of an older generation is dead: the program treats it as a miss.
                "live": Some(entry_generation) == generation,
            }));
        }
        flows.sort_by_key(|f| std::cmp::Reverse(f["packets"].as_u64()));
        json!({
            "datapath": self.mode.name(),
            "generation": generation,
            "masks": masks.len(),
            "megaflows": flows,
            "afdx_links": self.dump_links(&ports),
            "less": self.dump_labels(&ports),
        })
    }

    fn dump_links(&self, ports: &BTreeMap<u32, u32>) -> Vec<Value> {
        let (Ok(vl_slot), Ok(links), Ok(outputs), Ok(counts)) = (
            self.obj.map("ef_afdx_vl_slot"),
            self.obj.map("ef_afdx_links"),
            self.obj.map("ef_afdx_outputs"),
            self.obj.map("ef_afdx_counts"),
        ) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for id in self.held_links() {
            let Ok(Some(s)) = vl_slot.lookup(&(id as u32).to_ne_bytes()) else { continue };
            let Some(slot) = u32_at(&s, 0).checked_sub(1) else { continue };
            let Ok(Some(l)) = links.lookup(&slot.to_ne_bytes()) else { continue };
            let n_out = (u16_at(&l, AFDX_LINK_N_OUT_AT) as usize).min(AFDX_MAX_OUT);
            let outs: Vec<Value> = match outputs.lookup(&slot.to_ne_bytes()) {
                Ok(Some(o)) => (0..n_out)
                    .map(|i| {
                        let ifindex = u32_at(&o, 4 * i);
                        ports.get(&ifindex).map_or(json!(format!("ifindex{ifindex}")), |no| json!(no))
                    })
                    .collect(),
                _ => Vec::new(),
            };
            let c: [u64; AC_MAX] =
                counts.lookup_percpu(&slot.to_ne_bytes()).map(|p| sum_over_cpus(&p)).unwrap_or([0; AC_MAX]);
            out.push(json!({
                "vl": id, "slot": slot, "in_port": u32_at(&l, AFDX_LINK_IN_PORT_AT),
                "smin": u16_at(&l, AFDX_LINK_SMIN_AT), "smax": u16_at(&l, AFDX_LINK_SMAX_AT), "out": outs,
                "frames_in": c[0], "bytes_in": c[1], "frames_out": c[2], "bytes_out": c[3],
            }));
        }
        out
    }

    fn dump_labels(&self, ports: &BTreeMap<u32, u32>) -> Value {
        let (Ok(port_map), Ok(push)) = (self.obj.map("ef_less_ports"), self.obj.map("ef_less_push")) else {
            return Value::Null;
        };
        let less_ports: Vec<Value> = port_map
            .keys()
            .unwrap_or_default()
            .iter()
            .filter_map(|k| {
                let v = port_map.lookup(k).ok()??;
                let ifindex = u32_at(&v, 0);
                (ifindex != 0).then(|| {
                    json!({"port": u32_at(k, 0), "interface_port": ports.get(&ifindex), "live": v[4] != 0,
                           "edge": v[5] != 0, "member": v[6] != 0})
                })
            })
            .collect();
        let mut pushes: Vec<Value> = push
            .keys()
            .unwrap_or_default()
            .iter()
            .filter_map(|k| {
                let v = push.lookup(k).ok()??;
                let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&k[..16]).ok()?);
                let dst = dst.to_ipv4_mapped().map_or(dst.to_string(), |a| a.to_string());
                let len = (u16_at(&v, 6) as usize).min(labels::LESS_STACK_MAX);
                let stack = &v[labels::LESS_STACK_AT..labels::LESS_STACK_AT + len];
                Some(json!({"dst": dst, "port": u32_at(&v, 0), "stack": stack.iter().map(|b| format!("{b:02x}")).collect::<String>()}))
            })
            .collect();
        pushes.sort_by(|a, b| a["dst"].as_str().cmp(&b["dst"].as_str()));
        let reroutes = self.obj.map("ef_less_reroute").ok().and_then(|m| m.keys().ok()).map_or(0, |k| k.len());
        json!({"ports": less_ports, "push": pushes, "reroute_entries": reroutes})
    }
}
