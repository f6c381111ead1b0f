/* arena_global.h — the global arena: the one block taken from upstream, cut into spans of pages.
 *
 * The arena is divided into pages of superblock_size / 64 bytes. A span is a run of pages that is
 * free, one large block (a request above the small-block limit, served here directly), or one
 * superblock (handed to a thread arena, which cuts it into small blocks). Free spans sit in
 * TLSF-style segregated lists, so finding one that fits is O(1) and freeing coalesces with both
 * neighbours in O(1). A page map finds the record of a pointer without a lock: the first page of
 * every span maps to the span record (tagged with bit 0), and so does the last page of a free or
 * large span; the other pages of a superblock map straight to its slab record. Interior entries of
 * free and large spans may be stale, so every user checks that the record it finds really covers
 * the page. Records are never freed before the arena is, so a stale entry is always safe to read.
 * All changes happen under `lock`. */
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
    ARENA_SPAN_SUPERBLOCK = 3
} arena_span_kind;

typedef struct arena_span {
    size_t start, npages;          /* first page, number of pages */
    arena_span_kind kind;
    unsigned fl, sl;               /* FREE: its list */
    struct arena_span *prev, *next;/* FREE: list links; SPARE: the spare list; else free for callers */
    size_t bytes;                  /* LARGE: bytes as requested */
    struct arena_slab *slab;       /* SUPERBLOCK: the slab record its pages map to */
} arena_span;

#define ARENA_PAGES_PER_SUPERBLOCK 64u
#define ARENA_TLSF_SL_LOG 3u
#define ARENA_TLSF_SL (1u << ARENA_TLSF_SL_LOG)
#define ARENA_TLSF_FL 64u

typedef struct arena_span_chunk arena_span_chunk;

typedef struct arena_global {
    /* read-only after init: what the lock-free lookup needs */
    char *base;
    size_t size;                   /* npages * page_size */
    size_t page_size;
    unsigned page_shift;
    size_t npages;
    size_t superblock_pages;
    uintptr_t *page_map;           /* npages entries, read and written with atomics */
    /* the rest changes under the lock */
    alignas(64) pthread_mutex_t lock;
    uint64_t fl_map;
    uint32_t sl_map[ARENA_TLSF_FL];
    arena_span *bins[ARENA_TLSF_FL][ARENA_TLSF_SL];
    arena_span *spare;             /* unused span records */
    arena_span_chunk *chunks;      /* where the records live */
    size_t free_pages;
    size_t superblocks, large_blocks, large_pages;
} arena_global;

/* Set up over [base, base + size): size a multiple of superblock_size / 64, at least one
 * superblock. CRMM_ERROR_BAD_ALLOC when host memory for the page map runs out. */
crmm_status arena_global_init(arena_global *g, void *base, size_t size, size_t superblock_size);
/* Free the bookkeeping (not the memory: the caller gives `base` back to upstream). */
void arena_global_fini(arena_global *g);

/* Take a free superblock for `slab`, all under the lock (so a walker sees it whole): set
 * slab->base and slab->span, format it for class `cls`, make `owner` its owner (state OWNED),
 * then map its pages. CRMM_ERROR_OUT_OF_MEMORY (no message) when none is free;
 * CRMM_ERROR_BAD_ALLOC (message) when host memory for a record runs out. */
crmm_status arena_global_take_superblock(arena_global *g, struct arena_slab *slab, unsigned cls,
                                         struct arena_thread *owner);
/* Give back a superblock span (its slab record is not read: it may be reused already). */
void arena_global_give_superblock(arena_global *g, arena_span *span);

/* Allocate a large block of `bytes` (<= g->size). CRMM_ERROR_OUT_OF_MEMORY (no message) when
 * no free span fits; CRMM_ERROR_BAD_ALLOC (message) when a record cannot be allocated. */
crmm_status arena_global_alloc_large(arena_global *g, size_t bytes, void **ptr);
/* Free a large block. CRMM_ERROR_INVALID_ARGUMENT when `ptr` is not a live large block of this
 * arena or `bytes` is not its size (message names the arena as `who`). */
crmm_status arena_global_free_large(arena_global *g, void *ptr, size_t bytes, const char *who);

/* Free bytes in free spans and the largest free span, in bytes. */
void arena_global_usage(arena_global *g, size_t *free_bytes, size_t *largest_free);

/* Call fn for every span in address order, under the lock. */
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

#endif
