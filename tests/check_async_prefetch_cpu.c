/* check_async_prefetch_cpu.c — the GPU-only plugins (async, prefetch) without a GPU: each must
 * refuse to be created with an error that says why, leak no reference, and reject bad
 * parameters before any CUDA call. "Without a GPU" is made certain on any machine by hiding
 * every device (CUDA_VISIBLE_DEVICES="") in the forked test process before its first CUDA call. */
#include "build_config.h"
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/async.h>
#include "test_support.h"

static void hide_devices(void) { setenv("CUDA_VISIBLE_DEVICES", "", 1); }

CRMM_TEST(async_without_a_device)
{
    hide_devices();
    crmm_resource *mr = NULL;
    crmm_clear_error();
    crmm_status st = crmm_resource_create("async", "", NULL, &mr);
    ck_assert_msg(st == CRMM_ERROR_CUDA, "async without a device gave %s: %s", crmm_status_name(st), crmm_last_error());
    ck_assert_ptr_null(mr);
    ck_assert_msg(strstr(crmm_last_error(), "async") && strstr(crmm_last_error(), "needs a CUDA device"), "message: %s",
                  crmm_last_error());
}

CRMM_TEST(async_bad_parameters_are_config_errors)
{
    /* validated by the parameter table, before anything touches CUDA */
    static const char *bad[] = {"export_handle_type=win32", "release_threshold=lots", "initial_pool_size=-1",
                                "pool_size=1GiB"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        crmm_resource *mr = NULL;
        crmm_status st = crmm_resource_create("async", bad[i], NULL, &mr);
        ck_assert_msg(st == CRMM_ERROR_CONFIG, "'%s' gave %s: %s", bad[i], crmm_status_name(st), crmm_last_error());
        ck_assert_ptr_null(mr);
    }
    crmm_config *cfg = NULL;
    ck_assert_crmm(crmm_config_load_string("[resource.a]\nplugin = async\nexport_handle_type = ipc\n", "async.ini", &cfg),
                   CRMM_ERROR_CONFIG);
    ck_assert_msg(strstr(crmm_last_error(), "async.ini:3") && strstr(crmm_last_error(), "none|posix_fd|fabric"), "message: %s",
                  crmm_last_error());
}

CRMM_TEST(async_takes_no_upstream)
{
    crmm_resource *h, *mr = NULL;
    ck_assert_crmm_ok(crmm_resource_create("host", "", NULL, &h));
    ck_assert_crmm(crmm_resource_create("async", "", h, &mr), CRMM_ERROR_CONFIG);
    ck_assert_ptr_null(mr);
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
    void *pool = NULL;
    ck_assert_crmm(crmm_async_get_pool(h, &pool), CRMM_ERROR_NOT_FOUND);
    ck_assert_crmm(crmm_async_get_pool(NULL, &pool), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(pool);
    crmm_resource_release(h);
}

CRMM_TEST(prefetch_over_host_is_refused)
{
    crmm_resource *h, *mr = NULL;
    ck_assert_crmm_ok(crmm_resource_create("host", "", NULL, &h));
    crmm_clear_error();
    ck_assert_crmm(crmm_resource_create("prefetch", "", h, &mr), CRMM_ERROR_CONFIG); /* its check, before create */
    ck_assert_ptr_null(mr);
    ck_assert_msg(strstr(crmm_last_error(), "prefetch") && strstr(crmm_last_error(), "host memory"), "message: %s",
                  crmm_last_error());
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
    ck_assert_crmm(crmm_resource_create("prefetch", "", NULL, &mr), CRMM_ERROR_CONFIG); /* needs an upstream */
    crmm_resource_release(h);
}

/* A config's resource that cannot be made: async without a device (prefetch over host memory is
 * refused when the config is loaded: tests/configs/bad-prefetch-over-host.ini). The error is the
 * plugin's, and its message names where the config asked for it. */
static const struct { const char *text, *file, *resource; bool hide; crmm_status st; const char *said[2]; } configs[] = {
    {"[resource.a]\nplugin = async\ninitial_pool_size = 1GiB\n", "async.ini", "a", true, CRMM_ERROR_CUDA,
     {"resource.a", NULL}},
};

CRMM_LOOP_TEST(a_config_that_cannot_be_made_says_where, (int)(sizeof configs / sizeof configs[0]))
{
    if (configs[_i].hide)
        hide_devices();
    crmm_config *cfg;
    ck_assert_crmm_ok(crmm_config_load_string(configs[_i].text, configs[_i].file, &cfg));
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_config_create_resource(cfg, configs[_i].resource, -1, &mr), configs[_i].st);
    ck_assert_ptr_null(mr);
    for (int k = 0; k < 2 && configs[_i].said[k]; k++)
        ck_assert_msg(strstr(crmm_last_error(), configs[_i].said[k]), "message: %s", crmm_last_error());
    crmm_config_free(cfg);
}

int main(void)
{
    return crmm_test_main("async_prefetch_cpu", 0);
}
