/* config_instances.c — the resources of a validated config graph, built per device on first use.
 *
 * A config is a template: the first request for a resource on a device builds its chain from
 * the bottom (or from the first member already built) up and caches every instance, so resources
 * that share an upstream share one instance on that device. The chain is walked with a loop, not
 * recursion, so a long chain needs no stack. Row 0 holds the host-only chains, which need no
 * device; row d + 1 holds device d's. One mutex guards the rows. */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config_internal.h"
#include "internal.h"

void config_instances_init(config_instances *ci, size_t count)
{
    memset(ci, 0, sizeof *ci);
    pthread_mutex_init(&ci->lock, NULL);
    ci->count = count;
}

void config_instances_fini(config_instances *ci)
{
    for (size_t row = 0; row <= CRMM_MAX_DEVICES; row++) {
        if (!ci->rows[row])
            continue;
        for (size_t i = 0; i < ci->count; i++)
            crmm_resource_release(ci->rows[row][i]);
        free(ci->rows[row]);
    }
    pthread_mutex_destroy(&ci->lock);
    memset(ci, 0, sizeof *ci);
}

/* Build resource i over `upstream` (NULL for none) for `device` from the parameters its node
 * parsed and checked; a new reference in *out. */
static crmm_status build_one(const config_graph *g, const char *origin, size_t i, int device, crmm_resource *upstream,
                             crmm_resource **out)
{
    const config_resource_section *r = &g->text.res[i];
    crmm_params view = *g->nodes[i].params; /* the node's values, for this device */
    view.device = device;
    view.plugin_dirs = g->plugin_dirs;
    if (crmm_resource_build(g->nodes[i].plugin, &view, upstream, out) != CRMM_OK)
        return crmm_error_add_context("%s:%d: resource.%s", origin, r->line, r->name);
    snprintf((*out)->name, sizeof (*out)->name, "%s", r->name);
    return CRMM_OK;
}

/* The caller holds ci->lock. */
static crmm_status get_locked(config_instances *ci, const config_graph *g, const char *origin, size_t i, int device,
                              crmm_resource **out)
{
    size_t row = device < 0 ? 0 : (size_t)device + 1;
    if (!ci->rows[row] && !(ci->rows[row] = calloc(ci->count ? ci->count : 1, sizeof(crmm_resource *))))
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "config: malloc failed");
    crmm_resource **built = ci->rows[row];
    /* the chain from i down to its first built member (or its bottom), top first */
    size_t *chain = malloc(ci->count * sizeof *chain);
    if (!chain)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "config: malloc failed");
    size_t n = 0;
    for (long at = (long)i; at >= 0 && !built[at]; at = g->nodes[at].upstream)
        chain[n++] = (size_t)at;
    crmm_status st = CRMM_OK;
    while (n > 0 && st == CRMM_OK) {
        size_t k = chain[--n];
        long up = g->nodes[k].upstream;
        crmm_resource *mr = NULL;
        if ((st = build_one(g, origin, k, device, up >= 0 ? built[up] : NULL, &mr)) == CRMM_OK)
            built[k] = mr; /* the row keeps the reference create gave */
    }
    free(chain);
    if (st == CRMM_OK)
        *out = crmm_resource_retain(built[i]);
    return st;
}

crmm_status config_instances_get(config_instances *ci, const config_graph *g, const char *origin, size_t i,
                                 int device, crmm_resource **out)
{
    pthread_mutex_lock(&ci->lock);
    crmm_status st = get_locked(ci, g, origin, i, device, out);
    pthread_mutex_unlock(&ci->lock);
    if (st == CRMM_OK) /* error.h: making (or finding made) a config's resource clears the error */
        crmm_clear_error();
    return st;
}
