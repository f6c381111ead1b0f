/* cmd_replay.c — `crmm replay LOG`: replays an RMM-format allocation log (replay_log.c) against
 * one or more resources of a config, one after the other (replay_run.c), and reports the time
 * per call and the memory each took (replay_report.c), optionally as a plot (replay_plot.c).
 * This file reads the options and builds the resources. */
#include "build_config.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <crmm/crmm.h>
#include "bench_reference.h"
#include "commands.h"
#include "replay.h"

#define REPLAY_MAX_RESOURCES 16
#define REPLAY_DEFAULT_REPEATS 5

static void usage(FILE *f)
{
    fprintf(f,
            "usage: crmm replay LOG.csv [--config FILE] [--resource NAME]... [--repeats N]\n"
            "                   [--stream new|default|per-thread] [--threads N | --threads-as-logged]\n"
            "                   [--json | --csv]\n"
            "                   [--plot FILE.svg] [--torch-snapshot FILE.pickle] [--strict]\n\n"
            "Replays an allocation log in RMM's CSV format, written by the logging plugin or by RMM's\n"
            "logging_resource_adaptor (exactly the columns Thread,Time,Action,Pointer,Size,Stream),\n"
            "against each resource given, one after the other, and reports the time per call and the\n"
            "memory it took.\n\n"
            "  --config FILE     the config to build the resources from (default: $CRMM_CONFIG, the\n"
            "                    installed crmm.ini, else the built-in default, the cuda plugin)\n"
            "  --resource NAME   a resource of the config; repeat it to compare several (one row each,\n"
            "                    its chain built anew: rows share no upstream; default: the\n"
            "                    config's default resource). Without --config and\n"
            "                    --resource, and with no CUDA device, the host plugin is used.\n"
            "                    'cudaMalloc', 'cudaMallocAsync' and 'cudaMallocFromPoolAsync', when the\n"
            "                    config has no resource of that name, are crmm bench's raw CUDA\n"
            "                    references (no crmm resource in between): the floor a resource\n"
            "                    is measured against\n"
            "  --repeats N       timed repeats of the whole log (default %d); the median is reported\n"
            "  --stream KIND     the stream of every call: 'new' (default) a non-blocking stream made\n"
            "                    for the replay, 'default' the legacy default stream, 'per-thread'\n"
            "                    cudaStreamPerThread. Host memory gets no stream and no CUDA call\n"
            "  --threads N       replay logged thread i on OS thread i mod N (at most N threads, each\n"
            "                    with its own stream), still in the log's global order: the time then\n"
            "                    includes the hand-offs between threads. Default: one thread\n"
            "  --threads-as-logged  the same as --threads with the number of online CPUs\n"
            "  --json, --csv     the report as one JSON object, or CSV with one row per resource\n"
            "  --plot FILE.svg   draw bytes in use (solid) and bytes reserved (dashed) against the\n"
            "                    log's event index, one colour per resource\n"
            "  --torch-snapshot FILE.pickle  replay the log once more against the first resource\n"
            "                    (before the measured replays, on an instance of its own) and write\n"
            "                    PyTorch's memory snapshot of it, for torch.cuda._memory_viz and\n"
            "                    pytorch.org/memory_viz: the trace of every call, and the segments\n"
            "                    (what the resource took from its upstream) with the live blocks at\n"
            "                    the end of the log. A resource with no upstream shows each\n"
            "                    allocation as its own segment\n"
            "  --strict          refuse a log with anomalies (a free of a pointer not live, a free\n"
            "                    with another size than allocated, an allocation of a live pointer)\n\n"
            "How it measures: first one untimed pass in the log's order, asking the resource after\n"
            "every call how much it reserves (peak in use, peak reserved and their ratio come from it,\n"
            "and the plot); then N timed repeats, the clock read once before and once after each (the\n"
            "stream synchronized at the end, as crmm bench does), with only allocate and deallocate\n"
            "calls in between. ns per call = wall time / calls of one repeat.\n\n"
            "Logged pointers map to the new ones. Failed allocations ('allocate failure') are counted,\n"
            "not replayed; frees of pointers the log never allocated are reported, not replayed.\n"
            "Allocations the log never frees are reported as its leaks and freed after each pass. A\n"
            "line that does not parse stops the replay with its line number (exit status 1).\n",
            REPLAY_DEFAULT_REPEATS);
}

