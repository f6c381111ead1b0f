/* device_check.c — the device checks of the plugins that allocate on a device by themselves. */
#include "build_config.h"
#include <stdio.h>
#include <crmm/cuda_support.h>
#include "device_check.h"

crmm_status device_check_resolve(const crmm_params *params, const char *kind, int *device)
{
    *device = crmm_params_device(params);
    if (*device < 0 && crmm_cuda_current_device(device) != CRMM_OK)
        return crmm_error_add_context("%s: needs a CUDA device", kind);
    crmm_note_cuda_initialized();
    return CRMM_OK;
}

crmm_status device_check_attribute(const char *kind, int device, enum cudaDeviceAttr attr, const char *attr_name,
                                   const char *refusal)
{
    int value = 0;
    char what[96];
    snprintf(what, sizeof what, "cudaDeviceGetAttribute(%s)", attr_name);
    if (crmm_cuda_status(cudaDeviceGetAttribute(&value, attr, device), what) != CRMM_OK)
        return crmm_error_add_context("%s: device %d", kind, device);
    if (!value)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "%s: device %d %s", kind, device, refusal);
    return CRMM_OK;
}
