/* resource_label.h — how the plugins' messages name a resource: "pool 'main'", or "pool" for an
 * unnamed one, written the same way by every plugin. */
#ifndef CRMM_PLUGINS_RESOURCE_LABEL_H
#define CRMM_PLUGINS_RESOURCE_LABEL_H

#include <stddef.h>

/* Write "KIND 'NAME'" (or "KIND" when name is NULL or empty) into buf (size bytes, truncated to
 * fit) and return buf. */
const char *resource_label(const char *kind, const char *name, char *buf, size_t size);

#endif
