/* check_fixed_size_streams.c — the fixed_size plugin's stream order on the CPU, against the
 * scripted CUDA of fakes/fake_stream_cuda.c (linked with -export-dynamic, so the plugin's calls
 * land there; a call passed a destroyed stream's handle fails the test). The upstream is host
 * memory that says it is device memory, and can be told to refuse. The tests state which CUDA
 * calls a free and an allocation cost, and that a block reaches another stream only behind an
 * event recorded after its free, or after a device synchronization. */
#include "build_config.h"
#include <cuda_runtime_api.h>
#include "blocks_test.h"
#include "churn_support.h"
#include "fakes/fake_stream_cuda.h"
#include "fakes/fake_streams.h"

static crmm_resource *device; /* the upstream of the resource `fixed` made last */

/* fixed_size with `params` over a fake device that gives at most max_chunks chunks (0: any). */
static crmm_resource *fixed(const char *params, int max_chunks)
{
    device = fake_device_new(max_chunks);
    crmm_resource *f = NULL;
    ck_assert_crmm_ok(crmm_resource_create("fixed_size", params, device, &f));
    crmm_resource_release(device);
    return f;
}

static void *alloc_on(crmm_resource *f, cudaStream_t s)
{
    void *x = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(f, 1000, (crmm_cuda_stream_t)s, &x));
    ck_assert_ptr_nonnull(x);
    return x;
}

static void free_on(crmm_resource *f, void *x, cudaStream_t s)
{
    ck_assert_crmm_ok(crmm_resource_deallocate(f, x, 1000, (crmm_cuda_stream_t)s));
}

/* Allocate b[0 .. n) on s; free b[from .. to) on s. */
static void alloc_range(crmm_resource *f, void **b, int n, cudaStream_t s)
{
    for (int k = 0; k < n; k++)
        b[k] = alloc_on(f, s);
}

static void free_range(crmm_resource *f, void *const *b, int from, int to, cudaStream_t s)
{
    for (int k = from; k < to; k++)
        free_on(f, b[k], s);
}

/* ---- tests ---------------------------------------------------------------------------------- */

CRMM_TEST_IN("fixed_size_streams", the_same_stream_records_no_event_per_free)
{
    crmm_resource *f = fixed("block_size=1KiB blocks_to_preallocate=128", 0);
    cudaStream_t s = fake_stream_new(0);
    void *keep = alloc_on(f, s);
    fake_cuda_reset();
    for (int k = 0; k < 1000; k++)
        free_on(f, alloc_on(f, s), s);
    ck_assert_int_eq(fake_cuda.record, 0);
    ck_assert_int_eq(fake_cuda.wait + fake_cuda.device_sync, 0);
    ck_assert_int_eq(fake_cuda.get_id, 1000); /* one per allocation (a reused handle is told apart), none per free */
    free_on(f, keep, s);
    crmm_resource_release(f);
}

/* 20 blocks freed on s, in order: the event of s covers the first 16 (recorded with the 16th
 * free), not the last 4. Another stream t then gets one of the 16, behind s's event. */
CRMM_TEST_IN("fixed_size_streams", another_stream_takes_only_blocks_an_event_covers)
{
    crmm_resource *f = fixed("block_size=1KiB blocks_to_preallocate=128", 0);
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    void *b[128];
    alloc_range(f, b, 128, s); /* the whole first chunk */
    fake_cuda_reset();
    free_range(f, b, 0, 20, s);
    ck_assert_int_eq(fake_cuda.record, 1);
    fake_event *ev_s = (fake_event *)NULL;
    for (int i = 0; i < FAKE_EVENTS; i++)
        if (fake_events[i].live && fake_events[i].recorded_on == s)
            ev_s = &fake_events[i];
    ck_assert_ptr_nonnull(ev_s);
    void *x = alloc_on(f, t);
    ck_assert_int_eq(fake_cuda.wait, 1);
    ck_assert_ptr_eq(fake_cuda.last_waiting, t);
    ck_assert_ptr_eq(fake_cuda.last_waited, ev_s);
    int covered = 0;
    for (int k = 0; k < 16; k++)
        covered |= x == b[k];
    ck_assert_msg(covered, "t got a block freed after s's last record");
    ck_assert_int_eq(fake_device_chunks(device), 1);
    ck_assert_int_eq(fake_cuda.device_sync, 0);
    /* s still has its 4 uncovered blocks, at once, with no CUDA call but the ids */
    fake_cuda_reset();
    void *y = alloc_on(f, s);
    ck_assert_ptr_eq(y, b[19]);
    ck_assert_int_eq(fake_cuda.record + fake_cuda.wait + fake_cuda.device_sync, 0);
    free_on(f, y, s);
    free_on(f, x, t);
    free_range(f, b, 20, 128, s);
    crmm_resource_release(f);
}

