/* name_index.h — a hash index from names to positions, so that finding a resource by name in a
 * config of many resources takes constant time instead of a scan. */
#ifndef CRMM_CORE_NAME_INDEX_H
#define CRMM_CORE_NAME_INDEX_H

#include <stdbool.h>
#include <stddef.h>

/* The names are borrowed: each must outlive its entry. An all-zero index is empty and valid. */
typedef struct name_index {
    struct name_index_slot *slots;
    size_t capacity;          /* a power of two, or 0 */
    size_t count;
} name_index;

/* The position stored for `name`, or -1 when it has none (or `name` is NULL). */
long name_index_find(const name_index *x, const char *name);
/* Store `position` for `name` (which must not be in the index yet). False when out of memory;
 * the index is unchanged then. */
bool name_index_add(name_index *x, const char *name, size_t position);
/* Forget every entry and free the table; the index is empty again. */
void name_index_free(name_index *x);

#endif
