/* arena_plugin.c — the `arena` plugin: a suballocator for many threads, after RMM's
 * arena_memory_resource.
 *
 * It takes `arena_size` bytes from its upstream once and never grows. Requests up to 1/8 of a
 * superblock come from the calling thread's arena (per thread, and per stream for device memory:
 * arena_thread_cache.c) without a lock; larger ones go to the global arena (arena_global.c),
 * under the lock of one of its shards: the thread arena's home shard first. Each of `shards`
 * (default up to 8) has its own lock, so that threads taking large blocks do not wait for each
 * other, and a free takes the lock of the shard that owns the address. A request too large for
 * any one shard still succeeds when free pages run on across shard boundaries (it takes every
 * shard lock), so the largest block that can be allocated is still the arena's largest free
 * run, as with one shard.
 * Over device memory a large block freed on a stream is free at once, tagged with that stream,
 * and reused on another stream only after a device synchronization (arena_stream_order.c).
 * When a request fails, the arena defragments (takes the empty superblocks back from every
 * thread arena and merges them) and tries once more; if that fails too it writes its state to the
 * dump file when asked to (arena_dump.c) and returns CRMM_ERROR_OUT_OF_MEMORY. This file is the
 * glue: parameters, create and destroy, the ops table, queries and control ops. */
#include "build_config.h"
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/arena.h>
#include <crmm/cuda_support.h>
#include <crmm/log.h>
#include "../common/capture_check.h"
#include "../common/device_default.h"
#include "../common/plugin_descriptor.h"
#include "arena_thread_cache.h"

#define ARENA_MIN_SUPERBLOCK ((uint64_t)64 << 10)
#define ARENA_MAX_SUPERBLOCK ((uint64_t)1 << 30)
/* shards by default: one per 64 superblocks of the arena, at most this many */
#define ARENA_DEFAULT_SHARDS 8u
#define ARENA_SUPERBLOCKS_PER_DEFAULT_SHARD 64u

static crmm_status arena_out_of_memory(arena_resource *r, size_t bytes)
{
    if (r->dump_on_failure) {
        crmm_status st = arena_dump_write(r, NULL, bytes);
        if (st != CRMM_OK)
            crmm_log(CRMM_LOG_WARN, "%s", crmm_last_error());
    }
    size_t free_bytes, largest;
    arena_usage(r, &free_bytes, &largest);
    char want[32], size[32], free_sz[32], big[32];
    return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY,
                          "%s: failed to allocate %s (arena size %s, %s free, largest free block %s)", arena_who(r),
                          crmm_format_size(bytes, want, sizeof want), crmm_format_size(r->arena_size, size, sizeof size),
                          crmm_format_size(free_bytes, free_sz, sizeof free_sz),
                          crmm_format_size(largest, big, sizeof big));
}

static crmm_status arena_try_allocate(arena_resource *r, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    if (bytes <= r->small_max)
        return arena_cache_allocate(r, bytes, stream, ptr);
    return arena_cache_allocate_large(r, bytes, stream, ptr);
}

static void arena_defragment(arena_resource *r)
{
    __atomic_add_fetch(&r->defragmentations, 1, __ATOMIC_RELAXED);
    arena_cache_reclaim(r);
}

/* Whether `stream` is being captured into a CUDA graph; then *graph is the graph's record, which
 * owns what the capture allocates and holds what it frees (docs/cuda-graphs.md). */
static crmm_status capture_of(arena_resource *r, crmm_cuda_stream_t stream, park_graph **graph)
{
    *graph = NULL;
    capture_check_info cap;
    if (!capture_check_query(stream, &cap))
        return CRMM_OK;
    return graph_park_graph(&r->park, &cap, arena_who(r), graph);
}

static crmm_status arena_free_now(arena_resource *r, void *ptr, size_t bytes, crmm_cuda_stream_t stream);

/* Keep entries back[0, n) eager work used for the next try (they have left park: arena owns them
 * now); false when there is no memory for that (they stay out of use until destroy). */
