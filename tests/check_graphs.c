/* check_graphs.c — the pool under CUDA graph capture on the CPU, against the scripted CUDA of
 * fake_vmm.h and fake_capture.h, in its three forms (chunks with stream_reuse = sync and = event,
 * expandable): allocating and freeing under capture makes no call that capture forbids, and memory
 * a graph allocated or freed goes to no one else until the graph is destroyed, and then does
 * (docs/cuda-graphs.md). The other plugins under capture: check_graphs_plugins.c; graph_pool =
 * private: check_graphs_private.c. */
#include "build_config.h"

#include "graphs_test.h"

/* ---- the pool ------------------------------------------------------------------------------ */

/* Blocks a capture allocated and freed stay the graph's until it is destroyed: an allocation
 * outside the capture never gets them, BYTES_FREE leaves them out; then they come back. */
CRMM_LOOP_TEST_IN("pool", blocks_of_a_capture_are_held_until_the_graph_is_destroyed, FORMS)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=4MiB");
    cudaStream_t s = stream_n(1), other = stream_n(2);
    void *warm = alloc_on(p, MiB, s);
    free_on(p, warm, MiB, s);
    uint64_t free_before = q(p, CRMM_QUERY_BYTES_FREE);

    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *a = alloc_on(p, MiB, s);
    free_on(p, a, MiB, s);
    void *b = alloc_on(p, MiB, s); /* later in the same capture, same stream: may reuse a */
    free_on(p, b, MiB, s);
    fake_capture_end(s);
    no_forbidden_call(form);
    ck_assert_int_eq(fake_graph_user_objects(g), 1);

    /* the graph is alive: its memory is neither free nor handed out */
    uint64_t held = a == b ? MiB : 2 * MiB;
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED) - held);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0); /* the user's view: everything was freed */
    void *c = alloc_on(p, MiB, s);
    void *d = alloc_on(p, MiB, other);
    ck_assert_ptr_ne(c, a);
    ck_assert_ptr_ne(c, b);
    ck_assert_ptr_ne(d, a);
    ck_assert_ptr_ne(d, b);
    free_on(p, c, MiB, s);
    free_on(p, d, MiB, other);

    fake_graph_destroy(g);
    ck_assert_int_eq(fake_user_objects_live(), 0);
    /* back in the pool, usable by any stream at once: a new stream gets it before the pool grows */
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);
    void *got[16];
    int n = 0, found = 0;
    while (n < 16) {
        got[n] = alloc_on(p, MiB, stream_n(3));
        found |= got[n] == a || got[n] == b;
        n++;
        if (found || q(p, CRMM_QUERY_BYTES_RESERVED) != reserved)
            break;
    }
    ck_assert_msg(found, "%s: the graph's block was not handed out before the pool grew", form_names[form]);
    while (n > 0)
        free_on(p, got[--n], MiB, stream_n(3));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    ck_assert_uint_ge(q(p, CRMM_QUERY_BYTES_FREE), free_before);
    crmm_resource_release(p);
}

/* A block allocated before the capture and freed inside it is the graph's too (its replays use it
 * up to the free); one allocated inside and freed after the capture ended likewise. */
CRMM_LOOP_TEST_IN("pool", blocks_freed_inside_or_allocated_inside_are_the_graphs, FORMS)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=4MiB");
    cudaStream_t s = stream_n(1);
    void *before = alloc_on(p, 512 * KiB, s);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    free_on(p, before, 512 * KiB, s);
    void *inside = alloc_on(p, 256 * KiB, s);
    fake_capture_end(s);
    no_forbidden_call(form);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 1);
    free_on(p, inside, 256 * KiB, s); /* after the capture: still the graph's */
    for (int i = 0; i < 8; i++) {
        void *x = alloc_on(p, 256 * KiB, s);
        ck_assert_ptr_ne(x, before);
        ck_assert_ptr_ne(x, inside);
    }
    /* freeing a parked block again is a double free, said so */
    ck_assert_crmm(crmm_resource_deallocate(p, inside, 256 * KiB, (crmm_cuda_stream_t)s), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "already free"), "%s", crmm_last_error());
    uint64_t free_now = q(p, CRMM_QUERY_BYTES_FREE);
    fake_graph_destroy(g);
    /* the capture may have reused the block it freed for its own later allocation */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), free_now + (inside == before ? 512 : 768) * KiB);
    crmm_resource_release(p); /* the eight blocks are reported as leaks: expected */
}

/* A capture reuses what it freed as the pool reuses free memory: a parked block is split for a
 * smaller request (the rest stays parked for the capture) and parked neighbours merge, so the
 * capture's temporaries come back to the same addresses and the graph holds no more than its
 * largest moment. Taken whole, the 4 MiB block would serve the first 2 MiB request alone and the
 * second would need more memory. */
CRMM_LOOP_TEST_IN("pool", a_capture_splits_and_merges_the_blocks_it_freed, FORMS)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=16MiB");
    cudaStream_t s = stream_n(1);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    char *a = alloc_on(p, 4 * MiB, s);
    free_on(p, a, 4 * MiB, s);
    char *b = alloc_on(p, 2 * MiB, s);
    char *c = alloc_on(p, 2 * MiB, s);
    ck_assert_ptr_eq(b, a);
    ck_assert_ptr_eq(c, a + 2 * MiB);
    free_on(p, c, 2 * MiB, s);
    free_on(p, b, 2 * MiB, s);
    char *d = alloc_on(p, 4 * MiB, s); /* b and c merged back into a */
    ck_assert_ptr_eq(d, a);
    free_on(p, d, 4 * MiB, s);
    fake_capture_end(s);
    no_forbidden_call(form);
    ck_assert_uint_eq(graph_held(p), 4 * MiB);
    /* a parked block that merged into its neighbour is not a block any more: freeing it again is
     * still a double free, said so */
    ck_assert_crmm(crmm_resource_deallocate(p, c, 2 * MiB, (crmm_cuda_stream_t)s), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "already free"), "%s", crmm_last_error());
    fake_graph_destroy(g);
    ck_assert_int_eq(fake_user_objects_live(), 0);
    ck_assert_uint_eq(graph_held(p), 0); /* all of it back, nothing lost in the splits and merges */
    crmm_resource_release(p);
}

