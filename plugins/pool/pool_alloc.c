/* pool_alloc.c — the pool's allocate and deallocate: the hot path.
 *
 * allocate rounds the size up to 256 bytes and, under the pool's lock, finds the caller's stream
 * state (a one-entry cache), takes the head of the first fitting class of its free list (two
 * bit scans) or else of the ready state's list (blocks any stream may use at once), cuts the rest
 * off as a free block of the same state, and puts the block in the live map. That is the whole
 * fast path: no CUDA call, no malloc, no scan. Anything else goes to
 * allocate_slow: spare records or map slots to allocate, a stream seen for the first time, and a
 * miss. A miss that no growth could ever serve (larger than maximum_size, or than an expandable
 * pool's device memory: pool_check_maximum) fails there at once, with nothing waited for or
 * given back; any other climbs a ladder (the
 * table `ladder`, or `capture_ladder` while a stream is captured): the size's own class, the
 * other streams' free blocks (pool_streams_take: ordered by a device synchronization or by an
 * event, as stream_reuse says), the per-thread caches, growing from upstream (pool_grow), every
 * cache and growth again, and last the other streams' blocks with a device synchronization
 * allowed whatever fits.
 *
 * deallocate removes the pointer from the live map (O(1); a pointer that is not there is refused
 * before anything changes: never handed out, already freed, or inside a block), checks that the
 * `bytes` the caller passes are the bytes it asked for (a wrong size is refused and the block
 * stays live, as host, arena, binning and fixed_size refuse it: a layer above that counts what
 * it frees must never count a size the pool did not hand out), merges the block with its free
 * neighbours of the same stream and files it under the stream it was freed on.
 *
 * Once threads contend for the lock (thread_cache = auto) or a second thread has allocated
 * (thread_cache = on), both go through the calling thread's cache first (pool_thread_cache.h): a hit takes only the cache's lock; a miss takes a
 * block the way above and records it in the cache's live map; growth drains the caller's cache
 * first (and every cache when they hold a large share of the pool). */
#include "build_config.h"
#include <crmm/log.h>
#include "pool_resource.h"

/* Count an allocation in the pool's own counts; with caches off, they are the figures, so they
 * raise the peaks. With caches on they leave out what the caches count (a block allocated here
 * may be freed into another thread's delta), so every peak is raised by the sums only
 * (pool_cache_sum at a query, pool_cache_drain_all). */
static inline void count_allocation(pool_resource *p, size_t bytes, size_t size)
{
    pool_counts_allocated(&p->core.counts, bytes, size);
    pool_peaks_raise(&p->core.peaks, &p->core.counts, POOL_PEAKS_ALL);
}

static inline void count_allocation_caching(pool_resource *p, size_t bytes, size_t size)
{
    pool_counts_allocated(&p->core.counts, bytes, size);
}

/* ---- the slow path: a ladder of ways to find a free block, tried in order ------------------- */

/* What one rung gets: the request, and where a block it finds goes (*out, in the list of *sp). */
typedef struct pool_request {
    pool_resource *p;
    pool_stream *s;                /* the caller's stream state */
    size_t size;
    crmm_cuda_stream_t stream;
    pool_stream **sp;
    pool_block **out;
} pool_request;

/* A rung: CRMM_OK with *out set (found), CRMM_OK with *out NULL (try the next rung), or an error. */
typedef crmm_status (*pool_rung_fn)(const pool_request *rq);

typedef struct pool_rung {
    pool_rung_fn try_rung;
    bool oom_goes_on; /* CRMM_ERROR_OUT_OF_MEMORY: try the next rung; returned when none finds */
} pool_rung;

/* The caller's own stream's free list. */
static crmm_status rung_own_list(const pool_request *rq)
{
    *rq->sp = rq->s;
    *rq->out = pool_free_list_fit(&rq->s->free, rq->size);
    return CRMM_OK;
}

/* Finds nothing: the blocks of destroyed graphs join the ready state for the rungs after it. */
static crmm_status rung_collect_graphs(const pool_request *rq)
{
    pool_capture_collect(rq->p);
    return CRMM_OK;
}

/* The ready state's blocks, which any stream may use at once. */
static crmm_status rung_ready_state(const pool_request *rq)
{
    pool_stream *ready = rq->p->core.streams.ready;
    if (ready && (*rq->out = pool_free_list_fit(&ready->free, rq->size)))
        *rq->sp = ready;
    return CRMM_OK;
}

