/* check_bench_workload.c — `crmm bench` without a GPU: the workload generator and the runner over
 * host memory.
 *
 * A small in-test resource ("limited": malloc with a cap on live blocks, optionally answering
 * the reserved-peak query) drives the runner's out-of-memory path and its reserved/live column. */
#include "build_config.h"
#include "bench_cli_output.h"

/* Replays a sequence and checks it is a valid alloc/free history: frees only live slots, with
 * the bytes they were allocated with; everything freed at the end; live and sizes within
 * bounds. Returns the peak live bytes it saw. */
static uint64_t replay_checked(const bench_sequence *q, uint32_t max_live, uint64_t max_size)
{
    uint64_t *size_of = calloc(q->slots, sizeof *size_of);
    ck_assert_ptr_nonnull(size_of);
    uint64_t live_bytes = 0, peak = 0;
    uint32_t live = 0;
    size_t allocs = 0, frees = 0;
    for (size_t i = 0; i < q->count; i++) {
        const bench_op *op = &q->ops[i];
        ck_assert_uint_lt(op->slot, q->slots);
        if (op->is_free) {
            ck_assert_msg(size_of[op->slot] != 0, "op %zu frees slot %u, which is not live", i, op->slot);
            ck_assert_uint_eq(op->bytes, size_of[op->slot]);
            live_bytes -= op->bytes;
            size_of[op->slot] = 0;
            live--;
            frees++;
        } else {
            ck_assert_msg(i < q->steps, "op %zu allocates after the steps", i);
            ck_assert_msg(size_of[op->slot] == 0, "op %zu allocates into live slot %u", i, op->slot);
            ck_assert_uint_ge(op->bytes, 1);
            ck_assert_uint_le(op->bytes, max_size);
            size_of[op->slot] = op->bytes;
            live_bytes += op->bytes;
            live++;
            allocs++;
            ck_assert_uint_le(live, max_live);
            if (live_bytes > peak)
                peak = live_bytes;
        }
    }
    ck_assert_uint_eq(live, 0);
    ck_assert_uint_eq(live_bytes, 0);
    ck_assert_uint_eq(allocs, q->allocs);
    ck_assert_uint_eq(frees, q->frees);
    free(size_of);
    return peak;
}

/* ---- the workload generator ------------------------------------------------------------------ */

CRMM_TEST_IN("workload", xorshift_known_values)
{
    uint64_t s = BENCH_SEED;
    ck_assert_uint_eq(bench_xorshift64(&s), 45454805674ull);
    ck_assert_uint_eq(bench_xorshift64(&s), 11532217803599905471ull);
    ck_assert_uint_eq(bench_xorshift64(&s), 10021416941527320954ull);
}

CRMM_TEST_IN("workload", sequence_is_deterministic_per_thread)
{
    bench_workload w = steps_workload(20000, 100, 1024);
    bench_sequence a, b, c;
    ck_assert_crmm_ok(bench_sequence_make(&w, 0, &a));
    ck_assert_crmm_ok(bench_sequence_make(&w, 0, &b));
    ck_assert_crmm_ok(bench_sequence_make(&w, 1, &c));
    ck_assert_uint_eq(a.count, b.count);
    ck_assert_int_eq(memcmp(a.ops, b.ops, a.count * sizeof *a.ops), 0);
    ck_assert_uint_eq(a.peak_live_bytes, b.peak_live_bytes);
    size_t n = a.count < c.count ? a.count : c.count, same = 0;
    for (size_t i = 0; i < n; i++)
        same += a.ops[i].bytes == c.ops[i].bytes && a.ops[i].is_free == c.ops[i].is_free;
    ck_assert_msg(same < n / 2, "thread 1's sequence matches thread 0's in %zu of %zu ops", same, n);
    bench_sequence_free(&a);
    bench_sequence_free(&b);
    bench_sequence_free(&c);
}

