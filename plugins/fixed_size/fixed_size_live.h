/* fixed_size_live.h — the set of blocks handed out and not yet freed, to refuse a double free or
 * a pointer the resource never gave (pushing it on a free list would hand it out twice). */
#ifndef CRMM_FIXED_SIZE_LIVE_H
#define CRMM_FIXED_SIZE_LIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fs_live_set {
    uintptr_t *slots; /* 0 = empty; open addressing, linear probing */
    size_t capacity;  /* a power of two */
    size_t count;
} fs_live_set;

/* Add p (not in the set); false when memory for a larger table cannot be had. */
bool fs_live_add(fs_live_set *s, uintptr_t p);
/* Remove p; false when it is not in the set. */
bool fs_live_remove(fs_live_set *s, uintptr_t p);
void fs_live_free(fs_live_set *s);

#endif
