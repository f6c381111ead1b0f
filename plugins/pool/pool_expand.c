/* pool_expand.c — growth of an expandable pool: one reserved address range whose pages are mapped
 * as the pool needs them and unmapped when they hold nothing (parameter expandable = true).
 *
 * The range is one chunk, so its blocks tile it and every free block can merge with its
 * neighbours whatever growth step made them: there are no chunk boundaries to fragment along,
 * unlike growth by upstream allocations. The parts of the range that have no physical memory
 * are blocks too, owned by a state of their own (p->growth.unmapped, never found by a stream lookup):
 * they start and end on page boundaries, merge with each other like free blocks of one stream,
 * and never merge with mapped blocks. Invariant: a page is mapped exactly when a block that is
 * not unmapped overlaps it.
 *
 * Growing for `size` bytes on stream s (pool_expand_grow) maps the fewest pages that make a
 * free block of at least `size`: for each unmapped block it counts the pages needed when the new
 * pages join the free block just below it, or just above it, or both, counting only neighbours s
 * may use at once (its own, or ready ones); the cheapest place wins, the lowest address on a tie.
 * Pages are mapped exactly as needed, so the pool holds what is live plus the free space the
 * allocation pattern leaves, never a doubling.
 *
 * Giving pages back needs the device idle, since work queued before a free may still use the
 * block: a page is unmapped only after a device synchronization, when every free block is safe
 * and all of them have joined the ready state, or once an event says the work that could use it
 * has finished. Moving the growing stream's own free pages needs neither: that stream's next work
 * is ordered after the work that used them, so their physical memory is mapped again where the
 * pool grows while their old addresses stay mapped ("lent", owned by one of the batches of
 * p->growth.lent until the event recorded on the stream at the move has completed; reap_lent
 * unmaps them at a later growth, or after any synchronization). Pages are given back or moved
 * at two points:
 *  - growth past the mark: the mark is the most the pool has had to hold (raised only by growth
 *    that moving free pages could not avoid). While a growth keeps the pool within the mark plus
 *    1/POOL_EXPAND_SLACK of it, the pool maps without waiting. A growth beyond that moves the
 *    caller's own free whole pages without waiting (move_without_waiting) when they suffice or no
 *    other stream holds any; otherwise it first synchronizes (unless the free bytes are within
 *    release_threshold, or the caller's stream is the only one holding free blocks and none of
 *    them holds a whole page: nothing could merge or move then), lets every free block
 *    merge, and, when free whole pages beyond release_threshold remain, unmaps just enough of
 *    them (not the free blocks the growth will join) that the pool stays within the mark, the
 *    new pages reusing their physical memory. The slack absorbs the small differences in
 *    placement from one pass of a repeating workload (a training step) to the next, so such a
 *    workload stops synchronizing after its first pass, and the pool holds at most the mark plus
 *    the slack: little more than what is live plus the holes its pattern cannot avoid. Pages are
 *    moved once per mark: when a growth past the mark comes again before the mark has risen
 *    since the last move, the pattern needs that memory (a workload whose every step leaves its
 *    large blocks in other places), so the pool maps new pages and raises the mark instead of
 *    synchronizing at every step;
 *    page_moves (POOL_MOVES_*) says how a move waits: wait synchronizes the device as above; idle
 *    asks the streams that hold free blocks whether they are idle (pool_streams_idle, no wait) and
 *    moves with no synchronization when they are, else maps new pages without raising the mark,
 *    so that a later growth that finds them idle moves the extra pages back; never always maps;
 *    budget is wait except while the growing stream is the pool's only stream state, for runs that
 *    do not repeat: under wait, each growth that fills the slack and then moves sets the mark to
 *    the filled level (the move keeps the hold level, never lowers it), locking the slack in cycle
 *    after cycle, and a second move before the mark rose is refused, so such a run's hold creeps
 *    up pass after pass. Under budget, on one stream: after a move of the stream's own pages the
 *    mark rises only by the pages the move did not cover; a growth past the mark after a move and
 *    before the mark rose may still move the stream's own pages, paid from a budget that earns
 *    1/POOL_MOVE_BUDGET_SHARE of the bytes allocated and keeps at most the mark (earn_budget),
 *    unless its request has the size of the last move's with no new pages mapped since: then the
 *    pattern moves one buffer's memory back and forth (other blocks keep taking its place) and
 *    the mark rises as under wait (budget_allows); no move synchronizes (on one stream a
 *    synchronization could merge nothing). So moves beyond once per mark take at most that share
 *    of the bytes allocated, plus the mark, over any stretch of a run; the pool keeps moving some
 *    pages in every pass of a pattern that does not repeat, where wait stops moving and holds more;
 *  - trim (crmm_resource_trim): every whole free page beyond release_threshold is unmapped and
 *    its memory released.
 * While threads contend for the pool (its per-thread caches are on, pool_thread_cache.h), growth
 * maps at least 1/POOL_EXPAND_THREAD_STEP of what the pool holds (where a hole, the maximum and
 * the device allow; else what the request needs) and never moves pages: moving needs a device
 * synchronization under the pool's lock, which stalls every thread, and with several threads
 * placing blocks at once the holes differ from one pass to the next, so small exact growths and
 * moves would recur in every pass. The pool then holds up to that step more than single-threaded
 * use would; its mark rises with each growth, and trim still gives free pages back.
 * On out of memory (the device, the maximum, or the address range), every free page is
 * unmapped and growth is tried once more. Pages are unmapped from the highest address down, and
 * the pool never gives back so much that it would hold less than initial_size. A request that
 * needs more whole pages than lie within the maximum never gets here: the allocation fails it
 * first (pool_check_maximum), since giving pages back could not make room for it. */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include <crmm/log.h>
#include "pool_resource.h"

static uintptr_t page_up(const pool_vmm *v, uintptr_t a) { return (a + v->page - 1) & ~(uintptr_t)(v->page - 1); }
static uintptr_t page_down(const pool_vmm *v, uintptr_t a) { return a & ~(uintptr_t)(v->page - 1); }

/* Pages wholly inside block b. */
static size_t whole_pages(const pool_vmm *v, const pool_block *b)
{
    uintptr_t lo = page_up(v, b->addr), hi = page_down(v, b->addr + b->size);
    return hi > lo ? (hi - lo) / v->page : 0;
}


