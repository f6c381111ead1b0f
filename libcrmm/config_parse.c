/* config_parse.c — INI text to config_text: sections, keys and values with their line numbers.
 *
 * inih reads the text through our reader callback, which counts lines, strips indentation (so it
 * never becomes inih's multi-line continuation) and a UTF-8 byte-order mark, and recognises
 * section headers itself: inih reports no section that has no keys, cuts names at 49 characters
 * and gives no line numbers, so the reader's section state is the one used. Only the form is
 * checked here (known sections and keys, no repeats, well-formed names); what the names refer to
 * is config_graph.c's job. */
#include "build_config.h"
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ini.h>
#include <crmm/log.h>
#include "config_internal.h"
#include "name_index.h"
#include "suggest.h"

typedef struct parse_state {
    config_text *t;
    config_error *err;
    const char *p;            /* the rest of the text */
    int line;
    char section[256];
    config_section_kind kind;
    size_t cur;               /* index into t->res or t->dev */
    name_index resources;     /* t->res by name, to find a repeated section at once */
    size_t res_capacity;      /* entries t->res has room for: it grows by doubling */
    bool out_of_memory;
} parse_state;

void config_error_at(config_error *e, int line, const char *fmt, ...)
{
    if (e->line && line >= e->line)
        return; /* keep the error on the lowest line: the first a reader meets */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    e->line = line;
}

static void out_of_memory(parse_state *s)
{
    s->out_of_memory = true;
    config_error_at(s->err, s->line, "out of memory");
}

static bool resource_name_ok(const char *n)
{
    if (!*n || strlen(n) >= sizeof(((crmm_resource *)0)->name))
        return false;
    for (; *n; n++)
        if (!(isalnum((unsigned char)*n) || *n == '_' || *n == '-'))
            return false;
    return true;
}

static void begin_crmm(parse_state *s)
{
    if (s->t->crmm_line) {
        config_error_at(s->err, s->line, "[crmm] defined twice (first at line %d)", s->t->crmm_line);
        return;
    }
    s->t->crmm_line = s->line;
    s->kind = CONFIG_SECTION_CRMM;
}

static void begin_resource(parse_state *s, const char *name)
{
    config_text *t = s->t;
    if (!resource_name_ok(name)) {
        config_error_at(s->err, s->line, "resource name '%s' must be 1-47 letters, digits, '_' or '-'", name);
        return;
    }
    long first = name_index_find(&s->resources, name);
    if (first >= 0) {
        config_error_at(s->err, s->line, "[resource.%s] defined twice (first at line %d)", name, t->res[first].line);
        return;
    }
    if (t->nres == s->res_capacity) {
        size_t capacity = s->res_capacity ? s->res_capacity * 2 : 16;
        config_resource_section *bigger = realloc(t->res, capacity * sizeof *bigger);
        if (!bigger) {
            out_of_memory(s);
            return;
        }
        t->res = bigger;
        s->res_capacity = capacity;
    }
    config_resource_section *r = t->res + t->nres;
    memset(r, 0, sizeof *r);
    if (!(r->name = strdup(name))) {
        out_of_memory(s);
        return;
    }
    if (!name_index_add(&s->resources, r->name, t->nres)) {
        free(r->name);
        r->name = NULL;
        out_of_memory(s);
        return;
    }
    r->line = s->line;
    s->cur = t->nres++;
    s->kind = CONFIG_SECTION_RESOURCE;
}

static void begin_device(parse_state *s, const char *num)
{
    config_text *t = s->t;
    size_t digits = strspn(num, "0123456789");
    long d = digits && digits <= 4 && !num[digits] ? strtol(num, NULL, 10) : -1;
    if (d < 0 || d >= CRMM_MAX_DEVICES) {
        config_error_at(s->err, s->line, "[%s]: the device must be an ordinal 0..%d", s->section, CRMM_MAX_DEVICES - 1);
        return;
    }
    for (size_t i = 0; i < t->ndev; i++)
        if (t->dev[i].device == d) {
            config_error_at(s->err, s->line, "[device.%ld] defined twice (first at line %d)", d, t->dev[i].line);
            return;
        }
    config_device_section *v = realloc(t->dev, (t->ndev + 1) * sizeof *v);
    if (!v) {
        out_of_memory(s);
        return;
    }
    t->dev = v;
    v[t->ndev] = (config_device_section){.device = (int)d, .line = s->line};
    s->cur = t->ndev++;
    s->kind = CONFIG_SECTION_DEVICE;
}

