/* torch_allocator.c — the functions PyTorch's CUDAPluggableAllocator loads (crmm/torch.h): every
 * tensor allocation goes to the current resource of its device.
 *
 * PyTorch calls these with no way to receive an error, so failures are reported here and NULL is
 * returned. crmm is initialised on the first allocation unless the program (or the Python
 * package) did it already: a config it loaded must not be replaced by $CRMM_CONFIG behind its
 * back. */
#include "build_config.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime_api.h>
#include <crmm/config.h>
#include <crmm/cuda_support.h>
#include <crmm/error.h>
#include <crmm/fork_guard.h>
#include <crmm/log.h>
#include <crmm/plugin.h>
#include <crmm/resource.h>
#include <crmm/torch.h>
#include "internal.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static crmm_status init_status;
static char init_message[1024]; /* why init failed, for the threads that did not run it */
/* The devices crmm_torch_allocate has served: set once each, read by crmm_torch_empty_cache and
 * crmm_torch_device_served (relaxed: a flag, not a handover of memory). */
static bool served[CRMM_MAX_DEVICES];

/* One per device, held across each allocation made under a memory fraction, as PyTorch's
 * allocator holds its device's lock: the check after an allocation sees no other thread's request
 * half made, so two threads near the limit are not both refused for memory that only their sum
 * passes. Made before the first allocation (init_library). They guard no data, so a fork does not
 * take them (a thread holding one may be inside a resource whose locks the fork takes) and a
 * forked child makes them anew. */
static pthread_mutex_t limit_locks[CRMM_MAX_DEVICES];

static void make_limit_locks(void)
{
    for (int device = 0; device < CRMM_MAX_DEVICES; device++)
        pthread_mutex_init(&limit_locks[device], NULL);
}

static void nothing(void *arg) { (void)arg; }
static void make_limit_locks_in_child(void *arg) { (void)arg; make_limit_locks(); }
static crmm_fork_guard limit_locks_guard = {.prepare = nothing, .parent = nothing, .child = make_limit_locks_in_child};

static void report_init_failure(void)
{
    char buf[4096];
    const char *file = crmm_config_default_file(buf, sizeof buf);
    const char *env = crmm_getenv("CRMM_CONFIG"); /* empty: unset, as crmm_config_default_file reads it */
    const char *from = env && *env ? "$CRMM_CONFIG" : file ? "the installed config" : "no config file";
    fprintf(stderr,
            "crmm: the PyTorch allocator cannot start: %s\n"
            "crmm: the config is %s (%s); fix it (`crmm check-config FILE` shows what is wrong) or set "
            "CRMM_CONFIG to a valid config file. Every allocation through crmm fails (returns NULL) "
            "until the process is restarted.\n",
            crmm_last_error(), file ? file : "the built-in default", from);
    fflush(stderr);
}

static void init_library(void)
{
    make_limit_locks();
    crmm_fork_guard_add(&limit_locks_guard);
    /* PyTorch captures streams (torch.cuda.graph, torch.compile): the pool must ask whether they are */
    crmm_graph_capture_enable(true);
    if (crmm_current_config()) {
        init_status = CRMM_OK;
        return;
    }
    init_status = crmm_init(NULL);
    if (init_status != CRMM_OK) {
        snprintf(init_message, sizeof init_message, "%s", crmm_last_error());
        report_init_failure();
    }
}

/* Limits set by crmm_torch_set_memory_fraction, per device: 0 none, else the most the device's
 * resource may hold plus one (a fraction of 0 allows nothing). Relaxed: a number, read once per
 * allocation. */
static uint64_t limits[CRMM_MAX_DEVICES];

/* The limit of `device` (plus one), 0 for none; `device` indexes the arrays because it has a
 * resource. */
static uint64_t limit_of(int device) { return __atomic_load_n(&limits[device], __ATOMIC_RELAXED); }

/* The out-of-memory error of a request of `size` that a memory fraction of `limit` bytes refuses
 * (`held`: what the resource would hold with it; 0 when the request alone is past the limit). */
static crmm_status past_limit(ssize_t size, int device, uint64_t held, uint64_t limit)
{
    char want[32], lim[32], now[32];
    if (!held)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY,
                              "%s on device %d is more than the %s that torch.cuda.set_per_process_memory_fraction "
                              "allows", crmm_format_size((unsigned long long)size, want, sizeof want), device,
                              crmm_format_size(limit, lim, sizeof lim));
    return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY,
                          "%s on device %d would make crmm hold %s, past the %s that "
                          "torch.cuda.set_per_process_memory_fraction allows",
                          crmm_format_size((unsigned long long)size, want, sizeof want), device,
                          crmm_format_size(held, now, sizeof now), crmm_format_size(limit, lim, sizeof lim));
}