/* ---- giving pages back ---------------------------------------------------------------------- */

struct page_count { const pool_vmm *v; uint64_t pages; };

static bool count_pages(pool_block *b, void *arg)
{
    struct page_count *c = arg;
    c->pages += whole_pages(c->v, b);
    return false;
}

/* Bytes in whole free pages, over every stream's free blocks (what a release could unmap). */
static uint64_t releasable_bytes(const pool_resource *p)
{
    struct page_count c = {&p->growth.vmm, 0};
    const pool_streams *ss = &p->core.streams;
    for (size_t i = 0; i < ss->count; i++)
        pool_free_list_for_each(&ss->all[i]->free, p->growth.vmm.page, count_pages, &c);
    return c.pages * p->growth.vmm.page;
}

/* Bytes in every stream's free blocks, or fewer: reserved less the pool's own count of block
 * bytes, which is exact while the caches are off. With them on, a block whose free only a cache
 * has counted (another thread's free of a block in a cache's live map, a full cache's blocks
 * going back to a free list) lies in a free list while the pool's count still holds it, and is
 * held again when the pool hands it out again, so that count may pass what the pool reserves.
 * The difference is then 0, not a wrapped figure that would make out of memory synchronize and
 * gather where nothing can be given back; draining every cache folds their counts in (the rung
 * after growth does, then grows again). */
static uint64_t free_bytes_lower_bound(const pool_resource *p)
{
    uint64_t counted = (uint64_t)p->core.counts.block_bytes;
    if (p->plan) /* the planned blocks are counted too, and lie in the plan's range */
        counted = counted > p->plan->live ? counted - p->plan->live : 0;
    return p->growth.reserved > counted ? p->growth.reserved - counted : 0;
}

struct block_list { pool_block **b; size_t n; };

static bool collect(pool_block *b, void *arg)
{
    struct block_list *l = arg;
    l->b[l->n++] = b;
    return false;
}

static int by_address_descending(const void *x, const void *y)
{
    uintptr_t a = (*(pool_block *const *)x)->addr, b = (*(pool_block *const *)y)->addr;
    return a < b ? 1 : a > b ? -1 : 0;
}

/* Take the top `pages` whole pages of free block b of state `holder` (b has at least that many)
 * out of the free memory: unmapped (lend_to NULL: they join the unmapped blocks) or lent to batch
 * lend_to (they stay mapped, owned by the batch); either way their physical memory goes to the
 * spare list. The rest of b stays free. Returns the pages taken (fewer when the driver refused an
 * unmap). */
static size_t take_top_pages(pool_resource *p, pool_stream *holder, pool_block *b, size_t pages,
                             pool_lent_batch *lend_to)
{
    pool_vmm *v = &p->growth.vmm;
    uintptr_t lo = page_down(v, b->addr + b->size) - pages * v->page;
    if (!pool_records_reserve(&p->core.records, 2))
        return 0;
    size_t done = pages;
    if (lend_to)
        pool_vmm_lend(v, pool_vmm_page_of(v, lo), pages);
    else if (!(done = pool_vmm_unmap(v, pool_vmm_page_of(v, lo), pages)))
        return 0;
    uintptr_t hi = lo + done * v->page;
    pool_free_list_remove(&holder->free, b);
    pool_block *gone = b;
    if (lo > b->addr) {
        gone = pool_block_split(&p->core.records, b, lo);
        pool_free_list_insert(&holder->free, b);
    }
    if (hi < gone->addr + gone->size)
        pool_free_list_insert(&holder->free, pool_block_split(&p->core.records, gone, hi));
    pool_stream *to = lend_to ? &lend_to->pages : &p->growth.unmapped;
    gone->owner = NULL;
    pool_free_list_insert_merging(&to->free, to, gone, &p->core.records);
    p->growth.reserved -= done * v->page;
    return done;
}

/* How many whole free pages to give back so that the free blocks keep at most `keep` bytes in
 * whole pages, never going below initial_size. */
static size_t pages_to_release(const pool_resource *p, uint64_t keep)
{
    uint64_t releasable = releasable_bytes(p);
    if (releasable <= keep)
        return 0;
    uint64_t budget = releasable - keep;
    uint64_t above_floor = p->growth.reserved > p->growth.initial ? p->growth.reserved - p->growth.initial : 0;
    if (budget > above_floor)
        budget = above_floor;
    return (size_t)(budget / p->growth.vmm.page);
}

/* Take up to `pages` whole free pages of state `holder` out of its free blocks, from the highest
 * address down, leaving blocks keep1 and keep2 alone: unmapped (lend_to NULL; every block of
 * `holder` must be idle: the device was synchronized) or lent to batch lend_to. Their physical
 * memory goes to the spare list. Returns the pages taken. */
static size_t release_free_pages(pool_resource *p, pool_stream *holder, size_t pages, const pool_block *keep1,
                                 const pool_block *keep2, pool_lent_batch *lend_to)
{
    if (!pages || !holder->free.blocks)
        return 0;
    struct block_list l = {malloc(holder->free.blocks * sizeof(pool_block *)), 0};
    if (!l.b)
        return 0; /* nothing given back this time; the pool stays correct */
    pool_free_list_for_each(&holder->free, p->growth.vmm.page, collect, &l);
    qsort(l.b, l.n, sizeof *l.b, by_address_descending);
    size_t taken = 0;
    for (size_t i = 0; i < l.n && taken < pages; i++) {
        if (l.b[i] == keep1 || l.b[i] == keep2)
            continue;
        size_t n = whole_pages(&p->growth.vmm, l.b[i]);
        if (n > pages - taken)
            n = pages - taken;
        if (!n)
            continue;
        size_t done = take_top_pages(p, holder, l.b[i], n, lend_to);
        taken += done;
        if (done < n)
            break;
    }
    free(l.b);
    return taken;
}

/* ---- moves that do not wait ---------------------------------------------------------------- */

/* Unmap batch lb's blocks (nothing uses their old addresses any more): they join the unmapped
 * blocks. A block the driver refuses stays lent (logged by pool_vmm), to be tried again. */
