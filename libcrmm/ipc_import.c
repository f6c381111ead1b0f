/* ipc_import.c — crmm_ipc_import and crmm_ipc_close (crmm/ipc.h).
 *
 * An async handle is imported with the runtime's pool calls: the pool from its shareable handle,
 * then the allocation from its export data; closing frees the imported pointer and the imported
 * pool. A VMM handle's pages are imported one by one (cuMemImportFromShareableHandle), mapped in
 * a row into a fresh address range and made readable and writable on the current device; each
 * page's handle is released once mapped, so the mapping alone keeps the physical memory, and
 * closing unmaps and frees the range. Closing runs on the device the import was made on, where
 * work may still use the memory. The driver functions are looked up through
 * crmm_cuda_driver_lookup, as the expandable pool does, so that libcrmm links only the runtime
 * and a test program can supply a scripted driver. */
#include "build_config.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include "internal.h"
#include "ipc_internal.h"

static struct {
    CUresult (*import)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*address_free)(CUdeviceptr, size_t);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
} drv;
static char driver_missing[112]; /* why the lookup failed, or empty */
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

static void load_driver(void)
{
    static const crmm_driver_function table[] = {
        {"cuMemImportFromShareableHandle", (void **)&drv.import},
        {"cuMemAddressReserve", (void **)&drv.reserve},
        {"cuMemAddressFree", (void **)&drv.address_free},
        {"cuMemRelease", (void **)&drv.release},
        {"cuMemMap", (void **)&drv.map},
        {"cuMemUnmap", (void **)&drv.unmap},
        {"cuMemSetAccess", (void **)&drv.set_access},
    };
    crmm_cuda_driver_lookup(table, sizeof table / sizeof table[0], driver_missing, sizeof driver_missing);
}

/* The driver's cuMemGetAddressRange, looked up apart from the VMM import's functions (an async
 * import needs only this one); NULL: no driver to ask. */
static CUresult (*address_range)(CUdeviceptr *, size_t *, CUdeviceptr);
static pthread_once_t address_range_once = PTHREAD_ONCE_INIT;

static void find_address_range(void)
{
    static const crmm_driver_function table[] = {{"cuMemGetAddressRange", (void **)&address_range}};
    crmm_cuda_driver_lookup(table, 1, NULL, 0);
}

/* A driver error as a status, its message naming the import. */
static crmm_status driver_error(CUresult r, const char *call)
{
    crmm_cuda_driver_status(r, call);
    return crmm_error_add_context("ipc");
}

struct crmm_ipc_mapping {
    int kind;
    void *ptr;                 /* what the caller uses */
    size_t size;
    int device;                /* the device current at the import, where the mapping is used */
    cudaMemPool_t pool;        /* async: the imported pool */
    uintptr_t base;            /* VMM: the reserved range */
    size_t range;
    size_t page;
    size_t mapped;             /* VMM: pages mapped from base on */
    bool close_failed;         /* a close failed: m is kept (with what that close could not
                                * release), so that a second close is refused instead of freeing
                                * m twice */
    crmm_ipc_mapping *next_kept; /* the list of kept mappings */
};

/* The mappings whose close failed, kept for the life of the process with what they still hold:
 * listed here, so that they stay reachable rather than lost. */
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static crmm_ipc_mapping *kept_mappings;

static void keep_after_failed_close(crmm_ipc_mapping *m)
{
    m->close_failed = true;
    pthread_mutex_lock(&kept_lock);
    m->next_kept = kept_mappings;
    kept_mappings = m;
    pthread_mutex_unlock(&kept_lock);
}

/* The shareable handle i of h, as cuMemImportFromShareableHandle and its runtime twin take it. */
static void *shareable(const crmm_ipc_handle *h, const ipc_wire *w, size_t i)
{
    if (w->handle_type == CRMM_IPC_POSIX_FD)
        return (void *)(intptr_t)h->fds[i];
    return h->bytes + sizeof *w + i * CRMM_IPC_FABRIC_BYTES;
}

