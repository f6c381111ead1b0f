/* check_core.c — the core's building blocks: errors, the logger, size parsing, parameters, the
 * helpers for plugins (parameter type names, file-name patterns).
 *
 * Parameters are tested the way a user meets them: crmm_resource_create("plugin", "k=v ...")
 * over the `host` plugin, with `template` (the model adaptor) and `paramtest` (a test-only plugin
 * that records the typed values its create read; tests/plugins/paramtest_plugin.h). The logger
 * reads its environment once, at first use; Check runs each test in a fresh child, so a test that
 * sets $CRMM_LOG_LEVEL before its first logger call sees it read. main() calls no crmm function
 * before the runner forks. */
#include "build_config.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "plugins/paramtest_plugin.h"
#include "test_support.h"

/* ---- helpers -------------------------------------------------------------------------------- */

static char tmpdir[4096];

static void make_tmpdir(void)
{
    char *d = crmm_test_tmpdir();
    ck_assert_ptr_nonnull(d);
    snprintf(tmpdir, sizeof tmpdir, "%s", d);
    free(d);
}

#define ck_assert_error_contains(sub) \
    ck_assert_msg(strstr(crmm_last_error(), (sub)) != NULL, "error '%s' lacks '%s'", crmm_last_error(), (sub))

/* ---- errors --------------------------------------------------------------------------------- */

static const struct { crmm_status st; const char *name, *category; } statuses[] = {
    {CRMM_OK, "CRMM_OK", ""},
    {CRMM_ERROR_OUT_OF_MEMORY, "CRMM_ERROR_OUT_OF_MEMORY", "out of memory: "},
    {CRMM_ERROR_BAD_ALLOC, "CRMM_ERROR_BAD_ALLOC", "bad alloc: "},
    {CRMM_ERROR_INVALID_ARGUMENT, "CRMM_ERROR_INVALID_ARGUMENT", "invalid argument: "},
    {CRMM_ERROR_CUDA, "CRMM_ERROR_CUDA", "CUDA error: "},
    {CRMM_ERROR_CONFIG, "CRMM_ERROR_CONFIG", "config error: "},
    {CRMM_ERROR_PLUGIN, "CRMM_ERROR_PLUGIN", "plugin error: "},
    {CRMM_ERROR_NOT_FOUND, "CRMM_ERROR_NOT_FOUND", "not found: "},
    {CRMM_ERROR_UNSUPPORTED, "CRMM_ERROR_UNSUPPORTED", "unsupported: "},
    {CRMM_ERROR_IO, "CRMM_ERROR_IO", "I/O error: "},
    {CRMM_ERROR_STATE, "CRMM_ERROR_STATE", "invalid state: "},
};
#define NSTATUSES (int)(sizeof statuses / sizeof statuses[0])

START_TEST(test_status_names)
{
    for (int i = 0; i < NSTATUSES; i++)
        ck_assert_str_eq(crmm_status_name(statuses[i].st), statuses[i].name);
    ck_assert_str_eq(crmm_status_name((crmm_status)99), "CRMM_ERROR_UNKNOWN");
    ck_assert_str_eq(crmm_status_name((crmm_status)-1), "CRMM_ERROR_UNKNOWN");
}
END_TEST

START_TEST(test_error_categories)
{
    for (int i = 1; i < NSTATUSES; i++) {
        char want[128];
        ck_assert_int_eq(crmm_set_error(statuses[i].st, "pool '%s': code %d", "main", 7), statuses[i].st);
        snprintf(want, sizeof want, "%spool 'main': code 7", statuses[i].category);
        ck_assert_str_eq(crmm_last_error(), want);
        ck_assert_int_eq(crmm_last_status(), statuses[i].st);
        /* the detail is the message without its category, whatever the category */
        ck_assert_str_eq(crmm_last_error_detail(), "pool 'main': code 7");
        crmm_error_add_context("ctx");
        ck_assert_str_eq(crmm_last_error_detail(), "ctx: pool 'main': code 7");
        /* a message that already starts with its own category is not prefixed twice */
        crmm_set_error(statuses[i].st, "%sagain", statuses[i].category);
        snprintf(want, sizeof want, "%sagain", statuses[i].category);
        ck_assert_str_eq(crmm_last_error(), want);
    }
    crmm_set_error((crmm_status)42, "odd");
    ck_assert_str_eq(crmm_last_error(), "error: odd");
    ck_assert_str_eq(crmm_last_error_detail(), "odd");
    crmm_clear_error();
    ck_assert_str_eq(crmm_last_error_detail(), "");
}
END_TEST

