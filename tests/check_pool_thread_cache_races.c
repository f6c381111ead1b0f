/* check_pool_thread_cache_races.c — the pool's per-thread caches where two threads' counts and a
 * fork meet, against the scripted CUDA of fake_vmm.h and graphs_test.h:
 *  - the peak of the block bytes stays a figure that was once held when one thread allocates and
 *    another frees (each cache counts the frees of the blocks its thread allocated), and a query
 *    that meets two threads' cache calls halfway through the caches sums one moment's counts;
 *  - an expandable pool out of room finds the free pages other threads' frees left, though the
 *    pool's own counts have not seen those frees yet, and, when its own counts hold more blocks
 *    than it reserves (each block counted again at each allocation, its frees left to a cache's
 *    count), fails without a device synchronization where no free page could be given back;
 *  - a fork while a thread's full cache gives blocks back leaves the child every block, each in
 *    one place (a live map, a cache or a free list);
 *  - a cache whose stream's state cannot be made (malloc failing) keeps its blocks, without a
 *    device synchronization, while another stream is captured. */
#include "build_config.h"

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "graphs_test.h"
#include "worker_test.h"
#include "../plugins/pool/pool_resource.h"

/* Two threads have allocated: the caches are on (thread_cache = on). */
static void caches_on(crmm_resource *p, worker *w)
{
    void *a = alloc_on(p, 256, NULL);
    worker_free(w, p, worker_alloc(w, p, 256), 256);
    free_on(p, a, 256, NULL);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_THREAD_CACHES), 1);
}

/* ---- pools over pools -------------------------------------------------------------------------- */

/* A pool over a pool, both with their caches on: the outer one grows from the inner one holding
 * its own lock, and the thread's cache slots are all taken by the outer pool's caches. The inner
 * pool must not give up one of those for a cache of its own (that takes the outer pool's lock,
 * held by this thread): the growth completes. Rows: a chunked inner pool, an expandable one. */
CRMM_LOOP_TEST_IN("nested", an_outer_pool_grows_from_an_inner_one_with_every_slot_taken, 2)
{
    crmm_resource *inner = pool_in_form(_i ? EXPANDABLE : CHUNKS_SYNC, "thread_cache=on");
    crmm_resource *outer = NULL;
    ck_assert_crmm_ok(crmm_resource_create("pool", "thread_cache=on initial_size=1MiB", inner, &outer));
    worker w;
    worker_start(&w);
    caches_on(inner, &w);
    caches_on(outer, &w);
    worker_stop(&w);
    void *v[POOL_CACHE_SLOTS];
    for (int i = 0; i < POOL_CACHE_SLOTS; i++)
        v[i] = alloc_on(outer, 256, stream_n(i + 1)); /* a cache of the outer pool in every slot */
    void *big = alloc_on(outer, 2 * MiB, stream_n(1)); /* grows from the inner pool */
    free_on(outer, big, 2 * MiB, stream_n(1));
    for (int i = 0; i < POOL_CACHE_SLOTS; i++)
        free_on(outer, v[i], 256, stream_n(i + 1));
    crmm_resource_release(outer);
    crmm_resource_release(inner);
}

/* ---- counts ---------------------------------------------------------------------------------- */

/* One thread allocates 1 MiB and the other frees it, 20 times: at most 1 MiB (and the 256 bytes
 * of the start) was ever held in blocks, and the peak says no more, whatever the pool's own count
 * (which sees every allocation and none of those frees) reached. Rows: chunks, expandable. */
