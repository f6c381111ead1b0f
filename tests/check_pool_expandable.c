/* check_pool_expandable.c — the expandable pool (expandable = true) on the CPU, against the
 * scripted driver of pool_expandable_test.h: exactly what the pool maps, when it synchronizes and
 * gives memory back, and that it never holds more than it must. Destroy, bad frees, streams,
 * threads and the fallbacks: check_pool_expandable_use.c. */
#include "build_config.h"
#include "pool_expandable_test.h"

CRMM_TEST_IN("pool_expandable", it_maps_what_it_needs_and_never_asks_the_upstream)
{
    p = expandable_pool("");
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0); /* starts empty */
    ck_assert_int_eq(fake_vmm.reserves, 1);
    unsigned char *a = alloc(p, 100 * KiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 2 * PAGE);
    unsigned char *b = alloc(p, 1 * MiB); /* 28 KiB are left in a's second page: 16 new pages */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 2 * PAGE + 16 * PAGE);
    ck_assert_ptr_eq(b, a + 100 * KiB); /* right above a: one range, no chunk boundary */
    books_agree(p);
    ck_assert_int_eq(fake_vmm.upstream_calls, 0);
    ck_assert_int_eq(fake_vmm.set_access, 2); /* one per growth, over the whole run */
    free_all(p, {a, 100 * KiB}, {b, 1 * MiB});
}

CRMM_TEST_IN("pool_expandable", free_blocks_merge_across_growth_steps)
{
    p = expandable_pool("");
    unsigned char *a = alloc(p, PAGE), *b = alloc(p, PAGE), *c = alloc(p, PAGE);
    ck_assert_int_eq(fake_vmm.maps, 3); /* three growth steps */
    free_all(p, {a, PAGE}, {b, PAGE}, {c, PAGE});
    unsigned char *d = alloc(p, 3 * PAGE); /* fits in what the three steps mapped */
    ck_assert_ptr_eq(d, a);
    ck_assert_int_eq(fake_vmm.maps, 3);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 3 * PAGE);
    dealloc(p, d, 3 * PAGE);
}

/* A free with another size than the one asked for is refused: nothing is unmapped or merged,
 * the block stays live, and its right free works. */
CRMM_TEST_IN("pool_expandable", a_wrong_size_is_refused)
{
    p = expandable_pool("");
    unsigned char *a = alloc(p, 100 * KiB);
    ck_assert_crmm(crmm_resource_deallocate(p, a, 2 * PAGE, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "it is a block of") != NULL, "%s", crmm_last_error());
    ck_assert_crmm(crmm_resource_deallocate(p, a, 100 * KiB - 1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 100 * KiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 1);
    memset(a, 0x5A, 100 * KiB); /* still mapped */
    dealloc(p, a, 100 * KiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    books_agree(p);
}

CRMM_TEST_IN("pool_expandable", growth_joins_the_free_block_below)
{
    p = expandable_pool("");
    unsigned char *a = alloc(p, PAGE / 2);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), PAGE);
    unsigned char *b = alloc(p, PAGE); /* half a page is free above a: one more page is enough */
    ck_assert_ptr_eq(b, a + PAGE / 2);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 2 * PAGE);
    free_all(p, {a, PAGE / 2}, {b, PAGE});
}

CRMM_TEST_IN("pool_expandable", growth_maps_freed_pages_again_instead_of_new_memory)
{
    p = expandable_pool("");
    unsigned char *x = alloc(p, 3 * PAGE), *y = alloc(p, PAGE);
    dealloc(p, x, 3 * PAGE); /* three free pages below y: too small for what comes next */
    fake_vmm.device_syncs = 0;
    unsigned char *z = alloc(p, 4 * PAGE);
    /* x's pages were freed on the stream that asks: their memory is mapped again above y with no
     * wait for the device, and stays mapped at x until the work queued before has finished */
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 3);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 5 * PAGE);
    ck_assert_uint_eq(fake_vmm.physical_peak, 5 * PAGE); /* never more than live */
    ck_assert_int_eq(fake_vmm.creates, 5);                /* 4 + 1: the freed pages were reused */
    ck_assert_int_eq(fake_vmm.releases, 0);
    books_agree(p);
    free_all(p, {y, PAGE}, {z, 4 * PAGE});
}

