/* check_multi_gpu_2gpu.c — crmm on two GPUs: a config that gives each device its own chain, a
 * pool and an arena per device each hammered by two threads at once, copies between the devices'
 * memory, and work on device 1's resources and buffers that leaves the caller's device 0
 * current. Needs 2 GPUs (skips with 77; fails with CRMM_TEST_REQUIRE_GPU=2). Threads cannot fail
 * a Check test: each keeps its first failure as a message, asserted after the join. */
#include "build_config.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "streams_test.h"

/* ---- helpers ----------------------------------------------------------------------------- */

/* In a test: `p` is device memory of device `device`. */
static void expect_on_device(const void *p, int device)
{
    struct cudaPointerAttributes attr;
    ck_assert_cuda(cudaPointerGetAttributes(&attr, p));
    ck_assert_msg(attr.type == cudaMemoryTypeDevice, "%p: memory type %d, expected device memory", p, (int)attr.type);
    ck_assert_msg(attr.device == device, "%p is memory of device %d, expected device %d", p, attr.device, device);
}

/* In a test: the current device is `device` after `what`. */
static void expect_current(int device, const char *what)
{
    int dev = crmm_test_cuda_device();
    ck_assert_msg(dev == device, "current device is %d after %s, expected %d", dev, what, device);
}

/* Byte i of the test pattern `seed`. */
static unsigned char pattern_byte(size_t i, unsigned seed)
{
    return (unsigned char)((i * 131u + (i >> 8) * 7u + seed) & 0xff);
}

static unsigned char *pattern_new(size_t n, unsigned seed)
{
    unsigned char *h = malloc(n);
    ck_assert_ptr_nonnull(h);
    for (size_t i = 0; i < n; i++)
        h[i] = pattern_byte(i, seed);
    return h;
}

/* In a test: the n bytes at host memory `got` are pattern `seed`. */
static void expect_pattern(const unsigned char *got, size_t n, unsigned seed, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != pattern_byte(i, seed))
            ck_abort_msg("%s: byte %zu of %zu is %#x, expected %#x", what, i, n, (unsigned)got[i],
                         (unsigned)pattern_byte(i, seed));
}

/* In a test: allocate, write, read back and free `bytes` through mr with its device current,
 * checking that the memory is on `device`. */
static void use_on_device(crmm_resource *mr, int device, size_t bytes)
{
    void *p = crmm_test_allocate(mr, bytes);
    expect_on_device(p, device);
    ck_assert_cuda(cudaMemset(p, 0x5A, bytes));
    unsigned char last = 0;
    ck_assert_cuda(cudaMemcpy(&last, (unsigned char *)p + bytes - 1, 1, cudaMemcpyDeviceToHost));
    ck_assert_uint_eq(last, 0x5A);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, bytes, NULL));
}

/* ---- 1. a config with a chain per device --------------------------------------------------- */

/* Device 0: statistics over a pool over cuda; device 1: an arena over cuda. */
static const char per_device_config[] =
    "[resource.gpu]\nplugin = cuda\n"
    "[resource.pool0]\nplugin = pool\nupstream = gpu\ninitial_size = 64MiB\n"
    "[resource.a]\nplugin = statistics\nupstream = pool0\n"
    "[resource.b]\nplugin = arena\nupstream = gpu\narena_size = 64MiB\n"
    "[device.0]\nresource = a\n[device.1]\nresource = b\n";

