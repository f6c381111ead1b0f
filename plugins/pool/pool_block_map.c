/* pool_block_map.c — creating and growing the pointer -> live block hash table (see
 * pool_block_map.h for the structure; lookups, inserts and removals are inline there). */
#include "config.h"
#include <stdlib.h>
#include "pool_block_map.h"

bool pool_block_map_init(pool_block_map *m, size_t capacity)
{
    m->slots = calloc(capacity, sizeof *m->slots);
    if (!m->slots)
        return false;
    m->mask = capacity - 1;
    m->shift = 64u - (unsigned)__builtin_ctzll((unsigned long long)capacity);
    m->count = 0;
    return true;
}

void pool_block_map_free(pool_block_map *m)
{
    free(m->slots);
    m->slots = NULL;
    m->count = 0;
}

bool pool_block_map_grow(pool_block_map *m)
{
    if (pool_block_map_has_room(m))
        return true;
    pool_block_map bigger;
    if (!pool_block_map_init(&bigger, (m->mask + 1) * 2))
        return false;
    for (size_t i = 0; i <= m->mask; i++)
        if (m->slots[i].addr)
            pool_block_map_insert(&bigger, m->slots[i].block);
    free(m->slots);
    *m = bigger;
    return true;
}
