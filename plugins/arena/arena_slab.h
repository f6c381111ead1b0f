/* arena_slab.h — a superblock cut into blocks of one size class, and its host-side record.
 *
 * The memory may be device memory, so everything about it lives on the host: a bitmap with one
 * bit per block (1 = free), a summary with one bit per bitmap word that has a free bit, and a
 * second bitmap where other threads mark the blocks they free. Allocation takes the lowest free
 * block (two count-trailing-zeros); a free sets one bit. The block index of a pointer is a
 * multiply and a shift (a reciprocal of the block size in 256-byte units), exact for every offset
 * a superblock of up to 1 GiB can have (see ARENA_MAGIC_SHIFT).
 *
 * Who may touch what (the `state` field says which case holds):
 *   OWNED     held by `owner`: only the owner thread reads and writes free_bits, summary and
 *             free_count, without atomics, and only inside an "operation" (arena_thread_cache.c).
 *             Other threads set bits in remote_bits (with the class lock held) and the owner
 *             collects them when it runs out of blocks. A defragmenter may take an OWNED slab
 *             whose free and remote bits together cover every block, but only while it has
 *             fenced the owner out of its operations (the protocol at the top of
 *             arena_thread_cache.c); it then sets the state to SPARE under the class lock, clears
 *             the owner's `current` entry and recycles the record itself.
 *   EMPTY     emptied by its owner's own frees: all blocks free, held by its owner thread arena,
 *             which may claim it back (CAS to OWNED) or lose it to a defragmenter (CAS to
 *             STEALING, then STOLEN) at any moment, in an operation of the owner's or not.
 *   STEALING  a defragmenter is taking an EMPTY slab; STOLEN: taken, the owner must drop and
 *             recycle it.
 *   DETACHED  held by no thread (full when detached, or left by an exited thread): everything
 *             is changed under its class's lock; it waits in the class's partial list once it has
 *             a free block, and goes back to the global arena when it is empty. `quarantined`:
 *             left, with free blocks, by a thread whose wait for the device failed (device
 *             memory), so those blocks may still be in use on that thread's stream and no wait
 *             for one stream can tell when they are not: it is never adopted (never in the
 *             partial list), and when its last block is freed it goes back to the global arena
 *             tagged as needing a device synchronization before any stream reuses it.
 *   SPARE     unused record. */
#ifndef CRMM_ARENA_SLAB_H
#define CRMM_ARENA_SLAB_H

#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "arena_global.h"
#include "arena_size_class.h"

struct arena_thread;

/* Block index = (offset / 256) * magic >> 42 equals offset / block_size for every offset below
 * 2^30 and block size up to 2^27: n * (magic * d - 2^42) < 2^22 * 2^19 < 2^42. */
#define ARENA_MAGIC_SHIFT 42u

enum arena_slab_state {
    ARENA_SLAB_SPARE = 0,
    ARENA_SLAB_EMPTY = 1,
    ARENA_SLAB_OWNED = 2,
    ARENA_SLAB_STEALING = 3,
    ARENA_SLAB_STOLEN = 4,
    ARENA_SLAB_DETACHED = 5
};

typedef struct arena_slab {
    /* the owner's hot fields: set by arena_slab_format, then read-only except free_count */
    char *base;                    /* the superblock */
    uint32_t block_size;
    uint32_t capacity;             /* blocks */
    uint32_t free_count;           /* set bits in free_bits (owner, or class lock when detached) */
    uint32_t cls;
    uint64_t magic;                /* ceil(2^42 / (block_size / 256)) */
    uint32_t nsum;                 /* summary words in use */
    uint64_t *free_bits;
    uint64_t *summary;
    struct arena_thread *owner;    /* atomic; NULL when detached */
    arena_span *span;              /* its span in the global arena */
    /* shared with other threads */
    alignas(64) int state;         /* atomic: enum arena_slab_state */
    int remote_pending;            /* atomic: remote_bits may hold bits */
    uint64_t *remote_bits;         /* atomic */
    struct arena_slab *prev, *next;/* the class's partial list, or the spare list */
    bool in_partial;
    bool quarantined;              /* DETACHED, never adopted (see above); under the class lock */
    struct arena_slab *all_next;   /* every record of the pool, for arena_slab_pool_fini */
} arena_slab;

/* The records of one arena: reused, never freed before the arena is. */
typedef struct arena_slab_pool {
    pthread_mutex_t lock;
    arena_slab *spare;
    arena_slab *all;
    size_t words;                  /* bitmap words a record holds (for the smallest class) */
    size_t summary_words;
    size_t superblock_size;
} arena_slab_pool;

void arena_slab_pool_init(arena_slab_pool *pool, size_t superblock_size);
void arena_slab_pool_fini(arena_slab_pool *pool);
/* A spare record (state SPARE), or NULL with CRMM_ERROR_BAD_ALLOC set when malloc fails. */
arena_slab *arena_slab_new(arena_slab_pool *pool);
/* Put a record back (no one may refer to it any more but stale page-map entries). */
void arena_slab_recycle(arena_slab_pool *pool, arena_slab *sb);
/* Cut sb's superblock (base already set) into blocks of class `cls`: all free, free_count ==
 * capacity, remote bits clear. The state is left for the caller to set. */