CRMM_TEST(config_gives_each_device_its_chain)
{
    ck_assert_crmm_ok(crmm_init(crmm_test_write_file("crmm.ini", per_device_config)));
    ck_assert_cuda(cudaSetDevice(0));
    crmm_resource *r0 = crmm_get_per_device_resource(0);
    ck_assert_msg(r0 != NULL, "device 0: %s", crmm_last_error());
    crmm_resource *r1 = crmm_get_per_device_resource(1);
    ck_assert_msg(r1 != NULL, "device 1: %s", crmm_last_error());
    expect_current(0, "creating device 1's resource");
    ck_assert_ptr_ne(r0, r1);

    /* device 0: a -> pool0 -> gpu, all bound to device 0; device 1: b -> gpu, its own cuda
     * instance on device 1 */
    crmm_resource *pool0 = crmm_resource_upstream(r0), *gpu0 = crmm_resource_upstream(pool0);
    crmm_resource *gpu1 = crmm_resource_upstream(r1);
    const struct { crmm_resource *r; const char *kind, *name; int device; } layers[] = {
        {r0, "statistics", "a", 0}, {pool0, "pool", "pool0", 0}, {gpu0, "cuda", NULL, 0},
        {r1, "arena", "b", 1},      {gpu1, "cuda", NULL, 1},
    };
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
        ck_assert_str_eq(crmm_resource_kind(layers[i].r), layers[i].kind);
        if (layers[i].name)
            ck_assert_str_eq(crmm_resource_name(layers[i].r), layers[i].name);
        ck_assert_int_eq(layers[i].r->device, layers[i].device);
    }
    ck_assert_ptr_ne(gpu1, gpu0);
    ck_assert_uint_eq(crmm_test_query(pool0, CRMM_QUERY_BYTES_RESERVED), 64 * MiB);
    ck_assert_uint_eq(crmm_test_query(r1, CRMM_QUERY_BYTES_RESERVED), 64 * MiB);
    ck_assert(crmm_resource_find_kind(r1, "statistics") == NULL);

    /* the current device picks the resource, and its memory lands on that device */
    crmm_resource *per_device[2] = {r0, r1};
    for (int d = 0; d < 2; d++) {
        ck_assert_cuda(cudaSetDevice(d));
        ck_assert_ptr_eq(crmm_get_current_device_resource(), per_device[d]);
        crmm_resource *ref = crmm_get_current_device_resource_ref();
        ck_assert_ptr_eq(ref, per_device[d]);
        crmm_resource_release(ref);
        use_on_device(per_device[d], d, MiB);
        use_on_device(crmm_get_current_device_resource(), d, 3 * KiB + 1);
    }

    /* the statistics layer counts what goes through device 0's chain only */
    ck_assert_cuda(cudaSetDevice(0));
    void *p = crmm_test_allocate(r0, 2 * MiB);
    ck_assert_uint_eq(crmm_test_query(r0, CRMM_QUERY_BYTES_IN_USE), 2 * MiB);
    ck_assert_uint_eq(crmm_test_query(pool0, CRMM_QUERY_BYTES_IN_USE), 2 * MiB);
    ck_assert_uint_eq(crmm_test_query(r1, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_crmm_ok(crmm_resource_deallocate(r0, p, 2 * MiB, NULL));
    ck_assert_uint_eq(crmm_test_query(r0, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(r0, CRMM_QUERY_ALLOCATIONS_TOTAL), 3);

    /* a buffer made with each device current takes that device's resource */
    for (int d = 0; d < 2; d++) {
        ck_assert_cuda(cudaSetDevice(d));
        crmm_device_buffer *buf;
        ck_assert_crmm_ok(crmm_device_buffer_to_device("per-device", 10, NULL, NULL, &buf));
        ck_assert_ptr_eq(crmm_device_buffer_resource(buf), per_device[d]);
        ck_assert_int_eq(crmm_device_buffer_device(buf), d);
        expect_on_device(crmm_device_buffer_ptr(buf), d);
        char got[10];
        ck_assert_crmm_ok(crmm_device_buffer_copy_to_host(buf, got, sizeof got, NULL));
        ck_assert_mem_eq(got, "per-device", 10);
        crmm_device_buffer_destroy(buf);
    }
    ck_assert_cuda(cudaSetDevice(0));
    crmm_finalize();
    expect_current(0, "crmm_finalize");
}

/* ---- 2. a pool and an arena per device, two threads each ----------------------------------- */

enum { THREADS_PER_RESOURCE = 2, RESOURCES = 4, WORKERS = RESOURCES * THREADS_PER_RESOURCE };
enum { STEPS = 3000, SLOTS = 32 };
#define MAX_BLOCK (512 * KiB)

typedef struct block {
    unsigned char *p; /* NULL: the slot is empty */
    size_t n;
    unsigned char tag;
} block;

typedef struct worker {
    crmm_resource *mr;
    int device;
    uint64_t seed;           /* not 0 */
    uint64_t allocations;    /* successful allocations made */
    char failure[256];       /* the first failure; "" when none */
} worker;

static void worker_fail(worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void worker_fail(worker *w, const char *fmt, ...)
{
    if (w->failure[0])
        return;
    int len = snprintf(w->failure, sizeof w->failure, "%s on device %d: ", crmm_resource_kind(w->mr), w->device);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->failure + len, sizeof w->failure - (size_t)len, fmt, ap);
    va_end(ap);
}

/* Check the first and last byte of b on s (which its fill was queued on), then free it on s. */
static void worker_check_and_free(worker *w, block *b, cudaStream_t s)
{
    unsigned char got[2] = {0, 0};
    cudaError_t e = cudaMemcpyAsync(&got[0], b->p, 1, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(&got[1], b->p + b->n - 1, 1, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s);
    if (e != cudaSuccess)
        worker_fail(w, "reading back %zu bytes at %p: %s", b->n, (void *)b->p, cudaGetErrorString(e));
    else if (got[0] != b->tag || got[1] != b->tag)
        worker_fail(w, "block %p of %zu bytes holds %#x..%#x, filled with %#x: another allocation overlaps it",
                    (void *)b->p, b->n, (unsigned)got[0], (unsigned)got[1], (unsigned)b->tag);
    if (crmm_resource_deallocate(w->mr, b->p, b->n, (crmm_cuda_stream_t)s) != CRMM_OK)
        worker_fail(w, "deallocate of %zu bytes: %s", b->n, crmm_last_error());
    b->p = NULL;
}

/* Allocate b->n bytes into b on s, check where they are and fill them with b->tag. */
static void worker_allocate(worker *w, block *b, cudaStream_t s)
{
    void *p = NULL;
    if (crmm_resource_allocate(w->mr, b->n, (crmm_cuda_stream_t)s, &p) != CRMM_OK || !p) {
        worker_fail(w, "allocate of %zu bytes: %s", b->n, crmm_last_error());
        return;
    }
    w->allocations++;
    b->p = p;
    struct cudaPointerAttributes attr;
    cudaError_t e = cudaPointerGetAttributes(&attr, p);
    if ((uintptr_t)p % CRMM_ALLOCATION_ALIGNMENT != 0)
        worker_fail(w, "%p is not %u-byte aligned", p, CRMM_ALLOCATION_ALIGNMENT);
    else if (e != cudaSuccess)
        worker_fail(w, "cudaPointerGetAttributes(%p): %s", p, cudaGetErrorString(e));
    else if (attr.type != cudaMemoryTypeDevice || attr.device != w->device)
        worker_fail(w, "%p is memory of type %d on device %d", p, (int)attr.type, attr.device);
    else if ((e = cudaMemsetAsync(p, b->tag, b->n, s)) != cudaSuccess)
        worker_fail(w, "cudaMemsetAsync of %zu bytes: %s", b->n, cudaGetErrorString(e));
}

static void *worker_run(void *arg)
{
    worker *w = arg;
    block live[SLOTS];
    memset(live, 0, sizeof live);
    cudaStream_t s = NULL;
    cudaError_t e = cudaSetDevice(w->device);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        worker_fail(w, "setting up: %s", cudaGetErrorString(e));
        return NULL;
    }
    for (int step = 0; step < STEPS && !w->failure[0]; step++) {
        block *b = &live[crmm_test_rand(&w->seed) % SLOTS];
        if (b->p) {
            worker_check_and_free(w, b, s);
            continue;
        }
        uint64_t r = crmm_test_rand(&w->seed);
        /* mostly small blocks, some up to MAX_BLOCK */
        b->n = 1 + (size_t)(r >> 8) % ((r & 3) ? 4 * KiB : MAX_BLOCK);
        b->tag = (unsigned char)(1 + (r >> 40) % 255);
        worker_allocate(w, b, s);
    }
    for (int i = 0; i < SLOTS; i++)
        if (live[i].p)
            worker_check_and_free(w, &live[i], s);
    if ((e = cudaStreamSynchronize(s)) != cudaSuccess)
        worker_fail(w, "cudaStreamSynchronize: %s", cudaGetErrorString(e));
    if ((e = cudaStreamDestroy(s)) != cudaSuccess)
        worker_fail(w, "cudaStreamDestroy: %s", cudaGetErrorString(e));
    return NULL;
}

/* In a test: a resource of `plugin` over a cuda resource, made with device `device` current. */
static crmm_resource *create_on_device(int device, const char *plugin, const char *params)
{
    ck_assert_cuda(cudaSetDevice(device));
    crmm_resource *gpu = crmm_test_create("cuda", "", NULL);
    crmm_resource *mr = crmm_test_create(plugin, params, gpu);
    crmm_resource_release(gpu); /* mr holds it */
    ck_assert_str_eq(crmm_resource_kind(mr), plugin);
    ck_assert_int_eq(mr->device, device);
    ck_assert_int_eq(crmm_resource_upstream(mr)->device, device);
    ck_assert(crmm_resource_is_device_accessible(mr));
    ck_assert(!crmm_resource_is_host_accessible(mr));
    return mr;
}

CRMM_TEST(pools_and_arenas_of_both_devices_from_eight_threads)
{
    crmm_resource *mr[RESOURCES] = {
        create_on_device(0, "pool", "initial_size=256MiB"),
        create_on_device(0, "arena", "arena_size=256MiB"),
        create_on_device(1, "pool", "initial_size=256MiB"),
        create_on_device(1, "arena", "arena_size=256MiB"),
    };
    ck_assert_cuda(cudaSetDevice(0));
    worker w[WORKERS];
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        crmm_resource *m = mr[i / THREADS_PER_RESOURCE];
        w[i] = (worker){.mr = m, .device = m->device, .seed = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1)};
        ck_assert_int_eq(pthread_create(&t[i], NULL, worker_run, &w[i]), 0);
    }
    for (int i = 0; i < WORKERS; i++)
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    for (int i = 0; i < WORKERS; i++) {
        ck_assert_msg(!w[i].failure[0], "thread %d: %s", i, w[i].failure);
        ck_assert_uint_gt(w[i].allocations, STEPS / 4);
    }
    expect_current(0, "the threads' work on both devices");
    for (int r = 0; r < RESOURCES; r++) {
        const char *kind = crmm_resource_kind(mr[r]);
        int dev = mr[r]->device;
        uint64_t made = 0;
        for (int k = 0; k < THREADS_PER_RESOURCE; k++)
            made += w[r * THREADS_PER_RESOURCE + k].allocations;
        uint64_t in_use = crmm_test_query(mr[r], CRMM_QUERY_BYTES_IN_USE);
        ck_assert_msg(in_use == 0, "%s of device %d: %llu bytes still in use", kind, dev, (unsigned long long)in_use);
        ck_assert_uint_eq(crmm_test_query(mr[r], CRMM_QUERY_ALLOCATIONS), 0);
        uint64_t total = crmm_test_query(mr[r], CRMM_QUERY_ALLOCATIONS_TOTAL);
        ck_assert_msg(total == made, "%s of device %d counted %llu allocations, its threads made %llu", kind, dev,
                      (unsigned long long)total, (unsigned long long)made);
        ck_assert_int_eq(crmm_resource_refcount(mr[r]), 1);
    }
    for (int r = 0; r < RESOURCES; r++)
        crmm_resource_release(mr[r]);
    expect_current(0, "releasing the resources of both devices");
}

