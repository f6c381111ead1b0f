/* check_bench.c — `crmm bench` without a GPU: the workload generator, the runner over host
 * memory, the lenient config loader, the command line (run in-process through bench_cli_main
 * with its output captured in temporary files) and `crmm bench --overhead`.
 *
 * A small in-test resource ("limited": malloc with a cap on live blocks, optionally answering
 * the reserved-peak query) drives the runner's out-of-memory path and its reserved/live column. */
#include "build_config.h"
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "test_support.h"
#include "../bench/bench_cli.h"
#include "../bench/bench_config.h"
#include "../bench/bench_overhead.h"
#include "../bench/bench_report.h"
#include "../bench/bench_runner.h"
#include "../bench/bench_workload.h"

/* ---- helpers -------------------------------------------------------------------------------- */

static bench_workload steps_workload(uint64_t steps, uint32_t live, uint64_t max_size)
{
    return (bench_workload){.mode = BENCH_MODE_STEPS, .steps = steps, .max_live = live, .max_size = max_size};
}

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

START_TEST(xorshift_known_values)
{
    uint64_t s = BENCH_SEED;
    ck_assert_uint_eq(bench_xorshift64(&s), 45454805674ull);
    ck_assert_uint_eq(bench_xorshift64(&s), 11532217803599905471ull);
    ck_assert_uint_eq(bench_xorshift64(&s), 10021416941527320954ull);
}
END_TEST

START_TEST(sequence_is_deterministic_per_thread)
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
END_TEST

START_TEST(sequence_tiny_hand_checked)
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
END_TEST

START_TEST(sequence_frees_everything_within_bounds)
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
END_TEST

START_TEST(sequence_coin_is_fair)
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
END_TEST

START_TEST(sequence_sizes_are_uniform)
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
END_TEST

START_TEST(sequence_random_mode_follows_rmm)
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
END_TEST

START_TEST(sequence_rejects_bad_workloads)
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
END_TEST

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

START_TEST(runner_over_host_one_thread)
{
    crmm_resource *mr;
    ck_assert_crmm_ok(crmm_resource_create("host", "", NULL, &mr));
    bench_workload w = steps_workload(5000, 100, 1024);
    bench_sequence q;
    make_sequences(&w, 1, &q);
    bench_run_options opt = {.repeats = 3, .device = -1};
    bench_result r;
    ck_assert_crmm_ok(bench_run(mr, &q, 1, &opt, &r));
    check_sane_result(&r, 3);
    ck_assert_uint_eq(r.total_ops, q.count);
    ck_assert_uint_eq(r.peak_live_bytes, q.peak_live_bytes);
    ck_assert(!r.has_peak_reserved); /* host answers no reserved-bytes query */
    uint64_t v;
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_BYTES_IN_USE, &v));
    ck_assert_uint_eq(v, 0);
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_ALLOCATIONS_TOTAL, &v));
    ck_assert_uint_eq(v, 4 * q.allocs); /* warm-up + 3 runs */
    bench_sequence_free(&q);
    crmm_resource_release(mr);
}
END_TEST

START_TEST(runner_over_host_four_threads)
{
    crmm_resource *mr;
    ck_assert_crmm_ok(crmm_resource_create("host", "", NULL, &mr));
    bench_workload w = steps_workload(3000, 50, 4096);
    bench_sequence q[4];
    make_sequences(&w, 4, q);
    bench_run_options opt = {.repeats = 2, .device = -1};
    bench_result r;
    ck_assert_crmm_ok(bench_run(mr, q, 4, &opt, &r));
    check_sane_result(&r, 2);
    ck_assert_uint_eq(r.threads, 4);
    ck_assert_uint_eq(r.total_ops, q[0].count + q[1].count + q[2].count + q[3].count);
    ck_assert_uint_eq(r.peak_live_bytes, q[0].peak_live_bytes + q[1].peak_live_bytes + q[2].peak_live_bytes +
                                             q[3].peak_live_bytes);
    uint64_t v;
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_BYTES_IN_USE, &v));
    ck_assert_uint_eq(v, 0);
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_ALLOCATIONS_TOTAL, &v));
    ck_assert_uint_eq(v, 3 * (q[0].allocs + q[1].allocs + q[2].allocs + q[3].allocs));
    free_sequences(q, 4);
    crmm_resource_release(mr);
}
END_TEST

static void count_progress(void *arg, unsigned run, unsigned repeats)
{
    unsigned *calls = arg;
    ck_assert_uint_eq(run, *calls);
    ck_assert_uint_eq(repeats, 4);
    (*calls)++;
}

