/* AFDX virtual links in the kernel (docs/afdx.md): the VLs userspace hands over are filtered,
 * policed and forwarded here, exactly as crates/forwarding/src/afdx decides them; every other
 * frame goes up, where the mode decides (and counts) it. */
#ifndef EDGEFLOW_FP_AFDX_H
#define EDGEFLOW_FP_AFDX_H
#include "fp_ctx.h"

/* A VL id's slot + 1 (0: the kernel holds no such VL), then the link by slot: two array reads,
 * which the verifier turns into address arithmetic. A hash map in their place (jhash, a bucket, an
 * element) cost 0.4 us more per frame at 2 000 frames/s, where each frame finds the maps cold. */
struct ef_map_def SEC("maps") ef_afdx_vl_slot = { BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(__u32), AFDX_VL_IDS, 0 };
struct ef_map_def SEC("maps") ef_afdx_links = { BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(struct afdx_link), AFDX_MAX_LINKS, 0 };
struct ef_map_def SEC("maps") ef_afdx_outputs = { BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(struct afdx_outputs), AFDX_MAX_LINKS, 0 };
struct ef_map_def SEC("maps") ef_afdx_counts = { BPF_MAP_TYPE_PERCPU_ARRAY, sizeof(__u32), sizeof(struct afdx_counts), AFDX_MAX_LINKS, 0 };
struct ef_map_def SEC("maps") ef_afdx_wrong_port = { BPF_MAP_TYPE_PERCPU_ARRAY, sizeof(__u32), sizeof(struct afdx_port_rx), AFDX_PORT_TAGS, 0 };
/* Each holds the outputs of one set of multicast VLs, keys 0..n-1 (see afdx_fanout). */
#define AFDX_FANOUT(n) struct ef_map_def SEC("maps") ef_afdx_fanout_##n = { BPF_MAP_TYPE_DEVMAP, sizeof(__u32), sizeof(__u32), AFDX_MAX_OUT, 0 }
AFDX_FANOUT(0); AFDX_FANOUT(1); AFDX_FANOUT(2); AFDX_FANOUT(3); AFDX_FANOUT(4); AFDX_FANOUT(5); AFDX_FANOUT(6);
AFDX_FANOUT(7); AFDX_FANOUT(8); AFDX_FANOUT(9); AFDX_FANOUT(10); AFDX_FANOUT(11); AFDX_FANOUT(12);
AFDX_FANOUT(13); AFDX_FANOUT(14); AFDX_FANOUT(15);

/* Part 7's account-based policing, shared by every CPU without a lock. The account's credit grows
 * by smax per ns (credit in bytes x ns: a frame costs its bytes x BAG, so accrual is exact) up to
 * cap. Kept as the one word `empty`, the credit is min(cap, now * smax - empty): taking a frame's
 * cost is one compare-and-swap of `empty`, retried if another CPU took one in between. Times wrap
 * modulo 2^64 and the difference is read signed: a CPU whose clock read is a little behind the
 * last taker's sees a little less than no credit (so none); one idle long enough for the
 * difference to pass 2^62 (35 days at smax 1518) sees a full account. */
static __always_inline int afdx_admit(struct afdx_link *l, __u32 slot, __u32 len)
{
	struct afdx_account *a = &l->acct;
	if (l->account != slot) {
		__u32 home = l->account;
		struct afdx_link *h = bpf_map_lookup_elem(&ef_afdx_links, &home);
		if (!h)
			return 0;
		a = &h->acct;
	}
	__u64 now = bpf_ktime_get_ns() * a->smax;
	__u64 cost = (a->per_frame ? a->smax : len) * a->bag_ns;
	for (int i = 0; i < 4; i++) {
		__u64 old = a->empty;
		__s64 diff = (__s64)(now - old);
		__u64 credit = diff < -(1LL << 62) ? a->cap : diff < 0 ? 0 : (__u64)diff > a->cap ? a->cap : (__u64)diff;
		if (credit < cost)
			return 0;
		if (__sync_val_compare_and_swap(&a->empty, old, now - credit + cost) == old)
			return 1;
	}
	return 0;
}

/* The IPv4 and UDP headers at `ip` of a frame of `len` bytes without tag and FCS, read up to
 * `end`, as forwarding::afdx::ip_header_ok checks them: version 4 without options, a good header
 * checksum, a total length ending one byte before the frame (the sequence number follows the
 * datagram), UDP, and for a whole datagram a UDP length of its IP payload. */
static __always_inline int afdx_ip_ok(const __u8 *ip, const __u8 *end, __u32 len)
{
	if (ip + 28 > end)
		return 0;
	__u32 sum = 0;
#pragma unroll
	for (int i = 0; i < 20; i += 2)
		sum += ((__u32)ip[i] << 8) | ip[i + 1];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	__u32 total = ((__u32)ip[2] << 8) | ip[3];
	if (ip[0] != 0x45 || sum != 0xffff || ip[9] != 17 || total < 28 || total + 15 != len)
		return 0;
	int whole = !(ip[6] & 0x3f) && !ip[7];
	return !whole || (((__u32)ip[24] << 8) | ip[25]) == total - 20;
}

