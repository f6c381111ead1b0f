/* graph_park.h — which memory a CUDA graph owns, for allocators that keep no header per block
 * (arena, fixed_size): the ownership rule of docs/cuda-graphs.md over addresses.
 *
 * A block handed out during a capture is owned by that graph (an address map says so); when it is
 * freed, inside the capture or after it, it is parked in the graph's record instead of going back
 * to the allocator. A block allocated before the capture and freed inside it is parked too; it
 * stays "eager" (graph_park_entry) when the capture hands it out again. Parked blocks come back
 * (graph_park_collect) only once the graph and every executable graph made from it are destroyed
 * (graph_hold.h ties the record to the graph), so nothing the graph may still write is handed out.
 * Within its own capture a parked block may be handed again (graph_park_reuse) to a later
 * allocation on the stream that freed it: the graph orders the two.
 *
 * Thread-safe: one mutex of its own, taken after the allocator's lock when both are held (or
 * without it). A program that never captures pays one atomic load per free (graph_park_free). */
#ifndef CRMM_PLUGINS_GRAPH_PARK_H
#define CRMM_PLUGINS_GRAPH_PARK_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <crmm/fork_guard.h>
#include <crmm/resource.h>
#include "capture_check.h"
#include "graph_hold.h"
#include "ptr_map.h"
#include "thread_serial.h"

/* A block freed for a graph: where, how large (as freed), the stream it was freed on (with the
 * freeing thread's serial for the per-thread default stream, thread_serial.h), whether the
 * graph's capture may take it back (not when another graph's went to it when that one went), and
 * whether eager work, outside any graph, may still use it when the graph is gone: a block freed
 * after the capture, or allocated before the capture that freed it (or by another graph). Such a
 * block is safe for another stream only once ordered after the stream it was freed on, which may
 * be destroyed by then: the allocator makes it usable after its next device synchronization. */
typedef struct graph_park_entry {
    void *ptr;
    size_t bytes;
    crmm_cuda_stream_t stream;
    uint64_t thread;
    bool reusable;
    bool eager;
} graph_park_entry;

typedef struct park_graph park_graph;

typedef struct graph_park {
    pthread_mutex_t lock;   /* guards what follows but holds */
    graph_holds holds;      /* records whose graph is gone (graph_hold.h) */
    park_graph *graphs;     /* every record not yet freed */
    ptr_map owned;          /* ptr_map_pair: address handed out during a capture -> its park_graph */
    ptr_map parked;         /* the address of every block parked in a record (a second free is refused) */
    uint64_t owned_count;   /* atomic copy of owned.count, read without the lock */
    uint64_t parked_bytes;  /* bytes parked in all records */
    crmm_fork_guard fork_guard; /* the lock's, once graph_park_add_fork_guard added it */
} graph_park;

void graph_park_init(graph_park *gp);

/* Take gp's lock before every fork() and release it after, in parent and child (fork_guards.h),
 * so that a child finds it free and the records whole. For an allocator whose own guard takes
 * its lock: add this one first, so that it is older and its lock taken after the allocator's,
 * the order in which their code takes them. graph_park_destroy removes it. Returns no error. */
void graph_park_add_fork_guard(graph_park *gp);

/* The record of the graph being captured (cap), made and tied to the graph at the capture's
 * first call. Errors: CRMM_ERROR_OUT_OF_MEMORY (malloc), CRMM_ERROR_CUDA naming `label` and the
 * capture when CUDA refuses the user object. */
crmm_status graph_park_graph(graph_park *gp, const capture_check_info *cap, const char *label, park_graph **out);

/* ptr was just handed out during g's capture: g owns it. CRMM_ERROR_OUT_OF_MEMORY when the map
 * cannot grow (the caller gives the block back and fails the allocation). */
crmm_status graph_park_own(graph_park *gp, park_graph *g, void *ptr, const char *label);

/* ptr (a live block of the allocator, just taken out of its live set) is being freed on `stream`,
 * during the capture of `capturing` (NULL: no capture). *parked says whether it is now held for a
 * graph (the allocator must not reuse it) or goes back to the allocator as usual. Outside any
 * capture, while no graph owns a block, it costs one atomic load. Errors (nothing parked, *parked
 * true: the allocator leaves the block alone; the caller adds its name to the message):
 * CRMM_ERROR_INVALID_ARGUMENT when ptr is parked already (a double free), CRMM_ERROR_OUT_OF_MEMORY
 * when the record cannot grow (the block stays out of use). */
crmm_status graph_park_free_slow(graph_park *gp, park_graph *capturing, void *ptr, size_t bytes,
                                 crmm_cuda_stream_t stream, bool *parked);
static inline crmm_status graph_park_free(graph_park *gp, park_graph *capturing, void *ptr, size_t bytes,
                                          crmm_cuda_stream_t stream, bool *parked)
{
    *parked = false;
    if (!capturing && __builtin_expect(__atomic_load_n(&gp->owned_count, __ATOMIC_RELAXED) == 0, 1))
        return CRMM_OK;
    return graph_park_free_slow(gp, capturing, ptr, bytes, stream, parked);
}

/* How many of a graph's newest parked blocks graph_park_reuse looks at. */
#define GRAPH_PARK_REUSE_WINDOW 256

/* During g's capture, a block for a request of `bytes` on `stream`: among the newest
 * GRAPH_PARK_REUSE_WINDOW blocks parked in g, the newest one freed on `stream`, owned by g or by
 * no graph, and freed with `bytes` exactly (any size with `any_size`, for an allocator whose
 * blocks are all alike). It leaves the record and is g's (owned) again: *ptr is set and true
 * returned (whatever size it was freed with, 0 included). False when none is found (or the map of
 * owned blocks cannot grow). */
bool graph_park_reuse(graph_park *gp, park_graph *g, crmm_cuda_stream_t stream, size_t bytes, bool any_size, void **ptr);

/* Whether any graph has been destroyed since the last collect (one atomic load). */
static inline bool graph_park_pending(graph_park *gp) { return graph_holds_pending(&gp->holds); }

/* The blocks of every graph destroyed since the last call, for the allocator to take back (the
 * graph's launches are over; an entry marked `eager` may still be used by work queued before its
 * free, on a stream that may be destroyed): a malloc'd array of *n entries (NULL, 0 when
 * none or when the array cannot be made: those records are retried at the next call). A block
 * another live graph owns too stays parked for that one (in the destroyed graph's record, retried
 * at the next call, when that one's record cannot grow). */
graph_park_entry *graph_park_collect_slow(graph_park *gp, size_t *n);
static inline graph_park_entry *graph_park_collect(graph_park *gp, size_t *n)
{
    *n = 0;
    return __builtin_expect(graph_park_pending(gp), 0) ? graph_park_collect_slow(gp, n) : NULL;
}

/* Bytes parked for graphs now. */
uint64_t graph_park_bytes(graph_park *gp);

/* The allocator's destroy: forget every record (those still tied to a graph are detached; their
 * destructor frees them later) and the map. */
void graph_park_destroy(graph_park *gp);

#endif