static bool keep_eager(arena_resource *r, const graph_park_entry *back, size_t n)
{
    pthread_mutex_lock(&r->eager_lock);
    graph_park_entry *grown = realloc(r->eager, (r->neager + n) * sizeof *grown);
    if (grown) {
        r->eager = grown;
        memcpy(r->eager + r->neager, back, n * sizeof *back);
        r->neager += n;
        __atomic_store_n(&r->eager_waiting, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&r->eager_lock);
    return grown != NULL;
}

/* Blocks of destroyed graphs come back, freed on the caller's stream (not captured, alive: the
 * only stream the arena may name). The graph's launches are over; when eager work used some of
 * them (graph_park_entry), on a stream that may be destroyed, the device is synchronized first;
 * should that fail, those wait for the next allocation's try (keep_eager). */
static void take_back_parked(arena_resource *r, crmm_cuda_stream_t stream)
{
    size_t n;
    graph_park_entry *back = graph_park_collect(&r->park, &n);
    graph_park_entry *kept = NULL;
    size_t nkept = 0;
    if (__atomic_load_n(&r->eager_waiting, __ATOMIC_RELAXED)) {
        pthread_mutex_lock(&r->eager_lock);
        kept = r->eager, nkept = r->neager;
        r->eager = NULL, r->neager = 0;
        __atomic_store_n(&r->eager_waiting, 0, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&r->eager_lock);
    }
    bool eager = nkept > 0;
    for (size_t i = 0; i < n; i++)
        eager |= back[i].eager;
    bool synced = !eager || !r->uses_cuda;
    if (!synced) {
        /* a failed synchronization is logged; the allocation this serves goes on, and the thread's
         * error stays what it was (only a failing call sets it) */
        crmm_status had = crmm_last_status();
        char *message = had != CRMM_OK ? strdup(crmm_last_error()) : NULL;
        synced = arena_device_synchronize(r) == CRMM_OK;
        if (!synced && had != CRMM_OK && message)
            crmm_set_error(had, "%s", message);
        else if (!synced)
            crmm_clear_error();
        free(message);
    }
    for (int list = 0; list < 2; list++) {
        graph_park_entry *e = list ? kept : back;
        size_t m = list ? nkept : n, waiting = 0;
        for (size_t i = 0; i < m; i++) {
            if (e[i].eager && !synced) {
                e[waiting++] = e[i]; /* compacted at the front, for keep_eager */
                continue;
            }
            arena_cache_count(r, stream, (int64_t)e[i].bytes); /* counted free when parked */
            if (arena_free_now(r, e[i].ptr, e[i].bytes, stream) != CRMM_OK)
                crmm_log(CRMM_LOG_ERROR, "%s: taking back a block of a destroyed CUDA graph: %s", arena_who(r),
                         crmm_last_error());
        }
        if (waiting && !keep_eager(r, e, waiting))
            crmm_log(CRMM_LOG_ERROR, "%s: no memory to keep %zu blocks of a destroyed CUDA graph for later: they stay out "
                                     "of use", arena_who(r), waiting);
    }
    free(back);
    free(kept);
}

static crmm_status arena_allocate_now(arena_resource *r, size_t bytes, crmm_cuda_stream_t stream, void **ptr,
                                      bool capturing)
{
    crmm_status st;
    if (__builtin_expect(bytes <= r->small_max, 1)) {
        st = arena_cache_allocate(r, bytes, stream, ptr);
        if (__builtin_expect(st == CRMM_OK, 1))
            return st;
    } else if (bytes <= r->global.size) {
        st = arena_cache_allocate_large(r, bytes, stream, ptr);
        if (st == CRMM_OK)
            return st;
    } else {
        return arena_out_of_memory(r, bytes); /* can never fit: no use defragmenting */
    }
    if (st != CRMM_ERROR_OUT_OF_MEMORY)
        return st;
    if (capturing) { /* defragmenting waits for the device; a full arena recorded no error */
        arena_out_of_memory(r, bytes);
        return crmm_error_add_context("%s: allocating %zu bytes on stream %p while it is captured into a CUDA graph, "
                                      "where defragmenting would wait for the device (give the arena more memory "
                                      "before the capture)",
                                      arena_who(r), bytes, (void *)stream);
    }
    arena_defragment(r);
    st = arena_try_allocate(r, bytes, stream, ptr);
    if (st == CRMM_ERROR_OUT_OF_MEMORY)
        return arena_out_of_memory(r, bytes);
    return st;
}

/* Under capture: a block the capture freed on this stream with the same size (the graph orders
 * the two; layers repeat their shapes), else the usual paths with every wait refused
 * (capture_check_no_wait) and the thread's capture mode relaxed; the block is then the graph's. */
static crmm_status capture_allocate(arena_resource *r, size_t bytes, crmm_cuda_stream_t stream, park_graph *graph,
                                    void **ptr)
{
    if (graph_park_reuse(&r->park, graph, stream, bytes, false, ptr)) {
        arena_cache_count(r, stream, (int64_t)bytes); /* counted free when it was parked */
        return CRMM_OK;
    }
    int mode;
    capture_check_relax_mode(&mode);
    bool serving = capture_check_enter_capture();
    crmm_status st = arena_allocate_now(r, bytes, stream, ptr, true);
    capture_check_leave_capture(serving);
    if (st == CRMM_OK && (st = graph_park_own(&r->park, graph, *ptr, arena_who(r))) != CRMM_OK) {
        serving = capture_check_enter_capture();
        arena_free_now(r, *ptr, bytes, stream); /* on the stream it came from: no wait */
        capture_check_leave_capture(serving);
    }
    capture_check_restore_mode(mode);
    return st;
}

/* The arena's records (thread arenas, superblock and span records) are host memory: when malloc
 * fails for one, the allocation is out of memory (docs/contracts.md), as a failure callback's
 * retry_on expects; inside, CRMM_ERROR_BAD_ALLOC keeps it apart from a full arena, which
 * defragments first. The message stays. */
static crmm_status out_of_host_memory_is_out_of_memory(crmm_status st)
{
    if (__builtin_expect(st == CRMM_ERROR_BAD_ALLOC, 0))
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s", crmm_last_error_detail());
    return st;
}

static crmm_status arena_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    arena_resource *r = (arena_resource *)self;
    park_graph *graph = NULL;
    if (capture_check_gate_open(r->capture_gate)) {
        crmm_status st = capture_of(r, stream, &graph);
        if (st != CRMM_OK)
            return st;
        if (graph)
            return out_of_host_memory_is_out_of_memory(capture_allocate(r, bytes, stream, graph, ptr));
    }
    if (__builtin_expect(graph_park_pending(&r->park) || __atomic_load_n(&r->eager_waiting, __ATOMIC_RELAXED), 0))
        take_back_parked(r, stream);
    crmm_status st = arena_allocate_now(r, bytes, stream, ptr, false);
    return __builtin_expect(st == CRMM_OK, 1) ? st : out_of_host_memory_is_out_of_memory(st);
}