static crmm_status import_async(const crmm_ipc_handle *h, const ipc_wire *w, crmm_ipc_mapping *m)
{
    enum cudaMemAllocationHandleType type =
        w->handle_type == CRMM_IPC_POSIX_FD ? cudaMemHandleTypePosixFileDescriptor : cudaMemHandleTypeFabric;
    crmm_status st = crmm_cuda_status(cudaMemPoolImportFromShareableHandle(&m->pool, shareable(h, w, 0), type, 0),
                                      "ipc: cudaMemPoolImportFromShareableHandle");
    if (st != CRMM_OK)
        return st;
    /* an imported pool inherits no access: only its resident device may use it until access is
     * set for the current one, where the mapping is to be used */
    st = crmm_cuda_current_device(&m->device);
    if (st == CRMM_OK) {
        struct cudaMemLocation here = {.type = cudaMemLocationTypeDevice, .id = m->device};
        enum cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
        bool asked = cudaMemPoolGetAccess(&flags, m->pool, &here) == cudaSuccess;
        if (!asked || flags != cudaMemAccessFlagsProtReadWrite) {
            cudaGetLastError();
            struct cudaMemAccessDesc access = {.location = here, .flags = cudaMemAccessFlagsProtReadWrite};
            cudaError_t e = cudaMemPoolSetAccess(m->pool, &access, 1);
            if (e != cudaSuccess && !asked)
                cudaGetLastError(); /* access unknown and not settable: the mapping is tried as it is */
            else
                st = crmm_cuda_status(e, "ipc: cudaMemPoolSetAccess");
        }
    }
    if (st != CRMM_OK) {
        cudaMemPoolDestroy(m->pool);
        return st;
    }
    struct cudaMemPoolPtrExportData data;
    memcpy(&data, w->pointer_data, sizeof data < sizeof w->pointer_data ? sizeof data : sizeof w->pointer_data);
    st = crmm_cuda_status(cudaMemPoolImportPointer(&m->ptr, m->pool, &data), "ipc: cudaMemPoolImportPointer");
    if (st != CRMM_OK) {
        cudaMemPoolDestroy(m->pool);
        return st;
    }
    crmm_note_cuda_initialized();
    /* the size is the peer's word: the mapping may cover no more than the allocation imported */
    pthread_once(&address_range_once, find_address_range);
    CUdeviceptr base = 0;
    size_t bytes = 0;
    uintptr_t at = (uintptr_t)m->ptr;
    if (address_range && address_range(&base, &bytes, (CUdeviceptr)at) == CUDA_SUCCESS &&
        (at < (uintptr_t)base || at - (uintptr_t)base > bytes || w->size > bytes - (at - (uintptr_t)base))) {
        cudaFree(m->ptr);
        cudaMemPoolDestroy(m->pool);
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                              "ipc: import: the handle says %llu bytes at %p, the allocation it names is %zu bytes at %p",
                              (unsigned long long)w->size, m->ptr, bytes, (void *)(uintptr_t)base);
    }
    return CRMM_OK;
}

/* Unmap the pages m maps, then free its address range. A page whose unmap fails may still be
 * mapped: it keeps its memory, and the range stays reserved, since freed the driver could place
 * another reservation over the live mapping; both are leaked, and m->base and m->mapped still
 * name them. The other pages are unmapped all the same. */
static crmm_status unmap_vmm(crmm_ipc_mapping *m)
{
    size_t kept = 0;
    CUresult first = CUDA_SUCCESS;
    for (size_t i = 0; i < m->mapped; i++) {
        CUresult r = drv.unmap((CUdeviceptr)(m->base + i * m->page), m->page);
        if (r != CUDA_SUCCESS && !kept++)
            first = r;
    }
    if (kept) {
        crmm_cuda_driver_status(first, "cuMemUnmap");
        return crmm_error_add_context("%zu of %zu pages could not be unmapped, so the address range at %p stays "
                                      "reserved with them",
                                      kept, m->mapped, (void *)m->base);
    }
    m->mapped = 0;
    if (!m->base)
        return CRMM_OK;
    CUresult r = drv.address_free((CUdeviceptr)m->base, m->range);
    if (r != CUDA_SUCCESS)
        return driver_error(r, "cuMemAddressFree");
    m->base = 0;
    return CRMM_OK;
}

static crmm_status import_vmm(const crmm_ipc_handle *h, const ipc_wire *w, crmm_ipc_mapping *m)
{
    pthread_once(&driver_once, load_driver);
    if (driver_missing[0])
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "ipc: import: %s", driver_missing);
    crmm_status st = crmm_cuda_current_device(&m->device);
    if (st != CRMM_OK)
        return crmm_error_add_context("ipc: import needs a CUDA device");
    CUmemAllocationHandleType type =
        w->handle_type == CRMM_IPC_POSIX_FD ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_FABRIC;
    m->page = (size_t)w->page;
    m->range = (size_t)w->count * m->page;
    CUdeviceptr base = 0;
    CUresult r = drv.reserve(&base, m->range, m->page, 0, 0);
    if (r != CUDA_SUCCESS)
        return driver_error(r, "cuMemAddressReserve");
    m->base = (uintptr_t)base;
    for (size_t i = 0; i < w->count; i++) {
        CUmemGenericAllocationHandle ph;
        r = drv.import(&ph, shareable(h, w, i), type);
        if (r != CUDA_SUCCESS) {
            st = driver_error(r, "cuMemImportFromShareableHandle");
            break;
        }
        r = drv.map((CUdeviceptr)(m->base + i * m->page), m->page, 0, ph, 0);
        /* the mapping keeps the memory from here on; a handle the driver does not release would
         * keep it after the mapping goes, so that fails the import too */
        CUresult released = drv.release(ph);
        if (r != CUDA_SUCCESS) {
            st = driver_error(r, "cuMemMap");
            break;
        }
        m->mapped++;
        if (released != CUDA_SUCCESS) {
            st = driver_error(released, "cuMemRelease");
            break;
        }
    }
    if (st == CRMM_OK) {
        CUmemAccessDesc access;
        memset(&access, 0, sizeof access);
        access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access.location.id = m->device;
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        r = drv.set_access((CUdeviceptr)m->base, m->range, &access, 1);
        if (r != CUDA_SUCCESS)
            st = driver_error(r, "cuMemSetAccess");
    }
    if (st != CRMM_OK) {
        char message[512];
        snprintf(message, sizeof message, "%s", crmm_last_error());
        if (unmap_vmm(m) != CRMM_OK)
            return crmm_set_error(st, "%s (backing out: %s)", message, crmm_last_error_detail());
        return crmm_set_error(st, "%s", message);
    }
    m->ptr = (void *)(m->base + (uintptr_t)w->offset);
    return CRMM_OK;
}

