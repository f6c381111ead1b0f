/* check_pool_plan.c — an expandable pool with a placement plan (the `plan` parameter,
 * plugins/pool/pool_plan.h), over the scripted driver: requests that follow the plan go to their
 * planned places, and everything else is served as without a plan; bad plan files are refused
 * with the file and line named. */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <check.h>
#include "pool_expandable_test.h"
#include "fakes/fake_capture.h"

static const char *plan_path; /* the plan file of the running test */

/* Write `text` as the plan file, in a fresh temporary directory; its path is plan_path. */
static void write_plan(const char *text) { plan_path = crmm_test_write_file("test.plan", text); }

/* An expandable pool over the plan file written last, with the parameters `more` too. */
static crmm_resource *planned_pool_with(const char *more)
{
    char params[4300];
    snprintf(params, sizeof params, "plan=%s %s", plan_path, more);
    return expandable_pool(params);
}

static crmm_resource *planned_pool(void) { return planned_pool_with(""); }

/* A planned pool whose own range starts with 1 MiB mapped: requests the plan misses do not make
 * it grow (a growth for the planned stream takes the plan's idle pages while it is lost). */
static crmm_resource *planned_pool_with_room(void) { return planned_pool_with("initial_size=1MiB"); }

/* A, B of 64 KiB live together; A freed; C of 64 KiB goes where A was; then D of 128 KiB over both. */
static const char three[] = "crmm-plan 1\nextent 131072\nloop none\ncount 4\n"
                            "65536 0\n65536 65536\n65536 0\n131072 0\n";

/* Plan `three` followed to its third entry on pool p: A and B made, A freed, C made at A's place and
 * freed; *a: A's place (free), *b: B (live). */
static void three_until_b(unsigned char **a, unsigned char **b)
{
    *a = alloc(p, 65536);
    *b = alloc(p, 65536);
    dealloc(p, *a, 65536);
    unsigned char *c = alloc(p, 65536);
    ck_assert_ptr_eq(c, *a);
    dealloc(p, c, 65536);
}

CRMM_TEST_IN("plan", requests_that_follow_the_plan_go_to_their_places)
{
    write_plan(three);
    p = planned_pool();
    unsigned char *a = alloc(p, 65536), *b = alloc(p, 65536);
    ck_assert_ptr_eq(b, a + 65536);
    dealloc(p, a, 65536);
    unsigned char *c = alloc(p, 65536);
    ck_assert_ptr_eq(c, a); /* A's place, as planned */
    dealloc(p, b, 65536);
    dealloc(p, c, 65536);
    unsigned char *d = alloc(p, 131072);
    ck_assert_ptr_eq(d, a);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_HITS), 4);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_MISSES), 0);
    /* the plan's two pages and nothing else */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 2 * PAGE);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 131072);
    books_agree(p);
    dealloc(p, d, 131072);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED_PEAK), 2 * PAGE);
}

CRMM_TEST_IN("plan", a_request_the_plan_does_not_know_is_served_without_it)
{
    write_plan(three);
    p = planned_pool();
    unsigned char *a = alloc(p, 65536);
    unsigned char *x = alloc(p, 5000); /* not in the plan: the pool's own range */
    ck_assert(x < a || x >= a + 131072);
    unsigned char *b = alloc(p, 65536); /* the cursor stayed: B still goes to its place */
    ck_assert_ptr_eq(b, a + 65536);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_HITS), 2);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_MISSES), 1);
    books_agree(p);
    dealloc(p, x, 5000);
    dealloc(p, a, 65536);
    dealloc(p, b, 65536);
}

CRMM_TEST_IN("plan", a_place_still_in_use_is_not_handed_out_twice)
{
    write_plan(three);
    p = planned_pool();
    unsigned char *a = alloc(p, 65536), *b = alloc(p, 65536);
    unsigned char *c = alloc(p, 65536); /* A is still live: C cannot take its place */
    ck_assert(c < a || c >= a + 131072);
    memset(a, 1, 65536);
    memset(c, 2, 65536);
    ck_assert_uint_eq(a[65535], 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_MISSES), 1);
    dealloc(p, a, 65536);
    dealloc(p, b, 65536);
    unsigned char *d = alloc(p, 131072); /* the cursor went past C: D is served as planned */
    ck_assert_ptr_eq(d, a);
    dealloc(p, c, 65536);
    dealloc(p, d, 131072);
    books_agree(p);
}

/* Entries that overlap on purpose (pages of 64 KiB): a whole page over a small live block, a small
 * block on a page a live block covers whole, and a block of three pages whose last part meets a
 * small live block. */
static const char overlapping[] = "crmm-plan 1\nextent 196608\nloop none\ncount 6\n"
                                  "4096 0\n131072 0\n4096 143360\n131072 32768\n65536 65536\n4096 66560\n";

CRMM_TEST_IN("plan", a_place_that_meets_a_live_block_in_any_page_is_refused)
{
    write_plan(overlapping);
    p = planned_pool();
    unsigned char *small0 = alloc(p, 4096);
    unsigned char *base = small0;
    unsigned char *whole = alloc(p, 131072); /* pages 0 and 1 whole, over small0 */
    ck_assert(whole < base || whole >= base + 196608);
    unsigned char *small2 = alloc(p, 4096);
    ck_assert_ptr_eq(small2, base + 143360);
    dealloc(p, small0, 4096);
    unsigned char *span = alloc(p, 131072); /* [32 KiB, 160 KiB): its last part meets small2 */
    ck_assert(span < base || span >= base + 196608);
    unsigned char *page1 = alloc(p, 65536);
    ck_assert_ptr_eq(page1, base + 65536);
    unsigned char *inside = alloc(p, 4096); /* on page 1, which page1 covers whole */
    ck_assert(inside < base || inside >= base + 196608);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_HITS), 3);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_MISSES), 3);
    dealloc(p, whole, 131072);
    dealloc(p, small2, 4096);
    dealloc(p, span, 131072);
    dealloc(p, page1, 65536);
    dealloc(p, inside, 4096);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(fake_vmm_mapped_bytes(), 0); /* every page of the plan's range unused again */
}

CRMM_TEST_IN("plan", only_the_first_planned_stream_follows_the_plan)
{
    write_plan(three);
    p = planned_pool();
    unsigned char *a = alloc_on(p, 65536, stream_n(1));
    unsigned char *b = alloc_on(p, 65536, stream_n(2)); /* another stream: not planned, not counted */
    ck_assert(b < a || b >= a + 131072);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_HITS), 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_MISSES), 0);
    unsigned char *b1 = alloc_on(p, 65536, stream_n(1));
    ck_assert_ptr_eq(b1, a + 65536);
    free_on(p, b, 65536, stream_n(2));
    free_on(p, b1, 65536, stream_n(1));
    free_on(p, a, 65536, stream_n(1));
}

