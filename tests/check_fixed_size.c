/* check_fixed_size.c — the fixed_size plugin over host memory: conformance, block reuse, growth
 * by whole chunks, the block-size limit (RMM: "maximum allocation size exceeded" is out of
 * memory), chunks returned at destroy, upstream failures and bad parameters. */
#include "build_config.h"
#include "blocks_test.h"
#include "churn_support.h"
#include "conformance.h"
#include "over_host.h"

static const crmm_test_chain chains[] = {
    {"fixed_size_over_host", "[resource.h]\nplugin = host\n[resource.f]\nplugin = fixed_size\nupstream = h\nblocks_to_preallocate = 8\n",
     "f", 0, (size_t)1 << 20},
    {"fixed_size_small_blocks_over_host",
     "[resource.h]\nplugin = host\n[resource.f]\nplugin = fixed_size\nupstream = h\nblock_size = 64KiB\nblocks_to_preallocate = 4\n",
     "f", 0, (size_t)64 << 10},
};

/* The running test's host upstream and fixed_size over it (make); the fixture releases them. */
static crmm_resource *h, *f;

static void make(const char *params) { over_host_make("fixed_size", params, &h, &f); }

static void teardown(void) { over_host_release(&h, &f); }

CRMM_TEST_IN("fixed_size", freed_block_is_reused)
{
    make("block_size=4KiB blocks_to_preallocate=4");
    void *a, *b, *c;
    ck_assert_crmm_ok(crmm_resource_allocate(f, 4096, NULL, &a));
    ck_assert_crmm_ok(crmm_resource_allocate(f, 100, NULL, &b));
    ck_assert_ptr_ne(a, b);
    ck_assert_crmm_ok(crmm_resource_deallocate(f, a, 4096, NULL));
    ck_assert_crmm_ok(crmm_resource_allocate(f, 10, NULL, &c));
    ck_assert_ptr_eq(c, a); /* the block just freed comes back first */
    ck_assert_crmm_ok(crmm_resource_deallocate(f, c, 10, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(f, b, 100, NULL));
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
}

enum { CHURN_THREADS = 8, CHURN_LIVE = 32 };

CRMM_TEST_IN("fixed_size_threads", threads_share_it_and_the_counts_add_up)
{
    /* eight threads allocate and free at once: no block is handed to two of them, and the counts
     * (kept under the resource's lock) lose no update */
    make("block_size=256 blocks_to_preallocate=16");
    churn a[CHURN_THREADS];
    pthread_t th[CHURN_THREADS];
    for (int k = 0; k < CHURN_THREADS; k++) {
        a[k] = (churn){.mr = f, .seed = 5 + (uint64_t)k, .steps = 20000, .slots = CHURN_LIVE, .size = 256, .exact = 1};
        ck_assert_int_eq(pthread_create(&th[k], NULL, churn_thread, &a[k]), 0);
    }
    uint64_t allocations = 0;
    for (int k = 0; k < CHURN_THREADS; k++) {
        ck_assert_int_eq(pthread_join(th[k], NULL), 0);
        ck_assert_msg(!a[k].why[0], "thread %d: %s", k, a[k].why);
        ck_assert_int_eq(a[k].overlapped, 0);
        allocations += a[k].allocations;
    }
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_ALLOCATIONS_TOTAL), allocations);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_BYTES_TOTAL), allocations * 256);
    ck_assert_uint_le(crmm_test_query(f, CRMM_QUERY_ALLOCATIONS_PEAK), CHURN_THREADS * CHURN_LIVE);
}

CRMM_TEST_IN("fixed_size", blocks_are_carved_from_one_chunk)
{
    make("block_size=1000 blocks_to_preallocate=8"); /* 1000 rounds up to 1024 */
    void *p[8];
    for (int i = 0; i < 8; i++)
        ck_assert_crmm_ok(crmm_resource_allocate(f, 1024, NULL, &p[i]));
    for (int i = 1; i < 8; i++)
        ck_assert_uint_eq((uintptr_t)p[i] - (uintptr_t)p[i - 1], 1024); /* handed out in address order */
    for (int i = 0; i < 8; i++)
        memset(p[i], i, 1024); /* each block is really 1024 bytes (ASan checks the chunk bounds) */
    ck_assert_uint_eq(crmm_test_query(h, CRMM_QUERY_BYTES_IN_USE), 8 * 1024);
    for (int i = 0; i < 8; i++)
        ck_assert_crmm_ok(crmm_resource_deallocate(f, p[i], 1024, NULL));
}

