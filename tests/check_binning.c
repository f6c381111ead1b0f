/* check_binning.c — the binning plugin over host memory: conformance, routing to the smallest
 * bin that fits, explicit and exponent bins, large requests straight upstream, frees back to
 * their bin, added bins, and bad parameters. Routing shows in the host upstream's bytes in use:
 * with one block per chunk, a bin's second request makes it take one more block upstream. */
#include "build_config.h"
#include <crmm/binning.h>
#include "blocks_test.h"
#include "conformance.h"
#include "over_host.h"
#include "probe_resource.h"

static const crmm_test_chain chains[] = {
    {"binning_exponents_over_host",
     "[resource.h]\nplugin = host\n[resource.b]\nplugin = binning\nupstream = h\nmin_size_exponent = 8\nmax_size_exponent = 16\n"
     "blocks_to_preallocate = 4\n",
     "b", 0, 0},
    {"binning_explicit_over_host",
     "[resource.h]\nplugin = host\n[resource.b]\nplugin = binning\nupstream = h\nbins = 256, 4KiB, 64KiB\nblocks_to_preallocate = 8\n",
     "b", 0, 0},
};

/* The running test's host upstream and binning over it (make); the fixture releases them. */
static crmm_resource *h, *b;

static void make(const char *params) { over_host_make("binning", params, &h, &b); }

static void teardown(void) { over_host_release(&h, &b); }

/* Release the binning before the test ends, to see what it gave back. */
static void release_binning(void) { crmm_resource_release(b), b = NULL; }

/* Allocate `bytes` and return how much more the host upstream holds afterwards. */
static uint64_t upstream_growth(size_t bytes, void **p)
{
    uint64_t before = crmm_test_query(h, CRMM_QUERY_BYTES_IN_USE);
    ck_assert_crmm_ok(crmm_resource_allocate(b, bytes, NULL, p));
    ck_assert_ptr_nonnull(*p);
    return crmm_test_query(h, CRMM_QUERY_BYTES_IN_USE) - before;
}

CRMM_TEST_IN("binning", requests_go_to_the_smallest_bin_that_fits)
{
    make("bins=256:4KiB:64KiB blocks_to_preallocate=1");
    ck_assert_uint_eq(crmm_test_query(h, CRMM_QUERY_BYTES_IN_USE), 256 + 4096 + 65536); /* one block per bin at create */
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_BYTES_RESERVED), 256 + 4096 + 65536);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_UPSTREAM_BLOCKS), 3);
    struct { size_t bytes; uint64_t growth; } cases[] = {
        {100, 0}, {256, 256},          /* 256 bin: its one block, then a new chunk */
        {257, 0}, {4096, 4096},        /* 4 KiB bin, the boundary included */
        {4097, 0}, {65536, 65536},     /* 64 KiB bin */
        {65537, 65537}, {1 << 20, 1 << 20}, /* no bin: straight upstream, unrounded */
    };
    void *p[8];
    for (int i = 0; i < 8; i++) {
        uint64_t grew = upstream_growth(cases[i].bytes, &p[i]);
        ck_assert_msg(grew == cases[i].growth, "%zu bytes: upstream grew by %llu, expected %llu", cases[i].bytes,
                      (unsigned long long)grew, (unsigned long long)cases[i].growth);
    }
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_UPSTREAM_BLOCKS), 3 + 3 + 2);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_BYTES_RESERVED), 2 * (256 + 4096 + 65536) + 65537 + (1 << 20));
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_ALLOCATIONS), 8);
    for (int i = 0; i < 8; i++)
        ck_assert_crmm_ok(crmm_resource_deallocate(b, p[i], cases[i].bytes, NULL));
    /* the large blocks went back upstream, the bins keep their chunks */
    ck_assert_uint_eq(crmm_test_query(h, CRMM_QUERY_BYTES_IN_USE), 2 * (256 + 4096 + 65536));
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_BYTES_FREE), 2 * (256 + 4096 + 65536));
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_LARGEST_FREE_BLOCK), 65536);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_BYTES_IN_USE), 0);
    release_binning();
    ck_assert_uint_eq(crmm_test_query(h, CRMM_QUERY_BYTES_IN_USE), 0);
}

