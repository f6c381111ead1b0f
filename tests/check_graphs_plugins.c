/* check_graphs_plugins.c — allocators under CUDA graph capture on the CPU, against the scripted
 * CUDA of fake_vmm.h and fake_capture.h (as check_graphs.c), for the plugins other than the pool:
 * arena, fixed_size and binning hold a graph's blocks, a double free under capture is refused, an
 * arena that would wait refuses, fixed_size grows until its upstream refuses, cuda allocates and
 * refuses to free, and the adaptors over a pool under capture. */
#include "build_config.h"

#include "graphs_test.h"

/* ---- the other plugins ---------------------------------------------------------------------- */

/* Arena, fixed_size and binning (whose bins are fixed_size resources) keep the ownership rule
 * through graph_park (plugins/common): each over the cuda plugin, in 64 KiB blocks; the last is a
 * binning whose 64 KiB requests pass its bins and go to an arena upstream. */
static const char *const parking[][2] = {
    {"arena", "arena_size=8MiB"},
    {"fixed_size", "block_size=64KiB blocks_to_preallocate=4"},
    {"binning", "bins=4KiB:64KiB blocks_to_preallocate=4"},
    {"binning", "bins=4KiB blocks_to_preallocate=4"},
};
#define PARKING ((int)(sizeof parking / sizeof parking[0]))

static crmm_resource *parking_resource(int i)
{
    crmm_resource *up = crmm_test_create("cuda", "", NULL);
    if (i == PARKING - 1) { /* over an arena */
        crmm_resource *arena = crmm_test_create("arena", "arena_size=8MiB", up);
        crmm_resource_release(up);
        up = arena;
    }
    crmm_resource *r = crmm_test_create(parking[i][0], parking[i][1], up);
    crmm_resource_release(up);
    return r;
}

static bool one_of(const void *x, void *const *set, int n)
{
    for (int i = 0; i < n; i++)
        if (x == set[i])
            return true;
    return false;
}

/* Up to `most` allocations of n bytes on s while the device is full (cudaMalloc refuses, so
 * fixed_size synchronizes the device once its free blocks run out): how many of the `k` blocks
 * in `set` came back, each counted as often as it is handed out; every block of those set apart
 * by eager work (the first `eager` of `set`) came back only after a device synchronization
 * since `syncs`. All are freed again. */
static int come_back_with_the_device_full(crmm_resource *r, size_t n, cudaStream_t s, void *const *set, int k, int eager,
                                          int syncs, const char *who)
{
    enum { most = 160 }; /* more than an 8 MiB arena holds */
    void *got[most];
    int m = 0, found = 0;
    size_t in_use = device_in_use;
    device_in_use = DEVICE_MEMORY;
    while (m < most && crmm_resource_allocate(r, n, (crmm_cuda_stream_t)s, &got[m]) == CRMM_OK) {
        for (int j = 0; j < k; j++)
            if (got[m] == set[j]) {
                found++;
                ck_assert_msg(j >= eager || fake_vmm.device_syncs > syncs,
                              "%s: %p, which eager work used, handed out with no device synchronization", who, set[j]);
            }
        m++;
    }
    crmm_clear_error();
    device_in_use = in_use;
    while (m > 0)
        free_on(r, got[--m], n, s);
    return found;
}

/* Under capture they allocate and free with no call that capture forbids. A block allocated
 * before the capture and freed inside it, one allocated and freed inside, and one allocated
 * inside and freed after the capture (on another stream) are handed to nobody while the graph
 * lives, on any stream; the counts of allocated memory drop at the frees all the same. Once the
 * graph is destroyed the three come back: the next allocations get them, the first and the last
 * (which eager work may still use, on a stream that may be destroyed) only once the device has
 * been synchronized. */
