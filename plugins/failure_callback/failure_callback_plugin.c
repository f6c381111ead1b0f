/* failure_callback_plugin.c — the `failure_callback` adaptor (RMM's
 * failure_callback_resource_adaptor): on an upstream out-of-memory failure, ask a callback
 * whether to retry.
 *
 * The callback and its argument are set at run time through the control op (see
 * crmm/failure_callback.h) and kept as one pair under a mutex that only the failure path takes;
 * the callback itself runs without the lock, so it may free memory through this resource or set
 * another callback. A set waits until no call of the callback it replaced is still running on
 * another thread (each call is counted under the mutex, by the parity of the set it began under),
 * so the caller may free the old argument once it returns; a set from inside a callback of the
 * same resource cannot wait for itself and returns at once. The mutex has a fork guard, so a
 * child forked while another thread set the callback can still fail over to it. Successful
 * allocations cost one upstream call. */
#include "build_config.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <crmm/alloc_counters.h>
#include <crmm/cuda_support.h>
#include <crmm/failure_callback.h>
#include <crmm/fork_guard.h>
#include <crmm/plugin.h>
#include "../common/adaptor.h"
#include "../common/plugin_descriptor.h"

typedef struct failure_callback_resource {
    crmm_resource base;
    bool retry_bad_alloc;             /* retry_on = bad_alloc: CRMM_ERROR_BAD_ALLOC and _CUDA too */
    pthread_mutex_t lock;             /* guards the pair below */
    crmm_fork_guard lock_guard;       /* takes `lock` around a fork; counts the child's calls anew */
    crmm_failure_callback_args callback;
    unsigned sets;                    /* sets so far; a call counts in calls[sets & 1] */
    unsigned calls[2];                /* callback calls running (read by a set without the lock) */
    crmm_alloc_counters counters;
} failure_callback_resource;

/* The resources whose callback this thread is running, innermost first (a callback may allocate
 * through another failure_callback, which may call its own). */
typedef struct running_callback {
    const failure_callback_resource *f;
    unsigned parity; /* the calls[] it is counted in */
    const struct running_callback *outer;
} running_callback;
static __thread const running_callback *running;

/* Around fork: the pair's mutex is taken; in the child the running calls are this thread's
 * alone (the others' threads do not exist there, and a set must not wait for them). */
static void guard_prepare(void *arg) { pthread_mutex_lock(&((failure_callback_resource *)arg)->lock); }
static void guard_parent(void *arg) { pthread_mutex_unlock(&((failure_callback_resource *)arg)->lock); }
static void guard_child(void *arg)
{
    failure_callback_resource *f = arg;
    unsigned mine[2] = {0, 0};
    for (const running_callback *r = running; r; r = r->outer)
        if (r->f == f)
            mine[r->parity]++;
    __atomic_store_n(&f->calls[0], mine[0], __ATOMIC_RELAXED);
    __atomic_store_n(&f->calls[1], mine[1], __ATOMIC_RELAXED);
    pthread_mutex_unlock(&f->lock);
}

static bool running_a_callback_of(const failure_callback_resource *f)
{
    for (const running_callback *r = running; r; r = r->outer)
        if (r->f == f)
            return true;
    return false;
}

static bool retryable(const failure_callback_resource *f, crmm_status st)
{
    /* RMM's bad_alloc is any failed allocation: the plugins that call CUDA report its other
     * refusals as CRMM_ERROR_CUDA (cuda, async) or CRMM_ERROR_BAD_ALLOC (the pool views) */
    return st == CRMM_ERROR_OUT_OF_MEMORY ||
           (f->retry_bad_alloc && (st == CRMM_ERROR_BAD_ALLOC || st == CRMM_ERROR_CUDA));
}

static crmm_status failure_callback_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    failure_callback_resource *f = (failure_callback_resource *)self;
    unsigned long retries = 0;
    for (;;) {
        crmm_status st = crmm_resource_allocate(self->upstream, bytes, stream, ptr);
        if (st == CRMM_OK) {
            crmm_counters_add(&f->counters, bytes, CRMM_COUNT_SHARED);
            return CRMM_OK;
        }
        if (!retryable(f, st))
            return st;
        pthread_mutex_lock(&f->lock);
        crmm_failure_callback_args cb = f->callback;
        unsigned parity = f->sets & 1;
        if (cb.fn)
            __atomic_add_fetch(&f->calls[parity], 1, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&f->lock);
        if (!cb.fn)
            return st;
        /* the callback may call crmm and leave another message: keep the upstream's */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", crmm_last_error());
        running_callback me = {f, parity, running};
        running = &me;
        bool again = cb.fn(bytes, cb.arg);
        running = me.outer;
        __atomic_sub_fetch(&f->calls[parity], 1, __ATOMIC_RELEASE);
        if (!again) {
            crmm_set_error(st, "%s", msg);
            if (retries == 0)
                return st;
            return crmm_error_add_context("failure_callback '%s': the callback gave up after %lu retr%s", self->name,
                                          retries, retries == 1 ? "y" : "ies");
        }
        retries++;
    }
}

