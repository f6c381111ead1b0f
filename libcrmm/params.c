/* params.c — a plugin's parameter table turned into validated, typed values.
 *
 * The table (crmm_param[], one row per parameter: type, default, help, place in the plugin's
 * config struct, range, choices) is the one source of truth for a parameter: the config file,
 * crmm_resource_create's "k=v" strings and `crmm info` all go through it. An enum's value is
 * kept as the index of its choice, which is what the plugin receives. Values are checked
 * when they are set, so a bad one is reported with its file and line before anything is built.
 * Sizes given as a percentage are kept as a percentage and resolved at create time, against
 * the memory of the device the resource is built for. */
#include "build_config.h"
#include <ctype.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <crmm/cuda_support.h>
#include "internal.h"
#include "suggest.h"

const char *crmm_param_type_name(crmm_param_type t)
{
    switch (t) {
    case CRMM_PARAM_SIZE: return "size";
    case CRMM_PARAM_UINT: return "uint";
    case CRMM_PARAM_BOOL: return "bool";
    case CRMM_PARAM_STRING: return "string";
    case CRMM_PARAM_ENUM: return "enum";
    case CRMM_PARAM_DOUBLE: return "double";
    }
    return "?";
}

static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale; /* lives as long as the process */
static void make_c_locale(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

static bool parse_bool(const char *t, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"}, *const no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(t, yes[i]) == 0) { *out = true; return true; }
        if (strcasecmp(t, no[i]) == 0) { *out = false; return true; }
    }
    return false;
}

/* The index of `t` among the '|'-separated choices, or -1. */
static int enum_index(const char *choices, const char *t)
{
    size_t n = strlen(t);
    int i = 0;
    for (const char *c = choices; c && *c; i++) {
        const char *bar = strchr(c, '|');
        size_t len = bar ? (size_t)(bar - c) : strlen(c);
        if (len == n && strncmp(c, t, n) == 0)
            return i;
        c = bar ? bar + 1 : NULL;
    }
    return -1;
}

crmm_status crmm_param_validate(const crmm_param *spec, const char *text, crmm_param_value *v)
{
    const char *key = spec->key;
    switch (spec->type) {
    case CRMM_PARAM_SIZE:
        if (crmm_parse_size(text, 0, &v->u, &v->percent) != CRMM_OK)
            return crmm_set_error(CRMM_ERROR_CONFIG, "%s: %s", key, crmm_last_error_detail());
        return CRMM_OK;
    case CRMM_PARAM_UINT: {
        const char *s = text;
        while (isspace((unsigned char)*s))
            s++;
        if (*s == '-' || *s == '\0')
            return crmm_set_error(CRMM_ERROR_CONFIG, "%s: '%s' is not an unsigned integer", key, text);
        /* decimal, or hex after 0x: never octal, so "010" is ten as a person reads it */
        bool hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
        if (!isxdigit((unsigned char)s[hex ? 2 : 0]))
            return crmm_set_error(CRMM_ERROR_CONFIG, "%s: '%s' is not an unsigned integer", key, text);
        errno = 0;
        char *end;
        unsigned long long x = strtoull(s, &end, hex ? 16 : 10);
        while (isspace((unsigned char)*end))
            end++;
        if (errno == ERANGE)
            return crmm_set_error(CRMM_ERROR_CONFIG, "%s: '%s' does not fit in 64 bits", key, text);
        if (*end || end == s)
            return crmm_set_error(CRMM_ERROR_CONFIG, "%s: '%s' is not an unsigned integer", key, text);
        v->u = x;
        return CRMM_OK;
    }
    case CRMM_PARAM_BOOL:
        if (!parse_bool(text, &v->b))
            return crmm_set_error(CRMM_ERROR_CONFIG, "%s: '%s' is not a boolean (true/false, yes/no, on/off, 1/0)", key, text);
        return CRMM_OK;
    case CRMM_PARAM_DOUBLE: {
        /* in the C locale whatever the program's (a config says 0.5 everywhere); finite only */
        pthread_once(&c_locale_once, make_c_locale);
        errno = 0;
        char *end;
        double d = c_locale ? strtod_l(text, &end, c_locale) : strtod(text, &end);
        while (isspace((unsigned char)*end))
            end++;
        if (errno == ERANGE || *end || end == text || !isfinite(d))
            return crmm_set_error(CRMM_ERROR_CONFIG, "%s: '%s' is not a number", key, text);
        v->d = d;
        return CRMM_OK;
    }
    case CRMM_PARAM_ENUM:
        if ((v->choice = enum_index(spec->choices, text)) < 0)
            return crmm_set_error(CRMM_ERROR_CONFIG, "%s: '%s' is not one of %s", key, text, spec->choices ? spec->choices : "(none)");
        return CRMM_OK;
    case CRMM_PARAM_STRING:
        return CRMM_OK;
    }
    return crmm_set_error(CRMM_ERROR_CONFIG, "%s: unknown parameter type %d", key, (int)spec->type);
}

