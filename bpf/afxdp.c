// The AF_XDP port's program (crates/netio/src/afxdp.rs), on a switch without the kernel fast path:
// every frame the interface receives goes to the AF_XDP socket bound to the queue it arrived on.
// Every receive queue has its socket, up to AFXDP_QUEUES; a queue past that (or whose socket is
// gone) passes its frames on, to the port guard, which drops them. With the XDP fast path its
// program does this for the frames it sends up instead (fp_ctx.h, ctx_up), and this one is not
// loaded.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "maps.h"
#include "afxdp_stamp.h"

/* Receive queue index -> AF_XDP socket; MAX_QUEUES in afxdp.rs. */
#define AFXDP_QUEUES 64
EF_MAP(afxdp_sockets, BPF_MAP_TYPE_XSKMAP, sizeof(__u32), sizeof(__u32), AFXDP_QUEUES);

static __always_inline int to_socket(struct xdp_md *ctx)
{
	afxdp_stamp(ctx);
	return bpf_redirect_map(&afxdp_sockets, ctx->rx_queue_index, XDP_PASS);
}

SEC("xdp")
int afxdp_to_socket(struct xdp_md *ctx)
{
	return to_socket(ctx);
}

/* The same for an interface whose MTU spreads a frame over several buffers (a jumbo-frame port,
 * whose sockets are bound for multi-buffer frames): the kernel attaches only a program that says
 * it takes them, and one that does (5.18+) is refused by older kernels, so it is a program of its
 * own, loaded where it can be. The stamp goes in front of the first buffer, which the socket
 * delivers first. */
SEC("xdp.frags")
int afxdp_to_socket_frags(struct xdp_md *ctx)
{
	return to_socket(ctx);
}

char LICENSE[] SEC("license") = "GPL";
