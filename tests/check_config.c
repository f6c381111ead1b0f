/* check_config.c — the INI config: good files, a table of bad ones, instances, crmm_init.
 *
 * The files under tests/configs/ are the table: good-*.ini must load; every bad-*.ini starts with
 * "; expect LINE: SUBSTRING" and must fail with CRMM_ERROR_CONFIG and "FILE:LINE: ...SUBSTRING".
 * Each file is also loaded with CRLF line endings and after a UTF-8 byte-order mark. The same
 * files drive tests/check_tools.sh (crmm check-config).
 *
 * No CUDA call may happen while a config is loaded (docs/contracts.md, Configs). The CUDA entry points that the
 * core and the plugins used here call are defined below: the dynamic linker binds libcrmm and the
 * plugins to these definitions in the executable, which count the call and forward it to
 * libcudart, so a test can assert that loading made none. Everything here runs without a GPU. */
#include "build_config.h"
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "plugins/paramtest_plugin.h"
#include "test_support.h"

/* ---- counting CUDA calls -------------------------------------------------------------------- */

static int cuda_calls;

#define FORWARD(name, params, args) \
    cudaError_t CUDARTAPI name params \
    { \
        cuda_calls++; \
        cudaError_t (*real) params; \
        void *sym = dlsym(RTLD_NEXT, #name); \
        if (!sym) \
            return cudaErrorUnknown; \
        memcpy(&real, &sym, sizeof real); \
        return real args; \
    }
FORWARD(cudaGetDeviceCount, (int *count), (count))
FORWARD(cudaGetDevice, (int *device), (device))
FORWARD(cudaSetDevice, (int device), (device))
FORWARD(cudaMemGetInfo, (size_t *free_bytes, size_t *total), (free_bytes, total))
FORWARD(cudaMalloc, (void **ptr, size_t size), (ptr, size))
FORWARD(cudaMallocManaged, (void **ptr, size_t size, unsigned int flags), (ptr, size, flags))
FORWARD(cudaHostAlloc, (void **ptr, size_t size, unsigned int flags), (ptr, size, flags))
FORWARD(cudaFree, (void *ptr), (ptr))
FORWARD(cudaFreeHost, (void *ptr), (ptr))

/* ---- the config files ----------------------------------------------------------------------- */

#define MAX_FILES 128
static char good_files[MAX_FILES][PATH_MAX], bad_files[MAX_FILES][PATH_MAX];
static int ngood, nbad;
static char configs_dir[PATH_MAX];

static int compare_names(const void *a, const void *b) { return strcmp(a, b); }

/* Fills good_files and bad_files from $CRMM_TEST_SRCDIR/configs (in the parent, before forking). */
static void find_config_files(void)
{
    const char *src = getenv("CRMM_TEST_SRCDIR");
    snprintf(configs_dir, sizeof configs_dir, "%s/configs", src && *src ? src : "tests");
    DIR *d = opendir(configs_dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".ini") != 0)
            continue;
        char *slot = NULL;
        if (strncmp(e->d_name, "good-", 5) == 0 && ngood < MAX_FILES)
            slot = good_files[ngood++];
        else if (strncmp(e->d_name, "bad-", 4) == 0 && nbad < MAX_FILES)
            slot = bad_files[nbad++];
        if (slot && snprintf(slot, PATH_MAX, "%s/%s", configs_dir, e->d_name) >= PATH_MAX)
            slot[0] = '\0'; /* too long: the test of this file fails */
    }
    closedir(d);
    qsort(good_files, (size_t)ngood, PATH_MAX, compare_names);
    qsort(bad_files, (size_t)nbad, PATH_MAX, compare_names);
}

/* `text` with every "\n" turned into "\r\n" (malloc'd). */
static char *to_crlf(const char *text)
{
    char *out = malloc(strlen(text) * 2 + 1), *o = out;
    ck_assert_ptr_nonnull(out);
    for (const char *t = text; *t; t++) {
        if (*t == '\n')
            *o++ = '\r';
        *o++ = *t;
    }
    *o = '\0';
    return out;
}

/* `text` after a UTF-8 byte-order mark (malloc'd). */
static char *with_bom(const char *text)
{
    char *out = malloc(strlen(text) + 4);
    ck_assert_ptr_nonnull(out);
    snprintf(out, strlen(text) + 4, "\xEF\xBB\xBF%s", text);
    return out;
}

/* Reads "; expect LINE: SUBSTRING" from the first line of a bad config. */
static void read_expectation(const char *text, const char *path, int *line, char *sub, size_t subsize)
{
    int n = 0;
    ck_assert_msg(sscanf(text, "; expect %d: %n", line, &n) == 1 && n > 0, "%s: first line is not '; expect LINE: ...'", path);
    const char *s = text + n, *eol = strchr(s, '\n');
    size_t len = eol ? (size_t)(eol - s) : strlen(s);
    ck_assert_uint_lt(len, subsize);
    memcpy(sub, s, len);
    sub[len] = '\0';
}

/* Asserts that the last error is "config error: ORIGIN:LINE: ...SUB...". */
static void assert_config_error(crmm_status st, const char *origin, int line, const char *sub)
{
    ck_assert_msg(st == CRMM_ERROR_CONFIG, "%s: %s instead of CRMM_ERROR_CONFIG (%s)", origin, crmm_status_name(st),
                  crmm_last_error());
    char prefix[PATH_MAX + 64];
    snprintf(prefix, sizeof prefix, "config error: %s:%d: ", origin, line);
    const char *msg = crmm_last_error();
    ck_assert_msg(strncmp(msg, prefix, strlen(prefix)) == 0, "%s: expected line %d, got '%s'", origin, line, msg);
    ck_assert_msg(strstr(msg + strlen(prefix), sub) != NULL, "%s: '%s' lacks '%s'", origin, msg, sub);
}

