/* arena_thread_cache.h — thread arenas: where small blocks come from without a lock.
 *
 * Every thread that allocates from an arena resource gets its own thread arena per stream it
 * uses (one per thread when the upstream is host memory). A thread arena holds at most one
 * superblock per size class, its "current" slab, and allocates from it with no lock and no atomic
 * read-modify-write. Its home shard (arena_global.h) is the one with the fewest thread arenas when
 * it is made. See arena_thread_cache.c for the protocol with other threads. */
#ifndef CRMM_ARENA_THREAD_CACHE_H
#define CRMM_ARENA_THREAD_CACHE_H

#include <stdint.h>
#include <crmm/resource.h>
#include "arena_resource.h"

typedef struct arena_thread {
    arena_resource *r;
    crmm_cuda_stream_t stream;
    unsigned home;                    /* the shard its large blocks and superblocks come from first */
    /* the fence between the owner and a defragmenter (arena_thread_cache.c), atomics: */
    int busy;                         /* the owner is in an operation on its slabs (owner writes) */
    int reclaim;                      /* a defragmenter is at work on them (defragmenter writes) */
    struct arena_thread *prev, *next; /* r->arenas, under r->arenas_lock */
    /* counts since the last flush into r->counters: the owner writes them with relaxed stores,
     * queries read them */
    int64_t live_bytes, live_count;   /* net change */
    int64_t peak_bytes, peak_count;   /* highest net change */
    uint64_t total_count, total_bytes;
    arena_slab *current[];            /* [r->nclasses], read by defragmenters with atomics */
} arena_thread;

/* Allocate a small block (bytes <= r->small_max) from the calling thread's arena for `stream`.
 * CRMM_ERROR_OUT_OF_MEMORY without a message when no superblock is left (the caller
 * defragments and retries); CRMM_ERROR_BAD_ALLOC with one when host memory runs out;
 * CRMM_ERROR_CUDA with one when a superblock freed on another stream is there but waiting for
 * the device fails. */
crmm_status arena_cache_allocate(arena_resource *r, size_t bytes, crmm_cuda_stream_t stream, void **ptr);
/* The checks of a free of ptr, in slab `sb`, with `bytes` that need no owner: *idx is its block.
 * CRMM_ERROR_INVALID_ARGUMENT when ptr is not the start of a block of sb or bytes is not of its
 * size class. */
crmm_status arena_cache_check(arena_resource *r, arena_slab *sb, void *ptr, size_t bytes, uint32_t *idx);
/* Free a small block of slab `sb` (found through the page map). CRMM_ERROR_INVALID_ARGUMENT
 * when ptr is not a live block of sb or bytes is not of its size class; CRMM_ERROR_CUDA when a
 * free on another stream cannot wait for that stream. */
crmm_status arena_cache_deallocate(arena_resource *r, arena_slab *sb, void *ptr, size_t bytes,
                                   crmm_cuda_stream_t stream);

/* Allocate a large block (bytes > r->small_max) from the global arena, the home shard of the
 * calling thread's arena for `stream` first, and count it there. CRMM_ERROR_OUT_OF_MEMORY without
 * a message when no free pages in a row fit; CRMM_ERROR_BAD_ALLOC with one when host memory runs
 * out; CRMM_ERROR_CUDA with one when only pages freed on other streams fit and waiting for the
 * device fails. */
crmm_status arena_cache_allocate_large(arena_resource *r, size_t bytes, crmm_cuda_stream_t stream, void **ptr);

/* Count a large block (served by the global arena) freed by the calling thread (-bytes), in its
 * arena's counters when it has one, so that one thread's peaks are exact; otherwise in the shared
 * counters, the peak recorded first. */
void arena_cache_count(arena_resource *r, crmm_cuda_stream_t stream, int64_t bytes);

/* Defragment: take every empty superblock that thread arenas hold (their own thread's included)
 * back to the global arena, where it merges with its free neighbours. Waits for the device
 * first when the memory is device memory. Returns how many superblocks came back. A superblock
 * counts as empty when its free blocks and the blocks other threads freed into it (which its
 * owner has not collected yet) cover it: the owner need not have seen those frees. Such a
 * superblock is taken while its owner thread is outside an allocate or free of this resource,
 * which membarrier(2) lets the defragmenter make sure of without slowing the owner (the protocol
 * in arena_thread_cache.c); where membarrier is unavailable, only superblocks that the owner
 * itself saw become empty are taken, and one emptied by other threads comes back when its owner
 * runs out of blocks of that class, or exits. */
size_t arena_cache_reclaim(arena_resource *r);

/* Allocation counts of the whole resource (r->counters plus what thread arenas have not
 * flushed). Peaks are exact for one thread; with several they may be off by what each thread
 * counts between flushes (ARENA_FLUSH_BYTES, ARENA_FLUSH_COUNT). A free counted for another
 * thread (a block it allocated) and a thread's exit never lower them, and a peak once reported
 * (by this call) is never reported lower. */
typedef struct arena_counts {
    int64_t count, bytes, peak_count, peak_bytes;
    uint64_t total_count, total_bytes;
} arena_counts;
void arena_cache_counts(arena_resource *r, arena_counts *out);
/* How many thread arenas there are, and how many superblocks they hold. */
void arena_cache_holdings(arena_resource *r, size_t *arenas, size_t *superblocks);
/* How many thread arenas have shard `shard` as their home. */
size_t arena_cache_homed(arena_resource *r, unsigned shard);

/* Give `r` its unique id and make it known to exiting threads. */
void arena_registry_add(arena_resource *r);
/* Forget `r`: exiting threads leave its thread arenas alone from now on. */
void arena_registry_remove(arena_resource *r);
/* For destroy (after arena_registry_remove): free every thread arena of r and drop the calling
 * thread's cache entries for it. Other threads' entries for r are never used again (ids are not
 * reused) and go when those threads exit or purge their tables. */
void arena_cache_release_all(arena_resource *r);

#endif
