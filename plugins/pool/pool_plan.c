/* pool_plan.c — an expandable pool's placement plan (see pool_plan.h): reading the file, the
 * cursor, the busy bits and the pages of the plan's range. */
#include "build_config.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include <crmm/log.h>
#include <crmm/pool.h>
#include "pool_plan.h"

#define PLAN_UNIT 256 /* bytes per busy bit: the pool's alignment */

/* pool_plan.lent, per page */
enum {
    PLAN_PAGE_OWN,        /* the plan's (mapped or not) */
    PLAN_PAGE_LENT,       /* lent to the pool's range before the pending event */
    PLAN_PAGE_LENT_LATER, /* lent after it: waits for the next */
    PLAN_PAGE_GIVEN,      /* unmapped, its memory the pool's range's: mapped again only with memory
                           * the range holds idle (pool_plan_asked.give), never new memory, until a
                           * trim (the range has given its idle memory back then) */
};

/* ---- reading ------------------------------------------------------------------------------- */

/* Why next_line stopped. */
typedef enum { LINE_READ, LINE_END, LINE_TOO_LONG, LINE_UNREADABLE } line_read;

/* The next line of f into buf without its line end, counting lines. A line too long for buf (no
 * line end within it, and not the file's last) is LINE_TOO_LONG, never read as two. */
static line_read next_line(FILE *f, char *buf, size_t size, unsigned long *line)
{
    if (!fgets(buf, (int)size, f))
        return ferror(f) ? LINE_UNREADABLE : LINE_END;
    (*line)++;
    size_t n = strcspn(buf, "\n");
    if (!buf[n] && !feof(f))
        return LINE_TOO_LONG;
    buf[strcspn(buf, "\r\n")] = '\0';
    return LINE_READ;
}

/* A decimal number that fills [s, end of its field): digits only (no sign, no blank), at most
 * UINT64_MAX. *next: the character after it. */
static bool parse_number(const char *s, uint64_t *v, const char **next)
{
    if (*s < '0' || *s > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno)
        return false;
    *v = x;
    *next = end;
    return true;
}

/* Parse "KEY NUMBER", or "KEY none" when none_ok (*none: which). */
static bool parse_header(const char *buf, const char *key, bool none_ok, uint64_t *v, bool *none)
{
    size_t n = strlen(key);
    if (strncmp(buf, key, n) != 0 || buf[n] != ' ')
        return false;
    const char *s = buf + n + 1, *end;
    if (none_ok && strcmp(s, "none") == 0) {
        *none = true;
        return true;
    }
    if (none_ok)
        *none = false;
    return parse_number(s, v, &end) && !*end;
}

/* Parse "SIZE OFFSET". */
static bool parse_entry(const char *buf, uint64_t *size, uint64_t *offset)
{
    const char *end;
    return parse_number(buf, size, &end) && *end == ' ' && parse_number(end + 1, offset, &end) && !*end;
}

static crmm_status bad_plan(FILE *f, pool_plan *pl, const char *label, const char *path, unsigned long line,
                            const char *what)
{
    fclose(f);
    pool_plan_destroy(pl);
    if (line)
        return crmm_set_error(CRMM_ERROR_CONFIG, "%s: plan %s, line %lu: %s", label, path, line, what);
    return crmm_set_error(CRMM_ERROR_CONFIG, "%s: plan %s: %s", label, path, what);
}

/* A header or entry line that next_line did not read: why, in words, with `expected` when the
 * file ended; the line to name (the last read when the file ended before it). */
static const char *unread(line_read r, const char *expected, char *why, size_t size)
{
    if (r == LINE_TOO_LONG)
        return "a line longer than any a plan has";
    if (r == LINE_UNREADABLE)
        return snprintf(why, size, "cannot be read: %s", strerror(errno)), why;
    snprintf(why, size, "the file ends after this line; expected %s", expected);
    return why;
}

/* Open `path` for reading if it is a regular file (a directory, a FIFO or a device is refused
 * without blocking on it). NULL with the error set otherwise. */
