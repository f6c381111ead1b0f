/* check_arena.c — the arena plugin over host memory (no GPU): the conformance suite, then what
 * is particular to the arena: superblocks split and merge, defragmentation on failure, the dump
 * file, the out-of-memory message, a fixed size, thread exit, frees from other threads, several
 * arenas in one thread. Bad input and shards: check_arena_shards.c; the stress runs:
 * check_arena_stress.c. */
#include "build_config.h"
#include <errno.h>
#include <stddef.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include "conformance.h"
#include "arena_slab.h"
#include "arena_test.h"

static const crmm_test_chain arena_chains[] = {
    {"arena_over_host", "[resource.h]\nplugin = host\n[resource.a]\nplugin = arena\nupstream = h\narena_size = 1280MiB\n",
     "a", 0, 0},
    {"arena_64k_superblocks_over_host",
     "[resource.h]\nplugin = host\n[resource.a]\nplugin = arena\nupstream = h\narena_size = 1100MiB\nsuperblock_size = 64KiB\n",
     "a", 0, 0},
};

/* ---- internals a user relies on ----------------------------------------------------------- */

/* Loops test with `if` and ck_abort_msg: each passing ck_assert costs Check a log write. */
CRMM_TEST_IN("arena", size_classes_round_up_to_256_byte_multiples)
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

/* The block index of every block start of the largest superblock (1 GiB) is exact, and the
 * bytes just before and after a start are no block start. */
CRMM_TEST_IN("arena", block_index_is_exact_in_the_largest_superblock)
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

/* ---- arena behaviour ---------------------------------------------------------------------- */

CRMM_TEST_IN("arena", superblock_splits_and_merges_back_whole)
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
    allocate_and_free(f.mr, 4 * MiB);
    drop_arena(&f);
}

CRMM_TEST_IN("arena", blocks_of_a_superblock_are_adjacent_and_aligned)
{
    fixture f = make_arena("arena_size=4MiB");
    char *a = crmm_test_allocate(f.mr, 1000), *b = crmm_test_allocate(f.mr, 1000), *c = crmm_test_allocate(f.mr, 1000);
    ck_assert_uint_eq((uintptr_t)a % 256, 0);
    ck_assert_ptr_eq(b, a + 1024);
    ck_assert_ptr_eq(c, b + 1024);
    release(f.mr, b, 1000);
    ck_assert_ptr_eq(crmm_test_allocate(f.mr, 1024), b); /* freed on the same thread and stream: reused at once */
    free_all(f.mr, {a, 1000}, {b, 1024}, {c, 1000});
    drop_arena(&f);
}

/* Four superblocks held empty by this thread: a request for the whole arena succeeds only after
 * the arena takes them back (defragments). */
CRMM_TEST_IN("arena", defragments_on_failure_and_retries)
{
    fixture f = make_arena("arena_size=4MiB superblock_size=1MiB");
    holder h = {.mr = f.mr, .last = CRMM_OK};
    cycle_four_classes(&h);
    crmm_arena_stats s = stats(f.mr);
    ck_assert_uint_eq(s.superblocks_held, 4);
    ck_assert_uint_eq(s.global_free_bytes, 0);
    void *all = crmm_test_allocate(f.mr, 4 * MiB);
    s = stats(f.mr);
    ck_assert_uint_eq(s.defragmentations, 1);
    ck_assert_uint_eq(s.superblocks_held, 0);
    release(f.mr, all, 4 * MiB);
    cycle_four_classes(&h); /* the thread's arena notices its superblocks are gone: takes new ones */
    ck_assert_int_eq(h.last, CRMM_OK);
    ck_assert_uint_eq(stats(f.mr).superblocks_held, 4);
    drop_arena(&f);
}

