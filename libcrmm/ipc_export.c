/* ipc_export.c — crmm_ipc_export (crmm/ipc.h): find the layer of the chain that holds the memory
 * and can export it, ask it through its control op, and pack what it gives into a handle. */
#include "build_config.h"
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ipc_internal.h"

/* Whether a layer of this kind answers CRMM_IPC_OP_EXPORT. */
static bool can_export(const char *kind)
{
    return strcmp(kind, "async") == 0 || strcmp(kind, "pool") == 0;
}

/* The handle for what the layer filled in; takes the request's descriptors. */
static crmm_status pack(crmm_ipc_export_request *rq, crmm_ipc_handle **out)
{
    ipc_wire w;
    memset(&w, 0, sizeof w);
    memcpy(w.magic, IPC_MAGIC, sizeof w.magic);
    w.kind = (uint32_t)rq->kind;
    w.handle_type = (uint32_t)rq->handle_type;
    w.device = rq->device;
    w.count = rq->count > IPC_MAX_COUNT ? 0 : (uint32_t)rq->count;
    w.size = rq->size;
    w.page = rq->page;
    w.offset = rq->offset;
    memcpy(w.pointer_data, rq->pointer_data, sizeof w.pointer_data);
    bool fabric = rq->handle_type == CRMM_IPC_FABRIC;
    size_t size = sizeof w + (fabric ? rq->count * CRMM_IPC_FABRIC_BYTES : 0);
    unsigned char *bytes = malloc(size);
    if (!bytes) {
        ipc_close_fds(rq->fds, fabric ? 0 : rq->count);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "ipc: export: malloc failed");
    }
    memcpy(bytes, &w, sizeof w);
    if (fabric)
        memcpy(bytes + sizeof w, rq->fabric, rq->count * CRMM_IPC_FABRIC_BYTES);
    crmm_status st = crmm_ipc_handle_from(bytes, size, rq->fds, fabric ? 0 : rq->count, out);
    free(bytes);
    return st;
}

crmm_status crmm_ipc_export(crmm_resource *mr, void *ptr, size_t size, crmm_ipc_handle **out)
{
    if (out)
        *out = NULL;
    if (!mr || !ptr || !out || !size)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "ipc: export: %s",
                              !mr ? "resource is NULL" : !ptr ? "ptr is NULL" : !out ? "out is NULL" : "size is 0");
    crmm_resource *layer = mr;
    for (; layer; layer = layer->upstream) {
        if (crmm_resource_is_host_accessible(layer) || layer->device < 0)
            return crmm_set_error(CRMM_ERROR_UNSUPPORTED,
                                  "ipc: export: resource '%s' (%s) holds host memory: only device memory from async or "
                                  "an expandable pool can be shared with another process",
                                  mr->name, mr->kind);
        if (can_export(layer->kind))
            break;
    }
    if (!layer)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED,
                              "ipc: export: resource '%s' (%s) has no async or pool layer: only memory from async "
                              "(enable_ipc = true) or an expandable pool (ipc = true) can be shared with another process",
                              mr->name, mr->kind);
    crmm_ipc_export_request rq;
    memset(&rq, 0, sizeof rq);
    rq.ptr = ptr;
    rq.size = size;
    crmm_status st = crmm_resource_control(layer, CRMM_IPC_OP_EXPORT, &rq);
    if (st != CRMM_OK) {
        free(rq.fds);
        free(rq.fabric);
        return st;
    }
    st = pack(&rq, out);
    free(rq.fds);
    free(rq.fabric);
    return st;
}
