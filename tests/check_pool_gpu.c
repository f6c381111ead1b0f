/* check_pool_gpu.c — the `pool` plugin over `cuda`: the conformance suite, and the stream
 * ordering that only a GPU can show. A stream S is held on purpose (a host function that sleeps,
 * or a gate the test opens: stream_gate_test.h), then S writes 0xAA into a block, and the block
 * is freed on S while that is pending;
 * another stream T gets the block and writes 0xBB. Had the pool not ordered T behind S, S's 0xAA
 * would land last: the block must read 0xBB everywhere. Variants: S destroyed before T asks, S
 * forgotten, per-thread default streams of two threads. Loop tests run four times: _i 0 = sync,
 * 1 = event, 2 and 3 the same with expandable = true. */
#include "build_config.h"
#include <cuda_runtime_api.h>
#include <crmm/pool.h>
#include "blocks_test.h"
#include "conformance.h"
#include "gpu_streams_test.h"
#include "stream_gate_test.h"
#include "streams_test.h"

#define SLOW_MS 300

static const crmm_test_chain gpu_chains[] = {
    {"pool_over_cuda", "[resource.g]\nplugin = cuda\n[resource.p]\nplugin = pool\nupstream = g\ninitial_size = 256MiB\n",
     "p", 1, 0},
    {"pool_with_maximum_over_cuda",
     "[resource.g]\nplugin = cuda\n[resource.p]\nplugin = pool\nupstream = g\ninitial_size = 16MiB\nmaximum_size = 4GiB\n",
     "p", 1, 0},
    {"pool_reuse_by_event_over_cuda",
     "[resource.g]\nplugin = cuda\n[resource.p]\nplugin = pool\nupstream = g\ninitial_size = 64MiB\nstream_reuse = event\n",
     "p", 1, 0},
    {"pool_expandable_over_cuda", "[resource.g]\nplugin = cuda\n[resource.p]\nplugin = pool\nupstream = g\nexpandable = true\n",
     "p", 1, 0},
    {"pool_expandable_with_maximum_over_cuda",
     "[resource.g]\nplugin = cuda\n[resource.p]\nplugin = pool\nupstream = g\nexpandable = true\nmaximum_size = 4GiB\n"
     "release_threshold = 64MiB\nstream_reuse = event\n",
     "p", 1, 0},
};

/* ---- helpers ----------------------------------------------------------------------------- */

static crmm_resource *gpu_pool(const char *params)
{
    crmm_resource *g = crmm_test_create("cuda", "", NULL);
    crmm_resource *p = crmm_test_create("pool", params, g);
    crmm_resource_release(g);
    ck_assert(crmm_resource_is_device_accessible(p));
    return p;
}

enum { SYNC, EVENT, EXPANDABLE_SYNC, EXPANDABLE_EVENT, MODES }; /* the loop tests' _i */

/* gpu_pool with stream_reuse set by mode (SYNC or EVENT), expandable for the EXPANDABLE_ modes. */
static crmm_resource *gpu_pool_in_mode(int mode, const char *params)
{
    char text[256];
    snprintf(text, sizeof text, "%s stream_reuse=%s expandable=%s", params, mode % 2 == EVENT ? "event" : "sync",
             mode >= EXPANDABLE_SYNC ? "true" : "false");
    return gpu_pool(text);
}

/* On `s`: wait SLOW_MS, then fill x with 0xAA. Returns at once. */
static void slow_fill(void *x, size_t n, cudaStream_t s)
{
    hold_stream(s, SLOW_MS);
    ck_assert_int_eq(cudaMemsetAsync(x, 0xAA, n, s), cudaSuccess);
}

/* On `s`: held at gate g until the test opens it, then fill x with 0xAA. Returns at once. */
static void gated_fill(stream_gate *g, void *x, size_t n, cudaStream_t s)
{
    gate_stream(g, s);
    ck_assert_int_eq(cudaMemsetAsync(x, 0xAA, n, s), cudaSuccess);
}

/* ---- ordering between streams -------------------------------------------------------------- */

/* In a pool of 64 MiB: `n` bytes on s, filled behind gate g and freed while the fill is still
 * queued, returned; *rest, the rest of the pool, held on s, so that a request of n bytes on another
 * stream can only get the freed block. */
static void *freed_with_work_pending(crmm_resource *p, stream_gate *g, size_t n, cudaStream_t s, void **rest)
{
    void *a = alloc_on(p, n, s);
    *rest = alloc_on(p, 64 * MiB - n, s);
    gated_fill(g, a, n, s);
    free_on(p, a, n, s);
    return a;
}