CRMM_TEST_IN("binning", exponent_range_makes_power_of_two_bins)
{
    make("min_size_exponent=10 max_size_exponent=12 blocks_to_preallocate=1");
    ck_assert_uint_eq(crmm_test_query(h, CRMM_QUERY_BYTES_IN_USE), 1024 + 2048 + 4096);
    static const struct { size_t bytes; uint64_t growth; } cases[] = {
        {1, 0}, {1000, 1024}, {1500, 0}, {2048, 2048}, {3000, 0}, {4000, 4096}, {5000, 5000}, /* the last: no bin */
    };
    void *p[7];
    for (int i = 0; i < 7; i++)
        ck_assert_uint_eq(upstream_growth(cases[i].bytes, &p[i]), cases[i].growth);
    for (int i = 0; i < 7; i++)
        ck_assert_crmm_ok(crmm_resource_deallocate(b, p[i], cases[i].bytes, NULL));
}

CRMM_TEST_IN("binning", small_exponents_round_up_to_256)
{
    /* 8, 16, ..., 256 all become 256 (one bin), then 512 */
    make("min_size_exponent=3 max_size_exponent=9 blocks_to_preallocate=1");
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_UPSTREAM_BLOCKS), 2);
    ck_assert_uint_eq(crmm_test_query(h, CRMM_QUERY_BYTES_IN_USE), 256 + 512);
}

CRMM_TEST_IN("binning", exponents_and_list_combine)
{
    make("min_size_exponent=8 max_size_exponent=9 bins=1MiB:512 blocks_to_preallocate=1");
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_UPSTREAM_BLOCKS), 3); /* 256, 512 (once), 1 MiB */
    void *p, *q;
    ck_assert_uint_eq(upstream_growth(600, &p), 0);
    ck_assert_uint_eq(upstream_growth(700, &q), 1 << 20);
    ck_assert_crmm_ok(crmm_resource_deallocate(b, p, 600, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(b, q, 700, NULL));
}

CRMM_TEST_IN("binning", bins_within_one_octave_route_exactly)
{
    /* several bins between two powers of two: each size goes to the smallest that fits, at every
     * boundary (the routing table starts at the octave, the rest is a step within it) */
    make("bins=512:768:1KiB:1280:1536:3KiB:4KiB blocks_to_preallocate=1");
    static const size_t bins[] = {512, 768, 1024, 1280, 1536, 3072, 4096};
    enum { BINS = sizeof bins / sizeof bins[0] };
    for (size_t bytes = 1; bytes <= 4200; bytes += 1 + bytes / 64) {
        size_t want = 0;
        for (int i = 0; i < BINS && !want; i++)
            if (bins[i] >= bytes)
                want = bins[i];
        /* the bin's one block is handed out first; the second request makes it grow by its size */
        void *p, *q;
        ck_assert_crmm_ok(crmm_resource_allocate(b, bytes, NULL, &p));
        uint64_t grew = upstream_growth(bytes, &q);
        ck_assert_msg(grew == (want ? want : bytes), "%zu bytes: upstream grew by %llu, expected %zu", bytes,
                      (unsigned long long)grew, want ? want : bytes);
        ck_assert_crmm_ok(crmm_resource_deallocate(b, p, bytes, NULL));
        ck_assert_crmm_ok(crmm_resource_deallocate(b, q, bytes, NULL));
        crmm_resource_release(b);
        ck_assert_crmm_ok(crmm_resource_create("binning", "bins=512:768:1KiB:1280:1536:3KiB:4KiB blocks_to_preallocate=1", h, &b));
    }
}

CRMM_TEST_IN("binning", counts_are_the_bins_and_the_large_requests)
{
    make("bins=256:4KiB blocks_to_preallocate=2");
    void *p, *q, *r;
    ck_assert_crmm_ok(crmm_resource_allocate(b, 100, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_allocate(b, 3000, NULL, &q));
    ck_assert_crmm_ok(crmm_resource_allocate(b, 10000, NULL, &r)); /* upstream */
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_BYTES_IN_USE), 100 + 3000 + 10000);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_ALLOCATIONS), 3);
    ck_assert_crmm_ok(crmm_resource_deallocate(b, q, 3000, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(b, r, 10000, NULL));
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_BYTES_IN_USE), 100);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_ALLOCATIONS_TOTAL), 3);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_BYTES_TOTAL), 100 + 3000 + 10000);
    uint64_t v = 0;
    ck_assert_crmm(crmm_resource_query(b, CRMM_QUERY_BYTES_IN_USE_PEAK, &v), CRMM_ERROR_UNSUPPORTED);
    ck_assert_msg(strstr(crmm_last_error(), "statistics"), "%s", crmm_last_error());
    ck_assert_crmm(crmm_resource_query(b, CRMM_QUERY_ALLOCATIONS_PEAK, &v), CRMM_ERROR_UNSUPPORTED);
    ck_assert_crmm_ok(crmm_resource_deallocate(b, p, 100, NULL));
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_BYTES_IN_USE), 0);
}

