/* bench_cli.c — `crmm bench`: parse the options, decide what runs where, run, report.
 *
 * The plan is a list of sets (A–D, or the random_allocations max-size sweep) and a list of
 * targets (the config's resources, then the raw CUDA references). Targets that cannot run — a
 * plugin that does not load, a GPU chain or a reference without a CUDA device — are reported as
 * skipped before anything is measured. Then for each set the sequences are built once, and each
 * target gets a fresh resource, one measurement (bench_run), and one row.
 *
 * --overhead (bench_overhead.c) times the config load in child processes first, while this
 * process has loaded no plugin, then plans its targets the same way (the config's pool, arena
 * and host resources by default) and reports dispatch, config load and logging. */
#include "build_config.h"
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include <crmm/crmm.h>
#include "bench_cli.h"
#include "bench_copy.h"
#include "bench_config.h"
#include "bench_overhead.h"
#include "bench_reference.h"
#include "bench_report.h"
#include "bench_runner.h"
#include "bench_workload.h"
#include "long_option.h"

#define MAX_THREADS 256u
#define MAX_REPEATS 1000u
#define DEFAULT_REPEATS 5u
#define DEFAULT_ALLOCATIONS 1000u
#define MAX_SWEEP 16


/* RMM random_allocations' max-size sweep: 1, 4, 64, 256, 1024, 4096 MiB. */
static const uint64_t random_sweep[] = {1ull << 20, 4ull << 20, 64ull << 20, 256ull << 20, 1024ull << 20, 4096ull << 20};

typedef struct options {
    bool help;               /* -h, --help */
    bool copy;               /* --copy: the copy benchmark (bench_copy.c) takes over */
    const char *config;
    bench_mode mode;
    bool set_wanted[BENCH_NAMED_SETS];
    bool any_set;
    uint64_t steps;          /* 0: the set's own */
    uint32_t live;           /* 0: the set's own */
    uint64_t max_size[MAX_SWEEP];
    size_t nmax_size;        /* 0: the set's own / RMM's sweep */
    unsigned threads;        /* 0: the set's own (random mode: 1) */
    unsigned repeats;
    uint64_t allocations;    /* random mode */
    bool allocations_given;
    const char **resources;  /* --resource NAMEs (argv strings) */
    size_t nresources;
    bench_format format;
    bool no_references;
    bool overhead;           /* --overhead */
    uint64_t iterations;     /* --overhead: dispatch pairs per run */
    unsigned loads;          /* --overhead: child processes that load the config */
} options;

/* A thing to measure: a config resource or a raw CUDA reference. */
typedef struct target {
    const char *name;
    const char *plugin;
    bool host;               /* runs without a GPU, on the NULL stream */
    bool reference;
    bench_reference_kind kind;
} target;

