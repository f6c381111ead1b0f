/* check_limiting.c — the `limiting` plugin over host memory: RMM's limiting tests (too big,
 * upstream failure, room given back by frees, over the limit), the exact boundary, the message,
 * a free the upstream refuses, a free of a block it never counted, a wrong-size free while a
 * failing allocation holds its room, 4 threads racing for the room, bad parameters, and the
 * conformance suite. */
#include "build_config.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "conformance.h"
#include "probe_resource.h"
#include "silent_resource.h"
#include "test_support.h"

#define MIB ((size_t)1 << 20)

/* The running test's limiting resource (made by limited, released by the fixture). */
static crmm_resource *mr;

/* mr = limiting(params) -> statistics -> host; *stats gets the statistics layer (borrowed). */
static void limited(const char *params, crmm_resource **stats)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    crmm_resource *st = crmm_test_create("statistics", NULL, host);
    mr = crmm_test_create("limiting", params, st);
    crmm_test_release(st, host);
    if (stats)
        *stats = st;
}

static void release_limited(void) { crmm_resource_release(mr); }

CRMM_TEST_IN("limiting", too_big_is_refused_before_upstream)
{
    crmm_resource *stats;
    limited("allocation_limit=5MiB", &stats);
    void *p = (void *)1;
    ck_assert_crmm(crmm_resource_allocate(mr, 5 * MIB + 1, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(p);
    crmm_alloc_counters c;
    ck_assert_crmm_ok(crmm_statistics_get(stats, &c));
    ck_assert_uint_eq(c.total_count, 0); /* nothing was asked of the upstream */
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0);
}

/* A refusal leaves the count alone and its message has both numbers. */
CRMM_TEST_IN("limiting", over_limit_leaves_the_count_alone_and_says_both_numbers)
{
    limited("allocation_limit=10MiB", NULL);
    void *a = crmm_test_allocate(mr, 4 * MIB), *b = crmm_test_allocate(mr, 4 * MIB), *c = (void *)1;
    ck_assert_crmm(crmm_resource_allocate(mr, 3 * MIB, NULL, &c), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(c); /* a refusal hands out nothing */
    const char *msg = crmm_last_error();
    ck_assert_msg(strncmp(msg, "out of memory: ", 15) == 0, "message: %s", msg);
    ck_assert_msg(strstr(msg, "3.0 MiB") && strstr(msg, "8.0 MiB") && strstr(msg, "10.0 MiB"), "message: %s", msg);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 8 * MIB);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, a, 4 * MIB, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, b, 4 * MIB, NULL));
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0); /* every free counted back */
}

/* Blocks that fill the limit are allowed, one byte more is not, and the frees give all the room
 * back: exactly the limit, and sizes counted rounded to 256. */
static const struct { const char *params; size_t bytes; int blocks; uint64_t full; } fills[] = {
    {"allocation_limit=10MiB", 10 * MIB, 1, 10 * MIB},
    {"allocation_limit=1024", 200, 4, 1024}, /* each takes 256 of the 1024 */
};

CRMM_LOOP_TEST_IN("limiting", limit_is_exact_and_counts_sizes_rounded_to_256, 2)
{
    limited(fills[_i].params, NULL);
    void *p[4], *q = (void *)1;
    for (int i = 0; i < fills[_i].blocks; i++)
        p[i] = crmm_test_allocate(mr, fills[_i].bytes);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), fills[_i].full);
    ck_assert_crmm(crmm_resource_allocate(mr, 1, NULL, &q), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(q);
    for (int i = 0; i < fills[_i].blocks; i++)
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, p[i], fills[_i].bytes, NULL));
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0);
    for (int i = 0; i < fills[_i].blocks; i++) /* the frees gave all the room back */
        p[i] = crmm_test_allocate(mr, fills[_i].bytes);
    for (int i = 0; i < fills[_i].blocks; i++)
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, p[i], fills[_i].bytes, NULL));
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0); /* every free counted back */
}

CRMM_TEST_IN("limiting", under_limit_due_to_frees)
{
    limited("allocation_limit=10MiB", NULL);
    uint64_t limit = crmm_test_query(mr, CRMM_QUERY_MAXIMUM_SIZE);
    ck_assert_uint_eq(limit, 10 * MIB);
    void *p1 = crmm_test_allocate(mr, 4 * MIB);
    ck_assert_uint_eq(limit - crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 6 * MIB);
    void *p2 = crmm_test_allocate(mr, 4 * MIB);
    ck_assert_uint_eq(limit - crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 2 * MIB);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p1, 4 * MIB, NULL));
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 4 * MIB);
    void *p3 = crmm_test_allocate(mr, 6 * MIB);
    ck_assert_uint_eq(limit - crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE_PEAK), 10 * MIB);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 2);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p2, 4 * MIB, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p3, 6 * MIB, NULL));
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0); /* every free counted back */
}

