/* check_try_ops.c — the calls without waiting (crmm_resource_try_allocate / _try_deallocate)
 * over host memory. The pool serves them from the blocks it holds exactly as allocate and
 * deallocate would (same block, same counts), and leaves everything as it was, with no error,
 * whenever the ordinary call would have had to do more: a miss that grows, a free that must be
 * refused, the pool's lock held by another thread (here by a growth whose upstream is made to
 * wait), per-thread caches on, a resource without the ops. The statistics and limiting
 * adaptors pass them to their upstream and count only what it served; a request past the limit
 * is left to allocate. */
#include "build_config.h"
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <crmm/crmm.h>
#include "probe_resource.h"
#include "test_support.h"

static uint64_t query(crmm_resource *mr, crmm_query what)
{
    uint64_t v = 0;
    ck_assert_crmm_ok(crmm_resource_query(mr, what, &v));
    return v;
}

static crmm_resource *pool_over(crmm_resource *upstream, const char *params)
{
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(crmm_resource_create("pool", params, upstream, &mr));
    return mr;
}

static crmm_resource *host_pool(const char *params)
{
    crmm_resource *host = NULL;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &host));
    crmm_resource *mr = pool_over(host, params);
    crmm_resource_release(host);
    return mr;
}

CRMM_TEST(a_block_the_pool_holds_is_served_and_freed_at_once)
{
    crmm_resource *mr = host_pool("initial_size=1MiB");
    void *p = NULL;
    ck_assert(crmm_resource_try_allocate(mr, 1000, NULL, &p));
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq((uintptr_t)p % CRMM_ALLOCATION_ALIGNMENT, 0);
    ck_assert_uint_eq(query(mr, CRMM_QUERY_BYTES_IN_USE), 1000);
    ck_assert_uint_eq(query(mr, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_uint_eq(query(mr, CRMM_QUERY_BYTES_RESERVED), 1 << 20);
    ck_assert(crmm_resource_try_deallocate(mr, p, 1000, NULL));
    ck_assert_uint_eq(query(mr, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(query(mr, CRMM_QUERY_ALLOCATIONS_TOTAL), 1);
    ck_assert_uint_eq(query(mr, CRMM_QUERY_LARGEST_FREE_BLOCK), 1 << 20); /* merged back whole */
    void *again = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 1000, NULL, &again));
    ck_assert_ptr_eq(again, p); /* the ordinary call finds the block where the try left it */
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, again, 1000, NULL));
    crmm_resource_release(mr);
}

CRMM_TEST(what_the_pool_must_grow_for_is_left_to_allocate)
{
    crmm_resource *mr = host_pool("initial_size=1MiB");
    crmm_clear_error();
    void *p = &p;
    ck_assert(!crmm_resource_try_allocate(mr, 2 << 20, NULL, &p));
    ck_assert_ptr_eq(p, &p); /* untouched */
    ck_assert_int_eq(crmm_last_status(), CRMM_OK);
    ck_assert_uint_eq(query(mr, CRMM_QUERY_BYTES_RESERVED), 1 << 20);
    ck_assert_uint_eq(query(mr, CRMM_QUERY_ALLOCATIONS_TOTAL), 0);
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 2 << 20, NULL, &p)); /* grows */
    ck_assert_uint_gt(query(mr, CRMM_QUERY_BYTES_RESERVED), 2 << 20);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 2 << 20, NULL));
    crmm_resource_release(mr);
}

