/* probe_resource.c — the recording resource of probe_resource.h. */
#include "build_config.h"
#include <stdlib.h>
#include "probe_resource.h"
#include "test_support.h"

static crmm_status host_get(void **ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    (void)stream;
    *ptr = aligned_alloc(CRMM_ALLOCATION_ALIGNMENT, (bytes + 255) & ~(size_t)255);
    return *ptr ? CRMM_OK : crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "probe: no host memory");
}

static crmm_status host_put(void *ptr, crmm_cuda_stream_t stream)
{
    (void)stream;
    free(ptr);
    return CRMM_OK;
}

static const probe_memory host_memory = {0};

static int device_now(const probe_resource *p) { return p->memory->current_device ? p->memory->current_device() : -1; }

static crmm_status probe_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    probe_resource *p = (probe_resource *)self;
    __atomic_store_n(&p->alloc_device, device_now(p), __ATOMIC_RELAXED);
    __atomic_store_n(&p->alloc_stream, stream, __ATOMIC_RELAXED);
    if (p->max_live && __atomic_load_n(&p->live, __ATOMIC_SEQ_CST) >= p->max_live)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "probe: %d blocks out already", p->max_live);
    crmm_status st = (p->memory->get ? p->memory->get : host_get)(ptr, bytes, stream);
    if (st == CRMM_OK) {
        __atomic_add_fetch(&p->live_bytes, bytes, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&p->live, 1, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&p->allocations, 1, __ATOMIC_SEQ_CST);
        if (p->hook)
            p->hook(p, 'a');
    }
    return st;
}

static crmm_status probe_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    probe_resource *p = (probe_resource *)self;
    __atomic_store_n(&p->free_device, device_now(p), __ATOMIC_RELAXED);
    __atomic_store_n(&p->free_stream, stream, __ATOMIC_RELAXED);
    __atomic_store_n(&p->free_bytes, bytes, __ATOMIC_RELAXED);
    if (__atomic_load_n(&p->refuses_frees, __ATOMIC_SEQ_CST))
        return crmm_set_error(CRMM_ERROR_CUDA, "probe: free of %p refused (the test asks it to refuse frees)", ptr);
    __atomic_sub_fetch(&p->live, 1, __ATOMIC_SEQ_CST);
    __atomic_sub_fetch(&p->live_bytes, bytes, __ATOMIC_SEQ_CST);
    return (p->memory->put ? p->memory->put : host_put)(ptr, stream);
}

static void probe_destroy(crmm_resource *self) { free(self); }

/* The calls without waiting: done as the ordinary ones when the test says the probe serves at
 * once, else refused with nothing changed. */
static bool probe_try_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    probe_resource *p = (probe_resource *)self;
    if (!p->serves_at_once || probe_allocate(self, bytes, stream, ptr) != CRMM_OK)
        return false;
    __atomic_add_fetch(&p->served_at_once, 1, __ATOMIC_SEQ_CST);
    return true;
}

static bool probe_try_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    probe_resource *p = (probe_resource *)self;
    if (!p->serves_at_once || probe_deallocate(self, ptr, bytes, stream) != CRMM_OK)
        return false;
    __atomic_add_fetch(&p->served_at_once, 1, __ATOMIC_SEQ_CST);
    return true;
}

static crmm_status probe_trim(crmm_resource *self)
{
    probe_resource *p = (probe_resource *)self;
    __atomic_add_fetch(&p->trims, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&p->trim_device, device_now(p), __ATOMIC_SEQ_CST);
    if (p->refuses_trims)
        return crmm_set_error(CRMM_ERROR_CUDA, "probe: trim refused");
    __atomic_store_n(&p->cached_bytes, 0, __ATOMIC_SEQ_CST);
    return CRMM_OK;
}

static crmm_status probe_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    probe_resource *p = (probe_resource *)self;
    if (what != CRMM_QUERY_BYTES_RESERVED || !p->answers_reserved)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "probe: query %d not answered", (int)what);
    *out = __atomic_load_n(&p->live_bytes, __ATOMIC_SEQ_CST) + __atomic_load_n(&p->cached_bytes, __ATOMIC_SEQ_CST);
    if (p->hook)
        p->hook(p, 'q');
    return CRMM_OK;
}

static const crmm_resource_ops probe_ops = {.allocate = probe_allocate,
                                            .deallocate = probe_deallocate,
                                            .query = probe_query,
                                            .trim = probe_trim,
                                            .destroy = probe_destroy,
                                            .try_allocate = probe_try_allocate,
                                            .try_deallocate = probe_try_deallocate};

probe_resource *probe_resource_new(const probe_memory *memory, unsigned flags, int device)
{
    probe_resource *p = calloc(1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    p->memory = memory ? memory : &host_memory;
    p->alloc_device = p->free_device = p->trim_device = -1;
    crmm_resource_init(&p->base, &probe_ops, "probe", flags, device, NULL);
    return p;
}
