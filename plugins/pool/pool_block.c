/* pool_block.c — the record allocator of the pool (see pool_block.h): block records come from
 * slabs and return to a spare list, so that splitting and merging blocks never call malloc on
 * the hot path. Slabs are freed only when the pool is destroyed. */
#include "build_config.h"
#include <stdlib.h>
#include "pool_block.h"

typedef struct pool_slab {
    pool_block records[POOL_RECORDS_PER_SLAB]; /* first: 64-byte aligned with the slab */
    struct pool_slab *next;
    char pad[sizeof(pool_block) - sizeof(struct pool_slab *)]; /* the size a multiple of 64 */
} pool_slab;

bool pool_records_reserve(pool_records *r, size_t n)
{
    while (r->spare_count < n) {
        pool_slab *slab = aligned_alloc(64, sizeof *slab);
        if (!slab)
            return false;
        slab->next = r->slabs;
        r->slabs = slab;
        for (size_t i = POOL_RECORDS_PER_SLAB; i-- > 0;) {
            slab->records[i].graph = 0;
            pool_records_put(r, &slab->records[i]);
        }
    }
    return true;
}

void pool_records_free_all(pool_records *r)
{
    while (r->slabs) {
        pool_slab *next = r->slabs->next;
        free(r->slabs);
        r->slabs = next;
    }
    r->spare = NULL;
    r->spare_count = 0;
}
