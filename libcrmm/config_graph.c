/* config_graph.c — a parsed config turned into a graph that can be built: every plugin loaded,
 * every parameter checked against its plugin's table, every upstream and default resolved to a
 * resource, no cycle. All of it happens before any CUDA call; each error is recorded with its
 * line and the one on the lowest line is the one reported.
 *
 * The skipping load (for tools that work with what is installed) first moves every resource whose
 * plugin does not load, and those stacked on one, to a list of what was left out, then validates
 * the rest as usual. */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config_internal.h"
#include "internal.h"
#include "name_index.h"
#include "suggest.h"

long config_graph_find(const config_graph *g, const char *name)
{
    return name_index_find(&g->names, name);
}

static void unknown_resource(const config_graph *g, config_error *err, int line, const char *what, const char *name)
{
    if (err->line && line >= err->line)
        return; /* it would not be reported: spare the search for a near name */
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

/* The plugin_path as used: entries relative to the config file's directory made absolute.
 * Relative entries of a config without a directory (a string) are an error. */
static void resolve_plugin_path(config_graph *g, const char *base_dir, config_error *err)
{
    const config_value *path = &g->text.settings[CRMM_SETTING_PLUGIN_PATH];
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
        else if (d[0] != '/' && strchr(base_dir, ':'))
            /* made absolute it would split at that ':' into a directory relative to the cwd */
            config_error_at(err, path->line, "plugin_path entry '%s' is relative to %s, whose name holds ':' (the "
                            "separator of plugin_path); give absolute directories", d, base_dir);
        bool relative = d[0] != '/' && base_dir[0];
        used += (size_t)snprintf(out + used, cap - used, "%s%s%s%s", used ? ":" : "", relative ? base_dir : "",
                                 relative && strcmp(base_dir, "/") != 0 ? "/" : "", d);
    }
    free(copy);
    g->plugin_dirs = out;
}

/* Upstream cycles: each one reported once, from its first member in file order. Every resource
 * is walked once: a walk stops at the first resource an earlier walk reached, so a cycle is found
 * by the walk that meets itself. */
