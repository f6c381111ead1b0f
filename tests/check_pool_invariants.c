/* check_pool_invariants.c — the pool's own bookkeeping after every step of random work, against
 * the scripted CUDA of fake_vmm.h and fake_capture.h, in the pool's three forms: allocations and
 * frees on three streams, captures over two joined streams, graphs destroyed while their blocks
 * are live, frees after a destroy on other streams, trims and queries, with graph_pool shared and
 * private, a maximum, a release threshold and page_moves = budget. After each step, read from the
 * pool's structures (pool_resource.h):
 *  - two neighbouring free blocks never belong to the same state (they would have merged), nor two
 *    neighbouring parked blocks to the same graph, stream and area;
 *  - the bytes the pool counts as held are the bytes of the blocks out of every free list, and
 *    what it counts as reserved the bytes of its mapped blocks (so BYTES_FREE is right);
 *  - every page under a mapped block of an expandable pool is mapped;
 *  - each graph record counts exactly the blocks it owns or holds parked.
 * Once everything is freed and every graph destroyed, nothing is held and no record is left. */
#include "build_config.h"

#include "graphs_test.h"
#include "pool_books_test.h"

/* The first invariant broken (into msg), or NULL. The per-thread caches must be off. */
static const char *broken_invariant(crmm_resource *r, char *msg, size_t len)
{
    pool_resource *p = (pool_resource *)r;
    const char *e = pool_books_broken_blocks(p, msg, len);
    if (e)
        return e;
    uint64_t held = 0;
    for (const pool_chunk *c = p->growth.chunks; c; c = c->next)
        for (const pool_block *b = c->first; b; b = b->phys_next)
            if (!b->owner)
                held += b->size;
    if ((uint64_t)p->core.counts.block_bytes != held) {
        snprintf(msg, len, "held counted %lld, blocks out of the free lists %llu", (long long)p->core.counts.block_bytes,
                 (unsigned long long)held);
        return msg;
    }
    for (const pool_graph *g = p->graphs; g; g = g->next) {
        uint64_t owned = 0;
        for (const pool_chunk *c = p->growth.chunks; c; c = c->next)
            for (const pool_block *b = c->first; b; b = b->phys_next) {
                if (b->owner)
                    continue;
                if (b->graph & POOL_PARKED) {
                    for (const pool_graph_stream *gs = g->streams; gs; gs = gs->next)
                        owned += (b->graph & ~(uintptr_t)(POOL_PARKED | POOL_PARKED_SMALL)) == (uintptr_t)gs;
                } else {
                    owned += b->graph == (uintptr_t)g;
                }
            }
        if (owned != g->owned) {
            snprintf(msg, len, "a graph record counts %llu blocks, %llu found", (unsigned long long)g->owned,
                     (unsigned long long)owned);
            return msg;
        }
    }
    return NULL;
}

#define ASSERT_INVARIANTS(p, form, step) \
    do { \
        char m_[256]; \
        const char *e_ = broken_invariant((p), m_, sizeof m_); \
        ck_assert_msg(!e_, "%s, %s, step %d: %s", form_names[form], params[_i / FORMS % PARAMS], (step), e_); \
    } while (0)

static const char *const params[] = {
    "initial_size=8MiB thread_cache=off",
    "initial_size=8MiB thread_cache=off graph_pool=private",
    "initial_size=8MiB thread_cache=off graph_pool=private maximum_size=24MiB",
    "initial_size=8MiB thread_cache=off graph_pool=private release_threshold=1MiB",
    "initial_size=8MiB thread_cache=off page_moves=budget",
};
#define PARAMS ((int)(sizeof params / sizeof params[0]))
#define SEEDS 2

CRMM_LOOP_TEST_IN("invariants", random_work_keeps_the_pools_bookkeeping, FORMS * PARAMS * SEEDS)
{
    int form = _i % FORMS;
    crmm_resource *p = pool_in_form(form, params[_i / FORMS % PARAMS]);
    cudaStream_t st[3] = {stream_n(1), stream_n(2), stream_n(3)};
    enum { SLOTS = 40, STEPS = 3000, GRAPHS = 3 };
    struct { char *at; size_t n; cudaStream_t s; } live[SLOTS] = {{0}};
    fake_graph *graphs[GRAPHS] = {0};
    int capturing = -1;
    unsigned seed = 777u + 31u * (unsigned)_i;
    for (int step = 0; step < STEPS; step++) {
        seed = seed * 1103515245u + 12345u;
        unsigned r = (seed >> 8) % 100;
        if (r < 3) { /* begin a capture over st[0] and st[1], or end the one under way */
            if (capturing < 0) {
                for (int g = 0; g < GRAPHS; g++)
                    if (!graphs[g]) {
                        graphs[g] = fake_capture_begin(st[0], cudaStreamCaptureModeGlobal);
                        fake_capture_join(st[1], st[0]);
                        capturing = g;
                        break;
                    }
            } else {
                fake_capture_end(st[0]);
                fake_capture_end(st[1]);
                capturing = -1;
            }
        } else if (r < 5) { /* destroy a graph that is not being captured */
            for (int g = 0; g < GRAPHS; g++)
                if (graphs[g] && g != capturing) {
                    fake_graph_destroy(graphs[g]);
                    graphs[g] = NULL;
                    break;
                }
        } else if (r < 6 && capturing < 0) {
            ck_assert_crmm_ok(crmm_resource_trim(p));
        } else if (r < 8) {
            (void)q(p, CRMM_QUERY_BYTES_FREE);
        } else {
            int k = (int)((seed >> 12) % SLOTS);
            cudaStream_t s = st[(seed >> 20) % 3];
            if (capturing >= 0 && s == st[2]) /* st[2] is not in the capture: it would have to wait */
                s = st[(seed >> 22) & 1];
            if (live[k].at) {
                free_on(p, live[k].at, live[k].n, s);
                live[k].at = NULL;
            } else {
                size_t n = (seed >> 23) & 1 ? (size_t)((seed >> 13) % 2000 + 1) * 256 : (size_t)((seed >> 13) % 8 + 1) * 512 * KiB;
                void *x = NULL;
                crmm_status rc = crmm_resource_allocate(p, n, (crmm_cuda_stream_t)s, &x);
                if (rc == CRMM_OK) {
                    live[k].at = x, live[k].n = n, live[k].s = s;
                    memset(x, k, n < 4096 ? n : 4096);
                } else {
                    ck_assert_msg(rc == CRMM_ERROR_OUT_OF_MEMORY, "%s", crmm_last_error());
                    crmm_clear_error();
                }
            }
        }
        ASSERT_INVARIANTS(p, form, step);
    }
    if (capturing >= 0) {
        fake_capture_end(st[0]);
        fake_capture_end(st[1]);
    }
    for (int k = 0; k < SLOTS; k++)
        if (live[k].at)
            free_on(p, live[k].at, live[k].n, live[k].s);
    for (int g = 0; g < GRAPHS; g++)
        if (graphs[g])
            fake_graph_destroy(graphs[g]);
    ck_assert_uint_eq(graph_held(p), 0);
    ASSERT_INVARIANTS(p, form, STEPS);
    ck_assert_ptr_null(((pool_resource *)p)->graphs);
    no_forbidden_call(form);
    crmm_resource_release(p);
}

int main(void)
{
    crmm_graph_capture_enable(true); /* as a program that captures says (no CUDA call: safe before the forks) */
    return CRMM_TEST_MAIN_CASES("pool_invariants", {"invariants", 0});
}
