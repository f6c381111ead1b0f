/* pool_vmm.c — the reserved address range and its physical pages (see pool_vmm.h), over the CUDA
 * driver's virtual memory API, its functions looked up with crmm_cuda_driver_lookup. */
#include "build_config.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>
#include <crmm/cuda_support.h>
#include <crmm/log.h>
#include "pool_vmm.h"

/* pool_vmm_map's mark for a page it has mapped in this call, until the call succeeds: its undo
 * unmaps these only, not a page an earlier undo left mapped. */
enum { PAGE_FRESH = POOL_PAGE_STRAY + 1 };

/* The driver functions, looked up once (crmm_cuda_driver_lookup). */
static struct {
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*address_free)(CUdeviceptr, size_t);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
    CUresult (*attribute)(int *, CUdevice_attribute, CUdevice);
} drv;
static char driver_missing[96]; /* why the lookup failed, or empty */
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

static void load_driver(void)
{
    static const crmm_driver_function table[] = {
        {"cuMemAddressReserve", (void **)&drv.reserve},
        {"cuMemAddressFree", (void **)&drv.address_free},
        {"cuMemCreate", (void **)&drv.create},
        {"cuMemRelease", (void **)&drv.release},
        {"cuMemMap", (void **)&drv.map},
        {"cuMemUnmap", (void **)&drv.unmap},
        {"cuMemSetAccess", (void **)&drv.set_access},
        {"cuMemGetAllocationGranularity", (void **)&drv.granularity},
        {"cuDeviceGetAttribute", (void **)&drv.attribute},
    };
    crmm_cuda_driver_lookup(table, sizeof table / sizeof table[0], driver_missing, sizeof driver_missing);
}

static CUmemAllocationProp page_properties(int device)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    return prop;
}

bool pool_vmm_available(int device, const char **why)
{
    pthread_once(&driver_once, load_driver);
    if (driver_missing[0]) {
        *why = driver_missing;
        return false;
    }
    int supported = 0;
    if (drv.attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, (CUdevice)device) !=
            CUDA_SUCCESS ||
        !supported) {
        *why = "the device does not support the CUDA virtual memory API";
        return false;
    }
    return true;
}

crmm_status pool_vmm_reserve(pool_vmm *v, int device, size_t bytes, size_t page_size)
{
    const char *why;
    memset(v, 0, sizeof *v);
    if (!pool_vmm_available(device, &why))
        return crmm_set_error(CRMM_ERROR_CUDA, "%s", why);
    v->device = device;
    CUmemAllocationProp prop = page_properties(device);
    CUresult r = drv.granularity(&v->page, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS)
        return crmm_cuda_driver_status(r, "cuMemGetAllocationGranularity");
    if (!v->page || (v->page & (v->page - 1)))
        return crmm_set_error(CRMM_ERROR_CUDA, "CUDA driver: allocation granularity %zu is not a power of two", v->page);
    if (page_size > v->page)
        v->page = page_size; /* both powers of two: a multiple of the granularity */
    v->pages = bytes / v->page + (bytes % v->page != 0);
    if (!v->pages)
        v->pages = 1;
    v->handles = calloc(v->pages, sizeof *v->handles);
    v->mapped = calloc(v->pages, 1);
    v->spare = calloc(v->pages, sizeof *v->spare);
    if (!v->handles || !v->mapped || !v->spare) {
        size_t pages = v->pages; /* pool_vmm_release clears it */
        pool_vmm_release(v);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "pool: malloc failed (page table of %zu pages)", pages);
    }
    CUdeviceptr base = 0;
    r = drv.reserve(&base, v->pages * v->page, v->page, 0, 0);
    if (r != CUDA_SUCCESS) {
        free(v->handles), free(v->mapped), free(v->spare);
        memset(v, 0, sizeof *v);
        return crmm_cuda_driver_status(r, "cuMemAddressReserve");
    }
    v->base = (uintptr_t)base;
    return CRMM_OK;
}

