/* bench_overhead.c — the measurements of `crmm bench --overhead` (dispatch, config load,
 * logging) and their report rows.
 *
 * Dispatch: a "null" resource built here (allocate stores one fixed aligned block, deallocate
 * does nothing) is called in three loops that differ only in how they reach it: its functions
 * directly, crmm_resource_allocate/deallocate (libcrmm's checks plus one indirect call), and
 * the same through a pass-through adaptor (a second resource whose ops only call their
 * upstream). The null functions and the loops are opaque to the optimizer (not inlined, no
 * interprocedural analysis), so the direct loop really makes its calls.
 *
 * Config load: plugins stay loaded once a process has loaded them, so a fresh load is only
 * seen in a process that has loaded none: every sample is a child forked before the parent
 * opens the config, which times the load and writes the result into a pipe. A first child
 * opens the config as the bench does and sends back what loads (the path, and whether some
 * plugins are missing so that the skipping loader is needed), so that the timed children load
 * exactly that.
 *
 * Logging: bench_run (the ordinary runner) over a fresh resource, then over a logging layer
 * on another fresh instance, writing to a file in a new temporary directory. */
#include "build_config.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <crmm/crmm.h>
#include <crmm/logging.h>
#include "bench_overhead.h"

/* Keep a function a real call: not inlined, and (GCC) no conclusions drawn from its body. */
#if defined(__clang__)
#define BENCH_OPAQUE __attribute__((noinline))
#else
#define BENCH_OPAQUE __attribute__((noipa))
#endif

static double ns_since(const struct timespec *a)
{
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (double)(b.tv_sec - a->tv_sec) * 1e9 + (double)(b.tv_nsec - a->tv_nsec);
}

/* Median, min and max of v[0 .. n) (sorts v). */
static bench_stats stats_of(double *v, unsigned n)
{
    bench_stats s = {0, 0, 0};
    if (n == 0)
        return s;
    s.min = s.max = v[0];
    for (unsigned i = 1; i < n; i++) {
        s.min = v[i] < s.min ? v[i] : s.min;
        s.max = v[i] > s.max ? v[i] : s.max;
    }
    s.median = bench_median(v, n);
    return s;
}

/* ---- dispatch ------------------------------------------------------------------------------- */

#define DISPATCH_BYTES CRMM_ALLOCATION_ALIGNMENT

typedef struct null_resource {
    crmm_resource base;
    void *block;
} null_resource;

static _Alignas(CRMM_ALLOCATION_ALIGNMENT) unsigned char null_block[CRMM_ALLOCATION_ALIGNMENT];

static BENCH_OPAQUE crmm_status null_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    (void)bytes;
    (void)stream;
    __asm__ volatile("");
    *ptr = ((null_resource *)self)->block;
    return CRMM_OK;
}

static BENCH_OPAQUE crmm_status null_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    (void)self;
    (void)ptr;
    (void)bytes;
    (void)stream;
    __asm__ volatile("");
    return CRMM_OK;
}

static void free_resource(crmm_resource *self)
{
    free(self);
}

static const crmm_resource_ops null_ops = {
    .allocate = null_allocate,
    .deallocate = null_deallocate,
    .destroy = free_resource,
};

/* The pass-through adaptor: the template plugin's shape without its counters. */
static crmm_status pass_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    return crmm_resource_allocate(self->upstream, bytes, stream, ptr);
}

static crmm_status pass_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    return crmm_resource_deallocate(self->upstream, ptr, bytes, stream);
}

static const crmm_resource_ops pass_ops = {
    .allocate = pass_allocate,
    .deallocate = pass_deallocate,
    .destroy = free_resource,
};

/* The timed loops: n pairs each; false when a call failed (none can). */
static BENCH_OPAQUE bool loop_direct(crmm_resource *mr, uint64_t n)
{
    unsigned bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        void *p;
        bad |= null_allocate(mr, DISPATCH_BYTES, NULL, &p) != CRMM_OK;
        bad |= null_deallocate(mr, p, DISPATCH_BYTES, NULL) != CRMM_OK;
    }
    return bad == 0;
}

