/* pool_counts.h — what the pool counts of its allocations, in one type.
 *
 * A pool_counts is the pool's own count (pool_core.h, under the pool's lock) and each per-thread
 * cache's delta of it (pool_thread_cache.h, under the cache's lock); the figures the queries
 * answer are the pool's plus every cache's (pool_cache_sum). The functions below are its only
 * writers. The peaks are the highest figures seen: of the pool's own counts while the caches are
 * off, of the sums while they are on (and the block bytes' peak of the pool's own figure too:
 * pool_alloc.c). Every writer and reader holds the lock that guards them; the allocate and free
 * paths still update them with relaxed loads and stores (pool_count_add). */
#ifndef CRMM_PLUGINS_POOL_COUNTS_H
#define CRMM_PLUGINS_POOL_COUNTS_H

#include <stddef.h>
#include <stdint.h>
#include <crmm/alloc_counters.h>

typedef struct pool_counts {
    int64_t count;                 /* live allocations */
    int64_t bytes;                 /* their requested bytes */
    int64_t block_bytes;           /* the bytes of their blocks (rounded to 256), and of the blocks
                                    * a CUDA graph still holds after their free (pool_capture.h) */
    uint64_t total_count, total_bytes; /* allocations and requested bytes ever */
} pool_counts;

typedef struct pool_peaks {
    int64_t count, bytes, block_bytes; /* the highest of each live figure of a pool_counts */
} pool_peaks;

/* v += d as a relaxed atomic load and store: plain moves, no locked instruction (every writer
 * holds a lock), but the compiler cannot pair neighbouring counters into one 16-byte vector load
 * and store: paired, the free path's and the peaks' 8-byte reloads of half a vector store can
 * miss store forwarding, which slows small-block churn (bench/RESULTS.md). */
static inline void pool_count_add(int64_t *v, int64_t d)
{
    __atomic_store_n(v, __atomic_load_n(v, __ATOMIC_RELAXED) + d, __ATOMIC_RELAXED);
}

/* Count one allocation of `requested` bytes in a block of `block` bytes. */
static inline void pool_counts_allocated(pool_counts *c, size_t requested, size_t block)
{
    pool_count_add(&c->count, 1);
    pool_count_add(&c->bytes, (int64_t)requested);
    pool_count_add(&c->block_bytes, (int64_t)block);
    pool_count_add((int64_t *)&c->total_count, 1);
    pool_count_add((int64_t *)&c->total_bytes, (int64_t)requested);
}

static inline void pool_counts_freed(pool_counts *c, size_t requested, size_t block)
{
    pool_count_add(&c->count, -1);
    pool_count_add(&c->bytes, -(int64_t)requested);
    pool_count_add(&c->block_bytes, -(int64_t)block);
}

static inline void pool_counts_held(pool_counts *c, int64_t block)
{
    c->block_bytes += block;
}

/* sum += d. */
static inline void pool_counts_add(pool_counts *sum, const pool_counts *d)
{
    sum->count += d->count;
    sum->bytes += d->bytes;
    sum->block_bytes += d->block_bytes;
    sum->total_count += d->total_count;
    sum->total_bytes += d->total_bytes;
}

/* Fold a cache's delta into the pool's count and zero it: the sum stays what it was. */
static inline void pool_counts_fold(pool_counts *pool, pool_counts *delta)
{
    pool_counts_add(pool, delta);
    *delta = (pool_counts){0};
}

/* Which peaks pool_peaks_raise raises (a constant at each call, so that the inlined code keeps
 * only those): the allocations' (count and requested bytes), the blocks' (block bytes), or all. */
enum { POOL_PEAK_ALLOCATIONS = 1, POOL_PEAK_BLOCKS = 2, POOL_PEAKS_ALL = 3 };

/* Raise the peaks `which` says to the figures of `now`. */
static inline void pool_peaks_raise(pool_peaks *pk, const pool_counts *now, unsigned which)
{
    if ((which & POOL_PEAK_ALLOCATIONS) && now->count > pk->count)
        pk->count = now->count;
    if ((which & POOL_PEAK_ALLOCATIONS) && now->bytes > pk->bytes)
        pk->bytes = now->bytes;
    if ((which & POOL_PEAK_BLOCKS) && now->block_bytes > pk->block_bytes)
        pk->block_bytes = now->block_bytes;
}

/* Set every peak to the figure of `now` (CRMM_POOL_OP_RESET_PEAKS). */
static inline void pool_peaks_reset(pool_peaks *pk, const pool_counts *now)
{
    *pk = (pool_peaks){now->count, now->bytes, now->block_bytes};
}

/* Answer the counter queries (CRMM_QUERY_BYTES_IN_USE, ALLOCATIONS and their peaks and totals)
 * from `now` and `pk`; CRMM_ERROR_UNSUPPORTED for any other. */
static inline crmm_status pool_counts_query(const pool_counts *now, const pool_peaks *pk, crmm_query what, uint64_t *out)
{
    const crmm_alloc_counters c = {now->count, now->bytes, pk->count, pk->bytes, now->total_count, now->total_bytes};
    return crmm_counters_query(&c, what, out);
}

#endif