/* cudaStreamPerThread is another stream on each thread: the plan never follows it. */
CRMM_TEST_IN("plan", the_per_thread_default_stream_is_never_planned)
{
    write_plan(three);
    p = planned_pool();
    unsigned char *x = alloc_on(p, 65536, cudaStreamPerThread);
    unsigned char *a = alloc(p, 65536); /* the first planned request */
    ck_assert(x < a || x >= a + 131072);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_HITS), 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_MISSES), 0);
    free_on(p, x, 65536, cudaStreamPerThread);
    dealloc(p, a, 65536);
    books_agree(p);
}

CRMM_TEST_IN("plan", a_block_freed_on_another_stream_waits_for_trim)
{
    write_plan(three);
    p = planned_pool();
    unsigned char *a = alloc_on(p, 65536, stream_n(1)), *b = alloc_on(p, 65536, stream_n(1));
    free_on(p, a, 65536, stream_n(2)); /* stream 1's next work is not ordered after it */
    unsigned char *c = alloc_on(p, 65536, stream_n(1));
    ck_assert(c < a || c >= a + 131072);
    free_on(p, c, 65536, stream_n(1));
    free_on(p, b, 65536, stream_n(1));
    int syncs = fake_vmm.device_syncs;
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_int_gt(fake_vmm.device_syncs, syncs);
    /* after the synchronization both places are free again, and the plan's pages went back */
    ck_assert_uint_eq(fake_vmm_mapped_bytes(), 0);
    books_agree(p);
    unsigned char *d = alloc_on(p, 131072, stream_n(1));
    ck_assert_ptr_eq(d, a);
    free_on(p, d, 131072, stream_n(1));
}

/* A first block, then steps of A (64 KiB) and B (128 KiB), each freed before the next: the loop
 * goes back to entry 1. */
static const char looped[] = "crmm-plan 1\nextent 262144\nloop 1\ncount 3\n"
                             "65536 196608\n65536 0\n131072 65536\n";

CRMM_TEST_IN("plan", after_the_last_entry_the_plan_goes_back_to_its_loop)
{
    write_plan(looped);
    p = planned_pool();
    unsigned char *first = alloc(p, 65536);
    unsigned char *base = first - 196608;
    for (int step = 0; step < 5; step++) {
        unsigned char *a = alloc(p, 65536), *b = alloc(p, 131072);
        ck_assert_ptr_eq(a, base);
        ck_assert_ptr_eq(b, base + 65536);
        dealloc(p, a, 65536);
        dealloc(p, b, 131072);
    }
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_HITS), 11);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_MISSES), 0);
    dealloc(p, first, 65536);
}

/* A plan of 12 entries of distinct sizes, none freed (1..12 times 4 KiB, back to back), followed
 * wholly into first[1..12]; those blocks freed (the first kept live when `keep_first`), then the
 * same requests again into again[1..12]: a run that starts over. */
static void run_twice(bool keep_first, void **first, void **again)
{
    char text[512];
    int n = snprintf(text, sizeof text, "crmm-plan 1\nextent %d\nloop none\ncount 12\n", 78 * 4096);
    for (int i = 1, at = 0; i <= 12; at += i * 4096, i++)
        n += snprintf(text + n, sizeof text - (size_t)n, "%d %d\n", i * 4096, at);
    write_plan(text);
    p = planned_pool_with_room();
    for (int i = 1; i <= 12; i++)
        first[i] = alloc(p, (size_t)i * 4096);
    for (int i = keep_first ? 2 : 1; i <= 12; i++)
        dealloc(p, first[i], (size_t)i * 4096);
    for (int i = 1; i <= 12; i++)
        again[i] = alloc(p, (size_t)i * 4096);
}

CRMM_TEST_IN("plan", a_run_that_starts_over_finds_its_place_again)
{
    void *first[13], *again[13];
    run_twice(false, first, again);
    /* the plan had ended; the first entry's size, with its place free, started it over at once */
    for (int i = 1; i <= 12; i++)
        ck_assert_ptr_eq(again[i], first[i]);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_HITS), 24);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_MISSES), 0);
    for (int i = 1; i <= 12; i++)
        dealloc(p, again[i], (size_t)i * 4096);
    books_agree(p);
}

CRMM_TEST_IN("plan", a_run_that_starts_over_while_the_first_place_is_taken_is_found_by_the_search)
{
    void *first[13], *again[13];
    run_twice(true, first, again);
    /* no start over at the first request: after 8 misses the search finds the run at the start */
    for (int i = 9; i <= 12; i++)
        ck_assert_ptr_eq(again[i], first[i]);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_HITS), 16);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_MISSES), 8);
    dealloc(p, first[1], 4096);
    for (int i = 1; i <= 12; i++)
        dealloc(p, again[i], (size_t)i * 4096);
    books_agree(p);
}

/* A plan of the weights (64 KiB, live on) and one step of 10 blocks (1..10 times 4 KiB, each freed
 * before the next), no loop: a recording that stopped after its first step. */
static void weights_and_a_step(void)
{
    char text[512];
    int n = snprintf(text, sizeof text, "crmm-plan 1\nextent %d\nloop none\ncount 11\n65536 0\n", 65536 + 40960);
    for (int i = 1; i <= 10; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, "%d 65536\n", i * 4096);
    write_plan(text);
}

/* The run goes on past the plan's end with more steps: the plan does not follow them from inside
 * (8 requests in a row match its entries 1..8, and entries 9 and 10 would be served next), as it
 * would for a part of each step only; they are served as without a plan. */
CRMM_TEST_IN("plan", an_ended_plan_is_not_followed_from_inside)
{
    weights_and_a_step();
    p = planned_pool_with_room();
    unsigned char *w = alloc(p, 65536);
    for (int step = 0; step < 3; step++)
        for (int i = 1; i <= 10; i++) {
            unsigned char *x = alloc(p, (size_t)i * 4096);
            ck_assert(step > 0 || x == w + 65536);
            ck_assert(step == 0 || x < w || x >= w + 65536 + 40960); /* the pool's own range */
            dealloc(p, x, (size_t)i * 4096);
        }
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_HITS), 11);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_MISSES), 20);
    books_agree(p);
    dealloc(p, w, 65536);
}

