/* replay.h — `crmm replay`: an RMM allocation log (replay_log.c), its replay against a resource
 * (replay_run.c), the report (replay_report.c), the plot (replay_plot.c) and the command
 * (cmd_replay.c).
 *
 * The log is the CSV the logging plugin writes, or one RMM's logging_resource_adaptor wrote:
 * exactly the six columns Thread,Time,Action,Pointer,Size,Stream. Reading it also pairs every
 * free with the allocation it frees, so the replay itself needs no lookups. */
#ifndef CRMM_TOOLS_REPLAY_H
#define CRMM_TOOLS_REPLAY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <crmm/config.h>
#include <crmm/error.h>
#include <crmm/resource.h>

typedef enum replay_action {
    REPLAY_ALLOCATE,
    REPLAY_ALLOCATE_FAILURE,
    REPLAY_FREE
} replay_action;

typedef struct replay_event {
    uint64_t thread;        /* the logged thread id */
    uint64_t pointer;       /* the logged pointer (0 for "(nil)") */
    uint64_t size;
    uint64_t stream;
    unsigned line;          /* line number in the file */
    replay_action action;
    uint32_t thread_index;  /* 0 .. threads-1, in order of first appearance */
    int64_t pair;           /* FREE: index of the ALLOCATE it frees; ALLOCATE: of its FREE; -1: none */
} replay_event;

typedef struct replay_log {
    replay_event *events;
    size_t count;
    uint32_t threads;           /* distinct logged threads */
    /* what the log itself shows */
    uint64_t allocations, frees, failures_logged;
    uint64_t leaked_count, leaked_bytes; /* allocations the log never frees */
    uint64_t unknown_frees;     /* frees of a pointer that was not live */
    uint64_t size_mismatches;   /* frees with another size than the allocation's */
    uint64_t reused_live;       /* allocations of a pointer that was still live (the first leaks) */
    uint64_t peak_bytes;        /* the most bytes live at once, per the log */
    unsigned first_unknown_free_line, first_size_mismatch_line, first_reused_live_line; /* 0: none */
} replay_log;

/* Read and pair a log. Errors: CRMM_ERROR_IO (cannot read), CRMM_ERROR_INVALID_ARGUMENT
 * ("FILE:LINE: what is wrong" for a bad header, a line that does not parse, a number of 2^64 or
 * more, a NUL byte), CRMM_ERROR_OUT_OF_MEMORY. The log's own anomalies (frees of pointers not
 * live, ...) are counted, not errors. */
crmm_status replay_log_read(const char *path, replay_log *log);
void replay_log_free(replay_log *log);

/* Which stream the replay's calls get (--stream). Host memory (a resource whose device is -1)
 * gets no CUDA call at all: NULL, or cudaStreamPerThread's handle for PER_THREAD. */
typedef enum replay_stream_kind {
    REPLAY_STREAM_NEW,        /* a non-blocking stream made for the replay (one per worker) */
    REPLAY_STREAM_DEFAULT,    /* the legacy default stream (NULL) */
    REPLAY_STREAM_PER_THREAD  /* cudaStreamPerThread */
} replay_stream_kind;

typedef struct replay_options {
    unsigned repeats;            /* timed repeats; 0 counts as 1 */
    unsigned threads;            /* 0: one thread in the log's order; N: the logged threads on at
                                  * most N OS threads, still in the log's global order */
    replay_stream_kind stream;
    bool keep_series;            /* keep bytes in use and reserved after each call (for a plot) */
} replay_options;

typedef struct replay_result {
    const char *stream_used;     /* the stream in words (static) */
    /* the untimed pass, in the log's order on one thread */
    uint64_t allocated, failed, freed, free_errors;
    char first_failure[512];     /* "line N: message" of the first failed allocation */
    uint64_t peak_in_use;        /* the most bytes in use at once as replayed (as requested) */
    bool reserved_known;         /* the resource answers CRMM_QUERY_BYTES_RESERVED */
    uint64_t peak_reserved;      /* the most it reserved: its peak query, else the sampled maximum */
    bool fragmentation_known;
    double max_fragmentation, end_fragmentation; /* sampled; at the end of the pass */
    /* the timed repeats */
    unsigned repeats;
    unsigned workers;            /* OS threads of threads mode; 0: one thread */
    uint64_t calls;              /* allocate + deallocate calls in one repeat */
    uint64_t timed_failures;     /* calls the resource refused, over all repeats */
    double ns_per_call_median, ns_per_call_min, ns_per_call_max, wall_ns_median;
    /* keep_series: after call k (0 .. points-1), at event x[k] of the log */
    size_t points;
    size_t *x;
    uint64_t *in_use, *reserved;
} replay_result;

