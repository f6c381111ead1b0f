/* spin_lock.h — a test-and-test-and-set spin lock for the plugins' short critical sections.
 *
 * Critical sections of tens of nanoseconds hand a spin lock over in about the time of a
 * cache-line transfer, where a mutex costs two locked instructions per pass even uncontended and
 * puts waiters to sleep in the kernel (microseconds per hand-over). A waiter spins on a plain
 * load with the processor's pause hint and yields the processor after a few hundred spins, so a
 * holder that makes a slow call (a CUDA synchronization, a write(2)) is not starved of a core.
 * The lock is an int: 0 free, 1 held; zero-initialised memory is an unlocked lock. */
#ifndef CRMM_PLUGINS_SPIN_LOCK_H
#define CRMM_PLUGINS_SPIN_LOCK_H

#include <crmm/fork_guard.h>

/* The waiting half of spin_lock (spin_lock.c). */
void spin_lock_contended(int *lock);

static inline void spin_lock(int *lock)
{
    if (__builtin_expect(!__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE), 1))
        return;
    spin_lock_contended(lock);
}

static inline void spin_unlock(int *lock) { __atomic_store_n(lock, 0, __ATOMIC_RELEASE); }

/* Fill g to take the lock before a fork and release it after (parent and child), and add it to
 * crmm's list (crmm/fork_guard.h); remove it before the lock's memory goes. */
void spin_lock_add_fork_guard(int *lock, crmm_fork_guard *g);

#endif
