// The kernel fast path: a megaflow cache the userspace pipeline fills.
//
// Each port runs ef_tc_ingress (TCX, keeps GSO) or ef_xdp (XDP, fastest for small frames). A frame
// is parsed into the same 136-byte flow key the userspace pipeline uses, then looked up under each
// live mask (at most MAX_MASKS). A hit executes the entry's actions — the flat list userspace
// translation produced — and counts the hit; a miss goes up to userspace, which translates,
// executes and installs the entry. Anything this program is not sure to do exactly as userspace
// would (IPv6 extension headers, neighbour discovery, an expiring TTL…) goes up too.
//
// Over 500 lines for now, with the executor written out for TC and for XDP: splitting it into a
// header per concern with one executor behind a context wrapper is the next step (issue 10, item 4).
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "maps.h"
#include "fastpath.h"

#define BPF_F_NO_PREALLOC_ (1U << 0)

/* The outer VLAN tag a device took out of the frame into metadata (Linux 6.8+, device-bound
 * programs only; -EOPNOTSUPP otherwise). Without it XDP would see a tagged frame as untagged. */
extern int bpf_xdp_metadata_rx_vlan_tag(const struct xdp_md *ctx, __be16 *vlan_proto,
					__u16 *vlan_tci) __ksym __weak;

struct scratch {
	__u8 buf[PARSE_BYTES];
	struct flow_key key;
	struct mf_key mk;
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
};

struct ef_map_def SEC("maps") ef_config = { BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(__u64), 4, 0 };
struct ef_map_def SEC("maps") ef_masks = { BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(struct mask_slot), MAX_MASKS, 0 };
/* The order to try mask slots in, busiest first (userspace keeps it sorted by recent hits), ended
 * by MASK_END: most frames find their entry on the first probe. */
struct ef_map_def SEC("maps") ef_mask_order = { BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(__u32), MAX_MASKS, 0 };
struct ef_map_def SEC("maps") ef_megaflows = { BPF_MAP_TYPE_HASH, sizeof(struct mf_key), sizeof(struct entry), MAX_ENTRIES, BPF_F_NO_PREALLOC_ };
/* ifindex -> (OpenFlow port number << 16) | upcall tag: every port in ef_ports, and in
 * ef_port_slots[ifindex % PORT_SLOTS] unless another port took that slot first. */
struct ef_map_def SEC("maps") ef_ports = { BPF_MAP_TYPE_HASH, sizeof(__u32), sizeof(__u64), MAX_PORTS, 0 };
struct ef_map_def SEC("maps") ef_port_slots = { BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(struct port_slot), PORT_SLOTS, 0 };
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

/* Copies the first bytes of the frame (at most PARSE_BYTES - 1) from the packet into s->buf, a
 * word at a time: cheaper than a load-bytes helper call. The caller takes the length from the
 * packet, not from here: a count known exactly on each of the verifier's paths would multiply
 * the paths it walks through the parser. */
static __always_inline void copy_head(struct scratch *s, const __u8 *data, const __u8 *end)
{
	__u32 n = 0;
	int i;
#pragma unroll
	for (i = 0; i < PARSE_BYTES / 8 - 1; i++) {
		if (data + (i + 1) * 8 > end)
			break;
		((__u64 *)s->buf)[i] = ((const __u64 *)data)[i];
		n += 8;
	}
	/* Then the last few bytes one by one (n stays below PARSE_BYTES - 1). */
#define COPY_TAIL_BYTE()                                                       \
	if (n < PARSE_BYTES - 1 && data + n + 1 <= end) {                      \
		s->buf[n & (PARSE_BYTES - 1)] = data[n];                       \
		n++;                                                           \
	}
	COPY_TAIL_BYTE() COPY_TAIL_BYTE() COPY_TAIL_BYTE() COPY_TAIL_BYTE()
	COPY_TAIL_BYTE() COPY_TAIL_BYTE() COPY_TAIL_BYTE()
#undef COPY_TAIL_BYTE
}

