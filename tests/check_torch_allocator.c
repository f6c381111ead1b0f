/* check_torch_allocator.c — crmm_torch_allocate / crmm_torch_deallocate (crmm/torch.h), the
 * functions PyTorch's CUDAPluggableAllocator calls, over host-memory configs on the CPU.
 *
 * This program defines the CUDA calls the path makes (device count, get and set device) and is
 * linked with -export-dynamic, so libcrmm's calls land here: two pretend devices, a current
 * device per thread as in CUDA, and every call counted. The configs are host chains (statistics
 * over host, so the tests can see what reached the device's resource). Each test runs in its own
 * process (Check's fork mode), so each starts with crmm uninitialised, as a fresh PyTorch
 * process does. */
#include "build_config.h"
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include <crmm/torch.h>
#include "test_support.h"
#include "peer_process.h"
#include "probe_resource.h"

/* ---- the scripted CUDA ------------------------------------------------------------------- */

#define FAKE_DEVICES 2

static _Thread_local int current_device;
static int cuda_calls;      /* every call below, from any thread */
static int set_device_log[8]; /* the arguments of the first cudaSetDevice calls */
static int set_device_calls;

static void count_call(void) { __atomic_add_fetch(&cuda_calls, 1, __ATOMIC_RELAXED); }

cudaError_t cudaGetDeviceCount(int *count)
{
    count_call();
    *count = FAKE_DEVICES;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    count_call();
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    count_call();
    if (device < 0 || device >= FAKE_DEVICES)
        return cudaErrorInvalidDevice;
    int n = __atomic_fetch_add(&set_device_calls, 1, __ATOMIC_RELAXED);
    if (n < 8)
        set_device_log[n] = device;
    current_device = device;
    return cudaSuccess;
}

/* The devices' memory, for torch.cuda.set_per_process_memory_fraction: 64 MiB each. */
#define FAKE_DEVICE_MEMORY ((size_t)64 << 20)

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    count_call();
    *free_bytes = *total = FAKE_DEVICE_MEMORY;
    return cudaSuccess;
}

/* Events, for tensor.record_stream (crmm_torch_record_stream): each call is logged in order. An
 * event's handle is its number; a refused wait or host wait is scripted per test. */
typedef struct event_call {
    char what;                  /* 'r' record, 'w' stream wait, 's' host wait, 'd' destroy */
    uintptr_t event;
    crmm_cuda_stream_t stream;  /* recorded on, or made to wait */
    int live_then;              /* the probe's live blocks at the call (-1: no probe) */
} event_call;
static event_call event_log[64];
static int event_calls, events_made;
static int refuse_waits, refuse_host_waits;
static int *live_watch; /* the probe's live count, when a test watches it */

static void log_event(char what, cudaEvent_t ev, cudaStream_t stream)
{
    count_call();
    if (event_calls < 64)
        event_log[event_calls] = (event_call){what, (uintptr_t)ev, (crmm_cuda_stream_t)stream,
                                              live_watch ? *live_watch : -1};
    event_calls++;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags)
{
    (void)flags;
    count_call();
    *ev = (cudaEvent_t)(uintptr_t)++events_made;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t stream)
{
    log_event('r', ev, stream);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t ev, unsigned flags)
{
    (void)flags;
    log_event('w', ev, stream);
    return refuse_waits ? cudaErrorStreamCaptureIsolation : cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    log_event('s', ev, NULL);
    return refuse_host_waits ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    log_event('d', ev, NULL);
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void) { return cudaSuccess; }

/* How many logged event calls of kind `what` name `stream`. */
static int event_calls_on(char what, crmm_cuda_stream_t stream)
{
    int n = 0;
    for (int i = 0; i < event_calls && i < 64; i++)
        n += event_log[i].what == what && event_log[i].stream == stream;
    return n;
}

/* ---- configs and helpers ----------------------------------------------------------------- */

/* Every device starts with `stats`, a statistics layer over host memory. */
static const char *const STATS_OVER_HOST = "[resource.host]\nplugin = host\n"
                                           "[resource.stats]\nplugin = statistics\nupstream = host\n"
                                           "[crmm]\ndefault = stats\n";

static void use_config(const char *text) { setenv("CRMM_CONFIG", crmm_test_write_file("crmm.ini", text), 1); }

static uint64_t live_allocations(crmm_resource *mr) { return crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS); }

/* A probe (probe_resource.h) records the fake current device at its calls. */
static int fake_current_device(void) { return current_device; }
static const probe_memory host_on_fake_devices = {.current_device = fake_current_device};

#define STREAM_A ((crmm_cuda_stream_t)0x5a00) /* handles no real CUDA call ever sees */
#define STREAM_B ((crmm_cuda_stream_t)0x5b00)
#define STREAM_C ((crmm_cuda_stream_t)0x5c00)

/* ---- tests ------------------------------------------------------------------------------- */

