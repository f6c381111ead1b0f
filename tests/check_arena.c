/* check_arena.c — the arena plugin over host memory (no GPU): the conformance suite, then what
 * is particular to the arena: superblocks split and merge, defragmentation on failure, the dump
 * file, the out-of-memory message, a fixed size, thread exit, frees from other threads, several
 * arenas in one thread, bad parameters and bad pointers, and a many-thread stress run. */
#include "build_config.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <crmm/arena.h>
#include "conformance.h"
#include "test_support.h"
#include "arena_slab.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static const crmm_test_chain arena_chains[] = {
    {"arena_over_host", "[resource.h]\nplugin = host\n[resource.a]\nplugin = arena\nupstream = h\narena_size = 1280MiB\n",
     "a", 0, 0},
    {"arena_64k_superblocks_over_host",
     "[resource.h]\nplugin = host\n[resource.a]\nplugin = arena\nupstream = h\narena_size = 1100MiB\nsuperblock_size = 64KiB\n",
     "a", 0, 0},
};

/* ---- helpers ------------------------------------------------------------------------------ */

typedef struct fixture {
    crmm_resource *host, *mr;
} fixture;

static fixture make_arena(const char *params)
{
    fixture f;
    ck_assert_crmm_ok(crmm_resource_create("host", "", NULL, &f.host));
    ck_assert_crmm_ok(crmm_resource_create("arena", params, f.host, &f.mr));
    return f;
}

static void drop_arena(fixture *f)
{
    crmm_resource_release(f->mr);
    crmm_resource_release(f->host);
}

static crmm_arena_stats stats(crmm_resource *mr)
{
    crmm_arena_stats s;
    ck_assert_crmm_ok(crmm_resource_control(mr, CRMM_ARENA_GET_STATS, &s));
    return s;
}

static void release(crmm_resource *mr, void *p, size_t n)
{
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, n, NULL));
}

/* ---- internals a user relies on ----------------------------------------------------------- */

/* (Loops below test with `if` and fail with ck_abort_msg: every passing ck_assert costs Check a
 * write to its log file.) */
START_TEST(size_classes_round_up_to_256_byte_multiples)
{
    unsigned prev = 0;
    for (size_t n = 1; n <= 16 * MiB; n += (n < 64 * KiB ? 1 : 997)) {
        unsigned c = arena_size_class(n);
        size_t b = arena_class_bytes(c);
        if (b < n || b % 256)
            ck_abort_msg("%zu bytes → class %u of %zu bytes", n, c, b);
        if (c > 0 && arena_class_bytes(c - 1) >= n)
            ck_abort_msg("%zu bytes → class %u, but class %u (%zu) fits", n, c, c - 1, arena_class_bytes(c - 1));
        if (n > 1024 && b - n >= b / 5 + 256)
            ck_abort_msg("%zu bytes → %zu: too much waste", n, b);
        if (c < prev)
            ck_abort_msg("%zu bytes → class %u, below the class of a smaller size (%u)", n, c, prev);
        prev = c;
    }
}
END_TEST

/* The block index of every block start of the largest superblock (1 GiB) is exact, and the
 * bytes just before and after a start are no block start. */
START_TEST(block_index_is_exact_in_the_largest_superblock)
{
    const size_t sb_size = (size_t)1 << 30;
    arena_slab_pool pool;
    arena_slab_pool_init(&pool, sb_size);
    arena_slab *sb = arena_slab_new(&pool);
    ck_assert_ptr_nonnull(sb);
    sb->base = (char *)((uintptr_t)1 << 40);
    unsigned classes = arena_size_class(sb_size / 8) + 1;
    for (unsigned c = 0; c < classes; c++) {
        arena_slab_format(sb, sb_size, c);
        uint32_t idx = UINT32_MAX;
        for (uint32_t i = 0; i < sb->capacity; i++) {
            char *p = sb->base + (size_t)i * sb->block_size;
            if (!arena_slab_index(sb, p, &idx) || idx != i)
                ck_abort_msg("class %u (%u B) block %u: index %u", c, sb->block_size, i, idx);
            if (sb->block_size > 256 && (arena_slab_index(sb, p + 256, &idx) || (i && arena_slab_index(sb, p - 256, &idx))))
                ck_abort_msg("class %u block %u: a neighbouring granule passes for a block start", c, i);
        }
        ck_assert(!arena_slab_index(sb, sb->base + (size_t)sb->capacity * sb->block_size, &idx));
        ck_assert(!arena_slab_index(sb, sb->base + 1, &idx));
        ck_assert(!arena_slab_index(sb, sb->base - 256, &idx));
    }
    arena_slab_pool_fini(&pool);
}
END_TEST

/* ---- arena behaviour ---------------------------------------------------------------------- */

START_TEST(superblock_splits_and_merges_back_whole)
{
    fixture f = make_arena("arena_size=4MiB superblock_size=1MiB");
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_LARGEST_FREE_BLOCK), 4 * MiB);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_FREE), 4 * MiB);
    enum { N = 3000 };
    static void *p[N];
    for (int i = 0; i < N; i++)
        p[i] = crmm_test_allocate(f.mr, 200 + (size_t)(i % 56)); /* all in the 256-byte class */
    /* 3000 blocks of 256 B split one superblock: the largest free block is what is left outside it */
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_LARGEST_FREE_BLOCK), 3 * MiB);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_FREE), 4 * MiB - N * 256);
    ck_assert_uint_eq(stats(f.mr).superblocks_held, 1);
    for (int i = 0; i < N; i++)
        release(f.mr, p[i], 200 + (size_t)(i % 56));
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_FREE), 4 * MiB);
    /* the empty superblock stays with the thread until trimmed; then it merges into one block */
    ck_assert_crmm_ok(crmm_resource_trim(f.mr));
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_LARGEST_FREE_BLOCK), 4 * MiB);
    crmm_arena_stats s = stats(f.mr);
    ck_assert_uint_eq(s.superblocks, 0);
    ck_assert_uint_eq(s.global_largest_free, 4 * MiB);
    /* and can be handed out whole */
    void *all = crmm_test_allocate(f.mr, 4 * MiB);
    release(f.mr, all, 4 * MiB);
    drop_arena(&f);
}
END_TEST