static FILE *open_plan(const char *path, const char *label)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        crmm_set_error(CRMM_ERROR_CONFIG, "%s: cannot read plan %s: %s", label, path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    FILE *f = NULL;
    if (!S_ISREG(st.st_mode))
        crmm_set_error(CRMM_ERROR_CONFIG, "%s: plan %s is not a regular file", label, path);
    else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 || !(f = fdopen(fd, "r")))
        crmm_set_error(CRMM_ERROR_CONFIG, "%s: cannot read plan %s: %s", label, path, strerror(errno));
    if (!f)
        close(fd);
    return f;
}

/* Room for entry k (the arrays grow as entries are read: the header's count allocates nothing). */
static bool room_for_entry(pool_plan *pl, uint64_t k, uint64_t *room)
{
    if (k < *room)
        return true;
    uint64_t grown = *room ? 2 * *room : 1024;
    if (grown > pl->count)
        grown = pl->count;
    uint64_t *size = realloc(pl->size, grown * sizeof *size);
    if (size)
        pl->size = size;
    uint64_t *offset = size ? realloc(pl->offset, grown * sizeof *offset) : NULL;
    if (offset)
        pl->offset = offset;
    if (!size || !offset)
        return false;
    *room = grown;
    return true;
}

crmm_status pool_plan_load(const char *path, const char *label, pool_plan **out)
{
    *out = NULL;
    FILE *f = open_plan(path, label);
    if (!f)
        return CRMM_ERROR_CONFIG;
    pool_plan *pl = calloc(1, sizeof *pl);
    if (!pl) {
        fclose(f);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: malloc failed (plan)", label);
    }
    char buf[128], why[160];
    unsigned long line = 0;
    uint64_t loop = 0;
    bool no_loop = false;
    line_read r;
    static const char *const expected[] = {"\"extent BYTES\" (more than 0)", "\"loop INDEX\" or \"loop none\"",
                                           "\"count N\" (more than 0)"};
    if ((r = next_line(f, buf, sizeof buf, &line)) != LINE_READ || strcmp(buf, "crmm-plan 1") != 0)
        return bad_plan(f, pl, label, path, 0,
                        r == LINE_UNREADABLE ? unread(r, "", why, sizeof why)
                                             : "not a plan written by `crmm plan` (its first line is \"crmm-plan 1\")");
    for (int h = 0; h < 3; h++) {
        if ((r = next_line(f, buf, sizeof buf, &line)) != LINE_READ)
            return bad_plan(f, pl, label, path, line, unread(r, expected[h], why, sizeof why));
        bool ok = h == 0 ? parse_header(buf, "extent", false, &pl->extent, NULL) && pl->extent
                : h == 1 ? parse_header(buf, "loop", true, &loop, &no_loop)
                         : parse_header(buf, "count", false, &pl->count, NULL) && pl->count;
        if (!ok)
            return bad_plan(f, pl, label, path, line, (snprintf(why, sizeof why, "expected %s", expected[h]), why));
    }
    if (pl->extent > CRMM_POOL_PLAN_MAX_EXTENT || pl->count > CRMM_POOL_PLAN_MAX_ENTRIES)
        return bad_plan(f, pl, label, path, 0, "extent or count too large to be a plan");
    if (!no_loop && loop >= pl->count)
        return bad_plan(f, pl, label, path, 3, "the loop is not one of the entries");
    pl->loop = no_loop ? pl->count : loop;
    pl->resync_after = POOL_PLAN_RESYNC;
    uint64_t room = 0;
    for (uint64_t k = 0; k < pl->count; k++) {
        uint64_t size, offset;
        if ((r = next_line(f, buf, sizeof buf, &line)) != LINE_READ)
            return bad_plan(f, pl, label, path, r == LINE_END ? 0 : line,
                            r == LINE_END ? "fewer entries than its count" : unread(r, "", why, sizeof why));
        if (!parse_entry(buf, &size, &offset))
            return bad_plan(f, pl, label, path, line, "expected \"SIZE OFFSET\"");
        if (size % PLAN_UNIT || offset % PLAN_UNIT)
            return bad_plan(f, pl, label, path, line, "size and offset must be multiples of 256");
        if (offset > pl->extent || size > pl->extent - offset)
            return bad_plan(f, pl, label, path, line, "the entry ends past the extent");
        if (!room_for_entry(pl, k, &room)) {
            fclose(f);
            pool_plan_destroy(pl);
            return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: plan %s: malloc failed (entry %" PRIu64 ")", label,
                                  path, k + 1);
        }
        pl->size[k] = size;
        pl->offset[k] = offset;
    }
    while ((r = next_line(f, buf, sizeof buf, &line)) == LINE_READ) /* blank lines only, to the end */
        if (buf[strspn(buf, " \t")])
            return bad_plan(f, pl, label, path, line, "more entries than its count");
    if (r != LINE_END)
        return bad_plan(f, pl, label, path, line, unread(r, "", why, sizeof why));
    fclose(f);
    *out = pl;
    return CRMM_OK;
}

