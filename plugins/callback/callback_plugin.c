/* callback_plugin.c — the `callback` plugin (RMM's callback_memory_resource): allocate and
 * deallocate call the caller's functions, given as addresses (crmm/callback.h).
 *
 * The resource keeps lock-free counters for queries and the leak report. A NULL from the
 * allocate callback is out of memory; a block that is not aligned to CRMM_ALLOCATION_ALIGNMENT is
 * handed back to the deallocate callback and refused, since every crmm resource promises that
 * alignment. A function address of 0 is refused at create. */
#include "build_config.h"
#include <stdlib.h>
#include <string.h>
#include <crmm/alloc_counters.h>
#include <crmm/callback.h>
#include <crmm/cuda_support.h>
#include <crmm/plugin.h>
#include "../common/counted_source.h"
#include "../common/plugin_descriptor.h"

typedef struct callback_resource {
    counted_source src;
    crmm_callback_allocate_fn allocate;
    crmm_callback_deallocate_fn deallocate;
    void *allocate_arg, *deallocate_arg;
} callback_resource;

static crmm_status callback_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    callback_resource *c = (callback_resource *)self;
    void *p = c->allocate(bytes, stream, c->allocate_arg);
    char sz[32];
    if (!p)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "callback: failed to allocate %s: the allocate callback returned NULL",
                              crmm_format_size(bytes, sz, sizeof sz));
    if ((uintptr_t)p % CRMM_ALLOCATION_ALIGNMENT) {
        c->deallocate(p, bytes, stream, c->deallocate_arg);
        return crmm_set_error(CRMM_ERROR_BAD_ALLOC, "callback: the allocate callback returned %p for %s, not aligned to %d bytes",
                              p, crmm_format_size(bytes, sz, sizeof sz), CRMM_ALLOCATION_ALIGNMENT);
    }
    crmm_counters_add(&c->src.counters, bytes, CRMM_COUNT_SHARED);
    *ptr = p;
    return CRMM_OK;
}

static crmm_status callback_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    callback_resource *c = (callback_resource *)self;
    c->deallocate(ptr, bytes, stream, c->deallocate_arg);
    /* the callbacks cannot tell a wrong size: the counts stop at zero instead of wrapping */
    crmm_counters_sub(&c->src.counters, bytes, CRMM_COUNT_SHARED | CRMM_COUNT_FLOOR0);
    return CRMM_OK;
}

static const crmm_resource_ops callback_ops = {
    .allocate = callback_allocate, .deallocate = callback_deallocate, .query = counted_source_query,
    .destroy = counted_source_destroy,
};

/* The parameters, as crmm_params_parse fills them from callback_params. */
typedef struct callback_config {
    uint64_t allocate_fn, deallocate_fn, allocate_arg, deallocate_arg;
    bool device_accessible, host_accessible;
} callback_config;

/* `value` as a pointer-sized integer; false when it does not fit in one. */
static bool as_address(uint64_t value, uintptr_t *out)
{
    *out = (uintptr_t)value;
    return (uint64_t)*out == value;
}

/* Memory someone can reach, for validate and create alike (*key: the one blamed). */
static crmm_status accessibility_rule(bool device_accessible, bool host_accessible, const char **key)
{
    if (device_accessible || host_accessible)
        return CRMM_OK;
    *key = "device_accessible";
    return crmm_set_error(CRMM_ERROR_CONFIG, "callback: device_accessible and host_accessible are both false: the memory would be of no use");
}

/* crmm_plugin.validate: the accessibility rule, so that check-config refuses what create would. */
static crmm_status callback_validate(const crmm_params *params, bool host_memory, const char **key)
{
    (void)host_memory;
    bool device = true, host = false;
    if (crmm_params_get_bool(params, "device_accessible", &device) != CRMM_OK ||
        crmm_params_get_bool(params, "host_accessible", &host) != CRMM_OK)
        return CRMM_OK; /* a value that does not parse is the parser's error, named by it */
    return accessibility_rule(device, host, key);
}

