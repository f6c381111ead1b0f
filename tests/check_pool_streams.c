/* check_pool_streams.c — the pool's stream logic on the CPU, against the scripted CUDA of
 * pool_streams_test.h: which CUDA calls the pool makes in each stream_reuse mode (none on the
 * same-stream path; to move blocks between streams one device synchronization and nothing on the
 * other stream's handle in sync mode, one record on it and one wait in event mode), and when.
 * Loop tests run once per mode (_i 0 = sync, 1 = event). Eight threads, failed synchronizations,
 * many streams, trim and destroy: check_pool_streams_threads.c. */
#include "build_config.h"
#include "pool_streams_test.h"

/* The running test's pool: the test makes it, the fixture releases it. */
static crmm_resource *p;

static void teardown(void) { crmm_resource_release(p); }

CRMM_LOOP_TEST_IN("pool_streams", the_same_stream_makes_no_cuda_call, EVENT + 1)
{
    p = pool_in_mode(_i, "initial_size=1MiB");
    cudaStream_t s = fake_stream_new(0);
    freed_on(p, 4 * KiB, s); /* first use of s: the initial chunk moves to s */
    fake_cuda_reset();
    for (int k = 0; k < 1000; k++) {
        void *b = alloc_on(p, 1 + (size_t)k * 512, s);
        free_on(p, b, 1 + (size_t)k * 512, s);
    }
    /* a stream seen for the first time costs no CUDA call either: freeing on t files the block there */
    void *b = alloc_on(p, 4 * KiB, s);
    cudaStream_t t = fake_stream_new(1);
    free_on(p, b, 4 * KiB, t);
    ck_assert_int_eq(fake_cuda_total(), 0);
    ck_assert_int_eq(fake_cuda.get_id, 0);
}

CRMM_TEST_IN("pool_streams", sync_mode_moves_blocks_after_one_device_synchronization)
{
    p = pool_in_mode(SYNC, "initial_size=1MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1), u = fake_stream_new(2);
    void *a = alloc_on(p, 64 * KiB, s), *c = alloc_on(p, 128 * KiB, s);
    void *e = alloc_on(p, MiB - 192 * KiB, s); /* the rest: nothing is left in the ready state */
    free_on(p, a, 64 * KiB, s);
    free_on(p, c, 128 * KiB, u);
    fake_cuda_reset();
    void *b = alloc_on(p, 64 * KiB, t);
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    ck_assert_int_eq(fake_cuda.record + fake_cuda.wait + fake_cuda.get_id + fake_cuda.stream_sync + fake_cuda.event_create, 0);
    ck_assert_int_eq(fake_stream_uses(s), 0); /* the other streams' handles never reach CUDA */
    ck_assert_int_eq(fake_stream_uses(u), 0);
    ck_assert_int_eq(fake_stream_uses(t), 0);
    /* every free block became usable with that one synchronization: u's too */
    void *d = alloc_on(p, 128 * KiB, t);
    ck_assert_ptr_eq(d, c);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    /* back and forth: one synchronization per move, and never an event */
    for (int k = 0; k < 10; k++) {
        cudaStream_t from = k % 2 ? s : t, to = k % 2 ? t : s;
        free_on(p, b, 64 * KiB, from);
        b = alloc_on(p, 64 * KiB, to);
        ck_assert_ptr_eq(b, a);
    }
    ck_assert_int_eq(fake_cuda.device_sync, 11);
    ck_assert_int_eq(fake_cuda.record + fake_cuda.wait + fake_cuda.event_create, 0);
    free_on(p, b, 64 * KiB, s);
    free_all_on(p, t, {d, 128 * KiB}, {e, MiB - 192 * KiB});
    crmm_resource_release(p);
    p = NULL;
    ck_assert_int_eq(fake_cuda.event_destroy, 0); /* no event was ever made */
}

CRMM_LOOP_TEST_IN("pool_streams", takes_from_other_streams_before_growing, EVENT + 1)
{
    /* no maximum: the pool could grow, but another stream's block is used instead, after a
     * device synchronization (sync) or one record (event) */
    p = pool_in_mode(_i, "initial_size=1MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    void *a = freed_on(p, MiB, s);
    fake_cuda_reset();
    void *b = alloc_on(p, MiB, t);
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(fake_cuda.record, _i == EVENT ? 1 : 0);
    ck_assert_int_eq(fake_cuda.device_sync, _i == EVENT ? 0 : 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), MiB);
    if (_i == EVENT) {
        free_on(p, b, MiB, t);
        return;
    }
    /* nothing free anywhere: growth, with no synchronization */
    void *c = alloc_on(p, MiB, t);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 2);
    /* free blocks elsewhere that are too small do not cost a synchronization: growth comes first */
    free_on(p, c, MiB, s);
    fake_cuda_reset();
    void *e = alloc_on(p, 2 * MiB, t);
    ck_assert_int_eq(fake_cuda.device_sync, 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 3);
    free_all_on(p, t, {b, MiB}, {e, 2 * MiB});
}

