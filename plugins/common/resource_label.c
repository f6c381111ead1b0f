/* resource_label.c — "KIND 'NAME'" for the plugins' messages (resource_label.h). */
#include "build_config.h"
#include <stdio.h>
#include "resource_label.h"

const char *resource_label(const char *kind, const char *name, char *buf, size_t size)
{
    if (name && name[0])
        snprintf(buf, size, "%s '%s'", kind, name);
    else
        snprintf(buf, size, "%s", kind);
    return buf;
}
