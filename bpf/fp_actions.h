/* The action executor: runs a megaflow entry's flat action list (what userspace translation
 * produced) on the frame, for TC and XDP alike through fp_ctx.h. A rewrite the frame cannot take
 * drops it as CNT_ACTION_FAILED; a meter's drop band as CNT_DROP. */
#ifndef EDGEFLOW_FP_ACTIONS_H
#define EDGEFLOW_FP_ACTIONS_H
#include "fp_ctx.h"
#include "fp_meter.h"

/* Conditions the fast path leaves to userspace although the entry matched. */
static __always_inline int needs_userspace(struct entry *e, struct scratch *s)
{
	__u32 decrements = e->decrements;
	if (!decrements || (s->eth_type != 0x0800 && s->eth_type != 0x86dd))
		return 0;
	/* A TTL that one of the decrements would take to 0 may be reported to the controller
	 * (the differential fuzzer found two decrements of a TTL of 2 forwarded with 0). */
	return s->ttl <= decrements;
}

/* The TCP or UDP checksum's offset from L4, or -1 for protocols without one here. */
static __always_inline int l4_csum_offset(struct scratch *s)
{
	if (s->proto == 6)
		return 16;
	if (s->proto == 17)
		return 6;
	return -1;
}

/* Whether a checksum at `off` is there to update: a truncated frame's is not, and userspace
 * (packet.rs l4_csum_at) leaves it alone too. */
static __always_inline int holds_csum(void *ctx, const enum hook hook, int off)
{
	return off >= 0 && (__u32)off + 2 <= ctx_len(ctx, hook);
}

/* DSCP is the top six bits of IPv4's TOS byte and of IPv6's traffic class, which straddles the
 * first two bytes. `w` is those two bytes as the packet holds them. */
static __always_inline __u16 with_dscp(__u16 w, __u16 eth_type, __u8 dscp)
{
	__u16 h = bpf_ntohs(w);
	if (eth_type == 0x0800)
		h = (h & 0xff03) | (dscp << 2);
	else
		h = (h & 0xf03f) | ((__u16)dscp << 6);
	return bpf_htons(h);
}

