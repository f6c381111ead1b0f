/* check_resource_abi.c — the resource ABI's basics, on the CPU: resources built through plugins
 * whose create misbehaves, then over the `host` plugin: reference counts, the leak report, NULL
 * arguments, find_kind and control, and the exit guard's fallback. */
#include "build_config.h"
#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include <crmm/fork_guard.h>
#include <crmm/pool.h>
#include "loader_test.h"

/* ---- crmm_resource_create through misbehaving plugins -------------------------------------- */

static void count_call(void *arg) { ++*(int *)arg; }
static void no_call(void *arg) { (void)arg; }

/* crmm_resource_failure of a NULL resource is refused with a message, not a crash. */
CRMM_TEST_IN("resource_abi", resource_failure_of_null_is_invalid_argument)
{
    crmm_clear_error();
    ck_assert_crmm(crmm_resource_failure(NULL, CRMM_ERROR_OUT_OF_MEMORY), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "resource is NULL"));
    crmm_clear_error();
}

/* A NULL guard is ignored by add and remove, and the guards in the list still run at fork. */
CRMM_TEST_IN("fork_guard", a_null_guard_is_ignored)
{
    int ran = 0;
    crmm_fork_guard a = {count_call, no_call, no_call, &ran, NULL, NULL};
    crmm_fork_guard_add(&a);
    crmm_fork_guard_add(NULL);
    crmm_fork_guard_remove(NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    ck_assert_int_gt(pid, 0);
    int ws;
    ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
    crmm_fork_guard_remove(&a);
    ck_assert_int_eq(ran, 1);
}

/* Removing a guard twice, or one never added, leaves the other guards in the list: a fork still
 * runs them. */
CRMM_TEST_IN("fork_guard", a_guard_removed_twice_or_never_added_leaves_the_list_as_it_was)
{
    int ran_a = 0, ran_b = 0, ran_c = 0;
    crmm_fork_guard a = {count_call, no_call, no_call, &ran_a, NULL, NULL};
    crmm_fork_guard b = {count_call, no_call, no_call, &ran_b, NULL, NULL};
    crmm_fork_guard c = {count_call, no_call, no_call, &ran_c, NULL, NULL};
    crmm_fork_guard_add(&a);
    crmm_fork_guard_add(&b);
    crmm_fork_guard_remove(&c); /* never added */
    crmm_fork_guard_remove(&a);
    crmm_fork_guard_remove(&a); /* twice */
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(0);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    crmm_fork_guard_remove(&b);
    ck_assert_int_eq(ran_a, 0);
    ck_assert_int_eq(ran_b, 1);
    ck_assert_int_eq(ran_c, 0);
}

CRMM_TEST_IN("create", create_failure_keeps_the_plugins_status_and_message)
{
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_resource_create("createfail", NULL, NULL, &mr), CRMM_ERROR_UNSUPPORTED);
    ck_assert_ptr_null(mr);
    ck_assert_error_contains("createfail: this plugin always refuses to create a resource");
}

CRMM_TEST_IN("create", create_failure_without_message_gets_one)
{
    crmm_resource *mr = NULL;
    crmm_set_error(CRMM_ERROR_CONFIG, "a stale message from before");
    ck_assert_crmm(crmm_resource_create("createnomsg", NULL, NULL, &mr), CRMM_ERROR_BAD_ALLOC);
    ck_assert_ptr_null(mr);
    ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_BAD_ALLOC);
    ck_assert_error_contains("createnomsg");
    ck_assert_error_contains("without a message");
    ck_assert_msg(strstr(crmm_last_error(), "stale") == NULL, "%s", crmm_last_error());
}

