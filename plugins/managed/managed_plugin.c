/* managed_plugin.c — the `managed` plugin: unified memory from cudaMallocManaged, usable from
 * host and device; pages migrate on demand (see the `prefetch` adaptor). */
#include "build_config.h"
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include "../common/direct_resource.h"

static crmm_status managed_alloc(size_t bytes, void **ptr)
{
    return crmm_cuda_status(cudaMallocManaged(ptr, bytes, cudaMemAttachGlobal), "cudaMallocManaged");
}

static const direct_backend managed_backend = {
    .kind = "managed", .flags = CRMM_RESOURCE_DEVICE_ACCESSIBLE | CRMM_RESOURCE_HOST_ACCESSIBLE,
    .uses_cuda = true, .alloc = managed_alloc, .free = direct_cuda_free,
};

DIRECT_PLUGIN(managed_backend, .name = "managed",
              .description = "unified (managed) memory from cudaMallocManaged, host and device accessible")
