/* check_device_buffer_cuda_calls.c — the device calls a crmm_device_buffer makes, on the CPU
 * against the scripted CUDA of fakes/fake_stream_cuda.c (two devices, a current device per
 * thread, every cudaGetDevice, cudaSetDevice, cudaGetDeviceCount and the driver's cuCtxGetDevice
 * counted). Each device's resource is a probe (probe_resource.h) that records the current device
 * during its calls.
 *
 * What is pinned: a buffer of the current device's resource asks for the current device once at
 * its creation and once at its destruction (every DeviceBuffer, CuPy and Numba allocation pays for
 * each call), through the driver's cuCtxGetDevice (a read of the current context) rather than
 * cudaGetDevice, with cudaGetDevice where no context is current, where the driver has no such
 * function (the caller's pending CUDA error left alone) and for good once the driver's answer
 * disagreed with it; a buffer of another device's resource runs its calls with that device
 * current and gives the caller's device back. The calls without waiting (try_create,
 * try_destroy) do their work only on the current device's resource, already made, and leave
 * everything as it was when they cannot. The program also scripts stream creation and
 * destruction and cudaMemcpyAsync (below), so that the calls of streams, stream pools, copies
 * and buffers that copy can run and fail here. */
#include "build_config.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/crmm.h>
#include <crmm/device_buffer.h>
#include "fakes/fake_stream_cuda.h"
#include "fakes/fake_streams.h"
#include "probe_resource.h"
#include "test_support.h"

static const probe_memory on_fake_devices = {.current_device = fake_current_device};

/* A probe of device memory bound to `device`, made that device's resource. */
static probe_resource *device_resource(int device)
{
    probe_resource *p = probe_resource_new(&on_fake_devices, CRMM_RESOURCE_DEVICE_ACCESSIBLE, device);
    crmm_resource *previous = crmm_set_per_device_resource(device, &p->base);
    crmm_resource_release(previous);
    return p;
}

/* A first buffer of the current device's resource, made and freed (it may count devices). */
static void first_buffer(void)
{
    crmm_device_buffer *b = NULL;
    ck_assert_int_eq(crmm_device_buffer_create(64, NULL, NULL, &b), CRMM_OK);
    crmm_device_buffer_destroy(b);
}

/* Ten buffers of the current device's resource made and freed, the counts reset first, after
 * first_buffer; the probe's allocations all made on `device`. */
static void ten_buffers(probe_resource *p, int device)
{
    crmm_device_buffer *b = NULL;
    fake_cuda_reset();
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(crmm_device_buffer_create(64, NULL, NULL, &b), CRMM_OK);
        ck_assert_int_eq(crmm_device_buffer_device(b), device);
        crmm_device_buffer_destroy(b);
    }
    ck_assert_int_eq(p->allocations, 11);
    ck_assert_int_eq(p->live, 0);
    ck_assert_int_eq(p->alloc_device, device);
}

static void ten_buffers_after_one(probe_resource *p, int device)
{
    first_buffer();
    ten_buffers(p, device);
}

CRMM_TEST(a_buffer_of_the_current_devices_resource_asks_the_driver_once_each_way)
{
    probe_resource *p0 = device_resource(0);
    ten_buffers_after_one(p0, 0); /* the first may count devices */
    ck_assert_int_eq(fake_cuda.get_device_count, 0);
    ck_assert_int_eq(fake_cuda.ctx_get_device, 20); /* one at each create (which device), one at each destroy */
    ck_assert_int_eq(fake_cuda.get_device, 0);
    ck_assert_int_eq(fake_cuda.set_device, 0);
    ck_assert_int_eq(p0->free_device, 0);
}

CRMM_TEST(a_thread_without_a_current_context_asks_the_runtime)
{
    probe_resource *p1 = device_resource(1);
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    fake_cuda.no_context = 1;
    ten_buffers_after_one(p1, 1);
    ck_assert_int_eq(fake_cuda.ctx_get_device, 20); /* asked, and no context */
    ck_assert_int_eq(fake_cuda.get_device, 20);
    ck_assert_int_eq(fake_cuda.set_device, 0);
}