/* A server's plan: one 8 KiB block, then two of 64 KiB, each freed before the next, no loop. After
 * its end, requests it does not know come, and the searches that find nothing wait longer each
 * time; then a request of the first entry's size, while the first places are free, starts the plan
 * over by chance. Its next requests miss again, but the search that would find the plan lost is
 * deferred by that back-off: once the plan has served none of 32 requests, the pool's growth still
 * takes its idle pages instead of new memory. */
CRMM_TEST_IN("plan", a_plan_started_over_by_chance_lends_its_idle_pages_once_unfollowed)
{
    write_plan("crmm-plan 1\nextent 196608\nloop none\ncount 3\n8192 0\n65536 65536\n65536 131072\n");
    p = planned_pool_with_room();
    unsigned char *x = alloc(p, 8192);
    dealloc(p, x, 8192);
    for (int i = 0; i < 2; i++) {
        unsigned char *y = alloc(p, 65536);
        ck_assert_ptr_eq(y, x + (size_t)(i + 1) * 65536);
        dealloc(p, y, 65536);
    }
    for (int i = 0; i < 130; i++) /* the plan has ended: a server's own requests, from the room */
        dealloc(p, alloc(p, 12288), 12288);
    unsigned char *again = alloc(p, 8192); /* the first entry's size, every place free */
    ck_assert_ptr_eq(again, x);
    dealloc(p, again, 8192);
    for (int i = 0; i < 32; i++)
        dealloc(p, alloc(p, 12288), 12288);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_HITS), 4);
    uint64_t held = q(p, CRMM_QUERY_BYTES_RESERVED);
    int creates = fake_vmm.creates;
    unsigned char *big = alloc(p, 1024 * KiB + 2 * PAGE); /* past the room: the range grows */
    ck_assert_int_eq(fake_vmm.creates, creates);       /* by the plan's idle pages, no new memory */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), held);
    memset(big, 7, 1024 * KiB + 2 * PAGE);
    books_agree(p);
    dealloc(p, big, 1024 * KiB + 2 * PAGE);
}

/* After the plan's end, a request of the first entry's size starts it over only once the blocks
 * the run made first are gone: while the second entry's block (its weights) lives, it does not. */
CRMM_TEST_IN("plan", a_request_of_the_first_size_starts_over_only_once_the_first_blocks_are_gone)
{
    write_plan("crmm-plan 1\nextent 131072\nloop none\ncount 3\n8192 0\n65536 65536\n32768 0\n");
    p = planned_pool_with_room();
    unsigned char *x = alloc(p, 8192), *w = alloc(p, 65536);
    dealloc(p, x, 8192);
    unsigned char *y = alloc(p, 32768); /* the last entry, x's place */
    ck_assert_ptr_eq(y, x);
    dealloc(p, y, 32768);
    unsigned char *z = alloc(p, 8192); /* the plan has ended; w still lives */
    ck_assert(z < x || z >= x + 131072);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_MISSES), 1);
    dealloc(p, z, 8192);
    dealloc(p, w, 65536);
    z = alloc(p, 8192); /* everything gone: the run starts over */
    ck_assert_ptr_eq(z, x);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_HITS), 4);
    dealloc(p, z, 8192);
    books_agree(p);
}

/* A run that goes on past a plan with no loop: when the pool's own range grows for the planned
 * stream, the plan's idle page goes to it instead of new memory, while a page a live planned block
 * uses stays; the old address is unmapped once an event recorded on the planned stream has
 * completed (asked without waiting). A run that starts over then finds that place again, mapped
 * with a free page of the range, not new memory. */
CRMM_TEST_IN("plan", a_run_past_the_plans_end_lends_its_idle_pages_to_the_pools_growth)
{
    write_plan(three);
    p = planned_pool();
    unsigned char *a = alloc(p, 65536), *b = alloc(p, 65536);
    dealloc(p, a, 65536);
    unsigned char *c = alloc(p, 65536); /* entry 2, A's place */
    dealloc(p, c, 65536);
    int creates = fake_vmm.creates, records = fake_vmm.event_records, unmaps = fake_vmm.unmaps;
    fake_vmm.events_busy = 1;
    unsigned char *d = alloc(p, 131072); /* entry 3 meets live B: the pool's range grows, and the plan ends */
    ck_assert(d < a || d >= a + 131072);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_MISSES), 1);
    ck_assert_int_eq(fake_vmm.creates, creates + 1);   /* two pages: the plan's idle one and a new one */
    ck_assert_int_eq(fake_vmm.event_records, records + 1);
    ck_assert_ptr_null(fake_vmm.event_stream);         /* on the planned stream */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 3 * PAGE); /* B's page and the range's two */
    ck_assert_uint_eq(fake_vmm.physical, 3 * PAGE);
    memset(d, 5, 131072);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 1);
    books_agree(p); /* the lent page mapped twice, counted once */
    unsigned char *y = alloc(p, 8192); /* the event has not completed: the old address stays */
    ck_assert_int_eq(fake_vmm.unmaps, unmaps);
    fake_vmm.events_busy = 0;
    dealloc(p, y, 8192);
    y = alloc(p, 8192);
    ck_assert_int_eq(fake_vmm.unmaps, unmaps + 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 0);
    ck_assert_uint_eq(fake_vmm.physical, 4 * PAGE); /* and y's page */
    memset(b, 3, 65536); /* B's page stayed */
    ck_assert_uint_eq(b[65535], 3);
    ck_assert_uint_eq(d[131071], 5);
    books_agree(p);
    dealloc(p, y, 8192);
    dealloc(p, d, 131072);
    dealloc(p, b, 65536);
    /* the run starts over: entry 0's place is the plan's again, its page the range's free one */
    int creates_then = fake_vmm.creates;
    size_t held = fake_vmm.physical;
    unsigned char *again = alloc(p, 65536);
    ck_assert_ptr_eq(again, a);
    ck_assert_int_eq(fake_vmm.creates, creates_then);
    ck_assert_uint_eq(fake_vmm.physical, held);
    memset(again, 7, 65536);
    books_agree(p);
    dealloc(p, again, 65536);
    books_agree(p);
}

/* A process that runs its recorded job twice: the first run goes past the plan's end (the range
 * grows with the plan's idle pages), and the second follows the plan again from its start. Every
 * request of the second run is served at its planned place, and the pool holds no more than in
 * the first run: the range's free pages, not new memory, back the places the plan lent. */
