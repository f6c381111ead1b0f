/* check_pool_streams.c — the pool's stream logic on the CPU, against a scripted CUDA.
 *
 * This program defines the few CUDA runtime functions the pool calls for stream ordering
 * (cudaStreamGetId, cudaEventRecord, cudaStreamWaitEvent, cudaDeviceSynchronize, ...); it is
 * linked with -export-dynamic, so the pool plugin's calls land here instead of in libcudart.
 * Streams are fake handles that can be "destroyed" and "recreated" with the same handle, and
 * every call is counted, so the tests state exactly which CUDA calls the pool makes: none on
 * the same-stream path, one event record and one wait to move blocks between streams, one
 * device synchronization for a destroyed or reused handle, and so on. The upstream is host
 * memory that claims to be device memory, so the pool treats streams as real. */
#include "config.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <crmm/pool.h>
#include "test_support.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* ---- the scripted CUDA ------------------------------------------------------------------- */

typedef struct fake_stream { int live; unsigned long long id; } fake_stream;

static fake_stream streams[16];
static unsigned long long next_id = 100;
static int fake_event;
static cudaError_t record_result = cudaSuccess; /* what cudaEventRecord answers on a live stream */

static struct {
    int get_id, record, wait, device_sync, stream_sync, event_create, event_destroy, get_last_error;
    cudaStream_t last_recorded, last_waiting;
    cudaError_t last_error;      /* what cudaGetLastError would return */
    cudaError_t device_sync_result;
} calls;

static void reset_calls(void)
{
    cudaError_t r = calls.device_sync_result;
    memset(&calls, 0, sizeof calls);
    calls.device_sync_result = r;
}

static int total_calls(void)
{
    return calls.get_id + calls.record + calls.wait + calls.device_sync + calls.stream_sync + calls.event_create +
           calls.event_destroy;
}

static cudaStream_t stream_new(int i)
{
    streams[i].live = 1;
    streams[i].id = next_id++;
    return (cudaStream_t)&streams[i];
}

static void stream_destroy(cudaStream_t s) { ((fake_stream *)s)->live = 0; }

static int is_fake(cudaStream_t s)
{
    return (uintptr_t)s >= (uintptr_t)&streams[0] && (uintptr_t)s < (uintptr_t)&streams[16];
}

static cudaError_t failed_with(cudaError_t e)
{
    calls.last_error = e;
    return e;
}

cudaError_t cudaStreamGetId(cudaStream_t s, unsigned long long *id)
{
    calls.get_id++;
    if (s == NULL || s == cudaStreamLegacy) {
        *id = 1;
        return cudaSuccess;
    }
    if (s == cudaStreamPerThread) {
        *id = 2;
        return cudaSuccess;
    }
    if (!is_fake(s) || !((fake_stream *)s)->live)
        return failed_with(cudaErrorInvalidResourceHandle);
    *id = ((fake_stream *)s)->id;
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    (void)flags;
    calls.event_create++;
    *event = (cudaEvent_t)&fake_event;
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    (void)event;
    calls.event_destroy++;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t s)
{
    (void)event;
    calls.record++;
    calls.last_recorded = s;
    if (is_fake(s) && !((fake_stream *)s)->live)
        return failed_with(cudaErrorInvalidResourceHandle);
    return record_result == cudaSuccess ? cudaSuccess : failed_with(record_result);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t event, unsigned int flags)
{
    (void)event, (void)flags;
    calls.wait++;
    calls.last_waiting = s;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    calls.device_sync++;
    return calls.device_sync_result;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    (void)s;
    calls.stream_sync++;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    calls.get_last_error++;
    cudaError_t e = calls.last_error;
    calls.last_error = cudaSuccess;
    return e;
}

cudaError_t cudaGetDevice(int *device)
{
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    (void)device;
    return cudaSuccess;
}

/* ---- an upstream of host memory that says it is device memory ---------------------------- */

typedef struct fake_device_upstream { crmm_resource base; int live; } fake_device_upstream;

static crmm_status fd_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    (void)stream;
    *ptr = aligned_alloc(256, (bytes + 255) & ~(size_t)255);
    if (!*ptr)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "fake device: no memory");
    ((fake_device_upstream *)self)->live++;
    return CRMM_OK;
}