START_TEST(runner_reports_progress_and_reserved_peak)
{
    limited l;
    limited_init(&l, 1000000, true);
    bench_workload w = steps_workload(500, 10, 64);
    bench_sequence q;
    make_sequences(&w, 1, &q);
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
END_TEST

START_TEST(runner_out_of_memory_frees_and_reports)
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
END_TEST

START_TEST(runner_out_of_memory_on_a_hand_made_sequence)
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
END_TEST

START_TEST(runner_rejects_bad_arguments)
{
    limited l;
    limited_init(&l, 10, false);
    bench_workload w = steps_workload(10, 2, 8);
    bench_sequence q;
    make_sequences(&w, 1, &q);
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
END_TEST

START_TEST(median_of_odd_and_even_counts)
{
    double a[] = {5, 1, 3};
    ck_assert_double_eq(bench_median(a, 3), 3);
    double b[] = {4, 1, 3, 2};
    ck_assert_double_eq(bench_median(b, 4), 2.5);
    ck_assert_double_eq(bench_median(b, 0), 0);
}
END_TEST

/* ---- the lenient config ---------------------------------------------------------------------- */

static const char *const cli_config =
    "[crmm]\n"
    "default = q ; names a skipped resource: blanked\n"
    "\n"
    "[resource.h]\n"
    "plugin = host\n"
    "\n"
    "[resource.t]\n"
    "plugin = template\n"
    "upstream = h\n"
    "\n"
    "[resource.p]\n"
    "plugin = nosuchplugin\n"
    "upstream = h\n"
    "\n"
    "[resource.q]\n"
    "plugin = template\n"
    "upstream = p\n"
    "\n"
    "[device.0]\n"
    "resource = q\n";

START_TEST(config_skips_resources_whose_plugin_does_not_load)
{
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    bench_config *bc;
    ck_assert_crmm_ok(bench_config_open(path, &bc));
    ck_assert_str_eq(bench_config_origin(bc), path);
    ck_assert_uint_eq(bench_config_resource_count(bc), 2);
    ck_assert_str_eq(bench_config_resource_name(bc, 0), "h");
    ck_assert_str_eq(bench_config_resource_name(bc, 1), "t");
    ck_assert_str_eq(bench_config_resource_plugin(bc, 1), "template");
    ck_assert(bench_config_resource_is_host(bc, 1));
    ck_assert_int_eq(bench_config_find(bc, "t"), 1);
    ck_assert_int_eq(bench_config_find(bc, "p"), -1);
    ck_assert_uint_eq(bench_config_skipped_count(bc), 2);
    ck_assert_str_eq(bench_config_skipped_name(bc, 0), "p");
    ck_assert_ptr_nonnull(strstr(bench_config_skipped_reason(bc, 0), "nosuchplugin"));
    ck_assert_str_eq(bench_config_skipped_name(bc, 1), "q");
    ck_assert_ptr_nonnull(strstr(bench_config_skipped_reason(bc, 1), "upstream 'p'"));
    /* fresh instances each time */
    crmm_resource *a, *b;
    ck_assert_crmm_ok(bench_config_create(bc, "t", -1, &a));
    ck_assert_crmm_ok(bench_config_create(bc, "t", -1, &b));
    ck_assert_ptr_ne(a, b);
    ck_assert_str_eq(crmm_resource_kind(a), "template");
    ck_assert_int_eq(crmm_resource_refcount(a), 1);
    crmm_resource_release(a);
    crmm_resource_release(b);
    bench_config_close(bc);
}
END_TEST

START_TEST(config_other_errors_stay_errors)
{
    /* an unknown key is a real mistake: the strict loader's message, even with a missing plugin */
    const char *path = crmm_test_write_file("bad.ini", "[resource.h]\nplugin = host\nbogus_key = 1\n"
                                                       "[resource.p]\nplugin = nosuchplugin\n");
    bench_config *bc = NULL;
    ck_assert_crmm(bench_config_open(path, &bc), CRMM_ERROR_CONFIG);
    ck_assert_ptr_null(bc);
    ck_assert_msg(strstr(crmm_last_error(), "bad.ini:") != NULL, "message: %s", crmm_last_error());
    ck_assert_crmm(bench_config_open("/nonexistent/crmm.ini", &bc), CRMM_ERROR_IO);
    /* a config that loads strictly has nothing skipped */
    path = crmm_test_write_file("ok.ini", "[resource.h]\nplugin = host\n");
    ck_assert_crmm_ok(bench_config_open(path, &bc));
    ck_assert_uint_eq(bench_config_skipped_count(bc), 0);
    bench_config_close(bc);
}
END_TEST

/* ---- the command line ------------------------------------------------------------------------- */

/* Run `crmm bench ARGS...` (NULL-terminated) in-process. */
static crmm_test_output run_cli(const char *first, ...)
{
    char *argv[64] = {(char *)"bench"};
    int argc = 1;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 63; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    return crmm_test_run_main(bench_cli_main, argv);
}

/* The line of `text` that starts with the words `a` and `b` (separated by blanks), or NULL. */
static const char *find_row(const char *text, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, a, la) != 0 || !isblank((unsigned char)line[la]))
            continue;
        const char *p = line + la;
        while (isblank((unsigned char)*p))
            p++;
        if (strncmp(p, b, lb) == 0 && isblank((unsigned char)p[lb]))
            return line;
    }
    return NULL;
}

static int gpu_count;

START_TEST(cli_table_rows_and_skips)
{
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    crmm_test_output r = run_cli("--set", "B", "--steps", "1000", "--repeats", "1", "--config", path, NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.out, "skipped p: ") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "skipped q: its upstream 'p' was skipped") != NULL, "%s", r.out);
    ck_assert_msg(find_row(r.out, "B", "h") != NULL, "no row for h:\n%s", r.out);
    ck_assert_msg(find_row(r.out, "B", "t") != NULL, "no row for t:\n%s", r.out);
    ck_assert_ptr_null(find_row(r.out, "B", "p"));
    ck_assert_ptr_null(find_row(r.out, "A", "h"));
    ck_assert_ptr_nonnull(strstr(r.out, "set B: 1000 steps, <= 100 live, sizes 1 B .. 1.0 KiB, 1 thread"));
    ck_assert_ptr_nonnull(strstr(find_row(r.out, "B", "t"), "template"));
    if (gpu_count == 0) {
        ck_assert_msg(strstr(r.out, "no CUDA device (") != NULL, "%s", r.out);
        ck_assert_ptr_nonnull(strstr(r.out, "GPU resources and the raw CUDA references are skipped"));
        ck_assert_ptr_nonnull(strstr(r.out, "skipped cudaMalloc: raw CUDA reference"));
        ck_assert_ptr_nonnull(strstr(r.out, "skipped cudaMallocAsync: raw CUDA reference"));
        ck_assert_ptr_nonnull(strstr(r.out, "skipped cudaMallocFromPoolAsync: raw CUDA reference"));
    } else {
        ck_assert_msg(find_row(r.out, "B", "cudaMalloc") != NULL, "%s", r.out);
        ck_assert_msg(find_row(r.out, "B", "cudaMallocAsync") != NULL, "%s", r.out);
        ck_assert_msg(find_row(r.out, "B", "cudaMallocFromPoolAsync") != NULL, "%s", r.out);
    }
    crmm_test_output_free(&r);
}
END_TEST

START_TEST(cli_resource_can_name_references)
{
    /* naming a reference keeps only the references named; the config's resources still by name */
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    crmm_test_output r = run_cli("--set", "B", "--steps", "500", "--repeats", "1", "--config", path, "--resource", "h",
                                 "--resource", "cudaMallocFromPoolAsync", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(find_row(r.out, "B", "h") != NULL, "%s", r.out);
    ck_assert_ptr_null(find_row(r.out, "B", "t"));
    ck_assert_ptr_null(strstr(r.out, "cudaMallocAsync"));
    ck_assert_ptr_null(strstr(r.out, "cudaMalloc:"));
    ck_assert_ptr_null(find_row(r.out, "B", "cudaMalloc"));
    if (gpu_count == 0)
        ck_assert_msg(strstr(r.out, "skipped cudaMallocFromPoolAsync: raw CUDA reference") != NULL, "%s", r.out);
    else
        ck_assert_msg(find_row(r.out, "B", "cudaMallocFromPoolAsync") != NULL, "%s", r.out);
    crmm_test_output_free(&r);

    /* a config resource of a reference's name is what that name means; the reference stays out */
    const char *shadow = crmm_test_write_file("shadow.ini", "[resource.cudaMalloc]\nplugin = host\n[resource.h]\nplugin = host\n");
    r = run_cli("--set", "B", "--steps", "500", "--repeats", "1", "--config", shadow, "--resource", "cudaMalloc",
                "--resource", "cudaMallocAsync", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    const char *row = find_row(r.out, "B", "cudaMalloc");
    ck_assert_msg(row && strstr(row, " host ") != NULL, "%s", r.out);
    ck_assert_msg(find_row(row + 1, "B", "cudaMalloc") == NULL, "two cudaMalloc rows:\n%s", r.out);
    ck_assert_msg(strstr(r.out, "skipped cudaMalloc:") == NULL, "%s", r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "cudaMallocAsync"));
    ck_assert_ptr_null(find_row(r.out, "B", "h"));
    crmm_test_output_free(&r);

    /* a reference named where no reference runs is a usage error, not an empty run */
    r = run_cli("--overhead", "--config", path, "--resource", "cudaMallocAsync", NULL);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "--resource cudaMallocAsync: a raw CUDA reference, which --overhead does not measure"), "%s", r.err);
    crmm_test_output_free(&r);
    r = run_cli("--no-references", "--config", path, "--resource", "cudaMalloc", NULL);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "--no-references leaves out"), "%s", r.err);
    crmm_test_output_free(&r);

    /* without a reference named, --resource leaves the references as they were */
    r = run_cli("--set", "B", "--steps", "500", "--repeats", "1", "--config", path, "--resource", "h", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "cudaMallocAsync"));
    ck_assert_ptr_nonnull(strstr(r.out, "cudaMallocFromPoolAsync"));
    crmm_test_output_free(&r);
}
END_TEST

