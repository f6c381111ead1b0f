/* graph_owner.c — the owners of CUDA graphs that a framework tells crmm about (crmm/graph_owner.h).
 *
 * One mutex guards the owners (a list: a process has a few captures open and a few graph pools
 * alive) and the owners released whose memory is not handed back yet. Allocators ask at the first
 * call of each capture (crmm_graph_owner_adopt); while no capture of any owner is open that costs
 * one atomic load. The claims function is called only while the owner's capture stream is being
 * captured, and not at all once a capture of it was adopted (the capture id decides then), so a
 * capture that ended without crmm_graph_owner_end does not have its function called for ever:
 * the owner is closed when its stream is seen no longer capturing it. */
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
    int device;                        /* where its graphs run: synchronized before the hand-back */
    crmm_cuda_stream_t stream;         /* its capture's stream (NULL: not known) */
    unsigned long long capture_id;     /* the capture adopted first (0: none yet) */
    unsigned refs;                     /* begins not yet released */
    bool open;                         /* between begin and end */
    crmm_graph_owner_claims_fn claims; /* while open */
    void *ctx;
    adopted *adopted; /* what its captures took, to hand back at the last release */
    size_t count, capacity;
    struct owner *next;
} owner;

static pthread_mutex_t owners_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sync_done = PTHREAD_COND_INITIALIZER;
static owner *owners;          /* referenced */
static owner *released_owners; /* released, what they took not handed back yet */
static bool syncing;           /* a hand-back is synchronizing devices: begins wait */
static unsigned open_count;    /* atomic: captures open; adopt looks no further while 0 */
static uint64_t adopted_total; /* atomic */

static crmm_status hand_back_released(void);

static owner **find(uint64_t id)
{
    owner **at = &owners;
    while (*at && (*at)->id != id)
        at = &(*at)->next;
    return at;
}

/* Under the lock: o's capture is over (ended, or seen ended without crmm_graph_owner_end). */
static void close_owner(owner *o)
{
    o->open = false;
    o->claims = NULL;
    o->ctx = NULL;
    __atomic_sub_fetch(&open_count, 1, __ATOMIC_RELEASE);
}

/* Under the lock: whether o's capture is under way. An open owner whose stream is not known
 * counts as capturing; one whose stream no longer holds the capture it adopted (invalidated or
 * ended without crmm_graph_owner_end) is closed. */
static bool capturing(owner *o)
{
    if (!o->open)
        return false;
    if (!o->stream)
        return true;
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    if (cudaStreamGetCaptureInfo((cudaStream_t)o->stream, &status, &id, NULL, NULL, NULL, NULL) != cudaSuccess) {
        cudaGetLastError();
        status = cudaStreamCaptureStatusNone;
    }
    bool active = status == cudaStreamCaptureStatusActive;
    if (o->capture_id && (!active || id != o->capture_id)) {
        crmm_log(CRMM_LOG_DEBUG, "crmm graph owners: owner %llu's capture ended without crmm_graph_owner_end: closed",
                 (unsigned long long)o->id);
        close_owner(o);
        return false;
    }
    return active;
}

crmm_status crmm_graph_owner_begin(uint64_t id, int device, crmm_cuda_stream_t stream, crmm_graph_owner_claims_fn claims,
                                   void *ctx)
{
    if (id == 0 || !claims || device < 0)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "crmm_graph_owner_begin: %s",
                              id == 0 ? "owner 0" : !claims ? "claims is NULL" : "a negative device");
    pthread_mutex_lock(&owners_lock);
    while (syncing) /* a capture begun now could be invalidated by that synchronization */
        pthread_cond_wait(&sync_done, &owners_lock);
    owner *o = *find(id);
    const char *refused = o && o->open ? "a capture of it is open already (end it first)"
                          : o && o->device != device ? "its graphs are on another device"
                                                     : NULL;
    if (refused) {
        pthread_mutex_unlock(&owners_lock);
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "crmm_graph_owner_begin: owner %llu: %s",
                              (unsigned long long)id, refused);
    }
    if (!o) {
        if (!(o = calloc(1, sizeof *o))) {
            pthread_mutex_unlock(&owners_lock);
            return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "crmm_graph_owner_begin: malloc failed");
        }
        o->id = id;
        o->device = device;
        o->next = owners;
        owners = o;
    }
    o->refs++;
    o->open = true;
    o->stream = stream;
    o->capture_id = 0;
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
    close_owner(o);
    pthread_mutex_unlock(&owners_lock);
    crmm_kept_error kept; /* what waited for the capture to end: a failure is logged, not this call's */
    crmm_keep_error(&kept, crmm_last_status());
    if (hand_back_released() != CRMM_OK)
        crmm_restore_error(&kept);
    return CRMM_OK;
}

