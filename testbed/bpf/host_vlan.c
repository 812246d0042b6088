// A VLAN-tagged host interface for test hosts, where the kernel has no 802.1Q module: on egress,
// tag every frame with VID; on ingress, untag frames of VID (others are dropped, as a VLAN
// interface would not see them). Built per VID: clang -O2 -target bpf -DVID=100 -c host_vlan.c
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#ifndef VID
#error "build with -DVID=<vlan id>"
#endif

SEC("tc/egress")
int tag(struct __sk_buff *skb)
{
	if (bpf_skb_vlan_push(skb, bpf_htons(ETH_P_8021Q), VID) < 0)
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

SEC("tc/ingress")
int untag(struct __sk_buff *skb)
{
	// The stack has already moved an 802.1Q tag out of the frame into skb metadata.
	if (!skb->vlan_present)
		return TC_ACT_SHOT;
	if ((skb->vlan_tci & 0x0fff) != VID)
		return TC_ACT_SHOT;
	if (bpf_skb_vlan_pop(skb) < 0)
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