START_TEST(test_error_clear)
{
    ck_assert_str_eq(crmm_last_error(), "");
    ck_assert_int_eq(crmm_last_status(), CRMM_OK);
    crmm_set_error(CRMM_ERROR_IO, "disk");
    crmm_clear_error();
    ck_assert_str_eq(crmm_last_error(), "");
    ck_assert_int_eq(crmm_last_status(), CRMM_OK);
}
END_TEST

static void *set_error_in_thread(void *arg)
{
    static char seen[256];
    /* a new thread starts clean, whatever the creating thread did */
    snprintf(seen, sizeof seen, "%s|%d", crmm_last_error(), (int)crmm_last_status());
    crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "thread %d", *(int *)arg);
    return seen;
}

START_TEST(test_error_thread_local)
{
    crmm_set_error(CRMM_ERROR_CONFIG, "mine");
    pthread_t t;
    int id = 3;
    void *seen;
    ck_assert_int_eq(pthread_create(&t, NULL, set_error_in_thread, &id), 0);
    ck_assert_int_eq(pthread_join(t, &seen), 0);
    ck_assert_str_eq((const char *)seen, "|0");
    /* the other thread's error does not leak into this one */
    ck_assert_str_eq(crmm_last_error(), "config error: mine");
    ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_CONFIG);
}
END_TEST

START_TEST(test_error_long_message_truncated)
{
    char *big = malloc(5000);
    ck_assert_ptr_nonnull(big);
    memset(big, 'x', 4999);
    big[4999] = '\0';
    ck_assert_int_eq(crmm_set_error(CRMM_ERROR_CONFIG, "%s", big), CRMM_ERROR_CONFIG);
    ck_assert_uint_eq(strlen(crmm_last_error()), 1023);
    ck_assert(strncmp(crmm_last_error(), "config error: xxx", 17) == 0);
    /* context on a full message: still cut at 1023 bytes, category still first */
    ck_assert_int_eq(crmm_error_add_context("%s", big), CRMM_ERROR_CONFIG);
    ck_assert_uint_eq(strlen(crmm_last_error()), 1023);
    ck_assert(strncmp(crmm_last_error(), "config error: xxx", 17) == 0);
    free(big);
}
END_TEST

START_TEST(test_error_add_context)
{
    crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "failed to allocate %s", "1.0 PiB");
    ck_assert_int_eq(crmm_error_add_context("pool '%s'", "main"), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_str_eq(crmm_last_error(), "out of memory: pool 'main': failed to allocate 1.0 PiB");
    crmm_error_add_context("f.ini:%d", 3);
    ck_assert_str_eq(crmm_last_error(), "out of memory: f.ini:3: pool 'main': failed to allocate 1.0 PiB");
    ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_OUT_OF_MEMORY);
    /* the context may quote the message itself */
    crmm_set_error(CRMM_ERROR_IO, "gone");
    crmm_error_add_context("[%s]", crmm_last_error());
    ck_assert_str_eq(crmm_last_error(), "I/O error: [I/O error: gone]: gone");
}
END_TEST

START_TEST(test_format_size)
{
    static const struct { unsigned long long bytes; const char *text; } cases[] = {
        {0, "0 B"},
        {1023, "1023 B"},
        {1024, "1.0 KiB"},
        {1536, "1.5 KiB"},
        {1048575, "1.0 MiB"}, /* not "1024.0 KiB" */
        {1048576, "1.0 MiB"},
        {1610612736ull, "1.5 GiB"},
        {1ull << 50, "1.0 PiB"},
        {18446744073709551615ull, "16.0 EiB"},
    };
    char buf[32];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_str_eq(crmm_format_size(cases[i].bytes, buf, sizeof buf), cases[i].text);
    char small[4];
    ck_assert_str_eq(crmm_format_size(1ull << 50, small, sizeof small), "1.0");
}
END_TEST

