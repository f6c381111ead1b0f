/* direct_resource.h — the shared body of the plugins that call one allocator directly
 * (cuda, managed, pinned, host): counters, the device guard, the exit guard, the leak report,
 * and their create function and descriptor (DIRECT_PLUGIN). Each of those plugins supplies only
 * its alloc/free pair, its name and its description. */
#ifndef CRMM_PLUGINS_DIRECT_RESOURCE_H
#define CRMM_PLUGINS_DIRECT_RESOURCE_H

#include <crmm/alloc_counters.h>
#include <crmm/plugin.h>
#include "plugin_descriptor.h"

typedef struct direct_backend {
    const char *kind;    /* plugin name */
    unsigned flags;      /* CRMM_RESOURCE_* */
    bool uses_cuda;      /* needs a device; frees are skipped once the process exits */
    /* allocate bytes (> 0); return CRMM_OK or a status with crmm_set_error */
    crmm_status (*alloc)(size_t bytes, void **ptr);
    crmm_status (*free)(void *ptr, size_t bytes);
    /* optional: called at create before anything else (an error fails the create) and at
     * destroy after everything else, for state the backend's resources share */
    crmm_status (*open)(void);
    void (*close)(void);
} direct_backend;

/* Create a resource over `backend` for the current device (or none for host). */
crmm_status direct_resource_create(const direct_backend *backend, crmm_resource **out);

/* direct_backend.free for memory from cudaMalloc or cudaMallocManaged: cudaFree. */
crmm_status direct_cuda_free(void *ptr, size_t bytes);

/* The create function and descriptor of the plugin over `backend` (a direct_backend): no
 * upstream, no parameters. The rest of the descriptor follows: .name, .description, .flags. */
#define DIRECT_PLUGIN(backend, ...) \
    static crmm_status direct_plugin_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out) \
    { \
        (void)params; \
        (void)upstream; \
        return direct_resource_create(&(backend), out); \
    } \
    PLUGIN_DESCRIPTOR(.upstream = CRMM_UPSTREAM_NONE, .create = direct_plugin_create, __VA_ARGS__)

#endif