void bench_cli_usage(FILE *f)
{
    fprintf(f,
        "usage: crmm bench [--config FILE] [--set A,B,C,D] [--resource NAME]... [options]\n"
        "       crmm bench --mode random [--allocations N] [--max-size SIZE[,SIZE...]] [options]\n"
        "       crmm bench --overhead [--iterations N] [--loads N] [--steps N] [options]\n"
        "       crmm bench --copy ...   (copy bandwidth; see 'crmm bench --copy --help')\n"
        "\n"
        "Times allocate/free through every resource of a config, beside raw cudaMalloc/cudaFree,\n"
        "raw cudaMallocAsync/cudaFreeAsync (the device's default memory pool, release threshold\n"
        "UINT64_MAX) and raw cudaMallocFromPoolAsync/cudaFreeAsync (a pool of its own, made as RMM's\n"
        "cuda_async_memory_resource makes one), all through the same workload and timing loop.\n"
        "\n"
        "Workload (--mode sets, the default): per thread a xorshift64 sequence seeded with 42 + the\n"
        "thread's index; each step allocates a size uniform in [1, max size] when nothing is live, or\n"
        "when fewer than the live limit are live and a fair coin says so; otherwise it frees a live\n"
        "block chosen uniformly; what is left is freed at the end. The sequence is computed before\n"
        "timing. Each thread uses its own non-blocking CUDA stream (host memory: the NULL stream and\n"
        "no CUDA call). Sets:\n"
        "  A  100000 steps, <= 1000 live, sizes up to 4 MiB, 1 thread\n"
        "  B  100000 steps, <= 100 live, sizes up to 1 KiB, 1 thread\n"
        "  C  A on 4 threads          D  B on 8 threads\n"
        "--mode random: RMM's random_allocations benchmark: N allocations over 2N steps; a step\n"
        "allocates when nothing is live, else with probability 73%% while fewer than N were allocated\n"
        "and the live bytes stay below 16000 MiB, else frees a random live block; swept over max sizes\n"
        "1, 4, 64, 256, 1024 and 4096 MiB as RMM does. (RMM turns a failed allocation into a free;\n"
        "here the sequence is fixed in advance, so a resource that runs out reports OOM.)\n"
        "\n"
        "Measurement: one warm-up run, then R timed runs on a fresh instance of each resource; the\n"
        "wall clock covers the whole sequence plus a final stream synchronize; threads start together\n"
        "and a run lasts from the first thread's start to the last thread's end. Reported:\n"
        "  ns/op          median (and min, max) over the R runs of wall time / operations per thread\n"
        "                 (every allocate and every free counts, the final frees too; with one thread\n"
        "                 simply wall time / operations) -- what one thread experiences\n"
        "  ops/s          aggregate operations per second of all threads (median run)\n"
        "  reserved/live  peak bytes the resource reserved (CRMM_QUERY_BYTES_RESERVED_PEAK; '-' when\n"
        "                 it cannot tell) / peak live requested bytes of the workload (for several\n"
        "                 threads, the sum of each thread's peak)\n"
        "A resource that runs out of memory shows OOM in its row; the run goes on.\n"
        "\n"
        "--overhead: what crmm adds around an allocator (the other targets crmm sets itself):\n"
        "  dispatch     ns per allocate+deallocate pair on a null resource (allocate returns one fixed\n"
        "               block, deallocate does nothing), N pairs per run, median of R runs: its functions\n"
        "               called directly (direct), through crmm_resource_allocate/deallocate (abi), and\n"
        "               through one pass-through adaptor (adaptor); 'added' is the difference (target:\n"
        "               abi adds <= 2 ns per call, 4 ns per pair)\n"
        "  config_load  ms to load the config (parse, dlopen and check every plugin; no CUDA call) in\n"
        "               fresh child processes: the first load (cold; target <= 5 ms) and a second one\n"
        "               in the same process (warm); median, min, max over the processes\n"
        "  logging      set A over each pool, arena and host resource of the config (or the --resource\n"
        "               ones), then over the logging adaptor over it (auto_flush=false, file in a new\n"
        "               temporary directory, deleted afterwards); target: adds <= 150 ns/op\n"
        "  All three run without a GPU (logging then over the host-memory resources only).\n"
        "\n"
        "options:\n"
        "  --config FILE        the config to measure (default: $CRMM_CONFIG, else the installed\n"
        "                       crmm.ini, else the built-in default, as crmm_init(NULL)); resources\n"
        "                       whose plugin does not load are skipped with the reason\n"
        "  --resource NAME      measure only this resource of the config (repeatable); naming a\n"
        "                       raw reference (cudaMalloc, cudaMallocAsync, cudaMallocFromPoolAsync)\n"
        "                       that the config does not define keeps only the references named\n"
        "  --no-references      leave out the raw CUDA references\n"
        "  --set LIST           sets to run, comma-separated, from A,B,C,D (default: all; repeatable)\n"
        "  --steps N            steps per thread, replacing the sets' own (1..%llu)\n"
        "  --live N             most blocks live at once per thread, replacing the sets' own\n"
        "  --max-size SIZE      largest allocation, e.g. 4096, 64KiB, 4MiB, replacing the sets' own;\n"
        "                       with --mode random a comma-separated list replaces the sweep\n"
        "  --threads N          threads, replacing the sets' own (1..%u; --mode random: default 1)\n"
        "  --repeats R          timed runs after the warm-up (default %u, 1..%u)\n"
        "  --mode sets|random   the workload (default: sets)\n"
        "  --allocations N      --mode random: number of allocations (default %u)\n"
        "  --csv                one CSV line per result (skipped resources are reported on stderr)\n"
        "  --json               one JSON object with every result and what was skipped\n"
        "  --overhead           measure dispatch, config load and logging instead of the sets; takes\n"
        "                       --config, --resource, --steps (of set A), --repeats, --csv, --json and:\n"
        "  --iterations N       --overhead: dispatch pairs per run (default %llu, 1..%llu)\n"
        "  --loads N            --overhead: child processes that load the config (default %u, 1..%u)\n"
        "  --copy               run the copy benchmark instead (see crmm bench --copy --help)\n"
        "  -h, --help           this text\n"
        "Options take their value as the next argument or after '='. A progress line is shown on\n"
        "stderr while it runs when stderr is a terminal.\n"
        "\n"
        "Without a CUDA device only the host-memory resources run; the output says that GPU resources\n"
        "and the raw CUDA references were skipped, and why.\n"
        "Exit status: 0 when every measurement ran (OOM rows included), 1 when one failed otherwise or\n"
        "the config could not be loaded, 2 for bad arguments.\n",
        (unsigned long long)BENCH_MAX_STEPS, MAX_THREADS, DEFAULT_REPEATS, MAX_REPEATS, DEFAULT_ALLOCATIONS,
        (unsigned long long)BENCH_OVERHEAD_ITERATIONS, (unsigned long long)BENCH_OVERHEAD_MAX_ITERATIONS,
        BENCH_OVERHEAD_LOADS, BENCH_OVERHEAD_MAX_LOADS);
}

