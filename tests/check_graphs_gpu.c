/* check_graphs_gpu.c — allocators under CUDA graph capture on a GPU (skips without one). For the
 * pool (chunked with each stream_reuse, and expandable; graph_pool shared and private), arena,
 * fixed_size, binning, async, and every adaptor over an expandable pool, a sequence that
 * allocates, writes and frees temporaries and writes an output buffer is captured in the global
 * mode: the graph's output equals the eager run over 1000 replays, buffers allocated after the
 * capture are never written by a replay, and the graph's memory is not free while it lives and
 * comes back once it is destroyed (docs/cuda-graphs.md). */
#include "build_config.h"
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime_api.h>
#include "streams_test.h" /* alloc_on, free_on, KiB, MiB */

#define N MiB          /* bytes of each buffer */
#define REPLAYS 1000
#define VICTIMS 8

/* holder: the layer whose BYTES_FREE shows the graph's memory held (NULL: none to ask), and at
 * least how many N it holds (every one may reuse t1's block for t3 within the capture: t1, t2, t3
 * and t4 of 3 N hold at least 5 N, and fixed_size's blocks are 4 MiB; binning puts t4 in a 4 MiB
 * bin). */
typedef struct chain { const char *name; const char *layers[8][2]; const char *holder; int held; } chain;

/* Bottom layer first; each layer over the one before (the first over nothing). */
static const chain chains[] = {
    {"pool (chunks, sync)", {{"cuda", ""}, {"pool", "initial_size=4MiB stream_reuse=sync"}}, "pool", 5},
    {"pool (chunks, event)", {{"cuda", ""}, {"pool", "initial_size=4MiB stream_reuse=event"}}, "pool", 5},
    {"pool (expandable)", {{"cuda", ""}, {"pool", "expandable=true"}}, "pool", 5},
    {"pool (chunks, graph_pool=private)", {{"cuda", ""}, {"pool", "initial_size=4MiB graph_pool=private"}}, "pool", 5},
    {"pool (expandable, graph_pool=private)", {{"cuda", ""}, {"pool", "expandable=true graph_pool=private"}}, "pool", 5},
    {"arena", {{"cuda", ""}, {"arena", "arena_size=64MiB"}}, "arena", 5},
    {"fixed_size", {{"cuda", ""}, {"fixed_size", "block_size=4MiB blocks_to_preallocate=4"}}, "fixed_size", 6},
    {"binning", {{"cuda", ""}, {"binning", "bins=1MiB:4MiB blocks_to_preallocate=4"}}, "binning", 6},
    {"async", {{"async", ""}}, NULL, 0},
    {"adaptors over an expandable pool",
     {{"cuda", ""}, {"pool", "expandable=true"}, {"aligned", "alignment=4096 alignment_threshold=1KiB"},
      {"failure_callback", ""}, {"limiting", "allocation_limit=1GiB"}, {"tracking", ""},
      {"logging", "file=/dev/null"}, {"statistics", ""}},
     "pool", 5},
};
#define CHAINS ((int)(sizeof chains / sizeof chains[0]))