CRMM_TEST_IN("create", resource_without_deallocate_is_refused_and_freed)
{
    crmm_resource *host = NULL, *mr = NULL;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &host));
    ck_assert_int_eq(crmm_resource_refcount(host), 1);
    ck_assert_crmm(crmm_resource_create("badresource", NULL, host, &mr), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(mr);
    ck_assert_error_contains("badresource");
    ck_assert_error_contains("deallocate");
    /* the half-built resource was destroyed and gave its upstream reference back (the sanitizer
     * build checks that nothing leaked) */
    ck_assert_int_eq(crmm_resource_refcount(host), 1);
    ck_assert_crmm(crmm_resource_create("badresource", NULL, NULL, &mr), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(mr);
    crmm_resource_release(host);
}

CRMM_TEST_IN("create", create_refuses_broken_plugins)
{
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_resource_create("nocreate", NULL, NULL, &mr), CRMM_ERROR_PLUGIN);
    ck_assert_error_contains("crmm_nocreate.so");
    ck_assert_crmm(crmm_resource_create("nosuchplugin", NULL, NULL, &mr), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(mr);
}

CRMM_TEST_IN("create", upstream_rules)
{
    crmm_resource *host = NULL, *mr = NULL;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &host));
    ck_assert_crmm(crmm_resource_create("host", NULL, host, &mr), CRMM_ERROR_CONFIG);
    ck_assert_error_contains("takes no upstream");
    ck_assert_ptr_null(mr);
    ck_assert_crmm(crmm_resource_create("template", NULL, NULL, &mr), CRMM_ERROR_CONFIG);
    ck_assert_error_contains("needs an upstream");
    ck_assert_ptr_null(mr);
    ck_assert_int_eq(crmm_resource_refcount(host), 1);
    /* optional: both ways */
    ck_assert_crmm_ok(crmm_resource_create("sizeparam", NULL, NULL, &mr));
    ck_assert_ptr_null(crmm_resource_upstream(mr));
    crmm_resource_release(mr);
    ck_assert_crmm_ok(crmm_resource_create("sizeparam", NULL, host, &mr));
    ck_assert_ptr_eq(crmm_resource_upstream(mr), host);
    ck_assert_int_eq(crmm_resource_refcount(host), 2);
    crmm_resource_release(mr);
    ck_assert_int_eq(crmm_resource_refcount(host), 1);
    crmm_resource_release(host);
}

CRMM_TEST_IN("create", create_validates_parameters)
{
    crmm_resource *mr = NULL;
    uint64_t v;
    ck_assert_crmm_ok(crmm_resource_create("sizeparam", "size=4KiB", NULL, &mr));
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_MAXIMUM_SIZE, &v));
    ck_assert_uint_eq(v, 4096);
    crmm_resource_release(mr);
    ck_assert_crmm_ok(crmm_resource_create("sizeparam", NULL, NULL, &mr)); /* the default */
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_MAXIMUM_SIZE, &v));
    ck_assert_uint_eq(v, 1u << 20);
    crmm_resource_release(mr);
    mr = NULL;
    ck_assert_crmm(crmm_resource_create("sizeparam", "size=lots", NULL, &mr), CRMM_ERROR_CONFIG);
    ck_assert_error_contains("size");
    ck_assert_crmm(crmm_resource_create("sizeparam", "szie=1", NULL, &mr), CRMM_ERROR_CONFIG);
    ck_assert_error_contains("did you mean 'size'");
    ck_assert_crmm(crmm_resource_create("sizeparam", "size", NULL, &mr), CRMM_ERROR_CONFIG);
    ck_assert_error_contains("key=value");
    ck_assert_ptr_null(mr);
}

/* ---- the resource ABI over host ------------------------------------------------------------ */

CRMM_TEST_IN("resource_abi", refcount_and_upstream_release)
{
    crmm_resource *h = NULL, *t = NULL;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &h));
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
    ck_assert_crmm_ok(crmm_resource_create("template", "tag=7", h, &t));
    ck_assert_int_eq(crmm_resource_refcount(h), 2); /* t holds its upstream */
    ck_assert_int_eq(crmm_resource_refcount(t), 1);
    ck_assert_ptr_eq(crmm_resource_upstream(t), h);
    ck_assert_ptr_eq(crmm_resource_retain(t), t);
    ck_assert_int_eq(crmm_resource_refcount(t), 2);
    crmm_resource_release(t);
    ck_assert_int_eq(crmm_resource_refcount(t), 1);
    ck_assert_int_eq(crmm_resource_refcount(h), 2);
    crmm_resource_release(t); /* the last: destroys t, releases h once */
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(h, 64, NULL, &p)); /* h is intact */
    ck_assert_crmm_ok(crmm_resource_deallocate(h, p, 64, NULL));
    crmm_resource_release(h);
}