/* The VL a frame is for, decided: its link when it passes (to be sent to the link's outputs), NULL
 * and *up = 0 when it is dropped (counted under its VL), NULL and *up = 1 when the kernel holds no
 * VL for it. `b` is the frame, ending at `end` (at least 14 bytes), with a tag of `tag` bytes (0
 * or 4) after its addresses; `len` its length without FCS and tag; it came in on port `in_port`,
 * whose upcall tag is `port_tag`. */
static __always_inline struct afdx_link *afdx_decide(const __u8 *b, const __u8 *end, __u32 tag, __u32 len,
						     __u32 in_port, __u32 port_tag, int *up, __u32 *slot_out)
{
	__u32 constant = config(CFG_AFDX_CONSTANT);
	*up = 1;
	if (b[0] != (__u8)(constant >> 24) || b[1] != (__u8)(constant >> 16) || b[2] != (__u8)(constant >> 8) ||
	    b[3] != (__u8)constant)
		return NULL;
	__u32 id = ((__u32)b[4] << 8) | b[5];
	__u32 *held = bpf_map_lookup_elem(&ef_afdx_vl_slot, &id);
	if (!held || !*held)
		return NULL;
	__u32 slot = *held - 1;
	struct afdx_link *l = bpf_map_lookup_elem(&ef_afdx_links, &slot);
	if (!l)
		return NULL;
	*slot_out = slot;
	struct afdx_counts *c = bpf_map_lookup_elem(&ef_afdx_counts, &slot);
	if (!c)
		return NULL;
	*up = 0;
	len += 4; /* the FCS the receive path stripped */
	c->c[AC_FRAMES_IN]++;
	c->c[AC_BYTES_IN] += len;
	int why = -1;
	/* The end-system format: constant 02:00:00, then id, then interface A (001) or B (010) over
	 * five zero bits. */
	int es = b[6] == 0x02 && b[7] == 0 && b[8] == 0 && (b[11] == 0x20 || b[11] == 0x40);
	__u32 network = config(CFG_AFDX_NETWORK);
	const __u8 *et = b + 12 + (tag & 4), *l3 = et + 2;
	int ipv4 = l3 <= end && et[0] == 0x08 && et[1] == 0x00;
	if (in_port != l->in_port) {
		why = AC_WRONG_PORT;
		c->c[AC_WRONG_PORT_BYTES] += len;
		struct afdx_port_rx *rx = bpf_map_lookup_elem(&ef_afdx_wrong_port, &port_tag);
		if (rx) {
			rx->frames++;
			rx->bytes += len;
		}
	} else if (!es)
		why = AC_BAD_SOURCE;
	else if (network && b[11] >> 5 != network)
		why = AC_WRONG_NETWORK;
	else if (!ipv4)
		why = AC_BAD_ETHERTYPE;
	else if (len < l->smin)
		why = AC_UNDERSIZE;
	else if (len > l->smax)
		why = AC_OVERSIZE;
	else if (l->ip_check && !afdx_ip_ok(l3, end, len - 4)) /* len counts the FCS by now */
		why = AC_BAD_IP;
	else if (!afdx_admit(l, slot, len))
		why = AC_POLICED;
	if (why >= 0) {
		if (why < AC_MAX)
			c->c[why]++;
		return NULL;
	}
	c->c[AC_FRAMES_OUT]++;
	c->c[AC_BYTES_OUT] += len;
	return l;
}

/* XDP: a copy of the frame to every output of fanout `f` (1-based), or XDP_DROP for none. A map
 * argument must be known to the verifier, hence one call per map. */
static __always_inline int afdx_fanout(__u32 f)
{
#define FANOUT_CASE(n) case n + 1: return bpf_redirect_map(&ef_afdx_fanout_##n, 0, BPF_F_BROADCAST)
	switch (f) {
	FANOUT_CASE(0); FANOUT_CASE(1); FANOUT_CASE(2); FANOUT_CASE(3); FANOUT_CASE(4); FANOUT_CASE(5);
	FANOUT_CASE(6); FANOUT_CASE(7); FANOUT_CASE(8); FANOUT_CASE(9); FANOUT_CASE(10); FANOUT_CASE(11);
	FANOUT_CASE(12); FANOUT_CASE(13); FANOUT_CASE(14); FANOUT_CASE(15);
	}
#undef FANOUT_CASE
	return XDP_DROP;
}

/* Sends a frame of link `l`, at `slot`, to its outputs: TC copies it to all but the last; XDP
 * sends it once, broadcast into the link's fanout DEVMAP when it has several. */
static __always_inline int afdx_send(void *ctx, const enum hook hook, struct afdx_link *l, __u32 slot)
{
	__u32 n = l->n_out;
	if (n == 0 || n > AFDX_MAX_OUT)
		return ctx_drop(hook, CNT_ACTION_FAILED);
	if (n == 1)
		return bpf_redirect(l->out_ifindex, 0);
	if (hook == HOOK_XDP)
		return afdx_fanout(l->fanout);
	struct afdx_outputs *o = bpf_map_lookup_elem(&ef_afdx_outputs, &slot);
	if (!o)
		return ctx_drop(hook, CNT_ACTION_FAILED);
	for (__u32 i = 0; i < AFDX_MAX_OUT - 1; i++) {
		if (i + 1 >= n)
			break;
		if (bpf_clone_redirect(SKB(ctx), o->ifindex[i], 0) < 0)
			count(CNT_ACTION_FAILED);
	}
	return bpf_redirect(o->ifindex[(n - 1) & (AFDX_MAX_OUT - 1)], 0);
}

#endif
