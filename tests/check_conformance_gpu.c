/* check_conformance_gpu.c — the conformance suite over the basic GPU plugins (cuda, managed,
 * pinned, template over each), and what kind of memory each one really hands out. */
#include "build_config.h"
#include <string.h>
#include <cuda_runtime_api.h>
#include "conformance.h"
#include "test_support.h"

static const crmm_test_chain gpu_chains[] = {
    {"cuda", "[resource.g]\nplugin = cuda\n", "g", 1, 0},
    {"managed", "[resource.m]\nplugin = managed\n", "m", 1, 0},
    {"pinned", "[resource.p]\nplugin = pinned\n", "p", 1, 0},
    {"template_over_cuda", "[resource.g]\nplugin = cuda\n[resource.t]\nplugin = template\nupstream = g\n", "t", 1, 0},
    {"template_over_managed", "[resource.m]\nplugin = managed\n[resource.t]\nplugin = template\nupstream = m\n", "t", 1, 0},
    {"template_over_pinned", "[resource.p]\nplugin = pinned\n[resource.t]\nplugin = template\nupstream = p\n", "t", 1, 0},
};

/* One row per plugin: what cudaPointerGetAttributes must say about its memory. */
static const struct memory_kind {
    const char *plugin;
    enum cudaMemoryType type;
    unsigned flags; /* CRMM_RESOURCE_* the resource must have */
} kinds[] = {
    {"cuda", cudaMemoryTypeDevice, CRMM_RESOURCE_DEVICE_ACCESSIBLE},
    {"managed", cudaMemoryTypeManaged, CRMM_RESOURCE_DEVICE_ACCESSIBLE | CRMM_RESOURCE_HOST_ACCESSIBLE},
    {"pinned", cudaMemoryTypeHost, CRMM_RESOURCE_DEVICE_ACCESSIBLE | CRMM_RESOURCE_HOST_ACCESSIBLE},
};

CRMM_LOOP_TEST_IN("memory_kinds", memory_is_of_the_plugins_kind, (int)(sizeof kinds / sizeof kinds[0]))
{
    const struct memory_kind *k = &kinds[_i];
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(crmm_resource_create(k->plugin, NULL, NULL, &mr));
    ck_assert_str_eq(crmm_resource_kind(mr), k->plugin);
    ck_assert_uint_eq(mr->flags, k->flags);
    int dev = -1;
    ck_assert_int_eq(cudaGetDevice(&dev), cudaSuccess);
    ck_assert_int_eq(mr->device, dev);
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, (size_t)1 << 20, NULL, &p));
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq((uintptr_t)p % CRMM_ALLOCATION_ALIGNMENT, 0);
    struct cudaPointerAttributes attr;
    memset(&attr, 0, sizeof attr);
    ck_assert_int_eq(cudaPointerGetAttributes(&attr, p), cudaSuccess);
    ck_assert_msg(attr.type == k->type, "%s: memory type %d, expected %d", k->plugin, (int)attr.type, (int)k->type);
    ck_assert_int_eq(attr.device, dev);
    ck_assert_ptr_nonnull(attr.devicePointer); /* usable from device code */
    if (k->flags & CRMM_RESOURCE_HOST_ACCESSIBLE) {
        ck_assert_ptr_nonnull(attr.hostPointer);
        ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
        memset(p, 0x5a, (size_t)1 << 20); /* and from the host */
        ck_assert_uint_eq(((unsigned char *)p)[12345], 0x5a);
    }
    uint64_t in_use;
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_BYTES_IN_USE, &in_use));
    ck_assert_uint_eq(in_use, (uint64_t)1 << 20);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, (size_t)1 << 20, NULL));
    crmm_resource_release(mr);
}

CRMM_LOOP_TEST_IN("memory_kinds", failed_allocation_leaves_no_cuda_error_behind, (int)(sizeof kinds / sizeof kinds[0]))
{
    const struct memory_kind *k = &kinds[_i];
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(crmm_resource_create(k->plugin, NULL, NULL, &mr));
    void *p = (void *)0x1;
    ck_assert_crmm(crmm_resource_allocate(mr, (size_t)1 << 50, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(crmm_last_error(), k->plugin) && strstr(crmm_last_error(), "1.0 PiB"), "message: %s",
                  crmm_last_error());
    /* handled and reported by crmm: the application's next error check sees nothing */
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    crmm_resource_release(mr);
}

CRMM_TEST_IN("memory_kinds", allocation_follows_the_resources_device)
{
    /* A resource allocates on the device it was created for, whatever device is current. */
    int n = 0;
    ck_assert_int_eq(cudaGetDeviceCount(&n), cudaSuccess);
    crmm_resource *mr = NULL;
    ck_assert_int_eq(cudaSetDevice(n - 1), cudaSuccess);
    ck_assert_crmm_ok(crmm_resource_create("cuda", NULL, NULL, &mr));
    ck_assert_int_eq(mr->device, n - 1);
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 4096, NULL, &p));
    struct cudaPointerAttributes attr;
    ck_assert_int_eq(cudaPointerGetAttributes(&attr, p), cudaSuccess);
    ck_assert_int_eq(attr.device, n - 1);
    int cur = -1;
    ck_assert_int_eq(cudaGetDevice(&cur), cudaSuccess);
    ck_assert_int_eq(cur, 0); /* and the caller's device is restored */
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 4096, NULL));
    ck_assert_int_eq(cudaGetDevice(&cur), cudaSuccess);
    ck_assert_int_eq(cur, 0);
    crmm_resource_release(mr);
}

int main(void)
{
    CRMM_TEST_GPU_GATE(1);
    Suite *s = suite_create("conformance_gpu");
    crmm_conformance_add(s, gpu_chains, (int)(sizeof gpu_chains / sizeof gpu_chains[0]));
    crmm_test_tcase(s, "memory_kinds", CRMM_TEST_GPU_TIMEOUT);
    return crmm_test_run(s);
}
