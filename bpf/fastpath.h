/* The kernel fast path's shared definitions: the flow key (the same 136-byte layout as
 * crates/packet/src/key.rs), megaflow entries and their actions. The Rust side encodes exactly these
 * structures (crates/datapath/src/fastpath.rs); change both together. */
#ifndef EDGEFLOW_FASTPATH_H
#define EDGEFLOW_FASTPATH_H

#include <linux/types.h>

#define KEY_BYTES 136
#define KEY_WORDS 17
/* Lookups probe at most this many masks: a bound on per-packet work (documented in docs/fastpath.md). */
#define MAX_MASKS 16
#define MASK_END 0xffffffff
#define MAX_ACTIONS 16
#define MAX_ENTRIES 16384
#define MAX_PORTS 256
/* Ports are found by ifindex in a direct-mapped array first (no helper call: on CPUs whose kernel
 * guards every return, each call costs tens of ns), in ef_ports only when two ports collide. */
#define PORT_SLOTS 1024
/* AF_XDP sockets the XDP fast path sends up into, one per upcall tag (the tag's 12 bits) and
 * receive queue: slot tag + queue * XSK_SLOTS, for queues below XSK_QUEUES (each queue of a port
 * has its own socket, and the kernel delivers a frame only to the socket of its queue). */
#define XSK_SLOTS 4096
#define XSK_QUEUES 8
#define MAX_METERS 1024
/* Headers are parsed from a copy of the first bytes of the frame. */
#define PARSE_BYTES 128

/* Key offsets (crates/packet/src/key.rs `off`). */
#define K_IN_PORT 0
#define K_IN_PHY_PORT 4
#define K_ETH_DST 24
#define K_ETH_TYPE 30
#define K_ETH_SRC 32
#define K_VLAN_VID 38
#define K_VLAN_PCP 40
#define K_IP_DSCP 41
#define K_IP_ECN 42
#define K_IP_PROTO 43
#define K_IPV4_SRC 44
#define K_IPV4_DST 48
#define K_TP_SRC 52
#define K_TP_DST 54
#define K_ICMP_TYPE 56
#define K_ICMP_CODE 57
#define K_ARP_OP 58
#define K_MPLS_LABEL 60
#define K_MPLS_TC 64
#define K_MPLS_BOS 65
#define K_IPV6_FLABEL 68
#define K_PBB_ISID 72
#define K_ARP_SHA 76
#define K_ARP_THA 82
#define K_IPV6_SRC 88
#define K_IPV6_DST 104

struct port_slot {
	__u32 ifindex;
	__u32 pad;
	__u64 info;	/* (OpenFlow port number << 16) | upcall tag */
};

struct flow_key {
	__u64 w[KEY_WORDS];
};

/* A megaflow is found without a helper call: array lookups are inlined by the verifier, a hash
 * table's are not (each call cost ~15 ns on a kernel that guards every return). Entries sit at
 * dense indices of ef_megaflows; ef_flow_slots, an open-addressed table of FLOW_SLOT_SPREAD
 * times as many slots (2^b), holds where: the slot at (home + p) mod 2^b, p below FLOW_PROBES, is
 * (tag << 32) | (index + 1). The home slot is the top b bits of hash * HASH_MUL (the hash's own
 * low bits change little when a kept word's high bytes do: UDP ports all had one home), the tag
 * the hash's top 32 bits; 0 ends the probe (nothing was placed beyond it), and a slot whose entry
 * left keeps a nonzero tag with index 0 until the slot after it is empty. The hash is that of the
 * frame's key under one mask; a slot only points the way: the entry is confirmed by its
 * generation, its mask slot and the masked key it holds, so a slot read while userspace rewrites
 * it can only turn a hit into a miss. */
#define FLOW_PROBES 8
#define FLOW_SLOT_SPREAD 4
#define FLOW_SLOTS (FLOW_SLOT_SPREAD * MAX_ENTRIES)

/* The multiplier of the key hash (crates/datapath/src/fastpath.rs `key_hash` computes the same):
 * for each word the mask keeps, in order, h = (h ^ word) * HASH_MUL, then h ^= h >> 32. */
#define HASH_MUL 0x9e3779b97f4a7c15ULL

/* A mask is live while its generation is the current one. `words` has bit w set when word w of
 * the mask is not zero: only those are hashed and compared. `kept` lists the same words in
 * ascending order, `n_kept` of them, so that a lookup visits only those (17 bit tests per mask,
 * in the hash and again in the compare, were most of what a probe cost). The hash seed and the
 * slot table's shift (CFG_HASH_SEED, CFG_FLOW_SLOT_SHIFT, the same for every mask of a run) come
 * with the mask, so that a lookup reads one config word, the generation, instead of three. */
struct mask_slot {
	__u64 generation;
	__u32 words;
	__u32 n_kept;
	struct flow_key m;
	__u8 kept[KEY_WORDS];
	__u8 slot_shift;
	__u8 pad[6];
	__u64 seed;
};

/* The mask slots in the order a lookup tries them, MASK_END after the last (fp_state.h). */
struct mask_order {
	__u32 slot[MAX_MASKS];
};

