/* LESS label switching in the kernel (docs/less.md §5). The per-hop rule needs no table: the top
 * label's first port is the output, the label is shifted, popped, or the frame delivered as IP.
 * Two tables userspace fills let the kernel also label hosts' IP frames at the edge
 * (ef_less_push, by destination) and take the detours it planned ahead for every port that may go
 * down and every frame that may come back (ef_less_reroute): all three ways around of §4, and a
 * host's frame whose first hop is down, with no upcall. Everything else — malformed stacks, the
 * protocol, ARP, kinds of frame not planned for — goes on to the usual path and up to userspace,
 * which counts and decides. Neighbour discovery too: the edge answers it, even for a destination
 * the kernel could label.
 *
 * Deciding reads only the scratch copy of the frame's head; applying the plan is written once for
 * TC and XDP (fp_ctx.h). */
#ifndef EDGEFLOW_FP_LESS_H
#define EDGEFLOW_FP_LESS_H
#include "fp_ctx.h"

struct ef_map_def SEC("maps") ef_less_ports = { BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(struct less_port), LESS_MAX_PORTS, 0 };
struct ef_map_def SEC("maps") ef_less_push = { BPF_MAP_TYPE_HASH, sizeof(struct less_push_key), sizeof(struct less_stack), LESS_TABLE_ENTRIES, BPF_F_NO_PREALLOC_ };
struct ef_map_def SEC("maps") ef_less_reroute = { BPF_MAP_TYPE_HASH, sizeof(struct less_reroute_key), sizeof(struct less_stack), LESS_TABLE_ENTRIES, BPF_F_NO_PREALLOC_ };

/* What to do: remove `remove` bytes after the Ethernet header, put `insert` bytes of s->less_out
 * there, set the ethertype, send to `ifindex`. */
struct less_plan {
	__u32 ifindex;
	__u32 remove;
	__u32 insert;
	__u32 counter;
	__u16 ethertype;
	__u8 whole;	/* the output port's less_port.whole */
	__u8 host;	/* a host's frame, labelled here */
	__u8 tcp;	/* a host's frame carries TCP */
	__u8 spent;	/* no reroute budget left: drop */
};

static __always_inline struct less_port *less_port(__u32 no)
{
	struct less_port *p = bpf_map_lookup_elem(&ef_less_ports, &no);
	return p && p->ifindex ? p : 0;
}

/* Takes a stored stack: its port must be up. Port 0 (a detour's first backtracking step) is the
 * port the frame came in on, which a host's frame is never sent back through. */
static __always_inline int less_take(struct scratch *s, struct less_stack *st, __u32 in_port, struct less_plan *p)
{
	__u32 port = st->port;
	if (!port) {
		struct less_port *in = less_port(in_port);
		if (!in || in->edge)
			return 0;
		port = in_port;
	}
	struct less_port *out = less_port(port);
	if (!out || !out->live || st->len > LESS_STACK_MAX)
		return 0;
	for (__u32 i = 0; i < LESS_STACK_MAX; i++) {
		if (i >= st->len)
			break;
		s->less_out[i] = st->bytes[i];
	}
	p->ifindex = out->ifindex;
	p->whole = out->whole;
	p->insert = st->len;
	p->ethertype = st->ethertype;
	return 1;
}

/* The detour stored under `k`, taken by a frame with `budget` steps left. The stored stack
 * carries the budget of the frame it was planned for: the frame's own, less one, is written over
 * it, and a frame with none left dies here as it would in userspace. Otherwise two switches whose
 * detours lead into each other's down ports would pass a frame back and forth for ever. */
static __always_inline int less_detour(struct scratch *s, struct less_reroute_key *k, __u8 budget, __u32 in_port,
				       struct less_plan *p)
{
	struct less_stack *st = bpf_map_lookup_elem(&ef_less_reroute, k);
	if (!st)
		return 0;
	if (!budget) {
		p->spent = 1;
		return 1;
	}
	if (!less_take(s, st, in_port, p))
		return 0;
	if (st->budget_at && st->budget_at <= st->len)
		s->less_out[(st->budget_at - 1) & (LESS_STACK_MAX - 1)] = budget - 1;
	if (!p->ethertype && st->len)
		p->ethertype = 0x8847;
	p->counter = CNT_LESS_REROUTED;
	return 1;
}

