/* pool_expandable_replay.c — replays an allocation log through an expandable pool over the
 * scripted driver of fake_vmm.h and says, per pass, what the pool asked of the device: growths,
 * device synchronizations, pages mapped and unmapped, and the most it held against the most that
 * was live. A development tool (built with the tests, not run by them) for the policy in
 * plugins/pool/pool_expand.c, which crmm replay can only time on a GPU.
 *
 *   tests/pool_expandable_replay [--repeats N] [--page BYTES] [--params "k=v ..."] [--trace PASS] [--gaps LINE]
 *                                [--streams] [--busy CALLS] [--event-lag CALLS] [--capture STREAM]
 *                                [--shuffle-small-frees SEED] LOG.csv
 *
 * The passes are those of `crmm replay`: the log's calls in order on one stream (with --streams,
 * on a stream of their own for each stream the log names, as the process made them), every
 * allocation the log leaves live freed after each pass, all on one pool instance; pass 0 is the
 * untimed one, 1..N the repeats. --trace PASS prints every allocation of that pass that synchronized or
 * unmapped pages, and every one that raised the most the pool held, with its free bytes and its
 * largest free block then; with it, --gaps LINE counts the gaps between the live blocks by size
 * after the allocation on that line of the log (where the held memory the live blocks do not use
 * lies). The device has the allocation granularity --page (default 2 MiB, an H200's)
 * and 141 GiB of memory. --busy CALLS models a GPU that runs behind the host: cudaStreamQuery says
 * the stream is busy until CALLS of the log's calls after the last free (for page_moves = idle);
 * --event-lag CALLS likewise says an event has not completed until CALLS of the log's calls after
 * the last cudaEventRecord.
 * --capture STREAM (a stream the log names, as it writes it; implies --streams) captures that
 * stream's calls into a scripted CUDA graph, from its first call to the last before another
 * stream's (a program's later frees of the graph's blocks come after the capture), and says what the
 * graph's allocations touched: how many distinct addresses and 2 MiB pages, over what span of
 * addresses, and how much the graph holds at the capture's end; the graph is destroyed at the end
 * of each pass. --shuffle-small-frees SEED reorders, within each run of consecutive frees, the
 * frees of blocks of up to 8 KiB of each stream among themselves (a seeded shuffle): the order that
 * changes from one process to the next when PyTorch releases a step's small tensors. */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include <cuda_runtime_api.h>
#include <crmm/crmm.h>
#include <crmm/pool.h>
#include "../tools/replay.h"
#include "fakes/fake_vmm.h"
#include "fakes/fake_capture.h"

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

typedef struct pass_counts {
    int syncs, growths, maps, unmaps, creates;
    uint64_t peak_reserved, peak_live;
} pass_counts;

static uint64_t reserved_of(crmm_resource *mr)
{
    uint64_t v = 0;
    crmm_resource_query(mr, CRMM_QUERY_BYTES_RESERVED, &v);
    return v;
}

/* One pass over the log; returns false when an allocation failed. */
static size_t busy_calls; /* --busy */
static size_t event_lag;  /* --event-lag */
static unsigned gaps_line; /* --gaps */
static bool own_streams;    /* --streams */
static uint64_t capture_stream; /* --capture, as the log names it; 0: none */

/* The stream an event runs on: one stream for the whole log, or with --streams a stream of its own
 * for each stream the log names (in order of first appearance; at most 64, the rest share the last). */
static cudaStream_t stream_of(const replay_event *ev)
{
    static uint64_t seen[64];
    static size_t count;
    if (!own_streams)
        return (cudaStream_t)(uintptr_t)0x1000;
    size_t k = 0;
    while (k < count && seen[k] != ev->stream)
        k++;
    if (k == count && count < 64)
        seen[count++] = ev->stream;
    if (k == 64)
        k = 63;
    return (cudaStream_t)(uintptr_t)(0x1000 + 0x100 * k);
}

/* The log --shuffle-small-frees works on, for by_stream (the tool runs one replay at a time). */
static const replay_event *shuffled_events;

