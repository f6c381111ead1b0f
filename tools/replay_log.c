/* replay_log.c — reads an RMM-format allocation log for `crmm replay` (see replay.h).
 *
 * One pass reads and checks every line into an array of events; a second pass walks them in
 * order with a hash map (support/ptr_map.h) from logged pointer to the event that
 * allocated it, pairing each free with its allocation and counting what the log itself shows
 * (leaks, frees of unknown pointers, sizes that disagree). Thread ids get small indices through
 * a second map. */
#include "build_config.h"
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "ptr_map.h"
#include "replay.h"

#define REPLAY_HEADER "Thread,Time,Action,Pointer,Size,Stream"

/* ---- fields ----------------------------------------------------------------------------- */

/* How a number field parsed. */
typedef enum field_status { FIELD_OK, FIELD_BAD, FIELD_RANGE } field_status;

/* Digits in `base` and nothing else (no sign, no blanks, no second 0x) into *out; FIELD_RANGE
 * for a value of 2^64 or more. */
static field_status parse_unsigned(const char *s, int base, uint64_t *out)
{
    if (!*s)
        return FIELD_BAD;
    for (const char *c = s; *c; c++)
        if (base == 10 ? !isdigit((unsigned char)*c) : !isxdigit((unsigned char)*c))
            return FIELD_BAD;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, base);
    if (*end)
        return FIELD_BAD;
    if (errno == ERANGE)
        return FIELD_RANGE;
    *out = v;
    return FIELD_OK;
}

/* Hex with or without 0x; "(nil)" is 0 when allow_nil. */
static field_status parse_hex(const char *s, bool allow_nil, uint64_t *out)
{
    if (allow_nil && strcmp(s, "(nil)") == 0) {
        *out = 0;
        return FIELD_OK;
    }
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        s += 2;
    return parse_unsigned(s, 16, out);
}

/* HH:MM:SS.ffffff as written by both (digits, ':' and '.'); the value is not used. */
static bool is_time(const char *s)
{
    if (!isdigit((unsigned char)*s))
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s) && *s != ':' && *s != '.')
            return false;
    return true;
}

static crmm_status bad_line(const char *path, unsigned line, const char *what, const char *text)
{
    return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s:%u: %s: '%.80s'", path, line, what, text);
}

/* Split "a,b,c,..." in place into exactly six fields. */
static crmm_status parse_line(const char *path, unsigned lineno, char *line, replay_event *ev)
{
    char copy[128];
    snprintf(copy, sizeof copy, "%s", line);
    char *f[7];
    int n = 0;
    for (char *p = line; n < 7;) {
        f[n++] = p;
        char *comma = strchr(p, ',');
        if (!comma)
            break;
        *comma = '\0';
        p = comma + 1;
    }
    if (n != 6) {
        char what[64];
        snprintf(what, sizeof what, "expected 6 comma-separated fields, found %s%d", n > 6 ? "more than " : "",
                 n > 6 ? 6 : n);
        return bad_line(path, lineno, what, copy);
    }
    field_status fs;
    if ((fs = parse_unsigned(f[0], 10, &ev->thread)) != FIELD_OK)
        return bad_line(path, lineno, fs == FIELD_RANGE ? "the thread id is out of range (2^64 or more)"
                                                        : "the thread id is not a decimal number", copy);
    if (!is_time(f[1]))
        return bad_line(path, lineno, "the time is not HH:MM:SS.ffffff", copy);
    if (strcmp(f[2], "allocate") == 0)
        ev->action = REPLAY_ALLOCATE;
    else if (strcmp(f[2], "free") == 0)
        ev->action = REPLAY_FREE;
    else if (strcmp(f[2], "allocate failure") == 0)
        ev->action = REPLAY_ALLOCATE_FAILURE;
    else
        return bad_line(path, lineno, "the action is not 'allocate', 'allocate failure' or 'free'", copy);
    if ((fs = parse_hex(f[3], true, &ev->pointer)) != FIELD_OK)
        return bad_line(path, lineno, fs == FIELD_RANGE ? "the pointer is out of range (2^64 or more)"
                                                        : "the pointer is not hexadecimal or (nil)", copy);
    if ((fs = parse_unsigned(f[4], 10, &ev->size)) != FIELD_OK)
        return bad_line(path, lineno, fs == FIELD_RANGE ? "the size is out of range (2^64 or more)"
                                                        : "the size is not a decimal number", copy);
    if (ev->size > SIZE_MAX)
        return bad_line(path, lineno, "the size does not fit in this machine's size_t", copy);
    if (ev->action == REPLAY_ALLOCATE && !ev->pointer && ev->size)
        return bad_line(path, lineno, "an allocation of a non-zero size at a null pointer (a failed one is "
                                      "'allocate failure')", copy);
    if ((fs = parse_hex(f[5], false, &ev->stream)) != FIELD_OK)
        return bad_line(path, lineno, fs == FIELD_RANGE ? "the stream is out of range (2^64 or more)"
                                                        : "the stream is not hexadecimal", copy);
    ev->line = lineno;
    ev->pair = -1;
    return CRMM_OK;
}

