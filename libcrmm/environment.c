/* environment.c — the one place crmm's library and plugins read their environment.
 *
 * In a process with elevated privileges (setuid, setgid, or file capabilities: the kernel marks
 * it AT_SECURE and secure_getenv returns NULL), the environment is the invoking user's, not the
 * program's: it must not choose the config, the plugins, or the files crmm writes. Every CRMM_*
 * variable is then ignored, as a setuid program ignores LD_PRELOAD. This file logs nothing (the
 * logger reads its own variables here); crmm_getenv (getenv.c) says what it ignored. */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include "environment.h"

const char *crmm_env_lookup(const char *name, bool *ignored)
{
    const char *value = secure_getenv(name);
    *ignored = !value && getenv(name) != NULL;
    return value;
}

const char *crmm_env_ignored_message(const char *name, char *buf, unsigned size)
{
    snprintf(buf, size,
             "ignoring $%s: this process runs with elevated privileges (setuid, setgid or file capabilities), "
             "and the user who started it must not choose what crmm loads or writes",
             name);
    return buf;
}