static crmm_status not_ours(const arena_resource *r, const void *ptr)
{
    return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: %p was not allocated by this arena", arena_who(r), ptr);
}

/* A free of a block that is not live (allocated == 0) or was allocated with another size. */
static crmm_status refused_free(const arena_resource *r, const void *ptr, size_t bytes, size_t allocated)
{
    if (allocated)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: %p was allocated with %zu bytes, freed with %zu",
                              arena_who(r), ptr, allocated, bytes);
    return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: %p is not a live block of this arena (freed twice?)",
                          arena_who(r), ptr);
}

/* The slab of page-map entry e (a small block's), or NULL (a large block's, or none). */
static arena_slab *slab_of(uintptr_t e)
{
    if (!(e & ARENA_ENTRY_SPAN))
        return (arena_slab *)e;
    arena_span *span = arena_entry_span(e);
    if (__atomic_load_n(&span->kind, __ATOMIC_RELAXED) == ARENA_SPAN_SUPERBLOCK)
        return __atomic_load_n(&span->slab, __ATOMIC_RELAXED);
    return NULL;
}

/* Whether arena_free_now would take a free of ptr with `bytes`, checked without freeing: a block
 * parked for a graph stays the arena's, so a free it would refuse must be refused before it is
 * parked (the arena keeps no set of live blocks; its bitmaps and spans say which are). */