CRMM_TEST_IN("pool_streams", sync_mode_never_touches_a_destroyed_stream)
{
    p = pool_in_mode(SYNC, "initial_size=1MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1), u = fake_stream_new(2);
    void *a = alloc_on(p, 64 * KiB, s), *rest = alloc_on(p, MiB - 64 * KiB, s);
    free_on(p, a, 64 * KiB, s);
    fake_stream_destroy(s); /* its work may still be pending: the synchronization waits for it */
    fake_cuda_reset();
    void *b = alloc_on(p, 64 * KiB, t); /* use_stream fails the test if s's handle reached CUDA */
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    ck_assert_int_eq(fake_cuda.record + fake_cuda.wait + fake_cuda.get_id, 0);
    /* a new stream with s's handle, and another destroyed one: still nothing passes a handle */
    cudaStream_t s2 = fake_stream_new(0);
    ck_assert_ptr_eq(s2, s);
    free_on(p, b, 64 * KiB, t);
    void *c = alloc_on(p, 64 * KiB, u);
    ck_assert_ptr_eq(c, a);
    free_on(p, c, 64 * KiB, u);
    fake_stream_destroy(u);
    void *d = alloc_on(p, 64 * KiB, s2);
    ck_assert_ptr_eq(d, a);
    ck_assert_int_eq(fake_cuda.device_sync, 3);
    ck_assert_int_eq(fake_cuda.record + fake_cuda.wait + fake_cuda.get_id, 0);
    free_all_on(p, s2, {d, 64 * KiB}, {rest, MiB - 64 * KiB});
}

CRMM_TEST_IN("pool_streams", streams_side_by_side_share_the_ready_blocks)
{
    /* two streams that each allocate and free on themselves, in turns, with sizes their own lists
     * cannot serve: after the one synchronization that makes the initial chunk usable by any
     * stream, both take from the ready state and never from each other (were everything free
     * moved to the stream that missed, the other one would synchronize and take it all back at
     * its next miss: a synchronization per round) */
    p = pool_in_mode(SYNC, "initial_size=32MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    fake_cuda_reset();
    for (size_t k = 1; k <= 64; k++) {
        void *x = alloc_on(p, k * 4 * KiB, s), *y = alloc_on(p, k * 4 * KiB, t);
        free_on(p, x, k * 4 * KiB, s);
        free_on(p, y, k * 4 * KiB, t);
    }
    ck_assert_int_le(fake_cuda.device_sync, 1);
    ck_assert_int_eq(fake_cuda.record + fake_cuda.wait, 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), 32 * MiB);
}

CRMM_TEST_IN("pool_streams", sync_mode_prefers_ready_blocks)
{
    /* s's block fits but needs a synchronization; u's was forgotten (waited for): it is taken
     * without one, though s's state comes first */
    p = pool_in_mode(SYNC, "initial_size=1MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1), u = fake_stream_new(2);
    void *a = alloc_on(p, 64 * KiB, s), *b = alloc_on(p, 64 * KiB, s);
    free_on(p, a, 64 * KiB, s);
    free_on(p, b, 64 * KiB, u);
    ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)u));
    fake_stream_destroy(u);
    fake_cuda_reset();
    void *c = alloc_on(p, 64 * KiB, t);
    ck_assert_ptr_eq(c, b);
    ck_assert_int_eq(fake_cuda_total(), 0);
    free_on(p, c, 64 * KiB, t);
}

