/* getenv.c — crmm_getenv: a variable of crmm's environment, as environment.c reads it, saying in
 * crmm's log when a privileged process ignores it. Only the variables of crmm_settings() are
 * read, so that the table is every variable crmm reads. */
#include "build_config.h"
#include <stdbool.h>
#include <string.h>
#include <crmm/config.h>
#include <crmm/log.h>
#include <crmm/plugin.h>
#include "environment.h"
#include "settings.h"

/* Whether `name` is the variable of a row of crmm_settings(). */
static bool is_setting(const char *name)
{
    for (const crmm_setting *s = crmm_settings(); s->key || s->env; s++)
        if (s->env && strcmp(s->env, name) == 0)
            return true;
    return false;
}

const char *crmm_getenv(const char *name)
{
    if (!name)
        return NULL;
    if (!is_setting(name)) {
        crmm_log(CRMM_LOG_WARN, "crmm_getenv: $%s is not one of crmm's settings (crmm_settings()): not read", name);
        return NULL;
    }
    bool ignored;
    const char *value = crmm_env_lookup(name, &ignored);
    if (ignored) {
        char msg[256];
        crmm_log(CRMM_LOG_INFO, "%s", crmm_env_ignored_message(name, msg, sizeof msg));
    }
    return value;
}

const char *crmm_setting_env(crmm_setting_id id) { return crmm_getenv(crmm_setting_row(id)->env); }
