/* live_blocks.h — the set of blocks handed out and not yet freed, to refuse a double free or
 * a pointer the resource never gave (fixed_size: pushing it on a free list would hand it out
 * twice; binning: the large blocks it passed upstream).
 *
 * A ptr_map (support/ptr_map.h) whose entries are the block addresses alone; the
 * resource's lock guards it. A zeroed live_blocks is an empty set. */
#ifndef CRMM_PLUGINS_LIVE_BLOCKS_H
#define CRMM_PLUGINS_LIVE_BLOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ptr_map.h"

typedef struct live_blocks {
    ptr_map map; /* entries: the address, nothing else */
} live_blocks;

/* Add p (not in the set); false when memory for a larger table cannot be had. */
static inline bool live_blocks_add(live_blocks *s, uintptr_t p)
{
    if (__builtin_expect(!s->map.entry_size, 0))
        ptr_map_init(&s->map, sizeof(uintptr_t));
    return ptr_map_insert(&s->map, p) != NULL;
}

/* Remove p; false when it is not in the set. */
static inline bool live_blocks_remove(live_blocks *s, uintptr_t p) { return ptr_map_remove(&s->map, p, NULL); }

static inline void live_blocks_free(live_blocks *s) { ptr_map_destroy(&s->map); }

#endif
