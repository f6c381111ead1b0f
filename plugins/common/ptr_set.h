/* ptr_set.h — a set of addresses: the blocks a resource handed out and not yet got back, so that
 * it can refuse a double free or a pointer it never gave (fixed_size's blocks, binning's upstream
 * blocks).
 *
 * A ptr_map (ptr_map.h) whose entries are the addresses alone; the owner's lock guards it. A
 * zeroed ptr_set is an empty set. */
#ifndef CRMM_PLUGINS_PTR_SET_H
#define CRMM_PLUGINS_PTR_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ptr_map.h"

typedef struct ptr_set {
    ptr_map map; /* entries: the address, nothing else */
} ptr_set;

/* Add p (not in the set); false when memory for a larger table cannot be had. */
static inline bool ptr_set_add(ptr_set *s, uintptr_t p)
{
    if (__builtin_expect(!s->map.entry_size, 0))
        ptr_map_init(&s->map, sizeof(uintptr_t));
    return ptr_map_insert(&s->map, p) != NULL;
}

/* Whether p is in the set. */
static inline bool ptr_set_has(const ptr_set *s, uintptr_t p) { return ptr_map_find(&s->map, p) != NULL; }

/* Remove p; false when it is not in the set. */
static inline bool ptr_set_remove(ptr_set *s, uintptr_t p) { return ptr_map_remove(&s->map, p, NULL); }

/* Free the set's memory. */
static inline void ptr_set_free(ptr_set *s) { ptr_map_destroy(&s->map); }

#endif