enum ef_op {
	OP_OUTPUT = 1,		/* a32: ifindex; a8: OUT_VIA_TC (XDP) */
	OP_SET_ETH_DST = 2,	/* mac */
	OP_SET_ETH_SRC = 3,
	OP_PUSH_VLAN = 4,	/* a16: TPID */
	OP_POP_VLAN = 5,
	OP_SET_VLAN_VID = 6,	/* a16: VID */
	OP_SET_VLAN_PCP = 7,	/* a8 */
	OP_SET_IPV4_SRC = 8,	/* a32: address, network order */
	OP_SET_IPV4_DST = 9,
	OP_SET_TP_SRC = 10,	/* a16: port, host order */
	OP_SET_TP_DST = 11,
	OP_SET_DSCP = 12,	/* a8 */
	OP_DEC_TTL = 13,
	OP_METER = 14,		/* a32: meter slot */
};

struct action {
	__u8 op;
	__u8 a8;
	__u16 a16;
	__u32 a32;
	__u8 mac[6];
	__u8 pad[2];
};

/* A megaflow: live while its generation is the current one (userspace writes an entry only at an
 * index no slot leads to, and reuses an index only a harvest after its slot let go of it, so no
 * frame reads one half-written). */
struct entry {
	__u64 generation;
	__u16 n_actions;
	__u16 decrements;	/* its OP_DEC_TTLs, counted when it is installed (needs_userspace) */
	__u32 mask_id;		/* the mask slot it is under */
	struct flow_key key;	/* the masked key this entry is for */
	struct action act[MAX_ACTIONS];
};

/* An entry's hits, per CPU at its index (no atomic add on a hit): userspace adds their growth to
 * the OpenFlow flows the entry stands for. Cumulative over the index's entries: each starts from
 * what the last harvest read. */
struct flow_hits {
	__u64 packets;
	__u64 bytes;
};

/* A drop-band token bucket (milli-units, like crates/pipeline/src/meter.rs). */
struct meter {
	__u64 per_sec;
	__u64 capacity;
	__u64 tokens;
	__u64 last_ns;
	__u64 kbps;
	__u64 packets;
	__u64 bytes;
	__u64 dropped_packets;
	__u64 dropped_bytes;
};

enum ef_config {
	CFG_GENERATION = 0,
	CFG_UPCALL_IFINDEX = 1,
	CFG_LESS_MAX_LABELS = 2,	/* LESS label switching on (docs/less.md): the deepest stack taken */
	CFG_AFDX_CONSTANT = 3,		/* AFDX: the destination MACs' 32-bit constant field */
	CFG_AFDX_NETWORK = 4,		/* AFDX: the switch's network's interface id (1 A, 2 B); 0 either */
	CFG_HASH_SEED = 5,		/* seeds the megaflow key hash (fp_lookup.h), so no outsider can make keys collide */
	CFG_XDP_FALLBACK_IFINDEX = 6,	/* XDP: the link frames for a port without native redirect go by (below) */
	CFG_FLOW_SLOT_SHIFT = 7,	/* 64 - b, ef_flow_slots holding 2^b slots */
	CFG_MAX = 8,
};

enum ef_counter {
	CNT_HIT = 0,
	CNT_MISS = 1,
	CNT_UPCALL = 2,
	CNT_SLOW = 3,
	CNT_DROP = 4,		/* dropped by a meter */
	CNT_NO_UPCALL = 5,	/* a miss dropped: no way up to userspace */
	CNT_ACTION_FAILED = 6,	/* a rewrite or copy the frame could not take (fp_actions.h) */
	/* LESS frames the kernel forwarded, per rewrite (fp_less.h). */
	CNT_LESS_SHIFTED = 8,
	CNT_LESS_POPPED = 9,
	CNT_LESS_DELIVERED = 10,
	CNT_LESS_PUSHED = 11,
	CNT_LESS_REROUTED = 12,
	CNT_AFDX_UP = 13,	/* AFDX frames of no VL the kernel holds, sent up (fp_afdx.h) */
	CNT_LESS_SPENT = 14,	/* LESS frames dropped at a down port with no reroute budget left */
	CNT_XDP_FALLBACK = 15,	/* XDP frames sent to their port through TC (below) */
	CNT_MAX = 16,
};

/* XDP into a port the kernel cannot redirect to natively (a veth whose peer runs no NAPI: no XDP
 * program, GRO off; a driver without ndo_xdp_xmit) is refused and the frame dropped, silently.
 * Userspace marks such outputs OUT_VIA_TC (in the action's a8); the XDP program then puts the port
 * into the frame's metadata and redirects it into the fallback link, a veth pair whose far end
 * runs NAPI, where ef_tc_xdp_fallback sends it on to the port as an skb, which any device takes. */
#define OUT_VIA_TC 1
#define XDP_FALLBACK_MAGIC 0xef5dfb01
struct xdp_fallback_meta {
	__u32 magic;
	__u32 ifindex;
};

