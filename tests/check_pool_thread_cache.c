/* check_pool_thread_cache.c — the pool's per-thread caches (thread_cache = on) over host memory,
 * where a thread has one cache per pool (check_pool_streams covers a cache per stream). A worker
 * thread makes one call at a time for the test, so the order of calls across threads is exact:
 * which block a thread gets back tells whether it came from a cache or from the pool.
 * thread_cache = auto and eight threads: check_pool_thread_cache_auto.c. */
#include "build_config.h"
#include "pool_thread_cache_test.h"

/* The running test's pool and worker: the fixture makes them, and ends them unless the test did. */
static crmm_resource *p;
static worker w;

static void setup(void)
{
    p = host_pool("initial_size=1MiB thread_cache=on");
    worker_start(&w);
}

static void teardown(void)
{
    worker_stop(&w);
    if (p)
        crmm_resource_release(p);
}

/* The test's pool is a new one with `params` instead. */
static void use_pool(const char *params)
{
    crmm_resource_release(p);
    p = host_pool(params);
}

CRMM_TEST_IN("thread_cache", a_second_thread_switches_the_caches_on)
{
    /* one thread: what it frees is the pool's again at once (the same block comes back to a
     * second thread); once two threads allocated, a block the worker freed stays its own */
    void *a = alloc(p, 4 * KiB);
    release(p, a, 4 * KiB);
    void *b = worker_caches_a_block(&w, p, 4 * KiB);
    ck_assert_ptr_eq(b, a); /* the pool's first block both times: nothing was cached before */
    void *c = alloc(p, 4 * KiB);
    ck_assert_ptr_ne(c, b); /* b waits in the worker's cache */
    ck_assert_ptr_eq(worker_alloc(&w, p, 4 * KiB), b);
    /* a block at most 1/8 larger than the request serves it; a larger one does not */
    worker_free(&w, p, b, 4 * KiB);
    ck_assert_ptr_eq(worker_alloc(&w, p, 4 * KiB - 256), b);
    worker_free(&w, p, b, 4 * KiB - 256);
    void *d = worker_alloc(&w, p, 3 * KiB);
    ck_assert_ptr_ne(d, b);
    ck_assert_ptr_eq(worker_alloc(&w, p, 4 * KiB), b);
    worker_free(&w, p, b, 4 * KiB);
    worker_free(&w, p, d, 3 * KiB);
    release(p, c, 4 * KiB);
}

/* A free with a size other than the one asked for is refused on each way a cached pool frees:
 * from the caller's own cache's live map, from another thread's cache's live map (under the
 * pool's lock) and from the pool's own map; the block stays live and counted, and its right free
 * works. */
static void refuses_wrong_size(void *x, size_t n)
{
    uint64_t used = q(p, CRMM_QUERY_BYTES_IN_USE);
    ck_assert_crmm(crmm_resource_deallocate(p, x, n + 1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "it is a block of") != NULL, "%s", crmm_last_error());
    ck_assert_crmm(crmm_resource_deallocate(p, x, n - 1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(p, x, 0, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), used);
}

CRMM_TEST_IN("thread_cache", a_wrong_size_is_refused_on_every_cached_path)
{
    (void)worker_caches_a_block(&w, p, 4 * KiB); /* the caches are on */
    void *own = worker_alloc(&w, p, 3000);       /* in the worker's cache's live map */
    crmm_status st = worker_call(&w, W_FREE, p, own, 3001);
    ck_assert_int_eq(st, CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(w.why, "as 3001 bytes: it is a block of 3000 bytes") != NULL, "%s", w.why);
    refuses_wrong_size(own, 3000);                       /* another thread's cache's map */
    void *mine = alloc(p, 5000);
    refuses_wrong_size(mine, 5000);
    void *big = alloc(p, 100 * MiB);                        /* never cached: the pool's own map */
    refuses_wrong_size(big, 100 * MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 3000 + 5000 + 100 * MiB);
    worker_free(&w, p, own, 3000);
    free_all(p, {mine, 5000}, {big, 100 * MiB});
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
}

CRMM_TEST_IN("thread_cache", thread_cache_off_keeps_the_pools_order)
{
    use_pool("initial_size=1MiB thread_cache=off");
    void *b = worker_caches_a_block(&w, p, 4 * KiB);
    void *c = alloc(p, 4 * KiB);
    ck_assert_ptr_eq(c, b); /* the worker's free went straight back to the pool */
    release(p, c, 4 * KiB);
    /* and the peaks are exact at every call */
    void *x = worker_alloc(&w, p, 3000), *y = alloc(p, 5000);
    release(p, y, 5000);
    worker_free(&w, p, x, 3000);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE_PEAK), 8000);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS_PEAK), 2);
}

/* How a cached block goes back to the pool in each test of cached_blocks_come_back. */
enum { BY_TRIM, BY_FORGET_STREAM, BY_THREAD_EXIT, BY_GROWTH, N_WAYS };