/* Blocks no event covers, freed on a stream since destroyed: a new chunk is taken while upstream
 * gives one; when it refuses, one device synchronization (which names no stream) makes them
 * usable. The destroyed handle never reaches CUDA again, nor does a new stream that got it. */
CRMM_TEST_IN("fixed_size_streams", uncovered_blocks_are_taken_after_a_device_synchronization)
{
    crmm_resource *f = fixed("block_size=1KiB blocks_to_preallocate=16", 2);
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    void *b[16];
    alloc_range(f, b, 16, s);
    fake_cuda_reset();
    free_on(f, b[0], s); /* 16 blocks a chunk: an event every 2 frees; this one is not covered */
    ck_assert_int_eq(fake_cuda.record, 0);
    fake_stream_destroy(s);
    cudaStream_t s2 = fake_stream_new(0); /* the same handle, another stream */
    ck_assert_ptr_eq(s2, s);
    void *c[16];
    alloc_range(f, c, 16, t); /* the second chunk */
    ck_assert_int_eq(fake_device_chunks(device), 2);
    ck_assert_int_eq(fake_cuda.device_sync, 0);
    void *x = alloc_on(f, s2); /* upstream refuses a third chunk */
    ck_assert_ptr_eq(x, b[0]);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    ck_assert_int_eq(fake_device_chunks(device), 2);
    free_on(f, x, s2);
    free_range(f, b, 1, 16, t);
    free_range(f, c, 0, 16, t);
    crmm_resource_release(f);
}

/* A stream created with a destroyed stream's handle does not reuse its blocks at once. */
CRMM_TEST_IN("fixed_size_streams", a_reused_handle_does_not_take_the_old_streams_blocks)
{
    crmm_resource *f = fixed("block_size=1KiB blocks_to_preallocate=16", 0);
    cudaStream_t s = fake_stream_new(0);
    void *b[16];
    alloc_range(f, b, 16, s);
    free_on(f, b[5], s);
    fake_stream_destroy(s);
    cudaStream_t s2 = fake_stream_new(0);
    fake_cuda_reset();
    void *x = alloc_on(f, s2);
    ck_assert_msg(x != b[5] || fake_cuda.wait + fake_cuda.device_sync > 0, "the new stream got the old one's block unordered");
    free_on(f, x, s2);
    for (int k = 0; k < 16; k++)
        if (k != 5)
            free_on(f, b[k], s2);
    crmm_resource_release(f);
}

/* A stream that got a destroyed stream's handle and frees before it allocates: its frees land on
 * the old stream's list (found by the handle, no CUDA call) until a record is due; then the id
 * shows the handle changed hands, nothing is recorded on the old stream's event, and neither the
 * old stream's blocks nor the new ones reach any stream without a wait. */
