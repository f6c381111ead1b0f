/* check_views_and_system_cpu.c — cuda_async_view, async_managed, system and sam_headroom against
 * a scripted CUDA: which pool, stream and placement reach the driver, what create refuses and
 * why (no pool handle or 0, no memory pools, a driver before CUDA 13, no pageable memory access,
 * a missing headroom), that neither view destroys its pool, that a free waits for its stream
 * (a default one on the resource's device), that a failed placement leaves nothing allocated, and
 * that a wrong-size free leaves the counts at zero (theirs, and a prefetch adaptor's over system).
 *
 * This program defines the CUDA runtime functions the plugins call; it is linked with
 * -export-dynamic, so the plugins' (and libcrmm's) calls land here. The script is a few
 * globals each test sets before it creates its resource. */
#include "build_config.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <crmm/async_managed.h>
#include <crmm/cuda_async_view.h>
#include "test_support.h"

/* ---- the scripted CUDA ------------------------------------------------------------------- */

static struct script {
    int devices, pools_supported, pageable, driver;
    cudaError_t default_pool_error, advise_error, sync_error;
    size_t free_bytes, total_bytes;
} sc;

static struct seen {
    cudaMemPool_t alloc_pool;
    cudaStream_t alloc_stream, free_stream, synced_stream;
    int allocs, frees, syncs, pools_destroyed, default_pool_calls;
    struct cudaMemLocation default_pool_location;
    enum cudaMemAllocationType default_pool_type;
    int synced_on; /* the device current at the last cudaStreamSynchronize */
    int advises;
    struct { const void *ptr; size_t count; struct cudaMemLocation where; } advice[4];
} seen;

static int current_device;

static int managed_pool_token, caller_pool_token;

static void script_defaults(void)
{
    memset(&seen, 0, sizeof seen);
    current_device = 0;
    sc = (struct script){.devices = 1, .pools_supported = 1, .pageable = 1, .driver = 13000, .free_bytes = 1 << 20, .total_bytes = 4 << 20};
}

cudaError_t cudaGetDevice(int *device) { *device = current_device; return cudaSuccess; }
cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= sc.devices)
        return cudaErrorInvalidDevice;
    current_device = device;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int *count) { *count = sc.devices; return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaDriverGetVersion(int *version) { *version = sc.driver; return cudaSuccess; }
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    (void)device;
    *value = attr == cudaDevAttrMemoryPoolsSupported ? sc.pools_supported : attr == cudaDevAttrPageableMemoryAccess ? sc.pageable : 0;
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    *free_bytes = sc.free_bytes;
    *total = sc.total_bytes;
    return cudaSuccess;
}
cudaError_t cudaMemGetDefaultMemPool(cudaMemPool_t *pool, struct cudaMemLocation *location, enum cudaMemAllocationType type)
{
    seen.default_pool_calls++;
    seen.default_pool_location = *location;
    seen.default_pool_type = type;
    if (sc.default_pool_error != cudaSuccess)
        return sc.default_pool_error;
    *pool = (cudaMemPool_t)&managed_pool_token;
    return cudaSuccess;
}
cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) { (void)pool; seen.pools_destroyed++; return cudaSuccess; }
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value)
{
    (void)pool;
    *(uint64_t *)value = attr == cudaMemPoolAttrReservedMemCurrent ? 12345 : 0;
    return cudaSuccess;
}
cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream)
{
    seen.allocs++;
    seen.alloc_pool = pool;
    seen.alloc_stream = stream;
    if (size > ((size_t)1 << 40))
        return cudaErrorMemoryAllocation;
    *ptr = aligned_alloc(256, (size + 255) & ~(size_t)255);
    return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    seen.frees++;
    seen.free_stream = stream;
    free(ptr);
    return cudaSuccess;
}
cudaError_t cudaMemAdvise(const void *ptr, size_t count, enum cudaMemoryAdvise advice, struct cudaMemLocation location)
{
    ck_assert_int_eq(advice, cudaMemAdviseSetPreferredLocation);
    if (sc.advise_error != cudaSuccess)
        return sc.advise_error;
    ck_assert_int_lt(seen.advises, 4);
    seen.advice[seen.advises].ptr = ptr;
    seen.advice[seen.advises].count = count;
    seen.advice[seen.advises].where = location;
    seen.advises++;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    seen.syncs++;
    seen.synced_stream = stream;
    seen.synced_on = current_device;
    return sc.sync_error;
}