CRMM_TEST(a_driver_that_disagrees_with_the_runtime_is_not_asked_again)
{
    probe_resource *p0 = device_resource(0);
    fake_cuda.context_device_off_by = 1; /* the driver says 1 where the runtime says 0 */
    ten_buffers_after_one(p0, 0);
    ck_assert_int_eq(fake_cuda.ctx_get_device, 0);
    ck_assert_int_eq(fake_cuda.get_device, 20);
    ck_assert_int_eq(fake_cuda.set_device, 0);
}

CRMM_TEST(a_driver_without_the_query_leaves_the_callers_last_error)
{
    fake_cuda.no_ctx_get_device = 1;
    fake_cuda.last_error = cudaErrorInvalidValue; /* the caller's, not yet read */
    probe_resource *p0 = device_resource(0);      /* counts the devices and looks the query up */
    first_buffer();
    ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidValue); /* a symbol not found is no error of ours */
    ten_buffers(p0, 0);
    ck_assert_int_eq(fake_cuda.get_device, 20); /* the runtime asked instead */
    ck_assert_int_eq(fake_cuda.ctx_get_device, 0);
}

CRMM_TEST(the_current_devices_resource_follows_the_current_device)
{
    probe_resource *p0 = device_resource(0), *p1 = device_resource(1);
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    fake_cuda_reset();
    crmm_device_buffer *b = NULL;
    ck_assert_int_eq(crmm_device_buffer_create(100, NULL, NULL, &b), CRMM_OK);
    ck_assert_int_eq(crmm_device_buffer_device(b), 1);
    ck_assert_int_eq(p1->live, 1);
    ck_assert_int_eq(p0->live, 0);
    ck_assert_int_eq(p1->alloc_device, 1);
    ck_assert_int_eq(fake_cuda.set_device, 0); /* its device was current: nothing to switch */
    crmm_device_buffer_destroy(b);
    ck_assert_int_eq(p1->live, 0);
    ck_assert_int_eq(fake_current_device(), 1);
}

CRMM_TEST(a_buffer_of_another_devices_resource_runs_there_and_gives_the_device_back)
{
    probe_resource *p0 = device_resource(0);
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    crmm_device_buffer *b = NULL;
    ck_assert_int_eq(crmm_device_buffer_create(100, NULL, &p0->base, &b), CRMM_OK);
    ck_assert_int_eq(crmm_device_buffer_device(b), 0);
    ck_assert_int_eq(p0->alloc_device, 0); /* allocated with its device current */
    ck_assert_int_eq(fake_current_device(), 1);
    crmm_device_buffer_destroy(b);
    ck_assert_int_eq(p0->free_device, 0);
    ck_assert_int_eq(p0->live, 0);
    ck_assert_int_eq(fake_current_device(), 1);
}

