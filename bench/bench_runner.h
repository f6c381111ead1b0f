/* bench_runner.h — times precomputed sequences (bench_workload.h) on one resource.
 *
 * One run: every thread waits at a barrier, then performs its whole sequence on the resource
 * (each thread on its own non-blocking CUDA stream; on the NULL stream and with no CUDA call at
 * all for host memory), then synchronizes its stream. The run's wall time is from the earliest
 * thread start to the latest thread end. A measurement is one warm-up run followed by `repeats`
 * timed runs on the same resource.
 *
 * ns/op is what one thread experiences: wall time / operations per thread, where operations per
 * thread = all operations of all threads / threads (every allocate and every free counts, the
 * final frees included). With one thread that is simply wall time / operations. ops/s is the
 * aggregate rate: all operations / wall time (= threads × 10^9 / ns/op). */
#ifndef CRMM_BENCH_RUNNER_H
#define CRMM_BENCH_RUNNER_H

#include <stdbool.h>
#include <stdint.h>
#include <crmm/resource.h>
#include "bench_workload.h"

typedef enum bench_outcome {
    BENCH_OUTCOME_OK = 0,
    BENCH_OUTCOME_OOM = 1,    /* an allocation failed with CRMM_ERROR_OUT_OF_MEMORY */
    BENCH_OUTCOME_ERROR = 2   /* any other failure (the message says which) */
} bench_outcome;

/* Called before each run: run 0 is the warm-up, runs 1 .. repeats are timed. */
typedef void (*bench_progress_fn)(void *arg, unsigned run, unsigned repeats);

typedef struct bench_run_options {
    unsigned repeats;            /* timed runs after the warm-up (>= 1) */
    int device;                  /* CUDA device for the threads' streams; -1: host memory, no CUDA */
    bench_progress_fn progress;  /* may be NULL */
    void *progress_arg;
} bench_run_options;

typedef struct bench_result {
    bench_outcome outcome;
    char error[512];             /* the first failure's message ("" when OK) */
    unsigned threads;
    unsigned runs;               /* timed runs completed */
    double ns_per_op_median, ns_per_op_min, ns_per_op_max;
    double ops_per_second;       /* aggregate, from the median run */
    uint64_t total_ops;          /* operations of one run, all threads */
    uint64_t peak_live_bytes;    /* sum over threads of each sequence's peak live bytes */
    bool has_peak_reserved;      /* the resource answered CRMM_QUERY_BYTES_RESERVED_PEAK */
    uint64_t peak_reserved_bytes;
} bench_result;

/* Time `threads` sequences (seqs[t] is thread t's) on `mr` as described above and fill *out.
 * An allocation failure ends the measurement: the failing thread frees what it holds, the
 * outcome says OOM or ERROR, and the resource is left with nothing allocated by the bench.
 * Returns CRMM_OK when the measurement ran (whatever its outcome); CRMM_ERROR_INVALID_ARGUMENT
 * for bad arguments, CRMM_ERROR_OUT_OF_MEMORY when the bench's own memory or threads fail: a
 * failure of the bench, not of the resource (its callers report an error, not OOM). */
crmm_status bench_run(crmm_resource *mr, const bench_sequence *seqs, unsigned threads,
                      const bench_run_options *opt, bench_result *out);

/* The median of n values (sorts `v` in place); 0 for n == 0. */
double bench_median(double *v, unsigned n);

#endif
