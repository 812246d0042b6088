/* One view of a frame for both hooks, so that the action executor, LESS and AFDX are each written
 * once. Every function takes the hook as a constant: an entry point inlines the one form it needs
 * and the compiler drops the other, so the wrapper costs nothing at run time.
 *
 * Where the hooks differ, and why each form is what it is:
 * - TC reads and writes through skb helpers: they follow non-linear data and keep checksum
 *   offload (CHECKSUM_PARTIAL) right. XDP writes its one buffer in place, which is cheaper.
 * - TC holds the outer VLAN tag in skb metadata and its helpers push and pop it there. XDP has
 *   every tag in the data: a tag the device took into metadata is put back before any action,
 *   because a redirected frame leaves its metadata behind.
 * - TC sends extra copies with bpf_clone_redirect. XDP sends a frame once (userspace installs XDP
 *   entries with one output, last).
 * - Up to userspace: TC redirects to the upcall interface with the port number in a tag; XDP
 *   redirects the frame into the port's AF_XDP socket where it has one (ef_xsks), stamped as
 *   afxdp.c stamps it, and otherwise passes it to the stack, where the port's packet socket
 *   reads it. */
#ifndef EDGEFLOW_FP_CTX_H
#define EDGEFLOW_FP_CTX_H
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "fp_state.h"
#include "fp_parse.h"
#include "afxdp_stamp.h"

enum hook { HOOK_TC, HOOK_XDP };

#define SKB(ctx) ((struct __sk_buff *)(ctx))
#define XDP(ctx) ((struct xdp_md *)(ctx))

/* The actions work on the frame where it stands now: s->l3 and s->l4 move as tags are pushed and
 * popped; TC's outer tag may sit in metadata (s->hw_vlan), the others are in the data
 * (s->data_tags). These live in the per-CPU scratch, not in locals: the verifier does not follow
 * values in map memory, so the executor's loop reaches the same state whatever the last action
 * did, instead of one state per combination of tags and offsets (over its 1 M instructions). */
static __always_inline void move_l3(struct scratch *s, int by)
{
	s->l3 += by;
	s->l4 += by;
}

static __always_inline int ctx_pass(const enum hook hook)
{
	return hook == HOOK_TC ? TC_ACT_OK : XDP_PASS;
}

/* Drops the frame and counts why (enum ef_counter). */
static __always_inline int ctx_drop(const enum hook hook, __u32 reason)
{
	count(reason);
	return hook == HOOK_TC ? TC_ACT_SHOT : XDP_DROP;
}

/* The interface the frame came in on. At TC ingress the skb's device is that interface too, and
 * it is what a test run gives where the kernel takes no ingress interface in its context (5.10). */
static __always_inline __u32 ctx_ifindex(void *ctx, const enum hook hook)
{
	if (hook == HOOK_XDP)
		return XDP(ctx)->ingress_ifindex;
	__u32 in = SKB(ctx)->ingress_ifindex;
	return in ? in : SKB(ctx)->ifindex;
}

static __always_inline const __u8 *ctx_data(void *ctx, const enum hook hook)
{
	return hook == HOOK_TC ? (const __u8 *)(long)SKB(ctx)->data : (const __u8 *)(long)XDP(ctx)->data;
}

static __always_inline const __u8 *ctx_end(void *ctx, const enum hook hook)
{
	return hook == HOOK_TC ? (const __u8 *)(long)SKB(ctx)->data_end : (const __u8 *)(long)XDP(ctx)->data_end;
}

/* The frame's length in its data (TC: a tag in metadata not included). */
static __always_inline __u32 ctx_len(void *ctx, const enum hook hook)
{
	__u32 len = hook == HOOK_TC ? SKB(ctx)->len : (__u32)(ctx_end(ctx, hook) - ctx_data(ctx, hook));
	/* Taken here: the compiler would otherwise keep XDP's data pointer across a helper call and
	 * spill it as the 32-bit field it was read from, which the verifier refuses. */
	asm volatile("" : "+r"(len));
	return len;
}