/* Whether event k frees a block of up to 8 KiB. */
static bool small_free(const replay_event *ev, size_t k)
{
    return ev[k].action == REPLAY_FREE && ev[k].pair >= 0 && ev[ev[k].pair].size <= 8192;
}

/* qsort order of event indices: by stream, then by place in the log */
static int by_stream(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    uint64_t sa = shuffled_events[a].stream, sb = shuffled_events[b].stream;
    return sa != sb ? (sa < sb ? -1 : 1) : (a > b) - (a < b);
}

/* --shuffle-small-frees: within each run of consecutive frees, shuffle the frees of blocks of up to
 * 8 KiB of each stream among their places (Fisher-Yates, xorshift64 seeded by `seed`), keeping
 * every allocation's index of its free true. False when there is no memory for it. */
static bool shuffle_small_frees(replay_log *log, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    size_t *at = malloc((log->count ? log->count : 1) * sizeof *at);
    if (!at)
        return false;
    replay_event *ev = log->events;
    shuffled_events = ev;
    for (size_t i = 0, j; i < log->count; i = j) {
        size_t n = 0;
        for (j = i; j < log->count && ev[j].action == REPLAY_FREE; j++)
            if (small_free(ev, j))
                at[n++] = j;
        if (j == i)
            j++;
        qsort(at, n, sizeof *at, by_stream);
        for (size_t lo = 0, hi; lo < n; lo = hi) { /* at[lo, hi): one stream's small frees */
            for (hi = lo + 1; hi < n && ev[at[hi]].stream == ev[at[lo]].stream; hi++)
                ;
            for (size_t m = hi - lo; m > 1; m--) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                size_t a = at[lo + m - 1], b = at[lo + x % m];
                replay_event t = ev[a];
                ev[a] = ev[b];
                ev[b] = t;
                ev[ev[a].pair].pair = (int64_t)a;
                ev[ev[b].pair].pair = (int64_t)b;
            }
        }
    }
    free(at);
    return true;
}

/* --trace: a new peak of what the pool holds, with its free bytes and largest free block. */
static void print_peak(crmm_resource *mr, const replay_event *ev, uint64_t live, uint64_t reserved)
{
    uint64_t blocks = 0, largest = 0;
    crmm_resource_query(mr, CRMM_QUERY_POOL_BLOCK_BYTES, &blocks);
    crmm_resource_query(mr, CRMM_QUERY_LARGEST_FREE_BLOCK, &largest);
    printf("  line %u: %llu B, held %.1f MiB (a new peak), live %.1f MiB, free %.2f MiB, largest free %.2f MiB\n",
           ev->line, (unsigned long long)ev->size, (double)reserved / MiB, (double)live / MiB,
           (double)(reserved - blocks) / MiB, (double)largest / MiB);
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = ((const uintptr_t *)a)[0], y = ((const uintptr_t *)b)[0];
    return x < y ? -1 : x > y;
}

/* --gaps LINE: the gaps between the live blocks (sizes rounded up to 256 bytes) after the
 * allocation of log index `upto`, counted by size; gaps include pages the pool does not map. */
static void print_gaps(const replay_log *log, void *const *ptrs, size_t upto)
{
    static const size_t edges[] = {4 << 10, 64 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20, 16 << 20, SIZE_MAX};
    enum { classes = sizeof edges / sizeof edges[0] };
    uintptr_t (*live)[2] = malloc(sizeof *live * (upto + 1));
    size_t n = 0, count[classes] = {0}, bytes[classes] = {0};
    if (!live)
        return;
    for (size_t j = 0; j <= upto; j++)
        if (ptrs[j] && log->events[j].action == REPLAY_ALLOCATE) {
            live[n][0] = (uintptr_t)ptrs[j];
            live[n][1] = (log->events[j].size + 255) & ~(size_t)255;
            n++;
        }
    qsort(live, n, sizeof *live, by_address);
    for (size_t j = 1; j < n; j++) {
        uintptr_t end = live[j - 1][0] + live[j - 1][1];
        if (live[j][0] > end) {
            size_t gap = live[j][0] - end, k = 0;
            while (gap > edges[k])
                k++;
            count[k]++;
            bytes[k] += gap;
        }
    }
    printf("  gaps between %zu live blocks:\n", n);
    for (size_t k = 0; k < classes; k++)
        if (count[k] && k + 1 < classes)
            printf("    up to %zu KiB: %zu, %.2f MiB\n", edges[k] >> 10, count[k], (double)bytes[k] / MiB);
        else if (count[k])
            printf("    larger: %zu, %.2f MiB\n", count[k], (double)bytes[k] / MiB);
    free(live);
}

