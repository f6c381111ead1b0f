/* check_pool_thread_cache_auto.c — the pool's per-thread caches over host memory: thread_cache =
 * auto (the default), which switches on when threads wait for the pool's lock, and eight threads
 * handing blocks to each other. To make threads wait for certain, an upstream holds the lock (a
 * growth calls it under the lock) until the test sees a second thread spin; the spin lock's
 * sched_yield is this program's (linked with -export-dynamic), which counts the waits. */
#include "build_config.h"
#include "churn_support.h"
#include "pool_thread_cache_test.h"

/* ---- thread_cache = auto: threads that wait for the pool's lock switch the caches on ------- */

/* An upstream of host memory whose allocate, while `holding`, waits for the test's release; and
 * the waits of the pool's spin lock (sched_yield), counted. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool holding, entered, released;
    int yields;
} gate = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

int sched_yield(void)
{
    pthread_mutex_lock(&gate.lock);
    gate.yields++;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.lock);
    return 0;
}

static crmm_status gated_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    (void)self, (void)stream;
    pthread_mutex_lock(&gate.lock);
    if (gate.holding) {
        gate.entered = true;
        pthread_cond_broadcast(&gate.cv);
        while (!gate.released)
            pthread_cond_wait(&gate.cv, &gate.lock);
    }
    pthread_mutex_unlock(&gate.lock);
    *ptr = aligned_alloc(256, (bytes + 255) & ~(size_t)255);
    return *ptr ? CRMM_OK : crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "gated: no memory");
}

static crmm_status gated_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    (void)self, (void)bytes, (void)stream;
    free(ptr);
    return CRMM_OK;
}

static void gated_destroy(crmm_resource *self) { free(self); }

static const crmm_resource_ops gated_ops = {.allocate = gated_allocate, .deallocate = gated_deallocate,
                                            .destroy = gated_destroy};

typedef struct alloc_arg { crmm_resource *p; size_t n; void *x; crmm_status st; } alloc_arg;

static void *allocate_on_thread(void *arg)
{
    alloc_arg *a = arg;
    a->st = crmm_resource_allocate(a->p, a->n, NULL, &a->x);
    return NULL;
}

/* One thread makes the pool grow and is held in the upstream, with the pool's lock; a second one
 * allocates and spins on the lock until the first is let go. Then the new chunk goes back. */
static void one_wait_for_the_lock(crmm_resource *p)
{
    pthread_mutex_lock(&gate.lock);
    gate.holding = true;
    gate.entered = gate.released = false;
    int yields = gate.yields;
    pthread_mutex_unlock(&gate.lock);
    alloc_arg grower = {p, 2 * MiB, NULL, CRMM_ERROR_STATE}, waiter = {p, 256, NULL, CRMM_ERROR_STATE};
    pthread_t g, w;
    ck_assert_int_eq(pthread_create(&g, NULL, allocate_on_thread, &grower), 0);
    pthread_mutex_lock(&gate.lock);
    while (!gate.entered)
        pthread_cond_wait(&gate.cv, &gate.lock);
    pthread_mutex_unlock(&gate.lock);
    ck_assert_int_eq(pthread_create(&w, NULL, allocate_on_thread, &waiter), 0);
    pthread_mutex_lock(&gate.lock);
    while (gate.yields == yields)
        pthread_cond_wait(&gate.cv, &gate.lock);
    gate.released = true;
    gate.holding = false;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.lock);
    ck_assert_int_eq(pthread_join(g, NULL), 0);
    ck_assert_int_eq(pthread_join(w, NULL), 0);
    ck_assert_crmm_ok(grower.st);
    ck_assert_crmm_ok(waiter.st);
    release(p, grower.x, grower.n);
    release(p, waiter.x, waiter.n);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), MiB); /* the first chunk: the next round grows */
}

/* Whether the caches are on: a block the worker caches is not this thread's next block. */
static bool caches_are_on(crmm_resource *p)
{
    worker w;
    worker_start(&w);
    void *b = worker_caches_a_block(&w, p, 4 * KiB);
    void *c = alloc(p, 4 * KiB);
    release(p, c, 4 * KiB);
    worker_stop(&w);
    return c != b;
}

CRMM_LOOP_TEST_IN("thread_cache", auto_switches_on_when_threads_wait_for_the_lock, 2)
{
    crmm_resource *u = calloc(1, sizeof *u);
    ck_assert_ptr_nonnull(u);
    crmm_resource_init(u, &gated_ops, "gated", CRMM_RESOURCE_HOST_ACCESSIBLE, -1, NULL);
    crmm_resource *p = crmm_test_create("pool", _i ? "initial_size=1MiB thread_cache=off" : "initial_size=1MiB", u);
    crmm_resource_release(u);
    void *pin = alloc(p, 256); /* trim never gives the first chunk back */
    /* just short of the number of waits that switches them on, in one window of locked calls */
    for (int k = 0; k < 63; k++)
        one_wait_for_the_lock(p);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_LOCK_WAITS), 63); /* each round: one call waited */
    for (int k = 0; k < 1024; k++) /* the window ends */
        release(p, alloc(p, 256), 256);
    ck_assert(!caches_are_on(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_THREAD_CACHES), 0);
    for (int k = 0; k < 64; k++)
        one_wait_for_the_lock(p);
    for (int k = 0; k < 1024; k++)
        release(p, alloc(p, 256), 256);
    ck_assert(caches_are_on(p) == !_i); /* thread_cache = off: never */
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_THREAD_CACHES), !_i);
    ck_assert_uint_ge(q(p, CRMM_QUERY_POOL_LOCK_WAITS), 63 + 64);
    release(p, pin, 256);
    crmm_resource_release(p);
}

