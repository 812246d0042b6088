// The AF_XDP port's program (crates/netio/src/afxdp.rs): every frame the interface receives goes
// to the AF_XDP socket bound to the queue it arrived on. A queue with no socket (a NIC with more
// queues than the port binds) passes its frames on, to the port guard, which drops them.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "maps.h"

/* Receive queue index -> AF_XDP socket. The loader sizes it to the interface's queues. */
EF_MAP(afxdp_sockets, BPF_MAP_TYPE_XSKMAP, sizeof(__u32), sizeof(__u32), 1);

SEC("xdp")
int afxdp_to_socket(struct xdp_md *ctx)
{
	return bpf_redirect_map(&afxdp_sockets, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "GPL";
