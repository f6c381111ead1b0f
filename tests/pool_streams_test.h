/* pool_streams_test.h — what the pool's stream suites (check_pool_streams,
 * check_pool_streams_threads) share: a pool over the fake device of fakes/fake_stream_cuda.h, in
 * stream_reuse mode SYNC or EVENT, and its queries. The program links the scripted CUDA and is
 * linked with -export-dynamic, so the pool's CUDA calls land there and are counted; a call that
 * passes a destroyed stream's handle fails the test. */
#ifndef CRMM_TESTS_POOL_STREAMS_TEST_H
#define CRMM_TESTS_POOL_STREAMS_TEST_H

#include <cuda_runtime_api.h>
#include <crmm/pool.h>
#include "blocks_test.h"
#include "fakes/fake_stream_cuda.h"
#include "fakes/fake_streams.h"
#include "streams_test.h"

/* A pool over the fake device (fakes/fake_stream_cuda.h). */
static inline crmm_resource *device_pool(const char *params)
{
    crmm_resource *u = fake_device_new(0);
    crmm_resource *p = NULL;
    ck_assert_crmm_ok(crmm_resource_create("pool", params, u, &p));
    crmm_resource_release(u);
    ck_assert(crmm_resource_is_device_accessible(p));
    return p;
}

enum { SYNC, EVENT }; /* the loop tests' _i: stream_reuse=sync, stream_reuse=event */

/* A pool over the fake device in mode SYNC or EVENT (params: the other parameters). */
static inline crmm_resource *pool_in_mode(int mode, const char *params)
{
    char text[256];
    snprintf(text, sizeof text, "%s stream_reuse=%s", params, mode == EVENT ? "event" : "sync");
    return device_pool(text);
}

/* A block of n bytes allocated and freed on s (so free on s's list); its address. */
static inline void *freed_on(crmm_resource *p, size_t n, cudaStream_t s)
{
    void *x = alloc_on(p, n, s);
    free_on(p, x, n, s);
    return x;
}

#endif
