/* check_pool_thread_cache.c — the pool's per-thread caches (parameter thread_cache), over host
 * memory so that it runs without a GPU.
 *
 * A pool over host memory has one stream state for every stream, so a thread has one cache per
 * pool here; check_pool_streams covers a cache per stream. Most tests use thread_cache = on and
 * drive a second thread step by step (a worker that runs one call at a time for the test), so
 * that the order of calls across threads is exact and the results are deterministic: which block
 * a thread gets back tells whether it came from a cache or from the pool.
 *
 * thread_cache = auto (the default) switches on when threads wait for the pool's lock. To make
 * them wait for certain, an upstream holds the lock (a growth calls it under the lock) until the
 * test sees a second thread spinning; this program defines sched_yield, which the spin lock calls
 * while it waits, and is linked with -export-dynamic so that the plugin's call lands here. */
#include "build_config.h"
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/crmm.h>
#include <crmm/log.h>
#include <crmm/pool.h>
#include "test_support.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* ---- a second thread that makes one call at a time for the test ---------------------------- */

enum { W_IDLE, W_ALLOC, W_FREE, W_EXIT };

typedef struct worker {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int op;                        /* what to do next; W_IDLE once done */
    crmm_resource *p;
    size_t n;
    void *ptr;
    crmm_status st;
    char why[512];                 /* crmm_last_error() of the call, which is per thread */
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (w->op == W_IDLE)
            pthread_cond_wait(&w->cv, &w->lock);
        if (w->op == W_EXIT)
            break;
        if (w->op == W_ALLOC)
            w->st = crmm_resource_allocate(w->p, w->n, NULL, &w->ptr);
        else
            w->st = crmm_resource_deallocate(w->p, w->ptr, w->n, NULL);
        snprintf(w->why, sizeof w->why, "%s", w->st == CRMM_OK ? "" : crmm_last_error());
        w->op = W_IDLE;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static void worker_start(worker *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cv, NULL);
    ck_assert_int_eq(pthread_create(&w->thread, NULL, worker_main, w), 0);
}

/* Run one call on the worker and wait for it. */
static crmm_status worker_call(worker *w, int op, crmm_resource *p, void *ptr, size_t n)
{
    pthread_mutex_lock(&w->lock);
    w->op = op;
    w->p = p;
    w->ptr = ptr;
    w->n = n;
    pthread_cond_broadcast(&w->cv);
    while (w->op != W_IDLE)
        pthread_cond_wait(&w->cv, &w->lock);
    crmm_status st = w->st;
    pthread_mutex_unlock(&w->lock);
    return st;
}

static void *worker_alloc(worker *w, crmm_resource *p, size_t n)
{
    crmm_status st = worker_call(w, W_ALLOC, p, NULL, n);
    ck_assert_msg(st == CRMM_OK, "worker: allocate %zu: %s", n, w->why);
    ck_assert_ptr_nonnull(w->ptr);
    return w->ptr;
}

static void worker_free(worker *w, crmm_resource *p, void *ptr, size_t n)
{
    crmm_status st = worker_call(w, W_FREE, p, ptr, n);
    ck_assert_msg(st == CRMM_OK, "worker: deallocate %p: %s", ptr, w->why);
}

/* End the worker's thread (its caches go back to their pools). */
static void worker_stop(worker *w)
{
    pthread_mutex_lock(&w->lock);
    w->op = W_EXIT;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->lock);
    ck_assert_int_eq(pthread_join(w->thread, NULL), 0);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->lock);
}

/* ---- helpers ------------------------------------------------------------------------------- */

static crmm_resource *host_pool(const char *params)
{
    crmm_resource *h = crmm_test_create("host", "", NULL);
    crmm_resource *p = crmm_test_create("pool", params, h);
    crmm_resource_release(h);
    return p;
}

static void *alloc(crmm_resource *p, size_t n)
{
    void *x = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(p, n, NULL, &x));
    ck_assert_ptr_nonnull(x);
    return x;
}