static __always_inline int execute(void *ctx, const enum hook hook, struct scratch *s, struct entry *e)
{
	__u32 n = e->n_actions;
	for (__u32 i = 0; i < MAX_ACTIONS; i++) {
		if (i >= n)
			break;
		struct action *a = &e->act[i];
		switch (a->op) {
		case OP_OUTPUT: {
			int r = ctx_output(ctx, hook, a->a32, i + 1 == n, a->a8 == OUT_VIA_TC);
			if (r >= 0)
				return r;
			if (r == -2)
				goto fail;
			break;
		}
		case OP_SET_ETH_DST:
		case OP_SET_ETH_SRC:
			if (ctx_store(ctx, hook, a->op == OP_SET_ETH_DST ? 0 : 6, a->mac, 6) < 0)
				goto fail;
			break;
		case OP_PUSH_VLAN: {
			/* The new tag copies the one it covers (spec 1.3 §5.12.1). */
			__u16 tci = 0;
			if ((s->hw_vlan || s->data_tags) && ctx_outer_tci(ctx, hook, s, &tci) < 0)
				goto fail;
			if (ctx_push_tag(ctx, hook, s, a->a16, tci) < 0)
				goto fail;
			break;
		}
		case OP_POP_VLAN:
			if ((s->hw_vlan || s->data_tags) && ctx_pop_tag(ctx, hook, s) < 0)
				goto fail;
			break;
		case OP_SET_VLAN_VID:
		case OP_SET_VLAN_PCP: {
			if (!s->hw_vlan && !s->data_tags)
				break;
			__u16 tci;
			if (ctx_outer_tci(ctx, hook, s, &tci) < 0)
				goto fail;
			tci = a->op == OP_SET_VLAN_VID ? (tci & 0xf000) | (a->a16 & 0x0fff)
						       : (tci & 0x1fff) | ((a->a8 & 7) << 13);
			if (ctx_set_outer_tci(ctx, hook, s, tci) < 0)
				goto fail;
			break;
		}
		case OP_SET_IPV4_SRC:
		case OP_SET_IPV4_DST: {
			__u32 at = s->l3 + (a->op == OP_SET_IPV4_SRC ? 12 : 16);
			__u32 old, new = a->a32;
			if (ctx_load(ctx, hook, at, &old, 4) < 0)
				goto fail;
			int cs = s->later_fragment ? -1 : l4_csum_offset(s);
			if (cs >= 0 && holds_csum(ctx, hook, s->l4 + cs) &&
			    ctx_l4_csum(ctx, hook, s->l4 + cs, old, new, 4, 1, s->proto == 17) < 0)
				goto fail;
			if (ctx_l3_csum(ctx, hook, s->l3 + 10, old, new, 4) < 0 || ctx_store(ctx, hook, at, &new, 4) < 0)
				goto fail;
			break;
		}
		case OP_SET_TP_SRC:
		case OP_SET_TP_DST: {
			/* A later fragment holds no transport header: userspace leaves it alone. */
			if (s->later_fragment)
				break;
			/* Userspace sets ports only on TCP and UDP (fastpath.rs encode). */
			int cs = l4_csum_offset(s);
			if (cs < 0)
				goto fail;
			__u32 at = s->l4 + (a->op == OP_SET_TP_SRC ? 0 : 2);
			__u16 old, new = bpf_htons(a->a16);
			if (ctx_load(ctx, hook, at, &old, 2) < 0)
				goto fail;
			if (holds_csum(ctx, hook, s->l4 + cs) &&
			    ctx_l4_csum(ctx, hook, s->l4 + cs, old, new, 2, 0, s->proto == 17) < 0)
				goto fail;
			if (ctx_store(ctx, hook, at, &new, 2) < 0)
				goto fail;
			break;
		}
		case OP_SET_DSCP: {
			if (s->eth_type != 0x0800 && s->eth_type != 0x86dd)
				break;
			__u16 old, new;
			if (ctx_load(ctx, hook, s->l3, &old, 2) < 0)
				goto fail;
			new = with_dscp(old, s->eth_type, a->a8);
			if (s->eth_type == 0x0800 && ctx_l3_csum(ctx, hook, s->l3 + 10, old, new, 2) < 0)
				goto fail;
			if (ctx_store(ctx, hook, s->l3, &new, 2) < 0)
				goto fail;
			break;
		}
		case OP_DEC_TTL: {
			if (s->eth_type == 0x0800) {
				/* TTL shares a checksummed 16-bit word with the protocol. */
				__u16 old, new;
				if (ctx_load(ctx, hook, s->l3 + 8, &old, 2) < 0)
					goto fail;
				new = old;
				((__u8 *)&new)[0] -= 1;
				if (ctx_l3_csum(ctx, hook, s->l3 + 10, old, new, 2) < 0 ||
				    ctx_store(ctx, hook, s->l3 + 8, &new, 2) < 0)
					goto fail;
			} else if (s->eth_type == 0x86dd) {
				__u8 hop_limit;
				if (ctx_load(ctx, hook, s->l3 + 7, &hop_limit, 1) < 0)
					goto fail;
				hop_limit -= 1;
				if (ctx_store(ctx, hook, s->l3 + 7, &hop_limit, 1) < 0)
					goto fail;
			}
			break;
		}
		case OP_METER:
			if (!meter_pass(a->a32, ctx_wire_len(ctx, hook, s)))
				return ctx_drop(hook, CNT_DROP);
			break;
		default:
			goto fail;
		}
	}
	/* No output: the entry drops (userspace counts these from the entry's hits). */
	return hook == HOOK_TC ? TC_ACT_SHOT : XDP_DROP;
fail:
	return ctx_drop(hook, CNT_ACTION_FAILED);
}

#endif
