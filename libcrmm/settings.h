/* settings.h — crmm's own settings (crmm_settings(), settings.c) by row, for the core's readers:
 * the config parser stores each [crmm] key at its row, and each CRMM_* variable is read through
 * its row. */
#ifndef CRMM_CORE_SETTINGS_H
#define CRMM_CORE_SETTINGS_H

#include <stddef.h>
#include <crmm/config.h>

/* The rows of crmm_settings(), in its order. */
typedef enum crmm_setting_id {
    CRMM_SETTING_DEFAULT,        /* [crmm] default */
    CRMM_SETTING_PLUGIN_PATH,    /* [crmm] plugin_path */
    CRMM_SETTING_LOG_LEVEL,      /* [crmm] log_level, $CRMM_LOG_LEVEL */
    CRMM_SETTING_CONFIG,         /* $CRMM_CONFIG */
    CRMM_SETTING_PLUGIN_PATH_ENV,/* $CRMM_PLUGIN_PATH */
    CRMM_SETTING_DEBUG_LOG_FILE, /* $CRMM_DEBUG_LOG_FILE */
    CRMM_SETTING_LOG_FILE,       /* $CRMM_LOG_FILE */
    CRMM_SETTING_TEST_REQUIRE_GPU, /* $CRMM_TEST_REQUIRE_GPU */
    CRMM_SETTING_COUNT
} crmm_setting_id;

/* Row `id` of crmm_settings(). */
const crmm_setting *crmm_setting_row(crmm_setting_id id);

/* The row whose [crmm] key is `key`, or NULL. */
const crmm_setting *crmm_setting_by_key(const char *key);

/* getenv.c: the value of row id's variable, as crmm_getenv reads it (NULL: unset, or ignored in
 * a privileged process). */
const char *crmm_setting_env(crmm_setting_id id);

#endif