static void release(crmm_resource *p, void *x, size_t n) { ck_assert_crmm_ok(crmm_resource_deallocate(p, x, n, NULL)); }

static uint64_t q(crmm_resource *p, crmm_query what) { return crmm_test_query(p, what); }

/* On a new pool: this thread allocates and frees a block of n bytes, then the worker does twice
 * (its first allocation switches the caches on; the block of its second it caches). Returns the
 * cached block's address: the pool's lowest. */
static void *worker_caches_a_block(worker *w, crmm_resource *p, size_t n)
{
    release(p, alloc(p, n), n);
    void *a = worker_alloc(w, p, n);
    worker_free(w, p, a, n);
    void *b = worker_alloc(w, p, n);
    worker_free(w, p, b, n);
    return b;
}

/* ---- tests --------------------------------------------------------------------------------- */

START_TEST(a_second_thread_switches_the_caches_on)
{
    /* one thread: what it frees is the pool's again at once (the same block comes back to a
     * second thread); once two threads allocated, a block the worker freed stays its own */
    crmm_resource *p = host_pool("initial_size=1MiB thread_cache=on");
    void *a = alloc(p, 4 * KiB);
    release(p, a, 4 * KiB);
    worker w;
    worker_start(&w);
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
    worker_stop(&w);
    crmm_resource_release(p);
}
END_TEST

/* A free with a size other than the one asked for is refused on each way a cached pool frees:
 * from the caller's own cache's live map, from another thread's cache's live map (under the
 * pool's lock) and from the pool's own map; the block stays live and counted, and its right free
 * works. */
