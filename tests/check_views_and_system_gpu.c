/* check_views_and_system_gpu.c — callback, cuda_async_view, async_managed, system and
 * sam_headroom on a device: memory written by the device (cudaMemsetAsync on the allocation's
 * stream) reads back through cudaMemcpy and, where the resource says so, from the host; the view
 * allocates from a pool this test creates and leaves it alive; the default managed pool is the
 * one the driver reports; sam_headroom's placement is what cudaMemRangeGetAttribute says; and on a
 * device without pageable memory access system and sam_headroom refuse, naming the attribute.
 * The conformance suite runs over callback (over cudaMalloc), async_managed, system and
 * sam_headroom where the device supports them (probed in a child before Check forks). */
#include "build_config.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <crmm/async_managed.h>
#include <crmm/callback.h>
#include <crmm/cuda_async_view.h>
#include "conformance.h"
#include "test_support.h"
#include "callback_config.h"

static int pageable_access(void)
{
    int v = 0;
    return cudaDeviceGetAttribute(&v, cudaDevAttrPageableMemoryAccess, 0) == cudaSuccess && v ? 1 : 0;
}

static int managed_pools(void)
{
    int version = 0, pools = 0;
    return cudaDriverGetVersion(&version) == cudaSuccess && version >= 13000 &&
           cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, 0) == cudaSuccess && pools;
}

/* Allocate `bytes` on a new stream, have the device fill them, read them back; free on the stream. */
static void write_and_read(crmm_resource *mr, size_t bytes)
{
    cudaStream_t s;
    ck_assert_cuda(cudaStreamCreate(&s));
    unsigned char *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, bytes, (crmm_cuda_stream_t)s, (void **)&p));
    ck_assert_uint_eq((uintptr_t)p % CRMM_ALLOCATION_ALIGNMENT, 0);
    ck_assert_cuda(cudaMemsetAsync(p, 0x3c, bytes, s));
    unsigned char *host = malloc(bytes);
    ck_assert_ptr_nonnull(host);
    ck_assert_cuda(cudaMemcpyAsync(host, p, bytes, cudaMemcpyDefault, s));
    ck_assert_cuda(cudaStreamSynchronize(s));
    ck_assert_uint_eq(host[0], 0x3c);
    ck_assert_uint_eq(host[bytes / 2], 0x3c);
    ck_assert_uint_eq(host[bytes - 1], 0x3c);
    if (crmm_resource_is_host_accessible(mr)) {
        ck_assert_uint_eq(p[bytes - 1], 0x3c);
        p[0] = 0x11; /* and the host writes what the device then copies */
        ck_assert_cuda(cudaMemcpy(host, p, 1, cudaMemcpyDefault));
        ck_assert_uint_eq(host[0], 0x11);
    }
    free(host);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), bytes);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, bytes, (crmm_cuda_stream_t)s));
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_cuda(cudaStreamDestroy(s));
}

/* callbacks over cudaMalloc/cudaFree; `arg` counts the calls */
static void *device_alloc(size_t bytes, crmm_cuda_stream_t stream, void *arg)
{
    (void)stream;
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    if (arg)
        (*(int *)arg)++;
    return p;
}

static void device_free(void *ptr, size_t bytes, crmm_cuda_stream_t stream, void *arg)
{
    (void)bytes, (void)stream;
    cudaFree(ptr);
    if (arg)
        (*(int *)arg)--;
}