CRMM_TEST_IN("binning", free_goes_back_to_its_bin)
{
    make("bins=256:4KiB blocks_to_preallocate=4");
    void *p, *q, *r;
    ck_assert_crmm_ok(crmm_resource_allocate(b, 3000, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(b, p, 3000, NULL));
    ck_assert_crmm_ok(crmm_resource_allocate(b, 100, NULL, &q));
    ck_assert_ptr_ne(q, p); /* a 256-byte request does not get the 4 KiB block */
    ck_assert_crmm_ok(crmm_resource_allocate(b, 2000, NULL, &r));
    ck_assert_ptr_eq(r, p); /* the 4 KiB bin hands its freed block out again */
    memset(r, 0x11, 4096);  /* and it is a whole 4 KiB block */
    ck_assert_crmm_ok(crmm_resource_deallocate(b, q, 100, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(b, r, 2000, NULL));
}

CRMM_TEST_IN("binning", no_bins_passes_everything_upstream)
{
    make("");
    void *p;
    ck_assert_uint_eq(upstream_growth(100, &p), 100);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_BYTES_RESERVED), 100);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    ck_assert_crmm_ok(crmm_resource_deallocate(b, p, 100, NULL));
    ck_assert_uint_eq(crmm_test_query(h, CRMM_QUERY_BYTES_IN_USE), 0);
}

CRMM_TEST_IN("binning", bins_hold_references_to_the_upstream)
{
    make("bins=256:512:1KiB blocks_to_preallocate=1");
    ck_assert_int_eq(crmm_resource_refcount(h), 1 + 1 + 3); /* ours, binning's, one per bin */
    ck_assert_str_eq(crmm_resource_kind(b), "binning");
    ck_assert(crmm_resource_is_host_accessible(b));
    release_binning();
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
}

static const char *const bad_params[] = {
    "min_size_exponent=8",                       /* without max */
    "max_size_exponent=8",                       /* without min */
    "min_size_exponent=12 max_size_exponent=10", /* min > max */
    "min_size_exponent=1 max_size_exponent=64",  /* 2^64 */
    "bins=abc",
    "bins=0",
    "bins=4KiB:-1",
    "bins=10%",
    "bins=:",
    "blocks_to_preallocate=0 bins=256",          /* refused by the fixed_size bin */
};

CRMM_LOOP_TEST_IN("binning", bad_parameters, (int)(sizeof bad_params / sizeof bad_params[0]))
{
    const char *bad = bad_params[_i];
    ck_assert_crmm_ok(crmm_resource_create("host", "", NULL, &h));
    crmm_clear_error();
    crmm_status st = crmm_resource_create("binning", bad, h, &b);
    ck_assert_msg(st == CRMM_ERROR_CONFIG, "'%s' gave %s: %s", bad, crmm_status_name(st), crmm_last_error());
    ck_assert_msg(strstr(crmm_last_error(), "binning") != NULL, "'%s': message: %s", bad, crmm_last_error());
    ck_assert_ptr_null(b);
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
}