START_TEST(blocks_of_a_superblock_are_adjacent_and_aligned)
{
    fixture f = make_arena("arena_size=4MiB");
    char *a = crmm_test_allocate(f.mr, 1000), *b = crmm_test_allocate(f.mr, 1000), *c = crmm_test_allocate(f.mr, 1000);
    ck_assert_uint_eq((uintptr_t)a % 256, 0);
    ck_assert_ptr_eq(b, a + 1024);
    ck_assert_ptr_eq(c, b + 1024);
    release(f.mr, b, 1000);
    ck_assert_ptr_eq(crmm_test_allocate(f.mr, 1024), b); /* freed on the same thread and stream: reused at once */
    release(f.mr, a, 1000);
    release(f.mr, b, 1024);
    release(f.mr, c, 1000);
    drop_arena(&f);
}
END_TEST

/* Four superblocks held empty by this thread: a request for the whole arena succeeds only after
 * the arena takes them back (defragments). */
START_TEST(defragments_on_failure_and_retries)
{
    fixture f = make_arena("arena_size=4MiB superblock_size=1MiB");
    size_t sizes[4] = {256, 512, 768, 1024};
    for (int k = 0; k < 4; k++)
        release(f.mr, crmm_test_allocate(f.mr, sizes[k]), sizes[k]);
    crmm_arena_stats s = stats(f.mr);
    ck_assert_uint_eq(s.superblocks_held, 4);
    ck_assert_uint_eq(s.global_free_bytes, 0);
    void *all = crmm_test_allocate(f.mr, 4 * MiB);
    s = stats(f.mr);
    ck_assert_uint_eq(s.defragmentations, 1);
    ck_assert_uint_eq(s.superblocks_held, 0);
    release(f.mr, all, 4 * MiB);
    /* the thread's arena notices its superblocks are gone and takes new ones */
    for (int k = 0; k < 4; k++)
        release(f.mr, crmm_test_allocate(f.mr, sizes[k]), sizes[k]);
    ck_assert_uint_eq(stats(f.mr).superblocks_held, 4);
    drop_arena(&f);
}
END_TEST

typedef struct holder {
    crmm_resource *mr;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stage;
    void **blocks;
    size_t nblocks, size;
    crmm_status last;
    char message[512];
} holder;

static void holder_wait(holder *h, int stage)
{
    pthread_mutex_lock(&h->lock);
    while (h->stage < stage)
        pthread_cond_wait(&h->cond, &h->lock);
    pthread_mutex_unlock(&h->lock);
}

static void holder_go(holder *h, int stage)
{
    pthread_mutex_lock(&h->lock);
    h->stage = stage;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
}

/* Allocates one block of each of four classes and frees them (stage 1), waits, then does it
 * again once its superblocks were taken (stage 3). */
static void *hold_empty_superblocks(void *arg)
{
    holder *h = arg;
    size_t sizes[4] = {256, 512, 768, 1024};
    for (int k = 0; k < 4; k++) {
        void *p;
        if (crmm_resource_allocate(h->mr, sizes[k], NULL, &p) != CRMM_OK ||
            crmm_resource_deallocate(h->mr, p, sizes[k], NULL) != CRMM_OK)
            h->last = CRMM_ERROR_STATE;
    }
    holder_go(h, 1);
    holder_wait(h, 2);
    for (int k = 0; k < 4; k++) {
        void *p;
        if (crmm_resource_allocate(h->mr, sizes[k], NULL, &p) != CRMM_OK ||
            crmm_resource_deallocate(h->mr, p, sizes[k], NULL) != CRMM_OK)
            h->last = CRMM_ERROR_STATE;
    }
    return NULL;
}

START_TEST(defragment_takes_empty_superblocks_from_a_live_thread)
{
    fixture f = make_arena("arena_size=4MiB");
    holder h = {.mr = f.mr, .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .last = CRMM_OK};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, hold_empty_superblocks, &h), 0);
    holder_wait(&h, 1);
    ck_assert_uint_eq(stats(f.mr).superblocks_held, 4);
    void *all = crmm_test_allocate(f.mr, 4 * MiB); /* the other thread is alive and holds all four */
    ck_assert_uint_eq(stats(f.mr).defragmentations, 1);
    release(f.mr, all, 4 * MiB);
    holder_go(&h, 2);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(h.last, CRMM_OK);
    ck_assert_uint_eq(stats(f.mr).thread_arenas, 1); /* this thread's only: the other one's went with it */
    ck_assert_uint_eq(stats(f.mr).global_free_bytes, 4 * MiB); /* and it gave its superblocks back */
    drop_arena(&f);
}
END_TEST

/* Allocates 1 KiB blocks until the arena is full (stage 1), hands them over, waits (stage 2). */
static void *fill_arena(void *arg)
{
    holder *h = arg;
    size_t cap = 8192;
    h->blocks = malloc(cap * sizeof *h->blocks);
    for (;;) {
        void *p;
        crmm_status st = crmm_resource_allocate(h->mr, h->size, NULL, &p);
        if (st != CRMM_OK) {
            h->last = st;
            snprintf(h->message, sizeof h->message, "%s", crmm_last_error());
            break;
        }
        if (h->nblocks == cap)
            break;
        h->blocks[h->nblocks++] = p;
    }
    holder_go(h, 1);
    holder_wait(h, 2);
    return NULL;
}

START_TEST(memory_filled_by_one_thread_and_freed_by_another_comes_back)
{
    fixture f = make_arena("arena_size=4MiB");
    holder h = {.mr = f.mr, .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .size = 1024};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, fill_arena, &h), 0);
    holder_wait(&h, 1);
    ck_assert_int_eq(h.last, CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_eq(h.nblocks, 4096); /* 4 MiB of 1 KiB blocks: no byte lost */
    ck_assert_msg(strstr(h.message, "out of memory: arena: failed to allocate 1.0 KiB") != NULL, "%s", h.message);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS), 4096);
    for (size_t i = 0; i < h.nblocks; i++) /* freed here while the filling thread lives */
        release(f.mr, h.blocks[i], h.size);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS), 0);
    void *all = crmm_test_allocate(f.mr, 4 * MiB);
    release(f.mr, all, 4 * MiB);
    holder_go(&h, 2);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    free(h.blocks);
    drop_arena(&f);
}
END_TEST

static void *alloc_then_exit(void *arg)
{
    holder *h = arg;
    h->blocks = malloc(h->nblocks * sizeof *h->blocks);
    for (size_t i = 0; i < h->nblocks; i++)
        if (crmm_resource_allocate(h->mr, h->size, NULL, &h->blocks[i]) != CRMM_OK)
            h->last = CRMM_ERROR_STATE;
    return NULL;
}