/* The frame's length as far as the parser reads it: at most PARSE_BYTES - 1, in a form the
 * verifier can bound. */
static __always_inline __u32 head_len(__u32 len)
{
	if (len > PARSE_BYTES - 1)
		len = PARSE_BYTES - 1;
	return len & (PARSE_BYTES - 1);
}

static __always_inline __u8 *kb(struct scratch *s)
{
	return (__u8 *)&s->key;
}

static __always_inline void put16(__u8 *k, __u32 at, __u16 v)
{
	k[at] = v >> 8;
	k[at + 1] = v;
}

#define IN(s, off, n) ((off) + (n) <= (s)->len && (off) + (n) <= PARSE_BYTES)
#define B(s, off) ((s)->buf[(off) & (PARSE_BYTES - 1)])

/* Parses s->buf (s->len bytes) into s->key. Returns 0, or -1 when userspace must decide. */
static __always_inline int parse(struct scratch *s, __u32 port, int hw_present, __u16 hw_tci)
{
	__u8 *k = kb(s);
	__u32 off;
	__u16 et;
	int i;

	__builtin_memset(&s->key, 0, sizeof(s->key));
	k[K_IN_PORT] = port >> 24;
	k[K_IN_PORT + 1] = port >> 16;
	k[K_IN_PORT + 2] = port >> 8;
	k[K_IN_PORT + 3] = port;
	k[K_IN_PHY_PORT] = port >> 24;
	k[K_IN_PHY_PORT + 1] = port >> 16;
	k[K_IN_PHY_PORT + 2] = port >> 8;
	k[K_IN_PHY_PORT + 3] = port;
	if (s->len < 14)
		return -1;
	for (i = 0; i < 6; i++) {
		k[K_ETH_DST + i] = s->buf[i];
		k[K_ETH_SRC + i] = s->buf[6 + i];
	}
	s->hw_vlan = hw_present;
	s->data_tags = 0;
	if (hw_present) {
		put16(k, K_VLAN_VID, (hw_tci & 0x0fff) | 0x1000);
		k[K_VLAN_PCP] = hw_tci >> 13;
	}
	off = 12;
	et = (s->buf[12] << 8) | s->buf[13];
#pragma unroll
	for (i = 0; i < 2; i++) {
		if (et != 0x8100 && et != 0x88a8)
			break;
		if (!IN(s, off + 4, 2))
			return -1;
		if (!hw_present && s->data_tags == 0) {
			__u16 tci = (B(s, off + 2) << 8) | B(s, off + 3);
			put16(k, K_VLAN_VID, (tci & 0x0fff) | 0x1000);
			k[K_VLAN_PCP] = tci >> 13;
		}
		s->data_tags++;
		off += 4;
		et = (B(s, off) << 8) | B(s, off + 1);
	}
	if (et == 0x8100 || et == 0x88a8)
		return -1; /* a third tag: rare, leave it to userspace */
	put16(k, K_ETH_TYPE, et);
	s->eth_type = et;
	__u32 l3 = off + 2;
	s->l3 = l3;
	s->l4 = 0;
	s->proto = 0;
	s->later_fragment = 0;

	if (et == 0x0800) {
		if (!IN(s, l3, 20))
			return -1;
		__u8 vihl = B(s, l3);
		__u32 ihl = (vihl & 0xf) * 4;
		if ((vihl >> 4) != 4 || ihl < 20 || !IN(s, l3, ihl))
			return -1;
		__u8 tos = B(s, l3 + 1);
		k[K_IP_DSCP] = tos >> 2;
		k[K_IP_ECN] = tos & 3;
		s->proto = B(s, l3 + 9);
		k[K_IP_PROTO] = s->proto;
		s->ttl = B(s, l3 + 8);
		for (i = 0; i < 4; i++) {
			k[K_IPV4_SRC + i] = B(s, l3 + 12 + i);
			k[K_IPV4_DST + i] = B(s, l3 + 16 + i);
		}
		__u16 frag = (B(s, l3 + 6) << 8) | B(s, l3 + 7);
		if (frag & 0x1fff) {
			s->later_fragment = 1;
			return 0;
		}
		s->l4 = l3 + ihl;
	} else if (et == 0x86dd) {
		if (!IN(s, l3, 40))
			return -1;
		__u8 tc = ((B(s, l3) & 0xf) << 4) | (B(s, l3 + 1) >> 4);
		k[K_IP_DSCP] = tc >> 2;
		k[K_IP_ECN] = tc & 3;
		k[K_IPV6_FLABEL + 1] = B(s, l3 + 1) & 0xf;
		k[K_IPV6_FLABEL + 2] = B(s, l3 + 2);
		k[K_IPV6_FLABEL + 3] = B(s, l3 + 3);
		for (i = 0; i < 16; i++) {
			k[K_IPV6_SRC + i] = B(s, l3 + 8 + i);
			k[K_IPV6_DST + i] = B(s, l3 + 24 + i);
		}
		__u8 nh = B(s, l3 + 6);
		/* Extension headers (and "no next header") are walked in userspace. */
		if (nh == 0 || nh == 43 || nh == 44 || nh == 50 || nh == 51 || nh == 59 || nh == 60)
			return -1;
		s->proto = nh;
		k[K_IP_PROTO] = nh;
		s->ttl = B(s, l3 + 7);
		s->l4 = l3 + 40;
	} else if (et == 0x0806) {
		if (IN(s, l3, 28) && B(s, l3) == 0 && B(s, l3 + 1) == 1 && B(s, l3 + 2) == 8 && B(s, l3 + 3) == 0 &&
		    B(s, l3 + 4) == 6 && B(s, l3 + 5) == 4) {
			k[K_ARP_OP] = B(s, l3 + 6);
			k[K_ARP_OP + 1] = B(s, l3 + 7);
			for (i = 0; i < 6; i++) {
				k[K_ARP_SHA + i] = B(s, l3 + 8 + i);
				k[K_ARP_THA + i] = B(s, l3 + 18 + i);
			}
			for (i = 0; i < 4; i++) {
				k[K_IPV4_SRC + i] = B(s, l3 + 14 + i);
				k[K_IPV4_DST + i] = B(s, l3 + 24 + i);
			}
		}
		return 0;
	} else if (et == 0x8847 || et == 0x8848) {
		if (IN(s, l3, 4)) {
			__u32 lse = (B(s, l3) << 24) | (B(s, l3 + 1) << 16) | (B(s, l3 + 2) << 8) | B(s, l3 + 3);
			__u32 label = lse >> 12;
			k[K_MPLS_LABEL + 1] = label >> 16;
			k[K_MPLS_LABEL + 2] = label >> 8;
			k[K_MPLS_LABEL + 3] = label;
			k[K_MPLS_TC] = (lse >> 9) & 7;
			k[K_MPLS_BOS] = (lse >> 8) & 1;
		}
		return 0;
	} else if (et == 0x88e7) {
		if (IN(s, l3, 4)) {
			k[K_PBB_ISID] = B(s, l3 + 1);
			k[K_PBB_ISID + 1] = B(s, l3 + 2);
			k[K_PBB_ISID + 2] = B(s, l3 + 3);
		}
		return 0;
	} else {
		return 0;
	}

	/* Transport. */
	__u32 l4 = s->l4;
	__u8 p = s->proto;
	__u32 need = p == 6 ? 20 : p == 17 ? 8 : p == 132 ? 12 : (p == 1 || p == 58) ? 4 : 0;
	if (need == 0)
		return 0;
	if (!IN(s, l4, need))
		return -1; /* truncated, or headers beyond what was copied: userspace decides */
	if (p == 6 || p == 17 || p == 132) {
		k[K_TP_SRC] = B(s, l4);
		k[K_TP_SRC + 1] = B(s, l4 + 1);
		k[K_TP_DST] = B(s, l4 + 2);
		k[K_TP_DST + 1] = B(s, l4 + 3);
	} else {
		__u8 type = B(s, l4);
		if (p == 58 && (type == 135 || type == 136))
			return -1; /* neighbour discovery: its options are parsed in userspace */
		k[K_ICMP_TYPE] = type;
		k[K_ICMP_CODE] = B(s, l4 + 1);
	}
	return 0;
}

