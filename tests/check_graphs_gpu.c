/* check_graphs_gpu.c — allocators under CUDA graph capture on a GPU (skips without one).
 *
 * The captured work is copies and memsets on one stream: a sequence that allocates temporaries,
 * writes them, frees them and allocates again inside the capture, and writes its result into an
 * output buffer. For the pool (chunked with each stream_reuse, and expandable), async, and a chain
 * of every adaptor over an expandable pool: the sequence is captured in the global mode (the
 * strictest), the graph's output equals the same sequence run eagerly over 1000 replays, buffers
 * allocated after the capture and filled are never written by a replay (every byte checked), and
 * for the pools the memory the graph holds comes back, by the pool's own counters, once the graph
 * is destroyed. arena and fixed_size refuse a captured stream, and the capture stays valid.
 * docs/cuda-graphs.md states the rule. */
#include "config.h"
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime_api.h>
#include "test_support.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define N MiB          /* bytes of each buffer */
#define REPLAYS 1000
#define VICTIMS 8

typedef struct chain { const char *name; const char *layers[8][2]; int is_pool; } chain;

/* Bottom layer first; each layer over the one before (the first over nothing). */
static const chain chains[] = {
    {"pool (chunks, sync)", {{"cuda", ""}, {"pool", "initial_size=4MiB stream_reuse=sync"}}, 1},
    {"pool (chunks, event)", {{"cuda", ""}, {"pool", "initial_size=4MiB stream_reuse=event"}}, 1},
    {"pool (expandable)", {{"cuda", ""}, {"pool", "expandable=true"}}, 1},
    {"async", {{"async", ""}}, 0},
    {"adaptors over an expandable pool",
     {{"cuda", ""}, {"pool", "expandable=true"}, {"aligned", "alignment=4096 alignment_threshold=1KiB"},
      {"failure_callback", ""}, {"limiting", "allocation_limit=1GiB"}, {"tracking", ""},
      {"logging", "file=/dev/null"}, {"statistics", ""}},
     1},
};
#define CHAINS ((int)(sizeof chains / sizeof chains[0]))

/* The chain's top resource; *pool: its pool layer (a borrowed pointer), or NULL. */
static crmm_resource *build(const chain *c, crmm_resource **pool)
{
    crmm_resource *top = NULL;
    *pool = NULL;
    for (int i = 0; i < 8 && c->layers[i][0]; i++) {
        crmm_resource *r = crmm_test_create(c->layers[i][0], c->layers[i][1], top);
        if (top)
            crmm_resource_release(top);
        top = r;
        if (strcmp(c->layers[i][0], "pool") == 0)
            *pool = r;
    }
    return top;
}

static void *alloc_on(crmm_resource *r, size_t n, cudaStream_t s)
{
    void *x = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(r, n, (crmm_cuda_stream_t)s, &x));
    ck_assert_ptr_nonnull(x);
    return x;
}

static void free_on(crmm_resource *r, void *x, size_t n, cudaStream_t s)
{
    ck_assert_crmm_ok(crmm_resource_deallocate(r, x, n, (crmm_cuda_stream_t)s));
}

/* The work: out = f(in), through temporaries allocated and freed on s. */
static void step(crmm_resource *r, cudaStream_t s, const unsigned char *in, unsigned char *out)
{
    unsigned char *t1 = alloc_on(r, N, s);
    ck_assert_cuda(cudaMemcpyAsync(t1, in, N, cudaMemcpyDeviceToDevice, s));
    unsigned char *t2 = alloc_on(r, N, s);
    ck_assert_cuda(cudaMemsetAsync(t2, 0x11, N, s));
    ck_assert_cuda(cudaMemcpyAsync(t2, t1, N / 2, cudaMemcpyDeviceToDevice, s));
    free_on(r, t1, N, s);
    unsigned char *t3 = alloc_on(r, N, s); /* may take t1's block */
    ck_assert_cuda(cudaMemcpyAsync(t3, t2, N, cudaMemcpyDeviceToDevice, s));
    ck_assert_cuda(cudaMemsetAsync(t3 + N / 2, 0x22, N / 4, s));
    free_on(r, t2, N, s);
    unsigned char *t4 = alloc_on(r, 3 * N, s); /* larger: growth under capture for a fresh pool */
    ck_assert_cuda(cudaMemcpyAsync(t4 + N, t3, N, cudaMemcpyDeviceToDevice, s));
    ck_assert_cuda(cudaMemcpyAsync(out, t4 + N, N, cudaMemcpyDeviceToDevice, s));
    free_on(r, t3, N, s);
    free_on(r, t4, 3 * N, s);
}

