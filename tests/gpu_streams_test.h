/* gpu_streams_test.h — what the GPU suites of stream ordering (check_pool_gpu, check_arena_gpu,
 * check_rmm_resources_gpu) share: a non-blocking stream, a stream kept busy by a host function
 * that sleeps (so that a missing wait shows as the wrong bytes), and every byte of a device block
 * checked. */
#ifndef CRMM_TESTS_GPU_STREAMS_TEST_H
#define CRMM_TESTS_GPU_STREAMS_TEST_H

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "test_support.h"

/* In a test: a new non-blocking stream. */
static inline cudaStream_t new_stream(void)
{
    cudaStream_t s;
    ck_assert_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
}

/* A host function that sleeps `arg` milliseconds (no CUDA call in it). */
static inline void CUDART_CB sleep_ms(void *arg) { usleep((useconds_t)(uintptr_t)arg * 1000); }

/* In a test: `s` busy for `ms` milliseconds before whatever is queued on it next. */
static inline void hold_stream(cudaStream_t s, unsigned ms)
{
    ck_assert_cuda(cudaLaunchHostFunc(s, sleep_ms, (void *)(uintptr_t)ms));
}

/* In a test: once the device is idle, every byte of device block p (n bytes) is v. */
static inline void expect_device_bytes(const void *p, size_t n, unsigned char v)
{
    ck_assert_cuda(cudaDeviceSynchronize());
    unsigned char *h = malloc(n);
    ck_assert_ptr_nonnull(h);
    ck_assert_cuda(cudaMemcpy(h, p, n, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    while (bad < n && h[bad] == v)
        bad++;
    unsigned got = bad < n ? h[bad] : v;
    free(h);
    if (bad < n)
        ck_abort_msg("byte %zu of %zu is %#x, expected %#x: the streams were not ordered", bad, n, got, v);
}

#endif
