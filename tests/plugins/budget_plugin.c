/* budget_plugin.c — test-only plugin `budget`: host memory with a byte budget.
 *
 * Requests that would take the bytes in use past `limit` fail (CRMM_ERROR_OUT_OF_MEMORY, or
 * CRMM_ERROR_BAD_ALLOC with status = bad_alloc, CRMM_ERROR_CUDA with status = cuda); freeing makes room again. It gives the CPU
 * tests a resource that runs out of memory on purpose (failure_callback retries, fixed_size
 * growth failures) without depending on another adaptor. The budget is one atomic counter. */
#include "build_config.h"
#include <stdlib.h>
#include <string.h>
#include <crmm/alloc_counters.h>
#include <crmm/plugin.h>
#include "test_plugin.h"

typedef struct budget_resource {
    crmm_resource base;
    uint64_t limit;
    uint64_t used;            /* atomic: bytes as requested */
    crmm_status failure;      /* what a request over the budget returns */
    crmm_alloc_counters counters;
} budget_resource;

static crmm_status budget_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    (void)stream;
    budget_resource *b = (budget_resource *)self;
    uint64_t used = __atomic_load_n(&b->used, __ATOMIC_RELAXED);
    do {
        if (bytes > b->limit - used)
            return crmm_set_error(b->failure, "budget: failed to allocate %zu bytes (%llu of %llu in use)", bytes,
                                  (unsigned long long)used, (unsigned long long)b->limit);
    } while (!__atomic_compare_exchange_n(&b->used, &used, used + bytes, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    void *p = test_plugin_host_block(bytes);
    if (!p) {
        __atomic_sub_fetch(&b->used, bytes, __ATOMIC_RELAXED);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "budget: aligned_alloc of %zu bytes failed", bytes);
    }
    return test_plugin_hand_out(&b->counters, p, bytes, ptr);
}

static crmm_status budget_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    (void)stream;
    budget_resource *b = (budget_resource *)self;
    __atomic_sub_fetch(&b->used, bytes, __ATOMIC_RELAXED);
    return test_plugin_take_back(&b->counters, ptr, bytes);
}

static crmm_status budget_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    budget_resource *b = (budget_resource *)self;
    if (what == CRMM_QUERY_MAXIMUM_SIZE) {
        *out = b->limit;
        return CRMM_OK;
    }
    if (crmm_counters_query(&b->counters, what, out) == CRMM_OK)
        return CRMM_OK;
    return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "budget resource cannot answer query %d", (int)what);
}

TEST_PLUGIN_COUNTED_OPS(budget, budget_resource, .query = budget_query);

static crmm_status budget_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    (void)upstream;
    TEST_PLUGIN_NEW(budget_resource, b, "budget");
    crmm_params_get_size(params, "limit", &b->limit);
    const char *status = "out_of_memory";
    crmm_params_get_string(params, "status", &status);
    b->failure = strcmp(status, "bad_alloc") == 0 ? CRMM_ERROR_BAD_ALLOC
               : strcmp(status, "cuda") == 0    ? CRMM_ERROR_CUDA
                                                : CRMM_ERROR_OUT_OF_MEMORY;
    crmm_resource_init(&b->base, &budget_ops, "budget", CRMM_RESOURCE_HOST_ACCESSIBLE, -1, NULL);
    *out = &b->base;
    return CRMM_OK;
}

static const crmm_param budget_params[] = {
    {.key = "limit", .type = CRMM_PARAM_SIZE,
     .help = "the most bytes in use at once",
     .flags = CRMM_PARAM_REQUIRED},
    {.key = "status", .type = CRMM_PARAM_ENUM, .default_value = "out_of_memory",
     .help = "what a request over the limit returns",
     .choices = "out_of_memory|bad_alloc|cuda"},
    {NULL},
};

TEST_PLUGIN_DEFINE(budget, "test only: host memory with a byte budget", CRMM_UPSTREAM_NONE)
