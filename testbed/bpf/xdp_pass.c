// Passes every frame: attached to a test host's veth on kernels before 5.13, where only an XDP
// program puts a veth in NAPI mode, and a frame the switch's XDP redirects into it needs that.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