/* After `*ptr` was allocated on mr under a memory fraction: keep it only while mr holds no more
 * than `limit` (bytes; torch.cuda.set_per_process_memory_fraction bounds what the allocator holds,
 * not what is in use). Past the limit the block goes back, the resource gives back what it caches
 * (as PyTorch frees its cached blocks before it gives up) and the request is made once more;
 * still past it, the block goes back, the resource gives back what it caches again and the
 * request fails as out of memory. */
static crmm_status keep_within(crmm_resource *mr, int device, uint64_t limit, size_t size,
                               crmm_cuda_stream_t stream, void **ptr)
{
    uint64_t held = 0;
    for (int attempt = 0;; attempt++) {
        if (crmm_resource_query(mr, CRMM_QUERY_BYTES_RESERVED, &held) != CRMM_OK || held <= limit)
            return CRMM_OK; /* a resource that stopped answering is not limited */
        crmm_error_hold_begin(); /* what the free and the trim say must not replace the error below */
        crmm_resource_deallocate(mr, *ptr, size, stream);
        *ptr = NULL;
        crmm_resource_trim(mr); /* also after the last try: a refused request leaves nothing held */
        crmm_error_hold_end();
        if (attempt == 1 || crmm_resource_allocate(mr, size, stream, ptr) != CRMM_OK)
            break;
    }
    return past_limit((ssize_t)size, device, held, limit);
}

/* crmm started (once per process), then a reference to the current resource of `device`; NULL
 * with the error, named after `who`, when crmm could not start or the device has no resource. */
static crmm_resource *device_resource(const char *who, int device)
{
    pthread_once(&init_once, init_library);
    if (init_status != CRMM_OK) {
        crmm_set_error(init_status, "%s: crmm could not start: %s", who, init_message);
        return NULL;
    }
    crmm_resource *mr = crmm_get_per_device_resource_ref(device);
    if (!mr)
        crmm_error_add_context("%s: device %d", who, device);
    return mr;
}

crmm_status crmm_torch_allocate_checked(ssize_t size, int device, crmm_cuda_stream_t stream, void **ptr)
{
    if (!ptr)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "crmm_torch_allocate: NULL result pointer");
    *ptr = NULL;
    if (size == 0)
        return CRMM_OK;
    if (size < 0)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "crmm_torch_allocate: negative size %zd", size);
    if (crmm_process_exiting()) /* before a first use would load the config and its plugins */
        return crmm_set_error(CRMM_ERROR_STATE, "crmm_torch_allocate: %zd bytes asked for while the process is exiting",
                              size);
    crmm_resource *mr = device_resource("crmm_torch_allocate", device);
    if (!mr)
        return crmm_last_status();
    crmm_device_guard guard;
    crmm_status st = crmm_cuda_device_enter(device, &guard);
    if (st == CRMM_OK) {
        uint64_t limit = limit_of(device); /* a device with a resource is < CRMM_MAX_DEVICES */
        if (!limit) {
            st = crmm_resource_allocate(mr, (size_t)size, stream, ptr);
        } else if ((uint64_t)size > limit - 1) {
            st = past_limit(size, device, 0, limit - 1);
        } else {
            pthread_mutex_lock(&limit_locks[device]);
            if ((st = crmm_resource_allocate(mr, (size_t)size, stream, ptr)) == CRMM_OK)
                st = keep_within(mr, device, limit - 1, (size_t)size, stream, ptr);
            pthread_mutex_unlock(&limit_locks[device]);
        }
        crmm_cuda_device_restore(&guard);
    }
    if (st != CRMM_OK)
        st = crmm_error_add_context("crmm_torch_allocate: %zd bytes on device %d", size, device);
    else if (!__atomic_load_n(&served[device], __ATOMIC_RELAXED))
        __atomic_store_n(&served[device], true, __ATOMIC_RELAXED);
    crmm_resource_release(mr);
    return st;
}

void *crmm_torch_allocate(ssize_t size, int device, crmm_cuda_stream_t stream)
{
    void *ptr = NULL;
    if (crmm_torch_allocate_checked(size, device, stream, &ptr) != CRMM_OK)
        crmm_log(CRMM_LOG_ERROR, "%s", crmm_last_error());
    return ptr;
}