CRMM_TEST_IN("pool_streams", event_mode_orders_another_stream_by_one_event)
{
    p = pool_in_mode(EVENT, "initial_size=1MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    void *a = freed_on(p, 64 * KiB, s);
    fake_cuda_reset();
    void *b = alloc_on(p, 64 * KiB, t);
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(fake_cuda.record, 1);
    ck_assert_ptr_eq(fake_cuda.last_recorded, s);
    ck_assert_int_eq(fake_cuda.wait, 1);
    ck_assert_ptr_eq(fake_cuda.last_waiting, t);
    ck_assert_int_eq(fake_cuda.device_sync, 0);
    ck_assert_int_eq(fake_cuda.get_id, 0); /* the record is the only use of s's handle */
    ck_assert_int_eq(fake_stream_uses(s), 1);
    /* back and forth: one record and one wait per move, and still one event for all of them */
    for (int k = 0; k < 10; k++) {
        cudaStream_t from = k % 2 ? s : t, to = k % 2 ? t : s;
        free_on(p, b, 64 * KiB, from);
        b = alloc_on(p, 64 * KiB, to);
        ck_assert_ptr_eq(b, a);
    }
    ck_assert_int_eq(fake_cuda.record, 11);
    ck_assert_int_eq(fake_cuda.wait, 11);
    ck_assert_int_eq(fake_cuda.device_sync, 0);
    free_on(p, b, 64 * KiB, s);
    ck_assert_int_eq(fake_cuda.event_create, 0); /* the event made for the first move serves all */
    crmm_resource_release(p);
    p = NULL;
    ck_assert_int_eq(fake_cuda.event_destroy, 1);
}

CRMM_LOOP_TEST_IN("pool_streams", blocks_of_two_streams_merge_only_once_moved, EVENT + 1)
{
    p = pool_in_mode(_i, "initial_size=1MiB maximum_size=1MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    char *a = alloc_on(p, 256 * KiB, s), *b = alloc_on(p, 256 * KiB, s), *c = alloc_on(p, 512 * KiB, s);
    ck_assert_ptr_eq(b, a + 256 * KiB);
    ck_assert_ptr_eq(c, b + 256 * KiB);
    free_on(p, a, 256 * KiB, s);
    free_on(p, b, 256 * KiB, t); /* neighbours, but freed on different streams */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), 512 * KiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), 256 * KiB);
    free_on(p, c, 512 * KiB, t); /* merges with b: same stream */
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), 768 * KiB);
    fake_cuda_reset();
    /* 768 KiB: s's own 256 KiB is too small; t's block fits, moves to s and merges with it */
    void *x = alloc_on(p, 768 * KiB, s);
    ck_assert_ptr_eq(x, a);
    ck_assert_int_eq(fake_cuda.record, _i == EVENT ? 1 : 0);
    ck_assert_int_eq(fake_cuda.device_sync, _i == EVENT ? 0 : 1);
    ck_assert_int_eq(fake_stream_uses(t), _i == EVENT ? 1 : 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), 256 * KiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), 256 * KiB);
    free_on(p, x, 768 * KiB, s);
    /* event mode moved t's blocks to s, so x merges with the rest; in sync mode the rest is in
     * the ready state, which a block freed on s joins only at the next synchronization */
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), _i == EVENT ? MiB : 768 * KiB);
}

