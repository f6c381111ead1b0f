/* check_pool_expandable_use.c — the expandable pool on the CPU, against the scripted driver of
 * pool_expandable_test.h (as check_pool_expandable.c): destroy, bad frees, other streams' memory,
 * threads, a growth at the maximum (and the records its out-of-memory path cuts), the fallbacks
 * to the upstream, and bad parameters. */
#include "build_config.h"
#include "churn_support.h"
#include "../plugins/pool/pool_resource.h" /* the spare records */
#include "pool_expandable_test.h"
#include <cuda.h>
#include <crmm/cuda_support.h>

CRMM_TEST_IN("pool_expandable", destroy_unmaps_and_frees_everything)
{
    p = expandable_pool("");
    unsigned char *a = alloc(p, 3 * PAGE);
    (void)alloc(p, PAGE); /* left live: reported, and still given back */
    dealloc(p, a, 3 * PAGE);
    fake_vmm.device_syncs = 0;
    crmm_test_log_capture_begin();
    release_pool();
    char *log = crmm_test_log_capture_end();
    ck_assert_ptr_nonnull(strstr(log, "1 live allocation"));
    free(log);
    ck_assert_int_eq(fake_vmm.device_syncs, 1);
    ck_assert_uint_eq(fake_vmm.physical, 0);
    ck_assert_int_eq(fake_vmm.frees, 1);
    ck_assert_uint_eq(fake_vmm.range, 0);
}

