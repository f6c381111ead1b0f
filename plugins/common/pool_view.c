/* pool_view.c — a resource over a cudaMemPool_t it does not own (see pool_view.h).
 *
 * The driver does the stream ordering; the resource keeps lock-free counters for the ABI's
 * as-requested byte counts and the leak report, and reads reserved bytes from the pool's own
 * attributes (which count every user of the pool, not only this resource). */
#include "build_config.h"
#include <stdlib.h>
#include <crmm/alloc_counters.h>
#include <crmm/cuda_support.h>
#include "device_check.h"
#include "pool_view.h"

typedef struct pool_view {
    crmm_resource base;
    cudaMemPool_t pool;
    int get_pool_op;
    crmm_alloc_counters counters;
} pool_view;

static crmm_status pool_view_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    pool_view *v = (pool_view *)self;
    if (crmm_process_exiting())
        return crmm_set_error(CRMM_ERROR_STATE, "%s: the process is exiting: no device allocation", self->kind);
    crmm_device_guard g;
    if (device_check_enter_for_stream(self->device, stream, &g) != CRMM_OK)
        return crmm_error_add_context("%s", self->kind);
    cudaError_t e = cudaMallocFromPoolAsync(ptr, bytes, v->pool, (cudaStream_t)stream);
    crmm_cuda_device_restore(&g);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* leave no stale error for the caller's own checks */
        char sz[32];
        crmm_format_size(bytes, sz, sizeof sz);
        /* Any other failure of the pool (one destroyed under the view, say) is a failed
         * allocation too, as RMM reports it, not a CUDA error of the caller's. */
        if (e != cudaErrorMemoryAllocation && e != cudaErrorCudartUnloading)
            return crmm_set_error(CRMM_ERROR_BAD_ALLOC, "%s: failed to allocate %s: cudaMallocFromPoolAsync: %s (%s)",
                                  self->kind, sz, cudaGetErrorString(e), cudaGetErrorName(e));
        crmm_cuda_status(e, "cudaMallocFromPoolAsync");
        return crmm_error_add_context("%s: failed to allocate %s", self->kind, sz);
    }
    crmm_counters_add(&v->counters, bytes, CRMM_COUNT_SHARED);
    return CRMM_OK;
}

static crmm_status pool_view_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    pool_view *v = (pool_view *)self;
    if (crmm_process_exiting()) {
        crmm_counters_sub(&v->counters, bytes, CRMM_COUNT_SHARED | CRMM_COUNT_FLOOR0);
        return CRMM_OK; /* the driver is going away and takes the memory with it */
    }
    crmm_device_guard g;
    if (device_check_enter_for_stream(self->device, stream, &g) != CRMM_OK)
        return crmm_error_add_context("%s", self->kind);
    cudaError_t e = cudaFreeAsync(ptr, (cudaStream_t)stream);
    crmm_cuda_device_restore(&g);
    crmm_status st = crmm_cuda_status(e, "cudaFreeAsync");
    if (st != CRMM_OK)
        return crmm_error_add_context("%s", self->kind);
    /* cudaFreeAsync takes no size, so cannot tell a wrong one: the counts stop at zero */
    crmm_counters_sub(&v->counters, bytes, CRMM_COUNT_SHARED | CRMM_COUNT_FLOOR0);
    return CRMM_OK;
}

static crmm_status pool_attribute(const pool_view *v, enum cudaMemPoolAttr attr, uint64_t *out)
{
    uint64_t value = 0;
    crmm_status st = crmm_cuda_status(cudaMemPoolGetAttribute(v->pool, attr, &value), "cudaMemPoolGetAttribute");
    if (st != CRMM_OK)
        return crmm_error_add_context("%s", v->base.kind);
    *out = value;
    return CRMM_OK;
}

static crmm_status pool_view_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    pool_view *v = (pool_view *)self;
    if (crmm_counters_query(&v->counters, what, out) == CRMM_OK)
        return CRMM_OK;
    switch ((int)what) {
    case CRMM_QUERY_BYTES_RESERVED: return pool_attribute(v, cudaMemPoolAttrReservedMemCurrent, out);
    case CRMM_QUERY_BYTES_RESERVED_PEAK: return pool_attribute(v, cudaMemPoolAttrReservedMemHigh, out);
    case CRMM_QUERY_MAXIMUM_SIZE: *out = UINT64_MAX; return CRMM_OK;
    default: return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "%s resource cannot answer query %d", self->kind, (int)what);
    }
}

static crmm_status pool_view_control(crmm_resource *self, int op, void *arg)
{
    pool_view *v = (pool_view *)self;
    if (op != v->get_pool_op)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "%s resource has no control op %d", self->kind, op);
    if (!arg)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: get_pool: argument is NULL", self->kind);
    *(void **)arg = (void *)v->pool;
    return CRMM_OK;
}

static void pool_view_destroy(crmm_resource *self)
{
    pool_view *v = (pool_view *)self;
    crmm_resource_report_leaks(self, (uint64_t)v->counters.count, (uint64_t)v->counters.bytes);
    free(v); /* the pool is not ours */
}

/* no trim: the pool's release policy belongs to its owner */
static const crmm_resource_ops pool_view_ops = {
    .allocate = pool_view_allocate, .deallocate = pool_view_deallocate, .query = pool_view_query,
    .destroy = pool_view_destroy, .control = pool_view_control,
};

crmm_status pool_view_create(const char *kind, cudaMemPool_t pool, int device, unsigned flags, int get_pool_op,
                             crmm_resource **out)
{
    pool_view *v = calloc(1, sizeof *v);
    if (!v)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: malloc failed", kind);
    v->pool = pool;
    v->get_pool_op = get_pool_op;
    crmm_resource_init(&v->base, &pool_view_ops, kind, flags, device, NULL);
    *out = &v->base;
    return CRMM_OK;
}

crmm_status pool_view_check_device(const char *kind, int device)
{
    return device_check_attribute(kind, device, cudaDevAttrMemoryPoolsSupported, "cudaDevAttrMemoryPoolsSupported",
                                  "does not support memory pools (cudaDevAttrMemoryPoolsSupported is 0)");
}
