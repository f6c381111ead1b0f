/* crmm/async_managed.h — the `async_managed` plugin (RMM's
 * experimental.CudaAsyncManagedMemoryResource): stream-ordered managed memory from the device's
 * default managed memory pool (CUDA 13's cudaMemGetDefaultMemPool with
 * cudaMemAllocationTypeManaged). The pool belongs to the driver and is shared by every user in
 * the process; the resource never destroys it. */
#ifndef CRMM_ASYNC_MANAGED_H
#define CRMM_ASYNC_MANAGED_H

#include <crmm/error.h>
#include <crmm/resource.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The control op (numbered within the `async_managed` kind: resource.h): `arg` is a void ** that receives the
 * cudaMemPool_t the resource allocates from. */
#define CRMM_ASYNC_MANAGED_OP_GET_POOL 1

/* The cudaMemPool_t of the first async_managed resource in the chain mr, mr's upstream, ...
 * (RMM's pool_handle()). Errors: CRMM_ERROR_INVALID_ARGUMENT (NULL argument),
 * CRMM_ERROR_UNSUPPORTED (no async_managed resource in the chain). */
static inline crmm_status crmm_async_managed_get_pool(crmm_resource *mr, void **pool)
{
    if (!pool)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "async_managed_get_pool: pool is NULL");
    return crmm_resource_control_kind(mr, "async_managed", CRMM_ASYNC_MANAGED_OP_GET_POOL, pool);
}

#ifdef __cplusplus
}
#endif
#endif
