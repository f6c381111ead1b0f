/* check_graphs_private.c — the pool's graph_pool = private on the CPU, against the scripted CUDA
 * of fake_vmm.h and fake_capture.h, in the pool's three forms: a capture's allocations come from
 * memory taken for its graph alone, never from the pool's free blocks, so they land at the same
 * offsets in their pages whatever the pool held before; the rest of that memory serves only the
 * same capture, and all of it comes back when the graph is destroyed (docs/cuda-graphs.md). The
 * shared pool's rules under capture: check_graphs.c, which also runs its random and threaded
 * captures with graph_pool = private. */
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

/* A pool whose free blocks could serve every request of the capture: with graph_pool = private
 * none of them is used, and the blocks lie the same way relative to each other whether or not
 * other memory was allocated first (the placement does not follow the pool's history). With the
 * shared pool, the capture's requests land in memory that was free before it. */
CRMM_LOOP_TEST_IN("private", a_capture_takes_none_of_the_pools_free_blocks, FORMS)
{
    int form = _i;
    size_t offsets[2][STEPS];
    for (int shifted = 0; shifted < 2; shifted++) {
        crmm_resource *p = pool_in_form(form, "initial_size=32MiB graph_pool=private");
        cudaStream_t s = stream_n(1);
        char *all = alloc_on(p, 32 * MiB, s); /* the whole initial memory, to know where it is */
        free_on(p, all, 32 * MiB, s);
        void *shift = shifted ? alloc_on(p, 1536 * KiB + 768, s) : NULL; /* moves every later block */
        uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);
        char *at[STEPS];
        fake_graph *g = capture_steps(p, s, at);
        no_forbidden_call(form);
        for (int i = 0; i < STEPS; i++) {
            ck_assert_msg(at[i] + step_bytes[i] <= all || at[i] >= all + 32 * MiB,
                          "%s: step %d at %p, in the pool's free memory [%p, +32 MiB)", form_names[form], i,
                          (void *)at[i], (void *)all);
            /* each block's place relative to the first block of its kind (large: step 0) */
            offsets[shifted][i] = (size_t)(at[i] - at[step_bytes[i] > MiB ? 0 : 1]);
        }
        if (form == EXPANDABLE) /* and each kind starts a page of its own */
            ck_assert_uint_eq((uintptr_t)at[0] % PAGE + (uintptr_t)at[1] % PAGE, 0);
        ck_assert_uint_gt(q(p, CRMM_QUERY_BYTES_RESERVED), reserved);
        free_steps(p, s, at);
        fake_graph_destroy(g);
        ck_assert_int_eq(fake_user_objects_live(), 0);
        if (shift)
            free_on(p, shift, 1536 * KiB + 768, s);
        ck_assert_uint_eq(graph_held(p), 0); /* everything the graph took is back, and free */
        crmm_resource_release(p);
    }
    for (int i = 0; i < STEPS; i++)
        ck_assert_msg(offsets[0][i] == offsets[1][i], "%s: step %d at offset %zu from the first of its kind, %zu after a shift",
                      form_names[form], i, offsets[0][i], offsets[1][i]);
}

/* The rest of the memory taken for a request serves the same capture's later requests of its
 * kind: small requests share one 2 MiB segment, cut one after the other; a large block freed in
 * the capture is the next large request's; a small request never cuts the large block's memory. */
CRMM_LOOP_TEST_IN("private", the_graphs_memory_serves_its_own_capture, FORMS)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=16MiB graph_pool=private");
    cudaStream_t s = stream_n(1);
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED);
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    char *big = alloc_on(p, 3 * MiB, s);
    free_on(p, big, 3 * MiB, s);
    char *a = alloc_on(p, 4 * KiB, s);
    char *b = alloc_on(p, 4 * KiB, s);
    char *c = alloc_on(p, 100 * KiB, s);
    ck_assert_ptr_eq(b, a + 4 * KiB);
    ck_assert_ptr_eq(c, b + 4 * KiB);
    ck_assert_msg(a + 4 * KiB <= big || a >= big + 3 * MiB, "%s: a small request cut the large block", form_names[form]);
    char *big2 = alloc_on(p, 3 * MiB, s);
    ck_assert_ptr_eq(big2, big);
    fake_capture_end(s);
    no_forbidden_call(form);
    /* what the graph took: the large block and one small segment, nothing more */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED) - reserved, 3 * MiB + 2 * MiB);
    ck_assert_uint_eq(graph_held(p), 3 * MiB + 2 * MiB);
    /* memory the graph holds serves nobody else, not even the same stream outside the capture */
    char *outside = alloc_on(p, 4 * KiB, s);
    ck_assert_msg(outside + 4 * KiB <= a || outside >= a + 2 * MiB, "%s: an allocation outside the capture got the graph's segment",
                  form_names[form]);
    free_on(p, outside, 4 * KiB, s);
    free_on(p, a, 4 * KiB, s);
    free_on(p, b, 4 * KiB, s);
    free_on(p, c, 100 * KiB, s);
    free_on(p, big2, 3 * MiB, s);
    ck_assert_uint_eq(graph_held(p), 3 * MiB + 2 * MiB); /* freed after the capture: still the graph's */
    fake_graph_destroy(g);
    ck_assert_uint_eq(graph_held(p), 0);
    crmm_resource_release(p);
}

/* The maximum leaves room for the request but not for a small segment: the request alone is
 * taken. No room at all: CRMM_ERROR_OUT_OF_MEMORY naming the capture, without a wait, even though
 * the pool's free blocks could serve it (they are not the graph's), and the capture stays valid. */
CRMM_LOOP_TEST_IN("private", growth_within_the_maximum, FORMS)
{
    int form = _i;
    crmm_resource *p = pool_in_form(form, "initial_size=4MiB maximum_size=5MiB graph_pool=private");
    cudaStream_t s = stream_n(1);
    int syncs = fake_vmm.device_syncs;
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *x = alloc_on(p, 512 * KiB, s); /* a 2 MiB segment does not fit under the maximum */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 4 * MiB + 512 * KiB);
    void *y = NULL;
    ck_assert_crmm(crmm_resource_allocate(p, MiB, (crmm_cuda_stream_t)s, &y), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_msg(strstr(crmm_last_error(), "captured into a CUDA graph"), "%s", crmm_last_error());
    free_on(p, x, 512 * KiB, s);
    fake_capture_end(s);
    no_forbidden_call(form);
    ck_assert_int_eq(fake_vmm.device_syncs, syncs);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    fake_graph_destroy(g);
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
