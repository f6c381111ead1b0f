/* replay_run.c — replays a paired log (replay_log.c) against one resource for `crmm replay`.
 *
 * First one untimed pass, on the calling thread in the log's order: after every call it notes
 * the bytes in use (as replayed) and asks the resource for its reserved bytes, and every
 * REPLAY_FRAGMENTATION_EVERY calls for its fragmentation; these give the memory figures and the
 * plot's series. Then the timed repeats: the clock is read once before and once after each, and
 * between the two reads the replay makes only allocate and deallocate calls on its stream (and
 * a synchronization of that stream at the end, as `crmm bench` does). Allocations the log never
 * frees are freed after each pass, outside the clock.
 *
 * With threads > 0 a timed repeat runs the logged threads on at most that many OS threads
 * (logged thread i on worker i mod N), keeping the log's global order: a counter holds the
 * index of the next call, and only the worker that owns it runs; when a worker finishes call g
 * it advances the counter and, when call g+1 belongs to another worker, wakes that worker's
 * semaphore (a post before the wait is remembered, so no wake-up is lost). Only one worker runs
 * at a time, so the pointer table needs no lock. */
#include "build_config.h"
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <crmm/cuda_support.h>
#include <crmm/stream.h>
#include "bench_runner.h"
#include "replay.h"

/* The untimed pass asks for fragmentation every this many calls. */
#define REPLAY_FRAGMENTATION_EVERY 256

/* One call of the replay: allocate `bytes` into slot, or free what slot holds. */
typedef struct replay_op {
    uint64_t bytes;
    size_t slot;      /* index of the allocating event */
    size_t event;     /* index of this event in the log */
    uint32_t worker;  /* threads mode: the worker that makes the call */
    uint32_t is_free;
} replay_op;

typedef struct replay_ctx {
    const replay_log *log;
    crmm_resource *mr;
    replay_op *ops;
    size_t count;
    void **ptrs;                 /* per event: what the allocation in that slot got (NULL: none) */
    unsigned workers;            /* 1 without threads mode */
    crmm_stream **streams;       /* per worker; NULL entries: host memory, no CUDA */
    crmm_cuda_stream_t *handles; /* per worker */
    bool sync;                   /* synchronize the streams (device memory) */
} replay_ctx;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The calls to make: every allocation of a non-zero size, every free paired with one. */
static size_t compile_ops(const replay_log *log, unsigned workers, replay_op *ops)
{
    size_t n = 0;
    for (size_t i = 0; i < log->count; i++) {
        const replay_event *ev = &log->events[i];
        uint32_t w = ev->thread_index % workers;
        if (ev->action == REPLAY_ALLOCATE && ev->size)
            ops[n++] = (replay_op){ev->size, i, i, w, 0};
        else if (ev->action == REPLAY_FREE && ev->pair >= 0 && log->events[ev->pair].size)
            ops[n++] = (replay_op){log->events[ev->pair].size, (size_t)ev->pair, i, w, 1};
    }
    return n;
}

/* Make ops[k]'s call; returns false when the resource refused it. A free of a slot whose
 * allocation failed is no call. */
static inline bool play_one(replay_ctx *c, const replay_op *op, crmm_cuda_stream_t stream, uint64_t *calls)
{
    void **p = &c->ptrs[op->slot];
    if (!op->is_free) {
        (*calls)++;
        if (crmm_resource_allocate(c->mr, (size_t)op->bytes, stream, p) == CRMM_OK)
            return true;
        *p = NULL;
        return false;
    }
    if (!*p)
        return true;
    (*calls)++;
    crmm_status st = crmm_resource_deallocate(c->mr, *p, (size_t)op->bytes, stream);
    *p = NULL;
    return st == CRMM_OK;
}

/* Free what the log left allocated (outside any clock). */
static void free_leftovers(replay_ctx *c)
{
    for (size_t k = 0; k < c->count; k++) {
        const replay_op *op = &c->ops[k];
        if (!op->is_free && c->ptrs[op->slot]) {
            crmm_resource_deallocate(c->mr, c->ptrs[op->slot], (size_t)op->bytes, c->handles[0]);
            c->ptrs[op->slot] = NULL;
        }
    }
    if (c->sync)
        crmm_stream_synchronize(c->streams[0]);
}

/* ---- the untimed pass ------------------------------------------------------------------------ */