START_TEST(test_bad_file)
{
    const char *path = bad_files[_i];
    char *text = crmm_test_read_file_or_fail(path);
    int line;
    char sub[512];
    read_expectation(text, path, &line, sub, sizeof sub);
    crmm_config *cfg = (crmm_config *)&cfg; /* must stay untouched */
    cuda_calls = 0;
    assert_config_error(crmm_config_load_file(path, &cfg), path, line, sub);
    ck_assert_ptr_eq(cfg, (crmm_config *)&cfg);
    /* the same text from a string, with CRLF line endings, and after a byte-order mark */
    assert_config_error(crmm_config_load_string(text, path, &cfg), path, line, sub);
    char *crlf = to_crlf(text);
    assert_config_error(crmm_config_load_string(crlf, path, &cfg), path, line, sub);
    char *bom = with_bom(text);
    assert_config_error(crmm_config_load_string(bom, path, &cfg), path, line, sub);
    ck_assert_int_eq(cuda_calls, 0);
    free(bom);
    free(crlf);
    free(text);
}
END_TEST

START_TEST(test_good_file)
{
    const char *path = good_files[_i];
    char *text = crmm_test_read_file_or_fail(path);
    crmm_config *cfg = NULL;
    cuda_calls = 0;
    ck_assert_crmm_ok(crmm_config_load_file(path, &cfg));
    ck_assert_str_eq(crmm_config_origin(cfg), path);
    size_t n = crmm_config_resource_count(cfg);
    crmm_config_free(cfg);
    char *variants[] = {text, to_crlf(text), with_bom(text)};
    for (int v = 0; v < 3; v++) {
        ck_assert_msg(crmm_config_load_string(variants[v], "x.ini", &cfg) == CRMM_OK, "%s (variant %d): %s", path, v,
                      crmm_last_error());
        ck_assert_uint_eq(crmm_config_resource_count(cfg), n);
        crmm_config_free(cfg);
    }
    ck_assert_int_eq(cuda_calls, 0);
    free(variants[1]);
    free(variants[2]);
    free(text);
}
END_TEST

START_TEST(test_installed_default_config)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/../../conf/crmm.ini", configs_dir);
    crmm_config *cfg = NULL;
    cuda_calls = 0;
    ck_assert_crmm_ok(crmm_config_load_file(path, &cfg));
    /* the default is the expandable GPU pool over cudaMalloc */
    ck_assert_str_eq(crmm_config_default_resource(cfg, 0), "pool");
    ck_assert_str_eq(crmm_config_resource_plugin(cfg, 0), "cuda");
    ck_assert_str_eq(crmm_config_resource_plugin(cfg, 1), "pool");
    ck_assert(!crmm_config_resource_is_host(cfg, 1));
    ck_assert_int_eq(cuda_calls, 0);
    crmm_config_free(cfg);
}
END_TEST

/* The interposition above really sees the core's CUDA calls (else "no CUDA call" means nothing). */
START_TEST(test_cuda_calls_are_counted)
{
    cuda_calls = 0;
    int n;
    crmm_cuda_device_count(&n);
    ck_assert_int_ge(cuda_calls, 1);
}
END_TEST

static crmm_config *load_configs_file(const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%.60s", configs_dir, name);
    crmm_config *cfg = NULL;
    ck_assert_crmm_ok(crmm_config_load_file(path, &cfg));
    return cfg;
}

START_TEST(test_good_full_contents)
{
    crmm_config *cfg = load_configs_file("good-full.ini");
    static const char *const names[] = {"heap", "mid", "top", "params", "gpu"};
    static const char *const plugins[] = {"host", "template", "template", "paramtest", "cuda"};
    static const char *const upstreams[] = {NULL, "heap", "mid", "heap", NULL};
    static const size_t nparams[] = {0, 1, 1, 7, 0};
    ck_assert_uint_eq(crmm_config_resource_count(cfg), 5);
    for (size_t i = 0; i < 5; i++) {
        ck_assert_str_eq(crmm_config_resource_name(cfg, i), names[i]);
        ck_assert_str_eq(crmm_config_resource_plugin(cfg, i), plugins[i]);
        if (upstreams[i])
            ck_assert_str_eq(crmm_config_resource_upstream(cfg, i), upstreams[i]);
        else
            ck_assert_ptr_null(crmm_config_resource_upstream(cfg, i));
        ck_assert_uint_eq(crmm_config_resource_param_count(cfg, i), nparams[i]);
        ck_assert(crmm_config_resource_is_host(cfg, i) == (i != 4));
    }
    ck_assert_ptr_null(crmm_config_resource_name(cfg, 5));
    ck_assert_ptr_null(crmm_config_resource_plugin(cfg, 99));
    ck_assert(!crmm_config_resource_is_host(cfg, 5));
    /* values as written, trimmed, inline comments gone */
    ck_assert_str_eq(crmm_config_resource_param_key(cfg, 1, 0), "tag");
    ck_assert_str_eq(crmm_config_resource_param_value(cfg, 1, 0), "0x2A");
    ck_assert_str_eq(crmm_config_resource_param_key(cfg, 3, 5), "mode");
    ck_assert_str_eq(crmm_config_resource_param_value(cfg, 3, 4), "some text with spaces");
    ck_assert_ptr_null(crmm_config_resource_param_key(cfg, 3, 7));
    ck_assert_ptr_null(crmm_config_resource_param_value(cfg, 0, 0));
    /* per-device resources, else the default */
    ck_assert_str_eq(crmm_config_default_resource(cfg, 0), "params");
    ck_assert_str_eq(crmm_config_default_resource(cfg, 1), "gpu");
    ck_assert_str_eq(crmm_config_default_resource(cfg, 2), "top");
    ck_assert_str_eq(crmm_config_default_resource(cfg, -1), "top");
    ck_assert_ptr_null(crmm_config_plugin_path(cfg));

    /* typed values reach the plugin; the instance is named after its section */
    crmm_resource *p = NULL;
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "params", 0, &p));
    paramtest_values v;
    ck_assert_crmm_ok(crmm_resource_control(p, PARAMTEST_CONTROL_VALUES, &v));
    ck_assert_uint_eq(v.id, 9);
    ck_assert_uint_eq(v.count, 10);
    ck_assert_uint_eq(v.limit, 1610612736ull);
    ck_assert(v.enabled);
    ck_assert_str_eq(v.label, "some text with spaces");
    ck_assert_str_eq(v.mode, "fast");
    ck_assert(v.ratio == 2.5);
    ck_assert(v.set_id && v.set_count && v.set_limit && v.set_enabled && v.set_label && v.set_mode && v.set_ratio);
    ck_assert_str_eq(v.name, "params");
    ck_assert_int_eq(v.device, -1); /* a host chain: no device, whatever was asked */
    ck_assert_str_eq(crmm_resource_name(p), "params");
    ck_assert_str_eq(crmm_resource_name(crmm_resource_upstream(p)), "heap");
    crmm_resource_release(p);
    crmm_config_free(cfg);
}
END_TEST

