/* pool_capture.c — the pool under CUDA stream capture (pool_capture.h): which graph owns a block,
 * parking, and handing a destroyed graph's blocks back.
 *
 * Each record is tied to its graph by graph_hold.h: once the graph and every executable graph
 * made from it are destroyed, the record lands on the pool's stack of released records, which
 * the pool collects under its lock where it may need the memory (a miss of allocate, a query):
 * the parked blocks then go back to the pool (return_parked says where). */
#include "build_config.h"
#include <stdlib.h>
#include <crmm/cuda_support.h>
#include "../common/thread_serial.h"
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

static void free_streams(pool_graph *g)
{
    while (g->streams) {
        pool_graph_stream *next = g->streams->next;
        free(g->streams);
        g->streams = next;
    }
}

/* Under the lock: free g once its graph is gone and it neither owns nor holds a block. A record
 * whose blocks could not be handed back yet (return_parked) still holds them: it stays. */
static void free_if_unused(pool_resource *p, pool_graph *g)
{
    if (!g->alive && !g->owned && !g->foreign) {
        unlink_record(p, g);
        free_streams(g);
        free(g);
    }
}

/* Under the lock: g (not alive) lost a block it owned. */
static void disown(pool_resource *p, pool_graph *g)
{
    g->owned--;
    free_if_unused(p, g);
}

/* In a foreign block's u.free.prev for a stream crmm_pool_forget_stream waited for: the block
 * goes back to the ready state (no real handle is all ones). */
#define POOL_STREAM_WAITED ((crmm_cuda_stream_t)~(uintptr_t)0)

static void park_foreign(pool_graph *g, pool_block *b, crmm_cuda_stream_t stream)
{
    b->owner = NULL;
    b->u.free.prev = (pool_block *)(uintptr_t)stream;
    b->u.free.next = g->foreign;
    g->foreign = b;
    g->parked_bytes += b->size;
}

/* g's record of `stream` as the calling thread names it, for blocks freed `after` its capture or
 * in it, made when `make` and none exists, its lists fitting as the pool's (NULL when malloc
 * fails). */
static pool_graph_stream *graph_stream(const pool_resource *p, pool_graph *g, crmm_cuda_stream_t stream, bool after,
                                       bool make)
{
    uint64_t thread = thread_serial_of_stream(stream);
    for (pool_graph_stream *gs = g->streams; gs; gs = gs->next)
        if (gs->handle == stream && gs->thread == thread && gs->after == after)
            return gs;
    pool_graph_stream *gs = make ? calloc(1, sizeof *gs) : NULL;
    if (gs) {
        gs->handle = stream;
        gs->thread = thread;
        gs->after = after;
        gs->eager = after;
        gs->area[0].fit = gs->area[1].fit = p->core.streams.fit;
        gs->next = g->streams;
        g->streams = gs;
    }
    return gs;
}

/* The list of gs that holds blocks tagged `tag`. */
static pool_free_list *area_of(pool_graph_stream *gs, uintptr_t tag)
{
    return &gs->area[(tag & POOL_PARKED_SMALL) ? 1 : 0];
}

/* Under the lock: join parked block `lower` and its upper neighbour, both of g; `listed`, the one
 * of them in fl, leaves it, and the upper one's record goes back to the spares. */
static void join_parked(pool_resource *p, pool_graph *g, pool_free_list *fl, pool_block *listed, pool_block *lower)
{
    pool_free_list_remove(fl, listed);
    lower->phys_next->graph = 0;
    pool_block_absorb_next(&p->core.records, lower);
    g->owned--;
}

/* Under the lock: park b, freed on `stream` by the calling thread (`reusable`; else freed
 * earlier, by a thread not known now), in g, inside a capture or `after` g's. A block g owns (or
 * nobody does) freed by the calling thread joins g's parked blocks of that stream, time and area
 * (small ones when `small`), merged with its parked neighbours there; b's record may go back to
 * the spares then. Any other is held, not reused. */
