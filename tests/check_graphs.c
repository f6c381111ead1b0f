/* check_graphs.c — allocators on a stream under CUDA graph capture, on the CPU, against the
 * scripted CUDA of fake_vmm.h and fake_capture.h.
 *
 * A stream can be put under capture into a fake graph; every call that capture forbids (waiting
 * for the device, an event on the captured stream, cudaMalloc or mapping memory in the global
 * mode) is counted, and the graph's user objects are released, destructors and all, when the
 * test destroys the graph. So the tests state that allocating and freeing under capture makes no
 * forbidden call, and that memory the graph allocated or freed is not handed to anyone else until
 * the graph is destroyed, and is then (docs/cuda-graphs.md). The pool runs in its three forms:
 * growing by chunks with stream_reuse = sync and = event, and expandable. */
#include "config.h"
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <crmm/pool.h>
#include "fakes/fake_capture.h"
#include "fakes/fake_vmm.h"
#include "malloc_fail.h"
#include "test_support.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define PAGE (64 * KiB)
#define DEVICE_MEMORY (256 * MiB)

/* ---- cudaMalloc and cudaFree, for the cuda plugin: host memory, counted ------------------- */

static int mallocs, frees;

cudaError_t cudaMalloc(void **ptr, size_t size)
{
    cudaError_t e = fake_capture_call("cudaMalloc", FAKE_CALL_UNSAFE, NULL);
    if (e != cudaSuccess)
        return e;
    mallocs++;
    *ptr = aligned_alloc(256, (size + 255) & ~(size_t)255);
    return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *ptr)
{
    cudaError_t e = fake_capture_call("cudaFree", FAKE_CALL_UNSAFE, NULL);
    if (e != cudaSuccess)
        return e;
    frees++;
    free(ptr);
    return cudaSuccess;
}

/* ---- the rest of the scripted runtime the plugins below call --------------------------------- */

static int prefetches;

cudaError_t cudaStreamGetId(cudaStream_t s, unsigned long long *id)
{
    *id = (unsigned long long)(uintptr_t)s + 1;
    return fake_capture_call("cudaStreamGetId", FAKE_CALL_STREAM, s); /* CUDA refuses a captured stream's id */
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    (void)attr, (void)device;
    *value = 1;
    return cudaSuccess;
}

cudaError_t cudaMemPrefetchAsync(const void *ptr, size_t bytes, struct cudaMemLocation to, unsigned int flags,
                                 cudaStream_t s)
{
    (void)ptr, (void)bytes, (void)to, (void)flags;
    prefetches++;
    return fake_capture_call("cudaMemPrefetchAsync", FAKE_CALL_STREAM, s);
}

/* ---- the pools ------------------------------------------------------------------------------ */

enum { CHUNKS_SYNC, CHUNKS_EVENT, EXPANDABLE, FORMS };
static const char *const form_names[FORMS] = {"chunks, stream_reuse=sync", "chunks, stream_reuse=event", "expandable"};

/* A pool in form `form` with `params`: the chunked forms over the cuda plugin (cudaMalloc above),
 * the expandable one over the scripted driver. */
static crmm_resource *pool_in_form(int form, const char *params)
{
    fake_vmm_reset(PAGE, DEVICE_MEMORY);
    char text[256];
    crmm_resource *p = NULL;
    if (form == EXPANDABLE) {
        snprintf(text, sizeof text, "%s", params);
        ck_assert_crmm_ok(fake_vmm_expandable_pool(text, &p));
        return p;
    }
    snprintf(text, sizeof text, "%s stream_reuse=%s", params, form == CHUNKS_EVENT ? "event" : "sync");
    crmm_resource *cuda = crmm_test_create("cuda", "", NULL);
    ck_assert_crmm_ok(crmm_resource_create("pool", text, cuda, &p));
    crmm_resource_release(cuda);
    return p;
}

static cudaStream_t stream_n(int n) { return (cudaStream_t)(uintptr_t)(0x1000 + 0x100 * n); }

static void *alloc_on(crmm_resource *p, size_t n, cudaStream_t s)
{
    void *x = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(p, n, (crmm_cuda_stream_t)s, &x));
    memset(x, 0x5A, n); /* an unmapped page would crash here */
    return x;
}