CRMM_LOOP_TEST_IN("pool_streams", out_of_room_merges_the_blocks_of_all_streams, EVENT + 1)
{
    /* t asks for 512 KiB: it holds 256 KiB, u holds the 256 KiB next to it, neither fits alone,
     * the maximum forbids growing; after a device synchronization they merge in t's list */
    p = pool_in_mode(_i, "initial_size=1MiB maximum_size=1MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1), u = fake_stream_new(2);
    char *a = alloc_on(p, 256 * KiB, s), *b = alloc_on(p, 256 * KiB, s), *c = alloc_on(p, 512 * KiB, s);
    free_on(p, a, 256 * KiB, t);
    free_on(p, b, 256 * KiB, u);
    fake_cuda_reset();
    void *x = alloc_on(p, 512 * KiB, t);
    ck_assert_ptr_eq(x, a);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    ck_assert_int_eq(fake_cuda.record + fake_cuda.wait, 0);
    ck_assert_int_eq(fake_stream_uses(u), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), MiB);
    /* with nothing free anywhere it is still out of memory, and says so */
    void *y = (void *)0x1;
    ck_assert_crmm(crmm_resource_allocate(p, 256 * KiB, (crmm_cuda_stream_t)t, &y), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(y);
    ck_assert_msg(strstr(crmm_last_error(), "failed to allocate 256.0 KiB"), "%s", crmm_last_error());
    free_on(p, x, 512 * KiB, t);
    free_on(p, c, 512 * KiB, s);
}

CRMM_TEST_IN("pool_streams", event_mode_a_failed_record_falls_back_to_synchronizing)
{
    p = pool_in_mode(EVENT, "initial_size=1MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    void *a = freed_on(p, 64 * KiB, s);
    fake_cuda_reset();
    fake_cuda.record_result = cudaErrorLaunchFailure;
    void *b = alloc_on(p, 64 * KiB, t);
    fake_cuda.record_result = cudaSuccess;
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(fake_cuda.record, 1);
    ck_assert_int_eq(fake_cuda.wait, 0);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    ck_assert_int_eq(fake_cuda.last_error, cudaSuccess); /* the error it caused was cleared */
    ck_assert_int_ge(fake_cuda.get_last_error, 1);
    free_on(p, b, 64 * KiB, t);
}

CRMM_LOOP_TEST_IN("pool_streams", a_forgotten_stream_needs_no_more_ordering, EVENT + 1)
{
    p = pool_in_mode(_i, "initial_size=1MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    void *a = freed_on(p, 64 * KiB, s);
    fake_cuda_reset();
    ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)s));
    ck_assert_int_eq(fake_cuda.stream_sync, 1);
    fake_stream_destroy(s); /* allowed in event mode too, once forgotten */
    fake_cuda_reset();
    void *x = alloc_on(p, 64 * KiB, t); /* another stream: no wait, and s's handle is not used */
    ck_assert_ptr_eq(x, a);
    ck_assert_int_eq(fake_cuda_total(), 0);
    free_on(p, x, 64 * KiB, t);
    ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)t));
    cudaStream_t s2 = fake_stream_new(0); /* the same handle, a new stream */
    fake_cuda_reset();
    void *b = alloc_on(p, 64 * KiB, s2);
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(fake_cuda.record + fake_cuda.wait + fake_cuda.device_sync, 0); /* waited for already */
    free_on(p, b, 64 * KiB, s2);
    /* forgetting again, or a stream the pool never saw, changes nothing */
    ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)fake_stream_new(5)));
    ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)s2));
    ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)s2));
    void *c = alloc_on(p, 64 * KiB, s2);
    ck_assert_ptr_eq(c, a);
    free_on(p, c, 64 * KiB, s2);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), MiB);
}

/* The default streams name a stream of whichever device is current: while another device is
 * current, the pool's own device must be made current around every CUDA call that passes one
 * (the event's wait on the legacy stream, forget_stream's synchronization), as arena and
 * fixed_size do; else the wait or the synchronization lands on the other device's stream, and
 * blocks whose last use on the pool device's stream may still be pending are handed out. */
CRMM_LOOP_TEST_IN("pool_streams", default_streams_are_the_pool_devices, EVENT + 1)
{
    p = pool_in_mode(_i, "initial_size=1MiB"); /* over the fake device: device 0 */
    cudaStream_t s = fake_stream_new(0);
    void *a = freed_on(p, 64 * KiB, s);
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    fake_cuda_reset();
    void *b = alloc_on(p, 64 * KiB, NULL); /* the legacy stream takes s's block (event mode) */
    if (_i == EVENT) {
        ck_assert_ptr_eq(b, a);
        ck_assert_int_eq(fake_cuda.wait, 1);
        ck_assert_ptr_null(fake_cuda.last_waiting);
        ck_assert_int_eq(fake_cuda.last_waiting_device, 0);
    }
    free_on(p, b, 64 * KiB, NULL);
    void *c = freed_on(p, 64 * KiB, cudaStreamPerThread);
    fake_cuda_reset();
    ck_assert_crmm_ok(crmm_pool_forget_stream(p, NULL));
    ck_assert_int_eq(fake_cuda.stream_sync, 1);
    ck_assert_int_eq(fake_cuda.last_synchronized_device, 0);
    fake_cuda_reset();
    ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)cudaStreamPerThread));
    ck_assert_int_eq(fake_cuda.stream_sync, 1);
    ck_assert_int_eq(fake_cuda.last_synchronized_device, 0);
    ck_assert_int_eq(fake_current_device(), 1); /* the caller's device is restored */
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    (void)c;
}