static void unmap_batch(pool_resource *p, pool_lent_batch *lb)
{
    pool_vmm *v = &p->growth.vmm;
    pool_free_list *fl = &lb->pages.free;
    struct block_list l = {malloc(fl->blocks * sizeof(pool_block *)), 0};
    if (!l.b)
        return; /* they stay lent until the next try */
    pool_free_list_for_each(fl, v->page, collect, &l);
    for (size_t i = 0; i < l.n; i++) {
        pool_block *b = l.b[i];
        size_t n = b->size / v->page, done;
        if (!pool_records_reserve(&p->core.records, 1) || !(done = pool_vmm_unmap_lent(v, pool_vmm_page_of(v, b->addr), n)))
            continue;
        pool_free_list_remove(fl, b);
        if (done < n)
            pool_free_list_insert(fl, pool_block_split(&p->core.records, b, b->addr + done * v->page));
        b->owner = NULL;
        pool_free_list_insert_merging(&p->growth.unmapped.free, &p->growth.unmapped, b, &p->core.records);
    }
    free(l.b);
}

/* take_back_lent for lent block b whose pages cannot all come back (the undo of the growth left
 * the memory of one mapped where the range grew: a stray): page by page from the top, those whose
 * memory waits on the spare list go back to s's free blocks, the others stay lent. */
static void take_back_pages(pool_resource *p, pool_stream *s, pool_lent_batch *lb, pool_block *b)
{
    pool_vmm *v = &p->growth.vmm;
    pool_free_list_remove(&lb->pages.free, b);
    b->owner = NULL; /* in no list while it is cut: nothing merges with it */
    for (;;) {
        bool last = b->size <= v->page;
        if (!last && !pool_records_reserve(&p->core.records, 1)) { /* the rest stays lent */
            pool_free_list_insert_merging(&lb->pages.free, &lb->pages, b, &p->core.records);
            return;
        }
        pool_block *top = last ? b : pool_block_split(&p->core.records, b, b->addr + b->size - v->page);
        if (pool_vmm_unlend(v, pool_vmm_page_of(v, top->addr), 1)) {
            pool_free_list_insert_merging(&s->free, s, top, &p->core.records);
            p->growth.reserved += v->page;
        } else {
            pool_free_list_insert_merging(&lb->pages.free, &lb->pages, top, &p->core.records);
        }
        if (last)
            return;
    }
}

/* A growth lent batch lb's pages (from s's free blocks) and then mapped nothing: their memory is
 * still on the spare list and their old addresses still mapped, so they go back to s's free blocks
 * as they were before the move. Else the spare list would release that memory while the old
 * addresses hold it until the event, memory the pool no longer counts (a later growth could map
 * past maximum_size). A block whose memory is not all spare comes back page by page. */
static void take_back_lent(pool_resource *p, pool_stream *s, pool_lent_batch *lb)
{
    pool_vmm *v = &p->growth.vmm;
    pool_free_list *fl = &lb->pages.free;
    struct block_list l = {malloc(fl->blocks * sizeof(pool_block *)), 0};
    if (!l.b)
        return; /* they stay lent, unmapped once their event has completed */
    pool_free_list_for_each(fl, v->page, collect, &l);
    for (size_t i = 0; i < l.n; i++) {
        pool_block *b = l.b[i];
        size_t n = b->size / v->page;
        if (!pool_vmm_unlend(v, pool_vmm_page_of(v, b->addr), n)) {
            take_back_pages(p, s, lb, b);
            continue;
        }
        pool_free_list_remove(fl, b);
        b->owner = NULL;
        pool_free_list_insert_merging(&s->free, s, b, &p->core.records);
        p->growth.reserved += n * v->page;
    }
    free(l.b);
}

/* A growth that lent batch lb's pages mapped nothing (out of memory, a driver error, no record):
 * the pages come back (take_back_lent) and the move's marks are as before it, so that the next
 * growth is not taken for one that moves again before the mark rose. */
static void undo_move(pool_resource *p, pool_stream *s, pool_lent_batch *lb, bool moved_before, uint64_t budget_before,
                      size_t last_move_before)
{
    take_back_lent(p, s, lb);
    p->growth.moved_since_mark = moved_before;
    p->growth.move_budget = budget_before;
    p->growth.last_move_size = last_move_before;
}

/* Unmap the lent pages that nothing can use at their old addresses any more: every batch's right
 * after a device synchronization (`synchronized`), else the batches whose event has completed,
 * asked without waiting (and not while a capture is under way, which forbids the query). */
static void reap_lent(pool_resource *p, bool synchronized)
{
    if (synchronized && p->plan) /* the plan's lent pages too: else the range could release their
                                  * memory while the plan's old addresses still hold it, uncounted */
        pool_plan_reap_lent(p->plan, true);
    for (int i = 0; p->growth.lent && i < POOL_LENT_BATCHES; i++) {
        pool_lent_batch *lb = &p->growth.lent[i];
        if (!lb->pages.free.blocks)
            continue;
        if (!synchronized) {
            if (p->capturing || crmm_process_exiting())
                return;
            cudaError_t e = cudaEventQuery((cudaEvent_t)lb->event);
            if (e != cudaSuccess) {
                if (e != cudaErrorNotReady)
                    cudaGetLastError(); /* only "not known to be done" */
                continue;
            }
        }
        unmap_batch(p, lb);
    }
}

/* Right after a device synchronization: the plan's pages no planned block uses are given back
 * (pool_plan_trim), once every lent old address is unmapped, the range's too: a page the range
 * gave to the plan may still be mapped where the range had it, and releasing its memory then would
 * leave the device holding what neither counts. Returns pool_plan_trim's count. */
static size_t trim_plan(pool_resource *p)
{
    reap_lent(p, true);
    return pool_plan_trim(p->plan, &p->growth.vmm);
}

/* When free blocks may hold whole pages beyond `keep` (a page's worth of free bytes beyond it
 * with `any_free`, else whole pages counted block by block): synchronize the device, gather every
 * free block in state `holder` (NULL: the ready state), where blocks of different streams merge,
 * and unmap the whole pages beyond `keep`. *released: whether it synchronized (every stream's
 * free blocks are then holder's). */