static void free_on(crmm_resource *p, void *x, size_t n, cudaStream_t s)
{
    ck_assert_crmm_ok(crmm_resource_deallocate(p, x, n, (crmm_cuda_stream_t)s));
}

static uint64_t q(crmm_resource *p, crmm_query what) { return crmm_test_query(p, what); }

static void no_forbidden_call(int form)
{
    ck_assert_msg(fake_capture_forbidden() == 0, "%s: %d call(s) that capture forbids, the last %s", form_names[form],
                  fake_capture_forbidden(), fake_capture_last_forbidden());
}

/* ---- the pool ------------------------------------------------------------------------------ */

/* Blocks a capture allocated and freed stay the graph's until it is destroyed: an allocation
 * outside the capture never gets them, BYTES_FREE leaves them out; then they come back. */
START_TEST(blocks_of_a_capture_are_held_until_the_graph_is_destroyed)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=4MiB");
    cudaStream_t s = stream_n(1), other = stream_n(2);
    void *warm = alloc_on(p, MiB, s);
    free_on(p, warm, MiB, s);
    uint64_t free_before = q(p, CRMM_QUERY_BYTES_FREE);

    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *a = alloc_on(p, MiB, s);
    free_on(p, a, MiB, s);
    void *b = alloc_on(p, MiB, s); /* later in the same capture, same stream: may reuse a */
    free_on(p, b, MiB, s);
    fake_capture_end(s);
    no_forbidden_call(form);
    ck_assert_int_eq(fake_graph_user_objects(g), 1);

    /* the graph is alive: its memory is neither free nor handed out */
    uint64_t held = a == b ? MiB : 2 * MiB;
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED) - held);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0); /* the user's view: everything was freed */
    void *c = alloc_on(p, MiB, s);
    void *d = alloc_on(p, MiB, other);
    ck_assert_ptr_ne(c, a);
    ck_assert_ptr_ne(c, b);
    ck_assert_ptr_ne(d, a);
    ck_assert_ptr_ne(d, b);
    free_on(p, c, MiB, s);
    free_on(p, d, MiB, other);

    fake_graph_destroy(g);
    ck_assert_int_eq(fake_user_objects_live(), 0);
    /* back in the pool, usable by any stream at once: a new stream gets it before the pool grows */
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);
    void *got[16];
    int n = 0, found = 0;
    while (n < 16) {
        got[n] = alloc_on(p, MiB, stream_n(3));
        found |= got[n] == a || got[n] == b;
        n++;
        if (found || q(p, CRMM_QUERY_BYTES_RESERVED) != reserved)
            break;
    }
    ck_assert_msg(found, "%s: the graph's block was not handed out before the pool grew", form_names[form]);
    while (n > 0)
        free_on(p, got[--n], MiB, stream_n(3));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    ck_assert_uint_ge(q(p, CRMM_QUERY_BYTES_FREE), free_before);
    crmm_resource_release(p);
}
END_TEST

/* A block allocated before the capture and freed inside it is the graph's too (its replays use it
 * up to the free); one allocated inside and freed after the capture ended likewise. */
START_TEST(blocks_freed_inside_or_allocated_inside_are_the_graphs)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=4MiB");
    cudaStream_t s = stream_n(1);
    void *before = alloc_on(p, 512 * KiB, s);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    free_on(p, before, 512 * KiB, s);
    void *inside = alloc_on(p, 256 * KiB, s);
    fake_capture_end(s);
    no_forbidden_call(form);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 1);
    free_on(p, inside, 256 * KiB, s); /* after the capture: still the graph's */
    for (int i = 0; i < 8; i++) {
        void *x = alloc_on(p, 256 * KiB, s);
        ck_assert_ptr_ne(x, before);
        ck_assert_ptr_ne(x, inside);
    }
    /* freeing a parked block again is a double free, said so */
    ck_assert_crmm(crmm_resource_deallocate(p, inside, 256 * KiB, (crmm_cuda_stream_t)s), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "already free"), "%s", crmm_last_error());
    uint64_t free_now = q(p, CRMM_QUERY_BYTES_FREE);
    fake_graph_destroy(g);
    /* the capture may have reused the block it freed for its own later allocation */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), free_now + (inside == before ? 512 : 768) * KiB);
    crmm_resource_release(p); /* the eight blocks are reported as leaks: expected */
}
END_TEST