/* Replay `log` against `mr` (replay_run.c): one untimed pass for the memory figures, then
 * opt->repeats timed ones. The device of mr is made current for the replay. Errors:
 * CRMM_ERROR_OUT_OF_MEMORY (tables, or a thread that cannot start), CRMM_ERROR_CUDA (the stream
 * cannot be made), and what crmm_cuda_device_enter returns. Failed allocations are counted in
 * *res, not errors. Free res with replay_result_free. */
crmm_status replay_against(const replay_log *log, crmm_resource *mr, const replay_options *opt, replay_result *res);
void replay_result_free(replay_result *res);

/* One resource's replay, as the reports and the plot see it. */
typedef struct replay_row {
    const char *label;           /* the resource's name in the config */
    char chain[256];             /* "pool -> cuda" */
    replay_result result;
} replay_row;

/* The report of `rows` (replay_report.c): text, one JSON object, or CSV with a header line.
 * Every form ends with a newline. */
typedef enum replay_format { REPLAY_TEXT, REPLAY_JSON, REPLAY_CSV } replay_format;
void replay_report(FILE *out, replay_format format, const char *path, const replay_log *log,
                   const replay_options *opt, const replay_row *rows, size_t nrows);

/* Write an SVG line chart of bytes in use and bytes reserved against the log's event index,
 * one pair of lines per row (replay_plot.c); rows need keep_series. Errors: CRMM_ERROR_IO
 * (cannot write path, with the reason). */
crmm_status replay_plot_svg(const char *path, const char *title, size_t events, const replay_row *rows,
                            size_t nrows);

/* Open `path` for the replay's output files (--plot, --torch-snapshot) as crmm writes every
 * file (docs/files-and-privileges.md): a pipe or a character device at path, or a symbolic link
 * to one, is written as it is (tmp set to ""); otherwise *fd is a new file tmp (PATH.PID.tmp, tmp_size bytes, with the mode
 * of the file it will replace), which the caller renames over path once written whole, or unlinks
 * on failure. Errors: CRMM_ERROR_IO
 * ("cannot write PATH: why") (replay_torch_snapshot.c). */
crmm_status replay_output_open(const char *path, char *tmp, size_t tmp_size, int *fd);
/* Whether paths a and b name one regular file: the same one when both exist, the same place when
 * neither does (two outputs not written yet, however each path is spelt). Pipes and devices
 * (/dev/null for both) are not (cmd_replay.c). An output that is the input would destroy it. */
bool replay_same_file(const char *a, const char *b);
/* replay_output_open with a stdio stream over the descriptor (fdopen with `mode`): *f, or NULL and
 * CRMM_ERROR_IO ("cannot write PATH: why") with nothing left behind. Close it with
 * replay_output_close. */
crmm_status replay_output_fopen(const char *path, const char *mode, char *tmp, size_t tmp_size, FILE **f);
/* Close f, the stream over replay_output_open's descriptor, and rename tmp over path (tmp "":
 * written in place). CRMM_ERROR_IO ("WHATcannot write PATH: why") when a write, the close or the
 * rename failed; tmp is then unlinked, so what was at path stays. */
crmm_status replay_output_close(FILE *f, const char *tmp, const char *path, const char *what);

/* --torch-snapshot (replay_torch_snapshot.c). A recording resource: it passes every call to
 * its upstream and notes each as a segment of the snapshot. */
typedef struct replay_recorder replay_recorder;

/* Build config resource `name` again (its plugin and parameters) over a recorder of its
 * config upstream, into *out (one reference) and *rec (owned by *out). Errors:
 * CRMM_ERROR_NOT_FOUND (no such resource), CRMM_ERROR_UNSUPPORTED (it has no upstream, or a
 * parameter value with a space or comma), what crmm_cuda_device_count returns for a device
 * resource without a device, and what building the upstream or the plugin returns. */
crmm_status replay_torch_build(crmm_config *cfg, const char *name, crmm_resource **out, replay_recorder **rec);

/* Replay `log` once, on this thread, against `mr` (built by replay_torch_build with its
 * recorder `rec`, or any resource with rec NULL: then each allocation is its own segment), and
 * write PyTorch's memory snapshot of it to `path`: a new file beside it, renamed over it, so a
 * symlink at path is replaced and never followed. What the log leaves allocated is freed after
 * the snapshot is taken. Errors: CRMM_ERROR_IO (path cannot be written, with the reason),
 * CRMM_ERROR_OUT_OF_MEMORY, what crmm_cuda_device_enter returns. */
crmm_status replay_torch_snapshot(const char *path, const replay_log *log, crmm_resource *mr, replay_recorder *rec);

/* `crmm replay ARGS`, writing its report to `out` and errors to `err`; returns the exit
 * status (0 done, 1 error, 2 bad usage). crmm_cmd_replay is this with stdout and stderr. */
int crmm_replay_main(int argc, char **argv, FILE *out, FILE *err);

#endif
