/* check_pool_page_moves.c — the expandable pool's page_moves parameter on the scripted driver of
 * fakes/fake_vmm.h: what the pool does when growth would pass the most it has held while free
 * pages could be moved. wait (the default) synchronizes the device and moves them; idle moves them
 * without synchronizing when every stream holding them says it is idle, and maps new pages while
 * one is busy (or cannot be asked), moving them back at a later growth that finds the streams
 * idle; never maps new pages and gives free ones back only at trim. */
#include "build_config.h"
#include "pool_expandable_test.h"

/* a: 3 pages, b: 1, c: 2 (the mark: 6 pages); a and c freed; then 4 pages asked, which fit where
 * c was with 2 pages more: moved from a's top, or new. Returns that block. */
static unsigned char *grow_past_the_mark(unsigned char **a, unsigned char **b, unsigned char **c)
{
    *a = alloc(p, 3 * PAGE), *b = alloc(p, PAGE), *c = alloc(p, 2 * PAGE);
    ck_assert_ptr_eq(*c, *a + 4 * PAGE);
    dealloc(p, *a, 3 * PAGE);
    dealloc(p, *c, 2 * PAGE);
    fake_vmm.device_syncs = fake_vmm.stream_queries = 0;
    unsigned char *z = alloc(p, 4 * PAGE);
    ck_assert_ptr_eq(z, *c);
    return z;
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

CRMM_TEST_IN("page_moves", wait_synchronizes_and_moves)
{
    p = expandable_pool("page_moves=wait");
    unsigned char *a, *b, *c, *z = grow_past_the_mark(&a, &b, &c);
    expect(1, 0, 2, 6, 6); /* a's top two pages moved after one device synchronization */
    dealloc(p, z, 4 * PAGE);
}

CRMM_TEST_IN("page_moves", idle_moves_without_synchronizing_when_the_streams_are_idle)
{
    p = expandable_pool("page_moves=idle");
    unsigned char *a, *b, *c;
    grow_past_the_mark(&a, &b, &c);
    expect(0, -1, 2, 6, 6); /* the default stream said it was idle: the same move, no wait */
    unsigned char *w = alloc(p, PAGE); /* a's bottom page stayed mapped and free */
    ck_assert_ptr_eq(w, a);
    dealloc(p, w, PAGE);
}

CRMM_TEST_IN("page_moves", idle_maps_new_pages_while_busy_and_moves_them_when_idle)
{
    p = expandable_pool("page_moves=idle");
    fake_vmm.streams_busy = 1;
    unsigned char *a, *b, *c, *z = grow_past_the_mark(&a, &b, &c);
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

CRMM_TEST_IN("page_moves", an_unknown_choice_is_refused)
{
    ck_assert_crmm(fake_vmm_expandable_pool("page_moves=sometimes", &p), CRMM_ERROR_CONFIG);
    ck_assert_ptr_null(p);
    ck_assert_error_contains("wait|idle|never");
}

int main(void)
{
    Suite *s = suite_create("pool_page_moves");
    TCase *tc = crmm_test_tcase(s, "page_moves", 0);
    tcase_add_checked_fixture(tc, setup, teardown);
    return crmm_test_run(s);
}