CRMM_TEST(a_failed_creation_leaves_nothing_and_keeps_the_device)
{
    probe_resource *p1 = device_resource(1);
    p1->max_live = 1;
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    crmm_device_buffer *held = NULL, *refused = (crmm_device_buffer *)&held;
    ck_assert_int_eq(crmm_device_buffer_create(10, NULL, NULL, &held), CRMM_OK);
    ck_assert_int_eq(crmm_device_buffer_create(10, NULL, NULL, &refused), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(refused);
    ck_assert_int_eq(p1->live, 1);
    ck_assert_int_eq(fake_current_device(), 1);
    crmm_device_buffer_destroy(held);
    ck_assert_int_eq(p1->live, 0);
}

/* crmm_device_buffer_try_create / _try_destroy: done with no device switch, or not at all */

CRMM_TEST(a_buffer_tried_on_the_current_devices_resource_is_made_and_freed_at_once)
{
    probe_resource *p0 = device_resource(0);
    p0->serves_at_once = 1;
    first_buffer();
    long refs = crmm_resource_refcount(&p0->base);
    fake_cuda_reset();
    crmm_device_buffer *b = NULL;
    ck_assert(crmm_device_buffer_try_create(100, NULL, NULL, &b));
    ck_assert_ptr_nonnull(crmm_device_buffer_ptr(b));
    ck_assert_int_eq(crmm_device_buffer_size(b), 100);
    ck_assert_int_eq(crmm_device_buffer_device(b), 0);
    ck_assert_int_eq(p0->live, 1);
    ck_assert_int_eq(crmm_resource_refcount(&p0->base), refs + 1); /* the buffer's */
    ck_assert(crmm_device_buffer_try_destroy(b));
    ck_assert_int_eq(p0->live, 0);
    ck_assert_int_eq(p0->served_at_once, 2);
    ck_assert_int_eq(p0->free_bytes, 100);
    ck_assert_int_eq(crmm_resource_refcount(&p0->base), refs);
    ck_assert_int_eq(fake_cuda.set_device, 0);
    ck_assert(crmm_device_buffer_try_destroy(NULL));
}

CRMM_TEST(a_resource_that_cannot_serve_at_once_leaves_the_try_nothing_made)
{
    probe_resource *p0 = device_resource(0);
    first_buffer();
    long refs = crmm_resource_refcount(&p0->base);
    crmm_clear_error();
    crmm_device_buffer *b = (crmm_device_buffer *)&refs;
    ck_assert(!crmm_device_buffer_try_create(100, NULL, NULL, &b));
    ck_assert_ptr_eq(b, (crmm_device_buffer *)&refs); /* untouched */
    ck_assert_int_eq(crmm_last_status(), CRMM_OK);  /* no error: the caller makes the ordinary call */
    ck_assert_int_eq(p0->live, 0);
    ck_assert_int_eq(crmm_resource_refcount(&p0->base), refs);
    ck_assert_int_eq(crmm_device_buffer_create(100, NULL, NULL, &b), CRMM_OK);
    ck_assert(!crmm_device_buffer_try_destroy(b)); /* the probe does not free at once either */
    ck_assert_int_eq(p0->live, 1);
    crmm_device_buffer_destroy(b);
    ck_assert_int_eq(p0->live, 0);
    ck_assert_int_eq(crmm_resource_refcount(&p0->base), refs);
}

CRMM_TEST(a_buffer_of_another_device_is_never_tried_at_once)
{
    probe_resource *p0 = device_resource(0);
    p0->serves_at_once = 1;
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    fake_cuda_reset();
    crmm_device_buffer *b = NULL;
    ck_assert(!crmm_device_buffer_try_create(100, NULL, &p0->base, &b)); /* would need a device switch */
    ck_assert_int_eq(p0->live, 0);
    ck_assert_int_eq(crmm_device_buffer_create(100, NULL, &p0->base, &b), CRMM_OK);
    ck_assert(!crmm_device_buffer_try_destroy(b));
    ck_assert_int_eq(p0->live, 1);
    ck_assert_int_eq(fake_cuda.set_device, 2); /* the ordinary create's switch and switch back */
    crmm_device_buffer_destroy(b);
    ck_assert_int_eq(p0->live, 0);
    ck_assert_int_eq(p0->served_at_once, 0);
    ck_assert_int_eq(fake_current_device(), 1);
}

/* A device's resource may be another device's (crmm_set_per_device_resource takes any): the
 * ordinary create runs it with its own device current, so the try, which never switches, must
 * leave it to that call rather than allocate with the wrong device current. */
CRMM_TEST(a_current_devices_resource_of_another_device_is_never_tried_at_once)
{
    probe_resource *p0 = probe_resource_new(&on_fake_devices, CRMM_RESOURCE_DEVICE_ACCESSIBLE, 0);
    p0->serves_at_once = 1;
    crmm_resource_release(crmm_set_per_device_resource(1, &p0->base));
    crmm_resource_release(&p0->base); /* the registry holds it */
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    first_buffer();
    ck_assert_int_eq(p0->alloc_device, 0);
    crmm_device_buffer *b = NULL;
    long refs = crmm_resource_refcount(&p0->base);
    ck_assert(!crmm_device_buffer_try_create(100, NULL, NULL, &b)); /* would need a device switch */
    ck_assert_ptr_null(b);
    ck_assert_int_eq(p0->live, 0);
    ck_assert_int_eq(p0->served_at_once, 0);
    ck_assert_int_eq(p0->alloc_device, 0);
    ck_assert_int_eq(crmm_resource_refcount(&p0->base), refs);
    ck_assert_int_eq(fake_current_device(), 1);
}

CRMM_TEST(a_device_without_its_resource_yet_is_not_tried)
{
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    crmm_device_buffer *b = NULL;
    ck_assert(!crmm_device_buffer_try_create(100, NULL, NULL, &b)); /* making one may wait */
    ck_assert_ptr_null(b);
}

CRMM_TEST(a_buffer_holding_its_resources_last_reference_leaves_the_rest_to_destroy)
{
    probe_resource *p = probe_resource_new(&on_fake_devices, CRMM_RESOURCE_DEVICE_ACCESSIBLE, 0);
    p->serves_at_once = 1;
    crmm_device_buffer *b = NULL;
    ck_assert(crmm_device_buffer_try_create(64, NULL, &p->base, &b));
    crmm_resource_release(&p->base); /* the buffer's reference is the last */
    ck_assert_int_eq(crmm_resource_refcount(&p->base), 1);
    ck_assert(!crmm_device_buffer_try_destroy(b)); /* destroying the resource may wait */
    ck_assert_int_eq(p->live, 0);                   /* the memory went back at once */
    ck_assert_ptr_null(crmm_device_buffer_ptr(b));
    ck_assert_int_eq(crmm_resource_refcount(&p->base), 1);
    crmm_device_buffer_destroy(b); /* frees the buffer and the probe (ASan: nothing leaked) */
}

/* The try calls that cannot learn the current device record nothing and keep the caller's
 * error: try_create with the current device's resource or one given, and try_destroy. */
CRMM_TEST(a_try_without_a_current_device_keeps_the_callers_error)
{
    probe_resource *p0 = device_resource(0);
    p0->serves_at_once = 1;
    first_buffer();
    crmm_device_buffer *held = NULL;
    ck_assert_int_eq(crmm_device_buffer_create(64, NULL, &p0->base, &held), CRMM_OK);
    crmm_set_error(CRMM_ERROR_IO, "the caller's own failure");
    fake_cuda.no_context = 1; /* the runtime's cudaGetDevice is asked, and fails */
    fake_cuda.get_device_result = cudaErrorDevicesUnavailable;
    crmm_device_buffer *b = NULL, *c = NULL;
    bool made = crmm_device_buffer_try_create(100, NULL, NULL, &b);
    bool made_on_p0 = crmm_device_buffer_try_create(100, NULL, &p0->base, &c);
    bool destroyed = crmm_device_buffer_try_destroy(held);
    fake_cuda.no_context = 0;
    fake_cuda.get_device_result = cudaSuccess;
    ck_assert(!made && !made_on_p0 && !destroyed);
    ck_assert_ptr_null(b);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(p0->live, 1);
    ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_IO);
    ck_assert_str_eq(crmm_last_error_detail(), "the caller's own failure");
    crmm_clear_error();
    crmm_device_buffer_destroy(held);
    ck_assert_int_eq(p0->live, 0);
}