CRMM_TEST_IN("pool_expandable", growth_below_the_high_water_mark_does_not_wait)
{
    p = expandable_pool("");
    unsigned char *a = alloc(p, 2 * PAGE), *b = alloc(p, 2 * PAGE); /* the mark: 4 pages */
    free_all(p, {a, 2 * PAGE}, {b, 2 * PAGE});
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    unsigned char *c = alloc(p, PAGE), *d = alloc(p, PAGE);
    dealloc(p, c, PAGE); /* one free page, too small for e */
    fake_vmm.device_syncs = 0;
    unsigned char *e = alloc(p, 2 * PAGE);
    /* 2 + 2 pages stay within the 4 the pool held before: it maps without waiting for the device */
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 4 * PAGE);
    ck_assert_ptr_eq(e, d + PAGE);
    books_agree(p);
    free_all(p, {d, PAGE}, {e, 2 * PAGE});
}

CRMM_TEST_IN("pool_expandable", growth_past_the_mark_moves_only_the_pages_it_needs)
{
    p = expandable_pool("");
    unsigned char *a = alloc(p, 3 * PAGE), *b = alloc(p, PAGE), *c = alloc(p, 2 * PAGE); /* mark: 6 */
    ck_assert_ptr_eq(c, a + 4 * PAGE);
    free_all(p, {a, 3 * PAGE}, {c, 2 * PAGE});
    fake_vmm.device_syncs = 0;
    unsigned char *z = alloc(p, 4 * PAGE);
    /* z joins c's two free pages at the top with two more; those two are a's top pages, moved
     * without waiting (a was freed on z's stream): the pool holds no more than its mark and no
     * new memory */
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_LENT), 2);
    ck_assert_ptr_eq(z, c);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 6 * PAGE);
    ck_assert_uint_eq(fake_vmm.physical_peak, 6 * PAGE);
    ck_assert_int_eq(fake_vmm.creates, 6);
    books_agree(p);
    unsigned char *w = alloc(p, PAGE); /* a's bottom page stayed mapped and free */
    ck_assert_ptr_eq(w, a);
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    free_all(p, {w, PAGE}, {b, PAGE}, {z, 4 * PAGE});
}

CRMM_TEST_IN("pool_expandable", growth_within_the_slack_above_the_mark_does_not_wait)
{
    p = expandable_pool("");
    unsigned char *a = alloc(p, 31 * PAGE), *b = alloc(p, PAGE); /* mark: 32 pages, slack: 1 page */
    dealloc(p, b, PAGE);
    fake_vmm.device_syncs = 0;
    unsigned char *z = alloc(p, 2 * PAGE); /* b's free page and one more: 33 pages, within the slack */
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    ck_assert_ptr_eq(z, b);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 33 * PAGE);
    books_agree(p);
    free_all(p, {a, 31 * PAGE}, {z, 2 * PAGE});
}

/* A sequence in the shape of BERT's training steps (bench/logs/bert_train): the model stays live
 * below; each step has A, C and B1 live, frees A, takes B2 of twice A's size while C and B1 are
 * live, then frees them all; B2 never fits where A was. */
static void replay_training(void)
{
    unsigned char *model = alloc(p, 20 * PAGE);
    for (int step = 0; step < 4; step++) {
        unsigned char *a = alloc(p, 8 * PAGE), *c = alloc(p, 8 * PAGE), *b1 = alloc(p, 16 * PAGE);
        dealloc(p, a, 8 * PAGE);
        unsigned char *b2 = alloc(p, 16 * PAGE);
        dealloc(p, b1, 16 * PAGE);
        unsigned char *d = alloc(p, 8 * PAGE);
        dealloc(p, b2, 16 * PAGE);
        unsigned char *e = alloc(p, 8 * PAGE);
        free_all(p, {d, 8 * PAGE}, {c, 8 * PAGE}, {e, 8 * PAGE});
    }
    dealloc(p, model, 20 * PAGE);
}

CRMM_TEST_IN("pool_expandable", pages_move_once_per_mark)
{
    p = expandable_pool("");
    replay_training();
    int maps = fake_vmm.maps, unmaps = fake_vmm.unmaps;
    fake_vmm.device_syncs = 0;
    /* moving pages at every step would synchronize every step: after one move the pool raises its
     * mark instead, so repeats of the sequence make no driver call at all */
    replay_training();
    replay_training();
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    ck_assert_int_eq(fake_vmm.maps - maps, 0);
    ck_assert_int_eq(fake_vmm.unmaps - unmaps, 0);
    /* at the price of one A more than the peak of live bytes (the model, C, B1 and B2) */
    ck_assert_uint_le(q(p, CRMM_QUERY_BYTES_RESERVED), (20 + 8 + 16 + 16 + 8) * PAGE);
    books_agree(p);
}

