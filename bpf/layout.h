/* Every structure, constant and key offset the fast path's userspace shares with the programs, as
 * one list of (name, value) for whoever defines P: crates/ebpf/build.rs evaluates it twice at
 * build time, as the eBPF programs lay the structures out and as the C of the target being built
 * for would (a u64 is 4-byte aligned on i386, 8 on armv7 and MIPS o32), refuses to build when they
 * differ, and hands the values to userspace, where crates/datapath/src/fastpath/layout.rs holds its
 * own constants to them at compile time. The entries have no separator: P brings its own. Not a
 * program: it only includes what it names. */
#ifndef EDGEFLOW_LAYOUT_H
#define EDGEFLOW_LAYOUT_H
#include <stddef.h>
#include "fastpath.h"
#define OFF(s, f) P(#s "." #f, offsetof(struct s, f))
#define SZ(s) P("sizeof " #s, sizeof(struct s))
#define FSZ(s, f) P("sizeof " #s "." #f, sizeof(((struct s *)0)->f))
#define EF_LAYOUT \
	SZ(action) \
	OFF(action, op) \
	OFF(action, a8) \
	OFF(action, a16) \
	OFF(action, a32) \
	OFF(action, mac) \
	FSZ(action, op) \
	FSZ(action, a8) \
	FSZ(action, a16) \
	FSZ(action, a32) \
	FSZ(action, mac) \
	FSZ(entry, n_actions) \
	FSZ(entry, mask_id) \
	FSZ(mask_slot, words) \
	FSZ(port_slot, ifindex) \
	SZ(entry) \
	OFF(entry, generation) \
	OFF(entry, n_actions) \
	OFF(entry, mask_id) \
	OFF(entry, decrements) \
	FSZ(entry, decrements) \
	OFF(entry, key) \
	OFF(entry, act) \
	SZ(flow_hits) \
	OFF(flow_hits, packets) \
	OFF(flow_hits, bytes) \
	P("FLOW_PROBES", FLOW_PROBES) \
	P("FLOW_SLOT_SPREAD", FLOW_SLOT_SPREAD) \
	P("CFG_FLOW_SLOT_SHIFT", CFG_FLOW_SLOT_SHIFT) \
	SZ(mask_slot) \
	OFF(mask_slot, generation) \
	OFF(mask_slot, words) \
	OFF(mask_slot, m) \
	OFF(mask_slot, n_kept) \
	OFF(mask_slot, kept) \
	FSZ(mask_slot, n_kept) \
	FSZ(mask_slot, kept) \
	OFF(mask_slot, slot_shift) \
	OFF(mask_slot, seed) \
	SZ(mask_order) \
	SZ(meter) \
	OFF(meter, per_sec) \
	OFF(meter, capacity) \
	OFF(meter, tokens) \
	OFF(meter, kbps) \
	OFF(meter, packets) \
	OFF(meter, dropped_bytes) \
	SZ(port_slot) \
	OFF(port_slot, ifindex) \
	OFF(port_slot, info) \
	SZ(less_port) \
	OFF(less_port, ifindex) \
	OFF(less_port, live) \
	OFF(less_port, edge) \
	OFF(less_port, member) \
	OFF(less_port, whole) \
	SZ(less_stack) \
	OFF(less_stack, port) \
	OFF(less_stack, ethertype) \
	OFF(less_stack, len) \
	OFF(less_stack, budget_at) \
	OFF(less_stack, bytes) \
	SZ(less_reroute_key) \
	OFF(less_reroute_key, port) \
	OFF(less_reroute_key, hash) \
	SZ(less_push_key) \
	SZ(afdx_link) \
	OFF(afdx_link, acct) \
	OFF(afdx_link, in_port) \
	OFF(afdx_link, account) \
	OFF(afdx_link, smin) \
	OFF(afdx_link, smax) \
	OFF(afdx_link, n_out) \
	OFF(afdx_link, fanout) \
	OFF(afdx_link, out_ifindex) \
	OFF(afdx_link, ip_check) \
	SZ(afdx_outputs) \
	SZ(afdx_account) \
	OFF(afdx_account, empty) \
	OFF(afdx_account, cap) \
	OFF(afdx_account, bag_ns) \
	OFF(afdx_account, smax) \
	OFF(afdx_account, per_frame) \
	SZ(afdx_counts) \
	P("AFDX_MAX_OUT", AFDX_MAX_OUT) \
	P("AFDX_FANOUTS", AFDX_FANOUTS) \
	P("AFDX_MAX_LINKS", AFDX_MAX_LINKS) \
	P("AFDX_VL_IDS", AFDX_VL_IDS) \
	P("AC_MAX", AC_MAX) \
	P("AC_FRAMES_IN", AC_FRAMES_IN) \
	P("AC_BYTES_IN", AC_BYTES_IN) \
	P("AC_FRAMES_OUT", AC_FRAMES_OUT) \
	P("AC_BYTES_OUT", AC_BYTES_OUT) \
	P("AC_WRONG_PORT_BYTES", AC_WRONG_PORT_BYTES) \
	P("AC_BAD_SOURCE", AC_BAD_SOURCE) \
	P("AC_WRONG_PORT", AC_WRONG_PORT) \
	P("AC_UNDERSIZE", AC_UNDERSIZE) \
	P("AC_OVERSIZE", AC_OVERSIZE) \
	P("AC_POLICED", AC_POLICED) \
	P("CFG_AFDX_CONSTANT", CFG_AFDX_CONSTANT) \
	P("CNT_AFDX_UP", CNT_AFDX_UP) \
	P("AC_WRONG_NETWORK", AC_WRONG_NETWORK) \
	P("AC_BAD_ETHERTYPE", AC_BAD_ETHERTYPE) \
	P("AC_BAD_IP", AC_BAD_IP) \
	P("CFG_AFDX_NETWORK", CFG_AFDX_NETWORK) \
	P("LESS_STACK_MAX", LESS_STACK_MAX) \
	P("LESS_MAX_PORTS", LESS_MAX_PORTS) \
	P("CFG_LESS_MAX_LABELS", CFG_LESS_MAX_LABELS) \
	P("CNT_LESS_SHIFTED", CNT_LESS_SHIFTED) \
	P("CNT_LESS_POPPED", CNT_LESS_POPPED) \
	P("CNT_LESS_DELIVERED", CNT_LESS_DELIVERED) \
	P("CNT_LESS_PUSHED", CNT_LESS_PUSHED) \
	P("CNT_LESS_REROUTED", CNT_LESS_REROUTED) \
	P("CNT_LESS_SPENT", CNT_LESS_SPENT) \
	SZ(flow_key) \
	P("KEY_BYTES", KEY_BYTES) \
	P("MAX_MASKS", MAX_MASKS) \
	P("MAX_ACTIONS", MAX_ACTIONS) \
	P("MAX_METERS", MAX_METERS) \
	P("PORT_SLOTS", PORT_SLOTS) \
	P("XSK_SLOTS", XSK_SLOTS) \
	P("XSK_QUEUES", XSK_QUEUES) \
	P("MASK_END", MASK_END) \
	P("HASH_MUL", HASH_MUL) \
	P("CFG_GENERATION", CFG_GENERATION) \
	P("CFG_UPCALL_IFINDEX", CFG_UPCALL_IFINDEX) \
	P("CFG_HASH_SEED", CFG_HASH_SEED) \
	P("CNT_DROP", CNT_DROP) \
	P("CNT_NO_UPCALL", CNT_NO_UPCALL) \
	P("CNT_ACTION_FAILED", CNT_ACTION_FAILED) \
	P("CNT_MAX", CNT_MAX) \
	P("CFG_XDP_FALLBACK_IFINDEX", CFG_XDP_FALLBACK_IFINDEX) \
	P("CNT_XDP_FALLBACK", CNT_XDP_FALLBACK) \
	P("OUT_VIA_TC", OUT_VIA_TC) \
	P("OP_OUTPUT", OP_OUTPUT) \
	P("OP_SET_ETH_DST", OP_SET_ETH_DST) \
	P("OP_SET_ETH_SRC", OP_SET_ETH_SRC) \
	P("OP_PUSH_VLAN", OP_PUSH_VLAN) \
	P("OP_POP_VLAN", OP_POP_VLAN) \
	P("OP_SET_VLAN_VID", OP_SET_VLAN_VID) \
	P("OP_SET_VLAN_PCP", OP_SET_VLAN_PCP) \
	P("OP_SET_IPV4_SRC", OP_SET_IPV4_SRC) \
	P("OP_SET_IPV4_DST", OP_SET_IPV4_DST) \
	P("OP_SET_TP_SRC", OP_SET_TP_SRC) \
	P("OP_SET_TP_DST", OP_SET_TP_DST) \
	P("OP_SET_DSCP", OP_SET_DSCP) \
	P("OP_DEC_TTL", OP_DEC_TTL) \
	P("OP_METER", OP_METER) \
	P("K_IN_PORT", K_IN_PORT) \
	P("K_IN_PHY_PORT", K_IN_PHY_PORT) \
	P("K_ETH_DST", K_ETH_DST) \
	P("K_ETH_TYPE", K_ETH_TYPE) \
	P("K_ETH_SRC", K_ETH_SRC) \
	P("K_VLAN_VID", K_VLAN_VID) \
	P("K_VLAN_PCP", K_VLAN_PCP) \
	P("K_IP_DSCP", K_IP_DSCP) \
	P("K_IP_ECN", K_IP_ECN) \
	P("K_IP_PROTO", K_IP_PROTO) \
	P("K_IPV4_SRC", K_IPV4_SRC) \
	P("K_IPV4_DST", K_IPV4_DST) \
	P("K_TP_SRC", K_TP_SRC) \
	P("K_TP_DST", K_TP_DST) \
	P("K_ICMP_TYPE", K_ICMP_TYPE) \
	P("K_ICMP_CODE", K_ICMP_CODE) \
	P("K_ARP_OP", K_ARP_OP) \
	P("K_MPLS_LABEL", K_MPLS_LABEL) \
	P("K_MPLS_TC", K_MPLS_TC) \
	P("K_MPLS_BOS", K_MPLS_BOS) \
	P("K_IPV6_FLABEL", K_IPV6_FLABEL) \
	P("K_PBB_ISID", K_PBB_ISID) \
	P("K_ARP_SHA", K_ARP_SHA) \
	P("K_ARP_THA", K_ARP_THA) \
	P("K_IPV6_SRC", K_IPV6_SRC) \
	P("K_IPV6_DST", K_IPV6_DST)
#endif
