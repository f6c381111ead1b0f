/* fixed_size_free_lists.c — per-stream stacks of free blocks, ordered across streams by events.
 *
 * The stacks are arrays of pointers (push and pop are O(1)); a stream that finds its own stack
 * empty swaps in another stream's whole stack behind a cudaStreamWaitEvent and hands back the
 * few uncovered blocks on top (fewer than record_every), so stealing copies at most that many
 * pointers. Streams are found by a scan of the (few) streams seen so far. A stack's covered
 * blocks are at its bottom: pushes go on top, uncovered, and a record covers the whole stack; a
 * pop from the top lowers `covered` only when it reaches it. See fixed_size_free_lists.h. */
#include "build_config.h"
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include "fixed_size_free_lists.h"

void fs_free_lists_init(fs_free_lists *fl, bool host_only, int device, size_t record_every)
{
    memset(fl, 0, sizeof *fl);
    fl->host_only = host_only;
    fl->device = device;
    fl->record_every = record_every ? record_every : 1;
}

/* A new event on the lists' device. */
static crmm_status new_event(const fs_free_lists *fl, cudaEvent_t *ev)
{
    crmm_device_guard g;
    crmm_status st = crmm_cuda_device_enter(fl->device, &g);
    if (st != CRMM_OK)
        return st;
    st = crmm_cuda_status(cudaEventCreateWithFlags(ev, cudaEventDisableTiming), "fixed_size: cudaEventCreateWithFlags");
    crmm_cuda_device_restore(&g);
    return st;
}

static crmm_status stack_reserve(fs_stack *s, size_t more)
{
    if (s->count + more <= s->capacity)
        return CRMM_OK;
    size_t cap = s->capacity ? s->capacity : 64;
    while (cap < s->count + more)
        cap *= 2;
    void **p = realloc(s->ptrs, cap * sizeof *p);
    if (!p)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "fixed_size: cannot grow a free list to %zu blocks", cap);
    s->ptrs = p;
    s->capacity = cap;
    return CRMM_OK;
}

crmm_status fs_free_lists_key(const fs_free_lists *fl, crmm_cuda_stream_t stream, fs_stream_key *key)
{
    key->handle = stream;
    key->id = 0;
    key->known = true;
    if (fl->host_only)
        return CRMM_OK;
    /* NULL is the legacy default stream (libcrmm is not built for per-thread default streams) */
    cudaError_t e = cudaStreamGetId(stream ? (cudaStream_t)stream : cudaStreamLegacy, &key->id);
    return e == cudaSuccess ? CRMM_OK : crmm_cuda_status(e, "fixed_size: cudaStreamGetId");
}

/* A handle made by cudaStreamCreate*, not one of the default streams' (NULL, legacy, per-thread):
 * it names one stream at a time, so a list may be found by it. */
static inline bool is_created_stream(crmm_cuda_stream_t h)
{
    return (uintptr_t)h > (uintptr_t)CRMM_CUDA_STREAM_PER_THREAD;
}

crmm_status fs_free_lists_push_key(const fs_free_lists *fl, crmm_cuda_stream_t stream, fs_stream_key *key)
{
    if (fl->host_only || !is_created_stream(stream))
        return fs_free_lists_key(fl, stream, key);
    key->handle = stream;
    key->id = 0;
    key->known = false;
    return CRMM_OK;
}

/* Fill in the id of a key made by fs_free_lists_push_key. */
static crmm_status learn_id(fs_stream_key *key)
{
    cudaError_t e = cudaStreamGetId((cudaStream_t)key->handle, &key->id);
    if (e != cudaSuccess)
        return crmm_cuda_status(e, "fixed_size: cudaStreamGetId");
    key->known = true;
    return CRMM_OK;
}

/* The list of the stream of `key` (created with its event on first use), or NULL with the error
 * set. A key without its id finds the list that last had its handle; only when there is none is
 * the id asked for. A stream met for the first time takes its handle from any list that had it:
 * that list's stream was destroyed (live streams have distinct handles). */
