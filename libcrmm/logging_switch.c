/* logging_switch.c — crmm_enable_logging / crmm_disable_logging: the library-wide logging
 * switch, as rmm.enable_logging in RMM's Python package (declared in crmm/logging_switch.h).
 *
 * Enabling wraps every device's current resource in a `logging` adaptor writing to
 * "<stem>.dev<N><ext>" and installs it; the switch remembers, per device, the resource it
 * wrapped and the adaptor it installed (holding a reference to each), so disabling can put
 * the wrapped one back. All of it happens under one mutex. crmm_finalize forgets the switch's
 * state through a hook registered with the runtime.
 *
 * Across fork the mutex is made anew in the child (as the core's other locks, fork_guard.c: it is
 * held while plugins load): the thread that held it does not exist there. The device array is
 * published before its count, and the count goes to 0 before the array is taken back and freed,
 * so a child never reads past what the array holds. A child forked while another thread was
 * enabling or disabling may still find that thread's adaptors installed and the switch off. */
#include "build_config.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/cuda_support.h>
#include <crmm/log.h>
#include <crmm/logging_switch.h>
#include "internal.h"
#include "runtime.h"
#include "settings.h"

typedef struct logged_device {
    crmm_resource *wrapped;  /* the resource the device had; restored by disable */
    crmm_resource *adaptor;  /* the logging adaptor installed over it */
    crmm_resource *found;    /* while enabling: what the adaptor wraps (its reference, not ours) */
    char *file;
} logged_device;

static pthread_mutex_t switch_lock = PTHREAD_MUTEX_INITIALIZER;
static void forget_on_finalize(void);
static logged_device *logged;    /* one per device while enabled, else NULL */
static int logged_count;

/* RMM's rule: "dir/log.csv" → "dir/log.dev3.csv"; the extension is the last '.' of the base
 * name that is not its first character ("log" → "log.dev3", ".hidden" → ".hidden.dev3").
 * Every '%' is doubled so the logging plugin takes the name literally. malloc'd, or NULL. */
static char *device_file_name(const char *file, int device)
{
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    const char *dot = strrchr(base, '.');
    if (dot == base || (dot && strspn(base, ".") > (size_t)(dot - base)))
        dot = NULL; /* only leading dots: no extension */
    size_t stem = dot ? (size_t)(dot - file) : strlen(file);
    char suffix[24];
    snprintf(suffix, sizeof suffix, ".dev%d", device);
    size_t n = strlen(file) + strlen(suffix);
    for (const char *c = file; *c; c++)
        n += *c == '%';
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; file[i]; i++) {
        if (i == stem)
            for (const char *s = suffix; *s; s++)
                *o++ = *s;
        if (file[i] == '%')
            *o++ = '%';
        *o++ = file[i];
    }
    if (stem == strlen(file))
        for (const char *s = suffix; *s; s++)
            *o++ = *s;
    *o = '\0';
    return out;
}

/* The name the user sees: the plugin's own (expanded) one. */
static char *literal_name(const char *escaped)
{
    char *out = malloc(strlen(escaped) + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *c = escaped; *c; c++) {
        if (c[0] == '%' && c[1] == '%')
            c++;
        *o++ = *c;
    }
    *o = '\0';
    return out;
}

static crmm_status create_adaptor(const crmm_plugin *plugin, int device, const char *file, crmm_resource *upstream,
                                  crmm_resource **out)
{
    crmm_params *p;
    crmm_status st = crmm_params_new(plugin, "enable_logging", &p);
    if (st != CRMM_OK)
        return st;
    p->device = device;
    if ((st = crmm_params_set(p, "file", file)) == CRMM_OK)
        st = crmm_resource_create_with(plugin, p, upstream, out);
    crmm_params_free(p);
    return st;
}

static void free_devices(logged_device *devs, int n)
{
    for (int d = 0; d < n; d++) {
        crmm_resource_release(devs[d].adaptor);
        crmm_resource_release(devs[d].wrapped);
        free(devs[d].file);
    }
    free(devs);
}

/* Unpublish the devices (switch_lock held; the count first: see the top), then free them. */
static void forget_devices(void)
{
    logged_device *devs = logged;
    int n = logged_count;
    __atomic_store_n(&logged_count, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&logged, NULL, __ATOMIC_RELEASE);
    free_devices(devs, n);
}