/* ---- 3. copies between the devices --------------------------------------------------------- */

/* Let each device reach the other's memory when the hardware allows; copies must work either
 * way (cudaMemcpyDefault stages through the host otherwise). */
static void enable_peer_access_if_possible(void)
{
    for (int d = 0; d < 2; d++) {
        int can = 0;
        ck_assert_cuda(cudaDeviceCanAccessPeer(&can, d, 1 - d));
        if (!can)
            continue;
        ck_assert_cuda(cudaSetDevice(d));
        cudaError_t e = cudaDeviceEnablePeerAccess(1 - d, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled)
            cudaGetLastError();
        else
            ck_assert_msg(e == cudaSuccess, "cudaDeviceEnablePeerAccess(%d) on device %d: %s", 1 - d, d,
                          cudaGetErrorString(e));
    }
    ck_assert_cuda(cudaSetDevice(0));
}

/* In a test: a buffer of n bytes made with `device` current from its current resource. */
static crmm_device_buffer *buffer_on(int device, size_t n)
{
    ck_assert_cuda(cudaSetDevice(device));
    crmm_device_buffer *buf = NULL;
    ck_assert_crmm_ok(crmm_device_buffer_create(n, NULL, NULL, &buf));
    ck_assert_ptr_eq(crmm_device_buffer_resource(buf), crmm_get_current_device_resource());
    ck_assert_int_eq(crmm_device_buffer_device(buf), device);
    expect_on_device(crmm_device_buffer_ptr(buf), device);
    return buf;
}

