/* check_pool.c — the `pool` plugin on the CPU: over `host` (the conformance suite, figures, bad
 * input) and over the scripted upstream of pool_test.h, whose allocations are adjacent in memory:
 * what the pool asks of its upstream at creation, its chunks, and that blocks of two upstream
 * allocations never merge even when they touch. Growth, a model and the stress run:
 * check_pool_growth.c. */
#include "build_config.h"
#include "pool_test.h"

static const crmm_test_chain pool_chains[] = {
    {"pool_over_host", "[resource.h]\nplugin = host\n[resource.p]\nplugin = pool\nupstream = h\ninitial_size = 64MiB\n",
     "p", 0, 0},
    {"pool_with_maximum_over_host",
     "[resource.h]\nplugin = host\n[resource.p]\nplugin = pool\nupstream = h\ninitial_size = 1MiB\nmaximum_size = 3GiB\n",
     "p", 0, 0},
    {"pool_from_nothing_over_host", "[resource.h]\nplugin = host\n[resource.p]\nplugin = pool\nupstream = h\ninitial_size = 0\n",
     "p", 0, 0},
};

/* ---- creation and parameters ------------------------------------------------------------- */

CRMM_TEST_IN("pool_params", initial_size_is_taken_at_creation)
{
    crmm_resource *p = make_pool("initial_size=1MiB", host_upstream());
    ck_assert_str_eq(crmm_resource_kind(p), "pool");
    ck_assert(crmm_resource_is_host_accessible(p));
    ck_assert(!crmm_resource_is_device_accessible(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_MAXIMUM_SIZE), UINT64_MAX);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    crmm_resource_release(p);

    p = make_pool("initial_size=2MiB maximum_size=8MiB", host_upstream());
    ck_assert_uint_eq(q(p, CRMM_QUERY_MAXIMUM_SIZE), 8 * MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 2 * MiB);
    crmm_resource_release(p);
}

CRMM_TEST_IN("pool_params", sizes_are_rounded_up_with_a_note)
{
    const char *log = capture_log();
    crmm_resource *p = make_pool("initial_size=1000, maximum_size=5000", host_upstream());
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 1024);
    ck_assert_uint_eq(q(p, CRMM_QUERY_MAXIMUM_SIZE), 5120);
    const char *text = read_log(log);
    ck_assert_msg(strstr(text, "initial_size of 1000 bytes rounded up to 1024"), "log: %s", text);
    ck_assert_msg(strstr(text, "maximum_size of 5000 bytes rounded up to 5120"), "log: %s", text);
    crmm_resource_release(p);
}

static const struct bad_params {
    const char *params;
    const char *message; /* part of the error */
} bad_params[] = {
    {"", "initial_size is required"},
    {"maximum_size=1GiB", "initial_size is required"},
    {"initial_size=2MiB maximum_size=1MiB", "initial_size (2.0 MiB) is larger than maximum_size (1.0 MiB)"},
    {"initial_size=12parsecs", "initial_size"},
    {"initial_size=lots", "initial_size"},
    {"initial_size=-5MiB", "initial_size"},
    {"initial_size=1MiB maximum_size=0", "pool: maximum_size: 0 is below the minimum 1"},
    {"initial_size=50%", "initial_size is required over host memory, in bytes"},
    {"initial_size=50% maximum_size=40%", "initial_size is required over host memory"},
    {"initial_size=1MiB maximum_size=40%", "pool: maximum_size = 40%: a percentage refers to a device's memory"},
    {"initial_size=99999999999999999999", "initial_size"},
    {"initial_size=18446744073709551615", "pool: initial_size: 18446744073709551615 is above the maximum 18446744073709551360"},
    {"initial_size=1MiB maximum_size=18446744073709551361", "pool: maximum_size: 18446744073709551361 is above the maximum 18446744073709551360"},
    {"initial_size=1MiB release_threshold=18446744073709551615", "pool: release_threshold: 18446744073709551615 is above the maximum"},
    {"initial_sise=1MiB", "did you mean 'initial_size'"},
    {"initial_size=1MiB blocksize=4", "unknown key 'blocksize'"},
    {"initial_size", "not key=value"},
    {"initial_size=1MiB stream_reuse=fast", "stream_reuse: 'fast' is not one of sync|event"},
    {"initial_size=1MiB stream_reuse=", "stream_reuse"},
    {"initial_size=1MiB stream_reuse=SYNC", "sync|event"},
    {"initial_size=1MiB fit=worst", "fit: 'worst' is not one of best|newest"},
    {"initial_size=1MiB fit=", "fit"},
};

