/* Parsing a frame into the 136-byte flow key, exactly as crates/packet/src/parse.rs does. */
#ifndef EDGEFLOW_FP_PARSE_H
#define EDGEFLOW_FP_PARSE_H
#include "fp_state.h"

/* Copies the first `len` bytes of the frame (at most PARSE_BYTES - 1, and 14 at least: the
 * caller checked that they are in the packet) from the packet into s->buf, a word at a time:
 * cheaper than a load-bytes helper call. Whole words while the packet has them, up to 15; then,
 * when `len` ends inside a word, the 8 bytes that end at `len` once (they overlap bytes already
 * copied, with the same values): one copy where a byte at a time took up to seven. The caller
 * takes the length from the packet, not from here: a count known exactly on each of the
 * verifier's paths would multiply the paths it walks through the parser. */
static __always_inline void copy_head(struct scratch *s, const __u8 *data, const __u8 *end, __u32 len)
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
	if (n >= len)
		return;
	__u32 at = (len - 8) & (PARSE_BYTES - 1);
	if (at > PARSE_BYTES - 9 || data + at + 8 > end)
		return;
	*(__u64 *)(s->buf + at) = *(const __u64 *)(data + at);
}

/* The frame's length as far as the parser reads it: at most PARSE_BYTES - 1, in a form the
 * verifier can bound. */
static __always_inline __u32 head_len(__u32 len)
{
	if (len > PARSE_BYTES - 1)
		len = PARSE_BYTES - 1;
	return len & (PARSE_BYTES - 1);
}

#define IN(s, off, n) ((off) + (n) <= (s)->len && (off) + (n) <= PARSE_BYTES)
#define B(s, off) ((s)->buf[(off) & (PARSE_BYTES - 1)])
/* 2, 4 or 8 bytes of the head at `off` as they sit in memory, in one load (the bound is the
 * verifier's: a read may run past the head into the rest of the scratch area, never past its end;
 * the caller's IN() says which of the bytes are the frame's). Pointer arithmetic, not &buf[i]:
 * clang takes an element of a byte array to be byte-aligned and splits the load into bytes. */
#define LOAD64(s, off) (*(const __u64 *)((s)->buf + ((off) & (PARSE_BYTES - 1))))
/* The head from byte `off` on, and reads at constant offsets from it: one instruction each,
 * where B(s, off + k) computes its bounded offset again every time. */
#define HEAD_AT(s, off) ((const __u8 *)(s)->buf + ((off) & (PARSE_BYTES - 1)))
#define RD16(p, k) (*(const __u16 *)((p) + (k)))
#define RD32(p, k) (*(const __u32 *)((p) + (k)))
#define RD64(p, k) (*(const __u64 *)((p) + (k)))

/* The key is built a word at a time in registers, each word stored once, so that its bytes are
 * where userspace's key (crates/packet/src/key.rs) has them whatever the byte order. A value
 * "as in memory" (a load of the frame's bytes, or bpf_htons/bpf_htonl of a number) of `size`
 * bytes, placed at byte `at` of a word: */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define PLACE(x, size, at) ((__u64)(x) << (8 * (at)))
/* A word read from memory: its bytes moved `n` places toward its start or its end; its first n
 * bytes alone. */
#define SKIP(x, n) ((__u64)(x) >> (8 * (n)))
#define LATER(x, n) ((__u64)(x) << (8 * (n)))
#define FIRST(x, n) ((__u64)(x) & (~0ULL >> (64 - 8 * (n))))
#else
#define PLACE(x, size, at) ((__u64)(x) << (8 * (8 - (size) - (at))))
#define SKIP(x, n) ((__u64)(x) << (8 * (n)))
#define LATER(x, n) ((__u64)(x) >> (8 * (n)))
#define FIRST(x, n) ((__u64)(x) & (~0ULL << (64 - 8 * (n))))
#endif
#define BYTE_AT(v, at) PLACE((__u8)(v), 1, at)
#define BE16_AT(v, at) PLACE(bpf_htons(v), 2, at)
#define BE32_AT(v, at) PLACE(bpf_htonl(v), 4, at)

/* Word w of the key, and words from..to zero (constants: the stores unroll). */
#define KW(s, at) ((s)->key.w[at])
static __always_inline void zero_words(struct scratch *s, const int from, const int to)
{
#pragma unroll
	for (int w = from; w <= to; w++)
		KW(s, w) = 0;
}

/* Below this the type/length field is an 802.3 length (packet::parse::ethertype::MIN). */
#define ETH_TYPE_MIN 0x0600
/* The eth_type of an 802.3 frame that is not LLC/SNAP (ethertype::NOT_ETH_TYPE). */
#define ETH_TYPE_NOT_ETH_TYPE 0x05ff

