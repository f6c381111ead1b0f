/* check_stream_order.c — what every stream-ordered allocator promises, run over each one, on the
 * CPU against the scripted CUDA of fakes/fake_stream_cuda.c (stream ids, events, waits and
 * synchronizations counted; a destroyed stream's handle fails the test).
 *
 * Each scenario is a loop test over `chains` (_i): the pool in both stream_reuse modes, the arena
 * and fixed_size, each over the fake device (host memory that says it is device memory, so that
 * streams count). What each allocator does particularly (which call it makes, when) stays in its
 * own suite: check_pool_streams*, check_arena_streams*, check_fixed_size_streams. */
#include "build_config.h"
#include <stdint.h>
#include <string.h>
#include "fakes/fake_stream_cuda.h"
#include "fakes/fake_streams.h"
#include "streams_test.h"
#include "block_pattern.h"

static const struct chain {
    const char *plugin, *params;
    size_t max_size; /* the largest block the scenarios ask for */
} chains[] = {
    {"pool", "initial_size=1MiB stream_reuse=sync", 64 * KiB},
    {"pool", "initial_size=1MiB stream_reuse=event", 64 * KiB},
    {"arena", "arena_size=256MiB", 64 * KiB},
    {"fixed_size", "block_size=1KiB blocks_to_preallocate=128", 1 * KiB},
};
#define NCHAINS (int)(sizeof chains / sizeof chains[0])

/* Chain _i over a fresh fake device that gives at most max_chunks allocations (0: any); the calls
 * its creation made are forgotten. */
static crmm_resource *chain_over(int i, int max_chunks)
{
    crmm_resource *u = fake_device_new(max_chunks), *mr = NULL;
    ck_assert_crmm_ok(crmm_resource_create(chains[i].plugin, chains[i].params, u, &mr));
    crmm_resource_release(u);
    ck_assert(crmm_resource_is_device_accessible(mr));
    fake_cuda_reset();
    return mr;
}

/* Calls that order one stream's work after another's, or after the device's. */
static int ordering_calls(void)
{
    return fake_cuda.device_sync + fake_cuda.stream_sync + fake_cuda.wait + fake_cuda.event_sync;
}

CRMM_LOOP_TEST(reuse_on_the_same_stream_needs_no_ordering, NCHAINS)
{
    crmm_resource *mr = chain_over(_i, 0);
    cudaStream_t s = fake_stream_new(0);
    size_t n = chains[_i].max_size;
    void *first = alloc_on(mr, n, s); /* the block's first use may order it after its creation */
    free_on(mr, first, n, s);
    fake_cuda_reset();
    for (int k = 0; k < 100; k++) {
        void *x = alloc_on(mr, n, s);
        fill_block(x, n);
        free_on(mr, x, n, s);
    }
    ck_assert_msg(ordering_calls() == 0, "%s (%s): %d ordering call(s) on one stream", chains[_i].plugin,
                  chains[_i].params, ordering_calls());
    crmm_resource_release(mr);
}

CRMM_LOOP_TEST(a_block_reaches_another_stream_only_behind_an_ordering_call, NCHAINS)
{
    /* every block of a resource that cannot grow is live on s but one, freed on s: t gets that one,
     * and between its free and its reuse some call orders t behind s */
    enum { MAX_BLOCKS = 8192 };
    static void *blocks[MAX_BLOCKS];
    crmm_resource *mr = chain_over(_i, 1);
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    size_t n = chains[_i].max_size;
    int nb = 0;
    while (nb < MAX_BLOCKS && crmm_resource_allocate(mr, n, (crmm_cuda_stream_t)s, &blocks[nb]) == CRMM_OK)
        nb++;
    ck_assert_int_gt(nb, 1);
    ck_assert_int_lt(nb, MAX_BLOCKS);
    void *x = blocks[--nb];
    int before = ordering_calls(); /* the ordering may come with the free (the arena's) or the reuse */
    free_on(mr, x, n, s);
    void *y = alloc_on(mr, n, t);
    ck_assert_ptr_eq(y, x);
    ck_assert_msg(ordering_calls() > before, "%s (%s): block moved to another stream unordered", chains[_i].plugin,
                  chains[_i].params);
    free_on(mr, y, n, t);
    while (nb > 0)
        free_on(mr, blocks[--nb], n, s);
    crmm_resource_release(mr);
}

CRMM_LOOP_TEST(live_blocks_on_many_streams_never_overlap, NCHAINS)
{
    enum { S = 6, LIVE = 40, STEPS = 4000 };
    crmm_resource *mr = chain_over(_i, 0);
    cudaStream_t st[S];
    for (int k = 0; k < S; k++)
        st[k] = fake_stream_new(k);
    void *live[LIVE] = {0};
    size_t size[LIVE] = {0};
    uint64_t seed = 11;
    for (int step = 0; step < STEPS; step++) {
        uint64_t r = crmm_test_rand(&seed);
        int k = (int)(r % LIVE);
        cudaStream_t on = st[(r >> 8) % S];
        if (live[k]) {
            if (!block_intact(live[k], size[k]))
                ck_abort_msg("%s: step %d: block %p of %zu bytes was overwritten", chains[_i].plugin, step, live[k],
                             size[k]);
            free_on(mr, live[k], size[k], on);
            live[k] = NULL;
        } else {
            size[k] = 1 + (size_t)((r >> 16) % chains[_i].max_size);
            live[k] = alloc_on(mr, size[k], on);
            fill_block(live[k], size[k]);
        }
    }
    for (int k = 0; k < LIVE; k++)
        if (live[k]) {
            ck_assert(block_intact(live[k], size[k]));
            free_on(mr, live[k], size[k], st[k % S]);
        }
    uint64_t count = 0;
    if (crmm_resource_query(mr, CRMM_QUERY_ALLOCATIONS, &count) == CRMM_OK) /* where it counts them */
        ck_assert_uint_eq(count, 0);
    crmm_resource_release(mr);
}

int main(void)
{
    return crmm_test_main("stream_order", 0);
}
