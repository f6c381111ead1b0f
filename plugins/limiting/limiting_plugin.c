/* limiting_plugin.c — the `limiting` plugin: refuses allocations past a byte limit
 * (RMM's limiting_resource_adaptor).
 *
 * One atomic counter of bytes in use, each allocation counted as RMM does, rounded up to the
 * 256-byte allocation alignment. An allocation first reserves its bytes with a
 * compare-and-swap that fails when the new total would pass the limit (so racing threads can
 * never together exceed it, and a refused request leaves the counter untouched), then asks the
 * upstream, and gives the reservation back if the upstream fails. */
#include "build_config.h"
#include <stdint.h>
#include <stdlib.h>
#include <crmm/alloc_counters.h>
#include <crmm/plugin.h>
#include "../common/adaptor.h"
#include "../common/plugin_descriptor.h"

typedef struct limiting_resource {
    crmm_resource base;
    uint64_t limit;
    int64_t in_use;        /* reserved bytes (rounded), atomic */
    int64_t peak;          /* highest in_use, atomic */
    int64_t live;          /* live allocations, atomic */
    int64_t live_peak;     /* highest live, atomic */
} limiting_resource;

/* Reserve the rounded size of `bytes` in in_use (*rounded); false, with nothing reserved and
 * *now the count seen, when it would pass the limit. */
static bool reserve(limiting_resource *r, size_t bytes, uint64_t *rounded, int64_t *now)
{
    const uint64_t align = CRMM_ALLOCATION_ALIGNMENT;
    *rounded = bytes > UINT64_MAX - (align - 1) ? UINT64_MAX : ((uint64_t)bytes + align - 1) & ~(align - 1);
    const uint64_t cap = r->limit < (uint64_t)INT64_MAX ? r->limit : (uint64_t)INT64_MAX; /* in_use is an int64_t */
    *now = __atomic_load_n(&r->in_use, __ATOMIC_RELAXED);
    do {
        if (*rounded > cap || (uint64_t)*now > cap - *rounded)
            return false;
    } while (!__atomic_compare_exchange_n(&r->in_use, now, *now + (int64_t)*rounded, 1, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    return true;
}

/* The upstream failed: give the reservation back (never below zero: a wrong-size free may have
 * taken the count to zero meanwhile, and a negative one refuses everything afterwards). */
static void unreserve(limiting_resource *r, uint64_t rounded)
{
    crmm_counter_add(&r->in_use, -(int64_t)rounded, CRMM_COUNT_SHARED | CRMM_COUNT_FLOOR0);
}

/* The upstream gave the memory: count it live and raise the peaks (a load and a compare each,
 * unless a peak rises). Totals are not counted here: two more atomic additions on this line,
 * which every allocating thread takes in turn, slowed contended allocation far more than the
 * peaks do (bench/RESULTS.md); the upstream answers them. */
static void count_live(limiting_resource *r, uint64_t rounded, int64_t before)
{
    crmm_counters_raise_peak(&r->peak, before + (int64_t)rounded);
    crmm_counters_raise_peak(&r->live_peak, crmm_counter_add(&r->live, 1, CRMM_COUNT_SHARED));
}

/* The upstream took the memory back: its room returns and the allocation is no longer live
 * (neither count below zero: a wrong size, or a block the upstream handed out to someone else,
 * must not wrap the counts, which would refuse everything afterwards and report ~2^64 leaks). */
static void count_freed(limiting_resource *r, size_t bytes)
{
    const uint64_t align = CRMM_ALLOCATION_ALIGNMENT;
    /* rounded up without wrapping, and at most INT64_MAX (a negative delta must stay negative) */
    uint64_t take = (uint64_t)bytes > INT64_MAX - (align - 1) ? INT64_MAX : ((uint64_t)bytes + align - 1) & ~(align - 1);
    crmm_counter_add(&r->in_use, -(int64_t)take, CRMM_COUNT_SHARED | CRMM_COUNT_FLOOR0);
    crmm_counter_add(&r->live, -1, CRMM_COUNT_SHARED | CRMM_COUNT_FLOOR0);
}

static crmm_status limiting_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    limiting_resource *r = (limiting_resource *)self;
    uint64_t rounded;
    int64_t now;
    if (!reserve(r, bytes, &rounded, &now)) {
        char want[32], used[32], lim[32];
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "limiting%s%s%s: failed to allocate %s: %s of the %s limit "
                              "in use", self->name[0] ? " '" : "", self->name, self->name[0] ? "'" : "",
                              crmm_format_size(bytes, want, sizeof want), crmm_format_size((uint64_t)now, used, sizeof used),
                              crmm_format_size(r->limit, lim, sizeof lim));
    }
    crmm_status st = crmm_resource_allocate(self->upstream, bytes, stream, ptr);
    if (st != CRMM_OK) {
        unreserve(r, rounded);
        return crmm_error_add_context("limiting%s%s%s", self->name[0] ? " '" : "", self->name, self->name[0] ? "'" : "");
    }
    count_live(r, rounded, now);
    return CRMM_OK;
}

