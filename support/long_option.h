/* long_option.h — what counts as a long option with its value joined ("--name=value"), for every
 * command line crmm's tools read: one rule, so that `crmm`, `crmm bench` and `crmm bench --copy`
 * split the same arguments the same way. */
#ifndef CRMM_SUPPORT_LONG_OPTION_H
#define CRMM_SUPPORT_LONG_OPTION_H

/* For "--name=value", the '=' (the name is what comes before it, the value what follows);
 * NULL for any other argument, "--=value" included (it has no name). */
const char *long_option_equals(const char *arg);

#endif