static crmm_status check_free(arena_resource *r, void *ptr, size_t bytes)
{
    uintptr_t e = arena_global_entry(&r->global, ptr);
    if (!e)
        return not_ours(r, ptr);
    arena_slab *sb = slab_of(e);
    size_t allocated;
    if (sb) {
        uint32_t idx;
        crmm_status st = arena_cache_check(r, sb, ptr, bytes, &idx);
        if (st == CRMM_OK && arena_slab_is_free(sb, idx))
            return refused_free(r, ptr, bytes, 0);
        return st;
    }
    if (arena_global_check_large(&r->global, ptr, bytes, &allocated) != CRMM_OK)
        return refused_free(r, ptr, bytes, allocated);
    return CRMM_OK;
}

static crmm_status arena_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    arena_resource *r = (arena_resource *)self;
    park_graph *graph = NULL;
    if (capture_check_gate_open(r->capture_gate)) {
        crmm_status st = capture_of(r, stream, &graph);
        if (st != CRMM_OK)
            return st;
    }
    if (graph || __builtin_expect(__atomic_load_n(&r->park.owned_count, __ATOMIC_RELAXED) != 0, 0)) {
        crmm_status st = check_free(r, ptr, bytes);
        if (st != CRMM_OK)
            return st;
        bool parked;
        st = graph_park_free(&r->park, graph, ptr, bytes, stream, &parked);
        if (parked) { /* held for the graph: out of the counts of allocated memory now */
            if (st == CRMM_OK)
                arena_cache_count(r, stream, -(int64_t)bytes);
            else
                crmm_error_add_context("%s", arena_who(r));
            return st;
        }
    }
    return arena_free_now(r, ptr, bytes, stream);
}

static crmm_status arena_free_now(arena_resource *r, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    uintptr_t e = arena_global_entry(&r->global, ptr);
    if (__builtin_expect(e != 0 && !(e & ARENA_ENTRY_SPAN), 1))
        return arena_cache_deallocate(r, (arena_slab *)e, ptr, bytes, stream);
    if (!e)
        return not_ours(r, ptr);
    arena_slab *sb = slab_of(e);
    if (sb)
        return arena_cache_deallocate(r, sb, ptr, bytes, stream);
    /* any size: a large block freed with a small one is refused there as a wrong size. No wait
     * for the stream: the pages are tagged with it (arena_stream_order.c) */
    arena_stream_id id;
    size_t allocated;
    if (arena_global_free_large(&r->global, ptr, bytes, arena_stream_of(r, stream, &id), &allocated) != CRMM_OK)
        return refused_free(r, ptr, bytes, allocated);
    arena_cache_count(r, stream, -(int64_t)bytes);
    return CRMM_OK;
}

static crmm_status arena_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    arena_resource *r = (arena_resource *)self;
    arena_counts c;
    size_t free_bytes, largest;
    switch (what) {
    case CRMM_QUERY_BYTES_RESERVED:
    case CRMM_QUERY_BYTES_RESERVED_PEAK:
    case CRMM_QUERY_MAXIMUM_SIZE:
        *out = r->arena_size;
        return CRMM_OK;
    case CRMM_QUERY_UPSTREAM_BLOCKS:
        *out = 1;
        return CRMM_OK;
    case CRMM_QUERY_BYTES_FREE:
    case CRMM_QUERY_LARGEST_FREE_BLOCK:
        arena_usage(r, &free_bytes, &largest);
        *out = what == CRMM_QUERY_BYTES_FREE ? free_bytes : largest;
        return CRMM_OK;
    case CRMM_QUERY_BYTES_IN_USE:
    case CRMM_QUERY_BYTES_IN_USE_PEAK:
    case CRMM_QUERY_ALLOCATIONS:
    case CRMM_QUERY_ALLOCATIONS_PEAK:
    case CRMM_QUERY_ALLOCATIONS_TOTAL:
    case CRMM_QUERY_BYTES_TOTAL:
        arena_cache_counts(r, &c);
        switch (what) {
        case CRMM_QUERY_BYTES_IN_USE: *out = (uint64_t)c.bytes; break;
        case CRMM_QUERY_BYTES_IN_USE_PEAK: *out = (uint64_t)c.peak_bytes; break;
        case CRMM_QUERY_ALLOCATIONS: *out = (uint64_t)c.count; break;
        case CRMM_QUERY_ALLOCATIONS_PEAK: *out = (uint64_t)c.peak_count; break;
        case CRMM_QUERY_ALLOCATIONS_TOTAL: *out = c.total_count; break;
        default: *out = c.total_bytes; break;
        }
        return CRMM_OK;
    default:
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "%s cannot answer query %d", arena_who(r), (int)what);
    }
}

