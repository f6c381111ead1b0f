/* environment.h — crmm's environment variables, read through one function (environment.c). */
#ifndef CRMM_CORE_ENVIRONMENT_H
#define CRMM_CORE_ENVIRONMENT_H

#include <stdbool.h>

/* The value of `name`, or NULL when it is not set or the process runs with elevated privileges
 * (secure_getenv); *ignored is true in the second case when the variable is set. Logs nothing:
 * the logger reads its own variables with it before it can log (crmm_getenv logs). */
const char *crmm_env_lookup(const char *name, bool *ignored);

/* The line crmm_getenv logs for an ignored variable `name`, in buf. */
const char *crmm_env_ignored_message(const char *name, char *buf, unsigned size);

#endif
