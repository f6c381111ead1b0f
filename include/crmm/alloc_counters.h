/* crmm/alloc_counters.h — lock-free allocation counters for resources and adaptors.
 *
 * Current, peak and total allocation counts and bytes, updated with atomics, answering the
 * CRMM_QUERY_BYTES_IN_USE / ALLOCATIONS family. Used by the plain plugins (cuda, host, ...) for
 * their leak report and queries, and by adaptors that count. */
#ifndef CRMM_ALLOC_COUNTERS_H
#define CRMM_ALLOC_COUNTERS_H

#include <stdint.h>
#include <crmm/error.h>
#include <crmm/resource.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct crmm_alloc_counters {
    int64_t count, bytes;           /* live */
    int64_t peak_count, peak_bytes; /* highest live */
    uint64_t total_count, total_bytes;
} crmm_alloc_counters;

/* *peak = max(*peak, now), atomically: any thread may raise it at any time. peak must not be
 * NULL (as for every counter function here: they are inlined into hot paths and check nothing). */
static inline void crmm_counters_raise_peak(int64_t *peak, int64_t now)
{
    int64_t seen = __atomic_load_n(peak, __ATOMIC_RELAXED);
    while (now > seen && !__atomic_compare_exchange_n(peak, &seen, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* How a writer updates a crmm_alloc_counters (the `how` of crmm_counters_add and
 * crmm_counters_sub, a constant at each call so that the inlined code keeps only its case):
 *   CRMM_COUNT_SHARED  any thread may update at any time: atomic read-modify-writes;
 *   CRMM_COUNT_LOCKED  the writer holds its own lock around every update: plain relaxed loads
 *                      and stores, no locked instruction (a few cycles where SHARED costs one
 *                      atomic read-modify-write per field); crmm_counters_query still reads the
 *                      counters from any thread without that lock;
 *   CRMM_COUNT_FLOOR0  (with either) a free never takes a live counter below zero: for a
 *                      resource that cannot tell a wrong size from the right one, a free of more
 *                      than it counted leaves zero instead of wrapping to ~16 EiB.
 * Without FLOOR0 the live counters may go below zero (RMM's statistics do, when a block is freed
 * through another adaptor than the one it came from). */
#define CRMM_COUNT_SHARED 0u
#define CRMM_COUNT_LOCKED 1u
#define CRMM_COUNT_FLOOR0 2u

/* One counter: v += d (d may be negative) as `how` says (CRMM_COUNT_*); returns the new value.
 * crmm_counters_add and crmm_counters_sub are made of it; a resource with counters of its own
 * (limiting's bytes in use) updates them with it too. */
static inline int64_t crmm_counter_add(int64_t *v, int64_t d, unsigned how)
{
    int64_t seen = __atomic_load_n(v, __ATOMIC_RELAXED), next;
    if (how & CRMM_COUNT_LOCKED) {
        next = (how & CRMM_COUNT_FLOOR0) && d < 0 && seen < -d ? 0 : seen + d;
        __atomic_store_n(v, next, __ATOMIC_RELAXED);
        return next;
    }
    if (!(how & CRMM_COUNT_FLOOR0) || d >= 0)
        return __atomic_add_fetch(v, d, __ATOMIC_RELAXED);
    do
        next = seen < -d ? 0 : seen + d;
    while (!__atomic_compare_exchange_n(v, &seen, next, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return next;
}

/* peak = max(peak, now) as `how` says. */
static inline void crmm_counter_raise_peak_(int64_t *peak, int64_t now, unsigned how)
{
    if (how & CRMM_COUNT_LOCKED) {
        if (now > __atomic_load_n(peak, __ATOMIC_RELAXED))
            __atomic_store_n(peak, now, __ATOMIC_RELAXED);
    } else {
        crmm_counters_raise_peak(peak, now);
    }
}

/* Count one allocation of `bytes`, updated as `how` says (CRMM_COUNT_*). */
static inline void crmm_counters_add(crmm_alloc_counters *c, uint64_t bytes, unsigned how)
{
    int64_t n = crmm_counter_add(&c->count, 1, how);
    int64_t b = crmm_counter_add(&c->bytes, (int64_t)bytes, how);
    crmm_counter_raise_peak_(&c->peak_count, n, how);
    crmm_counter_raise_peak_(&c->peak_bytes, b, how);
    crmm_counter_add((int64_t *)&c->total_count, 1, how);
    crmm_counter_add((int64_t *)&c->total_bytes, (int64_t)bytes, how);
}

/* Count one free of `bytes`, updated as `how` says (CRMM_COUNT_*). */
static inline void crmm_counters_sub(crmm_alloc_counters *c, uint64_t bytes, unsigned how)
{
    crmm_counter_add(&c->count, -1, how);
    crmm_counter_add(&c->bytes, bytes > (uint64_t)INT64_MAX ? -INT64_MAX : -(int64_t)bytes, how);
}

/* Answer the counter queries; CRMM_ERROR_UNSUPPORTED (no message) for any other. */
static inline crmm_status crmm_counters_query(const crmm_alloc_counters *c, crmm_query what, uint64_t *out)
{
    switch (what) {
    case CRMM_QUERY_BYTES_IN_USE: *out = (uint64_t)__atomic_load_n(&c->bytes, __ATOMIC_RELAXED); return CRMM_OK;
    case CRMM_QUERY_BYTES_IN_USE_PEAK: *out = (uint64_t)__atomic_load_n(&c->peak_bytes, __ATOMIC_RELAXED); return CRMM_OK;
    case CRMM_QUERY_ALLOCATIONS: *out = (uint64_t)__atomic_load_n(&c->count, __ATOMIC_RELAXED); return CRMM_OK;
    case CRMM_QUERY_ALLOCATIONS_PEAK: *out = (uint64_t)__atomic_load_n(&c->peak_count, __ATOMIC_RELAXED); return CRMM_OK;
    case CRMM_QUERY_ALLOCATIONS_TOTAL: *out = __atomic_load_n(&c->total_count, __ATOMIC_RELAXED); return CRMM_OK;
    case CRMM_QUERY_BYTES_TOTAL: *out = __atomic_load_n(&c->total_bytes, __ATOMIC_RELAXED); return CRMM_OK;
    default: return CRMM_ERROR_UNSUPPORTED;
    }
}

/* ---- for adaptors that count what passes through them ----------------------------------- */

/* An adaptor's deallocate: free through the upstream, then count the free, only once the
 * upstream took the memory back (a refused free stays counted). The counts stop at zero: an
 * upstream that takes no size (cudaFree, free()) accepts a wrong one, which must not wrap them
 * to ~2^64. Returns the upstream's status. */
static inline crmm_status crmm_counted_deallocate(crmm_resource *self, crmm_alloc_counters *c, void *ptr, size_t bytes,
                                                  crmm_cuda_stream_t stream)
{
    crmm_status st = crmm_resource_deallocate(self->upstream, ptr, bytes, stream);
    if (st == CRMM_OK)
        crmm_counters_sub(c, bytes, CRMM_COUNT_SHARED | CRMM_COUNT_FLOOR0);
    return st;
}

/* An adaptor's query: the counter queries from its own counters, every other from the
 * upstream (a pool's reserved bytes, say): then crmm_resource_query_upstream's errors
 * (CRMM_ERROR_UNSUPPORTED, CRMM_ERROR_INVALID_ARGUMENT) or the upstream's own. */
static inline crmm_status crmm_counted_query(crmm_resource *self, const crmm_alloc_counters *c, crmm_query what,
                                             uint64_t *out)
{
    if (crmm_counters_query(c, what, out) == CRMM_OK)
        return CRMM_OK;
    return crmm_resource_query_upstream(self, what, out);
}

/* For destroy: warn about the allocations still live (crmm_resource_report_leaks). */
static inline void crmm_counted_report_leaks(const crmm_resource *self, const crmm_alloc_counters *c)
{
    int64_t count = __atomic_load_n(&c->count, __ATOMIC_RELAXED), bytes = __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
    crmm_resource_report_leaks(self, count > 0 ? (uint64_t)count : 0, bytes > 0 ? (uint64_t)bytes : 0);
}

#ifdef __cplusplus
}
#endif
#endif