/* create `plugin` with `params`: fails with `expected`, the message holding `text`, nothing made */
static void refused(const char *plugin, const char *params, crmm_status expected, const char *text)
{
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_resource_create(plugin, params, NULL, &mr), expected);
    ck_assert_ptr_null(mr);
    ck_assert_msg(strstr(crmm_last_error(), text), "%s '%s': message lacks '%s': %s", plugin, params ? params : "", text,
                  crmm_last_error());
}

/* ---- cuda_async_view ----------------------------------------------------------------------- */

CRMM_TEST_IN("cuda_async_view", view_allocates_from_the_callers_pool_on_the_callers_stream)
{
    script_defaults();
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(crmm_cuda_async_view_create(&caller_pool_token, &mr));
    ck_assert_str_eq(crmm_resource_kind(mr), "cuda_async_view");
    ck_assert(crmm_resource_is_device_accessible(mr));
    ck_assert_int_eq(mr->device, 0);
    cudaStream_t s = (cudaStream_t)0x77;
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 1000, s, &p));
    ck_assert_ptr_eq(seen.alloc_pool, (cudaMemPool_t)&caller_pool_token);
    ck_assert_ptr_eq(seen.alloc_stream, s);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 1000);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_RESERVED), 12345); /* the pool's own attribute */
    void *pool = NULL;
    ck_assert_crmm_ok(crmm_cuda_async_view_get_pool(mr, &pool));
    ck_assert_ptr_eq(pool, &caller_pool_token);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1000, s));
    ck_assert_ptr_eq(seen.free_stream, s);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    crmm_resource_release(mr);
    ck_assert_int_eq(seen.pools_destroyed, 0); /* the caller's pool outlives the view */
}