CRMM_TEST_IN("workload", sequence_tiny_hand_checked)
{
    /* seed 42, 8 steps, <= 2 live, sizes 1..100: worked out from the rules by hand (and the
     * xorshift values above): */
    static const bench_op expected[] = {
        {75, 0, 0}, {55, 1, 0}, {75, 0, 1}, {55, 1, 1}, {76, 1, 0}, {37, 0, 0}, {37, 0, 1}, {76, 1, 1},
    };
    bench_workload w = steps_workload(8, 2, 100);
    bench_sequence q;
    ck_assert_crmm_ok(bench_sequence_make(&w, 0, &q));
    ck_assert_uint_eq(q.count, 8);
    ck_assert_uint_eq(q.steps, 8);
    for (size_t i = 0; i < 8; i++) {
        ck_assert_uint_eq(q.ops[i].bytes, expected[i].bytes);
        ck_assert_uint_eq(q.ops[i].slot, expected[i].slot);
        ck_assert_uint_eq(q.ops[i].is_free, expected[i].is_free);
    }
    ck_assert_uint_eq(q.peak_live_bytes, 75 + 55);
    ck_assert_uint_eq(q.peak_live_count, 2);
    ck_assert_uint_eq(q.allocs, 4);
    ck_assert_uint_eq(q.frees, 4);
    bench_sequence_free(&q);
}

CRMM_TEST_IN("workload", sequence_frees_everything_within_bounds)
{
    static const struct { uint64_t steps; uint32_t live; uint64_t max; } cases[] = {
        {100000, 1000, 4u << 20}, {100000, 100, 1024}, {1, 5, 7}, {3, 1, 1}, {5000, 1, 3}, {777, 10000, 9},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        bench_workload w = steps_workload(cases[k].steps, cases[k].live, cases[k].max);
        for (unsigned t = 0; t < 3; t++) {
            bench_sequence q;
            ck_assert_crmm_ok(bench_sequence_make(&w, t, &q));
            ck_assert_uint_eq(q.steps, cases[k].steps);
            ck_assert_uint_eq(q.allocs, q.frees);
            ck_assert_uint_eq(q.count, q.allocs + q.frees);
            ck_assert_uint_le(q.slots, cases[k].live);
            ck_assert_uint_le(q.peak_live_count, cases[k].live);
            uint64_t peak = replay_checked(&q, cases[k].live, cases[k].max);
            ck_assert_uint_eq(peak, q.peak_live_bytes);
            for (size_t i = q.steps; i < q.count; i++)
                ck_assert_msg(q.ops[i].is_free, "final op %zu is not a free", i);
            bench_sequence_free(&q);
        }
    }
}

CRMM_TEST_IN("workload", sequence_coin_is_fair)
{
    /* Where the coin decides (0 < live < max live) about half the steps allocate; with nothing
     * live a step always allocates, with max live it always frees. */
    bench_workload w = steps_workload(100000, 1000, 4u << 20);
    bench_sequence q;
    ck_assert_crmm_ok(bench_sequence_make(&w, 0, &q));
    uint32_t live = 0;
    size_t coin_steps = 0, coin_allocs = 0, step_allocs = 0;
    for (size_t i = 0; i < q.steps; i++) {
        bool alloc = !q.ops[i].is_free;
        if (live == 0)
            ck_assert_msg(alloc, "step %zu frees with nothing live", i);
        else if (live == w.max_live)
            ck_assert_msg(!alloc, "step %zu allocates at the live limit", i);
        else {
            coin_steps++;
            coin_allocs += alloc;
        }
        step_allocs += alloc;
        live = alloc ? live + 1 : live - 1;
    }
    double share = (double)coin_allocs / (double)coin_steps;
    ck_assert_msg(share > 0.49 && share < 0.51, "the coin allocated in %.4f of its steps", share);
    /* allocations and frees balance over the steps: they differ by what is live at the end */
    ck_assert_uint_eq(step_allocs - (q.steps - step_allocs), live);
    ck_assert_uint_eq(q.allocs, q.frees);
    bench_sequence_free(&q);
}

CRMM_TEST_IN("workload", sequence_sizes_are_uniform)
{
    bench_workload w = steps_workload(100000, 100, 1024);
    bench_sequence q;
    ck_assert_crmm_ok(bench_sequence_make(&w, 0, &q));
    double sum = 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < q.count; i++)
        if (!q.ops[i].is_free) {
            sum += (double)q.ops[i].bytes;
            lo = q.ops[i].bytes < lo ? q.ops[i].bytes : lo;
            hi = q.ops[i].bytes > hi ? q.ops[i].bytes : hi;
        }
    double mean = sum / (double)q.allocs;
    ck_assert_msg(mean > 500 && mean < 525, "mean size %.1f (uniform 1..1024 gives 512.5)", mean);
    ck_assert_uint_le(lo, 3);
    ck_assert_uint_ge(hi, 1022);
    bench_sequence_free(&q);
}

