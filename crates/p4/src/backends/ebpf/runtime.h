/* The C runtime every program the kernel back end generates shares (see mod.rs, RUNTIME):
 * the maps the edgeflow loader reads, bit access into the frame's copy, counters, registers
 * and meters. Pasted after bpf/maps.h, so it is compiled where the repository may not be. */
enum p4_hook { P4_TC, P4_XDP };

/* P4's shifts (an amount past the width gives 0, where C's is undefined) and saturating
 * arithmetic on unsigned values; each operand is read once. */
static __always_inline __u64 p4_shl(__u64 a, __u64 n, __u32 width, __u64 mask)
{
	return n >= width ? 0 : (a << n) & mask;
}

static __always_inline __u64 p4_shr(__u64 a, __u64 n, __u32 width)
{
	return n >= width ? 0 : a >> n;
}

static __always_inline __u64 p4_add_sat(__u64 a, __u64 b, __u64 max)
{
	return a + b > max ? max : a + b;
}

static __always_inline __u64 p4_sub_sat(__u64 a, __u64 b)
{
	return a > b ? a - b : 0;
}

/* v1model's hashes over the data packed into `d` (n <= 64 bytes), as BMv2 computes them: a CRC
 * least significant bit first (crc16 is CRC-16/ARC, crc32 CRC-32), and csum16 the Internet
 * checksum of the 16-bit words, an odd last byte padded with zero. */
static __always_inline __u64 p4_crc(const __u8 *d, __u32 n, __u32 poly, __u32 init, __u32 xor_out)
{
	__u32 crc = init;
	for (__u32 i = 0; i < 64; i++) {
		if (i >= n)
			break;
		crc ^= d[i];
		for (int b = 0; b < 8; b++)
			crc = (crc & 1) ? (crc >> 1) ^ poly : crc >> 1;
	}
	return crc ^ xor_out;
}

static __always_inline __u64 p4_csum16(const __u8 *d, __u32 n)
{
	__u32 sum = 0;
	for (__u32 i = 0; i < 64; i += 2) {
		if (i >= n)
			break;
		sum += ((__u32)d[i] << 8) | (i + 1 < n ? d[i + 1] : 0);
	}
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return ~sum & 0xffff;
}

/* int<W>, held as its W bits: the value with its sign, and the signed operators. */
static __always_inline __s64 p4_sext(__u64 v, __u32 width)
{
	return width >= 64 ? (__s64)v : ((__s64)(v << (64 - width))) >> (64 - width);
}

static __always_inline __u64 p4_bits(__s64 v, __u32 width)
{
	return width >= 64 ? (__u64)v : (__u64)v & ((1ULL << width) - 1);
}

static __always_inline __u64 p4_sar(__u64 a, __u64 n, __u32 width)
{
	return p4_bits(p4_sext(a, width) >> (n > width - 1 ? width - 1 : n), width);
}

static __always_inline __u64 p4_add_sat_signed(__u64 a, __u64 b, __u32 width)
{
	__s64 sum = p4_sext(a, width) + p4_sext(b, width), hi = (1LL << (width - 1)) - 1, lo = -hi - 1;
	return p4_bits(sum > hi ? hi : sum < lo ? lo : sum, width);
}

static __always_inline __u64 p4_sub_sat_signed(__u64 a, __u64 b, __u32 width)
{
	__s64 diff = p4_sext(a, width) - p4_sext(b, width), hi = (1LL << (width - 1)) - 1, lo = -hi - 1;
	return p4_bits(diff > hi ? hi : diff < lo ? lo : diff, width);
}

/* The VLAN tag a device took out of the frame into metadata (Linux 6.8+, in a copy of the program
 * bound to the device; -EOPNOTSUPP otherwise). */
extern int bpf_xdp_metadata_rx_vlan_tag(const struct xdp_md *ctx, __be16 *vlan_proto,
					__u16 *vlan_tci) __ksym __weak;
enum p4_kind { P4_DROP, P4_FORWARD, P4_UP };
enum p4_reason { P4_NONE, P4_PARSER, P4_PROGRAM, P4_NO_PORT, P4_MISFIT };

struct p4_cells {
	__u64 packets;
	__u64 bytes;
};

struct p4_verdict {
	__u32 kind;
	__u32 reason;
	__u32 queue;
	__u32 n;
	__u32 ports[P4_GROUP_MAX];
	__u32 len;
	__u32 parser_error;
	__u64 timestamp;
};

struct p4_group {
	__u32 n;
	__u32 ports[P4_GROUP_MAX];
};