static crmm_status callback_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    (void)upstream;
    callback_config cfg = {0};
    crmm_status st = crmm_params_parse(params, &cfg);
    if (st != CRMM_OK)
        return st;
    static const char *const keys[] = {"allocate_fn", "deallocate_fn", "allocate_arg", "deallocate_arg"};
    const uint64_t values[] = {cfg.allocate_fn, cfg.deallocate_fn, cfg.allocate_arg, cfg.deallocate_arg};
    uintptr_t addr[4];
    for (int i = 0; i < 4; i++)
        if (!as_address(values[i], &addr[i]))
            return crmm_set_error(CRMM_ERROR_CONFIG, "callback: %s %#jx is not an address", keys[i], (uintmax_t)values[i]);
    const char *key;
    if ((st = accessibility_rule(cfg.device_accessible, cfg.host_accessible, &key)) != CRMM_OK)
        return st;
    callback_resource *c = calloc(1, sizeof *c);
    if (!c)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "callback: malloc failed");
    memcpy(&c->allocate, &addr[0], sizeof c->allocate);
    memcpy(&c->deallocate, &addr[1], sizeof c->deallocate);
    c->allocate_arg = (void *)addr[2];
    c->deallocate_arg = (void *)addr[3];
    unsigned flags = (cfg.device_accessible ? CRMM_RESOURCE_DEVICE_ACCESSIBLE : 0u) |
                     (cfg.host_accessible ? CRMM_RESOURCE_HOST_ACCESSIBLE : 0u);
    /* device memory belongs to the device current at create; without one it counts as host memory */
    int device = crmm_params_device(params);
    if (device < 0 && cfg.device_accessible && crmm_cuda_current_device(&device) != CRMM_OK) {
        device = -1;
        crmm_clear_error(); /* no device is no failure here */
    }
    crmm_resource_init(&c->src.base, &callback_ops, "callback", flags, device, NULL);
    *out = &c->src.base;
    return CRMM_OK;
}

static const crmm_param callback_params[] = {
    {.key = "allocate_fn", .type = CRMM_PARAM_UINT,
     .help = "address of void *fn(size_t bytes, crmm_cuda_stream_t stream, void *arg) (decimal or 0x hex; not 0); NULL from it is out of memory",
     .offset = offsetof(callback_config, allocate_fn), .min = 1, .flags = CRMM_PARAM_REQUIRED},
    {.key = "deallocate_fn", .type = CRMM_PARAM_UINT,
     .help = "address of void fn(void *ptr, size_t bytes, crmm_cuda_stream_t stream, void *arg) (not 0)",
     .offset = offsetof(callback_config, deallocate_fn), .min = 1, .flags = CRMM_PARAM_REQUIRED},
    {.key = "allocate_arg", .type = CRMM_PARAM_UINT, .default_value = "0",
     .help = "the last argument of every allocate_fn call, as an address",
     .offset = offsetof(callback_config, allocate_arg)},
    {.key = "deallocate_arg", .type = CRMM_PARAM_UINT, .default_value = "0",
     .help = "the last argument of every deallocate_fn call, as an address",
     .offset = offsetof(callback_config, deallocate_arg)},
    {.key = "device_accessible", .type = CRMM_PARAM_BOOL, .default_value = "true",
     .help = "the callbacks' memory is usable by the device",
     .offset = offsetof(callback_config, device_accessible)},
    {.key = "host_accessible", .type = CRMM_PARAM_BOOL, .default_value = "false",
     .help = "the callbacks' memory is usable from the host",
     .offset = offsetof(callback_config, host_accessible)},
    {NULL},
};

PLUGIN_DESCRIPTOR(.name = "callback", .upstream = CRMM_UPSTREAM_NONE, .params = callback_params,
                  .config_size = sizeof(callback_config), .validate = callback_validate, .create = callback_create,
                  .description = "allocate and deallocate call the caller's functions, given by address (crmm_callback_resource_create; RMM callback_memory_resource)")