/* Small requests (up to 1 MiB) never cut a large parked block, and large ones never take small
 * parked blocks: a small tensor that outlives its layer would otherwise pin a large block for the
 * rest of the capture, and every later layer would need large blocks of its own. The decoder
 * step's pattern: a layer frees its large temporaries, then makes small ones that stay live while
 * the next layer asks for large ones again. */
CRMM_LOOP_TEST_IN("pool", small_requests_of_a_capture_leave_its_large_blocks_whole, FORMS)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=16MiB");
    cudaStream_t s = stream_n(1);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    enum { LAYERS = 6 };
    char *small[LAYERS];
    char *first = NULL;
    for (int layer = 0; layer < LAYERS; layer++) {
        char *big = alloc_on(p, 2 * MiB, s);
        if (layer == 0)
            first = big;
        ck_assert_ptr_eq(big, first); /* the layer before gave it back */
        free_on(p, big, 2 * MiB, s);
        small[layer] = alloc_on(p, 4 * KiB, s); /* lives on */
        ck_assert_msg((uintptr_t)small[layer] + 4 * KiB <= (uintptr_t)first || (uintptr_t)small[layer] >= (uintptr_t)first + 2 * MiB,
                      "%s: a 4 KiB request was cut from the parked 2 MiB block", form_names[form]);
    }
    for (int layer = 0; layer < LAYERS; layer++)
        free_on(p, small[layer], 4 * KiB, s);
    char *again = alloc_on(p, 4 * KiB, s); /* a small parked block is reused for a small request */
    int reused = 0;
    for (int layer = 0; layer < LAYERS; layer++)
        reused |= again == small[layer];
    ck_assert_msg(reused, "%s: a small request did not reuse the capture's small blocks", form_names[form]);
    free_on(p, again, 4 * KiB, s);
    fake_capture_end(s);
    no_forbidden_call(form);
    ck_assert_uint_eq(graph_held(p), 2 * MiB + LAYERS * 4 * KiB);
    fake_graph_destroy(g);
    ck_assert_uint_eq(graph_held(p), 0);
    crmm_resource_release(p);
}

/* A capture that spans two streams reuses on each stream only what was freed on that stream:
 * nothing orders a block freed on one before an allocation on the other. */
CRMM_LOOP_TEST_IN("pool", a_capture_reuses_a_block_only_on_the_stream_that_freed_it, FORMS)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=16MiB");
    cudaStream_t s1 = stream_n(1), s2 = stream_n(2);
    fake_graph *g = fake_capture_begin(s1, cudaStreamCaptureModeGlobal);
    fake_capture_join(s2, s1);
    char *a = alloc_on(p, 2 * MiB, s1);
    free_on(p, a, 2 * MiB, s1);
    char *b = alloc_on(p, 2 * MiB, s2);
    ck_assert_ptr_ne(b, a);
    char *c = alloc_on(p, 2 * MiB, s1);
    ck_assert_ptr_eq(c, a);
    free_on(p, b, 2 * MiB, s2);
    free_on(p, c, 2 * MiB, s1);
    fake_capture_end(s1);
    fake_capture_end(s2);
    no_forbidden_call(form);
    ck_assert_int_eq(fake_graph_user_objects(g), 1); /* one graph, one record */
    fake_graph_destroy(g);
    ck_assert_uint_eq(graph_held(p), 0);
    crmm_resource_release(p);
}

/* Random allocations and frees of mixed sizes in a capture on two streams, then a second graph
 * that frees some of the first's blocks (parked there, never reused: the first owns them): live
 * blocks never overlap, and once both graphs are gone, in either order, everything is free again:
 * the splits and merges of parked blocks lose and double nothing. Rows from 2 * FORMS on: with
 * graph_pool = private. */
