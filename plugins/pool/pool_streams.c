/* pool_streams.c — per-stream free lists and the ordering between streams.
 *
 * The contract (docs/contracts.md, Stream order): a block freed on stream S may be handed out again on S at once, and
 * on another stream T only once T is ordered behind the free. So each stream the pool sees gets
 * a state (pool_stream) with its own free list, and a freed block goes into the list of the
 * stream it was freed on. The fast path — allocate and free on one stream — finds the state by a
 * one-entry cache and makes no CUDA call; neither does meeting a stream for the first time.
 *
 * Handles of other streams. Freeing on S and then destroying S is legal, and CUDA gives S's
 * handle to the next stream created (rmm#649). Any CUDA call that is passed a destroyed handle is
 * undefined: the runtime may read freed memory and crash (cudaStreamGetId on a destroyed stream
 * can) rather than return an error, and there is no call that tells whether a handle is alive.
 * The only stream the pool knows to be alive is the caller's, the one passed to the allocate or
 * deallocate in progress. The `stream_reuse` parameter says how T is ordered behind S:
 *
 * stream_reuse = sync (the default). When T's list has no block that fits but another stream's
 * has, the pool calls cudaDeviceSynchronize, which waits for all work on the device (including
 * work still draining on a destroyed S) and names no stream. After it every free block is safe on
 * any stream, so the free blocks of every stream (T's too) join the ready state (below), merging
 * with their neighbours, and T takes its block from there. S's handle is never passed to CUDA, so
 * destroying a stream is always safe. The price is that the host waits for the device: about
 * 10 us when it is idle, as long as the longest pending work otherwise, and the device idles
 * until the host enqueues again. It is paid when a stream's own list and the ready state both
 * have nothing that fits while other streams hold a block that does. Blocks of the ready state
 * are taken where they lie (the rest of a split stays ready), not moved to T: were everything
 * free moved to T, the next stream to miss would synchronize and take it all back, and threads
 * that each allocate on their own stream would synchronize against each other at every other
 * miss.
 *   The order on a miss is: T's own list, the ready state (below, no wait), the other streams
 * (one device synchronization), growing from upstream. Synchronizing before growing is RMM's order
 * (it takes from other streams before it expands), and it is the better one here too: growth
 * without a maximum doubles the pool (with the default initial size, half the device's free
 * memory, one growth asks for all the rest), each stream that misses would grow its own chunk,
 * and the pool keeps that memory, unusable by the rest of the process, until trimmed; blocks of
 * different chunks never merge; and a cudaMalloc of that size costs more than an idle device
 * synchronization. A program that wants no synchronization at all chooses `event`, or frees each
 * block on the stream that allocates it.
 *
 * stream_reuse = event (RMM's way). At take time the pool records its event on S and makes T
 * wait for it (cudaEventRecord(ev, S); cudaStreamWaitEvent(T, ev)); the host does not wait. That
 * is enough: every block in S's list was freed earlier in host order (all of this runs under the
 * pool's lock), so whatever used it was enqueued on S before the record. Then all of S's free
 * blocks move to T and S's state is dropped, as RMM merges free lists. One event serves every
 * move: cudaStreamWaitEvent captures the event's most recent record when it is called, and
 * recording it again later does not affect that wait. No event is recorded per free: RMM does
 * that (~300 ns a free), which alone is five times the pool's budget per operation. The price is
 * a promise from the user: a stream that freed memory into the pool stays alive until
 * crmm_pool_forget_stream() was called for it (which waits for the stream and files its blocks
 * in the ready state), since the pool may record on it at any later allocation. Another thread's
 * per-thread default stream (cudaStreamPerThread means a different stream on every thread, so its
 * state is keyed by the thread too) cannot be recorded on from this thread: its blocks are taken
 * only after growing failed, by synchronizing the device. When making, recording or waiting for
 * the event fails, the error is cleared (the caller never sees it) and the device is synchronized
 * instead.
 *
 * In both modes, after growing failed, the device is synchronized if other streams hold free
 * blocks at all, and all of them join the ready state: blocks that fit nowhere alone may merge
 * there.
 *
 * The caveat that remains in both modes (the same as RMM's): the fast path cannot tell that a
 * handle was destroyed and handed to a new stream. If S is destroyed while work on a block freed
 * on S is still pending and a new stream gets S's handle, an allocation on the new stream may get
 * that block without a wait. Synchronize a stream before destroying it, or tell the pool with
 * crmm_pool_forget_stream (crmm/pool.h): the pool then waits for the stream and files its blocks
 * in the "ready" state, whose blocks any stream takes without a wait and which no handle finds.
 * After a device synchronization (trim) every free block goes there too.
 *
 * A pool over host memory (a host-only upstream) has no streams: one state for all, and no CUDA
 * call is ever made here. */
