/* check_pool_page_moves.c — the expandable pool's page_moves parameter on the scripted driver of
 * fakes/fake_vmm.h: what the pool does when growth would pass the most it has held while free
 * pages could be moved. Pages freed on the stream that grows move without waiting under wait and
 * idle: their memory is mapped where the pool grows and their old addresses stay mapped ("lent")
 * until an event recorded on that stream has completed. Pages of other streams: wait (the
 * default) synchronizes the device and moves them; idle moves them without synchronizing when
 * every stream holding them says it is idle, and maps new pages while one is busy (or cannot be
 * asked), moving them back at a later growth that finds the streams idle; never maps new pages
 * and gives free ones back only at trim. */
#include "build_config.h"
#include <cuda.h>
#include "pool_expandable_test.h"

/* a: 3 pages, b: 1, c: 2 (the mark: 6 pages); a freed on stream `a_on`, c on the default stream;
 * then 4 pages asked on the default stream, which fit where c was with 2 pages more: moved from
 * a's top, or new. Returns that block. */
static unsigned char *grow_past_the_mark_on(cudaStream_t a_on, unsigned char **a, unsigned char **b, unsigned char **c)
{
    *a = alloc(p, 3 * PAGE), *b = alloc(p, PAGE), *c = alloc(p, 2 * PAGE);
    ck_assert_ptr_eq(*c, *a + 4 * PAGE);
    free_on(p, *a, 3 * PAGE, a_on);
    dealloc(p, *c, 2 * PAGE);
    fake_vmm.device_syncs = fake_vmm.stream_queries = fake_vmm.event_records = 0;
    unsigned char *z = alloc(p, 4 * PAGE);
    ck_assert_ptr_eq(z, *c);
    return z;
}

static unsigned char *grow_past_the_mark(unsigned char **a, unsigned char **b, unsigned char **c)
{
    return grow_past_the_mark_on(NULL, a, b, c);
}

/* What the driver was asked since the counters were last cleared (queries -1: at least one), and
 * what the pool holds, in pages. */
static void expect(int syncs, int queries, int unmaps, int creates, size_t reserved_pages)
{
    ck_assert_int_eq(fake_vmm.device_syncs, syncs);
    if (queries < 0)
        ck_assert_int_ge(fake_vmm.stream_queries, 1);
    else
        ck_assert_int_eq(fake_vmm.stream_queries, queries);
    ck_assert_int_eq(fake_vmm.unmaps, unmaps);
    ck_assert_int_eq(fake_vmm.creates, creates);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), reserved_pages * PAGE);
    books_agree(p);
}

#define PER_THREAD ((cudaStream_t)CRMM_CUDA_STREAM_PER_THREAD)

CRMM_TEST_IN("page_moves", wait_moves_the_streams_own_pages_without_waiting)
{
    p = expandable_pool("page_moves=wait");
    unsigned char *a, *b, *c, *z = grow_past_the_mark(&a, &b, &c);
    /* a's top two pages moved: no synchronization, no unmap yet, no new memory */
    expect(0, 0, 0, 6, 6);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 2);
    ck_assert_int_eq(fake_vmm.event_records, 1);
    ck_assert_ptr_null(fake_vmm.event_stream); /* on the stream that freed them and grows */
    /* the same physical pages, mapped at both places */
    ck_assert_int_eq(fake_vmm_handle_at((uintptr_t)a + PAGE), fake_vmm_handle_at((uintptr_t)z + 3 * PAGE));
    ck_assert_int_eq(fake_vmm_handle_at((uintptr_t)a + 2 * PAGE), fake_vmm_handle_at((uintptr_t)z + 2 * PAGE));
    dealloc(p, z, 4 * PAGE);
}

CRMM_TEST_IN("page_moves", the_event_is_recorded_on_the_stream_that_grows)
{
    p = expandable_pool("page_moves=wait");
    cudaStream_t s = stream_n(2);
    unsigned char *a = alloc_on(p, 3 * PAGE, s), *b = alloc_on(p, PAGE, s), *c = alloc_on(p, 2 * PAGE, s);
    free_on(p, a, 3 * PAGE, s);
    free_on(p, c, 2 * PAGE, s);
    fake_vmm.device_syncs = 0;
    unsigned char *z = alloc_on(p, 4 * PAGE, s);
    ck_assert_ptr_eq(z, c);
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    ck_assert_int_eq(fake_vmm.event_records, 1);
    ck_assert_ptr_eq(fake_vmm.event_stream, s);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 2);
    free_on(p, z, 4 * PAGE, s);
    free_on(p, b, PAGE, s);
}