static crmm_status release_beyond(pool_resource *p, pool_stream *holder, uint64_t keep, bool any_free, bool *released)
{
    *released = false;
    uint64_t free_bytes = free_bytes_lower_bound(p);
    uint64_t page = p->growth.vmm.page; /* compared without sums: keep may be near 2^64 */
    if (any_free ? free_bytes < keep || free_bytes - keep < page || p->growth.reserved < p->growth.initial ||
                       p->growth.reserved - p->growth.initial < page
                 : !pages_to_release(p, keep))
        return CRMM_OK;
    crmm_status st = pool_streams_synchronize(&p->core.streams);
    if (st != CRMM_OK)
        return st;
    *released = true;
    reap_lent(p, true);
    holder = pool_streams_gather(&p->core.streams, &p->core.records, holder);
    if (holder)
        release_free_pages(p, holder, pages_to_release(p, keep), NULL, NULL, NULL);
    return CRMM_OK;
}

/* Whether s is the pool's only stream state: no other stream holds free blocks that could merge
 * with s's or that only a synchronization could move. */
static bool only_state(const pool_resource *p, const pool_stream *s)
{
    const pool_streams *ss = &p->core.streams;
    return ss->count == 0 || (ss->count == 1 && ss->all[0] == s);
}

/* Whether a device synchronization before growing for stream s would be in vain: s is the only
 * state (no blocks of other streams could join and merge with its own) and no free block holds a
 * whole page that could be moved. */
static bool nothing_to_move(const pool_resource *p, const pool_stream *s)
{
    return only_state(p, s) && releasable_bytes(p) == 0;
}

/* ---- growing ------------------------------------------------------------------------------- */

/* Where to map: `pages` pages of hole `hole` starting at `first` (an address); 0 pages when no
 * hole will do. */
typedef struct grow_plan { pool_block *hole; uintptr_t first; size_t pages; } grow_plan;

/* A free neighbour of a hole that stream s may use at once: its own block or a ready one. */
static size_t usable(const pool_block *b, const pool_stream *s)
{
    return b && b->owner && (b->owner == s || b->owner->ready) ? b->size : 0;
}

/* fresh: the new pages join no neighbour (a block on pages of its own) */
struct plan_search { const pool_resource *p; const pool_stream *s; size_t size; bool fresh; grow_plan best; };

static size_t pages_for(const pool_vmm *v, size_t bytes) { return bytes / v->page + (bytes % v->page != 0); }

static void consider(struct plan_search *ps, pool_block *hole, uintptr_t first, size_t pages)
{
    grow_plan *b = &ps->best;
    if (!b->pages || pages < b->pages || (pages == b->pages && first < b->first))
        *b = (grow_plan){.hole = hole, .first = first, .pages = pages};
}

static bool consider_hole(pool_block *hole, void *arg)
{
    struct plan_search *ps = arg;
    const pool_vmm *v = &ps->p->growth.vmm;
    size_t below = ps->fresh ? 0 : usable(hole->phys_prev, ps->s), above = ps->fresh ? 0 : usable(hole->phys_next, ps->s);
    size_t size = ps->size;
    if (below + hole->size >= size) /* new pages at the bottom of the hole, joining the block below */
        consider(ps, hole, hole->addr, size > below ? pages_for(v, size - below) : 1);
    if (above + hole->size >= size) { /* at its top, joining the block above */
        size_t n = size > above ? pages_for(v, size - above) : 1;
        consider(ps, hole, hole->addr + hole->size - n * v->page, n);
    }
    if (below + hole->size + above >= size) /* all of it, joining both */
        consider(ps, hole, hole->addr, hole->size / v->page);
    return false;
}

static grow_plan plan_growth(const pool_resource *p, const pool_stream *s, size_t size, bool fresh)
{
    struct plan_search ps = {.p = p, .s = s, .size = size, .fresh = fresh};
    pool_free_list_for_each(&p->growth.unmapped.free, p->growth.vmm.page, consider_hole, &ps);
    return ps.best;
}

/* The plan for a free block of `want` bytes (at least size) when a hole can make one within the
 * maximum and the device's memory, else for `size`. */
static grow_plan plan_step(const pool_resource *p, const pool_stream *s, size_t size, size_t want, bool fresh)
{
    if (want > size) {
        grow_plan plan = plan_growth(p, s, want, fresh);
        uint64_t after = pool_held(p) + plan.pages * p->growth.vmm.page;
        if (plan.pages && (p->growth.maximum == POOL_NO_MAXIMUM || after <= p->growth.maximum) && after <= p->growth.device_memory)
            return plan;
    }
    return plan_growth(p, s, size, fresh);
}

/* Give pages [plan.first, + plan.pages) of the hole to stream s as free memory, merged with the
 * free blocks around it that s may use (`fresh`: merged with none); returns the block. The pages
 * are mapped and a spare record is reserved for each split. */
static pool_block *adopt_pages(pool_resource *p, pool_stream *s, const grow_plan *plan, bool fresh)
{
    pool_vmm *v = &p->growth.vmm;
    pool_block *hole = plan->hole, *mapped = hole;
    uintptr_t end = plan->first + plan->pages * v->page;
    pool_free_list_remove(&p->growth.unmapped.free, hole);
    if (plan->first > hole->addr) {
        mapped = pool_block_split(&p->core.records, hole, plan->first);
        pool_free_list_insert(&p->growth.unmapped.free, hole);
    }
    if (end < mapped->addr + mapped->size)
        pool_free_list_insert(&p->growth.unmapped.free, pool_block_split(&p->core.records, mapped, end));
    if (fresh) {
        mapped->owner = s;
        pool_free_list_insert(&s->free, mapped);
        return mapped;
    }
    /* ready neighbours become s's, merged with s's free blocks beyond them, so that all of it
     * merges with the new pages */
    pool_block *nb[2] = {mapped->phys_prev, mapped->phys_next};
    for (int i = 0; i < 2; i++)
        if (nb[i] && nb[i]->owner && nb[i]->owner != s && nb[i]->owner->ready) {
            pool_free_list_remove(&nb[i]->owner->free, nb[i]);
            nb[i]->owner = NULL;
            pool_free_list_insert_merging(&s->free, s, nb[i], &p->core.records);
        }
    mapped->owner = NULL;
    return pool_free_list_insert_merging(&s->free, s, mapped, &p->core.records);
}