CRMM_TEST_IN("binning", bins_from_a_config_file)
{
    crmm_config *cfg;
    ck_assert_crmm_ok(crmm_config_load_string("[resource.h]\nplugin = host\n[resource.b]\nplugin = binning\nupstream = h\n"
                                              "bins = 1KiB, 2 KiB\nblocks_to_preallocate = 2\n",
                                              "binning.ini", &cfg));
    crmm_resource *r;
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "b", -1, &r));
    ck_assert_uint_eq(crmm_test_query(r, CRMM_QUERY_BYTES_RESERVED), 2 * 1024 + 2 * 2048);
    crmm_resource_release(r);
    crmm_config_free(cfg);
    /* refused when the config is loaded, at the line of the parameter, before anything is built */
    ck_assert_crmm(crmm_config_load_string("[resource.h]\nplugin = host\n[resource.b]\nplugin = binning\nupstream = h\n"
                                           "min_size_exponent = 9\n",
                                           "binning.ini", &cfg),
                   CRMM_ERROR_CONFIG);
    ck_assert_msg(strstr(crmm_last_error(), "binning.ini:6: ") && strstr(crmm_last_error(), "max_size_exponent"),
                  "message: %s", crmm_last_error());
}

/* The bins are built from the plugin_path of the config binning is built for, like binning
 * itself: with only the config knowing where plugins are, fixed_size is found there, at create
 * and at add_bin. */
CRMM_TEST_IN("binning", bins_come_from_the_configs_plugin_path)
{
    const char *dirs = getenv("CRMM_PLUGIN_PATH");
    ck_assert_ptr_nonnull(dirs);
    char text[4096];
    ck_assert_int_lt(snprintf(text, sizeof text,
                              "[crmm]\nplugin_path = %s\n[resource.h]\nplugin = host\n[resource.b]\nplugin = binning\n"
                              "upstream = h\nbins = 1KiB\nblocks_to_preallocate = 1\n",
                              dirs),
                     (int)sizeof text);
    setenv("CRMM_PLUGIN_PATH", "/nonexistent", 1);
    crmm_config *cfg;
    ck_assert_crmm_ok(crmm_config_load_string(text, "binning.ini", &cfg));
    crmm_resource *r;
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "b", -1, &r));
    ck_assert_uint_eq(crmm_test_query(r, CRMM_QUERY_BYTES_RESERVED), 1024);
    /* and so are the fixed_size bins add_bin makes later */
    crmm_binning_bin add = {4096, NULL, -1};
    ck_assert_crmm_ok(crmm_resource_control_kind(r, "binning", CRMM_BINNING_OP_ADD_BIN, &add));
    ck_assert_int_eq(add.added, 1);
    ck_assert_uint_eq(crmm_test_query(r, CRMM_QUERY_BYTES_RESERVED), 1024 + 4096);
    crmm_resource_release(r);
    crmm_config_free(cfg);
}

static uint64_t bin_count(void)
{
    uint64_t n = 0;
    ck_assert_crmm_ok(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_BIN_COUNT, &n));
    return n;
}

static crmm_binning_bin get_bin(uint64_t index)
{
    crmm_binning_bin bin = {index, NULL, 0};
    ck_assert_crmm_ok(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_GET_BIN, &bin));
    return bin;
}

/* A trim reaches a bin given to add_bin that keeps free memory of its own (a pool): its free
 * chunk goes back to the host; the binning's own fixed_size bins keep theirs. */