static bool is_number(crmm_param_type t) { return t == CRMM_PARAM_SIZE || t == CRMM_PARAM_UINT; }

/* CRMM_ERROR_CONFIG naming the plugin and key when x is outside the row's range. */
static crmm_status check_range(const crmm_plugin *pl, const crmm_param *spec, uint64_t x)
{
    if (!is_number(spec->type))
        return CRMM_OK;
    if (x < spec->min)
        return crmm_set_error(CRMM_ERROR_CONFIG, "%s: %s: %llu is below the minimum %llu", pl->name, spec->key,
                              (unsigned long long)x, (unsigned long long)spec->min);
    if (spec->max && x > spec->max)
        return crmm_set_error(CRMM_ERROR_CONFIG, "%s: %s: %llu is above the maximum %llu", pl->name, spec->key,
                              (unsigned long long)x, (unsigned long long)spec->max);
    return CRMM_OK;
}

/* The size of the config-struct member a row of type t is written to. */
static size_t member_size(crmm_param_type t)
{
    switch (t) {
    case CRMM_PARAM_SIZE:
    case CRMM_PARAM_UINT: return sizeof(uint64_t);
    case CRMM_PARAM_BOOL: return sizeof(bool);
    case CRMM_PARAM_DOUBLE: return sizeof(double);
    case CRMM_PARAM_STRING: return sizeof(const char *);
    case CRMM_PARAM_ENUM: return sizeof(int);
    }
    return 0;
}

/* A row's range and place: ranges only on numbers, minimum not above maximum, the default in
 * range, the member inside the config struct. */
static crmm_status row_validate(const crmm_plugin *pl, const crmm_param *s)
{
    if (!is_number(s->type) && (s->min || s->max))
        return crmm_set_error(CRMM_ERROR_PLUGIN, "parameter '%s' is a %s and cannot have a range", s->key,
                              crmm_param_type_name(s->type));
    if (s->max && s->min > s->max)
        return crmm_set_error(CRMM_ERROR_PLUGIN, "parameter '%s' has minimum %llu above maximum %llu", s->key,
                              (unsigned long long)s->min, (unsigned long long)s->max);
    if (pl->config_size && (s->offset > pl->config_size || member_size(s->type) > pl->config_size - s->offset))
        return crmm_set_error(CRMM_ERROR_PLUGIN, "parameter '%s' lies outside the %zu-byte config struct (offset %zu)",
                              s->key, pl->config_size, s->offset);
    crmm_param_value v = {0};
    if (is_number(s->type) && s->default_value && crmm_param_validate(s, s->default_value, &v) == CRMM_OK &&
        v.percent == 0.0 && check_range(pl, s, v.u) != CRMM_OK)
        return crmm_set_error(CRMM_ERROR_PLUGIN, "default of %s", crmm_last_error_detail());
    return CRMM_OK;
}

static bool key_well_formed(const char *k)
{
    if (!k || !*k)
        return false;
    for (; *k; k++)
        if (!(islower((unsigned char)*k) || isdigit((unsigned char)*k) || *k == '_'))
            return false;
    return true;
}

crmm_status crmm_param_table_validate(const crmm_plugin *plugin)
{
    if (!plugin->params)
        return CRMM_OK;
    size_t rows = 0;
    for (const crmm_param *s = plugin->params; s->key; s++) {
        if (++rows > CRMM_PARAMS_MAX)
            return crmm_set_error(CRMM_ERROR_PLUGIN, "more than %d parameters", CRMM_PARAMS_MAX);
        if (!key_well_formed(s->key))
            return crmm_set_error(CRMM_ERROR_PLUGIN, "parameter key '%s' is not [a-z0-9_]+", s->key);
        if (strcmp(s->key, "plugin") == 0 || strcmp(s->key, "upstream") == 0)
            return crmm_set_error(CRMM_ERROR_PLUGIN, "parameter key '%s' is reserved", s->key);
        if (s->type < CRMM_PARAM_SIZE || s->type > CRMM_PARAM_DOUBLE)
            return crmm_set_error(CRMM_ERROR_PLUGIN, "parameter '%s' has unknown type %d", s->key, (int)s->type);
        if (s->type == CRMM_PARAM_ENUM && (!s->choices || !*s->choices))
            return crmm_set_error(CRMM_ERROR_PLUGIN, "enum parameter '%s' has no choices", s->key);
        for (const crmm_param *t = plugin->params; t != s; t++)
            if (strcmp(t->key, s->key) == 0)
                return crmm_set_error(CRMM_ERROR_PLUGIN, "parameter '%s' appears twice", s->key);
        if (s->default_value) {
            crmm_param_value v = {0};
            if (crmm_param_validate(s, s->default_value, &v) != CRMM_OK)
                return crmm_set_error(CRMM_ERROR_PLUGIN, "default of %s", crmm_last_error_detail());
        }
        crmm_status st = row_validate(plugin, s);
        if (st != CRMM_OK)
            return st;
    }
    return CRMM_OK;
}

