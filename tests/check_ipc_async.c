/* check_ipc_async.c — exporting and importing memory of the `async` plugin (crmm/ipc.h) against a
 * scripted CUDA (defined here and in fakes/fake_mempool.c, linked -export-dynamic) whose driver
 * answers cuMemGetAddressRange: an export may name no range that runs past its allocation, and an
 * import refuses a handle whose size runs past the allocation it names (the size is the peer's
 * word), with nothing left imported and no descriptor left open. */
#include "build_config.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <crmm/ipc.h>
#include "fakes/fake_mempool.h"
#include "test_support.h"

/* ---- the scripted CUDA ------------------------------------------------------------------- */

enum { MAX_ALLOCATIONS = 16 };
static struct { char *ptr; size_t size; } allocations[MAX_ALLOCATIONS];
static int imported_pointers;

cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream)
{
    (void)pool, (void)stream;
    for (int i = 0; i < MAX_ALLOCATIONS; i++)
        if (!allocations[i].ptr) {
            allocations[i].ptr = aligned_alloc(256, (size + 255) & ~(size_t)255);
            allocations[i].size = size;
            *ptr = allocations[i].ptr;
            return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
        }
    return cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    (void)stream;
    for (int i = 0; i < MAX_ALLOCATIONS; i++)
        if (allocations[i].ptr == ptr) {
            free(ptr);
            allocations[i].ptr = NULL;
            return cudaSuccess;
        }
    return cudaErrorInvalidValue;
}
cudaError_t cudaMemPoolExportToShareableHandle(void *handle, cudaMemPool_t pool, enum cudaMemAllocationHandleType type,
                                               unsigned int flags)
{
    (void)pool, (void)type, (void)flags;
    int ends[2]; /* a descriptor to carry: a pipe's read end */
    if (pipe(ends) != 0)
        return cudaErrorInvalidValue;
    close(ends[1]);
    *(int *)handle = ends[0];
    return cudaSuccess;
}
cudaError_t cudaMemPoolExportPointer(struct cudaMemPoolPtrExportData *data, void *ptr)
{
    memset(data, 0, sizeof *data);
    memcpy(data, &ptr, sizeof ptr); /* the scripted "export data" is the pointer itself */
    return cudaSuccess;
}
cudaError_t cudaMemPoolImportFromShareableHandle(cudaMemPool_t *pool, void *handle, enum cudaMemAllocationHandleType type,
                                                 unsigned int flags)
{
    (void)handle, (void)type, (void)flags;
    static int token;
    *pool = (cudaMemPool_t)&token;
    fake_mempool_pools_live++;
    return cudaSuccess;
}
cudaError_t cudaMemPoolImportPointer(void **ptr, cudaMemPool_t pool, struct cudaMemPoolPtrExportData *data)
{
    (void)pool;
    memcpy(ptr, data, sizeof *ptr);
    imported_pointers++;
    return cudaSuccess;
}
/* The device current at the last cudaFree: it waits for that device's work before it frees. */
static int freed_on = -1;
cudaError_t cudaFree(void *ptr) /* an imported pointer's release */
{
    (void)ptr;
    imported_pointers--;
    freed_on = fake_mempool_current;
    return cudaSuccess;
}

/* Access to the imported pool: its resident device (0) reads and writes; others as set. */
static int access_set_for = -1;
cudaError_t cudaMemPoolGetAccess(enum cudaMemAccessFlags *flags, cudaMemPool_t pool, struct cudaMemLocation *location)
{
    (void)pool;
    *flags = location->id == 0 || location->id == access_set_for ? cudaMemAccessFlagsProtReadWrite : cudaMemAccessFlagsProtNone;
    return cudaSuccess;
}
cudaError_t cudaMemPoolSetAccess(cudaMemPool_t pool, const struct cudaMemAccessDesc *desc, size_t count)
{
    (void)pool;
    if (count != 1 || desc->location.type != cudaMemLocationTypeDevice || desc->flags != cudaMemAccessFlagsProtReadWrite)
        return cudaErrorInvalidValue;
    access_set_for = desc->location.id;
    return cudaSuccess;
}

