/* streams_buffers_gpu_test.h — what the GPU suites of streams and buffers
 * (check_streams_buffers_gpu, check_device_buffer_gpu, check_streams_buffers_2gpu) share: a gate
 * that holds a stream until the test opens it, device memory made, read and filled, pinned host
 * memory, a short test string, and a recording resource of stream-ordered device memory. */
#ifndef CRMM_TESTS_STREAMS_BUFFERS_GPU_TEST_H
#define CRMM_TESTS_STREAMS_BUFFERS_GPU_TEST_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "probe_resource.h"
#include "stream_gate_test.h"
#include "test_support.h"

/* Read device memory on the legacy default stream (not ordered behind non-blocking streams). */
static inline void read_device(void *host, const void *dev, size_t n)
{
    ck_assert_cuda(cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost));
}

static inline void *device_zeros(size_t n)
{
    void *p;
    ck_assert_cuda(cudaMalloc(&p, n));
    ck_assert_cuda(cudaMemset(p, 0, n));
    ck_assert_cuda(cudaDeviceSynchronize()); /* setup done before any other stream uses p */
    return p;
}

static inline void *device_from(const void *host, size_t n)
{
    void *p;
    ck_assert_cuda(cudaMalloc(&p, n));
    ck_assert_cuda(cudaMemcpy(p, host, n, cudaMemcpyHostToDevice));
    ck_assert_cuda(cudaDeviceSynchronize());
    return p;
}

static inline void *pinned(size_t n)
{
    void *p;
    ck_assert_cuda(cudaMallocHost(&p, n));
    memset(p, 0, n);
    return p;
}

static const char DATA[] = "the quick brown fox"; /* 20 bytes with its NUL */
#define NDATA sizeof DATA

/* ---- a recording resource: a probe (probe_resource.h) over cudaMallocAsync and cudaFreeAsync ---- */

static inline crmm_status stream_ordered_get(void **ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    return crmm_cuda_status(cudaMallocAsync(ptr, bytes, stream), "cudaMallocAsync");
}

static inline crmm_status stream_ordered_put(void *ptr, crmm_cuda_stream_t stream)
{
    return crmm_cuda_status(cudaFreeAsync(ptr, stream), "cudaFreeAsync");
}

static inline int current_device_or_minus_1(void)
{
    int dev = -1;
    cudaGetDevice(&dev);
    return dev;
}

static const probe_memory stream_ordered_memory = {stream_ordered_get, stream_ordered_put, current_device_or_minus_1};

/* In a test: a recording resource of device memory of `device`. */
static inline probe_resource *recording_new(int device)
{
    return probe_resource_new(&stream_ordered_memory, CRMM_RESOURCE_DEVICE_ACCESSIBLE, device);
}

#endif
