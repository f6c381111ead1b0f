/* config.c — the public config API (crmm/config.h): load a config from a file, a string or the
 * built-in default through the three stages (config_parse.c, config_graph.c,
 * config_instances.c), answer questions about it, and build its resources. */
#include "build_config.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <crmm/cuda_support.h>
#include "config_internal.h"
#include "file_trust.h"
#include "internal.h"

/* The largest config file read: far more than any real config, small enough to hold at once. */
#define CONFIG_MAX_FILE_BYTES (16u << 20)

struct crmm_config {
    char origin[PATH_MAX];
    config_graph graph;
    config_instances instances;
};

static const char builtin_default[] = "[crmm]\ndefault = default\n\n[resource.default]\nplugin = cuda\n";

static crmm_status load(const char *text, const char *origin, const char *base_dir, bool skip_unloadable,
                        crmm_config **out)
{
    crmm_config *c = calloc(1, sizeof *c);
    if (!c)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "config: malloc failed");
    snprintf(c->origin, sizeof c->origin, "%s", origin);
    config_error err = {0};
    crmm_status st = config_parse(text, &c->graph.text, &err);
    if (st == CRMM_OK && !err.line)
        config_graph_build(&c->graph, base_dir, skip_unloadable, &err);
    if (st == CRMM_OK && err.line)
        st = crmm_set_error(CRMM_ERROR_CONFIG, "%s:%d: %s", c->origin, err.line, err.message);
    else if (st != CRMM_OK)
        crmm_error_add_context("%s", c->origin);
    if (st != CRMM_OK) {
        config_graph_free(&c->graph);
        free(c);
        return st;
    }
    config_instances_init(&c->instances, c->graph.text.nres);
    *out = c;
    crmm_clear_error(); /* error.h: a load that succeeds clears the thread's error */
    return CRMM_OK;
}

crmm_status crmm_config_load_string(const char *text, const char *origin, crmm_config **out)
{
    if (!text || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "config_load_string: %s is NULL", text ? "out" : "text");
    return load(text, origin ? origin : "<string>", NULL, false, out);
}

crmm_status crmm_config_load_default(crmm_config **out)
{
    if (!out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "config_load_default: out is NULL");
    return load(builtin_default, "<built-in>", NULL, false, out);
}

/* The whole file, NUL-terminated, into *text (malloc'd); refused when over
 * CONFIG_MAX_FILE_BYTES (reading stops one byte past the cap). */
static crmm_status read_file(const char *path, char **text)
{
    /* opened without blocking, so that a FIFO with no writer is refused below instead of hanging */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        return crmm_set_error(CRMM_ERROR_IO, "cannot open config %s: %s", path, strerror(err));
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        int err = errno;
        fclose(f);
        return crmm_set_error(CRMM_ERROR_IO, "cannot read config %s: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        fclose(f);
        return crmm_set_error(CRMM_ERROR_IO, "cannot read config %s: %s", path,
                              S_ISDIR(st.st_mode) ? "it is a directory" : "not a regular file");
    }
    /* checked on the file opened, as plugins are: a config chooses code and the files written */
    crmm_status trusted = file_trust_check(path, fileno(f), &st, CRMM_ERROR_CONFIG, "config",
                                           "could choose the plugins it loads and the files it writes");
    if (trusted != CRMM_OK) {
        fclose(f);
        return trusted;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && len <= CONFIG_MAX_FILE_BYTES && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap && len <= CONFIG_MAX_FILE_BYTES) {
            size_t bigger = cap * 2 < CONFIG_MAX_FILE_BYTES + 2 ? cap * 2 : CONFIG_MAX_FILE_BYTES + 2;
            char *b = realloc(buf, bigger);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap = bigger;
        }
    }
    if (buf && len > CONFIG_MAX_FILE_BYTES) {
        fclose(f);
        free(buf);
        return crmm_set_error(CRMM_ERROR_CONFIG, "%s: larger than %u MiB, the most a config file may be", path,
                              CONFIG_MAX_FILE_BYTES >> 20);
    }
    int read_errno = ferror(f) ? errno : 0;
    bool read_error = ferror(f);
    fclose(f);
    if (!buf)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: out of memory while reading it", path);
    if (read_error) {
        free(buf);
        return crmm_set_error(CRMM_ERROR_IO, "cannot read config %s: %s", path,
                              read_errno ? strerror(read_errno) : "read error");
    }
    buf[len] = '\0';
    if (memchr(buf, '\0', len)) {
        free(buf);
        return crmm_set_error(CRMM_ERROR_CONFIG, "%s: not a text file (contains NUL bytes)", path);
    }
    *text = buf;
    return CRMM_OK;
}

static crmm_status load_file(const char *path, bool skip_unloadable, crmm_config **out)
{
    if (!path || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "config_load_file: %s is NULL", path ? "out" : "path");
    char *text = NULL;
    crmm_status st = read_file(path, &text);
    if (st != CRMM_OK)
        return st;
    char dir[PATH_MAX] = "", real[PATH_MAX];
    if (realpath(path, real)) {
        snprintf(dir, sizeof dir, "%s", real);
        char *slash = strrchr(dir, '/');
        if (slash)
            *(slash == dir ? slash + 1 : slash) = '\0';
    }
    st = load(text, path, dir, skip_unloadable, out);
    free(text);
    return st;
}

