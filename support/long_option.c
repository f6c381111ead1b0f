/* long_option.c — the split of "--name=value" (long_option.h). */
#include "build_config.h"
#include <string.h>
#include "long_option.h"

const char *long_option_equals(const char *arg)
{
    if (!arg || strncmp(arg, "--", 2) != 0 || arg[2] == '=')
        return NULL;
    return strchr(arg + 2, '=');
}
