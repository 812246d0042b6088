//! The entry point every printed program shares: the frame copied into the run's state, the
//! parser, ingress, the replication of multicast copies through egress, the deparser writing
//! back in place, and the verdict carried out (forward, drop or up, counted per port). The
//! architectures differ in a few places (v1model's parser errors go on to ingress, its drop
//! port is 511, its checksum controls run around ingress and egress).
//!
//! About 300 lines, one concern: the C text of `p4_main` and the program's hooks.

/// The package's blocks as the entry point calls them (their C names' suffixes).
use super::ident;

pub(super) struct Blocks {
    pub ingress: String,
    pub egress: String,
    /// v1model's verify and compute checksum controls.
    pub checks: Vec<String>,
    /// Whether egress may change headers: multicast copies then go up.
    pub egress_writes_headers: bool,
    /// Whether any block may change a header the parser read: if none does, the deparser's
    /// bytes are the frame's own, and the frame is not written (a store costs ~10 ns).
    pub headers_written: bool,
    /// Whether the program reads the time: the clock costs some 25 ns a frame here.
    pub reads_clock: bool,
}

pub(super) fn entry(v1: bool, blocks: &Blocks) -> String {
    let (ingress, egress, checks, egress_writes_headers) =
        (&blocks.ingress, &blocks.egress, &blocks.checks, blocks.egress_writes_headers);
    let (ig, eg) = (ident(ingress), ident(egress));
    // Where v1model and edgeflow.p4 differ: a parser error goes on to ingress; the checksum
    // controls run after the parser and before the deparser; the drop port is 511 and port
    // 0 is a port; egress starts with egress_spec 0, and a replica is instance 5.
    let clock = if !blocks.reads_clock {
        ""
    } else if v1 {
        "\tr->sm.f_timestamp = bpf_ktime_get_ns();\n\tr->sm.f_ingress_global_timestamp = r->sm.f_timestamp / 1000;\n"
    } else {
        "\tr->sm.f_timestamp = bpf_ktime_get_ns();\n"
    };
    let store = if blocks.headers_written { "out > 0" } else { "0" };
    let parse_error = if v1 {
        "vd->parser_error = r->sm.f_parser_error;"
    } else {
        "vd->parser_error = r->sm.f_parser_error;\n\t\treturn p4_finish(ctx, vd, P4_DROP, P4_PARSER, hook, in);"
    };
    let verify = match checks.first() {
        Some(b) => format!(
            "p4_ctl_{}(r);\n\tr->exited = 0;\n\tif (r->misfit)\n\t\treturn p4_finish(ctx, vd, P4_UP, P4_MISFIT, hook, in);\n\t",
            ident(b)
        ),
        None => String::new(),
    };
    let compute = match checks.get(1) {
        Some(b) => format!("r->exited = 0;\n\tp4_ctl_{}(r);\n\t", ident(b)),
        None => String::new(),
    };
    let ingress_drop = if v1 { "!r->sm.f_mcast_grp && r->sm.f_egress_spec == 511" } else { "r->sm.f_drop" };
    let single = if v1 {
        "single.n = 1;\n\t\tsingle.ports[0] = r->sm.f_egress_spec;"
    } else {
        "if (!r->sm.f_egress_port)\n\t\t\treturn p4_finish(ctx, vd, P4_DROP, P4_NO_PORT, hook, in);\n\t\tsingle.n = 1;\n\t\tsingle.ports[0] = r->sm.f_egress_port;"
    };
    let egress_start = if v1 { "r->sm.f_egress_spec = 0;\n\t\tr->sm.f_instance_type = grp ? 5 : 0;\n\t\t" } else { "" };
    let egress_drop = if v1 { "r->sm.f_egress_spec == 511" } else { "r->sm.f_drop" };
    format!(
        r#"static __always_inline __u32 p4_pkt_len(void *ctx, const enum p4_hook hook)
{{
	if (hook == P4_TC)
		return ((struct __sk_buff *)ctx)->len;
	return ((struct xdp_md *)ctx)->data_end - ((struct xdp_md *)ctx)->data;
}}

static __always_inline void p4_port_count(__u32 port, __u32 len, int tx)
{{
	struct p4_port_counts *c;
	if (port < P4_NEAR_PORTS) {{
		c = bpf_map_lookup_elem(&p4_port_counts_near, &port);
		p4_own_lookup(c);
	}} else {{
		c = bpf_map_lookup_elem(&p4_port_counts, &port);
	}}
	if (!c)
		return;
	if (tx) {{
		c->tx_packets++;
		c->tx_bytes += len;
	}} else {{
		c->rx_packets++;
		c->rx_bytes += len;
	}}
}}

/* Records the verdict and carries it out, except a forward (the caller sends). Up is XDP's pass
 * to the port's socket, or TC's redirect to the upcall link tagged with the port's tag. */
static __always_inline int p4_finish(void *ctx, struct p4_verdict *vd, __u32 kind, __u32 reason,
				     const enum p4_hook hook, const struct p4_port *in)
{{
	vd->kind = kind;
	vd->reason = reason;
	__u32 at = kind * 5 + reason;
	__u64 *n = bpf_map_lookup_elem(&p4_stats, &at);
	if (n)
		*n += 1;
	if (kind == P4_DROP) {{
		if (in)
			p4_port_count(in->port, vd->len, 0);
		return hook == P4_TC ? TC_ACT_SHOT : XDP_DROP;
	}}
	if (kind == P4_FORWARD)
		return 0;
	if (hook == P4_XDP)
		return XDP_PASS;
	__u32 cfg = P4_CFG_UPCALL;
	__u64 *up = bpf_map_lookup_elem(&p4_config, &cfg);
	if (!up || !*up || !in)
		return TC_ACT_OK;
	if (bpf_skb_vlan_push(ctx, bpf_htons(0x8100), in->tag & 0xfff))
		return TC_ACT_SHOT;
	return bpf_redirect(*up, 0);
}}

static __always_inline int p4_main(void *ctx, const enum p4_hook hook)
{{
	__u32 zero = 0;
	struct p4_run *r = bpf_map_lookup_elem(&p4_scratch, &zero);
	struct p4_verdict *vd = bpf_map_lookup_elem(&p4_verdict, &zero);
	if (!r || !vd)
		return hook == P4_TC ? TC_ACT_OK : XDP_PASS;
	/* What a frame starts with is zero; the copies egress starts from are written first. */
	for (__u32 i = 0; i < __builtin_offsetof(struct p4_run, saved_meta) / 8; i++)
		((volatile __u64 *)r)[i] = 0;
	vd->kind = P4_UP;
	vd->reason = P4_NONE;
	vd->n = 0;
	vd->queue = 0;
	__u32 len = p4_pkt_len(ctx, hook);
	vd->len = len;
	__u32 ifindex = hook == P4_TC ? ((struct __sk_buff *)ctx)->ingress_ifindex : ((struct xdp_md *)ctx)->ingress_ifindex;
	struct p4_port *in = p4_in_port(ifindex, &r->in_port);
	__u32 all_up = P4_CFG_ALL_UP;
	__u64 *stale = bpf_map_lookup_elem(&p4_config, &all_up);
	if (!in || (stale && *stale))
		return p4_finish(ctx, vd, P4_UP, P4_MISFIT, hook, in);
	/* A VLAN tag the kernel keeps beside the frame is not in the bytes the parser reads. */
	if (hook == P4_TC && ((struct __sk_buff *)ctx)->vlan_present)
		return p4_finish(ctx, vd, P4_UP, P4_MISFIT, hook, in);
	if (hook == P4_XDP) {{
		__be16 vlan_proto;
		__u16 vlan_tci;
		if (bpf_xdp_metadata_rx_vlan_tag(ctx, &vlan_proto, &vlan_tci) == 0)
			return p4_finish(ctx, vd, P4_UP, P4_MISFIT, hook, in);
	}}
	__u64 n = len < P4_BUF ? len : P4_BUF;
	p4_bound(&n);
	if (n < 1)
		return p4_finish(ctx, vd, P4_DROP, P4_PARSER, hook, in);
	if (hook == P4_TC) {{
		if (bpf_skb_load_bytes(ctx, 0, r->buf, n))
			return p4_finish(ctx, vd, P4_UP, P4_MISFIT, hook, in);
	}} else {{
		if (bpf_xdp_load_bytes(ctx, 0, r->buf, n))
			return p4_finish(ctx, vd, P4_UP, P4_MISFIT, hook, in);
	}}
	r->len = n;
	r->sm.f_ingress_port = in->port;
	r->sm.f_packet_length = len;
{clock}	vd->timestamp = r->sm.f_timestamp;
	if (p4_parse(r) < 0) {{
		if (r->misfit)
			return p4_finish(ctx, vd, P4_UP, P4_MISFIT, hook, in);
		{parse_error}
	}}
	{verify}p4_ctl_{ig}(r);
	r->exited = 0;
	/* A digest (or anything else ingress met that the kernel cannot finish) goes up now,
	 * before a drop could lose it: userspace runs the frame again and sends the digest. */
	if (r->misfit)
		return p4_finish(ctx, vd, P4_UP, P4_MISFIT, hook, in);
	if ({ingress_drop})
		return p4_finish(ctx, vd, P4_DROP, P4_PROGRAM, hook, in);
	struct p4_group single = {{}};
	struct p4_group *group = &single;
	__u32 grp = r->sm.f_mcast_grp, fanout = 0;
	if (grp) {{
		group = bpf_map_lookup_elem(&p4_groups, &grp);
		if (!group)
			return p4_finish(ctx, vd, P4_DROP, P4_PROGRAM, hook, in);
		/* More ports than a verdict holds: userspace sends them all, never the first few. */
		if (group->n > P4_GROUP_MAX)
			return p4_finish(ctx, vd, P4_UP, P4_MISFIT, hook, in);
		if (group->n > 1 && {multi_up})
			return p4_finish(ctx, vd, P4_UP, P4_MISFIT, hook, in);
		if (group->n > 1 && hook == P4_XDP) {{
			__u32 *f = bpf_map_lookup_elem(&p4_group_fanout, &grp);
			if (!f)
				return p4_finish(ctx, vd, P4_UP, P4_MISFIT, hook, in);
			fanout = *f;
		}}
	}} else {{
		{single}
	}}
	/* Egress per copy, on the metadata as ingress left it (the headers stay: see above); a
	 * single copy needs nothing kept for another. */
	if (group->n > 1) {{
		for (__u32 i = 0; i < sizeof(r->sm) / 8; i++)
			((volatile __u64 *)&r->saved_sm)[i] = ((__u64 *)&r->sm)[i];
		for (__u32 i = 0; i < sizeof(r->meta) / 8; i++)
			((volatile __u64 *)&r->saved_meta)[i] = ((__u64 *)&r->meta)[i];
	}}
	__u32 copies = 0, queue = 0;
	for (__u32 c = 0; c < P4_GROUP_MAX; c++) {{
		if (c >= group->n)
			break;
		if (c > 0) {{
			for (__u32 i = 0; i < sizeof(r->sm) / 8; i++)
				((volatile __u64 *)&r->sm)[i] = ((__u64 *)&r->saved_sm)[i];
			for (__u32 i = 0; i < sizeof(r->meta) / 8; i++)
				((volatile __u64 *)&r->meta)[i] = ((__u64 *)&r->saved_meta)[i];
		}}
		r->sm.f_egress_port = group->ports[c];
		{egress_start}r->exited = 0;
		p4_ctl_{eg}(r);
		/* What egress met that the kernel cannot finish (a header past a stack's end made
		 * valid) goes up, before a drop could decide it. */
		if (r->misfit)
			return p4_finish(ctx, vd, P4_UP, P4_MISFIT, hook, in);
		if ({egress_drop}) {{
			/* In the scratch map, not a variable: the verifier then keeps no state per value. */
			if (group->ports[c] != in->port)
				r->others_dropped = 1;
			continue;
		}}
		if (copies < P4_GROUP_MAX)
			vd->ports[copies & (P4_GROUP_MAX - 1)] = group->ports[c];
		copies++;
		queue = r->sm.f_priority;
	}}
	vd->n = copies;
	vd->queue = queue;
	if (!copies)
		return p4_finish(ctx, vd, P4_DROP, P4_PROGRAM, hook, in);
	/* The broadcast sends to the whole group, or to all of it but the interface the frame came
	 * in on (a flood): egress must have kept every other copy. */
	__u64 flags = BPF_F_BROADCAST;
	if (fanout && r->others_dropped)
		return p4_finish(ctx, vd, P4_UP, P4_MISFIT, hook, in);
	if (fanout && copies != group->n)
		flags |= BPF_F_EXCLUDE_INGRESS;
	/* Every copy needs an interface the kernel sends on; else userspace sends them. Looked up
	 * before the frame is rewritten, so that one sent up goes as it came. */
	__u32 ifx[P4_GROUP_MAX] = {{}};
	for (__u32 c = 0; c < P4_GROUP_MAX; c++) {{
		if (c >= copies)
			break;
		__u32 x = p4_port_ifindex(vd->ports[c]);
		if (!x)
			return p4_finish(ctx, vd, P4_UP, P4_NONE, hook, in);
		ifx[c] = x;
	}}
	{compute}p4_deparse(r);
	if (r->misfit || r->emitted != r->off)
		return p4_finish(ctx, vd, P4_UP, P4_MISFIT, hook, in);
	__u64 out = r->emitted;
	p4_bound(&out);
	if ({store}) {{
		if (hook == P4_TC) {{
			if (bpf_skb_store_bytes(ctx, 0, r->buf, out, BPF_F_RECOMPUTE_CSUM))
				return p4_finish(ctx, vd, P4_UP, P4_MISFIT, hook, in);
		}} else {{
			if (bpf_xdp_store_bytes(ctx, 0, r->buf, out))
				return p4_finish(ctx, vd, P4_UP, P4_MISFIT, hook, in);
		}}
	}}
	p4_finish(ctx, vd, P4_FORWARD, P4_NONE, hook, in);
	p4_port_count(in->port, len, 0);
	for (__u32 c = 0; c < P4_GROUP_MAX; c++) {{
		if (c >= copies)
			break;
		p4_port_count(vd->ports[c], len, 1);
	}}
	if (hook == P4_XDP) {{
		switch (fanout) {{
		case 0:
			return bpf_redirect(ifx[0], 0);
		case 1:
			return bpf_redirect_map(&p4_fanout_0, 0, flags);
		case 2:
			return bpf_redirect_map(&p4_fanout_1, 0, flags);
		case 3:
			return bpf_redirect_map(&p4_fanout_2, 0, flags);
		case 4:
			return bpf_redirect_map(&p4_fanout_3, 0, flags);
		case 5:
			return bpf_redirect_map(&p4_fanout_4, 0, flags);
		case 6:
			return bpf_redirect_map(&p4_fanout_5, 0, flags);
		case 7:
			return bpf_redirect_map(&p4_fanout_6, 0, flags);
		default:
			return bpf_redirect_map(&p4_fanout_7, 0, flags);
		}}
	}}
	for (__u32 c = 0; c + 1 < P4_GROUP_MAX; c++) {{
		if (c + 1 >= copies)
			break;
		bpf_clone_redirect(ctx, ifx[c], 0);
	}}
	return bpf_redirect(ifx[(copies - 1) & (P4_GROUP_MAX - 1)], 0);
}}

SEC("tc")
int p4_tc(struct __sk_buff *skb)
{{
	return p4_main(skb, P4_TC);
}}

SEC("xdp")
int p4_xdp(struct xdp_md *ctx)
{{
	return p4_main(ctx, P4_XDP);
}}

char LICENSE[] SEC("license") = "GPL";
"#,
        multi_up = egress_writes_headers as u8,
    )
}
