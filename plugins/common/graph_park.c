/* graph_park.c — see graph_park.h. */
#include "build_config.h"
#include <stdlib.h>
#include <string.h>
#include <crmm/error.h>
#include "fork_guards.h"
#include "graph_park.h"

struct park_graph {
    graph_hold hold;           /* first: graph_hold.h frees the record through it */
    bool alive;                /* the graph (or an executable graph of it) may still run */
    graph_park_entry *parked;  /* blocks held for the graph */
    size_t nparked, capacity;
    size_t owned;              /* addresses in the map that point here */
    park_graph *next;          /* graph_park.graphs */
};

/* The owned map's value: the owning record's address, with EAGER_OWNED set when the block came
 * to the graph from outside it (allocated before its capture, or another graph's): it stays
 * eager when the capture frees it again. */
#define EAGER_OWNED ((uintptr_t)1)
static park_graph *owner_of(const ptr_map_pair *e) { return e ? (park_graph *)(e->value & ~EAGER_OWNED) : NULL; }

void graph_park_init(graph_park *gp)
{
    memset(gp, 0, sizeof *gp);
    pthread_mutex_init(&gp->lock, NULL);
    ptr_map_init(&gp->owned, sizeof(ptr_map_pair));
    ptr_map_init(&gp->parked, sizeof(uintptr_t));
}

void graph_park_add_fork_guard(graph_park *gp) { fork_guard_add_mutex(&gp->fork_guard, &gp->lock); }

static void unlink_graph(graph_park *gp, park_graph *g)
{
    for (park_graph **at = &gp->graphs; *at; at = &(*at)->next)
        if (*at == g) {
            *at = g->next;
            return;
        }
}

/* Under the lock: free g once its graph is gone and nothing refers to it. */
static void maybe_free(graph_park *gp, park_graph *g)
{
    if (!g->alive && !g->owned && !g->nparked) {
        unlink_graph(gp, g);
        free(g->parked);
        free(g);
    }
}

/* Under gp->lock: the live record of capture `id`, or NULL. */
static park_graph *find_record(graph_park *gp, unsigned long long id)
{
    for (park_graph *g = gp->graphs; g; g = g->next)
        if (g->alive && g->hold.capture_id == id)
            return g;
    return NULL;
}

crmm_status graph_park_graph(graph_park *gp, const capture_check_info *cap, const char *label, park_graph **out)
{
    pthread_mutex_lock(&gp->lock);
    park_graph *first = find_record(gp, cap->id);
    pthread_mutex_unlock(&gp->lock);
    if (first) {
        *out = first;
        return CRMM_OK;
    }
    park_graph *g = calloc(1, sizeof *g);
    if (!g)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: malloc failed (graph record)", label);
    g->alive = true;
    crmm_status st = graph_hold_tie(&g->hold, &gp->holds, cap, label);
    if (st != CRMM_OK)
        return st; /* g is freed */
    /* two threads of one capture may both get here: the first record in is the graph's, and the
     * other is detached (still tied to the graph, whose destructor frees it), so that the
     * capture's parked blocks are in one place */
    graph_holds_lock();
    pthread_mutex_lock(&gp->lock);
    if (!(first = find_record(gp, cap->id))) {
        g->next = gp->graphs;
        gp->graphs = g;
    }
    pthread_mutex_unlock(&gp->lock);
    if (first)
        graph_hold_detach(&g->hold);
    graph_holds_unlock();
    *out = first ? first : g;
    return CRMM_OK;
}