/* An interface's switch port, and the VLAN id its frames carry up the upcall link (TC). */
struct p4_port {
	__u32 port;
	__u32 tag;
};

/* What the kernel decided, per switch port: frames in (decided here, not sent up), frames out. */
struct p4_port_counts {
	__u64 rx_packets;
	__u64 rx_bytes;
	__u64 tx_packets;
	__u64 tx_bytes;
};

struct p4_value {
	__u32 action;
	__u32 index;
	__u64 args[P4_MAX_ARGS];
};

EF_MAP(p4_verdict, BPF_MAP_TYPE_PERCPU_ARRAY, 4, sizeof(struct p4_verdict), 1);
EF_MAP(p4_groups, BPF_MAP_TYPE_HASH, 4, sizeof(struct p4_group), 256);
EF_MAP(p4_ifindex, BPF_MAP_TYPE_HASH, 4, 4, 256);
EF_MAP(p4_ports, BPF_MAP_TYPE_HASH, 4, sizeof(struct p4_port), 256);
/* [P4_CFG_UPCALL]: the upcall link's ifindex (TC; 0: frames go up into the stack). [P4_CFG_ALL_UP]:
 * not 0 while the tables here are not the control plane's (a write failed): every frame goes up. */
EF_MAP(p4_config, BPF_MAP_TYPE_ARRAY, 4, 8, 4);
/* Per verdict (kind × reason): frames. */
EF_MAP(p4_stats, BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, 16);
EF_MAP(p4_port_counts, BPF_MAP_TYPE_PERCPU_HASH, 4, sizeof(struct p4_port_counts), 256);
/* The lookups every frame makes by port or interface, without hashing for the ports most
 * switches number: a hashed lookup cost a frame some 6 ns on XDP, and a frame made four (its
 * interface, its output's interface, and the two ports' counts). The hashes above stay the
 * truth, for every port. `p4_port_slots`, by ifindex % P4_PORT_SLOTS: ifindex << 32 | tag << 20
 * | port, for the one interface that owns the slot and a port below 2^20, in one word so that a
 * frame reads it whole while the switch writes it; 0 is empty (no interface has index 0).
 * `p4_ifindex_near`, by port below P4_NEAR_PORTS: as `p4_ifindex`, 0 for none.
 * `p4_port_counts_near`: the counts of ports below P4_NEAR_PORTS (the hash holds the others'). */
#define P4_PORT_SLOTS 1024
#define P4_NEAR_PORTS 512
EF_MAP(p4_port_slots, BPF_MAP_TYPE_ARRAY, 4, 8, P4_PORT_SLOTS);
EF_MAP(p4_ifindex_near, BPF_MAP_TYPE_ARRAY, 4, 4, P4_NEAR_PORTS);
EF_MAP(p4_port_counts_near, BPF_MAP_TYPE_PERCPU_ARRAY, 4, sizeof(struct p4_port_counts), P4_NEAR_PORTS);

/* The switch port of interface `ifindex`, copied into `*in` from its slot or the hash; 0 for
 * none. Always `in` otherwise: a pointer the verifier sees as one of two kinds (the run's state
 * or the hash's value) for the rest of the program doubles the states it walks, and a scanned
 * table's loop then went past its million instructions. */
static __always_inline struct p4_port *p4_in_port(__u32 ifindex, struct p4_port *in)
{
	__u32 slot = ifindex % P4_PORT_SLOTS;
	__u64 *s = bpf_map_lookup_elem(&p4_port_slots, &slot);
	if (s) {
		__u64 v = *(volatile __u64 *)s;
		if (ifindex && v >> 32 == ifindex) {
			in->port = v & 0xfffff;
			in->tag = (v >> 20) & 0xfff;
			return in;
		}
	}
	struct p4_port *hashed = bpf_map_lookup_elem(&p4_ports, &ifindex);
	if (!hashed)
		return 0;
	in->port = hashed->port;
	in->tag = hashed->tag;
	return in;
}

/* Keeps a map lookup in its branch: clang would otherwise make two lookups in two maps one call
 * on a map chosen before it, and the verifier inlines the lookup only for a call that knows its
 * map (a hashed one costs a helper call then, an array's too). */
#define p4_own_lookup(v) asm volatile("" : "+r"(v))

/* The interface port `port` sends on, or 0 for none. */
static __always_inline __u32 p4_port_ifindex(__u32 port)
{
	__u32 *x;
	if (port < P4_NEAR_PORTS) {
		x = bpf_map_lookup_elem(&p4_ifindex_near, &port);
		p4_own_lookup(x);
	} else {
		x = bpf_map_lookup_elem(&p4_ifindex, &port);
	}
	return x ? *x : 0;
}

