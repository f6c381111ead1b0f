/* crmm/callback.h — the `callback` plugin (RMM's callback_memory_resource): a resource whose
 * allocate and deallocate are the caller's functions.
 *
 * The functions reach the plugin as parameters holding their addresses (allocate_fn,
 * deallocate_fn, allocate_arg, deallocate_arg), so that a ctypes caller can pass them as
 * integers; C callers use crmm_callback_resource_create, which formats them. An allocate
 * callback that returns NULL fails the allocation with CRMM_ERROR_OUT_OF_MEMORY. The callbacks
 * may be called from several threads at once and must stay valid until the resource is destroyed.
 *
 *   static void *my_alloc(size_t bytes, crmm_cuda_stream_t stream, void *arg) { ... }
 *   static void my_free(void *ptr, size_t bytes, crmm_cuda_stream_t stream, void *arg) { ... }
 *   crmm_resource *mr;
 *   crmm_status st = crmm_callback_resource_create(my_alloc, my_free, state, state, &mr); */
#ifndef CRMM_CALLBACK_H
#define CRMM_CALLBACK_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <crmm/error.h>
#include <crmm/resource.h>

#ifdef __cplusplus
extern "C" {
#endif

/* RMM's allocate_callback_t: return `bytes` of memory for use on `stream` (aligned to
 * CRMM_ALLOCATION_ALIGNMENT), or NULL when there is none. */
typedef void *(*crmm_callback_allocate_fn)(size_t bytes, crmm_cuda_stream_t stream, void *arg);
/* RMM's deallocate_callback_t: free `ptr`, a block of `bytes` the allocate callback returned. */
typedef void (*crmm_callback_deallocate_fn)(void *ptr, size_t bytes, crmm_cuda_stream_t stream, void *arg);

/* Create a callback resource for the current device (none needed: the callbacks decide what
 * memory it is; it is marked device accessible). `extra_params` (may be NULL) adds parameters,
 * e.g. "host_accessible=true". Errors: CRMM_ERROR_INVALID_ARGUMENT (allocate, deallocate or out
 * NULL, or extra_params too long), those of crmm_resource_create (CRMM_ERROR_CONFIG for a bad
 * extra parameter, CRMM_ERROR_PLUGIN when the plugin is not found). */
static inline crmm_status crmm_callback_resource_create_with(crmm_callback_allocate_fn allocate,
                                                            crmm_callback_deallocate_fn deallocate, void *allocate_arg,
                                                            void *deallocate_arg, const char *extra_params,
                                                            crmm_resource **out)
{
    if (!allocate || !deallocate || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "callback_resource_create: %s is NULL",
                              !allocate ? "allocate" : !deallocate ? "deallocate" : "out");
    /* function pointers as integers: POSIX guarantees they fit in (and survive) a uintptr_t */
    uintptr_t a = 0, d = 0;
    memcpy(&a, &allocate, sizeof allocate < sizeof a ? sizeof allocate : sizeof a);
    memcpy(&d, &deallocate, sizeof deallocate < sizeof d ? sizeof deallocate : sizeof d);
    /* the four numbers by snprintf (bounded), the caller's text after them by length: a %s of
     * unbounded text is a -Wformat-truncation error under newer compilers with -Werror */
    char params[512];
    int n = snprintf(params, sizeof params, "allocate_fn=%#jx deallocate_fn=%#jx allocate_arg=%#jx deallocate_arg=%#jx ",
                     (uintmax_t)a, (uintmax_t)d, (uintmax_t)(uintptr_t)allocate_arg, (uintmax_t)(uintptr_t)deallocate_arg);
    size_t extra_len = extra_params ? strlen(extra_params) : 0;
    if (n < 0 || (size_t)n + extra_len >= sizeof params)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "callback_resource_create: extra_params too long");
    memcpy(params + n, extra_params ? extra_params : "", extra_len + 1);
    return crmm_resource_create("callback", params, NULL, out);
}

/* crmm_callback_resource_create_with without extra parameters. Errors: as that function's. */
static inline crmm_status crmm_callback_resource_create(crmm_callback_allocate_fn allocate,
                                                       crmm_callback_deallocate_fn deallocate, void *allocate_arg,
                                                       void *deallocate_arg, crmm_resource **out)
{
    return crmm_callback_resource_create_with(allocate, deallocate, allocate_arg, deallocate_arg, NULL, out);
}

#ifdef __cplusplus
}
#endif
#endif
