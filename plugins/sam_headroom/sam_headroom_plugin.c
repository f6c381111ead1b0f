/* sam_headroom_plugin.c — the `sam_headroom` plugin (RMM's sam_headroom_memory_resource): system
 * allocated memory, like `system`, where each new block is advised to live on the device as far
 * as the device's free memory less `headroom` allows and on the host beyond that, so that the
 * headroom stays free for allocations that must be device memory (plugins/common/system_resource.c). */
#include "build_config.h"
#include "../common/plugin_descriptor.h"
#include "../common/system_resource.h"

typedef struct sam_headroom_config {
    uint64_t headroom;
} sam_headroom_config;

static crmm_status sam_headroom_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    (void)upstream;
    sam_headroom_config cfg = {0};
    crmm_status st = crmm_params_parse(params, &cfg);
    if (st != CRMM_OK)
        return st;
    return system_resource_create("sam_headroom", params, true, cfg.headroom, out);
}

static const crmm_param sam_headroom_params[] = {
    {.key = "headroom", .type = CRMM_PARAM_SIZE,
     .help = "device memory to keep free: the part of a block beyond free memory less this is placed on the host",
     .offset = offsetof(sam_headroom_config, headroom), .flags = CRMM_PARAM_REQUIRED},
    {NULL},
};

PLUGIN_DESCRIPTOR(.name = "sam_headroom", .upstream = CRMM_UPSTREAM_NONE, .params = sam_headroom_params,
                  .config_size = sizeof(sam_headroom_config), .create = sam_headroom_create,
                  .description = "system allocated memory placed on the device up to its free memory less a headroom, on the host beyond (HMM or ATS; RMM sam_headroom_memory_resource)")
