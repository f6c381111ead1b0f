/* cuda_plugin.c — the `cuda` plugin: device memory from cudaMalloc / cudaFree.
 *
 * The default resource of every device. Not stream-ordered: cudaMalloc and cudaFree synchronize
 * the device, which is why the suballocators (pool, arena) exist. */
#include "build_config.h"
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include "../common/direct_resource.h"

static crmm_status cuda_alloc(size_t bytes, void **ptr)
{
    return crmm_cuda_status(cudaMalloc(ptr, bytes), "cudaMalloc");
}

static const direct_backend cuda_backend = {
    .kind = "cuda", .flags = CRMM_RESOURCE_DEVICE_ACCESSIBLE, .uses_cuda = true,
    .alloc = cuda_alloc, .free = direct_cuda_free,
};

DIRECT_PLUGIN(cuda_backend, .name = "cuda",
              .description = "device memory from cudaMalloc/cudaFree (synchronous; the default resource)")
