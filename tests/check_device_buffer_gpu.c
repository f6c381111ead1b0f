/* check_device_buffer_gpu.c — device buffers, streams and the stream pool on one GPU: a buffer's
 * resize, copies and bounds, its frees on its last stream (seen through a recording resource of
 * stream-ordered cudaMallocAsync, streams_buffers_gpu_test.h), owning and foreign streams, and the
 * pool of streams. */
#include "build_config.h"

#include "streams_buffers_gpu_test.h"

/* ---- device buffers ------------------------------------------------------------------------- */

static void assert_buffer_holds(const crmm_device_buffer *buf, const unsigned char *want, size_t n)
{
    ck_assert_uint_ge(crmm_device_buffer_size(buf), n);
    unsigned char *got = malloc(n ? n : 1);
    read_device(got, crmm_device_buffer_ptr(buf), n);
    ck_assert_mem_eq(got, want, n);
    free(got);
}

CRMM_TEST_IN("device_buffer", test_buffer_resize_reserve_shrink_keep_contents)
{
    crmm_resource *mr;
    ck_assert_crmm_ok(crmm_resource_create("cuda", NULL, NULL, &mr));
    unsigned char pattern[256];
    for (int i = 0; i < 256; i++)
        pattern[i] = (unsigned char)(i * 7 + 3);
    crmm_device_buffer *buf;
    ck_assert_crmm_ok(crmm_device_buffer_to_device(pattern, sizeof pattern, NULL, mr, &buf));
    ck_assert_int_eq(crmm_resource_refcount(mr), 2);

    ck_assert_crmm_ok(crmm_device_buffer_resize(buf, 1000, NULL)); /* past capacity: exactly 1000 */
    ck_assert_uint_eq(crmm_device_buffer_size(buf), 1000);
    ck_assert_uint_eq(crmm_device_buffer_capacity(buf), 1000);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 1000); /* the old block was freed */
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 1);
    assert_buffer_holds(buf, pattern, 256);

    void *p = crmm_device_buffer_ptr(buf);
    ck_assert_crmm_ok(crmm_device_buffer_resize(buf, 100, NULL)); /* within capacity */
    ck_assert_ptr_eq(crmm_device_buffer_ptr(buf), p);
    ck_assert_uint_eq(crmm_device_buffer_capacity(buf), 1000);
    assert_buffer_holds(buf, pattern, 100);

    ck_assert_crmm_ok(crmm_device_buffer_reserve(buf, 5000, NULL));
    ck_assert_uint_eq(crmm_device_buffer_capacity(buf), 5000);
    ck_assert_uint_eq(crmm_device_buffer_size(buf), 100);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 5000);
    assert_buffer_holds(buf, pattern, 100);

    ck_assert_crmm_ok(crmm_device_buffer_shrink_to_fit(buf, NULL));
    ck_assert_uint_eq(crmm_device_buffer_capacity(buf), 100);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 100);
    assert_buffer_holds(buf, pattern, 100);

    unsigned char host[100];
    ck_assert_crmm_ok(crmm_device_buffer_copy_to_host(buf, host, sizeof host, NULL));
    ck_assert_mem_eq(host, pattern, 100);

    crmm_device_buffer_destroy(buf);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_int_eq(crmm_resource_refcount(mr), 1);
    crmm_resource_release(mr);
}

