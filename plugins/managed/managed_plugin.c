/* managed_plugin.c — the `managed` plugin: unified memory from cudaMallocManaged, usable from
 * host and device; pages migrate on demand (see the `prefetch` adaptor). */
#include "build_config.h"
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include "../common/direct_resource.h"
#include "../common/plugin_descriptor.h"

static crmm_status managed_alloc(size_t bytes, void **ptr)
{
    return crmm_cuda_status(cudaMallocManaged(ptr, bytes, cudaMemAttachGlobal), "cudaMallocManaged");
}

static crmm_status managed_free(void *ptr, size_t bytes)
{
    (void)bytes;
    return crmm_cuda_status(cudaFree(ptr), "cudaFree");
}

static const direct_backend managed_backend = {
    .kind = "managed", .flags = CRMM_RESOURCE_DEVICE_ACCESSIBLE | CRMM_RESOURCE_HOST_ACCESSIBLE,
    .uses_cuda = true, .alloc = managed_alloc, .free = managed_free,
};

static crmm_status managed_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    (void)params;
    (void)upstream;
    return direct_resource_create(&managed_backend, out);
}

PLUGIN_DESCRIPTOR(.name = "managed", .upstream = CRMM_UPSTREAM_NONE, .create = managed_create,
                  .description = "unified (managed) memory from cudaMallocManaged, host and device accessible")