CRMM_LOOP_TEST_IN("counts", the_block_bytes_peak_is_a_figure_that_was_held, 2)
{
    crmm_resource *p = pool_in_form(_i ? EXPANDABLE : CHUNKS_SYNC, "initial_size=8MiB thread_cache=on");
    worker h;
    worker_start(&h);
    caches_on(p, &h);
    for (int i = 0; i < 20; i++)
        worker_free(&h, p, alloc_on(p, MiB, NULL), MiB);
    uint64_t peak = q(p, CRMM_QUERY_POOL_BLOCK_BYTES_PEAK);
    ck_assert_msg(peak <= MiB + 256, "the block bytes' peak says %llu; 1 MiB was the most ever held",
                  (unsigned long long)peak);
    ck_assert_uint_le(peak, q(p, CRMM_QUERY_BYTES_RESERVED));
    worker_stop(&h);
    crmm_resource_release(p);
}

/* An expandable pool of at most 1 MiB, with per-thread caches (row 0) or without, and a worker
 * thread started (h); both threads have allocated and freed once, so that the caches are made. */
static crmm_resource *capped_pool_with_worker(bool caches, worker *h)
{
    crmm_resource *p = pool_in_form(EXPANDABLE, caches ? "maximum_size=1MiB thread_cache=on" : "maximum_size=1MiB thread_cache=off");
    worker_start(h);
    void *a = alloc_on(p, 256, NULL);
    worker_free(h, p, worker_alloc(h, p, 256), 256);
    free_on(p, a, 256, NULL);
    ck_assert_uint_eq(q(p, CRMM_QUERY_POOL_THREAD_CACHES), caches);
    return p;
}

/* An expandable pool at its maximum, half its pages freed by a thread other than the one that
 * allocated them (so the pool's own counts have not seen those frees): a request of two pages
 * finds room by giving free pages back, as it does with caches off (row 1). */
CRMM_LOOP_TEST_IN("counts", out_of_room_sees_the_frees_of_other_threads, 2)
{
    bool caches = _i == 0;
    worker h;
    crmm_resource *p = capped_pool_with_worker(caches, &h);
    void *x[16];
    for (int i = 0; i < 16; i++)
        x[i] = worker_alloc(&h, p, PAGE); /* every page of the maximum */
    for (int i = 0; i < 16; i += 2)
        free_on(p, x[i], PAGE, NULL); /* this thread frees the other's blocks */
    void *y = NULL;
    ck_assert_msg(crmm_resource_allocate(p, 2 * PAGE, NULL, &y) == CRMM_OK,
                  "thread_cache=%s: two pages, with eight free and room for them: %s", caches ? "on" : "off",
                  crmm_last_error());
    free_on(p, y, 2 * PAGE, NULL);
    for (int i = 1; i < 16; i += 2)
        worker_free(&h, p, x[i], PAGE);
    worker_stop(&h);
    crmm_resource_release(p);
}

/* An expandable pool at its maximum with no free page: a request of two pages fails without a
 * device synchronization, an unmap or a change to what the pool holds, and a block freed later
 * serves the next request, as with caches off (row 1). Before that, the worker allocated a page
 * 20 times and this thread freed it each time: the pool's own counts, which see every
 * allocation and none of those frees (the worker's cache counts them, and only the worker's own
 * slow path or a drain of every cache folds them in), hold far more block bytes than the pool
 * reserves. */
