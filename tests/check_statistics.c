/* check_statistics.c — the `statistics` plugin over host memory: RMM's statistics tests
 * (counts after sequences, peaks, stacked adaptors, push/pop folding, pop of the base frame),
 * the API through other adaptors, threads, and the conformance suite. */
#include "build_config.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "conformance.h"
#include "test_support.h"

#define TEN_MIB ((size_t)10 << 20)

/* The running test's statistics layer over a fresh host (the fixture makes and releases it). */
static crmm_resource *mr;

static void make_stats(void) { mr = crmm_test_create_over_host("statistics", NULL); }

static void release_stats(void) { crmm_resource_release(mr); }

static crmm_alloc_counters get(crmm_resource *layer)
{
    crmm_alloc_counters c;
    memset(&c, 0x5a, sizeof c);
    ck_assert_crmm_ok(crmm_statistics_get(layer, &c));
    return c;
}

/* Every counter is zero on a fresh layer (_i = 0), and still after a failed allocation (_i = 1). */
CRMM_LOOP_TEST_IN("statistics", counters_are_zero_when_empty_and_after_a_failed_allocation, 2)
{
    void *p = (void *)1;
    if (_i)
        ck_assert_crmm(crmm_resource_allocate(mr, (size_t)1 << 50, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    crmm_alloc_counters c = get(mr);
    ck_assert_int_eq(c.bytes, 0);
    ck_assert_int_eq(c.peak_bytes, 0);
    ck_assert_uint_eq(c.total_bytes, 0);
    ck_assert_int_eq(c.count, 0);
    ck_assert_int_eq(c.peak_count, 0);
    ck_assert_uint_eq(c.total_count, 0);
    uint64_t depth = 0;
    ck_assert_crmm_ok(crmm_statistics_depth(mr, &depth));
    ck_assert_uint_eq(depth, 1);
}

CRMM_TEST_IN("statistics", all_freed_counts_zero)
{
    void *p[10];
    for (int i = 0; i < 10; i++)
        p[i] = crmm_test_allocate(mr, TEN_MIB);
    for (int i = 0; i < 10; i++)
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, p[i], TEN_MIB, NULL));
    crmm_alloc_counters c = get(mr);
    ck_assert_int_eq(c.bytes, 0);
    ck_assert_int_eq(c.count, 0);
    ck_assert_uint_eq(c.total_count, 10);
}

CRMM_TEST_IN("statistics", peak_allocations_follow_rmm)
{
    void *p[20];
    for (int i = 0; i < 10; i++)
        p[i] = crmm_test_allocate(mr, TEN_MIB);
    for (int i = 0; i < 10; i += 2) /* free every other one */
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, p[i], TEN_MIB, NULL));
    crmm_alloc_counters c = get(mr);
    ck_assert_int_eq(c.bytes, 5 * (int64_t)TEN_MIB);
    ck_assert_int_eq(c.count, 5);
    ck_assert_int_eq(c.peak_bytes, 10 * (int64_t)TEN_MIB);
    ck_assert_int_eq(c.peak_count, 10);
    ck_assert_uint_eq(c.total_bytes, 10 * TEN_MIB);
    ck_assert_uint_eq(c.total_count, 10);
    for (int i = 10; i < 20; i++) /* ten more raise the peak to 15 */
        p[i] = crmm_test_allocate(mr, TEN_MIB);
    for (int i = 1; i < 20; i++) /* the live ones: the odd of the first ten, all of the rest */
        if (i % 2 || i >= 10)
            ck_assert_crmm_ok(crmm_resource_deallocate(mr, p[i], TEN_MIB, NULL));
    c = get(mr);
    ck_assert_int_eq(c.bytes, 0);
    ck_assert_int_eq(c.count, 0);
    ck_assert_int_eq(c.peak_bytes, 15 * (int64_t)TEN_MIB);
    ck_assert_int_eq(c.peak_count, 15);
    ck_assert_uint_eq(c.total_bytes, 20 * TEN_MIB);
    ck_assert_uint_eq(c.total_count, 20);
    /* the queries give the same numbers */
    uint64_t q;
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_BYTES_IN_USE_PEAK, &q));
    ck_assert_uint_eq(q, 15 * TEN_MIB);
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_ALLOCATIONS_TOTAL, &q));
    ck_assert_uint_eq(q, 20);
}

/* A statistics layer over the fixture's (the outer one): ten blocks of TEN_MIB from the outer, then five
 * from the inner, in p[0..14]; returns the inner. */