CRMM_LOOP_TEST_IN("thread_cache", cached_blocks_come_back, N_WAYS)
{
    /* the worker caches the block at the pool's start; until its cache is drained, this thread
     * never gets it; after, it does (the pool hands out the block that fits best, and the rest of
     * the pool is one larger block) */
    if (_i == BY_GROWTH)
        use_pool("initial_size=1MiB maximum_size=1MiB thread_cache=on");
    void *b = worker_caches_a_block(&w, p, 4 * KiB);
    void *c = alloc(p, 4 * KiB); /* live to the end: trim cannot give the chunk back */
    ck_assert_ptr_ne(c, b);
    void *big = NULL;
    switch (_i) {
    case BY_TRIM: ck_assert_crmm_ok(crmm_resource_trim(p)); break;
    case BY_FORGET_STREAM: ck_assert_crmm_ok(crmm_pool_forget_stream(p, NULL)); break;
    case BY_THREAD_EXIT: worker_stop(&w); break;
    case BY_GROWTH: big = alloc(p, MiB - 8 * KiB); break; /* the rest of the pool: the next 4 KiB is b or nothing */
    }
    ck_assert_ptr_eq(alloc(p, 4 * KiB), b);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), MiB);
    free_all(p, {b, 4 * KiB}, {c, 4 * KiB});
    if (big)
        release(p, big, MiB - 8 * KiB);
    worker_stop(&w);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0); /* every chunk wholly free: given back */
}

CRMM_TEST_IN("thread_cache", growth_takes_the_cached_blocks_before_more_memory)
{
    /* without a maximum, too: when the caches hold more than half of the pool (here the worker's
     * holds 768 KiB of 1 MiB), their blocks come back before the pool grows */
    release(p, alloc(p, 4 * KiB), 4 * KiB);
    void *x[4];
    for (int k = 0; k < 4; k++) /* the first switches the caches on; the others come from the pool */
        x[k] = worker_alloc(&w, p, 256 * KiB);
    for (int k = 0; k < 4; k++) /* the first goes back to the pool; the others into the cache */
        worker_free(&w, p, x[k], 256 * KiB);
    void *all = alloc(p, MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    release(p, all, MiB);
}

CRMM_TEST_IN("thread_cache", growth_takes_the_callers_cached_blocks_and_leaves_the_others)
{
    /* caches holding less than half of the pool: a growth takes back the calling thread's own
     * cached blocks (they merge into one that fits) but leaves another thread's cache as it is */
    use_pool("initial_size=4MiB thread_cache=on");
    char *wb = worker_caches_a_block(&w, p, 256 * KiB); /* at the pool's start, in the worker's cache */
    char *a = alloc(p, 256 * KiB), *b = alloc(p, 256 * KiB);
    ck_assert_ptr_eq(a, wb + 256 * KiB);
    ck_assert_ptr_eq(b, a + 256 * KiB);
    void *rest = alloc(p, 4 * MiB - 768 * KiB); /* nothing is free in the pool now */
    release(p, a, 256 * KiB);
    release(p, b, 256 * KiB); /* both into this thread's cache: 1/8 of the pool */
    /* no free block and no cached one of 512 KiB: this thread's two merge into it, and the
     * worker's, next to them, stays cached (with it, the best fit would start at wb) */
    void *ab = alloc(p, 512 * KiB);
    ck_assert_ptr_eq(ab, a);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 4 * MiB);
    /* nothing free, nothing in this thread's cache, the worker's holds 1/16 of the pool: growth */
    void *more = alloc(p, 256 * KiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 2);
    ck_assert_ptr_eq(worker_alloc(&w, p, 256 * KiB), wb); /* still in the worker's cache */
    worker_free(&w, p, wb, 256 * KiB);
    free_all(p, {more, 256 * KiB}, {ab, 512 * KiB}, {rest, 4 * MiB - 768 * KiB});
    worker_stop(&w);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
}

CRMM_TEST_IN("thread_cache", a_growth_raises_no_peak_that_never_was)
{
    /* the worker's 100 blocks go back into its cache; this thread's 50 and a growth later, at
     * most 100 blocks (or 50 and the large one's bytes) were ever live at once */
    release(p, alloc(p, 4 * KiB), 4 * KiB);
    void *wb[100], *a[50];
    for (int k = 0; k < 100; k++)
        wb[k] = worker_alloc(&w, p, 4 * KiB);
    for (int k = 0; k < 100; k++)
        worker_free(&w, p, wb[k], 4 * KiB);
    for (int k = 0; k < 50; k++)
        a[k] = alloc(p, 4 * KiB);
    void *big = alloc(p, MiB); /* no free block of 1 MiB: the pool grows */
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 2);
    ck_assert_uint_le(q(p, CRMM_QUERY_ALLOCATIONS_PEAK), 100);
    ck_assert_uint_le(q(p, CRMM_QUERY_BYTES_IN_USE_PEAK), 50 * 4 * KiB + MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 51);
    release(p, big, MiB);
    for (int k = 0; k < 50; k++)
        release(p, a[k], 4 * KiB);
}

