/* graph_hold.c — see graph_hold.h. */
#include "build_config.h"
#include <pthread.h>
#include <stdlib.h>
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include <crmm/error.h>
#include <crmm/fork_guard.h>
#include <crmm/graph_owner.h>
#include "graph_hold.h"

static pthread_mutex_t holds_mutex = PTHREAD_MUTEX_INITIALIZER;

/* Across fork the mutex is made anew in the child: a thread of the parent may hold it there
 * (one destroying an allocator, a driver thread running a destructor), and that thread does not
 * exist in the child. It is not taken before a fork: it comes before the allocators' own locks,
 * which their guards take in an order this guard could not keep. What it guards is pointers
 * stored whole. The guard comes and goes with the plugin that holds this file, so it is in place
 * before any use (adding it later could wait for the list's lock under an allocator's). */
static crmm_fork_guard holds_guard;
static void nothing(void *arg) { (void)arg; }
static void renew_mutex(void *arg)
{
    (void)arg;
    pthread_mutex_init(&holds_mutex, NULL);
}

__attribute__((constructor)) static void add_holds_guard(void)
{
    holds_guard = (crmm_fork_guard){.prepare = nothing, .parent = nothing, .child = renew_mutex};
    crmm_fork_guard_add(&holds_guard);
}

__attribute__((destructor)) static void remove_holds_guard(void) { crmm_fork_guard_remove(&holds_guard); }

void graph_holds_lock(void) { pthread_mutex_lock(&holds_mutex); }
void graph_holds_unlock(void) { pthread_mutex_unlock(&holds_mutex); }

void graph_holds_put_back(graph_holds *hs, graph_hold *h)
{
    graph_hold *head = __atomic_load_n(&hs->released, __ATOMIC_RELAXED);
    do
        h->next_released = head;
    while (!__atomic_compare_exchange_n(&hs->released, &head, h, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

graph_hold *graph_holds_take(graph_holds *hs) { return __atomic_exchange_n(&hs->released, NULL, __ATOMIC_ACQUIRE); }

/* The user object's destructor, on a driver thread (or the graph's owner's release, on the thread
 * of its last crmm_graph_owner_release): note the record on its allocator's stack (never waiting
 * for the allocator's lock), or free it when the allocator is gone. */
static void CUDART_CB graph_released(void *arg)
{
    graph_hold *h = arg;
    graph_holds_lock();
    graph_holds *hs = h->holds;
    if (!hs) {
        free(h);
    } else {
        __atomic_store_n(&h->released, 1, __ATOMIC_RELAXED);
        graph_holds_put_back(hs, h);
    }
    graph_holds_unlock();
}

crmm_status graph_hold_tie(graph_hold *h, graph_holds *hs, const capture_check_info *cap, const char *label)
{
    h->holds = hs;
    h->capture_id = cap->id;
    h->next_released = NULL;
    h->released = 0;
    if (crmm_graph_owner_adopt(cap->stream, cap->id, graph_released, h))
        return CRMM_OK; /* its owner says when the graph is gone: no user object on the graph */
    cudaUserObject_t obj = NULL;
    cudaError_t e = cudaUserObjectCreate(&obj, h, graph_released, 1, cudaUserObjectNoDestructorSync);
    if (e == cudaSuccess)
        e = cudaGraphRetainUserObject((cudaGraph_t)cap->graph, obj, 1, cudaGraphUserObjectMove);
    if (e == cudaSuccess)
        return CRMM_OK;
    cudaGetLastError();
    if (obj) {
        h->holds = NULL; /* the destructor, run by this release, only frees it */
        cudaUserObjectRelease(obj, 1);
    } else {
        free(h);
    }
    crmm_cuda_status(e, "cudaGraphRetainUserObject");
    return crmm_error_add_context("%s: cannot tie its memory to the CUDA graph being captured (capture %llu)", label,
                                  cap->id);
}

void graph_hold_detach(graph_hold *h)
{
    if (__atomic_load_n(&h->released, __ATOMIC_RELAXED))
        free(h);
    else
        h->holds = NULL; /* its destructor frees it */
}
