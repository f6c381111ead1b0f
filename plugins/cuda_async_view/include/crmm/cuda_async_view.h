/* crmm/cuda_async_view.h — the `cuda_async_view` plugin (RMM's cuda_async_view_memory_resource):
 * stream-ordered allocation from a cudaMemPool_t that the caller created and keeps owning.
 *
 * The pool reaches the plugin as a parameter holding its address, so that a config, a parameter
 * string and a ctypes caller can all name it; crmm_cuda_async_view_create formats it for C
 * callers. The resource never destroys, trims or reconfigures the pool: destroy the pool only
 * after the resource, and after every block allocated through it is freed. An allocation fails
 * with CRMM_ERROR_OUT_OF_MEMORY when the pool has no room and CRMM_ERROR_BAD_ALLOC when the pool
 * fails otherwise (one destroyed too early, say), as RMM's bad_alloc. */
#ifndef CRMM_CUDA_ASYNC_VIEW_H
#define CRMM_CUDA_ASYNC_VIEW_H

#include <stdint.h>
#include <stdio.h>
#include <crmm/error.h>
#include <crmm/resource.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The control op (numbered within the `cuda_async_view` kind: resource.h): `arg` is a void ** that receives the
 * cudaMemPool_t the resource allocates from. */
#define CRMM_CUDA_ASYNC_VIEW_OP_GET_POOL 1

/* Create a cuda_async_view resource over `pool` (a cudaMemPool_t, passed as void * so that this
 * header needs no CUDA header) for the current device. Errors: CRMM_ERROR_INVALID_ARGUMENT
 * (pool or out NULL), CRMM_ERROR_UNSUPPORTED (the device has no memory pools), CRMM_ERROR_CUDA
 * (no device), and those of crmm_resource_create (CRMM_ERROR_PLUGIN when the plugin is not found). */
static inline crmm_status crmm_cuda_async_view_create(void *pool, crmm_resource **out)
{
    if (!pool || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "cuda_async_view_create: %s is NULL", pool ? "out" : "pool");
    char params[48];
    snprintf(params, sizeof params, "pool_handle=%#jx", (uintmax_t)(uintptr_t)pool);
    return crmm_resource_create("cuda_async_view", params, NULL, out);
}

/* The cudaMemPool_t of the first cuda_async_view resource in the chain mr, mr's upstream, ...
 * (RMM's pool_handle()). Errors: CRMM_ERROR_INVALID_ARGUMENT (NULL argument),
 * CRMM_ERROR_UNSUPPORTED (no cuda_async_view resource in the chain). */
static inline crmm_status crmm_cuda_async_view_get_pool(crmm_resource *mr, void **pool)
{
    if (!pool)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "cuda_async_view_get_pool: pool is NULL");
    return crmm_resource_control_kind(mr, "cuda_async_view", CRMM_CUDA_ASYNC_VIEW_OP_GET_POOL, pool);
}

#ifdef __cplusplus
}
#endif
#endif