START_TEST(test_defaults_when_nothing_is_named)
{
    crmm_config *cfg = load_configs_file("good-empty.ini");
    ck_assert_uint_eq(crmm_config_resource_count(cfg), 0);
    ck_assert_ptr_null(crmm_config_default_resource(cfg, 0));
    ck_assert_ptr_null(crmm_config_default_resource(cfg, -1));
    crmm_config_free(cfg);
    cfg = load_configs_file("good-no-default.ini");
    ck_assert_str_eq(crmm_config_default_resource(cfg, 3), "first");
    crmm_config_free(cfg);
    cfg = load_configs_file("good-long-name.ini");
    ck_assert_str_eq(crmm_config_resource_name(cfg, 0), "a_resource_name_of_forty_seven_characters_xxxxx");
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "a_resource_name_of_forty_seven_characters_xxxxx", -1, &mr));
    ck_assert_str_eq(crmm_resource_name(mr), "a_resource_name_of_forty_seven_characters_xxxxx");
    crmm_resource_release(mr);
    crmm_config_free(cfg);
    ck_assert_ptr_null(crmm_config_default_resource(NULL, 0));
    ck_assert_uint_eq(crmm_config_resource_count(NULL), 0);
}
END_TEST

/* ---- errors that need no file, or a special one -------------------------------------------- */

static const struct { const char *text; int line; const char *message; } bad_strings[] = {
    {"[crmm]\nplugin_path = plugins\n", 2, "plugin_path entry 'plugins' is relative; give absolute directories"},
    {"[crmm]\nplugin_path = /opt/a:rel/b\n", 2, "plugin_path entry 'rel/b' is relative"},
    {"[resource.t]\nplugin = template\nupstream = h\n[resource.h]\nplugin = host\nupstream = t\n", 6,
     "plugin host takes no upstream"},
    {"[resource.p]\nplugin = paramtest\nid = 1\nlimit = 0%\n", 4, "percentage must be in (0, 100]"},
    {"[resource.p]\nplugin = paramtest\nid = 1\nlimit = 1.5\n", 4, "a byte count must be whole"},
    {"[resource.p]\nplugin = paramtest\nid = 1\nratio = nan\n", 4, "ratio: 'nan' is not a number"},
    {"[resource.p]\nplugin = paramtest\nid =\n", 3, "id: '' is not an unsigned integer"},
    {"[resource.p]\nplugin =\n", 2, "'' is not a plugin name"},
    {"[crmm]\n= value\n", 2, "unknown key '' in [crmm]"},
    {"[crmm\n", 1, "section header has no closing ']'"},
    {"[crmm ; comment]\n", 1, "section header has no closing ']'"},
    {"[]\nx = 1\n", 1, "unknown section []"},
    {"[crmm]\n  default = a\n    continued\n", 3, "syntax error"},
    {"[resource.a]\nplugin = host\n\n\n[resource.b]\nplugin = template\nupstream = c\n[resource.c]\nplugin = template\nupstream = b\n",
     7, "upstream cycle: b -> c -> b"},
};

START_TEST(test_bad_string)
{
    crmm_config *cfg = NULL;
    assert_config_error(crmm_config_load_string(bad_strings[_i].text, "inline.ini", &cfg), "inline.ini",
                        bad_strings[_i].line, bad_strings[_i].message);
    ck_assert_ptr_null(cfg);
}
END_TEST

START_TEST(test_line_length_limit)
{
    /* the longest line inih takes: 198 characters after leading blanks (plus "\n\0") */
    char text[1024], value[400];
    const char *key = "default = ";
    for (size_t len = 196; len <= 200; len++) {
        size_t vlen = len - strlen(key);
        memset(value, 'a', vlen);
        value[vlen] = '\0';
        snprintf(text, sizeof text, "[crmm]\n%s%s\n[resource.%.40s]\nplugin = host\n", key, value, value);
        crmm_config *cfg = NULL;
        crmm_status st = crmm_config_load_string(text, "long.ini", &cfg);
        if (len <= 198) {
            ck_assert_msg(st == CRMM_ERROR_CONFIG && strstr(crmm_last_error(), "is not a [resource.*]"),
                          "line of %zu: %s", len, crmm_last_error());
        } else {
            assert_config_error(st, "long.ini", 2, "line is longer than 198 characters");
        }
    }
}
END_TEST

START_TEST(test_origin_defaults)
{
    crmm_config *cfg = NULL;
    assert_config_error(crmm_config_load_string("[crmn]\n", NULL, &cfg), "<string>", 1, "unknown section");
    ck_assert_crmm_ok(crmm_config_load_string("", NULL, &cfg));
    ck_assert_str_eq(crmm_config_origin(cfg), "<string>");
    crmm_config_free(cfg);
    ck_assert_crmm_ok(crmm_config_load_default(&cfg));
    ck_assert_str_eq(crmm_config_origin(cfg), "<built-in>");
    ck_assert_str_eq(crmm_config_resource_plugin(cfg, 0), "cuda");
    ck_assert_ptr_nonnull(crmm_config_default_resource(cfg, 0));
    crmm_config_free(cfg);
    crmm_config_free(NULL);
}
END_TEST

