/* pool_thread_cache.c — the pool's per-thread caches of free blocks (see pool_thread_cache.h for
 * the rules): finding a thread's cache, taking and pushing blocks, giving them back, draining,
 * thread exit and destroy.
 *
 * A thread's caches hang from a thread-local table of POOL_CACHE_SLOTS, made at its first cache
 * and handed to a pthread key whose destructor runs at the thread's exit. */
#include "build_config.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/log.h>
#include "pool_resource.h"

typedef struct cache_slots {
    pool_thread_cache *slot[POOL_CACHE_SLOTS];
    unsigned victim;               /* the slot given up next when all are taken */
} cache_slots;

static _Thread_local cache_slots *my_slots;
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static bool exit_key_made;
/* Orders thread exit, giving up a slot and destroy (the only three that reach a cache of a pool
 * that may be going away). */
static pthread_mutex_t registry = PTHREAD_MUTEX_INITIALIZER;

static pool_resource *pool_of(const pool_thread_cache *c) { return __atomic_load_n(&c->pool, __ATOMIC_RELAXED); }

/* ---- finding the thread's cache ------------------------------------------------------------ */

pool_thread_cache *pool_cache_find(pool_resource *p, crmm_cuda_stream_t stream)
{
    cache_slots *t = my_slots;
    if (!t)
        return NULL;
    uint64_t thread;
    pool_streams_key(&p->core.streams, &stream, &thread);
    for (unsigned i = 0; i < POOL_CACHE_SLOTS; i++) {
        pool_thread_cache *c = t->slot[i];
        if (c && pool_of(c) == p && c->handle == stream && c->thread == thread)
            return c;
    }
    return NULL;
}

pool_stream *pool_cache_home(pool_resource *p, const pool_thread_cache *c)
{
    /* no device synchronization when malloc fails (it would make the blocks safe for every
     * stream): a free or a thread's exit must not wait, and under another stream's capture the
     * wait would invalidate the capture and fail. The blocks stay where they are instead. */
    return pool_streams_find_key(&p->core.streams, c->handle, c->thread);
}

/* Give c's cached blocks to the free list of their stream (both locks held). False when they had
 * to stay (no stream state could be made). */
static bool give_blocks(pool_resource *p, pool_thread_cache *c, bool *gave)
{
    if (!c->count)
        return true;
    pool_stream *s = pool_cache_home(p, c);
    if (!s) {
        crmm_clear_error(); /* malloc failed: they stay, found there, until a later drain */
        return false;
    }
    for (unsigned i = 0; i < POOL_CACHE_BLOCKS; i++)
        if (c->entries[i].block)
            pool_free_list_insert_merging(&s->free, s, c->entries[i].block, &p->core.records);
    pool_cache_reset(c);
    *gave = true;
    return true;
}

/* Give c's blocks, its live map and its delta to p (both locks held). False when some blocks or
 * live entries had to stay (malloc failed); they stay found there. */
static bool drain(pool_resource *p, pool_thread_cache *c, bool *gave)
{
    bool all = give_blocks(p, c, gave);
    if (c->live.count) {
        if (pool_block_map_reserve(&p->core.live, c->live.count)) {
            for (size_t i = 0; i <= c->live.mask; i++)
                if (c->live.slots[i].addr)
                    pool_block_map_insert(&p->core.live, c->live.slots[i].block);
            pool_block_map_clear(&c->live);
        } else {
            all = false;
        }
    }
    pool_counts_fold(&p->core.counts, &c->delta);
    return all;
}

bool pool_cache_drain_mine(pool_resource *p, crmm_cuda_stream_t stream)
{
    pool_thread_cache *c = pool_cache_find(p, stream);
    bool gave = false;
    if (!c)
        return false;
    /* the blocks and the delta; the live map stays, so that the thread's frees of its blocks keep
     * taking the cache's way. No peak is raised: the other caches' deltas are not in p's counts,
     * so these are not a sum that was ever live. */
    spin_lock(&c->lock);
    give_blocks(p, c, &gave);
    pool_counts_fold(&p->core.counts, &c->delta);
    spin_unlock(&c->lock);
    return gave;
}

