/* internal.h — what the core's files share and nothing outside the core sees. */
#ifndef CRMM_CORE_INTERNAL_H
#define CRMM_CORE_INTERNAL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <crmm/config.h>
#include <crmm/plugin.h>
#include <crmm/resource.h>

/* One parameter value of a resource being built. */
typedef struct crmm_param_value {
    const crmm_param *spec;
    char *text;        /* the text as given or defaulted; NULL when neither */
    bool given;        /* set explicitly (not from the default) */
    bool has_value;    /* given or defaulted */
    double percent;    /* SIZE given as "N%": N; else 0 */
    uint64_t u;        /* SIZE (when not a percent), UINT */
    double d;          /* DOUBLE */
    bool b;            /* BOOL */
    int choice;        /* ENUM: the index of the value among the row's choices */
} crmm_param_value;

struct crmm_params {
    const crmm_plugin *plugin;
    char name[48];
    int device;
    const char *plugin_dirs;  /* borrowed: the search path for plugins this one builds, or NULL */
    size_t count;
    crmm_param_value *values;
};

/* params.c */
crmm_status crmm_params_new(const crmm_plugin *plugin, const char *name, crmm_params **out);
void crmm_params_free(crmm_params *p);
/* Set key=value, validated against the table (unknown key: a "did you mean" where one is close). */
crmm_status crmm_params_set(crmm_params *p, const char *key, const char *value);
/* Parse "k=v k=v" or "k=v,k=v" (k="v w" keeps the blank; \" and \\ inside) and set each. */
crmm_status crmm_params_set_list(crmm_params *p, const char *list);
/* CRMM_ERROR_CONFIG naming the first required parameter that has no value. */
crmm_status crmm_params_check_required(const crmm_params *p);
/* Run the plugin's validate hook (none: CRMM_OK), then, over host memory, refuse a size
 * given as a percentage (CRMM_ERROR_CONFIG); *key = the parameter blamed, or NULL. */
crmm_status crmm_params_check_rules(const crmm_params *p, bool host_memory, const char **key);
/* Check one value against a spec (used for defaults when a plugin is loaded). */
crmm_status crmm_param_validate(const crmm_param *spec, const char *text, crmm_param_value *out);
/* The parameter-table check run by the loader. */
crmm_status crmm_param_table_validate(const crmm_plugin *plugin);

/* plugin_create.c: the checks made once before a build: the plugin's upstream rule, required
 * parameters, the plugin's rules (crmm_params_check_rules, over host memory when `upstream` is
 * not device memory). CRMM_ERROR_CONFIG naming what is wrong. */
crmm_status crmm_params_check(const crmm_params *params, const crmm_resource *upstream);
/* plugin_create.c: call the plugin's create with params already checked (crmm_params_check, or
 * the config graph's node), then check what it returned; names the instance. */
crmm_status crmm_resource_build(const crmm_plugin *plugin, const crmm_params *params, crmm_resource *upstream,
                                crmm_resource **out);
/* plugin_create.c: crmm_params_check, then crmm_resource_build. */
crmm_status crmm_resource_create_with(const crmm_plugin *plugin, crmm_params *params,
                                      crmm_resource *upstream, crmm_resource **out);
/* plugin_create.c: load plugin `plugin` from `dirs` (then the default places), fill its
 * parameters from the "k=v k=v" list and build it for `device`, named `name` (NULL: ""). */
crmm_status crmm_resource_create_by_name(const char *plugin, const char *dirs, int device, const char *name,
                                         const char *params, crmm_resource *upstream, crmm_resource **out);
/* resource.c: drop one reference of mr (non-NULL) unless it is the last, which would destroy
 * the resource; false, with the reference kept, when it is. For a caller that must not wait. */
bool crmm_resource_release_unless_last(crmm_resource *mr);

/* Hold the calling thread's error across a call that returns void and may record errors of its
 * own (a destroy, a free): between begin and end the thread's error reads as none, what the held
 * call records goes to a second buffer, and end makes the held error (status and message) the
 * thread's again. Begin only counts and copies nothing, so it suits the paths every free takes;
 * the buffers switch at the held call's first write. Holds nest, but only the outermost one
 * keeps an error: an inner hold inside a held call does not protect what that call recorded
 * before it (which matters only for the messages a cleanup path logs). */
void crmm_error_hold_begin(void);
void crmm_error_hold_end(void);

/* The current device, for the calls that never wait and record no error (the try calls): false,
 * with nothing recorded and the thread's error as it was, where crmm_cuda_current_device would
 * fail. Once a device has been found it touches no thread-local state (a held error would cost
 * two thread-local accesses, which a library loaded by dlopen pays through __tls_get_addr). */
bool crmm_cuda_current_device_quiet(int *device);
/* CRMM_OK while the process runs; once crmm_process_exiting(), CRMM_ERROR_STATE recorded as
 * "WHO: the process is exiting": for calls that would start CUDA work then. */
crmm_status crmm_refuse_when_exiting(const char *who);

/* The calling thread's error, kept across a call that may record its own: the cleanup after a
 * failure (a free or a stream destroy that fails there records and logs its own error, which must
 * not replace the failure the caller reports), or work done inside a call that succeeds. */
typedef struct crmm_kept_error {
    crmm_status status;
    char message[1024]; /* crmm_last_error() holds at most 1023 bytes */
} crmm_kept_error;

static inline void crmm_keep_error(crmm_kept_error *k, crmm_status status)
{
    k->status = status;
    snprintf(k->message, sizeof k->message, "%s", status == CRMM_OK ? "" : crmm_last_error());
}

/* Make the kept error the thread's again (its category is not repeated; CRMM_OK: no error) and
 * return its status. */
static inline crmm_status crmm_restore_error(const crmm_kept_error *k)
{
    if (k->status == CRMM_OK) {
        crmm_clear_error();
        return CRMM_OK;
    }
    return crmm_set_error(k->status, "%s", k->message);
}

/* Around fork() (fork_guard.c runs them): the log's lock is taken before a fork and released
 * after it in both processes (it is taken under any other lock, and nothing runs under it but
 * the write of a line); the core's other locks are made anew in the child (the registry's, the
 * config's and its instances', the plugin loader's, the logging switch's, the graph owners'; see
 * fork_guard.c for why they are not taken before). */
void crmm_log_fork_lock(void);
void crmm_log_fork_unlock(void);
void crmm_runtime_fork_child(void);
void crmm_plugin_loader_fork_child(void);
void crmm_logging_switch_fork_child(void);
void crmm_graph_owner_fork_child(void);
/* config.c: c's instances' lock made anew (in a forked child). */
void crmm_config_fork_child(crmm_config *c);

/* torch_record_stream.c: before `ptr` (from crmm_torch_allocate) is freed on `stream`, make that
 * stream wait for the work of every other stream crmm_torch_record_stream named for it, and
 * forget those records. One atomic load when nothing is recorded. */
void crmm_torch_wait_recorded(void *ptr, crmm_cuda_stream_t stream);

#endif
