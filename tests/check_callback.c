/* check_callback.c — the callback plugin over host-memory callbacks: each call reaches the
 * caller's functions with its size, stream and argument; a NULL from the allocate callback is
 * out of memory; a misaligned block is given back and refused; the parameters a ctypes caller
 * writes (addresses as decimal or hex text) and their errors (missing, 0, not a number, not an
 * address); the C constructor's bad arguments; the conformance suite over it (where a device
 * lets a config build it). */
#include "build_config.h"
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/callback.h>
#include "conformance.h"
#include "test_support.h"
#include "callback_config.h"

/* What the callbacks saw. */
typedef struct calls {
    int allocs, frees;
    size_t last_bytes;
    crmm_cuda_stream_t last_stream;
    void *last_ptr;
    void *last_arg;
    int misalign;  /* allocate returns a block 8 bytes past an aligned one */
    int give_null; /* allocate returns NULL */
} calls;

static void *record_alloc(size_t bytes, crmm_cuda_stream_t stream, void *arg)
{
    calls *c = arg;
    c->allocs++;
    c->last_bytes = bytes;
    c->last_stream = stream;
    c->last_arg = arg;
    if (c->give_null)
        return NULL;
    char *p = aligned_alloc(CRMM_ALLOCATION_ALIGNMENT, (bytes + 8 + 255) & ~(size_t)255);
    return p && c->misalign ? p + 8 : p;
}

static void record_free(void *ptr, size_t bytes, crmm_cuda_stream_t stream, void *arg)
{
    calls *c = arg;
    c->frees++;
    c->last_ptr = ptr;
    c->last_bytes = bytes;
    c->last_stream = stream;
    c->last_arg = arg;
    free(c->misalign ? (char *)ptr - 8 : ptr);
}

CRMM_TEST_IN("callback", calls_reach_the_callbacks_with_size_stream_and_argument)
{
    calls a = {0}, d = {0};
    crmm_resource *mr = NULL;
    crmm_clear_error();
    ck_assert_crmm_ok(crmm_callback_resource_create(record_alloc, record_free, &a, &d, &mr));
    ck_assert_str_eq(crmm_last_error(), ""); /* no device is no failure: nothing left behind */
    ck_assert_str_eq(crmm_resource_kind(mr), "callback");
    ck_assert(crmm_resource_is_device_accessible(mr));
    ck_assert(!crmm_resource_is_host_accessible(mr));
    crmm_cuda_stream_t s = (crmm_cuda_stream_t)0x1234;
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 1000, s, &p));
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(a.allocs, 1);
    ck_assert_uint_eq(a.last_bytes, 1000);
    ck_assert_ptr_eq(a.last_stream, s);
    ck_assert_ptr_eq(a.last_arg, &a);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 1000);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1000, s));
    ck_assert_int_eq(d.frees, 1);
    ck_assert_ptr_eq(d.last_ptr, p);
    ck_assert_uint_eq(d.last_bytes, 1000);
    ck_assert_ptr_eq(d.last_stream, s);
    ck_assert_ptr_eq(d.last_arg, &d); /* each callback gets its own argument */
    ck_assert_int_eq(a.frees, 0);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS_TOTAL), 1);
    crmm_resource_release(mr);
}

/* A callback resource whose two callbacks record into *c. */
static crmm_resource *over_recorders(calls *c)
{
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(crmm_callback_resource_create(record_alloc, record_free, c, c, &mr));
    ck_assert_str_eq(crmm_resource_kind(mr), "callback");
    return mr;
}

CRMM_TEST_IN("callback", null_from_the_allocate_callback_is_out_of_memory)
{
    calls c = {.give_null = 1};
    crmm_resource *mr = over_recorders(&c);
    void *p = NULL;
    ck_assert_crmm(crmm_resource_allocate(mr, 4096, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_msg(strstr(crmm_last_error(), "callback") && strstr(crmm_last_error(), "returned NULL") &&
                      strstr(crmm_last_error(), "4.0 KiB"),
                  "message: %s", crmm_last_error());
    ck_assert_int_eq(c.allocs, 1);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    c.give_null = 0; /* still usable */
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 4096, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 4096, NULL));
    ck_assert_int_eq(c.frees, 1); /* only the block it got went back */
    crmm_resource_release(mr);
}