static void park_in(pool_resource *p, pool_graph *g, pool_block *b, crmm_cuda_stream_t stream, bool reusable,
                    bool after, bool small)
{
    pool_graph *o = (pool_graph *)b->graph;
    if (o && o != g && !o->alive) { /* its owner is gone: nobody owns it now */
        b->graph = 0;
        disown(p, o);
        o = NULL;
    }
    pool_graph_stream *gs = reusable && (o == NULL || o == g) ? graph_stream(p, g, stream, after, true) : NULL;
    if (!gs) {
        park_foreign(g, b, stream);
        return;
    }
    if (!o) {
        g->owned++;
        gs->eager = true; /* from before the capture, or a destroyed graph's: eager work used it */
    }
    g->parked_bytes += b->size;
    uintptr_t tag = (uintptr_t)gs | POOL_PARKED | (small ? POOL_PARKED_SMALL : 0);
    pool_free_list *fl = area_of(gs, tag);
    b->owner = NULL;
    b->graph = tag;
    if (b->phys_next && b->phys_next->graph == tag)
        join_parked(p, g, fl, b->phys_next, b);
    if (b->phys_prev && b->phys_prev->graph == tag) {
        b = b->phys_prev;
        join_parked(p, g, fl, b, b);
    }
    pool_free_list_insert(fl, b);
}

/* park_in, in the area of b's own size. */
static void park(pool_resource *p, pool_graph *g, pool_block *b, crmm_cuda_stream_t stream, bool reusable, bool after)
{
    park_in(p, g, b, stream, reusable, after, b->size <= POOL_CAPTURE_SMALL);
}

pool_block *pool_capture_reuse(pool_resource *p, pool_graph *g, size_t size, crmm_cuda_stream_t stream)
{
    pool_graph_stream *gs = graph_stream(p, g, stream, false, false);
    if (!gs)
        return NULL;
    pool_free_list *fl = &gs->area[size <= POOL_CAPTURE_SMALL ? 1 : 0];
    pool_block *b = pool_free_list_fit(fl, size);
    if (!b)
        return NULL;
    pool_free_list_remove(fl, b);
    if (b->size > size) { /* the rest stays parked; its upper neighbour is not (it would have merged) */
        pool_block *rest = pool_block_split(&p->core.records, b, b->addr + size);
        rest->graph = b->graph;
        g->owned++;
        pool_free_list_insert(fl, rest);
    }
    b->graph = (uintptr_t)g;
    g->parked_bytes -= b->size;
    return b;
}

pool_block *pool_capture_take_pages(pool_resource *p, pool_stream *s, size_t want)
{
    pool_capture_collect(p); /* destroyed graphs' pages are free pages this graph may take */
    size_t page = p->growth.expandable ? p->growth.vmm.page : POOL_CAPTURE_SMALL_SEGMENT;
    if (want > SIZE_MAX - page)
        return NULL;
    size_t need = (want + page - 1) & ~(page - 1);
    pool_stream *ready = p->core.streams.ready, *from = s;
    uintptr_t at;
    pool_block *b = pool_free_list_find_aligned(&s->free, need, page, &at);
    if (!b && ready && (b = pool_free_list_find_aligned(&ready->free, need, page, &at)))
        from = ready;
    if (!b)
        return NULL;
    pool_free_list_remove(&from->free, b);
    if (at > b->addr) { /* the part below the run stays free where it was */
        pool_block *run = pool_block_split(&p->core.records, b, at);
        pool_free_list_insert(&from->free, b);
        b = run;
    }
    if (b->size > need) /* and the part above it */
        pool_free_list_insert(&from->free, pool_block_split(&p->core.records, b, b->addr + need));
    b->owner = NULL;
    return b;
}

void pool_capture_keep_rest(pool_resource *p, pool_graph *g, pool_block *b, size_t size, crmm_cuda_stream_t stream)
{
    if (b->size <= size)
        return;
    pool_block *rest = pool_block_split(&p->core.records, b, b->addr + size);
    pool_counts_held(&p->core.counts, (int64_t)rest->size);
    park_in(p, g, rest, stream, true, false, size <= POOL_CAPTURE_SMALL);
}

/* Under the lock: free block b goes to state `to`, which is not the ready state; its free
 * neighbours in the ready state go with it (any stream's state may hold what the ready state
 * holds), so that the pages stay one run, as they would have in the ready state: they are mostly
 * the same graph's blocks, just returned, and a later capture on that stream takes whole runs. */
static void insert_with_ready_neighbours(pool_resource *p, pool_stream *ready, pool_stream *to, pool_block *b)
{
    pool_block *beside[2] = {b->phys_prev, b->phys_next};
    for (int i = 0; i < 2; i++)
        if (beside[i] && beside[i]->owner == ready) {
            pool_free_list_remove(&ready->free, beside[i]);
            pool_free_list_insert_merging(&to->free, to, beside[i], &p->core.records);
        }
    pool_free_list_insert_merging(&to->free, to, b, &p->core.records);
}

