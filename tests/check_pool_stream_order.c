/* check_pool_stream_order.c — random work on the pool from two threads over five streams (the
 * legacy one, three explicit ones and each thread's per-thread default stream), with caches on
 * and off, stream_reuse sync and event, chunks and expandable, a maximum and a release threshold;
 * threads exit with cached blocks, trims, forgets and queries come between. Against the scripted
 * CUDA of fake_vmm.h, whose order hook feeds a model of which stream work is ordered after which
 * (device and stream synchronizations, events recorded, waited for and found complete). After
 * every step:
 *  - no byte freed on one stream is handed to another stream unless the model orders that stream
 *    after the free (a synchronization, an event, or the program's own order: a free on another
 *    stream than the block's is ordered after its use);
 *  - every block out of the free lists is in exactly one live map or cache entry, no two free
 *    neighbours of one state are left unmerged, each cache's count of blocks and bytes is its
 *    entries', the pool's counts plus every cache's delta are the program's, and the pool's block
 *    bytes and BYTES_FREE agree with the blocks.
 * Half the trims and forgets run with every host malloc failing (the caches cannot then hand all
 * their blocks back): they may fail only as out of memory, and the same checks hold after them.
 * Sanitizer builds cannot make malloc fail (MALLOC_FAIL_REPLACES is 0): there they run as the
 * others. */
#include "build_config.h"

#include <crmm/pool.h>
#include "graphs_test.h"
#include "pool_books_test.h"

/* ---- a second thread that runs one function at a time -------------------------------------- */

static _Thread_local int my_index; /* 0: the test's thread, 1: the runner */

typedef struct runner {
    pthread_t th;
    pthread_mutex_t m;
    pthread_cond_t cv;
    void (*fn)(void *);
    void *arg;
    bool exit;
} runner;

static void *runner_main(void *a)
{
    runner *r = a;
    my_index = 1;
    pthread_mutex_lock(&r->m);
    for (;;) {
        while (!r->fn && !r->exit)
            pthread_cond_wait(&r->cv, &r->m);
        if (r->exit && !r->fn)
            break;
        r->fn(r->arg);
        r->fn = NULL;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->m);
    return NULL;
}

static void runner_start(runner *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->m, NULL);
    pthread_cond_init(&r->cv, NULL);
    ck_assert_int_eq(pthread_create(&r->th, NULL, runner_main, r), 0);
}

static void runner_run(runner *r, void (*fn)(void *), void *arg)
{
    pthread_mutex_lock(&r->m);
    r->fn = fn, r->arg = arg;
    pthread_cond_broadcast(&r->cv);
    while (r->fn)
        pthread_cond_wait(&r->cv, &r->m);
    pthread_mutex_unlock(&r->m);
}

/* The thread ends (its caches drain and become orphans). */
static void runner_stop(runner *r)
{
    pthread_mutex_lock(&r->m);
    r->exit = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->m);
    ck_assert_int_eq(pthread_join(r->th, NULL), 0);
}

/* ---- the model of stream order ---------------------------------------------------------------
 * Stream ids: 0 the legacy stream, 1..3 explicit ones, 4 + thread the per-thread default ones.
 * Times are a counter of events. done[i]: the latest time up to which stream i's work is known
 * finished; after[y][i]: stream y's later work is ordered after stream i's work up to that time;
 * recorded[x]: what the last event recorded on stream x stands for (per stream). */
#define NSTREAMS 6

static uint64_t now, device_synced, done[NSTREAMS], after[NSTREAMS][NSTREAMS], last_record[NSTREAMS],
    recorded[NSTREAMS][NSTREAMS];
static const char *violation;
static char violation_text[256];

static int stream_id(cudaStream_t s, int thread)
{
    if (s == NULL || s == cudaStreamLegacy)
        return 0;
    if (s == cudaStreamPerThread)
        return 4 + thread;
    for (int i = 1; i <= 3; i++)
        if (s == stream_n(i))
            return i;
    ck_abort_msg("unknown stream %p", (void *)s);
    return -1;
}

