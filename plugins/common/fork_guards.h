/* fork_guards.h — ready-made fork guards (crmm/fork_guard.h) for an object with one lock: a
 * mutex or a read-write lock. Each fills `g` and adds it to crmm's list; the owner removes it
 * (crmm_fork_guard_remove) before it frees the lock. Before a fork the lock is taken (a
 * read-write lock for writing: no reader is inside); after it, released in the parent and in the
 * child (a read-write lock is made anew there). A spin lock (spin_lock.h) and a sharded pointer map (ptr_map.h) have their own. */
#ifndef CRMM_PLUGINS_FORK_GUARDS_H
#define CRMM_PLUGINS_FORK_GUARDS_H

#include <pthread.h>
#include <crmm/fork_guard.h>

void fork_guard_add_mutex(crmm_fork_guard *g, pthread_mutex_t *lock);
void fork_guard_add_rwlock(crmm_fork_guard *g, pthread_rwlock_t *lock);

#endif