/* "pool -> cuda" into buf. */
static const char *describe_chain(const crmm_resource *mr, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (const crmm_resource *m = mr; m && n < size; m = crmm_resource_upstream(m))
        n += (size_t)snprintf(buf + n, size - n, "%s%s", m == mr ? "" : " -> ", crmm_resource_kind(m));
    return buf;
}

/* The config the resources come from: --config's file (kept in *own), else crmm_init's. */
static const crmm_config *load_config(const char *config, crmm_config **own, FILE *err)
{
    if (config) {
        if (crmm_config_load_file(config, own) != CRMM_OK) {
            fprintf(err, "crmm replay: %s\n", crmm_last_error());
            return NULL;
        }
        return *own;
    }
    if (crmm_init(NULL) != CRMM_OK) {
        fprintf(err, "crmm replay: %s\n", crmm_last_error());
        return NULL;
    }
    return crmm_current_config();
}

/* cfg loaded again from where it came from, for one row or the snapshot: a config caches the
 * instances it builds, and resources that share an upstream share its instance, so rows built
 * from one config would start on upstreams an earlier row grew. NULL after writing to err. */
static crmm_config *load_again(const crmm_config *cfg, FILE *err)
{
    crmm_config *fresh = NULL;
    const char *origin = crmm_config_origin(cfg);
    crmm_status st = strcmp(origin, "<built-in>") == 0 ? crmm_config_load_default(&fresh)
                                                         : crmm_config_load_file(origin, &fresh);
    if (st != CRMM_OK) {
        fprintf(err, "crmm replay: %s\n", crmm_last_error());
        return NULL;
    }
    return fresh;
}

/* Whether config resource i (a device one), neither --config nor --resource given, is replayed on
 * the host plugin: there is no CUDA device (the reason then in crmm_last_error()). */
static bool replays_on_host(const crmm_config *cfg, bool chosen, long i)
{
    int devices = 0;
    return !chosen && i >= 0 && !crmm_config_resource_is_host(cfg, (size_t)i) && crmm_cuda_device_count(&devices) != CRMM_OK;
}

/* Whether `name` is a resource of cfg or a raw CUDA reference; else says so on err. */
static bool names_a_resource(const crmm_config *cfg, const char *name, FILE *err)
{
    if (crmm_config_find_resource(cfg, name) >= 0)
        return true;
    for (int k = 0; k < BENCH_REFERENCE_COUNT; k++)
        if (strcmp(name, bench_reference_name((bench_reference_kind)k)) == 0)
            return true;
    fprintf(err, "crmm replay: %s has no resource '%s'\n", crmm_config_origin(cfg), name);
    return false;
}

/* Build resource `name` (NULL: the config's default; see usage for the host fallback). Returns
 * NULL after writing to err; notes go to err too, so that JSON and CSV stay clean. */