/* ---- logger --------------------------------------------------------------------------------- */

START_TEST(test_log_defaults)
{
    unsetenv("CRMM_LOG_LEVEL");
    unsetenv("CRMM_DEBUG_LOG_FILE");
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_WARN);
    ck_assert_int_eq(crmm_log_get_flush_level(), CRMM_LOG_WARN);
    ck_assert_str_eq(crmm_log_get_file(), "stderr");
}
END_TEST

START_TEST(test_log_levels)
{
    unsetenv("CRMM_LOG_LEVEL");
    for (int l = CRMM_LOG_TRACE; l <= CRMM_LOG_OFF; l++) {
        ck_assert_crmm_ok(crmm_log_set_level((crmm_log_level)l));
        ck_assert_int_eq(crmm_log_get_level(), l);
        for (int m = CRMM_LOG_TRACE; m <= CRMM_LOG_OFF; m++)
            ck_assert_msg(crmm_log_should_log((crmm_log_level)m) == (m >= l && m != CRMM_LOG_OFF),
                          "level %d, message %d", l, m);
    }
    crmm_log_set_level(CRMM_LOG_INFO);
    ck_assert_crmm(crmm_log_set_level((crmm_log_level)7), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_log_set_level((crmm_log_level)-1), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_INFO);
    ck_assert(!crmm_log_should_log((crmm_log_level)7));
    ck_assert(!crmm_log_should_log((crmm_log_level)-1));

    ck_assert_crmm_ok(crmm_log_flush_on(CRMM_LOG_ERROR));
    ck_assert_int_eq(crmm_log_get_flush_level(), CRMM_LOG_ERROR);
    ck_assert_crmm(crmm_log_flush_on((crmm_log_level)9), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(crmm_log_get_flush_level(), CRMM_LOG_ERROR);
}
END_TEST

START_TEST(test_log_level_names)
{
    static const char *const names[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
    crmm_log_level l;
    for (int i = 0; i <= CRMM_LOG_OFF; i++) {
        ck_assert_str_eq(crmm_log_level_name((crmm_log_level)i), names[i]);
        ck_assert_crmm_ok(crmm_log_level_parse(names[i], &l));
        ck_assert_int_eq(l, i);
    }
    ck_assert_str_eq(crmm_log_level_name((crmm_log_level)7), "?");
    ck_assert_str_eq(crmm_log_level_name((crmm_log_level)-1), "?");
    static const struct { const char *text; crmm_log_level level; } aliases[] = {
        {"warning", CRMM_LOG_WARN}, {"WARNING", CRMM_LOG_WARN}, {"Warn", CRMM_LOG_WARN},
        {"DEBUG", CRMM_LOG_DEBUG}, {"Critical", CRMM_LOG_CRITICAL}, {"OFF", CRMM_LOG_OFF},
    };
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        ck_assert_crmm_ok(crmm_log_level_parse(aliases[i].text, &l));
        ck_assert_int_eq(l, aliases[i].level);
    }
    static const char *const junk[] = {"", "verbose", "warnings", "info ", "3", "err"};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        l = CRMM_LOG_TRACE;
        ck_assert_crmm(crmm_log_level_parse(junk[i], &l), CRMM_ERROR_INVALID_ARGUMENT);
        ck_assert_int_eq(l, CRMM_LOG_TRACE); /* untouched */
    }
    ck_assert_error_contains("not a log level");
    ck_assert_crmm(crmm_log_level_parse(NULL, &l), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_log_level_parse("info", NULL), CRMM_ERROR_INVALID_ARGUMENT);
}
END_TEST