static void begin_section(parse_state *s, const char *section)
{
    snprintf(s->section, sizeof s->section, "%s", section);
    s->kind = CONFIG_SECTION_BROKEN; /* until the header proves good */
    if (strcmp(section, "crmm") == 0) {
        begin_crmm(s);
    } else if (strncmp(section, "resource.", 9) == 0) {
        begin_resource(s, section + 9);
    } else if (strncmp(section, "device.", 7) == 0) {
        begin_device(s, section + 7);
    } else {
        const char *hint = "";
        crmm_suggestion near;
        crmm_suggestion_start(&near, section);
        crmm_suggestion_consider(&near, "crmm");
        if (crmm_suggestion_best(&near))
            hint = " (did you mean [crmm]?)";
        else if (strncmp(section, "resource", 8) == 0)
            hint = " (resources are [resource.NAME])";
        else if (strncmp(section, "device", 6) == 0)
            hint = " (devices are [device.N])";
        config_error_at(s->err, s->line, "unknown section [%s]%s; sections are [crmm], [resource.NAME], [device.N]",
                        section, hint);
    }
}

/* A line that starts with '[': the section header, by inih's rule (the name ends at ']' or at an
 * inline ';' comment, i.e. a ';' after a blank); after ']' only blanks or a comment may follow. */
static void section_line(parse_state *s, const char *text)
{
    const char *p = text + 1;
    while (*p && *p != ']' && !(*p == ';' && isspace((unsigned char)p[-1])))
        p++;
    s->kind = CONFIG_SECTION_BROKEN;
    if (*p != ']') {
        config_error_at(s->err, s->line, "section header has no closing ']'");
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
        config_error_at(s->err, s->line, "unexpected text after [%s]: '%.*s' (one section header or key = value per line)",
                        name, (int)n, q);
        return;
    }
    begin_section(s, name);
}

/* inih's reader: one line per call, counted, without a byte-order mark or indentation. */
static char *read_line(char *str, int num, void *stream)
{
    parse_state *s = stream;
    if (!*s->p)
        return NULL;
    s->line++;
    const char *l = s->p, *eol = strchr(l, '\n');
    size_t len = eol ? (size_t)(eol - l) : strlen(l);
    s->p = eol ? eol + 1 : l + len;
    if (s->line == 1 && len >= 3 && memcmp(l, "\xEF\xBB\xBF", 3) == 0) {
        l += 3;
        len -= 3;
    }
    while (len && (*l == ' ' || *l == '\t' || *l == '\r' || *l == '\v' || *l == '\f')) {
        l++;
        len--;
    }
    if (len && l[len - 1] == '\r') /* a CRLF file's line: the limit counts its characters alone */
        len--;
    if (len >= (size_t)num - 1) {
        config_error_at(s->err, s->line, "line is longer than %d characters", num - 2);
        len = 0;
    }
    memcpy(str, l, len);
    str[len] = '\n';
    str[len + 1] = '\0';
    if (str[0] == '[')
        section_line(s, str);
    return str;
}

static int set_value(parse_state *s, config_value *dst, const char *key, const char *value)
{
    if (dst->text) {
        config_error_at(s->err, s->line, "'%s' given twice in [%s] (first at line %d)", key, s->section, dst->line);
        return 0;
    }
    if (!(dst->text = strdup(value))) {
        out_of_memory(s);
        return 0;
    }
    dst->line = s->line;
    return 1;
}

/* "unknown key 'KEY' in [SECTION]", with the closest of `keys` or else `otherwise`. */
static int unknown_key(parse_state *s, const char *key, const char *const *keys, const char *otherwise)
{
    crmm_suggestion near;
    crmm_suggestion_start(&near, key);
    for (; *keys; keys++)
        crmm_suggestion_consider(&near, *keys);
    const char *best = crmm_suggestion_best(&near);
    if (best)
        config_error_at(s->err, s->line, "unknown key '%s' in [%s] (did you mean '%s'?)", key, s->section, best);
    else
        config_error_at(s->err, s->line, "unknown key '%s' in [%s]%s", key, s->section, otherwise);
    return 0;
}

