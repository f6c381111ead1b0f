/* bench_workload.c — builds the operation sequences of bench_workload.h.
 *
 * The generator simulates the workload once, before timing: live blocks are kept in a dense
 * array of slot numbers (so that "a live block chosen uniformly" is one draw and a swap-remove),
 * and free slot numbers on a stack (so that a new block takes a slot in O(1)). What comes out is
 * a flat array of {bytes, slot, is_free}; the timed loop only indexes a pointer table by slot.
 * Draws from xorshift64 are reduced to a range with a modulo (the bias is below 2^-40 for the
 * ranges used). */
#include "build_config.h"
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "bench_workload.h"

const bench_named_set bench_named_sets[BENCH_NAMED_SETS] = {
    {"A", 100000, 1000, 4ull << 20, 1},
    {"B", 100000, 100, 1ull << 10, 1},
    {"C", 100000, 1000, 4ull << 20, 4},
    {"D", 100000, 100, 1ull << 10, 8},
};

uint64_t bench_xorshift64(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return x;
}

/* Uniform in [0, n), n > 0. */
static uint64_t draw_below(uint64_t *state, uint64_t n)
{
    return bench_xorshift64(state) % n;
}

crmm_status bench_workload_check(const bench_workload *w)
{
    if (!w)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "bench: workload is NULL");
    if (w->max_size == 0)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "bench: the maximum size must be at least 1 byte");
    switch (w->mode) {
    case BENCH_MODE_STEPS:
        if (w->steps == 0 || w->steps > BENCH_MAX_STEPS)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "bench: steps must be 1..%llu (got %llu)",
                                  (unsigned long long)BENCH_MAX_STEPS, (unsigned long long)w->steps);
        if (w->max_live == 0 || w->max_live > BENCH_MAX_LIVE)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "bench: live blocks must be 1..%u (got %u)",
                                  BENCH_MAX_LIVE, w->max_live);
        return CRMM_OK;
    case BENCH_MODE_RANDOM:
        if (w->allocations == 0 || w->allocations > BENCH_MAX_LIVE)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "bench: allocations must be 1..%u (got %llu)",
                                  BENCH_MAX_LIVE, (unsigned long long)w->allocations);
        if (w->max_usage == 0)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "bench: the maximum usage must be at least 1 byte");
        return CRMM_OK;
    }
    return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "bench: unknown mode %d", (int)w->mode);
}

/* The simulation state: live slots (dense), free slots (stack), sizes by slot. */
typedef struct sim {
    bench_sequence *seq;
    uint32_t *live;     /* live[0 .. nlive) are slot numbers */
    uint32_t nlive;
    uint32_t *free_slots;
    uint32_t nfree;
    uint64_t *size_of;  /* requested bytes of the block in each slot */
    uint64_t live_bytes;
} sim;

static void sim_alloc(sim *s, uint64_t bytes)
{
    uint32_t slot = s->free_slots[--s->nfree];
    s->live[s->nlive++] = slot;
    s->size_of[slot] = bytes;
    s->live_bytes += bytes;
    bench_sequence *q = s->seq;
    q->ops[q->count++] = (bench_op){.bytes = bytes, .slot = slot, .is_free = 0};
    q->allocs++;
    if (s->live_bytes > q->peak_live_bytes)
        q->peak_live_bytes = s->live_bytes;
    if (s->nlive > q->peak_live_count)
        q->peak_live_count = s->nlive;
}

/* Free the block at index `i` of the live array. */
static void sim_free(sim *s, uint32_t i)
{
    uint32_t slot = s->live[i];
    s->live[i] = s->live[--s->nlive];
    s->free_slots[s->nfree++] = slot;
    s->live_bytes -= s->size_of[slot];
    bench_sequence *q = s->seq;
    q->ops[q->count++] = (bench_op){.bytes = s->size_of[slot], .slot = slot, .is_free = 1};
    q->frees++;
}

static void run_steps(sim *s, const bench_workload *w, uint64_t *rng)
{
    for (uint64_t step = 0; step < w->steps; step++) {
        bool alloc = s->nlive == 0 || (s->nlive < w->max_live && (bench_xorshift64(rng) >> 63));
        if (alloc)
            sim_alloc(s, 1 + draw_below(rng, w->max_size));
        else
            sim_free(s, (uint32_t)draw_below(rng, s->nlive));
    }
}

static void run_random(sim *s, const bench_workload *w, uint64_t *rng)
{
    uint64_t allocated = 0;
    for (uint64_t step = 0; step < 2 * w->allocations; step++) {
        uint64_t bytes = 1 + draw_below(rng, w->max_size);
        bool alloc = true;
        if (s->nlive > 0)
            alloc = draw_below(rng, 100) < BENCH_RANDOM_ALLOC_PERCENT && allocated < w->allocations &&
                    s->live_bytes + bytes < w->max_usage;
        if (alloc) {
            sim_alloc(s, bytes);
            allocated++;
        } else {
            sim_free(s, (uint32_t)draw_below(rng, s->nlive));
        }
    }
}

crmm_status bench_sequence_make(const bench_workload *w, unsigned thread, bench_sequence *out)
{
    if (!out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "bench: sequence is NULL");
    memset(out, 0, sizeof *out);
    crmm_status st = bench_workload_check(w);
    if (st != CRMM_OK)
        return st;
    bool random = w->mode == BENCH_MODE_RANDOM;
    uint64_t steps = random ? 2 * w->allocations : w->steps;
    uint32_t slots = random ? (uint32_t)w->allocations : w->max_live;
    if (!random && w->steps < slots)
        slots = (uint32_t)w->steps; /* never more live blocks than steps */
    sim s = {.seq = out};
    out->ops = malloc((size_t)(steps + slots) * sizeof *out->ops);
    s.live = malloc((size_t)slots * sizeof *s.live);
    s.free_slots = malloc((size_t)slots * sizeof *s.free_slots);
    s.size_of = malloc((size_t)slots * sizeof *s.size_of);
    if (!out->ops || !s.live || !s.free_slots || !s.size_of) {
        st = crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "bench: no memory for a sequence of %llu steps",
                            (unsigned long long)steps);
        goto done;
    }
    for (uint32_t i = 0; i < slots; i++)
        s.free_slots[i] = slots - 1 - i; /* slot 0 on top */
    s.nfree = slots;
    out->slots = slots;
    uint64_t rng = BENCH_SEED + (uint64_t)thread;
    if (random)
        run_random(&s, w, &rng);
    else
        run_steps(&s, w, &rng);
    out->steps = out->count;
    while (s.nlive > 0)
        sim_free(&s, s.nlive - 1);
done:
    free(s.live);
    free(s.free_slots);
    free(s.size_of);
    if (st != CRMM_OK)
        bench_sequence_free(out);
    return st;
}

void bench_sequence_free(bench_sequence *s)
{
    if (!s)
        return;
    free(s->ops);
    memset(s, 0, sizeof *s);
}