/* The driver: cuMemGetAddressRange over the scripted allocations. */
static CUresult fake_address_range(CUdeviceptr *base, size_t *size, CUdeviceptr at)
{
    for (int i = 0; i < MAX_ALLOCATIONS; i++) {
        uintptr_t p = (uintptr_t)allocations[i].ptr;
        if (p && at >= p && at - p < (allocations[i].size ? allocations[i].size : 1)) {
            *base = (CUdeviceptr)p;
            *size = allocations[i].size;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult fake_error_string(CUresult r, const char **s)
{
    (void)r;
    *s = "invalid argument";
    return CUDA_SUCCESS;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                             unsigned long long flags, enum cudaDriverEntryPointQueryResult *status)
{
    (void)version, (void)flags;
    *fn = strcmp(symbol, "cuMemGetAddressRange") == 0 ? (void *)fake_address_range
          : strcmp(symbol, "cuGetErrorString") == 0   ? (void *)fake_error_string
                                                       : NULL;
    if (status)
        *status = *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

/* ---- the tests ------------------------------------------------------------------------------ */

/* Descriptors open in this process. */
static int open_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 1024; fd++)
        n += fcntl(fd, F_GETFD) != -1;
    return n;
}

CRMM_TEST(an_allocation_is_exported_whole_and_imported_at_its_size)
{
    crmm_resource *mr = crmm_test_create("async", "enable_ipc=true", NULL);
    int fds = open_fds();
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 4096, NULL, &p));
    crmm_ipc_handle *h = NULL;
    ck_assert_crmm_ok(crmm_ipc_export(mr, p, 4096, &h));
    const int *hfds = NULL;
    ck_assert_uint_eq(crmm_ipc_handle_fds(h, &hfds), 1);
    ck_assert_int_eq(fcntl(hfds[0], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC); /* not inherited by a program exec'd */
    crmm_ipc_mapping *m = NULL;
    ck_assert_crmm_ok(crmm_ipc_import(h, &m));
    ck_assert_ptr_eq(crmm_ipc_mapping_ptr(m), p);
    ck_assert_uint_eq(crmm_ipc_mapping_size(m), 4096);
    ck_assert_crmm_ok(crmm_ipc_close(m));
    crmm_ipc_handle_free(h);
    ck_assert_int_eq(imported_pointers, 0);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 4096, NULL));
    crmm_resource_release(mr);
    ck_assert_int_le(open_fds(), fds + 1); /* the resource's own pool descriptor at most, closed with it */
}

/* More than the allocation, from its start or from inside it: refused before anything is
 * exported. */
CRMM_LOOP_TEST(a_range_the_allocation_does_not_hold_is_not_exported, 2)
{
    crmm_resource *mr = crmm_test_create("async", "enable_ipc=true", NULL);
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 64, NULL, &p));
    int fds = open_fds();
    crmm_ipc_handle *h = NULL;
    if (_i == 0)
        ck_assert_crmm(crmm_ipc_export(mr, p, (size_t)1 << 30, &h), CRMM_ERROR_INVALID_ARGUMENT);
    else
        ck_assert_crmm(crmm_ipc_export(mr, (char *)p + 16, 64, &h), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "the allocation there is 64 bytes"), "%s", crmm_last_error());
    ck_assert_ptr_null(h);
    ck_assert_int_eq(open_fds(), fds);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 64, NULL));
    crmm_resource_release(mr);
}

/* A peer's handle that says more bytes than the allocation it names: the import is refused, the
 * pointer and the pool it imported released, the handle's descriptor still the handle's. */
CRMM_TEST(an_import_refuses_a_size_the_allocation_does_not_hold)
{
    crmm_resource *mr = crmm_test_create("async", "enable_ipc=true", NULL);
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 64, NULL, &p));
    crmm_ipc_handle *h = NULL;
    ck_assert_crmm_ok(crmm_ipc_export(mr, p, 64, &h));
    const void *bytes = NULL;
    size_t n = crmm_ipc_handle_bytes(h, &bytes);
    const int *hfds = NULL;
    size_t nfds = crmm_ipc_handle_fds(h, &hfds);
    unsigned char *forged = malloc(n);
    ck_assert_ptr_nonnull(forged);
    memcpy(forged, bytes, n);
    uint64_t size = (uint64_t)1 << 30; /* the wire's size field: after magic, kind, type, device, count */
    memcpy(forged + 8 + 4 * 4, &size, sizeof size);
    int fd = dup(hfds[0]);
    crmm_ipc_handle *peer = NULL;
    ck_assert_crmm_ok(crmm_ipc_handle_from(forged, n, &fd, nfds, &peer));
    free(forged);
    int pools = fake_mempool_pools_live;
    crmm_ipc_mapping *m = NULL;
    ck_assert_crmm(crmm_ipc_import(peer, &m), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "the allocation it names is 64 bytes"), "%s", crmm_last_error());
    ck_assert_ptr_null(m);
    ck_assert_int_eq(imported_pointers, 0);
    ck_assert_int_eq(fake_mempool_pools_live, pools);
    crmm_ipc_handle_free(peer);
    crmm_ipc_handle_free(h);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 64, NULL));
    crmm_resource_release(mr);
}