crmm_status crmm_ipc_import(const crmm_ipc_handle *h, crmm_ipc_mapping **out)
{
    if (out)
        *out = NULL;
    if (!h || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "ipc: import: %s is NULL", !h ? "handle" : "out");
    crmm_status st = ipc_wire_check(h->bytes, h->size, h->fd_count);
    if (st != CRMM_OK)
        return st;
    ipc_wire w;
    memcpy(&w, h->bytes, sizeof w);
    crmm_ipc_mapping *m = calloc(1, sizeof *m);
    if (!m)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "ipc: import: malloc failed");
    m->kind = (int)w.kind;
    m->size = (size_t)w.size;
    st = w.kind == CRMM_IPC_KIND_ASYNC ? import_async(h, &w, m) : import_vmm(h, &w, m);
    if (st != CRMM_OK) {
        free(m);
        return st;
    }
    *out = m;
    return CRMM_OK;
}

void *crmm_ipc_mapping_ptr(const crmm_ipc_mapping *m) { return m && !m->close_failed ? m->ptr : NULL; }
size_t crmm_ipc_mapping_size(const crmm_ipc_mapping *m) { return m && !m->close_failed ? m->size : 0; }

/* Release an async import: the pointer, then the pool it came from. */
static crmm_status close_async(crmm_ipc_mapping *m)
{
    crmm_status st = crmm_cuda_status(cudaFree(m->ptr), "ipc: close: cudaFree");
    /* the imported pool goes with its last pointer; a driver that keeps it until the context
     * ends refuses this, which costs nothing */
    if (cudaMemPoolDestroy(m->pool) != cudaSuccess)
        cudaGetLastError();
    return st;
}

/* Release a VMM import: wait for the current device (the import's), unmap, free the range. */
static crmm_status close_vmm(crmm_ipc_mapping *m)
{
    /* no work may use the range any more: wait for its device before unmapping */
    crmm_status st = crmm_cuda_status(cudaDeviceSynchronize(), "ipc: close: cudaDeviceSynchronize");
    crmm_status unmapped = unmap_vmm(m);
    if (unmapped != CRMM_OK) /* its message says what is kept */
        return crmm_error_add_context("ipc: close");
    return st;
}

crmm_status crmm_ipc_close(crmm_ipc_mapping *m)
{
    if (!m)
        return CRMM_OK;
    if (m->close_failed)
        return crmm_set_error(CRMM_ERROR_STATE, "ipc: close: this mapping's close failed before; what it could not "
                                                "release stays, and it is not closed twice");
    if (crmm_process_exiting()) {
        free(m); /* the driver takes the mappings with the process */
        return CRMM_OK;
    }
    /* work on the import's device may still use the memory, and both cudaFree and
     * cudaDeviceSynchronize wait for the current device: make the import's device current for
     * the close, whichever device the caller has current, and give the caller's back after */
    crmm_device_guard guard;
    crmm_status st = crmm_cuda_device_enter(m->device, &guard);
    if (st != CRMM_OK) {
        /* nothing is released: without its device nothing can wait for the work that uses it */
        keep_after_failed_close(m);
        return crmm_error_add_context("ipc: close: device %d, where the import was made, cannot be made current; "
                                      "nothing is released",
                                      m->device);
    }
    st = m->kind == CRMM_IPC_KIND_ASYNC ? close_async(m) : close_vmm(m);
    crmm_cuda_device_restore(&guard);
    if (st != CRMM_OK) {
        keep_after_failed_close(m);
        return st;
    }
    free(m);
    return CRMM_OK;
}