/* 802.1Q and 802.1ad: the tags the switch reads (packet::parse::is_vlan_tpid in userspace). */
static __always_inline int is_vlan_tpid(__u16 et)
{
	return et == 0x8100 || et == 0x88a8;
}

/* The transport words of an IP frame (key bytes 48..63: w6 holds the IPv4 destination, or 0,
 * in `w6`) from the header at s->l4. 0, or -1 when userspace must decide. */
static __always_inline int parse_transport(struct scratch *s, __u64 w6)
{
	__u32 l4 = s->l4;
	__u8 p = s->proto;
	__u32 need = p == 6 ? 20 : p == 17 ? 8 : p == 132 ? 12 : (p == 1 || p == 58) ? 4 : 0;
	__u64 w7 = 0;
	const __u8 *tp = HEAD_AT(s, l4);
	if (need) {
		if (!IN(s, l4, need))
			return -1; /* truncated, or headers beyond what was copied: userspace decides */
		if (p == 6 || p == 17 || p == 132) {
			w6 |= PLACE(RD32(tp, 0), 4, 4);
		} else {
			__u8 type = tp[0];
			if (p == 58 && (type == 135 || type == 136))
				return -1; /* neighbour discovery: its options are parsed in userspace */
			w7 = PLACE(RD16(tp, 0), 2, 0); /* type and code */
		}
	}
	KW(s, 6) = w6;
	KW(s, 7) = w7;
	return 0;
}

/* Parses s->buf (s->len bytes) into s->key. Returns 0, or -1 when userspace must decide (the key
 * is then left as it is). */
