/* Finding a frame's megaflow: each live mask in the order userspace keeps, a 64-bit hash of the
 * words the mask keeps (seeded by userspace at start), its slots probed in ef_flow_slots, and the
 * entry a slot names confirmed against the masked key it holds (fastpath.h). No helper call:
 * array lookups are inlined. */
#ifndef EDGEFLOW_FP_LOOKUP_H
#define EDGEFLOW_FP_LOOKUP_H
#include "fp_state.h"

/* `step(k)` for each position k of a mask's list of kept words, unrolled: the hash and the
 * compare visit the list with no loop counter or bound to keep, which took about a sixth of what
 * a probe that misses cost (~6 ns, now ~5; clang does not unroll these loops itself: they leave
 * early). Each step ends the walk at the list's end with a goto. */
#define FOR_EACH_KEPT(step)                                                 \
	step(0) step(1) step(2) step(3) step(4) step(5) step(6) step(7) step(8) \
	step(9) step(10) step(11) step(12) step(13) step(14) step(15) step(16)

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
#define COMPARE_KEPT(k)                                                     \
	if ((k) >= n)                                                       \
		goto compared;                                              \
	if (m->kept[k] >= KEY_WORDS)                                        \
		return 0;                                                   \
	diff |= (s->key.w[m->kept[k]] & m->m.w[m->kept[k]]) ^ e->key.w[m->kept[k]];
	FOR_EACH_KEPT(COMPARE_KEPT)
#undef COMPARE_KEPT
compared:
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
		/* A word past the key is never written so: the hash then finds nothing. */
#define HASH_KEPT(k)                                                        \
	if ((k) >= n || m->kept[k] >= KEY_WORDS)                            \
		goto hashed;                                                \
	h = (h ^ (s->key.w[m->kept[k]] & m->m.w[m->kept[k]])) * HASH_MUL;   \
	h ^= h >> 32;
		FOR_EACH_KEPT(HASH_KEPT)
#undef HASH_KEPT
hashed:;
		struct entry *e = probe(s, m, idx, h, gen, m->slot_shift, at);
		if (e)
			return e;
	}
	return 0;
}

#endif