static void refuses_wrong_size(crmm_resource *p, void *x, size_t n)
{
    uint64_t used = q(p, CRMM_QUERY_BYTES_IN_USE);
    ck_assert_crmm(crmm_resource_deallocate(p, x, n + 1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "it is a block of") != NULL, "%s", crmm_last_error());
    ck_assert_crmm(crmm_resource_deallocate(p, x, n - 1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(p, x, 0, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), used);
}

START_TEST(a_wrong_size_is_refused_on_every_cached_path)
{
    crmm_resource *p = host_pool("initial_size=1MiB thread_cache=on");
    worker w;
    worker_start(&w);
    (void)worker_caches_a_block(&w, p, 4 * KiB); /* the caches are on */
    void *own = worker_alloc(&w, p, 3000);       /* in the worker's cache's live map */
    crmm_status st = worker_call(&w, W_FREE, p, own, 3001);
    ck_assert_int_eq(st, CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(w.why, "as 3001 bytes: it is a block of 3000 bytes") != NULL, "%s", w.why);
    refuses_wrong_size(p, own, 3000);                       /* another thread's cache's map */
    void *mine = alloc(p, 5000);
    refuses_wrong_size(p, mine, 5000);
    void *big = alloc(p, 100 * MiB);                        /* never cached: the pool's own map */
    refuses_wrong_size(p, big, 100 * MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 3000 + 5000 + 100 * MiB);
    worker_free(&w, p, own, 3000);
    release(p, mine, 5000);
    release(p, big, 100 * MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    worker_stop(&w);
    crmm_resource_release(p);
}
END_TEST

START_TEST(thread_cache_off_keeps_the_pools_order)
{
    crmm_resource *p = host_pool("initial_size=1MiB thread_cache=off");
    worker w;
    worker_start(&w);
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
    worker_stop(&w);
    crmm_resource_release(p);
}
END_TEST

/* How a cached block goes back to the pool in each test of cached_blocks_come_back. */
enum { BY_TRIM, BY_FORGET_STREAM, BY_THREAD_EXIT, BY_GROWTH, N_WAYS };

START_TEST(cached_blocks_come_back)
{
    /* the worker caches the block at the pool's start; until its cache is drained, this thread
     * never gets it; after, it does (the pool hands out the block that fits best, and the rest of
     * the pool is one larger block) */
    crmm_resource *p = host_pool(_i == BY_GROWTH ? "initial_size=1MiB maximum_size=1MiB thread_cache=on"
                                                 : "initial_size=1MiB thread_cache=on");
    worker w;
    worker_start(&w);
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
    release(p, b, 4 * KiB);
    release(p, c, 4 * KiB);
    if (big)
        release(p, big, MiB - 8 * KiB);
    if (_i != BY_THREAD_EXIT)
        worker_stop(&w);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0); /* every chunk wholly free: given back */
    crmm_resource_release(p);
}
END_TEST

START_TEST(growth_takes_the_cached_blocks_before_more_memory)
{
    /* without a maximum, too: when the caches hold more than half of the pool (here the worker's
     * holds 768 KiB of 1 MiB), their blocks come back before the pool grows */
    crmm_resource *p = host_pool("initial_size=1MiB thread_cache=on");
    release(p, alloc(p, 4 * KiB), 4 * KiB);
    worker w;
    worker_start(&w);
    void *x[4];
    for (int k = 0; k < 4; k++) /* the first switches the caches on; the others come from the pool */
        x[k] = worker_alloc(&w, p, 256 * KiB);
    for (int k = 0; k < 4; k++) /* the first goes back to the pool; the others into the cache */
        worker_free(&w, p, x[k], 256 * KiB);
    void *all = alloc(p, MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    release(p, all, MiB);
    worker_stop(&w);
    crmm_resource_release(p);
}
END_TEST

START_TEST(growth_takes_the_callers_cached_blocks_and_leaves_the_others)
{
    /* caches holding less than half of the pool: a growth takes back the calling thread's own
     * cached blocks (they merge into one that fits) but leaves another thread's cache as it is */
    crmm_resource *p = host_pool("initial_size=4MiB thread_cache=on");
    worker w;
    worker_start(&w);
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
    release(p, more, 256 * KiB);
    release(p, ab, 512 * KiB);
    release(p, rest, 4 * MiB - 768 * KiB);
    worker_stop(&w);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    crmm_resource_release(p);
}
END_TEST

START_TEST(a_growth_raises_no_peak_that_never_was)
{
    /* the worker's 100 blocks go back into its cache; this thread's 50 and a growth later, at
     * most 100 blocks (or 50 and the large one's bytes) were ever live at once */
    crmm_resource *p = host_pool("initial_size=1MiB thread_cache=on");
    release(p, alloc(p, 4 * KiB), 4 * KiB);
    worker w;
    worker_start(&w);
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
    worker_stop(&w);
    crmm_resource_release(p);
}
END_TEST

START_TEST(frees_are_checked_at_the_call)
{
    crmm_resource *p = host_pool("initial_size=1MiB thread_cache=on");
    worker w;
    worker_start(&w);
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
    worker_stop(&w);
    crmm_resource_release(p);
}
END_TEST

START_TEST(counters_add_up_over_the_caches)
{
    crmm_resource *p = host_pool("initial_size=1MiB thread_cache=on");
    worker w;
    worker_start(&w);
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
    worker_stop(&w);
    crmm_resource_release(p);
}
END_TEST

START_TEST(destroy_counts_the_caches_and_forgets_them)
{
    crmm_test_log_capture_begin();
    crmm_resource *p = host_pool("initial_size=1MiB thread_cache=on");
    worker w;
    worker_start(&w);
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
    char *text = crmm_test_log_capture_end();
    ck_assert_msg(strstr(text, "pool resource destroyed with 3 live allocations (5.3 KiB)"), "log: %s", text);
    ck_assert_int_eq(crmm_test_count(text, "destroyed with"), 1);
    free(text);
}
END_TEST

START_TEST(blocks_over_64_mib_are_never_cached)
{
    crmm_resource *p = host_pool("initial_size=1MiB thread_cache=on");
    worker w;
    worker_start(&w);
    worker_caches_a_block(&w, p, 4 * KiB);
    void *big = worker_alloc(&w, p, 65 * MiB);
    worker_free(&w, p, big, 65 * MiB);
    ck_assert_ptr_eq(alloc(p, 65 * MiB), big); /* the pool's again at once */
    release(p, big, 65 * MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 66 * MiB);
    worker_stop(&w);
    crmm_resource_release(p);
}
END_TEST

/* ---- thread_cache = auto: threads that wait for the pool's lock switch the caches on ------- */

/* An upstream of host memory whose allocate, while `holding`, waits for the test's release; and
 * the waits of the pool's spin lock (sched_yield), counted. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool holding, entered, released;
    int yields;
} gate = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

int sched_yield(void)
{
    pthread_mutex_lock(&gate.lock);
    gate.yields++;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.lock);
    return 0;
}

static crmm_status gated_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    (void)self, (void)stream;
    pthread_mutex_lock(&gate.lock);
    if (gate.holding) {
        gate.entered = true;
        pthread_cond_broadcast(&gate.cv);
        while (!gate.released)
            pthread_cond_wait(&gate.cv, &gate.lock);
    }
    pthread_mutex_unlock(&gate.lock);
    *ptr = aligned_alloc(256, (bytes + 255) & ~(size_t)255);
    return *ptr ? CRMM_OK : crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "gated: no memory");
}

static crmm_status gated_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    (void)self, (void)bytes, (void)stream;
    free(ptr);
    return CRMM_OK;
}

static void gated_destroy(crmm_resource *self) { free(self); }

static const crmm_resource_ops gated_ops = {.allocate = gated_allocate, .deallocate = gated_deallocate,
                                            .destroy = gated_destroy};

typedef struct alloc_arg { crmm_resource *p; size_t n; void *x; crmm_status st; } alloc_arg;

static void *allocate_on_thread(void *arg)
{
    alloc_arg *a = arg;
    a->st = crmm_resource_allocate(a->p, a->n, NULL, &a->x);
    return NULL;
}

/* One thread makes the pool grow and is held in the upstream, with the pool's lock; a second one
 * allocates and spins on the lock until the first is let go. Then the new chunk goes back. */
static void one_wait_for_the_lock(crmm_resource *p)
{
    pthread_mutex_lock(&gate.lock);
    gate.holding = true;
    gate.entered = gate.released = false;
    int yields = gate.yields;
    pthread_mutex_unlock(&gate.lock);
    alloc_arg grower = {p, 2 * MiB, NULL, CRMM_ERROR_STATE}, waiter = {p, 256, NULL, CRMM_ERROR_STATE};
    pthread_t g, w;
    ck_assert_int_eq(pthread_create(&g, NULL, allocate_on_thread, &grower), 0);
    pthread_mutex_lock(&gate.lock);
    while (!gate.entered)
        pthread_cond_wait(&gate.cv, &gate.lock);
    pthread_mutex_unlock(&gate.lock);
    ck_assert_int_eq(pthread_create(&w, NULL, allocate_on_thread, &waiter), 0);
    pthread_mutex_lock(&gate.lock);
    while (gate.yields == yields)
        pthread_cond_wait(&gate.cv, &gate.lock);
    gate.released = true;
    gate.holding = false;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.lock);
    ck_assert_int_eq(pthread_join(g, NULL), 0);
    ck_assert_int_eq(pthread_join(w, NULL), 0);
    ck_assert_crmm_ok(grower.st);
    ck_assert_crmm_ok(waiter.st);
    release(p, grower.x, grower.n);
    release(p, waiter.x, waiter.n);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), MiB); /* the first chunk: the next round grows */
}

