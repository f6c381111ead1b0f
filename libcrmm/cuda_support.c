/* cuda_support.c — CUDA error mapping, driver lookups, device queries, and the process-exit guard.
 *
 * The exit guard: at process exit the CUDA runtime tears itself down in an atexit handler, and a
 * cudaFree after that can crash. crmm registers its own atexit handler right after the first
 * successful CUDA call; handlers run in reverse order, so crmm's runs first and sets the flag
 * that makes resources leak instead of calling CUDA. A library destructor sets it too, and so
 * does the first cudaErrorCudartUnloading seen (should the runtime's handler run first after
 * all): a free that fails that way is then a leak, not an error. */
#include "build_config.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include <crmm/error.h>
#include <crmm/log.h>
#include "internal.h"

static atomic_bool exiting;
static pthread_once_t exit_hook_once = PTHREAD_ONCE_INIT;

static void mark_exiting(void) { atomic_store(&exiting, true); }
static void register_exit_hook(void) { atexit(mark_exiting); }

__attribute__((destructor)) static void crmm_library_unload(void) { mark_exiting(); }

bool crmm_process_exiting(void) { return atomic_load_explicit(&exiting, memory_order_relaxed); }

crmm_status crmm_refuse_when_exiting(const char *who)
{
    if (!crmm_process_exiting())
        return CRMM_OK;
    return crmm_set_error(CRMM_ERROR_STATE, "%s: the process is exiting (no CUDA call is made from then on)", who);
}

static bool graph_capture; /* crmm_graph_capture_enable; atomic (read inline by the plugins) */

void crmm_graph_capture_enable(bool enable) { __atomic_store_n(&graph_capture, enable, __ATOMIC_RELAXED); }

bool crmm_graph_capture_enabled(void) { return __atomic_load_n(&graph_capture, __ATOMIC_RELAXED); }

const bool *crmm_graph_capture_switch(void) { return &graph_capture; }

void crmm_note_cuda_initialized(void) { pthread_once(&exit_hook_once, register_exit_hook); }

crmm_status crmm_cuda_status(int cuda_error, const char *call)
{
    cudaError_t e = (cudaError_t)cuda_error;
    if (e == cudaSuccess)
        return CRMM_OK;
    if (e == cudaErrorCudartUnloading) {
        /* The runtime tore itself down before our exit hook ran (it registered its own later
         * than ours): the process is exiting all the same, so make no more CUDA calls. */
        mark_exiting();
        return crmm_set_error(CRMM_ERROR_STATE, "%s: the CUDA runtime is unloading (the process is exiting)",
                              call ? call : "CUDA call");
    }
    /* The failed call also left e as the thread's last CUDA error; it is handled now, so clear it
     * (as RMM does) lest the caller's next cudaGetLastError() report our failure as its own.
     * Sticky errors stay whatever we do; no CUDA call once the process is exiting. */
    if (!crmm_process_exiting())
        cudaGetLastError();
    crmm_status st = e == cudaErrorMemoryAllocation ? CRMM_ERROR_OUT_OF_MEMORY : CRMM_ERROR_CUDA;
    return crmm_set_error(st, "%s: %s (%s)", call ? call : "CUDA call", cudaGetErrorString(e), cudaGetErrorName(e));
}

/* The driver API's version whose signatures crmm's callers declare (unchanged since 10.2 for the
 * functions crmm uses). */
#define CRMM_DRIVER_API_VERSION 12000

/* One driver function's address, or NULL where the driver lacks it. */
static void *driver_function(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, CRMM_DRIVER_API_VERSION, cudaEnableDefault, &found);
    if (e != cudaSuccess)
        cudaGetLastError(); /* handled here: not the caller's error */
    return e == cudaSuccess && found == cudaDriverEntryPointSuccess ? fn : NULL;
}

typedef CUresult (*error_string_fn)(CUresult, const char **);
static error_string_fn error_string; /* NULL: the driver has none */
static pthread_once_t error_string_once = PTHREAD_ONCE_INIT;

static void find_error_string(void) { error_string = (error_string_fn)driver_function("cuGetErrorString"); }