#include "build_config.h"
#include <stdlib.h>
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include "../common/capture_check.h"
#include "pool_streams.h"

static pool_stream *new_state(const pool_streams *ss, crmm_cuda_stream_t handle, uint64_t thread)
{
    pool_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->free.fit = ss->fit;
    s->handle = handle;
    s->thread = thread;
    return s;
}

crmm_status pool_streams_init(pool_streams *ss, bool real, int device, pool_reuse reuse, pool_fit fit)
{
    *ss = (pool_streams){.real = real, .by_event = reuse == POOL_REUSE_EVENT, .fit = (uint8_t)fit, .device = device};
    if (!real) {
        ss->last = new_state(ss, NULL, 0);
        if (!ss->last)
            return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "pool: malloc failed");
    }
    return CRMM_OK;
}

void pool_streams_free(pool_streams *ss)
{
    if (!ss->real)
        free(ss->last);
    for (size_t i = 0; i < ss->count; i++)
        free(ss->all[i]);
    free(ss->all);
    if (ss->event && !crmm_process_exiting())
        cudaEventDestroy((cudaEvent_t)ss->event);
    *ss = (pool_streams){0};
}

pool_stream *pool_streams_find_slow(pool_streams *ss, crmm_cuda_stream_t handle, uint64_t thread)
{
    for (size_t i = 0; i < ss->count; i++) {
        pool_stream *s = ss->all[i];
        if (s->handle == handle && s->thread == thread)
            return ss->last = s;
    }
    if (ss->count == ss->capacity) {
        size_t cap = ss->capacity ? ss->capacity * 2 : 8;
        pool_stream **all = realloc(ss->all, cap * sizeof *all);
        if (!all) {
            crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "pool: malloc failed");
            return NULL;
        }
        ss->all = all;
        ss->capacity = cap;
    }
    pool_stream *s = new_state(ss, handle, thread);
    if (!s) {
        crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "pool: malloc failed");
        return NULL;
    }
    ss->all[ss->count++] = s;
    return ss->last = s;
}

/* Drop state i (it holds no block). */
static void retire(pool_streams *ss, size_t i, pool_stream *keep)
{
    pool_stream *s = ss->all[i];
    ss->all[i] = ss->all[--ss->count];
    if (ss->last == s)
        ss->last = keep;
    if (ss->ready == s)
        ss->ready = NULL;
    free(s);
}

/* Make s the ready state: no lookup finds it any more, any stream takes its blocks. */
static pool_stream *make_ready(pool_streams *ss, pool_stream *s)
{
    s->handle = NULL;
    s->thread = POOL_NO_THREAD;
    s->ready = true;
    return ss->ready = s;
}

pool_stream *pool_streams_ready_state(pool_streams *ss)
{
    if (!ss->real || ss->ready)
        return ss->ready;
    pool_stream *s = pool_streams_find_slow(ss, NULL, POOL_NO_THREAD); /* a key no stream has */
    return s ? make_ready(ss, s) : NULL;
}

/* Move every free block of s to t. */
static void move_blocks(pool_stream *s, pool_stream *t, pool_records *records)
{
    pool_block *b;
    while ((b = pool_free_list_any(&s->free))) {
        pool_free_list_remove(&s->free, b);
        b->owner = NULL;
        pool_free_list_insert_merging(&t->free, t, b, records);
    }
}

/* POOL_REUSE_EVENT: make t's stream wait for everything enqueued on s so far. s's handle is alive
 * by the user's promise (see the top). False when CUDA refused; the caller synchronizes then. */