CRMM_TEST_IN("workload", sequence_random_mode_follows_rmm)
{
    bench_workload w = {.mode = BENCH_MODE_RANDOM, .allocations = 5000, .max_usage = BENCH_RANDOM_MAX_USAGE,
                        .max_size = 1u << 20};
    bench_sequence q;
    ck_assert_crmm_ok(bench_sequence_make(&w, 0, &q));
    ck_assert_uint_eq(q.steps, 2 * w.allocations);
    ck_assert_uint_le(q.allocs, w.allocations);
    replay_checked(&q, (uint32_t)w.allocations, w.max_size);
    /* where the 73% draw decides (something live, allocations left), about 73% allocate */
    uint32_t live = 0;
    size_t allocated = 0, decided = 0, decided_allocs = 0;
    for (size_t i = 0; i < q.steps; i++) {
        bool alloc = !q.ops[i].is_free;
        if (live > 0 && allocated < w.allocations) {
            decided++;
            decided_allocs += alloc;
        }
        if (allocated == w.allocations)
            ck_assert_msg(!alloc, "step %zu allocates after %zu allocations", i, allocated);
        allocated += alloc;
        live = alloc ? live + 1 : live - 1;
    }
    double share = (double)decided_allocs / (double)decided;
    ck_assert_msg(share > 0.71 && share < 0.75, "%.4f of the deciding steps allocated (73%% expected)", share);
    bench_sequence_free(&q);

    /* the usage cap: with a cap of 3 max-size blocks, live bytes never reach it once something is live */
    w.allocations = 2000;
    w.max_usage = 3ull << 20;
    ck_assert_crmm_ok(bench_sequence_make(&w, 2, &q));
    ck_assert_uint_le(q.peak_live_bytes, w.max_usage + w.max_size);
    uint64_t bytes = 0;
    for (size_t i = 0; i < q.steps; i++) {
        if (!q.ops[i].is_free && bytes > 0)
            ck_assert_uint_lt(bytes + q.ops[i].bytes, w.max_usage);
        bytes = q.ops[i].is_free ? bytes - q.ops[i].bytes : bytes + q.ops[i].bytes;
    }
    bench_sequence_free(&q);
}

CRMM_TEST_IN("workload", sequence_rejects_bad_workloads)
{
    bench_sequence q;
    bench_workload w = steps_workload(0, 10, 10);
    ck_assert_crmm(bench_sequence_make(&w, 0, &q), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(q.ops);
    w = steps_workload(10, 0, 10);
    ck_assert_crmm(bench_sequence_make(&w, 0, &q), CRMM_ERROR_INVALID_ARGUMENT);
    w = steps_workload(10, 10, 0);
    ck_assert_crmm(bench_sequence_make(&w, 0, &q), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "size"));
    w = steps_workload(BENCH_MAX_STEPS + 1, 10, 10);
    ck_assert_crmm(bench_sequence_make(&w, 0, &q), CRMM_ERROR_INVALID_ARGUMENT);
    w = (bench_workload){.mode = BENCH_MODE_RANDOM, .allocations = 0, .max_usage = 1, .max_size = 1};
    ck_assert_crmm(bench_sequence_make(&w, 0, &q), CRMM_ERROR_INVALID_ARGUMENT);
    w = (bench_workload){.mode = (bench_mode)7, .steps = 1, .max_live = 1, .max_size = 1};
    ck_assert_crmm(bench_sequence_make(&w, 0, &q), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(bench_sequence_make(NULL, 0, &q), CRMM_ERROR_INVALID_ARGUMENT);
    bench_sequence_free(NULL);
}

/* ---- the runner --------------------------------------------------------------------------- */

/* "limited": malloc'd blocks, at most `limit` live at once (then OUT_OF_MEMORY), counted. */
typedef struct limited {
    crmm_resource base;
    long limit;
    long live, total;
    bool answers_reserved;
} limited;

static crmm_status limited_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t s, void **ptr)
{
    (void)s;
    limited *l = (limited *)self;
    if (__atomic_add_fetch(&l->live, 1, __ATOMIC_RELAXED) > l->limit) {
        __atomic_sub_fetch(&l->live, 1, __ATOMIC_RELAXED);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "limited: failed to allocate %zu bytes (limit %ld blocks)",
                              bytes, l->limit);
    }
    __atomic_add_fetch(&l->total, 1, __ATOMIC_RELAXED);
    *ptr = malloc(bytes);
    return CRMM_OK;
}

static crmm_status limited_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t s)
{
    (void)bytes;
    (void)s;
    limited *l = (limited *)self;
    __atomic_sub_fetch(&l->live, 1, __ATOMIC_RELAXED);
    free(ptr);
    return CRMM_OK;
}

