/* statistics_plugin.c — the `statistics` plugin: counts what passes through, in nested frames
 * (RMM's statistics_resource_adaptor; API in crmm/statistics.h).
 *
 * The frames are an array of crmm_alloc_counters, the base at index 0 and the current frame
 * on top. Allocate and free update the top frame with atomics while holding the frame lock for
 * reading, so threads count in parallel; push and pop take it for writing, so a frame never
 * moves or disappears under a counting thread. Queries fold every frame into the base (as if
 * all were popped) and so answer for the resource's whole life. */
#include "build_config.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/plugin.h>
#include <crmm/statistics.h>
#include "../common/fork_guards.h"
#include "../common/adaptor.h"
#include "../common/plugin_descriptor.h"

typedef struct statistics_resource {
    crmm_resource base;
    pthread_rwlock_t frames_lock;
    crmm_alloc_counters *frames; /* frames[0] = base, frames[depth - 1] = top */
    size_t depth, capacity;
    crmm_fork_guard fork_guard;  /* frames_lock around fork() (taken for writing) */
} statistics_resource;

static crmm_alloc_counters load_frame(const crmm_alloc_counters *c)
{
    crmm_alloc_counters v;
    v.count = __atomic_load_n(&c->count, __ATOMIC_RELAXED);
    v.bytes = __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
    v.peak_count = __atomic_load_n(&c->peak_count, __ATOMIC_RELAXED);
    v.peak_bytes = __atomic_load_n(&c->peak_bytes, __ATOMIC_RELAXED);
    v.total_count = __atomic_load_n(&c->total_count, __ATOMIC_RELAXED);
    v.total_bytes = __atomic_load_n(&c->total_bytes, __ATOMIC_RELAXED);
    return v;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* RMM's rule for a popped frame: the outer peak is what it would have seen with the inner
 * block's peak on top of its own value; values and totals add. */
static void fold_into(crmm_alloc_counters *outer, const crmm_alloc_counters *inner)
{
    outer->peak_bytes = max64(outer->peak_bytes, outer->bytes + inner->peak_bytes);
    outer->peak_count = max64(outer->peak_count, outer->count + inner->peak_count);
    outer->bytes += inner->bytes;
    outer->count += inner->count;
    outer->total_bytes += inner->total_bytes;
    outer->total_count += inner->total_count;
}

/* All frames folded into one, from the top down (caller holds the lock). */
static crmm_alloc_counters fold_all(const statistics_resource *r)
{
    crmm_alloc_counters acc = load_frame(&r->frames[r->depth - 1]);
    for (size_t i = r->depth - 1; i-- > 0;) {
        crmm_alloc_counters outer = load_frame(&r->frames[i]);
        fold_into(&outer, &acc);
        acc = outer;
    }
    return acc;
}

static crmm_status statistics_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    statistics_resource *r = (statistics_resource *)self;
    crmm_status st = crmm_resource_allocate(self->upstream, bytes, stream, ptr);
    if (st != CRMM_OK)
        return st;
    pthread_rwlock_rdlock(&r->frames_lock);
    crmm_counters_add(&r->frames[r->depth - 1], bytes, CRMM_COUNT_SHARED);
    pthread_rwlock_unlock(&r->frames_lock);
    return CRMM_OK;
}

static crmm_status statistics_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    statistics_resource *r = (statistics_resource *)self;
    crmm_status st = crmm_resource_deallocate(self->upstream, ptr, bytes, stream);
    if (st != CRMM_OK)
        return st; /* refused upstream (a double free, say): nothing was freed, nothing to count */
    pthread_rwlock_rdlock(&r->frames_lock);
    crmm_counters_sub(&r->frames[r->depth - 1], bytes, CRMM_COUNT_SHARED);
    pthread_rwlock_unlock(&r->frames_lock);
    return CRMM_OK;
}

/* The calls that never wait: the upstream's own try under the frames' read lock, taken only if
 * no push or pop holds it. */
static bool statistics_try_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    statistics_resource *r = (statistics_resource *)self;
    if (pthread_rwlock_tryrdlock(&r->frames_lock) != 0)
        return false;
    bool done = crmm_resource_try_allocate(self->upstream, bytes, stream, ptr);
    if (done)
        crmm_counters_add(&r->frames[r->depth - 1], bytes, CRMM_COUNT_SHARED);
    pthread_rwlock_unlock(&r->frames_lock);
    return done;
}

static bool statistics_try_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    statistics_resource *r = (statistics_resource *)self;
    if (pthread_rwlock_tryrdlock(&r->frames_lock) != 0)
        return false;
    bool done = crmm_resource_try_deallocate(self->upstream, ptr, bytes, stream);
    if (done)
        crmm_counters_sub(&r->frames[r->depth - 1], bytes, CRMM_COUNT_SHARED);
    pthread_rwlock_unlock(&r->frames_lock);
    return done;
}

