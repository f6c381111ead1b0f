/* check_arena_shards.c — the arena plugin over host memory (no GPU): bad parameters and bad
 * pointers refused, and shards: large blocks from the thread's own shard, frees to the owning
 * shard, fallback to and across other shards, defragmentation across them. */
#include "build_config.h"
#include "arena_test.h"

/* ---- bad input ---------------------------------------------------------------------------- */

/* Parameters the arena refuses: the status and a part of the message. */
static const struct { const char *params; crmm_status want; const char *text; } bad_params[] = {
    {"", CRMM_ERROR_CONFIG, "arena: arena_size is required over host memory, in bytes"},
    {"superblock_size=1MiB", CRMM_ERROR_CONFIG, "arena_size is required"},
    {"arena_size=4MiB superblock_size=0", CRMM_ERROR_CONFIG, "arena: superblock_size: 0 is below the minimum 65536"},
    {"arena_size=4MiB superblock_size=100KiB", CRMM_ERROR_CONFIG, "superblock_size: 102400 is not a power of two"},
    {"arena_size=4GiB superblock_size=2GiB", CRMM_ERROR_CONFIG, "superblock_size: 2147483648 is above the maximum 1073741824"},
    {"arena_size=4MiB superblock_size=junk", CRMM_ERROR_CONFIG, "superblock_size"},
    {"arena_size=lots", CRMM_ERROR_CONFIG, "arena_size"},
    {"arena_size=0", CRMM_ERROR_CONFIG, "arena_size 0 B is smaller than one superblock (1.0 MiB)"},
    {"arena_size=1000KiB", CRMM_ERROR_CONFIG, "smaller than one superblock"},
    {"arena_size=4MiB dump_log_on_failure=maybe", CRMM_ERROR_CONFIG, "dump_log_on_failure"},
    {"arena_size=4MiB dump_file=", CRMM_ERROR_CONFIG, "dump_file"},
    /* a pattern is checked when the arena is made, not at the first dump */
    {"arena_size=4MiB dump_file=dump.%x.log", CRMM_ERROR_CONFIG, "arena: dump_file: file name 'dump.%x.log': unknown '%x'"},
    {"arena_size=4MiB arena_szie=1", CRMM_ERROR_CONFIG, "arena_szie"},
    {"arena_size=64MiB shards=0", CRMM_ERROR_CONFIG, "arena: shards: 0 is below the minimum 1"},
    {"arena_size=64MiB shards=65", CRMM_ERROR_CONFIG, "arena: shards: 65 is above the maximum 64"},
    {"arena_size=64MiB shards=18446744073709551615", CRMM_ERROR_CONFIG, "is above the maximum 64"},
    {"arena_size=4MiB shards=5", CRMM_ERROR_CONFIG,
     "arena: shards 5 is too many for arena_size 4.0 MiB: each shard needs at least one superblock (1.0 MiB), so at most 4"},
    {"arena_size=64MiB shards=many", CRMM_ERROR_CONFIG, "shards"},
    {"arena_size=64MiB shards=-1", CRMM_ERROR_CONFIG, "shards"},
    {"arena_size=64MiB shards=2.5", CRMM_ERROR_CONFIG, "shards"},
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) /* they abort on a failed huge malloc */
    /* the upstream cannot give it: its error, with the arena's context */
    {"arena_size=512GiB", CRMM_ERROR_OUT_OF_MEMORY, "arena: taking arena_size 512.0 GiB from upstream"},
#endif
};

CRMM_LOOP_TEST(bad_parameters_are_refused_clearly, (int)(sizeof bad_params / sizeof bad_params[0]))
{
    const char *params = bad_params[_i].params, *text = bad_params[_i].text;
    crmm_resource *host, *mr = (crmm_resource *)0x1;
    ck_assert_crmm_ok(crmm_resource_create("host", "", NULL, &host));
    crmm_clear_error();
    crmm_status st = crmm_resource_create("arena", params, host, &mr);
    ck_assert_msg(st == bad_params[_i].want, "\"%s\" gave %s: %s", params, crmm_status_name(st), crmm_last_error());
    ck_assert_msg(strstr(crmm_last_error(), text) != NULL, "\"%s\": message \"%s\" lacks \"%s\"", params,
                  crmm_last_error(), text);
    ck_assert_ptr_eq(mr, (crmm_resource *)0x1);
    ck_assert_int_eq(crmm_resource_refcount(host), 1); /* no reference left behind */
    ck_assert_uint_eq(crmm_test_query(host, CRMM_QUERY_ALLOCATIONS), 0);
    crmm_resource_release(host);
}