crmm_status crmm_params_new(const crmm_plugin *plugin, const char *name, crmm_params **out)
{
    crmm_params *p = calloc(1, sizeof *p);
    if (!p)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "params: malloc failed");
    p->plugin = plugin;
    p->device = -1;
    snprintf(p->name, sizeof p->name, "%s", name ? name : "");
    size_t n = 0;
    if (plugin->params)
        while (plugin->params[n].key)
            n++;
    p->count = n;
    p->values = n ? calloc(n, sizeof *p->values) : NULL;
    if (n && !p->values) {
        free(p);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "params: malloc failed");
    }
    for (size_t i = 0; i < n; i++) {
        crmm_param_value *v = &p->values[i];
        v->spec = &plugin->params[i];
        if (v->spec->default_value) {
            v->text = strdup(v->spec->default_value);
            if (!v->text) {
                crmm_params_free(p);
                return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "params: malloc failed");
            }
            if (crmm_param_validate(v->spec, v->text, v) != CRMM_OK) {
                crmm_params_free(p);
                return CRMM_ERROR_PLUGIN;
            }
            v->has_value = true;
        }
    }
    *out = p;
    return CRMM_OK;
}

void crmm_params_free(crmm_params *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->count; i++)
        free(p->values[i].text);
    free(p->values);
    free(p);
}

static crmm_param_value *find_value(const crmm_params *p, const char *key)
{
    if (!p || !key)
        return NULL;
    for (size_t i = 0; i < p->count; i++)
        if (strcmp(p->values[i].spec->key, key) == 0)
            return &p->values[i];
    return NULL;
}

crmm_status crmm_params_set(crmm_params *p, const char *key, const char *value)
{
    crmm_param_value *v = find_value(p, key);
    if (!v) {
        if (p->count == 0)
            return crmm_set_error(CRMM_ERROR_CONFIG, "unknown key '%s': plugin %s takes no parameters", key, p->plugin->name);
        crmm_suggestion s;
        crmm_suggestion_start(&s, key);
        for (size_t i = 0; i < p->count; i++)
            crmm_suggestion_consider(&s, p->values[i].spec->key);
        const char *best = crmm_suggestion_best(&s);
        if (best)
            return crmm_set_error(CRMM_ERROR_CONFIG, "unknown key '%s' for plugin %s (did you mean '%s'?)", key, p->plugin->name, best);
        return crmm_set_error(CRMM_ERROR_CONFIG, "unknown key '%s' for plugin %s", key, p->plugin->name);
    }
    crmm_param_value nv = *v;
    nv.percent = 0;
    if (crmm_param_validate(v->spec, value, &nv) != CRMM_OK)
        return CRMM_ERROR_CONFIG;
    if (nv.percent == 0.0 && check_range(p->plugin, v->spec, nv.u) != CRMM_OK)
        return CRMM_ERROR_CONFIG;
    char *t = strdup(value);
    if (!t)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "params: malloc failed");
    free(v->text);
    nv.text = t;
    nv.given = true;
    nv.has_value = true;
    *v = nv;
    return CRMM_OK;
}

static bool is_list_separator(char c) { return c == ' ' || c == '\t' || c == '\n' || c == ','; }

/* The value at *s of a parameter list into out (as long as the rest of the list), *s moved past
 * it: a word ending at a separator, or a double-quoted value in which separators are kept and
 * \" and \\ stand for " and \. False for a quote not closed, or not followed by a separator. */
static bool take_list_value(const char **s, char *out)
{
    const char *c = *s;
    if (*c != '"') {
        while (*c && !is_list_separator(*c))
            *out++ = *c++;
        *out = '\0';
        *s = c;
        return true;
    }
    for (c++; *c && *c != '"'; c++) {
        if (*c == '\\' && (c[1] == '"' || c[1] == '\\'))
            c++;
        *out++ = *c;
    }
    *out = '\0';
    if (*c != '"' || (c[1] && !is_list_separator(c[1])))
        return false;
    *s = c + 1;
    return true;
}