static fs_stream_list *list_of(fs_free_lists *fl, fs_stream_key *key)
{
    if (fl->host_only) {
        if (fl->count == 0) {
            fl->lists = calloc(1, sizeof *fl->lists);
            if (!fl->lists) {
                crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "fixed_size: malloc failed");
                return NULL;
            }
            fl->count = fl->capacity = 1;
        }
        return &fl->lists[0];
    }
    if (!key->known) {
        for (size_t i = 0; i < fl->count; i++)
            if (fl->lists[i].handle == key->handle)
                return &fl->lists[i];
        if (learn_id(key) != CRMM_OK)
            return NULL;
    }
    unsigned long long id = key->id;
    for (size_t i = 0; i < fl->count; i++)
        if (fl->lists[i].stream_id == id)
            return &fl->lists[i];
    if (is_created_stream(key->handle))
        for (size_t i = 0; i < fl->count; i++)
            if (fl->lists[i].handle == key->handle)
                fl->lists[i].handle = NULL;
    if (fl->count == fl->capacity) {
        size_t cap = fl->capacity ? fl->capacity * 2 : 4;
        fs_stream_list *v = realloc(fl->lists, cap * sizeof *v);
        if (!v) {
            crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "fixed_size: malloc failed");
            return NULL;
        }
        fl->lists = v;
        fl->capacity = cap;
    }
    cudaEvent_t ev;
    if (new_event(fl, &ev) != CRMM_OK)
        return NULL;
    fs_stream_list *l = &fl->lists[fl->count++];
    memset(l, 0, sizeof *l);
    l->stream_id = id;
    l->handle = is_created_stream(key->handle) ? key->handle : NULL;
    l->event = ev;
    return l;
}

/* The first stream other than `mine` with a covered block, or NULL. */
static fs_stream_list *covered_other(fs_free_lists *fl, const fs_stream_list *mine)
{
    for (size_t i = 0; i < fl->count; i++)
        if (&fl->lists[i] != mine && fl->lists[i].covered > 0)
            return &fl->lists[i];
    return NULL;
}

/* A ready block (no pending work anywhere), or NOT_FOUND. */
static crmm_status pop_ready(fs_free_lists *fl, void **ptr)
{
    if (!fl->ready.count)
        return CRMM_ERROR_NOT_FOUND;
    *ptr = fl->ready.ptrs[--fl->ready.count];
    fl->free_blocks--;
    return CRMM_OK;
}

/* Under capture: the list of a created stream found by its handle alone (no CUDA call), or NULL. */
static fs_stream_list *list_by_handle(fs_free_lists *fl, crmm_cuda_stream_t handle)
{
    if (!is_created_stream(handle))
        return NULL;
    for (size_t i = 0; i < fl->count; i++)
        if (fl->lists[i].handle == handle)
            return &fl->lists[i];
    return NULL;
}

crmm_status fs_free_lists_pop(fs_free_lists *fl, fs_stream_key *key, void **ptr)
{
    if (fl->free_blocks == 0)
        return CRMM_ERROR_NOT_FOUND;
    crmm_cuda_stream_t stream = key->handle;
    if (fl->capturing) { /* the stream's own blocks, then ready ones: no wait, no record, no id */
        fs_stream_list *mine = list_by_handle(fl, stream);
        if (!mine || mine->blocks.count == 0)
            return pop_ready(fl, ptr);
        *ptr = mine->blocks.ptrs[--mine->blocks.count];
        if (mine->covered > mine->blocks.count)
            mine->covered = mine->blocks.count;
        else
            fl->uncovered--;
        fl->free_blocks--;
        return CRMM_OK;
    }
    fs_stream_list *mine = list_of(fl, key);
    if (!mine)
        return crmm_last_status();
    if (mine->blocks.count == 0 && pop_ready(fl, ptr) == CRMM_OK)
        return CRMM_OK;
    if (mine->blocks.count == 0) {
        /* Take another stream's covered blocks, ordered behind its event's last record. */
        fs_stream_list *other = covered_other(fl, mine);
        if (!other)
            return CRMM_ERROR_NOT_FOUND;
        size_t keep = other->blocks.count - other->covered; /* uncovered: they stay with `other` */
        crmm_status st = stack_reserve(&mine->blocks, keep); /* mine's array becomes other's */
        if (st != CRMM_OK)
            return st;
        cudaError_t e = cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)other->event, 0);
        if (e != cudaSuccess)
            return crmm_cuda_status(e, "fixed_size: cudaStreamWaitEvent");
        fs_stack empty = mine->blocks;
        mine->blocks = other->blocks;
        other->blocks = empty;
        mine->blocks.count = other->covered;
        if (keep) /* an empty stack may have no array yet */
            memcpy(other->blocks.ptrs, mine->blocks.ptrs + other->covered, keep * sizeof *mine->blocks.ptrs);
        other->blocks.count = keep;
        other->covered = 0;
        /* mine's event must now cover the wait, or a third stream taking these blocks from mine
         * later would wait only for an older point of this stream */
        e = cudaEventRecord((cudaEvent_t)mine->event, (cudaStream_t)stream);
        if (e != cudaSuccess) { /* on mine's stack, uncovered: usable here, by others after a synchronization */
            fl->uncovered += mine->blocks.count;
            return crmm_cuda_status(e, "fixed_size: cudaEventRecord");
        }
        mine->covered = mine->blocks.count;
    }
    *ptr = mine->blocks.ptrs[--mine->blocks.count];
    if (mine->covered > mine->blocks.count)
        mine->covered = mine->blocks.count;
    else
        fl->uncovered--;
    fl->free_blocks--;
    return CRMM_OK;
}

