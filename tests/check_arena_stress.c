/* check_arena_stress.c — the arena plugin over host memory (no GPU): eight threads allocating,
 * writing, checking and freeing blocks, some passed to another thread to free,
 * with the default shards, four shards and small shards; and defragments that take superblocks
 * other threads emptied from their working owner. */
#include "build_config.h"
#include <sched.h>
#include "arena_test.h"
#include "block_pattern.h"
#include "churn_support.h"

/* ---- stress ------------------------------------------------------------------------------- */
/* 8 threads of random allocations and frees (sizes mostly small, some up to 2 MiB), each block
 * filled with a pattern and checked before its free; one block in eight is freed by another
 * thread through a mailbox, and thread 0 trims every 1000 steps, taking the other threads' empty
 * superblocks while they work. CRMM_TEST_ARENA_STRESS_STEPS sets the steps per thread. */

typedef struct mailbox {
    pthread_mutex_t lock;
    void *p[64];
    size_t n[64];
    int count;
} mailbox;

typedef struct stress_job {
    crmm_resource *mr;
    mailbox *box;
    int index;
    long steps;
    size_t huge;                   /* > 0: one allocation in 256 asks for up to this, more than a shard */
    size_t shard_size;
    long huge_ok;                  /* huge allocations that succeeded (those may run out of memory) */
    long errors;
    char first_error[256];
} stress_job;

static void stress_error(stress_job *j, const char *what, size_t n)
{
    if (!j->errors++)
        snprintf(j->first_error, sizeof j->first_error, "thread %d: %s of %zu bytes: %s", j->index, what, n,
                 crmm_last_error());
}

static void stress_free(stress_job *j, void *p, size_t n)
{
    if (!block_intact(p, n))
        stress_error(j, "corrupted block", n);
    if (crmm_resource_deallocate(j->mr, p, n, NULL) != CRMM_OK)
        stress_error(j, "free", n);
}

static void *stress_thread(void *arg)
{
    stress_job *j = arg;
    enum { LIVE = 100 };
    void *p[LIVE];
    size_t n[LIVE];
    int k = 0;
    uint64_t seed = 42 + (uint64_t)j->index;
    for (long s = 0; s < j->steps; s++) {
        uint64_t r = crmm_test_rand(&seed);
        if (j->index == 0 && s % 1000 == 999 && crmm_resource_trim(j->mr) != CRMM_OK) /* takes empty superblocks */
            stress_error(j, "trim", 0);
        if (k == 0 || (k < LIVE && (r & 1))) {
            uint64_t kind = crmm_test_rand(&seed) % 100;
            size_t size = kind < 80 ? 1 + crmm_test_rand(&seed) % 2048 : kind < 98 ? 1 + crmm_test_rand(&seed) % (128 * KiB)
                                                                             : 1 + crmm_test_rand(&seed) % (2 * MiB);
            bool huge = j->huge && crmm_test_rand(&seed) % 256 == 0;
            if (huge)
                size = j->shard_size + 1 + crmm_test_rand(&seed) % (j->huge - j->shard_size);
            crmm_status st = crmm_resource_allocate(j->mr, size, NULL, &p[k]);
            if (huge && st == CRMM_ERROR_OUT_OF_MEMORY)
                continue;
            j->huge_ok += huge && st == CRMM_OK;
            if (st != CRMM_OK) {
                stress_error(j, "allocate", size);
                continue;
            }
            if ((uintptr_t)p[k] % 256)
                stress_error(j, "misaligned block", size);
            n[k] = size;
            fill_block(p[k], size);
            k++;
        } else {
            int m = (int)((r >> 16) % (uint64_t)k);
            if ((r >> 40) % 8 == 0) { /* hand it to another thread through the mailbox */
                pthread_mutex_lock(&j->box->lock);
                if (j->box->count < 64) {
                    j->box->p[j->box->count] = p[m];
                    j->box->n[j->box->count++] = n[m];
                    p[m] = NULL;
                }
                pthread_mutex_unlock(&j->box->lock);
            }
            if (p[m])
                stress_free(j, p[m], n[m]);
            p[m] = p[k - 1];
            n[m] = n[k - 1];
            k--;
            void *q = NULL;
            size_t qn = 0;
            if ((r >> 44) % 8 == 0) { /* free one another thread handed over */
                pthread_mutex_lock(&j->box->lock);
                if (j->box->count > 0) {
                    q = j->box->p[--j->box->count];
                    qn = j->box->n[j->box->count];
                }
                pthread_mutex_unlock(&j->box->lock);
            }
            if (q)
                stress_free(j, q, qn);
        }
    }
    while (k > 0) {
        k--;
        stress_free(j, p[k], n[k]);
    }
    return NULL;
}

