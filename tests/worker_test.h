/* worker_test.h — a second thread that makes one allocate or free at a time for a test (on the
 * legacy default stream), so that a test can say which thread makes each call: the pool's
 * per-thread caches count and keep blocks per thread. */
#ifndef CRMM_TESTS_WORKER_TEST_H
#define CRMM_TESTS_WORKER_TEST_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <crmm/resource.h>
#include "test_support.h"

enum { W_IDLE, W_ALLOC, W_FREE, W_EXIT };

typedef struct worker {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool running;
    int op;                        /* what to do next; W_IDLE once done */
    crmm_resource *p;
    size_t n;
    void *ptr;
    crmm_status st;
    char why[512];                 /* crmm_last_error() of the call, which is per thread */
} worker;

static inline void *worker_main(void *arg)
{
    worker *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (w->op == W_IDLE)
            pthread_cond_wait(&w->cv, &w->lock);
        if (w->op == W_EXIT)
            break;
        if (w->op == W_ALLOC)
            w->st = crmm_resource_allocate(w->p, w->n, NULL, &w->ptr);
        else
            w->st = crmm_resource_deallocate(w->p, w->ptr, w->n, NULL);
        snprintf(w->why, sizeof w->why, "%s", w->st == CRMM_OK ? "" : crmm_last_error());
        w->op = W_IDLE;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static inline void worker_start(worker *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cv, NULL);
    ck_assert_int_eq(pthread_create(&w->thread, NULL, worker_main, w), 0);
    w->running = true;
}

/* Run one call on the worker and wait for it. */
static inline crmm_status worker_call(worker *w, int op, crmm_resource *p, void *ptr, size_t n)
{
    pthread_mutex_lock(&w->lock);
    w->op = op;
    w->p = p;
    w->ptr = ptr;
    w->n = n;
    pthread_cond_broadcast(&w->cv);
    while (w->op != W_IDLE)
        pthread_cond_wait(&w->cv, &w->lock);
    crmm_status st = w->st;
    pthread_mutex_unlock(&w->lock);
    return st;
}

static inline void *worker_alloc(worker *w, crmm_resource *p, size_t n)
{
    crmm_status st = worker_call(w, W_ALLOC, p, NULL, n);
    ck_assert_msg(st == CRMM_OK, "worker: allocate %zu: %s", n, w->why);
    ck_assert_ptr_nonnull(w->ptr);
    return w->ptr;
}

static inline void worker_free(worker *w, crmm_resource *p, void *ptr, size_t n)
{
    crmm_status st = worker_call(w, W_FREE, p, ptr, n);
    ck_assert_msg(st == CRMM_OK, "worker: deallocate %p: %s", ptr, w->why);
}

/* End the worker's thread (its caches go back to their pools), unless it has ended. */
static inline void worker_stop(worker *w)
{
    if (!w->running)
        return;
    w->running = false;
    pthread_mutex_lock(&w->lock);
    w->op = W_EXIT;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->lock);
    ck_assert_int_eq(pthread_join(w->thread, NULL), 0);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->lock);
}

#endif
