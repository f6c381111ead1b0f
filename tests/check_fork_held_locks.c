/* check_fork_held_locks.c — locks that a forked child finds free although another thread of its
 * parent held them at the fork (they are made anew in the child): the logging switch's
 * (crmm/logging_switch.h), against a scripted CUDA (defined here, linked -export-dynamic) whose
 * cudaGetDeviceCount holds a thread inside crmm_enable_logging until the test lets it go; and
 * the lock of the graph records that plugins/common/graph_hold.c keeps for the plugins built
 * with it (compiled into this program). */
#include "build_config.h"
#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "test_support.h"
#include "../plugins/common/graph_hold.h"

static int held = 1;    /* cudaGetDeviceCount waits while set */
static int entered;     /* a thread is inside cudaGetDeviceCount */

cudaError_t cudaGetDeviceCount(int *count)
{
    __atomic_store_n(&entered, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&held, __ATOMIC_SEQ_CST))
        usleep(1000);
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

CRMM_TEST(a_child_forked_during_enable_logging_can_use_the_switch)
{
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, enable, NULL), 0);
    while (!__atomic_load_n(&entered, __ATOMIC_SEQ_CST))
        sched_yield();
    pid_t pid = fork(); /* the thread holds the switch's lock now */
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int count = -1;
        bool ok = crmm_get_log_filenames(NULL, 0, &count) == CRMM_OK && count == 0;
        ok = ok && crmm_disable_logging() == CRMM_OK;
        _exit(ok ? 0 : 1);
    }
    int status;
    bool ended = crmm_test_wait_child(pid, 10, &status);
    __atomic_store_n(&held, 0, __ATOMIC_SEQ_CST);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_msg(ended, "the child was still waiting for the switch's lock after 10 s");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %d", status);
    int count = -1;
    ck_assert_crmm_ok(crmm_get_log_filenames(NULL, 0, &count)); /* the parent's lock was let go */
    ck_assert_int_eq(count, 0);
}

static int holding, let_go;

static void *hold_graph_records(void *arg)
{
    (void)arg;
    graph_holds_lock();
    __atomic_store_n(&holding, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&let_go, __ATOMIC_SEQ_CST))
        usleep(1000);
    graph_holds_unlock();
    return NULL;
}

CRMM_TEST(a_child_forked_while_a_thread_holds_the_graph_records_can_take_them)
{
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, hold_graph_records, NULL), 0);
    while (!__atomic_load_n(&holding, __ATOMIC_SEQ_CST))
        sched_yield();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) { /* what an arena's or fixed_size's destroy does first */
        graph_holds_lock();
        graph_holds_unlock();
        _exit(0);
    }
    int status;
    bool ended = crmm_test_wait_child(pid, 10, &status);
    __atomic_store_n(&let_go, 1, __ATOMIC_SEQ_CST);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_msg(ended, "the child was still waiting for the graph records' lock after 10 s");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %d", status);
}

int main(void) { return crmm_test_main("fork_held_locks", 60); }
