/* check_prefetch_gpu.c — the prefetch adaptor on a GPU (RMM's prefetch_resource_adaptor tests):
 * over managed memory every block's last prefetch location is the resource's device, without
 * the adaptor it is none; over cudaMalloc memory, which cannot be prefetched, allocation works
 * and leaves no CUDA error behind. */
#include "build_config.h"
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "test_support.h"

/* RMM skips these checks where managed memory cannot be accessed concurrently (the adaptor
 * prefetches nothing there). */
static bool concurrent_managed_access(void)
{
    int v = 0;
    ck_assert_int_eq(cudaDeviceGetAttribute(&v, cudaDevAttrConcurrentManagedAccess, crmm_test_cuda_device()), cudaSuccess);
    if (!v)
        fprintf(stderr, "note: device %d has no concurrent managed access: prefetch checks skipped\n", crmm_test_cuda_device());
    return v != 0;
}

static int last_prefetch_location(const void *p, size_t n)
{
    int where = 12345;
    ck_assert_int_eq(cudaMemRangeGetAttribute(&where, sizeof where, cudaMemRangeAttributeLastPrefetchLocation, p, n), cudaSuccess);
    return where;
}

static const size_t sizes[] = {1000, 54321, 100000, (size_t)3 << 20};

CRMM_TEST(managed_blocks_are_prefetched_to_the_device)
{
    if (!concurrent_managed_access())
        return;
    int dev = crmm_test_cuda_device();
    crmm_resource *m, *p;
    ck_assert_crmm_ok(crmm_resource_create("managed", "", NULL, &m));
    ck_assert_crmm_ok(crmm_resource_create("prefetch", "", m, &p));
    ck_assert_int_eq(p->device, dev);
    ck_assert(crmm_resource_is_host_accessible(p) && crmm_resource_is_device_accessible(p));
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        void *b;
        ck_assert_crmm_ok(crmm_resource_allocate(p, sizes[k], (crmm_cuda_stream_t)s, &b));
        ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
        ck_assert_int_eq(last_prefetch_location(b, sizes[k]), dev);
        enum cudaMemLocationType type = cudaMemLocationTypeInvalid;
        int id = -1;
        ck_assert_int_eq(cudaMemRangeGetAttribute(&type, sizeof type, cudaMemRangeAttributeLastPrefetchLocationType, b, sizes[k]),
                         cudaSuccess);
        ck_assert_int_eq(cudaMemRangeGetAttribute(&id, sizeof id, cudaMemRangeAttributeLastPrefetchLocationId, b, sizes[k]),
                         cudaSuccess);
        ck_assert_int_eq(type, cudaMemLocationTypeDevice);
        ck_assert_int_eq(id, dev);
        memset(b, 7, sizes[k]); /* still managed: usable from the host */
        ck_assert_crmm_ok(crmm_resource_deallocate(p, b, sizes[k], (crmm_cuda_stream_t)s));
    }
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    crmm_resource_release(p);
    crmm_resource_release(m);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
}

CRMM_TEST(managed_blocks_are_not_prefetched_without_the_adaptor)
{
    if (!concurrent_managed_access())
        return;
    crmm_resource *m;
    ck_assert_crmm_ok(crmm_resource_create("managed", "", NULL, &m));
    void *b;
    ck_assert_crmm_ok(crmm_resource_allocate(m, 54321, NULL, &b));
    ck_assert_int_eq(last_prefetch_location(b, 54321), cudaInvalidDeviceId);
    ck_assert_crmm_ok(crmm_resource_deallocate(m, b, 54321, NULL));
    crmm_resource_release(m);
}

CRMM_TEST(device_memory_is_handed_out_unprefetched)
{
    crmm_resource *c, *p;
    ck_assert_crmm_ok(crmm_resource_create("cuda", "", NULL, &c));
    ck_assert_crmm_ok(crmm_resource_create("prefetch", "", c, &p));
    ck_assert(!crmm_resource_is_host_accessible(p));
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        void *b;
        ck_assert_crmm_ok(crmm_resource_allocate(p, sizes[k], NULL, &b));
        ck_assert_int_eq(cudaGetLastError(), cudaSuccess); /* the refused prefetch left nothing behind */
        ck_assert_int_eq(cudaMemset(b, 1, sizes[k]), cudaSuccess);
        ck_assert_crmm_ok(crmm_resource_deallocate(p, b, sizes[k], NULL));
    }
    uint64_t used = 1;
    ck_assert_crmm_ok(crmm_resource_query(p, CRMM_QUERY_BYTES_IN_USE, &used));
    ck_assert_uint_eq(used, 0);
    crmm_resource_release(p);
    crmm_resource_release(c);
}

int main(void)
{
    int rc = crmm_test_gpu_gate(1);
    if (rc)
        return rc;
    return crmm_test_main("prefetch_gpu", CRMM_TEST_GPU_TIMEOUT);
}