CRMM_TEST_IN("pool_expandable", release_threshold_keeps_free_pages)
{
    p = expandable_pool("release_threshold=192KiB"); /* 3 pages */
    unsigned char *x = alloc(p, 3 * PAGE), *y = alloc(p, PAGE);
    dealloc(p, x, 3 * PAGE);
    fake_vmm.device_syncs = 0;
    unsigned char *z = alloc(p, 4 * PAGE); /* 3 free pages are within the threshold: grow instead */
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 8 * PAGE);
    dealloc(p, z, 4 * PAGE);
    /* trim keeps 3 pages of the 7 free ones */
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 4 * PAGE);
    books_agree(p);
    dealloc(p, y, PAGE);
}

CRMM_TEST_IN("pool_expandable", trim_gives_every_free_page_back)
{
    p = expandable_pool("");
    unsigned char *a = alloc(p, 5 * PAGE + 100), *b = alloc(p, 2 * PAGE);
    dealloc(p, a, 5 * PAGE + 100);
    fake_vmm.device_syncs = 0;
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_int_eq(fake_vmm.device_syncs, 1);
    /* the page a shares with b stays; a's five pages below it go */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 3 * PAGE);
    books_agree(p);
    b[0] = 1; /* still mapped */
    dealloc(p, b, 2 * PAGE);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    ck_assert_uint_eq(fake_vmm.physical, 0);
    /* a trim with nothing to give back makes no CUDA call */
    fake_vmm.device_syncs = 0;
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    /* and the pool grows again where it gave back */
    unsigned char *c = alloc(p, PAGE);
    ck_assert_ptr_eq(c, a);
    dealloc(p, c, PAGE);
}

CRMM_TEST_IN("pool_expandable", initial_size_is_mapped_at_creation_and_kept)
{
    p = expandable_pool("initial_size=256KiB"); /* 4 pages */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 4 * PAGE);
    unsigned char *a = alloc(p, 6 * PAGE);
    dealloc(p, a, 6 * PAGE);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 4 * PAGE);
    books_agree(p);
}

CRMM_TEST_IN("pool_expandable", maximum_size_bounds_what_it_maps)
{
    p = expandable_pool("maximum_size=256KiB"); /* 4 pages */
    unsigned char *a = alloc(p, 3 * PAGE);
    void *x = (void *)1;
    ck_assert_crmm(crmm_resource_allocate(p, 2 * PAGE, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(x);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "maximum size"));
    unsigned char *b = alloc(p, PAGE); /* what is left still serves */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 4 * PAGE);
    ck_assert_uint_eq(q(p, CRMM_QUERY_MAXIMUM_SIZE), 4 * PAGE);
    free_all(p, {a, 3 * PAGE}, {b, PAGE});
}

/* Requests no growth can ever serve: larger than maximum_size (224 KiB) once rounded up to
 * 256 bytes, or, in an expandable pool, needing more whole pages than lie within it (3). Each
 * ends with 0. The largest ones round past SIZE_MAX. */
static const struct {
    bool chunks;                   /* the driver lacks the virtual memory API: growth from upstream */
    const char *params;
    size_t never[7];
} beyond_maximum[] = {
    {false, "maximum_size=224KiB thread_cache=off",
     {224 * KiB + 1, 3 * PAGE + 1, MiB, (size_t)1 << 50, SIZE_MAX - 255, SIZE_MAX, 0}},
    {true, "maximum_size=224KiB initial_size=192KiB thread_cache=off",
     {224 * KiB + 1, MiB, (size_t)1 << 50, SIZE_MAX - 255, SIZE_MAX, 0}},
};

/* A request larger than the maximum fails at once with out of memory: no device synchronization,
 * no page unmapped, mapped or taken from the upstream, and the pool keeps what it held, its free
 * blocks (one on another stream, one on the caller's) included, which serve the next request.
 * Rows: expandable, chunks. */
