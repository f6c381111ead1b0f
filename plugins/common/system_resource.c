/* system_resource.c — system allocated memory for devices with HMM or ATS (see system_resource.h).
 *
 * Allocation is aligned_alloc, rounded up to CRMM_ALLOCATION_ALIGNMENT. A free waits for the
 * stream it is made on first (a default stream: the resource's device's): the device may still be
 * using the memory, and free() does not know streams. With a headroom, each new block is advised
 * (cudaMemAdvise, preferred location) to live on the device for the part that fits in the free
 * device memory less the headroom, aligned down, and on the host for the rest; the pages migrate
 * when touched. */
#include "build_config.h"
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <crmm/alloc_counters.h>
#include <crmm/cuda_support.h>
#include "capture_check.h"
#include "counted_source.h"
#include "device_check.h"
#include "system_resource.h"

typedef struct system_resource {
    counted_source src;
    bool with_headroom;
    uint64_t headroom;
} system_resource;

static crmm_status advise(const char *kind, char *p, size_t bytes, enum cudaMemLocationType type, int id)
{
    struct cudaMemLocation location;
    memset(&location, 0, sizeof location);
    location.type = type;
    location.id = id;
    cudaError_t e = cudaMemAdvise(p, bytes, cudaMemAdviseSetPreferredLocation, location);
    if (e == cudaSuccess)
        return CRMM_OK;
    cudaGetLastError();
    crmm_cuda_status(e, "cudaMemAdvise(cudaMemAdviseSetPreferredLocation)");
    return crmm_error_add_context("%s: cannot place %zu bytes on the %s", kind, bytes,
                                  type == cudaMemLocationTypeDevice ? "device" : "host");
}

/* Prefer the device for what fits in its free memory less the headroom, the host for the rest. */
static crmm_status place(const system_resource *s, void *p, size_t bytes)
{
    const crmm_resource *self = &s->src.base;
    uint64_t free_bytes = 0, total = 0;
    crmm_status st = crmm_cuda_device_memory(self->device, &free_bytes, &total);
    if (st != CRMM_OK)
        return crmm_error_add_context("%s", self->kind);
    uint64_t room = free_bytes > s->headroom ? free_bytes - s->headroom : 0;
    size_t on_device = (size_t)(room < bytes ? room : bytes) & ~(size_t)(CRMM_ALLOCATION_ALIGNMENT - 1);
    if (on_device && (st = advise(self->kind, p, on_device, cudaMemLocationTypeDevice, self->device)) != CRMM_OK)
        return st;
    if (bytes > on_device)
        st = advise(self->kind, (char *)p + on_device, bytes - on_device, cudaMemLocationTypeHost, 0);
    return st;
}

static crmm_status system_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    (void)stream;
    system_resource *s = (system_resource *)self;
    char sz[32];
    if (bytes > SIZE_MAX - (CRMM_ALLOCATION_ALIGNMENT - 1))
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: %zu bytes cannot be rounded to the alignment", self->kind, bytes);
    size_t rounded = (bytes + CRMM_ALLOCATION_ALIGNMENT - 1) & ~(size_t)(CRMM_ALLOCATION_ALIGNMENT - 1);
    void *p = aligned_alloc(CRMM_ALLOCATION_ALIGNMENT, rounded);
    if (!p)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: failed to allocate %s: aligned_alloc failed", self->kind,
                              crmm_format_size(bytes, sz, sizeof sz));
    if (s->with_headroom) {
        if (crmm_process_exiting()) {
            free(p);
            return crmm_set_error(CRMM_ERROR_STATE, "%s: cannot allocate: the process is exiting (no more CUDA calls)",
                                  self->kind);
        }
        /* the device query and the advice are no stream operations, but CUDA does not say they are
         * safe under capture: in the relaxed mode neither a capture of this thread nor another
         * thread's global one can be invalidated by them */
        int mode;
        capture_check_relax_mode(&mode);
        crmm_status st = place(s, p, bytes);
        capture_check_restore_mode(mode);
        if (st != CRMM_OK) {
            free(p);
            return st;
        }
    }
    crmm_counters_add(&s->src.counters, bytes, CRMM_COUNT_SHARED);
    *ptr = p;
    return CRMM_OK;
}

static crmm_status system_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    system_resource *s = (system_resource *)self;
    if (!crmm_process_exiting()) {
        /* under capture the wait below is forbidden (it would invalidate the capture), and the
         * graph uses the block at every replay: refused, as the cuda plugin's free is */
        if (capture_check_active(stream))
            return capture_check_refuse(self->kind, "free memory", stream,
                                        "the graph may still use it at every replay; free it after the capture, or use a pool");
        /* the device may still be reading or writing the block on `stream`; a default stream is
         * that of the current device, so the resource's device is made current for the wait */
        crmm_device_guard g;
        crmm_status st = device_check_enter_for_stream(self->device, stream, &g);
        if (st == CRMM_OK) {
            st = crmm_cuda_status(cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize");
            crmm_cuda_device_restore(&g);
        }
        if (st != CRMM_OK)
            return crmm_error_add_context("%s: free of %p: not freed, the stream may still use it", self->kind, ptr);
    }
    free(ptr);
    /* free() cannot tell a wrong size: the counts stop at zero instead of wrapping */
    crmm_counters_sub(&s->src.counters, bytes, CRMM_COUNT_SHARED | CRMM_COUNT_FLOOR0);
    return CRMM_OK;
}

static const crmm_resource_ops system_ops = {
    .allocate = system_allocate, .deallocate = system_deallocate, .query = counted_source_query_unbounded,
    .destroy = counted_source_destroy,
};

crmm_status system_resource_create(const char *kind, const crmm_params *params, bool with_headroom, uint64_t headroom,
                                   crmm_resource **out)
{
    int device;
    crmm_status st = device_check_resolve(params, kind, &device);
    if (st == CRMM_OK)
        st = device_check_attribute(kind, device, cudaDevAttrPageableMemoryAccess, "cudaDevAttrPageableMemoryAccess",
                                    "cannot use system allocated memory: cudaDevAttrPageableMemoryAccess is 0 (needs "
                                    "HMM or ATS); use the managed plugin");
    if (st != CRMM_OK)
        return st;
    system_resource *s = calloc(1, sizeof *s);
    if (!s)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: malloc failed", kind);
    s->with_headroom = with_headroom;
    s->headroom = headroom;
    crmm_resource_init(&s->src.base, &system_ops, kind, CRMM_RESOURCE_DEVICE_ACCESSIBLE | CRMM_RESOURCE_HOST_ACCESSIBLE, device,
                       NULL);
    *out = &s->src.base;
    return CRMM_OK;
}