CRMM_TEST_IN("pool_expandable", bad_frees_are_refused)
{
    p = expandable_pool("");
    unsigned char *a = alloc(p, 1000);
    dealloc(p, a, 1000);
    ck_assert_crmm(crmm_resource_deallocate(p, a, 1000, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    unsigned char *b = alloc(p, 4 * PAGE);
    ck_assert_crmm(crmm_resource_deallocate(p, b + 256, 1000, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    int local;
    ck_assert_crmm(crmm_resource_deallocate(p, &local, 4, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    dealloc(p, b, 4 * PAGE);
    books_agree(p);
}

CRMM_TEST_IN("pool_expandable", another_streams_free_memory_is_not_used_without_a_wait)
{
    p = expandable_pool("release_threshold=1TiB"); /* no release: growth only */
    cudaStream_t s = stream_n(0), t = stream_n(1);
    unsigned char *a = alloc_on(p, 2 * PAGE, s);
    free_on(p, a, 2 * PAGE, t); /* free on t, right at the bottom */
    fake_vmm.device_syncs = 0;
    /* s needs 3 pages: t's 2 free pages next to the unmapped range may not join s's new pages
     * unless the device is synchronized; the pool maps 3 fresh pages above them instead... */
    unsigned char *b = alloc_on(p, 3 * PAGE, s);
    ck_assert_ptr_eq(b, a + 2 * PAGE);
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    /* ...while t reuses its own pages at once */
    unsigned char *c = alloc_on(p, 2 * PAGE, t);
    ck_assert_ptr_eq(c, a);
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    free_on(p, b, 3 * PAGE, s);
    free_on(p, c, 2 * PAGE, t);
}

CRMM_TEST_IN("pool_expandable", memory_keeps_its_content_and_the_books_stay_exact)
{
    /* a random mix of sizes on two streams, with trims, checking every block's bytes */
    p = expandable_pool("");
    enum { SLOTS = 64 };
    unsigned char *ptr[SLOTS] = {0};
    size_t size[SLOTS] = {0};
    uint64_t rng = 42;
    for (int step = 0; step < 4000; step++) {
        int i = (int)(crmm_test_rand(&rng) % SLOTS);
        cudaStream_t s = stream_n(i % 2);
        if (ptr[i]) {
            for (size_t k = 0; k < size[i]; k += 997)
                ck_assert_uint_eq(ptr[i][k], (unsigned char)i);
            free_on(p, ptr[i], size[i], s);
            ptr[i] = NULL;
        } else {
            size[i] = 1 + crmm_test_rand(&rng) % (crmm_test_rand(&rng) % 2 ? 300 * KiB : 4 * KiB);
            ptr[i] = alloc_on(p, size[i], s);
            memset(ptr[i], i, size[i]);
        }
        if (step % 500 == 499) {
            ck_assert_crmm_ok(crmm_resource_trim(p));
            books_agree(p);
        }
    }
    for (int i = 0; i < SLOTS; i++)
        if (ptr[i])
            free_on(p, ptr[i], size[i], stream_n(i % 2));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    books_agree(p);
    release_pool();
    ck_assert_uint_eq(fake_vmm.physical, 0);
}

CRMM_TEST_IN("pool_expandable", threads_on_their_own_streams)
{
    p = expandable_pool("");
    pthread_t th[4];
    churn c[4];
    for (int i = 0; i < 4; i++) {
        c[i] = (churn){.mr = p, .own = (crmm_cuda_stream_t)stream_n(i + 1), .seed = 8 + (uint64_t)i, .steps = 3000,
                       .slots = 32, .size = 200 * KiB};
        ck_assert_int_eq(pthread_create(&th[i], NULL, churn_thread, &c[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        ck_assert_msg(!c[i].why[0] && !c[i].overlapped, "thread %d: %s; %d blocks overwritten", i, c[i].why, c[i].overlapped);
    }
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    books_agree(p);
}

static void *allocate_one_page(void *arg)
{
    void *x = NULL;
    return crmm_resource_allocate(arg, PAGE, NULL, &x) == CRMM_OK ? x : NULL;
}

CRMM_TEST_IN("pool_expandable", under_threads_growth_takes_a_step_and_never_waits)
{
    p = expandable_pool("thread_cache=on");
    unsigned char *base = alloc(p, 64 * PAGE); /* one thread so far: exactly what it needs */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 64 * PAGE);
    /* a second thread allocates: the caches switch on, and its growth of one page maps a 16th of
     * the pool; the three pages over stay free */
    pthread_t t;
    void *w = NULL;
    ck_assert_int_eq(pthread_create(&t, NULL, allocate_one_page, p), 0);
    ck_assert_int_eq(pthread_join(t, &w), 0);
    ck_assert_ptr_nonnull(w);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 68 * PAGE);
    unsigned char *x = alloc(p, 3 * PAGE);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 68 * PAGE);
    dealloc(p, base, 64 * PAGE);
    /* past the mark with 64 pages free that could move: no synchronization, nothing unmapped,
     * new pages (at least a 16th of the pool) instead */
    fake_vmm.device_syncs = 0;
    int unmaps = fake_vmm.unmaps;
    unsigned char *z = alloc(p, 80 * PAGE);
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    ck_assert_int_eq(fake_vmm.unmaps, unmaps);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 148 * PAGE);
    books_agree(p);
    free_all(p, {z, 80 * PAGE}, {x, 3 * PAGE}, {w, PAGE});
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0); /* trim still gives every free page back */
    books_agree(p);
}

/* The worker of cached_pages_serve_a_growth_at_the_maximum: 64 one-page blocks, every other one
 * of the first 62 freed into its cache; then it waits, caches intact, until the test is done. */
struct cacher { crmm_resource *p; pthread_barrier_t *sync; unsigned char *blocks[64]; const char *err; };

static void *fill_and_cache(void *arg)
{
    struct cacher *c = arg;
    for (int i = 0; i < 64 && !c->err; i++)
        if (crmm_resource_allocate(c->p, PAGE, NULL, (void **)&c->blocks[i]) != CRMM_OK)
            c->err = "allocate failed";
    for (int i = 1; i < 62 && !c->err; i += 2) {
        if (crmm_resource_deallocate(c->p, c->blocks[i], PAGE, NULL) != CRMM_OK)
            c->err = "free failed";
        c->blocks[i] = NULL;
    }
    pthread_barrier_wait(c->sync); /* the test allocates */
    pthread_barrier_wait(c->sync); /* and is done */
    for (int i = 0; i < 64; i++)
        if (c->blocks[i] && crmm_resource_deallocate(c->p, c->blocks[i], PAGE, NULL) != CRMM_OK)
            c->err = "free failed";
    return NULL;
}

CRMM_TEST_IN("pool_expandable", cached_pages_serve_a_growth_at_the_maximum)
{
    /* the pool is at its maximum, another thread's cache holds 31 of its 64 pages (less than
     * half: a growth leaves that cache alone) in one-page pieces: a request of 8 pages must get
     * them back, unmapped and mapped again in one piece, not fail */
    p = expandable_pool("maximum_size=4MiB thread_cache=on");
    dealloc(p, alloc(p, 256), 256); /* this thread first: the worker's allocations switch the caches on */
    pthread_barrier_t sync;
    pthread_barrier_init(&sync, NULL, 2);
    struct cacher c = {.p = p, .sync = &sync};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, fill_and_cache, &c), 0);
    pthread_barrier_wait(&sync);
    ck_assert_msg(!c.err, "worker: %s", c.err);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 64 * PAGE);
    void *x = NULL;
    crmm_status st = crmm_resource_allocate(p, 8 * PAGE, NULL, &x);
    pthread_barrier_wait(&sync);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_msg(st == CRMM_OK, "8 pages at the maximum: %s", crmm_last_error());
    memset(x, 0x5A, 8 * PAGE);
    ck_assert_uint_le(q(p, CRMM_QUERY_BYTES_RESERVED), 64 * PAGE);
    ck_assert_msg(!c.err, "worker: %s", c.err);
    dealloc(p, x, 8 * PAGE);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    books_agree(p);
    pthread_barrier_destroy(&sync);
}

/* Without the driver's virtual memory API, or on a device without it, the pool falls back to
 * growth by upstream chunks, with a warning that says why. */
static const struct { int *lacking; const char *why; } fallbacks[] = {
    {&fake_vmm.lookups_fail, "the CUDA driver has no cuMem"},
    {&fake_vmm.vmm_unsupported, "does not support the CUDA virtual memory API"},
};

CRMM_LOOP_TEST_IN("pool_expandable", without_virtual_memory_it_grows_from_upstream, 2)
{
    *fallbacks[_i].lacking = 1;
    crmm_test_log_capture_begin();
    p = expandable_pool("initial_size=1MiB");
    char *log = crmm_test_log_capture_end();
    ck_assert_msg(strstr(log, "expandable = true, but") && strstr(log, fallbacks[_i].why), "log: %s", log);
    free(log);
    ck_assert_int_eq(fake_vmm.reserves, 0);
    ck_assert_int_eq(fake_vmm.upstream_calls, 1); /* the initial chunk came from upstream */
    unsigned char *a = alloc(p, 2 * MiB);              /* and growth does too */
    ck_assert_int_eq(fake_vmm.upstream_calls, 2);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 2);
    dealloc(p, a, 2 * MiB);
}