static crmm_resource *two_layers(void *p[15])
{
    for (int i = 0; i < 10; i++)
        p[i] = crmm_test_allocate(mr, TEN_MIB);
    crmm_resource *inner = crmm_test_create("statistics", NULL, mr);
    for (int i = 10; i < 15; i++)
        p[i] = crmm_test_allocate(inner, TEN_MIB);
    return inner;
}

/* Stacked layers count separately, each block freed through the layer it came from (_i = 0) or
 * all through the inner one (_i = 1), which then counts below zero. */
CRMM_LOOP_TEST_IN("statistics", stacked_adaptors_count_separately, 2)
{
    void *p[15];
    crmm_resource *inner = two_layers(p);
    /* the API finds the first statistics layer: the inner one */
    ck_assert_int_eq(get(inner).count, 5);
    ck_assert_int_eq(get(mr).count, 15);
    ck_assert_int_eq(get(mr).bytes, 15 * (int64_t)TEN_MIB);
    ck_assert_int_eq(get(inner).bytes, 5 * (int64_t)TEN_MIB);
    for (int i = 0; i < 15; i++)
        ck_assert_crmm_ok(crmm_resource_deallocate(i < 10 && !_i ? mr : inner, p[i], TEN_MIB, NULL));
    crmm_alloc_counters o = get(mr), n = get(inner);
    ck_assert_int_eq(o.bytes, 0);
    ck_assert_int_eq(o.count, 0);
    ck_assert_int_eq(n.bytes, _i ? -10 * (int64_t)TEN_MIB : 0);
    ck_assert_int_eq(n.count, _i ? -10 : 0);
    ck_assert_int_eq(o.peak_bytes, 15 * (int64_t)TEN_MIB);
    ck_assert_int_eq(n.peak_bytes, 5 * (int64_t)TEN_MIB);
    ck_assert_int_eq(o.peak_count, 15);
    ck_assert_int_eq(n.peak_count, 5);
    ck_assert_uint_eq(o.total_bytes, 15 * TEN_MIB);
    ck_assert_uint_eq(n.total_bytes, 5 * TEN_MIB);
    ck_assert_uint_eq(o.total_count, 15);
    ck_assert_uint_eq(n.total_count, 5);
    crmm_resource_release(inner);
}

CRMM_TEST_IN("statistics", push_pop_fold_like_rmm)
{
    void *a0 = crmm_test_allocate(mr, TEN_MIB);
    crmm_alloc_counters before;
    ck_assert_crmm_ok(crmm_statistics_push(mr, &before));
    ck_assert_int_eq(before.bytes, (int64_t)TEN_MIB); /* push returns the frame pushed down */
    ck_assert_int_eq(before.count, 1);
    ck_assert_int_eq(get(mr).bytes, 0);
    ck_assert_int_eq(get(mr).count, 0);
    void *a1 = crmm_test_allocate(mr, TEN_MIB);
    ck_assert_crmm_ok(crmm_statistics_push(mr, NULL));
    ck_assert_int_eq(get(mr).bytes, 0);
    void *a2 = crmm_test_allocate(mr, TEN_MIB);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, a2, TEN_MIB, NULL));
    ck_assert_int_eq(get(mr).bytes, 0);
    ck_assert_int_eq(get(mr).peak_bytes, (int64_t)TEN_MIB);
    ck_assert_int_eq(get(mr).peak_count, 1);
    uint64_t depth;
    ck_assert_crmm_ok(crmm_statistics_depth(mr, &depth));
    ck_assert_uint_eq(depth, 3);
    crmm_alloc_counters popped;
    ck_assert_crmm_ok(crmm_statistics_pop(mr, &popped));
    ck_assert_int_eq(popped.bytes, 0);
    ck_assert_int_eq(popped.peak_bytes, (int64_t)TEN_MIB);
    ck_assert_int_eq(popped.count, 0);
    ck_assert_int_eq(popped.peak_count, 1);
    /* the middle frame now holds a1 (10 MiB) and saw a2 on top of it: peak 20 MiB */
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, a0, TEN_MIB, NULL)); /* allocated before the push */
    ck_assert_crmm_ok(crmm_statistics_pop(mr, &popped));
    ck_assert_int_eq(popped.bytes, 0);
    ck_assert_int_eq(popped.peak_bytes, 2 * (int64_t)TEN_MIB);
    ck_assert_int_eq(popped.count, 0);
    ck_assert_int_eq(popped.peak_count, 2);
    ck_assert_uint_eq(popped.total_count, 2);
    /* base: a0 live (10) + popped peak (20) = 30 MiB; a1 still live */
    crmm_alloc_counters base = get(mr);
    ck_assert_int_eq(base.bytes, (int64_t)TEN_MIB);
    ck_assert_int_eq(base.peak_bytes, 3 * (int64_t)TEN_MIB);
    ck_assert_int_eq(base.peak_count, 3);
    ck_assert_uint_eq(base.total_count, 3);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, a1, TEN_MIB, NULL));
    ck_assert_crmm(crmm_statistics_pop(mr, &popped), CRMM_ERROR_STATE);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "base"));
    ck_assert_int_eq(get(mr).bytes, 0); /* the failed pop changed nothing */
    ck_assert_crmm_ok(crmm_statistics_depth(mr, &depth));
    ck_assert_uint_eq(depth, 1);
}