CRMM_TEST_IN("callback", a_misaligned_block_is_given_back_and_refused)
{
    calls c = {.misalign = 1};
    crmm_resource *mr = over_recorders(&c);
    void *p = NULL;
    ck_assert_crmm(crmm_resource_allocate(mr, 512, NULL, &p), CRMM_ERROR_BAD_ALLOC);
    ck_assert_msg(strstr(crmm_last_error(), "not aligned"), "message: %s", crmm_last_error());
    ck_assert_int_eq(c.allocs, 1); /* no second try */
    ck_assert_int_eq(c.frees, 1); /* handed back: nothing leaks */
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    crmm_resource_release(mr);
}

/* "allocate_fn=ADDR deallocate_fn=ADDR allocate_arg=ADDR ..." as a ctypes caller writes it */
static void addresses(char *buf, size_t size, const char *fmt, void *arg, const char *extra)
{
    crmm_callback_allocate_fn a = record_alloc;
    crmm_callback_deallocate_fn d = record_free;
    uintptr_t ai, di;
    memcpy(&ai, &a, sizeof ai);
    memcpy(&di, &d, sizeof di);
    char f[160];
    snprintf(f, sizeof f, "allocate_fn=%s deallocate_fn=%s allocate_arg=%s deallocate_arg=%s %%s", fmt, fmt, fmt, fmt);
    snprintf(buf, size, f, ai, di, (uintptr_t)arg, (uintptr_t)arg, extra);
}

CRMM_TEST_IN("callback", addresses_as_decimal_or_hex_parameters)
{
    calls c = {0};
    char params[256];
    const char *formats[] = {"%" PRIuPTR, "%#" PRIxPTR};
    for (int i = 0; i < 2; i++) {
        addresses(params, sizeof params, formats[i], &c, "host_accessible=true device_accessible=false");
        crmm_resource *mr = crmm_test_create("callback", params, NULL);
        ck_assert(!crmm_resource_is_device_accessible(mr));
        ck_assert(crmm_resource_is_host_accessible(mr));
        void *p = crmm_test_allocate(mr, 300);
        memset(p, 0x5a, 300); /* host memory, as the flags say */
        ck_assert_ptr_eq(c.last_arg, &c);
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 300, NULL));
        crmm_resource_release(mr);
    }
    ck_assert_int_eq(c.allocs, 2);
    ck_assert_int_eq(c.frees, 2);
}

/* create with `params` fails with CRMM_ERROR_CONFIG, naming `key`, and makes nothing */
static void refused(const char *params, const char *key)
{
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_resource_create("callback", params, NULL, &mr), CRMM_ERROR_CONFIG);
    ck_assert_ptr_null(mr);
    ck_assert_msg(strstr(crmm_last_error(), key), "'%s': message lacks %s: %s", params, key, crmm_last_error());
}

CRMM_TEST_IN("callback", missing_zero_and_bad_addresses_are_refused)
{
    calls c = {0};
    char ok[256], p[320];
    addresses(ok, sizeof ok, "%#" PRIxPTR, &c, "");
    refused("deallocate_fn=0x1000", "allocate_fn");
    refused("allocate_fn=0x1000", "deallocate_fn");
    snprintf(p, sizeof p, "%s allocate_fn=0", ok);
    refused(p, "allocate_fn");
    snprintf(p, sizeof p, "%s deallocate_fn=0", ok);
    refused(p, "deallocate_fn");
    snprintf(p, sizeof p, "%s allocate_fn=my_alloc", ok);
    refused(p, "allocate_fn");
    snprintf(p, sizeof p, "%s allocate_arg=-1", ok);
    refused(p, "allocate_arg");
    snprintf(p, sizeof p, "%s device_accessible=false host_accessible=false", ok);
    refused(p, "device_accessible");
    ck_assert_int_eq(c.allocs + c.frees, 0);
}

