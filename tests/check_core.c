/* check_core.c — the core's building blocks: errors and the logger. The logger reads its
 * environment once, at first use; Check runs each test in a fresh child, so a test that sets
 * $CRMM_LOG_LEVEL before its first logger call sees it read. main() calls no crmm function before
 * the runner forks. Sizes and parameters: check_params.c. */
#include "build_config.h"
#include "core_test.h"

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

CRMM_TEST_IN("errors", test_status_names)
{
    for (int i = 0; i < NSTATUSES; i++)
        ck_assert_str_eq(crmm_status_name(statuses[i].st), statuses[i].name);
    ck_assert_str_eq(crmm_status_name((crmm_status)99), "CRMM_ERROR_UNKNOWN");
    ck_assert_str_eq(crmm_status_name((crmm_status)-1), "CRMM_ERROR_UNKNOWN");
}

CRMM_TEST_IN("errors", test_error_categories)
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

CRMM_TEST_IN("errors", test_error_clear)
{
    ck_assert_str_eq(crmm_last_error(), "");
    ck_assert_int_eq(crmm_last_status(), CRMM_OK);
    crmm_set_error(CRMM_ERROR_IO, "disk");
    crmm_clear_error();
    ck_assert_str_eq(crmm_last_error(), "");
    ck_assert_int_eq(crmm_last_status(), CRMM_OK);
}

static void *set_error_in_thread(void *arg)
{
    static char seen[256];
    /* a new thread starts clean, whatever the creating thread did */
    snprintf(seen, sizeof seen, "%s|%d", crmm_last_error(), (int)crmm_last_status());
    crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "thread %d", *(int *)arg);
    return seen;
}

CRMM_TEST_IN("errors", test_error_thread_local)
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

CRMM_TEST_IN("errors", test_error_long_message_truncated)
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

/* Whether s is well-formed UTF-8 (RFC 3629: no overlong forms, surrogates or cut sequences). */
static bool utf8_well_formed(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = *p < 0x80 ? 1 : *p >= 0xC2 && *p <= 0xDF ? 2 : *p >= 0xE0 && *p <= 0xEF ? 3 : *p >= 0xF0 && *p <= 0xF4 ? 4 : 0;
        if (!n)
            return false;
        for (size_t i = 1; i < n; i++)
            if ((p[i] & 0xC0) != 0x80)
                return false;
        p += n;
    }
    return true;
}

/* A message cut at its 1023 bytes loses a character that does not fit whole, never half of one:
 * the rest stays well-formed UTF-8 (a path, a resource name) for a log or Python's decode. */
CRMM_TEST_IN("errors", test_error_cut_between_characters)
{
    static const char *const chars[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9d\x84\x9e"}; /* é € 𝄞 */
    char body[1200], want[1200];
    for (size_t c = 0; c < 3; c++) {
        for (size_t pad = 1000; pad < 1012; pad++) {
            /* "config error: " and pad x's, then the character repeated past the limit */
            memset(body, 'x', pad);
            body[pad] = '\0';
            while (strlen(body) + 4 < sizeof body - 1)
                strcat(body, chars[c]);
            crmm_set_error(CRMM_ERROR_CONFIG, "%s", body);
            const char *m = crmm_last_error();
            ck_assert_msg(utf8_well_formed(m), "char %zu pad %zu: cut inside a character (%zu bytes)", c, pad, strlen(m));
            ck_assert_uint_ge(strlen(m), 1023 - 3);
            snprintf(want, sizeof want, "config error: %s", body);
            ck_assert(strncmp(m, want, strlen(m)) == 0);
            /* context in front pushes the end of the message out: cut between characters too */
            crmm_error_add_context("%.*s", (int)(pad - 1000), "ctxctxctxctx");
            m = crmm_last_error();
            ck_assert_msg(utf8_well_formed(m), "add_context, char %zu pad %zu: cut inside a character", c, pad);
            ck_assert_uint_ge(strlen(m), 1023 - 3);
            /* a long context itself is cut between its characters */
            crmm_set_error(CRMM_ERROR_IO, "short");
            crmm_error_add_context("%s", body);
            m = crmm_last_error();
            ck_assert_msg(utf8_well_formed(m), "long context, char %zu pad %zu: cut inside a character", c, pad);
            ck_assert(strncmp(m, "I/O error: xxx", 14) == 0);
        }
    }
}

CRMM_TEST_IN("errors", test_error_add_context)
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
    /* with no failure recorded there is nothing to add to */
    crmm_clear_error();
    ck_assert_int_eq(crmm_error_add_context("ctx"), CRMM_OK);
    ck_assert_str_eq(crmm_last_error(), "");
}