static crmm_status fd_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    (void)bytes, (void)stream;
    free(ptr);
    ((fake_device_upstream *)self)->live--;
    return CRMM_OK;
}

static void fd_destroy(crmm_resource *self) { free(self); }

static const crmm_resource_ops fd_ops = {.allocate = fd_allocate, .deallocate = fd_deallocate, .destroy = fd_destroy};

static crmm_resource *device_pool(const char *params)
{
    fake_device_upstream *u = calloc(1, sizeof *u);
    ck_assert_ptr_nonnull(u);
    crmm_resource_init(&u->base, &fd_ops, "fake_device", CRMM_RESOURCE_DEVICE_ACCESSIBLE, 0, NULL);
    crmm_resource *p = NULL;
    ck_assert_crmm_ok(crmm_resource_create("pool", params, &u->base, &p));
    crmm_resource_release(&u->base);
    ck_assert(crmm_resource_is_device_accessible(p));
    return p;
}

static void *alloc_on(crmm_resource *p, size_t n, cudaStream_t s)
{
    void *x = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(p, n, (crmm_cuda_stream_t)s, &x));
    ck_assert_ptr_nonnull(x);
    return x;
}

static void free_on(crmm_resource *p, void *x, size_t n, cudaStream_t s)
{
    ck_assert_crmm_ok(crmm_resource_deallocate(p, x, n, (crmm_cuda_stream_t)s));
}

static uint64_t q(crmm_resource *mr, crmm_query what)
{
    uint64_t v = 0;
    ck_assert_crmm_ok(crmm_resource_query(mr, what, &v));
    return v;
}

/* ---- tests ---------------------------------------------------------------------------------- */

START_TEST(the_same_stream_makes_no_cuda_call)
{
    crmm_resource *p = device_pool("initial_size=1MiB");
    cudaStream_t s = stream_new(0);
    void *a = alloc_on(p, 4 * KiB, s); /* first use of s: its id, and the initial chunk moves to s */
    free_on(p, a, 4 * KiB, s);
    reset_calls();
    for (int k = 0; k < 1000; k++) {
        void *b = alloc_on(p, 1 + (size_t)k * 512, s);
        free_on(p, b, 1 + (size_t)k * 512, s);
    }
    ck_assert_int_eq(total_calls(), 0);
    crmm_resource_release(p);
}
END_TEST

START_TEST(another_stream_is_ordered_by_one_event)
{
    crmm_resource *p = device_pool("initial_size=1MiB");
    cudaStream_t s = stream_new(0), t = stream_new(1);
    void *a = alloc_on(p, 64 * KiB, s);
    free_on(p, a, 64 * KiB, s);
    reset_calls();
    void *b = alloc_on(p, 64 * KiB, t);
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(calls.record, 1);
    ck_assert_ptr_eq(calls.last_recorded, s);
    ck_assert_int_eq(calls.wait, 1);
    ck_assert_ptr_eq(calls.last_waiting, t);
    ck_assert_int_eq(calls.device_sync, 0);
    /* back and forth: one record and one wait per move, and still one event for all of them */
    for (int k = 0; k < 10; k++) {
        cudaStream_t from = k % 2 ? s : t, to = k % 2 ? t : s;
        free_on(p, b, 64 * KiB, from);
        b = alloc_on(p, 64 * KiB, to);
        ck_assert_ptr_eq(b, a);
    }
    ck_assert_int_eq(calls.record, 11);
    ck_assert_int_eq(calls.wait, 11);
    ck_assert_int_eq(calls.device_sync, 0);
    free_on(p, b, 64 * KiB, s);
    ck_assert_int_eq(calls.event_create, 0); /* the event made for the first move serves all */
    crmm_resource_release(p);
    ck_assert_int_eq(calls.event_destroy, 1);
}
END_TEST