CRMM_LOOP_TEST_IN("pool_streams", another_stream_waits_for_the_free, MODES)
{
    crmm_resource *p = gpu_pool_in_mode(_i, "initial_size=64MiB");
    cudaStream_t s = new_stream(), t = new_stream();
    const size_t n = 8 * MiB;
    stream_gate g;
    void *rest, *a = freed_with_work_pending(p, &g, n, s, &rest);
    void *b;
    if (_i % 2 == EVENT) {
        /* t is ordered behind s with an event: the allocation returns while s is held (a pool
         * that synchronized instead would wait at the gate until the case's timeout) */
        b = alloc_on(p, n, t);
        ck_assert(!crmm_test_async_observable() || gate_holds(&g));
    } else {
        gate_open_soon(&g);
        b = alloc_on(p, n, t);
        gate_expect_passed(&g, "allocating s's freed block on t (the pool must synchronize first)");
    }
    ck_assert_ptr_eq(b, a); /* the same memory moved to t: the case that needs the order */
    ck_assert_int_eq(cudaMemsetAsync(b, 0xBB, n, t), cudaSuccess);
    gate_open(&g);
    ck_assert_int_eq(cudaStreamSynchronize(t), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    expect_device_bytes(b, n, 0xBB);
    free_on(p, b, n, t);
    free_on(p, rest, 64 * MiB - n, s);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
    ck_assert_int_eq(cudaStreamDestroy(t), cudaSuccess);
    crmm_resource_release(p);
}

CRMM_TEST_IN("pool_streams", same_stream_reuses_at_once)
{
    crmm_resource *p = gpu_pool("initial_size=64MiB");
    cudaStream_t s = new_stream();
    stream_gate g;
    void *a = alloc_on(p, MiB, s);
    gated_fill(&g, a, MiB, s);
    free_on(p, a, MiB, s);
    void *b = alloc_on(p, MiB, s); /* stream order makes this safe without any wait: s is held */
    ck_assert(!crmm_test_async_observable() || gate_holds(&g));
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(cudaMemsetAsync(b, 0xBB, MiB, s), cudaSuccess);
    gate_open(&g);
    expect_device_bytes(b, MiB, 0xBB);
    free_on(p, b, MiB, s);
    /* cudaStreamLegacy and NULL name the same stream */
    void *c = alloc_on(p, MiB, (cudaStream_t)0x1);
    free_on(p, c, MiB, NULL);
    ck_assert_ptr_eq(alloc_on(p, MiB, NULL), c);
    free_on(p, c, MiB, (cudaStream_t)0x1);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
    crmm_resource_release(p);
}

CRMM_TEST_IN("pool_streams", a_destroyed_stream_breaks_nothing)
{
    /* the default mode (sync): S's handle never reaches CUDA after S is destroyed */
    crmm_resource *p = gpu_pool("initial_size=64MiB");
    cudaStream_t s = new_stream(), t = new_stream();
    const size_t n = 8 * MiB;
    stream_gate g;
    void *rest, *a = freed_with_work_pending(p, &g, n, s, &rest);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess); /* its work is still pending */
    gate_open_soon(&g);
    void *b = alloc_on(p, n, t);
    gate_expect_passed(&g, "allocating a destroyed stream's freed block on t (the pool must synchronize first)");
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess); /* whatever the pool provoked, it cleared */
    ck_assert_int_eq(cudaMemsetAsync(b, 0xBB, n, t), cudaSuccess);
    expect_device_bytes(b, n, 0xBB);
    free_on(p, b, n, t);
    free_on(p, rest, 64 * MiB - n, t);
    /* a new stream, which may well get s's old handle, works as any other */
    cudaStream_t u = new_stream();
    void *c = alloc_on(p, n, u);
    ck_assert_int_eq(cudaMemsetAsync(c, 0xCC, n, u), cudaSuccess);
    expect_device_bytes(c, n, 0xCC);
    free_on(p, c, n, u);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    ck_assert_int_eq(cudaStreamDestroy(u), cudaSuccess);
    ck_assert_int_eq(cudaStreamDestroy(t), cudaSuccess);
    crmm_resource_release(p);
}

