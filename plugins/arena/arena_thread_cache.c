/* arena_thread_cache.c — thread arenas, the thread-local tables that find them, and what other
 * threads may do to them.
 *
 * Finding the arena: each thread has a small table of (resource id, stream) → thread arena and
 * remembers the entry it used last, so the fast path compares two words. Ids are never reused,
 * so an entry of a destroyed resource never matches again. A pthread key's destructor retires
 * the thread's arenas when it exits: a registry of live resources (one lock, off the fast path)
 * tells it which are still there.
 *
 * The fast path: ABI dispatch, a thread-local lookup (two compares), the size class, the slab
 * bitmap (two count-trailing-zeros, two stores) and owner-local counters; a free adds a page-map
 * load and a multiply-shift for the block index. No lock, no atomic read-modify-write and no
 * fence: around its use of its slabs the owner stores its `busy` word twice and loads its
 * `reclaim` word once (plain moves on x86, on the thread arena's own cache line; see "taking a
 * slab from a live owner" below). A slab the owner empties itself is marked EMPTY, and the next
 * allocation from it takes it back with a CAS. Its cost is in bench/RESULTS.md.
 *
 * Other threads:
 *   - a free into a slab another thread arena holds (another thread, or this thread on another
 *     stream) waits for its stream (device memory), takes the class lock and sets a bit in the
 *     slab's remote bitmap; the owner collects those bits when its slab runs out of blocks.
 *   - a slab that runs out of blocks is DETACHED: no thread holds it; frees into it take the class
 *     lock; once it has free blocks any thread arena of the class may adopt it; once empty it
 *     goes back to the global arena at once.
 *   - a thread that exits detaches its slabs the same way (after waiting for the device), and
 *     gives back the empty ones: no memory is lost with the thread. When that wait fails (device
 *     memory), blocks it freed on its stream may still be in use there, and nothing says when they
 *     are done: its slabs with both live and free blocks are quarantined (arena_slab.h: never
 *     adopted, so their free blocks go to no other stream; counted as detached; back to the
 *     global arena when their last block is freed, tagged as needing a device synchronization
 *     before any stream takes them, as its empty slabs go at once).
 *   - a defragmenter (out of memory, trim) takes the empty slabs of every thread arena: EMPTY ones
 *     by CAS, and where membarrier(2) works, OWNED ones whose free and remote bits cover them, as
 *     follows.
 *
 * Taking a slab from a live owner (an asymmetric Dekker protocol). A slab whose last blocks other
 * threads freed is empty, but only the owner may read and write its bitmap without a lock, and
 * making every owner operation publish itself with a fence or a CAS would slow the fast path.
 *   owner, around every use of its slabs and `current` (allocate, free of a block of its own
 *   slab, thread exit):
 *       busy = 1 (relaxed store); compiler barrier; if reclaim (acquire load): busy = 0, wait
 *       until reclaim is 0, start over; ... its slabs ...; busy = 0 (release store)
 *   defragmenter (arenas_lock held: one at a time):
 *       reclaim = 1 (relaxed) in each thread arena holding a slab that looks empty;
 *       membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
 *       in each such arena: once busy (acquire load) reads 0 (after at most ARENA_RECLAIM_TURNS
 *       yields), take each held OWNED slab that is empty,
 *       checked again with its class lock held (what orders it with remote frees); then
 *       reclaim = 0 (release store).
 * membarrier makes every running thread of the process execute a full memory barrier, and a
 * thread that is not running executes one before it runs again: each owner has a point in its
 * program order where that barrier falls. An operation that began before that point stored
 * busy = 1 before it, so the defragmenter's load after membarrier returns reads 1 — unless the
 * operation has ended, and then the release of its busy = 0 makes all its writes visible to that
 * acquire load. An operation that begins after the point loads reclaim after the barrier, so it
 * reads the 1 stored before membarrier and waits; its acquire of reclaim = 0 then shows it its
 * slabs and `current` as the defragmenter left them. So once the defragmenter reads busy == 0,
 * no operation of that owner is in progress and none starts before reclaim is 0 again: its slabs
 * are the defragmenter's alone, and one found empty under the class lock is empty (a block the
 * owner still holds is in neither bitmap). Neither side can deadlock the other: the owner waits
 * only at the start of an operation, holding no lock of this resource, and the defragmenter waits
 * for an owner's operation to end a bounded number of turns (no operation blocks or takes
 * arenas_lock), then leaves that owner's slabs to the next defragment. An owner loses nothing: a slab taken had no live block, and its `current`
 * entry is cleared, so its next allocation of that class takes another slab. The owner pays two
 * stores and a load on its own cache line per operation; the defragmenter one system call.
 * A slab its owner empties itself is marked EMPTY and taken by the CAS protocol of arena_slab.h
 * whether or not the owner is in an operation then; what this protocol adds is the slabs other
 * threads emptied. Where membarrier is unavailable (its registration fails when the first arena
 * is made, or a call fails later), no OWNED slab is taken. ThreadSanitizer does not know membarrier: every word both
 * sides touch is an atomic, and the release/acquire pairs on busy and reclaim give it the
 * orderings the argument above uses. */