START_TEST(test_load_null_arguments)
{
    crmm_config *cfg = NULL;
    ck_assert_crmm(crmm_config_load_file(NULL, &cfg), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_config_load_file("x.ini", NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_config_load_string(NULL, "x", &cfg), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_config_load_string("", "x", NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_config_load_default(NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_config_create_resource(NULL, "a", -1, (crmm_resource **)&cfg), CRMM_ERROR_INVALID_ARGUMENT);
}
END_TEST

/* ---- files on disk ------------------------------------------------------------------------- */

static char tmpdir[PATH_MAX];

static void tmpdir_setup(void)
{
    char *d = crmm_test_tmpdir();
    ck_assert_ptr_nonnull(d);
    snprintf(tmpdir, sizeof tmpdir, "%s", d);
    free(d);
}

/* Writes `len` bytes to tmpdir/name; returns the path (one of 4 static buffers, in turn). */
static const char *write_tmp(const char *name, const char *data, size_t len)
{
    static char paths[4][PATH_MAX + 64];
    static int next;
    char *path = paths[next++ % 4];
    snprintf(path, sizeof paths[0], "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    fclose(f);
    return path;
}

START_TEST(test_binary_file)
{
    static const char data[] = "[crmm]\ndefault = a\0\x01\x02\n[resource.a]\nplugin = host\n";
    const char *path = write_tmp("binary.ini", data, sizeof data - 1);
    crmm_config *cfg = NULL;
    ck_assert_crmm(crmm_config_load_file(path, &cfg), CRMM_ERROR_CONFIG);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "not a text file (contains NUL bytes)"));
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), path));
    ck_assert_ptr_null(cfg);
}
END_TEST

START_TEST(test_missing_file_and_directory)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/absent.ini", tmpdir);
    crmm_config *cfg = NULL;
    ck_assert_crmm(crmm_config_load_file(path, &cfg), CRMM_ERROR_IO);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), path));
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "No such file"));
    ck_assert_crmm(crmm_config_load_file(tmpdir, &cfg), CRMM_ERROR_IO);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), tmpdir));
    ck_assert_ptr_null(cfg);
}
END_TEST

START_TEST(test_big_file)
{
    /* many lines, past the reader's first buffer; the error line is counted right */
    size_t n = 20000;
    char *text = malloc(n * 16 + 64), *t = text;
    ck_assert_ptr_nonnull(text);
    t += sprintf(t, "[resource.h]\nplugin = host\n");
    for (size_t i = 0; i < n; i++)
        t += sprintf(t, "; comment %zu\n", i);
    t += sprintf(t, "[crmm]\ndefault = x\n");
    const char *path = write_tmp("big.ini", text, (size_t)(t - text));
    crmm_config *cfg = NULL;
    assert_config_error(crmm_config_load_file(path, &cfg), path, (int)n + 4, "default 'x' is not a [resource.*]");
    free(text);
}
END_TEST