/* The caller's per-thread cache given back, then its own list (nothing that waits). */
static crmm_status rung_my_cache(const pool_request *rq)
{
    if (pool_caching(rq->p) && pool_cache_drain_mine(rq->p, rq->stream))
        return rung_own_list(rq);
    return CRMM_OK;
}

/* The other streams' free blocks, ordered by a device synchronization or an event as
 * stream_reuse says (pool_streams_take). */
static crmm_status rung_other_streams(const pool_request *rq)
{
    return pool_streams_take(&rq->p->core.streams, &rq->p->core.records, rq->s, rq->size, false, rq->sp, rq->out);
}

/* Before the pool takes more from upstream: the caller's own cached blocks, and every cache's
 * when together they hold a large share of the pool (pool_thread_cache.h); then the caller's
 * list and the other streams' again. */
static crmm_status rung_caches(const pool_request *rq)
{
    pool_resource *p = rq->p;
    if (!pool_caching(p))
        return CRMM_OK;
    bool gave = pool_cache_drain_mine(p, rq->stream);
    if (pool_cache_bytes(p) > p->growth.reserved / POOL_CACHE_DRAIN_SHARE)
        gave = pool_cache_drain_all(p) || gave;
    if (!gave || (rung_own_list(rq), *rq->out))
        return CRMM_OK;
    return rung_other_streams(rq);
}

/* Growth from upstream (pool_grow), into the caller's stream state. */
static crmm_status rung_grow(const pool_request *rq)
{
    *rq->sp = rq->s;
    return pool_grow(rq->p, rq->s, rq->size, rq->stream, rq->out);
}

/* Out of room: every cache's blocks (they may merge into one that fits, and an expandable pool
 * can give their pages back and map them where the growth needs them) and every cache's count of
 * frees (an expandable pool then sees the free pages other threads' frees left), then growth
 * again. */
static crmm_status rung_all_caches_then_grow(const pool_request *rq)
{
    if (!pool_caching(rq->p) || !pool_cache_drain_all(rq->p))
        return CRMM_OK;
    crmm_status st = rung_own_list(rq);
    return *rq->out ? st : rung_grow(rq);
}

/* The last resort: every other stream's blocks after a device synchronization, whatever fits. */
static crmm_status rung_other_streams_synchronized(const pool_request *rq)
{
    return pool_streams_take(&rq->p->core.streams, &rq->p->core.records, rq->s, rq->size, true, rq->sp, rq->out);
}

/* The ladder of an ordinary allocation. */
static const pool_rung ladder[] = {
    { rung_own_list, false },
    { rung_collect_graphs, false },
    { rung_other_streams, false },
    { rung_caches, false },
    { rung_grow, true },
    { rung_all_caches_then_grow, true },
    { rung_other_streams_synchronized, false },
    { NULL, false },
};

/* The ladder while a stream is captured (p->capturing): no synchronization, no event and no
 * other stream's blocks, which would need one. */
static const pool_rung capture_ladder[] = {
    { rung_own_list, false },
    { rung_collect_graphs, false },
    { rung_ready_state, false },
    { rung_my_cache, false },
    { rung_grow, false },
    { NULL, false },
};

/* Under the lock, before a slow allocation: `records` spare records and a slot of `map` ready,
 * and *s the state of `stream` (made at its first use). CRMM_ERROR_OUT_OF_MEMORY naming the pool
 * when malloc fails. */
static crmm_status prepare_slow(pool_resource *p, crmm_cuda_stream_t stream, unsigned records, pool_block_map *map,
                                pool_stream **s)
{
    char label[80];
    if (!pool_records_reserve(&p->core.records, records) || !pool_block_map_grow(map))
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: malloc failed (block records)", pool_label(p, label, sizeof label));
    if (!(*s = pool_streams_find(&p->core.streams, stream)))
        return crmm_error_add_context("%s", pool_label(p, label, sizeof label));
    return CRMM_OK;
}

/* After a rung found a block: a spare record for cutting it to size. The rungs may have used
 * those prepare_slow made (an expandable pool's growth cuts free blocks to unmap their pages).
 * CRMM_ERROR_OUT_OF_MEMORY naming the pool when malloc fails; the block stays where it is. */
static crmm_status spare_for_cut(pool_resource *p)
{
    char label[80];
    if (pool_records_reserve(&p->core.records, 1))
        return CRMM_OK;
    return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: malloc failed (block records)", pool_label(p, label, sizeof label));
}