/* The worker of out_of_memory_path_keeps_a_record_for_the_split: its per-thread default stream's
 * blocks, which the test's thread may take only after a device synchronization (stream_reuse =
 * event cannot record on another thread's per-thread stream). Page 0: [0, 48K) free, [48K, 64K)
 * live; page 1: [64K, 80K) live; pages 1 to 3: [80K, 200K) free, [200K, 208K) live, [208K, 256K)
 * free. */
struct per_thread_blocks { crmm_resource *p; unsigned char *live[3]; };

static void *fill_per_thread_stream(void *arg)
{
    struct per_thread_blocks *w = arg;
    cudaStream_t pt = cudaStreamPerThread;
    unsigned char *a1 = alloc_on(w->p, 48 * KiB, pt);
    w->live[0] = alloc_on(w->p, 16 * KiB, pt);
    w->live[1] = alloc_on(w->p, 16 * KiB, pt);
    unsigned char *a4 = alloc_on(w->p, 120 * KiB, pt);
    w->live[2] = alloc_on(w->p, 8 * KiB, pt);
    free_on(w->p, a1, 48 * KiB, pt);
    free_on(w->p, a4, 120 * KiB, pt);
    return NULL;
}

CRMM_TEST_IN("pool_expandable", out_of_memory_path_keeps_a_record_for_the_split)
{
    /* at the maximum, a request no free block of its stream fits: growth fails, the pool
     * synchronizes, gathers the other thread's free blocks and unmaps their whole page (cutting
     * its block twice), then serves the request from a gathered block, which it cuts once more.
     * With the spare records just enough for the request on entry, the unmapping used them up:
     * the last cut must get a record all the same. */
    p = expandable_pool("maximum_size=256KiB stream_reuse=event thread_cache=off page_moves=never");
    pthread_t t;
    struct per_thread_blocks w = {p, {NULL}};
    ck_assert_int_eq(pthread_create(&t, NULL, fill_per_thread_stream, &w), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 4 * PAGE);
    pool_records *r = &((pool_resource *)p)->core.records;
    pool_block *stash = NULL; /* spare records held back, so that two are left */
    while (r->spare_count > 2) {
        pool_block *b = pool_records_take(r);
        b->u.free.next = stash;
        stash = b;
    }
    fake_vmm.device_syncs = 0;
    unsigned char *z = alloc(p, 32 * KiB);
    ck_assert_int_eq(fake_vmm.device_syncs, 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 3 * PAGE);
    while (stash) {
        pool_block *next = stash->u.free.next;
        pool_records_put(r, stash);
        stash = next;
    }
    free_all(p, {z, 32 * KiB}, {w.live[0], 16 * KiB}, {w.live[1], 16 * KiB}, {w.live[2], 8 * KiB});
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    books_agree(p);
}