crmm_status crmm_config_load_file(const char *path, crmm_config **out)
{
    return load_file(path, false, out);
}

crmm_status crmm_config_load_file_skipping(const char *path, crmm_config **out)
{
    return load_file(path, true, out);
}

void crmm_config_fork_child(crmm_config *c) { pthread_mutex_init(&c->instances.lock, NULL); }

void crmm_config_free(crmm_config *c)
{
    if (!c)
        return;
    /* the resources' destroys may record errors; the thread's error stays the caller's */
    crmm_error_hold_begin();
    config_instances_fini(&c->instances);
    config_graph_free(&c->graph);
    free(c);
    crmm_error_hold_end();
}

/* ---- accessors ------------------------------------------------------------------------------ */

static const config_resource_section *section(const crmm_config *c, size_t i)
{
    return c && i < c->graph.text.nres ? &c->graph.text.res[i] : NULL;
}

const char *crmm_config_origin(const crmm_config *c) { return c ? c->origin : ""; }
size_t crmm_config_resource_count(const crmm_config *c) { return c ? c->graph.text.nres : 0; }
const char *crmm_config_resource_name(const crmm_config *c, size_t i) { return section(c, i) ? section(c, i)->name : NULL; }
const char *crmm_config_resource_plugin(const crmm_config *c, size_t i)
{
    return section(c, i) ? section(c, i)->plugin.text : NULL;
}
const char *crmm_config_resource_upstream(const crmm_config *c, size_t i)
{
    return section(c, i) ? section(c, i)->upstream.text : NULL;
}
size_t crmm_config_resource_param_count(const crmm_config *c, size_t i) { return section(c, i) ? section(c, i)->nparams : 0; }
const char *crmm_config_resource_param_key(const crmm_config *c, size_t i, size_t j)
{
    return section(c, i) && j < section(c, i)->nparams ? section(c, i)->params[j].key : NULL;
}
const char *crmm_config_resource_param_value(const crmm_config *c, size_t i, size_t j)
{
    return section(c, i) && j < section(c, i)->nparams ? section(c, i)->params[j].value : NULL;
}
long crmm_config_find_resource(const crmm_config *c, const char *name) { return c ? config_graph_find(&c->graph, name) : -1; }
bool crmm_config_resource_is_host(const crmm_config *c, size_t i) { return c && config_graph_is_host(&c->graph, i); }
const char *crmm_config_plugin_path(const crmm_config *c) { return c ? c->graph.plugin_dirs : NULL; }
const char *crmm_config_log_level(const crmm_config *c) { return c ? c->graph.text.settings[CRMM_SETTING_LOG_LEVEL].text : NULL; }
size_t crmm_config_skipped_count(const crmm_config *c) { return c ? c->graph.nskipped : 0; }
const char *crmm_config_skipped_name(const crmm_config *c, size_t i)
{
    return c && i < c->graph.nskipped ? c->graph.skipped[i].name : NULL;
}
const char *crmm_config_skipped_reason(const crmm_config *c, size_t i)
{
    return c && i < c->graph.nskipped ? c->graph.skipped[i].reason : NULL;
}

const char *crmm_config_default_resource(const crmm_config *c, int device)
{
    if (!c)
        return NULL;
    const config_text *t = &c->graph.text;
    for (size_t i = 0; i < t->ndev; i++)
        if (t->dev[i].device == device)
            return t->dev[i].resource.text;
    if (t->settings[CRMM_SETTING_DEFAULT].text)
        return t->settings[CRMM_SETTING_DEFAULT].text;
    return t->nres ? t->res[0].name : NULL;
}

/* ---- building ------------------------------------------------------------------------------- */

crmm_status crmm_config_create_resource(crmm_config *c, const char *name, int device, crmm_resource **out)
{
    if (!c || !name || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "config_create_resource: NULL argument");
    if (device < -1 || device >= CRMM_MAX_DEVICES)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "config_create_resource: device %d is not -1 (current) or 0..%d",
                              device, CRMM_MAX_DEVICES - 1);
    long i = crmm_config_find_resource(c, name);
    if (i < 0)
        return crmm_set_error(CRMM_ERROR_NOT_FOUND, "%s: no [resource.%s]", c->origin, name);
    bool host = config_graph_is_host(&c->graph, (size_t)i);
    crmm_status st;
    if (host) {
        device = -1;
    } else if (device < 0 && (st = crmm_cuda_current_device(&device)) != CRMM_OK) {
        return crmm_error_add_context("%s: resource.%s needs a CUDA device", c->origin, name);
    } else if (device >= CRMM_MAX_DEVICES) {
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "current device %d: crmm handles devices 0..%d", device,
                              CRMM_MAX_DEVICES - 1);
    }
    crmm_device_guard g = {-1, 0};
    if (!host && (st = crmm_cuda_device_enter(device, &g)) != CRMM_OK)
        return st;
    st = config_instances_get(&c->instances, &c->graph, c->origin, (size_t)i, device, out);
    crmm_cuda_device_restore(&g);
    return st;
}
