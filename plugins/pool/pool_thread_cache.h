/* pool_thread_cache.h — per-thread caches of free blocks in front of the pool's one lock.
 *
 * When threads contend for a pool's lock (parameter thread_cache = auto, the default: at least
 * POOL_CONTENTION_WAITS of POOL_CONTENTION_WINDOW locked operations found it held; = on: as soon
 * as a second thread allocates), each thread keeps, per (pool, stream), a small cache of the
 * blocks it freed on that stream and hands them out again to itself on the same stream (stream
 * order makes that safe, as it does for the pool's own per-stream lists). A cache has its own
 * spin lock, which only its thread takes on the fast path, so allocations and frees that the
 * cache serves move no shared cache line.
 *
 * What a cache holds:
 *  - up to POOL_CACHE_BLOCKS free blocks, in size classes of 1/16 of a power of two (exact below
 *    8 KiB), each a last-in first-out list. An allocation of rounded size n takes the most recent
 *    block of size in [n, n + n/8] of the lowest class that has one (n's class and the two to
 *    four above it: no scan of the whole cache); the block keeps its size (the block bytes
 *    count all of it). A free pushes; when the cache is full, the blocks pushed before the last
 *    POOL_CACHE_KEEP pushes (at least POOL_CACHE_BLOCKS - POOL_CACHE_KEEP of them) go back to the
 *    pool under one pool lock, taken before the push (so that no block is ever in no list, not
 *    even in the copy of the pool a fork makes). Blocks larger than POOL_CACHE_MAX_BLOCK are never cached. A
 *    cached block keeps owner NULL, so the pool never merges with it;
 *  - its own live map: every block its thread allocates on its stream while caching is on (a hit
 *    or a miss that the pool served), so that the thread's free finds the block under the cache's
 *    lock alone. A free of a pointer not in the caller's own map takes the pool's lock and looks
 *    in the pool's live map, then in every cache's live map (a block freed by another thread or
 *    on another stream), and is refused only after that: a double free is refused at the call;
 *  - a delta of the pool's counts (pool_counts.h): the allocations it serves and the frees of
 *    the blocks in its live map; queries add the pool's counts and every cache's delta.
 *
 * Draining a cache (under the pool's lock, then the cache's) gives its blocks back to the free
 * list of its stream, moves its live map into the pool's and folds its delta into the pool's
 * counts. Before the pool grows, the calling thread's own cache gives its blocks back (they are
 * on the caller's stream: usable at once, and they may merge into a block that fits; its live map
 * stays); the other threads' caches drain too when all caches together hold more than
 * 1/POOL_CACHE_DRAIN_SHARE of what the pool holds. Below that share the pool grows instead: taking every other thread's blocks would
 * cost each of them a run of misses, and the pool would then grow anyway as those threads free
 * into their caches again (a tight pool under threads would drain at nearly every miss). So the
 * caches may keep the pool from reusing at most that share of it. When growing fails (out of
 * memory), every cache drains and the pool tries to grow once more (an expandable pool can then
 * give their pages back and map them where it grows), before its last-resort synchronization.
 * Every cache also drains at trim and at forget_stream. Blocks go back only to the state of their
 * own stream: when it cannot be made (malloc failed), they stay in the cache (a drain leaves them
 * to the next one; a free that would evict from a full cache is refused, its block staying live),
 * and nothing synchronizes the device instead, which a free or a thread's exit must not wait for
 * and which would invalidate any capture under way. A thread's exit (a
 * pthread key destructor) drains its caches and leaves them to the pool as orphans, which the
 * next thread that needs a cache of that pool takes over; destroy drops every cache's contents,
 * frees the orphans and marks the others as of no pool (pool NULL: a new pool at the same
 * address never matches them); their thread frees them. One process-wide mutex orders thread
 * exit, a thread giving up one of its POOL_CACHE_SLOTS for another (pool, stream), and destroy.
 *
 * Lock order: that mutex, the pool's lock, a cache's lock. A thread never holds its cache's lock
 * while it takes the pool's (a free that finds its cache full lets go of it, takes the pool's,
 * then takes it again). */
