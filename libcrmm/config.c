/* config.c — the INI config: parse (inih), validate, and instantiate the resource graph.
 *
 * Parsing collects sections and keys with their line numbers. inih reads the text through our
 * reader callback, which counts lines, strips indentation (so that it never becomes inih's
 * multi-line continuation) and a UTF-8 byte-order mark, and recognises section headers itself:
 * inih reports no section that has no keys, cuts names at 49 characters and gives no line
 * numbers, so the reader's section state is the one used. Validation then loads each plugin,
 * checks each parameter against the plugin's table, resolves upstream names and rejects cycles —
 * all before any CUDA call, the error on the lowest line reported as "FILE:LINE: message". The
 * skipping load first moves each resource whose plugin does not load (and those stacked on one)
 * out of the table into a list of what was left out, and validates the rest as usual.
 * Instantiation is lazy and per device: the first request for a resource on
 * a device builds its chain bottom-up and caches every instance, so resources that share an
 * upstream share one instance on that device. */
#include "config.h"
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ini.h>
#include <crmm/cuda_support.h>
#include <crmm/log.h>
#include "internal.h"

#ifndef CRMM_SYSCONFDIR
#define CRMM_SYSCONFDIR "/usr/local/etc"
#endif
#define MAX_CACHED_DEVICES 128

typedef struct cfg_param { char *key, *value; int line; } cfg_param;

typedef struct cfg_resource {
    char *name;
    int line;                 /* the [resource.NAME] line */
    char *plugin_name;
    int plugin_line;
    char *upstream;
    int upstream_line;
    cfg_param *params;
    size_t nparams;
    const crmm_plugin *plugin;
    long upstream_index;      /* -1: none */
} cfg_resource;

typedef struct cfg_device { int device; char *resource; int line, resource_line; } cfg_device;

/* A resource the skipping load left out, and why; kept in file order (by line). */
typedef struct cfg_skipped { char *name, *reason; int line; } cfg_skipped;

struct crmm_config {
    char origin[PATH_MAX];
    char base_dir[PATH_MAX];  /* for relative plugin_path entries; "" for strings */
    char *default_name;
    int default_line;
    char *plugin_path;        /* as written */
    int plugin_path_line;
    char *plugin_dirs;        /* as used: relative entries made absolute against base_dir */
    int crmm_line;            /* the [crmm] line; 0 if none */
    char *log_level;
    int log_level_line;
    cfg_resource *res;
    size_t nres;
    cfg_device *dev;
    size_t ndev;
    bool skip_unloadable;     /* crmm_config_load_file_skipping */
    cfg_skipped *skipped;
    size_t nskipped;
    /* parse state */
    int line;
    int err_line;
    char err[1024];
    char section[256];
    int section_kind;         /* 0 none, 1 crmm, 2 resource, 3 device */
    long cur;                 /* index into res or dev */
    /* instances: inst[device + 1][resource]; row 0 is host-only chains */
    pthread_mutex_t lock;
    crmm_resource **inst[MAX_CACHED_DEVICES + 1];
};

static const char builtin_default[] = "[crmm]\ndefault = default\n\n[resource.default]\nplugin = cuda\n";

/* ---- parsing -------------------------------------------------------------------------------- */

static void parse_error(crmm_config *c, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void parse_error(crmm_config *c, int line, const char *fmt, ...)
{
    if (c->err_line && line >= c->err_line)
        return; /* keep the error on the lowest line: the first a reader meets */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    c->err_line = line;
}

struct line_reader { const char *p; crmm_config *cfg; };

static int begin_section(crmm_config *c, const char *section);

/* A line that starts with '[': the section header, by inih's rule (the name ends at ']' or at an
 * inline ';' comment, i.e. a ';' after a blank); after ']' only blanks or a comment may follow. */
static void section_line(crmm_config *c, const char *text)
{
    const char *p = text + 1;
    while (*p && *p != ']' && !(*p == ';' && isspace((unsigned char)p[-1])))
        p++;
    c->section_kind = -1; /* keys below a broken header are not checked again */
    if (*p != ']') {
        parse_error(c, c->line, "section header has no closing ']'");
        return;
    }
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(p - text - 1), text + 1);
    const char *q = p + 1;
    while (isspace((unsigned char)*q))
        q++;
    if (*q && *q != ';' && *q != '#') {
        size_t n = strlen(q);
        while (n && isspace((unsigned char)q[n - 1]))
            n--;
        parse_error(c, c->line, "unexpected text after [%s]: '%.*s' (one section header or key = value per line)", name,
                    (int)n, q);
        return;
    }
    begin_section(c, name);
}