CRMM_TEST_IN("limiting", upstream_failure_gives_the_room_back)
{
    limited("allocation_limit=2MiB", NULL);
    crmm_resource *inner = mr, *outer = crmm_test_create("limiting", "allocation_limit=5MiB", inner);
    void *p = (void *)1;
    ck_assert_crmm(crmm_resource_allocate(outer, 4 * MIB, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_eq(crmm_test_query(outer, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(inner, CRMM_QUERY_BYTES_IN_USE), 0);
    p = crmm_test_allocate(outer, 2 * MIB);
    ck_assert_crmm_ok(crmm_resource_deallocate(outer, p, 2 * MIB, NULL));
    ck_assert_uint_eq(crmm_test_query(outer, CRMM_QUERY_BYTES_IN_USE), 0); /* every free counted back */
    ck_assert_uint_eq(crmm_test_query(inner, CRMM_QUERY_BYTES_IN_USE), 0);
    crmm_resource_release(outer);
}

static crmm_resource silent;

/* An upstream that fails without a message (silent_resource.h): its failure is the allocation's,
 * with its status and a message, and the room it took comes back. */
CRMM_TEST_IN("limiting", upstream_failing_without_a_message_fails_the_allocation)
{
    silent_resource_init(&silent, CRMM_RESOURCE_HOST_ACCESSIBLE);
    mr = crmm_test_create("limiting", "allocation_limit=5MiB", &silent);
    crmm_resource_release(&silent); /* the limiting layer holds it */
    void *p = (void *)1;
    crmm_clear_error();
    ck_assert_crmm(crmm_resource_allocate(mr, MIB, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(crmm_last_error(), "limiting") && strstr(crmm_last_error(), "silent failed (") &&
                      strstr(crmm_last_error(), "without saying why"),
                  "message: %s", crmm_last_error());
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0); /* the room came back */
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
}

/* A free the upstream refuses leaves the block live: its room stays taken (a request that needs
 * it is still refused) and it stays counted, until the free the upstream takes. */
CRMM_TEST_IN("limiting", refused_upstream_free_keeps_the_room_taken)
{
    probe_resource *probe = probe_resource_new(NULL, CRMM_RESOURCE_HOST_ACCESSIBLE, -1);
    mr = crmm_test_create("limiting", "allocation_limit=5MiB", &probe->base);
    crmm_resource_release(&probe->base); /* the limiting layer holds it */
    void *p = crmm_test_allocate(mr, 4 * MIB), *q = (void *)1;
    probe->refuses_frees = 1;
    ck_assert_crmm(crmm_resource_deallocate(mr, p, 4 * MIB, NULL), CRMM_ERROR_CUDA);
    probe->refuses_frees = 0;
    ck_assert_int_eq(probe->live, 1);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 4 * MIB);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_crmm(crmm_resource_allocate(mr, 2 * MIB, NULL, &q), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(q);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 4 * MIB, NULL));
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    q = crmm_test_allocate(mr, 5 * MIB); /* all the room is back */
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, q, 5 * MIB, NULL));
}

/* A block the upstream handed out directly, freed through the limiting layer, which the upstream
 * takes: the layer counted neither its room nor the allocation, and both counts stop at zero
 * (instead of ALLOCATIONS wrapping to ~2^64 and the leak report with it); the next allocation is
 * counted from zero. */
CRMM_TEST_IN("limiting", a_free_it_never_counted_leaves_its_counts_at_zero)
{
    crmm_resource *stats;
    limited("allocation_limit=1MiB", &stats);
    void *p = crmm_test_allocate(stats, 1000);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1000, NULL));
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    p = crmm_test_allocate(mr, 1000);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 1024);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1000, NULL));
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
}

/* The block the next allocate of the probe below frees through the limiting layer with a wrong
 * size (too large: its room stops at zero) before failing: a free that lands while a failing
 * allocation holds a reservation, as another thread's can. */
static void *freed_meanwhile;

static crmm_status free_one_then_fail(void **ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    (void)ptr, (void)bytes;
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, freed_meanwhile, 4 * MIB, stream));
    return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "probe: out of memory (the test asks it to fail)");
}

/* A failed allocation gives back only the room that is still counted: the count stays at zero
 * (not ~2^64, which refused every allocation afterwards). */
CRMM_TEST_IN("limiting", a_failed_allocation_after_a_wrong_size_free_leaves_the_room_at_zero)
{
    static const probe_memory failing = {.get = free_one_then_fail};
    probe_resource *probe = probe_resource_new(NULL, CRMM_RESOURCE_HOST_ACCESSIBLE, -1);
    mr = crmm_test_create("limiting", "allocation_limit=1MiB", &probe->base);
    crmm_resource_release(&probe->base); /* the limiting layer holds it */
    freed_meanwhile = crmm_test_allocate(mr, 1000);
    const probe_memory *host = probe->memory;
    probe->memory = &failing;
    void *p = (void *)1;
    ck_assert_crmm(crmm_resource_allocate(mr, 1000, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    probe->memory = host;
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0);
    p = crmm_test_allocate(mr, 1000);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 1024);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1000, NULL));
}

/* The live counts a limiting layer keeps, and their peaks, describe its own allocations, whoever
 * else allocates from its upstream (here directly from the statistics layer below); the totals
 * and what the upstream holds are asked of the upstream. */