CRMM_TEST_IN("binning", trim_reaches_a_pool_given_as_a_bin)
{
    crmm_resource *pool;
    make("");
    ck_assert_crmm_ok(crmm_resource_create("pool", "initial_size=0", h, &pool));
    crmm_binning_bin add = {1 << 20, pool, -1};
    ck_assert_crmm_ok(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &add));
    ck_assert_int_eq(add.added, 1);
    void *p = crmm_test_allocate(b, 600 << 10); /* above the default bins: from the pool */
    ck_assert_uint_eq(crmm_test_query(pool, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_crmm_ok(crmm_resource_deallocate(b, p, 600 << 10, NULL));
    ck_assert_uint_gt(crmm_test_query(pool, CRMM_QUERY_BYTES_RESERVED), 0);
    ck_assert_crmm_ok(crmm_resource_trim(b));
    ck_assert_uint_eq(crmm_test_query(pool, CRMM_QUERY_BYTES_RESERVED), 0);
    crmm_resource_release(pool);
}

/* add_bin with a resource and without one: kept sorted, each request served by the smallest
 * bin that fits (seen in each bin's own counters), the rest upstream; a size that already has
 * a bin keeps it; destroying the binning releases the bin resources. */
CRMM_TEST_IN("binning", add_bin_routes_to_the_added_bins)
{
    crmm_resource *mine;
    make("");
    ck_assert_crmm_ok(crmm_resource_create("fixed_size", "block_size=4KiB blocks_to_preallocate=1", h, &mine));
    crmm_binning_bin add = {4096, mine, -1};
    ck_assert_crmm_ok(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &add));
    ck_assert_int_eq(add.added, 1);
    ck_assert_int_eq(crmm_resource_refcount(mine), 2); /* ours and the binning's */
    add = (crmm_binning_bin){1000, NULL, -1};          /* a fixed_size bin of 1024 */
    ck_assert_crmm_ok(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &add));
    ck_assert_int_eq(add.added, 1);
    ck_assert_uint_eq(bin_count(), 2);
    crmm_binning_bin small = get_bin(0), large = get_bin(1);
    ck_assert_uint_eq(small.size, 1024);
    ck_assert_str_eq(crmm_resource_kind(small.mr), "fixed_size");
    ck_assert_uint_eq(large.size, 4096);
    ck_assert_ptr_eq(large.mr, mine);

    crmm_resource *other;  /* a second bin of 4 KiB is not added: the first one stays */
    ck_assert_crmm_ok(crmm_resource_create("fixed_size", "block_size=4KiB blocks_to_preallocate=1", h, &other));
    add = (crmm_binning_bin){4000, other, -1};
    ck_assert_crmm_ok(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &add));
    ck_assert_int_eq(add.added, 0);
    ck_assert_int_eq(crmm_resource_refcount(other), 1);
    ck_assert_ptr_eq(get_bin(1).mr, mine);
    crmm_resource_release(other);

    void *p[5];
    size_t sizes[5] = {1, 1024, 1025, 4096, 4097};
    for (int i = 0; i < 5; i++)
        ck_assert_crmm_ok(crmm_resource_allocate(b, sizes[i], NULL, &p[i]));
    ck_assert_uint_eq(crmm_test_query(small.mr, CRMM_QUERY_ALLOCATIONS), 2);
    ck_assert_uint_eq(crmm_test_query(mine, CRMM_QUERY_ALLOCATIONS), 2);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_ALLOCATIONS), 5); /* 2 + 2 + one upstream */
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_UPSTREAM_BLOCKS),
                      crmm_test_query(small.mr, CRMM_QUERY_UPSTREAM_BLOCKS) + crmm_test_query(mine, CRMM_QUERY_UPSTREAM_BLOCKS) + 1);
    for (int i = 0; i < 5; i++)
        ck_assert_crmm_ok(crmm_resource_deallocate(b, p[i], sizes[i], NULL));
    ck_assert_uint_eq(crmm_test_query(mine, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_ALLOCATIONS), 0);

    release_binning();
    ck_assert_int_eq(crmm_resource_refcount(mine), 1);
    crmm_resource_release(mine);
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
}

/* A block passed upstream before a bin of its size was added goes back upstream at its free,
 * not to the new bin (which never handed it out); blocks allocated after go to the bin. */
