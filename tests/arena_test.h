/* arena_test.h — what the arena suites share: an arena over a host (or cuda) resource, its
 * statistics, and threads that hold or free its blocks. */
#ifndef CRMM_TESTS_ARENA_TEST_H
#define CRMM_TESTS_ARENA_TEST_H

#include <unistd.h>
#include <sys/syscall.h>
#include <crmm/arena.h>
#include "blocks_test.h"

/* Whether membarrier(2) offers the private expedited barrier, which lets a defragment take a
 * superblock that other threads emptied from its live owner (arena_thread_cache.c). */
static inline int membarrier_available(void)
{
#ifdef SYS_membarrier
    long cmds = syscall(SYS_membarrier, 0 /* MEMBARRIER_CMD_QUERY */, 0, 0);
    return cmds > 0 && (cmds & 8 /* MEMBARRIER_CMD_PRIVATE_EXPEDITED */);
#else
    return 0;
#endif
}

typedef struct fixture {
    crmm_resource *up, *mr;
} fixture;

/* In a test: an arena made with `params` over a new resource of `upstream_plugin`. */
static inline fixture make_arena_over(const char *upstream_plugin, const char *params)
{
    fixture f;
    ck_assert_crmm_ok(crmm_resource_create(upstream_plugin, "", NULL, &f.up));
    ck_assert_crmm_ok(crmm_resource_create("arena", params, f.up, &f.mr));
    return f;
}

static inline fixture make_arena(const char *params) { return make_arena_over("host", params); }

static inline void drop_arena(fixture *f)
{
    crmm_resource_release(f->mr);
    crmm_resource_release(f->up);
}

static inline crmm_arena_stats stats(crmm_resource *mr)
{
    crmm_arena_stats s;
    ck_assert_crmm_ok(crmm_resource_control(mr, CRMM_ARENA_GET_STATS, &s));
    return s;
}

/* In a test: `bytes` can be allocated in one block (and are freed again). */
static inline void allocate_and_free(crmm_resource *mr, size_t bytes)
{
    release(mr, crmm_test_allocate(mr, bytes), bytes);
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

#define HOLDER(arena, ...) \
    ((holder){.mr = (arena), .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, __VA_ARGS__})

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

/* One block of each of four classes allocated and freed: the thread keeps four empty superblocks. */
static inline void cycle_four_classes(holder *h)
{
    static const size_t sizes[4] = {256, 512, 768, 1024};
    for (int k = 0; k < 4; k++) {
        void *p;
        if (crmm_resource_allocate(h->mr, sizes[k], NULL, &p) != CRMM_OK ||
            crmm_resource_deallocate(h->mr, p, sizes[k], NULL) != CRMM_OK)
            h->last = CRMM_ERROR_STATE;
    }
}

/* Cycles four classes (stage 1), waits, then does it again once its superblocks were taken. */
static inline void *hold_empty_superblocks(void *arg)
{
    holder *h = arg;
    cycle_four_classes(h);
    holder_go(h, 1);
    holder_wait(h, 2);
    cycle_four_classes(h);
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
