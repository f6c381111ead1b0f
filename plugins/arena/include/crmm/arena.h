/* crmm/arena.h — control operations of the `arena` plugin, for
 * crmm_resource_control_kind(mr, "arena", op, arg) (or crmm_resource_control on the arena itself).
 *
 * The arena takes `arena_size` bytes from its upstream once and never grows. Each thread (and,
 * for device memory, each stream a thread uses) allocates small blocks from its own superblocks
 * without a lock; larger requests go to the shared global arena, which is split into `shards`
 * address ranges with a lock each: a thread takes large blocks and superblocks from its home
 * shard first, then from the others; a request that fits in no single shard may use free pages
 * that run across shard boundaries (every shard lock is taken for it).
 *
 * Device memory: memory freed on a stream is reused on that stream at once, with no CUDA call;
 * memory of a large block freed on stream S goes to another stream only when nothing else fits,
 * after a cudaDeviceSynchronize (S's handle is never passed to CUDA: destroying S after freeing
 * on it is safe). Synchronize a stream before destroying it if its handle may be reused by a new
 * stream that allocates from the arena. */
#ifndef CRMM_ARENA_H
#define CRMM_ARENA_H

#include <stdint.h>
#include <crmm/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Defragment now: every empty superblock that thread arenas hold goes back to the global arena
 * and merges with its free neighbours (for device memory after waiting for the device). This is
 * what an allocation that fails does before it tries once more, and what trim does. A superblock
 * whose last blocks other threads freed counts as empty even though its thread has not seen those
 * frees, and is taken while that thread is not inside an allocate or free of the arena — where
 * membarrier(2) offers MEMBARRIER_CMD_PRIVATE_EXPEDITED (Linux 4.14 and later); elsewhere only
 * once its thread has seen it empty, or exits. arg: NULL. Always CRMM_OK. */
#define CRMM_ARENA_DEFRAGMENT 1

/* Write the arena's state (sizes, free bytes, largest free block, fragmentation, one line per
 * superblock, large block and free span) to a file, appending. arg: const char *path, or NULL for
 * the resource's `dump_file`; either is expanded by crmm_expand_file_name (%d = device, %p =
 * process id, %% = %). CRMM_ERROR_CONFIG for another % sequence, CRMM_ERROR_INVALID_ARGUMENT
 * for a name too long, CRMM_ERROR_IO when the file cannot be written or is refused (a symbolic link, someone else's
 * file, a file with another hard link: crmm_output_file_open); the dump is appended. */
#define CRMM_ARENA_DUMP 2

/* Fill a crmm_arena_stats. arg: crmm_arena_stats *; CRMM_ERROR_INVALID_ARGUMENT when NULL. */
#define CRMM_ARENA_GET_STATS 3

typedef struct crmm_arena_stats {
    uint64_t arena_size;          /* bytes taken from upstream (never changes) */
    uint64_t superblock_size;
    uint64_t small_max;           /* the largest request served from superblocks */
    uint64_t superblocks;         /* superblocks out of the global arena (held or detached) */
    uint64_t superblocks_held;    /* held by thread arenas */
    uint64_t superblocks_detached;/* held by no thread: full, with free blocks to adopt, or
                                   * quarantined (device memory: left with free blocks by a thread
                                   * whose wait for the device at exit failed; adopted by no one,
                                   * back to the global arena once all its blocks are freed) */
    uint64_t large_blocks;        /* live blocks served by the global arena directly */
    uint64_t global_free_bytes;   /* free in the global arena (all shards) */
    uint64_t global_largest_free; /* the most free bytes in a row in the global arena (across
                                   * shard boundaries too): the largest block it can hand out */
    uint64_t thread_arenas;       /* live thread arenas */
    uint64_t defragmentations;    /* defragmentations run, on failure or on request */
    uint64_t shards;              /* shards of the global arena */
    uint64_t stream_syncs;        /* device synchronizations made so that an allocation could take
                                   * large-block or superblock memory freed on another stream (not
                                   * counted: those of defragment, trim, thread exit, destroy) */
} crmm_arena_stats;

/* Fill a crmm_arena_shard_stats for shard `shard` (set by the caller, 0 .. shards - 1).
 * arg: crmm_arena_shard_stats *; CRMM_ERROR_INVALID_ARGUMENT when NULL or `shard` is out of
 * range. */
#define CRMM_ARENA_GET_SHARD_STATS 4

typedef struct crmm_arena_shard_stats {
    uint32_t shard;               /* in: which shard */
    uint64_t offset;              /* its first byte, from the start of the arena */
    uint64_t size;                /* its bytes */
    uint64_t free_bytes;          /* free in it */
    uint64_t largest_free;        /* its largest free span */
    uint64_t superblocks;         /* superblocks that start in it */
    uint64_t large_blocks;        /* live large blocks that start in it */
    uint64_t large_bytes;         /* bytes of large blocks in it (page-rounded) */
    uint64_t thread_arenas;       /* thread arenas whose home it is */
} crmm_arena_shard_stats;

#ifdef __cplusplus
}
#endif
#endif
