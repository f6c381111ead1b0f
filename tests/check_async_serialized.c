/* check_async_serialized.c — the async plugin against a scripted CUDA (defined here and in
 * fakes/fake_mempool.c, linked -export-dynamic): with serialize_calls (the default) no two
 * threads are ever inside the driver's allocate or free at once; without it they may be; the
 * counters stay exact either way, and a free of a wrong size leaves them at zero; a create whose
 * priming free fails leaves nothing allocated. The fake allocate counts the threads inside; in
 * "meet" mode it waits inside for a second thread (up to `meet` seconds): serialized, the wait
 * times out (2 s) and the count stays 1; unserialized, the second thread comes in within 30 s. */
#include "build_config.h"
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime_api.h>
#include "fakes/fake_mempool.h"
#include "test_support.h"

/* ---- the scripted CUDA ------------------------------------------------------------------- */

static int inside, most_inside;
static int meet; /* seconds an allocation waits inside for a second thread (0: no wait) */

static void enter(void)
{
    int now = __atomic_add_fetch(&inside, 1, __ATOMIC_SEQ_CST);
    int seen = __atomic_load_n(&most_inside, __ATOMIC_SEQ_CST);
    while (now > seen && !__atomic_compare_exchange_n(&most_inside, &seen, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    int limit = __atomic_load_n(&meet, __ATOMIC_SEQ_CST);
    if (limit) {
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            sched_yield();
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while (__atomic_load_n(&most_inside, __ATOMIC_SEQ_CST) < 2 && t.tv_sec - t0.tv_sec < limit);
    } else {
        sched_yield(); /* give another thread the chance to come in */
    }
}

static void leave(void) { __atomic_sub_fetch(&inside, 1, __ATOMIC_SEQ_CST); }

static int blocks_live;    /* allocated and not yet freed */
static int free_async_fails; /* the next cudaFreeAsync calls that fail, freeing nothing */

cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream)
{
    (void)pool, (void)stream;
    enter();
    *ptr = malloc(size ? size : 1);
    leave();
    if (*ptr)
        __atomic_add_fetch(&blocks_live, 1, __ATOMIC_SEQ_CST);
    return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    (void)stream;
    if (free_async_fails > 0) {
        free_async_fails--;
        return cudaErrorInvalidValue;
    }
    enter();
    free(ptr);
    leave();
    __atomic_sub_fetch(&blocks_live, 1, __ATOMIC_SEQ_CST);
    return cudaSuccess;
}
cudaError_t cudaFree(void *ptr)
{
    free(ptr);
    __atomic_sub_fetch(&blocks_live, 1, __ATOMIC_SEQ_CST);
    return cudaSuccess;
}

/* ---- threads ----------------------------------------------------------------------------- */

typedef struct job {
    crmm_resource *mr;
    int rounds;
    crmm_status st;
} job;

static void *allocate_and_free(void *arg)
{
    job *j = arg;
    for (int i = 0; i < j->rounds && j->st == CRMM_OK; i++) {
        void *p = NULL;
        size_t n = 64 + (size_t)i % 4096;
        if ((j->st = crmm_resource_allocate(j->mr, n, NULL, &p)) == CRMM_OK)
            j->st = crmm_resource_deallocate(j->mr, p, n, NULL);
    }
    return NULL;
}

/* `threads` threads of `rounds` allocate+free pairs each on a new async resource made with
 * `params`, allocations waiting up to `meet` seconds inside for another thread: at most `most`
 * threads are seen inside the driver at once. Serialized (the default), one at a time, also when
 * threads call together; without serialize_calls they are let in together (so the check can see
 * two threads inside). */
static const struct { const char *params; int threads, rounds, meet, most; } turns[] = {
    {"", 4, 1000, 0, 1},
    {"serialize_calls=true", 2, 1, 2, 1},
    {"serialize_calls=false", 2, 1, 30, 2},
};

CRMM_LOOP_TEST(threads_in_the_driver_at_once, (int)(sizeof turns / sizeof turns[0]))
{
    int threads = turns[_i].threads, rounds = turns[_i].rounds;
    inside = most_inside = 0;
    meet = turns[_i].meet;
    crmm_resource *mr = crmm_test_create("async", turns[_i].params, NULL);
    pthread_t t[8];
    job jobs[8];
    ck_assert_int_le(threads, 8);
    for (int i = 0; i < threads; i++) {
        jobs[i] = (job){mr, rounds, CRMM_OK};
        ck_assert_int_eq(pthread_create(&t[i], NULL, allocate_and_free, &jobs[i]), 0);
    }
    for (int i = 0; i < threads; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_crmm_ok(jobs[i].st);
    }
    /* the counters saw every call, whichever thread made it */
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS_TOTAL), (uint64_t)threads * (uint64_t)rounds);
    crmm_resource_release(mr);
    ck_assert_int_eq(fake_mempool_pools_live, 0);
    ck_assert_int_eq(most_inside, turns[_i].most);
}