static void order_hook(int what, cudaStream_t s)
{
    uint64_t t = ++now;
    if (what == FAKE_ORDER_DEVICE_SYNC) {
        device_synced = t;
    } else if (what == FAKE_ORDER_STREAM_SYNC) {
        int x = stream_id(s, my_index);
        done[x] = t;
        for (int i = 0; i < NSTREAMS; i++) /* what x waited for is finished too */
            if (after[x][i] > done[i])
                done[i] = after[x][i];
    } else if (what == FAKE_ORDER_RECORD) {
        int x = stream_id(s, my_index);
        for (int i = 0; i < NSTREAMS; i++)
            last_record[i] = after[x][i];
        last_record[x] = t;
        memcpy(recorded[x], last_record, sizeof last_record);
    } else if (what == FAKE_ORDER_EVENT_DONE) { /* the scripted events complete at once */
        for (int x = 0; x < NSTREAMS; x++)
            for (int i = 0; i < NSTREAMS; i++)
                if (recorded[x][i] > done[i])
                    done[i] = recorded[x][i];
    } else { /* FAKE_ORDER_WAIT: for the last event recorded */
        int y = stream_id(s, my_index);
        for (int i = 0; i < NSTREAMS; i++)
            if (last_record[i] > after[y][i])
                after[y][i] = last_record[i];
    }
}

/* Freed byte ranges not handed out since, with the stream and time of their free. */
typedef struct freed { uintptr_t a, e; int s; uint64_t t; } freed;
static freed *freed_ranges;
static size_t nfreed, freed_room;

static void note_free_at(uintptr_t a, uintptr_t e, int s, uint64_t t)
{
    if (nfreed == freed_room) {
        freed_room = freed_room ? 2 * freed_room : 1024;
        freed_ranges = realloc(freed_ranges, freed_room * sizeof *freed_ranges);
        ck_assert_ptr_nonnull(freed_ranges);
    }
    freed_ranges[nfreed++] = (freed){a, e, s, t};
}

/* [a, a + n) handed to stream s: every freed byte in it must be ordered before s's work. */
static void note_allocation(uintptr_t a, size_t n, int s)
{
    uintptr_t e = a + n;
    for (size_t i = 0; i < nfreed; i++) {
        freed f = freed_ranges[i];
        if (f.e <= a || f.a >= e)
            continue;
        bool ordered = f.s == s || device_synced > f.t || done[f.s] > f.t || after[s][f.s] > f.t;
        if (!ordered && !violation) {
            snprintf(violation_text, sizeof violation_text,
                     "bytes at %#lx freed on stream %d at %llu were handed to stream %d with nothing ordering them",
                     (unsigned long)(f.a > a ? f.a : a), f.s, (unsigned long long)f.t, s);
            violation = violation_text;
        }
        freed_ranges[i] = freed_ranges[--nfreed];
        if (f.a < a)
            note_free_at(f.a, a, f.s, f.t);
        if (f.e > e)
            note_free_at(e, f.e, f.s, f.t);
        i--;
    }
    ++now;
}

/* ---- the pool's own bookkeeping, caches included --------------------------------------------- */

static bool in_map(const pool_block_map *m, const pool_block *b)
{
    return m->count && pool_block_map_find(m, b->addr) == b;
}

static const char *broken(crmm_resource *r, int64_t live_count, int64_t live_bytes, char *msg, size_t len)
{
    pool_resource *p = (pool_resource *)r;
    const char *e = pool_books_broken_blocks(p, msg, len);
    if (e)
        return e;
    uint64_t held = 0, out_of_lists = 0;
    for (const pool_chunk *c = p->growth.chunks; c; c = c->next)
        for (const pool_block *b = c->first; b; b = b->phys_next) {
            if (b->owner)
                continue;
            out_of_lists++;
            int places = in_map(&p->core.live, b), live = places;
            for (const pool_thread_cache *k = p->cache.caches; k; k = k->next) {
                int in_live = in_map(&k->live, b);
                places += in_live, live += in_live;
                for (int i = 0; i < POOL_CACHE_BLOCKS; i++)
                    places += k->entries[i].block == b;
            }
            if (places != 1) {
                snprintf(msg, len, "block %#lx+%zu is in %d places (live maps and cache entries)", (unsigned long)b->addr,
                         b->size, places);
                return msg;
            }
            if (live)
                held += b->size;
        }
    pool_counts sum = p->core.counts;
    uint64_t entries = p->core.live.count;
    for (const pool_thread_cache *c = p->cache.caches; c; c = c->next) {
        pool_counts_add(&sum, &c->delta);
        entries += c->live.count;
        size_t bytes = 0;
        unsigned count = 0;
        for (int i = 0; i < POOL_CACHE_BLOCKS; i++)
            if (c->entries[i].block) {
                count++, bytes += c->entries[i].size, entries++;
                if (c->entries[i].size != c->entries[i].block->size) {
                    snprintf(msg, len, "a cache entry of %zu bytes for a block of %zu", c->entries[i].size,
                             c->entries[i].block->size);
                    return msg;
                }
            }
        if (count != c->count || bytes != c->bytes) {
            snprintf(msg, len, "a cache counts %u blocks of %zu bytes and holds %u of %zu", c->count, c->bytes, count, bytes);
            return msg;
        }
    }
    if (entries != out_of_lists) {
        snprintf(msg, len, "live maps and cache entries hold %llu blocks, %llu are out of the free lists",
                 (unsigned long long)entries, (unsigned long long)out_of_lists);
        return msg;
    }
    if ((uint64_t)sum.block_bytes != held) {
        snprintf(msg, len, "block bytes summed %lld, live blocks %llu", (long long)sum.block_bytes, (unsigned long long)held);
        return msg;
    }
    if (sum.count != live_count || sum.bytes != live_bytes) {
        snprintf(msg, len, "counted %lld allocations of %lld bytes, the program has %lld of %lld", (long long)sum.count,
                 (long long)sum.bytes, (long long)live_count, (long long)live_bytes);
        return msg;
    }
    return NULL;
}

