/* crmm/stream_pool.h — a fixed set of CUDA streams handed out round-robin.
 *
 * RMM's rmm.pylibrmm.cuda_stream_pool.CudaStreamPool in C: spread independent work over several
 * streams without creating one per task. The streams are created with the pool and destroyed
 * with it; the pool hands out non-owning views of them (crmm_stream_destroy on one is a no-op),
 * valid while the pool lives. Successive calls may return the same stream. All functions are
 * thread-safe; crmm_stream_pool_get_stream takes no lock (one atomic counter). */
#ifndef CRMM_STREAM_POOL_H
#define CRMM_STREAM_POOL_H

#include <crmm/export.h>
#include <stddef.h>
#include <crmm/error.h>
#include <crmm/stream.h>

#ifdef __cplusplus
extern "C" {
#endif

/* RMM's default pool size. */
#define CRMM_STREAM_POOL_DEFAULT_SIZE 16

typedef struct crmm_stream_pool crmm_stream_pool;

/* Create `size` streams on the current device with `flags` (RMM's default:
 * CRMM_STREAM_SYNC_DEFAULT). Errors: CRMM_ERROR_INVALID_ARGUMENT (out NULL, size 0, bad flags;
 * checked before any CUDA call), CRMM_ERROR_OUT_OF_MEMORY, CRMM_ERROR_CUDA (no device, stream
 * creation failed; the streams made so far are destroyed), CRMM_ERROR_STATE (the process is
 * exiting, or the CUDA runtime is unloading). *out NULL on error. */
CRMM_API crmm_status crmm_stream_pool_create(size_t size, crmm_stream_flags flags, crmm_stream_pool **out);

/* Destroy the pool and its streams (with the pool's device current). The views it handed out
 * become invalid. NULL: no-op. Never fails (CUDA errors are logged) and leaves the thread's last
 * error as it was. */
CRMM_API void crmm_stream_pool_destroy(crmm_stream_pool *pool);

/* Number of streams in the pool; 0 for NULL (with CRMM_ERROR_INVALID_ARGUMENT in
 * crmm_last_error()). */
CRMM_API size_t crmm_stream_pool_get_pool_size(const crmm_stream_pool *pool);

/* The next stream, round-robin: the n-th call since creation (over all threads) gets stream
 * n % size, so the first call gives stream 0. Errors: CRMM_ERROR_INVALID_ARGUMENT (pool or out
 * NULL; *out set to NULL when out is given). */
CRMM_API crmm_status crmm_stream_pool_get_stream(crmm_stream_pool *pool, crmm_stream **out);

/* Stream number `stream_id` modulo the pool size; every id is valid. Negative ids count from the
 * end like Python's modulo: the index is the r in [0, size) with stream_id ≡ r (mod size), so
 * -1 is the last stream and -size the first. Errors as crmm_stream_pool_get_stream. */
CRMM_API crmm_status crmm_stream_pool_get_stream_by_id(crmm_stream_pool *pool, long long stream_id, crmm_stream **out);

#ifdef __cplusplus
}
#endif
#endif
