/* device_buffer.c — crmm_device_buffer: RMM's DeviceBuffer in C.
 *
 * A buffer is one block of `capacity` bytes from its resource, of which the first `size` are in
 * use, plus its stream, where its block is freed (a stream object the buffer owns, so that the
 * caller's stream object may go away) and the device of its resource. Growing past the capacity
 * swaps in a new block: allocate, copy the kept bytes, free the old block on the stream, so the
 * free is ordered after the copy. Every operation runs with the buffer's device current and
 * restores the caller's; every copy goes through the copy helpers (copy.c) and follows their
 * rule (finished at return on a default stream, queued on any other). */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/cuda_support.h>
#include <crmm/device_buffer.h>
#include <crmm/log.h>
#include "internal.h"
#include "runtime.h"
#include "stream_internal.h"

struct crmm_device_buffer {
    void *ptr;          /* NULL when capacity is 0 */
    size_t size;        /* bytes in use */
    size_t capacity;    /* bytes allocated from mr */
    crmm_resource *mr;  /* one reference held */
    int device;         /* mr's device; -1 when it is bound to none */
    crmm_stream stream; /* member view of the buffer's stream (creation, set_stream, resizing) */
};

/* Make the buffer's device current (nothing for device -1 or at process exit). */
static crmm_status buffer_enter(const crmm_device_buffer *buf, crmm_device_guard *g)
{
    g->previous = -1;
    g->changed = 0;
    if (buf->device < 0 || crmm_process_exiting())
        return CRMM_OK;
    return crmm_cuda_device_enter(buf->device, g);
}

static void describe_resource(const crmm_resource *mr, char *out, size_t len)
{
    const char *name = crmm_resource_name(mr), *kind = crmm_resource_kind(mr);
    if (name[0] && strcmp(name, kind) != 0)
        snprintf(out, len, "'%s' (plugin %s)", name, kind);
    else
        snprintf(out, len, "'%s'", kind);
}

/* A failed call's status, with `who` in front of its message. A resource may fail without a
 * message (crmm_error_add_context alone would then give back the thread's status, CRMM_OK): the
 * status is the callee's, and a message naming the failure is written when there is none. */
static crmm_status failed(crmm_status st, const char *who)
{
    if (crmm_last_status() == CRMM_OK)
        return crmm_set_error(st, "%s: failed (%s) without a message", who, crmm_status_name(st));
    crmm_error_add_context("%s", who);
    return st;
}

/* Allocate a buffer of `capacity` = size bytes; mr NULL = the current device's resource. */
static crmm_status buffer_new(size_t size, crmm_stream *stream, crmm_resource *mr, const char *who,
                              crmm_device_buffer **out)
{
    /* take our reference under the registry's lock: another thread may replace (and release) the
     * current resource at any time */
    int current = -1; /* the device known to be current (-1: not asked) */
    if (mr)
        crmm_resource_retain(mr);
    else if (!(mr = crmm_runtime_current_resource_ref(&current)))
        return crmm_error_add_context("%s", who);
    if (!crmm_resource_is_device_accessible(mr)) {
        char desc[128];
        describe_resource(mr, desc, sizeof desc);
        crmm_resource_release(mr);
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                              "%s: resource %s is not device accessible (host memory only); a device "
                              "buffer needs a device resource such as cuda, async, pool or managed",
                              who, desc);
    }
    crmm_device_buffer *buf = calloc(1, sizeof *buf);
    if (!buf) {
        crmm_resource_release(mr);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: malloc failed", who);
    }
    buf->mr = mr; /* the reference taken above */
    buf->device = mr->device;
    crmm_stream_init_member(&buf->stream, crmm_stream_handle(stream));
    crmm_device_guard g = {-1, 0};
    /* the current device's own resource: its device is current already */
    crmm_status st = buf->device == current ? CRMM_OK : buffer_enter(buf, &g);
    if (st == CRMM_OK) {
        st = crmm_resource_allocate(mr, size, buf->stream.handle, &buf->ptr);
        crmm_cuda_device_restore(&g);
    }
    if (st != CRMM_OK) {
        crmm_resource_release(buf->mr);
        free(buf);
        return failed(st, who);
    }
    buf->size = buf->capacity = size;
    *out = buf;
    return CRMM_OK;
}