/* ---- arguments ------------------------------------------------------------------------------ */

static int usage_error(FILE *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(FILE *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("crmm bench: ", err);
    vfprintf(err, fmt, ap);
    fputs(" (see 'crmm bench --help')\n", err);
    va_end(ap);
    return 2;
}

static bool parse_count(const char *text, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!text || *text < '0' || *text > '9') /* strtoull would take a sign or spaces before it */
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool parse_sizes(const char *text, options *o, FILE *err)
{
    char *copy = strdup(text), *save = NULL;
    bool ok = copy != NULL;
    o->nmax_size = 0;
    for (char *s = ok ? strtok_r(copy, ",", &save) : NULL; ok && s; s = strtok_r(NULL, ",", &save)) {
        uint64_t v;
        if (o->nmax_size == MAX_SWEEP || crmm_parse_size(s, 0, &v, NULL) != CRMM_OK || v == 0 || v > SIZE_MAX) {
            fprintf(err, "crmm bench: --max-size: '%s' is not a size of at least 1 byte (e.g. 1024, 64KiB, 4MiB)%s\n",
                    s, o->nmax_size == MAX_SWEEP ? " or the list is too long" : "");
            ok = false;
        } else {
            o->max_size[o->nmax_size++] = v;
        }
    }
    if (ok && !o->nmax_size)
        fprintf(err, "crmm bench: --max-size: no size given (e.g. 1024, 64KiB, 4MiB)\n");
    crmm_clear_error();
    free(copy);
    return ok && o->nmax_size > 0;
}

static bool parse_set_list(const char *text, options *o, FILE *err)
{
    char *copy = strdup(text), *save = NULL;
    bool ok = copy != NULL, any = false;
    for (char *s = ok ? strtok_r(copy, ",", &save) : NULL; ok && s; s = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < BENCH_NAMED_SETS && strcasecmp(s, bench_named_sets[i].name) != 0)
            i++;
        if (i == BENCH_NAMED_SETS) {
            fprintf(err, "crmm bench: --set: unknown set '%s' (sets: A, B, C, D)\n", s);
            ok = false;
        } else {
            o->set_wanted[i] = o->any_set = any = true;
        }
    }
    if (ok && !any)
        fprintf(err, "crmm bench: --set: no set named (sets: A, B, C, D)\n");
    free(copy);
    return ok && any;
}

