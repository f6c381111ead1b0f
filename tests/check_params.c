/* check_params.c — size parsing, parameters and the helpers for plugins (parameter type names,
 * file-name patterns), and the tests' own temporary directories.
 *
 * Parameters are tested the way a user meets them: crmm_resource_create("plugin", "k=v ...")
 * over the `host` plugin, with `template` (the model adaptor) and `paramtest` (a test-only plugin
 * that records the typed values its create read; tests/plugins/paramtest_plugin.h). */
#include "build_config.h"
#include "core_test.h"
#include "peer_process.h"

/* ---- sizes ---------------------------------------------------------------------------------- */

static const struct { const char *text; uint64_t bytes; } good_sizes[] = {
    {"0", 0},
    {"4096", 4096},
    {"  4096  ", 4096},
    {"18446744073709551615", UINT64_MAX},
    {"18446744073709551615B", UINT64_MAX},
    {"64KiB", 65536},
    {"64kib", 65536},
    {"64KIB", 65536},
    {"1.5GiB", 1610612736ull},
    {"1.5 GiB", 1610612736ull},
    {"1 GiB", 1073741824ull},
    {".5KiB", 512},
    {"512MB", 512000000ull},
    {"512mb", 512000000ull},
    {"2TB", 2000000000000ull},
    {"2TiB", 2199023255552ull},
    {"1PiB", 1125899906842624ull},
    {"3PB", 3000000000000000ull},
    {"1.5KB", 1500},
    {"7B", 7},
    {"7 b", 7},
    {"1.0", 1},
    {"17179869183GiB", 18446744072635809792ull},
    {"1.0000000001KiB", 1024},
    {"0.99999999999999999999KiB", 1023}, /* rounded down, never up to the next byte */
    {"1.00000000000000000000000000000000000000000000000000 B", 1},
    /* every digit of a fraction counts: 2^-50 PiB is one byte exactly, not 0.99 of one */
    {"0.00000000000000088817841970012523233890533447265625PiB", 1},
    {"1.00000000000000088817841970012523233890533447265625PiB", (1ull << 50) + 1},
};

CRMM_LOOP_TEST_IN("sizes", test_size_good, (int)(sizeof good_sizes / sizeof good_sizes[0]))
{
    uint64_t v = 12345;
    double pct = -1;
    ck_assert_msg(crmm_parse_size(good_sizes[_i].text, 0, &v, &pct) == CRMM_OK, "'%s': %s",
                  good_sizes[_i].text, crmm_last_error());
    ck_assert_msg(v == good_sizes[_i].bytes, "'%s' gave %llu, not %llu", good_sizes[_i].text,
                  (unsigned long long)v, (unsigned long long)good_sizes[_i].bytes);
    ck_assert(pct == 0.0);
    /* without a percent out-parameter too */
    ck_assert_crmm_ok(crmm_parse_size(good_sizes[_i].text, 0, &v, NULL));
    ck_assert_uint_eq(v, good_sizes[_i].bytes);
}

/* a fraction whose digits start past what a double holds */
#define FOUR_HUNDRED_ZEROS \
    "0000000000000000000000000000000000000000" "0000000000000000000000000000000000000000" \
    "0000000000000000000000000000000000000000" "0000000000000000000000000000000000000000" \
    "0000000000000000000000000000000000000000" "0000000000000000000000000000000000000000" \
    "0000000000000000000000000000000000000000" "0000000000000000000000000000000000000000" \
    "0000000000000000000000000000000000000000" "0000000000000000000000000000000000000000"