/* ---- the work -------------------------------------------------------------------------------- */

enum { SLOTS = 48, STEPS = 2000, SEEDS = 6 };
enum { OP_ALLOCATE, OP_FREE, OP_TRIM, OP_FORGET, OP_QUERY };

typedef struct slot { char *at; size_t n; int s; } slot;
typedef struct op { crmm_resource *p; int kind; slot *sl; cudaStream_t stream; bool starved; crmm_status st; } op;

/* A trim or forget, with every host malloc failing when o->starved: it succeeds, or fails as out
 * of memory (then with a message); blocks it could not move stay where the checks find them. */
static void trim_or_forget(op *o)
{
    if (o->starved && MALLOC_FAIL_REPLACES)
        malloc_fail_arm_from(1, 1);
    o->st = o->kind == OP_TRIM ? crmm_resource_trim(o->p) : crmm_pool_forget_stream(o->p, (crmm_cuda_stream_t)o->stream);
    if (o->starved && MALLOC_FAIL_REPLACES)
        malloc_fail_disarm();
    if (o->st != CRMM_OK) {
        ck_assert_msg(o->starved && o->st == CRMM_ERROR_OUT_OF_MEMORY, "%s", crmm_last_error());
        crmm_clear_error();
    }
}

static void do_op(void *arg)
{
    op *o = arg;
    o->st = CRMM_OK;
    int s = stream_id(o->stream, my_index);
    if (o->kind == OP_ALLOCATE) {
        void *x = NULL;
        ++now;
        o->st = crmm_resource_allocate(o->p, o->sl->n, (crmm_cuda_stream_t)o->stream, &x);
        if (o->st == CRMM_OK) {
            o->sl->at = x, o->sl->s = s;
            note_allocation((uintptr_t)x, (o->sl->n + 255) & ~(size_t)255, s);
            memset(x, 1, o->sl->n < 1024 ? o->sl->n : 1024);
        } else {
            ck_assert_msg(o->st == CRMM_ERROR_OUT_OF_MEMORY, "%s", crmm_last_error());
            crmm_clear_error();
        }
    } else if (o->kind == OP_FREE) {
        if (s != o->sl->s) { /* a free on another stream than the use: the program orders it after the use */
            int u = o->sl->s;
            for (int i = 0; i < NSTREAMS; i++)
                if (after[u][i] > after[s][i])
                    after[s][i] = after[u][i];
            after[s][u] = ++now;
        }
        note_free_at((uintptr_t)o->sl->at, (uintptr_t)o->sl->at + ((o->sl->n + 255) & ~(size_t)255), s, ++now);
        ck_assert_crmm_ok(crmm_resource_deallocate(o->p, o->sl->at, o->sl->n, (crmm_cuda_stream_t)o->stream));
        o->sl->at = NULL;
    } else if (o->kind == OP_TRIM || o->kind == OP_FORGET) {
        trim_or_forget(o);
    } else {
        (void)q(o->p, CRMM_QUERY_BYTES_FREE);
    }
}

/* form, then params (pool_in_form adds stream_reuse for the chunked forms, expandable for the
 * other) */
