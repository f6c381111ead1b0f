/* paramtest_plugin.c — a test-only plugin that records the parameters it is created with.
 *
 * Its table has one parameter of every crmm_param_type (see paramtest_plugin.h); create reads
 * each through the typed getters and stores value, status and "given?" in the resource, which the
 * PARAMTEST_CONTROL_VALUES control op copies out. It allocates from its upstream when it has one,
 * else from aligned_alloc (so it is a host plugin that needs no GPU). */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/alloc_counters.h>
#include <crmm/plugin.h>
#include "test_plugin.h"
#include "paramtest_plugin.h"

typedef struct paramtest_resource {
    crmm_resource base;
    crmm_alloc_counters counters;
    paramtest_values values;
} paramtest_resource;

static crmm_status paramtest_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    paramtest_resource *r = (paramtest_resource *)self;
    crmm_status st;
    if (self->upstream) {
        st = crmm_resource_allocate(self->upstream, bytes, stream, ptr);
    } else {
        *ptr = test_plugin_host_block(bytes);
        st = *ptr ? CRMM_OK : crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "paramtest: cannot allocate %zu bytes", bytes);
    }
    if (st == CRMM_OK)
        crmm_counters_add(&r->counters, bytes, CRMM_COUNT_SHARED);
    return st;
}

static crmm_status paramtest_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    paramtest_resource *r = (paramtest_resource *)self;
    crmm_counters_sub(&r->counters, bytes, CRMM_COUNT_SHARED);
    if (self->upstream)
        return crmm_resource_deallocate(self->upstream, ptr, bytes, stream);
    free(ptr);
    return CRMM_OK;
}

static crmm_status paramtest_control(crmm_resource *self, int op, void *arg)
{
    paramtest_resource *r = (paramtest_resource *)self;
    if (op != PARAMTEST_CONTROL_VALUES)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "paramtest: no control op %#x", (unsigned)op);
    if (!arg)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "paramtest: control arg is NULL");
    memcpy(arg, &r->values, sizeof r->values);
    return CRMM_OK;
}

TEST_PLUGIN_COUNTED_OPS(paramtest, paramtest_resource, .control = paramtest_control);

static crmm_status paramtest_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    TEST_PLUGIN_NEW(paramtest_resource, r, "paramtest");
    paramtest_values *v = &r->values;
    const char *text = NULL;
    v->st_count = crmm_params_get_uint(params, "count", &v->count);
    v->st_limit = crmm_params_get_size(params, "limit", &v->limit);
    char limit_error[1024] = ""; /* a percentage without a device fails here */
    if (v->st_limit != CRMM_OK && v->st_limit != CRMM_ERROR_NOT_FOUND)
        snprintf(limit_error, sizeof limit_error, "%s", crmm_last_error());
    v->st_enabled = crmm_params_get_bool(params, "enabled", &v->enabled);
    if ((v->st_label = crmm_params_get_string(params, "label", &text)) == CRMM_OK)
        snprintf(v->label, sizeof v->label, "%s", text);
    if ((v->st_mode = crmm_params_get_string(params, "mode", &text)) == CRMM_OK)
        snprintf(v->mode, sizeof v->mode, "%s", text);
    v->st_ratio = crmm_params_get_double(params, "ratio", &v->ratio);
    v->st_id = crmm_params_get_uint(params, "id", &v->id);
    v->set_count = crmm_params_is_set(params, "count");
    v->set_limit = crmm_params_is_set(params, "limit");
    v->set_enabled = crmm_params_is_set(params, "enabled");
    v->set_label = crmm_params_is_set(params, "label");
    v->set_mode = crmm_params_is_set(params, "mode");
    v->set_ratio = crmm_params_is_set(params, "ratio");
    v->set_id = crmm_params_is_set(params, "id");
    v->st_mode_index = crmm_params_get_enum(params, "mode", &v->mode_index);
    int junk_index;
    v->st_label_index = crmm_params_get_enum(params, "label", &junk_index);
    v->given = crmm_params_given(params);
    uint64_t junk;
    v->st_wrong_type = crmm_params_get_uint(params, "ratio", &junk);
    v->st_unknown_key = crmm_params_get_uint(params, "nope", &junk);
    snprintf(v->name, sizeof v->name, "%s", crmm_params_resource_name(params));
    v->device = crmm_params_device(params);
    if (limit_error[0]) {
        crmm_status st = v->st_limit;
        free(r);
        crmm_set_error(st, "%s", limit_error); /* keeps its own category */
        return crmm_error_add_context("paramtest");
    }
    crmm_clear_error(); /* the probing getters above failed on purpose */
    crmm_resource_init(&r->base, &paramtest_ops, "paramtest",
                       upstream ? upstream->flags : CRMM_RESOURCE_HOST_ACCESSIBLE, upstream ? upstream->device : -1,
                       upstream);
    *out = &r->base;
    return CRMM_OK;
}

static const crmm_param paramtest_params[] = {
    {.key = "count", .type = CRMM_PARAM_UINT, .default_value = "7",
     .help = "a count"},
    {.key = "limit", .type = CRMM_PARAM_SIZE, .default_value = "1MiB",
     .help = "a size up to 1TiB (may be N% of the device's memory)", .max = (uint64_t)1 << 40},
    {.key = "enabled", .type = CRMM_PARAM_BOOL, .default_value = "false",
     .help = "a switch"},
    {.key = "label", .type = CRMM_PARAM_STRING,
     .help = "a free text with no default"},
    {.key = "mode", .type = CRMM_PARAM_ENUM, .default_value = "safe",
     .help = "one of three modes",
     .choices = "fast|safe|debug"},
    {.key = "ratio", .type = CRMM_PARAM_DOUBLE, .default_value = "0.5",
     .help = "a number"},
    {.key = "id", .type = CRMM_PARAM_UINT,
     .help = "must be given",
     .flags = CRMM_PARAM_REQUIRED},
    {NULL},
};

TEST_PLUGIN_DEFINE(paramtest, "test-only: records the typed parameters it was created with", CRMM_UPSTREAM_OPTIONAL)