CRMM_TEST(a_host_resource_is_refused_by_the_try_as_by_create)
{
    probe_resource *h = probe_resource_new(NULL, CRMM_RESOURCE_HOST_ACCESSIBLE, -1);
    h->serves_at_once = 1;
    crmm_device_buffer *b = NULL;
    ck_assert(!crmm_device_buffer_try_create(64, NULL, &h->base, &b));
    ck_assert_int_eq(h->live, 0);
    ck_assert_int_eq(crmm_resource_refcount(&h->base), 1);
    ck_assert(!crmm_device_buffer_try_create(64, NULL, NULL, NULL));
    crmm_resource_release(&h->base);
}

/* ---- streams, the stream pool and copies over the scripted runtime -------------------------
 * The program scripts the calls fake_stream_cuda.c leaves to the real runtime: stream creation
 * (fake streams of fakes/fake_streams.h, so that a call given a destroyed stream fails the test),
 * stream destruction and cudaMemcpyAsync (a memcpy: the probes' memory is host memory), each
 * recording the current device and able to fail on demand. */

static struct {
    int create_calls, created, destroyed, copies;
    int create_fails_at;      /* the create call with this number (from 1) fails; 0: none */
    cudaError_t copy_result;  /* what cudaMemcpyAsync answers (the copy is made only on success) */
    cudaError_t destroy_result; /* what cudaStreamDestroy answers (the stream goes only on success) */
    cudaStream_t copy_stream; /* the last copy's stream */
    int copy_device, destroy_device;
    cudaStream_t slots[FAKE_STREAMS]; /* the live streams made here, by fake_streams.h slot */
} scripted;

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    (void)flags;
    if (++scripted.create_calls == scripted.create_fails_at)
        return fake_cuda.last_error = cudaErrorInvalidValue;
    for (int i = 0; i < FAKE_STREAMS; i++)
        if (!scripted.slots[i]) {
            scripted.created++;
            *s = scripted.slots[i] = fake_stream_new(i);
            return cudaSuccess;
        }
    ck_abort_msg("out of fake streams");
    return cudaErrorMemoryAllocation;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    fake_stream_use(s, "cudaStreamDestroy");
    if (scripted.destroy_result != cudaSuccess)
        return fake_cuda.last_error = scripted.destroy_result;
    ck_assert_msg(fake_stream_is_live(s), "cudaStreamDestroy of a stream not made here: %p", (void *)s);
    fake_stream_destroy(s);
    for (int i = 0; i < FAKE_STREAMS; i++)
        if (scripted.slots[i] == s)
            scripted.slots[i] = NULL;
    scripted.destroyed++;
    scripted.destroy_device = fake_current_device();
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t s)
{
    (void)kind;
    fake_stream_use(s, "cudaMemcpyAsync");
    scripted.copy_stream = s;
    scripted.copy_device = fake_current_device();
    if (scripted.copy_result != cudaSuccess)
        return fake_cuda.last_error = scripted.copy_result;
    memcpy(dst, src, count);
    scripted.copies++;
    return cudaSuccess;
}

