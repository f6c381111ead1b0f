/* check_adaptor_passthrough.c — what every adaptor passes through to its upstream: each one,
 * stacked on a pool over host memory, lets a trim reach the pool (the pool then gives its free
 * chunks back) and answers the pool's own queries (reserved bytes) with the pool's figures.
 * An adaptor that sets no trim or query op gets this from the core; one that sets them must
 * forward; either way the user sees the same. Counting adaptors count a free only once the
 * upstream took it. */
#include "build_config.h"
#include <stdlib.h>
#include <string.h>
#include "silent_resource.h"
#include "test_support.h"

/* The adaptors and the parameters each needs; {NAME} is the adaptor's plugin. */
static const struct adaptor {
    const char *plugin;
    const char *params; /* lines after "upstream = p" */
} adaptors[] = {
    {"logging", "file = %s\n"},
    {"statistics", ""},
    {"tracking", ""},
    {"limiting", "allocation_limit = 1GiB\n"},
    {"failure_callback", ""},
    {"aligned", "alignment = 4KiB\n"},
    {"template", ""},
};
#define N_ADAPTORS ((int)(sizeof adaptors / sizeof adaptors[0]))

static const uint64_t MiB = 1 << 20;

/* host h -> pool p (no initial chunk) -> adaptor a. */
static crmm_config *load_stack(const struct adaptor *ad)
{
    char params[512], text[2048];
    const char *log = crmm_test_write_file("adaptor.csv", "");
    snprintf(params, sizeof params, ad->params, log);
    ck_assert_int_lt(snprintf(text, sizeof text,
                              "[resource.h]\nplugin = host\n[resource.p]\nplugin = pool\nupstream = h\ninitial_size = 0\n"
                              "[resource.a]\nplugin = %s\nupstream = p\n%s",
                              ad->plugin, params),
                     (int)sizeof text);
    crmm_config *cfg;
    ck_assert_crmm_ok(crmm_config_load_string(text, ad->plugin, &cfg));
    return cfg;
}

CRMM_LOOP_TEST(trim_through_each_adaptor_reaches_the_pool, N_ADAPTORS)
{
    const struct adaptor *ad = &adaptors[_i];
    crmm_config *cfg = load_stack(ad);
    crmm_resource *a, *p;
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "a", -1, &a));
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "p", -1, &p)); /* the instance under a */
    ck_assert_ptr_eq(crmm_resource_upstream(a), p);
    void *ptr;
    ck_assert_crmm_ok(crmm_resource_allocate(a, 2 * MiB, NULL, &ptr));
    ck_assert_crmm_ok(crmm_resource_deallocate(a, ptr, 2 * MiB, NULL));
    uint64_t reserved = crmm_test_query(p, CRMM_QUERY_BYTES_RESERVED);
    ck_assert_msg(reserved >= 2 * MiB, "%s: the pool kept %llu bytes", ad->plugin, (unsigned long long)reserved);
    ck_assert_uint_eq(crmm_test_query(a, CRMM_QUERY_BYTES_RESERVED), reserved);
    ck_assert_crmm_ok(crmm_resource_trim(a));
    ck_assert_msg(crmm_test_query(p, CRMM_QUERY_BYTES_RESERVED) == 0, "%s: trim did not reach the pool (%llu bytes kept)",
                  ad->plugin, (unsigned long long)crmm_test_query(p, CRMM_QUERY_BYTES_RESERVED));
    ck_assert_uint_eq(crmm_test_query(a, CRMM_QUERY_BYTES_RESERVED), 0);
    crmm_test_release(p, a);
    crmm_config_free(cfg);
}

/* A counting adaptor counts a free only once its upstream took the memory back: tracking under
 * the template refuses a free of a pointer it never gave out, and the template still counts the
 * allocation as live. */
CRMM_TEST(a_refused_free_stays_counted)
{
    crmm_config *cfg;
    ck_assert_crmm_ok(crmm_config_load_string("[resource.h]\nplugin = host\n[resource.t]\nplugin = tracking\nupstream = h\n"
                                              "[resource.x]\nplugin = template\nupstream = t\n",
                                              "refused.ini", &cfg));
    crmm_resource *x;
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "x", -1, &x));
    void *ptr;
    ck_assert_crmm_ok(crmm_resource_allocate(x, 256, NULL, &ptr));
    crmm_test_log_capture_begin();
    crmm_status st = crmm_resource_deallocate(x, (char *)ptr + 64, 256, NULL);
    free(crmm_test_log_capture_end());
    ck_assert_crmm(st, CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(crmm_test_query(x, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_uint_eq(crmm_test_query(x, CRMM_QUERY_BYTES_IN_USE), 256);
    ck_assert_crmm_ok(crmm_resource_deallocate(x, ptr, 256, NULL));
    ck_assert_uint_eq(crmm_test_query(x, CRMM_QUERY_ALLOCATIONS), 0);
    crmm_resource_release(x);
    crmm_config_free(cfg);
}

/* The core's forwarding, with no adaptor plugin in between: a resource without trim and query
 * ops over one that has them. */
typedef struct counting_resource {
    crmm_resource base;
    int trims;
} counting_resource;

static crmm_status pass_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    return crmm_resource_allocate(self->upstream, bytes, stream, ptr);
}
static crmm_status pass_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    return crmm_resource_deallocate(self->upstream, ptr, bytes, stream);
}
static void plain_destroy(crmm_resource *self) { (void)self; }
static crmm_status bottom_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    (void)self;
    if (what != CRMM_QUERY_UPSTREAM_BLOCKS)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "bottom: no such query");
    *out = 42;
    return CRMM_OK;
}
static crmm_status bottom_trim(crmm_resource *self)
{
    ((counting_resource *)self)->trims++;
    return CRMM_OK;
}

