/* check_config_scale.c — configs far larger than anyone writes: 100,000 independent resources and
 * the deepest chain allowed (1,024 resources) load, validate, build and release without deep
 * recursion (also on a thread with a 64 KiB stack); a deeper chain is refused at validation,
 * naming the first resource too deep; errors among many resources are still found and named; the
 * config file size cap is exactly 16 MiB. The configs are generated here. No GPU needed. */
#include "build_config.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "test_support.h"

#define MANY 100000
#define DEEP 1024 /* the deepest chain a config may describe (CONFIG_MAX_CHAIN_DEPTH) */
#define MAX_FILE_BYTES (16u << 20)

/* A config of n resources: r0 is `host`; with `chain` each rK (K >= 1) is `statistics` over
 * r(K-1), else each is a `host` of its own. `extra` is appended. Malloc'd. */
static char *generate(size_t n, bool chain, const char *extra)
{
    size_t cap = n * 64 + strlen(extra) + 64, len = 0;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    len += (size_t)snprintf(text + len, cap - len, "[resource.r0]\nplugin = host\n");
    for (size_t k = 1; k < n; k++) {
        if (chain)
            len += (size_t)snprintf(text + len, cap - len, "[resource.r%zu]\nplugin = statistics\nupstream = r%zu\n", k,
                                    k - 1);
        else
            len += (size_t)snprintf(text + len, cap - len, "[resource.r%zu]\nplugin = host\n", k);
    }
    snprintf(text + len, cap - len, "%s", extra);
    return text;
}

/* Loads `text` (then frees it) as `origin`, which must end with `expect`; the config. */
static crmm_config *load(char *text, const char *origin, crmm_status expect)
{
    crmm_config *cfg = NULL;
    ck_assert_crmm(crmm_config_load_string(text, origin, &cfg), expect);
    free(text);
    return cfg;
}

/* What the small-stack thread saw, for the test to assert on the main thread. */
typedef struct chain_result {
    crmm_status load, create;
    size_t depth;             /* resources from the top down to the bottom, the top included */
    char top[48], bottom[48], bottom_kind[48];
    long top_refs_with_config, top_refs_after_free;
    char error[512];
} chain_result;

/* Load a DEEP-long chain, build its top, walk it, free the config, release the top. */
static void *build_and_release_chain(void *arg)
{
    chain_result *r = arg;
    char *text = generate(DEEP, true, "");
    crmm_config *cfg = NULL;
    r->load = crmm_config_load_string(text, "chain.ini", &cfg);
    free(text);
    if (r->load != CRMM_OK) {
        snprintf(r->error, sizeof r->error, "%s", crmm_last_error());
        return NULL;
    }
    char top_name[32];
    snprintf(top_name, sizeof top_name, "r%d", DEEP - 1);
    crmm_resource *top = NULL;
    r->create = crmm_config_create_resource(cfg, top_name, -1, &top);
    if (r->create != CRMM_OK) {
        snprintf(r->error, sizeof r->error, "%s", crmm_last_error());
        crmm_config_free(cfg);
        return NULL;
    }
    const crmm_resource *at = top, *last = top;
    for (; at; at = crmm_resource_upstream(at)) {
        r->depth++;
        last = at;
    }
    snprintf(r->top, sizeof r->top, "%s", crmm_resource_name(top));
    snprintf(r->bottom, sizeof r->bottom, "%s", crmm_resource_name(last));
    snprintf(r->bottom_kind, sizeof r->bottom_kind, "%s", crmm_resource_kind(last));
    r->top_refs_with_config = crmm_resource_refcount(top);
    crmm_config_free(cfg); /* drops the cache's references: the chain lives on through `top` */
    r->top_refs_after_free = crmm_resource_refcount(top);
    crmm_resource_release(top); /* the whole chain goes; a leak would fail the sanitizer build */
    return NULL;
}

/* The DEEP-long chain built on a thread with a 64 KiB stack and with a default one. */
static const size_t stacks[] = {64 * 1024, 8 * 1024 * 1024};

