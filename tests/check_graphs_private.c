/* check_graphs_private.c — the pool's graph_pool = private on the CPU, against the scripted CUDA
 * of fake_vmm.h and fake_capture.h, in the pool's three forms: a capture's allocations come from
 * whole pages of its graph's alone (free pages of the pool, else new ones), so they lie the same
 * way in their pages whatever the pool held before; the rest of those pages serves only the same
 * capture, and all of it comes back when the graph is destroyed (docs/cuda-graphs.md). The shared
 * pool's rules under capture: check_graphs.c, which also runs its random and threaded captures
 * with graph_pool = private. */
#include "build_config.h"

#include <crmm/pool.h>
#include "graphs_test.h"

/* The capture's requests: a large temporary, small ones that live on, the large one again. */
enum { STEPS = 6 };
static const size_t step_bytes[STEPS] = {3 * MiB, 4 * KiB, 33920, 3 * MiB, 512 * KiB, 4 * KiB};
static const bool step_frees_prev[STEPS] = {false, false, false, false, true, false}; /* frees step 3's block */

/* Runs the capture's steps on s into `at`; returns the graph. */
static fake_graph *capture_steps(crmm_resource *p, cudaStream_t s, char *at[STEPS])
{
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    at[0] = alloc_on(p, step_bytes[0], s);
    free_on(p, at[0], step_bytes[0], s); /* the first temporary is gone before the next layer */
    for (int i = 1; i < STEPS; i++) {
        if (step_frees_prev[i])
            free_on(p, at[i - 1], step_bytes[i - 1], s);
        at[i] = alloc_on(p, step_bytes[i], s);
    }
    fake_capture_end(s);
    return g;
}

static void free_steps(crmm_resource *p, cudaStream_t s, char *at[STEPS])
{
    for (int i = 1; i < STEPS; i++)
        if (!(i + 1 < STEPS && step_frees_prev[i + 1]))
            free_on(p, at[i], step_bytes[i], s);
}

/* The page of each form: the scripted driver's for the expandable pool, 2 MiB for chunks. */
static size_t page_of(int form) { return form == EXPANDABLE ? PAGE : 2 * MiB; }

static uintptr_t page_down_of(int form, uintptr_t a) { return a & ~(uintptr_t)(page_of(form) - 1); }

/* Whether [a, a + n) and [b, b + m) touch a common page. */
static bool share_a_page(int form, const char *a, size_t n, const char *b, size_t m)
{
    return page_down_of(form, (uintptr_t)a) <= page_down_of(form, (uintptr_t)b + m - 1) &&
           page_down_of(form, (uintptr_t)b) <= page_down_of(form, (uintptr_t)a + n - 1);
}

/* A pool whose free memory could serve every request of the capture: with graph_pool = private
 * the capture takes whole free pages of it (no growth), each kind of request starting a page, and
 * its blocks lie the same way relative to each other whether or not other memory was allocated
 * first; no page of the graph's holds a block of anyone else's, before or after the capture. With
 * the shared pool the capture's first block follows the shifting allocation in its page. */