static bool order_behind(pool_streams *ss, pool_stream *t, pool_stream *s)
{
    /* the pool's device current throughout: the event is made there, and the default streams
     * (NULL, cudaStreamPerThread) name the current device's stream */
    crmm_device_guard g;
    if (crmm_cuda_device_enter(ss->device, &g) != CRMM_OK) {
        crmm_clear_error();
        return false;
    }
    if (!ss->event) {
        cudaEvent_t ev = NULL;
        cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
        if (e != cudaSuccess) {
            cudaGetLastError();
            crmm_cuda_device_restore(&g);
            return false;
        }
        ss->event = ev;
    }
    bool ok = cudaEventRecord((cudaEvent_t)ss->event, (cudaStream_t)s->handle) == cudaSuccess &&
              cudaStreamWaitEvent((cudaStream_t)t->handle, (cudaEvent_t)ss->event, 0) == cudaSuccess;
    if (!ok)
        cudaGetLastError();
    crmm_cuda_device_restore(&g);
    if (!ok)
        return false;
    __atomic_add_fetch(&ss->event_waits, 1, __ATOMIC_RELAXED);
    return true;
}

crmm_status pool_streams_wait(const pool_streams *ss, crmm_cuda_stream_t handle)
{
    if (!ss->real || crmm_process_exiting())
        return CRMM_OK;
    /* a default stream (NULL, cudaStreamLegacy, cudaStreamPerThread) is the current device's:
     * the pool's device is made current, or another device's stream would be waited for */
    crmm_device_guard g;
    if (crmm_cuda_device_enter(ss->device, &g) != CRMM_OK)
        return crmm_error_add_context("pool: forget_stream %p", (void *)handle);
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)handle);
    crmm_cuda_device_restore(&g);
    if (e != cudaSuccess) {
        cudaGetLastError();
        crmm_cuda_status(e, "cudaStreamSynchronize");
        return crmm_error_add_context("pool: forget_stream %p", (void *)handle);
    }
    return CRMM_OK;
}

void pool_streams_forget(pool_streams *ss, pool_records *records, crmm_cuda_stream_t handle)
{
    if (!ss->real)
        return;
    uint64_t thread;
    pool_streams_key(ss, &handle, &thread);
    size_t at = ss->count;
    pool_stream *ready = ss->ready;
    for (size_t i = 0; i < ss->count; i++)
        if (ss->all[i]->handle == handle && ss->all[i]->thread == thread)
            at = i;
    if (at == ss->count)
        return;
    pool_stream *s = ss->all[at];
    if (ready) {
        move_blocks(s, ready, records);
        retire(ss, at, ready);
    } else {
        make_ready(ss, s);
    }
}

void pool_streams_make_all_ready(pool_streams *ss, pool_records *records)
{
    if (!ss->real || !ss->count)
        return;
    pool_stream *ready = ss->ready ? ss->ready : make_ready(ss, ss->all[0]);
    for (size_t i = 0; i < ss->count;) {
        pool_stream *s = ss->all[i];
        if (s == ready) {
            i++;
            continue;
        }
        move_blocks(s, ready, records);
        retire(ss, i, ready);
    }
}

crmm_status pool_streams_synchronize(pool_streams *ss)
{
    if (!ss->real || crmm_process_exiting())
        return CRMM_OK;
    crmm_device_guard g;
    crmm_status st = crmm_cuda_device_enter(ss->device, &g);
    if (st != CRMM_OK)
        return crmm_error_add_context("pool");
    __atomic_add_fetch(&ss->syncs, 1, __ATOMIC_RELAXED);
    cudaError_t e = cudaDeviceSynchronize();
    crmm_cuda_device_restore(&g);
    if (e != cudaSuccess) {
        crmm_cuda_status(e, "cudaDeviceSynchronize");
        return crmm_error_add_context("pool: waiting for the device before reusing or returning memory");
    }
    return CRMM_OK;
}

/* Whether the stream of state s may be passed to CUDA by the thread `me`: the caller's stream t,
 * and the default ones, are alive; another stream may have been destroyed since it freed memory. */
static bool may_ask(const pool_stream *s, const pool_stream *t, uint64_t me)
{
    return s == t || (s->handle == NULL && !s->thread) || (s->handle == CRMM_CUDA_STREAM_PER_THREAD && s->thread == me);
}

bool pool_streams_idle(const pool_streams *ss, const pool_stream *t)
{
    if (!ss->real || crmm_process_exiting())
        return true;
    uint64_t me = thread_serial();
    for (size_t i = 0; i < ss->count; i++)
        if (!ss->all[i]->ready && ss->all[i]->free.blocks && !may_ask(ss->all[i], t, me))
            return false; /* asked first, so that no query is made in vain */
    for (size_t i = 0; i < ss->count; i++) {
        const pool_stream *s = ss->all[i];
        if (s->ready || !s->free.blocks)
            continue;
        cudaError_t e = cudaStreamQuery((cudaStream_t)s->handle);
        if (e != cudaSuccess) {
            if (e != cudaErrorNotReady)
                cudaGetLastError(); /* an error here only means "not known to be idle" */
            return false;
        }
    }
    return true;
}

