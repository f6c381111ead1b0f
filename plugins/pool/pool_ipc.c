/* pool_ipc.c — export of an expandable pool's pages (see pool_ipc.h). The one driver function it
 * needs beyond pool_vmm.c's, cuMemExportToShareableHandle, and the device attributes that say
 * which handle types the device exports, are looked up here the same way
 * (crmm_cuda_driver_lookup). */
#include "build_config.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cuda.h>
#include <crmm/cuda_support.h>
#include <crmm/log.h>
#include "pool_ipc.h"
#include "pool_resource.h"

static CUresult (*export_handle)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long);
static CUresult (*device_attribute)(int *, CUdevice_attribute, CUdevice);
static pthread_once_t lookup_once = PTHREAD_ONCE_INIT;

static void look_up(void)
{
    const crmm_driver_function table[] = {
        {"cuMemExportToShareableHandle", (void **)&export_handle},
        {"cuDeviceGetAttribute", (void **)&device_attribute},
    };
    crmm_cuda_driver_lookup(table, sizeof table / sizeof table[0], NULL, 0);
}

void pool_ipc_setup(pool_resource *p, bool ipc, bool fabric)
{
    if (!ipc)
        return;
    char label[80];
    pool_label(p, label, sizeof label);
    if (!p->growth.expandable) {
        crmm_log(CRMM_LOG_WARN, "%s: ipc = true, but the pool is not expandable: its memory cannot be exported", label);
        return;
    }
    pthread_once(&lookup_once, look_up);
    int supported = 0;
    if (!export_handle || !device_attribute ||
        device_attribute(&supported,
                         fabric ? CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED
                                : CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                         (CUdevice)p->growth.vmm.device) != CUDA_SUCCESS ||
        !supported) {
        crmm_log(CRMM_LOG_WARN, "%s: ipc = true, but %s: its memory cannot be exported", label,
                 !export_handle ? "the CUDA driver has no cuMemExportToShareableHandle"
                 : fabric       ? "the device does not export fabric handles"
                                : "the device does not export POSIX file descriptors");
        return;
    }
    p->growth.vmm.handle_types = fabric ? CU_MEM_HANDLE_TYPE_FABRIC : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
}

/* Export pages [first, first + count) into rq (under the pool's lock). */
static crmm_status export_pages(pool_resource *p, size_t first, size_t count, crmm_ipc_export_request *rq)
{
    bool fabric = p->growth.vmm.handle_types == CU_MEM_HANDLE_TYPE_FABRIC;
    rq->fds = fabric ? NULL : malloc(count * sizeof *rq->fds);
    rq->fabric = fabric ? malloc(count * CRMM_IPC_FABRIC_BYTES) : NULL;
    if (!rq->fds && !rq->fabric)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "pool: ipc export: malloc failed (%zu pages)", count);
    for (size_t k = 0; k < count; k++) {
        CUmemGenericAllocationHandle h = p->growth.vmm.handles[first + k];
        CUresult r;
        if (fabric) {
            CUmemFabricHandle f;
            r = export_handle(&f, h, CU_MEM_HANDLE_TYPE_FABRIC, 0);
            memcpy(rq->fabric + k * CRMM_IPC_FABRIC_BYTES, &f, sizeof f < CRMM_IPC_FABRIC_BYTES ? sizeof f : CRMM_IPC_FABRIC_BYTES);
        } else {
            int fd = -1;
            r = export_handle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
            rq->fds[k] = fd;
        }
        if (r != CUDA_SUCCESS) {
            for (size_t j = 0; !fabric && j < k; j++)
                close(rq->fds[j]);
            return crmm_set_error(CRMM_ERROR_CUDA, "pool: ipc export: cuMemExportToShareableHandle failed for page %zu (error %d)",
                                  first + k, (int)r);
        }
    }
    rq->count = count;
    rq->handle_type = fabric ? CRMM_IPC_FABRIC : CRMM_IPC_POSIX_FD;
    return CRMM_OK;
}

crmm_status pool_ipc_export(pool_resource *p, crmm_ipc_export_request *rq)
{
    char label[80];
    pool_label(p, label, sizeof label);
    if (!p->growth.expandable)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED,
                              "%s grows by chunks from its upstream (it is not expandable): its memory cannot be exported "
                              "to another process; use expandable = true and ipc = true",
                              label);
    if (!p->growth.vmm.handle_types)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED,
                              "%s was made without ipc = true (or the device cannot export its pages): its memory cannot be "
                              "exported to another process",
                              label);
    uintptr_t a = (uintptr_t)rq->ptr, end = p->growth.vmm.base + p->growth.vmm.pages * p->growth.vmm.page;
    if (a < p->growth.vmm.base || a >= end || rq->size > end - a)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: ipc export: [%p, +%zu) is not inside the pool's memory", label,
                              rq->ptr, rq->size);
    size_t first = pool_vmm_page_of(&p->growth.vmm, a), last = pool_vmm_page_of(&p->growth.vmm, a + rq->size - 1);
    pool_lock(p);
    crmm_status st = CRMM_OK;
    /* a lent page's allocation already backs another address (or was released): only pages
     * mapped to their own allocation are the memory at ptr */
    for (size_t i = first; i <= last && st == CRMM_OK; i++)
        if (p->growth.vmm.mapped[i] != POOL_PAGE_MAPPED)
            st = crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: ipc export: [%p, +%zu) is not memory the pool holds", label,
                                rq->ptr, rq->size);
    if (st == CRMM_OK)
        st = export_pages(p, first, last - first + 1, rq);
    pool_unlock(p);
    if (st != CRMM_OK) {
        free(rq->fds), free(rq->fabric);
        rq->fds = NULL, rq->fabric = NULL;
        return st;
    }
    rq->kind = CRMM_IPC_KIND_VMM;
    rq->device = p->growth.vmm.device;
    rq->page = p->growth.vmm.page;
    rq->offset = a - pool_vmm_page_addr(&p->growth.vmm, first);
    return CRMM_OK;
}
