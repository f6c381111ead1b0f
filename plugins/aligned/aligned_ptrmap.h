/* aligned_ptrmap.h — a thread-safe hash map from the aligned pointer the `aligned` plugin hands
 * out to the upstream pointer it came from. Sharded by pointer hash, one mutex per shard, so
 * threads freeing different blocks rarely meet. */
#ifndef CRMM_PLUGINS_ALIGNED_PTRMAP_H
#define CRMM_PLUGINS_ALIGNED_PTRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <crmm/error.h>

typedef struct aligned_ptrmap aligned_ptrmap;

/* A new empty map, or NULL when malloc fails. */
aligned_ptrmap *aligned_ptrmap_new(void);
/* Remember key → value (key non-NULL and not present). CRMM_ERROR_OUT_OF_MEMORY when the map
 * cannot grow (message set). */
crmm_status aligned_ptrmap_insert(aligned_ptrmap *m, void *key, void *value);
/* Forget key; true and *value when it was there. */
bool aligned_ptrmap_remove(aligned_ptrmap *m, void *key, void **value);
/* Number of entries. */
size_t aligned_ptrmap_count(aligned_ptrmap *m);
/* Free the map (the pointers in it are not touched). NULL: no-op. */
void aligned_ptrmap_free(aligned_ptrmap *m);

#endif