static int parse_args(int argc, char **argv, options *o, FILE *err)
{
    bool steps_given = false, live_given = false, mode_given = false, iterations_given = false, loads_given = false;
    for (int i = 1; i < argc; i++) {
        char name[64];
        const char *arg = argv[i], *value = NULL;
        const char *eq = long_option_equals(arg);
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - arg) : (int)strlen(arg), arg);
        bool flag = strcmp(name, "--csv") == 0 || strcmp(name, "--json") == 0 || strcmp(name, "--no-references") == 0 ||
                    strcmp(name, "--overhead") == 0 || strcmp(name, "--copy") == 0 || strcmp(name, "-h") == 0 ||
                    strcmp(name, "--help") == 0;
        static const char *const with_value[] = {"--config", "--set", "--steps", "--live", "--max-size", "--threads",
                                                 "--repeats", "--mode", "--allocations", "--resource",
                                                 "--iterations", "--loads"};
        bool takes_value = false;
        for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
            takes_value |= strcmp(name, with_value[k]) == 0;
        if (!flag && !takes_value)
            return usage_error(err, "unknown option '%s'", arg);
        if (flag && eq)
            return usage_error(err, "%s takes no value", name);
        if (takes_value) {
            value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!value || !*value)
                return usage_error(err, "%s needs a value", name);
        }
        uint64_t v;
        if (strcmp(name, "--csv") == 0 || strcmp(name, "--json") == 0) {
            bench_format f = strcmp(name, "--csv") == 0 ? BENCH_FORMAT_CSV : BENCH_FORMAT_JSON;
            if (o->format != BENCH_FORMAT_TABLE && o->format != f)
                return usage_error(err, "--csv and --json exclude each other");
            o->format = f;
        } else if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0) {
            o->help = true;
        } else if (strcmp(name, "--copy") == 0) {
            o->copy = true;
        } else if (strcmp(name, "--no-references") == 0) {
            o->no_references = true;
        } else if (strcmp(name, "--overhead") == 0) {
            o->overhead = true;
        } else if (strcmp(name, "--iterations") == 0) {
            if (!parse_count(value, 1, BENCH_OVERHEAD_MAX_ITERATIONS, &v))
                return usage_error(err, "--iterations: '%s' is not a number from 1 to %llu", value,
                                   (unsigned long long)BENCH_OVERHEAD_MAX_ITERATIONS);
            o->iterations = v;
            iterations_given = true;
        } else if (strcmp(name, "--loads") == 0) {
            if (!parse_count(value, 1, BENCH_OVERHEAD_MAX_LOADS, &v))
                return usage_error(err, "--loads: '%s' is not a number of processes from 1 to %u", value,
                                   BENCH_OVERHEAD_MAX_LOADS);
            o->loads = (unsigned)v;
            loads_given = true;
        } else if (strcmp(name, "--config") == 0) {
            o->config = value;
        } else if (strcmp(name, "--set") == 0) {
            if (!parse_set_list(value, o, err))
                return 2;
        } else if (strcmp(name, "--steps") == 0) {
            if (!parse_count(value, 1, BENCH_MAX_STEPS, &v))
                return usage_error(err, "--steps: '%s' is not a number of steps from 1 to %llu", value, (unsigned long long)BENCH_MAX_STEPS);
            o->steps = v;
            steps_given = true;
        } else if (strcmp(name, "--live") == 0) {
            if (!parse_count(value, 1, BENCH_MAX_LIVE, &v))
                return usage_error(err, "--live: '%s' is not a number of blocks from 1 to %u", value, BENCH_MAX_LIVE);
            o->live = (uint32_t)v;
            live_given = true;
        } else if (strcmp(name, "--max-size") == 0) {
            if (!parse_sizes(value, o, err))
                return 2;
        } else if (strcmp(name, "--threads") == 0) {
            if (!parse_count(value, 1, MAX_THREADS, &v))
                return usage_error(err, "--threads: '%s' is not a number of threads from 1 to %u", value, MAX_THREADS);
            o->threads = (unsigned)v;
        } else if (strcmp(name, "--repeats") == 0) {
            if (!parse_count(value, 1, MAX_REPEATS, &v))
                return usage_error(err, "--repeats: '%s' is not a number of runs from 1 to %u", value, MAX_REPEATS);
            o->repeats = (unsigned)v;
        } else if (strcmp(name, "--allocations") == 0) {
            if (!parse_count(value, 1, BENCH_MAX_LIVE, &v))
                return usage_error(err, "--allocations: '%s' is not a number from 1 to %u", value, BENCH_MAX_LIVE);
            o->allocations = v;
            o->allocations_given = true;
        } else if (strcmp(name, "--mode") == 0) {
            mode_given = true;
            if (strcmp(value, "sets") == 0)
                o->mode = BENCH_MODE_STEPS;
            else if (strcmp(value, "random") == 0)
                o->mode = BENCH_MODE_RANDOM;
            else
                return usage_error(err, "--mode: '%s' is not a mode (sets, random)", value);
        } else if (strcmp(name, "--resource") == 0) {
            const char **n = realloc(o->resources, (o->nresources + 1) * sizeof *n);
            if (!n)
                return usage_error(err, "out of memory");
            o->resources = n;
            o->resources[o->nresources++] = value;
        }
    }
    if (o->help || o->copy)
        return 0; /* the copy benchmark checks its own arguments */
    if (o->overhead) {
        const char *other = mode_given ? "--mode" : o->any_set ? "--set" : live_given ? "--live"
                          : o->nmax_size ? "--max-size" : o->threads ? "--threads"
                          : o->allocations_given ? "--allocations" : o->no_references ? "--no-references" : NULL;
        if (other)
            return usage_error(err, "%s does not apply to --overhead (it takes --config, --resource, --steps, --repeats, "
                               "--iterations, --loads, --csv, --json)", other);
        return 0;
    }
    if (iterations_given || loads_given)
        return usage_error(err, "%s applies to --overhead", iterations_given ? "--iterations" : "--loads");
    if (o->mode == BENCH_MODE_RANDOM) {
        if (o->any_set || steps_given || live_given)
            return usage_error(err, "%s applies to --mode sets; --mode random takes --allocations and --max-size",
                               o->any_set ? "--set" : steps_given ? "--steps" : "--live");
    } else {
        if (o->allocations_given)
            return usage_error(err, "--allocations applies to --mode random");
        if (o->nmax_size > 1)
            return usage_error(err, "--max-size takes one size with --mode sets (a list with --mode random)");
    }
    return 0;
}

