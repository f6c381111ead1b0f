/* check_replay_streams.c — `crmm replay` times the allocator, not itself: which calls it makes
 * inside its timed region, on which stream, and on how many threads, seen without timing
 * anything. The program scripts CUDA's stream calls and clock_gettime (exported, so that libcrmm
 * and the tool's code land here) and receives every call of the crmm_recorder test plugin, all
 * into one ordered trace. A timed region is what lies between two clock reads. */
#include "build_config.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "../tools/replay.h"
#include "test_support.h"
#include "replay_logs.h"

/* ---- the trace ------------------------------------------------------------------------------ */

typedef struct trace_entry {
    char call;            /* a allocate, d deallocate, q query, c clock read, s synchronize,
                           * n stream created, x stream destroyed */
    const void *stream;
    uint64_t value;       /* size, query number, or the new stream's flags */
    pthread_t thread;
} trace_entry;

#define TRACE_MAX 8192
static trace_entry trace[TRACE_MAX];
static unsigned trace_len;
static int tracing;

static void add(char call, const void *stream, uint64_t value)
{
    if (!__atomic_load_n(&tracing, __ATOMIC_ACQUIRE))
        return;
    unsigned i = __atomic_fetch_add(&trace_len, 1, __ATOMIC_RELAXED);
    ck_assert_uint_lt(i, TRACE_MAX);
    trace[i] = (trace_entry){call, stream, value, pthread_self()};
}

/* The recorder plugin's report (tests/plugins/recorder_plugin.c). */
void crmm_test_trace_call(char call, const void *stream, uint64_t value);
void crmm_test_trace_call(char call, const void *stream, uint64_t value) { add(call, stream, value); }

/* ---- scripted CUDA and clock ---------------------------------------------------------------- */

static int stream_slots[16];
static unsigned streams_made;

int clock_gettime(clockid_t id, struct timespec *ts)
{
    add('c', NULL, (uint64_t)id);
    return (int)syscall(SYS_clock_gettime, id, ts);
}

cudaError_t cudaGetDeviceCount(int *count)
{
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    unsigned i = __atomic_fetch_add(&streams_made, 1, __ATOMIC_RELAXED);
    ck_assert_uint_lt(i, 16);
    *s = (cudaStream_t)&stream_slots[i];
    add('n', *s, flags);
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    add('x', s, 0);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    add('s', s, 0);
    return cudaSuccess;
}

/* ---- helpers -------------------------------------------------------------------------------- */

/* Five logged threads; sizes say the order: 100..., one leak (700), a free of 0x9 never
 * allocated (not replayed). */
static const char *log_text =
    FIVE_THREADS_UP_TO_THE_PEAK
    "22,10:00:00.000007,free,0x9000,5,0\n"
    "33,10:00:00.000008,free,0x3000,300,0\n";

/* The calls one pass makes, in order. */
static const char want_calls[] = {'a', 'a', 'd', 'a', 'd', 'a', 'd'};
static const uint64_t want_sizes[] = {100, 200, 100, 300, 200, 700, 300};
#define PASS_CALLS 7

static const char *config(const char *device_line)
{
    char text[256];
    snprintf(text, sizeof text, "[resource.r]\nplugin = recorder\n%s\n[crmm]\ndefault = r\n", device_line);
    return crmm_test_write_file(device_line[0] ? "device.ini" : "host.ini", text);
}

static crmm_test_output run(const char *cfg, const char *a1, const char *a2, const char *a3, const char *a4)
{
    const char *log = crmm_test_write_file("five.csv", log_text);
    char *argv[] = {"replay", (char *)log, "--config", (char *)cfg, (char *)a1, (char *)a2, (char *)a3, (char *)a4,
                    NULL};
    trace_len = 0;
    streams_made = 0;
    __atomic_store_n(&tracing, 1, __ATOMIC_RELEASE);
    crmm_test_output r = crmm_test_run_main(crmm_replay_main, argv);
    __atomic_store_n(&tracing, 0, __ATOMIC_RELEASE);
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    return r;
}

static unsigned count_of(char call, unsigned from, unsigned to)
{
    unsigned n = 0;
    for (unsigned i = from; i < to; i++)
        n += trace[i].call == call;
    return n;
}

/* The timed regions: pairs of clock reads. Checks that there are `repeats` of them, each with
 * exactly one pass's allocate/deallocate calls in the log's order on `streams` (any of them),
 * no query and nothing else but synchronizations of those streams. Returns the number of
 * distinct OS threads that made the calls. */
