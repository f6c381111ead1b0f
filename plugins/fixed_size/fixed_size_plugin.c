/* fixed_size_plugin.c — the `fixed_size` plugin: equal blocks carved from large upstream chunks
 * (RMM's fixed_size_memory_resource).
 *
 * Each upstream allocation ("chunk") is `blocks_to_preallocate` blocks of `block_size` bytes
 * (rounded up to 256); the first chunk is taken at create. Any request up to the block size gets
 * one whole block from a stream-ordered free list (fixed_size_free_lists.c); a larger one fails
 * with CRMM_ERROR_OUT_OF_MEMORY, as RMM's "Maximum allocation size exceeded". When no list has a
 * block the requesting stream may take without a device synchronization, another chunk is
 * allocated on that stream (take_or_grow says when it synchronizes instead). Chunks go back
 * upstream only when the resource is destroyed. One spin lock (common/spin_lock.h: a hand-over
 * costs a cache-line transfer, where a contended mutex puts its waiters to sleep) guards the
 * lists, the chunk array, the live set and the counters; allocate and deallocate each take it
 * once; an allocation makes its one usual CUDA call (the stream's id) before it, a free on a
 * created stream none (fixed_size_free_lists.h); they switch devices only for a default stream
 * (enter_device_for). */
#include "build_config.h"
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/alloc_counters.h>
#include <crmm/cuda_support.h>
#include <crmm/log.h>
#include <crmm/plugin.h>
#include "../common/capture_check.h"
#include "../common/graph_park.h"
#include "../common/plugin_descriptor.h"
#include "../common/spin_lock.h"
#include "fixed_size_free_lists.h"
#include "../common/ptr_set.h"

typedef struct fixed_size_resource {
    crmm_resource base;
    size_t block_size;        /* bytes per block, a multiple of 256 */
    size_t blocks_per_chunk;  /* blocks_to_preallocate */
    size_t chunk_size;        /* block_size * blocks_per_chunk */
    int lock;                 /* spin_lock; guards everything below */
    fs_free_lists free;
    void **chunks;            /* upstream allocations, each chunk_size bytes */
    size_t chunk_count, chunk_capacity;
    uint64_t chunk_peak;
    ptr_set live;         /* blocks handed out: a free of anything else is refused */
    crmm_alloc_counters counters; /* bytes as requested */
    crmm_fork_guard fork_guard;   /* the lock around fork(); prepare NULL until create succeeds */
    const bool *capture_gate; /* open: ask whether a stream is captured (capture_check.h) */
    graph_park park;          /* blocks held for CUDA graphs (graph_park.h; its own lock, taken
                               * after `lock`) */
} fixed_size_resource;

/* Allocate one more chunk on the stream of `key` and put its blocks on that stream's list. Lock
 * held. */
static crmm_status grow(fixed_size_resource *r, fs_stream_key *key)
{
    crmm_cuda_stream_t stream = key->handle;
    if (r->chunk_count == r->chunk_capacity) {
        size_t cap = r->chunk_capacity ? r->chunk_capacity * 2 : 8;
        void **v = realloc(r->chunks, cap * sizeof *v);
        if (!v)
            return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "fixed_size: malloc failed");
        r->chunks = v;
        r->chunk_capacity = cap;
    }
    /* upstream first: a chunk it cannot give costs no bookkeeping here (blocks_to_preallocate
     * may be huge), and the free list then grows only with blocks that exist */
    void *chunk;
    crmm_status st = crmm_resource_allocate(r->base.upstream, r->chunk_size, stream, &chunk);
    if (st != CRMM_OK) {
        char sz[32], bs[32];
        return crmm_error_add_context("fixed_size: cannot grow by %zu blocks of %s (%s)", r->blocks_per_chunk,
                                      crmm_format_size(r->block_size, bs, sizeof bs),
                                      crmm_format_size(r->chunk_size, sz, sizeof sz));
    }
    /* Pushed from the last block down, in batches, so that blocks are handed out in address
     * order. When a later batch cannot be pushed, the chunk stays (its pushed blocks are in use
     * from the list) and is given back at destroy. */
    void *batch[256];
    size_t left = r->blocks_per_chunk;
    while (left > 0) {
        size_t n = left < 256 ? left : 256;
        for (size_t i = 0; i < n; i++)
            batch[i] = (char *)chunk + (left - 1 - i) * r->block_size;
        uint64_t before = r->free.free_blocks;
        /* fresh memory during a capture is ready for any stream: no list (CUDA refuses a
         * captured stream's id), no event */
        st = r->free.capturing ? fs_free_lists_push_ready(&r->free, batch, n) : fs_free_lists_push(&r->free, key, batch, n);
        if (r->free.free_blocks != before) /* on the stack, even when recording the event failed */
            left -= n;
        if (st != CRMM_OK)
            break;
    }
    /* under capture the chunk cannot go back on the captured stream (the upstream would refuse or
     * tie the free to the graph): it stays, as a partly pushed one does */
    if (st != CRMM_OK && left == r->blocks_per_chunk && !r->free.capturing) {
        crmm_resource_deallocate(r->base.upstream, chunk, r->chunk_size, stream);
        return st;
    }
    r->chunks[r->chunk_count++] = chunk;
    if (r->chunk_count > r->chunk_peak)
        r->chunk_peak = r->chunk_count;
    return st;
}