/* Everything the fast path does not do; on CRMM_OK, *out is a free block of at least `size` in
 * the list of *sp, and a spare record and a slot of `map` are ready. */
static crmm_status allocate_slow(pool_resource *p, crmm_cuda_stream_t stream, size_t size, pool_block_map *map,
                                 pool_stream **sp, pool_block **out)
{
    /* a request no growth could ever serve fails before anything changes: the ladder's
     * out-of-memory path would wait for the device and give memory back for nothing */
    crmm_status fits = pool_check_maximum(p, size);
    if (fits != CRMM_OK)
        return fits;
    pool_stream *s;
    /* two spare records: a new chunk's block (growth) and the rest of a split */
    crmm_status prepared = prepare_slow(p, stream, 2, map, &s);
    if (prepared != CRMM_OK)
        return prepared;
    const pool_request rq = { p, s, size, stream, sp, out };
    crmm_status out_of_memory = CRMM_OK;
    *out = NULL;
    for (const pool_rung *r = __builtin_expect(p->capturing, 0) ? capture_ladder : ladder; r->try_rung; r++) {
        crmm_status st = r->try_rung(&rq);
        if (st == CRMM_ERROR_OUT_OF_MEMORY && r->oom_goes_on)
            out_of_memory = st;
        else if (st != CRMM_OK)
            return st;
        else if (*out)
            return spare_for_cut(p);
    }
    if (out_of_memory != CRMM_OK)
        return out_of_memory;
    char label[80];
    return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: no free block of %zu bytes", pool_label(p, label, sizeof label),
                          size);
}

/* Under the lock: free block b of s's list out of it, cut to `size` (a spare record ready) and
 * owned by no list. */
static inline void cut_to_size(pool_resource *p, pool_stream *s, pool_block *b, size_t size)
{
    pool_free_list_remove(&s->free, b);
    if (b->size > size) {
        /* the rest stays free on this stream; its upper neighbour cannot be a free block of the
         * same stream (it would have merged with b), so it needs no merging */
        pool_free_list_insert(&s->free, pool_block_split(&p->core.records, b, b->addr + size));
    }
    b->owner = NULL;
}

/* Under the lock, the fast path's find: a free block of at least `size` in the list of *sp (the
 * stream's state s, else the ready state), when a spare record and a slot of `map` are ready;
 * NULL when the slow path must run. */
static inline pool_block *find_fast(pool_resource *p, pool_stream *s, size_t size, const pool_block_map *map,
                                    pool_stream **sp)
{
    pool_block *b = NULL;
    *sp = s;
    if (__builtin_expect(s && p->core.records.spare_count && pool_block_map_has_room(map), 1)) {
        b = pool_free_list_find(&s->free, size);
        pool_stream *ready = p->core.streams.ready;
        if (!b && ready && (b = pool_free_list_find(&ready->free, size)))
            *sp = ready; /* any stream may use it at once; the rest of a split stays ready */
    }
    return b;
}

/* Under the lock: a block of `size` bytes for `stream`, cut to size and out of every list (owner
 * NULL), with a slot of `map` ready for it; NULL with *st set when there is none. */
static inline pool_block *take_block(pool_resource *p, crmm_cuda_stream_t stream, size_t size, pool_block_map *map,
                                     crmm_status *st)
{
    pool_stream *s;
    pool_block *b = find_fast(p, pool_streams_find(&p->core.streams, stream), size, map, &s);
    if (__builtin_expect(!b, 0) && (*st = allocate_slow(p, stream, size, map, &s, &b)) != CRMM_OK)
        return NULL;
    cut_to_size(p, s, b, size);
    return b;
}

/* An id of the calling thread, unique among live threads: the thread pointer where the compiler
 * gives it (one instruction, no call), else pthread_self(). */
static inline uintptr_t thread_id(void)
{
#if defined(__has_builtin) && __has_builtin(__builtin_thread_pointer)
    return (uintptr_t)__builtin_thread_pointer();
#else
    return (uintptr_t)pthread_self();
#endif
}

/* Under the lock, with thread_cache = on: note the calling thread; a second one switches the
 * caches on. */
static void note_thread(pool_resource *p, uintptr_t me)
{
    if (!p->cache.first_thread)
        p->cache.first_thread = me;
    else if (p->cache.first_thread != me)
        __atomic_store_n(&p->cache.caching, 1, __ATOMIC_RELAXED);
}

