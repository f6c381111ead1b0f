/* block_pattern.h — the bytes of a live block, for the suites that check that no two live blocks
 * overlap (check_arena_stress, check_arena_streams_threads, check_stream_order): a byte made of
 * its address and size, over all of a block of up to 64 KiB, else over its first and last 4 KiB. */
#ifndef CRMM_TESTS_BLOCK_PATTERN_H
#define CRMM_TESTS_BLOCK_PATTERN_H

#include <stdint.h>
#include <string.h>

enum { BLOCK_WHOLE = 64 << 10, BLOCK_ENDS = 4 << 10 };

static inline unsigned char block_pattern(const void *p, size_t n)
{
    return (unsigned char)(((uintptr_t)p >> 8) ^ n ^ 0x5a);
}

static inline void fill_block(void *p, size_t n)
{
    unsigned char v = block_pattern(p, n);
    if (n <= BLOCK_WHOLE) {
        memset(p, v, n);
    } else {
        memset(p, v, BLOCK_ENDS);
        memset((char *)p + n - BLOCK_ENDS, v, BLOCK_ENDS);
    }
}

static inline int block_intact(const void *p, size_t n)
{
    const unsigned char *b = p, v = block_pattern(p, n);
    size_t head = n <= BLOCK_WHOLE ? n : BLOCK_ENDS;
    for (size_t i = 0; i < head; i++)
        if (b[i] != v || b[n - 1 - i] != v)
            return 0;
    return 1;
}

#endif