static BENCH_OPAQUE bool loop_abi(crmm_resource *mr, uint64_t n)
{
    unsigned bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        void *p;
        bad |= crmm_resource_allocate(mr, DISPATCH_BYTES, NULL, &p) != CRMM_OK;
        bad |= crmm_resource_deallocate(mr, p, DISPATCH_BYTES, NULL) != CRMM_OK;
    }
    return bad == 0;
}

/* ns per pair of one run. */
static double time_loop(bool (*loop)(crmm_resource *, uint64_t), crmm_resource *mr, uint64_t n, bool *ok)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    *ok &= loop(mr, n);
    return ns_since(&start) / (double)n;
}

crmm_status bench_overhead_time_dispatch(uint64_t iterations, unsigned repeats, bench_dispatch_times *out)
{
    if (!out || iterations == 0 || repeats == 0)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "bench: dispatch: %s",
                              !out ? "out is NULL"
                              : iterations == 0 ? "iterations must be >= 1" : "repeats must be >= 1");
    memset(out, 0, sizeof *out);
    double *ns = calloc(3 * (size_t)repeats, sizeof *ns);
    null_resource *null = calloc(1, sizeof *null);
    crmm_resource *pass = calloc(1, sizeof *pass);
    if (!ns || !null || !pass) {
        free(ns);
        free(null);
        free(pass);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "bench: dispatch: out of memory");
    }
    null->block = null_block;
    crmm_resource_init(&null->base, &null_ops, "null", CRMM_RESOURCE_HOST_ACCESSIBLE, -1, NULL);
    crmm_resource_init(pass, &pass_ops, "pass", CRMM_RESOURCE_HOST_ACCESSIBLE, -1, &null->base);
    double *direct = ns, *abi = ns + repeats, *adaptor = ns + 2 * (size_t)repeats;
    bool ok = true;
    for (unsigned run = 0; run <= repeats; run++) { /* run 0: warm-up */
        double d = time_loop(loop_direct, &null->base, iterations, &ok);
        double a = time_loop(loop_abi, &null->base, iterations, &ok);
        double p = time_loop(loop_abi, pass, iterations, &ok);
        if (run > 0) {
            direct[run - 1] = d;
            abi[run - 1] = a;
            adaptor[run - 1] = p;
        }
    }
    crmm_resource_release(pass);
    crmm_resource_release(&null->base);
    out->iterations = iterations;
    out->repeats = repeats;
    out->direct = stats_of(direct, repeats);
    out->abi = stats_of(abi, repeats);
    out->adaptor = stats_of(adaptor, repeats);
    free(ns);
    if (!ok)
        return crmm_set_error(CRMM_ERROR_STATE, "bench: dispatch: the null resource failed a call");
    return CRMM_OK;
}

static bench_overhead_row stats_row(const char *measurement, const char *name, const char *detail, const char *unit,
                                    unsigned samples, bench_stats s)
{
    return (bench_overhead_row){.measurement = measurement, .name = name, .detail = detail, .unit = unit,
                                .samples = samples, .outcome = BENCH_OUTCOME_OK, .median = s.median,
                                .min = s.min, .max = s.max, .target_met = -1};
}

