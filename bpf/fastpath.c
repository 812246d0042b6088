// The kernel fast path: a megaflow cache the userspace pipeline fills.
//
// Each port runs ef_tc_ingress (TCX, keeps GSO) or ef_xdp (XDP, fastest for small frames). A frame
// is parsed into the same 136-byte flow key the userspace pipeline uses, then looked up under each
// live mask (at most MAX_MASKS). A hit executes the entry's actions — the flat list userspace
// translation produced — and counts the hit; a miss goes up to userspace, which translates,
// executes and installs the entry. Anything this program is not sure to do exactly as userspace
// would (IPv6 extension headers, neighbour discovery, an expiring TTL…) goes up too.
//
// One header per concern: fastpath.h (layouts shared with Rust), fp_state.h (maps, scratch,
// counters), fp_parse.h (the flow key), fp_lookup.h (megaflow lookup), fp_meter.h (meters). This
// file holds the two entry points and their executors, still written out once for TC (skb helpers)
// and once for XDP (direct packet access); one executor behind a context wrapper is next.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "fp_state.h"
#include "fp_parse.h"
#include "fp_lookup.h"
#include "fp_meter.h"
#include "fp_less.h"
#include "fp_afdx.h"

/* The outer VLAN tag a device took out of the frame into metadata (Linux 6.8+, device-bound
 * programs only; -EOPNOTSUPP otherwise). Without it XDP would see a tagged frame as untagged. */
extern int bpf_xdp_metadata_rx_vlan_tag(const struct xdp_md *ctx, __be16 *vlan_proto,
					__u16 *vlan_tci) __ksym __weak;

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
	struct less_plan plan = {};
	if (!skb->vlan_present && less_decide(s, pi >> 16, &plan)) {
		int r = less_tc(skb, s, &plan);
		if (r >= 0)
			return r;
	}
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
	struct less_plan plan = {};
	if (!hw_tag && less_decide(s, pi >> 16, &plan))
		return less_xdp(ctx, s, &plan);
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
				/* A UDP header is 8 bytes: a short datagram must not fail TCP's bound. */
				if ((void *)(tp + 8) > end || (s->proto == 6 && (void *)(tp + 18) > end))
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
			if ((void *)(tp + 8) > end || (s->proto == 6 && (void *)(tp + 18) > end))
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

/* ---- AFDX: attached instead of the two above when the switch runs in AFDX mode ---- */

SEC("tc")
int ef_tc_afdx(struct __sk_buff *skb)
{
	__u64 pi = port_info(skb->ingress_ifindex);
	if (!pi)
		return TC_ACT_OK;
	const __u8 *data = (const __u8 *)(long)skb->data, *end = (const __u8 *)(long)skb->data_end;
	if (skb->vlan_present || data + 14 > end)
		goto up;
	int up;
	struct afdx_link *l = afdx_decide(data, skb->len, pi >> 16, &up);
	if (!l) {
		if (up)
			goto up;
		return TC_ACT_SHOT;
	}
	__u32 n = l->n_out;
	if (n == 0 || n > AFDX_MAX_OUT)
		return TC_ACT_SHOT;
	for (__u32 i = 0; i < AFDX_MAX_OUT - 1; i++) {
		if (i + 1 >= n)
			break;
		bpf_clone_redirect(skb, l->out_ifindex[i], 0);
	}
	return bpf_redirect(l->out_ifindex[(n - 1) & (AFDX_MAX_OUT - 1)], 0);
up:
	count(CNT_AFDX_UP);
	return upcall(skb, pi);
}

/* An XDP frame is sent once: a VL with several outputs is broadcast into its fanout DEVMAP. */
SEC("xdp")
int ef_xdp_afdx(struct xdp_md *ctx)
{
	__u64 pi = port_info(ctx->ingress_ifindex);
	if (!pi)
		return XDP_PASS;
	__be16 hw_proto;
	__u16 hw_tci;
	const __u8 *data = (const __u8 *)(long)ctx->data, *end = (const __u8 *)(long)ctx->data_end;
	/* A tag the device took into metadata would leave with the frame redirected: up it goes. */
	if (bpf_xdp_metadata_rx_vlan_tag(ctx, &hw_proto, &hw_tci) == 0 || data + 14 > end)
		goto up;
	int up;
	struct afdx_link *l = afdx_decide(data, end - data, pi >> 16, &up);
	if (!l) {
		if (up)
			goto up;
		return XDP_DROP;
	}
	if (l->n_out == 1)
		return bpf_redirect(l->out_ifindex[0], 0);
	return afdx_fanout(l->fanout);
up:
	count(CNT_AFDX_UP);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
