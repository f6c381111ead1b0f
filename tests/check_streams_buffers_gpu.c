/* check_streams_buffers_gpu.c — the copy helpers on one GPU: rmm.pylibrmm's docstring examples,
 * and the stream semantics of copies. A gate the test opens (stream_gate_test.h) is queued on the
 * stream first: on a default stream the copy returns after the stream got past it; on another
 * (non-blocking) stream the copy returns while the stream is held, with the data there only after
 * a synchronize. Device buffers,
 * streams and the stream pool: check_device_buffer_gpu.c. */
#include "build_config.h"
#include "streams_buffers_gpu_test.h"

/* ---- rmm's docstring examples --------------------------------------------------------------- */

CRMM_TEST_IN("examples", test_example_copy_device_to_ptr)
{
    /* db = DeviceBuffer(size=5); db2 = DeviceBuffer.to_device(b"abc");
     * copy_device_to_ptr(db2.ptr, db.ptr, db2.size); db.copy_to_host() → [97, 98, 99, 0, 0] */
    crmm_device_buffer *db, *db2;
    ck_assert_crmm_ok(crmm_device_buffer_create(5, NULL, NULL, &db));
    ck_assert_cuda(cudaMemset(crmm_device_buffer_ptr(db), 0, 5)); /* fresh device memory is not zero */
    ck_assert_crmm_ok(crmm_device_buffer_to_device("abc", 3, NULL, NULL, &db2));
    ck_assert_uint_eq(crmm_device_buffer_size(db2), 3);
    ck_assert_crmm_ok(crmm_copy_device_to_ptr(crmm_device_buffer_ptr(db2), crmm_device_buffer_ptr(db),
                                              crmm_device_buffer_size(db2), NULL));
    unsigned char *hb;
    size_t len;
    ck_assert_crmm_ok(crmm_device_buffer_copy_to_host_alloc(db, NULL, (void **)&hb, &len));
    ck_assert_uint_eq(len, 5);
    const unsigned char want[5] = {97, 98, 99, 0, 0};
    ck_assert_mem_eq(hb, want, 5);
    free(hb);
    crmm_device_buffer_destroy(db2);
    crmm_device_buffer_destroy(db);
}

CRMM_TEST_IN("examples", test_example_copy_host_to_ptr)
{
    /* db = DeviceBuffer(size=10); copy_host_to_ptr(b"abc", db.ptr); db.copy_to_host() →
     * [97, 98, 99, 0, 0, 0, 0, 0, 0, 0] */
    crmm_device_buffer *db;
    ck_assert_crmm_ok(crmm_device_buffer_create(10, NULL, NULL, &db));
    ck_assert_cuda(cudaMemset(crmm_device_buffer_ptr(db), 0, 10));
    ck_assert_crmm_ok(crmm_copy_host_to_ptr("abc", 3, crmm_device_buffer_ptr(db), NULL));
    unsigned char hb[10];
    ck_assert_crmm_ok(crmm_device_buffer_copy_to_host(db, hb, sizeof hb, NULL));
    const unsigned char want[10] = {97, 98, 99, 0, 0, 0, 0, 0, 0, 0};
    ck_assert_mem_eq(hb, want, 10);
    crmm_device_buffer_destroy(db);
}

CRMM_TEST_IN("examples", test_example_copy_ptr_to_host)
{
    /* db = to_device(b"abc"); hb = bytearray(db.nbytes); copy_ptr_to_host(db.ptr, hb) → b"abc" */
    crmm_device_buffer *db;
    ck_assert_crmm_ok(crmm_device_buffer_to_device("abc", 3, NULL, NULL, &db));
    char hb[3] = {0, 0, 0};
    ck_assert_crmm_ok(crmm_copy_ptr_to_host(crmm_device_buffer_ptr(db), hb, crmm_device_buffer_size(db), NULL));
    ck_assert_mem_eq(hb, "abc", 3);
    crmm_device_buffer_destroy(db);
}

CRMM_TEST_IN("examples", test_example_to_device)
{
    /* db = to_device(b"abc"); bytes(db) → b"abc" */
    crmm_device_buffer *db;
    ck_assert_crmm_ok(crmm_device_buffer_to_device("abc", 3, NULL, NULL, &db));
    ck_assert_uint_eq(crmm_device_buffer_size(db), 3);
    ck_assert_uint_eq(crmm_device_buffer_capacity(db), 3);
    ck_assert_ptr_eq(crmm_device_buffer_resource(db), crmm_get_current_device_resource());
    int dev = crmm_test_cuda_device();
    ck_assert_int_eq(crmm_device_buffer_device(db), dev);
    void *hb;
    size_t len;
    ck_assert_crmm_ok(crmm_device_buffer_copy_to_host_alloc(db, NULL, &hb, &len));
    ck_assert_uint_eq(len, 3);
    ck_assert_mem_eq(hb, "abc", 3);
    free(hb);
    crmm_device_buffer_destroy(db);
}

/* ---- the copies on each kind of stream -------------------------------------------------------- */

/* The three copies, each of DATA from a source to a zeroed destination. A loop test's _i picks
 * the copy (_i / streams) and the stream (_i % streams). */
enum { HOST_TO_PTR, PTR_TO_HOST, DEVICE_TO_PTR, COPY_KINDS };

typedef struct copy_case {
    int kind;
    void *src, *dst; /* pinned host memory on the host side of the copy, device memory otherwise */
} copy_case;

static copy_case copy_open(int kind)
{
    copy_case c = {.kind = kind};
    if (kind == HOST_TO_PTR) {
        c.src = pinned(NDATA);
        memcpy(c.src, DATA, NDATA);
    } else
        c.src = device_from(DATA, NDATA);
    c.dst = kind == PTR_TO_HOST ? pinned(NDATA) : device_zeros(NDATA);
    return c;
}