/* A thread fills the arena exactly (its last superblock is still its own) and exits; its blocks
 * are freed by another thread afterwards: all of it comes back. */
START_TEST(thread_exit_returns_its_superblocks)
{
    fixture f = make_arena("arena_size=4MiB");
    holder h = {.mr = f.mr, .size = 1024, .nblocks = 4096, .last = CRMM_OK};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, alloc_then_exit, &h), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(h.last, CRMM_OK);
    crmm_arena_stats s = stats(f.mr);
    ck_assert_uint_eq(s.thread_arenas, 0);
    ck_assert_uint_eq(s.superblocks_held, 0);
    ck_assert_uint_eq(s.superblocks_detached, 4);
    for (size_t i = 0; i < h.nblocks; i++)
        release(f.mr, h.blocks[i], h.size);
    s = stats(f.mr);
    ck_assert_uint_eq(s.superblocks, 0);
    ck_assert_uint_eq(s.global_free_bytes, 4 * MiB);
    free(h.blocks);

    /* a thread that frees what it allocated leaves nothing behind when it exits */
    holder g = {.mr = f.mr, .size = 300, .nblocks = 100, .last = CRMM_OK};
    ck_assert_int_eq(pthread_create(&t, NULL, alloc_then_exit, &g), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    for (size_t i = 0; i < g.nblocks; i++)
        release(f.mr, g.blocks[i], g.size);
    free(g.blocks);
    ck_assert_uint_eq(stats(f.mr).global_free_bytes, 4 * MiB);
    drop_arena(&f);
}
END_TEST

typedef struct free_job {
    crmm_resource *mr;
    void **blocks;
    size_t from, to, size;
    int errors;
} free_job;

static void *free_range(void *arg)
{
    free_job *j = arg;
    for (size_t i = j->from; i < j->to; i++)
        if (crmm_resource_deallocate(j->mr, j->blocks[i], j->size, NULL) != CRMM_OK)
            j->errors++;
    return NULL;
}

START_TEST(frees_from_other_threads_come_back_to_the_owner)
{
    fixture f = make_arena("arena_size=16MiB");
    enum { N = 4000 };
    static void *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = crmm_test_allocate(f.mr, 512);
        memset(blocks[i], 0x11, 512);
    }
    pthread_t t[4];
    free_job j[4];
    for (int k = 0; k < 4; k++) {
        j[k] = (free_job){f.mr, blocks, (size_t)k * N / 4, (size_t)(k + 1) * N / 4, 512, 0};
        ck_assert_int_eq(pthread_create(&t[k], NULL, free_range, &j[k]), 0);
    }
    for (int k = 0; k < 4; k++) {
        ck_assert_int_eq(pthread_join(t[k], NULL), 0);
        ck_assert_int_eq(j[k].errors, 0);
    }
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE), 0);
    /* this thread reuses them: no new superblock beyond the two it had */
    for (int i = 0; i < N; i++)
        blocks[i] = crmm_test_allocate(f.mr, 512);
    ck_assert_uint_le(stats(f.mr).superblocks, 2);
    for (int i = 0; i < N; i++)
        release(f.mr, blocks[i], 512);
    ck_assert_crmm_ok(crmm_resource_trim(f.mr));
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_LARGEST_FREE_BLOCK), 16 * MiB);
    drop_arena(&f);
}
END_TEST

START_TEST(out_of_memory_message_names_the_sizes)
{
    crmm_config *cfg;
    crmm_resource *mr;
    ck_assert_crmm_ok(crmm_config_load_string("[resource.h]\nplugin = host\n[resource.main]\nplugin = arena\nupstream = h\n"
                                              "arena_size = 8MiB\n", "oom", &cfg));
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "main", -1, &mr));
    void *p = (void *)1;
    ck_assert_crmm(crmm_resource_allocate(mr, (size_t)1 << 50, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(p);
    ck_assert_str_eq(crmm_last_error(), "out of memory: arena 'main': failed to allocate 1.0 PiB "
                                        "(arena size 8.0 MiB, 8.0 MiB free, largest free block 8.0 MiB)");
    void *half = crmm_test_allocate(mr, 5 * MiB);
    ck_assert_crmm(crmm_resource_allocate(mr, 4 * MiB, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_msg(strstr(crmm_last_error(), "failed to allocate 4.0 MiB (arena size 8.0 MiB, 3.0 MiB free, largest free "
                                            "block 3.0 MiB)") != NULL, "%s", crmm_last_error());
    release(mr, half, 5 * MiB);
    crmm_resource_release(mr);
    crmm_config_free(cfg);
}
END_TEST

START_TEST(never_grows)
{
    fixture f = make_arena("arena_size=8MiB");
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_RESERVED), 8 * MiB);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_MAXIMUM_SIZE), 8 * MiB);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    ck_assert_uint_eq(crmm_test_query(f.host, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_uint_eq(crmm_test_query(f.host, CRMM_QUERY_BYTES_IN_USE), 8 * MiB);
    static void *p[20000];
    int n = 0;
    void *q;
    while (n < 20000 && crmm_resource_allocate(f.mr, 700, NULL, &q) == CRMM_OK)
        p[n++] = q;
    ck_assert_int_eq(n, 8 * (int)(MiB / 768)); /* 8 MiB of 768-byte blocks: 1365 per superblock, no byte lost */
    ck_assert_crmm(crmm_resource_allocate(f.mr, 2 * MiB, NULL, &q), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_RESERVED), 8 * MiB);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_RESERVED_PEAK), 8 * MiB);
    ck_assert_uint_eq(crmm_test_query(f.host, CRMM_QUERY_ALLOCATIONS), 1); /* no second upstream call */
    ck_assert_uint_eq(crmm_test_query(f.host, CRMM_QUERY_BYTES_IN_USE), 8 * MiB);
    for (int i = 0; i < n; i++)
        release(f.mr, p[i], 700);
    ck_assert_crmm_ok(crmm_resource_trim(f.mr));
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_RESERVED), 8 * MiB); /* trim cannot shrink it either */
    ck_assert_uint_eq(crmm_test_query(f.host, CRMM_QUERY_BYTES_IN_USE), 8 * MiB);
    drop_arena(&f);
}
END_TEST