void arena_slab_format(arena_slab *sb, size_t superblock_size, unsigned cls);
/* Move blocks other threads freed into free_bits (owner, or class lock when detached). Returns
 * how many. */
uint32_t arena_slab_collect(arena_slab *sb);
/* Whether every block is free, counting those other threads freed and the owner has not
 * collected. Reads only atomics, so any thread may ask (a hint unless the owner is fenced out and
 * the class lock is held: see arena_cache_reclaim). */
bool arena_slab_all_free(const arena_slab *sb);

/* ---- the fast path ------------------------------------------------------------------------- */

static inline uint64_t arena_bits_load(const uint64_t *w) { return __atomic_load_n(w, __ATOMIC_RELAXED); }
static inline void arena_bits_store(uint64_t *w, uint64_t v) { __atomic_store_n(w, v, __ATOMIC_RELAXED); }

/* free_count is written by one thread at a time and read by queries from any: relaxed stores. */
static inline void arena_slab_set_free_count(arena_slab *sb, uint32_t n)
{
    __atomic_store_n(&sb->free_count, n, __ATOMIC_RELAXED);
}
static inline uint32_t arena_slab_free_count(const arena_slab *sb)
{
    return __atomic_load_n(&sb->free_count, __ATOMIC_RELAXED);
}

/* Take the lowest free block; free_count must be > 0. Returns its index. */
static inline uint32_t arena_slab_take(arena_slab *sb)
{
    uint32_t i = 0;
    while (sb->summary[i] == 0)
        i++;
    uint64_t s = sb->summary[i];
    uint32_t w = i * 64u + (uint32_t)__builtin_ctzll(s);
    uint64_t word = arena_bits_load(&sb->free_bits[w]);
    uint32_t b = (uint32_t)__builtin_ctzll(word);
    word &= word - 1;
    arena_bits_store(&sb->free_bits[w], word);
    if (word == 0)
        sb->summary[i] = s & (s - 1);
    arena_slab_set_free_count(sb, sb->free_count - 1);
    return w * 64u + b;
}

/* Give block `idx` back (owner). False when it is free already or another thread has freed it
 * (a double free): nothing is changed then. */
static inline bool arena_slab_put(arena_slab *sb, uint32_t idx)
{
    uint32_t w = idx >> 6;
    uint64_t bit = (uint64_t)1 << (idx & 63u);
    uint64_t word = arena_bits_load(&sb->free_bits[w]);
    if ((word & bit) || (__atomic_load_n(&sb->remote_bits[w], __ATOMIC_RELAXED) & bit))
        return false;
    arena_bits_store(&sb->free_bits[w], word | bit);
    sb->summary[w >> 6] |= (uint64_t)1 << (w & 63u);
    arena_slab_set_free_count(sb, sb->free_count + 1);
    return true;
}

/* Whether block `idx` is free (or freed by another thread, not yet collected). A read any
 * thread may make; for a block the caller holds live, the answer is exact. */
static inline bool arena_slab_is_free(const arena_slab *sb, uint32_t idx)
{
    uint32_t w = idx >> 6;
    uint64_t bit = (uint64_t)1 << (idx & 63u);
    return ((arena_bits_load(&sb->free_bits[w]) | __atomic_load_n(&sb->remote_bits[w], __ATOMIC_RELAXED)) & bit) != 0;
}

/* The index of the block that starts at `p`. False when p is not the start of a block of sb. */
static inline bool arena_slab_index(const arena_slab *sb, const void *p, uint32_t *idx)
{
    uintptr_t off = (uintptr_t)p - (uintptr_t)sb->base;
    if (off & (ARENA_GRANULE - 1))
        return false;
    uint64_t i = ((uint64_t)(off >> ARENA_GRANULE_SHIFT) * sb->magic) >> ARENA_MAGIC_SHIFT;
    if (i >= sb->capacity || i * sb->block_size != off)
        return false;
    *idx = (uint32_t)i;
    return true;
}

static inline void *arena_slab_block(const arena_slab *sb, uint32_t idx)
{
    return sb->base + (size_t)idx * sb->block_size;
}

static inline int arena_slab_state(const arena_slab *sb) { return __atomic_load_n(&sb->state, __ATOMIC_ACQUIRE); }
static inline void arena_slab_set_state(arena_slab *sb, int st) { __atomic_store_n(&sb->state, st, __ATOMIC_RELEASE); }

/* EMPTY → OWNED: the owner takes its empty slab back before allocating from it. False when a
 * defragmenter has taken it. */
static inline bool arena_slab_claim(arena_slab *sb)
{
    int expected = ARENA_SLAB_EMPTY;
    return __atomic_compare_exchange_n(&sb->state, &expected, ARENA_SLAB_OWNED, false, __ATOMIC_ACQUIRE,
                                       __ATOMIC_ACQUIRE);
}

/* EMPTY → STEALING → STOLEN: take an empty slab away from its owner. Returns its span (for the
 * global arena), or NULL when the slab was not empty and published. The record itself stays
 * with the owner, who recycles it. */
arena_span *arena_slab_steal(arena_slab *sb);

/* Wait until a defragmenter has finished taking sb (state STOLEN). */
void arena_slab_wait_stolen(arena_slab *sb);

#endif
