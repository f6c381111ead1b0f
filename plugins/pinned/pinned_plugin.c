/* pinned_plugin.c — the `pinned` plugin: page-locked host memory from cudaHostAlloc, host
 * accessible and device accessible (mapped); the fast source and target of host copies. */
#include "build_config.h"
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include "../common/direct_resource.h"

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

DIRECT_PLUGIN(pinned_backend, .name = "pinned",
              .description = "page-locked host memory from cudaHostAlloc, host and device accessible")