uint64_t pool_cache_bytes(const pool_resource *p)
{
    uint64_t bytes = 0;
    for (const pool_thread_cache *c = p->cache.caches; c; c = c->next)
        bytes += __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
    return bytes;
}

bool pool_cache_drain_all(pool_resource *p)
{
    bool changed = false;
    for (pool_thread_cache *c = p->cache.caches; c; c = c->next) {
        spin_lock(&c->lock);
        changed |= c->delta.block_bytes != 0; /* frees the pool's own counts did not see */
        drain(p, c, &changed);
        spin_unlock(&c->lock);
    }
    /* every delta is in p's counts now: they are the sums */
    pool_peaks_raise(&p->core.peaks, &p->core.counts, POOL_PEAKS_ALL);
    return changed;
}

/* Give up the cache in slot i of t: drained, it goes to its pool as an orphan; a cache of a
 * destroyed pool is freed. */
static void release_slot(cache_slots *t, unsigned i)
{
    pool_thread_cache *c = t->slot[i];
    t->slot[i] = NULL;
    if (!c)
        return;
    pthread_mutex_lock(&registry);
    pool_resource *p = pool_of(c);
    if (p) {
        bool gave = false;
        pool_lock(p);
        spin_lock(&c->lock);
        drain(p, c, &gave);
        c->orphan = true;
        spin_unlock(&c->lock);
        pool_unlock(p);
    } else {
        pool_block_map_free(&c->live);
        free(c);
    }
    pthread_mutex_unlock(&registry);
}

static void thread_exit(void *arg)
{
    cache_slots *t = arg;
    for (unsigned i = 0; i < POOL_CACHE_SLOTS; i++)
        release_slot(t, i);
    if (my_slots == t)
        my_slots = NULL;
    free(t);
}

static void make_exit_key(void) { exit_key_made = pthread_key_create(&exit_key, thread_exit) == 0; }

/* The thread's slot table, made (and tied to the exit key) at its first cache. */
static cache_slots *slots_of_thread(void)
{
    if (my_slots)
        return my_slots;
    pthread_once(&exit_key_once, make_exit_key);
    if (!exit_key_made)
        return NULL; /* without the key a thread's exit could not give its blocks back */
    cache_slots *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    if (pthread_setspecific(exit_key, t) != 0) {
        free(t);
        return NULL;
    }
    return my_slots = t;
}

/* An orphan cache of p for key (handle, thread), or a new one; linked into p's list. */
static pool_thread_cache *claim_cache(pool_resource *p, crmm_cuda_stream_t handle, uint64_t thread)
{
    pool_lock(p);
    pool_thread_cache *c = p->cache.caches;
    while (c && !(c->orphan && !c->count)) /* an orphan that still holds blocks keeps its stream */
        c = c->next;
    if (c) {
        spin_lock(&c->lock);
        c->orphan = false;
        c->handle = handle;
        c->thread = thread;
        spin_unlock(&c->lock);
        pool_unlock(p);
        return c;
    }
    pool_unlock(p);
    /* a cache line of its own: the threads' caches never share one */
    size_t bytes = (sizeof *c + 63) & ~(size_t)63;
    c = aligned_alloc(64, bytes);
    if (!c)
        return NULL;
    memset(c, 0, bytes);
    if (!pool_block_map_init(&c->live, 64)) {
        free(c);
        return NULL;
    }
    pool_cache_reset(c);
    c->handle = handle;
    c->thread = thread;
    __atomic_store_n(&c->pool, p, __ATOMIC_RELAXED);
    pool_lock(p);
    c->next = p->cache.caches;
    p->cache.caches = c;
    pool_unlock(p);
    return c;
}

/* How deep the calling thread is in pools' calls to their upstreams under their locks. */
static _Thread_local unsigned calling_upstream;

void pool_cache_calling_upstream(bool calling)
{
    if (calling)
        calling_upstream++;
    else if (calling_upstream)
        calling_upstream--;
}

