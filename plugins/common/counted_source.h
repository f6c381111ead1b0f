/* counted_source.h — the base, query and destroy of a resource that allocates by itself and
 * counts what it hands out (direct_resource, system_resource, callback). Its struct starts with
 * a counted_source; its ops table names these functions for the ops it has no more to say in. */
#ifndef CRMM_PLUGINS_COUNTED_SOURCE_H
#define CRMM_PLUGINS_COUNTED_SOURCE_H

#include <stdint.h>
#include <stdlib.h>
#include <crmm/alloc_counters.h>

typedef struct counted_source {
    crmm_resource base;           /* first: crmm sees a crmm_resource */
    crmm_alloc_counters counters; /* what it has handed out and not had back */
} counted_source;

/* The counter queries; any other is CRMM_ERROR_UNSUPPORTED, "<kind> resource cannot answer
 * query N". */
static inline crmm_status counted_source_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    if (crmm_counters_query(&((counted_source *)self)->counters, what, out) != CRMM_OK)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "%s resource cannot answer query %d", self->kind, (int)what);
    return CRMM_OK;
}

/* counted_source_query, and CRMM_QUERY_MAXIMUM_SIZE as UINT64_MAX: a source that sets no bound. */
static inline crmm_status counted_source_query_unbounded(crmm_resource *self, crmm_query what, uint64_t *out)
{
    if (what == CRMM_QUERY_MAXIMUM_SIZE) {
        *out = UINT64_MAX;
        return CRMM_OK;
    }
    return counted_source_query(self, what, out);
}

/* For destroy: warn about the allocations still live (crmm_resource_report_leaks). */
static inline void counted_source_report_leaks(crmm_resource *self)
{
    const crmm_alloc_counters *c = &((counted_source *)self)->counters;
    crmm_resource_report_leaks(self, (uint64_t)c->count, (uint64_t)c->bytes);
}

/* A destroy that has nothing to release but the struct: the leak report, then free. */
static inline void counted_source_destroy(crmm_resource *self)
{
    counted_source_report_leaks(self);
    free(self);
}

#endif
