/* runtime.h — what the runtime (runtime.c) offers the core's files above it. */
#ifndef CRMM_CORE_RUNTIME_H
#define CRMM_CORE_RUNTIME_H

/* A malloc'd copy of the loaded config's plugin_path (as used), or NULL when there is none (or
 * no config is loaded). */
char *crmm_runtime_plugin_path(void);

/* Have crmm_finalize call `fn` before it releases the per-device resources, so that state kept
 * above the runtime (crmm_enable_logging's) goes with them. At most 4 hooks; registering the same
 * function again does nothing. */
void crmm_runtime_at_finalize(void (*fn)(void));

/* Make mr device `device`'s resource (a reference taken) only while it is still `expected`: true,
 * with the registry's reference to expected passed to the caller; false, nothing changed, when
 * another thread replaced it meanwhile. For callers that wrapped the resource they found
 * (crmm_enable_logging) and must not displace one set since. `device` must be an ordinal that
 * has a resource. */
bool crmm_runtime_replace_device_resource(int device, crmm_resource *expected, crmm_resource *mr);

/* crmm_get_current_device_resource_ref, also telling which device was current (*device; 0 where
 * no device exists and the config's default is host memory): a caller that works on that device
 * need not ask CUDA again. NULL with the error set as crmm_get_current_device_resource_ref. */
crmm_resource *crmm_runtime_current_resource_ref(int *device);
/* The same without waiting: NULL, with no error recorded, unless the current device already has
 * its resource and the registry's lock is free (device_registry_try_ref). */
crmm_resource *crmm_runtime_try_current_resource_ref(int *device);

#endif