CRMM_TEST_IN("device_buffer", test_buffer_deep_copy)
{
    crmm_stream *s;
    ck_assert_crmm_ok(crmm_stream_create(CRMM_STREAM_SYNC_DEFAULT, &s));
    crmm_device_buffer *buf, *copy;
    ck_assert_crmm_ok(crmm_device_buffer_to_device(DATA, NDATA, s, NULL, &buf));
    ck_assert_crmm_ok(crmm_device_buffer_reserve(buf, 4096, s));
    ck_assert_crmm_ok(crmm_device_buffer_copy(buf, &copy));
    ck_assert_crmm_ok(crmm_stream_synchronize(s));
    ck_assert_ptr_ne(crmm_device_buffer_ptr(copy), crmm_device_buffer_ptr(buf));
    ck_assert_uint_eq(crmm_device_buffer_size(copy), NDATA);
    ck_assert_uint_eq(crmm_device_buffer_capacity(copy), NDATA);
    ck_assert_ptr_eq(crmm_device_buffer_resource(copy), crmm_device_buffer_resource(buf));
    ck_assert_ptr_eq(crmm_stream_handle(crmm_device_buffer_stream(copy)), crmm_stream_handle(s));
    assert_buffer_holds(copy, (const unsigned char *)DATA, NDATA);
    crmm_device_buffer *copy2;
    ck_assert_crmm_ok(crmm_device_buffer_copy_on_stream(buf, NULL, &copy2));
    ck_assert(crmm_stream_is_default(crmm_device_buffer_stream(copy2)));
    assert_buffer_holds(copy2, (const unsigned char *)DATA, NDATA);
    /* The copies are independent. */
    ck_assert_crmm_ok(crmm_device_buffer_copy_from_host(buf, "XYZ", 3, NULL));
    assert_buffer_holds(copy, (const unsigned char *)DATA, NDATA);
    crmm_device_buffer_destroy(copy2);
    crmm_device_buffer_destroy(copy);
    crmm_device_buffer_destroy(buf);
    crmm_stream_destroy(s);
}

