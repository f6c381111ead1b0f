/* check_random_configs.c — random configs over host memory through the real plugins, with
 * parameters from each plugin's own table and edge values (0, 1, 255/256/257, sizes past what can
 * be rounded, percentages, junk). Each is loaded as `crmm check-config` loads it; one that passes
 * is built and used (allocations, frees, a trim). No crash or sanitizer report, a refusal names a
 * line, and the build never refuses as a config error what the check passed. $CRMM_RANDOM_CONFIGS
 * sets how many (1000), $CRMM_RANDOM_SEED the seed (a failure names the seed and the config). */
#include "build_config.h"
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "test_support.h"

#define MAX_TEXT 8192

static const char *const plugins[] = {"pool", "arena", "fixed_size", "binning", "aligned", "statistics",
                                      "tracking", "limiting", "logging", "failure_callback"};
#define NPLUGINS (sizeof plugins / sizeof plugins[0])

static const char *const sizes[] = {"0", "1", "255", "256", "257", "4096", "64KiB", "1MiB", "2MiB", "4MiB",
                                    "16MiB", "1TiB", "1PiB", "9223372036854775807", "18446744073709551360",
                                    "18446744073709551361", "18446744073709551615", "0%", "1%", "50%", "100%",
                                    "101%", "1.5MiB", "junk", "", "-1"};
static const char *const uints[] = {"0", "1", "2", "7", "8", "12", "20", "63", "64", "65", "1048576", "1048577",
                                    "18446744073709551615", "-1", "0x10", "junk"};
static const char *const bools[] = {"true", "false", "yes", "off", "maybe"};
static const char *const doubles[] = {"0", "0.5", "1", "2.5", "-1", "nan", "1e308", "x"};
static const char *const strings[] = {"", "256,4KiB,64KiB", "1KiB:2KiB", "4096", "0", "junk", "18446744073709551615"};

/* xorshift64*: the same seed, the same configs */
static uint64_t rng;
static uint64_t next(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1DULL;
}
static size_t pick(size_t n) { return (size_t)(next() % n); }
#define PICK(a) (a)[pick(sizeof(a) / sizeof((a)[0]))]

typedef struct text { char s[MAX_TEXT]; size_t n; } text;

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(t->s + t->n, sizeof t->s - t->n, fmt, ap);
    va_end(ap);
    if (k > 0)
        t->n = t->n + (size_t)k < sizeof t->s ? t->n + (size_t)k : sizeof t->s - 1;
}

/* A value for parameter `s` of a plugin; files go to `dir`. */
static void value(text *t, const crmm_param *s, const char *dir)
{
    if (strcmp(s->key, "file") == 0 || strcmp(s->key, "dump_file") == 0) {
        static const char *const escapes[] = {"", "%d", "%p", "%%", "%q", "%"};
        add(t, "%s/out-%zu%s.log", dir, pick(1000), PICK(escapes));
        return;
    }
    switch (s->type) {
    case CRMM_PARAM_SIZE: add(t, "%s", PICK(sizes)); break;
    case CRMM_PARAM_UINT: add(t, "%s", PICK(uints)); break;
    case CRMM_PARAM_BOOL: add(t, "%s", PICK(bools)); break;
    case CRMM_PARAM_DOUBLE: add(t, "%s", PICK(doubles)); break;
    case CRMM_PARAM_STRING: add(t, "%s", PICK(strings)); break;
    case CRMM_PARAM_ENUM: {
        size_t n = 1;
        for (const char *c = s->choices; *c; c++)
            n += *c == '|';
        size_t want = pick(n + 1); /* one past the choices: a bad one */
        const char *c = s->choices;
        for (size_t i = 0; i < want && c; i++) {
            c = strchr(c, '|');
            c = c ? c + 1 : NULL;
        }
        if (want == n || !c)
            add(t, "bogus");
        else
            add(t, "%.*s", (int)strcspn(c, "|"), c);
        break;
    }
    }
}

/* A config: host at the bottom, chains of 1..4 layers above it (a layer's upstream is any
 * resource made before it), each layer a random plugin with random parameters. */
static void make_config(text *t, const char *dir, size_t *count)
{
    t->n = 0;
    t->s[0] = '\0';
    add(t, "[resource.r0]\nplugin = host\n");
    size_t n = 1 + pick(5);
    for (size_t i = 1; i <= n; i++) {
        const char *name = plugins[pick(NPLUGINS)];
        const crmm_plugin *pl;
        ck_assert_int_eq(crmm_plugin_load(name, NULL, &pl), CRMM_OK);
        add(t, "[resource.r%zu]\nplugin = %s\nupstream = r%zu\n", i, name, pick(4) ? i - 1 : pick(i));
        size_t section = t->n;
        for (const crmm_param *s = pl->params; s && s->key; s++)
            if (pick(3) == 0 || (s->flags & CRMM_PARAM_REQUIRED && pick(8))) {
                add(t, "%s = ", s->key);
                value(t, s, dir);
                add(t, "\n");
            }
        /* over host memory these need bytes; mostly given, so that deeper layers are reached */
        bool has_initial = strstr(t->s + section, "initial_size") != NULL;
        bool has_arena = strstr(t->s + section, "arena_size") != NULL;
        if (strcmp(name, "pool") == 0 && !has_initial && pick(4))
            add(t, "initial_size = %s\n", pick(2) ? "1MiB" : "4MiB");
        if (strcmp(name, "arena") == 0 && !has_arena && pick(4))
            add(t, "arena_size = %s\n", pick(2) ? "4MiB" : "16MiB");
    }
    *count = n + 1;
}