/* The arenas of 512 MiB the stress runs over, and the share of churn_stress_steps() it runs: 8
 * shards by default (one home each); 4 (two threads share each home shard); 16 of 32 MiB, about
 * what each thread holds, so that superblocks and large blocks spill into the shards next to the
 * home shards. With huge > 0, some requests are larger than a shard (shard_size), up to `huge`:
 * they take pages across shards, and some of them must succeed. */
static const struct { const char *params; int steps_divisor; size_t shard_size, huge; } stress_arenas[] = {
    {"arena_size=512MiB", 1, 0, 0},
    {"arena_size=512MiB shards=4", 2, 0, 0},
    {"arena_size=512MiB shards=16", 2, 32 * MiB, 40 * MiB},
};

CRMM_LOOP_TEST(stress_eight_threads, (int)(sizeof stress_arenas / sizeof stress_arenas[0]))
{
    long steps = churn_stress_steps() / stress_arenas[_i].steps_divisor;
    size_t shard_size = stress_arenas[_i].shard_size, huge = stress_arenas[_i].huge;
    const char *env = getenv("CRMM_TEST_ARENA_STRESS_STEPS");
    if (env && *env)
        steps = atol(env);
    fixture f = make_arena(stress_arenas[_i].params);
    mailbox box = {.lock = PTHREAD_MUTEX_INITIALIZER};
    enum { T = 8 };
    stress_job jobs[T];
    pthread_t t[T];
    for (int i = 0; i < T; i++) {
        jobs[i] = (stress_job){.mr = f.mr, .box = &box, .index = i, .steps = steps, .huge = huge, .shard_size = shard_size};
        ck_assert_int_eq(pthread_create(&t[i], NULL, stress_thread, &jobs[i]), 0);
    }
    long huge_ok = 0;
    for (int i = 0; i < T; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_msg(jobs[i].errors == 0, "%ld errors; first: %s", jobs[i].errors, jobs[i].first_error);
        huge_ok += jobs[i].huge_ok;
    }
    if (huge)
        ck_assert_int_gt(huge_ok, 0);
    stress_job rest = {.mr = f.mr, .index = -1};
    for (int i = 0; i < box.count; i++)
        stress_free(&rest, box.p[i], box.n[i]);
    ck_assert_msg(rest.errors == 0, "%s", rest.first_error);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_IN_USE), 0);
    crmm_arena_stats s = stats(f.mr);
    ck_assert_uint_eq(s.thread_arenas, 0); /* the workers' went when they exited */
    ck_assert_crmm_ok(crmm_resource_trim(f.mr));
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_LARGEST_FREE_BLOCK), 512 * MiB);
    drop_arena(&f);
}

/* ---- defragmenting while owners work ------------------------------------------------------ */
/* An owner thread allocates bursts of blocks of two classes, fills them and hands each burst to a
 * freer thread, which checks and frees them, and waits for that: the owner's superblocks are
 * emptied by another thread while the owner lives, and taken back by defragments (trims, and requests for large blocks
 * failing) that this thread makes all along, whether the owner is between two operations or in
 * one. This thread fills every large block it gets: a superblock taken while a block of it was
 * live would come back as part of one, and the block's check would fail (as it would if the owner
 * went on allocating from a superblock taken from it). What runs when is left to chance; what is
 * asserted holds for every interleaving. */

enum { QUEUED = 256 };

typedef struct burst_queue {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    void *p[QUEUED];
    size_t n[QUEUED];
    int head, tail;                /* ring: tail - head blocks queued */
    int freed;                     /* blocks the freer has freed */
    int done;                      /* the owner has queued its last */
} burst_queue;

typedef struct burst_job {
    crmm_resource *mr;
    burst_queue *q;
    long rounds;
    long errors;
    char first_error[256];
} burst_job;

static void burst_error(burst_job *j, const char *what, size_t n)
{
    if (!j->errors++)
        snprintf(j->first_error, sizeof j->first_error, "%s of %zu bytes: %s", what, n, crmm_last_error());
}