/* Imported on device 1, another device than the pool's: the import makes the memory readable and
 * writable there (an imported pool inherits no access from the exporter). Closed while device 0
 * is current, the pointer is freed on device 1, where work may still use it (cudaFree waits for
 * the current device's work), and device 0 is current again afterwards. */
CRMM_TEST(an_import_on_another_device_gets_access_and_is_freed_there)
{
    crmm_resource *mr = crmm_test_create("async", "enable_ipc=true", NULL);
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 4096, NULL, &p));
    crmm_ipc_handle *h = NULL;
    ck_assert_crmm_ok(crmm_ipc_export(mr, p, 4096, &h));
    fake_mempool_devices = 2;
    fake_mempool_current = 1;
    access_set_for = -1;
    crmm_ipc_mapping *m = NULL;
    ck_assert_crmm_ok(crmm_ipc_import(h, &m));
    ck_assert_int_eq(access_set_for, 1);
    fake_mempool_current = 0;
    freed_on = -1;
    ck_assert_crmm_ok(crmm_ipc_close(m));
    ck_assert_int_eq(freed_on, 1);
    ck_assert_int_eq(fake_mempool_current, 0);
    ck_assert_int_eq(imported_pointers, 0);
    fake_mempool_devices = 1;
    crmm_ipc_handle_free(h);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 4096, NULL));
    crmm_resource_release(mr);
}

/* RMM's enable_ipc and enable_fabric together are a config error here, before any CUDA call
 * (docs/ipc.md says why). One handle type the device lacks is refused naming what it has, with no
 * pool left behind; an export_handle_type beside either flag is a config error. */
CRMM_TEST(enable_ipc_and_enable_fabric_are_refused_together)
{
    fake_mempool_supported_handle_types = cudaMemHandleTypePosixFileDescriptor | cudaMemHandleTypeFabric;
    fake_mempool_created_handle_types = -1;
    int pools = fake_mempool_pools_live;
    crmm_resource *refused = NULL;
    ck_assert_crmm(crmm_resource_create("async", "enable_ipc=true enable_fabric=true", NULL, &refused), CRMM_ERROR_CONFIG);
    ck_assert_msg(strstr(crmm_last_error(), "enable_ipc and enable_fabric cannot both be true"), "%s", crmm_last_error());
    ck_assert_ptr_null(refused);
    ck_assert_int_eq(fake_mempool_created_handle_types, -1);

    crmm_resource *mr = crmm_test_create("async", "enable_fabric=true", NULL);
    ck_assert_int_eq(fake_mempool_created_handle_types, cudaMemHandleTypeFabric);
    crmm_resource_release(mr);

    fake_mempool_supported_handle_types = cudaMemHandleTypePosixFileDescriptor;
    ck_assert_crmm(crmm_resource_create("async", "enable_fabric=true", NULL, &refused), CRMM_ERROR_UNSUPPORTED);
    ck_assert_msg(strstr(crmm_last_error(), "export_handle_type fabric is not supported by device 0 (it supports: posix_fd)"), "%s",
                  crmm_last_error());
    ck_assert_ptr_null(refused);
    ck_assert_int_eq(fake_mempool_pools_live, pools);
    ck_assert_crmm(crmm_resource_create("async", "enable_fabric=true export_handle_type=posix_fd", NULL, &refused),
                   CRMM_ERROR_CONFIG);
}

int main(void)
{
    return crmm_test_main("ipc_async", 60);
}