CRMM_LOOP_TEST_IN("pool_params", bad_params_are_refused, (int)(sizeof bad_params / sizeof bad_params[0]))
{
    const struct bad_params *b = &bad_params[_i];
    crmm_resource *h = host_upstream();
    crmm_resource *p = (crmm_resource *)0x1;
    crmm_status st = crmm_resource_create("pool", b->params, h, &p);
    ck_assert_msg(st == CRMM_ERROR_CONFIG, "'%s' gave %s: %s", b->params, crmm_status_name(st), crmm_last_error());
    ck_assert_msg(strstr(crmm_last_error(), b->message), "'%s': message '%s' lacks '%s'", b->params, crmm_last_error(),
                  b->message);
    ck_assert_ptr_eq(p, (crmm_resource *)0x1);
    ck_assert_int_eq(crmm_resource_refcount(h), 1); /* nothing kept a reference */
    crmm_resource_release(h);
}

CRMM_TEST_IN("pool_params", initial_size_larger_than_upstream_is_refused)
{
    crmm_resource *h = host_upstream();
    crmm_resource *p = NULL;
    ck_assert_crmm(crmm_resource_create("pool", "initial_size=1024TiB", h, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(crmm_last_error(), "initial_size (1.0 PiB)"), "%s", crmm_last_error());
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
    crmm_resource_release(h);
}

CRMM_TEST_IN("pool_params", pool_from_a_config_file)
{
    crmm_config *cfg;
    ck_assert_crmm_ok(crmm_config_load_string("[resource.h]\nplugin = host\n[resource.main]\nplugin = pool\nupstream = h\n"
                                              "initial_size = 4MiB\nmaximum_size = 16MiB\n", "t", &cfg));
    crmm_resource *p;
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "main", -1, &p));
    ck_assert_str_eq(crmm_resource_name(p), "main");
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 4 * MiB);
    void *x = NULL;
    ck_assert_crmm(crmm_resource_allocate(p, 32 * MiB, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_msg(strstr(crmm_last_error(), "pool 'main': failed to allocate 32.0 MiB (pool size 4.0 MiB, maximum 16.0 MiB)"),
                  "%s", crmm_last_error());
    crmm_resource_release(p);
    crmm_config_free(cfg);

    /* a missing initial_size over host memory is reported with the file and line */
    crmm_status st = crmm_config_load_string("[resource.h]\nplugin = host\n[resource.main]\nplugin = pool\nupstream = h\n", "t2", &cfg);
    if (st == CRMM_OK) {
        st = crmm_config_create_resource(cfg, "main", -1, &p);
        crmm_config_free(cfg);
    }
    ck_assert_int_eq(st, CRMM_ERROR_CONFIG);
    ck_assert_msg(strstr(crmm_last_error(), "initial_size is required"), "%s", crmm_last_error());
}

/* ---- figures ----------------------------------------------------------------------------- */

CRMM_TEST_IN("pool_blocks", queries_follow_a_known_sequence)
{
    crmm_resource *p = make_pool("initial_size=1MiB", host_upstream());
    void *a = alloc(p, 1000), *b = alloc(p, 3000);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 4000);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 2);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), MiB - 1024 - 3072);
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), MiB - 1024 - 3072);
    ck_assert_uint_eq((uintptr_t)b - (uintptr_t)a, 1024); /* carved in order from the front */
    release(p, a, 1000);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 3000);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), MiB - 3072);
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), MiB - 1024 - 3072); /* the 1 KiB hole stays apart */
    double frag = -1;
    ck_assert_crmm_ok(crmm_resource_fragmentation(p, &frag));
    ck_assert_double_eq_tol(frag, 1.0 - (double)(MiB - 4096) / (double)(MiB - 3072), 1e-12);
    void *c = alloc(p, 1024); /* the hole fits exactly */
    ck_assert_ptr_eq(c, a);
    free_all(p, {c, 1024}, {b, 3000});
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE_PEAK), 4024); /* 3000 + 1024 */
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS_PEAK), 2);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS_TOTAL), 3);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_TOTAL), 5024);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), MiB); /* all merged again */
    ck_assert_crmm_ok(crmm_resource_fragmentation(p, &frag));
    ck_assert_double_eq(frag, 0.0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED_PEAK), MiB);
    uint64_t v;
    ck_assert_crmm(crmm_resource_query(p, (crmm_query)999, &v), CRMM_ERROR_UNSUPPORTED);
    ck_assert_msg(strstr(crmm_last_error(), "pool cannot answer query 999"), "%s", crmm_last_error());
    crmm_resource_release(p);
}

