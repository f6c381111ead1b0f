/* arena_resource.h — the arena resource: what its files share.
 *
 * One arena_resource owns the global arena (the memory taken from upstream once, in shards), the slab
 * records, one shared list per size class of superblocks that no thread holds (DETACHED), and the
 * list of its thread arenas. Fields the fast path reads are grouped first and never written after
 * creation, so threads do not fight over their cache lines. */
#ifndef CRMM_ARENA_RESOURCE_H
#define CRMM_ARENA_RESOURCE_H

#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>
#include <crmm/alloc_counters.h>
#include <crmm/plugin.h>
#include "../common/graph_park.h"
#include "../common/resource_label.h"
#include "arena_global.h"
#include "arena_slab.h"

struct arena_thread;

/* The superblocks of one size class that no thread holds. */
typedef struct arena_class_shared {
    pthread_mutex_t lock;          /* also orders remote frees into slabs of this class */
    arena_slab *partial;           /* DETACHED slabs with free blocks */
    size_t detached;               /* DETACHED slabs, full or not */
} arena_class_shared;

typedef struct arena_resource {
    crmm_resource base;
    /* read-only after creation */
    uint64_t id;                   /* unique in the process: thread caches are keyed by it */
    bool uses_cuda;                /* device memory: streams matter; false: no CUDA call at all */
    const bool *capture_gate;      /* open: ask whether a stream is captured (capture_check.h) */
    size_t arena_size;             /* bytes taken from upstream */
    size_t superblock_size;
    size_t small_max;              /* largest request served from a superblock (superblock / 8) */
    unsigned shards;               /* of the global arena */
    unsigned nclasses;
    arena_class_shared *classes;   /* [nclasses] */
    bool dump_on_failure;
    char *dump_file;               /* template with %d and %p */
    arena_global global;
    arena_slab_pool slabs;
    /* changing */
    alignas(64) pthread_mutex_t arenas_lock;
    struct arena_thread *arenas;   /* every live thread arena of this resource */
    size_t narenas;
    alignas(64) crmm_alloc_counters counters; /* large blocks, remote frees, flushed thread counts */
    uint64_t defragmentations;     /* atomic */
    graph_park park;               /* blocks held for CUDA graphs (graph_park.h) */
    pthread_mutex_t eager_lock;    /* guards what follows */
    graph_park_entry *eager;       /* a destroyed graph's blocks that eager work used, taken back
                                    * from park while the device could not be synchronized: tried
                                    * again at the next allocation that is not captured */
    size_t neager;
    int eager_waiting;             /* atomic: neager > 0 */
    struct arena_resource *registry_next;
} arena_resource;

/* Name for messages: "arena 'main'" or "arena". Static per-thread buffer (one per file). */
static inline const char *arena_who(const arena_resource *r)
{
    static __thread char who[80];
    return resource_label("arena", r->base.name, who, sizeof who);
}

/* arena_stream_order.c: the stream as the global arena's tags know it, filled into *id; NULL
 * over host memory (no tags). */
const arena_stream_id *arena_stream_of(const arena_resource *r, crmm_cuda_stream_t stream, arena_stream_id *id);
/* Device memory: let the global arena tag free spans and synchronize the device (call once,
 * after arena_global_init). */
void arena_streams_init(arena_resource *r);
/* Wait until `stream` has done its work (device memory only, and not once the process is
 * exiting). CRMM_ERROR_CUDA with the reason when the wait fails. */
crmm_status arena_stream_synchronize(arena_resource *r, crmm_cuda_stream_t stream);
/* Make the resource's device current, wait for all its work and void every tag of the global
 * arena (arena_global_synchronize; CRMM_OK at once without CUDA or once the process is exiting).
 * An error (CRMM_ERROR_CUDA) is also logged: most callers are on paths that cannot fail. */
crmm_status arena_device_synchronize(arena_resource *r);

/* arena_dump.c: free bytes that could be handed out (global spans and free blocks of
 * superblocks) and the largest block that could be handed out at once. */
void arena_usage(arena_resource *r, size_t *free_bytes, size_t *largest_free);

/* arena_dump.c: write the arena's state to the dump file (`path` NULL: the configured
 * dump_file template; either expanded by crmm_expand_file_name) after failing to allocate
 * `bytes` (0: on request). CRMM_ERROR_CONFIG / CRMM_ERROR_INVALID_ARGUMENT for a pattern that
 * does not expand, CRMM_ERROR_IO when the file cannot be written. */
crmm_status arena_dump_write(arena_resource *r, const char *path, size_t bytes);

#endif