CRMM_LOOP_TEST_IN("private", a_capture_takes_whole_free_pages_of_its_own, FORMS)
{
    int form = _i;
    size_t offsets[2][STEPS];
    const size_t shift_bytes = 1536 * KiB + 768;
    for (int shifted = 0; shifted < 2; shifted++) {
        crmm_resource *p = pool_in_form(form, "initial_size=32MiB graph_pool=private");
        cudaStream_t s = stream_n(1);
        free_on(p, alloc_on(p, 32 * MiB, s), 32 * MiB, s); /* all of it free on s */
        char *shift = shifted ? alloc_on(p, shift_bytes, s) : NULL; /* moves every later block */
        uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);
        char *at[STEPS];
        fake_graph *g = capture_steps(p, s, at);
        no_forbidden_call(form);
        ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), reserved); /* free pages sufficed */
        ck_assert_uint_eq((uintptr_t)at[0] % page_of(form), 0);
        ck_assert_uint_eq((uintptr_t)at[1] % page_of(form), 0);
        char *after = alloc_on(p, 64 * KiB, s); /* outside the capture */
        for (int i = 0; i < STEPS; i++) {
            /* each block's place relative to the first block of its kind (large: step 0) */
            offsets[shifted][i] = (size_t)(at[i] - at[step_bytes[i] > MiB ? 0 : 1]);
            ck_assert_msg(!shift || !share_a_page(form, at[i], step_bytes[i], shift, shift_bytes),
                          "%s: step %d shares a page with a block allocated before the capture", form_names[form], i);
            ck_assert_msg(!share_a_page(form, at[i], step_bytes[i], after, 64 * KiB),
                          "%s: step %d shares a page with a block allocated after the capture", form_names[form], i);
        }
        free_on(p, after, 64 * KiB, s);
        free_steps(p, s, at);
        fake_graph_destroy(g);
        ck_assert_int_eq(fake_user_objects_live(), 0);
        if (shift)
            free_on(p, shift, shift_bytes, s);
        ck_assert_uint_eq(graph_held(p), 0); /* everything the graph took is back, and free */
        crmm_resource_release(p);
    }
    for (int i = 0; i < STEPS; i++)
        ck_assert_msg(offsets[0][i] == offsets[1][i], "%s: step %d at offset %zu from the first of its kind, %zu after a shift",
                      form_names[form], i, offsets[0][i], offsets[1][i]);
}

/* The rest of the pages taken for a request serves the same capture's later requests of its
 * kind: small requests share one 2 MiB segment, cut one after the other; a large block freed in
 * the capture is the next large request's; a small request never cuts the large block's pages.
 * Row 0 of each form: the pool's free pages serve (nothing grows); row 1: the pool is full, and
 * the graph's pages are new memory (exactly what the requests need). */
CRMM_LOOP_TEST_IN("private", the_graphs_pages_serve_its_own_capture, 2 * FORMS)
{
    int form = _i % FORMS, full = _i / FORMS;
    crmm_resource *p = pool_in_form(form, "initial_size=16MiB graph_pool=private");
    cudaStream_t s = stream_n(1);
    free_on(p, alloc_on(p, 16 * MiB, s), 16 * MiB, s); /* all of it free on s */
    void *filler = full ? alloc_on(p, 16 * MiB, s) : NULL;
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    char *big = alloc_on(p, 3 * MiB, s);
    free_on(p, big, 3 * MiB, s);
    char *a = alloc_on(p, 4 * KiB, s);
    char *b = alloc_on(p, 4 * KiB, s);
    char *c = alloc_on(p, 100 * KiB, s);
    ck_assert_ptr_eq(b, a + 4 * KiB);
    ck_assert_ptr_eq(c, b + 4 * KiB);
    ck_assert_msg(!share_a_page(form, a, 4 * KiB, big, 3 * MiB), "%s: a small request cut the large block's pages",
                  form_names[form]);
    char *big2 = alloc_on(p, 3 * MiB, s);
    ck_assert_ptr_eq(big2, big);
    fake_capture_end(s);
    no_forbidden_call(form);
    /* what the graph took: the large block's pages and one small segment, nothing more */
    size_t large = (3 * MiB + page_of(form) - 1) / page_of(form) * page_of(form);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED) - reserved, full ? large + 2 * MiB : 0);
    ck_assert_uint_eq(graph_held(p) - (full ? 16 * MiB : 0), large + 2 * MiB);
    /* memory the graph holds serves nobody else, not even the same stream outside the capture */
    char *outside = alloc_on(p, 4 * KiB, s);
    ck_assert_msg(!share_a_page(form, outside, 4 * KiB, a, 2 * MiB), "%s: an allocation outside the capture got the graph's segment",
                  form_names[form]);
    free_on(p, outside, 4 * KiB, s);
    free_on(p, a, 4 * KiB, s);
    free_on(p, b, 4 * KiB, s);
    free_on(p, c, 100 * KiB, s);
    free_on(p, big2, 3 * MiB, s);
    ck_assert_uint_eq(graph_held(p) - (full ? 16 * MiB : 0), large + 2 * MiB); /* freed after the capture: the graph's */
    fake_graph_destroy(g);
    if (filler)
        free_on(p, filler, 16 * MiB, s);
    ck_assert_uint_eq(graph_held(p), 0);
    crmm_resource_release(p);
}

