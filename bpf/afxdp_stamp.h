/* What an XDP program writes in front of a frame it redirects into one of the switch's AF_XDP
 * sockets, shared by the AF_XDP port's own program (afxdp.c) and the XDP fast path's way up
 * (fp_ctx.h), so that the switch reads either the same way (crates/netio/src/afxdp.rs). */
#ifndef EDGEFLOW_AFXDP_STAMP_H
#define EDGEFLOW_AFXDP_STAMP_H
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* The outer VLAN tag a device took out of the frame into metadata (Linux 6.8+, device-bound
 * programs only; the loader makes the shared copy's call fail). A veth sender's stack hands the
 * tag over that way: without it the switch would see a tagged frame as untagged. */
extern int bpf_xdp_metadata_rx_vlan_tag(const struct xdp_md *ctx, __be16 *vlan_proto,
					__u16 *vlan_tci) __ksym __weak;

/* In front of each frame, in the XDP metadata area, which AF_XDP copies along with the frame:
 * when it arrived (CLOCK_MONOTONIC), so that policing and meters in userspace see the gaps between
 * frames as they were, not as the forwarding thread was scheduled; and the tag the device kept
 * in metadata, if any. The magic tells a stamp from whatever a driver without metadata left
 * there. Must match crates/netio/src/afxdp.rs. */
#define AFXDP_STAMP_MAGIC 0x6166786470747331ULL
struct afxdp_stamp {
	__u64 magic;
	__u64 rx_ns;
	__be16 vlan_proto;
	__u16 vlan_tci;
	__u32 vlan_valid;
};

/* Writes the stamp in front of the frame; a driver without room for metadata gets none (the
 * switch then takes the frame's arrival to be when it read it). */
static __always_inline void afxdp_stamp(struct xdp_md *ctx)
{
	__be16 proto = 0;
	__u16 tci = 0;
	__u32 tagged = bpf_xdp_metadata_rx_vlan_tag(ctx, &proto, &tci) == 0;
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct afxdp_stamp)) != 0)
		return;
	struct afxdp_stamp *s = (void *)(long)ctx->data_meta;
	if ((void *)(s + 1) > (void *)(long)ctx->data)
		return;
	s->magic = AFXDP_STAMP_MAGIC;
	s->rx_ns = bpf_ktime_get_ns();
	s->vlan_proto = proto;
	s->vlan_tci = tci;
	s->vlan_valid = tagged;
}

#endif
