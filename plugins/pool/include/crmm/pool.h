/* crmm/pool.h — control operations of the `pool` plugin.
 *
 * The pool hands a block freed on stream S out again on S at once, without a CUDA call; it
 * knows S only by its handle. How another stream T gets S's blocks is the pool's parameter
 * stream_reuse: `sync` (default) synchronizes the device and never passes S's handle to CUDA, so
 * S may be destroyed at any time; `event` records an event on S and makes T wait for it, without
 * blocking the host, so S must stay alive until the pool is told with crmm_pool_forget_stream().
 *
 * In both modes: CUDA reuses the handle of a destroyed stream for the next stream created, so
 * memory freed on S while work on it is still pending could reach a new stream that got S's
 * handle before that work is done. Tell the pool before destroying such a stream:
 *
 *   crmm_pool_forget_stream(mr, s);   // waits for s, then its free blocks serve every stream
 *   cudaStreamDestroy(s);
 *
 * (With stream_reuse = sync, synchronizing s yourself before destroying it is just as good.) */
#ifndef CRMM_POOL_H
#define CRMM_POOL_H

#include <crmm/resource.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    /* arg: the stream handle itself (crmm_cuda_stream_t cast to void *), of a live stream: call
     * it before destroying the stream. Waits for the stream (cudaStreamSynchronize, whether or
     * not the pool holds blocks freed on it), then files the blocks freed on it as usable by any
     * stream, so nothing freed on it stays tied to its handle. CRMM_OK and nothing done for a
     * pool over host memory; once the process is exiting it waits for nothing (no CUDA call)
     * and refiles the blocks all the same. Errors: CRMM_ERROR_CUDA (the pool's device could not
     * be made current, or the synchronization failed), CRMM_ERROR_STATE (the process began to
     * exit, or the CUDA runtime is unloading, while the device was being made current). */
    CRMM_POOL_OP_FORGET_STREAM = 1,
    /* arg: unused (NULL). Sets the peaks to the current figures: BYTES_IN_USE_PEAK,
     * ALLOCATIONS_PEAK, BYTES_RESERVED_PEAK and CRMM_QUERY_POOL_BLOCK_BYTES_PEAK (what PyTorch's
     * torch.cuda.reset_peak_memory_stats does). Never fails on a pool. */
    CRMM_POOL_OP_RESET_PEAKS = 2
};

/* The pool's own queries, numbered within the `pool` kind (resource.h): crmm_resource_query on
 * the pool, or crmm_resource_query_kind(mr, "pool", ...) from the top of its chain. What it asked of the device since creation, so
 * that a program can count per step what an allocation waited for: each is a counter the pool
 * keeps on its slow paths only (the allocate and free fast paths touch none of them). */
#define CRMM_QUERY_POOL_DEVICE_SYNCS ((crmm_query)(CRMM_QUERY_PLUGIN_FIRST + 0))   /* cudaDeviceSynchronize calls */
#define CRMM_QUERY_POOL_EVENT_WAITS ((crmm_query)(CRMM_QUERY_PLUGIN_FIRST + 1))    /* streams made to wait for another's event */
#define CRMM_QUERY_POOL_GROWTHS ((crmm_query)(CRMM_QUERY_PLUGIN_FIRST + 2))        /* upstream chunks taken, or runs of pages mapped */
#define CRMM_QUERY_POOL_PAGES_MAPPED ((crmm_query)(CRMM_QUERY_PLUGIN_FIRST + 3))   /* expandable: cuMemMap calls (one per page) */
#define CRMM_QUERY_POOL_PAGES_UNMAPPED ((crmm_query)(CRMM_QUERY_PLUGIN_FIRST + 4)) /* expandable: cuMemUnmap calls */
#define CRMM_QUERY_POOL_PAGES_CREATED ((crmm_query)(CRMM_QUERY_PLUGIN_FIRST + 5))  /* expandable: cuMemCreate calls */
#define CRMM_QUERY_POOL_PAGES_RELEASED ((crmm_query)(CRMM_QUERY_PLUGIN_FIRST + 6)) /* expandable: cuMemRelease calls */
/* Bytes of the blocks handed out (requests rounded up to 256 bytes; BYTES_IN_USE counts the
 * bytes asked for), and the highest that has been. */