/* In a test: buf holds pattern `seed` (read back on the default stream). */
static void expect_buffer_pattern(const crmm_device_buffer *buf, unsigned seed, const char *what)
{
    size_t n = crmm_device_buffer_size(buf);
    unsigned char *got = calloc(n, 1);
    ck_assert_ptr_nonnull(got);
    ck_assert_msg(crmm_device_buffer_copy_to_host(buf, got, n, NULL) == CRMM_OK, "%s: copy_to_host: %s", what,
                  crmm_last_error());
    expect_pattern(got, n, seed, what);
    free(got);
}

CRMM_TEST(copy_between_devices)
{
    enable_peer_access_if_possible();
    const size_t n = 8 * MiB + 3;
    crmm_device_buffer *on0 = buffer_on(0, n), *on1 = buffer_on(1, n);
    ck_assert_cuda(cudaSetDevice(0));

    /* device 0 -> device 1 on the default stream: done when the call returns */
    unsigned char *a = pattern_new(n, 1);
    ck_assert_crmm_ok(crmm_device_buffer_copy_from_host(on0, a, n, NULL));
    ck_assert_crmm_ok(crmm_copy_device_to_ptr(crmm_device_buffer_ptr(on0), crmm_device_buffer_ptr(on1), n, NULL));
    expect_current(0, "a copy to device 1");
    expect_buffer_pattern(on1, 1, "device 1 after the copy on the default stream");

    /* device 0 -> device 1 on a non-blocking stream of device 0, then synchronized */
    crmm_stream *s0;
    ck_assert_crmm_ok(crmm_stream_create(CRMM_STREAM_NON_BLOCKING, &s0));
    unsigned char *b = pattern_new(n, 2);
    ck_assert_crmm_ok(crmm_device_buffer_copy_from_host(on0, b, n, s0));
    ck_assert_crmm_ok(crmm_copy_device_to_ptr(crmm_device_buffer_ptr(on0), crmm_device_buffer_ptr(on1), n, s0));
    ck_assert_crmm_ok(crmm_stream_synchronize(s0));
    expect_buffer_pattern(on1, 2, "device 1 after the copy on a stream of device 0");

    /* device 1 -> device 0 on a non-blocking stream of device 1, device 1 current */
    ck_assert_cuda(cudaSetDevice(1));
    crmm_stream *s1;
    ck_assert_crmm_ok(crmm_stream_create(CRMM_STREAM_NON_BLOCKING, &s1));
    unsigned char *c = pattern_new(n, 3);
    ck_assert_crmm_ok(crmm_device_buffer_copy_from_host(on1, c, n, s1));
    ck_assert_crmm_ok(crmm_copy_device_to_ptr(crmm_device_buffer_ptr(on1), crmm_device_buffer_ptr(on0), n, s1));
    ck_assert_crmm_ok(crmm_stream_synchronize(s1));
    expect_current(1, "a copy to device 0");
    expect_buffer_pattern(on0, 3, "device 0 after the copy on a stream of device 1");

    /* a buffer of device 0 filled from device 1's memory by the buffer's own call */
    ck_assert_cuda(cudaSetDevice(0));
    ck_assert_crmm_ok(crmm_device_buffer_copy_from_host(on1, a, n, NULL));
    ck_assert_crmm_ok(crmm_device_buffer_copy_from_device(on0, crmm_device_buffer_ptr(on1), n, NULL));
    expect_buffer_pattern(on0, 1, "device 0 after copy_from_device from device 1");
    expect_current(0, "copy_from_device");

    unsigned char *host = malloc(n);
    ck_assert_ptr_nonnull(host);
    ck_assert_crmm_ok(crmm_copy_ptr_to_host(crmm_device_buffer_ptr(on0), host, n, NULL));
    expect_pattern(host, n, 1, "device 0 read with crmm_copy_ptr_to_host");
    free(host);

    crmm_device_buffer_destroy(on1);
    crmm_device_buffer_destroy(on0);
    crmm_stream_destroy(s1);
    crmm_stream_destroy(s0);
    expect_current(0, "destroying the streams and buffers of both devices");
    free(a);
    free(b);
    free(c);
}