CRMM_TEST_IN("fixed_size", grows_by_whole_chunks)
{
    make("block_size=4KiB blocks_to_preallocate=4");
    /* the first chunk is taken at create, as RMM does */
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_BYTES_RESERVED), 16384);
    ck_assert_uint_eq(crmm_test_query(h, CRMM_QUERY_BYTES_IN_USE), 16384);
    void *p[9];
    for (int i = 0; i < 4; i++)
        ck_assert_crmm_ok(crmm_resource_allocate(f, 4096, NULL, &p[i]));
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_BYTES_FREE), 0);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_LARGEST_FREE_BLOCK), 0);
    ck_assert_crmm_ok(crmm_resource_allocate(f, 4096, NULL, &p[4]));
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_UPSTREAM_BLOCKS), 2);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_BYTES_RESERVED), 32768);
    ck_assert_uint_eq(crmm_test_query(h, CRMM_QUERY_BYTES_IN_USE), 32768);
    for (int i = 5; i < 9; i++)
        ck_assert_crmm_ok(crmm_resource_allocate(f, 2000, NULL, &p[i]));
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_UPSTREAM_BLOCKS), 3);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_BYTES_IN_USE), 5 * 4096 + 4 * 2000); /* as requested */
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_ALLOCATIONS), 9);
    for (int i = 0; i < 9; i++)
        ck_assert_crmm_ok(crmm_resource_deallocate(f, p[i], i < 5 ? 4096 : 2000, NULL));
    /* chunks stay until destroy */
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_UPSTREAM_BLOCKS), 3);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_BYTES_FREE), 12 * 4096);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_LARGEST_FREE_BLOCK), 4096);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_BYTES_RESERVED_PEAK), 3 * 16384);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_crmm_ok(crmm_resource_trim(f)); /* nothing to do, not an error */
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_UPSTREAM_BLOCKS), 3);
}

CRMM_TEST_IN("fixed_size", larger_than_block_is_out_of_memory)
{
    make("block_size=1000 blocks_to_preallocate=2");
    void *p = (void *)0x1;
    ck_assert_crmm_ok(crmm_resource_allocate(f, 1024, NULL, &p)); /* the rounded block size fits */
    ck_assert_crmm_ok(crmm_resource_deallocate(f, p, 1024, NULL));
    crmm_clear_error();
    ck_assert_crmm(crmm_resource_allocate(f, 1025, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(crmm_last_error(), "out of memory") && strstr(crmm_last_error(), "maximum allocation size"),
                  "message: %s", crmm_last_error());
    /* no upstream call, nothing changed */
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    ck_assert_uint_eq(crmm_test_query(h, CRMM_QUERY_BYTES_IN_USE), 2048);
    /* freeing more than a block is refused rather than corrupting the lists */
    ck_assert_crmm(crmm_resource_deallocate(f, (void *)0x1000, 4096, NULL), CRMM_ERROR_INVALID_ARGUMENT);
}

CRMM_TEST_IN("fixed_size", destroy_returns_every_chunk)
{
    make("block_size=256 blocks_to_preallocate=2");
    void *p[5];
    for (int i = 0; i < 5; i++)
        ck_assert_crmm_ok(crmm_resource_allocate(f, 256, NULL, &p[i]));
    ck_assert_uint_eq(crmm_test_query(h, CRMM_QUERY_BYTES_IN_USE), 3 * 512);
    for (int i = 0; i < 4; i++)
        ck_assert_crmm_ok(crmm_resource_deallocate(f, p[i], 256, NULL));
    ck_assert_int_eq(crmm_resource_refcount(h), 2);
    /* one block still live: reported as a leak, and its chunk goes back all the same */
    crmm_resource_release(f);
    f = NULL;
    ck_assert_uint_eq(crmm_test_query(h, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
}

CRMM_TEST_IN("fixed_size", upstream_failure_while_growing)
{
    crmm_resource *b;
    ck_assert_crmm_ok(crmm_resource_create("budget", "limit=64KiB", NULL, &b));
    ck_assert_crmm_ok(crmm_resource_create("fixed_size", "block_size=16KiB blocks_to_preallocate=2", b, &f));
    void *p[5];
    for (int i = 0; i < 4; i++)
        ck_assert_crmm_ok(crmm_resource_allocate(f, 16384, NULL, &p[i]));
    crmm_clear_error();
    ck_assert_crmm(crmm_resource_allocate(f, 100, NULL, &p[4]), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_msg(strstr(crmm_last_error(), "fixed_size") && strstr(crmm_last_error(), "budget"), "message: %s",
                  crmm_last_error());
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_UPSTREAM_BLOCKS), 2);
    /* still usable: a freed block serves the next request */
    ck_assert_crmm_ok(crmm_resource_deallocate(f, p[1], 16384, NULL));
    ck_assert_crmm_ok(crmm_resource_allocate(f, 100, NULL, &p[4]));
    ck_assert_ptr_eq(p[4], p[1]);
    ck_assert_crmm_ok(crmm_resource_deallocate(f, p[4], 100, NULL));
    for (int i = 0; i < 4; i++)
        if (i != 1)
            ck_assert_crmm_ok(crmm_resource_deallocate(f, p[i], 16384, NULL));
    crmm_resource_release(f);
    f = NULL;
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_BYTES_IN_USE), 0);
    crmm_resource_release(b);
}