#include "build_config.h"
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__) && __has_include(<linux/membarrier.h>)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#ifdef SYS_membarrier
#define ARENA_MEMBARRIER 1 /* (its commands are enumerators, not macros) */
#endif
#endif
#include "../common/fork_guards.h"
#include "arena_thread_cache.h"

/* Thread arenas flush their counts into the resource's when the net change reaches these. */
#define ARENA_FLUSH_BYTES ((int64_t)4 << 20)
#define ARENA_FLUSH_COUNT ((int64_t)1024)
/* How many times a defragmenter yields to an owner found inside an operation before it leaves
 * that owner's slabs for the next defragment (an operation never blocks, so this is plenty). */
#define ARENA_RECLAIM_TURNS 1000u

/* ---- membarrier: the defragmenter's side of the fence ------------------------------------- */

static int fence_state;        /* atomic: 1 membarrier registered, -1 unavailable, 0 not asked */
static pthread_once_t fence_once = PTHREAD_ONCE_INIT;

static void fence_register(void)
{
    int ok = 0;
#ifdef ARENA_MEMBARRIER
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    ok = cmds >= 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
         syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
#endif
    __atomic_store_n(&fence_state, ok ? 1 : -1, __ATOMIC_RELAXED);
}

/* Whether defragmenters take OWNED slabs that other threads emptied. */
static inline bool fence_works(void) { return __atomic_load_n(&fence_state, __ATOMIC_RELAXED) > 0; }

/* A full barrier on every thread of the process. False when the system call fails: from then on
 * the arena works as where membarrier is unavailable. */
static bool fence_all_threads(void)
{
#ifdef ARENA_MEMBARRIER
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
        return true;
#endif
    __atomic_store_n(&fence_state, -1, __ATOMIC_RELAXED);
    return false;
}

/* ---- the registry of live resources ------------------------------------------------------- */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static arena_resource *registry;
static uint64_t registry_next_id = 1;

/* The registry's lock across fork(): a child may make arenas of its own, whatever the parent's
 * threads were doing (the registry is one for the process, so its guard is never removed). */
static crmm_fork_guard registry_guard;
static pthread_once_t registry_guard_once = PTHREAD_ONCE_INIT;
static void registry_guard_add(void) { fork_guard_add_mutex(&registry_guard, &registry_lock); }

void arena_registry_add(arena_resource *r)
{
    pthread_once(&fence_once, fence_register); /* before any slab is held: owners know the rule */
    pthread_once(&registry_guard_once, registry_guard_add);
    pthread_mutex_lock(&registry_lock);
    r->id = registry_next_id++;
    r->registry_next = registry;
    registry = r;
    pthread_mutex_unlock(&registry_lock);
}

void arena_registry_remove(arena_resource *r)
{
    pthread_mutex_lock(&registry_lock);
    for (arena_resource **p = &registry; *p; p = &(*p)->registry_next)
        if (*p == r) {
            *p = r->registry_next;
            break;
        }
    pthread_mutex_unlock(&registry_lock);
}

/* The live resource with this id (registry_lock held), or NULL. */
static arena_resource *registry_find(uint64_t id)
{
    for (arena_resource *r = registry; r; r = r->registry_next)
        if (r->id == id)
            return r;
    return NULL;
}

/* ---- the thread-local table --------------------------------------------------------------- */

typedef struct arena_tls_entry {
    uint64_t id;
    crmm_cuda_stream_t stream;
    arena_thread *arena;
} arena_tls_entry;

typedef struct arena_tls {
    arena_tls_entry last;          /* the entry used last (id 0: none) */
    arena_tls_entry *entries;
    size_t n, cap;
    int registered;                /* the exit destructor is armed */
} arena_tls;

static __thread arena_tls tls;
static pthread_once_t tls_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t tls_key;
static int tls_key_ok;

static void arena_thread_retire(arena_resource *r, arena_thread *a);

static void tls_destructor(void *arg)
{
    arena_tls *t = arg;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < t->n; i++) {
        arena_resource *r = registry_find(t->entries[i].id);
        if (r)
            arena_thread_retire(r, t->entries[i].arena);
    }
    pthread_mutex_unlock(&registry_lock);
    free(t->entries);
    memset(t, 0, sizeof *t);
}

static void tls_key_create(void)
{
    tls_key_ok = pthread_key_create(&tls_key, tls_destructor) == 0;
}

/* Drop entries of resources that no longer exist. */
static void tls_purge(arena_tls *t)
{
    pthread_mutex_lock(&registry_lock);
    size_t kept = 0;
    for (size_t i = 0; i < t->n; i++)
        if (registry_find(t->entries[i].id))
            t->entries[kept++] = t->entries[i];
    t->n = kept;
    pthread_mutex_unlock(&registry_lock);
    memset(&t->last, 0, sizeof t->last);
}

/* The home shard for a new thread arena (arenas_lock held): the shard that is home to the fewest
 * thread arenas; among those, the first in bit-reversed order (0, 4, 2, 6, 1, 5, 3, 7 for 8), so
 * that a few threads get homes far apart and spill over into shards that are no one's home. */