CRMM_LOOP_TEST_IN("scale", test_long_chain_on_a_thread_stack, 2)
{
    pthread_attr_t attr;
    ck_assert_int_eq(pthread_attr_init(&attr), 0);
    ck_assert_int_eq(pthread_attr_setstacksize(&attr, stacks[_i]), 0);
    chain_result r = {0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, &attr, build_and_release_chain, &r), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(pthread_attr_destroy(&attr), 0);
    ck_assert_msg(r.load == CRMM_OK, "load: %s", r.error);
    ck_assert_msg(r.create == CRMM_OK, "create: %s", r.error);
    ck_assert_uint_eq(r.depth, DEEP);
    ck_assert_str_eq(r.top, "r1023");
    ck_assert_str_eq(r.bottom, "r0");
    ck_assert_str_eq(r.bottom_kind, "host");
    ck_assert_int_eq(r.top_refs_with_config, 2); /* the config's cache and ours */
    ck_assert_int_eq(r.top_refs_after_free, 1);
}

CRMM_TEST_IN("scale", test_long_chain_answers)
{
    crmm_config *cfg = load(generate(DEEP, true, "[crmm]\ndefault = r1023\n"), "chain.ini", CRMM_OK);
    ck_assert_uint_eq(crmm_config_resource_count(cfg), DEEP);
    ck_assert_int_eq(crmm_config_find_resource(cfg, "r0"), 0);
    ck_assert_int_eq(crmm_config_find_resource(cfg, "r543"), 543);
    ck_assert_int_eq(crmm_config_find_resource(cfg, "r1023"), DEEP - 1);
    ck_assert_int_eq(crmm_config_find_resource(cfg, "r1024"), -1);
    ck_assert_int_eq(crmm_config_find_resource(cfg, "R1"), -1);
    ck_assert_int_eq(crmm_config_find_resource(cfg, NULL), -1);
    ck_assert_str_eq(crmm_config_resource_upstream(cfg, 543), "r542");
    ck_assert(crmm_config_resource_is_host(cfg, DEEP - 1)); /* decided by r0, 1,023 links down */
    ck_assert(crmm_config_resource_is_host(cfg, 1));
    ck_assert_str_eq(crmm_config_default_resource(cfg, -1), "r1023");
    crmm_config_free(cfg);
}

CRMM_TEST_IN("scale", test_many_independent_resources)
{
    crmm_config *cfg = load(generate(MANY, false, "[crmm]\ndefault = r77777\n"), "flat.ini", CRMM_OK);
    ck_assert_uint_eq(crmm_config_resource_count(cfg), MANY);
    for (size_t k = 0; k < MANY; k += 997) {
        char name[32];
        snprintf(name, sizeof name, "r%zu", k);
        ck_assert_int_eq(crmm_config_find_resource(cfg, name), (long)k);
        ck_assert(crmm_config_resource_is_host(cfg, k));
        ck_assert_ptr_null(crmm_config_resource_upstream(cfg, k));
    }
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "r77777", -1, &mr));
    ck_assert_str_eq(crmm_resource_name(mr), "r77777");
    crmm_resource_release(mr);
    crmm_config_free(cfg);
}

CRMM_TEST_IN("scale", test_unknown_upstream_among_many)
{
    char *text = generate(MANY, false, "[resource.top]\nplugin = statistics\nupstream = r99998x\n");
    ck_assert_ptr_null(load(text, "up.ini", CRMM_ERROR_CONFIG));
    /* r0 takes lines 1-2, each rK 2 more: the resources end on line 200000 */
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "up.ini:200003: upstream 'r99998x' is not a [resource.*]"));
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "did you mean 'r99998'?"));
}