CRMM_LOOP_TEST_IN("pool", random_captures_lose_nothing, 4 * FORMS)
{
    int form = _i % FORMS, first_goes_first = (_i / FORMS) % 2;
    crmm_resource *p = pool_in_form(form, _i < 2 * FORMS ? "initial_size=8MiB" : "initial_size=8MiB graph_pool=private");
    cudaStream_t s1 = stream_n(1), s2 = stream_n(2), s3 = stream_n(3);
    enum { SLOTS = 48, STEPS = 3000 };
    struct { char *at; size_t n; cudaStream_t s; } live[SLOTS] = {{0}};
    unsigned seed = 12345u + (unsigned)_i;
    fake_graph *g1 = fake_capture_begin(s1, cudaStreamCaptureModeGlobal);
    fake_capture_join(s2, s1);
    for (int step = 0; step < STEPS; step++) {
        seed = seed * 1103515245u + 12345u;
        int k = (int)((seed >> 8) % SLOTS);
        if (live[k].at) {
            free_on(p, live[k].at, live[k].n, live[k].s);
            live[k].at = NULL;
            continue;
        }
        size_t n = (seed >> 20) & 1 ? (size_t)((seed >> 12) % 3000 + 1) * 256 /* small */
                                    : (size_t)((seed >> 12) % 12 + 1) * 512 * KiB; /* up to 6 MiB */
        live[k].n = n;
        live[k].s = (seed >> 21) & 1 ? s1 : s2;
        live[k].at = alloc_on(p, n, live[k].s);
        memset(live[k].at, k, n < 4096 ? n : 4096); /* touch it: the scripted memory is real */
        for (int j = 0; j < SLOTS; j++)
            if (j != k && live[j].at)
                ck_assert_msg(live[j].at + live[j].n <= live[k].at || live[k].at + n <= live[j].at,
                              "%s: step %d: %p (%zu) overlaps %p (%zu)", form_names[form], step, (void *)live[k].at, n,
                              (void *)live[j].at, live[j].n);
    }
    fake_capture_end(s1);
    fake_capture_end(s2);
    fake_graph *g2 = fake_capture_begin(s3, cudaStreamCaptureModeGlobal);
    for (int k = 0; k < SLOTS; k += 2)
        if (live[k].at) {
            free_on(p, live[k].at, live[k].n, s3);
            live[k].at = NULL;
        }
    fake_capture_end(s3);
    for (int k = 0; k < SLOTS; k++)
        if (live[k].at)
            free_on(p, live[k].at, live[k].n, live[k].s);
    no_forbidden_call(form);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_gt(graph_held(p), 0);
    fake_graph_destroy(first_goes_first ? g1 : g2);
    ck_assert_uint_gt(graph_held(p), 0); /* the other graph still holds its blocks */
    fake_graph_destroy(first_goes_first ? g2 : g1);
    ck_assert_int_eq(fake_user_objects_live(), 0);
    ck_assert_uint_eq(graph_held(p), 0);
    crmm_resource_release(p);
}

struct capturing_thread {
    crmm_resource *p;
    cudaStream_t s;
    unsigned seed;
    int bad; /* blocks whose pattern another thread overwrote */
};

/* Random allocations and frees on t->s (under capture), each block filled with a pattern of its
 * own and checked before its free. */
static void *capture_churn(void *arg)
{
    struct capturing_thread *t = arg;
    enum { SLOTS = 32 };
    struct { unsigned char *at; size_t n; unsigned char mark; } live[SLOTS] = {{0}};
    for (int step = 0; step < 2000; step++) {
        t->seed = t->seed * 1103515245u + 12345u;
        int k = (int)((t->seed >> 8) % SLOTS);
        if (live[k].at) {
            for (size_t i = 0; i < 64 && i < live[k].n; i++)
                t->bad += live[k].at[i] != live[k].mark;
            crmm_resource_deallocate(t->p, live[k].at, live[k].n, (crmm_cuda_stream_t)t->s);
            live[k].at = NULL;
            continue;
        }
        size_t n = (t->seed >> 20) & 1 ? (size_t)((t->seed >> 12) % 1000 + 1) * 256
                                       : (size_t)((t->seed >> 12) % 4 + 1) * 512 * KiB; /* two threads fit the device */
        void *x = NULL;
        if (crmm_resource_allocate(t->p, n, (crmm_cuda_stream_t)t->s, &x) != CRMM_OK) {
            t->bad++;
            continue;
        }
        live[k].at = x;
        live[k].n = n;
        live[k].mark = (unsigned char)(t->seed >> 24);
        memset(live[k].at, live[k].mark, n < 64 ? n : 64);
    }
    for (int k = 0; k < SLOTS; k++)
        if (live[k].at)
            crmm_resource_deallocate(t->p, live[k].at, live[k].n, (crmm_cuda_stream_t)t->s);
    return NULL;
}

/* Two threads capture two graphs on two streams at once, splitting and merging their parked
 * blocks under the pool's lock: no block is handed to both (each checks its blocks' patterns),
 * and once both graphs are gone everything is free again. Rows FORMS to 2 * FORMS - 1 and from
 * 3 * FORMS on: with graph_pool = private; from 2 * FORMS on: with per-thread caches on (the two
 * threads switch them on). */
CRMM_LOOP_TEST_IN("pool", two_threads_capture_at_once, 4 * FORMS)
{
    int form = _i % FORMS;
    char params[96];
    snprintf(params, sizeof params, "initial_size=8MiB%s%s", _i / FORMS % 2 ? " graph_pool=private" : "",
             _i / FORMS / 2 ? " thread_cache=on" : "");
    crmm_resource *p = pool_in_form(form, params);
    struct capturing_thread t[2] = {{p, stream_n(4), 7u, 0}, {p, stream_n(5), 99u, 0}};
    fake_graph *g[2];
    for (int i = 0; i < 2; i++)
        g[i] = fake_capture_begin(t[i].s, cudaStreamCaptureModeGlobal);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, capture_churn, &t[i]), 0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < 2; i++) {
        fake_capture_end(t[i].s);
        ck_assert_msg(t[i].bad == 0, "%s: thread %d: %d blocks overwritten or refused", form_names[form], i, t[i].bad);
    }
    no_forbidden_call(form);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    for (int i = 0; i < 2; i++)
        fake_graph_destroy(g[i]);
    ck_assert_uint_eq(graph_held(p), 0);
    crmm_resource_release(p);
}

/* A destroyed graph's blocks join the pool's ready state when the pool collects them. When that
 * state cannot be made (malloc fails) they stay parked, held, and the graph's record is kept: the
 * next collect hands them back (they are neither lost nor freed with the record). Rows _i / FORMS
 * = 1: the graph also parks a block it does not own (allocated before the capture, freed inside
 * it), and its last owned block is freed (outside any capture) between the failed collect and the
 * next: the record must stay until the parked block is handed back too. Rows _i / FORMS = 2: the
 * ready state made before, the block is freed after the capture on another stream, whose state
 * its free made: the collect needs no malloc and hands it back. */