CRMM_LOOP_TEST_IN("pool_streams", a_forgotten_stream_hands_its_blocks_to_a_new_one, MODES)
{
    crmm_resource *p = gpu_pool_in_mode(_i, "initial_size=64MiB");
    const size_t n = 8 * MiB;
    cudaStream_t s = new_stream();
    void *a = alloc_on(p, n, s);
    slow_fill(a, n, s);
    free_on(p, a, n, s);
    ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)s));
    ck_assert_int_eq(cudaStreamQuery(s), cudaSuccess); /* it waited for s */
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
    cudaStream_t u = new_stream(); /* often s's handle again */
    void *b = alloc_on(p, n, u);
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(cudaMemsetAsync(b, 0xBB, n, u), cudaSuccess);
    expect_device_bytes(b, n, 0xBB);
    free_on(p, b, n, u);
    /* forgetting a stream the pool never saw, or twice, does nothing */
    ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)u));
    ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)u));
    void *c = alloc_on(p, n, u);
    free_on(p, c, n, u);
    ck_assert_int_eq(cudaStreamDestroy(u), cudaSuccess);
    crmm_resource_release(p);
}

typedef struct ptds_arg { crmm_resource *p; void *block; size_t n; crmm_status st; } ptds_arg;

static void *free_on_own_default_stream(void *arg)
{
    ptds_arg *a = arg;
    a->st = crmm_resource_allocate(a->p, a->n, CRMM_CUDA_STREAM_PER_THREAD, &a->block);
    if (a->st != CRMM_OK)
        return NULL;
    if (cudaLaunchHostFunc(cudaStreamPerThread, sleep_ms, (void *)(uintptr_t)SLOW_MS) != cudaSuccess ||
        cudaMemsetAsync(a->block, 0xAA, a->n, cudaStreamPerThread) != cudaSuccess) {
        a->st = CRMM_ERROR_CUDA;
        return NULL;
    }
    a->st = crmm_resource_deallocate(a->p, a->block, a->n, CRMM_CUDA_STREAM_PER_THREAD);
    return NULL;
}

CRMM_LOOP_TEST_IN("pool_streams", per_thread_default_streams_of_two_threads, MODES)
{
    /* The pool cannot record on another thread's per-thread stream; with no room to grow it must
     * synchronize before handing that thread's block to this one. */
    const size_t n = 16 * MiB;
    crmm_resource *p = gpu_pool_in_mode(_i, "initial_size=16MiB maximum_size=16MiB");
    ptds_arg a = {p, NULL, n, CRMM_ERROR_STATE};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, free_on_own_default_stream, &a), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_crmm_ok(a.st);
    void *b = alloc_on(p, n, cudaStreamPerThread);
    ck_assert_ptr_eq(b, a.block);
    ck_assert_int_eq(cudaMemsetAsync(b, 0xBB, n, cudaStreamPerThread), cudaSuccess);
    expect_device_bytes(b, n, 0xBB);
    free_on(p, b, n, cudaStreamPerThread);
    crmm_resource_release(p);
}

CRMM_LOOP_TEST_IN("pool_streams", many_streams_keep_the_books, MODES)
{
    /* blocks allocated on one stream and freed on another, over 8 streams: every move between
     * streams keeps the figures right, and all memory merges back in the end */
    crmm_resource *p = gpu_pool_in_mode(_i, "initial_size=32MiB");
    enum { S = 8, LIVE = 64 };
    cudaStream_t st[S];
    for (int k = 0; k < S; k++)
        st[k] = new_stream();
    void *live[LIVE] = {0};
    size_t size[LIVE] = {0};
    uint64_t seed = 11;
    for (int step = 0; step < 4000; step++) {
        int k = (int)(crmm_test_rand(&seed) % LIVE);
        cudaStream_t on = st[(seed >> 8) % S];
        if (live[k]) {
            free_on(p, live[k], size[k], on);
            live[k] = NULL;
        } else {
            size[k] = 1 + (size_t)((seed >> 16) % (2 * MiB));
            live[k] = alloc_on(p, size[k], on);
        }
    }
    for (int k = 0; k < LIVE; k++)
        if (live[k])
            free_on(p, live[k], size[k], st[k % S]);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    ck_assert_crmm_ok(crmm_resource_trim(p));
    /* an expandable pool keeps its initial size mapped */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), _i >= EXPANDABLE_SYNC ? 32 * MiB : 0);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    for (int k = 0; k < S; k++)
        ck_assert_int_eq(cudaStreamDestroy(st[k]), cudaSuccess);
    crmm_resource_release(p);
}

/* ---- creation, figures, trim, bad pointers --------------------------------------------------- */