/* The pool's free memory holds no whole segment (nor, for the expandable pool, whole pages enough
 * for the request) and the maximum leaves room for the request but not for a new segment: the
 * request alone is taken. No room at all: CRMM_ERROR_OUT_OF_MEMORY naming the capture, without a
 * wait, even though the pool's free blocks could serve it (they share pages with blocks outside
 * the graph), and the capture stays valid. */
CRMM_LOOP_TEST_IN("private", growth_within_the_maximum, FORMS)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=4MiB maximum_size=5MiB graph_pool=private");
    cudaStream_t s = stream_n(1);
    void *held = alloc_on(p, 3 * MiB + 864 * KiB, s); /* 160 KiB stay free: two whole 64 KiB pages */
    int syncs = fake_vmm.device_syncs;
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *x = alloc_on(p, 256 * KiB, s); /* a 2 MiB segment does not fit under the maximum */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 4 * MiB + 256 * KiB);
    void *y = NULL;
    ck_assert_crmm(crmm_resource_allocate(p, MiB, (crmm_cuda_stream_t)s, &y), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_msg(strstr(crmm_last_error(), "captured into a CUDA graph"), "%s", crmm_last_error());
    free_on(p, x, 256 * KiB, s);
    fake_capture_end(s);
    no_forbidden_call(form);
    ck_assert_int_eq(fake_vmm.device_syncs, syncs);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 1);
    fake_graph_destroy(g);
    free_on(p, held, 3 * MiB + 864 * KiB, s);
    ck_assert_uint_eq(graph_held(p), 0);
    crmm_resource_release(p);
}

/* An expandable pool of pages smaller than a segment, at its maximum, whose free memory holds
 * whole free pages for a small request of a private capture but no whole segment: the request
 * takes only the pages its size needs, from those free pages, instead of failing. */
CRMM_TEST_IN("private", a_small_request_at_the_maximum_takes_free_pages_its_size_needs)
{
    int form = EXPANDABLE;
    crmm_resource *p = pool_in_form(form, "initial_size=4MiB maximum_size=4MiB graph_pool=private");
    cudaStream_t s = stream_n(1);
    char *a = alloc_on(p, 1536 * KiB, s), *b = alloc_on(p, 1536 * KiB, s), *c = alloc_on(p, MiB, s);
    free_on(p, b, 1536 * KiB, s); /* 1.5 MiB of whole free pages on s, between a and c */
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *x = NULL;
    crmm_status st = crmm_resource_allocate(p, 256 * KiB, (crmm_cuda_stream_t)s, &x);
    fake_capture_end(s);
    no_forbidden_call(form);
    ck_assert_msg(st == CRMM_OK, "%s", crmm_last_error());
    ck_assert_uint_eq((uintptr_t)x % PAGE, 0);
    free_on(p, x, 256 * KiB, s);
    fake_graph_destroy(g);
    free_on(p, a, 1536 * KiB, s);
    free_on(p, c, MiB, s);
    ck_assert_uint_eq(graph_held(p), 0);
    crmm_resource_release(p);
}

/* A block allocated before the capture and freed inside it is the graph's (its replays use it
 * up to the free), but it shares pages with blocks outside the graph: with graph_pool = private
 * the capture never reuses it, and the graph gives it back when it goes. */
CRMM_LOOP_TEST_IN("private", a_block_from_before_the_capture_is_held_not_reused, FORMS)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=16MiB graph_pool=private");
    cudaStream_t s = stream_n(1);
    void *small = alloc_on(p, 768, s);
    char *pre = alloc_on(p, 3 * MiB, s);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    free_on(p, pre, 3 * MiB, s);
    char *x = alloc_on(p, 3 * MiB, s);
    fake_capture_end(s);
    no_forbidden_call(form);
    ck_assert_msg(x + 3 * MiB <= pre || x >= pre + 3 * MiB, "%s: the capture reused a block from before it", form_names[form]);
    ck_assert_uint_eq((uintptr_t)x % page_of(form), 0);
    /* a second free of it is refused, as of any parked block */
    ck_assert_crmm(crmm_resource_deallocate(p, pre, 3 * MiB, (crmm_cuda_stream_t)s), CRMM_ERROR_INVALID_ARGUMENT);
    free_on(p, x, 3 * MiB, s);
    free_on(p, small, 768, s);
    fake_graph_destroy(g);
    ck_assert_uint_eq(graph_held(p), 0);
    crmm_resource_release(p);
}

