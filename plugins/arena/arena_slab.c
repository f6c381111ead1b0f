/* arena_slab.c — slab records: the pool they come from, formatting a superblock for one size
 * class, collecting blocks freed by other threads, and taking an empty slab from its owner.
 * The fast-path operations (take, put, index) are inline in arena_slab.h. */
#include "build_config.h"
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include "arena_slab.h"

void arena_slab_pool_init(arena_slab_pool *pool, size_t superblock_size)
{
    memset(pool, 0, sizeof *pool);
    pthread_mutex_init(&pool->lock, NULL);
    pool->superblock_size = superblock_size;
    size_t blocks = superblock_size / ARENA_GRANULE; /* the smallest class has the most blocks */
    pool->words = (blocks + 63) / 64;
    pool->summary_words = (pool->words + 63) / 64;
}

void arena_slab_pool_fini(arena_slab_pool *pool)
{
    arena_slab *sb = pool->all;
    while (sb) {
        arena_slab *next = sb->all_next;
        free(sb);
        sb = next;
    }
    pthread_mutex_destroy(&pool->lock);
}

arena_slab *arena_slab_new(arena_slab_pool *pool)
{
    pthread_mutex_lock(&pool->lock);
    arena_slab *sb = pool->spare;
    if (sb)
        pool->spare = sb->next;
    pthread_mutex_unlock(&pool->lock);
    if (sb) {
        sb->next = sb->prev = NULL;
        return sb;
    }
    /* one allocation: the record, then free_bits, remote_bits and summary */
    size_t head = (sizeof(arena_slab) + 63) & ~(size_t)63;
    size_t bits = (2 * pool->words + pool->summary_words) * sizeof(uint64_t);
    size_t total = (head + bits + 63) & ~(size_t)63;
    char *mem = aligned_alloc(64, total);
    if (!mem) {
        crmm_set_error(CRMM_ERROR_BAD_ALLOC, "arena: no host memory for a superblock record (%zu bytes)", total);
        return NULL;
    }
    memset(mem, 0, total);
    sb = (arena_slab *)mem;
    sb->free_bits = (uint64_t *)(mem + head);
    sb->remote_bits = sb->free_bits + pool->words;
    sb->summary = sb->remote_bits + pool->words;
    pthread_mutex_lock(&pool->lock);
    sb->all_next = pool->all;
    pool->all = sb;
    pthread_mutex_unlock(&pool->lock);
    return sb;
}

void arena_slab_recycle(arena_slab_pool *pool, arena_slab *sb)
{
    __atomic_store_n(&sb->owner, NULL, __ATOMIC_RELAXED);
    arena_slab_set_state(sb, ARENA_SLAB_SPARE);
    pthread_mutex_lock(&pool->lock);
    sb->next = pool->spare;
    pool->spare = sb;
    pthread_mutex_unlock(&pool->lock);
}

void arena_slab_format(arena_slab *sb, size_t superblock_size, unsigned cls)
{
    size_t block = arena_class_bytes(cls);
    uint32_t capacity = (uint32_t)(superblock_size / block);
    uint32_t words = (capacity + 63) / 64;
    uint32_t d = (uint32_t)(block >> ARENA_GRANULE_SHIFT);
    sb->cls = cls;
    sb->block_size = (uint32_t)block;
    __atomic_store_n(&sb->capacity, capacity, __ATOMIC_RELAXED); /* read by arena_slab_all_free */
    sb->magic = (((uint64_t)1 << ARENA_MAGIC_SHIFT) + d - 1) / d;
    sb->nsum = (words + 63) / 64;
    for (uint32_t w = 0; w < words; w++) {
        uint32_t left = capacity - w * 64;
        arena_bits_store(&sb->free_bits[w], left >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << left) - 1);
        __atomic_store_n(&sb->remote_bits[w], 0, __ATOMIC_RELAXED);
    }
    for (uint32_t i = 0; i < sb->nsum; i++) {
        uint32_t left = words - i * 64;
        sb->summary[i] = left >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << left) - 1;
    }
    arena_slab_set_free_count(sb, capacity);
    __atomic_store_n(&sb->remote_pending, 0, __ATOMIC_RELAXED);
    sb->in_partial = false;
    sb->quarantined = false;
    sb->prev = sb->next = NULL;
}

uint32_t arena_slab_collect(arena_slab *sb)
{
    if (!__atomic_exchange_n(&sb->remote_pending, 0, __ATOMIC_ACQUIRE))
        return 0;
    uint32_t got = 0, words = (sb->capacity + 63) / 64;
    for (uint32_t w = 0; w < words; w++) {
        if (!__atomic_load_n(&sb->remote_bits[w], __ATOMIC_RELAXED))
            continue;
        uint64_t bits = __atomic_exchange_n(&sb->remote_bits[w], 0, __ATOMIC_ACQUIRE);
        arena_bits_store(&sb->free_bits[w], arena_bits_load(&sb->free_bits[w]) | bits);
        sb->summary[w >> 6] |= (uint64_t)1 << (w & 63u);
        got += (uint32_t)__builtin_popcountll(bits);
    }
    arena_slab_set_free_count(sb, sb->free_count + got);
    return got;
}

bool arena_slab_all_free(const arena_slab *sb)
{
    /* the arrays are sized for the smallest class: in bounds whatever capacity is read */
    uint32_t capacity = __atomic_load_n(&sb->capacity, __ATOMIC_RELAXED), n = 0;
    for (uint32_t w = 0; w < (capacity + 63) / 64; w++)
        n += (uint32_t)__builtin_popcountll(arena_bits_load(&sb->free_bits[w]) |
                                            __atomic_load_n(&sb->remote_bits[w], __ATOMIC_ACQUIRE));
    return capacity > 0 && n == capacity;
}

arena_span *arena_slab_steal(arena_slab *sb)
{
    int expected = ARENA_SLAB_EMPTY;
    if (!__atomic_compare_exchange_n(&sb->state, &expected, ARENA_SLAB_STEALING, false, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        return NULL;
    arena_span *span = sb->span;
    arena_slab_set_state(sb, ARENA_SLAB_STOLEN);
    return span;
}

void arena_slab_wait_stolen(arena_slab *sb)
{
    while (arena_slab_state(sb) == ARENA_SLAB_STEALING)
        sched_yield();
}
