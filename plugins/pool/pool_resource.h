/* pool_resource.h — the pool resource: its parts (pool_core.h: lists, map and counts;
 * pool_growth_state.h: what it holds from upstream; pool_cache_policy.h: when the per-thread
 * caches switch on), its graphs, and the functions the pool_* files share.
 *
 * One lock guards everything: the per-stream free lists (pool_streams), the live-block map, the
 * records, the upstream chunks and the list of per-thread caches (pool_thread_cache.h, which
 * says what each cache's own lock guards), and the pool's counts (pool_counts.h): plain integers,
 * where atomic ones would cost ~30 ns an operation in locked instructions alone. */
#ifndef CRMM_PLUGINS_POOL_RESOURCE_H
#define CRMM_PLUGINS_POOL_RESOURCE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <crmm/plugin.h>
#include "pool_block.h"
#include "pool_block_map.h"
#include "pool_cache_policy.h"
#include "pool_capture.h"
#include "pool_core.h"
#include "pool_free_list.h"
#include "pool_growth_state.h"
#include "pool_plan.h"
#include "pool_streams.h"
#include "pool_thread_cache.h"
#include "pool_vmm.h"
#include "../common/resource_label.h"
#include "../common/spin_lock.h"

/* The largest request the pool accepts: rounding it up to 256 bytes must not overflow. */
#define POOL_MAX_REQUEST (SIZE_MAX - (CRMM_ALLOCATION_ALIGNMENT - 1))
#define POOL_NO_MAXIMUM UINT64_MAX
/* An expandable pool grows without waiting for the device while it holds at most its mark plus
 * 1/POOL_EXPAND_SLACK of it (see pool_expand.c). */
#define POOL_EXPAND_SLACK 32
/* page_moves = budget: moves of a stream's own pages beyond once per mark may take at most
 * 1/POOL_MOVE_BUDGET_SHARE of the bytes allocated, plus the mark (see pool_expand.c). */
#define POOL_MOVE_BUDGET_SHARE 8
/* While threads contend (the per-thread caches are on), an expandable pool grows by at least
 * 1/POOL_EXPAND_THREAD_STEP of what it holds and never moves pages (see pool_expand.c). */
#define POOL_EXPAND_THREAD_STEP 16

/* The pool's graphs parameter: ask CUDA whether a stream is captured once the process enabled
 * graph capture (crmm_graph_capture_enable), always, or never. */
enum { POOL_GRAPHS_AUTO, POOL_GRAPHS_ON, POOL_GRAPHS_OFF };

typedef struct pool_resource {
    crmm_resource base;            /* first: crmm sees a crmm_resource */
    int lock;                      /* pool_lock (a spin lock) */
    pool_core core;                /* free lists, live map, records, counts (pool_core.h) */
    pool_growth_state growth;      /* chunks, limits, the expandable range (pool_growth_state.h) */
    pool_cache_policy cache;       /* when the per-thread caches switch on (pool_cache_policy.h) */
    pool_graph *graphs;            /* the CUDA graphs that own blocks of the pool (pool_capture.h) */
    graph_holds released;          /* those whose graph is gone, not yet collected (graph_hold.h) */
    const bool *capture_gate;      /* open: ask whether a stream is captured (graphs, the process switch) */
    uint8_t graphs_mode;           /* parameter graphs (POOL_GRAPHS_*): when to ask whether a stream
                                    * is captured */
    bool graph_private;            /* parameter graph_pool = private: a capture's blocks come from
                                    * memory taken for its graph alone (pool_alloc.c, grow_for_graph) */
    bool capturing;                /* an allocation for a stream under capture is under way: no
                                    * synchronization, no event, nothing taken from other streams */
    crmm_fork_guard fork_guard;    /* its locks around fork() (pool_fork.c) */
    pool_plan *plan;               /* parameter plan: where a recorded run's requests go (pool_plan.h); NULL */
} pool_resource;

/* Bytes the pool holds: its own pages or chunks, and the plan's mapped pages. */
static inline uint64_t pool_held(const pool_resource *p) { return p->growth.reserved + (p->plan ? p->plan->held : 0); }

/* Raise the peak of what the pool holds to what it holds now. */
static inline void pool_raise_held_peak(pool_resource *p)
{
    if (pool_held(p) > p->growth.reserved_peak)
        p->growth.reserved_peak = pool_held(p);
}

/* Whether the per-thread caches are on (read without the lock: once on, they stay on). */
static inline bool pool_caching(const pool_resource *p) { return __atomic_load_n(&p->cache.caching, __ATOMIC_RELAXED); }

/* The pool's one lock: a spin lock (plugins/common/spin_lock.h) that yields the processor after
 * a few hundred spins. Critical sections are tens of nanoseconds, so waiting by spinning hands the
 * lock over in about the time of a cache-line transfer, where a mutex puts waiters to sleep in the
 * kernel and costs microseconds per hand-over (bench/RESULTS.md has the figures). Slow paths that
 * call CUDA (growth, a device synchronize) hold it too; waiters then yield instead of burning a
 * core. */
static inline void pool_lock(pool_resource *p) { spin_lock(&p->lock); }
static inline void pool_unlock(pool_resource *p) { spin_unlock(&p->lock); }

/* "pool 'main'", or "pool" when the resource has no name; into buf. */
static inline const char *pool_label(const pool_resource *p, char *buf, size_t size)
{
    return resource_label("pool", p->base.name, buf, size);
}

/* Refuse the free of live block b as `bytes` (not the size it was asked for) with
 * CRMM_ERROR_INVALID_ARGUMENT: b, just removed from `map`, goes back into it and stays live. Under
 * the lock that guards `map`. Cold: kept off the deallocate paths of the pool and its caches. */
