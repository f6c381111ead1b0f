/* arena_global.h — the global arena: the one block taken from upstream, cut into spans of pages,
 * in shards that each have their own lock.
 *
 * The arena is divided into pages of superblock_size / 64 bytes. A span is a run of pages that is
 * free, one large block (a request above the small-block limit, served here directly), or one
 * superblock (handed to a thread arena, which cuts it into small blocks).
 *
 * Shards: the pages are split into `nshards` contiguous ranges of equal size (the last takes the
 * remainder). Each shard has its own lock, its own TLSF-style segregated lists of free spans (so
 * finding one that fits is O(1) and freeing coalesces with both neighbours in O(1)) and its own
 * span records; free spans never cross a shard boundary. A thread arena has a home shard where
 * its large blocks and superblocks come from first (then the other shards in order), so threads
 * that allocate large blocks at once take different locks; a free goes to the shard that owns the
 * address (a division). A request that fits in no single shard takes every shard lock in order
 * and looks for free pages that run on across shard boundaries: such a span starts in one shard
 * and keeps one "piece" record per further shard it covers, so that freeing it gives each shard
 * its pages back without allocating. The arena thus never loses a fit that exists; only those
 * rare requests pay for all the locks.
 *
 * The page map is one array over all shards and finds the record of a pointer without a lock: the
 * first page of every span maps to the span record (tagged with bit 0), and so does the last page
 * of a free or large span; the other pages of a superblock map straight to its slab record.
 * Interior entries of free and large spans may be stale, so every user checks that the record it
 * finds really covers the page. Records are never freed before the arena is, so a stale entry is
 * always safe to read; a record is only ever used within the shard it was made for, and read
 * under that shard's lock — except the record of a large span across shards, which its last page
 * maps to while it lives: that record changes only with the locks of all its shards held.
 *
 * Stream tags (device memory; arena_stream_order.c says why): a free span carries the stream it
 * was freed on and the shard's epoch at that moment. An allocation on stream T takes a span as it
 * is when the span is untagged, tagged T, or tagged before the shard's last device
 * synchronization (its epoch is below the shard's `synced`); any other span is taken only after
 * a cudaDeviceSynchronize, after which every shard's `synced` moves past every tag made before.
 * Over host memory no span is ever tagged and no synchronization is made.
 *
 * Lock order: shard locks are taken in ascending index order; one shard lock alone may be held
 * with no other. */
#ifndef CRMM_ARENA_GLOBAL_H
#define CRMM_ARENA_GLOBAL_H

#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <crmm/error.h>

struct arena_slab;
struct arena_thread;

typedef enum arena_span_kind {
    ARENA_SPAN_SPARE = 0,      /* an unused record */
    ARENA_SPAN_FREE = 1,
    ARENA_SPAN_LARGE = 2,
    ARENA_SPAN_SUPERBLOCK = 3,
    ARENA_SPAN_PIECE = 4       /* the part of a span across shards that lies in a later shard */
} arena_span_kind;

/* A stream as the tags know it: the handle, and for the per-thread default stream (whose handle
 * means another stream on every thread) the serial number of the thread. */
typedef struct arena_stream_id {
    uintptr_t handle;              /* the legacy default stream (NULL or cudaStreamLegacy): 0 */
    uint64_t thread;               /* cudaStreamPerThread: the thread's serial (>= 1); else 0;
                                    * ARENA_STREAM_MIXED: a span freed on several streams */
} arena_stream_id;

#define ARENA_STREAM_MIXED UINT64_MAX

/* Who may reuse a free span without waiting: `stream` at once; every stream once the shard's
 * `synced` is above `epoch`. epoch 0: untagged, every stream at once. */
typedef struct arena_tag {
    arena_stream_id stream;
    uint64_t epoch;
} arena_tag;

