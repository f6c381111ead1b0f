/* check_arena_streams_threads.c — the arena's stream logic on the CPU, against the scripted CUDA
 * of fakes/fake_stream_cuda.c (as check_arena_streams.c): the waits defragmenting and thread exit
 * make, which streams are one (per-thread default streams, NULL and the legacy handle), the dump,
 * host memory, and many streams and threads at once. */
#include "build_config.h"
#include "arena_streams_test.h"
#include "block_pattern.h"

/* ---- the device synchronizations that were there already ----------------------------------- */

typedef struct stream_job {
    crmm_resource *mr;
    cudaStream_t stream;
    size_t small, large;
    crmm_status st;
} stream_job;

/* On its stream: a small block (unless j->small is 0) and a large one, both freed; then exit. */
static void *use_and_exit(void *arg)
{
    stream_job *j = arg;
    crmm_cuda_stream_t s = (crmm_cuda_stream_t)j->stream;
    void *a = NULL, *b = NULL;
    j->st = j->small ? crmm_resource_allocate(j->mr, j->small, s, &a) : CRMM_OK;
    if (j->st == CRMM_OK)
        j->st = crmm_resource_allocate(j->mr, j->large, s, &b);
    if (j->st == CRMM_OK && j->small)
        j->st = crmm_resource_deallocate(j->mr, a, j->small, s);
    if (j->st == CRMM_OK)
        j->st = crmm_resource_deallocate(j->mr, b, j->large, s);
    return NULL;
}

static void run_thread(stream_job *j)
{
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, use_and_exit, j), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_crmm_ok(j->st);
}

/* A thread arena's last superblock leaves it by a defragment (_i 0) or by the thread's exit (_i
 * 1), after one device synchronization; then everything is free for all: a request for the whole
 * arena on another stream waits no more (the large block's stream tag is void with it). With
 * nothing left to take, defragment does not wait. */
