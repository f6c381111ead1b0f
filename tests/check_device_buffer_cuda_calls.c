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
 * current and gives the caller's device back. */
#include "build_config.h"
#include <stdlib.h>
#include <crmm/crmm.h>
#include <crmm/device_buffer.h>
#include "fakes/fake_stream_cuda.h"
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

int main(void)
{
    unsetenv("CRMM_CONFIG");
    return crmm_test_main("device_buffer_cuda_calls", 0);
}