START_TEST(test_skipping_load_leaves_out_unloadable_plugins)
{
    static const char text[] =
        "[crmm]\n"
        "default = q\n"
        "[resource.early]\nplugin = template\nupstream = p\n" /* stacked on a later one */
        "[resource.h]\nplugin = host\n"
        "[resource.p]\nplugin = nosuchplugin\nupstream = h\nbogus = 1\n" /* its keys are not checked */
        "[resource.q]\nplugin = template\nupstream = p\n"
        "[resource.r]\nplugin = template\nupstream = q\n"
        "[resource.t]\nplugin = template\nupstream = h\n"
        "[device.0]\nresource = r\n"
        "[device.1]\nresource = t\n";
    const char *path = write_tmp("skip.ini", text, sizeof text - 1);
    crmm_config *cfg = NULL;
    ck_assert_crmm(crmm_config_load_file(path, &cfg), CRMM_ERROR_CONFIG); /* the strict loader refuses it */
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "nosuchplugin"));
    ck_assert_crmm_ok(crmm_config_load_file_skipping(path, &cfg));
    ck_assert_uint_eq(crmm_config_resource_count(cfg), 2);
    ck_assert_str_eq(crmm_config_resource_name(cfg, 0), "h");
    ck_assert_str_eq(crmm_config_resource_name(cfg, 1), "t");
    ck_assert_int_eq(crmm_config_find_resource(cfg, "h"), 0);
    ck_assert_int_eq(crmm_config_find_resource(cfg, "t"), 1);
    ck_assert_int_eq(crmm_config_find_resource(cfg, "p"), -1); /* left out */
    ck_assert_int_eq(crmm_config_find_resource(cfg, NULL), -1);
    ck_assert_int_eq(crmm_config_find_resource(NULL, "h"), -1);
    /* in file order */
    ck_assert_uint_eq(crmm_config_skipped_count(cfg), 4);
    ck_assert_str_eq(crmm_config_skipped_name(cfg, 0), "early");
    ck_assert_str_eq(crmm_config_skipped_reason(cfg, 0), "its upstream 'p' was skipped");
    ck_assert_str_eq(crmm_config_skipped_name(cfg, 1), "p");
    ck_assert_ptr_nonnull(strstr(crmm_config_skipped_reason(cfg, 1), "nosuchplugin"));
    ck_assert_str_eq(crmm_config_skipped_name(cfg, 2), "q");
    ck_assert_str_eq(crmm_config_skipped_reason(cfg, 2), "its upstream 'p' was skipped");
    ck_assert_str_eq(crmm_config_skipped_name(cfg, 3), "r");
    ck_assert_str_eq(crmm_config_skipped_reason(cfg, 3), "its upstream 'q' was skipped");
    ck_assert_ptr_null(crmm_config_skipped_name(cfg, 4));
    ck_assert_ptr_null(crmm_config_skipped_reason(cfg, 4));
    /* the default and [device.0] named left-out resources: gone; [device.1] stays */
    ck_assert_str_eq(crmm_config_default_resource(cfg, 0), "h");
    ck_assert_str_eq(crmm_config_default_resource(cfg, 1), "t");
    crmm_resource *mr;
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "t", -1, &mr));
    ck_assert_str_eq(crmm_resource_kind(mr), "template");
    crmm_resource_release(mr);
    ck_assert_crmm(crmm_config_create_resource(cfg, "q", -1, &mr), CRMM_ERROR_NOT_FOUND);
    crmm_config_free(cfg);
    /* any other mistake still fails, with its line */
    static const char bad[] = "[resource.h]\nplugin = host\nbogus_key = 1\n[resource.p]\nplugin = nosuchplugin\n";
    path = write_tmp("bad.ini", bad, sizeof bad - 1);
    cfg = NULL;
    assert_config_error(crmm_config_load_file_skipping(path, &cfg), path, 3, "bogus_key");
    ck_assert_ptr_null(cfg);
    /* nothing to leave out: nothing skipped; the other loaders skip nothing */
    static const char ok[] = "[resource.h]\nplugin = host\n";
    path = write_tmp("ok.ini", ok, sizeof ok - 1);
    ck_assert_crmm_ok(crmm_config_load_file_skipping(path, &cfg));
    ck_assert_uint_eq(crmm_config_skipped_count(cfg), 0);
    ck_assert_ptr_null(crmm_config_skipped_name(cfg, 0));
    crmm_config_free(cfg);
    ck_assert_uint_eq(crmm_config_skipped_count(NULL), 0);
    ck_assert_crmm(crmm_config_load_file_skipping(NULL, &cfg), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_config_load_file_skipping(path, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    char absent[PATH_MAX + 32];
    snprintf(absent, sizeof absent, "%s/absent.ini", tmpdir);
    ck_assert_crmm(crmm_config_load_file_skipping(absent, &cfg), CRMM_ERROR_IO);
}
END_TEST

START_TEST(test_default_file)
{
    char buf[PATH_MAX];
    setenv("CRMM_CONFIG", "/some/where.ini", 1);
    ck_assert_str_eq(crmm_config_default_file(buf, sizeof buf), "/some/where.ini");
    /* unset or empty: the installed file when it exists, else NULL (the built-in default) */
    setenv("CRMM_CONFIG", "", 1);
    const char *f = crmm_config_default_file(buf, sizeof buf);
    if (f) {
        ck_assert_ptr_eq(f, buf);
        ck_assert_ptr_nonnull(strstr(f, "/crmm/crmm.ini"));
        ck_assert_int_eq(access(f, R_OK), 0);
    }
    unsetenv("CRMM_CONFIG");
    ck_assert_ptr_eq(crmm_config_default_file(buf, sizeof buf), f);
    ck_assert_ptr_null(crmm_config_default_file(buf, 4)); /* no room for the name */
}
END_TEST

/* Copies the built `host` plugin into dir/sub/crmm_NAME.so (so that only plugin_path finds it). */
static void copy_host_plugin(const char *sub, const char *name)
{
    const char *path = getenv("CRMM_PLUGIN_PATH");
    ck_assert_ptr_nonnull(path);
    char src[PATH_MAX], cmd[3 * PATH_MAX];
    const char *colon = strchr(path, ':');
    snprintf(src, sizeof src, "%.*s/crmm_host.so", colon ? (int)(colon - path) : (int)strlen(path), path);
    int n = snprintf(cmd, sizeof cmd, "mkdir -p '%s/%s' && cp -L '%s' '%s/%s/crmm_%s.so' && chmod 755 '%s/%s/crmm_%s.so'",
                     tmpdir, sub, src, tmpdir, sub, name, tmpdir, sub, name);
    ck_assert_int_lt(n, (int)sizeof cmd);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_plugin_path_relative_to_config)
{
    /* a plugin that is only in the config's own plugins/ folder: the loader also checks its name,
     * so the copy keeps the name `host` */
    copy_host_plugin("conf/plugins", "host");
    unsetenv("CRMM_PLUGIN_PATH");
    static const char text[] = "[crmm]\nplugin_path = plugins:/nonexistent\ndefault = h\n[resource.h]\nplugin = host\n";
    char sub[PATH_MAX + 16];
    snprintf(sub, sizeof sub, "%s/conf", tmpdir);
    char cfgpath[PATH_MAX + 32];
    snprintf(cfgpath, sizeof cfgpath, "%s/crmm.ini", sub);
    FILE *f = fopen(cfgpath, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    /* from another working directory: relative to the file, not to the cwd */
    ck_assert_int_eq(chdir("/"), 0);
    crmm_config *cfg = NULL;
    ck_assert_crmm_ok(crmm_config_load_file(cfgpath, &cfg));
    char want[PATH_MAX + 64];
    char real[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(sub, real));
    snprintf(want, sizeof want, "%s/plugins:/nonexistent", real);
    ck_assert_str_eq(crmm_config_plugin_path(cfg), want);
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "h", -1, &mr));
    ck_assert_str_eq(crmm_resource_kind(mr), "host");
    crmm_resource_release(mr);
    crmm_config_free(cfg);
    /* the same text from a string has no directory to be relative to */
    ck_assert_crmm(crmm_config_load_string(text, "s", &cfg), CRMM_ERROR_CONFIG);
    /* and without plugin_path the plugin is not found at all (unless crmm is installed) */
    char installed[PATH_MAX + 32];
    crmm_plugin_search_path(NULL, installed, PATH_MAX);
    strcat(installed, "/crmm_host.so");
    if (access(installed, F_OK) != 0) {
        ck_assert_crmm(crmm_config_load_string("[resource.h]\nplugin = host\n", "s", &cfg), CRMM_ERROR_CONFIG);
        ck_assert_ptr_nonnull(strstr(crmm_last_error(), "no plugin 'host'"));
    }
}
END_TEST