static unsigned check_timed_regions(unsigned repeats, const void *const *streams, unsigned nstreams)
{
    unsigned clocks[64], nclocks = 0;
    for (unsigned i = 0; i < trace_len; i++)
        if (trace[i].call == 'c') {
            ck_assert_uint_lt(nclocks, 64);
            clocks[nclocks++] = i;
        }
    ck_assert_msg(nclocks == 2 * repeats, "%u clock reads for %u timed repeats", nclocks, repeats);
    pthread_t threads[16];
    unsigned nthreads = 0;
    for (unsigned r = 0; r < repeats; r++) {
        unsigned from = clocks[2 * r] + 1, to = clocks[2 * r + 1], k = 0;
        for (unsigned i = from; i < to; i++) {
            const trace_entry *e = &trace[i];
            ck_assert_msg(e->call == 'a' || e->call == 'd' || e->call == 's',
                          "repeat %u: a '%c' call inside the timed region", r, e->call);
            bool known = false;
            for (unsigned s = 0; s < nstreams; s++)
                known |= e->stream == streams[s];
            ck_assert_msg(known, "repeat %u: a call on stream %p", r, e->stream);
            if (e->call == 's')
                continue;
            ck_assert_uint_lt(k, PASS_CALLS);
            ck_assert_int_eq(e->call, want_calls[k]);
            ck_assert_uint_eq(e->value, want_sizes[k]);
            k++;
            bool seen = false;
            for (unsigned t = 0; t < nthreads; t++)
                seen |= pthread_equal(threads[t], e->thread) != 0;
            if (!seen && nthreads < 16)
                threads[nthreads++] = e->thread;
        }
        ck_assert_uint_eq(k, PASS_CALLS);
    }
    /* the memory figures were asked for before the first timed region */
    ck_assert_uint_gt(count_of('q', 0, clocks[0]), 0);
    return nthreads;
}

/* ---- tests ---------------------------------------------------------------------------------- */

CRMM_TEST(by_default_one_new_non_blocking_stream_and_only_calls_in_the_timed_loop)
{
    crmm_test_output r = run(config("device = 0"), "--repeats", "3", NULL, NULL);
    ck_assert_uint_eq(count_of('n', 0, trace_len), 1);
    unsigned made = 0;
    while (trace[made].call != 'n')
        made++;
    ck_assert_uint_eq(trace[made].value, cudaStreamNonBlocking);
    const void *stream = trace[made].stream;
    ck_assert_ptr_nonnull(stream);
    ck_assert_uint_eq(check_timed_regions(3, &stream, 1), 1);
    /* the leak (700) freed after each pass, outside the clock, on the same stream */
    ck_assert_uint_eq(count_of('x', 0, trace_len), 1);
    for (unsigned i = 0; i < trace_len; i++)
        if (trace[i].call == 'a' || trace[i].call == 'd')
            ck_assert_ptr_eq(trace[i].stream, stream);
    ck_assert_msg(strstr(r.out, "stream: a new non-blocking stream"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "median of 3 repeats"), "%s", r.out);
    crmm_test_output_free(&r);
}

CRMM_TEST(the_default_and_per_thread_streams_on_request)
{
    const void *legacy = NULL, *per_thread = cudaStreamPerThread;
    crmm_test_output r = run(config("device = 0"), "--stream", "default", "--repeats", "2");
    ck_assert_uint_eq(count_of('n', 0, trace_len), 0);
    check_timed_regions(2, &legacy, 1);
    ck_assert_msg(strstr(r.out, "stream: the legacy default stream"), "%s", r.out);
    crmm_test_output_free(&r);
    r = run(config("device = 0"), "--stream", "per-thread", "--repeats", "1");
    ck_assert_uint_eq(count_of('n', 0, trace_len), 0);
    check_timed_regions(1, &per_thread, 1);
    crmm_test_output_free(&r);
}

CRMM_TEST(host_memory_gets_no_stream_and_no_cuda_call)
{
    const void *none = NULL;
    crmm_test_output r = run(config(""), "--repeats", "2", NULL, NULL);
    ck_assert_uint_eq(count_of('n', 0, trace_len) + count_of('s', 0, trace_len) + count_of('x', 0, trace_len), 0);
    check_timed_regions(2, &none, 1);
    ck_assert_msg(strstr(r.out, "stream: none (host memory)"), "%s", r.out);
    crmm_test_output_free(&r);
}

CRMM_TEST(threads_mode_uses_at_most_n_os_threads_each_with_its_stream)
{
    crmm_test_output r = run(config("device = 0"), "--threads", "2", "--repeats", "2");
    ck_assert_uint_eq(count_of('n', 0, trace_len), 2); /* five logged threads, two streams */
    const void *streams[2];
    for (unsigned i = 0, k = 0; i < trace_len; i++)
        if (trace[i].call == 'n') {
            ck_assert_uint_eq(trace[i].value, cudaStreamNonBlocking);
            streams[k++] = trace[i].stream;
        }
    ck_assert_uint_eq(check_timed_regions(2, streams, 2), 2);
    ck_assert_uint_eq(count_of('x', 0, trace_len), 2);
    ck_assert_msg(strstr(r.out, "the 5 logged threads on 2 OS threads"), "%s", r.out);
    crmm_test_output_free(&r);
}

int main(void)
{
    return crmm_test_main("replay_streams", 0);
}