crmm_status pool_plan_reserve(pool_plan *pl, int device, size_t page_size)
{
    crmm_status st = pool_vmm_reserve(&pl->vmm, device, (size_t)pl->extent, page_size);
    if (st != CRMM_OK)
        return st;
    pl->busy = calloc((pl->extent / PLAN_UNIT + 64) / 64, sizeof *pl->busy);
    pl->full = calloc(pl->vmm.pages, sizeof *pl->full);
    pl->partial = calloc(pl->vmm.pages, sizeof *pl->partial);
    if (!pl->busy || !pl->full || !pl->partial)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "malloc failed (the plan's page table)");
    return CRMM_OK;
}

/* ---- what is busy -------------------------------------------------------------------------------
 * Per page of the range, how many busy blocks cover it whole (full) and how many cover part of it
 * (partial), and for the parts one bit per 256 bytes: a block touches the counts of its pages and
 * the bits of its first and last page only, so a large block costs a count per page rather than
 * a bit per 256 bytes. */

/* The bits [first, end) as a head word, whole words and a tail word: masks of the partial words
 * (0: none) and the whole words' range [*w0, *w1). */
static void bit_span(uint64_t first, uint64_t end, uint64_t *head, uint64_t *tail, uint64_t *w0, uint64_t *w1)
{
    uint64_t fw = first / 64, ew = end / 64;
    *head = *tail = 0;
    if (fw == ew) { /* within one word */
        *head = end > first ? ((~(uint64_t)0 >> (64 - (end - first))) << (first % 64)) : 0;
        *w0 = *w1 = fw;
        return;
    }
    *w0 = fw;
    if (first % 64) {
        *head = ~(uint64_t)0 << (first % 64);
        (*w0)++;
    }
    *w1 = ew;
    if (end % 64)
        *tail = ~(uint64_t)0 >> (64 - end % 64);
}

/* Set (on) or clear the bits of [offset, offset + size). */
static void mark_bits(uint64_t *bits, uint64_t offset, uint64_t size, bool on)
{
    uint64_t first = offset / PLAN_UNIT, end = (offset + size) / PLAN_UNIT, head, tail, w0, w1;
    bit_span(first, end, &head, &tail, &w0, &w1);
    if (head)
        bits[first / 64] = on ? bits[first / 64] | head : bits[first / 64] & ~head;
    if (w1 > w0)
        memset(&bits[w0], on ? 0xFF : 0, (size_t)(w1 - w0) * sizeof *bits);
    if (tail)
        bits[end / 64] = on ? bits[end / 64] | tail : bits[end / 64] & ~tail;
}

/* Whether any bit of [offset, offset + size) is set. */
static bool any_bits(const uint64_t *bits, uint64_t offset, uint64_t size)
{
    uint64_t first = offset / PLAN_UNIT, end = (offset + size) / PLAN_UNIT, head, tail, w0, w1;
    bit_span(first, end, &head, &tail, &w0, &w1);
    uint64_t any = (bits[first / 64] & head) | (tail ? bits[end / 64] & tail : 0);
    for (uint64_t w = w0; w < w1; w++)
        any |= bits[w];
    return any != 0;
}