static crmm_resource *open_resource(const crmm_config *cfg, bool chosen, const char *name, FILE *err,
                                    char *label, size_t label_size)
{
    if (!name)
        name = crmm_config_default_resource(cfg, -1);
    long i = crmm_config_find_resource(cfg, name);
    for (int k = 0; i < 0 && name && k < BENCH_REFERENCE_COUNT; k++) {
        if (strcmp(name, bench_reference_name((bench_reference_kind)k)) != 0)
            continue;
        crmm_resource *mr = NULL;
        int count = 0, device = 0;
        if (crmm_cuda_device_count(&count) != CRMM_OK || crmm_cuda_current_device(&device) != CRMM_OK) {
            fprintf(err, "crmm replay: the raw CUDA reference '%s' needs a CUDA device: %s\n", name, crmm_last_error());
            return NULL;
        }
        if (bench_reference_create((bench_reference_kind)k, device, &mr) != CRMM_OK) {
            fprintf(err, "crmm replay: the raw CUDA reference '%s' cannot be made: %s\n", name, crmm_last_error());
            return NULL;
        }
        snprintf(label, label_size, "%s", name);
        return mr;
    }
    crmm_resource *mr = NULL;
    if (i < 0 && !name) { /* a config without resources: devices use the built-in cuda plugin, as in a program */
        int devices = 0;
        crmm_status found = crmm_cuda_device_count(&devices);
        bool device = found == CRMM_OK && devices > 0;
        if (!device)
            fprintf(err, "note: %s; replaying against the host plugin\n", found != CRMM_OK ? crmm_last_error() : "no CUDA device");
        const char *plugin = device ? "cuda" : "host";
        if (crmm_resource_create(plugin, NULL, NULL, &mr) != CRMM_OK) {
            fprintf(err, "crmm replay: %s\n", crmm_last_error());
            return NULL;
        }
        snprintf(label, label_size, "%s", plugin);
        return mr;
    }
    if (i < 0) {
        fprintf(err, "crmm replay: %s has no resource '%s'\n", crmm_config_origin(cfg), name);
        return NULL;
    }
    if (replays_on_host(cfg, chosen, i)) {
        fprintf(err, "note: %s; replaying against the host plugin\n", crmm_last_error());
        if (crmm_resource_create("host", NULL, NULL, &mr) != CRMM_OK) {
            fprintf(err, "crmm replay: %s\n", crmm_last_error());
            return NULL;
        }
        snprintf(label, label_size, "host");
        return mr;
    }
    if (crmm_config_create_resource((crmm_config *)cfg, name, -1, &mr) != CRMM_OK) {
        fprintf(err, "crmm replay: %s\n", crmm_last_error());
        return NULL;
    }
    snprintf(label, label_size, "%s", name);
    return mr;
}

/* A whole number in [1, max] for option `opt`; false after writing to err. */
static bool parse_count(const char *opt, const char *text, unsigned max, unsigned *out, FILE *err)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end || errno || v < 1 || v > max) {
        fprintf(err, "crmm replay: %s wants a whole number from 1 to %u, not '%s'\n", opt, max, text);
        return false;
    }
    *out = (unsigned)v;
    return true;
}

static bool parse_stream(const char *text, replay_stream_kind *out, FILE *err)
{
    static const char *const names[] = {"new", "default", "per-thread"};
    for (int i = 0; i < 3; i++)
        if (strcmp(text, names[i]) == 0) {
            *out = (replay_stream_kind)i;
            return true;
        }
    fprintf(err, "crmm replay: --stream wants new, default or per-thread, not '%s'\n", text);
    return false;
}

typedef struct replay_args {
    const char *path, *config, *plot, *torch_snapshot;
    const char *resources[REPLAY_MAX_RESOURCES];
    size_t nresources;
    replay_options opt;
    replay_format format;
    bool strict;
} replay_args;

/* The directory part of `path` (up to its last '/', "." without one) into dir; false when it
 * does not fit. */
static bool directory_of(const char *path, char *dir, size_t size)
{
    const char *slash = strrchr(path, '/');
    int n = slash ? snprintf(dir, size, "%.*s/", (int)(slash - path), path) : snprintf(dir, size, ".");
    return n >= 0 && (size_t)n < size;
}

/* Whether the directory parts of paths a and b are one directory and the names after them
 * equal: where two files not made yet would both land. */