CRMM_TEST(unset_trim_and_query_go_down_the_chain)
{
    static const crmm_resource_ops bottom_ops = {
        .allocate = pass_allocate, .deallocate = pass_deallocate, .query = bottom_query, .trim = bottom_trim,
        .destroy = plain_destroy};
    static const crmm_resource_ops bare_ops = {.allocate = pass_allocate, .deallocate = pass_deallocate,
                                               .destroy = plain_destroy};
    counting_resource bottom = {0}, middle = {0}, top = {0};
    crmm_resource_init(&bottom.base, &bottom_ops, "bottom", CRMM_RESOURCE_HOST_ACCESSIBLE, -1, NULL);
    crmm_resource_init(&middle.base, &bare_ops, "bare", CRMM_RESOURCE_HOST_ACCESSIBLE, -1, &bottom.base);
    crmm_resource_init(&top.base, &bare_ops, "bare", CRMM_RESOURCE_HOST_ACCESSIBLE, -1, &middle.base);
    ck_assert_crmm_ok(crmm_resource_trim(&top.base));
    ck_assert_int_eq(bottom.trims, 1);
    ck_assert_uint_eq(crmm_test_query(&top.base, CRMM_QUERY_UPSTREAM_BLOCKS), 42);
    uint64_t v = 7;
    ck_assert_crmm(crmm_resource_query(&top.base, CRMM_QUERY_BYTES_FREE, &v), CRMM_ERROR_UNSUPPORTED);
    ck_assert_uint_eq(v, 7);
    /* a chain without any trim or query op: trim does nothing, a query is unsupported */
    counting_resource lone = {0};
    crmm_resource_init(&lone.base, &bare_ops, "bare", CRMM_RESOURCE_HOST_ACCESSIBLE, -1, NULL);
    ck_assert_crmm_ok(crmm_resource_trim(&lone.base));
    ck_assert_crmm(crmm_resource_query(&lone.base, CRMM_QUERY_BYTES_FREE, &v), CRMM_ERROR_UNSUPPORTED);
    ck_assert_msg(strstr(crmm_last_error(), "bare"), "message: %s", crmm_last_error());
}

int main(void)
{
    return crmm_test_main("adaptor_passthrough", 0);
}


/* Every adaptor over it fails with its status and a message naming it: an adaptor that adds its
 * context to the thread's error must not turn the failure into a success (no error recorded:
 * CRMM_OK) or into an older failure's status (the second pass: an earlier failure of this thread,
 * of another status, is still recorded). */
CRMM_LOOP_TEST(a_silent_upstream_failure_stays_a_failure_through_each_adaptor, 2 * N_ADAPTORS)
{
    const struct adaptor *ad = &adaptors[_i % N_ADAPTORS];
    const bool stale = _i >= N_ADAPTORS;
    static crmm_resource silent; /* over silent_resource.h's resource */
    silent_resource_init(&silent, CRMM_RESOURCE_HOST_ACCESSIBLE);
    char params[512];
    snprintf(params, sizeof params, ad->params, crmm_test_write_file("silent.csv", ""));
    size_t n = 0; /* "key = value\n" lines as crmm_resource_create's "key=value,..." */
    for (const char *c = params; *c; c++)
        if (*c != ' ')
            params[n++] = *c == '\n' ? ',' : *c;
    params[n] = '\0';
    crmm_resource *a = crmm_test_create(ad->plugin, params, &silent);
    crmm_resource_release(&silent); /* the adaptor holds it */
    void *ptr = (void *)1;
    crmm_clear_error();
    if (stale)
        ck_assert_crmm(crmm_resource_allocate(NULL, 1, NULL, &ptr), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_allocate(a, 4096, NULL, &ptr), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(ptr);
    ck_assert_msg(strstr(crmm_last_error(), "silent failed (") != NULL, "%s: %s", ad->plugin, crmm_last_error());
    crmm_clear_error();
    if (stale)
        ck_assert_crmm(crmm_resource_allocate(NULL, 1, NULL, &ptr), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(&silent, (void *)4096, 4096, NULL), CRMM_ERROR_CUDA);
    ck_assert_crmm(crmm_last_status(), CRMM_ERROR_CUDA);
    ck_assert_msg(strstr(crmm_last_error(), "without saying why") != NULL, "%s", crmm_last_error());
    crmm_resource_release(a);
}
