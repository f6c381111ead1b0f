/* pool_core.h — the pool's core state: its free lists per stream, its live blocks by address,
 * its spare block records and what it counts of them. The pool's lock guards all of it
 * (pool_resource.h). */
#ifndef CRMM_PLUGINS_POOL_CORE_H
#define CRMM_PLUGINS_POOL_CORE_H

#include <stdint.h>
#include "pool_block.h"
#include "pool_block_map.h"
#include "pool_counts.h"
#include "pool_streams.h"

typedef struct pool_core {
    pool_streams streams;          /* free blocks per stream */
    pool_block_map live;           /* live blocks by address */
    pool_records records;          /* spare block records */
    pool_counts counts;            /* live allocations and totals; with caches on, less what each cache
                                    * counts in its delta (pool_counts.h) */
    pool_peaks peaks;              /* the highest live figures (with caches on: of the sums) */
} pool_core;

#endif