/* Whether the caches are on: a block the worker caches is not this thread's next block. */
static bool caches_are_on(crmm_resource *p)
{
    worker w;
    worker_start(&w);
    void *b = worker_caches_a_block(&w, p, 4 * KiB);
    void *c = alloc(p, 4 * KiB);
    release(p, c, 4 * KiB);
    worker_stop(&w);
    return c != b;
}

START_TEST(auto_switches_on_when_threads_wait_for_the_lock)
{
    crmm_resource *u = calloc(1, sizeof *u);
    ck_assert_ptr_nonnull(u);
    crmm_resource_init(u, &gated_ops, "gated", CRMM_RESOURCE_HOST_ACCESSIBLE, -1, NULL);
    crmm_resource *p = crmm_test_create("pool", _i ? "initial_size=1MiB thread_cache=off" : "initial_size=1MiB", u);
    crmm_resource_release(u);
    void *pin = alloc(p, 256); /* trim never gives the first chunk back */
    /* just short of the number of waits that switches them on, in one window of locked calls */
    for (int k = 0; k < 63; k++)
        one_wait_for_the_lock(p);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_LOCK_WAITS), 63); /* each round: one call waited */
    for (int k = 0; k < 1024; k++) /* the window ends */
        release(p, alloc(p, 256), 256);
    ck_assert(!caches_are_on(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_THREAD_CACHES), 0);
    for (int k = 0; k < 64; k++)
        one_wait_for_the_lock(p);
    for (int k = 0; k < 1024; k++)
        release(p, alloc(p, 256), 256);
    ck_assert(caches_are_on(p) == !_i); /* thread_cache = off: never */
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_THREAD_CACHES), !_i);
    ck_assert_uint_ge(q(p, CRMM_QUERY_POOL_LOCK_WAITS), 63 + 64);
    release(p, pin, 256);
    crmm_resource_release(p);
}
END_TEST