static const size_t use_sizes[] = {0, 1, 100, 256, 4096, 65536, 1 << 20, 3 << 20};

/* Which config: "CRMM_RANDOM_SEED=S, config C" makes it again. */
static char where[96];

/* What the run built: resources made, and those of them that served an allocation. */
static unsigned long built, served;

/* Build resource `name` and use it; a config error here is one check-config should have given. */
static void build_and_use(crmm_config *cfg, const char *name, const char *conf)
{
    crmm_resource *mr;
    crmm_status st = crmm_config_create_resource(cfg, name, -1, &mr);
    ck_assert_msg(st != CRMM_ERROR_CONFIG, "%s: check passed, build refused %s: %s\n%s", where, name,
                  crmm_last_error(), conf);
    if (st != CRMM_OK)
        return;
    built++;
    uint64_t before = 0, in_use; /* an upstream shared with other resources holds their blocks too */
    bool counts = crmm_resource_query(mr, CRMM_QUERY_BYTES_IN_USE, &before) == CRMM_OK;
    void *p[8];
    bool any = false;
    for (size_t i = 0; i < 8; i++) {
        if (crmm_resource_allocate(mr, use_sizes[i], NULL, &p[i]) != CRMM_OK)
            p[i] = NULL;
        any = any || (p[i] && use_sizes[i]);
    }
    served += any;
    for (size_t i = 0; i < 8; i++)
        if (p[i])
            ck_assert_msg(crmm_resource_deallocate(mr, p[i], use_sizes[i], NULL) == CRMM_OK,
                          "%s: %s refused its own block: %s\n%s", where, name, crmm_last_error(), conf);
    if (counts && crmm_resource_query(mr, CRMM_QUERY_BYTES_IN_USE, &in_use) == CRMM_OK)
        ck_assert_msg(in_use == before, "%s: %s has %" PRIu64 " bytes in use after every free, %" PRIu64
                      " before\n%s", where, name, in_use, before, conf);
    crmm_resource_trim(mr);
    crmm_resource_release(mr);
}

CRMM_TEST(random_configs_check_build_and_run)
{
    const char *env = getenv("CRMM_RANDOM_CONFIGS");
    unsigned long count = env ? strtoul(env, NULL, 10) : 1000;
    env = getenv("CRMM_RANDOM_SEED");
    uint64_t seed0 = env ? strtoull(env, NULL, 10) : 26;
    char *dir = crmm_test_tmpdir();
    ck_assert_ptr_nonnull(dir);
    ck_assert_int_eq(chdir(dir), 0); /* a file named without a folder (an arena's default dump) lands there */
    crmm_test_log_capture_begin(); /* failures are logged too: kept off the test's output */
    unsigned long loaded = 0;
    static text t;
    for (unsigned long c = 0; c < count; c++) {
        snprintf(where, sizeof where, "CRMM_RANDOM_SEED=%" PRIu64 ", config %lu", seed0, c + 1);
        rng = (seed0 * 1000003u + c) * 0x9E3779B97F4A7C15ULL + 1;
        size_t n;
        make_config(&t, dir, &n);
        crmm_config *cfg;
        crmm_status st = crmm_config_load_string(t.s, "random.ini", &cfg);
        if (st != CRMM_OK) {
            ck_assert_msg(st == CRMM_ERROR_CONFIG && strncmp(crmm_last_error(), "config error: random.ini:", 25) == 0,
                          "%s: refused without a line: %s\n%s", where, crmm_last_error(), t.s);
            continue;
        }
        loaded++;
        for (size_t i = 0; i < n; i++) {
            char name[24];
            snprintf(name, sizeof name, "r%zu", i);
            build_and_use(cfg, name, t.s);
        }
        crmm_config_free(cfg);
    }
    free(crmm_test_log_capture_end());
    fprintf(stderr, "random configs: %lu made (seed %" PRIu64 "), %lu passed the check; %lu resources built, %lu of "
            "them served an allocation\n", count, seed0, loaded, built, served);
    /* most configs that pass hold host-backed resources, which build and serve anywhere: a run
     * that builds or serves almost nothing has lost the paths this test is for */
    if (count >= 100) {
        ck_assert_msg(loaded >= count / 10, "only %lu of %lu configs passed the check", loaded, count);
        ck_assert_msg(built >= loaded / 2, "%lu configs passed, but only %lu resources were built", loaded, built);
        ck_assert_msg(served >= built / 2, "%lu resources were built, but only %lu served an allocation", built,
                      served);
    }
    free(dir);
}

int main(void)
{
    return crmm_test_main("random_configs", 600);
}