/* The frame's length as the wire carried it (a tag in metadata included). */
static __always_inline __u32 ctx_wire_len(void *ctx, const enum hook hook, const struct scratch *s)
{
	return ctx_len(ctx, hook) + (s->hw_vlan ? 4 : 0);
}

/* The outer tag the device or the stack took into metadata, if any. */
static __always_inline int ctx_meta_tag(void *ctx, const enum hook hook, __be16 *proto, __u16 *tci)
{
	if (hook == HOOK_TC) {
		*proto = SKB(ctx)->vlan_proto;
		*tci = SKB(ctx)->vlan_tci;
		return SKB(ctx)->vlan_present;
	}
	return bpf_xdp_metadata_rx_vlan_tag(XDP(ctx), proto, tci) == 0;
}

/* XDP's way up: into the port's AF_XDP socket, keyed by its upcall tag, when the switch put one
 * there and the frame came in on the queue it is bound to (0); else to the stack. The frame goes
 * as it arrived (its tag still in the device's metadata, which the stamp carries along). */
static __always_inline int xdp_up(struct xdp_md *ctx, __u64 port_info)
{
	__u32 queue = ctx->rx_queue_index;
	if (queue >= XSK_QUEUES)
		return XDP_PASS;
	__u32 slot = (port_info & 0xfff) + queue * XSK_SLOTS;
	if (!bpf_map_lookup_elem(&ef_xsks, &slot))
		return XDP_PASS;
	afxdp_stamp(ctx);
	return bpf_redirect_map(&ef_xsks, slot, XDP_PASS);
}

/* Sends the frame up to userspace, which decides (TC: tagged with the port's upcall tag). */
static __always_inline int ctx_up(void *ctx, const enum hook hook, __u64 port_info)
{
	count(CNT_UPCALL);
	if (hook == HOOK_XDP)
		return xdp_up(XDP(ctx), port_info);
	__u32 up = config(CFG_UPCALL_IFINDEX);
	if (!up || bpf_skb_vlan_push(SKB(ctx), bpf_htons(0x8100), port_info & 0xfff) < 0)
		return ctx_drop(hook, CNT_NO_UPCALL);
	return bpf_redirect(up, 0);
}

/* Copies the frame's head into s->buf and sets s->len; 0 when it has no Ethernet header. */
static __always_inline int ctx_read_head(void *ctx, const enum hook hook, struct scratch *s)
{
	const __u8 *data = ctx_data(ctx, hook), *end = ctx_end(ctx, hook);
	__u32 len = head_len(ctx_len(ctx, hook));
	if (len < 14)
		return 0;
	/* TC's headers are nearly always in the linear part; read them in place when they are. */
	if (data + len <= end)
		copy_head(s, data, end, len);
	else if (hook == HOOK_XDP || bpf_skb_load_bytes(SKB(ctx), 0, s->buf, len) < 0)
		return 0;
	s->len = len;
	return 1;
}

/* XDP: `n` bytes at `off`, or 0 past the end. The offset bound is for the verifier: nothing the
 * executor rewrites lies past the parsed head. */
static __always_inline void *xdp_span(void *ctx, __u32 off, const __u32 n)
{
	__u8 *data = (void *)(long)XDP(ctx)->data;
	void *end = (void *)(long)XDP(ctx)->data_end;
	if (off > PARSE_BYTES)
		return 0;
	if ((void *)(data + off + n) > end)
		return 0;
	return data + off;
}

/* Reads `n` bytes at `off` (n a constant: 1, 2, 4, or any for a byte copy). 0, or <0 past the end. */
static __always_inline int ctx_load(void *ctx, const enum hook hook, __u32 off, void *to, const __u32 n)
{
	if (hook == HOOK_TC)
		return bpf_skb_load_bytes(SKB(ctx), off, to, n);
	void *p = xdp_span(ctx, off, n);
	if (!p)
		return -1;
	if (n == 1)
		*(__u8 *)to = *(__u8 *)p;
	else if (n == 2)
		*(__u16 *)to = *(__u16 *)p;
	else if (n == 4)
		*(__u32 *)to = *(__u32 *)p;
	else
		__builtin_memcpy(to, p, n);
	return 0;
}

