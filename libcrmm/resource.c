/* resource.c — the memory-resource ABI's entry points: argument checks and reference counts.
 * It calls nothing of the core but the error and log functions.
 *
 * The allocate/deallocate wrappers are the fast path every caller goes through: two tests and an
 * indirect call, so that dispatch through the ABI costs a couple of nanoseconds over a direct
 * call. Reference counts are atomic; the last release destroys the resource and then releases
 * its upstream, so a chain unwinds from the top. */
#include "build_config.h"
/* this file defines the exported crmm_resource_allocate/deallocate (resource.h inlines them elsewhere) */
#define CRMM_NO_INLINE_DISPATCH 1
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/log.h>
#include <crmm/resource.h>
#include "internal.h"

void crmm_resource_init(crmm_resource *self, const crmm_resource_ops *ops, const char *kind,
                        unsigned flags, int device, crmm_resource *upstream)
{
    if (!self)
        return;
    self->ops = ops;
    self->flags = flags;
    self->device = device;
    self->kind = kind ? kind : "";
    self->upstream = crmm_resource_retain(upstream);
    __atomic_store_n(&self->refs, 1, __ATOMIC_RELAXED);
}

crmm_status crmm_resource_allocate_checked(crmm_resource *mr, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    if (__builtin_expect(!mr || !ptr, 0)) {
        if (ptr)
            *ptr = NULL;
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "allocate: %s is NULL", mr ? "ptr" : "resource");
    }
    if (__builtin_expect(bytes == 0, 0)) {
        *ptr = NULL;
        return CRMM_OK;
    }
    crmm_status st = mr->ops->allocate(mr, bytes, stream, ptr);
    if (__builtin_expect(st != CRMM_OK, 0)) {
        *ptr = NULL;
        return crmm_resource_failure(mr, st);
    }
    return st;
}

crmm_status crmm_resource_failure(const crmm_resource *mr, crmm_status status)
{
    if (!mr)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "resource_failure: resource is NULL (its failure was %s)",
                              crmm_status_name(status));
    if (status == CRMM_OK || crmm_last_status() == status)
        return status;
    /* Nothing recorded, or another status: an older failure's, or a recorded status the resource
     * did not return. Record this one, keeping the message that was there. */
    char was[1024];
    snprintf(was, sizeof was, "%s", crmm_last_status() == CRMM_OK ? "" : crmm_last_error());
    return crmm_set_error(status, "%s%s%s%s failed (%s) without saying why%s%s%s", mr->kind, mr->name[0] ? " '" : "",
                          mr->name, mr->name[0] ? "'" : "", crmm_status_name(status),
                          was[0] ? " (the last error recorded on this thread: " : "", was, was[0] ? ")" : "");
}

crmm_status crmm_resource_deallocate_checked(crmm_resource *mr, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    if (__builtin_expect(!ptr, 0))
        return CRMM_OK;
    if (__builtin_expect(!mr, 0))
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "deallocate: resource is NULL");
    crmm_status st = mr->ops->deallocate(mr, ptr, bytes, stream);
    return __builtin_expect(st != CRMM_OK, 0) ? crmm_resource_failure(mr, st) : st;
}

crmm_status crmm_resource_allocate(crmm_resource *mr, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    return crmm_resource_allocate_checked(mr, bytes, stream, ptr);
}

crmm_status crmm_resource_deallocate(crmm_resource *mr, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    return crmm_resource_deallocate_checked(mr, ptr, bytes, stream);
}

bool crmm_resource_try_allocate(crmm_resource *mr, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    if (!mr || !ptr)
        return false;
    if (bytes == 0) {
        *ptr = NULL;
        return true;
    }
    return mr->ops->try_allocate && mr->ops->try_allocate(mr, bytes, stream, ptr);
}

bool crmm_resource_try_deallocate(crmm_resource *mr, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    if (!ptr)
        return true;
    return mr && mr->ops->try_deallocate && mr->ops->try_deallocate(mr, ptr, bytes, stream);
}

bool crmm_resource_release_unless_last(crmm_resource *mr)
{
    long refs = __atomic_load_n(&mr->refs, __ATOMIC_RELAXED);
    while (refs > 1)
        if (__atomic_compare_exchange_n(&mr->refs, &refs, refs - 1, true, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            return true;
    return false;
}

static bool plugin_query(crmm_query what) { return (int)what >= CRMM_QUERY_PLUGIN_FIRST; }

crmm_status crmm_resource_query(crmm_resource *mr, crmm_query what, uint64_t *out)
{
    if (!mr || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "query: %s is NULL", mr ? "out" : "resource");
    /* a layer that leaves query unset answers the core queries its upstream answers; a plugin's
     * own query belongs to mr's kind and goes no further */
    while (!mr->ops->query && mr->upstream && !plugin_query(what))
        mr = mr->upstream;
    if (!mr->ops->query)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "%s resource answers no %squeries", mr->kind,
                              plugin_query(what) ? "plugin " : "");
    return mr->ops->query(mr, what, out);
}

crmm_status crmm_resource_query_kind(crmm_resource *mr, const char *kind, crmm_query what, uint64_t *out)
{
    if (!mr || !kind || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "query_kind: %s is NULL", !mr ? "resource" : !kind ? "kind" : "out");
    crmm_resource *layer = crmm_resource_find_kind(mr, kind);
    if (!layer)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "resource '%s' (%s) has no %s layer", mr->name, mr->kind, kind);
    return crmm_resource_query(layer, what, out);
}