static void measure(replay_ctx *c, bool keep_series, replay_result *res)
{
    uint64_t v, in_use = 0, calls = 0;
    double frag;
    res->reserved_known = crmm_resource_query(c->mr, CRMM_QUERY_BYTES_RESERVED, &v) == CRMM_OK;
    res->fragmentation_known = crmm_resource_fragmentation(c->mr, &frag) == CRMM_OK;
    for (size_t k = 0; k < c->count; k++) {
        const replay_op *op = &c->ops[k];
        bool live = op->is_free && c->ptrs[op->slot];
        if (play_one(c, op, c->handles[0], &calls)) {
            if (!op->is_free) {
                res->allocated++;
                in_use += op->bytes;
                if (in_use > res->peak_in_use)
                    res->peak_in_use = in_use;
            } else if (live) {
                res->freed++;
            }
        } else if (!op->is_free) {
            if (res->failed++ == 0)
                snprintf(res->first_failure, sizeof res->first_failure, "line %u: %s",
                         c->log->events[op->event].line, crmm_last_error());
        } else {
            res->free_errors++;
        }
        if (op->is_free && live)
            in_use -= op->bytes;
        uint64_t reserved = 0;
        if (res->reserved_known && crmm_resource_query(c->mr, CRMM_QUERY_BYTES_RESERVED, &reserved) == CRMM_OK &&
            reserved > res->peak_reserved)
            res->peak_reserved = reserved;
        if (keep_series) {
            res->x[k] = op->event;
            res->in_use[k] = in_use;
            res->reserved[k] = reserved;
        }
        if (res->fragmentation_known && k % REPLAY_FRAGMENTATION_EVERY == 0 &&
            crmm_resource_fragmentation(c->mr, &frag) == CRMM_OK && frag > res->max_fragmentation)
            res->max_fragmentation = frag;
    }
    res->points = keep_series ? c->count : 0;
    if (c->sync)
        crmm_stream_synchronize(c->streams[0]);
    if (res->reserved_known && crmm_resource_query(c->mr, CRMM_QUERY_BYTES_RESERVED_PEAK, &v) == CRMM_OK &&
        v > res->peak_reserved)
        res->peak_reserved = v;
    if (res->fragmentation_known && crmm_resource_fragmentation(c->mr, &frag) == CRMM_OK) {
        res->end_fragmentation = frag;
        if (frag > res->max_fragmentation)
            res->max_fragmentation = frag;
    }
    free_leftovers(c);
}

/* ---- a timed repeat on one thread ---------------------------------------------------------- */

static double timed_single(replay_ctx *c, uint64_t *calls, uint64_t *failures)
{
    const replay_op *ops = c->ops;
    crmm_cuda_stream_t stream = c->handles[0];
    uint64_t n = 0, bad = 0;
    if (c->sync)
        crmm_stream_synchronize(c->streams[0]);
    double t0 = now_ns();
    for (size_t k = 0; k < c->count; k++)
        if (__builtin_expect(!play_one(c, &ops[k], stream, &n), 0))
            bad++;
    if (c->sync)
        crmm_stream_synchronize(c->streams[0]);
    double wall = now_ns() - t0;
    free_leftovers(c);
    *calls = n;
    *failures = bad;
    return wall;
}

/* ---- a timed repeat on several threads ---------------------------------------------------- */

typedef struct turn_state {
    replay_ctx *c;
    size_t **mine;          /* per worker: its op indices, in order */
    size_t *mine_count;
    sem_t *wake;            /* per worker */
    _Atomic size_t next;    /* the op whose turn it is (SIZE_MAX: not started) */
    atomic_bool abandon;    /* not every worker could start: all stop */
    uint64_t *calls, *failures; /* per worker */
} turn_state;

typedef struct worker_arg { turn_state *t; uint32_t w; } worker_arg;

static void *worker_main(void *arg)
{
    worker_arg *a = arg;
    turn_state *t = a->t;
    replay_ctx *c = t->c;
    crmm_cuda_stream_t stream = c->handles[a->w];
    uint64_t calls = 0, bad = 0;
    for (size_t k = 0; k < t->mine_count[a->w]; k++) {
        size_t g = t->mine[a->w][k];
        while (atomic_load_explicit(&t->next, memory_order_acquire) != g) {
            if (atomic_load(&t->abandon))
                return NULL;
            sem_wait(&t->wake[a->w]);
        }
        if (!play_one(c, &c->ops[g], stream, &calls))
            bad++;
        atomic_store_explicit(&t->next, g + 1, memory_order_release);
        if (g + 1 < c->count && c->ops[g + 1].worker != a->w)
            sem_post(&t->wake[c->ops[g + 1].worker]);
    }
    if (c->sync)
        crmm_stream_synchronize(c->streams[a->w]);
    t->calls[a->w] = calls;
    t->failures[a->w] = bad;
    return NULL;
}