CRMM_TEST_IN("plan", a_second_run_of_the_job_holds_no_more_than_the_first)
{
    write_plan(three);
    p = planned_pool();
    for (int run = 0; run < 2; run++) {
        unsigned char *a, *b;
        three_until_b(&a, &b);
        dealloc(p, b, 65536);
        unsigned char *d = alloc(p, 131072); /* entry 3: the plan's last */
        dealloc(p, d, 131072);
        /* past the plan's end, larger requests than the plan's: the range grows, taking the plan's
         * idle pages first */
        unsigned char *e = alloc(p, 3 * PAGE), *f = alloc(p, 3 * PAGE);
        memset(e, 1, 3 * PAGE);
        memset(f, 2, 3 * PAGE);
        books_agree(p);
        dealloc(p, e, 3 * PAGE);
        dealloc(p, f, 3 * PAGE);
        books_agree(p);
    }
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_HITS), 8);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_MISSES), 4);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED_PEAK), 6 * PAGE);
    ck_assert_uint_eq(fake_vmm.physical_peak, 6 * PAGE);
}

/* With page_moves = never the range's pages do not move to the plan either: a run that starts over
 * finds the place the plan gave to the range served as without a plan, by the range's free pages,
 * and no new memory is mapped beside them; after a trim, which gives those back, it is the plan's
 * again. */
CRMM_TEST_IN("plan", page_moves_never_keeps_the_ranges_pages_from_the_plan)
{
    write_plan(three);
    p = planned_pool_with("page_moves=never");
    unsigned char *a, *b;
    three_until_b(&a, &b);
    dealloc(p, b, 65536);
    unsigned char *d = alloc(p, 131072);
    dealloc(p, d, 131072);
    unsigned char *e = alloc(p, 3 * PAGE); /* the range takes the plan's two idle pages and a new one */
    dealloc(p, e, 3 * PAGE);
    unsigned char *y = alloc(p, 8192); /* the lending's event has completed: the old addresses go */
    dealloc(p, y, 8192);
    int creates = fake_vmm.creates;
    unsigned char *again = alloc(p, 65536);
    ck_assert(again < a || again >= a + 131072);
    ck_assert_int_eq(fake_vmm.creates, creates);
    books_agree(p);
    dealloc(p, again, 65536);
    /* after a trim the range holds no idle page: the place takes new memory again */
    ck_assert_int_eq(crmm_resource_trim(p), CRMM_OK);
    uint64_t hits = q(p, CRMM_QUERY_POOL_PLAN_HITS);
    again = alloc(p, 65536);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_HITS), hits + 1);
    ck_assert(again >= a && again < a + 131072);
    books_agree(p);
    dealloc(p, again, 65536);
}

/* The plan's pages count toward maximum_size: a planned place that would pass it is not mapped. */
CRMM_TEST_IN("plan", the_plans_pages_count_toward_the_maximum)
{
    write_plan(three);
    p = planned_pool_with("maximum_size=64KiB");
    unsigned char *a = alloc(p, 65536); /* the plan's page 0: the maximum */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), PAGE);
    void *b = NULL;
    ck_assert_int_eq(crmm_resource_allocate(p, 65536, NULL, &b), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "maximum"));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), PAGE);
    ck_assert_uint_le(q(p, CRMM_QUERY_BYTES_RESERVED_PEAK), PAGE);
    ck_assert_uint_eq(fake_vmm.physical, PAGE);
    dealloc(p, a, 65536);
}

/* A trim whose cuMemRelease the driver refuses for a plan page: the page stays counted as held,
 * the trim says so, and a later trim gives it back. */
CRMM_TEST_IN("plan", a_plan_page_the_driver_keeps_at_trim_stays_counted)
{
    write_plan(three);
    p = planned_pool();
    unsigned char *a = alloc(p, 65536), *b = alloc(p, 65536);
    dealloc(p, a, 65536);
    dealloc(p, b, 65536);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 2 * PAGE);
    fake_vmm.release_fails_in = 1;
    ck_assert_int_eq(crmm_resource_trim(p), CRMM_ERROR_CUDA);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "plan"));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), PAGE);
    ck_assert_uint_eq(fake_vmm.physical, PAGE);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    ck_assert_uint_eq(fake_vmm.physical, 0);
}

CRMM_TEST_IN("plan", a_planned_block_freed_twice_or_inside_is_refused)
{
    write_plan(three);
    p = planned_pool();
    unsigned char *a = alloc(p, 65536);
    ck_assert_int_eq(crmm_resource_deallocate(p, a + 256, 65536, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "plan"));
    ck_assert_int_eq(crmm_resource_deallocate(p, a, 4096, NULL), CRMM_ERROR_INVALID_ARGUMENT); /* wrong size */
    dealloc(p, a, 65536);
    ck_assert_int_eq(crmm_resource_deallocate(p, a, 65536, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
}

CRMM_TEST_IN("plan", out_of_memory_gives_back_the_plans_unused_pages_first)
{
    write_plan(three);
    p = planned_pool();
    unsigned char *a = alloc(p, 65536), *b = alloc(p, 65536);
    dealloc(p, a, 65536);
    dealloc(p, b, 65536); /* the plan's two pages are mapped and unused */
    fake_vmm.physical_limit = 4 * PAGE;
    unsigned char *x = alloc(p, 3 * PAGE); /* the pool's own range needs three of the four */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 3 * PAGE);
    books_agree(p);
    dealloc(p, x, 3 * PAGE);
}

/* One planned block of 8 pages that lives on (a model's weights); the plan then ends. */
static const char weights[] = "crmm-plan 1\nextent 524288\nloop none\ncount 1\n524288 0\n";

/* The pool's own range moves its free pages to where it grows while planned blocks live: the
 * planned bytes are not taken for bytes of the range's blocks (that would leave it no free bytes
 * to move, and it would map new pages instead). */
CRMM_TEST_IN("plan", the_pools_range_moves_its_free_pages_while_planned_blocks_live)
{
    write_plan(weights);
    p = planned_pool();
    unsigned char *w = alloc(p, 8 * PAGE);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_HITS), 1);
    /* the range: a of 3 pages, b of 1, c of 2 (its mark: 6 pages); a and c freed; then 4 pages,
     * which fit where c was with 2 pages more: moved from a's top */
    unsigned char *a = alloc(p, 3 * PAGE), *b = alloc(p, PAGE), *c = alloc(p, 2 * PAGE);
    ck_assert(a < w || a >= w + 8 * PAGE);
    dealloc(p, a, 3 * PAGE);
    dealloc(p, c, 2 * PAGE);
    int creates = fake_vmm.creates;
    unsigned char *z = alloc(p, 4 * PAGE);
    ck_assert_ptr_eq(z, c);
    ck_assert_int_eq(fake_vmm.creates, creates); /* no new memory */
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 2);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 14 * PAGE); /* the weights' 8 and the range's 6 */
    books_agree(p);
    dealloc(p, z, 4 * PAGE);
    dealloc(p, b, PAGE);
    dealloc(p, w, 8 * PAGE);
}