CRMM_TEST_IN("arena", defragment_takes_empty_superblocks_from_a_live_thread)
{
    fixture f = make_arena("arena_size=4MiB");
    holder h = HOLDER(f.mr, .last = CRMM_OK);
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

CRMM_TEST_IN("arena", memory_filled_by_one_thread_and_freed_by_another_comes_back)
{
    fixture f = make_arena("arena_size=4MiB");
    holder h = HOLDER(f.mr, .size = 1024);
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
    allocate_and_free(f.mr, 4 * MiB);
    holder_go(&h, 2);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    free(h.blocks);
    drop_arena(&f);
}

/* Allocates h->nblocks blocks of h->size and hands them over (stage 1); once told (stage 2),
 * cycles four classes, h->size's among them (stage 3); exits when told (stage 4). In between it
 * leaves the arena alone. */
static void *hand_over_and_idle(void *arg)
{
    holder *h = arg;
    h->blocks = malloc(h->nblocks * sizeof *h->blocks);
    for (size_t i = 0; i < h->nblocks; i++)
        if (crmm_resource_allocate(h->mr, h->size, NULL, &h->blocks[i]) != CRMM_OK)
            h->last = CRMM_ERROR_STATE;
    holder_go(h, 1);
    holder_wait(h, 2);
    cycle_four_classes(h);
    holder_go(h, 3);
    holder_wait(h, 4);
    return NULL;
}

/* From now on membarrier(2) fails with ENOSYS in this process (a seccomp filter). */
static void block_membarrier(void)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_membarrier, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof code / sizeof code[0]), code};
    ck_assert_int_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
    ck_assert_int_eq(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog), 0);
    ck_assert(!membarrier_available());
}

/* A live, idle thread holds a superblock whose blocks this thread freed: it has not seen those
 * frees, yet the superblock is empty, and a request for the whole arena (_i 0: defragment on
 * failure) or a trim (_i 1) takes it back. The thread then allocates again, from new superblocks
 * of four classes which it empties itself, and a trim takes those too. Where membarrier is
 * unavailable (_i 2 and 3 make it so), a superblock is taken from a live thread only once the
 * thread has seen it empty (arena_thread_cache.c): the one emptied here stays with its owner,
 * and the three others go. */
CRMM_LOOP_TEST_IN("arena", a_live_thread_s_superblock_emptied_by_another_thread_comes_back, 4)
{
    if (_i >= 2)
        block_membarrier(); /* before the arena is made: this process's forked test only */
    fixture f = make_arena("arena_size=4MiB");
    holder h = HOLDER(f.mr, .size = 1000, .nblocks = 100, .last = CRMM_OK);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, hand_over_and_idle, &h), 0);
    holder_wait(&h, 1);
    ck_assert_int_eq(h.last, CRMM_OK);
    for (size_t i = 0; i < h.nblocks; i++)
        release(f.mr, h.blocks[i], h.size);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(stats(f.mr).superblocks_held, 1);
    if (!membarrier_available()) {
        void *p = (void *)1;
        ck_assert_crmm(crmm_resource_allocate(f.mr, 4 * MiB, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
        ck_assert_crmm_ok(crmm_resource_trim(f.mr));
        ck_assert_uint_eq(stats(f.mr).superblocks_held, 1);
    } else if (_i % 2 == 0) {
        void *all = crmm_test_allocate(f.mr, 4 * MiB);
        ck_assert_uint_eq(stats(f.mr).defragmentations, 1);
        release(f.mr, all, 4 * MiB);
    } else {
        ck_assert_crmm_ok(crmm_resource_trim(f.mr));
        ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_LARGEST_FREE_BLOCK), 4 * MiB);
    }
    int fence = membarrier_available();
    ck_assert_uint_eq(stats(f.mr).superblocks_held, fence ? 0 : 1);
    holder_go(&h, 2); /* the thread finds its superblock gone (or not) and goes on */
    holder_wait(&h, 3);
    ck_assert_int_eq(h.last, CRMM_OK);
    ck_assert_uint_eq(stats(f.mr).superblocks_held, 4);
    ck_assert_crmm_ok(crmm_resource_trim(f.mr)); /* emptied by their owner, which is idle again */
    crmm_arena_stats s = stats(f.mr);
    ck_assert_uint_eq(s.superblocks_held, fence ? 0 : 1);
    ck_assert_uint_eq(s.global_largest_free, fence ? 4 * MiB : 3 * MiB);
    holder_go(&h, 4);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_uint_eq(stats(f.mr).global_free_bytes, 4 * MiB);
    free(h.blocks);
    drop_arena(&f);
}

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
CRMM_TEST_IN("arena", thread_exit_returns_its_superblocks)
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

