/* check_pool_growth.c — the `pool` plugin on the CPU: how it grows, halves and trims over the
 * scripted upstream (pool_test.h), random use checked against a model, and an 8-thread stress over
 * host. $CRMM_TEST_POOL_STRESS_OPS sets the operations per stress thread (default 100000; 20000 in
 * a sanitizer build). */
#include "build_config.h"
#include "churn_support.h"
#include "pool_test.h"

/* ---- growth -------------------------------------------------------------------------------- */

/* How the pool grows over the scripted upstream: its requests in turn, and the sizes it asked of
 * the upstream for them, in order (the initial chunk first; a request that fits asks nothing). */
static const struct growth {
    const char *params;
    size_t initial, refuse_above;   /* the upstream refuses requests above refuse_above (0: none) */
    size_t requests[6], asked[8];   /* each up to a 0 */
    size_t reserved;                /* after the requests */
    unsigned chunks;
    const char *out_of_memory;      /* when set: 4 MiB more then fails, saying this */
} growths[] = {
    /* no maximum: doubles: 256 B grows by max(256 B, 1 MiB), 2 MiB by max(2 MiB, 2 MiB), 1 B fits
     * in the second chunk, 5 MiB grows by max(5 MiB, 4 MiB) */
    {"initial_size=1MiB", MiB, 0, {MiB, 256, 2 * MiB, 1, 5 * MiB}, {MiB, MiB, 2 * MiB, 5 * MiB}, 9 * MiB, 4, NULL},
    /* half the room below the maximum: 1 KiB grows by max(1 KiB, 8 MiB / 2); 4 MiB does not fit the
     * 4 MiB - 1 KiB free: max(4 MiB, 4 MiB / 2); 256 B fits; the maximum forbids more (upstream is
     * not asked) */
    {"initial_size=1MiB maximum_size=9MiB", MiB, 0, {MiB, KiB, 4 * MiB, 256}, {MiB, 4 * MiB, 4 * MiB}, 9 * MiB, 3,
     "out of memory: pool: failed to allocate 4.0 MiB (pool size 9.0 MiB, maximum 9.0 MiB)"},
    /* the upstream refuses above 3 MiB, and growth halves: 512 KiB tries 3 MiB; 3 MiB does not fit
     * the 2.5 MiB free: 6 MiB (refused), 3 MiB; 2500 KiB fits; 100 KiB tries 9 MiB, 4.5 MiB (refused),
     * 2.25 MiB; a request the upstream can never grant: halving stops at the request */
    {"initial_size=3MiB", 3 * MiB, 3 * MiB, {3 * MiB, 512 * KiB, 3 * MiB, 2500 * KiB, 100 * KiB},
     {3 * MiB, 3 * MiB, 6 * MiB, 3 * MiB, 9 * MiB, 9 * MiB / 2, 9 * MiB / 4}, 45 * MiB / 4, 4,
     "pool: failed to allocate 4.0 MiB (pool size 11.2 MiB, no maximum): upstream: script: refused"},
    /* initial_size = 0 grows on demand: max(request, pool size 0), then doubles: max(1 KiB, 1 KiB) */
    {"initial_size=0", 0, 0, {1000, 1000}, {1024, 1024}, 2 * KiB, 2, NULL},
};