static unsigned pick_home(arena_resource *r)
{
    unsigned n = r->global.nshards;
    if (n == 1)
        return 0;
    size_t homed[ARENA_MAX_SHARDS] = {0};
    for (arena_thread *a = r->arenas; a; a = a->next)
        homed[a->home]++;
    unsigned bits = 0;
    while ((1u << bits) < n)
        bits++;
    unsigned best = 0;
    bool found = false;
    for (unsigned i = 0; i < (1u << bits); i++) {
        unsigned k = 0;
        for (unsigned b = 0; b < bits; b++)
            k |= ((i >> b) & 1u) << (bits - 1 - b);
        if (k < n && (!found || homed[k] < homed[best])) {
            best = k;
            found = true;
        }
    }
    return best;
}

size_t arena_cache_homed(arena_resource *r, unsigned shard)
{
    size_t n = 0;
    pthread_mutex_lock(&r->arenas_lock);
    for (arena_thread *a = r->arenas; a; a = a->next)
        n += a->home == shard;
    pthread_mutex_unlock(&r->arenas_lock);
    return n;
}

static arena_thread *arena_thread_new(arena_resource *r, crmm_cuda_stream_t stream)
{
    size_t size = sizeof(arena_thread) + r->nclasses * sizeof(arena_slab *);
    size = (size + 63) & ~(size_t)63; /* own cache lines: no false sharing between threads */
    arena_thread *a = aligned_alloc(64, size);
    if (!a) {
        crmm_set_error(CRMM_ERROR_BAD_ALLOC, "%s: no host memory for a thread arena", arena_who(r));
        return NULL;
    }
    memset(a, 0, size);
    a->r = r;
    a->stream = stream;
    pthread_mutex_lock(&r->arenas_lock);
    a->home = pick_home(r);
    a->next = r->arenas;
    if (a->next)
        a->next->prev = a;
    r->arenas = a;
    r->narenas++;
    pthread_mutex_unlock(&r->arenas_lock);
    return a;
}

static void arena_thread_flush(arena_thread *a);

/* The calling thread's arenas of r on other streams than `keep`'s flush their counts: a thread
 * that moves between streams counts in one arena at a time, so that its peaks stay exact (each
 * arena's unflushed rise would otherwise add to the others'). */
static void flush_other_streams(arena_tls *t, const arena_resource *r, const arena_thread *keep)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->entries[i].id == r->id && t->entries[i].arena != keep)
            arena_thread_flush(t->entries[i].arena);
}

static arena_thread *thread_arena_slow(arena_resource *r, crmm_cuda_stream_t stream, bool create)
{
    arena_tls *t = &tls;
    for (size_t i = 0; i < t->n; i++)
        if (t->entries[i].id == r->id && t->entries[i].stream == stream) {
            t->last = t->entries[i];
            flush_other_streams(t, r, t->last.arena);
            return t->last.arena;
        }
    if (!create)
        return NULL;
    if (t->n == t->cap) {
        tls_purge(t);
        if (t->n == t->cap) {
            size_t cap = t->cap ? 2 * t->cap : 8;
            arena_tls_entry *e = realloc(t->entries, cap * sizeof *e);
            if (!e) {
                crmm_set_error(CRMM_ERROR_BAD_ALLOC, "%s: no host memory for the thread's arena table", arena_who(r));
                return NULL;
            }
            t->entries = e;
            t->cap = cap;
        }
    }
    arena_thread *a = arena_thread_new(r, stream);
    if (!a)
        return NULL;
    if (!t->registered) {
        pthread_once(&tls_key_once, tls_key_create);
        if (tls_key_ok && pthread_setspecific(tls_key, t) == 0)
            t->registered = 1;
    }
    t->entries[t->n++] = (arena_tls_entry){r->id, stream, a};
    t->last = t->entries[t->n - 1];
    flush_other_streams(t, r, a);
    return a;
}

static inline arena_thread *thread_arena(arena_resource *r, crmm_cuda_stream_t stream, bool create)
{
    arena_tls *t = &tls;
    if (__builtin_expect(t->last.id == r->id && t->last.stream == stream, 1))
        return t->last.arena;
    return thread_arena_slow(r, stream, create);
}

/* ---- counters ----------------------------------------------------------------------------- */