CRMM_LOOP_TEST_IN("other plugins", arena_fixed_size_binning_hold_a_graphs_blocks, PARKING)
{
    const size_t n = 64 * KiB;
    crmm_resource *r = parking_resource(_i);
    cudaStream_t s = stream_n(1), other = stream_n(2);
    void *before = alloc_on(r, n, s);
    free_on(r, alloc_on(r, n, s), n, s); /* free on s: the capture may take it */

    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *in1 = alloc_on(r, n, s);
    void *in2 = alloc_on(r, n, s);
    free_on(r, in1, n, s);
    free_on(r, before, n, s);
    fake_capture_end(s);
    ck_assert_msg(fake_capture_forbidden() == 0, "%s: %d forbidden call(s), the last %s", parking[_i][0],
                  fake_capture_forbidden(), fake_capture_last_forbidden());
    ck_assert_int_eq(fake_graph_user_objects(g), 1);
    free_on(r, in2, n, other); /* after the capture: still the graph's */
    ck_assert_uint_eq(q(r, CRMM_QUERY_ALLOCATIONS), 0);

    void *held[3] = {before, in1, in2}, *got[12];
    for (int i = 0; i < 12; i++) {
        got[i] = alloc_on(r, n, i % 2 ? other : s);
        ck_assert_msg(!one_of(got[i], held, 3), "%s: %p, held for a live graph, handed out", parking[_i][0], got[i]);
    }
    for (int i = 0; i < 12; i++)
        free_on(r, got[i], n, i % 2 ? other : s);
    /* the three are not free (a binning's free bytes are its bins': the last's are its arena's) */
    bool own_memory = _i != PARKING - 1;
    uint64_t free_during = q(r, CRMM_QUERY_BYTES_FREE);
    if (own_memory)
        ck_assert_uint_le(free_during + 3 * n, q(r, CRMM_QUERY_BYTES_RESERVED));

    fake_graph_destroy(g);
    ck_assert_int_eq(fake_user_objects_live(), 0);
    void *eager_first[3] = {before, in2, in1};
    int found = come_back_with_the_device_full(r, n, s, eager_first, 3, 2, fake_vmm.device_syncs, parking[_i][0]);
    ck_assert_msg(found == 3, "%s: %d of the graph's 3 blocks came back", parking[_i][0], found);
    ck_assert_uint_eq(q(r, CRMM_QUERY_ALLOCATIONS), 0);
    if (own_memory)
        ck_assert_uint_ge(q(r, CRMM_QUERY_BYTES_FREE), free_during + 3 * n); /* and free again */
    crmm_resource_release(r);
}

/* The arena takes a destroyed graph's blocks back at its next allocation; those that eager work
 * used wait for a device synchronization. When that fails, they wait for the next try, and the
 * allocation, which succeeds, leaves the thread's error as it was (error.h: only a failing call
 * sets it). */
CRMM_TEST_IN("other plugins", arena_keeps_the_callers_error_when_taking_back_blocks_cannot_synchronize)
{
    const size_t n = 64 * KiB;
    crmm_resource *r = parking_resource(0);
    cudaStream_t s = stream_n(1);
    void *before = alloc_on(r, n, s);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    free_on(r, before, n, s); /* eager work may use it: it needs a synchronization to come back */
    fake_capture_end(s);
    fake_graph_destroy(g);
    crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "an earlier error");
    char earlier[256];
    snprintf(earlier, sizeof earlier, "%s", crmm_last_error());
    fake_vmm.device_syncs_fail = 1;
    void *p = alloc_on(r, n, s);
    ck_assert_int_eq(fake_vmm.device_syncs_fail, 0); /* it tried */
    ck_assert_ptr_ne(p, before);
    ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_str_eq(crmm_last_error(), earlier);
    free_on(r, p, n, s);
    void *set[1] = {before};
    int syncs = fake_vmm.device_syncs;
    ck_assert_int_eq(come_back_with_the_device_full(r, n, s, set, 1, 1, syncs, "arena"), 1); /* the next try */
    crmm_resource_release(r);
}

/* A block from before a capture, freed in it, handed out again by the capture and freed there
 * again, is still one that eager work may use when the graph is gone. */
CRMM_LOOP_TEST_IN("other plugins", a_block_from_before_the_capture_reused_by_it_stays_eager, PARKING)
{
    const size_t n = 64 * KiB;
    crmm_resource *r = parking_resource(_i);
    cudaStream_t s = stream_n(1);
    void *before = alloc_on(r, n, s);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    free_on(r, before, n, s);
    void *again = alloc_on(r, n, s);
    ck_assert_ptr_eq(again, before); /* the capture takes back what it freed on s */
    free_on(r, again, n, s);
    fake_capture_end(s);
    fake_graph_destroy(g);
    int found = come_back_with_the_device_full(r, n, stream_n(2), &before, 1, 1, fake_vmm.device_syncs, parking[_i][0]);
    ck_assert_int_eq(found, 1);
    ck_assert_uint_eq(q(r, CRMM_QUERY_ALLOCATIONS), 0);
    crmm_resource_release(r);
}

