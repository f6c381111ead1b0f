/* fixed_size_live.h — the set of blocks handed out and not yet freed, to refuse a double free or
 * a pointer the resource never gave (pushing it on a free list would hand it out twice).
 *
 * A ptr_map (plugins/common/ptr_map.h) whose entries are the block addresses alone; the
 * resource's lock guards it. A zeroed fs_live_set is an empty set. */
#ifndef CRMM_FIXED_SIZE_LIVE_H
#define CRMM_FIXED_SIZE_LIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "../common/ptr_map.h"

typedef struct fs_live_set {
    ptr_map map; /* entries: the address, nothing else */
} fs_live_set;

/* Add p (not in the set); false when memory for a larger table cannot be had. */
static inline bool fs_live_add(fs_live_set *s, uintptr_t p)
{
    if (__builtin_expect(!s->map.entry_size, 0))
        ptr_map_init(&s->map, sizeof(uintptr_t));
    return ptr_map_insert(&s->map, p) != NULL;
}

/* Remove p; false when it is not in the set. */
static inline bool fs_live_remove(fs_live_set *s, uintptr_t p) { return ptr_map_remove(&s->map, p, NULL); }

static inline void fs_live_free(fs_live_set *s) { ptr_map_destroy(&s->map); }

#endif