/* ---- 4. device 1's work leaves device 0 current -------------------------------------------- */

static const char device_1_config[] =
    "[resource.gpu]\nplugin = cuda\n"
    "[resource.p]\nplugin = pool\nupstream = gpu\ninitial_size = 32MiB\n"
    "[resource.ar]\nplugin = arena\nupstream = gpu\narena_size = 64MiB\n";

/* In a test, with device 0 current: a buffer of device 1's resource mr grown, filled, read and
 * destroyed; device 0 stays current throughout. */
static void buffer_round_trip_on_device_1(crmm_resource *mr, unsigned seed)
{
    const size_t n = MiB + 5;
    crmm_device_buffer *buf;
    ck_assert_crmm_ok(crmm_device_buffer_create(n / 2, NULL, mr, &buf));
    expect_current(0, "creating a buffer of device 1");
    ck_assert_int_eq(crmm_device_buffer_device(buf), 1);
    expect_on_device(crmm_device_buffer_ptr(buf), 1);
    ck_assert_crmm_ok(crmm_device_buffer_resize(buf, n, NULL)); /* a new block of device 1 */
    expect_current(0, "growing a buffer of device 1");
    expect_on_device(crmm_device_buffer_ptr(buf), 1);
    unsigned char *h = pattern_new(n, seed);
    ck_assert_crmm_ok(crmm_device_buffer_copy_from_host(buf, h, n, NULL));
    expect_current(0, "filling a buffer of device 1");
    free(h);
    expect_buffer_pattern(buf, seed, "a buffer of device 1 used from device 0");
    expect_current(0, "reading a buffer of device 1");
    crmm_device_buffer_destroy(buf);
    expect_current(0, "destroying a buffer of device 1");
}

