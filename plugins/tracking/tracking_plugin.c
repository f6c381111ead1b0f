/* tracking_plugin.c — the `tracking` plugin: records every outstanding allocation
 * (RMM's tracking_resource_adaptor; API in crmm/tracking.h).
 *
 * Records live in a sharded pointer map (tracking_table.c) keyed by pointer. A record is added
 * after the upstream allocate returns. A free marks the record before the upstream sees it and
 * removes it only once the upstream took the block back: a free the upstream refuses leaves the
 * block live, so its record and the counts stay as they were. Another thread may get the same
 * address back from the upstream before the record is removed; its new record replaces the old
 * one, and the removal, which names the old record by its serial, leaves the new one alone. A
 * second free of a block while its first is with the upstream is refused. A free the table
 * cannot match (unknown pointer, wrong size) is refused and logged, never passed upstream. */
#include "build_config.h"
#include <execinfo.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/alloc_counters.h>
#include <crmm/log.h>
#include <crmm/plugin.h>
#include <crmm/tracking.h>
#include "../common/adaptor.h"
#include "../common/plugin_descriptor.h"
#include "../common/resource_label.h"
#include "tracking_table.h"

/* At most this many leaked allocations are listed one by one at destroy. */
#define TRACKING_LEAKS_LISTED 1000

typedef struct tracking_resource {
    crmm_resource base;
    tracking_table *table;
    crmm_alloc_counters counters;
    uint64_t next_serial;
    bool capture_stacks;
} tracking_resource;

/* "tracking 'name'", or "tracking" for an unnamed resource: how messages name it. */
static const char *who(const crmm_resource *self, char *buf, size_t size)
{
    return resource_label("tracking", self->name, buf, size);
}

static crmm_status tracking_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    tracking_resource *r = (tracking_resource *)self;
    void **stack = NULL;
    int depth = 0;
    if (r->capture_stacks) {
        void *frames[TRACKING_STACK_MAX + 1];
        depth = backtrace(frames, TRACKING_STACK_MAX + 1) - 1; /* drop this function's own frame */
        if (depth > 0 && (stack = malloc((size_t)depth * sizeof *stack)) != NULL)
            memcpy(stack, frames + 1, (size_t)depth * sizeof *stack);
        else
            depth = 0;
    }
    crmm_status st = crmm_resource_allocate(self->upstream, bytes, stream, ptr);
    if (st != CRMM_OK) {
        free(stack);
        return st;
    }
    uint64_t serial = __atomic_add_fetch(&r->next_serial, 1, __ATOMIC_RELAXED);
    if ((st = tracking_table_insert(r->table, (uintptr_t)*ptr, bytes, serial, stack, depth)) != CRMM_OK) {
        crmm_resource_deallocate(self->upstream, *ptr, bytes, stream);
        return st;
    }
    crmm_counters_add(&r->counters, bytes, CRMM_COUNT_SHARED);
    return CRMM_OK;
}

static crmm_status tracking_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    tracking_resource *r = (tracking_resource *)self;
    size_t recorded = 0;
    uint64_t serial = 0;
    char name[64];
    switch (tracking_table_begin_free(r->table, (uintptr_t)ptr, bytes, &recorded, &serial)) {
    case TRACKING_FREEING:
        break;
    case TRACKING_UNKNOWN:
        crmm_log(CRMM_LOG_ERROR, "%s: free of %p (%zu bytes), which it did not allocate; not freed",
                 who(self, name, sizeof name), ptr, bytes);
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: free of %p (%zu bytes), which it did not allocate",
                              name, ptr, bytes);
    case TRACKING_WRONG_SIZE:
        crmm_log(CRMM_LOG_ERROR, "%s: free of %p with %zu bytes, but it was allocated with %zu bytes; not freed",
                 who(self, name, sizeof name), ptr, bytes, recorded);
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: free of %p with %zu bytes, but it was allocated "
                              "with %zu bytes", name, ptr, bytes, recorded);
    }
    crmm_status st = crmm_resource_deallocate(self->upstream, ptr, bytes, stream);
    if (st == CRMM_OK) /* count only what upstream took back */
        crmm_counters_sub(&r->counters, bytes, CRMM_COUNT_SHARED);
    tracking_table_end_free(r->table, (uintptr_t)ptr, serial, st == CRMM_OK);
    return st;
}

