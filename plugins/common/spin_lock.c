/* spin_lock.c — the waiting half of the plugins' spin lock (spin_lock.h has the fast half).
 *
 * Spin on a plain load (no cache-line ping-pong while the holder works) with the processor's
 * pause hint; after a few hundred spins yield the processor, so that a holder doing a slow call
 * is not starved of a core by its waiters. */
#include "build_config.h"
#include <sched.h>
#include "spin_lock.h"

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void spin_lock_contended(int *lock)
{
    unsigned spins = 0;
    for (;;) {
        while (__atomic_load_n(lock, __ATOMIC_RELAXED)) {
            if (++spins < 256)
                cpu_relax();
            else
                sched_yield();
        }
        if (!__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE))
            return;
    }
}

static void take(void *lock) { spin_lock(lock); }
static void release(void *lock) { spin_unlock(lock); }

void spin_lock_add_fork_guard(int *lock, crmm_fork_guard *g)
{
    *g = (crmm_fork_guard){.prepare = take, .parent = release, .child = release, .arg = lock};
    crmm_fork_guard_add(g);
}