CRMM_TEST_IN("pool_expandable", over_host_memory_it_grows_from_upstream)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    crmm_test_log_capture_begin();
    p = crmm_test_create("pool", "expandable=true initial_size=1MiB", host);
    char *log = crmm_test_log_capture_end();
    ck_assert_msg(strstr(log, "not a base resource of device memory"), "log: %s", log);
    free(log);
    crmm_resource_release(host);
    unsigned char *a = alloc(p, 2 * MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 2);
    dealloc(p, a, 2 * MiB);
    release_pool();
    ck_assert_int_eq(fake_vmm.reserves, 0);
}

/* The driver lookup the pool and IPC import share: what it finds is stored, what it lacks is NULL
 * and the first missing name is said; a driver error names the call and the driver's text. */
CRMM_TEST_IN("pool_expandable", driver_lookup_names_what_is_missing_and_driver_errors_name_the_call)
{
    void *create = NULL, *missing = (void *)1, *map = NULL;
    const crmm_driver_function table[] = {
        {"cuMemCreate", &create}, {"cuNoSuchFunction", &missing}, {"cuMemMap", &map}};
    char why[96] = "";
    ck_assert(!crmm_cuda_driver_lookup(table, 3, why, sizeof why));
    ck_assert_str_eq(why, "the CUDA driver has no cuNoSuchFunction (driver too old, or none)");
    ck_assert_ptr_nonnull(create);
    ck_assert_ptr_null(missing);
    ck_assert_ptr_nonnull(map);
    char untouched[16] = "untouched";
    ck_assert(crmm_cuda_driver_lookup(table, 1, untouched, sizeof untouched));
    ck_assert_str_eq(untouched, "untouched");
    ck_assert(!crmm_cuda_driver_lookup(table + 1, 1, NULL, 0)); /* no sentence wanted */

    ck_assert_int_eq(crmm_cuda_driver_status(CUDA_SUCCESS, "cuMemMap"), CRMM_OK);
    ck_assert_crmm(crmm_cuda_driver_status(CUDA_ERROR_OUT_OF_MEMORY, "cuMemCreate"), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_error_contains("CUDA driver: cuMemCreate: out of memory (error 2)");
    ck_assert_crmm(crmm_cuda_driver_status(CUDA_ERROR_INVALID_VALUE, "cuMemMap"), CRMM_ERROR_CUDA);
    ck_assert_error_contains("CUDA driver: cuMemMap: invalid argument (error 1)");
}

/* A NULL table, or an entry with no name or nowhere to store the address, is refused with a
 * sentence rather than dereferenced. */
CRMM_TEST_IN("pool_expandable", driver_lookup_refuses_a_null_table_and_empty_entries)
{
    char why[128] = "";
    ck_assert(!crmm_cuda_driver_lookup(NULL, 5, why, sizeof why));
    ck_assert_msg(strstr(why, "table NULL"), "why: %s", why);
    ck_assert(crmm_cuda_driver_lookup(NULL, 0, NULL, 0)); /* nothing asked, nothing missing */
    void *slot = (void *)1;
    const crmm_driver_function no_name[] = {{NULL, &slot}};
    ck_assert(!crmm_cuda_driver_lookup(no_name, 1, why, sizeof why));
    ck_assert_msg(strstr(why, "has no name"), "why: %s", why);
    ck_assert_ptr_null(slot);
    const crmm_driver_function no_slot[] = {{"cuMemCreate", NULL}};
    ck_assert(!crmm_cuda_driver_lookup(no_slot, 1, why, sizeof why));
    ck_assert_msg(strstr(why, "no place for its address"), "why: %s", why);
}

CRMM_TEST_IN("pool_expandable", bad_parameters_are_refused)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    ck_assert_crmm(crmm_resource_create("pool", "expandable=maybe initial_size=1MiB", host, &p), CRMM_ERROR_CONFIG);
    ck_assert_crmm(crmm_resource_create("pool", "release_threshold=lots initial_size=1MiB", host, &p), CRMM_ERROR_CONFIG);
    ck_assert_ptr_null(p);
    crmm_resource_release(host);
}