CRMM_TEST_IN("errors", test_format_size)
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

/* A NULL buffer, or no room for even the NUL, is refused with NULL rather than written through. */
CRMM_TEST_IN("errors", test_format_size_without_a_buffer)
{
    char buf[8] = "xxxxxxx";
    ck_assert_ptr_null(crmm_format_size(1ull << 50, NULL, 64));
    ck_assert_ptr_null(crmm_format_size(5, NULL, 64));
    ck_assert_ptr_null(crmm_format_size(1ull << 50, NULL, 0));
    ck_assert_ptr_null(crmm_format_size(1ull << 50, buf, 0));
    ck_assert_str_eq(buf, "xxxxxxx");
}

/* A NULL format records a message instead of crashing; as context it adds nothing. */
CRMM_TEST_IN("errors", test_set_error_null_format)
{
    const char *volatile no_format = NULL;
    ck_assert_int_eq(crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, no_format, 0), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_str_eq(crmm_last_error(), "invalid argument: (no message given)");
    crmm_set_error(CRMM_ERROR_IO, "disk");
    ck_assert_int_eq(crmm_error_add_context(no_format, 0), CRMM_ERROR_IO);
    ck_assert_str_eq(crmm_last_error(), "I/O error: disk");
    crmm_clear_error();
}

/* ---- logger --------------------------------------------------------------------------------- */

CRMM_TEST_IN("logger", test_log_defaults)
{
    unsetenv("CRMM_LOG_LEVEL");
    unsetenv("CRMM_DEBUG_LOG_FILE");
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_WARN);
    ck_assert_int_eq(crmm_log_get_flush_level(), CRMM_LOG_WARN);
    ck_assert_str_eq(crmm_log_get_file(), "stderr");
}

CRMM_TEST_IN("logger", test_log_levels)
{
    unsetenv("CRMM_LOG_LEVEL");
    for (int l = CRMM_LOG_TRACE; l <= CRMM_LOG_OFF; l++) {
        ck_assert_crmm_ok(crmm_log_set_level((crmm_log_level)l));
        ck_assert_int_eq(crmm_log_get_level(), l);
        for (int m = CRMM_LOG_TRACE; m <= CRMM_LOG_OFF; m++)
            ck_assert_msg(crmm_log_should_log((crmm_log_level)m) == (m >= l && m != CRMM_LOG_OFF),
                          "level %d, message %d", l, m);
    }
    ck_assert_crmm_ok(crmm_log_set_level(CRMM_LOG_INFO));
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

CRMM_TEST_IN("logger", test_log_level_names)
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

CRMM_TEST_IN("logger", test_log_to_file)
{
    unsetenv("CRMM_DEBUG_LOG_FILE");
    const char *path = crmm_test_tmp_path("crmm.log");
    ck_assert_crmm_ok(crmm_log_set_level(CRMM_LOG_INFO));
    ck_assert_crmm_ok(crmm_log_set_file(path));
    ck_assert_str_eq(crmm_log_get_file(), path);
    crmm_log(CRMM_LOG_INFO, "hello %d", 42);
    crmm_log(CRMM_LOG_DEBUG, "dropped");
    crmm_log(CRMM_LOG_ERROR, "bad %s", "thing");
    crmm_log((crmm_log_level)17, "out of range");

    /* an unwritable destination is refused and the old one stays */
    const char *bad = crmm_test_tmp_path("no/such/dir/x.log");
    ck_assert_crmm(crmm_log_set_file(bad), CRMM_ERROR_IO);
    ck_assert_error_contains(bad);
    ck_assert_str_eq(crmm_log_get_file(), path);
    /* a path too long for crmm_log_get_file to give back whole is refused, not cut short */
    char *longer = malloc(5000);
    ck_assert_ptr_nonnull(longer);
    memset(longer, 'a', 4999);
    longer[0] = '/', longer[4999] = '\0';
    ck_assert_crmm(crmm_log_set_file(longer), CRMM_ERROR_INVALID_ARGUMENT);
    free(longer);
    ck_assert_str_eq(crmm_log_get_file(), path);
    crmm_log(CRMM_LOG_WARN, "still here");
    const char *volatile no_format = NULL; /* as a binding passes a NULL through */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-security"
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    crmm_log(CRMM_LOG_ERROR, no_format);
#pragma GCC diagnostic pop

    ck_assert_crmm_ok(crmm_log_set_file(NULL)); /* back to stderr; closes the file */
    ck_assert_str_eq(crmm_log_get_file(), "stderr");
    char *text = crmm_test_read_file_or_fail(path);
    char *save = NULL, *line;
    const char *want[] = {"hello 42", "bad thing", "still here", "(no message given)"};
    const char *levels[] = {"info", "error", "warn", "error"};
    int n = 0;
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++) {
        ck_assert_int_lt(n, 4);
        ck_assert_str_eq(check_line_format(line, levels[n]), want[n]);
    }
    ck_assert_int_eq(n, 4);
    free(text);

    /* set_file appends */
    ck_assert_crmm_ok(crmm_log_set_file(path));
    crmm_log(CRMM_LOG_CRITICAL, "appended");
    crmm_log_flush();
    text = crmm_test_read_file_or_fail(path);
    ck_assert_ptr_nonnull(strstr(text, "hello 42"));
    ck_assert_ptr_nonnull(strstr(text, "[critical] appended\n"));
    free(text);
    ck_assert_crmm_ok(crmm_log_set_file(NULL));
}

