/* arena_test.h — what the arena suites over host memory (check_arena, check_arena_shards,
 * check_arena_stress) share: an arena over a host resource, its statistics, and a free that must
 * succeed. */
#ifndef CRMM_TESTS_ARENA_TEST_H
#define CRMM_TESTS_ARENA_TEST_H

#include <pthread.h>
#include <crmm/arena.h>
#include "test_support.h"

typedef struct fixture {
    crmm_resource *host, *mr;
} fixture;

static inline fixture make_arena(const char *params)
{
    fixture f;
    ck_assert_crmm_ok(crmm_resource_create("host", "", NULL, &f.host));
    ck_assert_crmm_ok(crmm_resource_create("arena", params, f.host, &f.mr));
    return f;
}

static inline void drop_arena(fixture *f)
{
    crmm_resource_release(f->mr);
    crmm_resource_release(f->host);
}

static inline crmm_arena_stats stats(crmm_resource *mr)
{
    crmm_arena_stats s;
    ck_assert_crmm_ok(crmm_resource_control(mr, CRMM_ARENA_GET_STATS, &s));
    return s;
}

static inline void release(crmm_resource *mr, void *p, size_t n)
{
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, n, NULL));
}

/* A thread that holds superblocks of the arena in stages (holder_go, holder_wait). */
typedef struct holder {
    crmm_resource *mr;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stage;
    void **blocks;
    size_t nblocks, size;
    crmm_status last;
    char message[512];
} holder;

static inline void holder_wait(holder *h, int stage)
{
    pthread_mutex_lock(&h->lock);
    while (h->stage < stage)
        pthread_cond_wait(&h->cond, &h->lock);
    pthread_mutex_unlock(&h->lock);
}

static inline void holder_go(holder *h, int stage)
{
    pthread_mutex_lock(&h->lock);
    h->stage = stage;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
}

/* Allocates one block of each of four classes and frees them (stage 1), waits, then does it
 * again once its superblocks were taken (stage 3). */
static inline void *hold_empty_superblocks(void *arg)
{
    holder *h = arg;
    size_t sizes[4] = {256, 512, 768, 1024};
    for (int k = 0; k < 4; k++) {
        void *p;
        if (crmm_resource_allocate(h->mr, sizes[k], NULL, &p) != CRMM_OK ||
            crmm_resource_deallocate(h->mr, p, sizes[k], NULL) != CRMM_OK)
            h->last = CRMM_ERROR_STATE;
    }
    holder_go(h, 1);
    holder_wait(h, 2);
    for (int k = 0; k < 4; k++) {
        void *p;
        if (crmm_resource_allocate(h->mr, sizes[k], NULL, &p) != CRMM_OK ||
            crmm_resource_deallocate(h->mr, p, sizes[k], NULL) != CRMM_OK)
            h->last = CRMM_ERROR_STATE;
    }
    return NULL;
}


/* A thread that frees blocks[from .. to) of `size` bytes, counting the frees refused. */
typedef struct free_job {
    crmm_resource *mr;
    void **blocks;
    size_t from, to, size;
    int errors;
} free_job;

static inline void *free_range(void *arg)
{
    free_job *j = arg;
    for (size_t i = j->from; i < j->to; i++)
        if (crmm_resource_deallocate(j->mr, j->blocks[i], j->size, NULL) != CRMM_OK)
            j->errors++;
    return NULL;
}

#endif