START_TEST(blocks_of_two_streams_merge_only_once_moved)
{
    crmm_resource *p = device_pool("initial_size=1MiB maximum_size=1MiB");
    cudaStream_t s = stream_new(0), t = stream_new(1);
    char *a = alloc_on(p, 256 * KiB, s), *b = alloc_on(p, 256 * KiB, s), *c = alloc_on(p, 512 * KiB, s);
    ck_assert_ptr_eq(b, a + 256 * KiB);
    ck_assert_ptr_eq(c, b + 256 * KiB);
    free_on(p, a, 256 * KiB, s);
    free_on(p, b, 256 * KiB, t); /* neighbours, but freed on different streams */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), 512 * KiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), 256 * KiB);
    free_on(p, c, 512 * KiB, t); /* merges with b: same stream */
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), 768 * KiB);
    reset_calls();
    /* 768 KiB: s's own 256 KiB is too small; t's block fits, moves to s and merges with it */
    void *x = alloc_on(p, 768 * KiB, s);
    ck_assert_ptr_eq(x, a);
    ck_assert_int_eq(calls.record, 1);
    ck_assert_int_eq(calls.device_sync, 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), 256 * KiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), 256 * KiB);
    free_on(p, x, 768 * KiB, s);
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), MiB);
    crmm_resource_release(p);
}
END_TEST

START_TEST(a_destroyed_stream_costs_one_synchronization)
{
    crmm_resource *p = device_pool("initial_size=1MiB");
    cudaStream_t s = stream_new(0), t = stream_new(1), u = stream_new(2);
    void *a = alloc_on(p, 64 * KiB, s);
    free_on(p, a, 64 * KiB, s);
    stream_destroy(s);
    reset_calls();
    void *b = alloc_on(p, 64 * KiB, t);
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(calls.device_sync, 1);
    ck_assert_int_eq(calls.record, 0); /* the dead handle was noticed before recording on it */
    ck_assert_int_eq(calls.last_error, cudaSuccess); /* and the error it caused was cleared */
    ck_assert_int_ge(calls.get_last_error, 1);
    /* the dead stream's state is gone: later moves are by event again */
    free_on(p, b, 64 * KiB, t);
    void *c = alloc_on(p, 64 * KiB, u);
    ck_assert_ptr_eq(c, a);
    ck_assert_int_eq(calls.device_sync, 1);
    ck_assert_int_eq(calls.record, 1);
    free_on(p, c, 64 * KiB, u);
    crmm_resource_release(p);
}
END_TEST

START_TEST(a_failed_record_falls_back_to_synchronizing)
{
    /* the handle still gives its id, but recording on it fails (as CUDA may answer for a
     * stream destroyed while its work drains) */
    crmm_resource *p = device_pool("initial_size=1MiB");
    cudaStream_t s = stream_new(0), t = stream_new(1);
    void *a = alloc_on(p, 64 * KiB, s);
    free_on(p, a, 64 * KiB, s);
    reset_calls();
    record_result = cudaErrorInvalidResourceHandle;
    void *b = alloc_on(p, 64 * KiB, t);
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(calls.record, 1);
    ck_assert_int_eq(calls.wait, 0);
    ck_assert_int_eq(calls.device_sync, 1);
    ck_assert_int_eq(calls.last_error, cudaSuccess);
    record_result = cudaSuccess;
    free_on(p, b, 64 * KiB, t);
    crmm_resource_release(p);
}
END_TEST

START_TEST(a_reused_handle_is_noticed)
{
    crmm_resource *p = device_pool("initial_size=1MiB");
    cudaStream_t s = stream_new(0), t = stream_new(1);
    void *a = alloc_on(p, 64 * KiB, s);
    free_on(p, a, 64 * KiB, s);
    stream_destroy(s);
    cudaStream_t s2 = stream_new(0); /* CUDA hands out the same handle for a new stream */
    ck_assert_ptr_eq(s2, s);
    reset_calls();
    void *b = alloc_on(p, 64 * KiB, t);
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(calls.record, 0); /* not recorded on the new stream that owns the handle now */
    ck_assert_int_eq(calls.device_sync, 1);
    free_on(p, b, 64 * KiB, t);
    crmm_resource_release(p);
}
END_TEST