/* No block for the stream of `key` without a wait: the free blocks are all uncovered ones of
 * other streams (fixed_size_free_lists.h). While they are fewer than half of all blocks (and
 * fewer than a chunk's), grow by a chunk: streams that go on freeing cover theirs soon, and
 * streams side by side each keep fewer than record_every uncovered. Once they are that many
 * (streams that stopped freeing, or were destroyed, left them), or when upstream refuses,
 * synchronize the device (under the lock: this is the last resort) so that every free block is
 * usable, and take one. Lock held. */
static crmm_status take_or_grow(fixed_size_resource *r, fs_stream_key *key, void **ptr)
{
    crmm_status st = CRMM_ERROR_NOT_FOUND;
    uint64_t half = (uint64_t)r->chunk_count * r->blocks_per_chunk / 2;
    uint64_t limit = half > r->blocks_per_chunk ? half : r->blocks_per_chunk;
    if (r->free.uncovered < limit && (st = grow(r, key)) == CRMM_OK)
        return fs_free_lists_pop(&r->free, key, ptr);
    if (r->free.uncovered == 0) /* (waiting blocks count as uncovered) */
        return st;
    crmm_status sync = fs_free_lists_synchronize(&r->free);
    if (sync != CRMM_OK)
        return st == CRMM_ERROR_NOT_FOUND ? sync : st; /* the growth's error, when there was one */
    return fs_free_lists_pop(&r->free, key, ptr);
}

/* Make the resource's device current for CUDA calls (nothing for host-only upstreams). */
static crmm_status enter_device(const fixed_size_resource *r, crmm_device_guard *g)
{
    g->changed = 0;
    if (r->free.host_only)
        return CRMM_OK;
    return crmm_cuda_device_enter(r->base.device, g);
}

/* The default streams (NULL, cudaStreamLegacy, cudaStreamPerThread) name a stream of whichever
 * device is current, so around calls that pass one the resource's device is made current; a
 * created stream carries its device, and nothing is switched for it (the common case costs no
 * CUDA call here). */
static crmm_status enter_device_for(const fixed_size_resource *r, crmm_cuda_stream_t stream, crmm_device_guard *g)
{
    g->changed = 0;
    if (r->free.host_only || (uintptr_t)stream > (uintptr_t)CRMM_CUDA_STREAM_PER_THREAD)
        return CRMM_OK;
    return crmm_cuda_device_enter(r->base.device, g);
}

static const char *who(const fixed_size_resource *r, char *buf, size_t n)
{
    snprintf(buf, n, "fixed_size '%s'", r->base.name);
    return buf;
}

/* Whether `stream` is being captured into a CUDA graph; then *graph is the graph's record, which
 * owns what the capture allocates and holds what it frees (docs/cuda-graphs.md). */
static crmm_status capture_of_slow(fixed_size_resource *r, crmm_cuda_stream_t stream, park_graph **graph)
{
    capture_check_info cap;
    if (!capture_check_query(stream, &cap))
        return CRMM_OK;
    char label[96];
    return graph_park_graph(&r->park, &cap, who(r, label, sizeof label), graph);
}