/* inih's reader: one line per call, counted, without a byte-order mark or indentation. */
static char *read_line(char *str, int num, void *stream)
{
    struct line_reader *r = stream;
    crmm_config *c = r->cfg;
    if (!*r->p)
        return NULL;
    c->line++;
    const char *s = r->p, *eol = strchr(s, '\n');
    size_t len = eol ? (size_t)(eol - s) : strlen(s);
    r->p = eol ? eol + 1 : s + len;
    if (c->line == 1 && len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) {
        s += 3;
        len -= 3;
    }
    while (len && (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\v' || *s == '\f')) {
        s++;
        len--;
    }
    if (len >= (size_t)num - 1) {
        parse_error(c, c->line, "line is longer than %d characters", num - 2);
        len = 0;
    }
    memcpy(str, s, len);
    str[len] = '\n';
    str[len + 1] = '\0';
    if (str[0] == '[')
        section_line(c, str);
    return str;
}

static int set_str(crmm_config *c, char **dst, int *dst_line, const char *key, const char *value)
{
    if (*dst) {
        parse_error(c, c->line, "'%s' given twice in [%s] (first at line %d)", key, c->section, *dst_line);
        return 0;
    }
    *dst = strdup(value);
    *dst_line = c->line;
    if (!*dst)
        parse_error(c, c->line, "out of memory");
    return *dst != NULL;
}

static bool name_ok(const char *n)
{
    if (!*n || strlen(n) >= 48)
        return false;
    for (; *n; n++)
        if (!(isalnum((unsigned char)*n) || *n == '_' || *n == '-'))
            return false;
    return true;
}

static int begin_section(crmm_config *c, const char *section)
{
    snprintf(c->section, sizeof c->section, "%s", section);
    c->section_kind = -1;
    if (strcmp(section, "crmm") == 0) {
        if (c->crmm_line) {
            parse_error(c, c->line, "[crmm] defined twice (first at line %d)", c->crmm_line);
            return 0;
        }
        c->crmm_line = c->line;
        c->section_kind = 1;
        return 1;
    }
    if (strncmp(section, "resource.", 9) == 0) {
        const char *name = section + 9;
        if (!name_ok(name)) {
            parse_error(c, c->line, "resource name '%s' must be 1-47 letters, digits, '_' or '-'", name);
            c->section_kind = -1;
            return 0;
        }
        for (size_t i = 0; i < c->nres; i++)
            if (strcmp(c->res[i].name, name) == 0) {
                parse_error(c, c->line, "[resource.%s] defined twice (first at line %d)", name, c->res[i].line);
                c->section_kind = -1;
                return 0;
            }
        cfg_resource *r = realloc(c->res, (c->nres + 1) * sizeof *r);
        if (!r) {
            parse_error(c, c->line, "out of memory");
            return 0;
        }
        c->res = r;
        memset(&r[c->nres], 0, sizeof *r);
        if (!(r[c->nres].name = strdup(name))) {
            parse_error(c, c->line, "out of memory");
            return 0;
        }
        r[c->nres].line = c->line;
        r[c->nres].upstream_index = -1;
        c->cur = (long)c->nres++;
        c->section_kind = 2;
        return 1;
    }
    if (strncmp(section, "device.", 7) == 0) {
        const char *num = section + 7;
        size_t digits = strspn(num, "0123456789");
        long d = digits && digits <= 4 && !num[digits] ? strtol(num, NULL, 10) : -1;
        if (d < 0 || d >= MAX_CACHED_DEVICES) {
            parse_error(c, c->line, "[%s]: the device must be an ordinal 0..%d", section, MAX_CACHED_DEVICES - 1);
            c->section_kind = -1;
            return 0;
        }
        for (size_t i = 0; i < c->ndev; i++)
            if (c->dev[i].device == d) {
                parse_error(c, c->line, "[device.%ld] defined twice (first at line %d)", d, c->dev[i].line);
                c->section_kind = -1;
                return 0;
            }
        cfg_device *v = realloc(c->dev, (c->ndev + 1) * sizeof *v);
        if (!v) {
            parse_error(c, c->line, "out of memory");
            return 0;
        }
        c->dev = v;
        v[c->ndev] = (cfg_device){.device = (int)d, .resource = NULL, .line = c->line};
        c->cur = (long)c->ndev++;
        c->section_kind = 3;
        return 1;
    }
    const char *hint = "";
    if (crmm_edit_distance(section, "crmm") <= 2)
        hint = " (did you mean [crmm]?)";
    else if (strncmp(section, "resource", 8) == 0 || strncmp(section, "resources", 9) == 0)
        hint = " (resources are [resource.NAME])";
    else if (strncmp(section, "device", 6) == 0)
        hint = " (devices are [device.N])";
    parse_error(c, c->line, "unknown section [%s]%s; sections are [crmm], [resource.NAME], [device.N]", section, hint);
    return 0;
}

/* " (did you mean 'KEY'?)" for the closest of `keys` within 2 edits, else `otherwise`. */
static const char *key_hint(const char *key, const char *const *keys, const char *otherwise, char *buf, size_t n)
{
    const char *best = NULL;
    unsigned bd = 3;
    for (; *keys; keys++) {
        unsigned d = crmm_edit_distance(key, *keys);
        if (d < bd) {
            bd = d;
            best = *keys;
        }
    }
    if (!best)
        return otherwise;
    snprintf(buf, n, " (did you mean '%s'?)", best);
    return buf;
}

static int on_key(void *user, const char *section, const char *key, const char *value)
{
    (void)section; /* the reader's section state is the one to trust (see the top) */
    crmm_config *c = user;
    char hint[96];
    switch (c->section_kind) {
    case 0:
        parse_error(c, c->line, "'%s' is outside any section", key);
        return 0;
    case 1:
        if (strcmp(key, "default") == 0)
            return set_str(c, &c->default_name, &c->default_line, key, value);
        if (strcmp(key, "plugin_path") == 0)
            return set_str(c, &c->plugin_path, &c->plugin_path_line, key, value);
        if (strcmp(key, "log_level") == 0) {
            crmm_log_level lvl;
            if (crmm_log_level_parse(value, &lvl) != CRMM_OK) {
                parse_error(c, c->line, "log_level: '%s' is not a level (trace debug info warn error critical off)", value);
                return 0;
            }
            return set_str(c, &c->log_level, &c->log_level_line, key, value);
        }
        static const char *const crmm_keys[] = {"default", "plugin_path", "log_level", NULL};
        parse_error(c, c->line, "unknown key '%s' in [crmm]%s", key,
                    key_hint(key, crmm_keys, " (keys: default, plugin_path, log_level)", hint, sizeof hint));
        return 0;
    case 2: {
        cfg_resource *r = &c->res[c->cur];
        if (strcmp(key, "plugin") == 0)
            return set_str(c, &r->plugin_name, &r->plugin_line, key, value);
        if (strcmp(key, "upstream") == 0)
            return set_str(c, &r->upstream, &r->upstream_line, key, value);
        for (size_t i = 0; i < r->nparams; i++)
            if (strcmp(r->params[i].key, key) == 0) {
                parse_error(c, c->line, "'%s' given twice in [%s] (first at line %d)", key, c->section, r->params[i].line);
                return 0;
            }
        cfg_param *p = realloc(r->params, (r->nparams + 1) * sizeof *p);
        if (!p) {
            parse_error(c, c->line, "out of memory");
            return 0;
        }
        r->params = p;
        p[r->nparams].key = strdup(key);
        p[r->nparams].value = strdup(value);
        p[r->nparams].line = c->line;
        r->nparams++;
        if (!p[r->nparams - 1].key || !p[r->nparams - 1].value) {
            parse_error(c, c->line, "out of memory");
            return 0;
        }
        return 1;
    }
    case 3: {
        cfg_device *d = &c->dev[c->cur];
        if (strcmp(key, "resource") == 0)
            return set_str(c, &d->resource, &d->resource_line, key, value);
        static const char *const device_keys[] = {"resource", NULL};
        parse_error(c, c->line, "unknown key '%s' in [%s]%s", key, c->section,
                    key_hint(key, device_keys, " (its one key is resource)", hint, sizeof hint));
        return 0;
    }
    default:
        return 0; /* an error in the section header was reported already */
    }
}

/* ---- validation ----------------------------------------------------------------------------- */

long crmm_config_find_resource(const crmm_config *c, const char *name)
{
    for (size_t i = 0; c && name && i < c->nres; i++)
        if (strcmp(c->res[i].name, name) == 0)
            return (long)i;
    return -1;
}

static void unknown_resource(crmm_config *c, int line, const char *what, const char *name)
{
    const char *best = NULL;
    unsigned bd = 3;
    for (size_t i = 0; i < c->nres; i++) {
        unsigned d = crmm_edit_distance(name, c->res[i].name);
        if (d < bd) {
            bd = d;
            best = c->res[i].name;
        }
    }
    if (best)
        parse_error(c, line, "%s '%s' is not a [resource.*] of this config (did you mean '%s'?)", what, name, best);
    else
        parse_error(c, line, "%s '%s' is not a [resource.*] of this config", what, name);
}

static const char *skip_category(const char *msg)
{
    static const char *const cats[] = {"config error: ", "plugin error: ", "invalid argument: "};
    for (int i = 0; i < 3; i++)
        if (strncmp(msg, cats[i], strlen(cats[i])) == 0)
            return msg + strlen(cats[i]);
    return msg;
}

/* The plugin_path as used: entries relative to the config file's directory made absolute.
 * Relative entries of a config without a directory (a string) are an error. */
static void resolve_plugin_path(crmm_config *c)
{
    if (!c->plugin_path)
        return;
    size_t entries = 1;
    for (const char *p = c->plugin_path; *p; p++)
        entries += *p == ':';
    size_t cap = strlen(c->plugin_path) + entries * (strlen(c->base_dir) + 1) + 1;
    char *out = calloc(1, cap), *copy = strdup(c->plugin_path);
    if (!out || !copy) {
        free(out);
        free(copy);
        parse_error(c, c->plugin_path_line, "out of memory");
        return;
    }
    size_t used = 0;
    char *save = NULL;
    for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        if (d[0] != '/' && !c->base_dir[0])
            parse_error(c, c->plugin_path_line, "plugin_path entry '%s' is relative; give absolute directories", d);
        bool rel = d[0] != '/' && c->base_dir[0];
        used += (size_t)snprintf(out + used, cap - used, "%s%s%s%s", used ? ":" : "", rel ? c->base_dir : "",
                                 rel && strcmp(c->base_dir, "/") != 0 ? "/" : "", d);
    }
    free(copy);
    c->plugin_dirs = out;
}