crmm_status crmm_resource_query_upstream(crmm_resource *self, crmm_query what, uint64_t *out)
{
    if (!self || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "query: %s is NULL", self ? "out" : "resource");
    if (plugin_query(what) || !self->upstream)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "%s resource cannot answer query %d", self->kind, (int)what);
    return crmm_resource_query(self->upstream, what, out);
}

crmm_status crmm_resource_fragmentation(crmm_resource *mr, double *out)
{
    if (!out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "fragmentation: out is NULL");
    uint64_t free_bytes, largest;
    crmm_status st = crmm_resource_query(mr, CRMM_QUERY_BYTES_FREE, &free_bytes);
    if (st == CRMM_OK)
        st = crmm_resource_query(mr, CRMM_QUERY_LARGEST_FREE_BLOCK, &largest);
    if (st != CRMM_OK)
        return st;
    *out = free_bytes ? 1.0 - (double)largest / (double)free_bytes : 0.0;
    return CRMM_OK;
}

crmm_status crmm_resource_trim(crmm_resource *mr)
{
    if (!mr)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "trim: resource is NULL");
    /* a resource that leaves trim unset caches nothing itself: the trim goes on upstream */
    while (!mr->ops->trim && mr->upstream)
        mr = mr->upstream;
    return mr->ops->trim ? mr->ops->trim(mr) : CRMM_OK;
}

crmm_status crmm_resource_control(crmm_resource *mr, int op, void *arg)
{
    if (!mr)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "control: resource is NULL");
    if (!mr->ops->control)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "%s resource has no control operations", mr->kind);
    return mr->ops->control(mr, op, arg);
}

crmm_resource *crmm_resource_find_kind(crmm_resource *mr, const char *kind)
{
    for (; mr && kind; mr = mr->upstream)
        if (strcmp(mr->kind, kind) == 0)
            return mr;
    return NULL;
}

crmm_status crmm_resource_control_kind(crmm_resource *mr, const char *kind, int op, void *arg)
{
    if (!mr || !kind)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "control_kind: %s is NULL", mr ? "kind" : "resource");
    crmm_resource *layer = crmm_resource_find_kind(mr, kind);
    if (!layer)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "resource '%s' (%s) has no %s layer", mr->name, mr->kind, kind);
    return crmm_resource_control(layer, op, arg);
}

bool crmm_resource_is_device_accessible(const crmm_resource *mr) { return mr && (mr->flags & CRMM_RESOURCE_DEVICE_ACCESSIBLE); }
bool crmm_resource_is_host_accessible(const crmm_resource *mr) { return mr && (mr->flags & CRMM_RESOURCE_HOST_ACCESSIBLE); }
const char *crmm_resource_kind(const crmm_resource *mr) { return mr ? mr->kind : ""; }
const char *crmm_resource_name(const crmm_resource *mr) { return mr ? mr->name : ""; }
crmm_resource *crmm_resource_upstream(const crmm_resource *mr) { return mr ? mr->upstream : NULL; }

crmm_resource *crmm_resource_retain(crmm_resource *mr)
{
    if (mr)
        __atomic_add_fetch(&mr->refs, 1, __ATOMIC_RELAXED);
    return mr;
}

void crmm_resource_release(crmm_resource *mr)
{
    /* a destroy may record an error (an upstream free that fails): the caller's stays, and only
     * the last reference, which destroys, pays for keeping it */
    bool holding = false;
    while (mr) {
        long left = __atomic_sub_fetch(&mr->refs, 1, __ATOMIC_ACQ_REL);
        if (left > 0)
            break;
        if (left < 0) {
            crmm_log(CRMM_LOG_ERROR, "%s resource '%s' released more often than retained", mr->kind, mr->name);
            break;
        }
        if (!holding) {
            crmm_error_hold_begin();
            holding = true;
        }
        crmm_resource *up = mr->upstream;
        mr->ops->destroy(mr);
        mr = up; /* release the upstream's reference without recursion */
    }
    if (holding)
        crmm_error_hold_end();
}

long crmm_resource_refcount(const crmm_resource *mr)
{
    return mr ? __atomic_load_n(&mr->refs, __ATOMIC_RELAXED) : 0;
}

void crmm_resource_report_leaks(const crmm_resource *mr, uint64_t count, uint64_t bytes)
{
    if (!mr || !count)
        return;
    char sz[32], name[sizeof mr->name + 3] = "";
    if (mr->name[0])
        snprintf(name, sizeof name, " '%s'", mr->name);
    crmm_log(CRMM_LOG_WARN, "%s resource%s destroyed with %llu live allocation%s (%s)", mr->kind, name,
             (unsigned long long)count, count == 1 ? "" : "s", crmm_format_size(bytes, sz, sizeof sz));
}