CRMM_TEST_IN("fixed_size_streams", frees_on_a_reused_handle_never_cover_the_old_streams_blocks)
{
    crmm_resource *f = fixed("block_size=1KiB blocks_to_preallocate=32", 0); /* an event every 4 frees */
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    void *b[32];
    alloc_range(f, b, 32, t);
    free_on(f, b[0], s); /* s's first free: its id is asked for once */
    fake_stream_destroy(s);
    cudaStream_t s2 = fake_stream_new(0);
    fake_cuda_reset();
    free_on(f, b[1], s2); /* on s's list, uncovered; no CUDA call */
    free_on(f, b[2], s2);
    ck_assert_int_eq(fake_cuda.get_id + fake_cuda.record, 0);
    free_on(f, b[3], s2); /* a record is due: the id says the list is s's, so none is made */
    ck_assert_int_eq(fake_cuda.get_id, 1);
    ck_assert_int_eq(fake_cuda.record, 0);
    free_range(f, b, 4, 8, s2); /* s2's own list from now on, recorded at its 4th block */
    ck_assert_int_eq(fake_cuda.record, 1);
    ck_assert_ptr_eq(fake_cuda.last_waited, NULL);
    /* t and s2 take only covered blocks (b[4..7], behind s2's record) or their own */
    void *x[8];
    for (int k = 0; k < 8; k++) {
        x[k] = alloc_on(f, k % 2 ? t : s2);
        for (int j = 0; j < 4; j++)
            ck_assert_msg(x[k] != b[j], "block %d, uncovered on s's list, was handed out", j);
    }
    ck_assert_int_eq(fake_cuda.device_sync, 0);
    free_range(f, x, 0, 8, t);
    free_range(f, b, 8, 32, t);
    crmm_resource_release(f);
}

/* Short-lived streams that each free a block and are destroyed leave it uncovered on their
 * lists. The resource does not grow for them without bound: once they are as many as a chunk
 * (or half of all blocks), it synchronizes the device and uses them. */
CRMM_TEST_IN("fixed_size_streams", blocks_left_by_destroyed_streams_do_not_make_it_grow)
{
    crmm_resource *f = fixed("block_size=1KiB blocks_to_preallocate=16", 0); /* an event every 2 frees */
    fake_cuda_reset();
    for (int i = 0; i < 40; i++) {
        cudaStream_t s = fake_stream_new(0); /* the same handle, a new stream each time */
        free_on(f, alloc_on(f, s), s);
        fake_stream_destroy(s);
    }
    ck_assert_int_eq(fake_device_chunks(device), 1);
    ck_assert_int_eq(fake_cuda.device_sync, 2); /* at the 17th and the 33rd stream */
    crmm_resource_release(f);
}

/* Destroy gives the chunks back only after the last use of every free block: blocks no event
 * covers need a device synchronization. */
CRMM_TEST_IN("fixed_size_streams", destroy_synchronizes_for_uncovered_blocks)
{
    crmm_resource *f = fixed("block_size=1KiB blocks_to_preallocate=128", 0);
    cudaStream_t s = fake_stream_new(0);
    free_on(f, alloc_on(f, s), s);
    fake_cuda_reset();
    crmm_resource_release(f);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
}

/* With one block a chunk every free records (nothing is left uncovered). */
CRMM_TEST_IN("fixed_size_streams", one_block_chunks_record_every_free)
{
    crmm_resource *f = fixed("block_size=1KiB blocks_to_preallocate=1", 0);
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    void *p = alloc_on(f, s);
    fake_cuda_reset();
    free_on(f, p, s);
    ck_assert_int_eq(fake_cuda.record, 1);
    ck_assert_ptr_eq(alloc_on(f, t), p);
    ck_assert_int_eq(fake_cuda.wait, 1);
    ck_assert_int_eq(fake_device_chunks(device), 1);
    free_on(f, p, t);
    crmm_resource_release(f);
}

/* Eight threads, each on its own stream, allocate and free at random (one free in 8 on a
 * neighbour's stream): no block is handed to two at once, and at the end nothing is in use. */
enum { CHURN_THREADS = 8 };

/* A free whose event record fails has still put the block on its stream's stack (uncovered:
 * usable on that stream, by others after a synchronization), so it succeeded: it says so, a layer
 * above (statistics) counts it freed, the block is reused on its stream, and a second free of it is
 * refused as a double free. Before, the free failed with the record's CUDA error while the block
 * was gone from the live set: the caller kept a block it could never free again. */