pool_thread_cache *pool_cache_get(pool_resource *p, crmm_cuda_stream_t stream)
{
    pool_thread_cache *c = pool_cache_find(p, stream);
    if (__builtin_expect(c != NULL, 1) || calling_upstream)
        return c;
    cache_slots *t = slots_of_thread();
    if (!t)
        return NULL;
    unsigned i = 0;
    while (i < POOL_CACHE_SLOTS && t->slot[i] && pool_of(t->slot[i]))
        i++;
    if (i == POOL_CACHE_SLOTS) {
        i = t->victim;
        t->victim = (t->victim + 1) % POOL_CACHE_SLOTS;
    }
    release_slot(t, i);
    uint64_t thread;
    pool_streams_key(&p->core.streams, &stream, &thread);
    return t->slot[i] = claim_cache(p, stream, thread);
}

/* ---- the cache's blocks -------------------------------------------------------------------- */

void pool_cache_reset(pool_thread_cache *c)
{
    memset(c->heads, POOL_CACHE_NONE, sizeof c->heads);
    for (unsigned i = 0; i < POOL_CACHE_BLOCKS; i++)
        c->entries[i] = (pool_cache_entry){.next = (uint8_t)(i + 1 < POOL_CACHE_BLOCKS ? i + 1 : POOL_CACHE_NONE)};
    c->unused = 0;
    c->count = 0;
    __atomic_store_n(&c->bytes, 0, __ATOMIC_RELAXED);
}

/* The class of a block of `size` bytes (256 <= size <= POOL_CACHE_MAX_BLOCK): 256-byte units
 * below 16 units, then 16 classes per power of two. */
static unsigned class_of(size_t size)
{
    uint64_t u = (uint64_t)size >> 8;
    if (u < 16)
        return (unsigned)u;
    unsigned msb = 63u - (unsigned)__builtin_clzll(u);
    return (msb - 3) * 16 + (unsigned)((u >> (msb - 4)) & 15);
}

static void unlink_entry(pool_thread_cache *c, unsigned i)
{
    pool_cache_entry *e = &c->entries[i];
    if (e->prev != POOL_CACHE_NONE)
        c->entries[e->prev].next = e->next;
    else
        c->heads[e->cls] = e->next;
    if (e->next != POOL_CACHE_NONE)
        c->entries[e->next].prev = e->prev;
    e->block = NULL;
    e->next = c->unused;
    c->unused = (uint8_t)i;
    c->count--;
    __atomic_store_n(&c->bytes, c->bytes - e->size, __ATOMIC_RELAXED);
}

/* The most recent entry of class k of at least lo and at most hi bytes, or POOL_CACHE_NONE. */
static unsigned find_in_class(const pool_thread_cache *c, unsigned k, size_t lo, size_t hi)
{
    unsigned i = c->heads[k];
    while (i != POOL_CACHE_NONE && (c->entries[i].size < lo || c->entries[i].size > hi))
        i = c->entries[i].next;
    return i;
}

pool_block *pool_cache_take(pool_thread_cache *c, size_t size)
{
    size_t most = size + size / 8;
    unsigned k = class_of(size), last = class_of(most < POOL_CACHE_MAX_BLOCK ? most : POOL_CACHE_MAX_BLOCK);
    unsigned i = find_in_class(c, k, size, most);
    while (i == POOL_CACHE_NONE && k < last)
        i = find_in_class(c, ++k, size, most);
    if (i == POOL_CACHE_NONE)
        return NULL;
    pool_block *b = c->entries[i].block;
    unlink_entry(c, i);
    return b;
}

unsigned pool_cache_push(pool_thread_cache *c, pool_block *b, pool_block **out)
{
    unsigned n = 0;
    if (c->unused == POOL_CACHE_NONE) {
        /* full: at most POOL_CACHE_KEEP entries came in the last POOL_CACHE_KEEP pushes; the
         * others go */
        uint64_t keep_from = c->pushes - POOL_CACHE_KEEP;
        for (unsigned i = 0; i < POOL_CACHE_BLOCKS; i++)
            if (c->entries[i].stamp < keep_from) {
                out[n++] = c->entries[i].block;
                unlink_entry(c, i);
            }
    }
    unsigned i = c->unused, k = class_of(b->size);
    pool_cache_entry *e = &c->entries[i];
    c->unused = e->next;
    *e = (pool_cache_entry){.block = b, .size = b->size, .stamp = c->pushes++, .prev = POOL_CACHE_NONE,
                            .next = c->heads[k], .cls = (uint8_t)k};
    if (e->next != POOL_CACHE_NONE)
        c->entries[e->next].prev = (uint8_t)i;
    c->heads[k] = (uint8_t)i;
    c->count++;
    __atomic_store_n(&c->bytes, c->bytes + b->size, __ATOMIC_RELAXED);
    return n;
}

