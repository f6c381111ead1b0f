/* prefetch_plugin.c — the `prefetch` adaptor (RMM's prefetch_resource_adaptor): every block is
 * prefetched to the resource's device on the allocation's stream, so managed memory is resident
 * there before the first kernel touches it.
 *
 * As RMM does, memory that cannot be prefetched (cudaMalloc'd or pinned memory: the driver says
 * cudaErrorInvalidValue) is handed out as it is, and on a device without concurrent managed
 * access nothing is prefetched. A host-only upstream is refused at create: no device can use
 * it. Other prefetch failures free the block and fail the allocation. */
#include "build_config.h"
#include <stdlib.h>
#include <cuda_runtime_api.h>
#include <crmm/alloc_counters.h>
#include <crmm/cuda_support.h>
#include <crmm/log.h>
#include <crmm/plugin.h>
#include "../common/capture_check.h"
#include "../common/adaptor.h"
#include "../common/plugin_descriptor.h"

typedef struct prefetch_resource {
    crmm_resource base;
    bool enabled;             /* the device has concurrent managed access */
    crmm_alloc_counters counters;
} prefetch_resource;

static crmm_status prefetch_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    prefetch_resource *p = (prefetch_resource *)self;
    crmm_status st = crmm_resource_allocate(self->upstream, bytes, stream, ptr);
    if (st != CRMM_OK)
        return st;
    /* under capture the prefetch would become a node of the user's graph, replayed at every
     * launch (and refused by drivers without prefetch nodes): it is a hint, so it is left out */
    if (p->enabled && !crmm_process_exiting() && !capture_check_active(stream)) {
        struct cudaMemLocation to = {.type = cudaMemLocationTypeDevice, .id = self->device};
        cudaError_t e = cudaMemPrefetchAsync(*ptr, bytes, to, 0, (cudaStream_t)stream);
        if (e == cudaErrorInvalidValue) {
            cudaGetLastError(); /* not managed memory: nothing to prefetch (RMM does the same) */
        } else if (e != cudaSuccess) {
            cudaGetLastError();
            crmm_resource_deallocate(self->upstream, *ptr, bytes, stream);
            crmm_cuda_status(e, "cudaMemPrefetchAsync");
            return crmm_error_add_context("prefetch '%s': block of %zu bytes to device %d", self->name, bytes, self->device);
        }
    }
    crmm_counters_add(&p->counters, bytes, CRMM_COUNT_SHARED);
    return CRMM_OK;
}

static crmm_status prefetch_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    return crmm_counted_deallocate(self, &((prefetch_resource *)self)->counters, ptr, bytes, stream);
}

static crmm_status prefetch_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    return crmm_counted_query(self, &((prefetch_resource *)self)->counters, what, out);
}

static void prefetch_destroy(crmm_resource *self)
{
    prefetch_resource *p = (prefetch_resource *)self;
    crmm_counted_report_leaks(self, &p->counters);
    free(p);
}

static const crmm_resource_ops prefetch_ops = {
    .allocate = prefetch_allocate, .deallocate = prefetch_deallocate, .query = prefetch_query,
    .destroy = prefetch_destroy,
};

static crmm_status prefetch_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    if (!(upstream->flags & CRMM_RESOURCE_DEVICE_ACCESSIBLE))
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED,
                              "prefetch: upstream %s '%s' is host memory, which no device can use; prefetch needs device or managed memory",
                              crmm_resource_kind(upstream), crmm_resource_name(upstream));
    int device = upstream->device >= 0 ? upstream->device : crmm_params_device(params);
    crmm_status st;
    if (device < 0 && (st = crmm_cuda_current_device(&device)) != CRMM_OK)
        return crmm_error_add_context("prefetch: needs a CUDA device");
    int concurrent = 0;
    st = crmm_cuda_status(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, device),
                          "prefetch: cudaDeviceGetAttribute(cudaDevAttrConcurrentManagedAccess)");
    if (st != CRMM_OK)
        return st;
    if (!concurrent)
        crmm_log(CRMM_LOG_INFO, "prefetch: device %d has no concurrent managed access; blocks are not prefetched", device);
    prefetch_resource *p = adaptor_alloc(sizeof *p, "prefetch");
    if (!p)
        return CRMM_ERROR_OUT_OF_MEMORY;
    p->enabled = concurrent != 0;
    crmm_resource_init(&p->base, &prefetch_ops, "prefetch", upstream->flags, device, upstream);
    *out = &p->base;
    return CRMM_OK;
}

/* crmm_plugin.validate: over host memory a config is refused when it is checked (as create
 * would refuse it), naming the section. */
static crmm_status prefetch_validate(const crmm_params *params, bool host_memory, const char **key)
{
    (void)params;
    *key = NULL;
    if (host_memory)
        return crmm_set_error(CRMM_ERROR_CONFIG, "prefetch: its upstream is host memory, which no device can use; prefetch "
                                                 "needs device or managed memory");
    return CRMM_OK;
}

PLUGIN_DESCRIPTOR(.name = "prefetch", .upstream = CRMM_UPSTREAM_REQUIRED, .create = prefetch_create, .validate = prefetch_validate,
                  .description = "prefetches every block to the device on its stream (for managed memory; RMM prefetch_resource_adaptor)")
