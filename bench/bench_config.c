/* bench_config.c — loads the bench's config, skipping resources whose plugin does not load.
 *
 * The fallback reads the file's lines once into a small table of sections ([crmm] default and
 * plugin_path, each [resource.NAME]'s plugin and upstream, each [device.N]'s resource), asks the
 * plugin loader about every plugin, marks what must go, and writes the file back with those lines
 * blanked (so that line numbers in messages still match the file) and plugin_path made absolute.
 * The result is loaded with the ordinary strict loader from the string. */
#include "config.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/plugin.h>
#include "bench_config.h"

#ifndef CRMM_SYSCONFDIR
#define CRMM_SYSCONFDIR "/usr/local/etc"
#endif

typedef struct skipped { char *name, *reason; } skipped;

struct bench_config {
    char *path;          /* the file, or NULL for the built-in default */
    char *filtered;      /* the file with skipped resources blanked, or NULL when none were */
    crmm_config *cfg;    /* the loaded config, for listing */
    skipped *skips;
    size_t nskips;
};

/* ---- the fallback: a line table of the file ------------------------------------------------- */

enum { SEC_OTHER, SEC_CRMM, SEC_RESOURCE, SEC_DEVICE };

typedef struct ini_line {
    char *text;          /* the line as in the file (without '\n') */
    int section;         /* index into the section table, -1 before the first */
    char key[64];        /* "" for headers, comments and blank lines */
    char value[PATH_MAX];
} ini_line;

typedef struct ini_section {
    int kind;
    char name[64];       /* resource name for SEC_RESOURCE */
    char plugin[PATH_MAX], upstream[64], device_resource[64];
    bool dropped;
    char *reason;
} ini_section;

