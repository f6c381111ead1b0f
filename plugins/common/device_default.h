/* device_default.h — sizes that default to a share of a device's memory, worked out one way for
 * every plugin (pool's initial_size, arena's arena_size: RMM's "half of the free memory"). */
#ifndef CRMM_PLUGINS_DEVICE_DEFAULT_H
#define CRMM_PLUGINS_DEVICE_DEFAULT_H

#include <stdint.h>
#include <crmm/error.h>

/* Half the free memory of `device` (the current CUDA device when device < 0), rounded down to a
 * multiple of CRMM_ALLOCATION_ALIGNMENT, into *out. `who` and `key` ("pool 'main'",
 * "initial_size") name what defaults in the error. Errors: those of crmm_cuda_current_device and
 * crmm_cuda_device_memory (CRMM_ERROR_CUDA when there is no device), with that context. */
crmm_status device_default_half_free(int device, const char *who, const char *key, uint64_t *out);

#endif
