/* device_registry.c — the current resource of each CUDA device.
 *
 * One slot per device ordinal. Reads are a lock-free atomic load once a slot is filled; filling
 * a slot (the first use creates the device's default resource) and replacing one take a mutex.
 * The registry owns one reference to each resource it holds and hands it to whoever replaces
 * the resource, so a slot's resource stays alive at least while the mutex is held: the _ref
 * getters retain it under the mutex, which makes "get and keep" safe against a concurrent set. */
#include "config.h"
#include <pthread.h>
#include <crmm/cuda_support.h>
#include "internal.h"

#define CRMM_MAX_DEVICES 128

static crmm_resource *slots[CRMM_MAX_DEVICES];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

static crmm_status check_device(int device)
{
    int n;
    crmm_status st = crmm_cuda_device_count(&n);
    if (st != CRMM_OK)
        return st;
    if (device < 0 || device >= n || device >= CRMM_MAX_DEVICES)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "device %d does not exist (%d present)", device, n);
    return CRMM_OK;
}

/* True when no CUDA device can be used and the config's resource for device 0 is host memory:
 * then device 0's slot holds that resource, so a program written for the GPU runs over a host
 * config (tests, the README's examples) without one. */
static bool host_default_without_device(int device)
{
    int n;
    if (device != 0 || (crmm_cuda_device_count(&n) == CRMM_OK && n > 0))
        return false;
    crmm_config_lock_current();
    const crmm_config *cfg = crmm_current_config();
    const char *name = cfg ? crmm_config_default_resource(cfg, 0) : NULL;
    long i = name ? crmm_config_find_resource(cfg, name) : -1;
    bool host = i >= 0 && crmm_config_resource_is_host(cfg, (size_t)i);
    crmm_config_unlock_current();
    return host;
}

/* The current device, or 0 when there is none but the config's default is host memory. */
static crmm_status current_device(int *device)
{
    crmm_status st = crmm_cuda_current_device(device);
    if (st != CRMM_OK && host_default_without_device(0)) {
        crmm_clear_error();
        *device = 0;
        return CRMM_OK;
    }
    return st;
}

static crmm_status create_default(int device, crmm_resource **out)
{
    /* hold the init lock while using the config, so that crmm_init cannot free it meanwhile */
    crmm_config_lock_current();
    crmm_config *cfg = (crmm_config *)crmm_current_config();
    const char *name = cfg ? crmm_config_default_resource(cfg, device) : NULL;
    if (name) {
        crmm_status st = crmm_config_create_resource(cfg, name, device, out);
        crmm_config_unlock_current();
        return st;
    }
    crmm_config_unlock_current();
    /* no config, or one that names no resource: the built-in default */
    crmm_device_guard g;
    crmm_status st = crmm_cuda_device_enter(device, &g);
    if (st != CRMM_OK)
        return st;
    st = crmm_resource_create("cuda", NULL, NULL, out);
    crmm_cuda_device_restore(&g);
    return st;
}

crmm_resource *crmm_get_per_device_resource(int device)
{
    if (device >= 0 && device < CRMM_MAX_DEVICES) {
        crmm_resource *mr = __atomic_load_n(&slots[device], __ATOMIC_ACQUIRE);
        if (mr)
            return mr;
    }
    if (check_device(device) != CRMM_OK) {
        if (!host_default_without_device(device))
            return NULL;
        crmm_clear_error();
    }
    pthread_mutex_lock(&registry_lock);
    crmm_resource *mr = slots[device];
    if (!mr) {
        if (create_default(device, &mr) == CRMM_OK)
            __atomic_store_n(&slots[device], mr, __ATOMIC_RELEASE);
        else
            crmm_error_add_context("default resource of device %d", device);
    }
    pthread_mutex_unlock(&registry_lock);
    return mr;
}

crmm_resource *crmm_get_current_device_resource(void)
{
    int dev;
    if (current_device(&dev) != CRMM_OK)
        return NULL;
    return crmm_get_per_device_resource(dev);
}

crmm_resource *crmm_get_per_device_resource_ref(int device)
{
    if (!crmm_get_per_device_resource(device))
        return NULL;
    pthread_mutex_lock(&registry_lock);
    crmm_resource *mr = crmm_resource_retain(slots[device]);
    pthread_mutex_unlock(&registry_lock);
    if (!mr)
        crmm_set_error(CRMM_ERROR_STATE, "the resource of device %d was cleared (crmm_finalize) meanwhile", device);
    return mr;
}

crmm_resource *crmm_get_current_device_resource_ref(void)
{
    int dev;
    if (current_device(&dev) != CRMM_OK)
        return NULL;
    return crmm_get_per_device_resource_ref(dev);
}

crmm_resource *crmm_set_per_device_resource(int device, crmm_resource *mr)
{
    if (!mr) {
        crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "set_per_device_resource: resource is NULL");
        return NULL;
    }
    if (check_device(device) != CRMM_OK)
        return NULL;
    crmm_resource_retain(mr);
    pthread_mutex_lock(&registry_lock);
    crmm_resource *prev = slots[device];
    __atomic_store_n(&slots[device], mr, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&registry_lock);
    crmm_clear_error();
    return prev;
}

crmm_resource *crmm_set_current_device_resource(crmm_resource *mr)
{
    if (!mr) {
        crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "set_current_device_resource: resource is NULL");
        return NULL;
    }
    int dev;
    if (current_device(&dev) != CRMM_OK)
        return NULL;
    return crmm_set_per_device_resource(dev, mr);
}

void crmm_registry_clear(void)
{
    pthread_mutex_lock(&registry_lock);
    crmm_resource *old[CRMM_MAX_DEVICES];
    for (int i = 0; i < CRMM_MAX_DEVICES; i++) {
        old[i] = slots[i];
        __atomic_store_n(&slots[i], NULL, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&registry_lock);
    for (int i = 0; i < CRMM_MAX_DEVICES; i++)
        crmm_resource_release(old[i]);
}