static bool same_place(const char *a, const char *b)
{
    const char *na = strrchr(a, '/'), *nb = strrchr(b, '/');
    const char *base_a = na ? na + 1 : a, *base_b = nb ? nb + 1 : b;
    if (strcmp(base_a, base_b) != 0)
        return false;
    char da[4096], db[4096];
    struct stat sa, sb;
    if (!directory_of(a, da, sizeof da) || !directory_of(b, db, sizeof db) || stat(da, &sa) != 0 || stat(db, &sb) != 0)
        return strcmp(a, b) == 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Whether output `path` (of option opt) can be written, checked before the replays so that a bad
 * path costs no run; false after writing to err. A file there is checked as replay_output_open
 * will check it (opened to append, which changes nothing); a pipe or a device, through a link
 * too, is not opened (its reader would see an end); a new file's directory must take it. */
static bool output_writable(const char *opt, const char *path, FILE *err)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && (S_ISFIFO(sb.st_mode) || S_ISCHR(sb.st_mode)))
        return true;
    if (lstat(path, &sb) == 0) {
        int fd;
        if (crmm_output_file_open(path, CRMM_OUTPUT_APPEND, &fd) != CRMM_OK) {
            fprintf(err, "crmm replay: %s: %s\n", opt, crmm_last_error());
            return false;
        }
        close(fd);
        return true;
    }
    char dir[4096];
    errno = ENAMETOOLONG;
    if (!directory_of(path, dir, sizeof dir) || access(dir, W_OK | X_OK) != 0) {
        fprintf(err, "crmm replay: %s: cannot write %s: %s\n", opt, path, strerror(errno));
        return false;
    }
    return true;
}

bool replay_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    bool ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb)
        return S_ISREG(sa.st_mode) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    return !ea && !eb && same_place(a, b);
}

/* An output (--plot, --torch-snapshot) that would replace the log, the config or the other
 * output is refused before anything runs: false after writing to err. */
static bool outputs_apart(const replay_args *a, FILE *err)
{
    const struct { const char *opt, *path; } out[] = {{"--plot", a->plot}, {"--torch-snapshot", a->torch_snapshot}};
    for (int i = 0; i < 2; i++) {
        if (!out[i].path)
            continue;
        if (!out[i].path[0]) {
            fprintf(err, "crmm replay: %s needs a file name\n", out[i].opt);
            return false;
        }
        const char *clash = replay_same_file(out[i].path, a->path) ? "the log"
                          : a->config && replay_same_file(out[i].path, a->config) ? "the config"
                          : i == 0 && a->torch_snapshot && replay_same_file(a->plot, a->torch_snapshot) ? "--torch-snapshot's file"
                          : NULL;
        if (clash) {
            fprintf(err, "crmm replay: %s %s: that is %s, which it would replace\n", out[i].opt, out[i].path, clash);
            return false;
        }
    }
    return true;
}

/* Returns -1 to go on, else the exit status (0 after --help, 2 for bad usage). */
static int parse_args(int argc, char **argv, replay_args *a, FILE *out, FILE *err)
{
    *a = (replay_args){.opt = {.repeats = REPLAY_DEFAULT_REPEATS, .stream = REPLAY_STREAM_NEW}};
    bool json = false, csv = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = strcmp(arg, "--config") == 0 || strcmp(arg, "--resource") == 0 ||
                     strcmp(arg, "--repeats") == 0 || strcmp(arg, "--stream") == 0 ||
                     strcmp(arg, "--threads") == 0 || strcmp(arg, "--plot") == 0 ||
                     strcmp(arg, "--torch-snapshot") == 0;
        if (takes && !val) {
            fprintf(err, "crmm replay: %s needs a value\n", arg);
            return 2;
        }
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(out);
            return 0;
        } else if (strcmp(arg, "--config") == 0) {
            a->config = argv[++i];
        } else if (strcmp(arg, "--resource") == 0) {
            if (a->nresources == REPLAY_MAX_RESOURCES) {
                fprintf(err, "crmm replay: at most %d --resource options\n", REPLAY_MAX_RESOURCES);
                return 2;
            }
            a->resources[a->nresources++] = argv[++i];
        } else if (strcmp(arg, "--repeats") == 0) {
            if (!parse_count(arg, argv[++i], 100000, &a->opt.repeats, err))
                return 2;
        } else if (strcmp(arg, "--threads") == 0) {
            if (!parse_count(arg, argv[++i], 1024, &a->opt.threads, err))
                return 2;
        } else if (strcmp(arg, "--threads-as-logged") == 0) {
            long cpus = sysconf(_SC_NPROCESSORS_ONLN);
            a->opt.threads = cpus > 0 && cpus <= 1024 ? (unsigned)cpus : 1;
        } else if (strcmp(arg, "--stream") == 0) {
            if (!parse_stream(argv[++i], &a->opt.stream, err))
                return 2;
        } else if (strcmp(arg, "--plot") == 0) {
            a->plot = argv[++i];
        } else if (strcmp(arg, "--torch-snapshot") == 0) {
            a->torch_snapshot = argv[++i];
        } else if (strcmp(arg, "--json") == 0) {
            json = true;
        } else if (strcmp(arg, "--csv") == 0) {
            csv = true;
        } else if (strcmp(arg, "--strict") == 0) {
            a->strict = true;
        } else if (arg[0] != '-' && !a->path) {
            a->path = arg;
        } else {
            fprintf(err, "crmm replay: unexpected argument '%s'\n", arg);
            usage(err);
            return 2;
        }
    }
    if (json && csv) {
        fprintf(err, "crmm replay: --json and --csv exclude each other\n");
        return 2;
    }
    a->format = json ? REPLAY_JSON : csv ? REPLAY_CSV : REPLAY_TEXT;
    a->opt.keep_series = a->plot != NULL;
    if (!a->path) {
        fprintf(err, "crmm replay: no log file given\n");
        usage(err);
        return 2;
    }
    return outputs_apart(a, err) ? -1 : 2;
}