CRMM_TEST(round_trip_through_the_devices_resource)
{
    use_config(STATS_OVER_HOST);
    void *p = crmm_torch_allocate(1000, 0, NULL);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq((uintptr_t)p % CRMM_ALLOCATION_ALIGNMENT, 0);
    memset(p, 0xab, 1000); /* host memory: it must be usable */
    crmm_resource *mr = crmm_get_per_device_resource(0);
    ck_assert_str_eq(crmm_resource_name(mr), "stats"); /* the config's default, loaded by the first call */
    ck_assert_uint_eq(live_allocations(mr), 1);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 1000);
    crmm_torch_deallocate(p, 1000, 0, NULL);
    ck_assert_uint_eq(live_allocations(mr), 0);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS_TOTAL), 1);
}

CRMM_TEST(each_call_uses_the_devices_current_resource)
{
    use_config(STATS_OVER_HOST);
    void *first = crmm_torch_allocate(64, 0, NULL);
    ck_assert_ptr_nonnull(first);
    crmm_resource *old = crmm_get_per_device_resource(0);
    crmm_torch_deallocate(first, 64, 0, NULL);

    /* replace device 0's resource: the next calls go to the new one */
    crmm_resource *fresh = crmm_test_create_over_host("statistics", NULL);
    crmm_resource *prev = crmm_set_per_device_resource(0, fresh);
    ck_assert_ptr_eq(prev, old);
    void *p = crmm_torch_allocate(128, 0, NULL);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(live_allocations(fresh), 1);
    ck_assert_uint_eq(crmm_test_query(prev, CRMM_QUERY_ALLOCATIONS_TOTAL), 1); /* only `first` */

    /* device 1 has a resource of its own */
    void *q = crmm_torch_allocate(256, 1, NULL);
    ck_assert_ptr_nonnull(q);
    crmm_resource *dev1 = crmm_get_per_device_resource(1);
    ck_assert_ptr_ne(dev1, fresh);
    ck_assert_uint_eq(live_allocations(dev1), 1);
    ck_assert_uint_eq(live_allocations(fresh), 1);

    crmm_torch_deallocate(q, 256, 1, NULL);
    crmm_torch_deallocate(p, 128, 0, NULL);
    ck_assert_uint_eq(live_allocations(dev1), 0);
    ck_assert_uint_eq(live_allocations(fresh), 0);
    crmm_test_release(prev, fresh);
}

CRMM_TEST(the_named_device_is_current_during_the_call_and_the_stream_is_passed)
{
    use_config(STATS_OVER_HOST);
    probe_resource *probe = probe_resource_new(&host_on_fake_devices, CRMM_RESOURCE_DEVICE_ACCESSIBLE, 1);
    ck_assert_ptr_null(crmm_set_per_device_resource(1, &probe->base));

    current_device = 0;
    set_device_calls = 0;
    void *p = crmm_torch_allocate(4096, 1, STREAM_A);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(probe->live, 1); /* the block is the probe's */
    ck_assert_int_eq(probe->alloc_device, 1);
    ck_assert_ptr_eq(probe->alloc_stream, STREAM_A);
    ck_assert_int_eq(current_device, 0); /* the caller's device is back */
    ck_assert_int_eq(set_device_calls, 2);
    ck_assert_int_eq(set_device_log[0], 1);
    ck_assert_int_eq(set_device_log[1], 0);

    crmm_torch_deallocate(p, 4096, 1, CRMM_CUDA_STREAM_PER_THREAD);
    ck_assert_int_eq(probe->free_device, 1);
    ck_assert_ptr_eq(probe->free_stream, CRMM_CUDA_STREAM_PER_THREAD);
    ck_assert_int_eq(probe->live, 0);
    ck_assert_int_eq(current_device, 0);
    crmm_resource_release(&probe->base);
}

CRMM_TEST(size_zero_is_null_and_touches_nothing)
{
    use_config(STATS_OVER_HOST);
    ck_assert_ptr_null(crmm_torch_allocate(0, 0, NULL));
    crmm_torch_deallocate(NULL, 0, 0, NULL);
    crmm_torch_deallocate(NULL, 64, 0, NULL);
    ck_assert_int_eq(cuda_calls, 0);
    ck_assert_ptr_null(crmm_current_config()); /* nothing was initialised */

    /* after initialisation too: the device's resource sees nothing */
    void *p = crmm_torch_allocate(8, 0, NULL);
    crmm_resource *mr = crmm_get_per_device_resource(0);
    ck_assert_ptr_null(crmm_torch_allocate(0, 0, NULL));
    crmm_torch_deallocate(NULL, 0, 0, NULL);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS_TOTAL), 1);
    crmm_torch_deallocate(p, 8, 0, NULL);
}

