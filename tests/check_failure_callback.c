/* check_failure_callback.c — the failure_callback adaptor over host memory and the test-only
 * `budget` plugin (which runs out of memory on purpose): a callback that frees memory and asks
 * for a retry, one that gives up after N calls (RMM's tests), no callback, removing it, finding
 * the layer under another adaptor, which failures call it (retry_on), and bad calls. */
#include "build_config.h"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <crmm/failure_callback.h>
#include "conformance.h"
#include "test_support.h"

static const crmm_test_chain chains[] = {
    {"failure_callback_over_host", "[resource.h]\nplugin = host\n[resource.f]\nplugin = failure_callback\nupstream = h\n", "f", 0, 0},
};

/* budget (limit) + failure_callback (params) over it */
static void make(const char *limit, const char *params, crmm_resource **budget, crmm_resource **fc)
{
    char b[64];
    snprintf(b, sizeof b, "limit=%s", limit);
    ck_assert_crmm_ok(crmm_resource_create("budget", b, NULL, budget));
    ck_assert_crmm_ok(crmm_resource_create("failure_callback", params, *budget, fc));
}

/* A cache of blocks the callback may free to make room. */
typedef struct cache {
    crmm_resource *mr;
    void *blocks[8];
    size_t size;
    int held, calls;
    size_t last_request;
} cache;

static bool free_one_and_retry(size_t bytes, void *arg)
{
    cache *c = arg;
    c->calls++;
    c->last_request = bytes;
    if (c->held == 0)
        return false;
    c->held--;
    return crmm_resource_deallocate(c->mr, c->blocks[c->held], c->size, NULL) == CRMM_OK;
}

CRMM_TEST_IN("failure_callback", retry_after_freeing)
{
    crmm_resource *b, *fc;
    make("1MiB", "", &b, &fc);
    cache c = {.mr = fc, .size = 256 << 10};
    for (; c.held < 4; c.held++)
        ck_assert_crmm_ok(crmm_resource_allocate(fc, c.size, NULL, &c.blocks[c.held]));
    ck_assert_crmm_ok(crmm_failure_callback_set(fc, free_one_and_retry, &c));
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(fc, 512 << 10, NULL, &p)); /* needs two blocks freed */
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(c.calls, 2);
    ck_assert_int_eq(c.held, 2);
    ck_assert_uint_eq(c.last_request, 512 << 10);
    ck_assert_crmm_ok(crmm_resource_deallocate(fc, p, 512 << 10, NULL));
    while (c.held > 0)
        ck_assert_crmm_ok(crmm_resource_deallocate(fc, c.blocks[--c.held], c.size, NULL));
    uint64_t used;
    ck_assert_crmm_ok(crmm_resource_query(fc, CRMM_QUERY_BYTES_IN_USE, &used));
    ck_assert_uint_eq(used, 0);
    crmm_test_release(fc, b);
}

typedef struct counter { int calls, allow; } counter;

static bool retry_n_times(size_t bytes, void *arg)
{
    (void)bytes;
    counter *k = arg;
    return ++k->calls <= k->allow;
}

