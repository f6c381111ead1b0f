/* pool_block_map.h — the live blocks of a pool, found by pointer in O(1).
 *
 * An open-addressing hash table keyed by address, with linear probing and backward-shift
 * deletion (no tombstones, so lookups never slow down as blocks come and go). Keys are 256-byte
 * aligned, so the hash drops the low 8 bits and multiplies by the 64-bit golden ratio (Fibonacci
 * hashing); the table is a power of two and at most half full, so a probe sequence is short.
 * Address 0 marks an empty slot (no block starts at 0). Only live blocks are in the map: a
 * pointer that is not there was not handed out by the pool, or was freed already. */
#ifndef CRMM_PLUGINS_POOL_BLOCK_MAP_H
#define CRMM_PLUGINS_POOL_BLOCK_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "pool_block.h"

typedef struct pool_block_map_slot {
    uintptr_t addr;                /* 0: empty */
    pool_block *block;
} pool_block_map_slot;

typedef struct pool_block_map {
    pool_block_map_slot *slots;
    size_t mask;                   /* capacity - 1 (capacity a power of two) */
    unsigned shift;                /* 64 - log2(capacity) */
    size_t count;
} pool_block_map;

/* An empty map of `capacity` slots (a power of two >= 16). False when malloc fails. */
bool pool_block_map_init(pool_block_map *m, size_t capacity);
void pool_block_map_free(pool_block_map *m);

/* Make room for `n` more entries (doubles the table until they keep it at most half full). False
 * when malloc fails; the map is unchanged then. */
bool pool_block_map_reserve(pool_block_map *m, size_t n);

/* Make room for one more entry. */
static inline bool pool_block_map_grow(pool_block_map *m) { return pool_block_map_reserve(m, 1); }

/* Remove every entry (the table keeps its size). */
void pool_block_map_clear(pool_block_map *m);

static inline bool pool_block_map_has_room(const pool_block_map *m)
{
    return (m->count + 1) * 2 <= m->mask + 1;
}

static inline size_t pool_block_map_home(const pool_block_map *m, uintptr_t addr)
{
    return (size_t)(((uint64_t)addr >> 8) * 0x9E3779B97F4A7C15ull >> m->shift);
}

/* Add live block b (its address is not in the map; pool_block_map_has_room must be true). */
static inline void pool_block_map_insert(pool_block_map *m, pool_block *b)
{
    size_t i = pool_block_map_home(m, b->addr);
    while (m->slots[i].addr)
        i = (i + 1) & m->mask;
    m->slots[i].addr = b->addr;
    m->slots[i].block = b;
    m->count++;
}

/* The slot of the live block at `addr`, or SIZE_MAX when no live block starts there. */
static inline size_t pool_block_map_index(const pool_block_map *m, uintptr_t addr)
{
    size_t i = pool_block_map_home(m, addr);
    for (;;) {
        uintptr_t a = m->slots[i].addr;
        if (a == addr)
            return i;
        if (!a)
            return SIZE_MAX;
        i = (i + 1) & m->mask;
    }
}

/* The live block at `addr`, left in the map; NULL when there is none. */
static inline pool_block *pool_block_map_find(const pool_block_map *m, uintptr_t addr)
{
    size_t i = pool_block_map_index(m, addr);
    return i == SIZE_MAX ? NULL : m->slots[i].block;
}

/* Remove the block at `addr` and return it; NULL when no live block starts there. */
static inline pool_block *pool_block_map_remove(pool_block_map *m, uintptr_t addr)
{
    size_t i = pool_block_map_index(m, addr);
    if (i == SIZE_MAX)
        return NULL;
    pool_block *found = m->slots[i].block;
    /* backward shift: pull later entries of the run into the hole when their home allows it */
    size_t hole = i;
    for (size_t j = (i + 1) & m->mask; m->slots[j].addr; j = (j + 1) & m->mask) {
        size_t home = pool_block_map_home(m, m->slots[j].addr);
        /* the entry at j may move to the hole when its home is not in (hole, j] (cyclically) */
        if (((j - home) & m->mask) >= ((j - hole) & m->mask)) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole].addr = 0;
    m->slots[hole].block = NULL;
    m->count--;
    return found;
}

#endif