/* A detour that ends at a host here leaves as IP: the ethertype is the IP version's at `ip`. */
static __always_inline int less_ethertype(struct scratch *s, __u32 ip, struct less_plan *p)
{
	if (p->ethertype)
		return 1;
	if (ip >= s->len || ip >= PARSE_BYTES)
		return 0;
	__u8 v = s->buf[ip & (PARSE_BYTES - 1)] >> 4;
	p->ethertype = v == 4 ? 0x0800 : v == 6 ? 0x86dd : 0;
	return p->ethertype != 0;
}

/* The detour userspace planned for a labelled frame whose reroute block is entry `block` on (of
 * `depth`): by the port that is down (`port`), or for a frame that arrived backtracking (`port`
 * 0) by the port it came in on. The whole stack is replaced. */
static __always_inline int less_reroute(struct scratch *s, __u32 port, __u32 in_port, __u32 depth, __u32 block,
					struct less_plan *p)
{
	if (block >= LESS_MAX_DEPTH)
		return 0;
	__u8 budget = s->buf[(14 + 4 * block) & (PARSE_BYTES - 1)];
	__u64 h = 0;
	for (__u32 i = 0; i < LESS_MAX_DEPTH; i++) {
		if (i >= depth)
			break;
		if (i < block)
			continue;
		__u8 *w = s->buf + 14 + 4 * i;
		__u32 word = ((__u32)w[0] << 24) | ((__u32)w[1] << 16) | ((__u32)w[2] << 8) | w[3];
		if (i == block)
			word &= 0xffff;
		h = (h ^ word) * HASH_MUL;
	}
	h ^= h >> 32;
	struct less_reroute_key k = { .port = port, .from = port ? 0 : in_port, .hash = h };
	if (!less_detour(s, &k, budget, in_port, p))
		return 0;
	p->remove = 4 * depth;
	return p->spent || less_ethertype(s, 14 + 4 * depth, p);
}

/* A host's IP frame (ethertype `et`) on an edge port, to a destination userspace has planned. */
static __always_inline int less_push(struct scratch *s, __u16 et, __u32 in_port, struct less_plan *p)
{
	struct less_port *in = less_port(in_port);
	if (!in || !in->edge)
		return 0;
	struct less_push_key k = {};
	if (et == 0x0800) {
		if (s->len < 34)
			return 0;
		k.addr[10] = 0xff;
		k.addr[11] = 0xff;
		__builtin_memcpy(&k.addr[12], s->buf + 30, 4);
		p->tcp = s->buf[23] == 6;
	} else {
		/* ICMPv6 types 133-137 are router and neighbour discovery. */
		if (s->len < 55 || (s->buf[20] == 58 && s->buf[54] >= 133 && s->buf[54] <= 137))
			return 0;
		__builtin_memcpy(k.addr, s->buf + 38, 16);
		p->tcp = s->buf[20] == 6;
	}
	struct less_stack *st = bpf_map_lookup_elem(&ef_less_push, &k);
	if (!st)
		return 0;
	p->host = 1;
	p->remove = 0;
	struct less_port *first = less_port(st->port);
	if (first && !first->live && st->block_hash && st->budget_at && st->budget_at <= LESS_STACK_MAX) {
		/* The route's first hop is down: the detour planned for labelled frames with this
		 * block, as userspace takes it for the first frame. */
		struct less_reroute_key rk = { .port = st->port, .from = 0, .hash = st->block_hash };
		__u8 budget = st->bytes[(st->budget_at - 1) & (LESS_STACK_MAX - 1)];
		if (!less_detour(s, &rk, budget, in_port, p))
			return 0;
		return p->spent || less_ethertype(s, 14, p);
	}
	if (!less_take(s, st, in_port, p))
		return 0;
	if (!p->ethertype)
		p->ethertype = 0x8847;
	p->counter = CNT_LESS_PUSHED;
	return 1;
}

