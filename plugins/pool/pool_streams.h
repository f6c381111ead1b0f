/* pool_streams.h — the pool's per-stream states: which stream a free block may be reused on at
 * once. See pool_streams.c for the ordering rules and why they are safe. */
#ifndef CRMM_PLUGINS_POOL_STREAMS_H
#define CRMM_PLUGINS_POOL_STREAMS_H

#include <stdbool.h>
#include <stdint.h>
#include <crmm/resource.h>
#include "../common/thread_serial.h"
#include "pool_free_list.h"

/* The blocks freed on one stream and not yet handed out or moved to another stream. */
typedef struct pool_stream {
    pool_free_list free;
    crmm_cuda_stream_t handle;     /* as the caller passes it (cudaStreamLegacy is kept as NULL) */
    uint64_t thread;               /* per-thread default stream: the serial of its thread; else 0 */
    bool ready;                    /* blocks of forgotten streams, waited for: usable by any stream
                                    * (handle NULL, thread POOL_NO_THREAD: no lookup finds it) */
} pool_stream;

#define POOL_NO_THREAD UINT64_MAX

/* How a block freed on stream S is made safe for another stream T (the stream_reuse parameter). */
typedef enum pool_reuse {
    POOL_REUSE_SYNC,               /* cudaDeviceSynchronize: S's handle is never passed to CUDA */
    POOL_REUSE_EVENT               /* record an event on S, T waits for it: S must still be alive */
} pool_reuse;

typedef struct pool_streams {
    pool_stream *last;             /* the state found last; for a host pool the only one */
    pool_stream *ready;            /* the ready state (one of all[]), or NULL */
    pool_stream **all;             /* every state */
    size_t count, capacity;
    bool real;                     /* device memory: streams matter (false: one state for all) */
    bool by_event;                 /* stream_reuse: POOL_REUSE_EVENT (false: POOL_REUSE_SYNC) */
    uint8_t fit;                   /* pool_fit of every state's list (the fit parameter) */
    int device;                    /* CUDA device of the pool (for the event and synchronizing) */
    void *event;                   /* cudaEvent_t, made at the first take by event; or NULL */
    const bool *capture_gate;      /* the pool's gate (capture_check.h): ask whether a stream whose
                                    * blocks an event would order is being captured; NULL: never */
    uint64_t syncs;                /* device synchronizations made (pool_streams_synchronize) */
    uint64_t event_waits;          /* streams made to wait for another's event (stream_reuse = event) */
} pool_streams;

/* Set up: with `real` false the single state for every stream; with it true an empty set that
 * orders streams as `reuse` says. Every state's list fits as `fit` says. CRMM_ERROR_OUT_OF_MEMORY
 * when malloc fails. */
crmm_status pool_streams_init(pool_streams *ss, bool real, int device, pool_reuse reuse, pool_fit fit);
/* Free every state (their lists must hold nothing that is still needed) and the event. No CUDA
 * call once the process is exiting. */
void pool_streams_free(pool_streams *ss);

/* The state of a stream, made when first seen (no CUDA call); NULL with the error set when malloc
 * fails. */
pool_stream *pool_streams_find_slow(pool_streams *ss, crmm_cuda_stream_t handle, uint64_t thread);

/* The key of a stream's state: its handle (cudaStreamLegacy as NULL) and, for the per-thread
 * default stream, the calling thread's serial (else 0); NULL and 0 for every stream of a pool
 * over host memory. */
static inline void pool_streams_key(const pool_streams *ss, crmm_cuda_stream_t *handle, uint64_t *thread)
{
    *thread = 0;
    if (!ss->real)
        *handle = NULL;
    else if (*handle == (crmm_cuda_stream_t)0x1) /* cudaStreamLegacy is the NULL stream */
        *handle = NULL;
    else if (*handle == CRMM_CUDA_STREAM_PER_THREAD)
        *thread = thread_serial();
}

/* The state of the stream keyed (handle, thread) as pool_streams_key says, made when first seen. */
static inline pool_stream *pool_streams_find_key(pool_streams *ss, crmm_cuda_stream_t handle, uint64_t thread)
{
    pool_stream *s = ss->last;
    if (!ss->real)
        return s;
    if (__builtin_expect(s && s->handle == handle && s->thread == thread, 1))
        return s;
    return pool_streams_find_slow(ss, handle, thread);
}