/* r0 stacked on the top closes a 100,000-long cycle: reported once, from r0, shortened. */
CRMM_TEST_IN("scale", test_long_cycle)
{
    char *text = generate(MANY, true, "");
    char *host = strstr(text, "plugin = host\n");
    ck_assert_ptr_nonnull(host);
    size_t len = strlen(text), at = (size_t)(host - text), tail = strlen("plugin = host\n");
    const char *closing = "plugin = statistics\nupstream = r99999\n";
    char *cyclic = malloc(len + strlen(closing) + 1);
    ck_assert_ptr_nonnull(cyclic);
    snprintf(cyclic, len + strlen(closing) + 1, "%.*s%s%s", (int)at, text, closing, text + at + tail);
    free(text);
    ck_assert_ptr_null(load(cyclic, "cycle.ini", CRMM_ERROR_CONFIG));
    const char *msg = crmm_last_error(), *start = "config error: cycle.ini:3: upstream cycle: r0 -> r99999 -> r99998 -> ";
    ck_assert_msg(strncmp(msg, start, strlen(start)) == 0, "%s", msg);
    ck_assert_msg(strstr(msg, "... r0") != NULL, "%s", msg);
}

/* Mistakes in generated configs of `n` resources (a chain or not) and `extra` lines: the whole
 * message, which still names the right line. */
static const struct { size_t n; bool chain; const char *extra, *origin, *error; } refused[] = {
    /* one resource deeper than allowed is refused at validation (so check-config refuses it too),
     * naming the first resource too deep; so is a 100,000-long chain, at the same resource. r0
     * takes lines 1-2, rK (K >= 1) starts on line 3K: r1024 is the 1,025th, on line 3072 */
    {DEEP + 1, true, "", "deep.ini", "config error: deep.ini:3072: resource.r1024: its upstream chain is 1025 resources "
                                     "deep, more than the 1024 allowed (every call passes through each layer on the stack)"},
    {MANY, true, "", "deep.ini", "config error: deep.ini:3072: resource.r1024: its upstream chain is 1025 resources "
                                 "deep, more than the 1024 allowed (every call passes through each layer on the stack)"},
    /* the right earlier definition: r0 takes lines 1-2, rK (K >= 1) lines 2K+1 and 2K+2 */
    {MANY, false, "[resource.r31415]\nplugin = host\n", "dup.ini",
     "config error: dup.ini:200001: [resource.r31415] defined twice (first at line 62831)"},
    /* two separate cycles after a long chain: the one on the lower line, reported from its first
     * member in file order, b, at b's upstream line */
    {DEEP, true,
     "[resource.b]\nplugin = statistics\nupstream = a\n[resource.a]\nplugin = statistics\nupstream = b\n"
     "[resource.c]\nplugin = statistics\nupstream = c\n",
     "two.ini", "config error: two.ini:3074: upstream cycle: b -> a -> b"},
};

CRMM_LOOP_TEST_IN("scale", test_mistake_among_many_is_named, (int)(sizeof refused / sizeof refused[0]))
{
    ck_assert_ptr_null(load(generate(refused[_i].n, refused[_i].chain, refused[_i].extra), refused[_i].origin,
                            CRMM_ERROR_CONFIG));
    ck_assert_str_eq(crmm_last_error(), refused[_i].error);
}

/* The skipping load drops a 100,000-long chain over a plugin that is not installed, keeps the
 * rest, and says why for each. */
CRMM_TEST_IN("scale", test_skipping_load_drops_a_long_chain)
{
    char *text = generate(MANY, true, "[resource.kept]\nplugin = host\n[crmm]\ndefault = r99999\n");
    memcpy(strstr(text, "plugin = host"), "plugin = nope", strlen("plugin = nope"));
    const char *path = crmm_test_write_file("skip.ini", text);
    free(text);
    crmm_config *cfg = NULL;
    ck_assert_crmm_ok(crmm_config_load_file_skipping(path, &cfg));
    ck_assert_uint_eq(crmm_config_resource_count(cfg), 1);
    ck_assert_str_eq(crmm_config_resource_name(cfg, 0), "kept");
    ck_assert_int_eq(crmm_config_find_resource(cfg, "kept"), 0);
    ck_assert_int_eq(crmm_config_find_resource(cfg, "r5"), -1);
    ck_assert_str_eq(crmm_config_default_resource(cfg, -1), "kept"); /* the named default was left out */
    ck_assert_uint_eq(crmm_config_skipped_count(cfg), MANY);
    ck_assert_str_eq(crmm_config_skipped_name(cfg, 0), "r0");
    ck_assert_ptr_nonnull(strstr(crmm_config_skipped_reason(cfg, 0), "no plugin 'nope'"));
    ck_assert_str_eq(crmm_config_skipped_name(cfg, MANY - 1), "r99999");
    ck_assert_str_eq(crmm_config_skipped_reason(cfg, MANY - 1), "its upstream 'r99998' was skipped");
    crmm_config_free(cfg);
}