CRMM_TEST_IN("arena", frees_from_other_threads_come_back_to_the_owner)
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

/* Blocks one thread allocated and other threads freed (small ones into a superblock this thread
 * holds, a large one by a thread with no arena of its own): the peaks still count them all. */
CRMM_TEST_IN("arena", peaks_survive_frees_from_other_threads)
{
    fixture f = make_arena("arena_size=16MiB");
    enum { N = 10 };
    void *blocks[N + 1];
    for (int i = 0; i < N; i++)
        blocks[i] = crmm_test_allocate(f.mr, 1000);
    blocks[N] = crmm_test_allocate(f.mr, 1 * MiB);
    pthread_t t;
    free_job small = {f.mr, blocks, 0, N, 1000, 0}, large = {f.mr, blocks, N, N + 1, 1 * MiB, 0};
    ck_assert_int_eq(pthread_create(&t, NULL, free_range, &small), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(pthread_create(&t, NULL, free_range, &large), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(small.errors + large.errors, 0);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE_PEAK), N * 1000 + 1 * MiB);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS_PEAK), N + 1);
    /* this thread allocates the same again: the peak is the same, not twice it */
    for (int i = 0; i < N; i++)
        blocks[i] = crmm_test_allocate(f.mr, 1000);
    for (int i = 0; i < N; i++)
        release(f.mr, blocks[i], 1000);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE_PEAK), N * 1000 + 1 * MiB);
    drop_arena(&f);
}

/* Holds a block of job->size together with the other threads of the barrier, then frees it. */
typedef struct together_job {
    crmm_resource *mr;
    pthread_barrier_t *all_hold;
    size_t size;
    int errors;
} together_job;

static void *hold_together(void *arg)
{
    together_job *j = arg;
    void *p;
    if (crmm_resource_allocate(j->mr, j->size, NULL, &p) != CRMM_OK) {
        j->errors++;
        p = NULL;
    }
    pthread_barrier_wait(j->all_hold);
    if (p && crmm_resource_deallocate(j->mr, p, j->size, NULL) != CRMM_OK)
        j->errors++;
    return NULL;
}

/* Four threads each held a block at the same moment, then exited: the peaks still say four. */
CRMM_TEST_IN("arena", peaks_survive_the_exit_of_the_threads_that_made_them)
{
    fixture f = make_arena("arena_size=16MiB");
    enum { T = 4 };
    pthread_barrier_t all_hold;
    ck_assert_int_eq(pthread_barrier_init(&all_hold, NULL, T), 0);
    static const size_t sizes[2] = {1000, 1 * MiB}; /* a small block, a large one */
    for (int k = 0; k < 2; k++) {
        pthread_t t[T];
        together_job j = {f.mr, &all_hold, sizes[k], 0};
        for (int i = 0; i < T; i++)
            ck_assert_int_eq(pthread_create(&t[i], NULL, hold_together, &j), 0);
        for (int i = 0; i < T; i++)
            ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_int_eq(j.errors, 0);
        ck_assert_uint_eq(stats(f.mr).thread_arenas, 0);
        ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE), 0);
        ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS_PEAK), T);
        ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE_PEAK), T * sizes[k]);
    }
    pthread_barrier_destroy(&all_hold);
    drop_arena(&f);
}

/* Holds one small block until told to free it (the barrier's second and third waits). */
static void *hold_until_told(void *arg)
{
    together_job *j = arg;
    void *p = NULL;
    if (crmm_resource_allocate(j->mr, j->size, NULL, &p) != CRMM_OK)
        j->errors++;
    pthread_barrier_wait(j->all_hold); /* held */
    pthread_barrier_wait(j->all_hold); /* told */
    if (p && crmm_resource_deallocate(j->mr, p, j->size, NULL) != CRMM_OK)
        j->errors++;
    return NULL;
}

