/* The fast path's maps and per-CPU scratch area, and the small reads every stage needs: counters,
 * config, and which switch port an interface is. */
#ifndef EDGEFLOW_FP_STATE_H
#define EDGEFLOW_FP_STATE_H
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "maps.h"
#include "fastpath.h"

#define BPF_F_NO_PREALLOC_ (1U << 0)

struct scratch {
	__u8 buf[PARSE_BYTES];
	struct flow_key key;
	/* What parsing found, for the actions. */
	__u32 len;
	__u32 l3;
	__u32 l4;
	__u16 eth_type;
	__u8 proto;
	__u8 later_fragment;
	__u8 ttl;
	__u8 hw_vlan;		/* an outer tag held in skb metadata (TC only) */
	__u8 data_tags;		/* tags in the frame data */
	__u8 pad;
	__u8 less_out[LESS_STACK_MAX];	/* the label stack a LESS rewrite puts in */
};

struct ef_map_def SEC("maps") ef_config = { BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(__u64), CFG_MAX, 0 };
struct ef_map_def SEC("maps") ef_masks = { BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(struct mask_slot), MAX_MASKS, 0 };
/* The order to try mask slots in, busiest first (userspace keeps it sorted by recent hits), ended
 * by MASK_END: most frames find their entry on the first probe. One value, read with one lookup
 * (a lookup per position cost each probe its own). */
struct ef_map_def SEC("maps") ef_mask_order = { BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(struct mask_order), 1, 0 };
/* Megaflows at dense indices, their hits per CPU at the same index, and the slots that say where
 * (fastpath.h). Userspace sizes all three to the switch's capacity when it loads the object. */
struct ef_map_def SEC("maps") ef_megaflows = { BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(struct entry), MAX_ENTRIES, 0 };
struct ef_map_def SEC("maps") ef_flow_hits = { BPF_MAP_TYPE_PERCPU_ARRAY, sizeof(__u32), sizeof(struct flow_hits), MAX_ENTRIES, 0 };
struct ef_map_def SEC("maps") ef_flow_slots = { BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(__u64), FLOW_SLOTS, 0 };
/* ifindex -> (OpenFlow port number << 16) | upcall tag: every port in ef_ports, and in
 * ef_port_slots[ifindex % PORT_SLOTS] unless another port took that slot first. */
struct ef_map_def SEC("maps") ef_ports = { BPF_MAP_TYPE_HASH, sizeof(__u32), sizeof(__u64), MAX_PORTS, 0 };
struct ef_map_def SEC("maps") ef_port_slots = { BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(struct port_slot), PORT_SLOTS, 0 };
/* XDP: upcall tag -> the port's AF_XDP socket, for ports the switch reads through one (ctx_up). */
struct ef_map_def SEC("maps") ef_xsks = { BPF_MAP_TYPE_XSKMAP, sizeof(__u32), sizeof(__u32), XSK_SLOTS * XSK_QUEUES, 0 };
struct ef_map_def SEC("maps") ef_meters = { BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(struct meter), MAX_METERS, 0 };
struct ef_map_def SEC("maps") ef_scratch = { BPF_MAP_TYPE_PERCPU_ARRAY, sizeof(__u32), sizeof(struct scratch), 1, 0 };
struct ef_map_def SEC("maps") ef_counters = { BPF_MAP_TYPE_PERCPU_ARRAY, sizeof(__u32), sizeof(__u64), CNT_MAX, 0 };

static __always_inline void count(__u32 which)
{
	__u64 *c = bpf_map_lookup_elem(&ef_counters, &which);
	if (c)
		(*c)++;
}

static __always_inline __u64 config(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&ef_config, &which);
	return v ? *v : 0;
}

/* The port's info word, or 0 when the interface is not a switch port. */
static __always_inline __u64 port_info(__u32 ifindex)
{
	__u32 at = ifindex % PORT_SLOTS;
	struct port_slot *ps = bpf_map_lookup_elem(&ef_port_slots, &at);
	if (ps && ps->ifindex == ifindex)
		return ps->info;
	__u64 *info = bpf_map_lookup_elem(&ef_ports, &ifindex);
	return info ? *info : 0;
}

#endif
