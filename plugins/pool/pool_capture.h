/* pool_capture.h — the pool under CUDA stream capture: which memory a graph owns, and when it
 * comes back (docs/cuda-graphs.md states the rule; pool_capture.c says how it is kept).
 *
 * An allocation or free on a stream that is being captured into a graph runs no kernel: what it
 * stands for happens at every replay of the graph. So a block that a capture allocates, or frees,
 * stays the graph's: it is never handed to anyone outside that graph until the graph and every
 * executable graph made from it are destroyed. Each graph the pool meets gets a record
 * (pool_graph), tied to the graph by a CUDA user object whose destructor hands the graph's parked
 * blocks back to the pool. While it lives:
 *  - a block allocated during the capture is "owned" (its record's `graph` field points at the
 *    record); when it is freed, inside the capture or after it, it is parked in the record;
 *  - a block allocated before the capture and freed inside it is parked in the record as well,
 *    and owned from then on (with graph_pool = private it is held, never reused: it shares pages
 *    with blocks outside the graph); work queued before the capture may still use it, so when
 *    the graph goes it joins the state of the stream it was freed on, not the ready state;
 *  - a parked block is reused only by a later allocation of the same capture on the same stream
 *    (the graph orders the two), never by anyone else. Parked blocks are kept per stream as the
 *    pool keeps free ones: merged with parked neighbours, found by segregated fit, and split for a
 *    smaller request (the rest stays parked), so that a capture's temporaries come back to the
 *    same few addresses as they would outside a capture. Blocks of up to POOL_CAPTURE_SMALL bytes
 *    and larger ones are parked apart, as PyTorch keeps small blocks in segments of their own: a
 *    small tensor that outlives a large one's free never pins the large block for the rest of the
 *    capture;
 *  - a block owned by another graph that is still alive is parked here too, never reused, and
 *    passed to its owner when this graph goes (held there, not reused either: the thread that
 *    freed it, which names a per-thread default stream, is not known then).
 * Parked bytes are not free: BYTES_FREE leaves them out until the graph is gone, while the
 * counters of allocations (CRMM_QUERY_ALLOCATED_*) drop at the free as usual. */
#ifndef CRMM_PLUGINS_POOL_CAPTURE_H
#define CRMM_PLUGINS_POOL_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <crmm/resource.h>
#include "../common/capture_check.h"
#include "../common/graph_hold.h"
#include "pool_block.h"
#include "pool_free_list.h"

struct pool_resource;

/* What cudaStreamGetCaptureInfo says about a stream under capture. */
typedef capture_check_info pool_capture;

/* Requests and parked blocks of up to this many bytes are "small" (pool_capture_reuse). */
#define POOL_CAPTURE_SMALL ((size_t)1 << 20)

/* The blocks a graph holds that were freed on one stream and that it owns: reusable by its
 * capture on that stream. Each parked block's `graph` field holds the address of this record
 * with tag bits (POOL_PARKED_*), which is how a freed neighbour knows it may merge with it. */
typedef struct pool_graph_stream {
    crmm_cuda_stream_t handle;
    uint64_t thread;               /* for cudaStreamPerThread the freeing thread's serial, else 0 */
    bool after;                    /* blocks freed outside any capture while the graph lived (or,
                                    * with graph_pool = private, held from before the capture):
                                    * never reused by the capture */
    bool eager;                    /* holds blocks that eager work queued on that stream may still
                                    * use when the graph is gone (every `after` record; a capture's
                                    * record once a block from before the capture joins it): they go
                                    * back to that stream's state, not to the ready state */
    struct pool_graph_stream *next;
    pool_free_list area[2];        /* [0] large blocks, [1] small ones */
} pool_graph_stream;

/* The pool's record of one graph, tied to it by graph_hold.h (the one implementation of the user
 * object, shared with graph_park.h). Guarded by the pool's lock, except `hold.holds`, which
 * changes only under graph_holds_lock (destroy detaches records still tied to a graph). */
typedef struct pool_graph {
    graph_hold hold;               /* first: the destructor frees the record through it */
    bool alive;                    /* the graph (or an executable graph of it) may still run */
    pool_graph_stream *streams;    /* its parked blocks, per stream they were freed on */
    pool_block *foreign;           /* parked blocks another live graph owns (or that no stream
                                    * record could be made for): linked through u.free.next, the
                                    * stream they were freed on in u.free.prev; never reused */
    uint64_t parked_bytes;
    uint64_t owned;                /* blocks live with `graph` pointing here, or parked in `streams` */
    struct pool_graph *next;       /* the pool's records */
} pool_graph;

/* The gate of allocate and free: whether the pool asks CUDA about streams at all (its graphs
 * parameter and the process switch; a host pool never does). One load of the pool's gate byte
 * and one predictable branch while it is closed. */
#define pool_capture_gate(p) capture_check_gate_open((p)->capture_gate)

/* Behind the gate: whether `stream` is being captured (status active); then *cap describes the
 * capture. One runtime query per call; none for the legacy default stream (which cannot be
 * captured) or once the process is exiting. A stream whose capture was invalidated counts as not
 * capturing: its graph can never run. */
