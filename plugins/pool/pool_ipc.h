/* pool_ipc.h — exporting an expandable pool's memory to another process (parameter ipc = true;
 * crmm/ipc.h says what the other side does).
 *
 * The pool's pages are then made exportable (cuMemCreate asked for the handle type), and
 * CRMM_IPC_OP_EXPORT gives one shareable handle per page that backs the range asked for. */
#ifndef CRMM_PLUGINS_POOL_IPC_H
#define CRMM_PLUGINS_POOL_IPC_H

#include <stdbool.h>
#include <crmm/ipc.h>

struct pool_resource;

/* At create, after the range is reserved: make the pool's pages exportable, as fabric handles
 * when `fabric` is set and else as file descriptors, when `ipc` is set. A pool that is not expandable, or a device that
 * cannot export that type, is logged at warn level (export then refuses, saying why). */
void pool_ipc_setup(struct pool_resource *p, bool ipc, bool fabric);

/* The CRMM_IPC_OP_EXPORT op. Errors: CRMM_ERROR_UNSUPPORTED (not expandable, made without
 * ipc, or the device cannot export), CRMM_ERROR_INVALID_ARGUMENT (a range with a page the pool
 * does not hold mapped), CRMM_ERROR_CUDA (cuMemExportToShareableHandle failed),
 * CRMM_ERROR_OUT_OF_MEMORY. On error nothing is left open. */
crmm_status pool_ipc_export(struct pool_resource *p, crmm_ipc_export_request *rq);

#endif
