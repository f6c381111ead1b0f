/* graph_hold.h — tying an allocator's record of one CUDA graph to the graph's lifetime
 * (docs/cuda-graphs.md): the one implementation behind the pool's and graph_park's records.
 *
 * At the first call of a capture the allocator makes a record (its own struct, a graph_hold as
 * its first member, allocated with malloc) and ties it to the graph being built: a CUDA user
 * object whose destructor is the hold's, with its one reference moved into the graph
 * (cudaGraphRetainUserObject, cudaGraphUserObjectMove). CUDA copies the reference into every
 * executable graph instantiated from it and drops each when that graph is destroyed and its
 * launches have completed, so the destructor runs once no replay can touch the graph's memory.
 * It runs on a driver thread and must neither call CUDA nor wait for the allocator's lock (its
 * holder may be waiting for the device): it only pushes the record onto its graph_holds' stack of
 * released records (lock-free), which the allocator takes under its own lock where it may need
 * the memory.
 *
 * A capture that a framework owns (crmm/graph_owner.h: its owner claims the capture's stream) gets
 * no user object: the owner's last release calls the same destructor once the graphs are gone.
 *
 * An allocator destroyed before a graph it holds memory for detaches its records (under
 * graph_holds_lock): a record whose graph still lives then has no graph_holds, and its destructor
 * frees it alone. */
#ifndef CRMM_PLUGINS_GRAPH_HOLD_H
#define CRMM_PLUGINS_GRAPH_HOLD_H

#include <stdbool.h>
#include <crmm/resource.h>
#include "capture_check.h"

typedef struct graph_hold graph_hold;

/* An allocator's records whose graph is gone (the destructor ran), not yet taken. */
typedef struct graph_holds {
    graph_hold *released; /* atomic stack, linked through next_released */
} graph_holds;

struct graph_hold {
    graph_holds *holds;           /* NULL once detached: the destructor then frees the record */
    unsigned long long capture_id; /* the capture that made it (cudaStreamGetCaptureInfo's id) */
    graph_hold *next_released;
    int released;                 /* atomic: the destructor ran */
};

/* Tie the record h (first member of a malloc'd struct, the rest set by the caller) to the graph
 * of capture `cap`: to the framework that owns that capture when one claims it
 * (crmm/graph_owner.h), else to the cudaGraph_t being built, by a user object. On success h is
 * pushed onto hs's released stack once the graph can no longer run. On failure h is freed and
 * the error is CRMM_ERROR_CUDA naming `label` and the capture (CUDA refused the user object). */
crmm_status graph_hold_tie(graph_hold *h, graph_holds *hs, const capture_check_info *cap, const char *label);

/* Whether hs has released records to take (one atomic load). */
static inline bool graph_holds_pending(graph_holds *hs)
{
    return __atomic_load_n(&hs->released, __ATOMIC_ACQUIRE) != NULL;
}

/* Take every released record (a list through next_released), or NULL. */
graph_hold *graph_holds_take(graph_holds *hs);

/* Put a taken record back on the stack, to be taken again later (its memory could not be handed
 * back now). */
void graph_holds_put_back(graph_holds *hs, graph_hold *h);

/* The process-wide mutex under which records are detached: take it around graph_hold_detach.
 * Lock order: it, then the allocator's lock. */
void graph_holds_lock(void);
void graph_holds_unlock(void);

/* Under graph_holds_lock, at the allocator's destroy: forget h. Frees it when its graph is gone;
 * otherwise detaches it (its destructor frees it later). */
void graph_hold_detach(graph_hold *h);

#endif