CRMM_TEST_IN("page_moves", wait_synchronizes_to_move_another_streams_pages)
{
    p = expandable_pool("page_moves=wait");
    unsigned char *a, *b, *c, *z = grow_past_the_mark_on(stream_n(1), &a, &b, &c);
    expect(1, 0, 2, 6, 6); /* a's top two pages moved after one device synchronization */
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 0);
    ck_assert_int_eq(fake_vmm.event_records, 0);
    dealloc(p, z, 4 * PAGE);
}

CRMM_TEST_IN("page_moves", lent_pages_stay_mapped_until_their_event_has_completed)
{
    p = expandable_pool("page_moves=wait");
    fake_vmm.events_busy = 1;
    unsigned char *a, *b, *c, *z = grow_past_the_mark(&a, &b, &c);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 2);
    /* a growth while the work before the move may still run: the old addresses stay mapped and
     * are not handed out (the new block lies above z) */
    unsigned char *y = alloc(p, 2 * PAGE);
    ck_assert_int_ge(fake_vmm.event_queries, 1);
    ck_assert_ptr_eq(y, z + 4 * PAGE);
    ck_assert_int_eq(fake_vmm.unmaps, 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 2);
    books_agree(p);
    /* done: the next growth unmaps them, and their addresses are free to map again */
    fake_vmm.events_busy = 0;
    unsigned char *x = alloc(p, 3 * PAGE);
    ck_assert_int_eq(fake_vmm.unmaps, 2);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 0);
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    books_agree(p);
    free_all(p, {x, 3 * PAGE}, {y, 2 * PAGE}, {z, 4 * PAGE}, {b, PAGE});
}

CRMM_TEST_IN("page_moves", trim_unmaps_lent_pages_after_synchronizing)
{
    p = expandable_pool("page_moves=wait");
    fake_vmm.events_busy = 1;
    unsigned char *a, *b, *c, *z = grow_past_the_mark(&a, &b, &c);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_int_eq(fake_vmm.device_syncs, 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 5 * PAGE); /* b and z; a's last page went back */
    ck_assert_uint_eq(fake_vmm_mapped_bytes(), 5 * PAGE);
    books_agree(p);
    free_all(p, {z, 4 * PAGE}, {b, PAGE});
}

CRMM_TEST_IN("page_moves", trim_unmaps_lent_pages_whose_work_is_done_without_synchronizing)
{
    p = expandable_pool("page_moves=wait");
    fake_vmm.events_busy = 1;
    unsigned char *a, *b, *c, *z = grow_past_the_mark(&a, &b, &c);
    unsigned char *w = alloc(p, PAGE); /* a's last free page: nothing free is left to give back */
    ck_assert_ptr_eq(w, a);
    ck_assert_crmm_ok(crmm_resource_trim(p)); /* the move's work may still run: they stay */
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 2);
    fake_vmm.events_busy = 0;
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 0);
    ck_assert_int_eq(fake_vmm.unmaps, 2);
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    books_agree(p);
    free_all(p, {w, PAGE}, {z, 4 * PAGE}, {b, PAGE});
}

CRMM_TEST_IN("page_moves", destroying_a_pool_with_lent_pages_frees_each_page_once)
{
    p = expandable_pool("page_moves=wait");
    fake_vmm.events_busy = 1;
    unsigned char *a, *b, *c, *z = grow_past_the_mark(&a, &b, &c);
    free_all(p, {z, 4 * PAGE}, {b, PAGE});
    release_pool();
    ck_assert_uint_eq(fake_vmm_mapped_bytes(), 0);
    ck_assert_uint_eq(fake_vmm.physical, 0);
    ck_assert_int_eq(fake_vmm.releases, fake_vmm.creates); /* a second release would be refused */
}

