/* pool_test.h — what the pool suites over host memory (check_pool, check_pool_growth) share: a pool
 * over host, its figures, and the scripted upstream ("script"): adjacent allocations, logged,
 * refused above a size or a total, to show exactly what the pool asks of its upstream. */
#ifndef CRMM_TESTS_POOL_TEST_H
#define CRMM_TESTS_POOL_TEST_H

#include <crmm/pool.h>
#include "blocks_test.h"
#include "conformance.h"

static inline crmm_resource *host_upstream(void) { return crmm_test_create("host", "", NULL); }

/* A pool over `upstream` with `params`; the caller's reference to upstream is dropped. */
static inline crmm_resource *make_pool(const char *params, crmm_resource *upstream)
{
    crmm_resource *p = crmm_test_create("pool", params, upstream);
    crmm_resource_release(upstream);
    return p;
}

/* In a test: crmm_test_allocate, and the block is aligned as crmm promises. */
static inline void *alloc(crmm_resource *mr, size_t n)
{
    void *p = crmm_test_allocate(mr, n);
    ck_assert_uint_eq((uintptr_t)p % CRMM_ALLOCATION_ALIGNMENT, 0);
    return p;
}

/* Send the log at info level to a fresh file; returns its path. */
static inline const char *capture_log(void)
{
    const char *path = crmm_test_write_file("pool.log", "");
    ck_assert_ptr_nonnull(path);
    ck_assert_crmm_ok(crmm_log_set_file(path));
    ck_assert_crmm_ok(crmm_log_set_level(CRMM_LOG_INFO));
    return path;
}

/* What the log at `path` holds so far (kept until the next call). */
static inline const char *read_log(const char *path)
{
    crmm_log_flush();
    return crmm_test_file_text(path);
}

/* ---- the scripted upstream ---------------------------------------------------------------- */

typedef struct script_upstream {
    crmm_resource base;
    unsigned char *arena;          /* one host buffer; allocations are cut from it in order */
    size_t capacity, used;
    size_t refuse_above;           /* requests larger than this fail (0: none) */
    size_t asked[64];              /* every request, in order (refused ones too) */
    int nasked;
    int live, frees;
} script_upstream;

static inline crmm_status script_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    (void)stream;
    script_upstream *u = (script_upstream *)self;
    if (u->nasked < 64)
        u->asked[u->nasked++] = bytes;
    size_t rounded = (bytes + 255) & ~(size_t)255;
    if ((u->refuse_above && bytes > u->refuse_above) || rounded > u->capacity - u->used)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "script: refused %zu bytes", bytes);
    *ptr = u->arena + u->used;
    u->used += rounded;
    u->live++;
    return CRMM_OK;
}

static inline crmm_status script_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    (void)ptr, (void)bytes, (void)stream;
    ((script_upstream *)self)->live--;
    ((script_upstream *)self)->frees++;
    return CRMM_OK;
}

static inline void script_destroy(crmm_resource *self)
{
    free(((script_upstream *)self)->arena);
    free(self);
}

static const crmm_resource_ops script_ops = {.allocate = script_allocate, .deallocate = script_deallocate, .destroy = script_destroy};

static inline script_upstream *script_new(size_t capacity, size_t refuse_above)
{
    script_upstream *u = calloc(1, sizeof *u);
    ck_assert_ptr_nonnull(u);
    u->arena = aligned_alloc(256, capacity);
    ck_assert_ptr_nonnull(u->arena);
    u->capacity = capacity;
    u->refuse_above = refuse_above;
    crmm_resource_init(&u->base, &script_ops, "script", CRMM_RESOURCE_HOST_ACCESSIBLE, -1, NULL);
    return u;
}

#endif