bool crmm_cuda_driver_lookup(const crmm_driver_function *table, size_t count, char *why, size_t why_size)
{
    /* whoever reaches for the driver may report its errors: look that up now, not in an error path */
    pthread_once(&error_string_once, find_error_string);
    bool all = true;
    if (!table && count) {
        if (why && why_size)
            snprintf(why, why_size, "no table of CUDA driver functions to look up (table NULL, count %zu)", count);
        return false;
    }
    for (size_t i = 0; i < count; i++) {
        if (!table[i].name || !table[i].fn) { /* nothing to look up, or nowhere to store it */
            if (table[i].fn)
                *table[i].fn = NULL;
            if (all && why && why_size)
                snprintf(why, why_size, "CUDA driver function %zu of the table has no %s", i,
                         table[i].name ? "place for its address" : "name");
            all = false;
            continue;
        }
        *table[i].fn = driver_function(table[i].name);
        if (!*table[i].fn && all) {
            if (why && why_size)
                snprintf(why, why_size, "the CUDA driver has no %s (driver too old, or none)", table[i].name);
            all = false;
        }
    }
    return all;
}

crmm_status crmm_cuda_driver_status(int cu_result, const char *call)
{
    if (cu_result == CUDA_SUCCESS)
        return CRMM_OK;
    const char *text = NULL;
    if (!crmm_process_exiting()) {
        pthread_once(&error_string_once, find_error_string);
        if (!error_string || error_string((CUresult)cu_result, &text) != CUDA_SUCCESS)
            text = NULL;
    }
    return crmm_set_error(cu_result == CUDA_ERROR_OUT_OF_MEMORY ? CRMM_ERROR_OUT_OF_MEMORY : CRMM_ERROR_CUDA,
                          "CUDA driver: %s: %s (error %d)", call ? call : "driver call", text ? text : "unknown error",
                          cu_result);
}

/* The current device through the driver: cuCtxGetDevice reads the calling thread's current
 * context, which is what cudaGetDevice answers whenever a context is current (the runtime makes
 * its device's primary context current at cudaSetDevice, and follows a context the driver API
 * made current), at a fraction of its cost. It is looked up once crmm_cuda_device_count has found
 * a device, so that the lookup is never crmm's first CUDA call, and its first answer is checked
 * against cudaGetDevice's: it is kept only if they agree. A thread without a current context asks
 * cudaGetDevice. */
typedef CUresult (*ctx_get_device_fn)(CUdevice *);
static ctx_get_device_fn ctx_get_device; /* atomic; NULL: cudaGetDevice alone */
static bool ctx_get_device_checked;      /* atomic; its answer agreed with cudaGetDevice's */
static pthread_once_t driver_query_once = PTHREAD_ONCE_INIT;

static void find_driver_query(void)
{
    void *fn = driver_function("cuCtxGetDevice");
    if (fn)
        __atomic_store_n(&ctx_get_device, (ctx_get_device_fn)fn, __ATOMIC_RELEASE);
}

static cudaError_t get_device(int *device)
{
    ctx_get_device_fn fn = __atomic_load_n(&ctx_get_device, __ATOMIC_ACQUIRE);
    CUdevice d;
    if (!fn || fn(&d) != CUDA_SUCCESS)
        return cudaGetDevice(device);
    if (__builtin_expect(__atomic_load_n(&ctx_get_device_checked, __ATOMIC_RELAXED), 1)) {
        *device = (int)d;
        return cudaSuccess;
    }
    cudaError_t e = cudaGetDevice(device);
    if (e == cudaSuccess) {
        if (*device == (int)d)
            __atomic_store_n(&ctx_get_device_checked, true, __ATOMIC_RELAXED);
        else
            __atomic_store_n(&ctx_get_device, NULL, __ATOMIC_RELEASE);
    }
    return e;
}

crmm_status crmm_cuda_device_count(int *count)
{
    if (!count)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "device count: NULL argument");
    if (crmm_process_exiting()) {
        *count = 0;
        return crmm_refuse_when_exiting("device count");
    }
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        *count = 0;
        cudaGetLastError();
        /* The runtime reports a missing driver as an insufficient one; a driver version of 0
         * tells the two apart (no libcuda.so.1 could be loaded). */
        int driver = 0;
        if (e == cudaErrorInsufficientDriver && cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0)
            return crmm_set_error(CRMM_ERROR_CUDA, "no NVIDIA driver (libcuda.so.1 is not installed or cannot be loaded)");
        return crmm_cuda_status(e, "cudaGetDeviceCount");
    }
    crmm_note_cuda_initialized();
    *count = n;
    if (n == 0)
        return crmm_set_error(CRMM_ERROR_CUDA, "no CUDA device is present");
    pthread_once(&driver_query_once, find_driver_query);
    return CRMM_OK;
}