void pool_cache_give_back(pool_resource *p, pool_stream *home, pool_block **blocks, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        pool_free_list_insert_merging(&home->free, home, blocks[i], &p->core.records);
}

/* ---- under the pool's lock ----------------------------------------------------------------- */

pool_block *pool_cache_remove_live(pool_resource *p, uintptr_t ptr, size_t bytes, crmm_status *st)
{
    for (pool_thread_cache *c = p->cache.caches; c; c = c->next) {
        spin_lock(&c->lock);
        pool_block *b = c->live.count ? pool_block_map_remove(&c->live, ptr) : NULL;
        if (b && b->u.live.requested != bytes) {
            *st = pool_refuse_size(p, &c->live, b, bytes);
            spin_unlock(&c->lock);
            return NULL;
        }
        if (b)
            pool_counts_freed(&c->delta, b->u.live.requested, b->size);
        spin_unlock(&c->lock);
        if (b)
            return b;
    }
    return NULL;
}

bool pool_cache_holds(pool_resource *p, uintptr_t ptr)
{
    bool found = false;
    for (pool_thread_cache *c = p->cache.caches; c && !found; c = c->next) {
        spin_lock(&c->lock);
        for (unsigned i = 0; i < POOL_CACHE_BLOCKS && !found; i++) {
            const pool_block *b = c->entries[i].block;
            found = b && ptr >= b->addr && ptr - b->addr < b->size;
        }
        spin_unlock(&c->lock);
    }
    return found;
}

void pool_cache_sum(pool_resource *p, pool_counts *sum)
{
    /* every cache's lock at once, so that the sum is of one moment: read one at a time, a free
     * into a cache already read and an allocation from one not yet read (neither takes the pool's
     * lock) would both count, a sum that was never live, and raise the peaks to it */
    pool_cache_lock_all(p);
    *sum = p->core.counts;
    for (pool_thread_cache *c = p->cache.caches; c; c = c->next)
        pool_counts_add(sum, &c->delta);
    pool_cache_unlock_all(p);
    pool_peaks_raise(&p->core.peaks, sum, POOL_PEAKS_ALL);
}

uint64_t pool_cache_largest(pool_resource *p)
{
    uint64_t largest = 0;
    for (pool_thread_cache *c = p->cache.caches; c; c = c->next) {
        spin_lock(&c->lock);
        for (unsigned i = 0; i < POOL_CACHE_BLOCKS; i++)
            if (c->entries[i].block && c->entries[i].size > largest)
                largest = c->entries[i].size;
        spin_unlock(&c->lock);
    }
    return largest;
}

void pool_cache_lock_all(pool_resource *p)
{
    for (pool_thread_cache *c = p->cache.caches; c; c = c->next)
        spin_lock(&c->lock);
}

void pool_cache_unlock_all(pool_resource *p)
{
    for (pool_thread_cache *c = p->cache.caches; c; c = c->next)
        spin_unlock(&c->lock);
}

void pool_cache_registry_reset(void) { pthread_mutex_init(&registry, NULL); }

/* ---- destroy ------------------------------------------------------------------------------- */

void pool_cache_detach_all(pool_resource *p)
{
    pthread_mutex_lock(&registry);
    for (pool_thread_cache *c = p->cache.caches, *next; c; c = next) {
        next = c->next;
        spin_lock(&c->lock);
        bool orphan = c->orphan;
        pool_cache_reset(c);
        c->next = NULL;
        pool_block_map_free(&c->live);
        __atomic_store_n(&c->pool, NULL, __ATOMIC_RELAXED);
        spin_unlock(&c->lock);
        if (orphan)
            free(c);
    }
    p->cache.caches = NULL;
    pthread_mutex_unlock(&registry);
}