/* The entry for s->key, if a live one exists. */
static __always_inline struct entry *lookup(struct scratch *s)
{
	__u64 gen = config(CFG_GENERATION);
	__u32 i;
	for (i = 0; i < MAX_MASKS; i++) {
		__u32 pos = i;
		__u32 *slot = bpf_map_lookup_elem(&ef_mask_order, &pos);
		if (!slot || *slot >= MAX_MASKS)
			break;
		__u32 idx = *slot;
		struct mask_slot *m = bpf_map_lookup_elem(&ef_masks, &idx);
		if (!m || m->generation != gen)
			continue;
		__u32 words = m->words;
		__u64 h = 0;
#pragma unroll
		for (int w = 0; w < KEY_WORDS; w++) {
			if (words & (1U << w)) {
				h = (h ^ (s->key.w[w] & m->m.w[w])) * HASH_MUL;
				h ^= h >> 32;
			}
		}
		s->mk.mask_id = idx;
		s->mk.pad = 0;
		s->mk.hash = h;
		struct entry *e = bpf_map_lookup_elem(&ef_megaflows, &s->mk);
		if (!e || e->generation != gen)
			continue;
		/* Words the mask drops are zero on both sides. */
		__u64 diff = 0;
#pragma unroll
		for (int w = 0; w < KEY_WORDS; w++)
			diff |= (s->key.w[w] & m->m.w[w]) ^ e->key.w[w];
		if (!diff)
			return e;
	}
	return 0;
}

