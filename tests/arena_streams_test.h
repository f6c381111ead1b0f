/* arena_streams_test.h — what the arena's stream suites (check_arena_streams,
 * check_arena_streams_threads) share: an arena over the fake device of fakes/fake_stream_cuda.h,
 * forgetting the calls its creation made. */
#ifndef CRMM_TESTS_ARENA_STREAMS_TEST_H
#define CRMM_TESTS_ARENA_STREAMS_TEST_H

#include <cuda_runtime_api.h>
#include "fakes/fake_stream_cuda.h"
#include "fakes/fake_streams.h"
#include "streams_test.h"
#include "arena_test.h"

static inline crmm_resource *device_arena(const char *params)
{
    crmm_resource *u = fake_device_new(0);
    crmm_resource *a = crmm_test_create("arena", params, u);
    crmm_resource_release(u);
    fake_cuda_reset();
    return a;
}

/* In a test: the address of n bytes of mr allocated and freed on stream s (their tag is s now). */
static inline void *freed_on(crmm_resource *mr, size_t n, cudaStream_t s)
{
    void *x = alloc_on(mr, n, s);
    free_on(mr, x, n, s);
    return x;
}

#endif