/* Before out of memory, the pool's range gives back its free pages while planned blocks live. */
CRMM_TEST_IN("plan", out_of_memory_gives_back_the_ranges_free_pages_while_planned_blocks_live)
{
    write_plan(weights);
    p = planned_pool_with("page_moves=never maximum_size=832KiB"); /* 13 pages at most */
    unsigned char *w = alloc(p, 8 * PAGE);
    unsigned char *a = alloc(p, 3 * PAGE), *b = alloc(p, PAGE);
    dealloc(p, a, 3 * PAGE);
    /* 4 pages more would hold 16: a's 3 free pages go back first */
    unsigned char *z = alloc(p, 4 * PAGE);
    ck_assert_ptr_eq(z, b + PAGE);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 13 * PAGE);
    books_agree(p);
    dealloc(p, z, 4 * PAGE);
    dealloc(p, b, PAGE);
    dealloc(p, w, 8 * PAGE);
}

/* ---- the books under lending, capture and driver refusals ----------------------------------- */

/* One planned block of a page; the plan then ends. */
static const char one_page[] = "crmm-plan 1\nextent 65536\nloop none\ncount 1\n65536 0\n";

/* The plan's only page is lent to the pool's growth and the event has not completed: the plan
 * holds nothing, and trim still unmaps the old address (no work can use it after trim's
 * synchronization). */
CRMM_TEST_IN("plan", trim_unmaps_the_old_address_of_a_lent_page_when_the_plan_holds_nothing_else)
{
    write_plan(one_page);
    p = planned_pool();
    unsigned char *a = alloc(p, 65536);
    dealloc(p, a, 65536);
    fake_vmm.events_busy = 1;
    unsigned char *d = alloc(p, 2 * PAGE); /* the range grows for the planned stream: takes the idle page */
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 1);
    dealloc(p, d, 2 * PAGE);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 0);
    ck_assert_uint_eq(fake_vmm_mapped_bytes(), 0);
    books_agree(p);
}

/* A planned block allocated before a capture and freed inside it is the graph's until the graph
 * is gone (every replay uses it, then frees it): a trim while the graph lives does not free its
 * place; a trim after the graph is destroyed does. */
CRMM_TEST_IN("plan", a_planned_block_freed_under_capture_stays_the_graphs_until_it_is_gone)
{
    write_plan(three);
    p = planned_pool_with("graphs=on");
    cudaStream_t s = stream_n(1);
    unsigned char *a = alloc_on(p, 65536, s), *b = alloc_on(p, 65536, s);
    ck_assert_ptr_eq(b, a + 65536);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    free_on(p, a, 65536, s);
    fake_capture_end(s);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    unsigned char *c = alloc_on(p, 65536, s); /* entry 2, a's place: busy while the graph lives */
    ck_assert(c < a || c >= a + 131072);
    free_on(p, c, 65536, s);
    fake_graph_destroy(g);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    unsigned char *d = alloc_on(p, 131072, s); /* entry 3 over a's and b's places: b still lives */
    ck_assert(d < a || d >= a + 131072);
    free_on(p, d, 131072, s);
    free_on(p, b, 65536, s);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    books_agree(p);
}

/* A growth for the planned stream that the maximum refuses gives back the pages the ended plan
 * lent it: they are the plan's again (not released while the plan's range still maps them), and
 * a run that starts over finds its first place. */
CRMM_TEST_IN("plan", a_refused_growth_gives_the_plans_lent_pages_back)
{
    write_plan("crmm-plan 1\nextent 131072\nloop none\ncount 2\n65536 0\n65536 65536\n");
    p = planned_pool_with("maximum_size=192KiB");
    unsigned char *a = alloc(p, 65536), *b = alloc(p, 65536); /* the plan has ended */
    dealloc(p, a, 65536);
    fake_vmm.events_busy = 1;
    void *x = NULL;
    ck_assert_int_eq(crmm_resource_allocate(p, 3 * PAGE, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY); /* 1 + 3 > 3 */
    books_agree(p);
    fake_vmm.events_busy = 0;
    dealloc(p, b, 65536);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    unsigned char *again = alloc(p, 65536);
    ck_assert_ptr_eq(again, a);
    dealloc(p, again, 65536);
    books_agree(p);
}

/* The same with the plan's page the only one it lends and no trim on the way: the pool never
 * holds more than its maximum, and counts what it holds. */
CRMM_TEST_IN("plan", a_refused_growth_never_leaves_the_pool_above_its_maximum)
{
    write_plan(one_page);
    p = planned_pool_with("maximum_size=256KiB");
    unsigned char *x = alloc(p, 2 * PAGE); /* the pool's own range (the plan knows no stream yet) */
    unsigned char *a = alloc(p, 65536);    /* the plan's entry: it has ended */
    dealloc(p, a, 65536);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 3 * PAGE);
    fake_vmm.events_busy = 1;
    void *y = NULL;
    ck_assert_int_eq(crmm_resource_allocate(p, 3 * PAGE, NULL, &y), CRMM_ERROR_OUT_OF_MEMORY); /* 2 + 3 > 4 */
    books_agree(p);
    unsigned char *z = alloc(p, 2 * PAGE);
    ck_assert_uint_le(fake_vmm.physical, 4 * PAGE);
    books_agree(p);
    dealloc(p, z, 2 * PAGE);
    dealloc(p, x, 2 * PAGE);
}

/* A request of `bytes` that makes the pool grow releases no memory (nothing on the spare list is
 * released while an old address still maps it), and the books stay whole; the block is written
 * and freed. */
static void a_growth_releases_nothing(size_t bytes)
{
    int releases = fake_vmm.releases;
    unsigned char *z = alloc(p, bytes);
    ck_assert_int_eq(fake_vmm.releases, releases);
    books_agree(p);
    memset(z, 1, bytes);
    dealloc(p, z, bytes);
}