CRMM_TEST_IN("pool_blocks", freed_neighbours_merge_in_any_order)
{
    crmm_resource *p = make_pool("initial_size=64KiB maximum_size=64KiB", host_upstream());
    enum { N = 64 };
    void *blk[N];
    for (int k = 0; k < N; k++)
        blk[k] = alloc(p, 1024);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), 0);
    /* free in a scrambled order; every block merges with whatever neighbours are free */
    uint64_t seed = 9;
    for (int k = N - 1; k > 0; k--) {
        int j = (int)(crmm_test_rand(&seed) % (uint64_t)(k + 1));
        void *t = blk[k];
        blk[k] = blk[j];
        blk[j] = t;
    }
    for (int k = 0; k < N; k++)
        release(p, blk[k], 1024);
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), 64 * KiB);
    void *all = alloc(p, 64 * KiB); /* the whole chunk again, with no growth (maximum) */
    release(p, all, 64 * KiB);
    crmm_resource_release(p);
}

CRMM_TEST_IN("pool_blocks", a_block_in_the_size_class_itself_is_found)
{
    /* The fast search skips the request's own class (not every block there fits). With the
     * maximum reached, the only free block is in that class and fits: it must be found. */
    crmm_resource *p = make_pool("initial_size=1MiB maximum_size=1MiB", host_upstream());
    void *a = alloc(p, MiB - 516 * 256); /* leaves a free tail of 516 units of 256 B */
    void *b = alloc(p, 513 * 256);       /* 513 units: same class as 516, rounded up past it */
    ck_assert_uint_eq((uintptr_t)b - (uintptr_t)a, MiB - 516 * 256);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), 3 * 256);
    free_all(p, {a, MiB - 516 * 256}, {b, 513 * 256});
    crmm_resource_release(p);
}

CRMM_TEST_IN("pool_blocks", a_freed_block_of_the_size_is_reused_before_a_larger_one_is_split)
{
    /* 401 units of 256 B lie between class boundaries (400 and 408). A block of exactly that
     * size freed a moment ago is taken again, before the larger free tail is split: training
     * asks for the same shapes every step, and splitting the tail each time makes a pool that
     * never moves pages grow (docs/expandable-pool.md, Fit). */
    crmm_resource *p = make_pool("initial_size=1MiB maximum_size=1MiB", host_upstream());
    void *a = alloc(p, 401 * 256);
    void *guard = alloc(p, 256); /* keeps a's block from merging with the free tail */
    release(p, a, 401 * 256);
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), MiB - 402 * 256);
    void *again = alloc(p, 401 * 256);
    ck_assert_ptr_eq(again, a);
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), MiB - 402 * 256); /* the tail untouched */
    /* a request of the same class that the block cannot hold is served from the tail */
    release(p, again, 401 * 256);
    void *larger = alloc(p, 402 * 256);
    ck_assert_ptr_ne(larger, a);
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), MiB - 804 * 256);
    free_all(p, {larger, 402 * 256}, {guard, 256});
    crmm_resource_release(p);
}

/* ---- chunks -------------------------------------------------------------------------------- */