/* Calls fn(pl, page, lo, hi, arg) for each page that [offset, offset + size) touches, with the
 * part [lo, hi) of it that it covers; stops when fn returns true, and returns that. */
typedef bool (*page_part_fn)(pool_plan *pl, size_t page, uint64_t lo, uint64_t hi, bool arg);
static bool each_page(pool_plan *pl, uint64_t offset, uint64_t size, page_part_fn fn, bool arg)
{
    uint64_t page = pl->vmm.page, end = offset + size;
    for (size_t i = (size_t)(offset / page); (uint64_t)i * page < end; i++) {
        uint64_t start = (uint64_t)i * page;
        uint64_t lo = start > offset ? start : offset, hi = start + page < end ? start + page : end;
        if (fn(pl, i, lo, hi, arg))
            return true;
    }
    return false;
}

static bool whole(const pool_plan *pl, size_t i, uint64_t lo, uint64_t hi)
{
    return lo == (uint64_t)i * pl->vmm.page && hi == lo + pl->vmm.page;
}

static bool part_busy(pool_plan *pl, size_t i, uint64_t lo, uint64_t hi, bool unused)
{
    (void)unused;
    return pl->full[i] || (whole(pl, i, lo, hi) ? pl->partial[i] != 0 : any_bits(pl->busy, lo, hi - lo));
}

static bool part_mark(pool_plan *pl, size_t i, uint64_t lo, uint64_t hi, bool on)
{
    if (whole(pl, i, lo, hi)) {
        pl->full[i] += on ? 1 : -1;
    } else {
        mark_bits(pl->busy, lo, hi - lo, on);
        pl->partial[i] += on ? 1 : -1;
    }
    return false;
}

/* Whether a busy block overlaps [offset, offset + size). */
static bool busy(pool_plan *pl, uint64_t offset, uint64_t size) { return each_page(pl, offset, size, part_busy, false); }

/* Mark [offset, offset + size), a block's range, busy (on) or free. */
static void mark(pool_plan *pl, uint64_t offset, uint64_t size, bool on) { each_page(pl, offset, size, part_mark, on); }

/* ---- serving ------------------------------------------------------------------------------- */

/* The entry `steps` after k, going back to the loop after the last; count when there is none. */
static uint64_t entry_after(const pool_plan *pl, uint64_t k, uint64_t steps)
{
    for (; steps; steps--) {
        if (++k == pl->count) {
            if (pl->loop == pl->count)
                return pl->count;
            k = pl->loop;
        }
    }
    return k;
}

/* Bytes of the pages the plan holds: mapped and not lent (a lent page's memory is the pool's
 * range's now), or unmapped but not yet released (a release the driver refused keeps the page
 * the process's). */
static void count_held(pool_plan *pl)
{
    const pool_vmm *v = &pl->vmm;
    pl->held = (uint64_t)(v->mapped_pages - v->lent_pages + v->spare_count) * v->page;
}

/* Bytes of the unmapped pages of [offset, offset + size), and in *given those of them whose memory
 * the plan gave to the pool's range; UINT64_MAX when one of them is lent and not yet unmapped (its
 * old mapping may not be used: the memory may be the pool's range's by now). */
static uint64_t unmapped_bytes(const pool_plan *pl, uint64_t offset, uint64_t size, size_t *given)
{
    const pool_vmm *v = &pl->vmm;
    uint64_t n = 0;
    *given = 0;
    for (size_t i = (size_t)(offset / v->page); (uint64_t)i * v->page < offset + size; i++) {
        if (v->mapped[i] == POOL_PAGE_LENT)
            return UINT64_MAX;
        n += v->mapped[i] == POOL_PAGE_UNMAPPED;
        /* a stray one (a refused undo left it mapped) holds its memory already */
        *given += pl->lent && pl->lent[i] == PLAN_PAGE_GIVEN && v->mapped[i] == POOL_PAGE_UNMAPPED;
    }
    return n * v->page;
}