/* A pool past the end of the weights plan: 8 idle pages; its events late. */
static void a_pool_past_its_weights_plan(void)
{
    write_plan(weights);
    p = planned_pool();
    unsigned char *w = alloc(p, 8 * PAGE);
    dealloc(p, w, 8 * PAGE);
    fake_vmm.events_busy = 1;
}

/* A growth for the planned stream that moves the range's own free pages and takes the ended
 * plan's idle ones takes no more of the plan's than the move leaves wanting: nothing on the spare
 * list is released while its old address still maps it, and the pool counts what it holds. */
CRMM_TEST_IN("plan", a_move_and_the_plans_pages_for_one_growth_hold_what_the_pool_counts)
{
    a_pool_past_its_weights_plan();
    unsigned char *a = alloc(p, 3 * PAGE), *b = alloc(p, PAGE), *c = alloc(p, 2 * PAGE);
    dealloc(p, a, 3 * PAGE);
    dealloc(p, c, 2 * PAGE);
    a_growth_releases_nothing(4 * PAGE);
    dealloc(p, b, PAGE);
}

/* A planned place whose cuMemSetAccess fails and whose undoing unmap the driver refuses: the page
 * stays mapped, counted as the plan's; trim gives it back and the books stay whole. */
CRMM_TEST_IN("plan", a_page_left_mapped_by_a_refused_undo_stays_counted)
{
    write_plan(three);
    p = planned_pool();
    fake_vmm.set_access_fails_in = 1;
    fake_vmm.unmap_fails_in = 1;
    unsigned char *a = alloc(p, 65536); /* served by the pool's own range */
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_MISSES), 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), fake_vmm.physical);
    unsigned char *b = alloc(p, 65536);
    dealloc(p, a, 65536);
    dealloc(p, b, 65536);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    books_agree(p);
    unsigned char *x = alloc(p, 2 * PAGE);
    books_agree(p);
    dealloc(p, x, 2 * PAGE);
}

/* The plan's place 0 fails to map (cuMemSetAccess refused, and the unmap that undoes it too): the
 * page stays mapped without access, a stray. Entry 2 goes there later: the block handed out is
 * accessible (the map gives the stray page access), and the page is counted once. */
CRMM_TEST_IN("plan", a_planned_block_over_a_stray_page_is_accessible)
{
    write_plan(three);
    p = planned_pool();
    fake_vmm.set_access_fails_in = 1;
    fake_vmm.unmap_fails_in = 1;
    unsigned char *a = alloc(p, 65536); /* entry 0 missed: served by the pool's own range */
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_MISSES), 1);
    unsigned char *b = alloc(p, 65536); /* entry 1, page 1 */
    dealloc(p, a, 65536);
    unsigned char *c = alloc(p, 65536); /* entry 2: page 0, the stray */
    ck_assert_ptr_eq(c, b - 65536);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PLAN_HITS), 2);
    memset(c, 1, 65536);
    books_agree(p);
    dealloc(p, c, 65536);
    dealloc(p, b, 65536);
}

/* The ended plan's idle pages lent to a growth whose place holds a stray page: the growth maps one
 * page fewer than it spans, and the plan lends no more than it maps (a surplus would be released
 * while the plan's old address still maps it). */
CRMM_TEST_IN("plan", a_growth_over_a_stray_page_takes_no_surplus_of_the_plans_pages)
{
    a_pool_past_its_weights_plan();
    fake_vmm.set_access_fails_in = 1;
    fake_vmm.unmap_fails_in = 1;
    void *x = NULL;
    ck_assert_int_eq(crmm_resource_allocate(p, 3 * PAGE, NULL, &x), CRMM_ERROR_CUDA);
    books_agree(p);
    a_growth_releases_nothing(3 * PAGE);
}

/* Random plans (places that overlap, loops or none) followed by random requests and frees on two
 * streams, with trims and events that complete late, and with `faults` the driver refusing maps,
 * unmaps, releases and access now and then and the device's memory bounded: a live block is never
 * overwritten, the books agree with the driver after every trim, and the last trim (once the
 * driver complies again) leaves nothing mapped. */
/* The next of a linear congruential sequence (the tests' fixed seeds make every run the same). */
static unsigned next_random(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 8;
}

static void random_plans(bool faults)
{
    for (int round = 0; round < 60; round++) {
        fake_vmm_reset(PAGE, DEVICE_MEMORY);
        unsigned seed = (faults ? 54321u : 12345u) + 977u * (unsigned)round;
#define RANDOM() next_random(&seed)
        int count = 1 + (int)(RANDOM() % 40);
        size_t extent = (size_t)(1 + RANDOM() % 12) * PAGE / 2;
        extent += 256 * (RANDOM() % 64) + 256;
        int loop = RANDOM() % 3 ? (int)(RANDOM() % (unsigned)count) : -1;
        char text[4096], looped_at[16];
        if (loop < 0)
            snprintf(looped_at, sizeof looped_at, "none");
        else
            snprintf(looped_at, sizeof looped_at, "%d", loop);
        int n = snprintf(text, sizeof text, "crmm-plan 1\nextent %zu\nloop %s\ncount %d\n", extent, looped_at, count);
        size_t sizes[40];
        for (int k = 0; k < count; k++) {
            size_t units = extent / 256, size = 256 * (1 + RANDOM() % (units < 700 ? units : 700));
            if (RANDOM() % 4 == 0)
                size = 256 * (1 + RANDOM() % units);
            size_t offset = 256 * (RANDOM() % ((extent - size) / 256 + 1));
            sizes[k] = size;
            n += snprintf(text + n, sizeof text - (size_t)n, "%zu %zu\n", size, offset);
        }
        write_plan(text);
        p = planned_pool();
        struct { unsigned char *at; size_t n; } live[32] = {{0}};
        for (int step = 0; step < 400; step++) {
            unsigned r = RANDOM() % 100, slot = RANDOM() % 32;
            if (r < 55 && !live[slot].at) {
                size_t size = RANDOM() % 8 ? sizes[RANDOM() % (unsigned)count] : 256 * (1 + RANDOM() % 40);
                void *x = NULL;
                cudaStream_t s = RANDOM() % 10 ? NULL : stream_n(2);
                if (faults) {
                    if (crmm_resource_allocate(p, size, (crmm_cuda_stream_t)s, &x) != CRMM_OK)
                        continue; /* refused: the driver failed or the memory ran out */
                } else {
                    x = alloc_on(p, size, s);
                }
                live[slot].at = x;
                live[slot].n = size;
                memset(live[slot].at, (int)slot + 1, size);
            } else if (r < 95 && live[slot].at) {
                for (size_t i = 0; i < live[slot].n; i += 256)
                    ck_assert_msg(live[slot].at[i] == slot + 1, "round %d step %d: a live block was overwritten", round, step);
                free_on(p, live[slot].at, live[slot].n, RANDOM() % 6 ? NULL : stream_n(2));
                live[slot].at = NULL;
            } else if (r >= 98) {
                crmm_status st = crmm_resource_trim(p);
                ck_assert(faults || st == CRMM_OK);
                ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), fake_vmm.physical);
            } else if (r >= 96) {
                fake_vmm.events_busy = !fake_vmm.events_busy;
            } else if (r == 95 && faults) {
                switch (RANDOM() % 5) {
                case 0: fake_vmm.map_fails_in = 1 + (int)(RANDOM() % 4); break;
                case 1: fake_vmm.unmap_fails_in = 1 + (int)(RANDOM() % 4); break;
                case 2: fake_vmm.release_fails_in = 1 + (int)(RANDOM() % 4); break;
                case 3: fake_vmm.physical_limit = (size_t)(4 + RANDOM() % 20) * PAGE; break;
                default: fake_vmm.set_access_fails_in = 1 + (int)(RANDOM() % 4); break;
                }
            }
        }