/* Blocks of host memory whose every free is reported as failed, though made: a cleanup free that
 * fails without leaking. */
static crmm_status get_host(void **ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    (void)stream;
    *ptr = malloc(bytes);
    return *ptr ? CRMM_OK : crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "test: no host memory");
}

static crmm_status put_host_failing(void *ptr, crmm_cuda_stream_t stream)
{
    (void)stream;
    free(ptr);
    return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "test: this free reports a failure");
}

static const probe_memory frees_fail = {get_host, put_host_failing, fake_current_device};

/* A call that fails reports its own failure: the cleanup after it (freeing the block it made,
 * destroying the streams it made) may fail too, and that failure, logged, must not replace the
 * call's message and status in crmm_last_error(). */
CRMM_TEST(a_failing_cleanup_leaves_the_calls_own_error)
{
    probe_resource *p = probe_resource_new(&frees_fail, CRMM_RESOURCE_DEVICE_ACCESSIBLE, 0);
    crmm_device_buffer *b, *c = NULL;
    ck_assert_crmm_ok(crmm_device_buffer_create(8, NULL, &p->base, &b));
    scripted.copy_result = cudaErrorInvalidValue;
    crmm_test_log_capture_begin(); /* the cleanup's failures are logged */
    ck_assert_crmm(crmm_device_buffer_to_device("abc", 3, NULL, &p->base, &c), CRMM_ERROR_CUDA);
    ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_CUDA);
    ck_assert_msg(strstr(crmm_last_error(), "cudaMemcpyAsync"), "to_device: %s", crmm_last_error());
    ck_assert_crmm(crmm_device_buffer_copy(b, &c), CRMM_ERROR_CUDA);
    ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_CUDA);
    ck_assert_msg(strstr(crmm_last_error(), "cudaMemcpyAsync"), "copy: %s", crmm_last_error());
    ck_assert_crmm(crmm_device_buffer_resize(b, 64, NULL), CRMM_ERROR_CUDA);
    ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_CUDA);
    ck_assert_msg(strstr(crmm_last_error(), "cudaMemcpyAsync") && strstr(crmm_last_error(), "device_buffer_resize"),
                  "resize: %s", crmm_last_error());
    ck_assert_int_eq(p->live, 1); /* b's block */
    scripted.create_fails_at = scripted.create_calls + 3;
    scripted.destroy_result = cudaErrorLaunchFailure;
    crmm_stream_pool *pool;
    ck_assert_crmm(crmm_stream_pool_create(4, CRMM_STREAM_SYNC_DEFAULT, &pool), CRMM_ERROR_CUDA);
    ck_assert_msg(strstr(crmm_last_error(), "cudaStreamCreateWithFlags") && strstr(crmm_last_error(), "stream 2 of 4"),
                  "stream_pool_create: %s", crmm_last_error());
    free(crmm_test_log_capture_end());
    crmm_device_buffer_destroy(b);
    crmm_resource_release(&p->base);
}