/* A destroyed graph's blocks join the pool's ready state when the pool collects them. When that
 * state cannot be made (malloc fails) they stay parked, held, and the graph's record is kept: the
 * next collect hands them back (they are neither lost nor freed with the record). */
START_TEST(blocks_come_back_after_a_collect_that_malloc_failed)
{
    if (!MALLOC_FAIL_REPLACES)
        return; /* a sanitizer build: malloc is not ours to fail */
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=4MiB");
    cudaStream_t s = stream_n(1);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *a = alloc_on(p, MiB, s);
    free_on(p, a, MiB, s);
    fake_capture_end(s);
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);
    fake_graph_destroy(g);
    uint64_t free_bytes = 0;
    malloc_fail_arm_from(1, 1); /* every malloc fails: the ready state cannot be made */
    crmm_status st = crmm_resource_query(p, CRMM_QUERY_BYTES_FREE, &free_bytes);
    malloc_fail_disarm();
    ck_assert_crmm_ok(st);
    ck_assert_uint_eq(free_bytes, reserved - MiB); /* still held */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), reserved); /* handed back at the next collect */
    void *b = alloc_on(p, 4 * MiB, stream_n(2)); /* the whole pool, the graph's block included */
    free_on(p, b, 4 * MiB, stream_n(2));
    crmm_resource_release(p);
}
END_TEST

/* The same, with the graph's last owned block freed (outside any capture) between the failed
 * collect and the next: the record, which still holds a parked block it does not own (one
 * allocated before the capture and freed inside it), must stay until that block is handed back. */
START_TEST(a_record_holding_parked_blocks_outlives_its_last_owned_block)
{
    if (!MALLOC_FAIL_REPLACES)
        return; /* a sanitizer build: malloc is not ours to fail */
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=4MiB");
    cudaStream_t s = stream_n(1);
    void *before = alloc_on(p, MiB, NULL); /* from the initial chunk's own state: no ready state yet */
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *owned = alloc_on(p, MiB, s);
    free_on(p, before, MiB, s); /* parked, not owned by the graph */
    fake_capture_end(s);
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);
    fake_graph_destroy(g);
    uint64_t free_bytes = 0;
    malloc_fail_arm_from(1, 1);
    crmm_status st = crmm_resource_query(p, CRMM_QUERY_BYTES_FREE, &free_bytes);
    malloc_fail_disarm();
    ck_assert_crmm_ok(st);
    ck_assert_uint_eq(free_bytes, reserved - 2 * MiB);
    free_on(p, owned, MiB, s); /* the graph is gone: back to the pool at once */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), reserved); /* and the parked one with it */
    crmm_resource_release(p);
}
END_TEST

/* Under capture the pool takes no other stream's free blocks (that needs a device
 * synchronization or an event on the other stream): it grows instead, with no forbidden call —
 * the chunked pool's cudaMalloc runs in the relaxed capture mode, the expandable pool maps pages
 * the same way, and an expandable pool past its mark does not wait to move pages. */
START_TEST(growth_under_capture_makes_no_forbidden_call)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=1MiB");
    cudaStream_t s = stream_n(1), other = stream_n(2);
    void *x = alloc_on(p, MiB, other);
    free_on(p, x, MiB, other); /* free, on another stream */
    void *big = alloc_on(p, 4 * MiB, s);
    free_on(p, big, 4 * MiB, s);
    int syncs = fake_vmm.device_syncs;
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);

    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *y = alloc_on(p, 8 * MiB, s); /* more than the pool holds free anywhere */
    void *z = alloc_on(p, 2 * MiB, s);
    free_on(p, z, 2 * MiB, s);
    free_on(p, y, 8 * MiB, s);
    fake_capture_end(s);
    no_forbidden_call(form);
    ck_assert_int_eq(fake_vmm.device_syncs, syncs);
    ck_assert_uint_gt(q(p, CRMM_QUERY_BYTES_RESERVED), reserved);
    fake_graph_destroy(g);
    crmm_resource_release(p);
}
END_TEST