#define CRMM_QUERY_POOL_BLOCK_BYTES ((crmm_query)(CRMM_QUERY_PLUGIN_FIRST + 7))
#define CRMM_QUERY_POOL_BLOCK_BYTES_PEAK ((crmm_query)(CRMM_QUERY_PLUGIN_FIRST + 8))
/* 1 once the per-thread caches are on (threads contended for the pool, or thread_cache = on and
 * a second thread allocated), else 0: an expandable pool then grows in steps (docs/expandable-pool.md).
 * While they are on, the pool's peaks (BYTES_IN_USE_PEAK, ALLOCATIONS_PEAK, POOL_BLOCK_BYTES_PEAK)
 * are raised when the caches' counts are summed, at every query and whenever a cache gives its
 * blocks back: a high point held between two of those, in caches alone, is not seen. */
#define CRMM_QUERY_POOL_THREAD_CACHES ((crmm_query)(CRMM_QUERY_PLUGIN_FIRST + 9))
/* Allocates and frees that found the pool's lock held by another thread and waited for it
 * (counted while the per-thread caches are off; with them on, calls go through the caches). */
#define CRMM_QUERY_POOL_LOCK_WAITS ((crmm_query)(CRMM_QUERY_PLUGIN_FIRST + 10))
/* Expandable: pages moved without waiting for the device whose old addresses are still mapped
 * (their memory is mapped where the pool grew; the old mapping goes once the work queued before
 * the move has finished, docs/expandable-pool.md), a plan's lent to the pool's range included.
 * Not part of BYTES_RESERVED, which counts physical memory. */
#define CRMM_QUERY_POOL_PAGES_LENT ((crmm_query)(CRMM_QUERY_PLUGIN_FIRST + 11))
/* With a plan (the pool's `plan` parameter): requests of the planned stream served at their planned
 * place, and those served as without a plan (unknown to it, their place still in use, or past a
 * plan without a loop). 0 without a plan. */
#define CRMM_QUERY_POOL_PLAN_HITS ((crmm_query)(CRMM_QUERY_PLUGIN_FIRST + 12))
#define CRMM_QUERY_POOL_PLAN_MISSES ((crmm_query)(CRMM_QUERY_PLUGIN_FIRST + 13))

/* crmm_resource_control(mr, CRMM_POOL_OP_FORGET_STREAM, stream) on the first pool in mr's chain
 * (crmm_resource_find_kind). CRMM_ERROR_UNSUPPORTED when the chain has no pool;
 * CRMM_ERROR_INVALID_ARGUMENT for a NULL resource. */
static inline crmm_status crmm_pool_forget_stream(crmm_resource *mr, crmm_cuda_stream_t stream)
{
    if (!mr)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "pool: forget_stream: resource is NULL");
    crmm_resource *pool = crmm_resource_find_kind(mr, "pool");
    if (!pool)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "%s resource has no pool in its chain", crmm_resource_kind(mr));
    return crmm_resource_control(pool, CRMM_POOL_OP_FORGET_STREAM, (void *)stream);
}

/* crmm_resource_control(mr, CRMM_POOL_OP_RESET_PEAKS, NULL) on the first pool in mr's chain.
 * CRMM_ERROR_UNSUPPORTED when the chain has no pool; CRMM_ERROR_INVALID_ARGUMENT for a NULL
 * resource. */
static inline crmm_status crmm_pool_reset_peaks(crmm_resource *mr)
{
    if (!mr)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "pool: reset_peaks: resource is NULL");
    crmm_resource *pool = crmm_resource_find_kind(mr, "pool");
    if (!pool)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "%s resource has no pool in its chain", crmm_resource_kind(mr));
    return crmm_resource_control(pool, CRMM_POOL_OP_RESET_PEAKS, NULL);
}

/* The most a placement plan (the pool's `plan` parameter, written by `crmm plan`) may span and
 * the most entries it may list: a plan beyond either is refused when the pool is made, and
 * `crmm plan` refuses to write one (a log with a larger allocation or more of them). */
#define CRMM_POOL_PLAN_MAX_EXTENT ((uint64_t)1 << 50)
#define CRMM_POOL_PLAN_MAX_ENTRIES ((uint64_t)1 << 32)

#ifdef __cplusplus
}
#endif
#endif