START_TEST(cli_multi_thread_and_random_mode)
{
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    crmm_test_output r = run_cli("--set=D", "--steps=400", "--repeats=2", "--config", path, "--resource", "t",
                                 "--no-references", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(find_row(r.out, "D", "t"));
    ck_assert_ptr_null(find_row(r.out, "D", "h"));
    ck_assert_ptr_nonnull(strstr(r.out, "8 threads"));
    ck_assert_ptr_nonnull(strstr(r.out, "wall time / ops per thread"));
    ck_assert_ptr_null(strstr(r.out, "cudaMalloc"));
    ck_assert_ptr_null(strstr(r.out, "no CUDA device"));
    crmm_test_output_free(&r);

    r = run_cli("--mode", "random", "--allocations", "300", "--max-size", "64KiB,1MiB", "--repeats", "1",
                "--config", path, "--no-references", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(find_row(r.out, "rand/64KiB", "h") != NULL, "%s", r.out);
    ck_assert_ptr_nonnull(find_row(r.out, "rand/1MiB", "t"));
    ck_assert_ptr_nonnull(strstr(r.out, "RMM random_allocations, 300 allocations in 600 steps (73% allocate)"));
    crmm_test_output_free(&r);
}
END_TEST

/* Count CSV fields of one line (quotes respected). */
static int csv_fields(const char *line, size_t len)
{
    int n = 1;
    bool quoted = false;
    for (size_t i = 0; i < len; i++) {
        if (line[i] == '"')
            quoted = !quoted;
        else if (line[i] == ',' && !quoted)
            n++;
    }
    ck_assert_msg(!quoted, "unbalanced quotes in CSV line");
    return n;
}

START_TEST(cli_csv_is_well_formed)
{
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    crmm_test_output r = run_cli("--set", "B", "--steps", "1000", "--repeats", "1", "--config", path, "--csv",
                                 "--no-references", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "skipped p: ")); /* notes go to stderr */
    int lines = 0, header_fields = 0;
    for (const char *line = r.out; *line;) {
        const char *eol = strchr(line, '\n');
        ck_assert_ptr_nonnull(eol);
        int n = csv_fields(line, (size_t)(eol - line));
        if (lines == 0) {
            ck_assert(strncmp(line, "set,mode,steps,", 15) == 0);
            header_fields = n;
        } else {
            ck_assert_int_eq(n, header_fields);
            ck_assert(strncmp(line, "B,steps,1000,100,,1024,1,1,", 27) == 0);
            ck_assert_ptr_nonnull(strstr(line, ",ok,"));
        }
        lines++;
        line = eol + 1;
    }
    ck_assert_int_eq(header_fields, 20);
    ck_assert_int_eq(lines, 3); /* header, h, t */
    crmm_test_output_free(&r);
}
END_TEST

/* A minimal JSON syntax check: returns the end of the value at p, or NULL. */
static const char *json_value(const char *p);

static const char *json_ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
        p++;
    return p;
}

static const char *json_string_end(const char *p)
{
    if (*p++ != '"')
        return NULL;
    for (; *p && *p != '"'; p++) {
        if ((unsigned char)*p < 0x20)
            return NULL;
        if (*p == '\\' && !*++p)
            return NULL;
    }
    return *p == '"' ? p + 1 : NULL;
}

static const char *json_value(const char *p)
{
    p = json_ws(p);
    if (*p == '"')
        return json_string_end(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        p = json_ws(p + 1);
        if (*p == close)
            return p + 1;
        for (;;) {
            if (close == '}') {
                p = json_string_end(json_ws(p));
                if (!p || *(p = json_ws(p)) != ':')
                    return NULL;
                p++;
            }
            if (!(p = json_value(p)))
                return NULL;
            p = json_ws(p);
            if (*p == close)
                return p + 1;
            if (*p++ != ',')
                return NULL;
        }
    }
    if (strncmp(p, "null", 4) == 0 || strncmp(p, "true", 4) == 0)
        return p + 4;
    if (strncmp(p, "false", 5) == 0)
        return p + 5;
    char *end;
    strtod(p, &end);
    return end > p ? end : NULL;
}

START_TEST(cli_json_is_well_formed)
{
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    crmm_test_output r = run_cli("--set", "A,B", "--steps", "300", "--repeats", "1", "--config", path, "--json", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    const char *end = json_value(r.out);
    ck_assert_msg(end != NULL, "not JSON:\n%s", r.out);
    ck_assert_str_eq(json_ws(end), "");
    ck_assert_int_eq(r.out[0], '{');
    ck_assert_ptr_nonnull(strstr(r.out, "\"tool\": \"crmm bench\""));
    ck_assert_ptr_nonnull(strstr(r.out, "\"skipped\": ["));
    ck_assert_ptr_nonnull(strstr(r.out, "\"results\": ["));
    ck_assert_ptr_nonnull(strstr(r.out, "{\"resource\": \"p\", \"reason\": "));
    int rows = gpu_count ? 10 : 4; /* 2 sets x (h, t [, cudaMalloc, cudaMallocAsync, cudaMallocFromPoolAsync]) */
    ck_assert_int_eq(crmm_test_count(r.out, "{\"set\": "), rows);
    ck_assert_int_eq(crmm_test_count(r.out, "\"status\": \"ok\""), rows);
    ck_assert_int_eq(crmm_test_count(r.out, "\"resource\": \"t\", \"plugin\": \"template\""), 2);
    ck_assert_int_eq(crmm_test_count(r.out, "\"set\": \"A\", \"mode\": \"steps\", \"steps\": 300, \"max_live\": 1000"),
                     rows / 2);
    if (!gpu_count)
        ck_assert_ptr_null(strstr(r.out, "\"no_gpu_reason\": null"));
    crmm_test_output_free(&r);

    /* nothing skipped, no GPU asked for: still valid */
    path = crmm_test_write_file("one.ini", "[resource.h]\nplugin = host\n");
    r = run_cli("--set", "B", "--steps", "100", "--repeats", "1", "--config", path, "--json", "--no-references", NULL);
    ck_assert_int_eq(r.status, 0);
    end = json_value(r.out);
    ck_assert_msg(end && !*json_ws(end), "not JSON:\n%s", r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "\"skipped\": []"));
    ck_assert_ptr_nonnull(strstr(r.out, "\"device\": null"));
    crmm_test_output_free(&r);
}
END_TEST

