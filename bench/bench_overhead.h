/* bench_overhead.h — `crmm bench --overhead`: what crmm itself adds around an allocator, the
 * last three targets of docs/benchmark.md.
 *  - dispatch: ns per allocate+deallocate pair on a null resource (allocate hands out one fixed
 *    block, deallocate does nothing), called directly, through crmm_resource_allocate /
 *    crmm_resource_deallocate, and through one pass-through adaptor layer over it;
 *  - config load: crmm_config_load_file (which dlopens and checks every plugin) timed in fresh
 *    child processes, then a second load in the same child;
 *  - logging: a benchmark set (set A) over a resource P, and over the `logging` adaptor writing
 *    buffered to a temporary file over a fresh P.
 * Each measurement writes its rows to a report begun with meta.overhead (bench_report.h). */
#ifndef CRMM_BENCH_OVERHEAD_H
#define CRMM_BENCH_OVERHEAD_H

#include <stdbool.h>
#include <stdint.h>
#include <crmm/error.h>
#include "bench_config.h"
#include "bench_report.h"
#include "bench_runner.h"
#include "bench_workload.h"

/* Defaults and limits of the command line. */
#define BENCH_OVERHEAD_ITERATIONS 10000000ull
#define BENCH_OVERHEAD_MAX_ITERATIONS 10000000000ull
#define BENCH_OVERHEAD_LOADS 20u
#define BENCH_OVERHEAD_MAX_LOADS 1000u

/* Targets of docs/benchmark.md: added per call (a pair is two calls), load time, logging per operation. */
#define BENCH_TARGET_DISPATCH_NS_PER_CALL 2.0
#define BENCH_TARGET_LOAD_MS 5.0
#define BENCH_TARGET_LOGGING_NS_PER_OP 150.0

/* Median, min and max of a series. */
typedef struct bench_stats {
    double median, min, max;
} bench_stats;

/* ns per allocate+deallocate pair, each over the same `repeats` runs (after one warm-up). */
typedef struct bench_dispatch_times {
    uint64_t iterations;         /* pairs per run */
    unsigned repeats;
    bench_stats direct;          /* the null resource's functions called directly */
    bench_stats abi;             /* through crmm_resource_allocate / crmm_resource_deallocate */
    bench_stats adaptor;         /* through one pass-through adaptor over the null resource */
} bench_dispatch_times;

/* Time the three ways of calling the null resource: per run `iterations` pairs of each, one run
 * of each in turn. Errors: CRMM_ERROR_INVALID_ARGUMENT (0 iterations or repeats, NULL),
 * CRMM_ERROR_OUT_OF_MEMORY. */
crmm_status bench_overhead_time_dispatch(uint64_t iterations, unsigned repeats, bench_dispatch_times *out);
/* Write the dispatch section (three rows). */
void bench_overhead_report_dispatch(bench_report *rep, const bench_dispatch_times *t);

/* Milliseconds to load the config in child processes. */
typedef struct bench_load_times {
    bench_outcome outcome;       /* ERROR when a child failed (error says how) */
    char error[512];
    unsigned processes;          /* children that reported */
    bench_stats cold;            /* the first load in a fresh process */
    bench_stats warm;            /* a second load in the same process */
} bench_load_times;

/* Time loading `config` (NULL: the config crmm_init(NULL) would load) in `processes` child
 * processes, each forked from this one: call it before this process loads any plugin, so that
 * every child starts as a fresh program would. One more child first opens the config as
 * bench_config_open does and hands back what loads (the file as it is, or without the resources
 * whose plugin does not load); the timed children load exactly that. No CUDA call anywhere.
 * Returns an error (with bench_config_open's message) only when the config cannot be opened;
 * a child that fails otherwise is an ERROR outcome in *out. */
crmm_status bench_overhead_time_loads(const char *config, unsigned processes, bench_load_times *out);
/* Write the config-load section (two rows); `bc` is the same config, opened by this process
 * after the children ran. */
void bench_overhead_report_loads(bench_report *rep, const bench_load_times *t, const bench_config *bc);

/* Write the logging section's description (the table's header for the rows that follow). */
void bench_overhead_logging_section(bench_report *rep, const bench_set *set);
/* Run `set` (one thread: `seq`) over a fresh instance of resource `name` (plugin `plugin`, on
 * CUDA device `device`, -1 for host memory) and over the logging adaptor (file in a new
 * temporary directory, auto_flush=false) over another fresh instance; write both rows; delete
 * the log. Returns false when either measurement failed other than running out of memory. */
bool bench_overhead_logging(bench_report *rep, const bench_config *bc, const char *name, const char *plugin,
                            int device, const bench_set *set, const bench_sequence *seq);

#endif