void bench_overhead_report_dispatch(bench_report *rep, const bench_dispatch_times *t)
{
    char description[1024];
    snprintf(description, sizeof description,
             "dispatch: ns per allocate+deallocate pair of %u bytes on a null resource (allocate returns one fixed\n"
             "  block, deallocate does nothing), %llu pairs per run, median of %u run%s after 1 warm-up; the three\n"
             "  take turns in every run\n"
             "  direct   the null resource's functions called directly (real calls: not inlined)\n"
             "  abi      crmm_resource_allocate / crmm_resource_deallocate (libcrmm's checks, one indirect call)\n"
             "  adaptor  the same through one pass-through adaptor over it (ops that only call the upstream)",
             DISPATCH_BYTES, (unsigned long long)t->iterations, t->repeats, t->repeats == 1 ? "" : "s");
    bench_report_overhead_section(rep, description, "ns/pair");
    bench_overhead_row r = stats_row("dispatch", "direct", "null resource, direct C calls", "ns/pair", t->repeats,
                                     t->direct);
    bench_report_overhead_row(rep, &r);

    char target[64];
    snprintf(target, sizeof target, "added <= %.0f ns/pair (%.0f per call)", 2 * BENCH_TARGET_DISPATCH_NS_PER_CALL,
             BENCH_TARGET_DISPATCH_NS_PER_CALL);
    r = stats_row("dispatch", "abi", "null resource through crmm_resource_allocate/deallocate", "ns/pair",
                  t->repeats, t->abi);
    r.baseline = "direct";
    r.added = t->abi.median - t->direct.median;
    r.target = target;
    r.target_met = r.added <= 2 * BENCH_TARGET_DISPATCH_NS_PER_CALL;
    bench_report_overhead_row(rep, &r);

    r = stats_row("dispatch", "adaptor", "one pass-through adaptor over the null resource, through the ABI",
                  "ns/pair", t->repeats, t->adaptor);
    r.baseline = "abi";
    r.added = t->adaptor.median - t->abi.median;
    bench_report_overhead_row(rep, &r);
}

/* ---- config load ---------------------------------------------------------------------------- */

static bool write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/* What the opening child sends: this, then path_len bytes of path. */
typedef struct source_msg {
    int32_t status;
    uint32_t has_path, skipping;
    uint32_t path_len;
    char error[512];
} source_msg;

/* What a timed child sends. */
typedef struct load_msg {
    int32_t status;
    double cold_ns, warm_ns;
    char error[512];
} load_msg;

#define MAX_SOURCE_PATH (1u << 20)

/* Fork a child that runs fn(arg, fd) with the write end of a pipe and exits; returns the read
 * end in *fd and the child in *pid, or false (with errno) when pipe or fork failed. */
static bool start_child(void (*fn)(void *arg, int fd), void *arg, int *fd, pid_t *pid)
{
    int p[2];
    if (pipe(p) != 0)
        return false;
    pid_t child = fork();
    if (child < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        errno = e;
        return false;
    }
    if (child == 0) {
        close(p[0]);
        fn(arg, p[1]);
        _exit(0); /* no atexit handlers, no flushing of the parent's stdio buffers */
    }
    close(p[1]);
    *fd = p[0];
    *pid = child;
    return true;
}