static inline void store64(int64_t *p, int64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
static inline void storeu64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

static void arena_thread_flush(arena_thread *a)
{
    crmm_alloc_counters *c = &a->r->counters;
    int64_t b0 = __atomic_fetch_add(&c->bytes, a->live_bytes, __ATOMIC_RELAXED);
    int64_t n0 = __atomic_fetch_add(&c->count, a->live_count, __ATOMIC_RELAXED);
    crmm_counters_raise_peak(&c->peak_bytes, b0 + a->peak_bytes);
    crmm_counters_raise_peak(&c->peak_count, n0 + a->peak_count);
    __atomic_fetch_add(&c->total_count, a->total_count, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->total_bytes, a->total_bytes, __ATOMIC_RELAXED);
    store64(&a->live_bytes, 0);
    store64(&a->live_count, 0);
    store64(&a->peak_bytes, 0);
    store64(&a->peak_count, 0);
    storeu64(&a->total_count, 0);
    storeu64(&a->total_bytes, 0);
}

static inline void count_alloc(arena_thread *a, size_t bytes)
{
    int64_t b = a->live_bytes + (int64_t)bytes, n = a->live_count + 1;
    store64(&a->live_bytes, b);
    store64(&a->live_count, n);
    if (b > a->peak_bytes)
        store64(&a->peak_bytes, b);
    if (n > a->peak_count)
        store64(&a->peak_count, n);
    storeu64(&a->total_count, a->total_count + 1);
    storeu64(&a->total_bytes, a->total_bytes + bytes);
    if (__builtin_expect(b >= ARENA_FLUSH_BYTES || n >= ARENA_FLUSH_COUNT, 0))
        arena_thread_flush(a);
}

static inline void count_free(arena_thread *a, size_t bytes)
{
    int64_t b = a->live_bytes - (int64_t)bytes, n = a->live_count - 1;
    store64(&a->live_bytes, b);
    store64(&a->live_count, n);
    if (__builtin_expect(b <= -ARENA_FLUSH_BYTES || n <= -ARENA_FLUSH_COUNT, 0))
        arena_thread_flush(a);
}

/* The peaks the queries report are the shared counts plus every thread arena's unflushed rise.
 * Before that sum can fall without a free of the thread that rose (a free counted in the shared
 * counts, a thread arena flushed and gone at its thread's exit), the peak it makes now is
 * recorded (arenas_lock held). */
static void record_peak(arena_resource *r)
{
    crmm_alloc_counters *c = &r->counters;
    int64_t rise_count = 0, rise_bytes = 0;
    for (arena_thread *a = r->arenas; a; a = a->next) {
        rise_count += __atomic_load_n(&a->peak_count, __ATOMIC_RELAXED);
        rise_bytes += __atomic_load_n(&a->peak_bytes, __ATOMIC_RELAXED);
    }
    crmm_counters_raise_peak(&c->peak_count, __atomic_load_n(&c->count, __ATOMIC_RELAXED) + rise_count);
    crmm_counters_raise_peak(&c->peak_bytes, __atomic_load_n(&c->bytes, __ATOMIC_RELAXED) + rise_bytes);
}

/* Count a free in the resource's shared counters (a thread with no arena for the stream, or a
 * block of a superblock another thread arena holds or no thread holds), the peak recorded first:
 * a block that one thread allocated and another freed stays in the peak. */
static void count_shared_free(arena_resource *r, size_t bytes)
{
    pthread_mutex_lock(&r->arenas_lock);
    record_peak(r);
    crmm_counters_sub(&r->counters, bytes, CRMM_COUNT_SHARED);
    pthread_mutex_unlock(&r->arenas_lock);
}

crmm_status arena_cache_allocate_large(arena_resource *r, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    if (!r->uses_cuda)
        stream = NULL;
    arena_thread *a = thread_arena(r, stream, true); /* NULL (no host memory): home 0, count in r */
    arena_stream_id id;
    crmm_status st = arena_global_alloc_large(&r->global, a ? a->home : 0, bytes, arena_stream_of(r, stream, &id), ptr);
    if (st != CRMM_OK)
        return st;
    if (a)
        count_alloc(a, bytes);
    else
        crmm_counters_add(&r->counters, (uint64_t)bytes, CRMM_COUNT_SHARED);
    return CRMM_OK;
}

void arena_cache_count(arena_resource *r, crmm_cuda_stream_t stream, int64_t bytes)
{
    if (!r->uses_cuda)
        stream = NULL;
    arena_thread *a = thread_arena(r, stream, bytes > 0);
    if (a && bytes > 0)
        count_alloc(a, (size_t)bytes);
    else if (a)
        count_free(a, (size_t)-bytes);
    else if (bytes > 0)
        crmm_counters_add(&r->counters, (uint64_t)bytes, CRMM_COUNT_SHARED);
    else
        count_shared_free(r, (size_t)-bytes);
}

void arena_cache_counts(arena_resource *r, arena_counts *out)
{
    crmm_alloc_counters *c = &r->counters;
    pthread_mutex_lock(&r->arenas_lock);
    int64_t count = __atomic_load_n(&c->count, __ATOMIC_RELAXED), bytes = __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
    int64_t rise_count = 0, rise_bytes = 0;
    uint64_t total_count = __atomic_load_n(&c->total_count, __ATOMIC_RELAXED);
    uint64_t total_bytes = __atomic_load_n(&c->total_bytes, __ATOMIC_RELAXED);
    for (arena_thread *a = r->arenas; a; a = a->next) {
        count += __atomic_load_n(&a->live_count, __ATOMIC_RELAXED);
        bytes += __atomic_load_n(&a->live_bytes, __ATOMIC_RELAXED);
        rise_count += __atomic_load_n(&a->peak_count, __ATOMIC_RELAXED);
        rise_bytes += __atomic_load_n(&a->peak_bytes, __ATOMIC_RELAXED);
        total_count += __atomic_load_n(&a->total_count, __ATOMIC_RELAXED);
        total_bytes += __atomic_load_n(&a->total_bytes, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&r->arenas_lock);
    int64_t peak_count = __atomic_load_n(&c->peak_count, __ATOMIC_RELAXED);
    int64_t peak_bytes = __atomic_load_n(&c->peak_bytes, __ATOMIC_RELAXED);
    int64_t flushed_count = __atomic_load_n(&c->count, __ATOMIC_RELAXED);
    int64_t flushed_bytes = __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
    /* a small block keeps no size: a free with a wrong size of its class subtracts that size, so
     * the sum stops at zero rather than wrap */
    out->count = count > 0 ? count : 0;
    out->bytes = bytes > 0 ? bytes : 0;
    count = out->count;
    bytes = out->bytes;
    out->peak_count = peak_count > flushed_count + rise_count ? peak_count : flushed_count + rise_count;
    out->peak_bytes = peak_bytes > flushed_bytes + rise_bytes ? peak_bytes : flushed_bytes + rise_bytes;
    if (out->peak_count < count)
        out->peak_count = count;
    if (out->peak_bytes < bytes)
        out->peak_bytes = bytes;
    /* a peak once reported is never reported lower: a thread arena's flush folds its rise into
     * the shared peak with the shared count alone, which can lower the sum above by the other
     * threads' rises (recording the whole sum at every flush would take the arenas' lock there) */
    crmm_counters_raise_peak(&c->peak_count, out->peak_count);
    crmm_counters_raise_peak(&c->peak_bytes, out->peak_bytes);
    out->total_count = total_count;
    out->total_bytes = total_bytes;
}

/* The owner publishes its slab with a release store, and other threads (reclaim, holdings) read
 * it with an acquire load, so that they see the record as arena_slab_new and format left it. */
static inline void set_current(arena_thread *a, unsigned c, arena_slab *sb)
{
    __atomic_store_n(&a->current[c], sb, __ATOMIC_RELEASE);
}

static inline arena_slab *current_of(arena_thread *a, unsigned c)
{
    return __atomic_load_n(&a->current[c], __ATOMIC_ACQUIRE);
}

/* The owner's read: only the owner and a defragmenter that has fenced it out write the entry. */
static inline arena_slab *held(arena_thread *a, unsigned c)
{
    return __atomic_load_n(&a->current[c], __ATOMIC_RELAXED);
}

/* ---- the owner's side of the fence (the protocol at the top of this file) ----------------- */

static __attribute__((noinline, cold)) void op_wait(arena_thread *a)
{
    do {
        __atomic_store_n(&a->busy, 0, __ATOMIC_RELEASE);
        while (__atomic_load_n(&a->reclaim, __ATOMIC_ACQUIRE))
            sched_yield();
        __atomic_store_n(&a->busy, 1, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
    } while (__atomic_load_n(&a->reclaim, __ATOMIC_ACQUIRE));
}

/* The owner begins using its slabs: waits while a defragmenter is at work on them. */
static inline void op_begin(arena_thread *a)
{
    __atomic_store_n(&a->busy, 1, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST); /* the compiler keeps the store before the load */
    if (__builtin_expect(__atomic_load_n(&a->reclaim, __ATOMIC_ACQUIRE) != 0, 0))
        op_wait(a);
}

static inline void op_end(arena_thread *a) { __atomic_store_n(&a->busy, 0, __ATOMIC_RELEASE); }

void arena_cache_holdings(arena_resource *r, size_t *arenas, size_t *superblocks)
{
    size_t held = 0;
    pthread_mutex_lock(&r->arenas_lock);
    for (arena_thread *a = r->arenas; a; a = a->next)
        for (unsigned c = 0; c < r->nclasses; c++) {
            arena_slab *sb = current_of(a, c);
            int st = sb ? arena_slab_state(sb) : ARENA_SLAB_SPARE;
            held += st == ARENA_SLAB_OWNED || st == ARENA_SLAB_EMPTY; /* not the ones taken away */
        }
    *arenas = r->narenas;
    pthread_mutex_unlock(&r->arenas_lock);
    *superblocks = held;
}

/* ---- slabs changing hands ----------------------------------------------------------------- */

static void partial_push(arena_class_shared *cs, arena_slab *sb)
{
    sb->prev = NULL;
    sb->next = cs->partial;
    if (sb->next)
        sb->next->prev = sb;
    cs->partial = sb;
    sb->in_partial = true;
}

static void partial_remove(arena_class_shared *cs, arena_slab *sb)
{
    if (sb->prev)
        sb->prev->next = sb->next;
    else
        cs->partial = sb->next;
    if (sb->next)
        sb->next->prev = sb->prev;
    sb->prev = sb->next = NULL;
    sb->in_partial = false;
}

/* The owner lets go of its slab sb (thread exit). Empty: back to the global arena; otherwise
 * DETACHED, and adoptable when it has free blocks. For device memory the caller has waited for
 * the device: `clean`, successfully, so the free blocks are safe on any stream; otherwise an
 * empty slab goes back tagged as needing a device synchronization, and one with live and free
 * blocks is quarantined (arena_slab.h): its free blocks are offered to no stream. */
static void release_held_slab(arena_resource *r, arena_slab *sb, bool clean)
{
    for (;;) {
        int st = arena_slab_state(sb);
        if (st == ARENA_SLAB_STEALING || st == ARENA_SLAB_STOLEN) {
            arena_slab_wait_stolen(sb);
            arena_slab_recycle(&r->slabs, sb);
            return;
        }
        if (st == ARENA_SLAB_EMPTY) {
            arena_span *span = arena_slab_steal(sb);
            if (!span)
                continue; /* a defragmenter was quicker */
            arena_global_give_superblock(&r->global, span, clean);
            arena_slab_recycle(&r->slabs, sb);
            return;
        }
        break; /* OWNED: it has live blocks, or had until other threads freed them */
    }
    arena_class_shared *cs = &r->classes[sb->cls];
    pthread_mutex_lock(&cs->lock);
    arena_slab_collect(sb);
    if (sb->free_count == sb->capacity) {
        arena_slab_set_state(sb, ARENA_SLAB_SPARE);
        pthread_mutex_unlock(&cs->lock);
        arena_global_give_superblock(&r->global, sb->span, clean);
        arena_slab_recycle(&r->slabs, sb);
        return;
    }
    __atomic_store_n(&sb->owner, NULL, __ATOMIC_RELAXED);
    arena_slab_set_state(sb, ARENA_SLAB_DETACHED);
    cs->detached++;
    sb->quarantined = !clean && sb->free_count > 0; /* a full one has no block in doubt */
    if (sb->free_count > 0 && !sb->quarantined)
        partial_push(cs, sb);
    pthread_mutex_unlock(&cs->lock);
}

/* Find class c a slab with a free block: the current one after collecting remote frees, a
 * detached one with free blocks, or a new superblock. The slab returned is OWNED by a. */
static crmm_status refill(arena_resource *r, arena_thread *a, unsigned c, arena_slab **out)
{
    arena_class_shared *cs = &r->classes[c];
    arena_slab *sb = held(a, c);
    if (sb) {
        int st = arena_slab_state(sb);
        if (st == ARENA_SLAB_STEALING || st == ARENA_SLAB_STOLEN) {
            arena_slab_wait_stolen(sb);
            set_current(a, c, NULL);
            arena_slab_recycle(&r->slabs, sb);
        } else if (st == ARENA_SLAB_EMPTY || sb->free_count > 0) {
            if (st == ARENA_SLAB_OWNED || arena_slab_claim(sb)) {
                *out = sb;
                return CRMM_OK;
            }
            return refill(r, a, c, out); /* taken away meanwhile: start over */
        } else {
            /* OWNED and full: collect what other threads freed, else let it go */
            if (arena_slab_collect(sb)) {
                *out = sb;
                return CRMM_OK;
            }
            pthread_mutex_lock(&cs->lock);
            if (arena_slab_collect(sb)) {
                pthread_mutex_unlock(&cs->lock);
                *out = sb;
                return CRMM_OK;
            }
            __atomic_store_n(&sb->owner, NULL, __ATOMIC_RELAXED);
            arena_slab_set_state(sb, ARENA_SLAB_DETACHED);
            cs->detached++;
            pthread_mutex_unlock(&cs->lock);
            set_current(a, c, NULL);
        }
    }
    pthread_mutex_lock(&cs->lock);
    sb = cs->partial;
    if (sb) {
        partial_remove(cs, sb);
        cs->detached--;
        __atomic_store_n(&sb->owner, a, __ATOMIC_RELAXED);
        arena_slab_set_state(sb, ARENA_SLAB_OWNED);
    }
    pthread_mutex_unlock(&cs->lock);
    if (!sb) {
        sb = arena_slab_new(&r->slabs);
        if (!sb)
            return CRMM_ERROR_BAD_ALLOC;
        arena_stream_id id;
        /* it may wait for the device: out of the operation meanwhile, so that defragmenters can
         * take a's other slabs (current[c] is NULL, and sb is a's alone until set_current) */
        op_end(a);
        crmm_status st = arena_global_take_superblock(&r->global, a->home, sb, c, a, arena_stream_of(r, a->stream, &id));
        op_begin(a);
        if (st != CRMM_OK) {
            arena_slab_recycle(&r->slabs, sb);
            return st;
        }
    }
    set_current(a, c, sb);
    *out = sb;
    return CRMM_OK;
}

static void arena_thread_retire(arena_resource *r, arena_thread *a)
{
    op_begin(a);
    bool holds = false;
    for (unsigned c = 0; c < r->nclasses; c++)
        holds |= held(a, c) != NULL;
    op_end(a);
    /* the thread's frees are done before its slabs move. Not inside an operation: a defragmenter
     * may take its empty slabs meanwhile (and waits for the device itself) */
    bool clean = !holds || arena_device_synchronize(r) == CRMM_OK;
    op_begin(a);
    for (unsigned c = 0; c < r->nclasses; c++) {
        arena_slab *sb = held(a, c);
        if (sb) {
            set_current(a, c, NULL);
            release_held_slab(r, sb, clean);
        }
    }
    op_end(a);
    pthread_mutex_lock(&r->arenas_lock);
    record_peak(r); /* with the rises of the threads still running */
    arena_thread_flush(a);
    if (a->prev)
        a->prev->next = a->next;
    else
        r->arenas = a->next;
    if (a->next)
        a->next->prev = a->prev;
    r->narenas--;
    pthread_mutex_unlock(&r->arenas_lock);
    free(a);
}

/* ---- allocate and free -------------------------------------------------------------------- */

crmm_status arena_cache_allocate(arena_resource *r, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    if (!r->uses_cuda)
        stream = NULL;
    arena_thread *a = thread_arena(r, stream, true);
    if (__builtin_expect(!a, 0))
        return CRMM_ERROR_BAD_ALLOC;
    unsigned c = arena_size_class(bytes);
    op_begin(a);
    arena_slab *sb = held(a, c);
    if (__builtin_expect(sb == NULL || sb->free_count == 0, 0) ||
        (__builtin_expect(sb->free_count == sb->capacity, 0) && arena_slab_state(sb) != ARENA_SLAB_OWNED &&
         !arena_slab_claim(sb))) {
        crmm_status st = refill(r, a, c, &sb);
        if (st != CRMM_OK) {
            op_end(a);
            return st;
        }
    }
    *ptr = arena_slab_block(sb, arena_slab_take(sb));
    op_end(a);
    count_alloc(a, bytes);
    return CRMM_OK;
}

/* A free of a block that another thread arena holds, or that no thread holds. */
static crmm_status remote_free(arena_resource *r, arena_slab *sb, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    crmm_status st = arena_stream_synchronize(r, stream); /* its uses on `stream` are done */
    if (st != CRMM_OK)
        return st;
    unsigned c = arena_size_class(bytes);
    arena_class_shared *cs = &r->classes[c];
    bool give_back = false, clean = true;
    uint32_t idx;
    pthread_mutex_lock(&cs->lock);
    int state = arena_slab_state(sb);
    if (sb->cls != c || !arena_slab_index(sb, ptr, &idx)) {
        st = CRMM_ERROR_INVALID_ARGUMENT; /* the record changed hands since the caller looked */
    } else {
        uint32_t w = idx >> 6;
        uint64_t bit = (uint64_t)1 << (idx & 63u);
        if (arena_bits_load(&sb->free_bits[w]) & bit) {
            st = CRMM_ERROR_INVALID_ARGUMENT;
        } else if (state == ARENA_SLAB_OWNED) {
            if (__atomic_fetch_or(&sb->remote_bits[w], bit, __ATOMIC_RELEASE) & bit)
                st = CRMM_ERROR_INVALID_ARGUMENT;
            else
                __atomic_store_n(&sb->remote_pending, 1, __ATOMIC_RELEASE);
        } else if (state == ARENA_SLAB_DETACHED) {
            arena_bits_store(&sb->free_bits[w], arena_bits_load(&sb->free_bits[w]) | bit);
            sb->summary[w >> 6] |= (uint64_t)1 << (w & 63u);
            arena_slab_set_free_count(sb, sb->free_count + 1);
            if (sb->free_count == sb->capacity) {
                if (sb->in_partial)
                    partial_remove(cs, sb);
                cs->detached--;
                arena_slab_set_state(sb, ARENA_SLAB_SPARE);
                give_back = true;
                clean = !sb->quarantined;
            } else if (!sb->in_partial && !sb->quarantined) {
                partial_push(cs, sb);
            }
        } else {
            st = CRMM_ERROR_INVALID_ARGUMENT;
        }
    }
    pthread_mutex_unlock(&cs->lock);
    if (st != CRMM_OK)
        return crmm_set_error(st, "%s: %p is not a live block of this arena (freed twice?)", arena_who(r), ptr);
    if (give_back) { /* every block freed after a wait, safe on every stream, unless quarantined */
        arena_global_give_superblock(&r->global, sb->span, clean);
        arena_slab_recycle(&r->slabs, sb);
    }
    count_shared_free(r, bytes);
    return CRMM_OK;
}

crmm_status arena_cache_check(arena_resource *r, arena_slab *sb, void *ptr, size_t bytes, uint32_t *idx)
{
    if (__builtin_expect(!arena_slab_index(sb, ptr, idx), 0))
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: %p is not the start of a block of this arena",
                              arena_who(r), ptr);
    if (__builtin_expect(bytes > r->small_max || arena_size_class(bytes) != sb->cls, 0))
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: %p is a block of %u bytes, freed as %zu bytes",
                              arena_who(r), ptr, sb->block_size, bytes);
    return CRMM_OK;
}

crmm_status arena_cache_deallocate(arena_resource *r, arena_slab *sb, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    uint32_t idx;
    crmm_status st = arena_cache_check(r, sb, ptr, bytes, &idx);
    if (__builtin_expect(st != CRMM_OK, 0))
        return st;
    if (!r->uses_cuda)
        stream = NULL;
    arena_thread *a = thread_arena(r, stream, false);
    if (__builtin_expect(a != NULL, 1)) {
        op_begin(a); /* before the owner test: a defragmenter may take sb and clear its owner */
        if (__builtin_expect(__atomic_load_n(&sb->owner, __ATOMIC_RELAXED) == a, 1)) {
            bool put = arena_slab_put(sb, idx);
            /* a slab the owner empties is marked EMPTY, so that a defragmenter takes it by CAS
             * whether or not the owner is in an operation then (or membarrier works) */
            if (__builtin_expect(put && sb->free_count == sb->capacity, 0))
                arena_slab_set_state(sb, ARENA_SLAB_EMPTY);
            op_end(a);
            if (__builtin_expect(!put, 0))
                return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                                      "%s: %p is not a live block of this arena (freed twice?)", arena_who(r), ptr);
            count_free(a, bytes);
            return CRMM_OK;
        }
        op_end(a);
    }
    return remote_free(r, sb, ptr, bytes, stream);
}

