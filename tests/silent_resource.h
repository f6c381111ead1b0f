/* silent_resource.h — a resource that refuses every allocation (CRMM_ERROR_OUT_OF_MEMORY) and
 * every free (CRMM_ERROR_CUDA) without recording a message, as a third-party resource may: the
 * layers above it and the buffer calls must still fail with its status. */
#ifndef CRMM_TESTS_SILENT_RESOURCE_H
#define CRMM_TESTS_SILENT_RESOURCE_H

#include <string.h>
#include <crmm/resource.h>

static crmm_status silent_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    (void)self, (void)bytes, (void)stream, (void)ptr;
    return CRMM_ERROR_OUT_OF_MEMORY;
}

static crmm_status silent_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    (void)self, (void)ptr, (void)bytes, (void)stream;
    return CRMM_ERROR_CUDA;
}

static void silent_destroy(crmm_resource *self) { (void)self; }

/* Make *r such a resource of kind "silent" with `flags`, holding one reference (the caller's
 * storage: destroy frees nothing). */
static inline void silent_resource_init(crmm_resource *r, unsigned flags)
{
    static const crmm_resource_ops ops = {.allocate = silent_allocate, .deallocate = silent_deallocate,
                                          .destroy = silent_destroy};
    memset(r, 0, sizeof *r);
    crmm_resource_init(r, &ops, "silent", flags, -1, NULL);
}

#endif