/* ---- the plan ------------------------------------------------------------------------------- */

static size_t build_sets(const options *o, bench_set *sets)
{
    size_t n = 0;
    if (o->mode == BENCH_MODE_RANDOM) {
        const uint64_t *sizes = o->nmax_size ? o->max_size : random_sweep;
        size_t count = o->nmax_size ? o->nmax_size : sizeof random_sweep / sizeof random_sweep[0];
        for (size_t i = 0; i < count; i++, n++) {
            bench_set *s = &sets[n];
            memset(s, 0, sizeof *s);
            uint64_t m = sizes[i];
            if (m % (1ull << 30) == 0)
                snprintf(s->label, sizeof s->label, "rand/%lluGiB", (unsigned long long)(m >> 30));
            else if (m % (1ull << 20) == 0)
                snprintf(s->label, sizeof s->label, "rand/%lluMiB", (unsigned long long)(m >> 20));
            else if (m % 1024 == 0)
                snprintf(s->label, sizeof s->label, "rand/%lluKiB", (unsigned long long)(m >> 10));
            else
                snprintf(s->label, sizeof s->label, "rand/%lluB", (unsigned long long)m);
            s->workload = (bench_workload){.mode = BENCH_MODE_RANDOM, .allocations = o->allocations,
                                           .max_usage = BENCH_RANDOM_MAX_USAGE, .max_size = m};
            s->threads = o->threads ? o->threads : 1;
            s->repeats = o->repeats;
        }
        return n;
    }
    for (size_t i = 0; i < BENCH_NAMED_SETS; i++) {
        if (o->any_set && !o->set_wanted[i])
            continue;
        bench_set *s = &sets[n++];
        memset(s, 0, sizeof *s);
        snprintf(s->label, sizeof s->label, "%s", bench_named_sets[i].name);
        s->workload = (bench_workload){.mode = BENCH_MODE_STEPS,
                                       .steps = o->steps ? o->steps : bench_named_sets[i].steps,
                                       .max_live = o->live ? o->live : bench_named_sets[i].max_live,
                                       .max_size = o->nmax_size ? o->max_size[0] : bench_named_sets[i].max_size};
        s->threads = o->threads ? o->threads : bench_named_sets[i].threads;
        s->repeats = o->repeats;
    }
    return n;
}

/* Growable list of skipped targets (name, reason: borrowed strings), for the report's header. */
typedef struct skip_list {
    const char **names;
    const char **reasons;
    size_t n;
} skip_list;

static void skip_add(skip_list *l, const char *name, const char *reason)
{
    const char **nn = realloc(l->names, (l->n + 1) * sizeof *nn);
    if (nn)
        l->names = nn;
    const char **rr = nn ? realloc(l->reasons, (l->n + 1) * sizeof *rr) : NULL;
    if (!rr)
        return; /* out of memory: the note is lost, nothing else */
    l->reasons = rr;
    l->names[l->n] = name;
    l->reasons[l->n++] = reason;
}

static void skip_list_free(skip_list *l)
{
    free(l->names);
    free(l->reasons);
}

static bool resource_selected(const options *o, const char *name)
{
    if (o->nresources == 0)
        return true;
    for (size_t i = 0; i < o->nresources; i++)
        if (strcmp(o->resources[i], name) == 0)
            return true;
    return false;
}

/* Whether `name` is a resource of the config, loaded or skipped. */
static bool in_config(const bench_config *bc, const char *name)
{
    bool found = bench_config_find(bc, name) >= 0;
    for (size_t k = 0; !found && k < bench_config_skipped_count(bc); k++)
        found = strcmp(bench_config_skipped_name(bc, k), name) == 0;
    return found;
}

/* Whether some --resource names a raw reference that the config does not define: then only the
 * references named run (as in crmm replay). */
static bool references_named(const options *o, const bench_config *bc)
{
    for (size_t i = 0; i < o->nresources; i++)
        for (int k = 0; k < BENCH_REFERENCE_COUNT; k++)
            if (strcmp(o->resources[i], bench_reference_name((bench_reference_kind)k)) == 0 &&
                !in_config(bc, o->resources[i]))
                return true;
    return false;
}