/* Upstream cycles: each one reported once, from its first member in file order. */
static void check_cycles(crmm_config *c)
{
    for (size_t i = 0; i < c->nres; i++) {
        long at = (long)i;
        for (size_t s = 0; s < c->nres && at >= 0; s++)
            at = c->res[at].upstream_index;
        if (at < 0)
            continue; /* the chain ends */
        long first = at; /* `at` is on a cycle after nres steps */
        for (long k = c->res[at].upstream_index; k != at; k = c->res[k].upstream_index)
            if (k < first)
                first = k;
        if ((size_t)first != i)
            continue; /* i leads into the cycle, or the cycle was reported from an earlier member */
        char chain[512];
        size_t len = 0;
        long k = first;
        do {
            len += (size_t)snprintf(chain + len, sizeof chain - len, "%s -> ", c->res[k].name);
            k = c->res[k].upstream_index;
        } while (k != first && len < 400);
        snprintf(chain + len, sizeof chain - len, "%s%s", len >= 400 ? "... " : "", c->res[first].name);
        parse_error(c, c->res[first].upstream_line, "upstream cycle: %s", chain);
    }
}

static void free_resource(cfg_resource *r)
{
    free(r->name);
    free(r->plugin_name);
    free(r->upstream);
    for (size_t j = 0; j < r->nparams; j++) {
        free(r->params[j].key);
        free(r->params[j].value);
    }
    free(r->params);
}

