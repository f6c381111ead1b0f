/* plan_place.c — a placement plan from an allocation log (plan.h): two placements, the one that
 * spans least kept, and the loop the pool goes back to after the log's end.
 *
 * Greedy by size is the rule of static memory planners (TensorFlow Lite's, STAlloc's): a large
 * block placed late finds only the holes its smaller neighbours left, while small blocks fit
 * around large ones. On the recorded training and serving logs it spans the live peak or close to
 * it; on a log whose blocks grow step by step (a KV cache grown by copies), online
 * best fit, which knows no future, spans less (bench/RESULTS.md). Each is O(n * live). */
#include "build_config.h"
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/pool.h>
#include "plan.h"

/* One allocation of the log: its size and the events where it starts and ends; for a periodic
 * placement also the lifetime of its copy in the run served again after the log (start2 < end2;
 * none when equal). */
typedef struct plan_item {
    uint64_t size;
    size_t start, end;   /* event indices; end: its free, or the log's length */
    size_t start2, end2; /* event indices past the log's end */
} plan_item;

/* qsort order: larger first, then earlier. */
static const plan_item *sort_items;
static int by_size_desc(const void *x, const void *y)
{
    const plan_item *a = &sort_items[*(const size_t *)x], *b = &sort_items[*(const size_t *)y];
    if (a->size != b->size)
        return a->size > b->size ? -1 : 1;
    return (a->start > b->start) - (a->start < b->start);
}

static bool spans_overlap(size_t s1, size_t e1, size_t s2, size_t e2) { return s1 < e1 && s2 < e2 && s1 < e2 && s2 < e1; }

static bool lifetimes_overlap(const plan_item *a, const plan_item *b)
{
    if (!(a->end2 | b->end2)) /* neither has a copy: the common case, one comparison */
        return a->start < b->end && b->start < a->end;
    return spans_overlap(a->start, a->end, b->start, b->end) || spans_overlap(a->start, a->end, b->start2, b->end2) ||
           spans_overlap(a->start2, a->end2, b->start, b->end) || spans_overlap(a->start2, a->end2, b->start2, b->end2);
}

/* Greedy by size. placed[] holds the placed allocations by offset; each new one goes at the lowest
 * offset where no placed allocation that lives at the same time overlaps it. */
static crmm_status place_by_size(const plan_item *items, size_t n, uint64_t *offset)
{
    size_t *order = malloc((n ? n : 1) * sizeof *order), *placed = malloc((n ? n : 1) * sizeof *placed);
    if (!order || !placed) {
        free(order);
        free(placed);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "plan: malloc failed");
    }
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    sort_items = items;
    qsort(order, n, sizeof *order, by_size_desc);
    size_t placed_n = 0;
    for (size_t i = 0; i < n; i++) {
        const plan_item *it = &items[order[i]];
        uint64_t at = 0;
        for (size_t j = 0; j < placed_n; j++) {
            const plan_item *q = &items[placed[j]];
            uint64_t qo = offset[placed[j]];
            if (qo >= at && qo - at >= it->size)
                break; /* this one and every one above lie past [at, at + size) */
            if (lifetimes_overlap(it, q) && qo + q->size > at)
                at = qo + q->size;
        }
        /* keep placed[] sorted by offset */
        size_t lo = 0, hi = placed_n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (offset[placed[mid]] < at)
                lo = mid + 1;
            else
                hi = mid;
        }
        memmove(&placed[lo + 1], &placed[lo], (placed_n - lo) * sizeof *placed);
        placed[lo] = order[i];
        placed_n++;
        offset[order[i]] = at;
    }
    free(order);
    free(placed);
    return CRMM_OK;
}

/* Online best fit, as a pool places them: in the log's order, each allocation in the smallest gap
 * between the allocations live then that holds it (the lowest on a tie), else above them all. */
