// The load generator's fast sender: run by BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES, it
// stamps a sequence number and a transmit time into each copy of the template frame and sends
// it out of the interface (XDP_TX), millions of times a second, without a syscall per frame.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "maps.h"

/* Must match crates/loadgen/src/frame.rs. */
#define PROBE_AT 42
#define PROBE_LEN 16

/* Label stack bytes a LESS frame may carry between Ethernet and IP (64 labels). */
#define MAX_STACK 256
/* The template's bytes before the sequence number, in 8-byte words: headers, labels, probe magic. */
#define HEADER_WORDS ((PROBE_AT + MAX_STACK + 8) / 8)

enum { NEXT_SEQ = 0, CLOCK_OFFSET = 1, DST_SPREAD = 2, UDP_FLOWS = 3 };

/* [NEXT_SEQ]: next sequence number; [CLOCK_OFFSET]: CLOCK_REALTIME - CLOCK_MONOTONIC in ns, so the
 * stamp is comparable with the receiver's kernel receive time; [DST_SPREAD]: n > 1 makes the
 * destination MAC's last two bytes count through n values from the template's, one per frame (n
 * AFDX virtual links, say); [UDP_FLOWS]: n > 1 makes frame s flow i = s % n, its UDP destination
 * port the template's + i mod 65536 and its source port the template's + i / 65536 (no label
 * stack; the probe carries no UDP checksum). */
EF_MAP(loadgen_state, BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(__u64), 4);

/* A sent frame's page comes back to the test run's pool as the switch left it: one that popped a
 * label or rewrote a header in place changed the template. Every frame gets the template's
 * headers again, and its probe where the labels put it. */
struct header {
	__u32 words;
	__u32 probe_at;
	__u64 word[HEADER_WORDS];
};
EF_MAP(loadgen_header, BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(struct header), 1);

SEC("xdp")
int loadgen_stamp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 k = NEXT_SEQ;
	__u64 *seq = bpf_map_lookup_elem(&loadgen_state, &k);
	k = CLOCK_OFFSET;
	__u64 *offset = bpf_map_lookup_elem(&loadgen_state, &k);
	k = 0;
	struct header *h = bpf_map_lookup_elem(&loadgen_header, &k);
	if (!seq || !offset || !h || h->probe_at > PROBE_AT + MAX_STACK)
		return XDP_ABORTED;
	for (__u32 i = 0; i < HEADER_WORDS; i++) {
		if (i >= h->words)
			break;
		__u64 *at = data + i * 8;
		if ((void *)(at + 1) > end)
			return XDP_ABORTED;
		*at = h->word[i];
	}
	__u8 *probe = data + (h->probe_at & 511);
	if ((void *)probe + PROBE_LEN > end)
		return XDP_ABORTED;
	__u64 s = __sync_fetch_and_add(seq, 1);
	k = DST_SPREAD;
	__u64 *spread = bpf_map_lookup_elem(&loadgen_state, &k);
	if (spread && *spread > 1) {
		__u8 *mac = data;
		if ((void *)(mac + 6) > end)
			return XDP_ABORTED;
		__u16 v = (((__u16)mac[4] << 8) | mac[5]) + (__u16)(s % *spread);
		mac[4] = v >> 8;
		mac[5] = v;
	}
	k = UDP_FLOWS;
	__u64 *flows = bpf_map_lookup_elem(&loadgen_state, &k);
	if (flows && *flows > 1) {
		__u8 *ports = data + PROBE_AT - 8;
		if ((void *)(ports + 4) > end)
			return XDP_ABORTED;
		__u64 i = s % *flows;
		__u16 sport = (((__u16)ports[0] << 8) | ports[1]) + (__u16)(i >> 16);
		__u16 dport = (((__u16)ports[2] << 8) | ports[3]) + (__u16)i;
		ports[0] = sport >> 8;
		ports[1] = sport;
		ports[2] = dport >> 8;
		ports[3] = dport;
	}
	__u64 now = bpf_ktime_get_ns() + *offset;
	*(__u32 *)(probe + 4) = bpf_htonl((__u32)s);
	*(__u64 *)(probe + 8) = bpf_cpu_to_be64(now);
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";

/* ---- The fast receiver: counts probe frames in XDP and drops them, so that receiving at
 * millions of frames per second costs no socket buffers and no copies. ---- */

#define HIST_SUB 64
#define HIST_BUCKETS (64 * HIST_SUB)

