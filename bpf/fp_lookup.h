/* Finding a frame's megaflow: each live mask in the order userspace keeps, a 64-bit hash of the
 * masked key (seeded by userspace at start), confirmed against the key the entry holds. */
#ifndef EDGEFLOW_FP_LOOKUP_H
#define EDGEFLOW_FP_LOOKUP_H
#include "fp_state.h"

/* The entry for s->key, if a live one exists. */
static __always_inline struct entry *lookup(struct scratch *s)
{
	__u64 gen = config(CFG_GENERATION);
	__u64 seed = config(CFG_HASH_SEED);
	__u32 i;
	for (i = 0; i < MAX_MASKS; i++) {
		__u32 pos = i;
		__u32 *slot = bpf_map_lookup_elem(&ef_mask_order, &pos);
		if (!slot || *slot >= MAX_MASKS)
			break;
		__u32 idx = *slot;
		struct mask_slot *m = bpf_map_lookup_elem(&ef_masks, &idx);
		if (!m || m->generation != gen)
			continue;
		__u32 words = m->words;
		__u64 h = seed;
#pragma unroll
		for (int w = 0; w < KEY_WORDS; w++) {
			if (words & (1U << w)) {
				h = (h ^ (s->key.w[w] & m->m.w[w])) * HASH_MUL;
				h ^= h >> 32;
			}
		}
		s->mk.mask_id = idx;
		s->mk.pad = 0;
		s->mk.hash = h;
		struct entry *e = bpf_map_lookup_elem(&ef_megaflows, &s->mk);
		if (!e || e->generation != gen)
			continue;
		/* Words the mask drops are zero on both sides. */
		__u64 diff = 0;
#pragma unroll
		for (int w = 0; w < KEY_WORDS; w++)
			diff |= (s->key.w[w] & m->m.w[w]) ^ e->key.w[w];
		if (!diff)
			return e;
	}
	return 0;
}

#endif
