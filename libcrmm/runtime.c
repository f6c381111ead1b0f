/* runtime.c — the process-wide state of crmm, and nothing else owns any: the config crmm_init
 * loaded, the current resource of each device, and building a resource from a plugin by name.
 *
 * The loaded config is swapped under `config_lock`, a plain mutex held only to read or replace
 * the pointer and while a device's default resource is built from it. A config crmm_init replaces
 * is retired, not freed: crmm_current_config() hands out a borrowed pointer that another thread
 * may still read, so every config loaded stays until crmm_finalize frees them all. Lock order: a device registry slot's lock, then config_lock. Plugins
 * never call back into the runtime while it holds a lock: what they need at create time arrives
 * in their creation arguments. crmm_finalize runs the hooks registered with
 * crmm_runtime_at_finalize (the logging switch's), then empties the registry, then frees the
 * config. */
#include "build_config.h"
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/cuda_support.h>
#include <crmm/log.h>
#include "device_registry.h"
#include "internal.h"
#include "runtime.h"
#include "settings.h"

#ifndef CRMM_SYSCONFDIR
#define CRMM_SYSCONFDIR "/usr/local/etc"
#endif

/* The plugin a device uses when no config names a resource for it. */
#define RUNTIME_DEFAULT_PLUGIN "cuda"
#define RUNTIME_MAX_FINALIZE_HOOKS 4

/* not recursive: nothing called while it is held takes it again (plugins building plugins use
 * crmm_params_create_resource, which reads the path from their parameters) */
static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;
static crmm_config *current;
/* The configs crmm_init replaced, freed by crmm_finalize: a list whose nodes are complete before
 * the head that publishes them is stored, and which is unlinked with one store, so that a child
 * forked at any moment (crmm_runtime_fork_child, which takes no lock) walks a whole list. */
typedef struct retired_config {
    crmm_config *config;
    struct retired_config *next;
} retired_config;
static retired_config *retired;
static device_registry registry = DEVICE_REGISTRY_INITIALIZER;
static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;
static void (*finalize_hooks[RUNTIME_MAX_FINALIZE_HOOKS])(void);

/* ---- init and finalize ------------------------------------------------------------------- */

const char *crmm_config_default_file(char *buf, size_t size)
{
    const char *env = crmm_setting_env(CRMM_SETTING_CONFIG);
    if (env && *env)
        return env;
    if (!buf || snprintf(buf, size, "%s/crmm/crmm.ini", CRMM_SYSCONFDIR) >= (int)size)
        return NULL;
    FILE *f = fopen(buf, "r");
    if (!f)
        return NULL;
    fclose(f);
    return buf;
}

const crmm_config *crmm_current_config(void) { return __atomic_load_n(&current, __ATOMIC_ACQUIRE); }

crmm_status crmm_init(const char *path)
{
    crmm_config *c = NULL;
    char sys[PATH_MAX];
    const char *from = path ? path : crmm_config_default_file(sys, sizeof sys);
    crmm_status st = from ? crmm_config_load_file(from, &c) : crmm_config_load_default(&c);
    if (st != CRMM_OK)
        return st;
    crmm_log_level level;
    const char *text = crmm_config_log_level(c);
    /* $CRMM_LOG_LEVEL wins over the file: a user turns on tracing without editing it */
    bool set_level = text && !crmm_log_level_from_env() && crmm_log_level_parse(text, &level) == CRMM_OK;
    retired_config *node = malloc(sizeof *node); /* before the lock: no allocation under it */
    pthread_mutex_lock(&config_lock);
    if (current && !node) {
        pthread_mutex_unlock(&config_lock);
        crmm_config_free(c);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "crmm_init: malloc failed (the loaded config stays)");
    }
    if (current) {
        *node = (retired_config){current, retired};
        __atomic_store_n(&retired, node, __ATOMIC_RELEASE);
        node = NULL;
    }
    __atomic_store_n(&current, c, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&config_lock);
    free(node);
    /* only once the config is installed: a failed crmm_init changes nothing */
    if (set_level)
        crmm_log_set_level(level);
    crmm_log(CRMM_LOG_INFO, "crmm: config %s", crmm_config_origin(c));
    crmm_clear_error();
    return CRMM_OK;
}