CRMM_TEST_IN("page_moves", moves_without_waiting_are_bounded_by_the_batches)
{
    /* each round leaves 3 + 2 free pages around a kept one and asks for 4: every second round
     * moves two pages (between them the mark rises). With no event ever done, four moves wait
     * at once; the fifth synchronizes the device instead, which ends them all. */
    p = expandable_pool("page_moves=wait");
    fake_vmm.events_busy = 1;
    for (int i = 0; i <= 8; i++) {
        unsigned char *x = alloc(p, 3 * PAGE), *k = alloc(p, PAGE), *y = alloc(p, 2 * PAGE);
        free_all(p, {x, 3 * PAGE}, {y, 2 * PAGE});
        unsigned char *z = alloc(p, 4 * PAGE);
        ck_assert_int_eq(fake_vmm.device_syncs, i < 8 ? 0 : 1);
        ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), i < 8 ? 2 * (unsigned)(i / 2 + 1) : 0);
        ck_assert_int_eq(fake_vmm.event_records, i < 8 ? i / 2 + 1 : 4);
        books_agree(p);
        (void)z, (void)k;
    }
}

CRMM_TEST_IN("page_moves", idle_moves_without_synchronizing_when_the_streams_are_idle)
{
    p = expandable_pool("page_moves=idle");
    unsigned char *a, *b, *c;
    grow_past_the_mark_on(PER_THREAD, &a, &b, &c);
    expect(0, -1, 2, 6, 6); /* a's stream said it was idle: the move, unmapped at once, no wait */
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 0);
    unsigned char *w = alloc_on(p, PAGE, PER_THREAD); /* a's bottom page stayed mapped and free */
    ck_assert_ptr_eq(w, a);
    free_on(p, w, PAGE, PER_THREAD);
}

CRMM_TEST_IN("page_moves", idle_maps_new_pages_while_busy_and_moves_them_when_idle)
{
    p = expandable_pool("page_moves=idle");
    fake_vmm.streams_busy = 1;
    unsigned char *a, *b, *c, *z = grow_past_the_mark_on(PER_THREAD, &a, &b, &c);
    expect(0, 1, 0, 8, 8); /* busy: two new pages, and the mark stays at 6 */
    /* idle again: the next growth past the mark moves a's three free pages instead of new ones */
    fake_vmm.streams_busy = 0;
    unsigned char *y = alloc(p, 4 * PAGE);
    ck_assert_ptr_eq(y, z + 4 * PAGE);
    expect(0, 2, 3, 9, 9);
    dealloc(p, y, 4 * PAGE);
}

CRMM_TEST_IN("page_moves", idle_never_asks_a_stream_it_cannot_know_is_alive)
{
    p = expandable_pool("page_moves=idle");
    unsigned char *a = alloc(p, 3 * PAGE), *b = alloc(p, PAGE), *c = alloc(p, 2 * PAGE);
    free_on(p, a, 3 * PAGE, stream_n(1)); /* freed on a stream that may be destroyed by now */
    dealloc(p, c, 2 * PAGE);
    fake_vmm.device_syncs = fake_vmm.stream_queries = 0;
    unsigned char *z = alloc(p, 4 * PAGE);
    ck_assert_ptr_eq(z, c);
    expect(0, 0, 0, 8, 8); /* a's pages are stream 1's: not asked, not moved; two new pages */
    dealloc(p, b, PAGE);
}

CRMM_TEST_IN("page_moves", never_maps_new_pages_and_gives_free_ones_back_at_trim)
{
    p = expandable_pool("page_moves=never");
    unsigned char *a, *b, *c, *z = grow_past_the_mark(&a, &b, &c);
    expect(0, 0, 0, 8, 8);
    ck_assert_crmm_ok(crmm_resource_trim(p)); /* a's three free pages go back */
    expect(1, 0, 3, 8, 5);
    dealloc(p, z, 4 * PAGE);
}

CRMM_TEST_IN("page_moves", never_still_gives_free_pages_back_before_out_of_memory)
{
    p = expandable_pool("page_moves=never maximum_size=6MiB");
    unsigned char *a = alloc(p, 90 * PAGE), *b = alloc(p, PAGE);
    dealloc(p, a, 90 * PAGE);
    fake_vmm.device_syncs = 0;
    /* 90 free pages below b: 95 more would pass the maximum of 96, so the free ones go back first */
    unsigned char *z = alloc(p, 95 * PAGE);
    ck_assert_ptr_eq(z, b + PAGE);
    expect(1, 0, 90, 96, 96);
    dealloc(p, b, PAGE);
}