CRMM_TEST_IN("fixed_size", create_fails_when_first_chunk_fails)
{
    crmm_resource *b;
    ck_assert_crmm_ok(crmm_resource_create("budget", "limit=1KiB", NULL, &b));
    crmm_clear_error();
    ck_assert_crmm(crmm_resource_create("fixed_size", "block_size=4KiB blocks_to_preallocate=1", b, &f), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(crmm_last_error(), "fixed_size"), "message: %s", crmm_last_error());
    ck_assert_int_eq(crmm_resource_refcount(b), 1); /* no reference left behind */
    crmm_resource_release(b);
}

/* blocks_to_preallocate = 10^12 is refused by its range before anything is allocated; the most
 * the range allows (2^20 blocks) over an upstream that cannot give the chunk fails with the
 * upstream's error: it is asked before any bookkeeping for the blocks is allocated. */
CRMM_TEST_IN("fixed_size", huge_preallocation_asks_upstream_first)
{
    crmm_resource *b;
    ck_assert_crmm_ok(crmm_resource_create("budget", "limit=1MiB", NULL, &b));
    ck_assert_crmm(crmm_resource_create("fixed_size", "block_size=256 blocks_to_preallocate=1000000000000", b, &f),
                   CRMM_ERROR_CONFIG);
    ck_assert_msg(strstr(crmm_last_error(), "blocks_to_preallocate"), "message: %s", crmm_last_error());
    ck_assert_ptr_null(f);
    ck_assert_crmm(crmm_resource_create("fixed_size", "block_size=256 blocks_to_preallocate=1048576", b, &f),
                   CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(crmm_last_error(), "cannot grow by 1048576 blocks"), "message: %s", crmm_last_error());
    ck_assert_msg(!strstr(crmm_last_error(), "malloc failed"), "message: %s", crmm_last_error());
    ck_assert_int_eq(crmm_resource_refcount(b), 1);
    crmm_resource_release(b);
}