void crmm_runtime_fork_child(void)
{
    pthread_mutex_init(&registry.lock, NULL);
    pthread_mutex_init(&config_lock, NULL);
    pthread_mutex_init(&hooks_lock, NULL);
    crmm_config *c = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
    if (c)
        crmm_config_fork_child(c);
    for (retired_config *r = __atomic_load_n(&retired, __ATOMIC_ACQUIRE); r; r = r->next)
        crmm_config_fork_child(r->config);
}

void crmm_runtime_at_finalize(void (*fn)(void))
{
    pthread_mutex_lock(&hooks_lock);
    for (int i = 0; i < RUNTIME_MAX_FINALIZE_HOOKS; i++) {
        if (finalize_hooks[i] == fn)
            break;
        if (!finalize_hooks[i]) {
            finalize_hooks[i] = fn;
            break;
        }
    }
    pthread_mutex_unlock(&hooks_lock);
}

void crmm_finalize(void)
{
    /* the resources' destroys may record errors; the thread's error stays the caller's */
    crmm_error_hold_begin();
    /* detach the config first, so that no device default is built from it once the registry is
     * cleared; then free it */
    pthread_mutex_lock(&config_lock);
    crmm_config *old = current;
    retired_config *old_retired = retired;
    __atomic_store_n(&current, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&retired, NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&config_lock);
    void (*hooks[RUNTIME_MAX_FINALIZE_HOOKS])(void);
    pthread_mutex_lock(&hooks_lock);
    memcpy(hooks, finalize_hooks, sizeof hooks);
    pthread_mutex_unlock(&hooks_lock);
    for (int i = 0; i < RUNTIME_MAX_FINALIZE_HOOKS && hooks[i]; i++)
        hooks[i]();
    device_registry_clear(&registry);
    crmm_config_free(old);
    while (old_retired) {
        retired_config *next = old_retired->next;
        crmm_config_free(old_retired->config);
        free(old_retired);
        old_retired = next;
    }
    crmm_error_hold_end();
}

char *crmm_runtime_plugin_path(void)
{
    pthread_mutex_lock(&config_lock);
    const char *dirs = current ? crmm_config_plugin_path(current) : NULL;
    char *copy = dirs ? strdup(dirs) : NULL;
    pthread_mutex_unlock(&config_lock);
    return copy;
}

/* ---- building a resource by plugin name ------------------------------------------------- */

crmm_status crmm_resource_create(const char *plugin_name, const char *params, crmm_resource *upstream,
                                 crmm_resource **out)
{
    if (!plugin_name || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "resource_create: %s is NULL", plugin_name ? "out" : "plugin");
    /* the loaded config's plugin_path comes first, as for the config's own resources */
    char *dirs = crmm_runtime_plugin_path();
    crmm_status st = crmm_resource_create_by_name(plugin_name, dirs, -1, "", params, upstream, out);
    free(dirs);
    return st;
}

/* ---- the current resource of each device ---------------------------------------------------- */

static crmm_status check_device(int device)
{
    /* an ordinal no machine has is the caller's error, whatever this machine has */
    if (device < 0 || device >= CRMM_MAX_DEVICES)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "device %d is not a device ordinal (0 .. %d)", device,
                              CRMM_MAX_DEVICES - 1);
    int n;
    crmm_status st = crmm_cuda_device_count(&n);
    if (st != CRMM_OK)
        return st;
    if (device >= n)
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
    pthread_mutex_lock(&config_lock);
    const char *name = current ? crmm_config_default_resource(current, 0) : NULL;
    long i = name ? crmm_config_find_resource(current, name) : -1;
    bool host = i >= 0 && crmm_config_resource_is_host(current, (size_t)i);
    pthread_mutex_unlock(&config_lock);
    return host;
}

