/* pool_expandable_test.h — what the expandable pool's suites (check_pool_expandable,
 * check_pool_expandable_use) share: the pool over the scripted driver of fakes/fake_vmm.h,
 * allocations that write every byte, and the check that the pool's books agree with the driver. */
#ifndef CRMM_TESTS_POOL_EXPANDABLE_TEST_H
#define CRMM_TESTS_POOL_EXPANDABLE_TEST_H

#include <cuda_runtime_api.h>
#include <crmm/pool.h>
#include "blocks_test.h"
#include "fakes/fake_vmm.h"

#define PAGE (64 * KiB)          /* the scripted device's allocation granularity */
#define DEVICE_MEMORY (64 * MiB) /* what cudaMemGetInfo says the device has */

/* A pool with expandable=true and `params` over the scripted driver. */
static inline crmm_resource *expandable_pool(const char *params)
{
    crmm_resource *x = NULL;
    ck_assert_crmm_ok(fake_vmm_expandable_pool(params, &x));
    return x;
}

/* The running test's pool: the fixture's teardown releases it, unless the test did (release_pool). */
static crmm_resource *p;

static inline void release_pool(void)
{
    crmm_resource_release(p);
    p = NULL;
}

static inline void setup(void) { fake_vmm_reset(PAGE, DEVICE_MEMORY); }

static inline void teardown(void)
{
    if (p)
        release_pool();
}

static inline cudaStream_t stream_n(int n) { return (cudaStream_t)(uintptr_t)(0x1000 + 0x100 * n); }

/* Allocate n bytes on stream s and write all of them (a page the pool did not map would crash). */
static inline unsigned char *alloc_on(crmm_resource *mr, size_t n, cudaStream_t s)
{
    void *x = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, n, (crmm_cuda_stream_t)s, &x));
    ck_assert_ptr_nonnull(x);
    memset(x, 0xA5, n);
    return x;
}

static inline unsigned char *alloc(crmm_resource *mr, size_t n) { return alloc_on(mr, n, NULL); }

static inline void free_on(crmm_resource *mr, void *x, size_t n, cudaStream_t s)
{
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, x, n, (crmm_cuda_stream_t)s));
}

static inline void dealloc(crmm_resource *mr, void *x, size_t n) { free_on(mr, x, n, NULL); }

/* The pool's books agree with the driver: what it reserves is the physical memory held (spare
 * pages were released), mapped once, apart from lent pages (moved without waiting: mapped where
 * the pool grew and still at their old addresses). */
static inline void books_agree(crmm_resource *mr)
{
    size_t lent = (size_t)q(mr, CRMM_QUERY_POOL_PAGES_LENT) * PAGE;
    ck_assert_uint_eq(q(mr, CRMM_QUERY_BYTES_RESERVED), fake_vmm.physical);
    ck_assert_uint_eq(fake_vmm_mapped_bytes(), fake_vmm.physical + lent);
    ck_assert_uint_eq(q(mr, CRMM_QUERY_UPSTREAM_BLOCKS), fake_vmm.physical / PAGE);
}

#endif
