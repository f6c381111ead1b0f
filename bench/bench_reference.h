/* bench_reference.h — raw CUDA allocators as resources, the references `crmm bench` reports
 * beside crmm's own resources.
 *
 * Each is a minimal crmm_resource built inside the tool (no plugin, no counters), so that the
 * references run through exactly the same workload and timing loop as everything else:
 *  - "cudaMalloc": cudaMalloc / cudaFree.
 *  - "cudaMallocAsync": cudaMallocAsync / cudaFreeAsync on the device's current memory pool (the
 *    default pool unless a program replaced it), with its release threshold raised to UINT64_MAX
 *    for the resource's lifetime (restored at destroy), so freed memory stays cached as in
 *    RMM's measurements. Creating it trims the pool to nothing and resets the pool's reserved
 *    high-water mark, so CRMM_QUERY_BYTES_RESERVED_PEAK answers what this resource reserved.
 *  - "cudaMallocFromPoolAsync": cudaMallocFromPoolAsync / cudaFreeAsync on a pool of its own,
 *    made as RMM's cuda_async_memory_resource makes its pool by default (pinned device memory,
 *    release threshold UINT64_MAX, not primed) and destroyed with the resource: the driver calls
 *    RMM's cuda_async and crmm's async plugin make, with nothing of theirs around them.
 * All need a CUDA device: only create them after crmm_cuda_device_count() succeeded. */
#ifndef CRMM_BENCH_REFERENCE_H
#define CRMM_BENCH_REFERENCE_H

#include <crmm/resource.h>

typedef enum bench_reference_kind {
    BENCH_REFERENCE_CUDA_MALLOC = 0,
    BENCH_REFERENCE_CUDA_MALLOC_ASYNC = 1,
    BENCH_REFERENCE_CUDA_MALLOC_FROM_POOL_ASYNC = 2
} bench_reference_kind;

#define BENCH_REFERENCE_COUNT 3

/* The reference's name as printed: "cudaMalloc", "cudaMallocAsync", "cudaMallocFromPoolAsync";
 * NULL for other values. */
const char *bench_reference_name(bench_reference_kind kind);

/* Create reference `kind` on CUDA device `device` (one reference; release it when done).
 * Errors: CRMM_ERROR_INVALID_ARGUMENT (bad kind, NULL out), CRMM_ERROR_UNSUPPORTED (the device
 * has no memory pools), CRMM_ERROR_CUDA, CRMM_ERROR_OUT_OF_MEMORY. */
crmm_status bench_reference_create(bench_reference_kind kind, int device, crmm_resource **out);

#endif