/* Streams, pools and buffers that copy, as the GPU suites check them, on the CPU: the device their
 * calls run on, the streams they use, the contents kept, what a failure leaves. */
CRMM_TEST(a_pool_whose_stream_creation_fails_destroys_the_streams_it_made)
{
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    scripted.create_fails_at = 3;
    crmm_stream_pool *pool = (crmm_stream_pool *)&pool;
    ck_assert_crmm(crmm_stream_pool_create(5, CRMM_STREAM_NON_BLOCKING, &pool), CRMM_ERROR_CUDA);
    ck_assert_ptr_null(pool);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "cudaStreamCreateWithFlags"));
    ck_assert_int_eq(scripted.created, 2);
    ck_assert_int_eq(scripted.destroyed, 2);
    ck_assert_int_eq(fake_current_device(), 1);
}

CRMM_TEST(a_pool_hands_out_its_streams_round_robin_and_destroys_them_on_its_device)
{
    crmm_stream_pool *pool;
    ck_assert_crmm_ok(crmm_stream_pool_create(3, CRMM_STREAM_SYNC_DEFAULT, &pool));
    crmm_stream *s[7];
    for (int i = 0; i < 7; i++)
        ck_assert_crmm_ok(crmm_stream_pool_get_stream(pool, &s[i]));
    ck_assert_ptr_eq(crmm_stream_handle(s[0]), scripted.slots[0]);
    ck_assert_ptr_eq(s[3], s[0]);
    ck_assert_ptr_eq(s[6], s[0]);
    ck_assert_ptr_eq(s[4], s[1]);
    crmm_stream *last;
    ck_assert_crmm_ok(crmm_stream_pool_get_stream_by_id(pool, -1, &last));
    ck_assert_ptr_eq(last, s[2]);
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    crmm_stream_pool_destroy(pool);
    ck_assert_int_eq(scripted.destroyed, 3);
    ck_assert_int_eq(scripted.destroy_device, 0);
    ck_assert_int_eq(fake_current_device(), 1);
}

CRMM_TEST(an_owning_stream_is_destroyed_on_its_device)
{
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    crmm_stream *s;
    ck_assert_crmm_ok(crmm_stream_create(CRMM_STREAM_NON_BLOCKING, &s));
    ck_assert(crmm_stream_is_owning(s));
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    crmm_stream_destroy(s);
    ck_assert_int_eq(scripted.destroyed, 1);
    ck_assert_int_eq(scripted.destroy_device, 1);
    ck_assert_int_eq(fake_current_device(), 0);
    scripted.create_fails_at = scripted.create_calls + 1;
    s = (crmm_stream *)&s;
    ck_assert_crmm(crmm_stream_create(CRMM_STREAM_NON_BLOCKING, &s), CRMM_ERROR_CUDA);
    ck_assert_ptr_null(s);
}

