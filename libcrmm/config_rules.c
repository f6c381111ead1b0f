/* config_rules.c — the rules between a resource's parameters, checked while the graph is built.
 *
 * Each plugin's validate hook (crmm_plugin.validate) sees the resource's parameters and whether
 * it has an upstream chain that ends in host memory (as crmm_params_check decides it);
 * what it refuses is reported at the line of the parameter it blames, so `crmm check-config`
 * names it without building anything. */
#include "build_config.h"
#include <string.h>
#include "config_internal.h"
#include "internal.h"

/* The line of key `key` in resource r, else the section's line. */
static int key_line(const config_resource_section *r, const char *key)
{
    long at = key ? name_index_find(&r->keys, key) : -1;
    return at >= 0 ? r->params[at].line : r->line;
}

static void check_one(const config_graph *g, size_t i, config_error *err)
{
    const config_resource_section *r = &g->text.res[i];
    const crmm_params *p = g->nodes[i].params;
    if (!p)
        return; /* its plugin or a parameter was refused, and reported, when the graph was built */
    const char *key = NULL;
    /* as the build decides it: over host memory when there is an upstream and it is host memory */
    bool host_memory = g->nodes[i].upstream >= 0 && config_graph_is_host(g, i);
    if (crmm_params_check_rules(p, host_memory, &key) != CRMM_OK)
        config_error_at(err, key_line(r, key), "%s", config_error_text());
}

void config_graph_check_rules(const config_graph *g, config_error *err)
{
    for (size_t i = 0; i < g->text.nres; i++)
        check_one(g, i, err);
}