/* Returns the wall time, or < 0 when a thread could not start (message set). */
static double timed_threads(replay_ctx *c, turn_state *t, uint64_t *calls, uint64_t *failures)
{
    unsigned nw = c->workers;
    pthread_t tids[nw];
    worker_arg args[nw];
    for (unsigned w = 0; w < nw; w++)
        sem_init(&t->wake[w], 0, 0);
    atomic_store(&t->next, SIZE_MAX);
    atomic_store(&t->abandon, false);
    if (c->sync)
        for (unsigned w = 0; w < nw; w++)
            crmm_stream_synchronize(c->streams[w]);
    unsigned started = 0;
    for (; started < nw; started++) {
        args[started] = (worker_arg){t, started};
        if (pthread_create(&tids[started], NULL, worker_main, &args[started]) != 0)
            break;
    }
    double t0 = now_ns(), wall = -1;
    if (started < nw) {
        atomic_store(&t->abandon, true);
        for (unsigned w = 0; w < started; w++)
            sem_post(&t->wake[w]);
    } else {
        atomic_store_explicit(&t->next, 0, memory_order_release);
        sem_post(&t->wake[c->ops[0].worker]);
    }
    for (unsigned w = 0; w < started; w++)
        pthread_join(tids[w], NULL);
    if (started == nw)
        wall = now_ns() - t0;
    else
        crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "cannot start replay thread %u of %u", started + 1, nw);
    for (unsigned w = 0; w < nw; w++)
        sem_destroy(&t->wake[w]);
    free_leftovers(c);
    *calls = *failures = 0;
    for (unsigned w = 0; w < nw; w++) {
        *calls += t->calls[w];
        *failures += t->failures[w];
    }
    return wall;
}

static bool turn_state_init(turn_state *t, replay_ctx *c)
{
    unsigned nw = c->workers;
    memset(t, 0, sizeof *t);
    t->c = c;
    t->mine = calloc(nw, sizeof *t->mine);
    t->mine_count = calloc(nw, sizeof *t->mine_count);
    t->wake = calloc(nw, sizeof *t->wake);
    t->calls = calloc(nw, sizeof *t->calls);
    t->failures = calloc(nw, sizeof *t->failures);
    if (!t->mine || !t->mine_count || !t->wake || !t->calls || !t->failures)
        return false;
    for (size_t k = 0; k < c->count; k++)
        t->mine_count[c->ops[k].worker]++;
    for (unsigned w = 0; w < nw; w++)
        if (!(t->mine[w] = malloc((t->mine_count[w] ? t->mine_count[w] : 1) * sizeof **t->mine)))
            return false;
    memset(t->mine_count, 0, nw * sizeof *t->mine_count);
    for (size_t k = 0; k < c->count; k++) {
        uint32_t w = c->ops[k].worker;
        t->mine[w][t->mine_count[w]++] = k;
    }
    return true;
}

static void turn_state_free(turn_state *t, unsigned workers)
{
    for (unsigned w = 0; t->mine && w < workers; w++)
        free(t->mine[w]);
    free(t->mine);
    free(t->mine_count);
    free(t->wake);
    free(t->calls);
    free(t->failures);
}

/* ---- streams -------------------------------------------------------------------------------- */

static crmm_status open_streams(replay_ctx *c, replay_stream_kind kind, replay_result *res)
{
    c->sync = c->mr->device >= 0;
    for (unsigned w = 0; w < c->workers; w++) {
        if (!c->sync) {
            c->streams[w] = NULL; /* host memory: no CUDA call at all */
            c->handles[w] = kind == REPLAY_STREAM_PER_THREAD ? CRMM_CUDA_STREAM_PER_THREAD : NULL;
            continue;
        }
        if (kind == REPLAY_STREAM_DEFAULT)
            c->streams[w] = crmm_stream_default();
        else if (kind == REPLAY_STREAM_PER_THREAD)
            c->streams[w] = crmm_stream_per_thread();
        else if (crmm_stream_create(CRMM_STREAM_NON_BLOCKING, &c->streams[w]) != CRMM_OK)
            return crmm_set_error(CRMM_ERROR_CUDA, "cannot create the replay's stream: %s", crmm_last_error());
        c->handles[w] = crmm_stream_handle(c->streams[w]);
    }
    static const char *const words[] = {"a new non-blocking stream", "the legacy default stream",
                                        "the per-thread default stream"};
    res->stream_used = !c->sync ? "none (host memory)" : words[kind];
    if (c->sync && kind == REPLAY_STREAM_NEW && c->workers > 1)
        res->stream_used = "a new non-blocking stream per thread";
    return CRMM_OK;
}

