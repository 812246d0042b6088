//! The C and Rust views of every structure, constant and key offset the two sides share, compared
//! mechanically: a host program built from `bpf/fastpath.h` prints the C side.

use super::*;
use packet::key::off;
use std::collections::HashMap;

fn c_side() -> HashMap<String, u64> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // A private directory per call: the tests that read the C side run in parallel, and the
    // probe built here is run (as root, by the kernel tests) from it.
    let private = crate::sys::PrivateDir::new("ef-layout").unwrap();
    let dir = private.path();
    let prog = r#"
#include <stdio.h>
#include <stddef.h>
#include "fastpath.h"
#define P(name, v) printf("%s %llu\n", name, (unsigned long long)(v))
#define OFF(s, f) P(#s "." #f, offsetof(struct s, f))
#define SZ(s) P("sizeof " #s, sizeof(struct s))
#define FSZ(s, f) P("sizeof " #s "." #f, sizeof(((struct s *)0)->f))
int main(void) {
SZ(action); OFF(action, op); OFF(action, a8); OFF(action, a16); OFF(action, a32); OFF(action, mac);
FSZ(action, op); FSZ(action, a8); FSZ(action, a16); FSZ(action, a32); FSZ(action, mac);
FSZ(entry, n_actions); FSZ(mf_key, mask_id); FSZ(mask_slot, words); FSZ(port_slot, ifindex);
SZ(entry); OFF(entry, generation); OFF(entry, packets); OFF(entry, bytes); OFF(entry, n_actions);
OFF(entry, key); OFF(entry, act);
SZ(mf_key); OFF(mf_key, mask_id); OFF(mf_key, hash);
SZ(mask_slot); OFF(mask_slot, generation); OFF(mask_slot, words); OFF(mask_slot, m);
SZ(meter); OFF(meter, per_sec); OFF(meter, capacity); OFF(meter, tokens); OFF(meter, kbps); OFF(meter, packets);
OFF(meter, dropped_bytes);
SZ(port_slot); OFF(port_slot, ifindex); OFF(port_slot, info);
SZ(less_port); OFF(less_port, ifindex); OFF(less_port, live); OFF(less_port, edge); OFF(less_port, member); OFF(less_port, whole);
SZ(less_stack); OFF(less_stack, port); OFF(less_stack, ethertype); OFF(less_stack, len); OFF(less_stack, budget_at);
OFF(less_stack, bytes);
SZ(less_reroute_key); OFF(less_reroute_key, port); OFF(less_reroute_key, hash);
SZ(less_push_key);
SZ(afdx_link); OFF(afdx_link, acct); OFF(afdx_link, in_port); OFF(afdx_link, account); OFF(afdx_link, smin);
OFF(afdx_link, smax); OFF(afdx_link, n_out); OFF(afdx_link, fanout); OFF(afdx_link, out_ifindex); OFF(afdx_link, ip_check);
SZ(afdx_outputs);
SZ(afdx_account); OFF(afdx_account, empty); OFF(afdx_account, cap); OFF(afdx_account, bag_ns);
OFF(afdx_account, smax); OFF(afdx_account, per_frame); SZ(afdx_counts);
P("AFDX_MAX_OUT", AFDX_MAX_OUT); P("AFDX_FANOUTS", AFDX_FANOUTS); P("AFDX_MAX_LINKS", AFDX_MAX_LINKS); P("AFDX_VL_IDS", AFDX_VL_IDS); P("AC_MAX", AC_MAX);
P("AC_FRAMES_IN", AC_FRAMES_IN); P("AC_BYTES_IN", AC_BYTES_IN); P("AC_FRAMES_OUT", AC_FRAMES_OUT);
P("AC_BYTES_OUT", AC_BYTES_OUT); P("AC_WRONG_PORT_BYTES", AC_WRONG_PORT_BYTES); P("AC_BAD_SOURCE", AC_BAD_SOURCE);
P("AC_WRONG_PORT", AC_WRONG_PORT); P("AC_UNDERSIZE", AC_UNDERSIZE); P("AC_OVERSIZE", AC_OVERSIZE);
P("AC_POLICED", AC_POLICED); P("CFG_AFDX_CONSTANT", CFG_AFDX_CONSTANT); P("CNT_AFDX_UP", CNT_AFDX_UP);
P("AC_WRONG_NETWORK", AC_WRONG_NETWORK); P("AC_BAD_ETHERTYPE", AC_BAD_ETHERTYPE); P("AC_BAD_IP", AC_BAD_IP);
P("CFG_AFDX_NETWORK", CFG_AFDX_NETWORK);
P("LESS_STACK_MAX", LESS_STACK_MAX); P("LESS_MAX_PORTS", LESS_MAX_PORTS); P("CFG_LESS_MAX_LABELS", CFG_LESS_MAX_LABELS);
P("CNT_LESS_SHIFTED", CNT_LESS_SHIFTED); P("CNT_LESS_POPPED", CNT_LESS_POPPED); P("CNT_LESS_DELIVERED", CNT_LESS_DELIVERED);
P("CNT_LESS_PUSHED", CNT_LESS_PUSHED); P("CNT_LESS_REROUTED", CNT_LESS_REROUTED); P("CNT_LESS_SPENT", CNT_LESS_SPENT);
SZ(flow_key);
P("KEY_BYTES", KEY_BYTES); P("MAX_MASKS", MAX_MASKS); P("MAX_ACTIONS", MAX_ACTIONS);
P("MAX_METERS", MAX_METERS); P("PORT_SLOTS", PORT_SLOTS); P("MASK_END", MASK_END); P("HASH_MUL", HASH_MUL);
P("CFG_GENERATION", CFG_GENERATION); P("CFG_UPCALL_IFINDEX", CFG_UPCALL_IFINDEX); P("CFG_HASH_SEED", CFG_HASH_SEED);
P("CNT_DROP", CNT_DROP); P("CNT_NO_UPCALL", CNT_NO_UPCALL); P("CNT_ACTION_FAILED", CNT_ACTION_FAILED); P("CNT_MAX", CNT_MAX);
P("CFG_XDP_FALLBACK_IFINDEX", CFG_XDP_FALLBACK_IFINDEX); P("CNT_XDP_FALLBACK", CNT_XDP_FALLBACK); P("OUT_VIA_TC", OUT_VIA_TC);
P("OP_OUTPUT", OP_OUTPUT); P("OP_SET_ETH_DST", OP_SET_ETH_DST); P("OP_SET_ETH_SRC", OP_SET_ETH_SRC);
P("OP_PUSH_VLAN", OP_PUSH_VLAN); P("OP_POP_VLAN", OP_POP_VLAN); P("OP_SET_VLAN_VID", OP_SET_VLAN_VID);
P("OP_SET_VLAN_PCP", OP_SET_VLAN_PCP); P("OP_SET_IPV4_SRC", OP_SET_IPV4_SRC); P("OP_SET_IPV4_DST", OP_SET_IPV4_DST);
P("OP_SET_TP_SRC", OP_SET_TP_SRC); P("OP_SET_TP_DST", OP_SET_TP_DST); P("OP_SET_DSCP", OP_SET_DSCP);
P("OP_DEC_TTL", OP_DEC_TTL); P("OP_METER", OP_METER);
P("K_IN_PORT", K_IN_PORT); P("K_IN_PHY_PORT", K_IN_PHY_PORT); P("K_ETH_DST", K_ETH_DST); P("K_ETH_TYPE", K_ETH_TYPE);
P("K_ETH_SRC", K_ETH_SRC); P("K_VLAN_VID", K_VLAN_VID); P("K_VLAN_PCP", K_VLAN_PCP); P("K_IP_DSCP", K_IP_DSCP);
P("K_IP_ECN", K_IP_ECN); P("K_IP_PROTO", K_IP_PROTO); P("K_IPV4_SRC", K_IPV4_SRC); P("K_IPV4_DST", K_IPV4_DST);
P("K_TP_SRC", K_TP_SRC); P("K_TP_DST", K_TP_DST); P("K_ICMP_TYPE", K_ICMP_TYPE); P("K_ICMP_CODE", K_ICMP_CODE);
P("K_ARP_OP", K_ARP_OP); P("K_MPLS_LABEL", K_MPLS_LABEL); P("K_MPLS_TC", K_MPLS_TC); P("K_MPLS_BOS", K_MPLS_BOS);
P("K_IPV6_FLABEL", K_IPV6_FLABEL); P("K_PBB_ISID", K_PBB_ISID); P("K_ARP_SHA", K_ARP_SHA); P("K_ARP_THA", K_ARP_THA);
P("K_IPV6_SRC", K_IPV6_SRC); P("K_IPV6_DST", K_IPV6_DST);
return 0;
}
"#;
    std::fs::write(dir.join("layout.c"), prog).unwrap();
    let clang = ["clang-14", "clang", "cc"]
        .into_iter()
        .find(|c| std::process::Command::new(c).arg("--version").output().is_ok())
        .expect("a C compiler");
    let arch = if cfg!(target_arch = "aarch64") { "aarch64-linux-gnu" } else { "x86_64-linux-gnu" };
    let built = std::process::Command::new(clang)
        .arg(format!("-I{}", root.join("bpf").display()))
        .arg(format!("-I/usr/include/{arch}"))
        .arg(dir.join("layout.c"))
        .arg("-o")
        .arg(dir.join("layout"))
        .status()
        .unwrap();
    assert!(built.success(), "the layout probe did not build");
    let out = std::process::Command::new(dir.join("layout")).output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