/* Strip the newline (and a \r before it); true when nothing but blanks is left. */
static bool chomp_is_blank(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i]))
            return false;
    return true;
}

/* Thread ids -> their index in order of first appearance (a map key cannot be 0: id 0 is kept
 * aside). */
typedef struct thread_indices {
    ptr_map ids;        /* of ptr_map_pair: id -> index + 1 */
    int64_t zero_index; /* of id 0; -1 before it appears */
} thread_indices;

/* The index of thread `id`, the next free one when it is new; -1 when malloc fails. */
static int64_t thread_index(thread_indices *t, uint64_t id, replay_log *log)
{
    if (!id) {
        if (t->zero_index < 0)
            t->zero_index = log->threads++;
        return t->zero_index;
    }
    ptr_map_pair *e = ptr_map_insert(&t->ids, (uintptr_t)id);
    if (!e)
        return -1;
    if (!e->value)
        e->value = (uintptr_t)++log->threads;
    return (int64_t)e->value - 1;
}

/* The longest line read: a log's lines are under 100 bytes; a longer one is not a log (and reading
 * it whole, as /dev/zero would be, could take all memory). */
#define REPLAY_LINE_MAX 4096

/* The next line of f into line (REPLAY_LINE_MAX bytes: at most REPLAY_LINE_MAX - 1 and a NUL,
 * the newline left out): its length; -1 at the end of the file or on a read error (ferror says
 * which); -2 when the line does not fit. *nul: the line holds a NUL byte. */
static long read_line(FILE *f, char *line, bool *nul)
{
    size_t n = 0;
    int c;
    *nul = false;
    while ((c = getc_unlocked(f)) != EOF && c != '\n') { /* read_events holds the stream's lock */
        if (n == REPLAY_LINE_MAX - 1)
            return -2;
        *nul |= c == '\0';
        line[n++] = (char)c;
    }
    line[n] = '\0';
    return c == EOF && (n == 0 || ferror(f)) ? -1 : (long)n;
}

static crmm_status read_events(const char *path, FILE *f, replay_log *log)
{
    char line[REPLAY_LINE_MAX];
    size_t capacity = 0;
    unsigned lineno = 0;
    crmm_status st = CRMM_OK;
    thread_indices threads = {.zero_index = -1};
    ptr_map_init(&threads.ids, sizeof(ptr_map_pair));
    long got;
    bool nul;
    flockfile(f); /* once, not once a character */
    while ((got = read_line(f, line, &nul)) != -1) {
        if (lineno == UINT_MAX) { /* line numbers are kept in an unsigned: refused, not wrapped */
            st = crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: more than %u lines (crmm replay reads at most that many)",
                                path, UINT_MAX);
            break;
        }
        lineno++;
        if (got == -2) {
            st = crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s:%u: the line is longer than %d bytes (not a log)",
                                path, lineno, REPLAY_LINE_MAX - 1);
            break;
        }
        if (nul) {
            st = crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s:%u: the line holds a NUL byte (not a text log)", path,
                                lineno);
            break;
        }
        bool blank = chomp_is_blank(line);
        if (lineno == 1) {
            if (strcmp(line, REPLAY_HEADER) != 0) {
                st = crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s:1: not an RMM allocation log: the header must "
                                    "be '" REPLAY_HEADER "' (found '%.80s')", path, line);
                break;
            }
            continue;
        }
        if (blank)
            continue;
        if (log->count == capacity) {
            size_t want = capacity ? capacity * 2 : 4096;
            replay_event *grown = realloc(log->events, want * sizeof *grown);
            if (!grown) {
                st = crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: out of memory at line %u", path, lineno);
                break;
            }
            log->events = grown;
            capacity = want;
        }
        replay_event *ev = &log->events[log->count];
        if ((st = parse_line(path, lineno, line, ev)) != CRMM_OK)
            break;
        int64_t idx = thread_index(&threads, ev->thread, log);
        if (idx < 0) {
            st = crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: out of memory at line %u", path, lineno);
            break;
        }
        ev->thread_index = (uint32_t)idx;
        log->count++;
    }
    funlockfile(f);
    if (st == CRMM_OK && ferror(f))
        st = crmm_set_error(CRMM_ERROR_IO, "cannot read %s: %s", path, strerror(errno));
    if (st == CRMM_OK && lineno == 0)
        st = crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s:1: the log is empty (no '" REPLAY_HEADER "' header)", path);
    ptr_map_destroy(&threads.ids);
    return st;
}