CRMM_LOOP_TEST_IN("pool", blocks_come_back_after_a_collect_that_malloc_failed, 3 * FORMS)
{
    if (!MALLOC_FAIL_REPLACES)
        return; /* a sanitizer build: malloc is not ours to fail */
    int not_owned = _i / FORMS == 1, after = _i / FORMS == 2;
    crmm_resource *p = pool_in_form(_i % FORMS, "initial_size=4MiB");
    cudaStream_t s = stream_n(1);
    void *before = not_owned ? alloc_on(p, MiB, NULL) : NULL; /* the initial chunk's own state: no ready state yet */
    if (after) { /* a graph destroyed and collected first: the ready state is made */
        fake_graph *g0 = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
        free_on(p, alloc_on(p, MiB, s), MiB, s);
        fake_capture_end(s);
        fake_graph_destroy(g0);
        (void)q(p, CRMM_QUERY_BYTES_FREE);
    }
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *owned = alloc_on(p, MiB, s);
    if (!after)
        free_on(p, not_owned ? before : owned, MiB, s);
    fake_capture_end(s);
    if (after)
        free_on(p, owned, MiB, stream_n(5));
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);
    fake_graph_destroy(g);
    uint64_t free_bytes = 0;
    malloc_fail_arm_from(1, 1); /* every malloc fails: the ready state cannot be made */
    crmm_status st = crmm_resource_query(p, CRMM_QUERY_BYTES_FREE, &free_bytes);
    malloc_fail_disarm();
    ck_assert_crmm_ok(st);
    ck_assert_uint_eq(free_bytes, reserved - (after ? 0 : not_owned ? 2 : 1) * MiB); /* still held */
    if (not_owned)
        free_on(p, owned, MiB, s); /* the graph is gone: back to the pool at once */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), reserved); /* all handed back at the next collect */
    void *b = alloc_on(p, 4 * MiB, stream_n(2)); /* the whole pool, the graph's blocks included */
    free_on(p, b, 4 * MiB, stream_n(2));
    crmm_resource_release(p);
}

/* When the record of a graph's parked blocks on a stream cannot be made (malloc fails at the
 * capture's first free there), the block is still held for the graph, only not reused by the
 * capture; it comes back when the graph goes, and a second free of it is still refused. */
CRMM_LOOP_TEST_IN("pool", a_block_parked_while_malloc_fails_is_held_all_the_same, FORMS)
{
    if (!MALLOC_FAIL_REPLACES)
        return; /* a sanitizer build: malloc is not ours to fail */
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=8MiB");
    cudaStream_t s = stream_n(1);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *a = alloc_on(p, 2 * MiB, s);
    malloc_fail_arm_from(1, 1);
    crmm_status st = crmm_resource_deallocate(p, a, 2 * MiB, (crmm_cuda_stream_t)s);
    malloc_fail_disarm();
    ck_assert_crmm_ok(st);
    void *b = alloc_on(p, 2 * MiB, s);
    ck_assert_ptr_ne(b, a); /* not reused: no record to find it by */
    free_on(p, b, 2 * MiB, s);
    ck_assert_crmm(crmm_resource_deallocate(p, a, 2 * MiB, (crmm_cuda_stream_t)s), CRMM_ERROR_INVALID_ARGUMENT);
    fake_capture_end(s);
    no_forbidden_call(form);
    ck_assert_uint_eq(graph_held(p), 4 * MiB);
    fake_graph_destroy(g);
    ck_assert_uint_eq(graph_held(p), 0);
    crmm_resource_release(p);
}

/* A graph whose blocks could not be handed back at a collect (malloc failed making the ready
 * state) waits for the next one; its last live block freed meanwhile is held for it, not the end
 * of its record (which the waiting list still names), and comes back at the next collect. */
CRMM_LOOP_TEST_IN("pool", a_block_freed_while_its_graph_waits_for_a_collect, FORMS)
{
    if (!MALLOC_FAIL_REPLACES)
        return; /* a sanitizer build: malloc is not ours to fail */
    crmm_resource *p = pool_in_form(_i, "initial_size=4MiB");
    cudaStream_t s = stream_n(1);
    fake_graph *g1 = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *x = alloc_on(p, MiB, s);
    fake_capture_end(s);
    fake_graph_destroy(g1);
    uint64_t v = 0;
    malloc_fail_arm_from(1, 1); /* the collect cannot make the ready state */
    crmm_status st = crmm_resource_query(p, CRMM_QUERY_BYTES_FREE, &v);
    malloc_fail_disarm();
    ck_assert_crmm_ok(st);
    free_on(p, x, MiB, s);
    fake_graph *g2 = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    free_on(p, alloc_on(p, MiB, s), MiB, s);
    fake_capture_end(s);
    ck_assert_uint_eq(graph_held(p), MiB); /* g2's block; x came back at this query's collect */
    fake_graph_destroy(g2);
    ck_assert_uint_eq(graph_held(p), 0);
    crmm_resource_release(p);
}

/* What the order hook saw since the test armed it: whether stream `order_t`'s work is ordered
 * before what follows (a device synchronization, t synchronized, or an event recorded on t and
 * then waited for). */
static cudaStream_t order_t;
static int t_recorded, t_ordered;

static void order_hook(int what, cudaStream_t s)
{
    if (what == FAKE_ORDER_DEVICE_SYNC || (what == FAKE_ORDER_STREAM_SYNC && s == order_t))
        t_ordered = 1;
    else if (what == FAKE_ORDER_RECORD && s == order_t)
        t_recorded = 1;
    else if (what == FAKE_ORDER_WAIT && t_recorded)
        t_ordered = 1;
}