/* ---- moving without waiting ---------------------------------------------------------------- */

struct own_pages { const pool_vmm *v; const pool_block *keep1, *keep2; uint64_t pages, all; };

static bool count_own_pages(pool_block *b, void *arg)
{
    struct own_pages *c = arg;
    size_t n = whole_pages(c->v, b);
    c->all += n;
    if (b != c->keep1 && b != c->keep2)
        c->pages += n;
    return false;
}

/* A batch of lent pages with its event recorded on s (after the work queued on s so far), for a
 * move that does not wait: an empty one, or with `join` one whose pages all came from s (its
 * event recorded again on s covers them too: later work on s only comes after it); NULL when
 * every batch still waits for its event or CUDA refuses. A growth's move never joins: undoing it
 * takes back its batch whole. */
static pool_lent_batch *open_batch(pool_resource *p, pool_stream *s, bool join)
{
    if (!p->growth.lent && !(p->growth.lent = calloc(POOL_LENT_BATCHES, sizeof *p->growth.lent)))
        return NULL;
    pool_lent_batch *lb = NULL;
    for (int i = 0; i < POOL_LENT_BATCHES && !lb; i++)
        if (!p->growth.lent[i].pages.free.blocks)
            lb = &p->growth.lent[i];
    for (int i = 0; join && i < POOL_LENT_BATCHES && !lb; i++)
        if (p->growth.lent[i].stream == s->handle)
            lb = &p->growth.lent[i];
    if (!lb)
        return NULL;
    if (!lb->event && cudaEventCreateWithFlags((cudaEvent_t *)&lb->event, cudaEventDisableTiming) != cudaSuccess) {
        cudaGetLastError();
        lb->event = NULL;
        return NULL;
    }
    if (cudaEventRecord((cudaEvent_t)lb->event, (cudaStream_t)s->handle) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    lb->stream = s->handle;
    return lb;
}

/* What move_without_waiting did. */
typedef enum { MOVE_NOT_DONE, MOVE_DONE, MOVE_IN_VAIN } move_result;

/* A move for the growth of `plan` on stream s that does not wait: s's own free blocks may be used
 * by s's next work at once (stream order), so their pages can go where the growth maps while the
 * work queued on s before, which may still use them, keeps them mapped where they were. When s's
 * free blocks other than the two the growth joins hold whole pages enough to keep the pool within
 * its mark, or no other stream holds whole free pages (a synchronization could move no more),
 * up to that many are lent to a free batch, from the highest address down, after recording the
 * batch's event on s; pool_vmm_map then maps their memory first (MOVE_DONE). MOVE_IN_VAIN: no
 * other stream holds whole free pages and s's own may not be moved (none outside the blocks the
 * growth joins, or none beyond release_threshold and initial_size), so a synchronization could
 * move nothing either. MOVE_NOT_DONE: a synchronization may do more (other streams' pages), or
 * every batch still waits for its event. Either leaves everything as it was. */
static move_result move_without_waiting(pool_resource *p, pool_stream *s, const grow_plan *plan, pool_lent_batch **lent)
{
    pool_vmm *v = &p->growth.vmm;
    uint64_t after = p->growth.reserved + plan->pages * v->page;
    if (!plan->pages || after <= p->growth.mark)
        return MOVE_NOT_DONE;
    size_t excess = pages_for(v, (size_t)(after - p->growth.mark));
    if (excess > plan->pages)
        excess = plan->pages; /* every page lent is mapped again at once */
    struct own_pages own = {v, plan->hole->phys_prev, plan->hole->phys_next, 0, 0};
    pool_free_list_for_each(&s->free, v->page, count_own_pages, &own);
    if (own.pages < excess && releasable_bytes(p) / v->page > own.all)
        return MOVE_NOT_DONE; /* other streams hold free pages: a synchronization may move more */
    size_t n = excess < own.pages ? excess : (size_t)own.pages, can = pages_to_release(p, p->growth.release_threshold);
    if (n > can)
        n = can;
    if (!n)
        return MOVE_IN_VAIN;
    pool_lent_batch *lb = open_batch(p, s, false);
    if (!lb)
        return MOVE_NOT_DONE; /* the move takes the synchronizing path */
    *lent = lb;
    return release_free_pages(p, s, n, own.keep1, own.keep2, lb) ? MOVE_DONE : MOVE_NOT_DONE;
}

/* ---- giving pages to the plan -------------------------------------------------------------- */

size_t pool_expand_give_to_plan(void *ctx, pool_vmm *to, size_t pages, bool all)
{
    pool_resource *p = ctx;
    pool_vmm *v = &p->growth.vmm;
    /* not under capture (nothing may be recorded), nor where pages must not move */
    if (!pages || p->capturing || p->growth.page_moves == POOL_MOVES_NEVER || crmm_process_exiting())
        return 0;
    pool_stream *s = pool_streams_find(&p->core.streams, p->plan->stream);
    if (!s || !s->free.blocks)
        return 0;
    struct own_pages own = {v, NULL, NULL, 0, 0};
    pool_free_list_for_each(&s->free, v->page, count_own_pages, &own);
    size_t n = pages < own.pages ? pages : (size_t)own.pages, can = pages_to_release(p, p->growth.release_threshold);
    if (n > can)
        n = can;
    if (!n || (all && n < pages))
        return 0;
    crmm_device_guard g;
    if (crmm_cuda_device_enter(v->device, &g) != CRMM_OK) {
        crmm_clear_error();
        return 0;
    }
    pool_lent_batch *lb = open_batch(p, s, true);
    size_t given = lb ? release_free_pages(p, s, n, NULL, NULL, lb) : 0; /* fewer: no block record */
    for (size_t k = 0; k < given; k++) /* their memory is the plan's now (release_free_pages put it last) */
        to->spare[to->spare_count++] = v->spare[--v->spare_count];
    /* the range's mark falls with them: they back the plan's blocks now, and a growth that would
     * map them anew should first look for free pages to move, as for any growth past the mark */
    uint64_t moved = (uint64_t)given * v->page;
    p->growth.mark = p->growth.mark > moved ? p->growth.mark - moved : 0;
    crmm_cuda_device_restore(&g);
    return given;
}

/* ---- the move budget (page_moves = budget) ------------------------------------------------- */

/* Earn 1/POOL_MOVE_BUDGET_SHARE of the bytes allocated since the last growth, keeping at most the
 * mark: moves beyond once per mark then take at most that share of what the program allocates,
 * plus the mark, over any stretch of its run. */
static void earn_budget(pool_resource *p)
{
    pool_growth_state *g = &p->growth;
    uint64_t total = p->core.counts.total_bytes;
    if (total > g->budget_counted)
        g->move_budget += (total - g->budget_counted) / POOL_MOVE_BUDGET_SHARE;
    g->budget_counted = total;
    if (g->move_budget > g->mark)
        g->move_budget = g->mark;
}

/* Whether a growth of `pages` pages for a request of `size` bytes may move pages although a move
 * was made since the mark last rose: the budget pays for every page it could move, and it does not
 * repeat the last move's request with no new pages mapped since. A repeat means the pattern moves
 * the same block's memory back and forth (a large buffer that other blocks keep taking the place
 * of): that memory is needed, and the mark rises instead. */
static bool budget_allows(const pool_resource *p, size_t size, size_t pages)
{
    return p->growth.move_budget >= (uint64_t)pages * p->growth.vmm.page && size != p->growth.last_move_size;
}

static crmm_status out_of_room(const pool_resource *p, size_t size, const char *why)
{
    char label[80], req[32], have[32];
    return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: failed to allocate %s (pool size %s): %s",
                          pool_label(p, label, sizeof label), crmm_format_size(size, req, sizeof req),
                          crmm_format_size(p->growth.reserved, have, sizeof have), why);
}

