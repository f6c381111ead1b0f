/* pool_cache_policy.h — when the pool's per-thread caches (pool_thread_cache.h) switch on, and
 * the list of them: the thread_cache parameter, the first thread seen (thread_cache = on) and the
 * lock contention counted over windows of locked operations (thread_cache = auto). Updated under
 * the pool's lock; `caching` is also read without it (once on, the caches stay on). */
#ifndef CRMM_PLUGINS_POOL_CACHE_POLICY_H
#define CRMM_PLUGINS_POOL_CACHE_POLICY_H

#include <stdint.h>
#include "pool_thread_cache.h"

typedef struct pool_cache_policy {
    pool_cache_mode cache_mode;    /* parameter thread_cache: when the per-thread caches switch on */
    int caching;                   /* atomic: they are on */
    uintptr_t first_thread;        /* POOL_CACHE_ON: the first thread that allocated; 0: none yet */
    uint32_t lock_ops, lock_waits; /* POOL_CACHE_AUTO: locked operations of the current window, and
                                    * how many of them found the lock held */
    uint64_t lock_waits_total;     /* allocates and frees that found the lock held, since creation */
    pool_thread_cache *caches;     /* every cache of the pool */
} pool_cache_policy;

#endif