/* Under the lock, at the end of a window of POOL_CONTENTION_WINDOW locked operations: with
 * thread_cache = auto, enough of them waited for the lock to switch the caches on. */
static void end_contention_window(pool_resource *p)
{
    if (p->cache.cache_mode == POOL_CACHE_AUTO && p->cache.lock_waits >= POOL_CONTENTION_WAITS) {
        __atomic_store_n(&p->cache.caching, 1, __ATOMIC_RELAXED);
        if (crmm_log_should_log(CRMM_LOG_INFO)) {
            char label[80];
            crmm_log(CRMM_LOG_INFO, "%s: per-thread caches on (%u of the last %u locked calls waited for the lock)",
                     pool_label(p, label, sizeof label), (unsigned)p->cache.lock_waits, (unsigned)POOL_CONTENTION_WINDOW);
        }
    }
    p->cache.lock_ops = p->cache.lock_waits = 0;
}

/* pool_lock for allocate and deallocate, counting how often the lock was held by another thread
 * (the fast half of spin_lock, then its waiting half). */
static inline void lock_counting_waits(pool_resource *p)
{
    if (__builtin_expect(__atomic_exchange_n(&p->lock, 1, __ATOMIC_ACQUIRE) != 0, 0)) {
        spin_lock_contended(&p->lock);
        p->cache.lock_waits++;
        p->cache.lock_waits_total++;
    }
    if (__builtin_expect(++p->cache.lock_ops == POOL_CONTENTION_WINDOW, 0))
        end_contention_window(p);
}

/* The pool's lock only if it is free at once, counted as lock_counting_waits counts. */
static inline bool try_lock_counting(pool_resource *p)
{
    if (__atomic_load_n(&p->lock, __ATOMIC_RELAXED) || __atomic_exchange_n(&p->lock, 1, __ATOMIC_ACQUIRE))
        return false;
    if (__builtin_expect(++p->cache.lock_ops == POOL_CONTENTION_WINDOW, 0))
        end_contention_window(p);
    return true;
}

/* Under the lock, with caches off as far as the caller saw: live block b of `bytes` into the live
 * map and the counts; unlocks. */
static inline void *finish_allocation(pool_resource *p, pool_block *b, size_t bytes)
{
    b->u.live.requested = bytes;
    pool_block_map_insert(&p->core.live, b);
    if (__builtin_expect(pool_caching(p), 0))
        count_allocation_caching(p, bytes, b->size);
    else
        count_allocation(p, bytes, b->size);
    pool_unlock(p);
    return (void *)b->addr;
}

/* Under the lock, with a plan: the request served at its planned place (pool_plan.h) as a live
 * block of the pool's map; unlocks and returns the address. NULL, still locked, when the plan does
 * not serve it. */
static void *planned_allocate(pool_resource *p, size_t bytes, size_t size, crmm_cuda_stream_t stream)
{
    if (!pool_records_reserve(&p->core.records, 1) ||
        (!pool_block_map_has_room(&p->core.live) && !pool_block_map_grow(&p->core.live)))
        return NULL; /* the ordinary path says so */
    /* the plan maps no page past the pool's maximum or the device's memory */
    uint64_t held = pool_held(p), limit = p->growth.maximum < p->growth.device_memory ? p->growth.maximum
                                                                                      : p->growth.device_memory;
    uint64_t mapped;
    uint64_t counted = (uint64_t)p->core.counts.block_bytes;
    pool_plan_asked asked = {limit > held ? limit - held : 0, counted > p->plan->live ? counted - p->plan->live : 0,
                             pool_expand_give_to_plan, p};
    uintptr_t addr = pool_plan_take(p->plan, size, stream, &asked, &mapped);
    if (mapped)
        pool_raise_held_peak(p);
    if (!addr)
        return NULL;
    pool_block *b = pool_records_take(&p->core.records);
    *b = (pool_block){.addr = addr, .size = size};
    return finish_allocation(p, b, bytes);
}

/* Under the lock: planned block b, just removed from the live map, freed on `stream` (under
 * capture into graph `capturing`, else NULL); its record goes back. */
static void planned_free(pool_resource *p, pool_block *b, crmm_cuda_stream_t stream, const pool_graph *capturing)
{
    pool_counts_freed(&p->core.counts, b->u.live.requested, b->size);
    pool_plan_release(p->plan, b->addr, b->size, stream, capturing);
    pool_records_put(&p->core.records, b);
}

