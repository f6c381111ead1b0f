/* crmm/tracking.h — the `tracking` adaptor: every outstanding allocation, by pointer.
 *
 * The tracking plugin records each allocation that passes through it (pointer, size, and with
 * `capture_stacks = true` the call stack from backtrace()). As RMM's tracking_resource_adaptor
 * it answers how many allocations are outstanding and how many bytes, lists them, and reports
 * the ones left when it is destroyed (count, bytes, each pointer with its stack, at warn
 * level). Unlike RMM it refuses a bad free: a pointer it did not hand out, or a size other
 * than the allocated one, is logged at error level and returned as
 * CRMM_ERROR_INVALID_ARGUMENT, and is not passed upstream (the allocation stays outstanding).
 * A free of an allocation whose free is still with the upstream (another thread's) is refused
 * the same way. A free the upstream refuses returns the upstream's error, and the allocation
 * stays outstanding, counted and listed as before.
 *
 * The functions below find the tracking layer anywhere in a chain (crmm_resource_control_kind).
 * They return CRMM_ERROR_INVALID_ARGUMENT for NULL arguments and CRMM_ERROR_UNSUPPORTED when
 * the chain has no tracking layer. */
#ifndef CRMM_TRACKING_H
#define CRMM_TRACKING_H

#include <stddef.h>
#include <stdint.h>
#include <crmm/error.h>
#include <crmm/log.h>
#include <crmm/resource.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One outstanding allocation, as crmm_tracking_foreach shows it. */
typedef struct crmm_tracking_allocation {
    void *ptr;
    size_t bytes;
    uint64_t serial;          /* 1 for the first allocation of the resource, then 2, 3, ... */
    void *const *stack;       /* return addresses from backtrace() (NULL without capture_stacks) */
    int stack_depth;          /* entries in stack */
} crmm_tracking_allocation;

/* Called once per outstanding allocation, oldest first; return nonzero to stop. The callback
 * may allocate and free through the resource (it runs on a snapshot, with no lock held). */
typedef int (*crmm_tracking_visit_fn)(const crmm_tracking_allocation *allocation, void *arg);

/* Argument of CRMM_TRACKING_OP_FOREACH. */
typedef struct crmm_tracking_visit {
    crmm_tracking_visit_fn fn;
    void *arg;
} crmm_tracking_visit;

/* Control ops of the tracking plugin (crmm_resource_control); each arg as said. */
#define CRMM_TRACKING_OP_COUNT 1       /* uint64_t *: outstanding allocations */
#define CRMM_TRACKING_OP_BYTES 2       /* uint64_t *: outstanding bytes */
#define CRMM_TRACKING_OP_FOREACH 3     /* crmm_tracking_visit * */
#define CRMM_TRACKING_OP_STRING 4      /* char **: a malloc'd report, the caller free()s it */
#define CRMM_TRACKING_OP_LOG 5         /* crmm_log_level *: write the report to the crmm log */

/* Not for callers: the functions below run their op through it (NULL checks, then
 * crmm_resource_control_kind on the chain's tracking layer). */
static inline crmm_status crmm_tracking_control_(crmm_resource *mr, int op, void *arg)
{
    if (!mr || !arg)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "tracking: %s is NULL", mr ? "argument" : "resource");
    return crmm_resource_control_kind(mr, "tracking", op, arg);
}

/* Number of outstanding allocations. */
static inline crmm_status crmm_tracking_count(crmm_resource *mr, uint64_t *count)
{
    return crmm_tracking_control_(mr, CRMM_TRACKING_OP_COUNT, count);
}

/* Bytes of the outstanding allocations (as requested). */
static inline crmm_status crmm_tracking_bytes(crmm_resource *mr, uint64_t *bytes)
{
    return crmm_tracking_control_(mr, CRMM_TRACKING_OP_BYTES, bytes);
}

/* Call fn for each outstanding allocation, oldest first. CRMM_ERROR_OUT_OF_MEMORY when the
 * snapshot cannot be taken. */
static inline crmm_status crmm_tracking_foreach(crmm_resource *mr, crmm_tracking_visit_fn fn, void *arg)
{
    crmm_tracking_visit v = {fn, arg};
    if (!fn)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "tracking: callback is NULL");
    return crmm_tracking_control_(mr, CRMM_TRACKING_OP_FOREACH, &v);
}

/* The outstanding allocations as text (RMM's get_outstanding_allocations_str):
 *   "Outstanding allocations: N (B)\n" then "  PTR: BYTES bytes\n" per allocation, oldest
 *   first, each followed by its stack ("    #K symbol") when captured.
 * *text is malloc'd; free() it. CRMM_ERROR_OUT_OF_MEMORY when it cannot be built. */
static inline crmm_status crmm_tracking_outstanding(crmm_resource *mr, char **text)
{
    return crmm_tracking_control_(mr, CRMM_TRACKING_OP_STRING, text);
}

/* Write that report to the crmm log at `level` (RMM's log_outstanding_allocations, at debug). */
static inline crmm_status crmm_tracking_log_outstanding(crmm_resource *mr, crmm_log_level level)
{
    return crmm_tracking_control_(mr, CRMM_TRACKING_OP_LOG, &level);
}

#ifdef __cplusplus
}
#endif
#endif