static bool is_skipped(const crmm_config *c, const char *name)
{
    for (size_t i = 0; i < c->nskipped; i++)
        if (strcmp(c->skipped[i].name, name) == 0)
            return true;
    return false;
}

/* Move resource i to the skipped list (it takes the name and `reason`). */
static bool skip_resource(crmm_config *c, size_t i, char *reason)
{
    cfg_skipped *s = realloc(c->skipped, (c->nskipped + 1) * sizeof *s);
    if (!s || !reason) {
        free(reason);
        parse_error(c, c->res[i].line, "out of memory");
        return false;
    }
    c->skipped = s;
    size_t at = c->nskipped++;
    for (; at > 0 && s[at - 1].line > c->res[i].line; at--)
        s[at] = s[at - 1];
    s[at] = (cfg_skipped){c->res[i].name, reason, c->res[i].line};
    c->res[i].name = NULL;
    free_resource(&c->res[i]);
    memmove(&c->res[i], &c->res[i + 1], (c->nres - i - 1) * sizeof *c->res);
    c->nres--;
    return true;
}

/* The skipping load: leave out each resource whose plugin does not load, then those stacked on
 * a left-out one, then the [crmm] default and [device.N] sections that name one. */
static void skip_unloadable(crmm_config *c)
{
    for (size_t i = 0; i < c->nres;) {
        const crmm_plugin *plugin;
        if (!c->res[i].plugin_name || crmm_plugin_load(c->res[i].plugin_name, c->plugin_dirs, &plugin) == CRMM_OK)
            i++;
        else if (!skip_resource(c, i, strdup(crmm_last_error())))
            return;
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t i = 0; i < c->nres;) {
            const char *up = c->res[i].upstream;
            if (!up || !is_skipped(c, up)) {
                i++;
                continue;
            }
            char reason[128];
            snprintf(reason, sizeof reason, "its upstream '%s' was skipped", up);
            if (!skip_resource(c, i, strdup(reason)))
                return;
            changed = true;
        }
    }
    if (c->default_name && is_skipped(c, c->default_name)) {
        free(c->default_name);
        c->default_name = NULL;
    }
    for (size_t i = 0; i < c->ndev;) {
        if (c->dev[i].resource && is_skipped(c, c->dev[i].resource)) {
            free(c->dev[i].resource);
            memmove(&c->dev[i], &c->dev[i + 1], (c->ndev - i - 1) * sizeof *c->dev);
            c->ndev--;
        } else {
            i++;
        }
    }
    crmm_clear_error();
}