CRMM_TEST_IN("pool_over_cuda", default_initial_size_is_at_most_half_the_memory)
{
    /* half the free memory at creation: other programs may take or give memory back meanwhile,
     * so the exact rule is tested against the scripted driver (check_pool_expandable_use) */
    size_t free_bytes = 0, total = 0;
    ck_assert_int_eq(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
    crmm_resource *p = gpu_pool("");
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);
    ck_assert_msg(reserved > 0 && reserved <= total / 2, "reserved %llu of %zu bytes", (unsigned long long)reserved,
                  total);
    ck_assert_uint_eq(reserved % 256, 0);
    crmm_resource_release(p);

    p = gpu_pool("maximum_size=1GiB"); /* the default never passes the maximum */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), (uint64_t)1 << 30);
    crmm_resource_release(p);
}

CRMM_TEST_IN("pool_over_cuda", figures_and_trim_over_cuda)
{
    /* a statistics layer under the pool shows what the pool holds from upstream and gives back */
    crmm_resource *g = crmm_test_create("cuda", NULL, NULL);
    crmm_resource *up = crmm_test_create("statistics", NULL, g);
    crmm_resource *p = crmm_test_create("pool", "initial_size=64MiB", up);
    crmm_resource_release(g);
    cudaStream_t s = new_stream();
    void *a = alloc_on(p, 1000, s);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 1000);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 64 * MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), 64 * MiB - 1024);
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), 64 * MiB - 1024);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    ck_assert_uint_eq(q(up, CRMM_QUERY_BYTES_IN_USE), 64 * MiB);
    ck_assert_crmm_ok(crmm_resource_trim(p)); /* the chunk is in use: it stays */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 64 * MiB);
    ck_assert_uint_eq(q(up, CRMM_QUERY_BYTES_IN_USE), 64 * MiB);
    free_on(p, a, 1000, s);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 0);
    ck_assert_uint_eq(q(up, CRMM_QUERY_BYTES_IN_USE), 0); /* given back upstream */
    ck_assert_uint_eq(q(up, CRMM_QUERY_ALLOCATIONS_TOTAL), 1);
    void *b = alloc_on(p, 3 * MiB, s); /* grows again */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 3 * MiB);
    ck_assert_uint_eq(q(up, CRMM_QUERY_BYTES_IN_USE), 3 * MiB);
    free_on(p, b, 3 * MiB, s);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
    crmm_resource_release(p);
    crmm_resource_release(up);
}

/* ---- the expandable pool ------------------------------------------------------------------- */

/* Fill device block x of n bytes with `tag` on the default stream. */
static void fill(void *x, size_t n, unsigned char tag)
{
    ck_assert_int_eq(cudaMemset(x, tag, n), cudaSuccess);
}

CRMM_TEST_IN("pool_expandable", expandable_maps_what_it_needs_and_keeps_data_across_growth)
{
    crmm_resource *p = gpu_pool("expandable=true");
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    void *a = alloc_on(p, 1000, NULL);
    uint64_t page = q(p, CRMM_QUERY_BYTES_RESERVED); /* one page: the device's granularity */
    ck_assert_uint_ge(page, 64 * 1024);
    ck_assert_uint_eq(page & (page - 1), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    fill(a, 1000, 0x11);
    void *b = alloc_on(p, 100 * MiB, NULL);
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);
    ck_assert_uint_eq(reserved % page, 0);
    ck_assert_msg(reserved < 100 * MiB + 1024 + page, "reserved %llu for %llu live", (unsigned long long)reserved,
                  (unsigned long long)(100 * MiB + 1024));
    ck_assert_ptr_eq(b, (char *)a + 1024); /* one range: right above a */
    struct cudaPointerAttributes attr;
    memset(&attr, 0, sizeof attr);
    ck_assert_int_eq(cudaPointerGetAttributes(&attr, b), cudaSuccess);
    ck_assert_int_eq(attr.type, cudaMemoryTypeDevice);
    fill(b, 100 * MiB, 0x22);
    expect_device_bytes(a, 1000, 0x11);
    /* a copy across pages mapped by different growth steps */
    ck_assert_int_eq(cudaMemcpy(b, a, 1000, cudaMemcpyDeviceToDevice), cudaSuccess);
    expect_device_bytes(b, 1000, 0x11);
    free_on(p, b, 100 * MiB, NULL);
    ck_assert_crmm_ok(crmm_resource_trim(p)); /* b's pages go; a's page stays */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), page);
    expect_device_bytes(a, 1000, 0x11);
    void *c = alloc_on(p, 50 * MiB, NULL); /* mapped again where b was */
    ck_assert_ptr_eq(c, b);
    fill(c, 50 * MiB, 0x33);
    expect_device_bytes(c, 50 * MiB, 0x33);
    free_on(p, c, 50 * MiB, NULL);
    free_on(p, a, 1000, NULL);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    crmm_resource_release(p);
}