static void check_cycles(const config_graph *g, config_error *err)
{
    size_t n = g->text.nres;
    size_t *walked = calloc(n ? n : 1, sizeof *walked); /* 0: not reached; i + 1: reached from i */
    if (!walked) {
        config_error_at(err, 1, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        long at = (long)i;
        while (at >= 0 && !walked[at]) {
            walked[at] = i + 1;
            at = g->nodes[at].upstream;
        }
        if (at < 0 || walked[at] != i + 1)
            continue; /* the chain ends, or leads where an earlier walk went */
        long first = at; /* `at` is on the cycle this walk closed */
        for (long k = g->nodes[at].upstream; k != at; k = g->nodes[k].upstream)
            if (k < first)
                first = k;
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
    free(walked);
}

/* Each node's `host`: whether its chain ends in a host-memory plugin (false on a cycle), and an
 * error for a chain deeper than CONFIG_MAX_CHAIN_DEPTH. Each chain is walked once down to a
 * resource already decided, then once more to record the answers. */
static void mark_host_chains(config_graph *g, config_error *err)
{
    size_t n = g->text.nres;
    enum { UNDECIDED, ON_WALK, DECIDED };
    unsigned char *state = calloc(n ? n : 1, 1);
    size_t *depth = calloc(n ? n : 1, sizeof *depth); /* resources from it down to the bottom */
    if (!state || !depth) {
        free(state);
        free(depth);
        config_error_at(err, 1, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        long at = (long)i, last = -1;
        size_t walked = 0;
        while (at >= 0 && state[at] == UNDECIDED) {
            state[at] = ON_WALK;
            last = at;
            walked++;
            at = g->nodes[at].upstream;
        }
        bool host = false, cycle = at >= 0 && state[at] == ON_WALK; /* a cycle is reported on its own */
        size_t below = 0;
        if (at >= 0 && state[at] == DECIDED) {
            host = g->nodes[at].host;
            below = depth[at];
        } else if (at < 0 && last >= 0)
            host = g->nodes[last].plugin && (g->nodes[last].plugin->flags & CRMM_PLUGIN_HOST_MEMORY) != 0;
        for (long k = (long)i; k >= 0 && state[k] == ON_WALK; k = g->nodes[k].upstream) {
            state[k] = DECIDED;
            g->nodes[k].host = host;
            depth[k] = below + walked--;
            if (!cycle && depth[k] > CONFIG_MAX_CHAIN_DEPTH)
                config_error_at(err, g->text.res[k].line,
                                "resource.%s: its upstream chain is %zu resources deep, more than the %d allowed "
                                "(every call passes through each layer on the stack)",
                                g->text.res[k].name, depth[k], CONFIG_MAX_CHAIN_DEPTH);
        }
    }
    free(state);
    free(depth);
}

static bool is_skipped(const config_graph *g, const char *name)
{
    for (size_t i = 0; i < g->nskipped; i++)
        if (strcmp(g->skipped[i].name, name) == 0)
            return true;
    return false;
}

/* The skipping load: leave out each resource whose plugin does not load, then those stacked on
 * a left-out one, then the [crmm] default and [device.N] sections that name one. Each chain is
 * walked once, down to a resource already decided. */
static void skip_unloadable(config_graph *g, config_error *err)
{
    config_text *t = &g->text;
    size_t n = t->nres, nskip = 0;
    enum { UNDECIDED, ON_WALK, KEPT, UNLOADABLE, ON_SKIPPED };
    unsigned char *state = calloc(n ? n : 1, 1);
    char **reasons = calloc(n ? n : 1, sizeof *reasons);
    name_index names = {0};
    bool ok = state && reasons;
    for (size_t i = 0; ok && i < n; i++)
        ok = name_index_add(&names, t->res[i].name, i);
    for (size_t i = 0; ok && i < n; i++) {
        const crmm_plugin *plugin;
        if (t->res[i].plugin.text && crmm_plugin_load(t->res[i].plugin.text, g->plugin_dirs, &plugin) != CRMM_OK) {
            state[i] = UNLOADABLE;
            ok = (reasons[i] = strdup(crmm_last_error())) != NULL;
        }
    }
    for (size_t i = 0; ok && i < n; i++) {
        long at = (long)i;
        while (at >= 0 && state[at] == UNDECIDED) {
            state[at] = ON_WALK;
            at = name_index_find(&names, t->res[at].upstream.text);
        }
        unsigned char outcome = at >= 0 && state[at] >= UNLOADABLE ? ON_SKIPPED : KEPT;
        for (long k = (long)i; k >= 0 && state[k] == ON_WALK; k = name_index_find(&names, t->res[k].upstream.text))
            state[k] = outcome;
        nskip += state[i] >= UNLOADABLE;
    }
    name_index_free(&names);
    for (size_t i = 0; ok && i < n; i++)
        if (state[i] == ON_SKIPPED) {
            char reason[128];
            snprintf(reason, sizeof reason, "its upstream '%s' was skipped", t->res[i].upstream.text);
            ok = (reasons[i] = strdup(reason)) != NULL;
        }
    if (ok && nskip && !(g->skipped = calloc(nskip, sizeof *g->skipped)))
        ok = false;
    if (ok) {
        size_t kept = 0; /* in file order, so the skipped list is in line order too */
        for (size_t i = 0; i < n; i++) {
            if (state[i] < UNLOADABLE) {
                t->res[kept++] = t->res[i];
                continue;
            }
            g->skipped[g->nskipped++] = (config_skipped){t->res[i].name, reasons[i], t->res[i].line};
            reasons[i] = NULL;
            t->res[i].name = NULL;
            config_resource_section_free(&t->res[i]);
        }
        t->nres = kept;
    } else {
        config_error_at(err, 1, "out of memory");
    }
    for (size_t i = 0; reasons && i < n; i++)
        free(reasons[i]);
    free(reasons);
    free(state);
    if (!ok)
        return;
    if (t->settings[CRMM_SETTING_DEFAULT].text && is_skipped(g, t->settings[CRMM_SETTING_DEFAULT].text)) {
        free(t->settings[CRMM_SETTING_DEFAULT].text);
        t->settings[CRMM_SETTING_DEFAULT].text = NULL;
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

/* Load resource i's plugin and parse its parameters against the plugin's table, once: the node
 * keeps them (the rules and every build read them there). `loaded` maps a plugin text to the
 * first node that loaded it in this build: the loader checks a plugin's file and directories
 * (a realpath and a stat per path component) once per config load, not once per resource. */
static void check_resource(config_graph *g, size_t i, name_index *loaded, config_error *err)
{
    const config_resource_section *r = &g->text.res[i];
    config_node *node = &g->nodes[i];
    if (!r->plugin.text) {
        config_error_at(err, r->line, "[resource.%s] has no 'plugin = NAME'", r->name);
        return;
    }
    long first = name_index_find(loaded, r->plugin.text);
    if (first >= 0) {
        node->plugin = g->nodes[first].plugin;
    } else if (crmm_plugin_load(r->plugin.text, g->plugin_dirs, &node->plugin) == CRMM_OK) {
        (void)name_index_add(loaded, r->plugin.text, i); /* out of memory: the next one loads again */
    } else {
        node->plugin = NULL;
        config_error_at(err, r->plugin.line, "%s", config_error_text());
        return;
    }
    crmm_params *p;
    if (crmm_params_new(node->plugin, r->name, &p) != CRMM_OK) {
        config_error_at(err, r->plugin.line, "%s", config_error_text());
        return;
    }
    bool params_ok = true;
    for (size_t j = 0; j < r->nparams; j++)
        if (crmm_params_set(p, r->params[j].key, r->params[j].value) != CRMM_OK) {
            config_error_at(err, r->params[j].line, "%s", config_error_text());
            params_ok = false;
        }
    /* a required key given a bad value was reported as bad, not as missing */
    if (params_ok && crmm_params_check_required(p) != CRMM_OK) {
        config_error_at(err, r->line, "[resource.%s]: %s", r->name, config_error_text());
        params_ok = false;
    }
    if (params_ok)
        node->params = p;
    else
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
    bool indexed = g->nodes != NULL;
    for (size_t i = 0; indexed && i < t->nres; i++)
        indexed = name_index_add(&g->names, t->res[i].name, i);
    if (!indexed) {
        config_error_at(err, 1, "out of memory");
        return;
    }
    name_index loaded = {0};
    for (size_t i = 0; i < t->nres; i++) {
        g->nodes[i].upstream = -1;
        check_resource(g, i, &loaded, err);
        link_upstream(g, i, err);
    }
    name_index_free(&loaded);
    check_cycles(g, err);
    mark_host_chains(g, err);
    if (!err->line) /* the rules walk upstream chains: only once they are known to end */
        config_graph_check_rules(g, err);
    if (t->settings[CRMM_SETTING_DEFAULT].text && config_graph_find(g, t->settings[CRMM_SETTING_DEFAULT].text) < 0)
        unknown_resource(g, err, t->settings[CRMM_SETTING_DEFAULT].line, "default", t->settings[CRMM_SETTING_DEFAULT].text);
    for (size_t i = 0; i < t->ndev; i++) {
        if (!t->dev[i].resource.text)
            config_error_at(err, t->dev[i].line, "[device.%d] has no 'resource = NAME'", t->dev[i].device);
        else if (config_graph_find(g, t->dev[i].resource.text) < 0)
            unknown_resource(g, err, t->dev[i].resource.line, "resource", t->dev[i].resource.text);
    }
}

void config_graph_free(config_graph *g)
{
    for (size_t i = 0; g->nodes && i < g->text.nres; i++)
        crmm_params_free(g->nodes[i].params);
    config_text_free(&g->text);
    for (size_t i = 0; i < g->nskipped; i++) {
        free(g->skipped[i].name);
        free(g->skipped[i].reason);
    }
    free(g->skipped);
    free(g->nodes);
    name_index_free(&g->names);
    free(g->plugin_dirs);
    memset(g, 0, sizeof *g);
}