/* A block that an earlier graph's capture allocated, still live when that graph was destroyed, is
 * a block from before the next capture like any other: its pages went back to the pool with the
 * rest of the destroyed graph's and may hold other blocks now. With graph_pool = private a later
 * capture that frees it holds it, and never cuts its own blocks from it. */
CRMM_LOOP_TEST_IN("private", a_destroyed_graphs_live_block_is_not_reused_by_the_next_capture, FORMS)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=16MiB graph_pool=private");
    cudaStream_t s = stream_n(1);
    fake_graph *a = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    char *x = alloc_on(p, 3 * MiB, s); /* on pages of a's own; the rest of them parked for a */
    fake_capture_end(s);
    fake_graph_destroy(a);               /* x lives on; the rest of its pages is the pool's again */
    char *y = alloc_on(p, 512 * KiB, s); /* eager work may take those pages */
    fake_graph *b = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    free_on(p, x, 3 * MiB, s);
    char *z = alloc_on(p, MiB + 256 * KiB, s);
    fake_capture_end(s);
    no_forbidden_call(form);
    ck_assert_msg(z + MiB + 256 * KiB <= x || z >= x + 3 * MiB, "%s: the capture cut a block from %p, allocated before it",
                  form_names[form], (void *)x);
    ck_assert_uint_eq((uintptr_t)z % page_of(form), 0);
    free_on(p, z, MiB + 256 * KiB, s);
    free_on(p, y, 512 * KiB, s);
    fake_graph_destroy(b);
    ck_assert_uint_eq(graph_held(p), 0);
    crmm_resource_release(p);
}

/* A destroyed graph's pages are whole free pages the next capture takes (of another graph, right
 * after the first is destroyed: no query or allocation outside a capture between them), instead
 * of growing: a program that captures again after destroying its graph holds no more. */
CRMM_LOOP_TEST_IN("private", the_next_capture_takes_a_destroyed_graphs_pages, FORMS)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=4MiB graph_pool=private");
    cudaStream_t s = stream_n(1);
    uint64_t reserved = 0;
    for (int round = 0; round < 3; round++) {
        fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
        void *x = alloc_on(p, 6 * MiB, s);
        void *y = alloc_on(p, 4 * KiB, s);
        fake_capture_end(s);
        no_forbidden_call(form);
        free_on(p, x, 6 * MiB, s);
        free_on(p, y, 4 * KiB, s);
        if (round > 0)
            ck_assert_msg(q(p, CRMM_QUERY_BYTES_RESERVED) == reserved, "%s: round %d grew the pool from %llu to %llu",
                          form_names[form], round, (unsigned long long)reserved,
                          (unsigned long long)q(p, CRMM_QUERY_BYTES_RESERVED));
        reserved = q(p, CRMM_QUERY_BYTES_RESERVED); /* read before the destroy: a query collects */
        fake_graph_destroy(g);
    }
    crmm_resource_release(p);
}

/* An expandable pool growing into a hole next to a ready block (one a capture allocated and
 * another capture freed on a stream forgotten since, its graphs destroyed since, row 0; a
 * forgotten stream's, row 1) takes that block into the growing stream merged with the stream's
 * own free block beyond it: the rest of the growth and that block are one free block, which a
 * later request fits without growing. */
