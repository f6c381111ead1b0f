/* info_json.c — `crmm info --json`: what `crmm info` prints, as one JSON object (or, with a
 * PLUGIN, that plugin's object), for scripts and other tools. */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <crmm/crmm.h>
#include "text_escape.h"
#include "info.h"

#define str(s) text_write_json_string(stdout, (s))

static void json_devices(void)
{
    int rt = 0, drv = 0;
    char v[32];
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    printf("\"cuda\": {\"runtime\": ");
    snprintf(v, sizeof v, "%d.%d", rt / 1000, (rt % 1000) / 10);
    str(v);
    printf(", \"driver\": ");
    snprintf(v, sizeof v, "%d.%d", drv / 1000, (drv % 1000) / 10);
    str(drv ? v : NULL);
    int n = 0;
    if (crmm_cuda_device_count(&n) != CRMM_OK) {
        const char *why = crmm_last_error();
        if (strncmp(why, "CUDA error: ", 12) == 0)
            why += 12;
        printf(", \"devices\": [], \"no_device_reason\": ");
        str(why);
        printf("}");
        return;
    }
    printf(", \"devices\": [");
    for (int d = 0; d < n; d++) {
        struct cudaDeviceProp prop;
        uint64_t free_b = 0, total_b = 0;
        if (cudaGetDeviceProperties(&prop, d) != cudaSuccess)
            continue;
        crmm_cuda_device_memory(d, &free_b, &total_b);
        printf("%s{\"ordinal\": %d, \"name\": ", d ? ", " : "", d);
        str(prop.name);
        printf(", \"compute_capability\": \"%d.%d\", \"total_bytes\": %llu, \"free_bytes\": %llu}", prop.major,
               prop.minor, (unsigned long long)total_b, (unsigned long long)free_b);
    }
    printf("], \"no_device_reason\": null}");
}

void crmm_info_json_plugin(const char *path, const crmm_plugin *pl, const char *error)
{
    printf("{\"file\": ");
    str(path);
    if (!pl) {
        printf(", \"error\": ");
        str(error);
        printf("}");
        return;
    }
    printf(", \"name\": ");
    str(pl->name);
    printf(", \"version\": ");
    str(pl->version);
    printf(", \"abi\": \"%u.%u\", \"description\": ", pl->abi_major, pl->abi_minor);
    str(pl->description);
    printf(", \"upstream\": ");
    str(pl->upstream == CRMM_UPSTREAM_REQUIRED ? "required" : pl->upstream == CRMM_UPSTREAM_OPTIONAL ? "optional" : "none");
    printf(", \"parameters\": [");
    for (const crmm_param *s = pl->params; s && s->key; s++) {
        printf("%s{\"key\": ", s == pl->params ? "" : ", ");
        str(s->key);
        printf(", \"type\": ");
        str(crmm_param_type_name(s->type));
        printf(", \"default\": ");
        str(s->default_value);
        printf(", \"required\": %s, \"help\": ", s->flags & CRMM_PARAM_REQUIRED ? "true" : "false");
        str(s->help);
        printf(", \"choices\": ");
        str(s->type == CRMM_PARAM_ENUM ? s->choices : NULL);
        printf(", \"min\": %llu, \"max\": %llu}", (unsigned long long)s->min, (unsigned long long)s->max);
    }
    printf("]}");
}

/* One plugin of the search path, after a comma from the second on. */
static void json_plugin_visit(const char *path, const crmm_plugin *pl, crmm_status st, const char *error, void *arg)
{
    int *count = arg;
    (void)st;
    printf("%s", (*count)++ ? ",\n    " : "\n    ");
    crmm_info_json_plugin(path, pl, error);
}

static void json_config(const crmm_config *cfg)
{
    printf("{\"origin\": ");
    str(crmm_config_origin(cfg));
    printf(", \"default\": ");
    const char *def = crmm_config_default_resource(cfg, -1);
    str(def);
    printf(", \"plugin_path\": ");
    str(crmm_config_plugin_path(cfg));
    printf(", \"log_level\": ");
    str(crmm_config_log_level(cfg));
    printf(", \"devices\": {");
    int first = 1;
    for (int d = 0; d < CRMM_MAX_DEVICES; d++) { /* every [device.N] a config can name */
        const char *mine = crmm_config_default_resource(cfg, d);
        if (mine && (!def || strcmp(mine, def) != 0)) {
            printf("%s\"%d\": ", first ? "" : ", ", d);
            str(mine);
            first = 0;
        }
    }
    printf("}, \"resources\": [");
    size_t n = crmm_config_resource_count(cfg);
    for (size_t i = 0; i < n; i++) {
        printf("%s{\"name\": ", i ? ", " : "");
        str(crmm_config_resource_name(cfg, i));
        printf(", \"plugin\": ");
        str(crmm_config_resource_plugin(cfg, i));
        printf(", \"upstream\": ");
        str(crmm_config_resource_upstream(cfg, i));
        printf(", \"host_memory\": %s, \"parameters\": {", crmm_config_resource_is_host(cfg, i) ? "true" : "false");
        size_t np = crmm_config_resource_param_count(cfg, i);
        for (size_t j = 0; j < np; j++) {
            printf("%s", j ? ", " : "");
            str(crmm_config_resource_param_key(cfg, i, j));
            printf(": ");
            str(crmm_config_resource_param_value(cfg, i, j));
        }
        printf("}}");
    }
    printf("]}");
}

void crmm_info_json(const crmm_config *cfg, const char *config_error)
{
    printf("{\n  \"version\": ");
    str(crmm_version());
    printf(",\n  \"plugin_abi\": \"%d.%d\",\n  ", CRMM_PLUGIN_ABI_MAJOR, CRMM_PLUGIN_ABI_MINOR);
    json_devices();
    char sp[8192];
    const char *dirs = cfg ? crmm_config_plugin_path(cfg) : NULL;
    printf(",\n  \"plugin_search_path\": ");
    str(crmm_plugin_search_path(dirs, sp, sizeof sp));
    printf(",\n  \"plugins\": [");
    int count = 0;
    crmm_plugin_foreach(dirs, json_plugin_visit, &count);
    printf("%s],\n  \"config\": ", count ? "\n  " : "");
    if (cfg)
        json_config(cfg);
    else
        printf("null");
    printf(",\n  \"config_error\": ");
    str(config_error);
    printf(",\n  \"log_level\": {\"level\": ");
    str(crmm_log_level_name(crmm_info_log_level(cfg)));
    printf(", \"from\": ");
    str(crmm_info_log_level_origin(cfg));
    printf("},\n  \"environment\": {");
    bool first = true;
    for (const crmm_setting *s = crmm_settings(); s->key || s->env; s++) {
        if (!s->env)
            continue;
        printf("%s", first ? "" : ", ");
        first = false;
        str(s->env);
        printf(": ");
        str(getenv(s->env));
    }
    printf("}\n}\n");
}