CRMM_TEST_IN("resources", callback_over_cuda_malloc)
{
    int live = 0;
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(crmm_callback_resource_create(device_alloc, device_free, &live, &live, &mr));
    ck_assert_int_eq(mr->device, crmm_test_cuda_device());
    write_and_read(mr, 3 << 20);
    ck_assert_int_eq(live, 0);
    void *p = NULL;
    ck_assert_crmm(crmm_resource_allocate(mr, (size_t)1 << 50, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    crmm_resource_release(mr);
}

CRMM_TEST_IN("resources", view_over_a_pool_the_test_owns)
{
    int dev = crmm_test_cuda_device();
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t pool;
    ck_assert_cuda(cudaMemPoolCreate(&pool, &props));
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(crmm_cuda_async_view_create((void *)pool, &mr));
    void *got = NULL;
    ck_assert_crmm_ok(crmm_cuda_async_view_get_pool(mr, &got));
    ck_assert_ptr_eq(got, (void *)pool);
    write_and_read(mr, 1 << 20);
    write_and_read(mr, 300);
    /* the block came from our pool: it reserved memory for it */
    void *p = crmm_test_allocate(mr, 8 << 20);
    uint64_t used = 0;
    ck_assert_cuda(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
    ck_assert_uint_ge(used, 8 << 20);
    ck_assert_uint_ge(crmm_test_query(mr, CRMM_QUERY_BYTES_RESERVED), 8 << 20);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 8 << 20, NULL));
    ck_assert_cuda(cudaDeviceSynchronize());
    crmm_resource_release(mr);
    /* the pool is still ours: it allocates after the view is gone, and we destroy it */
    ck_assert_cuda(cudaMallocFromPoolAsync(&p, 4096, pool, NULL));
    ck_assert_cuda(cudaFreeAsync(p, NULL));
    ck_assert_cuda(cudaDeviceSynchronize());
    ck_assert_cuda(cudaMemPoolDestroy(pool));
}

CRMM_TEST_IN("resources", async_managed_over_the_default_managed_pool)
{
    crmm_resource *mr = NULL;
    crmm_status st = crmm_resource_create("async_managed", NULL, NULL, &mr);
    if (!managed_pools()) {
        ck_assert_crmm(st, CRMM_ERROR_UNSUPPORTED);
        return;
    }
    ck_assert_crmm_ok(st);
    int dev = crmm_test_cuda_device();
    struct cudaMemLocation loc = {.type = cudaMemLocationTypeDevice, .id = dev};
    cudaMemPool_t expected;
    ck_assert_cuda(cudaMemGetDefaultMemPool(&expected, &loc, cudaMemAllocationTypeManaged));
    void *pool = NULL;
    ck_assert_crmm_ok(crmm_async_managed_get_pool(mr, &pool));
    ck_assert_ptr_eq(pool, (void *)expected);
    write_and_read(mr, 2 << 20);
    void *p = crmm_test_allocate(mr, 4096);
    struct cudaPointerAttributes attr;
    ck_assert_cuda(cudaPointerGetAttributes(&attr, p));
    ck_assert_int_eq(attr.type, cudaMemoryTypeManaged);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 4096, NULL));
    crmm_resource_release(mr);
}

CRMM_TEST_IN("resources", system_and_sam_headroom_where_supported)
{
    crmm_resource *mr = NULL;
    if (!pageable_access()) {
        ck_assert_crmm(crmm_resource_create("system", NULL, NULL, &mr), CRMM_ERROR_UNSUPPORTED);
        ck_assert_msg(strstr(crmm_last_error(), "cudaDevAttrPageableMemoryAccess"), "message: %s", crmm_last_error());
        ck_assert_crmm(crmm_resource_create("sam_headroom", "headroom=1GiB", NULL, &mr), CRMM_ERROR_UNSUPPORTED);
        ck_assert_ptr_null(mr);
        return;
    }
    mr = crmm_test_create("system", NULL, NULL);
    write_and_read(mr, 5 << 20);
    crmm_resource_release(mr);

    int dev = crmm_test_cuda_device();
    /* no headroom: a small block prefers the device */
    mr = crmm_test_create("sam_headroom", "headroom=0", NULL);
    write_and_read(mr, 1 << 20);
    void *p = crmm_test_allocate(mr, 1 << 20);
    int where = -3;
    ck_assert_cuda(cudaMemRangeGetAttribute(&where, sizeof where, cudaMemRangeAttributePreferredLocation, p, 1 << 20));
    ck_assert_int_eq(where, dev);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1 << 20, NULL));
    crmm_resource_release(mr);
    /* a headroom of the whole device: everything prefers the host */
    mr = crmm_test_create("sam_headroom", "headroom=100%", NULL);
    p = crmm_test_allocate(mr, 1 << 20);
    ck_assert_cuda(cudaMemRangeGetAttribute(&where, sizeof where, cudaMemRangeAttributePreferredLocation, p, 1 << 20));
    ck_assert_int_eq(where, cudaCpuDeviceId);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1 << 20, NULL));
    crmm_resource_release(mr);
}

int main(void)
{
    CRMM_TEST_GPU_GATE(1);
    Suite *s = suite_create("views_and_system_gpu");
    crmm_test_tcase(s, "resources", CRMM_TEST_GPU_TIMEOUT);

    static char callback_text[256];
    callback_config(callback_text, sizeof callback_text, device_alloc, device_free, "");
    crmm_test_chain chains[4];
    int n = 0;
    chains[n++] = (crmm_test_chain){"callback_over_cuda_malloc", callback_text, "c", 1, 0};
    if (crmm_test_probe(managed_pools) == 1)
        chains[n++] = (crmm_test_chain){"async_managed", "[resource.m]\nplugin = async_managed\n", "m", 1, 0};
    if (crmm_test_probe(pageable_access) == 1) {
        chains[n++] = (crmm_test_chain){"system", "[resource.s]\nplugin = system\n", "s", 1, 0};
        chains[n++] = (crmm_test_chain){"sam_headroom", "[resource.s]\nplugin = sam_headroom\nheadroom = 1GiB\n", "s", 1, 0};
    } else {
        fprintf(stderr, "note: the device lacks cudaDevAttrPageableMemoryAccess: no conformance runs over system, sam_headroom\n");
    }
    crmm_conformance_add(s, chains, n);
    return crmm_test_run(s);
}