/* Build one adaptor per device (nothing installed yet). */
static crmm_status build_all(const char *file, int n, logged_device *devs)
{
    char *dirs = crmm_runtime_plugin_path();
    const crmm_plugin *plugin;
    crmm_status st = crmm_plugin_load("logging", dirs, &plugin);
    free(dirs);
    if (st != CRMM_OK)
        return st;
    for (int d = 0; d < n; d++) {
        /* a reference, taken under the registry's lock: another thread may replace it */
        crmm_resource *current = crmm_get_per_device_resource_ref(d);
        if (!current)
            return crmm_last_status() != CRMM_OK ? crmm_last_status() : CRMM_ERROR_STATE;
        char *escaped = device_file_name(file, d);
        if (!escaped || !(devs[d].file = literal_name(escaped))) {
            free(escaped);
            return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "enable_logging: malloc failed");
        }
        st = create_adaptor(plugin, d, escaped, current, &devs[d].adaptor);
        devs[d].found = current;
        crmm_resource_release(current); /* the adaptor holds its own reference */
        free(escaped);
        if (st != CRMM_OK)
            return crmm_error_add_context("enable_logging: device %d", d);
    }
    return CRMM_OK;
}

crmm_status crmm_enable_logging(const char *file)
{
    if (!file || !*file)
        file = crmm_setting_env(CRMM_SETTING_LOG_FILE);
    if (!file || !*file)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "enable_logging: no file name given and $CRMM_LOG_FILE is not set");
    pthread_mutex_lock(&switch_lock);
    crmm_status st;
    int n = 0;
    logged_device *devs = NULL;
    if (logged) {
        st = crmm_set_error(CRMM_ERROR_STATE, "enable_logging: logging is already enabled (call crmm_disable_logging first)");
        goto out;
    }
    if ((st = crmm_cuda_device_count(&n)) != CRMM_OK) {
        st = crmm_error_add_context("enable_logging");
        goto out;
    }
    if (!(devs = calloc((size_t)n, sizeof *devs))) {
        st = crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "enable_logging: malloc failed");
        goto out;
    }
    if ((st = build_all(file, n, devs)) != CRMM_OK)
        goto out;
    for (int d = 0; d < n; d++) { /* only over what was wrapped: a resource set since stays */
        if (!crmm_runtime_replace_device_resource(d, devs[d].found, devs[d].adaptor)) {
            int kept = 0; /* devices another thread set again meanwhile keep what it set */
            for (int k = 0; k < d; k++) {
                if (crmm_runtime_replace_device_resource(k, devs[k].adaptor, devs[k].wrapped))
                    crmm_resource_release(devs[k].adaptor); /* the registry's reference */
                else
                    kept++;
            }
            st = crmm_set_error(CRMM_ERROR_STATE, "enable_logging: device %d's resource was replaced by another "
                                "thread while logging was being enabled; no device logs%s", d,
                                kept ? " (devices that thread set again keep what it set)" : "");
            goto out;
        }
        devs[d].wrapped = devs[d].found; /* the registry's reference, now ours */
    }
    __atomic_store_n(&logged, devs, __ATOMIC_RELEASE); /* before the count: see the top */
    __atomic_store_n(&logged_count, n, __ATOMIC_RELEASE);
    devs = NULL;
    crmm_runtime_at_finalize(forget_on_finalize);
    crmm_log(CRMM_LOG_INFO, "logging enabled on %d device%s (%s, ...)", n, n == 1 ? "" : "s", logged[0].file);
out:
    if (devs)
        free_devices(devs, n);
    pthread_mutex_unlock(&switch_lock);
    return st;
}

crmm_status crmm_disable_logging(void)
{
    pthread_mutex_lock(&switch_lock);
    for (int d = 0; d < logged_count; d++) {
        if (crmm_runtime_replace_device_resource(d, logged[d].adaptor, logged[d].wrapped))
            crmm_resource_release(logged[d].adaptor); /* the registry's reference */
        else
            crmm_log(CRMM_LOG_WARN, "disable_logging: device %d's resource was replaced since logging was enabled; "
                     "leaving it in place", d);
    }
    forget_devices(); /* the adaptors flush and close when their last reference goes */
    pthread_mutex_unlock(&switch_lock);
    crmm_clear_error();
    return CRMM_OK;
}

/* crmm_finalize's hook: forget what crmm_enable_logging installed, without touching the
 * registry (crmm_finalize empties that next). */
static void forget_on_finalize(void)
{
    pthread_mutex_lock(&switch_lock);
    forget_devices(); /* the registry's references go when it is cleared */
    pthread_mutex_unlock(&switch_lock);
}

void crmm_logging_switch_fork_child(void) { pthread_mutex_init(&switch_lock, NULL); }

crmm_status crmm_get_log_filenames(const char **names, int capacity, int *count)
{
    if (!count || (!names && capacity > 0))
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "get_log_filenames: %s is NULL", count ? "names" : "count");
    pthread_mutex_lock(&switch_lock);
    *count = logged_count;
    for (int d = 0; d < capacity; d++)
        names[d] = d < logged_count ? logged[d].file : NULL;
    pthread_mutex_unlock(&switch_lock);
    return CRMM_OK;
}