/* A line still in the log's buffer when the process forks is written once, by the parent: the
 * child does not inherit it to write again at its exit. */
CRMM_TEST_IN("logger", test_log_buffered_line_is_written_once_across_fork)
{
    unsetenv("CRMM_DEBUG_LOG_FILE");
    const char *path = crmm_test_tmp_path("fork.log");
    ck_assert_crmm_ok(crmm_log_set_level(CRMM_LOG_INFO));
    ck_assert_crmm_ok(crmm_log_set_file(path));
    crmm_log(CRMM_LOG_INFO, "before the fork"); /* below the flush level: buffered */
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        exit(0); /* exit flushes what the child's stream holds */
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_crmm_ok(crmm_log_set_file(NULL));
    char *text = crmm_test_read_file_or_fail(path);
    ck_assert_int_eq(crmm_test_count(text, "before the fork"), 1);
    free(text);
}

CRMM_TEST_IN("logger", test_log_env_level)
{
    setenv("CRMM_LOG_LEVEL", "Debug", 1);
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_DEBUG);
    ck_assert(crmm_log_should_log(CRMM_LOG_DEBUG));
    /* read once: a later change of the environment does nothing */
    setenv("CRMM_LOG_LEVEL", "error", 1);
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_DEBUG);
}

CRMM_TEST_IN("logger", test_log_env_level_junk)
{
    setenv("CRMM_LOG_LEVEL", "loud", 1);
    crmm_clear_error();
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_WARN);
    /* a getter that succeeds leaves no error behind, even when the environment was junk */
    ck_assert_str_eq(crmm_last_error(), "");
}

CRMM_TEST_IN("logger", test_log_env_file)
{
    const char *path = crmm_test_tmp_path("env.log");
    setenv("CRMM_DEBUG_LOG_FILE", path, 1);
    setenv("CRMM_LOG_LEVEL", "trace", 1);
    crmm_log(CRMM_LOG_TRACE, "from the environment");
    ck_assert_str_eq(crmm_log_get_file(), path);
    ck_assert_crmm_ok(crmm_log_set_file(NULL));
    ck_assert_str_eq(check_line_format(crmm_test_file_text(path), "trace"), "from the environment\n");
}

CRMM_TEST_IN("logger", test_log_env_file_unwritable)
{
    setenv("CRMM_DEBUG_LOG_FILE", "/nonexistent-crmm-dir/x.log", 1);
    ck_assert_str_eq(crmm_log_get_file(), "stderr");
}

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

CRMM_TEST_IN("logger", test_log_threads_never_interleave)
{
    unsetenv("CRMM_DEBUG_LOG_FILE");
    const char *path = crmm_test_tmp_path("threads.log");
    ck_assert_crmm_ok(crmm_log_set_level(CRMM_LOG_INFO));
    ck_assert_crmm_ok(crmm_log_flush_on(CRMM_LOG_OFF)); /* buffered: lines must stay whole through the buffer too */
    ck_assert_crmm_ok(crmm_log_set_file(path));
    pthread_t th[LOG_THREADS];
    int ids[LOG_THREADS];
    for (int t = 0; t < LOG_THREADS; t++) {
        ids[t] = t;
        ck_assert_int_eq(pthread_create(&th[t], NULL, log_many, &ids[t]), 0);
    }
    for (int t = 0; t < LOG_THREADS; t++)
        ck_assert_int_eq(pthread_join(th[t], NULL), 0);
    ck_assert_crmm_ok(crmm_log_set_file(NULL));

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

int main(void)
{
    return CRMM_TEST_MAIN_CASES("core", {"errors", 0}, {"logger", 0});
}
