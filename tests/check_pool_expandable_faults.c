/* check_pool_expandable_faults.c — the expandable pool when a driver call fails part of the way
 * (cuMemMap, cuMemSetAccess or cuMemUnmap refused by the scripted driver of fakes/fake_vmm.h):
 * the pool's books still agree with what the driver has mapped, and nothing stays mapped or
 * reserved after the pool is gone. */
#include "build_config.h"
#include <cuda.h>
#include "pool_expandable_test.h"

/* The pool's counts of driver calls agree with the driver's. */
static void calls_agree(crmm_resource *mr)
{
    ck_assert_uint_eq(q(mr, CRMM_QUERY_POOL_PAGES_MAPPED), (uint64_t)fake_vmm.maps);
    ck_assert_uint_eq(q(mr, CRMM_QUERY_POOL_PAGES_UNMAPPED), (uint64_t)fake_vmm.unmaps);
    ck_assert_uint_eq(q(mr, CRMM_QUERY_POOL_PAGES_CREATED), (uint64_t)fake_vmm.creates);
    ck_assert_uint_eq(q(mr, CRMM_QUERY_POOL_PAGES_RELEASED), (uint64_t)fake_vmm.releases);
}

/* Release the pool: nothing stays mapped, reserved or created in the scripted driver. */
static void release_leaves_the_driver_empty(void)
{
    release_pool();
    ck_assert_uint_eq(fake_vmm_mapped_bytes(), 0);
    ck_assert_uint_eq(fake_vmm.range, 0);
    ck_assert_uint_eq(fake_vmm.physical, 0);
}

CRMM_TEST_IN("pool_expandable_faults", a_refused_set_access_maps_nothing)
{
    p = expandable_pool("");
    unsigned char *a = alloc(p, PAGE);
    fake_vmm.set_access_fails_in = 1;
    void *x = NULL;
    ck_assert_crmm(crmm_resource_allocate(p, 3 * PAGE, NULL, &x), CRMM_ERROR_CUDA);
    ck_assert_ptr_null(x);
    books_agree(p);
    calls_agree(p);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), PAGE);
    unsigned char *b = alloc(p, 3 * PAGE); /* the same pages map now */
    books_agree(p);
    calls_agree(p);
    free_all(p, {a, PAGE}, {b, 3 * PAGE});
    release_leaves_the_driver_empty();
}

CRMM_TEST_IN("pool_expandable_faults", a_refused_map_half_way_maps_nothing)
{
    p = expandable_pool("");
    unsigned char *a = alloc(p, PAGE);
    fake_vmm.map_fails_in = 2;
    fake_vmm.map_error = CUDA_ERROR_INVALID_VALUE;
    void *x = NULL;
    ck_assert_crmm(crmm_resource_allocate(p, 3 * PAGE, NULL, &x), CRMM_ERROR_CUDA);
    books_agree(p);
    calls_agree(p);
    unsigned char *b = alloc(p, 3 * PAGE);
    books_agree(p);
    calls_agree(p);
    free_all(p, {a, PAGE}, {b, 3 * PAGE});
    release_leaves_the_driver_empty();
}

CRMM_TEST_IN("pool_expandable_faults", a_refused_map_for_memory_gives_pages_back_and_retries)
{
    p = expandable_pool("release_threshold=1TiB");
    unsigned char *a = alloc(p, 4 * PAGE), *b = alloc_on(p, PAGE, stream_n(1));
    dealloc(p, a, 4 * PAGE);
    fake_vmm.map_fails_in = 2; /* out of memory at the second page */
    unsigned char *c = alloc_on(p, 4 * PAGE, stream_n(2));
    books_agree(p);
    calls_agree(p);
    free_all(p, {c, 4 * PAGE});
    free_on(p, b, PAGE, stream_n(1));
}