/* XDP sends a frame once: a group's copies are broadcast into a DEVMAP holding its interfaces,
 * one of P4_FANOUTS, which `p4_group_fanout` names (its number + 1) for each group that has one. */
EF_MAP(p4_group_fanout, BPF_MAP_TYPE_HASH, 4, 4, 256);
#define P4_FANOUT(n) EF_MAP(p4_fanout_##n, BPF_MAP_TYPE_DEVMAP, 4, 4, P4_GROUP_MAX)
P4_FANOUT(0);
P4_FANOUT(1);
P4_FANOUT(2);
P4_FANOUT(3);
P4_FANOUT(4);
P4_FANOUT(5);
P4_FANOUT(6);
P4_FANOUT(7);
#define P4_CFG_UPCALL 0
#define P4_CFG_ALL_UP 1
EF_MAP(p4_defaults, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct p4_value), P4_TABLES);

/* `w` bits at bit `bit` of the header that starts at byte `off` of the frame's copy, in network
 * order. `bit` and `w` are constants where it is inlined, so the loops fold away. */
/* After each field a parser extracts: without it clang schedules the byte loads of every field
 * of a header together, and a header of six 64-bit fields spills past the 512-byte stack. */
#define p4_field_read() asm volatile("" ::: "memory")

static __always_inline __u64 p4_get(const __u8 *buf, __u32 off, __u32 bit, __u32 w)
{
	/* One load of the eight bytes from the field's first (the callers keep a field within
	 * them), in network order: byte by byte it was some five instructions a byte. The
	 * buffer has room past P4_BUF for the bytes beyond a field, which the mask drops. */
	if (w == 0)
		return 0;
	__u64 v = bpf_be64_to_cpu(*(const __u64 *)&buf[(off + bit / 8) & (P4_BUF - 1)]);
	v >>= 64 - bit % 8 - w;
	return w >= 64 ? v : v & ((1ULL << w) - 1);
}

static __always_inline void p4_set(__u8 *buf, __u32 off, __u32 bit, __u32 w, __u64 v)
{
	__u32 first = bit / 8, n = (bit % 8 + w + 7) / 8, shift = n * 8 - bit % 8 - w;
	__u64 mask = (w >= 64 ? ~0ULL : ((1ULL << w) - 1)) << shift;
	__u64 old = 0;
#pragma unroll
	for (__u32 i = 0; i < 8; i++)
		if (i < n)
			old = (old << 8) | buf[(off + first + i) & (P4_BUF - 1)];
	old = (old & ~mask) | ((v << shift) & mask);
#pragma unroll
	for (__u32 i = 0; i < 8; i++)
		if (i < n)
			buf[(off + first + i) & (P4_BUF - 1)] = old >> (8 * (n - 1 - i));
}

/* A length the helpers take: masked where the verifier sees it, after the compiler is done
 * (the buffer has room for twice the copy, so the mask never cuts a length). */
static __always_inline void p4_bound(__u64 *n)
{
	__u64 v = *n;
	asm volatile("%[v] &= 511" : [v] "+r"(v));
	*n = v;
}

/* An aggregate (its members are all 8-byte words) zeroed or copied word by word, through a
 * volatile pointer: clang turns a plain loop (or assignment) of a large one into memset or
 * memcpy, which BPF has not. */
#define p4_zero(p)                                                  \
	do {                                                        \
		for (__u32 p4_i = 0; p4_i < sizeof(*(p)) / 8; p4_i++) \
			((volatile __u64 *)(p))[p4_i] = 0;          \
	} while (0)
#define p4_copy(d, s)                                                               \
	do {                                                                        \
		for (__u32 p4_i = 0; p4_i < sizeof(*(d)) / 8; p4_i++)                 \
			((volatile __u64 *)(d))[p4_i] = ((const __u64 *)(s))[p4_i]; \
	} while (0)

/* A stack's index known only when a frame runs, once the caller found it below the stack's
 * size: an opaque copy, so that the compiler computes the element's address only there (the
 * verifier refuses an address computed from an index not yet bounded), and masked where the
 * verifier sees it. */
static __always_inline __u64 p4_index(__u64 i, __u64 mask)
{
	asm volatile("" : "+r"(i));
	return i & mask;
}