static crmm_status tracking_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    return crmm_counted_query(self, &((tracking_resource *)self)->counters, what, out);
}

/* ---- reports ------------------------------------------------------------------------------ */

/* A growing string; `failed` once an allocation failed. */
typedef struct text { char *s; size_t len, cap; bool failed; } text;

static void text_add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_add(text *t, const char *fmt, ...)
{
    for (int attempt = 0; attempt < 2 && !t->failed; attempt++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = true;
            return;
        }
        if (t->s && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap + (size_t)n + 1) * 2;
        char *s = realloc(t->s, cap);
        if (!s) {
            t->failed = true;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
}

/* Frame k of rec's stack as text: its symbol (backtrace_symbols), else its address in buf. */
static const char *frame_text(const tracking_record *rec, char **symbols, int k, char *buf, size_t size)
{
    if (symbols)
        return symbols[k];
    snprintf(buf, size, "%p", rec->stack[k]);
    return buf;
}

/* Append the stack of `rec`, one symbolized frame a line, each line starting with `indent`. */
static void text_add_stack(text *t, const tracking_record *rec, const char *indent)
{
    if (!rec->stack || rec->stack_depth <= 0)
        return;
    char **symbols = backtrace_symbols(rec->stack, rec->stack_depth);
    char buf[32];
    for (int k = 0; k < rec->stack_depth; k++)
        text_add(t, "%s#%d %s\n", indent, k, frame_text(rec, symbols, k, buf, sizeof buf));
    free(symbols);
}

/* The outstanding allocations (tracking_table_snapshot) and their bytes in all. */
typedef struct outstanding {
    tracking_record *recs;
    size_t n;
    uint64_t bytes;
} outstanding;

static crmm_status take_outstanding(tracking_resource *r, outstanding *o)
{
    crmm_status st = tracking_table_snapshot(r->table, &o->recs, &o->n);
    o->bytes = 0;
    for (size_t i = 0; st == CRMM_OK && i < o->n; i++)
        o->bytes += o->recs[i].bytes;
    return st;
}

/* "Outstanding allocations: N (B)\n" and a block per allocation (crmm/tracking.h). */
static crmm_status build_report(tracking_resource *r, char **out)
{
    outstanding o;
    crmm_status st = take_outstanding(r, &o);
    if (st != CRMM_OK)
        return st;
    char sz[32];
    text t = {0};
    text_add(&t, "Outstanding allocations: %zu (%s)\n", o.n, crmm_format_size(o.bytes, sz, sizeof sz));
    for (size_t i = 0; i < o.n; i++) {
        text_add(&t, "  %p: %zu bytes\n", (void *)o.recs[i].ptr, o.recs[i].bytes);
        text_add_stack(&t, &o.recs[i], "    ");
    }
    tracking_snapshot_free(o.recs, o.n);
    if (t.failed) {
        free(t.s);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "tracking: cannot build the report");
    }
    *out = t.s;
    return CRMM_OK;
}

static crmm_status visit_all(tracking_resource *r, const crmm_tracking_visit *v)
{
    tracking_record *recs;
    size_t n;
    crmm_status st = tracking_table_snapshot(r->table, &recs, &n);
    if (st != CRMM_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        crmm_tracking_allocation a = {(void *)recs[i].ptr, recs[i].bytes, recs[i].serial, recs[i].stack,
                                      recs[i].stack_depth};
        if (v->fn(&a, v->arg))
            break;
    }
    tracking_snapshot_free(recs, n);
    return CRMM_OK;
}

/* Write the outstanding allocations to the crmm log at `level`: a summary line, then a line
 * per allocation (at most `limit`) and a line per stack frame. `what` starts the summary. */