CRMM_LOOP_TEST_IN("private", growth_next_to_a_ready_block_merges_what_lies_beyond_it, 2)
{
    int form = EXPANDABLE;
    crmm_resource *p = pool_in_form(form, _i == 0 ? "graph_pool=private" : "");
    cudaStream_t s1 = stream_n(1), s2 = stream_n(2);
    char *a = alloc_on(p, MiB, s1), *r;
    fake_graph *g = NULL;
    if (_i == 0) {
        g = fake_capture_begin(s1, cudaStreamCaptureModeGlobal);
        r = alloc_on(p, 2 * MiB, s1);
        fake_capture_end(s1);
    } else {
        r = alloc_on(p, 2 * MiB, s2);
    }
    ck_assert_ptr_eq(r, a + MiB);
    char *f = alloc_on(p, 64 * KiB, s1), *top = alloc_on(p, 64 * KiB, s1);
    free_on(p, a, MiB, s1);
    ck_assert_crmm_ok(crmm_resource_trim(p)); /* a hole below r */
    free_on(p, f, 64 * KiB, s1);               /* s1's free block above r */
    if (_i == 0) {
        fake_graph *g2 = fake_capture_begin(s2, cudaStreamCaptureModeGlobal);
        free_on(p, r, 2 * MiB, s2); /* g's, held in g2 */
        fake_capture_end(s2);
        fake_graph_destroy(g2);
        (void)q(p, CRMM_QUERY_BYTES_FREE); /* collects: r is held for g, freed on s2 */
        ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)s2));
        fake_graph_destroy(g);
        (void)q(p, CRMM_QUERY_BYTES_FREE); /* collects: r is ready (s2 was waited for) */
    } else {
        free_on(p, r, 2 * MiB, s2);
        ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)s2)); /* r is ready */
    }
    char *big = alloc_on(p, 2 * MiB + 32 * KiB, s1); /* the hole's top page and all of r but 32 KiB */
    ck_assert_ptr_eq(big, a + MiB - 64 * KiB);
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);
    char *rest = alloc_on(p, 96 * KiB, s1); /* r's last 32 KiB and f */
    ck_assert_ptr_eq(rest, big + 2 * MiB + 32 * KiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), reserved);
    free_on(p, rest, 96 * KiB, s1);
    free_on(p, big, 2 * MiB + 32 * KiB, s1);
    free_on(p, top, 64 * KiB, s1);
    crmm_resource_release(p);
}

/* trim right after a graph is destroyed gives its memory back too (it collects the graph's
 * blocks first): a second trim finds nothing more. Rows: shared, then private. */
CRMM_LOOP_TEST_IN("private", trim_after_a_graph_is_destroyed_gives_its_memory_back, 2 * FORMS)
{
    int form = _i % FORMS;
    crmm_resource *p = pool_in_form(form, _i < FORMS ? "initial_size=4MiB" : "initial_size=4MiB graph_pool=private");
    cudaStream_t s = stream_n(1);
    free_on(p, alloc_on(p, 4 * MiB, s), 4 * MiB, s);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *x = alloc_on(p, 6 * MiB, s), *y = alloc_on(p, 4 * KiB, s);
    fake_capture_end(s);
    free_on(p, x, 6 * MiB, s);
    free_on(p, y, 4 * KiB, s);
    fake_graph_destroy(g);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    uint64_t once = q(p, CRMM_QUERY_BYTES_RESERVED);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_msg(q(p, CRMM_QUERY_BYTES_RESERVED) == once, "%s: %llu held after destroy and trim, %llu after a second trim",
                  form_names[form], (unsigned long long)once, (unsigned long long)q(p, CRMM_QUERY_BYTES_RESERVED));
    crmm_resource_release(p);
}

struct one_graph_thread {
    crmm_resource *p;
    cudaStream_t s;
    pthread_barrier_t *go;
    void *first;
    int bad;
};

static void *first_allocation(void *arg)
{
    struct one_graph_thread *t = arg;
    pthread_barrier_wait(t->go);
    if (crmm_resource_allocate(t->p, 4 * KiB, (crmm_cuda_stream_t)t->s, &t->first) != CRMM_OK)
        t->bad++;
    return NULL;
}

/* Two threads make the first allocations of one capture (two joined streams) at once: the graph
 * gets one record, so the capture's next small request on a stream is cut from the segment its
 * first one took, never from a new one. */
