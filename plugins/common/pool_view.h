/* pool_view.h — the shared body of the plugins that allocate from a cudaMemPool_t they do not
 * own (cuda_async_view: a pool the caller made; async_managed: the device's default managed
 * pool): cudaMallocFromPoolAsync / cudaFreeAsync on the caller's stream, counters, the pool's
 * attributes as queries, the handle through a control op. The pool is never destroyed or trimmed. */
#ifndef CRMM_PLUGINS_POOL_VIEW_H
#define CRMM_PLUGINS_POOL_VIEW_H

#include <cuda_runtime_api.h>
#include <crmm/plugin.h>

/* Create a resource of `kind` (a static string) over `pool` for `device`, with CRMM_RESOURCE_*
 * `flags`; `get_pool_op` is the control op that stores the pool into a void ** argument.
 * Errors: CRMM_ERROR_OUT_OF_MEMORY (malloc). */
crmm_status pool_view_create(const char *kind, cudaMemPool_t pool, int device, unsigned flags, int get_pool_op,
                             crmm_resource **out);

/* Check that `device` supports memory pools (cudaDevAttrMemoryPoolsSupported); `kind` names the
 * plugin in the message. Errors: CRMM_ERROR_CUDA (the query failed), CRMM_ERROR_UNSUPPORTED. */
crmm_status pool_view_check_device(const char *kind, int device);

#endif