/* While the gate is closed: one load and one branch. */
static inline crmm_status capture_of(fixed_size_resource *r, crmm_cuda_stream_t stream, park_graph **graph)
{
    *graph = NULL;
    return capture_check_gate_open(r->capture_gate) ? capture_of_slow(r, stream, graph) : CRMM_OK;
}

/* Under capture: a block the capture freed on this stream (the graph orders the two), else one
 * from the stream's own stack, else a new chunk (upstream in the relaxed capture mode), never a
 * wait for the device or another stream. Lock held. */
static crmm_status take_under_capture(fixed_size_resource *r, fs_stream_key *key, park_graph *graph, void **ptr)
{
    if (graph_park_reuse(&r->park, graph, key->handle, 0, true, ptr)) /* every block is alike */
        return CRMM_OK;
    r->free.capturing = true;
    crmm_status st = fs_free_lists_pop(&r->free, key, ptr);
    if (st == CRMM_ERROR_NOT_FOUND && (st = grow(r, key)) == CRMM_OK)
        st = fs_free_lists_pop(&r->free, key, ptr);
    if (st == CRMM_OK) {
        char label[96];
        /* on failure not the graph's: back on the stream's own stack (which orders it after the
         * eager work that freed it; no event under capture, and a push that succeeds records no
         * error); only if that too fails is it out of use until destroy */
        if ((st = graph_park_own(&r->park, graph, *ptr, who(r, label, sizeof label))) != CRMM_OK &&
            fs_free_lists_push(&r->free, key, ptr, 1) != CRMM_OK) {
            crmm_log(CRMM_LOG_WARN, "fixed_size '%s': a block is out of use until destroy: %s", r->base.name,
                     crmm_last_error());
            st = crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: malloc failed (the map of a graph's blocks)", label);
        }
    }
    r->free.capturing = false;
    if (st != CRMM_OK)
        crmm_error_add_context("fixed_size '%s': allocating on stream %p while it is captured into a CUDA graph "
                               "(no block of that stream is free and the resource cannot grow)",
                               r->base.name, (void *)key->handle);
    return st;
}

/* Blocks of destroyed graphs (graph_park_collect): those only the graph used are ready for any
 * stream (its launches are over); those eager work used wait for the next device
 * synchronization (the stream they were freed on may be destroyed: no list of its can be named).
 * Lock held. */
static void take_back_parked(fixed_size_resource *r, graph_park_entry *back, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        void *const *ptr = &back[i].ptr;
        if ((back[i].eager ? fs_free_lists_push_waiting(&r->free, ptr, 1) : fs_free_lists_push_ready(&r->free, ptr, 1)) !=
            CRMM_OK)
            crmm_clear_error(); /* out of use until destroy */
    }
}

static crmm_status fixed_size_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    fixed_size_resource *r = (fixed_size_resource *)self;
    if (bytes > r->block_size) {
        char want[32], bs[32];
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY,
                              "fixed_size '%s': failed to allocate %s (maximum allocation size exceeded: block size %s)",
                              self->name, crmm_format_size(bytes, want, sizeof want),
                              crmm_format_size(r->block_size, bs, sizeof bs));
    }
    if (!r->free.host_only && crmm_process_exiting())
        return crmm_set_error(CRMM_ERROR_STATE, "fixed_size '%s': the process is exiting: no device allocation", self->name);
    park_graph *graph;
    crmm_status st = capture_of(r, stream, &graph);
    if (st != CRMM_OK)
        return st;
    crmm_device_guard g;
    if ((st = enter_device_for(r, stream, &g)) != CRMM_OK)
        return st;
    fs_stream_key key = {stream, 0, false}; /* under capture the handle alone (no id: CUDA refuses it) */
    if (!graph && (st = fs_free_lists_key(&r->free, stream, &key)) != CRMM_OK) { /* before the lock: a CUDA call */
        crmm_cuda_device_restore(&g);
        return st;
    }
    size_t nback = 0;
    graph_park_entry *back = graph ? NULL : graph_park_collect(&r->park, &nback);
    int mode = -1;
    bool serving = false;
    if (graph) {
        capture_check_relax_mode(&mode);
        serving = capture_check_enter_capture();
    }
    spin_lock(&r->lock);
    take_back_parked(r, back, nback);
    if (graph) {
        st = take_under_capture(r, &key, graph, ptr);
    } else {
        st = fs_free_lists_pop(&r->free, &key, ptr);
        if (st == CRMM_ERROR_NOT_FOUND)
            st = take_or_grow(r, &key, ptr);
    }
    if (st == CRMM_OK && !ptr_set_add(&r->live, (uintptr_t)*ptr)) {
        bool parked;
        if (!graph) /* back where it came from */
            fs_free_lists_push(&r->free, &key, ptr, 1);
        else /* the graph's now: held for it, as if the capture freed it (no list can take it) */
            graph_park_free(&r->park, graph, *ptr, bytes, stream, &parked);
        st = crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "fixed_size '%s': malloc failed (live set)", self->name);
    }
    if (st == CRMM_OK)
        crmm_counters_add(&r->counters, bytes, CRMM_COUNT_LOCKED);
    spin_unlock(&r->lock);
    if (graph) {
        capture_check_leave_capture(serving);
        capture_check_restore_mode(mode);
    }
    if (back)
        free(back);
    crmm_cuda_device_restore(&g);
    return st;
}

