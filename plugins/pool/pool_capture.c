/* pool_capture.c — the pool under CUDA stream capture (pool_capture.h): which graph owns a block,
 * parking, and the user object that hands a destroyed graph's blocks back.
 *
 * Tying a record to its graph: at the first call of a capture the pool creates a CUDA user object
 * whose destructor is graph_released and moves its one reference into the graph being built
 * (cudaGraphRetainUserObject with cudaGraphUserObjectMove on the graph that
 * cudaStreamGetCaptureInfo returns). CUDA copies the reference into every executable graph
 * instantiated from it and drops each one when that graph is destroyed and its launches have
 * completed, so the destructor runs once no replay can touch the graph's memory any more. It runs
 * on a thread of the driver and must not call CUDA; it must not wait for the pool's lock either,
 * since a thread holding it may be waiting for the device. So it only pushes the record onto the
 * pool's stack of released records (lock-free), and the pool collects them under its lock where it
 * may need the memory (a miss of allocate, a query): the parked blocks then join the pool's ready
 * state, where any stream may take them at once.
 *
 * graphs_mutex keeps a record and its pool apart when the pool is destroyed before the graph:
 * destroy sets the record's pool to NULL under it, and the destructor then frees the record
 * alone. Lock order: graphs_mutex, then the pool's lock (destroy only). */
#include "config.h"
#include <pthread.h>
#include <stdlib.h>
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include "pool_resource.h"

static pthread_mutex_t graphs_mutex = PTHREAD_MUTEX_INITIALIZER;

bool pool_capture_query(const pool_resource *p, crmm_cuda_stream_t stream, pool_capture *cap)
{
    if (p->graphs_mode == POOL_GRAPHS_OFF || (p->graphs_mode == POOL_GRAPHS_AUTO && !crmm_graph_capture_enabled()) ||
        !p->streams.real || stream == NULL || stream == (crmm_cuda_stream_t)cudaStreamLegacy || crmm_process_exiting())
        return false;
    /* the cheaper query on every call; the capture's id and graph only when there is one */
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing((cudaStream_t)stream, &status) != cudaSuccess) {
        cudaGetLastError(); /* a stream CUDA does not know is not capturing; the pool's caller finds out */
        return false;
    }
    if (__builtin_expect(status != cudaStreamCaptureStatusActive, 1))
        return false;
    cudaGraph_t graph = NULL;
    if (cudaStreamGetCaptureInfo((cudaStream_t)stream, &status, &cap->id, &graph, NULL, NULL, NULL) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    cap->graph = graph;
    return status == cudaStreamCaptureStatusActive;
}

void pool_capture_relax_mode(int *saved)
{
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) {
        cudaGetLastError();
        mode = (enum cudaStreamCaptureMode)-1;
    }
    *saved = (int)mode;
}

void pool_capture_restore_mode(int saved)
{
    if (saved < 0)
        return;
    enum cudaStreamCaptureMode mode = (enum cudaStreamCaptureMode)saved;
    if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess)
        cudaGetLastError();
}

static void unlink_record(pool_resource *p, pool_graph *g)
{
    for (pool_graph **at = &p->graphs; *at; at = &(*at)->next)
        if (*at == g) {
            *at = g->next;
            return;
        }
}

/* Under the lock: g (not alive) lost a block it owned; free it when it owned the last one. */
static void disown(pool_resource *p, pool_graph *g)
{
    if (--g->owned == 0 && !g->alive) {
        unlink_record(p, g);
        free(g);
    }
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
 * to the pool (ready: the device has finished with it). */
static void return_parked(pool_resource *p, pool_graph *g)
{
    pool_stream *ready = pool_streams_ready_state(&p->streams);
    if (!ready) {
        crmm_clear_error();
        return; /* no memory for the ready state: the blocks stay parked (held, never reused) */
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
            p->live_bytes -= b->size;
            pool_free_list_insert_merging(&ready->free, ready, b, &p->records);
        }
        b = next;
    }
}

void pool_capture_collect_slow(pool_resource *p)
{
    pool_graph *g = __atomic_exchange_n(&p->released, NULL, __ATOMIC_ACQUIRE);
    while (g) {
        pool_graph *next = g->next_released;
        g->alive = false;
        return_parked(p, g);
        if (!g->owned && !g->parked) {
            unlink_record(p, g);
            free(g);
        }
        g = next;
    }
}

/* The user object's destructor, on a driver thread: note the record on the pool's stack. It
 * never waits for the pool's lock, whose holder may be waiting for the device. */
static void CUDART_CB graph_released(void *arg)
{
    pool_graph *g = arg;
    pthread_mutex_lock(&graphs_mutex);
    pool_resource *p = g->pool;
    if (!p) {
        free(g);
    } else {
        __atomic_store_n(&g->released, 1, __ATOMIC_RELAXED);
        pool_graph *head = __atomic_load_n(&p->released, __ATOMIC_RELAXED);
        do
            g->next_released = head;
        while (!__atomic_compare_exchange_n(&p->released, &head, g, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
    }
    pthread_mutex_unlock(&graphs_mutex);
}

static pool_graph *find_record(pool_resource *p, unsigned long long id)
{
    for (pool_graph *g = p->graphs; g; g = g->next)
        if (g->alive && g->capture_id == id)
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
    *g = (pool_graph){.pool = p, .capture_id = cap->id, .alive = true};
    cudaUserObject_t obj = NULL;
    cudaError_t e = cudaUserObjectCreate(&obj, g, graph_released, 1, cudaUserObjectNoDestructorSync);
    if (e == cudaSuccess)
        e = cudaGraphRetainUserObject((cudaGraph_t)cap->graph, obj, 1, cudaGraphUserObjectMove);
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (obj) {
            g->pool = NULL; /* the destructor, run by this release, only frees it */
            cudaUserObjectRelease(obj, 1);
        } else {
            free(g);
        }
        crmm_cuda_status(e, "cudaGraphRetainUserObject");
        return crmm_error_add_context("%s: cannot tie its memory to the CUDA graph being captured (capture %llu)",
                                      pool_label(p, label, sizeof label), cap->id);
    }
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
    pthread_mutex_lock(&graphs_mutex);
    pool_lock(p);
    for (pool_graph *g = p->graphs, *next; g; g = next) {
        next = g->next;
        if (g->alive && !__atomic_load_n(&g->released, __ATOMIC_RELAXED))
            g->pool = NULL; /* its destructor frees it */
        else
            free(g);
    }
    p->graphs = NULL;
    p->released = NULL;
    pool_unlock(p);
    pthread_mutex_unlock(&graphs_mutex);
}