CRMM_TEST_IN("binning", a_block_passed_upstream_before_its_bin_was_added_is_freed_upstream)
{
    make("");
    void *early[2], *late;
    ck_assert_crmm_ok(crmm_resource_allocate(b, 3000, NULL, &early[0]));
    ck_assert_crmm_ok(crmm_resource_allocate(b, 100, NULL, &early[1]));
    crmm_binning_bin add = {4096, NULL, -1};
    ck_assert_crmm_ok(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &add));
    ck_assert_crmm_ok(crmm_resource_allocate(b, 3000, NULL, &late));
    crmm_resource *bin = get_bin(0).mr;
    ck_assert_uint_eq(crmm_test_query(bin, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_crmm_ok(crmm_resource_deallocate(b, early[0], 3000, NULL));
    ck_assert_crmm(crmm_resource_deallocate(b, early[0], 3000, NULL), CRMM_ERROR_INVALID_ARGUMENT); /* twice: refused */
    ck_assert_crmm_ok(crmm_resource_deallocate(b, early[1], 100, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(b, late, 3000, NULL));
    ck_assert_uint_eq(crmm_test_query(bin, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_ALLOCATIONS), 0);
    release_binning();
    ck_assert_uint_eq(crmm_test_query(h, CRMM_QUERY_BYTES_IN_USE), 0);
}

/* A bin added in front of a bin with blocks live would take over some of their sizes, and their
 * frees, routed by size, would reach the new bin, which never made them: add_bin refuses it with
 * nothing added, for a fixed_size bin and for a bin the caller gave. A larger bin (taking sizes
 * from the upstream) is still added, and once the blocks are freed the smaller bin is too. */
CRMM_LOOP_TEST_IN("binning", add_bin_never_takes_the_sizes_of_blocks_live_in_another_bin, 2)
{
    const bool given = _i == 1; /* the 4 KiB bin: fixed_size (0), a host resource the caller gives (1) */
    crmm_resource *mine = NULL;
    if (given) {
        make("");
        ck_assert_crmm_ok(crmm_resource_create("host", "", NULL, &mine));
        crmm_binning_bin add = {4096, mine, -1};
        ck_assert_crmm_ok(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &add));
    } else {
        make("bins=4KiB blocks_to_preallocate=1");
    }
    crmm_resource *bin4k = get_bin(0).mr;
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(b, 1000, NULL, &p));
    ck_assert_uint_eq(crmm_test_query(bin4k, CRMM_QUERY_ALLOCATIONS), 1);

    crmm_binning_bin small = {1024, NULL, -1};
    ck_assert_crmm(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &small), CRMM_ERROR_STATE);
    ck_assert_msg(strstr(crmm_last_error(), "add_bin") && strstr(crmm_last_error(), "4096") &&
                      strstr(crmm_last_error(), "1 block live"),
                  "message: %s", crmm_last_error());
    ck_assert_int_eq(small.added, 0);
    ck_assert_uint_eq(bin_count(), 1);
    crmm_binning_bin large = {8192, NULL, -1}; /* takes sizes from the upstream only */
    ck_assert_crmm_ok(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &large));
    ck_assert_int_eq(large.added, 1);

    ck_assert_crmm_ok(crmm_resource_deallocate(b, p, 1000, NULL)); /* back to the bin that made it */
    ck_assert_uint_eq(crmm_test_query(bin4k, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_crmm_ok(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &small));
    ck_assert_int_eq(small.added, 1);
    ck_assert_crmm_ok(crmm_resource_allocate(b, 1000, NULL, &p));
    ck_assert_uint_eq(crmm_test_query(get_bin(0).mr, CRMM_QUERY_ALLOCATIONS), 1); /* the new bin serves it */
    ck_assert_uint_eq(crmm_test_query(bin4k, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_crmm_ok(crmm_resource_deallocate(b, p, 1000, NULL));
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_ALLOCATIONS), 0);
    release_binning();
    if (mine)
        crmm_resource_release(mine);
    ck_assert_uint_eq(crmm_test_query(h, CRMM_QUERY_BYTES_IN_USE), 0);
}

/* The binning's own upstream as a bin (RMM's ExplicitBinMR test) sends its requests up as the
 * large ones are: they are counted once, not again as that bin's (whose counts are the upstream's
 * own, the other bins' chunks included), a smaller bin may still be added in front of it, and
 * its early blocks go back upstream. A resource given for two bins is counted once too. */
CRMM_TEST_IN("binning", the_upstream_or_one_resource_as_several_bins_is_counted_once)
{
    make("bins=256 blocks_to_preallocate=1");
    crmm_binning_bin add = {1024, h, -1};
    ck_assert_crmm_ok(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &add));
    ck_assert_int_eq(add.added, 1);
    void *p, *q;
    ck_assert_crmm_ok(crmm_resource_allocate(b, 512, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_allocate(b, 100, NULL, &q)); /* the 256 bin */
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_ALLOCATIONS), 2);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_BYTES_IN_USE), 512 + 100);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_BYTES_RESERVED), 256 + 512);
    crmm_binning_bin small = {512, NULL, -1};
    ck_assert_crmm_ok(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &small));
    ck_assert_int_eq(small.added, 1);
    ck_assert_crmm_ok(crmm_resource_deallocate(b, p, 512, NULL)); /* upstream, not the new bin */
    ck_assert_crmm_ok(crmm_resource_deallocate(b, q, 100, NULL));
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_BYTES_IN_USE), 0);
    release_binning();

    crmm_resource *shared = crmm_test_create("fixed_size", "block_size=4KiB blocks_to_preallocate=4", h);
    ck_assert_crmm_ok(crmm_resource_create("binning", "", h, &b));
    crmm_binning_bin twice[2] = {{2048, shared, -1}, {4096, shared, -1}};
    for (int i = 0; i < 2; i++)
        ck_assert_crmm_ok(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &twice[i]));
    ck_assert_crmm_ok(crmm_resource_allocate(b, 3000, NULL, &p));
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_BYTES_RESERVED), 4 * 4096);
    ck_assert_crmm_ok(crmm_resource_deallocate(b, p, 3000, NULL));
    release_binning();
    crmm_resource_release(shared);
}

