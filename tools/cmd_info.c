/* cmd_info.c — `crmm info`: what this crmm is, what it can load, and what its config builds. */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <crmm/crmm.h>
#include "commands.h"
#include "info.h"

/* " [range MIN..MAX]" from the row, for numbers that have one. */
static void print_range(const crmm_param *s)
{
    if ((s->type != CRMM_PARAM_SIZE && s->type != CRMM_PARAM_UINT) || (!s->min && !s->max))
        return;
    if (s->max)
        printf(" [range %llu..%llu]", (unsigned long long)s->min, (unsigned long long)s->max);
    else
        printf(" [range %llu..]", (unsigned long long)s->min);
}

static void print_devices(void)
{
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    printf("CUDA runtime %d.%d", rt / 1000, (rt % 1000) / 10);
    if (drv)
        printf(", driver %d.%d\n", drv / 1000, (drv % 1000) / 10);
    else
        printf(", no driver\n");
    int n = 0;
    if (crmm_cuda_device_count(&n) != CRMM_OK) {
        const char *why = crmm_last_error();
        if (strncmp(why, "CUDA error: ", 12) == 0)
            why += 12;
        printf("no CUDA device: %s\n", why);
        return;
    }
    for (int d = 0; d < n; d++) {
        struct cudaDeviceProp prop;
        uint64_t free_b = 0, total_b = 0;
        char fs[32], ts[32];
        if (cudaGetDeviceProperties(&prop, d) != cudaSuccess)
            continue;
        crmm_cuda_device_memory(d, &free_b, &total_b);
        printf("device %d: %s, compute capability %d.%d, %s total, %s free\n", d, prop.name, prop.major,
               prop.minor, crmm_format_size(total_b, ts, sizeof ts), crmm_format_size(free_b, fs, sizeof fs));
    }
}

static void print_plugin(const char *path, const crmm_plugin *pl, crmm_status st, const char *error, void *arg)
{
    (void)arg;
    (void)st;
    if (!pl) {
        printf("  %s: cannot load: %s\n", path, error);
        return;
    }
    printf("  %s %s (ABI %u.%u) — %s\n    file: %s\n    upstream: %s\n", pl->name, pl->version ? pl->version : "?",
           pl->abi_major, pl->abi_minor, pl->description ? pl->description : "", path,
           pl->upstream == CRMM_UPSTREAM_REQUIRED ? "required" : pl->upstream == CRMM_UPSTREAM_OPTIONAL ? "optional" : "none");
    if (!pl->params || !pl->params[0].key)
        printf("    parameters: none\n");
    for (const crmm_param *s = pl->params; s && s->key; s++) {
        printf("    %-22s %-6s default %-10s %s", s->key, crmm_param_type_name(s->type),
               s->default_value ? s->default_value : (s->flags & CRMM_PARAM_REQUIRED ? "(required)" : "(unset)"),
               s->help ? s->help : "");
        if (s->type == CRMM_PARAM_ENUM)
            printf(" [%s]", s->choices);
        print_range(s);
        printf("\n");
    }
}

/* Upstreams printed after a resource before "-> ..." */
#define INFO_MAX_LINKS 8

static void print_graph(const crmm_config *cfg)
{
    printf("config: %s\n", crmm_config_origin(cfg));
    size_t n = crmm_config_resource_count(cfg);
    const char *def = crmm_config_default_resource(cfg, -1);
    printf("default resource: %s\n", def ? def : "(none: devices use the built-in cuda plugin)");
    for (int d = 0; d < CRMM_MAX_DEVICES; d++) { /* every [device.N] a config can name */
        const char *mine = crmm_config_default_resource(cfg, d);
        if (mine && (!def || strcmp(mine, def) != 0))
            printf("device %d resource: %s\n", d, mine);
    }
    for (size_t i = 0; i < n; i++) {
        printf("  %s = %s", crmm_config_resource_name(cfg, i), crmm_config_resource_plugin(cfg, i));
        size_t np = crmm_config_resource_param_count(cfg, i);
        if (np) {
            printf("(");
            for (size_t j = 0; j < np; j++)
                printf("%s%s=%s", j ? ", " : "", crmm_config_resource_param_key(cfg, i, j),
                       crmm_config_resource_param_value(cfg, i, j));
            printf(")");
        }
        /* the first links of the chain only: every resource of a long chain would print the rest */
        size_t links = 0;
        for (const char *up = crmm_config_resource_upstream(cfg, i); up; links++) {
            if (links == INFO_MAX_LINKS) {
                printf(" -> ...");
                break;
            }
            printf(" -> %s", up);
            long k = crmm_config_find_resource(cfg, up);
            up = k >= 0 ? crmm_config_resource_upstream(cfg, (size_t)k) : NULL;
        }
        printf("%s\n", crmm_config_resource_is_host(cfg, i) ? "   [host memory]" : "");
    }
}

/* A plugin name to look for among those found, and whether it was printed. */
typedef struct plugin_filter {
    const char *name;
    int found;
    char *path; /* find_plugin_file: the file it came from */
} plugin_filter;

static void find_plugin_file(const char *path, const crmm_plugin *pl, crmm_status st, const char *error, void *arg)
{
    plugin_filter *f = arg;
    (void)st;
    (void)error;
    if (!f->path && pl && strcmp(pl->name, f->name) == 0)
        f->path = strdup(path);
}

static void print_matching_plugin(const char *path, const crmm_plugin *pl, crmm_status st, const char *error, void *arg)
{
    plugin_filter *f = arg;
    if (f->found || !pl || strcmp(pl->name, f->name) != 0)
        return;
    f->found = 1;
    print_plugin(path, pl, st, error, NULL);
}

