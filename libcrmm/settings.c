/* settings.c — crmm's own settings as one table: each [crmm] key of a config and each CRMM_*
 * environment variable is a row, and a key and a variable on one row are one setting where the
 * variable wins over the key. The config parser, crmm_getenv (getenv.c, which reads only the
 * table's variables) and `crmm info` all read it. A leaf: it calls no reader of the environment. */
#include "build_config.h"
#include <string.h>
#include <crmm/crmm.h>
#include "settings.h"

static const crmm_setting rows[CRMM_SETTING_COUNT + 1] = {
    [CRMM_SETTING_DEFAULT] = {.key = "default",
                              .help = "the resource of a device no [device.N] names (unset: the first resource, else "
                                      "the built-in cuda plugin)"},
    [CRMM_SETTING_PLUGIN_PATH] = {.key = "plugin_path",
                                  .help = "':'-separated plugin directories, searched first (relative to the config "
                                          "file's directory)"},
    [CRMM_SETTING_LOG_LEVEL] = {.key = "log_level", .env = "CRMM_LOG_LEVEL",
                                .accepts = "a level (trace debug info warn error critical off)",
                                .help = "starting log level; $CRMM_LOG_LEVEL wins over the config's log_level"},
    [CRMM_SETTING_CONFIG] = {.env = "CRMM_CONFIG", .help = "config file read by crmm_init(NULL)"},
    [CRMM_SETTING_PLUGIN_PATH_ENV] = {.env = "CRMM_PLUGIN_PATH",
                                      .help = "':'-separated plugin directories, searched after the config's "
                                              "plugin_path"},
    [CRMM_SETTING_DEBUG_LOG_FILE] = {.env = "CRMM_DEBUG_LOG_FILE", .help = "the library log's file (default stderr)"},
    [CRMM_SETTING_LOG_FILE] = {.env = "CRMM_LOG_FILE", .help = "default `file` of the logging plugin"},
    [CRMM_SETTING_TEST_REQUIRE_GPU] = {.env = "CRMM_TEST_REQUIRE_GPU",
                                       .help = "tests: N = fail (not skip) GPU tests when fewer than N devices are "
                                               "present"},
    [CRMM_SETTING_COUNT] = {0},
};

const crmm_setting *crmm_settings(void) { return rows; }

const crmm_setting *crmm_setting_row(crmm_setting_id id) { return &rows[id]; }

const crmm_setting *crmm_setting_by_key(const char *key)
{
    for (const crmm_setting *s = rows; key && (s->key || s->env); s++)
        if (s->key && strcmp(s->key, key) == 0)
            return s;
    return NULL;
}

crmm_status crmm_setting_check(const crmm_setting *s, const char *value)
{
    if (!s || !value)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "setting_check: %s is NULL", !s ? "setting" : "value");
    crmm_log_level level;
    bool ok = s != &rows[CRMM_SETTING_LOG_LEVEL] || crmm_log_level_parse(value, &level) == CRMM_OK;
    if (ok)
        return CRMM_OK;
    return crmm_set_error(CRMM_ERROR_CONFIG, "%s: '%s' is not %s", s->key ? s->key : s->env, value, s->accepts);
}