CRMM_TEST_IN("failure_callback", gives_up_when_the_callback_says_no)
{
    crmm_resource *b, *fc;
    make("1KiB", "", &b, &fc);
    counter k = {0, 3};
    ck_assert_crmm_ok(crmm_failure_callback_set(fc, retry_n_times, &k));
    void *p = (void *)0x1;
    crmm_clear_error();
    ck_assert_crmm(crmm_resource_allocate(fc, 4096, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(k.calls, 4); /* three retries, then no */
    const char *msg = crmm_last_error();
    ck_assert_msg(strstr(msg, "out of memory") && strstr(msg, "budget") && strstr(msg, "3 retries"), "message: %s", msg);
    /* RMM's RetryAllocationOnce: one retry, then the failure */
    counter once = {0, 1};
    ck_assert_crmm_ok(crmm_failure_callback_set(fc, retry_n_times, &once));
    ck_assert_crmm(crmm_resource_allocate(fc, 4096, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(once.calls, 2);
    /* what fits still works without calling anyone */
    ck_assert_crmm_ok(crmm_resource_allocate(fc, 512, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(fc, p, 512, NULL));
    ck_assert_int_eq(once.calls, 2);
    crmm_test_release(fc, b);
}

CRMM_TEST_IN("failure_callback", no_callback_passes_the_failure_through)
{
    crmm_resource *b, *fc;
    make("1KiB", "", &b, &fc);
    void *p = (void *)0x1;
    crmm_clear_error();
    ck_assert_crmm(crmm_resource_allocate(fc, 4096, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(crmm_last_error(), "budget"), "message: %s", crmm_last_error());
    /* set, then removed: not called any more */
    counter k = {0, 100};
    ck_assert_crmm_ok(crmm_failure_callback_set(fc, retry_n_times, &k));
    ck_assert_crmm_ok(crmm_failure_callback_set(fc, NULL, NULL));
    ck_assert_crmm(crmm_resource_allocate(fc, 4096, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(k.calls, 0);
    crmm_test_release(fc, b);
}

CRMM_TEST_IN("failure_callback", set_through_another_adaptor)
{
    crmm_resource *b, *fc, *top;
    make("1KiB", "", &b, &fc);
    ck_assert_crmm_ok(crmm_resource_create("aligned", "alignment=4KiB", fc, &top));
    counter k = {0, 0};
    ck_assert_crmm_ok(crmm_failure_callback_set(top, retry_n_times, &k)); /* finds the layer below */
    void *p;
    ck_assert_crmm(crmm_resource_allocate(top, 100, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(k.calls, 1);
    crmm_test_release(top, fc, b);
}

/* Which failures of the upstream call the callback: by default out of memory only (RMM's
 * default); with retry_on = bad_alloc every failed allocation (RMM's rmm::bad_alloc): also
 * CRMM_ERROR_BAD_ALLOC, and a CUDA refusal of the allocation (cuda's and async's other
 * failures). Each row: the budget's status, retry_on, the calls expected. */
static const struct { const char *status, *retry_on; crmm_status failure; int calls; } retried[] = {
    {"bad_alloc", "", CRMM_ERROR_BAD_ALLOC, 0},
    {"bad_alloc", "retry_on=bad_alloc", CRMM_ERROR_BAD_ALLOC, 1},
    {"cuda", "", CRMM_ERROR_CUDA, 0},
    {"cuda", "retry_on=bad_alloc", CRMM_ERROR_CUDA, 1},
};

CRMM_LOOP_TEST_IN("failure_callback", which_failures_call_the_callback, (int)(sizeof retried / sizeof retried[0]))
{
    char params[64];
    snprintf(params, sizeof params, "limit=1KiB status=%s", retried[_i].status);
    crmm_resource *b, *fc;
    ck_assert_crmm_ok(crmm_resource_create("budget", params, NULL, &b));
    ck_assert_crmm_ok(crmm_resource_create("failure_callback", retried[_i].retry_on, b, &fc));
    counter k = {0, 0};
    ck_assert_crmm_ok(crmm_failure_callback_set(fc, retry_n_times, &k));
    void *p;
    ck_assert_crmm(crmm_resource_allocate(fc, 4096, NULL, &p), retried[_i].failure);
    ck_assert_int_eq(k.calls, retried[_i].calls);
    crmm_test_release(fc, b);
}

CRMM_TEST_IN("failure_callback", bad_calls)
{
    crmm_resource *h, *fc = NULL;
    ck_assert_crmm_ok(crmm_resource_create("host", "", NULL, &h));
    ck_assert_crmm(crmm_failure_callback_set(NULL, retry_n_times, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_failure_callback_set(h, retry_n_times, NULL), CRMM_ERROR_NOT_FOUND);
    ck_assert_msg(strstr(crmm_last_error(), "host"), "message: %s", crmm_last_error());
    ck_assert_crmm(crmm_resource_create("failure_callback", "retry_on=everything", h, &fc), CRMM_ERROR_CONFIG);
    ck_assert_ptr_null(fc);
    ck_assert_crmm_ok(crmm_resource_create("failure_callback", "", h, &fc));
    ck_assert_crmm(crmm_resource_control(fc, 2, NULL), CRMM_ERROR_UNSUPPORTED);
    ck_assert_crmm(crmm_resource_control(fc, CRMM_FAILURE_CALLBACK_OP_SET, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_str_eq(crmm_resource_kind(fc), "failure_callback");
    ck_assert(crmm_resource_is_host_accessible(fc));
    crmm_test_release(fc, h);
}

/* fork() for a child that must end within `seconds`: SIGALRM kills it then (its default action,
 * not the runner's handler, which would end the whole test). */
static pid_t fork_bounded(unsigned seconds)
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGALRM, SIG_DFL);
        alarm(seconds);
    }
    return pid;
}

/* A set returns only once no other thread still runs the callback it replaced, so the caller
 * may free its argument then: a callback blocked in another thread holds the set back until it
 * returns. (A set that returned early would be seen within the 50 ms given; one that waits can
 * never fail this test.) */
typedef struct gate {
    atomic_int entered, release, set_returned;
    crmm_resource *fc;
} gate;

static bool wait_at_the_gate(size_t bytes, void *arg)
{
    (void)bytes;
    gate *g = arg;
    atomic_store(&g->entered, 1);
    while (!atomic_load(&g->release))
        usleep(1000);
    return false;
}

static void *allocate_through(void *arg)
{
    gate *g = arg;
    void *p = NULL;
    return (void *)(intptr_t)crmm_resource_allocate(g->fc, 4096, NULL, &p);
}

static void *remove_the_callback(void *arg)
{
    gate *g = arg;
    crmm_status st = crmm_failure_callback_set(g->fc, NULL, NULL);
    atomic_store(&g->set_returned, 1);
    return (void *)(intptr_t)st;
}

CRMM_TEST_IN("failure_callback", a_set_waits_for_the_calls_of_the_callback_it_replaces)
{
    crmm_resource *b;
    gate g = {0};
    make("1KiB", "", &b, &g.fc);
    ck_assert_crmm_ok(crmm_failure_callback_set(g.fc, wait_at_the_gate, &g));
    pthread_t caller, setter_thread;
    ck_assert_int_eq(pthread_create(&caller, NULL, allocate_through, &g), 0);
    while (!atomic_load(&g.entered))
        usleep(1000);
    ck_assert_int_eq(pthread_create(&setter_thread, NULL, remove_the_callback, &g), 0);
    usleep(50 * 1000);
    ck_assert_msg(!atomic_load(&g.set_returned), "the set returned while the old callback still ran");
    atomic_store(&g.release, 1);
    void *st;
    ck_assert_int_eq(pthread_join(setter_thread, &st), 0);
    ck_assert_int_eq((int)(intptr_t)st, CRMM_OK);
    ck_assert_int_eq(pthread_join(caller, &st), 0);
    ck_assert_int_eq((int)(intptr_t)st, CRMM_ERROR_OUT_OF_MEMORY);
    crmm_test_release(g.fc, b);
}

/* A child forked while another thread runs the callback: that thread does not exist in the child,
 * so the child's sets do not wait for it (each returns at once). */
static void *remove_twice(void *arg)
{
    gate *g = arg;
    crmm_failure_callback_set(g->fc, NULL, NULL);
    crmm_failure_callback_set(g->fc, NULL, NULL);
    return NULL;
}

CRMM_TEST_IN("failure_callback", a_forked_childs_set_does_not_wait_for_the_parents_calls)
{
    crmm_resource *b;
    gate g = {0};
    make("1KiB", "", &b, &g.fc);
    ck_assert_crmm_ok(crmm_failure_callback_set(g.fc, wait_at_the_gate, &g));
    pthread_t caller;
    ck_assert_int_eq(pthread_create(&caller, NULL, allocate_through, &g), 0);
    while (!atomic_load(&g.entered))
        usleep(1000);
    pid_t pid = fork_bounded(5);
    if (pid == 0) {
        remove_twice(&g);
        _exit(0);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    atomic_store(&g.release, 1);
    void *st;
    ck_assert_int_eq(pthread_join(caller, &st), 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child %s %d",
                  WIFSIGNALED(status) ? "was killed by signal" : "exited with", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    crmm_test_release(g.fc, b);
}

/* A callback that sets the callback of its own resource: the set cannot wait for the call it is
 * made from, and returns at once (no hang); the next failure calls the new one. */
static bool replace_myself(size_t bytes, void *arg);

static bool count_calls(size_t bytes, void *arg)
{
    (void)bytes;
    ++((counter *)arg)->calls;
    return false;
}

typedef struct replacer { crmm_resource *fc; counter *next; int calls; } replacer;

static bool replace_myself(size_t bytes, void *arg)
{
    (void)bytes;
    replacer *r = arg;
    r->calls++;
    return crmm_failure_callback_set(r->fc, count_calls, r->next) != CRMM_OK; /* no: give up */
}

CRMM_TEST_IN("failure_callback", a_callback_may_replace_itself)
{
    crmm_resource *b, *fc;
    make("1KiB", "", &b, &fc);
    counter next = {0, 0};
    replacer r = {fc, &next, 0};
    ck_assert_crmm_ok(crmm_failure_callback_set(fc, replace_myself, &r));
    void *p = NULL;
    ck_assert_crmm(crmm_resource_allocate(fc, 4096, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(r.calls, 1);
    ck_assert_crmm(crmm_resource_allocate(fc, 4096, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(next.calls, 1);
    ck_assert_int_eq(r.calls, 1);
    crmm_test_release(fc, b);
}

/* Threads that set the callback while the process forks: the child's out-of-memory failure
 * still reaches the callback (the lock it takes was not left held by a thread the child lacks).
 * A child that hangs there is ended by its alarm. */
typedef struct setter { pthread_t thread; crmm_resource *fc; atomic_int *stop; } setter;

static counter fork_child_counter = {0, 0}; /* no retry: the child's failure comes back at once */

static void *set_until_stopped(void *arg)
{
    setter *s = arg;
    while (!atomic_load(s->stop))
        crmm_failure_callback_set(s->fc, retry_n_times, &fork_child_counter);
    return NULL;
}

CRMM_TEST_IN("failure_callback", a_child_forked_while_threads_set_the_callback_can_fail_over)
{
    enum { SETTERS = 2, FORKS = 200 };
    crmm_resource *b, *fc;
    make("1KiB", "", &b, &fc);
    ck_assert_crmm_ok(crmm_failure_callback_set(fc, retry_n_times, &fork_child_counter));
    atomic_int stop = 0;
    setter t[SETTERS];
    for (int i = 0; i < SETTERS; i++) {
        t[i] = (setter){.fc = fc, .stop = &stop};
        ck_assert_int_eq(pthread_create(&t[i].thread, NULL, set_until_stopped, &t[i]), 0);
    }
    int status = 0, k;
    for (k = 0; k < FORKS; k++) {
        pid_t pid = fork_bounded(2);
        if (pid == 0) {
            void *p = NULL;
            crmm_status st = crmm_resource_allocate(fc, 4096, NULL, &p);
            _exit(st == CRMM_ERROR_OUT_OF_MEMORY && fork_child_counter.calls == 1 ? 0 : 1);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            break;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < SETTERS; i++)
        ck_assert_int_eq(pthread_join(t[i].thread, NULL), 0);
    ck_assert_msg(k == FORKS, "child %d: %s %d", k, WIFSIGNALED(status) ? "killed by signal" : "exit status",
                  WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    crmm_test_release(fc, b);
}

int main(void)
{
    Suite *s = suite_create("failure_callback");
    crmm_conformance_add(s, chains, (int)(sizeof chains / sizeof chains[0]));
    crmm_test_tcase(s, "failure_callback", 0);
    return crmm_test_run(s);
}