crmm_status crmm_device_buffer_create(size_t size, crmm_stream *stream, crmm_resource *mr, crmm_device_buffer **out)
{
    if (!out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "device_buffer_create: out is NULL");
    *out = NULL;
    return buffer_new(size, stream, mr, "device_buffer_create", out);
}

/* Whether `device` (-1: none) is the current device, as far as a caller that must not wait can
 * tell: false when asking fails or the process is exiting. */
static bool device_is_current(int device)
{
    int current;
    if (crmm_process_exiting())
        return false;
    if (device < 0)
        return true;
    return crmm_cuda_current_device_quiet(&current) && current == device;
}

/* Drop a reference to mr that cannot be its last (the registry or the caller holds another),
 * without ever waiting: the release that could wait runs only if that turns out wrong. */
static void drop_reference(crmm_resource *mr)
{
    if (!crmm_resource_release_unless_last(mr))
        crmm_resource_release(mr);
}

bool crmm_device_buffer_try_create(size_t size, crmm_stream *stream, crmm_resource *mr, crmm_device_buffer **out)
{
    int current;
    if (!out || crmm_process_exiting())
        return false;
    if (mr) {
        if (!crmm_resource_is_device_accessible(mr) || !device_is_current(mr->device))
            return false;
        crmm_resource_retain(mr);
    } else if (!(mr = crmm_runtime_try_current_resource_ref(&current)) || !crmm_resource_is_device_accessible(mr) ||
               (mr->device >= 0 && mr->device != current)) {
        /* the slot may hold another device's resource: create would switch to its device */
        if (mr)
            drop_reference(mr); /* the registry holds another */
        return false;
    }
    crmm_device_buffer *buf = calloc(1, sizeof *buf);
    if (buf && crmm_resource_try_allocate(mr, size, crmm_stream_handle(stream), &buf->ptr)) {
        buf->mr = mr;
        buf->device = mr->device;
        buf->size = buf->capacity = size;
        crmm_stream_init_member(&buf->stream, crmm_stream_handle(stream));
        *out = buf;
        return true;
    }
    free(buf);
    drop_reference(mr); /* the caller or the registry holds another */
    return false;
}

bool crmm_device_buffer_try_destroy(crmm_device_buffer *buf)
{
    if (!buf)
        return true;
    if (!device_is_current(buf->device) ||
        !crmm_resource_try_deallocate(buf->mr, buf->ptr, buf->capacity, buf->stream.handle))
        return false;
    if (!crmm_resource_release_unless_last(buf->mr)) {
        /* the buffer held the last reference: destroying the resource may wait, so the buffer
         * stays, empty, for crmm_device_buffer_destroy to finish */
        buf->ptr = NULL;
        buf->capacity = buf->size = 0;
        return false;
    }
    free(buf);
    return true;
}

/* Copy `count` bytes from src into buf's block with buf's device current. */
static crmm_status buffer_fill(crmm_device_buffer *buf, const void *src, size_t count, bool from_host,
                               crmm_stream *stream, const char *who)
{
    crmm_device_guard g;
    crmm_status st = buffer_enter(buf, &g);
    if (st == CRMM_OK) {
        st = from_host ? crmm_copy_host_to_ptr(src, count, buf->ptr, stream)
                       : crmm_copy_device_to_ptr(src, buf->ptr, count, stream);
        crmm_cuda_device_restore(&g);
    }
    return st == CRMM_OK ? CRMM_OK : failed(st, who);
}

/* Destroy a buffer just made whose filling failed with `st` and return st: destroy leaves the
 * thread's error, that failure, as it was (a failing free is logged). */
static crmm_status destroy_after_failure(crmm_device_buffer *buf, crmm_status st)
{
    crmm_device_buffer_destroy(buf);
    return st;
}

crmm_status crmm_device_buffer_to_device(const void *host, size_t count, crmm_stream *stream, crmm_resource *mr,
                                         crmm_device_buffer **out)
{
    if (!out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "device_buffer_to_device: out is NULL");
    *out = NULL;
    if (!host && count > 0)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "device_buffer_to_device: host is NULL with count %zu", count);
    crmm_device_buffer *buf;
    crmm_status st = buffer_new(count, stream, mr, "device_buffer_to_device", &buf);
    if (st != CRMM_OK)
        return st;
    if ((st = buffer_fill(buf, host, count, true, stream, "device_buffer_to_device")) != CRMM_OK)
        return destroy_after_failure(buf, st);
    *out = buf;
    return CRMM_OK;
}

