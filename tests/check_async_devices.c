/* check_async_devices.c — the stream-ordered pool plugins (async, cuda_async_view) used while
 * another device is current, against a scripted CUDA of two devices (defined here and in
 * fakes/fake_mempool.c, linked -export-dynamic). The default streams (NULL, cudaStreamLegacy,
 * cudaStreamPerThread) name a stream of whichever device is current, so an allocation or free on
 * one must run with the resource's device current (else it is ordered on another device's
 * stream), and the caller's current device must be the same afterwards. */
#include "build_config.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime_api.h>
#include "fakes/fake_mempool.h"
#include "test_support.h"

/* ---- the scripted CUDA ------------------------------------------------------------------- */

static int malloc_device = -1, free_device = -1; /* the current device at the last call */

cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream)
{
    (void)pool, (void)stream;
    malloc_device = fake_mempool_current;
    *ptr = malloc(size ? size : 1);
    return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    (void)stream;
    free_device = fake_mempool_current;
    free(ptr);
    return cudaSuccess;
}

/* ---- tests ------------------------------------------------------------------------------- */

static const crmm_cuda_stream_t default_streams[] = {NULL, (crmm_cuda_stream_t)0x1, (crmm_cuda_stream_t)0x2};

/* A resource of device 1 (made while it is current), used on each default stream while device 0
 * is current. */
static void use_from_device_0(const char *kind, const char *params)
{
    fake_mempool_devices = 2;
    fake_mempool_current = 1;
    crmm_resource *mr = crmm_test_create(kind, params, NULL);
    ck_assert_int_eq(mr->device, 1);
    fake_mempool_current = 0;
    for (size_t i = 0; i < sizeof default_streams / sizeof default_streams[0]; i++) {
        void *p = NULL;
        malloc_device = free_device = -1;
        ck_assert_crmm_ok(crmm_resource_allocate(mr, 1024, default_streams[i], &p));
        ck_assert_msg(malloc_device == 1, "%s: stream %zu: cudaMallocFromPoolAsync ran on device %d", kind, i,
                      malloc_device);
        ck_assert_int_eq(fake_mempool_current, 0);
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1024, default_streams[i]));
        ck_assert_msg(free_device == 1, "%s: stream %zu: cudaFreeAsync ran on device %d", kind, i, free_device);
        ck_assert_int_eq(fake_mempool_current, 0);
    }
    crmm_resource_release(mr);
    fake_mempool_devices = 1;
}

CRMM_TEST(async_runs_on_its_device)
{
    use_from_device_0("async", "");
    ck_assert_int_eq(fake_mempool_pools_live, 0);
}

CRMM_TEST(cuda_async_view_runs_on_its_device)
{
    static int pool_token;
    char params[64];
    snprintf(params, sizeof params, "pool_handle=%#jx", (uintmax_t)(uintptr_t)&pool_token);
    use_from_device_0("cuda_async_view", params);
}

int main(void)
{
    return crmm_test_main("async_devices", 60);
}