CRMM_TEST_IN("page_moves", budget_is_wait_when_another_stream_holds_the_free_pages)
{
    p = expandable_pool("page_moves=budget");
    unsigned char *a, *b, *c, *z = grow_past_the_mark_on(stream_n(1), &a, &b, &c);
    expect(1, 0, 2, 6, 6); /* as under wait: a's top two pages moved after one synchronization */
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 0);
    free_all(p, {z, 4 * PAGE}, {b, PAGE});
}

/* What one run of grow_caches saw in its last pass. */
typedef struct cache_run { size_t held; int syncs, moved; size_t allocated; } cache_run;

/* A run that never repeats within a pass: four caches grown by reallocation, a page or two (and a
 * few odd bytes) at a time, in an order drawn from a fixed sequence, each dropped and started again
 * when it is long; everything is freed at the end of a pass, and the next pass does the same on
 * what the pool holds then. Returns, after `passes` passes on one stream, the pages the pool holds,
 * the device synchronizations of all passes, and the pages unmapped (moved: nothing is given back)
 * and the bytes allocated in the last pass. */
static cache_run grow_caches(const char *params, int passes)
{
    fake_vmm_reset(PAGE, DEVICE_MEMORY);
    p = expandable_pool(params);
    cache_run run = {0};
    for (int pass = 0; pass < passes; pass++) {
        unsigned char *cache[4] = {0};
        size_t len[4] = {0};
        uint32_t r = 12345;
        fake_vmm.unmaps = 0;
        run.allocated = 0;
        for (int step = 0; step < 400; step++) {
            r = r * 1103515245 + 12345;
            int c = (int)(r >> 16) % 4;
            size_t grown = len[c] + (1 + (r >> 8) % 2) * PAGE + ((r >> 4) % 16) * 256;
            if (grown > 24 * PAGE)
                grown = PAGE + ((r >> 4) % 16) * 256;
            unsigned char *x = alloc(p, grown);
            if (cache[c])
                dealloc(p, cache[c], len[c]);
            cache[c] = x, len[c] = grown;
            run.allocated += grown;
        }
        for (int c = 0; c < 4; c++)
            dealloc(p, cache[c], len[c]);
    }
    books_agree(p);
    run.held = (size_t)(q(p, CRMM_QUERY_BYTES_RESERVED) / PAGE);
    run.syncs = fake_vmm.device_syncs, run.moved = fake_vmm.unmaps;
    release_pool();
    return run;
}

CRMM_TEST_IN("page_moves", budget_holds_less_than_wait_over_runs_that_do_not_repeat)
{
    /* wait's mark rises at each second move of a pass and by the slack each move locks in, so
     * what it holds creeps up pass after pass; budget's stays near where its first pass left it */
    cache_run wait = grow_caches("page_moves=wait", 8), first = grow_caches("page_moves=budget", 1),
              budget = grow_caches("page_moves=budget", 8);
    ck_assert_uint_lt(budget.held * 8, wait.held * 7);
    ck_assert_uint_le(budget.held, first.held + first.held / 16);
    ck_assert_int_eq(budget.syncs, 0); /* one stream: no move ever waits for the device */
    ck_assert_int_gt(budget.moved, 0); /* what it costs: moves in every pass... */
    ck_assert_uint_le((size_t)budget.moved * PAGE, budget.allocated / 8 + budget.held * PAGE); /* ...within the budget */
}

CRMM_TEST_IN("page_moves", an_unknown_choice_is_refused)
{
    ck_assert_crmm(fake_vmm_expandable_pool("page_moves=sometimes", &p), CRMM_ERROR_CONFIG);
    ck_assert_ptr_null(p);
    ck_assert_error_contains("wait|idle|never");
}

/* A growth that lends the stream's own pages and then cannot map (here maximum_size) gives the
 * lent pages back to the stream's free blocks: else their memory, released while their old
 * addresses stay mapped for the event, is held by the device but no longer counted, and a later
 * growth maps new memory past maximum_size. */