CRMM_LOOP_TEST_IN("pool_expandable", a_request_beyond_the_maximum_fails_at_once, 2)
{
    if (beyond_maximum[_i].chunks) {
        fake_vmm.lookups_fail = 1;
        crmm_test_log_capture_begin(); /* the warning that it grows from upstream */
        p = expandable_pool(beyond_maximum[_i].params);
        free(crmm_test_log_capture_end());
    } else {
        p = expandable_pool(beyond_maximum[_i].params);
    }
    unsigned char *a = alloc(p, PAGE), *b = alloc_on(p, PAGE, stream_n(1)), *c = alloc(p, PAGE);
    free_on(p, b, PAGE, stream_n(1)); /* free, on another stream */
    dealloc(p, c, PAGE);              /* free, on the caller's stream */
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED), free_bytes = q(p, CRMM_QUERY_BYTES_FREE);
    ck_assert_uint_eq(reserved, 3 * PAGE);
    fake_vmm_state before = fake_vmm;
    for (int k = 0; beyond_maximum[_i].never[k]; k++) {
        size_t n = beyond_maximum[_i].never[k];
        void *x = (void *)1;
        ck_assert_crmm(crmm_resource_allocate(p, n, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
        ck_assert_ptr_null(x);
        char why[512];
        snprintf(why, sizeof why, "%s", crmm_last_error()); /* before the queries below */
        ck_assert_msg(fake_vmm.device_syncs == before.device_syncs, "%zu bytes: %d device synchronizations", n,
                      fake_vmm.device_syncs - before.device_syncs);
        ck_assert_msg(fake_vmm.unmaps == before.unmaps, "%zu bytes: %d unmaps", n, fake_vmm.unmaps - before.unmaps);
        ck_assert_int_eq(fake_vmm.maps, before.maps);
        ck_assert_int_eq(fake_vmm.creates, before.creates);
        ck_assert_int_eq(fake_vmm.upstream_calls, before.upstream_calls);
        ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), reserved);
        ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), free_bytes);
        ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), PAGE);
        ck_assert_msg(strstr(why, "failed to allocate") && (n > SIZE_MAX - 255 || strstr(why, "maximum 224.0 KiB")),
                      "%zu bytes: %s", n, why);
    }
    unsigned char *y = alloc(p, PAGE); /* the caller's free block, still there */
    ck_assert_ptr_eq(y, c);
    ck_assert_int_eq(fake_vmm.device_syncs, before.device_syncs);
    free_all(p, {a, PAGE}, {y, PAGE});
    if (!beyond_maximum[_i].chunks)
        books_agree(p);
}

/* initial_size rounds up to whole pages, but never past maximum_size: the pool maps the whole
 * pages within the maximum, and a maximum under one page maps nothing and serves nothing. */
CRMM_TEST_IN("pool_expandable", initial_size_never_maps_past_maximum_size)
{
    p = expandable_pool("initial_size=96KiB maximum_size=96KiB"); /* a page and a half */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), PAGE);
    unsigned char *a = alloc(p, PAGE);
    void *x = (void *)1;
    ck_assert_crmm(crmm_resource_allocate(p, PAGE / 2, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(x);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), PAGE);
    free_all(p, {a, PAGE});
    books_agree(p);
}

CRMM_TEST_IN("pool_expandable", out_of_device_memory_gives_free_pages_back_and_retries)
{
    /* a release threshold that would keep the free pages: only running out of memory frees them */
    p = expandable_pool("release_threshold=4MiB"); /* 64 pages */
    unsigned char *a = alloc(p, 4 * PAGE), *b = alloc(p, 2 * PAGE);
    dealloc(p, a, 4 * PAGE);
    fake_vmm.physical_limit = 8 * PAGE;
    unsigned char *c = alloc(p, 6 * PAGE); /* 6 new pages do not fit beside the 6 held: a's 4 go */
    ck_assert_uint_le(fake_vmm.physical_peak, 8 * PAGE);
    books_agree(p);
    void *x = (void *)1;
    ck_assert_crmm(crmm_resource_allocate(p, 4 * PAGE, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(x);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "out of memory"));
    books_agree(p); /* a failed growth leaves nothing behind */
    free_all(p, {b, 2 * PAGE}, {c, 6 * PAGE});
    unsigned char *d = alloc(p, 8 * PAGE); /* and the pool still serves */
    dealloc(p, d, 8 * PAGE);
    release_pool();
    ck_assert_uint_eq(fake_vmm.physical, 0);
}

