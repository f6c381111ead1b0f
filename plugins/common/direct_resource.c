/* direct_resource.c — a resource that hands each request to one allocator function.
 *
 * It keeps lock-free counters (for queries and the leak report at destroy), makes its own
 * device current around each CUDA call when another one is, and stops calling CUDA once the
 * process has begun to exit (it leaks instead; the driver reclaims the memory). */
#include "build_config.h"
#include <stdlib.h>
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include "capture_check.h"
#include "direct_resource.h"
#include "counted_source.h"

typedef struct direct_resource {
    counted_source src;
    const direct_backend *backend;
} direct_resource;

/* Around each call of the backend: make the resource's device current when another one is, and
 * relax the capture mode for a CUDA backend. cudaMalloc and its kind are what the global capture
 * mode forbids while any thread captures; relaxed, they run and hand out new memory, which is safe
 * for a graph (docs/cuda-graphs.md). backend_leave undoes both. */
static crmm_status backend_enter(const direct_resource *r, crmm_device_guard *g, int *mode)
{
    g->changed = 0;
    *mode = -1;
    if (!r->backend->uses_cuda)
        return CRMM_OK;
    int cur;
    if (r->src.base.device >= 0 && cudaGetDevice(&cur) == cudaSuccess && cur != r->src.base.device) {
        crmm_status st = crmm_cuda_device_enter(r->src.base.device, g);
        if (st != CRMM_OK)
            return st;
    }
    capture_check_relax_mode(mode);
    return CRMM_OK;
}

static void backend_leave(crmm_device_guard *g, int mode)
{
    capture_check_restore_mode(mode);
    crmm_cuda_device_restore(g);
}

static crmm_status direct_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    (void)stream;
    direct_resource *r = (direct_resource *)self;
    if (r->backend->uses_cuda && crmm_process_exiting())
        return crmm_set_error(CRMM_ERROR_STATE, "%s: cannot allocate: the process is exiting (no more CUDA calls)",
                              r->backend->kind);
    crmm_device_guard g;
    int mode;
    crmm_status st = backend_enter(r, &g, &mode);
    if (st != CRMM_OK)
        return st;
    st = r->backend->alloc(bytes, ptr);
    backend_leave(&g, mode);
    if (st != CRMM_OK) {
        char sz[32];
        return crmm_error_add_context("%s: failed to allocate %s", r->backend->kind, crmm_format_size(bytes, sz, sizeof sz));
    }
    crmm_counters_add(&r->src.counters, bytes, CRMM_COUNT_SHARED);
    return CRMM_OK;
}

static crmm_status direct_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    direct_resource *r = (direct_resource *)self;
    if (r->backend->uses_cuda && crmm_process_exiting()) {
        crmm_counters_sub(&r->src.counters, bytes, CRMM_COUNT_SHARED | CRMM_COUNT_FLOOR0);
        return CRMM_OK;
    }
    if (r->backend->uses_cuda && capture_check_active(stream))
        return capture_check_refuse(r->backend->kind, "free memory", stream,
                                    "the graph may still use it at every replay; free it after the capture, or use a pool");
    crmm_device_guard g;
    int mode;
    crmm_status st = backend_enter(r, &g, &mode);
    if (st != CRMM_OK)
        return st;
    st = r->backend->free(ptr, bytes);
    backend_leave(&g, mode);
    if (st != CRMM_OK && r->backend->uses_cuda && crmm_process_exiting())
        st = CRMM_OK; /* the runtime went away before our exit hook ran: leak, as above */
    if (st == CRMM_OK) /* a refused free (host: double, foreign, wrong size) changes nothing */
        crmm_counters_sub(&r->src.counters, bytes, CRMM_COUNT_SHARED | CRMM_COUNT_FLOOR0);
    return st;
}

static void direct_destroy(crmm_resource *self)
{
    direct_resource *r = (direct_resource *)self;
    counted_source_report_leaks(self);
    void (*close)(void) = r->backend->close;
    free(r);
    if (close)
        close();
}

static const crmm_resource_ops direct_ops = {
    .allocate = direct_allocate, .deallocate = direct_deallocate, .query = counted_source_query_unbounded,
    .destroy = direct_destroy,
};

crmm_status direct_resource_create(const direct_backend *backend, crmm_resource **out)
{
    int device = -1;
    if (backend->uses_cuda) {
        crmm_status st = crmm_cuda_current_device(&device);
        if (st != CRMM_OK)
            return crmm_error_add_context("%s", backend->kind);
    }
    if (backend->open && backend->open() != CRMM_OK)
        return crmm_error_add_context("%s", backend->kind);
    direct_resource *r = calloc(1, sizeof *r);
    if (!r) {
        if (backend->close)
            backend->close();
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: malloc failed", backend->kind);
    }
    crmm_resource_init(&r->src.base, &direct_ops, backend->kind, backend->flags, device, NULL);
    r->backend = backend;
    *out = &r->src.base;
    return CRMM_OK;
}

crmm_status direct_cuda_free(void *ptr, size_t bytes)
{
    (void)bytes;
    return crmm_cuda_status(cudaFree(ptr), "cudaFree");
}