static crmm_status limited_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    limited *l = (limited *)self;
    if (what != CRMM_QUERY_BYTES_RESERVED_PEAK || !l->answers_reserved)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "limited: no query %d", (int)what);
    *out = 123456789;
    return CRMM_OK;
}

static void limited_destroy(crmm_resource *self)
{
    (void)self; /* lives on the test's stack */
}

static const crmm_resource_ops limited_ops = {
    .allocate = limited_allocate, .deallocate = limited_deallocate, .query = limited_query, .destroy = limited_destroy,
};

static void limited_init(limited *l, long limit, bool answers_reserved)
{
    memset(l, 0, sizeof *l);
    crmm_resource_init(&l->base, &limited_ops, "limited", CRMM_RESOURCE_HOST_ACCESSIBLE, -1, NULL);
    l->limit = limit;
    l->answers_reserved = answers_reserved;
}

static void make_sequences(const bench_workload *w, unsigned threads, bench_sequence *seqs)
{
    for (unsigned t = 0; t < threads; t++)
        ck_assert_crmm_ok(bench_sequence_make(w, t, &seqs[t]));
}

/* The sequence of thread 0 of steps_workload(steps, live, max_size). */
static bench_sequence one_sequence(uint64_t steps, uint32_t live, uint64_t max_size)
{
    bench_workload w = steps_workload(steps, live, max_size);
    bench_sequence q;
    make_sequences(&w, 1, &q);
    return q;
}

static void free_sequences(bench_sequence *seqs, unsigned threads)
{
    for (unsigned t = 0; t < threads; t++)
        bench_sequence_free(&seqs[t]);
}

static void check_sane_result(const bench_result *r, unsigned repeats)
{
    ck_assert_msg(r->outcome == BENCH_OUTCOME_OK, "outcome %d: %s", (int)r->outcome, r->error);
    ck_assert_str_eq(r->error, "");
    ck_assert_uint_eq(r->runs, repeats);
    ck_assert(r->ns_per_op_min > 0);
    ck_assert(r->ns_per_op_min <= r->ns_per_op_median);
    ck_assert(r->ns_per_op_median <= r->ns_per_op_max);
    ck_assert_msg(r->ns_per_op_median < 1e7, "%.1f ns per host allocation is not sane", r->ns_per_op_median);
    double expect = r->threads * 1e9 / r->ns_per_op_median;
    ck_assert(r->ops_per_second > expect * 0.999 && r->ops_per_second < expect * 1.001);
}

/* The runner over host memory with one thread and with four: every op counted, the peak live
 * bytes the sequences' sum, every block freed, each sequence run 1 + repeats times (the warm-up). */
static const struct { unsigned threads, repeats; uint64_t steps; uint32_t live; uint64_t max_size; } host_runs[] = {
    {1, 3, 5000, 100, 1024},
    {4, 2, 3000, 50, 4096},
};

CRMM_LOOP_TEST_IN("runner", runner_over_host, 2)
{
    unsigned threads = host_runs[_i].threads, repeats = host_runs[_i].repeats;
    crmm_resource *mr;
    ck_assert_crmm_ok(crmm_resource_create("host", "", NULL, &mr));
    bench_workload w = steps_workload(host_runs[_i].steps, host_runs[_i].live, host_runs[_i].max_size);
    bench_sequence q[4];
    make_sequences(&w, threads, q);
    bench_run_options opt = {.repeats = repeats, .device = -1};
    bench_result r;
    ck_assert_crmm_ok(bench_run(mr, q, threads, &opt, &r));
    check_sane_result(&r, repeats);
    ck_assert_uint_eq(r.threads, threads);
    uint64_t ops = 0, peak = 0, allocs = 0;
    for (unsigned t = 0; t < threads; t++) {
        ops += q[t].count;
        peak += q[t].peak_live_bytes;
        allocs += q[t].allocs;
    }
    ck_assert_uint_eq(r.total_ops, ops);
    ck_assert_uint_eq(r.peak_live_bytes, peak);
    ck_assert(!r.has_peak_reserved); /* host answers no reserved-bytes query */
    uint64_t v;
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_BYTES_IN_USE, &v));
    ck_assert_uint_eq(v, 0);
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_ALLOCATIONS_TOTAL, &v));
    ck_assert_uint_eq(v, (repeats + 1) * allocs);
    free_sequences(q, threads);
    crmm_resource_release(mr);
}

