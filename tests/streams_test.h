/* streams_test.h — what the stream suites over the scripted CUDA (check_pool_streams*,
 * check_arena_streams*) share: an allocation and a free on a stream, which must succeed. */
#ifndef CRMM_TESTS_STREAMS_TEST_H
#define CRMM_TESTS_STREAMS_TEST_H

#include <stdint.h>
#include <cuda_runtime_api.h>
#include "test_support.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* In a test: n bytes from mr on stream s, aligned as the ABI promises. */
static inline void *alloc_on(crmm_resource *mr, size_t n, cudaStream_t s)
{
    void *x = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, n, (crmm_cuda_stream_t)s, &x));
    ck_assert_ptr_nonnull(x);
    ck_assert_uint_eq((uintptr_t)x % CRMM_ALLOCATION_ALIGNMENT, 0);
    return x;
}

/* In a test: free x (n bytes) to mr on stream s. */
static inline void free_on(crmm_resource *mr, void *x, size_t n, cudaStream_t s)
{
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, x, n, (crmm_cuda_stream_t)s));
}

#endif
