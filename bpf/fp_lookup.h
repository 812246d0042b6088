/* Finding a frame's megaflow: each live mask in the order userspace keeps, a 64-bit hash of the
 * words the mask keeps (seeded by userspace at start), its slots probed in ef_flow_slots, and the
 * entry a slot names confirmed against the masked key it holds (fastpath.h). No helper call:
 * array lookups are inlined. */
#ifndef EDGEFLOW_FP_LOOKUP_H
#define EDGEFLOW_FP_LOOKUP_H
#include "fp_state.h"

/* The live entry for s->key under mask slot `mask_id` (mask `m`) whose key hashes to `h`, if any;
 * its index in *at. The probe loop only finds the first slot of the window with h's tag; the
 * entry it names is confirmed once, after the loop. Userspace never puts two slots with one tag in
 * one window (the second key stays in userspace), so the first is the only one there can be; a
 * confirm inside the loop made the verifier walk it, and what follows a hit, once per probe. */
static __always_inline struct entry *probe(struct scratch *s, const struct mask_slot *m, __u32 mask_id,
					   __u64 h, __u64 gen, __u64 shift, __u32 *at)
{
	__u32 tag = h >> 32;
	__u32 home = (h * HASH_MUL) >> shift, slot_mask = ~0ULL >> shift;
	__u32 found = 0;
	for (__u32 p = 0; p < FLOW_PROBES; p++) {
		__u32 pos = (home + p) & slot_mask;
		__u64 *slot = bpf_map_lookup_elem(&ef_flow_slots, &pos);
		if (!slot || !*slot)
			break;
		__u64 v = *slot;
		if ((__u32)(v >> 32) == tag && (__u32)v) {
			found = (__u32)v;
			break;
		}
	}
	if (!found)
		return 0;
	__u32 idx = found - 1;
	struct entry *e = bpf_map_lookup_elem(&ef_megaflows, &idx);
	if (!e || e->generation != gen || e->mask_id != mask_id)
		return 0;
	/* Words the mask drops are zero on both sides: only those it keeps are compared. */
	__u32 n = m->n_kept;
	__u64 diff = 0;
	for (__u32 i = 0; i < KEY_WORDS; i++) {
		if (i >= n)
			break;
		__u32 w = m->kept[i];
		if (w >= KEY_WORDS)
			return 0;
		diff |= (s->key.w[w] & m->m.w[w]) ^ e->key.w[w];
	}
	if (diff)
		return 0;
	*at = idx;
	return e;
}

/* The entry for s->key, if a live one exists; its index in *at. */
static __always_inline struct entry *lookup(struct scratch *s, __u32 *at)
{
	__u64 gen = config(CFG_GENERATION);
	__u32 zero = 0;
	struct mask_order *order = bpf_map_lookup_elem(&ef_mask_order, &zero);
	if (!order)
		return 0;
	__u32 i;
	for (i = 0; i < MAX_MASKS; i++) {
		__u32 idx = order->slot[i];
		if (idx >= MAX_MASKS)
			break;
		struct mask_slot *m = bpf_map_lookup_elem(&ef_masks, &idx);
		if (!m || m->generation != gen)
			continue;
		__u32 n = m->n_kept;
		__u64 h = m->seed;
		for (__u32 k = 0; k < KEY_WORDS; k++) {
			if (k >= n)
				break;
			__u32 w = m->kept[k];
			if (w >= KEY_WORDS)
				break; /* never written so: the hash then finds nothing */
			h = (h ^ (s->key.w[w] & m->m.w[w])) * HASH_MUL;
			h ^= h >> 32;
		}
		struct entry *e = probe(s, m, idx, h, gen, m->slot_shift, at);
		if (e)
			return e;
	}
	return 0;
}

#endif