CRMM_TEST_IN("pool_expandable_faults", a_refused_unmap_at_trim_keeps_the_page_and_trim_retries)
{
    p = expandable_pool("");
    unsigned char *a = alloc(p, 4 * PAGE);
    dealloc(p, a, 4 * PAGE);
    fake_vmm.unmap_fails_in = 2;
    ck_assert_crmm(crmm_resource_trim(p), CRMM_ERROR_CUDA); /* not silent: a page stays mapped */
    ck_assert_error_contains("refused to unmap");
    books_agree(p);
    calls_agree(p);
    ck_assert_uint_ne(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    books_agree(p);
    calls_agree(p);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    release_pool();
    ck_assert_uint_eq(fake_vmm.range, 0);
    ck_assert_uint_eq(fake_vmm.physical, 0);
}

/* cuMemRelease refused at trim: the page's memory is still the pool's (nothing else frees it).
 * The trim says so, BYTES_RESERVED counts it, the next growth maps it again instead of making a
 * page, and the pool's release gives it back: the driver ends empty. */
CRMM_TEST_IN("pool_expandable_faults", a_refused_release_keeps_the_page_for_the_next_growth)
{
    p = expandable_pool("");
    unsigned char *a = alloc(p, 4 * PAGE);
    dealloc(p, a, 4 * PAGE);
    fake_vmm.release_fails_in = 1;
    ck_assert_crmm(crmm_resource_trim(p), CRMM_ERROR_CUDA);
    ck_assert_error_contains("cuMemRelease refused 1 page");
    calls_agree(p);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), PAGE);
    ck_assert_uint_eq(fake_vmm.physical, PAGE);
    int creates = fake_vmm.creates;
    a = alloc(p, PAGE);
    ck_assert_int_eq(fake_vmm.creates, creates);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), PAGE);
    dealloc(p, a, PAGE);
    calls_agree(p);
    release_leaves_the_driver_empty();
}

/* A pool (page_moves = wait, events late) with a run of 3 free pages, a live page (returned) and a
 * run of 2 free pages: a growth past the mark moves free pages without waiting. */
static unsigned char *free_runs_around_a_live_page(void)
{
    p = expandable_pool("page_moves=wait");
    fake_vmm.events_busy = 1;
    unsigned char *a = alloc(p, 3 * PAGE), *b = alloc(p, PAGE), *c = alloc(p, 2 * PAGE);
    dealloc(p, a, 3 * PAGE);
    dealloc(p, c, 2 * PAGE);
    return b;
}

/* A growth past the mark that moved free pages and then met a driver error other than out of
 * memory (cuMemSetAccess refused) undoes the move, its marks included: tried again it moves the
 * same pages, as a growth that never failed would (reserved 6 pages, 2 of them lent), instead of
 * being taken for a second move before the mark rose and mapping new pages. */
CRMM_TEST_IN("pool_expandable_faults", a_move_undone_by_a_driver_error_leaves_the_marks_as_before)
{
    uint64_t reserved[2], lent[2];
    for (int fault = 0; fault < 2; fault++) {
        unsigned char *b = free_runs_around_a_live_page();
        if (fault) {
            fake_vmm.set_access_fails_in = 1;
            void *z = NULL;
            ck_assert_crmm(crmm_resource_allocate(p, 4 * PAGE, NULL, &z), CRMM_ERROR_CUDA);
            books_agree(p);
        }
        unsigned char *z = alloc(p, 4 * PAGE);
        reserved[fault] = q(p, CRMM_QUERY_BYTES_RESERVED);
        lent[fault] = q(p, CRMM_QUERY_POOL_PAGES_LENT);
        fake_vmm.events_busy = 0;
        dealloc(p, z, 4 * PAGE);
        dealloc(p, b, PAGE);
        release_leaves_the_driver_empty();
    }
    ck_assert_uint_eq(reserved[1], reserved[0]);
    ck_assert_uint_eq(lent[1], lent[0]);
}

/* Once the process is exiting a growth makes no driver call and moves no other stream's free
 * pages (the wait for that stream's work is skipped then): it fails with CRMM_ERROR_STATE, and a
 * trim gives nothing back. Blocks it holds are still served and freed. */
