/* pool_thread_cache_test.h — what the suites of the pool's per-thread caches
 * (check_pool_thread_cache, check_pool_thread_cache_auto) share: a second thread that makes one
 * call at a time for the test (worker_test.h), and a pool over host memory with its calls that
 * must succeed. */
#ifndef CRMM_TESTS_POOL_THREAD_CACHE_TEST_H
#define CRMM_TESTS_POOL_THREAD_CACHE_TEST_H

#include <sched.h>
#include <stdbool.h>
#include <crmm/log.h>
#include <crmm/pool.h>
#include "blocks_test.h"
#include "worker_test.h"

static inline crmm_resource *host_pool(const char *params) { return crmm_test_create_over_host("pool", params); }

static inline void *alloc(crmm_resource *mr, size_t n) { return crmm_test_allocate(mr, n); }

/* On a new pool: this thread allocates and frees a block of n bytes, then the worker does twice
 * (its first allocation switches the caches on; the block of its second it caches). Returns the
 * cached block's address: the pool's lowest. */
static inline void *worker_caches_a_block(worker *w, crmm_resource *mr, size_t n)
{
    release(mr, alloc(mr, n), n);
    void *a = worker_alloc(w, mr, n);
    worker_free(w, mr, a, n);
    void *b = worker_alloc(w, mr, n);
    worker_free(w, mr, b, n);
    return b;
}

#endif