static void *allocate_once(void *arg)
{
    void *p = NULL;
    if (crmm_resource_allocate(arg, 64, NULL, &p) == CRMM_OK)
        crmm_resource_deallocate(arg, p, 64, NULL);
    return NULL;
}

CRMM_TEST(a_forked_child_is_not_stuck_on_the_parents_lock)
{
    /* a thread is inside the driver, holding the resource's lock, when the process forks: the
     * child (where that thread does not exist) must still get through its own call */
    inside = most_inside = 0;
    meet = 3;
    crmm_resource *mr = crmm_test_create("async", "", NULL);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, allocate_once, mr), 0);
    while (__atomic_load_n(&inside, __ATOMIC_SEQ_CST) == 0)
        sched_yield();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        void *p = NULL;
        _exit(crmm_resource_allocate(mr, 64, NULL, &p) == CRMM_OK ? 0 : 1);
    }
    int status; /* a child stuck on the lock is killed after 10 s */
    ck_assert_msg(crmm_test_wait_child(pid, 10, &status), "the child was still in its allocation after 10 s");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: exit status %d", WEXITSTATUS(status));
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    meet = 0;
    crmm_resource_release(mr);
}

/* cudaFreeAsync takes a block whatever size the caller says: a free of more bytes than were
 * allocated leaves the counts at zero instead of wrapping them to ~2^64 (as
 * the other resources that cannot tell a wrong size do). */
CRMM_TEST(a_wrong_size_free_leaves_the_counts_at_zero)
{
    crmm_resource *mr = crmm_test_create("async", "", NULL);
    void *p = NULL, *q = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 100, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 4096, NULL));
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 100, NULL, &q));
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 100);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 1);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, q, 100, NULL));
    crmm_resource_release(mr);
    ck_assert_int_eq(fake_mempool_pools_live, 0);
}

/* A create whose priming free fails fails, and gives the priming block back (synchronously): a
 * block left in the pool would keep the destroyed pool's memory for the life of the process. */
CRMM_TEST(a_failed_priming_free_leaves_nothing_allocated)
{
    blocks_live = 0;
    free_async_fails = 1;
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_resource_create("async", "initial_pool_size=1MiB", NULL, &mr), CRMM_ERROR_CUDA);
    ck_assert_ptr_null(mr);
    ck_assert_msg(strstr(crmm_last_error(), "cudaFreeAsync"), "message: %s", crmm_last_error());
    ck_assert_int_eq(free_async_fails, 0);
    ck_assert_int_eq(blocks_live, 0);
    ck_assert_int_eq(fake_mempool_pools_live, 0);
}

CRMM_TEST(serialize_calls_must_be_a_bool)
{
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_resource_create("async", "serialize_calls=sometimes", NULL, &mr), CRMM_ERROR_CONFIG);
    ck_assert_ptr_null(mr);
    ck_assert_msg(strstr(crmm_last_error(), "serialize_calls"), "message: %s", crmm_last_error());
    ck_assert_int_eq(fake_mempool_pools_live, 0);
}

int main(void)
{
    return crmm_test_main("async_serialized", 60);
}
