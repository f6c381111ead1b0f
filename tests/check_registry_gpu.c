/* check_registry_gpu.c — the per-device resource registry: the default resource, set/get, many
 * threads at once, and the config's default, [device.N] override and percentage sizes. */
#include "build_config.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "test_support.h"

static int device_count(void)
{
    int n = 0;
    ck_assert_int_eq(cudaGetDeviceCount(&n), cudaSuccess);
    return n;
}

/* Allocate, write and free through mr on the current device. */
static void use(crmm_resource *mr)
{
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 4096, NULL, &p));
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(cudaMemset(p, 0x11, 4096), cudaSuccess);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 4096, NULL));
}

CRMM_TEST_IN("registry", default_is_a_cuda_resource)
{
    crmm_resource *mr = crmm_get_current_device_resource();
    ck_assert_msg(mr != NULL, "no default resource: %s", crmm_last_error());
    ck_assert_str_eq(crmm_resource_kind(mr), "cuda");
    ck_assert_int_eq(mr->device, 0);
    ck_assert(crmm_resource_is_device_accessible(mr));
    ck_assert_int_eq(crmm_resource_refcount(mr), 1); /* the registry's */
    ck_assert_ptr_eq(crmm_get_current_device_resource(), mr);
    ck_assert_ptr_eq(crmm_get_per_device_resource(0), mr);
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, (size_t)1 << 20, NULL, &p));
    struct cudaPointerAttributes attr;
    ck_assert_int_eq(cudaPointerGetAttributes(&attr, p), cudaSuccess);
    ck_assert_int_eq(attr.type, cudaMemoryTypeDevice);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, (size_t)1 << 20, NULL));
    crmm_resource *ref = crmm_get_current_device_resource_ref();
    ck_assert_ptr_eq(ref, mr);
    ck_assert_int_eq(crmm_resource_refcount(mr), 2);
    crmm_resource_release(ref);
    /* every device gets its own default, on that device */
    int n = device_count();
    for (int d = 1; d < n; d++) {
        crmm_resource *other = crmm_get_per_device_resource(d);
        ck_assert_ptr_nonnull(other);
        ck_assert_ptr_ne(other, mr);
        ck_assert_int_eq(other->device, d);
    }
}

CRMM_TEST_IN("registry", set_returns_the_previous_resource)
{
    crmm_resource *def = crmm_get_current_device_resource();
    ck_assert_ptr_nonnull(def);
    crmm_resource *mine = NULL;
    ck_assert_crmm_ok(crmm_resource_create("cuda", NULL, NULL, &mine));
    crmm_resource *prev = crmm_set_current_device_resource(mine);
    ck_assert_ptr_eq(prev, def);          /* its reference is ours now */
    ck_assert_int_eq(crmm_resource_refcount(def), 1);
    ck_assert_int_eq(crmm_resource_refcount(mine), 2); /* ours + the registry's */
    ck_assert_ptr_eq(crmm_get_current_device_resource(), mine);
    use(crmm_get_current_device_resource());
    crmm_resource *back = crmm_set_current_device_resource(prev);
    ck_assert_ptr_eq(back, mine);
    crmm_test_release(back, prev);
    ck_assert_int_eq(crmm_resource_refcount(def), 1);
    ck_assert_int_eq(crmm_resource_refcount(mine), 1);
    ck_assert_ptr_eq(crmm_get_current_device_resource(), def);
    crmm_resource_release(mine);
}

CRMM_TEST_IN("registry", set_before_first_get_returns_the_default)
{
    crmm_resource *mine = NULL;
    ck_assert_crmm_ok(crmm_resource_create("cuda", NULL, NULL, &mine));
    crmm_clear_error();
    crmm_resource *prev = crmm_set_per_device_resource(0, mine);
    ck_assert_ptr_null(prev); /* nothing was current yet: no default is made just to be replaced */
    ck_assert_int_eq(crmm_last_status(), CRMM_OK);
    ck_assert_int_eq(crmm_resource_refcount(mine), 2);
    ck_assert_ptr_eq(crmm_get_per_device_resource(0), mine);
    crmm_resource_release(crmm_set_per_device_resource(0, mine)); /* setting the same again */
    ck_assert_int_eq(crmm_resource_refcount(mine), 2);
    crmm_resource_release(mine);
    use(crmm_get_per_device_resource(0)); /* the registry's reference keeps it alive */
}

