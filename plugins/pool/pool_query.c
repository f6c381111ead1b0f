/* pool_query.c — the pool's answers to crmm_resource_query: the counts of allocations, requested
 * bytes and block bytes with their peaks (pool_counts.h: the pool's own, kept under its lock; with
 * per-thread caches on, summed with every cache's delta), the bytes and chunks held from upstream,
 * the free bytes, the largest free block (over every stream's free list and every cache) and the
 * maximum. Fragmentation follows from BYTES_FREE and LARGEST_FREE_BLOCK
 * (crmm_resource_fragmentation). */
#include "build_config.h"
#include <crmm/pool.h>
#include "pool_resource.h"

static uint64_t largest_free_block(const pool_resource *p)
{
    const pool_streams *ss = &p->core.streams;
    size_t n = ss->real ? ss->count : 1;
    uint64_t largest = 0;
    for (size_t i = 0; i < n; i++) {
        const pool_block *b = pool_free_list_largest(ss->real ? &ss->all[i]->free : &ss->last->free);
        if (b && b->size > largest)
            largest = b->size;
    }
    return largest;
}

void pool_reset_peaks(pool_resource *p)
{
    pool_lock(p);
    pool_counts sum = p->core.counts;
    if (pool_caching(p))
        pool_cache_sum(p, &sum);
    pool_peaks_reset(&p->core.peaks, &sum);
    p->growth.reserved_peak = pool_held(p);
    pool_unlock(p);
}

crmm_status pool_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    pool_resource *p = (pool_resource *)self;
    crmm_status st = CRMM_OK;
    pool_lock(p);
    pool_capture_collect(p);
    pool_counts sum = p->core.counts;
    uint64_t cached_largest = 0;
    if (pool_caching(p)) {
        pool_cache_sum(p, &sum);
        cached_largest = pool_cache_largest(p);
    }
    uint64_t live_bytes = (uint64_t)sum.block_bytes;
    switch ((int)what) {
    case CRMM_QUERY_BYTES_RESERVED: /* and pages the driver refused to release, held unmapped */
        *out = pool_held(p) + (uint64_t)p->growth.vmm.spare_count * p->growth.vmm.page;
        break;
    case CRMM_QUERY_BYTES_RESERVED_PEAK: *out = p->growth.reserved_peak; break;
    case CRMM_QUERY_BYTES_FREE: *out = pool_held(p) - live_bytes; break;
    case CRMM_QUERY_LARGEST_FREE_BLOCK: *out = largest_free_block(p); break;
    case CRMM_QUERY_UPSTREAM_BLOCKS: /* an expandable pool's pages, the plan's included */
        *out = p->growth.expandable ? p->growth.vmm.mapped_pages - p->growth.vmm.lent_pages +
                                          (p->plan ? p->plan->vmm.mapped_pages - p->plan->vmm.lent_pages : 0)
                                    : p->growth.chunk_count;
        break;
    case CRMM_QUERY_MAXIMUM_SIZE: *out = p->growth.maximum; break;
    case CRMM_QUERY_POOL_DEVICE_SYNCS: *out = __atomic_load_n(&p->core.streams.syncs, __ATOMIC_RELAXED); break;
    case CRMM_QUERY_POOL_EVENT_WAITS: *out = __atomic_load_n(&p->core.streams.event_waits, __ATOMIC_RELAXED); break;
    case CRMM_QUERY_POOL_GROWTHS: *out = p->growth.growths; break;
    case CRMM_QUERY_POOL_PAGES_MAPPED: *out = p->growth.vmm.pages_mapped; break;
    case CRMM_QUERY_POOL_PAGES_UNMAPPED: *out = p->growth.vmm.pages_unmapped; break;
    case CRMM_QUERY_POOL_PAGES_CREATED: *out = p->growth.vmm.pages_created; break;
    case CRMM_QUERY_POOL_PAGES_RELEASED: *out = p->growth.vmm.pages_released; break;
    case CRMM_QUERY_POOL_BLOCK_BYTES: *out = live_bytes; break;
    case CRMM_QUERY_POOL_BLOCK_BYTES_PEAK: *out = (uint64_t)p->core.peaks.block_bytes; break;
    case CRMM_QUERY_POOL_THREAD_CACHES: *out = pool_caching(p); break;
    case CRMM_QUERY_POOL_LOCK_WAITS: *out = p->cache.lock_waits_total; break;
    case CRMM_QUERY_POOL_PAGES_LENT: /* the plan's lent to the pool's range too */
        *out = p->growth.vmm.lent_pages + (p->plan ? p->plan->vmm.lent_pages : 0);
        break;
    case CRMM_QUERY_POOL_PLAN_HITS: *out = p->plan ? p->plan->hits : 0; break;
    case CRMM_QUERY_POOL_PLAN_MISSES: *out = p->plan ? p->plan->misses : 0; break;
    default: st = pool_counts_query(&sum, &p->core.peaks, what, out); break;
    }
    if (what == CRMM_QUERY_LARGEST_FREE_BLOCK && cached_largest > *out)
        *out = cached_largest;
    pool_unlock(p);
    if (st != CRMM_OK) {
        char label[80];
        return crmm_set_error(st, "%s cannot answer query %d", pool_label(p, label, sizeof label), (int)what);
    }
    return CRMM_OK;
}