/* Checks that `line` is "[HH:MM:SS.uuuuuu] [crmm] [LEVEL] MESSAGE"; returns MESSAGE. */
static const char *check_line_format(const char *line, const char *level)
{
    int h, m, s, n = 0;
    long us;
    ck_assert_msg(sscanf(line, "[%2d:%2d:%2d.%6ld] %n", &h, &m, &s, &us, &n) == 4 && n == 18,
                  "bad time stamp in '%s'", line);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "[crmm] [%s] ", level);
    ck_assert_msg(strncmp(line + n, prefix, strlen(prefix)) == 0, "bad prefix in '%s'", line);
    return line + n + strlen(prefix);
}

START_TEST(test_log_to_file)
{
    unsetenv("CRMM_DEBUG_LOG_FILE");
    make_tmpdir();
    char path[4200];
    snprintf(path, sizeof path, "%s/crmm.log", tmpdir);
    crmm_log_set_level(CRMM_LOG_INFO);
    ck_assert_crmm_ok(crmm_log_set_file(path));
    ck_assert_str_eq(crmm_log_get_file(), path);
    crmm_log(CRMM_LOG_INFO, "hello %d", 42);
    crmm_log(CRMM_LOG_DEBUG, "dropped");
    crmm_log(CRMM_LOG_ERROR, "bad %s", "thing");
    crmm_log((crmm_log_level)17, "out of range");

    /* an unwritable destination is refused and the old one stays */
    char bad[4300];
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.log", tmpdir);
    ck_assert_crmm(crmm_log_set_file(bad), CRMM_ERROR_IO);
    ck_assert_error_contains(bad);
    ck_assert_str_eq(crmm_log_get_file(), path);
    crmm_log(CRMM_LOG_WARN, "still here");

    ck_assert_crmm_ok(crmm_log_set_file(NULL)); /* back to stderr; closes the file */
    ck_assert_str_eq(crmm_log_get_file(), "stderr");
    char *text = crmm_test_read_file_or_fail(path);
    char *save = NULL, *line;
    const char *want[] = {"hello 42", "bad thing", "still here"};
    const char *levels[] = {"info", "error", "warn"};
    int n = 0;
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++) {
        ck_assert_int_lt(n, 3);
        ck_assert_str_eq(check_line_format(line, levels[n]), want[n]);
    }
    ck_assert_int_eq(n, 3);
    free(text);

    /* set_file appends */
    ck_assert_crmm_ok(crmm_log_set_file(path));
    crmm_log(CRMM_LOG_CRITICAL, "appended");
    crmm_log_flush();
    text = crmm_test_read_file_or_fail(path);
    ck_assert_ptr_nonnull(strstr(text, "hello 42"));
    ck_assert_ptr_nonnull(strstr(text, "[critical] appended\n"));
    free(text);
    crmm_log_set_file(NULL);
}
END_TEST

START_TEST(test_log_env_level)
{
    setenv("CRMM_LOG_LEVEL", "Debug", 1);
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_DEBUG);
    ck_assert(crmm_log_should_log(CRMM_LOG_DEBUG));
    /* read once: a later change of the environment does nothing */
    setenv("CRMM_LOG_LEVEL", "error", 1);
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_DEBUG);
}
END_TEST

START_TEST(test_log_env_level_junk)
{
    setenv("CRMM_LOG_LEVEL", "loud", 1);
    crmm_clear_error();
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_WARN);
    /* a getter that succeeds leaves no error behind, even when the environment was junk */
    ck_assert_str_eq(crmm_last_error(), "");
}
END_TEST

START_TEST(test_log_env_file)
{
    make_tmpdir();
    char path[4200];
    snprintf(path, sizeof path, "%s/env.log", tmpdir);
    setenv("CRMM_DEBUG_LOG_FILE", path, 1);
    setenv("CRMM_LOG_LEVEL", "trace", 1);
    crmm_log(CRMM_LOG_TRACE, "from the environment");
    ck_assert_str_eq(crmm_log_get_file(), path);
    crmm_log_set_file(NULL);
    char *text = crmm_test_read_file_or_fail(path);
    ck_assert_str_eq(check_line_format(text, "trace"), "from the environment\n");
    free(text);
}
END_TEST

