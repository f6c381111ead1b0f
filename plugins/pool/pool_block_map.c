/* pool_block_map.c — creating and growing the pointer -> live block hash table (see
 * pool_block_map.h for the structure; lookups, inserts and removals are inline there), and
 * emptying it. */
#include "build_config.h"
#include <stdlib.h>
#include <string.h>
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

bool pool_block_map_reserve(pool_block_map *m, size_t n)
{
    size_t capacity = m->mask + 1;
    while ((m->count + n) * 2 > capacity)
        capacity *= 2;
    if (capacity == m->mask + 1)
        return true;
    pool_block_map bigger;
    if (!pool_block_map_init(&bigger, capacity))
        return false;
    for (size_t i = 0; i <= m->mask; i++)
        if (m->slots[i].addr)
            pool_block_map_insert(&bigger, m->slots[i].block);
    free(m->slots);
    *m = bigger;
    return true;
}

void pool_block_map_clear(pool_block_map *m)
{
    memset(m->slots, 0, (m->mask + 1) * sizeof *m->slots);
    m->count = 0;
}