/* Put ptrs[0, n) on top of stack s (CRMM_ERROR_OUT_OF_MEMORY when it cannot grow: nothing put). */
static crmm_status stack_push(fs_stack *s, void *const *ptrs, size_t n)
{
    crmm_status st = stack_reserve(s, n);
    if (st != CRMM_OK)
        return st;
    memcpy(s->ptrs + s->count, ptrs, n * sizeof *ptrs);
    s->count += n;
    return CRMM_OK;
}

crmm_status fs_free_lists_push(fs_free_lists *fl, fs_stream_key *key, void *const *ptrs, size_t n)
{
    crmm_cuda_stream_t stream = key->handle;
    fs_stream_list *l = list_of(fl, key);
    if (!l)
        return crmm_last_status();
    crmm_status st = stack_push(&l->blocks, ptrs, n);
    if (st != CRMM_OK)
        return st;
    fl->free_blocks += n;
    if (fl->host_only) { /* one stack, no streams: everything is usable by every caller */
        l->covered = l->blocks.count;
        return CRMM_OK;
    }
    fl->uncovered += n;
    /* once the process is exiting no CUDA call: the blocks go upstream with their chunk */
    if (l->blocks.count - l->covered < fl->record_every || crmm_process_exiting() || fl->capturing)
        return CRMM_OK;
    /* A list found by handle alone is the caller's stream's unless that stream was destroyed
     * and its handle given to the caller's: then the list is left to the old stream (its
     * handle cleared), with these blocks uncovered on it, and no record is made on it. */
    /* The blocks are on the stack now: the push has succeeded whatever follows. A failed id query
     * or record leaves them uncovered (usable on this stream, by others after a synchronization)
     * and is cleared, so that a free does not report a failure for a block it has taken back. */
    if (!key->known && learn_id(key) != CRMM_OK) {
        crmm_clear_error();
        return CRMM_OK;
    }
    if (l->stream_id != key->id) {
        l->handle = NULL;
        return CRMM_OK;
    }
    if (crmm_cuda_status(cudaEventRecord((cudaEvent_t)l->event, (cudaStream_t)stream), "fixed_size: cudaEventRecord") != CRMM_OK) {
        crmm_clear_error();
        return CRMM_OK;
    }
    fl->uncovered -= l->blocks.count - l->covered;
    l->covered = l->blocks.count;
    return CRMM_OK;
}

crmm_status fs_free_lists_push_ready(fs_free_lists *fl, void *const *ptrs, size_t n)
{
    crmm_status st = stack_push(&fl->ready, ptrs, n);
    if (st == CRMM_OK)
        fl->free_blocks += n;
    return st;
}

crmm_status fs_free_lists_push_waiting(fs_free_lists *fl, void *const *ptrs, size_t n)
{
    if (fl->host_only)
        return fs_free_lists_push_ready(fl, ptrs, n);
    crmm_status st = stack_push(&fl->waiting, ptrs, n);
    if (st == CRMM_OK) {
        fl->free_blocks += n;
        fl->uncovered += n;
    }
    return st;
}

crmm_status fs_free_lists_synchronize(fs_free_lists *fl)
{
    if (fl->host_only)
        return CRMM_OK;
    crmm_device_guard g;
    crmm_status st = crmm_cuda_device_enter(fl->device, &g);
    if (st != CRMM_OK)
        return st;
    st = crmm_cuda_status(cudaDeviceSynchronize(), "fixed_size: cudaDeviceSynchronize");
    crmm_cuda_device_restore(&g);
    if (st != CRMM_OK)
        return st;
    for (size_t i = 0; i < fl->count; i++)
        fl->lists[i].covered = fl->lists[i].blocks.count;
    fl->uncovered = 0;
    if (fl->waiting.count && stack_push(&fl->ready, fl->waiting.ptrs, fl->waiting.count) == CRMM_OK)
        fl->waiting.count = 0;
    if (fl->waiting.count) { /* no room in the ready stack: they wait for the next one */
        crmm_clear_error();
        fl->uncovered = fl->waiting.count;
    }
    return CRMM_OK;
}

void fs_free_lists_destroy(fs_free_lists *fl, bool cuda_ok)
{
    if (!fl->host_only && cuda_ok && fl->uncovered > 0)
        cudaDeviceSynchronize(); /* the caller made the device current */
    for (size_t i = 0; i < fl->count; i++) {
        if (!fl->host_only && cuda_ok) {
            cudaEventSynchronize((cudaEvent_t)fl->lists[i].event);
            cudaEventDestroy((cudaEvent_t)fl->lists[i].event);
        }
        free(fl->lists[i].blocks.ptrs);
    }
    free(fl->lists);
    free(fl->ready.ptrs);
    free(fl->waiting.ptrs);
    memset(fl, 0, sizeof *fl);
}
