/* fake_stream_cuda.c — the scripted CUDA runtime of the stream-order suites (fake_stream_cuda.h). */
#include "build_config.h" /* _GNU_SOURCE: RTLD_NEXT */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include "fake_stream_cuda.h"
#include "fake_streams.h"
#include "../probe_resource.h"

fake_event fake_events[FAKE_EVENTS];
fake_cuda_state fake_cuda;

#define COUNT(field) __atomic_add_fetch(&fake_cuda.field, 1, __ATOMIC_SEQ_CST)

void fake_cuda_reset(void)
{
    fake_cuda_state keep = fake_cuda;
    memset(&fake_cuda, 0, sizeof fake_cuda);
    fake_cuda.device_sync_result = keep.device_sync_result;
    fake_cuda.record_result = keep.record_result;
    fake_cuda.event_create_result = keep.event_create_result;
    fake_cuda.forbid_events_and_ids = keep.forbid_events_and_ids;
    fake_cuda.no_context = keep.no_context;
    fake_cuda.context_device_off_by = keep.context_device_off_by;
    fake_cuda.no_ctx_get_device = keep.no_ctx_get_device;
    fake_streams_reset_uses();
}

int fake_cuda_total(void)
{
    const fake_cuda_state *c = &fake_cuda;
    return __atomic_load_n(&c->get_id, __ATOMIC_SEQ_CST) + __atomic_load_n(&c->record, __ATOMIC_SEQ_CST) +
           __atomic_load_n(&c->wait, __ATOMIC_SEQ_CST) + __atomic_load_n(&c->device_sync, __ATOMIC_SEQ_CST) +
           __atomic_load_n(&c->stream_sync, __ATOMIC_SEQ_CST) + __atomic_load_n(&c->event_sync, __ATOMIC_SEQ_CST) +
           __atomic_load_n(&c->event_create, __ATOMIC_SEQ_CST) +
           __atomic_load_n(&c->event_destroy, __ATOMIC_SEQ_CST) + __atomic_load_n(&c->query, __ATOMIC_SEQ_CST);
}

static _Thread_local int current_device;

static cudaError_t failed_with(cudaError_t e)
{
    fake_cuda.last_error = e;
    return e;
}

/* A call that names a stream or an event, when the test forbids those. */
static void forbidden(const char *call, cudaStream_t s)
{
    if (fake_cuda.forbid_events_and_ids) {
        COUNT(forbidden);
        ck_abort_msg("%s(%p) called", call, (void *)s);
    }
}

cudaError_t cudaStreamGetId(cudaStream_t s, unsigned long long *id)
{
    COUNT(get_id);
    forbidden("cudaStreamGetId", s);
    fake_stream_use(s, "cudaStreamGetId");
    if (s == NULL || s == cudaStreamLegacy) {
        *id = 1;
        return cudaSuccess;
    }
    if (s == cudaStreamPerThread) {
        *id = 2;
        return cudaSuccess;
    }
    if (!fake_stream_is_live(s))
        return failed_with(cudaErrorInvalidResourceHandle);
    *id = fake_stream_id(s);
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    (void)flags;
    COUNT(event_create);
    forbidden("cudaEventCreateWithFlags", NULL);
    if (fake_cuda.event_create_result != cudaSuccess)
        return failed_with(fake_cuda.event_create_result);
    for (int i = 0; i < FAKE_EVENTS; i++)
        if (!__atomic_exchange_n(&fake_events[i].live, 1, __ATOMIC_SEQ_CST)) {
            fake_events[i].recorded_on = NULL;
            *event = (cudaEvent_t)&fake_events[i];
            return cudaSuccess;
        }
    ck_abort_msg("out of fake events");
    return cudaErrorMemoryAllocation;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    COUNT(event_destroy);
    forbidden("cudaEventDestroy", NULL);
    __atomic_store_n(&((fake_event *)event)->live, 0, __ATOMIC_SEQ_CST);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t s)
{
    COUNT(record);
    forbidden("cudaEventRecord", s);
    fake_cuda.last_recorded = s;
    fake_cuda.last_recorded_device = current_device;
    fake_stream_use(s, "cudaEventRecord");
    ck_assert_msg(((fake_event *)event)->live, "record on a destroyed event");
    ((fake_event *)event)->recorded_on = s;
    return fake_cuda.record_result == cudaSuccess ? cudaSuccess : failed_with(fake_cuda.record_result);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    (void)event;
    COUNT(event_sync);
    forbidden("cudaEventSynchronize", NULL);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t event, unsigned int flags)
{
    (void)flags;
    COUNT(wait);
    forbidden("cudaStreamWaitEvent", s);
    fake_cuda.last_waiting = s;
    fake_cuda.last_waiting_device = current_device;
    fake_cuda.last_waited = (fake_event *)event;
    fake_stream_use(s, "cudaStreamWaitEvent");
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
    COUNT(query);
    forbidden("cudaStreamQuery", s);
    fake_stream_use(s, "cudaStreamQuery");
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    COUNT(device_sync);
    void (*hook)(void) = fake_cuda.during_device_sync;
    fake_cuda.during_device_sync = NULL;
    if (hook)
        hook();
    cudaError_t r = fake_cuda.device_sync_result;
    return r == cudaSuccess ? cudaSuccess : failed_with(r);
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    COUNT(stream_sync);
    fake_cuda.last_synchronized = s;
    fake_cuda.last_synchronized_device = current_device;
    fake_stream_use(s, "cudaStreamSynchronize");
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    COUNT(get_last_error);
    cudaError_t e = fake_cuda.last_error;
    fake_cuda.last_error = cudaSuccess;
    return e;
}

