/* check_arena_stress.c — the arena plugin over host memory (no GPU): eight threads allocating,
 * writing, checking and freeing blocks, some passed to another thread to free,
 * with the default shards, four shards and small shards. */
#include "build_config.h"
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

int main(void)
{
    return crmm_test_main("arena_stress", 60);
}
