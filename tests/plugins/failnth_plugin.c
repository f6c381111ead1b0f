/* failnth_plugin.c — test-only plugin `failnth`: host memory whose Nth allocation fails.
 *
 * For fault injection: a stack built over it sees its upstream fail at one chosen call
 * (`fail_at`, counting from 1; 0 never fails), and the test then checks that the stack handled
 * it (an error, no crash) and gave every block back. It counts every allocate call, failed or
 * not (CRMM_QUERY_ALLOCATIONS_TOTAL counts only the ones that succeeded; control op
 * FAILNTH_OP_CALLS gives all calls), so a first run with fail_at = 0 tells how many indices
 * there are to try. */
#include "build_config.h"
#include <stdint.h>
#include <stdlib.h>
#include <crmm/alloc_counters.h>
#include <crmm/plugin.h>
#include "test_plugin.h"

#define FAILNTH_OP_CALLS 1 /* arg: uint64_t *, the allocate calls so far */

typedef struct failnth_resource {
    crmm_resource base;
    uint64_t fail_at;
    uint64_t calls;           /* atomic */
    crmm_alloc_counters counters;
} failnth_resource;

static crmm_status failnth_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    (void)stream;
    failnth_resource *r = (failnth_resource *)self;
    uint64_t n = __atomic_add_fetch(&r->calls, 1, __ATOMIC_RELAXED);
    if (n == r->fail_at)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "failnth: allocation %llu fails on purpose", (unsigned long long)n);
    void *p = test_plugin_host_block(bytes);
    if (!p)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "failnth: cannot allocate %zu bytes", bytes);
    return test_plugin_hand_out(&r->counters, p, bytes, ptr);
}

static crmm_status failnth_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    (void)stream;
    failnth_resource *r = (failnth_resource *)self;
    return test_plugin_take_back(&r->counters, ptr, bytes);
}

static crmm_status failnth_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    failnth_resource *r = (failnth_resource *)self;
    if (crmm_counters_query(&r->counters, what, out) == CRMM_OK)
        return CRMM_OK;
    return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "failnth resource cannot answer query %d", (int)what);
}

static crmm_status failnth_control(crmm_resource *self, int op, void *arg)
{
    failnth_resource *r = (failnth_resource *)self;
    if (op != FAILNTH_OP_CALLS || !arg)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "failnth: no control op %#x (or a NULL argument)", (unsigned)op);
    *(uint64_t *)arg = __atomic_load_n(&r->calls, __ATOMIC_RELAXED);
    return CRMM_OK;
}

TEST_PLUGIN_COUNTED_OPS(failnth, failnth_resource, .query = failnth_query, .control = failnth_control);

static crmm_status failnth_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    (void)upstream;
    TEST_PLUGIN_NEW(failnth_resource, r, "failnth");
    crmm_params_get_uint(params, "fail_at", &r->fail_at);
    crmm_resource_init(&r->base, &failnth_ops, "failnth", CRMM_RESOURCE_HOST_ACCESSIBLE, -1, NULL);
    *out = &r->base;
    return CRMM_OK;
}

static const crmm_param failnth_params[] = {
    {.key = "fail_at", .type = CRMM_PARAM_UINT, .default_value = "0",
     .help = "the allocate call that fails (from 1; 0: none)"},
    {NULL},
};

TEST_PLUGIN_DEFINE(failnth, "test only: host memory whose Nth allocation fails (fault injection)", CRMM_UPSTREAM_NONE)