CRMM_TEST_IN("cuda_async_view", view_takes_the_handle_as_decimal_or_hex)
{
    script_defaults();
    char params[64];
    snprintf(params, sizeof params, "pool_handle=%" PRIuPTR, (uintptr_t)&caller_pool_token);
    crmm_resource *mr = crmm_test_create("cuda_async_view", params, NULL);
    void *pool = NULL;
    ck_assert_crmm_ok(crmm_resource_control_kind(mr, "cuda_async_view", CRMM_CUDA_ASYNC_VIEW_OP_GET_POOL, &pool));
    ck_assert_ptr_eq(pool, &caller_pool_token);
    ck_assert_crmm(crmm_cuda_async_view_get_pool(mr, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_control(mr, 2, &pool), CRMM_ERROR_UNSUPPORTED);
    crmm_resource_release(mr);
}

CRMM_TEST_IN("cuda_async_view", view_refuses_a_missing_zero_or_bad_handle)
{
    script_defaults();
    refused("cuda_async_view", NULL, CRMM_ERROR_CONFIG, "pool_handle");
    refused("cuda_async_view", "pool_handle=0", CRMM_ERROR_CONFIG, "pool_handle");
    refused("cuda_async_view", "pool_handle=my_pool", CRMM_ERROR_CONFIG, "pool_handle");
    refused("cuda_async_view", "pool_handle=-5", CRMM_ERROR_CONFIG, "pool_handle");
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_cuda_async_view_create(NULL, &mr), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_cuda_async_view_create(&caller_pool_token, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(mr);
    sc.pools_supported = 0;
    char params[64];
    snprintf(params, sizeof params, "pool_handle=%#" PRIxPTR, (uintptr_t)&caller_pool_token);
    refused("cuda_async_view", params, CRMM_ERROR_UNSUPPORTED, "cudaDevAttrMemoryPoolsSupported");
    ck_assert_int_eq(seen.allocs, 0);
}

CRMM_TEST_IN("cuda_async_view", view_out_of_memory_is_reported_as_such)
{
    script_defaults();
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(crmm_cuda_async_view_create(&caller_pool_token, &mr));
    void *p = NULL;
    ck_assert_crmm(crmm_resource_allocate(mr, (size_t)1 << 50, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_msg(strstr(crmm_last_error(), "cuda_async_view") && strstr(crmm_last_error(), "1.0 PiB"), "message: %s",
                  crmm_last_error());
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    crmm_resource_release(mr);
}

/* ---- async_managed ------------------------------------------------------------------------- */

CRMM_TEST_IN("async_managed", async_managed_uses_the_devices_default_managed_pool)
{
    script_defaults();
    crmm_resource *mr = crmm_test_create("async_managed", NULL, NULL);
    ck_assert_int_eq(seen.default_pool_calls, 1);
    ck_assert_int_eq(seen.default_pool_type, cudaMemAllocationTypeManaged);
    ck_assert_int_eq(seen.default_pool_location.type, cudaMemLocationTypeDevice);
    ck_assert_int_eq(seen.default_pool_location.id, 0);
    ck_assert(crmm_resource_is_device_accessible(mr));
    ck_assert(crmm_resource_is_host_accessible(mr));
    void *p = crmm_test_allocate(mr, 4096);
    ck_assert_ptr_eq(seen.alloc_pool, (cudaMemPool_t)&managed_pool_token);
    void *pool = NULL;
    ck_assert_crmm_ok(crmm_async_managed_get_pool(mr, &pool));
    ck_assert_ptr_eq(pool, &managed_pool_token);
    /* the view's header does not find an async_managed layer */
    ck_assert_crmm(crmm_cuda_async_view_get_pool(mr, &pool), CRMM_ERROR_UNSUPPORTED);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 4096, NULL));
    crmm_resource_release(mr);
    ck_assert_int_eq(seen.pools_destroyed, 0); /* the driver's pool */
}

CRMM_TEST_IN("async_managed", async_managed_names_why_it_cannot_be_made)
{
    script_defaults();
    sc.driver = 12080;
    refused("async_managed", NULL, CRMM_ERROR_UNSUPPORTED, "CUDA 13.0");
    ck_assert_msg(strstr(crmm_last_error(), "12.8"), "message: %s", crmm_last_error());
    ck_assert_int_eq(seen.default_pool_calls, 0);
    script_defaults();
    sc.pools_supported = 0;
    refused("async_managed", NULL, CRMM_ERROR_UNSUPPORTED, "memory pools");
    script_defaults();
    sc.default_pool_error = cudaErrorNotSupported;
    refused("async_managed", NULL, CRMM_ERROR_CUDA, "cudaMemGetDefaultMemPool");
    ck_assert_msg(strstr(crmm_last_error(), "managed memory pool"), "message: %s", crmm_last_error());
    refused("async_managed", "initial_pool_size=1MiB", CRMM_ERROR_CONFIG, "initial_pool_size");
}

/* ---- system and sam_headroom -------------------------------------------------------------- */

CRMM_TEST_IN("system", system_is_plain_host_memory_and_a_free_waits_for_its_stream)
{
    script_defaults();
    crmm_resource *mr = crmm_test_create("system", NULL, NULL);
    ck_assert(crmm_resource_is_device_accessible(mr));
    ck_assert(crmm_resource_is_host_accessible(mr));
    ck_assert_int_eq(mr->device, 0);
    void *p = crmm_test_allocate(mr, 1000);
    ck_assert_uint_eq((uintptr_t)p % CRMM_ALLOCATION_ALIGNMENT, 0);
    memset(p, 0xab, 1000);
    ck_assert_int_eq(seen.advises, 0); /* no placement without a headroom */
    ck_assert_int_eq(seen.allocs, 0);
    cudaStream_t s = (cudaStream_t)0x99;
    /* a stream that cannot be waited for: the block stays allocated, and can be freed later */
    sc.sync_error = cudaErrorInvalidResourceHandle;
    ck_assert_crmm(crmm_resource_deallocate(mr, p, 1000, s), CRMM_ERROR_CUDA);
    ck_assert_msg(strstr(crmm_last_error(), "cudaStreamSynchronize") && strstr(crmm_last_error(), "not freed"), "message: %s",
                  crmm_last_error());
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 1);
    sc.sync_error = cudaSuccess;
    int syncs = seen.syncs;
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1000, s));
    ck_assert_int_eq(seen.syncs, syncs + 1);
    ck_assert_ptr_eq(seen.synced_stream, s);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    crmm_resource_release(mr);
}

/* A default stream (the legacy one, the per-thread one) names a stream of whichever device is
 * current: a free on one, made while another device is current, waits for the default stream of
 * the resource's device, where the block was used, and leaves the caller's device current. A
 * created stream carries its device: nothing is switched for it. */