/* A capture takes back what it freed on the same stream (the graph orders the two): a hundred
 * layers that each allocate and free a block hold one block between them, and the resource does
 * not grow for them. A stream that joined the capture does not get a block freed on another
 * stream of it (nothing orders the two). Once the graph is gone the block is free again. */
CRMM_LOOP_TEST_IN("other plugins", a_capture_reuses_the_blocks_it_freed_on_the_stream, PARKING)
{
    const size_t n = 64 * KiB;
    crmm_resource *r = parking_resource(_i);
    cudaStream_t s = stream_n(1), s2 = stream_n(2);
    free_on(r, alloc_on(r, n, s), n, s);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    fake_capture_join(s2, s);
    void *first = alloc_on(r, n, s);
    free_on(r, first, n, s);
    void *on_other = alloc_on(r, n, s2);
    ck_assert_msg(on_other != first, "%s: a block freed on one stream went to another", parking[_i][0]);
    uint64_t reserved = q(r, CRMM_QUERY_BYTES_RESERVED);
    for (int layer = 0; layer < 100; layer++) {
        void *x = alloc_on(r, n, s);
        ck_assert_msg(x == first, "%s: layer %d got %p, not the block the capture freed (%p)", parking[_i][0], layer, x,
                      first);
        free_on(r, x, n, s);
    }
    free_on(r, on_other, n, s2);
    fake_capture_end(s);
    fake_capture_end(s2);
    ck_assert_int_eq(fake_capture_forbidden(), 0);
    ck_assert_uint_eq(q(r, CRMM_QUERY_ALLOCATIONS), 0);
    if (_i != PARKING - 1) /* (a binning's reserved bytes are its bins': the last's are its arena's) */
        ck_assert_uint_eq(q(r, CRMM_QUERY_BYTES_RESERVED), reserved); /* the layers took no new memory */
    fake_graph_destroy(g);
    int found = 0;
    void *again[16];
    for (int i = 0; i < 16; i++) {
        again[i] = alloc_on(r, n, s);
        found += again[i] == first;
    }
    ck_assert_msg(found == 1, "%s: the graph's block did not come back", parking[_i][0]);
    for (int i = 0; i < 16; i++)
        free_on(r, again[i], n, s);
    crmm_resource_release(r);
}

struct starting_thread {
    crmm_resource *r;
    cudaStream_t s;
    pthread_barrier_t *go;
    void *first;
};

/* The thread's first allocation of the capture, at once with the other thread's, then its free. */
static void *allocate_and_free_first(void *arg)
{
    struct starting_thread *t = arg;
    pthread_barrier_wait(t->go);
    if (crmm_resource_allocate(t->r, 64 * KiB, (crmm_cuda_stream_t)t->s, &t->first) == CRMM_OK)
        crmm_resource_deallocate(t->r, t->first, 64 * KiB, (crmm_cuda_stream_t)t->s);
    return NULL;
}

/* Two threads make the first allocations of one capture (two joined streams) at once: the graph
 * gets one record, so each stream's next request takes the block that stream freed. With two
 * records, one stream's block would be parked in a record its later requests never look in. */
CRMM_LOOP_TEST_IN("other plugins", two_threads_starting_one_capture_share_its_record, PARKING)
{
    for (int round = 0; round < 300; round++) { /* a race: each round is one chance to lose it */
        crmm_resource *r = parking_resource(_i);
        cudaStream_t s1 = stream_n(1), s2 = stream_n(2);
        fake_graph *g = fake_capture_begin(s1, cudaStreamCaptureModeRelaxed);
        fake_capture_join(s2, s1);
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 2);
        struct starting_thread t[2] = {{r, s1, &go, NULL}, {r, s2, &go, NULL}};
        pthread_t th[2];
        for (int i = 0; i < 2; i++)
            ck_assert_int_eq(pthread_create(&th[i], NULL, allocate_and_free_first, &t[i]), 0);
        for (int i = 0; i < 2; i++)
            ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        pthread_barrier_destroy(&go);
        for (int i = 0; i < 2; i++) {
            ck_assert_ptr_nonnull(t[i].first);
            void *again = alloc_on(r, 64 * KiB, t[i].s);
            ck_assert_msg(again == t[i].first, "%s: round %d: stream %d did not get back the block it freed",
                          parking[_i][0], round, i + 1);
            free_on(r, again, 64 * KiB, t[i].s);
        }
        fake_capture_end(s1);
        fake_capture_end(s2);
        fake_graph_destroy(g);
        crmm_resource_release(r);
    }
}