crmm_status graph_park_own(graph_park *gp, park_graph *g, void *ptr, const char *label)
{
    pthread_mutex_lock(&gp->lock);
    ptr_map_pair *e = ptr_map_insert(&gp->owned, (uintptr_t)ptr);
    if (e) {
        if (e->value) /* not possible for a live block; kept consistent all the same */
            owner_of(e)->owned--;
        e->value = (uintptr_t)g;
        g->owned++;
        __atomic_store_n(&gp->owned_count, gp->owned.count, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&gp->lock);
    if (!e)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: malloc failed (the map of a graph's blocks)", label);
    return CRMM_OK;
}

/* Under the lock: add the block to g's parked blocks (and its address to the parked set, where it
 * may be already when it moves from one record to another). False when malloc fails. */
static bool park(graph_park *gp, park_graph *g, const graph_park_entry *b)
{
    if (g->nparked == g->capacity) {
        size_t cap = g->capacity ? 2 * g->capacity : 16;
        graph_park_entry *v = realloc(g->parked, cap * sizeof *v);
        if (!v)
            return false;
        g->parked = v;
        g->capacity = cap;
    }
    if (!ptr_map_insert(&gp->parked, (uintptr_t)b->ptr))
        return false;
    g->parked[g->nparked++] = *b;
    gp->parked_bytes += b->bytes;
    return true;
}

crmm_status graph_park_free_slow(graph_park *gp, park_graph *capturing, void *ptr, size_t bytes,
                                 crmm_cuda_stream_t stream, bool *parked)
{
    *parked = false;
    graph_park_entry b = {ptr, bytes, stream, thread_serial_of_stream(stream), true, true};
    pthread_mutex_lock(&gp->lock);
    if (ptr_map_find(&gp->parked, (uintptr_t)ptr)) {
        pthread_mutex_unlock(&gp->lock);
        *parked = true; /* held already: the allocator must not take it back */
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "deallocate: %p is already free (double free?)", ptr);
    }
    ptr_map_pair *e = ptr_map_find(&gp->owned, (uintptr_t)ptr);
    park_graph *owner = owner_of(e);
    park_graph *to = capturing ? capturing : owner && owner->alive ? owner : NULL;
    b.eager = !capturing || owner != capturing || (e->value & EAGER_OWNED);
    if (!to && owner) { /* its graph is gone: the block is the allocator's again */
        ptr_map_erase(&gp->owned, e);
        __atomic_store_n(&gp->owned_count, gp->owned.count, __ATOMIC_RELAXED);
        owner->owned--;
        maybe_free(gp, owner);
    }
    bool ok = !to || park(gp, to, &b);
    pthread_mutex_unlock(&gp->lock);
    *parked = to != NULL;
    if (!ok)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "malloc failed holding %p for a CUDA graph (the block stays out of use)",
                              ptr);
    return CRMM_OK;
}

bool graph_park_reuse(graph_park *gp, park_graph *g, crmm_cuda_stream_t stream, size_t bytes, bool any_size, void **ptr)
{
    bool got = false;
    pthread_mutex_lock(&gp->lock);
    uint64_t thread = thread_serial_of_stream(stream);
    size_t stop = g->nparked > GRAPH_PARK_REUSE_WINDOW ? g->nparked - GRAPH_PARK_REUSE_WINDOW : 0;
    for (size_t i = g->nparked; i-- > stop;) {
        graph_park_entry *b = &g->parked[i];
        if (!b->reusable || b->stream != stream || b->thread != thread || (!any_size && b->bytes != bytes))
            continue;
        ptr_map_pair *e = ptr_map_find(&gp->owned, (uintptr_t)b->ptr);
        if (e && owner_of(e) != g)
            continue; /* another graph's: parked here, never reused */
        if (!e) { /* allocated before the capture, freed inside it: g's from now on, still eager */
            if (!(e = ptr_map_insert(&gp->owned, (uintptr_t)b->ptr)))
                break;
            e->value = (uintptr_t)g;
            g->owned++;
            __atomic_store_n(&gp->owned_count, gp->owned.count, __ATOMIC_RELAXED);
        }
        if (b->eager)
            e->value |= EAGER_OWNED;
        *ptr = b->ptr;
        got = true;
        gp->parked_bytes -= b->bytes;
        ptr_map_remove(&gp->parked, (uintptr_t)b->ptr, NULL);
        memmove(b, b + 1, (g->nparked - i - 1) * sizeof *b);
        g->nparked--;
        break;
    }
    pthread_mutex_unlock(&gp->lock);
    return got;
}

