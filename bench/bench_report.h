/* bench_report.h — writes `crmm bench` results as a table (default), CSV or JSON.
 *
 * A report is written as the bench goes: begin (what was measured where, and what was skipped
 * and why), then for each set its header and one row per resource, then end. Table and CSV rows
 * appear as soon as they are measured; JSON is one object:
 *   {"tool": "crmm bench", "version": ..., "config": ..., "device": ... | null,
 *    "skipped": [{"resource": ..., "reason": ...}, ...],
 *    "results": [{"set": ..., "mode": ..., ..., "resource": ..., "status": "ok" | "oom" | "error",
 *                 "ns_per_op_median": ..., ...}, ...]}
 * In CSV mode the skipped resources are reported on the error stream, so that stdout stays one
 * header line plus one line per result.
 *
 * `crmm bench --overhead` writes another kind of report (meta.overhead): sections of rows that
 * each time one thing in the section's unit and may say what it adds over another row and
 * whether a target of docs/benchmark.md is met; its CSV has its own header and its JSON results are
 *   {"measurement": ..., "name": ..., "detail": ..., "unit": ..., "samples": ..., "status": ...,
 *    "error": ..., "median": ..., "min": ..., "max": ..., "baseline": ..., "added": ...,
 *    "target": ..., "target_met": true | false | null}. */
#ifndef CRMM_BENCH_REPORT_H
#define CRMM_BENCH_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include "bench_runner.h"
#include "bench_workload.h"

typedef enum bench_format {
    BENCH_FORMAT_TABLE = 0,
    BENCH_FORMAT_CSV = 1,
    BENCH_FORMAT_JSON = 2
} bench_format;

typedef struct bench_report_meta {
    const char *config;          /* config origin */
    const char *device;          /* "device 0: NVIDIA H200 (...)"; NULL when no GPU is used */
    const char *no_gpu_reason;   /* set when a GPU was wanted and there is none: why (else NULL) */
    bool overhead;               /* a `crmm bench --overhead` report (rows: bench_report_overhead_row) */
    size_t nskipped;
    const char *const *skipped_names;
    const char *const *skipped_reasons;
} bench_report_meta;

/* One benchmark set as measured. */
typedef struct bench_set {
    char label[32];              /* "A" .. "D", or "rand/1MiB" */
    bench_workload workload;
    unsigned threads;
    unsigned repeats;
    uint64_t peak_live_bytes;    /* sum over threads of each thread's peak */
    uint64_t total_ops;          /* operations of one run, all threads */
} bench_set;

typedef struct bench_report bench_report;

/* Start a report on `out` (notes that must not mix with CSV go to `err`). NULL when out of
 * memory. */
bench_report *bench_report_begin(bench_format format, FILE *out, FILE *err, const bench_report_meta *meta);
/* A set starts (the table prints its description and the column header). */
void bench_report_set(bench_report *rep, const bench_set *set);
/* One result of `set` on resource `name` of plugin `plugin`. */
void bench_report_row(bench_report *rep, const bench_set *set, const char *name, const char *plugin,
                      const bench_result *result);
/* One result of `crmm bench --overhead`. */
typedef struct bench_overhead_row {
    const char *measurement;     /* "dispatch", "config_load", "logging" */
    const char *name;            /* what was timed, unique within the measurement (no blanks) */
    const char *detail;          /* one line: what exactly */
    const char *unit;            /* of median, min, max and added: "ns/pair", "ms", "ns/op" */
    unsigned samples;            /* timed runs or processes the median is over */
    bench_outcome outcome;
    const char *error;           /* why, when the outcome is not OK */
    double median, min, max;
    const char *baseline;        /* the row of the same measurement `added` is over, or NULL */
    double added;                /* median - the baseline's median */
    const char *target;          /* the target this row is held to ("added <= 150 ns/op"), or NULL */
    int target_met;              /* 1 met, 0 missed, -1 no target or no result */
} bench_overhead_row;

/* A measurement of an overhead report starts: the table prints `description` (lines without a
 * trailing newline are fine) and the column header with `unit`. */
void bench_report_overhead_section(bench_report *rep, const char *description, const char *unit);
/* One overhead result. */
void bench_report_overhead_row(bench_report *rep, const bench_overhead_row *row);

/* Finish the report (JSON closes its object) and free it. NULL: no-op. */
void bench_report_end(bench_report *rep);

/* The format's name for messages: "table", "csv", "json". */
const char *bench_format_name(bench_format format);

#endif