/* ---- the report ---------------------------------------------------------------------------- */

/* Write a report with one OK and one OOM row in `format`; returns what it wrote to out. */
static char *report_text(bench_format format, char **err_text)
{
    FILE *out = tmpfile(), *err = tmpfile();
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(err);
    const char *names[] = {"p"}, *reasons[] = {"plugin error: no plugin 'x', \"quoted\""};
    bench_report_meta meta = {.config = "my.ini", .device = "device 0: Test GPU", .nskipped = 1,
                              .skipped_names = names, .skipped_reasons = reasons};
    bench_report *rep = bench_report_begin(format, out, err, &meta);
    ck_assert_ptr_nonnull(rep);
    bench_set set = {.label = "A", .workload = steps_workload(100, 10, 4096), .threads = 1, .repeats = 3,
                     .peak_live_bytes = 1000, .total_ops = 200};
    bench_report_set(rep, &set);
    bench_result ok = {.outcome = BENCH_OUTCOME_OK, .threads = 1, .runs = 3, .ns_per_op_median = 50,
                       .ns_per_op_min = 40, .ns_per_op_max = 60, .ops_per_second = 2e7, .total_ops = 200,
                       .peak_live_bytes = 1000, .has_peak_reserved = true, .peak_reserved_bytes = 1500};
    bench_result oom = {.outcome = BENCH_OUTCOME_OOM, .threads = 1, .total_ops = 200, .peak_live_bytes = 1000};
    snprintf(oom.error, sizeof oom.error, "out of memory: pool 'main': failed to allocate 4.0 MiB, \"really\"");
    bench_report_row(rep, &set, "main", "pool", &ok);
    bench_report_row(rep, &set, "small", "pool", &oom);
    bench_report_end(rep);
    *err_text = crmm_test_read_stream(err);
    return crmm_test_read_stream(out);
}

START_TEST(report_formats_ok_and_oom_rows)
{
    char *err, *text = report_text(BENCH_FORMAT_TABLE, &err);
    ck_assert_ptr_nonnull(strstr(text, "config my.ini; device 0: Test GPU"));
    ck_assert_ptr_nonnull(strstr(text, "skipped p: plugin error"));
    const char *row = find_row(text, "A", "main");
    ck_assert_ptr_nonnull(row);
    ck_assert_msg(strncmp(strstr(row, "pool"), "pool                 50.0         40.0         60.0     20.0 M           1.50", 67) == 0,
                  "row: %.120s", row);
    row = find_row(text, "A", "small");
    ck_assert_ptr_nonnull(row);
    ck_assert_ptr_nonnull(strstr(row, "OOM"));
    ck_assert_ptr_nonnull(strstr(row, "failed to allocate 4.0 MiB")); /* the reason, on the next line */
    ck_assert_str_eq(err, "");
    free(text);
    free(err);

    text = report_text(BENCH_FORMAT_CSV, &err);
    ck_assert_ptr_nonnull(strstr(err, "crmm bench: skipped p: "));
    ck_assert_ptr_nonnull(strstr(text, "\nA,steps,100,10,,4096,1,3,main,pool,ok,50.0,40.0,60.0,20000000,200,1000,1500,1.5000,\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nA,steps,100,10,,4096,1,3,small,pool,oom,,,,,200,1000,,,"
                                       "\"out of memory: pool 'main': failed to allocate 4.0 MiB, \"\"really\"\"\"\n"));
    free(text);
    free(err);

    text = report_text(BENCH_FORMAT_JSON, &err);
    const char *end = json_value(text);
    ck_assert_msg(end && !*json_ws(end), "not JSON:\n%s", text);
    ck_assert_ptr_nonnull(strstr(text, "\"reason\": \"plugin error: no plugin 'x', \\\"quoted\\\"\""));
    ck_assert_ptr_nonnull(strstr(text, "\"status\": \"oom\", \"error\": \"out of memory: "));
    ck_assert_ptr_nonnull(strstr(text, "\"peak_reserved_bytes\": 1500, \"reserved_over_live\": 1.5000}"));
    ck_assert_ptr_nonnull(strstr(text, "\"ns_per_op_median\": null"));
    free(text);
    free(err);
}
END_TEST

static void expect_usage_error(const char *what, crmm_test_output r)
{
    ck_assert_msg(r.status == 2, "%s: exit %d (expected 2)", what, r.status);
    ck_assert_msg(strncmp(r.err, "crmm bench: ", 12) == 0, "%s: message: %s", what, r.err);
    ck_assert_str_eq(r.out, "");
    crmm_test_output_free(&r);
}

START_TEST(cli_bad_arguments_exit_2)
{
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    expect_usage_error("--set Z", run_cli("--set", "Z", "--config", path, NULL));
    expect_usage_error("--set ,", run_cli("--set", ",", "--config", path, NULL));
    expect_usage_error("--steps 0", run_cli("--steps", "0", "--config", path, NULL));
    expect_usage_error("--steps -5", run_cli("--steps", "-5", "--config", path, NULL));
    expect_usage_error("--steps 1x", run_cli("--steps", "1x", "--config", path, NULL));
    expect_usage_error("--threads 0", run_cli("--threads", "0", "--config", path, NULL));
    expect_usage_error("--threads 100000", run_cli("--threads", "100000", "--config", path, NULL));
    expect_usage_error("--repeats 0", run_cli("--repeats", "0", "--config", path, NULL));
    expect_usage_error("--live 0", run_cli("--live", "0", "--config", path, NULL));
    expect_usage_error("--max-size 0", run_cli("--max-size", "0", "--config", path, NULL));
    expect_usage_error("--max-size 5%", run_cli("--max-size", "5%", "--config", path, NULL));
    expect_usage_error("--max-size list in sets", run_cli("--max-size", "1KiB,2KiB", "--config", path, NULL));
    expect_usage_error("--mode x", run_cli("--mode", "x", "--config", path, NULL));
    expect_usage_error("random + --set", run_cli("--mode", "random", "--set", "A", "--config", path, NULL));
    expect_usage_error("--allocations in sets", run_cli("--allocations", "10", "--config", path, NULL));
    expect_usage_error("unknown flag", run_cli("--frobnicate", "--config", path, NULL));
    expect_usage_error("positional", run_cli("A", "--config", path, NULL));
    expect_usage_error("missing value", run_cli("--config", path, "--steps", NULL));
    expect_usage_error("--csv --json", run_cli("--csv", "--json", "--config", path, NULL));
    expect_usage_error("--csv=1", run_cli("--csv=1", "--config", path, NULL));
    expect_usage_error("unknown --resource", run_cli("--resource", "nope", "--config", path, NULL));
    crmm_test_output r = run_cli("--resource", "nope", "--config", path, NULL);
    ck_assert_ptr_nonnull(strstr(r.err, "no [resource.nope]"));
    ck_assert_ptr_nonnull(strstr(r.err, "h t p q"));
    crmm_test_output_free(&r);
    r = run_cli("--set", "Z", "--config", path, NULL);
    ck_assert_ptr_nonnull(strstr(r.err, "unknown set 'Z'"));
    crmm_test_output_free(&r);
}
END_TEST

