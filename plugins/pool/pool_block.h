/* pool_block.h — the pool's records: one per block (a piece of an upstream allocation) and one
 * per upstream allocation ("chunk").
 *
 * The memory itself may be device memory, so every record lives on the host, apart from the
 * memory it describes. A chunk is cut into blocks that tile it without gaps; each block knows its
 * neighbours below and above in the same chunk (phys_prev/phys_next, NULL at the chunk's ends), so
 * a freed block finds the neighbours it may merge with in O(1), and blocks of different chunks are
 * never linked and so never merge. When two blocks merge, the lower record survives: a chunk's
 * `first` record stays its first block for its whole life.
 *
 * Records come from slabs of POOL_RECORDS_PER_SLAB and go back onto a spare list; nothing is
 * freed one by one, so splitting a block costs no malloc. */
#ifndef CRMM_PLUGINS_POOL_BLOCK_H
#define CRMM_PLUGINS_POOL_BLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pool_stream;

typedef struct pool_block {
    uintptr_t addr;                /* first byte */
    size_t size;                   /* bytes, a multiple of 256 */
    struct pool_block *phys_prev;  /* the block just below in the same chunk, or NULL */
    struct pool_block *phys_next;  /* the block just above in the same chunk, or NULL */
    struct pool_stream *owner;     /* free: the stream state whose free list holds it; live: NULL */
    union {
        struct { struct pool_block *prev, *next; } free; /* links in the owner's size-class list */
        struct { size_t requested; } live;              /* bytes the caller asked for */
    } u;
    uintptr_t graph;               /* the pool_graph (pool_capture.h) that owns the block, else 0;
                                    * 0 in every spare record; the field also pads a record to
                                    * one 64-byte line */
} pool_block;

typedef struct pool_chunk {
    uintptr_t addr;                /* as the upstream returned it */
    size_t size;                   /* bytes asked of the upstream (a multiple of 256) */
    pool_block *first;             /* the block at addr */
    struct pool_chunk *prev, *next;
} pool_chunk;

static inline bool pool_block_is_free(const pool_block *b) { return b->owner != NULL; }

/* ---- the record allocator ---------------------------------------------------------------- */

#define POOL_RECORDS_PER_SLAB 255

typedef struct pool_records {
    pool_block *spare;             /* unused records, linked through u.free.next */
    size_t spare_count;
    struct pool_slab *slabs;       /* every slab, for destroy */
} pool_records;

/* Make sure at least `n` spare records exist (allocates a slab when needed). False when malloc
 * fails; nothing changes then. */
bool pool_records_reserve(pool_records *r, size_t n);

/* Take a spare record (pool_records_reserve must have made sure there is one). */
static inline pool_block *pool_records_take(pool_records *r)
{
    pool_block *b = r->spare;
    r->spare = b->u.free.next;
    r->spare_count--;
    return b;
}

/* Give a record back. */
static inline void pool_records_put(pool_records *r, pool_block *b)
{
    b->u.free.next = r->spare;
    r->spare = b;
    r->spare_count++;
}

/* Free every slab (all records become invalid). */
void pool_records_free_all(pool_records *r);

/* ---- cutting and joining blocks ---------------------------------------------------------- */

/* Cut b at `at` (inside it): b keeps the lower part; the upper part, a spare record of r
 * (pool_records_reserve must have made sure there is one), is returned with b's owner, in no list
 * and owned by no graph. */
static inline pool_block *pool_block_split(pool_records *r, pool_block *b, uintptr_t at)
{
    pool_block *up = pool_records_take(r);
    up->addr = at;
    up->size = b->addr + b->size - at;
    up->owner = b->owner;
    up->phys_prev = b;
    up->phys_next = b->phys_next;
    if (up->phys_next)
        up->phys_next->phys_prev = up;
    b->phys_next = up;
    b->size = at - b->addr;
    return up;
}

/* Join b's upper neighbour (out of every list, owned by no graph) into b; its record goes back
 * to r. */
static inline void pool_block_absorb_next(pool_records *r, pool_block *b)
{
    pool_block *next = b->phys_next;
    b->size += next->size;
    b->phys_next = next->phys_next;
    if (b->phys_next)
        b->phys_next->phys_prev = b;
    pool_records_put(r, next);
}

#endif