static crmm_status place_online(const replay_log *log, const plan_item *items, const size_t *alloc_of, size_t n,
                                uint64_t *offset)
{
    size_t *live = malloc((n ? n : 1) * sizeof *live); /* live allocations by offset */
    if (!live)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "plan: malloc failed");
    size_t live_n = 0;
    for (size_t e = 0; e < log->count; e++) {
        const replay_event *ev = &log->events[e];
        if (ev->action == REPLAY_FREE && ev->pair >= 0) {
            size_t k = alloc_of[ev->pair];
            for (size_t j = 0; j < live_n; j++)
                if (live[j] == k) {
                    memmove(&live[j], &live[j + 1], (live_n - j - 1) * sizeof *live);
                    live_n--;
                    break;
                }
            continue;
        }
        if (ev->action != REPLAY_ALLOCATE)
            continue;
        size_t k = alloc_of[e], where = live_n;
        uint64_t at = 0, chosen = UINT64_MAX, chosen_gap = UINT64_MAX;
        for (size_t j = 0; j < live_n; j++) {
            uint64_t qo = offset[live[j]];
            if (qo - at >= items[k].size && qo - at < chosen_gap) {
                chosen = at;
                chosen_gap = qo - at;
                where = j;
            }
            at = qo + items[live[j]].size;
        }
        if (chosen == UINT64_MAX)
            chosen = at;
        memmove(&live[where + 1], &live[where], (live_n - where) * sizeof *live);
        live[where] = k;
        live_n++;
        offset[k] = chosen;
    }
    free(live);
    return CRMM_OK;
}

/* The highest end of the n allocations placed at offset[]. */
static uint64_t extent_of(const plan_item *items, size_t n, const uint64_t *offset)
{
    uint64_t extent = 0;
    for (size_t k = 0; k < n; k++)
        if (offset[k] + items[k].size > extent)
            extent = offset[k] + items[k].size;
    return extent;
}

/* z[i]: the length of the longest common prefix of s and s[i..] (z[0] = n). */
static void z_function(const uint64_t *s, size_t n, size_t *z)
{
    if (!n)
        return;
    z[0] = n;
    for (size_t i = 1, l = 0, r = 0; i < n; i++) {
        size_t k = i < r ? (r - i < z[i - l] ? r - i : z[i - l]) : 0;
        while (i + k < n && s[k] == s[i + k])
            k++;
        z[i] = k;
        if (i + k > r) {
            l = i;
            r = i + k;
        }
    }
}

/* Whether allocation k of the last `period` ones (from `first`), live at the log's end, was about
 * to be freed when the log stopped: its counterpart of the run before was freed before the last
 * run began (a step's frees that come after its last allocation, where the recording stopped
 * between them). Such a block is taken as freed at the log's end. */
static bool freed_at_the_cut(const plan_item *items, size_t k, size_t first, size_t period)
{
    return k >= first && items[k - period].end < items[first].start;
}

/* How many allocations the pool would find busy if it went back to allocation first = count -
 * period after the log's end and served the run once more: the run's events again, allocation k
 * standing for k + period at k's offset, the blocks the log leaves live live at the start. An
 * allocation that finds its place busy is served elsewhere (it is not placed); a free of what the
 * run did not leave live (the log paired same-sized blocks otherwise in the run before) frees
 * nothing. A block freed at the cut (freed_at_the_cut) is not live at the start. Stops counting
 * past `limit`. */
static size_t loop_conflicts(const replay_log *log, const plan_item *items, const uint64_t *offset,
                             const size_t *alloc_of, size_t count, size_t period, size_t limit, size_t *live_at,
                             size_t *live)
{
    size_t first = count - period, nlive = 0, conflicts = 0;
    for (size_t k = 0; k < count + period; k++)
        live_at[k] = SIZE_MAX;
    for (size_t k = 0; k < count; k++)
        if (items[k].end == log->count && !freed_at_the_cut(items, k, first, period)) {
            live_at[k] = nlive;
            live[nlive++] = k;
        }
    for (size_t e = items[first].start; e < log->count && conflicts <= limit; e++) {
        const replay_event *ev = &log->events[e];
        if (ev->action == REPLAY_ALLOCATE) {
            size_t k = alloc_of[e], v = k + period;
            uint64_t lo = offset[k], hi = lo + items[k].size;
            /* first the block of the log this one copies, still live at its place (a block the
             * log never frees: else a log of many such would take a scan of them all per copy) */
            bool busy = live_at[k] != SIZE_MAX && lo < hi;
            for (size_t i = 0; i < nlive && !busy; i++) {
                size_t w = live[i], src = w >= count ? w - period : w;
                busy = offset[src] < hi && lo < offset[src] + items[src].size;
            }
            if (busy) {
                conflicts++;
                continue;
            }
            live_at[v] = nlive;
            live[nlive++] = v;
        } else if (ev->action == REPLAY_FREE && ev->pair >= 0) {
            size_t v = alloc_of[ev->pair] + period;
            if (live_at[v] == SIZE_MAX)
                continue;
            size_t i = live_at[v];
            live[i] = live[--nlive];
            live_at[live[i]] = i;
            live_at[v] = SIZE_MAX;
        }
    }
    return conflicts;
}

