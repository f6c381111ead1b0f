/* check_graphs_model.c — the pool under random captures, checked against a model of which bytes
 * each graph holds (docs/cuda-graphs.md, the ownership rule), on the scripted CUDA of
 * fake_vmm.h and fake_capture.h. Up to three captures run at once, some over two streams; blocks
 * are allocated and freed inside captures and outside them, graphs are destroyed in any order,
 * and some frees are tried twice. After every allocation the model says whether the bytes handed
 * out may go to that caller: never bytes that are live, never bytes a live graph holds to anyone
 * but that graph's capture on the stream that freed them; and every 50 steps the pool's held
 * bytes (reserved - free - live) equal the model's. Rows: the three forms of the pool, with and
 * without per-thread caches, with some frees in a capture made while malloc fails, with
 * capture streams reused from one capture to the next, and with graph_pool = private (where a
 * capture never reuses a block from before it, a destroyed graph's included, and the graphs'
 * pages hold more than the model's bytes, so the held bytes are compared only at the end). A free whose malloc fails either still
 * parks the block (only its reuse is lost) or, when the capture's record cannot be made, fails
 * with CRMM_ERROR_OUT_OF_MEMORY and leaves the block live. */
#include "build_config.h"

#include "graphs_test.h"

enum { GRAPHS = 6, SPANS = 20000, SLOTS = 64, STEPS = 6000 };

/* A run of bytes: live (handed out), or held for graphs (bit g of `holders`); `reuser` (-1: none)
 * is the one graph whose capture may take it back, on stream `on`. */
typedef struct span {
    uintptr_t lo, hi;
    bool live;
    unsigned holders;
    int reuser;
    cudaStream_t on;
} span;

static span spans[SPANS];
static int nspans;

/* Set [lo, hi) to `what` (dropped when it is neither live nor held), cutting what it overlaps. */
static void model_set(uintptr_t lo, uintptr_t hi, span what)
{
    int n = nspans;
    for (int i = 0; i < n; i++) {
        span *x = &spans[i];
        if (x->hi <= lo || x->lo >= hi)
            continue;
        if (x->lo < lo) {
            ck_assert_int_lt(nspans, SPANS);
            spans[nspans] = *x;
            spans[nspans++].hi = lo;
        }
        if (x->hi > hi) {
            ck_assert_int_lt(nspans, SPANS);
            spans[nspans] = *x;
            spans[nspans++].lo = hi;
        }
        x->lo = x->hi = 0;
    }
    int k = 0;
    for (int i = 0; i < nspans; i++)
        if (spans[i].hi > spans[i].lo)
            spans[k++] = spans[i];
    nspans = k;
    if (what.live || what.holders) {
        ck_assert_int_lt(nspans, SPANS);
        what.lo = lo;
        what.hi = hi;
        spans[nspans++] = what;
    }
}

/* Forget the spans that are neither live nor held (a graph went). */
static void model_drop_free(void)
{
    int k = 0;
    for (int i = 0; i < nspans; i++)
        if (spans[i].live || spans[i].holders)
            spans[k++] = spans[i];
    nspans = k;
}

/* [lo, hi) was just handed to graph g's capture on s (g -1: outside any capture). */
static void model_check_allocation(int form, int step, uintptr_t lo, uintptr_t hi, int g, cudaStream_t s)
{
    for (int i = 0; i < nspans; i++) {
        const span *x = &spans[i];
        if (x->hi <= lo || x->lo >= hi)
            continue;
        ck_assert_msg(!x->live, "%s, step %d: [%#lx, %#lx) overlaps a live block", form_names[form], step, lo, hi);
        ck_assert_msg(g >= 0 && x->holders == 1u << g && x->reuser == g && x->on == s,
                      "%s, step %d: [%#lx, %#lx), handed to graph %d on %p, is held for graphs %#x (reusable by %d on %p)",
                      form_names[form], step, lo, hi, g, (void *)s, x->holders, x->reuser, (void *)x->on);
    }
}

/* Bytes live or held for a graph: what the pool cannot hand out (reserved - free). */
static uint64_t model_taken(void)
{
    uint64_t t = 0;
    for (int i = 0; i < nspans; i++)
        t += spans[i].hi - spans[i].lo;
    return t;
}