/* Map `pages` pages of the range from address `first` and count what the range holds since:
 * the pages mapped, also when the map failed but the driver refused to unmap some of them again
 * (they stay mapped, the range's, until a growth uses them or trim unmaps them), and not a page an
 * earlier such failure left mapped (counted then). pool_vmm_map's errors. */
static crmm_status map_counted(pool_resource *p, uintptr_t first, size_t pages)
{
    pool_vmm *v = &p->growth.vmm;
    size_t before = v->mapped_pages;
    crmm_status st = pool_vmm_map(v, pool_vmm_page_of(v, first), pages);
    p->growth.reserved += (uint64_t)(v->mapped_pages - before) * v->page;
    return st;
}

/* Stray pages (POOL_PAGE_STRAY) among `pages` pages from address `first`. */
static size_t strays_in(const pool_vmm *v, uintptr_t first, size_t pages)
{
    size_t n = 0;
    for (size_t i = pool_vmm_page_of(v, first), end = i + pages; v->strays && i < end; i++)
        n += v->mapped[i] == POOL_PAGE_STRAY;
    return n;
}

/* pool_expand_grow, and with `fresh` pool_expand_grow_fresh. */
static crmm_status expand_grow(pool_resource *p, pool_stream *s, size_t size, bool fresh, pool_block **out)
{
    pool_vmm *v = &p->growth.vmm;
    if (crmm_process_exiting()) { /* no driver call, and no other stream's pages moved unwaited */
        char label[80], sz[32];
        return crmm_set_error(CRMM_ERROR_STATE, "%s: the process is exiting: no new device memory for %s",
                              pool_label(p, label, sizeof label), crmm_format_size(size, sz, sizeof sz));
    }
    crmm_device_guard g;
    crmm_status st = crmm_cuda_device_enter(v->device, &g);
    if (st != CRMM_OK)
        return crmm_error_add_context("pool");
    bool settled = false, released_all = false, busy = false;
    char why[512] = "";
    /* threads contend (the caches are on): a step of the pool's size, and no moving */
    bool threads = pool_caching(p);
    /* page_moves = budget: its own rules apply while s is the only stream state; with other
     * streams it is wait */
    bool budget = p->growth.page_moves == POOL_MOVES_BUDGET, budget_rules = budget && only_state(p, s);
    uint64_t held_before = p->growth.reserved, mark_before = p->growth.mark;
    bool own_move = false;
    pool_lent_batch *lent_now = NULL; /* the batch this growth lent pages to, until it maps */
    bool plan_lent = false;            /* the plan lent pages to this growth, until it maps */
    bool moved_before = p->growth.moved_since_mark;
    uint64_t budget_before = p->growth.move_budget;
    size_t last_move_before = p->growth.last_move_size;
    if (budget)
        earn_budget(p);
    if (!p->capturing)
        reap_lent(p, false);
    size_t want = size;
    if (threads && !fresh && p->growth.reserved / POOL_EXPAND_THREAD_STEP > want)
        want = (size_t)(p->growth.reserved / POOL_EXPAND_THREAD_STEP);
    for (;;) {
        grow_plan plan = plan_step(p, s, size, want, fresh);
        uint64_t free_bytes = free_bytes_lower_bound(p);
        bool can_move = free_bytes > p->growth.release_threshold && free_bytes >= (size < v->page ? size : v->page);
        /* budget: a move beyond once per mark, paid for */
        bool paid = budget_rules && p->growth.moved_since_mark && budget_allows(p, size, plan.pages);
        if ((p->growth.moved_since_mark && !paid) || threads || fresh || p->capturing || p->growth.page_moves == POOL_MOVES_NEVER)
            can_move = false; /* moving again before the mark rose: the pattern needs the memory;
                               * under capture nothing may wait for the device */
        else if (can_move && !settled && nothing_to_move(p, s))
            can_move = false; /* a synchronization could neither merge blocks nor free a page */
        bool past_mark = !settled && plan.pages &&
                         p->growth.reserved + plan.pages * v->page > p->growth.mark + p->growth.mark / POOL_EXPAND_SLACK;
        busy = false;
        move_result moved = past_mark && can_move ? move_without_waiting(p, s, &plan, &lent_now) : MOVE_NOT_DONE;
        if (moved == MOVE_DONE) {
            settled = true; /* the caller's own free pages moved: no wait, no query */
            p->growth.moved_since_mark = true;
            past_mark = false;
            own_move = true;
            if (budget_rules) {
                uint64_t lent = held_before - p->growth.reserved; /* the pages moved */
                if (paid)
                    p->growth.move_budget -= lent < p->growth.move_budget ? lent : p->growth.move_budget;
                p->growth.last_move_size = size; /* forgotten below if the growth maps new pages too */
            }
        } else if (moved == MOVE_IN_VAIN) {
            can_move = false; /* new pages, and the mark rises */
        }
        if (past_mark && can_move && budget_rules)
            can_move = false; /* one stream: a synchronization could merge nothing, and the pool
                               * never waits for the device on one stream under budget */
        if (past_mark && can_move && p->growth.page_moves == POOL_MOVES_IDLE && !pool_streams_idle(&p->core.streams, s))
            can_move = false, busy = true; /* new pages now; a growth that finds the streams idle moves them */
        if (past_mark && can_move) {
            /* past the high-water mark: wait for the device (page_moves = idle: it is idle), let
             * every free block merge (one may fit now), then move free pages to where the growth
             * maps instead of new memory */
            settled = true;
            if (p->growth.page_moves != POOL_MOVES_IDLE && (st = pool_streams_synchronize(&p->core.streams)) != CRMM_OK)
                break;
            if (p->growth.page_moves != POOL_MOVES_IDLE)
                reap_lent(p, true);
            pool_stream *holder = pool_streams_gather(&p->core.streams, &p->core.records, s);
            if ((*out = pool_free_list_fit(&s->free, size)))
                break;
            plan = plan_growth(p, s, size, fresh);
            uint64_t after = p->growth.reserved + plan.pages * v->page;
            if (holder && plan.pages && after > p->growth.mark) {
                size_t excess = pages_for(v, (size_t)(after - p->growth.mark));
                size_t can = pages_to_release(p, p->growth.release_threshold);
                release_free_pages(p, holder, excess < can ? excess : can, plan.hole->phys_prev, plan.hole->phys_next, NULL);
                p->growth.moved_since_mark = excess && can;
                plan = plan_growth(p, s, size, fresh);
            }
        }
        /* the pages the growth maps anew (a stray one is held already) */
        size_t new_pages = plan.pages ? plan.pages - strays_in(v, plan.first, plan.pages) : 0;
        /* growing for the planned stream: a lost plan's idle pages first (not for a capture,
         * whose graph may run on another stream), as many as the pages a move put on the spare
         * list leave wanting (a surplus would be released while its old mapping still holds it) */
        if (new_pages > v->spare_count && p->plan && !fresh && !p->capturing && s && s->handle == p->plan->stream)
            plan_lent |= pool_plan_lend(p->plan, v, new_pages - v->spare_count) != 0;
        if (!plan.pages)
            snprintf(why, sizeof why, "no room left in its address range of %zu pages", v->pages);
        else if (p->growth.maximum != POOL_NO_MAXIMUM && pool_held(p) + new_pages * v->page > p->growth.maximum) {
            char max[32];
            snprintf(why, sizeof why, "maximum size %s", crmm_format_size(p->growth.maximum, max, sizeof max));
        } else if (pool_held(p) + new_pages * v->page > p->growth.device_memory) {
            char dev[32];
            snprintf(why, sizeof why, "more than the device's %s", crmm_format_size(p->growth.device_memory, dev, sizeof dev));
        } else if (!pool_records_reserve(&p->core.records, 3)) {
            st = crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "pool: malloc failed (block records)");
            break;
        } else if ((st = map_counted(p, plan.first, plan.pages)) == CRMM_OK) {
            p->growth.growths++;
            pool_raise_held_peak(p);
            /* budget, after a move of s's own pages: the mark rises only by the pages the move did
             * not cover, not to what the pool holds, so that the slack the pool had used before
             * stays slack (else each fill-the-slack-then-move cycle would raise the mark by it) */
            uint64_t rise_to = p->growth.reserved, slack_used = held_before > mark_before ? held_before - mark_before : 0;
            if (budget_rules && own_move)
                rise_to = rise_to > slack_used ? rise_to - slack_used : 0;
            if ((settled || (!can_move && !busy)) && rise_to > p->growth.mark) {
                p->growth.mark = rise_to; /* a growth that moving free pages could not (or should not) avoid */
                p->growth.moved_since_mark = false;
            }
            if (budget && p->growth.reserved > held_before)
                p->growth.last_move_size = 0; /* new pages: a later move for the same size repeats nothing */
            lent_now = NULL;
            plan_lent = false;
            *out = adopt_pages(p, s, &plan, fresh);
            break;
        } else if (st != CRMM_ERROR_OUT_OF_MEMORY) {
            break;
        } else {
            snprintf(why, sizeof why, "%s", crmm_last_error());
        }
        if (lent_now) { /* nothing mapped: the move is undone before anything is given back */
            undo_move(p, s, lent_now, moved_before, budget_before, last_move_before);
            lent_now = NULL;
        }
        if (plan_lent) { /* and the plan's pages are its own again */
            pool_plan_take_back(p->plan, v);
            plan_lent = false;
        }
        if (want > size) { /* the step did not fit: the request alone, before giving anything back */
            want = size;
            continue;
        }
        if (released_all || p->capturing) { /* giving pages back waits for the device */
            st = out_of_room(p, size, why);
            break;
        }
        /* out of memory: give back every free page, the plan's unused ones too, then try once more */
        released_all = true;
        bool released;
        if ((st = release_beyond(p, s, 0, true, &released)) != CRMM_OK)
            break;
        if (p->plan && p->plan->held && pool_streams_synchronize(&p->core.streams) == CRMM_OK)
            trim_plan(p); /* a page the driver refused to give back stays counted as held */
        if (released && (*out = pool_free_list_fit(&s->free, size)))
            break;
    }
    if (lent_now && st != CRMM_OK) /* a driver error or no record: the move is undone too */
        undo_move(p, s, lent_now, moved_before, budget_before, last_move_before);
    if (plan_lent) /* mapped nothing: a driver error, no record, or a block that fit at last */
        pool_plan_take_back(p->plan, v);
    pool_vmm_drop_spares(v, p->plan ? &p->plan->vmm : NULL);
    crmm_cuda_device_restore(&g);
    return st;
}