/* Everything that needs the whole file: plugins, parameters, upstreams, names. Every error is
 * collected; parse_error keeps the one on the lowest line. */
static void validate(crmm_config *c)
{
    resolve_plugin_path(c);
    if (c->skip_unloadable && !c->err_line)
        skip_unloadable(c);
    for (size_t i = 0; i < c->nres; i++) {
        cfg_resource *r = &c->res[i];
        if (!r->plugin_name) {
            parse_error(c, r->line, "[resource.%s] has no 'plugin = NAME'", r->name);
            continue;
        }
        if (crmm_plugin_load(r->plugin_name, c->plugin_dirs, &r->plugin) != CRMM_OK) {
            r->plugin = NULL;
            parse_error(c, r->plugin_line, "%s", skip_category(crmm_last_error()));
            continue;
        }
        crmm_params *p;
        if (crmm_params_new(r->plugin, r->name, &p) != CRMM_OK) {
            parse_error(c, r->plugin_line, "%s", skip_category(crmm_last_error()));
            continue;
        }
        bool params_ok = true;
        for (size_t j = 0; j < r->nparams; j++)
            if (crmm_params_set(p, r->params[j].key, r->params[j].value) != CRMM_OK) {
                parse_error(c, r->params[j].line, "%s", skip_category(crmm_last_error()));
                params_ok = false;
            }
        /* a required key given a bad value was reported as bad, not as missing */
        if (params_ok && crmm_params_check_required(p) != CRMM_OK)
            parse_error(c, r->line, "[resource.%s]: %s", r->name, skip_category(crmm_last_error()));
        crmm_params_free(p);
        if (r->upstream) {
            if (r->plugin->upstream == CRMM_UPSTREAM_NONE)
                parse_error(c, r->upstream_line, "plugin %s takes no upstream", r->plugin_name);
            else if ((r->upstream_index = crmm_config_find_resource(c, r->upstream)) < 0)
                unknown_resource(c, r->upstream_line, "upstream", r->upstream);
        } else if (r->plugin->upstream == CRMM_UPSTREAM_REQUIRED) {
            parse_error(c, r->line, "[resource.%s]: plugin %s needs 'upstream = NAME'", r->name, r->plugin_name);
        }
    }
    check_cycles(c);
    if (c->default_name && crmm_config_find_resource(c, c->default_name) < 0)
        unknown_resource(c, c->default_line, "default", c->default_name);
    for (size_t i = 0; i < c->ndev; i++) {
        if (!c->dev[i].resource)
            parse_error(c, c->dev[i].line, "[device.%d] has no 'resource = NAME'", c->dev[i].device);
        else if (crmm_config_find_resource(c, c->dev[i].resource) < 0)
            unknown_resource(c, c->dev[i].resource_line, "resource", c->dev[i].resource);
    }
}