START_TEST(cli_config_failures_exit_1)
{
    crmm_test_output r = run_cli("--config", "/nonexistent/crmm.ini", "--set", "B", NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "/nonexistent/crmm.ini"));
    crmm_test_output_free(&r);
    const char *path = crmm_test_write_file("bad.ini", "[resource.h]\nplugin = host\nsize = 12\n");
    r = run_cli("--config", path, "--set", "B", NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "bad.ini:3:") != NULL, "%s", r.err);
    crmm_test_output_free(&r);
}
END_TEST

START_TEST(cli_help_documents_everything)
{
    crmm_test_output r = run_cli("--help", NULL);
    ck_assert_int_eq(r.status, 0);
    static const char *const words[] = {"--config", "--resource", "--no-references", "--set", "--steps", "--live",
                                        "--max-size", "--threads", "--repeats", "--mode", "--allocations", "--csv",
                                        "--json", "--copy", "cudaMallocAsync", "xorshift64", "73%", "ns/op",
                                        "ops/s", "reserved/live", "OOM", "Exit status"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        ck_assert_msg(strstr(r.out, words[i]) != NULL, "--help does not mention %s", words[i]);
    crmm_test_output_free(&r);
}
END_TEST

/* --copy is an option like the others: with --help it shows the copy benchmark's usage, and as
 * the value of another option it is that value, not a switch to the copy benchmark. */
START_TEST(cli_copy_is_parsed_as_an_option)
{
    crmm_test_output r = run_cli("--copy", "--help", NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strstr(r.out, "usage: crmm bench --copy") != NULL, "output: %s", r.out);
    crmm_test_output_free(&r);
    r = run_cli("--config", "--copy", "--no-references", NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "--copy") && !strstr(r.out, "Bandwidth"), "err: %s", r.err);
    crmm_test_output_free(&r);
    r = run_cli("--copy", "--bogus", NULL);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "unknown option '--bogus'") != NULL, "err: %s", r.err);
    crmm_test_output_free(&r);
}
END_TEST

START_TEST(cli_default_config_is_crmm_init_s)
{
    const char *path = crmm_test_write_file("env.ini", "[resource.envhost]\nplugin = host\n");
    setenv("CRMM_CONFIG", path, 1);
    crmm_test_output r = run_cli("--set", "B", "--steps", "100", "--repeats", "1", "--no-references", NULL);
    unsetenv("CRMM_CONFIG");
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, path));
    ck_assert_ptr_nonnull(find_row(r.out, "B", "envhost"));
    /* the table explains its reserved/live column, not only --help */
    ck_assert_ptr_nonnull(strstr(r.out, "reserved/live = peak bytes the resource reserved / peak live bytes"));
    crmm_test_output_free(&r);
}
END_TEST

