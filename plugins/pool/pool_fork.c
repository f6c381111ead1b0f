/* pool_fork.c — the pool's locks across fork() (crmm/fork_guard.h).
 *
 * Each pool adds a guard that takes its lock and then every cache's lock before a fork (the
 * order pool_thread_cache.h gives) and releases them after it, so that a child forked while other
 * threads allocate finds the pool and the caches it inherited unlocked and whole. The
 * process-wide mutex of the caches is not taken before a fork: it comes first in the caches'
 * order, yet a thread may wait for it while it holds another resource's lock (a pool's
 * allocation under an adaptor's lock may give up a cache slot), so no place in the guards' order
 * fits it. It guards only the hand-over of a cache between a thread and its pool, whose every
 * step that the child could see runs under the pool's lock; the child makes it anew. */
#include "build_config.h"
#include "pool_resource.h"

static void lock_for_fork(void *arg)
{
    pool_resource *p = arg;
    pool_lock(p);
    pool_cache_lock_all(p);
}

static void unlock_after_fork(void *arg)
{
    pool_resource *p = arg;
    pool_cache_unlock_all(p);
    pool_unlock(p);
}

static void cache_registry_in_child(void *arg)
{
    (void)arg;
    pool_cache_registry_reset();
}

static void noop(void *arg) { (void)arg; }

/* Added at the first pool's create, removed at unload. */
static crmm_fork_guard registry_guard = {.prepare = noop, .parent = noop, .child = cache_registry_in_child};
static pthread_once_t registry_guard_once = PTHREAD_ONCE_INIT;
static bool registry_guard_added;

static void add_registry_guard(void)
{
    crmm_fork_guard_add(&registry_guard);
    registry_guard_added = true;
}

static void pool_unload(void) __attribute__((destructor));
static void pool_unload(void)
{
    if (registry_guard_added)
        crmm_fork_guard_remove(&registry_guard);
}

void pool_fork_guard_add(pool_resource *p)
{
    pthread_once(&registry_guard_once, add_registry_guard);
    p->fork_guard = (crmm_fork_guard){.prepare = lock_for_fork, .parent = unlock_after_fork,
                                      .child = unlock_after_fork, .arg = p};
    crmm_fork_guard_add(&p->fork_guard);
}

void pool_fork_guard_remove(pool_resource *p) { crmm_fork_guard_remove(&p->fork_guard); }