CRMM_LOOP_TEST_IN("arena_streams", defragment_or_thread_exit_makes_everything_free_for_all, 2)
{
    crmm_resource *mr = device_arena("arena_size=4MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    stream_job j = {mr, s, 1000, 2 * MiB, CRMM_ERROR_STATE}; /* s's thread arena holds a superblock */
    if (_i) {
        run_thread(&j);
    } else {
        use_and_exit(&j); /* on this thread, which stays */
        ck_assert_crmm_ok(j.st);
        ck_assert_int_eq(fake_cuda_total(), 0);
        ck_assert_crmm_ok(crmm_resource_control(mr, CRMM_ARENA_DEFRAGMENT, NULL));
    }
    ck_assert_int_eq(fake_cuda.device_sync, 1); /* the empty superblock moves: one wait */
    ck_assert_uint_eq(stats(mr).global_largest_free, 4 * MiB);
    void *all = alloc_on(mr, 4 * MiB, t);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    ck_assert_uint_eq(stats(mr).stream_syncs, 0);
    free_on(mr, all, 4 * MiB, t);
    fake_cuda_reset();
    ck_assert_crmm_ok(crmm_resource_control(mr, CRMM_ARENA_DEFRAGMENT, NULL));
    ck_assert_int_eq(fake_cuda_total(), 0);
    crmm_resource_release(mr);
}

/* On its stream: two small blocks of one superblock, one of them freed; the other is left to the
 * caller. Then exit. */
typedef struct half_job {
    crmm_resource *mr;
    cudaStream_t stream;
    void *freed, *kept;
    crmm_status st;
} half_job;

static void *free_one_and_exit(void *arg)
{
    half_job *j = arg;
    crmm_cuda_stream_t s = (crmm_cuda_stream_t)j->stream;
    j->st = crmm_resource_allocate(j->mr, 1000, s, &j->freed);
    if (j->st == CRMM_OK)
        j->st = crmm_resource_allocate(j->mr, 1000, s, &j->kept);
    if (j->st == CRMM_OK)
        j->st = crmm_resource_deallocate(j->mr, j->freed, 1000, s);
    return NULL;
}

/* A thread's wait for the device at its exit fails: the block it freed on its stream s may still
 * be in use there. Its superblock, which has a live block, is quarantined: no other stream is
 * given that block, and once the last block is freed, the superblock goes back to the global
 * arena needing a device synchronization before another stream takes it. */
CRMM_TEST_IN("arena_streams", a_failed_wait_at_thread_exit_keeps_its_frees_from_other_streams)
{
    crmm_resource *mr = device_arena("arena_size=2MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    half_job j = {mr, s, NULL, NULL, CRMM_ERROR_STATE};
    pthread_t th;
    fake_cuda.device_sync_result = cudaErrorLaunchFailure;
    crmm_test_log_capture_begin();
    ck_assert_int_eq(pthread_create(&th, NULL, free_one_and_exit, &j), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    char *log = crmm_test_log_capture_end();
    ck_assert_msg(strstr(log, "cudaDeviceSynchronize"), "%s", log);
    free(log);
    fake_cuda.device_sync_result = cudaSuccess;
    ck_assert_crmm_ok(j.st);
    ck_assert_int_eq(fake_cuda.device_sync, 1); /* the wait that failed */
    ck_assert_uint_eq(stats(mr).superblocks_detached, 1);
    void *x = alloc_on(mr, 1000, t);
    ck_assert_msg(x != j.freed || fake_cuda.device_sync > 1,
                  "a block freed on stream s went to stream t without a wait after s's wait failed");
    ck_assert_int_eq(fake_cuda.device_sync, 1); /* from the other superblock: no wait needed */
    free_on(mr, x, 1000, t);
    free_on(mr, j.kept, 1000, t); /* the quarantined superblock's last block */
    crmm_arena_stats st = stats(mr);
    ck_assert_uint_eq(st.superblocks_detached, 0);
    ck_assert_uint_eq(st.superblocks, 1); /* t's, held by this thread: the other one is free */
    void *big = alloc_on(mr, MiB, t); /* only that one fits: t takes it after a wait */
    ck_assert_int_eq(fake_cuda.device_sync, 2);
    ck_assert_uint_eq(stats(mr).stream_syncs, 1);
    free_on(mr, big, MiB, t);
    crmm_resource_release(mr);
}

/* A thread that emptied its superblock itself exits, and its wait for the device at exit is slow
 * (the hook holds it there). Meanwhile a request for the whole arena on another stream fails and
 * defragments: the exiting thread's empty superblock must come back, as it did before owned
 * superblocks could be taken from live owners (it was EMPTY, taken by CAS whatever its owner did).
 * An owner that waits for the device inside one of its operations keeps a defragmenter out of its
 * superblocks for as long as the wait lasts. */
static holder exit_gate = HOLDER(NULL, .last = CRMM_OK);

static void hold_exit_in_device_sync(void)
{
    holder_go(&exit_gate, 1);
    holder_wait(&exit_gate, 2);
}

static void *empty_own_superblock_and_exit(void *arg)
{
    half_job *j = arg;
    crmm_cuda_stream_t s = (crmm_cuda_stream_t)j->stream;
    j->st = crmm_resource_allocate(j->mr, 1000, s, &j->freed);
    if (j->st == CRMM_OK)
        j->st = crmm_resource_deallocate(j->mr, j->freed, 1000, s);
    fake_cuda.during_device_sync = hold_exit_in_device_sync; /* the next wait is the one at exit */
    return NULL;
}

CRMM_TEST_IN("arena_streams", a_thread_waiting_for_the_device_at_exit_still_gives_up_its_empty_superblock)
{
    crmm_resource *mr = device_arena("arena_size=2MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    half_job j = {mr, s, NULL, NULL, CRMM_ERROR_STATE};
    pthread_t th;
    /* this thread's table has its entry for t now: the request below needs no registry_lock,
     * which the exiting thread holds while it waits */
    freed_on(mr, MiB, t);
    ck_assert_int_eq(pthread_create(&th, NULL, empty_own_superblock_and_exit, &j), 0);
    holder_wait(&exit_gate, 1); /* the thread is in its wait at exit, its superblock empty */
    ck_assert_crmm_ok(j.st);
    ck_assert_uint_eq(stats(mr).superblocks_held, 1);
    void *all = NULL;
    crmm_status st = crmm_resource_allocate(mr, 2 * MiB, (crmm_cuda_stream_t)t, &all);
    holder_go(&exit_gate, 2);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_msg(st == CRMM_OK, "the whole arena was free but the request failed: %s", crmm_last_error());
    ck_assert_uint_eq(stats(mr).defragmentations, 1);
    free_on(mr, all, 2 * MiB, t);
    ck_assert_uint_eq(stats(mr).superblocks, 0);
    crmm_resource_release(mr);
}

/* ---- which streams are one ----------------------------------------------------------------- */

CRMM_TEST_IN("arena_streams", per_thread_default_streams_of_two_threads_are_two_streams)
{
    /* the arena is one large block: each thread's per-thread stream frees it in turn */
    crmm_resource *mr = device_arena("arena_size=1MiB");
    stream_job j = {mr, cudaStreamPerThread, 0, MiB, CRMM_ERROR_STATE};
    run_thread(&j);
    ck_assert_int_eq(fake_cuda_total(), 0); /* it held no superblock: its exit did not wait */
    void *a = alloc_on(mr, MiB, cudaStreamPerThread); /* another thread's: a wait */
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    free_on(mr, a, MiB, cudaStreamPerThread);
    void *b = alloc_on(mr, MiB, cudaStreamPerThread); /* this thread's own: at once */
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    free_on(mr, b, MiB, cudaStreamPerThread);
    run_thread(&j); /* and a third thread waits for this one's */
    ck_assert_int_eq(fake_cuda.device_sync, 2);
    ck_assert_int_eq(fake_cuda.stream_sync, 0);
    ck_assert_uint_eq(stats(mr).stream_syncs, 2);
    crmm_resource_release(mr);
}

CRMM_TEST_IN("arena_streams", null_and_the_legacy_handle_are_one_stream)
{
    crmm_resource *mr = device_arena("arena_size=1MiB");
    void *a = freed_on(mr, MiB, NULL);
    void *b = alloc_on(mr, MiB, cudaStreamLegacy);
    ck_assert_ptr_eq(b, a);
    free_on(mr, b, MiB, cudaStreamLegacy);
    b = alloc_on(mr, MiB, NULL);
    ck_assert_int_eq(fake_cuda_total(), 0);
    free_on(mr, b, MiB, NULL);
    b = alloc_on(mr, MiB, cudaStreamPerThread); /* but not the per-thread stream */
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    free_on(mr, b, MiB, cudaStreamPerThread);
    crmm_resource_release(mr);
}

CRMM_TEST_IN("arena_streams", the_dump_names_the_stream_a_span_waits_for)
{
    crmm_resource *mr = device_arena("arena_size=4MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    char *dir = crmm_test_tmpdir(), path[4200], want[64];
    ck_assert_ptr_nonnull(dir);
    snprintf(path, sizeof path, "%s/dump.log", dir);
    void *a = freed_on(mr, 2 * MiB, s);
    ck_assert_crmm_ok(crmm_resource_control(mr, CRMM_ARENA_DUMP, path));
    char *text = crmm_test_read_file_or_fail(path);
    snprintf(want, sizeof want, "size=4.0 MiB, freed on stream %p\n", (void *)s);
    ck_assert_msg(strstr(text, want), "no \"%s\" in:\n%s", want, text);
    ck_assert_msg(strstr(text, "another stream: 0\n"), "%s", text);
    free(text);
    a = alloc_on(mr, 2 * MiB, t); /* after the wait the rest is free for all */
    unlink(path);
    ck_assert_crmm_ok(crmm_resource_control(mr, CRMM_ARENA_DUMP, path));
    text = crmm_test_read_file_or_fail(path);
    ck_assert_msg(!strstr(text, ", freed on"), "%s", text);
    ck_assert_msg(strstr(text, "another stream: 1\n"), "%s", text);
    free(text);
    free_on(mr, a, 2 * MiB, t);
    free(dir);
    crmm_resource_release(mr);
}

/* ---- host memory, many streams, many threads ------------------------------------------------ */

CRMM_TEST_IN("arena_streams", host_memory_makes_no_cuda_call)
{
    fake_cuda_reset();
    crmm_resource *host = crmm_test_create("host", "", NULL);
    crmm_resource *mr = crmm_test_create("arena", "arena_size=4MiB", host);
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    void *a = freed_on(mr, 4 * MiB, s);
    void *b = alloc_on(mr, 4 * MiB, t);
    ck_assert_ptr_eq(b, a);
    free_on(mr, b, 4 * MiB, t);
    void *c = alloc_on(mr, 1000, t);
    free_on(mr, c, 1000, s);
    ck_assert_crmm_ok(crmm_resource_control(mr, CRMM_ARENA_DEFRAGMENT, NULL));
    crmm_resource_release(mr);
    crmm_resource_release(host);
    ck_assert_int_eq(fake_cuda_total(), 0);
    ck_assert_int_eq(fake_stream_uses(s) + fake_stream_uses(t), 0);
}

CRMM_TEST_IN("arena_streams", many_streams_keep_the_books)
{
    crmm_resource *mr = device_arena("arena_size=256MiB shards=2");
    enum { S = 6, LIVE = 40 };
    cudaStream_t st[S];
    for (int k = 0; k < S; k++)
        st[k] = fake_stream_new(k);
    void *live[LIVE] = {0};
    size_t size[LIVE] = {0};
    uint64_t seed = 7;
    int moves = 0;
    for (int step = 0; step < 20000; step++) {
        uint64_t r = crmm_test_rand(&seed);
        int k = (int)(r % LIVE);
        cudaStream_t on = st[(r >> 8) % S];
        if (live[k]) {
            if (!block_intact(live[k], size[k]))
                ck_abort_msg("step %d: block %p of %zu bytes was overwritten", step, live[k], size[k]);
            free_on(mr, live[k], size[k], on);
            live[k] = NULL;
        } else {
            size[k] = 1 + (size_t)((r >> 16) % ((r >> 40) & 1 ? 4 * MiB : 2 * KiB)); /* few classes: */
            /* every stream has its own superblock per class */
            int before = fake_cuda.device_sync;
            live[k] = alloc_on(mr, size[k], on);
            moves += fake_cuda.device_sync - before;
            fill_block(live[k], size[k]);
        }
        if (step == 10000) { /* a stream goes away halfway: its handle must never reach CUDA again */
            fake_stream_destroy(st[0]);
            st[0] = fake_stream_new(S);
        }
    }
    for (int k = 0; k < LIVE; k++)
        if (live[k])
            free_on(mr, live[k], size[k], st[k % S]);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_int_eq(fake_cuda.forbidden, 0);
    ck_assert_uint_eq(stats(mr).stream_syncs, (uint64_t)moves);
    ck_assert_int_gt(moves, 0);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0);
    crmm_resource_release(mr);
}

typedef struct own_stream_job {
    crmm_resource *mr;
    cudaStream_t stream;
    unsigned index;
    char why[160];
} own_stream_job;

/* Set C's pattern: random sizes up to 4 MiB, at most 8 live, all on the thread's own stream. */
static void *own_stream_work(void *arg)
{
    own_stream_job *j = arg;
    enum { LIVE = 8 };
    void *live[LIVE] = {0};
    size_t size[LIVE] = {0};
    uint64_t seed = 42 + j->index;
    crmm_cuda_stream_t s = (crmm_cuda_stream_t)j->stream;
    for (int step = 0; step < 20000 && !j->why[0]; step++) {
        uint64_t r = crmm_test_rand(&seed);
        int k = (int)(r % LIVE);
        if (live[k]) {
            if (crmm_resource_deallocate(j->mr, live[k], size[k], s) != CRMM_OK)
                snprintf(j->why, sizeof j->why, "free: %s", crmm_last_error());
            live[k] = NULL;
        } else {
            size[k] = 1 + (size_t)((r >> 16) % (4 * MiB));
            if (crmm_resource_allocate(j->mr, size[k], s, &live[k]) != CRMM_OK)
                snprintf(j->why, sizeof j->why, "allocate %zu: %s", size[k], crmm_last_error());
        }
    }
    for (int k = 0; k < LIVE; k++)
        if (live[k] && crmm_resource_deallocate(j->mr, live[k], size[k], s) != CRMM_OK)
            snprintf(j->why, sizeof j->why, "final free: %s", crmm_last_error());
    return NULL;
}

CRMM_TEST_IN("arena_streams", threads_on_their_own_streams_never_wait)
{
    crmm_resource *mr = device_arena("arena_size=512MiB");
    ck_assert_uint_eq(stats(mr).shards, 8);
    enum { T = 4 };
    pthread_t th[T];
    own_stream_job j[T];
    for (unsigned i = 0; i < T; i++) {
        j[i] = (own_stream_job){.mr = mr, .stream = fake_stream_new((int)i), .index = i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, own_stream_work, &j[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        ck_assert_msg(!j[i].why[0], "thread %d: %s", i, j[i].why);
    }
    /* their exits waited once each (they held superblocks); nothing else did */
    ck_assert_uint_eq(stats(mr).stream_syncs, 0);
    ck_assert_int_eq(fake_cuda.stream_sync, 0);
    ck_assert_int_le(fake_cuda.device_sync, T);
    crmm_resource_release(mr);
}

int main(void)
{
    fake_cuda.forbid_events_and_ids = 1; /* the arena never names an event nor asks a stream's id */
    return CRMM_TEST_MAIN_CASES("arena_streams_threads", {"arena_streams", 0});
}
