/* check_rmm_resources_gpu.c — async, fixed_size, binning, aligned, failure_callback and prefetch on
 * a GPU: the conformance suite over cuda, async and managed chains, and the stream ordering of
 * fixed_size's free lists (a block freed on one stream and taken by another must wait for the
 * first stream's last use of it). */
#include "build_config.h"
#include <string.h>
#include <cuda_runtime_api.h>
#include "conformance.h"
#include "gpu_streams_test.h"
#include "test_support.h"

#define CUDA_UP "[resource.c]\nplugin = cuda\n"
#define ASYNC_UP "[resource.c]\nplugin = async\n"
#define MANAGED_UP "[resource.c]\nplugin = managed\n"

static const crmm_test_chain chains[] = {
    {"async", "[resource.a]\nplugin = async\n", "a", 1, 0},
    {"async_primed", "[resource.a]\nplugin = async\ninitial_pool_size = 256MiB\nrelease_threshold = 1GiB\n", "a", 1, 0},
    {"fixed_size_over_cuda", CUDA_UP "[resource.f]\nplugin = fixed_size\nupstream = c\nblocks_to_preallocate = 16\n", "f", 1, (size_t)1 << 20},
    {"fixed_size_over_async", ASYNC_UP "[resource.f]\nplugin = fixed_size\nupstream = c\nblocks_to_preallocate = 16\n", "f", 1, (size_t)1 << 20},
    {"binning_over_cuda", CUDA_UP "[resource.b]\nplugin = binning\nupstream = c\nmin_size_exponent = 8\nmax_size_exponent = 20\n"
     "blocks_to_preallocate = 8\n", "b", 1, 0},
    {"binning_over_async", ASYNC_UP "[resource.b]\nplugin = binning\nupstream = c\nbins = 1KiB, 64KiB, 1MiB\nblocks_to_preallocate = 8\n",
     "b", 1, 0},
    {"aligned_over_cuda", CUDA_UP "[resource.a]\nplugin = aligned\nupstream = c\nalignment = 4KiB\n", "a", 1, 0},
    {"aligned_over_async", ASYNC_UP "[resource.a]\nplugin = aligned\nupstream = c\nalignment = 64KiB\nalignment_threshold = 1MiB\n", "a", 1, 0},
    {"failure_callback_over_cuda", CUDA_UP "[resource.f]\nplugin = failure_callback\nupstream = c\n", "f", 1, 0},
    {"prefetch_over_managed", MANAGED_UP "[resource.p]\nplugin = prefetch\nupstream = c\n", "p", 1, 0},
    {"prefetch_over_cuda", CUDA_UP "[resource.p]\nplugin = prefetch\nupstream = c\n", "p", 1, 0},
    {"prefetch_over_async", ASYNC_UP "[resource.p]\nplugin = prefetch\nupstream = c\n", "p", 1, 0},
};

static unsigned char byte_at(const void *p)
{
    unsigned char b = 0;
    ck_assert_int_eq(cudaMemcpy(&b, p, 1, cudaMemcpyDefault), cudaSuccess);
    return b;
}

/* Over cuda and over async, a block freed on s1 while s1 is still going to write it, then taken
 * on s2 and written there: the resource must order s2 behind s1, so the last write is s2's. */
static const char *const cross_stream_upstreams[] = {"cuda", "async"};

CRMM_LOOP_TEST_IN("rmm_resources_gpu", fixed_size_orders_reuse_across_streams, 2)
{
    crmm_resource *up, *f;
    ck_assert_crmm_ok(crmm_resource_create(cross_stream_upstreams[_i], "", NULL, &up));
    ck_assert_crmm_ok(crmm_resource_create("fixed_size", "block_size=1MiB blocks_to_preallocate=1", up, &f));
    cudaStream_t s1, s2;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), cudaSuccess);
    const size_t n = (size_t)1 << 20;
    void *p, *q;
    ck_assert_crmm_ok(crmm_resource_allocate(f, n, (crmm_cuda_stream_t)s1, &p));
    hold_stream(s1, 300);
    ck_assert_int_eq(cudaMemsetAsync(p, 0xAA, n, s1), cudaSuccess); /* s1's last use, 300 ms from now */
    ck_assert_crmm_ok(crmm_resource_deallocate(f, p, n, (crmm_cuda_stream_t)s1));
    ck_assert_crmm_ok(crmm_resource_allocate(f, n, (crmm_cuda_stream_t)s2, &q));
    ck_assert_ptr_eq(q, p); /* the only block: taken from s1's list, not a new chunk */
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    ck_assert_int_eq(cudaMemsetAsync(q, 0x55, n, s2), cudaSuccess);
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    ck_assert_uint_eq(byte_at(q), 0x55);
    ck_assert_uint_eq(byte_at((char *)q + n - 1), 0x55);
    ck_assert_crmm_ok(crmm_resource_deallocate(f, q, n, (crmm_cuda_stream_t)s2));
    crmm_test_release(f, up);
    ck_assert_int_eq(cudaStreamDestroy(s1), cudaSuccess);
    ck_assert_int_eq(cudaStreamDestroy(s2), cudaSuccess);
}