CRMM_TEST_IN("callback", constructor_refuses_null_functions)
{
    calls c = {0};
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_callback_resource_create(NULL, record_free, &c, &c, &mr), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "allocate"), "message: %s", crmm_last_error());
    ck_assert_crmm(crmm_callback_resource_create(record_alloc, NULL, &c, &c, &mr), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "deallocate"), "message: %s", crmm_last_error());
    ck_assert_crmm(crmm_callback_resource_create(record_alloc, record_free, &c, &c, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(mr);
    char extra[600];
    memset(extra, 'x', sizeof extra - 1);
    extra[sizeof extra - 1] = '\0';
    ck_assert_crmm(crmm_callback_resource_create_with(record_alloc, record_free, &c, &c, extra, &mr),
                   CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_callback_resource_create_with(record_alloc, record_free, &c, &c, "colour=blue", &mr),
                   CRMM_ERROR_CONFIG);
    ck_assert_ptr_null(mr);
}

/* Host callbacks for the conformance suite: aligned host memory; NULL when there is none. */
static void *host_alloc(size_t bytes, crmm_cuda_stream_t stream, void *arg)
{
    (void)stream, (void)arg;
    if (bytes > ((size_t)1 << 40))
        return NULL; /* the suite's 1 PiB request: out of memory without asking the C library */
    return aligned_alloc(CRMM_ALLOCATION_ALIGNMENT, (bytes + 255) & ~(size_t)255);
}

static void host_free(void *ptr, size_t bytes, crmm_cuda_stream_t stream, void *arg)
{
    (void)bytes, (void)stream, (void)arg;
    free(ptr);
}

static void *host_alloc(size_t bytes, crmm_cuda_stream_t stream, void *arg);
static void host_free(void *ptr, size_t bytes, crmm_cuda_stream_t stream, void *arg);

static void *alloc_free_rounds(void *arg)
{
    crmm_resource *mr = arg;
    for (int i = 0; i < 2000; i++) {
        void *p = NULL;
        size_t n = 1 + (size_t)i % 5000;
        if (crmm_resource_allocate(mr, n, NULL, &p) != CRMM_OK || crmm_resource_deallocate(mr, p, n, NULL) != CRMM_OK)
            return (void *)1;
    }
    return NULL;
}

/* A free the callback accepts whatever size it is given: a limiting adaptor over it counts a free
 * of a size near 2^64 as giving back what it can, never as taking more or wrapping, so the limit
 * still lets the next allocation through. */
CRMM_TEST_IN("callback", a_limit_over_it_survives_a_free_of_an_absurd_size)
{
    static const size_t wrong[] = {SIZE_MAX - 1000, SIZE_MAX, SIZE_MAX - 255, (size_t)INT64_MAX + 1};
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        calls a = {0}, d = {0};
        crmm_resource *cb = NULL, *lim = NULL;
        ck_assert_crmm_ok(crmm_callback_resource_create(record_alloc, record_free, &a, &d, &cb));
        ck_assert_crmm_ok(crmm_resource_create("limiting", "allocation_limit=1KiB", cb, &lim));
        void *p = NULL;
        ck_assert_crmm_ok(crmm_resource_allocate(lim, 1000, NULL, &p));
        ck_assert_crmm_ok(crmm_resource_deallocate(lim, p, wrong[i], NULL));
        ck_assert_uint_eq(crmm_test_query(lim, CRMM_QUERY_BYTES_IN_USE), 0);
        ck_assert_crmm_ok(crmm_resource_allocate(lim, 1000, NULL, &p));
        ck_assert_crmm_ok(crmm_resource_deallocate(lim, p, 1000, NULL));
        crmm_resource_release(lim);
        crmm_resource_release(cb);
    }
}

/* The callbacks take any size: a free of more than was allocated, or of a block the resource never
 * counted, leaves its counts at zero instead of wrapping to ~2^64 (queries and the leak report). */
CRMM_TEST_IN("callback", a_wrong_size_free_leaves_the_counts_at_zero)
{
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(crmm_callback_resource_create_with(host_alloc, host_free, NULL, NULL, "host_accessible=true", &mr));
    void *p = crmm_test_allocate(mr, 1000);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 2000, NULL));
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, host_alloc(256, NULL, NULL), 256, NULL));
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    p = crmm_test_allocate(mr, 1000); /* counted from zero again */
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 1000);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1000, NULL));
    crmm_resource_release(mr);
}

CRMM_TEST_IN("callback", counters_stay_exact_under_threads)
{
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(crmm_callback_resource_create_with(host_alloc, host_free, NULL, NULL, "host_accessible=true", &mr));
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, alloc_free_rounds, mr), 0);
    for (int i = 0; i < 4; i++) {
        void *r = (void *)1;
        ck_assert_int_eq(pthread_join(t[i], &r), 0);
        ck_assert_ptr_null(r);
    }
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS_TOTAL), 4 * 2000);
    crmm_resource_release(mr);
}

int main(void)
{
    Suite *s = suite_create("callback");
    crmm_test_tcase(s, "callback", 0);
    /* the same config text a ctypes caller would write, addresses included; a config builds a
     * resource that is not host memory (callback is not a host plugin) only where there is a
     * device, so the suite runs over it on a GPU machine */
    if (crmm_test_gpu_count() == 0)
        return crmm_test_run(s);
    static char config[256];
    callback_config(config, sizeof config, host_alloc, host_free, "host_accessible = true\n");
    const crmm_test_chain chains[] = {{"callback_over_host_functions", config, "c", 0, 0}};
    crmm_conformance_add(s, chains, 1);
    return crmm_test_run(s);
}