CRMM_TEST_IN("pool_expandable", a_huge_request_is_out_of_memory)
{
    p = expandable_pool("");
    void *x = (void *)1;
    /* more than the device has fails without asking the driver for memory */
    ck_assert_crmm(crmm_resource_allocate(p, DEVICE_MEMORY + PAGE, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "more than the device's"));
    ck_assert_int_eq(fake_vmm.creates, 0);
    ck_assert_crmm(crmm_resource_allocate(p, (size_t)1 << 50, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(x);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "more than the device's 64.0 MiB"));
    ck_assert_crmm(crmm_resource_allocate(p, SIZE_MAX - 10, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
}

/* A request that no growth could serve (more than the device's memory, more than the address
 * range) fails at once: no wait for the device, and the free pages the pool holds stay mapped. */
CRMM_TEST_IN("pool_expandable", an_impossible_request_gives_nothing_back)
{
    p = expandable_pool("");
    unsigned char *a = alloc(p, 4 * PAGE), *b = alloc(p, PAGE);
    dealloc(p, a, 4 * PAGE);
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);
    fake_vmm.device_syncs = 0;
    int unmaps = fake_vmm.unmaps;
    const size_t huge[] = {DEVICE_MEMORY + PAGE, (size_t)1 << 50};
    for (int i = 0; i < 2; i++) {
        void *x = (void *)1;
        ck_assert_crmm(crmm_resource_allocate(p, huge[i], NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
        ck_assert_ptr_null(x);
        ck_assert_int_eq(fake_vmm.device_syncs, 0);
        ck_assert_int_eq(fake_vmm.unmaps, unmaps);
        ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), reserved);
    }
    ck_assert_ptr_eq(alloc(p, 4 * PAGE), a); /* still mapped, still free */
    free_all(p, {a, 4 * PAGE}, {b, PAGE});
}

/* page_size: the pool maps physical allocations of that size, grows by whole ones and gives them
 * back whole; a size that is not a power of two is refused, and one below the granularity means
 * the granularity. */
CRMM_TEST_IN("pool_expandable", pages_of_page_size_are_mapped_and_given_back_whole)
{
    p = expandable_pool("page_size=256KiB");
    unsigned char *a = alloc(p, 100 * KiB);
    ck_assert_int_eq(fake_vmm.creates, 1);
    ck_assert_uint_eq(fake_vmm.physical, 4 * PAGE); /* one allocation of 256 KiB */
    unsigned char *b = alloc(p, 300 * KiB);         /* 156 KiB free above a: one more page */
    ck_assert_ptr_eq(b, a + 100 * KiB);
    ck_assert_int_eq(fake_vmm.creates, 2);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 8 * PAGE);
    ck_assert_uint_eq(fake_vmm_mapped_bytes(), 8 * PAGE);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 2); /* the pool counts pages of 256 KiB */
    free_all(p, {a, 100 * KiB}, {b, 300 * KiB});
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(fake_vmm_mapped_bytes(), 0);
    ck_assert_int_eq(fake_vmm.releases, 2);
    release_pool();

    crmm_resource *bad = (crmm_resource *)0x1;
    ck_assert_crmm(fake_vmm_expandable_pool("page_size=384KiB", &bad), CRMM_ERROR_CONFIG);
    ck_assert_msg(strstr(crmm_last_error(), "page_size 393216 is not a power of two") != NULL, "%s", crmm_last_error());
    ck_assert_ptr_eq(bad, (crmm_resource *)0x1);
    p = expandable_pool("page_size=4KiB"); /* below the granularity: pages of the granularity */
    unsigned char *c = alloc(p, 1);
    ck_assert_uint_eq(fake_vmm.physical, PAGE);
    dealloc(p, c, 1);
    /* a maximum below one page, of the granularity or of page_size: no allocation could ever be
     * served, so the pool is refused at create */
    static const char *const too_small[] = {"maximum_size=32KiB", "page_size=1MiB maximum_size=512KiB"};
    for (int i = 0; i < 2; i++) {
        uint64_t mapped = fake_vmm_mapped_bytes();
        ck_assert_crmm(fake_vmm_expandable_pool(too_small[i], &bad), CRMM_ERROR_CONFIG);
        ck_assert_msg(strstr(crmm_last_error(), "is less than one page") != NULL, "%s", crmm_last_error());
        ck_assert_ptr_eq(bad, (crmm_resource *)0x1);
        ck_assert_uint_eq(fake_vmm_mapped_bytes(), mapped);
    }
}

/* A release_threshold near its upper bound keeps everything: trim gives nothing back and does not
 * synchronize the device for it (the threshold plus a page would wrap). */
CRMM_TEST_IN("pool_expandable", a_threshold_near_the_top_keeps_all_without_a_wait)
{
    p = expandable_pool("release_threshold=18446744073709551360");
    dealloc(p, alloc(p, 4 * PAGE), 4 * PAGE);
    fake_vmm.device_syncs = 0;
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), reserved);
}

int main(void)
{
    Suite *s = suite_create("pool_expandable");
    TCase *tc = crmm_test_tcase(s, "pool_expandable", 0);
    tcase_add_checked_fixture(tc, setup, teardown);
    return crmm_test_run(s);
}