/* Reap a child; false when it did not exit with 0. */
static bool finish_child(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return false;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void open_child(void *arg, int fd)
{
    const char *config = arg;
    bench_config *bc = NULL;
    source_msg m;
    memset(&m, 0, sizeof m);
    const char *path = NULL;
    bool skipping = false;
    m.status = bench_config_open(config, &bc);
    if (m.status == CRMM_OK) {
        bench_config_source(bc, &path, &skipping);
        m.has_path = path != NULL;
        m.skipping = skipping;
        m.path_len = path && strlen(path) < MAX_SOURCE_PATH ? (uint32_t)strlen(path) : 0;
    } else {
        snprintf(m.error, sizeof m.error, "%s", crmm_last_error());
    }
    bool ok = write_all(fd, &m, sizeof m) && write_all(fd, path ? path : "", m.path_len);
    close(fd);
    bench_config_close(bc);
    _exit(ok ? 0 : 1);
}

typedef struct load_source {
    char *path;                  /* NULL for the built-in default */
    bool skipping;
} load_source;

static void timed_child(void *arg, int fd)
{
    const load_source *src = arg;
    load_msg m;
    memset(&m, 0, sizeof m);
    crmm_config *first = NULL, *second = NULL;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    m.status = bench_config_load_source(src->path, src->skipping, &first);
    m.cold_ns = ns_since(&start);
    if (m.status == CRMM_OK) {
        clock_gettime(CLOCK_MONOTONIC, &start);
        m.status = bench_config_load_source(src->path, src->skipping, &second);
        m.warm_ns = ns_since(&start);
    }
    if (m.status != CRMM_OK)
        snprintf(m.error, sizeof m.error, "%s", crmm_last_error());
    crmm_config_free(first);
    crmm_config_free(second);
    bool ok = write_all(fd, &m, sizeof m);
    close(fd);
    _exit(ok ? 0 : 1);
}

/* Run the opening child: fills *src, or returns its error. */
static crmm_status find_source(const char *config, load_source *src)
{
    int fd;
    pid_t pid;
    memset(src, 0, sizeof *src);
    if (!start_child(open_child, (void *)config, &fd, &pid))
        return crmm_set_error(CRMM_ERROR_STATE, "bench: cannot start a child process: %s", strerror(errno));
    source_msg m;
    bool ok = read_all(fd, &m, sizeof m) && m.path_len < MAX_SOURCE_PATH;
    if (ok && m.status == CRMM_OK) {
        src->path = m.has_path ? calloc(1, (size_t)m.path_len + 1) : NULL;
        src->skipping = m.skipping != 0;
        ok = !m.has_path || (src->path && read_all(fd, src->path, m.path_len));
    }
    close(fd);
    ok &= finish_child(pid);
    if (ok && m.status != CRMM_OK) {
        m.error[sizeof m.error - 1] = '\0';
        return crmm_set_error((crmm_status)m.status, "%s", m.error);
    }
    if (!ok) {
        free(src->path);
        memset(src, 0, sizeof *src);
        return crmm_set_error(CRMM_ERROR_STATE, "bench: the child process that opens the config failed");
    }
    return CRMM_OK;
}

crmm_status bench_overhead_time_loads(const char *config, unsigned processes, bench_load_times *out)
{
    if (!out || processes == 0)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "bench: config load: %s",
                              !out ? "out is NULL" : "processes must be >= 1");
    memset(out, 0, sizeof *out);
    load_source src;
    crmm_status st = find_source(config, &src);
    if (st != CRMM_OK)
        return st;
    double *cold = calloc(processes, sizeof *cold), *warm = calloc(processes, sizeof *warm);
    if (!cold || !warm) {
        snprintf(out->error, sizeof out->error, "bench: config load: out of memory");
        out->outcome = BENCH_OUTCOME_ERROR;
    }
    for (unsigned k = 0; out->outcome == BENCH_OUTCOME_OK && k < processes; k++) {
        int fd;
        pid_t pid;
        if (!start_child(timed_child, &src, &fd, &pid)) {
            snprintf(out->error, sizeof out->error, "cannot start a child process: %s", strerror(errno));
            out->outcome = BENCH_OUTCOME_ERROR;
            break;
        }
        load_msg m;
        bool ok = read_all(fd, &m, sizeof m);
        close(fd);
        ok &= finish_child(pid);
        if (!ok || m.status != CRMM_OK) {
            m.error[sizeof m.error - 1] = '\0';
            snprintf(out->error, sizeof out->error, "%s",
                     ok ? m.error : "a child process that loads the config failed");
            out->outcome = BENCH_OUTCOME_ERROR;
            break;
        }
        cold[out->processes] = m.cold_ns / 1e6;
        warm[out->processes++] = m.warm_ns / 1e6;
    }
    if (out->outcome == BENCH_OUTCOME_OK) {
        out->cold = stats_of(cold, out->processes);
        out->warm = stats_of(warm, out->processes);
    }
    free(cold);
    free(warm);
    free(src.path);
    return CRMM_OK;
}

/* Number of different plugins among the config's resources. */
static size_t distinct_plugins(const bench_config *bc)
{
    size_t n = 0, count = bench_config_resource_count(bc);
    for (size_t i = 0; i < count; i++) {
        const char *p = bench_config_resource_plugin(bc, i);
        size_t j = 0;
        while (j < i && strcmp(bench_config_resource_plugin(bc, j), p) != 0)
            j++;
        n += j == i;
    }
    return n;
}