/* Writes `n` bytes at `off` (as ctx_load). */
static __always_inline int ctx_store(void *ctx, const enum hook hook, __u32 off, const void *from, const __u32 n)
{
	if (hook == HOOK_TC)
		return bpf_skb_store_bytes(SKB(ctx), off, from, n, 0);
	void *p = xdp_span(ctx, off, n);
	if (!p)
		return -1;
	if (n == 1)
		*(__u8 *)p = *(const __u8 *)from;
	else if (n == 2)
		*(__u16 *)p = *(const __u16 *)from;
	else if (n == 4)
		*(__u32 *)p = *(const __u32 *)from;
	else
		__builtin_memcpy(p, from, n);
	return 0;
}

/* Writes a run of bytes whose length is known only at run time (1..max, max a power of two). */
static __always_inline int ctx_store_run(void *ctx, const enum hook hook, __u32 off, void *from, __u32 n,
					 const __u32 max)
{
	if (n == 0 || n > max)
		return -1;
	/* The same n, in a form whose bounds the verifier carries through a stack spill: Linux 6.1
	 * forgot the check above on the copy the compiler reloads, and refused a zero-size store. */
	n = ((n - 1) & (max - 1)) + 1;
	if (hook == HOOK_TC)
		return bpf_skb_store_bytes(SKB(ctx), off, from, n, 0);
	/* XDP: in the powers of two n is made of, each a copy of constant size through a checked
	 * pointer (bpf_xdp_store_bytes takes n as it is, but only from Linux 5.18). */
	__u32 done = 0;
#pragma unroll
	for (__u32 piece = max; piece; piece >>= 1) {
		if (!(n & piece))
			continue;
		void *p = xdp_span(ctx, off + done, piece);
		if (!p)
			return -1;
		__builtin_memcpy(p, (__u8 *)from + done, piece);
		done += piece;
	}
	return 0;
}

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

/* Folds a change of `size` (2 or 4) bytes from `old` to `new` into the IPv4 header checksum at `off`. */
static __always_inline int ctx_l3_csum(void *ctx, const enum hook hook, __u32 off, __u32 old, __u32 new,
				       const __u32 size)
{
	if (hook == HOOK_TC)
		return bpf_l3_csum_replace(SKB(ctx), off, old, new, size);
	__u16 *cs = xdp_span(ctx, off, 2);
	if (!cs)
		return -1;
	csum_fix(cs, old, new);
	return 0;
}

/* The same for a TCP or UDP checksum at `off`. `pseudo`: the field is in the pseudo-header (an IP
 * address). `udp`: a zero checksum means none and stays zero, and a sum that comes to zero is sent
 * as 0xffff (RFC 768). */
static __always_inline int ctx_l4_csum(void *ctx, const enum hook hook, __u32 off, __u32 old, __u32 new,
				       const __u32 size, const int pseudo, int udp)
{
	if (hook == HOOK_TC) {
		__u32 flags = size | (pseudo ? BPF_F_PSEUDO_HDR : 0) | (udp ? BPF_F_MARK_MANGLED_0 : 0);
		return bpf_l4_csum_replace(SKB(ctx), off, old, new, flags);
	}
	__u16 *cs = xdp_span(ctx, off, 2);
	if (!cs)
		return -1;
	if (udp && *cs == 0)
		return 0;
	csum_fix(cs, old, new);
	if (udp && *cs == 0)
		*cs = 0xffff;
	return 0;
}

/* The outer tag's TCI (the caller knows there is a tag). */
static __always_inline int ctx_outer_tci(void *ctx, const enum hook hook, const struct scratch *s, __u16 *tci)
{
	if (hook == HOOK_TC && s->hw_vlan) {
		*tci = SKB(ctx)->vlan_tci;
		return 0;
	}
	__u16 t;
	if (ctx_load(ctx, hook, 14, &t, 2) < 0)
		return -1;
	*tci = bpf_ntohs(t);
	return 0;
}