/* One thread holds a block while this one allocates and frees 1 024 blocks, which makes its
 * arena fold its counts into the shared ones twice (at +1 024 live and at -1 024): the peaks
 * read while both were live (the other thread's block with this thread's 1 024) are never read
 * lower afterwards. */
CRMM_TEST_IN("arena", a_peak_once_read_is_never_read_lower)
{
    fixture f = make_arena("arena_size=16MiB");
    enum { N = 1024, SMALL = 256, HELD = 1000 };
    pthread_barrier_t step;
    ck_assert_int_eq(pthread_barrier_init(&step, NULL, 2), 0);
    together_job j = {f.mr, &step, HELD, 0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, hold_until_told, &j), 0);
    pthread_barrier_wait(&step);
    static void *blocks[N];
    for (int i = 0; i < N; i++)
        blocks[i] = crmm_test_allocate(f.mr, SMALL);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS_PEAK), N + 1);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE_PEAK), N * SMALL + HELD);
    for (int i = 0; i < N; i++)
        release(f.mr, blocks[i], SMALL);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS_PEAK), N + 1);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE_PEAK), N * SMALL + HELD);
    /* this thread does it again: the same peaks, not more */
    for (int i = 0; i < N; i++)
        blocks[i] = crmm_test_allocate(f.mr, SMALL);
    for (int i = 0; i < N; i++)
        release(f.mr, blocks[i], SMALL);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS_PEAK), N + 1);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE_PEAK), N * SMALL + HELD);
    pthread_barrier_wait(&step);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(j.errors, 0);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS_PEAK), N + 1);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE_PEAK), N * SMALL + HELD);
    pthread_barrier_destroy(&step);
    drop_arena(&f);
}

/* Allocates and frees job->n blocks of job->size, then waits at the barrier twice (alive, its
 * arena kept, until this thread has done the same). */
typedef struct phase_job {
    crmm_resource *mr;
    pthread_barrier_t *step;
    int n;
    size_t size;
} phase_job;

static void *phase_then_wait(void *arg)
{
    phase_job *j = arg;
    static void *blocks[4096];
    for (int i = 0; i < j->n; i++)
        blocks[i] = crmm_test_allocate(j->mr, j->size);
    for (int i = 0; i < j->n; i++)
        release(j->mr, blocks[i], j->size);
    pthread_barrier_wait(j->step);
    pthread_barrier_wait(j->step);
    return NULL;
}

/* One thread allocates and frees 2 048 blocks and stays; then this thread does the same. At most
 * 2 048 were live at once, and the peaks say 2 048, not the two threads' peaks added up. */
CRMM_TEST_IN("arena", peaks_of_threads_one_after_the_other_do_not_add_up)
{
    fixture f = make_arena("arena_size=16MiB");
    enum { N = 2048, SMALL = 256 };
    pthread_barrier_t step;
    ck_assert_int_eq(pthread_barrier_init(&step, NULL, 2), 0);
    phase_job j = {f.mr, &step, N, SMALL};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, phase_then_wait, &j), 0);
    pthread_barrier_wait(&step);
    static void *blocks[N];
    for (int i = 0; i < N; i++)
        blocks[i] = crmm_test_allocate(f.mr, SMALL);
    for (int i = 0; i < N; i++)
        release(f.mr, blocks[i], SMALL);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS_PEAK), N);
    pthread_barrier_wait(&step);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS_PEAK), N);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE_PEAK), N * SMALL);
    pthread_barrier_destroy(&step);
    drop_arena(&f);
}

/* Hands this thread a 1 MiB block at each of job->rounds rounds, for it to free. */
typedef struct producer_job {
    crmm_resource *mr;
    pthread_barrier_t *step;
    void *block;
    int rounds;
} producer_job;

static void *produce(void *arg)
{
    producer_job *j = arg;
    for (int r = 0; r < j->rounds; r++) {
        j->block = crmm_test_allocate(j->mr, 1 * MiB);
        pthread_barrier_wait(j->step);
        pthread_barrier_wait(j->step);
    }
    return NULL;
}