CRMM_TEST_IN("fixed_size", bad_parameters)
{
    ck_assert_crmm_ok(crmm_resource_create("host", "", NULL, &h));
    ck_assert_crmm(crmm_resource_create("fixed_size", "block_size=0", h, &f), CRMM_ERROR_CONFIG);
    ck_assert_msg(strstr(crmm_last_error(), "block_size"), "message: %s", crmm_last_error());
    ck_assert_crmm(crmm_resource_create("fixed_size", "blocks_to_preallocate=0", h, &f), CRMM_ERROR_CONFIG);
    ck_assert_msg(strstr(crmm_last_error(), "blocks_to_preallocate"), "message: %s", crmm_last_error());
    ck_assert_crmm(crmm_resource_create("fixed_size", "block_size=lots", h, &f), CRMM_ERROR_CONFIG);
    ck_assert_crmm(crmm_resource_create("fixed_size", "block_size=1TiB blocks_to_preallocate=100000000", h, &f),
                   CRMM_ERROR_CONFIG);
    ck_assert_crmm(crmm_resource_create("fixed_size", "block_size=4KiB", NULL, &f), CRMM_ERROR_CONFIG); /* no upstream */
    ck_assert_ptr_null(f);
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
}

CRMM_TEST_IN("fixed_size", properties_follow_upstream)
{
    make("block_size=4KiB blocks_to_preallocate=1");
    ck_assert(crmm_resource_is_host_accessible(f));
    ck_assert(!crmm_resource_is_device_accessible(f));
    ck_assert_str_eq(crmm_resource_kind(f), "fixed_size");
    ck_assert_ptr_eq(crmm_resource_upstream(f), h);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_MAXIMUM_SIZE), UINT64_MAX); /* the host's: none */
}

/* The most it will ever reserve is its upstream's: every chunk comes from there. */
CRMM_TEST_IN("fixed_size", maximum_size_is_the_upstreams)
{
    make("block_size=4KiB blocks_to_preallocate=1");
    crmm_resource *limited = NULL;
    ck_assert_crmm_ok(crmm_resource_create("limiting", "allocation_limit=40KiB", h, &limited));
    crmm_resource *over = NULL;
    ck_assert_crmm_ok(crmm_resource_create("fixed_size", "block_size=4KiB blocks_to_preallocate=2", limited, &over));
    ck_assert_uint_eq(crmm_test_query(over, CRMM_QUERY_MAXIMUM_SIZE), 40 * 1024);
    crmm_resource_release(over);
    crmm_resource_release(limited);
}

/* A double free or a foreign pointer is refused and changes nothing: the block is handed out
 * once, and the counters stay right (a free list that took it would hand it out twice). */
static const char *const double_free_plugins[][2] = {{"fixed_size", "block_size=4KiB blocks_to_preallocate=4"},
                                                     {"binning", "bins=4KiB blocks_to_preallocate=4"}};

CRMM_LOOP_TEST_IN("fixed_size", double_free_and_foreign_pointer_are_refused, 2)
{
    over_host_make(double_free_plugins[_i][0], double_free_plugins[_i][1], &h, &f);
    void *a = crmm_test_allocate(f, 4000);
    ck_assert_crmm_ok(crmm_resource_deallocate(f, a, 4000, NULL));
    ck_assert_crmm(crmm_resource_deallocate(f, a, 4000, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    char on_stack[512];
    void *foreign = (void *)(((uintptr_t)on_stack + 255) & ~(uintptr_t)255);
    ck_assert_crmm(crmm_resource_deallocate(f, foreign, 100, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    void *b = crmm_test_allocate(f, 4000), *c = crmm_test_allocate(f, 4000);
    ck_assert_ptr_ne(b, c);
    ck_assert_ptr_ne(b, foreign);
    ck_assert_ptr_ne(c, foreign);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_ALLOCATIONS), 2);
    ck_assert_crmm_ok(crmm_resource_deallocate(f, b, 4000, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(f, c, 4000, NULL));
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_ALLOCATIONS), 0);
}

int main(void)
{
    Suite *s = suite_create("fixed_size");
    crmm_conformance_add(s, chains, (int)(sizeof chains / sizeof chains[0]));
    TCase *tc = crmm_test_tcase(s, "fixed_size", 0);
    tcase_add_checked_fixture(tc, NULL, teardown);

    tc = crmm_test_tcase(s, "fixed_size_threads", 120); /* busy threads: give a loaded machine time */
    tcase_add_checked_fixture(tc, NULL, teardown);
    return crmm_test_run(s);
}
