/* fixed_size_free_lists.h — the stream-ordered free lists of the fixed_size plugin.
 *
 * One LIFO stack of free block pointers per CUDA stream (keyed by cudaStreamGetId, so a
 * destroyed stream's handle reused by a new stream is not mistaken for the old one: see the two
 * key functions for when the id is asked for), each with an event. A block is reused on its own stream at once. Another stream may take a stream's
 * blocks only behind that stream's event (cudaStreamWaitEvent, naming no other stream's handle),
 * so only the blocks freed before the event's last record are "covered" and may move: the bottom
 * `covered` blocks of the stack. The event is recorded when a stream has freed `record_every`
 * blocks since its last record (not at every free: a record costs as much as the rest of the
 * free), so at most record_every - 1 blocks of a stream wait for it to record again. Those, on a
 * stream that stopped freeing or was destroyed, become usable to others after a device
 * synchronization (fs_free_lists_synchronize), which the resource makes when growing fails or
 * when they add up to a chunk. For host-only upstreams there is a single stack and no CUDA call
 * at all. None of the calls needs the caller's current device to be the resource's: those that
 * make something or synchronize make the device current themselves.
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
    crmm_cuda_stream_t handle;    /* that stream's handle while it may still be its (a created
                                   * stream's; NULL for the default streams and once the handle
                                   * went to another stream) */
    void *event;                  /* cudaEvent_t, recorded on that stream */
    fs_stack blocks;
    size_t covered;               /* blocks.ptrs[0 .. covered) were pushed before the event's last
                                   * record (or a device synchronization): others may take them */
} fs_stream_list;

typedef struct fs_free_lists {
    bool host_only;         /* no streams, no events: lists[0] is the one stack */
    int device;             /* the device the events are made on */
    fs_stream_list *lists;
    size_t count, capacity;
    size_t record_every;    /* record a stream's event once this many of its blocks are uncovered */
    uint64_t free_blocks;   /* blocks in all stacks */
    uint64_t uncovered;     /* blocks in all stacks above their `covered` */
    fs_stack ready;         /* blocks no stream has pending work on (fresh from upstream during a
                             * capture, or given back by a destroyed CUDA graph): any stream takes
                             * them without a wait (counted in free_blocks, never uncovered) */
    fs_stack waiting;       /* blocks that work on a stream no longer named may still use (a
                             * destroyed graph's that eager work used): ready after the next
                             * device synchronization (counted in free_blocks and uncovered) */
    bool capturing;         /* set by the resource (under its lock) while it serves a stream under
                             * CUDA graph capture: pop finds the stream's own stack by its handle
                             * alone (CUDA refuses a captured stream's id), never waits for another
                             * stream's event, and takes the ready blocks after its own */
} fs_free_lists;

/* Start empty; events will be made on `device` (made current just for that); a stream's event is
 * recorded once `record_every` (>= 1) of its free blocks are not covered by it. */
void fs_free_lists_init(fs_free_lists *fl, bool host_only, int device, size_t record_every);

/* A stream as the lists know it: its handle and, when known, its cudaStreamGetId. */
typedef struct fs_stream_key {
    crmm_cuda_stream_t handle;
    unsigned long long id;        /* 0 for host-only lists */
    bool known;                   /* id is the stream's (else it is asked for when needed) */
} fs_stream_key;

/* The key of `stream`, with its id. Needs no lock (so the resource asks before taking its
 * own): one cudaStreamGetId, none for host-only lists. An allocation needs it: a block may be
 * handed out on a stream without a wait only from that stream's own list, and only the id tells
 * a stream from an earlier one, destroyed, whose handle it got. CRMM_ERROR_CUDA when CUDA
 * refuses the handle. */
crmm_status fs_free_lists_key(const fs_free_lists *fl, crmm_cuda_stream_t stream, fs_stream_key *key);

/* The key for a free: for a created stream the handle alone (no CUDA call); the list is found
 * by the handle, and the id is asked for only before recording the list's event (then a list
 * whose stream was destroyed and whose handle was reused is recognized, and left alone). Blocks
 * pushed on a destroyed stream's list by its handle's next owner are not covered by that list's
 * event and never popped from it without a wait: pops find lists by id. For the default streams
 * (one handle, a stream per thread or the legacy one) as fs_free_lists_key. */
crmm_status fs_free_lists_push_key(const fs_free_lists *fl, crmm_cuda_stream_t stream, fs_stream_key *key);

/* Take a free block usable on the stream of `key`: from the stream's own stack, else the
 * covered blocks of another stream after making the stream wait on that stream's event (and
 * recording the stream's own event, so that they stay covered on its stack).
 * CRMM_ERROR_NOT_FOUND (no message) when the own stack is empty and no other has a covered
 * block; CRMM_ERROR_CUDA when a stream or event call fails; CRMM_ERROR_OUT_OF_MEMORY when a
 * stack cannot grow to hold what another stream keeps. */
crmm_status fs_free_lists_pop(fs_free_lists *fl, fs_stream_key *key, void **ptr);

/* Give `n` blocks back, last used on the stream of `key` (or fresh from upstream on it); record
 * the stream's event when record_every of its blocks are now uncovered. CRMM_ERROR_OUT_OF_MEMORY
 * when the stack cannot grow, CRMM_ERROR_CUDA (or the CUDA error's status) when a new stream's
 * list cannot be made (its event, its id): then no block was taken (the caller still has them,
 * and a free keeps its block live). Once the blocks are on the stack it succeeds: a failed id
 * query or record leaves them uncovered (usable on the stream, by others after a
 * synchronization), its error cleared. */
crmm_status fs_free_lists_push(fs_free_lists *fl, fs_stream_key *key, void *const *ptrs, size_t n);

/* Give `n` blocks back that no stream has pending work on (fs_free_lists.ready): no CUDA call.
 * CRMM_ERROR_OUT_OF_MEMORY when the stack cannot grow (the blocks stay unavailable until the
 * resource is destroyed). */
crmm_status fs_free_lists_push_ready(fs_free_lists *fl, void *const *ptrs, size_t n);

/* Give `n` blocks back that work queued on some stream, which may be destroyed, may still use
 * (fs_free_lists.waiting): no CUDA call; ready after the next fs_free_lists_synchronize (for
 * host-only lists, at once). CRMM_ERROR_OUT_OF_MEMORY when the stack cannot grow (the blocks stay
 * unavailable until the resource is destroyed). */
crmm_status fs_free_lists_push_waiting(fs_free_lists *fl, void *const *ptrs, size_t n);

/* Wait until the device has finished all work (cudaDeviceSynchronize, which names no stream); then
 * every free block is covered and the waiting ones are ready. CRMM_ERROR_CUDA when that fails
 * (nothing changes). No CUDA call for host-only lists. */
crmm_status fs_free_lists_synchronize(fs_free_lists *fl);

/* Wait until every block's last use has completed (the events; the device when some block is
 * uncovered); then destroy the events (no CUDA call when `cuda_ok` is false) and free the
 * stacks. */
void fs_free_lists_destroy(fs_free_lists *fl, bool cuda_ok);

#endif