CRMM_TEST_IN("pool_expandable", a_plan_places_blocks_in_its_own_range_with_their_data)
{
    /* a of 3 MiB and b of 1 MiB live together, a freed, c of 2 MiB in a's place, then a request
     * the plan does not know */
    const char *plan = crmm_test_write_file("gpu.plan", "crmm-plan 1\nextent 4194304\nloop none\ncount 3\n"
                                                        "3145728 0\n1048576 3145728\n2097152 0\n");
    char params[4200];
    snprintf(params, sizeof params, "expandable=true plan=%s", plan);
    crmm_resource *p = gpu_pool(params);
    void *a = alloc_on(p, 3 * MiB, NULL), *b = alloc_on(p, MiB, NULL);
    ck_assert_ptr_eq(b, (char *)a + 3 * MiB);
    fill(a, 3 * MiB, 0x61);
    fill(b, MiB, 0x62);
    free_on(p, a, 3 * MiB, NULL);
    void *c = alloc_on(p, 2 * MiB, NULL);
    ck_assert_ptr_eq(c, a);
    fill(c, 2 * MiB, 0x63);
    void *d = alloc_on(p, 5000, NULL); /* the pool's own range */
    ck_assert((char *)d < (char *)a || (char *)d >= (char *)a + 4 * MiB);
    fill(d, 5000, 0x64);
    expect_device_bytes(b, MiB, 0x62);
    expect_device_bytes(c, 2 * MiB, 0x63);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_HITS), 3);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_MISSES), 1);
    ck_assert_uint_ge(q(p, CRMM_QUERY_BYTES_RESERVED), 4 * MiB);
    free_on(p, b, MiB, NULL);
    free_on(p, c, 2 * MiB, NULL);
    free_on(p, d, 5000, NULL);
    ck_assert_crmm_ok(crmm_resource_trim(p)); /* every page goes back, the plan's too */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    crmm_resource_release(p);
}

CRMM_TEST_IN("pool_expandable", expandable_moves_freed_pages_to_where_they_are_needed)
{
    /* a free hole too small for the next request: its pages are mapped again above, so the pool
     * holds no more than the live bytes (rounded to pages) */
    crmm_resource *p = gpu_pool("expandable=true");
    void *x = alloc_on(p, 30 * MiB, NULL), *y = alloc_on(p, MiB, NULL);
    fill(y, MiB, 0x44);
    free_on(p, x, 30 * MiB, NULL);
    void *z = alloc_on(p, 40 * MiB, NULL);
    fill(z, 40 * MiB, 0x55);
    uint64_t page = q(p, CRMM_QUERY_UPSTREAM_BLOCKS) ? q(p, CRMM_QUERY_BYTES_RESERVED) / q(p, CRMM_QUERY_UPSTREAM_BLOCKS) : 1;
    ck_assert_msg(q(p, CRMM_QUERY_BYTES_RESERVED_PEAK) <= 41 * MiB + 2 * page, "peak reserved %llu",
                  (unsigned long long)q(p, CRMM_QUERY_BYTES_RESERVED_PEAK));
    expect_device_bytes(y, MiB, 0x44);
    expect_device_bytes(z, 40 * MiB, 0x55);
    free_on(p, y, MiB, NULL);
    free_on(p, z, 40 * MiB, NULL);
    crmm_resource_release(p);
}

