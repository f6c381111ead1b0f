/* bad_plugin.c — one source for the test-only plugins that break the plugin ABI, one way each.
 *
 * tests/plugins/local.mk builds it several times with one BAD_* macro per target (crmm_badmajor,
 * crmm_newminor, ...); check_loader.c loads each and checks that the loader or
 * crmm_resource_create refuses it with a message a person can act on, without a crash or a leak.
 * Without a BAD_* macro it is the well-formed plugin its variants break (crmm_sizeparam): a
 * host-memory allocator with one size parameter, `size`, that it reports as
 * CRMM_QUERY_MAXIMUM_SIZE, so that tests can see a size given as "N%" resolved against the
 * memory of the device the resource is built for. crmm_oldminor is that plugin as ABI 1.1 built
 * it, which the loader refuses, saying what changed in 2.0. */
#include <stdlib.h>
#include <crmm/plugin.h>

/* Each variant leaves some of the pieces below unused. */
#define BAD_MAYBE_UNUSED __attribute__((unused))

#ifndef BAD_PLUGIN_NAME
#error "define BAD_PLUGIN_NAME to the plugin's file name, e.g. -DBAD_PLUGIN_NAME='\"badmajor\"'"
#endif

/* ---- a minimal resource: malloc'd host memory ---------------------------------------------- */

typedef struct bad_resource {
    crmm_resource base;
    uint64_t size; /* the `size` parameter, resolved */
} bad_resource;

BAD_MAYBE_UNUSED static crmm_status bad_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    (void)self;
    (void)stream;
    void *p = aligned_alloc(CRMM_ALLOCATION_ALIGNMENT, (bytes + CRMM_ALLOCATION_ALIGNMENT - 1) & ~(size_t)(CRMM_ALLOCATION_ALIGNMENT - 1));
    if (!p)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: aligned_alloc failed", BAD_PLUGIN_NAME);
    *ptr = p;
    return CRMM_OK;
}

BAD_MAYBE_UNUSED static crmm_status bad_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    (void)self;
    (void)bytes;
    (void)stream;
    free(ptr);
    return CRMM_OK;
}

BAD_MAYBE_UNUSED static crmm_status bad_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    if (what != CRMM_QUERY_MAXIMUM_SIZE)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "%s answers only CRMM_QUERY_MAXIMUM_SIZE", BAD_PLUGIN_NAME);
    *out = ((bad_resource *)self)->size;
    return CRMM_OK;
}

BAD_MAYBE_UNUSED static void bad_destroy(crmm_resource *self) { free(self); }

BAD_MAYBE_UNUSED static const crmm_resource_ops bad_ops = {
#ifndef BAD_RESOURCE /* BAD_RESOURCE: a resource without deallocate */
    .deallocate = bad_deallocate,
#endif
    .allocate = bad_allocate,
    .query = bad_query,
    .destroy = bad_destroy,
};

BAD_MAYBE_UNUSED static crmm_status bad_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
#if defined(BAD_CREATE_FAILS)
    (void)params;
    (void)upstream;
    (void)out;
    return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "%s: this plugin always refuses to create a resource", BAD_PLUGIN_NAME);
#elif defined(BAD_CREATE_NO_MESSAGE)
    (void)params;
    (void)upstream;
    (void)out;
    return CRMM_ERROR_BAD_ALLOC; /* and no crmm_set_error: the core must supply a message */
#else
    uint64_t size;
    crmm_status st = crmm_params_get_size(params, "size", &size); /* "N%" needs a device */
    if (st != CRMM_OK)
        return st;
    bad_resource *r = calloc(1, sizeof *r);
    if (!r)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: malloc failed", BAD_PLUGIN_NAME);
    r->size = size;
    crmm_resource_init(&r->base, &bad_ops, BAD_PLUGIN_NAME, CRMM_RESOURCE_HOST_ACCESSIBLE, -1, upstream);
    *out = &r->base;
    return CRMM_OK;
#endif
}

/* ---- the parameter table ------------------------------------------------------------------- */