/* ---- the file size cap ----------------------------------------------------------------------- */

/* A file of exactly `size` bytes: one resource, then comment lines. */
static const char *write_sized_config(const char *name, size_t size)
{
    char *text = malloc(size + 1);
    ck_assert_ptr_nonnull(text);
    size_t len = (size_t)snprintf(text, size + 1, "[resource.h]\nplugin = host\n");
    while (len < size) {
        size_t line = size - len < 100 ? size - len : 100;
        memset(text + len, ';', line - 1);
        text[len + line - 1] = '\n';
        len += line;
    }
    text[size] = '\0';
    const char *path = crmm_test_write_file(name, text);
    free(text);
    return path;
}

/* One section of a million keys (11 MiB), the last a second `k0`: found and named with the line of
 * the first, within this case's time limit (a scan of the earlier keys at each key would not be). */
CRMM_TEST_IN("scale", test_a_key_given_twice_among_a_million_is_found)
{
    enum { KEYS = 1000000 };
    size_t cap = (size_t)KEYS * 16 + 64, len = 0;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    len += (size_t)snprintf(text, cap, "[resource.r]\nplugin = host\n");
    for (size_t k = 0; k < KEYS; k++)
        len += (size_t)snprintf(text + len, cap - len, "k%zu = 1\n", k);
    snprintf(text + len, cap - len, "k0 = 2\n");
    crmm_config *cfg = load(text, "keys.ini", CRMM_ERROR_CONFIG);
    ck_assert_ptr_null(cfg);
    char want[96];
    snprintf(want, sizeof want, "keys.ini:%d: 'k0' given twice in [resource.r] (first at line 3)", KEYS + 3);
    ck_assert_error_contains(want);
}

CRMM_TEST_IN("size_cap", test_file_of_exactly_16_mib_loads)
{
    const char *path = write_sized_config("cap.ini", MAX_FILE_BYTES);
    crmm_config *cfg = NULL;
    ck_assert_crmm_ok(crmm_config_load_file(path, &cfg));
    ck_assert_uint_eq(crmm_config_resource_count(cfg), 1);
    ck_assert_str_eq(crmm_config_resource_name(cfg, 0), "h");
    crmm_config_free(cfg);
}

CRMM_TEST_IN("size_cap", test_file_one_byte_over_16_mib_is_refused)
{
    const char *path = write_sized_config("over.ini", MAX_FILE_BYTES + 1);
    crmm_config *cfg = NULL;
    ck_assert_crmm(crmm_config_load_file(path, &cfg), CRMM_ERROR_CONFIG);
    char want[4200];
    snprintf(want, sizeof want, "config error: %s: larger than 16 MiB, the most a config file may be", path);
    ck_assert_str_eq(crmm_last_error(), want);
    ck_assert_ptr_null(cfg);
    path = write_sized_config("far-over.ini", 2 * MAX_FILE_BYTES + 4096);
    ck_assert_crmm(crmm_config_load_file(path, &cfg), CRMM_ERROR_CONFIG);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "larger than 16 MiB"));
    ck_assert_ptr_null(cfg);
}

int main(void)
{
    /* generous: these do a few hundred milliseconds of work, more under the sanitizers */
    return CRMM_TEST_MAIN_CASES("config_scale", {"scale", 300}, {"size_cap", 0});
}