/* Up to 8 allocations of 1 MiB on stream u, until one gets block x (then freed again): false
 * when u got x with no order after stream t's work (no device or t synchronization, no wait on an
 * event recorded on t). */
static bool ordered_if_handed_to(crmm_resource *p, void *x, cudaStream_t t, cudaStream_t u)
{
    order_t = t;
    t_recorded = t_ordered = 0;
    fake_vmm_order_hook = order_hook;
    void *got[8];
    int n = 0, found = 0;
    while (n < 8 && !found) {
        got[n] = alloc_on(p, MiB, u);
        found = got[n++] == x;
    }
    fake_vmm_order_hook = NULL;
    while (n > 0)
        free_on(p, got[--n], MiB, u);
    return !found || t_ordered;
}

/* After a graph that held x is destroyed: its record collected, x taken back at once by `owner`
 * (the stream it was last freed on) when `owner_first`, then whether another stream u got x only
 * once ordered after owner (ordered_if_handed_to). */
static bool back_to_its_stream(crmm_resource *p, void *x, cudaStream_t owner, cudaStream_t u, bool owner_first)
{
    (void)q(p, CRMM_QUERY_BYTES_FREE); /* collects */
    if (owner_first) {
        ck_assert_ptr_eq(alloc_on(p, MiB, owner), x);
        free_on(p, x, MiB, owner);
    }
    return ordered_if_handed_to(p, x, owner, u);
}

/* A block a capture allocated and the program freed after it, on another stream t (eager work on
 * the graph's output), is t's once the graph is destroyed: work queued on t may still use it, so
 * another stream gets it only once ordered after t, never at once; t itself gets it at once. */
CRMM_LOOP_TEST_IN("pool", a_graphs_block_freed_after_the_capture_keeps_its_streams_order, 2 * FORMS)
{
    int form = _i % FORMS;
    crmm_resource *p = pool_in_form(form, "initial_size=4MiB");
    cudaStream_t s = stream_n(1), t = stream_n(2), u = stream_n(3);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *x = alloc_on(p, MiB, s);
    fake_capture_end(s);
    free_on(p, x, MiB, t);
    fake_graph_destroy(g);
    ck_assert_msg(back_to_its_stream(p, x, t, u, _i >= FORMS),
                  "%s: another stream got the block freed on t with no order after t", form_names[form]);
    no_forbidden_call(form);
    crmm_resource_release(p);
}

/* A block allocated before a capture and freed inside it, on the capture's stream s, may still be
 * in use by eager work queued on s before the capture began. When the graph is destroyed (here
 * never launched) it is s's: another stream gets it only once ordered after s; s itself gets it
 * at once (rows from 2 * FORMS on). Rows FORMS to 2 * FORMS - 1: with graph_pool = private, where
 * the capture holds such a block without reusing it. */
CRMM_LOOP_TEST_IN("pool", a_block_from_before_the_capture_keeps_its_streams_order, 3 * FORMS)
{
    int form = _i % FORMS;
    bool private = _i >= FORMS && _i < 2 * FORMS;
    crmm_resource *p = pool_in_form(form, private ? "initial_size=4MiB graph_pool=private" : "initial_size=4MiB");
    cudaStream_t s = stream_n(1), u = stream_n(3);
    void *x = alloc_on(p, MiB, s); /* eager work on s writes it */
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    free_on(p, x, MiB, s);
    fake_capture_end(s);
    fake_graph_destroy(g);
    ck_assert_msg(back_to_its_stream(p, x, s, u, _i >= 2 * FORMS),
                  "%s%s: another stream got the block freed in the capture on s with no order after s", form_names[form],
                  private ? ", private" : "");
    no_forbidden_call(form);
    crmm_resource_release(p);
}

/* A block graph A allocated (eager work on t may then use A's output), freed inside graph B's
 * capture on t while A lives: in B it is A's, held, not reused. Once both graphs are gone, in
 * either order (B here never launched), it is t's, as a block from before B's capture is: another
 * stream gets it only once ordered after t. */
CRMM_LOOP_TEST_IN("pool", another_graphs_block_freed_in_a_capture_keeps_its_streams_order, 2 * FORMS)
{
    int form = _i % FORMS;
    crmm_resource *p = pool_in_form(form, "initial_size=4MiB");
    cudaStream_t s = stream_n(1), t = stream_n(2), u = stream_n(3);
    fake_graph *ga = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *x = alloc_on(p, MiB, s);
    fake_capture_end(s);
    fake_graph *gb = fake_capture_begin(t, cudaStreamCaptureModeGlobal);
    free_on(p, x, MiB, t);
    fake_capture_end(t);
    fake_graph_destroy(_i < FORMS ? gb : ga);
    (void)q(p, CRMM_QUERY_BYTES_FREE); /* collects */
    fake_graph_destroy(_i < FORMS ? ga : gb);
    (void)q(p, CRMM_QUERY_BYTES_FREE);
    ck_assert_uint_eq(graph_held(p), 0);
    ck_assert_msg(ordered_if_handed_to(p, x, t, u), "%s (%s destroyed first): another stream got the block with no "
                  "order after t", form_names[form], _i < FORMS ? "B" : "A");
    no_forbidden_call(form);
    crmm_resource_release(p);
}

/* A graph's block freed after the capture on t while malloc fails, so that no record of t's
 * blocks can be made for the graph: it is held as a foreign block, and once the graph is gone it
 * is still t's. */
