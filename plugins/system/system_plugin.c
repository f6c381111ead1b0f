/* system_plugin.c — the `system` plugin (RMM's system_memory_resource): plain host allocations
 * that the device uses directly, on systems where it accesses pageable memory coherently (HMM or
 * ATS). Create refuses a device without cudaDevAttrPageableMemoryAccess. */
#include "build_config.h"
#include "../common/plugin_descriptor.h"
#include "../common/system_resource.h"

static crmm_status system_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    (void)upstream;
    return system_resource_create("system", params, false, 0, out);
}

PLUGIN_DESCRIPTOR(.name = "system", .upstream = CRMM_UPSTREAM_NONE, .create = system_create,
                  .description = "system allocated memory (aligned_alloc/free) for devices with HMM or ATS (cudaDevAttrPageableMemoryAccess); a free waits for its stream")