crmm_status pool_expand_grow(pool_resource *p, pool_stream *s, size_t size, pool_block **out)
{
    return expand_grow(p, s, size, false, out);
}

crmm_status pool_expand_grow_fresh(pool_resource *p, pool_stream *s, size_t size, pool_block **out)
{
    return expand_grow(p, s, size, true, out);
}

crmm_status pool_expand_map_initial(pool_resource *p, pool_stream *s, size_t size)
{
    pool_vmm *v = &p->growth.vmm;
    /* initial_size in whole pages, never past maximum_size: the most whole pages within it */
    if (p->growth.maximum != POOL_NO_MAXIMUM && page_up(v, size) > p->growth.maximum) {
        size = (size_t)page_down(v, (uintptr_t)p->growth.maximum);
        if (!size)
            return CRMM_OK;
    }
    grow_plan plan = plan_growth(p, s, size, false);
    if (!plan.pages)
        return out_of_room(p, size, "larger than its address range");
    if (!pool_records_reserve(&p->core.records, 3))
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "pool: malloc failed (block records)");
    crmm_status st = map_counted(p, plan.first, plan.pages);
    pool_vmm_drop_spares(v, p->plan ? &p->plan->vmm : NULL);
    if (st != CRMM_OK)
        return st;
    p->growth.reserved_peak = p->growth.reserved;
    p->growth.mark = p->growth.reserved;
    adopt_pages(p, s, &plan, false);
    return CRMM_OK;
}