/* The per-hop rule for the frame in `s`, or 0 to leave it to userspace. */
static __always_inline int less_decide(struct scratch *s, __u32 in_port, struct less_plan *p)
{
	__u32 max = config(CFG_LESS_MAX_LABELS);
	if (!max || s->len < 18)
		return 0;
	/* Frames from another mode's port are that mode's, labels or not. */
	struct less_port *in = bpf_map_lookup_elem(&ef_less_ports, &in_port);
	if (!in || !in->member)
		return 0;
	__u8 *b = s->buf;
	__u16 et = ((__u16)b[12] << 8) | b[13];
	if (et == 0x0800 || et == 0x86dd)
		return less_push(s, et, in_port, p);
	if (et != 0x8847)
		return 0;
	/* block: the first entry with TTL 0, where the reroute block starts (none: LESS_MAX_DEPTH). */
	__u32 depth = 0, block = LESS_MAX_DEPTH;
	for (__u32 i = 0; i < LESS_MAX_DEPTH; i++) {
		__u32 at = 14 + 4 * i;
		if (at + 4 > s->len)
			return 0;
		__u8 last = b[at + 3];
		if (block == LESS_MAX_DEPTH && !(last & 0x7f))
			block = i;
		depth = i + 1;
		if (last & 0x80)
			break;
		if (i + 1 == LESS_MAX_DEPTH)
			return 0;
	}
	if (depth > max)
		return 0;
	__u8 p1 = b[14], p2 = b[15], p3 = b[16], ttl = b[17] & 0x7f, bos = b[17] & 0x80;
	/* Only a frame on its way back toward its source arrives with its reroute block on top (its
	 * second byte the backtrack flag); anything else without a route label is userspace's to count. */
	if (!ttl && block == 0 && (p2 & 1))
		return less_reroute(s, 0, in_port, depth, 0, p);
	__u32 present = !p1 ? 0 : !p2 ? 1 : !p3 ? 2 : 3;
	if (!p1 || !ttl || ttl > present)
		return 0;
	struct less_port *out = less_port(p1);
	if (!out)
		return 0;
	if (!out->live)
		return less_reroute(s, p1, in_port, depth, block, p);
	p->ifindex = out->ifindex;
	p->whole = out->whole;
	if (ttl > 1) {
		s->less_out[0] = p2;
		s->less_out[1] = p3;
		s->less_out[2] = 0;
		s->less_out[3] = bos | (ttl - 1);
		p->remove = 4;
		p->insert = 4;
		p->ethertype = 0x8847;
		p->counter = CNT_LESS_SHIFTED;
		return 1;
	}
	if (!bos && depth > 1 && (b[21] & 0x7f)) {
		p->remove = 4;
		p->insert = 0;
		p->ethertype = 0x8847;
		p->counter = CNT_LESS_POPPED;
		return 1;
	}
	__u32 ip = 14 + 4 * depth;
	if (ip >= s->len || ip >= PARSE_BYTES)
		return 0;
	__u8 v = b[ip & (PARSE_BYTES - 1)] >> 4;
	p->ethertype = v == 4 ? 0x0800 : v == 6 ? 0x86dd : 0;
	if (!p->ethertype)
		return 0;
	p->remove = 4 * depth;
	p->insert = 0;
	p->counter = CNT_LESS_DELIVERED;
	return 1;
}

/* Applies the plan: -1 when the hook cannot (nothing changed: the frame goes on to the usual path
 * and up), else a verdict. The Ethernet addresses are written back from the scratch copy. */
static __always_inline int less_apply(void *ctx, const enum hook hook, struct scratch *s, struct less_plan *p)
{
	if (p->spent)
		return ctx_drop(hook, CNT_LESS_SPENT);
	/* TC keeps a host's TCP super-frame whole. Under labels it may only go where nothing has to
	 * cut it (no kernel here segments below an MPLS header, few NICs do): elsewhere userspace
	 * cuts it and labels each piece. Once delivered as IP again it may go anywhere. Only TCP:
	 * the kernel takes labels off no other kind of super-frame. */
	if (hook == HOOK_TC && SKB(ctx)->gso_size && p->ethertype == 0x8847 && (!p->whole || (p->host && !p->tcp)))
		return -1;
	int delta = (int)p->insert - (int)p->remove;
	if (delta > LESS_STACK_MAX || delta < -4 * LESS_MAX_DEPTH)
		return -1;
	int resized = ctx_resize_head(ctx, hook, delta, p->ethertype);
	if (resized == -1)
		return -1;
	__be16 et = bpf_htons(p->ethertype);
	if (resized < 0 || (delta && ctx_store(ctx, hook, 0, s->buf, 12) < 0) || ctx_store(ctx, hook, 12, &et, 2) < 0)
		return ctx_drop(hook, CNT_ACTION_FAILED);
	if (p->insert && ctx_store_run(ctx, hook, 14, s->less_out, p->insert, LESS_STACK_MAX) < 0)
		return ctx_drop(hook, CNT_ACTION_FAILED);
	count(p->counter);
	return bpf_redirect(p->ifindex, 0);
}

#endif