/* --torch-snapshot: the first resource built again over a recorder of its upstream, else as
 * the replay builds it (then each allocation is its own segment, with a note saying why, after
 * the resource was made: one that cannot be made is an error, not a note). */
static bool write_torch_snapshot_from(const replay_args *a, const crmm_config *cfg, const replay_log *log, FILE *err)
{
    const char *given = a->nresources ? a->resources[0] : NULL;
    const char *name = given ? given : crmm_config_default_resource(cfg, -1);
    long i = name ? crmm_config_find_resource(cfg, name) : -1;
    bool chosen = a->config || a->nresources, on_host = replays_on_host(cfg, chosen, i);
    crmm_resource *mr = NULL;
    replay_recorder *rec = NULL;
    if (i < 0 || on_host || replay_torch_build((crmm_config *)cfg, name, &mr, &rec) != CRMM_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", i < 0 ? "it is not a resource of the config" : crmm_last_error());
        char label[64];
        rec = NULL;
        if (!(mr = open_resource(cfg, chosen, given, err, label, sizeof label)))
            return false;
        fprintf(err, "note: --torch-snapshot: what %s reserves is not known (%s): each allocation is its own segment\n",
                label, why);
    }
    crmm_status st = replay_torch_snapshot(a->torch_snapshot, log, mr, rec);
    crmm_resource_release(mr);
    if (st != CRMM_OK) {
        fprintf(err, "crmm replay: %s\n", crmm_last_error());
        return false;
    }
    return true;
}

/* The snapshot from a config of its own (load_again), released before the rows are built: they
 * may need what its instances hold (a logging resource's file). */
static bool write_torch_snapshot(const replay_args *a, const crmm_config *cfg, const replay_log *log, FILE *err)
{
    crmm_config *own = load_again(cfg, err);
    if (!own)
        return false;
    bool written = write_torch_snapshot_from(a, own, log, err);
    crmm_config_free(own);
    return written;
}

/* --strict: the log's anomalies are errors, named by their first line. */
static bool log_is_clean(const char *path, const replay_log *log, FILE *err)
{
    if (log->unknown_frees)
        fprintf(err, "crmm replay: %s:%u: free of a pointer that is not live (%llu in all)\n", path,
                log->first_unknown_free_line, (unsigned long long)log->unknown_frees);
    if (log->size_mismatches)
        fprintf(err, "crmm replay: %s:%u: free with another size than allocated (%llu in all)\n", path,
                log->first_size_mismatch_line, (unsigned long long)log->size_mismatches);
    if (log->reused_live)
        fprintf(err, "crmm replay: %s:%u: allocation of a pointer that is still live (%llu in all)\n",
                path, log->first_reused_live_line, (unsigned long long)log->reused_live);
    return !log->unknown_frees && !log->size_mismatches && !log->reused_live;
}