CRMM_TEST(a_resize_keeps_the_contents_and_copies_on_its_stream)
{
    probe_resource *p1 = device_resource(1);
    crmm_stream *s;
    ck_assert_crmm_ok(crmm_stream_create(CRMM_STREAM_NON_BLOCKING, &s));
    crmm_device_buffer *b;
    ck_assert_crmm_ok(crmm_device_buffer_to_device("abcdefgh", 8, NULL, &p1->base, &b));
    ck_assert_int_eq(scripted.copy_device, 1);
    ck_assert_int_eq(fake_current_device(), 0);
    ck_assert_crmm_ok(crmm_device_buffer_resize(b, 100, s));
    ck_assert_ptr_eq(scripted.copy_stream, crmm_stream_handle(s));
    ck_assert_int_eq(scripted.copy_device, 1);
    ck_assert_ptr_eq(p1->free_stream, crmm_stream_handle(s));
    ck_assert_int_eq(memcmp(crmm_device_buffer_ptr(b), "abcdefgh", 8), 0);
    ck_assert_crmm_ok(crmm_device_buffer_resize(b, 4, s));
    ck_assert_crmm_ok(crmm_device_buffer_shrink_to_fit(b, NULL));
    ck_assert_uint_eq(crmm_device_buffer_capacity(b), 4);
    ck_assert_int_eq(memcmp(crmm_device_buffer_ptr(b), "abcd", 4), 0);
    char host[4];
    ck_assert_crmm_ok(crmm_device_buffer_copy_to_host(b, host, 4, s));
    ck_assert_ptr_eq(scripted.copy_stream, crmm_stream_handle(s));
    ck_assert_int_eq(memcmp(host, "abcd", 4), 0);
    crmm_device_buffer *c;
    ck_assert_crmm_ok(crmm_device_buffer_copy_on_stream(b, s, &c));
    ck_assert_int_eq(memcmp(crmm_device_buffer_ptr(c), "abcd", 4), 0);
    crmm_device_buffer_destroy(c);
    crmm_device_buffer_destroy(b);
    ck_assert_int_eq(p1->live, 0);
    crmm_stream_destroy(s);
    ck_assert_int_eq(fake_current_device(), 0);
}

CRMM_TEST(a_failed_copy_leaves_the_buffer_as_it_was)
{
    probe_resource *p1 = device_resource(1);
    crmm_device_buffer *b, *c = (crmm_device_buffer *)&c;
    ck_assert_crmm_ok(crmm_device_buffer_to_device("abcdefgh", 8, NULL, &p1->base, &b));
    void *ptr = crmm_device_buffer_ptr(b);
    long refs = crmm_resource_refcount(&p1->base);
    scripted.copy_result = cudaErrorInvalidValue;
    ck_assert_crmm(crmm_device_buffer_resize(b, 100, NULL), CRMM_ERROR_CUDA);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "cudaMemcpyAsync"));
    ck_assert_ptr_eq(crmm_device_buffer_ptr(b), ptr);
    ck_assert_uint_eq(crmm_device_buffer_size(b), 8);
    ck_assert_uint_eq(crmm_device_buffer_capacity(b), 8);
    ck_assert_int_eq(p1->live, 1);
    ck_assert_crmm(crmm_device_buffer_reserve(b, 100, NULL), CRMM_ERROR_CUDA);
    ck_assert_int_eq(p1->live, 1);
    ck_assert_crmm(crmm_device_buffer_copy(b, &c), CRMM_ERROR_CUDA);
    ck_assert_ptr_null(c);
    ck_assert_crmm(crmm_device_buffer_to_device("x", 1, NULL, &p1->base, &c), CRMM_ERROR_CUDA);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(p1->live, 1);
    ck_assert_int_eq(crmm_resource_refcount(&p1->base), refs);
    ck_assert_int_eq(fake_current_device(), 0);
    ck_assert_int_eq(memcmp(crmm_device_buffer_ptr(b), "abcdefgh", 8), 0);
    crmm_device_buffer_destroy(b);
}

int main(void)
{
    unsetenv("CRMM_CONFIG");
    return crmm_test_main("device_buffer_cuda_calls", 0);
}