static __always_inline int ctx_set_outer_tci(void *ctx, const enum hook hook, const struct scratch *s, __u16 tci)
{
	if (hook == HOOK_TC && s->hw_vlan) {
		/* No helper rewrites the metadata tag: pop it and push it back. */
		__u16 proto = SKB(ctx)->vlan_proto;
		if (bpf_skb_vlan_pop(SKB(ctx)) < 0 || bpf_skb_vlan_push(SKB(ctx), proto, tci) < 0)
			return -1;
		return 0;
	}
	__u16 t = bpf_htons(tci);
	return ctx_store(ctx, hook, 14, &t, 2);
}

/* Pushes a tag (TPID `proto`) in front of the others. TC: the new tag goes into metadata and the
 * one there, if any, into the data. */
static __always_inline int ctx_push_tag(void *ctx, const enum hook hook, struct scratch *s, __u16 proto, __u16 tci)
{
	if (hook == HOOK_TC) {
		if (bpf_skb_vlan_push(SKB(ctx), bpf_htons(proto), tci) < 0)
			return -1;
		if (s->hw_vlan) {
			s->data_tags++;
			move_l3(s, 4);
		}
		s->hw_vlan = 1;
		return 0;
	}
	if (bpf_xdp_adjust_head(XDP(ctx), -4))
		return -1;
	__u8 *p = xdp_span(ctx, 0, 16);
	if (!p)
		return -1;
	__builtin_memmove(p, p + 4, 12);
	p[12] = proto >> 8;
	p[13] = proto;
	p[14] = tci >> 8;
	p[15] = tci;
	s->data_tags++;
	move_l3(s, 4);
	return 0;
}

/* Pops the outer tag (the caller knows there is one). TC: the kernel then moves the next tag from
 * the data into metadata. */
static __always_inline int ctx_pop_tag(void *ctx, const enum hook hook, struct scratch *s)
{
	if (hook == HOOK_TC) {
		if (bpf_skb_vlan_pop(SKB(ctx)) < 0)
			return -1;
		if (s->hw_vlan) {
			s->hw_vlan = 0;
		} else {
			s->data_tags--;
			move_l3(s, -4);
		}
		if (s->data_tags) {
			s->data_tags--;
			move_l3(s, -4);
			s->hw_vlan = 1;
		}
		return 0;
	}
	__u8 *p = xdp_span(ctx, 0, 16);
	if (!p)
		return -1;
	__builtin_memmove(p + 4, p, 12);
	if (bpf_xdp_adjust_head(XDP(ctx), 4))
		return -1;
	s->data_tags--;
	move_l3(s, -4);
	return 0;
}

/* XDP: puts the tag the device took into metadata back in front of the data, where the actions
 * and the next device expect it. TC keeps it in metadata. */
static __always_inline int ctx_unhide_tag(void *ctx, const enum hook hook, struct scratch *s, __be16 proto,
					  __u16 tci)
{
	if (hook == HOOK_TC || !s->hw_vlan)
		return 0;
	s->hw_vlan = 0;
	return ctx_push_tag(ctx, hook, s, bpf_ntohs(proto), tci);
}

/* XDP: sends the frame to `ifindex` through the fallback link and TC (OUT_VIA_TC in fastpath.h),
 * the port in the frame's metadata: a verdict, or -1 when the frame cannot go that way. */
static __always_inline int xdp_output_via_tc(void *ctx, __u32 ifindex)
{
	__u32 link = config(CFG_XDP_FALLBACK_IFINDEX);
	if (!link || bpf_xdp_adjust_meta(XDP(ctx), -(int)sizeof(struct xdp_fallback_meta)))
		return -1;
	struct xdp_fallback_meta *m = (void *)(long)XDP(ctx)->data_meta;
	if ((void *)(m + 1) > (void *)(long)XDP(ctx)->data)
		return -1;
	m->magic = XDP_FALLBACK_MAGIC;
	m->ifindex = ifindex;
	count(CNT_XDP_FALLBACK);
	return bpf_redirect(link, 0);
}