/* When the driver or the maximum allows no growth, allocation under capture fails with
 * CRMM_ERROR_OUT_OF_MEMORY naming the capture, without waiting for the device. */
START_TEST(out_of_memory_under_capture_names_the_capture)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=1MiB maximum_size=2MiB");
    cudaStream_t s = stream_n(1);
    void *x = alloc_on(p, MiB, stream_n(2));
    free_on(p, x, MiB, stream_n(2));
    int syncs = fake_vmm.device_syncs;
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *y = NULL;
    ck_assert_crmm(crmm_resource_allocate(p, 4 * MiB, (crmm_cuda_stream_t)s, &y), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_msg(strstr(crmm_last_error(), "captured into a CUDA graph"), "%s", crmm_last_error());
    fake_capture_end(s);
    no_forbidden_call(form);
    ck_assert_int_eq(fake_vmm.device_syncs, syncs);
    fake_graph_destroy(g);
    crmm_resource_release(p);
}
END_TEST

/* A pool destroyed while a graph still holds its blocks: the graph's destructor, run later, touches
 * nothing of the pool (ASan and the leak checker watch). */
START_TEST(a_pool_destroyed_before_its_graph)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=1MiB");
    cudaStream_t s = stream_n(1);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *a = alloc_on(p, 64 * KiB, s);
    free_on(p, a, 64 * KiB, s);
    fake_capture_end(s);
    crmm_resource_release(p);
    fake_graph_destroy(g);
    ck_assert_int_eq(fake_user_objects_live(), 0);
}
END_TEST

/* Two captures on two streams at once: each graph holds its own blocks, and each comes back when
 * its own graph is destroyed. */
START_TEST(two_graphs_hold_their_own_blocks)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=4MiB");
    cudaStream_t s1 = stream_n(1), s2 = stream_n(2);
    fake_graph *g1 = fake_capture_begin(s1, cudaStreamCaptureModeGlobal);
    fake_graph *g2 = fake_capture_begin(s2, cudaStreamCaptureModeGlobal);
    void *a = alloc_on(p, MiB, s1);
    void *b = alloc_on(p, MiB, s2);
    free_on(p, a, MiB, s1);
    free_on(p, b, MiB, s2);
    fake_capture_end(s1);
    fake_capture_end(s2);
    no_forbidden_call(form);
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), reserved - 2 * MiB);
    fake_graph_destroy(g1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), reserved - MiB);
    void *c = alloc_on(p, MiB, stream_n(3));
    ck_assert_ptr_ne(c, b);
    free_on(p, c, MiB, stream_n(3));
    fake_graph_destroy(g2);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    crmm_resource_release(p);
}
END_TEST

/* Outside any capture the pool asks CUDA one capture query per call on a stream (none on the
 * legacy default stream), and makes no user object. */
START_TEST(no_capture_no_user_object)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=1MiB");
    int before = fake_capture_queries();
    for (int i = 0; i < 100; i++)
        free_on(p, alloc_on(p, 4 * KiB, stream_n(1)), 4 * KiB, stream_n(1));
    ck_assert_int_eq(fake_capture_queries() - before, 200);
    for (int i = 0; i < 100; i++)
        free_on(p, alloc_on(p, 4 * KiB, NULL), 4 * KiB, NULL);
    ck_assert_int_eq(fake_capture_queries() - before, 200);
    ck_assert_int_eq(fake_user_objects_live(), 0);
    crmm_resource_release(p);
}
END_TEST

/* graphs = off: the pool never asks whether a stream is captured (the query's cost is gone, and
 * so is the safety under capture), even with capture enabled for the process. */
START_TEST(graphs_off_asks_nothing)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=1MiB graphs=off");
    int before = fake_capture_queries();
    for (int i = 0; i < 100; i++)
        free_on(p, alloc_on(p, 4 * KiB, stream_n(1)), 4 * KiB, stream_n(1));
    ck_assert_int_eq(fake_capture_queries(), before);
    crmm_resource_release(p);
}
END_TEST

/* graphs = auto (the default) asks only once the process enabled capture: a program that never
 * captures pays no query; graphs = on asks whatever the process said. Arena and fixed_size ask
 * only once capture is enabled. */
