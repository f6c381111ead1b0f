/* crmm/device_buffer.h — untyped device memory with a size, a capacity, a stream and a resource,
 * and the copy helpers between host and device pointers.
 *
 * RMM's rmm.pylibrmm.device_buffer (DeviceBuffer, to_device, copy_device_to_ptr,
 * copy_host_to_ptr, copy_ptr_to_host) in C.
 *
 * Streams: every function takes a crmm_stream * (NULL = the legacy default stream). A copy on a
 * default stream (crmm_stream_is_default) is finished when the call returns. On any other stream
 * it is queued and the call returns at once: the caller keeps host memory alive and unchanged
 * (or unread, for copies to the host) until the stream is synchronized.
 *
 * A buffer allocates through crmm_resource_allocate/deallocate of its resource, on its stream,
 * with its device current. Its stream is the one it was made with, or the last one given to
 * set_stream, resize, reserve or shrink_to_fit; as in RMM, the copy calls use the stream they are
 * given and leave the buffer's alone (call set_stream when the memory's last use is on another
 * stream, so that its free is ordered after that use). Its contents start uninitialized, as in
 * RMM. A size-0 buffer is valid and has a NULL pointer. One buffer must not be used from two
 * threads at once; different buffers may. */
#ifndef CRMM_DEVICE_BUFFER_H
#define CRMM_DEVICE_BUFFER_H

#include <crmm/export.h>
#include <stddef.h>
#include <crmm/error.h>
#include <crmm/resource.h>
#include <crmm/stream.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- copy helpers ------------------------------------------------------------------------ */

/* Copy `count` bytes between pointers, on `stream` (see above for when they finish). count 0:
 * no-op, CRMM_OK. Errors: CRMM_ERROR_INVALID_ARGUMENT (a NULL pointer with count > 0; checked
 * before any CUDA call), CRMM_ERROR_CUDA (the failing call named, e.g. cudaMemcpyAsync),
 * CRMM_ERROR_STATE (the process is exiting). */
/* Device (or any device-accessible) memory to device memory. */
CRMM_API crmm_status crmm_copy_device_to_ptr(const void *d_src, void *d_dst, size_t count, crmm_stream *stream);
/* `count` bytes of host memory to device memory. */
CRMM_API crmm_status crmm_copy_host_to_ptr(const void *host, size_t count, void *d_dst, crmm_stream *stream);
/* `count` bytes of device memory to host memory. */
CRMM_API crmm_status crmm_copy_ptr_to_host(const void *d_src, void *host, size_t count, crmm_stream *stream);

/* ---- device buffers ---------------------------------------------------------------------- */

typedef struct crmm_device_buffer crmm_device_buffer;

/* A buffer of `size` uninitialized bytes allocated from `mr` on `stream`. mr NULL: the current
 * device's resource (crmm_get_current_device_resource). The buffer holds a reference to mr.
 * Errors: CRMM_ERROR_INVALID_ARGUMENT (out NULL; mr not device accessible, e.g. `host` — the
 * message names it), the resource's errors (CRMM_ERROR_OUT_OF_MEMORY, ...), CRMM_ERROR_CUDA.
 * *out NULL on error. */
CRMM_API crmm_status crmm_device_buffer_create(size_t size, crmm_stream *stream, crmm_resource *mr,
                                      crmm_device_buffer **out);

/* A new buffer of `count` bytes holding a copy of `host` (RMM's to_device). Errors as
 * crmm_device_buffer_create, CRMM_ERROR_INVALID_ARGUMENT for host NULL with count > 0, and
 * CRMM_ERROR_STATE (the process is exiting: no copy is made). */
CRMM_API crmm_status crmm_device_buffer_to_device(const void *host, size_t count, crmm_stream *stream, crmm_resource *mr,
                                         crmm_device_buffer **out);

/* A deep copy of `src`: same resource, `size` bytes (capacity = size). crmm_device_buffer_copy
 * uses src's stream; _copy_on_stream uses `stream` and gives the copy that stream. Errors:
 * CRMM_ERROR_INVALID_ARGUMENT (src or out NULL), the resource's errors, CRMM_ERROR_CUDA,
 * CRMM_ERROR_STATE (the process is exiting and src is not empty). */
CRMM_API crmm_status crmm_device_buffer_copy(const crmm_device_buffer *src, crmm_device_buffer **out);
CRMM_API crmm_status crmm_device_buffer_copy_on_stream(const crmm_device_buffer *src, crmm_stream *stream,
                                              crmm_device_buffer **out);

/* Free the memory on the buffer's stream with the buffer's device current (even when another
 * device is current; the caller's is restored), release the resource, free the buffer. NULL:
 * no-op. Never fails (a failing free is logged) and leaves the thread's last error as it was. */
CRMM_API void crmm_device_buffer_destroy(crmm_device_buffer *buf);