CRMM_LOOP_TEST_IN("private", two_threads_starting_one_capture_share_its_record, FORMS)
{
    int form = _i;
    for (int round = 0; round < 300; round++) { /* a race: each round is one chance to lose it */
        crmm_resource *p = pool_in_form(form, "initial_size=8MiB graph_pool=private");
        cudaStream_t s1 = stream_n(1), s2 = stream_n(2);
        fake_graph *g = fake_capture_begin(s1, cudaStreamCaptureModeRelaxed);
        fake_capture_join(s2, s1);
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 2);
        struct one_graph_thread t[2] = {{p, s1, &go, NULL, 0}, {p, s2, &go, NULL, 0}};
        pthread_t th[2];
        for (int i = 0; i < 2; i++)
            ck_assert_int_eq(pthread_create(&th[i], NULL, first_allocation, &t[i]), 0);
        for (int i = 0; i < 2; i++)
            ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        pthread_barrier_destroy(&go);
        uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);
        void *again = alloc_on(p, 4 * KiB, s1);
        ck_assert_msg(q(p, CRMM_QUERY_BYTES_RESERVED) == reserved, "%s: round %d: a second segment for one stream",
                      form_names[form], round);
        fake_capture_end(s1);
        fake_capture_end(s2);
        free_on(p, again, 4 * KiB, s1);
        for (int i = 0; i < 2; i++) {
            ck_assert_int_eq(t[i].bad, 0);
            free_on(p, t[i].first, 4 * KiB, t[i].s);
        }
        fake_graph_destroy(g);
        ck_assert_uint_eq(graph_held(p), 0);
        crmm_resource_release(p);
    }
}

/* Bad input under capture with graph_pool = private: a second free of a block the capture freed,
 * and a free with the wrong size, are refused with CRMM_ERROR_INVALID_ARGUMENT; nothing is lost. */
CRMM_LOOP_TEST_IN("private", bad_frees_are_refused, FORMS)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=4MiB graph_pool=private");
    cudaStream_t s = stream_n(1);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *x = alloc_on(p, 64 * KiB, s);
    ck_assert_crmm(crmm_resource_deallocate(p, x, 32 * KiB, (crmm_cuda_stream_t)s), CRMM_ERROR_INVALID_ARGUMENT);
    free_on(p, x, 64 * KiB, s);
    ck_assert_crmm(crmm_resource_deallocate(p, x, 64 * KiB, (crmm_cuda_stream_t)s), CRMM_ERROR_INVALID_ARGUMENT);
    fake_capture_end(s);
    no_forbidden_call(form);
    fake_graph_destroy(g);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(graph_held(p), 0);
    crmm_resource_release(p);
}

/* Many graphs captured and destroyed, as torch.compile's reduce-overhead mode or a server that
 * captures per shape does: each capture on a stream the pool has not seen (a state of its own,
 * made under capture), with small and large requests, some freed inside the capture, some after
 * it, some only after the graph is destroyed, and a block allocated before the capture freed
 * inside it. After every destroy and trim the pool holds what it held before the first capture,
 * and the counts say nothing is live. Rows: form, graph_pool (shared, private), thread caches
 * (off, on), and whether the last blocks are freed before or after the destroy. */
static void *switch_caches_on(void *arg)
{
    crmm_resource *p = arg;
    free_on(p, alloc_on(p, 4 * KiB, stream_n(9)), 4 * KiB, stream_n(9));
    return NULL;
}