bool pool_capture_query(const struct pool_resource *p, crmm_cuda_stream_t stream, pool_capture *cap);

/* The record of the graph being captured (made and tied to the graph at the capture's first
 * call). Takes the pool's lock itself: call without it. Errors: CRMM_ERROR_OUT_OF_MEMORY (malloc),
 * CRMM_ERROR_CUDA naming the capture when CUDA refuses the user object. */
crmm_status pool_capture_graph(struct pool_resource *p, const pool_capture *cap, pool_graph **out);

/* Set the calling thread's capture mode to relaxed (the previous one in *saved), so that the
 * driver calls of a growth (cudaMalloc upstream, mapping pages) are allowed while a capture in
 * global mode is under way; pool_capture_restore_mode puts it back (capture_check.h). */
#define pool_capture_relax_mode capture_check_relax_mode
#define pool_capture_restore_mode capture_check_restore_mode

/* Under the lock, with a spare record reserved: a block of `size` bytes cut from g's parked blocks
 * freed on `stream`, of its area (small or large, by `size`), owned by g and out of the parked
 * lists (owner NULL); NULL when none fits. */
pool_block *pool_capture_reuse(struct pool_resource *p, pool_graph *g, size_t size, crmm_cuda_stream_t stream);

/* With graph_pool = private, a small request takes this much (PyTorch's small segment), its rest
 * parked for the capture's later small requests; also the page of a pool of chunks. */
#define POOL_CAPTURE_SMALL_SEGMENT ((size_t)2 << 20)

/* Under the lock, graph_pool = private, with three spare records: `want` bytes rounded up to
 * whole pages (an expandable pool's pages; POOL_CAPTURE_SMALL_SEGMENT for a pool of chunks), cut
 * from a free block of state s or of the ready state (both usable by s's capture at once, without
 * a wait; destroyed graphs' blocks are collected first), starting on a page boundary, out of every
 * list and owned by no graph; NULL when no free block holds such a run (the caller then grows,
 * pool_grow_fresh). */
pool_block *pool_capture_take_pages(struct pool_resource *p, struct pool_stream *s, size_t want);

/* Under the lock, graph_pool = private, with a spare record: block b (out of every list), taken
 * for a request of `size` bytes of g's capture on `stream`, is cut to `size`; the rest is parked
 * in g for that capture, in the request's area (small or large), and counted held. */
void pool_capture_keep_rest(struct pool_resource *p, pool_graph *g, pool_block *b, size_t size, crmm_cuda_stream_t stream);

/* Tag bits of a parked block's `graph` field, over the address of its pool_graph_stream. */
#define POOL_PARKED ((uintptr_t)1)
#define POOL_PARKED_SMALL ((uintptr_t)2)

/* Whether block b is parked in a graph's reusable lists (not live, not free). */
static inline bool pool_capture_block_parked(const pool_block *b) { return (b->graph & POOL_PARKED) != 0; }

/* Whether g holds parked blocks that its capture may reuse. */
static inline bool pool_capture_has_parked(const pool_graph *g) { return g->streams != NULL; }

/* Under the lock: b, just handed out during g's capture, is owned by g. */
static inline void pool_capture_own(pool_graph *g, pool_block *b)
{
    b->graph = (uintptr_t)g;
    g->owned++;
}

/* Under the lock: b was freed (taken out of the live map) on `stream`, during the capture of
 * `capturing` (NULL: no capture) or owned by a graph. Parks it and returns true when a live graph
 * needs it; returns false (b then goes to the free lists as usual) when its graph is gone. */
bool pool_capture_free(struct pool_resource *p, pool_block *b, pool_graph *capturing, crmm_cuda_stream_t stream);

/* Under the lock: whether a block at addr is parked for a graph (a second free of it). */
bool pool_capture_is_parked(const struct pool_resource *p, uintptr_t addr);

/* Under the lock: hand back the blocks of every graph destroyed since the last call (its
 * destructor only noted it): those its capture freed to the ready state, those freed after the
 * capture to the state of the stream they were freed on. Called where the pool may need them: a
 * miss of allocate, a private capture's growth, a trim, a query. A record whose blocks cannot be
 * handed back now (no memory for a state) is kept, its blocks parked, and retried at the next
 * call. */
void pool_capture_collect_slow(struct pool_resource *p);
#define pool_capture_collect(p) \
    do { \
        if (__builtin_expect(graph_holds_pending(&(p)->released), 0)) \
            pool_capture_collect_slow(p); \
    } while (0)

/* Under the lock, crmm_pool_forget_stream(stream) having waited for it: the blocks graphs hold
 * for that stream (freed on it after a capture or inside one) go back to the ready state when
 * their graph is gone, so that no CUDA call names the stream, which may be destroyed by then. */
void pool_capture_forget_stream(struct pool_resource *p, crmm_cuda_stream_t stream);

/* Destroy: forget every record (those still tied to a graph are detached; the graph's
 * destructor frees them later). */
void pool_capture_detach_all(struct pool_resource *p);

#endif
