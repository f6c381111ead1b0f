/* blocks_test.h — what the suites of the pool, the arena and the other host-side resources share:
 * the C library headers they use, sizes in KiB and MiB, a figure of a resource (q), a free that
 * must succeed (release), and freeing the blocks a test holds in one line: free_all(mr, {a, n},
 * {b, m}) frees each {address, bytes} to mr on the default stream, free_all_on(mr, s, ...) on
 * stream s, in the order given; every free must succeed. */
#ifndef CRMM_TESTS_BLOCKS_TEST_H
#define CRMM_TESTS_BLOCKS_TEST_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "test_support.h"

#ifndef KiB
#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#endif

static inline uint64_t q(crmm_resource *mr, crmm_query what) { return crmm_test_query(mr, what); }

static inline void release(crmm_resource *mr, void *p, size_t n) { ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, n, NULL)); }

typedef struct test_block { void *p; size_t n; } test_block;

static inline void free_blocks_on(crmm_resource *mr, crmm_cuda_stream_t s, const test_block *b, size_t count)
{
    for (size_t i = 0; i < count; i++)
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, b[i].p, b[i].n, s));
}

#define free_all_on(mr, s, ...) \
    free_blocks_on((mr), (crmm_cuda_stream_t)(s), (const test_block[]){__VA_ARGS__}, \
                   sizeof((const test_block[]){__VA_ARGS__}) / sizeof(test_block))
#define free_all(mr, ...) free_all_on(mr, NULL, __VA_ARGS__)

#endif
