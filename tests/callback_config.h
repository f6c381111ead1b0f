/* callback_config.h — the config text of a callback resource as a ctypes caller writes it: the
 * addresses of its two functions in hex. For the conformance runs over a callback resource. */
#ifndef CRMM_TESTS_CALLBACK_CONFIG_H
#define CRMM_TESTS_CALLBACK_CONFIG_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <crmm/callback.h>

/* Writes into buf (`size` bytes) resource `c`, a callback over a and d, then the lines `more`;
 * returns buf. */
static inline const char *callback_config(char *buf, size_t size, crmm_callback_allocate_fn a,
                                          crmm_callback_deallocate_fn d, const char *more)
{
    uintptr_t ai, di;
    memcpy(&ai, &a, sizeof ai);
    memcpy(&di, &d, sizeof di);
    snprintf(buf, size, "[resource.c]\nplugin = callback\nallocate_fn = %#" PRIxPTR "\ndeallocate_fn = %#" PRIxPTR "\n%s",
             ai, di, more);
    return buf;
}

#endif
