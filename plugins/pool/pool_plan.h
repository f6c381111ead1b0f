/* pool_plan.h — an expandable pool's placement plan (the `plan` parameter): the file `crmm plan`
 * learned from a recorded run (tools/plan.h has its format), and the address range where the
 * pool serves the requests that follow it.
 *
 * The plan lists the run's allocations in order, each with its size and its offset in a range of
 * the plan's extent. The pool keeps a cursor into the list: a request of the caller's stream whose
 * size is the next entry's (or one of the 16 after it: a request the plan does not know leaves the
 * cursor where it is) is served at that entry's offset in a range of its own, provided no planned
 * block still live or not yet safe to reuse overlaps it; after the last entry the cursor goes back
 * to the plan's loop. Every other request is served by the pool as without a plan. So a run that
 * repeats the recorded one holds about the plan's extent, which on real training logs is at or
 * near the live peak and below what best fit placed online holds (bench/RESULTS.md).
 *
 * The range's pages are mapped as planned blocks first reach them and kept until trim, which
 * unmaps those no planned block uses. Only one stream is planned: the stream of the first request
 * served from the plan, never cudaStreamPerThread (another stream on each thread, which the plan
 * cannot tell apart). A planned block freed on another stream stays unusable until trim (which
 * synchronizes the device): its range is then safe for the planned stream. One freed under CUDA
 * graph capture is the graph's: unusable until the graph is gone and a trim after that. All of
 * it runs under the pool's lock.
 *
 * A run that stops following the plan must not hold the plan's pages on top of what the pool grows
 * for it. The plan is lost when the run passes its last entry with no loop, or when a search for
 * its place finds nothing; while lost it serves nothing. A search that finds the run's place again
 * ends the loss (past the last entry with no loop, the run has gone past what was recorded: only a
 * run that starts over is looked for, at the plan's start), but the plan then maps no new page
 * until POOL_PLAN_PROBATION requests in a row have followed it (a search can match by chance:
 * every step makes the same sizes for its weights' gradients). While the plan is lost or on
 * probation, or has served none of the last 32 requests (a start over by chance, below, whose
 * failure a search deferred by the back-off has not found yet), a growth of the pool's own range
 * for the planned stream takes the plan's idle pages (those no planned block uses) first: as when
 * the pool moves its own free pages, their memory goes to the range's spare list, which that
 * growth maps, and work of the same stream is ordered after the work queued on the old addresses,
 * so nothing waits for the device. The old addresses stay mapped, unusable, until an event
 * recorded on the planned stream after the lending has completed (asked without waiting at later
 * requests), or until trim. Memory comes back the same way: a place whose memory the plan gave is
 * mapped again only with whole free pages of the range's free blocks of the planned stream, taken
 * as the range's own moves take them (pool_plan_asked.give), never with new memory (which would sit
 * beside the range's idle pages), until a trim gives the range's idle pages back; when the range
 * has none to give, the request is served as without a plan. So a process that runs its job
 * again, following the plan from its start, finds every place again, backed by the memory its
 * first run left idle in the range.
 *
 * A request whose size is the first entry's, which the cursor's window does not know, while the
 * places of the first 8 entries are all free and the pool's live blocks outside the plan are few
 * (POOL_PLAN_RESTART_LIVE), starts the plan over: a process that repeats its work (a second run of
 * the same job) follows the plan again from its first request. */
#ifndef CRMM_PLUGINS_POOL_PLAN_H
#define CRMM_PLUGINS_POOL_PLAN_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <crmm/error.h>
#include <crmm/resource.h>
#include "pool_vmm.h"

/* How far past the cursor a request's size is looked for. */
#define POOL_PLAN_WINDOW 16
/* When this many of the last 2 * POOL_PLAN_RESYNC requests were not served from the plan, the plan
 * is searched for the sizes of the last POOL_PLAN_RESYNC requests, and the cursor goes on from where
 * they lie: a run that started over, or skipped or added a stretch, finds its place again. A search
 * that finds nothing doubles the requests until the next (up to POOL_PLAN_RESYNC_MAX_WAIT), so a
 * run that no longer follows the plan costs little. */