static crmm_status limiting_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    crmm_status st = crmm_resource_deallocate(self->upstream, ptr, bytes, stream);
    if (st == CRMM_OK) /* room comes back only once the upstream has the memory back */
        count_freed((limiting_resource *)self, bytes);
    return st;
}

/* The calls that never wait: a reservation (atomic) and the upstream's own try; a request past
 * the limit is left to allocate, which names it. */
static bool limiting_try_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    limiting_resource *r = (limiting_resource *)self;
    uint64_t rounded;
    int64_t now;
    if (!reserve(r, bytes, &rounded, &now))
        return false;
    if (!crmm_resource_try_allocate(self->upstream, bytes, stream, ptr)) {
        unreserve(r, rounded);
        return false;
    }
    count_live(r, rounded, now);
    return true;
}

static bool limiting_try_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    if (!crmm_resource_try_deallocate(self->upstream, ptr, bytes, stream))
        return false;
    count_freed((limiting_resource *)self, bytes);
    return true;
}

static crmm_status limiting_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    limiting_resource *r = (limiting_resource *)self;
    switch (what) {
    case CRMM_QUERY_BYTES_IN_USE:
        *out = (uint64_t)__atomic_load_n(&r->in_use, __ATOMIC_RELAXED);
        return CRMM_OK;
    case CRMM_QUERY_BYTES_IN_USE_PEAK:
        *out = (uint64_t)__atomic_load_n(&r->peak, __ATOMIC_RELAXED);
        return CRMM_OK;
    case CRMM_QUERY_MAXIMUM_SIZE:
        *out = r->limit;
        return CRMM_OK;
    case CRMM_QUERY_ALLOCATIONS:
        *out = (uint64_t)__atomic_load_n(&r->live, __ATOMIC_RELAXED);
        return CRMM_OK;
    case CRMM_QUERY_ALLOCATIONS_PEAK:
        *out = (uint64_t)__atomic_load_n(&r->live_peak, __ATOMIC_RELAXED);
        return CRMM_OK;
    default: /* what the upstream holds (reserved, free, ...) and the totals are the upstream's */
        return crmm_resource_query_upstream(self, what, out);
    }
}

static void limiting_destroy(crmm_resource *self)
{
    limiting_resource *r = (limiting_resource *)self;
    crmm_resource_report_leaks(self, (uint64_t)r->live, (uint64_t)r->in_use);
    free(r);
}

static const crmm_resource_ops limiting_ops = {
    .allocate = limiting_allocate, .deallocate = limiting_deallocate, .query = limiting_query,
    .destroy = limiting_destroy, .try_allocate = limiting_try_allocate, .try_deallocate = limiting_try_deallocate,
};

static crmm_status limiting_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    uint64_t limit = 0; /* required: the core refuses a config without it */
    crmm_status st = crmm_params_parse(params, &limit);
    if (st != CRMM_OK)
        return st;
    limiting_resource *r = adaptor_alloc(sizeof *r, "limiting");
    if (!r)
        return CRMM_ERROR_OUT_OF_MEMORY;
    r->limit = limit;
    return adaptor_publish(&r->base, &limiting_ops, "limiting", upstream, out);
}

/* The one parameter lands in a uint64_t; a limit of 0 would refuse every allocation. */
static const crmm_param limiting_params[] = {
    {.key = "allocation_limit", .type = CRMM_PARAM_SIZE,
     .help = "the most bytes in use at once (each allocation rounded up to 256 B)",
     .min = 1, .flags = CRMM_PARAM_REQUIRED},
    {NULL},
};

PLUGIN_DESCRIPTOR(.name = "limiting", .upstream = CRMM_UPSTREAM_REQUIRED, .params = limiting_params,
                  .config_size = sizeof(uint64_t), .create = limiting_create,
                  .description = "refuses allocations that would put more than allocation_limit bytes in use (RMM's limiting "
                                 "adaptor); its live counts and their peaks are its own allocations' (bytes rounded to "
                                 "256), the totals its upstream's")
