/* check_async_gpu.c — the async plugin on a GPU: queries after allocate and free (the pool's
 * reserved bytes vs the bytes handed out), trim, initial_pool_size priming, release_threshold,
 * export_handle_type none / posix_fd / fabric (used for real when the device supports it, a
 * named error when not), separate pools per resource, out of memory, threads on their own
 * streams with serialize_calls on and off. RMM's cuda_async_mr_tests are the model. */
#include "build_config.h"
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include <crmm/async.h>
#include "test_support.h"

#define MiB ((uint64_t)1 << 20)

CRMM_TEST(queries_follow_allocate_and_free)
{
    crmm_resource *a;
    ck_assert_crmm_ok(crmm_resource_create("async", "", NULL, &a));
    ck_assert(crmm_resource_is_device_accessible(a));
    ck_assert(!crmm_resource_is_host_accessible(a));
    ck_assert_int_eq(a->device, crmm_test_cuda_device());
    ck_assert_uint_eq(crmm_test_query(a, CRMM_QUERY_BYTES_RESERVED), 0); /* a private pool starts empty */
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(a, 8 * MiB, (crmm_cuda_stream_t)s, &p));
    ck_assert_uint_eq((uintptr_t)p % 256, 0);
    ck_assert_int_eq(cudaMemsetAsync(p, 1, 8 * MiB, s), cudaSuccess);
    ck_assert_uint_eq(crmm_test_query(a, CRMM_QUERY_BYTES_IN_USE), 8 * MiB);
    ck_assert_uint_eq(crmm_test_query(a, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_uint_ge(crmm_test_query(a, CRMM_QUERY_BYTES_RESERVED), 8 * MiB);
    ck_assert_uint_ge(crmm_test_query(a, CRMM_QUERY_ASYNC_POOL_USED), 8 * MiB);
    ck_assert_crmm_ok(crmm_resource_deallocate(a, p, 8 * MiB, (crmm_cuda_stream_t)s));
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    ck_assert_uint_eq(crmm_test_query(a, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(a, CRMM_QUERY_BYTES_IN_USE_PEAK), 8 * MiB);
    ck_assert_uint_eq(crmm_test_query(a, CRMM_QUERY_ASYNC_POOL_USED), 0);
    ck_assert_uint_ge(crmm_test_query(a, CRMM_QUERY_ASYNC_POOL_USED_PEAK), 8 * MiB);
    /* the default release threshold keeps the memory across synchronization */
    ck_assert_uint_ge(crmm_test_query(a, CRMM_QUERY_BYTES_RESERVED), 8 * MiB);
    ck_assert_uint_ge(crmm_test_query(a, CRMM_QUERY_BYTES_FREE), 8 * MiB);
    ck_assert_uint_ge(crmm_test_query(a, CRMM_QUERY_BYTES_RESERVED_PEAK), 8 * MiB);
    ck_assert_crmm_ok(crmm_resource_trim(a));
    ck_assert_uint_eq(crmm_test_query(a, CRMM_QUERY_BYTES_RESERVED), 0);
    ck_assert_uint_ge(crmm_test_query(a, CRMM_QUERY_BYTES_RESERVED_PEAK), 8 * MiB);
    crmm_resource_release(a);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
}

CRMM_TEST(initial_pool_size_primes_the_pool)
{
    crmm_resource *a;
    ck_assert_crmm_ok(crmm_resource_create("async", "initial_pool_size=64MiB", NULL, &a));
    ck_assert_uint_ge(crmm_test_query(a, CRMM_QUERY_BYTES_RESERVED), 64 * MiB);
    ck_assert_uint_eq(crmm_test_query(a, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(a, CRMM_QUERY_ALLOCATIONS_TOTAL), 0); /* priming is not a user allocation */
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    ck_assert_uint_ge(crmm_test_query(a, CRMM_QUERY_BYTES_RESERVED), 64 * MiB); /* kept */
    void *p = crmm_test_allocate(a, 100); /* RMM's ExplicitInitialPoolSize */
    ck_assert_crmm_ok(crmm_resource_deallocate(a, p, 100, NULL));
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    ck_assert_crmm_ok(crmm_resource_trim(a));
    ck_assert_uint_lt(crmm_test_query(a, CRMM_QUERY_BYTES_RESERVED), 64 * MiB);
    crmm_resource_release(a);
}

CRMM_TEST(initial_pool_size_too_large)
{
    crmm_resource *a = NULL;
    crmm_clear_error();
    ck_assert_crmm(crmm_resource_create("async", "initial_pool_size=1PiB", NULL, &a), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(a);
    ck_assert_msg(strstr(crmm_last_error(), "initial_pool_size") && strstr(crmm_last_error(), "out of memory"), "message: %s",
                  crmm_last_error());
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess); /* no stale error left for the caller */
}

/* Allocate and free `bytes` on a stream, synchronize, and return the reserved bytes left. */
static uint64_t reserved_after_sync(crmm_resource *a, uint64_t bytes)
{
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(a, bytes, (crmm_cuda_stream_t)s, &p));
    ck_assert_int_eq(cudaMemsetAsync(p, 0, bytes, s), cudaSuccess);
    ck_assert_crmm_ok(crmm_resource_deallocate(a, p, bytes, (crmm_cuda_stream_t)s));
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
    return crmm_test_query(a, CRMM_QUERY_BYTES_RESERVED);
}

CRMM_TEST(release_threshold_decides_what_stays)
{
    crmm_resource *keep, *release;
    ck_assert_crmm_ok(crmm_resource_create("async", "release_threshold=1GiB", NULL, &keep));
    ck_assert_crmm_ok(crmm_resource_create("async", "release_threshold=0", NULL, &release));
    ck_assert_uint_ge(reserved_after_sync(keep, 32 * MiB), 32 * MiB);
    ck_assert_uint_lt(reserved_after_sync(release, 32 * MiB), 32 * MiB);
    crmm_test_release(keep, release);
}

CRMM_TEST(each_resource_has_its_own_pool)
{
    crmm_resource *a, *b;
    ck_assert_crmm_ok(crmm_resource_create("async", "initial_pool_size=100 release_threshold=1000", NULL, &a));
    ck_assert_crmm_ok(crmm_resource_create("async", "initial_pool_size=100 release_threshold=1000", NULL, &b));
    void *pa = NULL, *pb = NULL, *dflt = NULL;
    ck_assert_crmm_ok(crmm_async_get_pool(a, &pa));
    ck_assert_crmm_ok(crmm_async_get_pool(b, &pb));
    ck_assert_ptr_nonnull(pa);
    ck_assert_ptr_ne(pa, pb);
    cudaMemPool_t device_default;
    ck_assert_int_eq(cudaDeviceGetDefaultMemPool(&device_default, crmm_test_cuda_device()), cudaSuccess);
    dflt = (void *)device_default;
    ck_assert_ptr_ne(pa, dflt); /* private, not the device's default pool */
    /* found under an adaptor too */
    crmm_resource *top;
    ck_assert_crmm_ok(crmm_resource_create("aligned", "alignment=4KiB", a, &top));
    void *via = NULL;
    ck_assert_crmm_ok(crmm_async_get_pool(top, &via));
    ck_assert_ptr_eq(via, pa);
    crmm_test_release(top, a, b);
}

/* Whether the device supports export handle type `type`; when it does not, the resource creation
 * that asked for it (st, a) must have failed as unsupported, naming `name` and the device. */
static bool handle_type_supported(int type, const char *name, crmm_status st, const crmm_resource *a)
{
    int mask = 0;
    ck_assert_int_eq(cudaDeviceGetAttribute(&mask, cudaDevAttrMemoryPoolSupportedHandleTypes, crmm_test_cuda_device()), cudaSuccess);
    if ((mask & type) == type)
        return true;
    ck_assert_int_eq(st, CRMM_ERROR_UNSUPPORTED);
    ck_assert_msg(strstr(crmm_last_error(), name) && strstr(crmm_last_error(), "device"), "message: %s", crmm_last_error());
    ck_assert_ptr_null(a);
    return false;
}

CRMM_TEST(export_handle_type_none_cannot_export)
{
    crmm_resource *a;
    ck_assert_crmm_ok(crmm_resource_create("async", "export_handle_type=none", NULL, &a));
    void *pool;
    ck_assert_crmm_ok(crmm_async_get_pool(a, &pool));
    int fd = -1;
    ck_assert_int_ne(cudaMemPoolExportToShareableHandle(&fd, (cudaMemPool_t)pool, cudaMemHandleTypePosixFileDescriptor, 0),
                     cudaSuccess);
    cudaGetLastError();
    crmm_resource_release(a);
}

CRMM_TEST(export_handle_type_posix_fd)
{
    crmm_resource *a = NULL;
    crmm_status st = crmm_resource_create("async", "export_handle_type=posix_fd", NULL, &a);
    if (!handle_type_supported(cudaMemHandleTypePosixFileDescriptor, "posix_fd", st, a))
        return;
    ck_assert_crmm_ok(st);
    void *pool, *p;
    ck_assert_crmm_ok(crmm_async_get_pool(a, &pool));
    ck_assert_crmm_ok(crmm_resource_allocate(a, MiB, NULL, &p));
    int fd = -1;
    ck_assert_int_eq(cudaMemPoolExportToShareableHandle(&fd, (cudaMemPool_t)pool, cudaMemHandleTypePosixFileDescriptor, 0),
                     cudaSuccess);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_crmm_ok(crmm_resource_deallocate(a, p, MiB, NULL));
    crmm_resource_release(a);
}

/* A pool of fabric handles that the device says it supports (`st`, `a`: its create), with 100
 * bytes allocated from it in *p; false when the machine lacks the IMEX channel such a pool may
 * still need: then the create's error names fabric, or the first allocation's names the
 * resource, and nothing is left allocated. RMM's FabricHandlesSupport test. */
static bool fabric_pool_allocates(crmm_status st, crmm_resource *a, void **p)
{
    if (st != CRMM_OK) {
        ck_assert_msg(strstr(crmm_last_error(), "fabric"), "message: %s", crmm_last_error());
        ck_assert_ptr_null(a);
        return false;
    }
    st = crmm_resource_allocate(a, 100, NULL, p);
    if (st != CRMM_OK) { /* the same lack of IMEX may show only when memory is mapped */
        ck_assert_msg(strstr(crmm_last_error(), "async"), "message: %s", crmm_last_error());
        crmm_resource_release(a);
        return false;
    }
    return true;
}

CRMM_TEST(export_handle_type_fabric)
{
    crmm_resource *a = NULL;
    crmm_clear_error();
    crmm_status st = crmm_resource_create("async", "export_handle_type=fabric", NULL, &a);
    void *p;
    if (!handle_type_supported(cudaMemHandleTypeFabric, "fabric", st, a) || !fabric_pool_allocates(st, a, &p))
        return;
    ck_assert_crmm_ok(crmm_resource_deallocate(a, p, 100, NULL));
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    crmm_resource_release(a);
}

/* RMM's enable_ipc and enable_fabric together are refused before any pool is made (docs/ipc.md
 * says why). */
CRMM_TEST(enable_ipc_and_enable_fabric_together_are_refused)
{
    crmm_resource *a = NULL;
    ck_assert_crmm(crmm_resource_create("async", "enable_ipc=true enable_fabric=true", NULL, &a), CRMM_ERROR_CONFIG);
    ck_assert_ptr_null(a);
    ck_assert_msg(strstr(crmm_last_error(), "enable_ipc and enable_fabric"), "%s", crmm_last_error());
}

CRMM_TEST(out_of_memory_leaves_the_pool_usable)
{
    crmm_resource *a;
    ck_assert_crmm_ok(crmm_resource_create("async", "", NULL, &a));
    void *p = (void *)0x1;
    crmm_clear_error();
    ck_assert_crmm(crmm_resource_allocate(a, (size_t)1 << 50, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(crmm_last_error(), "async") && strstr(crmm_last_error(), "1.0 PiB"), "message: %s", crmm_last_error());
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    ck_assert_crmm_ok(crmm_resource_allocate(a, 4096, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(a, p, 4096, NULL));
    ck_assert_uint_eq(crmm_test_query(a, CRMM_QUERY_ALLOCATIONS_TOTAL), 1);
    crmm_resource_release(a);
}

typedef struct stream_job {
    crmm_resource *a;
    int id;
    int bad;                       /* rounds whose bytes came back wrong */
    crmm_status st;
} stream_job;

/* 200 rounds on a stream of its own: allocate, fill with the thread's id, read back, free. */
static void *fill_and_check(void *arg)
{
    stream_job *j = arg;
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        j->st = CRMM_ERROR_CUDA;
        return NULL;
    }
    for (int i = 0; i < 200 && j->st == CRMM_OK; i++) {
        size_t n = (size_t)(64 << 10) * (size_t)(1 + (i + j->id) % 16);
        unsigned char *p = NULL, back[2] = {0, 0};
        if ((j->st = crmm_resource_allocate(j->a, n, (crmm_cuda_stream_t)s, (void **)&p)) != CRMM_OK)
            break;
        if (cudaMemsetAsync(p, j->id, n, s) != cudaSuccess || cudaMemcpyAsync(&back[0], p, 1, cudaMemcpyDeviceToHost, s) != cudaSuccess ||
            cudaMemcpyAsync(&back[1], p + n - 1, 1, cudaMemcpyDeviceToHost, s) != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess)
            j->st = CRMM_ERROR_CUDA;
        j->bad += back[0] != j->id || back[1] != j->id;
        crmm_status st = crmm_resource_deallocate(j->a, p, n, (crmm_cuda_stream_t)s);
        if (j->st == CRMM_OK)
            j->st = st;
    }
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    return NULL;
}

CRMM_LOOP_TEST(threads_on_their_own_streams_keep_their_data, 2)
{
    /* _i = 1: serialize_calls (the default), 0: threads enter the driver together */
    crmm_resource *a;
    ck_assert_crmm_ok(crmm_resource_create("async", _i ? "" : "serialize_calls=false", NULL, &a));
    pthread_t t[4];
    stream_job jobs[4];
    for (int k = 0; k < 4; k++) {
        jobs[k] = (stream_job){a, k + 1, 0, CRMM_OK};
        ck_assert_int_eq(pthread_create(&t[k], NULL, fill_and_check, &jobs[k]), 0);
    }
    for (int k = 0; k < 4; k++) {
        ck_assert_int_eq(pthread_join(t[k], NULL), 0);
        ck_assert_crmm_ok(jobs[k].st);
        ck_assert_int_eq(jobs[k].bad, 0);
    }
    ck_assert_uint_eq(crmm_test_query(a, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(crmm_test_query(a, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(a, CRMM_QUERY_ALLOCATIONS_TOTAL), 800);
    crmm_resource_release(a);
}

CRMM_TEST(from_a_config_with_a_size_in_percent)
{
    crmm_config *cfg;
    ck_assert_crmm_ok(crmm_config_load_string("[resource.a]\nplugin = async\ninitial_pool_size = 1%\nrelease_threshold = 50%\n",
                                              "async.ini", &cfg));
    crmm_resource *a;
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "a", -1, &a));
    size_t free_b, total;
    ck_assert_int_eq(cudaMemGetInfo(&free_b, &total), cudaSuccess);
    ck_assert_uint_ge(crmm_test_query(a, CRMM_QUERY_BYTES_RESERVED), (uint64_t)((double)total * 0.01) - MiB);
    crmm_resource_release(a);
    crmm_config_free(cfg);
}

int main(void)
{
    CRMM_TEST_GPU_GATE(1);
    return crmm_test_main("async_gpu", CRMM_TEST_GPU_TIMEOUT);
}