#define POOL_PLAN_RESYNC 8
#define POOL_PLAN_RESYNC_MAX_WAIT 4096
/* After a search found the place of a run the plan had lost, this many requests in a row must
 * follow it before it maps pages again: until then it serves only from pages it still has mapped,
 * so a search that matched by chance (sizes that every step makes) does not map pages the run
 * will not use. A request that does not follow it starts the count again. */
#define POOL_PLAN_PROBATION 64
/* A request starts the plan over (see the top) only while the pool's live blocks outside the plan
 * are at most 1/POOL_PLAN_RESTART_LIVE of the plan's extent: a process that starts its job over
 * has let go of the last run's blocks, while a server whose first request's size recurs holds its
 * caches in the pool's range. */
#define POOL_PLAN_RESTART_LIVE 16

typedef struct pool_plan {
    uint64_t count;                /* entries */
    uint64_t *size;                /* per entry: bytes, a multiple of 256 */
    uint64_t *offset;              /* per entry: where it goes in the range */
    uint64_t extent;               /* bytes the entries span */
    uint64_t loop;                 /* the entry after the last; count: none (the plan then ends) */
    uint64_t cursor;               /* the next entry expected */
    bool ended;                    /* passed the last entry with no loop */
    bool lost;                     /* a search for the run's place found nothing (see the top) */
    uint32_t probation;            /* requests still to follow before it maps pages again */
    bool stream_known;
    crmm_cuda_stream_t stream;     /* the planned stream */
    pool_vmm vmm;                  /* the range */
    uint64_t *busy;                /* one bit per 256 bytes of the range: held by a planned block
                                    * live, or freed where it is not yet safe to reuse ("busy"), on
                                    * the pages such a block covers in part */
    uint32_t *full, *partial;      /* per page: busy blocks that cover it whole, in part */
    struct pool_plan_pending {     /* those freed blocks, made free at trim */
        uint64_t offset, size;
        const void *graph;         /* freed under capture into this graph (a pool_graph): not
                                    * before it is gone (pool_plan_graph_gone); else NULL */
    } *pending;
    size_t pending_count, pending_room;
    uint64_t held;                 /* bytes of mapped pages (not lent) and of spare ones */
    uint64_t live;                 /* bytes of the planned blocks live: the pool counts them in its
                                    * block bytes, which its own range does not hold */
    uint64_t recent[POOL_PLAN_RESYNC]; /* the sizes of the last requests (a ring) */
    uint64_t requests;             /* requests of the planned stream (the ring's position) */
    uint32_t missed_bits;          /* one bit per recent request, newest lowest: not served */
    uint64_t resync_wait;          /* requests before the next search may run */
    uint64_t resync_after;         /* after a search that found nothing: the next wait */
    uint64_t hits, misses;         /* requests of the planned stream served from the plan, not */
    /* lending idle pages while not followed (pool_plan_lend) */
    void *lend_event;              /* cudaEvent_t recorded on the planned stream; NULL: none made */
    uint8_t *lent;                 /* per page: a PLAN_PAGE_* of pool_plan.c (whether and how lent) */
    size_t given_pages;            /* of those, PLAN_PAGE_GIVEN (their memory the range's) */
    bool lend_pending;             /* the event is recorded and not yet seen completed */
} pool_plan;

/* Read the plan file at `path` for pool `label`: the entries only (what serving needs is made by
 * pool_plan_reserve). Errors, each naming the file (and the line): CRMM_ERROR_CONFIG when it is
 * not a regular file or cannot be read, is not a plan, or is inconsistent (a line too long, a
 * number with a sign or a blank, an entry outside the extent, a size that is no multiple of 256,
 * a count other than the entries, a loop outside them, an extent or count past crmm/pool.h's
 * limits); CRMM_ERROR_OUT_OF_MEMORY. */
crmm_status pool_plan_load(const char *path, const char *label, pool_plan **out);

/* Reserve the plan's range on `device` in pages of page_size (pool_vmm_reserve), and its busy
 * bits and page counts. Errors as pool_vmm_reserve's; CRMM_ERROR_OUT_OF_MEMORY. */