/* The work of crmm_torch_deallocate for a pointer, logging what fails. */
static void torch_free(void *ptr, ssize_t size, int device, crmm_cuda_stream_t stream)
{
    if (size < 0) {
        crmm_log(CRMM_LOG_ERROR, "crmm_torch_deallocate: %p: negative size %zd", ptr, size);
        return;
    }
    crmm_resource *mr = crmm_get_per_device_resource_ref(device);
    if (!mr) {
        crmm_log(CRMM_LOG_ERROR, "crmm_torch_deallocate: %p on device %d: %s", ptr, device, crmm_last_error());
        return;
    }
    crmm_device_guard guard;
    crmm_status st = crmm_cuda_device_enter(device, &guard);
    if (st == CRMM_OK) {
        crmm_torch_wait_recorded(ptr, stream); /* tensor.record_stream's streams first */
        st = crmm_resource_deallocate(mr, ptr, (size_t)size, stream);
        crmm_cuda_device_restore(&guard);
    }
    if (st != CRMM_OK)
        crmm_log(CRMM_LOG_ERROR, "crmm_torch_deallocate: %p (%zd bytes) on device %d: %s", ptr, size, device,
                 crmm_last_error());
    crmm_resource_release(mr);
}

void crmm_torch_deallocate(void *ptr, ssize_t size, int device, crmm_cuda_stream_t stream)
{
    if (!ptr || crmm_process_exiting())
        return;
    /* failures are logged; the thread's error stays as it was */
    crmm_error_hold_begin();
    torch_free(ptr, size, device, stream);
    crmm_error_hold_end();
}

bool crmm_torch_device_served(int device)
{
    return device >= 0 && device < CRMM_MAX_DEVICES && __atomic_load_n(&served[device], __ATOMIC_RELAXED);
}

crmm_status crmm_torch_empty_cache(void)
{
    crmm_status first = CRMM_OK;
    char message[1024] = ""; /* the size of crmm's error messages */
    for (int device = 0; device < CRMM_MAX_DEVICES; device++) {
        if (!crmm_torch_device_served(device))
            continue;
        crmm_status st;
        crmm_resource *mr = crmm_get_per_device_resource_ref(device);
        if (!mr) {
            st = crmm_error_add_context("crmm_torch_empty_cache: device %d", device);
        } else {
            crmm_device_guard guard;
            if ((st = crmm_cuda_device_enter(device, &guard)) == CRMM_OK) {
                st = crmm_resource_trim(mr);
                crmm_cuda_device_restore(&guard);
            }
            if (st != CRMM_OK)
                st = crmm_error_add_context("crmm_torch_empty_cache: device %d", device);
            crmm_resource_release(mr);
        }
        if (st != CRMM_OK && first == CRMM_OK) { /* the first error is reported; every device is trimmed */
            first = st;
            snprintf(message, sizeof message, "%s", crmm_last_error());
        }
    }
    return first == CRMM_OK ? CRMM_OK : crmm_set_error(first, "%s", message);
}

crmm_status crmm_torch_set_memory_fraction(double fraction, int device)
{
    if (!(fraction >= 0.0 && fraction <= 1.0)) /* NaN too */
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                              "crmm_torch_set_memory_fraction: fraction %g is not between 0 and 1", fraction);
    int count = 0;
    crmm_status st = crmm_cuda_device_count(&count);
    if (st != CRMM_OK)
        return st;
    if (device < 0 || device >= count || device >= CRMM_MAX_DEVICES)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "crmm_torch_set_memory_fraction: no device %d (%d found)",
                              device, count);
    crmm_resource *mr = device_resource("crmm_torch_set_memory_fraction", device);
    if (!mr)
        return crmm_last_status();
    uint64_t held = 0;
    size_t free_bytes = 0, total = 0;
    crmm_device_guard guard;
    if ((st = crmm_resource_query(mr, CRMM_QUERY_BYTES_RESERVED, &held)) != CRMM_OK) {
        st = crmm_set_error(CRMM_ERROR_UNSUPPORTED,
                            "crmm_torch_set_memory_fraction: the resource of device %d ('%s', %s) does not say "
                            "what it holds, so no fraction can bound it: give its pool a maximum_size instead",
                            device, crmm_resource_name(mr), crmm_resource_kind(mr));
    } else if ((st = crmm_cuda_device_enter(device, &guard)) == CRMM_OK) {
        cudaError_t err = cudaMemGetInfo(&free_bytes, &total);
        crmm_cuda_device_restore(&guard);
        if (err != cudaSuccess)
            st = crmm_set_error(CRMM_ERROR_CUDA, "crmm_torch_set_memory_fraction: cudaMemGetInfo on device %d: %s",
                                device, cudaGetErrorString(err));
        else
            __atomic_store_n(&limits[device], (uint64_t)(fraction * (double)total) + 1, __ATOMIC_RELAXED);
    }
    crmm_resource_release(mr);
    return st;
}