/* Set once crmm_cuda_device_count has found a device: from then on the current device is one
 * cudaGetDevice (devices do not go away; a failing runtime still fails that call). Atomic. */
static bool device_seen;

crmm_status crmm_cuda_current_device(int *device)
{
    if (!device)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "current device: NULL argument");
    if (crmm_refuse_when_exiting("current device") != CRMM_OK)
        return CRMM_ERROR_STATE;
    if (!__atomic_load_n(&device_seen, __ATOMIC_RELAXED)) {
        /* the first time: the count names a missing driver or device (cudaGetDevice would not) */
        int n;
        crmm_status st = crmm_cuda_device_count(&n);
        if (st != CRMM_OK)
            return st;
        __atomic_store_n(&device_seen, true, __ATOMIC_RELAXED);
    }
    cudaError_t e = get_device(device);
    return crmm_cuda_status(e, "cudaGetDevice");
}

bool crmm_cuda_current_device_quiet(int *device)
{
    if (crmm_process_exiting())
        return false;
    if (!__atomic_load_n(&device_seen, __ATOMIC_RELAXED)) {
        /* the first time only: the count may record an error, which the hold takes back */
        crmm_error_hold_begin();
        crmm_status st = crmm_cuda_current_device(device);
        crmm_error_hold_end();
        return st == CRMM_OK;
    }
    if (get_device(device) == cudaSuccess)
        return true;
    cudaGetLastError(); /* the caller's next cudaGetLastError() must not report this one */
    return false;
}

crmm_status crmm_cuda_device_enter(int device, crmm_device_guard *guard)
{
    if (!guard)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "cuda_device_enter: guard is NULL");
    guard->previous = -1;
    guard->changed = 0;
    if (device < 0)
        return CRMM_OK;
    if (crmm_refuse_when_exiting("cuda_device_enter") != CRMM_OK)
        return CRMM_ERROR_STATE;
    int cur;
    cudaError_t e = get_device(&cur);
    if (e != cudaSuccess) {
        int n;
        if (!__atomic_load_n(&device_seen, __ATOMIC_RELAXED) && crmm_cuda_device_count(&n) != CRMM_OK) {
            cudaGetLastError();
            return crmm_last_status(); /* names a missing driver or device, as crmm_cuda_current_device does */
        }
        return crmm_cuda_status(e, "cudaGetDevice");
    }
    if (cur == device)
        return CRMM_OK;
    e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return crmm_cuda_status(e, "cudaSetDevice");
    guard->previous = cur;
    guard->changed = 1;
    return CRMM_OK;
}

void crmm_cuda_device_restore(crmm_device_guard *guard)
{
    if (guard && guard->changed) {
        cudaError_t e = cudaSetDevice(guard->previous);
        guard->changed = 0;
        if (e != cudaSuccess) { /* void: logged, and taken off the runtime's last error */
            cudaGetLastError();
            crmm_log(CRMM_LOG_WARN, "cudaSetDevice(%d) to restore the caller's device: %s", guard->previous,
                     cudaGetErrorString(e));
        }
    }
}

crmm_status crmm_cuda_device_memory(int device, uint64_t *free_bytes, uint64_t *total_bytes)
{
    int n;
    crmm_status st = crmm_cuda_device_count(&n);
    if (st != CRMM_OK)
        return st;
    if (device < 0 || device >= n)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "device %d does not exist (%d present)", device, n);
    crmm_device_guard g;
    if ((st = crmm_cuda_device_enter(device, &g)) != CRMM_OK)
        return st;
    size_t f = 0, t = 0;
    cudaError_t e = cudaMemGetInfo(&f, &t);
    crmm_cuda_device_restore(&g);
    if (e != cudaSuccess)
        return crmm_cuda_status(e, "cudaMemGetInfo");
    if (free_bytes)
        *free_bytes = f;
    if (total_bytes)
        *total_bytes = t;
    return CRMM_OK;
}