static void read_back(unsigned char *host, const unsigned char *dev, cudaStream_t s)
{
    ck_assert_cuda(cudaMemcpyAsync(host, dev, N, cudaMemcpyDeviceToHost, s));
    ck_assert_cuda(cudaStreamSynchronize(s));
}

/* Wait (up to a minute) until the pool's free bytes reach `at_least`: CUDA runs a graph's user
 * object destructor on a thread of its own after the graph is destroyed. */
static uint64_t wait_for_free(crmm_resource *pool, uint64_t at_least)
{
    uint64_t now = 0;
    for (int i = 0; i < 60000; i++) {
        now = crmm_test_query(pool, CRMM_QUERY_BYTES_FREE);
        if (now >= at_least)
            break;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    return now;
}

START_TEST(replays_equal_eager_and_touch_nothing_else)
{
    const chain *c = &chains[_i];
    crmm_resource *pool;
    crmm_resource *r = build(c, &pool);
    cudaStream_t s;
    ck_assert_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned char *in = alloc_on(r, N, s), *out = alloc_on(r, N, s);
    unsigned char *host = malloc(N), *expected = malloc(N), *got = malloc(N);
    ck_assert_ptr_nonnull(host);
    ck_assert_ptr_nonnull(expected);
    ck_assert_ptr_nonnull(got);
    for (size_t i = 0; i < N; i++)
        host[i] = (unsigned char)(i * 7 + 3);
    ck_assert_cuda(cudaMemcpyAsync(in, host, N, cudaMemcpyHostToDevice, s));

    /* eager */
    step(r, s, in, out);
    read_back(expected, out, s);

    /* captured */
    ck_assert_cuda(cudaMemsetAsync(out, 0, N, s));
    ck_assert_cuda(cudaStreamSynchronize(s));
    cudaGraph_t graph;
    ck_assert_cuda(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    step(r, s, in, out);
    ck_assert_cuda(cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t exec;
    ck_assert_cuda(cudaGraphInstantiate(&exec, graph, 0));

    /* buffers allocated after the capture, filled: no replay may write them */
    unsigned char *victims[VICTIMS];
    for (int v = 0; v < VICTIMS; v++) {
        victims[v] = alloc_on(r, v % 2 ? 3 * N : N, s);
        ck_assert_cuda(cudaMemsetAsync(victims[v], 0xEE, v % 2 ? 3 * N : N, s));
    }
    for (int k = 0; k < REPLAYS; k++) {
        ck_assert_cuda(cudaMemsetAsync(out, 0, N, s));
        ck_assert_cuda(cudaGraphLaunch(exec, s));
        if (k % 100 == 99 || k == 0) {
            read_back(got, out, s);
            ck_assert_msg(memcmp(got, expected, N) == 0, "%s: replay %d differs from eager execution", c->name, k);
        }
    }
    ck_assert_cuda(cudaStreamSynchronize(s));
    for (int v = 0; v < VICTIMS; v++) {
        size_t n = v % 2 ? 3 * N : N;
        unsigned char *h = malloc(n);
        ck_assert_ptr_nonnull(h);
        ck_assert_cuda(cudaMemcpy(h, victims[v], n, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(h[i] == 0xEE, "%s: a replay wrote byte %zu of a buffer allocated after the capture", c->name, i);
        free(h);
        free_on(r, victims[v], n, s);
    }
    ck_assert_cuda(cudaStreamSynchronize(s));

    /* the graph holds its temporaries until it is destroyed */
    if (pool) {
        uint64_t reserved = crmm_test_query(pool, CRMM_QUERY_BYTES_RESERVED);
        uint64_t free_now = crmm_test_query(pool, CRMM_QUERY_BYTES_FREE);
        /* t1, t2 and t4 at least (t3 may have taken t1's block) */
        ck_assert_uint_le(free_now + 5 * N, reserved);
        ck_assert_cuda(cudaGraphExecDestroy(exec));
        ck_assert_cuda(cudaGraphDestroy(graph));
        uint64_t after = wait_for_free(pool, free_now + 5 * N);
        ck_assert_msg(after >= free_now + 5 * N, "%s: the graph's blocks did not come back (%llu free, held %llu)",
                      c->name, (unsigned long long)after, (unsigned long long)free_now);
    } else {
        ck_assert_cuda(cudaGraphExecDestroy(exec));
        ck_assert_cuda(cudaGraphDestroy(graph));
    }
    free_on(r, in, N, s);
    free_on(r, out, N, s);
    ck_assert_cuda(cudaStreamSynchronize(s));
    ck_assert_cuda(cudaStreamDestroy(s));
    free(host), free(expected), free(got);
    crmm_resource_release(r);
}
END_TEST

/* Capture in each mode: the pool allocates and frees on the captured stream, the capture ends
 * without error. */
START_TEST(pool_in_every_capture_mode)
{
    static const enum cudaStreamCaptureMode modes[] = {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                                                       cudaStreamCaptureModeRelaxed};
    crmm_resource *cuda = crmm_test_create("cuda", "", NULL);
    crmm_resource *p = crmm_test_create("pool", _i % 2 ? "expandable=true" : "initial_size=2MiB", cuda);
    crmm_resource_release(cuda);
    cudaStream_t s;
    ck_assert_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t graph;
    ck_assert_cuda(cudaStreamBeginCapture(s, modes[_i / 2]));
    void *x = alloc_on(p, 8 * MiB, s); /* grows */
    ck_assert_cuda(cudaMemsetAsync(x, 1, 8 * MiB, s));
    free_on(p, x, 8 * MiB, s);
    ck_assert_cuda(cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t exec;
    ck_assert_cuda(cudaGraphInstantiate(&exec, graph, 0));
    ck_assert_cuda(cudaGraphLaunch(exec, s));
    ck_assert_cuda(cudaStreamSynchronize(s));
    ck_assert_cuda(cudaGraphExecDestroy(exec));
    ck_assert_cuda(cudaGraphDestroy(graph));
    ck_assert_cuda(cudaStreamDestroy(s));
    crmm_resource_release(p);
}
END_TEST

/* arena and fixed_size refuse a captured stream without a CUDA call that would invalidate the
 * capture. */
START_TEST(refusing_plugins_leave_the_capture_valid)
{
    static const char *const plugins[][2] = {{"arena", "arena_size=64MiB"},
                                             {"fixed_size", "block_size=64KiB blocks_to_preallocate=4"}};
    crmm_resource *cuda = crmm_test_create("cuda", "", NULL);
    crmm_resource *r = crmm_test_create(plugins[_i][0], plugins[_i][1], cuda);
    crmm_resource_release(cuda);
    cudaStream_t s;
    ck_assert_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t graph;
    ck_assert_cuda(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    void *x = NULL;
    ck_assert_crmm(crmm_resource_allocate(r, 4 * KiB, (crmm_cuda_stream_t)s, &x), CRMM_ERROR_UNSUPPORTED);
    ck_assert_cuda(cudaStreamEndCapture(s, &graph));
    ck_assert_cuda(cudaGraphDestroy(graph));
    ck_assert_cuda(cudaStreamDestroy(s));
    crmm_resource_release(r);
}
END_TEST

int main(void)
{
    int rc = crmm_test_gpu_gate(1);
    if (rc)
        return rc;
    crmm_graph_capture_enable(true); /* as a program that captures must say */
    Suite *s = suite_create("graphs_gpu");
    TCase *tc = tcase_create("capture");
    tcase_set_timeout(tc, CRMM_TEST_GPU_TIMEOUT);
    tcase_add_loop_test(tc, replays_equal_eager_and_touch_nothing_else, 0, CHAINS);
    tcase_add_loop_test(tc, pool_in_every_capture_mode, 0, 6);
    tcase_add_loop_test(tc, refusing_plugins_leave_the_capture_valid, 0, 2);
    suite_add_tcase(s, tc);
    return crmm_test_run(s);
}