CRMM_TEST(bad_arguments_give_null_and_a_message)
{
    use_config(STATS_OVER_HOST);
    void *p = crmm_torch_allocate(16, 0, NULL); /* initialise first, so that the log is set up */
    crmm_resource *mr = crmm_get_per_device_resource(0);
    crmm_test_log_capture_begin();
    ck_assert_ptr_null(crmm_torch_allocate(-1, 0, NULL));
    ck_assert_ptr_null(crmm_torch_allocate(16, 5, NULL));
    ck_assert_ptr_null(crmm_torch_allocate(16, -1, NULL));
    crmm_torch_deallocate(p, -16, 0, NULL); /* refused: p stays allocated */
    char *log = crmm_test_log_capture_end();
    ck_assert_ptr_nonnull(strstr(log, "crmm_torch_allocate: negative size -1"));
    ck_assert_ptr_nonnull(strstr(log, "device 5 does not exist"));
    ck_assert_ptr_nonnull(strstr(log, "device -1 is not a device ordinal"));
    ck_assert_ptr_nonnull(strstr(log, "crmm_torch_deallocate"));
    free(log);
    ck_assert_uint_eq(live_allocations(mr), 1);
    crmm_torch_deallocate(p, 16, 0, NULL);
    ck_assert_uint_eq(live_allocations(mr), 0);
}

CRMM_TEST(out_of_memory_gives_null_and_the_resources_message)
{
    use_config("[resource.host]\nplugin = host\n"
               "[resource.small]\nplugin = limiting\nupstream = host\nallocation_limit = 1MiB\n"
               "[crmm]\ndefault = small\n");
    void *p = crmm_torch_allocate(512 << 10, 0, NULL);
    ck_assert_ptr_nonnull(p);
    crmm_test_log_capture_begin();
    ck_assert_ptr_null(crmm_torch_allocate(1 << 20, 0, NULL));
    char *log = crmm_test_log_capture_end();
    ck_assert_ptr_nonnull(strstr(log, "out of memory: crmm_torch_allocate: 1048576 bytes on device 0: "));
    free(log);
    crmm_torch_deallocate(p, 512 << 10, 0, NULL);
    p = crmm_torch_allocate(1 << 20, 0, NULL); /* the limit counts the free */
    ck_assert_ptr_nonnull(p);
    crmm_torch_deallocate(p, 1 << 20, 0, NULL);
}

/* A config that cannot be loaded: every allocation is NULL, and stderr gets one message that
 * says what failed and how to fix it. Run in a child whose stderr is a pipe. */
static const char *const BROKEN_CONFIGS[] = {
    "[resource.main]\nplugin = no_such_plugin\n", /* an unknown plugin */
    NULL,                                           /* a file that does not exist */
};

CRMM_LOOP_TEST(a_broken_config_gives_null_and_one_clear_message, 2)
{
    char path[4096];
    if (BROKEN_CONFIGS[_i]) {
        snprintf(path, sizeof path, "%s", crmm_test_write_file("broken.ini", BROKEN_CONFIGS[_i]));
    } else {
        char *dir = crmm_test_tmpdir();
        ck_assert_ptr_nonnull(dir);
        snprintf(path, sizeof path, "%s/missing.ini", dir);
        free(dir);
    }
    int fd;
    pid_t pid = crmm_test_fork_peer(CRMM_TEST_PIPE, &fd);
    if (pid == 0) {
        dup2(fd, 2);
        close(fd);
        setenv("CRMM_CONFIG", path, 1);
        void *a = crmm_torch_allocate(64, 0, NULL);
        void *b = crmm_torch_allocate(64, 0, NULL);
        crmm_torch_deallocate(a, 64, 0, NULL);
        _exit(a == NULL && b == NULL ? 0 : 3);
    }
    char *err = crmm_test_read_stream(fdopen(fd, "r"));
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "an allocation did not return NULL; stderr: %s", err);
    ck_assert_msg(crmm_test_count(err, "crmm: the PyTorch allocator cannot start: ") == 1, "stderr: %s", err);
    ck_assert_msg(strstr(err, path) != NULL, "the message does not name %s: %s", path, err);
    ck_assert_msg(strstr(err, "$CRMM_CONFIG") != NULL, "stderr: %s", err);
    ck_assert_msg(strstr(err, "crmm check-config FILE") != NULL, "stderr: %s", err);
    if (BROKEN_CONFIGS[_i])
        ck_assert_msg(strstr(err, "no_such_plugin") != NULL, "the reason is missing: %s", err);
    free(err);
}

/* Threads allocate and free at once, the first calls racing with initialisation. */
#define THREADS 8
#define ROUNDS 2000
#define HELD 16

static pthread_barrier_t start_line;

static void *churn(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    unsigned char *held[HELD] = {0};
    size_t sizes[HELD] = {0};
    uint64_t rng = 0x9e3779b97f4a7c15ull * (id + 1);
    pthread_barrier_wait(&start_line);
    for (int r = 0; r < ROUNDS; r++) {
        int slot = (int)(crmm_test_rand(&rng) % HELD);
        if (held[slot]) {
            for (size_t i = 0; i < sizes[slot]; i++)
                if (held[slot][i] != (unsigned char)id)
                    return (void *)"a block was overwritten while held";
            crmm_torch_deallocate(held[slot], (ssize_t)sizes[slot], (int)(id % FAKE_DEVICES), NULL);
            held[slot] = NULL;
        }
        sizes[slot] = 1 + crmm_test_rand(&rng) % 4096;
        held[slot] = crmm_torch_allocate((ssize_t)sizes[slot], (int)(id % FAKE_DEVICES), NULL);
        if (!held[slot])
            return (void *)"an allocation failed";
        memset(held[slot], (int)id, sizes[slot]);
    }
    for (int s = 0; s < HELD; s++)
        crmm_torch_deallocate(held[s], (ssize_t)sizes[s], (int)(id % FAKE_DEVICES), NULL);
    return NULL;
}