CRMM_TEST_IN("registry", bad_arguments)
{
    int n = device_count();
    crmm_resource *mine = NULL;
    ck_assert_crmm_ok(crmm_resource_create("cuda", NULL, NULL, &mine));
    crmm_clear_error();
    ck_assert_ptr_null(crmm_set_current_device_resource(NULL));
    ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(crmm_set_per_device_resource(0, NULL));
    ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_INVALID_ARGUMENT);
    const int bad[] = {-1, n, n + 1000, 1 << 30};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        crmm_clear_error();
        ck_assert_ptr_null(crmm_set_per_device_resource(bad[i], mine));
        ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_INVALID_ARGUMENT);
        crmm_clear_error();
        ck_assert_ptr_null(crmm_get_per_device_resource(bad[i]));
        ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_INVALID_ARGUMENT);
        ck_assert_ptr_null(crmm_get_per_device_resource_ref(bad[i]));
    }
    ck_assert_int_eq(crmm_resource_refcount(mine), 1); /* no reference taken on failure */
    crmm_resource_release(mine);
}

/* ---- eight threads ------------------------------------------------------------------------- */

enum { THREADS = 8, ROUNDS = 200 };

typedef struct swap_arg {
    crmm_resource *mine;
    crmm_resource **all; /* every resource that may be current: THREADS + the default */
    pthread_barrier_t *created;
    bool use_ref;        /* look up with the _ref getter, and release our own at the end */
    int failures;
} swap_arg;

static bool known(const swap_arg *a, const crmm_resource *mr)
{
    for (int i = 0; i <= THREADS; i++)
        if (a->all[i] == mr)
            return true;
    return false;
}

static void *swap_thread(void *arg)
{
    swap_arg *a = arg;
    if (a->use_ref && crmm_resource_create("cuda", NULL, NULL, &a->mine) != CRMM_OK)
        a->failures++;
    if (a->created)
        pthread_barrier_wait(a->created);
    for (int r = 0; r < ROUNDS && !a->failures; r++) {
        crmm_resource *prev = crmm_set_current_device_resource(a->mine);
        crmm_resource *cur = a->use_ref ? crmm_get_current_device_resource_ref() : crmm_get_current_device_resource();
        void *p = NULL;
        if (!prev || !cur || (!a->use_ref && !known(a, cur)) || (!a->use_ref && !known(a, prev)))
            a->failures++;
        else if (crmm_resource_allocate(cur, 256 + (size_t)r, NULL, &p) != CRMM_OK || !p ||
                 crmm_resource_deallocate(cur, p, 256 + (size_t)r, NULL) != CRMM_OK)
            a->failures++;
        if (a->use_ref)
            crmm_resource_release(cur);
        crmm_resource *back = prev ? crmm_set_current_device_resource(prev) : NULL;
        if (prev && !back)
            a->failures++;
        crmm_test_release(back, prev);
    }
    if (a->use_ref)
        crmm_resource_release(a->mine);
    return NULL;
}