CRMM_TEST(frees_the_pool_must_refuse_are_left_to_deallocate)
{
    crmm_resource *mr = host_pool("initial_size=1MiB");
    void *p = NULL, *stranger = aligned_alloc(CRMM_ALLOCATION_ALIGNMENT, 4096);
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 1000, NULL, &p));
    crmm_clear_error();
    ck_assert(!crmm_resource_try_deallocate(mr, p, 999, NULL));                 /* wrong size */
    ck_assert(!crmm_resource_try_deallocate(mr, (char *)p + 256, 744, NULL));   /* inside the block */
    ck_assert(!crmm_resource_try_deallocate(mr, stranger, 4096, NULL));         /* never the pool's */
    ck_assert_int_eq(crmm_last_status(), CRMM_OK);
    ck_assert_uint_eq(query(mr, CRMM_QUERY_BYTES_IN_USE), 1000); /* still live */
    ck_assert_crmm(crmm_resource_deallocate(mr, p, 999, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1000, NULL));
    ck_assert(!crmm_resource_try_deallocate(mr, p, 1000, NULL)); /* a double free */
    ck_assert_crmm(crmm_resource_deallocate(mr, p, 1000, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(query(mr, CRMM_QUERY_BYTES_IN_USE), 0);
    free(stranger);
    crmm_resource_release(mr);
}

/* An upstream whose allocations wait, once armed, until the test lets them go. */
static int armed, waiting, let_go;

static crmm_status waiting_get(void **ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    (void)stream;
    if (__atomic_load_n(&armed, __ATOMIC_SEQ_CST)) {
        __atomic_store_n(&waiting, 1, __ATOMIC_SEQ_CST);
        while (!__atomic_load_n(&let_go, __ATOMIC_SEQ_CST))
            sched_yield();
    }
    *ptr = aligned_alloc(CRMM_ALLOCATION_ALIGNMENT, (bytes + 255) & ~(size_t)255);
    return *ptr ? CRMM_OK : CRMM_ERROR_OUT_OF_MEMORY;
}

static crmm_status waiting_put(void *ptr, crmm_cuda_stream_t stream)
{
    (void)stream;
    free(ptr);
    return CRMM_OK;
}

static const probe_memory waiting_memory = {.get = waiting_get, .put = waiting_put};

static void *grow(void *mr)
{
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 4 << 20, NULL, &p));
    return p;
}

CRMM_TEST(nothing_waits_for_the_lock_of_a_growth_under_way)
{
    probe_resource *up = probe_resource_new(&waiting_memory, CRMM_RESOURCE_HOST_ACCESSIBLE, -1);
    crmm_resource *mr = pool_over(&up->base, "initial_size=1MiB");
    void *held = NULL, *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 256, NULL, &held));
    __atomic_store_n(&armed, 1, __ATOMIC_SEQ_CST);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, grow, mr), 0);
    while (!__atomic_load_n(&waiting, __ATOMIC_SEQ_CST))
        sched_yield();
    /* the growth holds the pool's lock while its upstream waits: a call that waited would hang
     * here until the test's timeout */
    ck_assert(!crmm_resource_try_allocate(mr, 256, NULL, &p));
    ck_assert(!crmm_resource_try_deallocate(mr, held, 256, NULL));
    __atomic_store_n(&let_go, 1, __ATOMIC_SEQ_CST);
    void *grown = NULL;
    ck_assert_int_eq(pthread_join(t, &grown), 0);
    ck_assert(crmm_resource_try_deallocate(mr, held, 256, NULL)); /* the lock free again: at once */
    ck_assert(crmm_resource_try_allocate(mr, 256, NULL, &p));
    ck_assert_uint_eq(query(mr, CRMM_QUERY_ALLOCATIONS), 2);
    ck_assert(crmm_resource_try_deallocate(mr, p, 256, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, grown, 4 << 20, NULL));
    crmm_resource_release(mr);
    crmm_resource_release(&up->base);
}

CRMM_TEST(a_resource_without_the_ops_is_never_served_but_the_empty_cases_are)
{
    crmm_resource *host = NULL;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &host));
    void *p = &p;
    ck_assert(!crmm_resource_try_allocate(host, 64, NULL, &p));
    ck_assert_ptr_eq(p, &p);
    ck_assert(crmm_resource_try_allocate(host, 0, NULL, &p)); /* as allocate(0): NULL, done */
    ck_assert_ptr_null(p);
    ck_assert(crmm_resource_try_deallocate(host, NULL, 64, NULL)); /* as deallocate(NULL) */
    ck_assert(!crmm_resource_try_allocate(NULL, 64, NULL, &p));
    ck_assert(!crmm_resource_try_allocate(host, 64, NULL, NULL));
    ck_assert(!crmm_resource_try_deallocate(NULL, &p, 64, NULL));
    crmm_resource_release(host);
}

CRMM_TEST(with_per_thread_caches_on_the_try_leaves_every_call_to_the_ordinary_path)
{
    crmm_resource *mr = host_pool("initial_size=1MiB thread_cache=on");
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, grow, mr), 0); /* a second thread switches them on */
    void *grown = NULL, *p = NULL;
    ck_assert_int_eq(pthread_join(t, &grown), 0);
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 256, NULL, &p)); /* the caches are on from now */
    ck_assert(!crmm_resource_try_deallocate(mr, p, 256, NULL));
    ck_assert(!crmm_resource_try_allocate(mr, 256, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 256, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, grown, 4 << 20, NULL));
    ck_assert_uint_eq(query(mr, CRMM_QUERY_BYTES_IN_USE), 0);
    crmm_resource_release(mr);
}