void bench_overhead_report_loads(bench_report *rep, const bench_load_times *t, const bench_config *bc)
{
    size_t nres = bench_config_resource_count(bc), nplugins = distinct_plugins(bc);
    size_t nskipped = bench_config_skipped_count(bc);
    const char *path;
    bool skipping;
    bench_config_source(bc, &path, &skipping);
    char what[256], description[1536];
    snprintf(what, sizeof what, "%s: %zu resource%s, %zu plugin%s%s", bench_config_origin(bc), nres,
             nres == 1 ? "" : "s", nplugins, nplugins == 1 ? "" : "s",
             nskipped ? " (the resources whose plugin does not load left out)" : "");
    snprintf(description, sizeof description,
             "config_load: ms to load %s\n"
             "  with %s: parse, dlopen and check every plugin, no CUDA call;\n"
             "  median of %u child processes forked before this one loaded any plugin\n"
             "  cold  the first load in the child (a fresh process)\n"
             "  warm  a second load in the same child (plugins already loaded)",
             what, !path ? "crmm_config_load_default"
                   : skipping ? "crmm_config_load_file_skipping (it leaves them out)" : "crmm_config_load_file",
             t->processes ? t->processes : 1);
    bench_report_overhead_section(rep, description, "ms");
    char target[32];
    snprintf(target, sizeof target, "<= %.0f ms", BENCH_TARGET_LOAD_MS);
    bench_overhead_row cold = stats_row("config_load", "cold", what, "ms", t->processes, t->cold);
    bench_overhead_row warm = stats_row("config_load", "warm", "the same load again in the same process", "ms",
                                        t->processes, t->warm);
    cold.target = target;
    if (t->outcome == BENCH_OUTCOME_OK) {
        cold.target_met = t->cold.median <= BENCH_TARGET_LOAD_MS;
    } else {
        cold.outcome = warm.outcome = t->outcome;
        cold.error = warm.error = t->error;
    }
    bench_report_overhead_row(rep, &cold);
    bench_report_overhead_row(rep, &warm);
}

/* ---- logging -------------------------------------------------------------------------------- */

void bench_overhead_logging_section(bench_report *rep, const bench_set *set)
{
    char max[32], description[1024];
    const bench_workload *w = &set->workload;
    snprintf(description, sizeof description,
             "logging: set %s (%llu steps, <= %u live, sizes 1 B .. %s, 1 thread) over each resource P, then over\n"
             "  the logging adaptor over a fresh P (auto_flush=false: buffered; its file in a new temporary\n"
             "  directory, deleted afterwards); ns/op = wall time / ops, median of %u run%s after 1 warm-up",
             set->label, (unsigned long long)w->steps, w->max_live, crmm_format_size(w->max_size, max, sizeof max),
             set->repeats, set->repeats == 1 ? "" : "s");
    bench_report_overhead_section(rep, description, "ns/op");
}

/* One measurement of the set on mr, as bench_cli measures every resource. */
static void run_set(crmm_resource *mr, int device, const bench_set *set, const bench_sequence *seq, bench_result *res)
{
    bench_run_options opt = {.repeats = set->repeats, .device = device};
    if (bench_run(mr, seq, 1, &opt, res) != CRMM_OK) { /* the bench's own failure, not the resource's */
        res->outcome = BENCH_OUTCOME_ERROR;
        snprintf(res->error, sizeof res->error, "%s", crmm_last_error());
    }
}

static void fail(bench_result *res, crmm_status st)
{
    res->outcome = st == CRMM_ERROR_OUT_OF_MEMORY ? BENCH_OUTCOME_OOM : BENCH_OUTCOME_ERROR;
    snprintf(res->error, sizeof res->error, "%s", crmm_last_error());
}

/* A new directory for the log: under $TMPDIR unless its name would not survive the
 * "key=value key=value" parameter list (blanks, commas), else under /tmp. */
static bool make_log_dir(char *dir, size_t size)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp || strpbrk(tmp, " \t\n,"))
        tmp = "/tmp";
    if (snprintf(dir, size, "%s/crmm-bench-XXXXXX", tmp) >= (int)size)
        return false;
    return mkdtemp(dir) != NULL;
}