typedef struct ptds_arg { crmm_resource *p; void *block; size_t n; crmm_status st; } ptds_arg;

static void *use_own_default_stream(void *arg)
{
    ptds_arg *a = arg;
    a->st = crmm_resource_allocate(a->p, a->n, CRMM_CUDA_STREAM_PER_THREAD, &a->block);
    if (a->st == CRMM_OK)
        a->st = crmm_resource_deallocate(a->p, a->block, a->n, CRMM_CUDA_STREAM_PER_THREAD);
    return NULL;
}

/* _i: the mode (_i % 2), with room to grow (_i < 2) or none */
CRMM_LOOP_TEST_IN("pool_streams", per_thread_default_streams_are_told_apart, 4)
{
    /* with room to grow: event mode leaves another thread's per-thread stream alone (it cannot
     * record on it) and grows; sync mode synchronizes and takes its block, as from any stream;
     * without room, both modes take it after a device synchronization */
    int mode = _i % 2, takes = mode == SYNC || _i >= 2;
    p = pool_in_mode(mode, _i < 2 ? "initial_size=1MiB" : "initial_size=1MiB maximum_size=1MiB");
    ptds_arg a = {p, NULL, MiB, CRMM_ERROR_STATE};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, use_own_default_stream, &a), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_crmm_ok(a.st);
    fake_cuda_reset();
    void *b = alloc_on(p, MiB, cudaStreamPerThread);
    ck_assert_int_eq(fake_cuda.record, 0); /* never recorded on another thread's per-thread stream */
    ck_assert_msg((b == a.block) == takes, "the other thread's block was %s", takes ? "not taken" : "taken");
    ck_assert_int_eq(fake_cuda.device_sync, takes);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), takes ? 1 : 2);
    free_on(p, b, MiB, cudaStreamPerThread);
    /* the same thread's per-thread stream is one stream: reuse at once */
    fake_cuda_reset();
    ck_assert_ptr_eq(alloc_on(p, MiB, cudaStreamPerThread), b);
    ck_assert_int_eq(fake_cuda_total(), 0);
    free_on(p, b, MiB, cudaStreamPerThread);
}

static void *allocate_once_on(void *arg)
{
    ptds_arg *a = arg;
    a->st = crmm_resource_allocate(a->p, a->n, (crmm_cuda_stream_t)a->block, &a->block);
    return NULL;
}

CRMM_LOOP_TEST_IN("pool_streams", a_cached_block_stays_on_its_stream, EVENT + 1)
{
    /* with the per-thread caches on (thread_cache = on: a second thread allocated), a block this thread freed on s
     * is handed out again on s at once, without a CUDA call, and never on t without the pool's
     * ordering */
    p = pool_in_mode(_i, "initial_size=1MiB thread_cache=on");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1), u = fake_stream_new(2);
    free_on(p, alloc_on(p, 4 * KiB, s), 4 * KiB, s);
    ptds_arg other = {p, (void *)u, 4 * KiB, CRMM_ERROR_STATE};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, allocate_once_on, &other), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_crmm_ok(other.st);
    void *a = alloc_on(p, 4 * KiB, s);
    free_on(p, a, 4 * KiB, s); /* into this thread's cache for s */
    void *b = alloc_on(p, 4 * KiB, t);
    ck_assert_ptr_ne(b, a);
    fake_cuda_reset();
    void *c = alloc_on(p, 4 * KiB, s);
    ck_assert_ptr_eq(c, a);
    ck_assert_int_eq(fake_cuda_total(), 0);
    /* allocated on s, freed on t: the block is t's now (it leaves s's cache's map for t's list) */
    free_on(p, c, 4 * KiB, t);
    fake_cuda_reset();
    void *d = alloc_on(p, 4 * KiB, s);
    ck_assert_msg(d != c || fake_cuda.device_sync + fake_cuda.wait > 0, "a block freed on t reached s unordered");
    free_on(p, d, 4 * KiB, s);
    free_on(p, b, 4 * KiB, t);
    free_on(p, other.block, 4 * KiB, u);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
}

int main(void)
{
    Suite *s = suite_create("pool_streams");
    TCase *tc = crmm_test_tcase(s, "pool_streams", 0);
    tcase_add_checked_fixture(tc, NULL, teardown);
    return crmm_test_run(s);
}