/* The periods whose sizes repeat at the log's end (the last p allocations' sizes are those of the
 * p before them), longest first, at most PLAN_LOOP_TRIES: *np of them in periods[]. Only periods
 * whose repetition reaches back at least half as far as the farthest-reaching one's: a training
 * log cut mid-step ends in its layers, whose sizes repeat for a few layers only, where the step
 * repeats from the first step on; a loop over the layers would lose the run at the next step.
 * None when no repetition reaches back over 1 in PLAN_LOOP_MIN_REACH of the log's allocations: a
 * server's log ends in the tokens of one request, whose sizes repeat until the next request, which
 * such a loop would lose (the blocks the plan placed meanwhile then pin pages of its range). */
#define PLAN_LOOP_TRIES 64
#define PLAN_LOOP_MIN_REACH 4
static crmm_status loop_periods(const plan_item *items, size_t count, size_t *periods, unsigned *np)
{
    *np = 0;
    if (count < 2)
        return CRMM_OK;
    uint64_t *rev = malloc(count * sizeof *rev);
    size_t *z = malloc(count * sizeof *z);
    if (!rev || !z) {
        free(rev), free(z);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "plan: malloc failed");
    }
    for (size_t k = 0; k < count; k++)
        rev[k] = items[count - 1 - k].size;
    z_function(rev, count, z);
    /* period p repeats when the last p sizes equal the p before them: z[p] >= p in reverse; the
     * last z[p] + p sizes then repeat with period p (its reach) */
    size_t reach = 0;
    for (size_t p = 1; p <= count / 2; p++)
        if (z[p] >= p && z[p] + p > reach)
            reach = z[p] + p;
    for (size_t p = count / 2; p >= 1 && *np < PLAN_LOOP_TRIES && reach >= count / PLAN_LOOP_MIN_REACH; p--)
        if (z[p] >= p && z[p] + p >= reach / 2)
            periods[(*np)++] = p;
    free(rev), free(z);
    return CRMM_OK;
}

/* Items whose placement by size makes the log's last `period` allocations a loop: each of them
 * also holds its place while its copy lives in the run served again after the log (the run's
 * events shifted by its length, `shift`). An allocation of the last run that the log leaves live
 * is freed there where the run frees its counterpart of the run before (its free shifted), or at
 * the log's end when that counterpart was freed before the last run began (freed_at_the_cut), and
 * its copy lives to that run's end; anything else the log leaves live lives to that end too. */
static void periodic_items(const replay_log *log, const plan_item *items, size_t count, size_t period, plan_item *out)
{
    size_t end = log->count, first = count - period, shift = end - items[first].start, horizon = end + shift;
    for (size_t k = 0; k < count; k++) {
        out[k] = items[k];
        if (k < first) {
            if (items[k].end == end)
                out[k].end = horizon;
            continue;
        }
        out[k].start2 = items[k].start + shift;
        if (items[k].end < end) {
            out[k].end2 = items[k].end + shift;
            continue;
        }
        const plan_item *before = &items[k - period]; /* k >= period: the log repeats before the run */
        out[k].end = freed_at_the_cut(items, k, first, period) ? end
                     : before->end < end                      ? before->end + shift
                                                              : horizon;
        out[k].end2 = horizon;
    }
}

