/* getenv.c — crmm_getenv: a variable of crmm's environment, as environment.c reads it, saying in
 * crmm's log when a privileged process ignores it. */
#include "build_config.h"
#include <stdbool.h>
#include <crmm/log.h>
#include <crmm/plugin.h>
#include "environment.h"

const char *crmm_getenv(const char *name)
{
    if (!name)
        return NULL;
    bool ignored;
    const char *value = crmm_env_lookup(name, &ignored);
    if (ignored) {
        char msg[256];
        crmm_log(CRMM_LOG_INFO, "%s", crmm_env_ignored_message(name, msg, sizeof msg));
    }
    return value;
}