/* allocate with caches on (see the top). */
static crmm_status cached_allocate(pool_resource *p, size_t bytes, size_t size, crmm_cuda_stream_t stream, void **ptr)
{
    pool_thread_cache *c = size <= POOL_CACHE_MAX_BLOCK ? pool_cache_get(p, stream) : NULL;
    pool_block_map *map = &p->core.live;
    if (c) {
        spin_lock(&c->lock);
        pool_block *b = pool_cache_take(c, size);
        if (b && !pool_block_map_has_room(&c->live) && !pool_block_map_grow(&c->live)) {
            pool_block *none[1];
            pool_cache_push(c, b, none); /* back where it was: the cache had room for it */
            b = NULL;
        }
        if (b) {
            b->u.live.requested = bytes;
            pool_block_map_insert(&c->live, b);
            pool_counts_allocated(&c->delta, bytes, b->size);
            spin_unlock(&c->lock);
            *ptr = (void *)b->addr;
            return CRMM_OK;
        }
        spin_unlock(&c->lock);
        map = &c->live; /* only this thread adds to it, and every other user holds the pool's lock */
    }
    crmm_status st = CRMM_OK;
    pool_lock(p);
    pool_block *b = take_block(p, stream, size, map, &st);
    if (!b) {
        pool_unlock(p);
        return st;
    }
    b->u.live.requested = bytes;
    if (c)
        spin_lock(&c->lock);
    pool_block_map_insert(map, b);
    if (c)
        spin_unlock(&c->lock);
    count_allocation_caching(p, bytes, b->size);
    pool_unlock(p);
    *ptr = (void *)b->addr;
    return CRMM_OK;
}

/* Under the lock, graph_pool = private, nothing parked fitting: a block of `size` bytes for g's
 * capture on `stream` on pages of g's alone (docs/cuda-graphs.md): POOL_CAPTURE_SMALL_SEGMENT for a
 * small request, else `size`, in whole pages, from free pages the stream may use at once, else
 * new memory (pool_grow_fresh; for a small request that finds no room for a segment, `size`
 * alone, from free pages or new ones); the rest stays parked for the capture. Out of every list and not yet owned; NULL with
 * *st set when the pool cannot grow. */
static pool_block *grow_for_graph(pool_resource *p, pool_graph *g, size_t size, crmm_cuda_stream_t stream, crmm_status *st)
{
    pool_stream *s;
    if ((*st = pool_check_maximum(p, size)) != CRMM_OK)
        return NULL;
    /* three spare records: the cut below the run of pages, the one above it, the rest of the request's */
    if ((*st = prepare_slow(p, stream, 3, &p->core.live, &s)) != CRMM_OK)
        return NULL;
    size_t want = size <= POOL_CAPTURE_SMALL ? POOL_CAPTURE_SMALL_SEGMENT : size;
    pool_block *b = pool_capture_take_pages(p, s, want);
    if (!b) {
        *st = pool_grow_fresh(p, s, want, stream, &b);
        if (*st != CRMM_OK && want > size) { /* no room for a whole segment: the request alone,
                                               * from free pages that hold it, else new ones */
            crmm_clear_error();
            b = pool_capture_take_pages(p, s, size);
            *st = b ? CRMM_OK : pool_grow_fresh(p, s, size, stream, &b);
        }
        if (*st != CRMM_OK)
            return NULL;
        if (b->owner) { /* new memory: still in s's free list */
            pool_free_list_remove(&s->free, b);
            b->owner = NULL;
        }
    }
    pool_capture_keep_rest(p, g, b, size, stream);
    return b;
}

/* allocate on a stream under capture (pool_capture.h): a parked block of the same capture and
 * stream, else a block taken as usual but without waiting for anything, never from a per-thread
 * cache (graph_pool = private: from memory taken for the graph alone); the block is then the
 * graph's. Growth runs with the thread's capture mode relaxed. */