typedef struct ini_file {
    ini_line *lines;
    size_t nlines;
    ini_section *sections;
    size_t nsections;
    char dir[PATH_MAX];  /* the file's directory, for relative plugin_path entries */
    char plugin_path[PATH_MAX * 2]; /* [crmm] plugin_path, made absolute ("" if none) */
} ini_file;

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* Copy src into dst[size], cut to fit. */
static void copy_text(char *dst, size_t size, const char *src)
{
    size_t n = strnlen(src, size - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Split "key = value ; comment" (inih's rules: '=' or ':', inline ';' after a blank). */
static void parse_key(ini_line *l)
{
    char buf[PATH_MAX + 128];
    copy_text(buf, sizeof buf, l->text);
    char *s = trim(buf);
    if (!*s || *s == ';' || *s == '#' || *s == '[')
        return;
    char *sep = strpbrk(s, "=:");
    if (!sep)
        return;
    *sep = '\0';
    char *value = sep + 1;
    for (char *c = value; *c; c++)
        if (*c == ';' && (c == value || c[-1] == ' ' || c[-1] == '\t')) {
            *c = '\0';
            break;
        }
    copy_text(l->key, sizeof l->key, trim(s));
    copy_text(l->value, sizeof l->value, trim(value));
}

static int begin_section(ini_file *f, const char *text)
{
    char buf[256];
    copy_text(buf, sizeof buf, text);
    char *s = trim(buf) + 1;
    char *end = strchr(s, ']');
    if (end)
        *end = '\0';
    ini_section *n = realloc(f->sections, (f->nsections + 1) * sizeof *n);
    if (!n)
        return -1;
    f->sections = n;
    ini_section *sec = &n[f->nsections];
    memset(sec, 0, sizeof *sec);
    s = trim(s);
    if (strcmp(s, "crmm") == 0)
        sec->kind = SEC_CRMM;
    else if (strncmp(s, "resource.", 9) == 0)
        sec->kind = SEC_RESOURCE;
    else if (strncmp(s, "device.", 7) == 0)
        sec->kind = SEC_DEVICE;
    copy_text(sec->name, sizeof sec->name, sec->kind == SEC_RESOURCE ? s + 9 : s);
    return (int)f->nsections++;
}

static void ini_file_free(ini_file *f)
{
    for (size_t i = 0; i < f->nlines; i++)
        free(f->lines[i].text);
    for (size_t i = 0; i < f->nsections; i++)
        free(f->sections[i].reason);
    free(f->lines);
    free(f->sections);
}

static char *read_text(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    size_t cap = 4096, len = 0, n;
    char *buf = malloc(cap);
    while (buf && (n = fread(buf + len, 1, cap - len - 1, fp)) > 0) {
        len += n;
        if (len + 1 == cap) {
            char *b = cap > (16u << 20) ? NULL : realloc(buf, cap * 2);
            if (!b) {
                free(buf);
                buf = NULL;
            }
            buf = b;
            cap *= 2;
        }
    }
    fclose(fp);
    if (buf)
        buf[len] = '\0';
    return buf;
}

static bool ini_file_read(ini_file *f, const char *path)
{
    memset(f, 0, sizeof *f);
    char real[PATH_MAX];
    if (realpath(path, real)) {
        copy_text(f->dir, sizeof f->dir, real);
        char *slash = strrchr(f->dir, '/');
        if (slash)
            *(slash == f->dir ? slash + 1 : slash) = '\0';
    }
    char *text = read_text(path);
    if (!text)
        return false;
    int section = -1;
    bool ok = true;
    for (char *p = text; ok && *p;) {
        char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        ini_line *n = realloc(f->lines, (f->nlines + 1) * sizeof *n);
        ok = n != NULL;
        if (!ok)
            break;
        f->lines = n;
        ini_line *l = &n[f->nlines];
        memset(l, 0, sizeof *l);
        l->text = strndup(p, len);
        ok = l->text != NULL;
        if (!ok)
            break;
        f->nlines++;
        const char *t = l->text + strspn(l->text, " \t");
        if (*t == '[')
            ok = (section = begin_section(f, t)) >= 0;
        else
            parse_key(l);
        l->section = section;
        p = eol ? eol + 1 : p + len;
    }
    free(text);
    if (!ok)
        return false;
    for (size_t i = 0; i < f->nlines; i++) {
        ini_line *l = &f->lines[i];
        if (l->section < 0 || !l->key[0])
            continue;
        ini_section *s = &f->sections[l->section];
        if (s->kind == SEC_RESOURCE && strcmp(l->key, "plugin") == 0)
            copy_text(s->plugin, sizeof s->plugin, l->value);
        else if (s->kind == SEC_RESOURCE && strcmp(l->key, "upstream") == 0)
            copy_text(s->upstream, sizeof s->upstream, l->value);
        else if (s->kind == SEC_DEVICE && strcmp(l->key, "resource") == 0)
            copy_text(s->device_resource, sizeof s->device_resource, l->value);
        else if (s->kind == SEC_CRMM && strcmp(l->key, "plugin_path") == 0) {
            char copy[PATH_MAX], *save = NULL;
            copy_text(copy, sizeof copy, l->value);
            for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
                size_t used = strlen(f->plugin_path);
                snprintf(f->plugin_path + used, sizeof f->plugin_path - used, "%s%s%s%s", used ? ":" : "",
                         d[0] != '/' && f->dir[0] ? f->dir : "", d[0] != '/' && f->dir[0] ? "/" : "", d);
            }
        }
    }
    return true;
}

static ini_section *find_resource_section(ini_file *f, const char *name)
{
    for (size_t i = 0; i < f->nsections; i++)
        if (f->sections[i].kind == SEC_RESOURCE && strcmp(f->sections[i].name, name) == 0)
            return &f->sections[i];
    return NULL;
}

static bool is_dropped(ini_file *f, const char *name)
{
    ini_section *s = find_resource_section(f, name);
    return s && s->dropped;
}

/* Mark resources whose plugin does not load, then those stacked on them. Returns how many. */
static size_t mark_dropped(ini_file *f)
{
    size_t dropped = 0;
    for (size_t i = 0; i < f->nsections; i++) {
        ini_section *s = &f->sections[i];
        const crmm_plugin *pl;
        if (s->kind != SEC_RESOURCE || !s->plugin[0])
            continue;
        if (crmm_plugin_load(s->plugin, f->plugin_path[0] ? f->plugin_path : NULL, &pl) != CRMM_OK) {
            s->dropped = true;
            if (asprintf(&s->reason, "%s", crmm_last_error()) < 0)
                s->reason = NULL;
            dropped++;
        }
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t i = 0; i < f->nsections; i++) {
            ini_section *s = &f->sections[i];
            if (s->kind == SEC_RESOURCE && !s->dropped && s->upstream[0] && is_dropped(f, s->upstream)) {
                s->dropped = changed = true;
                if (asprintf(&s->reason, "its upstream '%s' was skipped", s->upstream) < 0)
                    s->reason = NULL;
                dropped++;
            }
        }
    }
    crmm_clear_error();
    return dropped;
}

/* The file with dropped sections and the lines naming them blanked. */
static char *filtered_text(ini_file *f)
{
    size_t cap = 1;
    for (size_t i = 0; i < f->nlines; i++)
        cap += strlen(f->lines[i].text) + 1;
    cap += sizeof f->plugin_path + 16;
    char *out = malloc(cap), *p = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < f->nlines; i++) {
        const ini_line *l = &f->lines[i];
        const ini_section *s = l->section >= 0 ? &f->sections[l->section] : NULL;
        bool blank = s && ((s->kind == SEC_RESOURCE && s->dropped) ||
                           (s->kind == SEC_DEVICE && is_dropped(f, s->device_resource)) ||
                           (s->kind == SEC_CRMM && strcmp(l->key, "default") == 0 && is_dropped(f, l->value)));
        if (s && s->kind == SEC_CRMM && strcmp(l->key, "plugin_path") == 0)
            p += sprintf(p, "plugin_path = %s", f->plugin_path);
        else if (!blank)
            p += sprintf(p, "%s", l->text);
        *p++ = '\n';
    }
    *p = '\0';
    return out;
}