/* Pair frees with allocations and count what the log shows. */
static crmm_status pair_events(const char *path, replay_log *log)
{
    ptr_map live; /* of ptr_map_pair: logged pointer -> the event that allocated it */
    ptr_map_init(&live, sizeof(ptr_map_pair));
    uint64_t live_bytes = 0;
    for (size_t i = 0; i < log->count; i++) {
        replay_event *ev = &log->events[i];
        if (ev->action == REPLAY_ALLOCATE_FAILURE) {
            log->failures_logged++;
            continue;
        }
        if (ev->action == REPLAY_ALLOCATE) {
            log->allocations++;
            if (!ev->pointer)
                continue; /* a 0-byte allocation */
            size_t before = live.count;
            ptr_map_pair *e = ptr_map_insert(&live, (uintptr_t)ev->pointer);
            if (!e) {
                ptr_map_destroy(&live);
                return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: out of memory pairing events", path);
            }
            if (live.count == before && log->reused_live++ == 0) /* the pointer is live already */
                log->first_reused_live_line = ev->line;
            e->value = i;
            if (live_bytes + ev->size < live_bytes) {
                ptr_map_destroy(&live);
                return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s:%u: more than 2^64 bytes would be live (not a "
                                      "real log)", path, ev->line);
            }
            live_bytes += ev->size;
            if (live_bytes > log->peak_bytes)
                log->peak_bytes = live_bytes;
            continue;
        }
        log->frees++;
        if (!ev->pointer)
            continue;
        ptr_map_pair *e = ptr_map_find(&live, (uintptr_t)ev->pointer);
        if (!e) {
            if (log->unknown_frees++ == 0)
                log->first_unknown_free_line = ev->line;
            continue;
        }
        int64_t a = (int64_t)e->value;
        ptr_map_erase(&live, e);
        ev->pair = a;
        log->events[a].pair = (int64_t)i;
        if (log->events[a].size != ev->size && log->size_mismatches++ == 0)
            log->first_size_mismatch_line = ev->line;
        live_bytes -= log->events[a].size;
    }
    ptr_map_destroy(&live);
    for (size_t i = 0; i < log->count; i++) {
        const replay_event *ev = &log->events[i];
        if (ev->action == REPLAY_ALLOCATE && ev->pointer && ev->pair < 0) {
            log->leaked_count++;
            log->leaked_bytes += ev->size;
        }
    }
    return CRMM_OK;
}

crmm_status replay_log_read(const char *path, replay_log *log)
{
    memset(log, 0, sizeof *log);
    FILE *f = fopen(path, "r");
    if (!f)
        return crmm_set_error(CRMM_ERROR_IO, "cannot open %s: %s", path, strerror(errno));
    crmm_status st = read_events(path, f, log);
    fclose(f);
    if (st == CRMM_OK)
        st = pair_events(path, log);
    if (st != CRMM_OK)
        replay_log_free(log);
    return st;
}

void replay_log_free(replay_log *log)
{
    free(log->events);
    memset(log, 0, sizeof *log);
}