static crmm_status capture_allocate(pool_resource *p, size_t bytes, size_t size, crmm_cuda_stream_t stream,
                                    const pool_capture *cap, void **ptr)
{
    pool_graph *g;
    crmm_status st = pool_capture_graph(p, cap, &g);
    if (st != CRMM_OK)
        return st;
    int mode;
    pool_capture_relax_mode(&mode);
    pool_lock(p);
    pool_block *b = NULL;
    bool reused = false;
    if (pool_capture_has_parked(g) && (pool_block_map_has_room(&p->core.live) || pool_block_map_grow(&p->core.live)) &&
        pool_records_reserve(&p->core.records, 1))
        reused = (b = pool_capture_reuse(p, g, size, stream)) != NULL;
    if (!b) {
        p->capturing = true;
        b = p->graph_private ? grow_for_graph(p, g, size, stream, &st) : take_block(p, stream, size, &p->core.live, &st);
        p->capturing = false;
    }
    if (b) {
        b->u.live.requested = bytes;
        pool_block_map_insert(&p->core.live, b);
        if (b->graph != (uintptr_t)g)
            pool_capture_own(g, b);
        size_t counted = reused ? 0 : b->size; /* a parked block stayed counted live */
        if (pool_caching(p))
            count_allocation_caching(p, bytes, counted);
        else
            count_allocation(p, bytes, counted);
    }
    pool_unlock(p);
    pool_capture_restore_mode(mode);
    if (!b) {
        char label[80], sz[32];
        return crmm_error_add_context("%s: allocating %s on stream %p while it is captured into a CUDA graph (capture %llu)",
                                      pool_label(p, label, sizeof label), crmm_format_size(bytes, sz, sizeof sz),
                                      (void *)stream, cap->id);
    }
    *ptr = (void *)b->addr;
    return CRMM_OK;
}

crmm_status pool_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    pool_resource *p = (pool_resource *)self;
    if (__builtin_expect(bytes > POOL_MAX_REQUEST, 0)) {
        char label[80], sz[32];
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: failed to allocate %s (larger than any pool can be)",
                              pool_label(p, label, sizeof label), crmm_format_size(bytes, sz, sizeof sz));
    }
    size_t size = (bytes + CRMM_ALLOCATION_ALIGNMENT - 1) & ~(size_t)(CRMM_ALLOCATION_ALIGNMENT - 1);
    pool_capture cap;
    if (pool_capture_gate(p) && pool_capture_query(p, stream, &cap))
        return capture_allocate(p, bytes, size, stream, &cap, ptr);
    if (__builtin_expect(pool_caching(p), 0))
        return cached_allocate(p, bytes, size, stream, ptr);
    lock_counting_waits(p);
    if (__builtin_expect(p->cache.cache_mode == POOL_CACHE_ON, 0))
        note_thread(p, thread_id());
    if (__builtin_expect(p->plan != NULL, 0) && (*ptr = planned_allocate(p, bytes, size, stream)))
        return CRMM_OK;
    crmm_status st = CRMM_OK;
    pool_block *b = take_block(p, stream, size, &p->core.live, &st);
    if (__builtin_expect(!b, 0)) {
        pool_unlock(p);
        return st;
    }
    *ptr = finish_allocation(p, b, bytes);
    return CRMM_OK;
}

/* allocate's fast path alone, without waiting (crmm_resource_ops.try_allocate): caches off, no
 * plan, no capture, the lock free, the stream the one served last, a free block that fits. */
bool pool_try_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    pool_resource *p = (pool_resource *)self;
    pool_capture cap;
    if (bytes > POOL_MAX_REQUEST || pool_caching(p) || p->plan || (pool_capture_gate(p) && pool_capture_query(p, stream, &cap)) ||
        !try_lock_counting(p))
        return false;
    if (__builtin_expect(p->cache.cache_mode == POOL_CACHE_ON, 0))
        note_thread(p, thread_id());
    size_t size = (bytes + CRMM_ALLOCATION_ALIGNMENT - 1) & ~(size_t)(CRMM_ALLOCATION_ALIGNMENT - 1);
    pool_stream *s;
    pool_block *b = find_fast(p, pool_streams_find_last(&p->core.streams, stream), size, &p->core.live, &s);
    if (!b) {
        pool_unlock(p);
        return false;
    }
    cut_to_size(p, s, b, size);
    *ptr = finish_allocation(p, b, bytes);
    return true;
}

/* The message for a pointer that is not a live block of the pool (called with the lock held). */
static crmm_status refuse_pointer(pool_resource *p, void *ptr)
{
    char label[80];
    pool_label(p, label, sizeof label);
    uintptr_t a = (uintptr_t)ptr;
    if (pool_plan_holds(p->plan, a))
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                              "%s: deallocate: %p is not a live allocation (in the plan's range: already free, or "
                              "inside a block)", label, ptr);
    const pool_chunk *c = pool_chunk_containing(p, a);
    if (!c)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: deallocate: %p was not allocated by this pool", label, ptr);
    for (const pool_block *b = c->first; b; b = b->phys_next) {
        if (a < b->addr || a >= b->addr + b->size)
            continue;
        if (pool_block_is_free(b) || pool_capture_block_parked(b)) /* parked: merged into a neighbour */
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: deallocate: %p is already free (double free?)", label, ptr);
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                              "%s: deallocate: %p points inside the allocation at %p, not at its start", label, ptr,
                              (void *)b->addr);
    }
    return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: deallocate: %p is not a live allocation", label, ptr);
}

