/* Map definitions the edgeflow loader reads from the "maps" section (the classic layout, which
 * needs no BTF): type, key size, value size, max entries, flags. */
#ifndef EDGEFLOW_MAPS_H
#define EDGEFLOW_MAPS_H
#include <linux/types.h>

struct ef_map_def {
	__u32 type;
	__u32 key_size;
	__u32 value_size;
	__u32 max_entries;
	__u32 map_flags;
};

#define EF_MAP(name, t, k, v, n) struct ef_map_def SEC("maps") name = { .type = (t), .key_size = (k), .value_size = (v), .max_entries = (n) }
#define EF_MAP_FLAGS(name, t, k, v, n, f) struct ef_map_def SEC("maps") name = { .type = (t), .key_size = (k), .value_size = (v), .max_entries = (n), .map_flags = (f) }

#endif