static crmm_status load(const char *text, const char *origin, const char *base_dir, bool skip_unloadable,
                        crmm_config **out)
{
    crmm_config *c = calloc(1, sizeof *c);
    if (!c)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "config: malloc failed");
    c->skip_unloadable = skip_unloadable;
    snprintf(c->origin, sizeof c->origin, "%s", origin);
    snprintf(c->base_dir, sizeof c->base_dir, "%s", base_dir ? base_dir : "");
    pthread_mutex_init(&c->lock, NULL);
    struct line_reader r = {.p = text, .cfg = c};
    int rc = ini_parse_stream(read_line, &r, on_key, c);
    if (rc < 0) {
        crmm_config_free(c);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: out of memory while parsing (inih error %d)", origin, rc);
    }
    if (rc > 0) /* inih's own complaint (kept only when it is on the lowest line) */
        parse_error(c, rc, "syntax error: expected [section], key = value, or a ; comment");
    if (!c->err_line)
        validate(c);
    if (c->err_line) {
        crmm_status st = crmm_set_error(CRMM_ERROR_CONFIG, "%s:%d: %s", c->origin, c->err_line, c->err);
        crmm_config_free(c);
        return st;
    }
    *out = c;
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

static crmm_status load_file(const char *path, bool skip_unloadable, crmm_config **out)
{
    if (!path || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "config_load_file: %s is NULL", path ? "out" : "path");
    FILE *f = fopen(path, "rb");
    if (!f)
        return crmm_set_error(CRMM_ERROR_IO, "cannot open config %s: %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            char *b = cap > (16u << 20) ? NULL : realloc(buf, cap * 2);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
    }
    bool read_err = ferror(f);
    fclose(f);
    if (!buf)
        return crmm_set_error(CRMM_ERROR_CONFIG, "%s: too large (or out of memory) to read", path);
    if (read_err) {
        free(buf);
        return crmm_set_error(CRMM_ERROR_IO, "cannot read config %s", path);
    }
    buf[len] = '\0';
    if (memchr(buf, '\0', len)) {
        free(buf);
        return crmm_set_error(CRMM_ERROR_CONFIG, "%s: not a text file (contains NUL bytes)", path);
    }
    char dir[PATH_MAX];
    char real[PATH_MAX];
    if (realpath(path, real)) {
        snprintf(dir, sizeof dir, "%s", real);
        char *slash = strrchr(dir, '/');
        if (slash)
            *(slash == dir ? slash + 1 : slash) = '\0';
    } else {
        dir[0] = '\0';
    }
    crmm_status st = load(buf, path, dir, skip_unloadable, out);
    free(buf);
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

void crmm_config_free(crmm_config *c)
{
    if (!c)
        return;
    for (size_t d = 0; d <= MAX_CACHED_DEVICES; d++) {
        if (!c->inst[d])
            continue;
        for (size_t i = 0; i < c->nres; i++)
            crmm_resource_release(c->inst[d][i]);
        free(c->inst[d]);
    }
    for (size_t i = 0; i < c->nres; i++)
        free_resource(&c->res[i]);
    free(c->res);
    for (size_t i = 0; i < c->nskipped; i++) {
        free(c->skipped[i].name);
        free(c->skipped[i].reason);
    }
    free(c->skipped);
    for (size_t i = 0; i < c->ndev; i++)
        free(c->dev[i].resource);
    free(c->dev);
    free(c->default_name);
    free(c->plugin_path);
    free(c->plugin_dirs);
    free(c->log_level);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* ---- accessors ------------------------------------------------------------------------------ */

const char *crmm_config_origin(const crmm_config *c) { return c ? c->origin : ""; }
size_t crmm_config_resource_count(const crmm_config *c) { return c ? c->nres : 0; }
const char *crmm_config_resource_name(const crmm_config *c, size_t i) { return c && i < c->nres ? c->res[i].name : NULL; }
const char *crmm_config_resource_plugin(const crmm_config *c, size_t i) { return c && i < c->nres ? c->res[i].plugin_name : NULL; }
const char *crmm_config_resource_upstream(const crmm_config *c, size_t i) { return c && i < c->nres ? c->res[i].upstream : NULL; }
size_t crmm_config_resource_param_count(const crmm_config *c, size_t i) { return c && i < c->nres ? c->res[i].nparams : 0; }
const char *crmm_config_resource_param_key(const crmm_config *c, size_t i, size_t j)
{
    return c && i < c->nres && j < c->res[i].nparams ? c->res[i].params[j].key : NULL;
}
const char *crmm_config_resource_param_value(const crmm_config *c, size_t i, size_t j)
{
    return c && i < c->nres && j < c->res[i].nparams ? c->res[i].params[j].value : NULL;
}
const char *crmm_config_plugin_path(const crmm_config *c) { return c ? c->plugin_dirs : NULL; }
const char *crmm_config_log_level(const crmm_config *c) { return c ? c->log_level : NULL; }
size_t crmm_config_skipped_count(const crmm_config *c) { return c ? c->nskipped : 0; }
const char *crmm_config_skipped_name(const crmm_config *c, size_t i) { return c && i < c->nskipped ? c->skipped[i].name : NULL; }
const char *crmm_config_skipped_reason(const crmm_config *c, size_t i)
{
    return c && i < c->nskipped ? c->skipped[i].reason : NULL;
}

bool crmm_config_resource_is_host(const crmm_config *c, size_t i)
{
    if (!c || i >= c->nres)
        return false;
    long at = (long)i;
    while (c->res[at].upstream_index >= 0)
        at = c->res[at].upstream_index;
    return (c->res[at].plugin->flags & CRMM_PLUGIN_HOST_MEMORY) != 0;
}

const char *crmm_config_default_resource(const crmm_config *c, int device)
{
    if (!c)
        return NULL;
    for (size_t i = 0; i < c->ndev; i++)
        if (c->dev[i].device == device)
            return c->dev[i].resource;
    if (c->default_name)
        return c->default_name;
    return c->nres ? c->res[0].name : NULL;
}

/* ---- instantiation -------------------------------------------------------------------------- */

static crmm_status instantiate(crmm_config *c, size_t i, int device, size_t row, crmm_resource **out)
{
    if (!c->inst[row] && !(c->inst[row] = calloc(c->nres, sizeof(crmm_resource *))))
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "config: malloc failed");
    if (c->inst[row][i]) {
        *out = crmm_resource_retain(c->inst[row][i]);
        return CRMM_OK;
    }
    cfg_resource *r = &c->res[i];
    crmm_resource *up = NULL;
    crmm_status st;
    if (r->upstream_index >= 0 && (st = instantiate(c, (size_t)r->upstream_index, device, row, &up)) != CRMM_OK)
        return st;
    crmm_params *p;
    if ((st = crmm_params_new(r->plugin, r->name, &p)) != CRMM_OK) {
        crmm_resource_release(up);
        return st;
    }
    p->device = device;
    for (size_t j = 0; j < r->nparams && st == CRMM_OK; j++)
        st = crmm_params_set(p, r->params[j].key, r->params[j].value);
    crmm_resource *mr = NULL;
    if (st == CRMM_OK)
        st = crmm_resource_create_with(r->plugin, p, up, &mr);
    crmm_params_free(p);
    crmm_resource_release(up);
    if (st != CRMM_OK)
        return crmm_error_add_context("%s:%d: resource.%s", c->origin, r->line, r->name);
    snprintf(mr->name, sizeof mr->name, "%s", r->name);
    c->inst[row][i] = mr;
    *out = crmm_resource_retain(mr);
    return CRMM_OK;
}

crmm_status crmm_config_create_resource(crmm_config *c, const char *name, int device, crmm_resource **out)
{
    if (!c || !name || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "config_create_resource: NULL argument");
    if (device < -1 || device >= MAX_CACHED_DEVICES)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "config_create_resource: device %d is not -1 (current) or 0..%d",
                              device, MAX_CACHED_DEVICES - 1);
    long i = crmm_config_find_resource(c, name);
    if (i < 0)
        return crmm_set_error(CRMM_ERROR_NOT_FOUND, "%s: no [resource.%s]", c->origin, name);
    bool host = crmm_config_resource_is_host(c, (size_t)i);
    crmm_status st;
    if (host) {
        device = -1;
    } else if (device < 0 && (st = crmm_cuda_current_device(&device)) != CRMM_OK) {
        return crmm_error_add_context("%s: resource.%s needs a CUDA device", c->origin, name);
    } else if (device >= MAX_CACHED_DEVICES) {
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "current device %d: crmm handles devices 0..%d", device,
                              MAX_CACHED_DEVICES - 1);
    }
    crmm_device_guard g = {-1, 0};
    if (!host && (st = crmm_cuda_device_enter(device, &g)) != CRMM_OK)
        return st;
    pthread_mutex_lock(&c->lock);
    st = instantiate(c, (size_t)i, device, host ? 0 : (size_t)device + 1, out);
    pthread_mutex_unlock(&c->lock);
    crmm_cuda_device_restore(&g);
    return st;
}