CRMM_TEST_IN("pool_expandable_faults", at_exit_a_growth_maps_and_moves_nothing)
{
    p = expandable_pool("");
    cudaStream_t one = (cudaStream_t)0x1100, two = (cudaStream_t)0x1200;
    unsigned char *a = alloc_on(p, 4 * PAGE, one), *b = alloc_on(p, 2 * PAGE, two);
    free_on(p, a, 4 * PAGE, one); /* stream one's work may still use it */
    ck_assert_crmm(crmm_cuda_status(cudaErrorCudartUnloading, "cudaFree"), CRMM_ERROR_STATE); /* the runtime unloads */
    int maps = fake_vmm.maps, unmaps = fake_vmm.unmaps, creates = fake_vmm.creates, syncs = fake_vmm.device_syncs;
    void *z = NULL;
    ck_assert_crmm(crmm_resource_allocate(p, 6 * PAGE, (crmm_cuda_stream_t)two, &z), CRMM_ERROR_STATE);
    ck_assert_error_contains("exiting");
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_int_eq(fake_vmm.maps, maps);
    ck_assert_int_eq(fake_vmm.unmaps, unmaps);
    ck_assert_int_eq(fake_vmm.creates, creates);
    ck_assert_int_eq(fake_vmm.device_syncs, syncs);
    a = alloc_on(p, 4 * PAGE, one); /* what it holds is still served */
    free_on(p, a, 4 * PAGE, one);
    free_on(p, b, 2 * PAGE, two);
}

/* A pool of `params` holding one page (returned), whose growth of 3 pages then fails:
 * cuMemSetAccess refused, and then the unmap that undoes the mapping refused too, so the page
 * stays mapped. */
static unsigned char *a_page_and_a_refused_undo(const char *params)
{
    p = expandable_pool(params);
    unsigned char *a = alloc(p, PAGE);
    fake_vmm.set_access_fails_in = 1;
    fake_vmm.unmap_fails_in = 1;
    void *x = NULL;
    ck_assert_crmm(crmm_resource_allocate(p, 3 * PAGE, NULL, &x), CRMM_ERROR_CUDA);
    return a;
}

/* The page a refused undo leaves mapped: the pool must still know it, and count it (a later
 * growth over it, and the pool's release, unmap it). */
CRMM_TEST_IN("pool_expandable_faults", a_refused_undo_leaves_no_page_behind)
{
    unsigned char *a = a_page_and_a_refused_undo("");
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 2 * PAGE); /* a's page and the one left mapped */
    books_agree(p);
    unsigned char *b = alloc(p, 3 * PAGE); /* the growth goes where the pages are */
    books_agree(p);
    calls_agree(p);
    free_all(p, {a, PAGE}, {b, 3 * PAGE});
    release_leaves_the_driver_empty();
}

/* Two growths over the same place fail, the first one's undo refused: the stray page it left is
 * used (not mapped again) by the second, which leaves it a stray; trim then unmaps it. Then two
 * strays at once, both unmapped by trim, and one more after that. */
CRMM_TEST_IN("pool_expandable_faults", strays_are_counted_through_failed_growths_and_trims)
{
    unsigned char *a = a_page_and_a_refused_undo("");
    void *x = NULL;
    fake_vmm.set_access_fails_in = 1; /* the same growth fails again, its undo complies */
    ck_assert_crmm(crmm_resource_allocate(p, 3 * PAGE, NULL, &x), CRMM_ERROR_CUDA);
    books_agree(p);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), PAGE);
    ck_assert_uint_eq(fake_vmm_mapped_bytes(), PAGE);
    for (int round = 0; round < 2; round++) {
        for (int stray = 0; stray < 2 - round; stray++) {
            fake_vmm.set_access_fails_in = 1;
            fake_vmm.unmap_fails_in = stray + 1; /* the undo's second unmap: another page */
            ck_assert_crmm(crmm_resource_allocate(p, 3 * PAGE, NULL, &x), CRMM_ERROR_CUDA);
        }
        books_agree(p);
        ck_assert_crmm_ok(crmm_resource_trim(p));
        ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), PAGE);
        ck_assert_uint_eq(fake_vmm_mapped_bytes(), PAGE);
    }
    free_all(p, {a, PAGE});
    release_leaves_the_driver_empty();
}

/* A stray page is held already: a growth over it counts only the pages it maps anew against
 * maximum_size (a's page, the stray and two new ones are the maximum of 4). */
CRMM_TEST_IN("pool_expandable_faults", a_growth_over_a_stray_page_counts_it_once_against_the_maximum)
{
    unsigned char *a = a_page_and_a_refused_undo("maximum_size=256KiB");
    void *x = NULL;
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 2 * PAGE);
    ck_assert_crmm_ok(crmm_resource_allocate(p, 3 * PAGE, NULL, &x));
    books_agree(p);
    memset(x, 1, 3 * PAGE);
    free_all(p, {a, PAGE}, {x, 3 * PAGE});
    release_leaves_the_driver_empty();
}

