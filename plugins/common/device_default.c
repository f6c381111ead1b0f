/* device_default.c — a size that defaults to half of a device's free memory (device_default.h). */
#include "build_config.h"
#include <crmm/cuda_support.h>
#include <crmm/resource.h>
#include "device_default.h"

crmm_status device_default_half_free(int device, const char *who, const char *key, uint64_t *out)
{
    if (device < 0 && crmm_cuda_current_device(&device) != CRMM_OK)
        return crmm_error_add_context("%s: %s is not set and there is no device to take half of", who, key);
    uint64_t free_bytes = 0;
    if (crmm_cuda_device_memory(device, &free_bytes, NULL) != CRMM_OK)
        return crmm_error_add_context("%s: %s defaults to half the free memory of device %d", who, key, device);
    *out = (free_bytes / 2) & ~(uint64_t)(CRMM_ALLOCATION_ALIGNMENT - 1);
    return CRMM_OK;
}