static const struct { const char *text, *message; } bad_sizes[] = {
    {"", "not a size"},
    {"   ", "not a size"},
    {"GiB", "not a size"},
    {"-1", "negative"},
    {" -5MiB", "negative"},
    {"-0", "negative"},
    {"17179869184GiB", "does not fit in 64 bits"},
    {"18446744073709551616", "does not fit in 64 bits"},
    {"99999999999999999999999KiB", "does not fit in 64 bits"},
    {"16777216TiB", "does not fit in 64 bits"},
    {"18446744073709551615.5KB", "does not fit in 64 bits"},
    {"12XB", "unknown size unit 'XB'"},
    {"12 parsecs", "unknown size unit"},
    {"1e3", "unknown size unit"},
    {"1.5e3GiB", "unknown size unit"},
    {"0x10", "unknown size unit"},
    {"4 GiB extra", "unexpected 'extra'"},
    {"4096;comment", "unknown size unit ';comment'"},
    {"1 KiBKiBKiB", "unknown size unit 'KiBKiBKiB'"},
    {"1." FOUR_HUNDRED_ZEROS "1", "whole"}, /* a fraction too small for a double */
    {"1.5", "whole"},
    {"1.5B", "whole"},
    {"12.", "not a size"},
    {".", "not a size"},
    {"abc", "not a size"},
    {"1..5GiB", "not a size"},
    {"0%", "(0, 100]"},
    {"0." FOUR_HUNDRED_ZEROS "1%", "(0, 100]"}, /* a share too small for a double */
    {"101%", "(0, 100]"},
    {"100.5%", "(0, 100]"},
    {"-5%", "negative"},
};

CRMM_LOOP_TEST_IN("sizes", test_size_bad, (int)(sizeof bad_sizes / sizeof bad_sizes[0]))
{
    uint64_t v = 12345;
    double pct = -1;
    ck_assert_msg(crmm_parse_size(bad_sizes[_i].text, 1000, &v, &pct) == CRMM_ERROR_INVALID_ARGUMENT,
                  "'%s' was accepted (%llu)", bad_sizes[_i].text, (unsigned long long)v);
    ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_error_contains(bad_sizes[_i].message);
    ck_assert_uint_eq(v, 12345); /* untouched on error */
}

