/* pool_free_list.h — the free blocks of one stream, found in O(1): a two-level segregated fit
 * (TLSF, Masmano et al. 2004).
 *
 * Sizes are counted in 256-byte units u. Units 1..31 each have their own class (256 B .. 7.75 KiB
 * exactly); above that, every power of two [2^k, 2^(k+1)) is the first level and is cut into 32
 * equal second-level classes, so a class never spans more than 1/32 of its sizes. Each class is a
 * doubly linked list of free blocks; a bitmap of non-empty first levels and, per first level, a
 * bitmap of non-empty classes find the first non-empty class at or above any size with two
 * count-trailing-zeros. Which block of the classes that hold the request is taken is the list's
 * fit (the pool's `fit` parameter, pool_free_list_find); either way a block that fits is never
 * missed before the pool grows (pool_free_list_fit scans the request's own class last).
 *
 * Inserting a block merges it first with its free neighbours in the same chunk that the same
 * stream state holds (pool_free_list_insert_merging): blocks of other streams stay apart, since
 * using them needs a wait that only the stream logic can set up. */
#ifndef CRMM_PLUGINS_POOL_FREE_LIST_H
#define CRMM_PLUGINS_POOL_FREE_LIST_H

#include <stdbool.h>
#include <stdint.h>
#include "pool_block.h"

#define POOL_UNIT_SHIFT 8                        /* 256-byte units */
#define POOL_SL_SHIFT 5                          /* 32 second-level classes */
#define POOL_SL_COUNT (1u << POOL_SL_SHIFT)
#define POOL_FL_COUNT (64 - POOL_UNIT_SHIFT - POOL_SL_SHIFT + 1) /* every size below 2^64 */

/* How a list picks among the free blocks that hold a request (the pool's `fit` parameter). */
typedef enum pool_fit {
    POOL_FIT_BEST = 0,                           /* the smallest, the lowest address among equals */
    POOL_FIT_NEWEST = 1                          /* the newest of the first class that holds it */
} pool_fit;

/* How many blocks of a class POOL_FIT_BEST looks at: a bound on the fast path's work. Classes
 * under 8 KiB, where the smallest and most frequent requests fall and every block of a class has
 * one size, are looked at for fewer. */
#define POOL_FIT_SCAN 8
#define POOL_FIT_SCAN_SMALL 4

typedef struct pool_free_list {
    uint64_t fl_bitmap;                          /* bit f: some class of level f is non-empty */
    uint8_t fit;                                 /* pool_fit (0, best fit, in a zeroed list) */
    uint32_t sl_bitmap[POOL_FL_COUNT];           /* bit s of [f]: class (f, s) is non-empty */
    uint64_t bytes;                              /* bytes in all its blocks */
    uint64_t blocks;                             /* number of blocks */
    pool_block *heads[POOL_FL_COUNT][POOL_SL_COUNT];
} pool_free_list;

/* The class (fl, sl) of a block of `size` bytes (size >= 256). */
static inline void pool_free_list_class(size_t size, unsigned *fl, unsigned *sl)
{
    uint64_t u = (uint64_t)size >> POOL_UNIT_SHIFT;
    if (u < POOL_SL_COUNT) {
        *fl = 0;
        *sl = (unsigned)u;
    } else {
        unsigned msb = 63u - (unsigned)__builtin_clzll(u);
        *fl = msb - POOL_SL_SHIFT + 1;
        *sl = (unsigned)(u >> (msb - POOL_SL_SHIFT)) & (POOL_SL_COUNT - 1);
    }
}

static inline void pool_free_list_insert(pool_free_list *fl, pool_block *b)
{
    unsigned f, s;
    pool_free_list_class(b->size, &f, &s);
    pool_block *head = fl->heads[f][s];
    b->u.free.prev = NULL;
    b->u.free.next = head;
    if (head)
        head->u.free.prev = b;
    fl->heads[f][s] = b;
    fl->sl_bitmap[f] |= 1u << s;
    fl->fl_bitmap |= 1ull << f;
    fl->bytes += b->size;
    fl->blocks++;
}

static inline void pool_free_list_remove(pool_free_list *fl, pool_block *b)
{
    pool_block *prev = b->u.free.prev, *next = b->u.free.next;
    if (next)
        next->u.free.prev = prev;
    if (prev) {
        prev->u.free.next = next;
    } else {
        unsigned f, s;
        pool_free_list_class(b->size, &f, &s);
        fl->heads[f][s] = next;
        if (!next) {
            fl->sl_bitmap[f] &= ~(1u << s);
            if (!fl->sl_bitmap[f])
                fl->fl_bitmap &= ~(1ull << f);
        }
    }
    fl->bytes -= b->size;
    fl->blocks--;
}

/* Of the first `scan` blocks of the class list that starts at b, the smallest of at least `size`
 * bytes, the lowest address among equal sizes; NULL when none of them fits. */
static inline pool_block *pool_free_list_best_of(pool_block *b, size_t size, unsigned scan)
{
    pool_block *best = NULL;
    for (unsigned n = 0; b && n < scan; b = b->u.free.next, n++)
        if (b->size >= size && (!best || b->size < best->size || (b->size == best->size && b->addr < best->addr)))
            best = b;
    return best;
}