/* Unmap the stray pages (POOL_PAGE_STRAY: a growth whose map failed could not unmap them again):
 * they lie where the range has no block, and no work uses them. */
static void unmap_strays(pool_resource *p)
{
    pool_vmm *v = &p->growth.vmm;
    for (size_t i = 0; v->strays && i < v->pages; i++)
        if (v->mapped[i] == POOL_PAGE_STRAY && pool_vmm_unmap(v, i, 1) == 1)
            p->growth.reserved -= v->page;
}

crmm_status pool_expand_trim(pool_resource *p)
{
    crmm_status st = CRMM_OK;
    if (crmm_process_exiting())
        return CRMM_OK; /* no driver call: the memory goes with the process */
    pool_lock(p);
    pool_capture_collect(p); /* destroyed graphs' blocks are free too */
    crmm_device_guard g;
    if ((st = crmm_cuda_device_enter(p->growth.vmm.device, &g)) == CRMM_OK) {
        bool released;
        uint64_t refused = p->growth.vmm.unmaps_refused;
        reap_lent(p, false); /* also when nothing free is given back */
        unmap_strays(p);
        st = release_beyond(p, NULL, p->growth.release_threshold, true, &released);
        /* a free page whose unmap the driver refused (logged there) stays mapped, the pool's: the
         * trim did not give back what it should have, and the next one tries again */
        if (st == CRMM_OK && p->growth.vmm.unmaps_refused != refused)
            st = crmm_set_error(CRMM_ERROR_CUDA, "pool: trim: the driver refused to unmap a free page; it stays mapped "
                                                 "and a later trim tries again");
        /* the plan's pages no planned block uses: after a synchronization, since work queued
         * before their blocks' frees may still use them; and once it has lent, the places whose
         * memory it gave may take new memory again (the range has given its idle pages back) */
        size_t plan_kept = 0;
        if (st == CRMM_OK && p->plan && (p->plan->held || p->plan->pending_count || p->plan->vmm.lent_pages || p->plan->given_pages) &&
            (st = pool_streams_synchronize(&p->core.streams)) == CRMM_OK)
            plan_kept = trim_plan(p);
        size_t kept = pool_vmm_drop_spares(&p->growth.vmm, p->plan ? &p->plan->vmm : NULL);
        if (kept && st == CRMM_OK)
            st = crmm_set_error(CRMM_ERROR_CUDA, "pool: trim: cuMemRelease refused %zu page(s): the pool keeps them, "
                                                 "reserved, for its next growth", kept);
        if (plan_kept && st == CRMM_OK)
            st = crmm_set_error(CRMM_ERROR_CUDA, "pool: trim: the driver refused to unmap or release %zu of the plan's "
                                                 "page(s): the plan keeps them, reserved, and a later trim tries again",
                                plan_kept);
        crmm_cuda_device_restore(&g);
    }
    pool_unlock(p);
    return st;
}

crmm_status pool_expand_init(pool_resource *p, int device, size_t range_bytes, size_t page_size)
{
    crmm_status st = pool_vmm_reserve(&p->growth.vmm, device, range_bytes, page_size);
    if (st != CRMM_OK)
        return st;
    pool_chunk *c = malloc(sizeof *c);
    if (!c || !pool_records_reserve(&p->core.records, 1)) {
        free(c);
        pool_vmm_release(&p->growth.vmm);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "pool: malloc failed (range record)");
    }
    pool_block *all = pool_records_take(&p->core.records);
    *all = (pool_block){.addr = p->growth.vmm.base, .size = p->growth.vmm.pages * p->growth.vmm.page};
    pool_free_list_insert_merging(&p->growth.unmapped.free, &p->growth.unmapped, all, &p->core.records);
    *c = (pool_chunk){.addr = all->addr, .size = all->size, .first = all};
    p->growth.chunks = c;
    p->growth.chunk_count = 1;
    p->growth.expandable = true;
    return CRMM_OK;
}

void pool_expand_release_all(pool_resource *p)
{
    if (pool_streams_synchronize(&p->core.streams) != CRMM_OK)
        crmm_log(CRMM_LOG_WARN, "%s; unmapping the pool's memory anyway", crmm_last_error());
    for (int i = 0; p->growth.lent && i < POOL_LENT_BATCHES; i++)
        if (p->growth.lent[i].event && !crmm_process_exiting())
            cudaEventDestroy((cudaEvent_t)p->growth.lent[i].event);
    free(p->growth.lent);
    p->growth.lent = NULL;
    pool_vmm_release(&p->growth.vmm); /* lent pages included */
    pool_plan_destroy(p->plan);
    p->plan = NULL;
    free(p->growth.chunks);
    p->growth.chunks = NULL;
    p->growth.chunk_count = 0;
    p->growth.reserved = 0;
}
