/* Parsing a frame into the 136-byte flow key, exactly as crates/packet/src/parse.rs does. */
#ifndef EDGEFLOW_FP_PARSE_H
#define EDGEFLOW_FP_PARSE_H
#include "fp_state.h"

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

/* Below this the type/length field is an 802.3 length (packet::parse::ethertype::MIN). */
#define ETH_TYPE_MIN 0x0600
/* The eth_type of an 802.3 frame that is not LLC/SNAP (ethertype::NOT_ETH_TYPE). */
#define ETH_TYPE_NOT_ETH_TYPE 0x05ff

/* 802.1Q and 802.1ad: the tags the switch reads (packet::parse::is_vlan_tpid in userspace). */
static __always_inline int is_vlan_tpid(__u16 et)
{
	return et == 0x8100 || et == 0x88a8;
}

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
		if (!is_vlan_tpid(et))
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

#endif
