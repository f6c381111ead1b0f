/* device_registry.h — a table of one current resource per CUDA device ordinal. The runtime
 * (runtime.c) owns the process's table; the table itself knows nothing of configs. */
#ifndef CRMM_CORE_DEVICE_REGISTRY_H
#define CRMM_CORE_DEVICE_REGISTRY_H

#include <pthread.h>
#include <stdbool.h>
#include <crmm/resource.h>

typedef struct device_registry {
    pthread_mutex_t lock;                       /* taken to fill, replace or clear a slot */
    crmm_resource *slots[CRMM_MAX_DEVICES];     /* one reference each; read lock-free */
} device_registry;

#define DEVICE_REGISTRY_INITIALIZER {PTHREAD_MUTEX_INITIALIZER, {0}}

/* Makes the resource a device starts with (a new reference in *out). */
typedef crmm_status (*device_registry_factory)(int device, void *arg, crmm_resource **out);

/* Device `device`'s resource (0 <= device < CRMM_MAX_DEVICES), made by `make` when the slot is
 * empty: borrowed, or with a reference for the caller when `ref` (taken under the lock, so a
 * concurrent set cannot free it first). Errors: make's. */
crmm_status device_registry_get(device_registry *r, int device, bool ref, device_registry_factory make, void *arg,
                                crmm_resource **out);
/* Device `device`'s resource with a reference for the caller, only when its slot is filled and
 * the lock is free at once: true and *out set, else false (nothing made, nothing waited for). */
bool device_registry_try_ref(device_registry *r, int device, crmm_resource **out);
/* Put mr in the slot (taking a reference) and return the previous resource, whose reference
 * passes to the caller (NULL if there was none). */
crmm_resource *device_registry_set(device_registry *r, int device, crmm_resource *mr);
/* Put mr in the slot (taking a reference) only when the slot holds `expected`: true, and the
 * slot's reference to expected passes to the caller; false, nothing changed, otherwise. */
bool device_registry_replace(device_registry *r, int device, crmm_resource *expected, crmm_resource *mr);
/* Empty every slot and release what they held. */
void device_registry_clear(device_registry *r);

#endif