/* ---- instances ----------------------------------------------------------------------------- */

START_TEST(test_instances_shared_upstream)
{
    crmm_config *cfg = load_configs_file("good-shared-upstream.ini");
    crmm_resource *left = NULL, *right = NULL, *heap = NULL;
    cuda_calls = 0;
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "left", -1, &left));
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "right", 3, &right));
    ck_assert_int_eq(cuda_calls, 0); /* host chains need no device */
    ck_assert_ptr_ne(left, right);
    ck_assert_ptr_nonnull(crmm_resource_upstream(left));
    ck_assert_ptr_eq(crmm_resource_upstream(left), crmm_resource_upstream(right));
    ck_assert_str_eq(crmm_resource_name(left), "left");
    ck_assert_str_eq(crmm_resource_name(right), "right");
    ck_assert_str_eq(crmm_resource_kind(left), "template");
    /* asking for the upstream itself gives the shared instance, one more reference */
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "heap", -1, &heap));
    ck_assert_ptr_eq(heap, crmm_resource_upstream(left));
    ck_assert_str_eq(crmm_resource_name(heap), "heap");
    /* refs of heap: the cache, left, right, and ours */
    ck_assert_int_eq(crmm_resource_refcount(heap), 4);
    /* asking twice: the same resource, one more reference */
    crmm_resource *again = NULL;
    long before = crmm_resource_refcount(left);
    ck_assert_int_eq(before, 2); /* the cache and ours */
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "left", -1, &again));
    ck_assert_ptr_eq(again, left);
    ck_assert_int_eq(crmm_resource_refcount(left), before + 1);
    crmm_resource_release(again);
    /* freeing the config drops its references only: ours stay usable */
    crmm_config_free(cfg);
    ck_assert_int_eq(crmm_resource_refcount(left), 1);
    ck_assert_int_eq(crmm_resource_refcount(heap), 3);
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(left, 4096, NULL, &p));
    memset(p, 1, 4096);
    ck_assert_crmm_ok(crmm_resource_deallocate(left, p, 4096, NULL));
    crmm_resource_release(left);
    ck_assert_int_eq(crmm_resource_refcount(heap), 2);
    crmm_resource_release(right);
    ck_assert_int_eq(crmm_resource_refcount(heap), 1);
    crmm_resource_release(heap);
}
END_TEST

START_TEST(test_instances_errors)
{
    crmm_config *cfg = load_configs_file("good-shared-upstream.ini");
    crmm_resource *mr = (crmm_resource *)&cfg;
    ck_assert_crmm(crmm_config_create_resource(cfg, "lfet", -1, &mr), CRMM_ERROR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "no [resource.lfet]"));
    ck_assert_ptr_eq(mr, (crmm_resource *)&cfg);
    ck_assert_crmm(crmm_config_create_resource(cfg, NULL, -1, &mr), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_config_create_resource(cfg, "left", -1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_config_create_resource(cfg, "left", -2, &mr), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_config_create_resource(cfg, "left", 128, &mr), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_eq(mr, (crmm_resource *)&cfg);
    crmm_config_free(cfg);

    /* a create that fails in the plugin names the section; nothing is cached or leaked (without
     * an upstream: over host memory a percentage is refused when the config is loaded) */
    ck_assert_crmm_ok(crmm_config_load_string("[resource.h]\nplugin = host\n"
                                              "[resource.p]\nplugin = paramtest\nid = 1\nlimit = 50%\n",
                                              "pct.ini", &cfg));
    int n = 0;
    if (crmm_cuda_device_count(&n) != CRMM_OK) {
        ck_assert_crmm(crmm_config_create_resource(cfg, "p", -1, &mr), CRMM_ERROR_CUDA);
        ck_assert_ptr_nonnull(strstr(crmm_last_error(), "pct.ini:3: resource.p: "));
        ck_assert_ptr_nonnull(strstr(crmm_last_error(), "limit = 50%"));
        ck_assert_crmm(crmm_config_create_resource(cfg, "p", -1, &mr), CRMM_ERROR_CUDA);
    }
    crmm_config_free(cfg);
}
END_TEST

START_TEST(test_instances_gpu_chain_without_gpu)
{
    int n = 0;
    if (crmm_cuda_device_count(&n) == CRMM_OK)
        return; /* this checks the message a machine without a GPU gives */
    crmm_config *cfg = load_configs_file("good-full.ini");
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_config_create_resource(cfg, "gpu", -1, &mr), CRMM_ERROR_CUDA);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "resource.gpu needs a CUDA device"));
    ck_assert_ptr_null(mr);
    crmm_config_free(cfg);
}
END_TEST

/* ---- crmm's own settings ------------------------------------------------------------------- */

/* One table holds every [crmm] key and every variable crmm reads; a key and a variable on one row
 * are one setting (log_level and $CRMM_LOG_LEVEL). A value is checked by the row, and a variable
 * that is no row's is not read. */
