/* stream_internal.h — the layout of crmm_stream, shared by stream.c, stream_pool.c and
 * device_buffer.c (which embed stream objects of their own). Nothing outside the core sees it. */
#ifndef CRMM_CORE_STREAM_INTERNAL_H
#define CRMM_CORE_STREAM_INTERNAL_H

#include <crmm/stream.h>

/* What crmm_stream_destroy does with an object. */
typedef enum crmm_stream_kind {
    CRMM_STREAM_KIND_BUILTIN = 0, /* crmm_stream_default/per_thread: static, never freed */
    CRMM_STREAM_KIND_OWNING = 1,  /* crmm_stream_create: destroys its CUDA stream, frees itself */
    CRMM_STREAM_KIND_VIEW = 2,    /* crmm_stream_view: frees itself only */
    CRMM_STREAM_KIND_MEMBER = 3   /* inside a pool or a buffer, which own it: no-op */
} crmm_stream_kind;

struct crmm_stream {
    crmm_cuda_stream_t handle; /* the cudaStream_t (NULL: legacy default) */
    int device;                /* owning streams: the device it was made on; else -1 */
    crmm_stream_kind kind;
};

/* Fill a stream object that a container owns: a view of `handle`. */
static inline void crmm_stream_init_member(crmm_stream *s, crmm_cuda_stream_t handle)
{
    s->handle = handle;
    s->device = -1;
    s->kind = CRMM_STREAM_KIND_MEMBER;
}

/* Create a CUDA stream with `flags` (already validated) on the current device. */
crmm_status crmm_stream_create_handle(crmm_stream_flags flags, crmm_cuda_stream_t *handle);
/* Destroy a CUDA stream made on `device` (made current around the call); logs failures and
 * does nothing once the process is exiting. */
void crmm_stream_destroy_handle(crmm_cuda_stream_t handle, int device);
/* CRMM_ERROR_INVALID_ARGUMENT unless flags is a crmm_stream_flags value; `who` names the caller. */
crmm_status crmm_stream_check_flags(int flags, const char *who);

#endif
