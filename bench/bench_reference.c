/* bench_reference.c — the raw cudaMalloc, cudaMallocAsync and cudaMallocFromPoolAsync references
 * of `crmm bench`.
 *
 * A reference resource is the crmm_resource base plus, for the stream-ordered ones, the memory
 * pool it allocates from: the device's default pool (its original release threshold kept, to be
 * restored) or a pool of its own. allocate/deallocate are one CUDA call each: the cost measured
 * is CUDA's plus the ABI dispatch every crmm resource pays too. */
#include "build_config.h"
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include "bench_reference.h"

typedef struct reference_resource {
    crmm_resource base;
    cudaMemPool_t pool;          /* the stream-ordered ones only */
    bool own_pool;               /* made by this resource (destroyed with it), not the default */
    uint64_t saved_threshold;    /* the default pool's release threshold before we raised it */
} reference_resource;

static crmm_status malloc_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    (void)self;
    (void)stream;
    cudaError_t e = cudaMalloc(ptr, bytes);
    return e == cudaSuccess ? CRMM_OK : crmm_cuda_status(e, "cudaMalloc");
}

static crmm_status malloc_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    (void)self;
    (void)bytes;
    (void)stream;
    if (crmm_process_exiting())
        return CRMM_OK;
    cudaError_t e = cudaFree(ptr);
    return e == cudaSuccess ? CRMM_OK : crmm_cuda_status(e, "cudaFree");
}

static crmm_status async_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    (void)self;
    cudaError_t e = cudaMallocAsync(ptr, bytes, (cudaStream_t)stream);
    return e == cudaSuccess ? CRMM_OK : crmm_cuda_status(e, "cudaMallocAsync");
}

static crmm_status async_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    (void)self;
    (void)bytes;
    if (crmm_process_exiting())
        return CRMM_OK;
    cudaError_t e = cudaFreeAsync(ptr, (cudaStream_t)stream);
    return e == cudaSuccess ? CRMM_OK : crmm_cuda_status(e, "cudaFreeAsync");
}

static crmm_status from_pool_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    reference_resource *r = (reference_resource *)self;
    cudaError_t e = cudaMallocFromPoolAsync(ptr, bytes, r->pool, (cudaStream_t)stream);
    return e == cudaSuccess ? CRMM_OK : crmm_cuda_status(e, "cudaMallocFromPoolAsync");
}

static crmm_status async_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    reference_resource *r = (reference_resource *)self;
    enum cudaMemPoolAttr attr;
    switch (what) {
    case CRMM_QUERY_BYTES_RESERVED: attr = cudaMemPoolAttrReservedMemCurrent; break;
    case CRMM_QUERY_BYTES_RESERVED_PEAK: attr = cudaMemPoolAttrReservedMemHigh; break;
    default: return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "%s reference cannot answer query %d", self->name, (int)what);
    }
    uint64_t v = 0;
    cudaError_t e = cudaMemPoolGetAttribute(r->pool, attr, &v);
    if (e != cudaSuccess)
        return crmm_cuda_status(e, "cudaMemPoolGetAttribute");
    *out = (uint64_t)v;
    return CRMM_OK;
}

static void reference_destroy(crmm_resource *self)
{
    reference_resource *r = (reference_resource *)self;
    crmm_device_guard guard;
    if (r->pool && !crmm_process_exiting() && crmm_cuda_device_enter(self->device, &guard) == CRMM_OK) {
        uint64_t threshold = r->saved_threshold;
        cudaDeviceSynchronize(); /* frees still queued on streams reach the pool first */
        if (r->own_pool) {
            cudaMemPoolDestroy(r->pool);
        } else {
            cudaMemPoolTrimTo(r->pool, 0);
            cudaMemPoolSetAttribute(r->pool, cudaMemPoolAttrReleaseThreshold, &threshold);
        }
        crmm_cuda_device_restore(&guard);
    }
    free(r);
}

static const crmm_resource_ops malloc_ops = {
    .allocate = malloc_allocate,
    .deallocate = malloc_deallocate,
    .destroy = reference_destroy,
};

static const crmm_resource_ops async_ops = {
    .allocate = async_allocate,
    .deallocate = async_deallocate,
    .query = async_query,
    .destroy = reference_destroy,
};

static const crmm_resource_ops from_pool_ops = {
    .allocate = from_pool_allocate,
    .deallocate = async_deallocate,
    .query = async_query,
    .destroy = reference_destroy,
};