/* After [offset, offset + size) was mapped: its given pages are the plan's again. */
static void ungive(pool_plan *pl, uint64_t offset, uint64_t size)
{
    const pool_vmm *v = &pl->vmm;
    for (size_t i = (size_t)(offset / v->page); pl->given_pages && (uint64_t)i * v->page < offset + size; i++)
        if (pl->lent[i] == PLAN_PAGE_GIVEN) {
            pl->lent[i] = PLAN_PAGE_OWN;
            pl->given_pages--;
        }
}

/* Whether page i needs pool_vmm_map before a block may use it: unmapped, or a stray (mapped with
 * no access rights). */
static bool to_map(const pool_vmm *v, size_t i) { return v->mapped[i] == POOL_PAGE_UNMAPPED || v->mapped[i] == POOL_PAGE_STRAY; }

/* Map the unmapped pages of [offset, offset + size), and give the stray ones access; *mapped: the
 * bytes of the pages mapped anew. */
static crmm_status map_pages(pool_plan *pl, uint64_t offset, uint64_t size, uint64_t *mapped)
{
    pool_vmm *v = &pl->vmm;
    size_t first = (size_t)(offset / v->page), last = (size_t)((offset + size - 1) / v->page);
    for (size_t i = first; i <= last;) {
        if (!to_map(v, i)) {
            i++;
            continue;
        }
        size_t j = i;
        while (j <= last && to_map(v, j))
            j++;
        size_t before = v->mapped_pages;
        crmm_status st = pool_vmm_map(v, i, j - i);
        *mapped += (uint64_t)(v->mapped_pages - before) * v->page;
        if (st != CRMM_OK)
            return st;
        i = j;
    }
    return CRMM_OK;
}

/* Whether the POOL_PLAN_RESYNC entries before entry j have the sizes of the last requests. */
static bool recent_end_at(const pool_plan *pl, uint64_t j)
{
    for (unsigned i = 1; i <= POOL_PLAN_RESYNC; i++)
        if (pl->size[j - i] != pl->recent[(pl->requests - i) % POOL_PLAN_RESYNC])
            return false;
    return true;
}

/* The cursor after the first run of entries, from the cursor on and around, whose sizes are the
 * last requests'. False when there is none (the cursor stays). An ended plan (past its last
 * entry, no loop) is searched at its start only, for a run that started over: the run has gone
 * past what was recorded, and a stretch inside the plan that its requests match (a step's first
 * part, where the recording stopped in the step after it) would be followed for that stretch
 * only, its pages held beside the pool's for the rest of each step. */
static bool resync(pool_plan *pl)
{
    uint64_t n = pl->count, from = pl->cursor < n ? pl->cursor : 0, tries = n;
    if (pl->ended)
        from = POOL_PLAN_RESYNC - 1, tries = 1; /* the run of the first entries only */
    for (uint64_t d = 0; d < tries; d++) {
        uint64_t j = (from + d) % n + 1; /* the run ends before entry j */
        if (j < POOL_PLAN_RESYNC || !recent_end_at(pl, j))
            continue;
        pl->cursor = entry_after(pl, j - 1, 1);
        pl->ended = pl->cursor == pl->count;
        return true;
    }
    return false;
}

/* Note whether the request just seen was served (missed: not); when too many recent ones were
 * not, search (resync), at most as often as resync_wait allows. A search that finds nothing
 * leaves the plan lost, one that finds the run's place ends the loss. */