CRMM_TEST_IN("resource_abi", releasing_the_top_unwinds_the_chain)
{
    /* host <- template <- template: dropping the caller's references below the top leaves the
     * chain alive through the top's; releasing the top frees all (sanitizer build: no leak) */
    crmm_resource *h, *t1, *t2;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &h));
    ck_assert_crmm_ok(crmm_resource_create("template", NULL, h, &t1));
    ck_assert_crmm_ok(crmm_resource_create("template", NULL, t1, &t2));
    crmm_test_release(h, t1);
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
    ck_assert_int_eq(crmm_resource_refcount(t1), 1);
    ck_assert_ptr_eq(crmm_resource_find_kind(t2, "host"), h);
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(t2, 1000, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(t2, p, 1000, NULL));
    crmm_resource_release(t2);
}

CRMM_TEST_IN("resource_abi", destroy_with_live_allocations_logs_a_warning)
{
    crmm_test_log_capture_begin();
    crmm_resource *h;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &h));
    void *p1, *p2, *p3;
    ck_assert_crmm_ok(crmm_resource_allocate(h, 1000, NULL, &p1));
    ck_assert_crmm_ok(crmm_resource_allocate(h, 2000, NULL, &p2));
    ck_assert_crmm_ok(crmm_resource_allocate(h, 3000, NULL, &p3));
    ck_assert_crmm_ok(crmm_resource_deallocate(h, p2, 2000, NULL));
    crmm_resource_release(h); /* 2 left: 4000 bytes */
    char *text = crmm_test_log_capture_end();
    ck_assert_msg(strstr(text, "[warn]") && strstr(text, "host resource destroyed with 2 live allocations (3.9 KiB)"),
                  "log: %s", text);
    free(text);
    free(p1); /* the host plugin's memory is aligned_alloc's: give it back by hand */
    free(p3);

    /* a named resource (from a config) is named in the report */
    crmm_test_log_capture_begin();
    crmm_config *cfg;
    ck_assert_crmm_ok(crmm_config_load_string("[resource.main]\nplugin = host\n", "test", &cfg));
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "main", -1, &h));
    ck_assert_crmm_ok(crmm_resource_allocate(h, 100, NULL, &p1));
    crmm_resource_release(h);
    crmm_config_free(cfg); /* the config's own reference: the last */
    text = crmm_test_log_capture_end();
    ck_assert_msg(strstr(text, "host resource 'main' destroyed with 1 live allocation (100 B)"), "log: %s", text);
    free(text);
    free(p1);
}

/* A new host resource serves one block of `bytes`, aligned as promised, takes it back, and goes. */
static void host_round_trip(size_t bytes)
{
    crmm_resource *h;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &h));
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(h, bytes, NULL, &p));
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq((uintptr_t)p % CRMM_ALLOCATION_ALIGNMENT, 0);
    ck_assert_crmm_ok(crmm_resource_deallocate(h, p, bytes, NULL));
    crmm_resource_release(h);
}

CRMM_TEST_IN("resource_abi", clean_destroy_logs_nothing)
{
    crmm_test_log_capture_begin();
    host_round_trip(1000);
    char *text = crmm_test_log_capture_end();
    ck_assert_str_eq(text, "");
    free(text);
}