#undef RANDOM
        for (int i = 0; i < 32; i++)
            if (live[i].at) {
                for (size_t j = 0; j < live[i].n; j += 256)
                    ck_assert_msg(live[i].at[j] == i + 1, "round %d: a live block was overwritten", round);
                dealloc(p, live[i].at, live[i].n);
            }
        fake_vmm.map_fails_in = fake_vmm.unmap_fails_in = fake_vmm.release_fails_in = fake_vmm.set_access_fails_in = 0;
        fake_vmm.physical_limit = 0;
        fake_vmm.events_busy = 0;
        if (faults && crmm_resource_trim(p) != CRMM_OK) /* what a refusal left, the next trim takes */
            crmm_clear_error();
        ck_assert_crmm_ok(crmm_resource_trim(p));
        books_agree(p);
        ck_assert_msg(fake_vmm_mapped_bytes() == 0, "round %d: %zu bytes still mapped", round, fake_vmm_mapped_bytes());
        release_pool();
    }
}

CRMM_TEST_IN("plan", random_plans_keep_live_blocks_apart_and_their_books_whole)
{
    random_plans(false);
}

CRMM_TEST_IN("plan", random_plans_keep_their_books_whole_when_the_driver_refuses)
{
    random_plans(true);
}

/* A place with a page the plan gave to the range and one that needs new memory, the maximum
 * leaving no room for the latter: nothing is taken from the range, the request is served as
 * without a plan, and the maximum holds for what comes after. */
static const char two_sizes[] = "crmm-plan 1\nextent 131072\nloop none\ncount 2\n131072 0\n65536 0\n";

CRMM_TEST_IN("plan", a_place_the_maximum_leaves_no_room_for_takes_nothing_from_the_range)
{
    write_plan(two_sizes);
    p = planned_pool_with("maximum_size=192KiB");
    unsigned char *x = alloc(p, 131072); /* e0: pages 0 and 1 */
    dealloc(p, x, 131072);
    unsigned char *y = alloc(p, 65536); /* e1: page 0; the plan ends */
    ck_assert_ptr_eq(y, x);
    ck_assert_crmm_ok(crmm_resource_trim(p)); /* page 1 unmapped, OWN */
    dealloc(p, y, 65536);
    unsigned char *z = alloc(p, 3 * PAGE); /* range grows 3 pages, plan lends page 0 */
    dealloc(p, z, 3 * PAGE);
    books_agree(p);
    ck_assert_uint_eq(fake_vmm.physical, 3 * PAGE);
    unsigned char *again = alloc(p, 131072); /* restart: page 0 given, page 1 needs new memory */
    ck_assert(again < x || again >= x + 131072);
    books_agree(p);
    unsigned char *w = alloc_on(p, PAGE, stream_n(1)); /* another stream: a growth of the range */
    ck_assert_uint_le(fake_vmm.physical, 3 * PAGE);
    free_on(p, w, PAGE, stream_n(1));
    books_agree(p);
    dealloc(p, again, 131072);
    books_agree(p);
}

/* The plan lends page 1 (its event pending) after page 0 was given; the range's page holding page
 * 1's memory is given back for page 0, whose map fails: the memory waits on the plan's spare list
 * while the plan's lent page 1 still maps it. Destroying the pool releases it all the same. */
CRMM_TEST_IN("plan", a_page_the_plan_still_maps_at_a_lent_address_is_released_at_destroy)
{
    write_plan(three);
    p = planned_pool();
    unsigned char *a, *b;
    three_until_b(&a, &b);
    unsigned char *d = alloc(p, 131072); /* misses (B live): the plan ends, lends page 0 */
    unsigned char *y = alloc(p, 8192);   /* reaps: page 0 given */
    dealloc(p, b, 65536);
    dealloc(p, y, 8192);
    dealloc(p, d, 131072);
    books_agree(p);
    fake_vmm.events_busy = 1;
    unsigned char *z = alloc(p, 4 * PAGE); /* grows: the plan lends page 1, its event pending */
    dealloc(p, z, 4 * PAGE);
    books_agree(p);
    fake_vmm.map_fails_in = 1;
    unsigned char *again = alloc(p, 65536); /* restart: page 0 takes the range's top page, the map fails */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), fake_vmm.physical);
    dealloc(p, again, 65536);
    release_pool();
    ck_assert_uint_eq(fake_vmm.physical, 0);
}
/* A given page that a refused undo left a stray (mapped, its memory the plan's) needs no memory:
 * the next request at that place takes none of the range's pages. */
CRMM_TEST_IN("plan", a_given_page_left_a_stray_takes_no_second_page)
{
    write_plan(three);
    p = planned_pool();
    unsigned char *a, *b;
    three_until_b(&a, &b);
    unsigned char *d = alloc(p, 131072); /* misses: the plan ends, lends page 0 */
    unsigned char *y = alloc(p, 8192);   /* reaps: page 0 given */
    dealloc(p, y, 8192);
    dealloc(p, d, 131072);
    dealloc(p, b, 65536);
    fake_vmm.events_busy = 1; /* the range's lent pages stay lent: counted below */
    fake_vmm.set_access_fails_in = 1;
    fake_vmm.unmap_fails_in = 1;
    unsigned char *again = alloc(p, 65536); /* restart: page 0 takes a range page; the map fails, a stray */
    ck_assert(again < a || again >= a + 131072);
    uint64_t lent = q(p, CRMM_QUERY_POOL_PAGES_LENT);
    dealloc(p, again, 65536);
    unsigned char *b2 = alloc(p, 65536); /* entry 1, page 1 */
    unsigned char *c2 = alloc(p, 65536); /* entry 2, page 0: the stray, which needs no memory */
    ck_assert_ptr_eq(c2, a);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), lent);
    dealloc(p, b2, 65536);
    dealloc(p, c2, 65536);
}

