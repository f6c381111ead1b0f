/* graph_owner.c — the owners of CUDA graphs that a framework tells crmm about (crmm/graph_owner.h).
 *
 * One mutex guards the owners (a list: a process has a few graph pools) and the owners released
 * while their device could not be synchronized. Allocators ask at the first call of each capture
 * (crmm_graph_owner_adopt); while no capture of any owner is open that costs one atomic load. */
#include "build_config.h"
#include <pthread.h>
#include <stdlib.h>
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include <crmm/error.h>
#include <crmm/graph_owner.h>
#include <crmm/log.h>
#include "internal.h"

typedef struct adopted {
    void (*released)(void *arg);
    void *arg;
} adopted;

typedef struct owner {
    uint64_t id;
    unsigned refs;                     /* begins not yet released */
    bool open;                         /* between begin and end */
    crmm_graph_owner_claims_fn claims; /* while open */
    void *ctx;
    adopted *adopted; /* what its captures took, to hand back at the last release */
    size_t count, capacity;
    int device; /* once released: the device to synchronize first */
    struct owner *next;
} owner;

static pthread_mutex_t owners_lock = PTHREAD_MUTEX_INITIALIZER;
static owner *owners;         /* referenced */
static owner *unsynchronized; /* released, what they took not handed back yet */
static unsigned open_count;   /* atomic: captures open; adopt looks no further while 0 */
static uint64_t adopted_total; /* atomic */

static crmm_status hand_back_released(void);

static owner **find(uint64_t id)
{
    owner **at = &owners;
    while (*at && (*at)->id != id)
        at = &(*at)->next;
    return at;
}

crmm_status crmm_graph_owner_begin(uint64_t id, crmm_graph_owner_claims_fn claims, void *ctx)
{
    if (id == 0 || !claims)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "crmm_graph_owner_begin: %s", id == 0 ? "owner 0" : "claims is NULL");
    pthread_mutex_lock(&owners_lock);
    owner *o = *find(id);
    if (o && o->open) {
        pthread_mutex_unlock(&owners_lock);
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                              "crmm_graph_owner_begin: a capture of owner %llu is open already (end it first)",
                              (unsigned long long)id);
    }
    if (!o) {
        if (!(o = calloc(1, sizeof *o))) {
            pthread_mutex_unlock(&owners_lock);
            return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "crmm_graph_owner_begin: malloc failed");
        }
        o->id = id;
        o->next = owners;
        owners = o;
    }
    o->refs++;
    o->open = true;
    o->claims = claims;
    o->ctx = ctx;
    __atomic_add_fetch(&open_count, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&owners_lock);
    return CRMM_OK;
}

crmm_status crmm_graph_owner_end(uint64_t id)
{
    pthread_mutex_lock(&owners_lock);
    owner *o = *find(id);
    if (!o || !o->open) {
        pthread_mutex_unlock(&owners_lock);
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "crmm_graph_owner_end: no capture of owner %llu is open",
                              (unsigned long long)id);
    }
    o->open = false;
    o->claims = NULL;
    o->ctx = NULL;
    __atomic_sub_fetch(&open_count, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&owners_lock);
    crmm_kept_error kept; /* what waited for the captures to end: a failure is logged, not this call's */
    crmm_keep_error(&kept, crmm_last_status());
    if (hand_back_released() != CRMM_OK)
        crmm_restore_error(&kept);
    return CRMM_OK;
}

bool crmm_graph_owner_adopt(crmm_cuda_stream_t stream, void (*released)(void *arg), void *arg)
{
    if (__atomic_load_n(&open_count, __ATOMIC_ACQUIRE) == 0)
        return false;
    bool taken = false;
    pthread_mutex_lock(&owners_lock);
    for (owner *o = owners; o; o = o->next) {
        if (!o->open || !o->claims(o->ctx, stream))
            continue;
        if (o->count == o->capacity) {
            size_t capacity = o->capacity ? 2 * o->capacity : 8;
            adopted *grown = realloc(o->adopted, capacity * sizeof *grown);
            if (!grown)
                break; /* the allocator ties a user object instead */
            o->adopted = grown;
            o->capacity = capacity;
        }
        o->adopted[o->count++] = (adopted){released, arg};
        __atomic_add_fetch(&adopted_total, 1, __ATOMIC_RELAXED);
        taken = true;
        break;
    }
    pthread_mutex_unlock(&owners_lock);
    return taken;
}

