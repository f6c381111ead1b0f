/* check_bad_frees.c — wrong-size, double and foreign frees over host memory: every stack refuses
 * them with CRMM_ERROR_INVALID_ARGUMENT where it can tell, never passes them on to free() or to
 * a bin's upstream, and its counters never wrap; the block stays live and its right free works. */
#include "build_config.h"
#include <string.h>
#include "test_support.h"

static uint64_t in_use(crmm_resource *mr) { return crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE); }

static _Alignas(256) char foreign[256]; /* memory no resource handed out */

/* Host memory, and the pool without caches under a statistics layer (_i = 1; which must never read
 * a wrapped count): a free with another size than the one asked for is refused, the block stays
 * live and counted, and its right free works; a second free and a foreign pointer are refused. */
CRMM_LOOP_TEST(host_and_pool_refuse_wrong_size_double_and_foreign, 2)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL), *below = host, *mr = host;
    if (_i) {
        below = crmm_test_create("pool", "initial_size=1MiB thread_cache=off", host);
        mr = crmm_test_create("statistics", NULL, below);
    }
    void *p = crmm_test_allocate(mr, 100);
    ck_assert_crmm(crmm_resource_deallocate(mr, p, 1000, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_error_contains("block of 100 bytes");
    ck_assert_crmm(crmm_resource_deallocate(mr, p, 99, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(mr, p, 256, NULL), CRMM_ERROR_INVALID_ARGUMENT); /* the pool's rounded size */
    ck_assert_uint_eq(in_use(mr), 100);
    ck_assert_uint_eq(in_use(below), 100);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 100, NULL));
    ck_assert_uint_eq(in_use(mr), 0);
    ck_assert_uint_eq(in_use(below), 0);
    ck_assert_crmm(crmm_resource_deallocate(mr, p, 100, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_error_contains(_i ? "is already free" : "not a live block");
    ck_assert_crmm(crmm_resource_deallocate(mr, foreign, sizeof foreign, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(in_use(mr), 0);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    if (_i)
        crmm_test_release(mr, below);
    crmm_resource_release(host);
}

/* The adaptors over host: a wrong size is refused below them and counted by none. */
static const struct { const char *plugin, *params; } adaptors[] = {
    {"statistics", NULL},
    {"failure_callback", NULL},
    {"aligned", "alignment=4096"},   /* the block is moved: its mapping must survive the refusal */
    {"aligned", "alignment=256"},
    {"logging", "file=/dev/null"},
    {"tracking", NULL},
};

CRMM_LOOP_TEST(adaptor_over_host_refuses_wrong_size, (int)(sizeof adaptors / sizeof adaptors[0]))
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    crmm_resource *mr = crmm_test_create(adaptors[_i].plugin, adaptors[_i].params, host);
    void *p = crmm_test_allocate(mr, 100);
    ck_assert_crmm(crmm_resource_deallocate(mr, p, 1 << 20, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_le(in_use(mr), 4096 + 100);
    ck_assert_uint_ge(in_use(mr), 100);
    ck_assert_uint_ge(in_use(host), 100);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 100, NULL));
    ck_assert_uint_eq(in_use(mr), 0);
    ck_assert_uint_eq(in_use(host), 0);
    ck_assert_crmm(crmm_resource_deallocate(mr, p, 100, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(in_use(mr), 0);
    crmm_test_release(mr, host);
}

/* fixed_size cannot tell a smaller size within its block from the right one: it frees the block
 * and its counters stop at zero; a size above the block, a second free and a foreign pointer are
 * refused. */
CRMM_TEST(fixed_size_counters_do_not_wrap)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    crmm_resource *mr = crmm_test_create("fixed_size", "block_size=1024 blocks_to_preallocate=4", host);
    void *p = crmm_test_allocate(mr, 100);
    ck_assert_crmm(crmm_resource_deallocate(mr, p, 2000, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(in_use(mr), 100);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1000, NULL));
    ck_assert_uint_eq(in_use(mr), 0);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_crmm(crmm_resource_deallocate(mr, p, 100, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(mr, foreign, sizeof foreign, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(in_use(mr), 0);
    crmm_test_release(mr, host);
}

/* The arena's small blocks keep no size either: a wrong size within the block's class frees the
 * block and the bytes in use stop at zero; a size of another class, a second free and a foreign
 * pointer are refused. */
CRMM_TEST(arena_counters_do_not_wrap)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    crmm_resource *mr = crmm_test_create("arena", "arena_size=4MiB", host);
    void *p = crmm_test_allocate(mr, 8);
    ck_assert_crmm(crmm_resource_deallocate(mr, p, 100000, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(in_use(mr), 8);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 200, NULL)); /* the same 256-byte class */
    ck_assert_uint_eq(in_use(mr), 0);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_crmm(crmm_resource_deallocate(mr, p, 8, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(mr, foreign, sizeof foreign, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(in_use(mr), 0);
    crmm_test_release(mr, host);
}

/* A bin's block freed with another bin's size or with a size above the largest bin is refused
 * (before: the large one went upstream, which freed part of the bin's chunk); a large block
 * freed with a bin's size is refused by the bin; the right frees work afterwards. */
CRMM_TEST(binning_never_sends_a_bin_block_upstream)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    crmm_resource *mr = crmm_test_create("binning", "bins=256:4KiB blocks_to_preallocate=4", host);
    void *small = crmm_test_allocate(mr, 200);
    void *large = crmm_test_allocate(mr, 1 << 20);
    uint64_t host_before = in_use(host);
    ck_assert_crmm(crmm_resource_deallocate(mr, small, 1 << 20, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(mr, small, 4096, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(mr, large, 200, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(mr, large, 2 << 20, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(in_use(host), host_before);
    ck_assert_uint_eq(in_use(mr), 200 + (1 << 20));
    /* the bin still hands out its other blocks, distinct from the live one */
    void *other = crmm_test_allocate(mr, 200);
    ck_assert_ptr_ne(other, small);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, other, 200, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, small, 200, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, large, 1 << 20, NULL));
    ck_assert_crmm(crmm_resource_deallocate(mr, large, 1 << 20, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(in_use(mr), 0);
    crmm_test_release(mr, host);
}

int main(void)
{
    return crmm_test_main("bad_frees", 0);
}
