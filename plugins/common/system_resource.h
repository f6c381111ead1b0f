/* system_resource.h — the shared body of the `system` and `sam_headroom` plugins: system
 * allocated memory (plain aligned_alloc/free) for devices that access pageable host memory
 * coherently (HMM or ATS: cudaDevAttrPageableMemoryAccess), optionally placed on the device up to
 * a headroom of its free memory. */
#ifndef CRMM_PLUGINS_SYSTEM_RESOURCE_H
#define CRMM_PLUGINS_SYSTEM_RESOURCE_H

#include <stdbool.h>
#include <stdint.h>
#include <crmm/plugin.h>

/* Create a resource of `kind` (a static string) for the device of `params` (else the current
 * one). with_headroom: each allocation prefers the device for the part of it that fits in the
 * device's free memory less `headroom` bytes, the host for the rest (RMM's
 * sam_headroom_memory_resource). Errors: CRMM_ERROR_CUDA (no device, or the attribute query
 * failed), CRMM_ERROR_UNSUPPORTED (the device lacks cudaDevAttrPageableMemoryAccess),
 * CRMM_ERROR_OUT_OF_MEMORY (malloc). */
crmm_status system_resource_create(const char *kind, const crmm_params *params, bool with_headroom, uint64_t headroom,
                                   crmm_resource **out);

#endif