/* The one good row; BAD_FIELD_* give it a range or place it breaks. */
#if defined(BAD_FIELD_RANGE)
#define BAD_SIZE_ROW {.key = "size", .type = CRMM_PARAM_SIZE, .default_value = "1MiB", \
                      .help = "reported as CRMM_QUERY_MAXIMUM_SIZE", .min = 2u << 20} /* the default is below it */
#elif defined(BAD_FIELD_UNKNOWN)
#define BAD_SIZE_ROW {.key = "size", .type = CRMM_PARAM_SIZE, .default_value = "1MiB", \
                      .help = "reported as CRMM_QUERY_MAXIMUM_SIZE", .offset = 64} /* past the 8-byte struct */
#else
#define BAD_SIZE_ROW {.key = "size", .type = CRMM_PARAM_SIZE, .default_value = "1MiB", \
                      .help = "reported as CRMM_QUERY_MAXIMUM_SIZE", .min = 1}
#endif

BAD_MAYBE_UNUSED static const crmm_param bad_params[] = {
    BAD_SIZE_ROW,
#if defined(BAD_PARAM_DUPLICATE)
    {.key = "size", .type = CRMM_PARAM_UINT, .default_value = "1", .help = "the same key again"},
#elif defined(BAD_PARAM_DEFAULT)
    {.key = "count", .type = CRMM_PARAM_UINT, .default_value = "many", .help = "a default that is not a uint"},
#elif defined(BAD_PARAM_ENUM)
    {.key = "mode", .type = CRMM_PARAM_ENUM, .help = "an enum without choices"},
#endif
    {NULL},
};

/* ---- the descriptor ------------------------------------------------------------------------ */

BAD_MAYBE_UNUSED static const crmm_plugin bad_plugin = {
#if defined(BAD_MAJOR)
    .abi_major = CRMM_PLUGIN_ABI_MAJOR + 1, .abi_minor = 0, .struct_size = (uint32_t)sizeof(crmm_plugin),
#elif defined(BAD_NEW_MINOR)
    .abi_major = CRMM_PLUGIN_ABI_MAJOR, .abi_minor = CRMM_PLUGIN_ABI_MINOR + 1,
    .struct_size = (uint32_t)sizeof(crmm_plugin),
#elif defined(BAD_OLD_MINOR) /* a plugin built for ABI 1.1, the last before one-row parameters */
    .abi_major = 1, .abi_minor = 1, .struct_size = (uint32_t)sizeof(crmm_plugin),
#elif defined(BAD_SHORT_STRUCT)
    .abi_major = CRMM_PLUGIN_ABI_MAJOR, .abi_minor = CRMM_PLUGIN_ABI_MINOR, .struct_size = 24,
#else
    CRMM_PLUGIN_HEADER,
#endif
#if defined(BAD_MISNAMED)
    .name = "some_other_name",
#elif defined(BAD_NULL_NAME)
    .name = NULL,
#else
    .name = BAD_PLUGIN_NAME,
#endif
    .version = "0.0.1",
    .description = "a test-only plugin that breaks the plugin ABI (tests/plugins/bad_plugin.c)",
#if defined(BAD_UPSTREAM_RULE)
    .upstream = (crmm_upstream_rule)7,
#else
    .upstream = CRMM_UPSTREAM_OPTIONAL,
#endif
    .params = bad_params,
#if defined(BAD_FIELD_UNKNOWN) || defined(BAD_FIELD_RANGE)
    .config_size = sizeof(uint64_t),
#endif
#if !defined(BAD_NO_CREATE)
    .create = bad_create,
#endif
};

#if defined(BAD_NO_ENTRY)
/* Exports something, but not crmm_plugin_entry. */
const crmm_plugin *crmm_plugin_entry_misspelled(void);
__attribute__((visibility("default"))) const crmm_plugin *crmm_plugin_entry_misspelled(void) { return &bad_plugin; }
#elif defined(BAD_NULL_ENTRY)
const crmm_plugin *crmm_plugin_entry(void);
__attribute__((visibility("default"))) const crmm_plugin *crmm_plugin_entry(void) { return NULL; }
#else
CRMM_PLUGIN_DEFINE(bad_plugin)
#endif