/* Another thread allocates 1 MiB blocks that this one (which has an arena of its own) frees, one
 * at a time, 64 times: at most 1 MiB + 256 bytes were live, and the peak stays within one flush's
 * distance (4 MiB) of that, however many rounds. */
CRMM_TEST_IN("arena", peaks_stay_near_the_truth_when_one_thread_frees_what_another_allocates)
{
    fixture f = make_arena("arena_size=16MiB");
    void *mine = crmm_test_allocate(f.mr, 256);
    pthread_barrier_t step;
    ck_assert_int_eq(pthread_barrier_init(&step, NULL, 2), 0);
    producer_job j = {f.mr, &step, NULL, 64};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, produce, &j), 0);
    for (int r = 0; r < j.rounds; r++) {
        pthread_barrier_wait(&step);
        release(f.mr, j.block, 1 * MiB);
        pthread_barrier_wait(&step);
    }
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    uint64_t peak = crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE_PEAK);
    ck_assert_uint_ge(peak, 1 * MiB + 256);
    ck_assert_uint_le(peak, 1 * MiB + 256 + 4 * MiB);
    release(f.mr, mine, 256);
    pthread_barrier_destroy(&step);
    drop_arena(&f);
}

CRMM_TEST_IN("arena", out_of_memory_message_names_the_sizes)
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

CRMM_TEST_IN("arena", never_grows)
{
    fixture f = make_arena("arena_size=8MiB");
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_RESERVED), 8 * MiB);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_MAXIMUM_SIZE), 8 * MiB);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_UPSTREAM_BLOCKS), 1);
    ck_assert_uint_eq(crmm_test_query(f.up, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_uint_eq(crmm_test_query(f.up, CRMM_QUERY_BYTES_IN_USE), 8 * MiB);
    static void *p[20000];
    int n = 0;
    void *q;
    while (n < 20000 && crmm_resource_allocate(f.mr, 700, NULL, &q) == CRMM_OK)
        p[n++] = q;
    ck_assert_int_eq(n, 8 * (int)(MiB / 768)); /* 8 MiB of 768-byte blocks: 1365 per superblock, no byte lost */
    ck_assert_crmm(crmm_resource_allocate(f.mr, 2 * MiB, NULL, &q), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_RESERVED), 8 * MiB);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_RESERVED_PEAK), 8 * MiB);
    ck_assert_uint_eq(crmm_test_query(f.up, CRMM_QUERY_ALLOCATIONS), 1); /* no second upstream call */
    ck_assert_uint_eq(crmm_test_query(f.up, CRMM_QUERY_BYTES_IN_USE), 8 * MiB);
    for (int i = 0; i < n; i++)
        release(f.mr, p[i], 700);
    ck_assert_crmm_ok(crmm_resource_trim(f.mr));
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_RESERVED), 8 * MiB); /* trim cannot shrink it either */
    ck_assert_uint_eq(crmm_test_query(f.up, CRMM_QUERY_BYTES_IN_USE), 8 * MiB);
    drop_arena(&f);
}

CRMM_TEST_IN("arena", queries_count_allocations)
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

CRMM_TEST_IN("arena", dump_file_is_written_on_failure)
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
    free_all(f.mr, {small, 1000}, {large, 2 * MiB});
    drop_arena(&f);
    free(dir); /* removed with the dump when the test's process exits */
}

CRMM_TEST_IN("arena", no_dump_file_unless_asked)
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
    free(dir);
}

CRMM_TEST_IN("arena", two_arenas_in_one_thread_keep_their_own_memory)
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
    allocate_and_free(a, 512);
    allocate_and_free(b, 512);
    crmm_resource_release(a);
    crmm_resource_release(b);
    crmm_resource_release(host);
}

CRMM_TEST_IN("arena", host_arena_ignores_streams)
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

int main(void)
{
    Suite *s = suite_create("arena");
    crmm_conformance_add(s, arena_chains, (int)(sizeof arena_chains / sizeof arena_chains[0]));
    crmm_test_tcase(s, "arena", 60);
    return crmm_test_run(s);
}