/* A chunked pool or an arena given no size takes half of what the driver says is free on its
 * upstream's device (rounded down to 256 bytes, the arena's to its pages), the pool never more
 * than its maximum. */
CRMM_TEST_IN("pool_expandable", unsized_pool_and_arena_take_half_the_free_memory)
{
    fake_vmm_reset(PAGE, DEVICE_MEMORY + 1000); /* half of the free bytes is not a multiple of 256 */
    p = expandable_pool("");
    unsigned char *held = alloc(p, 5 * MiB); /* takes device memory: less is free */
    uint64_t half = (DEVICE_MEMORY + 1000 - fake_vmm.physical) / 2;
    ck_assert_uint_ge(fake_vmm.physical, 5 * MiB); /* the pool's pages count as taken */
    crmm_resource *u = fake_vmm_device_upstream(), *chunked, *arena;
    ck_assert_ptr_nonnull(u);
    ck_assert_crmm_ok(crmm_resource_create("pool", "expandable=false", u, &chunked));
    ck_assert_uint_eq(q(chunked, CRMM_QUERY_BYTES_RESERVED), half & ~(uint64_t)255);
    crmm_resource_release(chunked);
    ck_assert_crmm_ok(crmm_resource_create("pool", "expandable=false maximum_size=1MiB", u, &chunked));
    ck_assert_uint_eq(q(chunked, CRMM_QUERY_BYTES_RESERVED), MiB);
    crmm_resource_release(chunked);
    ck_assert_crmm_ok(crmm_resource_create("arena", "superblock_size=1MiB", u, &arena));
    const uint64_t arena_page = MiB / 64; /* the arena keeps whole pages of 1/64 superblock */
    ck_assert_uint_eq(q(arena, CRMM_QUERY_BYTES_RESERVED), (half & ~(uint64_t)255) / arena_page * arena_page);
    crmm_resource_release(arena);
    crmm_resource_release(u);
    dealloc(p, held, 5 * MiB);
}

int main(void)
{
    Suite *s = suite_create("pool_expandable_use");
    TCase *tc = crmm_test_tcase(s, "pool_expandable", 0);
    tcase_add_checked_fixture(tc, setup, teardown);
    return crmm_test_run(s);
}