crmm_status crmm_params_set_list(crmm_params *p, const char *list)
{
    if (!list)
        return CRMM_OK;
    size_t n = strlen(list);
    char *key = malloc(n + 1), *value = malloc(n + 1);
    if (!key || !value) {
        free(key);
        free(value);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "params: malloc failed");
    }
    crmm_status st = CRMM_OK;
    for (const char *s = list; st == CRMM_OK;) {
        while (is_list_separator(*s))
            s++;
        if (!*s)
            break;
        const char *start = s;
        size_t kl = 0;
        while (*s && *s != '=' && !is_list_separator(*s))
            key[kl++] = *s++;
        key[kl] = '\0';
        if (*s != '=' || !kl) {
            while (*s && !is_list_separator(*s))
                s++;
            st = crmm_set_error(CRMM_ERROR_CONFIG, "'%.*s' is not key=value", (int)(s - start), start);
            break;
        }
        s++;
        if (!take_list_value(&s, value))
            st = crmm_set_error(CRMM_ERROR_CONFIG, "'%s': a quoted value must end with '\"' before the next parameter", key);
        else if (crmm_params_is_set(p, key))
            st = crmm_set_error(CRMM_ERROR_CONFIG, "'%s' given twice", key);
        else
            st = crmm_params_set(p, key, value);
    }
    free(key);
    free(value);
    return st;
}

crmm_status crmm_params_check_required(const crmm_params *p)
{
    for (size_t i = 0; i < p->count; i++)
        if ((p->values[i].spec->flags & CRMM_PARAM_REQUIRED) && !p->values[i].has_value)
            return crmm_set_error(CRMM_ERROR_CONFIG, "plugin %s needs '%s' (%s)", p->plugin->name,
                                  p->values[i].spec->key, p->values[i].spec->help ? p->values[i].spec->help : "");
    return CRMM_OK;
}

/* The value of `key` if it has type t; `dest` is the caller's out-pointer, checked here. */
static crmm_status lookup(const crmm_params *p, const char *key, crmm_param_type t, const void *dest,
                          const crmm_param_value **out)
{
    if (!p || !key || !dest)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "params: NULL argument");
    const crmm_param_value *v = find_value(p, key);
    if (!v)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "plugin %s has no parameter '%s'", p->plugin->name, key);
    if (v->spec->type != t && !(t == CRMM_PARAM_STRING && v->spec->type == CRMM_PARAM_ENUM))
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "parameter '%s' of plugin %s is a %s, not a %s", key,
                              p->plugin->name, crmm_param_type_name(v->spec->type), crmm_param_type_name(t));
    if (!v->has_value)
        return crmm_set_error(CRMM_ERROR_NOT_FOUND, "parameter '%s' of plugin %s has no value", key, p->plugin->name);
    *out = v;
    return CRMM_OK;
}

crmm_status crmm_params_get_size(const crmm_params *p, const char *key, uint64_t *out)
{
    const crmm_param_value *v;
    crmm_status st = lookup(p, key, CRMM_PARAM_SIZE, out, &v);
    if (st != CRMM_OK)
        return st;
    if (v->percent > 0.0) {
        int dev = p->device;
        if (dev < 0 && (st = crmm_cuda_current_device(&dev)) != CRMM_OK)
            return crmm_error_add_context("%s = %s needs a CUDA device", key, v->text);
        uint64_t total;
        if ((st = crmm_cuda_device_memory(dev, NULL, &total)) != CRMM_OK ||
            (st = crmm_parse_size(v->text, total, out, NULL)) != CRMM_OK || /* validated already: the same rules */
            (st = check_range(p->plugin, v->spec, *out)) != CRMM_OK) /* a percentage's range is known only now */
            return crmm_error_add_context("%s = %s", key, v->text);
        return CRMM_OK;
    }
    *out = v->u;
    return CRMM_OK;
}

crmm_status crmm_params_get_uint(const crmm_params *p, const char *key, uint64_t *out)
{
    const crmm_param_value *v;
    crmm_status st = lookup(p, key, CRMM_PARAM_UINT, out, &v);
    if (st == CRMM_OK)
        *out = v->u;
    return st;
}

crmm_status crmm_params_get_bool(const crmm_params *p, const char *key, bool *out)
{
    const crmm_param_value *v;
    crmm_status st = lookup(p, key, CRMM_PARAM_BOOL, out, &v);
    if (st == CRMM_OK)
        *out = v->b;
    return st;
}

