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

static inline void crmm_counters_raise_peak(int64_t *peak, int64_t now)
{
    int64_t seen = __atomic_load_n(peak, __ATOMIC_RELAXED);
    while (now > seen && !__atomic_compare_exchange_n(peak, &seen, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* Count one allocation of `bytes`. */
static inline void crmm_counters_add(crmm_alloc_counters *c, uint64_t bytes)
{
    int64_t n = __atomic_add_fetch(&c->count, 1, __ATOMIC_RELAXED);
    int64_t b = __atomic_add_fetch(&c->bytes, (int64_t)bytes, __ATOMIC_RELAXED);
    crmm_counters_raise_peak(&c->peak_count, n);
    crmm_counters_raise_peak(&c->peak_bytes, b);
    __atomic_add_fetch(&c->total_count, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->total_bytes, bytes, __ATOMIC_RELAXED);
}

/* Count one free of `bytes`. The live counters may go below zero (RMM's statistics do, when a
 * block is freed through another adaptor than the one it came from). */
static inline void crmm_counters_sub(crmm_alloc_counters *c, uint64_t bytes)
{
    __atomic_sub_fetch(&c->count, 1, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&c->bytes, (int64_t)bytes, __ATOMIC_RELAXED);
}

/* Count one allocation of `bytes`, for a writer that holds its own lock around every update of
 * `c`: plain relaxed loads and stores, no locked instruction, so it costs a few cycles where
 * crmm_counters_add costs one atomic read-modify-write per field. crmm_counters_query still
 * reads `c` from any thread without that lock. */
static inline void crmm_counters_add_locked(crmm_alloc_counters *c, uint64_t bytes)
{
    int64_t n = __atomic_load_n(&c->count, __ATOMIC_RELAXED) + 1;
    int64_t b = __atomic_load_n(&c->bytes, __ATOMIC_RELAXED) + (int64_t)bytes;
    __atomic_store_n(&c->count, n, __ATOMIC_RELAXED);
    __atomic_store_n(&c->bytes, b, __ATOMIC_RELAXED);
    if (n > __atomic_load_n(&c->peak_count, __ATOMIC_RELAXED))
        __atomic_store_n(&c->peak_count, n, __ATOMIC_RELAXED);
    if (b > __atomic_load_n(&c->peak_bytes, __ATOMIC_RELAXED))
        __atomic_store_n(&c->peak_bytes, b, __ATOMIC_RELAXED);
    __atomic_store_n(&c->total_count, __atomic_load_n(&c->total_count, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&c->total_bytes, __atomic_load_n(&c->total_bytes, __ATOMIC_RELAXED) + bytes, __ATOMIC_RELAXED);
}

/* Count one free of `bytes`, under the writer's own lock (see crmm_counters_add_locked). */
static inline void crmm_counters_sub_locked(crmm_alloc_counters *c, uint64_t bytes)
{
    __atomic_store_n(&c->count, __atomic_load_n(&c->count, __ATOMIC_RELAXED) - 1, __ATOMIC_RELAXED);
    __atomic_store_n(&c->bytes, __atomic_load_n(&c->bytes, __ATOMIC_RELAXED) - (int64_t)bytes, __ATOMIC_RELAXED);
}

static inline void crmm_counters_sub_floor0(int64_t *v, uint64_t n)
{
    int64_t d = n > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)n;
    int64_t seen = __atomic_load_n(v, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(v, &seen, seen > d ? seen - d : 0, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* Count one free of `bytes`, never below zero: for a resource that counts what it holds and
 * cannot tell a wrong size from the right one, a free of more than it counted leaves zero
 * instead of wrapping to ~16 EiB. */
static inline void crmm_counters_sub_clamped(crmm_alloc_counters *c, uint64_t bytes)
{
    crmm_counters_sub_floor0(&c->count, 1);
    crmm_counters_sub_floor0(&c->bytes, bytes);
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
 * upstream took the memory back (a refused free stays counted). Returns the upstream's status. */
static inline crmm_status crmm_counted_deallocate(crmm_resource *self, crmm_alloc_counters *c, void *ptr, size_t bytes,
                                                  crmm_cuda_stream_t stream)
{
    crmm_status st = crmm_resource_deallocate(self->upstream, ptr, bytes, stream);
    if (st == CRMM_OK)
        crmm_counters_sub(c, bytes);
    return st;
}

/* An adaptor's query: the counter queries from its own counters, every other from the
 * upstream (a pool's reserved bytes, say). */
static inline crmm_status crmm_counted_query(crmm_resource *self, const crmm_alloc_counters *c, crmm_query what,
                                             uint64_t *out)
{
    if (crmm_counters_query(c, what, out) == CRMM_OK)
        return CRMM_OK;
    return crmm_resource_query(self->upstream, what, out);
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