crmm_status crmm_device_buffer_copy_on_stream(const crmm_device_buffer *src, crmm_stream *stream,
                                              crmm_device_buffer **out)
{
    if (out)
        *out = NULL;
    if (!src || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "device_buffer_copy: %s is NULL", src ? "out" : "source buffer");
    crmm_device_buffer *buf;
    crmm_status st = buffer_new(src->size, stream, src->mr, "device_buffer_copy", &buf);
    if (st != CRMM_OK)
        return st;
    if ((st = buffer_fill(buf, src->ptr, src->size, false, stream, "device_buffer_copy")) != CRMM_OK)
        return destroy_after_failure(buf, st);
    *out = buf;
    return CRMM_OK;
}

crmm_status crmm_device_buffer_copy(const crmm_device_buffer *src, crmm_device_buffer **out)
{
    return crmm_device_buffer_copy_on_stream(src, src ? (crmm_stream *)&src->stream : NULL, out);
}

void crmm_device_buffer_destroy(crmm_device_buffer *buf)
{
    if (!buf)
        return;
    /* a failing free is logged; the thread's error stays the caller's */
    crmm_error_hold_begin();
    crmm_device_guard g;
    crmm_status st = buffer_enter(buf, &g);
    if (st != CRMM_OK)
        crmm_log(CRMM_LOG_WARN, "device_buffer_destroy: cannot make device %d current (%s); freeing anyway",
                 buf->device, crmm_last_error());
    st = crmm_resource_deallocate(buf->mr, buf->ptr, buf->capacity, buf->stream.handle);
    crmm_cuda_device_restore(&g);
    if (st != CRMM_OK)
        crmm_log(CRMM_LOG_WARN, "device_buffer_destroy: %s", crmm_last_error());
    crmm_resource_release(buf->mr);
    free(buf);
    crmm_error_hold_end();
}

void *crmm_device_buffer_ptr(const crmm_device_buffer *buf) { return buf ? buf->ptr : NULL; }
size_t crmm_device_buffer_size(const crmm_device_buffer *buf) { return buf ? buf->size : 0; }
size_t crmm_device_buffer_capacity(const crmm_device_buffer *buf) { return buf ? buf->capacity : 0; }
crmm_stream *crmm_device_buffer_stream(const crmm_device_buffer *buf) { return buf ? (crmm_stream *)&buf->stream : NULL; }
int crmm_device_buffer_device(const crmm_device_buffer *buf) { return buf ? buf->device : -1; }
crmm_resource *crmm_device_buffer_resource(const crmm_device_buffer *buf) { return buf ? buf->mr : NULL; }

crmm_status crmm_device_buffer_copy_to_host(const crmm_device_buffer *buf, void *host, size_t host_len,
                                            crmm_stream *stream)
{
    static const char who[] = "device_buffer_copy_to_host";
    if (!buf)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: buffer is NULL", who);
    if (host_len < buf->size)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: the host buffer holds %zu bytes, the device buffer %zu",
                              who, host_len, buf->size);
    if (!host && buf->size > 0)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: host is NULL", who);
    crmm_device_guard g;
    crmm_status st = buffer_enter(buf, &g);
    if (st == CRMM_OK) {
        st = crmm_copy_ptr_to_host(buf->ptr, host, buf->size, stream);
        crmm_cuda_device_restore(&g);
    }
    return st == CRMM_OK ? CRMM_OK : failed(st, who);
}

crmm_status crmm_device_buffer_copy_to_host_alloc(const crmm_device_buffer *buf, crmm_stream *stream, void **host,
                                                  size_t *len)
{
    static const char who[] = "device_buffer_copy_to_host_alloc";
    if (host)
        *host = NULL;
    if (len)
        *len = 0;
    if (!buf || !host)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", who, buf ? "host" : "buffer");
    if (buf->size == 0)
        return CRMM_OK;
    void *h = malloc(buf->size);
    if (!h) {
        char sz[32];
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: malloc of %s failed", who,
                              crmm_format_size(buf->size, sz, sizeof sz));
    }
    crmm_status st = crmm_device_buffer_copy_to_host(buf, h, buf->size, stream);
    if (st != CRMM_OK) {
        free(h);
        return st;
    }
    *host = h;
    if (len)
        *len = buf->size;
    return CRMM_OK;
}