CRMM_TEST(many_threads)
{
    use_config(STATS_OVER_HOST);
    pthread_t t[THREADS];
    ck_assert_int_eq(pthread_barrier_init(&start_line, NULL, THREADS), 0);
    for (uintptr_t i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, churn, (void *)i), 0);
    for (int i = 0; i < THREADS; i++) {
        void *failure;
        pthread_join(t[i], &failure);
        ck_assert_msg(failure == NULL, "thread %d: %s", i, (const char *)failure);
    }
    pthread_barrier_destroy(&start_line);
    /* a host chain is one instance for all devices */
    crmm_resource *mr = crmm_get_per_device_resource(0);
    ck_assert_ptr_eq(crmm_get_per_device_resource(1), mr);
    ck_assert_uint_eq(live_allocations(mr), 0);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS_TOTAL), (uint64_t)ROUNDS * THREADS);
}

/* Once the process exits, neither function calls CUDA or the resource: a handler registered
 * before crmm's exit hook runs after it and frees a live block, as PyTorch's last tensors are
 * freed at exit. */
static void *block_at_exit;
static crmm_resource *resource_at_exit;

static void free_after_exit_began(void)
{
    int before = cuda_calls;
    crmm_torch_deallocate(block_at_exit, 64, 0, NULL);
    void *late = crmm_torch_allocate(64, 0, NULL);
    int ok = cuda_calls == before && late == NULL && live_allocations(resource_at_exit) == 1;
    _exit(ok ? 0 : 4);
}