crmm_status crmm_params_get_double(const crmm_params *p, const char *key, double *out)
{
    const crmm_param_value *v;
    crmm_status st = lookup(p, key, CRMM_PARAM_DOUBLE, out, &v);
    if (st == CRMM_OK)
        *out = v->d;
    return st;
}

crmm_status crmm_params_get_enum(const crmm_params *p, const char *key, int *out)
{
    const crmm_param_value *v;
    crmm_status st = lookup(p, key, CRMM_PARAM_ENUM, out, &v);
    if (st == CRMM_OK)
        *out = v->choice;
    return st;
}

crmm_status crmm_params_get_string(const crmm_params *p, const char *key, const char **out)
{
    const crmm_param_value *v;
    crmm_status st = lookup(p, key, CRMM_PARAM_STRING, out, &v);
    if (st == CRMM_OK)
        *out = v->text;
    return st;
}

bool crmm_params_size_percent(const crmm_params *p, const char *key, double *percent)
{
    const crmm_param_value *v = find_value(p, key);
    if (!v || v->spec->type != CRMM_PARAM_SIZE || !v->has_value || v->percent <= 0.0)
        return false;
    if (percent)
        *percent = v->percent;
    return true;
}

crmm_status crmm_params_parse(const crmm_params *p, void *cfg)
{
    if (!p || !cfg)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "params_parse: %s is NULL", !p ? "params" : "cfg");
    if (!p->plugin->config_size)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "plugin %s has no config struct (config_size 0)",
                              p->plugin->name);
    for (size_t i = 0; i < p->count; i++) {
        const crmm_param_value *v = &p->values[i];
        if (!v->has_value)
            continue;
        char *at = (char *)cfg + v->spec->offset;
        switch (v->spec->type) {
        case CRMM_PARAM_SIZE: {
            uint64_t x;
            crmm_status st = crmm_params_get_size(p, v->spec->key, &x); /* checks the range */
            if (st != CRMM_OK)
                return st;
            memcpy(at, &x, sizeof x);
            break;
        }
        case CRMM_PARAM_UINT: memcpy(at, &v->u, sizeof v->u); break;
        case CRMM_PARAM_BOOL: memcpy(at, &v->b, sizeof v->b); break;
        case CRMM_PARAM_DOUBLE: memcpy(at, &v->d, sizeof v->d); break;
        case CRMM_PARAM_ENUM: memcpy(at, &v->choice, sizeof v->choice); break;
        case CRMM_PARAM_STRING: {
            const char *t = v->text;
            memcpy(at, &t, sizeof t);
            break;
        }
        }
    }
    return CRMM_OK;
}

uint64_t crmm_params_given(const crmm_params *p)
{
    uint64_t given = 0;
    for (size_t i = 0; p && i < p->count; i++)
        if (p->values[i].given)
            given |= (uint64_t)1 << i;
    return given;
}

/* A size given as a percentage is a share of a device's memory: over host memory there is no
 * device to take it from, so the build would fail. Refused here, naming the key, for every
 * plugin's size parameters. */
static crmm_status check_no_percent_over_host(const crmm_params *p, const char **key)
{
    for (size_t i = 0; i < p->count; i++) {
        const crmm_param_value *v = &p->values[i];
        if (v->spec->type == CRMM_PARAM_SIZE && v->has_value && v->percent > 0.0) {
            *key = v->spec->key;
            return crmm_set_error(CRMM_ERROR_CONFIG, "%s: %s = %s: a percentage refers to a device's memory; over "
                                  "host memory give it in bytes (e.g. 64MiB)", p->plugin->name, v->spec->key, v->text);
        }
    }
    return CRMM_OK;
}

crmm_status crmm_params_check_rules(const crmm_params *p, bool host_memory, const char **key)
{
    *key = NULL;
    crmm_status st = CRMM_OK;
    if (p->plugin->validate) {
        crmm_clear_error();
        st = p->plugin->validate(p, host_memory, key); /* first: its message is the more particular */
        if (st != CRMM_OK && crmm_last_status() == CRMM_OK)
            crmm_set_error(st, "%s: its parameters were refused without a message", p->plugin->name);
    }
    if (st == CRMM_OK && host_memory)
        st = check_no_percent_over_host(p, key);
    return st;
}

bool crmm_params_is_set(const crmm_params *p, const char *key)
{
    const crmm_param_value *v = find_value(p, key);
    return v && v->given;
}

const char *crmm_params_resource_name(const crmm_params *p) { return p ? p->name : ""; }
int crmm_params_device(const crmm_params *p) { return p ? p->device : -1; }
const char *crmm_params_plugin_path(const crmm_params *p) { return p ? p->plugin_dirs : NULL; }
