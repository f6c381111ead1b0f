/* template_plugin.c — the smallest useful crmm plugin, and the one to copy.
 *
 * `template` is an adaptor: it passes every request to its upstream and counts the live
 * allocations, which it reports through the query op. Build it against the installed headers:
 *   cc -shared -fPIC -o crmm_template.so template_plugin.c $(pkg-config --cflags --libs crmm)
 * and put crmm_template.so in a directory of $CRMM_PLUGIN_PATH or a config's plugin_path. */
#include <stddef.h>
#include <stdlib.h>
#include <crmm/alloc_counters.h>
#include <crmm/plugin.h>

typedef struct template_resource {
    crmm_resource base;          /* first: crmm sees a crmm_resource */
    crmm_alloc_counters counters;
    uint64_t tag;                /* the `tag` parameter, to show how parameters arrive */
} template_resource;

static crmm_status template_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    template_resource *t = (template_resource *)self;
    crmm_status st = crmm_resource_allocate(self->upstream, bytes, stream, ptr);
    if (st == CRMM_OK)
        crmm_counters_add(&t->counters, bytes, CRMM_COUNT_SHARED);
    return st;
}

/* counted once the upstream has the memory back */
static crmm_status template_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    return crmm_counted_deallocate(self, &((template_resource *)self)->counters, ptr, bytes, stream);
}

/* its counters, else the upstream's answer (e.g. reserved bytes of a pool) */
static crmm_status template_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    return crmm_counted_query(self, &((template_resource *)self)->counters, what, out);
}

static void template_destroy(crmm_resource *self)
{
    template_resource *t = (template_resource *)self;
    crmm_counted_report_leaks(self, &t->counters);
    free(t);
}

static const crmm_resource_ops template_ops = {
    .allocate = template_allocate,
    .deallocate = template_deallocate,
    .query = template_query,
    /* no trim: it caches nothing, so crmm_resource_trim goes on to the upstream */
    .destroy = template_destroy, /* the core releases the upstream afterwards */
};

/* The parameters, as crmm_params_parse fills them: one member per row of template_params. */
typedef struct template_config {
    uint64_t tag;
} template_config;

static crmm_status template_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    template_config cfg = {0};
    crmm_status st = crmm_params_parse(params, &cfg); /* typed, defaulted and range-checked */
    if (st != CRMM_OK)
        return st;
    template_resource *t = calloc(1, sizeof *t);
    if (!t)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "template: malloc failed");
    t->tag = cfg.tag;
    /* same properties and device as the upstream; takes a reference to it */
    crmm_resource_init(&t->base, &template_ops, "template", upstream->flags, upstream->device, upstream);
    *out = &t->base;
    return CRMM_OK;
}

/* One row per parameter: key, type, default, help, where it lands in template_config, and for a
 * number its range (.min, .max; max 0: no bound); an enum would give .choices and land in an int,
 * the index of its choice. crmm info, crmm.ini(5) and check-config all read these rows. */
static const crmm_param template_params[] = {
    {.key = "tag", .type = CRMM_PARAM_UINT, .default_value = "0",
     .help = "a number kept with the resource (an example parameter)",
     .offset = offsetof(template_config, tag)},
    {.key = NULL}, /* the end (not {NULL}, which clang -Wextra calls a missing initializer) */
};

static const crmm_plugin template_plugin = {
    CRMM_PLUGIN_HEADER,
    .name = "template",          /* the file must be crmm_template.so */
    .version = "1.0.0",
    .description = "counts allocations and passes them to its upstream (the plugin to copy)",
    .upstream = CRMM_UPSTREAM_REQUIRED,
    .params = template_params,
    .config_size = sizeof(template_config),
    .create = template_create,
};

CRMM_PLUGIN_DEFINE(template_plugin)