CRMM_TEST_IN("limiting", its_live_counts_are_its_own_and_the_rest_goes_upstream)
{
    crmm_resource *stats;
    limited("allocation_limit=1MiB", &stats);
    void *beside = crmm_test_allocate(stats, 5000), *beside2 = crmm_test_allocate(stats, 7000);
    void *p = crmm_test_allocate(mr, 1000), *q = crmm_test_allocate(mr, 300);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, q, 300, NULL));
    q = crmm_test_allocate(mr, 10);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 2);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS_PEAK), 2);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE_PEAK), 1024 + 512); /* rounded */
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS_TOTAL), 5); /* the upstream's: all five */
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_TOTAL), 5000 + 7000 + 1000 + 300 + 10);
    uint64_t v;
    ck_assert_crmm(crmm_resource_query(mr, CRMM_QUERY_BYTES_RESERVED, &v), CRMM_ERROR_UNSUPPORTED);
    ck_assert_msg(strstr(crmm_last_error(), "host"), "message: %s", crmm_last_error()); /* the host's answer */
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1000, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, q, 10, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(stats, beside, 5000, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(stats, beside2, 7000, NULL));
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS_PEAK), 2); /* the peaks stay */
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE_PEAK), 1024 + 512);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0); /* every free counted back */
}

CRMM_TEST_IN("limiting", bad_parameters_are_refused)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    ck_assert_crmm(crmm_resource_create("limiting", NULL, host, &mr), CRMM_ERROR_CONFIG);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "allocation_limit"));
    ck_assert_crmm(crmm_resource_create("limiting", "allocation_limit=0", host, &mr), CRMM_ERROR_CONFIG);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "limiting: allocation_limit: 0 is below the minimum 1"));
    ck_assert_crmm(crmm_resource_create("limiting", "allocation_limit=lots", host, &mr), CRMM_ERROR_CONFIG);
    ck_assert_crmm(crmm_resource_create("limiting", "allocation_limit=-5", host, &mr), CRMM_ERROR_CONFIG);
    ck_assert_crmm(crmm_resource_create("limiting", "allocation_limit=1MiB", NULL, &mr), CRMM_ERROR_CONFIG);
    ck_assert_ptr_null(mr);
    crmm_resource_release(host);
}

typedef struct racer {
    crmm_resource *mr;
    uint64_t seed;
    int refused;
    int failed;
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    enum { LIVE = 16 };
    void *p[LIVE] = {0};
    size_t n[LIVE] = {0};
    for (int step = 0; step < 20000; step++) {
        r->seed ^= r->seed << 13;
        r->seed ^= r->seed >> 7;
        r->seed ^= r->seed << 17;
        int k = (int)(r->seed % LIVE);
        if (p[k]) {
            if (crmm_resource_deallocate(r->mr, p[k], n[k], NULL) != CRMM_OK)
                r->failed++;
            p[k] = NULL;
        } else {
            n[k] = 256 * (1 + (size_t)((r->seed >> 8) % 32)); /* multiples of 256: no rounding */
            crmm_status st = crmm_resource_allocate(r->mr, n[k], NULL, &p[k]);
            if (st == CRMM_ERROR_OUT_OF_MEMORY)
                r->refused++;
            else if (st != CRMM_OK)
                r->failed++;
        }
    }
    for (int k = 0; k < LIVE; k++)
        if (p[k] && crmm_resource_deallocate(r->mr, p[k], n[k], NULL) != CRMM_OK)
            r->failed++;
    return NULL;
}

CRMM_TEST_IN("limiting", four_threads_never_exceed_the_limit)
{
    crmm_resource *stats;
    limited("allocation_limit=64KiB", &stats);
    pthread_t t[4];
    racer r[4];
    for (int k = 0; k < 4; k++) {
        r[k] = (racer){mr, 0x9e3779b97f4a7c15ULL * (uint64_t)(k + 1), 0, 0};
        ck_assert_int_eq(pthread_create(&t[k], NULL, race, &r[k]), 0);
    }
    int refused = 0;
    for (int k = 0; k < 4; k++) {
        ck_assert_int_eq(pthread_join(t[k], NULL), 0);
        ck_assert_int_eq(r[k].failed, 0);
        refused += r[k].refused;
    }
    ck_assert_int_gt(refused, 0); /* the limit was reached */
    crmm_alloc_counters c;
    ck_assert_crmm_ok(crmm_statistics_get(stats, &c));
    ck_assert_int_le(c.peak_bytes, 64 * 1024); /* what the upstream ever held at once */
    ck_assert_int_eq(c.bytes, 0);
    ck_assert_uint_le(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE_PEAK), 64 * 1024);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0);
}

static const crmm_test_chain chains[] = {
    {"limiting_over_host",
     "[resource.h]\nplugin = host\n[resource.l]\nplugin = limiting\nupstream = h\nallocation_limit = 4GiB\n", "l", 0, 0},
};

int main(void)
{
    Suite *s = suite_create("limiting");
    tcase_add_checked_fixture(crmm_test_tcase(s, "limiting", 0), NULL, release_limited);
    crmm_conformance_add(s, chains, 1);
    return crmm_test_run(s);
}