/* ---- bad plans ---------------------------------------------------------------------------- */

/* Creating the pool over plan `text` fails with CRMM_ERROR_CONFIG and a message holding `says`. */
static void refused(const char *text, const char *says)
{
    write_plan(text);
    char params[4200];
    snprintf(params, sizeof params, "plan=%s", plan_path);
    crmm_resource *x = NULL;
    ck_assert_int_eq(fake_vmm_expandable_pool(params, &x), CRMM_ERROR_CONFIG);
    ck_assert_ptr_null(x);
    ck_assert_msg(strstr(crmm_last_error(), says) && strstr(crmm_last_error(), plan_path), "%s", crmm_last_error());
    ck_assert_uint_eq(fake_vmm.physical, 0);
}

CRMM_TEST_IN("plan", bad_plans_are_refused_naming_the_file_and_line)
{
    refused("not a plan\n", "crmm-plan 1");
    refused("crmm-plan 1\nextent 0\nloop none\ncount 1\n256 0\n", "extent");
    refused("crmm-plan 1\nextent 4096\nloop x\ncount 1\n256 0\n", "line 3");
    refused("crmm-plan 1\nextent 4096\nloop none\ncount 2\n256 0\n", "fewer entries");
    refused("crmm-plan 1\nextent 4096\nloop none\ncount 1\n256 0\n256 0\n", "more entries");
    refused("crmm-plan 1\nextent 4096\nloop none\ncount 1\n300 0\n", "multiples of 256");
    refused("crmm-plan 1\nextent 4096\nloop none\ncount 1\n4096 256\n", "past the extent");
    refused("crmm-plan 1\nextent 4096\nloop 1\ncount 1\n256 0\n", "loop");
    refused("crmm-plan 1\nextent 4096\nloop none\ncount 1\n-256 0\n", "line 5");
}

/* Numbers are digits only, lines are whole, and the file is read to its end: what a lenient
 * reader would take for something else is refused, naming the line. */
CRMM_TEST_IN("plan", a_plan_is_read_strictly)
{
    char text[512];
    snprintf(text, sizeof text, "crmm-plan 1\nextent 4096\nloop none\ncount 2\n256 %0130d512 0\n", 0);
    refused(text, "line 5: a line longer than any a plan has"); /* not two entries */
    refused("crmm-plan 1\nextent  4096\nloop none\ncount 1\n256 0\n", "line 2");
    refused("crmm-plan 1\nextent 4096\nloop  -1\ncount 1\n256 0\n", "line 3");
    refused("crmm-plan 1\nextent 4096\nloop 18446744073709551615\ncount 1\n256 0\n", "the loop is not one");
    refused("crmm-plan 1\nextent 4096\nloop none\ncount 1\n+256 0\n", "line 5");
    refused("crmm-plan 1\nextent 4096\nloop none\ncount 1\n 256 0\n", "line 5");
    refused("crmm-plan 1\nextent 4096\nloop none\ncount 1\n256  0\n", "line 5");
    refused("crmm-plan 1\nextent 4096\nloop none\ncount 1\n256 0\n\n256 0\n", "line 7: more entries");
    refused("crmm-plan 1\n", "line 1: the file ends after this line; expected \"extent");
    refused("crmm-plan 1\nextent 4096\nloop none\n", "line 3: the file ends after this line; expected \"count");
    /* a count the entries do not back allocates nothing for them: the file is short */
    refused("crmm-plan 1\nextent 4096\nloop none\ncount 4294967296\n256 0\n", "fewer entries");
    refused("crmm-plan 1\nextent 4096\nloop none\ncount 4294967297\n256 0\n", "too large");
}

/* A plan path that is a directory or a FIFO is refused at once (not read as bad content, nor
 * waited on for a writer). */
CRMM_TEST_IN("plan", a_plan_path_that_is_no_regular_file_is_refused)
{
    write_plan(three);
    char dir[4200], params[4300];
    snprintf(dir, sizeof dir, "%s", plan_path);
    *strrchr(dir, '/') = '\0';
    const char *paths[2] = {dir, NULL};
    char fifo[4300];
    snprintf(fifo, sizeof fifo, "%s/fifo.plan", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    paths[1] = fifo;
    for (int i = 0; i < 2; i++) {
        snprintf(params, sizeof params, "plan=%s", paths[i]);
        crmm_resource *x = NULL;
        ck_assert_int_eq(fake_vmm_expandable_pool(params, &x), CRMM_ERROR_CONFIG);
        ck_assert_ptr_null(x);
        ck_assert_msg(strstr(crmm_last_error(), "not a regular file") && strstr(crmm_last_error(), paths[i]), "%s",
                      crmm_last_error());
    }
    unlink(fifo);
}

CRMM_TEST_IN("plan", a_missing_plan_or_one_without_expandable_or_with_ipc_is_refused)
{
    crmm_resource *x = NULL;
    ck_assert_int_eq(fake_vmm_expandable_pool("plan=/nonexistent/crmm.plan", &x), CRMM_ERROR_CONFIG);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "/nonexistent/crmm.plan"));
    write_plan(three);
    char params[4200];
    snprintf(params, sizeof params, "expandable=false initial_size=1MiB plan=%s", plan_path);
    crmm_resource *u = fake_vmm_device_upstream();
    ck_assert_int_eq(crmm_resource_create("pool", params, u, &x), CRMM_ERROR_CONFIG);
    crmm_resource_release(u);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "expandable"));
    snprintf(params, sizeof params, "ipc=true plan=%s", plan_path);
    ck_assert_int_eq(fake_vmm_expandable_pool(params, &x), CRMM_ERROR_CONFIG);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "exported"));
    ck_assert_uint_eq(fake_vmm.physical, 0);
}

int main(void)
{
    Suite *s = suite_create("pool_plan");
    TCase *tc = crmm_test_tcase(s, "plan", 0);
    tcase_add_checked_fixture(tc, setup, teardown);
    return crmm_test_run(s);
}
