/* config_internal.h — the three stages of a config, each in its own file and usable without any
 * global state:
 *   config_parse.c      text -> config_text: sections, keys and values, each with its line;
 *   config_graph.c      config_text -> config_graph: plugins loaded, parameters checked,
 *                       upstreams resolved, no cycle; nothing built, no CUDA call;
 *   config_instances.c  config_graph -> resources, built per device on first use and cached.
 * config.c puts them together behind the public crmm_config_* API (crmm/config.h). */
#ifndef CRMM_CORE_CONFIG_INTERNAL_H
#define CRMM_CORE_CONFIG_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <crmm/config.h>
#include <crmm/plugin.h>
#include <crmm/resource.h>
#include "name_index.h"
#include "settings.h"

/* ---- errors: the one on the lowest line wins ----------------------------------------------- */

typedef struct config_error {
    int line;                 /* 0: no error yet */
    char message[1024];
} config_error;

/* Record `fmt` at `line` unless an error on a lower (or the same) line is recorded already. */
void config_error_at(config_error *e, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- config_parse.c: the text -------------------------------------------------------------- */

typedef enum config_section_kind {
    CONFIG_SECTION_NONE,      /* before the first section header */
    CONFIG_SECTION_BROKEN,    /* under a header that had an error: its keys are not checked */
    CONFIG_SECTION_CRMM,      /* [crmm] */
    CONFIG_SECTION_RESOURCE,  /* [resource.NAME] */
    CONFIG_SECTION_DEVICE     /* [device.N] */
} config_section_kind;

/* A value as written, with its line; text NULL when the key was not given. */
typedef struct config_value {
    char *text;
    int line;
} config_value;

typedef struct config_param {
    char *key;
    char *value;
    int line;
} config_param;

typedef struct config_resource_section {
    char *name;               /* NAME of [resource.NAME] */
    int line;                 /* of its header */
    config_value plugin, upstream;
    config_param *params;     /* the plugin's own keys, in file order */
    size_t nparams, capacity;
    name_index keys;          /* key -> its position in params: a key given twice is found at once */
} config_resource_section;

typedef struct config_device_section {
    int device;               /* N of [device.N] */
    int line;
    config_value resource;
} config_device_section;

typedef struct config_text {
    int crmm_line;            /* the [crmm] header's line; 0 when there is none */
    config_value settings[CRMM_SETTING_COUNT]; /* [crmm] keys, at their row of crmm_settings() */
    config_resource_section *res;
    size_t nres;
    config_device_section *dev;
    size_t ndev;
} config_text;

/* Parse INI text (syntax in crmm/config.h). Sections and keys are checked for form only
 * (known section and key names, no repeats, resource names, device ordinals); errors go to err.
 * CRMM_ERROR_OUT_OF_MEMORY (with a message) when parsing itself could not go on; *out then holds
 * what was read so far. Free *out with config_text_free in every case. */
crmm_status config_parse(const char *text, config_text *out, config_error *err);
void config_text_free(config_text *t);
void config_resource_section_free(config_resource_section *r);

/* ---- config_graph.c: the validated graph --------------------------------------------------- */

/* One [resource.*] of the graph, parallel to text.res. */
/* The deepest upstream chain a config may describe: every allocate, free and query passes
 * through each layer on the caller's stack, so a chain must stay far from any thread's stack size. */
#define CONFIG_MAX_CHAIN_DEPTH 1024

typedef struct config_node {
    const crmm_plugin *plugin;
    crmm_params *params;      /* its parameters, parsed and checked once; NULL when any was refused */
    long upstream;            /* index of its upstream, -1 for none */
    bool host;                /* its chain ends in a plugin that allocates host memory */
} config_node;

/* A resource the skipping load left out, and why. */
typedef struct config_skipped {
    char *name;
    char *reason;
    int line;
} config_skipped;

typedef struct config_graph {
    config_text text;
    config_node *nodes;       /* text.nres entries */
    name_index names;         /* text.res by name */
    char *plugin_dirs;        /* [crmm] plugin_path as used: relative entries made absolute */
    config_skipped *skipped;  /* in file order */
    size_t nskipped;
} config_graph;

/* Validate `g->text` (parsed already) into the graph: load each plugin (searching plugin_path,
 * relative entries taken from base_dir, "" for a config without a file), check its parameters
 * against its table, resolve upstreams, refuse cycles and unknown names. With skip_unloadable a
 * resource whose plugin does not load is moved to g->skipped with those stacked on it. Every
 * error goes to err (the lowest line wins). No CUDA call. */
void config_graph_build(config_graph *g, const char *base_dir, bool skip_unloadable, config_error *err);
void config_graph_free(config_graph *g);
long config_graph_find(const config_graph *g, const char *name);
/* True when the chain from resource i down ends in a plugin that allocates host memory (a field
 * config_graph_build set: inline, so that the graph's readers need not call into its builder). */
static inline bool config_graph_is_host(const config_graph *g, size_t i)
{
    return i < g->text.nres && g->nodes && g->nodes[i].host;
}

/* The last error as a line of a config error shows it ("FILE:LINE: " goes in front): without its
 * category, except when memory ran out, which the category is what says. */
static inline const char *config_error_text(void)
{
    return crmm_last_status() == CRMM_ERROR_OUT_OF_MEMORY ? crmm_last_error() : crmm_last_error_detail();
}

/* config_rules.c: run each resource's validate hook (crmm_plugin.validate) on the parameters its
 * node holds, reporting a refusal at the line of the parameter it names. Call only on a graph
 * without cycles. */
void config_graph_check_rules(const config_graph *g, config_error *err);

/* ---- config_instances.c: the resources ----------------------------------------------------- */

/* Instances of a graph's resources: row 0 for host-only chains, row d + 1 for device d. */
typedef struct config_instances {
    pthread_mutex_t lock;
    size_t count;             /* resources per row */
    crmm_resource **rows[CRMM_MAX_DEVICES + 1];
} config_instances;

void config_instances_init(config_instances *ci, size_t count);
/* Release every instance (resources still referenced elsewhere live on). */
void config_instances_fini(config_instances *ci);
/* Resource i of graph g for `device` (-1: host-only chain), with one reference for the caller:
 * the cached instance, or the chain built bottom-up (each new instance cached). Errors: the
 * plugin's, with "ORIGIN:LINE: resource.NAME: " in front. */
crmm_status config_instances_get(config_instances *ci, const config_graph *g, const char *origin, size_t i,
                                 int device, crmm_resource **out);

#endif