CRMM_LOOP_TEST_IN("counts", out_of_room_with_nothing_free_does_not_wait, 2)
{
    bool caches = _i == 0;
    worker h;
    crmm_resource *p = capped_pool_with_worker(caches, &h);
    for (int i = 0; i < 20; i++)
        free_on(p, worker_alloc(&h, p, PAGE), PAGE, NULL); /* this thread frees the other's block */
    void *x[16];
    for (int i = 0; i < 15; i++)
        x[i] = alloc_on(p, PAGE, NULL);
    x[15] = alloc_on(p, PAGE - KiB, NULL); /* every page of the maximum holds a live block */
    uint64_t reserved = q(p, CRMM_QUERY_BYTES_RESERVED), in_use = q(p, CRMM_QUERY_BYTES_IN_USE);
    ck_assert_uint_eq(reserved, MiB);
    if (caches) /* the case under test: the pool's own count passes what it reserves */
        ck_assert_uint_gt((uint64_t)((pool_resource *)p)->core.counts.block_bytes, reserved);
    int syncs = fake_vmm.device_syncs, unmaps = fake_vmm.unmaps;
    void *y = NULL;
    ck_assert_crmm(crmm_resource_allocate(p, 2 * PAGE, NULL, &y), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(y);
    ck_assert_msg(fake_vmm.device_syncs == syncs, "thread_cache=%s: %d device synchronizations with no free page",
                  caches ? "on" : "off", fake_vmm.device_syncs - syncs);
    ck_assert_int_eq(fake_vmm.unmaps, unmaps);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), reserved);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), in_use);
    free_on(p, x[0], PAGE, NULL);
    y = alloc_on(p, PAGE, NULL); /* the page just freed */
    ck_assert_ptr_eq(y, x[0]);
    ck_assert_int_eq(fake_vmm.device_syncs, syncs);
    free_on(p, y, PAGE, NULL);
    for (int i = 1; i < 16; i++)
        free_on(p, x[i], i < 15 ? PAGE : PAGE - KiB, NULL);
    worker_stop(&h);
    crmm_resource_release(p);
}

/* A query or a drain meets two threads' cache calls halfway through the caches. The pool's spin
 * lock yields the processor while it waits (sched_yield, this program's: -export-dynamic): the
 * querying thread, waiting for the second cache's lock, waits there for the test; a thread
 * waiting for a cache's lock says so. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool armed, parked, go, spun;
    pthread_t query, spinner;
} park = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

int sched_yield(void)
{
    pthread_t me = pthread_self();
    pthread_mutex_lock(&park.lock);
    if (park.armed && pthread_equal(me, park.query)) {
        park.parked = true;
        pthread_cond_broadcast(&park.cv);
        while (!park.go)
            pthread_cond_wait(&park.cv, &park.lock);
    } else if (park.armed && pthread_equal(me, park.spinner)) {
        park.spun = true;
        pthread_cond_broadcast(&park.cv);
    }
    pthread_mutex_unlock(&park.lock);
    return (int)syscall(SYS_sched_yield);
}

static void *query_peak(void *arg)
{
    pthread_mutex_lock(&park.lock);
    park.query = pthread_self();
    pthread_mutex_unlock(&park.lock);
    uint64_t v;
    ck_assert_crmm_ok(crmm_resource_query(arg, CRMM_QUERY_ALLOCATIONS_PEAK, &v));
    return NULL;
}

/* Start the worker's free without waiting for it; worker_done says, without waiting, whether it
 * has returned. */
static void worker_free_start(worker *w, crmm_resource *p, void *ptr, size_t n)
{
    pthread_mutex_lock(&w->lock);
    w->op = W_FREE;
    w->p = p;
    w->ptr = ptr;
    w->n = n;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->lock);
}

static bool worker_done(worker *w)
{
    if (pthread_mutex_trylock(&w->lock) != 0)
        return false; /* the worker holds it through each call */
    bool done = w->op == W_IDLE;
    pthread_mutex_unlock(&w->lock);
    return done;
}

/* One block live at any moment: thread a frees x into its cache, then thread b allocates y from
 * its own. A query that read a's cache before the free and b's after the allocation would raise
 * the peaks to a sum that never was (both live); one that runs while a waits to free x reads both
 * as they are (both live then). The querying thread waits, holding the pool's lock, for b's
 * cache's lock; meanwhile a frees (or waits to) and b allocates. (A drain needs no such care:
 * once a cache is drained its counts change only under the pool's lock, which the drain holds.) */