/* A key of [crmm]: a row of crmm_settings() that has a key. */
static int crmm_key(parse_state *s, const char *key, const char *value)
{
    const crmm_setting *row = crmm_setting_by_key(key);
    if (row) {
        if (crmm_setting_check(row, value) != CRMM_OK) {
            config_error_at(s->err, s->line, "%s", crmm_last_error_detail());
            return 0;
        }
        return set_value(s, &s->t->settings[row - crmm_settings()], key, value);
    }
    const char *keys[CRMM_SETTING_COUNT + 1];
    char list[256] = " (keys:";
    size_t n = 0;
    for (const crmm_setting *r = crmm_settings(); r->key || r->env; r++)
        if (r->key) {
            keys[n++] = r->key;
            strncat(list, n > 1 ? ", " : " ", sizeof list - strlen(list) - 1);
            strncat(list, r->key, sizeof list - strlen(list) - 1);
        }
    keys[n] = NULL;
    strncat(list, ")", sizeof list - strlen(list) - 1);
    return unknown_key(s, key, keys, list);
}

static int resource_key(parse_state *s, const char *key, const char *value)
{
    config_resource_section *r = &s->t->res[s->cur];
    if (strcmp(key, "plugin") == 0)
        return set_value(s, &r->plugin, key, value);
    if (strcmp(key, "upstream") == 0)
        return set_value(s, &r->upstream, key, value);
    long first = name_index_find(&r->keys, key);
    if (first >= 0) {
        config_error_at(s->err, s->line, "'%s' given twice in [%s] (first at line %d)", key, s->section,
                        r->params[first].line);
        return 0;
    }
    if (r->nparams == r->capacity) {
        size_t cap = r->capacity ? 2 * r->capacity : 8;
        config_param *p = realloc(r->params, cap * sizeof *p);
        if (!p) {
            out_of_memory(s);
            return 0;
        }
        r->params = p;
        r->capacity = cap;
    }
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v || !name_index_add(&r->keys, k, r->nparams)) { /* the section keeps only whole keys */
        free(k);
        free(v);
        out_of_memory(s);
        return 0;
    }
    r->params[r->nparams++] = (config_param){k, v, s->line};
    return 1;
}

static int device_key(parse_state *s, const char *key, const char *value)
{
    if (strcmp(key, "resource") == 0)
        return set_value(s, &s->t->dev[s->cur].resource, key, value);
    static const char *const keys[] = {"resource", NULL};
    return unknown_key(s, key, keys, " (its one key is resource)");
}

static int on_key(void *user, const char *section, const char *key, const char *value)
{
    (void)section; /* the reader's section state is the one to trust (see the top) */
    parse_state *s = user;
    if (s->out_of_memory)
        return 0; /* inih reads on after an error: nothing more is kept once memory ran out */
    switch (s->kind) {
    case CONFIG_SECTION_NONE:
        config_error_at(s->err, s->line, "'%s' is outside any section", key);
        return 0;
    case CONFIG_SECTION_CRMM:
        return crmm_key(s, key, value);
    case CONFIG_SECTION_RESOURCE:
        return resource_key(s, key, value);
    case CONFIG_SECTION_DEVICE:
        return device_key(s, key, value);
    case CONFIG_SECTION_BROKEN:
        break;
    }
    return 0; /* an error in the section header was reported already */
}

crmm_status config_parse(const char *text, config_text *out, config_error *err)
{
    memset(out, 0, sizeof *out);
    parse_state s = {.t = out, .err = err, .p = text, .kind = CONFIG_SECTION_NONE};
    int rc = ini_parse_stream(read_line, &s, on_key, &s);
    name_index_free(&s.resources);
    if (rc < 0 || s.out_of_memory)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "out of memory while parsing the config (inih: %d)", rc);
    if (rc > 0) /* inih's own complaint (kept only when it is on the lowest line) */
        config_error_at(err, rc, "syntax error: expected [section], key = value, or a ; comment");
    return CRMM_OK;
}

void config_resource_section_free(config_resource_section *r)
{
    free(r->name);
    free(r->plugin.text);
    free(r->upstream.text);
    for (size_t j = 0; j < r->nparams; j++) {
        free(r->params[j].key);
        free(r->params[j].value);
    }
    free(r->params);
    name_index_free(&r->keys);
}

void config_text_free(config_text *t)
{
    for (size_t i = 0; i < t->nres; i++)
        config_resource_section_free(&t->res[i]);
    free(t->res);
    for (size_t i = 0; i < t->ndev; i++)
        free(t->dev[i].resource.text);
    free(t->dev);
    for (size_t i = 0; i < CRMM_SETTING_COUNT; i++)
        free(t->settings[i].text);
    memset(t, 0, sizeof *t);
}
