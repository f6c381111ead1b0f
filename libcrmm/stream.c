/* stream.c — crmm_stream: the default streams, owning streams and views of a caller's stream.
 *
 * A crmm_stream is a CUDA handle plus a kind that says what destroy does with it (see
 * stream_internal.h): the two built-in default streams are static objects, owning streams and
 * views are small heap objects, and pools and buffers embed their own. NULL stands for the
 * legacy default stream everywhere. */
#include "build_config.h"
#include <stdint.h>
#include <stdlib.h>
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include <crmm/log.h>
#include <crmm/stream.h>
#include "internal.h"
#include "stream_internal.h"

static crmm_stream legacy_default_stream = {NULL, -1, CRMM_STREAM_KIND_BUILTIN};
static crmm_stream per_thread_default_stream = {CRMM_CUDA_STREAM_PER_THREAD, -1, CRMM_STREAM_KIND_BUILTIN};

crmm_stream *crmm_stream_default(void) { return &legacy_default_stream; }
crmm_stream *crmm_stream_per_thread(void) { return &per_thread_default_stream; }

crmm_status crmm_stream_check_flags(int flags, const char *who)
{
    if (flags != CRMM_STREAM_SYNC_DEFAULT && flags != CRMM_STREAM_NON_BLOCKING)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                              "%s: stream flags %d are neither CRMM_STREAM_SYNC_DEFAULT (0) nor "
                              "CRMM_STREAM_NON_BLOCKING (1)", who, flags);
    return CRMM_OK;
}

crmm_status crmm_stream_create_handle(crmm_stream_flags flags, crmm_cuda_stream_t *handle)
{
    if (crmm_refuse_when_exiting("cudaStreamCreateWithFlags") != CRMM_OK)
        return CRMM_ERROR_STATE;
    cudaStream_t s = NULL;
    unsigned cuda_flags = flags == CRMM_STREAM_NON_BLOCKING ? cudaStreamNonBlocking : cudaStreamDefault;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cuda_flags);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return crmm_cuda_status(e, "cudaStreamCreateWithFlags");
    }
    crmm_note_cuda_initialized();
    *handle = s;
    return CRMM_OK;
}

void crmm_stream_destroy_handle(crmm_cuda_stream_t handle, int device)
{
    if (crmm_process_exiting())
        return; /* the driver is going away and takes its streams with it */
    crmm_device_guard g;
    crmm_status st = crmm_cuda_device_enter(device, &g);
    if (st == CRMM_OK) {
        cudaError_t e = cudaStreamDestroy(handle);
        crmm_cuda_device_restore(&g);
        if (e != cudaSuccess) {
            cudaGetLastError();
            st = crmm_cuda_status(e, "cudaStreamDestroy");
        }
    }
    if (st != CRMM_OK)
        crmm_log(CRMM_LOG_WARN, "stream destroy: %s", crmm_last_error());
}

crmm_status crmm_stream_create(crmm_stream_flags flags, crmm_stream **out)
{
    if (!out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "stream_create: out is NULL");
    *out = NULL;
    crmm_status st = crmm_stream_check_flags((int)flags, "stream_create");
    if (st != CRMM_OK)
        return st;
    crmm_stream *s = malloc(sizeof *s);
    if (!s)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "stream_create: malloc failed");
    if ((st = crmm_cuda_current_device(&s->device)) != CRMM_OK ||
        (st = crmm_stream_create_handle(flags, &s->handle)) != CRMM_OK) {
        free(s);
        return crmm_error_add_context("stream_create");
    }
    s->kind = CRMM_STREAM_KIND_OWNING;
    *out = s;
    return CRMM_OK;
}

crmm_status crmm_stream_view(crmm_cuda_stream_t handle, crmm_stream **out)
{
    if (!out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "stream_view: out is NULL");
    crmm_stream *s = malloc(sizeof *s);
    *out = s;
    if (!s)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "stream_view: malloc failed");
    s->handle = handle;
    s->device = -1;
    s->kind = CRMM_STREAM_KIND_VIEW;
    return CRMM_OK;
}

void crmm_stream_destroy(crmm_stream *stream)
{
    if (!stream)
        return;
    switch (stream->kind) {
    case CRMM_STREAM_KIND_OWNING: {
        /* a failing cudaStreamDestroy is logged; the thread's error stays the caller's */
        crmm_error_hold_begin();
        crmm_stream_destroy_handle(stream->handle, stream->device);
        crmm_error_hold_end();
        free(stream);
        return;
    }
    case CRMM_STREAM_KIND_VIEW:
        free(stream);
        return;
    case CRMM_STREAM_KIND_BUILTIN:
    case CRMM_STREAM_KIND_MEMBER:
        return;
    }
}

crmm_cuda_stream_t crmm_stream_handle(const crmm_stream *stream) { return stream ? stream->handle : NULL; }

bool crmm_stream_is_default(const crmm_stream *stream)
{
    crmm_cuda_stream_t h = crmm_stream_handle(stream);
    return h == NULL || h == CRMM_CUDA_STREAM_LEGACY || h == CRMM_CUDA_STREAM_PER_THREAD;
}

bool crmm_stream_is_owning(const crmm_stream *stream) { return stream && stream->kind == CRMM_STREAM_KIND_OWNING; }

crmm_status crmm_stream_synchronize(const crmm_stream *stream)
{
    if (crmm_process_exiting())
        return crmm_set_error(CRMM_ERROR_STATE, "stream_synchronize: the process is exiting");
    cudaError_t e = cudaStreamSynchronize(crmm_stream_handle(stream));
    if (e != cudaSuccess) {
        cudaGetLastError();
        return crmm_cuda_status(e, "cudaStreamSynchronize");
    }
    return CRMM_OK;
}
