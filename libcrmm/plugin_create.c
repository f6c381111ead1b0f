/* plugin_create.c — a resource from a loaded plugin: the checks the core makes around a
 * plugin's create (upstream rule, required parameters, a message for every failure, a resource
 * with the ops every resource must have) and naming the instance. The config's instances, the
 * runtime's crmm_resource_create and the logging switch all build through here. */
#include "build_config.h"
#include <stdio.h>
#include <crmm/cuda_support.h>
#include <crmm/error.h>
#include "internal.h"

crmm_status crmm_params_check(const crmm_params *params, const crmm_resource *upstream)
{
    const crmm_plugin *plugin = params->plugin;
    if (upstream && plugin->upstream == CRMM_UPSTREAM_NONE)
        return crmm_set_error(CRMM_ERROR_CONFIG, "plugin %s takes no upstream", plugin->name);
    if (!upstream && plugin->upstream == CRMM_UPSTREAM_REQUIRED)
        return crmm_set_error(CRMM_ERROR_CONFIG, "plugin %s needs an upstream resource", plugin->name);
    crmm_status st = crmm_params_check_required(params);
    if (st != CRMM_OK)
        return st;
    const char *key;
    bool host_memory = upstream && !(upstream->flags & CRMM_RESOURCE_DEVICE_ACCESSIBLE);
    return crmm_params_check_rules(params, host_memory, &key);
}

crmm_status crmm_resource_create_with(const crmm_plugin *plugin, crmm_params *params,
                                      crmm_resource *upstream, crmm_resource **out)
{
    crmm_status st = crmm_params_check(params, upstream);
    return st == CRMM_OK ? crmm_resource_build(plugin, params, upstream, out) : st;
}

crmm_status crmm_resource_build(const crmm_plugin *plugin, const crmm_params *params, crmm_resource *upstream,
                                crmm_resource **out)
{
    crmm_status st;
    crmm_resource *mr = NULL;
    crmm_clear_error();
    st = plugin->create(params, upstream, &mr);
    if (st != CRMM_OK) {
        if (crmm_last_status() == CRMM_OK)
            crmm_set_error(st, "plugin %s: create failed without a message", plugin->name);
        return st;
    }
    if (!mr)
        return crmm_set_error(CRMM_ERROR_PLUGIN, "plugin %s: create returned CRMM_OK but no resource", plugin->name);
    if (!mr->ops || !mr->ops->allocate || !mr->ops->deallocate || !mr->ops->destroy) {
        const crmm_resource_ops *ops = mr->ops;
        st = crmm_set_error(CRMM_ERROR_PLUGIN, "plugin %s: its resource has no %s operation", plugin->name,
                            !ops ? "ops table, so no allocate" : !ops->allocate ? "allocate"
                            : !ops->deallocate ? "deallocate" : "destroy");
        /* Undo what we can: destroy it (when it can be) and give its upstream reference back. */
        if (ops && ops->destroy)
            crmm_resource_release(mr);
        return st;
    }
    if (!mr->name[0])
        snprintf(mr->name, sizeof mr->name, "%s", params->name);
    *out = mr;
    return CRMM_OK;
}


crmm_status crmm_resource_create_by_name(const char *plugin_name, const char *dirs, int device, const char *name,
                                         const char *params, crmm_resource *upstream, crmm_resource **out)
{
    const crmm_plugin *plugin;
    crmm_status st = crmm_plugin_load(plugin_name, dirs, &plugin);
    if (st != CRMM_OK)
        return st;
    crmm_params *p;
    if ((st = crmm_params_new(plugin, name, &p)) != CRMM_OK)
        return st;
    p->device = device;
    p->plugin_dirs = dirs;
    /* built with `device` current, as a config's resources are: plugins that take the current
     * device (cuda, managed, pinned) are then for that device too; a host chain needs none */
    bool host = upstream ? upstream->device < 0 : (plugin->flags & CRMM_PLUGIN_HOST_MEMORY) != 0;
    crmm_device_guard g = {-1, 0};
    if ((st = crmm_params_set_list(p, params)) == CRMM_OK && !host &&
        (st = crmm_cuda_device_enter(device, &g)) != CRMM_OK)
        crmm_error_add_context("%s: building it for device %d", plugin_name, device);
    if (st == CRMM_OK)
        st = crmm_resource_create_with(plugin, p, upstream, out);
    crmm_cuda_device_restore(&g);
    crmm_params_free(p);
    return st;
}

crmm_status crmm_params_create_resource(const crmm_params *creator, const char *plugin, const char *params,
                                        const char *name, crmm_resource *upstream, crmm_resource **out)
{
    if (!creator || !plugin || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "params_create_resource: %s is NULL",
                              !creator ? "creator" : !plugin ? "plugin" : "out");
    return crmm_resource_create_by_name(plugin, creator->plugin_dirs, creator->device, name, params, upstream, out);
}

crmm_status crmm_plugin_path_create_resource(const char *plugin_path, int device, const char *plugin,
                                             const char *params, const char *name, crmm_resource *upstream,
                                             crmm_resource **out)
{
    if (!plugin || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "plugin_path_create_resource: %s is NULL",
                              !plugin ? "plugin" : "out");
    return crmm_resource_create_by_name(plugin, plugin_path, device, name, params, upstream, out);
}