CRMM_TEST_IN("counts", a_peak_is_never_a_sum_of_two_moments)
{
    crmm_resource *p = pool_in_form(CHUNKS_SYNC, "initial_size=1MiB thread_cache=on");
    worker a, b;
    worker_start(&a);
    worker_start(&b);
    caches_on(p, &b);
    void *y = worker_alloc(&b, p, 4 * KiB);
    worker_free(&b, p, y, 4 * KiB); /* b's cache, made first, holds y */
    void *x = worker_alloc(&a, p, 4 * KiB); /* a's cache, made last: first in the pool's list */
    const pool_resource *pr = (const pool_resource *)p;
    pool_thread_cache *first = pr->cache.caches, *second = first->next;
    ck_assert_ptr_nonnull(second);
    ck_assert_ptr_nonnull(pool_block_map_find(&first->live, (uintptr_t)x)); /* x: a's cache's */
    ck_assert_uint_eq(second->count, 1);
    ck_assert_crmm_ok(crmm_pool_reset_peaks(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS_PEAK), 1);

    while (__atomic_exchange_n(&second->lock, 1, __ATOMIC_ACQUIRE)) /* the query waits for it */
        ;
    pthread_mutex_lock(&park.lock);
    park.armed = true;
    park.parked = park.go = park.spun = false;
    park.spinner = a.thread;
    pthread_mutex_unlock(&park.lock);
    pthread_t qt;
    ck_assert_int_eq(pthread_create(&qt, NULL, query_peak, p), 0);
    pthread_mutex_lock(&park.lock);
    while (!park.parked)
        pthread_cond_wait(&park.cv, &park.lock);
    pthread_mutex_unlock(&park.lock);
    spin_unlock(&second->lock);
    worker_free_start(&a, p, x, 4 * KiB);
    bool freed_first = false;
    for (;;) { /* a's free returns, or waits for its cache's lock */
        if ((freed_first = worker_done(&a)))
            break;
        pthread_mutex_lock(&park.lock);
        bool spun = park.spun;
        pthread_mutex_unlock(&park.lock);
        if (spun)
            break;
        syscall(SYS_sched_yield);
    }
    ck_assert_ptr_eq(worker_alloc(&b, p, 4 * KiB), y); /* from b's cache */
    pthread_mutex_lock(&park.lock);
    park.go = true;
    pthread_cond_broadcast(&park.cv);
    pthread_mutex_unlock(&park.lock);
    ck_assert_int_eq(pthread_join(qt, NULL), 0);
    while (!worker_done(&a))
        syscall(SYS_sched_yield);
    pthread_mutex_lock(&park.lock);
    park.armed = false;
    pthread_mutex_unlock(&park.lock);
    ck_assert_int_eq(a.st, CRMM_OK);

    uint64_t most = freed_first ? 1 : 2; /* live at once at any moment */
    ck_assert_msg(q(p, CRMM_QUERY_ALLOCATIONS_PEAK) <= most, "the allocations' peak says %llu; at most %llu were ever live",
                  (unsigned long long)q(p, CRMM_QUERY_ALLOCATIONS_PEAK), (unsigned long long)most);
    ck_assert_uint_le(q(p, CRMM_QUERY_BYTES_IN_USE_PEAK), most * 4 * KiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 1);
    worker_free(&b, p, y, 4 * KiB);
    worker_stop(&a);
    worker_stop(&b);
    crmm_resource_release(p);
}

/* ---- fork ------------------------------------------------------------------------------------ */

/* Every block of pool p out of the free lists is in exactly one live map or cache entry. */
static bool each_block_in_one_place(crmm_resource *r, char *msg, size_t len)
{
    pool_resource *p = (pool_resource *)r;
    for (const pool_chunk *c = p->growth.chunks; c; c = c->next)
        for (const pool_block *b = c->first; b; b = b->phys_next) {
            if (b->owner)
                continue;
            int places = p->core.live.count && pool_block_map_find(&p->core.live, b->addr) == b;
            for (const pool_thread_cache *k = p->cache.caches; k; k = k->next) {
                places += k->live.count && pool_block_map_find(&k->live, b->addr) == b;
                for (int i = 0; i < POOL_CACHE_BLOCKS; i++)
                    places += k->entries[i].block == b;
            }
            if (places != 1) {
                snprintf(msg, len, "block %#lx+%zu is in %d places", (unsigned long)b->addr, b->size, places);
                return false;
            }
        }
    return true;
}