START_TEST(test_settings_table)
{
    const crmm_setting *log_level = NULL;
    int keys = 0, vars = 0;
    for (const crmm_setting *r = crmm_settings(); r->key || r->env; r++) {
        ck_assert_ptr_nonnull(r->help);
        keys += r->key != NULL;
        vars += r->env != NULL;
        if (r->key && strcmp(r->key, "log_level") == 0)
            log_level = r;
    }
    ck_assert_int_eq(keys, 3); /* default, plugin_path, log_level */
    ck_assert_int_ge(vars, 6);
    ck_assert_ptr_nonnull(log_level);
    ck_assert_str_eq(log_level->env, "CRMM_LOG_LEVEL");
    ck_assert_crmm_ok(crmm_setting_check(log_level, "debug"));
    ck_assert_crmm(crmm_setting_check(log_level, "loud"), CRMM_ERROR_CONFIG);
    ck_assert_str_eq(crmm_last_error(), "config error: log_level: 'loud' is not a level (trace debug info warn error "
                                        "critical off)");
    ck_assert_crmm(crmm_setting_check(NULL, "debug"), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_setting_check(log_level, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    /* a variable of the table is read; one that is not is refused, even when set */
    ck_assert_int_eq(setenv("CRMM_LOG_FILE", "/tmp/from-env.csv", 1), 0);
    ck_assert_int_eq(setenv("CRMM_NOT_A_SETTING", "x", 1), 0);
    crmm_test_log_capture_begin();
    ck_assert_str_eq(crmm_getenv("CRMM_LOG_FILE"), "/tmp/from-env.csv");
    ck_assert_ptr_null(crmm_getenv("CRMM_NOT_A_SETTING"));
    char *log = crmm_test_log_capture_end();
    ck_assert_ptr_nonnull(strstr(log, "$CRMM_NOT_A_SETTING is not one of crmm's settings"));
    free(log);
    unsetenv("CRMM_LOG_FILE");
    unsetenv("CRMM_NOT_A_SETTING");
}
END_TEST

/* ---- crmm_init ----------------------------------------------------------------------------- */

START_TEST(test_init_with_path)
{
    static const char text[] = "[crmm]\nlog_level = debug\ndefault = h\n[resource.h]\nplugin = host\n";
    const char *path = write_tmp("init.ini", text, sizeof text - 1);
    ck_assert_ptr_null(crmm_current_config());
    ck_assert_crmm_ok(crmm_init(path));
    ck_assert_ptr_nonnull(crmm_current_config());
    ck_assert_str_eq(crmm_config_origin(crmm_current_config()), path);
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_DEBUG);
    /* a bad config is refused and the loaded one stays */
    const char *bad = write_tmp("bad.ini", "[crmm]\nlog_level = loud\n", 24);
    crmm_log_set_level(CRMM_LOG_WARN);
    ck_assert_crmm(crmm_init(bad), CRMM_ERROR_CONFIG);
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_WARN);
    ck_assert_str_eq(crmm_config_default_resource(crmm_current_config(), 0), "h");
    /* again with a good one: replaced; the first stays readable and usable until finalize */
    const crmm_config *first = crmm_current_config();
    const char *second = write_tmp("second.ini", "[resource.z]\nplugin = host\n", 27);
    ck_assert_crmm_ok(crmm_init(second));
    ck_assert_str_eq(crmm_config_origin(crmm_current_config()), second);
    ck_assert_str_eq(crmm_config_origin(first), path);
    crmm_resource *h;
    ck_assert_crmm_ok(crmm_config_create_resource((crmm_config *)first, "h", 0, &h));
    crmm_resource_release(h);
    crmm_finalize();
    ck_assert_ptr_null(crmm_current_config());
    crmm_finalize(); /* twice is safe */
    ck_assert_ptr_null(crmm_current_config());
}
END_TEST

START_TEST(test_init_missing_file)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/absent.ini", tmpdir);
    ck_assert_crmm(crmm_init(path), CRMM_ERROR_IO);
    ck_assert_ptr_null(crmm_current_config());
    setenv("CRMM_CONFIG", path, 1);
    ck_assert_crmm(crmm_init(NULL), CRMM_ERROR_IO);
    ck_assert_ptr_null(crmm_current_config());
    crmm_finalize();
}
END_TEST

/* A config path that is a directory says so (not just "cannot read"), and nothing is loaded. */
START_TEST(test_config_path_is_a_directory)
{
    crmm_config *cfg = NULL;
    ck_assert_crmm(crmm_config_load_file(tmpdir, &cfg), CRMM_ERROR_IO);
    ck_assert_ptr_null(cfg);
    ck_assert_msg(strstr(crmm_last_error(), "it is a directory") != NULL, "%s", crmm_last_error());
    ck_assert_msg(strstr(crmm_last_error(), tmpdir) != NULL, "%s", crmm_last_error());
    ck_assert_crmm(crmm_init(tmpdir), CRMM_ERROR_IO);
    ck_assert_ptr_null(crmm_current_config());
}
END_TEST

START_TEST(test_init_from_environment)
{
    static const char text[] = "[crmm]\nlog_level = error\n[resource.h]\nplugin = host\n";
    const char *path = write_tmp("env.ini", text, sizeof text - 1);
    setenv("CRMM_CONFIG", path, 1);
    ck_assert_crmm_ok(crmm_init(NULL));
    ck_assert_str_eq(crmm_config_origin(crmm_current_config()), path);
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_ERROR);
    crmm_finalize();
    crmm_finalize();
}
END_TEST

START_TEST(test_init_never_reads_the_working_directory)
{
    /* a cloned repository must not make a program load its config (and so its plugins) */
    static const char evil[] = "[crmm]\nplugin_path = .\ndefault = evil\n[resource.evil]\nplugin = evil\n";
    write_tmp("crmm.ini", evil, sizeof evil - 1);
    unsetenv("CRMM_CONFIG");
    char cwd[PATH_MAX];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_int_eq(chdir(tmpdir), 0);
    crmm_status st = crmm_init(NULL);
    ck_assert_int_eq(chdir(cwd), 0);
    ck_assert_msg(st == CRMM_OK, "crmm_init(NULL): %s", crmm_last_error());
    const char *origin = crmm_config_origin(crmm_current_config());
    ck_assert_msg(strcmp(origin, "<built-in>") == 0 || strstr(origin, "/crmm/crmm.ini") == origin + strlen(origin) - 14,
                  "crmm_init(NULL) loaded %s", origin);
    ck_assert_ptr_null(strstr(origin, tmpdir));
    crmm_finalize();
}
END_TEST