/* Per-thread default streams of two threads under one capture (graphs_test.h). */
CRMM_LOOP_TEST_IN("other plugins", per_thread_default_streams_of_two_threads_do_not_share_parked_blocks, PARKING)
{
    crmm_resource *r = parking_resource(_i);
    per_thread_streams_keep_their_parked_blocks(r, 64 * KiB, parking[_i][0]);
    crmm_resource_release(r);
}

/* A free under capture that the arena would refuse outside one is refused too, with nothing
 * parked and no count changed: a pointer inside a block, a block freed with the size of another
 * class, a large block freed with another size, and a block freed before the capture (and not
 * handed out since). Rows: a small block (64 KiB), a large one (2 MiB). */
CRMM_LOOP_TEST_IN("other plugins", arena_refuses_a_bad_free_under_capture, 2)
{
    const size_t n = _i ? 2 * MiB : 64 * KiB;
    crmm_resource *up = crmm_test_create("cuda", "", NULL);
    crmm_resource *r = crmm_test_create("arena", "arena_size=8MiB", up);
    crmm_resource_release(up);
    cudaStream_t s = stream_n(1);
    void *live = alloc_on(r, n, s), *gone = alloc_on(r, n, s);
    free_on(r, gone, n, s);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    uint64_t allocations = q(r, CRMM_QUERY_ALLOCATIONS), in_use = q(r, CRMM_QUERY_BYTES_IN_USE);
    struct { void *ptr; size_t bytes; } bad[] = {{(char *)live + 256, n}, {live, 256}, {live, n + 4096}, {gone, n}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ck_assert_crmm(crmm_resource_deallocate(r, bad[k].ptr, bad[k].bytes, (crmm_cuda_stream_t)s),
                       CRMM_ERROR_INVALID_ARGUMENT);
        ck_assert_error_contains("arena");
        crmm_clear_error();
        ck_assert_uint_eq(q(r, CRMM_QUERY_ALLOCATIONS), allocations);
        ck_assert_uint_eq(q(r, CRMM_QUERY_BYTES_IN_USE), in_use);
    }
    void *x = alloc_on(r, n, s); /* nothing was parked: not `live`, whole */
    ck_assert_msg(!((char *)x < (char *)live + n && (char *)x + n > (char *)live), "%p overlaps the live block %p", x, live);
    free_on(r, x, n, s);
    free_on(r, live, n, s);
    fake_capture_end(s);
    ck_assert_int_eq(fake_capture_forbidden(), 0);
    fake_graph_destroy(g);
    ck_assert_uint_eq(q(r, CRMM_QUERY_ALLOCATIONS), 0);
    crmm_resource_release(r);
}

/* Freeing a block twice under capture is refused like any double free (the block is held once,
 * and the capture hands it to one allocation, not two): fixed_size, binning, and an arena, which
 * keeps no set of live blocks, for a small block and a large one. */
CRMM_LOOP_TEST_IN("other plugins", a_double_free_under_capture_is_refused, 4)
{
    static const int which[] = {1, 2, 0, 0};
    const size_t n = _i == 3 ? 2 * MiB : 64 * KiB;
    crmm_resource *r = parking_resource(which[_i]);
    cudaStream_t s = stream_n(1);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *x = alloc_on(r, n, s);
    free_on(r, x, n, s);
    ck_assert_int_eq(crmm_resource_deallocate(r, x, n, (crmm_cuda_stream_t)s), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "already free") || strstr(crmm_last_error(), "double free"), "%s",
                  crmm_last_error());
    void *a = alloc_on(r, n, s), *b = alloc_on(r, n, s);
    ck_assert_ptr_ne(a, b);
    free_on(r, a, n, s);
    free_on(r, b, n, s);
    fake_capture_end(s);
    ck_assert_int_eq(fake_capture_forbidden(), 0);
    fake_graph_destroy(g);
    crmm_resource_release(r);
}