CRMM_LOOP_TEST_IN("private", many_captures_and_destroys_return_every_page, FORMS * 8)
{
    int form = _i % FORMS, private_pool = (_i / FORMS) & 1, caches = (_i / FORMS / 2) & 1, late = (_i / FORMS / 4) & 1;
    char params[128];
    snprintf(params, sizeof params, "initial_size=4MiB graph_pool=%s thread_cache=%s", private_pool ? "private" : "shared",
             caches ? "on" : "off");
    crmm_resource *p = pool_in_form(form, params);
    if (caches) {
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, switch_caches_on, p), 0);
        ck_assert_int_eq(pthread_join(t, NULL), 0);
    }
    cudaStream_t eager = stream_n(1);
    free_on(p, alloc_on(p, MiB, eager), MiB, eager);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    uint64_t base = q(p, CRMM_QUERY_BYTES_RESERVED);
    static const size_t sizes[] = {4 * KiB, 100 * KiB, 3 * MiB, 768, 5 * MiB + 512, 64 * KiB};
    enum { N = sizeof sizes / sizeof sizes[0] };
    for (int round = 0; round < 12; round++) {
        cudaStream_t s = stream_n(20 + round);
        void *pre = alloc_on(p, 96 * KiB, s);
        fake_graph *g = fake_capture_begin(s, round % 3 == 0 ? cudaStreamCaptureModeGlobal
                                              : round % 3 == 1 ? cudaStreamCaptureModeThreadLocal
                                                               : cudaStreamCaptureModeRelaxed);
        void *x[N];
        for (int i = 0; i < N; i++) {
            x[i] = alloc_on(p, sizes[i], s);
            if (i % 2)
                free_on(p, x[i - 1], sizes[i - 1], s);
        }
        free_on(p, pre, 96 * KiB, s);
        fake_capture_end(s);
        no_forbidden_call(form);
        void *e = alloc_on(p, 256 * KiB, eager); /* eager work between the capture and its graph's end */
        if (!late)
            for (int i = 1; i < N; i += 2)
                free_on(p, x[i], sizes[i], s);
        fake_graph_destroy(g);
        if (late)
            for (int i = 1; i < N; i += 2)
                free_on(p, x[i], sizes[i], round % 2 ? s : eager);
        free_on(p, e, 256 * KiB, eager);
        ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
        ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
        ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_BLOCK_BYTES), 0);
        ck_assert_uint_eq(graph_held(p), 0);
        ck_assert_crmm_ok(crmm_resource_trim(p));
        ck_assert_msg(q(p, CRMM_QUERY_BYTES_RESERVED) == base, "%s, %s: round %d: %llu held after destroy and trim, %llu before",
                      form_names[form], params, round, (unsigned long long)q(p, CRMM_QUERY_BYTES_RESERVED),
                      (unsigned long long)base);
    }
    ck_assert_int_eq(fake_user_objects_live(), 0);
    crmm_resource_release(p);
}

/* Captures and destroys repeated without a trim, with eager work on another stream between them
 * (replays interleaved with eager steps): what the pool holds levels off. */
CRMM_LOOP_TEST_IN("private", repeated_captures_without_trim_level_off, FORMS * 2)
{
    int form = _i % FORMS;
    crmm_resource *p = pool_in_form(form, _i < FORMS ? "initial_size=4MiB graph_pool=private" : "initial_size=4MiB");
    cudaStream_t eager = stream_n(1);
    uint64_t at[40];
    for (int round = 0; round < 40; round++) {
        cudaStream_t s = stream_n(20 + round % 3);
        fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeThreadLocal);
        void *a = alloc_on(p, 3 * MiB, s), *b = alloc_on(p, 40 * KiB, s);
        free_on(p, a, 3 * MiB, s);
        void *c = alloc_on(p, 5 * MiB, s);
        fake_capture_end(s);
        void *e1 = alloc_on(p, 1536 * KiB, eager), *e2 = alloc_on(p, 100 * KiB, eager);
        free_on(p, e1, 1536 * KiB, eager);
        free_on(p, b, 40 * KiB, s);
        free_on(p, c, 5 * MiB, s);
        fake_graph_destroy(g);
        free_on(p, e2, 100 * KiB, eager);
        at[round] = q(p, CRMM_QUERY_BYTES_RESERVED);
    }
    ck_assert_msg(at[39] == at[19], "%s: %llu held after 20 rounds, %llu after 40", form_names[form],
                  (unsigned long long)at[19], (unsigned long long)at[39]);
    crmm_resource_release(p);
}

/* The parameter itself: check-config refuses a value it does not know, naming the choices. */
CRMM_TEST_IN("private", an_unknown_graph_pool_is_refused)
{
    crmm_resource *p = NULL;
    crmm_resource *cuda = crmm_test_create("cuda", "", NULL);
    ck_assert_crmm(crmm_resource_create("pool", "initial_size=1MiB graph_pool=own", cuda, &p), CRMM_ERROR_CONFIG);
    ck_assert_msg(strstr(crmm_last_error(), "graph_pool") && strstr(crmm_last_error(), "shared|private"), "%s",
                  crmm_last_error());
    ck_assert_ptr_null(p);
    crmm_resource_release(cuda);
}

int main(void)
{
    crmm_graph_capture_enable(true); /* as a program that captures says (no CUDA call: safe before the forks) */
    return CRMM_TEST_MAIN_CASES("graphs_private", {"private", 0});
}