/* A wrong-size free of live block b, just removed from `map`: b goes back into it (the removal
 * left room) and stays live, so that the right free still works. Called with the lock that guards
 * `map` held. */
/* deallocate under the pool's lock: the pool's live map, then (caches on) every cache's. */
static crmm_status locked_deallocate(pool_resource *p, void *ptr, size_t bytes, crmm_cuda_stream_t stream,
                                     pool_graph *capturing)
{
    lock_counting_waits(p);
    pool_stream *s = pool_streams_find(&p->core.streams, stream);
    if (__builtin_expect(!s, 0)) {
        char label[80];
        pool_unlock(p);
        return crmm_error_add_context("%s: deallocate", pool_label(p, label, sizeof label));
    }
    pool_block *b = pool_block_map_remove(&p->core.live, (uintptr_t)ptr);
    crmm_status st = CRMM_OK;
    if (__builtin_expect(b != NULL && b->u.live.requested != bytes, 0)) {
        st = pool_refuse_size(p, &p->core.live, b, bytes);
        pool_unlock(p);
        return st;
    }
    if (__builtin_expect(b != NULL && pool_plan_holds(p->plan, b->addr), 0)) {
        planned_free(p, b, stream, capturing);
        pool_unlock(p);
        return CRMM_OK;
    }
    if (__builtin_expect(b != NULL && !capturing && !b->graph, 1)) {
        pool_counts_freed(&p->core.counts, b->u.live.requested, b->size);
    } else if (b) { /* a graph's block, or a free under capture: held for the graph (pool_capture.h) */
        pool_counts_freed(&p->core.counts, b->u.live.requested, 0);
        if (pool_capture_free(p, b, capturing, stream)) {
            pool_unlock(p);
            return CRMM_OK;
        }
        pool_counts_held(&p->core.counts, -(int64_t)b->size); /* its graph is gone: not held */
    } else if (pool_caching(p) && (b = pool_cache_remove_live(p, (uintptr_t)ptr, bytes, &st)) != NULL) {
        /* counted there */
    } else if (st != CRMM_OK) { /* live in a cache's map, freed with a wrong size */
        pool_unlock(p);
        return st;
    } else {
        if ((pool_caching(p) && pool_cache_holds(p, (uintptr_t)ptr)) ||
            (p->graphs && pool_capture_is_parked(p, (uintptr_t)ptr))) {
            char label[80];
            st = crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: deallocate: %p is already free (double free?)",
                                pool_label(p, label, sizeof label), ptr);
        } else {
            st = refuse_pointer(p, ptr);
        }
        pool_unlock(p);
        return st;
    }
    pool_free_list_insert_merging(&s->free, s, b, &p->core.records);
    pool_unlock(p);
    return CRMM_OK;
}

/* deallocate with caches on: a block of the caller's own live map for this stream goes into its
 * cache under the cache's lock alone. */