/* The logging layer's parameters for a file in `dir` ('%' doubled: the plugin expands it). */
static void logging_params(const char *dir, char *params, size_t size)
{
    size_t n = (size_t)snprintf(params, size, "file=");
    for (const char *c = dir; *c && n + 2 < size; c++) {
        if (*c == '%')
            params[n++] = '%';
        params[n++] = *c;
    }
    params[n] = '\0';
    snprintf(params + n, size - n, "/logging.csv auto_flush=false");
}

static void run_logged(const bench_config *bc, const char *name, int device, const bench_set *set,
                       const bench_sequence *seq, bench_result *res)
{
    memset(res, 0, sizeof *res);
    char dir[PATH_MAX], params[2 * PATH_MAX + 64], file[PATH_MAX] = "";
    if (!make_log_dir(dir, sizeof dir)) {
        res->outcome = BENCH_OUTCOME_ERROR;
        snprintf(res->error, sizeof res->error, "cannot create a temporary directory for the log: %s", strerror(errno));
        return;
    }
    logging_params(dir, params, sizeof params);
    crmm_resource *upstream = NULL, *logged = NULL;
    crmm_status st = bench_config_create(bc, name, device, &upstream);
    if (st == CRMM_OK) {
        st = crmm_resource_create("logging", params, upstream, &logged);
        crmm_resource_release(upstream); /* the logging layer holds its own reference */
    }
    if (st == CRMM_OK) {
        const char *f = crmm_logging_file(logged);
        snprintf(file, sizeof file, "%s", f ? f : "");
        run_set(logged, device, set, seq, res);
        crmm_resource_release(logged); /* flushes and closes the file */
    } else {
        fail(res, st);
    }
    if (file[0])
        unlink(file);
    rmdir(dir);
}

bool bench_overhead_logging(bench_report *rep, const bench_config *bc, const char *name, const char *plugin,
                            int device, const bench_set *set, const bench_sequence *seq)
{
    bench_result plain, logged;
    memset(&plain, 0, sizeof plain);
    crmm_resource *mr = NULL;
    crmm_status st = bench_config_create(bc, name, device, &mr);
    if (st == CRMM_OK) {
        run_set(mr, device, set, seq, &plain);
        crmm_resource_release(mr);
    } else {
        fail(&plain, st);
    }
    run_logged(bc, name, device, set, seq, &logged);

    char detail[160], logged_name[96], logged_detail[192], target[32];
    snprintf(detail, sizeof detail, "set %s over %s (plugin %s)", set->label, name, plugin);
    snprintf(logged_name, sizeof logged_name, "logging(%s)", name);
    snprintf(logged_detail, sizeof logged_detail, "set %s over logging (buffered) over %s (plugin %s)", set->label,
             name, plugin);
    snprintf(target, sizeof target, "added <= %.0f ns/op", BENCH_TARGET_LOGGING_NS_PER_OP);
    bench_overhead_row r = {.measurement = "logging", .name = name, .detail = detail, .unit = "ns/op",
                            .samples = plain.runs, .outcome = plain.outcome, .error = plain.error,
                            .median = plain.ns_per_op_median, .min = plain.ns_per_op_min,
                            .max = plain.ns_per_op_max, .target_met = -1};
    bench_report_overhead_row(rep, &r);
    bool both = plain.outcome == BENCH_OUTCOME_OK && logged.outcome == BENCH_OUTCOME_OK;
    r = (bench_overhead_row){.measurement = "logging", .name = logged_name, .detail = logged_detail, .unit = "ns/op",
                             .samples = logged.runs, .outcome = logged.outcome, .error = logged.error,
                             .median = logged.ns_per_op_median, .min = logged.ns_per_op_min,
                             .max = logged.ns_per_op_max, .baseline = both ? name : NULL,
                             .added = logged.ns_per_op_median - plain.ns_per_op_median, .target = target,
                             .target_met = both ? logged.ns_per_op_median - plain.ns_per_op_median
                                                      <= BENCH_TARGET_LOGGING_NS_PER_OP : -1};
    bench_report_overhead_row(rep, &r);
    return plain.outcome != BENCH_OUTCOME_ERROR && logged.outcome != BENCH_OUTCOME_ERROR;
}