CRMM_TEST_IN("statistics", queries_cover_every_frame)
{
    void *a = crmm_test_allocate(mr, 1000);
    ck_assert_crmm_ok(crmm_statistics_push(mr, NULL));
    void *b = crmm_test_allocate(mr, 3000);
    uint64_t in_use, peak, count;
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_BYTES_IN_USE, &in_use));
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_BYTES_IN_USE_PEAK, &peak));
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_ALLOCATIONS, &count));
    ck_assert_uint_eq(in_use, 4000);
    ck_assert_uint_eq(peak, 4000);
    ck_assert_uint_eq(count, 2);
    ck_assert_int_eq(get(mr).bytes, 3000); /* the API shows the top frame */
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, a, 1000, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, b, 3000, NULL));
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_BYTES_IN_USE, &in_use));
    ck_assert_uint_eq(in_use, 0);
    ck_assert_crmm_ok(crmm_statistics_pop(mr, NULL));
}

CRMM_TEST_IN("statistics", api_finds_the_layer_under_other_adaptors)
{
    crmm_resource *lim = crmm_test_create("limiting", "allocation_limit=1GiB", mr);
    crmm_resource *top = crmm_test_create("tracking", NULL, lim);
    void *p = crmm_test_allocate(top, 5000);
    ck_assert_int_eq(get(top).bytes, 5000);
    ck_assert_crmm_ok(crmm_statistics_push(top, NULL));
    uint64_t depth;
    ck_assert_crmm_ok(crmm_statistics_depth(mr, &depth));
    ck_assert_uint_eq(depth, 2);
    ck_assert_crmm_ok(crmm_statistics_pop(top, NULL));
    /* the op (statistics, GET) travels down the chain through tracking and limiting (which has
     * no control op at all): the core passes it on, no adaptor forwards it by hand */
    crmm_alloc_counters c;
    ck_assert_crmm_ok(crmm_resource_control_kind(top, "statistics", CRMM_STATISTICS_OP_GET, &c));
    ck_assert_int_eq(c.count, 1);
    /* crmm_resource_control addresses the top layer's own kind: the op is tracking's */
    uint64_t count = 0;
    ck_assert_crmm_ok(crmm_resource_control(top, CRMM_TRACKING_OP_COUNT, &count));
    ck_assert_uint_eq(count, 1);
    ck_assert_crmm_ok(crmm_resource_deallocate(top, p, 5000, NULL));
    crmm_test_release(top, lim);
}

CRMM_TEST_IN("statistics", api_rejects_bad_arguments)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    crmm_alloc_counters c;
    ck_assert_crmm(crmm_statistics_get(host, &c), CRMM_ERROR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "no statistics layer"));
    ck_assert_crmm(crmm_statistics_push(host, NULL), CRMM_ERROR_UNSUPPORTED);
    ck_assert_crmm(crmm_statistics_get(NULL, &c), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_statistics_get(mr, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_control(mr, 99, NULL), CRMM_ERROR_UNSUPPORTED); /* unknown op, host has none */
    crmm_resource_release(host);
}