/* Check every --resource NAME exists in the config (loaded or skipped) or names a reference. */
static int check_resource_names(const options *o, const bench_config *bc, FILE *err)
{
    for (size_t i = 0; i < o->nresources; i++) {
        const char *want = o->resources[i];
        bool found = in_config(bc, want), reference = false;
        for (int k = 0; !found && k < BENCH_REFERENCE_COUNT; k++)
            found = reference = strcmp(bench_reference_name((bench_reference_kind)k), want) == 0;
        if (reference && (o->overhead || o->no_references)) {
            fprintf(err, "crmm bench: --resource %s: a raw CUDA reference, which %s\n", want,
                    o->overhead ? "--overhead does not measure" : "--no-references leaves out");
            return 2;
        }
        if (found)
            continue;
        fprintf(err, "crmm bench: --resource %s: no [resource.%s] in %s (resources:", want, want, bench_config_origin(bc));
        for (size_t k = 0; k < bench_config_resource_count(bc); k++)
            fprintf(err, " %s", bench_config_resource_name(bc, k));
        for (size_t k = 0; k < bench_config_skipped_count(bc); k++)
            fprintf(err, " %s", bench_config_skipped_name(bc, k));
        fprintf(err, ")\n");
        return 2;
    }
    return 0;
}

/* ---- progress ------------------------------------------------------------------------------- */

typedef struct progress {
    FILE *err;
    bool on;
    size_t done, total;      /* measurements */
    const char *set, *target;
} progress;

static void progress_show(void *arg, unsigned run, unsigned repeats)
{
    progress *p = arg;
    if (!p->on)
        return;
    char what[32];
    if (run == 0)
        snprintf(what, sizeof what, "warm-up");
    else
        snprintf(what, sizeof what, "run %u/%u", run, repeats);
    fprintf(p->err, "\r\033[K[%zu/%zu] set %s, %s: %s", p->done + 1, p->total, p->set, p->target, what);
    fflush(p->err);
}

static void progress_clear(progress *p)
{
    if (p->on) {
        fputs("\r\033[K", p->err);
        fflush(p->err);
    }
}

/* ---- running -------------------------------------------------------------------------------- */

/* One measurement of `set` (sequences `seqs`) on target `t`. */
static void measure(const bench_config *bc, const target *t, int device, const bench_set *set,
                    const bench_sequence *seqs, progress *prog, bench_result *res)
{
    memset(res, 0, sizeof *res);
    crmm_resource *mr = NULL;
    crmm_status st = t->reference ? bench_reference_create(t->kind, device, &mr)
                                  : bench_config_create(bc, t->name, t->host ? -1 : device, &mr);
    if (st == CRMM_OK) {
        bench_run_options opt = {.repeats = set->repeats, .device = t->host ? -1 : device,
                                 .progress = progress_show, .progress_arg = prog};
        st = bench_run(mr, seqs, set->threads, &opt, res);
        if (st != CRMM_OK) { /* the bench's own failure: an error, whatever its status */
            res->outcome = BENCH_OUTCOME_ERROR;
            snprintf(res->error, sizeof res->error, "%s", crmm_last_error());
        }
        crmm_resource_release(mr);
        return;
    }
    /* the resource could not be made */
    res->outcome = st == CRMM_ERROR_OUT_OF_MEMORY ? BENCH_OUTCOME_OOM : BENCH_OUTCOME_ERROR;
    snprintf(res->error, sizeof res->error, "%s", crmm_last_error());
}

/* The device line for the report; CUDA is already known to work. */
static void describe_device(int device, char *buf, size_t size)
{
    struct cudaDeviceProp prop;
    uint64_t free_b = 0, total_b = 0;
    char total[32];
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess)
        snprintf(prop.name, sizeof prop.name, "unknown");
    crmm_cuda_device_memory(device, &free_b, &total_b);
    snprintf(buf, size, "device %d: %s, %s", device, prop.name, crmm_format_size(total_b, total, sizeof total));
}

/* What runs where: the targets that can run here, in order, and what is skipped and why. */
typedef struct plan {
    target *targets;
    size_t ntargets;
    skip_list skips;
    int device;              /* the CUDA device GPU targets run on; -1 when none is wanted or found */
    char no_gpu[1024];       /* why there is no device, when one was wanted */
    char device_line[512];
} plan;

/* The plugins --overhead runs its logging measurement over when no --resource is given: the
 * allocators fast enough for a 150 ns/op difference to show. */
static bool overhead_plugin(const char *plugin)
{
    return strcmp(plugin, "pool") == 0 || strcmp(plugin, "arena") == 0 || strcmp(plugin, "host") == 0;
}

static bool resource_wanted(const options *o, const bench_config *bc, size_t i)
{
    if (!resource_selected(o, bench_config_resource_name(bc, i)))
        return false;
    return !o->overhead || o->nresources > 0 || overhead_plugin(bench_config_resource_plugin(bc, i));
}

