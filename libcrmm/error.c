/* error.c — status names and the thread-local last-error message.
 *
 * Each thread has one fixed buffer (no allocation on the error path, so "out of memory" can
 * always be reported). A message starts with its category ("out of memory: ") so that a person
 * reading a log knows what kind of failure it was without the numeric status. */
#include "build_config.h"
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <crmm/crmm.h>
#include "internal.h"

#define CRMM_ERROR_MSG_MAX 1024

/* The thread's error, in one thread-local object (one address lookup per call where libcrmm was
 * loaded with dlopen). Two buffers: the one crmm_last_error() shows, and the one a void call's
 * own errors go to while it holds the caller's (crmm_error_hold_begin). A hold costs a count
 * until the held call first records or clears an error; only then do the buffers switch. */
static _Thread_local struct {
    char buffers[2][CRMM_ERROR_MSG_MAX];
    crmm_status status;
    crmm_status held_status; /* the caller's status, once the buffers switched */
    unsigned holds;          /* nested holds; the outermost one's end switches back */
    unsigned char shown;     /* the buffer crmm_last_error() shows */
    bool switched;           /* the held call has recorded or cleared an error */
} tl;
#define tl_message (tl.buffers[tl.shown])
#define tl_status (tl.status)

/* Under a hold, the held call's first write switches to the other buffer, empty. */
static inline void before_write(void)
{
    if (__builtin_expect(tl.holds && !tl.switched, 0)) {
        tl.held_status = tl.status;
        tl.shown ^= 1;
        tl.switched = true;
        tl_message[0] = '\0';
        tl.status = CRMM_OK;
    }
}

/* Under a hold, before the held call wrote anything, it sees no error (as after the switch). */
static inline bool held_unswitched(void) { return tl.holds && !tl.switched; }

const char *crmm_status_name(crmm_status status)
{
    switch (status) {
    case CRMM_OK: return "CRMM_OK";
    case CRMM_ERROR_OUT_OF_MEMORY: return "CRMM_ERROR_OUT_OF_MEMORY";
    case CRMM_ERROR_BAD_ALLOC: return "CRMM_ERROR_BAD_ALLOC";
    case CRMM_ERROR_INVALID_ARGUMENT: return "CRMM_ERROR_INVALID_ARGUMENT";
    case CRMM_ERROR_CUDA: return "CRMM_ERROR_CUDA";
    case CRMM_ERROR_CONFIG: return "CRMM_ERROR_CONFIG";
    case CRMM_ERROR_PLUGIN: return "CRMM_ERROR_PLUGIN";
    case CRMM_ERROR_NOT_FOUND: return "CRMM_ERROR_NOT_FOUND";
    case CRMM_ERROR_UNSUPPORTED: return "CRMM_ERROR_UNSUPPORTED";
    case CRMM_ERROR_IO: return "CRMM_ERROR_IO";
    case CRMM_ERROR_STATE: return "CRMM_ERROR_STATE";
    }
    return "CRMM_ERROR_UNKNOWN";
}

static const char *category(crmm_status status)
{
    switch (status) {
    case CRMM_OK: return "";
    case CRMM_ERROR_OUT_OF_MEMORY: return "out of memory: ";
    case CRMM_ERROR_BAD_ALLOC: return "bad alloc: ";
    case CRMM_ERROR_INVALID_ARGUMENT: return "invalid argument: ";
    case CRMM_ERROR_CUDA: return "CUDA error: ";
    case CRMM_ERROR_CONFIG: return "config error: ";
    case CRMM_ERROR_PLUGIN: return "plugin error: ";
    case CRMM_ERROR_NOT_FOUND: return "not found: ";
    case CRMM_ERROR_UNSUPPORTED: return "unsupported: ";
    case CRMM_ERROR_IO: return "I/O error: ";
    case CRMM_ERROR_STATE: return "invalid state: ";
    }
    return "error: ";
}

const char *crmm_last_error(void) { return held_unswitched() ? "" : tl_message; }

/* tl_message without the category of tl_status, when it starts with it. */
static const char *after_category(void)
{
    const char *cat = category(tl_status);
    size_t n = strlen(cat);
    return n && strncmp(tl_message, cat, n) == 0 ? tl_message + n : tl_message;
}