crmm_status pool_vmm_map(pool_vmm *v, size_t first, size_t count)
{
    if (!count)
        return CRMM_OK;
    CUmemAllocationProp prop = page_properties(v->device);
    prop.requestedHandleTypes = (CUmemAllocationHandleType)v->handle_types;
    size_t done = 0, fresh = 0; /* fresh: pages this call maps, marked PAGE_FRESH until it is done */
    crmm_status st = CRMM_OK;
    for (; done < count; done++) {
        size_t i = first + done;
        CUmemGenericAllocationHandle h;
        if (v->mapped[i] == POOL_PAGE_STRAY) /* mapped (and counted) already: the access below is its */
            continue;
        if (v->spare_count) {
            h = v->spare[--v->spare_count];
        } else {
            CUresult r = drv.create(&h, v->page, &prop, 0);
            if (r != CUDA_SUCCESS) {
                st = crmm_cuda_driver_status(r, "cuMemCreate");
                break;
            }
            v->pages_created++;
        }
        CUresult r = drv.map((CUdeviceptr)pool_vmm_page_addr(v, i), v->page, 0, h, 0);
        if (r != CUDA_SUCCESS) {
            v->spare[v->spare_count++] = h;
            st = crmm_cuda_driver_status(r, "cuMemMap");
            break;
        }
        v->handles[i] = h;
        v->mapped[i] = PAGE_FRESH;
        v->pages_mapped++;
        fresh++;
    }
    if (st == CRMM_OK) {
        CUmemAccessDesc access;
        memset(&access, 0, sizeof access);
        access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access.location.id = v->device;
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        CUresult r = drv.set_access((CUdeviceptr)pool_vmm_page_addr(v, first), count * v->page, &access, 1);
        if (r == CUDA_SUCCESS) {
            for (size_t i = first; i < first + count; i++) {
                v->strays -= v->mapped[i] == POOL_PAGE_STRAY;
                v->mapped[i] = POOL_PAGE_MAPPED;
            }
            v->mapped_pages += fresh;
            return CRMM_OK;
        }
        st = crmm_cuda_driver_status(r, "cuMemSetAccess");
    }
    /* undo: the pages this call mapped go back to the spare list, the message stays */
    char message[512];
    snprintf(message, sizeof message, "%s", crmm_last_error());
    for (size_t i = first; i < first + done; i++) {
        if (v->mapped[i] != PAGE_FRESH)
            continue;
        CUresult r = drv.unmap((CUdeviceptr)pool_vmm_page_addr(v, i), v->page);
        if (r != CUDA_SUCCESS) {
            /* the page stays mapped to its allocation, counted, a stray: keep both, so that the
             * next map of this page uses it and an unmap or pool_vmm_release frees it (else the
             * range could never be freed) */
            crmm_cuda_driver_status(r, "cuMemUnmap");
            crmm_log(CRMM_LOG_WARN, "pool: %s; the page stays mapped until it is mapped again or trimmed",
                     crmm_last_error());
            v->mapped[i] = POOL_PAGE_STRAY;
            v->mapped_pages++;
            v->strays++;
            continue;
        }
        v->pages_unmapped++;
        v->spare[v->spare_count++] = v->handles[i];
        v->handles[i] = 0;
        v->mapped[i] = POOL_PAGE_UNMAPPED;
    }
    return crmm_set_error(st, "%s", message);
}

/* Unmap pages [first, first + count) and forget their allocations; `lent`: they are lent pages,
 * whose allocations stay with their other mappings, else the allocations go to the spare list. */
static size_t unmap_pages(pool_vmm *v, size_t first, size_t count, bool lent)
{
    for (size_t k = 0; k < count; k++) {
        size_t i = first + k;
        CUresult r = drv.unmap((CUdeviceptr)pool_vmm_page_addr(v, i), v->page);
        if (r != CUDA_SUCCESS) {
            crmm_cuda_driver_status(r, "cuMemUnmap");
            crmm_log(CRMM_LOG_WARN, "pool: %s; the page stays mapped", crmm_last_error());
            crmm_clear_error();
            v->unmaps_refused++;
            return k;
        }
        if (lent)
            v->lent_pages--;
        else
            v->spare[v->spare_count++] = v->handles[i];
        v->strays -= v->mapped[i] == POOL_PAGE_STRAY;
        v->handles[i] = 0;
        v->mapped[i] = POOL_PAGE_UNMAPPED;
        v->mapped_pages--;
        v->pages_unmapped++;
    }
    return count;
}

