//! The C and Rust views of every structure, constant and key offset the two sides share, compared
//! mechanically. The C side is `bpf/layout.h` as the eBPF programs lay it out, which
//! crates/ebpf/build.rs evaluates (refusing a target whose own C would lay it out otherwise) and
//! hands over as `ebpf::objects::LAYOUT`; the Rust side is the list below, each value checked against
//! it when this crate compiles, for whichever target it compiles for.

use super::*;
use packet::key::off;

/// The Rust twins of `bpf/layout.h`'s values. Each is held to the C value of its name at compile
/// time (a build with the fast path's objects only: without them there is no C side); those that
/// need a feature this crate may be built without are checked by the test below instead.
macro_rules! shared_with_c {
    (always { $($name:literal => $value:expr,)* } with_afdx { $($aname:literal => $avalue:expr,)* }) => {
        #[cfg(feature = "fastpath")]
        const _: () = {
            $(assert!(
                c_value($name) == ($value) as u64,
                concat!("bpf/layout.h and crates/datapath/src/fastpath/layout.rs disagree on ", $name)
            );)*
        };
        #[cfg(test)]
        fn rust_side() -> Vec<(&'static str, u64)> {
            vec![$(($name, ($value) as u64),)* $(($aname, ($avalue) as u64),)*]
        }
    };
}

/// The C value of `name` in `bpf/layout.h`, at compile time.
#[cfg(feature = "fastpath")]
const fn c_value(name: &str) -> u64 {
    let layout = ebpf::objects::LAYOUT;
    let mut i = 0;
    while i < layout.len() {
        let (candidate, value) = layout[i];
        if same(candidate.as_bytes(), name.as_bytes()) {
            return value;
        }
        i += 1;
    }
    panic!("a name the Rust side checks is not in bpf/layout.h")
}

#[cfg(feature = "fastpath")]
const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

