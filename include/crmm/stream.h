/* crmm/stream.h — CUDA streams: the default streams, owning streams, views of a caller's stream.
 *
 * RMM's rmm.pylibrmm.stream.Stream(obj=None, flags=None) in C. A `crmm_stream *` is one of:
 *  - the default stream: NULL, which every crmm function accepts and reads as the legacy default
 *    stream, or the built-in values crmm_stream_default() and crmm_stream_per_thread();
 *  - an owning stream from crmm_stream_create(): destroying it destroys its CUDA stream;
 *  - a view of a cudaStream_t the caller made (crmm_stream_view): destroying the view never
 *    touches the caller's stream;
 *  - a view handed out by a stream pool or a device buffer (owned by them: destroying it is a
 *    no-op).
 * Any thread may use a stream object; only a buffer's own view changes (crmm_device_buffer_set_stream). */
#ifndef CRMM_STREAM_H
#define CRMM_STREAM_H

#include <crmm/export.h>
#include <stdbool.h>
#include <crmm/error.h>
#include <crmm/resource.h> /* crmm_cuda_stream_t, CRMM_CUDA_STREAM_PER_THREAD */

#ifdef __cplusplus
extern "C" {
#endif

/* Stream creation flags, as RMM's CudaStreamFlags. */
typedef enum crmm_stream_flags {
    CRMM_STREAM_SYNC_DEFAULT = 0, /* the stream synchronizes with the legacy default stream */
    CRMM_STREAM_NON_BLOCKING = 1  /* it does not (cudaStreamNonBlocking) */
} crmm_stream_flags;

/* The explicit legacy default stream handle (cudaStreamLegacy); NULL means the same. */
#define CRMM_CUDA_STREAM_LEGACY ((crmm_cuda_stream_t)0x1)

typedef struct crmm_stream crmm_stream;

/* Create a new CUDA stream on the current device, owned by the returned object. Errors:
 * CRMM_ERROR_INVALID_ARGUMENT (out NULL, flags not a crmm_stream_flags value; checked before any
 * CUDA call), CRMM_ERROR_OUT_OF_MEMORY (no host memory for the object, or CUDA has none for the
 * stream), CRMM_ERROR_CUDA (no device, cudaStreamCreateWithFlags failed), CRMM_ERROR_STATE (the
 * process is exiting, or the CUDA runtime is unloading: no CUDA call made). *out NULL on error. */
CRMM_API crmm_status crmm_stream_create(crmm_stream_flags flags, crmm_stream **out);

/* Wrap a CUDA stream the caller made (or NULL, cudaStreamLegacy, cudaStreamPerThread) without
 * taking ownership; no CUDA call. The caller keeps the stream alive while the view is used.
 * Errors: CRMM_ERROR_INVALID_ARGUMENT (out NULL), CRMM_ERROR_OUT_OF_MEMORY. */
CRMM_API crmm_status crmm_stream_view(crmm_cuda_stream_t handle, crmm_stream **out);

/* Release a stream object: an owning stream destroys its CUDA stream (with its device current,
 * then the caller's restored; skipped at process exit); a view from crmm_stream_view is freed
 * and the caller's stream left alone. NULL, crmm_stream_default(), crmm_stream_per_thread() and
 * the views that pools and buffers hand out: no-op. Never fails (CUDA errors are logged) and
 * leaves the thread's last error as it was. */
CRMM_API void crmm_stream_destroy(crmm_stream *stream);

/* The legacy default stream (handle NULL) and the per-thread default stream
 * (cudaStreamPerThread) as values; static, never destroyed. */
CRMM_API crmm_stream *crmm_stream_default(void);
CRMM_API crmm_stream *crmm_stream_per_thread(void);

/* The CUDA stream handle (cudaStream_t); NULL for NULL and the legacy default stream. */
CRMM_API crmm_cuda_stream_t crmm_stream_handle(const crmm_stream *stream);

/* True for a default stream: NULL, a handle of NULL or cudaStreamLegacy (the legacy default),
 * or cudaStreamPerThread (the per-thread default): the streams whose work a copy cannot order
 * against another stream's, so the copy helpers wait for them. RMM's Stream.is_default() (and
 * crmm's Python Stream.is_default()) is true for the legacy default alone. */
CRMM_API bool crmm_stream_is_default(const crmm_stream *stream);

/* True when destroying the object destroys its CUDA stream (made by crmm_stream_create). */
CRMM_API bool crmm_stream_is_owning(const crmm_stream *stream);

/* Wait until all work queued on the stream has finished (cudaStreamSynchronize). NULL: the
 * legacy default stream. Errors: CRMM_ERROR_CUDA (named call and reason), CRMM_ERROR_STATE after
 * the process began to exit. */
CRMM_API crmm_status crmm_stream_synchronize(const crmm_stream *stream);

#ifdef __cplusplus
}
#endif
#endif