__attribute__((cold)) static inline crmm_status pool_refuse_size(pool_resource *p, pool_block_map *map, pool_block *b,
                                                                size_t bytes)
{
    char label[80];
    pool_block_map_insert(map, b);
    return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: deallocate of %p as %zu bytes: it is a block of %zu bytes",
                          pool_label(p, label, sizeof label), (void *)b->addr, bytes, (size_t)b->u.live.requested);
}

/* ---- pool_alloc.c: the allocate and deallocate ops --------------------------------------- */
crmm_status pool_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr);
crmm_status pool_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream);
bool pool_try_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr);
bool pool_try_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream);

/* ---- pool_growth.c: upstream chunks -------------------------------------------------------- */
/* CRMM_ERROR_OUT_OF_MEMORY naming `size` (a request rounded up to 256 bytes) and the limit when
 * no growth can ever give a free block of `size`: it is larger than maximum_size, or, in an
 * expandable pool, it needs more whole pages than lie within it, within the device's memory or
 * within its address range. CRMM_OK otherwise. The caller
 * fails such a request before the out-of-memory path, which would synchronize the device and
 * give free memory back for nothing. */
crmm_status pool_check_maximum(const pool_resource *p, size_t size);
/* Grow by one chunk that has room for `size` (RMM's rule: double without a maximum, else the
 * larger of size and half the room left, halved on failure down to size); the chunk's block goes
 * to stream state s. *out: that block. CRMM_ERROR_OUT_OF_MEMORY naming the sizes when neither the
 * maximum nor the upstream allows it; the upstream's own error when it failed otherwise. */
crmm_status pool_grow(pool_resource *p, pool_stream *s, size_t size, crmm_cuda_stream_t stream, pool_block **out);
/* Grow for a graph's private use (graph_pool = private): a free block of state s of at least
 * `size` bytes that shares its memory with no other block (the fewest pages that hold it, mapped
 * for it alone and merged with no neighbour; or a chunk of its own of `size` rounded up to
 * POOL_CAPTURE_SMALL_SEGMENT, of exactly `size` when that does not fit the maximum or the
 * upstream). *out: that block, in s's free list. Errors as pool_grow's. */
crmm_status pool_grow_fresh(pool_resource *p, pool_stream *s, size_t size, crmm_cuda_stream_t stream, pool_block **out);
/* Take exactly `size` bytes from upstream as a new chunk for state s (the initial pool). */
crmm_status pool_add_chunk(pool_resource *p, pool_stream *s, size_t size, crmm_cuda_stream_t stream);
/* Give every wholly free chunk back to the upstream. */
crmm_status pool_trim(crmm_resource *self);
/* Give every chunk back (destroy), whatever it holds. */
void pool_release_all(pool_resource *p);
/* The chunk that contains addr, or NULL (a scan; for error messages). */
const pool_chunk *pool_chunk_containing(const pool_resource *p, uintptr_t addr);

/* ---- pool_expand.c: growth of an expandable pool ------------------------------------------ */
/* Reserve an address range of `range_bytes` on `device` as the pool's one chunk, all unmapped,
 * in pages of page_size (pool_vmm_reserve), and make the pool expandable. Errors:
 * CRMM_ERROR_CUDA (the virtual memory API refused), CRMM_ERROR_OUT_OF_MEMORY. */
crmm_status pool_expand_init(pool_resource *p, int device, size_t range_bytes, size_t page_size);
/* Map pages so that state s has a free block of at least `size` (giving back free pages first
 * when they pass release_threshold); *out: that block. CRMM_ERROR_OUT_OF_MEMORY naming the
 * limit (device memory, maximum_size or the address range) when nothing helps. */
crmm_status pool_expand_grow(pool_resource *p, pool_stream *s, size_t size, pool_block **out);
/* pool_expand_grow for pool_grow_fresh: the fewest pages that hold `size`, joined to no free
 * neighbour, and never a move of pages (it runs under capture). */
crmm_status pool_expand_grow_fresh(pool_resource *p, pool_stream *s, size_t size, pool_block **out);
/* Map `size` bytes at creation as a free block of state s. */
crmm_status pool_expand_map_initial(pool_resource *p, pool_stream *s, size_t size);
/* Unmap every whole free page beyond release_threshold (after a device synchronization). */
crmm_status pool_expand_trim(pool_resource *p);
/* pool_plan_asked.give for the plan (ctx: the pool): up to `pages` (`all`: exactly that many, or
 * none) whole free pages of the planned stream's free blocks, beyond release_threshold and
 * initial_size, lent from the range as a move that does not wait lends them, their memory put on
 * to's spare list; the range's mark falls by as much. None under capture, with page_moves = never,
 * or when no batch of lent pages is free or of the planned stream. */
size_t pool_expand_give_to_plan(void *ctx, pool_vmm *to, size_t pages, bool all);
/* Unmap everything and free the range (destroy). */
void pool_expand_release_all(pool_resource *p);

/* ---- pool_fork.c: the locks around fork() ------------------------------------------------- */
/* Add p's guard (after create has made everything it guards) / remove it (first in destroy). */
void pool_fork_guard_add(pool_resource *p);
void pool_fork_guard_remove(pool_resource *p);

/* ---- pool_query.c ---------------------------------------------------------------------------- */
crmm_status pool_query(crmm_resource *self, crmm_query what, uint64_t *out);
/* Set every peak to its current figure (CRMM_POOL_OP_RESET_PEAKS); takes the lock. */
void pool_reset_peaks(pool_resource *p);

#endif