/* An AFDX account (the afdx_account extern, frame-based): a frame conforms if the credit covers
 * smax bytes per BAG; the credit grows by smax bytes per BAG up to smax x (BAG + jitter). As the
 * fast path's own accounts (bpf/fp_afdx.h), shared by every CPU without a lock: the account is
 * the one word `empty`, the credit being min(cap, now x smax - empty) in byte x ns, and taking a
 * frame's cost is one compare-and-swap. 0 is a full account. */
static __always_inline __u64 p4_conforms(void *map, __u64 cells, __u64 index, __u64 bag_us, __u64 jitter_us,
					 __u64 smax, __u64 now_ns)
{
	__u32 k = index;
	__u64 *empty;
	if (index >= cells)
		return 0;
	empty = bpf_map_lookup_elem(map, &k);
	if (!empty)
		return 0;
	__u64 bag = bag_us * 1000, cap = smax * (bag + jitter_us * 1000), cost = smax * bag, now = now_ns * smax;
	for (int i = 0; i < 4; i++) {
		__u64 old = *empty;
		__s64 diff = (__s64)(now - old);
		__u64 credit = diff < -(1LL << 62) ? cap : diff < 0 ? 0 : (__u64)diff > cap ? cap : (__u64)diff;
		if (credit < cost)
			return 0;
		if (__sync_val_compare_and_swap(empty, old, now - credit + cost) == old)
			return 1;
	}
	return 0;
}

/* A meter cell: its rates as the control plane set them (zeros: not set, everything green), and
 * its two token buckets, one word each, taken by compare-and-swap as the accounts are. A word
 * holds the instant its bucket was (or would have been) empty, plus P4_BUCKET_OFFSET, so that a
 * zeroed word is a full bucket; tokens are unit x ns, a rate adding `rate` per ns. The software
 * target does the same arithmetic (`p4::run::take`). */
struct p4_meter_rates {
	__u64 cir;
	__u64 cburst;
	__u64 pir;
	__u64 pburst;
};

struct p4_meter_words {
	__u64 committed;
	__u64 peak;
};

#define P4_NS 1000000000ULL
#define P4_BUCKET_OFFSET (1ULL << 62)

static __always_inline int p4_bucket_take(__u64 *word, __u64 now, __u64 rate, __u64 cap, __u64 cost)
{
	for (int i = 0; i < 4; i++) {
		__u64 old = *word;
		__s64 since = (__s64)(now + P4_BUCKET_OFFSET - old);
		__u64 since_empty = since < 0 ? 0 : (__u64)since;
		__u64 tokens = since_empty > cap / rate ? cap : since_empty * rate;
		if (tokens > cap)
			tokens = cap;
		if (tokens < cost)
			return 0;
		if (__sync_val_compare_and_swap(word, old, now + P4_BUCKET_OFFSET - (tokens - cost) / rate) == old)
			return 1;
	}
	return 0;
}

/* RFC 2698, colour-blind: 2 (red) where the peak bucket lacks the units, 1 (yellow) where the
 * committed one does, else 0 (green). */
static __always_inline __u64 p4_meter(void *rates_map, void *words_map, __u64 cells, __u64 index, __u64 units,
				      __u64 now)
{
	__u32 k = index;
	struct p4_meter_rates *m;
	struct p4_meter_words *w;
	if (index >= cells)
		return 0;
	m = bpf_map_lookup_elem(rates_map, &k);
	w = bpf_map_lookup_elem(words_map, &k);
	if (!m || !w || !m->cir || !m->pir)
		return 0;
	__u64 cost = units * P4_NS;
	if (!p4_bucket_take(&w->peak, now, m->pir, m->pburst * P4_NS, cost))
		return 2;
	if (!p4_bucket_take(&w->committed, now, m->cir, m->cburst * P4_NS, cost))
		return 1;
	return 0;
}

static __always_inline void p4_count(void *map, __u64 index, __u64 cells, __u64 len)
{
	__u32 k = index;
	struct p4_cells *c;
	if (index >= cells)
		return;
	c = bpf_map_lookup_elem(map, &k);
	if (c) {
		c->packets += 1;
		c->bytes += len;
	}
}

static __always_inline __u64 p4_reg_read(void *map, __u64 index, __u64 cells)
{
	__u32 k = index;
	__u64 *v;
	if (index >= cells)
		return 0;
	v = bpf_map_lookup_elem(map, &k);
	return v ? *v : 0;
}

static __always_inline void p4_reg_write(void *map, __u64 index, __u64 cells, __u64 value)
{
	__u32 k = index;
	__u64 *v;
	if (index >= cells)
		return;
	v = bpf_map_lookup_elem(map, &k);
	if (v)
		*v = value;
}