static crmm_status statistics_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    statistics_resource *r = (statistics_resource *)self;
    switch (what) {
    case CRMM_QUERY_BYTES_IN_USE:
    case CRMM_QUERY_BYTES_IN_USE_PEAK:
    case CRMM_QUERY_ALLOCATIONS:
    case CRMM_QUERY_ALLOCATIONS_PEAK:
    case CRMM_QUERY_ALLOCATIONS_TOTAL:
    case CRMM_QUERY_BYTES_TOTAL: {
        pthread_rwlock_rdlock(&r->frames_lock);
        crmm_alloc_counters all = fold_all(r);
        pthread_rwlock_unlock(&r->frames_lock);
        return crmm_counters_query(&all, what, out);
    }
    default:
        return crmm_resource_query_upstream(self, what, out);
    }
}

static crmm_status statistics_push(statistics_resource *r, crmm_alloc_counters *previous)
{
    pthread_rwlock_wrlock(&r->frames_lock);
    if (r->depth == r->capacity) {
        size_t cap = r->capacity * 2;
        crmm_alloc_counters *f = realloc(r->frames, cap * sizeof *f);
        if (!f) {
            pthread_rwlock_unlock(&r->frames_lock);
            return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "statistics: cannot push a frame: malloc failed");
        }
        r->frames = f;
        r->capacity = cap;
    }
    if (previous)
        *previous = r->frames[r->depth - 1];
    memset(&r->frames[r->depth], 0, sizeof r->frames[0]);
    r->depth++;
    pthread_rwlock_unlock(&r->frames_lock);
    return CRMM_OK;
}

static crmm_status statistics_pop(statistics_resource *r, crmm_alloc_counters *popped)
{
    pthread_rwlock_wrlock(&r->frames_lock);
    if (r->depth < 2) {
        pthread_rwlock_unlock(&r->frames_lock);
        return crmm_set_error(CRMM_ERROR_STATE, "statistics: cannot pop the base counter frame (a pop without a "
                              "matching push)");
    }
    crmm_alloc_counters top = r->frames[--r->depth];
    fold_into(&r->frames[r->depth - 1], &top);
    pthread_rwlock_unlock(&r->frames_lock);
    if (popped)
        *popped = top;
    return CRMM_OK;
}

static crmm_status statistics_control(crmm_resource *self, int op, void *arg)
{
    statistics_resource *r = (statistics_resource *)self;
    switch (op) {
    case CRMM_STATISTICS_OP_GET:
    case CRMM_STATISTICS_OP_DEPTH:
        if (!arg)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "statistics: control op %d needs an argument", op);
        pthread_rwlock_rdlock(&r->frames_lock);
        if (op == CRMM_STATISTICS_OP_GET)
            *(crmm_alloc_counters *)arg = load_frame(&r->frames[r->depth - 1]);
        else
            *(uint64_t *)arg = r->depth;
        pthread_rwlock_unlock(&r->frames_lock);
        return CRMM_OK;
    case CRMM_STATISTICS_OP_PUSH:
        return statistics_push(r, arg);
    case CRMM_STATISTICS_OP_POP:
        return statistics_pop(r, arg);
    default:
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "statistics resource has no control op %d", op);
    }
}

static void statistics_destroy(crmm_resource *self)
{
    statistics_resource *r = (statistics_resource *)self;
    crmm_fork_guard_remove(&r->fork_guard);
    crmm_alloc_counters all = fold_all(r);
    if (all.count > 0) /* negative: it freed memory allocated elsewhere (RMM allows that) */
        crmm_resource_report_leaks(self, (uint64_t)all.count, all.bytes > 0 ? (uint64_t)all.bytes : 0);
    pthread_rwlock_destroy(&r->frames_lock);
    free(r->frames);
    free(r);
}

static const crmm_resource_ops statistics_ops = {
    .allocate = statistics_allocate, .deallocate = statistics_deallocate, .query = statistics_query,
    .destroy = statistics_destroy, .control = statistics_control, .try_allocate = statistics_try_allocate,
    .try_deallocate = statistics_try_deallocate,
};

static crmm_status statistics_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    (void)params;
    statistics_resource *r = calloc(1, sizeof *r);
    crmm_alloc_counters *frames = calloc(8, sizeof *frames);
    if (!r || !frames) {
        free(r);
        free(frames);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "statistics: malloc failed");
    }
    pthread_rwlock_init(&r->frames_lock, NULL);
    r->frames = frames;
    r->depth = 1;
    r->capacity = 8;
    fork_guard_add_rwlock(&r->fork_guard, &r->frames_lock);
    return adaptor_publish(&r->base, &statistics_ops, "statistics", upstream, out);
}

PLUGIN_DESCRIPTOR(.name = "statistics", .upstream = CRMM_UPSTREAM_REQUIRED, .create = statistics_create,
                  .description = "counts live/peak/total bytes and allocations, with push/pop frames (RMM's statistics adaptor); counts a free only when upstream takes it, so a bad free is refused where upstream refuses it")