bool crmm_graph_owner_adopt(crmm_cuda_stream_t stream, unsigned long long capture_id, void (*released)(void *arg),
                            void *arg)
{
    if (__atomic_load_n(&open_count, __ATOMIC_ACQUIRE) == 0)
        return false;
    bool taken = false;
    pthread_mutex_lock(&owners_lock);
    for (owner *o = owners; o; o = o->next) {
        if (!o->open)
            continue;
        if (o->capture_id ? o->capture_id != capture_id : !capturing(o) || !o->claims(o->ctx, stream))
            continue;
        if (o->count == o->capacity) {
            size_t capacity = o->capacity ? 2 * o->capacity : 8;
            adopted *grown = realloc(o->adopted, capacity * sizeof *grown);
            if (!grown)
                break; /* the allocator ties a user object instead */
            o->adopted = grown;
            o->capacity = capacity;
        }
        o->capture_id = capture_id;
        o->adopted[o->count++] = (adopted){released, arg};
        __atomic_add_fetch(&adopted_total, 1, __ATOMIC_RELAXED);
        taken = true;
        break;
    }
    pthread_mutex_unlock(&owners_lock);
    return taken;
}

uint64_t crmm_graph_owner_adopted_total(void) { return __atomic_load_n(&adopted_total, __ATOMIC_RELAXED); }

/* Wait for `device`'s work. The relaxed capture mode lets the call through where only the
 * global mode of another thread's capture forbids it; a capture under way on the device is
 * invalidated by it all the same (crmm/graph_owner.h says so). */
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

static void free_owner(owner *o)
{
    free(o->adopted);
    free(o);
}

/* Hand back what the released owners' captures took, once their devices are synchronized (once
 * each). Not while the capture of an owner is under way: its stream would be synchronized, which
 * invalidates the capture; they then wait for crmm_graph_owner_end or the next release. A device
 * that cannot be synchronized keeps its owners for the next try, said in the error and the log. */
static crmm_status hand_back_once(bool *more);

static crmm_status hand_back_released(void)
{
    crmm_status result = CRMM_OK;
    bool more = true;
    while (more) /* owners released while this thread synchronized are its to hand back too */
        if (hand_back_once(&more) != CRMM_OK)
            result = crmm_last_status();
    return result;
}

static crmm_status hand_back_once(bool *more)
{
    *more = false;
    pthread_mutex_lock(&owners_lock);
    owner *todo = NULL;
    if (released_owners && !syncing) {
        bool wait = false;
        for (owner *o = owners; o && !wait; o = o->next)
            wait = capturing(o);
        if (!wait) {
            todo = released_owners;
            released_owners = NULL;
            syncing = true;
        }
    }
    pthread_mutex_unlock(&owners_lock);
    if (!todo)
        return CRMM_OK;
    crmm_status result = CRMM_OK;
    owner *kept = NULL;
    while (todo) {
        /* one synchronization per device, for every owner on it */
        int device = todo->device;
        crmm_status st = crmm_process_exiting() ? CRMM_OK : synchronize(device);
        for (owner **at = &todo; *at;) {
            owner *o = *at;
            if (o->device != device) {
                at = &o->next;
                continue;
            }
            *at = o->next;
            if (st == CRMM_OK) {
                if (!crmm_process_exiting()) /* at exit the memory goes with the process */
                    for (size_t i = 0; i < o->count; i++)
                        o->adopted[i].released(o->adopted[i].arg);
                free_owner(o);
            } else {
                o->next = kept;
                kept = o;
            }
        }
        if (st != CRMM_OK) {
            result = crmm_error_add_context("crmm graph owners: the memory of graphs on device %d stays held until a "
                                            "later release or end can synchronize it", device);
            crmm_log(CRMM_LOG_WARN, "%s", crmm_last_error());
        }
    }
    pthread_mutex_lock(&owners_lock);
    *more = released_owners != NULL;
    while (kept) {
        owner *next = kept->next;
        kept->next = released_owners;
        released_owners = kept;
        kept = next;
    }
    syncing = false;
    pthread_cond_broadcast(&sync_done);
    pthread_mutex_unlock(&owners_lock);
    return result;
}

crmm_status crmm_graph_owner_release(uint64_t id)
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
        if (o->count) {
            o->next = released_owners;
            released_owners = o;
        } else {
            free_owner(o);
        }
    }
    pthread_mutex_unlock(&owners_lock);
    return hand_back_released();
}

void crmm_graph_owner_fork_child(void)
{
    pthread_mutex_init(&owners_lock, NULL);
    pthread_cond_init(&sync_done, NULL);
    syncing = false; /* the thread synchronizing is not in the child; its owners are dropped */
}
