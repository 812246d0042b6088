/* Drop-band meters as token buckets in milli-units (as crates/pipeline/src/meter.rs). */
#ifndef EDGEFLOW_FP_METER_H
#define EDGEFLOW_FP_METER_H
#include "fp_state.h"

/* Charges a meter; false when its drop band applies. */
static __always_inline int meter_pass(__u32 slot, __u32 bytes)
{
	struct meter *m = bpf_map_lookup_elem(&ef_meters, &slot);
	if (!m)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 last = m->last_ns;
	m->last_ns = now;
	__u64 add = now > last ? (now - last) * m->per_sec / 1000000000ULL : 0;
	__u64 t = m->tokens + add;
	if (t > m->capacity)
		t = m->capacity;
	__u64 cost = m->kbps ? (__u64)bytes * 8 * 1000 : 1000;
	__sync_fetch_and_add(&m->packets, 1);
	__sync_fetch_and_add(&m->bytes, bytes);
	if (t >= cost) {
		m->tokens = t - cost;
		return 1;
	}
	m->tokens = t;
	__sync_fetch_and_add(&m->dropped_packets, 1);
	__sync_fetch_and_add(&m->dropped_bytes, bytes);
	return 0;
}

#endif
