/* stream_pool.c — a fixed array of CUDA streams handed out round-robin.
 *
 * The pool is one allocation: a header and `size` embedded stream objects (views the pool owns).
 * get_stream is one relaxed atomic fetch-add on a 64-bit counter, taken modulo the size: no lock,
 * and with 64 bits the counter never wraps in practice. */
#include "build_config.h"
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <crmm/cuda_support.h>
#include <crmm/stream_pool.h>
#include "internal.h"
#include "stream_internal.h"

struct crmm_stream_pool {
    size_t size;
    int device;                 /* the device the streams were made on */
    atomic_uint_least64_t next; /* number of get_stream calls so far */
    crmm_stream streams[];      /* `size` member views */
};

crmm_status crmm_stream_pool_create(size_t size, crmm_stream_flags flags, crmm_stream_pool **out)
{
    if (!out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "stream_pool_create: out is NULL");
    *out = NULL;
    if (size == 0)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "stream_pool_create: the pool size must be at least 1");
    crmm_status st = crmm_stream_check_flags((int)flags, "stream_pool_create");
    if (st != CRMM_OK)
        return st;
    if (size > (SIZE_MAX - sizeof(crmm_stream_pool)) / sizeof(crmm_stream))
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "stream_pool_create: %zu streams do not fit in memory", size);
    crmm_stream_pool *pool = malloc(sizeof *pool + size * sizeof(crmm_stream));
    if (!pool)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "stream_pool_create: no memory for %zu streams", size);
    pool->size = size;
    atomic_init(&pool->next, 0);
    if ((st = crmm_cuda_current_device(&pool->device)) != CRMM_OK) {
        free(pool);
        return crmm_error_add_context("stream_pool_create");
    }
    for (size_t i = 0; i < size; i++) {
        crmm_cuda_stream_t h;
        if ((st = crmm_stream_create_handle(flags, &h)) != CRMM_OK) {
            crmm_error_add_context("stream_pool_create: stream %zu of %zu", i, size);
            crmm_kept_error why;
            crmm_keep_error(&why, st);
            while (i-- > 0)
                crmm_stream_destroy_handle(pool->streams[i].handle, pool->device);
            free(pool);
            return crmm_restore_error(&why);
        }
        crmm_stream_init_member(&pool->streams[i], h);
    }
    *out = pool;
    return CRMM_OK;
}

void crmm_stream_pool_destroy(crmm_stream_pool *pool)
{
    if (!pool)
        return;
    /* a failing cudaStreamDestroy is logged; the thread's error stays the caller's */
    crmm_error_hold_begin();
    for (size_t i = 0; i < pool->size; i++)
        crmm_stream_destroy_handle(pool->streams[i].handle, pool->device);
    crmm_error_hold_end();
    free(pool);
}

size_t crmm_stream_pool_get_pool_size(const crmm_stream_pool *pool)
{
    if (!pool) {
        crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "stream_pool_get_pool_size: pool is NULL");
        return 0;
    }
    return pool->size;
}

static crmm_status check_args(const crmm_stream_pool *pool, crmm_stream **out, const char *who)
{
    if (out)
        *out = NULL;
    if (!pool || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", who, pool ? "out" : "pool");
    return CRMM_OK;
}

crmm_status crmm_stream_pool_get_stream(crmm_stream_pool *pool, crmm_stream **out)
{
    crmm_status st = check_args(pool, out, "stream_pool_get_stream");
    if (st != CRMM_OK)
        return st;
    uint_least64_t n = atomic_fetch_add_explicit(&pool->next, 1, memory_order_relaxed);
    *out = &pool->streams[n % pool->size];
    return CRMM_OK;
}

crmm_status crmm_stream_pool_get_stream_by_id(crmm_stream_pool *pool, long long stream_id, crmm_stream **out)
{
    crmm_status st = check_args(pool, out, "stream_pool_get_stream_by_id");
    if (st != CRMM_OK)
        return st;
    size_t index;
    if (stream_id >= 0) {
        index = (size_t)((unsigned long long)stream_id % pool->size);
    } else {
        /* -1 - stream_id is >= 0 and never overflows (also for LLONG_MIN). */
        unsigned long long back = (unsigned long long)(-1 - stream_id) % pool->size;
        index = pool->size - 1 - (size_t)back;
    }
    *out = &pool->streams[index];
    return CRMM_OK;
}