/* The loop (plan.h) of the placement in out->offset: the longest of the periods whose run the
 * pool would serve once more with no allocation finding its place busy. Where none would, the
 * log's end repeating, each of the first PLAN_PERIODIC_TRIES periods is tried with a periodic
 * placement (periodic_items) in its place; failing that too, the loop that finds the fewest
 * places busy is kept, if they are at most 1 in PLAN_LOOP_BUSY_SHARE of its allocations: a run
 * longer than the log is then served from the plan, the few busy ones elsewhere. */
#define PLAN_PERIODIC_TRIES 3
#define PLAN_LOOP_BUSY_SHARE 10
static crmm_status find_loop(const replay_log *log, const plan_item *items, const size_t *alloc_of, size_t count,
                             plan *out)
{
    out->loop = PLAN_NO_LOOP;
    size_t periods[PLAN_LOOP_TRIES];
    unsigned np;
    crmm_status st = loop_periods(items, count, periods, &np);
    if (st != CRMM_OK || !np)
        return st;
    size_t *live_at = malloc(2 * count * sizeof *live_at), *live = malloc(2 * count * sizeof *live);
    plan_item *shifted = malloc(count * sizeof *shifted);
    uint64_t *trial = malloc(count * sizeof *trial), *best = malloc(count * sizeof *best);
    if (!live_at || !live || !shifted || !trial || !best) {
        free(live_at), free(live), free(shifted), free(trial), free(best);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "plan: malloc failed");
    }
    /* the fewest busy found so far: its period and whether its placement is periodic (in best) */
    size_t best_busy = SIZE_MAX, best_period = 0;
    bool best_periodic = false;
    for (unsigned i = 0; i < np && best_busy; i++) {
        size_t busy = loop_conflicts(log, items, out->offset, alloc_of, count, periods[i],
                                     best_busy == SIZE_MAX ? periods[i] / PLAN_LOOP_BUSY_SHARE : best_busy - 1, live_at, live);
        if (busy < best_busy && busy <= periods[i] / PLAN_LOOP_BUSY_SHARE)
            best_busy = busy, best_period = periods[i], best_periodic = false;
    }
    for (unsigned i = 0; st == CRMM_OK && i < np && i < PLAN_PERIODIC_TRIES && best_busy; i++) {
        periodic_items(log, items, count, periods[i], shifted);
        if ((st = place_by_size(shifted, count, trial)) != CRMM_OK)
            break;
        size_t busy = loop_conflicts(log, items, trial, alloc_of, count, periods[i],
                                     best_busy == SIZE_MAX ? periods[i] / PLAN_LOOP_BUSY_SHARE : best_busy - 1, live_at, live);
        if (busy < best_busy && busy <= periods[i] / PLAN_LOOP_BUSY_SHARE) {
            best_busy = busy, best_period = periods[i], best_periodic = true;
            memcpy(best, trial, count * sizeof *trial);
        }
    }
    if (st == CRMM_OK && best_period) {
        out->loop = count - best_period;
        out->loop_busy = best_busy;
        if (best_periodic) {
            out->extent_no_loop = out->extent;
            out->extent = extent_of(items, count, best);
            out->rule = "greedy by size, periodic";
            memcpy(out->offset, best, count * sizeof *best);
        }
    }
    free(live_at), free(live), free(shifted), free(trial), free(best);
    return st;
}

