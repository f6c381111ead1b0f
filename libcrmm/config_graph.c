/* config_graph.c — a parsed config turned into a graph that can be built: every plugin loaded,
 * every parameter checked against its plugin's table, every upstream and default resolved to a
 * resource, no cycle. All of it happens before any CUDA call; each error is recorded with its
 * line and the one on the lowest line is the one reported.
 *
 * The skipping load (for tools that work with what is installed) first moves every resource whose
 * plugin does not load, and those stacked on one, to a list of what was left out, then validates
 * the rest as usual. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config_internal.h"
#include "internal.h"
#include "suggest.h"

long config_graph_find(const config_graph *g, const char *name)
{
    for (size_t i = 0; name && i < g->text.nres; i++)
        if (strcmp(g->text.res[i].name, name) == 0)
            return (long)i;
    return -1;
}

bool config_graph_is_host(const config_graph *g, size_t i)
{
    if (i >= g->text.nres || !g->nodes)
        return false;
    long at = (long)i;
    while (g->nodes[at].upstream >= 0)
        at = g->nodes[at].upstream;
    return g->nodes[at].plugin && (g->nodes[at].plugin->flags & CRMM_PLUGIN_HOST_MEMORY) != 0;
}

static void unknown_resource(const config_graph *g, config_error *err, int line, const char *what, const char *name)
{
    crmm_suggestion near;
    crmm_suggestion_start(&near, name);
    for (size_t i = 0; i < g->text.nres; i++)
        crmm_suggestion_consider(&near, g->text.res[i].name);
    const char *best = crmm_suggestion_best(&near);
    if (best)
        config_error_at(err, line, "%s '%s' is not a [resource.*] of this config (did you mean '%s'?)", what, name, best);
    else
        config_error_at(err, line, "%s '%s' is not a [resource.*] of this config", what, name);
}

/* A message of the core without its category: config errors carry their own "FILE:LINE: ". */
static const char *without_category(const char *msg)
{
    static const char *const categories[] = {"config error: ", "plugin error: ", "invalid argument: "};
    for (size_t i = 0; i < sizeof categories / sizeof categories[0]; i++)
        if (strncmp(msg, categories[i], strlen(categories[i])) == 0)
            return msg + strlen(categories[i]);
    return msg;
}

/* The plugin_path as used: entries relative to the config file's directory made absolute.
 * Relative entries of a config without a directory (a string) are an error. */
static void resolve_plugin_path(config_graph *g, const char *base_dir, config_error *err)
{
    const config_value *path = &g->text.plugin_path;
    if (!path->text)
        return;
    size_t entries = 1;
    for (const char *p = path->text; *p; p++)
        entries += *p == ':';
    size_t cap = strlen(path->text) + entries * (strlen(base_dir) + 1) + 1;
    char *out = calloc(1, cap), *copy = strdup(path->text);
    if (!out || !copy) {
        free(out);
        free(copy);
        config_error_at(err, path->line, "out of memory");
        return;
    }
    size_t used = 0;
    char *save = NULL;
    for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        if (d[0] != '/' && !base_dir[0])
            config_error_at(err, path->line, "plugin_path entry '%s' is relative; give absolute directories", d);
        bool relative = d[0] != '/' && base_dir[0];
        used += (size_t)snprintf(out + used, cap - used, "%s%s%s%s", used ? ":" : "", relative ? base_dir : "",
                                 relative && strcmp(base_dir, "/") != 0 ? "/" : "", d);
    }
    free(copy);
    g->plugin_dirs = out;
}

/* Upstream cycles: each one reported once, from its first member in file order. */
static void check_cycles(const config_graph *g, config_error *err)
{
    size_t n = g->text.nres;
    for (size_t i = 0; i < n; i++) {
        long at = (long)i;
        for (size_t s = 0; s < n && at >= 0; s++)
            at = g->nodes[at].upstream;
        if (at < 0)
            continue; /* the chain ends */
        long first = at; /* `at` is on a cycle after n steps */
        for (long k = g->nodes[at].upstream; k != at; k = g->nodes[k].upstream)
            if (k < first)
                first = k;
        if ((size_t)first != i)
            continue; /* i leads into the cycle, or the cycle was reported from an earlier member */
        char chain[512];
        size_t len = 0;
        long k = first;
        do {
            len += (size_t)snprintf(chain + len, sizeof chain - len, "%s -> ", g->text.res[k].name);
            k = g->nodes[k].upstream;
        } while (k != first && len < 400);
        snprintf(chain + len, sizeof chain - len, "%s%s", len >= 400 ? "... " : "", g->text.res[first].name);
        config_error_at(err, g->text.res[first].upstream.line, "upstream cycle: %s", chain);
    }
}

static bool is_skipped(const config_graph *g, const char *name)
{
    for (size_t i = 0; i < g->nskipped; i++)
        if (strcmp(g->skipped[i].name, name) == 0)
            return true;
    return false;
}

/* Move resource i to the skipped list (it takes the name and `reason`). */
static bool skip_resource(config_graph *g, size_t i, char *reason, config_error *err)
{
    config_text *t = &g->text;
    config_skipped *s = realloc(g->skipped, (g->nskipped + 1) * sizeof *s);
    if (!s || !reason) {
        free(reason);
        config_error_at(err, t->res[i].line, "out of memory");
        return false;
    }
    g->skipped = s;
    size_t at = g->nskipped++;
    for (; at > 0 && s[at - 1].line > t->res[i].line; at--)
        s[at] = s[at - 1];
    s[at] = (config_skipped){t->res[i].name, reason, t->res[i].line};
    t->res[i].name = NULL;
    config_resource_section_free(&t->res[i]);
    memmove(&t->res[i], &t->res[i + 1], (t->nres - i - 1) * sizeof *t->res);
    t->nres--;
    return true;
}