START_TEST(auto_stays_off_for_threads_that_take_turns)
{
    /* two threads that never call at once (PyTorch's main and autograd threads) keep the pool's
     * order: what one frees, the other gets */
    crmm_resource *p = host_pool("initial_size=1MiB");
    for (int k = 0; k < 3 * 1024; k++)
        release(p, alloc(p, 256), 256);
    ck_assert(!caches_are_on(p));
    ck_assert(!caches_are_on(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_LOCK_WAITS), 0);
    crmm_resource_release(p);
}
END_TEST

/* ---- eight threads, frees across threads ----------------------------------------------- */

enum { H_THREADS = 8, H_LIVE = 48, H_MAILBOX = 64 };

/* Blocks one thread hands to the next to free. */
typedef struct handed { unsigned char *p; size_t n; unsigned char tag; } handed;

static struct {
    pthread_mutex_t lock;
    handed box[H_THREADS][H_MAILBOX];
    int count[H_THREADS];
} mail = {.lock = PTHREAD_MUTEX_INITIALIZER};

typedef struct hammer_arg { crmm_resource *p; int index, steps; uint64_t allocations; char why[256]; } hammer_arg;

/* Free a block after checking that nobody wrote into it. */
static void check_and_free(hammer_arg *a, unsigned char *x, size_t n, unsigned char tag)
{
    for (size_t i = 0; i < n && !a->why[0]; i += 61)
        if (x[i] != tag)
            snprintf(a->why, sizeof a->why, "byte %zu of a %zu-byte block is %u, not %u", i, n, x[i], tag);
    if (crmm_resource_deallocate(a->p, x, n, NULL) != CRMM_OK && !a->why[0])
        snprintf(a->why, sizeof a->why, "deallocate: %s", crmm_last_error());
}