CRMM_LOOP_TEST_IN("pool", a_block_held_without_a_record_keeps_its_streams_order, FORMS)
{
    if (!MALLOC_FAIL_REPLACES)
        return; /* a sanitizer build: malloc is not ours to fail */
    crmm_resource *p = pool_in_form(_i, "initial_size=4MiB");
    cudaStream_t s = stream_n(1), t = stream_n(2), u = stream_n(3);
    free_on(p, alloc_on(p, 256, t), 256, t); /* t's state exists: no malloc for it below */
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *x = alloc_on(p, MiB, s);
    fake_capture_end(s);
    malloc_fail_arm_from(1, 1);
    crmm_status st = crmm_resource_deallocate(p, x, MiB, (crmm_cuda_stream_t)t);
    malloc_fail_disarm();
    ck_assert_crmm_ok(st);
    fake_graph_destroy(g);
    (void)q(p, CRMM_QUERY_BYTES_FREE);
    ck_assert_msg(ordered_if_handed_to(p, x, t, u), "%s: another stream got the block freed on t with no order after t",
                  form_names[_i]);
    crmm_resource_release(p);
}

/* stream_reuse = event: a graph's block freed on t after the capture, then
 * crmm_pool_forget_stream(t) (t may be destroyed from then on), then the graph destroyed: no CUDA
 * call names t again (the block is ready: t's work was waited for). */
CRMM_LOOP_TEST_IN("pool", a_forgotten_stream_is_not_named_when_a_graph_goes, 2)
{
    crmm_resource *p = _i == 0 ? pool_in_form(CHUNKS_EVENT, "initial_size=1MiB")
                               : pool_in_form(EXPANDABLE, "initial_size=1MiB stream_reuse=event");
    cudaStream_t s = stream_n(1), t = stream_n(2), u = stream_n(3);
    void *keep = alloc_on(p, MiB, NULL); /* the initial memory stays live */
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeRelaxed);
    void *x = alloc_on(p, MiB, s);
    fake_capture_end(s);
    free_on(p, x, MiB, t);
    ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)t));
    fake_graph_destroy(g);
    (void)q(p, CRMM_QUERY_BYTES_FREE);
    order_t = t;
    t_recorded = t_ordered = 0;
    fake_vmm_order_hook = order_hook;
    void *y = alloc_on(p, MiB, u);
    fake_vmm_order_hook = NULL;
    ck_assert_msg(!t_recorded, "row %d: an event was recorded on t after crmm_pool_forget_stream(t)", _i);
    ck_assert_ptr_eq(y, x);
    free_on(p, y, MiB, u);
    free_on(p, keep, MiB, NULL);
    crmm_resource_release(p);
}

/* After crmm_pool_forget_stream(t), a new stream may get t's handle: a graph's block freed on it
 * after the capture is that new stream's once the graph goes (ordered after its work), not
 * ready as the forgotten stream's blocks are. */
CRMM_LOOP_TEST_IN("pool", a_stream_given_a_forgotten_streams_handle_keeps_its_order, FORMS)
{
    crmm_resource *p = pool_in_form(_i, "initial_size=4MiB");
    cudaStream_t s = stream_n(1), t = stream_n(2), u = stream_n(3);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *x = alloc_on(p, MiB, s), *y = alloc_on(p, MiB, s);
    fake_capture_end(s);
    free_on(p, x, MiB, t);
    ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)t)); /* t destroyed, its handle reused */
    free_on(p, y, MiB, t);
    fake_graph_destroy(g);
    (void)q(p, CRMM_QUERY_BYTES_FREE);
    ck_assert_msg(ordered_if_handed_to(p, y, t, u), "%s: another stream got the new t's block with no order after it",
                  form_names[_i]);
    crmm_resource_release(p);
}

/* With stream_reuse = event, an allocation outside a capture whose last resort would synchronize
 * the device (the pool at its maximum, another stream's free blocks too small alone) does not
 * while a stream that holds free blocks is captured: CUDA would refuse it and invalidate that
 * capture. It fails with CRMM_ERROR_OUT_OF_MEMORY instead; after the capture it synchronizes. */
CRMM_TEST_IN("pool", event_reuse_does_not_synchronize_while_a_holding_stream_is_captured)
{
    crmm_resource *p = pool_in_form(CHUNKS_EVENT, "initial_size=4MiB maximum_size=4MiB");
    cudaStream_t c = stream_n(1), t = stream_n(2);
    void *a = alloc_on(p, 2 * MiB, c), *b = alloc_on(p, 2 * MiB, c);
    free_on(p, a, 2 * MiB, c);
    fake_graph *g = fake_capture_begin(c, cudaStreamCaptureModeGlobal);
    free_on(p, alloc_on(p, 64 * KiB, c), 64 * KiB, c); /* the capture is under way */
    int syncs = fake_vmm.device_syncs;
    void *x = NULL;
    ck_assert_crmm(crmm_resource_allocate(p, 3 * MiB, (crmm_cuda_stream_t)t, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(fake_vmm.device_syncs, syncs);
    fake_capture_end(c);
    ck_assert_int_eq(fake_capture_forbidden(), 0);
    fake_graph_destroy(g);
    free_on(p, b, 2 * MiB, c);
    x = alloc_on(p, 3 * MiB, t); /* now it may wait */
    free_on(p, x, 3 * MiB, t);
    crmm_resource_release(p);
}

/* Per-thread default streams of two threads under one capture (graphs_test.h). */
CRMM_LOOP_TEST_IN("pool", per_thread_default_streams_of_two_threads_do_not_share_parked_blocks, FORMS)
{
    crmm_resource *p = pool_in_form(_i, "initial_size=8MiB");
    per_thread_streams_keep_their_parked_blocks(p, MiB, form_names[_i]);
    ck_assert_uint_eq(graph_held(p), 0);
    crmm_resource_release(p);
}

/* Under capture the pool takes no other stream's free blocks (that needs a device
 * synchronization or an event on the other stream): it grows instead, with no forbidden call —
 * the chunked pool's cudaMalloc runs in the relaxed capture mode, the expandable pool maps pages
 * the same way, and an expandable pool past its mark does not wait to move pages. */
CRMM_LOOP_TEST_IN("pool", growth_under_capture_makes_no_forbidden_call, FORMS)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=1MiB");
    cudaStream_t s = stream_n(1), other = stream_n(2);
    void *x = alloc_on(p, MiB, other);
    free_on(p, x, MiB, other); /* free, on another stream */
    void *big = alloc_on(p, 4 * MiB, s);
    free_on(p, big, 4 * MiB, s);
    int syncs = fake_vmm.device_syncs;
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);

    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *y = alloc_on(p, 8 * MiB, s); /* more than the pool holds free anywhere */
    void *z = alloc_on(p, 2 * MiB, s);
    free_on(p, z, 2 * MiB, s);
    free_on(p, y, 8 * MiB, s);
    fake_capture_end(s);
    no_forbidden_call(form);
    ck_assert_int_eq(fake_vmm.device_syncs, syncs);
    ck_assert_uint_gt(q(p, CRMM_QUERY_BYTES_RESERVED), reserved);
    fake_graph_destroy(g);
    crmm_resource_release(p);
}

