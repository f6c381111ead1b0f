/* fake_vmm.c — the scripted CUDA driver virtual memory API of fake_vmm.h: host pages stand in
 * for device memory, every call is counted, and what real CUDA refuses is refused. */
#include "build_config.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <crmm/crmm.h>
#include "fake_capture.h"
#include "fake_vmm.h"

fake_vmm_state fake_vmm;

/* Per handle (index = handle, 0 unused): its size (0: released or never made) and how many
 * mappings it has (an allocation may be mapped at several addresses); per page of the range: the
 * handle mapped over it (0: none). */
/* The reservations: [0] is the pool's (fake_vmm.range), the others ranges an import made. */
#define FAKE_RANGES 4
typedef struct fake_range {
    uintptr_t base;
    size_t size;
    int *page_handle;
} fake_range;

static struct {
    size_t page, device_memory;
    size_t *handle_size;
    int *handle_maps;
    int *handle_types;           /* per handle: the requestedHandleTypes it was made with */
    int *handle_origin;          /* per handle: the handle it was imported from (0: made by cuMemCreate) */
    unsigned char *handle_released; /* per handle: released while still mapped (gone at its last unmap) */
    size_t handles, capacity;    /* handles made so far + 1, and the arrays' length */
    fake_range ranges[FAKE_RANGES];
    size_t mapped;               /* bytes mapped now */
} fv;

static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;

void fake_vmm_reset(size_t page, size_t device_memory)
{
    free(fv.handle_size), free(fv.handle_maps), free(fv.handle_types), free(fv.handle_origin), free(fv.handle_released);
    for (int i = 0; i < FAKE_RANGES; i++)
        free(fv.ranges[i].page_handle);
    memset(&fv, 0, sizeof fv);
    memset(&fake_vmm, 0, sizeof fake_vmm);
    fv.page = page;
    fv.device_memory = device_memory;
    fv.handles = 1;
}

size_t fake_vmm_mapped_bytes(void) { return fv.mapped; }

int fake_vmm_handle_at(uintptr_t addr)
{
    fake_range *r = &fv.ranges[0];
    if (!r->base || addr < r->base || addr - r->base >= r->size)
        return 0;
    return r->page_handle[(addr - r->base) / fv.page];
}