CRMM_TEST_IN("registry", eight_threads_set_and_get)
{
    /* Each thread has its own cuda resource, makes it current, allocates through whatever is
     * current, and puts back what it replaced. The test holds a reference to every resource
     * that can be current, so the borrowing getter is safe; at the end each count must be
     * its owner's reference plus the registry's for the one that is current. */
    crmm_resource *all[THREADS + 1];
    all[THREADS] = crmm_resource_retain(crmm_get_current_device_resource());
    ck_assert_ptr_nonnull(all[THREADS]);
    for (int i = 0; i < THREADS; i++)
        ck_assert_crmm_ok(crmm_resource_create("cuda", NULL, NULL, &all[i]));
    pthread_barrier_t created;
    pthread_barrier_init(&created, NULL, THREADS);
    pthread_t t[THREADS];
    swap_arg a[THREADS];
    for (int i = 0; i < THREADS; i++) {
        a[i] = (swap_arg){.mine = all[i], .all = all, .created = &created};
        ck_assert_int_eq(pthread_create(&t[i], NULL, swap_thread, &a[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_int_eq(a[i].failures, 0);
    }
    pthread_barrier_destroy(&created);
    crmm_resource *cur = crmm_get_current_device_resource();
    ck_assert(known(&a[0], cur));
    for (int i = 0; i <= THREADS; i++)
        ck_assert_int_eq(crmm_resource_refcount(all[i]), all[i] == cur ? 2 : 1);
    crmm_resource_release(crmm_set_current_device_resource(all[THREADS]));
    ck_assert_int_eq(crmm_resource_refcount(all[THREADS]), 2);
    for (int i = 0; i <= THREADS; i++)
        crmm_resource_release(all[i]);
    ck_assert_ptr_eq(crmm_get_current_device_resource(), all[THREADS]);
    ck_assert_int_eq(crmm_resource_refcount(all[THREADS]), 1);
}

CRMM_TEST_IN("registry", eight_threads_with_references)
{
    /* No one holds extra references: each thread creates its resource, releases it when done,
     * and looks the current one up with the _ref getter, which keeps it alive while in use even
     * when its owner has already released it. */
    crmm_resource *def = crmm_get_current_device_resource();
    ck_assert_ptr_nonnull(def);
    pthread_t t[THREADS];
    swap_arg a[THREADS];
    for (int i = 0; i < THREADS; i++) {
        a[i] = (swap_arg){.use_ref = true};
        ck_assert_int_eq(pthread_create(&t[i], NULL, swap_thread, &a[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_int_eq(a[i].failures, 0);
    }
    crmm_resource *cur = crmm_get_current_device_resource_ref();
    ck_assert_ptr_nonnull(cur);
    ck_assert_int_eq(crmm_resource_refcount(cur), 2); /* the registry's and ours, nothing else */
    use(cur);
    crmm_resource_release(cur);
}

/* ---- the config's default ------------------------------------------------------------------ */

static const char chain_config[] =
    "[crmm]\n"
    "default = main\n"
    "\n"
    "[resource.gpu]\n"
    "plugin = cuda\n"
    "\n"
    "[resource.main]\n"
    "plugin = template\n"
    "upstream = gpu\n"
    "tag = 5\n";

CRMM_TEST_IN("config", init_with_a_config_sets_the_default)
{
    const char *path = crmm_test_write_file("crmm.ini", chain_config);
    ck_assert_crmm_ok(crmm_init(path));
    crmm_resource *mr = crmm_get_current_device_resource();
    ck_assert_msg(mr != NULL, "%s", crmm_last_error());
    ck_assert_str_eq(crmm_resource_kind(mr), "template");
    ck_assert_str_eq(crmm_resource_name(mr), "main");
    ck_assert_str_eq(crmm_resource_kind(crmm_resource_upstream(mr)), "cuda");
    ck_assert_str_eq(crmm_resource_name(crmm_resource_upstream(mr)), "gpu");
    ck_assert_int_eq(mr->device, 0);
    use(mr);
    /* finalize drops the registry's and the config's references: ours is the last */
    crmm_resource_retain(mr);
    crmm_finalize();
    ck_assert_int_eq(crmm_resource_refcount(mr), 1);
    use(mr);
    crmm_resource_release(mr);
    /* and without a config the default is cuda again */
    mr = crmm_get_current_device_resource();
    ck_assert_ptr_nonnull(mr);
    ck_assert_str_eq(crmm_resource_kind(mr), "cuda");
}

CRMM_TEST_IN("config", init_reads_crmm_config)
{
    setenv("CRMM_CONFIG", crmm_test_write_file("crmm.ini", chain_config), 1);
    ck_assert_crmm_ok(crmm_init(NULL));
    crmm_resource *mr = crmm_get_current_device_resource();
    ck_assert_ptr_nonnull(mr);
    ck_assert_str_eq(crmm_resource_name(mr), "main");
    crmm_finalize();
}

CRMM_TEST_IN("config", device_section_overrides_the_default)
{
    char text[1024];
    snprintf(text, sizeof text, "%s\n[resource.zero]\nplugin = template\nupstream = gpu\ntag = 9\n\n[device.0]\nresource = zero\n",
             chain_config);
    ck_assert_crmm_ok(crmm_init(crmm_test_write_file("crmm.ini", text)));
    crmm_resource *mr = crmm_get_per_device_resource(0);
    ck_assert_msg(mr != NULL, "%s", crmm_last_error());
    ck_assert_str_eq(crmm_resource_name(mr), "zero");
    ck_assert_str_eq(crmm_resource_name(crmm_resource_upstream(mr)), "gpu");
    use(mr);
    if (device_count() > 1) {
        crmm_resource *other = crmm_get_per_device_resource(1);
        ck_assert_ptr_nonnull(other);
        ck_assert_str_eq(crmm_resource_name(other), "main");
        ck_assert_int_eq(other->device, 1);
    }
    crmm_finalize();
}

CRMM_TEST_IN("config", percentage_sizes_resolve_against_device_memory)
{
    /* crmm_sizeparam (tests/plugins/bad_plugin.c) reports its `size` as its maximum size */
    size_t free_b = 0, total = 0;
    ck_assert_int_eq(cudaMemGetInfo(&free_b, &total), cudaSuccess);
    ck_assert_crmm_ok(crmm_init(crmm_test_write_file(
        "crmm.ini", "[crmm]\ndefault = quarter\n[resource.quarter]\nplugin = sizeparam\nsize = 25%\n")));
    crmm_resource *mr = crmm_get_current_device_resource();
    ck_assert_msg(mr != NULL, "%s", crmm_last_error());
    uint64_t v = 0, expect = (uint64_t)((double)total * 25.0 / 100.0);
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_MAXIMUM_SIZE, &v));
    ck_assert_msg(v + 1 >= expect && v <= expect + 1, "25%% of %zu bytes resolved to %llu", total,
                  (unsigned long long)v);
    crmm_finalize();
    /* without a config, through crmm_resource_create: the current device */
    ck_assert_crmm_ok(crmm_resource_create("sizeparam", "size=100%", NULL, &mr));
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_MAXIMUM_SIZE, &v));
    ck_assert_uint_eq(v, (uint64_t)total);
    crmm_resource_release(mr);
    ck_assert_crmm(crmm_resource_create("sizeparam", "size=0%", NULL, &mr), CRMM_ERROR_CONFIG);
    ck_assert_crmm(crmm_resource_create("sizeparam", "size=101%", NULL, &mr), CRMM_ERROR_CONFIG);
}

CRMM_TEST_IN("config", broken_default_gives_null_and_a_message)
{
    /* a default whose create fails: NULL and the plugin's message, and a later set still works */
    ck_assert_crmm_ok(crmm_init(crmm_test_write_file("crmm.ini", "[crmm]\ndefault = no\n[resource.no]\nplugin = createfail\n")));
    crmm_clear_error();
    ck_assert_ptr_null(crmm_get_current_device_resource());
    ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_UNSUPPORTED);
    ck_assert_msg(strstr(crmm_last_error(), "always refuses") && strstr(crmm_last_error(), "device 0"), "%s",
                  crmm_last_error());
    ck_assert_ptr_null(crmm_get_current_device_resource_ref());
    crmm_resource *mine = NULL;
    ck_assert_crmm_ok(crmm_resource_create("cuda", NULL, NULL, &mine));
    crmm_clear_error();
    ck_assert_ptr_null(crmm_set_current_device_resource(mine)); /* nothing was current */
    ck_assert_int_eq(crmm_last_status(), CRMM_OK);
    ck_assert_ptr_eq(crmm_get_current_device_resource(), mine);
    crmm_resource_release(mine);
    crmm_finalize();
}

int main(void)
{
    CRMM_TEST_GPU_GATE(1);
    Suite *s = suite_create("registry_gpu");
    crmm_test_tcase(s, "registry", CRMM_TEST_GPU_TIMEOUT);
    crmm_test_tcase(s, "config", CRMM_TEST_GPU_TIMEOUT);
    return crmm_test_run(s);
}