static crmm_status log_report(tracking_resource *r, crmm_log_level level, size_t limit, const char *what)
{
    if (!crmm_log_should_log(level))
        return CRMM_OK;
    outstanding o;
    crmm_status st = take_outstanding(r, &o);
    if (st != CRMM_OK)
        return st;
    char sz[32], name[64];
    who(&r->base, name, sizeof name);
    crmm_log(level, "%s: %s: %zu allocation%s (%s)", name, what, o.n, o.n == 1 ? "" : "s",
             crmm_format_size(o.bytes, sz, sizeof sz));
    for (size_t i = 0; i < o.n && i < limit; i++) {
        const tracking_record *rec = &o.recs[i];
        crmm_log(level, "%s:   %p: %zu bytes (allocation #%llu)", name, (void *)rec->ptr, rec->bytes,
                 (unsigned long long)rec->serial);
        char **symbols = rec->stack ? backtrace_symbols(rec->stack, rec->stack_depth) : NULL;
        char buf[32];
        for (int k = 0; k < rec->stack_depth; k++)
            crmm_log(level, "%s:     #%d %s", name, k, frame_text(rec, symbols, k, buf, sizeof buf));
        free(symbols);
    }
    if (o.n > limit)
        crmm_log(level, "%s:   ... and %zu more", name, o.n - limit);
    tracking_snapshot_free(o.recs, o.n);
    return CRMM_OK;
}

static crmm_status tracking_control(crmm_resource *self, int op, void *arg)
{
    tracking_resource *r = (tracking_resource *)self;
    if (op >= CRMM_TRACKING_OP_COUNT && op <= CRMM_TRACKING_OP_LOG && !arg)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "tracking: control op %d needs an argument", op);
    switch (op) {
    case CRMM_TRACKING_OP_COUNT:
        *(uint64_t *)arg = (uint64_t)__atomic_load_n(&r->counters.count, __ATOMIC_RELAXED);
        return CRMM_OK;
    case CRMM_TRACKING_OP_BYTES:
        *(uint64_t *)arg = (uint64_t)__atomic_load_n(&r->counters.bytes, __ATOMIC_RELAXED);
        return CRMM_OK;
    case CRMM_TRACKING_OP_FOREACH:
        if (!((crmm_tracking_visit *)arg)->fn)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "tracking: callback is NULL");
        return visit_all(r, arg);
    case CRMM_TRACKING_OP_STRING:
        return build_report(r, (char **)arg);
    case CRMM_TRACKING_OP_LOG:
        return log_report(r, *(crmm_log_level *)arg, SIZE_MAX, "Outstanding allocations");
    default:
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "tracking resource has no control op %d", op);
    }
}

static void tracking_destroy(crmm_resource *self)
{
    tracking_resource *r = (tracking_resource *)self;
    uint64_t count = (uint64_t)r->counters.count;
    crmm_resource_report_leaks(self, count, (uint64_t)r->counters.bytes);
    if (count)
        log_report(r, CRMM_LOG_WARN, TRACKING_LEAKS_LISTED, "leaked at destroy");
    tracking_table_free(r->table); /* the leaked memory itself stays with the upstream */
    free(r);
}

static const crmm_resource_ops tracking_ops = {
    .allocate = tracking_allocate, .deallocate = tracking_deallocate, .query = tracking_query,
    .destroy = tracking_destroy, .control = tracking_control,
};

/* The parameters, as crmm_params_parse fills them from tracking_params. */
typedef struct tracking_config {
    bool capture_stacks;
} tracking_config;

static crmm_status tracking_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    tracking_config cfg = {0};
    crmm_status st = crmm_params_parse(params, &cfg);
    if (st != CRMM_OK)
        return st;
    tracking_resource *r = adaptor_alloc(sizeof *r, "tracking");
    if (!r)
        return CRMM_ERROR_OUT_OF_MEMORY;
    st = tracking_table_new(&r->table);
    if (st != CRMM_OK) {
        free(r);
        return st;
    }
    r->capture_stacks = cfg.capture_stacks;
    if (r->capture_stacks) { /* the first backtrace() loads libgcc: do it now, not inside an allocate */
        void *warm[2];
        backtrace(warm, 2);
    }
    return adaptor_publish(&r->base, &tracking_ops, "tracking", upstream, out);
}

static const crmm_param tracking_params[] = {
    {.key = "capture_stacks", .type = CRMM_PARAM_BOOL, .default_value = "false",
     .help = "record the call stack of every allocation (backtrace)",
     .offset = offsetof(tracking_config, capture_stacks)},
    {NULL},
};

PLUGIN_DESCRIPTOR(.name = "tracking", .upstream = CRMM_UPSTREAM_REQUIRED, .params = tracking_params,
                  .config_size = sizeof(tracking_config), .create = tracking_create,
                  .description = "records every outstanding allocation (and its stack); refuses bad frees; reports leaks")