CRMM_TEST_IN("device_buffer", test_buffer_copy_from_bounds)
{
    crmm_device_buffer *buf;
    ck_assert_crmm_ok(crmm_device_buffer_to_device("0123456789", 10, NULL, NULL, &buf));
    ck_assert_crmm(crmm_device_buffer_copy_from_host(buf, "ABCDEFGHIJK", 11, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    assert_buffer_holds(buf, (const unsigned char *)"0123456789", 10); /* nothing written */
    void *src = device_from("abcdefghijk", 11);
    ck_assert_crmm(crmm_device_buffer_copy_from_device(buf, src, 11, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    assert_buffer_holds(buf, (const unsigned char *)"0123456789", 10);
    ck_assert_crmm_ok(crmm_device_buffer_copy_from_host(buf, "AB", 2, NULL)); /* a prefix */
    assert_buffer_holds(buf, (const unsigned char *)"AB23456789", 10);
    ck_assert_crmm_ok(crmm_device_buffer_copy_from_device(buf, src, 10, NULL)); /* exactly size */
    assert_buffer_holds(buf, (const unsigned char *)"abcdefghij", 10);
    char small[9];
    ck_assert_crmm(crmm_device_buffer_copy_to_host(buf, small, sizeof small, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_cuda(cudaFree(src));
    crmm_device_buffer_destroy(buf);
}

CRMM_TEST_IN("device_buffer", test_buffer_to_device_async_on_stream)
{
    probe_resource *rec = recording_new(crmm_test_cuda_device());
    crmm_stream *s;
    ck_assert_crmm_ok(crmm_stream_create(CRMM_STREAM_NON_BLOCKING, &s));
    char *src = pinned(NDATA);
    memcpy(src, DATA, NDATA);
    stream_gate g;
    gate_stream(&g, crmm_stream_handle(s));
    crmm_device_buffer *buf;
    /* queued, not waited for: a copy that waited would not return */
    ck_assert_crmm_ok(crmm_device_buffer_to_device(src, NDATA, s, &rec->base, &buf));
    ck_assert_int_eq(rec->live, 1);
    if (crmm_test_async_observable())
        ck_assert(gate_holds(&g));
    ck_assert_ptr_eq(crmm_stream_handle(crmm_device_buffer_stream(buf)), crmm_stream_handle(s));
    gate_open_soon(&g);
    ck_assert_crmm_ok(crmm_stream_synchronize(s));
    gate_expect_passed(&g, "crmm_stream_synchronize");
    char got[NDATA];
    ck_assert_crmm_ok(crmm_device_buffer_copy_to_host(buf, got, sizeof got, s));
    ck_assert_crmm_ok(crmm_stream_synchronize(s));
    ck_assert_mem_eq(got, DATA, NDATA);
    crmm_device_buffer_destroy(buf);
    ck_assert_int_eq(rec->live, 0); /* the buffer gave its block back */
    ck_assert_crmm_ok(crmm_stream_synchronize(s));
    ck_assert_cuda(cudaFreeHost(src));
    crmm_stream_destroy(s);
    crmm_resource_release(&rec->base);
}

CRMM_TEST_IN("device_buffer", test_buffer_frees_on_its_last_stream)
{
    probe_resource *rec = recording_new(crmm_test_cuda_device());
    crmm_stream *a, *b;
    ck_assert_crmm_ok(crmm_stream_create(CRMM_STREAM_NON_BLOCKING, &a));
    ck_assert_crmm_ok(crmm_stream_create(CRMM_STREAM_NON_BLOCKING, &b));
    crmm_device_buffer *buf;
    ck_assert_crmm_ok(crmm_device_buffer_create(64, a, &rec->base, &buf));
    ck_assert_crmm_ok(crmm_stream_synchronize(a)); /* the block may now be used on b */
    /* Growing on b frees the old 64-byte block on b, after the copy. */
    ck_assert_crmm_ok(crmm_device_buffer_resize(buf, 128, b));
    ck_assert_uint_eq(rec->free_bytes, 64);
    ck_assert_ptr_eq(rec->free_stream, crmm_stream_handle(b));
    ck_assert_int_eq(rec->live, 1);
    ck_assert_crmm_ok(crmm_stream_synchronize(b)); /* the copy on b is done: a may free */
    ck_assert_crmm_ok(crmm_device_buffer_set_stream(buf, a));
    crmm_device_buffer_destroy(buf);
    ck_assert_uint_eq(rec->free_bytes, 128);
    ck_assert_ptr_eq(rec->free_stream, crmm_stream_handle(a));
    ck_assert_int_eq(rec->live, 0);
    ck_assert_crmm_ok(crmm_stream_synchronize(a));
    ck_assert_crmm_ok(crmm_stream_synchronize(b));
    crmm_stream_destroy(a);
    crmm_stream_destroy(b);
    crmm_resource_release(&rec->base);
}

CRMM_TEST_IN("device_buffer", test_buffer_bad_input)
{
    crmm_device_buffer *buf;
    ck_assert_crmm_ok(crmm_device_buffer_create(8, NULL, NULL, &buf));
    ck_assert_crmm(crmm_device_buffer_copy_to_host(buf, NULL, 8, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_device_buffer_copy_from_host(buf, NULL, 1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_device_buffer_copy_from_device(buf, NULL, 1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_copy_device_to_ptr(NULL, crmm_device_buffer_ptr(buf), 8, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_copy_ptr_to_host(crmm_device_buffer_ptr(buf), NULL, 8, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    /* A 1 PiB resize fails as out of memory and leaves the buffer as it was. */
    void *p = crmm_device_buffer_ptr(buf);
    ck_assert_crmm(crmm_device_buffer_resize(buf, (size_t)1 << 50, NULL), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_eq(crmm_device_buffer_ptr(buf), p);
    ck_assert_uint_eq(crmm_device_buffer_size(buf), 8);
    ck_assert_uint_eq(crmm_device_buffer_capacity(buf), 8);
    crmm_device_buffer *big = (crmm_device_buffer *)&big;
    ck_assert_crmm(crmm_device_buffer_create((size_t)1 << 50, NULL, NULL, &big), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(big);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "device_buffer_create"));
    crmm_device_buffer_destroy(buf);
}

/* ---- streams -------------------------------------------------------------------------------- */

CRMM_TEST_IN("streams", test_stream_owning)
{
    crmm_stream_flags flags[2] = {CRMM_STREAM_SYNC_DEFAULT, CRMM_STREAM_NON_BLOCKING};
    unsigned want[2] = {cudaStreamDefault, cudaStreamNonBlocking};
    for (int i = 0; i < 2; i++) {
        crmm_stream *s;
        ck_assert_crmm_ok(crmm_stream_create(flags[i], &s));
        ck_assert(crmm_stream_is_owning(s));
        ck_assert(!crmm_stream_is_default(s));
        ck_assert_ptr_nonnull(crmm_stream_handle(s));
        unsigned got;
        ck_assert_cuda(cudaStreamGetFlags(crmm_stream_handle(s), &got));
        ck_assert_uint_eq(got, want[i]);
        stream_gate g;
        gate_stream(&g, crmm_stream_handle(s));
        gate_open_soon(&g);
        ck_assert_crmm_ok(crmm_stream_synchronize(s));
        gate_expect_passed(&g, "crmm_stream_synchronize");
        crmm_stream_destroy(s);
    }
    ck_assert_crmm_ok(crmm_stream_synchronize(NULL));
    ck_assert_crmm_ok(crmm_stream_synchronize(crmm_stream_default()));
    ck_assert_crmm_ok(crmm_stream_synchronize(crmm_stream_per_thread()));
}

CRMM_TEST_IN("streams", test_stream_view_of_foreign_stream)
{
    cudaStream_t h;
    ck_assert_cuda(cudaStreamCreate(&h));
    crmm_stream *v;
    ck_assert_crmm_ok(crmm_stream_view(h, &v));
    ck_assert_ptr_eq(crmm_stream_handle(v), h);
    ck_assert(!crmm_stream_is_default(v));
    ck_assert(!crmm_stream_is_owning(v));
    void *p = device_zeros(64);
    ck_assert_crmm_ok(crmm_copy_host_to_ptr(DATA, NDATA, p, v));
    ck_assert_crmm_ok(crmm_stream_synchronize(v));
    crmm_stream_destroy(v);
    /* The caller's stream still works. */
    ck_assert_cuda(cudaStreamQuery(h));
    ck_assert_cuda(cudaMemsetAsync(p, 'z', 4, h));
    ck_assert_cuda(cudaStreamSynchronize(h));
    char got[NDATA];
    read_device(got, p, NDATA);
    ck_assert_mem_eq(got, "zzzz", 4);
    ck_assert_mem_eq(got + 4, DATA + 4, NDATA - 4);
    ck_assert_cuda(cudaFree(p));
    ck_assert_cuda(cudaStreamDestroy(h));
}

/* ---- stream pool ---------------------------------------------------------------------------- */

CRMM_TEST_IN("streams", test_pool_round_robin_and_by_id)
{
    crmm_stream_pool *pool;
    ck_assert_crmm_ok(crmm_stream_pool_create(4, CRMM_STREAM_SYNC_DEFAULT, &pool));
    ck_assert_uint_eq(crmm_stream_pool_get_pool_size(pool), 4);
    crmm_stream *by_id[4];
    for (int i = 0; i < 4; i++) {
        ck_assert_crmm_ok(crmm_stream_pool_get_stream_by_id(pool, i, &by_id[i]));
        ck_assert(!crmm_stream_is_default(by_id[i]));
        ck_assert(!crmm_stream_is_owning(by_id[i]));
        unsigned flags;
        ck_assert_cuda(cudaStreamGetFlags(crmm_stream_handle(by_id[i]), &flags));
        ck_assert_uint_eq(flags, cudaStreamDefault);
        for (int j = 0; j < i; j++)
            ck_assert_ptr_ne(crmm_stream_handle(by_id[i]), crmm_stream_handle(by_id[j]));
    }
    for (int n = 0; n < 12; n++) {
        crmm_stream *s;
        ck_assert_crmm_ok(crmm_stream_pool_get_stream(pool, &s));
        ck_assert_ptr_eq(s, by_id[n % 4]);
    }
    const long long ids[] = {4, 5, 7, 400, -1, -2, -4, -5, LLONG_MAX, LLONG_MIN, LLONG_MIN + 1};
    const int want[] = {0, 1, 3, 0, 3, 2, 0, 3, 3, 0, 1};
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
        crmm_stream *s;
        ck_assert_crmm_ok(crmm_stream_pool_get_stream_by_id(pool, ids[k], &s));
        ck_assert_msg(s == by_id[want[k]], "id %lld gives stream %d", ids[k], want[k]);
    }
    /* A pool stream is a view: destroying it is a no-op, the stream keeps working. */
    crmm_stream_destroy(by_id[2]);
    ck_assert_crmm_ok(crmm_stream_synchronize(by_id[2]));
    ck_assert_crmm(crmm_stream_pool_get_stream(pool, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_stream_pool_get_stream_by_id(pool, 1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    crmm_stream_pool_destroy(pool);
}

CRMM_TEST_IN("streams", test_pool_default_size_and_flags)
{
    crmm_stream_pool *pool;
    ck_assert_crmm_ok(crmm_stream_pool_create(CRMM_STREAM_POOL_DEFAULT_SIZE, CRMM_STREAM_NON_BLOCKING, &pool));
    ck_assert_uint_eq(crmm_stream_pool_get_pool_size(pool), 16);
    void *p;
    ck_assert_cuda(cudaMalloc(&p, 16));
    for (int i = 0; i < 16; i++) {
        crmm_stream *s;
        ck_assert_crmm_ok(crmm_stream_pool_get_stream(pool, &s));
        unsigned flags;
        ck_assert_cuda(cudaStreamGetFlags(crmm_stream_handle(s), &flags));
        ck_assert_uint_eq(flags, cudaStreamNonBlocking);
        ck_assert_cuda(cudaMemsetAsync((char *)p + i, i, 1, crmm_stream_handle(s)));
        ck_assert_crmm_ok(crmm_stream_synchronize(s));
    }
    unsigned char got[16];
    read_device(got, p, 16);
    for (int i = 0; i < 16; i++)
        ck_assert_uint_eq(got[i], i);
    ck_assert_cuda(cudaFree(p));
    crmm_stream_pool_destroy(pool);
}

#define POOL_THREADS 8
#define CALLS_PER_THREAD 1000
#define THREADED_POOL_SIZE 4

typedef struct pool_worker {
    crmm_stream_pool *pool;
    crmm_stream *got[CALLS_PER_THREAD];
    int errors;
} pool_worker;

static void *pool_worker_run(void *arg)
{
    pool_worker *w = arg;
    for (int i = 0; i < CALLS_PER_THREAD; i++)
        if (crmm_stream_pool_get_stream(w->pool, &w->got[i]) != CRMM_OK)
            w->errors++;
    return NULL;
}

CRMM_TEST_IN("streams", test_pool_get_stream_from_threads)
{
    crmm_stream_pool *pool;
    ck_assert_crmm_ok(crmm_stream_pool_create(THREADED_POOL_SIZE, CRMM_STREAM_SYNC_DEFAULT, &pool));
    crmm_stream *streams[THREADED_POOL_SIZE];
    for (int i = 0; i < THREADED_POOL_SIZE; i++)
        ck_assert_crmm_ok(crmm_stream_pool_get_stream_by_id(pool, i, &streams[i]));
    static pool_worker workers[POOL_THREADS];
    pthread_t threads[POOL_THREADS];
    for (int t = 0; t < POOL_THREADS; t++) {
        workers[t].pool = pool;
        workers[t].errors = 0;
        ck_assert_int_eq(pthread_create(&threads[t], NULL, pool_worker_run, &workers[t]), 0);
    }
    for (int t = 0; t < POOL_THREADS; t++)
        ck_assert_int_eq(pthread_join(threads[t], NULL), 0);
    int count[THREADED_POOL_SIZE] = {0};
    for (int t = 0; t < POOL_THREADS; t++) {
        ck_assert_int_eq(workers[t].errors, 0);
        for (int i = 0; i < CALLS_PER_THREAD; i++) {
            int k = 0;
            while (k < THREADED_POOL_SIZE && workers[t].got[i] != streams[k])
                k++;
            ck_assert_msg(k < THREADED_POOL_SIZE, "get_stream returned a stream not in the pool");
            count[k]++;
        }
    }
    for (int k = 0; k < THREADED_POOL_SIZE; k++)
        ck_assert_int_eq(count[k], POOL_THREADS * CALLS_PER_THREAD / THREADED_POOL_SIZE);
    crmm_stream_pool_destroy(pool);
}

int main(void)
{
    CRMM_TEST_GPU_GATE(1);
    return CRMM_TEST_MAIN_CASES("device_buffer_gpu", {"device_buffer", CRMM_TEST_GPU_TIMEOUT},
                                {"streams", CRMM_TEST_GPU_TIMEOUT});
}
