/* logging_line.c — records a logged call and formats its CSV line (see logging_line.h).
 *
 * The calling thread caches its id; the formatting thread caches "HH:MM:SS" with the second it
 * belongs to, so localtime_r runs once per second per formatting thread.
 * The clock (CLOCK_REALTIME, as RMM's log) is read again only when the processor's time-stamp
 * counter says that at least LOGGING_CLOCK_REUSE_TICKS ticks have passed since the thread last
 * read it (x86; elsewhere it is read for every line): lines logged less than that apart share
 * one reading, so a time is at most that many ticks -- under a microsecond on any x86 of the
 * last twenty years, whose counters run at 1 GHz or more -- before the call it stamps, and a
 * thread's times never go backwards.
 * Numbers are written straight into the given buffer from the right: decimal two digits at a
 * time from a table, hex one digit per nibble with the length from the leading zero count. No
 * printf, no lock, no allocation. */
#include "build_config.h"
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "logging_line.h"

/* Ticks of the time-stamp counter within which one clock reading serves every line. */
#define LOGGING_CLOCK_REUSE_TICKS 1000u

/* The calling thread's: its id and last clock reading. */
typedef struct caller_cache {
    struct timespec now; /* the thread's last clock reading */
    uint64_t now_tick;   /* the time-stamp counter when it was taken (0: never) */
    uint32_t thread;     /* 0 until set */
} caller_cache;

/* The formatting thread's: "HH:MM:SS" for one second. */
typedef struct format_cache {
    time_t second; /* the second hms is for; -1 until set */
    char hms[8];
} format_cache;

static __thread caller_cache caller = {{0, 0}, 0, 0};
static __thread format_cache formatter = {(time_t)-1, {0}};

static const char two_digits[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                 "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                 "8081828384858687888990919293949596979899";

void logging_line_forget_thread(void)
{
    caller.thread = 0;
    caller.now_tick = 0;
    formatter.second = (time_t)-1;
}

/* The time for a call: the thread's last reading when it is recent enough (see above). */
static inline const struct timespec *call_time(caller_cache *c)
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

static void cache_hms(format_cache *c, time_t second)
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

void logging_record_take(logging_record *r, logging_action action, const void *ptr, size_t bytes, uintptr_t stream)
{
    caller_cache *c = &caller;
    const struct timespec *ts = call_time(c);
    if (__builtin_expect(c->thread == 0, 0))
        c->thread = (uint32_t)gettid();
    r->ptr = (uintptr_t)ptr;
    r->bytes = bytes;
    r->stream = stream;
    r->sec = (int64_t)ts->tv_sec;
    r->usec = (uint32_t)((unsigned long)ts->tv_nsec / 1000); /* 0 .. 999999 */
    r->thread = c->thread;
    r->action = (uint32_t)action;
}

size_t logging_record_format(char *buf, const logging_record *r)
{
    static const struct { const char *text; size_t len; } actions[] = {
        [LOGGING_ALLOCATE] = {"allocate,", 9},
        [LOGGING_ALLOCATE_FAILURE] = {"allocate failure,", 17},
        [LOGGING_FREE] = {"free,", 5},
    };
    format_cache *c = &formatter;
    if (__builtin_expect((time_t)r->sec != c->second, 0))
        cache_hms(c, (time_t)r->sec);
    unsigned action = r->action <= LOGGING_FREE ? r->action : LOGGING_FREE;

    char *p = buf;
    p += put_decimal(p, r->thread);
    *p++ = ',';
    memcpy(p, c->hms, 8);
    p += 8;
    *p++ = '.';
    unsigned us = r->usec;
    put_two(p, us / 10000);
    put_two(p + 2, us / 100 % 100);
    put_two(p + 4, us % 100);
    p += 6;
    *p++ = ',';
    memcpy(p, actions[action].text, actions[action].len);
    p += actions[action].len;
    if (r->ptr) { /* as printf's %p */
        *p++ = '0';
        *p++ = 'x';
        p += put_hex(p, r->ptr);
    } else {
        memcpy(p, "(nil)", 5);
        p += 5;
    }
    *p++ = ',';
    p += put_decimal(p, r->bytes);
    *p++ = ',';
    if (r->stream) { /* as RMM's `std::hex << stream`: a non-null pointer prints with 0x */
        *p++ = '0';
        *p++ = 'x';
    }
    p += put_hex(p, r->stream);
    *p++ = '\n';
    return (size_t)(p - buf);
}

size_t logging_line_format(char *buf, logging_action action, const void *ptr, size_t bytes, uintptr_t stream)
{
    logging_record r;
    logging_record_take(&r, action, ptr, bytes, stream);
    return logging_record_format(buf, &r);
}