CRMM_TEST_IN("page_moves", a_growth_that_fails_after_lending_takes_its_pages_back)
{
    p = expandable_pool("page_moves=wait maximum_size=512KiB"); /* 8 pages */
    fake_vmm.events_busy = 1;
    unsigned char *a = alloc(p, 4 * PAGE), *b = alloc(p, 3 * PAGE);
    (void)b;
    dealloc(p, a, 4 * PAGE);
    void *x = NULL;
    ck_assert_crmm(crmm_resource_allocate(p, 6 * PAGE, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 3 * PAGE); /* a's pages given back before failing */
    books_agree(p);
    unsigned char *y = alloc(p, 5 * PAGE);
    ck_assert_uint_le(fake_vmm.physical, 8 * PAGE);
    books_agree(p);
    dealloc(p, y, 5 * PAGE);
}

/* A model run: random allocations and frees on three streams, under each page_moves, with events
 * and streams busy at random, driver calls failing at random (cuMemUnmap only where no map
 * fails in the same step: a refused undo of a map keeps a page mapped that the pool does not
 * count, pool_vmm.h) and trims; after every step the books agree with the driver and the device
 * holds no more than maximum_size. */
static unsigned model_seed;

static unsigned model_random(void)
{
    model_seed = model_seed * 1103515245u + 12345u;
    return (model_seed >> 16) & 0x7fff;
}

CRMM_LOOP_TEST_IN("page_moves", a_model_run_keeps_the_books_with_the_driver, 200)
{
    static const char *mode[] = {"page_moves=wait", "page_moves=idle", "page_moves=never", "page_moves=budget"};
    model_seed = (unsigned)_i * 7919u + 1;
    int max_pages = 16 + (int)(model_random() % 16);
    char params[128];
    snprintf(params, sizeof params, "%s maximum_size=%dKiB", mode[_i % 4], 64 * max_pages);
    p = expandable_pool(params);
    struct { unsigned char *x; size_t n; cudaStream_t s; } live[32] = {{0}};
    for (int step = 0; step < 300; step++) {
        int k = (int)(model_random() % 32);
        fake_vmm.events_busy = model_random() % 3 == 0;
        fake_vmm.streams_busy = model_random() % 3 == 0;
        if (model_random() % 20 == 0) {
            fake_vmm.map_fails_in = 1 + (int)(model_random() % 3);
            fake_vmm.map_error = model_random() % 2 ? 0 : CUDA_ERROR_UNKNOWN;
        }
        if (model_random() % 30 == 0)
            fake_vmm.set_access_fails_in = 1;
        if (model_random() % 25 == 0 && !fake_vmm.map_fails_in && !fake_vmm.set_access_fails_in)
            fake_vmm.unmap_fails_in = 1 + (int)(model_random() % 3);
        if (model_random() % 40 == 0) {
            crmm_resource_trim(p);
            crmm_clear_error();
        } else if (live[k].x) {
            free_on(p, live[k].x, live[k].n, live[k].s);
            live[k].x = NULL;
        } else {
            size_t n = model_random() % 4 == 0 ? (1 + model_random() % 6) * PAGE - model_random() % 1000
                                               : 1 + model_random() % (PAGE / 2);
            cudaStream_t s = model_random() % 3 == 0 ? stream_n(1 + (int)(model_random() % 2)) : NULL;
            void *x = NULL;
            if (crmm_resource_allocate(p, n, (crmm_cuda_stream_t)s, &x) == CRMM_OK) {
                memset(x, 0x5A, n);
                live[k].x = x, live[k].n = n, live[k].s = s;
            } else {
                crmm_clear_error();
            }
        }
        fake_vmm.map_fails_in = fake_vmm.set_access_fails_in = fake_vmm.unmap_fails_in = 0;
        books_agree(p);
        ck_assert_uint_le(fake_vmm.physical, (size_t)max_pages * PAGE);
    }
    for (int k = 0; k < 32; k++)
        if (live[k].x)
            free_on(p, live[k].x, live[k].n, live[k].s);
    fake_vmm.events_busy = fake_vmm.streams_busy = 0;
    ck_assert_crmm_ok(crmm_resource_trim(p));
    books_agree(p);
}

int main(void)
{
    Suite *s = suite_create("pool_page_moves");
    TCase *tc = crmm_test_tcase(s, "page_moves", 0);
    tcase_add_checked_fixture(tc, setup, teardown);
    return crmm_test_run(s);
}