static const struct { int form; const char *params; } configs[] = {
    {CHUNKS_SYNC, "initial_size=8MiB thread_cache=on"},
    {CHUNKS_EVENT, "initial_size=8MiB thread_cache=on"},
    {CHUNKS_SYNC, "initial_size=4MiB thread_cache=on maximum_size=16MiB"},
    {CHUNKS_EVENT, "initial_size=4MiB thread_cache=on maximum_size=16MiB"},
    {CHUNKS_EVENT, "initial_size=4MiB thread_cache=off maximum_size=16MiB"},
    {EXPANDABLE, "thread_cache=on maximum_size=16MiB"},
    {EXPANDABLE, "thread_cache=on stream_reuse=event release_threshold=1MiB"},
    {EXPANDABLE, "thread_cache=off stream_reuse=event maximum_size=16MiB"},
};
#define CONFIGS ((int)(sizeof configs / sizeof configs[0]))

CRMM_LOOP_TEST_IN("order", random_work_keeps_stream_order_and_the_books, CONFIGS * SEEDS)
{
    int form = configs[_i % CONFIGS].form;
    const char *params = configs[_i % CONFIGS].params;
    crmm_resource *p = pool_in_form(form, params);
    now = device_synced = 0, nfreed = 0, violation = NULL;
    memset(done, 0, sizeof done), memset(after, 0, sizeof after), memset(last_record, 0, sizeof last_record);
    memset(recorded, 0, sizeof recorded);
    fake_vmm_order_hook = order_hook;
    runner rn;
    runner_start(&rn);
    cudaStream_t streams[5] = {NULL, stream_n(1), stream_n(2), stream_n(3), cudaStreamPerThread};
    static slot live[SLOTS];
    memset(live, 0, sizeof live);
    int64_t live_count = 0, live_bytes = 0;
    unsigned seed = 4242u + 977u * (unsigned)_i;
    for (int step = 0; step < STEPS; step++) {
        seed = seed * 1103515245u + 12345u;
        unsigned r = (seed >> 8) % 100;
        bool on_runner = (seed >> 30) & 1;
        op o = {.p = p, .stream = streams[(seed >> 20) % 5], .starved = (seed >> 5) & 1};
        if (r < 2) {
            o.kind = OP_TRIM;
        } else if (r < 4) {
            o.kind = OP_FORGET;
            o.stream = streams[1 + (seed >> 14) % 3];
        } else if (r < 6) {
            o.kind = OP_QUERY;
        } else if (r < 7) {
            runner_stop(&rn); /* a thread exits with cached blocks */
            runner_start(&rn);
            o.kind = OP_QUERY;
        } else {
            slot *sl = &live[(seed >> 12) % SLOTS];
            o.sl = sl;
            if (sl->at) {
                o.kind = OP_FREE;
                if ((seed >> 23) % 4) /* mostly on the stream of its use */
                    o.stream = sl->s == 0 ? NULL : sl->s <= 3 ? stream_n(sl->s) : cudaStreamPerThread;
                live_count--, live_bytes -= (int64_t)sl->n;
            } else {
                o.kind = OP_ALLOCATE;
                sl->n = (seed >> 25) & 1 ? (size_t)((seed >> 13) % 1500 + 1) * 256 - (seed & 255)
                                         : (size_t)((seed >> 13) % 6 + 1) * 256 * KiB;
            }
        }
        if (on_runner)
            runner_run(&rn, do_op, &o);
        else
            do_op(&o);
        if (o.kind == OP_ALLOCATE && o.st == CRMM_OK)
            live_count++, live_bytes += (int64_t)o.sl->n;
        ck_assert_msg(!violation, "%s, step %d: %s", params, step, violation);
        char msg[300];
        const char *e = broken(p, live_count, live_bytes, msg, sizeof msg);
        ck_assert_msg(!e, "%s, step %d: %s", params, step, e);
        ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), (uint64_t)live_bytes);
        ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED) - q(p, CRMM_QUERY_POOL_BLOCK_BYTES));
    }
    for (int k = 0; k < SLOTS; k++)
        if (live[k].at) {
            op o = {.p = p, .kind = OP_FREE, .sl = &live[k], .stream = NULL};
            do_op(&o);
        }
    runner_stop(&rn);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    char msg[300];
    const char *e = broken(p, 0, 0, msg, sizeof msg);
    ck_assert_msg(!e, "%s, at the end: %s", params, e);
    fake_vmm_order_hook = NULL;
    free(freed_ranges);
    freed_ranges = NULL;
    freed_room = 0;
    crmm_resource_release(p);
}

int main(void)
{
    return CRMM_TEST_MAIN_CASES("pool_stream_order", {"order", 0});
}