/* The global arena cannot shrink below arena_size (it never grew): trim gives the empty
 * superblocks of thread arenas back to it, where they merge into large free spans. */
static crmm_status arena_trim(crmm_resource *self)
{
    arena_cache_reclaim((arena_resource *)self);
    return CRMM_OK;
}

static void arena_get_stats(arena_resource *r, crmm_arena_stats *s)
{
    memset(s, 0, sizeof *s);
    s->arena_size = r->arena_size;
    s->superblock_size = r->superblock_size;
    s->small_max = r->small_max;
    size_t superblocks, large_blocks;
    arena_global_counts(&r->global, &superblocks, &large_blocks);
    s->superblocks = superblocks;
    s->large_blocks = large_blocks;
    s->shards = r->shards;
    size_t free_bytes, largest, arenas, held;
    arena_global_usage(&r->global, &free_bytes, &largest);
    s->global_free_bytes = free_bytes;
    s->global_largest_free = largest;
    arena_cache_holdings(r, &arenas, &held);
    s->thread_arenas = arenas;
    s->superblocks_held = held;
    for (unsigned c = 0; c < r->nclasses; c++) {
        pthread_mutex_lock(&r->classes[c].lock);
        s->superblocks_detached += r->classes[c].detached;
        pthread_mutex_unlock(&r->classes[c].lock);
    }
    s->defragmentations = __atomic_load_n(&r->defragmentations, __ATOMIC_RELAXED);
    s->stream_syncs = __atomic_load_n(&r->global.reuse_syncs, __ATOMIC_RELAXED);
}

static crmm_status arena_get_shard_stats(arena_resource *r, crmm_arena_shard_stats *s)
{
    if (!s)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: CRMM_ARENA_GET_SHARD_STATS needs a crmm_arena_shard_stats",
                              arena_who(r));
    if (s->shard >= r->shards)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: no shard %u (it has %u)", arena_who(r), s->shard,
                              r->shards);
    arena_shard_usage u;
    arena_global_shard_usage(&r->global, s->shard, &u);
    uint32_t shard = s->shard;
    memset(s, 0, sizeof *s);
    s->shard = shard;
    s->offset = u.offset;
    s->size = u.size;
    s->free_bytes = u.free_bytes;
    s->largest_free = u.largest_free;
    s->superblocks = u.superblocks;
    s->large_blocks = u.large_blocks;
    s->large_bytes = u.large_bytes;
    s->thread_arenas = arena_cache_homed(r, shard);
    return CRMM_OK;
}

static crmm_status arena_control(crmm_resource *self, int op, void *arg)
{
    arena_resource *r = (arena_resource *)self;
    switch (op) {
    case CRMM_ARENA_DEFRAGMENT:
        arena_defragment(r);
        return CRMM_OK;
    case CRMM_ARENA_DUMP:
        return arena_dump_write(r, arg, 0);
    case CRMM_ARENA_GET_STATS:
        if (!arg)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: CRMM_ARENA_GET_STATS needs a crmm_arena_stats",
                                  arena_who(r));
        arena_get_stats(r, arg);
        return CRMM_OK;
    case CRMM_ARENA_GET_SHARD_STATS:
        return arena_get_shard_stats(r, arg);
    default:
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "%s has no control operation %d", arena_who(r), op);
    }
}

static void arena_free_state(arena_resource *r)
{
    if (r->classes) {
        for (unsigned c = 0; c < r->nclasses; c++)
            pthread_mutex_destroy(&r->classes[c].lock);
        free(r->classes);
    }
    free(r->dump_file);
    graph_park_destroy(&r->park); /* blocks held for graphs go upstream with the arena */
    free(r->eager);
    pthread_mutex_destroy(&r->eager_lock);
    pthread_mutex_destroy(&r->arenas_lock);
    free(r);
}