const char *crmm_last_error_detail(void) { return held_unswitched() ? "" : after_category(); }
crmm_status crmm_last_status(void) { return held_unswitched() ? CRMM_OK : tl_status; }

void crmm_clear_error(void)
{
    before_write();
    tl_message[0] = '\0';
    tl_status = CRMM_OK;
}

void crmm_error_hold_begin(void) { tl.holds++; }

void crmm_error_hold_end(void)
{
    if (!tl.holds || --tl.holds || !tl.switched)
        return;
    tl.shown ^= 1;
    tl.status = tl.held_status;
    tl.switched = false;
}

/* The length of the first len bytes of s, less a UTF-8 sequence that a cut at len left
 * incomplete: a message is cut between characters, so that what is kept stays well-formed (a
 * byte that is no UTF-8 lead at the cut goes too: the text was cut there anyway). */
static size_t cut_between_characters(const char *s, size_t len)
{
    size_t tail = 0; /* continuation bytes at the end */
    while (tail < len && tail < 3 && ((unsigned char)s[len - 1 - tail] & 0xC0) == 0x80)
        tail++;
    if (tail == len)
        return len;
    unsigned char lead = (unsigned char)s[len - 1 - tail];
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return lead >= 0x80 && tail + 1 < need ? len - 1 - tail : len;
}

crmm_status crmm_set_error_v(crmm_status status, const char *fmt, va_list ap)
{
    char body[CRMM_ERROR_MSG_MAX];
    /* a NULL format is the caller's slip, not a reason to crash while reporting an error */
    int n = fmt ? vsnprintf(body, sizeof body, fmt, ap) : snprintf(body, sizeof body, "(no message given)");
    bool cut = n < 0 || (size_t)n >= sizeof body;
    before_write();
    const char *cat = category(status);
    if (strncmp(body, cat, strlen(cat)) == 0)
        cat = "";
    size_t cl = strlen(cat), bl = strlen(body);
    if (cl + bl > sizeof tl_message - 1) {
        bl = sizeof tl_message - 1 - cl;
        cut = true;
    }
    memcpy(tl_message, cat, cl);
    memcpy(tl_message + cl, body, bl);
    tl_message[cut ? cut_between_characters(tl_message, cl + bl) : cl + bl] = '\0';
    tl_status = status;
    return status;
}

crmm_status crmm_set_error(crmm_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    crmm_set_error_v(status, fmt, ap);
    va_end(ap);
    return status;
}

crmm_status crmm_error_add_context(const char *fmt, ...)
{
    before_write();
    if (tl_status == CRMM_OK)
        return CRMM_OK; /* no failure to add context to: the message stays empty */
    if (!fmt)
        return tl_status; /* no context given: the message stays as it is */
    char ctx[CRMM_ERROR_MSG_MAX], old[CRMM_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    bool cut = n < 0 || (size_t)n >= sizeof ctx;
    const char *rest = after_category();
    const char *cat = rest != tl_message ? category(tl_status) : "";
    snprintf(old, sizeof old, "%s", rest);
    size_t used = 0;
    const char *parts[] = {cat, ctx, ": ", old};
    for (int i = 0; i < 4; i++) {
        size_t len = strlen(parts[i]);
        if (len > sizeof tl_message - 1 - used) {
            len = sizeof tl_message - 1 - used;
            cut = true;
        }
        memcpy(tl_message + used, parts[i], len);
        used += len;
    }
    tl_message[cut ? cut_between_characters(tl_message, used) : used] = '\0';
    return tl_status;
}

char *crmm_format_size(unsigned long long bytes, char *buf, unsigned long bufsize)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (!buf || bufsize == 0)
        return NULL; /* nowhere to write even the terminating NUL */
    if (bytes < 1024) {
        snprintf(buf, bufsize, "%llu B", bytes);
        return buf;
    }
    double v = (double)bytes;
    int u = 0;
    /* 1023.95 and up would print as "1024.0": show it in the next unit instead */
    while (v >= 1023.95 && u < 6) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, bufsize, "%.1f %s", v, units[u]);
    return buf;
}

const char *crmm_version(void) { return PACKAGE_VERSION; }