/* fixed_size takes a free of any size up to its block size, 0 included: a block freed with size 0
 * under capture is the one the capture's next allocation on that stream takes back, and no block
 * is lost: once the graph is gone, every block is free again. */
CRMM_TEST_IN("other plugins", a_block_freed_with_size_zero_under_capture_is_reused_and_not_lost)
{
    const size_t n = 64 * KiB;
    crmm_resource *r = parking_resource(1); /* fixed_size, 4 blocks of 64 KiB */
    cudaStream_t s = stream_n(1);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *x = alloc_on(r, n, s);
    ck_assert_crmm_ok(crmm_resource_deallocate(r, x, 0, (crmm_cuda_stream_t)s));
    void *y = alloc_on(r, n, s);
    ck_assert_ptr_eq(y, x);
    free_on(r, y, n, s);
    fake_capture_end(s);
    ck_assert_int_eq(fake_capture_forbidden(), 0);
    fake_graph_destroy(g);
    free_on(r, alloc_on(r, n, s), n, s); /* takes the graph's blocks back */
    ck_assert_uint_eq(q(r, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(q(r, CRMM_QUERY_BYTES_FREE), q(r, CRMM_QUERY_BYTES_RESERVED));
    crmm_resource_release(r);
}

/* A block graph A owns (allocated in its capture, still live) that graph B's capture frees is parked
 * in B; when B goes first it is handed on to A, which still writes it. Should that hand-over fail
 * (malloc), the block stays held for B's record until the next collect: it is never given back
 * while A lives. Each round fails another malloc call of the collecting allocation; once A is
 * destroyed the block comes back, once. fixed_size and a binning of fixed_size bins, which hand a
 * block that comes back out among the next few. */
CRMM_LOOP_TEST_IN("other plugins", a_block_handed_to_its_live_owner_stays_held_when_malloc_fails, 2)
{
    if (!MALLOC_FAIL_REPLACES)
        return; /* a sanitizer build: malloc is not ours to fail */
    const size_t n = 64 * KiB;
    const int which = 1 + _i;
    for (uint64_t k = 1; k <= 12; k++) {
        crmm_resource *r = parking_resource(which);
        cudaStream_t s1 = stream_n(1), s2 = stream_n(2), s3 = stream_n(3);
        free_on(r, alloc_on(r, n, s3), n, s3);
        fake_graph *a = fake_capture_begin(s1, cudaStreamCaptureModeGlobal);
        void *x = alloc_on(r, n, s1); /* A's */
        fake_capture_end(s1);
        fake_graph *b = fake_capture_begin(s2, cudaStreamCaptureModeGlobal);
        free_on(r, x, n, s2); /* parked in B */
        fake_capture_end(s2);
        fake_graph_destroy(b);
        void *y = NULL;
        malloc_fail_arm(k); /* B's blocks are collected here: the k-th malloc call fails */
        crmm_status st = crmm_resource_allocate(r, n, (crmm_cuda_stream_t)s3, &y);
        malloc_fail_disarm();
        crmm_clear_error();
        void *got[12];
        for (int i = 0; i < 12; i++) {
            got[i] = alloc_on(r, n, s3);
            ck_assert_msg(got[i] != x, "%s: malloc call %llu failing: %p, still A's, handed out", parking[which][0],
                          (unsigned long long)k, x);
        }
        ck_assert_msg(st != CRMM_OK || y != x, "%s: malloc call %llu failing: %p, still A's, handed out",
                      parking[which][0], (unsigned long long)k, x);
        for (int i = 0; i < 12; i++)
            free_on(r, got[i], n, s3);
        if (st == CRMM_OK)
            free_on(r, y, n, s3);
        fake_graph_destroy(a);
        /* eager work may have used A's output before B's capture freed it */
        int found = come_back_with_the_device_full(r, n, s3, &x, 1, 1, fake_vmm.device_syncs, parking[which][0]);
        ck_assert_msg(found == 1, "%s: malloc call %llu failing: A's block came back %d times", parking[which][0],
                      (unsigned long long)k, found);
        ck_assert_uint_eq(q(r, CRMM_QUERY_ALLOCATIONS), 0);
        ck_assert_int_eq(fake_capture_forbidden(), 0);
        crmm_resource_release(r);
    }
}

/* An allocation under capture that fails after the block became the graph's (malloc, for the live
 * set) leaves the block held for the graph: once the graph is destroyed it is free again. A growth
 * under capture whose blocks cannot be listed keeps its chunk (not handed back on the captured
 * stream, which the upstream refuses) and gives it back at destroy. So no block of a chunk in use
 * is lost and every chunk goes back upstream. Rounds: m blocks allocated before the capture (the
 * live set grows at some m, a chunk at others), 1 to CAPTURED_BEFORE - 1 in it (the graph's map of
 * its blocks grows at some), then one while the k-th malloc call fails; fixed_size and a binning
 * of fixed_size bins. */
#define CAPTURED_BEFORE 40 /* at most this many blocks allocated in the capture before the failing one */

CRMM_LOOP_TEST_IN("other plugins", a_failed_allocation_under_capture_loses_no_block, 2)
{
    if (!MALLOC_FAIL_REPLACES)
        return; /* a sanitizer build: malloc is not ours to fail */
    const size_t n = 64 * KiB, chunk = 4 * n;
    const int which = 1 + _i;
    for (int m = 0; m <= 40; m++)
        for (uint64_t k = 1; k <= 8; k++) {
            int upstream_live = mallocs - frees;
            crmm_resource *r = parking_resource(which);
            cudaStream_t s = stream_n(1);
            void *before[40];
            for (int i = 0; i < m; i++)
                before[i] = alloc_on(r, n, s);
            fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
            void *y[CAPTURED_BEFORE], *x = NULL; /* the graph's map of blocks grows at some c */
            int c = 1 + (m + (int)k) % (CAPTURED_BEFORE - 1); /* at least one: the graph's record made */
            for (int i = 0; i < c; i++)
                y[i] = alloc_on(r, n, s);
            malloc_fail_arm(k);
            crmm_status st = crmm_resource_allocate(r, n, (crmm_cuda_stream_t)s, &x);
            malloc_fail_disarm();
            crmm_clear_error();
            if (st == CRMM_OK)
                free_on(r, x, n, s);
            for (int i = 0; i < c; i++)
                free_on(r, y[i], n, s);
            fake_capture_end(s);
            ck_assert_int_eq(fake_capture_forbidden(), 0);
            fake_graph_destroy(g);
            for (int i = 0; i < m; i++)
                free_on(r, before[i], n, s);
            free_on(r, alloc_on(r, n, s), n, s); /* takes the graph's blocks back */
            ck_assert_uint_eq(q(r, CRMM_QUERY_ALLOCATIONS), 0);
            uint64_t free_bytes = q(r, CRMM_QUERY_BYTES_FREE), reserved = q(r, CRMM_QUERY_BYTES_RESERVED);
            ck_assert_msg(free_bytes <= reserved && (reserved - free_bytes) % chunk == 0,
                          "%s: %d blocks before, malloc call %llu failing: %llu of %llu bytes free with no block "
                          "allocated",
                          parking[which][0], m, (unsigned long long)k, (unsigned long long)free_bytes,
                          (unsigned long long)reserved);
            crmm_resource_release(r);
            ck_assert_msg(mallocs - frees == upstream_live,
                          "%s: %d blocks before, malloc call %llu failing: %d chunk(s) never given back", parking[which][0],
                          m, (unsigned long long)k, mallocs - frees - upstream_live);
        }
}

/* fixed_size of 64 KiB blocks, one chunk preallocated, over an upstream that gives two chunks. */
static crmm_resource *fixed_size_of_two_chunks(void)
{
    crmm_resource *cuda = crmm_test_create("cuda", "", NULL);
    crmm_resource *lim = crmm_test_create("limiting", "allocation_limit=128KiB", cuda);
    crmm_resource_release(cuda);
    crmm_resource *r = crmm_test_create("fixed_size", "block_size=64KiB blocks_to_preallocate=1", lim);
    crmm_resource_release(lim);
    return r;
}

/* What cannot be served on a captured stream without waiting for the device fails with
 * CRMM_ERROR_OUT_OF_MEMORY naming the capture, makes no forbidden call and no wait, and the
 * capture stays valid; after the capture the allocation may wait. _i 0: an arena whose free
 * memory was all freed on another stream. _i 1: fixed_size, whose first chunk is free on another
 * stream: it grows during the capture (in the relaxed mode, the new chunk's blocks usable there)
 * until its upstream refuses another chunk. */
CRMM_LOOP_TEST_IN("other plugins", out_of_memory_under_capture_rather_than_a_wait, 2)
{
    crmm_resource *r = _i ? fixed_size_of_two_chunks() : parking_resource(0);
    const size_t n = _i ? 64 * KiB : 7 * MiB;
    cudaStream_t s = stream_n(1), other = stream_n(2);
    free_on(r, alloc_on(r, n, other), n, other); /* the arena's pages, fixed_size's chunk: `other`'s */
    int syncs = fake_vmm.device_syncs;
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *grown = _i ? alloc_on(r, n, s) : NULL; /* fixed_size: a second chunk */
    void *x = NULL;
    ck_assert_crmm(crmm_resource_allocate(r, n, (crmm_cuda_stream_t)s, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_msg(strstr(crmm_last_error(), "captured into a CUDA graph"), "%s", crmm_last_error());
    if (grown)
        free_on(r, grown, n, s);
    fake_capture_end(s);
    ck_assert_msg(fake_capture_forbidden() == 0, "%d forbidden call(s), the last %s", fake_capture_forbidden(),
                  fake_capture_last_forbidden());
    ck_assert_int_eq(fake_vmm.device_syncs, syncs);
    ck_assert_uint_eq(q(r, CRMM_QUERY_UPSTREAM_BLOCKS), _i ? 2 : 1);
    fake_graph_destroy(g);
    x = alloc_on(r, n, s); /* after the capture it may wait */
    free_on(r, x, n, s);
    crmm_resource_release(r);
}

/* An arena with no room left fails an allocation on a captured stream with
 * CRMM_ERROR_OUT_OF_MEMORY naming the capture, the pointer NULL, whatever the thread's last error
 * was (none, or an older, unrelated one), and with no forbidden call. */
CRMM_LOOP_TEST_IN("other plugins", full_arena_under_capture_fails_out_of_memory, 2)
{
    crmm_resource *r = parking_resource(0); /* 8 MiB */
    cudaStream_t s = stream_n(1);
    void *held = alloc_on(r, 7 * MiB, s);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *x = r;
    if (_i) /* an older failure of this thread, of another status */
        ck_assert_crmm(crmm_resource_allocate(NULL, 1, NULL, &x), CRMM_ERROR_INVALID_ARGUMENT);
    else
        crmm_clear_error();
    ck_assert_crmm(crmm_resource_allocate(r, 4 * MiB, (crmm_cuda_stream_t)s, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(x);
    ck_assert_msg(strstr(crmm_last_error(), "captured into a CUDA graph"), "%s", crmm_last_error());
    ck_assert_msg(!strstr(crmm_last_error(), "is NULL"), "%s", crmm_last_error());
    fake_capture_end(s);
    ck_assert_msg(fake_capture_forbidden() == 0, "%d forbidden call(s), the last %s", fake_capture_forbidden(),
                  fake_capture_last_forbidden());
    fake_graph_destroy(g);
    free_on(r, held, 7 * MiB, s);
    crmm_resource_release(r);
}

/* The cuda plugin allocates under capture (cudaMalloc in the relaxed mode: new memory is safe for a
 * graph) but refuses to free on a captured stream, which would free what the graph still uses. */
CRMM_TEST_IN("other plugins", cuda_allocates_under_capture_and_refuses_to_free)
{
    crmm_resource *cuda = crmm_test_create("cuda", "", NULL);
    cudaStream_t s = stream_n(1);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    int before = mallocs;
    void *x = alloc_on(cuda, 4 * KiB, s);
    ck_assert_int_eq(mallocs, before + 1);
    ck_assert_crmm(crmm_resource_deallocate(cuda, x, 4 * KiB, (crmm_cuda_stream_t)s), CRMM_ERROR_UNSUPPORTED);
    ck_assert_msg(strstr(crmm_last_error(), "captured into a CUDA graph"), "%s", crmm_last_error());
    /* another thread's capture in global mode: a free on the legacy stream is still legal */
    void *y = alloc_on(cuda, 4 * KiB, NULL);
    free_on(cuda, y, 4 * KiB, NULL);
    fake_capture_end(s);
    ck_assert_msg(fake_capture_forbidden() == 0, "%d forbidden call(s), the last %s", fake_capture_forbidden(),
                  fake_capture_last_forbidden());
    free_on(cuda, x, 4 * KiB, s);
    fake_graph_destroy(g);
    crmm_resource_release(cuda);
}

/* system and sam_headroom hand out system memory, which free() gives back at once: a free on a
 * captured stream would wait for the stream (cudaStreamSynchronize, which capture forbids and which
 * invalidates it) and then free what the graph still uses at every replay. It is refused as the
 * cuda plugin's is, with no forbidden call; after the capture the block frees as usual. */
static const char *const system_kinds[][2] = {{"system", ""}, {"sam_headroom", "headroom=1MiB"}};

CRMM_LOOP_TEST_IN("other plugins", system_refuses_to_free_on_a_captured_stream, 2)
{
    crmm_resource *sys = crmm_test_create(system_kinds[_i][0], system_kinds[_i][1], NULL);
    cudaStream_t s = stream_n(1);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *x = alloc_on(sys, 4 * KiB, s);
    ck_assert_crmm(crmm_resource_deallocate(sys, x, 4 * KiB, (crmm_cuda_stream_t)s), CRMM_ERROR_UNSUPPORTED);
    ck_assert_msg(strstr(crmm_last_error(), "captured into a CUDA graph"), "%s", crmm_last_error());
    ck_assert_msg(fake_capture_forbidden() == 0, "%s: %d forbidden call(s), the last %s", system_kinds[_i][0],
                  fake_capture_forbidden(), fake_capture_last_forbidden());
    ck_assert_uint_eq(q(sys, CRMM_QUERY_ALLOCATIONS), 1); /* still live */
    fake_capture_end(s);
    free_on(sys, x, 4 * KiB, s);
    ck_assert_uint_eq(q(sys, CRMM_QUERY_ALLOCATIONS), 0);
    fake_graph_destroy(g);
    crmm_resource_release(sys);
}

/* The adaptors make no CUDA call of their own (prefetch leaves its hint out under capture): over a
 * pool, a capture through them is the pool's, blocks held and all. */
static const char *const adaptors[][2] = {
    {"logging", "file=/dev/null"}, {"statistics", ""}, {"tracking", ""}, {"limiting", "allocation_limit=64MiB"},
    {"failure_callback", ""}, {"aligned", "alignment=4096 alignment_threshold=1KiB"}, {"prefetch", ""},
    {"binning", "bins=256:4KiB"},
};

CRMM_LOOP_TEST_IN("other plugins", adaptors_over_a_pool_under_capture, (int)(sizeof adaptors / sizeof adaptors[0]))
{
    crmm_resource *p = pool_in_form(CHUNKS_SYNC, "initial_size=4MiB");
    crmm_resource *a = crmm_test_create(adaptors[_i][0], adaptors[_i][1], p);
    crmm_resource_release(p);
    cudaStream_t s = stream_n(1);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    int before = prefetches;
    void *x = alloc_on(a, 64 * KiB, s);
    free_on(a, x, 64 * KiB, s);
    fake_capture_end(s);
    ck_assert_int_eq(prefetches, before);
    ck_assert_msg(fake_capture_forbidden() == 0, "%s: %d forbidden call(s), the last %s", adaptors[_i][0],
                  fake_capture_forbidden(), fake_capture_last_forbidden());
    ck_assert_int_eq(fake_graph_user_objects(g), 1);
    void *y = alloc_on(a, 64 * KiB, s);
    ck_assert_ptr_ne(y, x); /* held for the graph */
    free_on(a, y, 64 * KiB, s);
    fake_graph_destroy(g);
    crmm_resource_release(a);
}

int main(void)
{
    crmm_graph_capture_enable(true); /* as a program that captures says (no CUDA call: safe before the forks) */
    return CRMM_TEST_MAIN_CASES("graphs_plugins", {"other plugins", 0});
}