static void *burst_owner(void *arg)
{
    burst_job *j = arg;
    burst_queue *q = j->q;
    uint64_t seed = 7;
    for (long round = 0; round < j->rounds; round++) {
        enum { B = 32 };
        void *p[B];
        size_t n[B];
        int k = 1 + (int)(crmm_test_rand(&seed) % B);
        for (int i = 0; i < k; i++) {
            n[i] = crmm_test_rand(&seed) & 1 ? 1000 : 3000;
            crmm_status st = crmm_resource_allocate(j->mr, n[i], NULL, &p[i]);
            if (st != CRMM_OK) { /* out of memory is fair: the large blocks squeeze the owner */
                if (st != CRMM_ERROR_OUT_OF_MEMORY)
                    burst_error(j, "allocate", n[i]);
                p[i] = NULL;
                continue;
            }
            fill_block(p[i], n[i]);
        }
        int own = (int)(crmm_test_rand(&seed) % 4) == 0; /* now and then it frees a burst itself */
        for (int i = 0; i < k; i++) {
            if (!p[i])
                continue;
            if (own) {
                if (!block_intact(p[i], n[i]))
                    burst_error(j, "owner: corrupted block", n[i]);
                if (crmm_resource_deallocate(j->mr, p[i], n[i], NULL) != CRMM_OK)
                    burst_error(j, "owner: free", n[i]);
                continue;
            }
            pthread_mutex_lock(&q->lock);
            while (q->tail - q->head == QUEUED)
                pthread_cond_wait(&q->cond, &q->lock);
            q->p[q->tail % QUEUED] = p[i];
            q->n[q->tail % QUEUED] = n[i];
            q->tail++;
            pthread_cond_broadcast(&q->cond);
            pthread_mutex_unlock(&q->lock);
        }
        /* until the freer has freed the burst: then the superblocks look empty to a defragment,
         * and the next burst begins at once, perhaps while one is taking them */
        pthread_mutex_lock(&q->lock);
        while (q->freed != q->tail)
            pthread_cond_wait(&q->cond, &q->lock);
        pthread_mutex_unlock(&q->lock);
        if (round % 2)
            sched_yield(); /* a wider window for the defragments, now and then */
    }
    pthread_mutex_lock(&q->lock);
    q->done = 1;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

static void *burst_freer(void *arg)
{
    burst_job *j = arg;
    burst_queue *q = j->q;
    for (;;) {
        pthread_mutex_lock(&q->lock);
        while (q->tail == q->head && !q->done)
            pthread_cond_wait(&q->cond, &q->lock);
        if (q->tail == q->head) {
            pthread_mutex_unlock(&q->lock);
            return NULL;
        }
        void *p = q->p[q->head % QUEUED];
        size_t n = q->n[q->head % QUEUED];
        q->head++;
        pthread_cond_broadcast(&q->cond);
        pthread_mutex_unlock(&q->lock);
        if (!block_intact(p, n))
            burst_error(j, "freer: corrupted block", n);
        if (crmm_resource_deallocate(j->mr, p, n, NULL) != CRMM_OK)
            burst_error(j, "freer: free", n);
        pthread_mutex_lock(&q->lock);
        q->freed++;
        pthread_cond_broadcast(&q->cond);
        pthread_mutex_unlock(&q->lock);
    }
}

CRMM_TEST(defragments_take_superblocks_emptied_under_a_working_owner)
{
    fixture f = make_arena("arena_size=8MiB");
    burst_queue q = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    burst_job owner = {.mr = f.mr, .q = &q, .rounds = churn_stress_steps() / 20};
    burst_job freer = {.mr = f.mr, .q = &q};
    pthread_t to, tf;
    ck_assert_int_eq(pthread_create(&to, NULL, burst_owner, &owner), 0);
    ck_assert_int_eq(pthread_create(&tf, NULL, burst_freer, &freer), 0);
    long larges = 0, trims = 0;
    for (;;) {
        pthread_mutex_lock(&q.lock);
        int done = q.done;
        pthread_mutex_unlock(&q.lock);
        if (done)
            break;
        ck_assert_crmm_ok(crmm_resource_trim(f.mr));
        if (++trims % 64)
            continue;
        void *big;
        size_t n = (size_t)(2 + larges % 4) * MiB; /* at times more than the owner leaves free */
        crmm_status st = crmm_resource_allocate(f.mr, n, NULL, &big);
        if (st == CRMM_ERROR_OUT_OF_MEMORY)
            continue;
        ck_assert_crmm_ok(st);
        memset(big, 0xee, n); /* all of it: any live small block inside is overwritten */
        release(f.mr, big, n);
        larges++;
    }
    ck_assert_int_eq(pthread_join(to, NULL), 0);
    ck_assert_int_eq(pthread_join(tf, NULL), 0);
    ck_assert_msg(owner.errors == 0, "%ld errors; first: %s", owner.errors, owner.first_error);
    ck_assert_msg(freer.errors == 0, "%ld errors; first: %s", freer.errors, freer.first_error);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_crmm_ok(crmm_resource_trim(f.mr));
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_LARGEST_FREE_BLOCK), 8 * MiB);
    drop_arena(&f);
}

int main(void)
{
    return crmm_test_main("arena_stress", 60);
}