static CUresult fake_reserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags)
{
    (void)addr, (void)flags;
    int slot = 0;
    while (slot < FAKE_RANGES && fv.ranges[slot].base)
        slot++;
    if (slot == FAKE_RANGES || !size || size % fv.page || (alignment && alignment % fv.page))
        return CUDA_ERROR_INVALID_VALUE;
    size_t align = alignment > fv.page ? alignment : fv.page; /* as CUDA: the range starts aligned */
    int *table = calloc(size / fv.page, sizeof *table);
    void *m = table ? mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) : MAP_FAILED;
    if (m == MAP_FAILED) {
        free(table);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    free(fv.ranges[slot].page_handle);
    uintptr_t base = ((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1);
    fv.ranges[slot] = (fake_range){.base = base, .size = size, .page_handle = table};
    if (slot == 0) {
        fake_vmm.range = base;
        fake_vmm.range_size = size;
    }
    fake_vmm.reserves++;
    *ptr = (CUdeviceptr)base;
    return CUDA_SUCCESS;
}

/* The reservation that holds [p, p + n) with p and n whole pages, or NULL. */
static fake_range *range_of(uintptr_t p, size_t n)
{
    for (int i = 0; i < FAKE_RANGES; i++) {
        fake_range *r = &fv.ranges[i];
        if (r->base && p >= r->base && p - r->base + n <= r->size && p % fv.page == 0 && n % fv.page == 0)
            return r;
    }
    return NULL;
}

static CUresult fake_address_free(CUdeviceptr ptr, size_t size)
{
    fake_vmm.address_free_calls++;
    fake_range *r = range_of((uintptr_t)ptr, size);
    if (!r || r->base != (uintptr_t)ptr || r->size != size)
        return CUDA_ERROR_INVALID_VALUE; /* not a range */
    for (size_t i = 0; i < size / fv.page; i++)
        if (r->page_handle[i])
            return CUDA_ERROR_INVALID_VALUE; /* still mapped */
    munmap((void *)r->base, r->size); /* the alignment slack stays: harmless */
    if (r == &fv.ranges[0])
        fake_vmm.range = 0;
    free(r->page_handle);
    memset(r, 0, sizeof *r);
    fake_vmm.frees++;
    return CUDA_SUCCESS;
}

/* grow one per-handle array to cap entries */
#define GROW(array, cap) ({ void *g_ = realloc((array), (cap) * sizeof *(array)); if (g_) (array) = g_; g_ != NULL; })

/* A new handle id of `size` bytes (0: no memory for the table). */
static size_t new_handle(size_t size, int types, int origin)
{
    if (fv.handles >= fv.capacity) {
        size_t cap = fv.capacity ? 2 * fv.capacity : 1024;
        if (!GROW(fv.handle_size, cap) || !GROW(fv.handle_maps, cap) || !GROW(fv.handle_types, cap) ||
            !GROW(fv.handle_origin, cap) || !GROW(fv.handle_released, cap))
            return 0;
        fv.capacity = cap;
    }
    size_t id = fv.handles++;
    fv.handle_size[id] = size;
    fv.handle_maps[id] = 0;
    fv.handle_types[id] = types;
    fv.handle_origin[id] = origin;
    fv.handle_released[id] = 0;
    return id;
}

static CUresult fake_create(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                            unsigned long long flags)
{
    (void)flags;
    if (!size || size % fv.page || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (fake_vmm.physical_limit && fake_vmm.physical + size > fake_vmm.physical_limit)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t id = new_handle(size, prop->requestedHandleTypes, 0);
    if (!id)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fake_vmm.physical += size;
    if (fake_vmm.physical > fake_vmm.physical_peak)
        fake_vmm.physical_peak = fake_vmm.physical;
    fake_vmm.creates++;
    *h = (CUmemGenericAllocationHandle)id;
    return CUDA_SUCCESS;
}

static int live_handle(CUmemGenericAllocationHandle h)
{
    return h >= 1 && h < fv.handles && fv.handle_size[h] && !fv.handle_released[h];
}

/* An allocation is gone: its memory is no longer held. */
static void drop_handle(CUmemGenericAllocationHandle h)
{
    if (fv.handle_origin[h])
        fake_vmm.imported_live--;
    else
        fake_vmm.physical -= fv.handle_size[h];
    fv.handle_size[h] = 0;
    fv.handle_released[h] = 0;
}

/* Whether the call that a fault counter counts down fails now. */
static int fault(int *fails_in)
{
    return *fails_in > 0 && --*fails_in == 0;
}

static CUresult fake_release(CUmemGenericAllocationHandle h)
{
    if (fault(&fake_vmm.release_fails_in))
        return fake_vmm.release_error ? (CUresult)fake_vmm.release_error : CUDA_ERROR_UNKNOWN;
    if (!live_handle(h))
        return CUDA_ERROR_INVALID_VALUE;
    fake_vmm.releases++;
    if (fv.handle_maps[h]) /* as real CUDA: the memory stays until its last mapping goes */
        fv.handle_released[h] = 1;
    else
        drop_handle(h);
    return CUDA_SUCCESS;
}

static CUresult fake_map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                         unsigned long long flags)
{
    (void)flags;
    if (fault(&fake_vmm.map_fails_in))
        return fake_vmm.map_error ? (CUresult)fake_vmm.map_error : CUDA_ERROR_OUT_OF_MEMORY;
    fake_range *rg = range_of((uintptr_t)ptr, size);
    if (offset || !live_handle(h) || size != fv.handle_size[h] || !rg)
        return CUDA_ERROR_INVALID_VALUE;
    size_t first = ((uintptr_t)ptr - rg->base) / fv.page, n = size / fv.page;
    for (size_t i = first; i < first + n; i++)
        if (rg->page_handle[i])
            return CUDA_ERROR_INVALID_VALUE; /* overlaps a mapping */
    /* fresh pages, still inaccessible until cuMemSetAccess (a second mapping of an allocation
     * does not share the first one's content here, which no test of the pool relies on) */
    if (mmap((void *)ptr, size, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = first; i < first + n; i++)
        rg->page_handle[i] = (int)h;
    fv.handle_maps[h]++;
    fv.mapped += size;
    fake_vmm.maps++;
    return CUDA_SUCCESS;
}

/* The handle whose mapping starts exactly at p, or 0. */
static int handle_mapped_at(uintptr_t p)
{
    fake_range *rg = range_of(p, fv.page);
    if (!rg)
        return 0;
    size_t i = (p - rg->base) / fv.page;
    int h = rg->page_handle[i];
    return h && (i == 0 || rg->page_handle[i - 1] != h) ? h : 0;
}

static CUresult fake_unmap(CUdeviceptr ptr, size_t size)
{
    if (fault(&fake_vmm.unmap_fails_in))
        return fake_vmm.unmap_error ? (CUresult)fake_vmm.unmap_error : CUDA_ERROR_UNKNOWN;
    int h = handle_mapped_at((uintptr_t)ptr);
    if (!h || fv.handle_size[h] != size)
        return CUDA_ERROR_INVALID_VALUE;
    mmap((void *)ptr, size, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    fake_range *rg = range_of((uintptr_t)ptr, size);
    size_t first = ((uintptr_t)ptr - rg->base) / fv.page;
    for (size_t i = first; i < first + size / fv.page; i++)
        rg->page_handle[i] = 0;
    fv.handle_maps[h]--;
    fv.mapped -= size;
    fake_vmm.unmaps++;
    if (!fv.handle_maps[h] && fv.handle_released[h]) /* released while mapped: now gone */
        drop_handle(h);
    return CUDA_SUCCESS;
}

static int device_count(void) { return fake_vmm.devices > 1 ? fake_vmm.devices : 1; }

static CUresult fake_set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    if (fault(&fake_vmm.set_access_fails_in))
        return fake_vmm.set_access_error ? (CUresult)fake_vmm.set_access_error : CUDA_ERROR_UNKNOWN;
    fake_range *rg = range_of((uintptr_t)ptr, size);
    if (count != 1 || desc->location.id < 0 || desc->location.id >= device_count() ||
        desc->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE || !rg)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = ((uintptr_t)ptr - rg->base) / fv.page; i < ((uintptr_t)ptr + size - rg->base) / fv.page; i++)
        if (!rg->page_handle[i])
            return CUDA_ERROR_INVALID_VALUE; /* every page of the run must be mapped */
    mprotect((void *)ptr, size, PROT_READ | PROT_WRITE);
    fake_vmm.set_access++;
    return CUDA_SUCCESS;
}

/* An exported handle is a plain file that names the allocation: "fake_vmm <id> <size>". */
static CUresult fake_export(void *out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType type,
                            unsigned long long flags)
{
    if (flags || !live_handle(h) || fv.handle_origin[h] || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
        !(fv.handle_types[h] & (int)type))
        return CUDA_ERROR_INVALID_VALUE; /* not made exportable as that type */
    FILE *f = tmpfile();
    if (!f)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fprintf(f, "fake_vmm %llu %zu\n", (unsigned long long)h, fv.handle_size[h]);
    fflush(f);
    int fd = dup(fileno(f));
    fclose(f);
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *(int *)out = fd;
    fake_vmm.exports++;
    return CUDA_SUCCESS;
}

/* The allocation an exported file names (its id), or 0 when it names none. */
int fake_vmm_exported_handle(int fd, size_t *size)
{
    char text[64] = {0};
    unsigned long long id = 0;
    size_t bytes = 0;
    if (pread(fd, text, sizeof text - 1, 0) <= 0 || sscanf(text, "fake_vmm %llu %zu", &id, &bytes) != 2)
        return 0;
    if (size)
        *size = bytes;
    return (int)id;
}

static CUresult fake_import(CUmemGenericAllocationHandle *h, void *os_handle, CUmemAllocationHandleType type)
{
    size_t size = 0;
    int origin = type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ? fake_vmm_exported_handle((int)(intptr_t)os_handle, &size) : 0;
    if (!origin || !size)
        return CUDA_ERROR_INVALID_VALUE;
    size_t id = new_handle(size, 0, origin);
    if (!id)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fake_vmm.imports++;
    fake_vmm.imported_live++;
    *h = (CUmemGenericAllocationHandle)id;
    return CUDA_SUCCESS;
}

static CUresult fake_granularity(size_t *g, const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags option)
{
    (void)prop, (void)option;
    *g = fv.page;
    return CUDA_SUCCESS;
}

static CUresult fake_attribute(int *v, CUdevice_attribute a, CUdevice dev)
{
    (void)dev;
    *v = a == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED              ? !fake_vmm.vmm_unsupported
         : a == CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED ? !fake_vmm.export_unsupported
                                                                                 : 0;
    return CUDA_SUCCESS;
}

static CUresult fake_error_string(CUresult r, const char **s)
{
    *s = r == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory" : "invalid argument";
    return CUDA_SUCCESS;
}

/* The driver calls are serialized, as the pool serializes them under its lock; the lock here
 * guards the counters against the threads of a stress test. */
#define LOCKED(call) ({ pthread_mutex_lock(&fake_lock); CUresult r_ = (call); pthread_mutex_unlock(&fake_lock); r_; })
/* Changing mappings is what the global capture mode forbids (fake_capture.h). */
#define UNSAFE(name, call) (fake_capture_call(name, FAKE_CALL_UNSAFE, NULL) != cudaSuccess ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : LOCKED(call))
static CUresult l_reserve(CUdeviceptr *a, size_t b, size_t c, CUdeviceptr d, unsigned long long e) { return UNSAFE("cuMemAddressReserve", fake_reserve(a, b, c, d, e)); }
static CUresult l_address_free(CUdeviceptr a, size_t b) { return UNSAFE("cuMemAddressFree", fake_address_free(a, b)); }
static CUresult l_create(CUmemGenericAllocationHandle *a, size_t b, const CUmemAllocationProp *c, unsigned long long d) { return UNSAFE("cuMemCreate", fake_create(a, b, c, d)); }
static CUresult l_release(CUmemGenericAllocationHandle a) { return UNSAFE("cuMemRelease", fake_release(a)); }
static CUresult l_map(CUdeviceptr a, size_t b, size_t c, CUmemGenericAllocationHandle d, unsigned long long e) { return UNSAFE("cuMemMap", fake_map(a, b, c, d, e)); }
static CUresult l_unmap(CUdeviceptr a, size_t b) { return UNSAFE("cuMemUnmap", fake_unmap(a, b)); }
static CUresult l_set_access(CUdeviceptr a, size_t b, const CUmemAccessDesc *c, size_t d) { return UNSAFE("cuMemSetAccess", fake_set_access(a, b, c, d)); }
static CUresult l_export(void *a, CUmemGenericAllocationHandle b, CUmemAllocationHandleType c, unsigned long long d) { return LOCKED(fake_export(a, b, c, d)); }
static CUresult l_import(CUmemGenericAllocationHandle *a, void *b, CUmemAllocationHandleType c) { return LOCKED(fake_import(a, b, c)); }

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                             unsigned long long flags, enum cudaDriverEntryPointQueryResult *status)
{
    (void)version, (void)flags;
    static const struct { const char *name; void *fn; } table[] = {
        {"cuMemAddressReserve", (void *)l_reserve},
        {"cuMemAddressFree", (void *)l_address_free},
        {"cuMemCreate", (void *)l_create},
        {"cuMemRelease", (void *)l_release},
        {"cuMemMap", (void *)l_map},
        {"cuMemUnmap", (void *)l_unmap},
        {"cuMemSetAccess", (void *)l_set_access},
        {"cuMemGetAllocationGranularity", (void *)fake_granularity},
        {"cuDeviceGetAttribute", (void *)fake_attribute},
        {"cuGetErrorString", (void *)fake_error_string},
        {"cuMemExportToShareableHandle", (void *)l_export},
        {"cuMemImportFromShareableHandle", (void *)l_import},
    };
    *fn = NULL;
    if (status)
        *status = cudaDriverEntryPointSymbolNotFound;
    if (fake_vmm.lookups_fail)
        return cudaSuccess;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(symbol, table[i].name) == 0) {
            *fn = table[i].fn;
            if (status)
                *status = cudaDriverEntryPointSuccess;
        }
    return cudaSuccess;
}