/* check_device, with device 0 allowed without a GPU when the config's default is host memory. */
static crmm_status check_device_or_host(int device)
{
    crmm_status st = check_device(device);
    if (st != CRMM_OK && host_default_without_device(device)) {
        crmm_clear_error();
        return CRMM_OK;
    }
    return st;
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

/* The registry's factory: the loaded config's resource for the device, else the built-in one. */
static crmm_status make_default(int device, void *arg, crmm_resource **out)
{
    (void)arg;
    crmm_status st;
    pthread_mutex_lock(&config_lock);
    const char *name = current ? crmm_config_default_resource(current, device) : NULL;
    if (name) {
        st = crmm_config_create_resource(current, name, device, out);
        pthread_mutex_unlock(&config_lock);
    } else {
        pthread_mutex_unlock(&config_lock);
        crmm_device_guard g;
        if ((st = crmm_cuda_device_enter(device, &g)) != CRMM_OK)
            return st;
        st = crmm_resource_create(RUNTIME_DEFAULT_PLUGIN, NULL, NULL, out);
        crmm_cuda_device_restore(&g);
    }
    if (st != CRMM_OK)
        crmm_error_add_context("default resource of device %d", device);
    return st;
}

static crmm_resource *get_device_resource(int device, bool ref)
{
    crmm_resource *mr = NULL;
    bool known = device >= 0 && device < CRMM_MAX_DEVICES && (mr = __atomic_load_n(&registry.slots[device], __ATOMIC_ACQUIRE));
    if (known && !ref)
        return mr; /* the common case: no CUDA call, no lock */
    /* a device with a resource was checked when it got it: a reference (every PyTorch allocation
     * asks for one) costs the registry's lock, not a CUDA call */
    if (!known && check_device_or_host(device) != CRMM_OK)
        return NULL;
    return device_registry_get(&registry, device, ref, make_default, NULL, &mr) == CRMM_OK ? mr : NULL;
}

static crmm_resource *get_current_device_resource(bool ref, int *device)
{
    if (current_device(device) != CRMM_OK)
        return NULL;
    return get_device_resource(*device, ref);
}

crmm_resource *crmm_runtime_current_resource_ref(int *device) { return get_current_device_resource(true, device); }

crmm_resource *crmm_runtime_try_current_resource_ref(int *device)
{
    crmm_resource *mr;
    if (!crmm_cuda_current_device_quiet(device))
        return NULL;
    return device_registry_try_ref(&registry, *device, &mr) ? mr : NULL;
}

crmm_resource *crmm_get_per_device_resource(int device) { return get_device_resource(device, false); }
crmm_resource *crmm_get_per_device_resource_ref(int device) { return get_device_resource(device, true); }
crmm_resource *crmm_get_current_device_resource(void)
{
    int device;
    return get_current_device_resource(false, &device);
}

crmm_resource *crmm_get_current_device_resource_ref(void)
{
    int device;
    return get_current_device_resource(true, &device);
}

crmm_resource *crmm_set_per_device_resource(int device, crmm_resource *mr)
{
    if (!mr) {
        crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "set_per_device_resource: resource is NULL");
        return NULL;
    }
    if (check_device_or_host(device) != CRMM_OK)
        return NULL;
    crmm_resource *previous = device_registry_set(&registry, device, mr);
    crmm_clear_error();
    return previous;
}

bool crmm_runtime_replace_device_resource(int device, crmm_resource *expected, crmm_resource *mr)
{
    return device >= 0 && device < CRMM_MAX_DEVICES && mr && device_registry_replace(&registry, device, expected, mr);
}

crmm_resource *crmm_set_current_device_resource(crmm_resource *mr)
{
    if (!mr) {
        crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "set_current_device_resource: resource is NULL");
        return NULL;
    }
    int device;
    if (current_device(&device) != CRMM_OK)
        return NULL;
    return crmm_set_per_device_resource(device, mr);
}