static __always_inline int parse(struct scratch *s, __u32 port, int hw_present, __u16 hw_tci)
{
	__u32 off;
	__u16 et;
	__u16 vid = 0;
	__u8 pcp = 0;
	int i;

	if (s->len < 14)
		return -1;
	s->hw_vlan = hw_present;
	s->data_tags = 0;
	if (hw_present) {
		vid = (hw_tci & 0x0fff) | 0x1000;
		pcp = hw_tci >> 13;
	}
	off = 12;
	et = (s->buf[12] << 8) | s->buf[13];
#pragma unroll
	for (i = 0; i < 2; i++) {
		if (!is_vlan_tpid(et))
			break;
		if (!IN(s, off + 4, 2))
			return -1;
		if (!hw_present && s->data_tags == 0) {
			__u16 tci = (B(s, off + 2) << 8) | B(s, off + 3);
			vid = (tci & 0x0fff) | 0x1000;
			pcp = tci >> 13;
		}
		s->data_tags++;
		off += 4;
		et = (B(s, off) << 8) | B(s, off + 1);
	}
	if (is_vlan_tpid(et))
		return -1; /* a third tag: rare, leave it to userspace */
	if (et < ETH_TYPE_MIN) {
		/* An 802.3 frame. LLC/SNAP with OUI 0 carries an ethertype (and IP behind it) that
		 * userspace parses and rewrites behind the SNAP header: it decides those frames. Any
		 * other LLC payload is eth_type 0x05ff with nothing above it, as in parse.rs. */
		__u32 llc = off + 2;
		if (IN(s, llc, 8) && B(s, llc) == 0xaa && B(s, llc + 1) == 0xaa && B(s, llc + 2) == 0x03 &&
		    B(s, llc + 3) == 0 && B(s, llc + 4) == 0 && B(s, llc + 5) == 0 &&
		    ((B(s, llc + 6) << 8) | B(s, llc + 7)) >= ETH_TYPE_MIN)
			return -1;
		et = ETH_TYPE_NOT_ETH_TYPE;
	}
	/* Bytes 0..7: in_port and in_phy_port; 8..23: metadata and tunnel id, 0 here; 24..31: eth_dst
	 * (the frame's first 6 bytes), eth_type; 32..39: eth_src (bytes 6..11), vlan_vid. */
	KW(s, 0) = BE32_AT(port, 0) | BE32_AT(port, 4);
	KW(s, 1) = 0;
	KW(s, 2) = 0;
	KW(s, 3) = FIRST(LOAD64(s, 0), 6) | BE16_AT(et, 6);
	KW(s, 4) = FIRST(SKIP(LOAD64(s, 4), 2), 6) | BE16_AT(vid, 6);
	/* 40..47: vlan_pcp, ip_dscp, ip_ecn, ip_proto, ipv4_src. */
	__u64 w5 = BYTE_AT(pcp, 0);
	s->eth_type = et;
	__u32 l3 = off + 2;
	const __u8 *ip = HEAD_AT(s, l3);
	s->l3 = l3;
	s->l4 = 0;
	s->proto = 0;
	s->later_fragment = 0;

	if (et == 0x0800) {
		if (!IN(s, l3, 20))
			return -1;
		__u8 vihl = ip[0];
		__u32 ihl = (vihl & 0xf) * 4;
		if ((vihl >> 4) != 4 || ihl < 20 || !IN(s, l3, ihl))
			return -1;
		__u8 tos = ip[1];
		s->proto = ip[9];
		s->ttl = ip[8];
		KW(s, 5) = w5 | BYTE_AT(tos >> 2, 1) | BYTE_AT(tos & 3, 2) | BYTE_AT(s->proto, 3) |
			   PLACE(RD32(ip, 12), 4, 4);
		zero_words(s, 8, KEY_WORDS - 1);
		__u64 w6 = PLACE(RD32(ip, 16), 4, 0); /* ipv4_dst */
		__u16 frag = (ip[6] << 8) | ip[7];
		if (frag & 0x1fff) {
			s->later_fragment = 1;
			KW(s, 6) = w6;
			KW(s, 7) = 0;
			return 0;
		}
		s->l4 = l3 + ihl;
		return parse_transport(s, w6);
	} else if (et == 0x86dd) {
		if (!IN(s, l3, 40))
			return -1;
		__u8 nh = ip[6];
		/* Extension headers (and "no next header") are walked in userspace. */
		if (nh == 0 || nh == 43 || nh == 44 || nh == 50 || nh == 51 || nh == 59 || nh == 60)
			return -1;
		__u8 tc = ((ip[0] & 0xf) << 4) | (ip[1] >> 4);
		s->proto = nh;
		s->ttl = ip[7];
		s->l4 = l3 + 40;
		KW(s, 5) = w5 | BYTE_AT(tc >> 2, 1) | BYTE_AT(tc & 3, 2) | BYTE_AT(nh, 3);
		/* 64..71: MPLS and the extension-header flags, 0; ipv6_flabel (20 bits). */
		KW(s, 8) = PLACE(RD32(ip, 0) & bpf_htonl(0x000fffff), 4, 4);
		KW(s, 9) = 0;
		KW(s, 10) = 0;
		KW(s, 11) = RD64(ip, 8);
		KW(s, 12) = RD64(ip, 16);
		KW(s, 13) = RD64(ip, 24);
		KW(s, 14) = RD64(ip, 32);
		KW(s, 15) = 0;
		KW(s, 16) = 0;
		return parse_transport(s, 0);
	}
	/* Neither IP version: words 6 and up hold only what ARP, MPLS or PBB put there. */
	__u64 w6 = 0, w7 = 0, w8 = 0, w9 = 0, w10 = 0;
	if (et == 0x0806) {
		if (IN(s, l3, 28) && ip[0] == 0 && ip[1] == 1 && ip[2] == 8 && ip[3] == 0 &&
		    ip[4] == 6 && ip[5] == 4) {
			w5 |= PLACE(RD32(ip, 14), 4, 4);		/* spa as ipv4_src */
			w6 = PLACE(RD32(ip, 24), 4, 0);		/* tpa as ipv4_dst */
			w7 = PLACE(RD16(ip, 6), 2, 2);		/* arp_op at 58 */
			w9 = PLACE(RD32(ip, 8), 4, 4);		/* arp_sha 76..79 */
			w10 = PLACE(RD16(ip, 12), 2, 0) |	/* arp_sha 80..81 */
			      LATER(FIRST(RD64(ip, 18), 6), 2);	/* arp_tha 82..87 */
		}
	} else if (et == 0x8847 || et == 0x8848) {
		if (IN(s, l3, 4)) {
			__u32 lse = (ip[0] << 24) | (ip[1] << 16) | (ip[2] << 8) | ip[3];
			w7 = BE32_AT(lse >> 12, 4);					/* mpls_label */
			w8 = BYTE_AT((lse >> 9) & 7, 0) | BYTE_AT((lse >> 8) & 1, 1);	/* mpls_tc, mpls_bos */
		}
	} else if (et == 0x88e7) {
		if (IN(s, l3, 4))
			w9 = BYTE_AT(ip[1], 0) | BYTE_AT(ip[2], 1) | BYTE_AT(ip[3], 2); /* pbb_isid */
	}
	KW(s, 5) = w5;
	KW(s, 6) = w6;
	KW(s, 7) = w7;
	KW(s, 8) = w8;
	KW(s, 9) = w9;
	KW(s, 10) = w10;
	zero_words(s, 11, KEY_WORDS - 1);
	return 0;
}

#endif
