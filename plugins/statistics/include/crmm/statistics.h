/* crmm/statistics.h — the `statistics` adaptor: allocation counters with nested frames.
 *
 * The statistics plugin counts what passes through it: live, peak and total bytes and
 * allocations (crmm_alloc_counters). As RMM's statistics_resource_adaptor it keeps a stack of
 * counter frames: push starts a fresh frame (to measure one block of code), pop ends it and
 * folds it into the frame below — values and totals add, and the outer peak becomes
 * max(outer.peak, outer.value + popped.peak), the peak the outer frame would have seen.
 *
 * The functions below find the statistics layer anywhere in a chain (crmm_resource_control_kind),
 * so they work when it sits under another adaptor, e.g. logging -> statistics -> pool. They
 * return CRMM_ERROR_INVALID_ARGUMENT for NULL arguments and CRMM_ERROR_UNSUPPORTED when the
 * chain has no statistics layer.
 *
 * The resource's queries (CRMM_QUERY_BYTES_IN_USE, _PEAK, ALLOCATIONS, ...) answer for its
 * whole life, whatever frames are pushed; other queries go to the upstream. */
#ifndef CRMM_STATISTICS_H
#define CRMM_STATISTICS_H

#include <crmm/alloc_counters.h>
#include <crmm/error.h>
#include <crmm/resource.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Control ops of the statistics plugin (crmm_resource_control); each arg as said. */
#define CRMM_STATISTICS_OP_GET 1      /* crmm_alloc_counters *: the top frame */
#define CRMM_STATISTICS_OP_PUSH 2     /* crmm_alloc_counters * or NULL: receives the frame pushed down */
#define CRMM_STATISTICS_OP_POP 3      /* crmm_alloc_counters * or NULL: receives the popped frame */
#define CRMM_STATISTICS_OP_DEPTH 4     /* uint64_t *: number of frames (1 = only the base frame) */

/* Not for callers: the functions below run their op through it (NULL checks, then
 * crmm_resource_control_kind on the chain's statistics layer). */
static inline crmm_status crmm_statistics_control_(crmm_resource *mr, int op, void *arg, int arg_required)
{
    if (!mr || (arg_required && !arg))
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "statistics: %s is NULL", mr ? "argument" : "resource");
    return crmm_resource_control_kind(mr, "statistics", op, arg);
}

/* The counters of the current (top) frame: live, peak and total bytes and allocations since
 * the frame was pushed (since creation for the base frame). Live values may be negative in a
 * frame that frees memory allocated before it was pushed. */
static inline crmm_status crmm_statistics_get(crmm_resource *mr, crmm_alloc_counters *out)
{
    return crmm_statistics_control_(mr, CRMM_STATISTICS_OP_GET, out, 1);
}

/* Start a new zeroed frame; *previous (may be NULL) receives the frame that was on top
 * (RMM's push_counters). CRMM_ERROR_OUT_OF_MEMORY when the stack cannot grow. */
static inline crmm_status crmm_statistics_push(crmm_resource *mr, crmm_alloc_counters *previous)
{
    return crmm_statistics_control_(mr, CRMM_STATISTICS_OP_PUSH, previous, 0);
}

/* End the top frame, fold it into the one below, and store it in *popped (may be NULL).
 * CRMM_ERROR_STATE when only the base frame is left. */
static inline crmm_status crmm_statistics_pop(crmm_resource *mr, crmm_alloc_counters *popped)
{
    return crmm_statistics_control_(mr, CRMM_STATISTICS_OP_POP, popped, 0);
}

/* Number of frames on the stack (1 when nothing was pushed). */
static inline crmm_status crmm_statistics_depth(crmm_resource *mr, uint64_t *depth)
{
    return crmm_statistics_control_(mr, CRMM_STATISTICS_OP_DEPTH, depth, 1);
}

#ifdef __cplusplus
}
#endif
#endif
