/* cmd_replay.c — `crmm replay LOG`: replays an RMM-format allocation log against a resource.
 *
 * Each logged thread gets its own thread, and the events keep the log's global order: a
 * counter holds the index of the next event, and only the thread that owns that event runs.
 * When a thread finishes event g it advances the counter and, if event g+1 belongs to another
 * thread, wakes that thread's semaphore (no spinning, no lost wake-ups: a post before the wait
 * is remembered). Because only one thread runs at a time, the bookkeeping (new pointers, bytes
 * in use) needs no lock. Logged pointers map to new ones through the pairing that
 * replay_log.c computed: a free uses the pointer its allocation got. */
#include "config.h"
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <crmm/crmm.h>
#include "commands.h"
#include "replay.h"

/* Fragmentation is sampled every this many events when the resource can tell. */
#define REPLAY_SAMPLE_EVERY 256

typedef struct replay_run {
    const replay_log *log;
    crmm_resource *mr;
    void **new_ptr;              /* per ALLOCATE event: the pointer the replay got (NULL: none) */
    size_t **thread_events;      /* per thread: its event indices, in order */
    size_t *thread_count;
    sem_t *wake;                 /* per thread */
    _Atomic size_t next;         /* index of the event whose turn it is (SIZE_MAX: not started) */
    atomic_bool abandon;         /* set when not every thread could start: all stop */
    /* touched only by the thread whose turn it is */
    uint64_t allocated, freed, failed, free_errors;
    uint64_t in_use, peak_in_use;
    double ns_in_resource;
    bool can_fragment;
    double max_fragmentation;
    char first_failure[512];
} replay_run;

typedef struct worker_arg { replay_run *run; uint32_t thread; } worker_arg;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void run_event(replay_run *r, size_t g)
{
    const replay_event *ev = &r->log->events[g];
    if (ev->action == REPLAY_ALLOCATE) {
        void *p = NULL;
        double t0 = now_ns();
        crmm_status st = crmm_resource_allocate(r->mr, (size_t)ev->size, NULL, &p);
        r->ns_in_resource += now_ns() - t0;
        if (st == CRMM_OK) {
            r->new_ptr[g] = p;
            r->allocated++;
            r->in_use += ev->size;
            if (r->in_use > r->peak_in_use)
                r->peak_in_use = r->in_use;
        } else if (r->failed++ == 0) {
            snprintf(r->first_failure, sizeof r->first_failure, "line %u: %s", ev->line, crmm_last_error());
        }
    } else if (ev->action == REPLAY_FREE && ev->pair >= 0 && r->new_ptr[ev->pair]) {
        const replay_event *a = &r->log->events[ev->pair];
        double t0 = now_ns();
        crmm_status st = crmm_resource_deallocate(r->mr, r->new_ptr[ev->pair], (size_t)a->size, NULL);
        r->ns_in_resource += now_ns() - t0;
        r->new_ptr[ev->pair] = NULL;
        r->in_use -= a->size;
        if (st == CRMM_OK)
            r->freed++;
        else
            r->free_errors++;
    }
    double frag;
    if (r->can_fragment && g % REPLAY_SAMPLE_EVERY == 0 && crmm_resource_fragmentation(r->mr, &frag) == CRMM_OK &&
        frag > r->max_fragmentation)
        r->max_fragmentation = frag;
}

static void *worker(void *arg)
{
    worker_arg *w = arg;
    replay_run *r = w->run;
    const replay_log *log = r->log;
    for (size_t k = 0; k < r->thread_count[w->thread]; k++) {
        size_t g = r->thread_events[w->thread][k];
        while (atomic_load_explicit(&r->next, memory_order_acquire) != g) {
            if (atomic_load(&r->abandon))
                return NULL;
            sem_wait(&r->wake[w->thread]);
        }
        run_event(r, g);
        atomic_store_explicit(&r->next, g + 1, memory_order_release);
        if (g + 1 < log->count && log->events[g + 1].thread_index != w->thread)
            sem_post(&r->wake[log->events[g + 1].thread_index]);
    }
    return NULL;
}