/* ---- library init --------------------------------------------------------------------------- */

/* recursive: a plugin created while the lock is held (binning makes fixed_size bins) may call
 * crmm_resource_create, which takes it to read the plugin path */
static pthread_mutex_t init_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

void crmm_config_lock_current(void) { pthread_mutex_lock(&init_lock); }
void crmm_config_unlock_current(void) { pthread_mutex_unlock(&init_lock); }
static crmm_config *current;

const crmm_config *crmm_current_config(void) { return __atomic_load_n(&current, __ATOMIC_ACQUIRE); }


const char *crmm_config_default_file(char *buf, size_t size)
{
    const char *env = getenv("CRMM_CONFIG");
    if (env && *env)
        return env;
    if (!buf || snprintf(buf, size, "%s/crmm/crmm.ini", CRMM_SYSCONFDIR) >= (int)size)
        return NULL;
    FILE *f = fopen(buf, "r");
    if (!f)
        return NULL;
    fclose(f);
    return buf;
}

crmm_status crmm_init(const char *path)
{
    crmm_config *c = NULL;
    char sys[PATH_MAX];
    const char *from = path ? path : crmm_config_default_file(sys, sizeof sys);
    crmm_status st = from ? crmm_config_load_file(from, &c) : crmm_config_load_default(&c);
    if (st != CRMM_OK)
        return st;
    crmm_log_level lvl;
    /* $CRMM_LOG_LEVEL wins over the file: a user turns on tracing without editing it */
    if (c->log_level && !crmm_log_level_from_env() && crmm_log_level_parse(c->log_level, &lvl) == CRMM_OK)
        crmm_log_set_level(lvl);
    pthread_mutex_lock(&init_lock);
    crmm_config *old = current;
    __atomic_store_n(&current, c, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&init_lock);
    crmm_config_free(old);
    crmm_log(CRMM_LOG_INFO, "crmm: config %s", crmm_config_origin(c));
    return CRMM_OK;
}

void crmm_finalize(void)
{
    /* detach the config first, so that no device default is built from it once the registry is
     * cleared; then free it */
    pthread_mutex_lock(&init_lock);
    crmm_config *old = current;
    __atomic_store_n(&current, NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&init_lock);
    crmm_logging_switch_reset();
    crmm_registry_clear();
    crmm_config_free(old);
}