/* Under the lock, g's graph gone: b, parked in g, goes to the live graph that owns it, or to
 * state `to` (the ready state, or a stream's). */
static void return_block(pool_resource *p, pool_graph *g, pool_stream *ready, pool_stream *to, pool_block *b)
{
    g->parked_bytes -= b->size;
    pool_graph *o = (b->graph & POOL_PARKED) ? g : (pool_graph *)b->graph;
    if (o && o != g && o->alive) {
        park(p, o, b, (crmm_cuda_stream_t)(uintptr_t)b->u.free.prev, false, false);
        return;
    }
    b->graph = 0;
    if (o && o != g)
        disown(p, o);
    else if (o == g)
        g->owned--;
    pool_counts_held(&p->core.counts, -(int64_t)b->size);
    if (to == ready)
        pool_free_list_insert_merging(&to->free, to, b, &p->core.records);
    else
        insert_with_ready_neighbours(p, ready, to, b);
}

/* The state of stream `handle` as the thread `thread` (its serial for the per-thread default
 * stream, else 0) freed on it, made when first seen (NULL when malloc fails, the error cleared). */
static pool_stream *freeing_state(pool_resource *p, crmm_cuda_stream_t handle, uint64_t thread)
{
    uint64_t calling;
    pool_streams_key(&p->core.streams, &handle, &calling); /* the handle as the states name it */
    pool_stream *s = pool_streams_find_key(&p->core.streams, handle, thread);
    if (!s)
        crmm_clear_error();
    return s;
}

/* The state of the stream gs's blocks were freed on. */
static pool_stream *state_of(pool_resource *p, const pool_graph_stream *gs)
{
    return freeing_state(p, gs->handle, gs->thread);
}

/* The state a foreign block goes back to: that of the stream it was freed on (it was live before
 * the capture that freed it, or no record of that stream could be made, so eager work queued
 * there may use it), made when first seen (NULL when malloc fails, the error cleared); the ready
 * state for a stream crmm_pool_forget_stream waited for, and for the per-thread default stream,
 * whose freeing thread a foreign block does not keep. */
static pool_stream *foreign_state(pool_resource *p, pool_stream *ready, const pool_block *b)
{
    crmm_cuda_stream_t handle = (crmm_cuda_stream_t)(uintptr_t)b->u.free.prev;
    if (handle == POOL_STREAM_WAITED || handle == CRMM_CUDA_STREAM_PER_THREAD)
        return ready;
    return freeing_state(p, handle, 0);
}

/* Under the lock, g's graph gone: every block parked in g goes to the live graph that owns it, or
 * back to the pool: to the ready state, where any stream takes it at once, when only the graph
 * used it (its launches are over), else (its record is `eager`, or it is foreign) to the state of
 * the stream it was freed on, whose work may still use it: another stream gets it only once
 * ordered after that work, as any block freed on that stream. False when there is no memory for
 * a state: the blocks stay parked (held, never reused) and g must be retried. */
static bool return_parked(pool_resource *p, pool_graph *g)
{
    pool_stream *ready = pool_streams_ready_state(&p->core.streams);
    bool made = ready != NULL;
    if (!made)
        crmm_clear_error();
    for (pool_graph_stream *gs = g->streams; gs && made; gs = gs->next)
        made = !gs->eager || (!pool_free_list_any(&gs->area[0]) && !pool_free_list_any(&gs->area[1])) ||
               state_of(p, gs);
    for (pool_block *b = g->foreign; b && made; b = b->u.free.next)
        made = foreign_state(p, ready, b) != NULL;
    if (!made)
        return false;
    pool_block *b = g->foreign;
    g->foreign = NULL;
    while (b) {
        pool_block *next = b->u.free.next;
        return_block(p, g, ready, foreign_state(p, ready, b), b); /* made above: found now */
        b = next;
    }
    /* the capture's own blocks first, so that those eager work used take their free neighbours */
    for (int eager = 0; eager < 2; eager++)
        for (pool_graph_stream *gs = g->streams; gs; gs = gs->next) {
            if (gs->eager != eager)
                continue;
            pool_stream *to = eager ? state_of(p, gs) : ready; /* made above: found now */
            for (int a = 0; a < 2; a++)
                while ((b = pool_free_list_any(&gs->area[a]))) {
                    pool_free_list_remove(&gs->area[a], b);
                    return_block(p, g, ready, to ? to : ready, b);
                }
        }
    g->parked_bytes = 0;
    return true;
}