/* A block passed upstream before its bin was added, whose free the upstream refuses, stays the
 * upstream's: freed again once the upstream takes frees, it still goes upstream, not to the bin
 * (which would refuse it, leaving it live for good). */
CRMM_TEST_IN("binning", a_refused_free_of_a_block_passed_up_before_its_bin_goes_upstream_again)
{
    probe_resource *up = probe_resource_new(NULL, CRMM_RESOURCE_HOST_ACCESSIBLE, -1);
    ck_assert_crmm_ok(crmm_resource_create("binning", "", &up->base, &b));
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(b, 3000, NULL, &p));
    crmm_binning_bin add = {4096, NULL, -1};
    ck_assert_crmm_ok(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &add));
    up->refuses_frees = 1;
    ck_assert_crmm(crmm_resource_deallocate(b, p, 3000, NULL), CRMM_ERROR_CUDA);
    ck_assert_int_eq(up->live, 2); /* the block and the bin's chunk */
    up->refuses_frees = 0;
    ck_assert_crmm_ok(crmm_resource_deallocate(b, p, 3000, NULL));
    ck_assert_int_eq(up->live, 1);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_ALLOCATIONS), 0);
    release_binning();
    ck_assert_int_eq(up->live, 0);
    crmm_resource_release(&up->base);
}

/* A large block freed with more bytes than it was allocated with, over an upstream that takes any
 * size (as cuda's free does), leaves the counts at zero instead of wrapping them to ~2^64. */
CRMM_TEST_IN("binning", a_wrong_size_free_of_a_large_block_leaves_the_counts_at_zero)
{
    probe_resource *up = probe_resource_new(NULL, CRMM_RESOURCE_HOST_ACCESSIBLE, -1);
    ck_assert_crmm_ok(crmm_resource_create("binning", "", &up->base, &b));
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(b, 10000, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(b, p, 20000, NULL));
    ck_assert_int_eq(up->live, 0);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_BYTES_RESERVED), 0);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_ALLOCATIONS), 0);
    release_binning();
    crmm_resource_release(&up->base);
}

/* A resource of memory that `flags` says who can reach (a probe: the tests only add it as a bin). */
static crmm_resource *reached_by(unsigned flags) { return &probe_resource_new(NULL, flags, 0)->base; }

/* add_bin refuses a NULL argument, sizes of 0 and above 2^63, and a bin whose memory the
 * binning's users could not use (device-only memory under a host binning); nothing added or
 * retained. */
CRMM_TEST_IN("binning", add_bin_refuses_bad_input)
{
    make("bins=256 blocks_to_preallocate=1");
    ck_assert_crmm(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    uint64_t bad_sizes[] = {0, ((uint64_t)1 << 63) + 1, UINT64_MAX};
    for (int i = 0; i < 3; i++) {
        crmm_binning_bin add = {bad_sizes[i], NULL, -1};
        ck_assert_crmm(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &add), CRMM_ERROR_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(crmm_last_error(), "add_bin"));
    }
    crmm_resource *device_only = reached_by(CRMM_RESOURCE_DEVICE_ACCESSIBLE);
    crmm_binning_bin add = {4096, device_only, -1};
    ck_assert_crmm(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &add), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(crmm_resource_refcount(device_only), 1);
    crmm_resource_release(device_only);
    ck_assert_uint_eq(bin_count(), 1);
    /* the binning itself, or a resource over it, as a bin: every request would route to itself */
    crmm_binning_bin itself = {4096, b, -1};
    ck_assert_crmm(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &itself), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "the binning itself"));
    crmm_resource *over = NULL;
    ck_assert_crmm_ok(crmm_resource_create("statistics", NULL, b, &over));
    crmm_binning_bin above = {4096, over, -1};
    ck_assert_crmm(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &above), CRMM_ERROR_INVALID_ARGUMENT);
    crmm_resource_release(over);
    /* nor a binning that has this one as a bin */
    crmm_resource *other = NULL;
    ck_assert_crmm_ok(crmm_resource_create("binning", NULL, h, &other));
    crmm_binning_bin into = {4096, b, -1};
    ck_assert_crmm_ok(crmm_resource_control_kind(other, "binning", CRMM_BINNING_OP_ADD_BIN, &into));
    crmm_binning_bin back = {8192, other, -1};
    ck_assert_crmm(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &back), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "calls into it"));
    crmm_resource_release(other);
    ck_assert_int_eq(crmm_resource_refcount(b), 1);
    ck_assert_uint_eq(bin_count(), 1);
    crmm_binning_bin out_of_range = {1, NULL, 0};
    ck_assert_crmm(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_GET_BIN, &out_of_range), CRMM_ERROR_INVALID_ARGUMENT);
    release_binning();
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
}