static void plan_free(plan *p)
{
    skip_list_free(&p->skips);
    free(p->targets);
}

/* Targets: the wanted config resources in file order, then the references (not for --overhead);
 * probe for a GPU when one of them needs it (the run's first CUDA call); keep what can run. */
static bool plan_make(const options *o, const bench_config *bc, plan *p)
{
    memset(p, 0, sizeof *p);
    p->device = -1;
    size_t ncfg = bench_config_resource_count(bc);
    p->targets = calloc(ncfg + BENCH_REFERENCE_COUNT, sizeof *p->targets);
    if (!p->targets)
        return false;
    size_t n = 0;
    bool want_gpu = false;
    for (size_t i = 0; i < ncfg; i++) {
        if (!resource_wanted(o, bc, i))
            continue;
        p->targets[n++] = (target){.name = bench_config_resource_name(bc, i),
                                   .plugin = bench_config_resource_plugin(bc, i),
                                   .host = bench_config_resource_is_host(bc, i)};
        want_gpu |= !p->targets[n - 1].host;
    }
    bool named = references_named(o, bc);
    for (int k = 0; k < BENCH_REFERENCE_COUNT && !o->no_references && !o->overhead; k++) {
        const char *name = bench_reference_name((bench_reference_kind)k);
        if (in_config(bc, name) || (named && !resource_selected(o, name)))
            continue; /* a config resource of that name is what the name means */
        p->targets[n++] = (target){.name = bench_reference_name((bench_reference_kind)k), .plugin = "raw CUDA",
                                   .reference = true, .kind = (bench_reference_kind)k};
        want_gpu = true;
    }
    for (size_t k = 0; k < bench_config_skipped_count(bc); k++)
        if (resource_selected(o, bench_config_skipped_name(bc, k)))
            skip_add(&p->skips, bench_config_skipped_name(bc, k), bench_config_skipped_reason(bc, k));

    /* A GPU? crmm_cuda_device_count is the first CUDA call. */
    if (want_gpu) {
        int count = 0;
        if (crmm_cuda_device_count(&count) != CRMM_OK || crmm_cuda_current_device(&p->device) != CRMM_OK) {
            snprintf(p->no_gpu, sizeof p->no_gpu, "%s", crmm_last_error());
            p->device = -1;
        } else {
            describe_device(p->device, p->device_line, sizeof p->device_line);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (p->targets[i].host || p->device >= 0)
            p->targets[p->ntargets++] = p->targets[i];
        else
            skip_add(&p->skips, p->targets[i].name,
                     p->targets[i].reference ? "raw CUDA reference: needs a CUDA device" : "GPU resource: needs a CUDA device");
    }
    return true;
}

/* plan_make, then begin the report; NULL with a message when either fails (plan_free the plan
 * in every case). */
static bench_report *plan_begin(const options *o, const bench_config *bc, plan *p, FILE *out, FILE *err)
{
    if (!plan_make(o, bc, p)) {
        fprintf(err, "crmm bench: out of memory\n");
        return NULL;
    }
    bench_report_meta meta = {.config = bench_config_origin(bc), .device = p->device >= 0 ? p->device_line : NULL,
                              .no_gpu_reason = p->no_gpu[0] ? p->no_gpu : NULL, .overhead = o->overhead,
                              .nskipped = p->skips.n, .skipped_names = p->skips.names,
                              .skipped_reasons = p->skips.reasons};
    return bench_report_begin(o->format, out, err, &meta);
}

/* Build the sequences of `set` (one per thread) into seqs[set->threads]; false with a message. */
static bool make_sequences(bench_set *set, bench_sequence *seqs, FILE *err)
{
    crmm_status st = CRMM_OK;
    for (unsigned t = 0; st == CRMM_OK && t < set->threads; t++) {
        st = bench_sequence_make(&set->workload, t, &seqs[t]);
        set->peak_live_bytes += seqs[t].peak_live_bytes;
        set->total_ops += seqs[t].count;
    }
    if (st != CRMM_OK)
        fprintf(err, "crmm bench: set %s: %s\n", set->label, crmm_last_error());
    return st == CRMM_OK;
}

static int run_sets(const options *o, bench_config *bc, FILE *out, FILE *err)
{
    bench_set sets[MAX_SWEEP > BENCH_NAMED_SETS ? MAX_SWEEP : BENCH_NAMED_SETS];
    size_t nsets = build_sets(o, sets);
    plan p;
    bench_report *rep = plan_begin(o, bc, &p, out, err);
    int status = rep ? 0 : 1;
    progress prog = {.err = err, .on = isatty(fileno(err)) != 0, .total = nsets * p.ntargets};
    if (rep && p.ntargets == 0)
        fprintf(err, "crmm bench: nothing left to measure\n");
    for (size_t s = 0; rep && p.ntargets && s < nsets; s++) {
        bench_set *set = &sets[s];
        bench_sequence *seqs = calloc(set->threads, sizeof *seqs);
        if (!seqs) {
            fprintf(err, "crmm bench: set %s: out of memory\n", set->label);
            status = 1;
        } else if (!make_sequences(set, seqs, err)) {
            status = 1;
        } else {
            bench_report_set(rep, set);
            for (size_t i = 0; i < p.ntargets; i++) {
                bench_result res;
                prog.set = set->label;
                prog.target = p.targets[i].name;
                measure(bc, &p.targets[i], p.device, set, seqs, &prog, &res);
                prog.done++;
                progress_clear(&prog);
                bench_report_row(rep, set, p.targets[i].name, p.targets[i].plugin, &res);
                if (res.outcome == BENCH_OUTCOME_ERROR)
                    status = 1;
            }
        }
        for (unsigned t = 0; seqs && t < set->threads; t++)
            bench_sequence_free(&seqs[t]);
        free(seqs);
    }
    bench_report_end(rep);
    plan_free(&p);
    return status;
}

/* --overhead, after the config loads were timed: dispatch, config load, logging over set A. */
static int run_overhead(const options *o, bench_config *bc, const bench_load_times *loads, FILE *out, FILE *err)
{
    options only_a = *o;
    memset(only_a.set_wanted, 0, sizeof only_a.set_wanted);
    only_a.set_wanted[0] = only_a.any_set = true;
    bench_set set;
    build_sets(&only_a, &set);
    plan p;
    bench_report *rep = plan_begin(o, bc, &p, out, err);
    int status = rep ? 0 : 1;
    if (rep) {
        bench_dispatch_times dispatch;
        if (bench_overhead_time_dispatch(o->iterations, o->repeats, &dispatch) == CRMM_OK) {
            bench_overhead_report_dispatch(rep, &dispatch);
        } else {
            fprintf(err, "crmm bench: %s\n", crmm_last_error());
            status = 1;
        }
        bench_overhead_report_loads(rep, loads, bc);
        if (loads->outcome != BENCH_OUTCOME_OK)
            status = 1;
        bench_sequence seq = {0};
        if (p.ntargets == 0) {
            fprintf(err, "crmm bench: logging: no resource to measure it over (no pool, arena or host resource "
                         "of the config runs here; name one with --resource)\n");
        } else if (!make_sequences(&set, &seq, err)) {
            status = 1;
        } else {
            bench_overhead_logging_section(rep, &set);
            for (size_t i = 0; i < p.ntargets; i++)
                if (!bench_overhead_logging(rep, bc, p.targets[i].name, p.targets[i].plugin,
                                            p.targets[i].host ? -1 : p.device, &set, &seq))
                    status = 1;
        }
        bench_sequence_free(&seq);
    }
    bench_report_end(rep);
    plan_free(&p);
    return status;
}

int bench_cli_main(int argc, char **argv, FILE *out, FILE *err)
{
    options o = {.repeats = DEFAULT_REPEATS, .allocations = DEFAULT_ALLOCATIONS,
                 .iterations = BENCH_OVERHEAD_ITERATIONS, .loads = BENCH_OVERHEAD_LOADS};
    int rc = parse_args(argc, argv, &o, err);
    if (rc || o.help || o.copy) {
        free(o.resources);
        if (rc)
            return rc;
        if (o.help) {
            if (o.copy)
                bench_copy_usage(out);
            else
                bench_cli_usage(out);
            return 0;
        }
        return bench_copy_main(argc, argv);
    }
    /* before this process loads any plugin: the children must start as fresh programs do */
    bench_load_times loads = {.outcome = BENCH_OUTCOME_OK};
    if (o.overhead && bench_overhead_time_loads(o.config, o.loads, &loads) != CRMM_OK) {
        fprintf(err, "crmm bench: %s\n", crmm_last_error());
        free(o.resources);
        return 1;
    }
    bench_config *bc = NULL;
    if (bench_config_open(o.config, &bc) != CRMM_OK) {
        fprintf(err, "crmm bench: %s\n", crmm_last_error());
        free(o.resources);
        return 1;
    }
    rc = check_resource_names(&o, bc, err);
    if (!rc)
        rc = o.overhead ? run_overhead(&o, bc, &loads, out, err) : run_sets(&o, bc, out, err);
    bench_config_close(bc);
    free(o.resources);
    return rc;
}