typedef struct model_graph {
    fake_graph *fake;
    bool alive, capturing;
    int nstreams;
    cudaStream_t streams[2];
} model_graph;

static unsigned seed;

static unsigned rnd(void)
{
    seed = seed * 1103515245u + 12345u;
    return seed >> 8;
}

/* A stream for a new capture: a fresh one, or (reuse) one of eight that no capture holds now. */
static cudaStream_t capture_stream(const model_graph *gs, bool reuse, int *next)
{
    if (!reuse)
        return stream_n((*next)++);
    for (;;) {
        cudaStream_t s = stream_n(10 + (int)(rnd() % 8));
        bool busy = false;
        for (int g = 0; g < GRAPHS; g++)
            for (int k = 0; k < gs[g].nstreams; k++)
                busy |= gs[g].capturing && gs[g].streams[k] == s;
        if (!busy)
            return s;
    }
}

CRMM_LOOP_TEST_IN("pool", random_captures_keep_the_ownership_rule, FORMS * 16)
{
    int form = _i % FORMS, row = _i / FORMS;
    bool caches = row & 1, failing = row & 2, reuse_streams = row & 4, private_pool = row & 8;
    char params[96];
    snprintf(params, sizeof params, "initial_size=8MiB%s%s", caches ? " thread_cache=on" : "",
             private_pool ? " graph_pool=private" : "");
    crmm_resource *p = pool_in_form(form, params);
    seed = 777u + (unsigned)_i * 7919u;
    nspans = 0;
    model_graph gs[GRAPHS] = {{0}};
    struct { char *at; size_t n; int owner; } live[SLOTS] = {{0}};
    int next_stream = 10;
    cudaStream_t plain[2] = {stream_n(1), stream_n(2)};
    for (int step = 0; step < STEPS; step++) {
        unsigned r = rnd() % 100;
        int capturing = 0;
        for (int g = 0; g < GRAPHS; g++)
            capturing += gs[g].capturing;
        if (r < 4) { /* a capture begins, on one stream or two */
            for (int g = 0; g < GRAPHS && capturing < 3; g++)
                if (!gs[g].alive) {
                    gs[g].alive = gs[g].capturing = true;
                    gs[g].streams[0] = capture_stream(gs, reuse_streams, &next_stream);
                    gs[g].fake = fake_capture_begin(gs[g].streams[0], cudaStreamCaptureModeGlobal);
                    gs[g].nstreams = 1;
                    if (rnd() & 1) {
                        gs[g].streams[1] = capture_stream(gs, reuse_streams, &next_stream);
                        fake_capture_join(gs[g].streams[1], gs[g].streams[0]);
                        gs[g].nstreams = 2;
                    }
                    break;
                }
            continue;
        }
        if (r < 7) { /* a capture ends */
            int g = (int)(rnd() % GRAPHS);
            if (gs[g].capturing) {
                for (int k = 0; k < gs[g].nstreams; k++)
                    fake_capture_end(gs[g].streams[k]);
                gs[g].capturing = false;
            }
            continue;
        }
        if (r < 9) { /* a graph that is not capturing is destroyed */
            int g = (int)(rnd() % GRAPHS);
            if (!gs[g].alive || gs[g].capturing)
                continue;
            fake_graph_destroy(gs[g].fake);
            gs[g].alive = false;
            gs[g].nstreams = 0;
            for (int i = 0; i < nspans; i++) {
                spans[i].holders &= ~(1u << g);
                if (spans[i].reuser == g)
                    spans[i].reuser = -1;
            }
            for (int k = 0; k < SLOTS; k++)
                if (live[k].at && live[k].owner == g)
                    live[k].owner = -1;
            model_drop_free();
            continue;
        }
        /* a call on a capture's stream, or on a plain one */
        int g = -1;
        cudaStream_t s = plain[rnd() & 1];
        int pick = (int)(rnd() % (GRAPHS + 2));
        if (pick < GRAPHS && gs[pick].capturing) {
            g = pick;
            s = gs[g].streams[rnd() % gs[g].nstreams];
        }
        int k = (int)(rnd() % SLOTS);
        if (live[k].at) {
            uintptr_t lo = (uintptr_t)live[k].at, hi = lo + ((live[k].n + 255) & ~(size_t)255);
            bool arm = failing && g >= 0 && MALLOC_FAIL_REPLACES && rnd() % 4 == 0;
            if (arm)
                malloc_fail_arm(1);
            crmm_status st = crmm_resource_deallocate(p, live[k].at, live[k].n, (crmm_cuda_stream_t)s);
            if (arm)
                malloc_fail_disarm();
            if (st != CRMM_OK) { /* the capture's record could not be made: nothing changed */
                ck_assert_msg(arm && st == CRMM_ERROR_OUT_OF_MEMORY, "%s", crmm_last_error());
                crmm_clear_error();
                continue;
            }
            int o = live[k].owner;
            span held = {.reuser = -1};
            if (g >= 0 && (o < 0 || o == g)) {
                held.holders = 1u << g;
                held.reuser = private_pool && o < 0 ? -1 : g; /* private: from before the capture, never reused */ /* private: held, never reused */
                held.on = s;
            } else if (g >= 0) {
                held.holders = 1u << g | 1u << o;
            } else if (o >= 0) {
                held.holders = 1u << o;
                held.reuser = o; /* held for o; its capture may take it on s */
                held.on = s;
            }
            model_set(lo, hi, held);
            live[k].at = NULL;
            if (rnd() % 8 == 0) { /* the same free again: refused */
                bool handed_again = false;
                for (int j = 0; j < SLOTS; j++)
                    handed_again |= live[j].at == (char *)lo;
                if (!handed_again)
                    ck_assert_crmm(crmm_resource_deallocate(p, (void *)lo, 1, (crmm_cuda_stream_t)s),
                                   CRMM_ERROR_INVALID_ARGUMENT);
            }
        } else {
            if (g < 0 && capturing)
                continue; /* outside the captures the pool may synchronize: not while one runs */
            unsigned r1 = rnd(), r2 = rnd(), r3 = rnd();
            size_t n = r1 & 1 ? (size_t)(r2 % 3000 + 1) * 256 - r3 % 200 : (size_t)(r2 % 10 + 1) * 512 * KiB;
            void *x = NULL;
            crmm_status st = crmm_resource_allocate(p, n, (crmm_cuda_stream_t)s, &x);
            if (st == CRMM_ERROR_OUT_OF_MEMORY) { /* 64 live blocks of up to 5 MiB can fill the device */
                crmm_clear_error();
                continue;
            }
            ck_assert_crmm_ok(st);
            uintptr_t lo = (uintptr_t)x, hi = lo + ((n + 255) & ~(size_t)255);
            model_check_allocation(form, step, lo, hi, g, s);
            model_set(lo, hi, (span){.live = true, .reuser = -1});
            live[k].at = x;
            live[k].n = n;
            live[k].owner = g;
        }
        if (step % 50 == 0 && !private_pool) /* private: the graphs' pages hold more than their blocks */
            ck_assert_msg(graph_held(p) == model_taken(), "%s, step %d: the pool holds %llu bytes, the model %llu",
                          form_names[form], step, (unsigned long long)graph_held(p), (unsigned long long)model_taken());
    }
    for (int g = 0; g < GRAPHS; g++)
        if (gs[g].capturing)
            for (int k = 0; k < gs[g].nstreams; k++)
                fake_capture_end(gs[g].streams[k]);
    for (int k = 0; k < SLOTS; k++)
        if (live[k].at)
            free_on(p, live[k].at, live[k].n, plain[0]);
    for (int g = 0; g < GRAPHS; g++)
        if (gs[g].alive)
            fake_graph_destroy(gs[g].fake);
    no_forbidden_call(form);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(graph_held(p), 0);
    ck_assert_int_eq(fake_user_objects_live(), 0);
    crmm_resource_release(p);
}

int main(void)
{
    crmm_graph_capture_enable(true); /* as a program that captures says (no CUDA call: safe before the forks) */
    return CRMM_TEST_MAIN_CASES("graphs_model", {"pool", 0});
}
