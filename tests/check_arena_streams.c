/* check_arena_streams.c — the arena's stream logic on the CPU, against the scripted CUDA of
 * fakes/fake_stream_cuda.c (linked with -export-dynamic, so the plugin's CUDA calls land there;
 * a destroyed stream's handle, an event or a stream id fails the test). The upstream is host
 * memory that says it is device memory. Stated: a block reused on its own stream costs no CUDA
 * call; on another stream one cudaDeviceSynchronize (never naming the freeing stream), after which
 * every older span is free for all; neighbours freed on two streams merge into a span that needs a
 * wait for either. Per-thread and legacy streams, many threads: check_arena_streams_threads.c. */
#include "build_config.h"
#include "arena_streams_test.h"

/* The running test's arena: the test makes it, the fixture releases it. */
static crmm_resource *mr;

static void teardown(void) { crmm_resource_release(mr); }

/* ---- one stream ---------------------------------------------------------------------------- */

CRMM_TEST_IN("arena_streams", the_same_stream_makes_no_cuda_call)
{
    mr = device_arena("arena_size=8MiB");
    cudaStream_t s = fake_stream_new(0);
    void *a = freed_on(mr, 3 * MiB, s);
    for (int k = 0; k < 1000; k++) {
        size_t n = 200 * KiB + (size_t)k * 7 * KiB; /* large: above 128 KiB */
        void *b = alloc_on(mr, n, s);
        if (b != a)
            ck_abort_msg("step %d: %zu bytes at %p, not at %p", k, n, b, a);
        free_on(mr, b, n, s);
    }
    /* small blocks too, and a mix of both live at once */
    void *x = alloc_on(mr, 1000, s), *y = alloc_on(mr, 2 * MiB, s), *z = alloc_on(mr, 64 * KiB, s);
    free_all_on(mr, s, {y, 2 * MiB}, {x, 1000}, {z, 64 * KiB});
    ck_assert_int_eq(fake_cuda_total(), 0);
    ck_assert_int_eq(fake_stream_uses(s), 0);
    ck_assert_uint_eq(stats(mr).stream_syncs, 0);
    crmm_resource_release(mr);
    mr = NULL;
    ck_assert_int_eq(fake_cuda.device_sync, 1); /* destroy waits before the memory goes back */
}

/* ---- another stream ------------------------------------------------------------------------ */