static void note(pool_plan *pl, bool miss)
{
    pl->missed_bits = (pl->missed_bits << 1) | miss;
    if (pl->resync_wait)
        pl->resync_wait--;
    if (!miss || pl->resync_wait || pl->requests < POOL_PLAN_RESYNC ||
        __builtin_popcount(pl->missed_bits & ((1u << (2 * POOL_PLAN_RESYNC)) - 1)) < POOL_PLAN_RESYNC)
        return;
    pl->missed_bits = 0;
    bool was_lost = pl->lost || pl->ended;
    if (resync(pl)) {
        if (was_lost)
            pl->probation = POOL_PLAN_PROBATION;
        pl->lost = false;
        pl->resync_after = POOL_PLAN_RESYNC;
        pl->resync_wait = 0;
    } else {
        pl->lost = true;
        pl->resync_wait = pl->resync_after;
        pl->resync_after = pl->resync_after < POOL_PLAN_RESYNC_MAX_WAIT ? 2 * pl->resync_after : pl->resync_after;
    }
}

/* A request the plan does not serve. */
static uintptr_t missed(pool_plan *pl)
{
    if (pl->probation)
        pl->probation = POOL_PLAN_PROBATION;
    pl->misses++;
    note(pl, true);
    return 0;
}

/* Record the lending event on the planned stream (on the plan's device); false when CUDA refuses
 * (the lent pages then stay mapped until trim, which synchronizes). */
static bool record_lending(pool_plan *pl)
{
    crmm_device_guard g;
    if (crmm_cuda_device_enter(pl->vmm.device, &g) != CRMM_OK) {
        crmm_clear_error();
        return false;
    }
    bool ok = (pl->lend_event ||
               cudaEventCreateWithFlags((cudaEvent_t *)&pl->lend_event, cudaEventDisableTiming) == cudaSuccess) &&
              cudaEventRecord((cudaEvent_t)pl->lend_event, (cudaStream_t)pl->stream) == cudaSuccess;
    if (!ok)
        cudaGetLastError();
    crmm_cuda_device_restore(&g);
    return ok;
}

size_t pool_plan_reap_lent(pool_plan *pl, bool synchronized)
{
    pool_vmm *v = &pl->vmm;
    if (!v->lent_pages || crmm_process_exiting() || (!synchronized && !pl->lend_pending))
        return 0;
    if (!synchronized) {
        cudaError_t e = cudaEventQuery((cudaEvent_t)pl->lend_event);
        if (e == cudaErrorNotReady)
            return 0;
        pl->lend_pending = false;
        if (e != cudaSuccess) {
            cudaGetLastError(); /* not known to be done: the pages wait for trim */
            return 0;
        }
    }
    bool later = false;
    size_t refused = 0;
    for (size_t i = 0; i < v->pages; i++) {
        if (pl->lent[i] == PLAN_PAGE_LENT_LATER && !synchronized) { /* lent after the event: the next one's */
            pl->lent[i] = PLAN_PAGE_LENT, later = true;
            continue;
        }
        if (v->mapped[i] == POOL_PAGE_LENT)
            refused += pool_vmm_unmap_lent(v, i, 1) == 0; /* a refused one stays lent, for trim */
        if (v->mapped[i] == POOL_PAGE_UNMAPPED && (pl->lent[i] == PLAN_PAGE_LENT || pl->lent[i] == PLAN_PAGE_LENT_LATER)) {
            pl->lent[i] = PLAN_PAGE_GIVEN;
            pl->given_pages++;
        }
    }
    if (synchronized)
        pl->lend_pending = false;
    else if (later)
        pl->lend_pending = record_lending(pl);
    count_held(pl);
    return refused;
}

size_t pool_plan_lend(pool_plan *pl, pool_vmm *own, size_t pages)
{
    pool_vmm *v = &pl->vmm;
    /* none of the last 32 requests served: not followed, whatever the state says (a request of
     * the first entry's size that started the plan over by chance, while the back-off of the
     * searches that failed before it defers the search that would find it lost) */
    bool unfollowed = pl->missed_bits == UINT32_MAX;
    if (!(pl->lost || pl->ended || pl->probation || unfollowed) || !pl->stream_known || crmm_process_exiting() ||
        (!pl->lent && !(pl->lent = calloc(v->pages, 1))))
        return 0;
    uint8_t mark = pl->lend_pending ? PLAN_PAGE_LENT_LATER : PLAN_PAGE_LENT;
    size_t n = 0;
    for (size_t i = 0; i < v->pages && n < pages; i++)
        if (v->mapped[i] == POOL_PAGE_MAPPED && !pl->full[i] && !pl->partial[i]) {
            pool_vmm_lend_to(v, i, 1, own);
            pl->lent[i] = mark;
            n++;
        }
    if (n && !pl->lend_pending)
        pl->lend_pending = record_lending(pl);
    count_held(pl);
    return n;
}