CRMM_TEST(device_1_work_keeps_device_0_current)
{
    ck_assert_cuda(cudaSetDevice(0));
    crmm_config *cfg;
    ck_assert_crmm_ok(crmm_config_load_string(device_1_config, "device_1_config", &cfg));
    crmm_resource *pool1, *arena1;
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "p", 1, &pool1));
    expect_current(0, "creating a pool of device 1");
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "ar", 1, &arena1));
    expect_current(0, "creating an arena of device 1");
    ck_assert_int_eq(pool1->device, 1);
    ck_assert_int_eq(arena1->device, 1);
    ck_assert_int_eq(crmm_resource_upstream(pool1)->device, 1);

    /* the registry: device 1's default made, replaced and released from device 0 */
    crmm_resource *def1 = crmm_get_per_device_resource(1);
    ck_assert_msg(def1 != NULL, "%s", crmm_last_error());
    expect_current(0, "creating device 1's default resource");
    ck_assert_int_eq(def1->device, 1);
    crmm_resource *prev = crmm_set_per_device_resource(1, pool1);
    ck_assert_ptr_eq(prev, def1);
    crmm_resource_release(prev); /* the last reference: device 1's default is destroyed */
    expect_current(0, "destroying device 1's default resource");
    ck_assert_ptr_eq(crmm_get_per_device_resource(1), pool1);

    buffer_round_trip_on_device_1(pool1, 11);
    buffer_round_trip_on_device_1(arena1, 12);
    buffer_round_trip_on_device_1(crmm_get_per_device_resource(1), 13);
    ck_assert_uint_eq(crmm_test_query(pool1, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(arena1, CRMM_QUERY_BYTES_IN_USE), 0);

    ck_assert_crmm_ok(crmm_resource_trim(pool1));
    expect_current(0, "trimming a pool of device 1");
    ck_assert_crmm_ok(crmm_resource_trim(arena1));
    expect_current(0, "trimming an arena of device 1");

    /* the last references go from device 0: the config's cache, then the registry's */
    crmm_resource_release(arena1);
    crmm_resource_release(pool1);
    ck_assert_int_eq(crmm_resource_refcount(pool1), 2); /* the config's and the registry's */
    crmm_config_free(cfg);
    expect_current(0, "destroying an arena of device 1 (crmm_config_free)");
    ck_assert_int_eq(crmm_resource_refcount(pool1), 1);
    crmm_finalize();
    expect_current(0, "destroying a pool of device 1 (crmm_finalize)");
}

int main(void)
{
    CRMM_TEST_GPU_GATE(2);
    return crmm_test_main("multi_gpu_2gpu", CRMM_TEST_GPU_TIMEOUT);
}
