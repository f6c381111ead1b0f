/* check_pool_serving.c — an inference server's allocations (tests/serving_trace.h) through the
 * default expandable pool over the scripted driver of fake_vmm.h, counting per decoded token what
 * the pool asked of the device: device synchronizations, pages unmapped, physical pages released
 * and created. A decode step must never wait for the device inside an allocation the pool could
 * serve from memory it holds, nor unmap or release (driver calls that cost far more than an
 * allocation). Each run prints its counts to the test's log. */
#include "build_config.h"
#include <crmm/pool.h>
#include "blocks_test.h"
#include "fakes/fake_vmm.h"
#include "serving_trace.h"

#define GiB ((size_t)1 << 30)
#define PAGE (2 * MiB) /* an H200's allocation granularity */

static void setup(void) { fake_vmm_reset(PAGE, 141 * GiB); }

/* Run the trace with `requests` requests (seed `seed`) on a pool with `params`; *t: the counts. */
static crmm_resource *run_trace(const char *params, unsigned requests, unsigned seed, serving_totals *t)
{
    crmm_resource *p = NULL;
    ck_assert_crmm_ok(fake_vmm_expandable_pool(params, &p));
    serving_config cfg = serving_config_default(requests, seed);
    ck_assert_crmm_ok(serving_trace_run(p, &cfg, t));
    printf("serving (params \"%s\", seed %u): %u requests, %u tokens, %u after warm-up; reserved peak %.0f MiB, "
           "live peak %.0f MiB\n",
           params, seed, requests, t->tokens, t->steady_tokens, (double)t->reserved_peak / MiB,
           (double)t->live_peak / MiB);
    const serving_counts *c[3] = {&t->all, &t->prefill, &t->steady};
    const char *what[3] = {"whole run", "prefills after warm-up", "decode after warm-up"};
    for (int i = 0; i < 3; i++)
        printf("  %-24s syncs %4d  unmaps %4d  releases %4d  creates %4d  maps %4d  growths %4d\n", what[i],
               c[i]->syncs, c[i]->unmaps, c[i]->releases, c[i]->creates, c[i]->maps, c[i]->set_access);
    return p;
}

/* After the first requests have set the pool's size, decoding never waits for the device, unmaps
 * or releases: every token is served from pages the pool holds or maps. */
START_TEST(decode_steps_never_wait_for_the_device)
{
    serving_totals t;
    crmm_resource *p = run_trace("", 48, (unsigned)_i, &t); /* _i: the seed, 1 to 3 */
    ck_assert_uint_gt(t.steady_tokens, 1000);
    ck_assert_int_eq(t.steady.syncs, 0);
    ck_assert_int_eq(t.steady.unmaps, 0);
    ck_assert_int_eq(t.steady.releases, 0);
    crmm_resource_release(p);
}

/* Not waiting costs little memory: the pool holds at most 1.15 times the peak of live bytes
 * (rounded to pages) over the whole run. */
CRMM_TEST_IN("pool_serving", serving_stays_tight)
{
    serving_totals t;
    crmm_resource *p = run_trace("", 48, 1, &t);
    ck_assert_uint_le(t.reserved_peak, t.live_peak + t.live_peak * 15 / 100 + 4 * PAGE);
    crmm_resource_release(p);
}

/* The pool's own counters of what it asked of the device agree with the driver's count, so that
 * a real process can count the same per step. */
CRMM_TEST_IN("pool_serving", the_pool_counts_what_it_asks_of_the_device)
{
    serving_totals t;
    crmm_resource *p = run_trace("", 12, 1, &t);
    ck_assert_uint_gt(fake_vmm.unmaps, 0); /* pages moved (without waiting: one stream) */
    ck_assert_crmm_ok(crmm_resource_trim(p)); /* synchronizes, unmaps and releases */
    ck_assert_uint_eq(crmm_test_query(p, CRMM_QUERY_POOL_DEVICE_SYNCS), (uint64_t)fake_vmm.device_syncs);
    ck_assert_uint_eq(crmm_test_query(p, CRMM_QUERY_POOL_PAGES_MAPPED), (uint64_t)fake_vmm.maps);
    ck_assert_uint_eq(crmm_test_query(p, CRMM_QUERY_POOL_PAGES_UNMAPPED), (uint64_t)fake_vmm.unmaps);
    ck_assert_uint_eq(crmm_test_query(p, CRMM_QUERY_POOL_PAGES_CREATED), (uint64_t)fake_vmm.creates);
    ck_assert_uint_eq(crmm_test_query(p, CRMM_QUERY_POOL_PAGES_RELEASED), (uint64_t)fake_vmm.releases);
    ck_assert_uint_eq(crmm_test_query(p, CRMM_QUERY_POOL_GROWTHS), (uint64_t)fake_vmm.set_access);
    ck_assert_uint_eq(crmm_test_query(p, CRMM_QUERY_POOL_EVENT_WAITS), 0);
    ck_assert_uint_gt(fake_vmm.device_syncs, 0);
    ck_assert_uint_gt(fake_vmm.releases, 0);
    crmm_resource_release(p);
}

/* A growth past the mark when the free bytes lie in pieces of pages on the one stream that
 * allocates: a synchronization could merge nothing and free no page, so the pool maps without
 * waiting and raises its mark. */
CRMM_TEST_IN("pool_serving", a_growth_that_nothing_could_move_for_does_not_wait)
{
    crmm_resource *p = NULL;
    ck_assert_crmm_ok(fake_vmm_expandable_pool("", &p));
    void *a = NULL, *b = NULL, *c = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(p, PAGE - 4096, NULL, &a)); /* page 0 */
    ck_assert_crmm_ok(crmm_resource_allocate(p, 8192, NULL, &b));        /* across pages 0 and 1 */
    ck_assert_uint_eq(crmm_test_query(p, CRMM_QUERY_BYTES_RESERVED), 2 * PAGE);
    ck_assert_crmm_ok(crmm_resource_deallocate(p, a, PAGE - 4096, NULL));
    /* free: almost two pages, but no whole one; the growth goes past the mark */
    ck_assert_uint_eq(crmm_test_query(p, CRMM_QUERY_BYTES_FREE), 2 * PAGE - 8192);
    int syncs = fake_vmm.device_syncs;
    ck_assert_crmm_ok(crmm_resource_allocate(p, 4 * PAGE, NULL, &c));
    ck_assert_int_eq(fake_vmm.device_syncs, syncs);
    ck_assert_int_eq(fake_vmm.unmaps, 0);
    ck_assert_ptr_eq(c, (char *)b + 8192); /* joins the free rest of page 1 */
    ck_assert_uint_eq(crmm_test_query(p, CRMM_QUERY_BYTES_RESERVED), 6 * PAGE);
    ck_assert_crmm_ok(crmm_resource_deallocate(p, b, 8192, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(p, c, 4 * PAGE, NULL));
    crmm_resource_release(p);
}

/* trim still gives every free page back, after the trace. */
CRMM_TEST_IN("pool_serving", trim_after_serving_gives_pages_back)
{
    serving_totals t;
    crmm_resource *p = run_trace("", 8, 2, &t);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(crmm_test_query(p, CRMM_QUERY_BYTES_RESERVED), 0);
    ck_assert_uint_eq(fake_vmm.physical, 0);
    crmm_resource_release(p);
}

int main(void)
{
    Suite *s = suite_create("pool_serving");
    TCase *tc = crmm_test_tcase(s, "pool_serving", 120);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_loop_test(tc, decode_steps_never_wait_for_the_device, 1, 4);
    return crmm_test_run(s);
}