CRMM_TEST_IN("system", a_free_on_a_default_stream_waits_on_the_resources_device)
{
    script_defaults();
    sc.devices = 2;
    crmm_resource *mr = crmm_test_create("system", NULL, NULL);
    ck_assert_int_eq(mr->device, 0);
    const cudaStream_t streams[] = {NULL, cudaStreamLegacy, cudaStreamPerThread};
    for (size_t i = 0; i < sizeof streams / sizeof streams[0]; i++) {
        void *p = crmm_test_allocate(mr, 1000);
        ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
        seen.synced_on = -1;
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1000, streams[i]));
        ck_assert_ptr_eq(seen.synced_stream, streams[i]);
        ck_assert_msg(seen.synced_on == 0, "stream %p: synchronized with device %d current", (void *)streams[i],
                      seen.synced_on);
        ck_assert_int_eq(current_device, 1); /* the caller's device is current again */
        ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    }
    void *p = crmm_test_allocate(mr, 1000);
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1000, (cudaStream_t)0x99));
    ck_assert_int_eq(seen.synced_on, 1); /* a created stream: no switch */
    ck_assert_int_eq(current_device, 1);
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    crmm_resource_release(mr);
}

/* A resource built by plugin name for another device (crmm_plugin_path_create_resource, what
 * binning's bins and plugins building plugins use) is built with that device current, as a
 * config's resources are: a plugin that takes the current device is for that device, and the
 * caller's device is current again afterwards. */
CRMM_TEST_IN("system", resources_built_by_name_for_a_device_are_for_that_device)
{
    script_defaults();
    sc.devices = 2;
    static const char *const plugins[] = {"cuda", "managed", "pinned", "system"};
    for (size_t i = 0; i < sizeof plugins / sizeof plugins[0]; i++) {
        crmm_resource *mr = NULL;
        ck_assert_crmm_ok(crmm_plugin_path_create_resource(NULL, 1, plugins[i], NULL, NULL, NULL, &mr));
        ck_assert_msg(mr->device == 1, "%s: built for device %d", plugins[i], mr->device);
        ck_assert_int_eq(current_device, 0);
        crmm_resource_release(mr);
        ck_assert_crmm(crmm_plugin_path_create_resource(NULL, 2, plugins[i], NULL, NULL, NULL, &mr), CRMM_ERROR_CUDA);
        ck_assert_int_eq(current_device, 0);
    }
}

/* A size given as a percentage is checked against its row's range once it is resolved, by the
 * getter a plugin reads it with (paramtest's `limit`: at most 1 TiB): half of a 4 TiB device is
 * above it, half of a 1 TiB one is not. */
CRMM_TEST_IN("system", a_percentage_is_checked_against_the_range_when_resolved)
{
    script_defaults();
    sc.total_bytes = (size_t)4 << 40;
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_resource_create("paramtest", "id=1 limit=50%", NULL, &mr), CRMM_ERROR_CONFIG);
    ck_assert_msg(strstr(crmm_last_error(), "limit = 50%") && strstr(crmm_last_error(), "above the maximum 1099511627776"),
                  "%s", crmm_last_error());
    ck_assert_ptr_null(mr);
    sc.total_bytes = (size_t)1 << 40;
    ck_assert_crmm_ok(crmm_resource_create("paramtest", "id=1 limit=50%", NULL, &mr));
    crmm_resource_release(mr);
}

/* Neither free() nor cudaFreeAsync takes a size: a free of more than was allocated leaves the
 * counts at zero instead of wrapping to ~2^64, and so do the counts of the adaptors over such an
 * upstream that count what passes (prefetch, failure_callback: they cannot tell either). */
CRMM_TEST_IN("system", a_wrong_size_free_leaves_the_counts_at_zero)
{
    script_defaults();
    crmm_resource *sys = crmm_test_create("system", NULL, NULL), *view = NULL;
    ck_assert_crmm_ok(crmm_cuda_async_view_create(&caller_pool_token, &view));
    crmm_resource *pre = crmm_test_create("prefetch", NULL, sys);
    crmm_resource *fc = crmm_test_create("failure_callback", NULL, sys);
    crmm_resource *const mrs[] = {sys, view, pre, fc};
    for (int i = 0; i < 4; i++) {
        void *p = crmm_test_allocate(mrs[i], 1000);
        ck_assert_crmm_ok(crmm_resource_deallocate(mrs[i], p, 4000, NULL));
        ck_assert_uint_eq(crmm_test_query(mrs[i], CRMM_QUERY_BYTES_IN_USE), 0);
        ck_assert_uint_eq(crmm_test_query(mrs[i], CRMM_QUERY_ALLOCATIONS), 0);
    }
    crmm_test_release(fc, pre, view, sys);
}

