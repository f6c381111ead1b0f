/* pool_core.h — the pool's core state: its free lists per stream, its live blocks by address,
 * its spare block records and what it counts of them. The pool's lock guards all of it
 * (pool_resource.h). */
#ifndef CRMM_PLUGINS_POOL_CORE_H
#define CRMM_PLUGINS_POOL_CORE_H

#include <stdint.h>
#include <crmm/alloc_counters.h>
#include "pool_block.h"
#include "pool_block_map.h"
#include "pool_streams.h"

typedef struct pool_core {
    pool_streams streams;          /* free blocks per stream */
    pool_block_map live;           /* live blocks by address */
    pool_records records;          /* spare block records */
    crmm_alloc_counters counters;  /* requested bytes; updated under the lock (CRMM_COUNT_LOCKED) */
    uint64_t live_bytes;           /* bytes of live blocks (rounded to 256) */
    uint64_t live_peak;            /* the highest live_bytes (with caches on: of the sums, pool_cache_sum) */
} pool_core;

#endif
