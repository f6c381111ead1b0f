/* check_graphs_private.c — the pool's graph_pool = private on the CPU, against the scripted CUDA
 * of fake_vmm.h and fake_capture.h, in the pool's three forms: a capture's allocations come from
 * whole pages of its graph's alone (free pages of the pool, else new ones), so they lie the same
 * way in their pages whatever the pool held before; the rest of those pages serves only the same
 * capture, and all of it comes back when the graph is destroyed (docs/cuda-graphs.md). The shared
 * pool's rules under capture: check_graphs.c, which also runs its random and threaded captures
 * with graph_pool = private. */
#include "build_config.h"

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
    size_t large = full ? 3 * MiB : (3 * MiB + page_of(form) - 1) / page_of(form) * page_of(form);
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

/* The pool's free memory holds no whole segment and the maximum leaves room for the request but
 * not for a new segment: the request alone is taken. No room at all: CRMM_ERROR_OUT_OF_MEMORY
 * naming the capture, without a wait, even though the pool's free blocks could serve it (they
 * share pages with blocks outside the graph), and the capture stays valid. */
CRMM_LOOP_TEST_IN("private", growth_within_the_maximum, FORMS)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=4MiB maximum_size=5MiB graph_pool=private");
    cudaStream_t s = stream_n(1);
    void *held = alloc_on(p, 3 * MiB + 512 * KiB, s); /* 512 KiB stay free: no whole segment */
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
    free_on(p, held, 3 * MiB + 512 * KiB, s);
    ck_assert_uint_eq(graph_held(p), 0);
    crmm_resource_release(p);
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