static void arena_destroy(crmm_resource *self)
{
    arena_resource *r = (arena_resource *)self;
    arena_registry_remove(r); /* exiting threads leave our thread arenas alone from now on */
    arena_counts c;
    arena_cache_counts(r, &c);
    crmm_resource_report_leaks(self, (uint64_t)c.count, (uint64_t)c.bytes);
    arena_cache_release_all(r);
    arena_slab_pool_fini(&r->slabs);
    /* work on freed memory may still be pending on any stream (frees do not wait) */
    if (r->uses_cuda)
        arena_device_synchronize(r);
    void *base = r->global.base;
    arena_global_fini(&r->global);
    /* all of it back to upstream at once; the upstream skips CUDA once the process exits */
    if (crmm_resource_deallocate(self->upstream, base, r->arena_size, NULL) != CRMM_OK)
        crmm_log(CRMM_LOG_ERROR, "%s: giving the arena back to upstream failed: %s", arena_who(r), crmm_last_error());
    arena_free_state(r);
}

static const crmm_resource_ops arena_ops = {
    .allocate = arena_allocate, .deallocate = arena_deallocate, .query = arena_query, .trim = arena_trim,
    .destroy = arena_destroy, .control = arena_control,
};

/* The parameters, as crmm_params_parse fills them from arena_params. */
typedef struct arena_config {
    uint64_t arena_size;
    uint64_t superblock_size;
    uint64_t shards;
    bool dump_log_on_failure;
    const char *dump_file;
} arena_config;

static bool is_power_of_two(uint64_t x) { return x && !(x & (x - 1)); }

/* The parameters as far as they are known: validate sees them as written (a percentage has no
 * bytes before there is a device), create sees them resolved, arena_size defaulted. */
typedef struct arena_known {
    bool superblock_known;  /* false: a percentage */
    uint64_t superblock;
    bool size_given;        /* given, or defaulted at create */
    bool size_known;        /* in bytes */
    uint64_t size;
    bool shards_given;
    uint64_t shards;
    const char *dump_file;
    int device;             /* what %d of dump_file expands to */
} arena_known;

/* The rules between the arena's parameters, for validate and create: dump_file expands; the
 * superblock is a power of two; over host memory arena_size is given in bytes; the arena holds a
 * superblock in whole pages, and each shard at least one superblock. *key names the parameter. */
static crmm_status arena_rules(const arena_known *k, bool host_memory, const char **key)
{
    char a[32], b[32];
    if (k->dump_file) {
        char expanded[4096];
        *key = "dump_file";
        if (!k->dump_file[0])
            return crmm_set_error(CRMM_ERROR_CONFIG, "arena: dump_file must not be empty");
        if (crmm_expand_file_name(k->dump_file, k->device, expanded, sizeof expanded) != CRMM_OK)
            return crmm_error_add_context("arena: dump_file");
    }
    *key = "superblock_size";
    if (k->superblock_known && !is_power_of_two(k->superblock))
        return crmm_set_error(CRMM_ERROR_CONFIG, "arena: superblock_size: %llu is not a power of two",
                              (unsigned long long)k->superblock);
    *key = "arena_size";
    if (host_memory && (!k->size_given || !k->size_known))
        return crmm_set_error(CRMM_ERROR_CONFIG, "arena: arena_size is required over host memory, in bytes "
                              "(a percentage and the default refer to a device's memory)");
    if (!k->superblock_known || !k->size_known)
        return CRMM_OK; /* compared on the device, once both are bytes */
    uint64_t page = k->superblock / ARENA_PAGES_PER_SUPERBLOCK, usable = k->size / page * page;
    if (usable < k->superblock)
        return crmm_set_error(CRMM_ERROR_CONFIG, "arena: arena_size %s is smaller than one superblock (%s)",
                              crmm_format_size(k->size, a, sizeof a), crmm_format_size(k->superblock, b, sizeof b));
    *key = "shards";
    if (k->shards_given && k->shards > usable / k->superblock)
        return crmm_set_error(CRMM_ERROR_CONFIG, "arena: shards %llu is too many for arena_size %s: each shard needs at "
                              "least one superblock (%s), so at most %llu", (unsigned long long)k->shards,
                              crmm_format_size(usable, a, sizeof a), crmm_format_size(k->superblock, b, sizeof b),
                              (unsigned long long)(usable / k->superblock));
    *key = NULL;
    return CRMM_OK;
}