CRMM_TEST_IN("sizes", test_size_percent)
{
    uint64_t v = 0;
    double pct = 0;
    /* with `percent` given: N comes back, and the bytes against percent_of */
    ck_assert_crmm_ok(crmm_parse_size("80%", 1000, &v, &pct));
    ck_assert(pct == 80.0);
    ck_assert_uint_eq(v, 800);
    ck_assert_crmm_ok(crmm_parse_size("100%", 4096, &v, &pct));
    ck_assert_uint_eq(v, 4096);
    ck_assert_crmm_ok(crmm_parse_size("12.5 %", 1000, &v, &pct));
    ck_assert(pct == 12.5);
    ck_assert_uint_eq(v, 125);
    ck_assert_crmm_ok(crmm_parse_size("50%", 0, &v, &pct)); /* kept as a percentage for later */
    ck_assert(pct == 50.0);
    /* without `percent`: only with something to take it of */
    ck_assert_crmm_ok(crmm_parse_size("25%", 1ull << 40, &v, NULL));
    ck_assert_uint_eq(v, 1ull << 38);
    ck_assert_crmm_ok(crmm_parse_size("100%", UINT64_MAX, &v, NULL));
    ck_assert_uint_eq(v, UINT64_MAX); /* no wrap-around */
    /* exact above 2^53, where a double cannot hold every integer */
    ck_assert_crmm_ok(crmm_parse_size("100%", (1ull << 53) + 1, &v, NULL));
    ck_assert_uint_eq(v, (1ull << 53) + 1);
    ck_assert_crmm_ok(crmm_parse_size("100%", UINT64_MAX - 1, &v, NULL));
    ck_assert_uint_eq(v, UINT64_MAX - 1);
    ck_assert_crmm_ok(crmm_parse_size("50%", UINT64_MAX, &v, NULL));
    ck_assert_uint_eq(v, UINT64_MAX / 2);
    ck_assert_crmm_ok(crmm_parse_size("12.5%", (1ull << 60) + 15, &v, NULL));
    ck_assert_uint_eq(v, (1ull << 57) + 1); /* (2^60 + 15) / 8, rounded down */
    ck_assert_crmm_ok(crmm_parse_size("33.3%", 1000000000000000007ull, &v, NULL));
    ck_assert_uint_eq(v, 333000000000000002ull);
    /* every digit of the percentage counts, not the first 17 only (which would give 1, 18446744073709551613) */
    ck_assert_crmm_ok(crmm_parse_size("0.00000000000000001999999%", UINT64_MAX, &v, NULL));
    ck_assert_uint_eq(v, 3);
    ck_assert_crmm_ok(crmm_parse_size("99.999999999999999999999999%", UINT64_MAX, &v, NULL));
    ck_assert_uint_eq(v, UINT64_MAX - 1);
    ck_assert_crmm(crmm_parse_size("100.0000000000000000001%", 1000, &v, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_parse_size("0.000%", 1000, &v, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    v = 7;
    ck_assert_crmm(crmm_parse_size("50%", 0, &v, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_error_contains("percentage is not allowed");
    ck_assert_uint_eq(v, 7);
    ck_assert_crmm(crmm_parse_size(NULL, 0, &v, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_parse_size("1", 0, NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
}

/* ---- parameters, through crmm_resource_create ------------------------------------------------ */

static crmm_resource *host;

static void host_setup(void)
{
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &host));
}

static void host_teardown(void)
{
    crmm_resource_release(host);
    host = NULL;
}

/* Creates a paramtest resource from `params` (over `host` when `over_host`), returns its record. */
static paramtest_values paramtest(const char *params, int over_host)
{
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(crmm_resource_create("paramtest", params, over_host ? host : NULL, &mr));
    paramtest_values v;
    memset(&v, 0xab, sizeof v);
    ck_assert_crmm_ok(crmm_resource_control(mr, PARAMTEST_CONTROL_VALUES, &v));
    ck_assert_str_eq(crmm_resource_kind(mr), "paramtest");
    ck_assert_str_eq(crmm_resource_name(mr), "");
    ck_assert_ptr_eq(crmm_resource_upstream(mr), over_host ? host : NULL);
    crmm_resource_release(mr);
    return v;
}

CRMM_TEST_IN("params", test_params_defaults)
{
    paramtest_values v = paramtest("id=3", 0);
    ck_assert_int_eq(v.st_count, CRMM_OK);
    ck_assert_uint_eq(v.count, 7);
    ck_assert_int_eq(v.st_limit, CRMM_OK);
    ck_assert_uint_eq(v.limit, 1u << 20);
    ck_assert_int_eq(v.st_enabled, CRMM_OK);
    ck_assert(!v.enabled);
    ck_assert_int_eq(v.st_label, CRMM_ERROR_NOT_FOUND); /* no default, not given */
    ck_assert_int_eq(v.st_mode, CRMM_OK);
    ck_assert_str_eq(v.mode, "safe");
    ck_assert_int_eq(v.st_ratio, CRMM_OK);
    ck_assert(v.ratio == 0.5);
    ck_assert_int_eq(v.st_id, CRMM_OK);
    ck_assert_uint_eq(v.id, 3);
    ck_assert(!v.set_count && !v.set_limit && !v.set_enabled && !v.set_label && !v.set_mode && !v.set_ratio);
    ck_assert(v.set_id);
    /* an enum reaches the plugin as the index of its choice; the given mask has only id (row 6) */
    ck_assert_int_eq(v.st_mode_index, CRMM_OK);
    ck_assert_int_eq(v.mode_index, 1); /* safe, of fast|safe|debug */
    ck_assert_int_eq(v.st_label_index, CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(v.given, 1u << 6);
    ck_assert_int_eq(v.st_wrong_type, CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(v.st_unknown_key, CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_str_eq(v.name, "");
    ck_assert_int_eq(v.device, -1);
}

CRMM_TEST_IN("params", test_params_typed_values)
{
    paramtest_values v = paramtest("id=0x10 count=42 limit=64KiB enabled=yes label=hello mode=debug ratio=0.25", 1);
    ck_assert_uint_eq(v.id, 16);
    ck_assert_uint_eq(v.count, 42);
    ck_assert_uint_eq(v.limit, 65536);
    ck_assert(v.enabled);
    ck_assert_int_eq(v.st_label, CRMM_OK);
    ck_assert_str_eq(v.label, "hello");
    ck_assert_str_eq(v.mode, "debug");
    ck_assert(v.ratio == 0.25);
    ck_assert(v.set_count && v.set_limit && v.set_enabled && v.set_label && v.set_mode && v.set_ratio && v.set_id);
    ck_assert_int_eq(v.mode_index, 2); /* debug */
    ck_assert_uint_eq(v.given, 0x7f);
    /* commas separate pairs too; a value equal to the default still counts as given */
    v = paramtest("id=1,count=7, ratio=1e-3", 0);
    ck_assert_uint_eq(v.count, 7);
    ck_assert(v.set_count);
    ck_assert(v.ratio == 1e-3);
    /* decimal stays decimal: a leading zero is not octal */
    v = paramtest("id=010 count=0", 0);
    ck_assert_uint_eq(v.id, 10);
    ck_assert_uint_eq(v.count, 0);
    v = paramtest("id=18446744073709551615 limit=0", 0);
    ck_assert_uint_eq(v.id, UINT64_MAX);
    ck_assert_uint_eq(v.limit, 0);
}

/* A double-quoted value keeps spaces and commas (a file name such as "/tmp/my logs/a,b.csv"),
 * with \" and \\ for a quote and a backslash; a quote inside a word is only a character. */
CRMM_TEST_IN("params", test_params_quoted_values)
{
    paramtest_values v = paramtest("id=1 label=\"/tmp/my logs/a,b.csv\" count=3", 0);
    ck_assert_str_eq(v.label, "/tmp/my logs/a,b.csv");
    ck_assert_uint_eq(v.count, 3);
    v = paramtest("label=\"say \\\"hi\\\" \\\\ \\n\",id=2", 0);
    ck_assert_str_eq(v.label, "say \"hi\" \\ \\n");
    ck_assert_uint_eq(v.id, 2);
    v = paramtest("id=1 label=it\"s", 0);
    ck_assert_str_eq(v.label, "it\"s");
    v = paramtest("id=\"5\" label=\" \"", 0);
    ck_assert_uint_eq(v.id, 5);
    ck_assert_str_eq(v.label, " ");
}

CRMM_TEST_IN("params", test_params_bool_forms)
{
    static const struct { const char *text; bool value; } forms[] = {
        {"true", true}, {"TRUE", true}, {"yes", true}, {"On", true}, {"1", true},
        {"false", false}, {"False", false}, {"no", false}, {"OFF", false}, {"0", false},
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char params[64];
        snprintf(params, sizeof params, "id=1 enabled=%s", forms[i].text);
        paramtest_values v = paramtest(params, 0);
        ck_assert_msg(v.enabled == forms[i].value, "enabled=%s", forms[i].text);
    }
}

CRMM_TEST_IN("params_percent", test_params_percent_size)
{
    /* a percentage is accepted when parsed and resolved against the device at create time */
    crmm_resource *mr = NULL;
    int n = 0;
    bool gpu = crmm_cuda_device_count(&n) == CRMM_OK && n > 0;
    crmm_status st = crmm_resource_create("paramtest", "id=1 limit=50%", NULL, &mr);
    if (!gpu) {
        ck_assert_int_eq(st, CRMM_ERROR_CUDA);
        ck_assert_error_contains("limit = 50% needs a CUDA device");
        ck_assert_ptr_null(mr);
        return;
    }
    ck_assert_crmm_ok(st);
    uint64_t total = 0;
    ck_assert_crmm_ok(crmm_cuda_device_memory(0, NULL, &total));
    paramtest_values v;
    ck_assert_crmm_ok(crmm_resource_control(mr, PARAMTEST_CONTROL_VALUES, &v));
    ck_assert_uint_eq(v.limit, total / 2);
    crmm_resource_release(mr);
}

static const struct { const char *plugin, *params; int upstream; crmm_status st; const char *message; } bad_params[] = {
    {"template", "tga=1", 1, CRMM_ERROR_CONFIG, "unknown key 'tga' for plugin template (did you mean 'tag'?)"},
    {"template", "colour=1", 1, CRMM_ERROR_CONFIG, "unknown key 'colour' for plugin template"},
    {"host", "tag=1", 0, CRMM_ERROR_CONFIG, "plugin host takes no parameters"},
    {"template", "tag=-1", 1, CRMM_ERROR_CONFIG, "tag: '-1' is not an unsigned integer"},
    {"template", "tag=12abc", 1, CRMM_ERROR_CONFIG, "tag: '12abc' is not an unsigned integer"},
    {"template", "tag=", 1, CRMM_ERROR_CONFIG, "tag: '' is not an unsigned integer"},
    {"template", "tag=0x", 1, CRMM_ERROR_CONFIG, "tag: '0x' is not an unsigned integer"},
    {"template", "tag=1.5", 1, CRMM_ERROR_CONFIG, "not an unsigned integer"},
    {"template", "tag=18446744073709551616", 1, CRMM_ERROR_CONFIG, "does not fit in 64 bits"},
    {"template", "tag=99999999999999999999999", 1, CRMM_ERROR_CONFIG, "does not fit in 64 bits"},
    {"template", "tag", 1, CRMM_ERROR_CONFIG, "'tag' is not key=value"},
    {"template", "=5", 1, CRMM_ERROR_CONFIG, "'=5' is not key=value"},
    {"template", "tag=1 tag=2", 1, CRMM_ERROR_CONFIG, "'tag' given twice"},
    {"template", "tag=\"1", 1, CRMM_ERROR_CONFIG, "'tag': a quoted value must end with '\"'"},
    {"template", "tag=\"1\"2", 1, CRMM_ERROR_CONFIG, "'tag': a quoted value must end with '\"'"},
    {"template", "tag=\"1\\\"", 1, CRMM_ERROR_CONFIG, "'tag': a quoted value must end with '\"'"},
    {"template", "tag=1 x", 1, CRMM_ERROR_CONFIG, "'x' is not key=value"},
    {"template", "plugin=host", 1, CRMM_ERROR_CONFIG, "unknown key 'plugin'"},
    {"paramtest", "", 0, CRMM_ERROR_CONFIG, "plugin paramtest needs 'id'"},
    {"paramtest", "count=1", 0, CRMM_ERROR_CONFIG, "plugin paramtest needs 'id'"},
    {"paramtest", "id=1 enabled=maybe", 0, CRMM_ERROR_CONFIG, "enabled: 'maybe' is not a boolean"},
    {"paramtest", "id=1 enabled=", 0, CRMM_ERROR_CONFIG, "is not a boolean"},
    {"paramtest", "id=1 mode=turbo", 0, CRMM_ERROR_CONFIG, "mode: 'turbo' is not one of fast|safe|debug"},
    {"paramtest", "id=1 mode=saf", 0, CRMM_ERROR_CONFIG, "is not one of"},
    {"paramtest", "id=1 mode=fast|safe", 0, CRMM_ERROR_CONFIG, "is not one of"},
    {"paramtest", "id=1 ratio=abc", 0, CRMM_ERROR_CONFIG, "ratio: 'abc' is not a number"},
    {"paramtest", "id=1 ratio=1e999", 0, CRMM_ERROR_CONFIG, "ratio: '1e999' is not a number"},
    {"paramtest", "id=1 ratio=nan", 0, CRMM_ERROR_CONFIG, "ratio: 'nan' is not a number"},
    {"paramtest", "id=1 ratio=inf", 0, CRMM_ERROR_CONFIG, "is not a number"},
    {"paramtest", "id=1 ratio=0.5x", 0, CRMM_ERROR_CONFIG, "is not a number"},
    {"paramtest", "id=1 limit=12XB", 0, CRMM_ERROR_CONFIG, "limit: '12XB': unknown size unit 'XB'"},
    {"paramtest", "id=1 limit=-1", 0, CRMM_ERROR_CONFIG, "limit: size '-1' is negative"},
    {"paramtest", "id=1 limit=101%", 0, CRMM_ERROR_CONFIG, "limit: '101%': a percentage must be in (0, 100]"},
    {"paramtest", "id=1 limit=0%", 0, CRMM_ERROR_CONFIG, "percentage must be in (0, 100]"},
    {"paramtest", "id=1 limit=1.5", 0, CRMM_ERROR_CONFIG, "a byte count must be whole"},
    {"paramtest", "id=1 limit=17179869184GiB", 0, CRMM_ERROR_CONFIG, "does not fit in 64 bits"},
    {"host", "", 1, CRMM_ERROR_CONFIG, "plugin host takes no upstream"},
    {"template", "", 0, CRMM_ERROR_CONFIG, "plugin template needs an upstream"},
    {"hots", "", 0, CRMM_ERROR_PLUGIN, "no plugin 'hots' (crmm_hots.so) in "},
    {"hots", "", 0, CRMM_ERROR_PLUGIN, "(did you mean 'host'?)"},
    {"Host", "", 0, CRMM_ERROR_PLUGIN, "is not a plugin name"},
    {"../host", "", 0, CRMM_ERROR_PLUGIN, "is relative"},
};

CRMM_LOOP_TEST_IN("params", test_params_bad, (int)(sizeof bad_params / sizeof bad_params[0]))
{
    crmm_resource *mr = NULL;
    crmm_status st = crmm_resource_create(bad_params[_i].plugin, bad_params[_i].params,
                                          bad_params[_i].upstream ? host : NULL, &mr);
    ck_assert_msg(st == bad_params[_i].st, "%s '%s' returned %s (%s)", bad_params[_i].plugin, bad_params[_i].params,
                  crmm_status_name(st), crmm_last_error());
    ck_assert_ptr_null(mr);
    ck_assert_int_eq(crmm_last_status(), bad_params[_i].st);
    ck_assert_error_contains(bad_params[_i].message);
    /* the failed create left the upstream's references as they were */
    ck_assert_int_eq(crmm_resource_refcount(host), 1);
}

CRMM_TEST_IN("params", test_params_template_over_host)
{
    crmm_resource *t = NULL;
    ck_assert_crmm_ok(crmm_resource_create("template", "tag=5", host, &t));
    ck_assert_ptr_eq(crmm_resource_upstream(t), host);
    ck_assert_int_eq(crmm_resource_refcount(host), 2);
    ck_assert_str_eq(crmm_resource_kind(t), "template");
    ck_assert(crmm_resource_is_host_accessible(t));
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(t, 1000, NULL, &p));
    ck_assert_ptr_nonnull(p);
    uint64_t n = 0;
    ck_assert_crmm_ok(crmm_resource_query(t, CRMM_QUERY_ALLOCATIONS, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert_crmm_ok(crmm_resource_deallocate(t, p, 1000, NULL));
    crmm_resource_release(t);
    ck_assert_int_eq(crmm_resource_refcount(host), 1);
}

CRMM_TEST_IN("params", test_params_null_arguments)
{
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_resource_create(NULL, "", NULL, &mr), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_create("host", "", NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &mr)); /* NULL params: none */
    crmm_resource_release(mr);
    ck_assert(!crmm_params_is_set(NULL, "x"));
    ck_assert_str_eq(crmm_params_resource_name(NULL), "");
    ck_assert_int_eq(crmm_params_device(NULL), -1);
    uint64_t u;
    ck_assert_crmm(crmm_params_get_uint(NULL, "x", &u), CRMM_ERROR_INVALID_ARGUMENT);
}

/* ---- plugin helpers ------------------------------------------------------------------------ */

CRMM_TEST_IN("plugin_helpers", test_param_type_names)
{
    ck_assert_str_eq(crmm_param_type_name(CRMM_PARAM_SIZE), "size");
    ck_assert_str_eq(crmm_param_type_name(CRMM_PARAM_UINT), "uint");
    ck_assert_str_eq(crmm_param_type_name(CRMM_PARAM_BOOL), "bool");
    ck_assert_str_eq(crmm_param_type_name(CRMM_PARAM_STRING), "string");
    ck_assert_str_eq(crmm_param_type_name(CRMM_PARAM_ENUM), "enum");
    ck_assert_str_eq(crmm_param_type_name(CRMM_PARAM_DOUBLE), "double");
    ck_assert_str_eq(crmm_param_type_name((crmm_param_type)0), "?");
    ck_assert_str_eq(crmm_param_type_name((crmm_param_type)99), "?");
}

CRMM_TEST_IN("plugin_helpers", test_expand_file_name)
{
    char out[256], want[256];
    long pid = (long)getpid();
    ck_assert_crmm_ok(crmm_expand_file_name("/tmp/log.dev%d.%p.csv", 3, out, sizeof out));
    snprintf(want, sizeof want, "/tmp/log.dev3.%ld.csv", pid);
    ck_assert_str_eq(out, want);
    /* no device: %d is "host" */
    ck_assert_crmm_ok(crmm_expand_file_name("a.%d", -1, out, sizeof out));
    ck_assert_str_eq(out, "a.host");
    /* %% is one %, also next to other sequences; a pattern without % is copied */
    ck_assert_crmm_ok(crmm_expand_file_name("100%%.%d%%%p", 12, out, sizeof out));
    snprintf(want, sizeof want, "100%%.12%%%ld", pid);
    ck_assert_str_eq(out, want);
    ck_assert_crmm_ok(crmm_expand_file_name("plain.log", 0, out, sizeof out));
    ck_assert_str_eq(out, "plain.log");
    ck_assert_crmm_ok(crmm_expand_file_name("", 0, out, sizeof out));
    ck_assert_str_eq(out, "");
    /* exactly filling the buffer (NUL included) is fine */
    ck_assert_crmm_ok(crmm_expand_file_name("dev%d", 7, out, 5));
    ck_assert_str_eq(out, "dev7");
}

CRMM_TEST_IN("plugin_helpers", test_expand_file_name_bad)
{
    char out[64];
    /* another % sequence: a config error naming the pattern and the sequence */
    ck_assert_crmm(crmm_expand_file_name("run.%x.log", 0, out, sizeof out), CRMM_ERROR_CONFIG);
    ck_assert_error_contains("'run.%x.log'");
    ck_assert_error_contains("'%x'");
    ck_assert_crmm(crmm_expand_file_name("trailing%", 0, out, sizeof out), CRMM_ERROR_CONFIG);
    ck_assert_error_contains("'trailing%'");
    /* a name that does not fit (room for 4 characters and the NUL) */
    ck_assert_crmm(crmm_expand_file_name("dev%d", 10, out, 5), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_error_contains("'dev%d'");
    ck_assert_crmm(crmm_expand_file_name("abcde", 0, out, 5), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_expand_file_name("%p", 0, out, 2), CRMM_ERROR_INVALID_ARGUMENT);
    /* NULL arguments and no room at all */
    ck_assert_crmm(crmm_expand_file_name(NULL, 0, out, sizeof out), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_expand_file_name("x", 0, NULL, sizeof out), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_expand_file_name("x", 0, out, 0), CRMM_ERROR_INVALID_ARGUMENT);
}

/* ---- the tests' own temporary directories (test_support.c) ------------------------------- */

/* A directory made by a process goes when that process exits, with what it holds (also a
 * sub-directory without write permission); one made by its parent stays. */
CRMM_TEST_IN("test_support", test_tmpdirs_go_with_their_maker)
{
    char *mine = crmm_test_tmpdir();
    ck_assert_ptr_nonnull(mine);
    int fd;
    pid_t pid = crmm_test_fork_peer(CRMM_TEST_PIPE, &fd);
    if (pid == 0) {
        char *d = crmm_test_tmpdir(), path[4200] = "";
        if (d) {
            snprintf(path, sizeof path, "%s/sub", d);
            mkdir(path, 0700);
            snprintf(path, sizeof path, "%s/sub/file", d);
            FILE *f = fopen(path, "w");
            if (f)
                fclose(f);
            snprintf(path, sizeof path, "%s/sub", d);
            chmod(path, 0500);
            snprintf(path, sizeof path, "%s", d);
        }
        free(d);
        ssize_t w = write(fd, path, strlen(path) + 1);
        exit(w > 1 ? 0 : 1); /* exit, not _exit: the exit handler removes d */
    }
    char child_dir[4200] = "";
    ssize_t n = read(fd, child_dir, sizeof child_dir - 1);
    close(fd);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_gt(n, 1);
    ck_assert_msg(access(child_dir, F_OK) != 0, "%s is still there", child_dir);
    ck_assert_msg(access(mine, F_OK) == 0, "the child removed its parent's %s", mine);
    free(mine);
}

int main(void)
{
    Suite *s = suite_create("params");

    TCase *tc = crmm_test_tcase(s, "sizes", 0);

    tc = crmm_test_tcase(s, "params", 0);
    tcase_add_checked_fixture(tc, host_setup, host_teardown);

    tc = crmm_test_tcase(s, "test_support", 0);

    tc = crmm_test_tcase(s, "plugin_helpers", 0);

    /* its own case: on a machine with a GPU it creates a CUDA context */
    tc = crmm_test_tcase(s, "params_percent", CRMM_TEST_GPU_TIMEOUT);

    return crmm_test_run(s);
}
