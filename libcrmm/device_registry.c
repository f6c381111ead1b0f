/* device_registry.c — the current resource of each CUDA device (see device_registry.h).
 *
 * Reads are a lock-free atomic load once a slot is filled; filling a slot (the first use makes
 * the device's default resource) and replacing one take the table's mutex. The table owns one
 * reference to each resource it holds and hands it to whoever replaces the resource, so a slot's
 * resource stays alive at least while the mutex is held: the reference-taking get retains it
 * under the mutex, which makes "get and keep" safe against a concurrent set. */
#include "build_config.h"
#include "device_registry.h"

crmm_status device_registry_get(device_registry *r, int device, bool ref, device_registry_factory make, void *arg,
                                crmm_resource **out)
{
    crmm_resource *mr = __atomic_load_n(&r->slots[device], __ATOMIC_ACQUIRE);
    if (mr && !ref) {
        *out = mr;
        return CRMM_OK;
    }
    crmm_status st = CRMM_OK;
    pthread_mutex_lock(&r->lock);
    mr = r->slots[device];
    if (!mr && (st = make(device, arg, &mr)) == CRMM_OK)
        __atomic_store_n(&r->slots[device], mr, __ATOMIC_RELEASE);
    if (st == CRMM_OK)
        *out = ref ? crmm_resource_retain(mr) : mr;
    pthread_mutex_unlock(&r->lock);
    return st;
}

bool device_registry_try_ref(device_registry *r, int device, crmm_resource **out)
{
    if (device < 0 || device >= CRMM_MAX_DEVICES || !__atomic_load_n(&r->slots[device], __ATOMIC_ACQUIRE) ||
        pthread_mutex_trylock(&r->lock) != 0)
        return false;
    crmm_resource *mr = r->slots[device];
    if (mr)
        *out = crmm_resource_retain(mr);
    pthread_mutex_unlock(&r->lock);
    return mr != NULL;
}

crmm_resource *device_registry_set(device_registry *r, int device, crmm_resource *mr)
{
    crmm_resource_retain(mr);
    pthread_mutex_lock(&r->lock);
    crmm_resource *previous = r->slots[device];
    __atomic_store_n(&r->slots[device], mr, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&r->lock);
    return previous;
}

bool device_registry_replace(device_registry *r, int device, crmm_resource *expected, crmm_resource *mr)
{
    pthread_mutex_lock(&r->lock);
    bool held = r->slots[device] == expected;
    if (held) {
        crmm_resource_retain(mr);
        __atomic_store_n(&r->slots[device], mr, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&r->lock);
    return held;
}

void device_registry_clear(device_registry *r)
{
    crmm_resource *old[CRMM_MAX_DEVICES];
    pthread_mutex_lock(&r->lock);
    for (int i = 0; i < CRMM_MAX_DEVICES; i++) {
        old[i] = r->slots[i];
        __atomic_store_n(&r->slots[i], NULL, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&r->lock);
    for (int i = 0; i < CRMM_MAX_DEVICES; i++)
        crmm_resource_release(old[i]);
}
