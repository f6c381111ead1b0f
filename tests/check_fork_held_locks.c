/* check_fork_held_locks.c — locks that a forked child finds free although another thread of its
 * parent held them at the fork (they are made anew in the child): the logging switch's
 * (crmm/logging_switch.h), against a scripted CUDA (defined here, linked -export-dynamic) whose
 * cudaGetDeviceCount holds a thread inside crmm_enable_logging until the test lets it go; and
 * the lock of the graph records that plugins/common/graph_hold.c keeps for the plugins built
 * with it; and a graph_park's lock (plugins/common/graph_park.c, which fixed_size guards), taken
 * before the fork (both compiled into this program). */
#include "build_config.h"
#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "test_support.h"
#include "../plugins/common/graph_hold.h"
#include "../plugins/common/graph_park.h"

/* The thread that holds a lock says so in `holding`, and keeps it until `let_go` is set. */
static int holding, let_go;

static void hold_until_let_go(void)
{
    __atomic_store_n(&holding, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&let_go, __ATOMIC_SEQ_CST))
        usleep(1000);
}

/* Start `hold` on a thread, and once it holds its lock fork a child that exits with child()'s
 * status; the child is given 10 s. Then the thread lets go and is joined. Asserts that the child
 * ended by itself with status 0 (a child stuck on the lock is killed). */
static void fork_while_held(void *(*hold)(void *), int (*child)(void), const char *lock)
{
    holding = let_go = 0;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, hold, NULL), 0);
    while (!__atomic_load_n(&holding, __ATOMIC_SEQ_CST))
        sched_yield();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(child());
    int status;
    bool ended = crmm_test_wait_child(pid, 10, &status);
    __atomic_store_n(&let_go, 1, __ATOMIC_SEQ_CST);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_msg(ended, "the child was still waiting for %s after 10 s", lock);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %d", status);
}

/* The scripted CUDA: a thread that asks for the device count holds there (inside the switch's
 * lock, in crmm_enable_logging) until let go; then there is no device. */
cudaError_t cudaGetDeviceCount(int *count)
{
    hold_until_let_go();
    *count = 0;
    return cudaErrorNoDevice;
}
cudaError_t cudaGetLastError(void) { return cudaSuccess; }

static void *enable(void *arg)
{
    (void)arg;
    crmm_enable_logging("never-written.csv"); /* fails: the scripted CUDA has no device */
    return NULL;
}

static int use_the_switch(void)
{
    int count = -1;
    bool ok = crmm_get_log_filenames(NULL, 0, &count) == CRMM_OK && count == 0;
    ok = ok && crmm_disable_logging() == CRMM_OK;
    return ok ? 0 : 1;
}

CRMM_TEST(a_child_forked_during_enable_logging_can_use_the_switch)
{
    fork_while_held(enable, use_the_switch, "the switch's lock");
    int count = -1;
    ck_assert_crmm_ok(crmm_get_log_filenames(NULL, 0, &count)); /* the parent's lock was let go */
    ck_assert_int_eq(count, 0);
}

static void *hold_graph_records(void *arg)
{
    (void)arg;
    graph_holds_lock();
    hold_until_let_go();
    graph_holds_unlock();
    return NULL;
}

static int take_graph_records(void) /* what an arena's or fixed_size's destroy does first */
{
    graph_holds_lock();
    graph_holds_unlock();
    return 0;
}

CRMM_TEST(a_child_forked_while_a_thread_holds_the_graph_records_can_take_them)
{
    fork_while_held(hold_graph_records, take_graph_records, "the graph records' lock");
}

/* A graph_park whose lock a thread holds when the test forks. The park's guard takes the lock
 * before the fork, so the fork waits for that thread: a guard of the test's own, newer than the
 * park's and so run before it, lets the thread go. Without the park's guard the child would get
 * the lock held by a thread it does not have. */
static graph_park park;
static crmm_fork_guard let_go_guard;
static int forked; /* the parent is past the fork: the holder may end (a thread that ended before
                    * the fork, unjoined, is a leak to ThreadSanitizer in the child) */

static void let_the_holder_go(void *arg)
{
    (void)arg;
    __atomic_store_n(&let_go, 1, __ATOMIC_SEQ_CST);
}
static void fork_done(void *arg)
{
    (void)arg;
    __atomic_store_n(&forked, 1, __ATOMIC_SEQ_CST);
}
static void nothing_after(void *arg) { (void)arg; }

static void *hold_the_park(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&park.lock);
    hold_until_let_go();
    usleep(20 * 1000); /* still holding when the fork reaches the park's guard, most likely */
    pthread_mutex_unlock(&park.lock);
    while (!__atomic_load_n(&forked, __ATOMIC_SEQ_CST))
        usleep(1000);
    return NULL;
}

static int use_the_park(void) { return graph_park_bytes(&park) == 0 ? 0 : 1; }

CRMM_TEST(a_child_forked_while_a_thread_holds_a_graph_park_can_use_it)
{
    graph_park_init(&park);
    graph_park_add_fork_guard(&park);
    forked = 0;
    let_go_guard = (crmm_fork_guard){.prepare = let_the_holder_go, .parent = fork_done, .child = nothing_after};
    crmm_fork_guard_add(&let_go_guard);
    fork_while_held(hold_the_park, use_the_park, "the graph park's lock");
    crmm_fork_guard_remove(&let_go_guard);
    graph_park_destroy(&park);
}

int main(void) { return crmm_test_main("fork_held_locks", 60); }
