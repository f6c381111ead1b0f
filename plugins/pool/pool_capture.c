/* pool_capture.c — the pool under CUDA stream capture (pool_capture.h): which graph owns a block,
 * parking, and handing a destroyed graph's blocks back.
 *
 * Each record is tied to its graph by graph_hold.h: once the graph and every executable graph
 * made from it are destroyed, the record lands on the pool's stack of released records, which
 * the pool collects under its lock where it may need the memory (a miss of allocate, a query):
 * the parked blocks then join the pool's ready state, where any stream may take them at once. */
#include "build_config.h"
#include <stdlib.h>
#include <crmm/cuda_support.h>
#include "pool_resource.h"

bool pool_capture_query(const pool_resource *p, crmm_cuda_stream_t stream, pool_capture *cap)
{
    return p->core.streams.real && capture_check_query(stream, cap);
}

static void unlink_record(pool_resource *p, pool_graph *g)
{
    for (pool_graph **at = &p->graphs; *at; at = &(*at)->next)
        if (*at == g) {
            *at = g->next;
            return;
        }
}

/* Under the lock: free g once its graph is gone and it neither owns nor holds a block. A record
 * whose blocks could not be handed back yet (return_parked) still holds them: it stays. */
static void free_if_unused(pool_resource *p, pool_graph *g)
{
    if (!g->alive && !g->owned && !g->parked) {
        unlink_record(p, g);
        free(g);
    }
}

/* Under the lock: g (not alive) lost a block it owned. */
static void disown(pool_resource *p, pool_graph *g)
{
    g->owned--;
    free_if_unused(p, g);
}

static void park(pool_graph *g, pool_block *b, crmm_cuda_stream_t stream)
{
    b->owner = NULL;
    b->u.free.prev = (pool_block *)(uintptr_t)stream;
    b->u.free.next = g->parked;
    g->parked = b;
    g->parked_bytes += b->size;
}

/* Under the lock, g's graph gone: each parked block goes to the live graph that owns it, or back
 * to the pool (ready: the device has finished with it). False when there is no memory for the
 * ready state: the blocks stay parked (held, never reused) and g must be retried. */
static bool return_parked(pool_resource *p, pool_graph *g)
{
    pool_stream *ready = pool_streams_ready_state(&p->core.streams);
    if (!ready) {
        crmm_clear_error();
        return false;
    }
    pool_block *b = g->parked;
    g->parked = NULL;
    g->parked_bytes = 0;
    while (b) {
        pool_block *next = b->u.free.next;
        pool_graph *o = (pool_graph *)b->graph;
        if (o && o != g && o->alive) {
            park(o, b, (crmm_cuda_stream_t)(uintptr_t)b->u.free.prev);
        } else {
            b->graph = 0;
            if (o && o != g)
                disown(p, o);
            else if (o == g)
                g->owned--;
            pool_counts_held(&p->core.counts, -(int64_t)b->size);
            pool_free_list_insert_merging(&ready->free, ready, b, &p->core.records);
        }
        b = next;
    }
    return true;
}

void pool_capture_collect_slow(pool_resource *p)
{
    graph_hold *h = graph_holds_take(&p->released);
    while (h) {
        graph_hold *next = h->next_released;
        pool_graph *g = (pool_graph *)h;
        g->alive = false;
        if (return_parked(p, g))
            free_if_unused(p, g);
        else
            graph_holds_put_back(&p->released, h); /* retried at the next collect */
        h = next;
    }
}

static pool_graph *find_record(pool_resource *p, unsigned long long id)
{
    for (pool_graph *g = p->graphs; g; g = g->next)
        if (g->alive && g->hold.capture_id == id)
            return g;
    return NULL;
}

crmm_status pool_capture_graph(pool_resource *p, const pool_capture *cap, pool_graph **out)
{
    char label[80];
    pool_lock(p);
    pool_graph *g = find_record(p, cap->id);
    pool_unlock(p);
    if (g) {
        *out = g;
        return CRMM_OK;
    }
    g = calloc(1, sizeof *g);
    if (!g)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: malloc failed (graph record)", pool_label(p, label, sizeof label));
    g->alive = true;
    crmm_status st = graph_hold_tie(&g->hold, &p->released, cap->id, cap->graph, pool_label(p, label, sizeof label));
    if (st != CRMM_OK)
        return st; /* g is freed */
    /* two threads of one capture may both get here and make a record each: both are tied to the
     * graph, so whichever holds a block keeps it until the graph is gone */
    pool_lock(p);
    g->next = p->graphs;
    p->graphs = g;
    pool_unlock(p);
    *out = g;
    return CRMM_OK;
}

pool_block *pool_capture_reuse(pool_graph *g, size_t size, crmm_cuda_stream_t stream)
{
    for (pool_block **at = &g->parked; *at; at = &(*at)->u.free.next) {
        pool_block *b = *at;
        if (b->size < size || (crmm_cuda_stream_t)(uintptr_t)b->u.free.prev != stream ||
            (b->graph && b->graph != (uintptr_t)g))
            continue; /* too small, another stream's, or held for another graph too */
        *at = b->u.free.next;
        g->parked_bytes -= b->size;
        return b;
    }
    return NULL;
}

bool pool_capture_free(pool_resource *p, pool_block *b, pool_graph *capturing, crmm_cuda_stream_t stream)
{
    pool_graph *o = (pool_graph *)b->graph;
    if (capturing) {
        park(capturing, b, stream);
        return true;
    }
    if (o->alive) {
        park(o, b, stream);
        return true;
    }
    b->graph = 0;
    disown(p, o);
    return false;
}

bool pool_capture_is_parked(const pool_resource *p, uintptr_t addr)
{
    for (const pool_graph *g = p->graphs; g; g = g->next)
        for (const pool_block *b = g->parked; b; b = b->u.free.next)
            if (b->addr == addr)
                return true;
    return false;
}

void pool_capture_detach_all(pool_resource *p)
{
    graph_holds_lock();
    pool_lock(p);
    for (pool_graph *g = p->graphs, *next; g; g = next) {
        next = g->next;
        graph_hold_detach(&g->hold);
    }
    p->graphs = NULL;
    p->released.released = NULL;
    pool_unlock(p);
    graph_holds_unlock();
}
