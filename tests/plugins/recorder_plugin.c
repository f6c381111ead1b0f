/* recorder_plugin.c — test-only plugin `recorder`: host memory that reports every call it gets.
 *
 * Each allocate, deallocate and query is passed, with its stream handle, size or query number,
 * to `crmm_test_trace_call` when the program that loaded the plugin exports a function of that
 * name (found with dlsym at create); so a test can see which calls a tool makes, on which stream,
 * and in what order relative to its own clock reads. `device` (default -1) is the device ordinal
 * the resource claims, so that a tool treats it as device memory and gives it a CUDA stream.
 * BYTES_RESERVED is the bytes in use rounded up to 256 per allocation. */
#include "build_config.h"
#include <dlfcn.h>
#include <stdlib.h>
#include <crmm/plugin.h>
#include "test_plugin.h"

/* What the program's trace function is told: call is 'a'llocate, 'd'eallocate or 'q'uery;
 * value is the size, or the query number. */
typedef void (*recorder_trace_fn)(char call, const void *stream, uint64_t value);

typedef struct recorder_resource {
    crmm_resource base;
    recorder_trace_fn trace;   /* NULL: the program exports none */
    uint64_t in_use, reserved, peak_in_use, peak_reserved, count; /* atomic */
} recorder_resource;

static uint64_t rounded(size_t bytes)
{
    return ((uint64_t)bytes + CRMM_ALLOCATION_ALIGNMENT - 1) & ~(uint64_t)(CRMM_ALLOCATION_ALIGNMENT - 1);
}

static void raise_peak(uint64_t *peak, uint64_t now)
{
    uint64_t p = __atomic_load_n(peak, __ATOMIC_RELAXED);
    while (now > p && !__atomic_compare_exchange_n(peak, &p, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

static crmm_status recorder_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    recorder_resource *r = (recorder_resource *)self;
    if (r->trace)
        r->trace('a', stream, bytes);
    void *p = aligned_alloc(CRMM_ALLOCATION_ALIGNMENT, (size_t)rounded(bytes));
    if (!p)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "recorder: aligned_alloc of %zu bytes failed", bytes);
    raise_peak(&r->peak_in_use, __atomic_add_fetch(&r->in_use, bytes, __ATOMIC_RELAXED));
    raise_peak(&r->peak_reserved, __atomic_add_fetch(&r->reserved, rounded(bytes), __ATOMIC_RELAXED));
    __atomic_add_fetch(&r->count, 1, __ATOMIC_RELAXED);
    *ptr = p;
    return CRMM_OK;
}

static crmm_status recorder_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    recorder_resource *r = (recorder_resource *)self;
    if (r->trace)
        r->trace('d', stream, bytes);
    free(ptr);
    __atomic_sub_fetch(&r->in_use, bytes, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&r->reserved, rounded(bytes), __ATOMIC_RELAXED);
    __atomic_sub_fetch(&r->count, 1, __ATOMIC_RELAXED);
    return CRMM_OK;
}

static crmm_status recorder_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    recorder_resource *r = (recorder_resource *)self;
    if (r->trace)
        r->trace('q', NULL, (uint64_t)what);
    switch (what) {
    case CRMM_QUERY_BYTES_IN_USE: *out = __atomic_load_n(&r->in_use, __ATOMIC_RELAXED); return CRMM_OK;
    case CRMM_QUERY_BYTES_IN_USE_PEAK: *out = __atomic_load_n(&r->peak_in_use, __ATOMIC_RELAXED); return CRMM_OK;
    case CRMM_QUERY_BYTES_RESERVED: *out = __atomic_load_n(&r->reserved, __ATOMIC_RELAXED); return CRMM_OK;
    case CRMM_QUERY_BYTES_RESERVED_PEAK: *out = __atomic_load_n(&r->peak_reserved, __ATOMIC_RELAXED); return CRMM_OK;
    default:
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "recorder resource cannot answer query %d", (int)what);
    }
}

static void recorder_destroy(crmm_resource *self)
{
    recorder_resource *r = (recorder_resource *)self;
    crmm_resource_report_leaks(self, r->count, r->in_use);
    free(r);
}

TEST_PLUGIN_OPS(recorder, .query = recorder_query);

static crmm_status recorder_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    (void)upstream;
    TEST_PLUGIN_NEW(recorder_resource, r, "recorder");
    uint64_t device = 0;
    bool on_device = crmm_params_get_uint(params, "device", &device) == CRMM_OK && device != UINT64_MAX;
    *(void **)&r->trace = dlsym(RTLD_DEFAULT, "crmm_test_trace_call");
    unsigned flags = CRMM_RESOURCE_HOST_ACCESSIBLE | (on_device ? CRMM_RESOURCE_DEVICE_ACCESSIBLE : 0u);
    crmm_resource_init(&r->base, &recorder_ops, "recorder", flags, on_device ? (int)device : -1, NULL);
    *out = &r->base;
    return CRMM_OK;
}

static const crmm_param recorder_params[] = {
    {.key = "device", .type = CRMM_PARAM_UINT, .default_value = "0xffffffffffffffff",
     .help = "the device ordinal it claims (the default: none, host memory)"},
    {NULL},
};

TEST_PLUGIN_DEFINE(recorder, "test only: host memory that reports every call to the program's trace function",
                   CRMM_UPSTREAM_NONE)