/* When the driver or the maximum allows no growth, allocation under capture fails with
 * CRMM_ERROR_OUT_OF_MEMORY naming the capture, without waiting for the device. */
CRMM_LOOP_TEST_IN("pool", out_of_memory_under_capture_names_the_capture, FORMS)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=1MiB maximum_size=2MiB");
    cudaStream_t s = stream_n(1);
    void *x = alloc_on(p, MiB, stream_n(2));
    free_on(p, x, MiB, stream_n(2));
    int syncs = fake_vmm.device_syncs;
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *y = NULL;
    ck_assert_crmm(crmm_resource_allocate(p, 4 * MiB, (crmm_cuda_stream_t)s, &y), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_msg(strstr(crmm_last_error(), "captured into a CUDA graph"), "%s", crmm_last_error());
    fake_capture_end(s);
    no_forbidden_call(form);
    ck_assert_int_eq(fake_vmm.device_syncs, syncs);
    fake_graph_destroy(g);
    crmm_resource_release(p);
}

/* A pool destroyed while a graph still holds its blocks: the graph's destructor, run later, touches
 * nothing of the pool (ASan and the leak checker watch). */
CRMM_LOOP_TEST_IN("pool", a_pool_destroyed_before_its_graph, FORMS)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=1MiB");
    cudaStream_t s = stream_n(1);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *a = alloc_on(p, 64 * KiB, s);
    free_on(p, a, 64 * KiB, s);
    fake_capture_end(s);
    crmm_resource_release(p);
    fake_graph_destroy(g);
    ck_assert_int_eq(fake_user_objects_live(), 0);
}

/* Two captures on two streams at once: each graph holds its own blocks, and each comes back when
 * its own graph is destroyed. */
CRMM_LOOP_TEST_IN("pool", two_graphs_hold_their_own_blocks, FORMS)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=4MiB");
    cudaStream_t s1 = stream_n(1), s2 = stream_n(2);
    fake_graph *g1 = fake_capture_begin(s1, cudaStreamCaptureModeGlobal);
    fake_graph *g2 = fake_capture_begin(s2, cudaStreamCaptureModeGlobal);
    void *a = alloc_on(p, MiB, s1);
    void *b = alloc_on(p, MiB, s2);
    free_on(p, a, MiB, s1);
    free_on(p, b, MiB, s2);
    fake_capture_end(s1);
    fake_capture_end(s2);
    no_forbidden_call(form);
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), reserved - 2 * MiB);
    fake_graph_destroy(g1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), reserved - MiB);
    void *c = alloc_on(p, MiB, stream_n(3));
    ck_assert_ptr_ne(c, b);
    free_on(p, c, MiB, stream_n(3));
    fake_graph_destroy(g2);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    crmm_resource_release(p);
}

/* `times` allocations of 4 KiB from p on s, each freed at once. */
static void churn(crmm_resource *p, int times, cudaStream_t s)
{
    for (int i = 0; i < times; i++)
        free_on(p, alloc_on(p, 4 * KiB, s), 4 * KiB, s);
}

/* Whether the pool asks CUDA if a stream is captured: outside a capture, one query per call on a
 * stream (none on the legacy default stream) and no user object. graphs = auto (the default) asks
 * only once the process enabled capture, so a program that never captures pays no query, and a
 * pool made before asks from then on; graphs = on asks whatever the process said; graphs = off
 * never asks, even with capture enabled (the query's cost is gone, and so is the safety under
 * capture). A take of another stream's blocks by an event asks about that stream too. _i: the form (_i % FORMS) and the row (_i / FORMS). */
static const struct asking {
    const char *params;
    bool enabled; /* the process enabled capture */
    bool asks;
} askings[] = {
    {"initial_size=1MiB", true, true},
    {"initial_size=1MiB graphs=off", true, false},
    {"initial_size=1MiB", false, false},
    {"initial_size=1MiB graphs=on", false, true},
};
#define ASKINGS ((int)(sizeof askings / sizeof askings[0]))

