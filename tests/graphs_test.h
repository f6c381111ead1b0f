/* graphs_test.h — what the graph-capture suites on the CPU (check_graphs, check_graphs_plugins,
 * check_graphs_model)
 * share: cudaMalloc and cudaFree for the cuda plugin (host memory, counted) and the rest of the
 * scripted runtime the plugins call, defined here and exported by the program (include this
 * header in one file of a program only); the pool in its three forms, and calls that must
 * succeed. */
#ifndef CRMM_TESTS_GRAPHS_TEST_H
#define CRMM_TESTS_GRAPHS_TEST_H

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
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
static size_t device_in_use; /* what cudaMalloc holds: at most DEVICE_MEMORY, as on a device */

/* Allocations of 2 MiB or more start on a 2 MiB boundary, as cudaMalloc's do on a GPU; the
 * allocation's size and the start of what aligned_alloc gave sit in the 256 bytes before it. */
#define CUDA_MALLOC_LARGE_ALIGN ((size_t)2 << 20)
struct cuda_malloc_header { size_t size; char *base; };

/* Called first thing in cudaMalloc when set: a test's moment inside a pool's growth, with the
 * pool's lock held. */
static void (*cuda_malloc_hook)(void);

cudaError_t cudaMalloc(void **ptr, size_t size)
{
    if (cuda_malloc_hook)
        cuda_malloc_hook();
    cudaError_t e = fake_capture_call("cudaMalloc", FAKE_CALL_UNSAFE, NULL);
    if (e != cudaSuccess)
        return e;
    size_t n = (size + 255) & ~(size_t)255;
    if (size > DEVICE_MEMORY || __atomic_add_fetch(&device_in_use, n, __ATOMIC_RELAXED) > DEVICE_MEMORY) {
        if (size <= DEVICE_MEMORY)
            __atomic_sub_fetch(&device_in_use, n, __ATOMIC_RELAXED);
        return cudaErrorMemoryAllocation;
    }
    size_t align = n >= CUDA_MALLOC_LARGE_ALIGN ? CUDA_MALLOC_LARGE_ALIGN : 256;
    char *base = aligned_alloc(align, ((n + align - 1) & ~(align - 1)) + align); /* a multiple of align, as C asks */
    if (!base) {
        __atomic_sub_fetch(&device_in_use, n, __ATOMIC_RELAXED);
        return cudaErrorMemoryAllocation;
    }
    *(struct cuda_malloc_header *)(base + align - 256) = (struct cuda_malloc_header){n, base};
    mallocs++;
    *ptr = base + align;
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr)
{
    cudaError_t e = fake_capture_call("cudaFree", FAKE_CALL_UNSAFE, NULL);
    if (e != cudaSuccess || !ptr)
        return e;
    frees++;
    struct cuda_malloc_header *h = (struct cuda_malloc_header *)((char *)ptr - 256);
    __atomic_sub_fetch(&device_in_use, h->size, __ATOMIC_RELAXED);
    free(h->base);
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

/* sam_headroom's placement hint: not a stream operation, but not documented as safe under
 * capture either, so scripted as a potentially unsafe call (refused outside the relaxed mode) */
cudaError_t cudaMemAdvise(const void *ptr, size_t bytes, enum cudaMemoryAdvise advice, struct cudaMemLocation location)
{
    (void)ptr, (void)bytes, (void)advice, (void)location;
    return fake_capture_call("cudaMemAdvise", FAKE_CALL_UNSAFE, NULL);
}

/* ---- the pools ------------------------------------------------------------------------------ */

enum { CHUNKS_SYNC, CHUNKS_EVENT, EXPANDABLE, FORMS };
static const char *const form_names[FORMS] = {"chunks, stream_reuse=sync", "chunks, stream_reuse=event", "expandable"};

/* A pool in form `form` with `params`: the chunked forms over the cuda plugin (cudaMalloc above),
 * the expandable one over the scripted driver. */
static inline crmm_resource *pool_in_form(int form, const char *params)
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

static inline cudaStream_t stream_n(int n) { return (cudaStream_t)(uintptr_t)(0x1000 + 0x100 * n); }

static inline void *alloc_on(crmm_resource *p, size_t n, cudaStream_t s)
{
    void *x = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(p, n, (crmm_cuda_stream_t)s, &x));
    memset(x, 0x5A, n); /* an unmapped page would crash here */
    return x;
}

static inline void free_on(crmm_resource *p, void *x, size_t n, cudaStream_t s)
{
    ck_assert_crmm_ok(crmm_resource_deallocate(p, x, n, (crmm_cuda_stream_t)s));
}

static inline uint64_t q(crmm_resource *p, crmm_query what) { return crmm_test_query(p, what); }

/* What a pool cannot hand out now, live or held for graphs: reserved - free (once everything the
 * program allocated is freed, what graphs hold). */
static inline uint64_t graph_held(crmm_resource *p)
{
    return q(p, CRMM_QUERY_BYTES_RESERVED) - q(p, CRMM_QUERY_BYTES_FREE);
}

static inline void no_forbidden_call(int form)
{
    ck_assert_msg(fake_capture_forbidden() == 0, "%s: %d call(s) that capture forbids, the last %s", form_names[form],
                  fake_capture_forbidden(), fake_capture_last_forbidden());
}



/* ---- per-thread default streams under capture ------------------------------------------------ */

struct other_thread { crmm_resource *r; size_t n; void *got; pthread_barrier_t allocated, captured; };

/* Allocates on its own per-thread default stream, then lives on until the capture has ended (an
 * arena retiring an exiting thread's cache waits for the device, which no capture allows). */
static void *allocate_on_its_own_default_stream(void *arg)
{
    struct other_thread *t = arg;
    t->got = alloc_on(t->r, t->n, cudaStreamPerThread);
    pthread_barrier_wait(&t->allocated);
    pthread_barrier_wait(&t->captured);
    return NULL;
}

/* cudaStreamPerThread names a different stream on each thread: under a capture of it, a block of
 * n bytes this thread freed on its own is not reused by another thread's, which nothing orders
 * after the free; this thread's next allocation there takes it back. */
static inline void per_thread_streams_keep_their_parked_blocks(crmm_resource *r, size_t n, const char *name)
{
    fake_graph *g = fake_capture_begin(cudaStreamPerThread, cudaStreamCaptureModeRelaxed);
    void *x = alloc_on(r, n, cudaStreamPerThread);
    free_on(r, x, n, cudaStreamPerThread);
    struct other_thread t = {.r = r, .n = n};
    pthread_barrier_init(&t.allocated, NULL, 2);
    pthread_barrier_init(&t.captured, NULL, 2);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, allocate_on_its_own_default_stream, &t), 0);
    pthread_barrier_wait(&t.allocated);
    ck_assert_msg(t.got != x, "%s: another thread's per-thread stream got the block", name);
    void *y = alloc_on(r, n, cudaStreamPerThread);
    ck_assert_ptr_eq(y, x);
    free_on(r, y, n, cudaStreamPerThread);
    free_on(r, t.got, n, cudaStreamPerThread);
    fake_capture_end(cudaStreamPerThread);
    pthread_barrier_wait(&t.captured);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    pthread_barrier_destroy(&t.allocated);
    pthread_barrier_destroy(&t.captured);
    fake_graph_destroy(g);
}

#endif
