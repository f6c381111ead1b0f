/* cuda_plugin.c — the `cuda` plugin: device memory from cudaMalloc / cudaFree.
 *
 * The default resource of every device. Not stream-ordered: cudaMalloc and cudaFree synchronize
 * the device, which is why the suballocators (pool, arena) exist. */
#include "build_config.h"
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include "../common/direct_resource.h"
#include "../common/plugin_descriptor.h"

static crmm_status cuda_alloc(size_t bytes, void **ptr)
{
    return crmm_cuda_status(cudaMalloc(ptr, bytes), "cudaMalloc");
}

static crmm_status cuda_free(void *ptr, size_t bytes)
{
    (void)bytes;
    return crmm_cuda_status(cudaFree(ptr), "cudaFree");
}

static const direct_backend cuda_backend = {
    .kind = "cuda", .flags = CRMM_RESOURCE_DEVICE_ACCESSIBLE, .uses_cuda = true,
    .alloc = cuda_alloc, .free = cuda_free,
};

static crmm_status cuda_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    (void)params;
    (void)upstream;
    return direct_resource_create(&cuda_backend, out);
}

PLUGIN_DESCRIPTOR(.name = "cuda", .upstream = CRMM_UPSTREAM_NONE, .create = cuda_create,
                  .description = "device memory from cudaMalloc/cudaFree (synchronous; the default resource)")