START_TEST(graphs_auto_asks_once_capture_is_enabled)
{
    int form = _i;
    crmm_graph_capture_enable(false);
    crmm_resource *a = pool_in_form(form, "initial_size=1MiB");
    crmm_resource *on = pool_in_form(form, "initial_size=1MiB graphs=on");
    int before = fake_capture_queries();
    for (int i = 0; i < 10; i++)
        free_on(a, alloc_on(a, 4 * KiB, stream_n(1)), 4 * KiB, stream_n(1));
    ck_assert_int_eq(fake_capture_queries(), before);
    for (int i = 0; i < 10; i++)
        free_on(on, alloc_on(on, 4 * KiB, stream_n(1)), 4 * KiB, stream_n(1));
    ck_assert_int_eq(fake_capture_queries(), before + 20);
    crmm_graph_capture_enable(true);
    ck_assert(crmm_graph_capture_enabled());
    before = fake_capture_queries();
    for (int i = 0; i < 10; i++)
        free_on(a, alloc_on(a, 4 * KiB, stream_n(1)), 4 * KiB, stream_n(1));
    ck_assert_int_eq(fake_capture_queries(), before + 20);
    crmm_resource_release(a);
    crmm_resource_release(on);
}
END_TEST

static void *allocate_once(void *arg)
{
    crmm_resource *p = arg;
    void *x = NULL;
    if (crmm_resource_allocate(p, 4 * KiB, (crmm_cuda_stream_t)stream_n(5), &x) == CRMM_OK)
        crmm_resource_deallocate(p, x, 4 * KiB, (crmm_cuda_stream_t)stream_n(5));
    return NULL;
}

/* With the per-thread caches on, a block a thread's cache handed out and that is freed inside a
 * capture leaves the cache for the graph: held until the graph is destroyed, not cached. */
START_TEST(a_cached_block_freed_in_a_capture_is_the_graphs)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=4MiB thread_cache=on");
    cudaStream_t s = stream_n(1);
    free_on(p, alloc_on(p, 64 * KiB, s), 64 * KiB, s);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, allocate_once, p), 0); /* a second thread: caches on */
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    void *x = alloc_on(p, 64 * KiB, s); /* through this thread's cache */
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    free_on(p, x, 64 * KiB, s);
    fake_capture_end(s);
    no_forbidden_call(form);
    void *y = alloc_on(p, 64 * KiB, s);
    ck_assert_ptr_ne(y, x);
    free_on(p, y, 64 * KiB, s);
    uint64_t free_now = q(p, CRMM_QUERY_BYTES_FREE);
    fake_graph_destroy(g);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), free_now + 64 * KiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    crmm_resource_release(p);
}
END_TEST

/* ---- the other plugins ---------------------------------------------------------------------- */

/* Arena, fixed_size and binning (whose bins are fixed_size resources) keep the ownership rule
 * through graph_park (plugins/common): each over the cuda plugin, in 64 KiB blocks; the last is a
 * binning whose 64 KiB requests pass its bins and go to an arena upstream. */
static const char *const parking[][2] = {
    {"arena", "arena_size=8MiB"},
    {"fixed_size", "block_size=64KiB blocks_to_preallocate=4"},
    {"binning", "bins=4KiB:64KiB blocks_to_preallocate=4"},
    {"binning", "bins=4KiB blocks_to_preallocate=4"},
};
#define PARKING ((int)(sizeof parking / sizeof parking[0]))

static crmm_resource *parking_resource(int i)
{
    crmm_resource *up = crmm_test_create("cuda", "", NULL);
    if (i == PARKING - 1) { /* over an arena */
        crmm_resource *arena = crmm_test_create("arena", "arena_size=8MiB", up);
        crmm_resource_release(up);
        up = arena;
    }
    crmm_resource *r = crmm_test_create(parking[i][0], parking[i][1], up);
    crmm_resource_release(up);
    return r;
}

static bool one_of(const void *x, void *const *set, int n)
{
    for (int i = 0; i < n; i++)
        if (x == set[i])
            return true;
    return false;
}