START_TEST(test_init_then_registry_without_device)
{
    /* with a host-only default, a program written for the GPU gets the host resource as the
     * current device's resource, and memory from it, also on a machine without a GPU */
    static const char text[] = "[crmm]\ndefault = h\n[resource.h]\nplugin = host\n";
    const char *path = write_tmp("reg.ini", text, sizeof text - 1);
    ck_assert_crmm_ok(crmm_init(path));
    crmm_resource *mr = crmm_get_current_device_resource();
    ck_assert_msg(mr != NULL, "no current resource over a host default: %s", crmm_last_error());
    ck_assert_str_eq(crmm_resource_kind(mr), "host");
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 4096, NULL, &p));
    memset(p, 1, 4096);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 4096, NULL));
    crmm_resource *ref = crmm_get_current_device_resource_ref();
    ck_assert_ptr_eq(ref, mr);
    crmm_resource_release(ref);
    crmm_finalize();
}
END_TEST

START_TEST(test_init_gpu_default_without_device)
{
    /* a GPU default still needs a device, and says so */
    static const char text[] = "[crmm]\ndefault = g\n[resource.g]\nplugin = cuda\n";
    const char *path = write_tmp("gpu.ini", text, sizeof text - 1);
    ck_assert_crmm_ok(crmm_init(path));
    int n = 0;
    if (crmm_cuda_device_count(&n) != CRMM_OK) {
        ck_assert_ptr_null(crmm_get_current_device_resource());
        ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_CUDA);
        ck_assert_ptr_null(crmm_get_per_device_resource(1));
    }
    crmm_finalize();
}
END_TEST

START_TEST(test_init_environment_level_wins)
{
    /* $CRMM_LOG_LEVEL beats the config's log_level, so tracing needs no edit of the file */
    setenv("CRMM_LOG_LEVEL", "trace", 1);
    static const char text[] = "[crmm]\nlog_level = error\n[resource.h]\nplugin = host\n";
    const char *path = write_tmp("level.ini", text, sizeof text - 1);
    ck_assert_crmm_ok(crmm_init(path));
    ck_assert(crmm_log_level_from_env());
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_TRACE);
    ck_assert_crmm_ok(crmm_log_set_level(CRMM_LOG_INFO)); /* a program may still change it */
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_INFO);
    crmm_finalize();
}
END_TEST

START_TEST(test_init_environment_level_junk_yields)
{
    /* a value that names no level is ignored: the config's level applies */
    setenv("CRMM_LOG_LEVEL", "loud", 1);
    static const char text[] = "[crmm]\nlog_level = error\n[resource.h]\nplugin = host\n";
    const char *path = write_tmp("junk.ini", text, sizeof text - 1);
    ck_assert_crmm_ok(crmm_init(path));
    ck_assert(!crmm_log_level_from_env());
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_ERROR);
    crmm_finalize();
}
END_TEST

int main(void)
{
    find_config_files();
    if (ngood < 5 || nbad < 40) {
        fprintf(stderr, "check_config: found %d good and %d bad configs in %s; is CRMM_TEST_SRCDIR set?\n", ngood, nbad,
                configs_dir);
        return 1;
    }
    Suite *s = suite_create("config");

    TCase *tc = tcase_create("files");
    tcase_add_loop_test(tc, test_bad_file, 0, nbad);
    tcase_add_loop_test(tc, test_good_file, 0, ngood);
    tcase_add_test(tc, test_installed_default_config);
    tcase_add_test(tc, test_good_full_contents);
    tcase_add_test(tc, test_defaults_when_nothing_is_named);
    suite_add_tcase(s, tc);

    tc = tcase_create("strings");
    tcase_add_loop_test(tc, test_bad_string, 0, (int)(sizeof bad_strings / sizeof bad_strings[0]));
    tcase_add_test(tc, test_line_length_limit);
    tcase_add_test(tc, test_origin_defaults);
    tcase_add_test(tc, test_settings_table);
    tcase_add_test(tc, test_load_null_arguments);
    suite_add_tcase(s, tc);

    tc = tcase_create("disk");
    tcase_add_checked_fixture(tc, tmpdir_setup, NULL);
    tcase_add_test(tc, test_binary_file);
    tcase_add_test(tc, test_missing_file_and_directory);
    tcase_add_test(tc, test_big_file);
    tcase_add_test(tc, test_plugin_path_relative_to_config);
    tcase_add_test(tc, test_skipping_load_leaves_out_unloadable_plugins);
    tcase_add_test(tc, test_default_file);
    suite_add_tcase(s, tc);

    tc = tcase_create("instances");
    tcase_add_test(tc, test_instances_shared_upstream);
    tcase_add_test(tc, test_instances_errors);
    suite_add_tcase(s, tc);

    /* these call CUDA (to see whether there is a device): their own case with a GPU timeout */
    tc = tcase_create("cuda");
    tcase_set_timeout(tc, CRMM_TEST_GPU_TIMEOUT);
    tcase_add_checked_fixture(tc, tmpdir_setup, NULL);
    tcase_add_test(tc, test_cuda_calls_are_counted);
    tcase_add_test(tc, test_instances_gpu_chain_without_gpu);
    tcase_add_test(tc, test_init_then_registry_without_device);
    tcase_add_test(tc, test_init_gpu_default_without_device);
    tcase_add_test(tc, test_init_environment_level_wins);
    tcase_add_test(tc, test_init_environment_level_junk_yields);
    suite_add_tcase(s, tc);

    tc = tcase_create("init");
    tcase_add_checked_fixture(tc, tmpdir_setup, NULL);
    tcase_add_test(tc, test_init_with_path);
    tcase_add_test(tc, test_init_missing_file);
    tcase_add_test(tc, test_config_path_is_a_directory);
    tcase_add_test(tc, test_init_from_environment);
    tcase_add_test(tc, test_init_never_reads_the_working_directory);
    suite_add_tcase(s, tc);

    return crmm_test_run(s);
}