START_TEST(a_forgotten_stream_needs_no_more_ordering)
{
    crmm_resource *p = device_pool("initial_size=1MiB");
    cudaStream_t s = stream_new(0);
    void *a = alloc_on(p, 64 * KiB, s);
    free_on(p, a, 64 * KiB, s);
    reset_calls();
    ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)s));
    ck_assert_int_eq(calls.stream_sync, 1);
    stream_destroy(s);
    cudaStream_t s2 = stream_new(0); /* the same handle, a new stream */
    reset_calls();
    void *b = alloc_on(p, 64 * KiB, s2);
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(calls.record + calls.wait + calls.device_sync, 0); /* waited for already */
    free_on(p, b, 64 * KiB, s2);
    /* forgetting again, or a stream the pool never saw, changes nothing */
    ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)stream_new(5)));
    ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)s2));
    ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)s2));
    void *c = alloc_on(p, 64 * KiB, s2);
    ck_assert_ptr_eq(c, a);
    free_on(p, c, 64 * KiB, s2);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), MiB);
    crmm_resource_release(p);
}
END_TEST

typedef struct ptds_arg { crmm_resource *p; void *block; size_t n; crmm_status st; } ptds_arg;

static void *use_own_default_stream(void *arg)
{
    ptds_arg *a = arg;
    a->st = crmm_resource_allocate(a->p, a->n, CRMM_CUDA_STREAM_PER_THREAD, &a->block);
    if (a->st == CRMM_OK)
        a->st = crmm_resource_deallocate(a->p, a->block, a->n, CRMM_CUDA_STREAM_PER_THREAD);
    return NULL;
}

START_TEST(per_thread_default_streams_are_told_apart)
{
    /* with room to grow, another thread's per-thread stream is left alone: no synchronization */
    crmm_resource *p = device_pool("initial_size=1MiB");
    ptds_arg a = {p, NULL, MiB, CRMM_ERROR_STATE};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, use_own_default_stream, &a), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_crmm_ok(a.st);
    reset_calls();
    void *b = alloc_on(p, MiB, cudaStreamPerThread);
    ck_assert_ptr_ne(b, a.block);
    ck_assert_int_eq(calls.device_sync, 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 2);
    free_on(p, b, MiB, cudaStreamPerThread);
    /* the same thread's per-thread stream is one stream: reuse at once */
    reset_calls();
    ck_assert_ptr_eq(alloc_on(p, MiB, cudaStreamPerThread), b);
    ck_assert_int_eq(total_calls(), 0);
    free_on(p, b, MiB, cudaStreamPerThread);
    crmm_resource_release(p);

    /* without room, the other thread's block is taken after a device synchronization */
    p = device_pool("initial_size=1MiB maximum_size=1MiB");
    a = (ptds_arg){p, NULL, MiB, CRMM_ERROR_STATE};
    ck_assert_int_eq(pthread_create(&th, NULL, use_own_default_stream, &a), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_crmm_ok(a.st);
    reset_calls();
    b = alloc_on(p, MiB, cudaStreamPerThread);
    ck_assert_ptr_eq(b, a.block);
    ck_assert_int_eq(calls.device_sync, 1);
    ck_assert_int_eq(calls.record, 0); /* never recorded on another thread's per-thread stream */
    free_on(p, b, MiB, cudaStreamPerThread);
    crmm_resource_release(p);
}
END_TEST

START_TEST(a_failed_synchronization_is_an_error_and_breaks_nothing)
{
    crmm_resource *p = device_pool("initial_size=1MiB maximum_size=1MiB");
    cudaStream_t s = stream_new(0), t = stream_new(1);
    void *a = alloc_on(p, MiB, s);
    free_on(p, a, MiB, s);
    stream_destroy(s);
    calls.device_sync_result = cudaErrorLaunchFailure;
    void *x = (void *)0x1;
    ck_assert_crmm(crmm_resource_allocate(p, MiB, (crmm_cuda_stream_t)t, &x), CRMM_ERROR_CUDA);
    ck_assert_ptr_null(x);
    ck_assert_msg(strstr(crmm_last_error(), "cudaDeviceSynchronize"), "%s", crmm_last_error());
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), MiB); /* the block is still there */
    calls.device_sync_result = cudaSuccess;
    void *b = alloc_on(p, MiB, t);
    ck_assert_ptr_eq(b, a);
    free_on(p, b, MiB, t);
    crmm_resource_release(p);
}
END_TEST