/* ---- the scripted runtime ----------------------------------------------------------------- */

void (*fake_vmm_order_hook)(int what, cudaStream_t s);

static void order(int what, cudaStream_t s)
{
    if (fake_vmm_order_hook)
        fake_vmm_order_hook(what, s);
}

cudaError_t cudaDeviceSynchronize(void)
{
    __atomic_add_fetch(&fake_vmm.device_syncs, 1, __ATOMIC_RELAXED);
    if (fake_vmm.device_syncs_fail > 0) {
        fake_vmm.device_syncs_fail--;
        return cudaErrorUnknown;
    }
    cudaError_t e = fake_capture_call("cudaDeviceSynchronize", FAKE_CALL_WAIT, NULL);
    if (e == cudaSuccess)
        order(FAKE_ORDER_DEVICE_SYNC, NULL);
    return e;
}
cudaError_t cudaGetDevice(int *device) { *device = fake_vmm.device; return cudaSuccess; }
cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= device_count())
        return cudaErrorInvalidDevice;
    fake_vmm.device = device;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int *count) { *count = device_count(); return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    *free_bytes = fv.device_memory - fake_vmm.physical;
    *total = fv.device_memory;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    cudaError_t e = fake_capture_call("cudaStreamSynchronize", FAKE_CALL_WAIT, s);
    if (e == cudaSuccess)
        order(FAKE_ORDER_STREAM_SYNC, s);
    return e;
}
cudaError_t cudaStreamQuery(cudaStream_t s)
{
    __atomic_add_fetch(&fake_vmm.stream_queries, 1, __ATOMIC_RELAXED);
    cudaError_t e = fake_capture_call("cudaStreamQuery", FAKE_CALL_STREAM, s);
    e = e != cudaSuccess ? e : fake_vmm.streams_busy ? cudaErrorNotReady : cudaSuccess;
    if (e == cudaSuccess)
        order(FAKE_ORDER_STREAM_SYNC, s);
    return e;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int f)
{
    (void)f;
    static uintptr_t next = 0x1000;
    *s = (cudaStream_t)__atomic_fetch_add(&next, 0x10, __ATOMIC_RELAXED);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) { (void)s; return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int f) { (void)f; static int ev; *e = (cudaEvent_t)&ev; return cudaSuccess; }