void pool_plan_take_back(pool_plan *pl, pool_vmm *own)
{
    pool_vmm *v = &pl->vmm;
    for (size_t i = 0; pl->lent && i < v->pages; i++)
        if ((pl->lent[i] == PLAN_PAGE_LENT || pl->lent[i] == PLAN_PAGE_LENT_LATER) && pool_vmm_unlend_from(v, i, 1, own))
            pl->lent[i] = PLAN_PAGE_OWN;
    count_held(pl);
}

/* The entry a request of `size` is, from the cursor's window; count when none. */
static uint64_t find_entry(const pool_plan *pl, size_t size)
{
    if (pl->ended || pl->lost)
        return pl->count;
    uint64_t k = pl->cursor;
    for (unsigned i = 0; i <= POOL_PLAN_WINDOW && k < pl->count; i++, k = entry_after(pl, k, 1))
        if (pl->size[k] == size)
            return k;
    return pl->count;
}

/* Whether a request of `size` that the cursor's window does not know starts the plan over: it is
 * the first entry's size, the pool serves at most 1/POOL_PLAN_RESTART_LIVE of the plan's extent in
 * live blocks outside the plan (`live_elsewhere`), and none of the first POOL_PLAN_RESYNC entries'
 * places is busy (in a run that goes on, the blocks it made first, its weights, still live there;
 * in a server, its caches live in the pool's range). */
static bool starts_over(pool_plan *pl, size_t size, uint64_t live_elsewhere)
{
    if (size != pl->size[0] || live_elsewhere > pl->extent / POOL_PLAN_RESTART_LIVE)
        return false;
    for (uint64_t k = 0; k < pl->count && k < POOL_PLAN_RESYNC; k++)
        if (busy(pl, pl->offset[k], pl->size[k]))
            return false;
    return true;
}

uintptr_t pool_plan_take(pool_plan *pl, size_t size, crmm_cuda_stream_t stream, const pool_plan_asked *asked,
                         uint64_t *mapped)
{
    *mapped = 0;
    /* cudaStreamPerThread names another stream on each thread: the plan cannot tell them apart */
    if (!size || (pl->stream_known && stream != pl->stream) || stream == (crmm_cuda_stream_t)cudaStreamPerThread)
        return 0;
    if (pl->lend_pending)
        pool_plan_reap_lent(pl, false);
    pl->recent[pl->requests++ % POOL_PLAN_RESYNC] = size;
    uint64_t k = find_entry(pl, size);
    if (k == pl->count && starts_over(pl, size, asked->live_elsewhere)) {
        k = 0;
        pl->lost = false;
    }
    if (k == pl->count)
        return missed(pl);
    /* the request is entry k: the cursor passes it whether or not its place is free */
    pl->cursor = entry_after(pl, k, 1);
    pl->ended = pl->cursor == pl->count;
    size_t given;
    uint64_t offset = pl->offset[k], need = unmapped_bytes(pl, offset, size, &given);
    if (busy(pl, offset, size) || need == UINT64_MAX)
        return missed(pl);
    if (pl->probation) {
        pl->probation--;
        if (need) { /* it follows, but may not map pages yet: served elsewhere */
            pl->misses++;
            note(pl, false);
            return 0;
        }
    }
    /* a place whose memory went to the range takes it back from the range's idle pages (the plan's
     * spare pages first, which pool_vmm_map takes first), or is not served: new memory there would
     * sit beside the range's, which may still hold the lent memory idle; the rest of its pages
     * take new memory within room (checked first: nothing is taken for a place not served) */
    size_t want = given > pl->vmm.spare_count ? given - pl->vmm.spare_count : 0;
    uint64_t covered = (uint64_t)(pl->vmm.spare_count + want) * pl->vmm.page;
    if (need > covered && need - covered > asked->room)
        return missed(pl);
    if (want) {
        size_t got = asked->give ? asked->give(asked->ctx, &pl->vmm, want, true) : 0;
        if (got < want) {
            count_held(pl); /* what it got stays the plan's, spare, for its next map or trim */
            return missed(pl);
        }
    }
    uint64_t added = 0;
    crmm_status st = map_pages(pl, offset, size, &added);
    count_held(pl);
    *mapped = added;
    if (st != CRMM_OK) {
        crmm_clear_error(); /* the pool serves it as without a plan, and says why if it cannot */
        return missed(pl);
    }
    ungive(pl, offset, size);
    note(pl, false);
    mark(pl, offset, size, true);
    pl->stream_known = true;
    pl->stream = stream;
    pl->hits++;
    pl->live += size;
    return (uintptr_t)(pl->vmm.base + offset);
}

