/* blocks_test.h — freeing the blocks a test holds in one line: free_all(mr, {a, n}, {b, m}) frees
 * each {address, bytes} to mr on the default stream, free_all_on(mr, s, ...) on stream s, in the
 * order given; every free must succeed. */
#ifndef CRMM_TESTS_BLOCKS_TEST_H
#define CRMM_TESTS_BLOCKS_TEST_H

#include <stddef.h>
#include "test_support.h"

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