CRMM_TEST_IN("thread_cache", auto_stays_off_for_threads_that_take_turns)
{
    /* two threads that never call at once (PyTorch's main and autograd threads) keep the pool's
     * order: what one frees, the other gets */
    crmm_resource *p = host_pool("initial_size=1MiB");
    for (int k = 0; k < 3 * 1024; k++)
        release(p, alloc(p, 256), 256);
    ck_assert(!caches_are_on(p));
    ck_assert(!caches_are_on(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_LOCK_WAITS), 0);
    crmm_resource_release(p);
}

/* ---- eight threads, frees across threads ----------------------------------------------- */

enum { H_THREADS = 8, H_LIVE = 48, H_MAILBOX = 64 };

/* Blocks one thread hands to the next to free. */
typedef struct handed { unsigned char *p; size_t n; unsigned char tag; } handed;

static struct {
    pthread_mutex_t lock;
    handed box[H_THREADS][H_MAILBOX];
    int count[H_THREADS];
} mail = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Free a block after checking that nobody wrote into it. */
static void check_and_free(churn *c, unsigned char *x, size_t n, unsigned char tag)
{
    for (size_t i = 0; i < n && !c->why[0]; i += 61)
        if (x[i] != tag)
            snprintf(c->why, sizeof c->why, "byte %zu of a %zu-byte block is %u, not %u", i, n, x[i], tag);
    if (crmm_resource_deallocate(c->mr, x, n, NULL) != CRMM_OK && !c->why[0])
        snprintf(c->why, sizeof c->why, "deallocate: %s", crmm_last_error());
}

/* In place of a free by thread c->user: free what the previous thread handed over, then hand one
 * block in four to the next thread. */
static int hand_over(churn *c, void *x, size_t n, unsigned char tag)
{
    int me = (int)(intptr_t)c->user, next = (me + 1) % H_THREADS, handed_over = 0;
    handed got[H_MAILBOX];
    pthread_mutex_lock(&mail.lock);
    int m = mail.count[me];
    memcpy(got, mail.box[me], (size_t)m * sizeof got[0]);
    mail.count[me] = 0;
    if (crmm_test_rand(&c->seed) % 4 == 0 && mail.count[next] < H_MAILBOX) {
        mail.box[next][mail.count[next]++] = (handed){x, n, tag};
        handed_over = 1;
    }
    pthread_mutex_unlock(&mail.lock);
    for (int k = 0; k < m; k++)
        check_and_free(c, got[k].p, got[k].n, got[k].tag);
    return handed_over;
}

CRMM_TEST_IN("thread_cache_stress", eight_threads_hand_blocks_to_each_other)
{
    /* random sizes, a quarter of the frees made by another thread; every block is filled with its
     * own byte and checked at its free, so two live blocks that overlapped would show */
    crmm_resource *p = host_pool("initial_size=4MiB thread_cache=on");
    churn a[H_THREADS];
    pthread_t th[H_THREADS];
    memset(&mail.count, 0, sizeof mail.count);
    for (int k = 0; k < H_THREADS; k++) {
        a[k] = (churn){.mr = p, .seed = 99 + (uint64_t)k, .steps = 6000, .slots = H_LIVE, .size = 24 * KiB, .big_size = MiB,
                       .big_one_in = 128, .hand_over = hand_over, .user = (void *)(intptr_t)k};
        ck_assert_int_eq(pthread_create(&th[k], NULL, churn_thread, &a[k]), 0);
    }
    uint64_t made = 0;
    for (int k = 0; k < H_THREADS; k++) {
        ck_assert_int_eq(pthread_join(th[k], NULL), 0);
        ck_assert_msg(!a[k].why[0] && !a[k].overlapped, "thread %d: %s; %d blocks overwritten", k, a[k].why, a[k].overlapped);
        made += a[k].allocations;
    }
    churn last = {.mr = p};
    for (int k = 0; k < H_THREADS; k++) /* what was handed to a thread that had finished */
        for (int m = 0; m < mail.count[k]; m++)
            check_and_free(&last, mail.box[k][m].p, mail.box[k][m].n, mail.box[k][m].tag);
    ck_assert_msg(!last.why[0], "%s", last.why);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS_TOTAL), made);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    crmm_resource_release(p);
}

int main(void)
{
    return CRMM_TEST_MAIN_CASES("pool_thread_cache_auto", {"thread_cache", 0}, {"thread_cache_stress", 120});
}