CRMM_TEST_IN("pool_growth", adjacent_upstream_blocks_never_merge)
{
    script_upstream *u = script_new(8 * MiB, 0);
    crmm_resource *p = make_pool("initial_size=1MiB", &u->base);
    void *a = alloc(p, MiB);
    void *b = alloc(p, MiB); /* a second chunk, right after the first in memory */
    ck_assert_ptr_eq(b, (char *)a + MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 2);
    free_all(p, {a, MiB}, {b, MiB});
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), 2 * MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), MiB); /* not 2 MiB */
    double frag;
    ck_assert_crmm_ok(crmm_resource_fragmentation(p, &frag));
    ck_assert_double_eq_tol(frag, 0.5, 1e-12);
    /* 2 MiB cannot be carved from the two: the pool grows instead */
    void *c = alloc(p, 2 * MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 3);
    ck_assert_ptr_eq(c, (char *)a + 2 * MiB);
    release(p, c, 2 * MiB);
    crmm_resource_release(p);
    /* the core released the pool, which gave every chunk back */
}

CRMM_TEST_IN("pool_growth", trim_returns_wholly_free_chunks)
{
    script_upstream *u = script_new(16 * MiB, 0);
    crmm_resource_retain(&u->base); /* keep it to read its counts after the pool is gone */
    crmm_resource *p = make_pool("initial_size=1MiB", &u->base);
    void *a = alloc(p, MiB);
    void *b = alloc(p, MiB);     /* chunk 2 (1 MiB) */
    void *c = alloc(p, 2 * MiB); /* chunk 3 (2 MiB) */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 4 * MiB);
    free_all(p, {b, MiB}, {c, 2 * MiB});
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_int_eq(u->frees, 2);
    ck_assert_int_eq(u->live, 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED_PEAK), 4 * MiB);
    ck_assert_crmm_ok(crmm_resource_trim(p)); /* nothing more to give */
    ck_assert_int_eq(u->frees, 2);
    /* a chunk with one live block in it stays */
    void *d = alloc(p, 256); /* grows by 1 MiB */
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 2);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 2);
    release(p, a, MiB);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), MiB);
    /* the pool works on after a trim */
    release(p, d, 256);
    void *e = alloc(p, 3 * MiB);
    release(p, e, 3 * MiB);
    crmm_resource_release(p);
    ck_assert_int_eq(u->live, 0); /* destroy gave back the rest */
    crmm_resource_release(&u->base);
}

CRMM_TEST_IN("pool_growth", destroy_returns_memory_and_reports_leaks)
{
    const char *log = capture_log();
    crmm_resource *h = host_upstream();
    crmm_resource_retain(h);
    crmm_resource *p = make_pool("initial_size=1MiB", h);
    alloc(p, 1000);
    alloc(p, 5000);
    alloc(p, 2 * MiB); /* one more chunk */
    ck_assert_uint_eq(q(h, CRMM_QUERY_ALLOCATIONS), 2);
    crmm_resource_release(p);
    ck_assert_uint_eq(q(h, CRMM_QUERY_ALLOCATIONS), 0); /* both chunks went back */
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
    const char *text = read_log(log);
    ck_assert_msg(strstr(text, "pool resource destroyed with 3 live allocations (2.0 MiB)"), "log: %s", text);
    crmm_resource_release(h);
}

/* ---- bad pointers -------------------------------------------------------------------------- */

CRMM_TEST_IN("pool_blocks", bad_pointers_are_refused_and_change_nothing)
{
    crmm_resource *p = make_pool("initial_size=1MiB", host_upstream());
    void *a = alloc(p, 4096), *b = alloc(p, 4096);
    uint64_t free_before = q(p, CRMM_QUERY_BYTES_FREE);

    void *foreign = malloc(512);
    ck_assert_crmm(crmm_resource_deallocate(p, foreign, 512, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "was not allocated by this pool"), "%s", crmm_last_error());
    free(foreign);

    ck_assert_crmm(crmm_resource_deallocate(p, (char *)a + 256, 4096, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "points inside the allocation at"), "%s", crmm_last_error());

    release(p, a, 4096);
    ck_assert_crmm(crmm_resource_deallocate(p, a, 4096, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "is already free (double free?)"), "%s", crmm_last_error());
    /* freed and merged into a free neighbour: still recognised */
    release(p, b, 4096);
    ck_assert_crmm(crmm_resource_deallocate(p, b, 4096, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "is already free"), "%s", crmm_last_error());

    /* nothing was corrupted: the figures are right and the pool hands out the same memory */
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), free_before + 8192);
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), MiB);
    void *c = alloc(p, 4096);
    ck_assert_ptr_eq(c, a);
    void *d = alloc(p, 4096);
    ck_assert_ptr_eq(d, b);
    free_all(p, {c, 4096}, {d, 4096});
    crmm_resource_release(p);
}