/* crmm_device_buffer_create and _destroy only where they can finish without waiting: for a
 * caller that must not block where it stands (a Python binding holding the GIL). try_create
 * succeeds (true, *out set) when the resource (mr, or the current device's, already made) is on
 * the current device and serves the request at once (crmm_resource_try_allocate); try_destroy
 * when the buffer's device is current and its resource frees at once. False: nothing made, or the
 * buffer still to be given to crmm_device_buffer_destroy (possibly emptied: its memory already
 * freed, its last reference to a resource left for destroy to drop); no error is recorded, the
 * ordinary call does the rest. try_destroy(NULL) is true. */
CRMM_API bool crmm_device_buffer_try_create(size_t size, crmm_stream *stream, crmm_resource *mr,
                                            crmm_device_buffer **out);
CRMM_API bool crmm_device_buffer_try_destroy(crmm_device_buffer *buf);

/* Accessors. For NULL: NULL pointer, 0 sizes, device -1, NULL stream and resource. */
CRMM_API void *crmm_device_buffer_ptr(const crmm_device_buffer *buf);
CRMM_API size_t crmm_device_buffer_size(const crmm_device_buffer *buf);
CRMM_API size_t crmm_device_buffer_capacity(const crmm_device_buffer *buf);
/* The buffer's stream: a view owned by the buffer, valid until it is destroyed (its handle
 * follows set_stream). The CUDA stream behind it must outlive the buffer or be replaced. */
CRMM_API crmm_stream *crmm_device_buffer_stream(const crmm_device_buffer *buf);
/* The device the memory belongs to (the resource's device; -1 for a resource bound to none). */
CRMM_API int crmm_device_buffer_device(const crmm_device_buffer *buf);
/* The resource (borrowed; the buffer holds a reference). */
CRMM_API crmm_resource *crmm_device_buffer_resource(const crmm_device_buffer *buf);

/* Copy the buffer's `size` bytes into `host`, which has room for `host_len` bytes. Errors:
 * CRMM_ERROR_INVALID_ARGUMENT (buf NULL, host NULL with size > 0, host_len < size: nothing
 * copied), CRMM_ERROR_CUDA, CRMM_ERROR_STATE (the process is exiting). */
CRMM_API crmm_status crmm_device_buffer_copy_to_host(const crmm_device_buffer *buf, void *host, size_t host_len,
                                            crmm_stream *stream);
/* The same into a new malloc'd host block of `size` bytes, stored in *host (NULL for a size-0
 * buffer) with its length in *len (may be NULL); the caller frees it. Errors as above, and
 * CRMM_ERROR_OUT_OF_MEMORY; *host NULL on error. */
CRMM_API crmm_status crmm_device_buffer_copy_to_host_alloc(const crmm_device_buffer *buf, crmm_stream *stream, void **host,
                                                  size_t *len);

/* Copy `count` bytes from host memory (copy_from_host) or device memory (copy_from_device) to
 * the start of the buffer. Errors: CRMM_ERROR_INVALID_ARGUMENT (buf NULL, source NULL with
 * count > 0, count > size: nothing written), CRMM_ERROR_CUDA, CRMM_ERROR_STATE (the process is
 * exiting). */
CRMM_API crmm_status crmm_device_buffer_copy_from_host(crmm_device_buffer *buf, const void *host, size_t count,
                                              crmm_stream *stream);
CRMM_API crmm_status crmm_device_buffer_copy_from_device(crmm_device_buffer *buf, const void *d_src, size_t count,
                                                crmm_stream *stream);

/* Resizing, as RMM's device_buffer; each makes `stream` the buffer's stream first and keeps the
 * contents (up to the new size). On error the buffer is unchanged apart from its stream.
 * Errors: CRMM_ERROR_INVALID_ARGUMENT (buf NULL), the resource's errors, CRMM_ERROR_CUDA,
 * CRMM_ERROR_STATE (the process is exiting and bytes would have to be copied). */
/* new_size <= capacity: only the size changes. Else allocate exactly new_size, copy the old
 * contents, free the old block on the stream. */
CRMM_API crmm_status crmm_device_buffer_resize(crmm_device_buffer *buf, size_t new_size, crmm_stream *stream);
/* Grow the capacity to new_capacity (nothing when it is not larger); the size stays. */
CRMM_API crmm_status crmm_device_buffer_reserve(crmm_device_buffer *buf, size_t new_capacity, crmm_stream *stream);
/* Make the capacity equal to the size (a new block; size 0 frees the memory). */
CRMM_API crmm_status crmm_device_buffer_shrink_to_fit(crmm_device_buffer *buf, crmm_stream *stream);

/* Make `stream` the buffer's stream (later frees go there). No CUDA call. Errors:
 * CRMM_ERROR_INVALID_ARGUMENT (buf NULL). */
CRMM_API crmm_status crmm_device_buffer_set_stream(crmm_device_buffer *buf, crmm_stream *stream);

#ifdef __cplusplus
}
#endif
#endif
