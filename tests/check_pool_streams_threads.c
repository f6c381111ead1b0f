/* check_pool_streams_threads.c — the pool's stream logic on the CPU, against the scripted CUDA of
 * pool_streams_test.h: eight threads on their own streams, a failed synchronization, many streams
 * keeping the books, trim and destroy over blocks of several streams. Loop tests run once per
 * mode (_i 0 = sync, 1 = event). */
#include "build_config.h"
#include "churn_support.h"
#include "pool_streams_test.h"

/* ---- eight threads, one stream each ---------------------------------------------------- */

enum { STRESS_THREADS = 8, STRESS_LIVE = 64, STRESS_STEPS = 4000, STRESS_FREED = 1 << 14 };

/* What the threads freed since, as the test sees it: range, stream, and the number of device
 * synchronizations counted before the free began (so never more than when the pool filed it). */
typedef struct freed_range { uintptr_t addr; size_t size; cudaStream_t stream; int syncs; } freed_range;

static struct {
    pthread_mutex_t lock;
    freed_range freed[STRESS_FREED];
    size_t count;
    int misordered, overlapped;
} stress = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int syncs_now(void) { return __atomic_load_n(&fake_cuda.device_sync, __ATOMIC_SEQ_CST); }

/* A block [a, a+n) was handed out on c's stream: in sync mode (c->user) every range freed on another
 * stream that it overlaps must have been freed before one of the synchronizations counted now. */
static void check_reuse(const churn *c, void *x, size_t n)
{
    uintptr_t a = (uintptr_t)x;
    int syncs = syncs_now();
    pthread_mutex_lock(&stress.lock);
    for (size_t i = 0; i < stress.count;) {
        freed_range *f = &stress.freed[i];
        if (f->addr < a + n && a < f->addr + f->size) {
            if ((intptr_t)c->user == SYNC && f->stream != (cudaStream_t)c->own && syncs <= f->syncs)
                stress.misordered++;
            *f = stress.freed[--stress.count];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&stress.lock);
}

/* x (n bytes) is about to be freed on c's stream: noted with the synchronizations counted so far. */
static void note_free(const churn *c, void *x, size_t n)
{
    freed_range f = {(uintptr_t)x, n, (cudaStream_t)c->own, syncs_now()};
    pthread_mutex_lock(&stress.lock);
    if (stress.count < STRESS_FREED)
        stress.freed[stress.count++] = f;
    pthread_mutex_unlock(&stress.lock);
}

CRMM_LOOP_TEST_IN("pool_streams_threads", eight_threads_on_their_own_streams_lose_nothing, EVENT + 1)
{
    /* one stream per thread (the benchmark's sets C and D): each thread tags its blocks and checks
     * the tags at the free; in sync mode a block freed on another stream is handed out only after a
     * device synchronization; at the end every byte is free again */
    crmm_resource *p = pool_in_mode(_i, "initial_size=2MiB");
    stress.count = 0;
    stress.misordered = stress.overlapped = 0;
    fake_cuda_reset();
    churn w[STRESS_THREADS];
    pthread_t th[STRESS_THREADS];
    for (int k = 0; k < STRESS_THREADS; k++) {
        w[k] = (churn){.mr = p, .own = (crmm_cuda_stream_t)fake_stream_new(k), .seed = 77 + (uint64_t)k, .steps = STRESS_STEPS,
                       .slots = STRESS_LIVE, .size = 48 * KiB, .allocated = check_reuse, .freeing = note_free, .user = (void *)(intptr_t)_i};
        ck_assert_int_eq(pthread_create(&th[k], NULL, churn_thread, &w[k]), 0);
    }
    for (int k = 0; k < STRESS_THREADS; k++) {
        ck_assert_int_eq(pthread_join(th[k], NULL), 0);
        ck_assert_msg(!w[k].why[0], "thread %d: %s", k, w[k].why);
        stress.overlapped += w[k].overlapped;
    }
    ck_assert_int_eq(stress.overlapped, 0);
    ck_assert_int_eq(stress.misordered, 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    crmm_resource_release(p);
}

CRMM_LOOP_TEST_IN("pool_streams", a_failed_synchronization_is_an_error_and_breaks_nothing, EVENT + 1)
{
    /* sync mode synchronizes to move the block; event mode when its record fails */
    crmm_resource *p = pool_in_mode(_i, "initial_size=1MiB maximum_size=1MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    void *a = freed_on(p, MiB, s);
    fake_cuda.device_sync_result = cudaErrorLaunchFailure;
    fake_cuda.record_result = cudaErrorLaunchFailure;
    void *x = (void *)0x1;
    ck_assert_crmm(crmm_resource_allocate(p, MiB, (crmm_cuda_stream_t)t, &x), CRMM_ERROR_CUDA);
    ck_assert_ptr_null(x);
    ck_assert_msg(strstr(crmm_last_error(), "cudaDeviceSynchronize"), "%s", crmm_last_error());
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), MiB); /* the block is still there */
    fake_cuda.device_sync_result = cudaSuccess;
    fake_cuda.record_result = cudaSuccess;
    void *b = alloc_on(p, MiB, t);
    ck_assert_ptr_eq(b, a);
    free_on(p, b, MiB, t);
    crmm_resource_release(p);
}

CRMM_LOOP_TEST_IN("pool_streams", many_streams_keep_the_books, EVENT + 1)
{
    crmm_resource *p = pool_in_mode(_i, "initial_size=256KiB");
    enum { S = 6, LIVE = 50 };
    cudaStream_t st[S];
    for (int k = 0; k < S; k++)
        st[k] = fake_stream_new(k);
    void *live[LIVE] = {0};
    size_t size[LIVE] = {0};
    uint64_t seed = 3, rounded = 0;
    for (int step = 0; step < 20000; step++) {
        int k = (int)(crmm_test_rand(&seed) % LIVE);
        cudaStream_t on = st[(seed >> 8) % S];
        if (live[k]) {
            free_on(p, live[k], size[k], on);
            rounded -= (size[k] + 255) & ~(size_t)255;
            live[k] = NULL;
        } else {
            size[k] = 1 + (size_t)((seed >> 16) % (64 * KiB));
            live[k] = alloc_on(p, size[k], on);
            rounded += (size[k] + 255) & ~(size_t)255;
            memset(live[k], k, size[k] < 64 ? size[k] : 64);
        }
        if (step % 101 == 0) {
            ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE) + rounded, q(p, CRMM_QUERY_BYTES_RESERVED));
            ck_assert_uint_le(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), q(p, CRMM_QUERY_BYTES_FREE));
        }
        if (step == 10000) { /* a stream goes away halfway: its free blocks must not be lost */
            if (_i == EVENT) /* the promise event mode needs */
                ck_assert_crmm_ok(crmm_pool_forget_stream(p, (crmm_cuda_stream_t)st[0]));
            fake_stream_destroy(st[0]);
            st[0] = fake_stream_new(S);
        }
    }
    for (int k = 0; k < LIVE; k++)
        if (live[k])
            free_on(p, live[k], size[k], st[k % S]);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    fake_cuda_reset();
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_int_eq(fake_cuda.device_sync, 1); /* memory goes back upstream only once the device is idle */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    crmm_resource_release(p);
}