CRMM_TEST(an_arena_needs_an_upstream)
{
    crmm_resource *mr;
    ck_assert_crmm(crmm_resource_create("arena", "arena_size=4MiB", NULL, &mr), CRMM_ERROR_CONFIG);
}

CRMM_TEST(bad_pointers_are_refused_and_harmless)
{
    fixture f = make_arena("arena_size=4MiB");
    char *small = crmm_test_allocate(f.mr, 1000), *large = crmm_test_allocate(f.mr, 1 * MiB);
    int on_stack;
    char *heap = malloc(64);
    ck_assert_crmm(crmm_resource_deallocate(f.mr, &on_stack, 4, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "was not allocated by this arena") != NULL, "%s", crmm_last_error());
    ck_assert_crmm(crmm_resource_deallocate(f.mr, heap, 64, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(f.mr, small + 256, 1000, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(f.mr, small + 1, 1000, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(f.mr, small, 5000, NULL), CRMM_ERROR_INVALID_ARGUMENT); /* wrong size */
    ck_assert_crmm(crmm_resource_deallocate(f.mr, large + 16384, 1 * MiB, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(f.mr, large, 2 * MiB, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(f.mr, large, 100, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(f.mr, f.mr, 100, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    /* a free block, never allocated, inside a superblock */
    ck_assert_crmm(crmm_resource_deallocate(f.mr, small + 2048, 1000, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    free_all(f.mr, {small, 1000}, {large, 1 * MiB});
    ck_assert_crmm(crmm_resource_deallocate(f.mr, small, 1000, NULL), CRMM_ERROR_INVALID_ARGUMENT); /* twice */
    ck_assert_msg(strstr(crmm_last_error(), "freed twice") != NULL, "%s", crmm_last_error());
    ck_assert_crmm(crmm_resource_deallocate(f.mr, large, 1 * MiB, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    /* nothing was corrupted: counts are right and every byte can be handed out again */
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE), 0);
    void *a = crmm_test_allocate(f.mr, 1000), *b = crmm_test_allocate(f.mr, 1000);
    ck_assert_ptr_ne(a, b);
    free_all(f.mr, {a, 1000}, {b, 1000});
    ck_assert_crmm_ok(crmm_resource_trim(f.mr));
    allocate_and_free(f.mr, 4 * MiB);
    free(heap);
    drop_arena(&f);
}

/* A large block freed with a size of the small blocks is a wrong size, not a double free: the
 * message names both sizes, as for any other wrong size of a large block. */
CRMM_TEST(a_large_block_freed_as_a_small_one_names_both_sizes)
{
    fixture f = make_arena("arena_size=4MiB");
    void *large = crmm_test_allocate(f.mr, 1 * MiB);
    ck_assert_crmm(crmm_resource_deallocate(f.mr, large, 1000, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "was allocated with 1048576 bytes, freed with 1000") != NULL, "%s",
                  crmm_last_error());
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE), 1 * MiB);
    release(f.mr, large, 1 * MiB);
    drop_arena(&f);
}

CRMM_TEST(double_free_from_another_thread_is_refused)
{
    fixture f = make_arena("arena_size=4MiB");
    void *blocks[2] = {crmm_test_allocate(f.mr, 1000), crmm_test_allocate(f.mr, 1000)};
    free_job j = {f.mr, blocks, 0, 1, 1000, 0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, free_range, &j), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(j.errors, 0);
    j.errors = 0;
    ck_assert_int_eq(pthread_create(&t, NULL, free_range, &j), 0); /* again, from another thread */
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(j.errors, 1);
    ck_assert_crmm(crmm_resource_deallocate(f.mr, blocks[0], 1000, NULL), CRMM_ERROR_INVALID_ARGUMENT); /* and here */
    release(f.mr, blocks[1], 1000);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS), 0);
    drop_arena(&f);
}

CRMM_TEST(control_ops)
{
    fixture f = make_arena("arena_size=4MiB");
    crmm_arena_stats s = stats(f.mr);
    ck_assert_uint_eq(s.arena_size, 4 * MiB);
    ck_assert_uint_eq(s.superblock_size, 1 * MiB);
    ck_assert_uint_eq(s.small_max, 128 * KiB);
    ck_assert_crmm_ok(crmm_resource_control(f.mr, CRMM_ARENA_DEFRAGMENT, NULL));
    ck_assert_uint_eq(stats(f.mr).defragmentations, 1);
    ck_assert_crmm(crmm_resource_control(f.mr, CRMM_ARENA_GET_STATS, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_control(f.mr, 99, NULL), CRMM_ERROR_UNSUPPORTED);
    ck_assert_ptr_eq(crmm_resource_find_kind(f.mr, "arena"), f.mr);
    drop_arena(&f);
}

CRMM_TEST(destroy_reports_live_allocations_and_frees_everything)
{
    fixture f = make_arena("arena_size=4MiB");
    crmm_test_allocate(f.mr, 1000);
    crmm_test_allocate(f.mr, 2 * MiB);
    crmm_resource_release(f.mr); /* logs "arena resource '' destroyed with 2 live allocations" */
    ck_assert_uint_eq(crmm_test_query(f.up, CRMM_QUERY_ALLOCATIONS), 0);
    crmm_resource_release(f.up);
}

/* ---- shards ------------------------------------------------------------------------------- */

static crmm_arena_shard_stats shard_stats(crmm_resource *mr, unsigned k)
{
    crmm_arena_shard_stats s = {.shard = k};
    ck_assert_crmm_ok(crmm_resource_control(mr, CRMM_ARENA_GET_SHARD_STATS, &s));
    return s;
}

/* The shard whose address range holds p. */
static unsigned shard_holding(crmm_resource *mr, const void *base, const void *p)
{
    unsigned n = (unsigned)stats(mr).shards;
    for (unsigned k = 0; k < n; k++) {
        crmm_arena_shard_stats s = shard_stats(mr, k);
        uintptr_t off = (uintptr_t)p - (uintptr_t)base;
        if (off >= s.offset && off < s.offset + s.size)
            return k;
    }
    ck_abort_msg("%p is in no shard", p);
    return 0;
}

/* The arena's first byte: the upstream's only live block is the arena. A block at the start of
 * shard 0 is found by allocating the whole first shard while nothing else lives. */
static char *arena_base(crmm_resource *mr)
{
    crmm_arena_shard_stats s0 = shard_stats(mr, 0);
    ck_assert_uint_eq(s0.free_bytes, s0.size);
    void *p = crmm_test_allocate(mr, s0.size);
    release(mr, p, s0.size);
    return p;
}

/* A thread that allocates a large and a small block, waits while the test looks (barrier
 * `hold`), frees them unless free_own is false (the test frees them), and exits (barrier `done`
 * first, so that the test sees it alive). */
typedef struct shard_worker {
    crmm_resource *mr;
    pthread_barrier_t *hold, *done;
    size_t large, small;
    void *p_large, *p_small;
    bool free_own;
    int failed;
} shard_worker;

static void *shard_work(void *arg)
{
    shard_worker *w = arg;
    if (crmm_resource_allocate(w->mr, w->large, NULL, &w->p_large) != CRMM_OK ||
        crmm_resource_allocate(w->mr, w->small, NULL, &w->p_small) != CRMM_OK)
        w->failed = 1;
    pthread_barrier_wait(w->hold);
    pthread_barrier_wait(w->done);
    if (w->free_own && (crmm_resource_deallocate(w->mr, w->p_large, w->large, NULL) != CRMM_OK ||
                        crmm_resource_deallocate(w->mr, w->p_small, w->small, NULL) != CRMM_OK))
        w->failed = 1;
    return NULL;
}

/* CREW threads that each take a 3 MiB and a 1000-byte block of `mr` and hold them from
 * crew_start (which returns once every one holds its blocks) until crew_finish (which lets them
 * free and exit, joins them and checks that none failed). */
enum { CREW = 4 };
typedef struct crew {
    pthread_barrier_t hold, done;
    shard_worker w[CREW];
    pthread_t t[CREW];
} crew;

static void crew_start(crew *c, crmm_resource *mr)
{
    pthread_barrier_init(&c->hold, NULL, CREW + 1);
    pthread_barrier_init(&c->done, NULL, CREW + 1);
    for (int i = 0; i < CREW; i++) {
        c->w[i] = (shard_worker){mr, &c->hold, &c->done, 3 * MiB, 1000, NULL, NULL, true, 0};
        ck_assert_int_eq(pthread_create(&c->t[i], NULL, shard_work, &c->w[i]), 0);
    }
    pthread_barrier_wait(&c->hold);
}

static void crew_finish(crew *c)
{
    pthread_barrier_wait(&c->done);
    for (int i = 0; i < CREW; i++) {
        ck_assert_int_eq(pthread_join(c->t[i], NULL), 0);
        ck_assert_int_eq(c->w[i].failed, 0);
    }
    pthread_barrier_destroy(&c->hold);
    pthread_barrier_destroy(&c->done);
}

/* Four threads, four shards: each thread has its own home shard, and its large block and its
 * superblock come from there (so they take different locks). */
CRMM_TEST(threads_take_large_blocks_from_their_own_shards)
{
    fixture f = make_arena("arena_size=64MiB shards=4"); /* no thread arena here until the end */
    ck_assert_uint_eq(stats(f.mr).shards, 4);
    crew c;
    crew_start(&c, f.mr);
    for (unsigned k = 0; k < CREW; k++) {
        crmm_arena_shard_stats s = shard_stats(f.mr, k);
        ck_assert_uint_eq(s.offset, k * 16 * MiB);
        ck_assert_uint_eq(s.size, 16 * MiB);
        ck_assert_uint_eq(s.large_blocks, 1);
        ck_assert_uint_eq(s.large_bytes, 3 * MiB);
        ck_assert_uint_eq(s.superblocks, 1);
        ck_assert_uint_eq(s.thread_arenas, 1);
        ck_assert_uint_eq(s.free_bytes, 12 * MiB);
    }
    crew_finish(&c);
    for (unsigned k = 0; k < CREW; k++) {
        crmm_arena_shard_stats s = shard_stats(f.mr, k);
        ck_assert_uint_eq(s.free_bytes, 16 * MiB); /* the exited threads gave their superblocks back */
        ck_assert_uint_eq(s.thread_arenas, 0);
    }
    /* where the blocks were: each thread's large block and superblock in a shard of its own */
    char *base = arena_base(f.mr);
    bool seen[CREW] = {false};
    for (int i = 0; i < CREW; i++) {
        unsigned k = shard_holding(f.mr, base, c.w[i].p_large);
        ck_assert_msg(!seen[k], "two threads' large blocks in shard %u", k);
        seen[k] = true;
        ck_assert_uint_eq(shard_holding(f.mr, base, c.w[i].p_small), k);
    }
    drop_arena(&f);
}

/* A large block freed by another thread goes back to the shard it came from, not to the freeing
 * thread's home; a small one to its owner's superblock. */
CRMM_TEST(a_free_from_another_thread_goes_to_the_owning_shard)
{
    fixture f = make_arena("arena_size=64MiB shards=4");
    char *base = arena_base(f.mr); /* this thread's arena: home shard 0 */
    pthread_barrier_t hold, done;
    pthread_barrier_init(&hold, NULL, 2);
    pthread_barrier_init(&done, NULL, 2);
    shard_worker w = {f.mr, &hold, &done, 5 * MiB, 1000, NULL, NULL, false, 0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, shard_work, &w), 0);
    pthread_barrier_wait(&hold);
    ck_assert_int_eq(w.failed, 0);
    unsigned k = shard_holding(f.mr, base, w.p_large);
    ck_assert_uint_ne(k, 0);
    ck_assert_uint_eq(shard_stats(f.mr, k).thread_arenas, 1);
    ck_assert_uint_eq(shard_stats(f.mr, k).large_blocks, 1);
    release(f.mr, w.p_large, 5 * MiB); /* freed here, on a thread whose home is shard 0 */
    release(f.mr, w.p_small, 1000);
    crmm_arena_shard_stats s = shard_stats(f.mr, k);
    ck_assert_uint_eq(s.large_blocks, 0);
    ck_assert_uint_eq(s.large_bytes, 0);
    ck_assert_uint_eq(s.free_bytes, 15 * MiB); /* all but the owner's superblock, which it still holds */
    ck_assert_uint_eq(s.largest_free, 10 * MiB); /* after the superblock (it came after the large block) */
    ck_assert_uint_eq(shard_stats(f.mr, 0).free_bytes, 16 * MiB);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS), 0);
    pthread_barrier_wait(&done);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_uint_eq(stats(f.mr).global_free_bytes, 64 * MiB);
    pthread_barrier_destroy(&hold);
    pthread_barrier_destroy(&done);
    drop_arena(&f);
}

/* One thread, four shards of 4 MiB: what does not fit in its home shard goes to the next one;
 * what fits in no shard alone takes free pages that run on across shards, and gives each shard
 * its pages back when freed. */
CRMM_TEST(large_requests_fall_back_to_other_shards_and_across_them)
{
    fixture f = make_arena("arena_size=16MiB shards=4");
    char *base = arena_base(f.mr);
    char *a = crmm_test_allocate(f.mr, 3 * MiB), *b = crmm_test_allocate(f.mr, 3 * MiB), *c = crmm_test_allocate(f.mr, 3 * MiB), *d = crmm_test_allocate(f.mr, 3 * MiB);
    ck_assert_ptr_eq(a, base); /* home shard 0 first, then 1, 2, 3 in order */
    ck_assert_ptr_eq(b, base + 4 * MiB);
    ck_assert_ptr_eq(c, base + 8 * MiB);
    ck_assert_ptr_eq(d, base + 12 * MiB);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_LARGEST_FREE_BLOCK), 1 * MiB);
    release(f.mr, b, 3 * MiB);
    /* free: 1 MiB at the end of shard 0, all of shard 1, 1 MiB at the end of shards 2 and 3 */
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_LARGEST_FREE_BLOCK), 5 * MiB);
    ck_assert_uint_eq(stats(f.mr).global_largest_free, 5 * MiB);
    char *x = crmm_test_allocate(f.mr, 5 * MiB); /* no shard has 5 MiB: it runs from shard 0 into shard 1 */
    ck_assert_ptr_eq(x, base + 3 * MiB);
    memset(x, 0x5a, 5 * MiB);
    ck_assert_uint_eq(shard_stats(f.mr, 0).large_bytes, 4 * MiB);
    ck_assert_uint_eq(shard_stats(f.mr, 0).large_blocks, 2);
    ck_assert_uint_eq(shard_stats(f.mr, 1).large_bytes, 4 * MiB);
    ck_assert_uint_eq(shard_stats(f.mr, 1).large_blocks, 0); /* counted where it starts */
    ck_assert_uint_eq(shard_stats(f.mr, 1).free_bytes, 0);
    ck_assert_uint_eq(stats(f.mr).large_blocks, 4);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_FREE), 2 * MiB);
    void *p;
    ck_assert_crmm(crmm_resource_allocate(f.mr, 2 * MiB, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_msg(strstr(crmm_last_error(), "(arena size 16.0 MiB, 2.0 MiB free, largest free block 1.0 MiB)") != NULL,
                  "%s", crmm_last_error());
    /* a pointer inside it, in the second shard, is no block */
    ck_assert_crmm(crmm_resource_deallocate(f.mr, x + 1 * MiB, 4 * MiB, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(f.mr, x + 5 * MiB - 16 * KiB, 16 * KiB * 9, NULL),
                   CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(f.mr, x, 4 * MiB, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    release(f.mr, x, 5 * MiB);
    ck_assert_uint_eq(shard_stats(f.mr, 0).large_bytes, 3 * MiB);
    ck_assert_uint_eq(shard_stats(f.mr, 1).free_bytes, 4 * MiB);
    ck_assert_uint_eq(shard_stats(f.mr, 1).largest_free, 4 * MiB);
    ck_assert_uint_eq(shard_stats(f.mr, 0).free_bytes, 1 * MiB);
    /* across, leaving the rest of the last shard free */
    x = crmm_test_allocate(f.mr, 4 * MiB + 512 * KiB);
    ck_assert_ptr_eq(x, base + 3 * MiB);
    ck_assert_uint_eq(shard_stats(f.mr, 1).free_bytes, 512 * KiB);
    ck_assert_uint_eq(shard_stats(f.mr, 1).largest_free, 512 * KiB);
    ck_assert_uint_eq(shard_stats(f.mr, 1).large_bytes, 3 * MiB + 512 * KiB);
    free_all(f.mr, {x, 4 * MiB + 512 * KiB}, {a, 3 * MiB}, {c, 3 * MiB}, {d, 3 * MiB});
    for (unsigned k = 0; k < 4; k++) {
        crmm_arena_shard_stats s = shard_stats(f.mr, k);
        ck_assert_uint_eq(s.free_bytes, 4 * MiB);
        ck_assert_uint_eq(s.largest_free, 4 * MiB); /* merged back whole in every shard */
        ck_assert_uint_eq(s.large_bytes, 0);
    }
    /* the whole arena at once: all of it is usable */
    x = crmm_test_allocate(f.mr, 16 * MiB);
    ck_assert_ptr_eq(x, base);
    release(f.mr, x, 16 * MiB);
    drop_arena(&f);
}

/* A superblock fits in no shard alone, but across the boundary of two: it is taken there, and
 * given back to both when it is trimmed. */
CRMM_TEST(a_superblock_can_lie_across_shards)
{
    fixture f = make_arena("arena_size=16MiB shards=4");
    char *base = arena_base(f.mr);
    const size_t half = 512 * KiB, most = 3 * MiB + half;
    char *y = crmm_test_allocate(f.mr, most), *w = crmm_test_allocate(f.mr, half), *z = crmm_test_allocate(f.mr, half), *q = crmm_test_allocate(f.mr, most);
    char *s2 = crmm_test_allocate(f.mr, 4 * MiB), *s3 = crmm_test_allocate(f.mr, 4 * MiB);
    ck_assert_ptr_eq(w, base + most);
    ck_assert_ptr_eq(z, base + 4 * MiB);
    ck_assert_ptr_eq(s3, base + 12 * MiB);
    release(f.mr, w, half);
    release(f.mr, z, half); /* free: [3.5, 4.5) MiB, across the boundary of shards 0 and 1 */
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_LARGEST_FREE_BLOCK), 1 * MiB);
    char *small = crmm_test_allocate(f.mr, 1000);
    ck_assert_ptr_eq(small, base + most);
    memset(small, 0x33, 1000);
    char *next = crmm_test_allocate(f.mr, 1000);
    ck_assert_ptr_eq(next, small + 1024);
    ck_assert_uint_eq(stats(f.mr).superblocks, 1);
    ck_assert_uint_eq(shard_stats(f.mr, 0).superblocks, 1);
    ck_assert_uint_eq(shard_stats(f.mr, 0).free_bytes, 0);
    ck_assert_uint_eq(shard_stats(f.mr, 1).free_bytes, 0);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_FREE), 1 * MiB - 2048);
    free_all(f.mr, {next, 1000}, {small, 1000});
    ck_assert_crmm_ok(crmm_resource_trim(f.mr)); /* the empty superblock goes back to both shards */
    ck_assert_uint_eq(stats(f.mr).superblocks, 0);
    ck_assert_uint_eq(shard_stats(f.mr, 0).free_bytes, half);
    ck_assert_uint_eq(shard_stats(f.mr, 1).free_bytes, half);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_LARGEST_FREE_BLOCK), 1 * MiB);
    free_all(f.mr, {y, most}, {q, most}, {s2, 4 * MiB}, {s3, 4 * MiB});
    allocate_and_free(f.mr, 16 * MiB);
    drop_arena(&f);
}