size_t pool_vmm_unmap(pool_vmm *v, size_t first, size_t count) { return unmap_pages(v, first, count, false); }

size_t pool_vmm_unmap_lent(pool_vmm *v, size_t first, size_t count) { return unmap_pages(v, first, count, true); }

void pool_vmm_lend_to(pool_vmm *v, size_t first, size_t count, pool_vmm *to)
{
    for (size_t i = first; i < first + count; i++) {
        to->spare[to->spare_count++] = v->handles[i];
        v->mapped[i] = POOL_PAGE_LENT;
    }
    v->lent_pages += count;
}

void pool_vmm_lend(pool_vmm *v, size_t first, size_t count) { pool_vmm_lend_to(v, first, count, v); }

/* Where handle h waits on the spare list, or spare_count when it is not there. */
static size_t spare_index(const pool_vmm *v, unsigned long long h)
{
    size_t j = 0;
    while (j < v->spare_count && v->spare[j] != h)
        j++;
    return j;
}

bool pool_vmm_unlend_from(pool_vmm *v, size_t first, size_t count, pool_vmm *to)
{
    for (size_t i = first; i < first + count; i++)
        if (v->mapped[i] != POOL_PAGE_LENT || spare_index(to, v->handles[i]) == to->spare_count)
            return false; /* its memory is mapped elsewhere */
    for (size_t i = first; i < first + count; i++) {
        to->spare[spare_index(to, v->handles[i])] = to->spare[--to->spare_count];
        v->mapped[i] = POOL_PAGE_MAPPED;
    }
    v->lent_pages -= count;
    return true;
}

bool pool_vmm_unlend(pool_vmm *v, size_t first, size_t count) { return pool_vmm_unlend_from(v, first, count, v); }

/* Whether range r (NULL: none) still maps allocation h at a lent page. */
static bool still_lent(const pool_vmm *r, unsigned long long h)
{
    for (size_t i = 0; r && r->lent_pages && i < r->pages; i++)
        if (r->mapped[i] == POOL_PAGE_LENT && r->handles[i] == h)
            return true;
    return false;
}

size_t pool_vmm_drop_spares(pool_vmm *v, const pool_vmm *other)
{
    size_t kept = 0;
    for (size_t i = 0; i < v->spare_count; i++) {
        if (still_lent(v, v->spare[i]) || still_lent(other, v->spare[i])) {
            v->spare[kept++] = v->spare[i]; /* released once the old address is unmapped */
            continue;
        }
        CUresult r = drv.release(v->spare[i]);
        if (r == CUDA_SUCCESS)
            v->pages_released++;
        else /* still ours: it backs a later growth, or goes at the pool's release */
            v->spare[kept++] = v->spare[i];
    }
    v->spare_count = kept;
    return kept;
}

void pool_vmm_release(pool_vmm *v)
{
    if (v->base && !crmm_process_exiting()) {
        for (size_t i = 0; i < v->pages; i++)
            if (v->mapped[i]) {
                drv.unmap((CUdeviceptr)pool_vmm_page_addr(v, i), v->page);
                if (v->mapped[i] != POOL_PAGE_LENT) /* a lent page's allocation is released where it is mapped now */
                    drv.release(v->handles[i]);
            }
        v->lent_pages = 0; /* no old address maps a spare's memory any more */
        size_t kept = pool_vmm_drop_spares(v, NULL);
        if (kept)
            crmm_log(CRMM_LOG_WARN, "pool: cuMemRelease refused %zu page(s) of %zu bytes: their memory stays with the "
                                    "process", kept, v->page);
        drv.address_free((CUdeviceptr)v->base, v->pages * v->page);
    }
    free(v->handles);
    free(v->mapped);
    free(v->spare);
    memset(v, 0, sizeof *v);
}