shared_with_c! {
always {
    "sizeof action" => ACTION_BYTES,
    "action.op" => 0,
    "action.a8" => 1,
    "action.a16" => 2,
    "action.a32" => 4,
    "action.mac" => 8,
    "sizeof action.op" => 1,
    "sizeof action.a8" => 1,
    "sizeof action.a16" => 2,
    "sizeof action.a32" => 4,
    "sizeof action.mac" => 6,
    "sizeof entry.n_actions" => 2,
    "sizeof entry.decrements" => 2,
    "sizeof entry.mask_id" => 4,
    "sizeof mask_slot.words" => 4,
    "sizeof port_slot.ifindex" => 4,
    "sizeof entry" => ENTRY_BYTES,
    "entry.generation" => 0,
    "entry.n_actions" => ENTRY_N_ACTIONS_AT,
    "entry.mask_id" => ENTRY_MASK_AT,
    "entry.decrements" => ENTRY_DECREMENTS_AT,
    "entry.key" => ENTRY_KEY_AT,
    "entry.act" => ENTRY_ACTIONS_AT,
    "sizeof flow_hits" => FLOW_HITS_BYTES,
    "flow_hits.packets" => 0,
    "flow_hits.bytes" => 8,
    "FLOW_PROBES" => table::FLOW_PROBES,
    "FLOW_SLOT_SPREAD" => table::FLOW_SLOT_SPREAD,
    "CFG_FLOW_SLOT_SHIFT" => CFG_FLOW_SLOT_SHIFT,
    "sizeof mask_slot" => MASK_SLOT_BYTES,
    "mask_slot.generation" => 0,
    "mask_slot.words" => 8,
    "mask_slot.m" => 16,
    "mask_slot.n_kept" => 12,
    "mask_slot.kept" => MASK_KEPT_AT,
    "sizeof mask_slot.n_kept" => 4,
    "sizeof mask_slot.kept" => KEY_WORDS,
    "mask_slot.slot_shift" => MASK_SHIFT_AT,
    "mask_slot.seed" => MASK_SEED_AT,
    "sizeof mask_order" => MAX_MASKS * 4,
    "sizeof meter" => METER_BYTES,
    "meter.per_sec" => 0,
    "meter.capacity" => 8,
    "meter.tokens" => 16,
    "meter.kbps" => 32,
    "meter.packets" => METER_COUNTS_AT,
    "meter.dropped_bytes" => (METER_COUNTS_AT + 24),
    "sizeof port_slot" => PORT_SLOT_BYTES,
    "port_slot.ifindex" => 0,
    "port_slot.info" => PORT_SLOT_INFO_AT,
    "sizeof flow_key" => KEY_BYTES,
    "sizeof less_port" => labels::LESS_PORT_BYTES,
    "less_port.ifindex" => 0,
    "less_port.live" => 4,
    "less_port.edge" => 5,
    "less_port.member" => 6,
    "less_port.whole" => 7,
    "sizeof less_stack" => labels::LESS_STACK_BYTES,
    "less_stack.port" => 0,
    "less_stack.ethertype" => 4,
    "less_stack.len" => 6,
    "less_stack.budget_at" => 8,
    "less_stack.bytes" => labels::LESS_STACK_AT,
    "sizeof less_reroute_key" => labels::LESS_REROUTE_KEY_BYTES,
    "less_reroute_key.port" => 0,
    "less_reroute_key.hash" => 8,
    "sizeof less_push_key" => labels::LESS_PUSH_KEY_BYTES,
    "LESS_STACK_MAX" => labels::LESS_STACK_MAX,
    "LESS_MAX_PORTS" => labels::LESS_MAX_PORTS,
    "CFG_LESS_MAX_LABELS" => CFG_LESS_MAX_LABELS,
    "CNT_LESS_SHIFTED" => CNT_LESS_SHIFTED,
    "CNT_LESS_POPPED" => CNT_LESS_SHIFTED as u64 + 1,
    "CNT_LESS_DELIVERED" => CNT_LESS_SHIFTED as u64 + 2,
    "CNT_LESS_PUSHED" => CNT_LESS_SHIFTED as u64 + 3,
    "CNT_LESS_REROUTED" => CNT_LESS_SHIFTED as u64 + 4,
    "CNT_LESS_SPENT" => CNT_LESS_SPENT,
    "sizeof afdx_link" => links::AFDX_LINK_BYTES,
    "afdx_link.acct" => 0,
    "afdx_link.in_port" => links::AFDX_LINK_IN_PORT_AT,
    "afdx_link.account" => links::AFDX_LINK_ACCOUNT_AT,
    "afdx_link.smin" => links::AFDX_LINK_SMIN_AT,
    "afdx_link.smax" => links::AFDX_LINK_SMAX_AT,
    "afdx_link.n_out" => links::AFDX_LINK_N_OUT_AT,
    "afdx_link.fanout" => links::AFDX_LINK_FANOUT_AT,
    "afdx_link.out_ifindex" => links::AFDX_LINK_OUT_AT,
    "afdx_link.ip_check" => links::AFDX_LINK_IP_CHECK_AT,
    "sizeof afdx_outputs" => 4 * links::AFDX_MAX_OUT,
    "sizeof afdx_account" => links::AFDX_ACCOUNT_BYTES,
    "afdx_account.empty" => 0,
    "afdx_account.cap" => 8,
    "afdx_account.bag_ns" => 16,
    "afdx_account.smax" => 24,
    "afdx_account.per_frame" => 28,
    "sizeof afdx_counts" => 8 * links::AC_MAX,
    "AFDX_MAX_OUT" => links::AFDX_MAX_OUT,
    "AFDX_FANOUTS" => links::AFDX_FANOUTS,
    "AFDX_MAX_LINKS" => links::AFDX_MAX_LINKS,
    "AFDX_VL_IDS" => links::AFDX_VL_IDS,
    "AC_MAX" => links::AC_MAX,
    // The counters harvest_links reads by position, drops in forwarding::afdx::VlDrop's order.
    "AC_FRAMES_IN" => 0,
    "AC_BYTES_IN" => 1,
    "AC_FRAMES_OUT" => 2,
    "AC_BYTES_OUT" => 3,
    "AC_WRONG_PORT_BYTES" => 4,
    "CFG_AFDX_CONSTANT" => CFG_AFDX_CONSTANT,
    "CFG_AFDX_NETWORK" => CFG_AFDX_NETWORK,
    "CNT_AFDX_UP" => CNT_AFDX_UP,
    "KEY_BYTES" => KEY_BYTES,
    "MAX_MASKS" => MAX_MASKS,
    "MAX_ACTIONS" => MAX_ACTIONS,
    "MAX_METERS" => MAX_METERS,
    "PORT_SLOTS" => PORT_SLOTS,
    "XSK_SLOTS" => XSK_SLOTS,
    "XSK_QUEUES" => XSK_QUEUES,
    "MASK_END" => MASK_END,
    "HASH_MUL" => HASH_MUL,
    "CFG_GENERATION" => CFG_GENERATION,
    "CFG_UPCALL_IFINDEX" => CFG_UPCALL_IFINDEX,
    "CFG_HASH_SEED" => CFG_HASH_SEED,
    "CNT_DROP" => CNT_DROP,
    "CNT_NO_UPCALL" => CNT_NO_UPCALL,
    "CNT_ACTION_FAILED" => CNT_ACTION_FAILED,
    "CNT_MAX" => CNT_MAX,
    "CFG_XDP_FALLBACK_IFINDEX" => CFG_XDP_FALLBACK_IFINDEX,
    "CNT_XDP_FALLBACK" => CNT_XDP_FALLBACK,
    "OUT_VIA_TC" => OUT_VIA_TC,
    "OP_OUTPUT" => op::OUTPUT,
    "OP_SET_ETH_DST" => op::SET_ETH_DST,
    "OP_SET_ETH_SRC" => op::SET_ETH_SRC,
    "OP_PUSH_VLAN" => op::PUSH_VLAN,
    "OP_POP_VLAN" => op::POP_VLAN,
    "OP_SET_VLAN_VID" => op::SET_VLAN_VID,
    "OP_SET_VLAN_PCP" => op::SET_VLAN_PCP,
    "OP_SET_IPV4_SRC" => op::SET_IPV4_SRC,
    "OP_SET_IPV4_DST" => op::SET_IPV4_DST,
    "OP_SET_TP_SRC" => op::SET_TP_SRC,
    "OP_SET_TP_DST" => op::SET_TP_DST,
    "OP_SET_DSCP" => op::SET_DSCP,
    "OP_DEC_TTL" => op::DEC_TTL,
    "OP_METER" => op::METER,
    "K_IN_PORT" => off::IN_PORT,
    "K_IN_PHY_PORT" => off::IN_PHY_PORT,
    "K_ETH_DST" => off::ETH_DST,
    "K_ETH_TYPE" => off::ETH_TYPE,
    "K_ETH_SRC" => off::ETH_SRC,
    "K_VLAN_VID" => off::VLAN_VID,
    "K_VLAN_PCP" => off::VLAN_PCP,
    "K_IP_DSCP" => off::IP_DSCP,
    "K_IP_ECN" => off::IP_ECN,
    "K_IP_PROTO" => off::IP_PROTO,
    "K_IPV4_SRC" => off::IPV4_SRC,
    "K_IPV4_DST" => off::IPV4_DST,
    "K_TP_SRC" => off::TP_SRC,
    "K_TP_DST" => off::TP_DST,
    "K_ICMP_TYPE" => off::ICMP_TYPE,
    "K_ICMP_CODE" => off::ICMP_CODE,
    "K_ARP_OP" => off::ARP_OP,
    "K_MPLS_LABEL" => off::MPLS_LABEL,
    "K_MPLS_TC" => off::MPLS_TC,
    "K_MPLS_BOS" => off::MPLS_BOS,
    "K_IPV6_FLABEL" => off::IPV6_FLABEL,
    "K_PBB_ISID" => off::PBB_ISID,
    "K_ARP_SHA" => off::ARP_SHA,
    "K_ARP_THA" => off::ARP_THA,
    "K_IPV6_SRC" => off::IPV6_SRC,
    "K_IPV6_DST" => off::IPV6_DST,
}
with_afdx {
    "AC_BAD_SOURCE" => 5 + forwarding::afdx::VlDrop::BadSource as u64,
    "AC_WRONG_PORT" => 5 + forwarding::afdx::VlDrop::WrongPort as u64,
    "AC_UNDERSIZE" => 5 + forwarding::afdx::VlDrop::Undersize as u64,
    "AC_OVERSIZE" => 5 + forwarding::afdx::VlDrop::Oversize as u64,
    "AC_POLICED" => 5 + forwarding::afdx::VlDrop::Policed as u64,
    "AC_WRONG_NETWORK" => 5 + forwarding::afdx::VlDrop::WrongNetwork as u64,
    "AC_BAD_ETHERTYPE" => 5 + forwarding::afdx::VlDrop::BadEthertype as u64,
    "AC_BAD_IP" => 5 + forwarding::afdx::VlDrop::BadIp as u64,
}
}