const char *bench_reference_name(bench_reference_kind kind)
{
    switch (kind) {
    case BENCH_REFERENCE_CUDA_MALLOC: return "cudaMalloc";
    case BENCH_REFERENCE_CUDA_MALLOC_ASYNC: return "cudaMallocAsync";
    case BENCH_REFERENCE_CUDA_MALLOC_FROM_POOL_ASYNC: return "cudaMallocFromPoolAsync";
    }
    return NULL;
}

/* Make a pool of r's own as RMM's cuda_async_memory_resource makes one by default: pinned device
 * memory, no export handle, never trimmed at synchronization, not primed. */
static crmm_status make_own_pool(reference_resource *r, int device)
{
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaError_t e = cudaMemPoolCreate(&r->pool, &props);
    if (e != cudaSuccess) {
        r->pool = NULL;
        return crmm_cuda_status(e, "cudaMemPoolCreate");
    }
    r->own_pool = true;
    uint64_t max = UINT64_MAX;
    if ((e = cudaMemPoolSetAttribute(r->pool, cudaMemPoolAttrReleaseThreshold, &max)) != cudaSuccess)
        return crmm_cuda_status(e, "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)");
    return CRMM_OK;
}

/* The default pool: raise its release threshold to the maximum, give back what it caches, reset
 * its high-water mark. Or, with `own`, a new pool (make_own_pool). */
static crmm_status prepare_pool(reference_resource *r, int device, bool own)
{
    int supported = 0;
    cudaError_t e = cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device);
    if (e != cudaSuccess)
        return crmm_cuda_status(e, "cudaDeviceGetAttribute(cudaDevAttrMemoryPoolsSupported)");
    if (!supported)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "device %d has no stream-ordered memory pools", device);
    if (own)
        return make_own_pool(r, device);
    if ((e = cudaDeviceGetMemPool(&r->pool, device)) != cudaSuccess) {
        r->pool = NULL;
        return crmm_cuda_status(e, "cudaDeviceGetMemPool");
    }
    uint64_t saved = 0, max = UINT64_MAX, zero = 0;
    if ((e = cudaMemPoolGetAttribute(r->pool, cudaMemPoolAttrReleaseThreshold, &saved)) != cudaSuccess) {
        r->pool = NULL;
        return crmm_cuda_status(e, "cudaMemPoolGetAttribute(cudaMemPoolAttrReleaseThreshold)");
    }
    r->saved_threshold = saved;
    if ((e = cudaMemPoolSetAttribute(r->pool, cudaMemPoolAttrReleaseThreshold, &max)) != cudaSuccess)
        return crmm_cuda_status(e, "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)");
    if ((e = cudaMemPoolTrimTo(r->pool, 0)) != cudaSuccess)
        return crmm_cuda_status(e, "cudaMemPoolTrimTo");
    if ((e = cudaMemPoolSetAttribute(r->pool, cudaMemPoolAttrReservedMemHigh, &zero)) != cudaSuccess)
        return crmm_cuda_status(e, "cudaMemPoolSetAttribute(cudaMemPoolAttrReservedMemHigh)");
    return CRMM_OK;
}

crmm_status bench_reference_create(bench_reference_kind kind, int device, crmm_resource **out)
{
    const char *name = bench_reference_name(kind);
    if (!name || !out || device < 0)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "bench reference: %s",
                              !name ? "unknown kind" : !out ? "out is NULL" : "no device");
    crmm_device_guard guard;
    crmm_status st = crmm_cuda_device_enter(device, &guard);
    if (st != CRMM_OK)
        return st;
    reference_resource *r = calloc(1, sizeof *r);
    if (!r) {
        crmm_cuda_device_restore(&guard);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "bench reference: malloc failed");
    }
    bool own = kind == BENCH_REFERENCE_CUDA_MALLOC_FROM_POOL_ASYNC;
    const crmm_resource_ops *ops = own ? &from_pool_ops : kind == BENCH_REFERENCE_CUDA_MALLOC_ASYNC ? &async_ops : &malloc_ops;
    if (ops != &malloc_ops && (st = prepare_pool(r, device, own)) != CRMM_OK) {
        crmm_cuda_device_restore(&guard);
        crmm_resource_init(&r->base, ops, name, 0, device, NULL);
        crmm_resource_release(&r->base); /* restores the threshold if it was raised, destroys its own pool */
        return crmm_error_add_context("%s reference", name);
    }
    crmm_cuda_device_restore(&guard);
    crmm_resource_init(&r->base, ops, name, CRMM_RESOURCE_DEVICE_ACCESSIBLE, device, NULL);
    snprintf(r->base.name, sizeof r->base.name, "%s", name);
    *out = &r->base;
    return CRMM_OK;
}
