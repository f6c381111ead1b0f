/* arena_size_class.h — the size classes of small blocks.
 *
 * Small blocks are whole multiples of 256 bytes (the alignment every pointer needs): 256, 512,
 * 768, 1024, then four classes per doubling, as jemalloc's (1280, 1536, 1792, 2048, 2560, ...).
 * Above 1 KiB the rounding wastes at most a fifth of a block. Class and size are a few
 * instructions each way, so the fast path computes them instead of looking them up. */
#ifndef CRMM_ARENA_SIZE_CLASS_H
#define CRMM_ARENA_SIZE_CLASS_H

#include <stddef.h>

#define ARENA_GRANULE_SHIFT 8u
#define ARENA_GRANULE (1u << ARENA_GRANULE_SHIFT)

/* The class of a request of `bytes` (>= 1). */
static inline unsigned arena_size_class(size_t bytes)
{
    if (bytes <= 1024)
        return (unsigned)((bytes + ARENA_GRANULE - 1) >> ARENA_GRANULE_SHIFT) - 1;
    size_t n = bytes - 1;
    unsigned e = 63u - (unsigned)__builtin_clzll((unsigned long long)n); /* 2^e <= n < 2^(e+1), e >= 10 */
    return 4u + (e - 10u) * 4u + (unsigned)((n >> (e - 2u)) & 3u);
}

/* The block size of class `c`. */
static inline size_t arena_class_bytes(unsigned c)
{
    if (c < 4)
        return (size_t)(c + 1) << ARENA_GRANULE_SHIFT;
    unsigned e = 10u + (c - 4u) / 4u, k = (c - 4u) % 4u;
    return ((size_t)1 << e) + ((size_t)(k + 1) << (e - 2u));
}

#endif