#[cfg(test)]
fn c_side() -> std::collections::HashMap<String, u64> {
    ebpf::objects::LAYOUT.iter().map(|&(name, value)| (name.to_string(), value)).collect()
}

#[test]
fn c_and_rust_agree_on_every_shared_layout() {
    let c = c_side();
    let rust = rust_side();
    let mut wrong = Vec::new();
    for (name, r) in &rust {
        match c.get(*name) {
            Some(v) if v == r => {}
            other => wrong.push(format!("{name}: C {other:?}, Rust {r}")),
        }
    }
    assert_eq!(c.len(), rust.len(), "every C value has its Rust twin in this list");
    assert!(wrong.is_empty(), "C and Rust disagree:\n{}", wrong.join("\n"));
}

/// The shared layout, every name and value above, as one number: what a kept fast path's maps
/// mean (`keep::LAYOUT_FINGERPRINT`, which a kept record carries and the next run compares). A
/// change to any of them changes it, and this test holds the constant to it, so that no run
/// misreads what an older one kept: the next run starts cold.
#[test]
fn the_kept_layout_fingerprint_is_the_layout_as_it_is() {
    let c = c_side();
    let mut entries: Vec<(&String, &u64)> = c.iter().collect();
    entries.sort();
    // FNV-1a over "name=value;" in name order: stable across builds and machines.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (name, value) in entries {
        for b in format!("{name}={value};").bytes() {
            hash = (hash ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    assert_eq!(
        hash,
        super::keep::LAYOUT_FINGERPRINT,
        "the maps' layout changed: set keep::LAYOUT_FINGERPRINT to {hash:#x} (a fast path kept by a run of the old \
         layout then starts cold)"
    );
}