CRMM_TEST_IN("pool_expandable", a_move_without_waiting_leaves_queued_work_its_memory)
{
    /* x is filled slowly on s and copied out, then freed on s while that work is still queued;
     * a growth on s past the mark takes x's pages for z without waiting for the device. The
     * queued work still reads and writes x's old addresses: they must stay mapped to the same
     * memory until it has run (unmapped, the fill and the copy would fault), and z's own writes,
     * queued later on s, come after it. */
    crmm_resource *p = gpu_pool("expandable=true");
    cudaStream_t s = new_stream();
    const size_t n = 30 * MiB;
    void *keep = NULL;
    ck_assert_cuda(cudaMalloc(&keep, n));
    void *x = alloc_on(p, n, s), *y = alloc_on(p, MiB, s);
    stream_gate g;
    gated_fill(&g, x, n, s);
    ck_assert_cuda(cudaMemcpyAsync(keep, x, n, cudaMemcpyDeviceToDevice, s));
    free_on(p, x, n, s);
    uint64_t syncs = q(p, CRMM_QUERY_POOL_DEVICE_SYNCS), created = q(p, CRMM_QUERY_POOL_PAGES_CREATED);
    void *z = alloc_on(p, 40 * MiB, s); /* s is held: a move that waited would not return */
    ck_assert(!crmm_test_async_observable() || gate_holds(&g));
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_DEVICE_SYNCS), syncs);
    ck_assert_uint_gt(q(p, CRMM_QUERY_POOL_PAGES_LENT), 0);
    uint64_t page = q(p, CRMM_QUERY_BYTES_RESERVED) / q(p, CRMM_QUERY_UPSTREAM_BLOCKS);
    /* only what x's pages could not give was made anew */
    ck_assert_uint_le(q(p, CRMM_QUERY_POOL_PAGES_CREATED) - created, (40 * MiB - n) / page + 2);
    ck_assert_cuda(cudaMemsetAsync(z, 0x55, 40 * MiB, s));
    gate_open(&g);
    ck_assert_cuda(cudaStreamSynchronize(s));
    expect_device_bytes(keep, n, 0xAA); /* the fill and the copy ran on x's memory before z's */
    expect_device_bytes(z, 40 * MiB, 0x55);
    /* the old addresses go at the next growth once the work is done, or at trim */
    free_on(p, z, 40 * MiB, s);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 0);
    free_on(p, y, MiB, s);
    ck_assert_cuda(cudaFree(keep));
    ck_assert_cuda(cudaStreamDestroy(s));
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    crmm_resource_release(p);
}

CRMM_TEST_IN("pool_expandable", expandable_out_of_memory_and_maximum)
{
    crmm_resource *p = gpu_pool("expandable=true maximum_size=64MiB");
    void *x = (void *)1;
    ck_assert_crmm(crmm_resource_allocate(p, (size_t)1 << 50, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(x);
    ck_assert_crmm(crmm_resource_allocate(p, 65 * MiB, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_msg(strstr(crmm_last_error(), "maximum size"), "%s", crmm_last_error());
    void *a = alloc_on(p, 64 * MiB, NULL); /* the whole maximum still serves */
    fill(a, 64 * MiB, 0x66);
    expect_device_bytes(a, 64 * MiB, 0x66);
    free_on(p, a, 64 * MiB, NULL);
    crmm_resource_release(p);
    /* the device's own limit: more than it has fails cleanly, and the pool still works */
    size_t free_bytes = 0, total = 0;
    ck_assert_int_eq(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
    p = gpu_pool("expandable=true");
    ck_assert_crmm(crmm_resource_allocate(p, total + total / 4, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    a = alloc_on(p, MiB, NULL);
    free_on(p, a, MiB, NULL);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    crmm_resource_release(p);
}

CRMM_TEST_IN("pool_over_cuda", bad_pointers_over_cuda)
{
    crmm_resource *p = gpu_pool("initial_size=16MiB");
    cudaStream_t s = new_stream();
    void *a = alloc_on(p, 4096, s);
    void *other = NULL;
    ck_assert_int_eq(cudaMalloc(&other, 4096), cudaSuccess);
    ck_assert_crmm(crmm_resource_deallocate(p, other, 4096, (crmm_cuda_stream_t)s), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "not allocated by this pool"), "%s", crmm_last_error());
    ck_assert_int_eq(cudaFree(other), cudaSuccess);
    free_on(p, a, 4096, s);
    ck_assert_crmm(crmm_resource_deallocate(p, a, 4096, (crmm_cuda_stream_t)s), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "already free"), "%s", crmm_last_error());
    ck_assert_ptr_eq(alloc_on(p, 4096, s), a);
    free_on(p, a, 4096, s);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
    crmm_resource_release(p);
}

int main(void)
{
    CRMM_TEST_GPU_GATE(1);
    Suite *s = suite_create("pool_gpu");
    crmm_conformance_add(s, gpu_chains, (int)(sizeof gpu_chains / sizeof gpu_chains[0]));

    crmm_test_tcase(s, "pool_streams", CRMM_TEST_GPU_TIMEOUT);
    crmm_test_tcase(s, "pool_over_cuda", CRMM_TEST_GPU_TIMEOUT);
    crmm_test_tcase(s, "pool_expandable", CRMM_TEST_GPU_TIMEOUT);
    return crmm_test_run(s);
}
