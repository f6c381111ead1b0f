/* test_plugin.h — what the test-only host plugins (budget, failnth, paramtest, recorder) share:
 * aligned host blocks, the destroy that reports leaks from the resource's counters, and the
 * plugin description, so each plugin file holds only what makes it different. */
#ifndef CRMM_TEST_PLUGIN_H
#define CRMM_TEST_PLUGIN_H

#include <stdint.h>
#include <stdlib.h>
#include <crmm/alloc_counters.h>
#include <crmm/plugin.h>

/* A host block of `bytes` aligned as the library promises, or NULL (also when rounding overflows). */
static inline void *test_plugin_host_block(size_t bytes)
{
    size_t rounded = (bytes + CRMM_ALLOCATION_ALIGNMENT - 1) & ~(size_t)(CRMM_ALLOCATION_ALIGNMENT - 1);
    return rounded >= bytes ? aligned_alloc(CRMM_ALLOCATION_ALIGNMENT, rounded) : NULL;
}

/* Hands out block p of `bytes` (*ptr = p), counted in *c. */
static inline crmm_status test_plugin_hand_out(crmm_alloc_counters *c, void *p, size_t bytes, void **ptr)
{
    crmm_counters_add(c, bytes, CRMM_COUNT_SHARED);
    *ptr = p;
    return CRMM_OK;
}

/* Frees a block of `bytes` that test_plugin_host_block gave, counted in *c. */
static inline crmm_status test_plugin_take_back(crmm_alloc_counters *c, void *ptr, size_t bytes)
{
    free(ptr);
    crmm_counters_sub(c, bytes, CRMM_COUNT_SHARED);
    return CRMM_OK;
}

/* In a create function: `var`, a zeroed `type`, or return out of memory naming plugin `name`. */
#define TEST_PLUGIN_NEW(type, var, name)                                                  \
    type *var = calloc(1, sizeof *var);                                                   \
    if (!var)                                                                             \
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, name ": malloc failed")

/* `prefix`_destroy for a `type` with a crmm_alloc_counters member `counters`: reports the blocks
 * still out as leaks, then frees the resource. */
#define TEST_PLUGIN_DESTROY(prefix, type)                                                          \
    static void prefix##_destroy(crmm_resource *self)                                              \
    {                                                                                              \
        type *r = (type *)self;                                                                    \
        crmm_resource_report_leaks(self, (uint64_t)r->counters.count, (uint64_t)r->counters.bytes); \
        free(r);                                                                                   \
    }

/* `prefix`_ops: `prefix`_allocate, _deallocate and _destroy, and the optional ops given after. */
#define TEST_PLUGIN_OPS(prefix, ...)                 \
    static const crmm_resource_ops prefix##_ops = {  \
        .allocate = prefix##_allocate,               \
        .deallocate = prefix##_deallocate,           \
        .destroy = prefix##_destroy,                 \
        __VA_ARGS__                                  \
    }

/* TEST_PLUGIN_DESTROY and TEST_PLUGIN_OPS in one: a plugin whose books are its `counters`. */
#define TEST_PLUGIN_COUNTED_OPS(prefix, type, ...) \
    TEST_PLUGIN_DESTROY(prefix, type)              \
    TEST_PLUGIN_OPS(prefix, __VA_ARGS__)

/* The plugin `prefix` (host memory, version 1.0.0) from `prefix`_params and `prefix`_create. */
#define TEST_PLUGIN_DEFINE(prefix, what, upstream_rule) \
    static const crmm_plugin prefix##_plugin = {        \
        CRMM_PLUGIN_HEADER,                             \
        .name = #prefix,                                \
        .version = "1.0.0",                             \
        .description = what,                            \
        .upstream = upstream_rule,                      \
        .flags = CRMM_PLUGIN_HOST_MEMORY,               \
        .params = prefix##_params,                      \
        .create = prefix##_create,                      \
    };                                                  \
    CRMM_PLUGIN_DEFINE(prefix##_plugin)

#endif