CRMM_TEST(nothing_is_called_once_the_process_exits)
{
    use_config(STATS_OVER_HOST);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        atexit(free_after_exit_began); /* before the first CUDA call registers crmm's hook */
        block_at_exit = crmm_torch_allocate(64, 0, NULL);
        resource_at_exit = crmm_get_per_device_resource(0);
        if (!block_at_exit || !resource_at_exit)
            _exit(5);
        exit(0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child exited with %d",
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* ---- torch.cuda.empty_cache(): crmm_torch_empty_cache ------------------------------------- */

/* Under the host config, a probe made device `device`'s resource (the caller holds a reference). */
static probe_resource *probe_on_device(int device)
{
    use_config(STATS_OVER_HOST);
    probe_resource *p = probe_resource_new(&host_on_fake_devices, CRMM_RESOURCE_DEVICE_ACCESSIBLE, device);
    ck_assert_ptr_null(crmm_set_per_device_resource(device, &p->base));
    return p;
}

CRMM_TEST(empty_cache_trims_each_served_device_with_it_current)
{
    probe_resource *zero = probe_on_device(0), *one = probe_on_device(1);
    ck_assert(!crmm_torch_device_served(0) && !crmm_torch_device_served(1));

    void *p = crmm_torch_allocate(4096, 1, STREAM_A);
    ck_assert_ptr_nonnull(p);
    ck_assert(crmm_torch_device_served(1) && !crmm_torch_device_served(0));
    current_device = 0;
    ck_assert_int_eq(crmm_torch_empty_cache(), CRMM_OK);
    ck_assert_int_eq(one->trims, 1);
    ck_assert_int_eq(one->trim_device, 1); /* the device is current during its trim */
    ck_assert_int_eq(zero->trims, 0);      /* never served: not touched */
    ck_assert_int_eq(current_device, 0);   /* the caller's device is back */
    ck_assert_int_eq(one->live, 1);        /* live blocks stay */

    void *q = crmm_torch_allocate(64, 0, NULL);
    ck_assert_ptr_nonnull(q);
    ck_assert_int_eq(crmm_torch_empty_cache(), CRMM_OK);
    ck_assert_int_eq(zero->trims, 1);
    ck_assert_int_eq(zero->trim_device, 0);
    ck_assert_int_eq(one->trims, 2);
    crmm_torch_deallocate(q, 64, 0, NULL);
    crmm_torch_deallocate(p, 4096, 1, STREAM_A);
    crmm_test_release(&zero->base, &one->base);
}

CRMM_TEST(empty_cache_before_any_allocation_touches_nothing)
{
    use_config("this is not a config\n"); /* loading it would fail */
    int before = cuda_calls;
    ck_assert_int_eq(crmm_torch_empty_cache(), CRMM_OK);
    ck_assert_int_eq(cuda_calls, before);
    ck_assert_ptr_null(crmm_current_config()); /* crmm was not initialised */
    ck_assert(!crmm_torch_device_served(0));
    ck_assert(!crmm_torch_device_served(-1) && !crmm_torch_device_served(CRMM_MAX_DEVICES) &&
              !crmm_torch_device_served(1 << 30));
}

CRMM_TEST(empty_cache_reports_a_refused_trim_naming_its_device_and_trims_the_others)
{
    probe_resource *zero = probe_on_device(0), *one = probe_on_device(1);
    void *p = crmm_torch_allocate(64, 0, NULL), *q = crmm_torch_allocate(64, 1, NULL);
    ck_assert(p && q);
    zero->refuses_trims = 1;
    ck_assert_int_eq(crmm_torch_empty_cache(), CRMM_ERROR_CUDA);
    ck_assert_msg(strstr(crmm_last_error(), "device 0") && strstr(crmm_last_error(), "probe: trim refused"), "%s",
                  crmm_last_error());
    ck_assert_int_eq(one->trims, 1); /* tried after device 0 failed */
    ck_assert_int_eq(current_device, 0);
    crmm_torch_deallocate(p, 64, 0, NULL);
    crmm_torch_deallocate(q, 64, 1, NULL);
    crmm_test_release(&zero->base, &one->base);
}

/* ---- tensor.record_stream: crmm_torch_record_stream ---------------------------------------- */

CRMM_TEST(a_free_waits_for_every_recorded_stream_before_the_memory_goes_back)
{
    probe_resource *probe = probe_on_device(0);
    live_watch = &probe->live;
    void *p = crmm_torch_allocate(4096, 0, STREAM_A), *other = crmm_torch_allocate(64, 0, STREAM_A);
    ck_assert(p && other);
    ck_assert_int_eq(crmm_torch_record_stream(p, STREAM_B), CRMM_OK);
    ck_assert_int_eq(crmm_torch_record_stream(p, STREAM_C), CRMM_OK);
    ck_assert_int_eq(crmm_torch_record_stream(p, STREAM_B), CRMM_OK); /* twice: one wait */
    ck_assert_int_eq(crmm_torch_record_stream(p, STREAM_A), CRMM_OK); /* its own stream: none */
    ck_assert_int_eq(event_calls, 0);                                   /* recording waits for nothing */

    crmm_torch_deallocate(other, 64, 0, STREAM_A); /* not recorded: no event */
    ck_assert_int_eq(event_calls, 0);
    crmm_torch_deallocate(p, 4096, 0, STREAM_A);
    ck_assert_int_eq(event_calls_on('r', STREAM_B), 1);
    ck_assert_int_eq(event_calls_on('r', STREAM_C), 1);
    ck_assert_int_eq(event_calls_on('w', STREAM_A), 2); /* the free's stream waits for both */
    ck_assert_int_eq(event_calls_on('s', NULL), 0);     /* and the host for neither */
    for (int i = 0; i < event_calls; i++) {
        ck_assert_int_eq(event_log[i].live_then, 1); /* every wait before the block went back */
        if (event_log[i].what == 'w')                 /* for the event just recorded */
            ck_assert(i > 0 && event_log[i - 1].what == 'r' && event_log[i - 1].event == event_log[i].event);
    }
    ck_assert_int_eq(probe->live, 0);
    ck_assert_int_eq(event_calls_on('d', NULL), 2); /* no event kept */

    /* the records went with the free: the same address again carries none */
    event_calls = 0;
    void *again = crmm_torch_allocate(4096, 0, STREAM_A);
    crmm_torch_deallocate(again, 4096, 0, STREAM_A);
    ck_assert_int_eq(event_calls, 0);
    live_watch = NULL;
    crmm_resource_release(&probe->base);
}

CRMM_TEST(a_refused_wait_waits_on_the_host_and_one_that_cannot_is_logged)
{
    probe_resource *probe = probe_on_device(0);
    void *p = crmm_torch_allocate(4096, 0, STREAM_A);
    ck_assert_int_eq(crmm_torch_record_stream(p, STREAM_B), CRMM_OK);
    refuse_waits = 1;
    crmm_torch_deallocate(p, 4096, 0, STREAM_A);
    ck_assert_int_eq(event_calls_on('w', STREAM_A), 1);
    ck_assert_int_eq(event_calls_on('s', NULL), 1); /* the host waited instead */
    ck_assert_int_eq(probe->live, 0);

    p = crmm_torch_allocate(4096, 0, STREAM_A);
    ck_assert_int_eq(crmm_torch_record_stream(p, STREAM_C), CRMM_OK);
    refuse_host_waits = 1;
    crmm_test_log_capture_begin();
    crmm_torch_deallocate(p, 4096, 0, STREAM_A);
    char *log = crmm_test_log_capture_end();
    ck_assert_msg(strstr(log, "cannot wait for stream") && strstr(log, "may still use the memory"), "%s", log);
    free(log);
    ck_assert_int_eq(probe->live, 0); /* freed all the same: PyTorch cannot take the memory back */
    crmm_resource_release(&probe->base);
}

CRMM_TEST(many_streams_recorded_on_one_pointer_are_all_waited_for)
{
    probe_resource *probe = probe_on_device(0);
    void *p = crmm_torch_allocate(4096, 0, STREAM_A), *q = crmm_torch_allocate(64, 0, STREAM_A);
    enum { STREAMS = 20 };
    for (uintptr_t i = 1; i <= STREAMS; i++) {
        ck_assert_int_eq(crmm_torch_record_stream(p, (crmm_cuda_stream_t)(i << 8)), CRMM_OK);
        ck_assert_int_eq(crmm_torch_record_stream(q, (crmm_cuda_stream_t)(i << 8)), CRMM_OK);
    }
    crmm_torch_deallocate(p, 4096, 0, STREAM_A);
    ck_assert_int_eq(event_calls_on('w', STREAM_A), STREAMS);
    for (uintptr_t i = 1; i <= STREAMS; i++)
        ck_assert_int_eq(event_calls_on('r', (crmm_cuda_stream_t)(i << 8)), 1);
    event_calls = 0;
    crmm_torch_deallocate(q, 64, 0, STREAM_A); /* q's records were kept apart from p's */
    ck_assert_int_eq(event_calls_on('w', STREAM_A), STREAMS);
    crmm_resource_release(&probe->base);
}

CRMM_TEST(record_stream_refuses_null)
{
    ck_assert_int_eq(crmm_torch_record_stream(NULL, STREAM_B), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "ptr is NULL"));
}

/* ---- errors returned, for crmm's hooks: crmm_torch_allocate_checked --------------------------- */

CRMM_TEST(allocate_checked_returns_out_of_memory_with_its_message_and_logs_nothing)
{
    use_config("[resource.host]\nplugin = host\n"
               "[resource.small]\nplugin = limiting\nupstream = host\nallocation_limit = 1MiB\n"
               "[crmm]\ndefault = small\n");
    void *p = (void *)1;
    crmm_test_log_capture_begin();
    ck_assert_int_eq(crmm_torch_allocate_checked(2 << 20, 0, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    char *log = crmm_test_log_capture_end();
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(crmm_last_error(), "crmm_torch_allocate: 2097152 bytes on device 0: "), "%s",
                  crmm_last_error());
    ck_assert_str_eq(log, ""); /* the caller reports it */
    free(log);
    ck_assert_int_eq(crmm_torch_allocate_checked(4096, 0, NULL, &p), CRMM_OK);
    ck_assert_ptr_nonnull(p);
    crmm_torch_deallocate(p, 4096, 0, NULL);
    ck_assert_int_eq(crmm_torch_allocate_checked(0, 0, NULL, &p), CRMM_OK);
    ck_assert_ptr_null(p); /* size 0: no memory, no error */
}

CRMM_TEST(allocate_checked_refuses_bad_arguments)
{
    use_config(STATS_OVER_HOST);
    void *p = (void *)1;
    ck_assert_int_eq(crmm_torch_allocate_checked(64, 0, NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(crmm_torch_allocate_checked(-64, 0, NULL, &p), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(p);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "negative size -64"));
    ck_assert_int_eq(crmm_torch_allocate_checked(64, 5, NULL, &p), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "device 5"), "%s", crmm_last_error());
}

static void *allocate_checked_in_thread(void *status)
{
    void *p = NULL;
    *(crmm_status *)status = crmm_torch_allocate_checked(64, 0, NULL, &p);
    return strdup(crmm_last_error());
}

CRMM_TEST(a_config_that_cannot_load_fails_every_checked_call_with_its_message)
{
    use_config("[resource.a]\nplugin = no_such_plugin\n[crmm]\ndefault = a\n");
    void *p = (void *)1;
    crmm_test_log_capture_begin();
    ck_assert_int_ne(crmm_torch_allocate_checked(64, 0, NULL, &p), CRMM_OK);
    free(crmm_test_log_capture_end());
    ck_assert_ptr_null(p);
    crmm_status st = CRMM_OK;
    pthread_t t; /* a thread that did not load the config gets its message too */
    void *message;
    ck_assert_int_eq(pthread_create(&t, NULL, allocate_checked_in_thread, &st), 0);
    ck_assert_int_eq(pthread_join(t, &message), 0);
    ck_assert_int_ne(st, CRMM_OK);
    ck_assert_msg(strstr(message, "crmm could not start") && strstr(message, "no_such_plugin"), "%s",
                  (char *)message);
    free(message);
}

/* ---- torch.cuda.set_per_process_memory_fraction: crmm_torch_set_memory_fraction ------------- */

/* A probe as device `device`'s resource that says what it holds. */
static probe_resource *holding_probe_on_device(int device)
{
    probe_resource *p = probe_on_device(device);
    p->answers_reserved = 1;
    return p;
}

CRMM_TEST(a_memory_fraction_refuses_what_would_hold_past_it_and_keeps_nothing)
{
    probe_resource *probe = holding_probe_on_device(0);
    ck_assert_int_eq(crmm_torch_set_memory_fraction(0.5, 0), CRMM_OK); /* 32 of the 64 MiB */
    void *a = NULL, *b = (void *)1;
    ck_assert_int_eq(crmm_torch_allocate_checked(16 << 20, 0, NULL, &a), CRMM_OK);
    ck_assert_int_eq(crmm_torch_allocate_checked(20 << 20, 0, NULL, &b), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(b);
    ck_assert_msg(strstr(crmm_last_error(), "set_per_process_memory_fraction") &&
                      strstr(crmm_last_error(), "32.0 MiB") && strstr(crmm_last_error(), "device 0"),
                  "%s", crmm_last_error());
    ck_assert_int_eq(probe->live, 1);     /* the refused block went back */
    ck_assert_int_eq(probe->trims, 2);    /* before the second try, and after it */
    ck_assert_int_eq(probe->allocations, 3); /* a, then b twice */
    ck_assert_int_eq(crmm_torch_allocate_checked(16 << 20, 0, NULL, &b), CRMM_OK); /* up to the limit */
    crmm_torch_deallocate(a, 16 << 20, 0, NULL);
    crmm_torch_deallocate(b, 16 << 20, 0, NULL);
    crmm_resource_release(&probe->base);
}

CRMM_TEST(a_memory_fraction_gives_the_cache_back_before_it_refuses)
{
    probe_resource *probe = holding_probe_on_device(0);
    ck_assert_int_eq(crmm_torch_set_memory_fraction(0.5, 0), CRMM_OK);
    void *a = NULL, *b = NULL;
    ck_assert_int_eq(crmm_torch_allocate_checked(16 << 20, 0, NULL, &a), CRMM_OK);
    probe->cached_bytes = 10 << 20; /* 26 MiB held */
    ck_assert_int_eq(crmm_torch_allocate_checked(10 << 20, 0, NULL, &b), CRMM_OK); /* 36, trimmed to 26 */
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(probe->trims, 1);
    ck_assert_int_eq(probe->live, 2);
    probe->cached_bytes = 4 << 20; /* 30 MiB: within it, nothing trimmed */
    void *c = NULL;
    ck_assert_int_eq(crmm_torch_allocate_checked(1 << 20, 0, NULL, &c), CRMM_OK);
    ck_assert_int_eq(probe->trims, 1);
    crmm_torch_deallocate(a, 16 << 20, 0, NULL);
    crmm_torch_deallocate(b, 10 << 20, 0, NULL);
    crmm_torch_deallocate(c, 1 << 20, 0, NULL);
    crmm_resource_release(&probe->base);
}

CRMM_TEST(a_request_larger_than_the_fraction_never_reaches_the_resource)
{
    probe_resource *probe = holding_probe_on_device(0);
    ck_assert_int_eq(crmm_torch_set_memory_fraction(0.25, 0), CRMM_OK); /* 16 MiB */
    void *p = (void *)1;
    crmm_test_log_capture_begin();
    ck_assert_ptr_null(crmm_torch_allocate(17 << 20, 0, NULL)); /* the unchecked call logs it */
    char *log = crmm_test_log_capture_end();
    ck_assert_msg(strstr(log, "out of memory") && strstr(log, "is more than the 16.0 MiB"), "%s", log);
    free(log);
    ck_assert_int_eq(probe->allocations, 0);
    ck_assert_int_eq(crmm_torch_set_memory_fraction(0, 0), CRMM_OK); /* nothing allowed */
    ck_assert_int_eq(crmm_torch_allocate_checked(256, 0, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(crmm_torch_set_memory_fraction(1, 0), CRMM_OK); /* a new fraction replaces the old */
    ck_assert_int_eq(crmm_torch_allocate_checked(40 << 20, 0, NULL, &p), CRMM_OK);
    crmm_torch_deallocate(p, 40 << 20, 0, NULL);
    ck_assert_int_eq(probe->allocations, 1);
    crmm_resource_release(&probe->base);
}

CRMM_TEST(a_memory_fraction_bounds_its_own_device_only)
{
    probe_resource *zero = holding_probe_on_device(0), *one = holding_probe_on_device(1);
    ck_assert_int_eq(crmm_torch_set_memory_fraction(0.125, 1), CRMM_OK); /* 8 MiB on device 1 */
    void *p = NULL, *q = NULL;
    ck_assert_int_eq(crmm_torch_allocate_checked(12 << 20, 0, NULL, &p), CRMM_OK);
    ck_assert_int_eq(crmm_torch_allocate_checked(12 << 20, 1, NULL, &q), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(current_device, 0); /* the set and the refusal left the caller's device as it was */
    crmm_torch_deallocate(p, 12 << 20, 0, NULL);
    crmm_test_release(&zero->base, &one->base);
}

/* Two threads meet in the probe: each allocation once made ('a'), and each look at what the probe
 * holds once read ('q'), waits up to MEET_WAIT_MS for the other thread's, so of two requests made
 * at once both are made before either is checked, and both checks see both. Calls pair up in the
 * order they arrive. */
#define MEET_WAIT_MS 200
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int arrived[2]; /* allocations, looks */
} meeting = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0, 0}};

static void meet_the_other_thread(probe_resource *p, char what)
{
    (void)p;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until); /* the clock pthread_cond_timedwait reads */
    until.tv_nsec += MEET_WAIT_MS * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&meeting.lock);
    int *arrived = &meeting.arrived[what == 'q'];
    int pair_complete = (*arrived)++ / 2 * 2 + 2; /* the count at which this call's pair is whole */
    pthread_cond_broadcast(&meeting.cond);
    while (*arrived < pair_complete && pthread_cond_timedwait(&meeting.cond, &meeting.lock, &until) == 0)
        ;
    pthread_mutex_unlock(&meeting.lock);
}

static void *allocate_20_mib(void *ptr)
{
    return (void *)(intptr_t)crmm_torch_allocate_checked(20 << 20, 0, NULL, ptr);
}

CRMM_TEST(threads_under_a_fraction_are_refused_only_for_what_each_asks)
{
    probe_resource *probe = holding_probe_on_device(0);
    ck_assert_int_eq(crmm_torch_set_memory_fraction(0.5, 0), CRMM_OK); /* 32 MiB: room for one of the two */
    probe->hook = meet_the_other_thread;
    void *ptr[2] = {NULL, NULL};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, allocate_20_mib, &ptr[i]), 0);
    int served = 0;
    for (int i = 0; i < 2; i++) {
        void *st;
        ck_assert_int_eq(pthread_join(t[i], &st), 0);
        if ((crmm_status)(intptr_t)st == CRMM_OK)
            served++;
        else
            ck_assert_int_eq((crmm_status)(intptr_t)st, CRMM_ERROR_OUT_OF_MEMORY);
    }
    probe->hook = NULL;
    ck_assert_int_eq(served, 1); /* made one at a time, the first fits and only the second is refused */
    ck_assert_int_eq(probe->live, 1);
    for (int i = 0; i < 2; i++)
        crmm_torch_deallocate(ptr[i], 20 << 20, 0, NULL); /* the refused one's NULL is ignored */
    crmm_resource_release(&probe->base);
}