/* The chain's top resource; *holder: its layer c->holder (a borrowed pointer), or NULL. */
static crmm_resource *build(const chain *c, crmm_resource **holder)
{
    crmm_resource *top = NULL;
    *holder = NULL;
    for (int i = 0; i < 8 && c->layers[i][0]; i++) {
        crmm_resource *r = crmm_test_create(c->layers[i][0], c->layers[i][1], top);
        if (top)
            crmm_resource_release(top);
        top = r;
        if (c->holder && strcmp(c->layers[i][0], c->holder) == 0)
            *holder = r;
    }
    return top;
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

/* Wait (up to a minute) until the holder's free bytes reach `at_least`: CUDA runs a graph's user
 * object destructor on a thread of its own after the graph is destroyed. Arena and fixed_size take
 * a destroyed graph's blocks back at their next allocation: each round makes one of each size. */
static uint64_t wait_for_free(crmm_resource *r, crmm_resource *holder, cudaStream_t s, uint64_t at_least)
{
    uint64_t now = 0;
    for (int i = 0; i < 60000; i++) {
        free_on(r, alloc_on(r, N, s), N, s);
        free_on(r, alloc_on(r, 3 * N, s), 3 * N, s);
        now = crmm_test_query(holder, CRMM_QUERY_BYTES_FREE);
        if (now >= at_least)
            break;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    return now;
}

CRMM_LOOP_TEST(replays_equal_eager_and_touch_nothing_else, CHAINS)
{
    const chain *c = &chains[_i];
    crmm_resource *holder;
    crmm_resource *r = build(c, &holder);
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
    if (holder) {
        uint64_t held = (uint64_t)c->held * N;
        uint64_t reserved = crmm_test_query(holder, CRMM_QUERY_BYTES_RESERVED);
        uint64_t free_now = crmm_test_query(holder, CRMM_QUERY_BYTES_FREE);
        ck_assert_uint_le(free_now + held, reserved);
        ck_assert_cuda(cudaGraphExecDestroy(exec));
        ck_assert_cuda(cudaGraphDestroy(graph));
        uint64_t after = wait_for_free(r, holder, s, free_now + held);
        ck_assert_msg(after >= free_now + held, "%s: the graph's blocks did not come back (%llu free, held %llu)",
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

/* Capture in each mode: the pool (chunked, expandable), arena and fixed_size allocate (growing
 * where they can) and free on the captured stream, the capture ends without error, and the graph
 * runs: its output holds what it copied. */
static const char *const moded[][2] = {
    {"pool", "initial_size=2MiB"}, {"pool", "expandable=true"}, {"pool", "expandable=true graph_pool=private"},
    {"arena", "arena_size=64MiB"},
    {"fixed_size", "block_size=8MiB blocks_to_preallocate=1"},
};
#define MODED ((int)(sizeof moded / sizeof moded[0]))

CRMM_LOOP_TEST(every_capture_mode, 3 * MODED)
{
    static const enum cudaStreamCaptureMode modes[] = {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                                                       cudaStreamCaptureModeRelaxed};
    crmm_resource *cuda = crmm_test_create("cuda", "", NULL);
    crmm_resource *p = crmm_test_create(moded[_i % MODED][0], moded[_i % MODED][1], cuda);
    crmm_resource_release(cuda);
    cudaStream_t s;
    ck_assert_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t graph;
    ck_assert_cuda(cudaStreamBeginCapture(s, modes[_i / MODED]));
    void *x = alloc_on(p, 8 * MiB, s); /* the pools and fixed_size grow (its chunk is in use) */
    void *y = alloc_on(p, 8 * MiB, s);
    ck_assert_cuda(cudaMemsetAsync(x, 1, 8 * MiB, s));
    ck_assert_cuda(cudaMemcpyAsync(y, x, 8 * MiB, cudaMemcpyDeviceToDevice, s));
    ck_assert_cuda(cudaMemsetAsync(x, 2, 8 * MiB, s)); /* y overlapping x would read 2s back */
    free_on(p, x, 8 * MiB, s);
    ck_assert_cuda(cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t exec;
    ck_assert_cuda(cudaGraphInstantiate(&exec, graph, 0));
    ck_assert_cuda(cudaGraphLaunch(exec, s));
    ck_assert_cuda(cudaStreamSynchronize(s));
    unsigned char *host = malloc(8 * MiB);
    ck_assert_ptr_nonnull(host);
    ck_assert_cuda(cudaMemcpy(host, y, 8 * MiB, cudaMemcpyDeviceToHost));
    size_t i = 0;
    while (i < 8 * MiB && host[i] == 1)
        i++;
    ck_assert_msg(i == 8 * MiB, "%s %s, mode %d: byte %zu of the graph's output is %u", moded[_i % MODED][0],
                  moded[_i % MODED][1], _i / MODED, i, i < 8 * MiB ? host[i] : 1u);
    free(host);
    free_on(p, y, 8 * MiB, s); /* after the capture: held until the graph goes */
    ck_assert_cuda(cudaGraphExecDestroy(exec));
    ck_assert_cuda(cudaGraphDestroy(graph));
    ck_assert_cuda(cudaStreamDestroy(s));
    crmm_resource_release(p);
}

int main(void)
{
    CRMM_TEST_GPU_GATE(1);
    crmm_graph_capture_enable(true); /* as a program that captures must say */
    return crmm_test_main("graphs_gpu", CRMM_TEST_GPU_TIMEOUT);
}