static void count_progress(void *arg, unsigned run, unsigned repeats)
{
    unsigned *calls = arg;
    ck_assert_uint_eq(run, *calls);
    ck_assert_uint_eq(repeats, 4);
    (*calls)++;
}

CRMM_TEST_IN("runner", runner_reports_progress_and_reserved_peak)
{
    limited l;
    limited_init(&l, 1000000, true);
    bench_sequence q = one_sequence(500, 10, 64);
    unsigned calls = 0;
    bench_run_options opt = {.repeats = 4, .device = -1, .progress = count_progress, .progress_arg = &calls};
    bench_result r;
    ck_assert_crmm_ok(bench_run(&l.base, &q, 1, &opt, &r));
    check_sane_result(&r, 4);
    ck_assert_uint_eq(calls, 5); /* warm-up + 4 */
    ck_assert(r.has_peak_reserved);
    ck_assert_uint_eq(r.peak_reserved_bytes, 123456789);
    ck_assert_int_eq(l.live, 0);
    bench_sequence_free(&q);
}

CRMM_TEST_IN("runner", runner_out_of_memory_frees_and_reports)
{
    for (unsigned threads = 1; threads <= 4; threads += 3) {
        limited l;
        limited_init(&l, 25, false);
        bench_workload w = steps_workload(4000, 100, 256);
        bench_sequence q[4];
        make_sequences(&w, threads, q);
        bench_run_options opt = {.repeats = 3, .device = -1};
        bench_result r;
        ck_assert_crmm_ok(bench_run(&l.base, q, threads, &opt, &r));
        ck_assert_int_eq(r.outcome, BENCH_OUTCOME_OOM);
        ck_assert_msg(strstr(r.error, "limited: failed to allocate"), "error: %s", r.error);
        ck_assert_uint_eq(r.runs, 0); /* it failed in the warm-up */
        ck_assert_int_eq(l.live, 0);  /* every block the bench held was freed */
        free_sequences(q, threads);
    }
}

CRMM_TEST_IN("runner", runner_out_of_memory_on_a_hand_made_sequence)
{
    /* alloc, alloc, alloc (fails: limit 2), free, free: the two live blocks are freed */
    bench_op ops[] = {{10, 0, 0}, {20, 1, 0}, {30, 2, 0}, {30, 2, 1}, {20, 1, 1}, {10, 0, 1}};
    bench_sequence q = {.ops = ops, .count = 6, .steps = 6, .allocs = 3, .frees = 3, .slots = 3,
                        .peak_live_bytes = 60, .peak_live_count = 3};
    limited l;
    limited_init(&l, 2, false);
    bench_run_options opt = {.repeats = 1, .device = -1};
    bench_result r;
    ck_assert_crmm_ok(bench_run(&l.base, &q, 1, &opt, &r));
    ck_assert_int_eq(r.outcome, BENCH_OUTCOME_OOM);
    ck_assert_int_eq(l.live, 0);
    ck_assert_int_eq(l.total, 2);
}

CRMM_TEST_IN("runner", runner_rejects_bad_arguments)
{
    limited l;
    limited_init(&l, 10, false);
    bench_sequence q = one_sequence(10, 2, 8);
    bench_run_options opt = {.repeats = 1, .device = -1};
    bench_result r;
    ck_assert_crmm(bench_run(&l.base, &q, 0, &opt, &r), CRMM_ERROR_INVALID_ARGUMENT);
    opt.repeats = 0;
    ck_assert_crmm(bench_run(&l.base, &q, 1, &opt, &r), CRMM_ERROR_INVALID_ARGUMENT);
    opt.repeats = 1;
    ck_assert_crmm(bench_run(NULL, &q, 1, &opt, &r), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(bench_run(&l.base, NULL, 1, &opt, &r), CRMM_ERROR_INVALID_ARGUMENT);
    bench_sequence empty = {0};
    ck_assert_crmm(bench_run(&l.base, &empty, 1, &opt, &r), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(l.total, 0);
    bench_sequence_free(&q);
}

CRMM_TEST_IN("runner", median_of_odd_and_even_counts)
{
    double a[] = {5, 1, 3};
    ck_assert_double_eq(bench_median(a, 3), 3);
    double b[] = {4, 1, 3, 2};
    ck_assert_double_eq(bench_median(b, 4), 2.5);
    ck_assert_double_eq(bench_median(b, 0), 0);
}

int main(void)
{
    return CRMM_TEST_MAIN_CASES("bench_workload", {"workload", 0}, {"runner", 0});
}