CRMM_TEST_IN("resource_abi", null_arguments_to_resource_functions)
{
    crmm_resource *h;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &h));
    void *p = (void *)0x1;
    uint64_t v;
    double d;
    ck_assert_crmm(crmm_resource_allocate(NULL, 16, NULL, &p), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(p);
    ck_assert_crmm(crmm_resource_allocate(h, 16, NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_allocate(NULL, 0, NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(NULL, (void *)0x100, 16, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm_ok(crmm_resource_deallocate(NULL, NULL, 16, NULL)); /* NULL pointer: a no-op */
    ck_assert_crmm_ok(crmm_resource_deallocate(h, NULL, 16, NULL));
    ck_assert_crmm(crmm_resource_query(NULL, CRMM_QUERY_BYTES_IN_USE, &v), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_query(h, CRMM_QUERY_BYTES_IN_USE, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_fragmentation(NULL, &d), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_fragmentation(h, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_trim(NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_control(NULL, 1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(crmm_resource_find_kind(NULL, "host"));
    ck_assert_ptr_null(crmm_resource_find_kind(h, NULL));
    ck_assert(!crmm_resource_is_device_accessible(NULL));
    ck_assert(!crmm_resource_is_host_accessible(NULL));
    ck_assert_str_eq(crmm_resource_kind(NULL), "");
    ck_assert_str_eq(crmm_resource_name(NULL), "");
    ck_assert_ptr_null(crmm_resource_upstream(NULL));
    ck_assert_ptr_null(crmm_resource_retain(NULL));
    crmm_resource_release(NULL);
    ck_assert_int_eq(crmm_resource_refcount(NULL), 0);
    crmm_resource_report_leaks(NULL, 3, 300); /* no crash */
    crmm_resource_init(NULL, NULL, "x", 0, -1, h); /* no crash, no reference taken */
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_resource_create(NULL, NULL, NULL, &mr), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_create("host", NULL, NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(mr);
    /* h is unharmed */
    ck_assert_crmm_ok(crmm_resource_allocate(h, 16, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(h, p, 16, NULL));
    crmm_resource_release(h);
}

CRMM_TEST_IN("resource_abi", properties_kind_and_find_kind)
{
    crmm_resource *h, *t;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &h));
    ck_assert_crmm_ok(crmm_resource_create("template", NULL, h, &t));
    ck_assert(crmm_resource_is_host_accessible(h));
    ck_assert(!crmm_resource_is_device_accessible(h));
    ck_assert(crmm_resource_is_host_accessible(t)); /* template takes its upstream's properties */
    ck_assert_str_eq(crmm_resource_kind(h), "host");
    ck_assert_str_eq(crmm_resource_kind(t), "template");
    ck_assert_str_eq(crmm_resource_name(t), "");
    ck_assert_ptr_eq(crmm_resource_find_kind(t, "template"), t);
    ck_assert_ptr_eq(crmm_resource_find_kind(t, "host"), h);
    ck_assert_ptr_eq(crmm_resource_find_kind(h, "host"), h);
    ck_assert_ptr_null(crmm_resource_find_kind(h, "template")); /* looks down, never up */
    ck_assert_ptr_null(crmm_resource_find_kind(t, "pool"));
    ck_assert_int_eq(crmm_resource_refcount(h), 2); /* find_kind borrows */
    crmm_test_release(t, h);
}

CRMM_TEST_IN("resource_abi", control_and_queries_without_support)
{
    crmm_resource *h, *s;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &h));
    ck_assert_crmm(crmm_resource_control(h, 0x1000, NULL), CRMM_ERROR_UNSUPPORTED);
    ck_assert_error_contains("host");
    ck_assert_crmm_ok(crmm_resource_trim(h)); /* nothing cached: OK, nothing done */
    uint64_t v;
    ck_assert_crmm_ok(crmm_resource_query(h, CRMM_QUERY_MAXIMUM_SIZE, &v));
    ck_assert_uint_eq(v, UINT64_MAX);
    ck_assert_crmm(crmm_resource_query(h, CRMM_QUERY_PLUGIN_FIRST + 5, &v), CRMM_ERROR_UNSUPPORTED);
    double frag;
    ck_assert_crmm(crmm_resource_fragmentation(h, &frag), CRMM_ERROR_UNSUPPORTED);
    /* a resource that answers one query only */
    ck_assert_crmm_ok(crmm_resource_create("sizeparam", NULL, NULL, &s));
    ck_assert_crmm(crmm_resource_control(s, 1, NULL), CRMM_ERROR_UNSUPPORTED);
    ck_assert_crmm(crmm_resource_query(s, CRMM_QUERY_BYTES_IN_USE, &v), CRMM_ERROR_UNSUPPORTED);
    crmm_test_release(s, h);
}

/* A plugin's own queries are keyed by (kind, query): asked of a statistics layer over a pool they
 * are not passed down (the pool's numbers mean other things to other kinds), and
 * crmm_resource_query_kind reaches the pool from the top; core queries still pass down. */
CRMM_TEST_IN("resource_abi", plugin_queries_are_keyed_by_kind)
{
    crmm_resource *h, *p, *s;
    uint64_t v = 7;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &h));
    ck_assert_crmm_ok(crmm_resource_create("pool", "initial_size=1MiB", h, &p));
    ck_assert_crmm_ok(crmm_resource_create("statistics", NULL, p, &s));
    ck_assert_crmm_ok(crmm_resource_query(p, CRMM_QUERY_POOL_GROWTHS, &v));
    ck_assert_uint_eq(v, 0); /* the initial chunk is no growth */
    ck_assert_crmm(crmm_resource_query(s, CRMM_QUERY_POOL_GROWTHS, &v), CRMM_ERROR_UNSUPPORTED);
    ck_assert_error_contains("statistics");
    v = 7;
    ck_assert_crmm_ok(crmm_resource_query_kind(s, "pool", CRMM_QUERY_POOL_GROWTHS, &v));
    ck_assert_uint_eq(v, 0);
    ck_assert_crmm_ok(crmm_resource_query_kind(s, "pool", CRMM_QUERY_POOL_BLOCK_BYTES, &v));
    ck_assert_uint_eq(v, 0);
    ck_assert_crmm_ok(crmm_resource_query(s, CRMM_QUERY_BYTES_RESERVED, &v)); /* a core query: the pool's */
    ck_assert_uint_eq(v, 1 << 20);
    /* the same number means the async kind's first query: no async layer here */
    ck_assert_int_eq(CRMM_QUERY_POOL_DEVICE_SYNCS, CRMM_QUERY_PLUGIN_FIRST);
    ck_assert_crmm(crmm_resource_query_kind(s, "async", CRMM_QUERY_PLUGIN_FIRST, &v), CRMM_ERROR_UNSUPPORTED);
    ck_assert_error_contains("has no async layer");
    ck_assert_crmm(crmm_resource_query_kind(NULL, "pool", CRMM_QUERY_POOL_GROWTHS, &v), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_query_kind(s, NULL, CRMM_QUERY_POOL_GROWTHS, &v), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_query_kind(s, "pool", CRMM_QUERY_POOL_GROWTHS, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_query_upstream(h, CRMM_QUERY_BYTES_IN_USE, &v), CRMM_ERROR_UNSUPPORTED); /* no upstream */
    crmm_test_release(s, p);
    crmm_resource_release(h);
}

CRMM_TEST_IN("resource_abi", host_counts_in_use_bytes)
{
    crmm_resource *h;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &h));
    void *p[3];
    for (int i = 0; i < 3; i++)
        ck_assert_crmm_ok(crmm_resource_allocate(h, 100 * (size_t)(i + 1), NULL, &p[i]));
    uint64_t v;
    ck_assert_crmm_ok(crmm_resource_query(h, CRMM_QUERY_BYTES_IN_USE, &v));
    ck_assert_uint_eq(v, 600);
    ck_assert_crmm_ok(crmm_resource_query(h, CRMM_QUERY_ALLOCATIONS, &v));
    ck_assert_uint_eq(v, 3);
    for (int i = 0; i < 3; i++)
        ck_assert_crmm_ok(crmm_resource_deallocate(h, p[i], 100 * (size_t)(i + 1), NULL));
    ck_assert_crmm_ok(crmm_resource_query(h, CRMM_QUERY_BYTES_IN_USE, &v));
    ck_assert_uint_eq(v, 0);
    ck_assert_crmm_ok(crmm_resource_query(h, CRMM_QUERY_BYTES_IN_USE_PEAK, &v));
    ck_assert_uint_eq(v, 600);
    /* more than the machine has: out of memory at once (no abort under AddressSanitizer) */
    void *big = (void *)0x1;
    ck_assert_crmm(crmm_resource_allocate(h, (size_t)1 << 50, NULL, &big), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(big);
    ck_assert_error_contains("host: failed to allocate 1.0 PiB: more than the machine's memory");
    ck_assert_crmm(crmm_resource_allocate(h, SIZE_MAX, NULL, &big), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_crmm_ok(crmm_resource_query(h, CRMM_QUERY_ALLOCATIONS, &v));
    ck_assert_uint_eq(v, 0);
    crmm_resource_release(h);
}

/* ---- the exit guard's fallback (no CUDA call needed) ----------------------------------------- */

CRMM_TEST_IN("resource_abi", runtime_unloading_means_the_process_is_exiting)
{
    /* Should the CUDA runtime's exit handler run before crmm's, the first call that reports
     * cudaErrorCudartUnloading turns the exit flag on, so that later frees leak quietly. */
    ck_assert(!crmm_process_exiting());
    ck_assert_crmm_ok(crmm_cuda_status(cudaSuccess, "cudaFree"));
    ck_assert(!crmm_process_exiting());
    ck_assert_crmm(crmm_cuda_status(cudaErrorCudartUnloading, "cudaFree"), CRMM_ERROR_STATE);
    ck_assert_error_contains("cudaFree");
    ck_assert_error_contains("unloading");
    ck_assert(crmm_process_exiting());
    /* host memory needs no CUDA: still served */
    host_round_trip(100);
}

int main(void)
{
    return CRMM_TEST_MAIN_CASES("resource_abi", {"create", 0}, {"resource_abi", 0}, {"fork_guard", 0});
}