/* shards = 1 is the arena with one lock: every thread's large blocks come from the one range,
 * first fit from its start; and small arenas get one shard by default. */
CRMM_TEST(one_shard_is_the_arena_of_one_lock)
{
    fixture f = make_arena("arena_size=64MiB shards=1");
    char *base = arena_base(f.mr);
    crmm_arena_shard_stats s0 = shard_stats(f.mr, 0);
    ck_assert_uint_eq(s0.offset, 0);
    ck_assert_uint_eq(s0.size, 64 * MiB);
    crew c;
    crew_start(&c, f.mr);
    s0 = shard_stats(f.mr, 0);
    ck_assert_uint_eq(s0.large_blocks, 4);
    ck_assert_uint_eq(s0.superblocks, 4);
    ck_assert_uint_eq(s0.thread_arenas, 5); /* theirs and this thread's */
    /* first fit from the start: 4 large blocks and 4 superblocks fill the first 16 MiB exactly */
    for (int i = 0; i < CREW; i++)
        ck_assert_uint_lt((uintptr_t)((char *)c.w[i].p_large - base), 16 * MiB);
    ck_assert_uint_eq(s0.largest_free, 48 * MiB);
    crew_finish(&c);
    ck_assert_uint_eq(stats(f.mr).global_largest_free, 64 * MiB);
    drop_arena(&f);

    /* the default: one shard per 64 superblocks, at most 8 */
    const struct {
        const char *params;
        uint64_t shards;
    } defaults[] = {
        {"arena_size=4MiB", 1},
        {"arena_size=127MiB", 1},
        {"arena_size=128MiB", 2},
        {"arena_size=256MiB", 4},
        {"arena_size=1GiB", 8},
        {"arena_size=4MiB superblock_size=64KiB", 1},
        {"arena_size=32MiB superblock_size=64KiB", 8},
        {"arena_size=64MiB superblock_size=64MiB", 1},
    };
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
        f = make_arena(defaults[i].params);
        ck_assert_msg(stats(f.mr).shards == defaults[i].shards, "%s: %llu shards", defaults[i].params,
                      (unsigned long long)stats(f.mr).shards);
        drop_arena(&f);
    }
}