START_TEST(cli_shipped_config_loads)
{
    /* conf/crmm.ini works at every stage: resources whose plugin is not built are skipped */
    char path[4096];
    snprintf(path, sizeof path, "%s/../conf/crmm.ini", getenv("CRMM_TEST_SRCDIR") ? getenv("CRMM_TEST_SRCDIR") : "tests");
    crmm_test_output r = run_cli("--config", path, "--resource", "host", "--set", "B", "--steps", "200", "--repeats", "1",
                                 "--no-references", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(find_row(r.out, "B", "host") != NULL, "%s", r.out);
    crmm_test_output_free(&r);
}
END_TEST

/* ---- --overhead ------------------------------------------------------------------------------- */

static void check_stats(const char *what, const bench_stats *s, double sane_max)
{
    ck_assert_msg(s->min > 0 && s->min <= s->median && s->median <= s->max, "%s: median %g, min %g, max %g", what,
                  s->median, s->min, s->max);
    ck_assert_msg(s->max < sane_max, "%s: %g is not a sane time", what, s->max);
}

START_TEST(overhead_dispatch_times_are_sane)
{
    bench_dispatch_times t;
    ck_assert_crmm_ok(bench_overhead_time_dispatch(100000, 3, &t));
    ck_assert_uint_eq(t.iterations, 100000);
    ck_assert_uint_eq(t.repeats, 3);
    /* a pair of calls that do nothing: well under 10 us even on a loaded machine under ASan */
    check_stats("direct", &t.direct, 1e4);
    check_stats("abi", &t.abi, 1e4);
    check_stats("adaptor", &t.adaptor, 1e4);
    ck_assert_crmm(bench_overhead_time_dispatch(0, 3, &t), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(bench_overhead_time_dispatch(10, 0, &t), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(bench_overhead_time_dispatch(10, 1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
}
END_TEST

/* True when a file whose name contains `name` is mapped into this process. */
static bool mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    ck_assert_ptr_nonnull(f);
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}

START_TEST(overhead_loads_time_fresh_children)
{
    /* p's plugin is missing: the children load the file without p and q */
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    bench_load_times t;
    ck_assert_crmm_ok(bench_overhead_time_loads(path, 3, &t));
    ck_assert_msg(t.outcome == BENCH_OUTCOME_OK, "%s", t.error);
    ck_assert_uint_eq(t.processes, 3);
    check_stats("cold", &t.cold, 1e4);
    check_stats("warm", &t.warm, 1e4);
    /* the loading happened in the children only: this process can still fork fresh ones */
    ck_assert(!mapped("crmm_host.so"));
    ck_assert(!mapped("crmm_template.so"));

    ck_assert_crmm(bench_overhead_time_loads("/nonexistent/crmm.ini", 2, &t), CRMM_ERROR_IO);
    ck_assert_msg(strstr(crmm_last_error(), "/nonexistent/crmm.ini") != NULL, "%s", crmm_last_error());
    path = crmm_test_write_file("bad.ini", "[resource.h]\nplugin = host\nsize = 12\n");
    ck_assert_crmm(bench_overhead_time_loads(path, 2, &t), CRMM_ERROR_CONFIG);
    ck_assert_msg(strstr(crmm_last_error(), "bad.ini:3:") != NULL, "%s", crmm_last_error());
    ck_assert_crmm(bench_overhead_time_loads(path, 0, &t), CRMM_ERROR_INVALID_ARGUMENT);
}
END_TEST

/* The numbers of an overhead table row: median, min, max, added; returns how many parsed
 * (3 when added is '-'). */
static int overhead_numbers(const char *text, const char *measurement, const char *name, double v[4])
{
    const char *row = find_row(text, measurement, name);
    ck_assert_msg(row != NULL, "no row %s %s in:\n%s", measurement, name, text);
    return sscanf(row, "%*s %*s %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3]);
}

static bool dir_is_empty(const char *path)
{
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    int entries = 0;
    while ((e = readdir(d)))
        entries += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return entries == 0;
}

START_TEST(cli_overhead_table)
{
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    /* the log goes under $TMPDIR, here one with a '%' in its name (the plugin expands '%') */
    char *tmp = crmm_test_tmpdir(), logs[4096];
    ck_assert_ptr_nonnull(tmp);
    snprintf(logs, sizeof logs, "%s/100%%p", tmp);
    ck_assert_int_eq(mkdir(logs, 0700), 0);
    setenv("TMPDIR", logs, 1);
    crmm_test_output r = run_cli("--overhead", "--iterations", "100000", "--loads", "3", "--steps", "1000", "--repeats",
                                 "2", "--config", path, NULL);
    unsetenv("TMPDIR");
    ck_assert_msg(r.status == 0, "exit %d: %s\n%s", r.status, r.err, r.out);
    ck_assert_msg(dir_is_empty(logs), "the log was left in %s", logs);
    rmdir(logs);
    rmdir(tmp);
    free(tmp);
    ck_assert_ptr_nonnull(strstr(r.out, "skipped p: "));
    double direct[4], abi[4], adaptor[4], cold[4], warm[4], plain[4], logged[4];
    ck_assert_int_eq(overhead_numbers(r.out, "dispatch", "direct", direct), 3);
    ck_assert_int_eq(overhead_numbers(r.out, "dispatch", "abi", abi), 4);
    ck_assert_int_eq(overhead_numbers(r.out, "dispatch", "adaptor", adaptor), 4);
    ck_assert(direct[0] > 0 && abi[0] > 0 && adaptor[0] > 0);
    ck_assert(isfinite(abi[3]) && fabs(abi[3] - (abi[0] - direct[0])) < 0.02);
    ck_assert(fabs(adaptor[3] - (adaptor[0] - abi[0])) < 0.02);
    ck_assert_ptr_nonnull(strstr(find_row(r.out, "dispatch", "abi"), "added <= 4 ns/pair (2 per call): "));
    ck_assert_ptr_nonnull(strstr(r.out, ", 100000 pairs per run, median of 2 runs after 1 warm-up"));
    ck_assert_int_eq(overhead_numbers(r.out, "config_load", "cold", cold), 3);
    ck_assert_int_eq(overhead_numbers(r.out, "config_load", "warm", warm), 3);
    ck_assert(cold[0] > 0 && warm[0] > 0);
    ck_assert_ptr_nonnull(strstr(find_row(r.out, "config_load", "cold"), "<= 5 ms: "));
    ck_assert_msg(strstr(r.out, "2 resources, 2 plugins (the resources whose plugin does not load left out)"), "%s",
                  r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "median of 3 child processes"));
    ck_assert_ptr_nonnull(strstr(r.out, "set A (1000 steps, <= 1000 live, sizes 1 B .. 4.0 MiB, 1 thread)"));
    ck_assert_int_eq(overhead_numbers(r.out, "logging", "h", plain), 3);
    ck_assert_int_eq(overhead_numbers(r.out, "logging", "logging(h)", logged), 4);
    ck_assert(plain[0] > 0 && logged[0] > 0 && fabs(logged[3] - (logged[0] - plain[0])) < 0.2);
    ck_assert_ptr_nonnull(strstr(find_row(r.out, "logging", "logging(h)"), "added <= 150 ns/op: "));
    /* only pool, arena and host resources unless named */
    ck_assert_ptr_null(find_row(r.out, "logging", "t"));
    ck_assert_ptr_null(strstr(r.out, "no CUDA device"));
    crmm_test_output_free(&r);

    r = run_cli("--overhead", "--iterations=1000", "--loads=1", "--steps=200", "--repeats=1", "--config", path,
                "--resource", "t", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(find_row(r.out, "logging", "t"));
    ck_assert_ptr_nonnull(find_row(r.out, "logging", "logging(t)"));
    ck_assert_ptr_null(find_row(r.out, "logging", "h"));
    crmm_test_output_free(&r);
}
END_TEST

START_TEST(cli_overhead_without_a_gpu_runs_over_host_memory)
{
    const char *path = crmm_test_write_file("gpu.ini", "[resource.g]\nplugin = cuda\n\n[resource.h]\nplugin = host\n");
    crmm_test_output r = run_cli("--overhead", "--iterations", "1000", "--loads", "2", "--steps", "200", "--repeats", "1",
                                 "--config", path, "--resource", "g", "--resource", "h", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(find_row(r.out, "dispatch", "abi"));
    ck_assert_ptr_nonnull(find_row(r.out, "config_load", "cold"));
    ck_assert_ptr_nonnull(find_row(r.out, "logging", "logging(h)"));
    if (gpu_count == 0) {
        ck_assert_msg(strstr(r.out, "GPU resources are skipped; the overhead measurements run over host memory"),
                      "%s", r.out);
        ck_assert_ptr_nonnull(strstr(r.out, "skipped g: GPU resource: needs a CUDA device"));
        ck_assert_ptr_null(find_row(r.out, "logging", "g"));
    } else {
        ck_assert_ptr_nonnull(find_row(r.out, "logging", "logging(g)"));
    }
    crmm_test_output_free(&r);

    /* nothing left for the logging measurement: the other two still run, and say so */
    if (gpu_count == 0) {
        r = run_cli("--overhead", "--iterations", "1000", "--loads", "1", "--repeats", "1", "--config", path,
                    "--resource", "g", NULL);
        ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
        ck_assert_ptr_nonnull(find_row(r.out, "config_load", "cold"));
        ck_assert_ptr_nonnull(strstr(r.err, "logging: no resource to measure it over"));
        crmm_test_output_free(&r);
    }
}
END_TEST

START_TEST(cli_overhead_failed_measurement_exits_1)
{
    /* host is found through the config's plugin_path, logging (crmm_resource_create, which
     * searches $CRMM_PLUGIN_PATH and the installed directory) nowhere */
    const char *env = getenv("CRMM_PLUGIN_PATH");
    ck_assert_ptr_nonnull(env);
    char *saved = strdup(env), text[8192];
    ck_assert_ptr_nonnull(saved);
    snprintf(text, sizeof text, "[crmm]\nplugin_path = %.*s\n\n[resource.h]\nplugin = host\n",
             (int)strcspn(saved, ":"), saved);
    const char *path = crmm_test_write_file("nolog.ini", text);
    setenv("CRMM_PLUGIN_PATH", "/nonexistent", 1);
    crmm_test_output r = run_cli("--overhead", "--iterations", "1000", "--loads", "1", "--steps", "200", "--repeats", "1",
                                 "--config", path, NULL);
    setenv("CRMM_PLUGIN_PATH", saved, 1);
    free(saved);
    if (r.status == 0 && !strstr(r.out, "no plugin 'logging'")) {
        crmm_test_output_free(&r); /* an installed crmm_logging.so was found: nothing fails here */
        return;
    }
    ck_assert_msg(r.status == 1, "exit %d: %s\n%s", r.status, r.err, r.out);
    ck_assert_ptr_nonnull(find_row(r.out, "logging", "h"));
    const char *row = find_row(r.out, "logging", "logging(h)");
    ck_assert_ptr_nonnull(row);
    ck_assert_msg(strstr(row, "error") && strstr(row, "no plugin 'logging'"), "%s", r.out);
    crmm_test_output_free(&r);
}
END_TEST

START_TEST(cli_overhead_csv_is_well_formed)
{
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    crmm_test_output r = run_cli("--overhead", "--iterations", "1000", "--loads", "2", "--steps", "300", "--repeats", "1",
                                 "--config", path, "--csv", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "skipped p: "));
    static const char *const starts[] = {"measurement,name,detail,unit,samples,status,median,min,max,baseline,added,"
                                         "target,target_met,error",
                                         "dispatch,direct,", "dispatch,abi,", "dispatch,adaptor,", "config_load,cold,",
                                         "config_load,warm,", "logging,h,", "logging,logging(h),"};
    int lines = 0;
    for (const char *line = r.out; *line; lines++) {
        const char *eol = strchr(line, '\n');
        ck_assert_ptr_nonnull(eol);
        ck_assert_int_lt(lines, 8);
        ck_assert_msg(strncmp(line, starts[lines], strlen(starts[lines])) == 0, "line %d: %.*s", lines,
                      (int)(eol - line), line);
        ck_assert_int_eq(csv_fields(line, (size_t)(eol - line)), 14);
        if (lines > 0)
            ck_assert_ptr_nonnull(strstr(line, ",ok,"));
        line = eol + 1;
    }
    ck_assert_int_eq(lines, 8);
    ck_assert_ptr_nonnull(strstr(r.out, ",direct,"));             /* abi's baseline */
    ck_assert_ptr_nonnull(strstr(r.out, ",added <= 150 ns/op,")); /* logging(h)'s target */
    crmm_test_output_free(&r);
}
END_TEST

START_TEST(cli_overhead_json_is_well_formed)
{
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    crmm_test_output r = run_cli("--overhead", "--iterations", "1000", "--loads", "2", "--steps", "300", "--repeats", "1",
                                 "--config", path, "--json", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    const char *end = json_value(r.out);
    ck_assert_msg(end && !*json_ws(end), "not JSON:\n%s", r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "\"mode\": \"overhead\""));
    ck_assert_ptr_nonnull(strstr(r.out, "{\"resource\": \"p\", \"reason\": "));
    ck_assert_int_eq(crmm_test_count(r.out, "{\"measurement\": "), 7);
    ck_assert_int_eq(crmm_test_count(r.out, "\"status\": \"ok\""), 7);
    ck_assert_int_eq(crmm_test_count(r.out, "\"target\": \""), 3); /* abi, cold, logging(h) */
    ck_assert_int_eq(crmm_test_count(r.out, "\"target_met\": null"), 4);
    ck_assert_ptr_nonnull(strstr(r.out, "{\"measurement\": \"config_load\", \"name\": \"cold\", "));
    ck_assert_ptr_nonnull(strstr(r.out, "\"unit\": \"ms\""));
    ck_assert_ptr_nonnull(strstr(r.out, "\"name\": \"logging(h)\""));
    crmm_test_output_free(&r);
}
END_TEST

/* Overhead rows as each format writes them: one met, one missed, one failed. */
static char *overhead_report_text(bench_format format)
{
    FILE *out = tmpfile(), *err = tmpfile();
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(err);
    bench_report_meta meta = {.config = "my.ini", .no_gpu_reason = "no driver", .overhead = true};
    bench_report *rep = bench_report_begin(format, out, err, &meta);
    ck_assert_ptr_nonnull(rep);
    bench_report_overhead_section(rep, "dispatch: test", "ns/pair");
    bench_overhead_row met = {.measurement = "dispatch", .name = "abi", .detail = "a, \"b\"", .unit = "ns/pair",
                              .samples = 3, .median = 5.5, .min = 5.25, .max = 6, .baseline = "direct", .added = 3.125,
                              .target = "added <= 4 ns/pair", .target_met = 1};
    bench_overhead_row missed = {.measurement = "config_load", .name = "cold", .detail = "x", .unit = "ms",
                                 .samples = 2, .median = 7.5, .min = 7, .max = 8, .target = "<= 5 ms", .target_met = 0};
    bench_overhead_row failed = {.measurement = "logging", .name = "logging(h)", .detail = "y", .unit = "ns/op",
                                 .outcome = BENCH_OUTCOME_ERROR, .error = "no plugin 'logging'",
                                 .target = "added <= 150 ns/op", .target_met = -1};
    bench_report_overhead_row(rep, &met);
    bench_report_overhead_row(rep, &missed);
    bench_report_overhead_row(rep, &failed);
    bench_report_end(rep);
    char *e = crmm_test_read_stream(err);
    if (format == BENCH_FORMAT_CSV)
        ck_assert_msg(strstr(e, "overhead measurements run over host memory") != NULL, "%s", e);
    else
        ck_assert_str_eq(e, "");
    free(e);
    return crmm_test_read_stream(out);
}

START_TEST(report_formats_overhead_rows)
{
    char *text = overhead_report_text(BENCH_FORMAT_TABLE);
    ck_assert_ptr_nonnull(strstr(text, "no CUDA device (no driver): GPU resources are skipped; the overhead"));
    ck_assert_ptr_nonnull(strstr(text, "\ndispatch: test\nmeasurement  name "));
    ck_assert_msg(strstr(text, "dispatch     abi                            5.50         5.25         6.00        "
                               "+3.12  direct       added <= 4 ns/pair: met\n"), "%s", text);
    ck_assert_msg(strstr(text, "config_load  cold                          7.500        7.000        8.000            "
                               "-  -            <= 5 ms: MISSED\n"), "%s", text);
    const char *row = find_row(text, "logging", "logging(h)");
    ck_assert_ptr_nonnull(row);
    ck_assert_ptr_nonnull(strstr(row, "error"));
    ck_assert_ptr_nonnull(strstr(row, "no plugin 'logging'")); /* on the next line */
    free(text);

    text = overhead_report_text(BENCH_FORMAT_CSV);
    ck_assert_msg(strstr(text, "\ndispatch,abi,\"a, \"\"b\"\"\",ns/pair,3,ok,5.50,5.25,6.00,direct,3.12,"
                               "added <= 4 ns/pair,true,\n"), "%s", text);
    ck_assert_msg(strstr(text, "\nconfig_load,cold,x,ms,2,ok,7.500,7.000,8.000,,,<= 5 ms,false,\n"), "%s", text);
    ck_assert_msg(strstr(text, "\nlogging,logging(h),y,ns/op,0,error,,,,,,added <= 150 ns/op,,no plugin 'logging'\n"),
                  "%s", text);
    free(text);

    text = overhead_report_text(BENCH_FORMAT_JSON);
    const char *end = json_value(text);
    ck_assert_msg(end && !*json_ws(end), "not JSON:\n%s", text);
    ck_assert_ptr_nonnull(strstr(text, "\"detail\": \"a, \\\"b\\\"\""));
    ck_assert_ptr_nonnull(strstr(text, "\"median\": 5.50, \"min\": 5.25, \"max\": 6.00, \"baseline\": \"direct\", "
                                       "\"added\": 3.12, \"target\": \"added <= 4 ns/pair\", \"target_met\": true}"));
    ck_assert_ptr_nonnull(strstr(text, "\"added\": null, \"target\": \"<= 5 ms\", \"target_met\": false}"));
    ck_assert_ptr_nonnull(strstr(text, "\"status\": \"error\", \"error\": \"no plugin 'logging'\", \"median\": null"));
    free(text);
}
END_TEST

START_TEST(cli_overhead_bad_arguments_exit_2)
{
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    expect_usage_error("--overhead --set", run_cli("--overhead", "--set", "A", "--config", path, NULL));
    expect_usage_error("--overhead --mode", run_cli("--overhead", "--mode", "sets", "--config", path, NULL));
    expect_usage_error("--overhead --threads", run_cli("--overhead", "--threads", "2", "--config", path, NULL));
    expect_usage_error("--overhead --live", run_cli("--overhead", "--live", "5", "--config", path, NULL));
    expect_usage_error("--overhead --max-size", run_cli("--overhead", "--max-size", "1KiB", "--config", path, NULL));
    expect_usage_error("--overhead --allocations", run_cli("--overhead", "--allocations", "5", "--config", path, NULL));
    expect_usage_error("--overhead --no-references", run_cli("--overhead", "--no-references", "--config", path, NULL));
    expect_usage_error("--iterations alone", run_cli("--iterations", "10", "--config", path, NULL));
    expect_usage_error("--loads alone", run_cli("--loads", "10", "--config", path, NULL));
    expect_usage_error("--iterations 0", run_cli("--overhead", "--iterations", "0", "--config", path, NULL));
    expect_usage_error("--iterations x", run_cli("--overhead", "--iterations", "1e6", "--config", path, NULL));
    expect_usage_error("--loads 0", run_cli("--overhead", "--loads", "0", "--config", path, NULL));
    expect_usage_error("--loads 1001", run_cli("--overhead", "--loads", "1001", "--config", path, NULL));
    expect_usage_error("--overhead=1", run_cli("--overhead=1", "--config", path, NULL));
    expect_usage_error("--overhead --csv --json", run_cli("--overhead", "--csv", "--json", "--config", path, NULL));
    expect_usage_error("--overhead --resource nope",
                       run_cli("--overhead", "--loads", "1", "--iterations", "10", "--resource", "nope", "--config",
                               path, NULL));
    crmm_test_output r = run_cli("--overhead", "--set", "A", "--config", path, NULL);
    ck_assert_ptr_nonnull(strstr(r.err, "--set does not apply to --overhead"));
    crmm_test_output_free(&r);
    r = run_cli("--loads", "3", "--config", path, NULL);
    ck_assert_ptr_nonnull(strstr(r.err, "--loads applies to --overhead"));
    crmm_test_output_free(&r);
    /* a config that cannot be loaded is exit 1, as without --overhead */
    r = run_cli("--overhead", "--config", "/nonexistent/crmm.ini", NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "/nonexistent/crmm.ini"));
    ck_assert_str_eq(r.out, "");
    crmm_test_output_free(&r);
}
END_TEST

START_TEST(cli_overhead_help)
{
    crmm_test_output r = run_cli("--help", NULL);
    ck_assert_int_eq(r.status, 0);
    static const char *const words[] = {"--overhead", "--iterations", "--loads", "dispatch", "config_load", "logging",
                                        "crmm_resource_allocate", "pass-through adaptor", "auto_flush=false",
                                        "<= 5 ms", "150 ns/op", "2 ns per call"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        ck_assert_msg(strstr(r.out, words[i]) != NULL, "--help does not mention %s", words[i]);
    crmm_test_output_free(&r);
}
END_TEST

int main(void)
{
    gpu_count = crmm_test_gpu_count(); /* probed in a child: no CUDA call here */
    Suite *s = suite_create("bench");
    TCase *tc = tcase_create("workload");
    tcase_add_test(tc, xorshift_known_values);
    tcase_add_test(tc, sequence_is_deterministic_per_thread);
    tcase_add_test(tc, sequence_tiny_hand_checked);
    tcase_add_test(tc, sequence_frees_everything_within_bounds);
    tcase_add_test(tc, sequence_coin_is_fair);
    tcase_add_test(tc, sequence_sizes_are_uniform);
    tcase_add_test(tc, sequence_random_mode_follows_rmm);
    tcase_add_test(tc, sequence_rejects_bad_workloads);
    suite_add_tcase(s, tc);
    tc = tcase_create("runner");
    tcase_add_test(tc, runner_over_host_one_thread);
    tcase_add_test(tc, runner_over_host_four_threads);
    tcase_add_test(tc, runner_reports_progress_and_reserved_peak);
    tcase_add_test(tc, runner_out_of_memory_frees_and_reports);
    tcase_add_test(tc, runner_out_of_memory_on_a_hand_made_sequence);
    tcase_add_test(tc, runner_rejects_bad_arguments);
    tcase_add_test(tc, median_of_odd_and_even_counts);
    suite_add_tcase(s, tc);
    tc = tcase_create("config");
    tcase_add_test(tc, config_skips_resources_whose_plugin_does_not_load);
    tcase_add_test(tc, config_other_errors_stay_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("cli");
    tcase_set_timeout(tc, CRMM_TEST_GPU_TIMEOUT); /* the references run when there is a GPU */
    tcase_add_test(tc, report_formats_ok_and_oom_rows);
    tcase_add_test(tc, cli_table_rows_and_skips);
    tcase_add_test(tc, cli_resource_can_name_references);
    tcase_add_test(tc, cli_multi_thread_and_random_mode);
    tcase_add_test(tc, cli_csv_is_well_formed);
    tcase_add_test(tc, cli_json_is_well_formed);
    tcase_add_test(tc, cli_bad_arguments_exit_2);
    tcase_add_test(tc, cli_config_failures_exit_1);
    tcase_add_test(tc, cli_help_documents_everything);
    tcase_add_test(tc, cli_copy_is_parsed_as_an_option);
    tcase_add_test(tc, cli_default_config_is_crmm_init_s);
    tcase_add_test(tc, cli_shipped_config_loads);
    suite_add_tcase(s, tc);
    tc = tcase_create("overhead");
    tcase_set_timeout(tc, CRMM_TEST_GPU_TIMEOUT); /* logging over a GPU resource when there is one */
    tcase_add_test(tc, overhead_dispatch_times_are_sane);
    tcase_add_test(tc, overhead_loads_time_fresh_children);
    tcase_add_test(tc, report_formats_overhead_rows);
    tcase_add_test(tc, cli_overhead_table);
    tcase_add_test(tc, cli_overhead_without_a_gpu_runs_over_host_memory);
    tcase_add_test(tc, cli_overhead_failed_measurement_exits_1);
    tcase_add_test(tc, cli_overhead_csv_is_well_formed);
    tcase_add_test(tc, cli_overhead_json_is_well_formed);
    tcase_add_test(tc, cli_overhead_bad_arguments_exit_2);
    tcase_add_test(tc, cli_overhead_help);
    suite_add_tcase(s, tc);
    return crmm_test_run(s);
}
