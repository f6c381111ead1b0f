/* arena_streams_test.h — what the arena's stream suites (check_arena_streams,
 * check_arena_streams_threads) share: an arena over the fake device of fakes/fake_stream_cuda.h,
 * and allocations and frees on a stream that must succeed. */
#ifndef CRMM_TESTS_ARENA_STREAMS_TEST_H
#define CRMM_TESTS_ARENA_STREAMS_TEST_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include <crmm/arena.h>
#include "fakes/fake_stream_cuda.h"
#include "fakes/fake_streams.h"
#include "test_support.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* An arena over the fake device (fakes/fake_stream_cuda.h); the calls its creation made are
 * forgotten. */
static inline crmm_resource *device_arena(const char *params)
{
    crmm_resource *u = fake_device_new(0);
    crmm_resource *a = crmm_test_create("arena", params, u);
    crmm_resource_release(u);
    fake_cuda_reset();
    return a;
}

static inline void *alloc_on(crmm_resource *mr, size_t n, cudaStream_t s)
{
    void *x = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, n, (crmm_cuda_stream_t)s, &x));
    ck_assert_ptr_nonnull(x);
    return x;
}

static inline void free_on(crmm_resource *mr, void *x, size_t n, cudaStream_t s)
{
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, x, n, (crmm_cuda_stream_t)s));
}


#endif