/* Charges a meter; false when its drop band applies. */
static __always_inline int meter_pass(__u32 slot, __u32 bytes)
{
	struct meter *m = bpf_map_lookup_elem(&ef_meters, &slot);
	if (!m)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 last = m->last_ns;
	m->last_ns = now;
	__u64 add = now > last ? (now - last) * m->per_sec / 1000000000ULL : 0;
	__u64 t = m->tokens + add;
	if (t > m->capacity)
		t = m->capacity;
	__u64 cost = m->kbps ? (__u64)bytes * 8 * 1000 : 1000;
	__sync_fetch_and_add(&m->packets, 1);
	__sync_fetch_and_add(&m->bytes, bytes);
	if (t >= cost) {
		m->tokens = t - cost;
		return 1;
	}
	m->tokens = t;
	__sync_fetch_and_add(&m->dropped_packets, 1);
	__sync_fetch_and_add(&m->dropped_bytes, bytes);
	return 0;
}

/* Conditions the fast path leaves to userspace although the entry matched. */
static __always_inline int needs_userspace(struct entry *e, struct scratch *s)
{
	__u32 n = e->n_actions;
	for (__u32 i = 0; i < MAX_ACTIONS; i++) {
		if (i >= n)
			break;
		if (e->act[i].op == OP_DEC_TTL) {
			if (s->eth_type != 0x0800 && s->eth_type != 0x86dd)
				return 0;
			return s->ttl <= 1; /* an expiring TTL may be reported to the controller */
		}
	}
	return 0;
}

/* ---- TC ---- */

static __always_inline int l4_csum_at(struct scratch *s)
{
	if (s->proto == 6)
		return s->l4 + 16;
	if (s->proto == 17)
		return s->l4 + 6;
	return -1;
}

/* Sends the frame to userspace through the upcall interface, the ingress port's number riding in
 * an outer VLAN tag (metadata only: the frame itself is unchanged). */
static __always_inline int upcall(struct __sk_buff *skb, __u64 port_info)
{
	__u32 up = config(CFG_UPCALL_IFINDEX);
	count(CNT_UPCALL);
	if (!up) {
		count(CNT_NO_UPCALL);
		return TC_ACT_SHOT;
	}
	if (bpf_skb_vlan_push(skb, bpf_htons(0x8100), port_info & 0xfff) < 0)
		return TC_ACT_SHOT;
	return bpf_redirect(up, 0);
}

