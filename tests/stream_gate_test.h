/* stream_gate_test.h — a stream held by the test itself, for the GPU suites that must tell "this
 * call did not wait for the stream" from "this call waited for it" without measuring time.
 *
 * gate_stream queues a host function that returns only once the test opens the gate. A call that
 * must not wait for the stream is made while the gate is closed: that the stream's work is still
 * queued when the call returns is then certain (a call that waits instead never returns, and the
 * case's timeout reports it). For a call that must wait, gate_open_soon starts a thread that opens
 * the gate a little later, and gate_expect_passed checks afterwards that the stream had got past
 * the gate when the call returned: always so for a call that waits, whatever the machine's speed.
 *
 * Where a sanitizer serializes host functions (crmm_test_async_observable() is 0), a closed gate
 * would never open: the gate is open from the start, and a test skips its "not waited" checks. */
#ifndef CRMM_TESTS_STREAM_GATE_TEST_H
#define CRMM_TESTS_STREAM_GATE_TEST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "test_support.h"

typedef struct stream_gate {
    atomic_int open;   /* the host function may return */
    atomic_int passed; /* it has returned: the stream's later work may run */
    pthread_t opener;
    bool opener_started;
} stream_gate;

static inline void CUDART_CB stream_gate_wait(void *arg)
{
    stream_gate *g = arg;
    while (!atomic_load(&g->open))
        usleep(100);
    atomic_store(&g->passed, 1);
}

/* In a test: close g and queue it on s; s's later work waits until the test opens it. */
static inline void gate_stream(stream_gate *g, cudaStream_t s)
{
    atomic_init(&g->open, !crmm_test_async_observable());
    atomic_init(&g->passed, 0);
    g->opener_started = false;
    ck_assert_cuda(cudaLaunchHostFunc(s, stream_gate_wait, g));
}

/* Whether g's stream is still held at it: certain while the gate is closed (where asynchrony is
 * not observable the gate is open, and a test does not ask). */
static inline bool gate_holds(stream_gate *g) { return !atomic_load(&g->passed); }

static inline void *stream_gate_open_later(void *arg)
{
    usleep(200 * 1000); /* long enough that a call that does not wait returns before it */
    atomic_store(&((stream_gate *)arg)->open, 1);
    return NULL;
}

/* In a test, before a call that must wait for g's stream: a thread opens g a little later. */
static inline void gate_open_soon(stream_gate *g)
{
    ck_assert_int_eq(pthread_create(&g->opener, NULL, stream_gate_open_later, g), 0);
    g->opener_started = true;
}

/* In a test: open g now (and wait for a thread started to open it). */
static inline void gate_open(stream_gate *g)
{
    atomic_store(&g->open, 1);
    if (g->opener_started)
        ck_assert_int_eq(pthread_join(g->opener, NULL), 0);
    g->opener_started = false;
}

/* In a test, after a call that must have waited for g's stream (`what` names it): it returned
 * only once the stream had got past g. */
static inline void gate_expect_passed(stream_gate *g, const char *what)
{
    bool passed = atomic_load(&g->passed);
    gate_open(g);
    ck_assert_msg(passed, "%s returned while its stream's earlier work was still queued", what);
}

#endif
