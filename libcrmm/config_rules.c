/* config_rules.c — the rules between a resource's parameters, checked while the graph is built.
 *
 * Each plugin's validate hook (crmm_plugin.validate) sees the resource's parameters and whether
 * it has an upstream chain that ends in host memory (as crmm_resource_create_with decides it);
 * what it refuses is reported at the line of the parameter it blames, so `crmm check-config`
 * names it without building anything. */
#include "build_config.h"
#include <string.h>
#include "config_internal.h"
#include "internal.h"

/* The line of key `key` in resource r, else the section's line. */
static int key_line(const config_resource_section *r, const char *key)
{
    for (size_t j = 0; key && j < r->nparams; j++)
        if (strcmp(r->params[j].key, key) == 0)
            return r->params[j].line;
    return r->line;
}

/* Memory ran out while resource r's rules were checked: the config cannot be called good. */
static void out_of_memory(const config_resource_section *r, config_error *err)
{
    config_error_at(err, r->line, "[resource.%s]: out of memory while checking its parameters", r->name);
}

static void check_one(const config_graph *g, size_t i, config_error *err)
{
    const config_resource_section *r = &g->text.res[i];
    crmm_params *p;
    if (!g->nodes[i].plugin)
        return;
    if (crmm_params_new(g->nodes[i].plugin, r->name, &p) != CRMM_OK) {
        out_of_memory(r, err); /* the table was read once already: only memory can fail now */
        return;
    }
    for (size_t j = 0; j < r->nparams; j++) {
        crmm_status st = crmm_params_set(p, r->params[j].key, r->params[j].value);
        if (st == CRMM_OK)
            continue;
        if (st == CRMM_ERROR_OUT_OF_MEMORY)
            out_of_memory(r, err);
        /* any other refusal was reported when the graph checked the parameters */
        crmm_params_free(p);
        return;
    }
    const char *key = NULL;
    /* as the build decides it: over host memory when there is an upstream and it is host memory */
    bool host_memory = g->nodes[i].upstream >= 0 && config_graph_is_host(g, i);
    crmm_status st = crmm_params_check_rules(p, host_memory, &key);
    if (st != CRMM_OK) {
        const char *msg = crmm_last_error();
        if (strncmp(msg, "config error: ", strlen("config error: ")) == 0)
            msg += strlen("config error: ");
        config_error_at(err, key_line(r, key), "%s", msg);
    }
    crmm_params_free(p);
}

void config_graph_check_rules(const config_graph *g, config_error *err)
{
    for (size_t i = 0; i < g->text.nres; i++)
        check_one(g, i, err);
}