CRMM_TEST_IN("thread_cache", frees_are_checked_at_the_call)
{
    void *b = worker_caches_a_block(&w, p, 4 * KiB);
    uint64_t free_before = q(p, CRMM_QUERY_BYTES_FREE);
    /* a second free of a cached block, by its thread and by another */
    ck_assert_int_eq(worker_call(&w, W_FREE, p, b, 4 * KiB), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(w.why, "is already free (double free?)"), "%s", w.why);
    ck_assert_crmm(crmm_resource_deallocate(p, b, 4 * KiB, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "is already free (double free?)"), "%s", crmm_last_error());
    ck_assert_crmm(crmm_resource_deallocate(p, (char *)b + 256, 256, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "is already free (double free?)"), "%s", crmm_last_error());
    /* inside a block live in the worker's cache's map, and not the pool's at all */
    void *c = worker_alloc(&w, p, 4 * KiB);
    ck_assert_ptr_eq(c, b);
    ck_assert_crmm(crmm_resource_deallocate(p, (char *)c + 256, 256, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "points inside the allocation at"), "%s", crmm_last_error());
    char foreign[512];
    ck_assert_crmm(crmm_resource_deallocate(p, foreign, 512, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "was not allocated by this pool"), "%s", crmm_last_error());
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), free_before - 4 * KiB); /* nothing changed */
    /* another thread's live block is freed for it (PyTorch's backward thread does this) */
    release(p, c, 4 * KiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_int_eq(worker_call(&w, W_FREE, p, c, 4 * KiB), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(w.why, "is already free (double free?)"), "%s", w.why);
}

CRMM_TEST_IN("thread_cache", counters_add_up_over_the_caches)
{
    worker_caches_a_block(&w, p, 4 * KiB);
    uint64_t total = q(p, CRMM_QUERY_ALLOCATIONS_TOTAL), total_bytes = q(p, CRMM_QUERY_BYTES_TOTAL);
    ck_assert_uint_eq(total, 3);
    ck_assert_uint_eq(total_bytes, 12 * KiB);
    void *a = worker_alloc(&w, p, 4000); /* from the worker's cache: a 4 KiB block */
    void *b = worker_alloc(&w, p, 1000); /* from the pool, into the worker's map */
    void *c = alloc(p, 300);             /* from the pool, into this thread's map */
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 3);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 5300);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS_TOTAL), total + 3);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_TOTAL), total_bytes + 5300);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), MiB - 4 * KiB - 1024 - 512); /* whole blocks */
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS_PEAK), 3);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE_PEAK), 5300);
    worker_free(&w, p, a, 4000);
    worker_free(&w, p, b, 1000);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 300);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), MiB - 512); /* cached blocks are free bytes */
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS_PEAK), 3);
    release(p, c, 300);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS_TOTAL), total + 3);
    /* the same after the caches drained into the pool */
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS_TOTAL), total + 3);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_TOTAL), total_bytes + 5300);
}

CRMM_TEST_IN("thread_cache", destroy_counts_the_caches_and_forgets_them)
{
    crmm_test_log_capture_begin();
    worker_caches_a_block(&w, p, 4 * KiB);
    worker_alloc(&w, p, 1000); /* leaked, in the worker's cache's map */
    worker_alloc(&w, p, 3900); /* leaked, from its cache */
    alloc(p, 500);             /* leaked, in this thread's */
    crmm_resource_release(p);
    /* the worker still holds its cache of the destroyed pool: a new pool (maybe at the same
     * address) never uses it */
    p = host_pool("initial_size=1MiB thread_cache=on");
    void *b = worker_caches_a_block(&w, p, 4 * KiB);
    void *c = alloc(p, 4 * KiB);
    ck_assert_ptr_ne(c, b);
    release(p, c, 4 * KiB);
    worker_stop(&w);
    crmm_resource_release(p);
    p = NULL;
    char *text = crmm_test_log_capture_end();
    ck_assert_msg(strstr(text, "pool resource destroyed with 3 live allocations (5.3 KiB)"), "log: %s", text);
    ck_assert_int_eq(crmm_test_count(text, "destroyed with"), 1);
    free(text);
}

CRMM_TEST_IN("thread_cache", blocks_over_64_mib_are_never_cached)
{
    worker_caches_a_block(&w, p, 4 * KiB);
    void *big = worker_alloc(&w, p, 65 * MiB);
    worker_free(&w, p, big, 65 * MiB);
    ck_assert_ptr_eq(alloc(p, 65 * MiB), big); /* the pool's again at once */
    release(p, big, 65 * MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 66 * MiB);
}

int main(void)
{
    Suite *s = suite_create("pool_thread_cache");
    TCase *tc = crmm_test_tcase(s, "thread_cache", 0);
    tcase_add_checked_fixture(tc, setup, teardown);
    return crmm_test_run(s);
}