CRMM_TEST_IN("pool_blocks", control_ops)
{
    crmm_resource *p = make_pool("initial_size=1MiB", host_upstream());
    /* over host memory there are no streams to forget */
    ck_assert_crmm_ok(crmm_pool_forget_stream(p, NULL));
    ck_assert_crmm(crmm_resource_control(p, 99, NULL), CRMM_ERROR_UNSUPPORTED);
    ck_assert_msg(strstr(crmm_last_error(), "no control operation 99"), "%s", crmm_last_error());
    crmm_resource *h = host_upstream();
    ck_assert_crmm(crmm_pool_forget_stream(h, NULL), CRMM_ERROR_UNSUPPORTED);
    ck_assert_crmm(crmm_pool_forget_stream(NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    crmm_resource_release(h);
    crmm_resource_release(p);
}

/* Resetting the peaks sets each to its current figure; later use raises them again. The block
 * bytes count requests rounded up to 256. A pool over host memory makes no device call: its
 * device counters stay 0. */
CRMM_TEST_IN("pool_blocks", peaks_reset_to_the_current_figures)
{
    crmm_resource *p = make_pool("initial_size=0", host_upstream());
    void *a = alloc(p, 1000), *b = alloc(p, 3 << 20);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_BLOCK_BYTES), 1024 + (3 << 20));
    ck_assert_crmm_ok(crmm_resource_deallocate(p, b, 3 << 20, NULL));
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE_PEAK), 1000 + (3 << 20));
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_BLOCK_BYTES_PEAK), 1024 + (3 << 20));
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS_PEAK), 2);
    ck_assert_crmm_ok(crmm_pool_reset_peaks(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE_PEAK), 1000);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_BLOCK_BYTES_PEAK), 1024);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_BLOCK_BYTES), 1024);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS_PEAK), 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED_PEAK), reserved);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 1000); /* the current figures are untouched */
    void *c = alloc(p, 5000);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE_PEAK), 6000);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_BLOCK_BYTES_PEAK), 1024 + 5120);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS_PEAK), 2);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_DEVICE_SYNCS), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_PAGES_MAPPED), 0);
    ck_assert_uint_ge(q(p, CRMM_QUERY_POOL_GROWTHS), 2); /* chunks taken from upstream */
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_THREAD_CACHES), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_LOCK_WAITS), 0); /* one thread */
    free_all(p, {a, 1000}, {c, 5000});
    /* a chain without a pool, and no resource */
    crmm_resource *h = host_upstream();
    ck_assert_crmm(crmm_pool_reset_peaks(h), CRMM_ERROR_UNSUPPORTED);
    ck_assert_crmm(crmm_pool_reset_peaks(NULL), CRMM_ERROR_INVALID_ARGUMENT);
    crmm_resource_release(h);
    crmm_resource_release(p);
}

/* ---- which free block serves a request (the fit parameter) -------------------------------- */

/* Blocks are cut from the pool's one chunk in address order, each followed by a live 256-byte
 * separator so that no two free blocks merge; then freed in `freed` order (the last is the
 * newest); then `request` must get block `expect`. Sizes 36, 36.25 and 36.5 KiB share one size
 * class (36-36.75 KiB), 35 KiB is in the class below it, 4 and 5 KiB have a class each. */