uint64_t crmm_graph_owner_adopted_total(void) { return __atomic_load_n(&adopted_total, __ATOMIC_RELAXED); }

/* Wait for `device`'s work, in the relaxed capture mode (the caller's thread may be inside a
 * capture of its own; another thread's capture in the global mode still makes CUDA refuse). */
static crmm_status synchronize(int device)
{
    crmm_device_guard g;
    crmm_status st = crmm_cuda_device_enter(device, &g);
    if (st != CRMM_OK)
        return st;
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    bool relaxed = cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess;
    cudaError_t e = cudaDeviceSynchronize();
    if (relaxed)
        cudaThreadExchangeStreamCaptureMode(&mode);
    crmm_cuda_device_restore(&g);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return crmm_cuda_status(e, "cudaDeviceSynchronize");
    }
    return CRMM_OK;
}

/* Hand back what o's captures took, and free o. */
static void hand_back(owner *o)
{
    for (size_t i = 0; i < o->count; i++)
        o->adopted[i].released(o->adopted[i].arg);
    free(o->adopted);
    free(o);
}

/* Hand back what the released owners' captures took, once their devices are synchronized. Not
 * while a capture of an owner is open: its stream would be synchronized, which invalidates the
 * capture; then they wait for crmm_graph_owner_end or the next release. A device that cannot be
 * synchronized keeps its owners for the next try, said in the error and crmm's log. */
static crmm_status hand_back_released(void)
{
    pthread_mutex_lock(&owners_lock);
    owner *todo = __atomic_load_n(&open_count, __ATOMIC_ACQUIRE) == 0 ? unsynchronized : NULL;
    if (todo)
        unsynchronized = NULL;
    pthread_mutex_unlock(&owners_lock);
    if (!todo)
        return CRMM_OK;
    if (crmm_process_exiting()) { /* no CUDA call at exit: the process's memory goes with it */
        for (owner *next; todo; todo = next) {
            next = todo->next;
            free(todo->adopted);
            free(todo);
        }
        return CRMM_OK;
    }
    crmm_status result = CRMM_OK;
    owner *kept = NULL;
    for (owner *next; todo; todo = next) {
        next = todo->next;
        crmm_status st = todo->count ? synchronize(todo->device) : CRMM_OK;
        if (st == CRMM_OK) {
            hand_back(todo);
            continue;
        }
        result = crmm_error_add_context("crmm graph owners: the memory of owner %llu's graphs stays held until a later "
                                        "release can synchronize device %d",
                                        (unsigned long long)todo->id, todo->device);
        crmm_log(CRMM_LOG_WARN, "%s", crmm_last_error());
        todo->next = kept;
        kept = todo;
    }
    if (kept) {
        pthread_mutex_lock(&owners_lock);
        owner *last = kept;
        while (last->next)
            last = last->next;
        last->next = unsynchronized;
        unsynchronized = kept;
        pthread_mutex_unlock(&owners_lock);
    }
    return result;
}

crmm_status crmm_graph_owner_release(int device, uint64_t id)
{
    pthread_mutex_lock(&owners_lock);
    owner **at = find(id), *o = *at;
    if (!o || o->open) {
        pthread_mutex_unlock(&owners_lock);
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "crmm_graph_owner_release: owner %llu %s",
                              (unsigned long long)id, o ? "has its capture open (end it first)" : "is not known");
    }
    if (--o->refs == 0) {
        *at = o->next;
        o->device = device;
        if (o->count) {
            o->next = unsynchronized;
            unsynchronized = o;
        } else {
            free(o->adopted);
            free(o);
        }
    }
    pthread_mutex_unlock(&owners_lock);
    return hand_back_released();
}

void crmm_graph_owner_fork_child(void) { pthread_mutex_init(&owners_lock, NULL); }
