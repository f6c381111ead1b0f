/* check_streams_buffers.c — streams, the stream pool, device buffers and the copy helpers without
 * a GPU: argument validation (before any CUDA call) and the buffer bookkeeping that needs no copy,
 * over a fake resource that claims device access but hands out host memory. */
#include "build_config.h"
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include "probe_resource.h"
#include "silent_resource.h"
#include "test_support.h"

/* The device_buffer tests' probe: host memory, flagged device accessible, bound to no device;
 * made before and released after each test (a checked fixture). */
static probe_resource *fake;

static void fake_setup(void)
{
    fake = probe_resource_new(NULL, CRMM_RESOURCE_DEVICE_ACCESSIBLE | CRMM_RESOURCE_HOST_ACCESSIBLE, -1);
}

static void fake_teardown(void)
{
    ck_assert_int_eq(crmm_resource_refcount(&fake->base), 1); /* no buffer kept a reference */
    ck_assert_int_eq(fake->live, 0);                           /* nor a block */
    crmm_resource_release(&fake->base);
}

#define FAKE_STREAM ((crmm_cuda_stream_t)0x1234) /* a handle no CUDA call ever sees */

/* ---- streams -------------------------------------------------------------------------------- */

CRMM_TEST_IN("stream", test_stream_create_rejects_bad_flags)
{
    crmm_stream *s = (crmm_stream *)&s;
    ck_assert_crmm(crmm_stream_create((crmm_stream_flags)2, &s), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(s);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "flags"));
    ck_assert_crmm(crmm_stream_create((crmm_stream_flags)-1, &s), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(s);
}