void pool_plan_release(pool_plan *pl, uintptr_t addr, size_t size, crmm_cuda_stream_t stream, const void *graph)
{
    uint64_t offset = addr - pl->vmm.base;
    pl->live -= size;
    if (stream == pl->stream && !graph) {
        mark(pl, offset, size, false);
        return;
    }
    /* other work may still use it: it stays busy until trim has synchronized the device */
    if (pl->pending_count == pl->pending_room) {
        size_t room = pl->pending_room ? 2 * pl->pending_room : 64;
        void *grown = realloc(pl->pending, room * sizeof *pl->pending);
        if (!grown)
            return; /* it stays busy for good: safe, and only the plan's use of it is lost */
        pl->pending = grown;
        pl->pending_room = room;
    }
    pl->pending[pl->pending_count++] = (struct pool_plan_pending){offset, size, graph};
}

void pool_plan_graph_gone(pool_plan *pl, const void *graph)
{
    for (size_t i = 0; i < pl->pending_count; i++)
        if (pl->pending[i].graph == graph)
            pl->pending[i].graph = NULL;
}

size_t pool_plan_trim(pool_plan *pl, const pool_vmm *own)
{
    size_t kept = 0;
    for (size_t i = 0; i < pl->pending_count; i++)
        if (pl->pending[i].graph) /* its graph may replay: it frees the block at every replay */
            pl->pending[kept++] = pl->pending[i];
        else
            mark(pl, pl->pending[i].offset, pl->pending[i].size, false);
    pl->pending_count = kept;
    pool_vmm *v = &pl->vmm;
    size_t refused = pool_plan_reap_lent(pl, true); /* nothing uses their old addresses after the synchronization */
    for (size_t i = 0; i < v->pages; i++) {
        if ((v->mapped[i] == POOL_PAGE_MAPPED || v->mapped[i] == POOL_PAGE_STRAY) && !pl->full[i] && !pl->partial[i])
            refused += pool_vmm_unmap(v, i, 1) == 0;
        if (pl->given_pages && pl->lent[i] == PLAN_PAGE_GIVEN)
            pl->lent[i] = PLAN_PAGE_OWN;
    }
    pl->given_pages = 0;
    refused += pool_vmm_drop_spares(v, own);
    count_held(pl);
    return refused;
}

void pool_plan_destroy(pool_plan *pl)
{
    if (!pl)
        return;
    if (pl->lend_event && !crmm_process_exiting())
        cudaEventDestroy((cudaEvent_t)pl->lend_event);
    if (pl->vmm.base)
        pool_vmm_release(&pl->vmm);
    free(pl->lent);
    free(pl->size);
    free(pl->offset);
    free(pl->busy);
    free(pl->full);
    free(pl->partial);
    free(pl->pending);
    free(pl);
}
