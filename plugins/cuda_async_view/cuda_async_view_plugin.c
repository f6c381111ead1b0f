/* cuda_async_view_plugin.c — the `cuda_async_view` plugin (RMM's cuda_async_view_memory_resource):
 * cudaMallocFromPoolAsync / cudaFreeAsync on a cudaMemPool_t the caller made and owns.
 *
 * The pool is the parameter pool_handle, its address as an integer (0 is refused). Nothing can
 * check that the address is a pool without the driver dereferencing it, so the caller must pass
 * a live one; the resource never destroys it (plugins/common/pool_view.c). */
#include "build_config.h"
#include <crmm/cuda_async_view.h>
#include <crmm/cuda_support.h>
#include "../common/device_check.h"
#include "../common/plugin_descriptor.h"
#include "../common/pool_view.h"

typedef struct cuda_async_view_config {
    uint64_t pool_handle;
} cuda_async_view_config;

static crmm_status cuda_async_view_create_resource(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    (void)upstream;
    cuda_async_view_config cfg = {0};
    crmm_status st = crmm_params_parse(params, &cfg);
    if (st != CRMM_OK)
        return st;
    if ((uint64_t)(uintptr_t)cfg.pool_handle != cfg.pool_handle)
        return crmm_set_error(CRMM_ERROR_CONFIG, "cuda_async_view: pool_handle %#jx is not an address",
                              (uintmax_t)cfg.pool_handle);
    int device;
    if ((st = device_check_resolve(params, "cuda_async_view", &device)) != CRMM_OK ||
        (st = pool_view_check_device("cuda_async_view", device)) != CRMM_OK)
        return st;
    return pool_view_create("cuda_async_view", (cudaMemPool_t)(uintptr_t)cfg.pool_handle, device,
                            CRMM_RESOURCE_DEVICE_ACCESSIBLE, CRMM_CUDA_ASYNC_VIEW_OP_GET_POOL, out);
}

static const crmm_param cuda_async_view_params[] = {
    {.key = "pool_handle", .type = CRMM_PARAM_UINT,
     .help = "the cudaMemPool_t to allocate from, as an address (decimal or 0x hex; not 0); the caller owns it",
     .offset = offsetof(cuda_async_view_config, pool_handle), .min = 1, .flags = CRMM_PARAM_REQUIRED},
    {NULL},
};

PLUGIN_DESCRIPTOR(.name = "cuda_async_view", .upstream = CRMM_UPSTREAM_NONE, .params = cuda_async_view_params,
                  .config_size = sizeof(cuda_async_view_config), .create = cuda_async_view_create_resource,
                  .description = "cudaMallocFromPoolAsync on an existing cudaMemPool_t the caller owns (RMM cuda_async_view_memory_resource)")