static crmm_resource *adaptor_over(const char *plugin, const char *params, crmm_resource *upstream)
{
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(crmm_resource_create(plugin, params, upstream, &mr));
    return mr;
}

CRMM_TEST(statistics_counts_what_its_upstream_served_at_once)
{
    crmm_resource *pool = host_pool("initial_size=1MiB");
    crmm_resource *st = adaptor_over("statistics", NULL, pool);
    void *p = NULL;
    ck_assert(crmm_resource_try_allocate(st, 1000, NULL, &p));
    ck_assert_uint_eq(query(st, CRMM_QUERY_BYTES_IN_USE), 1000);
    ck_assert_uint_eq(query(st, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_uint_eq(query(pool, CRMM_QUERY_BYTES_IN_USE), 1000);
    ck_assert(!crmm_resource_try_allocate(st, 2 << 20, NULL, &p)); /* the pool would grow */
    ck_assert_uint_eq(query(st, CRMM_QUERY_ALLOCATIONS), 1);       /* not counted */
    ck_assert(!crmm_resource_try_deallocate(st, p, 999, NULL));    /* refused below: not counted */
    ck_assert_uint_eq(query(st, CRMM_QUERY_BYTES_IN_USE), 1000);
    ck_assert(crmm_resource_try_deallocate(st, p, 1000, NULL));
    ck_assert_uint_eq(query(st, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(query(st, CRMM_QUERY_ALLOCATIONS_TOTAL), 1);
    crmm_resource_release(st);
    crmm_resource_release(pool);
}

CRMM_TEST(limiting_reserves_for_a_try_and_gives_the_room_back_when_it_is_refused)
{
    crmm_resource *pool = host_pool("initial_size=1MiB");
    crmm_resource *lim = adaptor_over("limiting", "allocation_limit=4096", pool);
    void *p = NULL, *q = &q;
    ck_assert(crmm_resource_try_allocate(lim, 1000, NULL, &p));
    ck_assert_uint_eq(query(lim, CRMM_QUERY_BYTES_IN_USE), 1024); /* rounded to 256 as allocate counts */
    crmm_clear_error();
    ck_assert(!crmm_resource_try_allocate(lim, 4000, NULL, &q)); /* past the limit: allocate names it */
    ck_assert_ptr_eq(q, &q);
    ck_assert_int_eq(crmm_last_status(), CRMM_OK);
    ck_assert_uint_eq(query(lim, CRMM_QUERY_BYTES_IN_USE), 1024);
    ck_assert_crmm(crmm_resource_allocate(lim, 4000, NULL, &q), CRMM_ERROR_OUT_OF_MEMORY);
    crmm_resource *roomy = adaptor_over("limiting", "allocation_limit=1GiB", pool);
    ck_assert(!crmm_resource_try_allocate(roomy, 2 << 20, NULL, &q)); /* the pool would grow */
    ck_assert_uint_eq(query(roomy, CRMM_QUERY_BYTES_IN_USE), 0);      /* the reservation given back */
    ck_assert(crmm_resource_try_deallocate(lim, p, 1000, NULL));
    ck_assert_uint_eq(query(lim, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(query(lim, CRMM_QUERY_ALLOCATIONS), 0);
    crmm_resource_release(roomy);
    crmm_resource_release(lim);
    crmm_resource_release(pool);
}

CRMM_TEST(adaptors_over_a_resource_without_the_ops_are_never_served)
{
    crmm_resource *host = NULL;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &host));
    crmm_resource *lim = adaptor_over("limiting", "allocation_limit=1MiB", host);
    crmm_resource *st = adaptor_over("statistics", NULL, lim);
    void *p = NULL;
    ck_assert(!crmm_resource_try_allocate(st, 64, NULL, &p));
    ck_assert_uint_eq(query(st, CRMM_QUERY_ALLOCATIONS_TOTAL), 0);
    ck_assert_uint_eq(query(lim, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_crmm_ok(crmm_resource_allocate(st, 64, NULL, &p));
    ck_assert(!crmm_resource_try_deallocate(st, p, 64, NULL));
    ck_assert_uint_eq(query(st, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_crmm_ok(crmm_resource_deallocate(st, p, 64, NULL));
    crmm_resource_release(st);
    crmm_resource_release(lim);
    crmm_resource_release(host);
}

int main(void)
{
    unsetenv("CRMM_CONFIG");
    return crmm_test_main("try_ops", 0);
}