START_TEST(test_log_env_file_unwritable)
{
    setenv("CRMM_DEBUG_LOG_FILE", "/nonexistent-crmm-dir/x.log", 1);
    ck_assert_str_eq(crmm_log_get_file(), "stderr");
}
END_TEST

#define LOG_THREADS 8
#define LOG_LINES 300

static void *log_many(void *arg)
{
    int t = *(int *)arg;
    char pad[200];
    memset(pad, 'a' + t, sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    for (int i = 0; i < LOG_LINES; i++)
        crmm_log(CRMM_LOG_INFO, "thread %d line %d %s", t, i, pad + (i % 150));
    return NULL;
}

START_TEST(test_log_threads_never_interleave)
{
    unsetenv("CRMM_DEBUG_LOG_FILE");
    make_tmpdir();
    char path[4200];
    snprintf(path, sizeof path, "%s/threads.log", tmpdir);
    crmm_log_set_level(CRMM_LOG_INFO);
    crmm_log_flush_on(CRMM_LOG_OFF); /* buffered: lines must stay whole through the buffer too */
    ck_assert_crmm_ok(crmm_log_set_file(path));
    pthread_t th[LOG_THREADS];
    int ids[LOG_THREADS];
    for (int t = 0; t < LOG_THREADS; t++) {
        ids[t] = t;
        ck_assert_int_eq(pthread_create(&th[t], NULL, log_many, &ids[t]), 0);
    }
    for (int t = 0; t < LOG_THREADS; t++)
        pthread_join(th[t], NULL);
    crmm_log_set_file(NULL);

    char *text = crmm_test_read_file_or_fail(path);
    int next[LOG_THREADS] = {0};
    int lines = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save), lines++) {
        const char *msg = check_line_format(line, "info");
        int t, i, n = 0;
        ck_assert_msg(sscanf(msg, "thread %d line %d %n", &t, &i, &n) == 2 && t >= 0 && t < LOG_THREADS,
                      "garbled line '%s'", line);
        ck_assert_int_eq(i, next[t]); /* each thread's lines in order, none lost */
        next[t]++;
        size_t want = 199 - (size_t)(i % 150);
        ck_assert_uint_eq(strlen(msg + n), want);
        for (const char *c = msg + n; *c; c++)
            ck_assert_msg(*c == 'a' + t, "line of thread %d holds '%c': '%s'", t, *c, line);
    }
    ck_assert_int_eq(lines, LOG_THREADS * LOG_LINES);
    free(text);
}
END_TEST

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
};

START_TEST(test_size_good)
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
END_TEST

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
    {"1.5", "whole"},
    {"1.5B", "whole"},
    {"12.", "not a size"},
    {".", "not a size"},
    {"abc", "not a size"},
    {"1..5GiB", "not a size"},
    {"0%", "(0, 100]"},
    {"101%", "(0, 100]"},
    {"100.5%", "(0, 100]"},
    {"-5%", "negative"},
};

START_TEST(test_size_bad)
{
    uint64_t v = 12345;
    double pct = -1;
    ck_assert_msg(crmm_parse_size(bad_sizes[_i].text, 1000, &v, &pct) == CRMM_ERROR_INVALID_ARGUMENT,
                  "'%s' was accepted (%llu)", bad_sizes[_i].text, (unsigned long long)v);
    ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_error_contains(bad_sizes[_i].message);
    ck_assert_uint_eq(v, 12345); /* untouched on error */
}
END_TEST