/* ---- defragmenting and destroying --------------------------------------------------------- */

/* Take sb, an OWNED slab of a thread arena fenced out of its operations, if it is empty:
 * returns its span, or NULL. The class lock orders the check with remote frees; a remote free
 * that comes after finds the record no longer OWNED (it was a double free). */
static arena_span *take_owned(arena_resource *r, arena_slab *sb)
{
    arena_class_shared *cs = &r->classes[sb->cls];
    arena_span *span = NULL;
    pthread_mutex_lock(&cs->lock);
    if (arena_slab_all_free(sb)) {
        span = sb->span;
        __atomic_store_n(&sb->owner, NULL, __ATOMIC_RELAXED);
        arena_slab_set_state(sb, ARENA_SLAB_SPARE);
    }
    pthread_mutex_unlock(&cs->lock);
    return span;
}

size_t arena_cache_reclaim(arena_resource *r)
{
    arena_span *taken = NULL;
    size_t n = 0, asked = 0;
    bool fence = fence_works();
    pthread_mutex_lock(&r->arenas_lock);
    /* EMPTY slabs by CAS; the arenas holding an OWNED slab that looks empty are asked to stop */
    for (arena_thread *a = r->arenas; a; a = a->next) {
        bool ask = false;
        for (unsigned c = 0; c < r->nclasses; c++) {
            arena_slab *sb = current_of(a, c);
            arena_span *span = sb ? arena_slab_steal(sb) : NULL;
            if (span) {
                span->next = taken; /* a superblock span is on no list: its links are free */
                taken = span;
                n++;
            } else if (fence && sb && arena_slab_state(sb) == ARENA_SLAB_OWNED && arena_slab_all_free(sb)) {
                ask = true;
            }
        }
        if (ask) {
            __atomic_store_n(&a->reclaim, 1, __ATOMIC_RELAXED);
            asked++;
        }
    }
    bool fenced = asked && fence_all_threads();
    for (arena_thread *a = r->arenas; a && asked; a = a->next) {
        if (!__atomic_load_n(&a->reclaim, __ATOMIC_RELAXED))
            continue;
        /* an owner inside an operation finishes it soon (no operation waits for the device or
         * takes arenas_lock) and then waits for reclaim: give it a bounded number of turns */
        for (unsigned turns = 0; fenced && turns < ARENA_RECLAIM_TURNS && __atomic_load_n(&a->busy, __ATOMIC_ACQUIRE); turns++)
            sched_yield();
        bool out = fenced && !__atomic_load_n(&a->busy, __ATOMIC_ACQUIRE); /* the owner is out: its slabs are ours */
        for (unsigned c = 0; c < r->nclasses; c++) {
            arena_slab *sb = current_of(a, c);
            arena_span *span = NULL;
            if (out && sb && arena_slab_state(sb) == ARENA_SLAB_OWNED && (span = take_owned(r, sb))) {
                set_current(a, c, NULL);
                arena_slab_recycle(&r->slabs, sb);
            } else if (sb) {
                span = arena_slab_steal(sb); /* one the owner emptied itself since the first pass */
            }
            if (span) {
                span->next = taken;
                taken = span;
                n++;
            }
        }
        __atomic_store_n(&a->reclaim, 0, __ATOMIC_RELEASE);
        asked--;
    }
    pthread_mutex_unlock(&r->arenas_lock);
    /* frees on the owners' streams are done (this also voids every tag of the global arena) */
    bool clean = !taken || arena_device_synchronize(r) == CRMM_OK;
    while (taken) {
        arena_span *next = taken->next;
        arena_global_give_superblock(&r->global, taken, clean);
        taken = next;
    }
    return n;
}

void arena_cache_release_all(arena_resource *r)
{
    pthread_mutex_lock(&r->arenas_lock);
    arena_thread *a = r->arenas;
    r->arenas = NULL;
    r->narenas = 0;
    pthread_mutex_unlock(&r->arenas_lock);
    while (a) {
        arena_thread *next = a->next;
        free(a);
        a = next;
    }
    arena_tls *t = &tls;
    size_t kept = 0;
    for (size_t i = 0; i < t->n; i++)
        if (t->entries[i].id != r->id)
            t->entries[kept++] = t->entries[i];
    t->n = kept;
    if (t->last.id == r->id)
        memset(&t->last, 0, sizeof t->last);
    if (t->n == 0 && t->entries) {
        free(t->entries);
        t->entries = NULL;
        t->cap = 0;
        if (t->registered)
            pthread_setspecific(tls_key, NULL);
        t->registered = 0;
    }
}