crmm_status plan_make(const replay_log *log, plan *out)
{
    memset(out, 0, sizeof *out);
    out->loop = PLAN_NO_LOOP;
    /* the allocations: every size within what a plan may span, and their sum far from wrapping
     * (no placement puts a block past the sum of all sizes, so no offset or extent wraps) */
    size_t n = 0;
    uint64_t total = 0;
    for (size_t e = 0; e < log->count; e++) {
        const replay_event *ev = &log->events[e];
        if (ev->action != REPLAY_ALLOCATE)
            continue;
        n++;
        if (ev->size > CRMM_POOL_PLAN_MAX_EXTENT)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "plan: line %u: an allocation of %" PRIu64 " bytes, "
                                  "more than a plan may span (%" PRIu64 ")", ev->line, (uint64_t)ev->size,
                                  CRMM_POOL_PLAN_MAX_EXTENT);
        if (ev->size > UINT64_MAX / 2 - total)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "plan: line %u: the log's allocations come to more "
                                  "bytes in all than a plan can place", ev->line);
        total += ev->size;
    }
    if (!n)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "plan: the log has no allocation");
    if (n > CRMM_POOL_PLAN_MAX_ENTRIES)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "plan: the log has %zu allocations, more than a plan may list "
                              "(%" PRIu64 ")", n, CRMM_POOL_PLAN_MAX_ENTRIES);
    if (!total)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "plan: every allocation of the log is of 0 bytes");
    plan_item *items = malloc(n * sizeof *items);
    size_t *alloc_of = malloc(log->count * sizeof *alloc_of);
    out->size = malloc(n * sizeof *out->size);
    out->offset = malloc(n * sizeof *out->offset);
    if (!items || !alloc_of || !out->size || !out->offset) {
        free(items), free(alloc_of), plan_free(out);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "plan: malloc failed");
    }
    uint64_t live = 0;
    for (size_t e = 0, k = 0; e < log->count; e++) {
        const replay_event *ev = &log->events[e];
        alloc_of[e] = SIZE_MAX;
        if (ev->action == REPLAY_ALLOCATE) {
            uint64_t size = (ev->size + 255) & ~(uint64_t)255; /* at most the limit above: no wrap */
            items[k] = (plan_item){.size = size, .start = e, .end = ev->pair >= 0 ? (size_t)ev->pair : log->count};
            out->size[k] = size;
            alloc_of[e] = k++;
            live += size;
            if (live > out->peak_live)
                out->peak_live = live;
        } else if (ev->action == REPLAY_FREE && ev->pair >= 0) {
            live -= items[alloc_of[ev->pair]].size;
        }
    }
    out->count = n;
    /* every rule, the one that spans least kept (the first on a tie) */
    static const char *const rules[] = {"greedy by size", "online best fit"};
    uint64_t *trial = malloc(n * sizeof *trial);
    crmm_status st = trial ? CRMM_OK : crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "plan: malloc failed");
    out->extent = UINT64_MAX;
    for (unsigned r = 0; st == CRMM_OK && r < sizeof rules / sizeof rules[0]; r++) {
        st = r == 0 ? place_by_size(items, n, trial) : place_online(log, items, alloc_of, n, trial);
        uint64_t extent = st == CRMM_OK ? extent_of(items, n, trial) : UINT64_MAX;
        if (extent < out->extent) {
            out->extent = extent;
            out->rule = rules[r];
            memcpy(out->offset, trial, n * sizeof *trial);
        }
    }
    free(trial);
    if (st == CRMM_OK)
        st = find_loop(log, items, alloc_of, n, out);
    if (st == CRMM_OK && out->extent > CRMM_POOL_PLAN_MAX_EXTENT) { /* a periodic placement may span more */
        char a[32];
        st = crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "plan: the placement spans %s, more than a plan may span",
                            crmm_format_size(out->extent, a, sizeof a));
    }
    free(items);
    free(alloc_of);
    if (st != CRMM_OK)
        plan_free(out);
    return st;
}

crmm_status plan_write(FILE *f, const plan *pl, const char *path)
{
    fprintf(f, "crmm-plan 1\nextent %llu\n", (unsigned long long)pl->extent);
    if (pl->loop == PLAN_NO_LOOP)
        fprintf(f, "loop none\n");
    else
        fprintf(f, "loop %llu\n", (unsigned long long)pl->loop);
    fprintf(f, "count %llu\n", (unsigned long long)pl->count);
    for (uint64_t k = 0; k < pl->count; k++)
        fprintf(f, "%llu %llu\n", (unsigned long long)pl->size[k], (unsigned long long)pl->offset[k]);
    if (fflush(f) != 0 || ferror(f))
        return crmm_set_error(CRMM_ERROR_IO, "cannot write %s: %s", path, strerror(errno));
    return CRMM_OK;
}

void plan_free(plan *pl)
{
    free(pl->size);
    free(pl->offset);
    pl->size = pl->offset = NULL;
    pl->count = 0;
}