/* Run every event on its logged thread; returns the wall time in ns, or < 0 (message in err). */
static double replay_threads(replay_run *r, FILE *err)
{
    const replay_log *log = r->log;
    uint32_t nt = log->threads;
    pthread_t *tids = calloc(nt, sizeof *tids);
    worker_arg *args = calloc(nt, sizeof *args);
    r->thread_count = calloc(nt, sizeof *r->thread_count);
    r->thread_events = calloc(nt, sizeof *r->thread_events);
    r->wake = calloc(nt, sizeof *r->wake);
    double wall = -1;
    bool ok = tids && args && r->thread_count && r->thread_events && r->wake;
    for (size_t i = 0; ok && i < log->count; i++)
        r->thread_count[log->events[i].thread_index]++;
    for (uint32_t t = 0; ok && t < nt; t++)
        ok = (r->thread_events[t] = malloc(r->thread_count[t] * sizeof **r->thread_events)) != NULL;
    if (!ok) {
        fprintf(err, "crmm replay: out of memory for %u threads\n", nt);
        goto out;
    }
    memset(r->thread_count, 0, nt * sizeof *r->thread_count);
    for (size_t i = 0; i < log->count; i++) {
        uint32_t t = log->events[i].thread_index;
        r->thread_events[t][r->thread_count[t]++] = i;
    }
    for (uint32_t t = 0; t < nt; t++)
        sem_init(&r->wake[t], 0, 0);
    atomic_store(&r->next, SIZE_MAX);
    uint32_t started = 0;
    for (; started < nt; started++) {
        args[started] = (worker_arg){r, started};
        if (pthread_create(&tids[started], NULL, worker, &args[started]) != 0)
            break;
    }
    double t0 = now_ns();
    if (started < nt) { /* the log's order cannot be kept: stop those that started */
        fprintf(err, "crmm replay: cannot start thread %u of %u\n", started + 1, nt);
        atomic_store(&r->abandon, true);
        for (uint32_t t = 0; t < started; t++)
            sem_post(&r->wake[t]);
    } else {
        atomic_store_explicit(&r->next, 0, memory_order_release);
        sem_post(&r->wake[log->events[0].thread_index]);
    }
    for (uint32_t t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    if (started == nt)
        wall = now_ns() - t0;
    for (uint32_t t = 0; t < nt; t++)
        sem_destroy(&r->wake[t]);
out:
    for (uint32_t t = 0; r->thread_events && t < nt; t++)
        free(r->thread_events[t]);
    free(r->thread_events);
    free(r->thread_count);
    free(r->wake);
    free(args);
    free(tids);
    return wall;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: crmm replay LOG.csv [--config FILE] [--resource NAME] [--threads-as-logged]\n\n"
            "Replays an allocation log in RMM's CSV format, written by the logging plugin or by RMM's\n"
            "logging_resource_adaptor (exactly the columns Thread,Time,Action,Pointer,Size,Stream),\n"
            "against a resource, and reports what it cost and how much memory it took.\n\n"
            "  --config FILE        the config to build the resource from (default: $CRMM_CONFIG, the\n"
            "                       installed crmm.ini, else the built-in default, the cuda plugin)\n"
            "  --resource NAME      the resource of the config to replay against (default: the config's\n"
            "                       default resource); without --config and --resource, and with no\n"
            "                       CUDA device, the host plugin is used\n"
            "  --threads-as-logged  each logged thread replays on its own thread, the events in the\n"
            "                       log's order across threads (the default and only mode)\n\n"
            "Logged pointers map to the new ones; every event runs on the default stream. Failed\n"
            "allocations ('allocate failure') are counted, not replayed. Allocations the log never\n"
            "frees are reported as its leaks and freed at the end. A line that does not parse stops\n"
            "the replay with its line number (exit status 1).\n");
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

/* Build the resource to replay against (see usage). Returns NULL after writing to err. */
static crmm_resource *open_resource(const char *config, const char *resource, crmm_config **own, FILE *out,
                                    FILE *err, char *label, size_t label_size)
{
    const crmm_config *cfg;
    if (config) {
        if (crmm_config_load_file(config, own) != CRMM_OK) {
            fprintf(err, "crmm replay: %s\n", crmm_last_error());
            return NULL;
        }
        cfg = *own;
    } else if (crmm_init(NULL) != CRMM_OK) {
        fprintf(err, "crmm replay: %s\n", crmm_last_error());
        return NULL;
    } else {
        cfg = crmm_current_config();
    }
    const char *name = resource ? resource : crmm_config_default_resource(cfg, -1);
    long i = crmm_config_find_resource(cfg, name);
    if (i < 0) {
        fprintf(err, "crmm replay: %s has no resource '%s'\n", crmm_config_origin(cfg), name ? name : "(default)");
        return NULL;
    }
    crmm_resource *mr = NULL;
    int devices = 0;
    if (!config && !resource && !crmm_config_resource_is_host(cfg, (size_t)i) &&
        crmm_cuda_device_count(&devices) != CRMM_OK) {
        fprintf(out, "note: %s; replaying against the host plugin\n", crmm_last_error());
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

static void print_size_query(FILE *out, const char *what, crmm_resource *mr, crmm_query q)
{
    uint64_t v;
    char sz[32];
    if (crmm_resource_query(mr, q, &v) == CRMM_OK)
        fprintf(out, "%s: %s (%llu bytes)\n", what, crmm_format_size(v, sz, sizeof sz), (unsigned long long)v);
    else
        fprintf(out, "%s: n/a (the resource does not tell)\n", what);
}

static void report(FILE *out, const char *path, const replay_log *log, const replay_run *r, crmm_resource *mr,
                   const char *label, double wall_ns, double end_fragmentation, bool end_fragmentation_known)
{
    char chain[256], sz[32];
    uint64_t calls = r->allocated + r->failed + r->freed + r->free_errors;
    fprintf(out, "replay: %s: %zu events on %u thread%s (%llu allocations, %llu frees, %llu allocate failures)\n",
            path, log->count, log->threads, log->threads == 1 ? "" : "s", (unsigned long long)log->allocations,
            (unsigned long long)log->frees, (unsigned long long)log->failures_logged);
    fprintf(out, "resource: %s (%s)\n", label, describe_chain(mr, chain, sizeof chain));
    fprintf(out, "time: %.3f ms wall, %.3f ms in the resource (%.0f ns per call)\n", wall_ns / 1e6,
            r->ns_in_resource / 1e6, calls ? r->ns_in_resource / (double)calls : 0.0);
    fprintf(out, "allocations: %llu replayed, %llu failed\n", (unsigned long long)r->allocated,
            (unsigned long long)r->failed);
    if (r->failed)
        fprintf(out, "first failure: %s\n", r->first_failure);
    fprintf(out, "frees: %llu replayed, %llu failed\n", (unsigned long long)r->freed, (unsigned long long)r->free_errors);
    fprintf(out, "peak in use: %s (%llu bytes as replayed; %llu in the log)\n",
            crmm_format_size(r->peak_in_use, sz, sizeof sz), (unsigned long long)r->peak_in_use,
            (unsigned long long)log->peak_bytes);
    print_size_query(out, "peak in use (resource)", mr, CRMM_QUERY_BYTES_IN_USE_PEAK);
    print_size_query(out, "peak reserved (resource)", mr, CRMM_QUERY_BYTES_RESERVED_PEAK);
    if (r->can_fragment || end_fragmentation_known)
        fprintf(out, "fragmentation: %.1f%% at most (sampled every %d events), %.1f%% at the end\n",
                100.0 * r->max_fragmentation, REPLAY_SAMPLE_EVERY, 100.0 * end_fragmentation);
    else
        fprintf(out, "fragmentation: n/a (the resource does not tell)\n");
    if (log->unknown_frees || log->size_mismatches || log->reused_live)
        fprintf(out, "log anomalies: %llu frees of pointers not live, %llu frees with another size, "
                "%llu allocations of a live pointer\n", (unsigned long long)log->unknown_frees,
                (unsigned long long)log->size_mismatches, (unsigned long long)log->reused_live);
    if (log->leaked_count)
        fprintf(out, "log leaks: %llu allocations of %llu bytes never freed in the log (freed after the replay)\n",
                (unsigned long long)log->leaked_count, (unsigned long long)log->leaked_bytes);
    else
        fprintf(out, "log leaks: none\n");
}

int crmm_replay_main(int argc, char **argv, FILE *out, FILE *err)
{
    const char *path = NULL, *config = NULL, *resource = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(out);
            return 0;
        } else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            config = argv[++i];
        } else if (strcmp(argv[i], "--resource") == 0 && i + 1 < argc) {
            resource = argv[++i];
        } else if (strcmp(argv[i], "--threads-as-logged") == 0) {
            /* the default and only mode */
        } else if (argv[i][0] != '-' && !path) {
            path = argv[i];
        } else {
            fprintf(err, "crmm replay: unexpected argument '%s'\n", argv[i]);
            usage(err);
            return 2;
        }
    }
    if (!path) {
        fprintf(err, "crmm replay: no log file given\n");
        usage(err);
        return 2;
    }
    replay_log log;
    if (replay_log_read(path, &log) != CRMM_OK) {
        fprintf(err, "crmm replay: %s\n", crmm_last_error());
        return 1;
    }
    int rc = 1;
    crmm_config *own = NULL;
    char label[64];
    crmm_resource *mr = open_resource(config, resource, &own, out, err, label, sizeof label);
    replay_run *r = calloc(1, sizeof *r);
    void **new_ptr = calloc(log.count ? log.count : 1, sizeof *new_ptr);
    if (!mr || !r || !new_ptr) {
        if (mr)
            fprintf(err, "crmm replay: out of memory for %zu events\n", log.count);
        goto out;
    }
    r->log = &log;
    r->mr = mr;
    r->new_ptr = new_ptr;
    double frag;
    r->can_fragment = crmm_resource_fragmentation(mr, &frag) == CRMM_OK;
    double wall = log.count ? replay_threads(r, err) : 0.0;
    if (wall < 0)
        goto out;
    bool end_known = crmm_resource_fragmentation(mr, &frag) == CRMM_OK;
    report(out, path, &log, r, mr, label, wall, end_known ? frag : 0.0, end_known);
    rc = 0;
out:
    for (size_t i = 0; new_ptr && i < log.count; i++) /* the log's leaks */
        if (new_ptr[i])
            crmm_resource_deallocate(mr, new_ptr[i], (size_t)log.events[i].size, NULL);
    free(new_ptr);
    free(r);
    crmm_resource_release(mr);
    crmm_config_free(own);
    if (!config)
        crmm_finalize();
    replay_log_free(&log);
    return rc;
}

int crmm_cmd_replay(int argc, char **argv)
{
    return crmm_replay_main(argc, argv, stdout, stderr);
}
