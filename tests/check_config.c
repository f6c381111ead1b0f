/* check_config.c — the INI config: the table under tests/configs/ (good-*.ini must load; each
 * bad-*.ini starts with "; expect LINE: SUBSTRING" and must fail with CRMM_ERROR_CONFIG and
 * "FILE:LINE: ...SUBSTRING"), each file also with CRLF line endings and after a UTF-8 BOM, and bad
 * config strings; no CUDA call while a config loads (config_test.h counts them). The same files
 * drive check_tools.sh. Files on disk, instances and crmm_init: check_config_init.c. */
#include "build_config.h"
#include "config_test.h"

/* ---- the config files ----------------------------------------------------------------------- */

#define MAX_FILES 128
static char good_files[MAX_FILES][PATH_MAX], bad_files[MAX_FILES][PATH_MAX];
static int ngood, nbad;

static int compare_names(const void *a, const void *b) { return strcmp(a, b); }

/* Fills good_files and bad_files from $CRMM_TEST_SRCDIR/configs (in the parent, before forking). */
static void find_config_files(void)
{
    set_configs_dir();
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

START_TEST(test_bad_file) /* counted at run time: registered in main */
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

CRMM_TEST_IN("files", test_installed_default_config)
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

/* The interposition above really sees the core's CUDA calls (else "no CUDA call" means nothing). */
CRMM_TEST_IN("cuda", test_cuda_calls_are_counted)
{
    cuda_calls = 0;
    int n;
    crmm_cuda_device_count(&n);
    ck_assert_int_ge(cuda_calls, 1);
}

CRMM_TEST_IN("files", test_good_full_contents)
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

CRMM_TEST_IN("files", test_defaults_when_nothing_is_named)
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

CRMM_LOOP_TEST_IN("strings", test_bad_string, (int)(sizeof bad_strings / sizeof bad_strings[0]))
{
    crmm_config *cfg = NULL;
    assert_config_error(crmm_config_load_string(bad_strings[_i].text, "inline.ini", &cfg), "inline.ini",
                        bad_strings[_i].line, bad_strings[_i].message);
    ck_assert_ptr_null(cfg);
}

CRMM_TEST_IN("strings", test_line_length_limit)
{
    /* the longest line inih takes: 198 characters after leading blanks (plus "\n\0") */
    char text[1024], value[400];
    const char *key = "default = ";
    for (size_t len = 196; len <= 200; len++) {
        size_t vlen = len - strlen(key);
        memset(value, 'a', vlen);
        value[vlen] = '\0';
        for (int crlf = 0; crlf < 2; crlf++) { /* the same in a file with CRLF line ends */
            const char *nl = crlf ? "\r\n" : "\n";
            snprintf(text, sizeof text, "[crmm]%s%s%s%s[resource.%.40s]%splugin = host%s", nl, key, value, nl, value, nl, nl);
            crmm_config *cfg = NULL;
            crmm_status st = crmm_config_load_string(text, "long.ini", &cfg);
            if (len <= 198) {
                ck_assert_msg(st == CRMM_ERROR_CONFIG && strstr(crmm_last_error(), "is not a [resource.*]"),
                              "line of %zu%s: %s", len, crlf ? " (CRLF)" : "", crmm_last_error());
            } else {
                assert_config_error(st, "long.ini", 2, "line is longer than 198 characters");
            }
        }
    }
}

/* A load, a build and crmm_init that succeed clear the thread's error, as error.h says: an
 * error a caller finds after them is theirs, not an older one's. */
CRMM_TEST_IN("strings", test_success_clears_an_older_error)
{
    const char *text = "[resource.h]\nplugin = host\n";
    crmm_config *cfg = NULL;
    crmm_set_error(CRMM_ERROR_IO, "an older error");
    ck_assert_crmm_ok(crmm_config_load_string(text, "ok.ini", &cfg));
    ck_assert_int_eq(crmm_last_status(), CRMM_OK);
    crmm_resource *a = NULL, *b = NULL;
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "h", -1, &a));
    crmm_set_error(CRMM_ERROR_IO, "an older error");
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "h", -1, &b)); /* the one made already */
    ck_assert_int_eq(crmm_last_status(), CRMM_OK);
    ck_assert_ptr_eq(a, b);
    crmm_resource_release(a);
    crmm_resource_release(b);
    crmm_config_free(cfg);
    crmm_set_error(CRMM_ERROR_IO, "an older error");
    ck_assert_crmm_ok(crmm_config_load_string("", "empty.ini", &cfg));
    ck_assert_int_eq(crmm_last_status(), CRMM_OK);
    crmm_config_free(cfg);
    char path[] = "/tmp/crmm-clear-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    crmm_set_error(CRMM_ERROR_IO, "an older error");
    crmm_status st = crmm_init(path);
    unlink(path);
    ck_assert_crmm_ok(st);
    ck_assert_int_eq(crmm_last_status(), CRMM_OK);
    crmm_finalize();
}

/* ---- crmm's own settings ------------------------------------------------------------------- */

/* One table holds every [crmm] key and every variable crmm reads; a key and a variable on one row
 * are one setting (log_level and $CRMM_LOG_LEVEL). A value is checked by the row, and a variable
 * that is no row's is not read. */
CRMM_TEST_IN("strings", test_settings_table)
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

CRMM_TEST_IN("strings", test_origin_defaults)
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

CRMM_TEST_IN("strings", test_load_null_arguments)
{
    crmm_config *cfg = NULL;
    ck_assert_crmm(crmm_config_load_file(NULL, &cfg), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_config_load_file("x.ini", NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_config_load_string(NULL, "x", &cfg), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_config_load_string("", "x", NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_config_load_default(NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_config_create_resource(NULL, "a", -1, (crmm_resource **)&cfg), CRMM_ERROR_INVALID_ARGUMENT);
}

int main(void)
{
    find_config_files();
    if (ngood < 5 || nbad < 40) {
        fprintf(stderr, "check_config: found %d good and %d bad configs in %s; is CRMM_TEST_SRCDIR set?\n", ngood, nbad,
                configs_dir);
        return 1;
    }
    Suite *s = suite_create("config");

    TCase *tc = crmm_test_tcase(s, "files", 0);
    tcase_add_loop_test(tc, test_bad_file, 0, nbad);
    tcase_add_loop_test(tc, test_good_file, 0, ngood);
    crmm_test_tcase(s, "strings", 0);

    /* these call CUDA (to see whether there is a device): their own case with a GPU timeout */
    tc = crmm_test_tcase(s, "cuda", CRMM_TEST_GPU_TIMEOUT);
    tcase_add_checked_fixture(tc, tmpdir_setup, NULL);

    return crmm_test_run(s);
}
