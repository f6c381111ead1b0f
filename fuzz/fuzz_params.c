/* fuzz_params.c — libFuzzer target: parameter strings ("k=v k=v" / "k=v,k=v") against a table
 * with one parameter of every type, then the typed getters a plugin's create calls. */
#include "build_config.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/plugin.h>
#include "../libcrmm/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const crmm_param_spec fuzz_params[] = {
    {"size", CRMM_PARAM_SIZE, "1MiB", "a size", NULL, 0},
    {"count", CRMM_PARAM_UINT, "3", "a number", NULL, 0},
    {"enabled", CRMM_PARAM_BOOL, "false", "a switch", NULL, 0},
    {"label", CRMM_PARAM_STRING, NULL, "a text", NULL, 0},
    {"mode", CRMM_PARAM_ENUM, "none", "a choice", "none|posix_fd|fabric", 0},
    {"ratio", CRMM_PARAM_DOUBLE, "0.5", "a number with a point", NULL, 0},
    {"need", CRMM_PARAM_UINT, NULL, "a required number", NULL, CRMM_PARAM_REQUIRED},
    {NULL, 0, NULL, NULL, NULL, 0},
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
        }
        crmm_params_free(p);
    }
    free(text);
    return 0;
}