/* crmm_plugin.validate: arena_rules on the parameters as written. */
static crmm_status arena_validate(const crmm_params *params, bool host_memory, const char **key)
{
    arena_known k = {.device = 0};
    k.superblock_known = !crmm_params_size_percent(params, "superblock_size", NULL) &&
                         crmm_params_get_size(params, "superblock_size", &k.superblock) == CRMM_OK;
    k.size_given = crmm_params_is_set(params, "arena_size");
    k.size_known = k.size_given && !crmm_params_size_percent(params, "arena_size", NULL) &&
                   crmm_params_get_size(params, "arena_size", &k.size) == CRMM_OK;
    k.shards_given = crmm_params_get_uint(params, "shards", &k.shards) == CRMM_OK;
    if (crmm_params_get_string(params, "dump_file", &k.dump_file) != CRMM_OK)
        k.dump_file = NULL;
    crmm_clear_error(); /* a getter without a value said so */
    return arena_rules(&k, host_memory, key);
}

/* Read the parameters into r, checked by arena_rules once they are resolved. */
static crmm_status arena_read_params(const crmm_params *params, crmm_resource *upstream, arena_resource *r)
{
    char a[32];
    arena_config cfg = {0};
    crmm_status st = crmm_params_parse(params, &cfg);
    if (st != CRMM_OK)
        return st;
    uint64_t superblock = cfg.superblock_size, size = cfg.arena_size;
    bool size_given = crmm_params_is_set(params, "arena_size");
    if (!size_given && r->uses_cuda) {
        if ((st = device_default_half_free(upstream->device, arena_who(r), "arena_size", &size)) != CRMM_OK)
            return st;
        size_given = true;
    }
    arena_known k = {.superblock_known = true, .superblock = superblock, .size_given = size_given,
                     .size_known = size_given, .size = size, .shards_given = crmm_params_is_set(params, "shards"),
                     .shards = cfg.shards, .dump_file = cfg.dump_file, .device = r->base.device};
    const char *key;
    if ((st = arena_rules(&k, !r->uses_cuda, &key)) != CRMM_OK)
        return st;
    uint64_t page = superblock / ARENA_PAGES_PER_SUPERBLOCK;
    if (size > SIZE_MAX / 2)
        return crmm_set_error(CRMM_ERROR_CONFIG, "arena: arena_size %s is too large", crmm_format_size(size, a, sizeof a));
    r->arena_size = (size_t)(size / page * page); /* whole pages */
    r->superblock_size = (size_t)superblock;
    uint64_t superblocks = r->arena_size / superblock, shards = cfg.shards;
    if (!k.shards_given) {
        shards = superblocks / ARENA_SUPERBLOCKS_PER_DEFAULT_SHARD;
        shards = shards < 1 ? 1 : shards > ARENA_DEFAULT_SHARDS ? ARENA_DEFAULT_SHARDS : shards;
    }
    r->shards = (unsigned)shards;
    r->small_max = r->superblock_size / 8;
    r->nclasses = arena_size_class(r->small_max) + 1;
    r->dump_on_failure = cfg.dump_log_on_failure;
    r->dump_file = strdup(cfg.dump_file);
    if (!r->dump_file)
        return crmm_set_error(CRMM_ERROR_BAD_ALLOC, "arena: out of host memory");
    return CRMM_OK;
}

