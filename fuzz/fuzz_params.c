/* fuzz_params.c — libFuzzer target: parameter strings ("k=v k=v" / "k=v,k=v") against a table
 * with one parameter of every type, then the typed getters and crmm_params_parse (into a config
 * struct, with ranges) that a plugin's create calls. */
#include "build_config.h"
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/plugin.h>
#include "../libcrmm/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fuzz_config {
    uint64_t size, count, need;
    bool enabled;
    const char *label;
    int mode;
    double ratio;
} fuzz_config;

static const crmm_param fuzz_params[] = {
    {.key = "size", .type = CRMM_PARAM_SIZE, .default_value = "1MiB",
     .help = "a size",
     .offset = offsetof(fuzz_config, size), .min = 1},
    {.key = "count", .type = CRMM_PARAM_UINT, .default_value = "3",
     .help = "a number",
     .offset = offsetof(fuzz_config, count), .max = 1000},
    {.key = "enabled", .type = CRMM_PARAM_BOOL, .default_value = "false",
     .help = "a switch",
     .offset = offsetof(fuzz_config, enabled)},
    {.key = "label", .type = CRMM_PARAM_STRING,
     .help = "a text",
     .offset = offsetof(fuzz_config, label)},
    {.key = "mode", .type = CRMM_PARAM_ENUM, .default_value = "none",
     .help = "a choice",
     .choices = "none|posix_fd|fabric",
     .offset = offsetof(fuzz_config, mode)},
    {.key = "ratio", .type = CRMM_PARAM_DOUBLE, .default_value = "0.5",
     .help = "a number with a point",
     .offset = offsetof(fuzz_config, ratio)},
    {.key = "need", .type = CRMM_PARAM_UINT,
     .help = "a required number",
     .flags = CRMM_PARAM_REQUIRED,
     .offset = offsetof(fuzz_config, need)},
    {NULL},
};

static crmm_status fuzz_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    (void)params;
    (void)upstream;
    (void)out;
    return CRMM_ERROR_UNSUPPORTED;
}

static const crmm_plugin fuzz_plugin = {
    CRMM_PLUGIN_HEADER,
    .name = "fuzz",
    .version = "1.0.0",
    .description = "parameter table for the fuzzer",
    .upstream = CRMM_UPSTREAM_NONE,
    .flags = CRMM_PLUGIN_HOST_MEMORY,
    .params = fuzz_params,
    .config_size = sizeof(fuzz_config),
    .create = fuzz_create,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    crmm_params *p = NULL;
    if (crmm_params_new(&fuzz_plugin, "fuzz", &p) == CRMM_OK) {
        if (crmm_params_set_list(p, text) == CRMM_OK && crmm_params_check_required(p) == CRMM_OK) {
            uint64_t u;
            bool b;
            double d;
            const char *s;
            (void)crmm_params_get_size(p, "size", &u);
            (void)crmm_params_get_uint(p, "count", &u);
            (void)crmm_params_get_bool(p, "enabled", &b);
            (void)crmm_params_get_string(p, "label", &s);
            (void)crmm_params_get_string(p, "mode", &s);
            (void)crmm_params_get_double(p, "ratio", &d);
            if (crmm_params_get_uint(p, "need", &u) != CRMM_OK)
                abort(); /* required and checked: must be there */
            int choice;
            fuzz_config cfg = {0};
            if (crmm_params_get_enum(p, "mode", &choice) != CRMM_OK || choice < 0 || choice > 2)
                abort(); /* an enum with a default always has one of its choices */
            if (crmm_params_parse(p, &cfg) == CRMM_OK && (cfg.mode != choice || cfg.need != u))
                abort(); /* the struct holds what the getters give */
            if (!(crmm_params_given(p) & (UINT64_C(1) << 6)))
                abort(); /* need (row 6) was given */
        }
        crmm_params_free(p);
    }
    free(text);
    return 0;
}