CRMM_TEST_IN("pool_streams", trim_joins_blocks_freed_on_different_streams)
{
    crmm_resource *p = device_pool("initial_size=1MiB");
    cudaStream_t s = fake_stream_new(0), t = fake_stream_new(1);
    void *a = alloc_on(p, 512 * KiB, s), *b = alloc_on(p, 512 * KiB, s);
    free_on(p, a, 512 * KiB, s);
    free_on(p, b, 512 * KiB, t);
    ck_assert_uint_eq(q(p, CRMM_QUERY_LARGEST_FREE_BLOCK), 512 * KiB);
    fake_cuda_reset();
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 0);
    /* a trim with nothing to give back does not synchronize */
    void *c = alloc_on(p, 512 * KiB, t);
    fake_cuda_reset();
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_int_eq(fake_cuda.device_sync, 0);
    free_on(p, c, 512 * KiB, t);
    crmm_resource_release(p);
}

CRMM_TEST_IN("pool_streams", destroy_synchronizes_before_returning_memory)
{
    crmm_resource *p = device_pool("initial_size=1MiB");
    fake_cuda_reset();
    crmm_resource_release(p);
    ck_assert_int_eq(fake_cuda.device_sync, 1);
    ck_assert_int_eq(fake_cuda.event_destroy, 0); /* no event was ever made */
}

int main(void)
{
    /* busy threads: give a loaded machine time */
    return CRMM_TEST_MAIN_CASES("pool_streams_threads", {"pool_streams", 0}, {"pool_streams_threads", 120});
}