START_TEST(queries_count_allocations)
{
    fixture f = make_arena("arena_size=64MiB");
    void *small[10], *large[3];
    for (int i = 0; i < 10; i++)
        small[i] = crmm_test_allocate(f.mr, 1000);
    for (int i = 0; i < 3; i++)
        large[i] = crmm_test_allocate(f.mr, 1 * MiB);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS), 13);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE), 10000 + 3 * MiB);
    for (int i = 0; i < 10; i++)
        release(f.mr, small[i], 1000);
    for (int i = 0; i < 3; i++)
        release(f.mr, large[i], 1 * MiB);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS_PEAK), 13);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE_PEAK), 10000 + 3 * MiB);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS_TOTAL), 13);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_TOTAL), 10000 + 3 * MiB);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_FREE), 64 * MiB);
    double frag = -1;
    ck_assert_crmm_ok(crmm_resource_fragmentation(f.mr, &frag));
    ck_assert(frag >= 0.0 && frag < 0.05); /* one held superblock apart from the rest */
    uint64_t v;
    ck_assert_crmm(crmm_resource_query(f.mr, (crmm_query)999, &v), CRMM_ERROR_UNSUPPORTED);
    drop_arena(&f);
}
END_TEST

START_TEST(dump_file_is_written_on_failure)
{
    char *dir = crmm_test_tmpdir();
    ck_assert_ptr_nonnull(dir);
    char params[4200], path[4200];
    snprintf(params, sizeof params, "arena_size=4MiB dump_log_on_failure=true dump_file=%s/dump.%%p.dev%%d.log", dir);
    snprintf(path, sizeof path, "%s/dump.%ld.devhost.log", dir, (long)getpid());
    fixture f = make_arena(params);
    void *small = crmm_test_allocate(f.mr, 1000);
    void *large = crmm_test_allocate(f.mr, 2 * MiB);
    void *p;
    ck_assert_crmm(crmm_resource_allocate(f.mr, 3 * MiB, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    char *text = crmm_test_read_file(path);
    ck_assert_msg(text != NULL, "no dump at %s", path);
    const char *expected[] = {
        "arena ran out of memory trying to allocate 3.0 MiB (3145728 bytes)\n",
        "  arena size: 4.0 MiB (4194304 bytes)\n",
        "  superblock size: 1.0 MiB, page size: 16.0 KiB, small blocks up to 128.0 KiB\n",
        "  bytes in use: 2.0 MiB (2098152 bytes) in 2 allocations\n",
        "  largest free block: 1.0 MiB (1048576 bytes)\n",
        "  fragmentation: ",
        "  superblocks: 1, large blocks: 1, free spans: 1\n",
        "  superblock 0: start=",
        ", size=1.0 MiB, class=1.0 KiB, blocks=1024, free=1023, state=held\n",
        "  large 1: start=",
        ", size=2.0 MiB, requested=2.0 MiB\n",
        "  free 2: start=",
    };
    for (size_t k = 0; k < sizeof expected / sizeof expected[0]; k++)
        ck_assert_msg(strstr(text, expected[k]) != NULL, "dump lacks \"%s\":\n%s", expected[k], text);
    /* on request too, appended */
    free(text);
    ck_assert_crmm_ok(crmm_resource_control(f.mr, CRMM_ARENA_DUMP, path));
    text = crmm_test_read_file_or_fail(path);
    ck_assert_ptr_nonnull(strstr(text, "arena state on request"));
    ck_assert_ptr_nonnull(strstr(text, "ran out of memory"));
    free(text);
    ck_assert_crmm(crmm_resource_control(f.mr, CRMM_ARENA_DUMP, "/nonexistent-dir/x.log"), CRMM_ERROR_IO);
    ck_assert_crmm(crmm_resource_control(f.mr, CRMM_ARENA_DUMP, "x.%q.log"), CRMM_ERROR_CONFIG);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "'x.%q.log'"));
    release(f.mr, small, 1000);
    release(f.mr, large, 2 * MiB);
    drop_arena(&f);
    unlink(path);
    rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(no_dump_file_unless_asked)
{
    char *dir = crmm_test_tmpdir();
    char params[4200], path[4200];
    snprintf(params, sizeof params, "arena_size=4MiB dump_file=%s/dump.log", dir);
    snprintf(path, sizeof path, "%s/dump.log", dir);
    fixture f = make_arena(params);
    void *p;
    ck_assert_crmm(crmm_resource_allocate(f.mr, 5 * MiB, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_int_ne(access(path, F_OK), 0);
    drop_arena(&f);
    rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(two_arenas_in_one_thread_keep_their_own_memory)
{
    crmm_resource *host, *a, *b;
    ck_assert_crmm_ok(crmm_resource_create("host", "", NULL, &host));
    ck_assert_crmm_ok(crmm_resource_create("arena", "arena_size=4MiB", host, &a));
    ck_assert_crmm_ok(crmm_resource_create("arena", "arena_size=8MiB", host, &b));
    void *pa[50], *pb[50];
    for (int i = 0; i < 50; i++) {
        pa[i] = crmm_test_allocate(a, 512);
        pb[i] = crmm_test_allocate(b, 512);
        memset(pa[i], 0xa, 512);
        memset(pb[i], 0xb, 512);
    }
    ck_assert_uint_eq(crmm_test_query(a, CRMM_QUERY_ALLOCATIONS), 50);
    ck_assert_uint_eq(crmm_test_query(b, CRMM_QUERY_ALLOCATIONS), 50);
    ck_assert_crmm(crmm_resource_deallocate(b, pa[0], 512, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(a, pb[0], 512, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    for (int i = 0; i < 50; i++)
        release(a, pa[i], 512);
    crmm_resource_release(a); /* b's cache in this thread must survive a's end */
    for (int i = 0; i < 50; i++) {
        const unsigned char *c = pb[i];
        ck_assert_uint_eq(c[0], 0xb);
        ck_assert_uint_eq(c[511], 0xb);
        release(b, pb[i], 512);
    }
    ck_assert_crmm_ok(crmm_resource_create("arena", "arena_size=4MiB", host, &a)); /* a new one, same thread */
    void *p = crmm_test_allocate(a, 512);
    release(a, p, 512);
    p = crmm_test_allocate(b, 512);
    release(b, p, 512);
    crmm_resource_release(a);
    crmm_resource_release(b);
    crmm_resource_release(host);
}
END_TEST

START_TEST(host_arena_ignores_streams)
{
    fixture f = make_arena("arena_size=4MiB");
    crmm_cuda_stream_t s1 = (crmm_cuda_stream_t)0x1234, s2 = (crmm_cuda_stream_t)0x5678; /* never used as streams */
    void *p, *q;
    ck_assert_crmm_ok(crmm_resource_allocate(f.mr, 1000, s1, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(f.mr, p, 1000, s2));
    ck_assert_crmm_ok(crmm_resource_allocate(f.mr, 1000, s2, &q));
    ck_assert_ptr_eq(q, p); /* one arena per thread: freed on "s2", reused at once */
    ck_assert_crmm_ok(crmm_resource_deallocate(f.mr, q, 1000, CRMM_CUDA_STREAM_PER_THREAD));
    ck_assert_crmm_ok(crmm_resource_allocate(f.mr, 3 * MiB, s1, &q));
    ck_assert_crmm_ok(crmm_resource_deallocate(f.mr, q, 3 * MiB, s2));
    ck_assert_uint_eq(stats(f.mr).thread_arenas, 1);
    drop_arena(&f);
}
END_TEST

/* ---- bad input ---------------------------------------------------------------------------- */

static void expect_create_error(const char *params, crmm_status want, const char *text)
{
    crmm_resource *host, *mr = (crmm_resource *)0x1;
    ck_assert_crmm_ok(crmm_resource_create("host", "", NULL, &host));
    crmm_clear_error();
    crmm_status st = crmm_resource_create("arena", params, host, &mr);
    ck_assert_msg(st == want, "\"%s\" gave %s: %s", params, crmm_status_name(st), crmm_last_error());
    ck_assert_msg(strstr(crmm_last_error(), text) != NULL, "\"%s\": message \"%s\" lacks \"%s\"", params,
                  crmm_last_error(), text);
    ck_assert_ptr_eq(mr, (crmm_resource *)0x1);
    ck_assert_int_eq(crmm_resource_refcount(host), 1); /* no reference left behind */
    ck_assert_uint_eq(crmm_test_query(host, CRMM_QUERY_ALLOCATIONS), 0);
    crmm_resource_release(host);
}

START_TEST(bad_parameters_are_refused_clearly)
{
    expect_create_error("", CRMM_ERROR_CONFIG, "arena: arena_size is required over host memory, in bytes");
    expect_create_error("superblock_size=1MiB", CRMM_ERROR_CONFIG, "arena_size is required");
    expect_create_error("arena_size=4MiB superblock_size=0", CRMM_ERROR_CONFIG,
                        "arena: superblock_size: 0 is below the minimum 65536");
    expect_create_error("arena_size=4MiB superblock_size=100KiB", CRMM_ERROR_CONFIG, "superblock_size: 102400 is not a power of two");
    expect_create_error("arena_size=4GiB superblock_size=2GiB", CRMM_ERROR_CONFIG, "superblock_size: 2147483648 is above the maximum 1073741824");
    expect_create_error("arena_size=4MiB superblock_size=junk", CRMM_ERROR_CONFIG, "superblock_size");
    expect_create_error("arena_size=lots", CRMM_ERROR_CONFIG, "arena_size");
    expect_create_error("arena_size=0", CRMM_ERROR_CONFIG, "arena_size 0 B is smaller than one superblock (1.0 MiB)");
    expect_create_error("arena_size=1000KiB", CRMM_ERROR_CONFIG, "smaller than one superblock");
    expect_create_error("arena_size=4MiB dump_log_on_failure=maybe", CRMM_ERROR_CONFIG, "dump_log_on_failure");
    expect_create_error("arena_size=4MiB dump_file=", CRMM_ERROR_CONFIG, "dump_file");
    /* a pattern is checked when the arena is made, not at the first dump */
    expect_create_error("arena_size=4MiB dump_file=dump.%x.log", CRMM_ERROR_CONFIG,
                        "arena: dump_file: file name 'dump.%x.log': unknown '%x'");
    expect_create_error("arena_size=4MiB arena_szie=1", CRMM_ERROR_CONFIG, "arena_szie");
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) /* they abort on a failed huge malloc */
    /* the upstream cannot give it: its error, with the arena's context */
    expect_create_error("arena_size=512GiB", CRMM_ERROR_OUT_OF_MEMORY, "arena: taking arena_size 512.0 GiB from upstream");
#endif
    /* without an upstream */
    crmm_resource *mr;
    ck_assert_crmm(crmm_resource_create("arena", "arena_size=4MiB", NULL, &mr), CRMM_ERROR_CONFIG);
}
END_TEST

START_TEST(bad_pointers_are_refused_and_harmless)
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
    release(f.mr, small, 1000);
    release(f.mr, large, 1 * MiB);
    ck_assert_crmm(crmm_resource_deallocate(f.mr, small, 1000, NULL), CRMM_ERROR_INVALID_ARGUMENT); /* twice */
    ck_assert_msg(strstr(crmm_last_error(), "freed twice") != NULL, "%s", crmm_last_error());
    ck_assert_crmm(crmm_resource_deallocate(f.mr, large, 1 * MiB, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    /* nothing was corrupted: counts are right and every byte can be handed out again */
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE), 0);
    void *a = crmm_test_allocate(f.mr, 1000), *b = crmm_test_allocate(f.mr, 1000);
    ck_assert_ptr_ne(a, b);
    release(f.mr, a, 1000);
    release(f.mr, b, 1000);
    ck_assert_crmm_ok(crmm_resource_trim(f.mr));
    void *all = crmm_test_allocate(f.mr, 4 * MiB);
    release(f.mr, all, 4 * MiB);
    free(heap);
    drop_arena(&f);
}
END_TEST

static void *free_once(void *arg)
{
    free_job *j = arg;
    free_range(j);
    return NULL;
}

START_TEST(double_free_from_another_thread_is_refused)
{
    fixture f = make_arena("arena_size=4MiB");
    void *blocks[2] = {crmm_test_allocate(f.mr, 1000), crmm_test_allocate(f.mr, 1000)};
    free_job j = {f.mr, blocks, 0, 1, 1000, 0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, free_once, &j), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(j.errors, 0);
    j.errors = 0;
    ck_assert_int_eq(pthread_create(&t, NULL, free_once, &j), 0); /* again, from another thread */
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(j.errors, 1);
    ck_assert_crmm(crmm_resource_deallocate(f.mr, blocks[0], 1000, NULL), CRMM_ERROR_INVALID_ARGUMENT); /* and here */
    release(f.mr, blocks[1], 1000);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS), 0);
    drop_arena(&f);
}
END_TEST

START_TEST(control_ops)
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
END_TEST

START_TEST(destroy_reports_live_allocations_and_frees_everything)
{
    fixture f = make_arena("arena_size=4MiB");
    crmm_test_allocate(f.mr, 1000);
    crmm_test_allocate(f.mr, 2 * MiB);
    crmm_resource_release(f.mr); /* logs "arena resource '' destroyed with 2 live allocations" */
    ck_assert_uint_eq(crmm_test_query(f.host, CRMM_QUERY_ALLOCATIONS), 0);
    crmm_resource_release(f.host);
}
END_TEST

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

/* Four threads, four shards: each thread has its own home shard, and its large block and its
 * superblock come from there (so they take different locks). */
START_TEST(threads_take_large_blocks_from_their_own_shards)
{
    fixture f = make_arena("arena_size=64MiB shards=4"); /* no thread arena here until the end */
    ck_assert_uint_eq(stats(f.mr).shards, 4);
    enum { T = 4 };
    pthread_barrier_t hold, done;
    pthread_barrier_init(&hold, NULL, T + 1);
    pthread_barrier_init(&done, NULL, T + 1);
    shard_worker w[T];
    pthread_t t[T];
    for (int i = 0; i < T; i++) {
        w[i] = (shard_worker){f.mr, &hold, &done, 3 * MiB, 1000, NULL, NULL, true, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, shard_work, &w[i]), 0);
    }
    pthread_barrier_wait(&hold);
    for (unsigned k = 0; k < T; k++) {
        crmm_arena_shard_stats s = shard_stats(f.mr, k);
        ck_assert_uint_eq(s.offset, k * 16 * MiB);
        ck_assert_uint_eq(s.size, 16 * MiB);
        ck_assert_uint_eq(s.large_blocks, 1);
        ck_assert_uint_eq(s.large_bytes, 3 * MiB);
        ck_assert_uint_eq(s.superblocks, 1);
        ck_assert_uint_eq(s.thread_arenas, 1);
        ck_assert_uint_eq(s.free_bytes, 12 * MiB);
    }
    pthread_barrier_wait(&done);
    for (int i = 0; i < T; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_int_eq(w[i].failed, 0);
    }
    for (unsigned k = 0; k < T; k++) {
        crmm_arena_shard_stats s = shard_stats(f.mr, k);
        ck_assert_uint_eq(s.free_bytes, 16 * MiB); /* the exited threads gave their superblocks back */
        ck_assert_uint_eq(s.thread_arenas, 0);
    }
    /* where the blocks were: each thread's large block and superblock in a shard of its own */
    char *base = arena_base(f.mr);
    bool seen[T] = {false};
    for (int i = 0; i < T; i++) {
        unsigned k = shard_holding(f.mr, base, w[i].p_large);
        ck_assert_msg(!seen[k], "two threads' large blocks in shard %u", k);
        seen[k] = true;
        ck_assert_uint_eq(shard_holding(f.mr, base, w[i].p_small), k);
    }
    pthread_barrier_destroy(&hold);
    pthread_barrier_destroy(&done);
    drop_arena(&f);
}
END_TEST

/* A large block freed by another thread goes back to the shard it came from, not to the freeing
 * thread's home; a small one to its owner's superblock. */
START_TEST(a_free_from_another_thread_goes_to_the_owning_shard)
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
END_TEST

/* One thread, four shards of 4 MiB: what does not fit in its home shard goes to the next one;
 * what fits in no shard alone takes free pages that run on across shards, and gives each shard
 * its pages back when freed. */
START_TEST(large_requests_fall_back_to_other_shards_and_across_them)
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
    release(f.mr, x, 4 * MiB + 512 * KiB);
    release(f.mr, a, 3 * MiB);
    release(f.mr, c, 3 * MiB);
    release(f.mr, d, 3 * MiB);
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
END_TEST

/* A superblock fits in no shard alone, but across the boundary of two: it is taken there, and
 * given back to both when it is trimmed. */
START_TEST(a_superblock_can_lie_across_shards)
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
    release(f.mr, next, 1000);
    release(f.mr, small, 1000);
    ck_assert_crmm_ok(crmm_resource_trim(f.mr)); /* the empty superblock goes back to both shards */
    ck_assert_uint_eq(stats(f.mr).superblocks, 0);
    ck_assert_uint_eq(shard_stats(f.mr, 0).free_bytes, half);
    ck_assert_uint_eq(shard_stats(f.mr, 1).free_bytes, half);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_LARGEST_FREE_BLOCK), 1 * MiB);
    release(f.mr, y, most);
    release(f.mr, q, most);
    release(f.mr, s2, 4 * MiB);
    release(f.mr, s3, 4 * MiB);
    void *all = crmm_test_allocate(f.mr, 16 * MiB);
    release(f.mr, all, 16 * MiB);
    drop_arena(&f);
}
END_TEST