/* Move every free block of every state but t to t, dropping those states. */
static void move_all_to(pool_streams *ss, pool_records *records, pool_stream *t)
{
    for (size_t i = 0; i < ss->count;) {
        pool_stream *s = ss->all[i];
        if (s == t) {
            i++;
            continue;
        }
        move_blocks(s, t, records);
        retire(ss, i, t);
    }
}

pool_stream *pool_streams_gather(pool_streams *ss, pool_records *records, pool_stream *t)
{
    if (!t) {
        pool_streams_make_all_ready(ss, records);
        return ss->ready;
    }
    move_all_to(ss, records, t);
    return t;
}

/* After a device synchronization: every free block of every state, t's included, joins the ready
 * state (made from a state other than t when there is none), merging with its neighbours there;
 * the other states are dropped, t stays (empty). Returns the ready state, or NULL when t is the
 * only state. */
static pool_stream *pour_into_ready(pool_streams *ss, pool_records *records, pool_stream *t)
{
    pool_stream *ready = ss->ready;
    for (size_t i = 0; i < ss->count && !ready; i++)
        if (ss->all[i] != t)
            ready = make_ready(ss, ss->all[i]);
    if (!ready)
        return NULL;
    for (size_t i = 0; i < ss->count;) {
        pool_stream *s = ss->all[i];
        if (s != ready)
            move_blocks(s, ready, records);
        if (s == ready || s == t)
            i++;
        else
            retire(ss, i, ready);
    }
    return ready;
}

/* A fitting block of the ready state, or NULL. */
static pool_block *ready_fit(const pool_streams *ss, size_t size, pool_stream **from)
{
    pool_block *b = ss->ready ? pool_free_list_fit(&ss->ready->free, size) : NULL;
    if (b)
        *from = ss->ready;
    return b;
}

crmm_status pool_streams_take(pool_streams *ss, pool_records *records, pool_stream *t, size_t size,
                              bool may_synchronize, pool_stream **from, pool_block **out)
{
    *out = NULL;
    *from = t;
    if (!ss->real || crmm_process_exiting())
        return CRMM_OK;
    if ((*out = ready_fit(ss, size, from)))
        return CRMM_OK; /* taken where it lies: the ready state stays shared */
    bool by_event = ss->by_event;
    uint64_t me = thread_serial();
    bool refused = false, any_fits = false, any_free = false, captured = false;
    for (size_t i = 0; i < ss->count;) {
        pool_stream *s = ss->all[i];
        if (s == t) {
            i++;
            continue;
        }
        if (!s->free.blocks) {
            retire(ss, i, t); /* an empty state: forget it (all[i] is now another state) */
            continue;
        }
        i++;
        any_free = true;
        bool fits = !s->ready && pool_free_list_fit(&s->free, size);
        any_fits |= fits;
        /* with events the pool asks whether a stream holding free blocks is captured (it takes
         * such streams to be alive): for one that fits, an event recorded on it would join t to
         * its capture; for any, the last resort's synchronization would invalidate the capture */
        if (!by_event || (!fits && (!may_synchronize || captured)) || s->ready ||
            (s->handle == CRMM_CUDA_STREAM_PER_THREAD && s->thread != me))
            continue;
        capture_check_info cap;
        if (ss->capture_gate && capture_check_gate_open(ss->capture_gate) && capture_check_query(s->handle, &cap)) {
            captured = true;
            continue;
        }
        if (!fits)
            continue;
        if (!order_behind(ss, t, s)) {
            refused = true;
            break; /* CUDA refused the event: synchronizing is the way left */
        }
        move_blocks(s, t, records);
        retire(ss, i - 1, t);
        *out = pool_free_list_fit(&t->free, size);
        return CRMM_OK;
    }
    bool synchronize = refused || (!by_event && any_fits) || (may_synchronize && any_free);
    if (!synchronize || captured)
        return CRMM_OK;
    crmm_status st = pool_streams_synchronize(ss);
    if (st != CRMM_OK)
        return st;
    pool_stream *ready = pour_into_ready(ss, records, t);
    if (ready && (*out = pool_free_list_fit(&ready->free, size)))
        *from = ready;
    return CRMM_OK;
}
