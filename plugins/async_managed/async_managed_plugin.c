/* async_managed_plugin.c — the `async_managed` plugin (RMM's cuda_async_managed_memory_resource):
 * cudaMallocFromPoolAsync / cudaFreeAsync on the device's default managed memory pool.
 *
 * Managed memory pools are a CUDA 13 feature: create checks that the driver is at least 13.0 and
 * that the device has memory pools, then asks the driver for the pool; each refusal names why.
 * The pool is the driver's, shared by the process, so the resource neither destroys nor trims it
 * (plugins/common/pool_view.c). Its memory is usable from host and device. */
#include "build_config.h"
#include <string.h>
#include <crmm/async_managed.h>
#include <crmm/cuda_support.h>
#include "../common/device_check.h"
#include "../common/plugin_descriptor.h"
#include "../common/pool_view.h"

/* The first driver whose memory pools can hold managed memory. */
#define ASYNC_MANAGED_MIN_DRIVER 13000

static crmm_status check_driver(void)
{
    int version = 0;
    crmm_status st = crmm_cuda_status(cudaDriverGetVersion(&version), "cudaDriverGetVersion");
    if (st != CRMM_OK)
        return crmm_error_add_context("async_managed");
    if (version < ASYNC_MANAGED_MIN_DRIVER)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED,
                              "async_managed: managed memory pools need a CUDA 13.0 driver; this one supports CUDA %d.%d",
                              version / 1000, version % 1000 / 10);
    return CRMM_OK;
}

static crmm_status async_managed_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    (void)upstream;
    int device;
    crmm_status st;
    if ((st = device_check_resolve(params, "async_managed", &device)) != CRMM_OK || (st = check_driver()) != CRMM_OK ||
        (st = pool_view_check_device("async_managed", device)) != CRMM_OK)
        return st;
    struct cudaMemLocation location;
    memset(&location, 0, sizeof location);
    location.type = cudaMemLocationTypeDevice;
    location.id = device;
    cudaMemPool_t pool = NULL;
    cudaError_t e = cudaMemGetDefaultMemPool(&pool, &location, cudaMemAllocationTypeManaged);
    if (e != cudaSuccess) {
        cudaGetLastError();
        crmm_cuda_status(e, "cudaMemGetDefaultMemPool(cudaMemAllocationTypeManaged)");
        return crmm_error_add_context("async_managed: device %d has no managed memory pool", device);
    }
    return pool_view_create("async_managed", pool, device, CRMM_RESOURCE_DEVICE_ACCESSIBLE | CRMM_RESOURCE_HOST_ACCESSIBLE,
                            CRMM_ASYNC_MANAGED_OP_GET_POOL, out);
}

PLUGIN_DESCRIPTOR(.name = "async_managed", .upstream = CRMM_UPSTREAM_NONE, .create = async_managed_create,
                  .description = "cudaMallocFromPoolAsync on the device's default managed memory pool, host and device accessible (CUDA 13; RMM cuda_async_managed_memory_resource)")