static crmm_status failure_callback_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    return crmm_counted_deallocate(self, &((failure_callback_resource *)self)->counters, ptr, bytes, stream);
}

static crmm_status failure_callback_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    return crmm_counted_query(self, &((failure_callback_resource *)self)->counters, what, out);
}

static crmm_status failure_callback_control(crmm_resource *self, int op, void *arg)
{
    failure_callback_resource *f = (failure_callback_resource *)self;
    if (op != CRMM_FAILURE_CALLBACK_OP_SET)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "failure_callback resource has no control op %d", op);
    if (!arg)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "failure_callback: set: argument is NULL");
    crmm_failure_callback_args cb = *(const crmm_failure_callback_args *)arg;
    pthread_mutex_lock(&f->lock);
    f->callback = cb.fn ? cb : (crmm_failure_callback_args){NULL, NULL};
    unsigned replaced = f->sets++ & 1;
    pthread_mutex_unlock(&f->lock);
    /* the calls that began before: none can begin under that parity until the next set; none is
     * waited for once the process exits (a thread may never come back from one then) */
    if (!running_a_callback_of(f))
        while (__atomic_load_n(&f->calls[replaced], __ATOMIC_ACQUIRE) && !crmm_process_exiting())
            nanosleep(&(struct timespec){0, 50 * 1000}, NULL);
    return CRMM_OK;
}

static void failure_callback_destroy(crmm_resource *self)
{
    failure_callback_resource *f = (failure_callback_resource *)self;
    crmm_counted_report_leaks(self, &f->counters);
    crmm_fork_guard_remove(&f->lock_guard);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

static const crmm_resource_ops failure_callback_ops = {
    .allocate = failure_callback_allocate, .deallocate = failure_callback_deallocate,
    .query = failure_callback_query, .destroy = failure_callback_destroy, .control = failure_callback_control,
};

/* The parameters, as crmm_params_parse fills them from failure_callback_params. */
typedef struct failure_callback_config {
    int retry_on; /* index in "out_of_memory|bad_alloc"; always set (it has a default) */
} failure_callback_config;

static crmm_status failure_callback_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    failure_callback_config cfg = {0};
    crmm_status st = crmm_params_parse(params, &cfg);
    if (st != CRMM_OK)
        return st;
    failure_callback_resource *f = adaptor_alloc(sizeof *f, "failure_callback");
    if (!f)
        return CRMM_ERROR_OUT_OF_MEMORY;
    f->retry_bad_alloc = cfg.retry_on == 1;
    pthread_mutex_init(&f->lock, NULL);
    f->lock_guard = (crmm_fork_guard){.prepare = guard_prepare, .parent = guard_parent, .child = guard_child, .arg = f};
    crmm_fork_guard_add(&f->lock_guard);
    return adaptor_publish(&f->base, &failure_callback_ops, "failure_callback", upstream, out);
}

static const crmm_param failure_callback_params[] = {
    {.key = "retry_on", .type = CRMM_PARAM_ENUM, .default_value = "out_of_memory",
     .help = "failures that call the callback: out_of_memory, or bad_alloc (out of memory and any other failed "
             "allocation: CRMM_ERROR_BAD_ALLOC or CRMM_ERROR_CUDA)",
     .offset = offsetof(failure_callback_config, retry_on), .choices = "out_of_memory|bad_alloc"},
    {NULL},
};

PLUGIN_DESCRIPTOR(.name = "failure_callback", .upstream = CRMM_UPSTREAM_REQUIRED,
                  .params = failure_callback_params, .config_size = sizeof(failure_callback_config),
                  .create = failure_callback_create,
                  .description = "calls a callback (crmm_failure_callback_set) when upstream runs out of memory; retries if it says so; counts a free only when upstream takes it")