static worker evicting;          /* its cache is full */
static crmm_resource *forked_pool;
static void *blocks[POOL_CACHE_BLOCKS + 1];
static pthread_t evictor;
static int fork_status = -1; /* atomic: the forking thread sets it */

static void *free_into_the_full_cache(void *arg)
{
    (void)arg;
    worker_free(&evicting, forked_pool, blocks[POOL_CACHE_BLOCKS], 256);
    return NULL;
}

static void *fork_and_check_the_child(void *arg)
{
    (void)arg;
    pid_t pid = fork(); /* its prepare handler waits for the pool's lock, as the evicting thread does */
    if (pid == 0) {
        char msg[200];
        bool ok = each_block_in_one_place(forked_pool, msg, sizeof msg);
        if (!ok)
            fprintf(stderr, "the child: %s\n", msg);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    __atomic_store_n(&fork_status, WIFEXITED(status) ? WEXITSTATUS(status) : 2, __ATOMIC_RELEASE);
    return NULL;
}

/* Inside the main thread's growth (cudaMalloc, the pool's lock held): the worker frees into its
 * full cache, then another thread forks; both wait for the pool's lock, in either order. */
static void free_and_fork_while_the_lock_is_held(void)
{
    cuda_malloc_hook = NULL;
    pthread_t forker;
    ck_assert_int_eq(pthread_create(&evictor, NULL, free_into_the_full_cache, NULL), 0);
    usleep(20000);
    ck_assert_int_eq(pthread_create(&forker, NULL, fork_and_check_the_child, NULL), 0);
    pthread_detach(forker);
    usleep(20000);
}

/* A thread's free into its full cache and a fork meet at the pool's lock: whichever comes first,
 * the child gets every block in one place (the blocks leaving the cache are never in none). Each
 * run is one chance for the other order. */
CRMM_LOOP_TEST_IN("fork", a_fork_beside_a_full_cache_s_free_loses_no_block, 10)
{
    forked_pool = pool_in_form(CHUNKS_SYNC, "initial_size=1MiB thread_cache=on");
    __atomic_store_n(&fork_status, -1, __ATOMIC_RELEASE);
    worker_start(&evicting);
    void *keep = alloc_on(forked_pool, 256, NULL);
    caches_on(forked_pool, &evicting);
    for (int i = 0; i <= POOL_CACHE_BLOCKS; i++)
        blocks[i] = worker_alloc(&evicting, forked_pool, 256);
    for (int i = 0; i < POOL_CACHE_BLOCKS; i++)
        worker_free(&evicting, forked_pool, blocks[i], 256); /* the worker's cache is full */
    cuda_malloc_hook = free_and_fork_while_the_lock_is_held;
    void *big = alloc_on(forked_pool, 4 * MiB, NULL); /* grows: cudaMalloc with the pool's lock held */
    ck_assert_int_eq(pthread_join(evictor, NULL), 0);
    while (__atomic_load_n(&fork_status, __ATOMIC_ACQUIRE) < 0)
        usleep(1000);
    ck_assert_msg(__atomic_load_n(&fork_status, __ATOMIC_ACQUIRE) == 0, "run %d: the child found a block lost or doubled", _i);
    free_on(forked_pool, big, 4 * MiB, NULL);
    free_on(forked_pool, keep, 256, NULL);
    worker_stop(&evicting);
    crmm_resource_release(forked_pool);
}

/* ---- malloc failing ---------------------------------------------------------------------------- */

/* How the worker's full cache gives its blocks back in a_cache_s_blocks_go_back_while_malloc_fails. */
enum { BY_A_FREE_INTO_IT, BY_ITS_THREAD_S_EXIT, GIVE_BACK_WAYS };

/* A thread's cached blocks go back to the free list of the cache's stream: its oldest ones when a
 * free finds the cache full, all of them when its thread exits. When that stream's state was
 * dropped meanwhile (it held no free block when another stream missed) and malloc fails, so that
 * none can be made, neither may wait for the device (another stream is being captured: the wait
 * would invalidate that capture, and it fails) nor lose a block. The free is refused, the block
 * staying live (as a free on a stream the pool cannot make a state for is), and works once malloc
 * does; an exiting thread's blocks stay in its cache until a later drain. Every chunk then goes
 * back at trim. */
CRMM_LOOP_TEST_IN("malloc", a_cache_s_blocks_go_back_while_malloc_fails, GIVE_BACK_WAYS)
{
    if (!MALLOC_FAIL_REPLACES)
        return; /* the sanitizers replace malloc: nothing fails */
    crmm_resource *p = pool_in_form(CHUNKS_SYNC, "initial_size=1MiB thread_cache=on");
    worker h;
    worker_start(&h);
    caches_on(p, &h);
    void *b[POOL_CACHE_BLOCKS + 1];
    for (int i = 0; i <= POOL_CACHE_BLOCKS; i++)
        b[i] = worker_alloc(&h, p, 256);
    for (int i = 0; i < POOL_CACHE_BLOCKS; i++)
        worker_free(&h, p, b[i], 256); /* the worker's cache is full */
    /* the rest of the pool, then a miss on another stream: it drops the states that hold no free
     * block, the worker's stream's among them */
    size_t rest = MiB - (POOL_CACHE_BLOCKS + 1) * 256;
    void *all = alloc_on(p, rest, NULL);
    void *big = alloc_on(p, 2 * MiB, stream_n(1));
    void *last = b[POOL_CACHE_BLOCKS];
    if (_i == BY_ITS_THREAD_S_EXIT) {
        free_on(p, last, 256, stream_n(2)); /* into the pool (another thread's block), on a stream of its own */
        last = NULL;
    }
    fake_capture_reset();
    fake_graph *g = fake_capture_begin(stream_n(3), cudaStreamCaptureModeRelaxed);
    crmm_status st = CRMM_OK;
    int joined = 0;
    malloc_fail_arm_from(1, 1); /* no check below until disarmed: Check's own bookkeeping mallocs */
    if (_i == BY_A_FREE_INTO_IT) {
        st = worker_call(&h, W_FREE, p, last, 256);
    } else {
        h.running = false;
        pthread_mutex_lock(&h.lock);
        h.op = W_EXIT;
        pthread_cond_broadcast(&h.cv);
        pthread_mutex_unlock(&h.lock);
        joined = pthread_join(h.thread, NULL);
    }
    malloc_fail_disarm();
    int forbidden = fake_capture_forbidden();
    fake_capture_end(stream_n(3));
    fake_graph_destroy(g);
    ck_assert_int_eq(joined, 0);
    ck_assert_msg(forbidden == 0, "%s called during a capture", fake_capture_last_forbidden());
    if (st != CRMM_OK) {
        ck_assert_int_eq(st, CRMM_ERROR_OUT_OF_MEMORY);
        worker_free(&h, p, last, 256); /* it stayed live: its free works now */
    }
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 2);
    free_on(p, big, 2 * MiB, stream_n(1));
    free_on(p, all, rest, NULL);
    worker_stop(&h);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_FREE), q(p, CRMM_QUERY_BYTES_RESERVED));
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_msg(q(p, CRMM_QUERY_BYTES_RESERVED) == 0, "%llu bytes still held after every block was freed: blocks lost",
                  (unsigned long long)q(p, CRMM_QUERY_BYTES_RESERVED));
    crmm_resource_release(p);
}

int main(void)
{
    return CRMM_TEST_MAIN_CASES("pool_thread_cache_races", {"nested", 0}, {"counts", 0}, {"fork", 0}, {"malloc", 0});
}
