/* check_streams_buffers_2gpu.c — buffers, streams and pools of device 1 used and destroyed while device 0
 * is current: each must do its CUDA work with its own device current and give the caller's
 * device back. Needs 2 GPUs (skips otherwise). */
#include "build_config.h"
#include "streams_buffers_gpu_test.h"

CRMM_TEST(test_destroy_while_other_device_current)
{
    ck_assert_cuda(cudaSetDevice(1));
    crmm_stream *s1;
    ck_assert_crmm_ok(crmm_stream_create(CRMM_STREAM_NON_BLOCKING, &s1));
    probe_resource *rec = recording_new(1);
    crmm_device_buffer *buf;
    ck_assert_crmm_ok(crmm_device_buffer_to_device("abc", 3, s1, &rec->base, &buf));
    ck_assert_int_eq(crmm_device_buffer_device(buf), 1);
    ck_assert_crmm_ok(crmm_stream_synchronize(s1));

    ck_assert_cuda(cudaSetDevice(0));
    crmm_device_buffer_destroy(buf);
    ck_assert_int_eq(rec->live, 0);
    ck_assert_int_eq(rec->free_device, 1); /* freed with its own device current */
    ck_assert_ptr_eq(rec->free_stream, crmm_stream_handle(s1)); /* on its last stream */
    ck_assert_int_eq(crmm_test_cuda_device(), 0); /* the caller's device is back */

    ck_assert_cuda(cudaSetDevice(1));
    ck_assert_crmm_ok(crmm_stream_synchronize(s1));
    ck_assert_cuda(cudaSetDevice(0));
    crmm_stream_destroy(s1); /* a stream of device 1, destroyed while device 0 is current */
    ck_assert_int_eq(crmm_test_cuda_device(), 0);
    crmm_resource_release(&rec->base);
}

CRMM_TEST(test_buffer_ops_while_other_device_current)
{
    ck_assert_cuda(cudaSetDevice(1));
    probe_resource *rec = recording_new(1);
    crmm_device_buffer *buf;
    ck_assert_crmm_ok(crmm_device_buffer_to_device("abc", 3, NULL, &rec->base, &buf));
    ck_assert_cuda(cudaSetDevice(0));

    /* Grow while device 0 is current: the new block comes from device 1, contents kept. */
    ck_assert_crmm_ok(crmm_device_buffer_resize(buf, 1 << 20, NULL));
    ck_assert_int_eq(rec->alloc_device, 1);
    ck_assert_int_eq(rec->free_device, 1);
    ck_assert_int_eq(crmm_test_cuda_device(), 0);
    struct cudaPointerAttributes attr;
    ck_assert_cuda(cudaPointerGetAttributes(&attr, crmm_device_buffer_ptr(buf)));
    ck_assert_int_eq(attr.device, 1);
    char got[3];
    ck_assert_crmm(crmm_device_buffer_copy_to_host(buf, got, sizeof got, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm_ok(crmm_device_buffer_resize(buf, 3, NULL));
    ck_assert_crmm_ok(crmm_device_buffer_copy_to_host(buf, got, sizeof got, NULL));
    ck_assert_mem_eq(got, "abc", 3);
    ck_assert_crmm_ok(crmm_device_buffer_copy_from_host(buf, "xy", 2, NULL));
    crmm_device_buffer *copy;
    ck_assert_crmm_ok(crmm_device_buffer_copy(buf, &copy));
    ck_assert_int_eq(crmm_device_buffer_device(copy), 1);
    ck_assert_crmm_ok(crmm_device_buffer_copy_to_host(copy, got, sizeof got, NULL));
    ck_assert_mem_eq(got, "xyc", 3);
    ck_assert_int_eq(crmm_test_cuda_device(), 0);
    crmm_device_buffer_destroy(copy);
    crmm_device_buffer_destroy(buf);
    ck_assert_int_eq(rec->live, 0);
    ck_assert_int_eq(crmm_test_cuda_device(), 0);
    ck_assert_cuda(cudaSetDevice(1));
    ck_assert_cuda(cudaDeviceSynchronize());
    ck_assert_cuda(cudaSetDevice(0));
    crmm_resource_release(&rec->base);
}

CRMM_TEST(test_current_resource_of_device_1)
{
    ck_assert_cuda(cudaSetDevice(1));
    crmm_device_buffer *buf;
    ck_assert_crmm_ok(crmm_device_buffer_to_device("abc", 3, NULL, NULL, &buf));
    ck_assert_int_eq(crmm_device_buffer_device(buf), 1);
    ck_assert_ptr_eq(crmm_device_buffer_resource(buf), crmm_get_per_device_resource(1));
    ck_assert_cuda(cudaSetDevice(0));
    char got[3];
    ck_assert_crmm_ok(crmm_device_buffer_copy_to_host(buf, got, sizeof got, NULL));
    ck_assert_mem_eq(got, "abc", 3);
    crmm_device_buffer_destroy(buf);
    ck_assert_int_eq(crmm_test_cuda_device(), 0);
}

CRMM_TEST(test_pool_of_device_1_destroyed_from_device_0)
{
    ck_assert_cuda(cudaSetDevice(1));
    crmm_stream_pool *pool;
    ck_assert_crmm_ok(crmm_stream_pool_create(4, CRMM_STREAM_SYNC_DEFAULT, &pool));
    crmm_stream *s;
    ck_assert_crmm_ok(crmm_stream_pool_get_stream(pool, &s));
    int dev = -1;
    ck_assert_cuda(cudaStreamGetDevice(crmm_stream_handle(s), &dev));
    ck_assert_int_eq(dev, 1);
    ck_assert_cuda(cudaSetDevice(0));
    crmm_stream_pool_destroy(pool);
    ck_assert_int_eq(crmm_test_cuda_device(), 0);
}

int main(void)
{
    int rc = crmm_test_gpu_gate(2);
    if (rc)
        return rc;
    return crmm_test_main("streams_buffers_2gpu", CRMM_TEST_GPU_TIMEOUT);
}