/* A thread stops inside the probe's allocate (so inside an allocation under a fraction) until the
 * test lets it go. */
static int holding, let_go;

static void stop_inside(probe_resource *p, char what)
{
    (void)p;
    if (what != 'a')
        return;
    __atomic_store_n(&holding, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&let_go, __ATOMIC_SEQ_CST))
        usleep(1000);
}

static void *allocate_1_mib(void *ptr) { return (void *)(intptr_t)crmm_torch_allocate_checked(1 << 20, 0, NULL, ptr); }

CRMM_TEST(a_child_forked_during_an_allocation_under_a_fraction_can_allocate)
{
    probe_resource *probe = holding_probe_on_device(0);
    ck_assert_int_eq(crmm_torch_set_memory_fraction(0.5, 0), CRMM_OK);
    probe->hook = stop_inside;
    void *held = NULL;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, allocate_1_mib, &held), 0);
    while (!__atomic_load_n(&holding, __ATOMIC_SEQ_CST))
        usleep(1000);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        probe->hook = NULL;
        void *p = NULL;
        _exit(crmm_torch_allocate_checked(1 << 20, 0, NULL, &p) == CRMM_OK && p ? 0 : 1);
    }
    int status;
    bool ended = crmm_test_wait_child(pid, 10, &status);
    __atomic_store_n(&let_go, 1, __ATOMIC_SEQ_CST);
    void *st;
    ck_assert_int_eq(pthread_join(t, &st), 0);
    ck_assert_int_eq((crmm_status)(intptr_t)st, CRMM_OK);
    ck_assert_msg(ended, "the child was still waiting for the fraction's lock after 10 s");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %d", status);
    probe->hook = NULL;
    crmm_torch_deallocate(held, 1 << 20, 0, NULL);
    crmm_resource_release(&probe->base);
}

