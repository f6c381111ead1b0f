/* device_check.h — what the plugins that allocate on a device by themselves check at create
 * (async, async_managed, cuda_async_view, system, sam_headroom): the device a resource is for,
 * and a capability that device must have. */
#ifndef CRMM_PLUGINS_DEVICE_CHECK_H
#define CRMM_PLUGINS_DEVICE_CHECK_H

#include <stdint.h>
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include <crmm/plugin.h>

/* The device of `params`, else the current one, into *device, with CUDA noted as initialized
 * (crmm_note_cuda_initialized). Errors: those of crmm_cuda_current_device, with the context
 * "<kind>: needs a CUDA device". */
crmm_status device_check_resolve(const crmm_params *params, const char *kind, int *device);

/* Refuse `device` when its attribute `attr` (spelled `attr_name`) is 0: CRMM_ERROR_UNSUPPORTED,
 * "<kind>: device <device> <refusal>". Errors: CRMM_ERROR_CUDA when the query fails, with the
 * context "<kind>: device <device>". */
crmm_status device_check_attribute(const char *kind, int device, enum cudaDeviceAttr attr, const char *attr_name,
                                   const char *refusal);

/* The default streams (NULL, cudaStreamLegacy, cudaStreamPerThread) name a stream of whichever
 * device is current: around a call that passes one, make `device` current (*g undoes it, with
 * crmm_cuda_device_restore). A created stream carries its device: nothing is switched for it, and
 * no CUDA call is made. */
static inline crmm_status device_check_enter_for_stream(int device, crmm_cuda_stream_t stream, crmm_device_guard *g)
{
    g->changed = 0;
    if ((uintptr_t)stream > (uintptr_t)CRMM_CUDA_STREAM_PER_THREAD)
        return CRMM_OK;
    return crmm_cuda_device_enter(device, g);
}

#endif