/* shards = 1 is the arena with one lock: every thread's large blocks come from the one range,
 * first fit from its start; and small arenas get one shard by default. */
START_TEST(one_shard_is_the_arena_of_one_lock)
{
    fixture f = make_arena("arena_size=64MiB shards=1");
    char *base = arena_base(f.mr);
    crmm_arena_shard_stats s0 = shard_stats(f.mr, 0);
    ck_assert_uint_eq(s0.offset, 0);
    ck_assert_uint_eq(s0.size, 64 * MiB);
    enum { T = 4 };
    pthread_barrier_t hold, done;
    pthread_barrier_init(&hold, NULL, T + 1);
    pthread_barrier_init(&done, NULL, T + 1);
    shard_worker w[T];
    pthread_t t[T];
    for (int i = 0; i < T; i++) {
        w[i] = (shard_worker){f.mr, &hold, &done, 3 * MiB, 1000, NULL, NULL, true, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, shard_work, &w[i]), 0);
    }
    pthread_barrier_wait(&hold);
    s0 = shard_stats(f.mr, 0);
    ck_assert_uint_eq(s0.large_blocks, 4);
    ck_assert_uint_eq(s0.superblocks, 4);
    ck_assert_uint_eq(s0.thread_arenas, 5); /* theirs and this thread's */
    /* first fit from the start: 4 large blocks and 4 superblocks fill the first 16 MiB exactly */
    for (int i = 0; i < T; i++)
        ck_assert_uint_lt((uintptr_t)((char *)w[i].p_large - base), 16 * MiB);
    ck_assert_uint_eq(s0.largest_free, 48 * MiB);
    pthread_barrier_wait(&done);
    for (int i = 0; i < T; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_int_eq(w[i].failed, 0);
    }
    ck_assert_uint_eq(stats(f.mr).global_largest_free, 64 * MiB);
    pthread_barrier_destroy(&hold);
    pthread_barrier_destroy(&done);
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
END_TEST