CRMM_TEST(a_memory_fraction_refuses_bad_input_and_resources_that_cannot_say_what_they_hold)
{
    probe_resource *probe = probe_on_device(0); /* does not answer what it holds */
    const double bad[] = {-0.1, 1.5, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(crmm_torch_set_memory_fraction(bad[i], 0), CRMM_ERROR_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(crmm_last_error(), "is not between 0 and 1"));
    }
    ck_assert_int_eq(crmm_torch_set_memory_fraction(0.5, FAKE_DEVICES), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "no device 2"));
    ck_assert_int_eq(crmm_torch_set_memory_fraction(0.5, -1), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(crmm_torch_set_memory_fraction(0.01, 0), CRMM_ERROR_UNSUPPORTED);
    ck_assert_msg(strstr(crmm_last_error(), "maximum_size"), "%s", crmm_last_error());
    void *p = NULL; /* no limit was set by any of these */
    ck_assert_int_eq(crmm_torch_allocate_checked(8 << 20, 0, NULL, &p), CRMM_OK);
    crmm_torch_deallocate(p, 8 << 20, 0, NULL);
    crmm_resource_release(&probe->base);
}

int main(void)
{
    unsetenv("CRMM_CONFIG");
    return crmm_test_main("torch_allocator", 0);
}