cudaError_t cudaEventDestroy(cudaEvent_t e) { (void)e; return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    (void)e;
    __atomic_fetch_add(&fake_vmm.event_records, 1, __ATOMIC_RELAXED);
    fake_vmm.event_stream = s;
    cudaError_t r = fake_capture_call("cudaEventRecord", FAKE_CALL_STREAM, s);
    if (r == cudaSuccess)
        order(FAKE_ORDER_RECORD, s);
    return r;
}
cudaError_t cudaEventQuery(cudaEvent_t e)
{
    (void)e;
    __atomic_fetch_add(&fake_vmm.event_queries, 1, __ATOMIC_RELAXED);
    cudaError_t r = fake_capture_call("cudaEventQuery", FAKE_CALL_WAIT, NULL);
    r = r != cudaSuccess ? r : fake_vmm.events_busy ? cudaErrorNotReady : cudaSuccess;
    if (r == cudaSuccess)
        order(FAKE_ORDER_EVENT_DONE, NULL);
    return r;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int f)
{
    (void)e, (void)f;
    cudaError_t r = fake_capture_call("cudaStreamWaitEvent", FAKE_CALL_STREAM, s);
    if (r == cudaSuccess)
        order(FAKE_ORDER_WAIT, s);
    return r;
}

/* ---- an upstream that says it is device memory ------------------------------------------- */

