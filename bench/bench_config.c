/* bench_config.c — loads the bench's config, skipping resources whose plugin does not load.
 *
 * The strict loader goes first; only when it refuses the file does the skipping loader
 * (crmm_config_load_file_skipping) try, and when that fails too the strict loader's message is
 * the one reported. The handle keeps the path and which loader worked, so that every instance
 * (and every timed load of `crmm bench --overhead`) loads the file the same way again. */
#include "build_config.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_config.h"

struct bench_config {
    char *path;          /* the file, or NULL for the built-in default */
    bool skipping;       /* loaded with crmm_config_load_file_skipping */
    crmm_config *cfg;    /* the loaded config, for listing */
};

static crmm_status load_lenient(bench_config *bc)
{
    crmm_status st = crmm_config_load_file(bc->path, &bc->cfg);
    if (st != CRMM_ERROR_CONFIG)
        return st;
    char strict_error[1024];
    snprintf(strict_error, sizeof strict_error, "%s", crmm_last_error());
    if (crmm_config_load_file_skipping(bc->path, &bc->cfg) == CRMM_OK) {
        bc->skipping = true;
        return CRMM_OK;
    }
    return crmm_set_error(CRMM_ERROR_CONFIG, "%s", strict_error);
}

crmm_status bench_config_open(const char *path, bench_config **out)
{
    if (!out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "bench_config_open: out is NULL");
    char buf[PATH_MAX];
    if (!path)
        path = crmm_config_default_file(buf, sizeof buf);
    bench_config *bc = calloc(1, sizeof *bc);
    if (!bc || (path && !(bc->path = strdup(path)))) {
        free(bc);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "bench: malloc failed");
    }
    crmm_status st = bc->path ? load_lenient(bc) : crmm_config_load_default(&bc->cfg);
    if (st != CRMM_OK) {
        bench_config_close(bc);
        return st;
    }
    *out = bc;
    return CRMM_OK;
}

void bench_config_close(bench_config *bc)
{
    if (!bc)
        return;
    crmm_config_free(bc->cfg);
    free(bc->path);
    free(bc);
}

/* ---- accessors ------------------------------------------------------------------------------ */

const char *bench_config_origin(const bench_config *bc) { return crmm_config_origin(bc->cfg); }
size_t bench_config_resource_count(const bench_config *bc) { return crmm_config_resource_count(bc->cfg); }
const char *bench_config_resource_name(const bench_config *bc, size_t i) { return crmm_config_resource_name(bc->cfg, i); }
const char *bench_config_resource_plugin(const bench_config *bc, size_t i) { return crmm_config_resource_plugin(bc->cfg, i); }
bool bench_config_resource_is_host(const bench_config *bc, size_t i) { return crmm_config_resource_is_host(bc->cfg, i); }
size_t bench_config_skipped_count(const bench_config *bc) { return crmm_config_skipped_count(bc->cfg); }
const char *bench_config_skipped_name(const bench_config *bc, size_t i) { return crmm_config_skipped_name(bc->cfg, i); }
const char *bench_config_skipped_reason(const bench_config *bc, size_t i) { return crmm_config_skipped_reason(bc->cfg, i); }

long bench_config_find(const bench_config *bc, const char *name) { return crmm_config_find_resource(bc->cfg, name); }

void bench_config_source(const bench_config *bc, const char **path, bool *skipping)
{
    *path = bc->path;
    *skipping = bc->skipping;
}

crmm_status bench_config_load_source(const char *path, bool skipping, crmm_config **out)
{
    return !path    ? crmm_config_load_default(out)
         : skipping ? crmm_config_load_file_skipping(path, out)
                    : crmm_config_load_file(path, out);
}

crmm_status bench_config_create(const bench_config *bc, const char *name, int device, crmm_resource **out)
{
    crmm_config *fresh;
    crmm_status st = bench_config_load_source(bc->path, bc->skipping, &fresh);
    if (st != CRMM_OK)
        return st;
    st = crmm_config_create_resource(fresh, name, device, out);
    crmm_config_free(fresh);
    return st;
}