static crmm_status check_fill(const crmm_device_buffer *buf, const void *src, size_t count, const char *who)
{
    if (!buf)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: buffer is NULL", who);
    if (count > buf->size)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: %zu bytes do not fit in the buffer's %zu", who, count,
                              buf->size);
    if (!src && count > 0)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: source is NULL with count %zu", who, count);
    return CRMM_OK;
}

crmm_status crmm_device_buffer_copy_from_host(crmm_device_buffer *buf, const void *host, size_t count,
                                              crmm_stream *stream)
{
    static const char who[] = "device_buffer_copy_from_host";
    crmm_status st = check_fill(buf, host, count, who);
    return st != CRMM_OK ? st : buffer_fill(buf, host, count, true, stream, who);
}

crmm_status crmm_device_buffer_copy_from_device(crmm_device_buffer *buf, const void *d_src, size_t count,
                                                crmm_stream *stream)
{
    static const char who[] = "device_buffer_copy_from_device";
    crmm_status st = check_fill(buf, d_src, count, who);
    return st != CRMM_OK ? st : buffer_fill(buf, d_src, count, false, stream, who);
}

/* Swap in a block of `capacity` bytes holding the first `keep` bytes of the old one; the old
 * block is freed on the buffer's stream after the copy. On error the buffer is unchanged. */
static crmm_status buffer_reallocate(crmm_device_buffer *buf, size_t capacity, size_t keep, const char *who)
{
    crmm_device_guard g;
    crmm_status st = buffer_enter(buf, &g);
    if (st != CRMM_OK)
        return failed(st, who);
    void *block = NULL;
    st = crmm_resource_allocate(buf->mr, capacity, buf->stream.handle, &block);
    if (st == CRMM_OK && keep > 0) {
        st = crmm_copy_device_to_ptr(buf->ptr, block, keep, &buf->stream);
        if (st != CRMM_OK) {
            crmm_kept_error why;
            crmm_keep_error(&why, st);
            if (crmm_resource_deallocate(buf->mr, block, capacity, buf->stream.handle) != CRMM_OK)
                crmm_log(CRMM_LOG_WARN, "%s: freeing the new block failed: %s", who, crmm_last_error());
            crmm_restore_error(&why);
        }
    }
    if (st != CRMM_OK) {
        crmm_cuda_device_restore(&g);
        return failed(st, who);
    }
    if (crmm_resource_deallocate(buf->mr, buf->ptr, buf->capacity, buf->stream.handle) != CRMM_OK)
        crmm_log(CRMM_LOG_WARN, "%s: freeing the old block failed: %s", who, crmm_last_error());
    crmm_cuda_device_restore(&g);
    buf->ptr = block;
    buf->capacity = capacity;
    return CRMM_OK;
}

crmm_status crmm_device_buffer_resize(crmm_device_buffer *buf, size_t new_size, crmm_stream *stream)
{
    if (!buf)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "device_buffer_resize: buffer is NULL");
    buf->stream.handle = crmm_stream_handle(stream);
    if (new_size > buf->capacity) {
        crmm_status st = buffer_reallocate(buf, new_size, buf->size, "device_buffer_resize");
        if (st != CRMM_OK)
            return st;
    }
    buf->size = new_size;
    return CRMM_OK;
}

crmm_status crmm_device_buffer_reserve(crmm_device_buffer *buf, size_t new_capacity, crmm_stream *stream)
{
    if (!buf)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "device_buffer_reserve: buffer is NULL");
    buf->stream.handle = crmm_stream_handle(stream);
    if (new_capacity <= buf->capacity)
        return CRMM_OK;
    return buffer_reallocate(buf, new_capacity, buf->size, "device_buffer_reserve");
}

crmm_status crmm_device_buffer_shrink_to_fit(crmm_device_buffer *buf, crmm_stream *stream)
{
    if (!buf)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "device_buffer_shrink_to_fit: buffer is NULL");
    buf->stream.handle = crmm_stream_handle(stream);
    if (buf->size == buf->capacity)
        return CRMM_OK;
    return buffer_reallocate(buf, buf->size, buf->size, "device_buffer_shrink_to_fit");
}

crmm_status crmm_device_buffer_set_stream(crmm_device_buffer *buf, crmm_stream *stream)
{
    if (!buf)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "device_buffer_set_stream: buffer is NULL");
    buf->stream.handle = crmm_stream_handle(stream);
    return CRMM_OK;
}
