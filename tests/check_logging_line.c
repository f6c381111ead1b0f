/* check_logging_line.c — the logging plugin's line formatter, compiled in: every field against
 * what printf writes for it (numbers of every length, pointers, streams, the three actions), and
 * the time field: its shape, never before the thread's previous line, never after the call. */
#include "build_config.h"
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "test_support.h"
#include "logging_line.h"

/* The formatted line with its time field cut out, and the time itself. */
static void format_parts(logging_action action, const void *ptr, size_t bytes, uintptr_t stream, char *head, char *time_text,
                         char *tail)
{
    char line[LOGGING_LINE_MAX + 1];
    size_t n = logging_line_format(line, action, ptr, bytes, stream);
    ck_assert_uint_le(n, LOGGING_LINE_MAX);
    ck_assert_msg(n > 0 && line[n - 1] == '\n', "line does not end in a newline");
    line[n - 1] = '\0';
    char *c1 = strchr(line, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
    ck_assert_msg(c1 && c2, "line '%s' has no time field", line);
    memcpy(head, line, (size_t)(c1 - line));
    head[c1 - line] = '\0';
    memcpy(time_text, c1 + 1, (size_t)(c2 - c1 - 1));
    time_text[c2 - c1 - 1] = '\0';
    strcpy(tail, c2 + 1);
}

static const uint64_t numbers[] = {0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 9999, 10000, 65535, 99999, 100000,
                                   1234567, 99999999, 100000000, 4294967295u, 4294967296u, 999999999999ull,
                                   1ull << 50, 9999999999999999999ull, 10000000000000000000ull, UINT64_MAX};

CRMM_TEST(fields_match_printf)
{
    char want_thread[32];
    snprintf(want_thread, sizeof want_thread, "%ld", (long)gettid());
    static const char *names[] = {"allocate", "allocate failure", "free"};
    static const logging_action actions[] = {LOGGING_ALLOCATE, LOGGING_ALLOCATE_FAILURE, LOGGING_FREE};
    size_t count = sizeof numbers / sizeof numbers[0];
    for (size_t a = 0; a < 3; a++)
        for (size_t i = 0; i < count; i++) {
            /* pointers and streams of every hex length: the numbers themselves and shifted ones */
            uint64_t v = numbers[i], w = numbers[count - 1 - i] >> (i % 13);
            const void *ptr = (const void *)(uintptr_t)v;
            char head[64], time_text[64], tail[LOGGING_LINE_MAX], want[LOGGING_LINE_MAX + 64];
            format_parts(actions[a], ptr, (size_t)w, (uintptr_t)v, head, time_text, tail);
            ck_assert_str_eq(head, want_thread);
            if (v)
                snprintf(want, sizeof want, "%s,%p,%llu,0x%llx", names[a], ptr, (unsigned long long)w, (unsigned long long)v);
            else
                snprintf(want, sizeof want, "%s,(nil),%llu,0", names[a], (unsigned long long)w);
            ck_assert_str_eq(tail, want);
        }
}

/* Microseconds since midnight of a HH:MM:SS.UUUUUU text. */
static long long time_of_day_us(const char *t)
{
    int h, m, s, us;
    ck_assert_msg(strlen(t) == 15 && sscanf(t, "%2d:%2d:%2d.%6d", &h, &m, &s, &us) == 4 && t[2] == ':' && t[5] == ':' &&
                      t[8] == '.',
                  "time '%s' is not HH:MM:SS.UUUUUU", t);
    ck_assert_int_lt(h, 24);
    ck_assert_int_lt(m, 60);
    ck_assert_int_lt(s, 61);
    return (((long long)h * 60 + m) * 60 + s) * 1000000 + us;
}

/* The local time of day now, in microseconds, as the formatter computes it. */
static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    return (((long long)tm.tm_hour * 60 + tm.tm_min) * 60 + tm.tm_sec) * 1000000 + ts.tv_nsec / 1000;
}

CRMM_TEST(times_never_go_back_and_never_run_ahead)
{
    long long last = -1;
    for (int i = 0; i < 20000; i++) {
        char head[64], time_text[64], tail[LOGGING_LINE_MAX];
        format_parts(LOGGING_FREE, &last, 8, 0, head, time_text, tail);
        long long after = now_us(), t = time_of_day_us(time_text);
        if (after < t - 1000000) /* midnight passed between the two readings: start over */
            last = -1;
        else
            ck_assert_msg(t <= after, "line %d's time %s is after the call returned", i, time_text);
        ck_assert_msg(last < 0 || t >= last, "line %d's time %s is before the line before it", i, time_text);
        last = t;
    }
}

int main(void)
{
    return crmm_test_main("logging_line", 0);
}