typedef struct arena_span {
    size_t start, npages;          /* first page, number of pages (across shards: all of them) */
    arena_span_kind kind;
    unsigned fl, sl;               /* FREE: its list */
    struct arena_span *prev, *next;/* FREE: list links; SPARE: the spare list; else free for callers */
    struct arena_span *pieces;     /* LARGE, SUPERBLOCK across shards: its PIECE records, in shard
                                    * order, linked through this field; NULL otherwise */
    size_t bytes;                  /* LARGE: bytes as requested */
    struct arena_slab *slab;       /* SUPERBLOCK: the slab record its pages map to */
    arena_tag tag;                 /* FREE: which streams may take it without a wait */
} arena_span;

#define ARENA_PAGES_PER_SUPERBLOCK 64u
#define ARENA_TLSF_SL_LOG 3u
#define ARENA_TLSF_SL (1u << ARENA_TLSF_SL_LOG)
#define ARENA_TLSF_FL 64u
#define ARENA_MAX_SHARDS 64u

typedef struct arena_span_chunk arena_span_chunk;

/* One shard: pages [first, end), everything below changed under `lock`. */
typedef struct arena_shard {
    alignas(64) pthread_mutex_t lock;
    size_t first, end;             /* read-only after init */
    unsigned index;
    uint64_t fl_map;
    uint32_t sl_map[ARENA_TLSF_FL];
    arena_span *bins[ARENA_TLSF_FL][ARENA_TLSF_SL];
    arena_span *spare;             /* unused span records */
    arena_span_chunk *chunks;      /* where the records live */
    size_t free_pages;             /* also read without the lock, as a hint (atomics) */
    size_t superblocks, large_blocks; /* those that start in this shard */
    size_t large_pages;            /* pages of large blocks in this shard */
    uint64_t epoch;                /* stamped into the tags of spans freed now (>= 1) */
    uint64_t synced;               /* tags of an epoch below this are void: a device
                                    * synchronization began after them (1 <= synced <= epoch) */
} arena_shard;

typedef struct arena_global {
    /* read-only after init: what the lock-free lookup needs */
    char *base;
    size_t size;                   /* npages * page_size */
    size_t page_size;
    unsigned page_shift;
    size_t npages;
    size_t superblock_pages;
    uintptr_t *page_map;           /* npages entries, read and written with atomics */
    unsigned nshards;
    size_t shard_pages;            /* pages of every shard but the last (which has the remainder) */
    arena_shard *shards;           /* [nshards] */
    /* device memory: waits for the whole device (arena_stream_order.c); NULL over host memory */
    crmm_status (*device_sync)(void *arg);
    void *device_sync_arg;
    uint64_t reuse_syncs;          /* atomic: device synchronizations made to take a tagged span */
} arena_global;

/* Set up over [base, base + size) in `nshards` shards (1..ARENA_MAX_SHARDS): size a multiple of
 * superblock_size / 64 and at least one superblock per shard. CRMM_ERROR_BAD_ALLOC when host
 * memory for the page map or the shards runs out. */
crmm_status arena_global_init(arena_global *g, void *base, size_t size, size_t superblock_size, unsigned nshards);
/* Free the bookkeeping (not the memory: the caller gives `base` back to upstream). */
void arena_global_fini(arena_global *g);

/* Device memory: tag free spans and wait for the device with `sync(arg)` (which returns
 * CRMM_ERROR_CUDA with a message when it fails) before a span tagged for another stream is
 * taken. Without this call (host memory) nothing is tagged. Call before any other use. */
void arena_global_use_streams(arena_global *g, crmm_status (*sync)(void *arg), void *arg);

/* Wait for the device (no lock held), then make every span tagged before the wait began
 * untagged (by the epochs: no list is walked). CRMM_OK at once over host memory; the error of
 * `sync` when it fails (nothing is untagged then). */
crmm_status arena_global_synchronize(arena_global *g);

/* Taking pages for stream `stream` (NULL: host memory, no tags) prefers, home shard first, a
 * fitting span that needs no wait; when every fitting span is tagged for another stream it
 * synchronizes the device once (arena_global_synchronize) and takes one. Errors of both:
 * CRMM_ERROR_OUT_OF_MEMORY (no message) when no free pages in a row fit; CRMM_ERROR_BAD_ALLOC
 * (message) when host memory for a record runs out; CRMM_ERROR_CUDA (message) when the device
 * synchronization fails (nothing is taken then). */