CRMM_TEST(as_many_shards_as_superblocks)
{
    /* the most there may be: one superblock each */
    fixture f = make_arena("arena_size=4MiB shards=4");
    ck_assert_uint_eq(stats(f.mr).shards, 4);
    allocate_and_free(f.mr, 4 * MiB);
    crmm_arena_shard_stats s = {.shard = 4};
    ck_assert_crmm(crmm_resource_control(f.mr, CRMM_ARENA_GET_SHARD_STATS, &s), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "no shard 4 (it has 4)") != NULL, "%s", crmm_last_error());
    ck_assert_crmm(crmm_resource_control(f.mr, CRMM_ARENA_GET_SHARD_STATS, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    drop_arena(&f);
}

/* Four threads hold empty superblocks in four shards; a request for the whole arena defragments
 * (takes them from every shard) and then lies across all shards. */
CRMM_TEST(defragment_works_across_shards)
{
    fixture f = make_arena("arena_size=16MiB shards=4");
    enum { T = 4 };
    holder h[T];
    pthread_t t[T];
    for (int i = 0; i < T; i++) {
        h[i] = HOLDER(f.mr, .last = CRMM_OK);
        ck_assert_int_eq(pthread_create(&t[i], NULL, hold_empty_superblocks, &h[i]), 0);
        holder_wait(&h[i], 1); /* one after the other: the threads get homes 0, 2, 1, 3 */
    }
    for (unsigned k = 0; k < T; k++) {
        crmm_arena_shard_stats s = shard_stats(f.mr, k);
        ck_assert_uint_eq(s.superblocks, 4);
        ck_assert_uint_eq(s.free_bytes, 0);
        ck_assert_uint_eq(s.thread_arenas, 1);
    }
    ck_assert_uint_eq(stats(f.mr).superblocks_held, 16);
    void *all = crmm_test_allocate(f.mr, 16 * MiB);
    crmm_arena_stats s = stats(f.mr);
    ck_assert_uint_eq(s.defragmentations, 1);
    ck_assert_uint_eq(s.superblocks, 0);
    ck_assert_uint_eq(s.large_blocks, 1);
    for (unsigned k = 0; k < T; k++)
        ck_assert_uint_eq(shard_stats(f.mr, k).large_bytes, 4 * MiB);
    release(f.mr, all, 16 * MiB);
    for (int i = 0; i < T; i++)
        holder_go(&h[i], 2); /* they allocate again (new superblocks) and exit */
    for (int i = 0; i < T; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_int_eq(h[i].last, CRMM_OK);
    }
    ck_assert_uint_eq(stats(f.mr).global_free_bytes, 16 * MiB);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_LARGEST_FREE_BLOCK), 16 * MiB);
    drop_arena(&f);
}

int main(void)
{
    return crmm_test_main("arena_shards", 60);
}