CRMM_TEST_IN("rmm_resources_gpu", fixed_size_reuses_at_once_on_the_same_stream)
{
    crmm_resource *c, *f;
    ck_assert_crmm_ok(crmm_resource_create("cuda", "", NULL, &c));
    ck_assert_crmm_ok(crmm_resource_create("fixed_size", "block_size=64KiB blocks_to_preallocate=2", c, &f));
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    void *p, *q;
    ck_assert_crmm_ok(crmm_resource_allocate(f, 1000, (crmm_cuda_stream_t)s, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(f, p, 1000, (crmm_cuda_stream_t)s));
    ck_assert_crmm_ok(crmm_resource_allocate(f, 1000, (crmm_cuda_stream_t)s, &q));
    ck_assert_ptr_eq(q, p);
    ck_assert_crmm_ok(crmm_resource_deallocate(f, q, 1000, (crmm_cuda_stream_t)s));
    /* the per-thread default stream and the legacy stream are streams like any other */
    ck_assert_crmm_ok(crmm_resource_allocate(f, 1000, CRMM_CUDA_STREAM_PER_THREAD, &p));
    ck_assert_int_eq(cudaMemsetAsync(p, 1, 1000, cudaStreamPerThread), cudaSuccess);
    ck_assert_crmm_ok(crmm_resource_deallocate(f, p, 1000, CRMM_CUDA_STREAM_PER_THREAD));
    ck_assert_crmm_ok(crmm_resource_allocate(f, 1000, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(f, p, 1000, NULL));
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    crmm_test_release(f, c);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
}

CRMM_TEST_IN("rmm_resources_gpu", aligned_real_pointers)
{
    /* RMM's AlignRealPointer, for 4 KiB, 64 KiB and 1 MiB, the whole block written on device */
    crmm_resource *c;
    ck_assert_crmm_ok(crmm_resource_create("cuda", "", NULL, &c));
    static const size_t alignments[] = {4096, 65536, 1 << 20};
    for (int i = 0; i < 3; i++) {
        char params[96];
        snprintf(params, sizeof params, "alignment=%zu alignment_threshold=%zu", alignments[i], alignments[i]);
        crmm_resource *a;
        ck_assert_crmm_ok(crmm_resource_create("aligned", params, c, &a));
        void *p[4];
        const size_t sizes[4] = {alignments[i], alignments[i] + 1, 3 * alignments[i] - 7, 100};
        for (int k = 0; k < 4; k++) {
            ck_assert_crmm_ok(crmm_resource_allocate(a, sizes[k], NULL, &p[k]));
            if (sizes[k] >= alignments[i])
                ck_assert_msg((uintptr_t)p[k] % alignments[i] == 0, "%zu bytes at %p, alignment %zu", sizes[k], p[k], alignments[i]);
            ck_assert_uint_eq((uintptr_t)p[k] % 256, 0);
            ck_assert_int_eq(cudaMemset(p[k], 0x33, sizes[k]), cudaSuccess);
            ck_assert_uint_eq(byte_at((char *)p[k] + sizes[k] - 1), 0x33);
        }
        for (int k = 0; k < 4; k++)
            ck_assert_crmm_ok(crmm_resource_deallocate(a, p[k], sizes[k], NULL));
        crmm_resource_release(a);
    }
    ck_assert_uint_eq(crmm_test_query(c, CRMM_QUERY_BYTES_IN_USE), 0);
    crmm_resource_release(c);
}

CRMM_TEST_IN("rmm_resources_gpu", binning_over_cuda_routes_by_size)
{
    crmm_resource *c, *b;
    ck_assert_crmm_ok(crmm_resource_create("cuda", "", NULL, &c));
    ck_assert_crmm_ok(crmm_resource_create("binning", "bins=4KiB:1MiB blocks_to_preallocate=1", c, &b));
    ck_assert_uint_eq(crmm_test_query(c, CRMM_QUERY_BYTES_IN_USE), 4096 + (1 << 20));
    void *p[3];
    ck_assert_crmm_ok(crmm_resource_allocate(b, 4000, NULL, &p[0]));
    ck_assert_crmm_ok(crmm_resource_allocate(b, 4000, NULL, &p[1])); /* the 4 KiB bin grows */
    ck_assert_uint_eq(crmm_test_query(c, CRMM_QUERY_BYTES_IN_USE), 2 * 4096 + (1 << 20));
    ck_assert_crmm_ok(crmm_resource_allocate(b, 3 << 20, NULL, &p[2])); /* straight to cuda */
    ck_assert_uint_eq(crmm_test_query(c, CRMM_QUERY_BYTES_IN_USE), 2 * 4096 + (1 << 20) + (3 << 20));
    ck_assert_int_eq(cudaMemset(p[2], 0, 3 << 20), cudaSuccess);
    ck_assert_crmm_ok(crmm_resource_deallocate(b, p[0], 4000, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(b, p[1], 4000, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(b, p[2], 3 << 20, NULL));
    crmm_resource_release(b);
    ck_assert_uint_eq(crmm_test_query(c, CRMM_QUERY_BYTES_IN_USE), 0);
    crmm_resource_release(c);
}

int main(void)
{
    CRMM_TEST_GPU_GATE(1);
    Suite *s = suite_create("rmm_resources_gpu");
    crmm_conformance_add(s, chains, (int)(sizeof chains / sizeof chains[0]));
    crmm_test_tcase(s, "rmm_resources_gpu", CRMM_TEST_GPU_TIMEOUT);
    return crmm_test_run(s);
}