#define FIT_KIB(k) ((size_t)((k) * 1024))
static const struct fit_case {
    const char *what;
    const char *fit;
    size_t sizes[10];
    int count;
    int freed[10];
    size_t request;
    int expect;
} fit_cases[] = {
    {"the smallest block of the class that holds it", "best",
     {FIT_KIB(36.5), FIT_KIB(36), FIT_KIB(36.25)}, 3, {0, 1, 2}, FIT_KIB(36), 1},
    {"the newest block of the class, which holds it", "newest",
     {FIT_KIB(36.5), FIT_KIB(36), FIT_KIB(36.25)}, 3, {0, 1, 2}, FIT_KIB(36), 2},
    {"the lowest address among equal sizes", "best",
     {FIT_KIB(36.25), FIT_KIB(36.25)}, 2, {0, 1}, FIT_KIB(36), 0},
    {"the newest among equal sizes", "newest",
     {FIT_KIB(36.25), FIT_KIB(36.25)}, 2, {0, 1}, FIT_KIB(36), 1},
    {"the smallest block of the lowest class above an empty one", "best",
     {FIT_KIB(36), FIT_KIB(36.5)}, 2, {0, 1}, FIT_KIB(35), 0},
    {"the newest block of the lowest class above an empty one", "newest",
     {FIT_KIB(36), FIT_KIB(36.5)}, 2, {0, 1}, FIT_KIB(35), 1},
    {"a fitting block among the first 8 of the class, not the best one further in", "best",
     {FIT_KIB(36), FIT_KIB(36.5), FIT_KIB(36.5), FIT_KIB(36.5), FIT_KIB(36.5), FIT_KIB(36.5), FIT_KIB(36.5),
      FIT_KIB(36.5), FIT_KIB(36.5), FIT_KIB(36.5)}, 10, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, FIT_KIB(36), 2},
    {"under 8 KiB the lowest address of the size, not the newest", "best",
     {FIT_KIB(4), FIT_KIB(4), FIT_KIB(4)}, 3, {0, 1, 2}, FIT_KIB(4), 0},
    {"under 8 KiB the lowest address of the size, whatever order they were freed in", "best",
     {FIT_KIB(4), FIT_KIB(4), FIT_KIB(4)}, 3, {2, 0, 1}, FIT_KIB(4), 0},
    {"under 8 KiB the newest block of the size", "newest",
     {FIT_KIB(4), FIT_KIB(4), FIT_KIB(4)}, 3, {0, 1, 2}, FIT_KIB(4), 2},
    {"under 8 KiB the lowest address among the first 4 of the size, not one further in", "best",
     {FIT_KIB(4), FIT_KIB(4), FIT_KIB(4), FIT_KIB(4), FIT_KIB(4)}, 5, {0, 1, 2, 3, 4}, FIT_KIB(4), 1},
    {"under 8 KiB the lowest address of the first larger size when the own is empty", "best",
     {FIT_KIB(5), FIT_KIB(5)}, 2, {0, 1}, FIT_KIB(4), 0},
    {"under 8 KiB the newest block of the first larger size when the own is empty", "newest",
     {FIT_KIB(5), FIT_KIB(5)}, 2, {0, 1}, FIT_KIB(4), 1},
};

CRMM_LOOP_TEST_IN("pool_fit", fit_chooses_the_block_it_promises, (int)(sizeof fit_cases / sizeof fit_cases[0]))
{
    const struct fit_case *c = &fit_cases[_i];
    char params[64];
    snprintf(params, sizeof params, "initial_size=16MiB fit=%s", c->fit);
    crmm_resource *p = make_pool(params, host_upstream());
    void *blocks[10], *separators[10];
    for (int i = 0; i < c->count; i++) {
        blocks[i] = alloc(p, c->sizes[i]);
        separators[i] = alloc(p, 256);
        if (i > 0)
            ck_assert_uint_gt((uintptr_t)blocks[i], (uintptr_t)blocks[i - 1]); /* as the cases assume */
    }
    for (int k = 0; k < c->count; k++)
        release(p, blocks[c->freed[k]], c->sizes[c->freed[k]]);
    void *got = alloc(p, c->request);
    int which = -1;
    for (int i = 0; i < c->count; i++)
        if (got == blocks[i])
            which = i;
    ck_assert_msg(which == c->expect, "fit = %s, %s: a request of %zu bytes got block %d, not %d", c->fit, c->what,
                  c->request, which, c->expect);
    release(p, got, c->request);
    for (int i = 0; i < c->count; i++)
        release(p, separators[i], 256);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), 16 * MiB); /* everything merged back */
    crmm_resource_release(p);
}

int main(void)
{
    Suite *s = suite_create("pool");
    crmm_conformance_add(s, pool_chains, (int)(sizeof pool_chains / sizeof pool_chains[0]));

    crmm_test_tcase(s, "pool_params", 0);

    crmm_test_tcase(s, "pool_blocks", 0);

    crmm_test_tcase(s, "pool_growth", 0);

    crmm_test_tcase(s, "pool_fit", 0);

    return crmm_test_run(s);
}