/* A shared lock on the log while it is replayed (-1 when none could be taken: a pipe, or a
 * writer that holds the file): a `logging` resource of the replayed chain that names the log
 * takes its file with an exclusive lock (crmm_output_file_open), which this refuses, before it
 * truncates anything. */
static int hold_log(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

int crmm_replay_main(int argc, char **argv, FILE *out, FILE *err)
{
    replay_args a;
    int rc = parse_args(argc, argv, &a, out, err);
    if (rc >= 0)
        return rc;
    if ((a.plot && !output_writable("--plot", a.plot, err)) ||
        (a.torch_snapshot && !output_writable("--torch-snapshot", a.torch_snapshot, err)))
        return 1;
    int held = hold_log(a.path);
    replay_log log;
    if (replay_log_read(a.path, &log) != CRMM_OK) {
        fprintf(err, "crmm replay: %s\n", crmm_last_error());
        if (held >= 0)
            close(held);
        return 1;
    }
    rc = 1;
    crmm_config *own = NULL;
    size_t nrows = a.nresources ? a.nresources : 1, done = 0;
    replay_row *rows = calloc(nrows, sizeof *rows);
    const crmm_config *cfg = NULL;
    if (!rows) {
        fprintf(err, "crmm replay: out of memory\n");
        goto out;
    }
    if (a.strict && !log_is_clean(a.path, &log, err))
        goto out;
    if (!(cfg = load_config(a.config, &own, err)))
        goto out;
    for (size_t k = 0; k < a.nresources; k++) /* every name first: a typo in the last costs no run */
        if (!names_a_resource(cfg, a.resources[k], err))
            goto out;
    if (a.torch_snapshot && !write_torch_snapshot(&a, cfg, &log, err))
        goto out;
    for (; done < nrows; done++) {
        replay_row *row = &rows[done];
        char label[64];
        crmm_config *row_cfg = load_again(cfg, err);
        crmm_resource *mr = row_cfg ? open_resource(row_cfg, a.config || a.nresources,
                                                    a.nresources ? a.resources[done] : NULL, err, label, sizeof label)
                                    : NULL;
        if (!mr) {
            crmm_config_free(row_cfg);
            goto out;
        }
        row->label = a.nresources ? a.resources[done] : crmm_config_default_resource(cfg, -1);
        if (!a.nresources && (strcmp(label, "host") == 0 || strcmp(label, "cuda") == 0) &&
            (!row->label || strcmp(row->label, label) != 0)) /* the host fallback, or a config without resources */
            row->label = strcmp(label, "host") == 0 ? "host" : "cuda";
        describe_chain(mr, row->chain, sizeof row->chain);
        crmm_status st = replay_against(&log, mr, &a.opt, &row->result);
        crmm_resource_release(mr);
        crmm_config_free(row_cfg);
        if (st != CRMM_OK) {
            fprintf(err, "crmm replay: %s: %s\n", label, crmm_last_error());
            goto out;
        }
    }
    if (a.plot) {
        char title[512];
        snprintf(title, sizeof title, "crmm replay: %s", a.path);
        if (replay_plot_svg(a.plot, title, log.count, rows, nrows) != CRMM_OK) {
            fprintf(err, "crmm replay: %s\n", crmm_last_error());
            goto out;
        }
    }
    replay_report(out, a.format, a.path, &log, &a.opt, rows, nrows);
    rc = fflush(out) == 0 ? 0 : 1;
out:
    for (size_t i = 0; rows && i < done; i++)
        replay_result_free(&rows[i].result);
    free(rows);
    crmm_config_free(own);
    if (!a.config && cfg)
        crmm_finalize();
    replay_log_free(&log);
    if (held >= 0)
        close(held);
    return rc;
}

int crmm_cmd_replay(int argc, char **argv)
{
    return crmm_replay_main(argc, argv, stdout, stderr);
}