START_TEST(bad_shards_are_refused_clearly)
{
    expect_create_error("arena_size=64MiB shards=0", CRMM_ERROR_CONFIG, "arena: shards: 0 is below the minimum 1");
    expect_create_error("arena_size=64MiB shards=65", CRMM_ERROR_CONFIG, "arena: shards: 65 is above the maximum 64");
    expect_create_error("arena_size=64MiB shards=18446744073709551615", CRMM_ERROR_CONFIG, "is above the maximum 64");
    expect_create_error("arena_size=4MiB shards=5", CRMM_ERROR_CONFIG,
                        "arena: shards 5 is too many for arena_size 4.0 MiB: each shard needs at least one superblock "
                        "(1.0 MiB), so at most 4");
    expect_create_error("arena_size=64MiB shards=many", CRMM_ERROR_CONFIG, "shards");
    expect_create_error("arena_size=64MiB shards=-1", CRMM_ERROR_CONFIG, "shards");
    expect_create_error("arena_size=64MiB shards=2.5", CRMM_ERROR_CONFIG, "shards");
    /* the most there may be: one superblock each */
    fixture f = make_arena("arena_size=4MiB shards=4");
    ck_assert_uint_eq(stats(f.mr).shards, 4);
    void *all = crmm_test_allocate(f.mr, 4 * MiB);
    release(f.mr, all, 4 * MiB);
    crmm_arena_shard_stats s = {.shard = 4};
    ck_assert_crmm(crmm_resource_control(f.mr, CRMM_ARENA_GET_SHARD_STATS, &s), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "no shard 4 (it has 4)") != NULL, "%s", crmm_last_error());
    ck_assert_crmm(crmm_resource_control(f.mr, CRMM_ARENA_GET_SHARD_STATS, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    drop_arena(&f);
}
END_TEST

/* Four threads hold empty superblocks in four shards; a request for the whole arena defragments
 * (takes them from every shard) and then lies across all shards. */
START_TEST(defragment_works_across_shards)
{
    fixture f = make_arena("arena_size=16MiB shards=4");
    enum { T = 4 };
    holder h[T];
    pthread_t t[T];
    for (int i = 0; i < T; i++) {
        h[i] = (holder){.mr = f.mr, .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .last = CRMM_OK};
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
END_TEST

/* ---- stress ------------------------------------------------------------------------------- */
/* 8 threads of random allocations and frees (sizes mostly small, some up to 2 MiB), each block
 * filled with a pattern and checked before its free; one block in eight is freed by another
 * thread through a mailbox, and thread 0 trims every 1000 steps, taking the other threads' empty
 * superblocks while they work. CRMM_TEST_ARENA_STRESS_STEPS sets the steps per thread. */

typedef struct mailbox {
    pthread_mutex_t lock;
    void *p[64];
    size_t n[64];
    int count;
} mailbox;

typedef struct stress_job {
    crmm_resource *mr;
    mailbox *box;
    int index;
    long steps;
    size_t huge;                   /* > 0: one allocation in 256 asks for up to this, more than a shard */
    size_t shard_size;
    long huge_ok;                  /* huge allocations that succeeded (those may run out of memory) */
    long errors;
    char first_error[256];
} stress_job;

static unsigned char pattern_of(const void *p, size_t n) { return (unsigned char)(((uintptr_t)p >> 8) ^ n ^ 0x5a); }

static void fill_block(void *p, size_t n)
{
    unsigned char v = pattern_of(p, n);
    if (n <= 64 * KiB) {
        memset(p, v, n);
    } else {
        memset(p, v, 4 * KiB);
        memset((char *)p + n - 4 * KiB, v, 4 * KiB);
    }
}

static int block_intact(const void *p, size_t n)
{
    const unsigned char *b = p, v = pattern_of(p, n);
    size_t head = n <= 64 * KiB ? n : 4 * KiB;
    for (size_t i = 0; i < head; i++)
        if (b[i] != v)
            return 0;
    if (n > 64 * KiB)
        for (size_t i = n - 4 * KiB; i < n; i++)
            if (b[i] != v)
                return 0;
    return 1;
}

static void stress_error(stress_job *j, const char *what, size_t n)
{
    if (!j->errors++)
        snprintf(j->first_error, sizeof j->first_error, "thread %d: %s of %zu bytes: %s", j->index, what, n,
                 crmm_last_error());
}

static void stress_free(stress_job *j, void *p, size_t n)
{
    if (!block_intact(p, n))
        stress_error(j, "corrupted block", n);
    if (crmm_resource_deallocate(j->mr, p, n, NULL) != CRMM_OK)
        stress_error(j, "free", n);
}

static void *stress_thread(void *arg)
{
    stress_job *j = arg;
    enum { LIVE = 100 };
    void *p[LIVE];
    size_t n[LIVE];
    int k = 0;
    uint64_t seed = 42 + (uint64_t)j->index;
    for (long s = 0; s < j->steps; s++) {
        uint64_t r = crmm_test_rand(&seed);
        if (j->index == 0 && s % 1000 == 999 && crmm_resource_trim(j->mr) != CRMM_OK) /* takes empty superblocks */
            stress_error(j, "trim", 0);
        if (k == 0 || (k < LIVE && (r & 1))) {
            uint64_t kind = crmm_test_rand(&seed) % 100;
            size_t size = kind < 80 ? 1 + crmm_test_rand(&seed) % 2048 : kind < 98 ? 1 + crmm_test_rand(&seed) % (128 * KiB)
                                                                             : 1 + crmm_test_rand(&seed) % (2 * MiB);
            bool huge = j->huge && crmm_test_rand(&seed) % 256 == 0;
            if (huge)
                size = j->shard_size + 1 + crmm_test_rand(&seed) % (j->huge - j->shard_size);
            crmm_status st = crmm_resource_allocate(j->mr, size, NULL, &p[k]);
            if (huge && st == CRMM_ERROR_OUT_OF_MEMORY)
                continue;
            j->huge_ok += huge && st == CRMM_OK;
            if (st != CRMM_OK) {
                stress_error(j, "allocate", size);
                continue;
            }
            if ((uintptr_t)p[k] % 256)
                stress_error(j, "misaligned block", size);
            n[k] = size;
            fill_block(p[k], size);
            k++;
        } else {
            int m = (int)((r >> 16) % (uint64_t)k);
            if ((r >> 40) % 8 == 0) { /* hand it to another thread through the mailbox */
                pthread_mutex_lock(&j->box->lock);
                if (j->box->count < 64) {
                    j->box->p[j->box->count] = p[m];
                    j->box->n[j->box->count++] = n[m];
                    p[m] = NULL;
                }
                pthread_mutex_unlock(&j->box->lock);
            }
            if (p[m])
                stress_free(j, p[m], n[m]);
            p[m] = p[k - 1];
            n[m] = n[k - 1];
            k--;
            void *q = NULL;
            size_t qn = 0;
            if ((r >> 44) % 8 == 0) { /* free one another thread handed over */
                pthread_mutex_lock(&j->box->lock);
                if (j->box->count > 0) {
                    q = j->box->p[--j->box->count];
                    qn = j->box->n[j->box->count];
                }
                pthread_mutex_unlock(&j->box->lock);
            }
            if (q)
                stress_free(j, q, qn);
        }
    }
    while (k > 0) {
        k--;
        stress_free(j, p[k], n[k]);
    }
    return NULL;
}

/* Runs the stress over an arena of 512 MiB made with `params`; with huge > 0, some requests are
 * larger than a shard (shard_size), up to `huge`, and some of those must succeed. */
static void run_stress(const char *params, long steps, size_t shard_size, size_t huge)
{
    const char *env = getenv("CRMM_TEST_ARENA_STRESS_STEPS");
    if (env && *env)
        steps = atol(env);
    fixture f = make_arena(params);
    mailbox box = {.lock = PTHREAD_MUTEX_INITIALIZER};
    enum { T = 8 };
    stress_job jobs[T];
    pthread_t t[T];
    for (int i = 0; i < T; i++) {
        jobs[i] = (stress_job){.mr = f.mr, .box = &box, .index = i, .steps = steps, .huge = huge, .shard_size = shard_size};
        ck_assert_int_eq(pthread_create(&t[i], NULL, stress_thread, &jobs[i]), 0);
    }
    long huge_ok = 0;
    for (int i = 0; i < T; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_msg(jobs[i].errors == 0, "%ld errors; first: %s", jobs[i].errors, jobs[i].first_error);
        huge_ok += jobs[i].huge_ok;
    }
    if (huge)
        ck_assert_int_gt(huge_ok, 0);
    stress_job rest = {.mr = f.mr, .index = -1};
    for (int i = 0; i < box.count; i++)
        stress_free(&rest, box.p[i], box.n[i]);
    ck_assert_msg(rest.errors == 0, "%s", rest.first_error);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE), 0);
    crmm_arena_stats s = stats(f.mr);
    ck_assert_uint_eq(s.thread_arenas, 0); /* the workers' went when they exited */
    ck_assert_crmm_ok(crmm_resource_trim(f.mr));
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_LARGEST_FREE_BLOCK), 512 * MiB);
    drop_arena(&f);
}

