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
	__u64 elapsed = now > last ? now - last : 0;
	__u64 per_sec = m->per_sec;
	__u64 t = m->tokens;
	if (per_sec && elapsed >= (~0ULL >> 1) / per_sec) {
		/* Idle long enough to fill any bucket (and elapsed x rate would overflow). */
		t = m->capacity;
		m->last_ns = now;
	} else if (per_sec) {
		/* Whole milli-units only, and the clock moves on by the time they took, no more: the
		 * rest of the gap counts towards the next refill, as userspace carries its remainder.
		 * Moving it to `now` at every frame threw that fraction away, and a meter slower than
		 * the frames (in milli-units per second) never refilled. */
		__u64 add = elapsed * per_sec / 1000000000ULL;
		t += add;
		if (t >= m->capacity) {
			t = m->capacity;
			m->last_ns = now;
		} else if (add) {
			m->last_ns = last + (add * 1000000000ULL + per_sec - 1) / per_sec;
		}
	}
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