CRMM_TEST_IN("fixed_size_streams", a_free_whose_record_fails_still_frees_the_block)
{
    crmm_resource *f = fixed("block_size=1KiB blocks_to_preallocate=8", 0); /* record every free */
    crmm_resource *stats = crmm_test_create("statistics", "", f);
    crmm_resource_release(f);
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    void *x = alloc_on(stats, s);
    fake_cuda_reset();
    fake_cuda.record_result = cudaErrorLaunchFailure;
    crmm_status st = crmm_resource_deallocate(stats, x, 1000, (crmm_cuda_stream_t)s);
    fake_cuda.record_result = cudaSuccess;
    ck_assert_int_eq(fake_cuda.record, 1);
    ck_assert_msg(st == CRMM_OK, "free: %s", crmm_last_error());
    ck_assert_int_eq(fake_cuda.last_error, cudaSuccess); /* the error it caused was cleared */
    ck_assert_uint_eq(crmm_test_query(stats, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_crmm(crmm_resource_deallocate(stats, x, 1000, (crmm_cuda_stream_t)s), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_eq(alloc_on(stats, s), x); /* on its own stream at once */
    free_on(stats, x, s);
    void *y = alloc_on(stats, t);
    free_on(stats, y, t);
    crmm_resource_release(stats);
    fake_stream_destroy(s);
    fake_stream_destroy(t);
}

/* A free that fails leaves the block live, to be freed again: counted in use, not handed out, and
 * its next free succeeds; a free that succeeds is final (a second one is refused). The free is on
 * a stream the resource has not seen, whose event cannot be made (cudaEventCreateWithFlags
 * fails). Before, the block left the live set and the counts first: the failed free lost it. */
CRMM_TEST_IN("fixed_size_streams", a_free_that_fails_leaves_the_block_live)
{
    crmm_resource *f = fixed("block_size=1KiB blocks_to_preallocate=16", 0);
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    void *x = alloc_on(f, s);
    fake_cuda.event_create_result = cudaErrorMemoryAllocation;
    crmm_status st = crmm_resource_deallocate(f, x, 1000, (crmm_cuda_stream_t)t);
    fake_cuda.event_create_result = cudaSuccess;
    ck_assert_crmm(st, CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_BYTES_IN_USE), 1000);
    void *y = alloc_on(f, s);
    ck_assert_ptr_ne(y, x);
    free_on(f, y, s);
    free_on(f, x, t);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_crmm(crmm_resource_deallocate(f, x, 1000, (crmm_cuda_stream_t)t), CRMM_ERROR_INVALID_ARGUMENT);
    crmm_resource_release(f);
    fake_stream_destroy(s);
    fake_stream_destroy(t);
}

CRMM_TEST_IN("fixed_size_streams_threads", eight_threads_on_their_own_streams_never_share_a_block)
{
    crmm_resource *f = fixed("block_size=1KiB blocks_to_preallocate=32", 0);
    cudaStream_t st[CHURN_THREADS];
    for (int t = 0; t < CHURN_THREADS; t++)
        st[t] = fake_stream_new(t);
    churn a[CHURN_THREADS];
    pthread_t th[CHURN_THREADS];
    for (int t = 0; t < CHURN_THREADS; t++) {
        a[t] = (churn){.mr = f, .own = (crmm_cuda_stream_t)st[t], .other = (crmm_cuda_stream_t)st[(t + 1) % CHURN_THREADS],
                       .seed = 42 + (uint64_t)t, .steps = 20000, .slots = 40, .size = 1000, .exact = 1};
        ck_assert_int_eq(pthread_create(&th[t], NULL, churn_thread, &a[t]), 0);
    }
    for (int t = 0; t < CHURN_THREADS; t++) {
        ck_assert_int_eq(pthread_join(th[t], NULL), 0);
        ck_assert_msg(!a[t].why[0] && !a[t].overlapped, "thread %d: %s; %d blocks changed under it", t, a[t].why, a[t].overlapped);
    }
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(crmm_test_query(f, CRMM_QUERY_BYTES_IN_USE), 0);
    crmm_resource_release(f);
}

int main(void)
{
    /* busy threads: give a loaded machine time */
    return CRMM_TEST_MAIN_CASES("fixed_size_streams", {"fixed_size_streams", 0}, {"fixed_size_streams_threads", 120});
}