SEC("tc")
int ef_tc_ingress(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&ef_scratch, &zero);
	__u64 pi = port_info(skb->ingress_ifindex);
	if (!s || !pi)
		return TC_ACT_OK;
	__u32 len = head_len(skb->len);
	if (len < 14)
		return upcall(skb, pi);
	/* Headers are nearly always in the linear part; read them in place when they are. */
	const __u8 *data = (const __u8 *)(long)skb->data, *data_end = (const __u8 *)(long)skb->data_end;
	if (data + len <= data_end)
		copy_head(s, data, data_end);
	else if (bpf_skb_load_bytes(skb, 0, s->buf, len) < 0)
		return upcall(skb, pi);
	s->len = len;
	if (parse(s, pi >> 16, skb->vlan_present, skb->vlan_tci) < 0)
		return upcall(skb, pi);
	struct entry *e = lookup(s);
	if (!e) {
		count(CNT_MISS);
		return upcall(skb, pi);
	}
	if (needs_userspace(e, s)) {
		count(CNT_SLOW);
		return upcall(skb, pi);
	}
	count(CNT_HIT);
	__sync_fetch_and_add(&e->packets, 1);
	__sync_fetch_and_add(&e->bytes, skb->len + (skb->vlan_present ? 4 : 0));

	__u32 n = e->n_actions;
	__u32 l3 = s->l3;
	int hw = s->hw_vlan, tags = s->data_tags;
	for (__u32 i = 0; i < MAX_ACTIONS; i++) {
		if (i >= n)
			break;
		struct action *a = &e->act[i];
		switch (a->op) {
		case OP_OUTPUT:
			if (i + 1 == n)
				return bpf_redirect(a->a32, 0);
			bpf_clone_redirect(skb, a->a32, 0);
			break;
		case OP_SET_ETH_DST:
			bpf_skb_store_bytes(skb, 0, a->mac, 6, 0);
			break;
		case OP_SET_ETH_SRC:
			bpf_skb_store_bytes(skb, 6, a->mac, 6, 0);
			break;
		case OP_PUSH_VLAN: {
			/* The new tag copies the one it covers (spec 1.3 §5.12.1). */
			__u16 tci = hw ? skb->vlan_tci : 0;
			if (!hw && tags) {
				__u16 t;
				bpf_skb_load_bytes(skb, 14, &t, 2);
				tci = bpf_ntohs(t);
			}
			if (hw) {
				tags++;
				l3 += 4;
			}
			if (bpf_skb_vlan_push(skb, bpf_htons(a->a16), tci) < 0)
				return TC_ACT_SHOT;
			hw = 1;
			break;
		}
		case OP_POP_VLAN:
			if (!hw && !tags)
				break;
			if (bpf_skb_vlan_pop(skb) < 0)
				return TC_ACT_SHOT;
			if (hw)
				hw = 0;
			else {
				tags--;
				l3 -= 4;
			}
			/* The kernel moves the next tag from the frame into metadata. */
			if (tags) {
				tags--;
				l3 -= 4;
				hw = 1;
			}
			break;
		case OP_SET_VLAN_VID:
		case OP_SET_VLAN_PCP: {
			if (!hw)
				break;
			__u16 tci = skb->vlan_tci;
			__u16 proto = skb->vlan_proto;
			tci = a->op == OP_SET_VLAN_VID ? (tci & 0xf000) | (a->a16 & 0x0fff)
						       : (tci & 0x1fff) | ((a->a8 & 7) << 13);
			/* No helper rewrites the metadata tag: pop and push it back. */
			if (bpf_skb_vlan_pop(skb) < 0 || bpf_skb_vlan_push(skb, proto, tci) < 0)
				return TC_ACT_SHOT;
			break;
		}
		case OP_SET_IPV4_SRC:
		case OP_SET_IPV4_DST: {
			__u32 at = l3 + (a->op == OP_SET_IPV4_SRC ? 12 : 16);
			__u32 old;
			if (bpf_skb_load_bytes(skb, at, &old, 4) < 0)
				return TC_ACT_SHOT;
			int c = s->later_fragment ? -1 : l4_csum_at(s);
			if (c >= 0) {
				__u32 flags = BPF_F_PSEUDO_HDR | 4 | (s->proto == 17 ? BPF_F_MARK_MANGLED_0 : 0);
				bpf_l4_csum_replace(skb, c + (l3 - s->l3), old, a->a32, flags);
			}
			bpf_l3_csum_replace(skb, l3 + 10, old, a->a32, 4);
			bpf_skb_store_bytes(skb, at, &a->a32, 4, 0);
			break;
		}
		case OP_SET_TP_SRC:
		case OP_SET_TP_DST: {
			__u32 at = s->l4 + (l3 - s->l3) + (a->op == OP_SET_TP_SRC ? 0 : 2);
			__u16 old, new = bpf_htons(a->a16);
			if (bpf_skb_load_bytes(skb, at, &old, 2) < 0)
				return TC_ACT_SHOT;
			int c = l4_csum_at(s);
			if (c >= 0)
				bpf_l4_csum_replace(skb, c + (l3 - s->l3), old, new, 2 | (s->proto == 17 ? BPF_F_MARK_MANGLED_0 : 0));
			bpf_skb_store_bytes(skb, at, &new, 2, 0);
			break;
		}
		case OP_SET_DSCP: {
			if (s->eth_type == 0x0800) {
				__u16 old, new;
				if (bpf_skb_load_bytes(skb, l3, &old, 2) < 0)
					return TC_ACT_SHOT;
				__u8 *o = (__u8 *)&old;
				__u8 tos = (o[1] & 3) | (a->a8 << 2);
				new = old;
				((__u8 *)&new)[1] = tos;
				bpf_l3_csum_replace(skb, l3 + 10, old, new, 2);
				bpf_skb_store_bytes(skb, l3, &new, 2, 0);
			} else if (s->eth_type == 0x86dd) {
				__u16 w;
				if (bpf_skb_load_bytes(skb, l3, &w, 2) < 0)
					return TC_ACT_SHOT;
				__u16 h = bpf_ntohs(w);
				__u8 tc = (h >> 4) & 0xff;
				tc = (tc & 3) | (a->a8 << 2);
				h = (h & 0xf00f) | (tc << 4);
				w = bpf_htons(h);
				bpf_skb_store_bytes(skb, l3, &w, 2, 0);
			}
			break;
		}
		case OP_DEC_TTL: {
			if (s->eth_type == 0x0800) {
				__u16 old, new;
				if (bpf_skb_load_bytes(skb, l3 + 8, &old, 2) < 0)
					return TC_ACT_SHOT;
				new = old;
				((__u8 *)&new)[0] -= 1;
				bpf_l3_csum_replace(skb, l3 + 10, old, new, 2);
				bpf_skb_store_bytes(skb, l3 + 8, &new, 2, 0);
			} else if (s->eth_type == 0x86dd) {
				__u8 hl;
				if (bpf_skb_load_bytes(skb, l3 + 7, &hl, 1) < 0)
					return TC_ACT_SHOT;
				hl -= 1;
				bpf_skb_store_bytes(skb, l3 + 7, &hl, 1, 0);
			}
			break;
		}
		case OP_METER:
			if (!meter_pass(a->a32, skb->len)) {
				count(CNT_DROP);
				return TC_ACT_SHOT;
			}
			break;
		default:
			return TC_ACT_SHOT;
		}
	}
	return TC_ACT_SHOT;
}