/* Sends the frame to `ifindex` (`via_tc`: XDP, through TC). A copy if more actions follow (TC
 * only): -1 then, or a verdict; -2 when the frame could not go. */
static __always_inline int ctx_output(void *ctx, const enum hook hook, __u32 ifindex, int last, int via_tc)
{
	if (hook == HOOK_XDP && via_tc) {
		int r = xdp_output_via_tc(ctx, ifindex);
		return r < 0 ? -2 : r;
	}
	if (last || hook == HOOK_XDP)
		return bpf_redirect(ifindex, 0);
	if (bpf_clone_redirect(SKB(ctx), ifindex, 0) < 0)
		count(CNT_ACTION_FAILED);
	return -1;
}

/* TC: sets skb->protocol, which a program cannot write. The kernel sets it from the ethertype
 * inside a tag it pops from the data, so: push two tags (the first goes into the data), write
 * `proto` as that tag's inner ethertype, pop both. The frame's own bytes are as before. */
static __always_inline int tc_set_protocol(struct __sk_buff *skb, __be16 proto)
{
	if (bpf_skb_vlan_push(skb, bpf_htons(0x8100), 0) < 0)
		return -1;
	if (bpf_skb_vlan_push(skb, bpf_htons(0x8100), 0) < 0 || bpf_skb_store_bytes(skb, 16, &proto, 2, 0) < 0 ||
	    bpf_skb_vlan_pop(skb) < 0 || bpf_skb_vlan_pop(skb) < 0)
		return -2;
	/* The trick rests on how the kernel pops a tag: if that ever changes, fail loudly. */
	return skb->protocol == proto ? 0 : -2;
}

/* TC: takes `bytes` out of an skb right after its Ethernet header, which then carries
 * `ethertype` (the caller writes it after). Only bpf_skb_adjust_room shrinks an skb there, and
 * it takes IP frames alone, by skb->protocol (MPLS for a labelled frame, set when it was
 * received). So skb->protocol becomes the frame's IP family first, and after the shrink, if the
 * frame is still not IP (a label popped from a stack that keeps others), its ethertype: a NIC's
 * offloads and the stack read skb->protocol, not the frame. A GSO super-frame keeps its segment
 * size: what the sender's TCP chose is still what fits the path once the labels are gone.
 * 0 done, -1 not tried (nothing changed), -2 failed half-way. */
static __always_inline int tc_shrink_after_eth(struct __sk_buff *skb, __u32 bytes, __u16 ethertype)
{
	if (skb->vlan_present)
		return -1;
	int ip = ethertype == 0x0800 || ethertype == 0x86dd;
	int set = tc_set_protocol(skb, bpf_htons(ethertype == 0x86dd ? 0x86dd : 0x0800));
	if (set < 0)
		return set;
	if (bpf_skb_adjust_room(skb, -(__s32)bytes, BPF_ADJ_ROOM_MAC, BPF_F_ADJ_ROOM_FIXED_GSO) < 0)
		return -2;
	return ip || tc_set_protocol(skb, bpf_htons(ethertype)) == 0 ? 0 : -2;
}

/* Grows (delta > 0) or shrinks the frame right after its Ethernet header, whose addresses and
 * `ethertype` the caller writes again: 0 done, -1 when the hook cannot (nothing changed), -2
 * failed half-way.
 * TC grows an skb at its head only (bpf_skb_change_head). A super-frame keeps its segment size,
 * as one cut before the growth would (docs/less.md §5). */
static __always_inline int ctx_resize_head(void *ctx, const enum hook hook, int delta, __u16 ethertype)
{
	if (delta == 0)
		return 0;
	if (hook == HOOK_XDP)
		return bpf_xdp_adjust_head(XDP(ctx), -delta) ? -1 : 0;
	if (delta < 0)
		return tc_shrink_after_eth(SKB(ctx), -delta, ethertype);
	return bpf_skb_change_head(SKB(ctx), delta, 0) ? -1 : 0;
}

#endif