/* ---- LESS label switching (fp_less.h) ---- */
#define LESS_MAX_DEPTH 16
#define LESS_STACK_MAX 64
#define LESS_MAX_PORTS 256
#define LESS_TABLE_ENTRIES 4096
/* Per LESS port number: where it is and whether it can send now. */
struct less_port {
	__u32 ifindex;
	__u8 live;
	__u8 edge;	/* hosts are there: plain IP from it may be labelled here */
	__u8 member;	/* the label mode's port (a switch shared by modes has others) */
	__u8 whole;	/* passes a GSO super-frame on uncut (a veth): it may leave here under labels */
};
/* A replacement stack userspace computed for a kind of frame: it goes out `port` with `len` bytes of
 * `bytes` after the Ethernet header and `ethertype` (host order; 0: the IP version's). */
struct less_stack {
	__u32 port;	/* 0 in a detour: back out of the port the frame came in on (never a host's) */
	__u16 ethertype;
	__u16 len;
	__u8 budget_at;	/* 1 + the offset in bytes[] of the reroute block's budget; 0: no block */
	__u8 pad[7];
	__u64 block_hash;	/* the reroute block's hash (below), so that a host's frame whose first
				 * hop is down finds its detour as a labelled one would; 0: no block */
	__u8 bytes[LESS_STACK_MAX];
};
/* A detour, by a hash of the frame's reroute block (the words from the block's first entry through
 * the bottom, the first with budget and flags masked out, hashed as the megaflow key is:
 * h = (h ^ word) * HASH_MUL, then h ^= h >> 32) and either the port that is down (`from` 0) or,
 * for a frame that arrived backtracking (`port` 0), the port it came in on. */
struct less_reroute_key {
	__u32 port;
	__u32 from;
	__u64 hash;
};
/* A host's destination: IPv6, or IPv4 as IPv4-mapped IPv6 (::ffff:a.b.c.d), so one table holds both. */
struct less_push_key {
	__u8 addr[16];
};

/* ---- AFDX virtual links (fp_afdx.h) ---- */
#define AFDX_MAX_LINKS 4096
#define AFDX_VL_IDS 65536
#define AFDX_MAX_OUT 8
/* XDP sends a frame once: a VL with several outputs is broadcast into a DEVMAP holding them, one
 * per distinct set of outputs (fp_afdx.h). */
#define AFDX_FANOUTS 16
/* Part 7's account, kept as one word so that CPUs share it with compare-and-swap: the credit at
 * time t is min(cap, t * smax - empty), in bytes x ns (see fp_afdx.h). */
struct afdx_account {
	__u64 empty;
	__u64 cap;		/* smax * (BAG + jitter) */
	__u64 bag_ns;
	__u32 smax;
	__u32 per_frame;	/* 1: every frame costs smax; 0: its own length */
};
/* A VL the kernel decides, at its slot (ef_afdx_vl_slot maps its 16-bit id there; its counters and
 * its outputs are at the same slot of ef_afdx_counts and ef_afdx_outputs): its filter, where it
 * goes, and the account kept at this slot. An account lives at the slot of the first VL that
 * draws on it, so a VL with an account of its own, the usual case, finds its link and its account
 * in one 64-byte line: at 2 000 frames/s each frame finds it cold, and a second line cost 0.2 us. */
struct afdx_link {
	struct afdx_account acct;	/* the account kept at this slot */
	__u32 in_port;		/* OpenFlow port number */
	__u32 account;		/* the slot whose account it draws on */
	__u16 smin;		/* frame sizes, FCS included */
	__u16 smax;
	__u16 n_out;
	__u16 fanout;		/* XDP, several outputs: 1 + the DEVMAP holding them */
	__u32 out_ifindex;	/* its first output (TC finds all of them in ef_afdx_outputs) */
	__u8 ip_check;		/* check the IPv4 and UDP headers (afdx_ip_ok) */
	__u8 pad8[3];
	__u32 pad[2];
};
struct afdx_outputs {
	__u32 ifindex[AFDX_MAX_OUT];
};
enum afdx_count {
	AC_FRAMES_IN = 0,
	AC_BYTES_IN = 1,
	AC_FRAMES_OUT = 2,
	AC_BYTES_OUT = 3,
	AC_WRONG_PORT_BYTES = 4,
	/* Drops, in the order of forwarding::afdx::VlDrop. */
	AC_BAD_SOURCE = 5,
	AC_WRONG_PORT = 6,
	AC_UNDERSIZE = 7,
	AC_OVERSIZE = 8,
	AC_POLICED = 9,
	AC_WRONG_NETWORK = 10,
	AC_BAD_ETHERTYPE = 11,
	AC_BAD_IP = 12,
	AC_MAX = 13,
};
struct afdx_counts {
	__u64 c[AC_MAX];
};
/* Frames the kernel dropped for arriving on a port other than their link's, by the port they
 * came in on (its upcall tag, below 4096): userspace credits that port's receive counters, as it
 * does for every frame it receives itself. */
#define AFDX_PORT_TAGS 4096
struct afdx_port_rx {
	__u64 frames;
	__u64 bytes;
};

#endif