/* The skipping load: leave out each resource whose plugin does not load, then those stacked on
 * a left-out one, then the [crmm] default and [device.N] sections that name one. */
static void skip_unloadable(config_graph *g, config_error *err)
{
    config_text *t = &g->text;
    for (size_t i = 0; i < t->nres;) {
        const crmm_plugin *plugin;
        if (!t->res[i].plugin.text || crmm_plugin_load(t->res[i].plugin.text, g->plugin_dirs, &plugin) == CRMM_OK)
            i++;
        else if (!skip_resource(g, i, strdup(crmm_last_error()), err))
            return;
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t i = 0; i < t->nres;) {
            const char *up = t->res[i].upstream.text;
            if (!up || !is_skipped(g, up)) {
                i++;
                continue;
            }
            char reason[128];
            snprintf(reason, sizeof reason, "its upstream '%s' was skipped", up);
            if (!skip_resource(g, i, strdup(reason), err))
                return;
            changed = true;
        }
    }
    if (t->default_name.text && is_skipped(g, t->default_name.text)) {
        free(t->default_name.text);
        t->default_name.text = NULL;
    }
    for (size_t i = 0; i < t->ndev;) {
        if (t->dev[i].resource.text && is_skipped(g, t->dev[i].resource.text)) {
            free(t->dev[i].resource.text);
            memmove(&t->dev[i], &t->dev[i + 1], (t->ndev - i - 1) * sizeof *t->dev);
            t->ndev--;
        } else {
            i++;
        }
    }
    crmm_clear_error();
}

/* Load resource i's plugin and check its parameters against the plugin's table. */
static void check_resource(config_graph *g, size_t i, config_error *err)
{
    const config_resource_section *r = &g->text.res[i];
    config_node *node = &g->nodes[i];
    if (!r->plugin.text) {
        config_error_at(err, r->line, "[resource.%s] has no 'plugin = NAME'", r->name);
        return;
    }
    if (crmm_plugin_load(r->plugin.text, g->plugin_dirs, &node->plugin) != CRMM_OK) {
        node->plugin = NULL;
        config_error_at(err, r->plugin.line, "%s", without_category(crmm_last_error()));
        return;
    }
    crmm_params *p;
    if (crmm_params_new(node->plugin, r->name, &p) != CRMM_OK) {
        config_error_at(err, r->plugin.line, "%s", without_category(crmm_last_error()));
        return;
    }
    bool params_ok = true;
    for (size_t j = 0; j < r->nparams; j++)
        if (crmm_params_set(p, r->params[j].key, r->params[j].value) != CRMM_OK) {
            config_error_at(err, r->params[j].line, "%s", without_category(crmm_last_error()));
            params_ok = false;
        }
    /* a required key given a bad value was reported as bad, not as missing */
    if (params_ok && crmm_params_check_required(p) != CRMM_OK)
        config_error_at(err, r->line, "[resource.%s]: %s", r->name, without_category(crmm_last_error()));
    crmm_params_free(p);
}

static void link_upstream(config_graph *g, size_t i, config_error *err)
{
    const config_resource_section *r = &g->text.res[i];
    config_node *node = &g->nodes[i];
    if (!node->plugin)
        return;
    if (r->upstream.text) {
        if (node->plugin->upstream == CRMM_UPSTREAM_NONE)
            config_error_at(err, r->upstream.line, "plugin %s takes no upstream", r->plugin.text);
        else if ((node->upstream = config_graph_find(g, r->upstream.text)) < 0)
            unknown_resource(g, err, r->upstream.line, "upstream", r->upstream.text);
    } else if (node->plugin->upstream == CRMM_UPSTREAM_REQUIRED) {
        config_error_at(err, r->line, "[resource.%s]: plugin %s needs 'upstream = NAME'", r->name, r->plugin.text);
    }
}

void config_graph_build(config_graph *g, const char *base_dir, bool skip_unloadable_resources, config_error *err)
{
    config_text *t = &g->text;
    resolve_plugin_path(g, base_dir ? base_dir : "", err);
    if (skip_unloadable_resources && !err->line)
        skip_unloadable(g, err);
    g->nodes = calloc(t->nres ? t->nres : 1, sizeof *g->nodes);
    if (!g->nodes) {
        config_error_at(err, 1, "out of memory");
        return;
    }
    for (size_t i = 0; i < t->nres; i++) {
        g->nodes[i].upstream = -1;
        check_resource(g, i, err);
        link_upstream(g, i, err);
    }
    check_cycles(g, err);
    if (!err->line) /* the rules walk upstream chains: only once they are known to end */
        config_graph_check_rules(g, err);
    if (t->default_name.text && config_graph_find(g, t->default_name.text) < 0)
        unknown_resource(g, err, t->default_name.line, "default", t->default_name.text);
    for (size_t i = 0; i < t->ndev; i++) {
        if (!t->dev[i].resource.text)
            config_error_at(err, t->dev[i].line, "[device.%d] has no 'resource = NAME'", t->dev[i].device);
        else if (config_graph_find(g, t->dev[i].resource.text) < 0)
            unknown_resource(g, err, t->dev[i].resource.line, "resource", t->dev[i].resource.text);
    }
}

void config_graph_free(config_graph *g)
{
    config_text_free(&g->text);
    for (size_t i = 0; i < g->nskipped; i++) {
        free(g->skipped[i].name);
        free(g->skipped[i].reason);
    }
    free(g->skipped);
    free(g->nodes);
    free(g->plugin_dirs);
    memset(g, 0, sizeof *g);
}
