/* crmm/async.h — what the `async` plugin (cudaMallocFromPoolAsync on a private cudaMemPool)
 * offers beyond the resource ABI: its pool handle, e.g. to export allocations to another
 * process when it was created with export_handle_type = posix_fd or fabric (crmm/ipc.h does the
 * whole export and import, with enable_ipc = true as RMM names it), and the pool's own
 * usage counters (BYTES_IN_USE counts bytes as requested; the pool counts what it handed out). */
#ifndef CRMM_ASYNC_H
#define CRMM_ASYNC_H

#include <crmm/error.h>
#include <crmm/resource.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The control op (numbered within the `async` kind: resource.h): `arg` is a void ** that receives the cudaMemPool_t. */
#define CRMM_ASYNC_OP_GET_POOL 1

/* The async resource's own queries, numbered within the `async` kind (resource.h): ask them of
 * the resource, or with crmm_resource_query_kind(mr, "async", ...). */
#define CRMM_QUERY_ASYNC_POOL_USED ((crmm_query)(CRMM_QUERY_PLUGIN_FIRST + 0)) /* cudaMemPoolAttrUsedMemCurrent */
#define CRMM_QUERY_ASYNC_POOL_USED_PEAK ((crmm_query)(CRMM_QUERY_PLUGIN_FIRST + 1)) /* cudaMemPoolAttrUsedMemHigh */

/* The cudaMemPool_t of the first `async` resource in the chain mr, mr's upstream, ... (owned by
 * that resource: do not destroy it). Errors: CRMM_ERROR_INVALID_ARGUMENT (NULL argument),
 * CRMM_ERROR_NOT_FOUND (no async resource in the chain). */
static inline crmm_status crmm_async_get_pool(crmm_resource *mr, void **pool)
{
    if (!mr || !pool)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "async_get_pool: %s is NULL", mr ? "pool" : "resource");
    crmm_resource *layer = crmm_resource_find_kind(mr, "async");
    if (!layer)
        return crmm_set_error(CRMM_ERROR_NOT_FOUND, "async_get_pool: no async resource under %s '%s'",
                              crmm_resource_kind(mr), crmm_resource_name(mr));
    return crmm_resource_control(layer, CRMM_ASYNC_OP_GET_POOL, pool);
}

#ifdef __cplusplus
}
#endif
#endif