static long stress_steps(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return 20000;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    return 20000;
#endif
#endif
    return 100000;
}

START_TEST(stress_eight_threads)
{
    run_stress("arena_size=512MiB", stress_steps(), 0, 0); /* 8 shards by default: one home each */
}
END_TEST

/* Two threads share each home shard. */
START_TEST(stress_eight_threads_four_shards)
{
    run_stress("arena_size=512MiB shards=4", stress_steps() / 2, 0, 0);
}
END_TEST

/* Shards of 32 MiB, about what each thread holds: superblocks and large blocks spill into the
 * shards next to the home shards, and requests of up to 40 MiB take pages across shards. */
START_TEST(stress_eight_threads_small_shards)
{
    run_stress("arena_size=512MiB shards=16", stress_steps() / 2, 32 * MiB, 40 * MiB);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("arena");
    crmm_conformance_add(s, arena_chains, (int)(sizeof arena_chains / sizeof arena_chains[0]));
    TCase *tc = tcase_create("arena");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, size_classes_round_up_to_256_byte_multiples);
    tcase_add_test(tc, block_index_is_exact_in_the_largest_superblock);
    tcase_add_test(tc, superblock_splits_and_merges_back_whole);
    tcase_add_test(tc, blocks_of_a_superblock_are_adjacent_and_aligned);
    tcase_add_test(tc, defragments_on_failure_and_retries);
    tcase_add_test(tc, defragment_takes_empty_superblocks_from_a_live_thread);
    tcase_add_test(tc, memory_filled_by_one_thread_and_freed_by_another_comes_back);
    tcase_add_test(tc, thread_exit_returns_its_superblocks);
    tcase_add_test(tc, frees_from_other_threads_come_back_to_the_owner);
    tcase_add_test(tc, out_of_memory_message_names_the_sizes);
    tcase_add_test(tc, never_grows);
    tcase_add_test(tc, queries_count_allocations);
    tcase_add_test(tc, dump_file_is_written_on_failure);
    tcase_add_test(tc, no_dump_file_unless_asked);
    tcase_add_test(tc, two_arenas_in_one_thread_keep_their_own_memory);
    tcase_add_test(tc, host_arena_ignores_streams);
    tcase_add_test(tc, bad_parameters_are_refused_clearly);
    tcase_add_test(tc, bad_pointers_are_refused_and_harmless);
    tcase_add_test(tc, double_free_from_another_thread_is_refused);
    tcase_add_test(tc, control_ops);
    tcase_add_test(tc, destroy_reports_live_allocations_and_frees_everything);
    tcase_add_test(tc, threads_take_large_blocks_from_their_own_shards);
    tcase_add_test(tc, a_free_from_another_thread_goes_to_the_owning_shard);
    tcase_add_test(tc, large_requests_fall_back_to_other_shards_and_across_them);
    tcase_add_test(tc, a_superblock_can_lie_across_shards);
    tcase_add_test(tc, one_shard_is_the_arena_of_one_lock);
    tcase_add_test(tc, bad_shards_are_refused_clearly);
    tcase_add_test(tc, defragment_works_across_shards);
    tcase_add_test(tc, stress_eight_threads);
    tcase_add_test(tc, stress_eight_threads_four_shards);
    tcase_add_test(tc, stress_eight_threads_small_shards);
    suite_add_tcase(s, tc);
    return crmm_test_run(s);
}
