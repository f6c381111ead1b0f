/* crmm/failure_callback.h — set the callback of a `failure_callback` resource (RMM's
 * failure_callback_resource_adaptor).
 *
 * When its upstream fails an allocation with CRMM_ERROR_OUT_OF_MEMORY (with retry_on =
 * bad_alloc: also CRMM_ERROR_BAD_ALLOC or CRMM_ERROR_CUDA, RMM's bad_alloc), the resource calls the callback with the size of the
 * request: true retries the allocation, false returns the failure. No callback: the failure
 * passes through. The callback may free memory (also through the same resource) and may be
 * called from several threads at once; a callback that always says true retries forever.
 *
 *   static bool on_oom(size_t bytes, void *arg) { return release_some_cache(arg, bytes); }
 *   crmm_failure_callback_set(mr, on_oom, cache);   // mr: the failure_callback resource or any
 *                                                   // adaptor stacked on top of it */
#ifndef CRMM_FAILURE_CALLBACK_H
#define CRMM_FAILURE_CALLBACK_H

#include <stdbool.h>
#include <stddef.h>
#include <crmm/error.h>
#include <crmm/resource.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Called with the size of the failed request and the argument given with it. */
typedef bool (*crmm_failure_callback_fn)(size_t bytes, void *arg);

/* The control op (numbered within the `failure_callback` kind: resource.h) and its argument. */
#define CRMM_FAILURE_CALLBACK_OP_SET 1
typedef struct crmm_failure_callback_args {
    crmm_failure_callback_fn fn; /* NULL: remove the callback */
    void *arg;
} crmm_failure_callback_args;

/* Set (fn non-NULL) or remove (fn NULL) the callback of the first `failure_callback` resource in
 * the chain mr, mr's upstream, ... Takes effect for the next failure, and returns once no other
 * thread still runs the callback it replaced, so the old argument may be freed then (a set from
 * inside a callback of the same resource, or once the process is exiting, returns at once; in a
 * forked child only the forking thread's calls count). Errors:
 * CRMM_ERROR_INVALID_ARGUMENT (mr NULL), CRMM_ERROR_NOT_FOUND (no failure_callback in the chain). */
static inline crmm_status crmm_failure_callback_set(crmm_resource *mr, crmm_failure_callback_fn fn, void *arg)
{
    if (!mr)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "failure_callback_set: resource is NULL");
    crmm_resource *layer = crmm_resource_find_kind(mr, "failure_callback");
    if (!layer)
        return crmm_set_error(CRMM_ERROR_NOT_FOUND, "failure_callback_set: no failure_callback resource under %s '%s'",
                              crmm_resource_kind(mr), crmm_resource_name(mr));
    crmm_failure_callback_args args = {fn, arg};
    return crmm_resource_control(layer, CRMM_FAILURE_CALLBACK_OP_SET, &args);
}

#ifdef __cplusplus
}
#endif
#endif