static void close_streams(replay_ctx *c, replay_stream_kind kind)
{
    if (kind != REPLAY_STREAM_NEW || !c->streams)
        return;
    for (unsigned w = 0; w < c->workers; w++)
        crmm_stream_destroy(c->streams[w]);
}

/* ---- the whole replay ---------------------------------------------------------------------- */

crmm_status replay_against(const replay_log *log, crmm_resource *mr, const replay_options *opt, replay_result *res)
{
    memset(res, 0, sizeof *res);
    unsigned workers = 1;
    if (opt->threads)
        workers = opt->threads < log->threads ? opt->threads : log->threads;
    if (!workers)
        workers = 1;
    res->workers = opt->threads ? workers : 0;
    res->repeats = opt->repeats ? opt->repeats : 1;
    replay_ctx c = {.log = log, .mr = mr, .workers = workers};
    turn_state t = {0};
    crmm_device_guard guard = {0, 0};
    double *ns = calloc(res->repeats, sizeof *ns), *walls = calloc(res->repeats, sizeof *walls);
    c.ops = malloc((log->count ? log->count : 1) * sizeof *c.ops);
    c.ptrs = calloc(log->count ? log->count : 1, sizeof *c.ptrs);
    c.streams = calloc(workers, sizeof *c.streams);
    c.handles = calloc(workers, sizeof *c.handles);
    crmm_status st = CRMM_OK;
    if (!ns || !walls || !c.ops || !c.ptrs || !c.streams || !c.handles) {
        st = crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "out of memory for %zu events", log->count);
        goto out;
    }
    c.count = compile_ops(log, workers, c.ops);
    if (opt->keep_series) {
        res->x = malloc((c.count ? c.count : 1) * sizeof *res->x);
        res->in_use = malloc((c.count ? c.count : 1) * sizeof *res->in_use);
        res->reserved = malloc((c.count ? c.count : 1) * sizeof *res->reserved);
        if (!res->x || !res->in_use || !res->reserved) {
            st = crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "out of memory for the plot's %zu points", c.count);
            goto out;
        }
    }
    if ((st = crmm_cuda_device_enter(mr->device, &guard)) != CRMM_OK)
        goto out;
    if ((st = open_streams(&c, opt->stream, res)) != CRMM_OK)
        goto restore;
    measure(&c, opt->keep_series, res);
    if (workers > 1 && c.count && !turn_state_init(&t, &c)) {
        st = crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "out of memory for %u replay threads", workers);
        goto restore;
    }
    for (unsigned i = 0; i < res->repeats; i++) {
        uint64_t calls = 0, failures = 0;
        double wall = workers > 1 && c.count ? timed_threads(&c, &t, &calls, &failures)
                                             : timed_single(&c, &calls, &failures);
        if (wall < 0) {
            st = CRMM_ERROR_OUT_OF_MEMORY;
            goto restore;
        }
        walls[i] = wall;
        ns[i] = calls ? wall / (double)calls : 0.0;
        res->calls = calls;
        res->timed_failures += failures;
    }
    res->wall_ns_median = bench_median(walls, res->repeats);
    res->ns_per_call_median = bench_median(ns, res->repeats); /* sorts ns */
    res->ns_per_call_min = ns[0];
    res->ns_per_call_max = ns[res->repeats - 1];
restore:
    close_streams(&c, opt->stream);
    crmm_cuda_device_restore(&guard);
out:
    turn_state_free(&t, workers);
    free(c.ops);
    free(c.ptrs);
    free(c.streams);
    free(c.handles);
    free(ns);
    free(walls);
    if (st != CRMM_OK)
        replay_result_free(res);
    return st;
}

void replay_result_free(replay_result *res)
{
    free(res->x);
    free(res->in_use);
    free(res->reserved);
    res->x = NULL;
    res->in_use = res->reserved = NULL;
    res->points = 0;
}
