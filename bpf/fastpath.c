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
// counters), fp_ctx.h (the one view of a frame TC and XDP share), fp_parse.h (the flow key),
// fp_lookup.h (megaflow lookup), fp_actions.h (the action executor), fp_meter.h (meters),
// fp_less.h and fp_afdx.h (the LESS and AFDX modes). This file holds the entry points: each path
// is written once and inlined for each hook.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "fp_state.h"
#include "fp_ctx.h"
#include "fp_parse.h"
#include "fp_lookup.h"
#include "fp_actions.h"
#include "fp_less.h"
#include "fp_afdx.h"

/* LESS label switching, then the megaflow cache. */
static __always_inline int fastpath(void *ctx, const enum hook hook)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&ef_scratch, &zero);
	__u64 pi = port_info(ctx_ifindex(ctx, hook));
	if (!s || !pi)
		return ctx_pass(hook);
	if (!ctx_read_head(ctx, hook, s))
		return ctx_up(ctx, hook, pi);
	__be16 tag_proto = 0;
	__u16 tag_tci = 0;
	int meta = ctx_meta_tag(ctx, hook, &tag_proto, &tag_tci);
	struct less_plan plan = {};
	if (!meta && less_decide(s, pi >> 16, &plan)) {
		int r = less_apply(ctx, hook, s, &plan);
		if (r >= 0)
			return r;
	}
	if (parse(s, pi >> 16, meta, tag_tci) < 0)
		return ctx_up(ctx, hook, pi);
	__u32 at = 0;
	struct entry *e = lookup(s, &at);
	if (!e) {
		count(CNT_MISS);
		return ctx_up(ctx, hook, pi);
	}
	if (needs_userspace(e, s)) {
		count(CNT_SLOW);
		return ctx_up(ctx, hook, pi);
	}
	count(CNT_HIT);
	struct flow_hits *hits = bpf_map_lookup_elem(&ef_flow_hits, &at);
	if (hits) {
		hits->packets++;
		hits->bytes += ctx_wire_len(ctx, hook, s);
	}
	if (ctx_unhide_tag(ctx, hook, s, tag_proto, tag_tci) < 0)
		return ctx_drop(hook, CNT_ACTION_FAILED);
	return execute(ctx, hook, s, e);
}

SEC("tc")
int ef_tc_ingress(struct __sk_buff *skb)
{
	return fastpath(skb, HOOK_TC);
}

SEC("xdp")
int ef_xdp(struct xdp_md *ctx)
{
	return fastpath(ctx, HOOK_XDP);
}

/* At the far end of the XDP fallback link (OUT_VIA_TC in fastpath.h): the frame, an skb now, goes
 * on to the switch port the XDP program named. Only the switch's XDP program sends into the link;
 * anything else, or a port that is not the switch's, is dropped. */
SEC("tc")
int ef_tc_xdp_fallback(struct __sk_buff *skb)
{
	const struct xdp_fallback_meta *m = (const void *)(long)skb->data_meta;
	if ((const void *)(m + 1) > (const void *)(long)skb->data || m->magic != XDP_FALLBACK_MAGIC ||
	    !port_info(m->ifindex))
		return TC_ACT_SHOT;
	return bpf_redirect(m->ifindex, 0);
}

/* AFDX: attached instead of the two above when the switch runs in AFDX mode. */
static __always_inline int afdx(void *ctx, const enum hook hook)
{
	__u64 pi = port_info(ctx_ifindex(ctx, hook));
	if (!pi)
		return ctx_pass(hook);
	const __u8 *data = ctx_data(ctx, hook), *end = ctx_end(ctx, hook);
	__be16 tag_proto;
	__u16 tag_tci;
	/* A tag in metadata would be lost (XDP) or is not AFDX's: up it goes. */
	if (ctx_meta_tag(ctx, hook, &tag_proto, &tag_tci) || data + 14 > end)
		goto up;
	int up;
	/* A tag in the data (XDP sees it there) is not counted in the frame's AFDX size, as
	 * userspace measures it (crates/forwarding/src/afdx). */
	__u32 len = ctx_len(ctx, hook), tag = 0;
	if (is_vlan_tpid(((__u16)data[12] << 8) | data[13]))
		tag = 4;
	/* The headers the checks read (a tag, IPv4 and UDP: 46 bytes) in the skb's linear part. */
	if (hook == HOOK_TC && data + 46 > end && len > end - data) {
		if (bpf_skb_pull_data(SKB(ctx), len < 46 ? len : 46) < 0)
			goto up;
		data = ctx_data(ctx, hook);
		end = ctx_end(ctx, hook);
		if (data + 14 > end)
			goto up;
	}
	len -= tag;
	__u32 slot = 0;
	struct afdx_link *l = afdx_decide(data, end, tag, len, pi >> 16, pi & 0xfff, &up, &slot);
	if (l)
		return afdx_send(ctx, hook, l, slot);
	if (!up)
		return hook == HOOK_TC ? TC_ACT_SHOT : XDP_DROP; /* counted under its VL */
up:
	count(CNT_AFDX_UP);
	return ctx_up(ctx, hook, pi);
}

SEC("tc")
int ef_tc_afdx(struct __sk_buff *skb)
{
	return afdx(skb, HOOK_TC);
}

SEC("xdp")
int ef_xdp_afdx(struct xdp_md *ctx)
{
	return afdx(ctx, HOOK_XDP);
}

char LICENSE[] SEC("license") = "GPL";