static crmm_status fixed_size_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    fixed_size_resource *r = (fixed_size_resource *)self;
    if (bytes > r->block_size)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "fixed_size '%s': deallocate of %zu bytes at %p: larger than the block size %zu, not from this resource",
                              self->name, bytes, ptr, r->block_size);
    park_graph *graph;
    crmm_status st = capture_of(r, stream, &graph);
    if (st != CRMM_OK)
        return st;
    /* once the process is exiting no CUDA call: the block goes upstream with its chunk; under
     * capture it is held for the graph */
    bool push = (r->free.host_only || !crmm_process_exiting()) && !graph;
    crmm_device_guard g = {-1, 0};
    fs_stream_key key;
    st = push ? enter_device_for(r, stream, &g) : CRMM_OK;
    if (st == CRMM_OK && push)
        st = fs_free_lists_push_key(&r->free, stream, &key); /* before the lock: a CUDA call for a default stream */
    if (st != CRMM_OK) {
        crmm_cuda_device_restore(&g);
        return st;
    }
    spin_lock(&r->lock);
    /* The block leaves the live set only once a list or a graph holds it: a free that fails
     * (malloc, an event for a new stream) leaves it live, to be freed again. */
    bool known = ptr_set_has(&r->live, (uintptr_t)ptr);
    bool parked = false;
    if (known && (st = graph_park_free(&r->park, graph, ptr, bytes, stream, &parked)) != CRMM_OK)
        crmm_error_add_context("fixed_size '%s'", self->name); /* a block freed for a graph */
    if (known && st == CRMM_OK && push && !parked)
        st = fs_free_lists_push(&r->free, &key, &ptr, 1);
    if (known && st == CRMM_OK) {
        ptr_set_remove(&r->live, (uintptr_t)ptr);
        /* a free with another size than allocated (within the block size) cannot be told from
         * a right one: the counters stop at zero instead of wrapping */
        crmm_counters_sub(&r->counters, bytes, CRMM_COUNT_LOCKED | CRMM_COUNT_FLOOR0);
    }
    spin_unlock(&r->lock);
    crmm_cuda_device_restore(&g);
    if (!known)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                              "fixed_size '%s': deallocate of %p: not a block it handed out (double free?)", self->name,
                              ptr);
    return st;
}