CRMM_LOOP_TEST_IN("pool_growth", growth_asks_the_upstream_for, (int)(sizeof growths / sizeof growths[0]))
{
    const struct growth *g = &growths[_i];
    script_upstream *u = script_new(64 * MiB, g->refuse_above);
    crmm_resource *p = make_pool(g->params, &u->base);
    ck_assert_int_eq(u->nasked, g->initial != 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), g->initial);
    void *got[6];
    int n = 0, asks = 0;
    size_t held = 0;
    for (; n < 6 && g->requests[n]; n++) {
        got[n] = alloc(p, g->requests[n]);
        held += (g->requests[n] + 255) & ~(size_t)255;
    }
    while (asks < 8 && g->asked[asks])
        asks++;
    ck_assert_int_eq(u->nasked, asks);
    for (int k = 0; k < asks; k++)
        ck_assert_uint_eq(u->asked[k], g->asked[k]);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), g->reserved);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), g->chunks);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), g->reserved - held);
    if (g->out_of_memory) {
        void *x = (void *)0x1;
        crmm_clear_error();
        ck_assert_crmm(crmm_resource_allocate(p, 4 * MiB, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
        ck_assert_ptr_null(x);
        ck_assert_msg(strstr(crmm_last_error(), g->out_of_memory), "%s", crmm_last_error());
        if (g->refuse_above) /* the upstream refused the request itself */
            ck_assert_uint_eq(u->asked[u->nasked - 1], 4 * MiB);
        else /* the maximum forbade it: upstream was not asked */
            ck_assert_int_eq(u->nasked, asks);
        ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED_PEAK), g->reserved);
    }
    for (int k = 0; k < n; k++)
        release(p, got[k], g->requests[k]);
    crmm_resource_release(p);
}

CRMM_TEST_IN("pool_growth", growth_with_maximum_never_passes_it)
{
    /* odd maximum; random churn; reserved never passes it, and a request that fits the room is
     * granted as long as the upstream has it */
    crmm_resource *p = make_pool("initial_size=256KiB maximum_size=7MiB", host_upstream());
    enum { LIVE = 40 };
    void *live[LIVE] = {0};
    size_t size[LIVE] = {0};
    uint64_t seed = 5;
    for (int step = 0; step < 5000; step++) {
        int k = (int)(crmm_test_rand(&seed) % LIVE);
        if (live[k]) {
            release(p, live[k], size[k]);
            live[k] = NULL;
        } else {
            size[k] = 1 + crmm_test_rand(&seed) % (256 * KiB);
            crmm_status st = crmm_resource_allocate(p, size[k], NULL, &live[k]);
            ck_assert_msg(st == CRMM_OK || st == CRMM_ERROR_OUT_OF_MEMORY, "%s", crmm_last_error());
        }
        ck_assert_uint_le(q(p, CRMM_QUERY_BYTES_RESERVED), 7 * MiB);
    }
    for (int k = 0; k < LIVE; k++)
        if (live[k])
            release(p, live[k], size[k]);
    ck_assert_uint_le(q(p, CRMM_QUERY_BYTES_RESERVED_PEAK), 7 * MiB);
    crmm_resource_release(p);
}

