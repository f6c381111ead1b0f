/* adaptor.h — the two ends of an adaptor's create, for the plugins whose resource sits over one
 * upstream and hands out the upstream's memory on its device (aligned, failure_callback,
 * limiting, logging, prefetch, statistics, tracking):
 *
 *   limiting_resource *r = adaptor_alloc(sizeof *r, "limiting");
 *   if (!r)
 *       return CRMM_ERROR_OUT_OF_MEMORY;
 *   r->limit = limit;
 *   return adaptor_publish(&r->base, &limiting_ops, "limiting", upstream, out);
 */
#ifndef CRMM_PLUGINS_ADAPTOR_H
#define CRMM_PLUGINS_ADAPTOR_H

#include <stdlib.h>
#include <crmm/error.h>
#include <crmm/resource.h>

/* A zeroed resource struct of `size` bytes; NULL, with "<kind>: malloc failed" set as
 * CRMM_ERROR_OUT_OF_MEMORY, when there is no memory for it. */
static inline void *adaptor_alloc(size_t size, const char *kind)
{
    void *r = calloc(1, size);
    if (!r)
        crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: malloc failed", kind);
    return r;
}

/* Initialise `self` as a `kind` resource with `ops` over `upstream`, with the upstream's memory
 * flags and device (taking a reference to it), and hand it out through *out. */
static inline crmm_status adaptor_publish(crmm_resource *self, const crmm_resource_ops *ops, const char *kind,
                                          crmm_resource *upstream, crmm_resource **out)
{
    crmm_resource_init(self, ops, kind, upstream->flags, upstream->device, upstream);
    *out = self;
    return CRMM_OK;
}

#endif