/* The core's crmm_resource_control_kind, which the statistics API is built on. */
CRMM_TEST_IN("statistics", control_kind_finds_the_layer_under_others)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    snprintf(host->name, sizeof host->name, "h");
    ck_assert_crmm(crmm_resource_control_kind(host, "statistics", CRMM_STATISTICS_OP_DEPTH, NULL),
                   CRMM_ERROR_UNSUPPORTED);
    ck_assert_str_eq(crmm_last_error(), "unsupported: resource 'h' (host) has no statistics layer");
    crmm_resource *stats = crmm_test_create("statistics", NULL, host);
    crmm_resource *top = crmm_test_create("limiting", "allocation_limit=1MiB", stats);
    ck_assert_crmm_ok(crmm_statistics_push(stats, NULL));
    uint64_t depth = 0;
    ck_assert_crmm_ok(crmm_resource_control_kind(top, "statistics", CRMM_STATISTICS_OP_DEPTH, &depth));
    ck_assert_uint_eq(depth, 2);
    ck_assert_crmm(crmm_resource_control_kind(NULL, "statistics", CRMM_STATISTICS_OP_DEPTH, &depth),
                   CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_control_kind(top, NULL, CRMM_STATISTICS_OP_DEPTH, &depth), CRMM_ERROR_INVALID_ARGUMENT);
    crmm_test_release(top, stats, host);
}

CRMM_TEST_IN("statistics", deep_push_pop)
{
    void *p[40];
    for (int i = 0; i < 40; i++) { /* grows the frame stack past its first capacity */
        ck_assert_crmm_ok(crmm_statistics_push(mr, NULL));
        p[i] = crmm_test_allocate(mr, 256);
    }
    for (int i = 39; i >= 0; i--) {
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, p[i], 256, NULL));
        crmm_alloc_counters popped;
        ck_assert_crmm_ok(crmm_statistics_pop(mr, &popped));
        ck_assert_int_eq(popped.bytes, 0);
        ck_assert_int_eq(popped.peak_bytes, (int64_t)(40 - i) * 256);
    }
    crmm_alloc_counters base = get(mr);
    ck_assert_int_eq(base.peak_bytes, 40 * 256);
    ck_assert_uint_eq(base.total_count, 40);
}

typedef struct worker { crmm_resource *mr; int rounds; } worker;

static void *count_worker(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < w->rounds; i++) {
        void *p;
        if (crmm_resource_allocate(w->mr, 128 + (size_t)(i % 7), NULL, &p) != CRMM_OK)
            return (void *)1;
        if (crmm_resource_deallocate(w->mr, p, 128 + (size_t)(i % 7), NULL) != CRMM_OK)
            return (void *)1;
    }
    return NULL;
}

CRMM_TEST_IN("statistics", threads_count_exactly_while_frames_change)
{
    enum { THREADS = 4, ROUNDS = 20000 };
    pthread_t t[THREADS];
    worker w = {mr, ROUNDS};
    for (int k = 0; k < THREADS; k++)
        ck_assert_int_eq(pthread_create(&t[k], NULL, count_worker, &w), 0);
    for (int k = 0; k < 2000; k++) { /* frames come and go under the counting threads */
        ck_assert_crmm_ok(crmm_statistics_push(mr, NULL));
        ck_assert_crmm_ok(crmm_statistics_pop(mr, NULL));
    }
    for (int k = 0; k < THREADS; k++) {
        void *ret;
        ck_assert_int_eq(pthread_join(t[k], &ret), 0);
        ck_assert_ptr_null(ret);
    }
    crmm_alloc_counters c = get(mr);
    ck_assert_int_eq(c.bytes, 0);
    ck_assert_int_eq(c.count, 0);
    ck_assert_uint_eq(c.total_count, THREADS * ROUNDS);
    ck_assert_int_le(c.peak_count, THREADS);
    ck_assert_int_ge(c.peak_count, 1);
}

static const crmm_test_chain chains[] = {
    {"statistics_over_host", "[resource.h]\nplugin = host\n[resource.s]\nplugin = statistics\nupstream = h\n", "s", 0, 0},
};

/* A free the upstream refuses (a double free, caught by the pool) changes no counter: the
 * statistics follow what the upstream really holds. */
CRMM_TEST_IN("statistics", refused_free_is_not_counted)
{
    crmm_resource *h = crmm_test_create("host", NULL, NULL);
    crmm_resource *pool = crmm_test_create("pool", "initial_size=16MiB", h);
    crmm_resource *st = crmm_test_create("statistics", NULL, pool);
    void *p = crmm_test_allocate(st, 1000);
    ck_assert_crmm_ok(crmm_resource_deallocate(st, p, 1000, NULL));
    ck_assert_crmm(crmm_resource_deallocate(st, p, 1000, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(crmm_test_query(st, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(st, CRMM_QUERY_ALLOCATIONS), 0);
    crmm_test_release(st, pool, h);
}

int main(void)
{
    Suite *s = suite_create("statistics");
    tcase_add_checked_fixture(crmm_test_tcase(s, "statistics", 0), make_stats, release_stats);
    crmm_conformance_add(s, chains, 1);
    return crmm_test_run(s);
}