/* A free block of at least `size` bytes (a multiple of 256), or NULL; the block stays in the
 * list. Sizes under 8 KiB have a class each (every block in it has that size), so there the first
 * non-empty class at or above the size holds the request: POOL_FIT_BEST takes the lowest address
 * among its first POOL_FIT_SCAN_SMALL blocks, so that which small block serves a request depends
 * on where the free blocks lie and not on the order they were freed in (a process frees a step's
 * small tensors in an order that changes from run to run; docs/expandable-pool.md Fit).
 * Above, the size's own class is looked at first: training frees and asks again for the same
 * shapes, whose sizes mostly fall between class boundaries, and skipping the blocks that hold
 * them for a larger class would split a bigger block every step. POOL_FIT_BEST takes the best fit
 * among the first POOL_FIT_SCAN blocks of the own class, else among those of the lowest non-empty
 * class above it (PyTorch's caching allocator fits best at the lowest address; on recorded
 * training logs it holds least, docs/expandable-pool.md Fit). POOL_FIT_NEWEST takes the newest
 * block of the first class that holds the request, the own class's when its newest does: no
 * scan at all. */
static inline pool_block *pool_free_list_find(const pool_free_list *fl, size_t size)
{
    uint64_t u = (uint64_t)size >> POOL_UNIT_SHIFT;
    unsigned f, s;
    if (u < POOL_SL_COUNT) {
        f = 0;
        s = (unsigned)u;
    } else {
        unsigned msb = 63u - (unsigned)__builtin_clzll(u);
        pool_block *own = fl->heads[msb - POOL_SL_SHIFT + 1][(u >> (msb - POOL_SL_SHIFT)) & (POOL_SL_COUNT - 1)];
        if (own) {
            if (fl->fit == POOL_FIT_BEST) {
                if ((own = pool_free_list_best_of(own, size, POOL_FIT_SCAN)))
                    return own;
            } else if (own->size >= size) {
                return own;
            }
        }
        u += (1ull << (msb - POOL_SL_SHIFT)) - 1; /* up to the next class boundary */
        msb = 63u - (unsigned)__builtin_clzll(u);
        f = msb - POOL_SL_SHIFT + 1;
        s = (unsigned)(u >> (msb - POOL_SL_SHIFT)) & (POOL_SL_COUNT - 1);
        if (f >= POOL_FL_COUNT)
            return NULL;
    }
    uint32_t sl_map = fl->sl_bitmap[f] & (~0u << s);
    if (!sl_map) {
        uint64_t fl_map = f + 1 < 64 ? fl->fl_bitmap & (~0ull << (f + 1)) : 0;
        if (!fl_map)
            return NULL;
        f = (unsigned)__builtin_ctzll(fl_map);
        sl_map = fl->sl_bitmap[f];
    }
    pool_block *head = fl->heads[f][(unsigned)__builtin_ctz(sl_map)];
    if (fl->fit != POOL_FIT_BEST)
        return head;
    return pool_free_list_best_of(head, size, f ? POOL_FIT_SCAN : POOL_FIT_SCAN_SMALL);
}

/* Scan the class of `size` itself for a block of at least `size` bytes (the blocks there that
 * pool_free_list_find skips because not all of them fit). NULL when none does. */
pool_block *pool_free_list_find_in_own_class(const pool_free_list *fl, size_t size);

/* A block of at least `size`: from the fitting classes, else from the size's own class. */
static inline pool_block *pool_free_list_fit(const pool_free_list *fl, size_t size)
{
    pool_block *b = pool_free_list_find(fl, size);
    return b ? b : pool_free_list_find_in_own_class(fl, size);
}

/* Call fn on every block of fl of at least `min_size` bytes (min_size >= 256), from the size's
 * own class up, until fn returns true (then true); fn must not change fl. A scan: for cold
 * paths. */
bool pool_free_list_for_each(const pool_free_list *fl, size_t min_size, bool (*fn)(pool_block *, void *), void *arg);

/* A block that holds `size` bytes starting at a multiple of `align` (a power of two), *at that
 * start: the first found from the size's own class up (so among the smaller blocks that do), or
 * NULL. A scan: for cold paths. */
pool_block *pool_free_list_find_aligned(const pool_free_list *fl, size_t size, size_t align, uintptr_t *at);

/* The largest block held (a scan of the highest non-empty class), or NULL. */
pool_block *pool_free_list_largest(const pool_free_list *fl);

/* Any block held (the head of the lowest non-empty class), or NULL. */
pool_block *pool_free_list_any(const pool_free_list *fl);

/* Put free block `b` into `fl` as a block of `owner`, merged first with its neighbours that are
 * free and held by the same owner (their records go back to `records`). Returns the block that
 * now holds b's bytes. */
static inline pool_block *pool_free_list_insert_merging(pool_free_list *fl, struct pool_stream *owner,
                                                        pool_block *b, pool_records *records)
{
    pool_block *next = b->phys_next;
    if (next && next->owner == owner) {
        pool_free_list_remove(fl, next);
        pool_block_absorb_next(records, b);
    }
    pool_block *prev = b->phys_prev;
    if (prev && prev->owner == owner) {
        pool_free_list_remove(fl, prev);
        pool_block_absorb_next(records, prev);
        b = prev;
    }
    b->owner = owner;
    pool_free_list_insert(fl, b);
    return b;
}

#endif