CRMM_LOOP_TEST_IN("pool", capture_queries_by_graphs_and_the_process, FORMS * ASKINGS)
{
    const struct asking *row = &askings[_i / FORMS];
    crmm_graph_capture_enable(row->enabled);
    crmm_resource *p = pool_in_form(_i % FORMS, row->params);
    int before = fake_capture_queries();
    churn(p, 100, stream_n(1));
    ck_assert_int_eq(fake_capture_queries() - before, row->asks ? 200 : 0);
    churn(p, 100, NULL);
    /* stream_reuse = event: taking stream 1's blocks by an event asks first whether it is captured */
    ck_assert_int_eq(fake_capture_queries() - before, row->asks ? 200 + (_i % FORMS == CHUNKS_EVENT) : 0);
    ck_assert_int_eq(fake_user_objects_live(), 0);
    if (!row->enabled) { /* the process enables capture: auto asks from now on, as on does */
        crmm_graph_capture_enable(true);
        ck_assert(crmm_graph_capture_enabled());
        before = fake_capture_queries();
        churn(p, 100, stream_n(1));
        ck_assert_int_eq(fake_capture_queries() - before, 200);
    }
    crmm_resource_release(p);
}

static void *allocate_once(void *arg)
{
    crmm_resource *p = arg;
    void *x = NULL;
    if (crmm_resource_allocate(p, 4 * KiB, (crmm_cuda_stream_t)stream_n(5), &x) == CRMM_OK)
        crmm_resource_deallocate(p, x, 4 * KiB, (crmm_cuda_stream_t)stream_n(5));
    return NULL;
}

/* With the per-thread caches on, a block a thread's cache handed out and that is freed inside a
 * capture leaves the cache for the graph: held until the graph is destroyed, not cached. */
CRMM_LOOP_TEST_IN("pool", a_cached_block_freed_in_a_capture_is_the_graphs, FORMS)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=4MiB thread_cache=on");
    cudaStream_t s = stream_n(1);
    free_on(p, alloc_on(p, 64 * KiB, s), 64 * KiB, s);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, allocate_once, p), 0); /* a second thread: caches on */
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    void *x = alloc_on(p, 64 * KiB, s); /* through this thread's cache */
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    free_on(p, x, 64 * KiB, s);
    fake_capture_end(s);
    no_forbidden_call(form);
    void *y = alloc_on(p, 64 * KiB, s);
    ck_assert_ptr_ne(y, x);
    free_on(p, y, 64 * KiB, s);
    uint64_t free_now = q(p, CRMM_QUERY_BYTES_FREE);
    fake_graph_destroy(g);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), free_now + 64 * KiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    crmm_resource_release(p);
}

/* A stream allocating outside any capture while another stream is captured (relaxed mode, as
 * several threads capturing or eager work beside a capture do): with stream_reuse = event, the
 * pool must not take the captured stream's free blocks by recording its event on that stream
 * and making the other wait for it: the record becomes a node of the capture and the wait joins
 * the eager stream to it (its work is captured instead of run, and the capture cannot end
 * unjoined). It grows instead. */
CRMM_TEST_IN("pool", eager_work_beside_a_capture_takes_nothing_of_the_captured_stream)
{
    int form = CHUNKS_EVENT;
    crmm_resource *p = pool_in_form(form, "initial_size=1MiB");
    cudaStream_t s = stream_n(1), other = stream_n(2);
    free_on(p, alloc_on(p, MiB, s), MiB, s); /* the whole pool free on s */
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeRelaxed);
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed; /* this thread may cudaMalloc */
    ck_assert_int_eq(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
    int records = fake_vmm.event_records;
    void *x = alloc_on(p, MiB, other);
    ck_assert_int_eq(fake_vmm.event_records, records);
    no_forbidden_call(form);
    void *y = alloc_on(p, 64 * KiB, s); /* the capture still has its stream's blocks */
    free_on(p, y, 64 * KiB, s);
    fake_capture_end(s);
    no_forbidden_call(form);
    free_on(p, x, MiB, other);
    fake_graph_destroy(g);
    crmm_resource_release(p);
}

/* A capture invalidated half-way (a forbidden call elsewhere; cudaStreamEndCapture then fails and
 * CUDA drops the graph): the blocks it allocated, freed before and after the invalidation, and
 * those allocated on its stream after it, all come back once the graph is dropped; nothing stays
 * owned. Rows: form, graph_pool shared and private. */
CRMM_LOOP_TEST_IN("pool", an_invalidated_capture_leaves_nothing_owned, 2 * FORMS)
{
    int form = _i % FORMS;
    crmm_resource *p = pool_in_form(form, _i < FORMS ? "initial_size=8MiB" : "initial_size=8MiB graph_pool=private");
    cudaStream_t s = stream_n(1);
    free_on(p, alloc_on(p, 8 * MiB, s), 8 * MiB, s);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    uint64_t base = q(p, CRMM_QUERY_BYTES_RESERVED);
    void *pre = alloc_on(p, 64 * KiB, s);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeRelaxed);
    void *a = alloc_on(p, 3 * MiB, s), *b = alloc_on(p, 16 * KiB, s);
    free_on(p, a, 3 * MiB, s);
    free_on(p, pre, 64 * KiB, s);
    fake_capture_invalidate(s);
    void *c = alloc_on(p, 256 * KiB, s); /* the capture is dead: an ordinary allocation */
    free_on(p, b, 16 * KiB, s);
    fake_capture_end(s);
    fake_graph_destroy(g); /* cudaStreamEndCapture failed: CUDA drops the graph */
    free_on(p, c, 256 * KiB, s);
    ck_assert_int_eq(fake_user_objects_live(), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(graph_held(p), 0);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), base);
    crmm_resource_release(p);
}

int main(void)
{
    crmm_graph_capture_enable(true); /* as a program that captures says (no CUDA call: safe before the forks) */
    return CRMM_TEST_MAIN_CASES("graphs", {"pool", 0});
}
