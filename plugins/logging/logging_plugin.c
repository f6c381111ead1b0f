/* logging_plugin.c — the `logging` plugin: an adaptor that writes every allocate, failed
 * allocate and free as a CSV line RMM's tools read (format in crmm/logging.h).
 *
 * The resource is its upstream plus a sink (logging_sink.c). The calling thread records the
 * call's fields (logging_record_take, logging_line.h) and appends the record under the sink's
 * lock; the line is formatted later, off the caller's path. An allocate is appended after the
 * upstream returned, a free before the upstream sees the free, so the file's order never shows
 * a pointer handed out again before its free — what `crmm replay` needs. Control ops: flush
 * and the file's name (crmm/logging.h). */
#include "build_config.h"
#include <stdlib.h>
#include <crmm/logging.h>
#include <crmm/plugin.h>
#include "../common/adaptor.h"
#include "../common/plugin_descriptor.h"
#include "logging_line.h"
#include "logging_sink.h"

typedef struct logging_resource {
    crmm_resource base;
    logging_sink *sink;
} logging_resource;

static crmm_status logging_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    logging_resource *r = (logging_resource *)self;
    crmm_status st = crmm_resource_allocate(self->upstream, bytes, stream, ptr);
    logging_record rec;
    logging_record_take(&rec, st == CRMM_OK ? LOGGING_ALLOCATE : LOGGING_ALLOCATE_FAILURE, st == CRMM_OK ? *ptr : NULL,
                        bytes, (uintptr_t)stream);
    logging_sink_append(r->sink, &rec);
    return st;
}

static crmm_status logging_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    logging_resource *r = (logging_resource *)self;
    logging_record rec;
    logging_record_take(&rec, LOGGING_FREE, ptr, bytes, (uintptr_t)stream);
    logging_sink_append(r->sink, &rec);
    return crmm_resource_deallocate(self->upstream, ptr, bytes, stream);
}

static crmm_status logging_trim(crmm_resource *self)
{
    logging_resource *r = (logging_resource *)self;
    /* in a forked child the parent's lines are not this process's to write: nothing to flush */
    crmm_status st = logging_sink_writes_here(r->sink) ? logging_sink_flush(r->sink) : CRMM_OK;
    crmm_status up = crmm_resource_trim(self->upstream);
    return st != CRMM_OK ? st : up;
}

static crmm_status logging_control(crmm_resource *self, int op, void *arg)
{
    logging_resource *r = (logging_resource *)self;
    switch (op) {
    case CRMM_LOGGING_OP_FLUSH:
        return logging_sink_flush(r->sink);
    case CRMM_LOGGING_OP_GET_FILE:
        if (!arg)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "logging: GET_FILE needs a const char ** argument");
        *(const char **)arg = logging_sink_path(r->sink);
        return CRMM_OK;
    default:
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "logging resource has no control op %d", op);
    }
}

static void logging_destroy(crmm_resource *self)
{
    logging_resource *r = (logging_resource *)self;
    logging_sink_close(r->sink);
    free(r);
}

static const crmm_resource_ops logging_ops = {
    .allocate = logging_allocate, .deallocate = logging_deallocate, .trim = logging_trim,
    .destroy = logging_destroy, .control = logging_control,
};

/* The parameters, as crmm_params_parse fills them from logging_params (file stays NULL when not given). */
typedef struct logging_config {
    const char *file;
    bool auto_flush;
} logging_config;

/* The log file's name template: `file`, else $CRMM_LOG_FILE as crmm reads its variables (not in
 * a privileged process). NULL with CRMM_ERROR_CONFIG set when neither names one. */
static const char *log_file_pattern(const char *file)
{
    const char *pattern = file && *file ? file : crmm_getenv("CRMM_LOG_FILE");
    if (!pattern || !*pattern)
        crmm_set_error(CRMM_ERROR_CONFIG, "logging: no log file: set the 'file' parameter or $CRMM_LOG_FILE");
    return pattern && *pattern ? pattern : NULL;
}

static crmm_status logging_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    logging_config cfg = {0};
    crmm_status st = crmm_params_parse(params, &cfg);
    if (st != CRMM_OK)
        return st;
    const char *pattern = log_file_pattern(cfg.file);
    if (!pattern)
        return CRMM_ERROR_CONFIG;
    int device = crmm_params_device(params) >= 0 ? crmm_params_device(params) : upstream->device;
    char path[4096];
    st = crmm_expand_file_name(pattern, device, path, sizeof path);
    if (st != CRMM_OK)
        return crmm_error_add_context("logging");
    logging_resource *r = adaptor_alloc(sizeof *r, "logging");
    if (!r)
        return CRMM_ERROR_OUT_OF_MEMORY;
    if ((st = logging_sink_open(path, CRMM_LOGGING_CSV_HEADER "\n", cfg.auto_flush, &r->sink)) != CRMM_OK) {
        free(r);
        return st;
    }
    return adaptor_publish(&r->base, &logging_ops, "logging", upstream, out);
}

/* crmm_plugin.validate: what the build would refuse, with the build's message, blaming `file`:
 * no file and no $CRMM_LOG_FILE (as crmm reads it), or a file name template that cannot
 * be expanded (an unknown '%' escape, a name too long). */
static crmm_status logging_validate(const crmm_params *params, bool host_memory, const char **key)
{
    (void)host_memory;
    const char *file = NULL;
    if (crmm_params_get_string(params, "file", &file) != CRMM_OK)
        file = NULL;
    const char *pattern = log_file_pattern(file);
    if (!pattern) {
        *key = "file";
        return CRMM_ERROR_CONFIG;
    }
    char path[4096];
    if (crmm_expand_file_name(pattern, 0, path, sizeof path) != CRMM_OK) {
        *key = "file";
        return crmm_error_add_context("logging");
    }
    return CRMM_OK;
}

static const crmm_param logging_params[] = {
    {.key = "file", .type = CRMM_PARAM_STRING,
     .help = "CSV log file (%d = device ordinal, %p = process id); default $CRMM_LOG_FILE",
     .offset = offsetof(logging_config, file)},
    {.key = "auto_flush", .type = CRMM_PARAM_BOOL, .default_value = "false",
     .help = "write every line at once instead of buffering",
     .offset = offsetof(logging_config, auto_flush)},
    {NULL},
};

PLUGIN_DESCRIPTOR(.name = "logging", .upstream = CRMM_UPSTREAM_REQUIRED, .params = logging_params,
                  .config_size = sizeof(logging_config), .validate = logging_validate,
                  .create = logging_create,
                  .description = "writes every allocate/free as a CSV line in RMM's log format (crmm replay reads it); a bad free is logged, then refused where upstream refuses it")