static crmm_status fixed_size_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    fixed_size_resource *r = (fixed_size_resource *)self;
    if (crmm_counters_query(&r->counters, what, out) == CRMM_OK)
        return CRMM_OK;
    spin_lock(&r->lock);
    uint64_t chunks = r->chunk_count, peak = r->chunk_peak, free_blocks = r->free.free_blocks;
    spin_unlock(&r->lock);
    switch (what) {
    case CRMM_QUERY_BYTES_RESERVED: *out = chunks * r->chunk_size; return CRMM_OK;
    case CRMM_QUERY_BYTES_RESERVED_PEAK: *out = peak * r->chunk_size; return CRMM_OK;
    case CRMM_QUERY_BYTES_FREE: *out = free_blocks * r->block_size; return CRMM_OK;
    case CRMM_QUERY_LARGEST_FREE_BLOCK: *out = free_blocks ? r->block_size : 0; return CRMM_OK;
    case CRMM_QUERY_UPSTREAM_BLOCKS: *out = chunks; return CRMM_OK;
    case CRMM_QUERY_MAXIMUM_SIZE: return crmm_resource_query_upstream(self, what, out); /* all chunks come from it */
    default: return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "fixed_size resource cannot answer query %d", (int)what);
    }
}

static void fixed_size_destroy(crmm_resource *self)
{
    fixed_size_resource *r = (fixed_size_resource *)self;
    if (r->fork_guard.prepare)
        crmm_fork_guard_remove(&r->fork_guard);
    crmm_resource_report_leaks(self, (uint64_t)r->counters.count, (uint64_t)r->counters.bytes);
    bool cuda_ok = !r->free.host_only && !crmm_process_exiting();
    crmm_device_guard g = {-1, 0};
    if (cuda_ok && enter_device(r, &g) != CRMM_OK)
        cuda_ok = false;
    /* waits for the last use of every free block before the chunks go back */
    fs_free_lists_destroy(&r->free, cuda_ok);
    graph_park_destroy(&r->park); /* blocks held for graphs go upstream with their chunks */
    for (size_t i = 0; i < r->chunk_count; i++)
        crmm_resource_deallocate(self->upstream, r->chunks[i], r->chunk_size, NULL);
    crmm_cuda_device_restore(&g);
    free(r->chunks);
    ptr_set_free(&r->live);
    free(r);
}

/* no trim: like RMM, its chunks are kept until destroy; a trim goes on to the upstream */
static const crmm_resource_ops fixed_size_ops = {
    .allocate = fixed_size_allocate, .deallocate = fixed_size_deallocate, .query = fixed_size_query,
    .destroy = fixed_size_destroy,
};

/* The parameters, as crmm_params_parse fills them from fixed_size_params. */
/* blocks_to_preallocate at most: a chunk of small blocks stays a sane size (256 MiB of 256 B blocks) */
#define FIXED_SIZE_MAX_BLOCKS_PER_CHUNK ((uint64_t)1 << 20)

/* A stream's event is recorded once it has freed this many blocks since the last record: an
 * eighth of a chunk, at most 16, at least 1. Fewer than that per stream wait for the stream's next
 * record (or a synchronization) before another stream may take them. */
static size_t fixed_size_record_every(size_t blocks_per_chunk)
{
    size_t n = blocks_per_chunk / 8;
    return n < 1 ? 1 : n > 16 ? 16 : n;
}

typedef struct fixed_size_config {
    uint64_t block_size;
    uint64_t blocks_to_preallocate;
} fixed_size_config;

/* The block size rounded up to 256 B into *rounded, and a chunk of `blocks` of them addressable;
 * CRMM_ERROR_CONFIG otherwise. Shared by create and validate, so check-config says the same. */
static crmm_status chunk_fits(uint64_t block_size, uint64_t blocks, uint64_t *rounded)
{
    if (block_size > SIZE_MAX - (CRMM_ALLOCATION_ALIGNMENT - 1))
        return crmm_set_error(CRMM_ERROR_CONFIG, "fixed_size: block_size %llu is too large", (unsigned long long)block_size);
    block_size = (block_size + CRMM_ALLOCATION_ALIGNMENT - 1) & ~(uint64_t)(CRMM_ALLOCATION_ALIGNMENT - 1);
    if (blocks > SIZE_MAX / block_size)
        return crmm_set_error(CRMM_ERROR_CONFIG, "fixed_size: %llu blocks of %llu bytes do not fit in memory",
                              (unsigned long long)blocks, (unsigned long long)block_size);
    *rounded = block_size;
    return CRMM_OK;
}