/* Per CPU: counters and the state RFC 3550 jitter needs. */
struct rx_state {
	__u64 received;
	__u64 bytes;
	__u64 reordered;
	__u64 highest_seq;	/* highest seen + 1 (0: none yet) */
	__u64 lowest_seq;	/* lowest seen + 1 */
	__u64 first_ns;
	__u64 last_ns;
	__s64 last_transit;
	__u64 jitter16;		/* J * 16, in ns, as RFC 3550 keeps it in fixed point */
	__u64 lat_sum;
	__u64 lat_min;
	__u64 lat_max;
};

EF_MAP(loadgen_rx_config, BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(__u64), 2); /* [0] flow, [1] clock offset */
EF_MAP(loadgen_rx_state, BPF_MAP_TYPE_PERCPU_ARRAY, sizeof(__u32), sizeof(struct rx_state), 1);
EF_MAP(loadgen_rx_hist, BPF_MAP_TYPE_PERCPU_ARRAY, sizeof(__u32), sizeof(__u64), HIST_BUCKETS);

/* Log-linear bucket: exact below 64, then 64 sub-buckets per power of two (as the Rust side). */
static __always_inline __u32 hist_index(__u64 v)
{
	if (v < HIST_SUB)
		return v;
	__u32 msb = 0;
	__u64 x = v;
	if (x >> 32) { msb += 32; x >>= 32; }
	if (x >> 16) { msb += 16; x >>= 16; }
	if (x >> 8) { msb += 8; x >>= 8; }
	if (x >> 4) { msb += 4; x >>= 4; }
	if (x >> 2) { msb += 2; x >>= 2; }
	if (x >> 1) { msb += 1; }
	__u32 shift = msb - 6;
	__u32 idx = (shift + 1) * HIST_SUB + (__u32)(v >> shift) - HIST_SUB;
	return idx < HIST_BUCKETS ? idx : HIST_BUCKETS - 1;
}

SEC("xdp")
int loadgen_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *f = data;
	if (data + PROBE_AT + PROBE_LEN > end)
		return XDP_PASS;
	if (f[12] != 0x08 || f[13] != 0x00 || f[14] != 0x45 || f[23] != 17)
		return XDP_PASS;
	__u8 *probe = f + PROBE_AT;
	if (probe[0] != 0xef || probe[1] != 0x1c)
		return XDP_PASS;
	__u32 k = 0;
	__u64 *flow = bpf_map_lookup_elem(&loadgen_rx_config, &k);
	k = 1;
	__u64 *offset = bpf_map_lookup_elem(&loadgen_rx_config, &k);
	k = 0;
	struct rx_state *s = bpf_map_lookup_elem(&loadgen_rx_state, &k);
	if (!flow || !offset || !s)
		return XDP_PASS;
	if (((probe[2] << 8) | probe[3]) != *flow)
		return XDP_PASS;
	__u64 seq = bpf_ntohl(*(__u32 *)(probe + 4));
	__u64 tx = bpf_be64_to_cpu(*(__u64 *)(probe + 8));
	__u64 now = bpf_ktime_get_ns() + *offset;
	__s64 transit = (__s64)(now - tx);
	__u64 lat = transit > 0 ? transit : 0;

	if (s->received == 0) {
		s->first_ns = now;
		s->lat_min = lat;
		s->lowest_seq = seq + 1;
	} else {
		__s64 d = transit - s->last_transit;
		if (d < 0)
			d = -d;
		/* J += (|D| - J) / 16, with J kept as 16 * J */
		s->jitter16 += d - (s->jitter16 >> 4);
	}
	if (seq + 1 > s->highest_seq)
		s->highest_seq = seq + 1;
	else
		s->reordered++;
	if (seq + 1 < s->lowest_seq)
		s->lowest_seq = seq + 1;
	s->last_transit = transit;
	s->received++;
	s->bytes += (__u64)(end - data) + 4;
	s->last_ns = now;
	s->lat_sum += lat;
	if (lat < s->lat_min)
		s->lat_min = lat;
	if (lat > s->lat_max)
		s->lat_max = lat;
	__u32 b = hist_index(lat);
	__u64 *c = bpf_map_lookup_elem(&loadgen_rx_hist, &b);
	if (c)
		(*c)++;
	return XDP_DROP;
}

/* ---- A bare redirect, no switch: every frame that arrives where this is attached leaves,
 * unchanged, by the interface in loadgen_forward[0]. The floor under any XDP switch on the same
 * links, as `tc mirred` is under a TC one. ---- */

EF_MAP(loadgen_forward, BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(__u32), 1);

SEC("xdp")
int loadgen_forward_all(struct xdp_md *ctx)
{
	__u32 k = 0;
	__u32 *to = bpf_map_lookup_elem(&loadgen_forward, &k);
	return to && *to ? bpf_redirect(*to, 0) : XDP_PASS;
}
