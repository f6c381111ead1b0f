/* bench_runner.c — runs precomputed sequences on a resource from several threads and times them.
 *
 * The workers live for one measurement (warm-up + repeats): each creates its stream once, then
 * loops "wait at the start gate, play the sequence, wait at the end gate" while the main thread
 * opens the gates and collects the timestamps in between. The gate is a generation-counting
 * barrier whose number of parties can be lowered, so that a failed pthread_create never leaves
 * the threads already started waiting forever. The timed loop (play) touches nothing but the
 * operation array and a pointer table indexed by slot. */
#include "build_config.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include "bench_runner.h"

typedef struct gate {
    pthread_mutex_t lock;
    pthread_cond_t opened;
    unsigned parties, arrived;
    unsigned long generation;
} gate;

static void gate_init(gate *g, unsigned parties)
{
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->opened, NULL);
    g->parties = parties;
    g->arrived = 0;
    g->generation = 0;
}

static void gate_destroy(gate *g)
{
    pthread_cond_destroy(&g->opened);
    pthread_mutex_destroy(&g->lock);
}

static void gate_open_locked(gate *g)
{
    g->arrived = 0;
    g->generation++;
    pthread_cond_broadcast(&g->opened);
}

static void gate_wait(gate *g)
{
    pthread_mutex_lock(&g->lock);
    unsigned long gen = g->generation;
    if (++g->arrived >= g->parties)
        gate_open_locked(g);
    else
        while (gen == g->generation)
            pthread_cond_wait(&g->opened, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

static void gate_set_parties(gate *g, unsigned parties)
{
    pthread_mutex_lock(&g->lock);
    g->parties = parties;
    if (g->arrived > 0 && g->arrived >= parties)
        gate_open_locked(g);
    pthread_mutex_unlock(&g->lock);
}

typedef struct runner runner;

typedef struct worker {
    runner *r;
    const bench_sequence *seq;
    void **ptrs;                /* the live blocks, by slot */
    uint64_t *cleanup_bytes;    /* by slot, for freeing what is live after a failure */
    crmm_cuda_stream_t stream;
    struct timespec start, end;
    bench_outcome outcome;
    char error[512];
    pthread_t tid;
} worker;

struct runner {
    crmm_resource *mr;
    int device;
    gate start, end;
    int stop;                   /* read by workers after the start gate opens */
    worker *workers;
};

static void record_failure(worker *w, crmm_status st)
{
    if (w->outcome != BENCH_OUTCOME_OK)
        return;
    w->outcome = st == CRMM_ERROR_OUT_OF_MEMORY ? BENCH_OUTCOME_OOM : BENCH_OUTCOME_ERROR;
    const char *msg = crmm_last_error();
    snprintf(w->error, sizeof w->error, "%s", *msg ? msg : crmm_status_name(st));
}

/* The timed loop: returns how many operations succeeded; *st is the first failure. */
static size_t play(crmm_resource *mr, const bench_op *ops, size_t n, void **ptrs, crmm_cuda_stream_t stream,
                   crmm_status *st)
{
    for (size_t i = 0; i < n; i++) {
        const bench_op op = ops[i];
        crmm_status r = op.is_free ? crmm_resource_deallocate(mr, ptrs[op.slot], op.bytes, stream)
                                   : crmm_resource_allocate(mr, op.bytes, stream, &ptrs[op.slot]);
        if (__builtin_expect(r != CRMM_OK, 0)) {
            *st = r;
            return i;
        }
    }
    *st = CRMM_OK;
    return n;
}

/* After operation `failed` failed: free every block its predecessors left live. A failed free
 * counts as done (freeing it again could free memory that is no longer ours). */
static void free_what_is_live(worker *w, size_t failed)
{
    const bench_sequence *q = w->seq;
    memset(w->cleanup_bytes, 0, q->slots * sizeof *w->cleanup_bytes);
    for (size_t i = 0; i <= failed && i < q->count; i++) {
        const bench_op *op = &q->ops[i];
        if (op->is_free || i == failed)
            w->cleanup_bytes[op->slot] = 0;
        else
            w->cleanup_bytes[op->slot] = op->bytes;
    }
    for (uint32_t s = 0; s < q->slots; s++)
        if (w->cleanup_bytes[s])
            crmm_resource_deallocate(w->r->mr, w->ptrs[s], w->cleanup_bytes[s], w->stream);
}

static void run_once(worker *w)
{
    runner *r = w->r;
    crmm_status st;
    clock_gettime(CLOCK_MONOTONIC, &w->start);
    size_t done = play(r->mr, w->seq->ops, w->seq->count, w->ptrs, w->stream, &st);
    if (done == w->seq->count && w->stream) {
        cudaError_t e = cudaStreamSynchronize((cudaStream_t)w->stream);
        if (e != cudaSuccess)
            st = crmm_cuda_status(e, "cudaStreamSynchronize");
    }
    clock_gettime(CLOCK_MONOTONIC, &w->end);
    if (st == CRMM_OK)
        return;
    record_failure(w, st);
    if (done < w->seq->count) {
        free_what_is_live(w, done);
        if (w->stream)
            cudaStreamSynchronize((cudaStream_t)w->stream);
    }
}

static void worker_setup(worker *w)
{
    int device = w->r->device;
    if (device < 0)
        return; /* host memory: the NULL stream, no CUDA call */
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags((cudaStream_t *)&w->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        w->stream = NULL;
        record_failure(w, crmm_cuda_status(e, "creating the thread's stream"));
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    runner *r = w->r;
    worker_setup(w);
    for (;;) {
        gate_wait(&r->start);
        if (r->stop)
            break;
        if (w->outcome == BENCH_OUTCOME_OK)
            run_once(w);
        gate_wait(&r->end);
    }
    if (w->stream)
        cudaStreamDestroy((cudaStream_t)w->stream);
    return NULL;
}

static double ns_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) * 1e9 + (double)(b->tv_nsec - a->tv_nsec);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, unsigned n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Wall time of the last run: earliest start to latest end. */
static double run_wall_ns(const runner *r, unsigned threads)
{
    struct timespec first = r->workers[0].start, last = r->workers[0].end;
    for (unsigned t = 1; t < threads; t++) {
        const worker *w = &r->workers[t];
        if (ns_between(&w->start, &first) > 0)
            first = w->start;
        if (ns_between(&last, &w->end) > 0)
            last = w->end;
    }
    return ns_between(&first, &last);
}

static void free_workers(worker *ws, unsigned threads)
{
    if (!ws)
        return;
    for (unsigned t = 0; t < threads; t++) {
        free(ws[t].ptrs);
        free(ws[t].cleanup_bytes);
    }
    free(ws);
}

crmm_status bench_run(crmm_resource *mr, const bench_sequence *seqs, unsigned threads,
                      const bench_run_options *opt, bench_result *out)
{
    if (!mr || !seqs || !opt || !out || threads == 0 || opt->repeats == 0)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "bench_run: %s",
                              threads == 0 ? "threads must be >= 1" :
                              opt && opt->repeats == 0 ? "repeats must be >= 1" : "NULL argument");
    memset(out, 0, sizeof *out);
    out->threads = threads;
    for (unsigned t = 0; t < threads; t++) {
        if (!seqs[t].ops && seqs[t].count)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "bench_run: sequence %u is empty", t);
        out->total_ops += seqs[t].count;
        out->peak_live_bytes += seqs[t].peak_live_bytes;
    }
    if (out->total_ops == 0)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "bench_run: no operations to time");

    runner r = {.mr = mr, .device = opt->device};
    double *ns = calloc(opt->repeats, sizeof *ns);
    r.workers = calloc(threads, sizeof *r.workers);
    bool ok = ns && r.workers;
    for (unsigned t = 0; ok && t < threads; t++) {
        worker *w = &r.workers[t];
        w->r = &r;
        w->seq = &seqs[t];
        w->ptrs = calloc(seqs[t].slots ? seqs[t].slots : 1, sizeof *w->ptrs);
        w->cleanup_bytes = calloc(seqs[t].slots ? seqs[t].slots : 1, sizeof *w->cleanup_bytes);
        ok = w->ptrs && w->cleanup_bytes;
    }
    if (!ok) {
        free(ns);
        free_workers(r.workers, threads);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "bench: no host memory for %u threads' tables", threads);
    }

    gate_init(&r.start, threads + 1);
    gate_init(&r.end, threads + 1);
    unsigned started = 0;
    while (started < threads && pthread_create(&r.workers[started].tid, NULL, worker_main, &r.workers[started]) == 0)
        started++;
    crmm_status st = CRMM_OK;
    if (started < threads) {
        gate_set_parties(&r.start, started + 1);
        gate_set_parties(&r.end, started + 1);
        st = crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "bench: could only start %u of %u threads", started, threads);
    }

    for (unsigned run = 0; st == CRMM_OK && run <= opt->repeats; run++) {
        if (opt->progress)
            opt->progress(opt->progress_arg, run, opt->repeats);
        gate_wait(&r.start);
        gate_wait(&r.end);
        const worker *failed = NULL;
        for (unsigned t = 0; t < threads && !failed; t++)
            if (r.workers[t].outcome != BENCH_OUTCOME_OK)
                failed = &r.workers[t];
        if (failed) {
            out->outcome = failed->outcome;
            snprintf(out->error, sizeof out->error, "%s", failed->error);
            break;
        }
        if (run > 0)
            ns[out->runs++] = run_wall_ns(&r, threads) * threads / (double)out->total_ops;
    }
    r.stop = 1;
    gate_wait(&r.start);
    for (unsigned t = 0; t < started; t++)
        pthread_join(r.workers[t].tid, NULL);
    gate_destroy(&r.start);
    gate_destroy(&r.end);
    free_workers(r.workers, threads);

    if (out->runs > 0 && out->outcome == BENCH_OUTCOME_OK) {
        double lo = ns[0], hi = ns[0];
        for (unsigned i = 1; i < out->runs; i++) {
            lo = ns[i] < lo ? ns[i] : lo;
            hi = ns[i] > hi ? ns[i] : hi;
        }
        out->ns_per_op_min = lo;
        out->ns_per_op_max = hi;
        out->ns_per_op_median = bench_median(ns, out->runs);
        out->ops_per_second = out->ns_per_op_median > 0 ? threads * 1e9 / out->ns_per_op_median : 0;
    }
    free(ns);
    if (st != CRMM_OK)
        return st;
    uint64_t reserved;
    if (crmm_resource_query(mr, CRMM_QUERY_BYTES_RESERVED_PEAK, &reserved) == CRMM_OK) {
        out->has_peak_reserved = true;
        out->peak_reserved_bytes = reserved;
    } else {
        crmm_clear_error();
    }
    return CRMM_OK;
}