/* Under capture they allocate and free with no call that capture forbids. A block allocated
 * before the capture and freed inside it, one allocated and freed inside, and one allocated
 * inside and freed after the capture (on another stream) are handed to nobody while the graph
 * lives, on any stream; the counts of allocated memory drop at the frees all the same. Once the
 * graph is destroyed the three come back: the next allocations get them. */
START_TEST(arena_fixed_size_binning_hold_a_graphs_blocks)
{
    const size_t n = 64 * KiB;
    crmm_resource *r = parking_resource(_i);
    cudaStream_t s = stream_n(1), other = stream_n(2);
    void *before = alloc_on(r, n, s);
    free_on(r, alloc_on(r, n, s), n, s); /* free on s: the capture may take it */

    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *in1 = alloc_on(r, n, s);
    void *in2 = alloc_on(r, n, s);
    free_on(r, in1, n, s);
    free_on(r, before, n, s);
    fake_capture_end(s);
    ck_assert_msg(fake_capture_forbidden() == 0, "%s: %d forbidden call(s), the last %s", parking[_i][0],
                  fake_capture_forbidden(), fake_capture_last_forbidden());
    ck_assert_int_eq(fake_graph_user_objects(g), 1);
    free_on(r, in2, n, other); /* after the capture: still the graph's */
    ck_assert_uint_eq(q(r, CRMM_QUERY_ALLOCATIONS), 0);

    void *held[3] = {before, in1, in2}, *got[12];
    for (int i = 0; i < 12; i++) {
        got[i] = alloc_on(r, n, i % 2 ? other : s);
        ck_assert_msg(!one_of(got[i], held, 3), "%s: %p, held for a live graph, handed out", parking[_i][0], got[i]);
    }
    for (int i = 0; i < 12; i++)
        free_on(r, got[i], n, i % 2 ? other : s);
    /* the three are not free (a binning's free bytes are its bins': the last's are its arena's) */
    bool own_memory = _i != PARKING - 1;
    uint64_t free_during = q(r, CRMM_QUERY_BYTES_FREE);
    if (own_memory)
        ck_assert_uint_le(free_during + 3 * n, q(r, CRMM_QUERY_BYTES_RESERVED));

    fake_graph_destroy(g);
    ck_assert_int_eq(fake_user_objects_live(), 0);
    int found = 0;
    void *again[16];
    for (int i = 0; i < 16; i++) {
        again[i] = alloc_on(r, n, s);
        found += one_of(again[i], held, 3);
    }
    ck_assert_msg(found == 3, "%s: %d of the graph's 3 blocks came back", parking[_i][0], found);
    for (int i = 0; i < 16; i++)
        free_on(r, again[i], n, s);
    ck_assert_uint_eq(q(r, CRMM_QUERY_ALLOCATIONS), 0);
    if (own_memory)
        ck_assert_uint_ge(q(r, CRMM_QUERY_BYTES_FREE), free_during + 3 * n); /* and free again */
    crmm_resource_release(r);
}
END_TEST

/* Freeing a block twice under capture is refused like any double free (the block is held once). */
START_TEST(a_double_free_under_capture_is_refused)
{
    const size_t n = 64 * KiB;
    crmm_resource *r = parking_resource(_i == 0 ? 1 : 2);
    cudaStream_t s = stream_n(1);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *x = alloc_on(r, n, s);
    free_on(r, x, n, s);
    ck_assert_int_ne(crmm_resource_deallocate(r, x, n, (crmm_cuda_stream_t)s), CRMM_OK);
    fake_capture_end(s);
    ck_assert_int_eq(fake_capture_forbidden(), 0);
    fake_graph_destroy(g);
    crmm_resource_release(r);
}
END_TEST

/* An arena whose free memory was all freed on another stream cannot serve a captured stream
 * without waiting for the device: the allocation fails with CRMM_ERROR_OUT_OF_MEMORY naming the
 * capture, makes no forbidden call, and the capture stays valid. */