START_TEST(test_size_percent)
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
    ck_assert_crmm(crmm_parse_size("100.0000000000000000001%", 1000, &v, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_parse_size("0.000%", 1000, &v, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    v = 7;
    ck_assert_crmm(crmm_parse_size("50%", 0, &v, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_error_contains("percentage is not allowed");
    ck_assert_uint_eq(v, 7);
    ck_assert_crmm(crmm_parse_size(NULL, 0, &v, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_parse_size("1", 0, NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
}
END_TEST

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

START_TEST(test_params_defaults)
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
END_TEST

START_TEST(test_params_typed_values)
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
END_TEST

START_TEST(test_params_bool_forms)
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
END_TEST

START_TEST(test_params_percent_size)
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
END_TEST

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

START_TEST(test_params_bad)
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
END_TEST

START_TEST(test_params_template_over_host)
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
END_TEST

START_TEST(test_params_null_arguments)
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
END_TEST

/* ---- plugin helpers ------------------------------------------------------------------------ */

START_TEST(test_param_type_names)
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
END_TEST

START_TEST(test_expand_file_name)
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
END_TEST

START_TEST(test_expand_file_name_bad)
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
END_TEST

/* ---- the tests' own temporary directories (test_support.c) ------------------------------- */

/* A directory made by a process goes when that process exits, with what it holds (also a
 * sub-directory without write permission); one made by its parent stays. */
START_TEST(test_tmpdirs_go_with_their_maker)
{
    char *mine = crmm_test_tmpdir();
    ck_assert_ptr_nonnull(mine);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
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
        ssize_t w = write(fds[1], path, strlen(path) + 1);
        exit(w > 1 ? 0 : 1); /* exit, not _exit: the exit handler removes d */
    }
    close(fds[1]);
    char child_dir[4200] = "";
    ssize_t n = read(fds[0], child_dir, sizeof child_dir - 1);
    close(fds[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_gt(n, 1);
    ck_assert_msg(access(child_dir, F_OK) != 0, "%s is still there", child_dir);
    ck_assert_msg(access(mine, F_OK) == 0, "the child removed its parent's %s", mine);
    free(mine);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("core");

    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, test_status_names);
    tcase_add_test(tc, test_error_categories);
    tcase_add_test(tc, test_error_clear);
    tcase_add_test(tc, test_error_thread_local);
    tcase_add_test(tc, test_error_long_message_truncated);
    tcase_add_test(tc, test_error_add_context);
    tcase_add_test(tc, test_format_size);
    suite_add_tcase(s, tc);

    tc = tcase_create("logger");
    tcase_add_test(tc, test_log_defaults);
    tcase_add_test(tc, test_log_levels);
    tcase_add_test(tc, test_log_level_names);
    tcase_add_test(tc, test_log_to_file);
    tcase_add_test(tc, test_log_env_level);
    tcase_add_test(tc, test_log_env_level_junk);
    tcase_add_test(tc, test_log_env_file);
    tcase_add_test(tc, test_log_env_file_unwritable);
    tcase_add_test(tc, test_log_threads_never_interleave);
    suite_add_tcase(s, tc);

    tc = tcase_create("sizes");
    tcase_add_loop_test(tc, test_size_good, 0, (int)(sizeof good_sizes / sizeof good_sizes[0]));
    tcase_add_loop_test(tc, test_size_bad, 0, (int)(sizeof bad_sizes / sizeof bad_sizes[0]));
    tcase_add_test(tc, test_size_percent);
    suite_add_tcase(s, tc);

    tc = tcase_create("params");
    tcase_add_checked_fixture(tc, host_setup, host_teardown);
    tcase_add_test(tc, test_params_defaults);
    tcase_add_test(tc, test_params_typed_values);
    tcase_add_test(tc, test_params_bool_forms);
    tcase_add_loop_test(tc, test_params_bad, 0, (int)(sizeof bad_params / sizeof bad_params[0]));
    tcase_add_test(tc, test_params_template_over_host);
    tcase_add_test(tc, test_params_null_arguments);
    suite_add_tcase(s, tc);

    tc = tcase_create("test_support");
    tcase_add_test(tc, test_tmpdirs_go_with_their_maker);
    suite_add_tcase(s, tc);

    tc = tcase_create("plugin_helpers");
    tcase_add_test(tc, test_param_type_names);
    tcase_add_test(tc, test_expand_file_name);
    tcase_add_test(tc, test_expand_file_name_bad);
    suite_add_tcase(s, tc);

    /* its own case: on a machine with a GPU it creates a CUDA context */
    tc = tcase_create("params_percent");
    tcase_set_timeout(tc, CRMM_TEST_GPU_TIMEOUT);
    tcase_add_test(tc, test_params_percent_size);
    suite_add_tcase(s, tc);

    return crmm_test_run(s);
}