CRMM_TEST_IN("arena_streams", another_stream_waits_for_the_device_once)
{
    mr = device_arena("arena_size=8MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    void *a = freed_on(mr, MiB, s); /* the whole arena is one span tagged s now */
    ck_assert_int_eq(fake_cuda_total(), 0);
    void *b = alloc_on(mr, MiB, t);
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    ck_assert_int_eq(fake_cuda.stream_sync, 0);
    ck_assert_int_eq(fake_stream_uses(s), 0); /* s's handle never reaches CUDA */
    ck_assert_int_eq(fake_stream_uses(t), 0);
    ck_assert_uint_eq(stats(mr).stream_syncs, 1);
    /* back and forth: one synchronization per move */
    for (int k = 0; k < 10; k++) {
        cudaStream_t from = k % 2 ? s : t, to = k % 2 ? t : s;
        free_on(mr, b, MiB, from);
        b = alloc_on(mr, MiB, to);
        ck_assert_ptr_eq(b, a);
    }
    ck_assert_int_eq(fake_cuda.device_sync, 11);
    ck_assert_int_eq(fake_cuda.stream_sync, 0);
    ck_assert_uint_eq(stats(mr).stream_syncs, 11);
    free_on(mr, b, MiB, s);
}

CRMM_TEST_IN("arena_streams", one_synchronization_frees_every_older_span_for_all)
{
    /* a, b, c freed on s, each between live blocks; t, u and v take one each after one wait */
    mr = device_arena("arena_size=6MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1), u = fake_stream_new(2), v = fake_stream_new(3);
    char *p[6];
    for (int i = 0; i < 6; i++)
        p[i] = alloc_on(mr, MiB, s);
    for (int i = 0; i < 6; i += 2)
        free_on(mr, p[i], MiB, s);
    void *x = alloc_on(mr, MiB, t);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    void *y = alloc_on(mr, MiB, u), *z = alloc_on(mr, MiB, v);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    ck_assert_int_eq(fake_stream_uses(s), 0);
    ck_assert_msg(x != y && y != z && x != z, "one block handed out twice");
    for (int i = 0; i < 6; i += 2)
        ck_assert_msg(p[i] == x || p[i] == y || p[i] == z, "%p was not reused", (void *)p[i]);
    /* a span freed after the synchronization is tagged again */
    free_on(mr, x, MiB, t);
    void *w = alloc_on(mr, MiB, u);
    ck_assert_ptr_eq(w, x);
    ck_assert_int_eq(fake_cuda.device_sync, 2);
    free_all_on(mr, u, {w, MiB}, {y, MiB});
    free_on(mr, z, MiB, v);
    for (int i = 1; i < 6; i += 2)
        free_on(mr, p[i], MiB, s);
}

CRMM_TEST_IN("arena_streams", a_fit_that_needs_no_wait_comes_first)
{
    /* two shards: s's arena has home 0, t's home 1, u's home 0 again. Shard 0 holds only memory
     * freed on s: u takes shard 1's instead, without a wait; only when shard 1 is full does it wait */
    mr = device_arena("arena_size=8MiB shards=2");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1), u = fake_stream_new(2);
    char *a = freed_on(mr, MiB, s);
    freed_on(mr, 1000, t); /* a small block: t's thread arena, home shard 1 */
    char *b = alloc_on(mr, MiB, u);
    crmm_arena_shard_stats sh = {.shard = 0};
    ck_assert_crmm_ok(crmm_resource_control(mr, CRMM_ARENA_GET_SHARD_STATS, &sh));
    ck_assert_uint_eq(sh.thread_arenas, 2); /* s's and u's */
    ck_assert_msg(b >= a + 4 * MiB, "u got %p in shard 0 (at %p), memory freed on s", (void *)b, (void *)a);
    ck_assert_int_eq(fake_cuda_total(), 0);
    void *c = alloc_on(mr, 2 * MiB, u); /* shard 1 has 2 MiB left in one piece: still no wait */
    ck_assert_int_eq(fake_cuda_total(), 0);
    void *d = alloc_on(mr, 2 * MiB, u); /* only s's memory is left */
    ck_assert_ptr_eq(d, a);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    ck_assert_int_eq(fake_stream_uses(s), 0);
    free_all_on(mr, u, {b, MiB}, {c, 2 * MiB}, {d, 2 * MiB});
}

CRMM_TEST_IN("arena_streams", within_a_shard_a_fit_that_needs_no_wait_comes_first)
{
    /* one shard, full: p[1] freed on t, then p[3] on s (the free lists offer it first), then
     * p[5] and p[6] on t (2 MiB, a list further up) */
    mr = device_arena("arena_size=7MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    char *p[7];
    for (int i = 0; i < 7; i++)
        p[i] = alloc_on(mr, MiB, s);
    free_on(mr, p[1], MiB, t);
    free_on(mr, p[3], MiB, s);
    free_all_on(mr, t, {p[5], MiB}, {p[6], MiB});
    void *x = alloc_on(mr, MiB, t); /* not p[3]: p[1], the other of its list */
    ck_assert_ptr_eq(x, p[1]);
    void *y = alloc_on(mr, MiB, t); /* p[3] alone in its list: the larger span, t's */
    ck_assert_ptr_eq(y, p[5]);
    void *z = alloc_on(mr, MiB, t); /* the rest of it */
    ck_assert_ptr_eq(z, p[6]);
    ck_assert_int_eq(fake_cuda_total(), 0);
    void *w = alloc_on(mr, MiB, t); /* only s's is left: one wait */
    ck_assert_ptr_eq(w, p[3]);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    free_all_on(mr, t, {x, MiB}, {y, MiB}, {z, MiB}, {w, MiB});
    for (int i = 0; i < 6; i += 2)
        free_on(mr, p[i], MiB, s);
}

CRMM_TEST_IN("arena_streams", a_destroyed_stream_is_never_named)
{
    mr = device_arena("arena_size=4MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    void *a = freed_on(mr, 4 * MiB, s);
    fake_stream_destroy(s); /* its work may still be pending: the synchronization waits for it */
    void *b = alloc_on(mr, 4 * MiB, t); /* use_stream fails the test if s's handle reached CUDA */
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    ck_assert_int_eq(fake_cuda.stream_sync, 0);
    free_on(mr, b, 4 * MiB, t);
    /* a small block's superblock taken after t freed the whole arena: the same */
    fake_stream_destroy(t);
    cudaStream_t u = fake_stream_new(2);
    void *c = alloc_on(mr, 1000, u);
    ck_assert_int_eq(fake_cuda.device_sync, 2);
    ck_assert_int_eq(fake_cuda.stream_sync, 0);
    free_on(mr, c, 1000, u);
}

CRMM_TEST_IN("arena_streams", a_superblock_for_another_stream_waits_too)
{
    /* the arena is one superblock: memory of a large block freed on s, taken for t's small blocks */
    mr = device_arena("arena_size=1MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    void *a = freed_on(mr, MiB, s);
    void *b = alloc_on(mr, 256, t);
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    ck_assert_int_eq(fake_stream_uses(s), 0);
    ck_assert_uint_eq(stats(mr).stream_syncs, 1);
    free_on(mr, b, 256, t);
}

CRMM_TEST_IN("arena_streams", a_small_block_freed_on_another_stream_waits_for_that_stream)
{
    mr = device_arena("arena_size=4MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    void *a = alloc_on(mr, 1000, s);
    free_on(mr, a, 1000, t); /* t is alive: the caller uses it */
    ck_assert_int_eq(fake_cuda.stream_sync, 1);
    ck_assert_ptr_eq(fake_cuda.last_synchronized, t);
    ck_assert_int_eq(fake_stream_uses(s), 0);
    ck_assert_int_eq(fake_cuda.device_sync, 0);
}

/* ---- merging neighbours freed on different streams ----------------------------------------- */

CRMM_TEST_IN("arena_streams", neighbours_of_one_stream_merge_without_a_wait)
{
    mr = device_arena("arena_size=3MiB");
    cudaStream_t s = fake_stream_new(0);
    char *a = alloc_on(mr, MiB, s), *b = alloc_on(mr, MiB, s), *c = alloc_on(mr, MiB, s);
    ck_assert_ptr_eq(b, a + MiB);
    free_all_on(mr, s, {a, MiB}, {b, MiB});
    void *x = alloc_on(mr, 2 * MiB, s);
    ck_assert_ptr_eq(x, a);
    ck_assert_int_eq(fake_cuda_total(), 0);
    free_all_on(mr, s, {x, 2 * MiB}, {c, MiB});
}

CRMM_TEST_IN("arena_streams", neighbours_of_two_streams_need_a_wait_for_either)
{
    /* the arena is full: a, b, c. a freed on s and b on t merge into one span, "mixed" */
    mr = device_arena("arena_size=3MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    char *a = alloc_on(mr, MiB, s), *b = alloc_on(mr, MiB, s), *c = alloc_on(mr, MiB, s);
    free_on(mr, a, MiB, s);
    free_on(mr, b, MiB, t);
    ck_assert_uint_eq(stats(mr).global_largest_free, 2 * MiB);
    void *x = alloc_on(mr, MiB, s); /* s too: t may still be using the half that was b */
    ck_assert_ptr_eq(x, a);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    free_on(mr, x, MiB, s); /* now a (s, new) and b (void) merge into a span of s */
    x = alloc_on(mr, 2 * MiB, s);
    ck_assert_ptr_eq(x, a);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    /* the same the other way round, for t */
    free_on(mr, x, 2 * MiB, s);
    free_on(mr, c, MiB, t);
    x = alloc_on(mr, 3 * MiB, t);
    ck_assert_ptr_eq(x, a);
    ck_assert_int_eq(fake_cuda.device_sync, 2);
    ck_assert_int_eq(fake_stream_uses(s) + fake_stream_uses(t), 0);
    free_on(mr, x, 3 * MiB, t);
}

CRMM_LOOP_TEST_IN("arena_streams", a_void_neighbour_takes_the_other_side_s_tag, 4)
{
    /* _i & 1 = 0: the void span is the right neighbour of the one freed, 1: the left one;
     * _i & 2 = 0: the merged span is taken by t (its tag: no wait), 2: by s (a wait) */
    int left = _i & 1, by_s = _i & 2;
    mr = device_arena("arena_size=4MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1), u = fake_stream_new(2);
    char *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = alloc_on(mr, MiB, s);
    char *far = left ? p[0] : p[3], *near = left ? p[1] : p[2], *other = left ? p[3] : p[0];
    free_on(mr, far, MiB, t);
    free_on(mr, other, MiB, s); /* the free lists offer it first */
    void *x = alloc_on(mr, MiB, u); /* one wait: far's tag is void from now on */
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    ck_assert_ptr_eq(x, other);
    free_on(mr, near, MiB, t); /* t's, merged with the void far: a span of t */
    cudaStream_t taker = by_s ? s : t;
    void *y = alloc_on(mr, 2 * MiB, taker);
    ck_assert_ptr_eq(y, left ? far : near);
    ck_assert_int_eq(fake_cuda.device_sync, by_s ? 2 : 1);
    free_on(mr, y, 2 * MiB, taker);
    free_on(mr, x, MiB, u);
    free_on(mr, left ? p[2] : p[1], MiB, s);
}

CRMM_TEST_IN("arena_streams", the_rest_of_a_span_keeps_its_tag)
{
    mr = device_arena("arena_size=4MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    char *a = freed_on(mr, 4 * MiB, s);
    void *b = alloc_on(mr, MiB, s); /* cut from s's span: the rest is still s's */
    ck_assert_int_eq(fake_cuda_total(), 0);
    void *c = alloc_on(mr, MiB, t);
    ck_assert_ptr_eq(c, a + MiB);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    free_on(mr, b, MiB, s);
    free_on(mr, c, MiB, t);
}

/* ---- rare paths ---------------------------------------------------------------------------- */

CRMM_TEST_IN("arena_streams", spans_across_shards_keep_their_tags)
{
    /* two shards of 4 MiB; s's arena has home 0, t's home 1 */
    mr = device_arena("arena_size=8MiB shards=2");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    char *a = freed_on(mr, 6 * MiB, s); /* across the shards: both pieces are s's */
    void *b = alloc_on(mr, 5 * MiB, s); /* across again, s's own: no wait; the rest [5, 8) is s's */
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(fake_cuda_total(), 0);
    void *c = alloc_on(mr, 2 * MiB, t); /* only the rest fits */
    ck_assert_ptr_eq(c, a + 5 * MiB);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    free_on(mr, b, 5 * MiB, s);
    free_on(mr, c, 2 * MiB, t); /* shard 1: s's piece, t's block and a void page merge: mixed */
    void *d = alloc_on(mr, 6 * MiB, t); /* a run across shards: one wait, under the locks */
    ck_assert_ptr_eq(d, a);
    ck_assert_int_eq(fake_cuda.device_sync, 2);
    ck_assert_int_eq(fake_stream_uses(s), 0);
    ck_assert_uint_eq(stats(mr).stream_syncs, 2);
    free_on(mr, d, 6 * MiB, t);
    d = alloc_on(mr, 6 * MiB, t); /* t's own: no wait */
    ck_assert_int_eq(fake_cuda.device_sync, 2);
    free_on(mr, d, 6 * MiB, t);
}

static crmm_resource *race_arena;
static void *race_block;
static cudaStream_t race_stream;

static void free_during_the_wait(void)
{
    ck_assert_crmm_ok(crmm_resource_deallocate(race_arena, race_block, MiB, (crmm_cuda_stream_t)race_stream));
}

CRMM_TEST_IN("arena_streams", a_span_tagged_during_the_wait_is_waited_for_again)
{
    /* t finds only a (freed on s) and waits for the device; meanwhile u frees b, next to a: the
     * merged span is tagged anew, after the wait began, so t must wait once more */
    mr = device_arena("arena_size=3MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1), u = fake_stream_new(2);
    char *a = alloc_on(mr, MiB, s), *b = alloc_on(mr, MiB, s), *c = alloc_on(mr, MiB, s);
    free_on(mr, a, MiB, s);
    race_arena = mr;
    race_block = b;
    race_stream = u;
    fake_cuda.during_device_sync = free_during_the_wait;
    void *x = alloc_on(mr, MiB, t);
    ck_assert_ptr_eq(x, a);
    ck_assert_int_eq(fake_cuda.device_sync, 2);
    ck_assert_uint_eq(stats(mr).stream_syncs, 2);
    free_on(mr, x, MiB, t);
    free_on(mr, c, MiB, s);
}

CRMM_TEST_IN("arena_streams", a_failed_synchronization_is_an_error_and_breaks_nothing)
{
    mr = device_arena("arena_size=1MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    void *a = freed_on(mr, MiB, s);
    fake_cuda.device_sync_result = cudaErrorLaunchFailure;
    void *x = (void *)0x1;
    ck_assert_crmm(crmm_resource_allocate(mr, MiB, (crmm_cuda_stream_t)t, &x), CRMM_ERROR_CUDA);
    ck_assert_ptr_null(x);
    ck_assert_msg(strstr(crmm_last_error(), "cudaDeviceSynchronize"), "%s", crmm_last_error());
    ck_assert_int_eq(fake_cuda.last_error, cudaSuccess); /* the error it caused was cleared */
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_FREE), MiB); /* the block is still there */
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(stats(mr).stream_syncs, 0);
    fake_cuda.device_sync_result = cudaSuccess;
    void *b = alloc_on(mr, MiB, t);
    ck_assert_ptr_eq(b, a);
    free_on(mr, b, MiB, t);
    crmm_resource_release(mr);

    /* a defragment whose wait fails still gives the superblocks back, but for no stream (s's
     * own neither) before the device is waited for */
    mr = device_arena("arena_size=2MiB");
    void *small = freed_on(mr, 1000, s);
    fake_cuda.device_sync_result = cudaErrorLaunchFailure;
    crmm_test_log_capture_begin();
    ck_assert_crmm_ok(crmm_resource_control(mr, CRMM_ARENA_DEFRAGMENT, NULL));
    char *log = crmm_test_log_capture_end();
    ck_assert_msg(strstr(log, "cudaDeviceSynchronize"), "%s", log);
    free(log);
    fake_cuda.device_sync_result = cudaSuccess;
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    void *all = alloc_on(mr, 2 * MiB, s);
    ck_assert_ptr_eq(all, small);
    ck_assert_int_eq(fake_cuda.device_sync, 2);
    free_on(mr, all, 2 * MiB, s);
}

/* One thread that allocates and frees 1 MiB on one stream, then on another: one block of 1 MiB
 * was ever live, and the peaks say so (each stream has an arena of its own in the thread, whose
 * counts must not add up to more than the thread had live). */
CRMM_TEST_IN("arena_streams", one_thread_s_peaks_over_two_streams_are_exact)
{
    mr = device_arena("arena_size=8MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    for (int round = 0; round < 3; round++) {
        free_on(mr, alloc_on(mr, MiB, s), MiB, s);
        free_on(mr, alloc_on(mr, MiB, t), MiB, t);
    }
    ck_assert_uint_eq(q(mr, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(q(mr, CRMM_QUERY_ALLOCATIONS_PEAK), 1);
    ck_assert_uint_eq(q(mr, CRMM_QUERY_BYTES_IN_USE_PEAK), MiB);
}

int main(void)
{
    fake_cuda.forbid_events_and_ids = 1; /* the arena never names an event nor asks a stream's id */
    Suite *s = suite_create("arena_streams");
    TCase *tc = crmm_test_tcase(s, "arena_streams", 0);
    tcase_add_checked_fixture(tc, NULL, teardown);
    return crmm_test_run(s);
}