START_TEST(arena_that_would_wait_refuses_under_capture)
{
    crmm_resource *r = parking_resource(0);
    cudaStream_t s = stream_n(1), other = stream_n(2);
    void *big = alloc_on(r, 7 * MiB, other);
    free_on(r, big, 7 * MiB, other); /* the pages are tagged with `other` */
    int syncs = fake_vmm.device_syncs;
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *x = NULL;
    ck_assert_crmm(crmm_resource_allocate(r, 7 * MiB, (crmm_cuda_stream_t)s, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_msg(strstr(crmm_last_error(), "captured into a CUDA graph"), "%s", crmm_last_error());
    fake_capture_end(s);
    ck_assert_msg(fake_capture_forbidden() == 0, "%d forbidden call(s), the last %s", fake_capture_forbidden(),
                  fake_capture_last_forbidden());
    ck_assert_int_eq(fake_vmm.device_syncs, syncs);
    x = alloc_on(r, 7 * MiB, s); /* after the capture it may wait */
    free_on(r, x, 7 * MiB, s);
    fake_graph_destroy(g);
    crmm_resource_release(r);
}
END_TEST

/* fixed_size grows during a capture (no forbidden call, the new chunk's blocks usable there);
 * when its upstream refuses another chunk the allocation fails with CRMM_ERROR_OUT_OF_MEMORY
 * naming the capture, without waiting for the device to free anything. */
START_TEST(fixed_size_grows_under_capture_until_upstream_refuses)
{
    crmm_resource *cuda = crmm_test_create("cuda", "", NULL);
    crmm_resource *lim = crmm_test_create("limiting", "allocation_limit=128KiB", cuda);
    crmm_resource_release(cuda);
    crmm_resource *r = crmm_test_create("fixed_size", "block_size=64KiB blocks_to_preallocate=1", lim);
    crmm_resource_release(lim);
    cudaStream_t s = stream_n(1), other = stream_n(2);
    free_on(r, alloc_on(r, 64 * KiB, other), 64 * KiB, other); /* the first chunk: free on another stream */
    int syncs = fake_vmm.device_syncs;
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *x = alloc_on(r, 64 * KiB, s); /* a second chunk, in the relaxed mode */
    void *y = NULL;
    ck_assert_crmm(crmm_resource_allocate(r, 64 * KiB, (crmm_cuda_stream_t)s, &y), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_msg(strstr(crmm_last_error(), "captured into a CUDA graph"), "%s", crmm_last_error());
    free_on(r, x, 64 * KiB, s);
    fake_capture_end(s);
    ck_assert_msg(fake_capture_forbidden() == 0, "%d forbidden call(s), the last %s", fake_capture_forbidden(),
                  fake_capture_last_forbidden());
    ck_assert_int_eq(fake_vmm.device_syncs, syncs);
    ck_assert_uint_eq(q(r, CRMM_QUERY_UPSTREAM_BLOCKS), 2);
    fake_graph_destroy(g);
    y = alloc_on(r, 64 * KiB, s); /* after the capture it may wait for the other stream's block */
    free_on(r, y, 64 * KiB, s);
    crmm_resource_release(r);
}
END_TEST

/* The cuda plugin allocates under capture (cudaMalloc in the relaxed mode: new memory is safe for a
 * graph) but refuses to free on a captured stream, which would free what the graph still uses. */
START_TEST(cuda_allocates_under_capture_and_refuses_to_free)
{
    crmm_resource *cuda = crmm_test_create("cuda", "", NULL);
    cudaStream_t s = stream_n(1);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    int before = mallocs;
    void *x = alloc_on(cuda, 4 * KiB, s);
    ck_assert_int_eq(mallocs, before + 1);
    ck_assert_crmm(crmm_resource_deallocate(cuda, x, 4 * KiB, (crmm_cuda_stream_t)s), CRMM_ERROR_UNSUPPORTED);
    ck_assert_msg(strstr(crmm_last_error(), "captured into a CUDA graph"), "%s", crmm_last_error());
    /* another thread's capture in global mode: a free on the legacy stream is still legal */
    void *y = alloc_on(cuda, 4 * KiB, NULL);
    free_on(cuda, y, 4 * KiB, NULL);
    fake_capture_end(s);
    ck_assert_msg(fake_capture_forbidden() == 0, "%d forbidden call(s), the last %s", fake_capture_forbidden(),
                  fake_capture_last_forbidden());
    free_on(cuda, x, 4 * KiB, s);
    fake_graph_destroy(g);
    crmm_resource_release(cuda);
}
END_TEST

/* The adaptors make no CUDA call of their own (prefetch leaves its hint out under capture): over a
 * pool, a capture through them is the pool's, blocks held and all. */
static const char *const adaptors[][2] = {
    {"logging", "file=/dev/null"}, {"statistics", ""}, {"tracking", ""}, {"limiting", "allocation_limit=64MiB"},
    {"failure_callback", ""}, {"aligned", "alignment=4096 alignment_threshold=1KiB"}, {"prefetch", ""},
    {"binning", "bins=256:4KiB"},
};

START_TEST(adaptors_over_a_pool_under_capture)
{
    crmm_resource *p = pool_in_form(CHUNKS_SYNC, "initial_size=4MiB");
    crmm_resource *a = crmm_test_create(adaptors[_i][0], adaptors[_i][1], p);
    crmm_resource_release(p);
    cudaStream_t s = stream_n(1);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    int before = prefetches;
    void *x = alloc_on(a, 64 * KiB, s);
    free_on(a, x, 64 * KiB, s);
    fake_capture_end(s);
    ck_assert_int_eq(prefetches, before);
    ck_assert_msg(fake_capture_forbidden() == 0, "%s: %d forbidden call(s), the last %s", adaptors[_i][0],
                  fake_capture_forbidden(), fake_capture_last_forbidden());
    ck_assert_int_eq(fake_graph_user_objects(g), 1);
    void *y = alloc_on(a, 64 * KiB, s);
    ck_assert_ptr_ne(y, x); /* held for the graph */
    free_on(a, y, 64 * KiB, s);
    fake_graph_destroy(g);
    crmm_resource_release(a);
}
END_TEST

static Suite *graphs_suite(void)
{
    Suite *s = suite_create("graphs");
    TCase *tc = tcase_create("pool");
    tcase_add_loop_test(tc, blocks_of_a_capture_are_held_until_the_graph_is_destroyed, 0, FORMS);
    tcase_add_loop_test(tc, blocks_freed_inside_or_allocated_inside_are_the_graphs, 0, FORMS);
    tcase_add_loop_test(tc, blocks_come_back_after_a_collect_that_malloc_failed, 0, FORMS);
    tcase_add_loop_test(tc, a_record_holding_parked_blocks_outlives_its_last_owned_block, 0, FORMS);
    tcase_add_loop_test(tc, growth_under_capture_makes_no_forbidden_call, 0, FORMS);
    tcase_add_loop_test(tc, out_of_memory_under_capture_names_the_capture, 0, FORMS);
    tcase_add_loop_test(tc, a_pool_destroyed_before_its_graph, 0, FORMS);
    tcase_add_loop_test(tc, two_graphs_hold_their_own_blocks, 0, FORMS);
    tcase_add_loop_test(tc, no_capture_no_user_object, 0, FORMS);
    tcase_add_loop_test(tc, graphs_off_asks_nothing, 0, FORMS);
    tcase_add_loop_test(tc, graphs_auto_asks_once_capture_is_enabled, 0, FORMS);
    tcase_add_loop_test(tc, a_cached_block_freed_in_a_capture_is_the_graphs, 0, FORMS);
    suite_add_tcase(s, tc);
    TCase *others = tcase_create("other plugins");
    tcase_add_loop_test(others, arena_fixed_size_binning_hold_a_graphs_blocks, 0, PARKING);
    tcase_add_loop_test(others, a_double_free_under_capture_is_refused, 0, 2);
    tcase_add_test(others, arena_that_would_wait_refuses_under_capture);
    tcase_add_test(others, fixed_size_grows_under_capture_until_upstream_refuses);
    tcase_add_test(others, cuda_allocates_under_capture_and_refuses_to_free);
    tcase_add_loop_test(others, adaptors_over_a_pool_under_capture, 0, (int)(sizeof adaptors / sizeof adaptors[0]));
    suite_add_tcase(s, others);
    return s;
}

int main(void)
{
    crmm_graph_capture_enable(true); /* as a program that captures says (no CUDA call: safe before the forks) */
    return crmm_test_run(graphs_suite());
}