START_TEST(many_streams_keep_the_books)
{
    crmm_resource *p = device_pool("initial_size=256KiB");
    enum { S = 6, LIVE = 50 };
    cudaStream_t st[S];
    for (int k = 0; k < S; k++)
        st[k] = stream_new(k);
    void *live[LIVE] = {0};
    size_t size[LIVE] = {0};
    uint64_t seed = 3, rounded = 0;
    for (int step = 0; step < 20000; step++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        int k = (int)(seed % LIVE);
        cudaStream_t on = st[(seed >> 8) % S];
        if (live[k]) {
            free_on(p, live[k], size[k], on);
            rounded -= (size[k] + 255) & ~(size_t)255;
            live[k] = NULL;
        } else {
            size[k] = 1 + (size_t)((seed >> 16) % (64 * KiB));
            live[k] = alloc_on(p, size[k], on);
            rounded += (size[k] + 255) & ~(size_t)255;
            memset(live[k], k, size[k] < 64 ? size[k] : 64);
        }
        if (step % 101 == 0) {
            ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE) + rounded, q(p, CRMM_QUERY_BYTES_RESERVED));
            ck_assert_uint_le(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), q(p, CRMM_QUERY_BYTES_FREE));
        }
        if (step == 10000) /* a stream goes away halfway: its free blocks must not be lost */
            stream_destroy(st[0]), st[0] = stream_new(S);
    }
    for (int k = 0; k < LIVE; k++)
        if (live[k])
            free_on(p, live[k], size[k], st[k % S]);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    reset_calls();
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_int_eq(calls.device_sync, 1); /* memory goes back upstream only once the device is idle */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    crmm_resource_release(p);
}
END_TEST

START_TEST(trim_joins_blocks_freed_on_different_streams)
{
    crmm_resource *p = device_pool("initial_size=1MiB");
    cudaStream_t s = stream_new(0), t = stream_new(1);
    void *a = alloc_on(p, 512 * KiB, s), *b = alloc_on(p, 512 * KiB, s);
    free_on(p, a, 512 * KiB, s);
    free_on(p, b, 512 * KiB, t);
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), 512 * KiB);
    reset_calls();
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_int_eq(calls.device_sync, 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 0);
    /* a trim with nothing to give back does not synchronize */
    void *c = alloc_on(p, 512 * KiB, t);
    reset_calls();
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_int_eq(calls.device_sync, 0);
    free_on(p, c, 512 * KiB, t);
    crmm_resource_release(p);
}
END_TEST

START_TEST(destroy_synchronizes_before_returning_memory)
{
    crmm_resource *p = device_pool("initial_size=1MiB");
    reset_calls();
    crmm_resource_release(p);
    ck_assert_int_eq(calls.device_sync, 1);
    ck_assert_int_eq(calls.event_destroy, 0); /* no event was ever made */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool_streams");
    TCase *tc = tcase_create("pool_streams");
    tcase_add_test(tc, the_same_stream_makes_no_cuda_call);
    tcase_add_test(tc, another_stream_is_ordered_by_one_event);
    tcase_add_test(tc, blocks_of_two_streams_merge_only_once_moved);
    tcase_add_test(tc, a_destroyed_stream_costs_one_synchronization);
    tcase_add_test(tc, a_failed_record_falls_back_to_synchronizing);
    tcase_add_test(tc, a_reused_handle_is_noticed);
    tcase_add_test(tc, a_forgotten_stream_needs_no_more_ordering);
    tcase_add_test(tc, per_thread_default_streams_are_told_apart);
    tcase_add_test(tc, a_failed_synchronization_is_an_error_and_breaks_nothing);
    tcase_add_test(tc, many_streams_keep_the_books);
    tcase_add_test(tc, trim_joins_blocks_freed_on_different_streams);
    tcase_add_test(tc, destroy_synchronizes_before_returning_memory);
    suite_add_tcase(s, tc);
    return crmm_test_run(s);
}
