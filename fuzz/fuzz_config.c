/* fuzz_config.c — libFuzzer target: config files (crmm_config_load_string, then the queries a
 * tool makes of a loaded config). Plugins are not found (no plugin path), so a config naming
 * one stops at that error; the parser and the checks before it are what is fuzzed. */
#include "build_config.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/config.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    crmm_config *cfg = NULL;
    if (crmm_config_load_string(text, "fuzz.ini", &cfg) == CRMM_OK) {
        size_t n = crmm_config_resource_count(cfg);
        for (size_t i = 0; i < n; i++) {
            const char *name = crmm_config_resource_name(cfg, i);
            if (crmm_config_find_resource(cfg, name) != (long)i)
                abort();
            (void)crmm_config_resource_plugin(cfg, i);
            (void)crmm_config_resource_upstream(cfg, i);
            for (size_t j = 0; j < crmm_config_resource_param_count(cfg, i); j++) {
                (void)crmm_config_resource_param_key(cfg, i, j);
                (void)crmm_config_resource_param_value(cfg, i, j);
            }
        }
        (void)crmm_config_default_resource(cfg, 0);
        crmm_config_free(cfg);
    }
    free(text);
    return 0;
}
