/* logging_line.c — formats the logging plugin's CSV lines (see logging_line.h).
 *
 * Per-thread caches: the thread id as text, and "HH:MM:SS" with the second it belongs to, so
 * localtime_r runs once per second per thread. Numbers are written with small digit loops into
 * the caller's buffer: no printf, no lock, no allocation. */
#include "config.h"
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "logging_line.h"

static __thread char thread_text[24];
static __thread size_t thread_len; /* 0 = not cached yet */
static __thread time_t hms_second = (time_t)-1;
static __thread char hms_text[8];

void logging_line_forget_thread(void)
{
    thread_len = 0;
    hms_second = (time_t)-1;
}

/* Decimal digits of v at p; returns the number written. */
static size_t put_decimal(char *p, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

/* Lower-case hex digits of v (no prefix, "0" for 0) at p; returns the number written. */
static size_t put_hex(char *p, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";
    size_t n = 1;
    for (uint64_t x = v >> 4; x; x >>= 4)
        n++;
    for (size_t i = n; i-- > 0; v >>= 4)
        p[i] = digits[v & 0xf];
    return n;
}

static void put_two(char *p, int v)
{
    p[0] = (char)('0' + v / 10);
    p[1] = (char)('0' + v % 10);
}

static void cache_thread(void)
{
    thread_len = put_decimal(thread_text, (uint64_t)gettid());
}

static void cache_hms(time_t second)
{
    struct tm tm;
    localtime_r(&second, &tm);
    put_two(hms_text, tm.tm_hour);
    hms_text[2] = ':';
    put_two(hms_text + 3, tm.tm_min);
    hms_text[5] = ':';
    put_two(hms_text + 6, tm.tm_sec);
    hms_second = second;
}

size_t logging_line_format(char *buf, logging_action action, const void *ptr, size_t bytes, uintptr_t stream)
{
    static const struct { const char *text; size_t len; } actions[] = {
        [LOGGING_ALLOCATE] = {"allocate,", 9},
        [LOGGING_ALLOCATE_FAILURE] = {"allocate failure,", 17},
        [LOGGING_FREE] = {"free,", 5},
    };
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (__builtin_expect(thread_len == 0, 0))
        cache_thread();
    if (__builtin_expect(ts.tv_sec != hms_second, 0))
        cache_hms(ts.tv_sec);

    char *p = buf;
    memcpy(p, thread_text, thread_len);
    p += thread_len;
    *p++ = ',';
    memcpy(p, hms_text, 8);
    p += 8;
    *p++ = '.';
    unsigned long us = (unsigned long)ts.tv_nsec / 1000;
    for (int i = 5; i >= 0; i--, us /= 10)
        p[i] = (char)('0' + us % 10);
    p += 6;
    *p++ = ',';
    memcpy(p, actions[action].text, actions[action].len);
    p += actions[action].len;
    if (ptr) { /* as printf's %p */
        *p++ = '0';
        *p++ = 'x';
        p += put_hex(p, (uintptr_t)ptr);
    } else {
        memcpy(p, "(nil)", 5);
        p += 5;
    }
    *p++ = ',';
    p += put_decimal(p, bytes);
    *p++ = ',';
    if (stream) { /* as RMM's `std::hex << stream`: a non-null pointer prints with 0x */
        *p++ = '0';
        *p++ = 'x';
    }
    p += put_hex(p, stream);
    *p++ = '\n';
    return (size_t)(p - buf);
}