static inline pool_stream *pool_streams_find(pool_streams *ss, crmm_cuda_stream_t handle)
{
    if (!ss->real)
        return ss->last;
    uint64_t thread;
    pool_streams_key(ss, &handle, &thread);
    return pool_streams_find_key(ss, handle, thread);
}

/* The state of `handle` only when it is the one found last (no lookup, nothing made; for a caller
 * that must not wait), else NULL. */
static inline pool_stream *pool_streams_find_last(pool_streams *ss, crmm_cuda_stream_t handle)
{
    if (!ss->real)
        return ss->last;
    uint64_t thread;
    pool_streams_key(ss, &handle, &thread);
    pool_stream *s = ss->last;
    return s && s->handle == handle && s->thread == thread ? s : NULL;
}

/* Called when `t` has no block of `size`: find one among the other states' free blocks. A fitting
 * block of the ready state is taken where it lies, without a CUDA call (*from: the ready state),
 * so that what is left of it stays usable by every stream. Otherwise, with POOL_REUSE_EVENT, the
 * first stream with a fitting block that can be recorded on (not another thread's per-thread
 * default stream) is ordered by the pool's event and its blocks move to t (*from: t); with
 * POOL_REUSE_SYNC, a fitting block on any other stream makes the pool synchronize the device,
 * after which the free blocks of every stream, t's included, join the ready state (merging) and
 * the block is taken from there. A stream being captured (asked behind capture_gate) is never
 * recorded on: the record would become a node of its graph and the wait would join t to the
 * capture; nor is the device synchronized then (CUDA forbids it while a stream is captured), nor,
 * with POOL_REUSE_EVENT, for the last resort while any stream holding free blocks is captured.
 * Pouring into the ready state rather than into t keeps streams
 * that run side by side from taking everything from each other, and a synchronization each time.
 * With `may_synchronize` true (the last resort, after growing failed) the device is also
 * synchronized when other streams hold free blocks at all, none of which fits alone, since merged
 * they may. The only handle passed to CUDA other than t's is, with POOL_REUSE_EVENT, that of the
 * stream recorded on. *out: a block of at least `size` in the list of *from (t or the ready
 * state), or NULL when none was found. t is never dropped. Errors: CRMM_ERROR_CUDA (synchronizing
 * failed). Never calls CUDA for a host pool or once the process is exiting. */
crmm_status pool_streams_take(pool_streams *ss, pool_records *records, pool_stream *t, size_t size,
                              bool may_synchronize, pool_stream **from, pool_block **out);

/* CRMM_POOL_OP_FORGET_STREAM, in two steps: pool_streams_wait without the pool's lock (waits for
 * the stream; CRMM_ERROR_CUDA when that fails), then pool_streams_forget under it (files the
 * stream's free blocks as usable by every stream). Neither calls CUDA for a host pool. */
crmm_status pool_streams_wait(const pool_streams *ss, crmm_cuda_stream_t handle);
void pool_streams_forget(pool_streams *ss, pool_records *records, crmm_cuda_stream_t handle);

/* After a device synchronization: every free block of every stream is usable by any stream, so
 * gather them all (merging neighbours) into the ready state. Makes no CUDA call and no malloc. */
void pool_streams_make_all_ready(pool_streams *ss, pool_records *records);

/* After a device synchronization: move every free block of every stream to state t (merging
 * neighbours; the other states are dropped) and return t; with t NULL gather them in the ready
 * state (pool_streams_make_all_ready) and return it (NULL when the pool has no state). No CUDA
 * call, no malloc. */
pool_stream *pool_streams_gather(pool_streams *ss, pool_records *records, pool_stream *t);

/* The ready state, made (empty) when there is none; NULL for a host pool or when malloc fails
 * (the error is set then). No CUDA call: for blocks known to be idle (a destroyed graph's). */
pool_stream *pool_streams_ready_state(pool_streams *ss);

/* Whether every stream that holds free blocks has finished all the work queued on it, asked
 * without waiting (cudaStreamQuery): then those blocks' pages may be unmapped with no device
 * synchronization. False when a stream cannot be asked safely (another stream than t's and the
 * default ones, which may have been destroyed), is busy, or the query fails. True for a host
 * pool and once the process is exiting. */
bool pool_streams_idle(const pool_streams *ss, const pool_stream *t);

/* Wait until the device has finished all work (before memory goes back upstream). CRMM_OK
 * without a CUDA call for a host pool or once the process is exiting. */
crmm_status pool_streams_synchronize(pool_streams *ss);

#endif