/* ---- open / close --------------------------------------------------------------------------- */

static const char *default_path(char *buf, size_t size)
{
    const char *env = getenv("CRMM_CONFIG");
    if (env && *env)
        return env;
    snprintf(buf, size, "%s/crmm/crmm.ini", CRMM_SYSCONFDIR);
    FILE *fp = fopen(buf, "r");
    if (!fp)
        return NULL;
    fclose(fp);
    return buf;
}

static crmm_status load_lenient(bench_config *bc)
{
    crmm_status st = crmm_config_load_file(bc->path, &bc->cfg);
    if (st != CRMM_ERROR_CONFIG)
        return st;
    char strict_error[1024];
    copy_text(strict_error, sizeof strict_error, crmm_last_error());
    ini_file f;
    bool ok = ini_file_read(&f, bc->path);
    if (ok && mark_dropped(&f) > 0 && (bc->filtered = filtered_text(&f)) != NULL &&
        crmm_config_load_string(bc->filtered, bc->path, &bc->cfg) == CRMM_OK) {
        for (size_t i = 0; i < f.nsections; i++) {
            ini_section *s = &f.sections[i];
            if (s->kind != SEC_RESOURCE || !s->dropped)
                continue;
            skipped *n = realloc(bc->skips, (bc->nskips + 1) * sizeof *n);
            if (!n)
                break;
            bc->skips = n;
            n[bc->nskips].name = strdup(s->name);
            n[bc->nskips].reason = s->reason ? s->reason : strdup("its plugin could not be loaded");
            s->reason = NULL;
            bc->nskips++;
        }
        ini_file_free(&f);
        return CRMM_OK;
    }
    ini_file_free(&f);
    free(bc->filtered);
    bc->filtered = NULL;
    return crmm_set_error(CRMM_ERROR_CONFIG, "%s", strict_error);
}

crmm_status bench_config_open(const char *path, bench_config **out)
{
    if (!out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "bench_config_open: out is NULL");
    char buf[PATH_MAX];
    if (!path)
        path = default_path(buf, sizeof buf);
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
    for (size_t i = 0; i < bc->nskips; i++) {
        free(bc->skips[i].name);
        free(bc->skips[i].reason);
    }
    free(bc->skips);
    free(bc->filtered);
    free(bc->path);
    free(bc);
}

/* ---- accessors ------------------------------------------------------------------------------ */

const char *bench_config_origin(const bench_config *bc) { return crmm_config_origin(bc->cfg); }
size_t bench_config_resource_count(const bench_config *bc) { return crmm_config_resource_count(bc->cfg); }
const char *bench_config_resource_name(const bench_config *bc, size_t i) { return crmm_config_resource_name(bc->cfg, i); }
const char *bench_config_resource_plugin(const bench_config *bc, size_t i) { return crmm_config_resource_plugin(bc->cfg, i); }
bool bench_config_resource_is_host(const bench_config *bc, size_t i) { return crmm_config_resource_is_host(bc->cfg, i); }
size_t bench_config_skipped_count(const bench_config *bc) { return bc->nskips; }
const char *bench_config_skipped_name(const bench_config *bc, size_t i) { return i < bc->nskips ? bc->skips[i].name : NULL; }
const char *bench_config_skipped_reason(const bench_config *bc, size_t i) { return i < bc->nskips ? bc->skips[i].reason : NULL; }

long bench_config_find(const bench_config *bc, const char *name)
{
    for (size_t i = 0; i < bench_config_resource_count(bc); i++)
        if (strcmp(bench_config_resource_name(bc, i), name) == 0)
            return (long)i;
    return -1;
}

void bench_config_source(const bench_config *bc, const char **path, const char **text)
{
    *path = bc->path;
    *text = bc->filtered;
}

crmm_status bench_config_load_source(const char *path, const char *text, crmm_config **out)
{
    return text ? crmm_config_load_string(text, path, out)
         : path ? crmm_config_load_file(path, out)
         : crmm_config_load_default(out);
}

crmm_status bench_config_create(const bench_config *bc, const char *name, int device, crmm_resource **out)
{
    crmm_config *fresh;
    crmm_status st = bench_config_load_source(bc->path, bc->filtered, &fresh);
    if (st != CRMM_OK)
        return st;
    st = crmm_config_create_resource(fresh, name, device, out);
    crmm_config_free(fresh);
    return st;
}