#ifndef CRMM_PLUGINS_POOL_THREAD_CACHE_H
#define CRMM_PLUGINS_POOL_THREAD_CACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <crmm/resource.h>
#include "pool_block.h"
#include "pool_block_map.h"
#include "pool_counts.h"

#define POOL_CACHE_BLOCKS 255                      /* free blocks a cache holds (indices fit a byte) */
#define POOL_CACHE_KEEP 192                        /* a full cache keeps the blocks of the last this many pushes */
#define POOL_CACHE_MAX_BLOCK ((size_t)64 << 20)    /* larger blocks are never cached */
#define POOL_CACHE_SLOTS 4                         /* caches per thread */
#define POOL_CACHE_CLASSES 256                     /* size classes up to POOL_CACHE_MAX_BLOCK */
#define POOL_CACHE_NONE 0xFF                       /* no entry */
/* before growing, the pool takes back every cache's blocks when together they hold more than
 * 1/POOL_CACHE_DRAIN_SHARE of what it holds (the calling thread's own cache, always) */
#define POOL_CACHE_DRAIN_SHARE 2
/* thread_cache = auto: the caches switch on when, of POOL_CONTENTION_WINDOW operations that take
 * the pool's lock, at least POOL_CONTENTION_WAITS found it held by another thread */
#define POOL_CONTENTION_WINDOW 1024
#define POOL_CONTENTION_WAITS 64

/* The parameter thread_cache. */
typedef enum pool_cache_mode {
    POOL_CACHE_OFF,                /* never */
    POOL_CACHE_AUTO,               /* when threads contend for the pool's lock (the default) */
    POOL_CACHE_ON                  /* once a second thread allocates */
} pool_cache_mode;

struct pool_resource;

typedef struct pool_cache_entry {
    pool_block *block;             /* NULL: unused */
    size_t size;                   /* the block's size */
    uint64_t stamp;                /* the push that put it here */
    uint8_t prev, next;            /* its class's list; unused: next links the unused entries */
    uint8_t cls;                   /* its class */
} pool_cache_entry;

typedef struct pool_thread_cache {
    int lock;                      /* spin lock */
    struct pool_resource *pool;    /* read by its thread without a lock: atomic; NULL once destroyed */
    crmm_cuda_stream_t handle;     /* the stream, keyed as pool_streams keys it */
    uint64_t thread;
    bool orphan;                   /* no thread has it (under the pool's lock) */
    unsigned count;                /* entries in use */
    size_t bytes;                  /* their sizes' sum (written by its thread, read by others: atomic) */
    uint64_t pushes;
    uint8_t unused;                /* first unused entry */
    uint8_t heads[POOL_CACHE_CLASSES]; /* most recent entry of each class */
    pool_block_map live;           /* blocks its thread allocated on its stream */
    pool_counts delta;             /* its part of the pool's counts (see the top) */
    struct pool_thread_cache *next; /* the pool's list of caches (under the pool's lock) */
    pool_cache_entry entries[POOL_CACHE_BLOCKS];
} pool_thread_cache;

_Static_assert(POOL_CACHE_BLOCKS <= POOL_CACHE_NONE, "entry indices are bytes, POOL_CACHE_NONE none of them");

/* ---- for pool_alloc.c ---------------------------------------------------------------------- */

/* The calling thread's cache of p for `stream`, or NULL when it has none. */
pool_thread_cache *pool_cache_find(struct pool_resource *p, crmm_cuda_stream_t stream);
/* The same, made when missing (takes the pool's lock; may give up another of the thread's
 * caches). NULL when malloc fails (the error is cleared: the caller takes the pool's way), and
 * NULL instead of a new cache while the thread calls a pool's upstream holding that pool's lock
 * (pool_cache_calling_upstream): giving up a slot takes the lock of the pool the slot's cache
 * belongs to, which may be that one, and the registry's mutex, which a thread holding that one's
 * may wait for. */