void pool_capture_forget_stream(pool_resource *p, crmm_cuda_stream_t stream)
{
    uint64_t thread = thread_serial_of_stream(stream);
    for (pool_graph *g = p->graphs; g; g = g->next) {
        for (pool_graph_stream *gs = g->streams; gs; gs = gs->next)
            if (gs->handle == stream && gs->thread == thread) {
                /* detached: a later stream given t's handle gets a record of its own */
                gs->handle = POOL_STREAM_WAITED;
                gs->eager = false;
            }
        for (pool_block *b = g->foreign; b; b = b->u.free.next)
            if ((crmm_cuda_stream_t)(uintptr_t)b->u.free.prev == stream)
                b->u.free.prev = (pool_block *)(uintptr_t)POOL_STREAM_WAITED;
    }
}

void pool_capture_collect_slow(pool_resource *p)
{
    graph_hold *h = graph_holds_take(&p->released);
    while (h) {
        graph_hold *next = h->next_released;
        pool_graph *g = (pool_graph *)h;
        if (return_parked(p, g)) {
            g->alive = false; /* its live blocks come back as they are freed */
            if (p->plan) /* and the planned blocks freed under its capture at the next trim */
                pool_plan_graph_gone(p->plan, g);
            free_if_unused(p, g);
        } else {
            /* retried at the next collect; alive till then, so that a free of its last block
             * parks that block here instead of freeing the record while it waits */
            graph_holds_put_back(&p->released, h);
        }
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
    crmm_status st = graph_hold_tie(&g->hold, &p->released, cap, pool_label(p, label, sizeof label));
    if (st != CRMM_OK)
        return st; /* g is freed */
    /* two threads of one capture may both get here: the first record in is the graph's, and the
     * other is detached (still tied to the graph, whose destructor frees it), so that the
     * capture's parked blocks are in one place */
    graph_holds_lock();
    pool_lock(p);
    pool_graph *first = find_record(p, cap->id);
    if (!first) {
        g->next = p->graphs;
        p->graphs = g;
    }
    pool_unlock(p);
    if (first)
        graph_hold_detach(&g->hold);
    graph_holds_unlock();
    *out = first ? first : g;
    return CRMM_OK;
}

bool pool_capture_free(pool_resource *p, pool_block *b, pool_graph *capturing, crmm_cuda_stream_t stream)
{
    pool_graph *o = (pool_graph *)b->graph;
    if (capturing) {
        /* with graph_pool = private a block allocated before the capture (outside any, or by a
         * graph destroyed since, whose other pages went back to the pool) shares its pages with
         * blocks outside the graph: held with those freed after a capture, not reused */
        park(p, capturing, b, stream, true, p->graph_private && o != capturing && !(o && o->alive));
        return true;
    }
    if (o->alive) {
        park(p, o, b, stream, true, true);
        return true;
    }
    b->graph = 0;
    disown(p, o);
    return false;
}

/* Whether free list fl holds the block at addr. */
static bool list_holds(const pool_free_list *fl, uintptr_t addr)
{
    for (uint64_t fmap = fl->fl_bitmap; fmap; fmap &= fmap - 1) {
        unsigned f = (unsigned)__builtin_ctzll(fmap);
        for (uint32_t smap = fl->sl_bitmap[f]; smap; smap &= smap - 1)
            for (const pool_block *b = fl->heads[f][__builtin_ctz(smap)]; b; b = b->u.free.next)
                if (b->addr == addr)
                    return true;
    }
    return false;
}

bool pool_capture_is_parked(const pool_resource *p, uintptr_t addr)
{
    for (const pool_graph *g = p->graphs; g; g = g->next) {
        for (const pool_block *b = g->foreign; b; b = b->u.free.next)
            if (b->addr == addr)
                return true;
        for (const pool_graph_stream *gs = g->streams; gs; gs = gs->next)
            if (list_holds(&gs->area[0], addr) || list_holds(&gs->area[1], addr))
                return true;
    }
    return false;
}

void pool_capture_detach_all(pool_resource *p)
{
    graph_holds_lock();
    pool_lock(p);
    for (pool_graph *g = p->graphs, *next; g; g = next) {
        next = g->next;
        free_streams(g); /* their blocks go back with the pool's memory */
        graph_hold_detach(&g->hold);
    }
    p->graphs = NULL;
    p->released.released = NULL;
    pool_unlock(p);
    graph_holds_unlock();
}