static crmm_status arena_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    size_t size = (sizeof(arena_resource) + 63) & ~(size_t)63;
    arena_resource *r = aligned_alloc(64, size);
    if (!r)
        return crmm_set_error(CRMM_ERROR_BAD_ALLOC, "arena: out of host memory");
    memset(r, 0, size);
    pthread_mutex_init(&r->arenas_lock, NULL);
    r->base.device = upstream->device;
    snprintf(r->base.name, sizeof r->base.name, "%s", crmm_params_resource_name(params));
    r->uses_cuda = crmm_resource_is_device_accessible(upstream) && upstream->device >= 0;
    r->capture_gate = capture_check_gate(r->uses_cuda ? CAPTURE_CHECK_AUTO : CAPTURE_CHECK_NEVER);
    graph_park_init(&r->park);
    pthread_mutex_init(&r->eager_lock, NULL);
    crmm_status st = arena_read_params(params, upstream, r);
    if (st == CRMM_OK) {
        r->classes = calloc(r->nclasses, sizeof *r->classes);
        if (!r->classes)
            st = crmm_set_error(CRMM_ERROR_BAD_ALLOC, "arena: out of host memory");
        else
            for (unsigned c = 0; c < r->nclasses; c++)
                pthread_mutex_init(&r->classes[c].lock, NULL);
    }
    if (st != CRMM_OK) {
        arena_free_state(r);
        return st;
    }
    void *base = NULL;
    st = crmm_resource_allocate(upstream, r->arena_size, NULL, &base);
    if (st != CRMM_OK) {
        char sz[32];
        crmm_error_add_context("%s: taking arena_size %s from upstream", arena_who(r),
                               crmm_format_size(r->arena_size, sz, sizeof sz));
        arena_free_state(r);
        return st;
    }
    if ((uintptr_t)base % CRMM_ALLOCATION_ALIGNMENT) {
        crmm_resource_deallocate(upstream, base, r->arena_size, NULL);
        st = crmm_set_error(CRMM_ERROR_BAD_ALLOC, "%s: upstream %s returned %p, not %u-byte aligned", arena_who(r),
                            crmm_resource_kind(upstream), base, CRMM_ALLOCATION_ALIGNMENT);
        arena_free_state(r);
        return st;
    }
    /* an upstream that allocates in stream order: make the memory safe on every stream */
    if (arena_stream_synchronize(r, NULL) != CRMM_OK)
        crmm_log(CRMM_LOG_WARN, "%s", crmm_last_error());
    st = arena_global_init(&r->global, base, r->arena_size, r->superblock_size, r->shards);
    if (st != CRMM_OK) {
        crmm_resource_deallocate(upstream, base, r->arena_size, NULL);
        arena_free_state(r);
        return st;
    }
    arena_streams_init(r);
    arena_slab_pool_init(&r->slabs, r->superblock_size);
    crmm_resource_init(&r->base, &arena_ops, "arena", upstream->flags, upstream->device, upstream);
    arena_registry_add(r);
    *out = &r->base;
    return CRMM_OK;
}

static const crmm_param arena_params[] = {
    {.key = "arena_size", .type = CRMM_PARAM_SIZE,
     .help = "bytes taken from upstream once; the arena never grows "
             "(default: half the device's free memory; required over host memory)",
     .offset = offsetof(arena_config, arena_size), .max = SIZE_MAX / 2},
    {.key = "superblock_size", .type = CRMM_PARAM_SIZE, .default_value = "1MiB",
     .help = "what a thread arena takes from the global arena at a time (a power of two, 64KiB..1GiB); "
             "requests above 1/8 of it are served by the global arena",
     .offset = offsetof(arena_config, superblock_size), .min = ARENA_MIN_SUPERBLOCK, .max = ARENA_MAX_SUPERBLOCK},
    {.key = "shards", .type = CRMM_PARAM_UINT,
     .help = "address ranges of the global arena, each with its own lock: threads take large blocks and superblocks "
             "from their own shard first, so they do not wait for each other (1..64, each at least one superblock; "
             "default: one per 64 superblocks, at most 8; 1: one lock for all)",
     .offset = offsetof(arena_config, shards), .min = 1, .max = ARENA_MAX_SHARDS},
    {.key = "dump_log_on_failure", .type = CRMM_PARAM_BOOL, .default_value = "false",
     .help = "write the arena's state to dump_file when an allocation fails",
     .offset = offsetof(arena_config, dump_log_on_failure)},
    {.key = "dump_file", .type = CRMM_PARAM_STRING, .default_value = "crmm_arena_dump.dev%d.log",
     .help = "where the state is appended (%d = device, %p = process id)",
     .offset = offsetof(arena_config, dump_file)},
    {NULL},
};

PLUGIN_DESCRIPTOR(.name = "arena", .upstream = CRMM_UPSTREAM_REQUIRED, .params = arena_params,
                  .config_size = sizeof(arena_config), .validate = arena_validate, .create = arena_create,
                  .description = "per-thread arenas of superblocks over a global arena taken once from upstream (RMM's arena)")