crmm_status pool_plan_reserve(pool_plan *pl, int device, size_t page_size);

/* Whether addr lies in the plan's range (a planned block). */
static inline bool pool_plan_holds(const pool_plan *pl, uintptr_t addr)
{
    return pl && addr - pl->vmm.base < pl->extent;
}

/* What the pool tells the plan at a request. */
typedef struct pool_plan_asked {
    uint64_t room;                 /* bytes of new memory the pool's maximum and the device leave */
    uint64_t live_elsewhere;       /* bytes of the live blocks the pool serves outside the plan */
    /* where a place whose memory the plan gave to the pool's range takes memory again:
     * give(ctx, to, pages, all) puts up to `pages` physical pages (with `all`: exactly that many,
     * or none) on to's spare list (range `to` is the plan's), taken from the pool's own range
     * where nothing needs them any more, and returns how many; NULL: none */
    size_t (*give)(void *ctx, pool_vmm *to, size_t pages, bool all);
    void *ctx;
} pool_plan_asked;

/* The planned address for a request of `size` bytes (a multiple of 256) on `stream`, with its
 * pages mapped and its range marked busy; 0 when the plan does not serve it (the pool then serves
 * it as without a plan), also when it would map more than asked->room bytes of new memory, or
 * when a place whose memory the plan gave to the pool's range cannot take as much back from
 * asked->give (see the top). *mapped: bytes of pages it mapped. */
uintptr_t pool_plan_take(pool_plan *pl, size_t size, crmm_cuda_stream_t stream, const pool_plan_asked *asked,
                         uint64_t *mapped);

/* While the plan is ended, lost, on probation or served none of the last 32 requests of its
 * stream: lend up to `pages` of its idle pages to `own` (the pool's range, about to grow for the
 * planned stream; see the top). Returns how many it lent: none before the plan has served a
 * request (its stream is not known yet). */
size_t pool_plan_lend(pool_plan *pl, pool_vmm *own, size_t pages);

/* Unmap the old addresses of the pages lent to the pool's range, when no work can use them there
 * any more: `synchronized`, the device was just synchronized; else once the lending event has
 * completed (asked without waiting; the pages lent after it was recorded wait for the next). The
 * places are the plan's again, mapped only with memory the range gives back (see the top). Returns how many unmaps the driver refused (those pages
 * stay lent, for trim). */
size_t pool_plan_reap_lent(pool_plan *pl, bool synchronized);

/* Undo pool_plan_lend for the pages whose memory still waits on own's spare list (the growth
 * they were lent to mapped nothing): they are the plan's idle pages again. */
void pool_plan_take_back(pool_plan *pl, pool_vmm *own);

/* A planned block [addr, addr + size) freed on `stream`; `graph`: the free is under capture into
 * that graph (the pool's record of it), else NULL. Its range is free for the planned stream at
 * once when that is the stream and there is no capture; else after trim, and for a capture's free
 * only once the graph is gone too (every replay of the graph uses the block, then frees it). */
void pool_plan_release(pool_plan *pl, uintptr_t addr, size_t size, crmm_cuda_stream_t stream, const void *graph);

/* The graph `graph` is gone (no replay of it can run): the blocks freed under its capture are
 * made free at the next trim, as blocks freed on another stream are. */
void pool_plan_graph_gone(pool_plan *pl, const void *graph);

/* After a device synchronization, once the pool's range gave back its free pages: every freed
 * block's range is free (but those of graphs still alive), the places whose memory went to the
 * range may take new memory again, and the pages no planned block uses are unmapped and released
 * (but memory that `own`,
 * the pool's range, still maps at a lent page). Returns how many pages the driver refused to unmap
 * or release, or stay for that reason: they stay the plan's, counted in `held`, and a later trim
 * tries again. */
size_t pool_plan_trim(pool_plan *pl, const pool_vmm *own);

/* Unmap everything, free the range and the plan (no work may still use it). NULL: nothing. */
void pool_plan_destroy(pool_plan *pl);

#endif