static void *hammer(void *arg)
{
    hammer_arg *a = arg;
    handed live[H_LIVE];
    int n = 0;
    uint64_t seed = 99 + (uint64_t)a->index;
    for (int step = 0; step < a->steps && !a->why[0]; step++) {
        uint64_t r = crmm_test_rand(&seed);
        if (step % 16 == 0) { /* free what the previous thread handed over */
            pthread_mutex_lock(&mail.lock);
            handed got[H_MAILBOX];
            int m = mail.count[a->index];
            memcpy(got, mail.box[a->index], (size_t)m * sizeof got[0]);
            mail.count[a->index] = 0;
            pthread_mutex_unlock(&mail.lock);
            for (int k = 0; k < m; k++)
                check_and_free(a, got[k].p, got[k].n, got[k].tag);
        }
        if (n == 0 || (n < H_LIVE && (r & 1))) {
            size_t size = 1 + crmm_test_rand(&seed) % ((r >> 8) % 128 == 0 ? MiB : 24 * KiB);
            void *x = NULL;
            if (crmm_resource_allocate(a->p, size, NULL, &x) != CRMM_OK) {
                snprintf(a->why, sizeof a->why, "allocate %zu: %s", size, crmm_last_error());
                break;
            }
            live[n] = (handed){x, size, (unsigned char)(1 + (r >> 24) % 250)};
            memset(x, live[n].tag, size);
            n++;
            a->allocations++;
        } else {
            int k = (int)((r >> 16) % (uint64_t)n);
            int next = (a->index + 1) % H_THREADS;
            bool handed_over = false;
            if ((r >> 40) % 4 == 0) {
                pthread_mutex_lock(&mail.lock);
                if (mail.count[next] < H_MAILBOX) {
                    mail.box[next][mail.count[next]++] = live[k];
                    handed_over = true;
                }
                pthread_mutex_unlock(&mail.lock);
            }
            if (!handed_over)
                check_and_free(a, live[k].p, live[k].n, live[k].tag);
            live[k] = live[--n];
        }
    }
    while (n > 0) {
        n--;
        check_and_free(a, live[n].p, live[n].n, live[n].tag);
    }
    return NULL;
}

START_TEST(eight_threads_hand_blocks_to_each_other)
{
    /* random sizes, a quarter of the frees made by another thread; every block is filled with its own byte and checked at its free,
     * so two live blocks that overlapped would show; at the end everything is back */
    crmm_resource *p = host_pool("initial_size=4MiB thread_cache=on");
    hammer_arg a[H_THREADS];
    pthread_t th[H_THREADS];
    memset(&mail.count, 0, sizeof mail.count);
    for (int k = 0; k < H_THREADS; k++) {
        a[k] = (hammer_arg){.p = p, .index = k, .steps = 6000};
        ck_assert_int_eq(pthread_create(&th[k], NULL, hammer, &a[k]), 0);
    }
    uint64_t made = 0;
    for (int k = 0; k < H_THREADS; k++) {
        ck_assert_int_eq(pthread_join(th[k], NULL), 0);
        ck_assert_msg(!a[k].why[0], "thread %d: %s", k, a[k].why);
        made += a[k].allocations;
    }
    hammer_arg last = {.p = p};
    for (int k = 0; k < H_THREADS; k++) /* what was handed to a thread that had finished */
        for (int m = 0; m < mail.count[k]; m++)
            check_and_free(&last, mail.box[k][m].p, mail.box[k][m].n, mail.box[k][m].tag);
    ck_assert_msg(!last.why[0], "%s", last.why);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS_TOTAL), made);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    crmm_resource_release(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool_thread_cache");
    TCase *tc = tcase_create("thread_cache");
    tcase_add_test(tc, a_second_thread_switches_the_caches_on);
    tcase_add_test(tc, thread_cache_off_keeps_the_pools_order);
    tcase_add_test(tc, a_wrong_size_is_refused_on_every_cached_path);
    tcase_add_loop_test(tc, cached_blocks_come_back, 0, N_WAYS);
    tcase_add_test(tc, growth_takes_the_cached_blocks_before_more_memory);
    tcase_add_test(tc, growth_takes_the_callers_cached_blocks_and_leaves_the_others);
    tcase_add_test(tc, a_growth_raises_no_peak_that_never_was);
    tcase_add_test(tc, frees_are_checked_at_the_call);
    tcase_add_test(tc, counters_add_up_over_the_caches);
    tcase_add_test(tc, destroy_counts_the_caches_and_forgets_them);
    tcase_add_test(tc, blocks_over_64_mib_are_never_cached);
    tcase_add_loop_test(tc, auto_switches_on_when_threads_wait_for_the_lock, 0, 2);
    tcase_add_test(tc, auto_stays_off_for_threads_that_take_turns);
    suite_add_tcase(s, tc);
    tc = tcase_create("thread_cache_stress");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, eight_threads_hand_blocks_to_each_other);
    suite_add_tcase(s, tc);
    return crmm_test_run(s);
}
