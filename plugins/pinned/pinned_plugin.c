/* pinned_plugin.c — the `pinned` plugin: page-locked host memory from cudaHostAlloc, host
 * accessible and device accessible (mapped); the fast source and target of host copies. */
#include "build_config.h"
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include "../common/direct_resource.h"
#include "../common/plugin_descriptor.h"

static crmm_status pinned_alloc(size_t bytes, void **ptr)
{
    return crmm_cuda_status(cudaHostAlloc(ptr, bytes, cudaHostAllocDefault), "cudaHostAlloc");
}

static crmm_status pinned_free(void *ptr, size_t bytes)
{
    (void)bytes;
    return crmm_cuda_status(cudaFreeHost(ptr), "cudaFreeHost");
}

static const direct_backend pinned_backend = {
    .kind = "pinned", .flags = CRMM_RESOURCE_DEVICE_ACCESSIBLE | CRMM_RESOURCE_HOST_ACCESSIBLE,
    .uses_cuda = true, .alloc = pinned_alloc, .free = pinned_free,
};

static crmm_status pinned_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    (void)params;
    (void)upstream;
    return direct_resource_create(&pinned_backend, out);
}

PLUGIN_DESCRIPTOR(.name = "pinned", .upstream = CRMM_UPSTREAM_NONE, .create = pinned_create,
                  .description = "page-locked host memory from cudaHostAlloc, host and device accessible")
