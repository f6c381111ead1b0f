/* fixed_size_free_lists.h — the stream-ordered free lists of the fixed_size plugin.
 *
 * One LIFO stack of free block pointers per CUDA stream (keyed by cudaStreamGetId, so a
 * destroyed stream's handle reused by a new stream is not mistaken for the old one), each with
 * an event recorded after every block pushed on that stream. A block is reused on its own
 * stream at once; another stream takes a whole stack only after cudaStreamWaitEvent on the
 * owner's event. For host-only upstreams there is a single stack and no CUDA call at all.
 * None of the calls needs the caller's current device to be the resource's: the one call that
 * makes something (the event of a stream seen for the first time) makes the device current itself.
 * Not thread-safe by itself: the resource calls these under its lock. */
#ifndef CRMM_PLUGINS_FIXED_SIZE_FREE_LISTS_H
#define CRMM_PLUGINS_FIXED_SIZE_FREE_LISTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <crmm/resource.h>

typedef struct fs_stack {
    void **ptrs;
    size_t count, capacity;
} fs_stack;

typedef struct fs_stream_list {
    unsigned long long stream_id; /* cudaStreamGetId of the stream the blocks were freed on */
    void *event;                  /* cudaEvent_t recorded after the last push on that stream */
    fs_stack blocks;
} fs_stream_list;

typedef struct fs_free_lists {
    bool host_only;         /* no streams, no events: lists[0] is the one stack */
    int device;             /* the device the events are made on */
    fs_stream_list *lists;
    size_t count, capacity;
    uint64_t free_blocks;   /* blocks in all stacks */
} fs_free_lists;

/* Start empty; events will be made on `device` (made current just for that). */
void fs_free_lists_init(fs_free_lists *fl, bool host_only, int device);

/* A stream as the lists know it: its handle and its cudaStreamGetId. */
typedef struct fs_stream_key {
    crmm_cuda_stream_t handle;
    unsigned long long id;        /* 0 for host-only lists */
} fs_stream_key;

/* The key of `stream`. Needs no lock (so the resource asks before taking its own): one
 * cudaStreamGetId, none for host-only lists. CRMM_ERROR_CUDA when CUDA refuses the handle. */
crmm_status fs_free_lists_key(const fs_free_lists *fl, crmm_cuda_stream_t stream, fs_stream_key *key);

/* Take a free block usable on the stream of `key`: from the stream's own stack, else a whole
 * stack of another stream after making the stream wait on that stream's event.
 * CRMM_ERROR_NOT_FOUND (no message) when every stack is empty; CRMM_ERROR_CUDA when a stream or
 * event call fails. */
crmm_status fs_free_lists_pop(fs_free_lists *fl, const fs_stream_key *key, void **ptr);

/* Give `n` blocks back, last used on the stream of `key` (or fresh from upstream on it), and
 * record the stream's event. CRMM_ERROR_OUT_OF_MEMORY when the stack cannot grow (then the
 * blocks stay unavailable until the resource is destroyed), CRMM_ERROR_CUDA on a failed CUDA
 * call. */
crmm_status fs_free_lists_push(fs_free_lists *fl, const fs_stream_key *key, void *const *ptrs, size_t n);

/* Wait until every block's last use (every recorded event) has completed; then destroy the
 * events (no CUDA call when `cuda_ok` is false) and free the stacks. */
void fs_free_lists_destroy(fs_free_lists *fl, bool cuda_ok);

#endif