/* `crmm info [--config FILE] PLUGIN`: that plugin only, searched as the config would. */
static int info_one_plugin(const char *config, const char *name, int json)
{
    crmm_config *cfg = NULL;
    if (config && crmm_config_load_file(config, &cfg) != CRMM_OK) {
        fprintf(stderr, "crmm info: %s\n", crmm_last_error());
        return 1;
    }
    const char *dirs = crmm_config_plugin_path(cfg);
    const crmm_plugin *pl = NULL;
    /* the loader's error names what was searched and a close name, if any */
    int rc = crmm_info_load(name, dirs, &pl) == CRMM_OK ? 0 : 1;
    if (rc) {
        fprintf(stderr, "crmm info: %s\n", crmm_last_error());
    } else if (json) {
        plugin_filter f = {name, 0, NULL};
        if (!strchr(name, '/'))
            crmm_plugin_foreach(dirs, find_plugin_file, &f);
        crmm_info_json_plugin(f.path ? f.path : name, pl, NULL);
        printf("\n");
        free(f.path);
    } else if (strchr(name, '/')) {
        print_plugin(name, pl, CRMM_OK, NULL, NULL);
    } else {
        plugin_filter f = {name, 0, NULL};
        crmm_plugin_foreach(dirs, print_matching_plugin, &f);
    }
    crmm_config_free(cfg);
    return rc;
}

/* `crmm info --json`: the config as the text form loads it, then everything as JSON. */
static int info_json(const char *config)
{
    crmm_config *cfg = NULL;
    const crmm_config *active = NULL;
    char error[1024] = "";
    if (config) {
        if (crmm_config_load_file(config, &cfg) != CRMM_OK)
            snprintf(error, sizeof error, "%s", crmm_last_error());
        active = cfg;
    } else if (crmm_init(NULL) != CRMM_OK) {
        snprintf(error, sizeof error, "%s", crmm_last_error());
    } else {
        active = crmm_current_config();
    }
    crmm_info_json(active, error[0] ? error : NULL);
    crmm_config_free(cfg);
    crmm_finalize();
    return error[0] ? 1 : 0;
}

int crmm_cmd_info(int argc, char **argv)
{
    const char *config = NULL, *only = NULL;
    int json = 0;
    if (crmm_wants_help(argc, argv)) {
        printf("usage: crmm info [--config FILE] [--json] [PLUGIN]\n\n"
               "Prints crmm's version; the CUDA runtime and driver versions and each device (or why\n"
               "there is none); the plugin search path; every plugin found, with its version, ABI\n"
               "and parameters; the resource graph of the config (FILE, else $CRMM_CONFIG, else\n"
               "the installed crmm.ini, else the built-in default); the config's [crmm] keys; the\n"
               "log level and where it comes from ($CRMM_LOG_LEVEL wins over the config's\n"
               "log_level); and every environment variable crmm reads, with its current value.\n\n"
               "With PLUGIN (a name or a path to crmm_NAME.so), prints only that plugin and its\n"
               "parameters; exit 1 when it cannot be loaded. --json prints the same as one JSON\n"
               "object (keys: version, plugin_abi, cuda, plugin_search_path, plugins, config,\n"
               "config_error, log_level, environment; with PLUGIN, the plugin's object).\n\n"
               "crmm info --roff FILE.so... prints those plugins as the roff of crmm.ini(5)'s\n"
               "PLUGINS section (the build writes the page with it); crmm info --markdown FILE.so...\n"
               "prints them as rows of the README's plugin table.\n");
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--roff") == 0)
        return crmm_info_roff(argc - 2, argv + 2);
    if (argc > 1 && strcmp(argv[1], "--markdown") == 0)
        return crmm_info_markdown(argc - 2, argv + 2);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            config = argv[++i];
        } else if (strcmp(argv[i], "--config") == 0) {
            fprintf(stderr, "crmm info: --config needs a FILE (see --help)\n");
            return 2;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (argv[i][0] != '-' && !only) {
            only = argv[i];
        } else {
            fprintf(stderr, "crmm info: unexpected argument '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (only)
        return info_one_plugin(config, only, json);
    if (json)
        return info_json(config);
    printf("crmm %s (plugin ABI %d.%d)\n", crmm_version(), CRMM_PLUGIN_ABI_MAJOR, CRMM_PLUGIN_ABI_MINOR);
    print_devices();
    int rc = 0;
    crmm_config *cfg = NULL;
    const crmm_config *active = NULL;
    if (config) {
        if (crmm_config_load_file(config, &cfg) != CRMM_OK) {
            fprintf(stderr, "crmm info: %s\n", crmm_last_error());
            rc = 1;
        }
        active = cfg;
    } else if (crmm_init(NULL) != CRMM_OK) {
        fprintf(stderr, "crmm info: %s\n", crmm_last_error());
        rc = 1;
    } else {
        active = crmm_current_config();
    }
    char sp[8192];
    const char *dirs = active ? crmm_config_plugin_path(active) : NULL;
    const char *search = crmm_plugin_search_path(dirs, sp, sizeof sp);
    printf("plugin search path: %s\n", search ? search : "(longer than crmm searches; shorten plugin_path or $CRMM_PLUGIN_PATH)");
    printf("plugins:\n");
    if (crmm_plugin_foreach(dirs, print_plugin, NULL) == 0)
        printf("  (none found)\n");
    if (active)
        print_graph(active);
    crmm_info_print_settings(active);
    crmm_config_free(cfg);
    crmm_finalize();
    return rc;
}