/* ---- XDP ---- */

/* RFC 1624: HC' = ~(~HC + ~m + m'). One's-complement sums do not care about byte order as long as
 * every operand has the same: all values here are as they sit in the packet (network order read
 * as they are). A 16-bit change passes its value in the low half. */
static __always_inline void csum_fix(__u16 *csum, __u32 old, __u32 new)
{
	__u32 sum = (__u16)~*csum;
	sum += (__u16)~(old >> 16) + (__u16)~(old & 0xffff);
	sum += (new >> 16) + (new & 0xffff);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	*csum = ~sum;
}

SEC("xdp")
int ef_xdp(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&ef_scratch, &zero);
	__u64 pi = port_info(ctx->ingress_ifindex);
	if (!s || !pi)
		return XDP_PASS;
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 len = head_len(end - data);
	if (len < 14)
		return XDP_PASS;
	copy_head(s, data, end);
	s->len = len;
	__be16 hw_proto = 0;
	__u16 hw_tci = 0;
	int hw_tag = bpf_xdp_metadata_rx_vlan_tag(ctx, &hw_proto, &hw_tci) == 0;
	if (parse(s, pi >> 16, hw_tag, hw_tci) < 0) {
		count(CNT_UPCALL);
		return XDP_PASS;
	}
	struct entry *e = lookup(s);
	if (!e) {
		count(CNT_MISS);
		return XDP_PASS;
	}
	if (needs_userspace(e, s)) {
		count(CNT_SLOW);
		return XDP_PASS;
	}
	count(CNT_HIT);
	__sync_fetch_and_add(&e->packets, 1);
	__sync_fetch_and_add(&e->bytes, (__u64)(end - data) + (hw_tag ? 4 : 0));

	__u32 n = e->n_actions;
	__u32 l3 = s->l3, l4 = s->l4;
	if (hw_tag) {
		/* The actions work on the frame as the wire carried it: put the tag back in. A frame
		 * redirected elsewhere leaves its metadata behind. */
		if (bpf_xdp_adjust_head(ctx, -4))
			return XDP_DROP;
		__u8 *p = (void *)(long)ctx->data;
		if ((void *)(p + 16) > (void *)(long)ctx->data_end)
			return XDP_DROP;
		__builtin_memmove(p, p + 4, 12);
		*(__be16 *)(p + 12) = hw_proto;
		p[14] = hw_tci >> 8;
		p[15] = hw_tci;
		s->data_tags++;
		l3 += 4;
		l4 += 4;
	}
	for (__u32 i = 0; i < MAX_ACTIONS; i++) {
		if (i >= n)
			break;
		struct action *a = &e->act[i];
		data = (void *)(long)ctx->data;
		end = (void *)(long)ctx->data_end;
		switch (a->op) {
		case OP_OUTPUT:
			/* Userspace installs XDP entries with one output, last. */
			return bpf_redirect(a->a32, 0);
		case OP_SET_ETH_DST:
		case OP_SET_ETH_SRC: {
			__u8 *p = data;
			if ((void *)(p + 12) > end)
				return XDP_DROP;
			__u32 at = a->op == OP_SET_ETH_DST ? 0 : 6;
			for (int j = 0; j < 6; j++)
				p[at + j] = a->mac[j];
			break;
		}
		case OP_PUSH_VLAN: {
			__u16 tci = 0;
			__u8 *p = data;
			if ((void *)(p + 18) > end)
				return XDP_DROP;
			if (s->data_tags)
				tci = (p[14] << 8) | p[15];
			if (bpf_xdp_adjust_head(ctx, -4))
				return XDP_DROP;
			p = (void *)(long)ctx->data;
			if ((void *)(p + 16) > (void *)(long)ctx->data_end)
				return XDP_DROP;
			__builtin_memmove(p, p + 4, 12);
			p[12] = a->a16 >> 8;
			p[13] = a->a16;
			p[14] = tci >> 8;
			p[15] = tci;
			s->data_tags++;
			l3 += 4;
			l4 += 4;
			break;
		}
		case OP_POP_VLAN: {
			if (!s->data_tags)
				break;
			__u8 *p = data;
			if ((void *)(p + 16) > end)
				return XDP_DROP;
			__builtin_memmove(p + 4, p, 12);
			if (bpf_xdp_adjust_head(ctx, 4))
				return XDP_DROP;
			s->data_tags--;
			l3 -= 4;
			l4 -= 4;
			break;
		}
		case OP_SET_VLAN_VID:
		case OP_SET_VLAN_PCP: {
			if (!s->data_tags)
				break;
			__u8 *p = data;
			if ((void *)(p + 16) > end)
				return XDP_DROP;
			__u16 tci = (p[14] << 8) | p[15];
			tci = a->op == OP_SET_VLAN_VID ? (tci & 0xf000) | (a->a16 & 0x0fff)
						       : (tci & 0x1fff) | ((a->a8 & 7) << 13);
			p[14] = tci >> 8;
			p[15] = tci;
			break;
		}
		case OP_SET_IPV4_SRC:
		case OP_SET_IPV4_DST: {
			if (l3 > 100 || l4 > 100)
				return XDP_DROP;
			__u8 *ip = (__u8 *)data + l3;
			if ((void *)(ip + 20) > end)
				return XDP_DROP;
			__u32 *addr = (__u32 *)(ip + (a->op == OP_SET_IPV4_SRC ? 12 : 16));
			__u32 old = *addr;
			__u32 new = a->a32;
			csum_fix((__u16 *)(ip + 10), old, new);
			if (!s->later_fragment && (s->proto == 6 || s->proto == 17)) {
				__u8 *tp = (__u8 *)data + l4;
				if ((void *)(tp + 18) > end)
					return XDP_DROP;
				__u16 *cs = (__u16 *)(tp + (s->proto == 6 ? 16 : 6));
				if (!(s->proto == 17 && *cs == 0)) {
					csum_fix(cs, old, new);
					if (s->proto == 17 && *cs == 0)
						*cs = 0xffff;
				}
			}
			*addr = new;
			break;
		}
		case OP_SET_TP_SRC:
		case OP_SET_TP_DST: {
			if (l4 > 100 || (s->proto != 6 && s->proto != 17))
				return XDP_DROP;
			__u8 *tp = (__u8 *)data + l4;
			if ((void *)(tp + 18) > end)
				return XDP_DROP;
			__u16 *port = (__u16 *)(tp + (a->op == OP_SET_TP_SRC ? 0 : 2));
			__u16 old = *port;
			__u16 new = bpf_htons(a->a16);
			__u16 *cs = (__u16 *)(tp + (s->proto == 6 ? 16 : 6));
			if (!(s->proto == 17 && *cs == 0)) {
				csum_fix(cs, old, new);
				if (s->proto == 17 && *cs == 0)
					*cs = 0xffff;
			}
			*port = new;
			break;
		}
		case OP_SET_DSCP:
		case OP_DEC_TTL: {
			if (l3 > 100)
				return XDP_DROP;
			__u8 *ip = (__u8 *)data + l3;
			if (s->eth_type == 0x0800) {
				if ((void *)(ip + 20) > end)
					return XDP_DROP;
				__u16 *w = (__u16 *)(ip + (a->op == OP_SET_DSCP ? 0 : 8));
				__u16 old = bpf_ntohs(*w), new = old;
				if (a->op == OP_SET_DSCP)
					new = (old & 0xff03) | (a->a8 << 2);
				else
					new = old - 0x100;
				csum_fix((__u16 *)(ip + 10), *w, bpf_htons(new));
				*w = bpf_htons(new);
			} else if (s->eth_type == 0x86dd) {
				if ((void *)(ip + 40) > end)
					return XDP_DROP;
				if (a->op == OP_DEC_TTL) {
					ip[7] -= 1;
				} else {
					__u16 h = (ip[0] << 8) | ip[1];
					__u8 tc = (h >> 4) & 0xff;
					tc = (tc & 3) | (a->a8 << 2);
					h = (h & 0xf00f) | (tc << 4);
					ip[0] = h >> 8;
					ip[1] = h;
				}
			}
			break;
		}
		case OP_METER:
			if (!meter_pass(a->a32, (__u32)(end - data))) {
				count(CNT_DROP);
				return XDP_DROP;
			}
			break;
		default:
			return XDP_PASS;
		}
	}
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