pool_thread_cache *pool_cache_get(struct pool_resource *p, crmm_cuda_stream_t stream);

/* Around a pool's call into its upstream with its lock held (a growth; a free makes no cache):
 * nests. */
void pool_cache_calling_upstream(bool calling);

/* Empty c's block lists (a new cache, or one whose blocks went back). */
void pool_cache_reset(pool_thread_cache *c);
/* Take a cached block for `size` (see the top), or NULL. Under c's lock. */
pool_block *pool_cache_take(pool_thread_cache *c, size_t size);
/* Whether c has no room for another block (a push would evict). Under c's lock. */
static inline bool pool_cache_full(const pool_thread_cache *c) { return c->unused == POOL_CACHE_NONE; }
/* Cache free block b (not larger than POOL_CACHE_MAX_BLOCK). Under c's lock, and the pool's
 * when the cache is full (pool_cache_full): then the oldest blocks leave it into out[] (room for
 * POOL_CACHE_BLOCKS); returns how many, which the caller gives to the pool (pool_cache_give_back,
 * to the state pool_cache_home found before the push) before releasing either lock. */
unsigned pool_cache_push(pool_thread_cache *c, pool_block *b, pool_block **out);
/* The state whose free list takes c's blocks (its stream's), made when missing; NULL with the
 * error set when malloc fails (no device synchronization instead: the caller keeps the blocks
 * where they are). Under the pool's lock. */
struct pool_stream *pool_cache_home(struct pool_resource *p, const pool_thread_cache *c);
/* Give n blocks freed on c's stream to the free list of `home` (pool_cache_home). Under the
 * pool's lock. */
void pool_cache_give_back(struct pool_resource *p, struct pool_stream *home, pool_block **blocks, unsigned n);

/* ---- under the pool's lock ----------------------------------------------------------------- */

/* Drain every cache of p (see the top). Returns whether that changed what the pool can serve: a
 * block went back to a free list, or a cache's count of frees joined the pool's counts (an
 * expandable pool's out-of-memory path reads them to find free pages). */
bool pool_cache_drain_all(struct pool_resource *p);
/* Give the calling thread's cache of p for `stream` (if it has one) its blocks back to the pool
 * and fold its delta into the pool's counts; its live map stays. Returns whether a block went
 * back to a free list. */
bool pool_cache_drain_mine(struct pool_resource *p, crmm_cuda_stream_t stream);
/* The bytes of the free blocks every cache of p holds (each cache's own count, read without its
 * lock: a moment's value). */
uint64_t pool_cache_bytes(const struct pool_resource *p);
/* A live block at ptr in some cache's live map, removed from it (its delta counts the free), or
 * NULL. When that block was asked for with other than `bytes`, it stays live, *st is the error
 * (pool_refuse_size) and the result is NULL. */
pool_block *pool_cache_remove_live(struct pool_resource *p, uintptr_t ptr, size_t bytes, crmm_status *st);
/* Whether ptr lies in a block some cache holds (a double free). */
bool pool_cache_holds(struct pool_resource *p, uintptr_t ptr);
/* The counts of p plus every cache's delta, read with every cache's lock held at once (one
 * moment's sum): into *sum, and p's peaks raised to it. */
void pool_cache_sum(struct pool_resource *p, pool_counts *sum);
/* The largest block any cache holds (0: none). */
uint64_t pool_cache_largest(struct pool_resource *p);

/* Take every cache's lock (after the pool's) / release them: before and after a fork. */
void pool_cache_lock_all(struct pool_resource *p);
void pool_cache_unlock_all(struct pool_resource *p);
/* In a child after fork: make the process-wide mutex of the caches anew (pool_fork.c says why). */
void pool_cache_registry_reset(void);

/* ---- destroy ------------------------------------------------------------------------------- */

/* Drop every cache's contents and detach them from p (without the pool's lock: p is going). */
void pool_cache_detach_all(struct pool_resource *p);

#endif