/* crmm_plugin.validate: the chunk must fit (a percentage block size is known on the device). */
static crmm_status fixed_size_validate(const crmm_params *params, bool host_memory, const char **key)
{
    (void)host_memory;
    uint64_t block_size, blocks, rounded;
    if (crmm_params_size_percent(params, "block_size", NULL) ||
        crmm_params_get_size(params, "block_size", &block_size) != CRMM_OK ||
        crmm_params_get_uint(params, "blocks_to_preallocate", &blocks) != CRMM_OK)
        return CRMM_OK;
    crmm_status st = chunk_fits(block_size, blocks, &rounded);
    if (st != CRMM_OK)
        *key = "blocks_to_preallocate";
    return st;
}

static crmm_status fixed_size_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    fixed_size_config cfg = {0};
    crmm_status st = crmm_params_parse(params, &cfg); /* "N%" needs a device; ranges checked */
    if (st != CRMM_OK)
        return st;
    uint64_t block_size = 0, blocks = cfg.blocks_to_preallocate;
    if ((st = chunk_fits(cfg.block_size, blocks, &block_size)) != CRMM_OK)
        return st;
    fixed_size_resource *r = calloc(1, sizeof *r);
    if (!r)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "fixed_size: malloc failed");
    r->block_size = (size_t)block_size;
    r->blocks_per_chunk = (size_t)blocks;
    r->chunk_size = r->block_size * r->blocks_per_chunk;
    /* An upstream that is not device memory is host-only: no streams, no events. */
    graph_park_init(&r->park);
    r->capture_gate = capture_check_gate(!(upstream->flags & CRMM_RESOURCE_DEVICE_ACCESSIBLE) ? CAPTURE_CHECK_NEVER
                                                                                              : CAPTURE_CHECK_AUTO);
    fs_free_lists_init(&r->free, !(upstream->flags & CRMM_RESOURCE_DEVICE_ACCESSIBLE), upstream->device,
                       fixed_size_record_every(r->blocks_per_chunk));
    crmm_resource_init(&r->base, &fixed_size_ops, "fixed_size", upstream->flags, upstream->device, upstream);
    crmm_device_guard g;
    st = enter_device(r, &g);
    if (st == CRMM_OK) {
        fs_stream_key key;
        if ((st = fs_free_lists_key(&r->free, NULL, &key)) == CRMM_OK)
            st = grow(r, &key); /* the first chunk, as RMM does at construction */
        crmm_cuda_device_restore(&g);
    }
    if (st != CRMM_OK) {
        crmm_status keep = crmm_last_status();
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", crmm_last_error());
        r->base.ops->destroy(&r->base);    /* frees what grow took */
        crmm_resource_release(upstream);   /* the reference crmm_resource_init took */
        return crmm_set_error(keep, "%s", msg);
    }
    graph_park_add_fork_guard(&r->park); /* older than the lock's guard: taken after it */
    spin_lock_add_fork_guard(&r->lock, &r->fork_guard);
    *out = &r->base;
    return CRMM_OK;
}

/* Blocks per chunk: at least one, and few enough that a chunk of small blocks stays a sane size. */
static const crmm_param fixed_size_params[] = {
    {.key = "block_size", .type = CRMM_PARAM_SIZE, .default_value = "1MiB",
     .help = "bytes per block (rounded up to 256); larger requests fail",
     .offset = offsetof(fixed_size_config, block_size), .min = 1, .max = SIZE_MAX - (CRMM_ALLOCATION_ALIGNMENT - 1)},
    {.key = "blocks_to_preallocate", .type = CRMM_PARAM_UINT, .default_value = "128",
     .help = "blocks per upstream allocation (one at create, more on demand)",
     .offset = offsetof(fixed_size_config, blocks_to_preallocate), .min = 1, .max = FIXED_SIZE_MAX_BLOCKS_PER_CHUNK},
    {NULL},
};

PLUGIN_DESCRIPTOR(.name = "fixed_size", .upstream = CRMM_UPSTREAM_REQUIRED, .params = fixed_size_params,
                  .config_size = sizeof(fixed_size_config), .validate = fixed_size_validate,
                  .create = fixed_size_create,
                  .description = "equal-size blocks from large upstream chunks, stream-ordered free lists (RMM fixed_size_memory_resource); refuses double and foreign frees and sizes above the block; a smaller wrong size frees the block (counters stop at 0)")
