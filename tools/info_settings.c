/* info_settings.c — the settings part of `crmm info`: the config's [crmm] keys, the log level
 * and where it comes from, and every environment variable crmm reads with its current value. */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <crmm/crmm.h>
#include "info.h"

crmm_log_level crmm_info_log_level(const crmm_config *cfg)
{
    crmm_log_level lvl = CRMM_LOG_WARN;
    if (crmm_log_level_from_env())
        return crmm_log_get_level();
    if (cfg && crmm_config_log_level(cfg) && crmm_log_level_parse(crmm_config_log_level(cfg), &lvl) == CRMM_OK)
        return lvl;
    return CRMM_LOG_WARN;
}

const char *crmm_info_log_level_origin(const crmm_config *cfg)
{
    if (crmm_log_level_from_env())
        return "CRMM_LOG_LEVEL";
    if (cfg && crmm_config_log_level(cfg))
        return "config";
    return "default";
}

void crmm_info_print_settings(const crmm_config *cfg)
{
    if (cfg) {
        const char *def = crmm_config_default_resource(cfg, -1);
        const char *path = crmm_config_plugin_path(cfg);
        const char *lvl = crmm_config_log_level(cfg);
        printf("[crmm]\n");
        printf("  default = %s\n", def ? def : "(unset: the first resource, else the built-in cuda plugin)");
        printf("  plugin_path = %s\n", path ? path : "(unset)");
        printf("  log_level = %s\n", lvl ? lvl : "(unset)");
    }
    const char *origin = crmm_info_log_level_origin(cfg);
    printf("log level: %s (%s)\n", crmm_log_level_name(crmm_info_log_level(cfg)),
           origin[0] == 'C' ? "from CRMM_LOG_LEVEL, which wins over the config's log_level"
           : origin[0] == 'c' ? "from the config's log_level; CRMM_LOG_LEVEL would win"
                              : "the default; set log_level in the config or CRMM_LOG_LEVEL");
    printf("environment:\n");
    for (const crmm_setting *s = crmm_settings(); s->key || s->env; s++) {
        if (!s->env)
            continue;
        const char *value = getenv(s->env);
        printf("  %-22s %s\n", s->env, value ? value : "(unset)");
    }
}
