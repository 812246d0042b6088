// Attached at the ingress of every switch port (TCX): frames have already been handed to the
// switch's packet socket by then, so nothing is lost for forwarding; what stops here is the host's
// own stack, which has no business routing or answering traffic of a switch port (a bridge port is
// the same). It also saves the kernel a route lookup per frame.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

SEC("tc")
int port_guard(struct __sk_buff *skb)
{
	return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "GPL";