static crmm_status cached_deallocate(pool_resource *p, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    pool_thread_cache *c = pool_cache_find(p, stream);
    if (!c)
        return locked_deallocate(p, ptr, bytes, stream, NULL);
    spin_lock(&c->lock);
    /* a full cache evicts blocks to the free lists: under the pool's lock (taken first, as the
     * lock order says), so that at no moment, a fork's included, are blocks in no list. Only this
     * thread fills its cache, so one found not full stays so until the push. */
    bool full = pool_cache_full(c);
    if (full) {
        spin_unlock(&c->lock);
        pool_lock(p);
        spin_lock(&c->lock);
    }
    pool_block *b = pool_block_map_remove(&c->live, (uintptr_t)ptr);
    if (!b) {
        spin_unlock(&c->lock);
        if (full)
            pool_unlock(p);
        return locked_deallocate(p, ptr, bytes, stream, NULL);
    }
    if (__builtin_expect(b->u.live.requested != bytes, 0)) {
        crmm_status st = pool_refuse_size(p, &c->live, b, bytes);
        spin_unlock(&c->lock);
        if (full)
            pool_unlock(p);
        return st;
    }
    /* a full cache's oldest blocks go to the free list of its stream: when that stream's state
     * cannot be made (malloc failed), nothing moves and the free is refused, the block staying
     * live, as locked_deallocate refuses a free on a stream it cannot make a state for */
    bool evicts = full && pool_cache_full(c); /* still full: no drain emptied it meanwhile */
    pool_stream *home = evicts ? pool_cache_home(p, c) : NULL;
    if (__builtin_expect(evicts && !home, 0)) {
        pool_block_map_insert(&c->live, b); /* the removal left room */
        spin_unlock(&c->lock);
        pool_unlock(p);
        char label[80];
        return crmm_error_add_context("%s: deallocate", pool_label(p, label, sizeof label));
    }
    pool_counts_freed(&c->delta, b->u.live.requested, b->size);
    pool_block *out[POOL_CACHE_BLOCKS];
    unsigned n = pool_cache_push(c, b, out); /* not larger than POOL_CACHE_MAX_BLOCK: no cache took it */
    if (n)
        pool_cache_give_back(p, home, out, n);
    spin_unlock(&c->lock);
    if (full)
        pool_unlock(p);
    return CRMM_OK;
}

/* deallocate on a stream under capture: the block is parked for the graph (pool_capture.h). A
 * block in a per-thread cache's live map was allocated outside any capture; it leaves the cache
 * for the graph. */
static crmm_status capture_deallocate(pool_resource *p, void *ptr, size_t bytes, crmm_cuda_stream_t stream,
                                      const pool_capture *cap)
{
    pool_graph *g;
    crmm_status st = pool_capture_graph(p, cap, &g);
    if (st != CRMM_OK)
        return st;
    if (!pool_caching(p))
        return locked_deallocate(p, ptr, bytes, stream, g);
    pool_lock(p);
    pool_block *b = pool_block_map_remove(&p->core.live, (uintptr_t)ptr);
    if (b && b->u.live.requested != bytes) {
        st = pool_refuse_size(p, &p->core.live, b, bytes);
        pool_unlock(p);
        return st;
    }
    if (b && pool_plan_holds(p->plan, b->addr)) {
        planned_free(p, b, stream, g);
        pool_unlock(p);
        return CRMM_OK;
    }
    if (b)
        pool_counts_freed(&p->core.counts, b->u.live.requested, 0);
    else if ((b = pool_cache_remove_live(p, (uintptr_t)ptr, bytes, &st)))
        pool_counts_held(&p->core.counts, (int64_t)b->size); /* counted free there; the block stays held */
    else if (st != CRMM_OK) {
        pool_unlock(p);
        return st;
    }
    if (!b) {
        pool_unlock(p);
        return locked_deallocate(p, ptr, bytes, stream, g); /* the pool's message for a bad pointer */
    }
    pool_capture_free(p, b, g, stream);
    pool_unlock(p);
    return CRMM_OK;
}

crmm_status pool_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    pool_resource *p = (pool_resource *)self;
    pool_capture cap;
    if (pool_capture_gate(p) && pool_capture_query(p, stream, &cap))
        return capture_deallocate(p, ptr, bytes, stream, &cap);
    if (__builtin_expect(pool_caching(p), 0))
        return cached_deallocate(p, ptr, bytes, stream);
    return locked_deallocate(p, ptr, bytes, stream, NULL);
}

/* deallocate's common path alone, without waiting (crmm_resource_ops.try_deallocate): caches
 * off, no capture, the lock free, the stream the one served last, a live block of the pool's own
 * map freed with its size, held by no graph and not placed by a plan. */
bool pool_try_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    pool_resource *p = (pool_resource *)self;
    pool_capture cap;
    if (pool_caching(p) || (pool_capture_gate(p) && pool_capture_query(p, stream, &cap)) || !try_lock_counting(p))
        return false;
    pool_stream *s = pool_streams_find_last(&p->core.streams, stream);
    pool_block *b = s ? pool_block_map_find(&p->core.live, (uintptr_t)ptr) : NULL;
    if (!b || b->u.live.requested != bytes || b->graph || pool_plan_holds(p->plan, b->addr)) {
        pool_unlock(p);
        return false;
    }
    pool_block_map_remove(&p->core.live, (uintptr_t)ptr);
    pool_counts_freed(&p->core.counts, b->u.live.requested, b->size);
    pool_free_list_insert_merging(&s->free, s, b, &p->core.records);
    pool_unlock(p);
    return true;
}