static crmm_status copy_run(const copy_case *c, crmm_stream *s)
{
    switch (c->kind) {
    case HOST_TO_PTR: return crmm_copy_host_to_ptr(c->src, NDATA, c->dst, s);
    case PTR_TO_HOST: return crmm_copy_ptr_to_host(c->src, c->dst, NDATA, s);
    default: return crmm_copy_device_to_ptr(c->src, c->dst, NDATA, s);
    }
}

/* What the destination holds now (device memory read on the legacy default stream, which is not
 * ordered behind non-blocking streams). */
static void copy_result(const copy_case *c, char got[NDATA])
{
    if (c->kind == PTR_TO_HOST)
        memcpy(got, c->dst, NDATA);
    else
        read_device(got, c->dst, NDATA);
}

static void copy_close(const copy_case *c)
{
    ck_assert_cuda(c->kind == HOST_TO_PTR ? cudaFreeHost(c->src) : cudaFree(c->src));
    ck_assert_cuda(c->kind == PTR_TO_HOST ? cudaFreeHost(c->dst) : cudaFree(c->dst));
}

/* Default stream number i: NULL, crmm_stream_default(), the per-thread default, a view of NULL. */
static crmm_stream *default_stream(int i, crmm_stream **view)
{
    *view = NULL;
    switch (i) {
    case 0: return NULL;
    case 1: return crmm_stream_default();
    case 2: return crmm_stream_per_thread();
    default:
        ck_assert_crmm_ok(crmm_stream_view(NULL, view));
        return *view;
    }
}
#define N_DEFAULT_STREAMS 4

/* On a default stream a copy is finished at return: the stream was synchronized. */
CRMM_LOOP_TEST_IN("copy_streams", test_default_stream_copy_sync, COPY_KINDS * N_DEFAULT_STREAMS)
{
    crmm_stream *view, *s = default_stream(_i % N_DEFAULT_STREAMS, &view);
    ck_assert(crmm_stream_is_default(s));
    copy_case c = copy_open(_i / N_DEFAULT_STREAMS);
    stream_gate g;
    gate_stream(&g, crmm_stream_handle(s));
    gate_open_soon(&g);
    ck_assert_crmm_ok(copy_run(&c, s));
    gate_expect_passed(&g, "a copy on a default stream");
    if (c.kind == HOST_TO_PTR)
        memset(c.src, '#', NDATA); /* the host buffer may be reused at once */
    char got[NDATA];
    copy_result(&c, got);
    ck_assert_mem_eq(got, DATA, NDATA); /* visible at return */
    copy_close(&c);
    crmm_stream_destroy(view);
}

/* Non-blocking stream number i: an owning stream, a pool's stream, a view of a foreign stream. */
typedef struct test_stream {
    crmm_stream *stream;
    crmm_stream *owned;
    crmm_stream_pool *pool;
    cudaStream_t foreign;
} test_stream;
#define N_OTHER_STREAMS 3

static void other_stream_open(int i, test_stream *t)
{
    memset(t, 0, sizeof *t);
    switch (i) {
    case 0:
        ck_assert_crmm_ok(crmm_stream_create(CRMM_STREAM_NON_BLOCKING, &t->owned));
        t->stream = t->owned;
        break;
    case 1:
        ck_assert_crmm_ok(crmm_stream_pool_create(2, CRMM_STREAM_NON_BLOCKING, &t->pool));
        ck_assert_crmm_ok(crmm_stream_pool_get_stream(t->pool, &t->stream));
        break;
    default:
        ck_assert_cuda(cudaStreamCreateWithFlags(&t->foreign, cudaStreamNonBlocking));
        ck_assert_crmm_ok(crmm_stream_view(t->foreign, &t->owned));
        t->stream = t->owned;
        break;
    }
    ck_assert(!crmm_stream_is_default(t->stream));
}

static void other_stream_close(test_stream *t)
{
    crmm_stream_destroy(t->owned);
    crmm_stream_pool_destroy(t->pool);
    if (t->foreign)
        ck_assert_cuda(cudaStreamDestroy(t->foreign));
}

/* On another stream a copy returns while the stream is still held; the data is there after a
 * synchronize. */
CRMM_LOOP_TEST_IN("copy_streams", test_other_stream_copy_async, COPY_KINDS * N_OTHER_STREAMS)
{
    test_stream t;
    other_stream_open(_i % N_OTHER_STREAMS, &t);
    copy_case c = copy_open(_i / N_OTHER_STREAMS);
    stream_gate g;
    gate_stream(&g, crmm_stream_handle(t.stream));
    ck_assert_crmm_ok(copy_run(&c, t.stream)); /* a copy that waited would not return */
    char got[NDATA], zeros[NDATA] = {0};
    copy_result(&c, got);
    if (crmm_test_async_observable()) {
        ck_assert(gate_holds(&g));
        ck_assert_mem_eq(got, zeros, NDATA); /* not there yet */
    }
    gate_open_soon(&g);
    ck_assert_crmm_ok(crmm_stream_synchronize(t.stream));
    gate_expect_passed(&g, "crmm_stream_synchronize");
    copy_result(&c, got);
    ck_assert_mem_eq(got, DATA, NDATA);
    copy_close(&c);
    other_stream_close(&t);
}

int main(void)
{
    CRMM_TEST_GPU_GATE(1);
    return CRMM_TEST_MAIN_CASES("streams_buffers_gpu", {"examples", CRMM_TEST_GPU_TIMEOUT},
                                {"copy_streams", CRMM_TEST_GPU_TIMEOUT});
}