CRMM_TEST_IN("stream", test_stream_null_out)
{
    ck_assert_crmm(crmm_stream_create(CRMM_STREAM_NON_BLOCKING, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_stream_view(FAKE_STREAM, NULL), CRMM_ERROR_INVALID_ARGUMENT);
}

CRMM_TEST_IN("stream", test_stream_builtin_defaults)
{
    crmm_stream *legacy = crmm_stream_default(), *per_thread = crmm_stream_per_thread();
    ck_assert_ptr_nonnull(legacy);
    ck_assert_ptr_nonnull(per_thread);
    ck_assert_ptr_ne(legacy, per_thread);
    ck_assert_ptr_null(crmm_stream_handle(legacy));
    ck_assert_ptr_eq(crmm_stream_handle(per_thread), CRMM_CUDA_STREAM_PER_THREAD);
    ck_assert(crmm_stream_is_default(NULL));
    ck_assert(crmm_stream_is_default(legacy));
    ck_assert(crmm_stream_is_default(per_thread));
    ck_assert(!crmm_stream_is_owning(NULL));
    ck_assert(!crmm_stream_is_owning(legacy));
    ck_assert(!crmm_stream_is_owning(per_thread));
    ck_assert_ptr_null(crmm_stream_handle(NULL));
    /* Destroying them is a no-op: they keep working. */
    crmm_stream_destroy(NULL);
    crmm_stream_destroy(legacy);
    crmm_stream_destroy(per_thread);
    ck_assert_ptr_eq(crmm_stream_default(), legacy);
    ck_assert_ptr_null(crmm_stream_handle(legacy));
    ck_assert_ptr_eq(crmm_stream_handle(per_thread), CRMM_CUDA_STREAM_PER_THREAD);
    ck_assert(crmm_stream_is_default(per_thread));
}

CRMM_TEST_IN("stream", test_stream_views)
{
    crmm_stream *v;
    ck_assert_crmm_ok(crmm_stream_view(FAKE_STREAM, &v));
    ck_assert_ptr_eq(crmm_stream_handle(v), FAKE_STREAM);
    ck_assert(!crmm_stream_is_default(v));
    ck_assert(!crmm_stream_is_owning(v));
    crmm_stream_destroy(v); /* frees the view only; no CUDA call on the fake handle */

    crmm_cuda_stream_t defaults[] = {NULL, CRMM_CUDA_STREAM_LEGACY, CRMM_CUDA_STREAM_PER_THREAD};
    for (int i = 0; i < 3; i++) {
        ck_assert_crmm_ok(crmm_stream_view(defaults[i], &v));
        ck_assert_msg(crmm_stream_is_default(v), "a view of handle %p is a default stream", (void *)defaults[i]);
        ck_assert_ptr_eq(crmm_stream_handle(v), defaults[i]);
        crmm_stream_destroy(v);
    }
}

/* ---- stream pool ---------------------------------------------------------------------------- */

CRMM_TEST_IN("stream_pool", test_pool_create_validation)
{
    crmm_stream_pool *pool = (crmm_stream_pool *)&pool;
    ck_assert_crmm(crmm_stream_pool_create(0, CRMM_STREAM_SYNC_DEFAULT, &pool), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(pool);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "at least 1"));
    pool = (crmm_stream_pool *)&pool;
    ck_assert_crmm(crmm_stream_pool_create(4, (crmm_stream_flags)7, &pool), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(pool);
    ck_assert_crmm(crmm_stream_pool_create(CRMM_STREAM_POOL_DEFAULT_SIZE, CRMM_STREAM_SYNC_DEFAULT, NULL),
                   CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(CRMM_STREAM_POOL_DEFAULT_SIZE, 16);
}

CRMM_TEST_IN("stream_pool", test_pool_null_pool)
{
    crmm_clear_error();
    ck_assert_uint_eq(crmm_stream_pool_get_pool_size(NULL), 0);
    ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_INVALID_ARGUMENT);
    crmm_stream *s = crmm_stream_default();
    ck_assert_crmm(crmm_stream_pool_get_stream(NULL, &s), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(s);
    s = crmm_stream_default();
    ck_assert_crmm(crmm_stream_pool_get_stream_by_id(NULL, 3, &s), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(s);
    ck_assert_crmm(crmm_stream_pool_get_stream_by_id(NULL, -1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_stream_pool_get_stream(NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    crmm_stream_pool_destroy(NULL);
}

/* ---- copy helpers --------------------------------------------------------------------------- */

CRMM_TEST_IN("copy", test_copy_null_pointers)
{
    char host[4] = "abc";
    void *dev = host; /* never reached: validation comes first */
    ck_assert_crmm(crmm_copy_device_to_ptr(NULL, dev, 3, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "copy_device_to_ptr"));
    ck_assert_crmm(crmm_copy_device_to_ptr(dev, NULL, 3, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_copy_host_to_ptr(NULL, 3, dev, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_copy_host_to_ptr(host, 3, NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_copy_ptr_to_host(NULL, host, 3, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_copy_ptr_to_host(dev, NULL, 3, crmm_stream_per_thread()), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_str_eq(host, "abc");
}

CRMM_TEST_IN("copy", test_copy_count_zero_is_noop)
{
    ck_assert_crmm_ok(crmm_copy_device_to_ptr(NULL, NULL, 0, NULL));
    ck_assert_crmm_ok(crmm_copy_host_to_ptr(NULL, 0, NULL, NULL));
    ck_assert_crmm_ok(crmm_copy_ptr_to_host(NULL, NULL, 0, crmm_stream_default()));
}

/* ---- device buffers ------------------------------------------------------------------------- */

CRMM_TEST_IN("device_buffer", test_buffer_refuses_host_resource)
{
    crmm_resource *host;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &host));
    crmm_device_buffer *buf = (crmm_device_buffer *)&buf;
    ck_assert_crmm(crmm_device_buffer_create(64, NULL, host, &buf), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(buf);
    ck_assert_msg(strstr(crmm_last_error(), "'host'") && strstr(crmm_last_error(), "not device accessible"),
                  "message names the resource: %s", crmm_last_error());
    ck_assert_crmm(crmm_device_buffer_to_device("abc", 3, NULL, host, &buf), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "'host'"));
    ck_assert_crmm(crmm_device_buffer_create(0, NULL, host, &buf), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(crmm_resource_refcount(host), 1);
    crmm_resource_release(host);
}

CRMM_TEST_IN("device_buffer", test_buffer_null_arguments)
{
    ck_assert_crmm(crmm_device_buffer_create(8, NULL, &fake->base, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_device_buffer_to_device("abc", 3, NULL, &fake->base, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    crmm_device_buffer *buf = (crmm_device_buffer *)&buf;
    /* host NULL with count > 0 is refused before the resource is looked up (no CUDA call). */
    ck_assert_crmm(crmm_device_buffer_to_device(NULL, 3, NULL, NULL, &buf), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(buf);
    ck_assert_int_eq(fake->allocations, 0);

    char host[8];
    void *h = host;
    size_t len = 99;
    ck_assert_crmm(crmm_device_buffer_copy_to_host(NULL, host, sizeof host, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_device_buffer_copy_to_host_alloc(NULL, NULL, &h, &len), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(h);
    ck_assert_uint_eq(len, 0);
    ck_assert_crmm(crmm_device_buffer_copy_from_host(NULL, host, 1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_device_buffer_copy_from_device(NULL, host, 1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_device_buffer_resize(NULL, 1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_device_buffer_reserve(NULL, 1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_device_buffer_shrink_to_fit(NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_device_buffer_set_stream(NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    buf = (crmm_device_buffer *)&buf;
    ck_assert_crmm(crmm_device_buffer_copy(NULL, &buf), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(buf);
    ck_assert_crmm(crmm_device_buffer_copy_on_stream(NULL, NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(crmm_device_buffer_ptr(NULL));
    ck_assert_uint_eq(crmm_device_buffer_size(NULL), 0);
    ck_assert_uint_eq(crmm_device_buffer_capacity(NULL), 0);
    ck_assert_ptr_null(crmm_device_buffer_stream(NULL));
    ck_assert_int_eq(crmm_device_buffer_device(NULL), -1);
    ck_assert_ptr_null(crmm_device_buffer_resource(NULL));
    crmm_device_buffer_destroy(NULL);
}

CRMM_TEST_IN("device_buffer", test_buffer_create_holds_resource)
{
    crmm_device_buffer *buf;
    ck_assert_crmm_ok(crmm_device_buffer_create(16, NULL, &fake->base, &buf));
    ck_assert_ptr_nonnull(crmm_device_buffer_ptr(buf));
    ck_assert_uint_eq(crmm_device_buffer_size(buf), 16);
    ck_assert_uint_eq(crmm_device_buffer_capacity(buf), 16);
    ck_assert_int_eq(crmm_device_buffer_device(buf), -1);
    ck_assert_ptr_eq(crmm_device_buffer_resource(buf), &fake->base);
    ck_assert_int_eq(crmm_resource_refcount(&fake->base), 2);
    ck_assert(crmm_stream_is_default(crmm_device_buffer_stream(buf)));
    ck_assert_int_eq(fake->live, 1);
    crmm_device_buffer_destroy(buf);
    ck_assert_int_eq(fake->live, 0);
    ck_assert_uint_eq(fake->free_bytes, 16);
    ck_assert_int_eq(crmm_resource_refcount(&fake->base), 1);
}

CRMM_TEST_IN("device_buffer", test_buffer_size_zero)
{
    crmm_device_buffer *buf;
    ck_assert_crmm_ok(crmm_device_buffer_create(0, NULL, &fake->base, &buf));
    ck_assert_ptr_null(crmm_device_buffer_ptr(buf));
    ck_assert_uint_eq(crmm_device_buffer_size(buf), 0);
    ck_assert_int_eq(fake->allocations, 0);
    ck_assert_crmm_ok(crmm_device_buffer_copy_to_host(buf, NULL, 0, NULL));
    void *h = &h;
    size_t len = 5;
    ck_assert_crmm_ok(crmm_device_buffer_copy_to_host_alloc(buf, NULL, &h, &len));
    ck_assert_ptr_null(h);
    ck_assert_uint_eq(len, 0);
    ck_assert_crmm_ok(crmm_device_buffer_copy_from_host(buf, NULL, 0, NULL));
    ck_assert_crmm(crmm_device_buffer_copy_from_host(buf, "a", 1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    crmm_device_buffer *copy;
    ck_assert_crmm_ok(crmm_device_buffer_copy(buf, &copy));
    ck_assert_ptr_null(crmm_device_buffer_ptr(copy));
    ck_assert_ptr_eq(crmm_device_buffer_resource(copy), &fake->base);
    ck_assert_int_eq(crmm_resource_refcount(&fake->base), 3);
    crmm_device_buffer_destroy(copy);
    crmm_device_buffer_destroy(buf);
    /* to_device of nothing is a size-0 buffer too. */
    ck_assert_crmm_ok(crmm_device_buffer_to_device(NULL, 0, NULL, &fake->base, &buf));
    ck_assert_ptr_null(crmm_device_buffer_ptr(buf));
    crmm_device_buffer_destroy(buf);
    ck_assert_int_eq(crmm_resource_refcount(&fake->base), 1);
}

CRMM_TEST_IN("device_buffer", test_buffer_copies_past_size_rejected)
{
    crmm_device_buffer *buf;
    ck_assert_crmm_ok(crmm_device_buffer_create(8, NULL, &fake->base, &buf));
    unsigned char *mem = crmm_device_buffer_ptr(buf); /* host memory behind the fake resource */
    memset(mem, 0x5a, 8);
    unsigned char src[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    ck_assert_crmm(crmm_device_buffer_copy_from_host(buf, src, 9, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "9 bytes do not fit"));
    ck_assert_crmm(crmm_device_buffer_copy_from_device(buf, src, 9, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_device_buffer_copy_from_host(buf, NULL, 4, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_device_buffer_copy_from_device(buf, NULL, 4, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    for (int i = 0; i < 8; i++)
        ck_assert_uint_eq(mem[i], 0x5a); /* nothing written */

    unsigned char host[8];
    memset(host, 0x11, sizeof host);
    ck_assert_crmm(crmm_device_buffer_copy_to_host(buf, host, 7, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "holds 7 bytes"));
    for (int i = 0; i < 8; i++)
        ck_assert_uint_eq(host[i], 0x11);
    ck_assert_crmm(crmm_device_buffer_copy_to_host(buf, NULL, 8, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_device_buffer_copy_to_host_alloc(buf, NULL, NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    crmm_device_buffer_destroy(buf);
}

CRMM_TEST_IN("device_buffer", test_buffer_resize_within_capacity)
{
    crmm_device_buffer *buf;
    ck_assert_crmm_ok(crmm_device_buffer_create(16, NULL, &fake->base, &buf));
    void *p = crmm_device_buffer_ptr(buf);
    ck_assert_crmm_ok(crmm_device_buffer_resize(buf, 8, NULL));
    ck_assert_uint_eq(crmm_device_buffer_size(buf), 8);
    ck_assert_uint_eq(crmm_device_buffer_capacity(buf), 16);
    ck_assert_ptr_eq(crmm_device_buffer_ptr(buf), p);
    ck_assert_crmm_ok(crmm_device_buffer_resize(buf, 16, NULL));
    ck_assert_uint_eq(crmm_device_buffer_size(buf), 16);
    ck_assert_ptr_eq(crmm_device_buffer_ptr(buf), p);
    ck_assert_crmm_ok(crmm_device_buffer_reserve(buf, 10, NULL)); /* not larger: nothing */
    ck_assert_crmm_ok(crmm_device_buffer_shrink_to_fit(buf, NULL)); /* size == capacity: nothing */
    ck_assert_uint_eq(crmm_device_buffer_capacity(buf), 16);
    ck_assert_ptr_eq(crmm_device_buffer_ptr(buf), p);
    ck_assert_int_eq(fake->allocations, 1);
    /* Down to 0 and shrink: the block goes back, the buffer is a valid size-0 one. */
    ck_assert_crmm_ok(crmm_device_buffer_resize(buf, 0, NULL));
    ck_assert_ptr_eq(crmm_device_buffer_ptr(buf), p);
    ck_assert_crmm_ok(crmm_device_buffer_shrink_to_fit(buf, NULL));
    ck_assert_ptr_null(crmm_device_buffer_ptr(buf));
    ck_assert_uint_eq(crmm_device_buffer_capacity(buf), 0);
    ck_assert_int_eq(fake->live, 0);
    ck_assert_uint_eq(fake->free_bytes, 16);
    crmm_device_buffer_destroy(buf);
}

CRMM_TEST_IN("device_buffer", test_buffer_reserve_empty)
{
    crmm_device_buffer *buf;
    ck_assert_crmm_ok(crmm_device_buffer_create(0, NULL, &fake->base, &buf));
    ck_assert_crmm_ok(crmm_device_buffer_reserve(buf, 64, NULL));
    ck_assert_uint_eq(crmm_device_buffer_capacity(buf), 64);
    ck_assert_uint_eq(crmm_device_buffer_size(buf), 0);
    ck_assert_ptr_nonnull(crmm_device_buffer_ptr(buf));
    ck_assert_int_eq(fake->live, 1);
    ck_assert_crmm_ok(crmm_device_buffer_resize(buf, 64, NULL)); /* within capacity now */
    ck_assert_int_eq(fake->allocations, 1);
    crmm_device_buffer_destroy(buf);
    ck_assert_uint_eq(fake->free_bytes, 64); /* freed with the capacity it was allocated with */
    ck_assert_int_eq(fake->live, 0);
}

CRMM_TEST_IN("device_buffer", test_buffer_stream_follows_set_stream)
{
    crmm_stream *view;
    ck_assert_crmm_ok(crmm_stream_view(FAKE_STREAM, &view));
    crmm_device_buffer *buf;
    ck_assert_crmm_ok(crmm_device_buffer_create(0, view, &fake->base, &buf));
    ck_assert_ptr_eq(crmm_stream_handle(crmm_device_buffer_stream(buf)), FAKE_STREAM);
    ck_assert_crmm_ok(crmm_device_buffer_set_stream(buf, NULL));
    ck_assert(crmm_stream_is_default(crmm_device_buffer_stream(buf)));
    ck_assert_crmm_ok(crmm_device_buffer_set_stream(buf, view));
    crmm_stream_destroy(view); /* the buffer keeps its own stream object */
    crmm_stream *own = crmm_device_buffer_stream(buf);
    ck_assert_ptr_eq(crmm_stream_handle(own), FAKE_STREAM);
    ck_assert(!crmm_stream_is_owning(own));
    crmm_stream_destroy(own); /* owned by the buffer: a no-op */
    ck_assert_ptr_eq(crmm_stream_handle(crmm_device_buffer_stream(buf)), FAKE_STREAM);
    /* reserve allocates on the buffer's stream; resize makes its stream the buffer's. */
    ck_assert_crmm_ok(crmm_device_buffer_reserve(buf, 32, crmm_device_buffer_stream(buf)));
    ck_assert_ptr_eq(fake->alloc_stream, FAKE_STREAM);
    ck_assert_crmm_ok(crmm_device_buffer_resize(buf, 8, crmm_stream_per_thread()));
    ck_assert_ptr_eq(crmm_stream_handle(crmm_device_buffer_stream(buf)), CRMM_CUDA_STREAM_PER_THREAD);
    crmm_device_buffer *copy;
    ck_assert_crmm_ok(crmm_device_buffer_resize(buf, 0, crmm_device_buffer_stream(buf)));
    ck_assert_crmm_ok(crmm_device_buffer_copy(buf, &copy));
    ck_assert_ptr_eq(crmm_stream_handle(crmm_device_buffer_stream(copy)), CRMM_CUDA_STREAM_PER_THREAD);
    crmm_device_buffer_destroy(copy);
    ck_assert_crmm_ok(crmm_stream_view(FAKE_STREAM, &view));
    ck_assert_crmm_ok(crmm_device_buffer_copy_on_stream(buf, view, &copy));
    ck_assert_ptr_eq(crmm_stream_handle(crmm_device_buffer_stream(copy)), FAKE_STREAM);
    crmm_device_buffer_destroy(copy);
    crmm_device_buffer_destroy(buf); /* freed on its last stream */
    ck_assert_ptr_eq(fake->free_stream, CRMM_CUDA_STREAM_PER_THREAD);
    crmm_stream_destroy(view);
}

/* A resource that fails without a message (silent_resource.h): a buffer call must still fail
 * with its status (crmm_error_add_context alone gives back the thread's status, CRMM_OK here,
 * which let create succeed with no buffer and resize claim a size past the capacity). */
CRMM_TEST_IN("device_buffer", test_buffer_resource_failing_without_a_message)
{
    crmm_resource silent;
    silent_resource_init(&silent, CRMM_RESOURCE_DEVICE_ACCESSIBLE);
    crmm_device_buffer *buf = (crmm_device_buffer *)&buf;
    crmm_clear_error();
    ck_assert_crmm(crmm_device_buffer_create(64, NULL, &silent, &buf), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(buf);
    ck_assert_int_eq(crmm_resource_refcount(&silent), 1);
    ck_assert_crmm_ok(crmm_device_buffer_create(0, NULL, &silent, &buf)); /* no allocation asked */
    crmm_clear_error();
    ck_assert_crmm(crmm_device_buffer_resize(buf, 64, NULL), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_eq(crmm_device_buffer_size(buf), 0); /* unchanged: not 64 over no memory */
    ck_assert_uint_eq(crmm_device_buffer_capacity(buf), 0);
    crmm_clear_error();
    ck_assert_crmm(crmm_device_buffer_reserve(buf, 64, NULL), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_eq(crmm_device_buffer_capacity(buf), 0);
    crmm_device_buffer_destroy(buf);
    crmm_clear_error();
    ck_assert_crmm(crmm_device_buffer_to_device("abc", 3, NULL, &silent, &buf), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(buf);
    ck_assert_int_eq(crmm_resource_refcount(&silent), 1);
}

/* Once the process is exiting, a buffer call that copies makes no CUDA call and fails with
 * CRMM_ERROR_STATE, as the copy helpers do (crmm/device_buffer.h names it for each). */
CRMM_TEST_IN("device_buffer", test_buffer_copies_at_exit_are_state_errors)
{
    crmm_device_buffer *buf, *copy = (crmm_device_buffer *)&copy;
    ck_assert_crmm_ok(crmm_device_buffer_create(8, NULL, &fake->base, &buf));
    /* what the CUDA runtime answers once it has unloaded marks the process as exiting */
    ck_assert_crmm(crmm_cuda_status(cudaErrorCudartUnloading, "cudaFree"), CRMM_ERROR_STATE);
    ck_assert(crmm_process_exiting());
    char host[8] = "1234567";
    ck_assert_crmm(crmm_device_buffer_copy_from_host(buf, host, 8, NULL), CRMM_ERROR_STATE);
    ck_assert_crmm(crmm_device_buffer_copy_from_device(buf, host, 8, NULL), CRMM_ERROR_STATE);
    ck_assert_crmm(crmm_device_buffer_copy_to_host(buf, host, 8, NULL), CRMM_ERROR_STATE);
    void *h = NULL;
    ck_assert_crmm(crmm_device_buffer_copy_to_host_alloc(buf, NULL, &h, NULL), CRMM_ERROR_STATE);
    ck_assert_ptr_null(h);
    ck_assert_crmm(crmm_device_buffer_copy(buf, &copy), CRMM_ERROR_STATE);
    ck_assert_ptr_null(copy);
    ck_assert_crmm(crmm_device_buffer_to_device(host, 8, NULL, &fake->base, &copy), CRMM_ERROR_STATE);
    ck_assert_ptr_null(copy);
    ck_assert_crmm(crmm_device_buffer_resize(buf, 16, NULL), CRMM_ERROR_STATE);
    ck_assert_uint_eq(crmm_device_buffer_size(buf), 8);
    crmm_device_buffer_destroy(buf);
}

/* Once the process is exiting, the calls that would start CUDA work (a stream, a stream pool,
 * asking for devices, a device's first resource) make no CUDA call and fail with
 * CRMM_ERROR_STATE; without a driver, a CUDA call would have failed with CRMM_ERROR_CUDA. */
CRMM_TEST_IN("stream", test_calls_that_start_cuda_work_at_exit_are_state_errors)
{
    ck_assert_crmm(crmm_cuda_status(cudaErrorCudartUnloading, "cudaFree"), CRMM_ERROR_STATE);
    ck_assert(crmm_process_exiting());
    crmm_stream *s = (crmm_stream *)&s;
    ck_assert_crmm(crmm_stream_create(CRMM_STREAM_NON_BLOCKING, &s), CRMM_ERROR_STATE);
    ck_assert_ptr_null(s);
    crmm_stream_pool *pool = (crmm_stream_pool *)&pool;
    ck_assert_crmm(crmm_stream_pool_create(2, CRMM_STREAM_SYNC_DEFAULT, &pool), CRMM_ERROR_STATE);
    ck_assert_ptr_null(pool);
    int n = -1, device = -1;
    ck_assert_crmm(crmm_cuda_device_count(&n), CRMM_ERROR_STATE);
    ck_assert_int_eq(n, 0);
    ck_assert_crmm(crmm_cuda_current_device(&device), CRMM_ERROR_STATE);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "the process is exiting"));
    crmm_device_guard g;
    ck_assert_crmm(crmm_cuda_device_enter(0, &g), CRMM_ERROR_STATE);
    ck_assert_int_eq(g.changed, 0);
    ck_assert_ptr_null(crmm_get_per_device_resource(0));
    ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_STATE);
}

/* The device guard: a NULL guard is refused before any CUDA call, and restoring one does nothing. */
CRMM_TEST_IN("stream", test_device_guard_null)
{
    ck_assert_crmm(crmm_cuda_device_enter(-1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_cuda_device_enter(0, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    crmm_cuda_device_restore(NULL);
    crmm_device_guard g;
    ck_assert_int_eq(crmm_cuda_device_enter(-1, &g), CRMM_OK);
    ck_assert_int_eq(g.changed, 0);
    crmm_cuda_device_restore(&g);
}

static Suite *streams_buffers_suite(void)
{
    Suite *s = suite_create("streams_buffers");
    crmm_test_tcase(s, "stream", 0);
    crmm_test_tcase(s, "stream_pool", 0);
    crmm_test_tcase(s, "copy", 0);
    tcase_add_checked_fixture(crmm_test_tcase(s, "device_buffer", 0), fake_setup, fake_teardown);
    return s;
}

int main(void)
{
    return crmm_test_run(streams_buffers_suite());
}