/* What release_block did with a block of a destroyed graph. */
enum release { RELEASED, HANDED_ON, KEPT };

/* Under the lock: b leaves g (its graph gone). RELEASED: it goes back to the allocator; HANDED_ON:
 * another live graph owns it and it is parked there now; KEPT: that graph's record cannot grow
 * (malloc), so it stays in g, which still holds it (the owner may write it until it goes). */
static enum release release_block(graph_park *gp, park_graph *g, const graph_park_entry *b)
{
    ptr_map_pair *e = ptr_map_find(&gp->owned, (uintptr_t)b->ptr);
    park_graph *owner = owner_of(e);
    graph_park_entry held = *b;
    held.reusable = false; /* freed for g's capture: nothing orders it before the owner's */
    if (owner && owner != g && owner->alive)
        return park(gp, owner, &held) ? HANDED_ON : KEPT;
    ptr_map_remove(&gp->parked, (uintptr_t)b->ptr, NULL);
    if (owner) {
        ptr_map_erase(&gp->owned, e);
        __atomic_store_n(&gp->owned_count, gp->owned.count, __ATOMIC_RELAXED);
        owner->owned--;
        if (owner != g)
            maybe_free(gp, owner);
    }
    return RELEASED;
}

graph_park_entry *graph_park_collect_slow(graph_park *gp, size_t *n)
{
    *n = 0;
    pthread_mutex_lock(&gp->lock);
    graph_hold *h = graph_holds_take(&gp->holds);
    size_t total = 0;
    for (graph_hold *x = h; x; x = x->next_released)
        total += ((park_graph *)x)->nparked;
    graph_park_entry *out = total ? malloc(total * sizeof *out) : NULL;
    while (h) {
        graph_hold *next = h->next_released;
        park_graph *g = (park_graph *)h;
        if (total && !out) { /* nowhere to put its blocks: they stay parked, the record is retried */
            graph_holds_put_back(&gp->holds, h);
            h = next;
            continue;
        }
        g->alive = false;
        size_t kept = 0;
        for (size_t i = 0; i < g->nparked; i++) {
            graph_park_entry b = g->parked[i];
            switch (release_block(gp, g, &b)) {
            case RELEASED:
                gp->parked_bytes -= b.bytes;
                out[(*n)++] = b;
                break;
            case HANDED_ON: /* counted in its new record's bytes */
                gp->parked_bytes -= b.bytes;
                break;
            case KEPT:
                g->parked[kept++] = b;
                break;
            }
        }
        g->nparked = kept;
        if (kept) /* held until the owner's record can take them, or the owner goes: retried */
            graph_holds_put_back(&gp->holds, h);
        else
            maybe_free(gp, g);
        h = next;
    }
    pthread_mutex_unlock(&gp->lock);
    if (out && !*n) {
        free(out);
        out = NULL;
    }
    return out;
}

uint64_t graph_park_bytes(graph_park *gp)
{
    pthread_mutex_lock(&gp->lock);
    uint64_t b = gp->parked_bytes;
    pthread_mutex_unlock(&gp->lock);
    return b;
}

void graph_park_destroy(graph_park *gp)
{
    if (gp->fork_guard.prepare)
        crmm_fork_guard_remove(&gp->fork_guard); /* before the lock: a guard's lock is not held here */
    graph_holds_lock();
    pthread_mutex_lock(&gp->lock);
    for (park_graph *g = gp->graphs, *next; g; g = next) {
        next = g->next;
        free(g->parked);
        g->parked = NULL;
        graph_hold_detach(&g->hold);
    }
    gp->graphs = NULL;
    gp->holds.released = NULL;
    ptr_map_destroy(&gp->owned);
    ptr_map_destroy(&gp->parked);
    pthread_mutex_unlock(&gp->lock);
    graph_holds_unlock();
    pthread_mutex_destroy(&gp->lock);
}