CRMM_TEST_IN("system", system_and_sam_headroom_need_pageable_memory_access)
{
    script_defaults();
    sc.pageable = 0;
    refused("system", NULL, CRMM_ERROR_UNSUPPORTED, "cudaDevAttrPageableMemoryAccess");
    refused("sam_headroom", "headroom=1MiB", CRMM_ERROR_UNSUPPORTED, "cudaDevAttrPageableMemoryAccess");
    ck_assert_msg(strstr(crmm_last_error(), "sam_headroom"), "message: %s", crmm_last_error());
}

CRMM_TEST_IN("system", sam_headroom_needs_a_headroom)
{
    script_defaults();
    refused("sam_headroom", NULL, CRMM_ERROR_CONFIG, "headroom");
    refused("sam_headroom", "headroom=lots", CRMM_ERROR_CONFIG, "headroom");
    refused("sam_headroom", "headroom=-1", CRMM_ERROR_CONFIG, "headroom");
}

/* allocate `bytes` from a sam_headroom of `headroom` with `free_bytes` free on the device; the
 * advice given is in `seen` */
static void *allocate_with(crmm_resource **mr, const char *headroom, size_t free_bytes, size_t bytes)
{
    script_defaults();
    sc.free_bytes = free_bytes;
    char params[64];
    snprintf(params, sizeof params, "headroom=%s", headroom);
    *mr = crmm_test_create("sam_headroom", params, NULL);
    return crmm_test_allocate(*mr, bytes);
}

static void expect_advice(int i, const void *ptr, size_t count, enum cudaMemLocationType type)
{
    ck_assert_ptr_eq(seen.advice[i].ptr, ptr);
    ck_assert_uint_eq(seen.advice[i].count, count);
    ck_assert_int_eq(seen.advice[i].where.type, type);
    if (type == cudaMemLocationTypeDevice)
        ck_assert_int_eq(seen.advice[i].where.id, 0);
}

/* sam_headroom with 1 MiB free of 4 MiB: how much of a block goes to the device (the rest: host) */
static const struct { const char *headroom; size_t bytes, on_device; } placements[] = {
    {"256KiB", 2 << 20, 768 << 10}, /* 256 KiB kept: 768 KiB of a 2 MiB block on the device */
    {"256KiB", 64 << 10, 64 << 10}, /* a block that fits whole goes to the device whole */
    {"0", 1000, 768},               /* the device part is aligned down to 256 bytes */
    {"2MiB", 4096, 0},              /* a headroom above the free memory: all on the host */
    {"25%", 4096, 0},               /* a share of the device's memory: 25% keeps 1 MiB, all of it free */
};

START_TEST(sam_headroom_places_what_fits_above_the_headroom_on_the_device)
{
    crmm_resource *mr;
    size_t bytes = placements[_i].bytes, dev = placements[_i].on_device;
    char *p = allocate_with(&mr, placements[_i].headroom, 1 << 20, bytes);
    ck_assert_int_eq(seen.advises, (dev > 0) + (dev < bytes));
    if (dev > 0)
        expect_advice(0, p, dev, cudaMemLocationTypeDevice);
    if (dev < bytes)
        expect_advice(dev > 0, p + dev, bytes - dev, cudaMemLocationTypeHost);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, bytes, NULL));
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    crmm_resource_release(mr);
}

CRMM_TEST_IN("system", sam_headroom_failed_placement_frees_the_block)
{
    script_defaults();
    crmm_resource *mr = crmm_test_create("sam_headroom", "headroom=0", NULL);
    sc.advise_error = cudaErrorInvalidValue;
    void *p = NULL;
    ck_assert_crmm(crmm_resource_allocate(mr, 4096, NULL, &p), CRMM_ERROR_CUDA);
    ck_assert_msg(strstr(crmm_last_error(), "cudaMemAdvise") && strstr(crmm_last_error(), "sam_headroom"), "message: %s",
                  crmm_last_error());
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0); /* and the block is freed: ASan would see a leak */
    crmm_resource_release(mr);
}

int main(void)
{
    Suite *s = suite_create("views_and_system_cpu");
    TCase *tc = crmm_test_tcase(s, "cuda_async_view", 0);
    tc = crmm_test_tcase(s, "async_managed", 0);
    tc = crmm_test_tcase(s, "system", 0);
    tcase_add_loop_test(tc, sam_headroom_places_what_fits_above_the_headroom_on_the_device, 0,
                        (int)(sizeof placements / sizeof placements[0]));
    return crmm_test_run(s);
}
