/* fork_guards.c — fork guards for an object with one lock (fork_guards.h). */
#include "build_config.h"
#include "fork_guards.h"

static void mutex_take(void *lock) { pthread_mutex_lock(lock); }
static void mutex_release(void *lock) { pthread_mutex_unlock(lock); }
static void rwlock_take(void *lock) { pthread_rwlock_wrlock(lock); }
static void rwlock_release(void *lock) { pthread_rwlock_unlock(lock); }
/* glibc tells a writer's unlock from a reader's by the thread id, which the child's thread does
 * not share with the parent's: the child makes the lock anew instead. */
static void rwlock_renew(void *lock) { pthread_rwlock_init(lock, NULL); }

static void add(crmm_fork_guard *g, void (*take)(void *), void (*release)(void *), void (*in_child)(void *), void *lock)
{
    *g = (crmm_fork_guard){.prepare = take, .parent = release, .child = in_child, .arg = lock};
    crmm_fork_guard_add(g);
}

void fork_guard_add_mutex(crmm_fork_guard *g, pthread_mutex_t *lock) { add(g, mutex_take, mutex_release, mutex_release, lock); }
void fork_guard_add_rwlock(crmm_fork_guard *g, pthread_rwlock_t *lock) { add(g, rwlock_take, rwlock_release, rwlock_renew, lock); }