/* A growth past the mark moves its stream's own free pages without waiting (lent, their event not
 * complete), then cuMemSetAccess fails and the undo's first unmap is refused: the moved pages whose
 * memory waits on the spare list come back to the free blocks page by page, the one whose memory
 * the stray holds stays lent, and nothing is released while an old address still maps it. Trim
 * then gives everything back. */
CRMM_TEST_IN("pool_expandable_faults", a_refused_undo_after_a_move_gives_back_what_it_can)
{
    unsigned char *b = free_runs_around_a_live_page();
    fake_vmm.set_access_fails_in = 1;
    fake_vmm.unmap_fails_in = 1;
    void *z = NULL;
    ck_assert_crmm(crmm_resource_allocate(p, 4 * PAGE, NULL, &z), CRMM_ERROR_CUDA);
    books_agree(p);
    fake_vmm.events_busy = 0;
    unsigned char *d = alloc(p, 4 * PAGE); /* the pool serves again */
    memset(d, 1, 4 * PAGE);
    free_all(p, {b, PAGE}, {d, 4 * PAGE});
    ck_assert_crmm_ok(crmm_resource_trim(p));
    books_agree(p);
    ck_assert_uint_eq(fake_vmm_mapped_bytes(), 0);
}

/* The same, and no growth comes over the page left mapped: trim unmaps it (no block uses it). */
CRMM_TEST_IN("pool_expandable_faults", trim_unmaps_a_page_a_refused_undo_left_mapped)
{
    unsigned char *a = a_page_and_a_refused_undo("");
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), PAGE); /* a's page only */
    ck_assert_uint_eq(fake_vmm_mapped_bytes(), PAGE);
    books_agree(p);
    memset(a, 1, PAGE);
    free_all(p, {a, PAGE});
    release_leaves_the_driver_empty();
}


/* a: 3 pages freed on stream 1, b: 1 page, c: 2 pages freed on the default stream; then 4 pages
 * on the default stream past the mark: a synchronization moves a's top pages (wait), the first
 * unmap refused. */
CRMM_TEST_IN("pool_expandable_faults", a_refused_unmap_in_a_move_keeps_the_books)
{
    p = expandable_pool("page_moves=wait");
    unsigned char *a = alloc(p, 3 * PAGE), *b = alloc(p, PAGE), *c = alloc(p, 2 * PAGE);
    free_on(p, a, 3 * PAGE, stream_n(1));
    dealloc(p, c, 2 * PAGE);
    fake_vmm.unmap_fails_in = 1;
    unsigned char *z = alloc(p, 4 * PAGE);
    books_agree(p);
    calls_agree(p);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    books_agree(p);
    calls_agree(p);
    free_all(p, {z, 4 * PAGE}, {b, PAGE});
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    books_agree(p);
    release_leaves_the_driver_empty();
}

/* Pages lent by a move without waiting; the unmap once their event completes is refused for the
 * first: it stays lent, the trim says so, and a later reap unmaps it. */
CRMM_TEST_IN("pool_expandable_faults", a_refused_unmap_of_lent_pages_is_tried_again)
{
    unsigned char *b = free_runs_around_a_live_page();
    unsigned char *z = alloc(p, 4 * PAGE);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 2);
    fake_vmm.events_busy = 0;
    fake_vmm.unmap_fails_in = 1;
    ck_assert_crmm(crmm_resource_trim(p), CRMM_ERROR_CUDA);
    ck_assert_error_contains("refused to unmap");
    books_agree(p);
    calls_agree(p);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 0);
    books_agree(p);
    calls_agree(p);
    free_all(p, {z, 4 * PAGE}, {b, PAGE});
    release_leaves_the_driver_empty();
}

int main(void)
{
    Suite *s = suite_create("pool_expandable_faults");
    TCase *tc = crmm_test_tcase(s, "pool_expandable_faults", 0);
    tcase_add_checked_fixture(tc, setup, teardown);
    return crmm_test_run(s);
}