static int by_value(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* --capture: what the capture's allocations (n of them, addresses at[], sizes len[]) touched, and
 * what the graph holds once it ended (all the pool holds beyond free and live bytes). */
static void print_capture(crmm_resource *mr, uintptr_t *at, const size_t *len, size_t n)
{
    uint64_t reserved = reserved_of(mr), free_bytes = 0, in_use = 0;
    crmm_resource_query(mr, CRMM_QUERY_BYTES_FREE, &free_bytes);
    crmm_resource_query(mr, CRMM_QUERY_BYTES_IN_USE, &in_use);
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    size_t pages = 0, distinct = 0;
    uintptr_t *pg = malloc((n ? n : 1) * 2 * sizeof *pg);
    for (size_t i = 0; i < n; i++) {
        lo = at[i] < lo ? at[i] : lo;
        hi = at[i] + len[i] > hi ? at[i] + len[i] : hi;
        if (pg) {
            pg[2 * i] = at[i] >> 21;
            pg[2 * i + 1] = (at[i] + len[i] - 1) >> 21;
        }
    }
    qsort(at, n, sizeof *at, by_value);
    for (size_t i = 0; i < n; i++)
        distinct += i == 0 || at[i] != at[i - 1];
    if (pg) { /* pages: each allocation's first and last (the capture's blocks are small or few) */
        qsort(pg, 2 * n, sizeof *pg, by_value);
        for (size_t i = 0; i < 2 * n; i++)
            pages += i == 0 || pg[i] != pg[i - 1];
        free(pg);
    }
    printf("  capture: %zu allocations at %zu addresses, first and last bytes on %zu pages of 2 MiB, span %.1f MiB, "
           "graph holds %.2f MiB\n",
           n, distinct, pages, n ? (double)(hi - lo) / MiB : 0.0, (double)(reserved - free_bytes - in_use) / MiB);
}

static bool play_pass(const replay_log *log, crmm_resource *mr, void **ptrs, bool trace,
                      pass_counts *pc)
{
    size_t last_free = 0;
    fake_vmm_state before = fake_vmm;
    uint64_t live = 0;
    memset(pc, 0, sizeof *pc);
    pc->peak_reserved = reserved_of(mr);
    size_t cap_first = SIZE_MAX, cap_last = 0, cap_n = 0;
    for (size_t i = 0; capture_stream && i < log->count; i++) {
        if (log->events[i].stream == capture_stream) {
            cap_first = i < cap_first ? i : cap_first;
            cap_last = i;
        } else if (cap_first != SIZE_MAX) {
            break; /* the capture ends where another stream's calls start */
        }
    }
    uintptr_t *cap_at = cap_first != SIZE_MAX ? calloc(cap_last - cap_first + 1, sizeof *cap_at) : NULL;
    size_t *cap_len = cap_at ? calloc(cap_last - cap_first + 1, sizeof *cap_len) : NULL;
    fake_graph *graph = NULL;
    int records_seen = fake_vmm.event_records;
    size_t last_record = 0;
    for (size_t i = 0; i < log->count; i++) {
        const replay_event *ev = &log->events[i];
        if (i == cap_first && cap_len)
            graph = fake_capture_begin(stream_of(ev), cudaStreamCaptureModeGlobal);
        if (ev->action == REPLAY_ALLOCATE && ev->size) {
            fake_vmm.streams_busy = busy_calls && i - last_free < busy_calls;
            if (fake_vmm.event_records != records_seen)
                records_seen = fake_vmm.event_records, last_record = i;
            fake_vmm.events_busy = event_lag && i - last_record < event_lag;
            int syncs = fake_vmm.device_syncs, unmaps = fake_vmm.unmaps, maps = fake_vmm.maps;
            uint64_t reserved = reserved_of(mr);
            if (crmm_resource_allocate(mr, ev->size, (crmm_cuda_stream_t)stream_of(ev), &ptrs[i]) != CRMM_OK) {
                fprintf(stderr, "line %u: %s\n", ev->line, crmm_last_error());
                return false;
            }
            if (graph && ev->stream == capture_stream) {
                cap_at[cap_n] = (uintptr_t)ptrs[i];
                cap_len[cap_n++] = ev->size;
            }
            live += ev->size;
            if (live > pc->peak_live)
                pc->peak_live = live;
            uint64_t now = reserved_of(mr);
            if (now > pc->peak_reserved) {
                pc->peak_reserved = now;
                if (trace)
                    print_peak(mr, ev, live, now);
            }
            if (trace && ev->line == gaps_line)
                print_gaps(log, ptrs, i);
            if (trace && (fake_vmm.device_syncs != syncs || fake_vmm.unmaps != unmaps))
                printf("  line %u: %llu B, live %.1f MiB, reserved %.1f -> %.1f MiB: %d sync, %d unmapped, %d mapped\n",
                       ev->line, (unsigned long long)ev->size, (double)(live - ev->size) / MiB, (double)reserved / MiB,
                       (double)now / MiB, fake_vmm.device_syncs - syncs, fake_vmm.unmaps - unmaps, fake_vmm.maps - maps);
        } else if (ev->action == REPLAY_FREE && ev->pair >= 0 && ptrs[ev->pair]) {
            const replay_event *a = &log->events[ev->pair];
            crmm_resource_deallocate(mr, ptrs[ev->pair], a->size, (crmm_cuda_stream_t)stream_of(ev));
            ptrs[ev->pair] = NULL;
            live -= a->size;
            last_free = i;
        }
        if (graph && i == cap_last) {
            fake_capture_end(stream_of(ev));
            if (trace)
                print_capture(mr, cap_at, cap_len, cap_n);
        }
    }
    if (graph)
        fake_graph_destroy(graph);
    free(cap_at);
    free(cap_len);
    for (size_t i = 0; i < log->count; i++)
        if (ptrs[i]) {
            crmm_resource_deallocate(mr, ptrs[i], log->events[i].size, (crmm_cuda_stream_t)stream_of(&log->events[i]));
            ptrs[i] = NULL;
        }
    pc->syncs = fake_vmm.device_syncs - before.device_syncs;
    pc->growths = fake_vmm.set_access - before.set_access; /* one cuMemSetAccess per growth */
    pc->maps = fake_vmm.maps - before.maps;
    pc->unmaps = fake_vmm.unmaps - before.unmaps;
    pc->creates = fake_vmm.creates - before.creates;
    return true;
}

/* What main parsed, for run_replay. */
struct run {
    const char *path, *params;
    size_t page;
    unsigned repeats;
    int trace, status;
    bool shuffle;          /* --shuffle-small-frees given */
    uint64_t shuffle_seed;
};
static struct run the_run;

/* Replay the log as `r` says; 0 when every pass ran, 1 when something failed. */
static int run_replay(struct run *r)
{
    replay_log log;
    if (replay_log_read(r->path, &log) != CRMM_OK) {
        fprintf(stderr, "%s\n", crmm_last_error());
        return r->status = 1;
    }
    if (r->shuffle && !shuffle_small_frees(&log, r->shuffle_seed)) {
        fprintf(stderr, "--shuffle-small-frees: malloc failed\n");
        replay_log_free(&log);
        return r->status = 1;
    }
    fake_vmm_reset(r->page, 141 * GiB);
    if (capture_stream)
        crmm_graph_capture_enable(true); /* as a program that captures says */
    crmm_resource *mr = NULL;
    void **ptrs = calloc(log.count ? log.count : 1, sizeof *ptrs);
    if (!ptrs || fake_vmm_expandable_pool(r->params, &mr) != CRMM_OK) {
        fprintf(stderr, "%s\n", ptrs ? crmm_last_error() : "malloc failed");
        free(ptrs);
        replay_log_free(&log);
        return r->status = 1;
    }
    printf("%s: %zu events, page %zu KiB\n", r->path, log.count, r->page >> 10);
    printf("pass  syncs  growths  maps  unmaps  creates  peak_reserved_MiB  peak_live_MiB  ratio\n");
    for (unsigned pass = 0; pass <= r->repeats; pass++) {
        pass_counts pc;
        if (!play_pass(&log, mr, ptrs, (int)pass == r->trace, &pc)) {
            r->status = 1;
            break;
        }
        printf("%4u  %5d  %7d  %4d  %6d  %7d  %17.1f  %13.1f  %.4f\n", pass, pc.syncs, pc.growths, pc.maps, pc.unmaps,
               pc.creates, (double)pc.peak_reserved / MiB, (double)pc.peak_live / MiB,
               pc.peak_live ? (double)pc.peak_reserved / (double)pc.peak_live : 0.0);
        uint64_t hits = 0, misses = 0;
        if (crmm_resource_query(mr, CRMM_QUERY_POOL_PLAN_HITS, &hits) == CRMM_OK &&
            crmm_resource_query(mr, CRMM_QUERY_POOL_PLAN_MISSES, &misses) == CRMM_OK && hits + misses)
            printf("      plan so far: %llu requests served as planned, %llu not\n", (unsigned long long)hits,
                   (unsigned long long)misses);
        if (event_lag) /* memory released while still mapped counts until its last mapping goes */
            printf("      device memory peak so far: %.1f MiB\n", (double)fake_vmm.physical_peak / MiB);
        fflush(stdout);
    }
    crmm_resource_release(mr);
    free(ptrs);
    replay_log_free(&log);
    return r->status;
}

START_TEST(replay_under_check)
{
    run_replay(&the_run);
}
END_TEST

static int usage(void)
{
    fprintf(stderr, "usage: pool_expandable_replay [--repeats N] [--page BYTES] [--params \"k=v ...\"] [--trace PASS] "
                    "[--gaps LINE] [--streams] [--busy CALLS] [--event-lag CALLS] [--capture STREAM] [--shuffle-small-frees SEED] "
                    "LOG.csv\n");
    return 2;
}

int main(int argc, char **argv)
{
    unsigned repeats = 3;
    size_t page = 2 * MiB;
    const char *params = "", *path = NULL;
    int trace = -1;
    bool shuffle = false;
    uint64_t shuffle_seed = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc)
            repeats = (unsigned)strtoul(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--page") == 0 && i + 1 < argc)
            page = (size_t)strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--params") == 0 && i + 1 < argc)
            params = argv[++i];
        else if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc)
            trace = atoi(argv[++i]);
        else if (strcmp(argv[i], "--streams") == 0)
            own_streams = true;
        else if (strcmp(argv[i], "--gaps") == 0 && i + 1 < argc)
            gaps_line = (unsigned)strtoul(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--capture") == 0 && i + 1 < argc)
            capture_stream = strtoull(argv[++i], NULL, 0), own_streams = true;
        else if (strcmp(argv[i], "--busy") == 0 && i + 1 < argc)
            busy_calls = (size_t)strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--event-lag") == 0 && i + 1 < argc)
            event_lag = (size_t)strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--shuffle-small-frees") == 0 && i + 1 < argc)
            shuffle = true, shuffle_seed = strtoull(argv[++i], NULL, 0);
        else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else
            return usage();
    }
    if (!path || !page || (page & (page - 1)))
        return usage();
    the_run = (struct run){path, params, page, repeats, trace, 0, shuffle, shuffle_seed};
    if (!capture_stream)
        return run_replay(&the_run);
    /* the scripted capture asserts with Check, which wants a test runner: one test, not forked */
    Suite *suite = suite_create("replay");
    TCase *tc = tcase_create("replay");
    tcase_add_test(tc, replay_under_check);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_SILENT);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : the_run.status;
}