#[test]
fn c_and_rust_agree_on_every_shared_layout() {
    let c = c_side();
    let rust: Vec<(&str, u64)> = vec![
        ("sizeof action", ACTION_BYTES as u64),
        ("action.op", 0),
        ("action.a8", 1),
        ("action.a16", 2),
        ("action.a32", 4),
        ("action.mac", 8),
        ("sizeof action.op", 1),
        ("sizeof action.a8", 1),
        ("sizeof action.a16", 2),
        ("sizeof action.a32", 4),
        ("sizeof action.mac", 6),
        ("sizeof entry.n_actions", 4),
        ("sizeof mf_key.mask_id", 4),
        ("sizeof mask_slot.words", 4),
        ("sizeof port_slot.ifindex", 4),
        ("sizeof entry", ENTRY_BYTES as u64),
        ("entry.generation", 0),
        ("entry.packets", ENTRY_PACKETS_AT as u64),
        ("entry.bytes", ENTRY_BYTES_AT as u64),
        ("entry.n_actions", ENTRY_N_ACTIONS_AT as u64),
        ("entry.key", ENTRY_KEY_AT as u64),
        ("entry.act", ENTRY_ACTIONS_AT as u64),
        ("sizeof mf_key", MF_KEY_BYTES as u64),
        ("mf_key.mask_id", 0),
        ("mf_key.hash", 8),
        ("sizeof mask_slot", (16 + KEY_BYTES) as u64),
        ("mask_slot.generation", 0),
        ("mask_slot.words", 8),
        ("mask_slot.m", 16),
        ("sizeof meter", METER_BYTES as u64),
        ("meter.per_sec", 0),
        ("meter.capacity", 8),
        ("meter.tokens", 16),
        ("meter.kbps", 32),
        ("meter.packets", METER_COUNTS_AT as u64),
        ("meter.dropped_bytes", (METER_COUNTS_AT + 24) as u64),
        ("sizeof port_slot", PORT_SLOT_BYTES as u64),
        ("port_slot.ifindex", 0),
        ("port_slot.info", PORT_SLOT_INFO_AT as u64),
        ("sizeof flow_key", KEY_BYTES as u64),
        ("sizeof less_port", labels::LESS_PORT_BYTES as u64),
        ("less_port.ifindex", 0),
        ("less_port.live", 4),
        ("less_port.edge", 5),
        ("less_port.member", 6),
        ("less_port.whole", 7),
        ("sizeof less_stack", labels::LESS_STACK_BYTES as u64),
        ("less_stack.port", 0),
        ("less_stack.ethertype", 4),
        ("less_stack.len", 6),
        ("less_stack.budget_at", 8),
        ("less_stack.bytes", labels::LESS_STACK_AT as u64),
        ("sizeof less_reroute_key", labels::LESS_REROUTE_KEY_BYTES as u64),
        ("less_reroute_key.port", 0),
        ("less_reroute_key.hash", 8),
        ("sizeof less_push_key", labels::LESS_PUSH_KEY_BYTES as u64),
        ("LESS_STACK_MAX", labels::LESS_STACK_MAX as u64),
        ("LESS_MAX_PORTS", labels::LESS_MAX_PORTS as u64),
        ("CFG_LESS_MAX_LABELS", CFG_LESS_MAX_LABELS as u64),
        ("CNT_LESS_SHIFTED", CNT_LESS_SHIFTED as u64),
        ("CNT_LESS_POPPED", CNT_LESS_SHIFTED as u64 + 1),
        ("CNT_LESS_DELIVERED", CNT_LESS_SHIFTED as u64 + 2),
        ("CNT_LESS_PUSHED", CNT_LESS_SHIFTED as u64 + 3),
        ("CNT_LESS_REROUTED", CNT_LESS_SHIFTED as u64 + 4),
        ("CNT_LESS_SPENT", CNT_LESS_SPENT as u64),
        ("sizeof afdx_link", links::AFDX_LINK_BYTES as u64),
        ("afdx_link.acct", 0),
        ("afdx_link.in_port", links::AFDX_LINK_IN_PORT_AT as u64),
        ("afdx_link.account", links::AFDX_LINK_ACCOUNT_AT as u64),
        ("afdx_link.smin", links::AFDX_LINK_SMIN_AT as u64),
        ("afdx_link.smax", links::AFDX_LINK_SMAX_AT as u64),
        ("afdx_link.n_out", links::AFDX_LINK_N_OUT_AT as u64),
        ("afdx_link.fanout", links::AFDX_LINK_FANOUT_AT as u64),
        ("afdx_link.out_ifindex", links::AFDX_LINK_OUT_AT as u64),
        ("afdx_link.ip_check", links::AFDX_LINK_IP_CHECK_AT as u64),
        ("sizeof afdx_outputs", 4 * links::AFDX_MAX_OUT as u64),
        ("sizeof afdx_account", links::AFDX_ACCOUNT_BYTES as u64),
        ("afdx_account.empty", 0),
        ("afdx_account.cap", 8),
        ("afdx_account.bag_ns", 16),
        ("afdx_account.smax", 24),
        ("afdx_account.per_frame", 28),
        ("sizeof afdx_counts", 8 * links::AC_MAX as u64),
        ("AFDX_MAX_OUT", links::AFDX_MAX_OUT as u64),
        ("AFDX_FANOUTS", links::AFDX_FANOUTS as u64),
        ("AFDX_MAX_LINKS", links::AFDX_MAX_LINKS as u64),
        ("AFDX_VL_IDS", links::AFDX_VL_IDS as u64),
        ("AC_MAX", links::AC_MAX as u64),
        // The counters harvest_links reads by position, drops in forwarding::afdx::VlDrop's order.
        ("AC_FRAMES_IN", 0),
        ("AC_BYTES_IN", 1),
        ("AC_FRAMES_OUT", 2),
        ("AC_BYTES_OUT", 3),
        ("AC_WRONG_PORT_BYTES", 4),
        ("AC_BAD_SOURCE", 5 + forwarding::afdx::VlDrop::BadSource as u64),
        ("AC_WRONG_PORT", 5 + forwarding::afdx::VlDrop::WrongPort as u64),
        ("AC_UNDERSIZE", 5 + forwarding::afdx::VlDrop::Undersize as u64),
        ("AC_OVERSIZE", 5 + forwarding::afdx::VlDrop::Oversize as u64),
        ("AC_POLICED", 5 + forwarding::afdx::VlDrop::Policed as u64),
        ("AC_WRONG_NETWORK", 5 + forwarding::afdx::VlDrop::WrongNetwork as u64),
        ("AC_BAD_ETHERTYPE", 5 + forwarding::afdx::VlDrop::BadEthertype as u64),
        ("AC_BAD_IP", 5 + forwarding::afdx::VlDrop::BadIp as u64),
        ("CFG_AFDX_CONSTANT", CFG_AFDX_CONSTANT as u64),
        ("CFG_AFDX_NETWORK", CFG_AFDX_NETWORK as u64),
        ("CNT_AFDX_UP", CNT_AFDX_UP as u64),
        ("KEY_BYTES", KEY_BYTES as u64),
        ("MAX_MASKS", MAX_MASKS as u64),
        ("MAX_ACTIONS", MAX_ACTIONS as u64),
        ("MAX_METERS", MAX_METERS as u64),
        ("PORT_SLOTS", PORT_SLOTS as u64),
        ("MASK_END", MASK_END as u64),
        ("HASH_MUL", HASH_MUL),
        ("CFG_GENERATION", CFG_GENERATION as u64),
        ("CFG_UPCALL_IFINDEX", CFG_UPCALL_IFINDEX as u64),
        ("CFG_HASH_SEED", CFG_HASH_SEED as u64),
        ("CNT_DROP", CNT_DROP as u64),
        ("CNT_NO_UPCALL", CNT_NO_UPCALL as u64),
        ("CNT_ACTION_FAILED", CNT_ACTION_FAILED as u64),
        ("CNT_MAX", CNT_MAX as u64),
        ("CFG_XDP_FALLBACK_IFINDEX", CFG_XDP_FALLBACK_IFINDEX as u64),
        ("CNT_XDP_FALLBACK", CNT_XDP_FALLBACK as u64),
        ("OUT_VIA_TC", OUT_VIA_TC as u64),
        ("OP_OUTPUT", op::OUTPUT as u64),
        ("OP_SET_ETH_DST", op::SET_ETH_DST as u64),
        ("OP_SET_ETH_SRC", op::SET_ETH_SRC as u64),
        ("OP_PUSH_VLAN", op::PUSH_VLAN as u64),
        ("OP_POP_VLAN", op::POP_VLAN as u64),
        ("OP_SET_VLAN_VID", op::SET_VLAN_VID as u64),
        ("OP_SET_VLAN_PCP", op::SET_VLAN_PCP as u64),
        ("OP_SET_IPV4_SRC", op::SET_IPV4_SRC as u64),
        ("OP_SET_IPV4_DST", op::SET_IPV4_DST as u64),
        ("OP_SET_TP_SRC", op::SET_TP_SRC as u64),
        ("OP_SET_TP_DST", op::SET_TP_DST as u64),
        ("OP_SET_DSCP", op::SET_DSCP as u64),
        ("OP_DEC_TTL", op::DEC_TTL as u64),
        ("OP_METER", op::METER as u64),
        ("K_IN_PORT", off::IN_PORT as u64),
        ("K_IN_PHY_PORT", off::IN_PHY_PORT as u64),
        ("K_ETH_DST", off::ETH_DST as u64),
        ("K_ETH_TYPE", off::ETH_TYPE as u64),
        ("K_ETH_SRC", off::ETH_SRC as u64),
        ("K_VLAN_VID", off::VLAN_VID as u64),
        ("K_VLAN_PCP", off::VLAN_PCP as u64),
        ("K_IP_DSCP", off::IP_DSCP as u64),
        ("K_IP_ECN", off::IP_ECN as u64),
        ("K_IP_PROTO", off::IP_PROTO as u64),
        ("K_IPV4_SRC", off::IPV4_SRC as u64),
        ("K_IPV4_DST", off::IPV4_DST as u64),
        ("K_TP_SRC", off::TP_SRC as u64),
        ("K_TP_DST", off::TP_DST as u64),
        ("K_ICMP_TYPE", off::ICMP_TYPE as u64),
        ("K_ICMP_CODE", off::ICMP_CODE as u64),
        ("K_ARP_OP", off::ARP_OP as u64),
        ("K_MPLS_LABEL", off::MPLS_LABEL as u64),
        ("K_MPLS_TC", off::MPLS_TC as u64),
        ("K_MPLS_BOS", off::MPLS_BOS as u64),
        ("K_IPV6_FLABEL", off::IPV6_FLABEL as u64),
        ("K_PBB_ISID", off::PBB_ISID as u64),
        ("K_ARP_SHA", off::ARP_SHA as u64),
        ("K_ARP_THA", off::ARP_THA as u64),
        ("K_IPV6_SRC", off::IPV6_SRC as u64),
        ("K_IPV6_DST", off::IPV6_DST as u64),
    ];
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