/* A bin that serves less than the binning promised (a device-only bin under a binning of memory
 * both sides reach, as RMM's suite puts a cuda bin under a binning of managed memory) is taken,
 * and the binning then promises only what both give; nothing in common is still refused. */
CRMM_TEST_IN("binning", add_bin_narrows_what_the_binning_promises)
{
    crmm_resource *both = reached_by(CRMM_RESOURCE_DEVICE_ACCESSIBLE | CRMM_RESOURCE_HOST_ACCESSIBLE);
    crmm_resource *device_only = reached_by(CRMM_RESOURCE_DEVICE_ACCESSIBLE);
    crmm_resource *host_only = reached_by(CRMM_RESOURCE_HOST_ACCESSIBLE);
    ck_assert_crmm_ok(crmm_resource_create("binning", "", both, &b));
    ck_assert_uint_eq(b->flags, CRMM_RESOURCE_DEVICE_ACCESSIBLE | CRMM_RESOURCE_HOST_ACCESSIBLE);
    crmm_binning_bin add = {8192, device_only, -1};
    ck_assert_crmm_ok(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &add));
    ck_assert_int_eq(add.added, 1);
    ck_assert_uint_eq(b->flags, CRMM_RESOURCE_DEVICE_ACCESSIBLE);
    crmm_binning_bin add_host = {16384, host_only, -1};
    ck_assert_crmm(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &add_host), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(crmm_resource_refcount(host_only), 1);
    ck_assert_uint_eq(bin_count(), 1);
    release_binning();
    ck_assert_int_eq(crmm_resource_refcount(device_only), 1);
    ck_assert_int_eq(crmm_resource_refcount(both), 1);
    crmm_test_release(host_only, device_only, both);
}

/* A bin that cannot say how many blocks it has live (a probe answers no query) may have some, so
 * a smaller bin in front of it is refused as one in front of a bin with blocks live. */
CRMM_TEST_IN("binning", add_bin_refuses_to_take_sizes_from_a_bin_that_cannot_count)
{
    make("");
    crmm_resource *uncounted = &probe_resource_new(NULL, CRMM_RESOURCE_HOST_ACCESSIBLE, h->device)->base;
    crmm_binning_bin add = {4096, uncounted, -1};
    ck_assert_crmm_ok(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &add));
    crmm_binning_bin small = {1024, NULL, -1};
    ck_assert_crmm(crmm_resource_control_kind(b, "binning", CRMM_BINNING_OP_ADD_BIN, &small), CRMM_ERROR_STATE);
    ck_assert_msg(strstr(crmm_last_error(), "cannot say"), "message: %s", crmm_last_error());
    ck_assert_uint_eq(bin_count(), 1);
    release_binning();
    ck_assert_int_eq(crmm_resource_refcount(uncounted), 1);
    crmm_resource_release(uncounted);
}

int main(void)
{
    Suite *s = suite_create("binning");
    crmm_conformance_add(s, chains, (int)(sizeof chains / sizeof chains[0]));
    TCase *tc = crmm_test_tcase(s, "binning", 0);
    tcase_add_checked_fixture(tc, NULL, teardown);
    return crmm_test_run(s);
}