static crmm_status upstream_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    (void)self, (void)stream;
    __atomic_add_fetch(&fake_vmm.upstream_calls, 1, __ATOMIC_RELAXED);
    *ptr = aligned_alloc(256, (bytes + 255) & ~(size_t)255);
    return *ptr ? CRMM_OK : crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "device upstream: no memory");
}

static crmm_status upstream_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    (void)self, (void)bytes, (void)stream;
    __atomic_add_fetch(&fake_vmm.upstream_calls, 1, __ATOMIC_RELAXED);
    free(ptr);
    return CRMM_OK;
}

static void upstream_destroy(crmm_resource *self) { free(self); }

static const crmm_resource_ops upstream_ops = {
    .allocate = upstream_allocate, .deallocate = upstream_deallocate, .destroy = upstream_destroy};

crmm_resource *fake_vmm_device_upstream(void)
{
    crmm_resource *u = calloc(1, sizeof *u);
    if (u)
        crmm_resource_init(u, &upstream_ops, "fake_device", CRMM_RESOURCE_DEVICE_ACCESSIBLE, 0, NULL);
    return u;
}

crmm_status fake_vmm_expandable_pool(const char *params, crmm_resource **out)
{
    crmm_resource *u = fake_vmm_device_upstream();
    if (!u)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "fake upstream: malloc failed");
    char text[512];
    snprintf(text, sizeof text, "expandable=true %s", params ? params : "");
    crmm_status st = crmm_resource_create("pool", text, u, out);
    crmm_resource_release(u);
    return st;
}
