/* logging_line.c — formats the logging plugin's CSV lines (see logging_line.h).
 *
 * One per-thread cache holds the thread id as text and "HH:MM:SS" with the second it belongs to,
 * so localtime_r runs once per second per thread and the line costs one thread-local lookup.
 * The clock (CLOCK_REALTIME, as RMM's log) is read again only when the processor's time-stamp
 * counter says that at least LOGGING_CLOCK_REUSE_TICKS ticks have passed since the thread last
 * read it (x86; elsewhere it is read for every line): lines logged less than that apart share
 * one reading, so a time is at most that many ticks -- under a microsecond on any x86 of the
 * last twenty years, whose counters run at 1 GHz or more -- before the call it stamps, and a
 * thread's times never go backwards.
 * Numbers are written straight into the caller's buffer from the right: decimal two digits at a
 * time from a table, hex one digit per nibble with the length from the leading zero count. No
 * printf, no lock, no allocation. */
#include "config.h"
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "logging_line.h"

/* Ticks of the time-stamp counter within which one clock reading serves every line. */
#define LOGGING_CLOCK_REUSE_TICKS 1000u

typedef struct line_cache {
    struct timespec now; /* the thread's last clock reading */
    uint64_t now_tick;   /* the time-stamp counter when it was taken (0: never) */
    time_t second;     /* the second hms is for; -1 until set */
    size_t thread_len; /* 0 until thread is set */
    char hms[8];       /* "HH:MM:SS" */
    char thread[24];
} line_cache;

static __thread line_cache cache = {{0, 0}, 0, (time_t)-1, 0, {0}, {0}};

static const char two_digits[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                 "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                 "8081828384858687888990919293949596979899";

void logging_line_forget_thread(void)
{
    cache.thread_len = 0;
    cache.second = (time_t)-1;
    cache.now_tick = 0;
}

/* The time for a line: the thread's last reading when it is recent enough (see above). */
static inline const struct timespec *line_time(line_cache *c)
{
#if defined(__x86_64__) || defined(__i386__)
    uint64_t tick = __builtin_ia32_rdtsc();
    if (__builtin_expect(tick - c->now_tick < LOGGING_CLOCK_REUSE_TICKS, 1))
        return &c->now; /* a counter that went backwards (another core) wraps to a large difference */
    c->now_tick = tick;
#endif
    clock_gettime(CLOCK_REALTIME, &c->now);
    return &c->now;
}

/* Digits of v in decimal. */
static inline size_t decimal_length(uint64_t v)
{
    size_t n = 1;
    for (;;) {
        if (v < 10) return n;
        if (v < 100) return n + 1;
        if (v < 1000) return n + 2;
        if (v < 10000) return n + 3;
        v /= 10000;
        n += 4;
    }
}

/* Decimal digits of v at p; returns the number written. */
static inline size_t put_decimal(char *p, uint64_t v)
{
    size_t n = decimal_length(v);
    char *q = p + n;
    while (v >= 100) {
        unsigned i = (unsigned)(v % 100) * 2;
        v /= 100;
        *--q = two_digits[i + 1];
        *--q = two_digits[i];
    }
    if (v >= 10) {
        *--q = two_digits[v * 2 + 1];
        *--q = two_digits[v * 2];
    } else {
        *--q = (char)('0' + v);
    }
    return n;
}

/* Lower-case hex digits of v (no prefix, "0" for 0) at p; returns the number written. */
static inline size_t put_hex(char *p, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";
    size_t n = (size_t)(67 - __builtin_clzll(v | 1)) / 4;
    for (size_t i = n; i-- > 0; v >>= 4)
        p[i] = digits[v & 0xf];
    return n;
}

static inline void put_two(char *p, unsigned v)
{
    p[0] = two_digits[v * 2];
    p[1] = two_digits[v * 2 + 1];
}

static void cache_thread(line_cache *c)
{
    c->thread_len = put_decimal(c->thread, (uint64_t)gettid());
}

static void cache_hms(line_cache *c, time_t second)
{
    struct tm tm;
    localtime_r(&second, &tm);
    put_two(c->hms, (unsigned)tm.tm_hour);
    c->hms[2] = ':';
    put_two(c->hms + 3, (unsigned)tm.tm_min);
    c->hms[5] = ':';
    put_two(c->hms + 6, (unsigned)tm.tm_sec);
    c->second = second;
}

size_t logging_line_format(char *buf, logging_action action, const void *ptr, size_t bytes, uintptr_t stream)
{
    static const struct { const char *text; size_t len; } actions[] = {
        [LOGGING_ALLOCATE] = {"allocate,", 9},
        [LOGGING_ALLOCATE_FAILURE] = {"allocate failure,", 17},
        [LOGGING_FREE] = {"free,", 5},
    };
    line_cache *c = &cache;
    const struct timespec *ts = line_time(c);
    if (__builtin_expect(c->thread_len == 0, 0))
        cache_thread(c);
    if (__builtin_expect(ts->tv_sec != c->second, 0))
        cache_hms(c, ts->tv_sec);

    char *p = buf;
    memcpy(p, c->thread, sizeof c->thread); /* the whole array: a fixed-size copy; p moves by the length */
    p += c->thread_len;
    *p++ = ',';
    memcpy(p, c->hms, 8);
    p += 8;
    *p++ = '.';
    unsigned us = (unsigned)((unsigned long)ts->tv_nsec / 1000); /* 0 .. 999999 */
    put_two(p, us / 10000);
    put_two(p + 2, us / 100 % 100);
    put_two(p + 4, us % 100);
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