CRMM_TEST_IN("pool_growth", one_pib_names_the_sizes)
{
    crmm_resource *p = make_pool("initial_size=1MiB", host_upstream());
    void *x = (void *)0x1;
    ck_assert_crmm(crmm_resource_allocate(p, (size_t)1 << 50, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(x);
    ck_assert_msg(strstr(crmm_last_error(), "out of memory: pool: failed to allocate 1.0 PiB (pool size 1.0 MiB, no maximum)"),
                  "%s", crmm_last_error());
    ck_assert_crmm(crmm_resource_allocate(p, SIZE_MAX - 10, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(x);
    crmm_resource_release(p);

    p = make_pool("initial_size=1GiB maximum_size=8GiB", host_upstream());
    ck_assert_crmm(crmm_resource_allocate(p, (size_t)1 << 50, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_msg(strstr(crmm_last_error(), "failed to allocate 1.0 PiB (pool size 1.0 GiB, maximum 8.0 GiB)"), "%s",
                  crmm_last_error());
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), (uint64_t)1 << 30);
    crmm_resource_release(p);
}

CRMM_TEST_IN("pool_growth", growth_right_when_block_records_run_out)
{
    /* Block records come in slabs; each split takes one. Grow the pool at every count of spare
     * records around a slab's size, so that growth meets an empty spare list at least once. */
    for (int k = 200; k < 300; k++) {
        crmm_resource *p = make_pool("initial_size=1MiB", host_upstream());
        void *small[300];
        for (int i = 0; i < k; i++)
            small[i] = alloc(p, 256);
        void *big = alloc(p, MiB - KiB); /* does not fit: grows by 1 MiB, then splits the new chunk */
        ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 2);
        void *more = alloc(p, 256);
        free_all(p, {big, MiB - KiB}, {more, 256});
        for (int i = 0; i < k; i++)
            release(p, small[i], 256);
        ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
        crmm_resource_release(p);
    }
}

/* ---- random use against a model ---------------------------------------------------------- */

typedef struct live_block { uintptr_t p; size_t n; unsigned char tag; } live_block;

CRMM_TEST_IN("pool_blocks", random_use_keeps_the_books)
{
    crmm_resource *p = make_pool("initial_size=512KiB", host_upstream());
    enum { LIVE = 300 };
    live_block live[LIVE];
    int n = 0;
    uint64_t seed = 77, rounded = 0;
    for (int step = 0; step < 20000; step++) {
        uint64_t r = crmm_test_rand(&seed);
        if (n == 0 || (n < LIVE && (r & 1))) {
            size_t size = 1 + crmm_test_rand(&seed) % ((r >> 8) % 8 == 0 ? 256 * KiB : 2 * KiB);
            void *x = alloc(p, size);
            for (int k = 0; k < n; k++) /* no overlap with any live block */
                ck_assert(live[k].p + live[k].n <= (uintptr_t)x || (uintptr_t)x + size <= live[k].p);
            live[n] = (live_block){(uintptr_t)x, size, (unsigned char)r};
            memset(x, live[n].tag, size);
            rounded += (size + 255) & ~(size_t)255;
            n++;
        } else {
            int k = (int)((r >> 16) % (uint64_t)n);
            const unsigned char *b = (const unsigned char *)live[k].p;
            for (size_t i = 0; i < live[k].n; i += 61)
                ck_assert_uint_eq(b[i], live[k].tag);
            ck_assert_uint_eq(b[live[k].n - 1], live[k].tag);
            release(p, (void *)live[k].p, live[k].n);
            rounded -= (live[k].n + 255) & ~(size_t)255;
            live[k] = live[--n];
        }
        if (step % 97 == 0) {
            ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE) + rounded, q(p, CRMM_QUERY_BYTES_RESERVED));
            ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), (uint64_t)n);
            ck_assert_uint_le(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), q(p, CRMM_QUERY_BYTES_FREE));
        }
    }
    while (n > 0) {
        n--;
        release(p, (void *)live[n].p, live[n].n);
    }
    /* everything merged back: each chunk is one free block, and trim gives all of them back */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 0);
    void *x = alloc(p, 100); /* and it grows again from nothing */
    release(p, x, 100);
    crmm_resource_release(p);
}

/* ---- stress ------------------------------------------------------------------------------- */

static int stress_ops(void)
{
    const char *env = getenv("CRMM_TEST_POOL_STRESS_OPS");
    if (env && atoi(env) > 0)
        return atoi(env);
    return churn_stress_steps();
}

CRMM_TEST_IN("pool_stress", eight_threads_stress)
{
    crmm_resource *p = make_pool("initial_size=1MiB", host_upstream());
    enum { T = 8 };
    pthread_t t[T];
    churn a[T];
    for (int k = 0; k < T; k++) {
        a[k] = (churn){.mr = p, .seed = 1234 + (uint64_t)k, .steps = stress_ops(), .slots = 64, .size = 2 * KiB,
                       .big_size = 64 * KiB, .big_one_in = 64};
        ck_assert_int_eq(pthread_create(&t[k], NULL, churn_thread, &a[k]), 0);
    }
    uint64_t made = 0;
    for (int k = 0; k < T; k++) {
        ck_assert_int_eq(pthread_join(t[k], NULL), 0);
        ck_assert_msg(!a[k].why[0] && !a[k].overlapped, "thread %d: %s; %d blocks overwritten", k, a[k].why, a[k].overlapped);
        made += a[k].allocations;
    }
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS_TOTAL), made);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    crmm_resource_release(p);
}

int main(void)
{
    return CRMM_TEST_MAIN_CASES("pool_growth", {"pool_blocks", 0}, {"pool_growth", 0}, {"pool_stress", 120});
}