/* Take a free superblock for `slab`, home shard first, all under the lock(s) (so a walker sees it
 * whole): set slab->base and slab->span, format it for class `cls`, make `owner` its owner (state
 * OWNED), then map its pages. */
crmm_status arena_global_take_superblock(arena_global *g, unsigned home, struct arena_slab *slab, unsigned cls,
                                         struct arena_thread *owner, const arena_stream_id *stream);
/* Give back a superblock span (its slab record is not read: it may be reused already). `clean`:
 * its blocks are done with on every stream (untagged); false: it needs a device synchronization
 * before any stream takes it (tagged "mixed"). */
void arena_global_give_superblock(arena_global *g, arena_span *span, bool clean);

/* Allocate a large block of `bytes` (<= g->size), home shard first. */
crmm_status arena_global_alloc_large(arena_global *g, unsigned home, size_t bytes, const arena_stream_id *stream,
                                     void **ptr);
/* Free a large block on `stream` (NULL: host memory): its pages are free at once, tagged with
 * the stream. CRMM_ERROR_INVALID_ARGUMENT (no message) when `ptr` is not a live large block of
 * this arena (*allocated = 0) or `bytes` is not its size (*allocated = the size it has). */
crmm_status arena_global_free_large(arena_global *g, void *ptr, size_t bytes, const arena_stream_id *stream,
                                    size_t *allocated);

/* The checks of arena_global_free_large without the free: CRMM_OK when `ptr` is a live large
 * block of `bytes`; else as that call. */
crmm_status arena_global_check_large(arena_global *g, void *ptr, size_t bytes, size_t *allocated);

/* A span's tag as it stands (the shard of its first page locked, or all): untagged when a
 * device synchronization has voided it. For the dump. */
arena_tag arena_global_span_tag(const arena_global *g, const arena_span *span);

/* Free bytes in free spans, and the most free bytes in a row (across shard boundaries too). */
void arena_global_usage(arena_global *g, size_t *free_bytes, size_t *largest_free);
/* Superblocks and large blocks out of the global arena. */
void arena_global_counts(arena_global *g, size_t *superblocks, size_t *large_blocks);

/* What one shard holds (under its lock): its bytes, free bytes, largest free span within it,
 * superblocks and large blocks that start in it, bytes of large blocks in it. */
typedef struct arena_shard_usage {
    size_t offset, size, free_bytes, largest_free, superblocks, large_blocks, large_bytes;
} arena_shard_usage;
void arena_global_shard_usage(arena_global *g, unsigned shard, arena_shard_usage *out);

/* Call fn for every span in address order, under all the locks. */
void arena_global_walk(arena_global *g, void (*fn)(const arena_span *span, void *arg), void *arg);

/* ---- the lock-free lookup ------------------------------------------------------------------ */

#define ARENA_ENTRY_SPAN 1u

/* The page-map entry of `p`: 0 when p is outside the arena; a slab record, or a span record
 * tagged with ARENA_ENTRY_SPAN. */
static inline uintptr_t arena_global_entry(const arena_global *g, const void *p)
{
    uintptr_t off = (uintptr_t)p - (uintptr_t)g->base;
    if (off >= g->size)
        return 0;
    return __atomic_load_n(&g->page_map[off >> g->page_shift], __ATOMIC_ACQUIRE);
}

static inline arena_span *arena_entry_span(uintptr_t e)
{
    return (arena_span *)(e & ~(uintptr_t)ARENA_ENTRY_SPAN);
}

/* The shard that page `page` belongs to. */
static inline unsigned arena_global_shard_of(const arena_global *g, size_t page)
{
    size_t k = page / g->shard_pages;
    return k < g->nshards ? (unsigned)k : g->nshards - 1;
}

#endif