int fake_current_device(void) { return current_device; }

cudaError_t cudaGetDeviceCount(int *count)
{
    COUNT(get_device_count);
    *count = FAKE_DEVICE_COUNT;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    COUNT(get_device);
    if (fake_cuda.get_device_result != cudaSuccess)
        return fake_cuda.get_device_result;
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    COUNT(set_device);
    if (device < 0 || device >= FAKE_DEVICE_COUNT)
        return cudaErrorInvalidDevice;
    current_device = device;
    return cudaSuccess;
}

/* The driver's cuCtxGetDevice: the calling thread's current device, as the runtime's. */
static CUresult fake_ctx_get_device(CUdevice *device)
{
    COUNT(ctx_get_device);
    if (fake_cuda.no_context)
        return CUDA_ERROR_INVALID_CONTEXT;
    *device = (current_device + fake_cuda.context_device_off_by) % FAKE_DEVICE_COUNT;
    return CUDA_SUCCESS;
}

/* cuCtxGetDevice is the scripted one; any other symbol is the real runtime's answer. */
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                             unsigned long long flags, enum cudaDriverEntryPointQueryResult *status)
{
    if (strcmp(symbol, "cuCtxGetDevice") == 0) {
        *fn = fake_cuda.no_ctx_get_device ? NULL : (void *)fake_ctx_get_device;
        if (status)
            *status = fake_cuda.no_ctx_get_device ? cudaDriverEntryPointSymbolNotFound : cudaDriverEntryPointSuccess;
        return cudaSuccess;
    }
    cudaError_t (*next)(const char *, void **, unsigned int, unsigned long long, enum cudaDriverEntryPointQueryResult *);
    *(void **)&next = dlsym(RTLD_NEXT, "cudaGetDriverEntryPointByVersion");
    if (!next) {
        *fn = NULL;
        if (status)
            *status = cudaDriverEntryPointSymbolNotFound;
        return cudaErrorNotSupported;
    }
    return next(symbol, fn, version, flags, status);
}

/* ---- the fake device ------------------------------------------------------------------------ */

/* The fake device is a probe (probe_resource.h) of host memory refusing past max_chunks blocks. */
crmm_resource *fake_device_new(int max_chunks)
{
    probe_resource *d = probe_resource_new(NULL, CRMM_RESOURCE_DEVICE_ACCESSIBLE, 0);
    d->max_live = max_chunks;
    return &d->base;
}

int fake_device_chunks(const crmm_resource *device)
{
    return __atomic_load_n(&((const probe_resource *)device)->live, __ATOMIC_SEQ_CST);
}
